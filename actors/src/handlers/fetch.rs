//! Fetch (key 1): read each partition from its log, long-polling until `min_bytes` are there.
//!
//! A fetch that finds fewer than `min_bytes` waits on the `Notify` of every partition it asked
//! for (woken by appends, never a timer loop) until `max_wait_ms`, then reads again. Fetch
//! sessions (KIP-227) live in [`crate::fetch_session`]: an incremental fetch reads every
//! partition of its session and answers only those with news.

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::fetch_response::{
    FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ResponseKind, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::sync::futures::Notified;

use gregor_publishers::acl::{AclOperation, ResourceType};

use super::data::{
    fetch_leader_epoch, leader_endpoints, led_partition, requested_topic, FENCED_LEADER_EPOCH,
    INCONSISTENT_TOPIC_ID, KAFKA_STORAGE_ERROR, NONE, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE,
    REPLICA_NOT_AVAILABLE, TOPIC_AUTHORIZATION_FAILED, UNKNOWN_LEADER_EPOCH, UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, UNSUPPORTED_COMPRESSION_TYPE,
};
use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{HandlerContext, RequestInfo};
use crate::fetch_session::FetchContext;
use crate::log_manager::PartitionState;
use gregor_log::compression::Compression;
use gregor_log::config::TopicCompression;

/// Kafka's `fetch.max.bytes` default: the most one response carries.
const FETCH_MAX_BYTES: i64 = 57_671_680;

/// A partition answered with an error, as Kafka answers it: without aborted transactions
/// (null) and with empty records. Never null records: librdkafka fails the whole response on
/// them ("invalid MessageSetSize -1").
pub fn partition_error(index: i32, code: i16) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(code)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_preferred_read_replica(BrokerId(-1))
        .with_aborted_transactions(None)
        .with_records(Some(bytes::Bytes::new()))
}

/// Whether a partition answered `code` was refused before the read (Kafka's `erroneous` in
/// `KafkaApis.handleFetchRequest`: an unknown topic, topic id or partition, or no READ): such
/// a partition is never read, so it neither ends a long poll nor comes before the partitions
/// read in the response.
pub fn refused_before_read(code: i16) -> bool {
    matches!(
        code,
        UNKNOWN_TOPIC_OR_PARTITION | UNKNOWN_TOPIC_ID | TOPIC_AUTHORIZATION_FAILED
    )
}

/// Puts a response's partitions in Kafka's order: those read first, then those refused before
/// the read, each group in request (or session) order; a topic entry starts at each change of
/// topic, as Kafka's `FetchResponse.toMessage` groups them.
pub fn kafka_order(topics: Vec<FetchableTopicResponse>) -> Vec<FetchableTopicResponse> {
    let mut read = Vec::new();
    let mut refused = Vec::new();
    for mut topic in topics {
        let partitions = std::mem::take(&mut topic.partitions);
        for partition in partitions {
            let group = if refused_before_read(partition.error_code) {
                &mut refused
            } else {
                &mut read
            };
            group.push((topic.topic.clone(), topic.topic_id, partition));
        }
    }
    let mut ordered: Vec<FetchableTopicResponse> = Vec::new();
    for (name, topic_id, partition) in read.into_iter().chain(refused) {
        match ordered.last_mut() {
            Some(last) if last.topic_id == topic_id && last.topic == name => {
                last.partitions.push(partition)
            }
            _ => ordered.push(
                FetchableTopicResponse::default()
                    .with_topic(name)
                    .with_topic_id(topic_id)
                    .with_partitions(vec![partition]),
            ),
        }
    }
    ordered
}

pub(super) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: FetchRequest,
) -> ApiResponse {
    let version = info.api_version;
    let follower = super::replica_fetch::replica_id(&request, version) >= 0;
    let begun = match ctx.fetch_sessions.begin(version, &request, follower) {
        Ok(begun) => begun,
        Err(code) => return session_error(code, 0),
    };
    let session = begun.context;
    // An incremental fetch reads its whole session; a full one, what it names.
    let session_request = begun
        .topics
        .map(|topics| request.clone().with_topics(topics));
    let read_request = session_request.as_ref().unwrap_or(&request);
    let limits = Limits::of(&request, quota_window_bytes(ctx, info, follower));
    let mut waited = Duration::ZERO;
    loop {
        let read = read_all(ctx, info, read_request, limits.max_bytes, 0).await;
        let done = limits.done(read.bytes, read.any_error, read.urgent, &read.watched);
        if done {
            // Kafka's `fetchMessages` counts every partition read, before a session leaves out
            // those without news or a quota throttles the answer.
            let mut counts = TopicFetchCounts::default();
            counts.add(ctx, &read.topics);
            let mut body = FetchResponse::default().with_responses(kafka_order(read.topics));
            if version >= 16 {
                point_to_leaders(ctx, info, &mut body);
            }
            // The fetch byte-rate quota counts the response this would send (size prefix
            // included, the partitions a session omits excluded); over quota, the answer is
            // empty and carries the throttle time.
            let size = if matches!(session, FetchContext::Incremental { .. }) {
                let mut sized = body.clone();
                if let Err(code) =
                    ctx.fetch_sessions
                        .respond(&session, &request, &mut sized.responses, false)
                {
                    return session_error(code, session.throttled_session_id());
                }
                // What the session omits may leave two entries of one topic side by side.
                sized.responses = kafka_order(sized.responses);
                sized.compute_size(version)
            } else {
                body.compute_size(version)
            }
            .unwrap_or(0)
                + 4;
            let throttle = record_quota(ctx, info, size, follower);
            if throttle > 0 {
                body.responses.clear();
                body.session_id = session.throttled_session_id();
                body.throttle_time_ms = throttle;
                counts.throttled();
            } else {
                match ctx
                    .fetch_sessions
                    .respond(&session, &request, &mut body.responses, true)
                {
                    Ok(id) => {
                        body.session_id = id;
                        if matches!(session, FetchContext::Incremental { .. }) {
                            body.responses = kafka_order(std::mem::take(&mut body.responses));
                        }
                    }
                    Err(code) => return session_error(code, session.throttled_session_id()),
                }
                refuse_zstd_below_v10(ctx, version, &mut body.responses, &mut counts);
            }
            let mut errors = ErrorCounts::default();
            for partition in body.responses.iter().flat_map(|t| &t.partitions) {
                errors.add(partition.error_code);
            }
            counts.record(follower);
            let mut response = ApiResponse::new(ResponseKind::Fetch(body), errors);
            response.throttle_time_ms = throttle;
            response.read_memory = read.read_memory;
            response.metric_alias = Some(metric_alias(follower));
            response.remote_time = waited;
            return response;
        }
        let waiting = std::time::Instant::now();
        wait_for_news(&read.watched, follower, limits.deadline).await;
        waited += waiting.elapsed();
    }
}

/// The second name a Fetch is counted under in the request metrics, as Kafka's
/// `RequestChannel.Request.updateRequestMetrics`.
pub fn metric_alias(follower: bool) -> &'static str {
    if follower {
        "FetchFollower"
    } else {
        "FetchConsumer"
    }
}

/// A fetch's byte limits and how long it may wait for them.
pub struct Limits {
    pub max_bytes: i64,
    min_bytes: i64,
    wait: Duration,
    deadline: tokio::time::Instant,
}

impl Limits {
    /// The limits of `request`, its wait starting now; `quota_window_bytes` (from
    /// [`quota_window_bytes`]) caps what it reads, as Kafka's `fetchMaxBytes`.
    pub fn of(request: &FetchRequest, quota_window_bytes: Option<i64>) -> Self {
        let max_bytes = i64::from(request.max_bytes)
            .clamp(0, FETCH_MAX_BYTES)
            .min(quota_window_bytes.unwrap_or(i64::MAX));
        let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
        Limits {
            max_bytes,
            min_bytes: i64::from(request.min_bytes).min(max_bytes),
            wait,
            deadline: tokio::time::Instant::now() + wait,
        }
    }

    /// Whether a pass that read `bytes` is answered rather than waited on.
    pub fn done(&self, bytes: i64, any_error: bool, urgent: bool, watched: &Watched) -> bool {
        self.wait.is_zero()
            || bytes >= self.min_bytes
            || any_error
            || urgent
            || watched.states.is_empty()
            || tokio::time::Instant::now() >= self.deadline
    }

    pub fn deadline(&self) -> tokio::time::Instant {
        self.deadline
    }
}

/// Partitions a waiting fetch listens to, with the offsets a pass saw.
#[derive(Default)]
pub struct Watched {
    states: Vec<Arc<PartitionState>>,
    sampled: Vec<i64>,
}

impl Watched {
    fn push(&mut self, state: Arc<PartitionState>, sampled: i64) {
        self.states.push(state);
        self.sampled.push(sampled);
    }

    pub fn append(&mut self, other: &mut Watched) {
        self.states.append(&mut other.states);
        self.sampled.append(&mut other.sampled);
    }
}

/// Waits until a watched partition gets news (woken by its append, never a timer loop) or the
/// deadline passes; returns at once when one moved since the pass sampled it.
pub async fn wait_for_news(watched: &Watched, follower: bool, deadline: tokio::time::Instant) {
    // Arm the wake-ups, then look once more: an append between the read and the arming
    // would otherwise be missed until the deadline.
    let mut wakeups: Vec<Pin<Box<Notified<'_>>>> = watched
        .states
        .iter()
        .map(|state| Box::pin(state.appended.notified()))
        .collect();
    for wakeup in &mut wakeups {
        wakeup.as_mut().enable();
    }
    let moved = watched
        .states
        .iter()
        .zip(&watched.sampled)
        .any(|(state, sampled)| {
            super::replica_fetch::watched_offset(state, follower) != *sampled || !state.is_serving()
        });
    if moved || wakeups.is_empty() {
        return;
    }
    // Counted while waiting, however the wait ends (a closed connection drops it).
    struct Waiting;
    impl Drop for Waiting {
        fn drop(&mut self) {
            gregor_metrics::fetch_waiting(false);
        }
    }
    gregor_metrics::fetch_waiting(true);
    let _waiting = Waiting;
    tokio::select! {
        _ = futures::future::select_all(wakeups) => {}
        _ = tokio::time::sleep_until(deadline) => {}
    }
}

/// The most a client fetch may read under its fetch byte-rate quota (Kafka's
/// `getMaxValueInQuotaWindow`, at least one byte); None without a quota and for followers.
pub fn quota_window_bytes(ctx: &HandlerContext, info: &RequestInfo, follower: bool) -> Option<i64> {
    if follower {
        return None;
    }
    ctx.quotas
        .fetch
        .shared
        .max_value_in_quota_window_cached(
            &mut info.fetch_quota.lock(),
            &info.principal.name,
            &info.client_id,
        )
        .map(|bytes| (bytes.min(i64::MAX as f64) as i64).max(1))
}

/// Records a response of `size` bytes (size prefix included) against the fetch byte-rate
/// quota; its throttle time. A throttled fetch is answered empty, so its bytes are taken back
/// off the rate at once (Kafka's `unrecordQuotaSensor`). Replication is not charged to client
/// quotas.
pub fn record_quota(ctx: &HandlerContext, info: &RequestInfo, size: usize, follower: bool) -> i32 {
    if follower {
        return 0;
    }
    let quota = &ctx.quotas.fetch.shared;
    let mut cache = info.fetch_quota.lock();
    let at = std::time::Instant::now();
    let (principal, client) = (&info.principal.name, &info.client_id);
    let throttle = quota.record_cached(&mut cache, principal, client, size as f64, at);
    if throttle > 0 {
        quota.unrecord_cached(&mut cache, principal, client, size as f64, at);
    }
    i32::try_from(throttle).unwrap_or(i32::MAX)
}

/// KIP-951: a partition answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH names its
/// current leader and epoch, and the answer carries that leader's endpoint on the request's
/// listener (Kafka's `KafkaApis.handleFetchRequest`, v16+), so the client goes there at once.
fn point_to_leaders(ctx: &HandlerContext, info: &RequestInfo, body: &mut FetchResponse) {
    let image = ctx.image.load();
    let mut leaders = Vec::new();
    for topic in &mut body.responses {
        let registered = image.topics.get_by_id(&topic.topic_id);
        for partition in &mut topic.partitions {
            if partition.error_code != NOT_LEADER_OR_FOLLOWER
                && partition.error_code != FENCED_LEADER_EPOCH
            {
                continue;
            }
            let (leader, epoch) = registered
                .and_then(|t| t.partition(partition.partition_index))
                .map_or((-1, -1), |p| (p.leader, p.leader_epoch));
            partition.current_leader = LeaderIdAndEpoch::default()
                .with_leader_id(BrokerId(leader))
                .with_leader_epoch(epoch);
            if leader >= 0 {
                leaders.push(leader);
            }
        }
    }
    body.node_endpoints = leader_endpoints(
        &image,
        &info.listener_name,
        leaders,
        |id, host, port, rack| {
            NodeEndpoint::default()
                .with_node_id(BrokerId(id))
                .with_host(host)
                .with_port(port)
                .with_rack(rack)
        },
    );
}

/// Whether `request` comes from a follower replica.
pub fn is_follower(request: &FetchRequest, version: i16) -> bool {
    super::replica_fetch::replica_id(request, version) >= 0
}

/// A top-level fetch session error: no partitions.
fn session_error(code: i16, session_id: i32) -> ApiResponse {
    let mut errors = ErrorCounts::default();
    errors.add(code);
    ApiResponse::new(
        ResponseKind::Fetch(
            FetchResponse::default()
                .with_error_code(code)
                .with_session_id(session_id),
        ),
        errors,
    )
}

/// Per-topic counts of the partitions a Fetch read, for the broker topic metrics:
/// (partitions, failed, record bytes sent).
#[derive(Default)]
pub struct TopicFetchCounts(std::collections::BTreeMap<String, (u64, u64, u64)>);

impl TopicFetchCounts {
    /// Counts the partitions of `topics` that belong to a topic that exists: a name a client
    /// made up would otherwise be a new series.
    pub fn add(&mut self, ctx: &HandlerContext, topics: &[FetchableTopicResponse]) {
        let image = ctx.image.load();
        for topic in topics {
            let name = if topic.topic.is_empty() {
                image
                    .topics
                    .get_by_id(&topic.topic_id)
                    .map(|t| t.name.as_ref())
            } else {
                image
                    .topics
                    .get_by_name(&topic.topic)
                    .map(|_| topic.topic.as_str())
            };
            let Some(name) = name else {
                continue;
            };
            let counts = match self.0.get_mut(name) {
                Some(counts) => counts,
                None => self.0.entry(name.to_owned()).or_default(),
            };
            for partition in &topic.partitions {
                count_partition(counts, partition);
            }
        }
    }

    /// The answer was throttled: it carries no records, so Kafka counts no bytes out (it counts
    /// them from the response it sends), while its partitions were read and are requests.
    pub fn throttled(&mut self) {
        for (_, _, bytes) in self.0.values_mut() {
            *bytes = 0;
        }
    }

    /// `bytes` of `topic`'s records were read but are not sent.
    pub fn unsent(&mut self, topic: &str, bytes: u64) {
        if let Some((_, _, sent)) = self.0.get_mut(topic) {
            *sent = sent.saturating_sub(bytes);
        }
    }

    /// A follower's bytes are replication bytes, not the topic's bytes out (Kafka's
    /// `BrokerTopicStats.updateBytesOut`).
    pub fn record(self, follower: bool) {
        for (topic, (partitions, failed, bytes)) in self.0 {
            if follower {
                gregor_metrics::topic_follower_fetches(&topic, partitions, failed);
                gregor_metrics::replication_bytes_out(bytes);
            } else {
                gregor_metrics::topic_fetches(&topic, partitions, failed, bytes);
            }
        }
    }
}

/// Adds one answered partition to its topic's (partitions, failed, record bytes sent), as
/// Kafka counts it: a partition refused before the read (Kafka's `erroneous` in
/// `handleFetchRequest`: not in the metadata, unknown topic id, no READ) never reaches
/// `fetchMessages`, so it counts nowhere; any other counts as a request, and as a failed one
/// only for an error `readFromLog` does not expect.
fn count_partition(counts: &mut (u64, u64, u64), partition: &PartitionData) {
    let (partitions, failed, bytes) = counts;
    let code = partition.error_code;
    if refused_before_read(code) {
        return;
    }
    *partitions += 1;
    if code == NONE {
        *bytes += partition.records.as_ref().map_or(0, |r| r.len() as u64);
    } else if unexpected_fetch_error(code) {
        *failed += 1;
    }
}

/// Whether a read that failed with `code` counts in FailedFetchRequestsPerSec: Kafka's
/// `readFromLog` leaves out the errors it expects (a moved leader, an epoch, a storage error, an
/// offset out of range), since the meter stands for the broker's unexpected failures.
fn unexpected_fetch_error(code: i16) -> bool {
    !matches!(
        code,
        NONE | UNKNOWN_TOPIC_OR_PARTITION
            | NOT_LEADER_OR_FOLLOWER
            | UNKNOWN_LEADER_EPOCH
            | FENCED_LEADER_EPOCH
            | REPLICA_NOT_AVAILABLE
            | KAFKA_STORAGE_ERROR
            | INCONSISTENT_TOPIC_ID
            | OFFSET_OUT_OF_RANGE
    )
}

/// Kafka's `maybeConvertFetchedData`: below v10 (clients that may not know zstd) a partition
/// whose log here has `compression.type=zstd` is answered UNSUPPORTED_COMPRESSION_TYPE, without
/// offsets or records, whatever its read gave. Kafka decides it once the response is built, so
/// the fetch session, the quota and the fetch counts saw the read; only its record bytes are not
/// sent, so they are no bytes out. Follower fetches too: Kafka makes no exception for them.
pub fn refuse_zstd_below_v10(
    ctx: &HandlerContext,
    version: i16,
    topics: &mut [FetchableTopicResponse],
    counts: &mut TopicFetchCounts,
) {
    let Some(logs) = ctx.logs.as_ref().filter(|_| version < 10) else {
        return;
    };
    refuse_partitions(topics, counts, |topic, index| {
        logs.partition(topic, index).is_some_and(|state| {
            !state.is_offline()
                && state.config().compression == TopicCompression::Codec(Compression::Zstd)
        })
    });
}

/// Answers each partition `refused` picks (by topic name and index) with
/// UNSUPPORTED_COMPRESSION_TYPE, taking its records out of `counts`' bytes.
fn refuse_partitions(
    topics: &mut [FetchableTopicResponse],
    counts: &mut TopicFetchCounts,
    refused: impl Fn(&str, i32) -> bool,
) {
    for topic in topics {
        for partition in &mut topic.partitions {
            if !refused(&topic.topic, partition.partition_index) {
                continue;
            }
            if partition.error_code == NONE {
                let bytes = partition.records.as_ref().map_or(0, |r| r.len() as u64);
                counts.unsent(&topic.topic, bytes);
            }
            *partition = partition_error(partition.partition_index, UNSUPPORTED_COMPRESSION_TYPE);
        }
    }
}

/// One pass over every requested partition.
pub struct ReadPass {
    pub topics: Vec<FetchableTopicResponse>,
    /// The record bytes read, with those of the chunks before (`already`).
    pub bytes: i64,
    /// A partition failed its read (not one refused before it), which ends a long poll.
    pub any_error: bool,
    /// Partitions a waiting fetch listens to, with the high watermarks this pass saw.
    pub watched: Watched,
    /// The fetcher must hear now (a diverging epoch).
    pub urgent: bool,
    /// The read budget the records read hold.
    pub read_memory: crate::log_manager::ReadMemoryHold,
}

/// One pass over the partitions `request` names. A fetch decided a chunk at a time
/// (`node::network::fetch_chunks`) passes each chunk with the `already` bytes its chunks before
/// read, so the byte limits and the first batch returned whole hold across the chunks.
pub async fn read_all(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: &FetchRequest,
    max_bytes: i64,
    already: i64,
) -> ReadPass {
    let version = info.api_version;
    ctx.publishers_caught_up().await;
    let image = ctx.image.load_full();
    let mut pass = ReadPass {
        topics: Vec::with_capacity(request.topics.len()),
        bytes: already,
        any_error: false,
        watched: Watched::default(),
        urgent: false,
        read_memory: Default::default(),
    };
    let replica_id = super::replica_fetch::replica_id(request, version);
    // Kafka: a follower needs CLUSTER_ACTION on the cluster (else every partition is refused),
    // a consumer READ on each topic.
    let access = Access::new(ctx, info);
    let follower_denied = replica_id >= 0 && !access.allows_cluster(AclOperation::ClusterAction);
    let mut pending = Vec::new();
    for topic in &request.topics {
        // By id with a name: a session's topic, by the name its id had when it joined the
        // session (Kafka's `CachedPartition`): deleted since, it is unknown by that name;
        // created again under it, its log has another id (Kafka's `hasConsistentTopicId`).
        let from_session = version >= 13 && !topic.topic.0.is_empty();
        let (name, unknown_topic) = if from_session {
            (Some(topic.topic.to_string()), UNKNOWN_TOPIC_OR_PARTITION)
        } else {
            requested_topic(&image, version >= 13, &topic.topic_id, &topic.topic)
        };
        let recreated = image
            .topics
            .get_by_name(&topic.topic)
            .filter(|current| from_session && current.id != topic.topic_id);
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        let denied = follower_denied
            || (replica_id < 0
                && name
                    .as_deref()
                    .is_some_and(|n| !access.allows(AclOperation::Read, ResourceType::Topic, n)));
        for wanted in &topic.partitions {
            let index = wanted.partition;
            if denied {
                partitions.push(partition_error(index, TOPIC_AUTHORIZATION_FAILED));
                continue;
            }
            if let Some(current) = recreated {
                // Kafka checks the id in `readFromLog` once it holds the partition: one the new
                // topic lacks is refused before the read (`handleFetchRequest`), one hosted
                // elsewhere is not this node's (`getPartitionOrException`).
                let code = match current.partition(index) {
                    None => UNKNOWN_TOPIC_OR_PARTITION,
                    Some(r) if !r.replicas.as_slice().contains(&ctx.node.node_id) => {
                        NOT_LEADER_OR_FOLLOWER
                    }
                    Some(_) => INCONSISTENT_TOPIC_ID,
                };
                partitions.push(partition_error(index, code));
                continue;
            }
            if replica_id >= 0 {
                let budget = (max_bytes - pass.bytes).max(0);
                let read = super::replica_fetch::read_partition(
                    ctx,
                    &image,
                    name.as_deref(),
                    unknown_topic,
                    wanted,
                    replica_id,
                    request.replica_state.replica_epoch,
                    i64::from(wanted.partition_max_bytes).clamp(0, budget),
                    pass.bytes == 0,
                )
                .await;
                pass.bytes += read.bytes;
                pass.urgent |= read.urgent;
                if let Some((state, log_end)) = read.wait_on {
                    pass.watched.push(state, log_end);
                }
                partitions.push(read.response);
                continue;
            }
            let led = match led_partition(
                ctx,
                &image,
                name.as_deref(),
                index,
                unknown_topic,
                false,
                fetch_leader_epoch(wanted.current_leader_epoch),
            ) {
                Ok(led) => led,
                Err(not_served) => {
                    // Fetch v5 and older know no storage error. The current leader goes in
                    // from v16 only (`point_to_leaders`), as Kafka's.
                    let code = if not_served.code == KAFKA_STORAGE_ERROR && version <= 5 {
                        NOT_LEADER_OR_FOLLOWER
                    } else {
                        not_served.code
                    };
                    partitions.push(partition_error(index, code));
                    continue;
                }
            };
            let state = led.state;
            let high_watermark = state.high_watermark();
            let log_start = state.log_start_offset();
            if let Some(logs) = ctx.logs.as_ref() {
                let name = name.as_deref().unwrap_or_default();
                match super::replica_fetch::last_fetched_epoch_check(
                    logs, name, index, wanted, log_start,
                )
                .await
                {
                    Ok(None) => {}
                    Ok(Some(diverging)) => {
                        // Kafka answers a diverging epoch at once, without records.
                        pass.urgent = true;
                        partitions.push(
                            served(index, high_watermark, log_start)
                                .with_diverging_epoch(diverging),
                        );
                        continue;
                    }
                    Err(code) => {
                        partitions.push(partition_error(index, code));
                        continue;
                    }
                }
            }
            if wanted.fetch_offset > state.log_end_offset() || wanted.fetch_offset < log_start {
                partitions.push(partition_error(index, OFFSET_OUT_OF_RANGE));
                continue;
            }
            // Kafka lists the aborted transactions (none here) for read_committed only.
            let response = served(index, high_watermark, log_start)
                .with_aborted_transactions((request.isolation_level == 1).then(Vec::new));
            if wanted.fetch_offset < high_watermark
                && (request.max_bytes < 0 || wanted.partition_max_bytes < 0)
            {
                // Kafka reads the segment with a negative size, which its LogSegment refuses
                // (IllegalArgumentException, answered UNKNOWN_SERVER_ERROR).
                partitions.push(partition_error(index, UNKNOWN_SERVER_ERROR));
                continue;
            }
            if wanted.fetch_offset < high_watermark {
                pending.push(PendingRead {
                    slot: (pass.topics.len(), partitions.len()),
                    name: led_name(&name),
                    index,
                    fetch_offset: wanted.fetch_offset,
                    partition_max_bytes: i64::from(wanted.partition_max_bytes).max(0),
                    state,
                    high_watermark,
                });
            } else {
                pass.watched.push(state, high_watermark);
            }
            partitions.push(response);
        }
        // The name found, not encoded from v13 on: a fetch session learns it from here.
        let answered_name = match name {
            Some(name) if version >= 13 => TopicName(StrBytes::from_string(name)),
            _ => topic.topic.clone(),
        };
        pass.topics.push(
            FetchableTopicResponse::default()
                .with_topic(answered_name)
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    read_pending(ctx, &pending, &mut pass, max_bytes).await;
    pass.any_error = pass
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .any(|p| p.error_code != NONE && !refused_before_read(p.error_code));
    pass
}

/// A consumer's partition answered without error, before its records are read.
fn served(index: i32, high_watermark: i64, log_start: i64) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(NONE)
        .with_high_watermark(high_watermark)
        .with_last_stable_offset(high_watermark)
        .with_log_start_offset(log_start)
        .with_preferred_read_replica(BrokerId(-1))
        .with_aborted_transactions(None)
        .with_records(Some(bytes::Bytes::new()))
}

/// A consumer's partition with records below its high watermark, still to be read; `slot` is
/// its place (topic, partition) in the response.
struct PendingRead {
    slot: (usize, usize),
    name: String,
    index: i32,
    fetch_offset: i64,
    partition_max_bytes: i64,
    state: Arc<PartitionState>,
    high_watermark: i64,
}

/// Reads the pending partitions with Kafka's rules, as if one after the other: each may take
/// `partition_max_bytes` of what is left of `max_bytes`, and the first to return records returns
/// its first batch whole. One after the other, a fetch of several partitions paid a trip to a
/// shard thread per partition; so a partition is read together with every one after it, and its
/// followers' answers are kept only when that order could not have changed them: the lead
/// returned records (so none of them owed a whole first batch) and what was left of the budget
/// after it covered all their `partition_max_bytes`. Otherwise, rare (an empty lead, or an
/// oversized first batch), the next partition leads a new round and the rest are read again.
async fn read_pending(
    ctx: &HandlerContext,
    pending: &[PendingRead],
    pass: &mut ReadPass,
    max_bytes: i64,
) {
    let Some(logs) = ctx.logs.as_ref() else {
        return;
    };
    if pending.is_empty() {
        return;
    }
    // What may be read is also what the node's read budget grants (see `ReadMemory`).
    let before = pass.bytes;
    let mut hold = logs.read_memory().take_up_to(max_bytes - before);
    let max_bytes = before + hold.bytes();
    read_in_order(ctx, pending, pass, max_bytes).await;
    hold.keep(pass.bytes - before);
    pass.read_memory.merge(hold);
}

/// [`read_pending`] within `max_bytes`.
async fn read_in_order(
    ctx: &HandlerContext,
    pending: &[PendingRead],
    pass: &mut ReadPass,
    max_bytes: i64,
) {
    let mut next = 0;
    while let Some(lead) = pending.get(next) {
        let budget = (max_bytes - pass.bytes).max(0);
        let lead_limit = lead.partition_max_bytes.min(budget);
        let first_data = pass.bytes == 0;
        let followers = &pending[next + 1..];
        let followers_wanted: i64 = followers.iter().map(|p| p.partition_max_bytes).sum();
        let together = !followers.is_empty() && budget - lead_limit >= followers_wanted;
        let round = if together {
            &pending[next..]
        } else {
            &pending[next..=next]
        };
        let reads = round.iter().enumerate().map(|(position, partition)| {
            let (limit, min_one_batch) = match position {
                0 => (lead_limit, first_data),
                _ => (partition.partition_max_bytes, false),
            };
            read_partition(ctx, partition, limit, min_one_batch)
        });
        let mut results = futures::future::join_all(reads).await.into_iter();
        let lead_result = results.next().flatten();
        let lead_bytes = lead_result
            .as_ref()
            .and_then(|r| r.as_ref().ok())
            .map_or(0, |read| read.records.len() as i64);
        let after_lead = pass.bytes + lead_bytes;
        let followers_stand =
            together && after_lead > 0 && max_bytes - after_lead >= followers_wanted;
        settle(pass, lead, lead_result);
        next += 1;
        if followers_stand {
            for (partition, result) in followers.iter().zip(results) {
                settle(pass, partition, result);
            }
            next = pending.len();
        }
    }
}

/// A pending partition's read; `None` when its limit left nothing to read.
type PartitionRead =
    Option<Result<crate::log_manager::ReadResult, crate::log_manager::LogManagerError>>;

/// Reads one partition, or nothing when its limit leaves nothing to read.
async fn read_partition(
    ctx: &HandlerContext,
    partition: &PendingRead,
    limit: i64,
    min_one_batch: bool,
) -> PartitionRead {
    if limit <= 0 && !min_one_batch {
        return None;
    }
    Some(match ctx.logs.as_ref() {
        Some(logs) => {
            logs.read(
                &partition.name,
                partition.index,
                partition.fetch_offset,
                limit as u64,
                min_one_batch,
            )
            .await
        }
        None => Err(crate::log_manager::LogManagerError::NoLog(String::new())),
    })
}

/// Puts a partition's read into its place in the response.
fn settle(pass: &mut ReadPass, partition: &PendingRead, result: PartitionRead) {
    let (topic, slot) = partition.slot;
    let Some(response) = pass
        .topics
        .get_mut(topic)
        .and_then(|t| t.partitions.get_mut(slot))
    else {
        return;
    };
    match result {
        None => {}
        Some(Ok(read)) => {
            pass.bytes += read.records.len() as i64;
            response.high_watermark = read.high_watermark;
            response.last_stable_offset = read.high_watermark;
            response.log_start_offset = read.log_start_offset;
            response.records = Some(read.records);
        }
        Some(Err(error)) => {
            tracing::debug!(partition = partition.index, %error, "fetch read failed");
            *response = partition_error(partition.index, error.code());
            return;
        }
    }
    pass.watched
        .push(Arc::clone(&partition.state), partition.high_watermark);
}

fn led_name(name: &Option<String>) -> String {
    name.clone().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;

    fn topic(name: &str, partitions: &[(i32, i16)]) -> FetchableTopicResponse {
        FetchableTopicResponse::default()
            .with_topic(TopicName(StrBytes::from_string(name.to_owned())))
            .with_partitions(
                partitions
                    .iter()
                    .map(|&(index, code)| partition_error(index, code))
                    .collect(),
            )
    }

    fn shape(topics: &[FetchableTopicResponse]) -> Vec<(String, Vec<i32>)> {
        topics
            .iter()
            .map(|t| {
                let indexes = t.partitions.iter().map(|p| p.partition_index).collect();
                (t.topic.to_string(), indexes)
            })
            .collect()
    }

    #[test]
    fn partitions_refused_before_the_read_come_last_and_topics_regroup() {
        let asked = vec![
            topic("t1", &[(2, NONE)]),
            topic("nosuch", &[(0, UNKNOWN_TOPIC_OR_PARTITION)]),
            topic(
                "t1",
                &[
                    (0, NONE),
                    (9, UNKNOWN_TOPIC_OR_PARTITION),
                    (1, OFFSET_OUT_OF_RANGE),
                ],
            ),
            topic("denied", &[(0, TOPIC_AUTHORIZATION_FAILED)]),
        ];
        let expected = vec![
            ("t1".to_owned(), vec![2, 0, 1]),
            ("nosuch".to_owned(), vec![0]),
            ("t1".to_owned(), vec![9]),
            ("denied".to_owned(), vec![0]),
        ];
        assert_eq!(shape(&kafka_order(asked)), expected);
    }

    /// Kafka's FailedFetchRequestsPerSec leaves out the errors `readFromLog` expects, and a
    /// partition refused in `handleFetchRequest` (partition 77 of a 3-partition topic) counts
    /// in neither meter.
    #[test]
    fn topic_fetch_counts_follow_kafkas_read_from_log() {
        let served =
            partition_error(0, NONE).with_records(Some(bytes::Bytes::from_static(b"12345")));
        let mut counts = (0, 0, 0);
        count_partition(&mut counts, &served);
        assert_eq!(counts, (1, 0, 5));
        // (code, (partitions, failed, bytes)): an expected error is a request, not a failure;
        // a partition refused before the read is neither; a negative partition_max_bytes below
        // the high watermark (Kafka's IllegalArgumentException) is a failure.
        for (code, expected) in [
            (NOT_LEADER_OR_FOLLOWER, (1, 0, 0)),
            (UNKNOWN_LEADER_EPOCH, (1, 0, 0)),
            (FENCED_LEADER_EPOCH, (1, 0, 0)),
            (REPLICA_NOT_AVAILABLE, (1, 0, 0)),
            (KAFKA_STORAGE_ERROR, (1, 0, 0)),
            (INCONSISTENT_TOPIC_ID, (1, 0, 0)),
            (OFFSET_OUT_OF_RANGE, (1, 0, 0)),
            (UNKNOWN_TOPIC_OR_PARTITION, (0, 0, 0)),
            (UNKNOWN_TOPIC_ID, (0, 0, 0)),
            (TOPIC_AUTHORIZATION_FAILED, (0, 0, 0)),
            (UNKNOWN_SERVER_ERROR, (1, 1, 0)),
        ] {
            let mut counts = (0, 0, 0);
            count_partition(&mut counts, &partition_error(77, code));
            assert_eq!(counts, expected, "{code}");
        }
    }

    /// Kafka's `maybeConvertFetchedData` answers a zstd topic's partitions below v10 as
    /// `FetchResponse.partitionResponse(tp, UNSUPPORTED_COMPRESSION_TYPE)`, whatever the read
    /// gave; the read still counts as a fetch, not a failed one, and its records as no bytes out.
    #[test]
    fn partitions_of_a_refused_codec_lose_their_offsets_and_records() {
        let served = |index: i32, records: &'static [u8]| {
            partition_error(index, NONE)
                .with_high_watermark(7)
                .with_last_stable_offset(7)
                .with_log_start_offset(2)
                .with_records(Some(bytes::Bytes::from_static(records)))
        };
        let mut topics = vec![
            topic(
                "zstd",
                &[(2, OFFSET_OUT_OF_RANGE), (3, TOPIC_AUTHORIZATION_FAILED)],
            ),
            topic("plain", &[]),
        ];
        topics[0].partitions.insert(0, served(0, b"12345"));
        topics[0].partitions.insert(1, served(1, b"123"));
        topics[1].partitions.push(served(0, b"1234567"));
        let mut counts = TopicFetchCounts::default();
        for topic in &topics {
            let counted = counts.0.entry(topic.topic.to_string()).or_default();
            for partition in &topic.partitions {
                count_partition(counted, partition);
            }
        }
        let before = counts.0.clone();
        assert_eq!(before["zstd"], (3, 0, 8));
        refuse_partitions(&mut topics, &mut counts, |topic, index| {
            topic == "zstd" && index != 1
        });
        let zstd = &topics[0].partitions;
        assert_eq!(zstd[0], partition_error(0, UNSUPPORTED_COMPRESSION_TYPE));
        assert_eq!(zstd[1], served(1, b"123"));
        assert_eq!(zstd[2], partition_error(2, UNSUPPORTED_COMPRESSION_TYPE));
        assert_eq!(zstd[3], partition_error(3, UNSUPPORTED_COMPRESSION_TYPE));
        assert_eq!(
            (
                zstd[0].high_watermark,
                zstd[0].last_stable_offset,
                zstd[0].log_start_offset
            ),
            (-1, -1, -1)
        );
        assert_eq!(topics[1].partitions[0], served(0, b"1234567"));
        assert_eq!(counts.0["zstd"], (3, 0, 3));
        assert_eq!(counts.0["plain"], before["plain"]);
    }

    #[test]
    fn error_partitions_carry_empty_records_and_no_aborted_transactions() {
        for code in [
            UNKNOWN_TOPIC_OR_PARTITION,
            UNKNOWN_TOPIC_ID,
            TOPIC_AUTHORIZATION_FAILED,
            OFFSET_OUT_OF_RANGE,
            NOT_LEADER_OR_FOLLOWER,
            FENCED_LEADER_EPOCH,
        ] {
            let failed = partition_error(0, code);
            assert_eq!(failed.records, Some(bytes::Bytes::new()), "{code}");
            assert_eq!(failed.aborted_transactions, None, "{code}");
        }
    }
}
