"""`gregor configs --entity-type users|clients|ips` (kafka-configs.sh's client quotas) run as a
subprocess against a real node: exact stdout, stderr and exit codes of --alter and --describe for
users, clients, user + client pairs, defaults and ips, and kafka-configs.sh's refusals. The
module's node (conftest `node`) is its own, so the quota entities seen here are these tests'."""

import os
import subprocess

from conftest import RawConn, gregor_bin
from kafka.protocol.admin import DescribeClientQuotasRequest, DescribeClientQuotasResponse


def configs(node, *args):
    env = dict(os.environ, RUST_LOG="error", NO_COLOR="1")
    return subprocess.run([str(gregor_bin()), "configs", "--bootstrap-server", node.bootstrap, *args],
                          capture_output=True, text=True, timeout=60, env=env)


def ok(done, stdout):
    assert (done.returncode, done.stdout, done.stderr) == (0, stdout, ""), done


def failed(done, stderr):
    assert done.returncode == 1 and (done.stdout, done.stderr) == ("", stderr), done


def usage_error(done, message):
    """A wrong command line: exit 1 (as Kafka's tools), clap's `error:` line, then the tool's usage."""
    assert done.returncode == 1 and done.stdout == "", done
    assert done.stderr.startswith(f"error: {message}\n\nUsage: gregor configs "), done.stderr


def test_user_quotas_alter_and_describe(node):
    ok(configs(node, "--alter", "--entity-type", "users", "--entity-name", "alice",
               "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048"),
       "Completed updating config for user alice.\n")
    # Keys in the Java admin client's HashMap order, values as Double.toString.
    ok(configs(node, "--describe", "--entity-type", "users", "--entity-name", "alice"),
       "Quota configs for user-principal 'alice' are consumer_byte_rate=2048.0, producer_byte_rate=1024.0\n")
    ok(configs(node, "--alter", "--entity-type", "users", "--entity-name", "alice",
               "--add-config", "producer_byte_rate=10485760", "--delete-config", "consumer_byte_rate"),
       "Completed updating config for user alice.\n")
    ok(configs(node, "--describe", "--entity-type", "users", "--entity-name", "alice"),
       "Quota configs for user-principal 'alice' are producer_byte_rate=1.048576E7\n")
    # The change is in the metadata image: a raw DescribeClientQuotas sees it.
    conn = RawConn(node.bootstrap)
    try:
        Comp = DescribeClientQuotasRequest.ComponentData
        resp = conn.send(DescribeClientQuotasRequest[1](components=[Comp(entity_type="user", match_type=0, match="alice")],
                                                        strict=True), DescribeClientQuotasResponse)
        assert [(v.key, v.value) for e in resp.entries for v in e.values] == [("producer_byte_rate", 10485760.0)]
    finally:
        conn.close()
    # A user without quotas prints nothing.
    ok(configs(node, "--describe", "--entity-type", "users", "--entity-name", "nobody"), "")


def test_defaults_clients_pairs_and_ips(node):
    ok(configs(node, "--alter", "--entity-type", "users", "--entity-default", "--add-config", "controller_mutation_rate=2"),
       "Completed updating default config for users in the cluster.\n")
    ok(configs(node, "--alter", "--entity-type", "clients", "--entity-name", "app-1", "--add-config", "request_percentage=50"),
       "Completed updating config for client app-1.\n")
    ok(configs(node, "--alter", "--entity-type", "clients", "--entity-default", "--add-config", "request_percentage=25.5"),
       "Completed updating default config for clients in the cluster.\n")
    # kafka-configs.sh names the first entity of a pair only.
    ok(configs(node, "--alter", "--entity-type", "users", "--entity-name", "bob", "--entity-type", "clients",
               "--entity-name", "app-2", "--add-config", "consumer_byte_rate=4096"),
       "Completed updating config for user bob.\n")
    ok(configs(node, "--alter", "--entity-type", "users", "--entity-default", "--entity-type", "clients",
               "--entity-name", "app-3", "--add-config", "producer_byte_rate=100"),
       "Completed updating default config for users in the cluster.\n")
    ok(configs(node, "--alter", "--entity-type", "ips", "--entity-name", "10.1.2.3", "--add-config", "connection_creation_rate=5"),
       "Completed updating config for ip 10.1.2.3.\n")
    ok(configs(node, "--alter", "--entity-type", "ips", "--entity-default", "--add-config", "connection_creation_rate=100"),
       "Completed updating default config for ips in the cluster.\n")

    ok(configs(node, "--describe", "--entity-type", "users", "--entity-default"),
       "Quota configs for the default user-principal are controller_mutation_rate=2.0\n")
    ok(configs(node, "--describe", "--entity-type", "clients", "--entity-name", "app-1"),
       "Quota configs for client-id 'app-1' are request_percentage=50.0\n")
    ok(configs(node, "--describe", "--entity-type", "clients", "--entity-default"),
       "Quota configs for the default client-id are request_percentage=25.5\n")
    ok(configs(node, "--describe", "--entity-type", "users", "--entity-name", "bob", "--entity-type", "clients",
               "--entity-name", "app-2"),
       "Quota configs for user-principal 'bob', client-id 'app-2' are consumer_byte_rate=4096.0\n")
    ok(configs(node, "--describe", "--entity-type", "users", "--entity-default", "--entity-type", "clients",
               "--entity-name", "app-3"),
       "Quota configs for the default user-principal, client-id 'app-3' are producer_byte_rate=100.0\n")
    # Every user + client pair: entities in the Java HashMap order of ClientQuotaEntity hashes.
    pairs = configs(node, "--describe", "--entity-type", "users", "--entity-type", "clients")
    assert pairs.returncode == 0 and pairs.stderr == ""
    assert sorted(pairs.stdout.splitlines()) == [
        "Quota configs for the default user-principal, client-id 'app-3' are producer_byte_rate=100.0",
        "Quota configs for user-principal 'bob', client-id 'app-2' are consumer_byte_rate=4096.0",
    ]
    ok(configs(node, "--describe", "--entity-type", "ips", "--entity-name", "10.1.2.3"),
       "Quota configs for ip '10.1.2.3' are connection_creation_rate=5.0\n")
    ok(configs(node, "--describe", "--entity-type", "ips", "--entity-default"),
       "Quota configs for the default ip are connection_creation_rate=100.0\n")


def test_kafka_configs_refusals(node):
    failed(configs(node, "--alter", "--entity-type", "users", "--entity-name", "carol", "--add-config", "retention.ms=1"),
           "gregor: Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. "
           "Unexpected config names: retention.ms\n")
    failed(configs(node, "--alter", "--entity-type", "clients", "--entity-name", "c", "--add-config", "SCRAM-SHA-256=x"),
           "gregor: Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected config names: SCRAM-SHA-256\n")
    failed(configs(node, "--alter", "--entity-type", "ips", "--entity-name", "10.0.0.9", "--add-config", "producer_byte_rate=1"),
           "gregor: Only connection quota configs can be added for 'ips' using --bootstrap-server. "
           "Unexpected config names: producer_byte_rate\n")
    failed(configs(node, "--alter", "--entity-type", "users", "--entity-name", "carol", "--delete-config", "producer_byte_rate"),
           "gregor: Invalid config(s): producer_byte_rate\n")
    failed(configs(node, "--alter", "--entity-type", "users", "--entity-name", "carol", "--add-config", "producer_byte_rate=fast"),
           "gregor: Cannot parse quota configuration value for producer_byte_rate: fast\n")
    # The broker's validation message.
    bad = configs(node, "--alter", "--entity-type", "users", "--entity-name", "carol", "--add-config", "producer_byte_rate=-1")
    assert bad.returncode != 0 and bad.stdout == "" and "producer_byte_rate" in bad.stderr, bad
    usage_error(configs(node, "--alter", "--entity-type", "users", "--entity-type", "clients", "--entity-name", "carol",
                   "--add-config", "producer_byte_rate=1"),
           "An entity name must be specified for every entity type")
    usage_error(configs(node, "--describe", "--entity-type", "users", "--entity-type", "ips"),
           "Only 'users' and 'clients' entity types may be specified together")
    usage_error(configs(node, "--describe", "--entity-type", "users", "--entity-type", "users"),
           "Duplicate entity type(s) specified: users")
    usage_error(configs(node, "--alter", "--entity-type", "users", "--add-config", "producer_byte_rate=1"),
           "An entity-name or default entity must be specified with --alter of users, clients, brokers or ips")
    usage_error(configs(node, "--describe", "--entity-type", "users", "--entity-name", "a", "--entity-name", "b"),
                "More entity names specified than entity types")
    usage = configs(node, "--describe", "--entity-type", "people")
    assert usage.returncode != 0 and usage.stderr.startswith("error: invalid value 'people' for '--entity-type")
    assert "possible values: topics, brokers, broker-loggers, groups, client-metrics, users, clients, ips" in usage.stderr
