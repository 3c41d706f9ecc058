//! The log admin APIs: DeleteRecords (key 21), DescribeLogDirs (key 35) and DescribeProducers
//! (key 61), answered from this node's partition logs as Kafka's `ReplicaManager` answers them.

use std::collections::{BTreeMap, HashSet};

use futures::future::join_all;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{
    DeleteRecordsRequest, DeleteRecordsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse,
    DescribeProducersRequest, DescribeProducersResponse, ProducerId, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use gregor_publishers::acl::{AclOperation, ResourceType};

use super::data::{
    led_partition, KAFKA_STORAGE_ERROR, NONE, NOT_LEADER_OR_FOLLOWER, TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_OR_PARTITION,
};
use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{HandlerContext, RequestInfo};
use crate::log_manager::LogManagerError;

/// DeleteRecords: raises each partition's log start offset on the leader, then answers once
/// every replica on a live broker has raised its own (Kafka's DelayedDeleteRecords), so the
/// deleted records stay deleted whichever replica leads next. The low watermark answered is
/// the smallest log start offset of those replicas (−1 with an error); partitions still
/// waiting at the request's timeout answer REQUEST_TIMED_OUT.
pub(super) async fn delete_records(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: DeleteRecordsRequest,
) -> ApiResponse {
    let image = ctx.image.load_full();
    let deadline = tokio::time::Instant::now()
        + std::time::Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0));
    // Kafka: DELETE on each topic.
    let access = Access::new(ctx, info);
    let mut deletions = Vec::new();
    for (topic_index, topic) in request.topics.iter().enumerate() {
        let denied = !access.allows(AclOperation::Delete, ResourceType::Topic, &topic.name);
        for wanted in &topic.partitions {
            let index = wanted.partition_index;
            let led = match led_partition(
                ctx,
                &image,
                Some(&topic.name),
                index,
                UNKNOWN_TOPIC_OR_PARTITION,
                false,
                None,
            ) {
                _ if denied => Err(TOPIC_AUTHORIZATION_FAILED),
                Err(not_served) => Err(not_served.code),
                Ok(led) => Ok(led),
            };
            let deletion = async move {
                let led = led?;
                let logs = ctx
                    .logs
                    .as_ref()
                    .ok_or_else(|| LogManagerError::NoLog(String::new()).code())?;
                let log_start = logs
                    .delete_records(&topic.name, index, wanted.offset)
                    .await
                    .map_err(|e| {
                        tracing::debug!(topic = %topic.name.as_str(), partition = index, error = %e, "delete records refused");
                        e.code()
                    })?;
                // −1 asks for the high watermark, which the new log start is.
                let required = if wanted.offset < 0 {
                    log_start
                } else {
                    wanted.offset
                };
                let alive = |replica| {
                    ctx.image
                        .load()
                        .cluster
                        .broker(replica)
                        .is_some_and(|broker| !broker.fenced)
                };
                crate::replication::await_low_watermark(
                    &led.state,
                    led.registration.leader_epoch,
                    required,
                    deadline,
                    alive,
                )
                .await
            };
            deletions.push(async move { (topic_index, index, deletion.await) });
        }
    }
    let mut errors = ErrorCounts::default();
    let mut partitions: Vec<Vec<DeleteRecordsPartitionResult>> =
        request.topics.iter().map(|_| Vec::new()).collect();
    for (topic_index, index, result) in join_all(deletions).await {
        let (low_watermark, code) = match result {
            Ok(low_watermark) => (low_watermark, NONE),
            Err(code) => (-1, code),
        };
        errors.add(code);
        partitions[topic_index].push(
            DeleteRecordsPartitionResult::default()
                .with_partition_index(index)
                .with_low_watermark(low_watermark)
                .with_error_code(code),
        );
    }
    let topics = request
        .topics
        .iter()
        .zip(partitions)
        .map(|(topic, partitions)| {
            DeleteRecordsTopicResult::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ApiResponse::new(
        ResponseKind::DeleteRecords(DeleteRecordsResponse::default().with_topics(topics)),
        errors,
    )
}

/// DescribeLogDirs: every configured log dir with the requested partitions it holds (all of
/// them when the request names no topics); an offline dir answers KAFKA_STORAGE_ERROR alone.
pub(super) async fn describe_log_dirs(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: DescribeLogDirsRequest,
) -> ApiResponse {
    // Kafka: DESCRIBE on the cluster, else the request is refused with no directory.
    if !Access::new(ctx, info).allows_cluster(AclOperation::Describe) {
        let code = kafka_protocol::error::ResponseError::ClusterAuthorizationFailed.code();
        let mut errors = ErrorCounts::default();
        errors.add(code);
        return ApiResponse::new(
            ResponseKind::DescribeLogDirs(
                kafka_protocol::messages::DescribeLogDirsResponse::default().with_error_code(code),
            ),
            errors,
        );
    }
    let wanted: Option<HashSet<(String, i32)>> = request.topics.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.to_string(), *p)))
            .collect()
    });
    let dirs = match ctx.logs.as_ref() {
        Some(logs) => logs.describe_log_dirs().await,
        None => Vec::new(),
    };
    let mut errors = ErrorCounts::default();
    let mut results = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let path = StrBytes::from_string(dir.path.display().to_string());
        if !dir.online {
            errors.add(KAFKA_STORAGE_ERROR);
            results.push(
                DescribeLogDirsResult::default()
                    .with_log_dir(path)
                    .with_error_code(KAFKA_STORAGE_ERROR),
            );
            continue;
        }
        errors.add(NONE);
        // As Kafka: every topic with a log in the dir is listed, its partitions filtered to
        // the requested ones.
        let mut by_topic: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
        for (tp, size) in &dir.logs {
            let partitions = by_topic.entry(tp.topic.clone()).or_default();
            let requested = wanted
                .as_ref()
                .is_none_or(|w| w.contains(&(tp.topic.clone(), tp.partition)));
            if requested {
                partitions.push(
                    DescribeLogDirsPartition::default()
                        .with_partition_index(tp.partition)
                        .with_partition_size(i64::try_from(*size).unwrap_or(i64::MAX))
                        .with_offset_lag(0)
                        .with_is_future_key(false),
                );
            }
        }
        results.push(
            DescribeLogDirsResult::default()
                .with_log_dir(path)
                .with_error_code(NONE)
                .with_total_bytes(dir.total_bytes)
                .with_usable_bytes(dir.usable_bytes)
                .with_topics(
                    by_topic
                        .into_iter()
                        .map(|(name, partitions)| {
                            DescribeLogDirsTopic::default()
                                .with_name(TopicName(StrBytes::from_string(name)))
                                .with_partitions(partitions)
                        })
                        .collect(),
                ),
        );
    }
    ApiResponse::new(
        ResponseKind::DescribeLogDirs(
            DescribeLogDirsResponse::default()
                .with_error_code(NONE)
                .with_results(results),
        ),
        errors,
    )
}

/// Whether this node holds a serving replica of the partition, leader or follower: Kafka
/// answers DescribeProducers from the local log (`ReplicaManager.activeProducerState`).
fn hosted_replica(
    ctx: &HandlerContext,
    image: &gregor_publishers::MetadataImage,
    topic: &str,
    index: i32,
) -> Result<(), i16> {
    let registered = image.topics.get_by_name(topic);
    let Some(registration) = registered.and_then(|t| t.partition(index)) else {
        return Err(UNKNOWN_TOPIC_OR_PARTITION);
    };
    if !registration.replicas.as_slice().contains(&ctx.node.node_id) {
        return Err(NOT_LEADER_OR_FOLLOWER);
    }
    let state = ctx
        .logs
        .as_ref()
        .and_then(|logs| logs.partition(topic, index));
    match state {
        Some(state) if registered.is_some_and(|t| t.id == state.topic_id) && state.is_serving() => {
            Ok(())
        }
        Some(state) if state.is_offline() => Err(KAFKA_STORAGE_ERROR),
        _ => Err(NOT_LEADER_OR_FOLLOWER),
    }
}

/// DescribeProducers: the active producers of each partition's log (KIP-664).
pub(super) async fn describe_producers(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: DescribeProducersRequest,
) -> ApiResponse {
    let image = ctx.image.load_full();
    let mut errors = ErrorCounts::default();
    let mut topics = Vec::with_capacity(request.topics.len());
    // Kafka: READ on each topic.
    let access = Access::new(ctx, info);
    for topic in &request.topics {
        let mut partitions = Vec::with_capacity(topic.partition_indexes.len());
        let denied = !access.allows(AclOperation::Read, ResourceType::Topic, &topic.name);
        for &index in &topic.partition_indexes {
            let answer = PartitionResponse::default().with_partition_index(index);
            let producers = match hosted_replica(ctx, &image, &topic.name, index) {
                _ if denied => Err(TOPIC_AUTHORIZATION_FAILED),
                Err(code) => Err(code),
                Ok(()) => match ctx.logs.as_ref() {
                    Some(logs) => logs
                        .producers(&topic.name, index)
                        .await
                        .map_err(|e| e.code()),
                    None => Err(LogManagerError::NoLog(String::new()).code()),
                },
            };
            let answer = match producers {
                Ok(mut producers) => {
                    producers.sort_by_key(|p| p.producer_id);
                    answer.with_error_code(NONE).with_active_producers(
                        producers
                            .iter()
                            .map(|p| {
                                ProducerState::default()
                                    .with_producer_id(ProducerId(p.producer_id))
                                    .with_producer_epoch(i32::from(p.epoch))
                                    .with_last_sequence(p.last_seq())
                                    .with_last_timestamp(p.last_timestamp)
                                    .with_coordinator_epoch(p.coordinator_epoch)
                                    .with_current_txn_start_offset(
                                        p.current_txn_first_offset.unwrap_or(-1),
                                    )
                            })
                            .collect(),
                    )
                }
                Err(code) => answer.with_error_code(code),
            };
            errors.add(answer.error_code);
            partitions.push(answer);
        }
        topics.push(
            TopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    ApiResponse::new(
        ResponseKind::DescribeProducers(DescribeProducersResponse::default().with_topics(topics)),
        errors,
    )
}
