"""`gregor topics` (kafka-topics.sh) run as a subprocess against a real node: exact stdout,
stderr and exit codes for create / list / describe / alter / delete, kafka-topics.sh's usage and
value errors, and a KIP-599 quota violation that is reported (with its throttle time) instead of
retried."""

import os
import re
import subprocess

from conftest import gregor_bin


def topics(node, *args):
    env = dict(os.environ, RUST_LOG="error", NO_COLOR="1")
    return subprocess.run([str(gregor_bin()), "topics", "--bootstrap-server", node.bootstrap, *args],
                          capture_output=True, text=True, timeout=60, env=env)


def ok(done, stdout):
    assert (done.returncode, done.stdout, done.stderr) == (0, stdout, ""), done


def failed(done, stderr, stdout=""):
    assert done.returncode != 0, done
    assert (done.stdout, done.stderr) == (stdout, stderr), done


TOPIC_ID = r"[A-Za-z0-9_-]{22}"


def test_create_list_describe_alter_delete(node):
    ok(topics(node, "--create", "--topic", "cli-orders", "--partitions", "3", "--replication-factor", "1",
              "--config", "retention.ms=1000", "--config", "cleanup.policy=compact"),
       "Created topic cli-orders.\n")
    ok(topics(node, "--create", "--topic", "cli-plain"), "Created topic cli-plain.\n")
    listed = topics(node, "--list")
    assert listed.returncode == 0 and listed.stderr == ""
    names = listed.stdout.split("\n")
    assert names[-1] == "" and names[:-1] == sorted(names[:-1])
    assert {"cli-orders", "cli-plain"} <= set(names)
    ok(topics(node, "--list", "--topic", "cli-orders,cli-pl.*"), "cli-orders\ncli-plain\n")

    described = topics(node, "--describe", "--topic", "cli-orders")
    assert described.returncode == 0 and described.stderr == ""
    lines = described.stdout.split("\n")
    # Configs in the order of the Java admin client's HashMap, as kafka-topics.sh prints them.
    assert re.fullmatch(rf"Topic: cli-orders\tTopicId: {TOPIC_ID}\tPartitionCount: 3\tReplicationFactor: 1\t"
                        r"Configs: cleanup.policy=compact,retention.ms=1000", lines[0]), lines[0]
    assert lines[1:] == [f"\tTopic: cli-orders\tPartition: {p}\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: "
                         for p in range(3)] + [""]

    ok(topics(node, "--alter", "--topic", "cli-orders", "--partitions", "5"), "")
    assert "PartitionCount: 5\t" in topics(node, "--describe", "--topic", "cli-orders").stdout
    # Only the topic line, and only for topics with overrides.
    overrides = topics(node, "--describe", "--topic", "cli-orders", "--topics-with-overrides")
    ok(overrides, topics(node, "--describe", "--topic", "cli-orders").stdout.split("\n", 1)[0] + "\n")
    ok(topics(node, "--describe", "--topic", "cli-plain", "--topics-with-overrides"), "")
    ok(topics(node, "--describe", "--topic", "cli-orders", "--under-replicated-partitions"), "")

    ok(topics(node, "--delete", "--topic", "cli-plain"), "")
    assert "cli-plain" not in topics(node, "--list").stdout.split("\n")


def test_existing_and_missing_topics(node):
    ok(topics(node, "--create", "--topic", "cli-dup"), "Created topic cli-dup.\n")
    failed(topics(node, "--create", "--topic", "cli-dup"),
           "gregor: Error while executing topic command : Topic 'cli-dup' already exists.\n")
    ok(topics(node, "--create", "--topic", "cli-dup", "--if-not-exists"), "")
    failed(topics(node, "--describe", "--topic", "cli-none"), "gregor: Error while executing topic command : Topic 'cli-none' does not exist as expected\n")
    failed(topics(node, "--delete", "--topic", "cli-none"), "gregor: Error while executing topic command : Topic 'cli-none' does not exist as expected\n")
    failed(topics(node, "--alter", "--topic", "cli-none", "--partitions", "2"),
           "gregor: Error while executing topic command : Topic 'cli-none' does not exist as expected\n")
    ok(topics(node, "--describe", "--topic", "cli-none", "--if-exists"), "")
    ok(topics(node, "--delete", "--topic", "cli-none", "--if-exists"), "")
    failed(topics(node, "--alter", "--topic", "cli-dup", "--partitions", "1"),
           "gregor: Error while executing topic command : Topic already has 1 partition(s).\n")


def test_broker_and_value_errors(node):
    failed(topics(node, "--create", "--topic", "cli-bad-config", "--config", "no.such.config=1"),
           "gregor: Error while executing topic command : Unknown topic config name: no.such.config\n")
    failed(topics(node, "--create", "--topic", "cli-bad", "--partitions", "0"),
           "gregor: Error while executing topic command : The partitions must be greater than 0\n")
    failed(topics(node, "--create", "--topic", "cli-bad", "--replication-factor", "40000"),
           "gregor: Error while executing topic command : The replication factor must be between 1 and 32767 inclusive\n")
    failed(topics(node, "--create", "--topic", "cli-bad", "--config", "retention.ms"),
           "gregor: Error while executing topic command : requirement failed: Invalid topic config: all configs to be added must be in the format \"key=val\".\n")
    failed(topics(node, "--create", "--topic", "cli-bad", "--replica-assignment", "1:1"),
           "gregor: Error while executing topic command : Partition replica lists may not contain duplicate entries: 1\n")
    # The collision warning goes to stdout before the request is sent.
    failed(topics(node, "--create", "--topic", "cli.bad_name", "--replication-factor", "3"),
           "gregor: Error while executing topic command : Unable to replicate the partition 3 time(s): The target "
           "replication factor of 3 cannot be reached because only 1 broker(s) are registered.\n",
           stdout="WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could "
                  "collide. To avoid issues it is best to use either, but not both.\n")
    ok(topics(node, "--create", "--topic", "cli-assigned", "--replica-assignment", "1,1"), "Created topic cli-assigned.\n")
    assert "PartitionCount: 2\tReplicationFactor: 1\t" in topics(node, "--describe", "--topic", "cli-assigned").stdout


def test_usage_mistakes_print_the_usage(node):
    cases = [
        ([], "Command must include exactly one action: --list, --describe, --create, --alter or --delete"),
        (["--list", "--describe"], "Command must include exactly one action: --list, --describe, --create, --alter or --delete"),
        (["--create"], 'Missing required argument "[topic]"'),
        (["--alter", "--topic", "t"], 'Missing required argument "[partitions]"'),
        (["--list", "--config", "a=b"], 'Option "[config]" can\'t be used with option "[list]"'),
        (["--create", "--topic", "t", "--if-exists"], 'Option "[if-exists]" can\'t be used with option "[create]"'),
    ]
    for args, message in cases:
        done = topics(node, *args)
        assert done.returncode != 0 and done.stdout == "", (args, done)
        assert done.stderr.startswith(f"error: {message}\n"), (args, done.stderr)
        assert "Usage: gregor topics" in done.stderr, (args, done.stderr)
    unknown = topics(node, "--list", "--bogus")
    assert unknown.returncode != 0 and "Usage:" in unknown.stderr
    missing = subprocess.run([str(gregor_bin()), "topics", "--list"], capture_output=True, text=True, timeout=60,
                             env=dict(os.environ, RUST_LOG="error"))
    assert (missing.returncode, missing.stdout, missing.stderr) == (1, "", "gregor: --bootstrap-server must be specified\n")


def test_command_config_client_id(node, tmp_path):
    props = tmp_path / "admin.properties"
    props.write_text("client.id=cli-tool\n")
    ok(topics(node, "--create", "--topic", "cli-cc", "--command-config", str(props)), "Created topic cli-cc.\n")
    props.write_text("security.protocol=SASL_SSL\n")
    failed(topics(node, "--list", "--command-config", str(props)),
           f"gregor: Error while executing topic command : security.protocol=SASL_SSL in {props} is not supported by Gregor's tools (PLAINTEXT or SASL_PLAINTEXT only)\n")


def test_quota_violation_is_reported_not_retried(start_node):
    """KIP-599 with controller_mutation_rate=2 and a 10 x 1 s window: 20 tokens. The first
    30-partition topic drives the bucket to -10; the second is refused with
    THROTTLING_QUOTA_EXCEEDED, reported with the throttle time (about 5 s), exit 1, at once."""
    node = start_node({"auto.create.topics.enable": "false", "controller.quota.window.num": "10",
                       "controller.quota.window.size.seconds": "1"})
    env = dict(os.environ, RUST_LOG="error", NO_COLOR="1")
    alter = subprocess.run([str(gregor_bin()), "configs", "--bootstrap-server", node.bootstrap, "--alter", "--entity-type",
                            "users", "--entity-default", "--add-config", "controller_mutation_rate=2"],
                           capture_output=True, text=True, timeout=60, env=env)
    assert (alter.returncode, alter.stdout, alter.stderr) == (0, "Completed updating default config for users in the cluster.\n", "")
    ok(topics(node, "--create", "--topic", "quota-1", "--partitions", "30"), "Created topic quota-1.\n")
    second = topics(node, "--create", "--topic", "quota-2", "--partitions", "30")
    assert second.returncode == 1 and second.stdout == "", second
    match = re.fullmatch(r"gregor: Error while executing topic command : The throttling quota has been exceeded\. "
                         r"\(throttle time: (\d+) ms\)\n", second.stderr)
    assert match, second.stderr
    assert 4000 < int(match.group(1)) <= 5000
    # Nothing was created; alter and delete are refused the same way while the bucket is negative.
    assert topics(node, "--list").stdout == "quota-1\n"
    for args in (["--alter", "--topic", "quota-1", "--partitions", "31"], ["--delete", "--topic", "quota-1"]):
        done = topics(node, *args)
        assert done.returncode == 1 and "The throttling quota has been exceeded. (throttle time: " in done.stderr, done
    assert topics(node, "--list").stdout == "quota-1\n"


def test_a_reader_that_went_away_ends_the_tool_quietly(node):
    """`gregor ... | head` or `| grep -q`: the pipe's reader is gone before the tool writes.
    The tool ends at once without a panic's backtrace (Rust's `println!` panics on EPIPE)."""
    env = dict(os.environ, RUST_LOG="error", NO_COLOR="1")
    for args in (["topics", "--bootstrap-server", node.bootstrap, "--list"],
                 ["metadata-quorum", "--bootstrap-server", node.bootstrap, "describe", "--status"]):
        child = subprocess.Popen([str(gregor_bin()), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        child.stdout.close()
        stderr = child.stderr.read().decode()
        assert child.wait(timeout=60) == 0, stderr
        assert "panicked" not in stderr and stderr == "", stderr
