//! A log directory (`log.dirs` entry): its partition logs, per-dir checkpoints, the clean-shutdown marker
//! and the offline flag.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::checkpoint::{self, TopicPartition};
use crate::config::LogConfig;
use crate::error::{LogError, Result};
use crate::files::FileCache;
use crate::log::{LogCheckpoints, PartitionLog};

/// Kafka's clean-shutdown marker, written last on a clean shutdown and removed once logs are loaded.
pub const CLEAN_SHUTDOWN_FILE: &str = ".kafka_cleanshutdown";
/// Suffix of a partition directory awaiting deletion.
pub const DELETE_DIR_SUFFIX: &str = "-delete";
/// Suffix of a stray partition directory (a log the metadata does not place here), moved aside
/// and kept for the operator, never deleted (Kafka's `-stray`).
pub const STRAY_DIR_SUFFIX: &str = "-stray";

/// Told once, with the dir's path, when a log dir goes offline.
pub type OfflineListener = Arc<dyn Fn(&Path) + Send + Sync>;

/// Told how long each fsync of a segment's files took (Kafka's `LogFlushStats`).
pub type FlushListener = Arc<dyn Fn(std::time::Duration) + Send + Sync>;

/// State shared between a log dir and its logs.
pub struct LogDirShared {
    pub(crate) path: PathBuf,
    pub(crate) files: Arc<FileCache>,
    offline: AtomicBool,
    offline_listener: std::sync::OnceLock<OfflineListener>,
    flush_listener: std::sync::OnceLock<FlushListener>,
}

impl std::fmt::Debug for LogDirShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogDirShared")
            .field("path", &self.path)
            .field("offline", &self.offline)
            .finish_non_exhaustive()
    }
}

impl LogDirShared {
    fn new(path: PathBuf, files: Arc<FileCache>) -> Self {
        LogDirShared {
            path,
            files,
            offline: AtomicBool::new(false),
            offline_listener: std::sync::OnceLock::new(),
            flush_listener: std::sync::OnceLock::new(),
        }
    }

    /// Runs `flush`, the fsync of one segment's files, and tells the flush listener how long it
    /// took (failed or not, as Kafka's timer).
    pub(crate) fn timed_flush<T>(&self, flush: impl FnOnce() -> T) -> T {
        let started = std::time::Instant::now();
        let result = flush();
        if let Some(listener) = self.flush_listener.get() {
            listener(started.elapsed());
        }
        result
    }

    pub(crate) fn mark_offline(&self, cause: &LogError) {
        if !self.offline.swap(true, Ordering::SeqCst) {
            tracing::error!(log_dir = %self.path.display(), error = %cause, "marking the log dir offline after a storage error");
            if let Some(listener) = self.offline_listener.get() {
                listener(&self.path);
            }
        }
    }

    pub(crate) fn is_offline(&self) -> bool {
        self.offline.load(Ordering::SeqCst)
    }

    /// fsyncs the log dir's directory, so the partition directories made, renamed or removed
    /// in it are durable (on a journaled file system this commits every metadata change queued
    /// so far, the files made inside those directories included). A failure marks the dir
    /// offline.
    pub fn sync_directory(&self) -> Result<()> {
        self.sync_with(std::fs::File::sync_all)
    }

    /// Syncs the whole file system holding the log dir (`syncfs`): every file and directory
    /// entry written so far, other programs' included. It reports a writeback error of any file
    /// since it was last seen. A failure marks the dir offline.
    pub(crate) fn sync_file_system(&self) -> Result<()> {
        self.sync_with(|dir| Ok(rustix::fs::syncfs(dir)?))
    }

    fn sync_with(&self, sync: impl FnOnce(&std::fs::File) -> std::io::Result<()>) -> Result<()> {
        let synced = std::fs::File::open(&self.path)
            .and_then(|dir| sync(&dir))
            .map_err(|e| LogError::io("sync", &self.path, e));
        if let Err(error) = &synced {
            self.mark_offline(error);
        }
        synced
    }
}

/// A partition's log ready to be opened, from [`LogDir::opener`].
#[derive(Debug)]
pub struct LogOpener {
    shared: Arc<LogDirShared>,
    tp: TopicPartition,
    checkpoints: LogCheckpoints,
}

impl LogOpener {
    /// Opens or creates the log (blocking file I/O); a storage error takes the dir offline,
    /// and the opens prepared before that then fail at once with [`LogError::LogDirOffline`].
    pub fn open(
        self,
        topic_id: Option<uuid::Uuid>,
        config: impl Into<Arc<LogConfig>>,
        now_ms: i64,
    ) -> Result<PartitionLog> {
        if self.shared.is_offline() {
            return Err(LogError::LogDirOffline(self.shared.path.clone()));
        }
        let shared = Arc::clone(&self.shared);
        let result = PartitionLog::open(
            self.shared,
            self.tp,
            topic_id,
            config.into(),
            self.checkpoints,
            now_ms,
        );
        if let Err(e) = &result {
            if e.is_storage_error() {
                shared.mark_offline(e);
            }
        }
        result
    }
}

/// `<topic>-<partition>.<uuid><suffix>`, the topic cut short so the name stays within the 255
/// bytes a file name may have (Kafka's `logDirNameWithSuffixCappedLength`): a 249-character
/// topic would otherwise fail to be renamed, hence to be deleted.
fn renamed_dir_name(tp: &TopicPartition, suffix: &str) -> String {
    let tail = format!(
        "-{}.{}{suffix}",
        tp.partition,
        uuid::Uuid::new_v4().simple()
    );
    // Topic names are ASCII, so any byte is a character boundary.
    let kept = tp.topic.len().min(255usize.saturating_sub(tail.len()));
    format!("{}{tail}", tp.topic.get(..kept).unwrap_or(&tp.topic))
}

/// An offset checkpoint that only saves work, read as Kafka's `LogManager.loadLogs` reads
/// the recovery points and log start offsets: a file that cannot be read is reported and
/// treated as empty, which costs a full recovery, not the dir and every log in it.
fn offsets_or_reset(path: &Path, consequence: &str) -> BTreeMap<TopicPartition, i64> {
    checkpoint::read_offsets(path).unwrap_or_else(|error| {
        tracing::warn!(checkpoint = %path.display(), %error, "{consequence}");
        BTreeMap::new()
    })
}

/// What [`LogDir::sweep_leftovers`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// `-delete` directories removed.
    pub removed: usize,
    /// `-stray` directories, kept.
    pub strays: Vec<PathBuf>,
}

/// One log directory.
#[derive(Debug)]
pub struct LogDir {
    shared: Arc<LogDirShared>,
    recovery_points: BTreeMap<TopicPartition, i64>,
    log_start_offsets: BTreeMap<TopicPartition, i64>,
    cleaner_offsets: BTreeMap<TopicPartition, i64>,
    high_watermarks: BTreeMap<TopicPartition, i64>,
    /// Whether the three log checkpoints, or `replication-offset-checkpoint`, differ from the
    /// files: an unchanged file is not written again (with 1,000,000 partitions each is ~50 MB,
    /// and the high watermarks' is due every 5 s). True at first, so the files exist.
    checkpoints_changed: bool,
    high_watermarks_changed: bool,
    clean_shutdown: bool,
}

impl LogDir {
    /// Opens (creating) the directory, reads its checkpoints and consumes the clean-shutdown marker.
    pub fn open(path: impl Into<PathBuf>, files: Arc<FileCache>) -> Result<Self> {
        let path = path.into();
        std::fs::create_dir_all(&path).map_err(|e| LogError::io("create", &path, e))?;
        let marker = path.join(CLEAN_SHUTDOWN_FILE);
        let clean_shutdown = marker.exists();
        let dir = LogDir {
            recovery_points: offsets_or_reset(
                &path.join(checkpoint::RECOVERY_POINT_CHECKPOINT),
                "resetting the recovery points to 0: every log of this dir is recovered whole",
            ),
            log_start_offsets: offsets_or_reset(
                &path.join(checkpoint::LOG_START_OFFSET_CHECKPOINT),
                "resetting the log start offsets to the base offset of each log's first segment",
            ),
            cleaner_offsets: checkpoint::read_offsets(
                &path.join(checkpoint::CLEANER_OFFSET_CHECKPOINT),
            )?,
            high_watermarks: checkpoint::read_offsets(
                &path.join(checkpoint::REPLICATION_OFFSET_CHECKPOINT),
            )?,
            shared: Arc::new(LogDirShared::new(path, files)),
            checkpoints_changed: true,
            high_watermarks_changed: true,
            clean_shutdown,
        };
        if clean_shutdown {
            // Deleting it now means a crash from here on is treated as unclean, as in Kafka.
            std::fs::remove_file(&marker).map_err(|e| LogError::io("delete", &marker, e))?;
        }
        Ok(dir)
    }

    /// A dir that could not be opened (`cause`), kept offline in its place: its logs are
    /// served as offline (KAFKA_STORAGE_ERROR), not created again in another dir.
    pub fn unusable(path: impl Into<PathBuf>, files: Arc<FileCache>, cause: &LogError) -> Self {
        let dir = LogDir {
            recovery_points: BTreeMap::new(),
            log_start_offsets: BTreeMap::new(),
            cleaner_offsets: BTreeMap::new(),
            high_watermarks: BTreeMap::new(),
            shared: Arc::new(LogDirShared::new(path.into(), files)),
            // Nothing of it may be written.
            checkpoints_changed: false,
            high_watermarks_changed: false,
            clean_shutdown: false,
        };
        dir.shared.mark_offline(cause);
        dir
    }

    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Calls `listener` once when this dir goes offline (at once if it is already); only the
    /// first listener set is kept.
    pub fn on_offline(&self, listener: OfflineListener) {
        if self
            .shared
            .offline_listener
            .set(Arc::clone(&listener))
            .is_ok()
            && self.is_offline()
        {
            listener(&self.shared.path);
        }
    }

    /// Calls `listener` after each fsync of a segment of this dir's logs; only the first
    /// listener set is kept.
    pub fn on_flush(&self, listener: FlushListener) {
        let _ = self.shared.flush_listener.set(listener);
    }

    /// What a log's owner needs to sync this directory without holding the `LogDir`.
    pub fn shared(&self) -> Arc<LogDirShared> {
        Arc::clone(&self.shared)
    }

    /// Whether the previous run ended with a clean shutdown (no recovery needed).
    pub fn had_clean_shutdown(&self) -> bool {
        self.clean_shutdown
    }

    pub fn is_offline(&self) -> bool {
        self.shared.is_offline()
    }

    /// Marks the directory offline: every later operation on its logs fails with KAFKA_STORAGE_ERROR.
    pub fn mark_offline(&self, reason: &str) {
        self.shared
            .mark_offline(&LogError::InvalidArgument(reason.to_string()));
    }

    /// Partitions with a directory here (skipping those being deleted).
    pub fn partitions_on_disk(&self) -> Result<Vec<TopicPartition>> {
        let path = &self.shared.path;
        let mut out = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| LogError::io("list", path, e))? {
            let entry = entry.map_err(|e| LogError::io("list", path, e))?;
            if !entry
                .file_type()
                .map_err(|e| LogError::io("stat", &entry.path(), e))?
                .is_dir()
            {
                continue;
            }
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if name.ends_with(DELETE_DIR_SUFFIX) || name.ends_with(STRAY_DIR_SUFFIX) {
                continue;
            }
            if let Some(tp) = TopicPartition::from_dir_name(&name) {
                out.push(tp);
            }
        }
        out.sort();
        Ok(out)
    }

    /// Opens or creates a partition's log, recovering it when the last shutdown was unclean.
    pub fn open_log(
        &self,
        tp: TopicPartition,
        topic_id: Option<uuid::Uuid>,
        config: impl Into<Arc<LogConfig>>,
        now_ms: i64,
    ) -> Result<PartitionLog> {
        self.opener(tp)?.open(topic_id, config, now_ms)
    }

    /// What opening `tp`'s log needs from this dir (its checkpointed offsets), so that the open
    /// itself, file reads and recovery, runs apart from the dir: several at once, and without
    /// holding whatever guards the dir.
    pub fn opener(&self, tp: TopicPartition) -> Result<LogOpener> {
        if self.is_offline() {
            return Err(LogError::LogDirOffline(self.shared.path.clone()));
        }
        let checkpoints = LogCheckpoints {
            recovery_point: self.recovery_points.get(&tp).copied().unwrap_or(0),
            log_start_offset: self.log_start_offsets.get(&tp).copied().unwrap_or(0),
            cleaner_offset: self.cleaner_offsets.get(&tp).copied(),
            clean_shutdown: self.clean_shutdown,
        };
        Ok(LogOpener {
            shared: Arc::clone(&self.shared),
            tp,
            checkpoints,
        })
    }

    /// Writes `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint` and
    /// `cleaner-offset-checkpoint` for `logs` (Kafka's periodic checkpoint tasks).
    pub fn checkpoint<'a>(
        &mut self,
        logs: impl IntoIterator<Item = &'a PartitionLog>,
    ) -> Result<()> {
        for log in logs {
            let tp = log.topic_partition();
            let mut changed = record(&mut self.recovery_points, tp, log.recovery_point());
            changed |= record(&mut self.log_start_offsets, tp, log.log_start_offset());
            if let Some(offset) = log.cleaner_offset() {
                changed |= record(&mut self.cleaner_offsets, tp, offset);
            }
            self.checkpoints_changed |= changed;
        }
        if !self.checkpoints_changed {
            return Ok(());
        }
        let path = self.shared.path.clone();
        let result = checkpoint::write_offsets(
            &path.join(checkpoint::RECOVERY_POINT_CHECKPOINT),
            &self.recovery_points,
        )
        .and_then(|()| {
            checkpoint::write_offsets(
                &path.join(checkpoint::LOG_START_OFFSET_CHECKPOINT),
                &self.log_start_offsets,
            )
        })
        .and_then(|()| {
            checkpoint::write_offsets(
                &path.join(checkpoint::CLEANER_OFFSET_CHECKPOINT),
                &self.cleaner_offsets,
            )
        });
        match &result {
            Ok(()) => self.checkpoints_changed = false,
            Err(e) => self.shared.mark_offline(e),
        }
        result
    }

    /// The high watermark `replication-offset-checkpoint` last recorded for `tp`.
    pub fn high_watermark(&self, tp: &TopicPartition) -> Option<i64> {
        self.high_watermarks.get(tp).copied()
    }

    /// Records the high watermarks of replicas in this dir and writes
    /// `replication-offset-checkpoint` (durably: a restarted broker starts from it).
    pub fn checkpoint_high_watermarks<'a>(
        &mut self,
        high_watermarks: impl IntoIterator<Item = (&'a TopicPartition, i64)>,
    ) -> Result<()> {
        for (tp, high_watermark) in high_watermarks {
            self.high_watermarks_changed |= record(&mut self.high_watermarks, tp, high_watermark);
        }
        if !self.high_watermarks_changed {
            return Ok(());
        }
        let path = self
            .shared
            .path
            .join(checkpoint::REPLICATION_OFFSET_CHECKPOINT);
        let result = checkpoint::write_offsets(&path, &self.high_watermarks);
        match &result {
            Ok(()) => self.high_watermarks_changed = false,
            Err(e) => self.shared.mark_offline(e),
        }
        result
    }

    /// Clean shutdown: closes every log, makes the log dir's file system durable, writes the
    /// checkpoints, then the marker with the broker epoch.
    pub fn shutdown<'a>(
        &mut self,
        logs: impl IntoIterator<Item = &'a mut PartitionLog>,
        broker_epoch: i64,
        now_ms: i64,
    ) -> Result<()> {
        // Closing reads each partition directory (cold at a million partitions): up to 8 threads
        // share the logs.
        let mut logs: Vec<&mut PartitionLog> = logs.into_iter().collect();
        let per_thread = logs.len().div_ceil(8).max(1);
        std::thread::scope(|scope| -> Result<()> {
            let workers: Vec<_> = logs
                .chunks_mut(per_thread)
                .map(|chunk| {
                    scope.spawn(move || {
                        chunk
                            .iter_mut()
                            .try_for_each(|log| log.close_without_sync())
                    })
                })
                .collect();
            for worker in workers {
                worker
                    .join()
                    .map_err(|_| LogError::InvalidArgument("a log close panicked".into()))??;
            }
            Ok(())
        })?;
        // One sync of the file system instead of an fsync per file: every segment, index and
        // leader-epoch checkpoint written (a new log's epoch is written without fsync), with the
        // directory entries.
        self.shared.sync_file_system()?;
        for log in &mut logs {
            log.synced_by_file_system(now_ms);
        }
        self.checkpoint(logs.iter().map(|log| &**log))?;
        let marker = self.shared.path.join(CLEAN_SHUTDOWN_FILE);
        checkpoint::write_atomically(
            &marker,
            format!("{{\"version\":0,\"brokerEpoch\":{broker_epoch}}}").as_bytes(),
        )
    }

    /// Moves aside the unopened log of `tp`, a stray (the metadata does not place it here, or
    /// it holds another topic id: [`LogError::TopicIdMismatch`]): renamed
    /// `<topic>-<partition>.<uuid>-stray` and kept, as Kafka keeps stray logs, since a log the
    /// metadata lost track of (a damaged metadata log, a wrong `node.id`) may hold the only copy
    /// of acknowledged records. Its checkpointed offsets are forgotten, so the next open
    /// creates a new log.
    pub fn discard_stray(&mut self, tp: &TopicPartition) -> Result<PathBuf> {
        let from = self.shared.path.join(tp.dir_name());
        let to = self.renamed(tp, STRAY_DIR_SUFFIX);
        std::fs::rename(&from, &to).map_err(|e| LogError::io("rename", &from, e))?;
        self.forget_offsets(tp);
        Ok(to)
    }

    /// Where a log of `tp` leaving its place is renamed to (`suffix`: deleted or stray).
    fn renamed(&self, tp: &TopicPartition, suffix: &str) -> PathBuf {
        self.shared.path.join(renamed_dir_name(tp, suffix))
    }

    /// Drops the checkpointed offsets of a log that left this dir.
    fn forget_offsets(&mut self, tp: &TopicPartition) {
        self.recovery_points.remove(tp);
        self.log_start_offsets.remove(tp);
        self.cleaner_offsets.remove(tp);
        self.high_watermarks.remove(tp);
        self.checkpoints_changed = true;
        self.high_watermarks_changed = true;
    }

    /// Deletes a partition's log: its directory is renamed `<topic>-<partition>.<uuid>-delete` at once (so
    /// a restart never loads it) and removed by the caller after `file.delete.delay.ms`, or by
    /// [`Self::sweep_leftovers`] at the next start.
    pub fn delete_log(&mut self, log: PartitionLog) -> Result<PathBuf> {
        let tp = log.topic_partition().clone();
        let from = log.dir().to_path_buf();
        for segment_path in std::fs::read_dir(&from)
            .map_err(|e| LogError::io("list", &from, e))?
            .flatten()
        {
            self.shared.files.forget(&segment_path.path());
        }
        let to = self.renamed(&tp, DELETE_DIR_SUFFIX);
        std::fs::rename(&from, &to).map_err(|e| LogError::io("rename", &from, e))?;
        self.forget_offsets(&tp);
        Ok(to)
    }

    /// At start-up, in one pass over the directory (with a million partitions the listing is
    /// the cost): removes the `-delete` directories of deletions the last run did not finish,
    /// and lists the `-stray` ones kept for the operator.
    pub fn sweep_leftovers(&self) -> Result<Leftovers> {
        let path = &self.shared.path;
        let mut leftovers = Leftovers::default();
        for entry in std::fs::read_dir(path)
            .map_err(|e| LogError::io("list", path, e))?
            .flatten()
        {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            if name.ends_with(DELETE_DIR_SUFFIX) {
                std::fs::remove_dir_all(entry.path())
                    .map_err(|e| LogError::io("delete", &entry.path(), e))?;
                leftovers.removed += 1;
            } else if name.ends_with(STRAY_DIR_SUFFIX) {
                leftovers.strays.push(entry.path());
            }
        }
        Ok(leftovers)
    }

    /// The file-handle cache its logs share.
    pub fn files(&self) -> &Arc<FileCache> {
        &self.shared.files
    }
}

/// Sets `tp`'s offset, cloning the key only for a partition not recorded yet; whether the
/// offset changed.
fn record(offsets: &mut BTreeMap<TopicPartition, i64>, tp: &TopicPartition, offset: i64) -> bool {
    match offsets.get_mut(tp) {
        Some(recorded) if *recorded == offset => false,
        Some(recorded) => {
            *recorded = offset;
            true
        }
        None => {
            offsets.insert(tp.clone(), offset);
            true
        }
    }
}
