//! DescribeQuorum (key 55, v0-2): the metadata quorum as its leader sees it.
//!
//! Offsets: Gregor's metadata log counts raft entries, so a replica's log end offset is the
//! index after its last entry and the high watermark the index after the last applied
//! (committed) entry on the leader. Timestamps come from [`QuorumState`] (the leader's
//! transport), the leader's own are "now" as in Kafka.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{
    BrokerId, DescribeQuorumRequest, DescribeQuorumResponse, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{ApiResponse, ErrorCounts};
use crate::context::{HandlerContext, RequestInfo};
use crate::quorum::{now_ms, QuorumState};

/// The metadata log's topic name.
pub const METADATA_TOPIC: &str = "__cluster_metadata";

pub(super) fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: &DescribeQuorumRequest,
) -> ApiResponse {
    let mut response = match (&info.controller_failure, &ctx.quorum) {
        // Kafka's error response for a DescribeQuorum: the error at the top level.
        (Some(failure), _) => DescribeQuorumResponse::default()
            .with_error_code(failure.error.code())
            .with_error_message(
                (info.api_version >= 2).then(|| StrBytes::from_string(failure.message.clone())),
            ),
        (None, Some(state)) => describe(state, request),
        (None, None) => single_error(ResponseError::NotLeaderOrFollower),
    };
    if info.api_version < 2 {
        without_v2_fields(&mut response);
    }
    let mut errors = ErrorCounts::default();
    errors.add(response.error_code);
    for topic in &response.topics {
        for partition in &topic.partitions {
            errors.add(partition.error_code);
        }
    }
    ApiResponse::new(ResponseKind::DescribeQuorum(response), errors)
}

/// Before v2 there are no directory ids and no voter endpoints (KIP-853): Kafka's
/// `RaftUtil` leaves them out for older versions, and the encoder refuses them.
fn without_v2_fields(response: &mut DescribeQuorumResponse) {
    response.nodes.clear();
    for partition in response
        .topics
        .iter_mut()
        .flat_map(|t| t.partitions.iter_mut())
    {
        for replica in partition
            .current_voters
            .iter_mut()
            .chain(partition.observers.iter_mut())
        {
            replica.replica_directory_id = Uuid::nil();
        }
    }
}

fn valid_partition(request: &DescribeQuorumRequest) -> bool {
    matches!(request.topics.as_slice(), [topic]
        if topic.topic_name.as_str() == METADATA_TOPIC
            && matches!(topic.partitions.as_slice(), [p] if p.partition_index == 0))
}

/// Kafka's answer for a non-leader: `__cluster_metadata-0` with a partition-level error.
fn single_error(error: ResponseError) -> DescribeQuorumResponse {
    DescribeQuorumResponse::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
        .with_partitions(vec![PartitionData::default()
            .with_partition_index(0)
            .with_error_code(error.code())
            .with_error_message(Some(StrBytes::from_static_str(
                "This controller is not the quorum leader; ask the active controller",
            )))])])
}

fn describe(state: &QuorumState, request: &DescribeQuorumRequest) -> DescribeQuorumResponse {
    if !valid_partition(request) {
        // Echo what was asked, each partition failing (Kafka's partition-level error).
        let code = ResponseError::UnknownTopicOrPartition.code();
        return DescribeQuorumResponse::default().with_topics(
            request
                .topics
                .iter()
                .map(|t| {
                    TopicData::default()
                        .with_topic_name(t.topic_name.clone())
                        .with_partitions(
                            t.partitions
                                .iter()
                                .map(|p| {
                                    PartitionData::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    }
    let metrics = state.log.metrics();
    if metrics.current_leader != Some(metrics.id) {
        return single_error(ResponseError::NotLeaderOrFollower);
    }
    let now = now_ms();
    let membership = metrics.membership_config.membership();
    let leader_end = metrics.last_log_index.map_or(0, |i| i as i64 + 1);
    let replica = |id: u64, directory_id: Uuid| {
        if id == metrics.id {
            return ReplicaState::default()
                .with_replica_id(BrokerId(id as i32))
                .with_replica_directory_id(directory_id)
                .with_log_end_offset(leader_end)
                .with_last_fetch_timestamp(now)
                .with_last_caught_up_timestamp(now);
        }
        let progress = state.progress(id).unwrap_or_default();
        let matched = metrics
            .replication
            .as_ref()
            .and_then(|r| r.get(&id).copied().flatten())
            .map(|l| l.index)
            .or(progress.matched_index);
        ReplicaState::default()
            .with_replica_id(BrokerId(id as i32))
            .with_replica_directory_id(directory_id)
            .with_log_end_offset(matched.map_or(-1, |m| m as i64 + 1))
            .with_last_fetch_timestamp(if progress.last_fetch_ms == 0 {
                -1
            } else {
                progress.last_fetch_ms
            })
            .with_last_caught_up_timestamp(if progress.last_caught_up_ms == 0 {
                -1
            } else {
                progress.last_caught_up_ms
            })
    };
    let voters: Vec<ReplicaState> = membership
        .voter_ids()
        .map(|id| {
            let directory = membership
                .get_node(&id)
                .map(|n| n.directory_id)
                .unwrap_or_default();
            replica(id, directory)
        })
        .collect();
    let mut observers: Vec<ReplicaState> = Vec::new();
    let mut listed: BTreeSet<(i32, Uuid)> = BTreeSet::new();
    for id in membership.learner_ids() {
        let directory = membership
            .get_node(&id)
            .map(|n| n.directory_id)
            .unwrap_or_default();
        listed.insert((id as i32, directory));
        observers.push(replica(id, directory));
    }
    // Observers that announced themselves but do not hold the learner slot of their id (a
    // second directory of one node id): known, not replicated to.
    let voter_ids: BTreeSet<u64> = membership.voter_ids().collect();
    for observer in state.observers() {
        let key = (observer.node_id, observer.directory_id);
        if listed.contains(&key) || voter_ids.contains(&(observer.node_id as u64)) {
            continue;
        }
        observers.push(
            ReplicaState::default()
                .with_replica_id(BrokerId(observer.node_id))
                .with_replica_directory_id(observer.directory_id)
                .with_log_end_offset(-1)
                .with_last_fetch_timestamp(-1)
                .with_last_caught_up_timestamp(-1),
        );
    }
    let nodes = membership
        .voter_ids()
        .filter_map(|id| membership.get_node(&id).map(|n| (id, n)))
        .map(|(id, node)| {
            Node::default()
                .with_node_id(BrokerId(id as i32))
                .with_listeners(
                    node.endpoints
                        .iter()
                        .map(|e| {
                            Listener::default()
                                .with_name(StrBytes::from_string(e.name.clone()))
                                .with_host(StrBytes::from_string(e.host.clone()))
                                .with_port(e.port)
                        })
                        .collect(),
                )
        })
        .collect();
    let high_watermark = metrics.last_applied.map_or(0, |l| l.index as i64 + 1);
    DescribeQuorumResponse::default()
        .with_topics(vec![TopicData::default()
            .with_topic_name(TopicName(StrBytes::from_static_str(METADATA_TOPIC)))
            .with_partitions(vec![PartitionData::default()
                .with_partition_index(0)
                .with_leader_id(BrokerId(metrics.id as i32))
                .with_leader_epoch(metrics.current_term as i32)
                .with_high_watermark(high_watermark)
                .with_current_voters(voters)
                .with_observers(observers)])])
        .with_nodes(nodes)
}
