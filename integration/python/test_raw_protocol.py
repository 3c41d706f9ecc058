"""Every version of every API in the node's table, encoded with kafka-python's message classes
(`kafka.protocol.metadata`, `kafka.protocol.admin`) on a bare socket at an exact version, decoded
strictly (no leftover bytes), with Kafka's error codes and messages."""

import struct
import uuid

import pytest
from conftest import RawConn, wait_for
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

Topic = CreateTopicsRequest.CreatableTopic
REQUIRED = {18: (0, 4), 3: (0, 13), 60: (0, 2), 19: (2, 7), 20: (1, 6), 37: (0, 3)}


def metadata_req(version, topics=None, allow=False):
    if topics is None:
        topics = [] if version == 0 else None
    else:
        topics = [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
    return MetadataRequest[version](topics=topics, allow_auto_topic_creation=allow)


def topic_names(conn):
    resp = conn.send(metadata_req(12), MetadataResponse)
    return {t.name: t for t in resp.topics}


def create(conn, version, name, partitions=1, rf=1, configs=None, validate_only=False):
    cfgs = [Topic.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()]
    req = CreateTopicsRequest[version](
        topics=[Topic(name=name, num_partitions=partitions, replication_factor=rf, assignments=[], configs=cfgs)],
        timeout_ms=30000,
        validate_only=validate_only,
    )
    return conn.send(req, CreateTopicsResponse)


@pytest.mark.parametrize("version", range(0, 5))
def test_api_versions_every_version(raw, version):
    kwargs = {"client_software_name": "pytest", "client_software_version": "1.0"} if version >= 3 else {}
    resp = raw().send(ApiVersionsRequest[version](**kwargs), ApiVersionsResponse)
    assert resp.error_code == 0
    table = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert len(table) == len(resp.api_keys), "an api key is listed twice"
    for key, rng in REQUIRED.items():
        assert table.get(key) == rng, f"api key {key}: advertised {table.get(key)}, want {rng}"
    if version >= 1:
        assert resp.throttle_time_ms == 0


@pytest.mark.parametrize("version", [5, 127])
def test_api_versions_unsupported_version_falls_back_to_v0(node, version):
    """KIP-511: header v2 (flexible rule), body unparsed; answer is a v0 body, header v0."""
    conn = RawConn(node.bootstrap)
    try:
        req = ApiVersionsRequest[4](client_software_name="future", client_software_version="9")
        req.with_header(correlation_id=0x0A0B0C0D, client_id="future")
        frame = bytearray(req.encode(header=True, framed=True))
        struct.pack_into(">h", frame, 6, version)  # request_api_version, right after the api key
        conn.send_bytes(bytes(frame))
        body = conn.recv_frame()
        assert body == struct.pack(">ihihhh", 0x0A0B0C0D, 35, 1, 18, 0, 4)
        # kafka-python's own decoder reads it as v0 with error 35 ...
        resp = ApiVersionsResponse.decode(body, version=4, header=True)
        assert resp.error_code == 35
        assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 4)]
        # ... and retries at the advertised max on the same connection.
        again = conn.send(ApiVersionsRequest[4](client_software_name="future", client_software_version="9"), ApiVersionsResponse)
        assert again.error_code == 0
    finally:
        conn.close()


@pytest.mark.parametrize("version", range(0, 14))
def test_metadata_every_version(node, raw, version):
    conn = raw()
    name = f"raw-md-v{version}"
    assert create(conn, 7, name, partitions=2).topics[0].error_code == 0
    wait_for(f"{name} in metadata", lambda: name in topic_names(conn))
    resp = conn.send(metadata_req(version), MetadataResponse)
    assert [(b.node_id, b.host, b.port) for b in resp.brokers] == [(1, "127.0.0.1", node.port)]
    if version >= 1:
        assert resp.controller_id == 1
    if version >= 2:
        assert resp.cluster_id
    topics = {t.name: t for t in resp.topics}
    assert name in topics
    t = topics[name]
    assert t.error_code == 0
    assert sorted(p.partition_index for p in t.partitions) == [0, 1]
    for p in t.partitions:
        assert (p.error_code, p.leader_id, list(p.replica_nodes), list(p.isr_nodes)) == (0, 1, [1], [1])
    if version >= 10:
        assert t.topic_id != uuid.UUID(int=0)
    # Unknown topic without auto-creation (this node has it off).
    missing = conn.send(metadata_req(version, [f"raw-missing-v{version}"]), MetadataResponse)
    assert [(t.name, t.error_code) for t in missing.topics] == [(f"raw-missing-v{version}", 3)]


@pytest.mark.parametrize("version", range(0, 3))
def test_describe_cluster_every_version(node, raw, version):
    conn = raw()
    md = conn.send(metadata_req(12), MetadataResponse)
    kwargs = {"endpoint_type": 1} if version >= 1 else {}
    resp = conn.send(DescribeClusterRequest[version](include_cluster_authorized_operations=False, **kwargs), DescribeClusterResponse)
    assert resp.error_code == 0
    assert resp.error_message is None
    assert resp.cluster_id == md.cluster_id
    assert resp.controller_id == 1
    assert [(b.broker_id, b.host, b.port) for b in resp.brokers] == [(1, "127.0.0.1", node.port)]
    if version >= 1:
        assert resp.endpoint_type == 1


@pytest.mark.parametrize("version", range(2, 8))
def test_create_topics_every_version(raw, version):
    conn = raw()
    name = f"raw-ct-v{version}"
    resp = create(conn, version, name, partitions=3, configs={"cleanup.policy": "compact"})
    (t,) = resp.topics
    assert (t.name, t.error_code, t.error_message) == (name, 0, None)
    if version >= 5:
        assert (t.num_partitions, t.replication_factor) == (3, 1)
        cfg = {c.name: c.value for c in t.configs}
        assert cfg.get("cleanup.policy") == "compact"
    if version >= 7:
        assert t.topic_id != uuid.UUID(int=0)

    dup = create(conn, version, name).topics[0]
    assert (dup.error_code, dup.error_message) == (36, f"Topic '{name}' already exists.")
    bad_parts = create(conn, version, f"raw-ct-zero-v{version}", partitions=0).topics[0]
    assert (bad_parts.error_code, bad_parts.error_message) == (37, "Number of partitions was set to an invalid non-positive value.")
    bad_rf = create(conn, version, f"raw-ct-rf-v{version}", rf=2).topics[0]
    assert bad_rf.error_code == 38
    assert (bad_rf.error_message or "").startswith(
        "Unable to replicate the partition 2 time(s): The target replication factor of 2 cannot be reached because only 1 broker(s) are registered"
    )
    validated = create(conn, version, f"raw-ct-validate-v{version}", validate_only=True).topics[0]
    assert validated.error_code == 0
    names = topic_names(conn)
    assert f"raw-ct-validate-v{version}" not in names
    assert f"raw-ct-zero-v{version}" not in names and f"raw-ct-rf-v{version}" not in names


@pytest.mark.parametrize("version", range(1, 7))
def test_delete_topics_every_version(raw, version):
    conn = raw()
    name = f"raw-dt-v{version}"
    assert create(conn, 7, name).topics[0].error_code == 0
    if version >= 6:
        State = DeleteTopicsRequest.DeleteTopicState
        req = DeleteTopicsRequest[version](topics=[State(name=name), State(name="raw-dt-missing")], timeout_ms=30000)
    else:
        req = DeleteTopicsRequest[version](topic_names=[name, "raw-dt-missing"], timeout_ms=30000)
    resp = conn.send(req, DeleteTopicsResponse)
    codes = {r.name: r.error_code for r in resp.responses}
    assert codes == {name: 0, "raw-dt-missing": 3}
    wait_for(f"{name} to disappear", lambda: name not in topic_names(conn))


def test_delete_topics_by_id_v6(raw):
    conn = raw()
    created = create(conn, 7, "raw-dt-by-id").topics[0]
    State = DeleteTopicsRequest.DeleteTopicState
    unknown = uuid.uuid4()
    resp = conn.send(
        DeleteTopicsRequest[6](topics=[State(topic_id=created.topic_id), State(topic_id=unknown)], timeout_ms=30000),
        DeleteTopicsResponse,
    )
    got = {r.topic_id: (r.name, r.error_code) for r in resp.responses}
    assert got == {created.topic_id: ("raw-dt-by-id", 0), unknown: (None, 100)}


@pytest.mark.parametrize("version", range(0, 4))
def test_create_partitions_every_version(raw, version):
    conn = raw()
    name = f"raw-cp-v{version}"
    assert create(conn, 7, name).topics[0].error_code == 0
    T = CreatePartitionsRequest.CreatePartitionsTopic

    def grow(count, validate_only=False, topic=name):
        req = CreatePartitionsRequest[version](topics=[T(name=topic, count=count, assignments=None)], timeout_ms=30000, validate_only=validate_only)
        (r,) = conn.send(req, CreatePartitionsResponse).results
        return r.name, r.error_code, r.error_message

    assert grow(3) == (name, 0, None)
    wait_for("3 partitions", lambda: len(topic_names(conn)[name].partitions) == 3)
    assert grow(2) == (name, 37, f"The topic {name} currently has 3 partition(s); 2 would not be an increase.")
    assert grow(3) == (name, 37, "Topic already has 3 partition(s).")
    assert grow(6, validate_only=True) == (name, 0, None)
    assert len(topic_names(conn)[name].partitions) == 3
    assert grow(2, topic="raw-cp-missing")[1] == 3
