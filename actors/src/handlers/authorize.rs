//! The authorization hooks handlers share, and the broker's check before it forwards a request
//! to the active controller (Kafka's checks per API, reference replication-security.md §4.4).

use std::collections::HashMap;

use gregor_publishers::acl::{AclOperation, ResourceType};
use kafka_protocol::messages::RequestKind;

use crate::authorizer::Access;
use crate::context::{HandlerContext, RequestInfo};

/// Kafka's message of a per-resource authorization failure in the topic APIs.
pub(super) const AUTHORIZATION_FAILED: &str = "Authorization failed.";

/// Whether the broker may hand `request` to the active controller as it came: every resource
/// it names is authorized (the controller trusts its brokers' forwarding channels). Otherwise
/// the broker answers it itself, resource by resource.
pub fn fully_authorized(ctx: &HandlerContext, info: &RequestInfo, request: &RequestKind) -> bool {
    use AclOperation::*;
    let access = Access::new(ctx, info);
    if !access.is_enforced() {
        return true;
    }
    let topic = ResourceType::Topic;
    match request {
        RequestKind::CreateTopics(r) => {
            access.allows_cluster(Create)
                || r.topics
                    .iter()
                    .all(|t| access.allows(Create, topic, &t.name))
        }
        RequestKind::DeleteTopics(r) => {
            access.allows_cluster(Delete) || {
                let image = ctx.image.load();
                let may_delete = |name: &str| {
                    access.allows(Describe, topic, name) && access.allows(Delete, topic, name)
                };
                r.topic_names.iter().all(|n| may_delete(n))
                    && r.topics.iter().all(|t| match &t.name {
                        Some(name) => may_delete(name),
                        // An unknown id is the controller's UNKNOWN_TOPIC_ID.
                        None => image
                            .topics
                            .get_by_id(&t.topic_id)
                            .is_none_or(|known| may_delete(&known.name)),
                    })
            }
        }
        RequestKind::CreatePartitions(r) => r
            .topics
            .iter()
            .all(|t| access.allows(Alter, topic, &t.name)),
        RequestKind::AlterClientQuotas(_) => access.allows_cluster(AlterConfigs),
        RequestKind::IncrementalAlterConfigs(r) => r.resources.iter().all(|res| {
            config_resource_denied(&access, AlterConfigs, res.resource_type, &res.resource_name)
                .is_none()
        }),
        RequestKind::AlterConfigs(r) => r.resources.iter().all(|res| {
            config_resource_denied(&access, AlterConfigs, res.resource_type, &res.resource_name)
                .is_none()
        }),
        RequestKind::DescribeQuorum(_) => access.allows_cluster(Describe),
        RequestKind::AlterUserScramCredentials(_)
        | RequestKind::CreateAcls(_)
        | RequestKind::DeleteAcls(_)
        | RequestKind::UnregisterBroker(_)
        | RequestKind::UpdateFeatures(_)
        | RequestKind::AddRaftVoter(_)
        | RequestKind::RemoveRaftVoter(_)
        | RequestKind::ElectLeaders(_)
        | RequestKind::AlterPartitionReassignments(_) => access.allows_cluster(Alter),
        RequestKind::ListPartitionReassignments(_) => access.allows_cluster(Describe),
        _ => true,
    }
}

/// The names the request names exactly once and may not `operation` (names given twice are
/// the controller's INVALID_REQUEST, whatever the ACLs say).
pub(super) fn denied_once<'a>(
    access: &Access<'_>,
    operation: AclOperation,
    names: impl Iterator<Item = &'a str>,
) -> std::collections::HashSet<String> {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for name in names {
        *counts.entry(name).or_default() += 1;
    }
    counts
        .into_iter()
        .filter(|(name, count)| *count == 1 && !access.allows(operation, ResourceType::Topic, name))
        .map(|(name, _)| name.to_owned())
        .collect()
}

/// Kafka's authorization of a config resource (DescribeConfigs, AlterConfigs,
/// IncrementalAlterConfigs): TOPIC on the topic, BROKER, BROKER_LOGGER and CLIENT_METRICS on
/// the cluster, GROUP on the group. The error and message when `operation` is refused.
pub(super) fn config_resource_denied(
    access: &Access<'_>,
    operation: AclOperation,
    resource_type: i8,
    name: &str,
) -> Option<(kafka_protocol::error::ResponseError, &'static str)> {
    use kafka_protocol::error::ResponseError;
    const TOPIC: i8 = 2;
    const BROKER: i8 = 4;
    const BROKER_LOGGER: i8 = 8;
    const CLIENT_METRICS: i8 = 16;
    const GROUP: i8 = 32;
    let code = match resource_type {
        TOPIC if !access.allows(operation, ResourceType::Topic, name) => {
            ResponseError::TopicAuthorizationFailed
        }
        BROKER | BROKER_LOGGER | CLIENT_METRICS if !access.allows_cluster(operation) => {
            ResponseError::ClusterAuthorizationFailed
        }
        GROUP if !access.allows(operation, ResourceType::Group, name) => {
            ResponseError::GroupAuthorizationFailed
        }
        _ => return None,
    };
    Some((code, config_denial_message(code.code())))
}

/// The message of a config resource refused with `code` by [`config_resource_denied`].
pub(super) fn config_denial_message(code: i16) -> &'static str {
    use kafka_protocol::error::ResponseError;
    match ResponseError::try_from_code(code) {
        Some(ResponseError::TopicAuthorizationFailed) => "Topic authorization failed.",
        Some(ResponseError::GroupAuthorizationFailed) => "Group authorization failed.",
        _ => "Cluster authorization failed.",
    }
}

/// The answer to an API whose whole request needs one operation on the cluster (Kafka's
/// `authorizeClusterOperation`) when it is refused: the private broker APIs need
/// CLUSTER_ACTION, UnregisterBroker, UpdateFeatures, the voter changes, ElectLeaders and
/// AlterPartitionReassignments ALTER, DescribeQuorum and ListPartitionReassignments DESCRIBE.
/// `None`: the request may go on (APIs not listed check their own resources).
pub(super) fn cluster_denial(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: &RequestKind,
) -> Option<super::ApiResponse> {
    use kafka_protocol::messages::*;
    use AclOperation::*;
    let operation = match request {
        RequestKind::BrokerHeartbeat(_)
        | RequestKind::AlterPartition(_)
        | RequestKind::AllocateProducerIds(_) => ClusterAction,
        RequestKind::UnregisterBroker(_)
        | RequestKind::UpdateFeatures(_)
        | RequestKind::AddRaftVoter(_)
        | RequestKind::RemoveRaftVoter(_)
        | RequestKind::ElectLeaders(_)
        | RequestKind::AlterPartitionReassignments(_) => Alter,
        RequestKind::DescribeQuorum(_) | RequestKind::ListPartitionReassignments(_) => Describe,
        _ => return None,
    };
    if Access::new(ctx, info).allows_cluster(operation) {
        return None;
    }
    let code = kafka_protocol::error::ResponseError::ClusterAuthorizationFailed.code();
    let message = || {
        Some(kafka_protocol::protocol::StrBytes::from_static_str(
            "Cluster authorization failed.",
        ))
    };
    let body = match request {
        RequestKind::BrokerHeartbeat(_) => {
            ResponseKind::BrokerHeartbeat(BrokerHeartbeatResponse::default().with_error_code(code))
        }
        RequestKind::AlterPartition(_) => {
            ResponseKind::AlterPartition(AlterPartitionResponse::default().with_error_code(code))
        }
        RequestKind::AllocateProducerIds(_) => ResponseKind::AllocateProducerIds(
            AllocateProducerIdsResponse::default()
                .with_error_code(code)
                .with_producer_id_start(ProducerId(-1)),
        ),
        RequestKind::UnregisterBroker(_) => ResponseKind::UnregisterBroker(
            UnregisterBrokerResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        // Kafka's error response: no results.
        RequestKind::UpdateFeatures(_) => ResponseKind::UpdateFeatures(
            UpdateFeaturesResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::AddRaftVoter(_) => ResponseKind::AddRaftVoter(
            AddRaftVoterResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::RemoveRaftVoter(_) => ResponseKind::RemoveRaftVoter(
            RemoveRaftVoterResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        // Kafka's error responses: every partition named carries the error too.
        RequestKind::ElectLeaders(r) => {
            use kafka_protocol::messages::elect_leaders_response::{
                PartitionResult, ReplicaElectionResult,
            };
            let results = r
                .topic_partitions
                .iter()
                .flatten()
                .map(|topic| {
                    ReplicaElectionResult::default()
                        .with_topic(topic.topic.clone())
                        .with_partition_result(
                            topic
                                .partitions
                                .iter()
                                .map(|&partition| {
                                    PartitionResult::default()
                                        .with_partition_id(partition)
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect();
            ResponseKind::ElectLeaders(
                ElectLeadersResponse::default()
                    .with_error_code(super::elect_leaders::top_level_error(
                        info.api_version,
                        code,
                    ))
                    .with_replica_election_results(results),
            )
        }
        RequestKind::AlterPartitionReassignments(r) => {
            use kafka_protocol::messages::alter_partition_reassignments_response::{
                ReassignablePartitionResponse, ReassignableTopicResponse,
            };
            let responses = r
                .topics
                .iter()
                .map(|topic| {
                    ReassignableTopicResponse::default()
                        .with_name(topic.name.clone())
                        .with_partitions(
                            topic
                                .partitions
                                .iter()
                                .map(|partition| {
                                    ReassignablePartitionResponse::default()
                                        .with_partition_index(partition.partition_index)
                                        .with_error_code(code)
                                        .with_error_message(message())
                                })
                                .collect(),
                        )
                })
                .collect();
            ResponseKind::AlterPartitionReassignments(
                AlterPartitionReassignmentsResponse::default()
                    .with_error_code(code)
                    .with_error_message(message())
                    .with_responses(responses),
            )
        }
        RequestKind::ListPartitionReassignments(_) => ResponseKind::ListPartitionReassignments(
            ListPartitionReassignmentsResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        _ => ResponseKind::DescribeQuorum(
            DescribeQuorumResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
    };
    let mut errors = super::ErrorCounts::default();
    errors.add(code);
    Some(super::ApiResponse::new(body, errors))
}
