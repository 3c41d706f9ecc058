"""`gregor console-producer`, `gregor console-consumer` and `gregor get-offsets` against a node,
checked with kafka-python and confluent-kafka as kafka-console-*.sh and kafka-get-offsets.sh
would be."""

import subprocess
import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka.partitioner.default import murmur2

from conftest import RawConn, gregor_bin, wait_for
from test_data_plane import batch, create, list_offset, produce


def gregor(*args, stdin=None):
    return subprocess.run([str(gregor_bin()), *args], input=stdin, capture_output=True, text=True, timeout=60)


def ready(node, topic, partitions):
    conn = RawConn(node.bootstrap)
    for p in range(partitions):
        wait_for("the log", lambda: list_offset(conn, topic, p, -1).error_code == 0)
    conn.close()


def read_all(node, topic, partition, count):
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "unused", "enable.auto.commit": False})
    try:
        consumer.assign([CTopicPartition(topic, partition, 0)])
        out = []
        deadline = time.monotonic() + 30
        while len(out) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            assert message.error() is None, message.error()
            out.append((message.key(), message.value(), message.headers() or []))
        return out
    finally:
        consumer.close()


def test_console_producer_keys_go_where_the_java_partitioner_puts_them(node):
    create(node, ("ct-keys", 3))
    ready(node, "ct-keys", 3)
    lines = [f"key{i}:value{i}" for i in range(30)]
    result = gregor("console-producer", "--bootstrap-server", node.bootstrap, "--topic", "ct-keys",
                    "--property", "parse.key=true", "--property", "key.separator=:",
                    stdin="\n".join(lines) + "\n")
    assert result.returncode == 0, result.stderr
    for partition in range(3):
        expected = [(f"key{i}".encode(), f"value{i}".encode()) for i in range(30)
                    if (murmur2(f"key{i}".encode()) & 0x7FFFFFFF) % 3 == partition]
        got = [(k, v) for k, v, _ in read_all(node, "ct-keys", partition, len(expected))]
        assert got == expected, partition


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_console_producer_compresses(node, codec):
    topic = f"ct-{codec}"
    create(node, (topic, 1))
    ready(node, topic, 1)
    result = gregor("console-producer", "--bootstrap-server", node.bootstrap, "--topic", topic,
                    "--compression-codec", codec, "--property", "parse.headers=true",
                    stdin="h1:a,h2:b\tfirst\n\tsecond\n")
    assert result.returncode == 0, result.stderr
    got = read_all(node, topic, 0, 2)
    assert got == [(None, b"first", [("h1", b"a"), ("h2", b"b")]), (None, b"second", [])]


def test_console_producer_acks_zero_and_one(node):
    create(node, ("ct-acks", 1))
    ready(node, "ct-acks", 1)
    for acks in ("0", "1"):
        result = gregor("console-producer", "--bootstrap-server", node.bootstrap, "--topic", "ct-acks",
                        "--producer-property", f"acks={acks}", stdin=f"acks-{acks}\n")
        assert result.returncode == 0, result.stderr
    wait_for("both records", lambda: list_offset(RawConn(node.bootstrap), "ct-acks", 0, -1).offset == 2)
    assert [v for _, v, _ in read_all(node, "ct-acks", 0, 2)] == [b"acks-0", b"acks-1"]


def test_console_producer_sends_what_it_read_before_a_bad_line(node):
    """As kafka-console-producer.sh: a line the reader refuses ends the run with its line
    number, after the lines read before it are sent."""
    create(node, ("ct-bad-line", 1))
    ready(node, "ct-bad-line", 1)
    result = gregor("console-producer", "--bootstrap-server", node.bootstrap, "--topic", "ct-bad-line",
                    "--property", "parse.key=true", "--property", "key.separator=:",
                    stdin="k1:v1\nk2:v2\n:empty-key\nno-separator\nk5:never\n")
    assert result.returncode == 1
    assert "No key separator found on line number 4: 'no-separator'" in result.stderr, result.stderr
    got = [(k, v) for k, v, _ in read_all(node, "ct-bad-line", 0, 3)]
    assert got == [(b"k1", b"v1"), (b"k2", b"v2"), (b"", b"empty-key")]
    headers = gregor("console-producer", "--bootstrap-server", node.bootstrap, "--topic", "ct-bad-line",
                     "--property", "parse.headers=true", stdin="h1:v1,bad\tvalue\n")
    assert headers.returncode == 1
    assert "No header key separator found in pair 'bad' on line number 1" in headers.stderr, headers.stderr


def test_console_producer_creates_a_missing_topic_as_a_producer_does(node, start_node):
    """The producer's Metadata may create the topic (auto.create.topics.enable, on by default),
    and the first send waits for it; without auto-creation it gives up after max.block.ms with
    the Java producer's message."""
    creating = start_node()
    result = gregor("console-producer", "--bootstrap-server", creating.bootstrap, "--topic", "ct-auto-created",
                    stdin="first\n")
    assert result.returncode == 0, result.stderr
    assert [v for _, v, _ in read_all(creating, "ct-auto-created", 0, 1)] == [b"first"]
    # This module's node has auto-creation off.
    refused = gregor("console-producer", "--bootstrap-server", node.bootstrap, "--topic", "ct-absent",
                     "--producer-property", "max.block.ms=1000", stdin="lost\n")
    assert refused.returncode == 1
    assert "Topic ct-absent not present in metadata after 1000 ms." in refused.stderr, refused.stderr


def test_console_consumer_prints_as_kafka(node):
    create(node, ("ct-consume", 2))
    ready(node, "ct-consume", 2)
    conn = RawConn(node.bootstrap)
    assert produce(conn, "ct-consume", 0, batch([(b"k0", b"v0", [("h", b"x")], 1000),
                                                 (None, b"v1", [], 1001)])).error_code == 0
    assert produce(conn, "ct-consume", 1, batch([(b"k2", None, [], 1002)])).error_code == 0
    conn.close()
    result = gregor("console-consumer", "--bootstrap-server", node.bootstrap, "--topic", "ct-consume",
                    "--partition", "0", "--from-beginning", "--max-messages", "2",
                    "--property", "print.key=true", "--property", "print.timestamp=true",
                    "--property", "print.offset=true", "--property", "print.headers=true")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "CreateTime:1000\tOffset:0\th:x\tk0\tv0\nCreateTime:1001\tOffset:1\tNO_HEADERS\tnull\tv1\n"
    assert "Processed a total of 2 messages" in result.stderr

    # Every partition without --partition; --offset needs --partition.
    result = gregor("console-consumer", "--bootstrap-server", node.bootstrap, "--topic", "ct-consume",
                    "--from-beginning", "--max-messages", "3", "--property", "print.partition=true")
    assert result.returncode == 0, result.stderr
    assert sorted(result.stdout.splitlines()) == ["Partition:0\tv0", "Partition:0\tv1", "Partition:1\tnull"]
    result = gregor("console-consumer", "--bootstrap-server", node.bootstrap, "--topic", "ct-consume",
                    "--partition", "0", "--offset", "1", "--max-messages", "1")
    assert result.stdout == "v1\n"
    # Without --from-beginning it starts at the end: nothing arrives before the timeout.
    result = gregor("console-consumer", "--bootstrap-server", node.bootstrap, "--topic", "ct-consume",
                    "--timeout-ms", "1500")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "Processed a total of 0 messages" in result.stderr


def test_console_consumer_waits_for_its_topic_as_kafkas_consumer_does(node, start_node):
    """Kafka's console consumer asks for its topic with auto-creation allowed and keeps polling
    until it (and an assigned --partition) is there; --timeout-ms ends the wait as it ends any
    poll without records: the TimeoutException line, 0 messages, exit 0."""
    creating = start_node()
    made = gregor("console-consumer", "--bootstrap-server", creating.bootstrap, "--topic", "ct-consumer-made",
                  "--timeout-ms", "1500")
    assert made.returncode == 0, made.stderr
    assert "Processed a total of 0 messages" in made.stderr
    assert "ct-consumer-made" in gregor("topics", "--bootstrap-server", creating.bootstrap, "--list").stdout

    # This module's node has auto-creation off: the consumer waits for the topic.
    for extra in ([], ["--partition", "0"]):
        absent = gregor("console-consumer", "--bootstrap-server", node.bootstrap, "--topic", "ct-consumer-absent",
                        "--timeout-ms", "1000", *extra)
        assert absent.returncode == 0, absent.stderr
        assert "org.apache.kafka.common.errors.TimeoutException" in absent.stderr, absent.stderr
        assert "Processed a total of 0 messages" in absent.stderr
    create(node, ("ct-consumer-two", 2))
    ready(node, "ct-consumer-two", 2)
    beyond = gregor("console-consumer", "--bootstrap-server", node.bootstrap, "--topic", "ct-consumer-two",
                    "--partition", "7", "--timeout-ms", "1000")
    assert beyond.returncode == 0, beyond.stderr
    assert "Processed a total of 0 messages" in beyond.stderr

    def metadata_requests():
        return sum(float(line.rsplit(" ", 1)[1]) for line in node.metrics_text().splitlines()
                   if line.startswith("kafka_network_requestmetrics_requests_total")
                   and 'request="Metadata"' in line)

    before = metadata_requests()
    waiting = subprocess.Popen(
        [str(gregor_bin()), "console-consumer", "--bootstrap-server", node.bootstrap, "--topic", "ct-consumer-later",
         "--from-beginning", "--max-messages", "1", "--timeout-ms", "30000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        # The consumer is up and asking Metadata again before the topic exists.
        wait_for("the consumer's Metadata retries", lambda: metadata_requests() >= before + 3)
        assert waiting.poll() is None, waiting.communicate()
        create(node, ("ct-consumer-later", 1))
        ready(node, "ct-consumer-later", 1)
        conn = RawConn(node.bootstrap)
        assert produce(conn, "ct-consumer-later", 0, batch([(None, b"late", [], 1000)])).error_code == 0
        conn.close()
        out, err = waiting.communicate(timeout=60)
    finally:
        waiting.kill()
    assert (waiting.returncode, out) == (0, "late\n"), err
    assert "Processed a total of 1 messages" in err


def test_get_offsets(node):
    create(node, ("ct-offsets", 2), ("ct-other", 1))
    ready(node, "ct-offsets", 2)
    ready(node, "ct-other", 1)
    conn = RawConn(node.bootstrap)
    for i, ts in enumerate([1000, 2000, 3000]):
        assert produce(conn, "ct-offsets", 0, batch([(None, f"{i}".encode(), [], ts)])).error_code == 0
    conn.close()
    result = gregor("get-offsets", "--bootstrap-server", node.bootstrap, "--topic", "ct-offsets")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ct-offsets:0:3\nct-offsets:1:0\n"
    result = gregor("get-offsets", "--bootstrap-server", node.bootstrap, "--topic", "ct-offsets",
                    "--partitions", "0", "--time", "2500")
    assert result.stdout == "ct-offsets:0:2\n"
    result = gregor("get-offsets", "--bootstrap-server", node.bootstrap, "--topic-partitions", "ct-(offsets|other):0",
                    "--time", "-2")
    assert result.stdout == "ct-offsets:0:0\nct-other:0:0\n"
    result = gregor("get-offsets", "--bootstrap-server", node.bootstrap, "--topic", "ct-offsets",
                    "--time", "max-timestamp", "--partitions", "0")
    assert result.stdout == "ct-offsets:0:2\n"
    result = gregor("get-offsets", "--bootstrap-server", node.bootstrap, "--topic", "nothing-.*")
    assert result.returncode != 0
    assert "Error occurred: Could not match any topic-partitions with the specified filters" in result.stderr
