//! The controller: the actor that owns the writable metadata state and the pure decisions it
//! delegates to (`logic`).

mod acls;
mod activation;
mod actor;
mod alter_partition;
mod client_quotas;
mod configs;
mod controlled_shutdown;
mod elections;
mod features;
pub mod logic;
mod producer_ids;
mod reassignment;
mod scram;
mod submitter;
#[cfg(test)]
mod tests;
mod unregister;

pub use acls::{
    refused_create as refused_create_acls, refused_delete as refused_delete_acls, CreateAcls,
    CreateListedAcls, DeleteAcls, DeleteListedAcls,
};
pub use activation::Activation;
pub(crate) use actor::Refusable;
pub use actor::{
    failed_create_partitions, failed_create_topics, failed_delete_topics_for, Controller,
    ControllerSettings, CreateListedElements, CreateListedPartitions, CreatePartitions,
    CreateTopics, DeleteListedTopics, DeleteTopics, FenceBroker, RegisterNode, UnfenceBroker,
    WriteRecords, ACTIVATION_WAIT, LATEST_CREATE_TOPICS_VERSION,
};
pub use alter_partition::{failed_alter_partition, AlterPartition};
pub use client_quotas::{AlterClientQuotas, AlterListedClientQuotas};
pub use configs::{AlterConfigs, AlterListedConfigs, IncrementalAlterConfigs};
pub use controlled_shutdown::ControlledShutdown;
pub use elections::{failed_elect_leaders, ElectLeaders, ElectListedLeaders, LeadershipSettings};
pub use features::UpdateFeatures;
pub use producer_ids::{AllocateProducerIds, ProducerIdBlock, PRODUCER_ID_BLOCK_SIZE};
pub use reassignment::{
    failed_alter_partition_reassignments, failed_list_partition_reassignments,
    AlterListedReassignments, AlterPartitionReassignments, ListPartitionReassignments,
};
pub use scram::{
    refused as refused_scram_alteration, AlterListedScramCredentials, AlterUserScramCredentials,
};
pub use unregister::UnregisterBroker;
