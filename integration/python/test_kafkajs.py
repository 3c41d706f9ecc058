"""kafkajs 2.2.4 (npm, pinned in integration/js/package-lock.json) against the node: the
non-flexible versions an old client sends (ApiVersions v2, Metadata v6, CreateTopics v3,
DeleteTopics v1, CreatePartitions v1; clients.md #8). `integration/run-tests.sh` installs it
with `npm ci`; without Node.js these tests are skipped.
"""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

JS = Path(__file__).resolve().parents[1] / "js"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(
    NODE is None or not (JS / "node_modules" / "kafkajs").is_dir(),
    reason="Node.js or kafkajs is missing (cd integration/js && npm ci)",
)


def run_js(script, *args, timeout=60):
    """Runs integration/js/`script` with Node.js; its completed process."""
    return subprocess.run([NODE, str(JS / script), *args], capture_output=True, text=True,
                          timeout=timeout)


def test_kafkajs_admin_round_trip(start_node):
    node = start_node({"auto.create.topics.enable": "false"})
    result = run_js("admin.js", node.bootstrap)
    assert result.returncode == 0, result.stderr + node.log()
    steps = {}
    for line in result.stdout.splitlines():
        entry = json.loads(line)
        steps[entry["step"]] = entry["value"]
    assert steps["create"] is True
    assert steps["create-again"] is False  # kafkajs: every topic already existed
    assert steps["list"] == ["js-a", "js-b"]
    assert steps["partitions"] == [[0, 1], [1, 1], [2, 1], [3, 1], [4, 1]]
    assert steps["cluster"] == {"controller": 1, "brokers": [1]}
    assert steps["list-after-delete"] == ["js-a"]
    assert steps["shrink"]["type"] == "INVALID_PARTITIONS"


def test_kafkajs_idempotent_producer_read_by_confluent(start_node):
    """kafkajs sends InitProducerId and Produce v7 (plain and gzip); confluent-kafka reads the
    records back at the offsets kafkajs was given."""
    from test_data_plane import confluent_read, create

    node = start_node({"auto.create.topics.enable": "false"})
    create(node, ("js-produce", 1))
    result = run_js("produce.js", node.bootstrap, "js-produce")
    assert result.returncode == 0, result.stderr + node.log()
    offsets = json.loads(result.stdout.strip().splitlines()[-1])
    assert offsets == {"plain": ["0"], "gzip": ["5"]}
    got = confluent_read(node, "js-produce", 0, 10)
    assert got == [
        (i, f"js-key-{i}".encode(), f"js-value-{i}".encode(), [("origin", b"kafkajs")], 1_700_000_000_000 + i)
        for i in range(10)
    ]


def test_kafkajs_reads_from_the_latest_offset(start_node):
    """kafkajs asks for LATEST with ListOffsets v3 (admin.fetchTopicOffsets, and a consumer in
    a new group with fromBeginning false): the answer carries no leader epoch at that version,
    and the consumer reads only what was sent after it joined."""
    from test_data_plane import create

    node = start_node({"auto.create.topics.enable": "false"})
    create(node, ("js-latest", 1))
    produced = run_js("produce.js", node.bootstrap, "js-latest")
    assert produced.returncode == 0, produced.stderr + node.log()
    result = run_js("latest.js", node.bootstrap, "js-latest", timeout=120)
    assert result.returncode == 0, result.stderr + node.log()
    got = json.loads(result.stdout.strip().splitlines()[-1])
    assert got["offsets"] == [{"partition": 0, "offset": "10", "high": "10", "low": "0"}]
    assert got["consumed"], got
    assert all(int(offset) >= 10 and value.startswith("after-") for offset, value in got["consumed"])
