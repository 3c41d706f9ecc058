//! ListOffsets (key 2): earliest, latest, by timestamp and max timestamp.

use std::collections::HashSet;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, ResponseKind};

use gregor_publishers::acl::{AclOperation, ResourceType};

use super::data::{
    led_partition, listed_leader_epoch, INVALID_REQUEST, NONE, TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_OR_PARTITION, UNSUPPORTED_VERSION,
};
use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{HandlerContext, RequestInfo};
use crate::log_manager::{LogManagerError, OffsetMatch, OffsetQuery};

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
/// `replica_id` of a consumer's request (Kafka's `CONSUMER_REPLICA_ID`).
const CONSUMER_REPLICA_ID: i32 = -1;
/// OFFSET_NOT_AVAILABLE: a new leader's high watermark is behind the start of its epoch.
const OFFSET_NOT_AVAILABLE: i16 = 78;
/// LEADER_NOT_AVAILABLE, what versions before 5 get instead of OFFSET_NOT_AVAILABLE.
const LEADER_NOT_AVAILABLE: i16 = 5;

fn answer(index: i32, code: i16) -> ListOffsetsPartitionResponse {
    ListOffsetsPartitionResponse::default()
        .with_partition_index(index)
        .with_error_code(code)
        .with_timestamp(-1)
        .with_offset(-1)
        .with_leader_epoch(-1)
}

pub(super) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ListOffsetsRequest,
) -> ApiResponse {
    let version = info.api_version;
    let image = ctx.image.load_full();
    let mut topics = Vec::with_capacity(request.topics.len());
    let mut errors = ErrorCounts::default();
    // Kafka's `ReplicaManager.fetchOffset` answers every copy of a partition named more than
    // once INVALID_REQUEST (and keeps one entry of them, in its map of answers; here each copy
    // keeps its own entry, in request order).
    let mut seen = HashSet::new();
    let repeated: HashSet<(&str, i32)> = request
        .topics
        .iter()
        .flat_map(|topic| {
            topic
                .partitions
                .iter()
                .map(move |p| (topic.name.as_str(), p.partition_index))
        })
        .filter(|key| !seen.insert(*key))
        .collect();
    // Kafka: DESCRIBE on each topic.
    let access = Access::new(ctx, info);
    for topic in &request.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        let denied = !access.allows(AclOperation::Describe, ResourceType::Topic, &topic.name);
        for wanted in &topic.partitions {
            let index = wanted.partition_index;
            let response = if denied {
                answer(index, TOPIC_AUTHORIZATION_FAILED)
            } else if repeated.contains(&(topic.name.as_str(), index)) {
                answer(index, INVALID_REQUEST)
            } else {
                let client = request.replica_id.0 == CONSUMER_REPLICA_ID;
                lookup(ctx, &image, version, client, &topic.name, wanted).await
            };
            errors.add(response.error_code);
            partitions.push(response);
        }
        topics.push(
            ListOffsetsTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions),
        );
    }
    ApiResponse::new(
        ResponseKind::ListOffsets(ListOffsetsResponse::default().with_topics(topics)),
        errors,
    )
}

async fn lookup(
    ctx: &HandlerContext,
    image: &gregor_publishers::MetadataImage,
    version: i16,
    client: bool,
    topic: &str,
    wanted: &kafka_protocol::messages::list_offsets_request::ListOffsetsPartition,
) -> ListOffsetsPartitionResponse {
    let index = wanted.partition_index;
    let led = match led_partition(
        ctx,
        image,
        Some(topic),
        index,
        UNKNOWN_TOPIC_OR_PARTITION,
        false,
        // The field is v4+: older requests carry no epoch to check.
        listed_leader_epoch(wanted.current_leader_epoch).filter(|_| version >= 4),
    ) {
        Ok(led) => led,
        Err(not_served) => return answer(index, not_served.code),
    };
    let state = &led.state;
    // Kafka's `Partition.fetchOffsetForTimestamp`: until a new leader's high watermark reaches
    // the log end it started its epoch at (after an election, or a restart), what is visible to a
    // client is not known yet, so the latest offset, or a match at or past the high watermark,
    // is refused rather than answered from a high watermark that may go back.
    let high_watermark = state.high_watermark();
    let behind_epoch_start = client
        && state
            .replication()
            .leader_epoch_start_offset()
            .is_some_and(|start| start > high_watermark);
    let not_available = || {
        answer(
            index,
            if version >= 5 {
                OFFSET_NOT_AVAILABLE
            } else {
                LEADER_NOT_AVAILABLE
            },
        )
    };
    let found = |found: OffsetMatch| {
        answer(index, NONE)
            .with_offset(found.offset)
            .with_timestamp(found.timestamp)
            // A v4+ field: older versions cannot carry an epoch.
            .with_leader_epoch(if version >= 4 { found.leader_epoch } else { -1 })
    };
    let earliest = OffsetMatch {
        offset: state.log_start_offset(),
        timestamp: -1,
        leader_epoch: state.log_start_epoch(),
    };
    let query = match wanted.timestamp {
        // As Kafka's `Partition.fetchOffsetForTimestamp`: the high watermark (the last stable
        // offset, with no transactions, for read_committed too) in the current leader epoch.
        LATEST if behind_epoch_start => return not_available(),
        LATEST => {
            return found(OffsetMatch {
                offset: high_watermark,
                timestamp: -1,
                leader_epoch: led.registration.leader_epoch,
            })
        }
        EARLIEST => return found(earliest),
        // No tiered storage: the local log start is the log start.
        EARLIEST_LOCAL if version >= 8 => return found(earliest),
        LATEST_TIERED if version >= 9 => return answer(index, NONE),
        MAX_TIMESTAMP if version >= 7 => OffsetQuery::MaxTimestamp,
        ts if ts >= 0 => OffsetQuery::Timestamp(ts),
        _ => return answer(index, UNSUPPORTED_VERSION),
    };
    let Some(logs) = ctx.logs.as_ref() else {
        return answer(index, LogManagerError::NoLog(String::new()).code());
    };
    match logs.offset_lookup(topic, index, query).await {
        Ok(Some(record)) if record.offset >= high_watermark && behind_epoch_start => {
            not_available()
        }
        // A record at or past the high watermark is not visible yet: no match.
        Ok(Some(record)) if record.offset >= high_watermark => answer(index, NONE),
        Ok(Some(record)) => found(record),
        Ok(None) if behind_epoch_start => not_available(),
        Ok(None) => answer(index, NONE),
        Err(error) => answer(index, error.code()),
    }
}
