"""A port of Kafka's CustomQuotaCallbackTest: SCRAM users in two groups (`group0_*`,
`group1_*`), the `grouped-user` quota callback on two brokers, produce and consume throttled per
group, and limits that follow partition leadership.

As in Kafka's test, group quotas are user quotas on the entity `<group>_` and `_` is the default
group; each group's topic has one partition led by a chosen broker (node 1 for group0, node 2 for
group1); a group's produce and fetch limits on a broker are scaled by the share of the group's
partitions that broker leads. Users authenticate with SCRAM-SHA-256 over SASL_PLAINTEXT (brokers
fetch from each other over the same listener with SCRAM as `admin`).

Where Kafka reads the quota managers and removes sensors between steps, this port observes from
outside: throttling is what the clients see (confluent-kafka's `throttle_cb`, the broker's
throttle time in its answers), the per-group sensors are the `kafka_server_quota_*{group=...}`
series of the leader, and each step waits until every node has applied the metadata change
(`gregor_metadata_image_digest_offset`) instead of polling a quota manager. Not ported: the count
of `quotaLimit` calls (internal to the plug-in, unit-tested in publishers/). The last step alters
the callback's `default.produce.quota` / `default.fetch.quota` as cluster-wide dynamic broker
configs, which the controller accepts because they are the configured callback's
reconfigurable keys.
"""

import os
import subprocess
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from conftest import gregor_bin, wait_for
from ports import reserve_port
from test_replication import ClusterNode, random_uuid

TIMEOUT = 60.0
RECORDS = 1000
VALUE = b"x" * 500
DEFAULT_PRODUCE_QUOTA = 2000 * 1000 * 1000
DEFAULT_CONSUME_QUOTA = 1000 * 1000 * 1000
REQUEST_QUOTA = 1000
ADMIN_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
              'username="admin" password="admin-secret";')


class QuotaNode(ClusterNode):
    """A node whose client listener is named CLIENT (SASL_PLAINTEXT, SCRAM-SHA-256)."""

    client_listener = "CLIENT"


def node_overrides(node_id, listeners, voters, roles):
    return {
        "node.id": str(node_id),
        "process.roles": roles,
        "listeners": listeners,
        "controller.quorum.bootstrap.servers": voters,
        "listener.security.protocol.map": "CLIENT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        # PLAIN for Gregor's admin tool (its --command-config speaks PLAIN), as `admin`.
        "listener.name.client.sasl.enabled.mechanisms": "SCRAM-SHA-256,PLAIN",
        "listener.name.client.plain.sasl.jaas.config": ('org.apache.kafka.common.security.plain.PlainLoginModule required '
                                                        'user_admin="admin-secret";'),
        "inter.broker.listener.name": "CLIENT",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "listener.name.client.scram-sha-256.sasl.jaas.config": ADMIN_JAAS,
        "client.quota.callback.class": "grouped-user",
        "offsets.topic.replication.factor": "1",
        "delete.topic.enable": "true",
    }


def metric_values(node, name, **labels):
    values = []
    for line in node.metrics_text().splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            values.append(float(line.split()[-1]))
    return values


class Cluster:
    """Node 1 (broker and the only controller) and node 2 (a broker), Kafka's brokers 0 and 1."""

    def __init__(self):
        cluster_id = random_uuid()
        port, directory = reserve_port(), random_uuid()
        voters = f"127.0.0.1:{port}"
        self.nodes = [
            QuotaNode(node_overrides(1, f"CLIENT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}", voters, "broker,controller"),
                      ["--cluster-id", cluster_id, "--initial-controllers", f"1@127.0.0.1:{port}:{directory}",
                       "--add-scram", "SCRAM-SHA-256=[name=admin,password=admin-secret]"]),
        ]
        self.nodes[0].wait_ready()
        self.nodes.append(QuotaNode(node_overrides(2, "CLIENT://127.0.0.1:0", voters, "broker"), ["--cluster-id", cluster_id]))
        self.nodes[1].wait_ready()
        self.command_config = os.path.join(self.nodes[0]._tmp.name, "admin.properties")
        with open(self.command_config, "w") as f:
            f.write("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                    'username="admin" password="admin-secret";\n')
        self.admin = AdminClient(self.client_config("admin", "admin-secret"))
        wait_for("two brokers", lambda: len(self.admin.list_topics(timeout=10).brokers) == 2, timeout=TIMEOUT)
        self.producer_without_quota = Producer(self.client_config("admin", "admin-secret", linger_ms=5))

    def close(self):
        for node in self.nodes:
            node.close()

    def client_config(self, user, password, **extra):
        config = {
            "bootstrap.servers": ",".join(n.bootstrap for n in self.nodes),
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": user,
            "sasl.password": password,
        }
        config.update({k.replace("_", "."): v for k, v in extra.items()})
        return config

    def configs(self, *args):
        """`gregor configs` as `admin` (PLAIN); then waits until every node has applied what it
        wrote."""
        done = subprocess.run([str(gregor_bin()), "configs", "--bootstrap-server", self.nodes[0].bootstrap,
                               "--command-config", str(self.command_config), "--alter", *args],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, f"gregor configs {' '.join(args)}: {done.stdout}{done.stderr}"
        self.wait_applied()

    def wait_applied(self):
        """Waits until every node's image is at least as new as the controller's now."""
        def offset(node):
            values = metric_values(node, "gregor_metadata_image_digest_offset")
            return values[0] if values else -1
        target = offset(self.nodes[0])
        wait_for("every node at the controller's offset", lambda: all(offset(n) >= target for n in self.nodes), timeout=TIMEOUT)

    def create_topic(self, topic, partitions, leader):
        """A topic whose partitions all have one replica, on `leader` (1 or 2)."""
        self.admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=-1, replica_assignment=[[leader]] * partitions)])[topic].result(30)
        wait_for(f"{topic} led by {leader}", lambda: (lambda t: t is not None and len(t.partitions) == partitions
                 and all(p.leader == leader for p in t.partitions.values()))(self.admin.list_topics(timeout=10).topics.get(topic)), timeout=TIMEOUT)
        self.wait_applied()

    def delete_topic(self, topic):
        self.admin.delete_topics([topic])[topic].result(30)
        wait_for(f"{topic} gone", lambda: topic not in self.admin.list_topics(timeout=10).topics, timeout=TIMEOUT)
        self.wait_applied()

    def set_group_quota(self, group, produce, fetch, request=REQUEST_QUOTA):
        self.configs("--entity-type", "users", "--entity-name", f"{group}_", "--add-config",
                     f"producer_byte_rate={produce},consumer_byte_rate={fetch},request_percentage={request}")

    def remove_group_quota(self, group):
        self.configs("--entity-type", "users", "--entity-name", f"{group}_", "--delete-config",
                     "producer_byte_rate,consumer_byte_rate,request_percentage")

    def add_user(self, user):
        self.configs("--entity-type", "users", "--entity-name", user, "--add-config",
                     f"SCRAM-SHA-256=[password={user}:secret]")
        return GroupedUser(self, user)

    def create_group_with_one_user(self, user, leader):
        """Kafka's createGroupWithOneUser: the user, its group's one-partition topic on
        `leader`, and the default group quota at the large defaults."""
        grouped = self.add_user(user)
        self.create_topic(grouped.topic, 1, leader)
        self.set_group_quota("", DEFAULT_PRODUCE_QUOTA, DEFAULT_CONSUME_QUOTA)
        return grouped


class GroupedUser:
    def __init__(self, cluster, user):
        self.cluster = cluster
        self.user = user
        self.group = user.split("_", 1)[0]
        self.topic = f"{self.group}_topic"

    def throttled_client(self, kind, **extra):
        throttles = []
        config = self.cluster.client_config(self.user, f"{self.user}:secret", client_id=f"{self.user}:{kind}-client-id", **extra)
        config["throttle_cb"] = lambda event: throttles.append(event.throttle_time)
        client = Producer(config) if kind == "producer" else Consumer(config)
        return client, throttles

    def produce_until_throttled(self):
        """Sends up to RECORDS records, one request each, stopping at the first throttle the
        broker reports; returns (records sent, throttled)."""
        producer, throttles = self.throttled_client("producer", acks="1", linger_ms=0)
        sent = 0
        deadline = time.monotonic() + TIMEOUT
        while sent < RECORDS and not any(t > 0 for t in throttles) and time.monotonic() < deadline:
            producer.produce(self.topic, value=VALUE, partition=0)
            sent += 1
            producer.flush(10)
        throttled = any(t > 0 for t in throttles)
        producer.purge()
        producer.flush(1)
        return sent, throttled

    def consume_until_throttled(self):
        """Reads the topic from the start (4 KiB per partition fetch) until RECORDS records or the
        first throttle; returns whether the broker throttled."""
        consumer, throttles = self.throttled_client("consumer", group_id=f"{self.user}-group", enable_auto_commit=False,
                                                    max_partition_fetch_bytes=4096)
        consumer.assign([TopicPartition(self.topic, 0, 0)])
        read = 0
        deadline = time.monotonic() + TIMEOUT
        while read < RECORDS and not any(t > 0 for t in throttles) and time.monotonic() < deadline:
            read += sum(1 for m in consumer.consume(100, timeout=0.2) if m.error() is None)
        throttled = any(t > 0 for t in throttles)
        consumer.close()
        assert throttled or read >= RECORDS, f"{self.user} read only {read} records"
        return throttled

    def produce_consume(self, expect_produce_throttle, expect_consume_throttle):
        produced, throttled = self.produce_until_throttled()
        assert throttled == expect_produce_throttle, f"{self.user}: produce throttled={throttled}"
        # Enough records on the topic to test consumer throttling.
        for _ in range(RECORDS - produced if throttled else 0):
            self.cluster.producer_without_quota.produce(self.topic, value=VALUE, partition=0)
        assert self.cluster.producer_without_quota.flush(30) == 0
        throttled = self.consume_until_throttled()
        assert throttled == expect_consume_throttle, f"{self.user}: consume throttled={throttled}"


def test_custom_quota_callback():
    cluster = Cluster()
    node1, node2 = cluster.nodes
    try:
        # Large quota override, should not throttle.
        user = cluster.create_group_with_one_user("group0_user1", leader=1)
        cluster.set_group_quota("group0", 1000000, 2000000)
        user.produce_consume(expect_produce_throttle=False, expect_consume_throttle=False)

        # Large quota updated to small quota, should throttle.
        cluster.set_group_quota("group0", 9000, 3000)
        user.produce_consume(expect_produce_throttle=True, expect_consume_throttle=True)
        # The leader's sensors are the group's, not the user's or the client id's.
        assert max(metric_values(node1, "kafka_server_quota_throttle_time", resource="Produce", group="group0")) > 0
        assert max(metric_values(node1, "kafka_server_quota_throttle_time", resource="Fetch", group="group0")) > 0
        assert not [line for line in node1.metrics_text().splitlines()
                    if line.startswith("kafka_server_quota_byte_rate{") and "group0_user1" in line]

        # Quota override deletion: the default group quota (large) applies.
        user = cluster.add_user("group0_user2")
        cluster.remove_group_quota("group0")
        user.produce_consume(expect_produce_throttle=False, expect_consume_throttle=False)

        # A smaller default group quota throttles.
        cluster.set_group_quota("", 8000, 2500)
        user.produce_consume(expect_produce_throttle=True, expect_consume_throttle=True)

        # A large override for the group, should not throttle.
        user = cluster.add_user("group0_user3")
        cluster.set_group_quota("group0", 2000000, 2000000)
        user.produce_consume(expect_produce_throttle=False, expect_consume_throttle=False)

        # group1 on node 2: a quota large enough for its one partition, should not throttle.
        user = cluster.create_group_with_one_user("group1_user1", leader=2)
        cluster.set_group_quota("group1", 8000 * 100, 2500 * 100)
        user.produce_consume(expect_produce_throttle=False, expect_consume_throttle=False)

        # 99 more group1 partitions led by node 1: node 2 now leads 1 of 100, so its limits are
        # a hundredth (8000 / 2500 bytes/s), and the same client throttles.
        cluster.create_topic("group1_largeTopic", 99, leader=1)
        user.produce_consume(expect_produce_throttle=True, expect_consume_throttle=True)
        assert max(metric_values(node2, "kafka_server_quota_throttle_time", resource="Produce", group="group1")) > 0
        # group1 produced only to node 2: node 1 has no group1 produce sensor.
        assert metric_values(node1, "kafka_server_quota_byte_rate", resource="Produce", group="group1") == []

        # The default group quota scaled the same way: a hundredth of the default throttles.
        user = cluster.add_user("group1_user2")
        cluster.remove_group_quota("group1")
        cluster.set_group_quota("", 8000 * 100, 2500 * 100)
        user.produce_consume(expect_produce_throttle=True, expect_consume_throttle=True)

        # Without the large topic node 2 leads all of group1 again: no throttling.
        cluster.delete_topic("group1_largeTopic")
        user = cluster.add_user("group1_user3")
        cluster.set_group_quota("group1", 8000 * 100, 2500 * 100)
        user.produce_consume(expect_produce_throttle=False, expect_consume_throttle=False)

        # The callback's own configs altered dynamically (cluster-wide broker configs): the
        # default group quota becomes 8000 / 2500 bytes/s on every broker, and group1, without
        # its override now, throttles.
        cluster.remove_group_quota("group1")
        cluster.configs("--entity-type", "brokers", "--entity-default", "--add-config",
                        "default.produce.quota=8000,default.fetch.quota=2500")
        user.produce_consume(expect_produce_throttle=True, expect_consume_throttle=True)
    finally:
        cluster.close()
