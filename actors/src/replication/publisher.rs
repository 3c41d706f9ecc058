//! [`ReplicationPublisher`]: applies each image's leaders and ISRs to the hosted partitions and
//! tells the replica fetchers which partitions this node follows, and from whom.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use gregor_log::checkpoint::TopicPartition;
use gregor_publishers::image::topics::TopicImage;
use gregor_publishers::{
    LoaderManifest, MetadataDelta, MetadataImage, MetadataPublisher, PublishError,
};
use tokio::sync::watch;

use super::{Assignment, RoleChange};
use crate::log_manager::{now_ms, LogManager};

/// A partition this node follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowedPartition {
    pub topic: String,
    pub topic_id: uuid::Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
}

/// Followed partitions by leader broker id.
pub type FollowerAssignments = BTreeMap<i32, Vec<FollowedPartition>>;

/// Installed after the `LogPublisher` (which opens the logs this one assigns roles to).
pub struct ReplicationPublisher {
    logs: Arc<LogManager>,
    node_id: i32,
    /// Followed partitions: (topic, partition) → (leader, partition).
    followed: HashMap<(String, i32), (i32, FollowedPartition)>,
    /// Led partitions: (topic, partition) → under-replicated (ISR smaller than the replicas).
    led: HashMap<(String, i32), bool>,
    assignments: watch::Sender<Arc<FollowerAssignments>>,
}

impl ReplicationPublisher {
    /// The publisher and the receiving end the replica fetchers watch.
    pub fn new(
        logs: Arc<LogManager>,
        node_id: i32,
    ) -> (Self, watch::Receiver<Arc<FollowerAssignments>>) {
        let (assignments, receiver) = watch::channel(Arc::new(FollowerAssignments::new()));
        (
            ReplicationPublisher {
                logs,
                node_id,
                followed: HashMap::new(),
                led: HashMap::new(),
                assignments,
            },
            receiver,
        )
    }

    fn sync_topic(&mut self, topic: &TopicImage) {
        let now = now_ms();
        for (partition, registration) in topic.partitions() {
            let key = (topic.name.to_string(), partition);
            let hosted = registration.replicas.as_slice().contains(&self.node_id);
            let state = self
                .logs
                .partition(&topic.name, partition)
                .filter(|s| s.topic_id == topic.id);
            let (true, Some(state)) = (hosted, state) else {
                self.followed.remove(&key);
                self.led.remove(&key);
                continue;
            };
            if registration.leader == self.node_id {
                self.led.insert(
                    key.clone(),
                    registration.isr.as_slice().len() < registration.replicas.as_slice().len(),
                );
            } else {
                self.led.remove(&key);
            }
            let assignment = Assignment {
                leader: registration.leader,
                leader_epoch: registration.leader_epoch,
                partition_epoch: registration.partition_epoch,
                replicas: registration.replicas.as_slice().to_vec(),
                isr: registration.isr.as_slice().to_vec(),
            };
            let change =
                state
                    .replication()
                    .assign(self.node_id, &assignment, state.log_end_offset(), now);
            match change {
                RoleChange::BecameLeader => {
                    tracing::info!(topic = %topic.name, partition, leader_epoch = registration.leader_epoch, "leading the partition");
                    self.logs.become_leader(
                        &TopicPartition::new(topic.name.to_string(), partition),
                        registration.leader_epoch,
                    );
                }
                RoleChange::BecameFollower => {
                    tracing::debug!(topic = %topic.name, partition, leader = registration.leader, leader_epoch = registration.leader_epoch, "following the partition");
                }
                RoleChange::Unchanged => {}
            }
            state.refresh_high_watermark();
            // Waiting produces and fetches look again (leadership or the ISR changed).
            state.appended.notify_waiters();
            if registration.leader != self.node_id && registration.leader >= 0 {
                self.followed.insert(
                    key,
                    (
                        registration.leader,
                        FollowedPartition {
                            topic: topic.name.to_string(),
                            topic_id: topic.id,
                            partition,
                            leader_epoch: registration.leader_epoch,
                        },
                    ),
                );
            } else {
                self.followed.remove(&key);
            }
        }
    }

    fn publish_assignments(&self) {
        let mut by_leader = FollowerAssignments::new();
        for (leader, partition) in self.followed.values() {
            by_leader
                .entry(*leader)
                .or_default()
                .push(partition.clone());
        }
        for partitions in by_leader.values_mut() {
            partitions.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
        }
        if **self.assignments.borrow() != by_leader {
            self.assignments.send_replace(Arc::new(by_leader));
        }
    }
}

impl MetadataPublisher for ReplicationPublisher {
    fn name(&self) -> &str {
        "replication"
    }

    fn on_metadata_update(
        &mut self,
        delta: &MetadataDelta,
        image: &Arc<MetadataImage>,
        manifest: &LoaderManifest,
    ) -> Result<(), PublishError> {
        if matches!(manifest, LoaderManifest::Snapshot { .. }) {
            self.followed.clear();
            self.led.clear();
            for topic in image.topics.iter() {
                self.sync_topic(topic);
            }
        } else if let Some(topics) = delta.topics_delta() {
            let deleted: std::collections::HashSet<&str> =
                topics.deleted_topics().map(|(_, name)| name).collect();
            self.followed
                .retain(|(topic, _), _| !deleted.contains(topic.as_str()));
            self.led
                .retain(|(topic, _), _| !deleted.contains(topic.as_str()));
            for changed in topics.changed_topics() {
                if let Some(topic) = image.topics.get_by_id(&changed.id()) {
                    self.sync_topic(topic);
                }
            }
        } else {
            return Ok(());
        }
        self.publish_assignments();
        gregor_metrics::replica_leadership(
            self.led.len(),
            self.led.values().filter(|under| **under).count(),
        );
        Ok(())
    }
}
