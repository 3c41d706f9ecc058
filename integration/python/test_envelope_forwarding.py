"""Principals end to end through forwarding (KIP-590's Envelope): a SASL cluster of a
controller-only node and a broker-only node, where kafka-python's admin client creates topics
through the broker as SCRAM users. The broker wraps each CreateTopics in an Envelope carrying the
client's principal and address, so the controller charges the KIP-599 controller-mutation quota
to the user, not to the broker's own principal: the user with a quota is throttled
(THROTTLING_QUOTA_EXCEEDED, CreateTopics v7 being strict) and the other is not, and the
controller's quota sensors are the user's. With the `grouped-user` quota callback the quota is a
group quota on `team_`, which applies only if the callback sees the client's user name.

Nothing sleeps to synchronise: every wait is `wait_for` on a condition with a deadline.
"""

import os
import subprocess

import pytest

from kafka.admin import KafkaAdminClient, NewTopic

from conftest import gregor_bin, wait_for
from ports import reserve_port
from test_replication import ClusterNode, random_uuid

TIMEOUT = 60.0
THROTTLING_QUOTA_EXCEEDED = 89
CONTROLLER_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                   'username="ctl" password="ctl-secret" user_ctl="ctl-secret";')
ADMIN_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="admin" password="admin-secret";')


class Node(ClusterNode):
    """A node whose listeners are read from its ready line (a controller-only node has no
    client listener)."""

    client_listener = "CLIENT"


def overrides(node_id, roles, listeners, voters, callback):
    config = {
        "node.id": str(node_id),
        "process.roles": roles,
        "listeners": listeners,
        "controller.quorum.bootstrap.servers": voters,
        "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.controller.plain.sasl.jaas.config": CONTROLLER_JAAS,
        "authorizer.class.name": "StandardAuthorizer",
        "super.users": "User:ctl;User:admin",
        "allow.everyone.if.no.acl.found": "true",
        # 1 mutation/s over 10 one-second windows: a bucket of 10 partitions.
        "controller.quota.window.num": "10",
    }
    if callback:
        config["client.quota.callback.class"] = callback
    if "broker" in roles:
        config.update({
            "inter.broker.listener.name": "CLIENT",
            # PLAIN for Gregor's admin tool (its --command-config speaks PLAIN), as `admin`.
            "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
            "listener.name.client.plain.sasl.jaas.config": ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                                                            'user_admin="admin-secret";'),
            "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
            "listener.name.client.scram-sha-512.sasl.jaas.config": ADMIN_JAAS,
        })
    return config


def metric_lines(node, name):
    return [line for line in node.metrics_text().splitlines() if line.startswith(name + "{")]


@pytest.mark.parametrize("callback,throttled,free,quota_entity,sensor_label", [
    (None, "alice", "bob", "alice", 'user="alice"'),
    ("grouped-user", "team_alice", "solo_bob", "team_", 'group="team"'),
])
def test_forwarded_mutations_are_charged_to_the_client(callback, throttled, free, quota_entity, sensor_label):
    cluster_id = random_uuid()
    port, directory = reserve_port(), random_uuid()
    voters = f"127.0.0.1:{port}"
    users = ["admin", throttled, free]
    scram = [arg for user in users for arg in ("--add-scram", f"SCRAM-SHA-512=[name={user},password={user}-secret]")]
    controller = Node(overrides(1, "controller", f"CONTROLLER://127.0.0.1:{port}", voters, callback),
                      ["--cluster-id", cluster_id, "--initial-controllers", f"1@127.0.0.1:{port}:{directory}"] + scram)
    broker = None
    admins = []
    try:
        controller.wait_ready()
        broker = Node(overrides(2, "broker", "CLIENT://127.0.0.1:0", voters, callback), ["--cluster-id", cluster_id])
        broker.wait_ready()

        def admin_as(user):
            client = KafkaAdminClient(bootstrap_servers=broker.bootstrap, security_protocol="SASL_PLAINTEXT",
                                      sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=user,
                                      sasl_plain_password=f"{user}-secret", client_id=f"{user}-admin")
            admins.append(client)
            return client

        command_config = os.path.join(os.path.dirname(broker.log_path), "admin.properties")
        with open(command_config, "w") as f:
            f.write("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                    'username="admin" password="admin-secret";\n')
        done = subprocess.run([str(gregor_bin()), "configs", "--bootstrap-server", broker.bootstrap,
                               "--command-config", command_config, "--alter", "--entity-type", "users",
                               "--entity-name", quota_entity, "--add-config", "controller_mutation_rate=1"],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr

        def codes(client, name, partitions):
            result = client.create_topics([NewTopic(name, partitions, 1)], raise_errors=False)
            return [t["error_code"] for t in result["topics"]]

        # The quota reaches the controller through its image: the user spends its bucket until
        # a creation is refused with the strict answer.
        limited = admin_as(throttled)
        attempt = iter(range(1000))
        wait_for(f"{throttled} throttled", lambda: THROTTLING_QUOTA_EXCEEDED in codes(limited, f"{throttled}-{next(attempt)}", 30),
                 timeout=TIMEOUT)
        # The other user's bucket is its own (and it has no quota): the same creations pass.
        unlimited = admin_as(free)
        for i in range(3):
            assert codes(unlimited, f"{free}-{i}", 30) == [0]
        # The controller's sensors are the client's, not the forwarding broker's.
        sensors = metric_lines(controller, "kafka_server_quota_mutation_rate")
        assert any(sensor_label in line for line in sensors), sensors
        assert not any('user="ctl"' in line for line in sensors), sensors
    finally:
        for client in admins:
            client.close()
        if broker is not None:
            broker.close()
        controller.close()
