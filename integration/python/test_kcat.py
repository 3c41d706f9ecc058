"""kcat 1.7.1 (Debian's, on librdkafka 2.0.2): Metadata v4 through `kcat -L` (clients.md #9).

`.ci/run` installs kcat; on a machine without it these tests are skipped with the command to
install it.
"""

import json
import shutil
import subprocess

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

KCAT = shutil.which("kcat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat is not installed (apt-get install kcat)")


def kcat_metadata(node, *args):
    out = subprocess.run(
        [KCAT, "-b", node.bootstrap, "-L", "-J", *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return json.loads(out.stdout)


def test_kcat_lists_brokers_and_topics(start_node):
    node = start_node({"auto.create.topics.enable": "false"})
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic("kcat-a", 3, 1), NewTopic("kcat-b", 1, 1)])
    finally:
        admin.close()

    md = kcat_metadata(node)
    assert md["controllerid"] == 1
    assert md["brokers"] == [{"id": 1, "name": node.bootstrap}]
    topics = {t["topic"]: t for t in md["topics"]}
    assert set(topics) == {"kcat-a", "kcat-b"}
    assert [p["partition"] for p in topics["kcat-a"]["partitions"]] == [0, 1, 2]
    for partition in topics["kcat-a"]["partitions"]:
        assert partition["leader"] == 1
        assert partition["replicas"] == [{"id": 1}]
        assert partition["isrs"] == [{"id": 1}]


def test_kcat_asks_for_one_topic(start_node):
    node = start_node({"auto.create.topics.enable": "false"})
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.create_topics([NewTopic("kcat-one", 2, 1), NewTopic("kcat-other", 1, 1)])
    finally:
        admin.close()

    md = kcat_metadata(node, "-t", "kcat-one")
    assert [t["topic"] for t in md["topics"]] == ["kcat-one"]
    assert len(md["topics"][0]["partitions"]) == 2

    # A missing topic, auto-creation off: librdkafka reports Kafka's UNKNOWN_TOPIC_OR_PARTITION.
    md = kcat_metadata(node, "-t", "kcat-missing")
    (missing,) = md["topics"]
    assert missing["topic"] == "kcat-missing"
    assert "Unknown topic or partition" in missing.get("error", ""), missing
