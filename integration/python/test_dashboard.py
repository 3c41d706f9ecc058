"""The Grafana dashboard in `packaging/grafana/gregor-dashboard.json` uses only metrics Gregor
exports: every PromQL expression in it is parsed for its metric names, and each name must be a
metric family of a live node's scrape after the traffic the dashboard shows (requests, a
quota, produce and fetch, a batch over max.message.bytes), so the dashboard cannot drift from the
exporter; the rejected-bytes panel's query must select the series the rejected batch counted."""

import json
import os
import re
import subprocess
from pathlib import Path

from conftest import RawConn, gregor_bin, wait_for
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from test_data_plane import batch, list_offset, produce

DASHBOARD = Path(__file__).resolve().parents[2] / "packaging" / "grafana" / "gregor-dashboard.json"

# PromQL words that are not metric names: functions, aggregations, keywords, and the
# dashboard's own variables.
PROMQL_WORDS = {
    "sum", "max", "min", "avg", "count", "rate", "irate", "increase", "by", "without", "on",
    "ignoring", "group_left", "group_right", "histogram_quantile", "label_values", "and", "or",
    "unless", "offset", "bool", "topk", "bottomk", "abs", "clamp_min", "clamp_max",
}


def expressions(node):
    """Every `expr` and templating `query` string in the dashboard, recursively."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "query") and isinstance(value, str):
                yield value
            else:
                yield from expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from expressions(item)


def metric_names(expr):
    """The metric names of one PromQL expression: identifiers outside label matchers, range
    brackets, strings and grouping clauses that are not PromQL words."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)          # strings
    text = re.sub(r"\{[^}]*\}", "{}", text)                  # label matchers
    text = re.sub(r"\[[^\]]*\]", "[]", text)                 # range selectors
    text = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", text)  # grouping labels
    text = re.sub(r"\$\{?\w+\}?", "", text)                 # dashboard variables
    names = set()
    for word in re.findall(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        if word in PROMQL_WORDS or word in ("le", "instance", "prometheus"):
            continue
        names.add(word)
    return names


def family(name):
    """The family a sample name belongs to (a histogram's `_bucket`, `_sum`, `_count`)."""
    return re.sub(r"_(bucket|sum|count)$", "", name)


def test_the_parser_finds_the_metric_names():
    expr = ('histogram_quantile(0.99, sum by (request, le) (rate(kafka_network_requestmetrics_total_time_seconds_bucket'
            '{instance=~"$instance", request!="Fetch"}[$__rate_interval]))) / on (instance) gregor_build_info')
    assert metric_names(expr) == {"kafka_network_requestmetrics_total_time_seconds_bucket", "gregor_build_info"}


def test_every_dashboard_metric_is_exported(start_node, tmp_path):
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = list(expressions(dashboard))
    assert len(exprs) >= 15, exprs
    wanted = {}
    for expr in exprs:
        for name in metric_names(expr):
            wanted.setdefault(family(name), expr)
    assert len(wanted) >= 20, sorted(wanted)

    node = start_node()
    env = dict(os.environ, RUST_LOG="error")
    quota = subprocess.run([str(gregor_bin()), "configs", "--bootstrap-server", node.bootstrap, "--alter",
                            "--entity-type", "clients", "--entity-name", "dashboard",
                            "--add-config", "producer_byte_rate=10000000"],
                           capture_output=True, text=True, timeout=60, env=env)
    assert quota.returncode == 0, quota.stderr
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, client_id="dashboard", acks=1)
    for i in range(20):
        producer.send("dashboard-topic", f"record-{i}".encode(), partition=0)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, client_id="dashboard", consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("dashboard-topic", 0)])
    consumer.seek_to_beginning()
    assert len([r for _, r in zip(range(20), consumer)]) == 20
    consumer.close()
    # A batch over the topic's max.message.bytes: what the rejected-bytes panel shows.
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic("dashboard-rejected", 1, 1, topic_configs={"max.message.bytes": "500"})])
    finally:
        admin.close()
    conn = RawConn(node.bootstrap)
    wait_for("the log", lambda: list_offset(conn, "dashboard-rejected", 0, -1).error_code == 0)
    large = batch([(b"k", b"v" * 600, [], 1)])
    assert produce(conn, "dashboard-rejected", 0, large).error_code == 10  # MESSAGE_TOO_LARGE
    conn.close()

    def missing():
        text = node.metrics_text()
        exported = {family(line.split()[2]) for line in text.splitlines() if line.startswith("# TYPE ")}
        exported |= {family(re.split(r"[{ ]", line, 1)[0]) for line in text.splitlines()
                     if line and not line.startswith("#")}
        return {name: expr for name, expr in wanted.items() if name not in exported}

    wait_for("every dashboard metric in the scrape", lambda: not missing(), timeout=30)
    assert missing() == {}

    # The rejected-bytes panel selects the per-topic series (`topic!=""`, not the total), and
    # that series holds the rejected batch's bytes.
    (rejected,) = [e for e in exprs if "bytesrejected" in e]
    assert metric_names(rejected) == {"kafka_server_brokertopicmetrics_bytesrejected_total"}
    assert 'topic!=""' in rejected
    samples = dict(line.split() for line in node.metrics_text().splitlines()
                   if line.startswith("kafka_server_brokertopicmetrics_bytesrejected_total{"))
    assert {name: float(value) for name, value in samples.items() if float(value)} == {
        'kafka_server_brokertopicmetrics_bytesrejected_total{topic="dashboard-rejected"}': len(large)}
