//! Log compaction: latest value per key, tombstones and their delete horizon, crash-safe swaps.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use gregor_log::batch::{BatchBuilder, RecordBatch};
use gregor_log::compression::Compression;
use gregor_log::config::LogConfig;

fn compacted() -> LogConfig {
    LogConfig {
        cleanup_compact: true,
        cleanup_delete: false,
        segment_bytes: 2048,
        index_interval_bytes: 128,
        delete_retention_ms: 1000,
        min_cleanable_dirty_ratio: 0.5,
        ..LogConfig::default()
    }
}

fn keyed(key: &str, value: Option<&str>, codec: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(codec);
    builder.append(NOW, Some(key.as_bytes()), value.map(str::as_bytes), &[]);
    builder.build().unwrap()
}

#[test]
fn keeps_the_latest_value_per_key_and_expires_tombstones() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log_dir, mut log) = open(dir.path(), compacted());
    let mut latest = std::collections::BTreeMap::new();
    for round in 0..6 {
        for k in 0..10 {
            let codec = if k % 2 == 0 {
                Compression::Lz4
            } else {
                Compression::None
            };
            let value = format!("v{round}-{k}");
            let info = log
                .append(&keyed(&format!("k{k}"), Some(&value), codec), NOW, 0)
                .unwrap();
            latest.insert(format!("k{k}"), (info.first_offset, Some(value)));
        }
    }
    let info = log
        .append(&keyed("k3", None, Compression::None), NOW, 0)
        .unwrap();
    latest.insert("k3".into(), (info.first_offset, None));
    log.roll(NOW).unwrap();
    let leo = log.log_end_offset();
    let before = log.size();
    assert!(log.dirty_ratio(NOW, leo) > 0.99);
    assert_eq!(
        log.compact(NOW, 0).unwrap(),
        None,
        "nothing below the high watermark is cleanable"
    );

    let stats = log.compact(NOW, leo).unwrap().unwrap();
    assert_eq!(stats.records_removed, 51, "5 old values of 9 keys, 6 of k3");
    assert_eq!(stats.first_dirty_offset, leo);
    assert!(log.size() < before);
    let records = read_all(&mut log, 0);
    let got: std::collections::BTreeMap<String, (i64, Option<String>)> = records
        .iter()
        .map(|r| {
            let key = String::from_utf8(r.key.clone().unwrap()).unwrap();
            (
                key,
                (
                    r.offset,
                    r.value.clone().map(|v| String::from_utf8(v).unwrap()),
                ),
            )
        })
        .collect();
    assert_eq!(
        records.len(),
        10,
        "one record per key, the k3 tombstone included"
    );
    assert_eq!(got, latest, "offsets are preserved");
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(log.dirty_ratio(NOW, leo), 0.0);
    assert_eq!(
        log.compact(NOW, leo).unwrap(),
        None,
        "clean logs are left alone"
    );

    // New writes make the log dirty again; past the delete horizon the tombstone goes.
    for k in 0..10 {
        log.append(
            &keyed(&format!("k{k}"), Some("again"), Compression::Gzip),
            NOW,
            0,
        )
        .unwrap();
    }
    log.roll(NOW).unwrap();
    let leo = log.log_end_offset();
    let stats = log.compact(NOW + 5_000, leo).unwrap().unwrap();
    assert!(stats.records_removed >= 9);
    let records = read_all(&mut log, 0);
    assert_eq!(records.len(), 10);
    assert!(records
        .iter()
        .all(|r| r.value.as_deref() == Some(&b"again"[..])));

    log_dir.checkpoint([&log]).unwrap();
    let text = std::fs::read_to_string(dir.path().join("cleaner-offset-checkpoint")).unwrap();
    assert_eq!(text, format!("0\n1\norders 3 {leo}\n"));
    drop(log);
    let (_d, mut reopened) = open(dir.path(), compacted());
    assert_eq!(reopened.cleaner_offset(), Some(leo));
    assert_eq!(read_all(&mut reopened, 0).len(), 10);
}

#[test]
fn a_tombstone_gets_a_delete_horizon_first() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut log) = open(
        dir.path(),
        LogConfig {
            min_cleanable_dirty_ratio: 0.0,
            ..compacted()
        },
    );
    log.append(&keyed("a", Some("1"), Compression::None), NOW, 0)
        .unwrap();
    log.append(&keyed("a", None, Compression::None), NOW, 0)
        .unwrap();
    log.roll(NOW).unwrap();
    log.compact(NOW, 2).unwrap().unwrap();
    let bytes = log.read_batches(0, 1 << 20, 2).unwrap();
    let batch = gregor_log::batch::batches(&bytes).next().unwrap().unwrap();
    assert_eq!(batch.base_offset(), 1);
    assert_eq!(batch.delete_horizon_ms(), Some(NOW + 1000));
    assert_eq!(
        batch.owned_records().unwrap()[0].timestamp,
        NOW,
        "record timestamps survive the horizon"
    );
    assert!(batch.is_valid_crc());
}

#[test]
fn an_emptied_batch_is_kept_when_it_is_its_producers_last() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut log) = open(
        dir.path(),
        LogConfig {
            min_cleanable_dirty_ratio: 0.0,
            ..compacted()
        },
    );
    let producer_batch = |key: &str, seq: i32| {
        let mut b = BatchBuilder::new(Compression::None);
        b.producer_id = 77;
        b.producer_epoch = 0;
        b.base_sequence = seq;
        b.append(NOW, Some(key.as_bytes()), Some(b"x"), &[]);
        b.build().unwrap()
    };
    log.append(&producer_batch("a", 0), NOW, 0).unwrap();
    log.append(&producer_batch("b", 1), NOW, 0).unwrap();
    log.append(&keyed("a", Some("newer"), Compression::None), NOW, 0)
        .unwrap();
    log.append(&keyed("b", Some("newer"), Compression::None), NOW, 0)
        .unwrap();
    log.roll(NOW).unwrap();
    log.compact(NOW, 4).unwrap().unwrap();
    let bytes = log.read_batches(0, 1 << 20, 4).unwrap();
    let batches: Vec<RecordBatch<'_>> = gregor_log::batch::batches(&bytes)
        .map(Result::unwrap)
        .collect();
    // The producer's first batch went; its last stays as an empty header with its sequence.
    assert_eq!(batches.len(), 3);
    assert_eq!(
        (
            batches[0].base_offset(),
            batches[0].records_count(),
            batches[0].base_sequence()
        ),
        (1, 0, 1)
    );
    assert_eq!(batches[0].producer_id(), 77);
    // The producer can continue after a restart.
    drop(log);
    let (_d, mut log) = open(dir.path(), compacted());
    let mut next = BatchBuilder::new(Compression::None);
    next.producer_id = 77;
    next.producer_epoch = 0;
    next.base_sequence = 1;
    next.append(NOW, Some(b"c"), Some(b"x"), &[]);
    assert!(
        log.append(&next.build().unwrap(), NOW, 0)
            .unwrap()
            .duplicate,
        "sequence 1 is still known"
    );
}

#[test]
fn leftovers_of_an_interrupted_swap_are_resolved_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let part;
    let compacted_bytes;
    {
        let (_d, mut log) = open(
            dir.path(),
            LogConfig {
                min_cleanable_dirty_ratio: 0.0,
                ..compacted()
            },
        );
        for i in 0..5 {
            log.append(
                &keyed("same", Some(&format!("{i}")), Compression::None),
                NOW,
                0,
            )
            .unwrap();
        }
        part = log.dir().to_path_buf();
        log.roll(NOW).unwrap();
        let original = std::fs::read(part.join("00000000000000000000.log")).unwrap();
        log.compact(NOW, 5).unwrap().unwrap();
        compacted_bytes = std::fs::read(part.join("00000000000000000000.log")).unwrap();
        // Simulate a crash after the rename to .swap: old contents back in .log, new ones in .swap.
        std::fs::write(part.join("00000000000000000000.log"), &original).unwrap();
        std::fs::write(part.join("00000000000000000000.log.swap"), &compacted_bytes).unwrap();
        std::fs::write(
            part.join("00000000000000000005.log.cleaned"),
            b"half written",
        )
        .unwrap();
    }
    let (_d, mut log) = open(dir.path(), compacted());
    assert_eq!(
        std::fs::read(part.join("00000000000000000000.log")).unwrap(),
        compacted_bytes
    );
    assert!(!part.join("00000000000000000000.log.swap").exists());
    assert!(!part.join("00000000000000000005.log.cleaned").exists());
    let records = read_all(&mut log, 0);
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].offset, 4);
}
