"""A full log dir: a node with one ordinary log dir and one on a 4 MiB tmpfs. Filling the small
one makes Produce answer KAFKA_STORAGE_ERROR for its partitions and marks the dir offline
(DescribeLogDirs), while the node stays up and keeps serving the partitions of the other dir;
with room again, a restart finds every acknowledged batch at its offset.

Mounting a tmpfs needs root; without it the test is skipped.
"""

import os
import subprocess
import tempfile

import pytest
from kafka import KafkaAdminClient

from conftest import RawConn, wait_for
from test_data_plane import batch, create, fetch, list_offset, produce

KAFKA_STORAGE_ERROR = 56


def gauge(node, name):
    """The value of an unlabelled gauge in the node's scrape (None when absent)."""
    for line in node.metrics_text().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return None


@pytest.fixture
def small_dir():
    mount_point = tempfile.mkdtemp(prefix="gregor-full-")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", mount_point],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        os.rmdir(mount_point)
        pytest.skip(f"cannot mount a tmpfs (needs root): {mounted.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", mount_point], check=False)
    os.rmdir(mount_point)


def test_a_full_log_dir_answers_kafka_storage_error_and_the_node_stays_up(start_node, small_dir):
    ordinary = tempfile.mkdtemp(prefix="gregor-ordinary-")
    # The metadata log lives in the first dir; new partition logs go to the dir with fewest logs.
    node = start_node({"log.dirs": f"{ordinary},{small_dir}", "auto.create.topics.enable": "false"})
    create(node, ("fd-ordinary", 1))
    conn = RawConn(node.bootstrap)
    wait_for("fd-ordinary", lambda: list_offset(conn, "fd-ordinary", 0, -1).error_code == 0)
    create(node, ("fd-full", 1))
    wait_for("fd-full", lambda: list_offset(conn, "fd-full", 0, -1).error_code == 0)
    wait_for("two hosted logs in the metrics", lambda: gauge(node, "kafka_server_replicamanager_partitioncount") == 2)
    assert gauge(node, "kafka_log_logmanager_offlinelogdirectorycount") == 0
    assert os.path.isdir(os.path.join(small_dir, "fd-full-0")), os.listdir(small_dir)
    assert os.path.isdir(os.path.join(ordinary, "fd-ordinary-0"))

    chunk = batch([(None, b"x" * 60_000, [], 1)])
    codes = []
    for _ in range(200):
        code = produce(conn, "fd-full", 0, chunk).error_code
        codes.append(code)
        if code != 0:
            break
    assert codes[-1] == KAFKA_STORAGE_ERROR, codes
    assert len(codes) > 10, "the tmpfs filled up far too early"
    acknowledged = len(codes) - 1

    # The partition stays refused; the node and the other dir keep working.
    assert produce(conn, "fd-full", 0, batch([(None, b"small", [], 2)])).error_code == KAFKA_STORAGE_ERROR
    _, partition = fetch(conn, "fd-full", 0, 0)
    assert partition.error_code == KAFKA_STORAGE_ERROR
    _, old_fetch = fetch(conn, "fd-full", 0, 0, version=5)
    assert old_fetch.error_code == 6  # Fetch v5 and older know no storage error
    assert produce(conn, "fd-ordinary", 0, batch([(b"k", b"still here", [], 3)])).error_code == 0
    _, partition = fetch(conn, "fd-ordinary", 0, 0)
    assert (partition.error_code, b"still here" in bytes(partition.records)) == (0, True)
    assert node.proc.poll() is None

    # Kafka's gauges: both logs still count as hosted (the failed one as offline, as Kafka counts
    # an offline partition), one replica and one log dir are offline.
    wait_for("the offline log dir in the metrics", lambda: gauge(node, "kafka_log_logmanager_offlinelogdirectorycount") == 1)
    assert gauge(node, "kafka_server_replicamanager_partitioncount") == 2
    wait_for("the offline replica in the metrics", lambda: gauge(node, "kafka_server_replicamanager_offlinereplicacount") == 1)

    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        (answer,) = admin.describe_log_dirs()
        by_path = {d["log_dir"]: d for d in answer["log_dirs"]}
        assert by_path[os.path.abspath(small_dir)]["error_code"] == KAFKA_STORAGE_ERROR
        assert by_path[os.path.abspath(ordinary)]["error_code"] == 0
    finally:
        admin.close()
    conn.close()

    # With room again (the tmpfs grown), a restart serves the partition once more: every
    # acknowledged batch is there at its offset, and the failed append left nothing behind.
    subprocess.run(["mount", "-o", "remount,size=16m", small_dir], check=True)
    node.restart()
    conn = RawConn(node.bootstrap)
    wait_for("fd-full after restart", lambda: list_offset(conn, "fd-full", 0, -1).error_code == 0, timeout=30)
    assert list_offset(conn, "fd-full", 0, -1).offset == acknowledged
    _, partition = fetch(conn, "fd-full", 0, acknowledged - 1)
    assert partition.error_code == 0 and b"x" * 100 in bytes(partition.records)
    assert produce(conn, "fd-full", 0, batch([(None, b"after", [], 4)])).base_offset == acknowledged
    conn.close()
