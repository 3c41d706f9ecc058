"""Replication across three real brokers (combined broker+controller nodes, RF 3,
min.insync.replicas=2): idempotent acks=all producers keep writing while the partition leader is
killed with SIGKILL again and again; every acknowledged record must be there exactly once, in
order, and followers must rejoin the ISR after they come back.

Nothing sleeps to synchronise: every wait is `wait_for` on a condition with a deadline.
"""

import os
import re
import signal
import subprocess
import threading
import time
import uuid

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from conftest import Node, RawConn, gregor_bin, wait_for
from ports import reserve_port
from test_data_plane import batch, list_offset, produce

REQUEST_TIMED_OUT = 7

# Kill -9 rounds of the leader: the CI-sized run does 20 (each round waits for a fencing and a
# catch-up: about 90 s in all).
ROUNDS = int(os.environ.get("GREGOR_REPLICATION_KILLS", "20"))
SESSION_TIMEOUT_MS = "3000"
HEARTBEAT_INTERVAL_MS = "500"
FAILOVER_TIMEOUT = 60.0


def random_uuid():
    out = subprocess.run([str(gregor_bin()), "storage", "random-uuid"], check=True, capture_output=True, text=True)
    return out.stdout.strip()


class ClusterNode(Node):
    """A combined broker+controller node of a three-voter cluster: formatted before its first
    start, and started without waiting (no voter is ready before a quorum forms): call
    `wait_ready` after `start`."""

    # The listener whose address is `bootstrap`: subclasses with other listener names set it.
    client_listener = "PLAINTEXT"

    def __init__(self, overrides, format_args, env=None):
        self.format_args = format_args
        self.formatted = False
        self.env = env or {}
        super().__init__(overrides)

    def start(self):
        args = [str(gregor_bin())]
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        env = dict(os.environ, NO_COLOR="1", **self.env)
        env.pop("RUST_LOG", None)
        if not self.formatted:
            subprocess.run([args[0], "storage", "format"] + args[1:] + self.format_args, check=True, capture_output=True, env=env)
            self.formatted = True
        self._log = open(self.log_path, "ab")
        self._log_start = self._log.tell()
        self.proc = subprocess.Popen([args[0], "node"] + args[1:], stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log, env=env)

    def terminate(self):
        """SIGTERM, then wait for the process to exit (a controlled shutdown)."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=FAILOVER_TIMEOUT)
        self._log.close()

    def wait_ready(self):
        """Waits for the ready line, failing at once with the node's log if the process exits
        first (a port another test took, a refused configuration) rather than at the deadline."""
        deadline = time.monotonic() + FAILOVER_TIMEOUT
        while (line := self._ready_line()) is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gregor exited with {self.proc.returncode} before it was ready:\n{self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no `node ready` within {FAILOVER_TIMEOUT}s; the node's log:\n{self.log()}")
            time.sleep(0.05)
        listeners = re.search(r"(?:^|\s)listeners=(\S+)", line).group(1).strip('"')
        self.listeners = dict(e.split("://", 1) for e in listeners.split(","))
        self.bootstrap = self.listeners.get(self.client_listener)
        self.metrics = re.search(r"(?:^|\s)metrics=(\S+)", line).group(1).strip('"')


def start_cluster(extra=None, env=None):
    cluster_id = random_uuid()
    specs = [(i, reserve_port(), random_uuid()) for i in (1, 2, 3)]
    initial = ",".join(f"{i}@127.0.0.1:{port}:{d}" for i, port, d in specs)
    voters = ",".join(f"127.0.0.1:{port}" for _, port, _ in specs)
    nodes = []
    for node_id, port, _ in specs:
        overrides = {
            "node.id": str(node_id),
            "process.roles": "broker,controller",
            "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}",
            "controller.quorum.bootstrap.servers": voters,
            "broker.session.timeout.ms": SESSION_TIMEOUT_MS,
            "broker.heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
            "replica.lag.time.max.ms": "10000",
        }
        overrides.update(extra or {})
        nodes.append(ClusterNode(overrides, ["--cluster-id", cluster_id, "--initial-controllers", initial], env(node_id) if env else None))
    for node in nodes:
        node.wait_ready()
    return nodes


PAUSE_FETCH_HOOK = "GREGOR_TEST_ONLY_PAUSE_REPLICA_FETCH_FILE"
ISOLATE_QUORUM_HOOK = "GREGOR_TEST_ONLY_ISOLATE_QUORUM_FILE"


def start_hooked_cluster(tmp_path, hook, extra=None):
    """A cluster whose nodes each watch their own file for the test-only `hook`: returns the
    nodes and the files by node id (absent until a test creates one)."""
    files = {node_id: tmp_path / f"{hook.lower()}-{node_id}" for node_id in (1, 2, 3)}
    return start_cluster(extra, env=lambda node_id: {hook: str(files[node_id])}), files


def bootstrap(nodes, alive=None):
    return ",".join(n.bootstrap for n in nodes if alive is None or n in alive)


def partition_state(admin, topic):
    """(leader, replicas, isr) of partition 0 as the cluster reports it."""
    metadata = admin.list_topics(topic=topic, timeout=10)
    p = metadata.topics[topic].partitions[0]
    return p.leader, sorted(p.replicas), sorted(p.isrs)


def metric(node, name):
    """The sum of every series of `name` in the node's scrape."""
    return sum(float(line.split()[-1]) for line in node.metrics_text().splitlines() if line.startswith(name + " ") or line.startswith(name + "{"))


def create_replicated_topic(admin, topic, min_insync_replicas):
    """Waits for three unfenced brokers, creates `topic` with one RF 3 partition and waits for
    its full ISR."""
    wait_for("three unfenced brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=FAILOVER_TIMEOUT)
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": str(min_insync_replicas)})])[topic].result(30)
    wait_for("a full ISR", lambda: partition_state(admin, topic)[2] == [1, 2, 3], timeout=FAILOVER_TIMEOUT)


def produce_acknowledged(nodes, topic, values):
    """Writes `values` to partition 0 of `topic` with acks=all; all acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap(nodes), "acks": "all"})
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(60) == 0
    return producer


def log_bytes(node, topic):
    partition_dir = os.path.join(node.data_dir, f"{topic}-0")
    segments = sorted(f for f in os.listdir(partition_dir) if f.endswith(".log"))
    data = b""
    for segment in segments:
        with open(os.path.join(partition_dir, segment), "rb") as f:
            data += f.read()
    return data


def check_log(nodes, topic, acked):
    """Reads partition 0 from the start: every acknowledged (offset, value) is there (at its
    offset when librdkafka reported one: a retried batch the broker already had may be
    acknowledged without offsets), no value twice, values in production order."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap(nodes),
        "group.id": f"check-{uuid.uuid4()}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    })
    consumer.assign([TopicPartition(topic, 0, 0)])
    seen = {}
    wanted = {value for _, value in acked}
    deadline = time.monotonic() + FAILOVER_TIMEOUT
    while not wanted <= set(seen.values()) and time.monotonic() < deadline:
        for msg in consumer.consume(500, timeout=1.0):
            if msg.error() is None:
                seen[msg.offset()] = msg.value()
    consumer.close()
    for offset, value in acked:
        if offset is None:
            assert value in seen.values(), f"acknowledged record {value!r} is missing"
        else:
            assert seen.get(offset) == value, f"acknowledged record {value!r} at {offset} is missing or different: {seen.get(offset)!r}"
    values = [seen[o] for o in sorted(seen)]
    assert len(values) == len(set(values)), "a record was written twice"
    numbers = [int(v.split(b"-")[1]) for v in values]
    assert numbers == sorted(numbers), "records out of order"


def test_acks_all_survives_repeated_leader_kills():
    nodes = start_cluster()
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        topic = "replicated"
        wait_for("three unfenced brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=FAILOVER_TIMEOUT)
        futures = admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])
        futures[topic].result(30)
        wait_for("a leader and a full ISR", lambda: (lambda s: s[0] >= 0 and s[2] == [1, 2, 3])(partition_state(admin, topic)), timeout=FAILOVER_TIMEOUT)

        acked = []  # (offset, value) acknowledged with acks=all
        errors = []
        stop = threading.Event()
        producer = Producer({
            "bootstrap.servers": bootstrap(nodes),
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.timeout.ms": 120000,
            "topic.metadata.refresh.interval.ms": 1000,
        })

        def delivered(err, msg):
            if err is None:
                acked.append((msg.offset(), msg.value()))
            else:
                errors.append(err)

        def produce():
            i = 0
            while not stop.is_set():
                try:
                    producer.produce(topic, value=f"v-{i}".encode(), partition=0, on_delivery=delivered)
                    i += 1
                except BufferError:
                    pass
                producer.poll(0.01)
            producer.flush(120)

        writer = threading.Thread(target=produce)
        writer.start()
        try:
            for _ in range(ROUNDS):
                before = len(acked)
                wait_for("acknowledged writes", lambda: len(acked) >= before + 20, timeout=FAILOVER_TIMEOUT)
                leader = partition_state(admin, topic)[0]
                victim = by_id[leader]
                victim.kill9()
                alive = [n for n in nodes if n is not victim]
                survivor_admin = AdminClient({"bootstrap.servers": bootstrap(nodes, alive)})
                wait_for("a new leader", lambda: partition_state(survivor_admin, topic)[0] not in (-1, leader), timeout=FAILOVER_TIMEOUT)
                after_kill = len(acked)
                wait_for("writes acknowledged by the new leader", lambda: len(acked) >= after_kill + 20, timeout=FAILOVER_TIMEOUT)
                victim.start()
                victim.wait_ready()
                admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
                wait_for("the restarted broker back in the ISR", lambda: partition_state(admin, topic)[2] == [1, 2, 3], timeout=FAILOVER_TIMEOUT)
        finally:
            stop.set()
            writer.join(180)
        assert not errors, f"non-retriable errors reached the producer: {errors[:5]}"
        assert len(acked) >= ROUNDS * 40

        # One leader, nothing under-replicated, and the restarted brokers were added back by
        # their leaders (each rejoin is one committed expansion).
        wait_for("one leader and a full ISR in the metrics", lambda: sum(metric(n, "kafka_server_replicamanager_leadercount") for n in nodes) == 1
                 and sum(metric(n, "kafka_server_replicamanager_underreplicatedpartitions") for n in nodes) == 0, timeout=FAILOVER_TIMEOUT)
        assert sum(metric(n, "kafka_server_replicamanager_isrexpands_total") for n in nodes) >= 1
        # Followers append the leader's batches as they are: once they have caught up, every
        # replica's log holds the same bytes (segments concatenated in offset order).
        wait_for("byte-identical replica logs", lambda: len({log_bytes(n, topic) for n in nodes}) == 1, timeout=FAILOVER_TIMEOUT)
        last = max((o, v) for o, v in acked if o is not None)[1]
        assert last in log_bytes(nodes[0], topic), f"the logs end with {last!r}"

        check_log(nodes, topic, acked)
    finally:
        for node in nodes:
            node.close()


def test_controlled_shutdown_of_each_broker_under_load():
    """SIGTERM each broker in turn while an acks=all producer writes: leaderships move before
    the broker stops, so only retriable errors reach the producer and nothing acknowledged is
    lost."""
    nodes = start_cluster()
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        topic = "shutdowns"
        create_replicated_topic(admin, topic, 2)
        acked, errors = [], []
        stop = threading.Event()
        producer = Producer({"bootstrap.servers": bootstrap(nodes), "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "message.timeout.ms": 120000, "topic.metadata.refresh.interval.ms": 1000})

        def delivered(err, msg):
            if err is None:
                acked.append((msg.offset(), msg.value()))
            else:
                errors.append(err)

        def produce():
            i = 0
            while not stop.is_set():
                try:
                    producer.produce(topic, value=f"v-{i}".encode(), partition=0, on_delivery=delivered)
                    i += 1
                except BufferError:
                    pass
                producer.poll(0.01)
            producer.flush(120)

        writer = threading.Thread(target=produce)
        writer.start()
        try:
            for node_id in (1, 2, 3):
                before = len(acked)
                wait_for("acknowledged writes", lambda: len(acked) >= before + 20, timeout=FAILOVER_TIMEOUT)
                node = by_id[node_id]
                led = partition_state(admin, topic)[0] == node_id
                node.terminate()
                if led:
                    assert "controlled shutdown: no leaderships left" in node.log(), node.log()
                alive = [n for n in nodes if n is not node]
                survivors = AdminClient({"bootstrap.servers": bootstrap(nodes, alive)})
                wait_for("a leader among the others", lambda: partition_state(survivors, topic)[0] not in (-1, node_id), timeout=FAILOVER_TIMEOUT)
                after = len(acked)
                wait_for("writes acknowledged meanwhile", lambda: len(acked) >= after + 20, timeout=FAILOVER_TIMEOUT)
                node.start()
                node.wait_ready()
                admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
                wait_for("the broker back in the ISR", lambda: partition_state(admin, topic)[2] == [1, 2, 3], timeout=FAILOVER_TIMEOUT)
        finally:
            stop.set()
            writer.join(180)
        assert not errors, f"non-retriable errors reached the producer: {errors[:5]}"
        check_log(nodes, topic, acked)
    finally:
        for node in nodes:
            node.close()


def test_a_former_leader_truncates_what_only_it_had(tmp_path):
    """The followers stop fetching (test-only pause file), the leader takes acks=1 records only
    it has, then is killed; once it comes back as a follower of the new leader it finds its tail
    diverging and truncates it, and its log becomes byte-identical to the others'."""
    nodes, pause = start_hooked_cluster(tmp_path, PAUSE_FETCH_HOOK)
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        topic = "truncation"
        create_replicated_topic(admin, topic, 2)

        def send(values, acks):
            producer = Producer({"bootstrap.servers": bootstrap(nodes, [n for n in nodes if n.proc.poll() is None]),
                                 "acks": acks, "enable.idempotence": False, "message.timeout.ms": 60000})
            results = []
            for value in values:
                producer.produce(topic, value=value, partition=0, on_delivery=lambda err, msg: results.append(err))
            producer.flush(60)
            assert results == [None] * len(values), results

        send([f"committed-{i}".encode() for i in range(10)], "all")
        leader = partition_state(admin, topic)[0]
        for node_id in by_id:
            if node_id != leader:
                pause[node_id].touch()
        send([f"only-leader-{i}".encode() for i in range(5)], 1)
        by_id[leader].kill9()
        for node_id in by_id:
            pause[node_id].unlink(missing_ok=True)
        survivors = AdminClient({"bootstrap.servers": bootstrap(nodes, [n for n in nodes if n is not by_id[leader]])})
        wait_for("a new leader", lambda: partition_state(survivors, topic)[0] not in (-1, leader), timeout=FAILOVER_TIMEOUT)
        send([f"new-leader-{i}".encode() for i in range(5)], "all")

        former = by_id[leader]
        assert b"only-leader" in log_bytes(former, topic)
        former.start()
        former.wait_ready()
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        wait_for("the former leader back in the ISR", lambda: partition_state(admin, topic)[2] == [1, 2, 3], timeout=FAILOVER_TIMEOUT)
        wait_for("byte-identical replica logs", lambda: len({log_bytes(n, topic) for n in nodes}) == 1, timeout=FAILOVER_TIMEOUT)
        assert b"only-leader" not in log_bytes(former, topic)
        assert b"new-leader-4" in log_bytes(former, topic)
        with open(former.log_path, errors="replace") as log:
            assert "truncated a divergent log tail" in log.read()
    finally:
        for node in nodes:
            node.close()


def test_a_leader_that_appended_nothing_rejoins_after_a_restart():
    """Leadership moves twice with no record in between: the first new leader records its
    epoch at its log end, is killed before it appends anything, and comes back as a follower of
    a newer epoch that starts at the same offset. Its empty epoch diverges from the leader's
    history; it must drop it (Kafka's `truncateTo` at the log end) to fetch again and rejoin
    the ISR, not truncate to the same offset forever."""
    nodes = start_cluster()
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        topic = "empty-epoch"
        create_replicated_topic(admin, topic, 2)
        produce_acknowledged(nodes, topic, [b"%d" % i for i in range(10)])

        for _ in range(2):
            leader = partition_state(admin, topic)[0]
            by_id[leader].kill9()
            survivors = AdminClient({"bootstrap.servers": bootstrap(nodes, [n for n in nodes if n is not by_id[leader]])})
            wait_for("a new leader", lambda: partition_state(survivors, topic)[0] not in (-1, leader), timeout=FAILOVER_TIMEOUT)
            by_id[leader].start()
            by_id[leader].wait_ready()
            admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
            wait_for(f"node {leader} back in the ISR", lambda: partition_state(admin, topic)[2] == [1, 2, 3], timeout=FAILOVER_TIMEOUT)
    finally:
        for node in nodes:
            node.close()


def test_a_leader_cut_off_from_the_quorum_stops_acknowledging_and_truncates(tmp_path):
    """The partition leader loses every quorum connection (test-only isolation file) while its
    clients still reach it: the controller fences it and elects another leader; the old leader,
    still believing it leads, takes acks=all records but acknowledges none of them, since its
    followers now fetch from the new leader; once reconnected it becomes a follower, truncates
    those records and its log becomes byte-identical to the others'."""
    nodes, isolate = start_hooked_cluster(tmp_path, ISOLATE_QUORUM_HOOK)
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        topic = "isolated"
        create_replicated_topic(admin, topic, 2)
        leader = partition_state(admin, topic)[0]
        old_leader = by_id[leader]
        survivors = [n for n in nodes if n is not old_leader]

        def send(targets, values):
            producer = Producer({"bootstrap.servers": bootstrap(nodes, targets), "acks": "all", "enable.idempotence": False,
                                 "message.timeout.ms": 60000})
            results = []
            for value in values:
                producer.produce(topic, value=value, partition=0, on_delivery=lambda err, msg: results.append(err))
            producer.flush(90)
            return results

        assert send(nodes, [f"before-{i}".encode() for i in range(10)]) == [None] * 10
        isolate[leader].touch()

        def switched():
            # Asked of the survivors' own metrics: a client's Metadata request may reach the old
            # leader, which still names itself.
            leading = [n for n in survivors if metric(n, "kafka_server_replicamanager_leadercount") == 1]
            if len(leading) != 1:
                return False
            new_leader = next(i for i, n in by_id.items() if n is leading[0])
            follower = next(n for n in survivors if n is not leading[0])
            fetched = lag_series(follower, "kafka_server_fetcherlagmetrics_consumerlag")
            return (f'clientId="ReplicaFetcherThread-0-{new_leader}",topic="{topic}",partition="0"' in fetched
                    and f'clientId="ReplicaFetcherThread-0-{leader}",topic="{topic}",partition="0"' not in fetched)

        wait_for("a new leader and its follower fetching from it", switched, timeout=FAILOVER_TIMEOUT)
        # Straight to the old leader, on a raw connection: a client library bootstrapped from it
        # may ask another broker for metadata and go to the new leader instead.
        conn = RawConn(old_leader.bootstrap)
        try:
            now_ms = int(time.time() * 1000)
            cut_off = batch([(None, f"cut-off-{i}".encode(), [], now_ms) for i in range(5)])
            answer = produce(conn, topic, 0, cut_off, acks=-1, timeout_ms=3000)
        finally:
            conn.close()
        assert answer.error_code == REQUEST_TIMED_OUT, answer
        assert b"cut-off-4" in log_bytes(old_leader, topic), "the old leader appended the records it could not acknowledge"
        assert send(survivors, [f"after-{i}".encode() for i in range(10)]) == [None] * 10

        isolate[leader].unlink()
        wait_for("the old leader back in the ISR", lambda: partition_state(admin, topic)[2] == [1, 2, 3], timeout=FAILOVER_TIMEOUT)
        wait_for("byte-identical replica logs", lambda: len({log_bytes(n, topic) for n in nodes}) == 1, timeout=FAILOVER_TIMEOUT)
        data = log_bytes(old_leader, topic)
        assert b"cut-off" not in data and b"before-9" in data and b"after-9" in data
        with open(old_leader.log_path, errors="replace") as log:
            assert "truncated a divergent log tail" in log.read()
    finally:
        for node in nodes:
            node.close()


def lag_series(node, name, text=None):
    """{labels: value} of the series `name` in the node's scrape (or in `text`, one already
    taken)."""
    series = {}
    for line in (text if text is not None else node.metrics_text()).splitlines():
        if line.startswith(name + "{"):
            labels, value = line[len(name) + 1:].rsplit("} ", 1)
            series[labels] = float(value)
    return series


def test_replica_lag_metrics_follow_a_lagging_follower(tmp_path):
    """A follower that stops fetching leaves the ISR; the leader's high watermark moves on
    without it; once it fetches again, one batch per fetch, its lag (Kafka's
    FetcherLagMetrics.ConsumerLag and ReplicaFetcherManager.MaxLag) shows how far it is behind
    and falls to 0. Deleting the topic removes the partition's series."""
    nodes, pause = start_hooked_cluster(tmp_path, PAUSE_FETCH_HOOK, {"replica.lag.time.max.ms": "1000", "replica.fetch.max.bytes": "1"})
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        topic = "lagging"
        create_replicated_topic(admin, topic, 1)
        leader, replicas, _ = partition_state(admin, topic)
        lagging = next(r for r in replicas if r != leader)
        follower = by_id[lagging]
        series = f'clientId="ReplicaFetcherThread-0-{leader}",topic="{topic}",partition="0"'
        wait_for("the follower's lag series", lambda: series in lag_series(follower, "kafka_server_fetcherlagmetrics_consumerlag"), timeout=FAILOVER_TIMEOUT)

        pause[lagging].touch()
        # One record per batch, so the follower catches up one fetch (one batch) at a time.
        producer = Producer({"bootstrap.servers": bootstrap(nodes), "acks": 1, "enable.idempotence": False,
                             "batch.num.messages": 1, "linger.ms": 0})
        records = 2000
        for i in range(records):
            while True:
                try:
                    producer.produce(topic, value=b"%d" % i, partition=0)
                    break
                except BufferError:
                    producer.poll(0.01)
        assert producer.flush(60) == 0
        # Behind the leader's log end for replica.lag.time.max.ms: out of the ISR, so the high
        # watermark moves on without it.
        wait_for("the paused follower out of the ISR", lambda: lagging not in partition_state(admin, topic)[2], timeout=FAILOVER_TIMEOUT)

        pause[lagging].unlink()
        seen = []

        def caught_up():
            # Both from one scrape: from two, the maximum could be read after the follower
            # caught up a little further than the partition's lag read before it.
            text = follower.metrics_text()
            lag = lag_series(follower, "kafka_server_fetcherlagmetrics_consumerlag", text).get(series)
            max_lag = lag_series(follower, "kafka_server_replicafetchermanager_maxlag", text).get('clientId="Replica"')
            seen.append((lag, max_lag))
            return lag == 0 and max_lag == 0 and lagging in partition_state(admin, topic)[2]

        wait_for("the follower caught up with lag 0", caught_up, timeout=FAILOVER_TIMEOUT)
        behind = [lag for lag, _ in seen if lag]
        assert behind and max(behind) <= records, seen[:20]
        assert any(max_lag and max_lag >= lag for lag, max_lag in seen if lag), seen[:20]

        admin.delete_topics([topic])[topic].result(30)
        wait_for("the partition's lag series removed",
                 lambda: series not in lag_series(follower, "kafka_server_fetcherlagmetrics_consumerlag"), timeout=FAILOVER_TIMEOUT)
    finally:
        for node in nodes:
            node.close()


def test_group_commits_wait_for_the_offsets_topic_isr(tmp_path):
    """__consumer_offsets is written with acks=all: while its followers fetch nothing (and are
    still in the ISR), a commit is not acknowledged and times out (COORDINATOR_NOT_AVAILABLE); once they
    fetch again, commits are acknowledged and read back from the group."""
    from kafka.protocol.consumer.group import (
        OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    )
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
    from conftest import RawConn

    nodes, pause = start_hooked_cluster(
        tmp_path, PAUSE_FETCH_HOOK,
        {"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "1",
         "offsets.commit.timeout.ms": "2000", "replica.lag.time.max.ms": "600000"})
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        wait_for("three unfenced brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=FAILOVER_TIMEOUT)
        admin.create_topics([NewTopic("committed", 1, 3)])["committed"].result(30)

        def coordinator():
            conn = RawConn(nodes[0].bootstrap)
            try:
                resp = conn.send(FindCoordinatorRequest[2](key="acks-all-group", key_type=0), FindCoordinatorResponse)
                return resp.error_code == 0 and resp.node_id
            finally:
                conn.close()

        leader = wait_for("a coordinator", coordinator, timeout=FAILOVER_TIMEOUT)
        wait_for("the offsets topic's full ISR",
                 lambda: partition_state(admin, "__consumer_offsets")[2] == [1, 2, 3], timeout=FAILOVER_TIMEOUT)
        conn = RawConn(by_id[leader].bootstrap)

        def commit(offset):
            partition = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=None)
            request = OffsetCommitRequest[8](
                group_id="acks-all-group", generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="committed", partitions=[partition])])
            return conn.send(request, OffsetCommitResponse).topics[0].partitions[0].error_code

        def fetched():
            request = OffsetFetchRequest[7](
                group_id="acks-all-group",
                topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="committed", partition_indexes=[0])],
                require_stable=False)
            return conn.send(request, OffsetFetchResponse).topics[0].partitions[0].committed_offset

        # A first commit may find the partition still loading (14): retry until it is served.
        assert wait_for("a first commit", lambda: commit(5) == 0, timeout=FAILOVER_TIMEOUT)
        for node_id, path in pause.items():
            if node_id != leader:
                path.touch()
        # The followers stay in the ISR (replica.lag.time.max.ms is long), so the high
        # watermark cannot pass the commit: no acknowledgement within offsets.commit.timeout.ms,
        # answered as Kafka's coordinator answers a timed-out write, COORDINATOR_NOT_AVAILABLE.
        assert commit(7) == 15, "a commit was acknowledged before the offsets topic's ISR had it"
        # In the leader's log but not replicated: OffsetFetch answers what is committed, as
        # Kafka's coordinator reads at its last committed offset.
        assert fetched() == 5
        for path in pause.values():
            path.unlink(missing_ok=True)
        assert wait_for("a commit acknowledged by the whole ISR", lambda: commit(9) == 0, timeout=FAILOVER_TIMEOUT)
        assert fetched() == 9
        conn.close()
    finally:
        for node in nodes:
            node.close()


def test_an_acknowledged_commit_survives_the_coordinators_kill():
    """A commit is acknowledged once the offsets topic's whole ISR has it, but a follower learns
    the high watermark that covers it only on its next fetch. Killed at once, the coordinator
    leaves a new leader whose high watermark is below the commit: its load must still read the
    commit (Kafka's loader reads to the log end), not stop at that high watermark and forget it."""
    from kafka.protocol.consumer.group import (
        OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse,
    )
    from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

    nodes = start_cluster({"offsets.topic.replication.factor": "3", "offsets.topic.num.partitions": "1"})
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        wait_for("three unfenced brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=FAILOVER_TIMEOUT)
        admin.create_topics([NewTopic("kept", 1, 3)])["kept"].result(30)
        for round_ in range(3):
            group = f"kept-{round_}"
            alive = [n for n in nodes if n.proc and n.proc.poll() is None]

            def coordinator():
                for node in alive:
                    try:
                        conn = RawConn(node.bootstrap, timeout=5)
                    except OSError:
                        continue
                    try:
                        resp = conn.send(FindCoordinatorRequest[2](key=group, key_type=0), FindCoordinatorResponse)
                        if resp.error_code == 0 and by_id[resp.node_id] in alive:
                            return resp.node_id
                    except (OSError, ConnectionError):
                        pass
                    finally:
                        conn.close()
                return None

            def commit(conn, offset):
                partition = OffsetCommitRequest.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                    partition_index=0, committed_offset=offset, committed_leader_epoch=-1, committed_metadata=None)
                request = OffsetCommitRequest[8](
                    group_id=group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                    topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name="kept", partitions=[partition])])
                return conn.send(request, OffsetCommitResponse).topics[0].partitions[0].error_code

            wait_for("a coordinator", coordinator, timeout=FAILOVER_TIMEOUT)
            wait_for("the offsets topic's full ISR",
                     lambda: sorted(partition_state(admin, "__consumer_offsets")[2]) == [1, 2, 3], timeout=FAILOVER_TIMEOUT)
            leader = wait_for("a coordinator", coordinator, timeout=FAILOVER_TIMEOUT)
            conn = RawConn(by_id[leader].bootstrap)
            assert wait_for("a first commit", lambda: commit(conn, 1) == 0, timeout=FAILOVER_TIMEOUT)
            assert commit(conn, 1000 + round_) == 0
            by_id[leader].kill9()
            conn.close()
            alive = [n for n in nodes if n.proc and n.proc.poll() is None]

            def fetched():
                new = coordinator()
                if new is None:
                    return None
                conn = RawConn(by_id[new].bootstrap, timeout=10)
                try:
                    request = OffsetFetchRequest[7](
                        group_id=group,
                        topics=[OffsetFetchRequest.OffsetFetchRequestTopic(name="kept", partition_indexes=[0])],
                        require_stable=False)
                    resp = conn.send(request, OffsetFetchResponse)
                    # Loading (14) or not the coordinator yet (16): ask again.
                    return None if resp.error_code != 0 else (resp.topics[0].partitions[0].committed_offset,)
                except (OSError, ConnectionError):
                    return None
                finally:
                    conn.close()

            (offset,) = wait_for("the new coordinator answering", fetched, timeout=FAILOVER_TIMEOUT)
            assert offset == 1000 + round_, f"round {round_}: the acknowledged commit of {1000 + round_} read back as {offset}"
            by_id[leader].start()
            by_id[leader].wait_ready()
    finally:
        for node in nodes:
            node.close()


def test_a_follower_behind_the_leaders_log_start_starts_again_there():
    """A follower down while its leader's log start moved past the follower's end (DeleteRecords
    here, retention in production) gets OFFSET_OUT_OF_RANGE for anything it asks: as Kafka's
    fetcher, it empties its log to start at the leader's log start and rejoins the ISR."""
    nodes = start_cluster({"replica.lag.time.max.ms": "2000"})
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        wait_for("three unfenced brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=FAILOVER_TIMEOUT)
        topic = "started-again"
        admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "1"})])[topic].result(30)
        wait_for("a full ISR", lambda: partition_state(admin, topic)[2] == [1, 2, 3], timeout=FAILOVER_TIMEOUT)
        leader = partition_state(admin, topic)[0]
        follower = next(i for i in by_id if i != leader)
        producer = Producer({"bootstrap.servers": bootstrap(nodes), "acks": "all"})
        for i in range(10):
            producer.produce(topic, value=b"early-%d" % i, partition=0)
        assert producer.flush(30) == 0
        by_id[follower].kill9()
        alive = [n for n in nodes if n is not by_id[follower]]
        survivors = AdminClient({"bootstrap.servers": bootstrap(alive)})
        wait_for("the follower out of the ISR", lambda: follower not in partition_state(survivors, topic)[2], timeout=FAILOVER_TIMEOUT)
        producer = Producer({"bootstrap.servers": bootstrap(alive), "acks": "all"})
        for i in range(100):
            producer.produce(topic, value=b"late-%d" % i, partition=0)
        assert producer.flush(30) == 0
        deleted = survivors.delete_records([TopicPartition(topic, 0, 60)])
        assert next(iter(deleted.values())).result(30).low_watermark == 60
        by_id[follower].start()
        by_id[follower].wait_ready()
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        wait_for("the follower back in the ISR", lambda: partition_state(admin, topic)[2] == [1, 2, 3], timeout=FAILOVER_TIMEOUT)
        # It starts at the leader's log start, or at the first batch holding it (DeleteRecords
        # may cut inside a batch): never at what it had before (0).
        segments = sorted(f for f in os.listdir(os.path.join(by_id[follower].data_dir, f"{topic}-0")) if f.endswith(".log"))
        assert 10 <= int(segments[0][:-4]) <= 60, segments
        # What it holds from there is the leader's, byte for byte.
        wait_for("the follower's log equal to the leader's from offset 60",
                 lambda: log_bytes(by_id[follower], topic) == log_bytes(by_id[leader], topic)[-len(log_bytes(by_id[follower], topic)):]
                 and len(log_bytes(by_id[follower], topic)) > 0,
                 timeout=FAILOVER_TIMEOUT)
    finally:
        for node in nodes:
            node.close()


def test_fetch_answers_name_the_current_leader_and_its_endpoint():
    """KIP-951 (Fetch v16+): NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH carry the current
    leader and epoch, and the answer the leader's endpoint, as Kafka's handleFetchRequest."""
    from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    nodes = start_cluster()
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        wait_for("three unfenced brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=FAILOVER_TIMEOUT)
        topic = "hinted"
        admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]])])[topic].result(30)
        wait_for("a full ISR", lambda: partition_state(admin, topic)[2] == [1, 2, 3], timeout=FAILOVER_TIMEOUT)
        by_id[1].kill9()
        alive = nodes[1:]
        survivors = AdminClient({"bootstrap.servers": bootstrap(alive)})
        leader = wait_for("a new leader", lambda: (lambda p: p[0] if p[0] in (2, 3) else None)(partition_state(survivors, topic)), timeout=FAILOVER_TIMEOUT)
        follower = 5 - leader
        host, port = by_id[leader].bootstrap.rsplit(":", 1)

        def fetch(node_id, version, current_leader_epoch):
            conn = RawConn(by_id[node_id].bootstrap)
            try:
                M = MetadataRequest[12]
                topic_id = conn.send(M(topics=[M.MetadataRequestTopic(topic_id=None, name=topic)], allow_auto_topic_creation=False,
                                       include_topic_authorized_operations=False), MetadataResponse).topics[0].topic_id
                F = FetchRequest[version]
                request = F(max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0, session_epoch=-1,
                            topics=[F.FetchTopic(topic_id=topic_id, partitions=[F.FetchTopic.FetchPartition(
                                partition=0, current_leader_epoch=current_leader_epoch, fetch_offset=0, last_fetched_epoch=-1,
                                log_start_offset=-1, partition_max_bytes=1 << 20)])],
                            forgotten_topics_data=[], rack_id="", replica_state=F.ReplicaState(replica_id=-1, replica_epoch=-1))
                response = conn.send(request, FetchResponse)
                partition = response.responses[0].partitions[0]
                named = partition.current_leader
                return (partition.error_code, (named.leader_id, named.leader_epoch) if named else (-1, -1),
                        [(e.node_id, e.host, e.port) for e in response.node_endpoints or []])
            finally:
                conn.close()

        epoch = wait_for("the follower knowing the new leader", lambda: (lambda a: a[1][1] if a[0] == 6 and a[1][0] == leader else None)(fetch(follower, 16, -1)), timeout=FAILOVER_TIMEOUT)
        assert epoch >= 1
        assert fetch(follower, 16, -1) == (6, (leader, epoch), [(leader, host, int(port))])
        assert fetch(leader, 17, 0) == (74, (leader, epoch), [(leader, host, int(port))])
        # A follower checks the request's epoch before whether it leads (Kafka's
        # Partition.getLocalLog): behind is fenced, ahead unknown, only a match learns it does
        # not lead.
        assert fetch(follower, 16, 0) == (74, (leader, epoch), [(leader, host, int(port))])
        assert fetch(follower, 16, epoch + 5) == (75, (-1, -1), [])
        assert fetch(follower, 16, epoch) == (6, (leader, epoch), [(leader, host, int(port))])
        # Before v16 no current leader is named.
        assert fetch(follower, 13, -1) == (6, (-1, -1), [])

        # DescribeProducers is answered from the local log, by a follower too (Kafka's
        # ReplicaManager.activeProducerState).
        from kafka.protocol.admin import DescribeProducersRequest, DescribeProducersResponse
        producer = Producer({"bootstrap.servers": bootstrap(alive), "enable.idempotence": True})
        for i in range(3):
            producer.produce(topic, value=b"%d" % i, partition=0)
        assert producer.flush(30) == 0

        def producers(node_id):
            conn = RawConn(by_id[node_id].bootstrap)
            try:
                D = DescribeProducersRequest[0]
                answer = conn.send(D(topics=[D.TopicRequest(name=topic, partition_indexes=[0])]), DescribeProducersResponse)
                partition = answer.topics[0].partitions[0]
                return partition.error_code, [(p.producer_id, p.last_sequence) for p in partition.active_producers]
            finally:
                conn.close()

        led = producers(leader)
        assert led[0] == 0 and len(led[1]) == 1 and led[1][0][1] == 2, led
        wait_for("the follower's producer state", lambda: producers(follower) == led, timeout=FAILOVER_TIMEOUT)
    finally:
        for node in nodes:
            node.close()


def read_values(nodes, topic, count):
    """The values of partition 0 from its start, read by an assign-mode consumer until `count`
    arrived (or 30 s passed)."""
    consumer = Consumer({"bootstrap.servers": bootstrap(nodes), "group.id": f"read-{uuid.uuid4()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    values = []
    deadline = time.monotonic() + 30
    while len(values) < count and time.monotonic() < deadline:
        for msg in consumer.consume(100, timeout=0.5):
            if msg.error() is None:
                values.append(msg.value())
    consumer.close()
    return values


def test_a_topic_recreated_while_a_replica_was_away_replaces_its_stray_log():
    """A topic deleted and created again under the same name while one of its replicas was down:
    that replica's log on disk holds the old topic id. As Kafka's stray logs, it is moved aside
    (`-stray`, kept) and a new log fetched from the leader; the replica's log dir stays online and it rejoins the ISR.
    Replaying the metadata log at start-up passes through an image that still has the old topic:
    the node opens logs only once caught up, so that image never reaches the disk either."""
    nodes = start_cluster({"replica.lag.time.max.ms": "2000"})
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        wait_for("three unfenced brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=FAILOVER_TIMEOUT)
        topic = "recreated"

        def create_on_1_and_3():
            admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 3]])])[topic].result(30)

        create_on_1_and_3()
        # And one deleted for good while node 3 is away.
        gone = "gone-while-away"
        admin.create_topics([NewTopic(gone, num_partitions=1, replica_assignment=[[1, 3]])])[gone].result(30)
        wait_for("ISR [1, 3]", lambda: partition_state(admin, topic)[2] == [1, 3], timeout=FAILOVER_TIMEOUT)
        wait_for("the other topic's log on node 3",
                 lambda: os.path.isdir(os.path.join(by_id[3].data_dir, f"{gone}-0")), timeout=FAILOVER_TIMEOUT)
        producer = Producer({"bootstrap.servers": bootstrap(nodes), "acks": "all"})
        for i in range(5):
            producer.produce(topic, value=b"old-%d" % i, partition=0)
        assert producer.flush(30) == 0
        # Metadata log entries between the first topic and its deletion: a replay at start-up
        # applies them in several steps.
        for i in range(150):
            admin.create_topics([NewTopic(f"filler-{i}", 1, 1)])[f"filler-{i}"].result(30)
        by_id[3].kill9()
        alive = [by_id[1], by_id[2]]
        admin = AdminClient({"bootstrap.servers": bootstrap(alive)})

        def succeeds(action):
            # Node 3 may have led the quorum: NOT_CONTROLLER until another leads.
            try:
                action()
                return True
            except KafkaException:
                return False

        wait_for("the topic deleted", lambda: succeeds(lambda: admin.delete_topics([topic])[topic].result(30)), timeout=FAILOVER_TIMEOUT)
        wait_for("the other topic deleted", lambda: succeeds(lambda: admin.delete_topics([gone])[gone].result(30)), timeout=FAILOVER_TIMEOUT)
        wait_for("the topic gone", lambda: topic not in admin.list_topics(timeout=10).topics, timeout=FAILOVER_TIMEOUT)
        wait_for("the topic created again", lambda: succeeds(create_on_1_and_3), timeout=FAILOVER_TIMEOUT)
        producer = Producer({"bootstrap.servers": bootstrap(alive), "acks": "all"})
        for i in range(5):
            producer.produce(topic, value=b"new-%d" % i, partition=0)
        assert producer.flush(30) == 0
        by_id[3].start()
        by_id[3].wait_ready()
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        wait_for("node 3 back in the ISR", lambda: partition_state(admin, topic)[2] == [1, 3], timeout=FAILOVER_TIMEOUT)
        assert "marking the log dir offline" not in by_id[3].log()
        # The deleted topic's log is a stray too: moved aside and kept (by its log shard, which
        # may still be opening other logs).
        wait_for("the deleted topic's log renamed", lambda: not os.path.isdir(os.path.join(by_id[3].data_dir, f"{gone}-0")),
                 timeout=FAILOVER_TIMEOUT)
        assert "stray partition logs" in by_id[3].log()
        strays = sorted(d for d in os.listdir(by_id[3].data_dir) if d.endswith("-stray"))
        assert [d.split(".")[0] for d in strays] == [f"{gone}-0", f"{topic}-0"], strays
        # The metadata log, when it shares the log dir, is not one.
        assert not [d for d in os.listdir(by_id[3].data_dir) if d.startswith("__cluster_metadata") and d.endswith("-delete")]
        wait_for("node 3's log equal to the leader's",
                 lambda: log_bytes(by_id[3], topic) == log_bytes(by_id[1], topic), timeout=FAILOVER_TIMEOUT)
        # A restart after the deletion and the new topic were both committed: the replay's
        # image with the old topic must not reach the log either.
        by_id[1].kill9()
        by_id[1].start()
        by_id[1].wait_ready()
        wait_for("node 1 back in the ISR", lambda: partition_state(admin, topic)[2] == [1, 3], timeout=FAILOVER_TIMEOUT)
        assert "marking the log dir offline" not in by_id[1].log()
        assert read_values(nodes, topic, 5) == [b"new-%d" % i for i in range(5)]
        assert "moved aside as a stray log and kept" in by_id[3].log()
    finally:
        for node in nodes:
            node.close()


def quorum_leader(node):
    """The metadata quorum's leader id, as `gregor metadata-quorum describe --status` shows it."""
    out = subprocess.run([str(gregor_bin()), "metadata-quorum", "--bootstrap-server", node.bootstrap, "describe", "--status"],
                         capture_output=True, text=True, timeout=30).stdout
    found = re.search(r"^LeaderId:\s+(\d+)", out, re.M)
    return int(found.group(1)) if found else None


def test_a_forwarded_request_does_not_wait_for_a_frozen_controller():
    """A broker forwarding to an active controller that froze (SIGSTOP) answers NOT_CONTROLLER
    once another controller is elected and the frozen one stays silent for a 10 s grace, instead
    of waiting for it until its 60 s timeout; it does not send the request again itself (the
    frozen leader may have replicated it, and the new one may apply it), so the client's retry
    against the new controller gets the outcome: created, or TOPIC_ALREADY_EXISTS if the first
    try was applied after all."""
    from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

    nodes = start_cluster()
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    frozen = None
    try:
        wait_for("a quorum leader", lambda: quorum_leader(nodes[0]) is not None, timeout=FAILOVER_TIMEOUT)
        leader = quorum_leader(nodes[0])
        via = next(n for i, n in by_id.items() if i != leader)
        frozen = by_id[leader]
        frozen.proc.send_signal(signal.SIGSTOP)

        def create():
            conn = RawConn(via.bootstrap, timeout=50.0)
            try:
                answer = conn.send(CreateTopicsRequest[7](topics=[CreateTopicsRequest.CreatableTopic(
                    name="while-frozen", num_partitions=1, replication_factor=2, assignments=[], configs=[])],
                    timeout_ms=3000, validate_only=False), CreateTopicsResponse)
            finally:
                conn.close()
            return [(t.name, t.error_code) for t in answer.topics]

        # Answered while the old controller is still frozen.
        assert create() in ([("while-frozen", 41)], [("while-frozen", 0)])
        assert frozen.proc.poll() is None
        outcome = []
        wait_for("the retry's outcome", lambda: outcome.append(create()) or outcome[-1][0][1] in (0, 36), timeout=FAILOVER_TIMEOUT)
    finally:
        if frozen is not None:
            frozen.proc.send_signal(signal.SIGCONT)
        for node in nodes:
            node.close()


def test_a_broker_reconnects_to_a_restarted_controller_instead_of_failing():
    """A broker keeps its connection to the active controller for the next forwarded request.
    Once that controller was killed (-9) and restarted and leads again, the connection is dead:
    the broker must not write the request to it (Kafka's forwarding thread re-queues a request
    whose connection dropped) but connect again, so the client's CreateTopics succeeds at once
    instead of failing NOT_CONTROLLER. The quorum's leader is asked of the other nodes, since
    DescribeQuorum is forwarded too and would mend the broker's connection first."""
    from kafka.protocol.admin import CreateTopicsRequest, CreateTopicsResponse

    nodes = start_cluster()
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    via = 1
    others = [by_id[i] for i in by_id if i != via]
    # Controllers restarted since `via` last forwarded to them: its pooled connection to each is dead.
    restarted = set()
    names = (f"forwarded-{i}" for i in range(100))
    try:
        def create():
            name = next(names)
            conn = RawConn(by_id[via].bootstrap, timeout=50.0)
            try:
                answer = conn.send(CreateTopicsRequest[7](topics=[CreateTopicsRequest.CreatableTopic(
                    name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
                    timeout_ms=10000, validate_only=False), CreateTopicsResponse)
            finally:
                conn.close()
            return [t.error_code for t in answer.topics]

        def leader():
            found = {quorum_leader(node) for node in others}
            return found.pop() if len(found) == 1 else None

        def restart(node_id):
            by_id[node_id].kill9()
            by_id[node_id].start()
            by_id[node_id].wait_ready()
            return wait_for("a quorum leader", leader, timeout=FAILOVER_TIMEOUT)

        current = wait_for("a quorum leader", leader, timeout=FAILOVER_TIMEOUT)
        # A restarted leader may lead again at once, or lose the leadership to another voter.
        for _ in range(16):
            if current in restarted:
                assert create() == [0]
                return
            if current == via:
                current = restart(via)
                restarted.clear()
                continue
            # The request goes to the leader and its connection stays in `via`'s pool.
            wait_for("a forwarded create", lambda: create() == [0], timeout=FAILOVER_TIMEOUT)
            restarted.add(current)
            current = restart(current)
        raise AssertionError("the leadership never came back to a restarted controller")
    finally:
        for node in nodes:
            node.close()


def test_deleted_records_stay_deleted_after_a_leader_change():
    """Kafka's followers take their leader's log start offset from each fetch
    (`maybeIncrementLogStartOffset`), and DeleteRecords answers only once every live replica has
    (DelayedDeleteRecords): records it removed are not served again by the follower that leads
    next, even when the leader dies right after answering."""
    nodes = start_cluster()
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        topic = "deleted-stay-deleted"
        create_replicated_topic(admin, topic, 2)
        produce_acknowledged(nodes, topic, [b"r-%d" % i for i in range(10)])
        deleted = admin.delete_records([TopicPartition(topic, 0, 6)])
        leader = partition_state(admin, topic)[0]
        assert next(iter(deleted.values())).result(30).low_watermark == 6
        by_id[leader].kill9()
        alive = [n for n in nodes if n is not by_id[leader]]
        survivors = AdminClient({"bootstrap.servers": bootstrap(alive)})
        wait_for("a new leader", lambda: partition_state(survivors, topic)[0] not in (leader, -1), timeout=FAILOVER_TIMEOUT)
        consumer = Consumer({"bootstrap.servers": bootstrap(alive), "group.id": f"check-{uuid.uuid4()}",
                             "enable.auto.commit": False})
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        finally:
            consumer.close()
        assert (low, high) == (6, 10)
    finally:
        for node in nodes:
            node.close()


def test_delete_records_waits_for_a_live_follower_and_not_for_a_fenced_one():
    """Kafka's DelayedDeleteRecords waits for every replica on a live broker: with a follower
    frozen (SIGSTOP) but not yet fenced, DeleteRecords times out (REQUEST_TIMED_OUT, low
    watermark -1); once that broker is fenced it no longer counts, and the deletion answers."""
    from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    nodes = start_cluster()
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    frozen = None
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        topic = "delete-waits"
        create_replicated_topic(admin, topic, 1)
        produce_acknowledged(nodes, topic, [b"r-%d" % i for i in range(10)])
        leader = partition_state(admin, topic)[0]
        frozen = next(n for i, n in by_id.items() if i != leader)
        conn = RawConn(by_id[leader].bootstrap)
        R = DeleteRecordsRequest[1]

        def delete(offset):
            request = R(topics=[R.DeleteRecordsTopic(name=topic, partitions=[
                R.DeleteRecordsTopic.DeleteRecordsPartition(partition_index=0, offset=offset)])], timeout_ms=1000)
            ((_, (partition,)),) = [(t.name, t.partitions) for t in conn.send(request, DeleteRecordsResponse).topics]
            return partition.error_code, partition.low_watermark

        def live_brokers():
            # Asked of the leader itself: an admin client may keep asking the frozen broker.
            answer = conn.send(MetadataRequest[1](topics=[]), MetadataResponse[1])
            return len(answer.brokers)

        frozen.proc.send_signal(signal.SIGSTOP)
        # Well within broker.session.timeout.ms (3 s): the frozen broker is still live.
        assert delete(4) == (7, -1)
        wait_for("the frozen broker fenced", lambda: live_brokers() == 2, timeout=FAILOVER_TIMEOUT)
        assert delete(6) == (0, 6)
    finally:
        if frozen is not None:
            frozen.proc.send_signal(signal.SIGCONT)
        for node in nodes:
            node.close()


def test_follower_fetches_count_as_replication_bytes_not_bytes_out():
    """Kafka's `BrokerTopicStats.updateBytesOut` sends what followers fetch to
    ReplicationBytesOutPerSec, never to BytesOutPerSec (which counts what consumers read); a
    follower counts what it appends in ReplicationBytesInPerSec."""
    nodes = start_cluster()
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        topic = "replication-bytes"
        create_replicated_topic(admin, topic, 2)
        producer = produce_acknowledged(nodes, topic, [b"v" * 1000 for _ in range(200)])
        del producer
        leader_id = partition_state(admin, topic)[0]
        leader = by_id[leader_id]
        followers = [n for i, n in by_id.items() if i != leader_id]
        bytes_in = metric(leader, f'kafka_server_brokertopicmetrics_bytesin_total{{topic="{topic}"}}')
        assert bytes_in > 200_000
        # acks=all answered once both followers had fetched every batch; a later fetch of
        # theirs only reads what they lack.
        wait_for("both followers' appends", lambda: all(
            metric(f, "kafka_server_brokertopicmetrics_replicationbytesin_total") == bytes_in for f in followers))
        assert metric(leader, "kafka_server_brokertopicmetrics_replicationbytesout_total") == 2 * bytes_in
        assert metric(leader, "kafka_server_brokertopicmetrics_bytesout_total") == 0
        assert metric(leader, f'kafka_server_brokertopicmetrics_totalfetchrequests_total{{topic="{topic}"}}') > 0
        # The request metrics name a follower's Fetch FetchFollower as well as Fetch.
        assert 'kafka_network_requestmetrics_requests_total{request="FetchFollower"' in leader.metrics_text()
    finally:
        for node in nodes:
            node.close()


def test_acks_all_below_min_insync_replicas_is_refused_without_a_message():
    """An acks=all Produce to a partition whose ISR is smaller than min.insync.replicas gets
    NOT_ENOUGH_REPLICAS (19) with the log start offset and no error message: Kafka sends a
    message only for a record validation failure (`LogAppendResult.hasCustomErrorMessage`)."""
    nodes = start_cluster()
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        topic = "min-isr-three"
        create_replicated_topic(admin, topic, 3)
        leader_id = partition_state(admin, topic)[0]
        follower_id = next(i for i in by_id if i != leader_id)
        by_id[follower_id].close()
        wait_for("the stopped follower out of the ISR",
                 lambda: follower_id not in partition_state(admin, topic)[2], timeout=FAILOVER_TIMEOUT)
        conn = RawConn(by_id[leader_id].bootstrap)
        refused = produce(conn, topic, 0, batch([(b"k", b"v", [], 1)]), acks=-1)
        conn.close()
        assert (refused.error_code, refused.error_message, refused.log_start_offset, refused.base_offset) == (19, None, 0, -1)
    finally:
        for node in nodes:
            node.close()


REPLICA_GAUGES = ("leadercount", "underreplicatedpartitions", "underminisrpartitioncount", "atminisrpartitioncount")


def replica_gauges(node):
    """Kafka's ReplicaManager LeaderCount, UnderReplicatedPartitions, UnderMinIsrPartitionCount
    and AtMinIsrPartitionCount, from one scrape of the node."""
    values = {}
    for line in node.metrics_text().splitlines():
        name, _, value = line.partition(" ")
        if name.startswith("kafka_server_replicamanager_"):
            values[name[len("kafka_server_replicamanager_"):]] = float(value)
    return tuple(values.get(name) for name in REPLICA_GAUGES)


def log_end_offset(node, topic):
    """The `kafka_log_log_logendoffset` of partition 0 of `topic` on the node (None: absent)."""
    series = f'kafka_log_log_logendoffset{{topic="{topic}",partition="0"}} '
    for line in node.metrics_text().splitlines():
        if line.startswith(series):
            return float(line.split()[-1])
    return None


def test_min_isr_gauges_follow_a_stopped_and_a_paused_follower(tmp_path):
    """Kafka's ReplicaManager gauges on the leader of a partition of three replicas with
    min.insync.replicas=2: a stopped follower leaves the ISR at its minimum
    (AtMinIsrPartitionCount), the other follower no longer fetching takes it under
    (UnderMinIsrPartitionCount), a change of the topic's minimum alone moves them, and all are 0
    once both followers are back; the followers count nothing. A partition moved to another
    broker takes its log gauges along."""
    nodes, pause = start_hooked_cluster(tmp_path, PAUSE_FETCH_HOOK, {"replica.lag.time.max.ms": "1000"})
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        topic = "min-isr"
        create_replicated_topic(admin, topic, 2)
        leader, replicas, _ = partition_state(admin, topic)
        stopped, paused = [r for r in replicas if r != leader]

        def gauges(node_id, expected, what):
            wait_for(f"node {node_id}'s gauges {what}", lambda: replica_gauges(by_id[node_id]) == expected, timeout=FAILOVER_TIMEOUT)

        gauges(leader, (1, 0, 0, 0), "with a full ISR")
        for follower in (stopped, paused):
            gauges(follower, (0, 0, 0, 0), "as a follower")

        by_id[stopped].kill9()
        gauges(leader, (1, 1, 0, 1), "with 2 of 3 in sync: at the minimum")
        pause[paused].touch()
        # A follower at the leader's log end stays in sync: records it does not fetch.
        producer = Producer({"bootstrap.servers": bootstrap(nodes, [by_id[leader]]), "acks": 1})
        for value in (b"x", b"y"):
            producer.produce(topic, value=value, partition=0)
        assert producer.flush(30) == 0
        gauges(leader, (1, 1, 1, 0), "with the leader alone in sync: under the minimum")

        alive = [by_id[leader], by_id[paused]]
        survivors = AdminClient({"bootstrap.servers": bootstrap(nodes, alive)})

        def set_min_isr(value):
            resource = ConfigResource("topic", topic, set_config={"min.insync.replicas": value})
            for future in survivors.alter_configs([resource]).values():
                future.result(30)

        set_min_isr("1")
        gauges(leader, (1, 1, 0, 1), "with the minimum lowered to the ISR")
        set_min_isr("2")
        gauges(leader, (1, 1, 1, 0), "with the minimum back at 2")

        pause[paused].unlink()
        by_id[stopped].start()
        by_id[stopped].wait_ready()
        wait_for("a full ISR again", lambda: partition_state(admin, topic)[2] == [1, 2, 3], timeout=FAILOVER_TIMEOUT)
        gauges(leader, (1, 0, 0, 0), "with a full ISR again")

        moved = "moved"
        admin.create_topics([NewTopic(moved, num_partitions=1, replica_assignment=[[1]])])[moved].result(30)
        wait_for("broker 1 leading the partition", lambda: partition_state(admin, moved)[0] == 1, timeout=FAILOVER_TIMEOUT)
        produce_acknowledged(nodes, moved, [b"a", b"b", b"c"])
        wait_for("the log gauges on broker 1", lambda: log_end_offset(by_id[1], moved) == 3, timeout=FAILOVER_TIMEOUT)
        plan = tmp_path / "plan.json"
        plan.write_text('{"version":1,"partitions":[{"topic":"moved","partition":0,"replicas":[2]}]}')
        started = subprocess.run([str(gregor_bin()), "reassign-partitions", "--bootstrap-server", bootstrap(nodes),
                                  "--execute", "--reassignment-json-file", str(plan)], capture_output=True, text=True, timeout=60)
        assert started.returncode == 0, started.stdout + started.stderr
        wait_for("the log gauges on broker 2", lambda: log_end_offset(by_id[2], moved) == 3, timeout=FAILOVER_TIMEOUT)
        wait_for("the log gauges gone from broker 1", lambda: log_end_offset(by_id[1], moved) is None, timeout=FAILOVER_TIMEOUT)
    finally:
        for node in nodes:
            node.close()


def test_a_restarted_leader_withholds_the_latest_offset_until_its_high_watermark_catches_up(tmp_path):
    """Kafka's `Partition.fetchOffsetForTimestamp`: a leader whose high watermark is behind the
    log end it started leading from answers a consumer's ListOffsets LATEST, and a lookup by
    timestamp that finds nothing visible, OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE before v5),
    never its older high watermark. Here the leader takes acks=1 records its paused followers
    do not fetch, and is killed and restarted within its session: it leads again from its log
    end with the high watermark of its checkpoint. Once the followers fetch, the latest offset
    is the log end."""
    nodes, pause = start_hooked_cluster(tmp_path, PAUSE_FETCH_HOOK, {
        "broker.session.timeout.ms": "60000", "replica.lag.time.max.ms": "120000"})
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        topic = "restarted-leader"
        create_replicated_topic(admin, topic, 1)
        produce_acknowledged(nodes, topic, [b"committed-%d" % i for i in range(10)])
        leader = partition_state(admin, topic)[0]
        followers = [node_id for node_id in by_id if node_id != leader]
        for node_id in followers:
            pause[node_id].touch()
        producer = Producer({"bootstrap.servers": bootstrap(nodes), "acks": 1})
        for i in range(5):
            producer.produce(topic, value=b"leader-only-%d" % i, partition=0)
        assert producer.flush(30) == 0

        by_id[leader].kill9()
        by_id[leader].start()
        by_id[leader].wait_ready()
        assert partition_state(admin, topic)[0] == leader, "the leader came back within its session"
        conn = RawConn(by_id[leader].bootstrap)
        try:
            def latest(version):
                return list_offset(conn, topic, 0, -1, version=version)

            wait_for("the restarted node leading", lambda: latest(7).error_code != 6, timeout=FAILOVER_TIMEOUT)
            assert latest(7).error_code == 78, "OFFSET_NOT_AVAILABLE at v5+"
            assert latest(4).error_code == 5, "LEADER_NOT_AVAILABLE before v5"
            assert list_offset(conn, topic, 0, 1 << 60, version=7).error_code == 78, "nothing visible found by timestamp"
            earliest = list_offset(conn, topic, 0, -2, version=7)
            assert (earliest.error_code, earliest.offset) == (0, 0), "the earliest offset is known"
            for node_id in followers:
                pause[node_id].unlink()
            wait_for("the latest offset at the log end", lambda: (latest(7).error_code, latest(7).offset) == (0, 15),
                     timeout=FAILOVER_TIMEOUT)
        finally:
            conn.close()
    finally:
        for node in nodes:
            node.close()
