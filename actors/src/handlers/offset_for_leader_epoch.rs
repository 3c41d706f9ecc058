//! OffsetForLeaderEpoch (key 23): where a leader epoch ends in this leader's log, from its
//! leader-epoch cache (KIP-101; consumers use it after a leader change, KIP-320).

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ResponseKind,
};

use gregor_publishers::acl::{AclOperation, ResourceType};

use super::data::{
    led_partition, listed_leader_epoch, NONE, TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_OR_PARTITION,
};
use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{HandlerContext, RequestInfo};

fn answer(partition: i32, code: i16) -> EpochEndOffset {
    EpochEndOffset::default()
        .with_partition(partition)
        .with_error_code(code)
        .with_leader_epoch(-1)
        .with_end_offset(-1)
}

pub(super) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: OffsetForLeaderEpochRequest,
) -> ApiResponse {
    let image = ctx.image.load_full();
    // Kafka: CLUSTER_ACTION on the cluster covers every topic, else DESCRIBE on each.
    let access = Access::new(ctx, info);
    let cluster_action = access.quietly_allows(
        AclOperation::ClusterAction,
        ResourceType::Cluster,
        gregor_publishers::acl::CLUSTER_NAME,
    );
    let mut errors = ErrorCounts::default();
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        let denied = !cluster_action
            && !access.allows(AclOperation::Describe, ResourceType::Topic, &topic.topic);
        for wanted in &topic.partitions {
            let index = wanted.partition;
            if denied {
                let result = answer(index, TOPIC_AUTHORIZATION_FAILED);
                errors.add(result.error_code);
                partitions.push(result);
                continue;
            }
            let result = match led_partition(
                ctx,
                &image,
                Some(topic.topic.as_str()),
                index,
                UNKNOWN_TOPIC_OR_PARTITION,
                false,
                listed_leader_epoch(wanted.current_leader_epoch),
            ) {
                Err(not_served) => answer(index, not_served.code),
                Ok(_) => end_offset(ctx, &topic.topic, index, wanted.leader_epoch).await,
            };
            errors.add(result.error_code);
            partitions.push(result);
        }
        topics.push(
            OffsetForLeaderTopicResult::default()
                .with_topic(topic.topic.clone())
                .with_partitions(partitions),
        );
    }
    ApiResponse::new(
        ResponseKind::OffsetForLeaderEpoch(
            OffsetForLeaderEpochResponse::default().with_topics(topics),
        ),
        errors,
    )
}

async fn end_offset(ctx: &HandlerContext, topic: &str, index: i32, epoch: i32) -> EpochEndOffset {
    let Some(logs) = ctx.logs.as_ref() else {
        return answer(
            index,
            crate::log_manager::LogManagerError::NoLog(String::new()).code(),
        );
    };
    match logs.end_offset_for_epoch(topic, index, epoch).await {
        Ok((leader_epoch, end_offset)) => answer(index, NONE)
            .with_leader_epoch(leader_epoch)
            .with_end_offset(end_offset),
        Err(error) => answer(index, error.code()),
    }
}
