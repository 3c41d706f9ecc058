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
    FetchableTopicResponse, LeaderIdAndEpoch, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ResponseKind};
use kafka_protocol::protocol::Encodable;
use tokio::sync::futures::Notified;

use gregor_publishers::acl::{AclOperation, ResourceType};

use super::data::{
    check_leader_epoch, led_partition, requested_topic, KAFKA_STORAGE_ERROR, NONE,
    NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE, TOPIC_AUTHORIZATION_FAILED,
};
use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{HandlerContext, RequestInfo};
use crate::fetch_session::FetchContext;
use crate::log_manager::PartitionState;

/// Kafka's `fetch.max.bytes` default: the most one response carries.
const FETCH_MAX_BYTES: i64 = 57_671_680;

fn partition_error(index: i32, code: i16) -> PartitionData {
    PartitionData::default()
        .with_partition_index(index)
        .with_error_code(code)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_preferred_read_replica(BrokerId(-1))
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
    let max_bytes = i64::from(request.max_bytes).clamp(0, FETCH_MAX_BYTES);
    let min_bytes = i64::from(request.min_bytes).min(max_bytes);
    let wait = Duration::from_millis(u64::try_from(request.max_wait_ms).unwrap_or(0));
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let read = read_all(ctx, info, read_request, max_bytes).await;
        let done = wait.is_zero()
            || read.bytes >= min_bytes
            || read.any_error
            || read.urgent
            || read.waiting_on.is_empty()
            || tokio::time::Instant::now() >= deadline;
        if done {
            let mut body = FetchResponse::default().with_responses(read.topics);
            // The fetch byte-rate quota counts the response this would send (size prefix
            // included, the partitions a session omits excluded); over quota, the answer is
            // empty and carries the throttle time (Kafka also un-records those bytes, which
            // Gregor's sensors cannot, so a throttled client waits a little longer than with
            // Kafka).
            let size = if matches!(session, FetchContext::Incremental { .. }) {
                let mut sized = body.clone();
                if let Err(code) =
                    ctx.fetch_sessions
                        .respond(&session, &request, &mut sized.responses, false)
                {
                    return session_error(code, session.throttled_session_id());
                }
                sized.compute_size(version)
            } else {
                body.compute_size(version)
            }
            .unwrap_or(0)
                + 4;
            // Replication is not charged to client quotas.
            let throttle = if follower {
                0
            } else {
                ctx.quotas.fetch.shared.record_cached(
                    &mut info.fetch_quota.lock(),
                    &info.principal.name,
                    &info.client_id,
                    size as f64,
                    std::time::Instant::now(),
                )
            };
            let throttle = i32::try_from(throttle).unwrap_or(i32::MAX);
            if throttle > 0 {
                body.responses.clear();
                body.session_id = session.throttled_session_id();
                body.throttle_time_ms = throttle;
            } else {
                match ctx
                    .fetch_sessions
                    .respond(&session, &request, &mut body.responses, true)
                {
                    Ok(id) => body.session_id = id,
                    Err(code) => return session_error(code, session.throttled_session_id()),
                }
            }
            let mut errors = ErrorCounts::default();
            for partition in body.responses.iter().flat_map(|t| &t.partitions) {
                errors.add(partition.error_code);
            }
            record_topic_metrics(ctx, &body);
            let mut response = ApiResponse::new(ResponseKind::Fetch(body), errors);
            response.throttle_time_ms = throttle;
            return response;
        }
        // Arm the wake-ups, then look once more: an append between the read and the arming
        // would otherwise be missed until the deadline.
        let mut wakeups: Vec<Pin<Box<Notified<'_>>>> = read
            .waiting_on
            .iter()
            .map(|state| Box::pin(state.appended.notified()))
            .collect();
        for wakeup in &mut wakeups {
            wakeup.as_mut().enable();
        }
        let moved = read
            .waiting_on
            .iter()
            .zip(&read.sampled_high_watermarks)
            .any(|(state, sampled)| {
                super::replica_fetch::watched_offset(state, follower) != *sampled
                    || !state.is_serving()
            });
        if moved {
            continue;
        }
        tokio::select! {
            _ = futures::future::select_all(wakeups) => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
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

/// Broker topic metrics for the partitions a response carries (none when throttled).
fn record_topic_metrics(ctx: &HandlerContext, body: &FetchResponse) {
    let image = ctx.image.load();
    for topic in &body.responses {
        let name = if topic.topic.is_empty() {
            image
                .topics
                .get_by_id(&topic.topic_id)
                .map(|t| t.name.to_string())
        } else {
            Some(topic.topic.to_string())
        };
        let Some(name) = name else {
            continue;
        };
        for partition in &topic.partitions {
            gregor_metrics::topic_fetch(
                &name,
                (partition.error_code == NONE)
                    .then(|| partition.records.as_ref().map_or(0, |r| r.len() as u64)),
            );
        }
    }
}

/// One pass over every requested partition.
struct ReadPass {
    topics: Vec<FetchableTopicResponse>,
    bytes: i64,
    any_error: bool,
    /// Partitions a waiting fetch listens to, with the high watermarks this pass saw.
    waiting_on: Vec<Arc<PartitionState>>,
    sampled_high_watermarks: Vec<i64>,
    /// A follower must hear now (a diverging epoch).
    urgent: bool,
}

async fn read_all(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: &FetchRequest,
    max_bytes: i64,
) -> ReadPass {
    let version = info.api_version;
    let image = ctx.image.load_full();
    let mut pass = ReadPass {
        topics: Vec::with_capacity(request.topics.len()),
        bytes: 0,
        any_error: false,
        waiting_on: Vec::new(),
        sampled_high_watermarks: Vec::new(),
        urgent: false,
    };
    let replica_id = super::replica_fetch::replica_id(request, version);
    // Kafka: a follower needs CLUSTER_ACTION on the cluster (else every partition is refused),
    // a consumer READ on each topic.
    let access = Access::new(ctx, info);
    let follower_denied = replica_id >= 0 && !access.allows_cluster(AclOperation::ClusterAction);
    for topic in &request.topics {
        let (name, unknown_topic) =
            requested_topic(&image, version >= 13, &topic.topic_id, &topic.topic);
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        let denied = follower_denied
            || (replica_id < 0
                && name
                    .as_deref()
                    .is_some_and(|n| !access.allows(AclOperation::Read, ResourceType::Topic, n)));
        for wanted in &topic.partitions {
            let index = wanted.partition;
            if denied {
                pass.any_error = true;
                partitions.push(partition_error(index, TOPIC_AUTHORIZATION_FAILED));
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
                    pass.sampled_high_watermarks.push(log_end);
                    pass.waiting_on.push(state);
                }
                partitions.push(read.response);
                continue;
            }
            let led = match led_partition(ctx, &image, name.as_deref(), index, unknown_topic, false)
            {
                Ok(led) => led,
                Err(not_served) => {
                    // Fetch v5 and older know no storage error.
                    let code = if not_served.code == KAFKA_STORAGE_ERROR && version <= 5 {
                        NOT_LEADER_OR_FOLLOWER
                    } else {
                        not_served.code
                    };
                    let mut response = partition_error(index, code);
                    if let Some((leader, epoch)) = not_served.leader {
                        response.current_leader = LeaderIdAndEpoch::default()
                            .with_leader_id(BrokerId(leader))
                            .with_leader_epoch(epoch);
                    }
                    partitions.push(response);
                    continue;
                }
            };
            if let Err(code) =
                check_leader_epoch(wanted.current_leader_epoch, led.registration.leader_epoch)
            {
                partitions.push(partition_error(index, code));
                continue;
            }
            let state = led.state;
            let high_watermark = state.high_watermark();
            let log_start = state.log_start_offset();
            if wanted.fetch_offset > state.log_end_offset() || wanted.fetch_offset < log_start {
                partitions.push(partition_error(index, OFFSET_OUT_OF_RANGE));
                continue;
            }
            let mut response = PartitionData::default()
                .with_partition_index(index)
                .with_error_code(NONE)
                .with_high_watermark(high_watermark)
                .with_last_stable_offset(high_watermark)
                .with_log_start_offset(log_start)
                .with_preferred_read_replica(BrokerId(-1))
                .with_aborted_transactions((request.isolation_level == 1).then(Vec::new))
                .with_records(Some(bytes::Bytes::new()));
            let budget = (max_bytes - pass.bytes).max(0);
            let limit = i64::from(wanted.partition_max_bytes).clamp(0, budget);
            let first_data = pass.bytes == 0;
            if wanted.fetch_offset < high_watermark && (limit > 0 || first_data) {
                let read = match ctx.logs.as_ref() {
                    Some(logs) => {
                        logs.read(
                            &led_name(&name),
                            index,
                            wanted.fetch_offset,
                            limit as u64,
                            first_data,
                        )
                        .await
                    }
                    None => Err(crate::log_manager::LogManagerError::NoLog(String::new())),
                };
                match read {
                    Ok(read) => {
                        pass.bytes += read.records.len() as i64;
                        response.high_watermark = read.high_watermark;
                        response.last_stable_offset = read.high_watermark;
                        response.log_start_offset = read.log_start_offset;
                        response.records = Some(read.records);
                    }
                    Err(error) => {
                        tracing::debug!(partition = index, %error, "fetch read failed");
                        partitions.push(partition_error(index, error.code()));
                        continue;
                    }
                }
            }
            pass.sampled_high_watermarks.push(high_watermark);
            pass.waiting_on.push(state);
            partitions.push(response);
        }
        pass.topics.push(
            FetchableTopicResponse::default()
                .with_topic(topic.topic.clone())
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    pass.any_error = pass
        .topics
        .iter()
        .flat_map(|t| &t.partitions)
        .any(|p| p.error_code != NONE);
    pass
}

fn led_name(name: &Option<String>) -> String {
    name.clone().unwrap_or_default()
}
