"""A three-node cluster (combined broker+controller nodes) with no unauthenticated listener: the
controller listener is SASL_PLAINTEXT with PLAIN (the controllers' principal comes from
configuration, as SCRAM credentials live in the metadata the quorum has not formed yet), the
broker listener SASL_PLAINTEXT with SCRAM-SHA-512 (the brokers' and the admin's credentials
bootstrapped with `storage format --add-scram`), and an ACL authorizer whose only super users are
those principals. The quorum forms, an RF-3 topic is created and replicated over the
authenticated inter-broker listener, an idempotent acks=all producer survives a kill -9 of the
partition leader, and every acknowledged record is read back; then a broker with a wrong
controller password cannot join, and one with the right password joins over its raft link.

Nothing sleeps to synchronise: every wait is `wait_for` on a condition with a deadline.
"""

import os
import re
import shutil
import socket
import ssl
import struct
import subprocess
import time

import pytest

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import gregor_bin, wait_for
from ports import reserve_port
from test_replication import ClusterNode, random_uuid
from test_tls import openssl, signed

TIMEOUT = 60.0
CONTROLLER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                   'username="ctl" password="{password}" user_ctl="ctl-secret";')
BROKER_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
               'username="broker" password="broker-secret";')


class SecureNode(ClusterNode):
    """A cluster node whose client listener is named BROKER."""

    client_listener = "BROKER"


def overrides(node_id, listeners, voters, controller_password="ctl-secret", roles="broker,controller"):
    return {
        "node.id": str(node_id),
        "process.roles": roles,
        "listeners": listeners,
        "controller.quorum.bootstrap.servers": voters,
        "broker.session.timeout.ms": "3000",
        "replica.lag.time.max.ms": "10000",
        "listener.security.protocol.map": "BROKER:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "inter.broker.listener.name": "BROKER",
        "listener.name.broker.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.broker.scram-sha-512.sasl.jaas.config": BROKER_JAAS,
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_JAAS.format(password=controller_password),
        "authorizer.class.name": "StandardAuthorizer",
        "super.users": "User:ctl;User:broker;User:admin",
    }


SCRAM_USERS = ["--add-scram", "SCRAM-SHA-512=[name=broker,password=broker-secret]",
               "--add-scram", "SCRAM-SHA-512=[name=admin,password=admin-secret]"]


def client_config(nodes, **extra):
    config = {
        "bootstrap.servers": ",".join(n.bootstrap for n in nodes),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": "admin-secret",
    }
    config.update(extra)
    return config


def partition_state(admin, topic):
    p = admin.list_topics(topic=topic, timeout=10).topics[topic].partitions[0]
    return p.leader, sorted(p.replicas), sorted(p.isrs)


def metric(node, name, **labels):
    total = 0.0
    for line in node.metrics_text().splitlines():
        if not (line.startswith(name + " ") or line.startswith(name + "{")):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.split()[-1])
    return total


def test_an_authenticated_cluster_replicates_and_survives_a_leader_kill():
    cluster_id = random_uuid()
    specs = [(i, reserve_port(), random_uuid()) for i in (1, 2, 3)]
    initial = ",".join(f"{i}@127.0.0.1:{port}:{d}" for i, port, d in specs)
    voters = ",".join(f"127.0.0.1:{port}" for _, port, _ in specs)
    nodes = [SecureNode(overrides(i, f"BROKER://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}", voters),
                        ["--cluster-id", cluster_id, "--initial-controllers", initial] + SCRAM_USERS)
             for i, port, _ in specs]
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    intruder = newcomer = None
    try:
        for node in nodes:
            node.wait_ready()
        admin = AdminClient(client_config(nodes))
        wait_for("three unfenced brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=TIMEOUT)
        topic = "secured"
        admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
        wait_for("a leader and a full ISR", lambda: (lambda s: s[0] >= 0 and s[2] == [1, 2, 3])(partition_state(admin, topic)), timeout=TIMEOUT)

        acked = []
        errors = []

        def delivered(err, msg):
            if err is None:
                acked.append((msg.offset(), msg.value()))
            else:
                errors.append(err)

        producer = Producer(client_config(nodes, **{
            "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "message.timeout.ms": 120000, "topic.metadata.refresh.interval.ms": 1000}))
        sent = 0

        def produce_acknowledged(count, what):
            """Produces until `count` more records are acknowledged, within TIMEOUT."""
            nonlocal sent
            target = len(acked) + count
            deadline = time.monotonic() + TIMEOUT
            while len(acked) < target:
                assert not errors, f"non-retriable errors reached the producer: {errors[:5]}"
                assert time.monotonic() < deadline, f"{what}: {len(acked)} of {target} acknowledged"
                try:
                    producer.produce(topic, value=f"v-{sent}".encode(), partition=0, on_delivery=delivered)
                    sent += 1
                except BufferError:
                    pass
                producer.poll(0.01)

        produce_acknowledged(50, "writes acknowledged by the first leader")
        # The followers fetched those records over SCRAM: every ISR member has them.
        leader = partition_state(admin, topic)[0]
        victim = by_id[leader]
        victim.kill9()
        alive = [n for n in nodes if n is not victim]
        survivors = AdminClient(client_config(alive))
        wait_for("a new leader", lambda: partition_state(survivors, topic)[0] not in (-1, leader), timeout=TIMEOUT)
        produce_acknowledged(50, "writes acknowledged by the new leader")
        victim.start()
        victim.wait_ready()
        admin = AdminClient(client_config(nodes))
        wait_for("the restarted node back in the ISR", lambda: partition_state(admin, topic)[2] == [1, 2, 3], timeout=TIMEOUT)
        producer.flush(60)
        assert not errors, f"non-retriable errors reached the producer: {errors[:5]}"

        consumer = Consumer(client_config(nodes, **{"group.id": "check", "enable.auto.commit": False}))
        consumer.assign([TopicPartition(topic, 0, 0)])
        seen = {}
        wanted = {value for _, value in acked}

        def read_all():
            for msg in consumer.consume(500, timeout=1.0):
                if msg.error() is None:
                    seen[msg.offset()] = msg.value()
            return wanted <= set(seen.values())

        wait_for("every acknowledged record", read_all, timeout=TIMEOUT)
        consumer.close()
        for offset, value in acked:
            assert seen.get(offset) == value, f"acknowledged {value!r} at {offset} is missing or different"
        assert len(set(seen.values())) == len(seen), "a record was written twice"

        # Every controller listener authenticated its peers, and none refused a private RPC.
        assert sum(metric(n, "gregor_authentications_total", listener="CONTROLLER", mechanism="PLAIN") for n in nodes) > 0
        assert sum(metric(n, "gregor_authentications_total", listener="BROKER", mechanism="SCRAM-SHA-512") for n in nodes) > 0
        assert sum(metric(n, "gregor_network_connections_closed_total", listener="CONTROLLER", reason="cluster_authorization_failed") for n in nodes) == 0

        # gregor metadata-quorum describes the quorum through the authenticated controller
        # listener with --command-config's PLAIN credentials, and is refused without them.
        properties = os.path.join(os.path.dirname(nodes[0].log_path), "ctl.properties")
        with open(properties, "w") as f:
            f.write("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                    'username="ctl" password="ctl-secret";\n')
        controllers = ",".join(f"127.0.0.1:{port}" for _, port, _ in specs)
        describe = [str(gregor_bin()), "metadata-quorum", "--bootstrap-controller", controllers]
        status = subprocess.run(describe + ["--command-config", properties, "describe", "--status"],
                                capture_output=True, text=True, timeout=60)
        assert status.returncode == 0, status.stderr
        assert re.search(r"CurrentVoters:\s+\[", status.stdout) and "LeaderId:" in status.stdout, status.stdout
        refused = subprocess.run(describe + ["describe", "--status"], capture_output=True, text=True, timeout=60)
        assert refused.returncode != 0

        # A broker whose JAAS entry has a wrong controller password cannot join.
        failures = sum(metric(n, "gregor_authentication_failures_total", listener="CONTROLLER") for n in nodes)
        intruder = SecureNode(overrides(4, "BROKER://127.0.0.1:0", voters, controller_password="wrong", roles="broker"),
                              ["--cluster-id", cluster_id])
        wait_for("the intruder refused", lambda: "SASL PLAIN authentication as ctl to listener CONTROLLER failed" in intruder.log()
                 and sum(metric(n, "gregor_authentication_failures_total", listener="CONTROLLER") for n in nodes) > failures, timeout=TIMEOUT)
        assert intruder._ready_line() is None
        assert 4 not in admin.list_topics(timeout=10).brokers

        # A broker without a controller listener and with the right password joins: its raft
        # link and its forwarding channel run over the authenticated controller listener.
        newcomer = SecureNode(overrides(5, "BROKER://127.0.0.1:0", voters, roles="broker"), ["--cluster-id", cluster_id])
        newcomer.wait_ready()
        wait_for("broker 5 registered and unfenced", lambda: 5 in admin.list_topics(timeout=10).brokers, timeout=TIMEOUT)
        # A topic created through it is forwarded to the active controller.
        forwarded = AdminClient(client_config([newcomer]))
        forwarded.create_topics([NewTopic("through-5", 1, 1)])["through-5"].result(30)
        wait_for("the topic on every node", lambda: "through-5" in admin.list_topics(timeout=10).topics, timeout=TIMEOUT)
    finally:
        if intruder is not None:
            intruder.close()
        if newcomer is not None:
            newcomer.close()
        for node in nodes:
            node.close()


# A short session lifetime (`connections.max.reauth.ms`), so a test sees several renewals; peers
# renew a second before it ends.
REAUTH_MS = 3000


def test_peer_sessions_renew_on_every_link():
    """KIP-368 between peers, with `connections.max.reauth.ms` on both listeners: followers'
    replica fetchers renew their SCRAM sessions on the broker listener in band, a broker-only
    node replaces its raft link (on which the leader writes, so no renewal in band) before the
    leader would end it, and no node closes a connection as expired while records replicate to
    both followers (one of them the broker-only node) and metadata reaches it."""
    cluster_id = random_uuid()
    specs = [(i, reserve_port(), random_uuid()) for i in (1, 2, 3)]
    initial = ",".join(f"{i}@127.0.0.1:{port}:{d}" for i, port, d in specs)
    voters = ",".join(f"127.0.0.1:{port}" for _, port, _ in specs)
    reauth = {"connections.max.reauth.ms": str(REAUTH_MS)}
    nodes = [SecureNode({**overrides(i, f"BROKER://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}", voters), **reauth},
                        ["--cluster-id", cluster_id, "--initial-controllers", initial] + SCRAM_USERS)
             for i, port, _ in specs]
    try:
        for node in nodes:
            node.wait_ready()
        nodes.append(SecureNode({**overrides(5, "BROKER://127.0.0.1:0", voters, roles="broker"), **reauth},
                                ["--cluster-id", cluster_id]))
        nodes[-1].wait_ready()
        admin = AdminClient(client_config(nodes[:3]))
        wait_for("four unfenced brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 4, timeout=TIMEOUT)
        topic = "renewed"
        # Acknowledged only once both followers (2, and the broker-only 5) fetched each record.
        admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 5]], config={"min.insync.replicas": "3"})])[topic].result(30)
        wait_for("leader 1 and a full ISR", lambda: partition_state(admin, topic) == (1, [1, 2, 5], [1, 2, 5]), timeout=TIMEOUT)
        scram_authentications = sum(metric(n, "gregor_authentications_total", listener="BROKER", mechanism="SCRAM-SHA-512") for n in nodes)

        # Records replicate for three session lifetimes, one at a time: librdkafka renews its
        # own sessions only between requests, which a pipelined producer may not leave it.
        producer = Producer(client_config(nodes[:3], **{"acks": "all", "message.timeout.ms": 60000}))
        failures = []
        acked = 0
        until = time.monotonic() + 3 * REAUTH_MS / 1000
        while time.monotonic() < until:
            producer.produce(topic, value=f"v-{acked}".encode(), partition=0,
                             on_delivery=lambda err, _: err and failures.append(err))
            assert producer.flush(TIMEOUT) == 0 and not failures, f"record {acked} not acknowledged: {failures}"
            acked += 1
        assert partition_state(admin, topic)[2] == [1, 2, 5]

        # The broker-only node still follows the metadata log over its (replaced) raft link.
        through = AdminClient(client_config(nodes[3:]))
        through.create_topics([NewTopic("after-renewals", 1, 1)])["after-renewals"].result(30)
        wait_for("the topic in broker 5's metadata", lambda: "after-renewals" in through.list_topics(timeout=10).topics, timeout=TIMEOUT)

        # The two followers' fetchers renewed about once per 2 s, and no peer's connection was
        # closed as expired: none on the controller listener (raft links, joins, heartbeats,
        # forwarding), none of the brokers' principal on the broker listener (the test's own
        # librdkafka clients renew on their own timers, which a loaded machine may delay).
        renewed = sum(metric(n, "gregor_authentications_total", listener="BROKER", mechanism="SCRAM-SHA-512") for n in nodes) - scram_authentications
        assert renewed >= 4, renewed
        def whole_log(node):
            with open(node.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        log_lines = [(n.overrides["node.id"], line) for n in nodes for line in whole_log(n).splitlines()]
        expired = {n.overrides["node.id"]: metric(n, "gregor_network_connections_closed_total", listener="CONTROLLER", reason="session_expired") for n in nodes}
        renewals = [f"node {node_id}: {line}" for node_id, line in log_lines
                    if "expired" in line or "renew" in line or "raft link" in line]
        assert not any(expired.values()), (expired, renewals[-60:])
        fetchers_expired = [line for _, line in log_lines
                            if "SASL session expired" in line and "principal=User:broker" in line]
        assert not fetchers_expired, fetchers_expired
    finally:
        for node in nodes:
            node.close()


def test_an_ssl_controller_listener_with_client_certificates(tmp_path):
    """The controller listener is SSL with `ssl.client.auth=required`: the nodes present their
    certificate to each other (mutual TLS, principal `User:CN=controller`, the only super user
    besides the anonymous clients of the PLAINTEXT broker listener). The quorum forms and
    replicates; a client with a certificate of the same CA but another principal is closed at
    its first private frame, before the frame is even decoded."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make certificates")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
            "-subj", "/CN=ca", cwd=tmp_path)
    signed(tmp_path, "controller", "/CN=controller", "ca", "serverAuth,clientAuth")
    signed(tmp_path, "alice", "/CN=alice", "ca", "clientAuth")
    store = tmp_path / "controller-store.pem"
    store.write_text((tmp_path / "controller.pem").read_text() + (tmp_path / "controller.key").read_text())

    cluster_id = random_uuid()
    specs = [(i, reserve_port(), random_uuid()) for i in (1, 2, 3)]
    initial = ",".join(f"{i}@127.0.0.1:{port}:{d}" for i, port, d in specs)
    voters = ",".join(f"127.0.0.1:{port}" for _, port, _ in specs)
    nodes = []
    for node_id, port, _ in specs:
        nodes.append(ClusterNode({
            "node.id": str(node_id),
            "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}",
            "controller.quorum.bootstrap.servers": voters,
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
            "listener.name.controller.ssl.keystore.type": "PEM",
            "listener.name.controller.ssl.keystore.location": str(store),
            "listener.name.controller.ssl.truststore.type": "PEM",
            "listener.name.controller.ssl.truststore.location": str(tmp_path / "ca.pem"),
            "listener.name.controller.ssl.client.auth": "required",
            "authorizer.class.name": "StandardAuthorizer",
            "super.users": "User:CN=controller;User:ANONYMOUS",
        }, ["--cluster-id", cluster_id, "--initial-controllers", initial]))
    try:
        for node in nodes:
            node.wait_ready()
        bootstrap = ",".join(n.bootstrap for n in nodes)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        wait_for("three unfenced brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=TIMEOUT)
        topic = "over-tls"
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
        wait_for("a full ISR", lambda: partition_state(admin, topic)[2] == [1, 2, 3], timeout=TIMEOUT)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(10):
            producer.produce(topic, value=f"r-{i}".encode(), partition=0)
        assert producer.flush(30) == 0

        leader_id = partition_state(admin, topic)[0]
        leader_port = specs[leader_id - 1][1]
        leader = nodes[leader_id - 1]
        refused = metric(leader, "gregor_network_connections_closed_total", listener="CONTROLLER",
                         reason="cluster_authorization_failed")
        context = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
        context.load_cert_chain(str(tmp_path / "alice.pem"), str(tmp_path / "alice.key"))
        with socket.create_connection(("127.0.0.1", leader_port), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as conn:
                # A hello's api key (32005) with a body nobody decodes.
                conn.sendall(struct.pack(">ihhi", 12, 32005, 0, 1) + b"\0\0\0\0")
                assert conn.recv(1024) == b"", "the connection is closed without an answer"
        wait_for("the refusal counted", lambda: metric(leader, "gregor_network_connections_closed_total", listener="CONTROLLER",
                                                        reason="cluster_authorization_failed") == refused + 1, timeout=TIMEOUT)
        assert sum(metric(n, "gregor_network_connections_closed_total", listener="CONTROLLER", reason="cluster_authorization_failed")
                   for n in nodes) == refused + 1
    finally:
        for node in nodes:
            node.close()
