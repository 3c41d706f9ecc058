//! Request builders and response readers for the admin APIs, version-aware so one call site can
//! loop over every version (fields a version lacks are left at their defaults).

use std::collections::BTreeMap;

use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    AlterClientQuotasRequest, BrokerId, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteTopicsRequest, MetadataRequest, MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

/// A `TopicName` from a `&str`.
pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// A `StrBytes` from a `&str`.
pub fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

/// One topic for CreateTopics.
pub fn creatable(name: &str, partitions: i32, replication_factor: i16) -> CreatableTopic {
    CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(partitions)
        .with_replication_factor(replication_factor)
}

/// Adds configs to a CreateTopics topic.
pub fn with_configs(topic: CreatableTopic, configs: &[(&str, &str)]) -> CreatableTopic {
    topic.with_configs(
        configs
            .iter()
            .map(|(k, v)| {
                CreatableTopicConfig::default()
                    .with_name(s(k))
                    .with_value(Some(s(v)))
            })
            .collect(),
    )
}

/// A CreateTopics request with a 30 s timeout.
pub fn create_topics(topics: Vec<CreatableTopic>, validate_only: bool) -> CreateTopicsRequest {
    CreateTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only)
}

/// A Metadata request at `version`: `None` asks for all topics (an empty list on v0, where the
/// list is not nullable), `allow_auto` is only sent on v4+ (earlier versions always allow).
pub fn metadata(version: i16, topics: Option<&[&str]>, allow_auto: bool) -> MetadataRequest {
    let topics = match topics {
        None if version == 0 => Some(Vec::new()),
        None => None,
        Some(names) => Some(
            names
                .iter()
                .map(|n| MetadataRequestTopic::default().with_name(Some(topic_name(n))))
                .collect(),
        ),
    };
    let mut req = MetadataRequest::default().with_topics(topics);
    if version >= 4 {
        req = req.with_allow_auto_topic_creation(allow_auto);
    }
    req
}

/// A DeleteTopics request by names at `version` (`topic_names` before v6, `topics` from v6).
pub fn delete_topics_by_name(version: i16, names: &[&str]) -> DeleteTopicsRequest {
    let req = DeleteTopicsRequest::default().with_timeout_ms(30_000);
    if version >= 6 {
        req.with_topics(
            names
                .iter()
                .map(|n| DeleteTopicState::default().with_name(Some(topic_name(n))))
                .collect(),
        )
    } else {
        req.with_topic_names(names.iter().map(|n| topic_name(n)).collect())
    }
}

/// A DeleteTopics v6 request by topic ids.
pub fn delete_topics_by_id(ids: &[Uuid]) -> DeleteTopicsRequest {
    DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(
            ids.iter()
                .map(|id| DeleteTopicState::default().with_topic_id(*id))
                .collect(),
        )
}

/// A DeleteTopics v6 request of entries spelled (name, id), each a name, an id, both or
/// neither (a nil id is none).
pub fn delete_topic_states(entries: &[(Option<String>, Uuid)]) -> DeleteTopicsRequest {
    DeleteTopicsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(
            entries
                .iter()
                .map(|(name, id)| {
                    DeleteTopicState::default()
                        .with_name(name.as_deref().map(topic_name))
                        .with_topic_id(*id)
                })
                .collect(),
        )
}

/// A CreatePartitions request for one topic.
pub fn create_partitions(
    name: &str,
    count: i32,
    assignments: Option<Vec<Vec<i32>>>,
    validate_only: bool,
) -> CreatePartitionsRequest {
    grow_partitions(vec![growth(name, count, assignments)], validate_only)
}

/// A CreatePartitions topic growing `name` to `count` partitions, placed by the controller or
/// on the replicas `assignments` lists per new partition.
pub fn growth(name: &str, count: i32, assignments: Option<Vec<Vec<i32>>>) -> CreatePartitionsTopic {
    CreatePartitionsTopic::default()
        .with_name(topic_name(name))
        .with_count(count)
        .with_assignments(assignments.map(|a| {
            a.into_iter()
                .map(|ids| {
                    CreatePartitionsAssignment::default()
                        .with_broker_ids(ids.into_iter().map(BrokerId).collect())
                })
                .collect()
        }))
}

/// A CreatePartitions request for `topics`.
pub fn grow_partitions(
    topics: Vec<CreatePartitionsTopic>,
    validate_only: bool,
) -> CreatePartitionsRequest {
    CreatePartitionsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only)
}

/// An AlterClientQuotas request setting `key` to `value` for the default user (`<default>`).
pub fn default_user_quota(key: &str, value: f64) -> AlterClientQuotasRequest {
    use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
    AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
        .with_entity(vec![EntityData::default()
            .with_entity_type(s("user"))
            .with_entity_name(None)])
        .with_ops(vec![OpData::default().with_key(s(key)).with_value(value)])])
}

/// What Metadata says about one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Topic-level error code.
    pub error_code: i16,
    /// Topic id (nil before v10).
    pub topic_id: Uuid,
    /// Number of partitions listed.
    pub partitions: usize,
}

/// Topics in a Metadata response by name.
pub fn topics_of(resp: &MetadataResponse) -> BTreeMap<String, TopicInfo> {
    resp.topics
        .iter()
        .map(|t| {
            (
                t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default(),
                TopicInfo {
                    error_code: t.error_code,
                    topic_id: t.topic_id,
                    partitions: t.partitions.len(),
                },
            )
        })
        .collect()
}

/// Kafka's name for an error code (the ones the admin APIs use), as in the metrics' `error` label.
pub fn error_name(code: i16) -> &'static str {
    match code {
        -1 => "UNKNOWN_SERVER_ERROR",
        0 => "NONE",
        3 => "UNKNOWN_TOPIC_OR_PARTITION",
        5 => "LEADER_NOT_AVAILABLE",
        7 => "REQUEST_TIMED_OUT",
        17 => "INVALID_TOPIC_EXCEPTION",
        35 => "UNSUPPORTED_VERSION",
        36 => "TOPIC_ALREADY_EXISTS",
        37 => "INVALID_PARTITIONS",
        38 => "INVALID_REPLICATION_FACTOR",
        39 => "INVALID_REPLICA_ASSIGNMENT",
        40 => "INVALID_CONFIG",
        41 => "NOT_CONTROLLER",
        42 => "INVALID_REQUEST",
        73 => "TOPIC_DELETION_DISABLED",
        89 => "THROTTLING_QUOTA_EXCEEDED",
        100 => "UNKNOWN_TOPIC_ID",
        _ => "OTHER",
    }
}

/// Kafka's ACL codes: resource types, pattern types, operations, permissions.
pub mod acl {
    pub const TOPIC: i8 = 2;
    pub const CLUSTER: i8 = 4;
    pub const LITERAL: i8 = 3;
    pub const PREFIXED: i8 = 4;
    pub const ALL: i8 = 2;
    pub const CREATE: i8 = 5;
    pub const DELETE: i8 = 6;
    pub const ALTER: i8 = 7;
    pub const DESCRIBE: i8 = 8;
    pub const DESCRIBE_CONFIGS: i8 = 10;
    pub const CLUSTER_ACTION: i8 = 9;
    pub const ALTER_CONFIGS: i8 = 11;
    pub const GROUP: i8 = 3;
    pub const DENY: i8 = 2;
    pub const ALLOW: i8 = 3;
}

/// An ACL for User:ANONYMOUS from any host (codes from [`acl`]).
pub fn anonymous_acl(
    resource_type: i8,
    name: &str,
    pattern: i8,
    operation: i8,
    permission: i8,
) -> kafka_protocol::messages::create_acls_request::AclCreation {
    kafka_protocol::messages::create_acls_request::AclCreation::default()
        .with_resource_type(resource_type)
        .with_resource_name(s(name))
        .with_resource_pattern_type(pattern)
        .with_principal(s("User:ANONYMOUS"))
        .with_host(s("*"))
        .with_operation(operation)
        .with_permission_type(permission)
}

/// One AlterClientQuotas entry: its entity's (type, name) parts and (key, value, remove) ops.
pub fn quota_entry(
    entity: &[(&str, Option<&str>)],
    ops: &[(&str, f64, bool)],
) -> kafka_protocol::messages::alter_client_quotas_request::EntryData {
    use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
    EntryData::default()
        .with_entity(
            entity
                .iter()
                .map(|(t, n)| {
                    EntityData::default()
                        .with_entity_type(s(t))
                        .with_entity_name(n.map(s))
                })
                .collect(),
        )
        .with_ops(
            ops.iter()
                .map(|(k, v, remove)| {
                    OpData::default()
                        .with_key(s(k))
                        .with_value(*v)
                        .with_remove(*remove)
                })
                .collect(),
        )
}
