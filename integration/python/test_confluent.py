"""confluent-kafka 2.16.1 (librdkafka 2.16.0) AdminClient against a real node: Metadata v13,
CreateTopics v4, DeleteTopics v4, CreatePartitions v2; describe_cluster goes through Metadata.

librdkafka never resolves a future for a topic the broker left out of a response, and cancels
requests of a garbage-collected client: every `result()` has a timeout and the client stays
referenced by the module fixture."""

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from conftest import wait_for

TIMEOUT = 30


@pytest.fixture(scope="module")
def admin(node):
    client = AdminClient({"bootstrap.servers": node.bootstrap, "client.id": "pytest-confluent", "socket.timeout.ms": 30000})
    yield client


def topics(admin):
    return admin.list_topics(timeout=TIMEOUT).topics


def kafka_error(future):
    with pytest.raises(KafkaException) as info:
        future.result(timeout=TIMEOUT)
    return info.value.args[0]


def test_list_topics_describes_the_node(node, admin):
    md = admin.list_topics(timeout=TIMEOUT)
    assert md.cluster_id
    assert md.controller_id == 1
    assert {b.id: (b.host, b.port) for b in md.brokers.values()} == {1: ("127.0.0.1", node.port)}


def test_create_topics(admin):
    futures = admin.create_topics(
        [NewTopic("ck-basic", num_partitions=3, replication_factor=1, config={"cleanup.policy": "compact"})],
        operation_timeout=TIMEOUT,
    )
    assert futures["ck-basic"].result(timeout=TIMEOUT) is None
    wait_for("ck-basic listed", lambda: "ck-basic" in topics(admin))
    t = topics(admin)["ck-basic"]
    assert t.error is None
    assert sorted(t.partitions) == [0, 1, 2]
    for p in t.partitions.values():
        assert (p.leader, list(p.replicas), list(p.isrs)) == (1, [1], [1])


def test_create_topic_errors(admin):
    admin.create_topics([NewTopic("ck-exists", num_partitions=1, replication_factor=1)])["ck-exists"].result(timeout=TIMEOUT)
    futures = admin.create_topics(
        [
            NewTopic("ck-exists", num_partitions=1, replication_factor=1),
            NewTopic("ck-zero-parts", num_partitions=0, replication_factor=1),
            NewTopic("ck-big-rf", num_partitions=1, replication_factor=3),
        ],
        operation_timeout=TIMEOUT,
    )
    exists = kafka_error(futures["ck-exists"])
    assert exists.code() == KafkaError.TOPIC_ALREADY_EXISTS
    assert exists.str() == "Topic 'ck-exists' already exists."
    zero = kafka_error(futures["ck-zero-parts"])
    assert zero.code() == KafkaError.INVALID_PARTITIONS
    assert zero.str() == "Number of partitions was set to an invalid non-positive value."
    big = kafka_error(futures["ck-big-rf"])
    assert big.code() == KafkaError.INVALID_REPLICATION_FACTOR
    assert big.str().startswith("Unable to replicate the partition 3 time(s)")
    names = topics(admin)
    assert "ck-zero-parts" not in names and "ck-big-rf" not in names


def test_validate_only(admin):
    futures = admin.create_topics([NewTopic("ck-validate", num_partitions=2, replication_factor=1)], validate_only=True)
    assert futures["ck-validate"].result(timeout=TIMEOUT) is None
    assert "ck-validate" not in topics(admin)


def test_delete_topics(admin):
    admin.create_topics([NewTopic("ck-delete", num_partitions=1, replication_factor=1)])["ck-delete"].result(timeout=TIMEOUT)
    futures = admin.delete_topics(["ck-delete", "ck-never-existed"], operation_timeout=TIMEOUT)
    assert futures["ck-delete"].result(timeout=TIMEOUT) is None
    assert kafka_error(futures["ck-never-existed"]).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    wait_for("ck-delete gone", lambda: "ck-delete" not in topics(admin))


def test_create_partitions(admin):
    admin.create_topics([NewTopic("ck-grow", num_partitions=1, replication_factor=1)])["ck-grow"].result(timeout=TIMEOUT)
    futures = admin.create_partitions([NewPartitions("ck-grow", 3)], operation_timeout=TIMEOUT)
    assert futures["ck-grow"].result(timeout=TIMEOUT) is None
    wait_for("3 partitions", lambda: len(topics(admin)["ck-grow"].partitions) == 3)
    err = kafka_error(admin.create_partitions([NewPartitions("ck-grow", 2)])["ck-grow"])
    assert err.code() == KafkaError.INVALID_PARTITIONS
    assert err.str() == "The topic ck-grow currently has 3 partition(s); 2 would not be an increase."
    err = kafka_error(admin.create_partitions([NewPartitions("ck-missing", 2)])["ck-missing"])
    assert err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_describe_cluster(node, admin):
    desc = admin.describe_cluster(request_timeout=TIMEOUT).result(timeout=TIMEOUT)
    assert desc.cluster_id
    assert desc.controller.id == 1
    assert [(n.id, n.host, n.port) for n in desc.nodes] == [(1, "127.0.0.1", node.port)]
