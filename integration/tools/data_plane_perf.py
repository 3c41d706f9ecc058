"""Producer and consumer throughput of a Gregor node beside this machine's floors, measured in
one run (BENCHMARKS.md, "Data plane throughput").

Floors: one loopback TCP stream (Python sender and receiver, so a lower bound) and sequential
1 MiB writes to the log dir's file system ended by fdatasync. Load: confluent-kafka (librdkafka
2.16), as kafka-producer-perf-test / kafka-consumer-perf-test would drive it: acks=1, 1 KiB
records, 4 partitions, then the same with enable.idempotence=true, then one consumer reading
everything from the page cache; last, end-to-end latency at 10 MB/s (1 KiB records paced at
10,000/s, linger.ms=0, the send time in the record; Python sender and receiver in one process).

Usage: data_plane_perf.py GREGOR_BINARY [--records N] [--json]
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

RECORD = 1024
PARTITIONS = 4


def loopback_floor(total=2 << 30):
    """MB/s of one loopback TCP stream."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    received = []

    def sink():
        conn, _ = server.accept()
        got = 0
        while True:
            chunk = conn.recv(1 << 20)
            if not chunk:
                break
            got += len(chunk)
        received.append(got)
        conn.close()

    reader = threading.Thread(target=sink)
    reader.start()
    client = socket.create_connection(("127.0.0.1", port))
    block = b"x" * (1 << 20)
    started = time.perf_counter()
    sent = 0
    while sent < total:
        client.sendall(block)
        sent += len(block)
    client.close()
    reader.join()
    elapsed = time.perf_counter() - started
    server.close()
    return received[0] / elapsed / 1e6


def disk_floor(directory, total=512 << 20):
    """MB/s of sequential 1 MiB writes ended by fdatasync."""
    path = os.path.join(directory, "floor.bin")
    block = os.urandom(1 << 20)
    started = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(total >> 20):
            f.write(block)
        f.flush()
        os.fdatasync(f.fileno())
    elapsed = time.perf_counter() - started
    os.remove(path)
    return total / elapsed / 1e6


def start_node(binary, data):
    args = [binary, "node", "--override", f"log.dirs={data}",
            "--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "--override", "metrics.listener=127.0.0.1:0"]
    log = open(os.path.join(data, "..", "node.log"), "wb")
    proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, NO_COLOR="1"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(os.path.join(data, "..", "node.log"), "rb") as f:
            text = f.read().decode(errors="replace")
        found = re.search(r"node ready .*listeners=\S*PLAINTEXT://([0-9.:]+)", text)
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            raise RuntimeError(text)
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the node did not become ready")


def produce(bootstrap, topic, records, idempotent):
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all" if idempotent else "1", "linger.ms": 5,
                         "batch.size": 1 << 20, "enable.idempotence": idempotent,
                         "queue.buffering.max.messages": 1_000_000, "compression.type": "none"})
    payload = os.urandom(RECORD)
    failures = []

    def delivered(err, _msg):
        if err is not None:
            failures.append(err)

    started = time.perf_counter()
    for i in range(records):
        while True:
            try:
                producer.produce(topic, payload, partition=i % PARTITIONS, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} records failed: {failures[0]}")
    return records / elapsed, records * RECORD / elapsed / 1e6


def consume(bootstrap, topic, records):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "perf", "enable.auto.commit": False,
                         "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 10_485_760})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    got = 0
    started = time.perf_counter()
    deadline = time.monotonic() + 300
    while got < records and time.monotonic() < deadline:
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            if message.error() is None:
                got += 1
    elapsed = time.perf_counter() - started
    consumer.close()
    return got / elapsed, got * RECORD / elapsed / 1e6


def end_to_end(bootstrap, topic, rate=10_000, seconds=5):
    """Latency percentiles (ms) from send to receipt at `rate` 1 KiB records/s (10 MB/s)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "e2e", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    latencies = []
    total = rate * seconds
    done = threading.Event()

    def receive():
        while len(latencies) < total and not done.is_set():
            # consume() waits for num_messages or the timeout: keep the timeout tiny so that a
            # record is not held back waiting for others.
            for message in consumer.consume(num_messages=10_000, timeout=0.001):
                if message.error() is None:
                    sent = int.from_bytes(message.value()[:8], "big")
                    latencies.append((time.perf_counter_ns() - sent) / 1e6)

    receiver = threading.Thread(target=receive)
    receiver.start()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    padding = os.urandom(RECORD - 8)
    started = time.perf_counter()
    for i in range(total):
        # Paced: record i leaves at started + i / rate.
        delay = started + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        producer.produce(topic, time.perf_counter_ns().to_bytes(8, "big") + padding, partition=i % PARTITIONS)
        producer.poll(0)
    producer.flush(60)
    receiver.join(60)
    done.set()
    consumer.close()
    latencies.sort()

    def pct(q):
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))]

    return {"e2e_records": len(latencies), "e2e_avg_ms": sum(latencies) / len(latencies),
            "e2e_p50_ms": pct(0.5), "e2e_p95_ms": pct(0.95), "e2e_p99_ms": pct(0.99),
            "e2e_p999_ms": pct(0.999), "e2e_max_ms": latencies[-1]}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gregor-perf-") as tmp:
        data = os.path.join(tmp, "data")
        os.makedirs(data)
        results = {"loopback_mb_s": loopback_floor(), "disk_fdatasync_mb_s": disk_floor(tmp)}
        proc, bootstrap = start_node(args.binary, data)
        try:
            admin = AdminClient({"bootstrap.servers": bootstrap})
            for topic in ("perf", "perf-idempotent", "perf-e2e"):
                admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
            time.sleep(1)  # the logs open right after creation; not a synchronisation of results
            rate, mb = produce(bootstrap, "perf", args.records, idempotent=False)
            results.update(produce_records_s=rate, produce_mb_s=mb)
            rate, mb = produce(bootstrap, "perf-idempotent", args.records, idempotent=True)
            results.update(idempotent_records_s=rate, idempotent_mb_s=mb)
            rate, mb = consume(bootstrap, "perf", args.records)
            results.update(consume_records_s=rate, consume_mb_s=mb)
            results.update(end_to_end(bootstrap, "perf-e2e"))
        finally:
            proc.terminate()
            proc.wait(30)
    results["produce_vs_disk"] = results["produce_mb_s"] / results["disk_fdatasync_mb_s"]
    results["consume_vs_loopback"] = results["consume_mb_s"] / results["loopback_mb_s"]
    results["idempotence_cost"] = 1 - results["idempotent_mb_s"] / results["produce_mb_s"]
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key:24} {value:,.3f}")


if __name__ == "__main__":
    sys.exit(main())
