"""DeleteRecords, DescribeLogDirs and DescribeProducers with real clients and the Gregor tools.

kafka-python's admin client sends all three; confluent-kafka's sends DeleteRecords; `gregor
delete-records` and `gregor log-dirs --describe` print what kafka-delete-records.sh and
kafka-log-dirs.sh print.
"""

import json
import os
import subprocess

import pytest
from confluent_kafka import TopicPartition as CTopicPartition
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import OffsetOutOfRangeError, PolicyViolationError

from conftest import RawConn, gregor_bin, wait_for
from test_data_plane import batch, create, fetch, list_offset, produce


def fill(node, topic, partition, count):
    conn = RawConn(node.bootstrap)
    wait_for("the log", lambda: list_offset(conn, topic, partition, -1).error_code == 0)
    for i in range(count):
        assert produce(conn, topic, partition, batch([(b"k", f"v{i}".encode(), [], 1000 + i)])).error_code == 0
    conn.close()


def gregor(*args):
    return subprocess.run([str(gregor_bin()), *args], capture_output=True, text=True, timeout=60)


def test_delete_records_moves_the_log_start_offset(node):
    create(node, ("la-delete", 2))
    fill(node, "la-delete", 0, 10)
    fill(node, "la-delete", 1, 3)
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        result = admin.delete_records({TopicPartition("la-delete", 0): 4})
        assert result[TopicPartition("la-delete", 0)]["low_watermark"] == 4
        # Lower than the log start offset: nothing moves, the low watermark is answered.
        assert admin.delete_records({TopicPartition("la-delete", 0): 2})[TopicPartition("la-delete", 0)]["low_watermark"] == 4
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({TopicPartition("la-delete", 0): 11})
        # -1: up to the high watermark.
        assert admin.delete_records({TopicPartition("la-delete", 1): -1})[TopicPartition("la-delete", 1)]["low_watermark"] == 3
    finally:
        admin.close()
    conn = RawConn(node.bootstrap)
    assert list_offset(conn, "la-delete", 0, -2).offset == 4
    assert list_offset(conn, "la-delete", 1, -2).offset == 3
    _, below = fetch(conn, "la-delete", 0, 3)
    assert below.error_code == 1  # OFFSET_OUT_OF_RANGE
    _, first = fetch(conn, "la-delete", 0, 4)
    assert (first.error_code, first.log_start_offset) == (0, 4)
    assert b"v4" in bytes(first.records)
    conn.close()

    # librdkafka's DeleteRecords too.
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    futures = admin.delete_records([CTopicPartition("la-delete", 0, 6)])
    deleted = next(iter(futures.values())).result(timeout=30)
    assert deleted.low_watermark == 6


def test_delete_records_refused_on_compacted_topics(node):
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic("la-compacted", 1, 1, topic_configs={"cleanup.policy": "compact"})])
        fill(node, "la-compacted", 0, 2)
        with pytest.raises(PolicyViolationError):
            admin.delete_records({TopicPartition("la-compacted", 0): 1})
    finally:
        admin.close()


def test_gregor_delete_records_prints_as_kafka(node, tmp_path):
    create(node, ("la-tool", 1))
    fill(node, "la-tool", 0, 5)
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"partitions": [
        {"topic": "la-tool", "partition": 0, "offset": 3},
        {"topic": "la-tool", "partition": 7, "offset": 1},
    ], "version": 1}))
    result = gregor("delete-records", "--bootstrap-server", node.bootstrap, "--offset-json-file", str(offsets))
    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "Executing records delete operation\n"
        "Records delete operation completed:\n"
        "partition: la-tool-0\tlow_watermark: 3\n"
        "partition: la-tool-7\terror: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
        "This server does not host this topic-partition.\n"
    )
    offsets.write_text('{"partitions": [{"topic": "la-tool", "partition": 0, "offset": 9}]}')
    result = gregor("delete-records", "--bootstrap-server", node.bootstrap, "--offset-json-file", str(offsets))
    assert "partition: la-tool-0\terror: org.apache.kafka.common.errors.OffsetOutOfRangeException" in result.stdout
    offsets.write_text('{"partitions": [{"topic": "a", "partition": 0, "offset": 1}, {"topic": "a", "partition": 0, "offset": 2}]}')
    result = gregor("delete-records", "--bootstrap-server", node.bootstrap, "--offset-json-file", str(offsets))
    assert result.returncode != 0
    assert "Offset json file contains duplicate topic partitions: a-0" in result.stderr


def test_describe_log_dirs(node):
    create(node, ("la-dirs", 2))
    fill(node, "la-dirs", 1, 3)
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        (answer,) = admin.describe_log_dirs()
        (log_dir,) = answer["log_dirs"]
        assert log_dir["error_code"] == 0
        assert log_dir["log_dir"] == os.path.abspath(node.data_dir)
        assert log_dir["total_bytes"] > 0 and 0 <= log_dir["usable_bytes"] <= log_dir["total_bytes"]
        (topic,) = [t for t in log_dir["topics"] if t["name"] == "la-dirs"]
        sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
        assert sizes[0] == 0 and sizes[1] > 0, sizes
        # Only the partitions asked for (Kafka still lists the topic).
        (answer,) = admin.describe_log_dirs({"la-dirs": [1]})
        (topic,) = [t for t in answer["log_dirs"][0]["topics"] if t["name"] == "la-dirs"]
        assert [p["partition_index"] for p in topic["partitions"]] == [1]
    finally:
        admin.close()

    result = gregor("log-dirs", "--bootstrap-server", node.bootstrap, "--describe", "--topic-list", "la-dirs")
    assert result.returncode == 0, result.stderr
    querying, received, document = result.stdout.splitlines()
    assert querying == "Querying brokers for log directories information"
    assert received == "Received log directory information from brokers 1"
    parsed = json.loads(document)
    assert parsed["version"] == 1
    (broker,) = parsed["brokers"]
    assert broker["broker"] == 1
    (log_dir,) = broker["logDirs"]
    assert (log_dir["logDir"], log_dir["error"]) == (os.path.abspath(node.data_dir), None)
    assert sorted(p["partition"] for p in log_dir["partitions"]) == ["la-dirs-0", "la-dirs-1"]
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in log_dir["partitions"])

    result = gregor("log-dirs", "--bootstrap-server", node.bootstrap, "--describe", "--broker-list", "1,7")
    assert result.returncode != 0
    assert "ERROR: The given brokers do not exist from --broker-list: 7. Current existent brokers: 1" in result.stderr


def test_describe_producers(node):
    create(node, ("la-producers", 1))
    wait_for("the log", lambda: list_offset(RawConn(node.bootstrap), "la-producers", 0, -1).error_code == 0)
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, enable_idempotence=True, linger_ms=0)
    try:
        for i in range(5):
            producer.send("la-producers", value=f"{i}".encode(), partition=0).get(timeout=30)
    finally:
        producer.close()
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        states = admin.describe_producers([TopicPartition("la-producers", 0)])
        (state,) = states[TopicPartition("la-producers", 0)].active_producers
        assert state.producer_id >= 0
        assert (state.producer_epoch, state.last_sequence) == (0, 4)
        assert state.last_timestamp > 0
        assert (state.coordinator_epoch, state.current_transaction_start_offset) == (-1, -1)
        # A partition without producers, and one that does not exist.
        create(node, ("la-quiet", 1))
        wait_for("the log", lambda: list_offset(RawConn(node.bootstrap), "la-quiet", 0, -1).error_code == 0)
        assert admin.describe_producers([TopicPartition("la-quiet", 0)])[TopicPartition("la-quiet", 0)].active_producers == []
    finally:
        admin.close()


def test_new_partitions_spread_over_the_log_dirs(start_node, tmp_path):
    # Kafka's LogManager.nextLogDirs: each new partition goes to the dir holding the fewest
    # logs, counting the partitions of the same topic placed just before it.
    dirs = [tmp_path / "first", tmp_path / "second"]
    for d in dirs:
        d.mkdir()
    node = start_node({"log.dirs": ",".join(map(str, dirs)), "auto.create.topics.enable": "false"})

    def per_dir(topic):
        return [sum(1 for name in os.listdir(d) if name.rsplit("-", 1)[0] == topic) for d in dirs]

    for topic, partitions in [("spread-four", 4), ("spread-eight", 8), ("spread-three", 3)]:
        create(node, (topic, partitions))
        wait_for(f"the logs of {topic}", lambda: sum(per_dir(topic)) == partitions)
    assert per_dir("spread-four") == [2, 2]
    assert per_dir("spread-eight") == [4, 4]
    assert sorted(per_dir("spread-three")) == [1, 2]
