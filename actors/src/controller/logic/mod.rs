//! The pure core of the controller's topic mutations (STYLE #6 "a pure core, an actor shell").
//!
//! Each operation is a function from (current metadata, request) to (response, records), modelled
//! on the decisions of Kafka's `ReplicationControlManager` and the controller-side parts of
//! `ControllerApis`:
//!
//! ```text
//!   controller actor ──(image, request)──▶ create_topics / delete_topics / create_partitions
//!          ▲                                            │
//!          └──────────(ControllerResult { records, response })◀┘
//!   the actor writes `records` through raft, then answers with `response`
//! ```
//!
//! Nothing here touches actix, sockets or raft; randomness (topic ids, placement offsets) and the
//! controller-mutation quota come in through [`MutationContext`], so tests are exact.
//!
//! Architecture invariant: every requested topic gets exactly one result, in request order, and
//! a `validate_only` request returns the same response with no records.

pub mod acls;
pub mod alter_partition;
pub mod client_quotas;
pub mod configs;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_topics;
pub mod election;
pub mod errors;
pub mod features;
pub mod listed;
mod partitions;
pub mod placement;
pub mod quota;
pub mod reassignment;
pub mod registration;
pub mod scram;
pub mod topic_configs;
pub mod topic_name;
pub mod view;

#[cfg(test)]
pub(crate) mod large_requests;
#[cfg(test)]
mod testing;

use gregor_publishers::records::MetadataRecord;
use rand::RngCore;

pub use create_partitions::{create_listed_partitions, create_partitions, ListedGrowth};
pub use create_topics::{
    create_listed_topics, create_topics, ListedCreation, ListedOutcome, TopicDefaults,
};
pub use delete_topics::{
    delete_listed_topics, delete_topics, ListedAlone, ListedDeletion, ListedTopic, ListedTopics,
};
pub use errors::ControllerError;
pub use listed::{ListedAnswers, ListedElements, ListedError};
pub use quota::{MutationQuota, QuotaExceeded, Unlimited};
pub use view::{BrokerView, MetadataView};

/// Most records one user operation may write (Kafka's `MAX_RECORDS_PER_USER_OP`); beyond it
/// the whole request fails with POLICY_VIOLATION.
pub const MAX_RECORDS_PER_USER_OP: usize = 10_000;

/// What a controller operation decided: the records to append (atomically, in order) and the
/// response to send once they are committed.
#[derive(Debug, Clone, PartialEq)]
pub struct ControllerResult<T> {
    /// Records to write through raft; empty for `validate_only` and all-failed requests.
    pub records: Vec<MetadataRecord>,
    /// The response for the client.
    pub response: T,
}

/// Per-request inputs that are not part of the metadata: the random source for topic ids and
/// placement, and the controller-mutation quota (KIP-599) charged per topic.
pub struct MutationContext<'a> {
    /// Random source for topic ids and the replica placer's start offsets.
    pub rng: &'a mut dyn RngCore,
    /// Charged once per topic, after validation and before the `validate_only` branch.
    pub quota: &'a mut dyn MutationQuota,
}

impl std::fmt::Debug for MutationContext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MutationContext").finish_non_exhaustive()
    }
}
