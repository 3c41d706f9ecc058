"""The data plane end to end: Produce, Fetch, ListOffsets and InitProducerId with real clients.

Records go in with one client and come out with another (kafka-python, confluent-kafka, kcat),
compared field by field: offset, key, value, headers, timestamp. Raw requests (kafka-python's
message classes on a bare socket) check the error codes, acks=0 and the long poll. A kill -9
while producers write checks that every acknowledged record survives at its offset.

kafka-python in the test venv has no snappy/lz4/zstd libraries, so compressed batches are read
back with librdkafka (confluent-kafka and kcat).
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
from kafka.record.default_records import DefaultRecordBatchBuilder

from conftest import RawConn, gregor_bin, wait_for

KCAT = shutil.which("kcat")


def create(node, *topics):
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1) for name, partitions in topics])
    finally:
        admin.close()


def batch(records, compression=0, producer=(-1, -1, -1), transactional=False):
    """One record batch v2: records are (key, value, headers, timestamp); `producer` is
    (producer id, epoch, base sequence)."""
    producer_id, producer_epoch, base_sequence = producer
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=transactional,
        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
        batch_size=1 << 20,
    )
    for offset, (key, value, headers, timestamp) in enumerate(records):
        builder.append(offset, timestamp=timestamp, key=key, value=value, headers=headers)
    return bytes(builder.build())


def produce(conn, topic, partition, records_bytes, version=9, acks=-1, timeout_ms=10000,
            transactional_id=None):
    P = ProduceRequest[version]
    request = P(
        transactional_id=transactional_id, acks=acks, timeout_ms=timeout_ms,
        topic_data=[P.TopicProduceData(name=topic, partition_data=[
            P.TopicProduceData.PartitionProduceData(index=partition, records=records_bytes)])],
    )
    if acks == 0:
        conn.correlation_id += 1
        request.with_header(correlation_id=conn.correlation_id, client_id="pytest-raw")
        conn.send_bytes(bytes(request.encode(header=True, framed=True)))
        return None
    (topic_response,) = conn.send(request, ProduceResponse).responses
    (partition_response,) = topic_response.partition_responses
    return partition_response


def fetch(conn, topic, partition, offset, version=12, max_wait_ms=0, min_bytes=1, current_leader_epoch=-1,
          partition_max_bytes=1 << 20):
    F = FetchRequest[version]
    request = F(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
            partition=partition, current_leader_epoch=current_leader_epoch, fetch_offset=offset,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=partition_max_bytes)])],
        forgotten_topics_data=[], rack_id="",
    )
    response = conn.send(request, FetchResponse)
    (topic_response,) = response.responses
    (partition_response,) = topic_response.partitions
    return response, partition_response


def list_offset(conn, topic, partition, timestamp, version=7, current_leader_epoch=-1):
    L = ListOffsetsRequest[version]
    request = L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
        name=topic, partitions=[L.ListOffsetsTopic.ListOffsetsPartition(
            partition_index=partition, current_leader_epoch=current_leader_epoch, timestamp=timestamp)])])
    (topic_response,) = conn.send(request, ListOffsetsResponse).topics
    (partition_response,) = topic_response.partitions
    return partition_response


def confluent_read(node, topic, partition, count, start=0):
    """Reads `count` records from `start` with an assign-mode confluent consumer."""
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused",
                         "enable.auto.commit": False})
    try:
        consumer.assign([CTopicPartition(topic, partition, start)])
        out = []
        deadline = time.monotonic() + 30
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            out.append((message.offset(), message.key(), message.value(),
                        [(k, bytes(v)) for k, v in (message.headers() or [])],
                        message.timestamp()[1]))
        assert len(out) == count, f"read {len(out)} of {count} records"
        return out
    finally:
        consumer.close()


def kafka_python_read(node, topic, partition, count):
    consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id=None,
                             enable_auto_commit=False, consumer_timeout_ms=10000)
    try:
        consumer.assign([TopicPartition(topic, partition)])
        consumer.seek_to_beginning()
        out = []
        for message in consumer:
            out.append((message.offset, message.key, message.value,
                        [(k, bytes(v)) for k, v in message.headers], message.timestamp))
            if len(out) == count:
                break
        assert len(out) == count, f"read {len(out)} of {count} records"
        return out
    finally:
        consumer.close()


def test_kafka_python_idempotent_producer_to_confluent_and_kcat(node):
    create(node, ("dp-kp", 2))
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks="all")  # idempotent by default
    sent = []
    try:
        for i in range(20):
            key, value = f"key-{i}".encode(), bytes(range(i % 7)) + f"value-{i}".encode()
            headers = [("h1", b"\x00\x01"), ("trace", f"t{i}".encode())]
            timestamp = 1_700_000_000_000 + i
            meta = producer.send("dp-kp", key=key, value=value, headers=headers,
                                 partition=i % 2, timestamp_ms=timestamp).get(timeout=30)
            sent.append((meta.partition, meta.offset, key, value, headers, timestamp))
    finally:
        producer.close()
    for partition in (0, 1):
        want = [(o, k, v, h, t) for p, o, k, v, h, t in sent if p == partition]
        assert [w[0] for w in want] == list(range(10)), "offsets are assigned densely from 0"
        assert confluent_read(node, "dp-kp", partition, len(want)) == want
    if KCAT:
        out = subprocess.run([KCAT, "-b", node.bootstrap, "-C", "-t", "dp-kp", "-p", "1", "-o", "beginning",
                              "-e", "-J"], capture_output=True, text=True, timeout=30, check=True)
        got = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
        want = [(o, k.decode(), t) for p, o, k, v, h, t in sent if p == 1]
        assert [(m["offset"], m["key"], m["ts"]) for m in got] == want


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_confluent_producer_each_codec(node, codec):
    topic = f"dp-codec-{codec}"
    create(node, (topic, 1))
    producer = Producer({"bootstrap.servers": node.bootstrap, "compression.type": codec,
                         "linger.ms": 20, "enable.idempotence": True})
    acked = []
    for i in range(50):
        producer.produce(topic, key=f"k{i}".encode(), value=(codec * 40 + str(i)).encode(),
                         headers=[("codec", codec.encode())], timestamp=1_600_000_000_000 + i,
                         on_delivery=lambda err, msg: acked.append((err, msg.offset())))
    assert producer.flush(30) == 0
    assert [err for err, _ in acked] == [None] * 50
    assert sorted(offset for _, offset in acked) == list(range(50))
    got = confluent_read(node, topic, 0, 50)
    assert got == [(i, f"k{i}".encode(), (codec * 40 + str(i)).encode(), [("codec", codec.encode())],
                    1_600_000_000_000 + i) for i in range(50)]


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")
def test_kcat_produce_kafka_python_consume(node):
    create(node, ("dp-kcat", 1))
    lines = "".join(f"k{i}:value {i}\n" for i in range(10))
    subprocess.run([KCAT, "-b", node.bootstrap, "-P", "-t", "dp-kcat", "-p", "0", "-K:", "-H", "src=kcat"],
                   input=lines, text=True, timeout=30, check=True)
    got = kafka_python_read(node, "dp-kcat", 0, 10)
    assert [(o, k, v, h) for o, k, v, h, _ in got] == [
        (i, f"k{i}".encode(), f"value {i}".encode(), [("src", b"kcat")]) for i in range(10)]
    assert all(ts > 0 for *_, ts in got)
    # kcat reads back what it wrote, with the same offsets and timestamps.
    out = subprocess.run([KCAT, "-b", node.bootstrap, "-C", "-t", "dp-kcat", "-o", "beginning", "-e", "-J"],
                         capture_output=True, text=True, timeout=30, check=True)
    back = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [(m["offset"], m["key"], m["payload"], m["ts"]) for m in back] == [
        (o, k.decode(), v.decode(), ts) for o, k, v, _, ts in got]


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")
def test_dump_log_shows_what_was_produced(node):
    """`gregor dump-log` prints a partition's segment as kafka-dump-log.sh does."""
    create(node, ("dp-dump", 1))
    subprocess.run([KCAT, "-b", node.bootstrap, "-P", "-t", "dp-dump", "-p", "0", "-K:"],
                   input="a:first\nb:second\n", text=True, timeout=30, check=True)
    segment = os.path.join(node.data_dir, "dp-dump-0", "00000000000000000000.log")
    out = subprocess.run([gregor_bin(), "dump-log", "--files", segment, "--print-data-log"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == f"Dumping {segment}"
    assert lines[1] == "Log starting offset: 0"
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert batches and all("isvalid: true" in b and "magic: 2" in b for b in batches)
    records = [line for line in lines if line.startswith("| offset:")]
    assert [(r.split()[2], r.split("key: ")[1].split()[0], r.split("payload: ")[1]) for r in records] == [
        ("0", "a", "first"), ("1", "b", "second")]
    missing = subprocess.run([gregor_bin(), "dump-log", "--files", segment + ".absent"],
                             capture_output=True, text=True, timeout=30)
    assert missing.returncode == 1 and "cannot dump" in missing.stderr


def test_produce_errors(node, raw):
    create(node, ("dp-errors", 1))
    conn = raw()
    good = batch([(b"k", b"v", [], 1000)])
    assert produce(conn, "dp-missing-topic", 0, good).error_code == 3
    missing = produce(conn, "dp-errors", 7, good)
    assert (missing.error_code, missing.base_offset) == (3, -1)
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    assert produce(conn, "dp-errors", 0, bytes(corrupt)).error_code == 2  # CORRUPT_MESSAGE
    assert produce(conn, "dp-errors", 0, good, acks=2).error_code == 21  # INVALID_REQUIRED_ACKS
    # Nothing of the above was appended; the next good batch gets offset 0.
    ok = produce(conn, "dp-errors", 0, good)
    assert (ok.error_code, ok.base_offset, ok.log_start_offset) == (0, 0, 0)
    for version in (3, 7, 8, 9, 10, 11, 12):
        assert produce(raw(), "dp-errors", 0, good, version=version).error_code == 0, version


def with_records_section(batch_bytes, codec, section):
    """`batch_bytes` (one uncompressed batch) with codec `codec` and records section `section`:
    its length and CRC fixed, the other header fields kept."""
    import struct

    from kafka.record.util import calc_crc32c

    (attributes,) = struct.unpack_from(">h", batch_bytes, 21)
    after_crc = struct.pack(">h", attributes & ~7 | codec) + batch_bytes[23:61] + section
    return (batch_bytes[:8] + struct.pack(">i", 4 + 1 + 4 + len(after_crc)) + batch_bytes[12:17]
            + struct.pack(">I", calc_crc32c(after_crc)) + after_crc)


def lz4_frame(payload, independent_blocks=True):
    """An LZ4 frame holding `payload` as one uncompressed block, 64 KiB blocks, no checksums:
    FLG is 0x60 with independent blocks (as Kafka writes), 0x40 with dependent ones."""
    import struct

    flg = 0x60 if independent_blocks else 0x40
    header_checksum = {0x60: 0x82, 0x40: 0xC0}[flg]  # second byte of xxh32(FLG, BD)
    return (struct.pack("<IBBB", 0x184D2204, flg, 0x40, header_checksum)
            + struct.pack("<I", len(payload) | 1 << 31) + payload + struct.pack("<I", 0))


def test_an_lz4_frame_of_dependent_blocks_is_refused(node, raw):
    """Kafka's Lz4BlockInputStream refuses a frame whose FLG says dependent blocks (its blocks
    are decoded one by one), a KafkaException the produce answers UNKNOWN_SERVER_ERROR; the same
    records in a frame of independent blocks are appended."""
    create(node, ("dp-lz4-linked", 1))
    conn = raw()
    plain = batch([(b"k%d" % i, b"v" * 100, [], int(time.time() * 1000)) for i in range(3)])
    records = plain[61:]
    linked = produce(conn, "dp-lz4-linked", 0, with_records_section(plain, 3, lz4_frame(records, False)))
    assert (linked.error_code, linked.base_offset, linked.error_message) == (-1, -1, None)
    independent = produce(conn, "dp-lz4-linked", 0, with_records_section(plain, 3, lz4_frame(records)))
    assert (independent.error_code, independent.base_offset) == (0, 0)


def test_only_record_validation_failures_carry_an_error_message(node, raw):
    """Kafka's Produce answer has an error_message only for LogValidator's per-record failures
    (RecordValidationException, with record_errors: LogAppendResult.hasCustomErrorMessage),
    INVALID_TIMESTAMP ones included; a batch refused as a whole (InvalidRecordException) has
    none."""
    import struct

    from kafka.record.util import calc_crc32c

    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic("dp-messages", 1, 1),
                             NewTopic("dp-messages-compact", 1, 1, topic_configs={"cleanup.policy": "compact"})])
    finally:
        admin.close()
    conn = raw()
    now = int(time.time() * 1000)
    miscounted = bytearray(batch([(b"k", b"v", [], now), (b"k", b"v", [], now)]))
    miscounted[57:61] = struct.pack(">i", 3)  # record count 3, last offset delta 1
    miscounted[17:21] = struct.pack(">I", calc_crc32c(bytes(miscounted[21:])))
    whole = produce(conn, "dp-messages", 0, bytes(miscounted))
    assert (whole.error_code, whole.error_message, list(whole.record_errors)) == (87, None, [])

    keyless = produce(conn, "dp-messages-compact", 0, batch([(b"k", b"v", [], now), (None, b"v", [], now)]))
    record_error = "Compacted topic cannot accept message without key in topic partition dp-messages-compact-0"
    assert keyless.error_code == 87
    assert keyless.error_message == (
        "One or more records have been rejected due to 1 record errors in total, and only showing the first "
        f"three errors at most: [RecordError(batchIndex=1, message='{record_error}')]")
    assert [(e.batch_index, e.batch_index_error_message) for e in keyless.record_errors] == [(1, record_error)]

    future = produce(conn, "dp-messages", 0, batch([(b"k", b"v", [], now + 86_400_000)]))
    assert (future.error_code, future.error_message) == (
        32, "One or more records have been rejected due to invalid timestamp")
    assert [e.batch_index for e in future.record_errors] == [0]


def test_a_batch_rebuilt_in_the_producers_codec_takes_the_codecs_default_level(node, raw):
    """A gzip batch with inner offsets 0, 5, 2 is rebuilt by the broker. Under
    compression.type=producer, Kafka's BrokerCompressionType.targetCompression compresses it at
    gzip's default level whatever compression.gzip.level says; a topic of compression.type=gzip
    takes its level."""
    import random

    rng = random.Random(1)
    words = [bytes(rng.choice(b"abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9))) for _ in range(3000)]
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=1, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 22)
    for offset_delta in (0, 5, 2):
        value = b" ".join(rng.choice(words) for _ in range(20_000))
        builder.append(offset_delta, timestamp=int(time.time() * 1000), key=b"k", value=value, headers=[])
    unordered = bytes(builder.build())
    topics = {"dp-level-producer-1": {"compression.type": "producer", "compression.gzip.level": "1"},
              "dp-level-producer": {"compression.type": "producer"},
              "dp-level-gzip-1": {"compression.type": "gzip", "compression.gzip.level": "1"}}
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic(name, 1, 1, topic_configs=configs) for name, configs in topics.items()])
    finally:
        admin.close()
    conn = raw()
    stored = {}
    for topic in topics:
        assert produce(conn, topic, 0, unordered).error_code == 0
        _, partition = fetch(conn, topic, 0, 0, partition_max_bytes=1 << 22)
        stored[topic] = len(partition.records)
    assert stored["dp-level-producer-1"] == stored["dp-level-producer"], stored
    assert stored["dp-level-gzip-1"] > stored["dp-level-producer"], stored


def test_fetch_and_list_offsets(node, raw):
    create(node, ("dp-offsets", 1))
    conn = raw()
    records = [(f"k{i}".encode(), f"v{i}".encode(), [], ts) for i, ts in enumerate([1000, 3000, 2000])]
    assert produce(conn, "dp-offsets", 0, batch(records)).error_code == 0
    assert produce(conn, "dp-offsets", 0, batch([(b"k3", b"v3", [], 4000)])).error_code == 0

    def offset(ts, version=7):
        r = list_offset(conn, "dp-offsets", 0, ts, version)
        return r.error_code, r.offset, r.timestamp

    assert offset(-2) == (0, 0, -1)
    assert offset(-1) == (0, 4, -1)
    assert offset(2500) == (0, 1, 3000)
    assert offset(1000) == (0, 0, 1000)
    assert offset(-3) == (0, 3, 4000)
    assert offset(5000) == (0, -1, -1)
    assert offset(-3, version=6)[0] == 35  # MAX_TIMESTAMP needs v7

    response, partition = fetch(conn, "dp-offsets", 0, 10)
    assert (response.error_code, partition.error_code) == (0, 1)  # OFFSET_OUT_OF_RANGE
    assert partition.high_watermark == -1
    _, partition = fetch(conn, "dp-offsets", 0, 4)
    assert (partition.error_code, partition.high_watermark, partition.log_start_offset) == (0, 4, 0)
    assert not partition.records
    for version in (4, 7, 11, 12):
        response, partition = fetch(raw(), "dp-offsets", 0, 1, version=version)
        assert (partition.error_code, partition.high_watermark) == (0, 4), version
        assert partition.records, version
        if version >= 7:
            assert response.session_id == 0
    # An incremental fetch of a session this node never created.
    F = FetchRequest[12]
    stale = conn.send(F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1024, isolation_level=0,
                        session_id=1234, session_epoch=3, topics=[], forgotten_topics_data=[], rack_id=""),
                      FetchResponse)
    assert (stale.error_code, stale.session_id, list(stale.responses)) == (70, 0, [])


def test_a_zstd_topic_is_unsupported_compression_below_fetch_v10(node, raw):
    """Kafka's maybeConvertFetchedData answers a partition of a compression.type=zstd topic
    UNSUPPORTED_COMPRESSION_TYPE below Fetch v10 (FetchResponse.partitionResponse: no high
    watermark, offsets or records); the read before still counts as a fetch, not a failed one,
    and sends no bytes out. From v10 the records are returned."""
    topic = "dp-fetch-zstd"
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={"compression.type": "zstd"})])
    finally:
        admin.close()
    conn = raw()
    wait_for("the partition's leader",
             lambda: produce(conn, topic, 0, batch([(b"k", b"v" * 100, [], int(time.time() * 1000))])).error_code == 0)

    def fetched():
        counts = topic_counts(node.metrics_text(), topic)
        return counts["totalfetchrequests"], counts["failedfetchrequests"], counts["bytesout"]

    for version in range(4, 10):
        response, partition = fetch(raw(), topic, 0, 0, version=version)
        answer = (partition.error_code, partition.high_watermark, partition.last_stable_offset,
                  bytes(partition.records or b""))
        assert answer == (76, -1, -1, b""), version
        if version >= 5:
            assert partition.log_start_offset == -1
    assert fetched() == (6, 0, 0)
    for version in (10, 12):
        _, partition = fetch(raw(), topic, 0, 0, version=version)
        assert (partition.error_code, partition.high_watermark, partition.log_start_offset) == (0, 1, 0), version
        assert partition.records, version
    total, failed, bytes_out = fetched()
    assert (total, failed) == (8, 0) and bytes_out == 2 * len(partition.records)


def test_list_offsets_at_every_version(node, raw):
    """Every ListOffsets version the node advertises (1-10) answers each kind of query: the
    leader epoch only from v4 (older responses have no such field), and then the epoch Kafka
    gives: the partition's for LATEST, the first cached epoch's for EARLIEST, the batch's for a
    record found by timestamp."""
    topic = "dp-offsets-versions"
    create(node, (topic, 1))
    conn = raw()
    wait_for("the log", lambda: list_offset(conn, topic, 0, -1).error_code == 0)
    records = [(f"k{i}".encode(), b"v", [], ts) for i, ts in enumerate([1000, 3000, 2000])]
    assert produce(conn, topic, 0, batch(records)).error_code == 0
    cases = {  # query: (offset, timestamp, epoch at v4+, first version)
        -1: (3, -1, 0, 1), -2: (0, -1, 0, 1), 2500: (1, 3000, 0, 1), 5000: (-1, -1, -1, 1),
        -3: (1, 3000, 0, 7), -4: (0, -1, 0, 8), -5: (-1, -1, -1, 9),
    }
    for version in range(1, 11):
        for query, (offset, timestamp, epoch, since) in cases.items():
            got = list_offset(raw(), topic, 0, query, version)
            if version < since:
                assert got.error_code == 35, (version, query)  # UNSUPPORTED_VERSION
                continue
            want = (0, offset, timestamp) + ((epoch,) if version >= 4 else ())
            have = (got.error_code, got.offset, got.timestamp) + (
                (got.leader_epoch,) if version >= 4 else ())
            assert have == want, (version, query)


def test_list_offsets_refuses_every_copy_of_a_repeated_partition(node, raw):
    """Kafka's `ReplicaManager.fetchOffset` answers a partition named more than once
    INVALID_REQUEST, its first appearance included; the others are answered. Also for a request
    long enough to be looked up in chunks (2,000 partitions), the copies far apart."""
    topic = "dp-offsets-repeated"
    create(node, (topic, 2))
    conn = raw()
    for partition in (0, 1):
        wait_for("the log", lambda: list_offset(conn, topic, partition, -1).error_code == 0)
    L = ListOffsetsRequest[7]

    def ask(indexes):
        request = L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
            name=topic, partitions=[L.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=i, current_leader_epoch=-1, timestamp=ts) for i, ts in indexes])])
        (answer,) = conn.send(request, ListOffsetsResponse).topics
        return [(p.partition_index, p.error_code, p.offset) for p in answer.partitions]

    assert ask([(0, -1), (1, -1), (0, -2)]) == [(0, 42, -1), (1, 0, 0), (0, 42, -1)]
    # 2,000 partitions: partition 0 first and last, unknown partitions between.
    long = ask([(0, -1), (1, -1)] + [(i, -1) for i in range(100, 2097)] + [(0, -1)])
    assert len(long) == 2000
    assert long[0] == (0, 42, -1) and long[-1] == (0, 42, -1) and long[1] == (1, 0, 0)
    assert {code for _, code, _ in long[2:-1]} == {3}


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")
def test_kcat_reads_from_the_end_and_from_a_relative_offset(node):
    """`kcat -o end` and `-o -N` ask for the latest offset (ListOffsets v2 from kcat's
    librdkafka)."""
    topic = "dp-kcat-end"
    create(node, (topic, 1))
    subprocess.run([KCAT, "-b", node.bootstrap, "-P", "-t", topic, "-p", "0"],
                   input=b"".join(b"r%d\n" % i for i in range(5)), check=True, timeout=60)
    tail = subprocess.run([KCAT, "-b", node.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "-2",
                           "-e", "-f", "%o %s\n"], capture_output=True, check=True, timeout=60)
    assert tail.stdout.decode().split("\n")[:2] == ["3 r3", "4 r4"]
    end = subprocess.run([KCAT, "-b", node.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "end",
                          "-e", "-f", "%o %s\n"], capture_output=True, check=True, timeout=60)
    assert end.stdout == b""


def test_transactional_batches_without_a_transaction_are_refused(node, raw):
    """Gregor has no transaction coordinator: a batch with the transactional bit and no
    transactional id refuses the whole request (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), one
    with an id gets what Kafka answers when the transaction coordinator cannot verify it
    (the retriable NOT_ENOUGH_REPLICAS), and nothing is appended either way."""
    topic = "dp-txn-refused"
    create(node, (topic, 2))
    conn = raw()
    for partition in (0, 1):
        wait_for("the log", lambda: list_offset(conn, topic, partition, -1).error_code == 0)
    txn = batch([(b"k", b"txn", [], 1000)], producer=(4242, 0, 0), transactional=True)
    plain = batch([(b"k", b"plain", [], 1000)])
    P = ProduceRequest[9]

    def produce_both(transactional_id):
        request = P(transactional_id=transactional_id, acks=-1, timeout_ms=10000, topic_data=[
            P.TopicProduceData(name=topic, partition_data=[
                P.TopicProduceData.PartitionProduceData(index=0, records=txn),
                P.TopicProduceData.PartitionProduceData(index=1, records=plain)])])
        (topic_response,) = conn.send(request, ProduceResponse).responses
        return [(p.error_code, p.base_offset, p.error_message) for p in topic_response.partition_responses]

    assert produce_both(None) == [(53, -1, None), (53, -1, None)]
    unverified = ("Unable to verify the partition has been added to the transaction. "
                  "Underlying error: COORDINATOR_NOT_AVAILABLE")
    assert produce_both("some-txn") == [(19, -1, unverified), (0, 0, None)]
    assert produce(conn, topic, 0, txn, transactional_id="some-txn").error_code == 19
    # A transactional id beside plain records is not a transaction: they are appended.
    assert produce(conn, topic, 0, plain, transactional_id="some-txn").error_code == 0
    assert [list_offset(conn, topic, p, -1).offset for p in (0, 1)] == [1, 1]
    _, fetched = fetch(conn, topic, 0, 0)
    assert b"txn" not in bytes(fetched.records) and b"plain" in bytes(fetched.records)


def test_a_transactional_init_checks_its_timeout_before_the_missing_coordinator(start_node):
    """Kafka's transaction coordinator refuses a timeout outside 1..transaction.max.timeout.ms
    (INVALID_TRANSACTION_TIMEOUT, fatal) before it looks for the transaction's state; only then
    does Gregor, which has no coordinator, answer COORDINATOR_NOT_AVAILABLE."""
    node = start_node({"transaction.max.timeout.ms": "60000"})
    conn = RawConn(node.bootstrap)

    def init(timeout_ms, transactional_id="t-1"):
        request = InitProducerIdRequest[2](transactional_id=transactional_id, transaction_timeout_ms=timeout_ms)
        answer = conn.send(request, InitProducerIdResponse)
        return answer.error_code, answer.producer_id, answer.producer_epoch

    assert [init(t) for t in (0, -1, 60_001, 2**31 - 1)] == [(50, -1, -1)] * 4
    assert [init(t) for t in (1, 60_000)] == [(15, -1, -1)] * 2
    # An empty id is malformed whatever its timeout; no id is an idempotent producer.
    assert init(0, "") == (42, -1, -1)
    assert init(-1, None)[0] == 0

    # A producer naming only one of its id and epoch is malformed, with a transactional id or
    # not, before the timeout is looked at (Kafka's `handleInitProducerIdRequest`).
    def init_naming(producer_id, producer_epoch, transactional_id):
        request = InitProducerIdRequest[4](
            transactional_id=transactional_id,
            transaction_timeout_ms=0,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
        )
        return conn.send(request, InitProducerIdResponse).error_code

    assert [init_naming(-1, 5, "t-1"), init_naming(7, -1, "t-1")] == [42, 42]
    assert [init_naming(-1, 5, None), init_naming(7, -1, None)] == [42, 42]


def test_long_poll_is_woken_by_an_append(node, raw):
    create(node, ("dp-poll", 1))
    # The log is opened by the node right after the topic is created; until then a fetch gets the
    # retriable NOT_LEADER_OR_FOLLOWER, as from Kafka.
    wait_for("the log of dp-poll", lambda: list_offset(raw(), "dp-poll", 0, -1).error_code == 0)
    result = {}

    def poll():
        result["fetch"] = fetch(RawConn(node.bootstrap), "dp-poll", 0, 0, max_wait_ms=60000)

    waiter = threading.Thread(target=poll)
    waiter.start()
    # Whether the append lands before or while the fetch waits, the fetch must come back with
    # the record long before its 60 s wait is over.
    assert produce(raw(), "dp-poll", 0, batch([(b"k", b"woken", [], 5)])).error_code == 0
    waiter.join(timeout=30)
    assert not waiter.is_alive(), "the waiting fetch was not woken by the append"
    _, partition = result["fetch"]
    assert (partition.error_code, partition.high_watermark) == (0, 1)
    assert b"woken" in bytes(partition.records)


def test_acks_zero_sends_no_response(node, raw):
    create(node, ("dp-acks0", 1))
    conn = raw()
    produce(conn, "dp-acks0", 0, batch([(b"k", b"fire-and-forget", [], 7)]), acks=0)
    # The next response on the connection answers the next request: none came for the produce.
    metadata = conn.send(MetadataRequest[9](topics=None, allow_auto_topic_creation=False,
                                            include_topic_authorized_operations=False), MetadataResponse)
    assert any(t.name == "dp-acks0" for t in metadata.topics)
    wait_for("the acks=0 record", lambda: list_offset(raw(), "dp-acks0", 0, -1).offset == 1)
    # acks=0 with a partition error: Kafka closes the connection so the client refreshes.
    produce(conn, "dp-acks0", 9, batch([(b"k", b"v", [], 7)]), acks=0)
    with pytest.raises((ConnectionError, OSError)):
        conn.send(MetadataRequest[9](topics=None, allow_auto_topic_creation=False,
                                     include_topic_authorized_operations=False), MetadataResponse)


def test_kill9_keeps_every_acknowledged_record(start_node):
    node = start_node({"auto.create.topics.enable": "false"})
    create(node, ("dp-crash", 2))
    acked = {}  # acks setting -> [(partition, offset, value)]
    lock = threading.Lock()
    stop = threading.Event()

    def write(acks):
        producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks=acks, enable_idempotence=False,
                                 retries=0, max_block_ms=2000, request_timeout_ms=3000)
        i = 0
        while not stop.is_set():
            value = f"{acks}-{i}".encode()
            try:
                meta = producer.send("dp-crash", value=value, partition=i % 2).get(timeout=5)
            except Exception:  # noqa: BLE001 - the node is gone: stop writing
                break
            with lock:
                acked.setdefault(acks, []).append((meta.partition, meta.offset, value))
            i += 1
        producer.close(timeout=1)

    writers = [threading.Thread(target=write, args=(acks,)) for acks in (1, "all")]
    for w in writers:
        w.start()
    wait_for("both producers acknowledged records",
             lambda: all(len(acked.get(a, [])) >= 100 for a in (1, "all")), timeout=60)
    node.kill9()
    stop.set()
    for w in writers:
        w.join(timeout=30)
    node.start()
    with lock:
        expected = [r for records in acked.values() for r in records]
    for partition in (0, 1):
        mine = {offset: value for p, offset, value in expected if p == partition}
        last = max(mine)
        got = {offset: value for offset, _, value, _, _ in confluent_read(node, "dp-crash", partition, last + 1)}
        for offset, value in mine.items():
            assert got.get(offset) == value, f"partition {partition} offset {offset}"


def test_produce_and_fetch_byte_rate_quotas(start_node):
    from kafka.protocol.admin import AlterClientQuotasRequest, AlterClientQuotasResponse

    node = start_node({"auto.create.topics.enable": "false"})
    create(node, ("dp-quota", 1))
    conn = RawConn(node.bootstrap)
    Entry = AlterClientQuotasRequest.EntryData
    ops = [Entry.OpData(key=k, value=100.0, remove=False) for k in ("producer_byte_rate", "consumer_byte_rate")]
    resp = conn.send(AlterClientQuotasRequest[1](
        entries=[Entry(entity=[Entry.EntityData(entity_type="client-id", entity_name="pytest-raw")], ops=ops)],
        validate_only=False), AlterClientQuotasResponse)
    assert [e.error_code for e in resp.entries] == [0]
    big = batch([(b"k", bytes(4000), [], 1)])
    P = ProduceRequest[9]
    produced = RawConn(node.bootstrap).send(P(
        transactional_id=None, acks=1, timeout_ms=10000,
        topic_data=[P.TopicProduceData(name="dp-quota", partition_data=[
            P.TopicProduceData.PartitionProduceData(index=0, records=big)])]), ProduceResponse)
    # Throttled after the append: the record is in, the response carries the throttle time.
    (partition,) = produced.responses[0].partition_responses
    assert (partition.error_code, partition.base_offset) == (0, 0)
    assert produced.throttle_time_ms > 0
    F = FetchRequest[12]
    fetched = RawConn(node.bootstrap).send(F(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
        session_epoch=-1, topics=[F.FetchTopic(topic="dp-quota", partitions=[F.FetchTopic.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1, log_start_offset=-1,
            partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id=""), FetchResponse)
    # Over the fetch quota: an empty answer with the throttle time.
    assert fetched.throttle_time_ms > 0
    assert (fetched.error_code, list(fetched.responses)) == (0, [])


def test_a_fetch_quota_caps_the_read_and_takes_back_throttled_bytes(start_node):
    from kafka.protocol.admin import AlterClientQuotasRequest, AlterClientQuotasResponse

    node = start_node({"auto.create.topics.enable": "false"})
    create(node, ("dp-fetch-quota", 1))
    conn = RawConn(node.bootstrap)
    wait_for("the log", lambda: list_offset(conn, "dp-fetch-quota", 0, -1).error_code == 0)
    # 100 batches of about 4 KiB.
    now_ms = int(time.time() * 1000)
    for i in range(100):
        records = batch([(b"k", bytes([i]) * 1000, [], now_ms) for _ in range(4)])
        assert produce(conn, "dp-fetch-quota", 0, records).error_code == 0
    Entry = AlterClientQuotasRequest.EntryData
    resp = conn.send(AlterClientQuotasRequest[1](
        entries=[Entry(entity=[Entry.EntityData(entity_type="client-id", entity_name="pytest-raw")],
                       ops=[Entry.OpData(key="consumer_byte_rate", value=20000.0, remove=False)])],
        validate_only=False), AlterClientQuotasResponse)
    assert [e.error_code for e in resp.entries] == [0]

    # Kafka's getMaxValueInQuotaWindow: 20,000 B/s x 10 windows of 1 s caps the read, so the
    # first fetch gets part of the 400 KB, within its quota (uncapped it got all, was over
    # its quota, and every later fetch of a consumer asking for 1 MiB was answered empty).
    response, partition = fetch(conn, "dp-fetch-quota", 0, 0)
    assert response.throttle_time_ms == 0
    assert partition.error_code == 0
    assert 100_000 < len(partition.records) <= 200_000
    # The next fetch is over the quota: empty, with the throttle time; its bytes are taken
    # back (unrecordQuotaSensor), so the same fetch on another connection of the same client
    # is throttled as long, not twice as long.
    throttles = []
    for connection in (conn, RawConn(node.bootstrap)):
        response = connection.send(FetchRequest[12](
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, topics=[FetchRequest[12].FetchTopic(
                topic="dp-fetch-quota", partitions=[FetchRequest[12].FetchTopic.FetchPartition(
                    partition=0, current_leader_epoch=-1, fetch_offset=200, last_fetched_epoch=-1,
                    log_start_offset=-1, partition_max_bytes=1 << 20)])],
            forgotten_topics_data=[], rack_id=""), FetchResponse)
        assert list(response.responses) == []
        throttles.append(response.throttle_time_ms)
    assert throttles[0] > 5_000, throttles
    assert abs(throttles[1] - throttles[0]) < throttles[0] * 0.2, throttles
    # Kafka's `fetchMessages` counts a throttled fetch's partition before the quota empties
    # its answer, which sends no bytes out.
    counts = topic_counts(node.metrics_text(), "dp-fetch-quota")
    assert (counts["totalfetchrequests"], counts["bytesout"]) == (3, len(partition.records))


def test_deleted_topic_log_is_removed_and_produce_refused(start_node):
    import os

    node = start_node({"auto.create.topics.enable": "false"})
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic("dp-deleted", 1, 1, topic_configs={"file.delete.delay.ms": "0"})])
        conn = RawConn(node.bootstrap)
        assert produce(conn, "dp-deleted", 0, batch([(b"k", b"v", [], 1)])).error_code == 0
        assert os.path.isdir(os.path.join(node.data_dir, "dp-deleted-0"))
        admin.delete_topics(["dp-deleted"])
    finally:
        admin.close()
    assert produce(conn, "dp-deleted", 0, batch([(b"k", b"v", [], 1)])).error_code == 3
    # Renamed `dp-deleted-0.<uuid>-delete` at once, removed after file.delete.delay.ms.
    wait_for("the deleted log to be removed",
             lambda: not any(n.startswith("dp-deleted-0") for n in os.listdir(node.data_dir)))
    # Re-created under the same name: a new, empty log.
    create(node, ("dp-deleted", 1))
    wait_for("the new log", lambda: list_offset(RawConn(node.bootstrap), "dp-deleted", 0, -1).error_code == 0)
    assert list_offset(RawConn(node.bootstrap), "dp-deleted", 0, -1).offset == 0


def test_broker_topic_metrics(node, raw):
    create(node, ("dp-metrics", 1))
    conn = raw()
    records = batch([(b"k", b"v" * 10, [], 1), (b"k", b"w", [], 2), (b"k", b"x", [], 3)])
    assert produce(conn, "dp-metrics", 0, records).error_code == 0
    wait_for("the log", lambda: list_offset(raw(), "dp-metrics", 0, -1).error_code == 0)
    _, partition = fetch(conn, "dp-metrics", 0, 0)
    assert partition.error_code == 0

    def value(name):
        for line in node.metrics_text().splitlines():
            if line.startswith(f'{name}{{topic="dp-metrics"}} '):
                return float(line.split()[-1])
        return None

    assert value("kafka_server_brokertopicmetrics_messagesin_total") == 3
    assert value("kafka_server_brokertopicmetrics_bytesin_total") == len(records)
    assert value("kafka_server_brokertopicmetrics_totalproducerequests_total") == 1
    assert value("kafka_server_brokertopicmetrics_bytesout_total") == len(records)
    assert value("kafka_server_brokertopicmetrics_totalfetchrequests_total") == 1
    assert "kafka_server_brokertopicmetrics_messagesin_total " in node.metrics_text()


BROKER_TOPIC_FAMILIES = [f"kafka_server_brokertopicmetrics_{name}_total" for name in (
    "messagesin", "bytesin", "bytesout", "bytesrejected", "totalproducerequests", "failedproducerequests",
    "totalfetchrequests", "failedfetchrequests")]


def topic_series(text, topic=None):
    """The broker topic metrics of `topic` (the totals for None) present in a scrape, by name
    without the `kafka_server_brokertopicmetrics_` prefix and `_total` suffix."""
    suffix = f'{{topic="{topic}"}} ' if topic is not None else " "
    found = {}
    for line in text.splitlines():
        for name in BROKER_TOPIC_FAMILIES:
            if line.startswith(name + suffix):
                found[name] = float(line.split()[-1])
    return found


def topic_counts(text, topic=None):
    """`topic_series` with 0 for a family without its series, by short name."""
    found = topic_series(text, topic)
    return {name[len("kafka_server_brokertopicmetrics_"):-len("_total")]: found.get(name, 0)
            for name in BROKER_TOPIC_FAMILIES}


def test_broker_topic_metrics_go_with_their_deleted_topic(node, raw):
    """As Kafka's ReplicaManager removes a topic's BrokerTopicMetrics with its last partition:
    the series leave the scrape, the totals stay, and a re-created topic counts from 0."""
    topic = "dp-metrics-deleted"
    label = f'{{topic="{topic}"}} '

    def counts(text, totals=False):
        """The topic's values (or the totals), 0 for a family without its series."""
        found = topic_series(text, None if totals else topic)
        return {name: found.get(name, 0) for name in BROKER_TOPIC_FAMILIES}

    create(node, (topic, 1))
    wait_for("the log", lambda: list_offset(raw(), topic, 0, -1).error_code == 0)
    conn = raw()
    first = batch([(b"k", b"v" * 100, [], 1), (b"k", b"w", [], 2)])
    assert produce(conn, topic, 0, first).error_code == 0
    assert fetch(conn, topic, 0, 0)[1].error_code == 0
    text = node.metrics_text()
    assert counts(text) == {
        "kafka_server_brokertopicmetrics_messagesin_total": 2,
        "kafka_server_brokertopicmetrics_bytesin_total": len(first),
        "kafka_server_brokertopicmetrics_bytesout_total": len(first),
        "kafka_server_brokertopicmetrics_bytesrejected_total": 0,
        "kafka_server_brokertopicmetrics_totalproducerequests_total": 1,
        "kafka_server_brokertopicmetrics_failedproducerequests_total": 0,
        "kafka_server_brokertopicmetrics_totalfetchrequests_total": 1,
        "kafka_server_brokertopicmetrics_failedfetchrequests_total": 0,
    }, text
    totals = counts(text, totals=True)

    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.delete_topics([topic])
    finally:
        admin.close()

    def without_topic():
        text = node.metrics_text()
        return text if label not in text else None

    text = wait_for("the deleted topic's series to leave the scrape", without_topic)
    # The totals keep what the topic counted.
    after = counts(text, totals=True)
    assert all(after[name] >= totals[name] for name in BROKER_TOPIC_FAMILIES), (totals, after)
    for name in BROKER_TOPIC_FAMILIES:
        assert text.count(f"# TYPE {name} ") == 1, text

    create(node, (topic, 1))
    wait_for("the new log", lambda: list_offset(raw(), topic, 0, -1).error_code == 0)
    second = batch([(b"k", b"x", [], 3)])
    assert produce(raw(), topic, 0, second).error_code == 0
    assert counts(node.metrics_text()) == {
        "kafka_server_brokertopicmetrics_messagesin_total": 1,
        "kafka_server_brokertopicmetrics_bytesin_total": len(second),
        "kafka_server_brokertopicmetrics_bytesout_total": 0,
        "kafka_server_brokertopicmetrics_bytesrejected_total": 0,
        "kafka_server_brokertopicmetrics_totalproducerequests_total": 1,
        "kafka_server_brokertopicmetrics_failedproducerequests_total": 0,
        "kafka_server_brokertopicmetrics_totalfetchrequests_total": 0,
        "kafka_server_brokertopicmetrics_failedfetchrequests_total": 0,
    }


def test_failed_fetch_requests_leave_out_the_errors_kafka_expects(node, raw):
    """Kafka's `readFromLog` marks FailedFetchRequestsPerSec only for errors it does not expect
    (not OFFSET_OUT_OF_RANGE, UNKNOWN_LEADER_EPOCH, ...), and a partition missing from the
    metadata is refused in `handleFetchRequest` before `fetchMessages` marks
    TotalFetchRequestsPerSec."""
    topic = "dp-metrics-fetch-errors"
    create(node, (topic, 3))
    wait_for("the log", lambda: list_offset(raw(), topic, 0, -1).error_code == 0)
    conn = raw()
    records = batch([(b"k", b"v", [], 1)])
    assert produce(conn, topic, 0, records).error_code == 0

    def fetched():
        counts = topic_counts(node.metrics_text(), topic)
        return counts["totalfetchrequests"], counts["failedfetchrequests"], counts["bytesout"]

    assert fetch(conn, topic, 77, 0)[1].error_code == 3
    assert fetched() == (0, 0, 0)
    assert fetch(conn, topic, 0, 5)[1].error_code == 1  # OFFSET_OUT_OF_RANGE
    assert fetched() == (1, 0, 0)
    assert fetch(conn, topic, 0, 0, current_leader_epoch=7)[1].error_code == 75  # UNKNOWN_LEADER_EPOCH
    assert fetched() == (2, 0, 0)
    # Kafka's segment read refuses a negative size: an unexpected failure.
    assert fetch(conn, topic, 0, 0, partition_max_bytes=-1)[1].error_code == -1
    assert fetched() == (3, 1, 0)
    assert fetch(conn, topic, 0, 0)[1].error_code == 0
    assert fetched() == (4, 1, len(records))


def test_produce_requests_count_as_kafkas_append_to_local_log(node, raw):
    """Kafka's `handleProduceRequest` drops a partition missing from the metadata and
    `ProduceRequest.validateRecords` refuses malformed records before `appendToLocalLog`
    counts anything; there every partition is a request, and only an error Kafka does not
    expect (not CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, ...) a failed one. A duplicate of an
    idempotent batch counts its records and bytes as the original did."""
    topic = "dp-metrics-produce-errors"
    create(node, (topic, 3))
    wait_for("the log", lambda: list_offset(raw(), topic, 0, -1).error_code == 0)
    conn = raw()

    def produced(topic=topic):
        counts = topic_counts(node.metrics_text(), topic)
        return (counts["totalproducerequests"], counts["failedproducerequests"],
                counts["messagesin"], counts["bytesin"])

    totals_before = produced(None)
    good = batch([(b"k", b"v", [], 1)])
    assert produce(conn, topic, 77, good).error_code == 3
    assert produced() == (0, 0, 0, 0)
    assert produce(conn, topic, 0, good + good).error_code == 87  # two batches
    assert produced() == (0, 0, 0, 0)
    corrupt = bytearray(good)
    corrupt[-1] ^= 1
    assert produce(conn, topic, 0, bytes(corrupt)).error_code == 2  # CORRUPT_MESSAGE
    assert produced() == (1, 0, 0, 0)
    shifted = (5).to_bytes(8, "big") + good[8:]
    assert produce(conn, topic, 0, shifted).error_code == 87  # base offset 5
    assert produced() == (2, 1, 0, 0)
    init = conn.send(InitProducerIdRequest[2](transactional_id=None, transaction_timeout_ms=60000),
                     InitProducerIdResponse)
    assert init.error_code == 0
    producer = (init.producer_id, init.producer_epoch)
    first = batch([(b"k", b"a", [], 1), (b"k", b"b", [], 2), (b"k", b"c", [], 3)], producer=(*producer, 0))
    answers = [produce(conn, topic, 0, first) for _ in range(2)]
    assert [(a.error_code, a.base_offset) for a in answers] == [(0, 0), (0, 0)]
    assert produced() == (4, 1, 6, 2 * len(first))
    gap = batch([(b"k", b"d", [], 4)], producer=(*producer, 9))
    assert produce(conn, topic, 0, gap).error_code == 45  # OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produced() == (5, 2, 6, 2 * len(first))
    # The totals counted the same (the node is shared, but its other tests run one at a time).
    after = produced(None)
    assert tuple(b - a for a, b in zip(totals_before, after)) == (5, 2, 6, 2 * len(first))


def test_bytes_rejected_counts_batches_over_max_message_bytes(node, raw):
    """Kafka's `UnifiedLog` adds a partition's request bytes to BytesRejectedPerSec when its
    batch is larger than max.message.bytes, as produced or once recompressed for the topic;
    MESSAGE_TOO_LARGE is an error Kafka expects: a request, not a failed one."""
    topic = "dp-metrics-rejected"
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, 1, 1, topic_configs={
            "max.message.bytes": "500", "compression.type": "uncompressed"})])
    finally:
        admin.close()
    wait_for("the log", lambda: list_offset(raw(), topic, 0, -1).error_code == 0)
    conn = raw()
    large = batch([(b"k", b"v" * 600, [], 1)])
    assert produce(conn, topic, 0, large).error_code == 10
    # Small as produced (gzip), over the limit once stored uncompressed.
    inflating = batch([(b"k", b"x" * 2000, [], 1)], compression=1)
    assert len(inflating) < 500
    assert produce(conn, topic, 0, inflating).error_code == 10
    good = batch([(b"k", b"v", [], 1)])
    assert produce(conn, topic, 0, good).error_code == 0
    counts = topic_counts(node.metrics_text(), topic)
    assert (counts["bytesrejected"], counts["totalproducerequests"], counts["failedproducerequests"],
            counts["messagesin"], counts["bytesin"]) == (len(large) + len(inflating), 3, 0, 1, len(good))


def test_kafka_python_produce_request_over_many_partitions(node):
    # kafka-python drains every ready partition of a broker into one Produce request, so with a
    # long linger 1,500 partitions go in one request: past the node's chunk of 1,024 partitions
    # (node/src/network/produce_chunks.rs), appended and answered a chunk at a time.
    topic, partitions = "dp-many-partitions", 1500
    create(node, (topic, partitions))
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, acks="all", linger_ms=2000,
                             batch_size=1 << 14, max_request_size=8 << 20)
    try:
        for round_ in range(2):
            futures = [producer.send(topic, key=b"k", value=f"{p}:{round_}".encode(), partition=p)
                       for p in range(partitions)]
            producer.flush(60)
            assert [f.get(timeout=1).offset for f in futures] == [round_] * partitions
    finally:
        producer.close()
    # Its Fetch requests name all 1,500 partitions too (fetch_chunks.rs): read in chunks.
    consumer = KafkaConsumer(bootstrap_servers=node.bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        assert set(consumer.end_offsets(tps).values()) == {2}
        consumer.assign(tps)
        consumer.seek_to_beginning()
        seen = {}
        deadline = time.monotonic() + 60
        while len(seen) < 2 * partitions and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                for r in records:
                    seen[(r.partition, r.offset)] = r.value
        assert seen == {(p, o): f"{p}:{o}".encode() for p in range(partitions) for o in range(2)}
    finally:
        consumer.close()
    read = confluent_read(node, topic, 1234, 2)
    assert [(o, k, v) for o, k, v, _, _ in read] == [(0, b"k", b"1234:0"), (1, b"k", b"1234:1")]


def test_large_fetch_answers_at_every_version(node, raw):
    """Batches of 40 KiB (answered from the log shards' buffers, written around the encoded
    fields) come back byte for byte, beside a small partition, at every Fetch version."""
    from kafka.record.memory_records import MemoryRecords

    topic = "dp-large-fetch"
    create(node, (topic, 3))
    conn = raw()
    for partition in range(3):
        wait_for("the log", lambda: list_offset(conn, topic, partition, -1).error_code == 0)
    sizes = {0: 1024, 1: 1024, 2: 10}
    sent = {p: [] for p in sizes}
    # Current timestamps: records from 1970 would roll a segment per batch (segment.ms), and a
    # fetch, as Kafka's, reads from one segment.
    now = int(time.time() * 1000)
    for partition, size in sizes.items():
        for n in range(3):
            records = [(f"k{partition}-{n}-{i}".encode(), os.urandom(size), [("h", b"x")], now + i)
                       for i in range(40)]
            assert produce(conn, topic, partition, batch(records)).error_code == 0
            sent[partition] += [(key, value) for key, value, _, _ in records]
    metadata = conn.send(MetadataRequest[12](topics=[MetadataRequest[12].MetadataRequestTopic(topic_id=None, name=topic)],
                                             allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False), MetadataResponse)
    topic_id = metadata.topics[0].topic_id
    for version in range(4, 19):
        F = FetchRequest[version]
        key = {"topic_id": topic_id} if version >= 13 else {"topic": topic}
        request = F(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=8 << 20, isolation_level=0,
            session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
            topics=[F.FetchTopic(partitions=[F.FetchTopic.FetchPartition(
                partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=1 << 20) for p in sizes], **key)],
        )
        response = conn.send(request, FetchResponse)
        if version >= 7:
            assert response.error_code == 0
        (topic_response,) = response.responses
        got = {}
        for partition in topic_response.partitions:
            assert (partition.error_code, partition.high_watermark) == (0, 120), version
            records = MemoryRecords(bytes(partition.records))
            got[partition.partition_index] = []
            while records.has_next():
                for record in records.next_batch():
                    got[partition.partition_index].append((record.key, record.value))
        assert got == sent, f"v{version}"


def kafka_fetch_rule(batch_sizes, max_bytes, partition_max_bytes):
    """Kafka's byte limits, partition after partition: each takes at most partition_max_bytes
    of what is left of max_bytes, in whole batches, and the first partition to return records
    returns its first batch whole even past its limit. Batches returned per partition."""
    used, returned = 0, []
    for sizes in batch_sizes:
        limit, first = min(partition_max_bytes, max(max_bytes - used, 0)), used == 0
        count = total = 0
        if limit > 0 or first:
            for size in sizes:
                if total + size > limit and not (first and count == 0):
                    break
                count, total = count + 1, total + size
        returned.append(count)
        used += total
    return returned


def test_fetch_byte_limits_across_partitions(node, raw):
    """A fetch of several partitions returns exactly what Kafka's partition-after-partition
    rule returns (the node reads them together when that cannot change the answer): budgets
    that cover every partition, a partition limit below one batch (the first batch still whole),
    a response limit that runs out part way, and an oversized first batch that leaves too
    little for the partitions after it."""
    from kafka.record.memory_records import MemoryRecords

    topic = "dp-fetch-limits"
    partitions = 3
    create(node, (topic, partitions))
    conn = raw()
    for partition in range(partitions):
        wait_for("the log", lambda: list_offset(conn, topic, partition, -1).error_code == 0)
    now = int(time.time() * 1000)
    # Partition 0 holds batches of about 4 KB, partitions 1 and 2 batches of about 170 bytes.
    shapes = {0: (4, 1000), 1: (1, 100), 2: (1, 100)}
    sizes = [[], [], []]
    for partition, (count, value_size) in shapes.items():
        for n in range(3):
            records = [(f"k{partition}-{n}-{i}".encode(), os.urandom(value_size), [], now + i)
                       for i in range(count)]
            encoded = batch(records)
            assert produce(conn, topic, partition, encoded).error_code == 0
            sizes[partition].append(len(encoded))
    big, small = max(sizes[0]), max(sizes[1] + sizes[2])
    F = FetchRequest[12]
    cases = [
        (1 << 20, 1 << 20),
        (1 << 20, small + 10),
        (1 << 20, 100),
        (big + 3 * small + 10, 3 * small + 10),
        (2 * big + 10, 2 * big + 10),
        # Partition 0's first batch goes past its limit, leaving less than the others' limits.
        (big + 2 * small + 10, 3 * small + 10),
        (big + small + 10, 100),
        (3 * big, 5 * big),
    ]
    for max_bytes, partition_max_bytes in cases:
        request = F(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
            session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
            topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
                partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=partition_max_bytes)
                for p in range(partitions)])],
        )
        (topic_response,) = conn.send(request, FetchResponse).responses
        returned = []
        for partition in topic_response.partitions:
            assert (partition.error_code, partition.high_watermark) == (0, 3 * shapes[partition.partition_index][0])
            records = MemoryRecords(bytes(partition.records or b""))
            count = 0
            while records.has_next():
                records.next_batch()
                count += 1
            returned.append(count)
        assert returned == kafka_fetch_rule(sizes, max_bytes, partition_max_bytes), \
            (max_bytes, partition_max_bytes, sizes)


def test_pipelined_produces_are_appended_and_answered_in_order(node, raw):
    """A client may send Produce requests without waiting for answers (librdkafka keeps up to
    max.in.flight out). The node serves several of a connection's Produces at once, so each
    partition's batches must still be appended in request order, the answers leave in request
    order, an acks=0 Produce among them gets none, and a Fetch sent after them sees them all."""
    from kafka.record.memory_records import MemoryRecords
    from conftest import decode_strict

    topic = "dp-pipelined"
    create(node, (topic, 2))
    conn = raw()
    for partition in range(2):
        wait_for("the log", lambda: list_offset(conn, topic, partition, -1).error_code == 0)
    now = int(time.time() * 1000)
    # Runs on one partition and alternations between both; some batches large enough for an
    # append to take a while, so later requests overtake unless kept in order.
    plan = [(0 if n < 12 or n % 3 == 0 else n % 2, n) for n in range(48)]
    sent = {0: [], 1: []}
    expected = []
    P = ProduceRequest[9]
    for partition, n in plan:
        value_size = 200_000 if n % 5 == 0 else 100
        records = [(f"{partition}-{n}-{i}".encode(), os.urandom(value_size), [], now + i)
                   for i in range(3)]
        acks = 0 if n == 20 else (-1 if n % 4 == 1 else 1)
        request = P(transactional_id=None, acks=acks, timeout_ms=10000, topic_data=[
            P.TopicProduceData(name=topic, partition_data=[
                P.TopicProduceData.PartitionProduceData(index=partition, records=batch(records))])])
        request.with_header(correlation_id=1000 + n, client_id="pytest-pipelined")
        conn.send_bytes(bytes(request.encode(header=True, framed=True)))
        if acks != 0:
            expected.append((1000 + n, partition, len(sent[partition])))
        sent[partition] += [key for key, _, _, _ in records]
    F = FetchRequest[12]
    fetch = F(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=64 << 20, isolation_level=0,
              session_id=0, session_epoch=-1, rack_id="", forgotten_topics_data=[],
              topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
                  partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                  log_start_offset=-1, partition_max_bytes=32 << 20) for p in range(2)])])
    fetch.with_header(correlation_id=5000, client_id="pytest-pipelined")
    conn.send_bytes(bytes(fetch.encode(header=True, framed=True)))
    for correlation_id, partition, base_offset in expected:
        response = decode_strict(ProduceResponse[9], conn.recv_frame(), 9)
        assert response._header.correlation_id == correlation_id
        (topic_response,) = response.responses
        (partition_response,) = topic_response.partition_responses
        assert (partition_response.index, partition_response.error_code,
                partition_response.base_offset) == (partition, 0, base_offset), correlation_id
    response = decode_strict(FetchResponse[12], conn.recv_frame(), 12)
    assert response._header.correlation_id == 5000
    (topic_response,) = response.responses
    for partition in topic_response.partitions:
        assert partition.error_code == 0
        assert partition.high_watermark == len(sent[partition.partition_index])
        records = MemoryRecords(bytes(partition.records))
        keys = []
        while records.has_next():
            keys += [record.key for record in records.next_batch()]
        assert keys == sent[partition.partition_index]


def test_produce_right_after_create_finds_every_new_log(node, raw):
    """A CreateTopics is answered once the image is published; the log manager and the
    replication roles take the new partitions in right after, off the answer's path. A Produce
    sent the moment the answer arrives must still find every partition served (it waits for
    them), not NOT_LEADER_OR_FOLLOWER: 4,000 partitions make that window long enough for the
    request to land in it (without the wait, some of them are refused)."""
    from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse
    from conftest import decode_strict

    PARTITIONS = 4000
    conn = raw()
    good = batch([(b"k", b"v", [], int(time.time() * 1000))])
    Topic = CreateTopicsRequest.CreatableTopic
    P = ProduceRequest[9]
    for round_ in range(3):
        topic = f"dp-fresh-{round_}"
        # Encoded beforehand, so it leaves the moment the create is answered.
        request = P(transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
            P.TopicProduceData(name=topic, partition_data=[
                P.TopicProduceData.PartitionProduceData(index=p, records=good)
                for p in reversed(range(PARTITIONS))])])
        request.with_header(correlation_id=7000 + round_, client_id="pytest-raw")
        encoded = bytes(request.encode(header=True, framed=True))
        created = conn.send(CreateTopicsRequest[7](
            topics=[Topic(name=topic, num_partitions=PARTITIONS, replication_factor=1, assignments=[],
                          configs=[])],
            timeout_ms=30000, validate_only=False), CreateTopicsResponse)
        conn.send_bytes(encoded)
        assert [t.error_code for t in created.topics] == [0]
        response = decode_strict(ProduceResponse[9], conn.recv_frame(), 9)
        assert response._header.correlation_id == 7000 + round_
        (topic_response,) = response.responses
        answers = {(r.index, r.error_code, r.base_offset) for r in topic_response.partition_responses}
        assert answers == {(p, 0, 0) for p in range(PARTITIONS)}, round_


def peak_resident_bytes(node):
    with open(f"/proc/{node.proc.pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


def test_a_compressed_batch_is_validated_without_holding_its_records(start_node):
    """A gzip batch of about 200 KB holding one 200 MiB record: the broker validates a batch it
    keeps as it came by streaming it, keys and values skipped (Kafka's skipKeyValueIterator),
    so its memory does not follow the decompressed size (it peaked 556 MB higher before)."""
    node = start_node()
    create(node, ("bomb", 1))
    conn = RawConn(node.bootstrap)
    wait_for("the partition's leader", lambda: produce(conn, "bomb", 0, batch([(b"k", b"v", [], 1000)])).error_code == 0)
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=1, is_transactional=False,
                                        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
    builder.append(0, timestamp=int(time.time() * 1000), key=b"k", value=bytes(200 << 20), headers=[])
    bomb = bytes(builder.build())
    del builder
    assert len(bomb) < 1 << 20
    with open(f"/proc/{node.proc.pid}/clear_refs", "w") as f:
        f.write("5")
    before = peak_resident_bytes(node)
    answer = produce(conn, "bomb", 0, bomb)
    assert (answer.error_code, answer.base_offset) == (0, 1)
    growth = peak_resident_bytes(node) - before
    assert growth < 64 << 20, f"a {len(bomb)}-byte batch grew the node's peak resident memory by {growth} bytes"
    conn.close()


def test_a_snappy_block_claiming_more_than_it_can_hold_is_refused_before_its_claim_is_allocated(start_node):
    """A snappy block's header gives its uncompressed length, which the decoder allocates before
    it reads the block: one of 64 bytes claiming 256 MiB - 1 (under the broker's 256 MiB limit),
    raw or as a xerial chunk, is corrupt, as no snappy block expands more than 64/3 times, and is
    answered UNKNOWN_SERVER_ERROR as other corrupt snappy data, without the allocation: each
    raised the node's peak resident memory by 256 MiB before."""
    import struct

    node = start_node()
    create(node, ("snappy-liar", 1))
    conn = RawConn(node.bootstrap)
    plain = batch([(b"k", b"v", [], int(time.time() * 1000))])
    wait_for("the partition's leader", lambda: produce(conn, "snappy-liar", 0, plain).error_code == 0)
    raw_block = b"\xff\xff\xff\x7f" + bytes(60)  # varint 2^28 - 1, then 60 bytes
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">i", len(raw_block)) + raw_block
    with open(f"/proc/{node.proc.pid}/clear_refs", "w") as f:
        f.write("5")
    before = peak_resident_bytes(node)
    for section in (raw_block, xerial):
        answer = produce(conn, "snappy-liar", 0, with_records_section(plain, 2, section))
        assert (answer.error_code, answer.base_offset, answer.error_message) == (-1, -1, None)
    growth = peak_resident_bytes(node) - before
    assert growth < 64 << 20, f"two 64-byte snappy blocks grew the node's peak resident memory by {growth} bytes"
    assert list_offset(conn, "snappy-liar", 0, -1).offset == 1
    conn.close()


def rebuilt_gzip_bomb(record_count):
    """A gzip batch of `record_count` empty records whose offset deltas are all 0: small on the
    wire, but the broker must decompress and re-encode all of it (Kafka's
    `inPlaceAssignment = false`)."""
    import gzip
    import struct

    from kafka.record.util import calc_crc32c

    # length 6, attributes, timestamp delta 0, offset delta 0, null key, null value, no headers
    records = gzip.compress(b"\x0c\x00\x00\x00\x01\x01\x00" * record_count, compresslevel=1)
    now = int(time.time() * 1000)
    after_crc = struct.pack(">hiqqqhii", 1, record_count - 1, now, now, -1, -1, -1, record_count) + records
    crc = calc_crc32c(after_crc)
    return struct.pack(">qiibI", 0, 4 + 1 + 4 + len(after_crc), -1, 2, crc) + after_crc


def test_a_costly_batch_does_not_hold_up_other_partitions(node, raw):
    """A Produce of batches that take seconds to validate (decompressed and re-encoded) holds up
    only its own request: other partitions' appends, on the same log shard threads, go on
    meanwhile, as on Kafka's request threads. Before, the shards validated every batch, so no
    other append was answered until the costly ones were done."""
    create(node, ("costly", 4), ("cheap", 4))
    cheap = raw()
    for partition in range(4):
        wait_for("the partition's leader", lambda: produce(cheap, "cheap", partition, batch([(b"k", b"v", [], 1000)])).error_code == 0)
        wait_for("the partition's leader", lambda: produce(cheap, "costly", partition, batch([(b"k", b"v", [], 1000)])).error_code == 0)
    bomb = rebuilt_gzip_bomb(4_000_000)
    P = ProduceRequest[9]
    costly_request = P(transactional_id=None, acks=1, timeout_ms=60000, topic_data=[P.TopicProduceData(
        name="costly", partition_data=[P.TopicProduceData.PartitionProduceData(index=p, records=bomb) for p in range(4)])])
    costly = RawConn(node.bootstrap, timeout=120)
    answered = threading.Event()
    costly_answer = []

    def send_costly():
        costly_answer.append(costly.send(costly_request, ProduceResponse))
        answered.set()

    sender = threading.Thread(target=send_costly)
    sender.start()
    cheap_request = P(transactional_id=None, acks=1, timeout_ms=60000, topic_data=[P.TopicProduceData(
        name="cheap", partition_data=[P.TopicProduceData.PartitionProduceData(index=p, records=batch([(b"k", b"v", [], 1000)]))
                                      for p in range(4)])])
    acknowledged_meanwhile = 0
    while not answered.is_set():
        (topic,) = cheap.send(cheap_request, ProduceResponse).responses
        assert [p.error_code for p in topic.partition_responses] == [0] * 4
        if not answered.is_set():
            acknowledged_meanwhile += 1
    sender.join()
    (topic,) = costly_answer[0].responses
    assert [p.error_code for p in topic.partition_responses] == [10] * 4
    assert acknowledged_meanwhile >= 5, f"only {acknowledged_meanwhile} other produces were answered while the costly one was validated"
    for partition in range(4):
        assert list_offset(cheap, "costly", partition, -1).offset == 1
    costly.close()


def resident_bytes(node):
    with open(f"/proc/{node.proc.pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def test_fetch_answers_nobody_reads_stay_within_the_read_budget(start_node):
    """Clients that send a large Fetch and never read the answer hold its records until it is
    written. Kafka holds file references (sendfile); Gregor holds copies, so they come out of
    `fetch.response.memory.bytes`: once it is spent, fetches get their first batch only, the
    node's memory stays bounded, and a well-behaved consumer still reads everything. Before,
    each such connection held its whole answer (12 MiB here)."""
    node = start_node({"fetch.response.memory.bytes": str(4 << 20)})
    create(node, ("hogged", 4))
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 50})
    for i in range(12_000):
        producer.produce("hogged", value=b"%07d" % i + bytes(1017), partition=i % 4)
    assert producer.flush(60) == 0
    F = FetchRequest[12]
    hog_fetch = F(
        replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=50 << 20, isolation_level=0,
        session_id=0, session_epoch=-1,
        topics=[F.FetchTopic(topic="hogged", partitions=[F.FetchTopic.FetchPartition(
            partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=50 << 20) for p in range(4)])],
        forgotten_topics_data=[], rack_id="",
    )
    hog_fetch.with_header(correlation_id=1, client_id="hog")
    frame = bytes(hog_fetch.encode(header=True, framed=True))
    before = resident_bytes(node)
    hogs = []
    for _ in range(20):
        hog = RawConn(node.bootstrap)
        hog.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        hog.send_bytes(frame)
        hogs.append(hog)
    try:
        # Everything is still readable by a consumer while the hogs hold the budget.
        read = confluent_read(node, "hogged", 0, 3000)
        assert [r[2][:7] for r in read] == [b"%07d" % i for i in range(0, 12_000, 4)]
        growth = resident_bytes(node) - before
        assert growth < 80 << 20, f"20 unread 12 MiB fetch answers grew the node by {growth} bytes"
    finally:
        for hog in hogs:
            hog.close()


def test_a_negative_fetch_size_is_an_unknown_server_error(node, raw):
    """Kafka hands a negative `max_bytes` or `partition_max_bytes` to `LogSegment.read`, which
    refuses it (UNKNOWN_SERVER_ERROR) when there is something to read; at the end of the log
    nothing is read and the answer is empty."""
    create(node, ("negative-size", 1))
    conn = raw()
    wait_for("the partition's leader", lambda: produce(conn, "negative-size", 0, batch([(b"k", b"v", [], 1000)])).error_code == 0)
    F = FetchRequest[12]

    def fetch_with(max_bytes, partition_max_bytes, offset):
        request = F(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, isolation_level=0,
            session_id=0, session_epoch=-1,
            topics=[F.FetchTopic(topic="negative-size", partitions=[F.FetchTopic.FetchPartition(
                partition=0, current_leader_epoch=-1, fetch_offset=offset, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=partition_max_bytes)])],
            forgotten_topics_data=[], rack_id="",
        )
        (topic,) = conn.send(request, FetchResponse).responses
        (partition,) = topic.partitions
        return partition.error_code, partition.records

    assert fetch_with(-1, 1 << 20, 0) == (-1, b"")
    assert fetch_with(1 << 20, -1, 0) == (-1, b"")
    assert fetch_with(-1, -1, 1)[0] == 0
    assert fetch_with(1 << 20, 1 << 20, 0)[0] == 0


def test_a_restarted_node_is_ready_only_once_its_logs_are_open(start_node):
    """As Kafka's broker serves requests only after its log manager has loaded the logs, a node
    restarted after a kill -9 (its logs recovered, one with a torn tail) answers every
    partition's ListOffsets with its end offset from the moment it says `node ready`, instead of
    NOT_LEADER_OR_FOLLOWER while Metadata already names it the leader."""
    node = start_node({"auto.create.topics.enable": "false"})
    topic, partitions = "dp-ready-logs", 300
    create(node, (topic, partitions))
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 20})
    for partition in range(partitions):
        for _ in range(3):
            producer.produce(topic, b"x" * 100, partition=partition)
    assert producer.flush(30) == 0
    del producer
    node.kill9()
    segment = os.path.join(node.data_dir, f"{topic}-7", "00000000000000000000.log")
    with open(segment, "ab") as torn:
        torn.write(b"\x00\x00\x00\x00\x00\x00\x00\x03\x00\x00\x01\x00torn")
    node.start()
    assert "partition logs loaded" in node.log()
    conn = RawConn(node.bootstrap)
    try:
        L = ListOffsetsRequest[7]
        request = L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(
            name=topic, partitions=[L.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=p, current_leader_epoch=-1, timestamp=-1) for p in range(partitions)])])
        (answer,) = conn.send(request, ListOffsetsResponse).topics
        got = {(p.error_code, p.offset) for p in answer.partitions}
        assert got == {(0, 3)}, sorted(got)[:5]
    finally:
        conn.close()


@pytest.mark.parametrize("signal_name", ["SIGHUP", "SIGTERM"])
def test_a_hangup_or_terminate_shuts_the_node_down_cleanly(start_node, signal_name):
    """SIGHUP stops the node as SIGTERM and SIGINT do (Kafka's shutdown hook runs on all
    three): exit 0, and the next start finds the clean shutdown file and skips recovery; a
    kill -9 leaves none, and the next start says its logs recover."""
    node = start_node({"auto.create.topics.enable": "false"})
    create(node, ("dp-hangup", 1))
    producer = Producer({"bootstrap.servers": node.bootstrap})
    producer.produce("dp-hangup", b"kept")
    assert producer.flush(30) == 0
    del producer
    node.proc.send_signal(getattr(signal, signal_name))
    assert node.proc.wait(timeout=60) == 0, node.log()
    assert f"terminating on signal {signal_name}" in node.log()
    # The log file holds every start: count each line.
    assert node.log().count("no clean shutdown file") == 1  # the first start, fresh
    node.start()
    assert node.log().count("clean shutdown file found") == 1
    node.kill9()
    node.start()
    assert node.log().count("no clean shutdown file") == 2
    assert node.log().count("clean shutdown file found") == 1
    conn = RawConn(node.bootstrap)
    try:
        answer = list_offset(conn, "dp-hangup", 0, -1)
        assert (answer.error_code, answer.offset) == (0, 1)
    finally:
        conn.close()


def test_a_long_poll_counts_as_remote_time_under_fetch_and_fetch_consumer(start_node):
    """Kafka's request metrics count a consumer's Fetch under both `Fetch` and
    `FetchConsumer`, and the time it waited for records (purgatory) as remote time, not local
    time."""
    node = start_node({"auto.create.topics.enable": "false"})
    create(node, ("dp-long-poll", 1))
    conn = RawConn(node.bootstrap)
    try:
        wait_for("the log", lambda: list_offset(conn, "dp-long-poll", 0, -1).error_code == 0)
        _, partition = fetch(conn, "dp-long-poll", 0, 0, max_wait_ms=600)
        assert partition.error_code == 0 and not partition.records
    finally:
        conn.close()

    def value(name, request):
        total = 0.0
        for line in node.metrics_text().splitlines():
            if line.startswith(name + "{") and f'request="{request}"' in line:
                total += float(line.split()[-1])
        return total

    requests = "kafka_network_requestmetrics_requests_total"
    assert value(requests, "Fetch") == 1 and value(requests, "FetchConsumer") == 1
    assert value(requests, "FetchFollower") == 0
    for request in ("Fetch", "FetchConsumer"):
        assert value("kafka_network_requestmetrics_remote_time_seconds_sum", request) >= 0.5
        assert value("kafka_network_requestmetrics_local_time_seconds_sum", request) < 0.3
