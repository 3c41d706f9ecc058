//! The controller: the actor that owns the writable metadata state and the pure decisions it
//! delegates to (`logic`).

mod actor;
mod client_quotas;
mod configs;
pub mod logic;
mod submitter;
mod unregister;

pub use actor::{
    failed_create_partitions, failed_create_topics, failed_delete_topics_for, Controller,
    ControllerSettings, CreatePartitions, CreateTopics, DeleteTopics, WriteRecords,
    LATEST_CREATE_TOPICS_VERSION,
};
pub use client_quotas::AlterClientQuotas;
pub use configs::{AlterConfigs, IncrementalAlterConfigs};
pub use unregister::UnregisterBroker;
