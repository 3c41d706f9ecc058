"""The leader's side of replication at exact versions on one node: OffsetForLeaderEpoch from the
leader-epoch cache, and a follower's Fetch (replica id ≥ 0) answered with a diverging epoch when
the follower's log leaves the leader's history, with Kafka's codes for strangers and stale epochs.
"""

from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.offsets import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from test_data_plane import batch, create, fetch, list_offset, produce

NODE_ID = 1  # the `node` fixture's default node.id


def end_offset(conn, topic, leader_epoch, version, current_leader_epoch=-1):
    O = OffsetForLeaderEpochRequest[version]
    request = O(replica_id=-1, topics=[O.OffsetForLeaderTopic(topic=topic, partitions=[
        O.OffsetForLeaderTopic.OffsetForLeaderPartition(
            partition=0, current_leader_epoch=current_leader_epoch, leader_epoch=leader_epoch)])])
    (topic_response,) = conn.send(request, OffsetForLeaderEpochResponse).topics
    (partition,) = topic_response.partitions
    return partition.error_code, partition.leader_epoch, partition.end_offset


def replica_fetch(conn, topic, replica_id, fetch_offset, last_fetched_epoch, current_leader_epoch=-1):
    F = FetchRequest[12]
    request = F(
        replica_id=replica_id, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
        isolation_level=0, session_id=0, session_epoch=-1,
        topics=[F.FetchTopic(topic=topic, partitions=[F.FetchTopic.FetchPartition(
            partition=0, current_leader_epoch=current_leader_epoch, fetch_offset=fetch_offset,
            last_fetched_epoch=last_fetched_epoch, log_start_offset=-1, partition_max_bytes=1 << 20)])],
        forgotten_topics_data=[], rack_id="",
    )
    (topic_response,) = conn.send(request, FetchResponse).responses
    (partition,) = topic_response.partitions
    return partition


def test_offset_for_leader_epoch_follows_the_epoch_cache(node, raw):
    create(node, ("epochs", 1))
    conn = raw()
    for value in (b"a", b"b", b"c"):
        assert produce(conn, "epochs", 0, batch([(b"k", value, [], 7)])).error_code == 0
    for version in (2, 3, 4):
        # The latest epoch ends at the log end offset.
        assert end_offset(conn, "epochs", 0, version) == (0, 0, 3)
        # An epoch newer than the latest is unknown (Kafka's endOffsetFor).
        assert end_offset(conn, "epochs", 5, version) == (0, -1, -1)
        # Only -1 is undefined: -5 is older than every cached epoch, which the first one's start ends.
        assert end_offset(conn, "epochs", -5, version) == (0, -5, 0)
        assert end_offset(conn, "epochs", -1, version) == (0, -1, -1)
        assert end_offset(conn, "epochs", 0, version, current_leader_epoch=7)[0] == 75  # UNKNOWN_LEADER_EPOCH
        assert end_offset(conn, "no-such-topic", 0, version)[0] == 3  # UNKNOWN_TOPIC_OR_PARTITION


def test_only_minus_one_is_an_absent_epoch_outside_fetch(node, raw):
    """Kafka reads a ListOffsets or OffsetForLeaderEpoch current leader epoch of -5 as a stale
    epoch, FENCED_LEADER_EPOCH (only -1 is absent there), and a Fetch's as absent."""
    create(node, ("negative-epochs", 1))
    conn = raw()
    assert produce(conn, "negative-epochs", 0, batch([(b"k", b"v", [], 7)])).error_code == 0
    assert end_offset(conn, "negative-epochs", 0, 4, current_leader_epoch=-5)[0] == 74  # FENCED_LEADER_EPOCH
    assert list_offset(conn, "negative-epochs", 0, -1, current_leader_epoch=-5).error_code == 74
    assert fetch(conn, "negative-epochs", 0, 0, current_leader_epoch=-5)[1].error_code == 0


def test_a_follower_past_the_leaders_history_gets_a_diverging_epoch(node, raw):
    create(node, ("diverging", 1))
    conn = raw()
    for value in (b"a", b"b", b"c"):
        assert produce(conn, "diverging", 0, batch([(b"k", value, [], 7)])).error_code == 0
    # The follower claims offsets up to 5 in epoch 0, which ends at 3 here: truncate to 3.
    diverged = replica_fetch(conn, "diverging", NODE_ID, 5, 0)
    assert diverged.error_code == 0
    assert (diverged.diverging_epoch.epoch, diverged.diverging_epoch.end_offset) == (0, 3)
    assert not diverged.records
    # In the leader's history: records from its fetch offset, up to the log end.
    caught_up = replica_fetch(conn, "diverging", NODE_ID, 1, 0)
    assert caught_up.error_code == 0
    assert caught_up.diverging_epoch is None or caught_up.diverging_epoch.epoch == -1
    assert caught_up.records and caught_up.high_watermark == 3
    # A broker that is not a replica: UNKNOWN_LEADER_EPOCH with a current epoch, else NOT_LEADER_OR_FOLLOWER.
    assert replica_fetch(conn, "diverging", 7, 0, -1, current_leader_epoch=0).error_code == 75
    assert replica_fetch(conn, "diverging", 7, 0, -1).error_code == 6
    # A leader epoch newer than the leader's own: UNKNOWN_LEADER_EPOCH (the follower retries).
    assert replica_fetch(conn, "diverging", NODE_ID, 0, -1, current_leader_epoch=9).error_code == 75
