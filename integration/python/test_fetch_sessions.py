"""Fetch sessions (KIP-227) end to end.

kafka-python's consumer opens a session with a full fetch and then sends incremental fetches that
name only what changed; the node counts each in `gregor_fetch_session_incremental_fetches_total`,
so the test can tell that sessions really ran while every record still arrived. Raw requests
check the session protocol itself: omitted partitions, forgotten ones, closing, and the error
codes. (librdkafka and kafkajs do not use fetch sessions; they send sessionless fetches.)
"""

import threading
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from conftest import RawConn, wait_for
from test_data_plane import batch, create, list_offset, produce, topic_counts

INCREMENTAL = "gregor_fetch_session_incremental_fetches_total"
SESSIONS = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
PARTITIONS_CACHED = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"
EVICTIONS = "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total"


def metric(node, name):
    for line in node.metrics_text().splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    return 0.0


def session_fetch(conn, session_id, epoch, partitions, forgotten=(), version=12, topic_id=None,
                  max_wait_ms=0):
    """A Fetch at `version` of session (`session_id`, `epoch`); `partitions` are
    (topic, partition, offset), `forgotten` (topic, [partitions])."""
    F = FetchRequest[version]
    by_topic = {}
    for topic, partition, offset in partitions:
        by_topic.setdefault(topic, []).append(F.FetchTopic.FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=1 << 20))
    key = (lambda topic: {"topic_id": topic_id}) if version >= 13 else (lambda topic: {"topic": topic})
    request = F(
        replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
        session_id=session_id, session_epoch=epoch,
        topics=[F.FetchTopic(partitions=parts, **key(topic)) for topic, parts in by_topic.items()],
        forgotten_topics_data=[F.ForgottenTopic(partitions=list(parts), **key(topic))
                               for topic, parts in forgotten],
        rack_id="",
    )
    return conn.send(request, FetchResponse)


def partitions_of(response):
    return sorted(p.partition_index for t in response.responses for p in t.partitions)


def test_kafka_python_consumer_reads_everything_through_incremental_sessions(node):
    topic = "fs-consume"
    create(node, (topic, 3))
    for partition in range(3):
        wait_for("the logs", lambda: list_offset(RawConn(node.bootstrap), topic, partition, -1).error_code == 0)
    before = metric(node, INCREMENTAL)
    per_partition = 40
    producer = KafkaProducer(bootstrap_servers=node.bootstrap, linger_ms=0)

    def write():
        # Records keep arriving while the consumer fetches, so incremental responses carry
        # some partitions and omit others.
        for i in range(per_partition):
            for partition in range(3):
                producer.send(topic, key=f"{partition}".encode(), value=f"{partition}-{i}".encode(),
                              partition=partition).get(timeout=30)
            time.sleep(0.01)

    writer = threading.Thread(target=write)
    writer.start()
    consumer = KafkaConsumer(bootstrap_servers=node.bootstrap, group_id=None, enable_auto_commit=False,
                             consumer_timeout_ms=20000, fetch_max_wait_ms=100)
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(3)])
        consumer.seek_to_beginning()
        seen = {p: [] for p in range(3)}
        for message in consumer:
            seen[message.partition].append((message.offset, message.value))
            if sum(len(v) for v in seen.values()) == 3 * per_partition:
                break
        # Checked while the consumer still holds its session.
        assert metric(node, SESSIONS) >= 1
        assert metric(node, PARTITIONS_CACHED) >= 3
    finally:
        writer.join(timeout=60)
        consumer.close()
        producer.close()
    for partition in range(3):
        assert seen[partition] == [(i, f"{partition}-{i}".encode()) for i in range(per_partition)], partition
    incremental = metric(node, INCREMENTAL) - before
    assert incremental >= 10, f"only {incremental} incremental fetches: the consumer did not use its session"


def test_a_sessions_unanswered_partitions_count_as_fetch_requests(node):
    """Kafka's `fetchMessages` counts TotalFetchRequestsPerSec for every partition an
    incremental fetch reads (its whole session), those its answer leaves out included."""
    topic = "fs-metrics"
    create(node, (topic, 2))
    conn = RawConn(node.bootstrap)
    for partition in range(2):
        wait_for("the logs", lambda: list_offset(conn, topic, partition, -1).error_code == 0)

    def requests():
        return topic_counts(node.metrics_text(), topic)["totalfetchrequests"]

    full = session_fetch(conn, 0, 0, [(topic, 0, 0), (topic, 1, 0)])
    assert (full.error_code, partitions_of(full)) == (0, [0, 1])
    assert requests() == 2
    quiet = session_fetch(conn, full.session_id, 1, [])
    assert (quiet.error_code, partitions_of(quiet)) == (0, [])
    assert requests() == 4


def test_incremental_fetches_omit_unchanged_partitions(node):
    topic = "fs-raw"
    create(node, (topic, 2))
    conn = RawConn(node.bootstrap)
    for partition in range(2):
        wait_for("the logs", lambda: list_offset(conn, topic, partition, -1).error_code == 0)
    assert produce(conn, topic, 0, batch([(b"k", b"first", [], 1)])).error_code == 0

    full = session_fetch(conn, 0, 0, [(topic, 0, 0), (topic, 1, 0)])
    assert full.error_code == 0
    assert partitions_of(full) == [0, 1], "a full fetch answers every partition"
    session = full.session_id
    assert session > 0

    # The consumer moves partition 0 past its record; nothing else is new, so nothing is sent.
    quiet = session_fetch(conn, session, 1, [(topic, 0, 1)])
    assert (quiet.error_code, quiet.session_id, partitions_of(quiet)) == (0, session, [])

    # New records on partition 1 only: partition 0 (unchanged) is left out.
    assert produce(conn, topic, 1, batch([(b"k", b"second", [], 2)])).error_code == 0
    news = session_fetch(conn, session, 2, [])
    assert partitions_of(news) == [1]
    (partition,) = news.responses[0].partitions
    assert (partition.high_watermark, b"second" in bytes(partition.records)) == (1, True)

    # The consumer moves partition 1 on (named again with its new offset); still nothing for 0.
    moved = session_fetch(conn, session, 3, [(topic, 1, 1)])
    assert partitions_of(moved) == []

    # A long poll on the session is woken by an append to any of its partitions.
    result = {}
    waiter = threading.Thread(target=lambda: result.update(
        r=session_fetch(RawConn(node.bootstrap), session, 4, [], max_wait_ms=60000)))
    waiter.start()
    assert produce(conn, topic, 0, batch([(b"k", b"third", [], 3)])).error_code == 0
    waiter.join(timeout=30)
    assert not waiter.is_alive()
    assert partitions_of(result["r"]) == [0]

    # Forgetting partition 0 leaves partition 1 alone in the session.
    assert produce(conn, topic, 0, batch([(b"k", b"fourth", [], 4)])).error_code == 0
    assert partitions_of(session_fetch(conn, session, 5, [], forgotten=[(topic, [0])])) == []

    # Errors are top-level, carry no partitions and leave the session as it was.
    wrong_epoch = session_fetch(conn, session, 9, [])
    assert (wrong_epoch.error_code, wrong_epoch.session_id, partitions_of(wrong_epoch)) == (71, 0, [])
    unknown = session_fetch(conn, session + 1, 1, [])
    assert (unknown.error_code, unknown.session_id) == (70, 0)
    # A session opened by names cannot be used by topic id (v13+).
    metadata = conn.send(MetadataRequest[12](topics=[MetadataRequest[12].MetadataRequestTopic(topic_id=None, name=topic)],
                                             allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False), MetadataResponse)
    topic_id = metadata.topics[0].topic_id
    by_id = session_fetch(conn, session, 6, [], version=13, topic_id=topic_id)
    assert by_id.error_code == 106

    # Epoch −1 closes the session; it is gone afterwards.
    closed = session_fetch(conn, session, -1, [(topic, 0, 0)])
    assert (closed.error_code, closed.session_id, partitions_of(closed)) == (0, 0, [0])
    assert session_fetch(conn, session, 6, []).error_code == 70
    conn.close()


def topic_id_of(conn, topic):
    M = MetadataRequest[12]
    answer = conn.send(M(topics=[M.MetadataRequestTopic(topic_id=None, name=topic)], allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False), MetadataResponse)
    return answer.topics[0].topic_id


def codes_of(response):
    return [p.error_code for t in response.responses for p in t.partitions]


def test_a_session_by_topic_id_keeps_the_name_its_topic_had(node):
    """Kafka's session remembers the name a topic id had when it joined: once that topic is
    deleted its partitions are UNKNOWN_TOPIC_OR_PARTITION, and once a topic of that name is
    created again (with one partition of the two) partition 0 is INCONSISTENT_TOPIC_ID, counted
    as a fetch of the topic, and partition 1, missing from the metadata, still
    UNKNOWN_TOPIC_OR_PARTITION, counted nowhere; a fetch outside the session names the id alone
    (UNKNOWN_TOPIC_ID)."""
    topic = "fs-recreated"
    create(node, (topic, 2))
    conn = RawConn(node.bootstrap)
    for partition in (0, 1):
        wait_for("the log", lambda: list_offset(conn, topic, partition, -1).error_code == 0)
    assert produce(conn, topic, 0, batch([(b"k", b"v", [], 1)])).error_code == 0
    old_id = topic_id_of(conn, topic)
    full = session_fetch(conn, 0, 0, [(topic, 0, 0), (topic, 1, 0)], version=13, topic_id=old_id)
    assert (full.error_code, codes_of(full)) == (0, [0, 0])
    session = full.session_id

    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        admin.delete_topics([topic])
        wait_for("the topic gone", lambda: topic_id_of(conn, topic) != old_id)
        gone = session_fetch(conn, session, 1, [], version=13)
        assert (gone.error_code, codes_of(gone)) == (0, [3, 3])
        outside = session_fetch(conn, 0, -1, [(topic, 0, 0)], version=13, topic_id=old_id)
        assert codes_of(outside) == [100]

        admin.create_topics([NewTopic(topic, 1, 1)])
        wait_for("the new topic's log", lambda: list_offset(conn, topic, 0, -1).error_code == 0)
        before = node.metrics_text()
        again = session_fetch(conn, session, 2, [], version=13)
        assert (again.error_code, codes_of(again)) == (0, [103, 3])
        # Kafka's `fetchMessages` marks TotalFetchRequestsPerSec of the session's topic name (the
        # new topic's series, from 0) and of all topics for the partition `readFromLog` refused
        # with InconsistentTopicIdException, an error it expects: no failed fetch.
        after = node.metrics_text()
        fetches = lambda counts: (counts["totalfetchrequests"], counts["failedfetchrequests"])
        assert fetches(topic_counts(after, topic)) == (1, 0), after
        assert fetches(topic_counts(after)) == tuple(
            a + b for a, b in zip(fetches(topic_counts(before)), (1, 0))), (before, after)
    finally:
        admin.close()
    conn.close()


def test_the_cache_holds_max_incremental_fetch_session_cache_slots(start_node):
    # 8 slots: one session in each of the 8 shards.
    node = start_node({"max.incremental.fetch.session.cache.slots": "8"})
    # As Kafka's cache, the three series exist at 0 before any session.
    series = {line.split()[0]: float(line.split()[1]) for line in node.metrics_text().splitlines()
              if line.strip() and not line.startswith("#") and line.split()[0] in (SESSIONS, PARTITIONS_CACHED, EVICTIONS)}
    assert series == {SESSIONS: 0, PARTITIONS_CACHED: 0, EVICTIONS: 0}
    create(node, ("fs-slots", 1))
    conn = RawConn(node.bootstrap)
    wait_for("the log", lambda: list_offset(conn, "fs-slots", 0, -1).error_code == 0)
    ids = [session_fetch(conn, 0, 0, [("fs-slots", 0, 0)]).session_id for _ in range(9)]
    assert all(i > 0 for i in ids[:8]) and len(set(ids[:8])) == 8, ids
    # The ninth lands on a shard whose session is young: no eviction, no session.
    assert ids[8] == 0
    assert metric(node, SESSIONS) == 8
    assert metric(node, PARTITIONS_CACHED) == 8
    assert metric(node, EVICTIONS) == 0
    # Every session works independently.
    for session in ids[:8]:
        assert session_fetch(conn, session, 1, []).error_code == 0
    conn.close()

    none = start_node({"max.incremental.fetch.session.cache.slots": "0"})
    create(none, ("fs-none", 1))
    conn = RawConn(none.bootstrap)
    wait_for("the log", lambda: list_offset(conn, "fs-none", 0, -1).error_code == 0)
    assert session_fetch(conn, 0, 0, [("fs-none", 0, 0)]).session_id == 0
    conn.close()
