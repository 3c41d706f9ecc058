"""A node restarted on log dirs damaged while it was down keeps every acknowledged record it can
still reach, as Kafka's LogManager does: a malformed offset checkpoint costs a full recovery,
not the dir; a dir that cannot be opened stays offline and its partitions are not created again
empty in another dir; a partition found in two dirs stops the start; a log the metadata does
not place here is moved aside (`-stray`) and kept, never deleted."""

import os
import shutil

import pytest
from kafka.record.memory_records import MemoryRecords

from conftest import RawConn, wait_for
from test_data_plane import batch, create, fetch, list_offset, produce

KAFKA_STORAGE_ERROR = 56
RECORDS = 5


def two_dir_node(start_node, tmp_path):
    dirs = [tmp_path / "first", tmp_path / "second"]
    for d in dirs:
        d.mkdir()
    node = start_node({"log.dirs": ",".join(map(str, dirs)), "auto.create.topics.enable": "false"})
    return node, dirs


def fill(node, topic, partitions):
    """Writes RECORDS records to each partition, acks=-1, and returns the log ends."""
    conn = RawConn(node.bootstrap)
    for p in range(partitions):
        wait_for("the log", lambda: list_offset(conn, topic, p, -1).error_code == 0)
        for i in range(RECORDS):
            assert produce(conn, topic, p, batch([(b"k", b"%d-%d" % (p, i), [], 1000 + i)])).error_code == 0
    conn.close()


def dir_of(dirs, topic, partition):
    (found,) = [d for d in dirs if (d / f"{topic}-{partition}").is_dir()]
    return found


def gauge(node, name, labels=""):
    """The value of the series `name{labels}` in the node's scrape (None when absent)."""
    series = f"{name}{{{labels}}} " if labels else f"{name} "
    for line in node.metrics_text().splitlines():
        if line.startswith(series):
            return float(line.split()[-1])
    return None


def values(node, topic, partition):
    conn = RawConn(node.bootstrap)
    try:
        _, answer = fetch(conn, topic, partition, 0)
        assert answer.error_code == 0, answer
        records, out = MemoryRecords(answer.records), []
        while records.has_next():
            out.extend(r.value for r in records.next_batch())
        return out
    finally:
        conn.close()


def test_a_malformed_offset_checkpoint_costs_a_recovery_not_the_dir(start_node, tmp_path):
    node, dirs = two_dir_node(start_node, tmp_path)
    create(node, ("checkpointed", 4))
    fill(node, "checkpointed", 4)
    second = dirs[1]
    node.kill9()
    (second / "recovery-point-offset-checkpoint").write_text("0\n1\nnot a checkpoint line\n")
    (second / "log-start-offset-checkpoint").write_text("7\n")
    node.start()
    for p in range(4):
        wait_for("the partition served", lambda: values(node, "checkpointed", p) == [b"%d-%d" % (p, i) for i in range(RECORDS)])
    log = node.log()
    assert "resetting the recovery points to 0" in log
    assert "resetting the log start offsets" in log
    assert "log dir unusable" not in log


def test_partitions_of_an_unusable_dir_stay_offline_and_come_back_intact(start_node, tmp_path):
    node, dirs = two_dir_node(start_node, tmp_path)
    create(node, ("held", 4))
    fill(node, "held", 4)
    second = dirs[1]
    in_second = [p for p in range(4) if dir_of(dirs, "held", p) == second]
    assert in_second, "the partitions spread over both dirs"
    node.kill9()
    # Kafka takes a dir whose high watermarks cannot be read offline.
    checkpoint = second / "replication-offset-checkpoint"
    saved = checkpoint.read_bytes() if checkpoint.exists() else None
    checkpoint.write_text("0\n1\nheld x y\n")
    node.start()
    conn = RawConn(node.bootstrap)
    try:
        for p in range(4):
            expected = KAFKA_STORAGE_ERROR if p in in_second else 0
            wait_for("the partition's state", lambda: list_offset(conn, "held", p, -1).error_code == expected)
        # Nothing was created again empty in the other dir, and nothing is served at their offsets.
        for p in in_second:
            assert not (dirs[0] / f"held-{p}").exists()
            refused = produce(conn, "held", p, batch([(b"k", b"late", [], 2000)]))
            assert refused.error_code == KAFKA_STORAGE_ERROR, refused
        # Kafka's OfflineReplicaCount: the partitions of the unusable dir; their logs show no
        # gauges, the others' do.
        wait_for("the offline replicas in the metrics", lambda: gauge(node, "kafka_server_replicamanager_offlinereplicacount") == len(in_second))
        for p in range(4):
            end = gauge(node, "kafka_log_log_logendoffset", f'topic="held",partition="{p}"')
            assert end == (None if p in in_second else RECORDS), (p, end)
    finally:
        conn.close()
    assert "log dir unusable: it stays offline" in node.log()
    node.kill9()
    if saved is None:
        checkpoint.unlink()
    else:
        checkpoint.write_bytes(saved)
    node.start()
    for p in range(4):
        wait_for("every record back", lambda: values(node, "held", p) == [b"%d-%d" % (p, i) for i in range(RECORDS)])
    wait_for("no offline replica", lambda: gauge(node, "kafka_server_replicamanager_offlinereplicacount") == 0)


def test_a_partition_in_two_dirs_stops_the_start(start_node, tmp_path):
    node, dirs = two_dir_node(start_node, tmp_path)
    create(node, ("twice", 2))
    fill(node, "twice", 2)
    node.kill9()
    source = dir_of(dirs, "twice", 0)
    other = dirs[1] if source == dirs[0] else dirs[0]
    shutil.copytree(source / "twice-0", other / "twice-0")
    with pytest.raises(RuntimeError) as failed:
        node.start()
    assert "Duplicate log directories for twice-0 are found in both" in str(failed.value)


def test_a_stray_log_is_moved_aside_and_kept(start_node):
    node = start_node({"auto.create.topics.enable": "false"})
    create(node, ("kept", 1))
    fill(node, "kept", 1)
    node.kill9()
    data = node.data_dir
    # A partition the metadata does not have: a stray.
    shutil.copytree(os.path.join(data, "kept-0"), os.path.join(data, "kept-7"))
    node.start()
    wait_for("the stray moved aside", lambda: not os.path.isdir(os.path.join(data, "kept-7")))
    (stray,) = [d for d in os.listdir(data) if d.startswith("kept-7.") and d.endswith("-stray")]
    assert os.path.exists(os.path.join(data, stray, "00000000000000000000.log"))
    assert values(node, "kept", 0) == [b"0-%d" % i for i in range(RECORDS)]
    # Still there after the next start, which names it again.
    node.restart()
    assert os.path.isdir(os.path.join(data, stray))
    assert "a stray partition log moved aside earlier is still here" in node.log()


def test_a_failed_metadata_log_dir_stops_the_node(start_node):
    """Kafka halts a broker whose metadata log dir failed (`ReplicaManager.handleLogDirFailure`):
    a broker serving no partition while it stays registered would keep its leaderships."""
    node = start_node({"auto.create.topics.enable": "false"})
    create(node, ("epochs", 1))
    fill(node, "epochs", 1)
    node.kill9()
    with open(os.path.join(node.data_dir, "epochs-0", "leader-epoch-checkpoint"), "w") as f:
        f.write("0\n1\nnot an epoch\n")
    try:
        node.start()
    except RuntimeError:
        pass  # It may stop before it reports ready.
    wait_for("the node stopped", lambda: node.proc.poll() is not None, timeout=60)
    assert node.proc.returncode == 1
    assert "Shutdown broker because the metadata log dir" in node.log()
