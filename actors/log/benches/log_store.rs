//! Log store throughput: append of 1 KiB records in 16-record batches, sequential reads from the page
//! cache, and recovery (a full rescan after an unclean shutdown). Figures in BENCHMARKS.md ("Log store").
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use gregor_log::batch::BatchBuilder;
use gregor_log::checkpoint::TopicPartition;
use gregor_log::compression::Compression;
use gregor_log::config::LogConfig;
use gregor_log::files::FileCache;
use gregor_log::log_dir::LogDir;

const RECORDS_PER_BATCH: usize = 16;
const RECORD_BYTES: usize = 1024;

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn batch(codec: Compression, seed: u64) -> Vec<u8> {
    let mut builder = BatchBuilder::new(codec);
    let now = now_ms();
    for i in 0..RECORDS_PER_BATCH {
        // Half random, half repeated bytes: compressible as real payloads tend to be.
        let mut value = vec![0u8; RECORD_BYTES];
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(i as u64);
        for chunk in value[..RECORD_BYTES / 2].chunks_mut(8) {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
        }
        builder.append(now, Some(format!("key-{i}").as_bytes()), Some(&value), &[]);
    }
    builder.build().unwrap()
}

fn config() -> LogConfig {
    // Retention keeps the bench's disk use bounded: appends run for seconds at GB/s.
    LogConfig {
        segment_bytes: 256 * 1024 * 1024,
        retention_bytes: 1024 * 1024 * 1024,
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    }
}

/// Appends, running a retention pass every 64 MiB.
fn append_bounded(log: &mut gregor_log::log::PartitionLog, bytes: &[u8]) {
    let info = log.append(bytes, now_ms(), 0).unwrap();
    if info.first_offset % (4096 * RECORDS_PER_BATCH as i64) == 0 {
        let leo = log.log_end_offset();
        log.enforce_retention(now_ms(), leo).unwrap();
    }
}

fn append(c: &mut Criterion) {
    let mut group = c.benchmark_group("log_append_1KiB_x16");
    for codec in [Compression::None, Compression::Lz4] {
        let bytes = batch(codec, 1);
        group.throughput(Throughput::Bytes((RECORDS_PER_BATCH * RECORD_BYTES) as u64));
        group.bench_function(BenchmarkId::from_parameter(codec.name()), |b| {
            let dir = tempfile::tempdir().unwrap();
            let log_dir = LogDir::open(dir.path(), FileCache::new(64)).unwrap();
            let mut log = log_dir
                .open_log(TopicPartition::new("bench", 0), None, config(), now_ms())
                .unwrap();
            b.iter(|| append_bounded(&mut log, &bytes));
        });
    }
    // Idempotent appends pay for the producer-state check and update.
    let dir = tempfile::tempdir().unwrap();
    let log_dir = LogDir::open(dir.path(), FileCache::new(64)).unwrap();
    let mut log = log_dir
        .open_log(TopicPartition::new("bench", 1), None, config(), now_ms())
        .unwrap();
    let mut builder_seq = 0i32;
    let template = batch(Compression::None, 2);
    group.bench_function(BenchmarkId::from_parameter("none_idempotent"), |b| {
        b.iter(|| {
            let mut bytes = template.clone();
            bytes[43..51].copy_from_slice(&1000i64.to_be_bytes());
            bytes[51..53].copy_from_slice(&0i16.to_be_bytes());
            bytes[53..57].copy_from_slice(&builder_seq.to_be_bytes());
            let crc = crc32c::crc32c(&bytes[21..]);
            bytes[17..21].copy_from_slice(&crc.to_be_bytes());
            builder_seq += RECORDS_PER_BATCH as i32;
            append_bounded(&mut log, &bytes)
        });
    });
    group.finish();
}

fn read(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let log_dir = LogDir::open(dir.path(), FileCache::new(64)).unwrap();
    let mut log = log_dir
        .open_log(TopicPartition::new("bench", 0), None, config(), now_ms())
        .unwrap();
    let bytes = batch(Compression::None, 3);
    while log.size() < 256 * 1024 * 1024 {
        log.append(&bytes, now_ms(), 0).unwrap();
    }
    let leo = log.log_end_offset();
    let mut group = c.benchmark_group("log_read");
    const FETCH: u64 = 1024 * 1024;
    group.throughput(Throughput::Bytes(FETCH));
    let mut next = 0i64;
    group.bench_function("read_1MiB_slices", |b| {
        b.iter(|| {
            if next >= leo {
                next = 0;
            }
            let info = log.read(next, FETCH, leo, true).unwrap();
            let slice = info.slice.unwrap();
            let data = slice.read().unwrap();
            next += (data.len() / bytes.len()) as i64 * RECORDS_PER_BATCH as i64;
            data.len()
        });
    });
    group.finish();
}

fn recovery(c: &mut Criterion) {
    const TOTAL: u64 = 1024 * 1024 * 1024;
    let dir = tempfile::tempdir().unwrap();
    {
        let log_dir = LogDir::open(dir.path(), FileCache::new(64)).unwrap();
        let mut log = log_dir
            .open_log(TopicPartition::new("bench", 0), None, config(), now_ms())
            .unwrap();
        let bytes = batch(Compression::None, 4);
        while log.size() < TOTAL {
            log.append(&bytes, now_ms(), 0).unwrap();
        }
        // Dropped without close or checkpoint: every open below rescans everything.
    }
    let mut group = c.benchmark_group("log_recovery");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(30));
    group.throughput(Throughput::Bytes(TOTAL));
    group.bench_function("unclean_open_1GiB", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let start = Instant::now();
                let log_dir = LogDir::open(dir.path(), FileCache::new(64)).unwrap();
                let log = log_dir
                    .open_log(TopicPartition::new("bench", 0), None, config(), now_ms())
                    .unwrap();
                assert!(log.size() >= TOTAL);
                total += start.elapsed();
            }
            total
        });
    });
    group.finish();
}

criterion_group!(benches, append, read, recovery);
criterion_main!(benches);
