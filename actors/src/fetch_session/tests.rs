use bytes::Bytes;
use kafka_protocol::messages::fetch_request::ForgottenTopic;
use kafka_protocol::messages::fetch_response::PartitionData;

use super::*;

const TOPIC: &str = "t";

fn name(topic: &str) -> TopicName {
    TopicName(StrBytes::from_string(topic.to_owned()))
}

fn wanted(partition: i32, fetch_offset: i64) -> FetchPartition {
    FetchPartition::default()
        .with_partition(partition)
        .with_fetch_offset(fetch_offset)
        .with_partition_max_bytes(1024)
}

/// A Fetch request (named topics) of session `id` at `epoch` for `partitions` of [`TOPIC`].
fn request(id: i32, epoch: i32, partitions: &[(i32, i64)]) -> FetchRequest {
    let topics = if partitions.is_empty() {
        Vec::new()
    } else {
        vec![FetchTopic::default()
            .with_topic(name(TOPIC))
            .with_partitions(
                partitions
                    .iter()
                    .map(|&(partition, offset)| wanted(partition, offset))
                    .collect(),
            )]
    };
    FetchRequest::default()
        .with_session_id(id)
        .with_session_epoch(epoch)
        .with_topics(topics)
}

/// A response partition with high watermark `hw` and `records` bytes of records.
fn answered(partition: i32, hw: i64, records: usize) -> PartitionData {
    PartitionData::default()
        .with_partition_index(partition)
        .with_high_watermark(hw)
        .with_log_start_offset(0)
        .with_records(Some(Bytes::from(vec![0u8; records])))
}

fn response(partitions: Vec<PartitionData>) -> Vec<FetchableTopicResponse> {
    vec![FetchableTopicResponse::default()
        .with_topic(name(TOPIC))
        .with_partitions(partitions)]
}

fn indexes(topics: &[FetchableTopicResponse]) -> Vec<i32> {
    topics
        .iter()
        .flat_map(|t| &t.partitions)
        .map(|p| p.partition_index)
        .collect()
}

fn read_partitions(begun: &Begun) -> Vec<(i32, i64)> {
    begun
        .topics
        .iter()
        .flatten()
        .flat_map(|t| &t.partitions)
        .map(|p| (p.partition, p.fetch_offset))
        .collect()
}

/// Opens a session over partitions 0, 1, 2 (high watermarks 10) at `now`; its id.
fn open(cache: &FetchSessionCache, now: u64) -> i32 {
    let full = request(0, 0, &[(0, 0), (1, 0), (2, 0)]);
    let begun = cache.begin_at(12, &full, false, now).unwrap();
    assert_eq!(
        begun.context,
        FetchContext::Full {
            privileged: false,
            uses_topic_ids: false
        }
    );
    let mut topics = response(vec![
        answered(0, 10, 0),
        answered(1, 10, 0),
        answered(2, 10, 0),
    ]);
    let id = cache
        .respond_at(&begun.context, &full, &mut topics, true, now)
        .unwrap();
    assert_eq!(
        indexes(&topics),
        [0, 1, 2],
        "a full response carries every partition"
    );
    id
}

#[test]
fn epochs_wrap_to_one_and_final_stays_final() {
    assert_eq!(next_epoch(0), 1);
    assert_eq!(next_epoch(41), 42);
    assert_eq!(next_epoch(i32::MAX), 1);
    assert_eq!(next_epoch(-1), -1);
}

#[test]
fn sessionless_fetches_open_no_session() {
    let cache = FetchSessionCache::new(DEFAULT_SLOTS);
    for (version, epoch) in [(6, 0), (12, -1)] {
        let req = request(0, epoch, &[(0, 0)]);
        let begun = cache.begin_at(version, &req, false, 0).unwrap();
        assert_eq!(begun.context, FetchContext::Sessionless);
        let mut topics = response(vec![answered(0, 10, 0)]);
        assert_eq!(
            cache.respond_at(&begun.context, &req, &mut topics, true, 0),
            Ok(0)
        );
    }
    assert!(cache.is_empty());
}

#[test]
fn incremental_fetch_reads_the_session_and_sends_only_changes() {
    let cache = FetchSessionCache::new(DEFAULT_SLOTS);
    let id = open(&cache, 0);
    assert!(id > 0);
    // Epoch 1 moves partition 1 on; partitions 0 and 2 come from the session.
    let req = request(id, 1, &[(1, 5)]);
    let begun = cache.begin_at(12, &req, false, 1).unwrap();
    assert_eq!(
        begun.context,
        FetchContext::Incremental {
            id,
            expected_epoch: 2
        }
    );
    assert_eq!(read_partitions(&begun), [(0, 0), (1, 5), (2, 0)]);
    // Partition 0 unchanged (omitted), 1 returned records, 2's high watermark moved.
    let mut topics = response(vec![
        answered(0, 10, 0),
        answered(1, 10, 70),
        answered(2, 12, 0),
    ]);
    let mut dry_run = topics.clone();
    assert_eq!(
        cache.respond_at(&begun.context, &req, &mut dry_run, false, 1),
        Ok(id)
    );
    assert_eq!(indexes(&dry_run), [1, 2]);
    assert_eq!(
        cache.respond_at(&begun.context, &req, &mut topics, true, 1),
        Ok(id)
    );
    assert_eq!(indexes(&topics), [1, 2]);
    // Partition 1 returned records, so it is read last from now on; nothing changed since.
    let req = request(id, 2, &[]);
    let begun = cache.begin_at(12, &req, false, 2).unwrap();
    assert_eq!(read_partitions(&begun), [(0, 0), (2, 0), (1, 5)]);
    let mut topics = response(vec![
        answered(0, 10, 0),
        answered(2, 12, 0),
        answered(1, 10, 0),
    ]);
    cache
        .respond_at(&begun.context, &req, &mut topics, true, 2)
        .unwrap();
    assert!(topics.is_empty(), "nothing changed: {topics:?}");
}

#[test]
fn a_dry_run_leaves_the_session_as_it_was() {
    let cache = FetchSessionCache::new(DEFAULT_SLOTS);
    let id = open(&cache, 0);
    let req = request(id, 1, &[]);
    let begun = cache.begin_at(12, &req, false, 1).unwrap();
    let mut topics = response(vec![
        answered(0, 11, 0),
        answered(1, 10, 0),
        answered(2, 10, 0),
    ]);
    cache
        .respond_at(&begun.context, &req, &mut topics, false, 1)
        .unwrap();
    // A throttled answer was sent instead: the next fetch still reports partition 0's move.
    let req = request(id, 2, &[]);
    let begun = cache.begin_at(12, &req, false, 2).unwrap();
    let mut topics = response(vec![
        answered(0, 11, 0),
        answered(1, 10, 0),
        answered(2, 10, 0),
    ]);
    cache
        .respond_at(&begun.context, &req, &mut topics, true, 2)
        .unwrap();
    assert_eq!(indexes(&topics), [0]);
}

#[test]
fn errors_are_always_sent_and_resent_once_cleared() {
    let cache = FetchSessionCache::new(DEFAULT_SLOTS);
    let id = open(&cache, 0);
    let mut epoch = 1;
    let mut fetch = |partitions: Vec<PartitionData>| {
        let req = request(id, epoch, &[]);
        epoch += 1;
        let begun = cache.begin_at(12, &req, false, 1).unwrap();
        let mut topics = response(partitions);
        cache
            .respond_at(&begun.context, &req, &mut topics, true, 1)
            .unwrap();
        indexes(&topics)
    };
    let failed = answered(1, -1, 0)
        .with_error_code(6)
        .with_log_start_offset(-1);
    assert_eq!(
        fetch(vec![answered(0, 10, 0), failed.clone(), answered(2, 10, 0)]),
        [1]
    );
    assert_eq!(
        fetch(vec![answered(0, 10, 0), failed, answered(2, 10, 0)]),
        [1]
    );
    // Served again with the old high watermark: sent, because the error reset it.
    assert_eq!(
        fetch(vec![
            answered(0, 10, 0),
            answered(1, 10, 0),
            answered(2, 10, 0)
        ]),
        [1]
    );
    assert_eq!(
        fetch(vec![
            answered(0, 10, 0),
            answered(1, 10, 0),
            answered(2, 10, 0)
        ]),
        Vec::<i32>::new()
    );
}

#[test]
fn session_errors_are_kafkas() {
    let cache = FetchSessionCache::new(DEFAULT_SLOTS);
    let id = open(&cache, 0);
    assert_eq!(
        cache
            .begin_at(12, &request(id + 1, 1, &[]), false, 1)
            .map(|b| b.context),
        Err(FETCH_SESSION_ID_NOT_FOUND)
    );
    assert_eq!(
        cache
            .begin_at(12, &request(i32::MAX, 1, &[]), false, 1)
            .map(|b| b.context),
        Err(FETCH_SESSION_ID_NOT_FOUND)
    );
    assert_eq!(
        cache
            .begin_at(12, &request(-5, 3, &[]), false, 1)
            .map(|b| b.context),
        Err(FETCH_SESSION_ID_NOT_FOUND)
    );
    assert_eq!(
        cache
            .begin_at(12, &request(id, 2, &[]), false, 1)
            .map(|b| b.context),
        Err(INVALID_FETCH_SESSION_EPOCH)
    );
    assert_eq!(
        cache
            .begin_at(13, &request(id, 1, &[]), false, 1)
            .map(|b| b.context),
        Err(FETCH_SESSION_TOPIC_ID_ERROR)
    );
    // The errors left the session at epoch 1.
    assert!(cache.begin_at(12, &request(id, 1, &[]), false, 1).is_ok());
}

#[test]
fn a_concurrent_fetch_of_the_same_session_loses() {
    let cache = FetchSessionCache::new(DEFAULT_SLOTS);
    let id = open(&cache, 0);
    let first = cache.begin_at(12, &request(id, 1, &[]), false, 1).unwrap();
    let second = cache.begin_at(12, &request(id, 2, &[]), false, 1).unwrap();
    let mut topics = response(vec![answered(0, 10, 0)]);
    assert_eq!(
        cache.respond_at(&first.context, &request(id, 1, &[]), &mut topics, true, 1),
        Err(INVALID_FETCH_SESSION_EPOCH)
    );
    let mut topics = response(vec![answered(0, 10, 0)]);
    assert_eq!(
        cache.respond_at(&second.context, &request(id, 2, &[]), &mut topics, true, 1),
        Ok(id)
    );
}

#[test]
fn forgetting_every_partition_closes_the_session() {
    let cache = FetchSessionCache::new(DEFAULT_SLOTS);
    let id = open(&cache, 0);
    let mut req = request(id, 1, &[]);
    req.forgotten_topics_data = vec![ForgottenTopic::default()
        .with_topic(name(TOPIC))
        .with_partitions(vec![0, 2])];
    let begun = cache.begin_at(12, &req, false, 1).unwrap();
    assert_eq!(read_partitions(&begun), [(1, 0)]);
    let mut req = request(id, 2, &[]);
    req.forgotten_topics_data = vec![ForgottenTopic::default()
        .with_topic(name(TOPIC))
        .with_partitions(vec![1])];
    let begun = cache.begin_at(12, &req, false, 1).unwrap();
    assert_eq!(begun.context, FetchContext::Sessionless);
    assert!(cache.is_empty());
}

#[test]
fn a_full_fetch_naming_a_session_closes_it() {
    let cache = FetchSessionCache::new(DEFAULT_SLOTS);
    let id = open(&cache, 0);
    let begun = cache
        .begin_at(12, &request(id, -1, &[(0, 0)]), false, 1)
        .unwrap();
    assert_eq!(begun.context, FetchContext::Sessionless);
    assert!(cache.is_empty());
    let id = open(&cache, 0);
    let begun = cache
        .begin_at(12, &request(id, 0, &[(0, 0)]), false, 1)
        .unwrap();
    assert!(matches!(begun.context, FetchContext::Full { .. }));
    assert!(cache.is_empty());
    assert_eq!(
        cache
            .begin_at(12, &request(id, 1, &[]), false, 1)
            .map(|b| b.context),
        Err(FETCH_SESSION_ID_NOT_FOUND)
    );
}

#[test]
fn sessions_by_topic_id_key_by_id_and_keep_the_first_name() {
    let cache = FetchSessionCache::new(DEFAULT_SLOTS);
    let topic_id = Uuid::from_u128(7);
    let by_id = |id, epoch| {
        FetchRequest::default()
            .with_session_id(id)
            .with_session_epoch(epoch)
            .with_topics(vec![FetchTopic::default()
                .with_topic_id(topic_id)
                .with_partitions(vec![wanted(0, 3)])])
    };
    let full = by_id(0, 0);
    let begun = cache.begin_at(13, &full, false, 0).unwrap();
    // The handler names the topic its id had in the response (not encoded from v13 on).
    let mut topics = vec![FetchableTopicResponse::default()
        .with_topic(name(TOPIC))
        .with_topic_id(topic_id)
        .with_partitions(vec![answered(0, 10, 0)])];
    let id = cache
        .respond_at(&begun.context, &full, &mut topics, true, 0)
        .unwrap();
    let begun = cache.begin_at(13, &by_id(id, 1), false, 1).unwrap();
    let topics = begun.topics.clone().unwrap_or_default();
    assert_eq!(topics.len(), 1);
    assert_eq!(
        (topics[0].topic_id, topics[0].partitions.len()),
        (topic_id, 1)
    );
    // The session keeps the name it learned first (Kafka's `CachedPartition`), whatever a
    // later response says.
    assert_eq!(topics[0].topic, name(TOPIC));
    let mut renamed = vec![FetchableTopicResponse::default()
        .with_topic(name("other"))
        .with_topic_id(topic_id)
        .with_partitions(vec![answered(0, 11, 0)])];
    cache
        .respond_at(&begun.context, &by_id(id, 1), &mut renamed, true, 1)
        .unwrap();
    let begun = cache.begin_at(13, &by_id(id, 2), false, 2).unwrap();
    assert_eq!(begun.topics.unwrap_or_default()[0].topic, name(TOPIC));
}

#[test]
fn fewer_slots_than_shards_means_no_sessions() {
    let cache = FetchSessionCache::new(7);
    assert_eq!(open(&cache, 0), INVALID_SESSION_ID);
    assert!(cache.is_empty());
}

#[test]
fn session_ids_fall_in_their_shards_range() {
    let cache = FetchSessionCache::new(DEFAULT_SLOTS);
    let ids: Vec<i32> = (0..SHARDS).map(|_| open(&cache, 0)).collect();
    let range = i32::MAX / SHARDS as i32;
    for (shard, id) in ids.iter().enumerate() {
        assert_eq!(*id / range, shard as i32, "round-robin placement: {ids:?}");
    }
    assert_eq!(cache.len(), SHARDS);
}

/// A cache whose shards hold one session each, and a session of `size` partitions opened in
/// shard 0 at `now`.
fn one_slot_shard(cache: &FetchSessionCache, privileged: bool, size: i32, now: u64) -> i32 {
    let partitions: Vec<(i32, i64)> = (0..size).map(|p| (p, 0)).collect();
    let full = request(0, 0, &partitions);
    let begun = cache.begin_at(12, &full, privileged, now).unwrap();
    let mut topics = response(partitions.iter().map(|&(p, _)| answered(p, 1, 0)).collect());
    // Always shard 0: the round-robin counter is reset for the test.
    cache.next_shard.store(0, Ordering::Relaxed);
    cache
        .respond_at(&begun.context, &full, &mut topics, true, now)
        .unwrap()
}

#[test]
fn eviction_follows_kafkas_rules() {
    let cache = FetchSessionCache::new(SHARDS);
    let consumer = one_slot_shard(&cache, false, 2, 0);
    assert!(consumer > 0);
    // A young consumer session keeps its slot against another consumer...
    assert_eq!(one_slot_shard(&cache, false, 5, 1000), INVALID_SESSION_ID);
    // ...but not against a follower.
    let follower = one_slot_shard(&cache, true, 1, 1000);
    assert!(follower > 0);
    assert_eq!(cache.len(), 1);
    // A young follower session keeps its slot against everyone.
    assert_eq!(one_slot_shard(&cache, true, 9, 2000), INVALID_SESSION_ID);
    // Older than EVICTION_MS (and used since, so not idle), it yields to a larger follower
    // session, not to one of its own size nor to a consumer's.
    let touch = request(follower, 1, &[]);
    let at = EVICTION_MS + 1500;
    cache.begin_at(12, &touch, true, at).unwrap();
    assert_eq!(one_slot_shard(&cache, false, 4, at), INVALID_SESSION_ID);
    assert_eq!(one_slot_shard(&cache, true, 1, at), INVALID_SESSION_ID);
    let larger = one_slot_shard(&cache, true, 2, at);
    assert!(larger > 0);
    // Idle for longer than EVICTION_MS, any session goes.
    let later = at + EVICTION_MS + 1;
    assert!(one_slot_shard(&cache, false, 1, later) > 0);
    assert_eq!(cache.len(), 1);
}
