"""Leadership management across three real combined nodes: preferred leader election with
`gregor leader-election` (ElectLeaders) and by the controller's auto-rebalance after a leader
comes back, and unclean leader election only once `unclean.leader.election.enable` allows it.

Nothing sleeps to synchronise: every wait is `wait_for` on a condition with a deadline.
"""

import json
import os
import re
import subprocess

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from conftest import RawConn, gregor_bin, wait_for
from ports import reserve_port
from test_data_plane import batch, fetch, produce, topic_counts, topic_series
from test_replication import FAILOVER_TIMEOUT, PAUSE_FETCH_HOOK, bootstrap, partition_state, start_cluster, start_hooked_cluster


def leader_election(nodes, *args):
    return subprocess.run([str(gregor_bin()), "leader-election", "--bootstrap-server", bootstrap(nodes), *args],
                          capture_output=True, text=True, timeout=60)


def describe(nodes, topic):
    out = subprocess.run([str(gregor_bin()), "topics", "--bootstrap-server", bootstrap(nodes), "--describe", "--topic", topic],
                         capture_output=True, text=True, timeout=60, check=True)
    return out.stdout


def imbalance(node):
    """The node's `PreferredReplicaImbalanceCount` gauge."""
    for line in node.metrics_text().splitlines():
        if line.startswith("kafka_controller_kafkacontroller_preferredreplicaimbalancecount "):
            return float(line.split()[1])
    return None


def restart_first_replica_elsewhere(nodes, admin, topic):
    """Kills broker 1 (the first replica) until another replica leads, then restarts it and
    waits until it is back in the ISR; returns a fresh admin client."""
    nodes[0].kill9()
    survivors = AdminClient({"bootstrap.servers": bootstrap(nodes, nodes[1:])})
    wait_for("a leader other than broker 1", lambda: partition_state(survivors, topic)[0] in (2, 3), timeout=FAILOVER_TIMEOUT)
    nodes[0].start()
    nodes[0].wait_ready()
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
    wait_for("broker 1 back in the ISR", lambda: partition_state(admin, topic)[2] == [1, 2, 3], timeout=FAILOVER_TIMEOUT)
    return admin


def admin_of_three(nodes):
    """An admin client of the cluster, once its three brokers are unfenced."""
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
    wait_for("three unfenced brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=FAILOVER_TIMEOUT)
    return admin


def create_on_1_2_3(admin, topic):
    admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]])])[topic].result(30)
    wait_for("broker 1 leading with a full ISR", lambda: partition_state(admin, topic) == (1, [1, 2, 3], [1, 2, 3]), timeout=FAILOVER_TIMEOUT)


def test_leader_election_tool_brings_leadership_back_to_the_preferred_replica():
    nodes = start_cluster({"auto.leader.rebalance.enable": "false"})
    try:
        admin = admin_of_three(nodes)
        topic = "preferred"
        create_on_1_2_3(admin, topic)
        admin = restart_first_replica_elsewhere(nodes, admin, topic)
        moved_to = partition_state(admin, topic)[0]
        assert moved_to in (2, 3), "without auto rebalance leadership stays where it moved"
        wait_for("--describe showing the moved leader", lambda: f"Leader: {moved_to}\tReplicas: 1,2,3" in describe(nodes, topic), timeout=FAILOVER_TIMEOUT)

        wait_for("one imbalanced partition on every controller", lambda: all(imbalance(n) == 1 for n in nodes), timeout=FAILOVER_TIMEOUT)
        done = leader_election(nodes, "--election-type", "preferred", "--topic", topic, "--partition", "0")
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"Successfully completed leader election (PREFERRED) for partitions {topic}-0\n"
        wait_for("broker 1 leading again", lambda: partition_state(admin, topic)[0] == 1, timeout=FAILOVER_TIMEOUT)
        # Every broker's image follows; the one `--describe` asks may be a moment behind.
        wait_for("--describe showing broker 1 leading", lambda: "Leader: 1\tReplicas: 1,2,3\tIsr: " in describe(nodes, topic), timeout=FAILOVER_TIMEOUT)

        wait_for("no imbalance left", lambda: all(imbalance(n) == 0 for n in nodes), timeout=FAILOVER_TIMEOUT)
        again = leader_election(nodes, "--election-type", "PREFERRED", "--topic", topic, "--partition", "0")
        assert again.returncode == 0, again.stderr
        assert again.stdout == f"Valid replica already elected for partitions {topic}-0\n"
        # Every partition: those already led by their first replica are left out of the answer.
        everything = leader_election(nodes, "--election-type", "preferred", "--all-topic-partitions")
        assert (everything.returncode, everything.stdout) == (0, ""), everything.stderr

        missing = leader_election(nodes, "--election-type", "preferred", "--topic", topic, "--partition", "7")
        assert missing.returncode == 1
        assert missing.stdout == (f"Error completing leader election (PREFERRED) for partition: {topic}-7: "
                                  f"org.apache.kafka.common.errors.UnknownTopicOrPartitionException: No such partition as {topic}-7\n")
        assert "1 replica(s) could not be elected" in missing.stderr
    finally:
        for node in nodes:
            node.close()


def test_auto_rebalance_moves_leadership_back_to_the_preferred_replica():
    nodes = start_cluster({"auto.leader.rebalance.enable": "true", "leader.imbalance.check.interval.seconds": "1"})
    try:
        admin = admin_of_three(nodes)
        topic = "rebalanced"
        create_on_1_2_3(admin, topic)
        admin = restart_first_replica_elsewhere(nodes, admin, topic)
        wait_for("the controller moving leadership back to broker 1", lambda: partition_state(admin, topic)[0] == 1, timeout=FAILOVER_TIMEOUT)
    finally:
        for node in nodes:
            node.close()


def test_unclean_election_only_when_enabled(tmp_path):
    """Broker 3's follower is paused until it leaves the ISR, then the leader (broker 2) is
    killed: two partitions have no leader and no in-sync replica left. An explicit UNCLEAN
    ElectLeaders elects broker 3 for one of them; the other stays leaderless while unclean
    election is disabled (a preferred election finds no leader either) until the topic enables
    it; then broker 3 leads with an ISR of itself, takes writes, and broker 2 rejoins after its
    restart."""
    nodes, pause = start_hooked_cluster(tmp_path, PAUSE_FETCH_HOOK,
                                        {"replica.lag.time.max.ms": "1000", "unclean.leader.election.interval.ms": "300"})
    try:
        admin = admin_of_three(nodes)
        topic, forced = "unclean", "forced"
        for name in (topic, forced):
            admin.create_topics([NewTopic(name, num_partitions=1, replica_assignment=[[2, 3]])])[name].result(30)
            wait_for("broker 2 leading with a full ISR", lambda: partition_state(admin, name) == (2, [2, 3], [2, 3]), timeout=FAILOVER_TIMEOUT)

        pause[3].touch()
        producer = Producer({"bootstrap.servers": bootstrap(nodes), "acks": 1, "enable.idempotence": False})
        for name in (topic, forced):
            producer.produce(name, value=b"only-on-2", partition=0)
        producer.flush(30)
        for name in (topic, forced):
            wait_for("broker 3 out of the ISR", lambda: partition_state(admin, name)[2] == [2], timeout=FAILOVER_TIMEOUT)
        pause[3].unlink()

        nodes[1].kill9()
        survivors = [nodes[0], nodes[2]]
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes, survivors)})
        for name in (topic, forced):
            wait_for("no leader", lambda: partition_state(admin, name) == (-1, [2, 3], [2]), timeout=FAILOVER_TIMEOUT)
        # An explicit UNCLEAN election elects broker 3 whatever the config says.
        unclean = leader_election(survivors, "--election-type", "unclean", "--topic", forced, "--partition", "0")
        assert (unclean.returncode, unclean.stdout) == (0, f"Successfully completed leader election (UNCLEAN) for partitions {forced}-0\n"), unclean.stderr
        wait_for("broker 3 leading the forced partition", lambda: partition_state(admin, forced) == (3, [2, 3], [3]), timeout=FAILOVER_TIMEOUT)
        preferred = leader_election(survivors, "--election-type", "preferred", "--topic", topic, "--partition", "0")
        assert preferred.returncode == 1
        assert "PreferredLeaderNotAvailableException" in preferred.stdout
        assert partition_state(admin, topic)[0] == -1, "unclean election is disabled"

        resource = ConfigResource("topic", topic, set_config={"unclean.leader.election.enable": "true"})
        for future in admin.alter_configs([resource]).values():
            future.result(30)
        wait_for("broker 3 elected uncleanly", lambda: partition_state(admin, topic) == (3, [2, 3], [3]), timeout=FAILOVER_TIMEOUT)
        acked = []
        producer = Producer({"bootstrap.servers": bootstrap(nodes, survivors), "acks": "all"})
        producer.produce(topic, value=b"after-unclean", partition=0, on_delivery=lambda err, msg: acked.append(err))
        producer.flush(30)
        assert acked == [None]

        nodes[1].start()
        nodes[1].wait_ready()
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        wait_for("broker 2 back in the ISR", lambda: partition_state(admin, topic)[2] == [2, 3], timeout=FAILOVER_TIMEOUT)
    finally:
        for node in nodes:
            node.close()


def start_cluster_and_broker(extra=None, broker_env=None):
    """Three combined broker+controller nodes (1-3) and a broker-only node 4 that joins them."""
    from test_replication import HEARTBEAT_INTERVAL_MS, SESSION_TIMEOUT_MS, ClusterNode, random_uuid
    cluster_id = random_uuid()
    specs = [(i, reserve_port(), random_uuid()) for i in (1, 2, 3)]
    initial = ",".join(f"{i}@127.0.0.1:{port}:{d}" for i, port, d in specs)
    voters = ",".join(f"127.0.0.1:{port}" for _, port, _ in specs)
    common = {
        "controller.quorum.bootstrap.servers": voters,
        "broker.session.timeout.ms": SESSION_TIMEOUT_MS,
        "broker.heartbeat.interval.ms": HEARTBEAT_INTERVAL_MS,
        "replica.lag.time.max.ms": "10000",
        **(extra or {}),
    }
    nodes = []
    for node_id, port, _ in specs:
        overrides = {"node.id": str(node_id), "process.roles": "broker,controller",
                     "listeners": f"PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}", **common}
        nodes.append(ClusterNode(overrides, ["--cluster-id", cluster_id, "--initial-controllers", initial]))
    for node in nodes:
        node.wait_ready()
    broker = ClusterNode({"node.id": "4", "process.roles": "broker", "listeners": "PLAINTEXT://127.0.0.1:0",
                          "controller.listener.names": "CONTROLLER", **common}, ["--cluster-id", cluster_id], broker_env)
    broker.wait_ready()
    return nodes + [broker]


def reassign(nodes, *args):
    return subprocess.run([str(gregor_bin()), "reassign-partitions", "--bootstrap-server", bootstrap(nodes), *args],
                          capture_output=True, text=True, timeout=60)


def test_reassignment_under_load_loses_nothing(tmp_path):
    """{1,2,3} → {2,3,4} with `gregor reassign-partitions --execute` while an idempotent
    acks=all producer writes: broker 4 catches up and joins, broker 1 leaves and deletes its
    log, leadership moves off broker 1, `--verify` reports completion, and every acknowledged
    record is there exactly once, in order."""
    import os
    import threading
    from test_replication import check_log
    pause = tmp_path / "pause-4"
    nodes = start_cluster_and_broker({"log.segment.delete.delay.ms": "0"}, {"GREGOR_TEST_ONLY_PAUSE_REPLICA_FETCH_FILE": str(pause)})
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        wait_for("four unfenced brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 4, timeout=FAILOVER_TIMEOUT)
        topic = "moving"
        admin.create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]],
                                      config={"min.insync.replicas": "2"})])[topic].result(30)
        wait_for("broker 1 leading with a full ISR", lambda: partition_state(admin, topic) == (1, [1, 2, 3], [1, 2, 3]), timeout=FAILOVER_TIMEOUT)
        assert reassign(nodes, "--list").stdout == "No partition reassignments found.\n"
        to_move = tmp_path / "topics.json"
        to_move.write_text('{"version":1,"topics":[{"topic":"moving"}]}')
        generated = reassign(nodes, "--generate", "--topics-to-move-json-file", str(to_move), "--broker-list", "2,3,4")
        assert generated.returncode == 0, generated.stderr
        lines = generated.stdout.split("\n")
        assert lines[0] == "Current partition replica assignment"
        assert lines[1] == '{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}'
        assert (lines[2], lines[3]) == ("", "Proposed partition reassignment configuration")
        proposal = json.loads(lines[4])["partitions"]
        assert len(proposal) == 1 and sorted(proposal[0]["replicas"]) == [2, 3, 4], proposal

        acked, errors, stop = [], [], threading.Event()
        producer = Producer({"bootstrap.servers": bootstrap(nodes), "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "message.timeout.ms": 120000, "topic.metadata.refresh.interval.ms": 1000})

        def delivered(err, msg):
            (errors.append(err) if err is not None else acked.append((msg.offset(), msg.value())))

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
            wait_for("acknowledged writes", lambda: len(acked) >= 200, timeout=FAILOVER_TIMEOUT)
            plan = tmp_path / "plan.json"
            plan.write_text('{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":[2,3,4]}]}')
            started = reassign(nodes, "--execute", "--reassignment-json-file", str(plan))
            assert started.returncode == 0, started.stdout + started.stderr
            assert started.stdout == (
                "Current partition replica assignment\n\n"
                '{"version":1,"partitions":[{"topic":"moving","partition":0,"replicas":[1,2,3],"log_dirs":["any","any","any"]}]}\n\n'
                "Save this to use as the --reassignment-json-file option during rollback\n"
                "Successfully started partition reassignment for moving-0\n")
            wait_for("--verify reporting completion",
                     lambda: "Reassignment of partition moving-0 is completed." in reassign(nodes, "--verify", "--reassignment-json-file", str(plan)).stdout,
                     timeout=FAILOVER_TIMEOUT)
            wait_for("replicas and ISR {2,3,4} with a new leader",
                     lambda: (lambda st: st[1:] == ([2, 3, 4], [2, 3, 4]) and st[0] in (2, 3, 4))(partition_state(admin, topic)),
                     timeout=FAILOVER_TIMEOUT)
            wait_for("--describe showing the new replicas", lambda: "Replicas: 2,3,4\t" in describe(nodes, topic), timeout=FAILOVER_TIMEOUT)
            after = len(acked)
            wait_for("writes acknowledged after the move", lambda: len(acked) >= after + 200, timeout=FAILOVER_TIMEOUT)
        finally:
            stop.set()
            writer.join(180)
        assert not errors, f"non-retriable errors reached the producer: {errors[:5]}"
        check_log(nodes, topic, acked)
        # The replicas checkpoint their high watermark (replication-offset-checkpoint): every
        # acknowledged record is below it on 2, 3 and 4.
        last = max(offset for offset, _ in acked if offset is not None)

        def checkpointed(node):
            try:
                with open(os.path.join(node.data_dir, "replication-offset-checkpoint")) as f:
                    lines = f.read().splitlines()
            except OSError:
                return None
            return next((int(line.split()[2]) for line in lines[2:] if line.startswith(f"{topic} 0 ")), None)

        wait_for("high watermarks checkpointed past every acknowledged record",
                 lambda: all((checkpointed(n) or 0) > last for n in nodes[1:]), timeout=FAILOVER_TIMEOUT)
        wait_for("broker 1's replica deleted", lambda: not os.path.exists(os.path.join(nodes[0].data_dir, f"{topic}-0")), timeout=FAILOVER_TIMEOUT)
        assert reassign(nodes, "--list").stdout == "No partition reassignments found.\n"
        cancelled = reassign(nodes, "--cancel", "--reassignment-json-file", str(plan))
        assert cancelled.stdout == "None of the specified partition reassignments are active.\nNone of the specified partition moves are active."

        # A move to a broker that does not fetch stays in progress: listed, described, verified
        # as running, then cancelled back to the old replicas.
        pause.touch()
        stuck = "stuck"
        admin.create_topics([NewTopic(stuck, num_partitions=1, replica_assignment=[[1, 2, 3]])])[stuck].result(30)
        wait_for("a full ISR", lambda: partition_state(admin, stuck)[2] == [1, 2, 3], timeout=FAILOVER_TIMEOUT)
        plan = tmp_path / "stuck.json"
        plan.write_text('{"version":1,"partitions":[{"topic":"stuck","partition":0,"replicas":[1,2,4]}]}')
        assert reassign(nodes, "--execute", "--reassignment-json-file", str(plan)).returncode == 0
        assert reassign(nodes, "--list").stdout == "Current partition reassignments:\nstuck-0: replicas: 1,2,4,3. adding: 4. removing: 3.\n"
        wait_for("--describe showing the move", lambda: "Replicas: 1,2,4,3\tIsr: 1,2,3\tAdding Replicas: 4\tRemoving Replicas: 3\t" in describe(nodes, stuck), timeout=FAILOVER_TIMEOUT)
        # Kafka's getReplicationFactor: the replicas being added do not count.
        assert "\tReplicationFactor: 3\t" in describe(nodes, stuck)
        assert "Reassignment of partition stuck-0 is still in progress." in reassign(nodes, "--verify", "--reassignment-json-file", str(plan)).stdout
        again = reassign(nodes, "--execute", "--reassignment-json-file", str(plan))
        assert again.returncode == 1 and "Cannot execute because there is an existing partition assignment." in again.stderr
        cancelled = reassign(nodes, "--cancel", "--reassignment-json-file", str(plan))
        assert cancelled.stdout == "Successfully cancelled partition reassignment for: stuck-0\nNone of the specified partition moves are active."
        wait_for("the old replicas back", lambda: partition_state(admin, stuck)[1:] == ([1, 2, 3], [1, 2, 3]), timeout=FAILOVER_TIMEOUT)
        assert reassign(nodes, "--list").stdout == "No partition reassignments found.\n"
    finally:
        for node in nodes:
            node.close()


def test_a_move_lists_kafkas_order_and_a_cancel_restores_the_current_order(tmp_path):
    """Kafka's `PartitionReassignmentReplicas`: adding and removing are listed in ascending
    order and the replicas during a move are the target followed by the removing ones; a
    cancel goes back to those replicas without the adding ones, in that order
    (`PartitionReassignmentRevert`), so the preferred replica may change. Broker 3 does not
    fetch, so the moves onto it stay in progress."""
    nodes, pause = start_hooked_cluster(tmp_path, PAUSE_FETCH_HOOK)
    try:
        admin = admin_of_three(nodes)
        admin.create_topics([NewTopic("x1", num_partitions=1, replica_assignment=[[1]]),
                             NewTopic("x2", num_partitions=1, replica_assignment=[[2, 1]])])["x2"].result(30)
        wait_for("x2 led by 2 with a full ISR", lambda: partition_state(admin, "x2") == (2, [1, 2], [1, 2]), timeout=FAILOVER_TIMEOUT)
        pause[3].touch()
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": "x1", "partition": 0, "replicas": [1, 3, 2]},
            {"topic": "x2", "partition": 0, "replicas": [3]}]}))
        started = reassign(nodes, "--execute", "--reassignment-json-file", str(plan))
        assert started.returncode == 0, started.stdout + started.stderr
        assert reassign(nodes, "--list").stdout == (
            "Current partition reassignments:\n"
            "x1-0: replicas: 1,3,2. adding: 2,3.\n"
            "x2-0: replicas: 3,1,2. adding: 3. removing: 1,2.\n")
        wait_for("--describe showing x2's move",
                 lambda: "Replicas: 3,1,2\tIsr: 2,1\tAdding Replicas: 3\tRemoving Replicas: 1,2\t" in describe(nodes, "x2"),
                 timeout=FAILOVER_TIMEOUT)
        # The leader being removed leads until the move completes.
        assert partition_state(admin, "x2")[0] == 2

        cancel = tmp_path / "cancel.json"
        cancel.write_text(json.dumps({"version": 1, "partitions": [{"topic": "x2", "partition": 0, "replicas": [3]}]}))
        cancelled = reassign(nodes, "--cancel", "--reassignment-json-file", str(cancel))
        assert cancelled.stdout == "Successfully cancelled partition reassignment for: x2-0\nNone of the specified partition moves are active."
        # Back to [3,1,2] without 3: broker 1 is now the preferred replica; 2 still leads.
        wait_for("x2 reverted to replicas 1,2", lambda: describe_replicas(nodes, "x2") == "1,2", timeout=FAILOVER_TIMEOUT)
        assert partition_state(admin, "x2") == (2, [1, 2], [1, 2])
        assert reassign(nodes, "--list").stdout == "Current partition reassignments:\nx1-0: replicas: 1,3,2. adding: 2,3.\n"
    finally:
        for node in nodes:
            node.close()


def test_a_broker_that_stops_leading_a_topic_drops_its_leader_series(tmp_path):
    """Kafka's `ReplicaManager.updateLeaderAndFollowerMetrics`: once broker 1 follows the
    topic's only partition (reordered to {2,1,3}, then a preferred election) and leads none of
    it, `BrokerTopicStats.removeOldLeaderMetrics` closes the topic's produce meters there, while
    its fetch meters stay. A produce then sent to broker 1 is a request (counted before the
    leader check) refused NOT_LEADER_OR_FOLLOWER, not a failure: its request series alone comes
    back, from 0."""
    nodes = start_cluster({"auto.leader.rebalance.enable": "false"})
    try:
        admin = admin_of_three(nodes)
        topic = "leader-series"
        create_on_1_2_3(admin, topic)
        conn = RawConn(nodes[0].bootstrap)
        records = batch([(b"k", b"v", [], 1)])
        assert produce(conn, topic, 0, records).error_code == 0
        assert fetch(conn, topic, 0, 0)[1].error_code == 0
        led = topic_counts(nodes[0].metrics_text(), topic)
        assert (led["messagesin"], led["bytesin"], led["totalproducerequests"], led["bytesout"]) == (1, len(records), 1, len(records))
        totals = topic_counts(nodes[0].metrics_text())

        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [2, 1, 3]}]}))
        started = reassign(nodes, "--execute", "--reassignment-json-file", str(plan))
        assert started.returncode == 0, started.stdout + started.stderr
        wait_for("broker 2 first", lambda: describe_replicas(nodes, topic) == "2,1,3", timeout=FAILOVER_TIMEOUT)
        elected = leader_election(nodes, "--election-type", "preferred", "--topic", topic, "--partition", "0")
        assert elected.returncode == 0, elected.stderr
        wait_for("broker 2 leading", lambda: partition_state(admin, topic)[0] == 2, timeout=FAILOVER_TIMEOUT)

        produce_families = {f"kafka_server_brokertopicmetrics_{name}_total" for name in (
            "messagesin", "bytesin", "bytesrejected", "totalproducerequests", "failedproducerequests")}
        followed = wait_for("broker 1 dropping the topic's produce series",
                            lambda: (lambda s: s if produce_families.isdisjoint(s) else None)(topic_series(nodes[0].metrics_text(), topic)),
                            timeout=FAILOVER_TIMEOUT)
        # The fetch series stay (the followers' fetches while broker 1 led are requests too).
        assert followed["kafka_server_brokertopicmetrics_bytesout_total"] == len(records)
        assert followed["kafka_server_brokertopicmetrics_totalfetchrequests_total"] >= 1
        assert "kafka_server_brokertopicmetrics_failedfetchrequests_total" in followed
        # The totals keep what the topic counted.
        after = topic_counts(nodes[0].metrics_text())
        assert (after["messagesin"], after["totalproducerequests"]) == (totals["messagesin"], totals["totalproducerequests"])

        assert produce(conn, topic, 0, records).error_code == 6  # NOT_LEADER_OR_FOLLOWER
        series = topic_series(nodes[0].metrics_text(), topic)
        assert {name: value for name, value in series.items() if name in produce_families} == {
            "kafka_server_brokertopicmetrics_totalproducerequests_total": 1}
        # Still missing from the metadata: partition 77 counts nowhere.
        assert produce(conn, topic, 77, records).error_code == 3
        assert topic_series(nodes[0].metrics_text(), topic) == series
        conn.close()
    finally:
        for node in nodes:
            node.close()


def describe_replicas(nodes, topic):
    """The replicas of partition 0 as `gregor topics --describe` lists them."""
    found = re.search(r"\tReplicas: ([0-9,]+)\t", describe(nodes, topic))
    return found.group(1) if found else None


def test_a_broker_back_on_a_replaced_disk_waits_for_its_old_registration():
    # A broker killed and restarted at once on an empty, re-formatted log dir comes back as a
    # new incarnation with other log dirs while its old session is still live. Kafka's
    # controller answers DUPLICATE_BROKER_REGISTRATION and the broker retries until that session
    # expires; it does not exit.
    import shutil

    nodes = start_cluster_and_broker()
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes[:3])})
        admin.create_topics([NewTopic("replaced", num_partitions=1, replica_assignment=[[4, 1, 2]])])["replaced"].result(30)
        producer = Producer({"bootstrap.servers": bootstrap(nodes[:3]), "acks": "all"})
        for i in range(100):
            producer.produce("replaced", value=f"v{i}".encode(), partition=0)
        assert producer.flush(30) == 0
        broker = nodes[3]
        broker.kill9()
        shutil.rmtree(broker.data_dir)
        os.makedirs(broker.data_dir)
        broker.formatted = False
        broker.start()
        # Ready once its old session has expired: registered again, among the live brokers.
        broker.wait_ready()
        wait_for("broker 4 registered again", lambda: 4 in admin.list_topics(timeout=10).brokers, timeout=FAILOVER_TIMEOUT)
    finally:
        for node in nodes:
            node.close()
