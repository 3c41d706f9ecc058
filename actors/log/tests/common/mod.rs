//! Helpers shared by the log tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::Arc;

use gregor_log::batch::{BatchBuilder, OwnedRecord, RecordBatch};
use gregor_log::checkpoint::TopicPartition;
use gregor_log::compression::Compression;
use gregor_log::config::LogConfig;
use gregor_log::files::FileCache;
use gregor_log::log::PartitionLog;
use gregor_log::log_dir::LogDir;

pub const NOW: i64 = 1_700_000_000_000;

pub fn tp() -> TopicPartition {
    TopicPartition::new("orders", 3)
}

pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4096,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

pub fn open(dir: &Path, config: LogConfig) -> (LogDir, PartitionLog) {
    open_with_cache(dir, config, FileCache::new(256))
}

pub fn open_with_cache(
    dir: &Path,
    config: LogConfig,
    files: Arc<FileCache>,
) -> (LogDir, PartitionLog) {
    let log_dir = LogDir::open(dir, files).unwrap();
    let log = log_dir
        .open_log(tp(), Some(uuid::Uuid::from_u128(0x1234)), config, NOW)
        .unwrap();
    (log_dir, log)
}

/// A client batch of `count` records keyed `k<seed>-<i>`.
pub fn client_batch(seed: u64, count: usize, codec: Compression, ts: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::new(codec);
    for i in 0..count {
        let key = format!("k{seed}-{i}");
        let value = format!("value {seed}/{i} {}", "x".repeat((seed % 50) as usize));
        builder.append(
            ts + i as i64,
            Some(key.as_bytes()),
            Some(value.as_bytes()),
            &[],
        );
    }
    builder.build().unwrap()
}

pub fn idempotent_batch(producer_id: i64, epoch: i16, base_sequence: i32, count: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None);
    builder.producer_id = producer_id;
    builder.producer_epoch = epoch;
    builder.base_sequence = base_sequence;
    for i in 0..count {
        builder.append(
            NOW,
            Some(format!("p{producer_id}-{i}").as_bytes()),
            Some(b"v"),
            &[],
        );
    }
    builder.build().unwrap()
}

/// Every record from `from` to the end, decoded.
pub fn read_all(log: &mut PartitionLog, from: i64) -> Vec<OwnedRecord> {
    let mut out = Vec::new();
    let mut next = from;
    let end = log.log_end_offset();
    while next < end {
        let bytes = log.read_batches(next, 1 << 20, end).unwrap();
        assert!(
            !bytes.is_empty(),
            "a read below the LEO returned nothing at {next}"
        );
        for batch in gregor_log::batch::batches(&bytes) {
            let batch: RecordBatch<'_> = batch.unwrap();
            assert!(batch.is_valid_crc());
            for record in batch.owned_records().unwrap() {
                if record.offset >= next {
                    out.push(record);
                }
            }
            next = batch.next_offset();
        }
    }
    out
}

/// Bytes of the log's segment files on disk (`.log`, not those renamed for deletion).
pub fn segment_bytes_on_disk(log: &PartitionLog) -> u64 {
    std::fs::read_dir(log.dir())
        .unwrap()
        .map(|entry| entry.unwrap())
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".log"))
        .map(|entry| entry.metadata().unwrap().len())
        .sum()
}

/// A cleaner offset map of Kafka's default size.
#[allow(dead_code)]
pub fn cleaner_map() -> gregor_log::cleaner::OffsetMap {
    gregor_log::cleaner::OffsetMap::new(
        gregor_log::cleaner::DEFAULT_DEDUPE_BUFFER_BYTES,
        gregor_log::cleaner::DEFAULT_DEDUPE_LOAD_FACTOR,
    )
}
