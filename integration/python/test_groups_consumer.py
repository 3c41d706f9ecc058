"""KIP-848 consumer groups with confluent-kafka 2.16.1 `group.protocol=consumer`: members join
through ConsumerGroupHeartbeat, the server-side assignor spreads partitions, a member that
closes or is killed gives its partitions away (the latter after its session timeout), committed
offsets are where the next member starts, a coordinator restart restores the group from its
`__consumer_offsets` records, and a group config changed with IncrementalAlterConfigs reaches
the next heartbeat. Bad input is answered with Kafka's codes on a raw socket.

Nodes run with the `group.consumer.*` bounds lowered so sessions end in seconds.
"""

import struct
import subprocess
import sys
import textwrap
import time
import uuid

from confluent_kafka import Consumer, ConsumerGroupType, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType

from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

from conftest import RawConn, wait_for

FAST = {
    "auto.create.topics.enable": "false",
    "group.consumer.min.session.timeout.ms": "2000",
    "group.consumer.session.timeout.ms": "4000",
    "group.consumer.min.heartbeat.interval.ms": "100",
    "group.consumer.heartbeat.interval.ms": "300",
}


def create(node, name, partitions):
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)


def produce(node, topic, partitions, count, start=0):
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(start, start + count):
        producer.produce(topic, f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def member(node, group, topic, **extra):
    settings = {
        "bootstrap.servers": node.bootstrap,
        "group.id": group,
        "group.protocol": "consumer",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    settings.update(extra)
    c = Consumer(settings)
    c.subscribe([topic])
    return c


def poll_all(consumers, got, until, timeout=60):
    """Polls the consumers in turn (librdkafka heartbeats on its own thread) until `until()`."""

    def step():
        for c in consumers:
            msg = c.poll(0.05)
            if msg is not None and msg.error() is None:
                got.append((msg.partition(), msg.value().decode()))
        return until()

    wait_for("the consumers' condition", step, timeout=timeout)


def owned(c):
    return sorted(tp.partition for tp in c.assignment())


def describe(node, group):
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    return admin.describe_consumer_groups([group])[group].result(timeout=30)


def described_when_loaded(node, group):
    try:
        return describe(node, group)
    except KafkaException as e:
        if e.args[0].code() in (KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR,
                                KafkaError.COORDINATOR_NOT_AVAILABLE):
            return None
        raise


def tool(node, *args):
    from conftest import gregor_bin

    done = subprocess.run([str(gregor_bin()), "consumer-groups", "--bootstrap-server", node.bootstrap, *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def list_consumer_groups(node):
    """ListGroups with the `consumer` type filter; librdkafka asks the brokers it knows, so the
    client learns them first."""
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    admin.list_topics(timeout=30)

    def listed_without_errors():
        # A broker's answer with an error (COORDINATOR_LOAD_IN_PROGRESS while any
        # __consumer_offsets partition loads, as Kafka) lists nothing: ask again.
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=30)
        if listed.errors:
            raise AssertionError(f"ListGroups errors: {listed.errors}")
        return listed

    listed = wait_for("ListGroups without errors", listed_without_errors, timeout=30)
    return [(g.group_id, g.type) for g in listed.valid]


def test_members_spread_partitions_and_take_over_without_duplicates(start_node):
    node = start_node(FAST)
    create(node, "k848-spread", 6)
    members = [member(node, "k848-spread", "k848-spread") for _ in range(3)]
    got = []
    try:
        # Records arrive once the group is settled: before any commit, a partition that moves
        # is read again from the start by its next owner, as in Kafka.
        poll_all(members, got, lambda: all(len(owned(c)) == 2 for c in members))
        produce(node, "k848-spread", 6, 60)
        poll_all(members, got, lambda: len(got) >= 60)
        assert sorted(v for _, v in got) == sorted(f"v{i}" for i in range(60))
        assert sorted(p for c in members for p in owned(c)) == list(range(6))
        for c in members:
            c.commit(asynchronous=False)

        described = describe(node, "k848-spread")
        assert described.type == ConsumerGroupType.CONSUMER
        assert str(described.state).endswith("STABLE")
        assert len(described.members) == 3
        assert sorted(len(m.assignment.topic_partitions) for m in described.members) == [2, 2, 2]
        assert list_consumer_groups(node) == [("k848-spread", ConsumerGroupType.CONSUMER)]

        # `gregor consumer-groups` describes it through ConsumerGroupDescribe.
        offsets = tool(node, "--describe", "--group", "k848-spread").splitlines()
        assert offsets[1].split()[:6] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG"]
        rows = [line.split() for line in offsets[2:]]
        assert sorted((r[2], r[3], r[4], r[5]) for r in rows) == [(str(p), "10", "10", "0") for p in range(6)]
        # As Kafka's, member by member (all with 2 partitions here), each by partition.
        assert [r[6] for r in rows][::2] == [r[6] for r in rows][1::2] and len({r[6] for r in rows}) == 3
        assert all(int(a[2]) < int(b[2]) for a, b in zip(rows[::2], rows[1::2]))
        state = tool(node, "--describe", "--group", "k848-spread", "--state").splitlines()
        assert state[2].split()[-3:] == ["uniform", "Stable", "3"]
        assert f"{'k848-spread':<25} {'Consumer':<20} {'Stable':<20}" in tool(node, "--list", "--type", "--state").splitlines()

        # A clean close leaves the group (epoch -1): the others take its partitions at once.
        members.pop().close()
        poll_all(members, got, lambda: sorted(p for c in members for p in owned(c)) == list(range(6)))
        produce(node, "k848-spread", 6, 30, start=60)
        poll_all(members, got, lambda: len(got) >= 90)
        values = [v for _, v in got]
        assert sorted(values) == sorted(f"v{i}" for i in range(90)), "a record was consumed twice or lost"
    finally:
        for c in members:
            c.close()


MEMBER = textwrap.dedent(
    """
    import sys
    from confluent_kafka import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                  "group.protocol": "consumer", "enable.auto.commit": False})
    c.subscribe([sys.argv[3]])
    while True:
        c.poll(0.2)
        print(sorted(tp.partition for tp in c.assignment()), flush=True)
    """
)


def test_consumer_groups_tool_prints_kafkas_tables_for_a_consumer_group(start_node):
    """kafka-consumer-groups.sh 4.1's --members --verbose of a KIP-848 group: the member's epoch,
    its assignment, the group's target assignment epoch and the member's target assignment."""
    node = start_node(FAST)
    create(node, "cg848", 2)
    produce(node, "cg848", 2, 10)
    c = member(node, "cg848", "cg848", **{"client.id": "cg848-client"})
    got = []
    try:
        poll_all([c], got, lambda: len(got) >= 10)
        c.commit(asynchronous=False)
        wait_for("the group Stable", lambda: "Stable" in tool(node, "--describe", "--group", "cg848", "--state"))
        state = tool(node, "--describe", "--group", "cg848", "--state", "--verbose").splitlines()
        _, group_epoch, target_epoch, _ = state[2].rsplit(None, 3)
        host, port = node.bootstrap.rsplit(":", 1)
        assert state[1:] == [
            f"{'GROUP':<15} {'COORDINATOR (ID)':<25} {'ASSIGNMENT-STRATEGY':<20} {'STATE':<20} {'GROUP-EPOCH':<15} "
            f"{'TARGET-ASSIGNMENT-EPOCH':<25} #MEMBERS",
            f"{'cg848':<15} {host + ':' + port + '  (1)':<25} {'uniform':<20} {'Stable':<20} {group_epoch:<15} "
            f"{target_epoch:<25} 1",
        ]
        out = tool(node, "--describe", "--group", "cg848", "--members", "--verbose")
        member_id, epoch = out.splitlines()[2].split()[1], out.splitlines()[2].split()[5]
        m = max(15, len(member_id))
        assert out == (
            f"\n{'GROUP':<15} {'CONSUMER-ID':<{m}} {'HOST':<15} {'CLIENT-ID':<15} {'#PARTITIONS':<15} "
            "CURRENT-EPOCH   CURRENT-ASSIGNMENT   TARGET-EPOCH    TARGET-ASSIGNMENT   \n"
            f"{'cg848':<15} {member_id:<{m}} {'/127.0.0.1':<15} {'cg848-client':<15} {'2':<15} "
            f"{epoch:<15} {'cg848:0,1':<20} {target_epoch:<15} {'cg848:0,1':<20}\n"
        )
        assert tool(node, "--describe", "--group", "cg848") == (
            f"\n{'GROUP':<15} {'TOPIC':<15} {'PARTITION':<10} {'CURRENT-OFFSET':<15} {'LOG-END-OFFSET':<15} "
            f"{'LAG':<15} {'CONSUMER-ID':<{m}} {'HOST':<15} CLIENT-ID"
            + "".join(f"\n{'cg848':<15} {'cg848':<15} {p:<10} {'5':<15} {'5':<15} {'0':<15} {member_id:<{m}} "
                      f"{'/127.0.0.1':<15} cg848-client" for p in (0, 1))
            + "\n"
        )
    finally:
        c.close()


def test_a_killed_members_partitions_move_after_its_session(start_node):
    node = start_node(FAST)
    create(node, "k848-kill", 4)
    other = subprocess.Popen(
        [sys.executable, "-c", MEMBER, node.bootstrap, "k848-kill", "k848-kill"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    survivor = member(node, "k848-kill", "k848-kill")
    got = []
    try:
        poll_all([survivor], got, lambda: len(owned(survivor)) == 2)
        other.send_signal(9)
        other.wait(timeout=10)
        # The 4 s session ends; the group epoch moves on and the survivor gets all four.
        poll_all([survivor], got, lambda: len(owned(survivor)) == 4)
        assert "consumer member session expired" in node.log()
    finally:
        other.kill()
        survivor.close()


def test_a_restart_restores_the_group_and_committed_offsets(start_node):
    node = start_node(FAST)
    create(node, "k848-restart", 3)
    produce(node, "k848-restart", 3, 30)
    c = member(node, "k848-restart", "k848-restart")
    got = []
    try:
        poll_all([c], got, lambda: len(got) >= 30)
        c.commit(asynchronous=False)
        before = describe(node, "k848-restart")
        assert len(before.members) == 1
        # Killed with the member still in the group: the reload brings it back from its
        # records (epoch and assignment), then its session ends.
        node.restart()
    finally:
        c.close()
    after = wait_for("the group loaded again", lambda: described_when_loaded(node, "k848-restart"), timeout=30)
    assert [m.member_id for m in after.members] == [m.member_id for m in before.members]
    assert sorted(tp.partition for tp in after.members[0].assignment.topic_partitions) == [0, 1, 2]
    wait_for("the restored member's session to end",
             lambda: str(describe(node, "k848-restart").state).endswith("EMPTY"), timeout=30)

    produce(node, "k848-restart", 3, 6, start=30)
    c = member(node, "k848-restart", "k848-restart")
    got = []
    try:
        poll_all([c], got, lambda: len(got) >= 6)
        assert sorted(v for _, v in got) == sorted(f"v{i}" for i in range(30, 36))
        committed = c.committed([TopicPartition("k848-restart", p) for p in range(3)], timeout=30)
        assert sorted(tp.offset for tp in committed) == [10, 10, 10]
    finally:
        c.close()


# ConsumerGroupHeartbeat by hand: kafka-python does not have it.


def coordinator(node, group):
    """A raw connection once the node coordinates `group` (the first FindCoordinator creates
    `__consumer_offsets`)."""
    conn = RawConn(node.bootstrap)

    def served():
        return conn.send(FindCoordinatorRequest[2](key=group, key_type=0), FindCoordinatorResponse).error_code == 0

    wait_for(f"a coordinator for {group}", served, timeout=30)
    return conn

def compact_string(s):
    if s is None:
        return b"\x00"
    data = s.encode()
    return uvarint(len(data) + 1) + data


def uvarint(n):
    out = b""
    while n >= 0x80:
        out += bytes([(n & 0x7F) | 0x80])
        n >>= 7
    return out + bytes([n])


def read_uvarint(buf, pos):
    value, shift = 0, 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def read_compact_string(buf, pos):
    n, pos = read_uvarint(buf, pos)
    if n == 0:
        return None, pos
    return buf[pos:pos + n - 1].decode(), pos + n - 1


def heartbeat(conn, group, member_id, epoch, topics=None, rebalance_timeout=-1, owned=None,
              assignor=None, version=0):
    conn.correlation_id += 1
    header = struct.pack(">hhi", 68, version, conn.correlation_id) + struct.pack(">h", 3) + b"raw" + b"\x00"
    body = compact_string(group) + compact_string(member_id) + struct.pack(">i", epoch)
    body += compact_string(None) + compact_string(None) + struct.pack(">i", rebalance_timeout)
    if topics is None:
        body += b"\x00"
    else:
        body += uvarint(len(topics) + 1) + b"".join(compact_string(t) for t in topics)
    if version >= 1:
        body += compact_string(None)
    body += compact_string(assignor)
    if owned is None:
        body += b"\x00"
    else:
        body += uvarint(len(owned) + 1)
        for topic_id, partitions in owned:
            body += topic_id.bytes + uvarint(len(partitions) + 1)
            body += b"".join(struct.pack(">i", p) for p in partitions) + b"\x00"
    body += b"\x00"
    frame = header + body
    conn.send_bytes(struct.pack(">i", len(frame)) + frame)
    resp = conn.recv_frame()
    (correlation,) = struct.unpack_from(">i", resp, 0)
    assert correlation == conn.correlation_id
    pos = 5  # correlation id + empty header tags
    throttle, error = struct.unpack_from(">ih", resp, pos)
    pos += 6
    message, pos = read_compact_string(resp, pos)
    member, pos = read_compact_string(resp, pos)
    member_epoch, interval = struct.unpack_from(">ii", resp, pos)
    return {"error": error, "message": message, "member_id": member, "epoch": member_epoch,
            "interval": interval}


def test_bad_heartbeats_get_kafkas_codes(start_node):
    node = start_node(FAST)
    create(node, "k848-raw", 1)
    conn = coordinator(node, "k848-raw")
    try:
        wait_for("the coordinator", lambda: heartbeat(conn, "k848-raw", "", 0, topics=["k848-raw"],
                                                        rebalance_timeout=30000, owned=[])["error"] == 0)
        # INVALID_REQUEST: a join without the rebalance timeout or without subscriptions.
        assert heartbeat(conn, "k848-raw", "", 0, topics=["k848-raw"], owned=[])["error"] == 42
        bad = heartbeat(conn, "k848-raw", "", 0, rebalance_timeout=30000, owned=[])
        assert bad["error"] == 42 and "SubscribedTopicNames" in bad["message"]
        # v1 members name themselves.
        assert heartbeat(conn, "k848-raw", "", 0, topics=["x"], rebalance_timeout=1, owned=[],
                         version=1)["error"] == 42
        # UNSUPPORTED_ASSIGNOR, UNKNOWN_MEMBER_ID, GROUP_ID_NOT_FOUND, FENCED_MEMBER_EPOCH.
        assert heartbeat(conn, "k848-raw", "", 0, topics=["k848-raw"], rebalance_timeout=30000,
                         owned=[], assignor="sticky")["error"] == 112
        assert heartbeat(conn, "k848-raw", "nobody", 1)["error"] == 25
        # Another group may sit on an offsets partition still loading (COORDINATOR_LOAD_IN_PROGRESS).
        unknown = wait_for("the other group's coordinator loaded",
                           lambda: [e for e in [heartbeat(conn, "k848-none", "nobody", 1)["error"]] if e != 14])
        assert unknown == [69]
        joined = heartbeat(conn, "k848-raw", "", 0, topics=["k848-raw"], rebalance_timeout=30000, owned=[])
        assert joined["error"] == 0 and joined["member_id"] and joined["interval"] == 300
        assert heartbeat(conn, "k848-raw", joined["member_id"], joined["epoch"] + 5)["error"] == 110
    finally:
        conn.close()


def joined_member(conn, group):
    """A raw member that joined `group`, subscribed to the topic of the same name."""
    joined = {}

    def join():
        joined.update(heartbeat(conn, group, "", 0, topics=[group], rebalance_timeout=30000, owned=[]))
        return joined["error"] == 0

    wait_for(f"a member in {group}", join)
    return joined


def test_a_group_config_change_reaches_the_next_heartbeat(start_node):
    node = start_node(FAST)
    create(node, "k848-cfg", 1)
    conn = coordinator(node, "k848-cfg")
    try:
        joined = joined_member(conn, "k848-cfg")
        assert joined["interval"] == 300
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        resource = ConfigResource(ResourceType.GROUP, "k848-cfg", incremental_configs=[
            ConfigEntry("consumer.heartbeat.interval.ms", "3000", incremental_operation=AlterConfigOpType.SET)])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=30)

        def interval():
            beat = heartbeat(conn, "k848-cfg", joined["member_id"], joined["epoch"])
            assert beat["error"] == 0, beat
            return beat["interval"] == 3000

        wait_for("the new heartbeat interval", interval)
    finally:
        conn.close()


def test_a_shorter_session_timeout_counts_from_the_next_heartbeat(start_node):
    """Kafka reschedules a member's session timer on every heartbeat with the group's timeout
    then: a member that joined under a 30 s session, heartbeats once under 3 s and goes silent
    is removed about 3 s later, not when its 30 s timer would have fired."""
    node = start_node(FAST)
    create(node, "k848-short", 1)
    admin = AdminClient({"bootstrap.servers": node.bootstrap})

    def configure(pairs):
        resource = ConfigResource(ResourceType.GROUP, "k848-short", incremental_configs=[
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in pairs])
        for future in admin.incremental_alter_configs([resource]).values():
            future.result(timeout=30)

    configure([("consumer.session.timeout.ms", "30000")])
    conn = coordinator(node, "k848-short")
    try:
        joined = joined_member(conn, "k848-short")
        configure([("consumer.session.timeout.ms", "3000"), ("consumer.heartbeat.interval.ms", "400")])

        def shortened():
            # The interval in the answer shows the heartbeat read the new configs.
            beat = heartbeat(conn, "k848-short", joined["member_id"], joined["epoch"])
            assert beat["error"] == 0, beat
            return beat["interval"] == 400

        wait_for("a heartbeat under the new configs", shortened)
        wait_for("the silent member removed", lambda: not describe(node, "k848-short").members, timeout=15)
    finally:
        conn.close()
