//! The submitter task: hands the controller's batches to the metadata log in order, grouping
//! the batches that queue up behind a write into the next one (group commit).
//!
//! Every raft entry costs one fsync. Submitting each mutation as its own entry capped churn at
//! one mutation per fsync (about 800/s here, whatever the number of clients). Instead, one group
//! is in flight at a time; the batches that arrive meanwhile become the next group, one entry,
//! one fsync. Grouping keeps the order (batches are concatenated in arrival order), and the
//! records of each batch were validated against the working image that already held everything
//! queued before them, so applying them together is applying them one after another.
//!
//! Because each batch was validated on top of the ones before it, a failed write poisons every
//! batch of its *generation* (the working image they were validated on): they are failed with
//! the same error, never handed to raft. The controller starts a new generation from the
//! published image when it learns of the failure (or when it becomes active in a new term) and
//! raises `valid_from`, so batches of an older generation still queued are failed too.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use gregor_publishers::records::{MetadataBatch, MetadataRecord};
use tokio::sync::{mpsc, oneshot};

use crate::raft::{MetadataLog, MetadataLogError, MetadataLogId};

/// Most records in one grouped entry; Kafka bounds one controller operation at 10,000 records,
/// so a group holds several large operations but stays a bounded write.
const MAX_GROUP_RECORDS: usize = 50_000;

/// Most encoded bytes of records in one grouped entry: an entry travels whole in one
/// AppendEntries, which a lagging follower must take within a heartbeat interval (see
/// `REPLICATION_BATCH_BYTES` in the node's quorum transport). One batch larger than this (one
/// large operation) still goes alone: an operation is never split across entries.
const MAX_GROUP_BYTES: usize = 1024 * 1024;

/// Encoded size of a batch's records.
fn encoded_bytes(records: &[MetadataRecord]) -> usize {
    postcard::experimental::serialized_size(records).unwrap_or(usize::MAX)
}

/// One batch on its way to the metadata log, and who waits for its outcome.
pub(super) struct Submission {
    pub(super) batch: MetadataBatch,
    /// The generation of the working image the batch was validated on.
    pub(super) generation: u64,
    pub(super) done: oneshot::Sender<Result<MetadataLogId, MetadataLogError>>,
}

/// Runs until the controller drops its sender. Batches of a generation below `valid_from` are
/// failed without being written.
pub(super) async fn run(
    log: Arc<MetadataLog>,
    mut queue: mpsc::UnboundedReceiver<Submission>,
    valid_from: Arc<AtomicU64>,
) {
    let mut waiting: Option<Submission> = None;
    // Why the batches of a poisoned generation fail: the error of the write they built on.
    let mut poisoned_by: Option<MetadataLogError> = None;
    loop {
        let first = match waiting.take() {
            Some(submission) => submission,
            None => match queue.recv().await {
                Some(submission) => submission,
                None => return,
            },
        };
        if first.generation < valid_from.load(Ordering::Acquire) {
            let _ = first.done.send(stale(poisoned_by.as_ref()));
            continue;
        }
        let generation = first.generation;
        let mut records = first.batch.records;
        let mut waiters = vec![first.done];
        // Sized only once another batch is queued: measuring a lone 1,000-partition creation
        // costs as much as encoding it, on the path of its answer.
        let mut bytes = None;
        while let Ok(next) = queue.try_recv() {
            let group_bytes = *bytes.get_or_insert_with(|| encoded_bytes(&records));
            let next_bytes = encoded_bytes(&next.batch.records);
            if next.generation != generation
                || records.len() + next.batch.records.len() > MAX_GROUP_RECORDS
                || group_bytes.saturating_add(next_bytes) > MAX_GROUP_BYTES
            {
                waiting = Some(next);
                break;
            }
            bytes = Some(group_bytes.saturating_add(next_bytes));
            records.extend(next.batch.records);
            waiters.push(next.done);
        }
        let outcome = match log.submit(MetadataBatch { records }).await {
            Ok(commit) => commit.await,
            Err(error) => Err(error),
        };
        if let Err(error) = share(&outcome) {
            valid_from.fetch_max(generation + 1, Ordering::AcqRel);
            poisoned_by = Some(error);
        }
        for waiter in waiters {
            let _ = waiter.send(share(&outcome));
        }
    }
}

/// The outcome of a batch validated on a working image that was discarded: the error of the
/// write that poisoned it, or NOT_CONTROLLER (a new term began).
fn stale(poisoned_by: Option<&MetadataLogError>) -> Result<MetadataLogId, MetadataLogError> {
    Err(match poisoned_by {
        Some(MetadataLogError::NotLeader { leader_id }) => MetadataLogError::NotLeader {
            leader_id: *leader_id,
        },
        Some(error) => {
            MetadataLogError::Raft(format!("validated on top of a write that failed: {error}"))
        }
        None => MetadataLogError::NotLeader { leader_id: None },
    })
}

/// The outcome for each waiter of a group: the same log id, or an error of the same meaning.
fn share(
    outcome: &Result<MetadataLogId, MetadataLogError>,
) -> Result<MetadataLogId, MetadataLogError> {
    match outcome {
        Ok(log_id) => Ok(*log_id),
        Err(MetadataLogError::NotLeader { leader_id }) => Err(MetadataLogError::NotLeader {
            leader_id: *leader_id,
        }),
        Err(error) => Err(MetadataLogError::Raft(error.to_string())),
    }
}
