"""Log compaction (`cleanup.policy=compact`) end to end: kafka-python writes keys several times
and tombstones, the node's cleaner rewrites the rolled segments, and confluent-kafka reads back
one record per key at its original offset; tombstones stay for `delete.retention.ms`."""

import os
import subprocess
import time

from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic

from conftest import RawConn, gregor_bin, wait_for
from test_data_plane import list_offset

KEYS = [f"k{i}".encode() for i in range(10)]


def read_from_start(node, topic):
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    try:
        consumer.assign([CTopicPartition(topic, 0, 0)])
        end = list_offset(RawConn(node.bootstrap), topic, 0, -1).offset
        out = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not out or out[-1][0] < end - 1):
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            out.append((message.offset(), message.key(), message.value()))
        return out
    finally:
        consumer.close()


def segments(node, topic):
    return sorted(f for f in os.listdir(os.path.join(node.data_dir, f"{topic}-0")) if f.endswith(".log"))


def create_compacted(node, topic, configs=None):
    """A one-partition compacted topic rolled every 100 ms and cleaned at any dirty ratio."""
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={
            "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
            **(configs or {})})])
    finally:
        admin.close()
    wait_for("the log", lambda: list_offset(RawConn(node.bootstrap), topic, 0, -1).error_code == 0)


def write_history(node, topic, delete_retention_ms):
    create_compacted(node, topic, {"delete.retention.ms": str(delete_retention_ms)})
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, linger_ms=0)
    try:
        for round_ in range(3):
            for key in KEYS:
                producer.send(topic, key=key, value=f"{key.decode()}-v{round_}".encode(), partition=0).get(timeout=30)
        producer.send(topic, key=b"k0", value=None, partition=0).get(timeout=30)
        # Rolled by segment.ms as writes go on, the history leaves the active segment, which
        # the cleaner never touches.
        filler = iter(range(10_000))

        def rolled():
            producer.send(topic, key=f"filler-{next(filler)}".encode(), value=b"f", partition=0).get(timeout=30)
            return len(segments(node, topic)) >= 3

        wait_for("rolled segments", rolled, timeout=30, interval=0.1)
    finally:
        producer.close()


def latest_per_key(records):
    return {key: (offset, value) for offset, key, value in records if key in KEYS}


def test_compaction_keeps_the_latest_record_per_key_and_tombstones(start_node):
    node = start_node({"log.cleaner.backoff.ms": "100"})
    write_history(node, "cp-keep", delete_retention_ms=3_600_000)
    before = read_from_start(node, "cp-keep")
    expected = latest_per_key(before)

    def cleaned():
        records = read_from_start(node, "cp-keep")
        history = [r for r in records if r[1] in KEYS]
        return records if len(history) == len(KEYS) else None

    after = wait_for("the cleaner to compact cp-keep", cleaned, timeout=60, interval=0.2)
    # One record per key, the latest, at the offset it was written at; k0's tombstone stays.
    assert latest_per_key(after) == expected
    assert expected[b"k0"][1] is None
    assert expected[b"k1"][1] == b"k1-v2"
    # Records of other keys are untouched.
    assert [r for r in after if r[1] not in KEYS] == [r for r in before if r[1] not in KEYS]
    metrics = node.metrics_text()
    assert "gregor_log_cleaner_passes_total" in metrics


def test_tombstones_go_after_delete_retention_ms(start_node):
    node = start_node({"log.cleaner.backoff.ms": "100"})
    write_history(node, "cp-drop", delete_retention_ms=0)
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, linger_ms=0)
    filler = iter(range(10_000))

    def tombstone_gone():
        # A later pass removes the tombstone; new dirty segments keep passes coming.
        producer.send("cp-drop", key=f"more-{next(filler)}".encode(), value=b"f", partition=0).get(timeout=30)
        records = read_from_start(node, "cp-drop")
        keys = [r[1] for r in records if r[1] in KEYS]
        return records if b"k0" not in keys and len(keys) == len(KEYS) - 1 else None

    try:
        after = wait_for("the tombstone to be removed", tombstone_gone, timeout=60, interval=0.2)
    finally:
        producer.close()
    assert latest_per_key(after)[b"k9"][1] == b"k9-v2"


def test_compaction_merges_the_segments_it_cleans(start_node):
    """One key written across 30 segments (rolled by segment.ms) compacts into a few segments
    holding its latest value, as Kafka's cleaner groups segments up to segment.bytes; before,
    every rolled segment stayed, empty, with its index files and open descriptors."""
    node = start_node({"log.cleaner.backoff.ms": "100"})
    topic = "cp-merge"
    create_compacted(node, topic)
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, linger_ms=0)
    try:
        for i in range(30):
            producer.send(topic, key=b"k", value=b"v%d" % i, partition=0).get(timeout=30)
            # Paced past segment.ms: each write after the first rolls a segment.
            time.sleep(0.11)
    finally:
        producer.close()
    wait_for("the cleaned segments merged", lambda: len(segments(node, topic)) <= 3, timeout=60, interval=0.2)
    # The latest value of the cleaned segments stays until the active segment rolls in turn.
    expected = [(28, b"k", b"v28"), (29, b"k", b"v29")]
    wait_for("the latest two values left", lambda: read_from_start(node, topic) == expected, timeout=60, interval=0.2)


def test_batches_emptied_by_compaction_stay_readable_by_librdkafka(start_node):
    """A batch the cleaner empties but keeps (here an idempotent producer's last, superseded by
    another producer's records) is a bare uncompressed header with the batch's max timestamp,
    as Kafka's `writeEmptyHeader`: written as an empty lz4 frame, it made librdkafka's consumer
    abort (rd_slice_init_full assertion) on the first read of the topic from its start."""
    node = start_node({"log.cleaner.backoff.ms": "100"})
    topic = "cp-emptied-lz4"
    create_compacted(node, topic)
    partition_dir = os.path.join(node.data_dir, f"{topic}-0")

    def write(producer, numbers):
        for i in numbers:
            # Compressible, so librdkafka sends it lz4-compressed.
            producer.produce(topic, key=b"k", value=b"v%d-" % i + b"x" * 1000, partition=0)
            assert producer.flush(30) == 0
            # Paced past segment.ms: each write after the first rolls a segment.
            time.sleep(0.11)

    write(Producer({"bootstrap.servers": node.bootstrap, "compression.codec": "lz4", "linger.ms": 0,
                    "enable.idempotence": True}), range(3))
    write(Producer({"bootstrap.servers": node.bootstrap, "compression.codec": "lz4", "linger.ms": 0}),
          range(3, 10))

    def emptied_batches():
        files = ",".join(os.path.join(partition_dir, s) for s in segments(node, topic))
        dumped = subprocess.run([str(gregor_bin()), "dump-log", "--files", files],
                                capture_output=True, text=True, timeout=60)
        assert dumped.returncode == 0, dumped.stderr
        assert "compresscodec: lz4" in dumped.stdout, dumped.stdout
        return [line for line in dumped.stdout.splitlines() if " count: 0 " in line]

    emptied = wait_for("the idempotent producer's last batch emptied", emptied_batches, timeout=60, interval=0.2)
    assert all("compresscodec: none" in line and " size: 61 " in line for line in emptied), emptied
    records = read_from_start(node, topic)
    assert records and records[-1][2].startswith(b"v9-"), records
