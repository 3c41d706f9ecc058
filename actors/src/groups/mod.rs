//! The group coordinator: consumer groups (classic protocol) and their committed offsets.
//!
//! Groups live in the partitions of `__consumer_offsets`, an internal compacted topic; the
//! coordinator of a group is the leader of partition `abs(javaHash(group id)) % n`. This node's
//! [`GroupCoordinator`] actor owns every group of the partitions it leads ([`state::Coordinator`],
//! the pure state machine), learns which those are from [`GroupPublisher`] (the metadata image),
//! loads a partition from its log when it starts leading it and drops its groups when it stops.
//! Offsets and group records are appended to the partition's log through the log manager, so
//! file I/O stays on the shard threads; parked JoinGroup/SyncGroup requests are woken by events
//! (another member joining, a leader's assignment) or by the one timer the state asked for.

mod actor;
pub mod assignor;
pub mod protocols;
mod publisher;
pub mod records;
pub mod state;
pub mod topic_names;

use std::time::Duration;

pub use actor::{
    CommitOffsets, ConsumerGroupDescribe, ConsumerGroupHeartbeat, DeleteGroups, DeleteOffsets,
    DescribeGroups, ExpireOffsets, FetchOffsets, FetchedOffsets, GroupCoordinator, Groups,
    Heartbeat, JoinGroup, Leadership, LeaveGroup, ListGroups, OffsetsQuery, SyncGroup,
};
pub use publisher::GroupPublisher;

/// The internal topic holding offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

/// Kafka's `message.max.bytes` default, the largest batch a `__consumer_offsets` partition
/// takes unless configured otherwise (the coordinator asks the partition's log for its own).
pub const DEFAULT_MAX_WRITE_BYTES: usize = 1_048_588;

/// A new classic member's id: `<prefix>-<UUID>`, the prefix its client id (Kafka's
/// `clientId-UUID`) or, for a static member, its group instance id.
pub fn new_member_id(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4())
}

/// Whether `id` has a form a classic member's id has: the one [`new_member_id`] gives, or a
/// Kafka `Uuid` string (22 URL-safe base64 characters), which a classic member that joined a
/// consumer group gets and keeps when its group becomes classic again. A SyncGroup's
/// assignment to any other id names no member and is ignored.
pub fn could_be_member_id(id: &str) -> bool {
    if id.len() == 22
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return true;
    }
    let Some(dash) = id.len().checked_sub(37) else {
        return false;
    };
    id.as_bytes().get(dash) == Some(&b'-')
        && id
            .get(dash + 1..)
            .is_some_and(|uuid| uuid::Uuid::try_parse(uuid).is_ok())
}

/// Kafka's error codes the coordinator answers with.
pub mod codes {
    pub const UNKNOWN_SERVER_ERROR: i16 = -1;
    pub const NONE: i16 = 0;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const OFFSET_METADATA_TOO_LARGE: i16 = 12;
    pub const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    pub const COORDINATOR_NOT_AVAILABLE: i16 = 15;
    pub const NOT_COORDINATOR: i16 = 16;
    pub const ILLEGAL_GENERATION: i16 = 22;
    pub const INCONSISTENT_GROUP_PROTOCOL: i16 = 23;
    pub const INVALID_GROUP_ID: i16 = 24;
    pub const UNKNOWN_MEMBER_ID: i16 = 25;
    pub const INVALID_SESSION_TIMEOUT: i16 = 26;
    pub const REBALANCE_IN_PROGRESS: i16 = 27;
    pub const INVALID_REQUEST: i16 = 42;
    pub const NON_EMPTY_GROUP: i16 = 68;
    pub const GROUP_ID_NOT_FOUND: i16 = 69;
    pub const MEMBER_ID_REQUIRED: i16 = 79;
    pub const GROUP_MAX_SIZE_REACHED: i16 = 81;
    pub const FENCED_INSTANCE_ID: i16 = 82;
    pub const GROUP_SUBSCRIBED_TO_TOPIC: i16 = 86;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const FENCED_MEMBER_EPOCH: i16 = 110;
    pub const UNRELEASED_INSTANCE_ID: i16 = 111;
    pub const UNSUPPORTED_ASSIGNOR: i16 = 112;
    pub const STALE_MEMBER_EPOCH: i16 = 113;
    pub const INVALID_REGULAR_EXPRESSION: i16 = 128;
}

/// The broker configs of the group coordinator (Kafka's names and defaults, except where noted).
#[derive(Clone, Debug)]
pub struct GroupSettings {
    /// `offsets.topic.num.partitions` (50).
    pub offsets_topic_partitions: i32,
    /// `offsets.topic.replication.factor` (3 in Kafka; capped at the live brokers on creation).
    pub offsets_topic_replication_factor: i16,
    /// `offsets.topic.segment.bytes` (104857600).
    pub offsets_topic_segment_bytes: i32,
    /// `group.min.session.timeout.ms` (6000).
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms` (1800000).
    pub max_session_timeout_ms: i32,
    /// `group.initial.rebalance.delay.ms` (3000).
    pub initial_rebalance_delay: Duration,
    /// `group.max.size` (Integer.MAX_VALUE).
    pub max_size: usize,
    /// `offset.metadata.max.bytes` (4096).
    pub offset_metadata_max_bytes: usize,
    /// `offsets.retention.minutes` (10080), in ms.
    pub offsets_retention_ms: i64,
    /// `offsets.retention.check.interval.ms` (600000).
    pub offsets_retention_check_interval: Duration,
    /// `offsets.commit.timeout.ms` (5000).
    pub offsets_commit_timeout: Duration,
    /// `group.consumer.assignors`: the server assignors by name, the default first
    /// (`uniform,range`).
    pub consumer_assignors: Vec<String>,
    /// `group.consumer.max.size` (Integer.MAX_VALUE).
    pub consumer_max_size: usize,
    /// `group.consumer.session.timeout.ms` (45000), within
    /// `group.consumer.min/max.session.timeout.ms` (45000 / 60000).
    pub consumer_session_timeout_ms: i32,
    pub consumer_min_session_timeout_ms: i32,
    pub consumer_max_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms` (5000), within
    /// `group.consumer.min/max.heartbeat.interval.ms` (5000 / 15000).
    pub consumer_heartbeat_interval_ms: i32,
    pub consumer_min_heartbeat_interval_ms: i32,
    pub consumer_max_heartbeat_interval_ms: i32,
    /// `group.consumer.migration.policy` (bidirectional).
    pub migration_policy: MigrationPolicy,
}

/// Kafka's `ConsumerGroupMigrationPolicy`: whether a non-empty classic group of the consumer
/// protocol may become a consumer group (upgrade) when a KIP-848 member joins it, and back
/// (downgrade) when its last KIP-848 member leaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MigrationPolicy {
    #[default]
    Bidirectional,
    Upgrade,
    Downgrade,
    Disabled,
}

impl MigrationPolicy {
    /// The names Kafka accepts (case-insensitively), in its order.
    pub const NAMES: [&'static str; 4] = ["bidirectional", "upgrade", "downgrade", "disabled"];

    /// The policy a config value names, case-insensitively.
    pub fn parse(value: &str) -> Option<Self> {
        match value.to_ascii_lowercase().as_str() {
            "bidirectional" => Some(MigrationPolicy::Bidirectional),
            "upgrade" => Some(MigrationPolicy::Upgrade),
            "downgrade" => Some(MigrationPolicy::Downgrade),
            "disabled" => Some(MigrationPolicy::Disabled),
            _ => None,
        }
    }

    pub fn upgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Upgrade
        )
    }

    pub fn downgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Downgrade
        )
    }
}

impl GroupSettings {
    /// A consumer group's session timeout and heartbeat interval: its dynamic configs
    /// (`consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms`) when set, else the
    /// broker's defaults, kept within the broker's bounds as they are now.
    pub fn consumer_configs(
        &self,
        session_timeout_ms: Option<i32>,
        heartbeat_interval_ms: Option<i32>,
    ) -> state::ConsumerConfigs {
        let clamp = |value: i32, min: i32, max: i32| value.max(min).min(max.max(min));
        state::ConsumerConfigs {
            session_timeout_ms: clamp(
                session_timeout_ms.unwrap_or(self.consumer_session_timeout_ms),
                self.consumer_min_session_timeout_ms,
                self.consumer_max_session_timeout_ms,
            ),
            heartbeat_interval_ms: clamp(
                heartbeat_interval_ms.unwrap_or(self.consumer_heartbeat_interval_ms),
                self.consumer_min_heartbeat_interval_ms,
                self.consumer_max_heartbeat_interval_ms,
            ),
            max_write_bytes: DEFAULT_MAX_WRITE_BYTES,
        }
    }

    /// The values a group's configs take where it sets none (Kafka's
    /// `extractConsumerGroupConfigMap`).
    pub fn config_defaults(&self) -> crate::controller::logic::configs::group::GroupConfigDefaults {
        crate::controller::logic::configs::group::GroupConfigDefaults {
            consumer_session_timeout_ms: self.consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms: self.consumer_heartbeat_interval_ms,
        }
    }
}

impl Default for GroupSettings {
    fn default() -> Self {
        GroupSettings {
            offsets_topic_partitions: 50,
            offsets_topic_replication_factor: 3,
            offsets_topic_segment_bytes: 104_857_600,
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay: Duration::from_millis(3000),
            max_size: i32::MAX as usize,
            offset_metadata_max_bytes: 4096,
            offsets_retention_ms: 10080 * 60_000,
            offsets_retention_check_interval: Duration::from_millis(600_000),
            offsets_commit_timeout: Duration::from_millis(5000),
            consumer_assignors: assignor::ASSIGNORS
                .iter()
                .map(|a| (*a).to_owned())
                .collect(),
            consumer_max_size: i32::MAX as usize,
            consumer_session_timeout_ms: 45_000,
            consumer_min_session_timeout_ms: 45_000,
            consumer_max_session_timeout_ms: 60_000,
            consumer_heartbeat_interval_ms: 5000,
            consumer_min_heartbeat_interval_ms: 5000,
            consumer_max_heartbeat_interval_ms: 15_000,
            migration_policy: MigrationPolicy::Bidirectional,
        }
    }
}

/// Java's `String.hashCode`: h = 31·h + c over UTF-16 code units, wrapping.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The `__consumer_offsets` partition of a group: Kafka's `Utils.abs(hash) % partitions`, where
/// `abs(Integer.MIN_VALUE)` is 0.
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    let hash = java_string_hash(group_id);
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions.max(1)
}

#[cfg(test)]
mod member_id_tests {
    use super::{could_be_member_id, new_member_id};

    #[test]
    fn only_ids_of_the_given_form_could_be_members() {
        for prefix in ["client", "", "é-instance", "a-b-c"] {
            assert!(could_be_member_id(&new_member_id(prefix)), "{prefix:?}");
        }
        let uuid = "6f1c2a1e-9b1d-4c7e-8f5a-2b3c4d5e6f70";
        assert!(could_be_member_id(&format!("c-{uuid}")));
        // A Kafka Uuid string, as a classic member of a consumer group gets.
        assert!(could_be_member_id("hc7uzDbIRLO9XEW9DwARwg"));
        assert!(could_be_member_id(
            &gregor_log::checkpoint::topic_id_string(&uuid::Uuid::new_v4())
        ));
        assert!(!could_be_member_id("hc7uzDbIRLO9XEW9DwAR/g"));
        assert!(!could_be_member_id("hc7uzDbIRLO9XEW9DwARw"));
        for id in [
            "abcd".to_owned(),
            uuid.to_owned(),
            format!("c_{uuid}"),
            format!("c-{uuid}x"),
            format!("c-{}", "z".repeat(36)),
            // A dash inside a two-byte character's place: no panic, no match.
            "é".repeat(19),
        ] {
            assert!(!could_be_member_id(&id), "{id:?}");
        }
    }
}

#[cfg(test)]
mod hash_tests {
    use super::*;

    #[test]
    fn hash_matches_java() {
        // Values of "...".hashCode() in Java.
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("my-group"), -1_906_497_762);
        // Beyond the BMP: two UTF-16 code units (U+1F600 = D83D DE00).
        assert_eq!(java_string_hash("😀"), 0xD83D * 31 + 0xDE00);
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
    }

    #[test]
    fn partition_follows_kafka() {
        assert_eq!(partition_for("polygenelubricants", 50), 0);
        assert_eq!(partition_for("hello", 50), 99_162_322 % 50);
        // A negative hash uses its absolute value.
        assert_eq!(partition_for("my-group", 50), 12);
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod consumer_tests;

#[cfg(test)]
mod migration_tests;
