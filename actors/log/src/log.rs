//! A partition log: the directory `<topic>-<partition>` with its segments, producer state, leader-epoch
//! cache and `partition.metadata`.
//!
//! Not thread-safe by design: its owner (one thread, or one actor on a dedicated thread) serialises
//! appends, which is Kafka's per-partition append lock. The high watermark is the caller's: reads take the
//! offset they may not pass.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::RecordBatch;
use crate::checkpoint::{self, TopicPartition};
use crate::config::LogConfig;
use crate::error::{BatchRejection, KafkaCode, LogError, Result};
use crate::files::FileCache;
use crate::leader_epoch::LeaderEpochCache;
use crate::log_dir::LogDirShared;
use crate::producer_state::{ProducerBatch, ProducerCheck, ProducerEntry, ProducerStateManager};
use crate::segment::{FileSlice, Segment};
use crate::validate::{self, BatchParts, ValidatedBatch};

/// What a log dir remembers of a partition between runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogCheckpoints {
    pub recovery_point: i64,
    pub log_start_offset: i64,
    pub cleaner_offset: Option<i64>,
    pub clean_shutdown: bool,
}

/// The result of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AppendInfo {
    pub first_offset: i64,
    pub last_offset: i64,
    /// `log_append_time_ms` of the Produce response: −1 for CreateTime topics, except for a
    /// duplicate, which carries the cached batch's timestamp.
    pub log_append_time: i64,
    pub log_start_offset: i64,
    pub record_count: i32,
    /// The batch repeated a cached one: nothing was appended and the offsets are the original ones.
    pub duplicate: bool,
    /// The batch was recompressed or rebuilt.
    pub rebuilt: bool,
}

/// The result of a read.
#[derive(Debug, Clone)]
pub struct ReadInfo {
    /// The byte range to send, None when there is nothing to read.
    pub slice: Option<FileSlice>,
    /// Base offset of the first batch in `slice` (it may be below the fetch offset).
    pub first_batch_offset: i64,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

/// What one retention pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionInfo {
    pub segments_deleted: usize,
    pub bytes_deleted: u64,
    pub log_start_offset: i64,
}

/// A ListOffsets answer from the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetMatch {
    pub offset: i64,
    /// The record's timestamp; −1 for EARLIEST, which names no record.
    pub timestamp: i64,
    /// The leader epoch of the offset, or −1 when the log does not know it.
    pub leader_epoch: i32,
}

/// The next [`PartitionLog::instance`].
static NEXT_INSTANCE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A partition's log.
#[derive(Debug)]
pub struct PartitionLog {
    pub(crate) tp: TopicPartition,
    pub(crate) dir: PathBuf,
    pub(crate) shared: Arc<LogDirShared>,
    /// Shared by the partitions of a topic (the log manager hands one per topic).
    pub(crate) config: Arc<LogConfig>,
    /// Boxed: a B-tree node holds 11 values, and most partitions have one segment.
    pub(crate) segments: BTreeMap<i64, Box<Segment>>,
    /// Bytes of every segment but the active one, refreshed whenever the segments change other
    /// than by an append ([`PartitionLog::sealed_changed`]): [`PartitionLog::size`] must not
    /// walk the segments, its owner may read it after every append.
    sealed_bytes: u64,
    pub(crate) log_start_offset: i64,
    pub(crate) recovery_point: i64,
    pub(crate) producers: ProducerStateManager,
    pub(crate) epochs: LeaderEpochCache,
    pub(crate) cleaner_offset: Option<i64>,
    /// Truncations so far: a cleaning pass planned before one is not installed (a truncation
    /// can replace a segment by another of the same base offset).
    pub(crate) truncations: u64,
    /// Unique per opened log in this process: a pass planned on a log deleted and re-created
    /// under the same directory name is not installed into the new one.
    pub(crate) instance: u64,
    topic_id: Option<uuid::Uuid>,
    unflushed_messages: i64,
    last_flush_ms: i64,
    pending_deletes: Vec<(i64, PathBuf)>,
    /// Bytes cut from torn tails when the log was opened.
    recovered_truncated_bytes: u64,
    /// Whether a roll leaves the fsync of the sealed segment to the caller
    /// ([`PartitionLog::take_rolled`]) instead of doing it before the append goes on.
    defer_rolled_flushes: bool,
    /// Sealed segments not fsynced yet, oldest first.
    rolled: Vec<RolledSegment>,
    /// The active segment's base offset and the `segment.index.bytes` its indexes were sized
    /// with when it became active: as Kafka sizes a segment's indexes once, a later change of
    /// the config applies to the segments after it, not to the one being filled.
    active_index_bytes: Option<(i64, u64)>,
}

/// A segment a roll sealed whose files are still to be fsynced. Kafka flushes a rolled
/// segment on its scheduler thread (`flush-log`), so the appends after a roll do not wait for
/// up to `segment.bytes` of dirty data to reach the disk; the recovery point moves to the new
/// segment only once [`RolledSegment::flush`] has succeeded and
/// [`PartitionLog::rolled_flushed`] is called with it.
#[derive(Debug)]
pub struct RolledSegment {
    /// Every offset below this one is durable once the flush succeeded.
    up_to: i64,
    log_path: PathBuf,
    /// The segment's `.log`, `.index` and `.timeindex`.
    files: Vec<Arc<std::fs::File>>,
    shared: Arc<LogDirShared>,
    instance: u64,
    truncations: u64,
}

impl RolledSegment {
    /// fsyncs the segment's files (blocking: on a thread that may wait for the disk). A
    /// failure takes the log dir offline, as a failed inline flush does.
    pub fn flush(&self) -> Result<()> {
        let result = self
            .shared
            .timed_flush(|| self.files.iter().try_for_each(|file| file.sync_data()))
            .map_err(|e| LogError::io("flush", &self.log_path, e));
        if let Err(e) = &result {
            self.shared.mark_offline(e);
        }
        result
    }

    /// The offset below which the segment holds every record.
    pub fn up_to(&self) -> i64 {
        self.up_to
    }
}

impl PartitionLog {
    /// Opens or creates the log of `tp` under the log dir, recovering from `checkpoints.recovery_point`
    /// after an unclean shutdown.
    pub(crate) fn open(
        shared: Arc<LogDirShared>,
        tp: TopicPartition,
        topic_id: Option<uuid::Uuid>,
        config: Arc<LogConfig>,
        checkpoints: LogCheckpoints,
        now_ms: i64,
    ) -> Result<Self> {
        let dir = shared.path.join(tp.dir_name());
        // A directory made by this call holds nothing to read back or recover: the new log
        // skips the listings and reads of an existing one (a new 1,000-partition topic is
        // 1,000 of these on the log shards).
        let made = match std::fs::create_dir(&dir) {
            Ok(()) => true,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
            Err(e) => return Err(LogError::io("create", &dir, e)),
        };
        let stored_id = if made {
            None
        } else {
            checkpoint::read_partition_metadata(&dir)?
        };
        match (stored_id, topic_id) {
            (Some(stored), Some(given)) if stored != given => {
                return Err(LogError::TopicIdMismatch {
                    path: dir.join(checkpoint::PARTITION_METADATA),
                    stored,
                    given,
                })
            }
            (None, Some(given)) => checkpoint::write_partition_metadata(&dir, &given)?,
            _ => {}
        }
        let files = Arc::clone(&shared.files);
        let (bases, epochs) = if made {
            (Vec::new(), LeaderEpochCache::empty(&dir))
        } else {
            (
                prepare_directory(&dir, &files)?,
                LeaderEpochCache::load(&dir)?,
            )
        };
        let mut log = PartitionLog {
            producers: ProducerStateManager::new(&dir),
            epochs,
            tp,
            dir,
            shared,
            config,
            segments: BTreeMap::new(),
            sealed_bytes: 0,
            log_start_offset: checkpoints.log_start_offset.max(0),
            recovery_point: checkpoints.recovery_point.max(0),
            cleaner_offset: checkpoints.cleaner_offset,
            truncations: 0,
            instance: NEXT_INSTANCE.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            topic_id: stored_id.or(topic_id),
            unflushed_messages: 0,
            last_flush_ms: now_ms,
            pending_deletes: Vec::new(),
            recovered_truncated_bytes: 0,
            defer_rolled_flushes: false,
            rolled: Vec::new(),
            active_index_bytes: None,
        };
        if made {
            log.start_empty(now_ms)?;
        } else {
            log.load_segments(&bases, checkpoints.clean_shutdown, now_ms)?;
        }
        log.sealed_changed();
        Ok(log)
    }

    /// The first segment of a log in a directory just made, at the log start offset: what
    /// [`Self::load_segments`] ends with for a directory without segments, snapshots or
    /// epochs.
    fn start_empty(&mut self, now_ms: i64) -> Result<()> {
        let offset = self.log_start_offset;
        let segment = Segment::create(&self.dir, offset, self.files(), now_ms)
            .map_err(|e| LogError::io("create segment", &self.dir, e))?;
        self.segments.insert(offset, Box::new(segment));
        self.recovery_point = offset;
        Ok(())
    }

    fn files(&self) -> &Arc<FileCache> {
        &self.shared.files
    }

    /// Opens every segment; those not wholly below the recovery point are rescanned (CRC, structure,
    /// indexes) and cut at the first invalid batch. Producer state comes from the newest snapshot at or
    /// below the first rescanned segment, then from the batches after it, replayed during the same scan.
    fn load_segments(&mut self, bases: &[i64], clean_shutdown: bool, now_ms: i64) -> Result<()> {
        let files = Arc::clone(self.files());
        let dir = self.dir.clone();
        let recovery_point = self.recovery_point;
        let trusted_at = |i: usize| {
            clean_shutdown || bases.get(i + 1).is_some_and(|next| *next <= recovery_point)
        };
        let first_untrusted = (0..bases.len())
            .find(|&i| !trusted_at(i))
            .map_or(i64::MAX, |i| bases[i]);
        let replay_from = match self.producers.load_latest_snapshot(first_untrusted)? {
            Some(offset) => offset,
            // A clean close without snapshot files means no producer was known: nothing to replay.
            None if clean_shutdown && crate::producer_state::list_snapshots(&dir)?.is_empty() => {
                i64::MAX
            }
            None => self.log_start_offset,
        };
        let mut truncated_at: Option<usize> = None;
        let mut recovered_any = false;
        for (i, &base) in bases.iter().enumerate() {
            let trusted = trusted_at(i);
            let mut segment = Segment::open(&dir, base, &files, now_ms, trusted)
                .map_err(|e| LogError::io("open segment", &dir, e))?;
            let producers = &mut self.producers;
            if trusted {
                if segment.next_offset() > replay_from {
                    segment
                        .for_each_batch(&files, 0, |_, batch| {
                            if batch.base_offset() >= replay_from {
                                producers.replay(batch);
                            }
                            true
                        })
                        .map_err(|e| {
                            LogError::io("replay producer state from", segment.log_path(), e)
                        })?;
                }
            } else {
                recovered_any = true;
                let epochs = &mut self.epochs;
                let cut = segment
                    .recover(&files, self.config.index_interval_bytes, |batch| {
                        if batch.partition_leader_epoch() >= 0 {
                            epochs.assign(batch.partition_leader_epoch(), batch.base_offset());
                        }
                        if batch.base_offset() >= replay_from {
                            producers.replay(batch);
                        }
                    })
                    .map_err(|e| LogError::io("recover segment", segment.log_path(), e))?;
                self.recovered_truncated_bytes += cut;
                if cut > 0 {
                    self.segments.insert(base, Box::new(segment));
                    truncated_at = Some(i);
                    break;
                }
            }
            self.segments.insert(base, Box::new(segment));
        }
        if let Some(i) = truncated_at {
            for &base in &bases[i + 1..] {
                tracing::warn!(partition = %self.tp.dir_name(), base, "deleting a segment after a torn tail");
                let segment = Segment::open(&dir, base, &files, now_ms, false)
                    .map_err(|e| LogError::io("open segment", &dir, e))?;
                for path in segment
                    .rename_deleted(&files)
                    .map_err(|e| LogError::io("delete segment", &dir, e))?
                {
                    std::fs::remove_file(&path).map_err(|e| LogError::io("delete", &path, e))?;
                }
            }
        }
        let leo = self
            .segments
            .values()
            .next_back()
            .map_or(self.log_start_offset, |s| s.next_offset());
        if self.segments.is_empty() || self.log_start_offset > leo {
            self.reset_to(self.log_start_offset, now_ms)?;
        }
        if let Some((&first_base, _)) = self.segments.iter().next() {
            self.log_start_offset = self.log_start_offset.max(first_base);
        }
        let leo = self.log_end_offset();
        if recovered_any {
            for segment in self.segments.values() {
                self.shared
                    .timed_flush(|| segment.flush(&files))
                    .map_err(|e| LogError::io("flush", segment.log_path(), e))?;
            }
        }
        self.recovery_point = leo;
        let mut epochs_changed = self.epochs.truncate_from_end(leo);
        epochs_changed |= self.epochs.truncate_from_start(self.log_start_offset);
        if epochs_changed || recovered_any {
            self.epochs.flush()?;
        }
        self.producers
            .delete_snapshots_outside(self.log_start_offset, leo)?;
        Ok(())
    }

    /// Loads the newest snapshot ≤ `up_to` and replays the batches after it.
    fn rebuild_producer_state(&mut self, up_to: i64) -> Result<()> {
        let from = self
            .producers
            .load_latest_snapshot(up_to)?
            .unwrap_or(self.log_start_offset);
        let files = Arc::clone(self.files());
        let producers = &mut self.producers;
        for segment in self.segments.values() {
            if segment.next_offset() <= from {
                continue;
            }
            segment
                .for_each_batch(&files, 0, |_, batch| {
                    if batch.base_offset() >= from && batch.base_offset() < up_to {
                        producers.replay(batch);
                    }
                    true
                })
                .map_err(|e| LogError::io("replay producer state from", segment.log_path(), e))?;
        }
        self.producers
            .delete_snapshots_outside(self.log_start_offset, up_to)?;
        Ok(())
    }

    /// Deletes every segment and starts an empty log at `offset`.
    fn reset_to(&mut self, offset: i64, now_ms: i64) -> Result<()> {
        let files = Arc::clone(self.files());
        for segment in std::mem::take(&mut self.segments).into_values() {
            for path in segment
                .rename_deleted(&files)
                .map_err(|e| LogError::io("delete segment", &self.dir, e))?
            {
                std::fs::remove_file(&path).map_err(|e| LogError::io("delete", &path, e))?;
            }
        }
        let segment = Segment::create(&self.dir, offset, &files, now_ms)
            .map_err(|e| LogError::io("create segment", &self.dir, e))?;
        self.segments.insert(offset, Box::new(segment));
        self.sealed_changed();
        self.log_start_offset = offset;
        self.recovery_point = offset;
        self.producers.clear();
        self.producers
            .delete_snapshots_outside(offset, offset - 1)?;
        if self.epochs.truncate_from_end(offset) {
            self.epochs.flush()?;
        }
        Ok(())
    }

    /// Marks the log dir offline when `result` is a storage failure.
    pub(crate) fn guard<T>(&self, result: Result<T>) -> Result<T> {
        if let Err(e) = &result {
            if e.is_storage_error() {
                self.shared.mark_offline(e);
            }
        }
        result
    }

    fn check_online(&self) -> Result<()> {
        if self.shared.is_offline() {
            return Err(LogError::LogDirOffline(self.shared.path.clone()));
        }
        Ok(())
    }

    fn active(&mut self) -> &mut Segment {
        // The constructor and every mutation keep at least one segment.
        self.segments
            .values_mut()
            .next_back()
            .unwrap_or_else(|| unreachable!("a log always has a segment"))
    }

    fn active_ref(&self) -> &Segment {
        self.segments
            .values()
            .next_back()
            .unwrap_or_else(|| unreachable!("a log always has a segment"))
    }

    /// Appends a produced batch (the `records` of one Produce partition): validation, idempotence checks,
    /// offset assignment, roll, write, indexes, producer state, leader-epoch cache and the flush policy.
    pub fn append(&mut self, records: &[u8], now_ms: i64, leader_epoch: i32) -> Result<AppendInfo> {
        self.check_online()?;
        let partition = self.tp.dir_name();
        let validated = validate::validate(records, &self.config, now_ms, &partition)?;
        let result = self.append_validated(validated, now_ms, leader_epoch);
        self.guard(result)
    }

    /// Appends a batch that already passed [`validate::validate`].
    pub fn append_validated(
        &mut self,
        mut validated: ValidatedBatch<'_>,
        now_ms: i64,
        leader_epoch: i32,
    ) -> Result<AppendInfo> {
        self.check_online()?;
        let producer = ProducerBatch {
            producer_id: validated.producer_id,
            epoch: validated.producer_epoch,
            first_seq: validated.base_sequence,
            last_seq: validated.last_sequence(),
        };
        if let ProducerCheck::Duplicate(cached) = self.producers.check(&producer)? {
            return Ok(AppendInfo {
                first_offset: cached.first_offset(),
                last_offset: cached.last_offset,
                // Kafka's `UnifiedLog.append` answers a duplicate with its batch's timestamp
                // whatever the topic's timestamp type.
                log_append_time: cached.timestamp,
                log_start_offset: self.log_start_offset,
                record_count: cached.offset_delta + 1,
                duplicate: true,
                rebuilt: false,
            });
        }
        let base_offset = self.log_end_offset();
        validated.assign_offsets(base_offset, leader_epoch);
        let last_offset = base_offset + i64::from(validated.last_offset_delta);
        let result = self.write_batch(validated.parts(), now_ms);
        self.guard(result)?;
        self.producers
            .update(&producer, base_offset, last_offset, validated.max_timestamp);
        if leader_epoch >= 0 && self.epochs.assign(leader_epoch, base_offset) {
            let persisted = self.epochs.persist();
            self.guard(persisted)?;
        }
        self.unflushed_messages += i64::from(validated.record_count);
        let flushed = self.maybe_flush(now_ms);
        self.guard(flushed)?;
        Ok(AppendInfo {
            first_offset: base_offset,
            last_offset,
            log_append_time: validated.log_append_time,
            log_start_offset: self.log_start_offset,
            record_count: validated.record_count,
            duplicate: false,
            rebuilt: validated.rebuilt,
        })
    }

    /// Appends batches whose offsets the leader assigned (a follower's fetch result): each batch must
    /// pass its CRC and start at or after the log end offset; nothing is rewritten. Producer state and
    /// the leader-epoch cache follow the batches. Returns the first and last offsets appended.
    pub fn append_as_follower(
        &mut self,
        records: &[u8],
        now_ms: i64,
    ) -> Result<Option<(i64, i64)>> {
        self.check_online()?;
        let mut appended: Option<(i64, i64)> = None;
        for batch in crate::batch::batches(records) {
            let batch =
                batch.map_err(|reason| BatchRejection::new(KafkaCode::CorruptMessage, reason))?;
            if !batch.is_valid_crc() {
                return Err(BatchRejection::new(
                    KafkaCode::CorruptMessage,
                    "replicated batch fails its CRC",
                )
                .into());
            }
            let mut leo = self.log_end_offset();
            let last_offset = batch.base_offset() + i64::from(batch.last_offset_delta());
            if appended.is_none()
                && leo == self.log_start_offset
                && batch.base_offset() < leo
                && last_offset >= leo
            {
                // An empty log started at a leader's log start that falls inside this batch
                // (DeleteRecords cuts between records): as Kafka's
                // `Partition.appendRecordsToFollowerOrFutureReplica`, start it at the batch.
                let result = self.reset_to(batch.base_offset(), now_ms);
                self.guard(result)?;
                leo = self.log_end_offset();
            }
            if batch.base_offset() < leo || batch.last_offset_delta() < 0 {
                return Err(BatchRejection::new(
                    KafkaCode::InvalidRecord,
                    format!(
                        "replicated batch at offset {} is below the log end offset {leo}",
                        batch.base_offset()
                    ),
                )
                .into());
            }
            let result = self.write_batch(BatchParts::of(&batch), now_ms);
            self.guard(result)?;
            self.producers.replay(&batch);
            if batch.partition_leader_epoch() >= 0
                && self
                    .epochs
                    .assign(batch.partition_leader_epoch(), batch.base_offset())
            {
                let persisted = self.epochs.persist();
                self.guard(persisted)?;
            }
            self.unflushed_messages += i64::from(batch.records_count().max(0));
            appended = Some((
                appended.map_or(batch.base_offset(), |a| a.0),
                batch.last_offset(),
            ));
        }
        let flushed = self.maybe_flush(now_ms);
        self.guard(flushed)?;
        Ok(appended)
    }

    /// Writes a batch with assigned offsets, rolling first when needed.
    fn write_batch(&mut self, batch: BatchParts<'_>, now_ms: i64) -> Result<()> {
        self.maybe_roll(&batch, now_ms)?;
        let files = Arc::clone(self.files());
        let interval = self.config.index_interval_bytes;
        let active = self.active();
        active
            .append(&files, batch, interval)
            .map_err(|e| LogError::io("append to", active.log_path(), e))
    }

    fn maybe_roll(&mut self, batch: &BatchParts<'_>, now_ms: i64) -> Result<()> {
        let active_base = self.active_ref().base_offset();
        let index_bytes = match self.active_index_bytes {
            Some((base, bytes)) if base == active_base => bytes,
            _ => {
                let bytes = self.config.segment_index_bytes;
                self.active_index_bytes = Some((active_base, bytes));
                bytes
            }
        };
        let config = &self.config;
        let active = self.active_ref();
        if active.is_empty() {
            return Ok(());
        }
        let last_offset = batch.last_offset();
        let full = active.size() > config.segment_bytes.saturating_sub(batch.size() as u64);
        let old = active.time_waited_for_roll(now_ms, batch.max_timestamp())
            > config.segment_ms.saturating_sub(config.segment_jitter_ms);
        let index_full = active.index_entries() >= LogConfig::max_index_entries_for(index_bytes)
            || active.time_index_entries() >= LogConfig::max_time_index_entries_for(index_bytes);
        let offsets_overflow = last_offset - active.base_offset() > i64::from(i32::MAX);
        if full || old || index_full || offsets_overflow {
            self.roll(now_ms)?;
        }
        Ok(())
    }

    /// Starts a new segment at the log end offset: the old one gets its final time-index entry and is
    /// fsynced, and a producer-state snapshot is taken at the new base offset.
    pub fn roll(&mut self, now_ms: i64) -> Result<()> {
        self.check_online()?;
        let result = self.roll_inner(now_ms);
        self.guard(result)
    }

    fn roll_inner(&mut self, now_ms: i64) -> Result<()> {
        let files = Arc::clone(self.files());
        let base = self.log_end_offset();
        if self.active_ref().base_offset() == base {
            return Ok(());
        }
        let defer = self.defer_rolled_flushes;
        let shared = Arc::clone(&self.shared);
        let active = self.active();
        let sealed = if defer {
            active
                .finish_time_index(&files)
                .and_then(|()| active.files_to_flush(&files))
                .map(Some)
        } else {
            shared.timed_flush(|| active.seal(&files)).map(|()| None)
        };
        let sealed = sealed.map_err(|e| LogError::io("flush", active.log_path(), e))?;
        let log_path = active.log_path().to_path_buf();
        active.unload_indexes();
        self.producers.take_snapshot(base)?;
        let segment = Segment::create(&self.dir, base, &files, now_ms)
            .map_err(|e| LogError::io("create segment", &self.dir, e))?;
        self.segments.insert(base, Box::new(segment));
        self.sealed_changed();
        match sealed {
            Some(files) => self.rolled.push(RolledSegment {
                up_to: base,
                log_path,
                files,
                shared: Arc::clone(&self.shared),
                instance: self.instance,
                truncations: self.truncations,
            }),
            None => {
                self.epochs.sync()?;
                self.recovery_point = self.recovery_point.max(base);
            }
        }
        Ok(())
    }

    /// From now on a roll hands the sealed segment's fsync to the caller through
    /// [`PartitionLog::take_rolled`] (a broker's log shard, whose appends must not wait for it).
    pub fn defer_rolled_flushes(&mut self) {
        self.defer_rolled_flushes = true;
    }

    /// The segments sealed since the last call, to be flushed with [`RolledSegment::flush`].
    pub fn take_rolled(&mut self) -> Vec<RolledSegment> {
        std::mem::take(&mut self.rolled)
    }

    /// Moves the recovery point past `rolled`, flushed: unless the log was truncated since the
    /// roll (then the records it held above the cut are gone) or `rolled` is another log's.
    /// The leader-epoch cache is synced first: recovery does not rebuild entries below the
    /// recovery point.
    pub fn rolled_flushed(&mut self, rolled: &RolledSegment) -> Result<()> {
        if rolled.instance == self.instance && rolled.truncations == self.truncations {
            let synced = self.epochs.sync();
            self.guard(synced)?;
            self.recovery_point = self
                .recovery_point
                .max(rolled.up_to.min(self.log_end_offset()));
        }
        Ok(())
    }

    fn maybe_flush(&mut self, now_ms: i64) -> Result<()> {
        if self.unflushed_messages >= self.config.flush_messages
            || now_ms.saturating_sub(self.last_flush_ms) >= self.config.flush_ms
        {
            self.flush(now_ms)?;
        }
        Ok(())
    }

    /// fsyncs every segment holding data above the recovery point and moves the recovery point to the LEO.
    pub fn flush(&mut self, now_ms: i64) -> Result<()> {
        self.check_online()?;
        let files = Arc::clone(self.files());
        let recovery_point = self.recovery_point;
        let result = (|| {
            for segment in self
                .segments
                .values()
                .filter(|s| s.next_offset() > recovery_point)
            {
                self.shared
                    .timed_flush(|| segment.flush(&files))
                    .map_err(|e| LogError::io("flush", segment.log_path(), e))?;
            }
            Ok(())
        })();
        self.guard(result)?;
        let synced = self.epochs.sync();
        self.guard(synced)?;
        self.durable_to_end(now_ms);
        Ok(())
    }

    /// Everything written is durable: the recovery point moves to the LEO.
    fn durable_to_end(&mut self, now_ms: i64) {
        self.recovery_point = self.log_end_offset();
        self.unflushed_messages = 0;
        self.last_flush_ms = now_ms;
    }

    /// Reads from the batch holding `from_offset`: at most `max_bytes` (the whole first batch when
    /// `min_one_batch`, Kafka's rule for the first partition with data), never at or past `max_offset`
    /// (the high watermark for consumers, the LEO for followers).
    pub fn read(
        &mut self,
        from_offset: i64,
        max_bytes: u64,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<ReadInfo> {
        self.check_online()?;
        let result = self.read_inner(from_offset, max_bytes, max_offset, min_one_batch);
        self.guard(result)
    }

    fn read_inner(
        &mut self,
        from_offset: i64,
        max_bytes: u64,
        max_offset: i64,
        min_one_batch: bool,
    ) -> Result<ReadInfo> {
        let leo = self.log_end_offset();
        if from_offset > leo || from_offset < self.log_start_offset {
            return Err(LogError::OffsetOutOfRange {
                offset: from_offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: leo,
            });
        }
        let mut info = ReadInfo {
            slice: None,
            first_batch_offset: from_offset,
            log_start_offset: self.log_start_offset,
            log_end_offset: leo,
        };
        let max_offset = max_offset.min(leo);
        if from_offset >= max_offset {
            return Ok(info);
        }
        let files = Arc::clone(self.files());
        let start_base = self
            .segments
            .range(..=from_offset)
            .next_back()
            .map_or(from_offset, |(b, _)| *b);
        for segment in self.segments.range_mut(start_base..).map(|(_, s)| s) {
            if segment.base_offset() >= max_offset {
                break;
            }
            let max_position = if max_offset < segment.next_offset() {
                match segment
                    .translate_offset(&files, max_offset)
                    .map_err(|e| LogError::io("read", segment.log_path(), e))?
                {
                    Some(loc) => loc.position,
                    None => segment.size(),
                }
            } else {
                segment.size()
            };
            let read = segment
                .read(&files, from_offset, max_bytes, max_position, min_one_batch)
                .map_err(|e| LogError::io("read", segment.log_path(), e))?;
            if let Some((slice, loc)) = read {
                info.first_batch_offset = loc.base_offset;
                info.slice = (slice.len > 0).then_some(slice);
                return Ok(info);
            }
        }
        Ok(info)
    }

    /// Reads and copies whole batches from `from_offset` (a convenience over [`Self::read`]).
    pub fn read_batches(
        &mut self,
        from_offset: i64,
        max_bytes: u64,
        max_offset: i64,
    ) -> Result<Vec<u8>> {
        let info = self.read(from_offset, max_bytes, max_offset, true)?;
        match info.slice {
            None => Ok(Vec::new()),
            Some(slice) => {
                let mut bytes = slice
                    .read()
                    .map_err(|e| LogError::io("read", &slice.path, e))?;
                bytes.truncate(crate::segment::whole_batches_len(&bytes));
                Ok(bytes)
            }
        }
    }

    /// The leader epoch of the log start offset (the last epoch starting at or below it), or
    /// −1: ListOffsets EARLIEST's epoch, as Kafka's, whose cache is truncated to start there.
    pub fn log_start_epoch(&self) -> i32 {
        self.epochs.epoch_for_offset(self.log_start_offset)
    }

    /// ListOffsets by timestamp: the first record with timestamp ≥ `timestamp`.
    pub fn offset_for_timestamp(&mut self, timestamp: i64) -> Result<Option<OffsetMatch>> {
        self.check_online()?;
        let result = self.offset_for_timestamp_inner(timestamp);
        self.guard(result)
    }

    fn offset_for_timestamp_inner(&mut self, timestamp: i64) -> Result<Option<OffsetMatch>> {
        let files = Arc::clone(self.files());
        let start = self.log_start_offset;
        for segment in self.segments.values_mut() {
            if segment.next_offset() <= start || segment.max_timestamp() < timestamp {
                continue;
            }
            let found = segment
                .find_offset_by_timestamp(&files, timestamp, start)
                .map_err(|e| LogError::io("search", segment.log_path(), e))?;
            if let Some(loc) = found {
                let bytes = read_batch_at(&files, segment, loc.position, loc.size)?;
                return Ok(first_record_matching(&bytes, |offset, ts| {
                    offset >= start && ts >= timestamp
                }));
            }
        }
        Ok(None)
    }

    /// ListOffsets MAX_TIMESTAMP (KIP-734): the record with the largest timestamp.
    pub fn max_timestamp_offset(&mut self) -> Result<Option<OffsetMatch>> {
        self.check_online()?;
        let files = Arc::clone(self.files());
        let Some(segment) =
            self.segments
                .values()
                .filter(|s| !s.is_empty())
                .fold(None::<&Segment>, |best, s| match best {
                    Some(b) if b.max_timestamp() >= s.max_timestamp() => Some(b),
                    _ => Some(s),
                })
        else {
            return Ok(None);
        };
        let target = segment.max_timestamp();
        let mut found = None;
        let scanned = segment.for_each_batch(&files, 0, |_, batch| {
            if batch.max_timestamp() == target {
                found = Some(batch.bytes().to_vec());
                return false;
            }
            true
        });
        self.guard(scanned.map_err(|e| LogError::io("scan", segment.log_path(), e)))?;
        Ok(found.and_then(|bytes| first_record_matching(&bytes, |_, ts| ts == target)))
    }

    /// Truncates the log to `offset` (replication): batches from the one holding `offset` on are removed.
    /// Removes every record and starts the log empty at `offset` (Kafka's
    /// `truncateFullyAndStartAt`): a follower whose log ends below its leader's log start can
    /// only continue from that start.
    pub fn truncate_fully_and_start_at(&mut self, offset: i64, now_ms: i64) -> Result<()> {
        self.check_online()?;
        if offset < 0 {
            return Err(LogError::InvalidArgument(format!(
                "cannot start a log at negative offset {offset}"
            )));
        }
        self.truncations += 1;
        let result = self.reset_to(offset, now_ms);
        self.guard(result)
    }

    pub fn truncate_to(&mut self, offset: i64, now_ms: i64) -> Result<()> {
        self.check_online()?;
        let result = self.truncate_inner(offset, now_ms);
        // Also after a failure: segments may have gone before it.
        self.sealed_changed();
        self.guard(result)
    }

    fn truncate_inner(&mut self, offset: i64, now_ms: i64) -> Result<()> {
        if offset < 0 {
            return Err(LogError::InvalidArgument(format!(
                "cannot truncate to negative offset {offset}"
            )));
        }
        if offset >= self.log_end_offset() {
            // No record goes, but an epoch this replica started as leader without appending
            // anything starts at the log end and conflicts with the new leader's history: drop
            // it (Kafka's `UnifiedLog.truncateTo`), or the next fetch names it and diverges
            // again, forever.
            if self.epochs.truncate_from_end(self.log_end_offset()) {
                self.epochs.flush()?;
            }
            return Ok(());
        }
        self.truncations += 1;
        if offset < self.log_start_offset {
            return self.reset_to(offset, now_ms);
        }
        let files = Arc::clone(self.files());
        let doomed: Vec<i64> = self.segments.range(offset + 1..).map(|(b, _)| *b).collect();
        for base in doomed {
            if let Some(segment) = self.segments.remove(&base) {
                for path in segment
                    .rename_deleted(&files)
                    .map_err(|e| LogError::io("delete segment", &self.dir, e))?
                {
                    std::fs::remove_file(&path).map_err(|e| LogError::io("delete", &path, e))?;
                }
            }
        }
        let interval = self.config.index_interval_bytes;
        let active = self.active();
        active
            .truncate_to(&files, offset, interval)
            .map_err(|e| LogError::io("truncate", active.log_path(), e))?;
        let leo = self.log_end_offset();
        self.recovery_point = self.recovery_point.min(leo);
        if self.epochs.truncate_from_end(leo) {
            self.epochs.flush()?;
        }
        self.rebuild_producer_state(leo)
    }

    /// DeleteRecords: raises the log start offset to `offset` (the caller checks it against the high
    /// watermark). Segments below it go at the next retention pass, as in Kafka.
    pub fn delete_records_before(&mut self, offset: i64) -> Result<i64> {
        self.check_online()?;
        let leo = self.log_end_offset();
        if offset < 0 || offset > leo {
            return Err(LogError::OffsetOutOfRange {
                offset,
                log_start_offset: self.log_start_offset,
                log_end_offset: leo,
            });
        }
        if offset > self.log_start_offset {
            self.log_start_offset = offset;
            if self.epochs.truncate_from_start(offset) {
                let flushed = self.epochs.flush();
                self.guard(flushed)?;
            }
        }
        Ok(self.log_start_offset)
    }

    /// One retention pass (data-plane reference §6.3): deletes whole segments, oldest first, below the log
    /// start offset, beyond `retention.bytes` or older than `retention.ms` (the last two with
    /// `cleanup.policy=delete`), never one ending above `high_watermark`.
    pub fn enforce_retention(&mut self, now_ms: i64, high_watermark: i64) -> Result<RetentionInfo> {
        self.check_online()?;
        let result = self.retention_inner(now_ms, high_watermark);
        // Also after a failure: segments may have gone before it.
        self.sealed_changed();
        self.guard(result)
    }

    fn retention_inner(&mut self, now_ms: i64, high_watermark: i64) -> Result<RetentionInfo> {
        let mut info = RetentionInfo {
            log_start_offset: self.log_start_offset,
            ..Default::default()
        };
        let leo = self.log_end_offset();
        let total: u64 = self.segments.values().map(|s| s.size()).sum();
        let mut size_excess = if self.config.cleanup_delete && self.config.retention_bytes >= 0 {
            total as i64 - self.config.retention_bytes
        } else {
            -1
        };
        let bases: Vec<i64> = self.segments.keys().copied().collect();
        let mut doomed = Vec::new();
        for (i, base) in bases.iter().enumerate() {
            let segment = &self.segments[base];
            let next_base = bases.get(i + 1).copied();
            let upper = next_base.unwrap_or(leo);
            if high_watermark < upper || (next_base.is_none() && segment.is_empty()) {
                break;
            }
            let below_start = next_base.is_some_and(|next| next <= self.log_start_offset);
            let by_size = size_excess >= segment.size() as i64
                && size_excess >= 0
                && self.config.cleanup_delete;
            let largest = segment.largest_timestamp();
            let by_time = self.config.cleanup_delete
                && self.config.retention_ms >= 0
                && now_ms.saturating_sub(largest) > self.config.retention_ms;
            if !(below_start || by_size || by_time) {
                break;
            }
            if by_size {
                size_excess -= segment.size() as i64;
            }
            doomed.push(*base);
        }
        if doomed.is_empty() {
            return Ok(info);
        }
        if doomed.len() == bases.len() {
            self.roll_inner(now_ms)?;
        }
        let files = Arc::clone(self.files());
        for base in doomed {
            if let Some(segment) = self.segments.remove(&base) {
                info.segments_deleted += 1;
                info.bytes_deleted += segment.size();
                let renamed = segment
                    .rename_deleted(&files)
                    .map_err(|e| LogError::io("delete segment", segment.log_path(), e))?;
                let due = now_ms.saturating_add(self.config.file_delete_delay_ms);
                self.pending_deletes
                    .extend(renamed.into_iter().map(|p| (due, p)));
            }
        }
        if let Some((&first, _)) = self.segments.iter().next() {
            if first > self.log_start_offset {
                self.log_start_offset = first;
                if self.epochs.truncate_from_start(first) {
                    self.epochs.flush()?;
                }
            }
        }
        self.producers
            .delete_snapshots_outside(self.log_start_offset, leo)?;
        self.purge_deleted_files(now_ms)?;
        info.log_start_offset = self.log_start_offset;
        Ok(info)
    }

    /// Removes `.deleted` files whose `file.delete.delay.ms` has passed; returns how many remain.
    pub fn purge_deleted_files(&mut self, now_ms: i64) -> Result<usize> {
        let mut failure = None;
        self.pending_deletes.retain(|(due, path)| {
            if *due > now_ms || failure.is_some() {
                return true;
            }
            match std::fs::remove_file(path) {
                Ok(()) => false,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
                Err(e) => {
                    failure = Some(LogError::io("delete", path, e));
                    true
                }
            }
        });
        match failure {
            Some(e) => self.guard(Err(e)),
            None => Ok(self.pending_deletes.len()),
        }
    }

    /// Forgets the producers whose last batch is `expiration_ms` (`producer.id.expiration.ms`, a
    /// broker config) or more older than `now_ms`, as Kafka's `removeExpiredProducers`; returns
    /// how many. The next snapshot leaves them out.
    pub fn remove_expired_producers(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        self.producers.remove_expired(now_ms, expiration_ms)
    }

    /// A clean close without its fsyncs: a producer snapshot at the LEO (or none at all when no
    /// producer is known, which a clean reopen reads as "no producers" without replaying the
    /// log), the final time-index entry, the files due for deletion removed. The caller then syncs
    /// the log dir's file system once and calls [`synced_by_file_system`](Self::synced_by_file_system):
    /// a shutdown of a million new logs is one `syncfs`, not two fsyncs each for their leader
    /// epochs.
    pub fn close_without_sync(&mut self) -> Result<()> {
        self.check_online()?;
        let result = (|| {
            let leo = self.log_end_offset();
            if self.producers.producers().is_empty() {
                self.producers
                    .delete_snapshots_outside(i64::MAX, i64::MIN)?;
            } else {
                self.producers.take_snapshot(leo)?;
            }
            let files = Arc::clone(self.files());
            let active = self.active();
            active
                .finish_time_index(&files)
                .map_err(|e| LogError::io("write", active.log_path(), e))?;
            self.purge_deleted_files(i64::MAX)?;
            Ok(())
        })();
        self.guard(result)
    }

    /// Records that everything this log has written is durable (its file system was synced after
    /// [`close_without_sync`](Self::close_without_sync)): the recovery point moves to the LEO, as
    /// after a [`flush`](Self::flush).
    pub fn synced_by_file_system(&mut self, now_ms: i64) {
        self.epochs.synced_by_file_system();
        self.durable_to_end(now_ms);
    }

    /// Drops the in-memory index entries of every segment (for partitions gone idle).
    pub fn unload_indexes(&mut self) {
        for segment in self.segments.values_mut() {
            segment.unload_indexes();
        }
    }

    /// Replaces the configuration (topic or broker config change); takes effect from the next operation.
    pub fn set_config(&mut self, config: impl Into<Arc<LogConfig>>) {
        self.config = config.into();
    }

    pub fn config(&self) -> &LogConfig {
        &self.config
    }
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }
    pub fn topic_id(&self) -> Option<uuid::Uuid> {
        self.topic_id
    }
    pub fn dir(&self) -> &Path {
        &self.dir
    }
    pub fn log_end_offset(&self) -> i64 {
        self.active_ref().next_offset()
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset
    }
    pub fn recovery_point(&self) -> i64 {
        self.recovery_point
    }
    pub fn cleaner_offset(&self) -> Option<i64> {
        self.cleaner_offset
    }
    /// Sum of the segment sizes (DescribeLogDirs' PartitionSize, Kafka's `UnifiedLog.size`),
    /// without a walk over them.
    pub fn size(&self) -> u64 {
        self.sealed_bytes + self.active_ref().size()
    }

    /// Recounts [`PartitionLog::sealed_bytes`] after segments were added, removed or rewritten.
    pub(crate) fn sealed_changed(&mut self) {
        self.sealed_bytes = self
            .segments
            .values()
            .rev()
            .skip(1)
            .map(|segment| segment.size())
            .sum();
    }
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }
    pub fn segment_base_offsets(&self) -> Vec<i64> {
        self.segments.keys().copied().collect()
    }
    /// Bytes cut from a torn tail when the log was opened.
    pub fn recovered_truncated_bytes(&self) -> u64 {
        self.recovered_truncated_bytes
    }
    /// Active producers (DescribeProducers).
    pub fn producers(&self) -> impl Iterator<Item = &ProducerEntry> {
        self.producers.producers().values()
    }
    pub fn leader_epochs(&self) -> &LeaderEpochCache {
        &self.epochs
    }
    /// OffsetForLeaderEpoch.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> (i32, i64) {
        self.epochs.end_offset_for(epoch, self.log_end_offset())
    }
    pub fn latest_epoch(&self) -> Option<i32> {
        self.epochs.latest_epoch()
    }
    /// A new leader records its epoch at its log end offset at once (Kafka's `onBecomeLeader`), so
    /// followers always find the boundary of the epoch even before its first append.
    ///
    /// Written without fsync, as an append's new epoch: the recovery point never moves past
    /// an unsynced entry (every move syncs the cache first), and recovery rebuilds the entries
    /// above it from the batches' epochs. An entry lost with the machine therefore names an
    /// epoch with no batch, which a restarted node never leads again (its leadership comes
    /// back at a newer epoch). Kafka fsyncs here; a new 1,000-partition topic would cost each
    /// log two fsyncs (the file and its directory) before its first record.
    pub fn assign_leader_epoch(&mut self, epoch: i32) -> Result<()> {
        self.check_online()?;
        let leo = self.log_end_offset();
        if self.epochs.assign(epoch, leo) {
            let persisted = self.epochs.persist();
            self.guard(persisted)?;
        }
        Ok(())
    }
}

fn read_batch_at(
    files: &Arc<FileCache>,
    segment: &Segment,
    position: u64,
    size: u64,
) -> Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let file = files
        .get(segment.log_path(), false)
        .map_err(|e| LogError::io("open", segment.log_path(), e))?;
    let mut bytes = vec![0u8; size as usize];
    file.read_exact_at(&mut bytes, position)
        .map_err(|e| LogError::io("read", segment.log_path(), e))?;
    Ok(bytes)
}

/// The first record of a stored batch matching `wanted(offset, timestamp)`.
fn first_record_matching(bytes: &[u8], wanted: impl Fn(i64, i64) -> bool) -> Option<OffsetMatch> {
    let batch = RecordBatch::new(bytes).ok()?;
    let payload = batch.decompressed_records().ok()?;
    // Kafka answers the epoch of the batch holding the record, none (−1) for a batch without one.
    let leader_epoch = batch.partition_leader_epoch().max(-1);
    batch
        .records_in(&payload)
        .map_while(|r| r.ok())
        .find_map(|record| {
            let offset = batch.base_offset() + i64::from(record.offset_delta);
            let timestamp = batch.record_timestamp(&record);
            wanted(offset, timestamp).then_some(OffsetMatch {
                offset,
                timestamp,
                leader_epoch,
            })
        })
}

/// Cleans leftovers of interrupted operations and returns the base offsets of the segments: `.deleted`,
/// `.cleaned` and `.tmp` files are removed; a `.swap` left by the cleaner (renamed from a complete
/// `.cleaned` file) finishes its swap, as Kafka's `LogLoader`: it replaces every segment whose base
/// offset lies in the range its batches cover.
fn prepare_directory(dir: &Path, files: &Arc<FileCache>) -> Result<Vec<i64>> {
    let mut bases = Vec::new();
    let mut swaps = Vec::new();
    let entries = std::fs::read_dir(dir).map_err(|e| LogError::io("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| LogError::io("list", dir, e))?;
        let path = entry.path();
        let Some(name) = path
            .file_name()
            .and_then(|n| n.to_str())
            .map(str::to_string)
        else {
            continue;
        };
        if name.ends_with(".deleted") || name.ends_with(".cleaned") || name.ends_with(".tmp") {
            files.forget(&path);
            std::fs::remove_file(&path).map_err(|e| LogError::io("delete", &path, e))?;
        } else if let Some(stem) = name.strip_suffix(".log.swap") {
            if let Ok(base) = stem.parse::<i64>() {
                swaps.push((base, path));
            }
        } else if let Some(stem) = name.strip_suffix(".log") {
            if let Ok(base) = stem.parse::<i64>() {
                bases.push(base);
            }
        }
    }
    for (base, swap) in swaps {
        let mut finish = || -> std::io::Result<()> {
            let end = crate::segment::next_offset_in(&swap, base)?;
            for &replaced in bases.iter().filter(|&&b| base < b && b < end) {
                crate::segment::remove_files(dir, replaced, true, files)?;
            }
            crate::segment::remove_files(dir, base, false, files)?;
            // The replaced segments are gone for good before the swap takes its name, so no
            // crash leaves both.
            std::fs::File::open(dir)?.sync_all()?;
            let target = crate::segment::log_path(dir, base);
            files.forget(&target);
            std::fs::rename(&swap, &target)?;
            bases.retain(|&b| b <= base || b >= end);
            if !bases.contains(&base) {
                bases.push(base);
            }
            Ok(())
        };
        finish().map_err(|e| LogError::io("finish an interrupted swap", &swap, e))?;
    }
    bases.sort_unstable();
    Ok(bases)
}
