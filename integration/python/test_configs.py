"""Dynamic configs and ListConfigResources (KIP-1142) against a real node: kafka-python 3.0.12
(describe_configs, alter_configs, list_config_resources, raw v0/v1 requests), confluent-kafka
2.16.1 (GROUP resources), the `gregor configs` / `gregor client-metrics` CLI output for the
KIP's examples, and the dual request metric of ListConfigResources v0."""

import os
import re
import subprocess

import pytest
from conftest import RawConn, gregor_bin, wait_for
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.protocol.admin import ListConfigResourcesRequest, ListConfigResourcesResponse


@pytest.fixture(scope="module")
def admin(node):
    client = KafkaAdminClient(bootstrap_servers=node.bootstrap, client_id="pytest-configs", request_timeout_ms=30000)
    yield client
    client.close()


def cli(node, *args):
    env = dict(os.environ, RUST_LOG="error", NO_COLOR="1")
    return subprocess.run([str(gregor_bin()), *args[:1], "--bootstrap-server", node.bootstrap, *args[1:]],
                          capture_output=True, text=True, timeout=60, env=env)


def test_kip_1142_group_example_with_the_cli(node):
    done = cli(node, "configs", "--alter", "--entity-type", "groups", "--entity-name", "G1",
               "--add-config", "consumer.heartbeat.interval.ms=10000")
    assert (done.returncode, done.stdout) == (0, "Completed updating config for group G1.\n"), done.stderr
    expected = ("Dynamic configs for group G1 are:\n"
                "  consumer.heartbeat.interval.ms=10000 sensitive=false "
                "synonyms={DYNAMIC_GROUP_CONFIG:consumer.heartbeat.interval.ms=10000}\n")
    every = cli(node, "configs", "--describe", "--entity-type", "groups")
    assert (every.returncode, every.stdout) == (0, expected), every.stderr
    one = cli(node, "configs", "--describe", "--entity-type", "groups", "--entity-name", "G1")
    assert (one.returncode, one.stdout) == (0, expected)
    # kafka-configs.sh's shorthand for the same entity.
    short = cli(node, "configs", "--describe", "--group", "G1")
    assert (short.returncode, short.stdout) == (0, expected), short.stderr
    missing = cli(node, "configs", "--describe", "--entity-type", "groups", "--entity-name", "DOESNOTEXIST")
    assert missing.stdout == "The group 'DOESNOTEXIST' doesn't exist and doesn't have dynamic config.\n"
    cm = cli(node, "configs", "--describe", "--entity-type", "client-metrics", "--entity-name", "DOESNOTEXIST")
    assert cm.stdout == "The client-metric 'DOESNOTEXIST' doesn't exist and doesn't have dynamic config.\n"
    tool = cli(node, "client-metrics", "--describe", "--name", "DOESNOTEXIST")
    assert tool.stdout == "The client-metric 'DOESNOTEXIST' doesn't exist and doesn't have dynamic config.\n"


def test_cli_errors_go_to_stderr_with_a_non_zero_exit(node):
    bad = cli(node, "configs", "--alter", "--entity-type", "groups", "--entity-name", "G9",
              "--add-config", "consumer.heartbeat.interval.ms=1")
    assert bad.returncode != 0 and bad.stdout == ""
    assert "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms" in bad.stderr
    usage = subprocess.run([str(gregor_bin()), "configs", "--describe"], capture_output=True, text=True)
    assert usage.returncode != 0 and "Usage:" in usage.stderr


def test_client_metrics_tool_lifecycle(node):
    out = cli(node, "client-metrics", "--alter", "--name", "cm-life", "--metrics", "org.apache.kafka.", "--interval", "1000")
    assert out.stdout == "Altered client metrics config for cm-life.\n", out.stderr
    assert "cm-life" in cli(node, "client-metrics", "--list").stdout.split("\n")
    described = cli(node, "client-metrics", "--describe", "--name", "cm-life").stdout
    assert described == "Client metrics configs for cm-life are:\n  metrics=org.apache.kafka.\n  interval.ms=1000\n  match=\n"
    assert cli(node, "client-metrics", "--delete", "--name", "cm-life").stdout == "Deleted client metrics config for cm-life.\n"
    assert "cm-life" not in cli(node, "client-metrics", "--list").stdout.split("\n")


def test_kafka_python_describe_alter_list(admin):
    admin.create_topics({"cfg-topic": {"num_partitions": 1, "replication_factor": 1}})
    admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "cfg-topic", {"retention.ms": "1000"})])
    admin.alter_configs([ConfigResource(ConfigResourceType.GROUP, "kp-group", {"consumer.session.timeout.ms": "50000"})])
    described = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "cfg-topic")])
    assert "retention.ms" in str(described) and "1000" in str(described)
    listed = admin.list_config_resources()
    assert "cfg-topic" in str(listed) and "kp-group" in str(listed)
    only_groups = admin.list_config_resources(["GROUP"])
    assert "kp-group" in str(only_groups) and "cfg-topic" not in str(only_groups)


def test_raw_list_config_resources_v0_and_v1(node, admin):
    admin.alter_configs([ConfigResource(ConfigResourceType.CLIENT_METRICS, "raw-sub", {"interval.ms": "2000"})])
    conn = RawConn(node.bootstrap)
    try:
        v0 = conn.send(ListConfigResourcesRequest[0](), ListConfigResourcesResponse)
        assert v0.error_code == 0
        assert "raw-sub" in str(v0)
        v1 = conn.send(ListConfigResourcesRequest[1](resource_types=[16, 64]), ListConfigResourcesResponse)
        assert v1.error_code == 35
    finally:
        conn.close()

    def counted():
        text = node.metrics_text()
        old = re.search(r'kafka_network_requestmetrics_requests_total\{[^}]*request="ListClientMetricsResources"[^}]*\} (\S+)', text)
        new = re.search(r'kafka_network_requestmetrics_requests_total\{[^}]*request="ListConfigResources"[^}]*version="0"[^}]*\} (\S+)', text)
        return old and new and float(old.group(1)) >= 1 and float(new.group(1)) >= 1 and text

    text = wait_for("ListConfigResources v0 counted under both names", counted)
    assert 'kafka_network_requestmetrics_errors_total{request="ListClientMetricsResources"' not in text


def test_confluent_kafka_group_configs(node):
    confluent = pytest.importorskip("confluent_kafka.admin")
    client = confluent.AdminClient({"bootstrap.servers": node.bootstrap})
    resource = confluent.ConfigResource(confluent.ResourceType.GROUP, "ck-group",
                                        incremental_configs=[confluent.ConfigEntry("consumer.heartbeat.interval.ms", "7000",
                                                                                   incremental_operation=confluent.AlterConfigOpType.SET)])
    for future in client.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    described = client.describe_configs([confluent.ConfigResource(confluent.ResourceType.GROUP, "ck-group")])
    for future in described.values():
        configs = future.result(timeout=30)
        assert configs["consumer.heartbeat.interval.ms"].value == "7000"
        assert configs["consumer.session.timeout.ms"].value == "45000"


def test_add_config_file_with_add_config_winning(node, admin, tmp_path):
    """kafka-configs.sh's `--add-config-file`: the file's pairs, with `--add-config` winning for a
    key in both; `--describe` refuses it."""
    from kafka.admin import NewTopic
    admin.create_topics([NewTopic("cfg-file", 1, 1)])
    props = tmp_path / "add.properties"
    props.write_text("# topic overrides\nretention.ms=1000\nsegment.bytes=1048576\n")
    done = cli(node, "configs", "--alter", "--entity-type", "topics", "--entity-name", "cfg-file",
               "--add-config-file", str(props), "--add-config", "retention.ms=2000")
    assert (done.returncode, done.stdout) == (0, "Completed updating config for topic cfg-file.\n"), done.stderr
    described = cli(node, "configs", "--describe", "--entity-type", "topics", "--entity-name", "cfg-file").stdout
    assert "  retention.ms=2000 sensitive=false" in described, described
    assert "  segment.bytes=1048576 sensitive=false" in described, described
    refused = cli(node, "configs", "--describe", "--entity-type", "topics", "--add-config-file", str(props))
    assert refused.returncode == 1 and "only valid with --alter" in refused.stderr
    missing = cli(node, "configs", "--alter", "--entity-type", "topics", "--entity-name", "cfg-file",
                  "--add-config-file", str(tmp_path / "nope.properties"))
    assert missing.returncode == 1 and "cannot read" in missing.stderr and missing.stdout == ""


def test_client_metrics_generate_name(node):
    out = cli(node, "client-metrics", "--alter", "--generate-name", "--metrics", "org.apache.kafka.")
    assert out.returncode == 0, out.stderr
    name = re.fullmatch(r"Altered client metrics config for ([A-Za-z0-9_-]{22})\.\n", out.stdout).group(1)
    assert name in cli(node, "client-metrics", "--list").stdout.split("\n")
    neither = cli(node, "client-metrics", "--alter", "--metrics", "x")
    assert neither.returncode == 1
    assert neither.stderr.startswith("error: One of --name or --generate-name must be specified with --alter.\n\n"
                                     "Usage: gregor client-metrics "), neither.stderr


def test_describe_all_of_any_group_shows_the_defaults(node):
    """kafka-configs.sh checks that a named entity exists only without --all: any group, live
    or not, configured or not, is described with every group config and its default."""
    out = cli(node, "configs", "--describe", "--entity-type", "groups", "--entity-name", "never-seen", "--all")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "All configs for group never-seen are:"
    assert ("  consumer.session.timeout.ms=45000 sensitive=false "
            "synonyms={DEFAULT_CONFIG:consumer.session.timeout.ms=45000}") in lines
    assert ("  consumer.heartbeat.interval.ms=5000 sensitive=false "
            "synonyms={DEFAULT_CONFIG:consumer.heartbeat.interval.ms=5000}") in lines
    # A topic that does not exist: the broker's error, no header (as kafka-configs.sh).
    topic = cli(node, "configs", "--describe", "--entity-type", "topics", "--entity-name", "no-such-topic", "--all")
    assert topic.returncode == 1 and topic.stdout == "", (topic.stdout, topic.stderr)


def test_group_configs_are_bounded_by_the_nodes_own_group_consumer_settings(start_node):
    """The controller validates group configs against its node's group.consumer.* bounds, as
    Kafka's controller does with its group coordinator config, not against Kafka's defaults."""
    wide = start_node({"group.consumer.max.session.timeout.ms": "120000"})
    inside = cli(wide, "configs", "--alter", "--entity-type", "groups", "--entity-name", "slow",
                 "--add-config", "consumer.session.timeout.ms=100000")
    assert inside.returncode == 0, inside.stderr
    outside = cli(wide, "configs", "--alter", "--entity-type", "groups", "--entity-name", "slow",
                  "--add-config", "consumer.session.timeout.ms=120001")
    assert outside.returncode == 1
    assert ("consumer.session.timeout.ms must be less than or equal to "
            "group.consumer.max.session.timeout.ms") in outside.stderr


NARROW_GROUP_CONSUMER = {
    "group.consumer.min.session.timeout.ms": "10000",
    "group.consumer.max.session.timeout.ms": "20000",
    "group.consumer.session.timeout.ms": "12000",
    "group.consumer.min.heartbeat.interval.ms": "1000",
    "group.consumer.heartbeat.interval.ms": "2000",
}


def test_unset_group_configs_are_described_with_the_nodes_group_consumer_values(start_node):
    """A group key the group does not set shows the broker's group.consumer.* value, still
    DEFAULT_CONFIG under the key's own name (Kafka's ConfigHelper: GroupConfig.fromProps over
    extractGroupConfigMap), not Kafka's hard-coded 45000 / 5000."""
    narrow = start_node(NARROW_GROUP_CONSUMER)
    out = cli(narrow, "configs", "--describe", "--entity-type", "groups", "--entity-name", "noconfig", "--all")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert ("  consumer.session.timeout.ms=12000 sensitive=false "
            "synonyms={DEFAULT_CONFIG:consumer.session.timeout.ms=12000}") in lines, lines
    assert ("  consumer.heartbeat.interval.ms=2000 sensitive=false "
            "synonyms={DEFAULT_CONFIG:consumer.heartbeat.interval.ms=2000}") in lines, lines
    assert ("  share.session.timeout.ms=45000 sensitive=false "
            "synonyms={DEFAULT_CONFIG:share.session.timeout.ms=45000}") in lines, lines


def test_group_configs_are_validated_over_the_controllers_group_consumer_values(start_node):
    """The controller checks a group's configs with the keys it does not set at its own
    group.consumer.* values (Kafka's GroupConfigManager.validate puts extractConsumerGroupConfigMap
    first): with bounds that exclude Kafka's 45000 / 5000, setting another key and deleting an
    override are accepted, and a heartbeat interval is compared with the node's session timeout."""
    narrow = start_node(NARROW_GROUP_CONSUMER)

    def alter(group, *args):
        return cli(narrow, "configs", "--alter", "--entity-type", "groups", "--entity-name", group, *args)

    fresh = alter("fresh", "--add-config", "consumer.heartbeat.interval.ms=3000")
    assert (fresh.returncode, fresh.stdout) == (0, "Completed updating config for group fresh.\n"), fresh.stderr
    assert alter("g", "--add-config", "consumer.session.timeout.ms=15000").returncode == 0
    deleted = alter("g", "--delete-config", "consumer.session.timeout.ms")
    assert (deleted.returncode, deleted.stdout) == (0, "Completed updating config for group g.\n"), deleted.stderr
    too_long = alter("h", "--add-config", "consumer.heartbeat.interval.ms=12000")
    assert too_long.returncode == 1
    assert "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms" in too_long.stderr
