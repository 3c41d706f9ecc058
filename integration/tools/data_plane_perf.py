"""Producer and consumer throughput, end-to-end latency, memory with many partitions and
recovery time of a Gregor node, beside this machine's floors measured in the same run
(BENCHMARKS.md, "Data plane throughput").

Floors: one loopback TCP stream (Python sender and receiver, so a lower bound), sequential 1 MiB
writes to the log dir's file system ended by fdatasync (512 MiB, and as much as the four produce
rounds write), and the first touch of fresh memory (see `--warm-memory`). Load: `gregor-perf` (librdkafka
through the rdkafka crate), as kafka-producer-perf-test / kafka-consumer-perf-test /
EndToEndLatency drive Kafka: 1 KiB records to 4 partitions with acks=1 and with
enable.idempotence=true in the order plain, idempotent, idempotent, plain (so the drift of a
filling page cache does not count as idempotence's cost), each with Kafka's `--warmup-records`
(200,000 by default): the figures compared are the steady state after it, the whole runs' are
kept beside them. librdkafka's idempotent producer asks for its producer id only when a 500 ms
timer set at its creation fires, so every idempotent run starts half a second late, which is
most of a short run's difference; the warm-up is larger than librdkafka's queue (100,000
messages), so the steady state starts after the producer id came. Then a consumer reading the first
round back from the page cache (Kafka's fetch.MB.sec: after the group's assignment), then
end-to-end latency with 1 KiB records paced at 10,000/s (10 MB/s) on one partition.

`--partitions N`: then N partitions (topics of 1,000), about ten 1 KiB records written to each,
and the node's resident memory (VmRSS, VmHWM) read from /proc.

`--recovery-gb G`: then G GB written to 8 partitions, the node killed with SIGKILL and
restarted twice: once as it is (only what lies above each log's recovery point is rescanned),
once with `recovery-point-offset-checkpoint` removed (every segment rescanned, Kafka's
recovery after a lost checkpoint). Each restart is timed from the process start until every
partition answers ListOffsets with its end offset.

`--warm-memory`: first fill the page cache with a sparse file as large as the machine's memory
(read, never written: no disk space is used) and keep it cached through the run, so that what the
node writes takes page frames the kernel reclaims from that cache, as on a broker that has been
running for a while. On this kind of VM the hypervisor backs a guest page frame on its first touch
(and again after the guest frees it and reports it free), which limits a page cache growing into
fresh memory to about the `memory_first_touch_mb_s` floor measured beside the others; a run
without this option measures that as much as the node.

Usage: data_plane_perf.py GREGOR GREGOR_PERF [--records N] [--rounds R] [--warmup-records W] [--partitions N]
       [--recovery-gb G] [--warm-memory] [--json]
"""

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, TopicPartition
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
    """MB/s of `total` bytes of sequential 1 MiB writes ended by fdatasync."""
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


def memory_first_touch_floor(total=2 << 30):
    """MB/s of writing one byte to each page of fresh anonymous memory (the cost of page frames the
    process never used, which a page cache growing into free memory pays too)."""
    import mmap

    area = mmap.mmap(-1, total)
    page = mmap.PAGESIZE
    started = time.perf_counter()
    for offset in range(0, total, page):
        area[offset] = 1
    elapsed = time.perf_counter() - started
    area.close()
    return total / elapsed / 1e6


def warm_memory(directory):
    """Fills the page cache with a sparse file of the machine's memory size; returns it open (its
    pages stay cached while it exists, and the kernel reclaims them for the node's writes)."""
    with open("/proc/meminfo") as f:
        total = int(next(line for line in f if line.startswith("MemTotal:")).split()[1]) * 1024
    path = os.path.join(directory, "warm.sparse")
    with open(path, "wb") as f:
        f.truncate(total)
    handle = open(path, "rb")
    while handle.read(16 << 20):
        pass
    return handle


class NodeProcess:
    """One `gregor node` on loopback with its data in `data`."""

    def __init__(self, binary, data):
        self.binary = binary
        self.data = data
        self.log_path = os.path.join(data, "..", "node.log")
        self.start()

    def start(self):
        args = [self.binary, "node", "--override", f"log.dirs={self.data}",
                "--override", "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
                "--override", "metrics.listener=127.0.0.1:0"]
        log = open(self.log_path, "ab")
        self.log_start = log.tell()
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, NO_COLOR="1"))
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            with open(self.log_path, "rb") as f:
                f.seek(self.log_start)
                text = f.read().decode(errors="replace")
            found = re.search(r"node ready .*listeners=\S*PLAINTEXT://([0-9.:]+)", text)
            if found:
                self.bootstrap = found.group(1)
                return
            if self.proc.poll() is not None:
                raise RuntimeError(text)
            time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError("the node did not become ready")

    def memory_mb(self):
        """(VmRSS, VmHWM) in MB."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return tuple(int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM"))

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(120)


def perf(gregor_perf, mode, args, report):
    subprocess.run([gregor_perf, mode, *args, "--json", report], check=True, capture_output=True, timeout=1800)
    with open(report) as f:
        return json.load(f)


def produce(gregor_perf, bootstrap, topic, records, props, report, record_size=RECORD, warmup=0):
    return perf(gregor_perf, "produce", ["--bootstrap-server", bootstrap, "--topic", topic, "--num-records", str(records),
                                         "--record-size", str(record_size), "--throughput", "-1",
                                         "--warmup-records", str(warmup), "--producer-props",
                                         "linger.ms=5", "batch.size=1048576", *props], report)


def create(admin, topic, partitions, config=None):
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(120)


def end_offsets(bootstrap, topic, partitions):
    """Each partition's end offset, or None while any partition does not answer."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-offsets"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1] for p in range(partitions)]
    except Exception:  # noqa: BLE001 - not served yet: the caller asks again
        return None
    finally:
        consumer.close()


def recovery(node, gregor_perf, tmp, gigabytes):
    """Seconds from process start until every partition answers with its end offset."""
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    topic, partitions = "recovery", 8
    create(admin, topic, partitions)
    records = int(gigabytes * 1e9 / (64 * 1024))
    produce(gregor_perf, node.bootstrap, topic, records, ["acks=1"], f"{tmp}/recovery.json", record_size=64 * 1024)
    written = time.time()
    expected = end_offsets(node.bootstrap, topic, partitions)
    # The recovery points of what was just written reach the checkpoint within
    # log.flush.offset.checkpoint.interval.ms (60 s by default).
    checkpoint = os.path.join(node.data, "recovery-point-offset-checkpoint")
    while not (os.path.exists(checkpoint) and os.path.getmtime(checkpoint) > written):
        if time.time() - written > 120:
            raise RuntimeError("no recovery-point checkpoint was written within 120 s")
        time.sleep(0.5)
    results = {"recovery_gb": gigabytes}
    for case in ("recovery_s_after_kill", "recovery_s_without_checkpoint"):
        node.kill9()
        if case == "recovery_s_without_checkpoint":
            os.remove(checkpoint)
        # Cold or warm, the page cache holds what was just written; say so beside the figure.
        node.start()
        while end_offsets(node.bootstrap, topic, partitions) != expected:
            if time.perf_counter() - node.started > 1800:
                raise RuntimeError("the partitions were not served within 30 minutes")
            time.sleep(0.05)
        results[case] = time.perf_counter() - node.started
    return results


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("binary")
    parser.add_argument("gregor_perf")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=0, help="also measure memory with this many partitions")
    parser.add_argument("--recovery-gb", type=float, default=0, help="also measure recovery after writing this much")
    parser.add_argument("--rounds", type=int, default=4,
                        help="produce rounds, a multiple of 4 (plain, idempotent, idempotent, plain)")
    parser.add_argument("--warmup-records", type=int, default=200_000,
                        help="records of each produce round before its steady state (at most half the round)")
    parser.add_argument("--warm-memory", action="store_true",
                        help="fill the page cache first, as on a broker that has been running")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.rounds < 4 or args.rounds % 4:
        parser.error("--rounds must be a positive multiple of 4")
    with tempfile.TemporaryDirectory(prefix="gregor-perf-") as tmp:
        data = os.path.join(tmp, "data")
        os.makedirs(data)
        results = {"memory_first_touch_mb_s": memory_first_touch_floor()}
        if args.warm_memory:
            started = time.perf_counter()
            warmed = warm_memory(tmp)
            results["warm_memory_s"] = time.perf_counter() - started
        # The disk floor twice: a 512 MiB burst, and as much as the produce rounds write.
        rounds_volume = max(512 << 20, (args.rounds * args.records * RECORD) >> 20 << 20)
        results.update(loopback_mb_s=loopback_floor(), disk_fdatasync_mb_s=disk_floor(tmp),
                       disk_fdatasync_rounds_volume_mb_s=disk_floor(tmp, rounds_volume))
        node = NodeProcess(args.binary, data)
        try:
            admin = AdminClient({"bootstrap.servers": node.bootstrap})
            for topic, count in (("perf", PARTITIONS), ("perf-e2e", 1)):
                create(admin, topic, count)
            # Plain and idempotent rounds in the order A B B A: throughput falls as the page cache
            # fills with dirty pages, so a plain round first and an idempotent one after would
            # charge that drift to idempotence.
            rounds = {"plain": [], "idempotent": []}
            whole_rounds = {"plain": [], "idempotent": []}
            warmup = min(args.warmup_records, args.records // 2)
            order = ("plain", "idempotent", "idempotent", "plain") * (args.rounds // 4)
            for index, kind in enumerate(order):
                topic = "perf" if index == 0 else f"perf-{index}"
                if index:
                    create(admin, topic, PARTITIONS)
                props = ["acks=1"] if kind == "plain" else ["enable.idempotence=true"]
                report = produce(args.gregor_perf, node.bootstrap, topic, args.records, props, f"{tmp}/p.json",
                                 warmup=warmup)
                steady = report.get("steady_state", report)
                rounds[kind].append(steady["mb_per_s"] * 1.048576)
                whole_rounds[kind].append(report["mb_per_s"] * 1.048576)
            results.update(warmup_records=warmup,
                           produce_mb_s=sum(rounds["plain"]) / len(rounds["plain"]),
                           idempotent_mb_s=sum(rounds["idempotent"]) / len(rounds["idempotent"]),
                           produce_rounds_mb_s=rounds["plain"], idempotent_rounds_mb_s=rounds["idempotent"],
                           produce_whole_rounds_mb_s=whole_rounds["plain"],
                           idempotent_whole_rounds_mb_s=whole_rounds["idempotent"])
            # librdkafka's default fetch sizes (50 MiB per fetch, 1 MiB per partition, as
            # kafka-consumer-perf-test's --fetch-size): with 10 MiB per partition the consumer
            # spent a third of its CPU faulting in a fresh 40 MB buffer for every response.
            read = perf(args.gregor_perf, "consume", ["--bootstrap-server", node.bootstrap, "--topic", "perf",
                                                      "--messages", str(args.records)], f"{tmp}/c.json")
            # Kafka's fetch.MB.sec: from the group's first assignment on (the join waits for
            # group.initial.rebalance.delay.ms).
            results.update(consume_records_s=read["fetch"]["fetch_records_per_s"],
                           consume_mb_s=read["fetch"]["fetch_mb_per_s"] * 1.048576,
                           consume_rebalance_ms=read["fetch"]["rebalance_ms"])
            e2e = perf(args.gregor_perf, "latency", ["--bootstrap-server", node.bootstrap, "--topic", "perf-e2e",
                                                     "--num-records", "100000", "--record-size", str(RECORD),
                                                     "--throughput", "10000", "--producer-acks", "1"], f"{tmp}/e.json")
            results.update({f"e2e_{k}": v for k, v in e2e["latency"].items()})
            if args.partitions:
                # Topics of at most 1,000 partitions: one creation is at most 10,000 records, as
                # Kafka's controller allows.
                sizes = [min(1000, args.partitions - first) for first in range(0, args.partitions, 1000)]
                for index, size in enumerate(sizes):
                    create(admin, f"many-{index}", size)
                for index, size in enumerate(sizes):
                    # Random partitioning of keyless records: about 10 records (10 KiB) per partition.
                    produce(args.gregor_perf, node.bootstrap, f"many-{index}", size * 10,
                            ["acks=1", "partitioner=random"], f"{tmp}/m.json")
                rss, hwm = node.memory_mb()
                results.update(partitions=args.partitions, rss_mb=rss, peak_rss_mb=hwm)
            if args.recovery_gb:
                results.update(recovery(node, args.gregor_perf, tmp, args.recovery_gb))
        finally:
            node.stop()
        if args.warm_memory:
            warmed.close()
    results["produce_vs_disk"] = results["produce_mb_s"] / results["disk_fdatasync_mb_s"]
    results["produce_vs_disk_rounds_volume"] = results["produce_mb_s"] / results["disk_fdatasync_rounds_volume_mb_s"]
    results["consume_vs_loopback"] = results["consume_mb_s"] / results["loopback_mb_s"]
    results["idempotence_cost"] = 1 - results["idempotent_mb_s"] / results["produce_mb_s"]
    results["idempotence_cost_whole_runs"] = 1 - (sum(results["idempotent_whole_rounds_mb_s"])
                                                  / sum(results["produce_whole_rounds_mb_s"]))
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key:32} {value}")


if __name__ == "__main__":
    sys.exit(main())
