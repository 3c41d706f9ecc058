//! Log compaction (`cleanup.policy=compact`, data-plane reference §6.3).
//!
//! One pass: the cleanable range runs from the log start to the first segment that is active, not wholly
//! below the high watermark or, when `min.compaction.lag.ms` is set, a dirty one holding a record younger
//! than it. The dirty part starts at the cleaner checkpoint (`cleaner-offset-checkpoint`). A pass runs
//! when dirty bytes / cleanable bytes > `min.cleanable.dirty.ratio`, or when the first batch of a dirty
//! sealed segment is older than `max.compaction.lag.ms` (Kafka's `maxCompactionDelay`). A map key →
//! latest offset is built over the dirty part, and the segments of the cleanable range are rewritten
//! keeping, per key, only the latest record; records without a key go. Tombstones get a delete horizon
//! (KIP-534: now + `delete.retention.ms`, stored in the batch) when first passed and are removed on a pass
//! after it. Batches keep their offsets, producer fields and last offset delta; a batch emptied of records
//! is kept only when it is its producer's last, so sequence numbers survive (as Kafka).
//!
//! Consecutive segments are merged, as Kafka's `groupSegmentsBySize`: a group's bytes fit in
//! `segment.bytes`, its index sizes in `segment.index.bytes`, its offsets in a 32-bit relative offset,
//! and it is written as one segment with the first one's base offset. A group's last batch stays,
//! emptied if need be, so the merged segment's offsets end where the group's did. Each group goes
//! through `<base>.log.cleaned` → `<base>.log.swap` (the commit point) → the group's other segments
//! deleted → `<base>.log`; on open ([`crate::log`]) a `.cleaned` file is deleted and a `.swap` replaces
//! every segment whose base offset lies within its offsets, so a crash at any step leaves the old
//! segments or the merged one, never both.
//!
//! The key → latest offset map ([`OffsetMap`]) is bounded as Kafka's `SkimpyOffsetMap`: each key
//! is held as a 128-bit hash within a cleaner thread's share of `log.cleaner.dedupe.buffer.size`,
//! filled to `log.cleaner.io.buffer.load.factor`. A dirty part with more distinct keys than fit is
//! cleaned up to where the map filled, and the next pass starts there (Kafka's `buildOffsetMap`).
//!
//! A pass has three steps so that its long part runs away from the log's owner, as Kafka's cleaner
//! threads do: [`PartitionLog::plan_cleaning`] (the owner: which sealed segments, grouped, which
//! producers' last batches), [`CleaningJob::run`] (any thread: reads those segments, which no append
//! touches, and writes each rewritten group to its `.cleaned` file), then
//! [`PartitionLog::install_cleaned`] (the owner: swaps in each group whose segments are still those it
//! was made from).

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{BatchBuilder, RecordBatch};
use crate::error::{LogError, Result};
use crate::files::FileCache;
use crate::log::PartitionLog;
use crate::segment::{self, Segment};

/// What one cleaning pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanerStats {
    /// Segments replaced (several may become one).
    pub segments_replaced: usize,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub records_removed: u64,
    pub tombstones_removed: u64,
    /// The new cleaner checkpoint: offsets below it are clean.
    pub first_dirty_offset: i64,
}

/// Kafka's `log.cleaner.dedupe.buffer.size` default: 128 MiB across the cleaner threads.
pub const DEFAULT_DEDUPE_BUFFER_BYTES: u64 = 128 * 1024 * 1024;
/// Kafka's `log.cleaner.io.buffer.load.factor` default.
pub const DEFAULT_DEDUPE_LOAD_FACTOR: f64 = 0.9;

/// A key's 128-bit hash, as two words so that an entry packs into 24 bytes.
type KeyHash = [u64; 2];
/// What one slot of the map's table costs: the hash, the offset and the table's control byte.
const SLOT_BYTES: u64 = (std::mem::size_of::<(KeyHash, i64)>() + 1) as u64;

/// The cleaner's key → latest offset map over a dirty part, one per cleaner thread and reused
/// from pass to pass, as Kafka's `SkimpyOffsetMap`. Keys are held as a 128-bit hash keyed at
/// random per map, so a producer cannot choose two keys that collide and make the cleaner drop
/// the newer one's record; the table is sized in whole powers of two of slots within the memory
/// given, and never holds more than [`OffsetMap::capacity`] keys.
#[derive(Debug)]
pub struct OffsetMap {
    hashers: (RandomState, RandomState),
    latest: HashMap<KeyHash, i64>,
    capacity: usize,
    /// The offset up to which the dirty part is mapped (Kafka's `latestOffset`), −1 when empty.
    latest_offset: i64,
}

impl OffsetMap {
    /// A map within `memory_bytes` (a cleaner thread's share of the dedupe buffer), holding
    /// keys up to `load_factor` of its slots, and never past the table's own maximum load.
    pub fn new(memory_bytes: u64, load_factor: f64) -> Self {
        let affordable = memory_bytes / SLOT_BYTES;
        let slots = if affordable == 0 {
            0
        } else {
            1u64 << (63 - affordable.leading_zeros())
        };
        // The most a table of `slots` holds before it grows (hashbrown's `bucket_mask_to_capacity`).
        let table_load = if slots < 8 {
            slots.saturating_sub(1)
        } else {
            slots / 8 * 7
        };
        let wanted = (slots as f64 * load_factor.clamp(0.0, 1.0)) as u64;
        OffsetMap {
            hashers: (RandomState::new(), RandomState::new()),
            latest: HashMap::new(),
            capacity: usize::try_from(wanted.min(table_load)).unwrap_or(usize::MAX),
            latest_offset: -1,
        }
    }

    /// The most distinct keys one pass maps.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn clear(&mut self) {
        self.latest.clear();
        self.latest_offset = -1;
    }

    fn hash(&self, key: &[u8]) -> KeyHash {
        [self.hashers.0.hash_one(key), self.hashers.1.hash_one(key)]
    }

    /// Maps `key` to `offset` unless the map is full and `key` new to it; false when refused.
    fn put(&mut self, key: &[u8], offset: i64, over_capacity: bool) -> bool {
        let hash = self.hash(key);
        if self.latest.len() >= self.capacity && !over_capacity {
            if let Some(latest) = self.latest.get_mut(&hash) {
                *latest = offset;
                return true;
            }
            return false;
        }
        self.latest.insert(hash, offset);
        true
    }

    fn get(&self, key: &[u8]) -> Option<i64> {
        self.latest.get(&self.hash(key)).copied()
    }
}

/// How much of a cleaned segment is buffered before it is written out (Kafka's cleaner
/// writes through a buffer of `log.cleaner.io.buffer.size` / threads / 2, 256 KiB by default).
const WRITE_BUFFER_BYTES: usize = 256 * 1024;

/// Where [`CleaningJob::clean_segment`] puts a segment's retained batches.
enum Sink<'w, 'f> {
    /// Nowhere: only whether anything changes, up to the first change.
    Probe,
    /// To the group's `.cleaned` file.
    Write(&'w mut std::io::BufWriter<&'f std::fs::File>),
}

/// A sealed segment as the cleaner reads it.
#[derive(Debug, Clone)]
struct SealedSegment {
    base_offset: i64,
    log_path: PathBuf,
    size: u64,
    next_offset: i64,
    /// The sizes of its `.index` and `.timeindex`, which a merged segment's must fit in.
    index_bytes: (u64, u64),
}

/// One planned pass over a log's cleanable range, runnable on any thread.
#[derive(Debug)]
pub struct CleaningJob {
    dir: PathBuf,
    files: Arc<FileCache>,
    /// Consecutive segments, each group written as one segment.
    groups: Vec<Vec<SealedSegment>>,
    first_dirty: i64,
    end: i64,
    now_ms: i64,
    /// The delete horizon given to tombstones first passed in this pass.
    horizon: i64,
    /// Each producer's last offset when the pass was planned: its last batch is kept even when
    /// emptied, so its sequence numbers survive.
    producers_last: HashMap<i64, i64>,
    /// The log's truncation count when the pass was planned.
    truncations: u64,
    /// The log's [`PartitionLog::instance`].
    instance: u64,
}

/// A group of segments rewritten as one, waiting in the `.cleaned` file of its first.
#[derive(Debug)]
struct CleanedSegment {
    /// The base offset, size and next offset of each segment it replaces, as planned.
    sources: Vec<(i64, u64, i64)>,
    cleaned_path: PathBuf,
}

impl CleanedSegment {
    fn base_offset(&self) -> i64 {
        self.sources.first().map_or(0, |(base, _, _)| *base)
    }
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
    pub fn compact(
        &mut self,
        now_ms: i64,
        high_watermark: i64,
        map: &mut OffsetMap,
    ) -> Result<Option<CleanerStats>> {
        let Some(job) = self.plan_cleaning(now_ms, high_watermark)? else {
            return Ok(None);
        };
        self.install_cleaned(job.run(map), now_ms).map(Some)
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
        let segments: Vec<SealedSegment> = self
            .segments
            .range(..end)
            .map(|(_, segment)| SealedSegment {
                base_offset: segment.base_offset(),
                log_path: segment.log_path().to_path_buf(),
                size: segment.size(),
                next_offset: segment.next_offset(),
                index_bytes: segment.index_bytes(),
            })
            .collect();
        let groups = group_by_size(
            &segments,
            self.config.segment_bytes,
            self.config.segment_index_bytes,
            end,
        )
        .into_iter()
        .map(|range| segments[range].to_vec())
        .collect();
        Ok(Some(CleaningJob {
            dir: self.dir.clone(),
            files: Arc::clone(&self.shared.files),
            groups,
            first_dirty,
            end,
            now_ms,
            horizon: now_ms.saturating_add(self.config.delete_retention_ms),
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

    /// Swaps in the groups of a finished pass. A group with a segment that changed meanwhile
    /// (removed by retention or DeleteRecords; every segment, after a truncation or in a
    /// re-created log) keeps its current segments, its cleaned copy is dropped, and the cleaner
    /// checkpoint stays where it was so the next pass redoes it.
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
                && segment.sources.iter().all(|&(base, size, next_offset)| {
                    self.segments
                        .get(&base)
                        .is_some_and(|s| s.size() == size && s.next_offset() == next_offset)
                });
            if !unchanged {
                all_installed = false;
                stats.segments_replaced -= segment.sources.len();
                let _ = std::fs::remove_file(&segment.cleaned_path);
                continue;
            }
            let replaced = self.swap_in(&segment, now_ms);
            let replaced = self.guard(replaced)?;
            for (base, _, _) in &segment.sources {
                self.segments.remove(base);
            }
            self.segments
                .insert(segment.base_offset(), Box::new(replaced));
            self.sealed_changed();
        }
        if all_installed {
            self.cleaner_offset = Some(cleaned.end.max(self.cleaner_offset.unwrap_or(0)));
        }
        Ok(stats)
    }

    /// Replaces a group's segments with its `.cleaned` file, and opens the result. As Kafka's
    /// `replaceSegments`: the rename to `.swap` commits (recovery finishes a swap from there, see
    /// [`crate::log`]'s `prepare_directory`), then the other segments of the group go, then the
    /// swap takes the first one's name. Readers holding the old files keep reading them.
    fn swap_in(&mut self, cleaned: &CleanedSegment, now_ms: i64) -> Result<Segment> {
        let files = Arc::clone(&self.shared.files);
        let base = cleaned.base_offset();
        let log_path = segment::log_path(&self.dir, base);
        let mut swap = log_path.clone().into_os_string();
        swap.push(".swap");
        let swap = PathBuf::from(swap);
        let sync_dir = || std::fs::File::open(&self.dir)?.sync_all();
        let rename = || -> std::io::Result<()> {
            std::fs::rename(&cleaned.cleaned_path, &swap)?;
            sync_dir()?;
            for &(replaced, _, _) in cleaned.sources.iter().skip(1) {
                segment::remove_files(&self.dir, replaced, true, &files)?;
            }
            // The first segment's indexes describe the old contents; they are rebuilt below.
            segment::remove_files(&self.dir, base, false, &files)?;
            // Gone for good before the swap takes its name, so no crash leaves both.
            sync_dir()?;
            files.forget(&log_path);
            std::fs::rename(&swap, &log_path)?;
            sync_dir()
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

    /// Maps the dirty part's keys into `map`, as far as it holds them, then writes each group
    /// of the segments below where the map ends that changes (any of several segments, or a
    /// single one whose contents change) to the `<base>.log.cleaned` of its first segment
    /// (fsynced). Touches nothing the log's owner reads or writes.
    pub fn run(self, map: &mut OffsetMap) -> Result<CleanedLog> {
        self.build_offset_map(map)?;
        let end = map
            .latest_offset
            .saturating_add(1)
            .clamp(self.first_dirty, self.end);
        let mut stats = CleanerStats {
            first_dirty_offset: end,
            ..Default::default()
        };
        let mut cleaned = Vec::new();
        let written = self.groups.iter().try_for_each(|group| {
            // As Kafka's `doClean`, only the segments below where the map ends are cleaned.
            let below = group.iter().take_while(|s| s.base_offset < end).count();
            let Some(group) = group.get(..below).filter(|g| !g.is_empty()) else {
                return Ok(());
            };
            if let Some(segment) = self.clean_group(group, map, &mut stats)? {
                stats.segments_replaced += group.len();
                cleaned.push(segment);
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
            end,
            truncations: self.truncations,
            instance: self.instance,
            segments: cleaned,
            stats,
        })
    }

    /// Writes `group` as one segment to its `.cleaned` file; None when it is one segment that
    /// would not change. A failed write leaves no file.
    fn clean_group(
        &self,
        group: &[SealedSegment],
        map: &OffsetMap,
        stats: &mut CleanerStats,
    ) -> Result<Option<CleanedSegment>> {
        let Some(first) = group.first() else {
            return Ok(None);
        };
        let mut path = first.log_path.clone().into_os_string();
        path.push(".cleaned");
        let path = PathBuf::from(path);
        let mut file = None;
        let written = self.write_group(group, map, stats, &path, &mut file);
        let sources = group
            .iter()
            .map(|s| (s.base_offset, s.size, s.next_offset))
            .collect();
        match written {
            Ok(()) if file.is_some() => Ok(Some(CleanedSegment {
                sources,
                cleaned_path: path,
            })),
            Ok(()) => Ok(None),
            Err(error) => {
                if file.is_some() {
                    let _ = std::fs::remove_file(&path);
                }
                Err(error)
            }
        }
    }

    /// The body of [`Self::clean_group`]: `file` is set once the `.cleaned` file exists.
    fn write_group(
        &self,
        group: &[SealedSegment],
        map: &OffsetMap,
        stats: &mut CleanerStats,
        path: &Path,
        file: &mut Option<std::fs::File>,
    ) -> Result<()> {
        let io = |e| LogError::io("write a cleaned segment", path, e);
        let group_end = |i: usize| (i + 1 == group.len()).then(|| group[i].next_offset);
        if let [segment] = group {
            // A lone segment is rewritten only when something in it changes: probed first, so
            // neither its new contents nor a copy of an unchanged one is ever held or written.
            let probed = self.clean_segment(
                segment,
                map,
                group_end(0),
                &mut CleanerStats::default(),
                &mut Sink::Probe,
            )?;
            if !probed {
                return Ok(());
            }
        }
        let out = file.insert(std::fs::File::create(path).map_err(io)?);
        let mut writer = std::io::BufWriter::with_capacity(WRITE_BUFFER_BYTES, &*out);
        for (i, segment) in group.iter().enumerate() {
            self.clean_segment(
                segment,
                map,
                group_end(i),
                stats,
                &mut Sink::Write(&mut writer),
            )?;
        }
        writer.flush().map_err(io)?;
        drop(writer);
        if let Some(last) = group.last() {
            // As Kafka, the merged segment keeps the modification time of its last source:
            // retention falls back to it for segments without record timestamps.
            let modified = std::fs::metadata(&last.log_path)
                .and_then(|m| m.modified())
                .map_err(|e| LogError::io("read for compaction", &last.log_path, e))?;
            out.set_modified(modified).map_err(io)?;
            out.sync_all().map_err(io)?;
        }
        Ok(())
    }

    /// Maps each key of the dirty part to the offset of its latest record, segment by segment
    /// from the first dirty offset, until the map is full (Kafka's `buildOffsetMap`): the map's
    /// `latest_offset` is then the last offset of the last batch mapped whole, or the end of the
    /// last segment mapped whole. A first dirty batch with more keys than the map holds is mapped
    /// whole all the same, so every pass moves the cleaner checkpoint on.
    fn build_offset_map(&self, map: &mut OffsetMap) -> Result<()> {
        map.clear();
        let first_dirty = self.first_dirty;
        let segments: Vec<&SealedSegment> = self.groups.iter().flatten().collect();
        for (i, segment) in segments.iter().enumerate() {
            let next_start = segments.get(i + 1).map_or(self.end, |s| s.base_offset);
            if segment.next_offset <= first_dirty {
                continue;
            }
            let mut decode_error = None;
            let mut full = false;
            segment::for_each_batch_in(
                &self.files,
                &segment.log_path,
                segment.size,
                0,
                |_, batch| {
                    if batch.last_offset() < first_dirty {
                        return true;
                    }
                    if !batch.is_control() {
                        let payload = match batch.decompressed_records() {
                            Ok(payload) => payload,
                            Err(e) => {
                                decode_error = Some(e.to_string());
                                return false;
                            }
                        };
                        let first_mapped = map.latest_offset < first_dirty;
                        for record in batch.records_in(&payload) {
                            let record = match record {
                                Ok(record) => record,
                                Err(e) => {
                                    decode_error = Some(e);
                                    return false;
                                }
                            };
                            let offset = batch.base_offset() + i64::from(record.offset_delta);
                            if let (Some(key), true) = (record.key, offset >= first_dirty) {
                                if !map.put(key, offset, first_mapped) {
                                    full = true;
                                    return false;
                                }
                            }
                        }
                    }
                    map.latest_offset = batch.last_offset();
                    true
                },
            )
            .map_err(|e| LogError::io("read for compaction", &segment.log_path, e))?;
            if let Some(message) = decode_error {
                return Err(LogError::CorruptFile {
                    path: segment.log_path.clone(),
                    message,
                });
            }
            if full {
                tracing::debug!(
                    dir = %self.dir.display(),
                    keys = map.latest.len(),
                    mapped_to = map.latest_offset,
                    "the cleaner's offset map is full: cleaning up to where it ends"
                );
                return Ok(());
            }
            // Past gaps in the offsets, up to the next segment (Kafka's fast forward).
            map.latest_offset = map.latest_offset.max(next_start - 1);
        }
        Ok(())
    }

    /// Writes the new contents of `segment` to `sink`, and says whether they differ from the
    /// old (a probe stops at the first difference). The batch ending at `group_end` stays,
    /// emptied if need be, so a merged segment ends where its group did: a `.swap` left by a
    /// crash then names by its own contents every segment it replaces.
    fn clean_segment(
        &self,
        segment: &SealedSegment,
        map: &OffsetMap,
        group_end: Option<i64>,
        stats: &mut CleanerStats,
        sink: &mut Sink<'_, '_>,
    ) -> Result<bool> {
        let mut changed = false;
        let mut failure = None;
        segment::for_each_batch_in(
            &self.files,
            &segment.log_path,
            segment.size,
            0,
            |_, batch| {
                stats.bytes_before += batch.size() as u64;
                let keep = group_end == Some(batch.next_offset());
                let retained = match self.clean_batch(batch, map, keep, stats) {
                    Ok(None) => std::borrow::Cow::Borrowed(batch.bytes()),
                    Ok(Some(rewritten)) => {
                        changed = true;
                        std::borrow::Cow::Owned(rewritten)
                    }
                    Err(e) => {
                        failure = Some(e);
                        return false;
                    }
                };
                stats.bytes_after += retained.len() as u64;
                match sink {
                    Sink::Probe => !changed,
                    Sink::Write(writer) => match writer.write_all(&retained) {
                        Ok(()) => true,
                        Err(e) => {
                            failure = Some(LogError::io("write a cleaned segment", &self.dir, e));
                            false
                        }
                    },
                }
            },
        )
        .map_err(|e| LogError::io("read for compaction", &segment.log_path, e))?;
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(changed)
    }

    /// A batch's retained form: None to keep it as is, Some(bytes) (possibly empty) otherwise;
    /// with `keep`, emptied rather than dropped.
    fn clean_batch(
        &self,
        batch: &RecordBatch<'_>,
        map: &OffsetMap,
        keep: bool,
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
        if batch.base_offset() > map.latest_offset {
            return Ok(None);
        }
        let horizon_passed = batch.delete_horizon_ms().is_some_and(|h| h <= self.now_ms);
        let mut kept = Vec::new();
        let mut removed_any = false;
        let mut tombstone_without_horizon = false;
        for record in batch.records_in(&payload) {
            let record = record.map_err(corrupt)?;
            let offset = batch.base_offset() + i64::from(record.offset_delta);
            // As Kafka's `shouldRetainRecord`, a record past where the map ends is kept as it is.
            if offset > map.latest_offset {
                kept.push(record);
                continue;
            }
            let superseded = match record.key {
                Some(key) => map.get(key).is_some_and(|newest| offset < newest),
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
        if kept.is_empty() {
            if !producers_last && !keep {
                return Ok(Some(Vec::new()));
            }
            return BatchBuilder::empty_like(batch)
                .map(Some)
                .map_err(|e| corrupt(format!("failed to write an emptied batch: {e}")));
        }
        let codec = batch
            .compression()
            .ok_or_else(|| corrupt("unknown compression codec".into()))?;
        let mut builder = BatchBuilder::like(batch, codec);
        // Kafka's `MemoryRecords.filterTo` rebuilds a batch at its codec's default level,
        // whatever the topic's `compression.*.level`.
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
}

/// Splits consecutive segments into groups to be written as one segment each, as Kafka's
/// `groupSegmentsBySize`: a group's `.log` bytes fit in `max_bytes` (`segment.bytes`), each of
/// its index sizes in `max_index_bytes` (`segment.index.bytes`), and every offset of a non-empty
/// member lies within a 32-bit relative offset of its base (the last member's offsets are bounded
/// by the next segment's base, or by `end` for the last segment).
fn group_by_size(
    segments: &[SealedSegment],
    max_bytes: u64,
    max_index_bytes: u64,
    end: i64,
) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let mut start = 0;
    while let Some(first) = segments.get(start) {
        let (mut bytes, (mut index, mut time_index)) = (first.size, first.index_bytes);
        let mut next = start + 1;
        while let Some(candidate) = segments.get(next) {
            let last_offset = segments.get(next + 1).map_or(end, |s| s.base_offset) - 1;
            let fits = bytes + candidate.size <= max_bytes
                && index + candidate.index_bytes.0 <= max_index_bytes
                && time_index + candidate.index_bytes.1 <= max_index_bytes
                && (candidate.size == 0 || last_offset - first.base_offset <= i64::from(i32::MAX));
            if !fits {
                break;
            }
            bytes += candidate.size;
            index += candidate.index_bytes.0;
            time_index += candidate.index_bytes.1;
            next += 1;
        }
        groups.push(start..next);
        start = next;
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(base_offset: i64, size: u64, index_bytes: (u64, u64)) -> SealedSegment {
        SealedSegment {
            base_offset,
            log_path: PathBuf::new(),
            size,
            next_offset: base_offset + 1,
            index_bytes,
        }
    }

    /// Kafka's default buffer: 5,368,709 slots of 25 bytes fit in 128 MiB, of which the table
    /// takes the 4,194,304 of a power of two and fills 7/8 at most (under the 0.9 asked).
    #[test]
    fn an_offset_map_holds_what_its_memory_and_load_factor_allow() {
        let capacity = |memory, load| OffsetMap::new(memory, load).capacity();
        assert_eq!(
            capacity(DEFAULT_DEDUPE_BUFFER_BYTES, DEFAULT_DEDUPE_LOAD_FACTOR),
            3_670_016
        );
        assert_eq!(capacity(DEFAULT_DEDUPE_BUFFER_BYTES, 0.5), 2_097_152);
        assert_eq!(capacity(DEFAULT_DEDUPE_BUFFER_BYTES / 2, 0.9), 1_835_008);
        assert_eq!(capacity(1599, 1.0), 28);
        assert_eq!(capacity(24, 0.9), 0);
    }

    #[test]
    fn a_full_offset_map_takes_only_keys_it_holds() {
        let mut map = OffsetMap::new(100, 1.0);
        assert_eq!(map.capacity(), 3);
        for (key, offset) in [(&b"a"[..], 1), (b"b", 2), (b"c", 3)] {
            assert!(map.put(key, offset, false));
        }
        assert!(!map.put(b"d", 4, false), "a fourth key");
        assert!(map.put(b"a", 5, false), "a key it holds");
        assert!(map.put(b"d", 6, true), "over capacity when told to");
        assert_eq!(
            [b"a", b"b", b"c", b"d", b"e"].map(|k| map.get(k)),
            [Some(5), Some(2), Some(3), Some(6), None]
        );
    }

    #[test]
    fn groups_fit_segment_bytes_index_bytes_and_relative_offsets() {
        let by_size: Vec<SealedSegment> = (0..10).map(|i| segment(i * 10, 400, (8, 12))).collect();
        assert_eq!(
            group_by_size(&by_size, 1000, 1 << 20, 100),
            vec![0..2, 2..4, 4..6, 6..8, 8..10],
            "two 400-byte segments fit in 1000, three do not"
        );
        assert_eq!(
            group_by_size(&by_size, 1 << 20, 24, 100),
            vec![0..2, 2..4, 4..6, 6..8, 8..10],
            "two 12-byte time indexes fit in 24"
        );
        assert_eq!(group_by_size(&by_size, 4000, 120, 100), vec![0..10]);
        let wide = i64::from(i32::MAX);
        let far = vec![
            segment(0, 100, (0, 0)),
            segment(10, 100, (0, 0)),
            segment(wide + 1, 100, (0, 0)),
            segment(wide + 20, 0, (0, 0)),
        ];
        assert_eq!(
            group_by_size(&far, 1 << 20, 1 << 20, wide + 30),
            vec![0..2, 2..4],
            "offsets up to base + 2^31 - 1 fit, one more does not; an empty segment always does"
        );
        assert_eq!(
            group_by_size(&[], 1000, 1000, 0),
            Vec::<std::ops::Range<usize>>::new()
        );
    }
}
