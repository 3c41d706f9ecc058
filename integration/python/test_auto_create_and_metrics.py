"""Topic auto-creation through Metadata (only with auto.create.topics.enable=true and a request
that allows it), and the Prometheus endpoint after real client traffic."""

import re

from conftest import RawConn, wait_for
from kafka import KafkaAdminClient, KafkaConsumer
from kafka.protocol.metadata import MetadataRequest, MetadataResponse


def metadata(conn, version, names, allow):
    req = MetadataRequest[version](topics=[MetadataRequest.MetadataRequestTopic(name=n) for n in names], allow_auto_topic_creation=allow)
    return {t.name: t for t in conn.send(req, MetadataResponse).topics}


def all_topics(conn):
    return {t.name for t in conn.send(MetadataRequest[12](topics=None), MetadataResponse).topics}


def test_auto_create_when_enabled(start_node):
    node = start_node({"auto.create.topics.enable": "true", "num.partitions": "2"})
    conn = RawConn(node.bootstrap)
    try:
        denied = metadata(conn, 12, ["auto-denied"], allow=False)
        assert denied["auto-denied"].error_code == 3
        assert "auto-denied" not in all_topics(conn)
        first = metadata(conn, 12, ["auto-yes"], allow=True)
        assert first["auto-yes"].error_code in (0, 5)  # NONE or LEADER_NOT_AVAILABLE while it is created
        t = wait_for("auto-yes created", lambda: (lambda m: m if m.error_code == 0 else None)(metadata(conn, 12, ["auto-yes"], allow=True)["auto-yes"]))
        assert len(t.partitions) == 2
        # v0-3 have no flag and always allow.
        metadata(conn, 1, ["auto-v1"], allow=True)
        wait_for("auto-v1 created", lambda: "auto-v1" in all_topics(conn))
    finally:
        conn.close()


def test_no_auto_create_when_disabled(start_node):
    node = start_node({"auto.create.topics.enable": "false"})
    conn = RawConn(node.bootstrap)
    try:
        for version in (1, 4, 12, 13):
            got = metadata(conn, version, [f"no-auto-v{version}"], allow=True)
            assert got[f"no-auto-v{version}"].error_code == 3
        assert all_topics(conn) == set()
        # A consumer asking about topics does not create any either.
        consumer = KafkaConsumer(bootstrap_servers=node.bootstrap)
        try:
            assert consumer.topics() == set()
        finally:
            consumer.close()
    finally:
        conn.close()


def metric(text, name, **labels):
    """Value of the sample `name` whose labels include `labels` (label order is free)."""
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        if all(got.get(k) == v for k, v in labels.items()):
            return float(m.group(4))
    return None


def test_metrics_after_client_traffic(start_node):
    node = start_node()
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap, client_id="pytest-metrics")
    try:
        admin.create_topics({"metrics-a": {"num_partitions": 1, "replication_factor": 1}})
        admin.create_topics({"metrics-a": {"num_partitions": 1, "replication_factor": 1}}, raise_errors=False)
        admin.list_topics()
    finally:
        admin.close()

    def counted():
        text = node.metrics_text()
        return text if metric(text, "kafka_network_requestmetrics_requests_total", request="CreateTopics", version="7") == 2 else None

    text = wait_for("both CreateTopics v7 counted", counted)
    # kafka-python opens each connection with ApiVersions v4.
    assert (metric(text, "kafka_network_requestmetrics_requests_total", request="ApiVersions", version="4") or 0) >= 1
    assert (metric(text, "kafka_network_requestmetrics_requests_total", request="Metadata", version="13") or 0) >= 1
    assert metric(text, "kafka_network_requestmetrics_errors_total", request="CreateTopics", error="NONE") == 1
    assert metric(text, "kafka_network_requestmetrics_errors_total", request="CreateTopics", error="TOPIC_ALREADY_EXISTS") == 1
    assert metric(text, "kafka_network_requestmetrics_total_time_seconds_count", request="CreateTopics") == 2
    assert "# TYPE kafka_network_requestmetrics_total_time_seconds histogram" in text
