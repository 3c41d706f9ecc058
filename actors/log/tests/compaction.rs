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
        log.compact(NOW, 0, &mut cleaner_map()).unwrap(),
        None,
        "nothing below the high watermark is cleanable"
    );

    let stats = log.compact(NOW, leo, &mut cleaner_map()).unwrap().unwrap();
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
        log.compact(NOW, leo, &mut cleaner_map()).unwrap(),
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
    let stats = log
        .compact(NOW + 5_000, leo, &mut cleaner_map())
        .unwrap()
        .unwrap();
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
    log.compact(NOW, 2, &mut cleaner_map()).unwrap().unwrap();
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
        let mut b = BatchBuilder::new(Compression::Lz4);
        b.producer_id = 77;
        b.producer_epoch = 0;
        b.base_sequence = seq;
        b.append(NOW + i64::from(seq), Some(key.as_bytes()), Some(b"x"), &[]);
        b.build().unwrap()
    };
    log.append(&producer_batch("a", 0), NOW, 0).unwrap();
    log.append(&producer_batch("b", 1), NOW, 0).unwrap();
    log.append(&keyed("a", Some("newer"), Compression::None), NOW, 0)
        .unwrap();
    log.append(&keyed("b", Some("newer"), Compression::None), NOW, 0)
        .unwrap();
    log.roll(NOW).unwrap();
    log.compact(NOW, 4, &mut cleaner_map()).unwrap().unwrap();
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
    // Kafka's `writeEmptyHeader`: a bare uncompressed header keeping the max timestamp (an lz4
    // batch emptied as an empty lz4 frame stopped librdkafka's consumers).
    assert_eq!(
        (
            batches[0].compression(),
            batches[0].size(),
            batches[0].max_timestamp(),
            batches[0].base_timestamp()
        ),
        (Some(Compression::None), 61, NOW + 1, -1)
    );
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
        log.compact(NOW, 5, &mut cleaner_map()).unwrap().unwrap();
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

/// A log of 6 rounds over 10 keys, rolled, so everything below its end is cleanable.
fn dirty_log(
    dir: &std::path::Path,
) -> (gregor_log::log_dir::LogDir, gregor_log::log::PartitionLog) {
    let (log_dir, mut log) = open(dir, compacted());
    write_rounds(&mut log, 6, 10, |round, k| format!("v{round}-{k}"));
    (log_dir, log)
}

/// `rounds` rounds of one uncompressed record for each of the keys `k0`.., then a roll.
fn write_rounds(
    log: &mut gregor_log::log::PartitionLog,
    rounds: usize,
    keys: usize,
    value: impl Fn(usize, usize) -> String,
) {
    for round in 0..rounds {
        for k in 0..keys {
            log.append(
                &keyed(&format!("k{k}"), Some(&value(round, k)), Compression::None),
                NOW,
                0,
            )
            .unwrap();
        }
    }
    log.roll(NOW).unwrap();
}

fn cleaned_files(dir: &std::path::Path) -> usize {
    walk(dir)
        .iter()
        .filter(|p| p.to_string_lossy().ends_with(".cleaned"))
        .count()
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            found.extend(walk(&path));
        } else {
            found.push(path);
        }
    }
    found
}

#[test]
fn a_pass_run_on_another_thread_is_installed_while_appends_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let (_log_dir, mut log) = dirty_log(dir.path());
    let leo = log.log_end_offset();
    let job = log.plan_cleaning(NOW, leo).unwrap().expect("dirty enough");
    let cleaner = std::thread::spawn(move || job.run(&mut cleaner_map()));
    // The owner keeps appending to the active segment while the cleaner reads sealed ones.
    for k in 0..10 {
        log.append(
            &keyed(&format!("k{k}"), Some("during"), Compression::None),
            NOW,
            0,
        )
        .unwrap();
    }
    let cleaned = cleaner.join().unwrap().unwrap();
    assert!(
        cleaned_files(dir.path()) > 0,
        "the pass waits in .cleaned files"
    );
    let stats = log.install_cleaned(Ok(cleaned), NOW).unwrap();
    assert_eq!(stats.records_removed, 50, "5 old values of each of 10 keys");
    assert_eq!(cleaned_files(dir.path()), 0);
    assert_eq!(log.cleaner_offset(), Some(leo));
    let records = read_all(&mut log, 0);
    assert_eq!(
        records.len(),
        20,
        "the latest value of each key, then the appends made during the pass"
    );
    assert!(records[..10]
        .iter()
        .all(|r| r.value.as_deref().unwrap().starts_with(b"v5-")));
    assert!(records[10..]
        .iter()
        .all(|r| r.value.as_deref() == Some(&b"during"[..])));
}

#[test]
fn a_pass_planned_before_a_truncation_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (_log_dir, mut log) = dirty_log(dir.path());
    let leo = log.log_end_offset();
    let job = log.plan_cleaning(NOW, leo).unwrap().expect("dirty enough");
    let cleaned = job.run(&mut cleaner_map()).unwrap();
    // A follower's truncation, then the leader's records again at the same offsets.
    log.truncate_to(leo - 15, NOW).unwrap();
    for k in 0..15 {
        log.append(
            &keyed(&format!("k{}", k % 10), Some("leader"), Compression::None),
            NOW,
            0,
        )
        .unwrap();
    }
    let before = read_all(&mut log, 0);
    let stats = log.install_cleaned(Ok(cleaned), NOW).unwrap();
    assert_eq!(stats.segments_replaced, 0);
    assert_eq!(
        cleaned_files(dir.path()),
        0,
        "the cleaned copies are removed"
    );
    assert_eq!(log.cleaner_offset(), None, "the next pass starts over");
    assert_eq!(read_all(&mut log, 0), before, "nothing was swapped in");
}

#[test]
fn a_discarded_pass_leaves_no_files() {
    let dir = tempfile::tempdir().unwrap();
    let (_log_dir, log) = dirty_log(dir.path());
    let job = log
        .plan_cleaning(NOW, log.log_end_offset())
        .unwrap()
        .expect("dirty enough");
    let cleaned = job.run(&mut cleaner_map()).unwrap();
    assert!(cleaned_files(dir.path()) > 0);
    cleaned.discard();
    assert_eq!(cleaned_files(dir.path()), 0);
}

#[test]
fn records_without_a_key_are_removed() {
    let dir = tempfile::tempdir().unwrap();
    // A compacted topic refuses keyless records; they come from its time as a deleting one.
    let (_d, mut log) = open(
        dir.path(),
        LogConfig {
            cleanup_compact: false,
            cleanup_delete: true,
            ..compacted()
        },
    );
    let mut batch = |records: &[(Option<&str>, &str)]| {
        let mut builder = BatchBuilder::new(Compression::None);
        for (key, value) in records {
            builder.append(NOW, key.map(str::as_bytes), Some(value.as_bytes()), &[]);
        }
        log.append(&builder.build().unwrap(), NOW, 0).unwrap();
    };
    for i in 0..3 {
        batch(&[(None, &format!("keyless {i}"))]);
    }
    batch(&[(Some("a"), "1")]);
    batch(&[(Some("a"), "2")]);
    batch(&[(None, "keyless 5"), (Some("b"), "1")]);
    log.roll(NOW).unwrap();
    log.set_config(LogConfig {
        min_cleanable_dirty_ratio: 0.0,
        ..compacted()
    });
    let stats = log.compact(NOW, 7, &mut cleaner_map()).unwrap().unwrap();
    assert_eq!(
        stats.records_removed, 5,
        "offsets 0, 1, 2 and 5 without a key, a@3"
    );
    assert_eq!(stats.tombstones_removed, 0);
    let kept: Vec<(i64, Option<Vec<u8>>)> = read_all(&mut log, 0)
        .into_iter()
        .map(|r| (r.offset, r.key))
        .collect();
    assert_eq!(
        kept,
        vec![(4, Some(b"a".to_vec())), (6, Some(b"b".to_vec()))]
    );
}

fn keyed_at(key: &str, value: &str, timestamp: i64) -> Vec<u8> {
    let mut builder = BatchBuilder::new(Compression::None);
    builder.append(timestamp, Some(key.as_bytes()), Some(value.as_bytes()), &[]);
    builder.build().unwrap()
}

#[test]
fn a_future_timestamp_does_not_stop_compaction_without_a_lag() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut log) = open(
        dir.path(),
        LogConfig {
            min_cleanable_dirty_ratio: 0.0,
            min_compaction_lag_ms: 0,
            ..compacted()
        },
    );
    log.append(&keyed_at("a", "future", NOW + 1_800_000), NOW, 0)
        .unwrap();
    log.append(&keyed_at("a", "now", NOW), NOW, 0).unwrap();
    log.roll(NOW).unwrap();
    let stats = log
        .compact(NOW, 2, &mut cleaner_map())
        .unwrap()
        .expect("cleanable at once");
    assert_eq!(stats.records_removed, 1);
    assert_eq!(stats.first_dirty_offset, 2);
}

#[test]
fn the_compaction_lag_is_checked_over_the_dirty_segments_only() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        min_cleanable_dirty_ratio: 0.0,
        min_compaction_lag_ms: 60_000,
        ..compacted()
    };
    let (_d, mut log) = open(dir.path(), config);
    // A segment with a record 30 minutes ahead, cleaned once that time has passed.
    log.append(&keyed_at("f", "future", NOW + 1_800_000), NOW, 0)
        .unwrap();
    log.append(&keyed_at("a", "1", NOW), NOW, 0).unwrap();
    log.roll(NOW).unwrap();
    assert_eq!(
        log.compact(NOW, 2, &mut cleaner_map()).unwrap(),
        None,
        "younger than the lag"
    );
    let later = NOW + 2_000_000;
    assert_eq!(
        log.compact(later, 2, &mut cleaner_map())
            .unwrap()
            .unwrap()
            .first_dirty_offset,
        2
    );
    // Dirty segments older than the lag are cleaned although the clean one is "younger".
    log.append(&keyed_at("a", "2", NOW), later, 0).unwrap();
    log.append(&keyed_at("a", "3", NOW), later, 0).unwrap();
    log.roll(later).unwrap();
    let back_then = NOW + 1_000_000;
    let stats = log
        .compact(back_then, 4, &mut cleaner_map())
        .unwrap()
        .expect("the dirty part is old enough");
    assert_eq!(stats.records_removed, 2, "a@1 and a@2");
    assert_eq!(stats.first_dirty_offset, 4);
}

#[test]
fn the_max_compaction_lag_forces_a_pass_below_the_dirty_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut log) = open(
        dir.path(),
        LogConfig {
            min_cleanable_dirty_ratio: 0.9,
            max_compaction_lag_ms: 60_000,
            ..compacted()
        },
    );
    for k in 0..10 {
        log.append(&keyed_at(&format!("k{k}"), "1", NOW), NOW, 0)
            .unwrap();
    }
    log.roll(NOW).unwrap();
    assert_eq!(
        log.compact(NOW, 10, &mut cleaner_map())
            .unwrap()
            .unwrap()
            .first_dirty_offset,
        10
    );
    log.append(&keyed_at("k0", "2", NOW), NOW, 0).unwrap();
    log.roll(NOW).unwrap();
    assert!(log.dirty_ratio(NOW, 11) < 0.1);
    assert_eq!(
        log.compact(NOW, 11, &mut cleaner_map()).unwrap(),
        None,
        "not dirty enough"
    );
    assert_eq!(
        log.compact(NOW + 60_000, 11, &mut cleaner_map()).unwrap(),
        None,
        "exactly at the max lag"
    );
    let stats = log
        .compact(NOW + 60_001, 11, &mut cleaner_map())
        .unwrap()
        .expect("overdue");
    assert_eq!(stats.records_removed, 1, "k0@0");
    assert_eq!(stats.first_dirty_offset, 11);
    assert_eq!(
        log.compact(NOW + 120_000, 11, &mut cleaner_map()).unwrap(),
        None,
        "nothing dirty left"
    );
}

/// The `.log`, `.index` and `.timeindex` files of a partition directory.
fn segment_files(part: &std::path::Path) -> (usize, usize) {
    let names: Vec<String> = std::fs::read_dir(part)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let logs = names.iter().filter(|n| n.ends_with(".log")).count();
    let all = names
        .iter()
        .filter(|n| n.ends_with(".log") || n.ends_with(".index") || n.ends_with(".timeindex"))
        .count();
    (logs, all)
}

#[test]
fn rolled_segments_of_one_key_are_merged_into_one() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut log) = open(
        dir.path(),
        LogConfig {
            segment_bytes: 1 << 20,
            ..compacted()
        },
    );
    let part = log.dir().to_path_buf();
    for round in 0..2 {
        for i in 0..150 {
            log.append(
                &keyed("same", Some(&format!("{round}-{i}")), Compression::None),
                NOW,
                0,
            )
            .unwrap();
            log.roll(NOW).unwrap();
        }
        let leo = log.log_end_offset();
        assert_eq!(log.segment_count(), 151 + round);
        let stats = log.compact(NOW, leo, &mut cleaner_map()).unwrap().unwrap();
        assert_eq!(stats.segments_replaced, 150 + round);
        assert_eq!(
            log.segment_base_offsets(),
            vec![0, leo],
            "one cleaned segment, the active one"
        );
        assert_eq!(segment_files(&part), (2, 6));
        let records = read_all(&mut log, 0);
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].offset, leo - 1);
        assert_eq!(
            records[0].value.as_deref(),
            Some(format!("{round}-149").as_bytes())
        );
    }
}

/// Where a crash stops the swap of the group at offset 10 (segments 10 to 19 into one).
#[derive(Debug, Clone, Copy)]
enum CrashPoint {
    /// The `.cleaned` file is written, nothing renamed.
    Cleaned,
    /// Renamed to `.swap`: the commit point.
    Swapped,
    /// Some of the replaced segments are deleted.
    SomeDeleted,
    /// All of them, and the first one's indexes.
    AllDeleted,
    /// The swap took the first segment's name; its indexes were not rebuilt.
    Renamed,
}

/// 30 rolled one-record segments over keys k0, k1, k2 in groups of 10, cleaned up to the point
/// of the crash at `point`, then reopened; returns the reopened log's segment bases and records.
fn crash_in_a_swap(point: CrashPoint) -> (Vec<i64>, Vec<(i64, String, String)>) {
    let dir = tempfile::tempdir().unwrap();
    let record = |i: i64| {
        keyed(
            &format!("k{}", i % 3),
            Some(&format!("v{i:03}")),
            Compression::None,
        )
    };
    let config = LogConfig {
        segment_bytes: 10 * record(0).len() as u64,
        ..compacted()
    };
    let part;
    {
        let (_d, mut log) = open(dir.path(), config.clone());
        for i in 0..30 {
            log.append(&record(i), NOW, 0).unwrap();
            log.roll(NOW).unwrap();
        }
        part = log.dir().to_path_buf();
        let cleaned = log
            .plan_cleaning(NOW, 30)
            .unwrap()
            .unwrap()
            .run(&mut cleaner_map())
            .unwrap();
        assert_eq!(cleaned_files(&part), 3, "one file per group of 10");
        // The pass is never installed: its files are left as the crash left them.
        drop(cleaned);
    }
    let file = |base: i64, suffix: &str| part.join(format!("{base:020}.{suffix}"));
    let remove_segment = |base: i64| {
        for suffix in ["log", "index", "timeindex"] {
            std::fs::remove_file(file(base, suffix)).unwrap();
        }
    };
    if !matches!(point, CrashPoint::Cleaned) {
        std::fs::rename(file(10, "log.cleaned"), file(10, "log.swap")).unwrap();
    }
    match point {
        CrashPoint::Cleaned | CrashPoint::Swapped => {}
        CrashPoint::SomeDeleted => (11..15).for_each(remove_segment),
        CrashPoint::AllDeleted | CrashPoint::Renamed => {
            (11..20).for_each(remove_segment);
            std::fs::remove_file(file(10, "index")).unwrap();
            std::fs::remove_file(file(10, "timeindex")).unwrap();
        }
    }
    if matches!(point, CrashPoint::Renamed) {
        std::fs::rename(file(10, "log.swap"), file(10, "log")).unwrap();
    }
    let (_d, mut log) = open(dir.path(), config);
    assert_eq!(cleaned_files(&part), 0);
    assert!(!file(10, "log.swap").exists());
    let records = read_all(&mut log, 0)
        .into_iter()
        .map(|r| {
            let text = |b: Option<Vec<u8>>| String::from_utf8(b.unwrap()).unwrap();
            (r.offset, text(r.key), text(r.value))
        })
        .collect();
    let bases = log.segment_base_offsets();
    // The recovered log cleans as any other: three groups of at most 10 segments' bytes.
    log.compact(NOW, 30, &mut cleaner_map()).unwrap().unwrap();
    assert_eq!(log.segment_count(), 4, "{point:?}");
    let latest: Vec<i64> = read_all(&mut log, 0).iter().map(|r| r.offset).collect();
    assert_eq!(latest, vec![27, 28, 29], "{point:?}");
    (bases, records)
}

#[test]
fn a_crash_in_a_merging_swap_leaves_the_old_or_the_new_segments() {
    let all: Vec<i64> = (0..30).collect();
    let expected = |offsets: &[i64]| -> Vec<(i64, String, String)> {
        offsets
            .iter()
            .map(|&i| (i, format!("k{}", i % 3), format!("v{i:03}")))
            .collect()
    };
    let (bases, records) = crash_in_a_swap(CrashPoint::Cleaned);
    assert_eq!(
        bases,
        (0..=30).collect::<Vec<_>>(),
        "rolled back: every segment as it was"
    );
    assert_eq!(records, expected(&all));
    // From the commit point on, segments 10 to 19 are one segment, whose offsets end at 20 (its
    // last batch kept, emptied): its superseded records went, the other groups are untouched.
    let finished: Vec<i64> = (0..=10).chain(20..=30).collect();
    let kept: Vec<i64> = (0..10).chain(20..30).collect();
    for point in [
        CrashPoint::Swapped,
        CrashPoint::SomeDeleted,
        CrashPoint::AllDeleted,
        CrashPoint::Renamed,
    ] {
        let (bases, records) = crash_in_a_swap(point);
        assert_eq!(bases, finished, "{point:?}");
        assert_eq!(records, expected(&kept), "{point:?}");
    }
}

/// One large segment, cleaned as soon as anything is dirty.
fn cleaned_whatever_its_ratio() -> LogConfig {
    LogConfig {
        segment_bytes: 1 << 20,
        min_cleanable_dirty_ratio: 0.0,
        ..compacted()
    }
}

/// Kafka's `buildOffsetMap` with a map too small for the dirty part: each pass cleans up to
/// where the map filled (the last batch mapped whole) and the next starts there, so a log with
/// more distinct keys than the map holds is compacted in several bounded passes, to the same
/// records one large map leaves.
#[test]
fn a_full_offset_map_cleans_up_to_where_it_filled_and_the_next_pass_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (_log_dir, mut log) = open(dir.path(), cleaned_whatever_its_ratio());
    // k0..k39 at offsets 0..39, then again at 40..79.
    write_rounds(&mut log, 2, 40, |round, _| format!("v{round}"));
    let leo = log.log_end_offset();
    assert_eq!(leo, 80);
    // 800 bytes hold 32 slots; half of them may be filled.
    let mut small = gregor_log::cleaner::OffsetMap::new(800, 0.5);
    assert_eq!(small.capacity(), 16);
    let mut passes = Vec::new();
    while let Some(stats) = log.compact(NOW, leo, &mut small).unwrap() {
        passes.push((stats.first_dirty_offset, stats.records_removed));
        assert!(passes.len() <= 5, "{passes:?}");
    }
    assert_eq!(
        passes,
        [(16, 0), (32, 0), (48, 8), (64, 16), (80, 16)],
        "k0..k15, k16..k31, k32..k39 with the new k0..k7, the new k8..k23, the new k24..k39"
    );
    let records = read_all(&mut log, 0);
    let got: Vec<(i64, String, String)> = records
        .iter()
        .map(|r| {
            (
                r.offset,
                String::from_utf8(r.key.clone().unwrap()).unwrap(),
                String::from_utf8(r.value.clone().unwrap()).unwrap(),
            )
        })
        .collect();
    let expected: Vec<(i64, String, String)> = (0..40)
        .map(|k| (40 + k, format!("k{k}"), "v1".to_owned()))
        .collect();
    assert_eq!(got, expected);
}

/// The first dirty batch is mapped whole even when it holds more keys than the map, so every
/// pass moves the cleaner checkpoint on; keys the map holds are still updated once it is full.
#[test]
fn a_first_batch_larger_than_the_map_is_mapped_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (_log_dir, mut log) = open(dir.path(), cleaned_whatever_its_ratio());
    let mut builder = BatchBuilder::new(Compression::None);
    for k in 0..20 {
        builder.append(NOW, Some(format!("k{k}").as_bytes()), Some(b"old"), &[]);
    }
    log.append(&builder.build().unwrap(), NOW, 0).unwrap();
    // Offsets 20..29: k0..k9 again, then x0, x1, a key new to the map.
    for key in (0..10)
        .map(|k| format!("k{k}"))
        .chain(["x0".into(), "x1".into()])
    {
        log.append(&keyed(&key, Some("new"), Compression::None), NOW, 0)
            .unwrap();
    }
    log.roll(NOW).unwrap();
    let mut small = gregor_log::cleaner::OffsetMap::new(800, 0.25);
    assert_eq!(small.capacity(), 8);
    let first = log.compact(NOW, 32, &mut small).unwrap().unwrap();
    assert_eq!(
        (first.first_dirty_offset, first.records_removed),
        (30, 10),
        "the batch mapped whole, k0..k9 updated, x0 refused"
    );
    let second = log.compact(NOW, 32, &mut small).unwrap().unwrap();
    assert_eq!((second.first_dirty_offset, second.records_removed), (32, 0));
    assert_eq!(log.compact(NOW, 32, &mut small).unwrap(), None);
    let offsets: Vec<i64> = read_all(&mut log, 0).iter().map(|r| r.offset).collect();
    let expected: Vec<i64> = (10..32).collect();
    assert_eq!(offsets, expected);
}

/// Kafka's `MemoryRecords.filterTo` rebuilds a cleaned batch at its codec's default level: the
/// topic's `compression.gzip.level` does not change the cleaned bytes.
#[test]
fn a_rebuilt_batch_is_compressed_at_its_codecs_default_level() {
    let cleaned_with = |gzip_level: i32| {
        let dir = tempfile::tempdir().unwrap();
        let mut config = cleaned_whatever_its_ratio();
        config.compression_levels.gzip = gzip_level;
        let (_log_dir, mut log) = open(dir.path(), config);
        let mut builder = BatchBuilder::new(Compression::Gzip);
        for k in 0..50 {
            let value = format!("value {k} {}", "abcdefgh".repeat(20));
            builder.append(
                NOW,
                Some(format!("k{k}").as_bytes()),
                Some(value.as_bytes()),
                &[],
            );
        }
        log.append(&builder.build().unwrap(), NOW, 0).unwrap();
        log.append(&keyed("k0", Some("newer"), Compression::None), NOW, 0)
            .unwrap();
        log.roll(NOW).unwrap();
        let stats = log.compact(NOW, 51, &mut cleaner_map()).unwrap().unwrap();
        assert_eq!(stats.records_removed, 1);
        log.read_batches(0, 1 << 20, 51).unwrap().to_vec()
    };
    assert_eq!(cleaned_with(1), cleaned_with(9));
}
