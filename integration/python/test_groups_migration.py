"""Online migration between the classic and the consumer group protocols (Kafka 4.1's
`group.consumer.migration.policy`), as a rolling upgrade of a consumer application meets it:
confluent-kafka 2.16.1 members with `group.protocol=classic` are replaced one at a time by
members with `group.protocol=consumer`, and back. The first KIP-848 member turns the live
classic group into a consumer group (its classic members keep their partitions and go on with
JoinGroup/SyncGroup/Heartbeat); when the last KIP-848 member leaves, the classic members left
make it a classic group again. Records produced throughout are all consumed, and committed
offsets follow. A kill -9 of the node mid-migration keeps the group and its offsets.
"""

from confluent_kafka import Consumer, ConsumerGroupType, KafkaError, KafkaException, TopicPartition

from conftest import wait_for
from test_groups_consumer import create, describe, produce

FAST = {
    "auto.create.topics.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "group.consumer.min.session.timeout.ms": "2000",
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.heartbeat.interval.ms": "300",
}

TOPIC = "mig"
GROUP = "mig-group"


def member(node, protocol, **extra):
    settings = {
        "bootstrap.servers": node.bootstrap,
        "group.id": GROUP,
        "group.protocol": protocol,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    if protocol == "classic":
        settings.update({"session.timeout.ms": 10000, "heartbeat.interval.ms": 300,
                         "partition.assignment.strategy": "range"})
    settings.update(extra)
    c = Consumer(settings)
    c.subscribe([TOPIC])
    return c


def owned(c):
    return sorted(tp.partition for tp in c.assignment())


class Members:
    """The live members, polled in turn; each record is committed once processed, so a member
    that leaves hands its partitions on without losing any."""

    def __init__(self):
        self.live = []
        self.got = set()

    def poll_until(self, what, until, timeout=90):
        def step():
            for c in self.live:
                msg = c.poll(0.05)
                if msg is not None and msg.error() is None:
                    self.got.add(msg.value().decode())
                    try:
                        c.commit(message=msg, asynchronous=False)
                    except KafkaException as e:
                        # A commit racing a rebalance is refused; the record comes again.
                        if e.args[0].code() not in (KafkaError.REBALANCE_IN_PROGRESS,
                                                    KafkaError.ILLEGAL_GENERATION,
                                                    KafkaError.UNKNOWN_MEMBER_ID,
                                                    KafkaError.STALE_MEMBER_EPOCH,
                                                    KafkaError._ASSIGNMENT_LOST,
                                                    KafkaError._NO_OFFSET):
                            raise
            return until()

        wait_for(what, step, timeout=timeout)

    def spread(self):
        """Every partition owned by exactly one live member."""
        return sorted(p for c in self.live for p in owned(c)) == list(range(6))

    def replace(self, old, new, phase):
        """A rolling step: `old` closes (leaving the group), `new` takes its place."""
        self.live.remove(old)
        old.close()
        self.live.append(new)
        self.poll_until(f"{phase}: the partitions spread", self.spread)


def produce_and_consume(node, members, start, phase):
    produce(node, TOPIC, 6, 30, start=start)
    end = start + 30
    members.poll_until(f"{phase}: records up to v{end - 1} consumed",
                       lambda: all(f"v{i}" in members.got for i in range(end)))
    return end


def group_type(node):
    return describe(node, GROUP).type


def committed(node):
    c = Consumer({"bootstrap.servers": node.bootstrap, "group.id": GROUP})
    try:
        return [tp.offset for tp in c.committed([TopicPartition(TOPIC, p) for p in range(6)], timeout=30)]
    finally:
        c.close()


def start_classic_pair(node, members):
    """Two classic confluent members of GROUP, polled until they share the partitions."""
    members.live = [member(node, "classic"), member(node, "classic")]
    members.poll_until("the classic group spread", members.spread)


def test_rolling_upgrade_then_downgrade_loses_no_records(start_node):
    node = start_node(FAST)
    create(node, TOPIC, 6)
    members = Members()
    try:
        start_classic_pair(node, members)
        n = produce_and_consume(node, members, 0, "classic")
        assert group_type(node) == ConsumerGroupType.CLASSIC

        # Upgrade: the first KIP-848 member converts the live classic group.
        classic_left = members.live[1]
        members.replace(members.live[0], member(node, "consumer"), "upgrade 1")
        n = produce_and_consume(node, members, n, "upgrade 1")
        described = describe(node, GROUP)
        assert described.type == ConsumerGroupType.CONSUMER
        assert len(described.members) == 2
        members.replace(classic_left, member(node, "consumer"), "upgrade 2")
        n = produce_and_consume(node, members, n, "upgrade 2")
        assert group_type(node) == ConsumerGroupType.CONSUMER

        # Downgrade: classic members join the consumer group; when the last KIP-848 member
        # leaves, the group is classic again.
        members.replace(members.live[0], member(node, "classic"), "downgrade 1")
        n = produce_and_consume(node, members, n, "downgrade 1")
        assert group_type(node) == ConsumerGroupType.CONSUMER
        members.replace(members.live[0], member(node, "classic"), "downgrade 2")
        wait_for("the group classic again", lambda: group_type(node) == ConsumerGroupType.CLASSIC, timeout=30)
        n = produce_and_consume(node, members, n, "downgrade 2")
        assert members.got == {f"v{i}" for i in range(n)}, "a record was lost"
        wait_for("every offset committed", lambda: committed(node) == [n // 6] * 6, timeout=30)
    finally:
        for c in members.live:
            c.close()


def test_a_kill_mid_migration_keeps_the_group_and_its_offsets(start_node):
    node = start_node(FAST)
    create(node, TOPIC, 6)
    members = Members()
    try:
        start_classic_pair(node, members)
        members.replace(members.live[0], member(node, "consumer"), "upgrade")
        n = produce_and_consume(node, members, 0, "upgrade")
        before = describe(node, GROUP)
        assert before.type == ConsumerGroupType.CONSUMER
        wait_for("every offset committed", lambda: committed(node) == [n // 6] * 6, timeout=30)

        # Killed mid-migration: the node comes back on new ports, so these clients are gone.
        node.restart()

        def loaded():
            try:
                return describe(node, GROUP)
            except KafkaException:
                return None

        after = wait_for("the group loaded again", loaded, timeout=30)
        assert after.type == ConsumerGroupType.CONSUMER
        # Both members, the classic one restored from its ClassicMemberMetadata.
        assert sorted(m.member_id for m in after.members) == sorted(m.member_id for m in before.members)
        assert committed(node) == [n // 6] * 6
    finally:
        for c in members.live:
            c.close()

    # New members of both protocols start where the group committed: nothing is read twice.
    members = Members()
    try:
        members.live = [member(node, "classic"), member(node, "consumer")]
        members.poll_until("the partitions spread", members.spread)
        produce(node, TOPIC, 6, 30, start=n)
        members.poll_until("the records after the restart consumed",
                           lambda: all(f"v{i}" in members.got for i in range(n, n + 30)))
        assert members.got == {f"v{i}" for i in range(n, n + 30)}, "a committed record was read again"
        assert group_type(node) == ConsumerGroupType.CONSUMER
        wait_for("every offset committed", lambda: committed(node) == [(n + 30) // 6] * 6, timeout=30)
    finally:
        for c in members.live:
            c.close()


def test_a_kafka_python_member_joins_a_consumer_group_and_is_left_classic(start_node):
    """kafka-python 2.x (classic only, subscription v0) in a KIP-848 group: the server-side
    assignor gives it its share; when the KIP-848 member leaves, the group is classic again
    and kafka-python goes on alone, from the committed offsets."""
    from kafka import KafkaConsumer

    node = start_node(FAST)
    create(node, TOPIC, 6)
    members = Members()
    kp = None
    try:
        members.live = [member(node, "consumer")]
        members.poll_until("the consumer member owns all", members.spread)
        kp = KafkaConsumer(TOPIC, bootstrap_servers=node.bootstrap, group_id=GROUP,
                           auto_offset_reset="earliest", enable_auto_commit=False,
                           session_timeout_ms=10000, heartbeat_interval_ms=300)
        produce(node, TOPIC, 6, 30)
        got = set()

        def step():
            for records in kp.poll(100).values():
                got.update(r.value.decode() for r in records)
            kp.commit()
            members.poll_until("a poll", lambda: True)
            owned_kp = sorted(tp.partition for tp in kp.assignment())
            return len(got | members.got) == 30 and sorted(owned_kp + owned(members.live[0])) == list(range(6))

        wait_for("kafka-python and the consumer member share the partitions", step, timeout=90)
        described = describe(node, GROUP)
        assert described.type == ConsumerGroupType.CONSUMER
        assert sorted(len(m.assignment.topic_partitions) for m in described.members) == [3, 3]

        members.live.pop().close()
        wait_for("the group classic again", lambda: group_type(node) == ConsumerGroupType.CLASSIC, timeout=30)
        produce(node, TOPIC, 6, 30, start=30)

        def alone():
            for records in kp.poll(100).values():
                got.update(r.value.decode() for r in records)
            kp.commit()
            return len(kp.assignment()) == 6 and all(f"v{i}" in got | members.got for i in range(60))

        wait_for("kafka-python alone with every record", alone, timeout=90)
    finally:
        for c in members.live:
            c.close()
        if kp is not None:
            kp.close()
