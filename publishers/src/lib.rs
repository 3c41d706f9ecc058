//! Gregor's metadata model: the records of the metadata log, the immutable [`MetadataImage`]
//! built from them on persistent maps, the [`MetadataDelta`] between two images, and the
//! [`MetadataPublisher`] trait through which the loader hands every new image to the node.
//!
//! Architecture invariant: this crate knows nothing about actors, sockets or raft.
//!
//! ```
//! use std::sync::Arc;
//! use gregor_publishers::{MetadataDelta, MetadataImage, MetadataRecord, Provenance};
//! use gregor_publishers::records::{PartitionRecord, TopicRecord};
//!
//! let topic_id = uuid::Uuid::from_u128(42);
//! let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
//! delta.replay(&MetadataRecord::Topic(TopicRecord { name: "orders".into(), topic_id }))?;
//! delta.replay(&MetadataRecord::Partition(PartitionRecord {
//!     partition_id: 0,
//!     topic_id,
//!     replicas: vec![1, 2, 3],
//!     isr: vec![1, 2, 3],
//!     removing_replicas: vec![],
//!     adding_replicas: vec![],
//!     leader: 1,
//!     leader_recovery_state: 0,
//!     leader_epoch: 0,
//!     partition_epoch: 0,
//!     directories: vec![],
//! }))?;
//! let image = delta.apply(Provenance::default());
//! let orders = image.topics.get_by_name("orders").ok_or("no topic")?;
//! assert_eq!(orders.partition(0).map(|p| p.leader), Some(1));
//! assert_eq!(image.topics.partition_count(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod acl;
pub mod delta;
pub mod image;
pub mod kafka_uuid;
pub mod publisher;
pub mod quota_callback;
pub mod records;
pub mod scram;

pub use delta::{MetadataDelta, ReplayError};
pub use image::client_quotas::{canonical_entity, ClientQuotasDelta};
pub use image::cluster::ClusterDelta;
pub use image::configs::{ConfigsDelta, ResourceConfigsDelta};
pub use image::features::FeaturesDelta;
pub use image::topics::{PartitionIter, TopicDelta, TopicsDelta};
pub use image::{
    BrokerIds, BrokerRegistration, ClientQuotaImage, ClientQuotasImage, ClusterImage, ConfigsImage,
    ControllerRegistration, DirectoryIds, FeaturesImage, ImageDigest, MetadataImage,
    PartitionRegistration, Provenance, Reassignment, ResourceConfigs, TopicImage, TopicsImage,
};
pub use publisher::{LoaderManifest, MetadataPublisher, PublishError};
pub use records::MetadataRecord;
