//! The leader's ISR changes: caught-up followers join (asked for by the follower's fetch),
//! lagging ones leave (a scan every `replica.lag.time.max.ms / 2`, Kafka's
//! `isr-expiration` task), each sent to the active controller as AlterPartition (v3) and kept
//! pending until answered (Kafka's `AlterPartitionManager`, one change per partition).

use std::sync::Arc;
use std::time::Duration;

use actix::Addr;
use arc_swap::ArcSwap;
use gregor_publishers::MetadataImage;
use kafka_protocol::messages::alter_partition_request::{BrokerState, PartitionData, TopicData};
use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse, BrokerId};
use tokio::sync::mpsc;

use super::{IsrChange, Role};
use crate::context::ControllerForwarder;
use crate::controller::{AlterPartition, Controller};
use crate::log_manager::{now_ms, LogManager};

const ALTER_PARTITION_VERSION: i16 = 3;
const NOT_CONTROLLER: i16 = 41;

/// What the ISR task needs.
pub struct IsrTask {
    pub logs: Arc<LogManager>,
    pub image: Arc<ArcSwap<MetadataImage>>,
    pub controller: Addr<Controller>,
    pub forwarder: Option<Arc<dyn ControllerForwarder>>,
    pub node_id: i32,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_time_max_ms: i64,
}

impl IsrTask {
    /// Starts the task on the current tokio runtime; it ends when the log manager drops its
    /// sender (never while the node runs).
    pub fn spawn(self) -> tokio::task::JoinHandle<()> {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.logs.set_isr_changes(sender);
        tokio::spawn(self.run(receiver))
    }

    async fn run(self, mut changes: mpsc::UnboundedReceiver<IsrChange>) {
        let period = Duration::from_millis(
            u64::try_from(self.replica_lag_time_max_ms / 2)
                .unwrap_or(0)
                .max(100),
        );
        let mut scan = tokio::time::interval(period);
        scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                change = changes.recv() => match change {
                    Some(change) => self.send(change).await,
                    None => return,
                },
                _ = scan.tick() => {
                    for change in self.lagging() {
                        self.send(change).await;
                    }
                }
            }
        }
    }

    /// The ISR changes removing followers that are no longer caught up.
    fn lagging(&self) -> Vec<IsrChange> {
        let now = now_ms();
        let mut changes = Vec::new();
        for (tp, state) in self.logs.partitions() {
            let log_end = state.log_end_offset();
            let mut replication = state.replication();
            let Some(new_isr) = replication.shrink_isr(log_end, self.replica_lag_time_max_ms, now)
            else {
                continue;
            };
            let Role::Leader(leader) = &replication.role else {
                continue;
            };
            tracing::info!(topic = %tp.topic, partition = tp.partition, isr = ?leader.isr, new_isr = ?new_isr, "asking to remove lagging followers from the ISR");
            changes.push(IsrChange {
                topic: tp.topic.clone(),
                topic_id: state.topic_id,
                partition: tp.partition,
                leader_epoch: leader.leader_epoch,
                partition_epoch: leader.partition_epoch,
                new_isr,
            });
        }
        changes
    }

    async fn send(&self, change: IsrChange) {
        let broker_epoch = self
            .image
            .load()
            .cluster
            .broker(self.node_id)
            .map_or(-1, |b| b.epoch);
        let request = AlterPartitionRequest::default()
            .with_broker_id(BrokerId(self.node_id))
            .with_broker_epoch(broker_epoch)
            .with_topics(vec![TopicData::default()
                .with_topic_id(change.topic_id)
                .with_partitions(vec![PartitionData::default()
                    .with_partition_index(change.partition)
                    .with_leader_epoch(change.leader_epoch)
                    .with_partition_epoch(change.partition_epoch)
                    .with_new_isr_with_epochs(
                        change
                            .new_isr
                            .iter()
                            .map(|id| {
                                BrokerState::default()
                                    .with_broker_id(BrokerId(*id))
                                    .with_broker_epoch(-1)
                            })
                            .collect(),
                    )])]);
        let committed_isr_size = self
            .logs
            .partition(&change.topic, change.partition)
            .and_then(|state| state.replication().isr_size());
        let response = self.ask(request).await;
        let answer = response.as_ref().map(|r| {
            (
                r.error_code,
                r.topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .find(|p| p.partition_index == change.partition)
                    .map(|p| (p.error_code, p.partition_epoch)),
            )
        });
        let settled = match answer {
            // Written: the image carrying the new partition epoch ends the pending change.
            Some((0, Some((0, epoch)))) if epoch > change.partition_epoch => {
                tracing::info!(topic = %change.topic, partition = change.partition, isr = ?change.new_isr, "ISR change committed");
                if let Some(size) = committed_isr_size {
                    gregor_metrics::isr_changed(change.new_isr.len() > size);
                }
                false
            }
            Some((0, Some((0, _)))) => true,
            other => {
                tracing::warn!(topic = %change.topic, partition = change.partition, answer = ?other, "ISR change refused or unanswered; will retry");
                true
            }
        };
        if settled {
            if let Some(state) = self.logs.partition(&change.topic, change.partition) {
                state.replication().clear_pending_isr(change.leader_epoch);
            }
        }
    }

    /// This node's controller when it is the active one, else the active controller.
    async fn ask(&self, request: AlterPartitionRequest) -> Option<AlterPartitionResponse> {
        let local = self
            .controller
            .send(AlterPartition {
                request: request.clone(),
                version: ALTER_PARTITION_VERSION,
            })
            .await
            .ok();
        match local {
            Some(response) if response.error_code != NOT_CONTROLLER => Some(response),
            _ => match &self.forwarder {
                Some(forwarder) => forwarder
                    .alter_partition(request, ALTER_PARTITION_VERSION)
                    .await
                    .answered(),
                None => None,
            },
        }
    }
}
