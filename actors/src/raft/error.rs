//! Errors of the metadata log, written for the operator who has to act on them.

use std::path::PathBuf;
use std::time::Duration;

/// Why the metadata log could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum MetadataLogError {
    /// A file of the metadata log could not be read or written.
    #[error("metadata log storage error at {path}: {detail}")]
    Storage {
        /// The file or directory concerned.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// A file of the metadata log exists but its contents are not valid.
    #[error(
        "metadata log file {path} is corrupt or from an unknown format: {detail}; \
         restore it from a replica or backup, or move the log dir aside to start empty"
    )]
    Corrupt {
        /// The file concerned.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// Writes go to the leader, and this node is not it.
    #[error("this node is not the metadata log leader (current leader: {leader_id:?}); send the write to the leader")]
    NotLeader {
        /// The leader this node knows of, if any.
        leader_id: Option<u64>,
    },
    /// The node did not become leader with a caught-up image in time.
    #[error("the metadata log was not ready within {timeout:?}: {detail}")]
    NotReady {
        /// How long was waited.
        timeout: Duration,
        /// The state it was in.
        detail: String,
    },
    /// The log was initialized in a way this node cannot accept.
    #[error("cannot initialize the metadata log: {0}")]
    Initialize(String),
    /// The raft group has stopped (shutdown, or a fatal storage/apply error logged before).
    #[error("the metadata log has shut down{0}")]
    Shutdown(String),
    /// The applier failed to apply committed entries or install a snapshot.
    #[error(transparent)]
    Apply(ApplyError),
    /// Any other raft failure.
    #[error("metadata log raft error: {0}")]
    Raft(String),
}

impl MetadataLogError {
    /// A storage error at `path`.
    pub(crate) fn storage(path: impl Into<PathBuf>, detail: impl std::fmt::Display) -> Self {
        MetadataLogError::Storage {
            path: path.into(),
            detail: detail.to_string(),
        }
    }

    /// A corrupt file at `path`.
    pub(crate) fn corrupt(path: impl Into<PathBuf>, detail: impl std::fmt::Display) -> Self {
        MetadataLogError::Corrupt {
            path: path.into(),
            detail: detail.to_string(),
        }
    }

    /// Wraps this error for openraft's storage API, keeping the message (and so the path).
    pub(crate) fn into_any(self) -> openraft::AnyError {
        openraft::AnyError::new(&self)
    }
}

/// The applier could not build or publish a new image.
#[derive(Clone, Debug, thiserror::Error)]
#[error("metadata applier failed: {message}")]
pub struct ApplyError {
    message: String,
}

impl ApplyError {
    /// An apply failure described by `message`.
    pub fn new(message: impl Into<String>) -> Self {
        ApplyError {
            message: message.into(),
        }
    }
}
