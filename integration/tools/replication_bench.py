"""Replication figures on three local combined nodes (BENCHMARKS.md, "Replication"):
produce throughput with acks=all to an RF 3 topic as a fraction of the same run's RF 1 figure,
the p50/p99 of each record's acks=all latency at a paced 1,000 records/s (produce call to
acknowledgement; at RF 3 it includes the followers' fetch of the batch, so RF 3 minus RF 1 is
the replication lag),
and the time from a partition leader's kill -9 to the producer's first acknowledgement of a
record sent after the kill, split at the moment a surviving controller logged the fencing of
the killed broker (detection, then election and client recovery).

    .venv/bin/python integration/tools/replication_bench.py [seconds per throughput run] [kills] \
        [broker.session.timeout.ms] [broker.heartbeat.interval.ms]

Each failover line says whether the killed node was also the active controller (then a new
controller is elected first).
"""

import datetime
import os
import re
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from conftest import gregor_bin, wait_for  # noqa: E402
from test_replication import FAILOVER_TIMEOUT, bootstrap, partition_state, start_cluster  # noqa: E402


def throughput(nodes, topic, seconds):
    producer = Producer({"bootstrap.servers": bootstrap(nodes), "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    acked = [0]

    def delivered(err, _msg):
        if err is None:
            acked[0] += 1

    value = b"x" * 100
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            producer.produce(topic, value=value, partition=0, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
        producer.poll(0)
    producer.flush(60)
    return acked[0] / seconds


def latency(nodes, topic, seconds, rate=1000):
    """p50 and p99 in ms of acks=all records sent at `rate` per second (one record per batch)."""
    producer = Producer({"bootstrap.servers": bootstrap(nodes), "acks": "all", "enable.idempotence": True, "linger.ms": 0})
    latencies = []

    def delivered(err, msg):
        if err is None:
            latencies.append(msg.latency())

    start = time.monotonic()
    for i in range(int(seconds * rate)):
        pause = start + i / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        producer.produce(topic, value=b"x" * 100, partition=0, on_delivery=delivered)
        producer.poll(0)
    producer.flush(60)
    latencies.sort()
    if not latencies:
        return float("nan"), float("nan")
    return tuple(latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000 for q in (0.5, 0.99))


def fenced_at(nodes, victim, broker_id, after):
    """Wall-clock time of the first `fenced a broker` log line for `broker_id` after `after`."""
    stamps = []
    for node in nodes:
        if node is victim:
            continue
        with open(node.log_path, errors="replace") as log:
            for line in log:
                if "fenced a broker not heard from" in line and f"broker_id={broker_id}" in line:
                    match = re.search(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+)Z", line)
                    if match:
                        at = datetime.datetime.fromisoformat(match.group(1)).replace(tzinfo=datetime.timezone.utc).timestamp()
                        if at > after:
                            stamps.append(at)
    return min(stamps, default=None)


def quorum_leader(nodes):
    out = subprocess.run([gregor_bin(), "metadata-quorum", "--bootstrap-server", bootstrap(nodes), "describe", "--status"],
                         capture_output=True, text=True, timeout=30).stdout
    match = re.search(r"LeaderId:\s*(\d+)", out)
    return int(match.group(1)) if match else None


def failover(nodes, topic):
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
    leader = partition_state(admin, topic)[0]
    victim = by_id[leader]
    led_quorum = quorum_leader(nodes) == leader
    producer = Producer({"bootstrap.servers": bootstrap(nodes), "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": 120000, "topic.metadata.refresh.interval.ms": 1000})
    producer.produce(topic, value=b"warm-up", partition=0)
    producer.flush(30)
    acked_at = []
    victim.kill9()
    killed = time.monotonic()
    killed_wall = time.time()
    stop = threading.Event()

    def produce():
        while not stop.is_set() and not acked_at:
            producer.produce(topic, value=b"after", partition=0,
                             on_delivery=lambda err, _m: acked_at.append(time.monotonic()) if err is None and not acked_at else None)
            producer.poll(0.01)
        producer.flush(60)

    writer = threading.Thread(target=produce)
    writer.start()
    wait_for("an acknowledgement after the kill", lambda: acked_at, timeout=FAILOVER_TIMEOUT)
    stop.set()
    writer.join(60)
    fenced = fenced_at(nodes, victim, leader, killed_wall)
    detection = fenced - killed_wall if fenced else float("nan")
    victim.start()
    victim.wait_ready()
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
    wait_for("a full ISR again", lambda: partition_state(admin, topic)[2] == [1, 2, 3], timeout=FAILOVER_TIMEOUT)
    total = acked_at[0] - killed
    return total, detection, led_quorum


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10
    kills = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    session = sys.argv[3] if len(sys.argv) > 3 else None
    heartbeat = sys.argv[4] if len(sys.argv) > 4 else None
    extra = {}
    if session:
        extra["broker.session.timeout.ms"] = session
    if heartbeat:
        extra["broker.heartbeat.interval.ms"] = heartbeat
    nodes = start_cluster(extra)
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        wait_for("three brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=FAILOVER_TIMEOUT)
        for name, rf in (("rf1", 1), ("rf3", 3)):
            admin.create_topics([NewTopic(name, 1, rf, config={"min.insync.replicas": str(min(rf, 2))})])[name].result(30)
            wait_for(f"{name} led", lambda n=name: partition_state(admin, n)[0] >= 0, timeout=FAILOVER_TIMEOUT)
        rf1 = throughput(nodes, "rf1", seconds)
        rf3 = throughput(nodes, "rf3", seconds)
        rf1_p50, rf1_p99 = latency(nodes, "rf1", seconds)
        rf3_p50, rf3_p99 = latency(nodes, "rf3", seconds)
        print(f"acks=all records/s: RF1 {rf1:.0f}, RF3 {rf3:.0f} ({rf3 / rf1:.2f} of RF1)")
        print(f"acks=all latency p50/p99 at 1,000 records/s: RF1 {rf1_p50:.1f}/{rf1_p99:.1f} ms, RF3 {rf3_p50:.1f}/{rf3_p99:.1f} ms")
        times = [failover(nodes, "rf3") for _ in range(kills)]
        print("kill -9 of the leader to the first acknowledgement (of which until fenced): "
              + ", ".join(f"{t:.2f} s ({d:.2f} s{', active controller' if c else ''})" for t, d, c in times))
    finally:
        for node in nodes:
            node.close()


if __name__ == "__main__":
    main()
