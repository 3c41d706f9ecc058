//! The durable raft log: entries, vote, committed and last purged log ids, in one redb file.
//!
//! redb gives crash-safe transactions: a commit with `Durability::Immediate` has been fsynced
//! when it returns, and a torn write after a crash rolls back to the last complete commit. So
//! every mutation here is one write transaction, and openraft is told an append is durable only
//! after its commit returned. redb is blocking, so each access runs on tokio's blocking pool;
//! openraft serialises writes by taking `&mut self`. The newest entries are also kept in memory
//! ([`RecentEntries`]): applying a committed entry reads it from there, not from the file.

use std::collections::VecDeque;
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{LogId, OptionalSend, RaftLogReader, StorageIOError, Vote};
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::error::MetadataLogError;
use super::types::{Entry, StorageError, TypeConfig};

/// Name of the log file inside the metadata log dir.
/// Page cache of the log database (see `Inner::open`).
const LOG_CACHE_BYTES: usize = 16 * 1024 * 1024;

pub const LOG_FILE_NAME: &str = "raft-log.redb";

/// Log entries by index, each the postcard encoding of an `openraft::Entry`.
const LOG: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("log");
/// Vote, committed, last purged log id and the format version, postcard-encoded.
const META: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("meta");

const KEY_FORMAT: &str = "format";
const KEY_VOTE: &str = "vote";
const KEY_COMMITTED: &str = "committed";
const KEY_LAST_PURGED: &str = "last_purged";

/// Layout version of this file; bump it when the encoding of a table changes.
const FORMAT_VERSION: u32 = 1;

/// Encoded bytes of the newest entries kept in memory (see [`RecentEntries`]).
const RECENT_ENTRIES_BYTES: usize = 4 * 1024 * 1024;

/// The raft log of the metadata log. Cloning gives another handle on the same file (openraft
/// uses clones as log readers for replication).
#[derive(Clone)]
pub struct LogStore {
    inner: Arc<Inner>,
}

struct Inner {
    db: Database,
    path: PathBuf,
    recent: Mutex<RecentEntries>,
}

/// The newest entries of the log, as appended, so that applying them (and sending them to
/// followers) reads memory: reading them back from the file took a blocking-pool hop, a
/// database read and a decode on the path of every committed change (0.4 ms for a
/// 1,000-partition topic). Invariant: the entries are consecutive and, when there are any,
/// the last one is the log's last entry (every append adds to it, truncation and purge cut it
/// as they cut the file).
#[derive(Default)]
struct RecentEntries {
    entries: VecDeque<(Entry, usize)>,
    bytes: usize,
}

impl RecentEntries {
    /// Adds entries just made durable, dropping the oldest beyond [`RECENT_ENTRIES_BYTES`]
    /// (the newest append is kept whole).
    fn appended(&mut self, appended: Vec<(Entry, usize)>) {
        let Some((first, _)) = appended.first() else {
            return;
        };
        if self.next_index() != Some(first.log_id.index) {
            self.clear();
        }
        let kept = appended.len();
        for (entry, bytes) in appended {
            self.bytes += bytes;
            self.entries.push_back((entry, bytes));
        }
        while self.bytes > RECENT_ENTRIES_BYTES && self.entries.len() > kept {
            self.pop_front();
        }
    }

    fn next_index(&self) -> Option<u64> {
        self.entries.back().map(|(entry, _)| entry.log_id.index + 1)
    }

    fn first_index(&self) -> Option<u64> {
        self.entries.front().map(|(entry, _)| entry.log_id.index)
    }

    fn pop_front(&mut self) {
        if let Some((_, bytes)) = self.entries.pop_front() {
            self.bytes -= bytes;
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    /// Drops the entries from `index` on.
    fn truncate(&mut self, index: u64) {
        while self.next_index().is_some_and(|next| next > index) {
            if let Some((_, bytes)) = self.entries.pop_back() {
                self.bytes -= bytes;
            }
        }
    }

    /// Drops the entries up to `index`.
    fn purge(&mut self, index: u64) {
        while self.first_index().is_some_and(|first| first <= index) {
            self.pop_front();
        }
    }

    /// The entries of `[start, end)` if all of them are here.
    fn get(&self, start: Bound<u64>, end: Bound<u64>) -> Option<Vec<Entry>> {
        let (first, next) = (self.first_index()?, self.next_index()?);
        let start = match start {
            Bound::Included(index) => index,
            Bound::Excluded(index) => index.checked_add(1)?,
            Bound::Unbounded => 0,
        };
        let end = match end {
            Bound::Included(index) => index.checked_add(1)?,
            Bound::Excluded(index) => index,
            Bound::Unbounded => next,
        };
        if start < first || end > next {
            return None;
        }
        let from = usize::try_from(start - first).ok()?;
        let to = usize::try_from(end.max(start) - first).ok()?;
        Some(
            self.entries
                .range(from..to)
                .map(|(entry, _)| entry.clone())
                .collect(),
        )
    }
}

impl LogStore {
    /// Opens (or creates) the log file in `dir`, which must exist.
    pub async fn open(dir: &Path) -> Result<Self, MetadataLogError> {
        let path = dir.join(LOG_FILE_NAME);
        let open_path = path.clone();
        let inner = blocking(&path, move || Inner::open(open_path)).await?;
        Ok(LogStore {
            inner: Arc::new(inner),
        })
    }

    /// Path of the log file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs `f` on the blocking pool with this store.
    async fn run<T, F>(&self, f: F) -> Result<T, MetadataLogError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, MetadataLogError> + Send + 'static,
    {
        let inner = self.inner.clone();
        blocking(&self.inner.path, move || f(&inner)).await
    }

    fn recent(&self) -> MutexGuard<'_, RecentEntries> {
        self.inner
            .recent
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// The last purged log id, read straight from the file.
    pub(crate) async fn last_purged(&self) -> Result<Option<LogId<u64>>, MetadataLogError> {
        self.run(|inner| inner.read_meta(KEY_LAST_PURGED)).await
    }
}

/// Runs blocking file work off the async threads; a panic or cancellation there becomes an error.
async fn blocking<T, F>(path: &Path, f: F) -> Result<T, MetadataLogError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, MetadataLogError> + Send + 'static,
{
    match tokio::task::spawn_blocking(f).await {
        Ok(result) => result,
        Err(e) => Err(MetadataLogError::storage(
            path,
            format!("storage task failed: {e}"),
        )),
    }
}

impl Inner {
    fn open(path: PathBuf) -> Result<Self, MetadataLogError> {
        // redb caches up to 1 GiB of pages by default, and an append-mostly log keeps feeding
        // the cache new pages: the node's memory then grew by hundreds of MiB under steady
        // churn. Entries are read back only on restart or by a lagging follower, so a small
        // cache costs nothing measurable.
        let db = Database::builder()
            .set_cache_size(LOG_CACHE_BYTES)
            .create(&path)
            .map_err(|e| {
                match e {
            redb::DatabaseError::Storage(redb::StorageError::Corrupted(detail)) => {
                MetadataLogError::corrupt(&path, detail)
            }
            // redb reports a file that is not a redb database (bad magic) as invalid data.
            redb::DatabaseError::Storage(redb::StorageError::Io(e))
                if e.kind() == std::io::ErrorKind::InvalidData =>
            {
                MetadataLogError::corrupt(&path, e)
            }
            redb::DatabaseError::DatabaseAlreadyOpen => MetadataLogError::storage(
                &path,
                "the log is already open (another Gregor process or instance uses this log dir)",
            ),
            other => MetadataLogError::storage(&path, other),
        }
            })?;
        let inner = Inner {
            db,
            path,
            recent: Mutex::default(),
        };
        // Create the tables and stamp (or check) the format version.
        let format: Option<u32> = inner.read_meta_if_exists(KEY_FORMAT)?;
        match format {
            Some(FORMAT_VERSION) => {}
            Some(other) => {
                return Err(MetadataLogError::corrupt(
                    &inner.path,
                    format!("log format version {other} is not supported by this build (supports {FORMAT_VERSION})"),
                ))
            }
            None => inner.write(Durability::Immediate, |txn| {
                txn.open_table(LOG)?;
                let mut meta = txn.open_table(META)?;
                meta.insert(KEY_FORMAT, encode(&FORMAT_VERSION).as_slice())?;
                Ok(())
            })?,
        }
        Ok(inner)
    }

    fn err(&self, e: impl std::fmt::Display) -> MetadataLogError {
        MetadataLogError::storage(&self.path, e)
    }

    /// One write transaction; with `Durability::Immediate` it is fsynced when this returns.
    fn write<F>(&self, durability: Durability, f: F) -> Result<(), MetadataLogError>
    where
        F: FnOnce(&redb::WriteTransaction) -> Result<(), redb::Error>,
    {
        let mut txn = self.db.begin_write().map_err(|e| self.err(e))?;
        txn.set_durability(durability).map_err(|e| self.err(e))?;
        f(&txn).map_err(|e| self.err(e))?;
        txn.commit().map_err(|e| self.err(e))
    }

    /// Reads a meta value from a file whose tables may not exist yet.
    fn read_meta_if_exists<T: DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<T>, MetadataLogError> {
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = match txn.open_table(META) {
            Ok(table) => table,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(None),
            Err(e) => return Err(self.err(e)),
        };
        match table.get(key).map_err(|e| self.err(e))? {
            Some(value) => decode(&self.path, &key, value.value()).map(Some),
            None => Ok(None),
        }
    }

    fn read_meta<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, MetadataLogError> {
        self.read_meta_if_exists(key)
    }

    fn write_meta<T: Serialize>(
        &self,
        key: &str,
        value: &T,
        durability: Durability,
    ) -> Result<(), MetadataLogError> {
        let bytes = encode(value);
        self.write(durability, |txn| {
            txn.open_table(META)?.insert(key, bytes.as_slice())?;
            Ok(())
        })
    }

    fn last_entry_log_id(&self) -> Result<Option<LogId<u64>>, MetadataLogError> {
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = txn.open_table(LOG).map_err(|e| self.err(e))?;
        let last = match table.last().map_err(|e| self.err(e))? {
            Some((index, value)) => {
                let entry: Entry = decode(&self.path, &index.value(), value.value())?;
                Some(entry.log_id)
            }
            None => None,
        };
        Ok(last)
    }

    fn entries(&self, start: Bound<u64>, end: Bound<u64>) -> Result<Vec<Entry>, MetadataLogError> {
        let txn = self.db.begin_read().map_err(|e| self.err(e))?;
        let table = txn.open_table(LOG).map_err(|e| self.err(e))?;
        let range = table.range::<u64>((start, end)).map_err(|e| self.err(e))?;
        let mut entries = Vec::new();
        for item in range {
            let (index, value) = item.map_err(|e| self.err(e))?;
            entries.push(decode(&self.path, &index.value(), value.value())?);
        }
        Ok(entries)
    }
}

fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // postcard only fails on types serde cannot describe (maps with non-string keys are fine);
    // raft entries, votes and log ids serialize without error, so an empty value never occurs.
    postcard::to_allocvec(value).unwrap_or_default()
}

fn decode<T: DeserializeOwned>(
    path: &Path,
    key: &dyn Debug,
    bytes: &[u8],
) -> Result<T, MetadataLogError> {
    postcard::from_bytes(bytes).map_err(|e| {
        MetadataLogError::corrupt(path, format!("value at key {key:?} does not decode: {e}"))
    })
}

fn read_err(e: MetadataLogError) -> StorageError {
    StorageIOError::read_logs(e.into_any()).into()
}

fn write_err(e: MetadataLogError) -> StorageError {
    StorageIOError::write_logs(e.into_any()).into()
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let start = range.start_bound().cloned();
        let end = range.end_bound().cloned();
        if let Some(entries) = self.recent().get(start, end) {
            return Ok(entries);
        }
        self.run(move |inner| inner.entries(start, end))
            .await
            .map_err(read_err)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogStore;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let (last_purged_log_id, last) = self
            .run(|inner| {
                let purged: Option<LogId<u64>> = inner.read_meta(KEY_LAST_PURGED)?;
                Ok((purged, inner.last_entry_log_id()?))
            })
            .await
            .map_err(read_err)?;
        Ok(LogState {
            last_purged_log_id,
            last_log_id: last.or(last_purged_log_id),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<u64>) -> Result<(), StorageError> {
        let vote = *vote;
        self.run(move |inner| inner.write_meta(KEY_VOTE, &vote, Durability::Immediate))
            .await
            .map_err(|e| StorageIOError::write_vote(e.into_any()).into())
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<u64>>, StorageError> {
        self.run(|inner| inner.read_meta(KEY_VOTE))
            .await
            .map_err(|e| StorageIOError::read_vote(e.into_any()).into())
    }

    async fn save_committed(&mut self, committed: Option<LogId<u64>>) -> Result<(), StorageError> {
        // Not fsynced on its own: a committed id lost in a crash is only older, which openraft
        // allows (it re-learns it); the next fsynced append or vote makes it durable too.
        self.run(move |inner| inner.write_meta(KEY_COMMITTED, &committed, Durability::None))
            .await
            .map_err(write_err)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<u64>>, StorageError> {
        self.run(|inner| {
            Ok(inner
                .read_meta::<Option<LogId<u64>>>(KEY_COMMITTED)?
                .flatten())
        })
        .await
        .map_err(read_err)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let entries: Vec<Entry> = entries.into_iter().collect();
        let encoded: Vec<(u64, Vec<u8>)> = entries
            .iter()
            .map(|entry| (entry.log_id.index, encode(entry)))
            .collect();
        let sizes: Vec<usize> = encoded.iter().map(|(_, bytes)| bytes.len()).collect();
        let result = self
            .run(move |inner| {
                inner.write(Durability::Immediate, |txn| {
                    let mut log = txn.open_table(LOG)?;
                    for (index, bytes) in &encoded {
                        log.insert(*index, bytes.as_slice())?;
                    }
                    Ok(())
                })
            })
            .await;
        // The commit above returned, so the entries are fsynced: only now tell openraft.
        match result {
            Ok(()) => {
                self.recent()
                    .appended(entries.into_iter().zip(sizes).collect());
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                Err(write_err(e))
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId<u64>) -> Result<(), StorageError> {
        self.recent().truncate(log_id.index);
        self.run(move |inner| {
            inner.write(Durability::Immediate, |txn| {
                txn.open_table(LOG)?
                    .retain_in(log_id.index.., |_, _| false)?;
                Ok(())
            })
        })
        .await
        .map_err(write_err)
    }

    async fn purge(&mut self, log_id: LogId<u64>) -> Result<(), StorageError> {
        let purged = encode(&log_id);
        self.recent().purge(log_id.index);
        self.run(move |inner| {
            inner.write(Durability::Immediate, |txn| {
                txn.open_table(META)?
                    .insert(KEY_LAST_PURGED, purged.as_slice())?;
                txn.open_table(LOG)?
                    .retain_in(..=log_id.index, |_, _| false)?;
                Ok(())
            })
        })
        .await
        .map_err(write_err)
    }
}

#[cfg(test)]
mod tests {
    use openraft::{CommittedLeaderId, EntryPayload};

    use super::*;

    fn entry(index: u64) -> Entry {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 0), index),
            payload: EntryPayload::Blank,
        }
    }

    /// `entries` appended with `bytes` each.
    fn appended(recent: &mut RecentEntries, entries: std::ops::RangeInclusive<u64>, bytes: usize) {
        recent.appended(entries.map(|index| (entry(index), bytes)).collect());
    }

    fn indexes(entries: Option<Vec<Entry>>) -> Option<Vec<u64>> {
        entries.map(|entries| entries.iter().map(|e| e.log_id.index).collect())
    }

    #[test]
    fn ranges_are_served_only_when_every_entry_is_kept() {
        let mut recent = RecentEntries::default();
        assert_eq!(
            indexes(recent.get(Bound::Included(1), Bound::Unbounded)),
            None
        );
        appended(&mut recent, 5..=9, 10);
        let get = |start, end| indexes(recent.get(start, end));
        assert_eq!(
            get(Bound::Included(5), Bound::Excluded(8)),
            Some(vec![5, 6, 7])
        );
        assert_eq!(
            get(Bound::Included(7), Bound::Unbounded),
            Some(vec![7, 8, 9])
        );
        assert_eq!(get(Bound::Excluded(8), Bound::Included(9)), Some(vec![9]));
        assert_eq!(get(Bound::Included(9), Bound::Excluded(9)), Some(vec![]));
        // Below the first kept entry, past the last one, or from the log's start: the file.
        assert_eq!(get(Bound::Included(4), Bound::Excluded(8)), None);
        assert_eq!(get(Bound::Included(8), Bound::Excluded(11)), None);
        assert_eq!(get(Bound::Unbounded, Bound::Unbounded), None);
    }

    #[test]
    fn the_oldest_entries_leave_first_and_the_newest_append_stays_whole() {
        let mut recent = RecentEntries::default();
        let quarter = RECENT_ENTRIES_BYTES / 4;
        appended(&mut recent, 1..=4, quarter);
        assert_eq!(
            (recent.first_index(), recent.bytes),
            (Some(1), RECENT_ENTRIES_BYTES)
        );
        appended(&mut recent, 5..=5, quarter);
        assert_eq!(
            (recent.first_index(), recent.next_index()),
            (Some(2), Some(6))
        );
        // One append larger than the budget is kept on its own.
        appended(&mut recent, 6..=7, RECENT_ENTRIES_BYTES);
        assert_eq!(
            (recent.first_index(), recent.next_index()),
            (Some(6), Some(8))
        );
        assert_eq!(recent.bytes, 2 * RECENT_ENTRIES_BYTES);
    }

    #[test]
    fn truncation_purge_and_gaps_keep_the_entries_consecutive() {
        let mut recent = RecentEntries::default();
        appended(&mut recent, 1..=10, 1);
        recent.truncate(8);
        assert_eq!((recent.next_index(), recent.bytes), (Some(8), 7));
        recent.truncate(20);
        assert_eq!(recent.next_index(), Some(8));
        recent.purge(3);
        assert_eq!((recent.first_index(), recent.bytes), (Some(4), 4));
        // Appends that do not follow the kept entries (after a snapshot) replace them.
        appended(&mut recent, 30..=31, 1);
        assert_eq!(
            (recent.first_index(), recent.next_index()),
            (Some(30), Some(32))
        );
        recent.truncate(30);
        assert_eq!((recent.first_index(), recent.bytes), (None, 0));
        appended(&mut recent, 30..=30, 1);
        assert_eq!(
            indexes(recent.get(Bound::Included(30), Bound::Unbounded)),
            Some(vec![30])
        );
    }
}
