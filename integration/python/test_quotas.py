"""KIP-599 controller-mutation quota with real clients (reference §3.7): with
`controller_mutation_rate=2` for User:ANONYMOUS and a 10 x 1 s window the bucket holds 20 tokens.

* kafka-python sends CreateTopics v7 (strict): of two 30-partition topics one is created and the
  other fails with THROTTLING_QUOTA_EXCEEDED (89) and a throttle of at most 5 s; kafka-python
  then pauses the connection, so later sends go through a fresh client or raw connection.
* confluent-kafka sends CreateTopics v4 (permissive): both are created and the throttle is
  reported through `throttle_cb` (in seconds).
"""

import threading
import time

from conftest import RawConn
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaAdminClient
from kafka.protocol.admin import AlterClientQuotasRequest, AlterClientQuotasResponse, CreateTopicsRequest, CreateTopicsResponse, DescribeClientQuotasRequest, DescribeClientQuotasResponse

TIMEOUT = 30
OVERRIDES = {
    "auto.create.topics.enable": "false",
    "controller.quota.window.num": "10",
    "controller.quota.window.size.seconds": "1",
}


def set_rate(node, user="ANONYMOUS", rate=2.0):
    conn = RawConn(node.bootstrap)
    try:
        Entry = AlterClientQuotasRequest.EntryData
        req = AlterClientQuotasRequest[1](
            entries=[Entry(entity=[Entry.EntityData(entity_type="user", entity_name=user)], ops=[Entry.OpData(key="controller_mutation_rate", value=rate, remove=False)])],
            validate_only=False,
        )
        resp = conn.send(req, AlterClientQuotasResponse)
        assert [(e.error_code, e.error_message) for e in resp.entries] == [(0, None)]
        Comp = DescribeClientQuotasRequest.ComponentData
        resp = conn.send(DescribeClientQuotasRequest[1](components=[Comp(entity_type="user", match_type=0, match=user)], strict=False), DescribeClientQuotasResponse)
        assert resp.error_code == 0
        assert [(v.key, v.value) for e in resp.entries for v in e.values] == [("controller_mutation_rate", rate)]
    finally:
        conn.close()


def test_kafka_python_strict_create_topics(start_node):
    node = start_node(OVERRIDES)
    set_rate(node)
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, client_id="pytest-quota", request_timeout_ms=30000)
    try:
        result = admin.create_topics(
            {"topic-1": {"num_partitions": 30, "replication_factor": 1}, "topic-2": {"num_partitions": 30, "replication_factor": 1}},
            raise_errors=False,
        )
        codes = sorted(t["error_code"] for t in result["topics"])
        assert codes == [0, 89]
    finally:
        admin.close()
    # create_topics drops throttle_time_ms: read it from a raw v7 request of a fresh topic pair.
    conn = RawConn(node.bootstrap)
    try:
        Topic = CreateTopicsRequest.CreatableTopic
        req = CreateTopicsRequest[7](
            topics=[Topic(name=n, num_partitions=30, replication_factor=1, assignments=[], configs=[]) for n in ("topic-3", "topic-4")],
            timeout_ms=30000,
            validate_only=False,
        )
        resp = conn.send(req, CreateTopicsResponse)
        # The bucket is negative: every topic is rejected and the throttle says how long to wait.
        assert [t.error_code for t in resp.topics] == [89, 89]
        assert 0 < resp.throttle_time_ms <= 5000
        # The connection is muted, not closed: a request sent now is answered after the mute.
        sent = time.monotonic()
        resp2 = conn.send(req, CreateTopicsResponse)
        assert time.monotonic() - sent + 0.25 >= resp.throttle_time_ms / 1000.0
        assert len(resp2.topics) == 2
    finally:
        conn.close()


def test_confluent_permissive_create_reports_throttle(start_node):
    node = start_node(OVERRIDES)
    set_rate(node)
    throttles = []
    seen = threading.Event()

    def on_throttle(event):
        throttles.append(event.throttle_time)
        seen.set()

    admin = AdminClient({"bootstrap.servers": node.bootstrap, "client.id": "pytest-confluent-quota", "throttle_cb": on_throttle})
    futures = admin.create_topics([NewTopic("ck-1", num_partitions=30, replication_factor=1), NewTopic("ck-2", num_partitions=30, replication_factor=1)], operation_timeout=TIMEOUT)
    for name in ("ck-1", "ck-2"):
        assert futures[name].result(timeout=TIMEOUT) is None
    # throttle_cb is served from poll(); the admin client polls its own queue.
    deadline = time.monotonic() + TIMEOUT
    while not seen.is_set() and time.monotonic() < deadline:
        admin.poll(0.1)
    assert throttles, "no throttle reported"
    assert 0 < max(throttles) <= 20.0
    # CreatePartitions v2 (permissive) after the mute: both grow, the throttle is reported again.
    throttles.clear()
    seen.clear()
    futures = admin.create_partitions([NewPartitions("ck-1", 31), NewPartitions("ck-2", 31)], operation_timeout=TIMEOUT)
    for name in ("ck-1", "ck-2"):
        assert futures[name].result(timeout=60) is None
    deadline = time.monotonic() + TIMEOUT
    while not seen.is_set() and time.monotonic() < deadline:
        admin.poll(0.1)
    assert throttles and max(throttles) > 0
