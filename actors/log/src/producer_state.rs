//! Producer state for idempotence (data-plane reference §3.2–§3.3): per producer id, its epoch and its last
//! five batches, the checks a client append must pass, and `<offset>.snapshot` files in Kafka's format.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};

use crate::batch::{RecordBatch, NO_PRODUCER_EPOCH};
use crate::checkpoint::write_atomically;
use crate::error::{KafkaCode, LogError, Result};
use crate::segment::file_stem;

/// Batches remembered per producer for duplicate detection (Kafka's `NUM_BATCHES_TO_RETAIN`).
pub const NUM_BATCHES_TO_RETAIN: usize = 5;
const SNAPSHOT_VERSION: i16 = 1;
const SNAPSHOT_HEADER: usize = 2 + 4;
const SNAPSHOT_ENTRY: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;
pub const SNAPSHOT_SUFFIX: &str = ".snapshot";

/// One appended batch of a producer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchMetadata {
    pub first_seq: i32,
    pub last_seq: i32,
    pub last_offset: i64,
    pub offset_delta: i32,
    pub timestamp: i64,
}

impl BatchMetadata {
    pub fn first_offset(&self) -> i64 {
        self.last_offset - i64::from(self.offset_delta)
    }
}

/// What is known of one producer on this partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProducerEntry {
    pub producer_id: i64,
    pub epoch: i16,
    pub batches: VecDeque<BatchMetadata>,
    pub coordinator_epoch: i32,
    pub last_timestamp: i64,
    pub current_txn_first_offset: Option<i64>,
}

impl ProducerEntry {
    fn new(producer_id: i64) -> Self {
        ProducerEntry {
            producer_id,
            epoch: NO_PRODUCER_EPOCH,
            batches: VecDeque::new(),
            coordinator_epoch: -1,
            last_timestamp: -1,
            current_txn_first_offset: None,
        }
    }

    pub fn last_seq(&self) -> i32 {
        self.batches.back().map_or(-1, |b| b.last_seq)
    }
    pub fn last_offset(&self) -> i64 {
        self.batches.back().map_or(-1, |b| b.last_offset)
    }

    fn add_batch(&mut self, epoch: i16, batch: BatchMetadata) {
        if epoch != self.epoch {
            self.batches.clear();
            self.epoch = epoch;
        }
        self.batches.push_back(batch);
        if self.batches.len() > NUM_BATCHES_TO_RETAIN {
            self.batches.pop_front();
        }
        self.last_timestamp = batch.timestamp;
    }
}

/// Outcome of the checks for a client append.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProducerCheck {
    /// Not idempotent, or in sequence: append it.
    Append,
    /// A retry of a cached batch: answer with its original offsets and append nothing.
    Duplicate(BatchMetadata),
}

/// A client batch's producer fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerBatch {
    pub producer_id: i64,
    pub epoch: i16,
    pub first_seq: i32,
    pub last_seq: i32,
}

fn in_sequence(last_seq: i32, next_seq: i32) -> bool {
    next_seq == last_seq.wrapping_add(1) && last_seq != i32::MAX
        || (next_seq == 0 && last_seq == i32::MAX)
}

fn producer_error(code: KafkaCode, message: String) -> LogError {
    LogError::Producer { code, message }
}

/// The producer state of one partition.
///
/// A producer is kept when the log start offset moves past its batches (retention,
/// DeleteRecords), as by Kafka's `onLogStartOffsetIncremented`: only `producer.id.expiration.ms`
/// forgets it, so a retry of a batch whose records are gone is still answered as a duplicate
/// rather than appended again, and a gap in its sequence is still refused.
#[derive(Debug)]
pub struct ProducerStateManager {
    dir: PathBuf,
    producers: HashMap<i64, ProducerEntry>,
}

impl ProducerStateManager {
    pub fn new(dir: &Path) -> Self {
        ProducerStateManager {
            dir: dir.to_path_buf(),
            producers: HashMap::new(),
        }
    }

    pub fn producers(&self) -> &HashMap<i64, ProducerEntry> {
        &self.producers
    }

    pub fn entry(&self, producer_id: i64) -> Option<&ProducerEntry> {
        self.producers.get(&producer_id)
    }

    /// Kafka's checks for a client append, in order: duplicate, epoch, sequence.
    pub fn check(&self, batch: &ProducerBatch) -> Result<ProducerCheck> {
        if batch.producer_id < 0 {
            return Ok(ProducerCheck::Append);
        }
        let Some(entry) = self.producers.get(&batch.producer_id) else {
            // An unknown producer (never seen, or its data removed) may start at any sequence.
            return Ok(ProducerCheck::Append);
        };
        if batch.epoch == entry.epoch {
            if let Some(cached) = entry
                .batches
                .iter()
                .find(|b| b.first_seq == batch.first_seq && b.last_seq == batch.last_seq)
            {
                return Ok(ProducerCheck::Duplicate(*cached));
            }
        }
        if batch.epoch < entry.epoch {
            return Err(producer_error(
                KafkaCode::InvalidProducerEpoch,
                format!(
                    "epoch {} of producer {} is older than the current epoch {}",
                    batch.epoch, batch.producer_id, entry.epoch
                ),
            ));
        }
        if batch.epoch != entry.epoch {
            if batch.first_seq != 0 && entry.epoch != NO_PRODUCER_EPOCH {
                return Err(producer_error(
                    KafkaCode::OutOfOrderSequenceNumber,
                    format!(
                        "producer {} starts epoch {} at sequence {}; a new epoch must start at 0",
                        batch.producer_id, batch.epoch, batch.first_seq
                    ),
                ));
            }
        } else {
            let last_seq = entry.last_seq();
            if entry.epoch != NO_PRODUCER_EPOCH && !in_sequence(last_seq, batch.first_seq) {
                return Err(producer_error(
                    KafkaCode::OutOfOrderSequenceNumber,
                    format!(
                        "out of order sequence number for producer {} at epoch {}: {} (incoming) after {} (last appended)",
                        batch.producer_id, batch.epoch, batch.first_seq, last_seq
                    ),
                ));
            }
        }
        Ok(ProducerCheck::Append)
    }

    /// Records an appended batch (client or replay).
    pub fn update(
        &mut self,
        batch: &ProducerBatch,
        first_offset: i64,
        last_offset: i64,
        timestamp: i64,
    ) {
        if batch.producer_id < 0 {
            return;
        }
        let entry = self
            .producers
            .entry(batch.producer_id)
            .or_insert_with(|| ProducerEntry::new(batch.producer_id));
        entry.add_batch(
            batch.epoch,
            BatchMetadata {
                first_seq: batch.first_seq,
                last_seq: batch.last_seq,
                last_offset,
                offset_delta: (last_offset - first_offset) as i32,
                timestamp,
            },
        );
    }

    /// Rebuilds state from a batch read back from the log (recovery); no checks, as for replication.
    pub fn replay(&mut self, batch: &RecordBatch<'_>) {
        if !batch.has_producer_id() || batch.is_control() {
            return;
        }
        let producer = ProducerBatch {
            producer_id: batch.producer_id(),
            epoch: batch.producer_epoch(),
            first_seq: batch.base_sequence(),
            last_seq: batch.last_sequence(),
        };
        self.update(
            &producer,
            batch.base_offset(),
            batch.last_offset(),
            batch.max_timestamp(),
        );
    }

    /// Forgets producers idle for longer than `producer.id.expiration.ms`.
    pub fn remove_expired(&mut self, now_ms: i64, expiration_ms: i64) -> usize {
        let before = self.producers.len();
        self.producers.retain(|_, e| {
            e.current_txn_first_offset.is_some()
                || now_ms.saturating_sub(e.last_timestamp) < expiration_ms
        });
        before - self.producers.len()
    }

    pub fn clear(&mut self) {
        self.producers.clear();
    }

    /// Writes `<offset>.snapshot` (only each producer's last batch, as Kafka).
    pub fn take_snapshot(&self, offset: i64) -> Result<PathBuf> {
        let path = snapshot_path(&self.dir, offset);
        write_atomically(&path, &encode_snapshot(self.producers.values()))?;
        Ok(path)
    }

    /// Loads the newest readable snapshot at or below `max_offset`, deleting corrupt ones on the way;
    /// returns its offset (None: start from an empty state).
    pub fn load_latest_snapshot(&mut self, max_offset: i64) -> Result<Option<i64>> {
        self.producers.clear();
        for (offset, path) in list_snapshots(&self.dir)?.into_iter().rev() {
            if offset > max_offset {
                continue;
            }
            let bytes =
                std::fs::read(&path).map_err(|e| LogError::io("read snapshot", &path, e))?;
            match decode_snapshot(&bytes) {
                Some(entries) => {
                    self.producers = entries.into_iter().map(|e| (e.producer_id, e)).collect();
                    return Ok(Some(offset));
                }
                None => {
                    tracing::warn!(snapshot = %path.display(), "deleting a corrupt producer state snapshot");
                    std::fs::remove_file(&path)
                        .map_err(|e| LogError::io("delete snapshot", &path, e))?;
                }
            }
        }
        Ok(None)
    }

    /// Deletes snapshots above `max_offset` (after a truncation) and below `min_offset` (with their
    /// segments), keeping the newest one below `min_offset`; `(i64::MAX, i64::MIN)` deletes them all.
    pub fn delete_snapshots_outside(&self, min_offset: i64, max_offset: i64) -> Result<()> {
        let snapshots = list_snapshots(&self.dir)?;
        let newest_below_min = snapshots
            .keys()
            .rev()
            .find(|o| **o <= min_offset && min_offset != i64::MAX)
            .copied();
        for (offset, path) in snapshots {
            if offset > max_offset || (offset < min_offset && Some(offset) != newest_below_min) {
                std::fs::remove_file(&path)
                    .map_err(|e| LogError::io("delete snapshot", &path, e))?;
            }
        }
        Ok(())
    }
}

pub fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(format!("{}{SNAPSHOT_SUFFIX}", file_stem(offset)))
}

/// The snapshots of a partition directory by offset.
pub fn list_snapshots(dir: &Path) -> Result<BTreeMap<i64, PathBuf>> {
    let mut out = BTreeMap::new();
    let entries = std::fs::read_dir(dir).map_err(|e| LogError::io("list", dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| LogError::io("list", dir, e))?;
        let name = entry.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(SNAPSHOT_SUFFIX)) else {
            continue;
        };
        if let Ok(offset) = stem.parse::<i64>() {
            out.insert(offset, entry.path());
        }
    }
    Ok(out)
}

/// Kafka's snapshot layout: int16 version 1, uint32 CRC-32C of the rest, int32 count, then per producer
/// id i64, epoch i16, last sequence i32, last offset i64, offset delta i32, timestamp i64, coordinator
/// epoch i32, current txn first offset i64 (−1 = none).
pub fn encode_snapshot<'e>(entries: impl Iterator<Item = &'e ProducerEntry>) -> Vec<u8> {
    let mut body = Vec::new();
    let mut count: i32 = 0;
    for e in entries {
        let last = e.batches.back();
        body.extend_from_slice(&e.producer_id.to_be_bytes());
        body.extend_from_slice(&e.epoch.to_be_bytes());
        body.extend_from_slice(&last.map_or(-1, |b| b.last_seq).to_be_bytes());
        body.extend_from_slice(&last.map_or(-1, |b| b.last_offset).to_be_bytes());
        body.extend_from_slice(&last.map_or(0, |b| b.offset_delta).to_be_bytes());
        body.extend_from_slice(&e.last_timestamp.to_be_bytes());
        body.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        body.extend_from_slice(&e.current_txn_first_offset.unwrap_or(-1).to_be_bytes());
        count += 1;
    }
    let mut covered = Vec::with_capacity(4 + body.len());
    covered.extend_from_slice(&count.to_be_bytes());
    covered.extend_from_slice(&body);
    let mut out = Vec::with_capacity(SNAPSHOT_HEADER + covered.len());
    out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(&covered).to_be_bytes());
    out.extend_from_slice(&covered);
    out
}

/// Decodes a snapshot; None when the version, CRC or size is wrong.
pub fn decode_snapshot(bytes: &[u8]) -> Option<Vec<ProducerEntry>> {
    if bytes.len() < SNAPSHOT_HEADER + 4
        || i16::from_be_bytes([bytes[0], bytes[1]]) != SNAPSHOT_VERSION
    {
        return None;
    }
    let crc = u32::from_be_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]);
    if crc32c::crc32c(&bytes[SNAPSHOT_HEADER..]) != crc {
        return None;
    }
    let count = i32::from_be_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]);
    let body = &bytes[SNAPSHOT_HEADER + 4..];
    if count < 0 || body.len() != count as usize * SNAPSHOT_ENTRY {
        return None;
    }
    let i64_at = |b: &[u8], at: usize| {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[at..at + 8]);
        i64::from_be_bytes(a)
    };
    let i32_at = |b: &[u8], at: usize| i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    Some(
        body.chunks_exact(SNAPSHOT_ENTRY)
            .map(|b| {
                let producer_id = i64_at(b, 0);
                let epoch = i16::from_be_bytes([b[8], b[9]]);
                let last_seq = i32_at(b, 10);
                let last_offset = i64_at(b, 14);
                let offset_delta = i32_at(b, 22);
                let timestamp = i64_at(b, 26);
                let coordinator_epoch = i32_at(b, 34);
                let txn = i64_at(b, 38);
                let mut entry = ProducerEntry::new(producer_id);
                entry.epoch = epoch;
                entry.coordinator_epoch = coordinator_epoch;
                entry.last_timestamp = timestamp;
                entry.current_txn_first_offset = (txn >= 0).then_some(txn);
                if last_offset >= 0 {
                    let first_seq = if last_seq < 0 {
                        last_seq
                    } else {
                        decrement_sequence(last_seq, offset_delta)
                    };
                    entry.batches.push_back(BatchMetadata {
                        first_seq,
                        last_seq,
                        last_offset,
                        offset_delta,
                        timestamp,
                    });
                }
                entry
            })
            .collect(),
    )
}

/// `sequence − delta`, wrapping below 0 to INT32_MAX as Kafka's `decrementSequence`.
fn decrement_sequence(sequence: i32, delta: i32) -> i32 {
    if sequence < delta {
        i32::MAX - (delta - sequence) + 1
    } else {
        sequence - delta
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::increment_sequence;

    fn pb(producer_id: i64, epoch: i16, first_seq: i32, last_seq: i32) -> ProducerBatch {
        ProducerBatch {
            producer_id,
            epoch,
            first_seq,
            last_seq,
        }
    }

    fn code(result: Result<ProducerCheck>) -> KafkaCode {
        match result {
            Err(e) => e.kafka_code(),
            Ok(other) => panic!("expected an error, got {other:?}"),
        }
    }

    #[test]
    fn sequence_epoch_and_duplicate_rules() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ProducerStateManager::new(dir.path());
        // An unknown producer may start anywhere (its data may have been deleted).
        assert_eq!(
            state.check(&pb(7, 0, 42, 44)).unwrap(),
            ProducerCheck::Append
        );
        state.update(&pb(7, 0, 0, 4), 100, 104, 1_000);
        assert_eq!(state.check(&pb(7, 0, 5, 9)).unwrap(), ProducerCheck::Append);
        state.update(&pb(7, 0, 5, 9), 105, 109, 1_001);
        // A retry of either cached batch answers with its original offsets.
        match state.check(&pb(7, 0, 0, 4)).unwrap() {
            ProducerCheck::Duplicate(b) => assert_eq!(
                (b.first_offset(), b.last_offset, b.timestamp),
                (100, 104, 1_000)
            ),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            code(state.check(&pb(7, 0, 11, 12))),
            KafkaCode::OutOfOrderSequenceNumber,
            "gap"
        );
        assert_eq!(
            code(state.check(&pb(7, 0, 3, 5))),
            KafkaCode::OutOfOrderSequenceNumber,
            "overlap that is not a cached batch"
        );
        assert_eq!(
            code(state.check(&pb(7, -1, 10, 10))),
            KafkaCode::InvalidProducerEpoch
        );
        assert_eq!(
            code(state.check(&pb(7, 1, 10, 10))),
            KafkaCode::OutOfOrderSequenceNumber,
            "a new epoch starts at 0"
        );
        assert_eq!(state.check(&pb(7, 1, 0, 0)).unwrap(), ProducerCheck::Append);
        state.update(&pb(7, 1, 0, 0), 110, 110, 1_002);
        assert_eq!(
            code(state.check(&pb(7, 0, 10, 10))),
            KafkaCode::InvalidProducerEpoch,
            "the old epoch is fenced"
        );
        assert_eq!(
            state.entry(7).unwrap().batches.len(),
            1,
            "a new epoch clears the window"
        );
        // Non-idempotent batches are never checked.
        assert_eq!(
            state.check(&pb(-1, -1, -1, -1)).unwrap(),
            ProducerCheck::Append
        );
    }

    #[test]
    fn window_keeps_five_batches_and_sequences_wrap() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ProducerStateManager::new(dir.path());
        for i in 0..7 {
            state.update(&pb(1, 0, i, i), i64::from(i), i64::from(i), 0);
        }
        assert_eq!(state.entry(1).unwrap().batches.len(), NUM_BATCHES_TO_RETAIN);
        assert_eq!(
            code(state.check(&pb(1, 0, 1, 1))),
            KafkaCode::OutOfOrderSequenceNumber,
            "evicted from the window"
        );
        assert!(matches!(
            state.check(&pb(1, 0, 2, 2)).unwrap(),
            ProducerCheck::Duplicate(_)
        ));
        state.update(&pb(2, 0, i32::MAX - 1, i32::MAX), 10, 11, 0);
        assert_eq!(
            state.check(&pb(2, 0, 0, 3)).unwrap(),
            ProducerCheck::Append,
            "INT32_MAX wraps to 0"
        );
        assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(decrement_sequence(1, 3), i32::MAX - 1);
    }

    #[test]
    fn snapshot_round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let mut state = ProducerStateManager::new(dir.path());
        state.update(&pb(7, 3, 10, 14), 100, 104, 1_000);
        state.update(&pb(9, 0, 0, 0), 105, 105, 1_001);
        let path = state.take_snapshot(106).unwrap();
        assert!(path.ends_with("00000000000000000106.snapshot"));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes.len(), SNAPSHOT_HEADER + 4 + 2 * SNAPSHOT_ENTRY);
        assert_eq!(&bytes[..2], &[0, 1]);
        let mut loaded = ProducerStateManager::new(dir.path());
        assert_eq!(loaded.load_latest_snapshot(200).unwrap(), Some(106));
        let e = loaded.entry(7).unwrap();
        assert_eq!((e.epoch, e.last_seq(), e.last_offset()), (3, 14, 104));
        assert!(matches!(
            loaded.check(&pb(7, 3, 10, 14)).unwrap(),
            ProducerCheck::Duplicate(_)
        ));
        // A corrupt newer snapshot is deleted and the older one used.
        let mut bad = bytes.clone();
        bad[20] ^= 0xff;
        std::fs::write(snapshot_path(dir.path(), 150), bad).unwrap();
        assert_eq!(loaded.load_latest_snapshot(200).unwrap(), Some(106));
        assert!(!snapshot_path(dir.path(), 150).exists());
        assert_eq!(loaded.load_latest_snapshot(100).unwrap(), None);
    }
}
