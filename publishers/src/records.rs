//! Metadata records: the only things ever written to the metadata log.
//!
//! Each record is modelled on the Kafka metadata record of the same name (same fields, same
//! meaning) and carries Kafka's record type id. On disk a record is a [`RecordFrame`]:
//! `(record_type, version, payload)`, where the payload is the postcard encoding of the
//! versioned struct. A new field means a new version: the decoder keeps reading every old
//! version and upgrades it, so logs and snapshots written by older nodes stay readable.

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// Kafka's "no leader" value for `PartitionRecord::leader`.
pub const NO_LEADER: i32 = -1;

/// The `broker_epoch` a controller writes in a `RegisterBrokerRecord`: "the offset of this
/// record". Kafka's epoch is the offset of the registration record; openraft assigns an entry's
/// index only when it appends it, so the controller cannot write the number itself. Replaying
/// the record at its offset ([`crate::MetadataDelta::replay_at`]) gives the registration that
/// offset as its epoch, identically on every node; snapshots carry the resolved epoch.
pub const BROKER_EPOCH_AT_OFFSET: i64 = -1;

/// Name of the feature that versions the metadata format.
pub const METADATA_VERSION_FEATURE: &str = "metadata.version";

/// Name of the feature that versions the raft quorum format.
pub const KRAFT_VERSION_FEATURE: &str = "kraft.version";

/// A listener endpoint of a broker or controller, as in RegisterBrokerRecord's EndPoints.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Endpoint {
    /// Listener name, e.g. `PLAINTEXT`.
    pub name: String,
    /// Host clients should connect to.
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Kafka security protocol id (0 = PLAINTEXT).
    pub security_protocol: i16,
}

/// A supported feature range announced in a registration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureRange {
    /// Feature name.
    pub name: String,
    /// Lowest supported level.
    pub min_supported_version: i16,
    /// Highest supported level.
    pub max_supported_version: i16,
}

/// RegisterBrokerRecord (Kafka type 0).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterBrokerRecord {
    /// Broker node id.
    pub broker_id: i32,
    /// Random id of this process's incarnation.
    pub incarnation_id: Uuid,
    /// Epoch of this registration: the log offset at which it was written
    /// ([`BROKER_EPOCH_AT_OFFSET`] until it is replayed at that offset).
    pub broker_epoch: i64,
    /// Advertised endpoints.
    pub endpoints: Vec<Endpoint>,
    /// Features the broker supports.
    pub features: Vec<FeatureRange>,
    /// Rack, if configured.
    pub rack: Option<String>,
    /// Whether the broker starts fenced.
    pub fenced: bool,
    /// Whether the broker is in controlled shutdown.
    pub in_controlled_shutdown: bool,
    /// Directory ids of the broker's log dirs.
    pub log_dirs: Vec<Uuid>,
}

/// UnregisterBrokerRecord (Kafka type 1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnregisterBrokerRecord {
    /// Broker node id.
    pub broker_id: i32,
    /// Epoch of the registration being removed.
    pub broker_epoch: i64,
}

/// TopicRecord (Kafka type 2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicRecord {
    /// Topic name.
    pub name: String,
    /// Topic id.
    pub topic_id: Uuid,
}

/// PartitionRecord (Kafka type 3).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionRecord {
    /// Partition index.
    pub partition_id: i32,
    /// Topic id.
    pub topic_id: Uuid,
    /// Replica broker ids, preferred leader first.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// Replicas being removed by a reassignment.
    pub removing_replicas: Vec<i32>,
    /// Replicas being added by a reassignment.
    pub adding_replicas: Vec<i32>,
    /// Leader broker id, or [`NO_LEADER`].
    pub leader: i32,
    /// 0 = recovered, 1 = recovering.
    pub leader_recovery_state: i8,
    /// Bumped on every leader change.
    pub leader_epoch: i32,
    /// Bumped on every change.
    pub partition_epoch: i32,
    /// Directory id per replica.
    pub directories: Vec<Uuid>,
}

impl PartitionRecord {
    /// A partition of `topic_id` on `replicas`, all in sync, led by the first, at epoch 0,
    /// with no directory assigned: what a new single-step placement records.
    pub fn in_sync(topic_id: Uuid, partition_id: i32, replicas: Vec<i32>) -> Self {
        PartitionRecord {
            partition_id,
            topic_id,
            leader: replicas.first().copied().unwrap_or(NO_LEADER),
            isr: replicas.clone(),
            replicas,
            removing_replicas: Vec::new(),
            adding_replicas: Vec::new(),
            leader_recovery_state: 0,
            leader_epoch: 0,
            partition_epoch: 0,
            directories: Vec::new(),
        }
    }
}

/// PartitionChangeRecord (Kafka type 5): every field but the key is optional, `None` = unchanged.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionChangeRecord {
    /// Partition index.
    pub partition_id: i32,
    /// Topic id.
    pub topic_id: Uuid,
    /// New ISR.
    pub isr: Option<Vec<i32>>,
    /// New leader ([`NO_LEADER`] for none).
    pub leader: Option<i32>,
    /// New replicas.
    pub replicas: Option<Vec<i32>>,
    /// New removing replicas.
    pub removing_replicas: Option<Vec<i32>>,
    /// New adding replicas.
    pub adding_replicas: Option<Vec<i32>>,
    /// New leader recovery state.
    pub leader_recovery_state: Option<i8>,
    /// New directories.
    pub directories: Option<Vec<Uuid>>,
}

/// FenceBrokerRecord (Kafka type 7).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FenceBrokerRecord {
    /// Broker id.
    pub id: i32,
    /// Broker epoch.
    pub epoch: i64,
}

/// UnfenceBrokerRecord (Kafka type 8).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnfenceBrokerRecord {
    /// Broker id.
    pub id: i32,
    /// Broker epoch.
    pub epoch: i64,
}

/// RemoveTopicRecord (Kafka type 9).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveTopicRecord {
    /// Id of the topic to remove.
    pub topic_id: Uuid,
}

/// ConfigRecord (Kafka type 4): `value == None` deletes the key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConfigRecord {
    /// ConfigResource type id (2 topic, 4 broker, 16 client metrics, 32 group).
    pub resource_type: i8,
    /// Resource name ("" = cluster default for brokers).
    pub resource_name: String,
    /// Config key.
    pub name: String,
    /// New value, or `None` to delete the key.
    pub value: Option<String>,
}

/// One (type, name) part of a client-quota entity; `entity_name == None` is the default entity.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct EntityData {
    /// `user`, `client-id` or `ip`.
    pub entity_type: String,
    /// Entity name, `None` for the default.
    pub entity_name: Option<String>,
}

/// ClientQuotaRecord (Kafka type 14).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientQuotaRecord {
    /// The entity the quota applies to.
    pub entity: Vec<EntityData>,
    /// Quota key, e.g. `producer_byte_rate`.
    pub key: String,
    /// Quota value (ignored when `remove`).
    pub value: f64,
    /// Whether the key is removed.
    pub remove: bool,
}

/// FeatureLevelRecord (Kafka type 12).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FeatureLevelRecord {
    /// Feature name.
    pub name: String,
    /// Finalized level (0 removes the feature).
    pub feature_level: i16,
}

/// ProducerIdsRecord (Kafka type 15): the controller handed producer ids below
/// `next_producer_id` to a broker (KIP-730), so none is ever issued twice, across restarts too.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerIdsRecord {
    /// The broker that got the block (-1 in a snapshot).
    pub broker_id: i32,
    /// Its broker epoch (-1 in a snapshot).
    pub broker_epoch: i64,
    /// The first producer id not yet handed out.
    pub next_producer_id: i64,
}

/// UserScramCredentialRecord (Kafka type 11): a user's SCRAM credential for one mechanism.
/// Only what the server needs to verify a proof; never the password.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserScramCredentialRecord {
    /// User name.
    pub name: String,
    /// Kafka's mechanism type: 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512.
    pub mechanism: i8,
    /// Salt.
    pub salt: Vec<u8>,
    /// `H(ClientKey)`.
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`.
    pub server_key: Vec<u8>,
    /// PBKDF2 iterations.
    pub iterations: i32,
}

// The keys are secrets: logs and fault reports show the user, mechanism and iterations only.
impl std::fmt::Debug for UserScramCredentialRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserScramCredentialRecord")
            .field("name", &self.name)
            .field("mechanism", &self.mechanism)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

/// RemoveUserScramCredentialRecord (Kafka type 22).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveUserScramCredentialRecord {
    /// User name.
    pub name: String,
    /// Mechanism type.
    pub mechanism: i8,
}

/// AccessControlEntryRecord (Kafka type 18): one ACL binding, as Kafka's StandardAcl. The enum
/// fields hold Kafka's codes (`ResourceType`, `PatternType`, `AclOperation`,
/// `AclPermissionType`); the controller writes only valid ones and replay refuses any other.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessControlEntryRecord {
    /// Unique id of the ACL (random, chosen by the controller).
    pub id: Uuid,
    /// Resource type code (TOPIC 2, GROUP 3, CLUSTER 4, TRANSACTIONAL_ID 5, DELEGATION_TOKEN 6,
    /// USER 7).
    pub resource_type: i8,
    /// Resource name (`*` with LITERAL: every name).
    pub resource_name: String,
    /// Pattern type code (LITERAL 3, PREFIXED 4).
    pub pattern_type: i8,
    /// Principal, `Type:Name` (`User:*` matches every principal).
    pub principal: String,
    /// Host address, or `*`.
    pub host: String,
    /// Operation code (ALL 2 ... DESCRIBE_TOKENS 14).
    pub operation: i8,
    /// Permission type code (DENY 2, ALLOW 3).
    pub permission_type: i8,
}

/// RemoveAccessControlEntryRecord (Kafka type 19).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoveAccessControlEntryRecord {
    /// Id of the ACL removed.
    pub id: Uuid,
}

/// BrokerRegistrationChangeRecord (Kafka type 17).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerRegistrationChangeRecord {
    /// Broker id.
    pub broker_id: i32,
    /// Broker epoch.
    pub broker_epoch: i64,
    /// New fenced state, `None` = unchanged.
    pub fenced: Option<bool>,
    /// New controlled-shutdown state, `None` = unchanged.
    pub in_controlled_shutdown: Option<bool>,
}

/// RegisterControllerRecord (Kafka type 27).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegisterControllerRecord {
    /// Controller node id.
    pub controller_id: i32,
    /// Random id of this process's incarnation.
    pub incarnation_id: Uuid,
    /// Directory id of the controller's metadata log dir.
    pub directory_id: Uuid,
    /// Controller listener endpoints.
    pub endpoints: Vec<Endpoint>,
    /// Features the controller supports.
    pub features: Vec<FeatureRange>,
}

/// Every record the metadata log can hold.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(into = "RecordFrame", try_from = "RecordFrame")]
pub enum MetadataRecord {
    /// See [`RegisterBrokerRecord`].
    RegisterBroker(RegisterBrokerRecord),
    /// See [`UnregisterBrokerRecord`].
    UnregisterBroker(UnregisterBrokerRecord),
    /// See [`TopicRecord`].
    Topic(TopicRecord),
    /// See [`PartitionRecord`].
    Partition(PartitionRecord),
    /// See [`ConfigRecord`].
    Config(ConfigRecord),
    /// See [`PartitionChangeRecord`].
    PartitionChange(PartitionChangeRecord),
    /// See [`FenceBrokerRecord`].
    FenceBroker(FenceBrokerRecord),
    /// See [`UnfenceBrokerRecord`].
    UnfenceBroker(UnfenceBrokerRecord),
    /// See [`RemoveTopicRecord`].
    RemoveTopic(RemoveTopicRecord),
    /// See [`FeatureLevelRecord`].
    FeatureLevel(FeatureLevelRecord),
    /// See [`ClientQuotaRecord`].
    ClientQuota(ClientQuotaRecord),
    /// See [`BrokerRegistrationChangeRecord`].
    BrokerRegistrationChange(BrokerRegistrationChangeRecord),
    /// See [`RegisterControllerRecord`].
    RegisterController(RegisterControllerRecord),
    /// See [`ProducerIdsRecord`].
    ProducerIds(ProducerIdsRecord),
    /// See [`UserScramCredentialRecord`].
    UserScramCredential(UserScramCredentialRecord),
    /// See [`RemoveUserScramCredentialRecord`].
    RemoveUserScramCredential(RemoveUserScramCredentialRecord),
    /// See [`AccessControlEntryRecord`].
    AccessControlEntry(AccessControlEntryRecord),
    /// See [`RemoveAccessControlEntryRecord`].
    RemoveAccessControlEntry(RemoveAccessControlEntryRecord),
    /// NoOpRecord (Kafka type 20): only advances the offset (written by a new leader).
    NoOp,
}

/// The on-disk form of one record: Kafka's record type id, the record's version, its payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordFrame {
    /// Kafka metadata record type id.
    pub record_type: u16,
    /// Version of the payload's layout.
    pub version: u16,
    /// postcard encoding of the versioned struct.
    pub payload: Vec<u8>,
}

/// A frame that names an unknown record type or version, or whose payload does not decode.
#[derive(Debug, thiserror::Error)]
pub enum RecordDecodeError {
    /// Type or version not known to this build.
    #[error("unknown metadata record type {record_type} version {version}")]
    Unknown {
        /// Record type id.
        record_type: u16,
        /// Record version.
        version: u16,
    },
    /// The payload is not a valid encoding of that version.
    #[error("corrupt metadata record type {record_type} version {version}: {source}")]
    Corrupt {
        /// Record type id.
        record_type: u16,
        /// Record version.
        version: u16,
        /// Decoder error.
        source: postcard::Error,
    },
}

impl std::fmt::Display for RecordFrame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "record type {} v{}", self.record_type, self.version)
    }
}

/// Kafka's record type ids, and the current version Gregor writes for each.
pub(crate) mod type_ids {
    pub(super) const REGISTER_BROKER: u16 = 0;
    pub(super) const UNREGISTER_BROKER: u16 = 1;
    pub(crate) const TOPIC: u16 = 2;
    pub(crate) const PARTITION: u16 = 3;
    pub(super) const CONFIG: u16 = 4;
    pub(super) const PARTITION_CHANGE: u16 = 5;
    pub(super) const FENCE_BROKER: u16 = 7;
    pub(super) const UNFENCE_BROKER: u16 = 8;
    pub(super) const REMOVE_TOPIC: u16 = 9;
    pub(super) const FEATURE_LEVEL: u16 = 12;
    pub(super) const USER_SCRAM_CREDENTIAL: u16 = 11;
    pub(super) const CLIENT_QUOTA: u16 = 14;
    pub(super) const PRODUCER_IDS: u16 = 15;
    pub(super) const BROKER_REGISTRATION_CHANGE: u16 = 17;
    pub(super) const ACCESS_CONTROL_ENTRY: u16 = 18;
    pub(super) const REMOVE_ACCESS_CONTROL_ENTRY: u16 = 19;
    pub(super) const NO_OP: u16 = 20;
    pub(super) const REMOVE_USER_SCRAM_CREDENTIAL: u16 = 22;
    pub(super) const REGISTER_CONTROLLER: u16 = 27;
}

/// Every record type is at its first version; bump per type when a layout changes.
pub(crate) const CURRENT_VERSION: u16 = 0;

fn frame<T: Serialize>(record_type: u16, record: &T) -> RecordFrame {
    // Serializing plain structs of strings, integers and vectors into a Vec cannot fail.
    let payload = postcard::to_allocvec(record).unwrap_or_default();
    RecordFrame {
        record_type,
        version: CURRENT_VERSION,
        payload,
    }
}

impl MetadataRecord {
    /// Kafka's record type id of this record.
    pub fn record_type(&self) -> u16 {
        use type_ids::*;
        match self {
            MetadataRecord::RegisterBroker(_) => REGISTER_BROKER,
            MetadataRecord::UnregisterBroker(_) => UNREGISTER_BROKER,
            MetadataRecord::Topic(_) => TOPIC,
            MetadataRecord::Partition(_) => PARTITION,
            MetadataRecord::Config(_) => CONFIG,
            MetadataRecord::PartitionChange(_) => PARTITION_CHANGE,
            MetadataRecord::FenceBroker(_) => FENCE_BROKER,
            MetadataRecord::UnfenceBroker(_) => UNFENCE_BROKER,
            MetadataRecord::RemoveTopic(_) => REMOVE_TOPIC,
            MetadataRecord::FeatureLevel(_) => FEATURE_LEVEL,
            MetadataRecord::ClientQuota(_) => CLIENT_QUOTA,
            MetadataRecord::BrokerRegistrationChange(_) => BROKER_REGISTRATION_CHANGE,
            MetadataRecord::RegisterController(_) => REGISTER_CONTROLLER,
            MetadataRecord::ProducerIds(_) => PRODUCER_IDS,
            MetadataRecord::UserScramCredential(_) => USER_SCRAM_CREDENTIAL,
            MetadataRecord::RemoveUserScramCredential(_) => REMOVE_USER_SCRAM_CREDENTIAL,
            MetadataRecord::AccessControlEntry(_) => ACCESS_CONTROL_ENTRY,
            MetadataRecord::RemoveAccessControlEntry(_) => REMOVE_ACCESS_CONTROL_ENTRY,
            MetadataRecord::NoOp => NO_OP,
        }
    }

    /// Encodes this record as a frame at its current version.
    pub fn to_frame(&self) -> RecordFrame {
        let record_type = self.record_type();
        match self {
            MetadataRecord::RegisterBroker(r) => frame(record_type, r),
            MetadataRecord::UnregisterBroker(r) => frame(record_type, r),
            MetadataRecord::Topic(r) => frame(record_type, r),
            MetadataRecord::Partition(r) => frame(record_type, r),
            MetadataRecord::Config(r) => frame(record_type, r),
            MetadataRecord::PartitionChange(r) => frame(record_type, r),
            MetadataRecord::FenceBroker(r) => frame(record_type, r),
            MetadataRecord::UnfenceBroker(r) => frame(record_type, r),
            MetadataRecord::RemoveTopic(r) => frame(record_type, r),
            MetadataRecord::FeatureLevel(r) => frame(record_type, r),
            MetadataRecord::ClientQuota(r) => frame(record_type, r),
            MetadataRecord::BrokerRegistrationChange(r) => frame(record_type, r),
            MetadataRecord::RegisterController(r) => frame(record_type, r),
            MetadataRecord::ProducerIds(r) => frame(record_type, r),
            MetadataRecord::UserScramCredential(r) => frame(record_type, r),
            MetadataRecord::RemoveUserScramCredential(r) => frame(record_type, r),
            MetadataRecord::AccessControlEntry(r) => frame(record_type, r),
            MetadataRecord::RemoveAccessControlEntry(r) => frame(record_type, r),
            MetadataRecord::NoOp => frame(record_type, &()),
        }
    }

    /// Decodes a frame written by this or an older build.
    pub fn from_frame(frame: &RecordFrame) -> Result<Self, RecordDecodeError> {
        use type_ids::*;
        let (record_type, version) = (frame.record_type, frame.version);
        if version != CURRENT_VERSION {
            return Err(RecordDecodeError::Unknown {
                record_type,
                version,
            });
        }
        fn decode<T: serde::de::DeserializeOwned>(
            frame: &RecordFrame,
        ) -> Result<T, RecordDecodeError> {
            postcard::from_bytes(&frame.payload).map_err(|source| RecordDecodeError::Corrupt {
                record_type: frame.record_type,
                version: frame.version,
                source,
            })
        }
        Ok(match record_type {
            REGISTER_BROKER => MetadataRecord::RegisterBroker(decode(frame)?),
            UNREGISTER_BROKER => MetadataRecord::UnregisterBroker(decode(frame)?),
            TOPIC => MetadataRecord::Topic(decode(frame)?),
            PARTITION => MetadataRecord::Partition(decode(frame)?),
            CONFIG => MetadataRecord::Config(decode(frame)?),
            PARTITION_CHANGE => MetadataRecord::PartitionChange(decode(frame)?),
            FENCE_BROKER => MetadataRecord::FenceBroker(decode(frame)?),
            UNFENCE_BROKER => MetadataRecord::UnfenceBroker(decode(frame)?),
            REMOVE_TOPIC => MetadataRecord::RemoveTopic(decode(frame)?),
            FEATURE_LEVEL => MetadataRecord::FeatureLevel(decode(frame)?),
            CLIENT_QUOTA => MetadataRecord::ClientQuota(decode(frame)?),
            BROKER_REGISTRATION_CHANGE => MetadataRecord::BrokerRegistrationChange(decode(frame)?),
            REGISTER_CONTROLLER => MetadataRecord::RegisterController(decode(frame)?),
            PRODUCER_IDS => MetadataRecord::ProducerIds(decode(frame)?),
            USER_SCRAM_CREDENTIAL => MetadataRecord::UserScramCredential(decode(frame)?),
            REMOVE_USER_SCRAM_CREDENTIAL => {
                MetadataRecord::RemoveUserScramCredential(decode(frame)?)
            }
            ACCESS_CONTROL_ENTRY => MetadataRecord::AccessControlEntry(decode(frame)?),
            REMOVE_ACCESS_CONTROL_ENTRY => MetadataRecord::RemoveAccessControlEntry(decode(frame)?),
            NO_OP => {
                decode::<()>(frame)?;
                MetadataRecord::NoOp
            }
            _ => {
                return Err(RecordDecodeError::Unknown {
                    record_type,
                    version,
                })
            }
        })
    }
}

impl From<MetadataRecord> for RecordFrame {
    fn from(record: MetadataRecord) -> Self {
        record.to_frame()
    }
}

impl TryFrom<RecordFrame> for MetadataRecord {
    type Error = RecordDecodeError;

    fn try_from(frame: RecordFrame) -> Result<Self, Self::Error> {
        MetadataRecord::from_frame(&frame)
    }
}

/// Records that the metadata log applies atomically: one raft entry's payload.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MetadataBatch {
    /// The records, applied in order, all or none.
    pub records: Vec<MetadataRecord>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_records() -> Vec<MetadataRecord> {
        let topic_id = Uuid::from_u128(0x1234);
        vec![
            MetadataRecord::Topic(TopicRecord {
                name: "orders".into(),
                topic_id,
            }),
            MetadataRecord::Partition(PartitionRecord {
                directories: vec![Uuid::from_u128(7)],
                ..PartitionRecord::in_sync(topic_id, 0, vec![1])
            }),
            MetadataRecord::ClientQuota(ClientQuotaRecord {
                entity: vec![EntityData {
                    entity_type: "user".into(),
                    entity_name: None,
                }],
                key: "producer_byte_rate".into(),
                value: 1024.0,
                remove: false,
            }),
            MetadataRecord::UserScramCredential(UserScramCredentialRecord {
                name: "alice".into(),
                mechanism: 2,
                salt: vec![1, 2],
                stored_key: vec![3; 64],
                server_key: vec![4; 64],
                iterations: 8192,
            }),
            MetadataRecord::RemoveUserScramCredential(RemoveUserScramCredentialRecord {
                name: "alice".into(),
                mechanism: 2,
            }),
            MetadataRecord::AccessControlEntry(AccessControlEntryRecord {
                id: Uuid::from_u128(0xac1),
                resource_type: 2,
                resource_name: "orders-".into(),
                pattern_type: 4,
                principal: "User:alice".into(),
                host: "*".into(),
                operation: 3,
                permission_type: 3,
            }),
            MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord {
                id: Uuid::from_u128(0xac1),
            }),
            MetadataRecord::NoOp,
        ]
    }

    #[test]
    fn every_record_round_trips_through_its_frame() {
        for record in sample_records() {
            let frame = record.to_frame();
            assert_eq!(frame.version, CURRENT_VERSION);
            assert_eq!(MetadataRecord::from_frame(&frame).ok(), Some(record));
        }
    }

    #[test]
    fn batch_round_trips_through_serde() {
        let batch = MetadataBatch {
            records: sample_records(),
        };
        let bytes = postcard::to_allocvec(&batch).unwrap_or_default();
        let decoded: Result<MetadataBatch, _> = postcard::from_bytes(&bytes);
        assert_eq!(decoded.ok(), Some(batch));
    }

    #[test]
    fn unknown_type_and_version_are_errors_not_panics() {
        let unknown_type = RecordFrame {
            record_type: 999,
            version: 0,
            payload: vec![],
        };
        assert!(matches!(
            MetadataRecord::from_frame(&unknown_type),
            Err(RecordDecodeError::Unknown { .. })
        ));
        let future_version = RecordFrame {
            record_type: 2,
            version: 9,
            payload: vec![],
        };
        assert!(MetadataRecord::from_frame(&future_version).is_err());
        let truncated = RecordFrame {
            record_type: 2,
            version: 0,
            payload: vec![5, b'a'],
        };
        assert!(matches!(
            MetadataRecord::from_frame(&truncated),
            Err(RecordDecodeError::Corrupt { .. })
        ));
    }
}
