"""The memory of log compaction: a node's resident set while its cleaner compacts one partition
of N distinct keys (one large sealed segment), with a given `log.cleaner.dedupe.buffer.size`.

    python integration/tools/cleaner_memory.py --binary target/release/gregor --keys 4000000 \
        --dedupe-buffer 4194304

The topic is written with `cleanup.policy=delete` (nothing to clean), rolled, then switched to
`compact`, so the measurement holds only the cleaner's passes; it ends when the cleaner
checkpoint reaches the sealed segment's end. Prints the resident memory before and at the peak
(total and anonymous, from /proc), the passes and their time.
"""
import argparse, json, os, shutil, sys, time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

sys.path.insert(0, os.path.dirname(__file__))
from node_process import start_node  # noqa: E402

TOPIC = "cleaner-memory"


def resident_kb(pid):
    """(VmRSS, RssAnon) of `pid` in kB."""
    fields = {}
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            name, _, value = line.partition(":")
            if name in ("VmRSS", "RssAnon"):
                fields[name] = int(value.split()[0])
    return fields["VmRSS"], fields["RssAnon"]


def cleaner_checkpoint(directory):
    """The cleaner offset of partition 0 of the topic, or -1 before the first pass."""
    path = os.path.join(directory, "data", "cleaner-offset-checkpoint")
    try:
        with open(path) as checkpoint:
            for line in checkpoint.read().splitlines()[2:]:
                topic, partition, offset = line.split()
                if topic == TOPIC and partition == "0":
                    return int(offset)
    except FileNotFoundError:
        pass
    return -1


def alter(admin, **configs):
    entries = [ConfigEntry(k.replace("_", "."), v, incremental_operation=AlterConfigOpType.SET)
               for k, v in configs.items()]
    resource = ConfigResource("TOPIC", TOPIC, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--binary", default="target/release/gregor")
    parser.add_argument("--keys", type=int, default=4_000_000)
    parser.add_argument("--dedupe-buffer", type=int, default=128 * 1024 * 1024)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    process, (host, port), directory = start_node(args.binary, [
        "log.cleaner.backoff.ms=200", f"log.cleaner.dedupe.buffer.size={args.dedupe_buffer}"])
    try:
        bootstrap = f"{host}:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1, config={"cleanup.policy": "delete"})])[TOPIC].result(30)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                             "queue.buffering.max.messages": 1_000_000})
        value = b"x" * 60
        for i in range(args.keys):
            while True:
                try:
                    producer.produce(TOPIC, key=b"key-%09d" % i, value=value, partition=0)
                    break
                except BufferError:
                    producer.poll(0.1)
        assert producer.flush(120) == 0
        alter(admin, segment_ms="1000")
        time.sleep(1.1)
        producer.produce(TOPIC, key=b"roll", value=b"r", partition=0)
        assert producer.flush(30) == 0
        before = resident_kb(process.pid)
        peak = before
        alter(admin, cleanup_policy="compact", min_cleanable_dirty_ratio="0.01")
        started = time.monotonic()
        while cleaner_checkpoint(directory) < args.keys:
            if time.monotonic() - started > args.timeout:
                raise SystemExit(f"the cleaner did not finish within {args.timeout} s")
            now = resident_kb(process.pid)
            peak = max(peak, now)
            time.sleep(0.1)
        elapsed = time.monotonic() - started
        result = {"keys": args.keys, "dedupe_buffer": args.dedupe_buffer,
                  "rss_before_kb": before[0], "anon_before_kb": before[1],
                  "rss_peak_kb": peak[0], "anon_peak_kb": peak[1], "seconds": round(elapsed, 1)}
        if args.json:
            print(json.dumps(result))
        else:
            print(f"{args.keys} keys, dedupe buffer {args.dedupe_buffer} B: resident {before[0] // 1024} MB "
                  f"({before[1] // 1024} MB anonymous) before, peak {peak[0] // 1024} MB "
                  f"({peak[1] // 1024} MB anonymous); compacted in {elapsed:.1f} s")
    finally:
        process.kill()
        process.wait()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
