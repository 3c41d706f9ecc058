//! The cluster as a quota callback sees it: [`ClusterMetadata`], [`BrokerMetadata`] and
//! [`PartitionMetadata`], and their zero-copy implementation over an image,
//! [`ImageClusterMetadata`].
//!
//! Nothing here copies the image. [`BrokerRegistration`] and [`PartitionRegistration`] *are*
//! the broker and partition views (the seed's "make BrokerRegistration implement
//! BrokerMetadata"), lookups go through the image's persistent maps, and sequences are lazy
//! iterators. The only allocation a call makes is the box of a returned iterator, one small
//! allocation whatever the size of the cluster.
//!
//! ```
//! use std::sync::Arc;
//! use gregor_publishers::quota_callback::testing::ImageBuilder;
//! use gregor_publishers::quota_callback::{ClusterMetadata, ImageClusterMetadata};
//!
//! let image = ImageBuilder::new()
//!     .broker(0)
//!     .broker(1)
//!     .topic_led_by("orders", 3, 1)
//!     .build();
//! let view = ImageClusterMetadata::new("cluster-1", &image);
//! assert_eq!(view.broker_ids().collect::<Vec<_>>(), vec![0, 1]);
//! assert_eq!(view.partitions_led_by("orders", 1).count(), 3);
//! assert_eq!(view.partition("orders", 2).map(|p| p.leader()), Some(1));
//! assert!(view.partitions("missing").next().is_none());
//! ```

use uuid::Uuid;

use crate::image::{BrokerRegistration, MetadataImage, PartitionRegistration};
use crate::records::{Endpoint, NO_LEADER};

/// Kafka's `DirectoryId.UNASSIGNED`: the replica's directory is not chosen yet (online).
const DIRECTORY_UNASSIGNED: Uuid = Uuid::from_u64_pair(0, 0);
/// Kafka's `DirectoryId.LOST`: the replica's directory is known to be offline.
const DIRECTORY_LOST: Uuid = Uuid::from_u64_pair(0, 1);
/// Kafka's `DirectoryId.MIGRATING`: assigned before directories were tracked (online).
const DIRECTORY_MIGRATING: Uuid = Uuid::from_u64_pair(0, 2);

/// One broker as a callback sees it (seed: `BrokerMetadata`).
pub trait BrokerMetadata {
    /// The broker's node id.
    fn id(&self) -> i32;

    /// Every listener the broker advertises, in registration order. Not filtered by a listener
    /// name: in KRaft no listener is "the" request's listener here (KAFKA-19122).
    fn listeners(&self) -> &[Endpoint];

    /// Whether the broker is fenced (it leads nothing and is not in Metadata responses).
    fn fenced(&self) -> bool;

    /// The broker's rack, if configured.
    fn rack(&self) -> Option<&str>;

    /// The ids of the broker's online log directories (empty if not tracked); a replica whose
    /// assigned directory is not among them is offline.
    fn online_log_dirs(&self) -> &[Uuid] {
        &[]
    }

    /// The endpoint of listener `name`.
    fn listener(&self, name: &str) -> Option<&Endpoint> {
        self.listeners()
            .iter()
            .find(|endpoint| endpoint.name == name)
    }
}

/// One partition as a callback sees it (seed: `PartitionMetadata`).
pub trait PartitionMetadata {
    /// The leader's node id, or -1 when the partition has no leader.
    fn leader(&self) -> i32;

    /// Every replica, preferred leader first, whether alive or not.
    fn replicas(&self) -> &[i32];

    /// The in-sync replicas. The first is not necessarily the leader: use [`leader`](Self::leader).
    fn in_sync_replicas(&self) -> &[i32];

    /// The log directory assigned to each replica, in replica order (empty if not tracked).
    fn directories(&self) -> &[Uuid] {
        &[]
    }

    /// Whether the partition has a leader (Kafka's `availablePartitionsForTopic`).
    fn is_available(&self) -> bool {
        self.leader() != NO_LEADER
    }
}

/// The cluster as a callback sees it (seed: `ClusterMetadata`, final variant, with Rust
/// iterators in place of Java's new maps and lists).
///
/// Every method borrows from the image: none allocates in proportion to the cluster. Methods
/// returning sequences return a boxed lazy iterator (one small allocation).
pub trait ClusterMetadata {
    /// The cluster id (`meta.properties`' `cluster.id`).
    fn cluster_id(&self) -> &str;

    /// The ids of every registered broker, fenced ones included, ascending.
    fn broker_ids(&self) -> Box<dyn Iterator<Item = i32> + '_>;

    /// The broker `node_id`, if registered.
    fn broker(&self, node_id: i32) -> Option<&dyn BrokerMetadata>;

    /// Number of topics. O(1).
    fn topic_count(&self) -> usize;

    /// Every topic as `(id, name)`, by ascending name (the seed's `topics()` map).
    fn topics(&self) -> Box<dyn Iterator<Item = (Uuid, &str)> + '_>;

    /// The name of topic `id`.
    fn topic_name(&self, id: &Uuid) -> Option<&str>;

    /// The id of the topic named `name`.
    fn topic_id(&self, name: &str) -> Option<Uuid>;

    /// Partition `partition` of topic `topic`.
    fn partition(&self, topic: &str, partition: i32) -> Option<&dyn PartitionMetadata>;

    /// Number of partitions of `topic` (`None` for an unknown topic). O(1).
    fn partition_count(&self, topic: &str) -> Option<usize>;

    /// The partitions of `topic` as `(index, partition)`, ascending; empty for an unknown topic.
    fn partitions(
        &self,
        topic: &str,
    ) -> Box<dyn Iterator<Item = (i32, &dyn PartitionMetadata)> + '_>;

    /// The partitions of `topic` whose **leader** is `node_id`, ascending; empty for an unknown
    /// topic or a node that leads none of them.
    ///
    /// Gregor's decision where the seed left "led by or relevant to" open: leadership, because
    /// produce and fetch traffic (what byte-rate quotas meter) goes to the leader; a callback
    /// that wants followers too filters [`partitions`](Self::partitions) on
    /// `replicas().contains(&node_id)`. Costs one pass over the topic's partitions.
    fn partitions_led_by(
        &self,
        topic: &str,
        node_id: i32,
    ) -> Box<dyn Iterator<Item = (i32, &dyn PartitionMetadata)> + '_> {
        Box::new(
            self.partitions(topic)
                .filter(move |(_, partition)| partition.leader() == node_id),
        )
    }

    /// The replicas of `partition` that are offline, in replica order: the broker is not
    /// registered, is fenced, or the replica's assigned log directory is not one of the broker's
    /// online directories (Kafka's `getOfflineReplicas`, without the listener filter).
    fn offline_replicas<'a>(
        &'a self,
        partition: &'a dyn PartitionMetadata,
    ) -> Box<dyn Iterator<Item = i32> + 'a> {
        let directories = partition.directories();
        Box::new(
            partition
                .replicas()
                .iter()
                .enumerate()
                .filter(move |(index, replica)| match self.broker(**replica) {
                    None => true,
                    Some(broker) if broker.fenced() => true,
                    Some(broker) => directories
                        .get(*index)
                        .is_some_and(|dir| !directory_online(*dir, broker.online_log_dirs())),
                })
                .map(|(_, replica)| *replica),
        )
    }
}

/// Kafka's `DirectoryId.isOnline`.
fn directory_online(dir: Uuid, online: &[Uuid]) -> bool {
    if dir == DIRECTORY_UNASSIGNED || dir == DIRECTORY_MIGRATING {
        return true;
    }
    if dir == DIRECTORY_LOST {
        return false;
    }
    // A broker registered before directories were tracked lists none; Kafka assumes online
    // (a broker halts when all its directories fail).
    online.is_empty() || online.contains(&dir)
}

impl BrokerMetadata for BrokerRegistration {
    fn id(&self) -> i32 {
        self.id
    }

    fn listeners(&self) -> &[Endpoint] {
        &self.endpoints
    }

    fn fenced(&self) -> bool {
        self.fenced
    }

    fn rack(&self) -> Option<&str> {
        self.rack.as_deref()
    }

    fn online_log_dirs(&self) -> &[Uuid] {
        &self.log_dirs
    }
}

impl PartitionMetadata for PartitionRegistration {
    fn leader(&self) -> i32 {
        self.leader
    }

    fn replicas(&self) -> &[i32] {
        &self.replicas
    }

    fn in_sync_replicas(&self) -> &[i32] {
        &self.isr
    }

    fn directories(&self) -> &[Uuid] {
        &self.directories
    }
}

/// [`ClusterMetadata`] over one published image (the seed's `DefaultClusterMetadata`): two
/// references, built in O(1).
#[derive(Clone, Copy, Debug)]
pub struct ImageClusterMetadata<'a> {
    cluster_id: &'a str,
    image: &'a MetadataImage,
}

impl<'a> ImageClusterMetadata<'a> {
    /// The view of `image` in cluster `cluster_id`.
    pub fn new(cluster_id: &'a str, image: &'a MetadataImage) -> Self {
        ImageClusterMetadata { cluster_id, image }
    }

    /// The image viewed.
    pub fn image(&self) -> &'a MetadataImage {
        self.image
    }
}

impl ClusterMetadata for ImageClusterMetadata<'_> {
    fn cluster_id(&self) -> &str {
        self.cluster_id
    }

    fn broker_ids(&self) -> Box<dyn Iterator<Item = i32> + '_> {
        Box::new(self.image.cluster.brokers().map(|broker| broker.id))
    }

    fn broker(&self, node_id: i32) -> Option<&dyn BrokerMetadata> {
        self.image
            .cluster
            .broker(node_id)
            .map(|broker| broker as &dyn BrokerMetadata)
    }

    fn topic_count(&self) -> usize {
        self.image.topics.topic_count()
    }

    fn topics(&self) -> Box<dyn Iterator<Item = (Uuid, &str)> + '_> {
        Box::new(
            self.image
                .topics
                .iter()
                .map(|topic| (topic.id, &*topic.name)),
        )
    }

    fn topic_name(&self, id: &Uuid) -> Option<&str> {
        self.image.topics.get_by_id(id).map(|topic| &*topic.name)
    }

    fn topic_id(&self, name: &str) -> Option<Uuid> {
        self.image.topics.get_by_name(name).map(|topic| topic.id)
    }

    fn partition(&self, topic: &str, partition: i32) -> Option<&dyn PartitionMetadata> {
        self.image
            .topics
            .get_by_name(topic)
            .and_then(|topic| topic.partition(partition))
            .map(|partition| partition as &dyn PartitionMetadata)
    }

    fn partition_count(&self, topic: &str) -> Option<usize> {
        self.image
            .topics
            .get_by_name(topic)
            .map(|topic| topic.partition_count())
    }

    fn partitions(
        &self,
        topic: &str,
    ) -> Box<dyn Iterator<Item = (i32, &dyn PartitionMetadata)> + '_> {
        match self.image.topics.get_by_name(topic) {
            Some(topic) => Box::new(
                topic
                    .partitions()
                    .map(|(index, partition)| (index, partition as &dyn PartitionMetadata)),
            ),
            None => Box::new(std::iter::empty()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::quota_callback::testing::ImageBuilder;

    #[test]
    fn view_answers_from_the_image() {
        let image = ImageBuilder::new()
            .broker(1)
            .broker_with(2, true, &["PLAINTEXT", "INTERNAL"])
            .topic_with("t", &[(1, &[1, 2]), (-1, &[2, 3]), (2, &[2])])
            .build();
        let view = ImageClusterMetadata::new("c1", &image);
        assert_eq!(view.cluster_id(), "c1");
        assert_eq!(view.broker_ids().collect::<Vec<_>>(), vec![1, 2]);
        let broker = view.broker(2).unwrap();
        assert!(broker.fenced());
        assert_eq!(broker.listeners().len(), 2);
        assert_eq!(broker.listener("INTERNAL").map(|e| e.port), Some(9093));
        assert!(view.broker(3).is_none());
        assert_eq!(view.topic_count(), 1);
        let id = view.topic_id("t").unwrap();
        assert_eq!(view.topic_name(&id), Some("t"));
        assert_eq!(view.topics().collect::<Vec<_>>(), vec![(id, "t")]);
        assert_eq!(view.partition_count("t"), Some(3));
        assert_eq!(view.partition_count("u"), None);
        let p1 = view.partition("t", 1).unwrap();
        assert!(!p1.is_available());
        assert_eq!(p1.replicas(), &[2, 3]);
        assert_eq!(
            view.partitions_led_by("t", 2)
                .map(|(i, _)| i)
                .collect::<Vec<_>>(),
            vec![2]
        );
        assert_eq!(view.partitions_led_by("u", 2).count(), 0);
        // Broker 2 is fenced, broker 3 is not registered.
        let p0 = view.partition("t", 0).unwrap();
        assert_eq!(view.offline_replicas(p0).collect::<Vec<_>>(), vec![2]);
        assert_eq!(view.offline_replicas(p1).collect::<Vec<_>>(), vec![2, 3]);
    }

    #[test]
    fn replicas_in_offline_directories_are_offline() {
        let online = Uuid::from_u128(0xd1);
        let gone = Uuid::from_u128(0xd2);
        assert!(directory_online(online, &[online]));
        assert!(!directory_online(gone, &[online]));
        assert!(directory_online(gone, &[]));
        assert!(directory_online(DIRECTORY_UNASSIGNED, &[online]));
        assert!(directory_online(DIRECTORY_MIGRATING, &[online]));
        assert!(!directory_online(DIRECTORY_LOST, &[]));
    }
}
