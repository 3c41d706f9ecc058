//! Resident memory and open files with many partitions: creates N partition logs with one batch
//! each, reads each back once, closes them cleanly, reopens them all and reports RSS, open handles and
//! timings. Usage: `cargo run --release -p gregor-log --example partitions_memory -- 10000 DIR`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use gregor_log::batch::BatchBuilder;
use gregor_log::checkpoint::TopicPartition;
use gregor_log::compression::Compression;
use gregor_log::config::LogConfig;
use gregor_log::files::FileCache;
use gregor_log::log_dir::LogDir;

fn rss_mib() -> f64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: f64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0.0);
    pages * 4096.0 / (1024.0 * 1024.0)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let count: i32 = args.next().and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let dir = args
        .next()
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("gregor-log-partitions"));
    let _ = std::fs::remove_dir_all(&dir);
    let now = 1_700_000_000_000;
    let mut builder = BatchBuilder::new(Compression::None);
    for i in 0..10 {
        builder.append(
            now,
            Some(format!("key-{i}").as_bytes()),
            Some(&[7u8; 1024]),
            &[],
        );
    }
    let batch = builder.build().unwrap();
    let files = FileCache::new(1024);
    let start_rss = rss_mib();

    let started = Instant::now();
    let mut log_dir = LogDir::open(&dir, files.clone()).unwrap();
    let mut logs: Vec<_> = (0..count)
        .map(|p| {
            let mut log = log_dir
                .open_log(
                    TopicPartition::new("wide", p),
                    Some(uuid::Uuid::from_u128(1)),
                    LogConfig::default(),
                    now,
                )
                .unwrap();
            log.append(&batch, now, 0).unwrap();
            log.read_batches(0, 1 << 20, 10).unwrap();
            log.unload_indexes();
            log
        })
        .collect();
    println!(
        "created {count} partitions with one 10 KiB batch each in {:.1} s: RSS {:.1} MiB (+{:.1}), open files {}",
        started.elapsed().as_secs_f64(),
        rss_mib(),
        rss_mib() - start_rss,
        files.open_files()
    );
    let started = Instant::now();
    log_dir.shutdown(logs.iter_mut(), 1, now).unwrap();
    drop(logs);
    println!("clean shutdown in {:.1} s", started.elapsed().as_secs_f64());

    let started = Instant::now();
    let log_dir = LogDir::open(&dir, files.clone()).unwrap();
    let logs: Vec<_> = log_dir
        .partitions_on_disk()
        .unwrap()
        .into_iter()
        .map(|tp| {
            log_dir
                .open_log(tp, None, LogConfig::default(), now)
                .unwrap()
        })
        .collect();
    assert_eq!(logs.len(), count as usize);
    println!(
        "reopened after the clean shutdown in {:.1} s: RSS {:.1} MiB, open files {}",
        started.elapsed().as_secs_f64(),
        rss_mib(),
        files.open_files()
    );
    drop(logs);
    let _ = std::fs::remove_dir_all(&dir);
}
