//! Publishes what a Kafka controller reports about the cluster from its metadata image
//! (`kafka.controller:type=KafkaController` gauges): topic, partition, offline-partition and
//! preferred-replica-imbalance counts and fenced/active broker counts. The partition counts
//! follow each delta's changed partitions, so an image change costs O(change), not a walk of
//! every partition.

use std::sync::Arc;

use gregor_metrics::ControllerImageCounts;
use gregor_publishers::image::PartitionRegistration;
use gregor_publishers::records::NO_LEADER;
use gregor_publishers::{
    LoaderManifest, MetadataDelta, MetadataImage, MetadataPublisher, PublishError,
};

/// Keeps the `kafka_controller_kafkacontroller_*` image gauges of a controller.
#[derive(Default)]
pub struct ControllerMetricsPublisher {
    counts: ControllerImageCounts,
}

impl ControllerMetricsPublisher {
    /// The counts after `delta` produced `image` from the previous image (whose counts are
    /// `self.counts`).
    fn next_counts(&self, delta: &MetadataDelta, image: &MetadataImage) -> ControllerImageCounts {
        let mut counts = self.counts;
        counts.topics = image.topics.topic_count();
        counts.partitions = image.topics.partition_count();
        if let Some(topics) = delta.topics_delta() {
            let base = topics.base();
            let offline = |p: &PartitionRegistration| usize::from(p.leader == NO_LEADER);
            // Kafka's `hasPreferredLeader` negated: leaderless partitions count too.
            let imbalanced = |p: &PartitionRegistration| {
                usize::from(p.leader == NO_LEADER || p.replicas.first() != Some(&p.leader))
            };
            for (id, _) in topics.deleted_topics() {
                if let Some(topic) = base.get_by_id(&id) {
                    for (_, p) in topic.partitions() {
                        counts.offline_partitions =
                            counts.offline_partitions.saturating_sub(offline(p));
                        counts.preferred_replica_imbalance = counts
                            .preferred_replica_imbalance
                            .saturating_sub(imbalanced(p));
                    }
                }
            }
            for topic in topics.changed_topics() {
                for (id, partition) in topic.changed_partitions() {
                    let before = topic.base().and_then(|base| base.partition(id));
                    counts.offline_partitions = counts
                        .offline_partitions
                        .saturating_sub(before.map_or(0, offline))
                        + offline(partition);
                    counts.preferred_replica_imbalance = counts
                        .preferred_replica_imbalance
                        .saturating_sub(before.map_or(0, imbalanced))
                        + imbalanced(partition);
                }
            }
        }
        if delta.cluster_delta().is_some() {
            let fenced = image.cluster.brokers().filter(|b| b.fenced).count();
            counts.fenced_brokers = fenced;
            counts.active_brokers = image.cluster.brokers().count() - fenced;
        }
        counts
    }
}

impl MetadataPublisher for ControllerMetricsPublisher {
    fn name(&self) -> &str {
        "controller-metrics"
    }

    fn on_metadata_update(
        &mut self,
        delta: &MetadataDelta,
        image: &Arc<MetadataImage>,
        _: &LoaderManifest,
    ) -> Result<(), PublishError> {
        self.counts = self.next_counts(delta, image);
        gregor_metrics::controller_image_counts(self.counts);
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use gregor_publishers::records::{
        FenceBrokerRecord, MetadataRecord, PartitionChangeRecord, PartitionRecord,
        RegisterBrokerRecord, RemoveTopicRecord, TopicRecord,
    };
    use gregor_publishers::{MetadataDelta, MetadataImage, Provenance};
    use uuid::Uuid;

    use super::*;

    fn topic_record(name: &str, topic_id: Uuid) -> MetadataRecord {
        MetadataRecord::Topic(TopicRecord {
            name: name.to_owned(),
            topic_id,
        })
    }

    fn partition_record(topic_id: Uuid, partition_id: i32, replicas: &[i32]) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord {
            partition_id,
            topic_id,
            replicas: replicas.to_vec(),
            isr: replicas.to_vec(),
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader: replicas[0],
            leader_recovery_state: 0,
            leader_epoch: 0,
            partition_epoch: 0,
            directories: vec![],
        })
    }

    fn broker(id: i32) -> MetadataRecord {
        MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: id,
            incarnation_id: Uuid::from_u128(id as u128),
            broker_epoch: 10,
            endpoints: vec![],
            features: vec![],
            rack: None,
            fenced: false,
            in_controlled_shutdown: false,
            log_dirs: vec![],
        })
    }

    /// Applies `records` as one delta on `base`, feeding the publisher.
    fn step(
        publisher: &mut ControllerMetricsPublisher,
        base: &Arc<MetadataImage>,
        records: &[MetadataRecord],
    ) -> Arc<MetadataImage> {
        let mut delta = MetadataDelta::new(Arc::clone(base));
        for record in records {
            delta.replay(record).unwrap();
        }
        let image = Arc::new(delta.apply(Provenance::default()));
        publisher.counts = publisher.next_counts(&delta, &image);
        image
    }

    #[test]
    fn counts_follow_each_delta() {
        let mut publisher = ControllerMetricsPublisher::default();
        let empty = Arc::new(MetadataImage::empty());
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let image = step(
            &mut publisher,
            &empty,
            &[
                broker(1),
                broker(2),
                topic_record("a", a),
                partition_record(a, 0, &[1, 2]),
                partition_record(a, 1, &[2, 1]),
                topic_record("b", b),
                partition_record(b, 0, &[1]),
            ],
        );
        let expected = ControllerImageCounts {
            topics: 2,
            partitions: 3,
            offline_partitions: 0,
            fenced_brokers: 0,
            active_brokers: 2,
            preferred_replica_imbalance: 0,
        };
        assert_eq!(publisher.counts, expected);

        // Broker 1 is fenced; b-0 (only on broker 1) and a-0 lose their leader.
        let no_leader = |topic_id, partition_id| {
            MetadataRecord::PartitionChange(PartitionChangeRecord {
                topic_id,
                partition_id,
                leader: Some(NO_LEADER),
                ..PartitionChangeRecord::default()
            })
        };
        let image = step(
            &mut publisher,
            &image,
            &[
                MetadataRecord::FenceBroker(FenceBrokerRecord { id: 1, epoch: 10 }),
                no_leader(b, 0),
                no_leader(a, 0),
            ],
        );
        assert_eq!(
            publisher.counts,
            ControllerImageCounts {
                offline_partitions: 2,
                fenced_brokers: 1,
                active_brokers: 1,
                preferred_replica_imbalance: 2,
                ..expected
            }
        );

        // Deleting topic b takes its offline partition with it.
        step(
            &mut publisher,
            &image,
            &[MetadataRecord::RemoveTopic(RemoveTopicRecord {
                topic_id: b,
            })],
        );
        assert_eq!(
            publisher.counts,
            ControllerImageCounts {
                topics: 1,
                partitions: 2,
                offline_partitions: 1,
                fenced_brokers: 1,
                active_brokers: 1,
                preferred_replica_imbalance: 1,
            }
        );
    }
}
