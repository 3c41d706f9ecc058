//! [`ReplicationPublisher`]: applies each image's leaders and ISRs to the hosted partitions and
//! tells the replica fetchers which partitions this node follows, and from whom.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use gregor_log::checkpoint::TopicPartition;
use gregor_publishers::image::configs::ConfigsDelta;
use gregor_publishers::image::topics::TopicImage;
use gregor_publishers::{
    LoaderManifest, MetadataDelta, MetadataImage, MetadataPublisher, PublishError,
};
use tokio::sync::watch;

use super::{effective_min_isr, Assignment, RoleChange};
use crate::controller::logic::configs::resource_type::{BROKER, TOPIC};
use crate::log_manager::{now_ms, LogChanges, LogManager};
use crate::partition_runs::{write_span, PartitionRuns};

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
    /// Led partitions: (topic, partition) → how it counts in the `ReplicaManager` gauges.
    led: HashMap<(String, i32), LedHealth>,
    /// How many of `led` are in each state, kept as they change (not counted per image).
    health: HealthCounts,
    /// Whether `followed` changed since the fetchers were last sent their assignments.
    followed_changed: bool,
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
                health: HealthCounts::default(),
                followed_changed: false,
                assignments,
            },
            receiver,
        )
    }

    fn lead(&mut self, key: (String, i32), health: LedHealth) {
        if let Some(before) = self.led.insert(key, health) {
            self.health.remove(before);
        }
        self.health.add(health);
    }

    fn stop_leading(&mut self, key: &(String, i32)) {
        if let Some(before) = self.led.remove(key) {
            self.health.remove(before);
        }
    }

    fn follow(&mut self, key: (String, i32), leader: i32, partition: FollowedPartition) {
        let followed = (leader, partition);
        if self.followed.get(&key) != Some(&followed) {
            self.followed.insert(key, followed);
            self.followed_changed = true;
        }
    }

    fn stop_following(&mut self, key: &(String, i32)) {
        self.followed_changed |= self.followed.remove(key).is_some();
    }

    fn sync_topic(&mut self, changes: &mut LogChanges<'_>, topic: &TopicImage) {
        let now = now_ms();
        let mut taken = LeadershipTaken::default();
        // Whether this node leads a partition of the topic, and started following one (a new
        // leader or epoch), for the topic's leader-only metrics.
        let (mut leads, mut follows_anew) = (false, false);
        for (partition, registration) in topic.partitions() {
            let key = (topic.name.to_string(), partition);
            let hosted = registration.replicas.as_slice().contains(&self.node_id);
            let state = self
                .logs
                .partition(&topic.name, partition)
                .filter(|s| s.topic_id == topic.id);
            let (true, Some(state)) = (hosted, state) else {
                self.stop_following(&key);
                self.stop_leading(&key);
                continue;
            };
            if registration.leader == self.node_id {
                leads = true;
                let health = LedHealth::of(
                    registration.isr.as_slice().len(),
                    registration.replicas.as_slice().len(),
                    state.min_insync_replicas(),
                );
                self.lead(key.clone(), health);
            } else {
                self.stop_leading(&key);
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
                    tracing::debug!(topic = %topic.name, partition, leader_epoch = registration.leader_epoch, "leading the partition");
                    taken.add(partition, registration.leader_epoch);
                    changes.become_leader(
                        &TopicPartition::new(topic.name.to_string(), partition),
                        registration.leader_epoch,
                    );
                }
                RoleChange::BecameFollower => {
                    follows_anew = true;
                    tracing::debug!(topic = %topic.name, partition, leader = registration.leader, leader_epoch = registration.leader_epoch, "following the partition");
                }
                RoleChange::Unchanged => {}
            }
            state.refresh_high_watermark();
            // Waiting produces and fetches look again (leadership or the ISR changed).
            state.appended.notify_waiters();
            if registration.leader != self.node_id && registration.leader >= 0 {
                let followed = FollowedPartition {
                    topic: topic.name.to_string(),
                    topic_id: topic.id,
                    partition,
                    leader_epoch: registration.leader_epoch,
                };
                self.follow(key, registration.leader, followed);
            } else {
                self.stop_following(&key);
            }
        }
        if let Some((partitions, epochs)) = taken.describe() {
            tracing::info!(topic = %topic.name, count = taken.partitions.count(), %partitions, leader_epochs = %epochs, "leading partitions");
        }
        // Kafka's `ReplicaManager.updateLeaderAndFollowerMetrics`: a topic whose partitions
        // this node follows after the change, and leads none of, loses its leader-only series.
        if follows_anew && !leads {
            gregor_metrics::remove_leader_topic_metrics(&topic.name);
        }
    }

    /// Sends the fetchers their assignments when the followed partitions changed.
    fn publish_assignments(&mut self) {
        if !std::mem::take(&mut self.followed_changed) {
            return;
        }
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

    /// Requests reading this state wait for the loader's published offset
    /// (`HandlerContext::publishers_caught_up`), so a write's answer need not.
    fn holds_the_answer(&self) -> bool {
        false
    }

    fn on_metadata_update(
        &mut self,
        delta: &MetadataDelta,
        image: &Arc<MetadataImage>,
        manifest: &LoaderManifest,
    ) -> Result<(), PublishError> {
        let logs = Arc::clone(&self.logs);
        let mut changes = logs.changes();
        let snapshot = matches!(manifest, LoaderManifest::Snapshot { .. });
        if snapshot {
            self.followed.clear();
            self.followed_changed = true;
            self.led.clear();
            self.health = HealthCounts::default();
            for topic in image.topics.iter() {
                self.sync_topic(&mut changes, topic);
            }
        } else if delta.topics_delta().is_none() && delta.configs_delta().is_none() {
            return Ok(());
        }
        if let Some(topics) = delta.topics_delta().filter(|_| !snapshot) {
            // A deleted topic's partitions are those of the image before the delta: a deletion
            // costs its own partitions, not every hosted one.
            for (id, name) in topics.deleted_topics() {
                let Some(deleted) = delta.base().topics.get_by_id(&id) else {
                    continue;
                };
                for (partition, _) in deleted.partitions() {
                    let key = (name.to_owned(), partition);
                    self.stop_following(&key);
                    self.stop_leading(&key);
                }
            }
            for changed in topics.changed_topics() {
                if let Some(topic) = image.topics.get_by_id(&changed.id()) {
                    self.sync_topic(&mut changes, topic);
                }
            }
        }
        if let Some(configs) = delta.configs_delta().filter(|_| !snapshot) {
            // The log publisher, before this one, has given the states the new minimum.
            for topic in self.min_isr_changed(configs, image) {
                self.sync_topic(&mut changes, topic);
            }
        }
        changes.send();
        self.publish_assignments();
        gregor_metrics::replica_leadership(&self.health.of(self.led.len()));
        Ok(())
    }
}

impl ReplicationPublisher {
    /// The topics whose effective `min.insync.replicas` `configs` may have changed: those whose
    /// own config changed, every topic when this node's or the cluster's broker default did.
    fn min_isr_changed<'a>(
        &self,
        configs: &ConfigsDelta,
        image: &'a MetadataImage,
    ) -> Vec<&'a Arc<TopicImage>> {
        let node = self.node_id.to_string();
        let mut topics = Vec::new();
        for (resource_type, name, change) in configs.changed_resources() {
            let min_isr = change.cleared()
                || change
                    .changes()
                    .any(|(key, _)| key == "min.insync.replicas");
            if !min_isr {
                continue;
            }
            if resource_type == BROKER && (name.is_empty() || name == node) {
                return image.topics.iter().collect();
            }
            if resource_type == TOPIC {
                topics.extend(image.topics.get_by_name(name));
            }
        }
        topics
    }
}

/// How a led partition counts in the `ReplicaManager` gauges (Kafka's `Partition`:
/// `isUnderReplicated`, `isUnderMinIsr`, `isAtMinIsr`, against the effective minimum).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct LedHealth {
    under_replicated: bool,
    under_min_isr: bool,
    at_min_isr: bool,
}

impl LedHealth {
    fn of(isr: usize, replicas: usize, min_insync_replicas: i32) -> Self {
        let min_isr = effective_min_isr(min_insync_replicas, replicas);
        LedHealth {
            under_replicated: isr < replicas,
            under_min_isr: isr < min_isr,
            at_min_isr: isr == min_isr,
        }
    }
}

/// How many led partitions are in each state of [`LedHealth`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct HealthCounts {
    under_replicated: usize,
    under_min_isr: usize,
    at_min_isr: usize,
}

impl HealthCounts {
    fn add(&mut self, health: LedHealth) {
        self.under_replicated += usize::from(health.under_replicated);
        self.under_min_isr += usize::from(health.under_min_isr);
        self.at_min_isr += usize::from(health.at_min_isr);
    }

    fn remove(&mut self, health: LedHealth) {
        self.under_replicated -= usize::from(health.under_replicated);
        self.under_min_isr -= usize::from(health.under_min_isr);
        self.at_min_isr -= usize::from(health.at_min_isr);
    }

    fn of(self, leaders: usize) -> gregor_metrics::Leadership {
        gregor_metrics::Leadership {
            leaders,
            under_replicated: self.under_replicated,
            under_min_isr: self.under_min_isr,
            at_min_isr: self.at_min_isr,
        }
    }
}

/// The partitions of one topic this node started leading in one image, logged as one line:
/// a new 1,000-partition topic is one INFO line, not 1,000 (each is at DEBUG).
#[derive(Default)]
struct LeadershipTaken {
    partitions: PartitionRuns,
    epochs: Option<(i32, i32)>,
}

impl LeadershipTaken {
    fn add(&mut self, partition: i32, leader_epoch: i32) {
        self.partitions.add(partition);
        self.epochs = Some(match self.epochs {
            Some((low, high)) => (low.min(leader_epoch), high.max(leader_epoch)),
            None => (leader_epoch, leader_epoch),
        });
    }

    /// The partitions as runs (`0-999`, `3,7-9`) and the leader epochs (`4` or `2-5`); None
    /// when there were none.
    fn describe(&self) -> Option<(String, String)> {
        let epochs = self.epochs?;
        let mut span = String::new();
        // Writing into a String cannot fail.
        let _ = write_span(&mut span, epochs);
        Some((self.partitions.to_string(), span))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use gregor_metrics::names;
    use gregor_publishers::records::{
        ConfigRecord, PartitionChangeRecord, PartitionRecord, RemoveTopicRecord, TopicRecord,
    };
    use gregor_publishers::{MetadataRecord, Provenance};
    use uuid::Uuid;

    use super::*;
    use crate::log_manager::{LogManagerSettings, LogPublisher, StaticLogDefaults};

    fn partition(topic: Uuid, id: i32, isr: &[i32], leader: i32) -> MetadataRecord {
        partition_on(topic, id, &[1, 2], isr, leader)
    }

    fn partition_on(
        topic: Uuid,
        id: i32,
        replicas: &[i32],
        isr: &[i32],
        leader: i32,
    ) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord {
            isr: isr.to_vec(),
            leader,
            ..PartitionRecord::in_sync(topic, id, replicas.to_vec())
        })
    }

    fn config(resource_type: i8, name: &str, key: &str, value: Option<&str>) -> MetadataRecord {
        MetadataRecord::Config(ConfigRecord {
            resource_type,
            resource_name: name.into(),
            name: key.into(),
            value: value.map(Into::into),
        })
    }

    fn topic(name: &str, id: Uuid) -> MetadataRecord {
        MetadataRecord::Topic(TopicRecord {
            name: name.into(),
            topic_id: id,
        })
    }

    /// Applies `records` on `image` and hands the delta to both publishers, logs first (as the
    /// node installs them).
    fn publish(
        image: &Arc<MetadataImage>,
        records: &[MetadataRecord],
        logs: &mut LogPublisher,
        replication: &mut ReplicationPublisher,
    ) -> Arc<MetadataImage> {
        let mut delta = MetadataDelta::new(Arc::clone(image));
        for record in records {
            delta.replay(record).unwrap();
        }
        let next = Arc::new(delta.apply(Provenance::default()));
        let manifest = LoaderManifest::LogDelta {
            provenance: Provenance::default(),
            num_batches: 1,
            num_records: records.len(),
            elapsed_ns: 0,
        };
        logs.on_metadata_update(&delta, &next, &manifest).unwrap();
        replication
            .on_metadata_update(&delta, &next, &manifest)
            .unwrap();
        next
    }

    /// Kafka's `Partition` states against the effective minimum (`min.insync.replicas` capped
    /// at the replica count).
    #[test]
    fn a_led_partition_is_under_or_at_its_effective_min_isr() {
        let health = |under_replicated, under_min_isr, at_min_isr| LedHealth {
            under_replicated,
            under_min_isr,
            at_min_isr,
        };
        assert_eq!(LedHealth::of(3, 3, 2), health(false, false, false));
        assert_eq!(LedHealth::of(2, 3, 2), health(true, false, true));
        assert_eq!(LedHealth::of(1, 3, 2), health(true, true, false));
        // A minimum above the replication factor is capped: one replica in sync of one.
        assert_eq!(LedHealth::of(1, 1, 2), health(false, false, true));
        assert_eq!(LedHealth::of(2, 3, 5), health(true, true, false));
    }

    /// The partitions a topic started leading are logged as runs of ids and a span of epochs.
    #[test]
    fn partitions_taken_are_described_as_runs() {
        let mut led = LeadershipTaken::default();
        assert_eq!(led.describe(), None);
        for partition in 0..1000 {
            led.add(partition, 0);
        }
        assert_eq!(led.describe(), Some(("0-999".into(), "0".into())));
        let mut led = LeadershipTaken::default();
        for (partition, epoch) in [(3, 4), (7, 2), (8, 5), (9, 5), (11, 4)] {
            led.add(partition, epoch);
        }
        assert_eq!(led.partitions.count(), 5);
        assert_eq!(led.describe(), Some(("3,7-9,11".into(), "2-5".into())));
    }

    /// Deleting a topic drops its partitions' logs and roles (found through the image before
    /// the delta) and nothing else; the under-replicated count and the fetchers' assignments
    /// follow, including a topic deleted and created again under its name in one delta.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deleted_topic_takes_only_its_own_partitions_along() {
        let dir = tempfile::tempdir().unwrap();
        let manager = LogManager::start(LogManagerSettings::for_tests(dir.path())).unwrap();
        let mut logs = LogPublisher::new(Arc::clone(&manager), 1, StaticLogDefaults::default());
        let (mut replication, assignments) = ReplicationPublisher::new(Arc::clone(&manager), 1);
        let (kept, gone, again) = (Uuid::from_u128(1), Uuid::from_u128(2), Uuid::from_u128(3));
        let image = publish(
            &Arc::new(MetadataImage::empty()),
            &[
                topic("kept", kept),
                partition(kept, 0, &[1], 1),
                partition(kept, 1, &[1], 1),
                topic("gone", gone),
                partition(gone, 0, &[1, 2], 2),
                partition(gone, 1, &[1], 1),
            ],
            &mut logs,
            &mut replication,
        );
        assert_eq!(
            (replication.led.len(), replication.health.under_replicated),
            (3, 3)
        );
        let followed = |name: &str| {
            assignments
                .borrow()
                .get(&2)
                .map(|partitions| partitions.iter().filter(|p| p.topic == name).count())
                .unwrap_or(0)
        };
        assert_eq!(followed("gone"), 1);

        let image = publish(
            &image,
            &[MetadataRecord::RemoveTopic(RemoveTopicRecord {
                topic_id: gone,
            })],
            &mut logs,
            &mut replication,
        );
        assert!(manager.partition("gone", 0).is_none() && manager.partition("gone", 1).is_none());
        assert!(manager.partition("kept", 0).is_some() && manager.partition("kept", 1).is_some());
        assert_eq!(
            (replication.led.len(), replication.health.under_replicated),
            (2, 2)
        );
        assert_eq!(followed("gone"), 0);

        publish(
            &image,
            &[
                MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id: kept }),
                topic("kept", again),
                partition(again, 0, &[1, 2], 1),
            ],
            &mut logs,
            &mut replication,
        );
        assert_eq!(
            manager.partition("kept", 0).map(|s| s.topic_id),
            Some(again)
        );
        assert!(manager.partition("kept", 1).is_none());
        assert_eq!(
            (replication.led.len(), replication.health.under_replicated),
            (1, 0)
        );
    }

    /// Kafka's `updateLeaderAndFollowerMetrics`: once this node follows partitions of a topic
    /// and leads none, the topic's leader-only series leave the scrape; its fetch series stay.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_topic_led_nowhere_here_loses_its_leader_series() {
        let dir = tempfile::tempdir().unwrap();
        let manager = LogManager::start(LogManagerSettings::for_tests(dir.path())).unwrap();
        let mut logs = LogPublisher::new(Arc::clone(&manager), 1, StaticLogDefaults::default());
        let (mut replication, _assignments) = ReplicationPublisher::new(Arc::clone(&manager), 1);
        let name = "replication-publisher-leader-series";
        let id = Uuid::from_u128(7);
        let image = publish(
            &Arc::new(MetadataImage::empty()),
            &[
                topic(name, id),
                partition(id, 0, &[1, 2], 1),
                partition(id, 1, &[1, 2], 1),
            ],
            &mut logs,
            &mut replication,
        );
        let appended = gregor_metrics::ProduceOutcome::Appended {
            messages: 2,
            bytes: 20,
        };
        gregor_metrics::topic_produce(name, appended);
        gregor_metrics::topic_fetches(name, 1, 0, 20);
        let series = |family: &str| {
            let mut body = String::new();
            gregor_metrics::topics::render(&mut body);
            let prefix = format!("{family}{{topic=\"{name}\"}} ");
            body.lines()
                .find_map(|line| line.strip_prefix(prefix.as_str()).map(str::to_owned))
        };
        let moved_to_2 = |partition_id| {
            MetadataRecord::PartitionChange(PartitionChangeRecord {
                topic_id: id,
                partition_id,
                leader: Some(2),
                ..PartitionChangeRecord::default()
            })
        };
        let image = publish(&image, &[moved_to_2(0)], &mut logs, &mut replication);
        assert_eq!(
            series(names::TOPIC_MESSAGES_IN_TOTAL).as_deref(),
            Some("2"),
            "partition 1 is still led here"
        );
        publish(&image, &[moved_to_2(1)], &mut logs, &mut replication);
        for family in [
            names::TOPIC_MESSAGES_IN_TOTAL,
            names::TOPIC_BYTES_IN_TOTAL,
            names::TOPIC_PRODUCE_REQUESTS_TOTAL,
        ] {
            assert_eq!(series(family), None, "{family}");
        }
        assert_eq!(series(names::TOPIC_BYTES_OUT_TOTAL).as_deref(), Some("20"));
        assert_eq!(
            series(names::TOPIC_FETCH_REQUESTS_TOTAL).as_deref(),
            Some("1")
        );
    }

    /// The min-ISR gauges count led partitions whose ISR is under or at the effective minimum,
    /// and follow ISR changes, leadership moving away, and a change of the topic's or the broker
    /// default's `min.insync.replicas` that changes no partition.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn min_isr_counts_follow_isrs_leaders_and_configs() {
        let dir = tempfile::tempdir().unwrap();
        let manager = LogManager::start(LogManagerSettings::for_tests(dir.path())).unwrap();
        let mut logs = LogPublisher::new(Arc::clone(&manager), 1, StaticLogDefaults::default());
        let (mut replication, _) = ReplicationPublisher::new(Arc::clone(&manager), 1);
        let (t, single) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let counts = |replication: &ReplicationPublisher| {
            let health = replication.health.of(replication.led.len());
            (
                health.leaders,
                health.under_replicated,
                health.under_min_isr,
                health.at_min_isr,
            )
        };
        let image = publish(
            &Arc::new(MetadataImage::empty()),
            &[
                topic("t", t),
                config(TOPIC, "t", "min.insync.replicas", Some("2")),
                partition_on(t, 0, &[1, 2, 3], &[1, 2, 3], 1),
                partition_on(t, 1, &[1, 2, 3], &[1, 2], 1),
                partition_on(t, 2, &[1, 2, 3], &[1], 1),
                partition_on(t, 3, &[1, 2, 3], &[2, 3], 2),
                topic("single", single),
                config(TOPIC, "single", "min.insync.replicas", Some("2")),
                partition_on(single, 0, &[1], &[1], 1),
            ],
            &mut logs,
            &mut replication,
        );
        // Led: t-0 (healthy), t-1 (at 2), t-2 (under 2), single-0 (at its capped minimum 1).
        assert_eq!(counts(&replication), (4, 2, 1, 2));

        let change = |partition_id, isr: &[i32], leader| {
            MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id,
                topic_id: t,
                isr: Some(isr.to_vec()),
                leader,
                ..PartitionChangeRecord::default()
            })
        };
        // t-2 back in sync; t-0 led elsewhere now.
        let image = publish(
            &image,
            &[change(2, &[1, 2, 3], None), change(0, &[2, 3], Some(2))],
            &mut logs,
            &mut replication,
        );
        assert_eq!(counts(&replication), (3, 1, 0, 2));

        // Only the topic's minimum changes: t-1 (2 of 3) is under 3 now, t-2 (3 of 3) at it.
        let image = publish(
            &image,
            &[config(TOPIC, "t", "min.insync.replicas", Some("3"))],
            &mut logs,
            &mut replication,
        );
        assert_eq!(counts(&replication), (3, 1, 1, 2));

        // The topics' own minimums go; the cluster-wide broker default (1) applies.
        let image = publish(
            &image,
            &[
                config(TOPIC, "t", "min.insync.replicas", None),
                config(TOPIC, "single", "min.insync.replicas", None),
                config(BROKER, "", "min.insync.replicas", Some("1")),
            ],
            &mut logs,
            &mut replication,
        );
        assert_eq!(counts(&replication), (3, 1, 0, 1));
        // This node's default: 2 of 3 replicas in sync on t-1 is at it again.
        publish(
            &image,
            &[config(BROKER, "1", "min.insync.replicas", Some("2"))],
            &mut logs,
            &mut replication,
        );
        assert_eq!(counts(&replication), (3, 1, 0, 2));
    }
}
