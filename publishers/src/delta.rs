//! [`MetadataDelta`]: the records of one or more log batches, replayed on top of a base image.
//!
//! Like Kafka's `MetadataDelta`, it creates a sub-delta per area on the first record touching
//! that area, so the accessors (`topics_delta()`, ...) returning `None` are the cheap "did this
//! area change?" test publishers use. [`MetadataDelta::apply`] builds the next image, reusing
//! every sub-image whose area did not change.

use std::sync::Arc;

use uuid::Uuid;

use crate::image::acls::{AclsDelta, StandardAcl};
use crate::image::client_quotas::ClientQuotasDelta;
use crate::image::cluster::ClusterDelta;
use crate::image::configs::{ConfigsDelta, ConfigsImage, TOPIC_RESOURCE};
use crate::image::features::FeaturesDelta;
use crate::image::scram::ScramDelta;
use crate::image::topics::TopicsDelta;
use crate::image::{
    BrokerRegistration, ControllerRegistration, ImageDigest, MetadataImage, Provenance,
};
use crate::records::{ConfigRecord, MetadataRecord, RegisterBrokerRecord, BROKER_EPOCH_AT_OFFSET};

/// A record that cannot be applied to the image it was replayed on. The log is inconsistent
/// with the image (a record lost or replayed twice, or a bug in the writer): the loader must
/// stop applying that batch, not guess.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReplayError {
    /// A record names a topic id the image does not have.
    #[error(
        "{record} names topic id {topic_id}, which is neither in the image nor created earlier \
         in this delta (never created, or already removed)"
    )]
    UnknownTopic {
        /// Record type name.
        record: &'static str,
        /// The unknown topic id.
        topic_id: Uuid,
    },
    /// A `PartitionChangeRecord` names a partition that was never created.
    #[error(
        "PartitionChangeRecord for partition {partition} of topic '{topic_name}' ({topic_id}), \
         which has no such partition: a PartitionRecord must create it first"
    )]
    UnknownPartition {
        /// Topic id.
        topic_id: Uuid,
        /// Topic name.
        topic_name: String,
        /// The unknown partition index.
        partition: i32,
    },
    /// A `TopicRecord` reuses the name of a live topic.
    #[error(
        "TopicRecord creates topic '{name}' with id {new_id}, but topic id {existing_id} already \
         has that name; a RemoveTopicRecord for it must come first"
    )]
    DuplicateTopicName {
        /// The topic name.
        name: String,
        /// Id of the topic that has the name.
        existing_id: Uuid,
        /// Id in the rejected record.
        new_id: Uuid,
    },
    /// A `TopicRecord` reuses the id of a live topic.
    #[error(
        "TopicRecord creates topic '{new_name}' with id {topic_id}, but topic '{existing_name}' \
         already has that id"
    )]
    DuplicateTopicId {
        /// The topic id.
        topic_id: Uuid,
        /// Name of the topic that has the id.
        existing_name: String,
        /// Name in the rejected record.
        new_name: String,
    },
    /// A broker record names a broker that is not registered.
    #[error("{record} names broker {broker_id}, which is not registered")]
    UnknownBroker {
        /// Record type name.
        record: &'static str,
        /// The broker id.
        broker_id: i32,
    },
    /// A broker record carries an epoch other than the broker's current registration's.
    #[error(
        "{record} names broker {broker_id} with epoch {record_epoch}, but its current \
         registration has epoch {current_epoch} (the record is for an older registration)"
    )]
    StaleBrokerEpoch {
        /// Record type name.
        record: &'static str,
        /// The broker id.
        broker_id: i32,
        /// Epoch in the record.
        record_epoch: i64,
        /// Epoch of the registration in the image.
        current_epoch: i64,
    },
    /// A `FeatureLevelRecord` with a negative level.
    #[error(
        "FeatureLevelRecord sets feature '{name}' to level {level}; levels are >= 0 (0 removes it)"
    )]
    InvalidFeatureLevel {
        /// Feature name.
        name: String,
        /// The rejected level.
        level: i16,
    },
    /// A SCRAM credential record with a mechanism type other than 1 or 2.
    #[error("SCRAM credential record has unknown mechanism type {mechanism}")]
    UnknownScramMechanism {
        /// The mechanism type.
        mechanism: i8,
    },
    /// An `AccessControlEntryRecord` with a code an ACL may not carry (UNKNOWN, ANY, MATCH).
    #[error("AccessControlEntryRecord {id} has an invalid resource type, pattern type, operation or permission type")]
    InvalidAcl {
        /// The ACL id.
        id: uuid::Uuid,
    },
    /// An `AccessControlEntryRecord` whose id is already in use.
    #[error("an ACL with id {id} already exists")]
    DuplicateAclId {
        /// The ACL id.
        id: uuid::Uuid,
    },
    /// A `RemoveAccessControlEntryRecord` naming no ACL.
    #[error("no ACL with id {id} to remove")]
    UnknownAclId {
        /// The ACL id.
        id: uuid::Uuid,
    },
    /// A `ClientQuotaRecord` whose entity has no part.
    #[error("ClientQuotaRecord for key '{key}' has an empty entity; it must name at least one of user, client-id, ip")]
    EmptyQuotaEntity {
        /// Quota key in the record.
        key: String,
    },
    /// A `ClientQuotaRecord` whose entity names a type twice.
    #[error("ClientQuotaRecord entity names entity type '{entity_type}' more than once")]
    DuplicateQuotaEntityType {
        /// The repeated entity type.
        entity_type: String,
    },
}

/// The changes of a run of records on top of a base image; see the module docs.
#[derive(Clone, Debug)]
pub struct MetadataDelta {
    base: Arc<MetadataImage>,
    features: Option<FeaturesDelta>,
    cluster: Option<ClusterDelta>,
    topics: Option<TopicsDelta>,
    configs: Option<ConfigsDelta>,
    client_quotas: Option<ClientQuotasDelta>,
    scram: Option<ScramDelta>,
    acls: Option<AclsDelta>,
}

impl MetadataDelta {
    /// An empty delta on `base`.
    pub fn new(base: Arc<MetadataImage>) -> Self {
        MetadataDelta {
            base,
            features: None,
            cluster: None,
            topics: None,
            configs: None,
            client_quotas: None,
            scram: None,
            acls: None,
        }
    }

    /// The delta from the empty image to `image`: every non-empty area of `image` appears as
    /// created (Kafka's synthetic snapshot for a publisher installed late).
    /// `from_empty_with(image).apply(image.provenance) == image`.
    pub fn from_empty_with(image: &MetadataImage) -> Self {
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        if !image.features.is_empty() {
            let mut features = FeaturesDelta::new(Arc::clone(&delta.base.features));
            for (name, level) in image.features.iter() {
                // Levels in an image are positive, so replay cannot fail.
                let _ = features.replay(&crate::records::FeatureLevelRecord {
                    name: name.to_string(),
                    feature_level: level,
                });
            }
            delta.features = Some(features);
        }
        if !image.cluster.is_empty() {
            delta.cluster = Some(ClusterDelta::from_image(&image.cluster));
        }
        if !image.topics.is_empty() {
            delta.topics = Some(TopicsDelta::from_image(&image.topics));
        }
        if !image.configs.is_empty() {
            delta.configs = Some(ConfigsDelta::from_image(&image.configs));
        }
        if !image.client_quotas.is_empty() {
            delta.client_quotas = Some(ClientQuotasDelta::from_image(&image.client_quotas));
        }
        if !image.scram.is_empty() {
            delta.scram = Some(ScramDelta::new(&image.scram));
        }
        if !image.acls.is_empty() {
            delta.acls = Some(AclsDelta::from_image(&image.acls));
        }
        delta
    }

    /// The image this delta applies to.
    pub fn base(&self) -> &Arc<MetadataImage> {
        &self.base
    }

    /// Feature changes, `None` if no feature changed.
    pub fn features_delta(&self) -> Option<&FeaturesDelta> {
        self.features.as_ref()
    }

    /// Broker and controller changes, `None` if none.
    pub fn cluster_delta(&self) -> Option<&ClusterDelta> {
        self.cluster.as_ref()
    }

    /// Topic and partition changes, `None` if none.
    pub fn topics_delta(&self) -> Option<&TopicsDelta> {
        self.topics.as_ref()
    }

    /// Config changes, `None` if none.
    pub fn configs_delta(&self) -> Option<&ConfigsDelta> {
        self.configs.as_ref()
    }

    /// Client quota changes, `None` if none.
    pub fn client_quotas_delta(&self) -> Option<&ClientQuotasDelta> {
        self.client_quotas.as_ref()
    }

    /// SCRAM credential changes, `None` if none.
    pub fn scram_delta(&self) -> Option<&ScramDelta> {
        self.scram.as_ref()
    }

    /// ACL changes, `None` if none.
    pub fn acls_delta(&self) -> Option<&AclsDelta> {
        self.acls.as_ref()
    }

    fn acls_mut(&mut self) -> &mut AclsDelta {
        let base = &self.base;
        self.acls.get_or_insert_with(|| AclsDelta::new(&base.acls))
    }

    fn scram_mut(&mut self) -> &mut ScramDelta {
        let base = &self.base;
        self.scram
            .get_or_insert_with(|| ScramDelta::new(&base.scram))
    }

    fn features_mut(&mut self) -> &mut FeaturesDelta {
        let base = &self.base;
        self.features
            .get_or_insert_with(|| FeaturesDelta::new(Arc::clone(&base.features)))
    }

    fn cluster_mut(&mut self) -> &mut ClusterDelta {
        let base = &self.base;
        self.cluster
            .get_or_insert_with(|| ClusterDelta::new(Arc::clone(&base.cluster)))
    }

    fn topics_mut(&mut self) -> &mut TopicsDelta {
        let base = &self.base;
        self.topics
            .get_or_insert_with(|| TopicsDelta::new(Arc::clone(&base.topics)))
    }

    fn configs_mut(&mut self) -> &mut ConfigsDelta {
        let base = &self.base;
        self.configs
            .get_or_insert_with(|| ConfigsDelta::new(Arc::clone(&base.configs)))
    }

    fn client_quotas_mut(&mut self) -> &mut ClientQuotasDelta {
        let base = &self.base;
        self.client_quotas
            .get_or_insert_with(|| ClientQuotasDelta::new(Arc::clone(&base.client_quotas)))
    }

    /// Applies one record to the delta. A rejected record leaves the delta as it was.
    pub fn replay(&mut self, record: &MetadataRecord) -> Result<(), ReplayError> {
        let had_area = (
            self.features.is_some(),
            self.cluster.is_some(),
            self.topics.is_some(),
            self.client_quotas.is_some(),
            self.scram.is_some(),
            self.acls.is_some(),
        );
        let result = self.replay_record(record);
        if result.is_err() {
            // Sub-deltas reject a record before changing anything; drop an area delta that the
            // rejected record alone created, so the "did this area change" accessors stay exact.
            if !had_area.0 {
                self.features = None;
            }
            if !had_area.1 {
                self.cluster = None;
            }
            if !had_area.2 {
                self.topics = None;
            }
            if !had_area.3 {
                self.client_quotas = None;
            }
            if !had_area.4 {
                self.scram = None;
            }
            if !had_area.5 {
                self.acls = None;
            }
        }
        result
    }

    /// [`MetadataDelta::replay`] for a record stored at log offset `offset`: a
    /// `RegisterBrokerRecord` written with [`BROKER_EPOCH_AT_OFFSET`] takes `offset` as its
    /// epoch (Kafka's broker epoch is the offset of the registration record).
    pub fn replay_at(&mut self, record: &MetadataRecord, offset: u64) -> Result<(), ReplayError> {
        match record {
            MetadataRecord::RegisterBroker(r) if r.broker_epoch == BROKER_EPOCH_AT_OFFSET => {
                let resolved = RegisterBrokerRecord {
                    broker_epoch: i64::try_from(offset).unwrap_or(i64::MAX),
                    ..r.clone()
                };
                self.replay(&MetadataRecord::RegisterBroker(resolved))
            }
            _ => self.replay(record),
        }
    }

    fn replay_record(&mut self, record: &MetadataRecord) -> Result<(), ReplayError> {
        match record {
            MetadataRecord::RegisterBroker(r) => self.cluster_mut().replay_register_broker(r),
            MetadataRecord::UnregisterBroker(r) => {
                self.cluster_mut().replay_unregister_broker(r)?
            }
            MetadataRecord::FenceBroker(r) => self.cluster_mut().replay_fence(r)?,
            MetadataRecord::UnfenceBroker(r) => self.cluster_mut().replay_unfence(r)?,
            MetadataRecord::BrokerRegistrationChange(r) => {
                self.cluster_mut().replay_registration_change(r)?
            }
            MetadataRecord::RegisterController(r) => {
                self.cluster_mut().replay_register_controller(r)
            }
            MetadataRecord::Topic(r) => self.topics_mut().replay_topic(r)?,
            MetadataRecord::Partition(r) => self.topics_mut().replay_partition(r)?,
            MetadataRecord::PartitionChange(r) => self.topics_mut().replay_partition_change(r)?,
            MetadataRecord::RemoveTopic(r) => {
                let name = self.topics_mut().replay_remove_topic(r)?;
                // As Kafka: removing a topic drops its configs too.
                if ConfigsDelta::may_have_configs(
                    &self.base.configs,
                    self.configs.as_ref(),
                    TOPIC_RESOURCE,
                    &name,
                ) {
                    self.configs_mut().clear_resource(TOPIC_RESOURCE, &name);
                }
            }
            MetadataRecord::Config(r) => self.configs_mut().replay(r),
            MetadataRecord::FeatureLevel(r) => self.features_mut().replay(r)?,
            MetadataRecord::ClientQuota(r) => self.client_quotas_mut().replay(r)?,
            MetadataRecord::ProducerIds(r) => self.cluster_mut().replay_producer_ids(r),
            MetadataRecord::UserScramCredential(r) => self.scram_mut().replay_upsert(r)?,
            MetadataRecord::RemoveUserScramCredential(r) => self.scram_mut().replay_remove(r)?,
            MetadataRecord::AccessControlEntry(r) => self.acls_mut().replay_add(r)?,
            MetadataRecord::RemoveAccessControlEntry(r) => self.acls_mut().replay_remove(r)?,
            MetadataRecord::NoOp => {}
        }
        Ok(())
    }

    /// Replays every record of `records` in order, stopping at the first error.
    pub fn replay_all<'a>(
        &mut self,
        records: impl IntoIterator<Item = &'a MetadataRecord>,
    ) -> Result<(), ReplayError> {
        records
            .into_iter()
            .try_for_each(|record| self.replay(record))
    }

    /// The next image: the base with this delta's changes, stamped with `provenance`. Areas
    /// this delta did not touch are the base's sub-images themselves (`Arc::ptr_eq`).
    pub fn apply(&self, provenance: Provenance) -> MetadataImage {
        let features = self
            .features
            .as_ref()
            .map_or_else(|| Arc::clone(&self.base.features), |d| Arc::new(d.apply()));
        let cluster = self
            .cluster
            .as_ref()
            .map_or_else(|| Arc::clone(&self.base.cluster), |d| Arc::new(d.apply()));
        // Topics keep the digest in step as they are rebuilt (the bulk of most deltas); the
        // other areas are counted by `next_digest`.
        let mut digest = self.base.digest;
        let topics = self.topics.as_ref().map_or_else(
            || Arc::clone(&self.base.topics),
            |d| Arc::new(d.apply_counting(&mut digest)),
        );
        let configs = self
            .configs
            .as_ref()
            .map_or_else(|| Arc::clone(&self.base.configs), |d| Arc::new(d.apply()));
        let client_quotas = self.client_quotas.as_ref().map_or_else(
            || Arc::clone(&self.base.client_quotas),
            |d| Arc::new(d.apply()),
        );
        let scram = self
            .scram
            .as_ref()
            .map_or_else(|| Arc::clone(&self.base.scram), |d| Arc::new(d.apply()));
        let acls = self
            .acls
            .as_ref()
            .map_or_else(|| Arc::clone(&self.base.acls), |d| Arc::new(d.apply()));
        let mut image = MetadataImage {
            provenance,
            features,
            cluster,
            topics,
            configs,
            client_quotas,
            scram,
            acls,
            digest,
        };
        image.digest = self.next_digest(&image, digest);
        image
    }

    /// `digest` with what this delta replaced outside the topics taken out and what it put in
    /// added: only the changed entries are hashed (see [`crate::image::digest`]).
    fn next_digest(&self, next: &MetadataImage, mut digest: ImageDigest) -> ImageDigest {
        let base = &*self.base;
        let mut replace = |old: ImageDigest, new: ImageDigest| {
            digest.remove_all(old);
            digest.add_all(new);
        };
        // Features and client quotas are a handful of entries: rehash the area.
        if self.features.is_some() {
            replace(
                ImageDigest::of(|out| base.features.to_records(out)),
                ImageDigest::of(|out| next.features.to_records(out)),
            );
        }
        if self.client_quotas.is_some() {
            replace(
                ImageDigest::of(|out| base.client_quotas.to_records(out)),
                ImageDigest::of(|out| next.client_quotas.to_records(out)),
            );
        }
        if self.scram.is_some() {
            replace(
                ImageDigest::of(|out| base.scram.to_records(out)),
                ImageDigest::of(|out| next.scram.to_records(out)),
            );
        }
        if let Some(acls) = &self.acls {
            for id in acls.changed_ids() {
                let record =
                    |acl: &StandardAcl| MetadataRecord::AccessControlEntry(acl.to_record(*id));
                replace(
                    ImageDigest::of(|out| out.extend(base.acls.get(id).map(record))),
                    ImageDigest::of(|out| out.extend(next.acls.get(id).map(record))),
                );
            }
        }
        if let Some(cluster) = &self.cluster {
            for (id, broker) in cluster.changed_brokers() {
                let record = |b: &BrokerRegistration| MetadataRecord::RegisterBroker(b.to_record());
                replace(
                    ImageDigest::of(|out| out.extend(base.cluster.broker(id).map(record))),
                    ImageDigest::of(|out| out.extend(broker.map(record))),
                );
            }
            for controller in cluster.changed_controllers() {
                let record =
                    |c: &ControllerRegistration| MetadataRecord::RegisterController(c.to_record());
                replace(
                    ImageDigest::of(|out| {
                        out.extend(base.cluster.controller(controller.id).map(record))
                    }),
                    ImageDigest::of(|out| out.push(record(controller))),
                );
            }
            let (old, new) = (
                base.cluster.producer_ids_record(),
                next.cluster.producer_ids_record(),
            );
            if old != new {
                replace(
                    ImageDigest::of(|out| out.extend(old)),
                    ImageDigest::of(|out| out.extend(new)),
                );
            }
        }
        if let Some(configs) = &self.configs {
            for (resource_type, name, _) in configs.changed_resources() {
                let records = |image: &ConfigsImage, out: &mut Vec<MetadataRecord>| {
                    if let Some(resource) = image.get(resource_type, name) {
                        out.extend(resource.iter().map(|(key, value)| {
                            MetadataRecord::Config(ConfigRecord {
                                resource_type,
                                resource_name: name.to_owned(),
                                name: key.to_owned(),
                                value: Some(value.to_owned()),
                            })
                        }));
                    }
                };
                replace(
                    ImageDigest::of(|out| records(&base.configs, out)),
                    ImageDigest::of(|out| records(&next.configs, out)),
                );
            }
        }
        digest
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::image::test_util::*;
    use crate::records::METADATA_VERSION_FEATURE;

    /// An image touching every area.
    fn image1_records() -> Vec<MetadataRecord> {
        vec![
            feature(METADATA_VERSION_FEATURE, 21),
            register_broker(1, 10, false),
            register_broker(2, 20, false),
            topic("foo", 1),
            partition(1, 0, &[1, 2]),
            config(TOPIC_RESOURCE, "foo", "retention.ms", Some("1000")),
            quota(
                &[("user", Some("alice"))],
                "producer_byte_rate",
                Some(1024.0),
            ),
        ]
    }

    /// A delta touching every area, including a topic removal that drops its configs.
    fn delta1_records() -> Vec<MetadataRecord> {
        vec![
            feature(METADATA_VERSION_FEATURE, 22),
            MetadataRecord::FenceBroker(crate::records::FenceBrokerRecord { id: 2, epoch: 20 }),
            isr_change(1, 0, &[1], None),
            topic("bar", 2),
            partition(2, 0, &[2, 1]),
            remove_topic(1),
            quota(
                &[("user", Some("alice"))],
                "producer_byte_rate",
                Some(2048.0),
            ),
            MetadataRecord::NoOp,
        ]
    }

    fn image2_records() -> Vec<MetadataRecord> {
        vec![
            feature(METADATA_VERSION_FEATURE, 22),
            register_broker(1, 10, false),
            register_broker(2, 20, true),
            topic("bar", 2),
            partition(2, 0, &[2, 1]),
            quota(
                &[("user", Some("alice"))],
                "producer_byte_rate",
                Some(2048.0),
            ),
        ]
    }

    #[test]
    fn image1_plus_delta1_is_image2_whatever_the_batching() {
        let image1 = image(&image1_records());
        let image2 = image(&image2_records());
        assert_eq!(apply(&image1, &delta1_records()), image2);
        assert_every_batch_split(&image1, &delta1_records(), &image2);
        assert!(image2.configs.is_empty());
        assert_round_trip(&image1);
        assert_round_trip(&image2);
    }

    #[test]
    fn apply_stamps_provenance_and_reuses_untouched_areas() {
        let image1 = Arc::new(image(&image1_records()));
        let mut delta = MetadataDelta::new(Arc::clone(&image1));
        delta.replay(&isr_change(1, 0, &[1], None)).unwrap();
        delta.replay(&MetadataRecord::NoOp).unwrap();
        let provenance = Provenance {
            last_log_index: 42,
            last_log_term: 3,
            last_applied_time_ms: 1_700_000_000_000,
        };
        let image2 = delta.apply(provenance);
        assert_eq!(image2.provenance, provenance);
        assert!(Arc::ptr_eq(&image1.features, &image2.features));
        assert!(Arc::ptr_eq(&image1.cluster, &image2.cluster));
        assert!(Arc::ptr_eq(&image1.configs, &image2.configs));
        assert!(Arc::ptr_eq(&image1.client_quotas, &image2.client_quotas));
        assert!(delta.features_delta().is_none());
        assert!(delta.cluster_delta().is_none());
        assert!(delta.configs_delta().is_none());
        assert!(delta.client_quotas_delta().is_none());
        assert!(delta.topics_delta().is_some());
        assert!(Arc::ptr_eq(delta.base(), &image1));
    }

    #[test]
    fn from_empty_with_contains_the_whole_image() {
        let image2 = image(&image2_records());
        let delta = MetadataDelta::from_empty_with(&image2);
        assert!(delta.base().is_empty());
        assert!(delta.features_delta().is_some());
        assert!(delta.cluster_delta().is_some());
        assert!(delta.client_quotas_delta().is_some());
        // image2 has no configs, so that area is absent from the delta.
        assert!(delta.configs_delta().is_none());
        let topics = delta.topics_delta().unwrap();
        assert_eq!(
            topics
                .created_topics()
                .map(|t| t.name())
                .collect::<Vec<_>>(),
            ["bar"]
        );
        assert_eq!(delta.apply(image2.provenance), image2);
        let image1 = image(&image1_records());
        assert_eq!(
            MetadataDelta::from_empty_with(&image1).apply(Provenance::default()),
            image1
        );
        assert!(MetadataImage::empty().is_empty());
        assert!(!image1.is_empty());
    }

    #[test]
    fn replay_all_stops_at_the_first_error() {
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        let result = delta.replay_all(&[topic("a", 1), partition(9, 0, &[1]), topic("b", 2)]);
        assert_eq!(
            result,
            Err(ReplayError::UnknownTopic {
                record: "PartitionRecord",
                topic_id: Uuid::from_u128(9)
            })
        );
        let names: Vec<_> = delta
            .topics_delta()
            .unwrap()
            .created_topics()
            .map(|t| t.name().to_string())
            .collect();
        assert_eq!(names, ["a"]);
    }

    #[test]
    fn a_registration_written_with_the_offset_epoch_takes_its_offset() {
        let registration = |epoch: i64| {
            MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                broker_id: 4,
                incarnation_id: Uuid::from_u128(44),
                broker_epoch: epoch,
                endpoints: Vec::new(),
                features: Vec::new(),
                rack: None,
                fenced: true,
                in_controlled_shutdown: false,
                log_dirs: Vec::new(),
            })
        };
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        delta
            .replay_at(&registration(BROKER_EPOCH_AT_OFFSET), 57)
            .unwrap();
        let image = delta.apply(Provenance::default());
        assert_eq!(image.cluster.broker(4).map(|b| b.epoch), Some(57));
        // An epoch already resolved (a snapshot) is kept whatever the offset.
        let mut delta = MetadataDelta::new(Arc::new(image));
        delta.replay_at(&registration(57), 900).unwrap();
        let image = delta.apply(Provenance::default());
        assert_eq!(image.cluster.broker(4).map(|b| b.epoch), Some(57));
    }
}
