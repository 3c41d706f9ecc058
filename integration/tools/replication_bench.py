"""Replication figures on three local combined nodes (BENCHMARKS.md, "Replication"):
produce throughput with acks=all to an RF 3 topic as a fraction of the same run's RF 1 figure,
and the time from a partition leader's kill -9 to the producer's first acknowledgement of a
record sent after the kill, split at the moment a surviving controller logged the fencing of
the killed broker (detection, then election and client recovery).

    .venv/bin/python integration/tools/replication_bench.py [seconds per throughput run] [kills]
"""

import datetime
import os
import re
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from conftest import wait_for  # noqa: E402
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


def failover(nodes, topic):
    by_id = {i + 1: n for i, n in enumerate(nodes)}
    admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
    leader = partition_state(admin, topic)[0]
    victim = by_id[leader]
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
    return total, detection


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10
    kills = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    nodes = start_cluster()
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap(nodes)})
        wait_for("three brokers", lambda: len(admin.list_topics(timeout=10).brokers) == 3, timeout=FAILOVER_TIMEOUT)
        for name, rf in (("rf1", 1), ("rf3", 3)):
            admin.create_topics([NewTopic(name, 1, rf, config={"min.insync.replicas": str(min(rf, 2))})])[name].result(30)
            wait_for(f"{name} led", lambda n=name: partition_state(admin, n)[0] >= 0, timeout=FAILOVER_TIMEOUT)
        rf1 = throughput(nodes, "rf1", seconds)
        rf3 = throughput(nodes, "rf3", seconds)
        print(f"acks=all records/s: RF1 {rf1:.0f}, RF3 {rf3:.0f} ({rf3 / rf1:.2f} of RF1)")
        times = [failover(nodes, "rf3") for _ in range(kills)]
        print("kill -9 of the leader to the first acknowledgement (of which until fenced): "
              + ", ".join(f"{t:.2f} s ({d:.2f} s)" for t, d in times))
    finally:
        for node in nodes:
            node.close()


if __name__ == "__main__":
    main()
