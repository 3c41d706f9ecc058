"""kafka-python 3.0.12 high-level clients against a real node: KafkaAdminClient (ApiVersions v4
handshake, Metadata v13, CreateTopics v7, DeleteTopics v6, CreatePartitions v3, DescribeCluster
v2) and KafkaConsumer.topics()."""

import uuid

import pytest
from conftest import wait_for
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
)


@pytest.fixture(scope="module")
def admin(node):
    client = KafkaAdminClient(bootstrap_servers=node.bootstrap, client_id="pytest-kafka-python", request_timeout_ms=30000)
    yield client
    client.close()


def topic_partitions(admin, name):
    topics = {t["name"]: t for t in admin.describe_topics([name])}
    t = topics.get(name)
    if t is None or t["error_code"] != 0:
        return None
    return len(t["partitions"])


def test_create_list_and_describe(admin):
    result = admin.create_topics(
        {"kp-basic": {"num_partitions": 3, "replication_factor": 1, "configs": {"cleanup.policy": "compact", "retention.ms": "3600000"}}}
    )
    (t,) = result["topics"]
    assert (t["name"], t["error_code"], t["error_message"]) == ("kp-basic", 0, None)
    assert (t["num_partitions"], t["replication_factor"]) == (3, 1)
    assert t["configs"]["cleanup.policy"]["value"] == "compact"
    assert t["configs"]["retention.ms"]["value"] == "3600000"
    assert t["topic_id"] is not None
    wait_for("kp-basic listed", lambda: "kp-basic" in admin.list_topics())
    assert topic_partitions(admin, "kp-basic") == 3
    (described,) = admin.describe_topics(["kp-basic"])
    for p in described["partitions"]:
        assert (p["leader_id"], list(p["replica_nodes"]), list(p["isr_nodes"])) == (1, [1], [1])


def test_create_with_defaults(admin):
    """`create_topics(["name"])` sends -1/-1 (KIP-464). kafka-python refuses that client-side
    when the broker version it infers from the advertised ApiVersions ranges is below 2.4; it
    infers the version from APIs such as Produce/Fetch/ListOffsets, so a node advertising only
    admin APIs is taken for Kafka 1.0 and this fails before anything is sent."""
    result = admin.create_topics(["kp-defaults"])  # -1 / -1: broker defaults
    (t,) = result["topics"]
    assert t["error_code"] == 0
    assert t["replication_factor"] == 1
    assert t["num_partitions"] >= 1


def test_topic_already_exists(admin):
    admin.create_topics({"kp-dup": {"num_partitions": 1, "replication_factor": 1}})
    with pytest.raises(TopicAlreadyExistsError):
        admin.create_topics({"kp-dup": {"num_partitions": 1, "replication_factor": 1}})
    result = admin.create_topics({"kp-dup": {"num_partitions": 1, "replication_factor": 1}}, raise_errors=False)
    (t,) = result["topics"]
    assert (t["error_code"], t["error_message"]) == (36, "Topic 'kp-dup' already exists.")


def test_invalid_partitions(admin):
    with pytest.raises(InvalidPartitionsError):
        admin.create_topics({"kp-zero": {"num_partitions": 0, "replication_factor": 1}})
    result = admin.create_topics({"kp-zero": {"num_partitions": 0, "replication_factor": 1}}, raise_errors=False)
    (t,) = result["topics"]
    assert (t["error_code"], t["error_message"]) == (37, "Number of partitions was set to an invalid non-positive value.")
    assert "kp-zero" not in admin.list_topics()


def test_invalid_replication_factor(admin):
    with pytest.raises(InvalidReplicationFactorError):
        admin.create_topics({"kp-rf": {"num_partitions": 1, "replication_factor": 3}})
    result = admin.create_topics({"kp-rf": {"num_partitions": 1, "replication_factor": 0}}, raise_errors=False)
    (t,) = result["topics"]
    assert (t["error_code"], t["error_message"]) == (38, "Replication factor must be larger than 0, or -1 to use the default value.")
    assert "kp-rf" not in admin.list_topics()


def test_validate_only(admin):
    result = admin.create_topics({"kp-validate": {"num_partitions": 2, "replication_factor": 1}}, validate_only=True)
    (t,) = result["topics"]
    assert t["error_code"] == 0
    assert "kp-validate" not in admin.list_topics()


def test_delete_topics_by_name(admin):
    admin.create_topics({"kp-delete": {"num_partitions": 1, "replication_factor": 1}})
    wait_for("kp-delete listed", lambda: "kp-delete" in admin.list_topics())
    result = admin.delete_topics(["kp-delete"])
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [("kp-delete", 0)]
    wait_for("kp-delete gone", lambda: "kp-delete" not in admin.list_topics())
    with pytest.raises(UnknownTopicOrPartitionError):
        admin.delete_topics(["kp-delete"])


def test_delete_topics_by_id(admin):
    created = admin.create_topics({"kp-delete-id": {"num_partitions": 1, "replication_factor": 1}})
    topic_id = created["topics"][0]["topic_id"]
    result = admin.delete_topics([uuid.UUID(topic_id) if isinstance(topic_id, str) else topic_id])
    assert [(t["name"], t["error_code"]) for t in result["topics"]] == [("kp-delete-id", 0)]
    wait_for("kp-delete-id gone", lambda: "kp-delete-id" not in admin.list_topics())


def test_create_partitions(admin):
    admin.create_topics({"kp-grow": {"num_partitions": 1, "replication_factor": 1}})
    resp = admin.create_partitions({"kp-grow": 4})
    assert [(r.name, r.error_code) for r in resp.results] == [("kp-grow", 0)]
    wait_for("4 partitions", lambda: topic_partitions(admin, "kp-grow") == 4)
    with pytest.raises(InvalidPartitionsError):
        admin.create_partitions({"kp-grow": 2})
    resp = admin.create_partitions({"kp-grow": 2}, raise_errors=False)
    assert [(r.error_code, r.error_message) for r in resp.results] == [
        (37, "The topic kp-grow currently has 4 partition(s); 2 would not be an increase.")
    ]
    resp = admin.create_partitions({"kp-grow": {"count": 6, "assignments": [[1], [1]]}}, validate_only=True)
    assert resp.results[0].error_code == 0
    assert topic_partitions(admin, "kp-grow") == 4


def test_describe_cluster(node, admin):
    cluster = admin.describe_cluster()
    assert cluster["cluster_id"]
    assert cluster["controller_id"] == 1
    assert [(b["broker_id"], b["host"], b["port"]) for b in cluster["brokers"]] == [(1, "127.0.0.1", node.port)]


def test_consumer_topics(node, admin):
    admin.create_topics({"kp-consumer-visible": {"num_partitions": 2, "replication_factor": 1}})
    consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, client_id="pytest-consumer", request_timeout_ms=30000)
    try:
        wait_for("consumer sees the topic", lambda: "kp-consumer-visible" in consumer.topics())
        assert consumer.partitions_for_topic("kp-consumer-visible") == {0, 1}
    finally:
        consumer.close()


def test_client_negotiated_api_versions_v4(node, admin):
    """kafka-python's first request on every connection is ApiVersions v4: the node answers it
    directly (no fallback needed) and counts it."""
    from test_auto_create_and_metrics import metric

    admin.list_topics()
    text = node.metrics_text()
    assert (metric(text, "kafka_network_requestmetrics_requests_total", request="ApiVersions", version="4") or 0) >= 1


def test_describe_topic_partitions_pages_with_a_cursor(admin):
    # KIP-966's DescribeTopicPartitions as kafka-python sends it: name order, pages of at most
    # `response_partition_limit` partitions, and a cursor to the next page.
    admin.create_topics({"kp-dtp-b": {"num_partitions": 3, "replication_factor": 1},
                         "kp-dtp-a": {"num_partitions": 2, "replication_factor": 1}})
    wait_for("both topics", lambda: topic_partitions(admin, "kp-dtp-a") == 2 and topic_partitions(admin, "kp-dtp-b") == 3)
    names = ["kp-dtp-b", "kp-dtp-a", "kp-dtp-missing"]
    first = admin.describe_topic_partitions(names, response_partition_limit=3)
    assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in first["topics"]] == [
        ("kp-dtp-a", [0, 1]), ("kp-dtp-b", [0])]
    assert first["next_cursor"] == {"topic_name": "kp-dtp-b", "partition_index": 1}
    second = admin.describe_topic_partitions(names, response_partition_limit=3, cursor=first["next_cursor"])
    assert [(t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]]) for t in second["topics"]] == [
        ("kp-dtp-b", 0, [1, 2]), ("kp-dtp-missing", 3, [])]
    assert second["next_cursor"] is None
    (described,) = [t for t in first["topics"] if t["name"] == "kp-dtp-a"]
    (metadata,) = admin.describe_topics(["kp-dtp-a"])
    assert str(described["topic_id"]) == str(metadata["topic_id"])
    for partition in described["partitions"]:
        assert (partition["leader_id"], partition["replica_nodes"], partition["isr_nodes"], partition["offline_replicas"]) == (1, [1], [1], [])
        assert partition["error_code"] == 0 and partition["leader_epoch"] >= 0
