"""`gregor console-producer`, `gregor console-consumer` and `gregor get-offsets` against a node,
checked with kafka-python and confluent-kafka as kafka-console-*.sh and kafka-get-offsets.sh
would be."""

import signal
import subprocess
import time

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
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
                    stdin="h1:a,h2:b\tfirst\nh3:c\tsecond\n")
    assert result.returncode == 0, result.stderr
    got = read_all(node, topic, 0, 2)
    assert got == [(None, b"first", [("h1", b"a"), ("h2", b"b")]), (None, b"second", [("h3", b"c")])]


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


def committed_offsets(node, group, topic):
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        offsets = admin.list_group_offsets(group)[group]
        return {tp.partition: meta.offset for tp, meta in offsets.items() if tp.topic == topic}
    finally:
        admin.close()


def test_console_consumer_group_commits_only_what_it_printed(node):
    """As ConsoleConsumer's cleanup (resetUnconsumedOffsets): with --max-messages, each
    partition is committed at its first record not printed, whatever the fetch returned."""
    create(node, ("ct-group-max", 1), ("ct-group-max-two", 2))
    ready(node, "ct-group-max", 1)
    ready(node, "ct-group-max-two", 2)
    conn = RawConn(node.bootstrap)
    assert produce(conn, "ct-group-max", 0, batch([(None, f"v{i}".encode(), [], 1000 + i)
                                                   for i in range(10)])).error_code == 0
    for p in range(2):
        assert produce(conn, "ct-group-max-two", p, batch([(None, f"p{p}-{i}".encode(), [], 1000)
                                                         for i in range(5)])).error_code == 0
    conn.close()
    result = gregor("console-consumer", "--bootstrap-server", node.bootstrap, "--topic", "ct-group-max",
                    "--group", "g-max", "--from-beginning", "--max-messages", "3", "--timeout-ms", "30000")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "v0\nv1\nv2\n"
    assert committed_offsets(node, "g-max", "ct-group-max") == {0: 3}
    # The next member starts where the first stopped printing.
    result = gregor("console-consumer", "--bootstrap-server", node.bootstrap, "--topic", "ct-group-max",
                    "--group", "g-max", "--max-messages", "2", "--timeout-ms", "30000")
    assert result.stdout == "v3\nv4\n", result.stderr
    # Two partitions in one fetch: the one not printed from keeps its position.
    result = gregor("console-consumer", "--bootstrap-server", node.bootstrap, "--topic", "ct-group-max-two",
                    "--group", "g-max-two", "--from-beginning", "--max-messages", "3", "--timeout-ms", "30000")
    assert result.returncode == 0, result.stderr
    committed = committed_offsets(node, "g-max-two", "ct-group-max-two")
    assert sum(committed.values()) == 3, committed


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
def test_console_consumer_group_cleans_up_on_a_signal(node, signal_number):
    """Kafka's shutdown hook: on SIGINT or SIGTERM the consumer commits what it printed, leaves
    the group and prints its count; the JVM then exits with 128 + the signal's number."""
    topic = f"ct-signal-{int(signal_number)}"
    create(node, (topic, 1))
    ready(node, topic, 1)
    conn = RawConn(node.bootstrap)
    assert produce(conn, topic, 0, batch([(None, f"v{i}".encode(), [], 1000) for i in range(10)])).error_code == 0
    conn.close()
    group = f"g-{topic}"
    consumer = subprocess.Popen(
        [str(gregor_bin()), "console-consumer", "--bootstrap-server", node.bootstrap, "--topic", topic,
         "--group", group, "--from-beginning"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        lines = [consumer.stdout.readline() for _ in range(10)]
        assert lines == [f"v{i}\n".encode() for i in range(10)]
        # The member's client id is kafka-console-consumer.sh's.
        members = gregor("consumer-groups", "--bootstrap-server", node.bootstrap, "--describe", "--group", group,
                         "--members")
        assert " console-consumer" in members.stdout, members
        consumer.send_signal(signal_number)
        _, err = consumer.communicate(timeout=30)
    finally:
        consumer.kill()
    assert consumer.returncode == 128 + int(signal_number), err
    assert b"Processed a total of 10 messages" in err, err
    assert committed_offsets(node, group, topic) == {0: 10}
    # It left the group (LeaveGroup) rather than waiting for its session to expire.
    described = gregor("consumer-groups", "--bootstrap-server", node.bootstrap, "--describe", "--group", group)
    assert f"Consumer group '{group}' has no active members." in described.stdout + described.stderr, described


def test_console_producer_reads_lines_as_javas_reader(node):
    """Invalid UTF-8 is replaced (U+FFFD), not the end of input; a lone CR ends a line."""
    create(node, ("ct-utf8", 1))
    ready(node, "ct-utf8", 1)
    result = subprocess.run([str(gregor_bin()), "console-producer", "--bootstrap-server", node.bootstrap,
                             "--topic", "ct-utf8"], input=b"first\nbad\xffbyte\nafter\nb\rc\r\n",
                            capture_output=True, timeout=60)
    assert result.returncode == 0, result.stderr
    got = [v for _, v, _ in read_all(node, "ct-utf8", 0, 5)]
    assert got == [b"first", "bad\ufffdbyte".encode(), b"after", b"b", b"c"]


def test_console_producer_batches_by_bytes_and_refuses_one_record_alone(node):
    """--batch-size is batch.size in bytes; a record over max.request.size fails alone with
    Kafka's RecordTooLargeException message, and its neighbours are sent."""
    create(node, ("ct-many", 1), ("ct-huge", 1))
    ready(node, "ct-many", 1)
    ready(node, "ct-huge", 1)
    lines = "".join(f"{i:05d}" + "y" * 9995 + "\n" for i in range(300))
    result = gregor("console-producer", "--bootstrap-server", node.bootstrap, "--topic", "ct-many", stdin=lines)
    assert result.returncode == 0, result.stderr
    assert list_offset(RawConn(node.bootstrap), "ct-many", 0, -1).offset == 300
    huge = "small1\n" + "x" * 3_000_000 + "\nsmall2\n"
    result = gregor("console-producer", "--bootstrap-server", node.bootstrap, "--topic", "ct-huge", stdin=huge)
    assert result.returncode == 1
    assert ("with key: null, value: 3000000 bytes with error:" in result.stderr
            and "RecordTooLargeException: The message is 3000088 bytes when serialized which is larger than "
                "1048576, which is the value of the max.request.size configuration." in result.stderr), result.stderr
    assert [v for _, v, _ in read_all(node, "ct-huge", 0, 2)] == [b"small1", b"small2"]


def test_get_offsets_retries_and_knows_the_tiered_specs(node):
    """listOffsets retries a partition whose leader is not there yet; -4/earliest-local and
    -5/latest-tiered are accepted as kafka-get-offsets.sh accepts them."""
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic("ct-fresh", 3, 1)])
    finally:
        admin.close()
    result = gregor("get-offsets", "--bootstrap-server", node.bootstrap, "--topic", "ct-fresh")
    assert result.returncode == 0, result.stderr
    assert "Skip getting offsets" not in result.stderr, result.stderr
    assert result.stdout == "ct-fresh:0:0\nct-fresh:1:0\nct-fresh:2:0\n"
    for time in ("earliest-local", "-4"):
        result = gregor("get-offsets", "--bootstrap-server", node.bootstrap, "--topic", "ct-fresh",
                        "--time", time, "--partitions", "0")
        assert (result.returncode, result.stdout) == (0, "ct-fresh:0:0\n"), result.stderr
    # Without tiered storage there is no tiered offset: nothing to print.
    result = gregor("get-offsets", "--bootstrap-server", node.bootstrap, "--topic", "ct-fresh",
                    "--time", "latest-tiered")
    assert (result.returncode, result.stdout) == (0, ""), result.stderr
    result = gregor("get-offsets", "--bootstrap-server", node.bootstrap, "--topic", "ct-fresh", "--time", "soon")
    assert "-4 or earliest-local / -5 or latest-tiered" in result.stderr


def test_dump_log_ends_quietly_when_its_reader_stops(node):
    """`gregor dump-log ... | head`: a closed output is the end of the dump, not an error."""
    import glob
    import os
    create(node, ("ct-dump", 1))
    ready(node, "ct-dump", 1)
    conn = RawConn(node.bootstrap)
    assert produce(conn, "ct-dump", 0, batch([(None, None, [], 1000)] + [(None, b"x" * 100, [], 1000)] * 50)).error_code == 0
    conn.close()
    (segment,) = glob.glob(os.path.join(node.data_dir, "ct-dump-0", "*.log"))
    reader = subprocess.Popen([str(gregor_bin()), "dump-log", "--print-data-log", "--files", ",".join([segment] * 200)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    reader.stdout.readline()
    reader.stdout.close()
    _, err = reader.communicate(timeout=60)
    assert (reader.returncode, err) == (0, b"")
    # A null value prints no payload (DumpLogSegments).
    dumped = gregor("dump-log", "--print-data-log", "--files", segment).stdout
    first = next(line for line in dumped.splitlines() if line.startswith("| offset: 0 "))
    assert "payload" not in first, first


@pytest.mark.parametrize("group", [[], ["--group", "g-restart"]])
def test_console_consumer_polls_on_across_a_broker_restart(start_node, group):
    """Kafka's consumer reconnects after a lost connection (with backoff; a group member finds
    its coordinator again and rejoins) and ends only on --max-messages or --timeout-ms: a
    kill -9 and restart of the broker is not the end."""
    from ports import reserve_port
    node = start_node({"listeners": f"PLAINTEXT://127.0.0.1:{reserve_port()},CONTROLLER://127.0.0.1:{reserve_port()}",
                       "group.initial.rebalance.delay.ms": "0"})
    create(node, ("ct-restart", 1))
    ready(node, "ct-restart", 1)
    conn = RawConn(node.bootstrap)
    assert produce(conn, "ct-restart", 0, batch([(None, f"a{i}".encode(), [], 1000) for i in range(3)])).error_code == 0
    conn.close()
    consumer = subprocess.Popen(
        [str(gregor_bin()), "console-consumer", "--bootstrap-server", node.bootstrap, "--topic", "ct-restart",
         "--from-beginning", "--max-messages", "6", "--timeout-ms", "60000", *group],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )
    try:
        assert [consumer.stdout.readline() for _ in range(3)] == [b"a0\n", b"a1\n", b"a2\n"]
        node.restart()
        assert consumer.poll() is None, consumer.communicate()
        ready(node, "ct-restart", 1)
        conn = RawConn(node.bootstrap)
        assert produce(conn, "ct-restart", 0, batch([(None, f"b{i}".encode(), [], 1000) for i in range(3)])).error_code == 0
        conn.close()
        out, err = consumer.communicate(timeout=60)
    finally:
        consumer.kill()
    assert (consumer.returncode, out) == (0, b"b0\nb1\nb2\n"), err
    assert b"Processed a total of 6 messages" in err
    assert b"WARN" not in err, err
    if group:
        wait_for("the group's commit", lambda: committed_offsets(node, "g-restart", "ct-restart") == {0: 6})
