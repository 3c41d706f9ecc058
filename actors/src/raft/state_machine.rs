//! The raft state machine: forwards committed batches to the caller's [`MetadataApplier`], which
//! owns the image, and keeps snapshots of that image in the metadata log dir.
//!
//! Nothing of the image is kept here. What this type owns is the raft bookkeeping openraft
//! needs (last applied log id, last membership) and the snapshot file. The state machine is
//! persisted through snapshots: applying does not write to disk, and on open the latest
//! snapshot is handed to the applier, after which openraft re-applies the committed log after
//! it.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::future::BoxFuture;
use gregor_publishers::records::{MetadataBatch, MetadataRecord};
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    EntryPayload, LogId, OptionalSend, RaftSnapshotBuilder, SnapshotMeta, StorageIOError,
    StoredMembership,
};

use super::error::{ApplyError, MetadataLogError};
use super::snapshot::{self, StoredSnapshot};
use super::types::{Entry, StorageError, TypeConfig, VoterNode};

/// Produces the records of an image captured earlier (see [`MetadataApplier::snapshot_records`]).
pub type SnapshotRecords = Box<dyn FnOnce() -> Vec<MetadataRecord> + Send + Sync + 'static>;

/// The image side of the metadata log, provided by the node (the metadata loader).
pub trait MetadataApplier: Send + Sync + 'static {
    /// Apply committed batches (in log order) to the image; resolves once the new image is
    /// published.
    ///
    /// `batches` holds only entries that carry a batch. Entries without one (the blank entry a
    /// new leader writes, membership changes) are not passed, but they do move `last_applied`:
    /// `last_applied` is the log id of the last entry of this step whatever its kind, so it may
    /// be later than the last batch, and `batches` may be empty. An error stops the metadata
    /// log (the image must never skip an entry).
    fn apply(
        &self,
        batches: Vec<(LogId<u64>, MetadataBatch)>,
        last_applied: LogId<u64>,
    ) -> BoxFuture<'static, Result<(), ApplyError>>;

    /// The current image as records, for building a snapshot. Called between applies, so it
    /// must capture the image at once (O(1)); the records themselves are produced later by
    /// calling the result on a blocking thread, since listing 10^6 partitions takes a while.
    fn snapshot_records(&self) -> SnapshotRecords;

    /// Replace the image with one built from these snapshot records.
    fn install_snapshot(
        &self,
        records: Vec<MetadataRecord>,
        last_applied: LogId<u64>,
    ) -> BoxFuture<'static, Result<(), ApplyError>>;
}

/// The state machine openraft drives.
pub struct StateMachine {
    applier: Arc<dyn MetadataApplier>,
    last_applied: Option<LogId<u64>>,
    membership: StoredMembership<u64, VoterNode>,
    snapshots: Arc<SnapshotStore>,
}

/// The snapshot file and the metadata of the snapshot it holds. The lock serialises snapshot
/// writes (a build runs in its own task, concurrently with applies and installs).
struct SnapshotStore {
    dir: PathBuf,
    current: tokio::sync::Mutex<Option<SnapshotMeta<u64, VoterNode>>>,
}

impl SnapshotStore {
    /// Saves `snapshot` as the current one unless a later one is already saved, and gives it
    /// back (its data can be 100 MB: it is moved, never copied).
    async fn save(&self, snapshot: StoredSnapshot) -> Result<StoredSnapshot, MetadataLogError> {
        let mut current = self.current.lock().await;
        if let Some(existing) = current.as_ref() {
            if existing.last_log_id > snapshot.meta.last_log_id {
                return Ok(snapshot);
            }
        }
        let dir = self.dir.clone();
        let snapshot = run_blocking(&self.dir, move || {
            snapshot::write(&dir, &snapshot).map(|()| snapshot)
        })
        .await?;
        *current = Some(snapshot.meta.clone());
        Ok(snapshot)
    }

    async fn load_current(&self) -> Result<Option<StoredSnapshot>, MetadataLogError> {
        let current = self.current.lock().await;
        if current.is_none() {
            return Ok(None);
        }
        let dir = self.dir.clone();
        run_blocking(&self.dir, move || snapshot::read(&dir)).await
    }
}

async fn run_blocking<T, F>(path: &Path, f: F) -> Result<T, MetadataLogError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, MetadataLogError> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result,
        Err(e) => Err(MetadataLogError::storage(
            path,
            format!("snapshot task failed: {e}"),
        )),
    }
}

/// Decodes a snapshot's records on a blocking thread (10^6 partitions take a while), handing
/// the snapshot back.
async fn decode_blocking(
    source: PathBuf,
    stored: StoredSnapshot,
) -> Result<(Vec<MetadataRecord>, StoredSnapshot), MetadataLogError> {
    let path = source.clone();
    run_blocking(&path, move || {
        snapshot::decode_records(&source, &stored.data).map(|records| (records, stored))
    })
    .await
}

impl StateMachine {
    /// Opens the state machine over `dir`: if a snapshot is stored there, it is read and handed
    /// to `applier.install_snapshot` before this returns, so the image starts at the snapshot.
    pub async fn open(
        dir: &Path,
        applier: Arc<dyn MetadataApplier>,
    ) -> Result<Self, MetadataLogError> {
        let read_dir = dir.to_path_buf();
        let stored = run_blocking(dir, move || snapshot::read(&read_dir)).await?;
        let mut sm = StateMachine {
            applier,
            last_applied: None,
            membership: StoredMembership::default(),
            snapshots: Arc::new(SnapshotStore {
                dir: dir.to_path_buf(),
                current: tokio::sync::Mutex::new(None),
            }),
        };
        if let Some(stored) = stored {
            let path = snapshot::snapshot_path(dir);
            let (records, stored) = decode_blocking(path.clone(), stored).await?;
            sm.install(&path, &stored.meta, records).await?;
            *sm.snapshots.current.lock().await = Some(stored.meta);
        }
        Ok(sm)
    }

    /// The last applied log id (that of the snapshot right after open).
    pub fn last_applied(&self) -> Option<LogId<u64>> {
        self.last_applied
    }

    /// Replaces the image with snapshot records and takes the snapshot's raft position.
    async fn install(
        &mut self,
        source: &Path,
        meta: &SnapshotMeta<u64, VoterNode>,
        records: Vec<MetadataRecord>,
    ) -> Result<(), MetadataLogError> {
        let Some(last) = meta.last_log_id else {
            return Err(MetadataLogError::corrupt(
                source,
                "snapshot has no last log id, so it cannot position the image",
            ));
        };
        self.applier
            .install_snapshot(records, last)
            .await
            .map_err(MetadataLogError::Apply)?;
        self.last_applied = Some(last);
        self.membership = meta.last_membership.clone();
        Ok(())
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<u64>>, StoredMembership<u64, VoterNode>), StorageError> {
        Ok((self.last_applied, self.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<()>, StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let mut batches = Vec::new();
        let mut count = 0;
        let mut last = None;
        for entry in entries {
            count += 1;
            last = Some(entry.log_id);
            match entry.payload {
                EntryPayload::Blank => {}
                EntryPayload::Normal(batch) => batches.push((entry.log_id, batch)),
                EntryPayload::Membership(membership) => {
                    self.membership = StoredMembership::new(Some(entry.log_id), membership);
                }
            }
        }
        if let Some(last) = last {
            self.applier
                .apply(batches, last)
                .await
                .map_err(|e| StorageIOError::apply(last, openraft::AnyError::new(&e)))?;
            self.last_applied = Some(last);
        }
        Ok(vec![(); count])
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        // Taken here, on the state machine task between applies, so the records match
        // `last_applied` exactly; the file is written later by the builder's own task.
        let meta = SnapshotMeta {
            last_log_id: self.last_applied,
            last_membership: self.membership.clone(),
            snapshot_id: snapshot_id(self.last_applied),
        };
        SnapshotBuilder {
            meta,
            records: Some(self.applier.snapshot_records()),
            snapshots: self.snapshots.clone(),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<u64, VoterNode>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let signature = Some(meta.signature());
        let write_err = |e: MetadataLogError| {
            StorageError::from(StorageIOError::write_snapshot(
                signature.clone(),
                e.into_any(),
            ))
        };
        let source = PathBuf::from("<snapshot received from the leader>");
        let received = StoredSnapshot {
            meta: meta.clone(),
            data: snapshot.into_inner(),
        };
        let (records, received) = decode_blocking(source.clone(), received)
            .await
            .map_err(write_err)?;
        self.install(&source, meta, records)
            .await
            .map_err(write_err)?;
        let bytes = received.data.len();
        self.snapshots.save(received).await.map_err(write_err)?;
        tracing::info!(
            snapshot = %meta.snapshot_id,
            last_log_id = ?meta.last_log_id,
            bytes,
            "installed a metadata snapshot received from the leader"
        );
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<TypeConfig>>, StorageError> {
        let stored = self
            .snapshots
            .load_current()
            .await
            .map_err(|e| StorageIOError::read_snapshot(None, e.into_any()))?;
        Ok(stored.map(|s| Snapshot {
            meta: s.meta,
            snapshot: Box::new(Cursor::new(s.data)),
        }))
    }
}

fn snapshot_id(last_applied: Option<LogId<u64>>) -> String {
    match last_applied {
        Some(id) => format!("{}-{}", id.leader_id.term, id.index),
        None => "empty".to_string(),
    }
}

/// Writes one snapshot: the image captured when it was created, plus its raft position.
pub struct SnapshotBuilder {
    meta: SnapshotMeta<u64, VoterNode>,
    records: Option<SnapshotRecords>,
    snapshots: Arc<SnapshotStore>,
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> Result<Snapshot<TypeConfig>, StorageError> {
        let meta = self.meta.clone();
        let write_err = |e: MetadataLogError| {
            StorageError::from(StorageIOError::write_snapshot(
                Some(meta.signature()),
                e.into_any(),
            ))
        };
        let produce = self.records.take().ok_or_else(|| {
            write_err(MetadataLogError::storage(
                &self.snapshots.dir,
                "a snapshot builder was asked to build twice",
            ))
        })?;
        tracing::info!(snapshot = %meta.snapshot_id, "building a metadata snapshot");
        // Listing and encoding the image runs on a blocking thread: at 10^6 partitions it
        // takes seconds, which must not stall raft or the connections on the tokio workers.
        let (data, records) = run_blocking(&self.snapshots.dir, move || {
            let records = produce();
            Ok((snapshot::encode_records(&records), records.len()))
        })
        .await
        .map_err(write_err)?;
        let saved = self
            .snapshots
            .save(StoredSnapshot {
                meta: meta.clone(),
                data,
            })
            .await
            .map_err(write_err)?;
        tracing::info!(snapshot = %meta.snapshot_id, records, bytes = saved.data.len(), "metadata snapshot written");
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(saved.data)),
        })
    }
}
