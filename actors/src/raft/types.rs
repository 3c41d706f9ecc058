//! The openraft type configuration of the metadata log, and the node type of its voters.

use std::io::Cursor;

use gregor_publishers::records::{Endpoint, MetadataBatch};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A voter of the metadata quorum: Kafka identifies a voter by `(node id, directory id)` and
/// reaches it through its controller endpoints. The node id is the raft `NodeId` (`u64`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VoterNode {
    /// Directory id of the voter's metadata log dir (Kafka's `directory.id`).
    pub directory_id: Uuid,
    /// The voter's controller listener endpoints.
    pub endpoints: Vec<Endpoint>,
}

openraft::declare_raft_types!(
    /// Type configuration of the metadata log: entries carry one [`MetadataBatch`] each, and
    /// applying an entry yields nothing (the applied log id comes back in the write response).
    pub TypeConfig:
        D = MetadataBatch,
        R = (),
        NodeId = u64,
        Node = VoterNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A log id of the metadata log.
pub type MetadataLogId = openraft::LogId<u64>;

/// One entry of the metadata log.
pub(crate) type Entry = openraft::Entry<TypeConfig>;

/// openraft's storage error, specialised to this log.
pub(crate) type StorageError = openraft::StorageError<u64>;
