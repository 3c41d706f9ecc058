//! The immutable [`MetadataImage`]: the whole cluster metadata as of one raft log entry.
//!
//! ```text
//!   committed batches ──replay──▶ MetadataDelta(base = image N) ──apply──▶ image N+1
//!                                        │                                   │
//!                                        └────── (delta, Arc<image N+1>) ────┴──▶ publishers
//! ```
//!
//! An image is a set of `Arc`-shared sub-images, one per area. Cloning an image is five
//! reference-count increments; a delta that does not touch an area reuses the old sub-image
//! (`Arc::ptr_eq`), and inside [`TopicsImage`] every untouched topic is shared too.

pub mod acls;
pub mod client_quotas;
pub mod cluster;
pub mod configs;
pub mod digest;
pub mod features;
pub mod partition;
pub mod scram;
pub mod topics;

use std::sync::Arc;

use crate::records::MetadataRecord;

pub use acls::{AclRule, AclsImage, StandardAcl};
pub use client_quotas::{ClientQuotaImage, ClientQuotasImage};
pub use cluster::{BrokerRegistration, ClusterImage, ControllerRegistration};
pub use configs::{ConfigsImage, ResourceConfigs};
pub use digest::ImageDigest;
pub use features::FeaturesImage;
pub use partition::{BrokerIds, DirectoryIds, PartitionRegistration, Reassignment};
pub use scram::ScramImage;
pub use topics::{TopicImage, TopicsImage};

/// Where an image comes from: the raft log id of the last entry applied to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Provenance {
    /// Raft log index of the last applied entry (0 = nothing applied).
    pub last_log_index: u64,
    /// Raft term of that entry.
    pub last_log_term: u64,
    /// Wall-clock time (ms since the epoch) the entry was appended, as the leader saw it.
    pub last_applied_time_ms: i64,
}

/// The cluster metadata at one point of the metadata log. Immutable; share it as
/// `Arc<MetadataImage>` and read one image per request (STYLE #5).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MetadataImage {
    /// The last log entry this image contains.
    pub provenance: Provenance,
    /// Finalized feature levels.
    pub features: Arc<FeaturesImage>,
    /// Registered brokers and controllers.
    pub cluster: Arc<ClusterImage>,
    /// Topics and partitions.
    pub topics: Arc<TopicsImage>,
    /// Dynamic configs.
    pub configs: Arc<ConfigsImage>,
    /// Client quotas.
    pub client_quotas: Arc<ClientQuotasImage>,
    /// SCRAM credentials.
    pub scram: Arc<ScramImage>,
    /// ACLs, with the authorizer's index.
    pub acls: Arc<AclsImage>,
    /// The digest of everything above but the provenance, kept up to date by each delta (equal
    /// on every node that applied the same log prefix; see [`digest`]).
    pub digest: ImageDigest,
}

impl MetadataImage {
    /// The image before any record: every area empty, provenance zero.
    pub fn empty() -> Self {
        MetadataImage::default()
    }

    /// Whether every area is empty (the provenance is not looked at).
    pub fn is_empty(&self) -> bool {
        self.features.is_empty()
            && self.cluster.is_empty()
            && self.topics.is_empty()
            && self.configs.is_empty()
            && self.client_quotas.is_empty()
            && self.scram.is_empty()
            && self.acls.is_empty()
    }

    /// The digest computed from scratch over [`MetadataImage::to_records`]: O(image), for
    /// checking the one deltas maintain.
    pub fn compute_digest(&self) -> ImageDigest {
        ImageDigest::of(|out| out.extend(self.to_records()))
    }

    /// The whole image as records, in Kafka's snapshot order: features (`metadata.version`
    /// first), brokers and controllers, topics with their partitions, configs, client quotas.
    /// Replaying them into a delta on the empty image gives back an equal image.
    pub fn to_records(&self) -> Vec<MetadataRecord> {
        let mut out =
            Vec::with_capacity(self.topics.topic_count() + self.topics.partition_count() + 16);
        self.features.to_records(&mut out);
        self.cluster.to_records(&mut out);
        self.topics.to_records(&mut out);
        self.configs.to_records(&mut out);
        self.client_quotas.to_records(&mut out);
        self.scram.to_records(&mut out);
        self.acls.to_records(&mut out);
        out
    }
}

/// Record builders and image assertions shared by the image tests.
#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
pub(crate) mod test_util {
    use std::sync::Arc;

    use uuid::Uuid;

    use super::{MetadataImage, Provenance};
    use crate::delta::MetadataDelta;
    use crate::records::*;

    pub(crate) fn topic(name: &str, id: u128) -> MetadataRecord {
        MetadataRecord::Topic(TopicRecord {
            name: name.into(),
            topic_id: Uuid::from_u128(id),
        })
    }

    pub(crate) fn partition(topic_id: u128, partition_id: i32, replicas: &[i32]) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord {
            partition_id,
            topic_id: Uuid::from_u128(topic_id),
            replicas: replicas.to_vec(),
            isr: replicas.to_vec(),
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader: replicas.first().copied().unwrap_or(NO_LEADER),
            leader_recovery_state: 0,
            leader_epoch: 0,
            partition_epoch: 0,
            directories: replicas
                .iter()
                .map(|id| Uuid::from_u128(0xd000 + *id as u128))
                .collect(),
        })
    }

    pub(crate) fn remove_topic(id: u128) -> MetadataRecord {
        MetadataRecord::RemoveTopic(RemoveTopicRecord {
            topic_id: Uuid::from_u128(id),
        })
    }

    pub(crate) fn isr_change(
        topic_id: u128,
        partition_id: i32,
        isr: &[i32],
        leader: Option<i32>,
    ) -> MetadataRecord {
        MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id,
            topic_id: Uuid::from_u128(topic_id),
            isr: Some(isr.to_vec()),
            leader,
            ..PartitionChangeRecord::default()
        })
    }

    pub(crate) fn endpoint(name: &str, host: &str, port: u16) -> Endpoint {
        Endpoint {
            name: name.into(),
            host: host.into(),
            port,
            security_protocol: 0,
        }
    }

    pub(crate) fn register_broker(id: i32, epoch: i64, fenced: bool) -> MetadataRecord {
        MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: id,
            incarnation_id: Uuid::from_u128(0xb000 + epoch as u128),
            broker_epoch: epoch,
            endpoints: vec![endpoint("PLAINTEXT", &format!("broker{id}"), 9092)],
            features: vec![FeatureRange {
                name: METADATA_VERSION_FEATURE.into(),
                min_supported_version: 1,
                max_supported_version: 22,
            }],
            rack: Some(format!("rack{}", id % 2)),
            fenced,
            in_controlled_shutdown: false,
            log_dirs: vec![Uuid::from_u128(0xd000 + id as u128)],
        })
    }

    pub(crate) fn config(
        resource_type: i8,
        resource_name: &str,
        name: &str,
        value: Option<&str>,
    ) -> MetadataRecord {
        MetadataRecord::Config(ConfigRecord {
            resource_type,
            resource_name: resource_name.into(),
            name: name.into(),
            value: value.map(str::to_string),
        })
    }

    pub(crate) fn entity(parts: &[(&str, Option<&str>)]) -> Vec<EntityData> {
        parts
            .iter()
            .map(|(entity_type, entity_name)| EntityData {
                entity_type: (*entity_type).into(),
                entity_name: entity_name.map(str::to_string),
            })
            .collect()
    }

    pub(crate) fn quota(
        parts: &[(&str, Option<&str>)],
        key: &str,
        value: Option<f64>,
    ) -> MetadataRecord {
        MetadataRecord::ClientQuota(ClientQuotaRecord {
            entity: entity(parts),
            key: key.into(),
            value: value.unwrap_or(0.0),
            remove: value.is_none(),
        })
    }

    pub(crate) fn feature(name: &str, level: i16) -> MetadataRecord {
        MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: name.into(),
            feature_level: level,
        })
    }

    /// `records` replayed as one delta on `base`.
    pub(crate) fn apply(base: &MetadataImage, records: &[MetadataRecord]) -> MetadataImage {
        let mut delta = MetadataDelta::new(Arc::new(base.clone()));
        delta.replay_all(records).expect("records replay");
        delta.apply(Provenance::default())
    }

    /// `records` replayed on the empty image.
    pub(crate) fn image(records: &[MetadataRecord]) -> MetadataImage {
        apply(&MetadataImage::empty(), records)
    }

    /// Replays `records` on `base` split into batches in every possible way (each batch its own
    /// delta, applied and used as the next base) and checks each ends at `expected`.
    pub(crate) fn assert_every_batch_split(
        base: &MetadataImage,
        records: &[MetadataRecord],
        expected: &MetadataImage,
    ) {
        assert!(records.len() <= 14, "2^(n-1) splits: keep fixtures small");
        let cuts = records.len().saturating_sub(1);
        for mask in 0u32..(1 << cuts) {
            let mut image = base.clone();
            let mut start = 0;
            for end in 1..=records.len() {
                let cut_here = end == records.len() || mask & (1 << (end - 1)) != 0;
                if cut_here {
                    image = apply(&image, &records[start..end]);
                    start = end;
                }
            }
            assert_eq!(&image, expected, "batch split mask {mask:#b}");
        }
    }

    /// Writes `image` as records, reads them back, and checks the result is equal.
    pub(crate) fn assert_round_trip(image: &MetadataImage) {
        let records = image.to_records();
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        delta.replay_all(&records).expect("snapshot replay");
        assert_eq!(&delta.apply(image.provenance), image);
        // And through the on-disk frames.
        let decoded: Vec<MetadataRecord> = records
            .iter()
            .map(|r| MetadataRecord::from_frame(&r.to_frame()).expect("frame decodes"))
            .collect();
        assert_eq!(decoded, records);
    }
}

/// A fast hasher for topic ids in the topic maps (FxHash-style multiply-rotate).
///
/// Topic ids are random v4 UUIDs chosen by the controller, not by clients, so a keyed hash
/// (SipHash) buys no flood protection here; it cost ~10% of a snapshot load.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        // murmur3's fmix64: every output bit depends on every input bit (imbl's HAMT uses the
        // low 32 bits, hashbrown the top 7 and the low ones).
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }

    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word))
                .wrapping_mul(0x517c_c1b7_2722_0a95);
        }
    }
}

/// `BuildHasher` for [`IdHasher`].
pub(crate) type IdBuildHasher = std::hash::BuildHasherDefault<IdHasher>;
