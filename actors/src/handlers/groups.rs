//! The group APIs: FindCoordinator (10), JoinGroup (11), Heartbeat (12), LeaveGroup (13),
//! SyncGroup (14), DescribeGroups (15), ListGroups (16), OffsetCommit (8), OffsetFetch (9),
//! DeleteGroups (42) and OffsetDelete (47).
//!
//! FindCoordinator is answered from the image (the leader of the group's `__consumer_offsets`
//! partition), creating that topic through the controller on first use. Everything else goes to
//! the [`GroupCoordinator`](crate::groups::GroupCoordinator) actor, which owns the groups.

use std::collections::HashMap;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment as DescribeAssignment, DescribedGroup as DescribedConsumerGroup,
    Member as DescribedConsumerMember, TopicPartitions as DescribeTopicPartitions,
};
use kafka_protocol::messages::consumer_group_heartbeat_response::{
    Assignment as HeartbeatAssignment, TopicPartitions as HeartbeatTopicPartitions,
};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    BrokerId, ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, CreateTopicsRequest,
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    FindCoordinatorRequest, FindCoordinatorResponse, GroupId, HeartbeatRequest, HeartbeatResponse,
    JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse, ListGroupsRequest,
    ListGroupsResponse, OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
    OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse, ResponseKind, SyncGroupRequest,
    SyncGroupResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use gregor_publishers::acl::{AclOperation, ResourceType};
use gregor_publishers::MetadataImage;

use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::CreateTopics;
use crate::groups::assignor::Assignment;
use crate::groups::protocols::Protocols;
use crate::groups::state::{
    CommitPartition, CommitRequest, ConsumerHeartbeat, DescribableTopics, JoinRequest, JoinResult,
    Leaving, SyncRequest, SyncResult,
};
use crate::groups::topic_names::TopicNames;
use crate::groups::{self, codes, partition_for, GroupCoordinator, Groups, OFFSETS_TOPIC};

/// FindCoordinator key types.
const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;
const KEY_TYPE_SHARE: i8 = 2;

/// Without an authorizer every principal may do everything a group supports: READ(3),
/// DELETE(6), DESCRIBE(8).
const ALL_GROUP_OPERATIONS: i32 = 1 << 3 | 1 << 6 | 1 << 8;
/// `authorized_operations` when the client did not ask for them.
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;
const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;

fn text(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

/// Kafka's `Errors.message()`: the exception's default message, "NONE" for success.
fn error_message(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        None => "NONE".to_owned(),
        Some(error) => error.to_string(),
    }
}

fn no_coordinator(ctx: &HandlerContext) -> Option<&Groups> {
    ctx.groups.as_ref()
}

/// Why the coordinator actor could not be asked: the node is shutting down.
fn mailbox_closed(error: &actix::MailboxError) -> i16 {
    tracing::error!(%error, "group coordinator unavailable");
    codes::COORDINATOR_NOT_AVAILABLE
}

/// What the coordinator said of one group of a request ([`ask_coordinator`]).
enum Asked<T> {
    /// Its authorization failed: the coordinator was not asked.
    Refused,
    Answered(T),
    /// This node has no group coordinator.
    NoCoordinator,
    /// The coordinator's mailbox failed: the code to answer ([`mailbox_closed`]).
    Unavailable(i16),
}

/// Each group of a request with what the coordinator said of it, in request order. `query`
/// authorizes a group (`None`: refused) and says what to ask of it; the allowed groups go in
/// one `message`, so a request naming many groups costs one actor round trip, not one each.
async fn ask_coordinator<G, Q, M, T>(
    ctx: &HandlerContext,
    groups: Vec<G>,
    mut query: impl FnMut(&G) -> Option<Q>,
    message: impl FnOnce(Vec<Q>) -> M,
) -> Vec<(G, Asked<T>)>
where
    M: actix::Message<Result = Vec<T>> + Send + 'static,
    T: Send + 'static,
    GroupCoordinator: actix::Handler<M>,
{
    // Every group is authorized, in request order, before the coordinator is asked.
    let mut allowed = Vec::with_capacity(groups.len());
    let mut queries = Vec::new();
    for group in &groups {
        let asked = query(group);
        allowed.push(asked.is_some());
        queries.extend(asked);
    }
    let count = queries.len();
    let answers: Vec<Asked<T>> = match no_coordinator(ctx) {
        // Every group was refused: there is nothing to ask.
        _ if queries.is_empty() => Vec::new(),
        None => std::iter::repeat_with(|| Asked::NoCoordinator)
            .take(count)
            .collect(),
        Some(groups) => match groups.coordinator.send(message(queries)).await {
            Ok(answers) => answers.into_iter().map(Asked::Answered).collect(),
            Err(error) => {
                let code = mailbox_closed(&error);
                std::iter::repeat_with(|| Asked::Unavailable(code))
                    .take(count)
                    .collect()
            }
        },
    };
    let mut answers = answers.into_iter();
    groups
        .into_iter()
        .zip(allowed)
        .map(|(group, allowed)| {
            let asked = if allowed {
                // The coordinator answers every query; one missing counts as its failure.
                answers
                    .next()
                    .unwrap_or(Asked::Unavailable(codes::COORDINATOR_NOT_AVAILABLE))
            } else {
                Asked::Refused
            };
            (group, asked)
        })
        .collect()
}

/// The group's id to ask the coordinator about, if the request may do `operation` on it.
fn if_allowed(access: &Access<'_>, operation: AclOperation, group_id: &GroupId) -> Option<String> {
    access
        .allows(operation, ResourceType::Group, group_id)
        .then(|| group_id.0.as_str().to_owned())
}

pub(super) async fn find_coordinator(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: FindCoordinatorRequest,
) -> ApiResponse {
    let version = info.api_version;
    let keys: Vec<String> = if version >= 4 {
        request
            .coordinator_keys
            .iter()
            .map(|k| k.as_str().to_owned())
            .collect()
    } else {
        vec![request.key.as_str().to_owned()]
    };
    let mut image = ctx.image.load_full();
    let wants_groups = request.key_type == KEY_TYPE_GROUP;
    if wants_groups && image.topics.get_by_name(OFFSETS_TOPIC).is_none() && !keys.is_empty() {
        create_offsets_topic(ctx, info, &image).await;
        image = ctx.image.load_full();
    }
    // Kafka: DESCRIBE on the group or transactional id, per key.
    let access = Access::new(ctx, info);
    let answers: Vec<Located> = keys
        .iter()
        .map(|key| match request.key_type {
            KEY_TYPE_GROUP if !access.allows(AclOperation::Describe, ResourceType::Group, key) => {
                Err((GROUP_AUTHORIZATION_FAILED, error_message(GROUP_AUTHORIZATION_FAILED)))
            }
            KEY_TYPE_TRANSACTION
                if !access.allows(AclOperation::Describe, ResourceType::TransactionalId, key) =>
            {
                Err((
                    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    error_message(TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
                ))
            }
            KEY_TYPE_GROUP => group_coordinator(ctx, info, &image, key),
            KEY_TYPE_TRANSACTION => Err((
                codes::COORDINATOR_NOT_AVAILABLE,
                "Transactions are not supported by this broker yet; the transaction coordinator is not available.".to_owned(),
            )),
            KEY_TYPE_SHARE if version >= 6 => Err((
                codes::COORDINATOR_NOT_AVAILABLE,
                "Share groups are not supported by this broker; the share coordinator is not available.".to_owned(),
            )),
            other => Err((
                codes::INVALID_REQUEST,
                format!("Unknown coordinator type {other} in request"),
            )),
        })
        .collect();
    let mut errors = ErrorCounts::default();
    let mut response = FindCoordinatorResponse::default();
    if version >= 4 {
        response.coordinators = keys
            .into_iter()
            .zip(answers)
            .map(|(key, answer)| {
                let coordinator = Coordinator::default().with_key(text(key));
                match answer {
                    Ok((node, host, port)) => {
                        errors.add(codes::NONE);
                        coordinator
                            .with_node_id(BrokerId(node))
                            .with_host(text(host))
                            .with_port(port)
                            .with_error_message(Some(text(error_message(codes::NONE))))
                    }
                    Err((code, message)) => {
                        errors.add(code);
                        coordinator
                            .with_node_id(BrokerId(-1))
                            .with_host(text(""))
                            .with_port(-1)
                            .with_error_code(code)
                            .with_error_message(Some(text(message)))
                    }
                }
            })
            .collect();
    } else {
        match answers.into_iter().next() {
            Some(Ok((node, host, port))) => {
                errors.add(codes::NONE);
                response = response
                    .with_node_id(BrokerId(node))
                    .with_host(text(host))
                    .with_port(port)
                    .with_error_message(Some(text(error_message(codes::NONE))));
            }
            Some(Err((code, message))) => {
                errors.add(code);
                response = response
                    .with_error_code(code)
                    .with_error_message(Some(text(message)))
                    .with_node_id(BrokerId(-1))
                    .with_host(text(""))
                    .with_port(-1);
            }
            None => {}
        }
    }
    ApiResponse::new(ResponseKind::FindCoordinator(response), errors)
}

/// A coordinator's (node id, host, port), or why there is none (code, message).
type Located = Result<(i32, String, i32), (i16, String)>;

/// The leader of the group's partition, reachable on the request's listener.
fn group_coordinator(
    ctx: &HandlerContext,
    info: &RequestInfo,
    image: &MetadataImage,
    group_id: &str,
) -> Located {
    let unavailable = |why: &str| {
        Err((
            codes::COORDINATOR_NOT_AVAILABLE,
            format!("The coordinator is not available: {why}"),
        ))
    };
    if no_coordinator(ctx).is_none() {
        return unavailable("this node is not a broker");
    }
    let Some(topic) = image.topics.get_by_name(OFFSETS_TOPIC) else {
        return unavailable("the __consumer_offsets topic is being created");
    };
    let count = topic.partitions().count() as i32;
    let partition = partition_for(group_id, count);
    let Some(registration) = topic.partition(partition) else {
        return unavailable("the group's partition does not exist");
    };
    let Some(broker) = image
        .cluster
        .broker(registration.leader)
        .filter(|b| !b.fenced)
    else {
        return unavailable("the group's partition has no live leader");
    };
    let Some(endpoint) = broker.endpoint(&info.listener_name) else {
        return unavailable("the coordinator has no endpoint on this listener");
    };
    Ok((broker.id, endpoint.host.clone(), i32::from(endpoint.port)))
}

/// Asks the controller to create `__consumer_offsets` (compacted, `offsets.topic.*`). The
/// replication factor is capped at the live brokers, so a cluster smaller than
/// `offsets.topic.replication.factor` still gets one (Kafka keeps failing instead).
async fn create_offsets_topic(ctx: &HandlerContext, info: &RequestInfo, image: &MetadataImage) {
    let Some(groups) = no_coordinator(ctx) else {
        return;
    };
    let settings = &groups.settings;
    let live = image.cluster.brokers().filter(|b| !b.fenced).count();
    let replication = settings
        .offsets_topic_replication_factor
        .min(i16::try_from(live).unwrap_or(i16::MAX))
        .max(1);
    let config = |name: &str, value: String| {
        CreatableTopicConfig::default()
            .with_name(text(name))
            .with_value(Some(text(value)))
    };
    let topic = CreatableTopic::default()
        .with_name(TopicName(text(OFFSETS_TOPIC)))
        .with_num_partitions(settings.offsets_topic_partitions)
        .with_replication_factor(replication)
        .with_configs(vec![
            config("cleanup.policy", "compact".to_owned()),
            config("compression.type", "producer".to_owned()),
            config(
                "segment.bytes",
                settings.offsets_topic_segment_bytes.to_string(),
            ),
        ]);
    let request = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(30_000);
    let version = crate::controller::LATEST_CREATE_TOPICS_VERSION;
    tracing::info!(
        partitions = settings.offsets_topic_partitions,
        replication,
        "creating __consumer_offsets"
    );
    let forwarder = ctx
        .forwarder
        .as_ref()
        .filter(|_| ctx.quorum.as_ref().is_some_and(|q| !q.is_leader()));
    let response = match forwarder {
        // An internal topic is the broker's own request (Kafka sends it without an Envelope).
        Some(forwarder) => forwarder
            .create_topics(request, version, None)
            .await
            .answered(),
        None => ctx
            .controller
            .send(CreateTopics {
                request,
                version,
                principal: (*info.principal).clone(),
                client_id: info.client_id.to_string(),
            })
            .await
            .ok(),
    };
    match response {
        Some(response) => {
            for topic in response.topics {
                if topic.error_code != 0
                    && topic.error_code != ResponseError::TopicAlreadyExists.code()
                {
                    tracing::warn!(code = topic.error_code, message = ?topic.error_message, "creating __consumer_offsets failed");
                }
            }
        }
        None => tracing::warn!("no controller reachable to create __consumer_offsets"),
    }
}

pub(super) async fn join_group(
    ctx: &HandlerContext,
    info: &RequestInfo,
    mut request: JoinGroupRequest,
) -> ApiResponse {
    let listed = std::mem::take(&mut request.protocols);
    let protocols =
        Protocols::from_pairs(listed.iter().map(|p| (p.name.as_str(), &p.metadata[..])));
    drop(listed);
    join_group_listed(ctx, info, request, protocols).await
}

/// JoinGroup of `request` (its own protocols ignored) with `protocols`, read from its frame
/// or decoded.
pub async fn join_group_listed(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: JoinGroupRequest,
    protocols: Protocols,
) -> ApiResponse {
    ctx.publishers_caught_up().await;
    let member_id = request.member_id.as_str().to_owned();
    let join = JoinRequest {
        version: info.api_version,
        group_id: request.group_id.0.as_str().to_owned(),
        member_id: member_id.clone(),
        group_instance_id: request.group_instance_id.map(|i| i.as_str().to_owned()),
        client_id: info.client_id.to_string(),
        client_host: info.client_host.to_string(),
        session_timeout_ms: request.session_timeout_ms,
        // v0 has no rebalance timeout: the session timeout serves as both.
        rebalance_timeout_ms: if info.api_version == 0 {
            request.session_timeout_ms
        } else {
            request.rebalance_timeout_ms
        },
        protocol_type: request.protocol_type.as_str().to_owned(),
        protocols,
    };
    let allowed =
        Access::new(ctx, info).allows(AclOperation::Read, ResourceType::Group, &join.group_id);
    let result = match no_coordinator(ctx) {
        _ if !allowed => JoinResult::error(GROUP_AUTHORIZATION_FAILED, &member_id),
        None => JoinResult::error(codes::COORDINATOR_NOT_AVAILABLE, &member_id),
        Some(groups) => match groups
            .coordinator
            .send(groups::JoinGroup(join, ctx.image.load_full()))
            .await
        {
            Ok(receiver) => receiver.await.unwrap_or_else(|_| {
                JoinResult::error(codes::COORDINATOR_NOT_AVAILABLE, &member_id)
            }),
            Err(error) => JoinResult::error(mailbox_closed(&error), &member_id),
        },
    };
    let mut errors = ErrorCounts::default();
    errors.add(result.error);
    let response = JoinGroupResponse::default()
        .with_error_code(result.error)
        .with_generation_id(result.generation)
        .with_protocol_type(result.protocol_type.map(text))
        // v0-v6 have no nullable name: an empty string stands for none.
        .with_protocol_name(Some(text(result.protocol_name.unwrap_or_default())))
        .with_leader(text(result.leader))
        .with_skip_assignment(result.skip_assignment)
        .with_member_id(text(result.member_id))
        .with_members(
            result
                .members
                .into_iter()
                .map(|m| {
                    JoinGroupResponseMember::default()
                        .with_member_id(text(m.member_id))
                        .with_group_instance_id(m.group_instance_id.map(text))
                        .with_metadata(m.metadata)
                })
                .collect(),
        );
    ApiResponse::new(ResponseKind::JoinGroup(response), errors)
}

pub(super) async fn sync_group(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: SyncGroupRequest,
) -> ApiResponse {
    let sync = SyncRequest {
        group_id: request.group_id.0.as_str().to_owned(),
        generation: request.generation_id,
        member_id: request.member_id.as_str().to_owned(),
        group_instance_id: request.group_instance_id.map(|i| i.as_str().to_owned()),
        protocol_type: request
            .protocol_type
            .filter(|_| info.api_version >= 5)
            .map(|t| t.as_str().to_owned()),
        protocol_name: request
            .protocol_name
            .filter(|_| info.api_version >= 5)
            .map(|t| t.as_str().to_owned()),
        assignments: request.assignments,
    };
    let allowed =
        Access::new(ctx, info).allows(AclOperation::Read, ResourceType::Group, &sync.group_id);
    let result = match no_coordinator(ctx) {
        _ if !allowed => SyncResult::error(GROUP_AUTHORIZATION_FAILED),
        None => SyncResult::error(codes::COORDINATOR_NOT_AVAILABLE),
        Some(groups) => match groups
            .coordinator
            .send(groups::SyncGroup(sync, ctx.image.load_full()))
            .await
        {
            Ok(receiver) => receiver
                .await
                .unwrap_or_else(|_| SyncResult::error(codes::COORDINATOR_NOT_AVAILABLE)),
            Err(error) => SyncResult::error(mailbox_closed(&error)),
        },
    };
    let mut errors = ErrorCounts::default();
    errors.add(result.error);
    let response = SyncGroupResponse::default()
        .with_error_code(result.error)
        .with_protocol_type(result.protocol_type.map(text))
        .with_protocol_name(result.protocol_name.map(text))
        .with_assignment(result.assignment);
    ApiResponse::new(ResponseKind::SyncGroup(response), errors)
}

pub(super) async fn heartbeat(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: HeartbeatRequest,
) -> ApiResponse {
    let allowed =
        Access::new(ctx, info).allows(AclOperation::Read, ResourceType::Group, &request.group_id);
    let code = match no_coordinator(ctx) {
        _ if !allowed => GROUP_AUTHORIZATION_FAILED,
        None => codes::COORDINATOR_NOT_AVAILABLE,
        Some(groups) => groups
            .coordinator
            .send(groups::Heartbeat {
                group_id: request.group_id.0.as_str().to_owned(),
                member_id: request.member_id.as_str().to_owned(),
                group_instance_id: request.group_instance_id.map(|i| i.as_str().to_owned()),
                generation: request.generation_id,
            })
            .await
            .unwrap_or_else(|e| mailbox_closed(&e)),
    };
    let mut errors = ErrorCounts::default();
    errors.add(code);
    ApiResponse::new(
        ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(code)),
        errors,
    )
}

pub(super) async fn leave_group(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: LeaveGroupRequest,
) -> ApiResponse {
    let leaving: Vec<Leaving> = if info.api_version >= 3 {
        request
            .members
            .iter()
            .map(|m| Leaving {
                member_id: m.member_id.as_str().to_owned(),
                group_instance_id: m.group_instance_id.as_ref().map(|i| i.as_str().to_owned()),
            })
            .collect()
    } else {
        vec![Leaving {
            member_id: request.member_id.as_str().to_owned(),
            group_instance_id: None,
        }]
    };
    let allowed =
        Access::new(ctx, info).allows(AclOperation::Read, ResourceType::Group, &request.group_id);
    let (top, per_member) = match no_coordinator(ctx) {
        _ if !allowed => (
            GROUP_AUTHORIZATION_FAILED,
            vec![GROUP_AUTHORIZATION_FAILED; leaving.len()],
        ),
        None => (
            codes::COORDINATOR_NOT_AVAILABLE,
            vec![codes::COORDINATOR_NOT_AVAILABLE; leaving.len()],
        ),
        Some(groups) => groups
            .coordinator
            .send(groups::LeaveGroup {
                group_id: request.group_id.0.as_str().to_owned(),
                members: leaving.clone(),
            })
            .await
            .unwrap_or_else(|e| {
                let code = mailbox_closed(&e);
                (code, vec![code; leaving.len()])
            }),
    };
    let mut errors = ErrorCounts::default();
    let mut response = LeaveGroupResponse::default();
    if info.api_version >= 3 {
        errors.add(top);
        errors.add_all(per_member.iter().copied());
        response.error_code = top;
        response.members = leaving
            .into_iter()
            .zip(per_member)
            .map(|(m, code)| {
                MemberResponse::default()
                    .with_member_id(text(m.member_id))
                    .with_group_instance_id(m.group_instance_id.map(text))
                    .with_error_code(code)
            })
            .collect();
    } else {
        // One member: its code is the response's.
        let code = if top != codes::NONE {
            top
        } else {
            per_member.first().copied().unwrap_or(codes::NONE)
        };
        errors.add(code);
        response.error_code = code;
    }
    ApiResponse::new(ResponseKind::LeaveGroup(response), errors)
}

/// Whether the image has the partition (commits for unknown partitions are refused).
fn partition_exists(image: &MetadataImage, topic: &str, partition: i32) -> bool {
    image
        .topics
        .get_by_name(topic)
        .is_some_and(|t| t.partition(partition).is_some())
}

pub(super) async fn offset_commit(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: OffsetCommitRequest,
) -> ApiResponse {
    let image = ctx.image.load_full();
    // Kafka: READ on the group refuses the whole commit, READ on each topic its partitions.
    let access = Access::new(ctx, info);
    let group_allowed = access.allows(AclOperation::Read, ResourceType::Group, &request.group_id);
    let topic_allowed: Vec<bool> = request
        .topics
        .iter()
        .map(|t| !group_allowed || access.allows(AclOperation::Read, ResourceType::Topic, &t.name))
        .collect();
    let partitions: Vec<CommitPartition> = request
        .topics
        .iter()
        .zip(&topic_allowed)
        .flat_map(|(t, &allowed)| {
            let image = &image;
            t.partitions.iter().map(move |p| CommitPartition {
                topic: t.name.0.as_str().to_owned(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(|m| m.as_str().to_owned()),
                error: if !allowed {
                    TOPIC_AUTHORIZATION_FAILED
                } else if partition_exists(image, t.name.0.as_str(), p.partition_index) {
                    codes::NONE
                } else {
                    codes::UNKNOWN_TOPIC_OR_PARTITION
                },
            })
        })
        .collect();
    let count = partitions.len();
    let commit = CommitRequest {
        version: info.api_version,
        group_id: request.group_id.0.as_str().to_owned(),
        generation: request.generation_id_or_member_epoch,
        member_id: request.member_id.as_str().to_owned(),
        group_instance_id: request.group_instance_id.map(|i| i.as_str().to_owned()),
        retention_ms: if (2..=4).contains(&info.api_version) {
            request.retention_time_ms
        } else {
            -1
        },
        partitions,
    };
    let results: Vec<i16> = match no_coordinator(ctx) {
        _ if !group_allowed => vec![GROUP_AUTHORIZATION_FAILED; count],
        None => vec![codes::COORDINATOR_NOT_AVAILABLE; count],
        Some(groups) => match groups.coordinator.send(groups::CommitOffsets(commit)).await {
            Ok((mut results, written)) => {
                // Kafka answers once the records are written and replicated, within
                // offsets.commit.timeout.ms; a write not done by then is COORDINATOR_NOT_AVAILABLE
                // (Kafka's answer for a timed-out offsets append), whichever timer fires first.
                let outcome = tokio::time::timeout(groups.settings.offsets_commit_timeout, written)
                    .await
                    .map(|r| r.unwrap_or(codes::COORDINATOR_NOT_AVAILABLE))
                    .unwrap_or(codes::COORDINATOR_NOT_AVAILABLE);
                if outcome != codes::NONE {
                    for code in results.iter_mut().filter(|c| **c == codes::NONE) {
                        *code = outcome;
                    }
                }
                results
            }
            Err(error) => vec![mailbox_closed(&error); count],
        },
    };
    let mut results = results.into_iter();
    let mut errors = ErrorCounts::default();
    let topics = request
        .topics
        .into_iter()
        .map(|t| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name)
                .with_topic_id(t.topic_id)
                .with_partitions(
                    t.partitions
                        .iter()
                        .map(|p| {
                            let code = results.next().unwrap_or(codes::NONE);
                            errors.add(code);
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    ApiResponse::new(
        ResponseKind::OffsetCommit(OffsetCommitResponse::default().with_topics(topics)),
        errors,
    )
}

/// The committed offsets of one group for OffsetFetch: [(topic, [(partition, offset, epoch,
/// metadata, error)])].
type FetchedTopics = Vec<(String, Vec<(i32, i64, i32, Option<String>, i16)>)>;

/// The topics an OffsetFetch names for a group, with their partitions (`None`: all).
type NamedTopics = Option<Vec<(String, Vec<i32>)>>;

/// One group of an OffsetFetch (v8+ name several, earlier versions one).
struct OffsetFetchGroup {
    group_id: GroupId,
    /// v9+: a named member (a KIP-848 consumer) is validated with its epoch.
    member: Option<(String, i32)>,
    topics: NamedTopics,
}

/// The named partitions, each answered with `code` and no offset.
fn listed(topics: NamedTopics, code: i16) -> FetchedTopics {
    topics
        .unwrap_or_default()
        .into_iter()
        .map(|(t, ps)| (t, ps.into_iter().map(|p| (p, -1, -1, None, code)).collect()))
        .collect()
}

/// The coordinator's answer for one group: (group error, its partitions by topic).
fn fetched_offsets(topics: NamedTopics, result: groups::FetchedOffsets) -> (i16, FetchedTopics) {
    let found = match result {
        Ok(found) => found,
        // The group's error; asked partitions are listed with it too (before v8 the
        // top-level code arrived in v2, so the partitions carry it as well).
        Err(code) => return (code, listed(topics, code)),
    };
    let mut out: FetchedTopics = Vec::new();
    for (topic, partition, committed) in found {
        let entry = match committed {
            Some(c) => (
                partition,
                c.offset,
                c.leader_epoch,
                Some(c.metadata),
                codes::NONE,
            ),
            None => (partition, -1, -1, Some(String::new()), codes::NONE),
        };
        match out.iter_mut().find(|(t, _)| *t == topic) {
            Some((_, partitions)) => partitions.push(entry),
            None => out.push((topic, vec![entry])),
        }
    }
    (codes::NONE, out)
}

/// One group's OffsetFetch answer as Kafka authorizes it: DESCRIBE on the group, else
/// GROUP_AUTHORIZATION_FAILED; topics without DESCRIBE are left out of an all-topics answer and
/// answered TOPIC_AUTHORIZATION_FAILED when named.
fn authorized_group_offsets(
    access: &Access<'_>,
    topics: NamedTopics,
    asked: Asked<groups::FetchedOffsets>,
) -> (i16, FetchedTopics) {
    let named = topics.is_some();
    let (code, found) = match asked {
        Asked::Refused => {
            return (
                GROUP_AUTHORIZATION_FAILED,
                listed(topics, GROUP_AUTHORIZATION_FAILED),
            )
        }
        Asked::NoCoordinator => return (codes::COORDINATOR_NOT_AVAILABLE, Vec::new()),
        Asked::Unavailable(code) => fetched_offsets(topics, Err(code)),
        Asked::Answered(result) => fetched_offsets(topics, result),
    };
    if !access.is_enforced() {
        return (code, found);
    }
    let found = found
        .into_iter()
        .filter_map(|(topic, partitions)| {
            if access.quietly_allows(AclOperation::Describe, ResourceType::Topic, &topic) {
                Some((topic, partitions))
            } else if named {
                let refused = partitions
                    .into_iter()
                    .map(|(p, ..)| (p, -1, -1, None, TOPIC_AUTHORIZATION_FAILED))
                    .collect();
                Some((topic, refused))
            } else {
                None
            }
        })
        .collect();
    (code, found)
}

/// An OffsetFetch answer's topics from the fetched ones: v8+ and earlier versions answer the
/// same fields in types of their own (`$topic` holding `$partition`s).
macro_rules! fetched_topics {
    ($found:expr, $topic:ty, $partition:ty) => {
        $found
            .into_iter()
            .map(|(name, partitions)| {
                <$topic>::default()
                    .with_name(TopicName(text(name)))
                    .with_partitions(
                        partitions
                            .into_iter()
                            .map(|(p, offset, epoch, metadata, code)| {
                                <$partition>::default()
                                    .with_partition_index(p)
                                    .with_committed_offset(offset)
                                    .with_committed_leader_epoch(epoch)
                                    .with_metadata(metadata.map(text))
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect()
    };
}

pub(super) async fn offset_fetch(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: OffsetFetchRequest,
) -> ApiResponse {
    let version = info.api_version;
    let requested: Vec<OffsetFetchGroup> = if version >= 8 {
        request
            .groups
            .into_iter()
            .map(|group| OffsetFetchGroup {
                member: group
                    .member_id
                    .as_ref()
                    .filter(|_| version >= 9)
                    .map(|m| (m.as_str().to_owned(), group.member_epoch)),
                group_id: group.group_id,
                topics: group.topics.map(|topics| {
                    topics
                        .into_iter()
                        .map(|t| (t.name.0.as_str().to_owned(), t.partition_indexes))
                        .collect()
                }),
            })
            .collect()
    } else {
        vec![OffsetFetchGroup {
            group_id: request.group_id,
            member: None,
            topics: request.topics.map(|topics| {
                topics
                    .into_iter()
                    .map(|t| (t.name.0.as_str().to_owned(), t.partition_indexes))
                    .collect()
            }),
        }]
    };
    let access = Access::new(ctx, info);
    let asked = ask_coordinator(
        ctx,
        requested,
        |group| {
            let group_id = if_allowed(&access, AclOperation::Describe, &group.group_id)?;
            let partitions = group.topics.as_ref().map(|topics| {
                topics
                    .iter()
                    .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
                    .collect()
            });
            Some(groups::OffsetsQuery {
                group_id,
                member: group.member.clone(),
                partitions,
            })
        },
        groups::FetchOffsets,
    )
    .await;
    let mut errors = ErrorCounts::default();
    let mut response = OffsetFetchResponse::default();
    for (group, asked) in asked {
        let (code, found) = authorized_group_offsets(&access, group.topics, asked);
        errors.add(code);
        if version >= 8 {
            let topics = if code == codes::NONE {
                found
            } else {
                Vec::new()
            };
            response.groups.push(
                OffsetFetchResponseGroup::default()
                    .with_group_id(group.group_id)
                    .with_error_code(code)
                    .with_topics(fetched_topics!(
                        topics,
                        OffsetFetchResponseTopics,
                        OffsetFetchResponsePartitions
                    )),
            );
        } else {
            response.error_code = code;
            response.topics = fetched_topics!(
                found,
                OffsetFetchResponseTopic,
                OffsetFetchResponsePartition
            );
        }
    }
    ApiResponse::new(ResponseKind::OffsetFetch(response), errors)
}

pub(super) async fn list_groups(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ListGroupsRequest,
) -> ApiResponse {
    let states: Vec<String> = request
        .states_filter
        .iter()
        .map(|s| s.as_str().to_owned())
        .collect();
    let types: Vec<String> = request
        .types_filter
        .iter()
        .map(|t| t.as_str().to_owned())
        .collect();
    let result = match no_coordinator(ctx) {
        None => Ok(Vec::new()),
        Some(groups) => groups
            .coordinator
            .send(groups::ListGroups { states, types })
            .await
            .unwrap_or_else(|e| Err(mailbox_closed(&e))),
    };
    let mut errors = ErrorCounts::default();
    let response = match result {
        Ok(listed) => {
            errors.add(codes::NONE);
            // Kafka: DESCRIBE on the cluster lists every group, else those with DESCRIBE.
            let access = Access::new(ctx, info);
            let all = access.quietly_allows(
                AclOperation::Describe,
                ResourceType::Cluster,
                gregor_publishers::acl::CLUSTER_NAME,
            );
            ListGroupsResponse::default().with_groups(
                listed
                    .into_iter()
                    .filter(|g| {
                        all || access.quietly_allows(
                            AclOperation::Describe,
                            ResourceType::Group,
                            &g.group_id,
                        )
                    })
                    .map(|g| {
                        ListedGroup::default()
                            .with_group_id(GroupId(text(g.group_id)))
                            .with_protocol_type(text(g.protocol_type))
                            .with_group_state(text(g.state))
                            .with_group_type(text(g.group_type))
                    })
                    .collect(),
            )
        }
        Err(code) => {
            errors.add(code);
            ListGroupsResponse::default().with_error_code(code)
        }
    };
    ApiResponse::new(ResponseKind::ListGroups(response), errors)
}

/// A described group's `authorized_operations`: those computed when it was described without
/// an error, else the field's default.
fn described_operations(error: i16, operations: i32) -> i32 {
    if error == codes::NONE {
        operations
    } else {
        OPERATIONS_NOT_REQUESTED
    }
}

pub(super) async fn describe_groups(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: DescribeGroupsRequest,
) -> ApiResponse {
    let unknown_code = if info.api_version >= 6 {
        codes::GROUP_ID_NOT_FOUND
    } else {
        codes::NONE
    };
    let access = Access::new(ctx, info);
    let include_operations = request.include_authorized_operations;
    let asked = ask_coordinator(
        ctx,
        request.groups,
        |group_id| if_allowed(&access, AclOperation::Describe, group_id),
        |group_ids| groups::DescribeGroups {
            group_ids,
            unknown_code,
        },
    )
    .await;
    let mut errors = ErrorCounts::default();
    let mut described = Vec::with_capacity(asked.len());
    for (group_id, asked) in asked {
        let operations = match (include_operations, access.is_enforced()) {
            (false, _) => OPERATIONS_NOT_REQUESTED,
            (true, false) => ALL_GROUP_OPERATIONS,
            (true, true) => access.authorized_operations(ResourceType::Group, &group_id),
        };
        let d = match asked {
            Asked::Answered(d) => d,
            Asked::Refused => {
                errors.add(GROUP_AUTHORIZATION_FAILED);
                described.push(
                    DescribedGroup::default()
                        .with_group_id(group_id)
                        .with_error_code(GROUP_AUTHORIZATION_FAILED)
                        .with_error_message(
                            (info.api_version >= 6)
                                .then(|| text(error_message(GROUP_AUTHORIZATION_FAILED))),
                        ),
                );
                continue;
            }
            Asked::NoCoordinator | Asked::Unavailable(_) => {
                errors.add(codes::COORDINATOR_NOT_AVAILABLE);
                described.push(
                    DescribedGroup::default()
                        .with_group_id(group_id)
                        .with_error_code(codes::COORDINATOR_NOT_AVAILABLE)
                        .with_group_state(text("Dead")),
                );
                continue;
            }
        };
        errors.add(d.error);
        // Kafka's `handleDescribeGroupsRequest` fills them in for a group described without
        // an error only.
        let operations = described_operations(d.error, operations);
        let message = (d.error != codes::NONE && info.api_version >= 6).then(|| {
            if d.error == codes::GROUP_ID_NOT_FOUND {
                format!("Group {} not found.", group_id.0.as_str())
            } else {
                error_message(d.error)
            }
        });
        described.push(
            DescribedGroup::default()
                .with_group_id(group_id)
                .with_error_code(d.error)
                .with_error_message(message.map(text))
                .with_group_state(text(d.state))
                .with_protocol_type(text(d.protocol_type))
                .with_protocol_data(text(d.protocol_data))
                .with_authorized_operations(operations)
                .with_members(
                    d.members
                        .into_iter()
                        .map(|m| {
                            DescribedGroupMember::default()
                                .with_member_id(text(m.member_id))
                                .with_group_instance_id(m.group_instance_id.map(text))
                                .with_client_id(text(m.client_id))
                                .with_client_host(text(m.client_host))
                                .with_member_metadata(m.metadata)
                                .with_member_assignment(m.assignment)
                        })
                        .collect(),
                ),
        );
    }
    ApiResponse::new(
        ResponseKind::DescribeGroups(DescribeGroupsResponse::default().with_groups(described)),
        errors,
    )
}

pub(super) async fn delete_groups(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: DeleteGroupsRequest,
) -> ApiResponse {
    let access = Access::new(ctx, info);
    let asked = ask_coordinator(
        ctx,
        request.groups_names,
        |group_id| if_allowed(&access, AclOperation::Delete, group_id),
        groups::DeleteGroups,
    )
    .await;
    let mut errors = ErrorCounts::default();
    let results = asked
        .into_iter()
        .map(|(group_id, asked)| {
            let code = match asked {
                Asked::Refused => GROUP_AUTHORIZATION_FAILED,
                Asked::NoCoordinator => codes::COORDINATOR_NOT_AVAILABLE,
                Asked::Answered(code) | Asked::Unavailable(code) => code,
            };
            errors.add(code);
            DeletableGroupResult::default()
                .with_group_id(group_id)
                .with_error_code(code)
        })
        .collect();
    ApiResponse::new(
        ResponseKind::DeleteGroups(DeleteGroupsResponse::default().with_results(results)),
        errors,
    )
}

pub(super) async fn offset_delete(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: OffsetDeleteRequest,
) -> ApiResponse {
    let image = ctx.image.load_full();
    // Kafka: DELETE on the group refuses the request, READ on each topic its partitions.
    let access = Access::new(ctx, info);
    let group_allowed = access.allows(AclOperation::Delete, ResourceType::Group, &request.group_id);
    let unreadable: std::collections::HashSet<String> = request
        .topics
        .iter()
        .filter(|t| {
            group_allowed && !access.allows(AclOperation::Read, ResourceType::Topic, &t.name)
        })
        .map(|t| t.name.0.as_str().to_owned())
        .collect();
    // Unknown partitions are answered UNKNOWN_TOPIC_OR_PARTITION without asking the coordinator.
    let asked: Vec<(String, i32)> = request
        .topics
        .iter()
        .filter(|t| !unreadable.contains(t.name.0.as_str()))
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.as_str().to_owned(), p.partition_index))
        })
        .filter(|(t, p)| partition_exists(&image, t, *p))
        .collect();
    let result = match no_coordinator(ctx) {
        _ if !group_allowed => Err(GROUP_AUTHORIZATION_FAILED),
        None => Err(codes::COORDINATOR_NOT_AVAILABLE),
        Some(groups) => groups
            .coordinator
            .send(groups::DeleteOffsets {
                group_id: request.group_id.0.as_str().to_owned(),
                partitions: asked.clone(),
            })
            .await
            .unwrap_or_else(|e| Err(mailbox_closed(&e))),
    };
    let mut errors = ErrorCounts::default();
    let response = match result {
        Err(code) => {
            errors.add(code);
            OffsetDeleteResponse::default().with_error_code(code)
        }
        Ok(codes_out) => {
            errors.add(codes::NONE);
            let mut answered = asked.into_iter().zip(codes_out);
            let mut next = answered.next();
            let topics = request
                .topics
                .into_iter()
                .map(|t| {
                    let partitions = t
                        .partitions
                        .iter()
                        .map(|p| {
                            let code = match &next {
                                Some(((topic, index), code))
                                    if topic == t.name.0.as_str()
                                        && *index == p.partition_index =>
                                {
                                    let code = *code;
                                    next = answered.next();
                                    code
                                }
                                _ if unreadable.contains(t.name.0.as_str()) => {
                                    TOPIC_AUTHORIZATION_FAILED
                                }
                                _ => codes::UNKNOWN_TOPIC_OR_PARTITION,
                            };
                            errors.add(code);
                            OffsetDeleteResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect();
                    OffsetDeleteResponseTopic::default()
                        .with_name(t.name)
                        .with_partitions(partitions)
                })
                .collect();
            OffsetDeleteResponse::default().with_topics(topics)
        }
    };
    ApiResponse::new(ResponseKind::OffsetDelete(response), errors)
}

/// The group config keys a KIP-848 group reads on every heartbeat (KIP-1142 GROUP resources).
const GROUP_RESOURCE: i8 = 32;
const CONSUMER_SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
const CONSUMER_HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";

fn heartbeat_error(code: i16, message: Option<String>) -> ConsumerGroupHeartbeatResponse {
    ConsumerGroupHeartbeatResponse::default()
        .with_error_code(code)
        .with_error_message(Some(text(
            message
                .filter(|m| !m.is_empty())
                .unwrap_or_else(|| error_message(code)),
        )))
}

pub(super) async fn consumer_group_heartbeat(
    ctx: &HandlerContext,
    info: &RequestInfo,
    mut request: ConsumerGroupHeartbeatRequest,
) -> ApiResponse {
    let names = request
        .subscribed_topic_names
        .take()
        .map(|names| TopicNames::from_names(names.iter().map(|name| name.as_str())));
    consumer_group_heartbeat_listed(ctx, info, request, names).await
}

/// ConsumerGroupHeartbeat of `request` (its own subscribed names ignored) subscribing to
/// `names`, read from its frame or decoded.
pub async fn consumer_group_heartbeat_listed(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ConsumerGroupHeartbeatRequest,
    names: Option<TopicNames>,
) -> ApiResponse {
    ctx.publishers_caught_up().await;
    let mut errors = ErrorCounts::default();
    let access = Access::new(ctx, info);
    // Kafka: READ on the group.
    if !access.allows(AclOperation::Read, ResourceType::Group, &request.group_id) {
        errors.add(GROUP_AUTHORIZATION_FAILED);
        return ApiResponse::new(
            ResponseKind::ConsumerGroupHeartbeat(heartbeat_error(GROUP_AUTHORIZATION_FAILED, None)),
            errors,
        );
    }
    // Kafka 4.0+ (KAFKA-18813): DESCRIBE on every topic the heartbeat names, else the heartbeat
    // fails whole, answered without a message as Kafka's is.
    let hidden_name = names.as_ref().is_some_and(|names| {
        names
            .iter()
            .any(|name| !access.allows(AclOperation::Describe, ResourceType::Topic, name))
    });
    if hidden_name {
        errors.add(TOPIC_AUTHORIZATION_FAILED);
        return ApiResponse::new(
            ResponseKind::ConsumerGroupHeartbeat(
                ConsumerGroupHeartbeatResponse::default()
                    .with_error_code(TOPIC_AUTHORIZATION_FAILED),
            ),
            errors,
        );
    }
    let Some(groups) = no_coordinator(ctx) else {
        errors.add(codes::COORDINATOR_NOT_AVAILABLE);
        return ApiResponse::new(
            ResponseKind::ConsumerGroupHeartbeat(heartbeat_error(
                codes::COORDINATOR_NOT_AVAILABLE,
                None,
            )),
            errors,
        );
    };
    let image = ctx.image.load_full();
    let group_id = request.group_id.0.as_str().to_owned();
    // The group's dynamic configs, read now: a change applies from this heartbeat on.
    let config = |key| {
        image
            .configs
            .value(GROUP_RESOURCE, &group_id, key)
            .and_then(|v| v.parse::<i32>().ok())
    };
    let timeouts = groups.settings.consumer_configs(
        config(CONSUMER_SESSION_TIMEOUT_MS),
        config(CONSUMER_HEARTBEAT_INTERVAL_MS),
    );
    let heartbeat = ConsumerHeartbeat {
        version: info.api_version,
        group_id,
        member_id: request.member_id.as_str().to_owned(),
        member_epoch: request.member_epoch,
        instance_id: request.instance_id.map(|s| s.as_str().to_owned()),
        rack_id: request.rack_id.map(|s| s.as_str().to_owned()),
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        subscribed_topic_names: names,
        subscribed_topic_regex: request
            .subscribed_topic_regex
            .filter(|_| info.api_version >= 1)
            .map(|s| s.as_str().to_owned()),
        server_assignor: request.server_assignor.map(|s| s.as_str().to_owned()),
        owned: request.topic_partitions.map(|owned| {
            owned
                .into_iter()
                .map(|t| (t.topic_id, t.partitions))
                .collect()
        }),
        client_id: info.client_id.to_string(),
        client_host: info.client_host.to_string(),
        describable: access
            .topic_describe_check()
            .map_or_else(DescribableTopics::default, DescribableTopics::only),
    };
    let result = groups
        .coordinator
        .send(groups::ConsumerGroupHeartbeat {
            request: heartbeat,
            timeouts,
            image,
        })
        .await;
    let response = match result {
        Err(error) => heartbeat_error(mailbox_closed(&error), None),
        Ok(r) if r.error != codes::NONE => heartbeat_error(r.error, r.message),
        Ok(r) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(r.member_id.map(text))
            .with_member_epoch(r.member_epoch)
            .with_heartbeat_interval_ms(r.heartbeat_interval_ms)
            .with_assignment(r.assignment.map(|assignment| {
                HeartbeatAssignment::default().with_topic_partitions(
                    assignment
                        .into_iter()
                        .map(|(topic, partitions)| {
                            HeartbeatTopicPartitions::default()
                                .with_topic_id(topic)
                                .with_partitions(partitions.into_iter().collect())
                        })
                        .collect(),
                )
            })),
    };
    errors.add(response.error_code);
    ApiResponse::new(ResponseKind::ConsumerGroupHeartbeat(response), errors)
}

/// A ConsumerGroupDescribe assignment with topic names from the image (topics it no longer
/// has are left out, as Kafka does).
fn described_assignment(image: &MetadataImage, assignment: Assignment) -> DescribeAssignment {
    DescribeAssignment::default().with_topic_partitions(
        assignment
            .into_iter()
            .filter_map(|(topic, partitions)| {
                let name = image.topics.get_by_id(&topic)?.name.to_string();
                Some(
                    DescribeTopicPartitions::default()
                        .with_topic_id(topic)
                        .with_topic_name(TopicName(text(name)))
                        .with_partitions(partitions.into_iter().collect()),
                )
            })
            .collect(),
    )
}

/// Kafka's message for a ConsumerGroupDescribe group that names a topic the caller may not
/// DESCRIBE.
const HIDDEN_TOPICS_MESSAGE: &str =
    "The group has described topic(s) that the client is not authorized to describe.";

/// Whether a member's assignment or target assignment has a topic `may_describe` refuses
/// (Kafka checks those, not the subscriptions).
fn assigns_hidden_topic(
    members: &[DescribedConsumerMember],
    mut may_describe: impl FnMut(&str) -> bool,
) -> bool {
    members
        .iter()
        .flat_map(|m| {
            m.assignment
                .topic_partitions
                .iter()
                .chain(&m.target_assignment.topic_partitions)
        })
        .any(|topic| !may_describe(topic.topic_name.as_str()))
}

pub(super) async fn consumer_group_describe(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ConsumerGroupDescribeRequest,
) -> ApiResponse {
    let access = Access::new(ctx, info);
    let image = ctx.image.load_full();
    // Kafka: DESCRIBE on each group.
    let asked = ask_coordinator(
        ctx,
        request.group_ids,
        |group_id| if_allowed(&access, AclOperation::Describe, group_id),
        groups::ConsumerGroupDescribe,
    )
    .await;
    let mut errors = ErrorCounts::default();
    let mut described = Vec::with_capacity(asked.len());
    // Each topic is authorized once per request, as Kafka does (one denial logged).
    let mut describable: HashMap<String, bool> = HashMap::new();
    let mut may_describe = |topic: &str| match describable.get(topic) {
        Some(allowed) => *allowed,
        None => {
            let allowed = access.allows(AclOperation::Describe, ResourceType::Topic, topic);
            describable.insert(topic.to_owned(), allowed);
            allowed
        }
    };
    for (group_id, asked) in asked {
        let operations = match (request.include_authorized_operations, access.is_enforced()) {
            (false, _) => OPERATIONS_NOT_REQUESTED,
            (true, false) => ALL_GROUP_OPERATIONS,
            (true, true) => access.authorized_operations(ResourceType::Group, &group_id),
        };
        let answered = match asked {
            Asked::Answered(d) => Ok(d),
            Asked::Refused => Err(GROUP_AUTHORIZATION_FAILED),
            Asked::NoCoordinator | Asked::Unavailable(_) => Err(codes::COORDINATOR_NOT_AVAILABLE),
        };
        let d = match answered {
            Ok(d) => d,
            Err(code) => {
                errors.add(code);
                described.push(
                    DescribedConsumerGroup::default()
                        .with_group_id(group_id)
                        .with_error_code(code)
                        .with_error_message(Some(text(error_message(code))))
                        .with_authorized_operations(operations),
                );
                continue;
            }
        };
        if d.error != codes::NONE {
            errors.add(d.error);
            described.push(
                DescribedConsumerGroup::default()
                    .with_group_id(group_id)
                    .with_error_code(d.error)
                    .with_error_message(d.message.map(text))
                    .with_group_state(text(d.state))
                    .with_group_epoch(d.group_epoch)
                    .with_assignment_epoch(d.assignment_epoch)
                    .with_authorized_operations(operations),
            );
            continue;
        }
        let members = d
            .members
            .into_iter()
            .map(|m| {
                DescribedConsumerMember::default()
                    .with_member_id(text(m.member_id))
                    .with_instance_id(m.instance_id.map(text))
                    .with_rack_id(m.rack_id.map(text))
                    .with_member_epoch(m.member_epoch)
                    .with_client_id(text(m.client_id))
                    .with_client_host(text(m.client_host))
                    .with_subscribed_topic_names(
                        m.subscribed_topic_names
                            .into_iter()
                            .map(|n| TopicName(text(n)))
                            .collect(),
                    )
                    .with_subscribed_topic_regex(m.subscribed_topic_regex.map(text))
                    .with_assignment(described_assignment(&image, m.assignment))
                    .with_target_assignment(described_assignment(&image, m.target_assignment))
                    // v1: 0 for a member using the classic protocol, 1 for the consumer one.
                    .with_member_type(match (info.api_version >= 1, m.classic) {
                        (false, _) => -1,
                        (true, true) => 0,
                        (true, false) => 1,
                    })
            })
            .collect::<Vec<_>>();
        // Kafka 4.0+ (KAFKA-18813): a group that would show the caller a topic it may not
        // DESCRIBE is answered with the error alone.
        if access.is_enforced() && assigns_hidden_topic(&members, &mut may_describe) {
            errors.add(TOPIC_AUTHORIZATION_FAILED);
            described.push(
                DescribedConsumerGroup::default()
                    .with_group_id(group_id)
                    .with_error_code(TOPIC_AUTHORIZATION_FAILED)
                    .with_error_message(Some(text(HIDDEN_TOPICS_MESSAGE))),
            );
            continue;
        }
        errors.add(codes::NONE);
        described.push(
            DescribedConsumerGroup::default()
                .with_group_id(group_id)
                .with_group_state(text(d.state))
                .with_group_epoch(d.group_epoch)
                .with_assignment_epoch(d.assignment_epoch)
                .with_assignor_name(text(d.assignor))
                .with_members(members)
                .with_authorized_operations(operations),
        );
    }
    ApiResponse::new(
        ResponseKind::ConsumerGroupDescribe(
            ConsumerGroupDescribeResponse::default().with_groups(described),
        ),
        errors,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_group_described_without_error_gets_its_operations() {
        assert_eq!(
            described_operations(codes::NONE, ALL_GROUP_OPERATIONS),
            ALL_GROUP_OPERATIONS
        );
        for error in [
            codes::GROUP_ID_NOT_FOUND,
            codes::COORDINATOR_LOAD_IN_PROGRESS,
        ] {
            assert_eq!(described_operations(error, ALL_GROUP_OPERATIONS), i32::MIN);
        }
    }

    fn member(assigned: &[&str], target: &[&str]) -> DescribedConsumerMember {
        let topics = |names: &[&str]| {
            DescribeAssignment::default().with_topic_partitions(
                names
                    .iter()
                    .map(|name| {
                        DescribeTopicPartitions::default()
                            .with_topic_name(TopicName(text(*name)))
                            .with_partitions(vec![0])
                    })
                    .collect(),
            )
        };
        DescribedConsumerMember::default()
            .with_subscribed_topic_names(vec![TopicName(text("secret"))])
            .with_assignment(topics(assigned))
            .with_target_assignment(topics(target))
    }

    #[test]
    fn a_group_is_hidden_by_a_topic_in_an_assignment_or_target_only() {
        let may_describe = |topic: &str| topic != "secret";
        // Subscribed to `secret` but given none of it: Kafka shows the group.
        assert!(!assigns_hidden_topic(
            &[member(&["orders"], &["orders"])],
            may_describe
        ));
        assert!(assigns_hidden_topic(
            &[member(&["orders"], &[]), member(&[], &["secret"])],
            may_describe
        ));
        assert!(assigns_hidden_topic(
            &[member(&["secret"], &[])],
            may_describe
        ));
        assert!(!assigns_hidden_topic(&[], |_| false));
    }
}
