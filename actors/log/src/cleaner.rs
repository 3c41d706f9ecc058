//! Log compaction (`cleanup.policy=compact`, data-plane reference §6.3).
//!
//! One pass: the cleanable range runs from the log start to the first segment that is active, not wholly
//! below the high watermark, or younger than `min.compaction.lag.ms`. The dirty part starts at the cleaner
//! checkpoint (`cleaner-offset-checkpoint`). When dirty bytes / cleanable bytes ≥
//! `min.cleanable.dirty.ratio`, a map key → latest offset is built over the dirty part, and every segment of
//! the cleanable range is rewritten keeping, per key, only the latest record. Tombstones get a delete
//! horizon (KIP-534: now + `delete.retention.ms`, stored in the batch) when first passed and are removed on
//! a pass after it. Batches keep their offsets, producer fields and last offset delta; a batch emptied of
//! records is kept only when it is its producer's last, so sequence numbers survive (as Kafka).
//!
//! Simpler than Kafka, on purpose: the offset map holds whole keys (Kafka hashes them into a fixed
//! `log.cleaner.dedupe.buffer.size`), segments are rewritten one by one and never merged, and
//! `max.compaction.lag.ms` is not enforced. Each rewrite goes through `<base>.log.cleaned` → `.log.swap` →
//! `.log`, so a crash at any point leaves the old or the new segment ([`crate::log`] finishes a `.swap`).
//!
//! A pass has three steps so that its long part runs away from the log's owner, as Kafka's cleaner
//! threads do: [`PartitionLog::plan_cleaning`] (the owner: which sealed segments, which producers'
//! last batches), [`CleaningJob::run`] (any thread: reads those segments, which no append touches,
//! and writes each rewritten one to `<base>.log.cleaned`), then [`PartitionLog::install_cleaned`]
//! (the owner: swaps in each cleaned segment that is still the segment it was made from).

use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{BatchBuilder, RecordBatch};
use crate::compression::CompressionLevels;
use crate::error::{LogError, Result};
use crate::files::FileCache;
use crate::log::PartitionLog;
use crate::segment::{self, Segment};

/// What one cleaning pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanerStats {
    pub segments_rewritten: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_removed: u64,
    pub tombstones_removed: u64,
    /// The new cleaner checkpoint: offsets below it are clean.
    pub first_dirty_offset: i64,
}

/// A sealed segment as the cleaner reads it.
#[derive(Debug, Clone)]
struct SealedSegment {
    base_offset: i64,
    log_path: PathBuf,
    size: u64,
    next_offset: i64,
}

/// One planned pass over a log's cleanable range, runnable on any thread.
#[derive(Debug)]
pub struct CleaningJob {
    dir: PathBuf,
    files: Arc<FileCache>,
    segments: Vec<SealedSegment>,
    first_dirty: i64,
    end: i64,
    now_ms: i64,
    /// The delete horizon given to tombstones first passed in this pass.
    horizon: i64,
    levels: CompressionLevels,
    /// Each producer's last offset when the pass was planned: its last batch is kept even when
    /// emptied, so its sequence numbers survive.
    producers_last: HashMap<i64, i64>,
    /// The log's truncation count when the pass was planned.
    truncations: u64,
    /// The log's [`PartitionLog::instance`].
    instance: u64,
}

/// A rewritten segment waiting in its `.cleaned` file.
#[derive(Debug)]
struct CleanedSegment {
    base_offset: i64,
    size_before: u64,
    next_offset: i64,
    cleaned_path: PathBuf,
}

/// What [`CleaningJob::run`] produced, for [`PartitionLog::install_cleaned`].
#[derive(Debug)]
pub struct CleanedLog {
    dir: PathBuf,
    end: i64,
    truncations: u64,
    instance: u64,
    segments: Vec<CleanedSegment>,
    stats: CleanerStats,
}

impl CleanedLog {
    /// Removes the `.cleaned` files of a pass that will not be installed (its log was closed
    /// or deleted meanwhile).
    pub fn discard(self) {
        for segment in self.segments {
            let _ = std::fs::remove_file(&segment.cleaned_path);
        }
    }

    /// The directory of the log it was made for.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl PartitionLog {
    /// The segment-aligned end of the cleanable range, as Kafka's `cleanableOffsets`: the active
    /// segment, the first segment not wholly below the high watermark and, only when
    /// `min.compaction.lag.ms` is set, the first dirty segment holding a record younger than it
    /// (a clean segment, or a future timestamp with no lag, must not hold back the rest).
    fn first_uncleanable_offset(&self, now_ms: i64, high_watermark: i64) -> i64 {
        let active_base = self.active_base();
        let unreplicated = self
            .segments
            .values()
            .find(|s| s.next_offset() > high_watermark)
            .map_or(active_base, |s| s.base_offset());
        let lag = self.config.min_compaction_lag_ms;
        let too_young = (lag > 0)
            .then(|| {
                let limit = now_ms.saturating_sub(lag);
                self.dirty_sealed_segments()
                    .find(|s| s.largest_timestamp() > limit)
                    .map(Segment::base_offset)
            })
            .flatten();
        unreplicated
            .min(active_base)
            .min(too_young.unwrap_or(i64::MAX))
    }

    fn active_base(&self) -> i64 {
        self.segments.keys().next_back().copied().unwrap_or(0)
    }

    /// The sealed segments from the one holding the first dirty offset on (Kafka's
    /// `nonActiveLogSegmentsFrom`).
    fn dirty_sealed_segments(&self) -> impl Iterator<Item = &Segment> {
        let first_dirty = self.first_dirty_offset();
        let from = self
            .segments
            .range(..=first_dirty)
            .next_back()
            .map_or(i64::MIN, |(base, _)| *base);
        self.segments
            .range(from..self.active_base())
            .map(|(_, segment)| &**segment)
    }

    fn first_dirty_offset(&self) -> i64 {
        self.cleaner_offset
            .unwrap_or(self.log_start_offset)
            .max(self.log_start_offset)
    }

    /// Bytes of the cleanable range below the first dirty offset, and from it on.
    fn cleanable_bytes(&self, end: i64) -> (u64, u64) {
        let first_dirty = self.first_dirty_offset();
        self.segments
            .range(..end)
            .fold((0, 0), |(clean, dirty), (_, segment)| {
                if segment.next_offset() <= first_dirty {
                    (clean + segment.size(), dirty)
                } else {
                    (clean, dirty + segment.size())
                }
            })
    }

    /// Dirty bytes / cleanable bytes.
    pub fn dirty_ratio(&self, now_ms: i64, high_watermark: i64) -> f64 {
        let (clean, dirty) =
            self.cleanable_bytes(self.first_uncleanable_offset(now_ms, high_watermark));
        ratio(clean, dirty)
    }

    /// How long the oldest dirty record has waited beyond `max.compaction.lag.ms`, 0 when none
    /// has (Kafka's `maxCompactionDelay`: the first batch of each dirty sealed segment counts,
    /// records without a timestamp do not).
    fn max_compaction_delay(&self, now_ms: i64) -> i64 {
        let clean_until = now_ms.saturating_sub(self.config.max_compaction_lag_ms.max(0));
        self.dirty_sealed_segments()
            .filter_map(Segment::first_batch_timestamp)
            .filter(|&timestamp| timestamp > 0)
            .min()
            .map_or(0, |earliest| clean_until.saturating_sub(earliest).max(0))
    }

    /// One compaction pass on this thread when the topic is compacted and dirty enough; `None`
    /// when nothing was due.
    pub fn compact(&mut self, now_ms: i64, high_watermark: i64) -> Result<Option<CleanerStats>> {
        let Some(job) = self.plan_cleaning(now_ms, high_watermark)? else {
            return Ok(None);
        };
        self.install_cleaned(job.run(), now_ms).map(Some)
    }

    /// The next pass, when the topic is compacted and dirty enough; `None` when nothing is due.
    pub fn plan_cleaning(&self, now_ms: i64, high_watermark: i64) -> Result<Option<CleaningJob>> {
        if self.shared.is_offline() {
            return Err(LogError::LogDirOffline(self.shared.path.clone()));
        }
        if !self.config.cleanup_compact {
            return Ok(None);
        }
        let end = self.first_uncleanable_offset(now_ms, high_watermark);
        let first_dirty = self.first_dirty_offset();
        let (clean, dirty) = self.cleanable_bytes(end);
        // As Kafka's grabFilthiestCompactedLog: dirty enough, or holding a record overdue.
        let dirty_enough = ratio(clean, dirty) > self.config.min_cleanable_dirty_ratio;
        let overdue = dirty > 0 && self.max_compaction_delay(now_ms) > 0;
        if first_dirty >= end || !(dirty_enough || overdue) {
            return Ok(None);
        }
        let segments = self
            .segments
            .range(..end)
            .map(|(_, segment)| SealedSegment {
                base_offset: segment.base_offset(),
                log_path: segment.log_path().to_path_buf(),
                size: segment.size(),
                next_offset: segment.next_offset(),
            })
            .collect();
        Ok(Some(CleaningJob {
            dir: self.dir.clone(),
            files: Arc::clone(&self.shared.files),
            segments,
            first_dirty,
            end,
            now_ms,
            horizon: now_ms.saturating_add(self.config.delete_retention_ms),
            levels: self.config.compression_levels,
            producers_last: self
                .producers
                .producers()
                .iter()
                .map(|(id, entry)| (*id, entry.last_offset()))
                .collect(),
            truncations: self.truncations,
            instance: self.instance,
        }))
    }

    /// Swaps in the segments of a finished pass. A segment that changed meanwhile (removed by
    /// retention or DeleteRecords; every segment, after a truncation or in a re-created log) keeps its current contents,
    /// its cleaned copy is dropped, and the cleaner checkpoint stays where it was so the next
    /// pass redoes it.
    /// A failed pass changes nothing; a storage error marks the log dir offline.
    pub fn install_cleaned(
        &mut self,
        cleaned: Result<CleanedLog>,
        now_ms: i64,
    ) -> Result<CleanerStats> {
        let cleaned = self.guard(cleaned)?;
        let mut all_installed = true;
        let mut stats = cleaned.stats;
        let truncated =
            cleaned.truncations != self.truncations || cleaned.instance != self.instance;
        for segment in cleaned.segments {
            let unchanged = !truncated
                && self.segments.get(&segment.base_offset).is_some_and(|s| {
                    s.size() == segment.size_before && s.next_offset() == segment.next_offset
                });
            if !unchanged {
                all_installed = false;
                stats.segments_rewritten -= 1;
                let _ = std::fs::remove_file(&segment.cleaned_path);
                continue;
            }
            let replaced = self.swap_in(segment.base_offset, &segment.cleaned_path, now_ms);
            let replaced = self.guard(replaced)?;
            self.segments
                .insert(segment.base_offset, Box::new(replaced));
        }
        if all_installed {
            self.cleaner_offset = Some(cleaned.end.max(self.cleaner_offset.unwrap_or(0)));
        }
        Ok(stats)
    }

    /// Replaces segment `base` with its `.cleaned` file through `.swap`, and reopens it.
    fn swap_in(&mut self, base: i64, cleaned: &Path, now_ms: i64) -> Result<Segment> {
        let files = Arc::clone(&self.shared.files);
        let log_path = segment::log_path(&self.dir, base);
        let mut swap = log_path.clone().into_os_string();
        swap.push(".swap");
        let swap = PathBuf::from(swap);
        let rename = || -> std::io::Result<()> {
            std::fs::rename(cleaned, &swap)?;
            for path in [
                log_path.clone(),
                segment::index_path(&self.dir, base),
                segment::time_index_path(&self.dir, base),
            ] {
                files.forget(&path);
            }
            std::fs::rename(&swap, &log_path)?;
            std::fs::File::open(&self.dir)?.sync_all()
        };
        rename().map_err(|e| LogError::io("swap in a cleaned segment", &log_path, e))?;
        let mut segment = Segment::open(&self.dir, base, &files, now_ms, false)
            .map_err(|e| LogError::io("open", &log_path, e))?;
        segment
            .recover(&files, self.config.index_interval_bytes, |_| {})
            .map_err(|e| LogError::io("index", &log_path, e))?;
        segment
            .seal(&files)
            .map_err(|e| LogError::io("flush", &log_path, e))?;
        Ok(segment)
    }
}

fn ratio(clean: u64, dirty: u64) -> f64 {
    if clean + dirty == 0 {
        0.0
    } else {
        dirty as f64 / (clean + dirty) as f64
    }
}

impl CleaningJob {
    /// The directory of the log it cleans.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads the planned segments and writes each one that changes to `<base>.log.cleaned`
    /// (fsynced). Touches nothing the log's owner reads or writes.
    pub fn run(self) -> Result<CleanedLog> {
        let latest = self.latest_offsets()?;
        let mut stats = CleanerStats {
            first_dirty_offset: self.end,
            ..Default::default()
        };
        let mut cleaned = Vec::new();
        let written = self.segments.iter().try_for_each(|segment| {
            if let Some(bytes) = self.clean_segment(segment, &latest, &mut stats)? {
                stats.segments_rewritten += 1;
                let path = self.write_cleaned(segment, &bytes)?;
                cleaned.push(CleanedSegment {
                    base_offset: segment.base_offset,
                    size_before: segment.size,
                    next_offset: segment.next_offset,
                    cleaned_path: path,
                });
            }
            Ok(())
        });
        if let Err(error) = written {
            for segment in cleaned {
                let _ = std::fs::remove_file(&segment.cleaned_path);
            }
            return Err(error);
        }
        Ok(CleanedLog {
            dir: self.dir,
            end: self.end,
            truncations: self.truncations,
            instance: self.instance,
            segments: cleaned,
            stats,
        })
    }

    /// Key → offset of its latest record in the dirty part.
    fn latest_offsets(&self) -> Result<HashMap<Vec<u8>, i64>> {
        let first_dirty = self.first_dirty;
        let mut latest: HashMap<Vec<u8>, i64> = HashMap::new();
        for segment in self.segments.iter().filter(|s| s.next_offset > first_dirty) {
            let mut decode_error = None;
            segment::for_each_batch_in(
                &self.files,
                &segment.log_path,
                segment.size,
                0,
                |_, batch| {
                    if batch.is_control() || batch.last_offset() < first_dirty {
                        return true;
                    }
                    match batch.decompressed_records() {
                        Ok(payload) => {
                            for record in batch.records_in(&payload) {
                                match record {
                                    Ok(record) => {
                                        let offset =
                                            batch.base_offset() + i64::from(record.offset_delta);
                                        if let (Some(key), true) =
                                            (record.key, offset >= first_dirty)
                                        {
                                            latest.insert(key.to_vec(), offset);
                                        }
                                    }
                                    Err(e) => decode_error = Some(e),
                                }
                            }
                        }
                        Err(e) => decode_error = Some(e.to_string()),
                    }
                    decode_error.is_none()
                },
            )
            .map_err(|e| LogError::io("read for compaction", &segment.log_path, e))?;
            if let Some(message) = decode_error {
                return Err(LogError::CorruptFile {
                    path: segment.log_path.clone(),
                    message,
                });
            }
        }
        Ok(latest)
    }

    /// The new contents of `segment`, or None when it would not change.
    fn clean_segment(
        &self,
        segment: &SealedSegment,
        latest: &HashMap<Vec<u8>, i64>,
        stats: &mut CleanerStats,
    ) -> Result<Option<Vec<u8>>> {
        let mut out = Vec::with_capacity(usize::try_from(segment.size).unwrap_or(0));
        let mut changed = false;
        let mut failure = None;
        segment::for_each_batch_in(
            &self.files,
            &segment.log_path,
            segment.size,
            0,
            |_, batch| {
                stats.bytes_before += batch.size() as u64;
                match self.clean_batch(batch, latest, stats) {
                    Ok(None) => out.extend_from_slice(batch.bytes()),
                    Ok(Some(rewritten)) => {
                        changed = true;
                        out.extend_from_slice(&rewritten);
                    }
                    Err(e) => {
                        failure = Some(e);
                        return false;
                    }
                }
                true
            },
        )
        .map_err(|e| LogError::io("read for compaction", &segment.log_path, e))?;
        if let Some(e) = failure {
            return Err(e);
        }
        stats.bytes_after += out.len() as u64;
        Ok(changed.then_some(out))
    }

    /// A batch's retained form: None to keep it as is, Some(bytes) (possibly empty) otherwise.
    fn clean_batch(
        &self,
        batch: &RecordBatch<'_>,
        latest: &HashMap<Vec<u8>, i64>,
        stats: &mut CleanerStats,
    ) -> Result<Option<Vec<u8>>> {
        if batch.is_control() {
            return Ok(None);
        }
        let corrupt = |message: String| LogError::CorruptFile {
            path: self.dir.clone(),
            message,
        };
        let payload = batch
            .decompressed_records()
            .map_err(|e| corrupt(e.to_string()))?;
        let horizon_passed = batch.delete_horizon_ms().is_some_and(|h| h <= self.now_ms);
        let mut kept = Vec::new();
        let mut removed_any = false;
        let mut tombstone_without_horizon = false;
        for record in batch.records_in(&payload) {
            let record = record.map_err(corrupt)?;
            let offset = batch.base_offset() + i64::from(record.offset_delta);
            let superseded = match record.key {
                Some(key) => latest.get(key).is_some_and(|&newest| offset < newest),
                // As Kafka's cleaner: a record without a key has no place in a compacted log
                // (it counts it as invalid), so it goes.
                None => true,
            };
            let expired_tombstone =
                record.value.is_none() && record.key.is_some() && horizon_passed;
            if superseded || expired_tombstone {
                removed_any = true;
                stats.records_removed += 1;
                if record.value.is_none() && record.key.is_some() {
                    stats.tombstones_removed += 1;
                }
                continue;
            }
            if record.value.is_none() && batch.delete_horizon_ms().is_none() {
                tombstone_without_horizon = true;
            }
            kept.push(record);
        }
        if !removed_any && !tombstone_without_horizon {
            return Ok(None);
        }
        let producers_last = batch.has_producer_id()
            && self.producers_last.get(&batch.producer_id()) == Some(&batch.last_offset());
        if kept.is_empty() && !producers_last {
            return Ok(Some(Vec::new()));
        }
        let codec = batch
            .compression()
            .ok_or_else(|| corrupt("unknown compression codec".into()))?;
        let mut builder = BatchBuilder::like(batch, codec);
        builder.levels = self.levels;
        let keeps_tombstone = kept.iter().any(|r| r.value.is_none());
        builder.delete_horizon_ms = match batch.delete_horizon_ms() {
            Some(h) if keeps_tombstone => Some(h),
            _ if keeps_tombstone => Some(self.horizon),
            _ => None,
        };
        for record in &kept {
            builder.append_with_offset_delta(
                record.offset_delta,
                batch.record_timestamp(record),
                record.key,
                record.value,
                &record.headers,
            );
        }
        builder
            .build()
            .map(Some)
            .map_err(|e| corrupt(format!("failed to rebuild a batch: {e}")))
    }

    /// Writes `bytes` to `<base>.log.cleaned` beside the segment, fsynced.
    fn write_cleaned(&self, segment: &SealedSegment, bytes: &[u8]) -> Result<PathBuf> {
        let mut path = segment.log_path.clone().into_os_string();
        path.push(".cleaned");
        let path = PathBuf::from(path);
        let write = || -> std::io::Result<()> {
            let file = std::fs::File::create(&path)?;
            file.write_all_at(bytes, 0)?;
            file.sync_all()
        };
        write().map_err(|e| LogError::io("write a cleaned segment", &path, e))?;
        Ok(path)
    }
}
