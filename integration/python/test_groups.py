"""Consumer groups (classic protocol) with real clients: kafka-python 3.0.12, confluent-kafka
2.16.1 with `group.protocol=classic`, kcat -G and kafkajs 2.2.4 join groups on the node, which
creates `__consumer_offsets` on the first FindCoordinator, spreads partitions, moves a killed
member's partitions after its session timeout and keeps committed offsets across a restart.
Bad input is answered with Kafka's codes on a raw socket.

Nodes run with `group.initial.rebalance.delay.ms=0` so a lone member's first rebalance is not
held for Kafka's 3 s; one test keeps the delay to check it groups members that join together.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Consumer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.admin.groups import DescribeGroupsRequest, DescribeGroupsResponse
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from conftest import RawConn, wait_for

FAST = {"group.initial.rebalance.delay.ms": "0", "auto.create.topics.enable": "false"}
KCAT = shutil.which("kcat")
NODE_JS = shutil.which("node")
JS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "js")


def create(node, name, partitions):
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic(name, partitions, 1)])
    finally:
        admin.close()


def produce(node, topic, partitions, count, start=0):
    producer = KafkaProducer(bootstrap_servers=node.bootstrap)
    try:
        for i in range(start, start + count):
            producer.send(topic, f"v{i}".encode(), partition=i % partitions)
        producer.flush(timeout=30)
    finally:
        producer.close()


def consumer(node, group, topic, **extra):
    settings = dict(
        bootstrap_servers=node.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
    )
    settings.update(extra)
    c = KafkaConsumer(**settings)
    c.subscribe([topic])
    return c


class Polling:
    """One kafka-python consumer polled on its own thread (a consumer is single-threaded, and
    two consumers polled in turn on one thread keep interrupting each other's rebalance), with
    what it received and its current assignment."""

    def __init__(self, c):
        self.consumer = c
        self.values = []
        self.assignment = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._commit = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        try:
            while not self._stop.is_set():
                batch = self.consumer.poll(timeout_ms=200)
                with self._lock:
                    for records in batch.values():
                        self.values.extend(r.value.decode() for r in records)
                    self.assignment = {tp.partition for tp in self.consumer.assignment()}
            if self._commit:
                self.consumer.commit()
        finally:
            self.consumer.close(autocommit=False)

    def snapshot(self):
        with self._lock:
            return list(self.values), set(self.assignment)

    def stop(self, commit=False):
        self._commit = commit
        self._stop.set()
        self._thread.join(timeout=60)


def drain(pollers, want, timeout=60):
    """Waits until the pollers together received `want` records; returns them per poller."""
    wait_for(f"{want} records", lambda: sum(len(p.snapshot()[0]) for p in pollers) >= want, timeout=timeout)
    return [p.snapshot()[0] for p in pollers]


def test_kafka_python_members_share_partitions_and_resume_from_commits(start_node):
    node = start_node(FAST)
    create(node, "grp-t", 4)
    produce(node, "grp-t", 4, 100)
    a = Polling(consumer(node, "grp-a", "grp-t"))
    b = Polling(consumer(node, "grp-a", "grp-t"))
    try:
        got = drain([a, b], 100)
        assert sorted(got[0] + got[1]) == sorted(f"v{i}" for i in range(100))

        def spread():
            parts_a, parts_b = a.snapshot()[1], b.snapshot()[1]
            return len(parts_a) == 2 and len(parts_b) == 2 and not parts_a & parts_b

        wait_for("both members assigned two partitions", spread, timeout=60)
    finally:
        b.stop(commit=True)
        a.stop(commit=True)

    produce(node, "grp-t", 4, 20, start=100)
    c = consumer(node, "grp-a", "grp-t")
    try:
        got = []

        def twenty():
            got.extend(r.value.decode() for rs in c.poll(timeout_ms=500).values() for r in rs)
            return len(got) >= 20

        wait_for("20 new records", twenty, timeout=60)
        # Nothing consumed twice: the new member starts at the committed offsets.
        assert sorted(got) == sorted(f"v{i}" for i in range(100, 120))
        committed = {p: c.committed(TopicPartition("grp-t", p)) for p in range(4)}
        assert committed == {p: 25 for p in range(4)}
    finally:
        c.close(autocommit=False)

    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        assert admin.list_groups() == [
            {"group_id": "grp-a", "protocol_type": "consumer", "group_state": "Empty", "group_type": "classic"}
        ]
        offsets = admin.list_group_offsets("grp-a")["grp-a"]
        assert {tp.partition: o.offset for tp, o in offsets.items()} == {p: 25 for p in range(4)}
    finally:
        admin.close()


MEMBER = textwrap.dedent(
    """
    import sys
    from kafka import KafkaConsumer
    c = KafkaConsumer(bootstrap_servers=sys.argv[1], group_id=sys.argv[2], session_timeout_ms=6000,
                      heartbeat_interval_ms=500, enable_auto_commit=False)
    c.subscribe([sys.argv[3]])
    while True:
        c.poll(timeout_ms=200)
        print(sorted(tp.partition for tp in c.assignment()), flush=True)
    """
)


def test_a_killed_members_partitions_move_after_its_session(start_node):
    node = start_node(FAST)
    create(node, "grp-kill", 4)
    other = subprocess.Popen(
        [sys.executable, "-c", MEMBER, node.bootstrap, "grp-kill", "grp-kill"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    survivor = Polling(consumer(node, "grp-kill", "grp-kill"))
    try:
        wait_for("the partitions split between two members", lambda: len(survivor.snapshot()[1]) == 2, timeout=60)
        admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
        try:
            described = admin.describe_groups(["grp-kill"])["grp-kill"]
            assert described["group_state"] == "Stable"
            assert len(described["members"]) == 2
            assert all(m["client_host"] == "/127.0.0.1" for m in described["members"])
        finally:
            admin.close()
        other.send_signal(signal.SIGKILL)
        other.wait(timeout=10)
        # The session timeout is 6 s; the rebalance that follows waits for the survivor only.
        wait_for("the survivor owning all four partitions", lambda: len(survivor.snapshot()[1]) == 4, timeout=60)
    finally:
        other.kill()
        survivor.stop()


def test_initial_rebalance_delay_gathers_members_joining_together(start_node):
    node = start_node({"auto.create.topics.enable": "false", "group.initial.rebalance.delay.ms": "2000"})
    create(node, "grp-delay", 2)
    a = Polling(consumer(node, "grp-delay", "grp-delay"))
    b = Polling(consumer(node, "grp-delay", "grp-delay"))
    try:
        wait_for("one partition each", lambda: len(a.snapshot()[1]) == 1 and len(b.snapshot()[1]) == 1, timeout=60)
    finally:
        a.stop()
        b.stop()
    # Both joined within the delay: one generation for the pair, then Empty after they left.
    assert "generation=1 members=2" in node.log()


def test_confluent_classic_group_commits_and_restart_resumes(start_node):
    node = start_node(FAST)
    create(node, "grp-cf", 3)
    produce(node, "grp-cf", 3, 30)

    def confluent_consumer():
        return Consumer(
            {
                "bootstrap.servers": node.bootstrap,
                "group.id": "grp-cf",
                "group.protocol": "classic",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
            }
        )

    def read(c, want):
        got = []

        def enough():
            msg = c.poll(0.2)
            if msg is not None and msg.error() is None:
                got.append(msg.value().decode())
            return len(got) >= want

        wait_for(f"{want} records", enough, timeout=60)
        return got

    c = confluent_consumer()
    c.subscribe(["grp-cf"])
    try:
        got = read(c, 30)
        assert sorted(got) == sorted(f"v{i}" for i in range(30))
        c.commit(asynchronous=False)
    finally:
        c.close()

    node.restart()
    produce(node, "grp-cf", 3, 6, start=30)
    c = confluent_consumer()
    c.subscribe(["grp-cf"])
    try:
        got = read(c, 6)
        assert sorted(got) == sorted(f"v{i}" for i in range(30, 36))
        committed = c.committed([TopicPartitionC("grp-cf", p) for p in range(3)], timeout=30)
        assert sorted(tp.offset for tp in committed) == [10, 10, 10]
    finally:
        c.close()


def TopicPartitionC(topic, partition):  # noqa: N802 - mirrors the class it builds
    from confluent_kafka import TopicPartition as CTopicPartition

    return CTopicPartition(topic, partition)


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")
def test_kcat_balanced_consumer_reads_and_commits(start_node):
    node = start_node(FAST)
    create(node, "grp-kcat", 2)
    produce(node, "grp-kcat", 2, 10)
    out = subprocess.run(
        [KCAT, "-b", node.bootstrap, "-G", "grp-kcat", "-X", "auto.offset.reset=earliest",
         "-X", "session.timeout.ms=6000", "-e", "-f", "%s\n", "grp-kcat"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr + node.log()
    assert sorted(out.stdout.split()) == sorted(f"v{i}" for i in range(10))
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        offsets = admin.list_group_offsets("grp-kcat")["grp-kcat"]
        assert {tp.partition: o.offset for tp, o in offsets.items()} == {0: 5, 1: 5}
    finally:
        admin.close()


@pytest.mark.skipif(
    NODE_JS is None or not os.path.isdir(os.path.join(JS, "node_modules", "kafkajs")),
    reason="Node.js or kafkajs is missing (cd integration/js && npm ci)",
)
def test_kafkajs_consumer_group(start_node):
    node = start_node(FAST)
    create(node, "grp-js", 2)
    produce(node, "grp-js", 2, 10)
    result = subprocess.run(
        [NODE_JS, os.path.join(JS, "consume.js"), node.bootstrap, "grp-js", "grp-js", "10"],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert result.returncode == 0, result.stderr + node.log()
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(got) == sorted(f"v{i}" for i in range(10))
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        offsets = admin.list_group_offsets("grp-js")["grp-js"]
        assert {tp.partition: o.offset for tp, o in offsets.items()} == {0: 5, 1: 5}
    finally:
        admin.close()


def find_coordinator(node):
    """Creates __consumer_offsets through FindCoordinator and waits until the group is served."""
    conn = RawConn(node.bootstrap)

    def served():
        resp = conn.send(FindCoordinatorRequest[2](key="raw-group", key_type=0), FindCoordinatorResponse)
        return resp.error_code == 0 and resp

    resp = wait_for("a coordinator for raw-group", served, timeout=30)
    assert (resp.node_id, resp.port) == (1, int(node.bootstrap.split(":")[1]))
    # Transactions do not exist yet: their coordinator is not available (15).
    txn = conn.send(FindCoordinatorRequest[4](key_type=1, coordinator_keys=["t"]), FindCoordinatorResponse)
    assert [(c.key, c.error_code, c.node_id) for c in txn.coordinators] == [("t", 15, -1)]
    return conn


def join(conn, member_id="", session=10000, protocol_type="consumer", instance=None, rebalance=10000, metadata=b""):
    protocol = JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=metadata)
    request = JoinGroupRequest[5](
        group_id="raw-group", session_timeout_ms=session, rebalance_timeout_ms=rebalance, member_id=member_id,
        group_instance_id=instance, protocol_type=protocol_type, protocols=[protocol],
    )
    return conn.send(request, JoinGroupResponse)


def sync(conn, generation, member_id, instance=None, assignments=None):
    """SyncGroup v3 of raw-group; `assignments` maps member ids to their bytes (the leader's)."""
    listed = [SyncGroupRequest.SyncGroupRequestAssignment(member_id=m, assignment=a)
              for m, a in (assignments or {}).items()]
    request = SyncGroupRequest[3](group_id="raw-group", generation_id=generation, member_id=member_id,
                                  group_instance_id=instance, assignments=listed)
    return conn.send(request, SyncGroupResponse)


def heartbeat(conn, member_id, generation, instance=None):
    request = HeartbeatRequest[3](group_id="raw-group", generation_id=generation, member_id=member_id,
                                  group_instance_id=instance)
    return conn.send(request, HeartbeatResponse).error_code


def describe(conn):
    """raw-group's state and its members as sorted (instance id, member id) pairs."""
    request = DescribeGroupsRequest[5](groups=["raw-group"], include_authorized_operations=False)
    group = conn.send(request, DescribeGroupsResponse).groups[0]
    return group.group_state, sorted((m.group_instance_id, m.member_id) for m in group.members)


def loaded_coordinator(node):
    """A connection to the coordinator of raw-group, once its partition is loaded."""
    conn = find_coordinator(node)
    wait_for("the group's partition loaded", lambda: heartbeat(conn, "m", 1) == 25, timeout=30)
    return conn


def commit(conn, topic, generation=-1, member_id=""):
    partition = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata=None
    )
    request = OffsetCommitRequest[8](
        group_id="raw-group", generation_id_or_member_epoch=generation, member_id=member_id, group_instance_id=None,
        topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=topic, partitions=[partition])],
    )
    return conn.send(request, OffsetCommitResponse).topics[0].partitions[0].error_code


def test_bad_group_input_gets_kafkas_codes(start_node):
    node = start_node(FAST)
    create(node, "grp-raw", 1)
    # Heartbeat of an unknown group: UNKNOWN_MEMBER_ID (25), once the partition is loaded
    # (until then NONE, as Kafka answers a heartbeat to a loading group).
    conn = loaded_coordinator(node)
    # A commit for a partition that does not exist: UNKNOWN_TOPIC_OR_PARTITION (3).
    assert commit(conn, "no-such-topic") == 3
    # Generation ≥ 0 for a group that does not exist: ILLEGAL_GENERATION (22) before v9.
    assert commit(conn, "grp-raw", generation=3, member_id="m") == 22
    # Session timeout below group.min.session.timeout.ms: INVALID_SESSION_TIMEOUT (26).
    assert join(conn, session=100).error_code == 26
    # A dynamic member's first join (v4+): MEMBER_ID_REQUIRED (79) with its id.
    first = join(conn)
    assert first.error_code == 79 and first.member_id.startswith("pytest-raw-")
    joined = join(conn, member_id=first.member_id)
    assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, first.member_id)
    # SyncGroup with the wrong generation: ILLEGAL_GENERATION (22).
    sync = conn.send(
        SyncGroupRequest[3](group_id="raw-group", generation_id=7, member_id=first.member_id,
                            group_instance_id=None, assignments=[]),
        SyncGroupResponse,
    )
    assert sync.error_code == 22
    # Before the leader's SyncGroup the group is CompletingRebalance: REBALANCE_IN_PROGRESS (27).
    assert commit(conn, "grp-raw", generation=1, member_id=first.member_id) == 27
    # An unknown member of a live group: UNKNOWN_MEMBER_ID (25).
    assert commit(conn, "grp-raw", generation=1, member_id="stranger") == 25
    # Another protocol type: INCONSISTENT_GROUP_PROTOCOL (23).
    assert join(conn, protocol_type="connect").error_code == 23


def test_consumer_groups_tool(start_node):
    """`gregor consumer-groups` prints kafka-consumer-groups.sh's views and changes offsets."""
    from conftest import gregor_bin

    node = start_node(FAST)
    create(node, "grp-tool", 2)
    produce(node, "grp-tool", 2, 10)

    def tool(*args):
        return subprocess.run(
            [str(gregor_bin()), "consumer-groups", "--bootstrap-server", node.bootstrap, *args],
            capture_output=True, text=True, timeout=60,
        )

    member = Polling(consumer(node, "grp-tool", "grp-tool"))
    try:
        drain([member], 10)
        # Kafka 4's columns: GROUP padded to 15 + 10, each further column padded to 20.
        wait_for("the group listed as Stable",
                 lambda: f"{'grp-tool':<25} {'Stable':<20}" in tool("--list", "--state").stdout.splitlines())
        listed = tool("--list", "--type", "--state").stdout.splitlines()
        assert listed[0] == f"{'GROUP':<25} {'TYPE':<20} {'STATE':<20}"
        assert f"{'grp-tool':<25} {'Classic':<20} {'Stable':<20}" in listed
        assert tool("--list", "--type", "consumer").stdout.splitlines() == [f"{'GROUP':<25} {'TYPE':<20}"]
        assert "grp-tool" in tool("--list", "--state", "stable,empty").stdout
        bad = tool("--list", "--state", "sleepy")
        assert bad.returncode == 1 and "Invalid state value 'sleepy'" in bad.stderr, bad.stderr
        members = tool("--describe", "--group", "grp-tool", "--members", "--verbose").stdout.splitlines()
        assert members[1].split() == ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "CURRENT-EPOCH",
                                      "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
        assert members[2].split()[2:] == ["/127.0.0.1", "kafka-python-3.0.12", "2", "-", "grp-tool:0,1", "-", "-"]
        deleted = tool("--delete", "--group", "grp-tool")
        assert deleted.returncode == 1
        assert "* Group 'grp-tool' could not be deleted due to: org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty." in deleted.stdout
        # As Kafka's ConsumerGroupCommand: the refusal on stdout, the empty table, exit 0.
        active = tool("--reset-offsets", "--group", "grp-tool", "--topic", "grp-tool", "--to-earliest", "--execute")
        assert (active.returncode, active.stdout, active.stderr) == (
            0,
            "\nError: Assignments can only be reset if the group 'grp-tool' is inactive, but the current state is Stable.\n"
            f"\n{'GROUP':<15} {'TOPIC':<15} {'PARTITION':<10} NEW-OFFSET\n",
            "",
        )
    finally:
        member.stop(commit=True)

    offsets = tool("--describe", "--group", "grp-tool")
    lines = offsets.stdout.splitlines()
    # As Kafka's, the notice goes to stderr and the table to stdout.
    assert offsets.stderr == "\nConsumer group 'grp-tool' has no active members.\n"
    assert lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert [line.split() for line in lines[2:]] == [
        ["grp-tool", "grp-tool", "0", "5", "5", "0", "-", "-", "-"],
        ["grp-tool", "grp-tool", "1", "5", "5", "0", "-", "-", "-"],
    ]
    reset = tool("--reset-offsets", "--group", "grp-tool", "--topic", "grp-tool", "--shift-by", "-2", "--execute")
    assert reset.returncode == 0, reset.stderr
    assert [line.split() for line in reset.stdout.splitlines()[2:]] == [
        ["grp-tool", "grp-tool", "0", "3"],
        ["grp-tool", "grp-tool", "1", "3"],
    ]
    lag = [line.split()[5] for line in tool("--describe", "--group", "grp-tool").stdout.splitlines()[2:]]
    assert lag == ["2", "2"]
    # By time: before every record is the log start, after every record the log end.
    for when, offset in (("2000-01-01T00:00:00.000", "0"), ("2999-01-01T00:00:00.000Z", "5")):
        dry = tool("--reset-offsets", "--group", "grp-tool", "--all-topics", "--to-datetime", when, "--dry-run")
        assert [line.split()[3] for line in dry.stdout.splitlines()[2:]] == [offset, offset], dry.stderr
    removed = tool("--delete-offsets", "--group", "grp-tool", "--topic", "grp-tool:1")
    # Kafka 4.1's output (KAFKA PR 19610): the verdict, then TOPIC (15 wide or more), PARTITION
    # (10) and STATUS (15).
    assert removed.stdout == (
        "Request succeeded for deleting offsets from group grp-tool.\n"
        f"\n{'TOPIC':<15} {'PARTITION':<10} {'STATUS':<15}"
        f"\n{'grp-tool':<15} {'1':<10} {'Successful':<15}\n"
    ), removed.stdout
    assert tool("--delete", "--group", "grp-tool").stdout == "Deletion of requested consumer groups ('grp-tool') was successful.\n"
    missing = tool("--describe", "--group", "grp-tool")
    assert (missing.returncode, missing.stderr.strip()) == (1, "gregor: Error: Consumer group 'grp-tool' does not exist.")


def test_consumer_groups_tool_prints_kafkas_tables(start_node):
    """`gregor consumer-groups --describe` prints kafka-consumer-groups.sh 4.1's tables byte for
    byte: GROUP-INSTANCE-ID for a static member, Kafka 4's verbose columns, a negative LAG for a
    commit past the log end, the notice of an empty group on stderr, "-" for no strategy."""
    from conftest import gregor_bin

    node = start_node(FAST)
    create(node, "cgp", 2)
    produce(node, "cgp", 2, 10)
    host, port = node.bootstrap.rsplit(":", 1)
    coordinator = f"{host}:{port}  (1)"

    def tool(*args):
        done = subprocess.run(
            [str(gregor_bin()), "consumer-groups", "--bootstrap-server", node.bootstrap, *args],
            capture_output=True, text=True, timeout=60,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout, done.stderr

    # A stable classic group whose one member is static (KIP-345).
    static = Polling(consumer(node, "cg-static", "cgp", group_instance_id="static-1", client_id="cg-static"))
    try:
        drain([static], 10)
        wait_for("the group Stable", lambda: "Stable" in tool("--describe", "--group", "cg-static", "--state")[0])
        out, err = tool("--describe", "--group", "cg-static", "--members")
        member_id = out.splitlines()[2].split()[1]
        assert member_id.startswith("static-1-"), out
        c = max(15, len(member_id))
        assert (out, err) == (
            f"\n{'GROUP':<15} {'CONSUMER-ID':<{c}} GROUP-INSTANCE-ID {'HOST':<15} {'CLIENT-ID':<15} {'#PARTITIONS':<15} \n"
            f"{'cg-static':<15} {member_id:<{c}} {'static-1':<17} {'/127.0.0.1':<15} {'cg-static':<15} {'2':<15} \n",
            "",
        )
        out, _ = tool("--describe", "--group", "cg-static", "--members", "--verbose")
        assert out == (
            f"\n{'GROUP':<15} {'CONSUMER-ID':<{c}} GROUP-INSTANCE-ID {'HOST':<15} {'CLIENT-ID':<15} {'#PARTITIONS':<15} "
            "CURRENT-EPOCH   CURRENT-ASSIGNMENT   TARGET-EPOCH    TARGET-ASSIGNMENT   \n"
            f"{'cg-static':<15} {member_id:<{c}} {'static-1':<17} {'/127.0.0.1':<15} {'cg-static':<15} {'2':<15} "
            f"{'-':<15} {'cgp:0,1':<20} {'-':<15} {'-':<20}\n"
        )
        # Nothing committed yet: no CURRENT-OFFSET, so no LAG.
        out, err = tool("--describe", "--group", "cg-static")
        header = (f"\n{'GROUP':<15} {'TOPIC':<15} {'PARTITION':<10} {'CURRENT-OFFSET':<15} {'LOG-END-OFFSET':<15} "
                  f"{'LAG':<15} {'CONSUMER-ID':<{c}} {'HOST':<15} CLIENT-ID")
        assert (out, err) == (
            header
            + "".join(f"\n{'cg-static':<15} {'cgp':<15} {p:<10} {'-':<15} {'5':<15} {'-':<15} {member_id:<{c}} "
                      f"{'/127.0.0.1':<15} cg-static" for p in (0, 1))
            + "\n",
            "",
        )
        assert tool("--describe", "--group", "cg-static", "--state") == (
            f"\n{'GROUP':<15} {'COORDINATOR (ID)':<25} {'ASSIGNMENT-STRATEGY':<20} {'STATE':<20} #MEMBERS"
            f"\n{'cg-static':<15} {coordinator:<25} {'range':<20} {'Stable':<20} 1\n",
            "",
        )
    finally:
        static.stop()

    # An empty group with committed offsets, one of them past the log end (5): LAG -4.
    committer = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id="cg-empty", enable_auto_commit=False)
    try:
        committer.commit({TopicPartition("cgp", 1): OffsetAndMetadata(9, "", -1),
                          TopicPartition("cgp", 0): OffsetAndMetadata(3, "", -1)})
    finally:
        committer.close()
    no_members = "\nConsumer group 'cg-empty' has no active members.\n"
    assert tool("--describe", "--group", "cg-empty") == (
        f"\n{'GROUP':<15} {'TOPIC':<15} {'PARTITION':<10} {'CURRENT-OFFSET':<15} {'LOG-END-OFFSET':<15} {'LAG':<15} "
        f"{'CONSUMER-ID':<15} {'HOST':<15} CLIENT-ID"
        f"\n{'cg-empty':<15} {'cgp':<15} {'0':<10} {'3':<15} {'5':<15} {'2':<15} {'-':<15} {'-':<15} -"
        f"\n{'cg-empty':<15} {'cgp':<15} {'1':<10} {'9':<15} {'5':<15} {'-4':<15} {'-':<15} {'-':<15} -\n",
        no_members,
    )
    out, err = tool("--describe", "--group", "cg-empty", "--offsets", "--verbose")
    assert out.splitlines()[1].split()[3] == "LEADER-EPOCH" and out.splitlines()[3].split()[3:7] == ["-", "9", "5", "-4"], out
    assert tool("--describe", "--group", "cg-empty", "--members") == (
        f"\n{'GROUP':<15} {'CONSUMER-ID':<15} {'HOST':<15} {'CLIENT-ID':<15} {'#PARTITIONS':<15} \n",
        no_members,
    )
    assert tool("--describe", "--group", "cg-empty", "--state") == (
        f"\n{'GROUP':<15} {'COORDINATOR (ID)':<25} {'ASSIGNMENT-STRATEGY':<20} {'STATE':<20} #MEMBERS"
        f"\n{'cg-empty':<15} {coordinator:<25} {'-':<20} {'Empty':<20} 0\n",
        no_members,
    )
    assert tool("--describe", "--group", "cg-empty", "--state", "--verbose")[0] == (
        f"\n{'GROUP':<15} {'COORDINATOR (ID)':<25} {'ASSIGNMENT-STRATEGY':<20} {'STATE':<20} {'GROUP-EPOCH':<15} "
        f"{'TARGET-ASSIGNMENT-EPOCH':<25} #MEMBERS"
        f"\n{'cg-empty':<15} {coordinator:<25} {'-':<20} {'Empty':<20} {'-':<15} {'-':<25} 0\n"
    )
    listed = tool("--list", "--state", "empty")[0].splitlines()
    assert listed[0] == f"{'GROUP':<25} {'STATE':<20}" and f"{'cg-empty':<25} {'Empty':<20}" in listed, listed


def test_consumer_groups_tool_on_a_new_node(start_node):
    """On a node that creates topics on demand, as kafka-consumer-groups.sh: the first command
    waits out the coordinator loading __consumer_offsets; topics are described without
    creating them (an unknown one is a row or an error); `--topic T:p,p` names partitions for
    --reset-offsets too; a --delete that fails for some groups reports both kinds."""
    from conftest import gregor_bin

    node = start_node({"group.initial.rebalance.delay.ms": "0"})

    def tool(*args, command="consumer-groups"):
        return subprocess.run(
            [str(gregor_bin()), command, "--bootstrap-server", node.bootstrap, *args],
            capture_output=True, text=True, timeout=60,
        )

    create(node, "grp-new", 3)
    produce(node, "grp-new", 3, 6)
    # The very first group request: the coordinator is still loading its partition
    # (COORDINATOR_LOAD_IN_PROGRESS), which the tool retries as the Java admin client does.
    first = tool("--reset-offsets", "--group", "grp-a", "--topic", "grp-new", "--to-earliest", "--execute")
    assert first.returncode == 0, first.stderr
    assert tool("--reset-offsets", "--group", "grp-b", "--topic", "grp-new", "--to-earliest",
                "--execute").returncode == 0

    reset = tool("--reset-offsets", "--group", "grp-a", "--topic", "grp-new:0,2", "--to-offset", "1", "--dry-run")
    assert reset.returncode == 0, reset.stderr
    assert [line.split() for line in reset.stdout.splitlines()[2:]] == [
        ["grp-a", "grp-new", "0", "1"],
        ["grp-a", "grp-new", "2", "1"],
    ]
    absent_partition = tool("--reset-offsets", "--group", "grp-a", "--topic", "grp-new:7", "--to-earliest")
    assert absent_partition.returncode == 1
    assert 'The partitions "grp-new-7" do not exist' in absent_partition.stderr, absent_partition.stderr
    bad = tool("--reset-offsets", "--group", "grp-a", "--topic", "grp-new:x", "--to-earliest")
    assert bad.returncode == 1
    assert "Invalid partition 'x' specified in topic arg 'grp-new:x''" in bad.stderr, bad.stderr

    unknown_reset = tool("--reset-offsets", "--group", "grp-a", "--topic", "grp-never-reset", "--to-earliest")
    assert unknown_reset.returncode == 1
    assert "This server does not host this topic-partition." in unknown_reset.stderr, unknown_reset.stderr
    unknown_delete = tool("--delete-offsets", "--group", "grp-a", "--topic", "grp-never-deleted")
    assert unknown_delete.returncode == 1
    assert unknown_delete.stdout.splitlines()[3].split(maxsplit=2) == [
        "grp-never-deleted", "-",
        "Error: org.apache.kafka.common.errors.UnknownTopicOrPartitionException: "
        "This server does not host this topic-partition.",
    ], unknown_delete.stdout
    listed = tool("--list", command="topics").stdout.split()
    assert "grp-never-reset" not in listed and "grp-never-deleted" not in listed, listed

    deleted = tool("--delete", "--group", "grp-a", "--group", "grp-none", "--group", "grp-b")
    assert deleted.returncode == 1
    assert deleted.stdout == (
        "\nError: Deletion of some consumer groups failed:\n"
        "* Group 'grp-none' could not be deleted due to: "
        "org.apache.kafka.common.errors.GroupIdNotFoundException: The group id does not exist.\n"
        "\nThese consumer groups were deleted successfully: 'grp-a', 'grp-b'\n"
    ), deleted.stdout


def test_configs_lists_live_groups_with_the_configured_ones(start_node):
    """KIP-1142: `gregor configs --describe --entity-type groups` covers ListGroups ∪
    ListConfigResources(GROUP), and a live group without configs has (empty) dynamic configs."""
    from conftest import gregor_bin

    node = start_node(FAST)
    create(node, "grp-cfg", 1)

    def configs(*args):
        return subprocess.run(
            [str(gregor_bin()), "configs", "--bootstrap-server", node.bootstrap, *args],
            capture_output=True, text=True, timeout=60,
        )

    done = configs("--alter", "--entity-type", "groups", "--entity-name", "configured-only",
                   "--add-config", "consumer.session.timeout.ms=50000")
    assert done.returncode == 0, done.stderr
    member = Polling(consumer(node, "live-group", "grp-cfg"))
    try:
        wait_for("live-group assigned", lambda: member.snapshot()[1] == {0}, timeout=60)
        every = configs("--describe", "--entity-type", "groups").stdout
        assert "Dynamic configs for group live-group are:\n" in every
        assert "Dynamic configs for group configured-only are:\n" in every
        one = configs("--describe", "--entity-type", "groups", "--entity-name", "live-group")
        assert one.stdout == "Dynamic configs for group live-group are:\n"
    finally:
        member.stop()


def test_clients_cannot_produce_to_consumer_offsets(start_node):
    """Only the coordinator writes __consumer_offsets: a client's Produce gets
    INVALID_TOPIC_EXCEPTION (17), as Kafka answers appends to internal topics."""
    from test_data_plane import batch, produce as produce_raw

    node = start_node(FAST)
    conn = find_coordinator(node)
    partition = produce_raw(conn, "__consumer_offsets", 0, batch([(b"k", b"v", [], 1)]), acks=1)
    # Kafka's `LogAppendResult` for it has no custom message and an unknown log start offset.
    assert (partition.error_code, partition.error_message, partition.log_start_offset) == (17, None, -1)


def test_a_static_member_rejoining_fences_its_old_id(start_node):
    """KIP-345: a join with a known group.instance.id and no member id replaces the member; the
    old id is FENCED_INSTANCE_ID (82) from then on."""
    node = start_node(FAST)
    conn = loaded_coordinator(node)
    first = join(conn, instance="instance-1")
    # Static members get no MEMBER_ID_REQUIRED; the id starts with the instance id.
    assert (first.error_code, first.generation_id) == (0, 1)
    assert first.member_id.startswith("instance-1-")
    synced = sync(conn, 1, first.member_id, "instance-1", {first.member_id: b"a"})
    assert (synced.error_code, synced.assignment) == (0, b"a")
    second = join(conn, instance="instance-1")
    assert second.error_code == 0 and second.member_id != first.member_id
    assert heartbeat(conn, first.member_id, second.generation_id, "instance-1") == 82


def test_a_static_member_that_does_not_rejoin_stays_in_the_next_generation(start_node):
    """Kafka's completeClassicGroupJoin drops only the dynamic members that did not rejoin: a
    static member silent through a rebalance (its session, 30 s, outlasts the 2 s rebalance
    timeout) is listed to the leader with its old metadata and described with the group, and
    it comes back under its instance id without another join phase; its old id, never synced,
    still rebalances the group a rebalance timeout later (Kafka's pending-sync expiry)."""
    node = start_node(FAST)
    a = loaded_coordinator(node)
    b, c, admin = (RawConn(node.bootstrap) for _ in range(3))
    pool = ThreadPoolExecutor(max_workers=2)

    def static(conn, instance, member_id=""):
        return join(conn, member_id, session=30000, instance=instance, rebalance=2000, metadata=instance.encode())

    first = static(a, "ia")
    ma = first.member_id
    assert (first.error_code, first.generation_id, first.leader) == (0, 1, ma)
    assert sync(a, 1, ma, "ia", {ma: b"a1"}).assignment == b"a1"
    # B joins; A learns of the rebalance from its heartbeat and rejoins.
    joining = pool.submit(static, b, "ib")
    wait_for("a rebalance for B", lambda: heartbeat(a, ma, 1, "ia") == 27, timeout=30)
    assert static(a, "ia", ma).generation_id == 2
    mb = joining.result(timeout=30).member_id
    syncing = pool.submit(sync, b, 2, mb, "ib")
    assert sync(a, 2, ma, "ia", {ma: b"a2", mb: b"b2"}).assignment == b"a2"
    assert syncing.result(timeout=30).assignment == b"b2"

    # C joins and A rejoins; B stays silent, so the join phase ends at the rebalance timeout.
    joining = pool.submit(static, c, "ic")
    wait_for("a rebalance for C", lambda: heartbeat(a, ma, 2, "ia") == 27, timeout=30)
    leader = static(a, "ia", ma)
    mc = joining.result(timeout=30).member_id
    assert (leader.error_code, leader.generation_id, leader.leader) == (0, 3, ma)
    assert sorted((m.group_instance_id, m.member_id, m.metadata) for m in leader.members) == [
        ("ia", ma, b"ia"), ("ib", mb, b"ib"), ("ic", mc, b"ic")]
    assert describe(admin) == ("CompletingRebalance", [("ia", ma), ("ib", mb), ("ic", mc)])
    syncing = pool.submit(sync, c, 3, mc, "ic")
    assert sync(a, 3, ma, "ia", {ma: b"a3", mb: b"b3", mc: b"c3"}).assignment == b"a3"
    assert syncing.result(timeout=30).assignment == b"c3"

    # B restarts: same instance, no member id, same metadata. No rebalance for the join.
    back = static(b, "ib")
    assert (back.error_code, back.generation_id, back.leader) == (0, 3, ma)
    assert back.member_id != mb
    assert sync(b, 3, back.member_id, "ib").assignment == b"b3"
    # But B's old id never sent SyncGroup for generation 3: as Kafka's expirePendingSync, a
    # rebalance timeout after that join phase the group rebalances, B kept under its new id.
    wait_for("the pending-sync rebalance", lambda: heartbeat(a, ma, 3, "ia") == 27, timeout=30)
    assert describe(admin) == ("PreparingRebalance", [("ia", ma), ("ib", back.member_id), ("ic", mc)])
    pool.shutdown()


def test_a_join_phase_nobody_rejoined_keeps_its_static_members(start_node):
    """When no member rejoins, Kafka drops the dynamic members and keeps the static ones in a
    group still preparing its rebalance (not an empty one): the static member rejoining then
    completes the join phase at once."""
    node = start_node(FAST)
    s = loaded_coordinator(node)
    d, n, admin = (RawConn(node.bootstrap) for _ in range(3))
    pool = ThreadPoolExecutor(max_workers=1)

    def member(conn, member_id="", instance=None):
        return join(conn, member_id, session=30000, instance=instance, rebalance=2000)

    ms = member(s, instance="is").member_id
    assert sync(s, 1, ms, "is").error_code == 0
    md = member(d).member_id  # MEMBER_ID_REQUIRED
    joining = pool.submit(member, d, md)
    wait_for("a rebalance for D", lambda: heartbeat(s, ms, 1, "is") == 27, timeout=30)
    assert member(s, ms, "is").generation_id == 2
    assert joining.result(timeout=30).generation_id == 2
    syncing = pool.submit(sync, d, 2, md)
    assert sync(s, 2, ms, "is").error_code == 0
    assert syncing.result(timeout=30).error_code == 0

    # A newcomer starts a rebalance and leaves; neither S nor D rejoins.
    mn = member(n).member_id
    joining = pool.submit(member, n, mn)
    wait_for("a rebalance for N", lambda: heartbeat(s, ms, 2, "is") == 27, timeout=30)
    leave = LeaveGroupRequest[3](group_id="raw-group", members=[
        LeaveGroupRequest.MemberIdentity(member_id=mn, group_instance_id=None)])
    assert [m.error_code for m in admin.send(leave, LeaveGroupResponse).members] == [0]
    assert joining.result(timeout=30).error_code == 25
    # At the rebalance timeout the join phase ends without D, and with S, still preparing.
    wait_for("D dropped", lambda: md not in {m for _, m in describe(admin)[1]}, timeout=30)
    assert describe(admin) == ("PreparingRebalance", [("is", ms)])
    assert heartbeat(s, ms, 2, "is") == 27
    assert heartbeat(d, md, 2) == 25
    back = member(s, ms, "is")
    assert (back.error_code, back.generation_id, back.leader) == (0, 3, ms)
    assert [(m.group_instance_id, m.member_id) for m in back.members] == [("is", ms)]
    pool.shutdown()


def test_a_member_that_does_not_sync_is_removed_after_the_rebalance_timeout(start_node):
    """Kafka's expirePendingSync: a member of a new generation that has not sent SyncGroup a
    rebalance timeout (2 s) after the join phase completed is removed, though it heartbeats,
    and the group prepares a rebalance at the same generation: the member that synced hears
    REBALANCE_IN_PROGRESS (27), the removed one UNKNOWN_MEMBER_ID (25), and a rejoin makes a
    generation of one member."""
    node = start_node(FAST)
    a = loaded_coordinator(node)
    b, admin = RawConn(node.bootstrap), RawConn(node.bootstrap)
    pool = ThreadPoolExecutor(max_workers=1)

    def member(conn, member_id=""):
        return join(conn, member_id, rebalance=2000)

    ma = member(a).member_id  # MEMBER_ID_REQUIRED
    assert member(a, ma).generation_id == 1
    assert sync(a, 1, ma, assignments={ma: b"a1"}).error_code == 0
    mb = member(b).member_id
    joining = pool.submit(member, b, mb)
    wait_for("a rebalance for B", lambda: heartbeat(a, ma, 1) == 27, timeout=30)
    assert member(a, ma).generation_id == 2
    assert joining.result(timeout=30).generation_id == 2
    assert sync(a, 2, ma, assignments={ma: b"a2", mb: b"b2"}).assignment == b"a2"

    # B heartbeats (so its session never ends) but never sends SyncGroup.
    def removed():
        heartbeat(b, mb, 2)
        return heartbeat(a, ma, 2) == 27

    wait_for("B removed for not syncing", removed, timeout=20)
    assert heartbeat(b, mb, 2) == 25
    assert describe(admin) == ("PreparingRebalance", [(None, ma)])
    back = member(a, ma)
    assert (back.error_code, back.generation_id, back.leader) == (0, 3, ma)
    assert [m.member_id for m in back.members] == [ma]
    pool.shutdown()


def test_console_consumer_group_commits_and_resumes(start_node):
    """`gregor console-consumer --group`: a classic member that reads from its group's commits
    and commits what it printed when it exits."""
    from conftest import gregor_bin

    node = start_node(FAST)
    create(node, "grp-console", 2)
    produce(node, "grp-console", 2, 10)

    def console(*args):
        done = subprocess.run(
            [str(gregor_bin()), "console-consumer", "--bootstrap-server", node.bootstrap, "--topic", "grp-console",
             "--group", "grp-console", "--timeout-ms", "30000", *args],
            capture_output=True, text=True, timeout=90,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert sorted(console("--from-beginning", "--max-messages", "10")) == sorted(f"v{i}" for i in range(10))
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        offsets = admin.list_group_offsets("grp-console")["grp-console"]
        assert {tp.partition: o.offset for tp, o in offsets.items()} == {0: 5, 1: 5}
    finally:
        admin.close()
    produce(node, "grp-console", 2, 4, start=10)
    # No --from-beginning: the group's commits decide, so only the new records are read.
    assert sorted(console("--max-messages", "4")) == sorted(f"v{i}" for i in range(10, 14))


def test_a_deleted_topics_offsets_go_with_it(start_node):
    """Kafka's coordinator tombstones the offsets of a deleted topic's partitions
    (`onPartitionsDeleted`): a topic created again under the same name has no committed offset,
    and the group's new member reads it from the start instead of skipping what the old topic's
    offset covered."""
    node = start_node()
    topic, group = "recreated-offsets", "recreated-offsets-group"
    create(node, topic, 1)
    produce(node, topic, 1, 30)
    c = consumer(node, group, topic)
    wait_for("the member's assignment", lambda: c.poll(timeout_ms=200) is not None and bool(c.assignment()), timeout=30)
    c.commit({TopicPartition(topic, 0): OffsetAndMetadata(30, "", -1)})
    c.close(autocommit=False)
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        def committed():
            offsets = admin.list_group_offsets(group)[group]
            return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}

        assert committed() == {0: 30}
        admin.delete_topics([topic])
        wait_for("the group's offsets of the deleted topic gone", lambda: committed() == {}, timeout=30)

        def recreated():
            try:
                admin.create_topics([NewTopic(topic, 1, 1)])
                return True
            except Exception:
                return False

        wait_for("the topic created again", recreated, timeout=30)
        produce(node, topic, 1, 10)
        again = consumer(node, group, topic)
        seen = []
        wait_for("the new topic read from its start",
                 lambda: seen.extend(r.value.decode() for rs in again.poll(timeout_ms=200).values() for r in rs) or len(seen) >= 10,
                 timeout=60)
        again.close(autocommit=False)
        assert seen[:10] == [f"v{i}" for i in range(10)]
    finally:
        admin.close()
