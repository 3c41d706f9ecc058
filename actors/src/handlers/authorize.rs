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
        RequestKind::DescribeQuorum(_) => access.allows_cluster(Describe),
        RequestKind::AlterUserScramCredentials(_)
        | RequestKind::CreateAcls(_)
        | RequestKind::DeleteAcls(_)
        | RequestKind::UnregisterBroker(_)
        | RequestKind::AddRaftVoter(_)
        | RequestKind::RemoveRaftVoter(_) => access.allows_cluster(Alter),
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
