//! Fetch sessions (KIP-227): the broker remembers the partitions a fetcher reads, so that an
//! incremental fetch names only what changed and its response carries only partitions with news.
//!
//! The cache is Kafka's `FetchSessionCache`: `max.incremental.fetch.session.cache.slots` split
//! over [`SHARDS`] shards, each with its own lock and its own range of session ids, new sessions
//! placed round-robin. A full shard evicts, in this order, a session idle for longer than
//! [`EVICTION_MS`], else (for a follower) a consumer session, else a session older than
//! [`EVICTION_MS`] that is smaller than the new one (consumer sessions before follower ones).
//!
//! The Fetch handler calls [`FetchSessionCache::begin`] before reading (it checks the session
//! id and epoch, applies an incremental request's added and forgotten partitions, and says what
//! to read) and [`FetchSessionCache::respond`] when answering (it drops the partitions an
//! incremental response may omit, or opens a session for a full fetch).

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use indexmap::IndexMap;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::FetchableTopicResponse;
use kafka_protocol::messages::{FetchRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

/// Session id 0: no session.
pub const INVALID_SESSION_ID: i32 = 0;
/// Epoch 0: open a new session (after closing the one named, if any).
const INITIAL_EPOCH: i32 = 0;
/// Epoch −1: close the session named and fetch without one.
const FINAL_EPOCH: i32 = -1;
/// Kafka's number of cache shards.
pub const SHARDS: usize = 8;
/// Kafka's `MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS`: how long a session is protected from
/// eviction after its creation, and how long an idle one survives.
pub const EVICTION_MS: u64 = 120_000;
/// Kafka's default `max.incremental.fetch.session.cache.slots`.
pub const DEFAULT_SLOTS: usize = 1000;

const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;
const FETCH_SESSION_TOPIC_ID_ERROR: i16 = 106;

/// The epoch after `epoch`: −1 stays −1 and `i32::MAX` wraps to 1 (0 means "new session").
pub fn next_epoch(epoch: i32) -> i32 {
    if epoch < 0 {
        FINAL_EPOCH
    } else if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

/// A partition in a session: by topic id from Fetch v13 on (the name left empty), by name before.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PartitionKey {
    topic_id: Uuid,
    topic: StrBytes,
    partition: i32,
}

impl PartitionKey {
    fn new(uses_topic_ids: bool, topic_id: Uuid, topic: &TopicName, partition: i32) -> Self {
        if uses_topic_ids {
            PartitionKey {
                topic_id,
                topic: StrBytes::default(),
                partition,
            }
        } else {
            PartitionKey {
                topic_id: Uuid::nil(),
                topic: topic.0.clone(),
                partition,
            }
        }
    }
}

/// What a session remembers of one partition: the fetcher's last request for it, and what the
/// last response told the fetcher.
#[derive(Clone, Debug)]
struct CachedPartition {
    request: FetchPartition,
    /// By topic id: the name the id had when a response first named it (Kafka's
    /// `CachedPartition` resolves a name once and keeps it), empty until then. A topic deleted
    /// since is then unknown by that name, one created again under it has another id.
    topic_name: StrBytes,
    /// −1 until a response carried it, and after an error, so that it is sent again.
    high_watermark: i64,
    log_start_offset: i64,
}

/// What a session keeps of a requested partition: its fields, not the unknown tagged fields a
/// client may have stuffed into it (they would otherwise live as long as the session).
fn kept(request: &FetchPartition) -> FetchPartition {
    let mut kept = request.clone();
    kept.unknown_tagged_fields.clear();
    kept
}

impl CachedPartition {
    fn from_request(request: &FetchPartition) -> Self {
        CachedPartition {
            request: kept(request),
            topic_name: StrBytes::default(),
            high_watermark: -1,
            log_start_offset: -1,
        }
    }

    /// Whether the response must carry this partition (Kafka's `maybeUpdateResponseData`):
    /// records, a moved high watermark or log start offset, a preferred replica, a diverging
    /// epoch or an error. With `update`, remembers what the response tells the fetcher.
    fn must_respond(
        &mut self,
        topic_name: &TopicName,
        partition: &kafka_protocol::messages::fetch_response::PartitionData,
        update: bool,
    ) -> bool {
        if update && self.topic_name.is_empty() {
            self.topic_name = topic_name.0.clone();
        }
        let mut must = partition.records.as_ref().is_some_and(|r| !r.is_empty())
            || partition.preferred_read_replica.0 >= 0
            || partition.diverging_epoch.epoch >= 0;
        if self.high_watermark != partition.high_watermark {
            must = true;
            if update {
                self.high_watermark = partition.high_watermark;
            }
        }
        if self.log_start_offset != partition.log_start_offset {
            must = true;
            if update {
                self.log_start_offset = partition.log_start_offset;
            }
        }
        if partition.error_code != 0 {
            must = true;
            if update {
                self.high_watermark = -1;
            }
        }
        must
    }
}

struct Session {
    id: i32,
    /// Opened by a follower (replica id ≥ 0): may evict consumer sessions.
    privileged: bool,
    uses_topic_ids: bool,
    creation_ms: u64,
    last_used_ms: u64,
    /// The epoch the next incremental fetch must carry.
    epoch: i32,
    /// In read order: a partition that returned records moves to the end, so that a large
    /// partition cannot starve the others of the response budget.
    partitions: IndexMap<PartitionKey, CachedPartition>,
    /// The size this session is indexed under in the eviction sets.
    cached_size: usize,
}

/// Kafka's `EvictableKey`; the derived order (consumer sessions first, then smaller ones, then
/// lower ids) is Kafka's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct EvictableKey {
    privileged: bool,
    size: usize,
    id: i32,
}

impl Session {
    fn evictable_key(&self) -> EvictableKey {
        EvictableKey {
            privileged: self.privileged,
            size: self.cached_size,
            id: self.id,
        }
    }
}

/// Session and partition counts over every shard, for the gauges.
#[derive(Default)]
struct Totals {
    sessions: AtomicI64,
    partitions: AtomicI64,
}

impl Totals {
    fn add(&self, sessions: i64, partitions: i64) {
        let sessions = self.sessions.fetch_add(sessions, Ordering::Relaxed) + sessions;
        let partitions = self.partitions.fetch_add(partitions, Ordering::Relaxed) + partitions;
        gregor_metrics::fetch_session_cache(
            usize::try_from(sessions).unwrap_or(0),
            usize::try_from(partitions).unwrap_or(0),
        );
    }
}

/// One shard: Kafka's `FetchSessionCacheShard`.
struct Shard {
    number: i32,
    max_entries: usize,
    id_range: i32,
    sessions: HashMap<i32, Session>,
    /// (last used, id), oldest first.
    last_used: BTreeSet<(u64, i32)>,
    /// Sessions a follower may evict: every consumer session, and follower sessions older than
    /// [`EVICTION_MS`].
    evictable_by_privileged: BTreeSet<EvictableKey>,
    /// Sessions anyone may evict: those older than [`EVICTION_MS`].
    evictable_by_all: BTreeSet<EvictableKey>,
    totals: Arc<Totals>,
}

impl Shard {
    fn new_session_id(&self) -> i32 {
        loop {
            let id = rand::random_range(1..self.id_range.max(2)) + self.number * self.id_range;
            if id != INVALID_SESSION_ID && !self.sessions.contains_key(&id) {
                return id;
            }
        }
    }

    /// Re-indexes `id` as used at `now` (Kafka's `touch`).
    fn touch(&mut self, id: i32, now: u64) {
        let Some(session) = self.sessions.get_mut(&id) else {
            return;
        };
        self.last_used.remove(&(session.last_used_ms, id));
        session.last_used_ms = now;
        self.last_used.insert((now, id));
        let old_key = session.evictable_key();
        self.evictable_by_privileged.remove(&old_key);
        self.evictable_by_all.remove(&old_key);
        let old_size = session.cached_size;
        session.cached_size = session.partitions.len();
        let key = session.evictable_key();
        let old_enough = now.saturating_sub(session.creation_ms) > EVICTION_MS;
        if !session.privileged || old_enough {
            self.evictable_by_privileged.insert(key);
        }
        if old_enough {
            self.evictable_by_all.insert(key);
        }
        self.totals
            .add(0, session.cached_size as i64 - old_size as i64);
    }

    fn remove(&mut self, id: i32) -> Option<Session> {
        let session = self.sessions.remove(&id)?;
        self.last_used.remove(&(session.last_used_ms, id));
        let key = session.evictable_key();
        self.evictable_by_privileged.remove(&key);
        self.evictable_by_all.remove(&key);
        self.totals.add(-1, -(session.cached_size as i64));
        Some(session)
    }

    /// Frees one slot for a new session of `size` partitions if Kafka's rules allow it.
    fn try_evict(&mut self, privileged: bool, size: usize, now: u64) -> bool {
        let Some(&(last_used, stale)) = self.last_used.first() else {
            return false;
        };
        let victim = if now.saturating_sub(last_used) > EVICTION_MS {
            Some(stale)
        } else {
            let candidates = if privileged {
                &self.evictable_by_privileged
            } else {
                &self.evictable_by_all
            };
            let wanted = EvictableKey {
                privileged,
                size,
                id: 0,
            };
            candidates
                .first()
                .filter(|smallest| wanted >= **smallest)
                .map(|smallest| smallest.id)
        };
        match victim {
            Some(id) => {
                self.remove(id);
                gregor_metrics::fetch_session_evicted();
                tracing::debug!(session = id, "fetch session evicted");
                true
            }
            None => false,
        }
    }

    /// Opens a session when there is room (or room can be made); its id, or 0.
    fn maybe_create(
        &mut self,
        now: u64,
        privileged: bool,
        uses_topic_ids: bool,
        partitions: IndexMap<PartitionKey, CachedPartition>,
    ) -> i32 {
        if self.max_entries == 0 {
            return INVALID_SESSION_ID;
        }
        if self.sessions.len() >= self.max_entries
            && !self.try_evict(privileged, partitions.len(), now)
        {
            return INVALID_SESSION_ID;
        }
        let id = self.new_session_id();
        self.sessions.insert(
            id,
            Session {
                id,
                privileged,
                uses_topic_ids,
                creation_ms: now,
                last_used_ms: now,
                epoch: next_epoch(INITIAL_EPOCH),
                partitions,
                cached_size: 0,
            },
        );
        self.totals.add(1, 0);
        self.touch(id, now);
        id
    }
}

/// How one Fetch request uses sessions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchContext {
    /// No session: the response carries session id 0 and every requested partition.
    Sessionless,
    /// A full fetch (epoch 0), which opens a session when answered if the cache has room.
    Full {
        /// Follower fetch.
        privileged: bool,
        /// Fetch v13+ (topics by id).
        uses_topic_ids: bool,
    },
    /// An incremental fetch of session `id`, whose epoch is now `expected_epoch`.
    Incremental {
        /// The session.
        id: i32,
        /// The session's epoch after this fetch; another fetch that moved it first wins.
        expected_epoch: i32,
    },
}

impl FetchContext {
    /// The session id of a throttled (empty) response: 0 for a full fetch, the session's own for
    /// an incremental one (its epoch has advanced all the same).
    pub fn throttled_session_id(&self) -> i32 {
        match self {
            FetchContext::Incremental { id, .. } => *id,
            _ => INVALID_SESSION_ID,
        }
    }
}

/// What [`FetchSessionCache::begin`] decided.
#[derive(Debug)]
pub struct Begun {
    /// The kind of fetch.
    pub context: FetchContext,
    /// For an incremental fetch, every partition of the session in read order (the request names
    /// only the changed ones); `None`: read the request's own partitions.
    pub topics: Option<Vec<FetchTopic>>,
}

/// The fetch session cache of one broker.
pub struct FetchSessionCache {
    shards: Vec<Mutex<Shard>>,
    next_shard: AtomicUsize,
    id_range: i32,
    started: Instant,
}

impl FetchSessionCache {
    /// A cache of `slots` sessions (`max.incremental.fetch.session.cache.slots`), split evenly
    /// over the shards as Kafka does (fewer than [`SHARDS`] slots: no sessions).
    pub fn new(slots: usize) -> Self {
        gregor_metrics::fetch_session_cache_started();
        let id_range = i32::MAX / SHARDS as i32;
        let totals = Arc::new(Totals::default());
        FetchSessionCache {
            shards: (0..SHARDS as i32)
                .map(|number| {
                    Mutex::new(Shard {
                        number,
                        max_entries: slots / SHARDS,
                        id_range,
                        sessions: HashMap::new(),
                        last_used: BTreeSet::new(),
                        evictable_by_privileged: BTreeSet::new(),
                        evictable_by_all: BTreeSet::new(),
                        totals: totals.clone(),
                    })
                })
                .collect(),
            next_shard: AtomicUsize::new(0),
            id_range,
            started: Instant::now(),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn shard_of(&self, id: i32) -> Option<MutexGuard<'_, Shard>> {
        if id <= 0 {
            return None;
        }
        let shard = self.shards.get(usize::try_from(id / self.id_range).ok()?)?;
        // A panic while holding the lock cannot leave a shard half-updated in a way that
        // matters more than losing the service: keep using it.
        Some(
            shard
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        )
    }

    fn next_shard(&self) -> MutexGuard<'_, Shard> {
        let number = self.next_shard.fetch_add(1, Ordering::Relaxed) % self.shards.len();
        self.shards[number]
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Sessions in the cache (all shards).
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map_or(0, |s| s.sessions.len()))
            .sum()
    }

    /// Whether the cache holds no session.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads the session metadata of `request` (Fetch `version`; `privileged`: from a
    /// follower): closes a session a full fetch names, or applies an incremental fetch to its
    /// session and advances the epoch. The error is a top-level error code
    /// (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH, FETCH_SESSION_TOPIC_ID_ERROR).
    pub fn begin(
        &self,
        version: i16,
        request: &FetchRequest,
        privileged: bool,
    ) -> Result<Begun, i16> {
        self.begin_at(version, request, privileged, self.now_ms())
    }

    fn begin_at(
        &self,
        version: i16,
        request: &FetchRequest,
        privileged: bool,
        now: u64,
    ) -> Result<Begun, i16> {
        let sessionless = Begun {
            context: FetchContext::Sessionless,
            topics: None,
        };
        if version < 7 {
            return Ok(sessionless);
        }
        let uses_topic_ids = version >= 13;
        let epoch = request.session_epoch;
        if epoch == INITIAL_EPOCH || epoch == FINAL_EPOCH {
            if let Some(mut shard) = self.shard_of(request.session_id) {
                if shard.remove(request.session_id).is_some() {
                    tracing::debug!(session = request.session_id, "fetch session closed");
                }
            }
            if epoch == FINAL_EPOCH {
                return Ok(sessionless);
            }
            return Ok(Begun {
                context: FetchContext::Full {
                    privileged,
                    uses_topic_ids,
                },
                topics: None,
            });
        }
        let id = request.session_id;
        let mut shard = self.shard_of(id).ok_or(FETCH_SESSION_ID_NOT_FOUND)?;
        let session = shard
            .sessions
            .get_mut(&id)
            .ok_or(FETCH_SESSION_ID_NOT_FOUND)?;
        if session.epoch != epoch {
            return Err(INVALID_FETCH_SESSION_EPOCH);
        }
        if session.uses_topic_ids != uses_topic_ids {
            return Err(FETCH_SESSION_TOPIC_ID_ERROR);
        }
        for topic in &request.topics {
            for partition in &topic.partitions {
                let key = PartitionKey::new(
                    uses_topic_ids,
                    topic.topic_id,
                    &topic.topic,
                    partition.partition,
                );
                match session.partitions.get_mut(&key) {
                    Some(cached) => cached.request = kept(partition),
                    None => {
                        session
                            .partitions
                            .insert(key, CachedPartition::from_request(partition));
                    }
                }
            }
        }
        for forgotten in &request.forgotten_topics_data {
            for &partition in &forgotten.partitions {
                let key = PartitionKey::new(
                    uses_topic_ids,
                    forgotten.topic_id,
                    &forgotten.topic,
                    partition,
                );
                session.partitions.shift_remove(&key);
            }
        }
        if session.partitions.is_empty() {
            shard.remove(id);
            return Ok(sessionless);
        }
        session.epoch = next_epoch(session.epoch);
        let expected_epoch = session.epoch;
        let topics = read_order(session);
        shard.touch(id, now);
        gregor_metrics::incremental_fetch();
        Ok(Begun {
            context: FetchContext::Incremental { id, expected_epoch },
            topics: Some(topics),
        })
    }

    /// Closes session `id` (a fetch that will not use it again); whether it was open.
    pub fn close(&self, id: i32) -> bool {
        self.shard_of(id)
            .is_some_and(|mut shard| shard.remove(id).is_some())
    }

    /// Shapes the response `topics` to `request` and returns the session id it carries. An
    /// incremental fetch keeps only the partitions the fetcher must hear about; a full fetch
    /// opens a session. Only with `commit` does the session learn what was sent (a dry run
    /// sizes the response for the fetch quota; a throttled response is never committed). The
    /// error is INVALID_FETCH_SESSION_EPOCH when another fetch of the session got in first.
    pub fn respond(
        &self,
        context: &FetchContext,
        request: &FetchRequest,
        topics: &mut Vec<FetchableTopicResponse>,
        commit: bool,
    ) -> Result<i32, i16> {
        self.respond_at(context, request, topics, commit, self.now_ms())
    }

    fn respond_at(
        &self,
        context: &FetchContext,
        request: &FetchRequest,
        topics: &mut Vec<FetchableTopicResponse>,
        commit: bool,
        now: u64,
    ) -> Result<i32, i16> {
        match *context {
            FetchContext::Sessionless => Ok(INVALID_SESSION_ID),
            FetchContext::Full { .. } if !commit => Ok(INVALID_SESSION_ID),
            FetchContext::Full {
                privileged,
                uses_topic_ids,
            } => {
                let partitions = full_session_partitions(uses_topic_ids, request, topics);
                let id =
                    self.next_shard()
                        .maybe_create(now, privileged, uses_topic_ids, partitions);
                if id != INVALID_SESSION_ID {
                    tracing::debug!(session = id, "fetch session opened");
                }
                Ok(id)
            }
            FetchContext::Incremental { id, expected_epoch } => {
                let Some(mut shard) = self.shard_of(id) else {
                    return Ok(id);
                };
                // Evicted or closed since `begin`: answer in full; the fetcher's next
                // incremental fetch learns that the session is gone.
                let Some(session) = shard.sessions.get_mut(&id) else {
                    return Ok(id);
                };
                if session.epoch != expected_epoch {
                    return Err(INVALID_FETCH_SESSION_EPOCH);
                }
                prune(session, topics, commit);
                Ok(id)
            }
        }
    }
}

/// The session's partitions in read order, consecutive partitions of one topic grouped.
fn read_order(session: &Session) -> Vec<FetchTopic> {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (key, cached) in &session.partitions {
        let name = if session.uses_topic_ids {
            &cached.topic_name
        } else {
            &key.topic
        };
        let same_topic = topics
            .last()
            .is_some_and(|last| last.topic_id == key.topic_id && last.topic.0 == *name);
        if !same_topic {
            topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(name.clone()))
                    .with_topic_id(key.topic_id),
            );
        }
        if let Some(last) = topics.last_mut() {
            last.partitions.push(cached.request.clone());
        }
    }
    topics
}

/// The partitions of a new session: each requested partition with what the response told.
fn full_session_partitions(
    uses_topic_ids: bool,
    request: &FetchRequest,
    topics: &[FetchableTopicResponse],
) -> IndexMap<PartitionKey, CachedPartition> {
    let mut partitions = IndexMap::new();
    for topic in &request.topics {
        for partition in &topic.partitions {
            partitions.insert(
                PartitionKey::new(
                    uses_topic_ids,
                    topic.topic_id,
                    &topic.topic,
                    partition.partition,
                ),
                CachedPartition::from_request(partition),
            );
        }
    }
    for topic in topics {
        for partition in &topic.partitions {
            let key = PartitionKey::new(
                uses_topic_ids,
                topic.topic_id,
                &topic.topic,
                partition.partition_index,
            );
            if let Some(cached) = partitions.get_mut(&key) {
                cached.must_respond(&topic.topic, partition, true);
            }
        }
    }
    partitions
}

/// Drops from `topics` the partitions an incremental response may omit; with `commit`, records
/// what is sent and moves partitions that returned records to the end of the read order.
fn prune(session: &mut Session, topics: &mut Vec<FetchableTopicResponse>, commit: bool) {
    let uses_topic_ids = session.uses_topic_ids;
    let mut returned_records = Vec::new();
    for topic in topics.iter_mut() {
        let (topic_id, name) = (topic.topic_id, topic.topic.clone());
        topic.partitions.retain(|partition| {
            let key = PartitionKey::new(uses_topic_ids, topic_id, &name, partition.partition_index);
            let Some(cached) = session.partitions.get_mut(&key) else {
                return true;
            };
            let must = cached.must_respond(&name, partition, commit);
            if commit && partition.records.as_ref().is_some_and(|r| !r.is_empty()) {
                returned_records.push(key);
            }
            must
        });
    }
    topics.retain(|topic| !topic.partitions.is_empty());
    for key in returned_records {
        if let Some(cached) = session.partitions.shift_remove(&key) {
            session.partitions.insert(key, cached);
        }
    }
}

#[cfg(test)]
mod tests;
