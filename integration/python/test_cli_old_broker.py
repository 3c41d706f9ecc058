"""`gregor configs` and `gregor client-metrics` against a broker older than Kafka 4.1, one that knows
api 74 only as ListClientMetricsResources v0 (Kafka 3.7-4.0; `old_broker.OldBroker`, a fake served
from this process): with ApiVersions they fall back to v0 when only client-metrics are asked for
(and send it without the v1-only ResourceTypes field, checked on the wire), and otherwise report
that the broker is too old on stderr with a non-zero exit, without sending api 74 at all."""

import os
import subprocess

import pytest
from conftest import gregor_bin
from old_broker import OldBroker

LIST_CONFIG_RESOURCES = 74
TOO_OLD = ("gregor: The broker is too old: The v0 ListConfigResources only supports CLIENT_METRICS "
           "(listing other resources needs Kafka 4.1+)\n")
SUBSCRIPTIONS = {
    "sub-producers": {"metrics": "org.apache.kafka.producer.", "interval.ms": "1000"},
    "sub-all": {"metrics": "*", "interval.ms": "5000", "match": "client_id=app-.*"},
}


@pytest.fixture
def old_broker():
    brokers = []

    def start(**kwargs):
        broker = OldBroker(**kwargs)
        brokers.append(broker)
        return broker

    yield start
    for broker in brokers:
        broker.close()
    for broker in brokers:
        assert list(broker.errors) == [], "the fake broker refused a request"


def run(tool, broker, *args):
    env = dict(os.environ, RUST_LOG="error", NO_COLOR="1")
    return subprocess.run([str(gregor_bin()), tool, "--bootstrap-server", broker.bootstrap, *args],
                          capture_output=True, text=True, timeout=60, env=env)


def ok(done, stdout):
    assert (done.returncode, done.stdout, done.stderr) == (0, stdout, ""), done


def failed(done, stderr):
    assert done.returncode != 0 and (done.stdout, done.stderr) == ("", stderr), done


def v0_only(broker, count):
    """Exactly `count` api 74 requests reached the broker, each at v0 (so without ResourceTypes)."""
    sent = broker.requests_for(LIST_CONFIG_RESOURCES)
    assert [version for version, _ in sent] == [0] * count, sent
    for _, request in sent:
        assert request.to_dict() == {}, request


def test_client_metrics_list_falls_back_to_v0(old_broker):
    broker = old_broker(client_metrics=SUBSCRIPTIONS)
    ok(run("client-metrics", broker, "--list"), "sub-producers\nsub-all\n")
    v0_only(broker, 1)
    # ApiVersions first (at v3, which the old broker supports), then the v0 listing.
    assert [(k, v) for k, v, *_ in broker.received] == [(18, 3), (74, 0)]


def test_configs_describe_groups_reports_the_broker_is_too_old(old_broker):
    broker = old_broker(client_metrics=SUBSCRIPTIONS, groups=["existing-group"])
    failed(run("configs", broker, "--describe", "--entity-type", "groups"), TOO_OLD)
    failed(run("configs", broker, "--describe", "--entity-type", "groups", "--entity-name", "G1"), TOO_OLD)
    # Refused before sending: listing groups would need v1, which the broker does not have.
    v0_only(broker, 0)


def test_configs_describe_client_metrics_uses_v0(old_broker):
    broker = old_broker(client_metrics=SUBSCRIPTIONS)
    ok(run("configs", broker, "--describe", "--entity-type", "client-metrics", "--entity-name", "sub-all"),
       "Dynamic configs for client-metric sub-all are:\n"
       "  interval.ms=5000 sensitive=false synonyms={}\n"
       "  match=client_id=app-.* sensitive=false synonyms={}\n"
       "  metrics=* sensitive=false synonyms={}\n")
    ok(run("configs", broker, "--describe", "--entity-type", "client-metrics", "--entity-name", "nope"),
       "The client-metric 'nope' doesn't exist and doesn't have dynamic config.\n")
    ok(run("configs", broker, "--describe", "--entity-type", "client-metrics"),
       "Dynamic configs for client-metric sub-producers are:\n"
       "  interval.ms=1000 sensitive=false synonyms={}\n"
       "  metrics=org.apache.kafka.producer. sensitive=false synonyms={}\n"
       "Dynamic configs for client-metric sub-all are:\n"
       "  interval.ms=5000 sensitive=false synonyms={}\n"
       "  match=client_id=app-.* sensitive=false synonyms={}\n"
       "  metrics=* sensitive=false synonyms={}\n")
    v0_only(broker, 3)


def test_client_metrics_lifecycle_on_an_old_broker(old_broker):
    broker = old_broker()
    ok(run("client-metrics", broker, "--list"), "\n")  # kafka-client-metrics.sh prints the empty join
    ok(run("client-metrics", broker, "--alter", "--name", "sub1", "--metrics", "org.apache.kafka.consumer.",
           "--interval", "2000"), "Altered client metrics config for sub1.\n")
    assert broker.client_metrics == {"sub1": {"interval.ms": "2000", "metrics": "org.apache.kafka.consumer."}}
    ok(run("client-metrics", broker, "--describe", "--name", "sub1"),
       "Client metrics configs for sub1 are:\n  interval.ms=2000\n  metrics=org.apache.kafka.consumer.\n")
    ok(run("client-metrics", broker, "--describe", "--name", "nope"),
       "The client-metric 'nope' doesn't exist and doesn't have dynamic config.\n")
    ok(run("client-metrics", broker, "--list"), "sub1\n")
    ok(run("client-metrics", broker, "--delete", "--name", "sub1"), "Deleted client metrics config for sub1.\n")
    ok(run("client-metrics", broker, "--list"), "\n")
    v0_only(broker, 5)


def test_broker_without_api_74_is_reported(old_broker):
    """A broker older than 3.7 has no api 74 at all."""
    broker = old_broker(client_metrics=SUBSCRIPTIONS, without=[LIST_CONFIG_RESOURCES])
    failed(run("client-metrics", broker, "--list"),
           "gregor: Error while executing client metrics command : "
           "The broker does not support ListConfigResources (Kafka 3.7+ is needed)\n")
    failed(run("configs", broker, "--describe", "--entity-type", "client-metrics", "--entity-name", "sub-all"),
           "gregor: The broker does not support ListConfigResources (Kafka 3.7+ is needed)\n")
    v0_only(broker, 0)


def test_command_config_sets_the_client_id_of_every_request(old_broker, tmp_path):
    """`--command-config` of configs and client-metrics: `client.id` reaches every request header
    after ApiVersions (checked on the wire); a security protocol the tools cannot speak is refused
    before connecting."""
    broker = old_broker(client_metrics=SUBSCRIPTIONS)
    props = tmp_path / "admin.properties"
    props.write_text("client.id=ops-console\n")
    run("client-metrics", broker, "--list", "--command-config", str(props))
    run("configs", broker, "--describe", "--entity-type", "client-metrics", "--entity-name", "sub-all",
        "--command-config", str(props))
    after_negotiation = [r.client_id for r in broker.received if r.api_key != 18]
    assert after_negotiation and set(after_negotiation) == {"ops-console"}, broker.received
    props.write_text("security.protocol=SASL_SSL\n")
    before = len(broker.received)
    failed(run("configs", broker, "--describe", "--entity-type", "client-metrics", "--command-config", str(props)),
           f"gregor: security.protocol=SASL_SSL in {props} is not supported by Gregor's tools (PLAINTEXT or SASL_PLAINTEXT only)\n")
    assert len(broker.received) == before, "nothing is sent with a refused command config"
