//! Building new partitions: manual assignment checks, ISR and the PartitionRecord, shared by
//! CreateTopics and CreatePartitions.

use gregor_publishers::records::{MetadataRecord, PartitionRecord};
use uuid::Uuid;

use super::errors::ControllerError;
use super::view::BrokerView;

/// A new partition's replicas (preferred leader first) and its initial ISR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NewPartition {
    pub(crate) replicas: Vec<i32>,
    pub(crate) isr: Vec<i32>,
}

impl NewPartition {
    /// The PartitionRecord of a brand-new partition: the leader is the first in-sync replica,
    /// epochs start at 0 and no replica has a directory assigned yet.
    pub(crate) fn to_record(&self, topic_id: Uuid, partition_id: i32) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord {
            partition_id,
            topic_id,
            replicas: self.replicas.clone(),
            isr: self.isr.clone(),
            removing_replicas: Vec::new(),
            adding_replicas: Vec::new(),
            leader: self
                .isr
                .first()
                .copied()
                .unwrap_or(gregor_publishers::records::NO_LEADER),
            leader_recovery_state: 0,
            leader_epoch: 0,
            partition_epoch: 0,
            directories: vec![Uuid::nil(); self.replicas.len()],
        })
    }
}

/// The replicas that may enter the ISR: registered, unfenced and not shutting down.
pub(crate) fn active_replicas(replicas: &[i32], brokers: &[BrokerView]) -> Vec<i32> {
    replicas
        .iter()
        .copied()
        .filter(|id| brokers.iter().any(|b| b.id == *id && b.is_active()))
        .collect()
}

/// Kafka's `validateManualPartitionAssignment`: non-empty, only registered brokers, no broker
/// twice, and as many replicas as `replication_factor` when one is already fixed.
pub(crate) fn validate_manual_assignment(
    replicas: &[i32],
    replication_factor: Option<usize>,
    brokers: &[BrokerView],
) -> Result<(), ControllerError> {
    if replicas.is_empty() {
        return Err(ControllerError::InvalidReplicaAssignment(
            "The manual partition assignment includes an empty replica list.".into(),
        ));
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    let mut previous = None;
    for id in sorted.iter().copied() {
        if !brokers.iter().any(|b| b.id == id) {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes broker {id}, but no such broker is registered."
            )));
        }
        if previous == Some(id) {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes the broker {id} more than once."
            )));
        }
        previous = Some(id);
    }
    if let Some(expected) = replication_factor {
        if sorted.len() != expected {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "The manual partition assignment includes a partition with {} replica(s), but this is not consistent with previous partitions, which have {expected} replica(s).",
                sorted.len()
            )));
        }
    }
    Ok(())
}

/// A manually assigned partition whose brokers can all not take the ISR.
pub(crate) fn all_inactive(partition: i64) -> ControllerError {
    ControllerError::InvalidReplicaAssignment(format!(
        "All brokers specified in the manual partition assignment for partition {partition} are fenced or in controlled shutdown."
    ))
}

/// A placed partition whose replicas are all fenced or shutting down.
pub(crate) fn no_active_replica(replication_factor: impl std::fmt::Display) -> ControllerError {
    ControllerError::InvalidReplicationFactor(format!(
        "Unable to replicate the partition {replication_factor} time(s): All brokers are currently fenced or in controlled shutdown."
    ))
}
