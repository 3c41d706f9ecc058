//! Partition logs on disk: append, read, roll, indexes, recovery, retention, truncation, idempotence.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use gregor_log::batch::RecordBatch;
use gregor_log::compression::Compression;
use gregor_log::config::LogConfig;
use gregor_log::error::{KafkaCode, LogError};
use gregor_log::files::FileCache;
use gregor_log::log::OffsetMatch;
use gregor_log::segment;

#[test]
fn appends_assign_offsets_roll_segments_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let (_log_dir, mut log) = open(dir.path(), small_config());
    let mut expected = Vec::new();
    for i in 0..60u64 {
        let bytes = client_batch(i, 3, Compression::None, NOW);
        expected.extend(
            RecordBatch::new(&bytes)
                .unwrap()
                .owned_records()
                .unwrap()
                .into_iter()
                .map(|r| (r.key, r.value)),
        );
        let info = log.append(&bytes, NOW, 0).unwrap();
        assert_eq!(
            (info.first_offset, info.last_offset, info.log_append_time),
            (3 * i as i64, 3 * i as i64 + 2, -1)
        );
        assert!(!info.duplicate);
    }
    assert_eq!(log.log_end_offset(), 180);
    assert!(log.segment_count() >= 3, "4 KiB segments roll");
    let part = dir.path().join("orders-3");
    for base in log.segment_base_offsets() {
        assert!(part.join(format!("{base:020}.log")).exists());
        assert!(part.join(format!("{base:020}.index")).exists());
        assert!(part.join(format!("{base:020}.timeindex")).exists());
    }
    assert!(
        part.join(format!("{:020}.snapshot", log.segment_base_offsets()[1]))
            .exists(),
        "a snapshot per roll"
    );
    let records = read_all(&mut log, 0);
    assert_eq!(
        records.iter().map(|r| r.offset).collect::<Vec<_>>(),
        (0..180).collect::<Vec<_>>()
    );
    assert_eq!(
        records
            .into_iter()
            .map(|r| (r.key, r.value))
            .collect::<Vec<_>>(),
        expected
    );
    // Every offset finds the batch that holds it.
    for offset in 0..180 {
        let info = log.read(offset, 1, 180, true).unwrap();
        let bytes = info.slice.unwrap().read().unwrap();
        let batch = RecordBatch::new(&bytes).unwrap();
        assert!(batch.base_offset() <= offset && offset <= batch.last_offset());
        assert_eq!(info.first_batch_offset, batch.base_offset());
    }
}

#[test]
fn read_limits_follow_kafka() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut log) = open(dir.path(), LogConfig::default());
    // Uncompressed batches are stored as they are produced.
    let sizes: Vec<u64> = (0..5)
        .map(|i| {
            let batch = client_batch(i, 2, Compression::None, NOW);
            log.append(&batch, NOW, 0).unwrap();
            batch.len() as u64
        })
        .collect();
    assert_eq!(log.log_end_offset(), 10);
    assert!(
        log.read(10, 100, 10, true).unwrap().slice.is_none(),
        "at the LEO: nothing, no error"
    );
    assert!(matches!(
        log.read(11, 100, 10, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert_eq!(
        log.read(11, 100, 10, true).unwrap_err().kafka_code(),
        KafkaCode::OffsetOutOfRange
    );
    // The first batch is returned whole even when larger than max bytes.
    let info = log.read(0, 1, 10, true).unwrap();
    assert_eq!(info.slice.unwrap().len, sizes[0]);
    // Without min-one-batch the limit is strict (Kafka slices raw bytes).
    assert_eq!(log.read(0, 1, 10, false).unwrap().slice.unwrap().len, 1);
    // The high watermark bounds what is returned.
    let info = log.read(0, 1 << 20, 4, true).unwrap();
    assert_eq!(info.slice.unwrap().len, sizes[0] + sizes[1]);
    assert!(
        log.read(4, 1 << 20, 4, true).unwrap().slice.is_none(),
        "in (HW, LEO]: empty"
    );
    // A fetch from the middle of a batch starts at that batch.
    let info = log.read(3, 1 << 20, 10, true).unwrap();
    assert_eq!(info.first_batch_offset, 2);
    assert_eq!(info.slice.unwrap().len, sizes[1..].iter().sum::<u64>());
}

#[test]
fn lookups_by_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut log) = open(dir.path(), small_config());
    // Leader epoch 0 for the first 20 batches, 3 from batch 20 (offset 40) on.
    for i in 0..40u64 {
        log.append(
            &client_batch(i, 2, Compression::Gzip, NOW + 10 * i as i64),
            NOW + 1000,
            if i < 20 { 0 } else { 3 },
        )
        .unwrap();
    }
    let found = |offset, timestamp, leader_epoch| {
        Some(OffsetMatch {
            offset,
            timestamp,
            leader_epoch,
        })
    };
    // Batch i holds offsets 2i, 2i+1 with timestamps NOW+10i, NOW+10i+1.
    assert_eq!(log.offset_for_timestamp(NOW).unwrap(), found(0, NOW, 0));
    assert_eq!(
        log.offset_for_timestamp(NOW + 101).unwrap(),
        found(21, NOW + 101, 0)
    );
    assert_eq!(
        log.offset_for_timestamp(NOW + 102).unwrap(),
        found(22, NOW + 110, 0)
    );
    assert_eq!(
        log.offset_for_timestamp(NOW + 391).unwrap(),
        found(79, NOW + 391, 3)
    );
    assert_eq!(log.offset_for_timestamp(NOW + 392).unwrap(), None);
    assert_eq!(log.max_timestamp_offset().unwrap(), found(79, NOW + 391, 3));
    assert_eq!(log.log_start_epoch(), 0);
    // The start moved into epoch 3: the earliest offset carries that epoch.
    log.delete_records_before(50).unwrap();
    assert_eq!(log.log_start_epoch(), 3);
    assert_eq!(
        log.offset_for_timestamp(NOW).unwrap(),
        found(50, NOW + 250, 3)
    );
}

#[test]
fn idempotent_retries_get_the_original_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut log) = open(dir.path(), LogConfig::default());
    log.append(&client_batch(1, 1, Compression::None, NOW), NOW, 0)
        .unwrap();
    let first = log.append(&idempotent_batch(42, 0, 0, 3), NOW, 0).unwrap();
    assert_eq!((first.first_offset, first.last_offset), (1, 3));
    let second = log.append(&idempotent_batch(42, 0, 3, 2), NOW, 0).unwrap();
    assert_eq!(second.first_offset, 4);
    let retry = log
        .append(&idempotent_batch(42, 0, 0, 3), NOW + 5, 0)
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!((retry.first_offset, retry.last_offset), (1, 3));
    assert_eq!(log.log_end_offset(), 6, "nothing appended for a duplicate");
    let gap = log
        .append(&idempotent_batch(42, 0, 9, 1), NOW, 0)
        .unwrap_err();
    assert_eq!(gap.kafka_code(), KafkaCode::OutOfOrderSequenceNumber);
    let fenced = log.append(&idempotent_batch(42, -1, 5, 1), NOW, 0);
    assert!(
        fenced.is_err(),
        "a validated batch with epoch −1 and producer id ≥ 0"
    );
    log.append(&idempotent_batch(42, 1, 0, 1), NOW, 0).unwrap();
    assert_eq!(
        log.append(&idempotent_batch(42, 0, 5, 1), NOW, 0)
            .unwrap_err()
            .kafka_code(),
        KafkaCode::InvalidProducerEpoch
    );
    let producers: Vec<_> = log.producers().collect();
    assert_eq!(producers.len(), 1);
    assert_eq!((producers[0].epoch, producers[0].last_seq()), (1, 0));
}

#[test]
fn producers_outlive_their_records_until_they_expire() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        file_delete_delay_ms: 0,
        ..small_config()
    };
    let (mut log_dir, mut log) = open(dir.path(), config.clone());
    for i in 0..3 {
        log.append(&idempotent_batch(7, 0, i, 1), NOW, 0).unwrap();
    }
    log.delete_records_before(3).unwrap();
    let retry = log.append(&idempotent_batch(7, 0, 2, 1), NOW, 0).unwrap();
    assert!(retry.duplicate, "a retry of a batch below the log start");
    assert_eq!((retry.first_offset, log.log_end_offset()), (2, 3));
    assert_eq!(
        log.append(&idempotent_batch(7, 0, 10, 1), NOW, 0)
            .unwrap_err()
            .kafka_code(),
        KafkaCode::OutOfOrderSequenceNumber,
        "a gap is refused though the producer's records are gone"
    );

    // Retention deletes every segment holding producer 8's records.
    log.append(&idempotent_batch(8, 0, 0, 2), NOW, 0).unwrap();
    for i in 0..200u64 {
        log.append(&client_batch(i, 2, Compression::None, NOW), NOW, 0)
            .unwrap();
    }
    let leo = log.log_end_offset();
    let mut shorter = config.clone();
    shorter.retention_bytes = 4096;
    log.set_config(shorter);
    log.enforce_retention(NOW, leo).unwrap();
    assert!(log.log_start_offset() > 4);
    let retry = log.append(&idempotent_batch(8, 0, 0, 2), NOW, 0).unwrap();
    assert!(retry.duplicate && retry.first_offset == 3);

    // A clean restart keeps them (the snapshot at the log end holds them); expiry forgets them.
    log_dir.shutdown([&mut log], 1, NOW).unwrap();
    drop((log_dir, log));
    let (_d, mut log) = open(dir.path(), config);
    let producers: Vec<i64> = log.producers().map(|p| p.producer_id).collect();
    assert_eq!(producers.len(), 2, "{producers:?}");
    assert!(
        log.append(&idempotent_batch(8, 0, 0, 2), NOW, 0)
            .unwrap()
            .duplicate
    );
    assert_eq!(log.remove_expired_producers(NOW + 1_000, 1_000), 2);
    let first = log.append(&idempotent_batch(7, 0, 10, 1), NOW, 0).unwrap();
    assert!(!first.duplicate, "an expired producer starts afresh");
}

#[test]
fn unclean_shutdown_truncates_a_torn_tail_and_keeps_producer_state() {
    let dir = tempfile::tempdir().unwrap();
    let active_path;
    {
        let (_d, mut log) = open(dir.path(), small_config());
        for i in 0..30u64 {
            log.append(&client_batch(i, 2, Compression::Snappy, NOW), NOW, 0)
                .unwrap();
        }
        log.append(&idempotent_batch(7, 0, 0, 2), NOW, 0).unwrap();
        assert_eq!(log.log_end_offset(), 62);
        active_path = segment::log_path(log.dir(), *log.segment_base_offsets().last().unwrap());
        // Dropped without close: a kill -9 (the OS keeps what was written).
    }
    let good_len = std::fs::metadata(&active_path).unwrap().len();
    let mut garbage = std::fs::read(&active_path).unwrap();
    garbage.extend_from_slice(&[0u8, 0, 0, 0, 0, 0, 0, 99, 0, 0, 1, 0, 0xff, 0xff]);
    std::fs::write(&active_path, &garbage).unwrap();

    let (log_dir, mut log) = open(dir.path(), small_config());
    assert!(!log_dir.had_clean_shutdown());
    assert_eq!(log.log_end_offset(), 62);
    assert_eq!(log.recovered_truncated_bytes(), 14);
    assert_eq!(std::fs::metadata(&active_path).unwrap().len(), good_len);
    assert_eq!(read_all(&mut log, 0).len(), 62);
    let retry = log.append(&idempotent_batch(7, 0, 0, 2), NOW, 0).unwrap();
    assert!(
        retry.duplicate,
        "producer state was rebuilt by replaying the log"
    );
    assert_eq!(retry.first_offset, 60);
    assert_eq!(
        log.append(&client_batch(99, 1, Compression::None, NOW), NOW, 0)
            .unwrap()
            .first_offset,
        62
    );
}

#[test]
fn recovery_keeps_each_segments_largest_timestamp_in_its_time_index() {
    let dir = tempfile::tempdir().unwrap();
    // Room for one batch of one record per segment.
    let config = LogConfig {
        segment_bytes: 100,
        ..LogConfig::default()
    };
    let bases;
    {
        let (_d, mut log) = open(dir.path(), config.clone());
        for i in 0..3u64 {
            log.append(
                &client_batch(i, 1, Compression::None, NOW + i as i64),
                NOW,
                0,
            )
            .unwrap();
        }
        bases = log.segment_base_offsets();
        // Dropped without close: a kill -9.
    }
    assert_eq!(bases, vec![0, 1, 2]);
    let (log_dir, log) = open(dir.path(), config);
    assert!(!log_dir.had_clean_shutdown());
    for base in bases {
        let time_index = log.dir().join(format!("{base:020}.timeindex"));
        let entries = std::fs::read(&time_index).unwrap();
        // One entry of 12 bytes: the batch's timestamp, at relative offset 0.
        let timestamp = NOW + base;
        let mut expected = timestamp.to_be_bytes().to_vec();
        expected.extend_from_slice(&0u32.to_be_bytes());
        assert_eq!(entries.get(..12), Some(&expected[..]), "segment {base}");
    }
}

#[test]
fn recovery_after_cutting_the_last_batch_at_every_byte() {
    let batches: Vec<Vec<u8>> = (0..3)
        .map(|i| client_batch(i, 2, Compression::Zstd, NOW))
        .collect();
    let total: usize = batches.iter().map(Vec::len).sum();
    let last_len = batches[2].len();
    for cut in 1..=last_len {
        let dir = tempfile::tempdir().unwrap();
        let path;
        {
            let (_d, mut log) = open(dir.path(), LogConfig::default());
            for b in &batches {
                log.append(b, NOW, 0).unwrap();
            }
            path = segment::log_path(log.dir(), 0);
        }
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len((total - cut) as u64)
            .unwrap();
        let (_d, mut log) = open(dir.path(), LogConfig::default());
        assert_eq!(log.log_end_offset(), 4, "cut {cut}");
        assert_eq!(
            log.recovered_truncated_bytes(),
            (last_len - cut) as u64,
            "cut {cut}"
        );
        assert_eq!(read_all(&mut log, 0).len(), 4);
        assert_eq!(log.append(&batches[2], NOW, 0).unwrap().first_offset, 4);
    }
}

#[test]
fn a_corrupt_batch_in_the_middle_drops_everything_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let sizes: Vec<u64>;
    {
        let (_d, mut log) = open(dir.path(), LogConfig::default());
        // Uncompressed batches are stored as they are produced.
        sizes = (0..5)
            .map(|i| {
                let batch = client_batch(i, 1, Compression::None, NOW);
                log.append(&batch, NOW, 0).unwrap();
                batch.len() as u64
            })
            .collect();
    }
    let path = segment::log_path(&dir.path().join("orders-3"), 0);
    let mut bytes = std::fs::read(&path).unwrap();
    let third = (sizes[0] + sizes[1]) as usize;
    bytes[third + 70] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();
    let (_d, mut log) = open(dir.path(), LogConfig::default());
    assert_eq!(log.log_end_offset(), 2);
    assert_eq!(read_all(&mut log, 0).len(), 2);
}

/// A broker's log shard defers the fsync of rolled segments (Kafka's `flush-log` task): the
/// recovery point moves past a segment only once its flush is reported, and not after a
/// truncation since the roll, whose records above the cut are gone.
#[test]
fn deferred_rolls_move_the_recovery_point_once_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let (_log_dir, mut log) = open(dir.path(), small_config());
    log.defer_rolled_flushes();
    for i in 0..80u64 {
        log.append(&client_batch(i, 2, Compression::None, NOW), NOW, 0)
            .unwrap();
    }
    let bases = log.segment_base_offsets();
    assert!(bases.len() >= 3);
    assert_eq!(log.recovery_point(), 0, "nothing flushed yet");
    let rolled = log.take_rolled();
    assert_eq!(
        rolled.iter().map(|r| r.up_to()).collect::<Vec<_>>(),
        bases[1..].to_vec(),
        "one per roll, in order"
    );
    assert!(log.take_rolled().is_empty());
    for segment in &rolled[..rolled.len() - 1] {
        segment.flush().unwrap();
        log.rolled_flushed(segment).unwrap();
    }
    assert_eq!(log.recovery_point(), bases[bases.len() - 2]);

    // A truncation below the last roll makes its report stale.
    let last = rolled.last().unwrap();
    log.truncate_to(last.up_to() - 1, NOW).unwrap();
    last.flush().unwrap();
    log.rolled_flushed(last).unwrap();
    assert_eq!(log.recovery_point(), bases[bases.len() - 2]);
    assert!(log.recovery_point() <= log.log_end_offset());
}

#[test]
fn only_segments_from_the_recovery_point_are_scanned() {
    let dir = tempfile::tempdir().unwrap();
    let first_segment;
    {
        let (mut log_dir, mut log) = open(dir.path(), small_config());
        for i in 0..80u64 {
            log.append(&client_batch(i, 2, Compression::None, NOW), NOW, 0)
                .unwrap();
        }
        assert!(log.segment_count() >= 3);
        assert!(
            log.recovery_point() >= log.segment_base_offsets()[1],
            "rolls flush and move the recovery point"
        );
        log_dir.checkpoint([&log]).unwrap();
        first_segment = segment::log_path(log.dir(), 0);
    }
    // Damage the first segment (below the recovery point): it is trusted, not rescanned.
    let mut bytes = std::fs::read(&first_segment).unwrap();
    let len = bytes.len();
    bytes[len - 5] ^= 0xff;
    std::fs::write(&first_segment, &bytes).unwrap();
    let (_d, log) = open(dir.path(), small_config());
    assert_eq!(log.log_end_offset(), 160);
    assert_eq!(log.recovered_truncated_bytes(), 0);
    assert_eq!(std::fs::metadata(&first_segment).unwrap().len(), len as u64);
}

#[test]
fn clean_shutdown_writes_the_marker_and_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (mut log_dir, mut log) = open(dir.path(), small_config());
        for i in 0..10u64 {
            log.append(&idempotent_batch(5, 0, 2 * i as i32, 2), NOW, 4)
                .unwrap();
        }
        log_dir.shutdown([&mut log], 17, NOW).unwrap();
        assert!(log.dir().join(format!("{:020}.snapshot", 20)).exists());
    }
    let marker = dir.path().join(gregor_log::log_dir::CLEAN_SHUTDOWN_FILE);
    assert_eq!(
        std::fs::read_to_string(&marker).unwrap(),
        "{\"version\":0,\"brokerEpoch\":17}"
    );
    let rp = std::fs::read_to_string(dir.path().join("recovery-point-offset-checkpoint")).unwrap();
    assert_eq!(rp, "0\n1\norders 3 20\n");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("log-start-offset-checkpoint")).unwrap(),
        "0\n1\norders 3 0\n"
    );
    let (log_dir, mut log) = open(dir.path(), small_config());
    assert!(log_dir.had_clean_shutdown());
    assert!(!marker.exists(), "consumed on open");
    assert!(
        log.append(&idempotent_batch(5, 0, 18, 2), NOW, 4)
            .unwrap()
            .duplicate
    );
    assert_eq!(
        std::fs::read_to_string(log.dir().join("leader-epoch-checkpoint")).unwrap(),
        "0\n1\n4 0\n"
    );
    assert!(
        std::fs::read_to_string(log.dir().join("partition.metadata"))
            .unwrap()
            .starts_with("version: 0\ntopic_id: ")
    );
}

#[test]
fn retention_by_size_time_and_log_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_bytes: 8192,
        file_delete_delay_ms: 0,
        ..small_config()
    };
    let (_d, mut log) = open(dir.path(), config);
    for i in 0..100u64 {
        log.append(
            &client_batch(i, 2, Compression::None, NOW + i as i64),
            NOW,
            0,
        )
        .unwrap();
    }
    let before = log.size();
    let leo = log.log_end_offset();
    // Nothing above the high watermark goes.
    assert_eq!(log.enforce_retention(NOW, 0).unwrap().segments_deleted, 0);
    let info = log.enforce_retention(NOW, leo).unwrap();
    assert!(info.segments_deleted > 0);
    assert!(
        log.size() <= 8192 + 4096 && log.size() >= 8192 - 4096,
        "{} of {before}",
        log.size()
    );
    assert_eq!(log.log_start_offset(), log.segment_base_offsets()[0]);
    assert_eq!(info.log_start_offset, log.log_start_offset());
    assert!(matches!(
        log.read(0, 100, leo, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));

    // DeleteRecords moves the log start; the segments below it go at the next pass.
    let start = log.log_start_offset();
    log.delete_records_before(start + 50).unwrap();
    assert_eq!(log.log_start_offset(), start + 50);
    log.enforce_retention(NOW, leo).unwrap();
    assert!(log.segment_base_offsets()[0] <= start + 50);
    assert_eq!(
        read_all(&mut log, start + 50).first().unwrap().offset,
        start + 50
    );

    // By time: every segment is older than retention.ms; a new active segment remains.
    let mut config = log.config().clone();
    config.retention_ms = 1000;
    config.retention_bytes = -1;
    log.set_config(config);
    log.enforce_retention(NOW + 100_000, leo).unwrap();
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.log_start_offset(), leo);
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(log.size(), 0);
    assert_eq!(
        log.append(&client_batch(1, 1, Compression::None, NOW), NOW, 0)
            .unwrap()
            .first_offset,
        leo
    );
    let leftovers: Vec<_> = std::fs::read_dir(log.dir())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".deleted"))
        .collect();
    assert!(
        leftovers.is_empty(),
        "file.delete.delay.ms 0 removes them at once"
    );
}

#[test]
fn truncate_to_rewinds_the_log_epochs_and_producers() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut log) = open(dir.path(), small_config());
    for i in 0..40 {
        log.append(
            &idempotent_batch(3, 0, 2 * i, 2),
            NOW,
            if i < 20 { 1 } else { 2 },
        )
        .unwrap();
    }
    assert_eq!(log.leader_epochs().entries(), &[(1, 0), (2, 40)]);
    log.truncate_to(30, NOW).unwrap();
    assert_eq!(log.log_end_offset(), 30);
    assert_eq!(log.leader_epochs().entries(), &[(1, 0)]);
    assert_eq!(log.end_offset_for_epoch(1), (1, 30));
    // Producer state rolled back: sequence 30 is next again.
    assert_eq!(
        log.append(&idempotent_batch(3, 0, 30, 2), NOW, 3)
            .unwrap()
            .first_offset,
        30
    );
    assert_eq!(read_all(&mut log, 0).len(), 32);
    // Truncating below the log start empties the log at that offset.
    log.delete_records_before(20).unwrap();
    log.truncate_to(10, NOW).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.segment_count()
        ),
        (10, 10, 1)
    );
}

/// A replica that became leader (epoch 2) and appended nothing before another leader took over
/// keeps `2@20` in its cache; the new leader's history has epoch 3 there. Truncating to its own
/// log end (what the divergence answer asks) must drop that entry, on disk too, or every next
/// fetch names epoch 2 and diverges again.
#[test]
fn truncating_to_the_log_end_drops_an_epoch_with_no_records() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut log) = open(dir.path(), small_config());
    for i in 0..10 {
        log.append(&client_batch(i, 2, Compression::None, NOW), NOW, 0)
            .unwrap();
    }
    log.assign_leader_epoch(2).unwrap();
    assert_eq!(log.leader_epochs().entries(), &[(0, 0), (2, 20)]);
    log.truncate_to(20, NOW).unwrap();
    assert_eq!(log.log_end_offset(), 20);
    assert_eq!(log.leader_epochs().entries(), &[(0, 0)]);
    assert_eq!(log.latest_epoch(), Some(0));
    assert_eq!(
        gregor_log::checkpoint::read_epochs(
            &log.dir()
                .join(gregor_log::checkpoint::LEADER_EPOCH_CHECKPOINT)
        )
        .unwrap(),
        vec![(0, 0)]
    );
}

#[test]
fn io_failures_mark_the_log_dir_offline() {
    let dir = tempfile::tempdir().unwrap();
    let (log_dir, mut log) = open_with_cache(dir.path(), LogConfig::default(), FileCache::new(1));
    log.append(&client_batch(1, 1, Compression::None, NOW), NOW, 0)
        .unwrap();
    // Losing the segment file under the broker: the next write cannot reopen it.
    std::fs::remove_file(segment::log_path(log.dir(), 0)).unwrap();
    log_dir.files().forget(&segment::log_path(log.dir(), 0));
    let err = log
        .append(&client_batch(2, 1, Compression::None, NOW), NOW, 0)
        .unwrap_err();
    assert_eq!(err.kafka_code(), KafkaCode::KafkaStorageError);
    assert!(log_dir.is_offline());
    let err = log.read(0, 100, 1, true).unwrap_err();
    assert!(matches!(err, LogError::LogDirOffline(_)));
    assert_eq!(err.kafka_code(), KafkaCode::KafkaStorageError);
    assert!(log_dir
        .open_log(
            gregor_log::checkpoint::TopicPartition::new("other", 0),
            None,
            LogConfig::default(),
            NOW
        )
        .is_err());
}

/// The owner's one sync of a log dir after a batch of new and deleted logs: a dir that
/// cannot be synced goes offline like any other storage failure.
#[test]
fn a_log_dir_that_cannot_be_synced_goes_offline() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("logs");
    let (log_dir, _log) = open(&path, LogConfig::default());
    let shared = log_dir.shared();
    shared.sync_directory().unwrap();
    assert!(!log_dir.is_offline());
    std::fs::rename(&path, dir.path().join("gone")).unwrap();
    let err = shared.sync_directory().unwrap_err();
    assert_eq!(err.kafka_code(), KafkaCode::KafkaStorageError);
    assert!(log_dir.is_offline());
}

#[test]
fn many_partitions_share_a_bounded_handle_cache() {
    let dir = tempfile::tempdir().unwrap();
    let files = FileCache::new(32);
    let log_dir = gregor_log::log_dir::LogDir::open(dir.path(), files.clone()).unwrap();
    let mut logs: Vec<_> = (0..200)
        .map(|p| {
            log_dir
                .open_log(
                    gregor_log::checkpoint::TopicPartition::new("wide", p),
                    None,
                    LogConfig::default(),
                    NOW,
                )
                .unwrap()
        })
        .collect();
    for (i, log) in logs.iter_mut().enumerate() {
        log.append(&client_batch(i as u64, 2, Compression::None, NOW), NOW, 0)
            .unwrap();
        assert!(files.open_files() <= 32);
    }
    for (i, log) in logs.iter_mut().enumerate() {
        let records = read_all(log, 0);
        assert_eq!(
            records[1].key.as_deref(),
            Some(format!("k{i}-1").as_bytes())
        );
    }
    assert!(files.open_files() <= 32);
}

#[test]
fn a_different_topic_id_on_disk_is_refused_without_taking_the_dir_offline_and_can_be_discarded() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path(), LogConfig::default()));
    let mut log_dir = gregor_log::log_dir::LogDir::open(dir.path(), FileCache::new(8)).unwrap();
    let new_id = uuid::Uuid::from_u128(99);
    let err = log_dir
        .open_log(tp(), Some(new_id), LogConfig::default(), NOW)
        .unwrap_err();
    assert!(matches!(err, LogError::TopicIdMismatch { given, .. } if given == new_id));
    assert!(!err.is_storage_error());
    assert!(!log_dir.is_offline());
    // Moved aside as a stray and kept, and the next open makes a new, empty log.
    let renamed = log_dir.discard_stray(&tp()).unwrap();
    assert!(renamed.to_string_lossy().ends_with("-stray"));
    assert_eq!(log_dir.partitions_on_disk().unwrap(), Vec::new());
    let log = log_dir
        .open_log(tp(), Some(new_id), LogConfig::default(), NOW)
        .unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
    assert_eq!(
        log_dir.sweep_leftovers().unwrap(),
        gregor_log::log_dir::Leftovers {
            removed: 0,
            strays: vec![renamed.clone()],
        }
    );
    assert!(
        renamed.join("00000000000000000000.log").exists(),
        "the stray's records are kept"
    );
}

#[test]
fn flush_messages_moves_the_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut log) = open(
        dir.path(),
        LogConfig {
            flush_messages: 4,
            ..LogConfig::default()
        },
    );
    log.append(&client_batch(1, 3, Compression::None, NOW), NOW, 0)
        .unwrap();
    assert_eq!(log.recovery_point(), 0);
    log.append(&client_batch(2, 3, Compression::None, NOW), NOW, 0)
        .unwrap();
    assert_eq!(log.recovery_point(), 6);
    let dir2 = tempfile::tempdir().unwrap();
    let (_d2, mut timed) = open(
        dir2.path(),
        LogConfig {
            flush_ms: 1000,
            ..LogConfig::default()
        },
    );
    timed
        .append(&client_batch(1, 1, Compression::None, NOW), NOW, 0)
        .unwrap();
    assert_eq!(timed.recovery_point(), 0);
    timed
        .append(&client_batch(1, 1, Compression::None, NOW), NOW + 1000, 0)
        .unwrap();
    assert_eq!(timed.recovery_point(), 2);
}

#[test]
fn a_follower_appends_the_leaders_batches_unchanged() {
    let leader_dir = tempfile::tempdir().unwrap();
    let (_l, mut leader) = open(leader_dir.path(), small_config());
    for i in 0..20u64 {
        leader
            .append(&idempotent_batch(8, 0, 3 * i as i32, 3), NOW, 5)
            .unwrap();
    }
    let fetched = leader
        .read_batches(0, 1 << 20, leader.log_end_offset())
        .unwrap();
    let follower_dir = tempfile::tempdir().unwrap();
    let (_f, mut follower) = open(follower_dir.path(), small_config());
    let mut next = 0;
    while next < leader.log_end_offset() {
        let chunk = leader
            .read_batches(next, 700, leader.log_end_offset())
            .unwrap();
        let (_, last) = follower.append_as_follower(&chunk, NOW).unwrap().unwrap();
        next = last + 1;
    }
    assert_eq!(follower.log_end_offset(), 60);
    assert_eq!(follower.read_batches(0, 1 << 20, 60).unwrap(), fetched);
    assert_eq!(follower.leader_epochs().entries(), &[(5, 0)]);
    assert!(
        follower
            .append(&idempotent_batch(8, 0, 57, 3), NOW, 5)
            .unwrap()
            .duplicate,
        "producer state followed"
    );
    let again = follower.append_as_follower(&fetched, NOW).unwrap_err();
    assert_eq!(
        again.kafka_code(),
        KafkaCode::InvalidRecord,
        "offsets below the LEO"
    );
    let mut corrupt = leader.read_batches(0, 1, 60).unwrap();
    corrupt[70] ^= 1;
    batch_set_offset(&mut corrupt, 60);
    assert_eq!(
        follower
            .append_as_follower(&corrupt, NOW)
            .unwrap_err()
            .kafka_code(),
        KafkaCode::CorruptMessage
    );
}

fn batch_set_offset(bytes: &mut [u8], offset: i64) {
    gregor_log::batch::set_base_offset(bytes, offset);
}

#[test]
fn rolls_on_segment_ms_and_on_a_full_index() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut log) = open(
        dir.path(),
        LogConfig {
            segment_ms: 1000,
            ..LogConfig::default()
        },
    );
    log.append(&client_batch(1, 1, Compression::None, NOW), NOW, 0)
        .unwrap();
    log.append(&client_batch(2, 1, Compression::None, NOW), NOW + 1000, 0)
        .unwrap();
    assert_eq!(log.segment_count(), 1, "not older than segment.ms yet");
    log.append(
        &client_batch(3, 1, Compression::None, NOW + 1001),
        NOW + 1001,
        0,
    )
    .unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);

    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_index_bytes: 24,
        index_interval_bytes: 0,
        ..LogConfig::default()
    };
    let (_d, mut log) = open(dir.path(), config);
    for i in 0..12 {
        log.append(&client_batch(i, 1, Compression::None, NOW), NOW, 0)
            .unwrap();
    }
    // An index entry per append after a segment's first; 3 entries (24 / 8) fill the offset index.
    assert_eq!(log.segment_base_offsets(), vec![0, 4, 8]);
    assert_eq!(read_all(&mut log, 0).len(), 12);
}

#[test]
fn a_smaller_segment_index_bytes_sizes_the_next_segments_not_the_active_one() {
    let dir = tempfile::tempdir().unwrap();
    let roomy = LogConfig {
        index_interval_bytes: 0,
        ..LogConfig::default()
    };
    let (_d, mut log) = open(dir.path(), roomy.clone());
    log.append(&client_batch(0, 1, Compression::None, NOW), NOW, 0)
        .unwrap();
    // As Kafka's `updateConfig`: the active segment keeps the index size it was made with.
    log.set_config(LogConfig {
        segment_index_bytes: 24,
        ..roomy
    });
    for i in 1..12 {
        log.append(&client_batch(i, 1, Compression::None, NOW), NOW, 0)
            .unwrap();
    }
    assert_eq!(log.segment_base_offsets(), vec![0]);
    log.roll(NOW).unwrap();
    for i in 12..20 {
        log.append(&client_batch(i, 1, Compression::None, NOW), NOW, 0)
            .unwrap();
    }
    assert_eq!(log.segment_base_offsets(), vec![0, 12, 16]);
}

#[test]
fn segment_ms_counts_record_time_not_arrival_time() {
    const DAY_MS: i64 = 86_400_000;
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut log) = open(dir.path(), LogConfig::default());
    // A backfill of records thirty days old, within a second of each other: one segment, as a
    // live stream would fill it (Kafka's timeWaitedForRoll compares record timestamps).
    let old = NOW - 30 * DAY_MS;
    for i in 0..50 {
        log.append(
            &client_batch(i, 1, Compression::None, old + i as i64),
            NOW,
            0,
        )
        .unwrap();
    }
    assert_eq!(log.segment_count(), 1);
    // A record more than segment.ms (7 days) after the segment's first one rolls it.
    log.append(
        &client_batch(50, 1, Compression::None, old + 7 * DAY_MS + 1),
        NOW,
        0,
    )
    .unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 50]);

    // A segment whose first batch has no timestamp counts from its creation on the wall clock.
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut log) = open(
        dir.path(),
        LogConfig {
            segment_ms: 1000,
            ..LogConfig::default()
        },
    );
    log.append(&client_batch(0, 1, Compression::None, -1), NOW, 0)
        .unwrap();
    log.append(&client_batch(1, 1, Compression::None, -1), NOW + 1000, 0)
        .unwrap();
    assert_eq!(log.segment_count(), 1);
    log.append(&client_batch(2, 1, Compression::None, -1), NOW + 1001, 0)
        .unwrap();
    assert_eq!(log.segment_base_offsets(), vec![0, 2]);
}

#[test]
fn deleted_segments_wait_for_file_delete_delay() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        retention_ms: 10,
        file_delete_delay_ms: 60_000,
        ..small_config()
    };
    let (_d, mut log) = open(dir.path(), config);
    for i in 0..40u64 {
        log.append(&client_batch(i, 2, Compression::None, NOW), NOW, 0)
            .unwrap();
    }
    let leo = log.log_end_offset();
    let info = log.enforce_retention(NOW + 1000, leo).unwrap();
    assert!(info.segments_deleted >= 2);
    let count_deleted = |dir: &std::path::Path| {
        std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".deleted"))
            .count()
    };
    assert_eq!(count_deleted(log.dir()), 3 * info.segments_deleted);
    assert_eq!(
        log.purge_deleted_files(NOW + 1000 + 59_999).unwrap(),
        3 * info.segments_deleted
    );
    assert_eq!(log.purge_deleted_files(NOW + 1000 + 60_000).unwrap(), 0);
    assert_eq!(count_deleted(log.dir()), 0);
}

#[test]
fn dump_log_lists_every_batch_of_a_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (_d, mut log) = open(dir.path(), LogConfig::default());
    for i in 0..5u64 {
        log.append(&client_batch(i, 2, Compression::Zstd, NOW), NOW, 3)
            .unwrap();
    }
    let mut out = Vec::new();
    gregor_log::dump::dump_file(&segment::log_path(log.dir(), 0), true, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let batches: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("baseOffset:"))
        .collect();
    assert_eq!(batches.len(), 5);
    assert!(batches.iter().all(|l| l.contains("isvalid: true")
        && l.contains("compresscodec: zstd")
        && l.contains("partitionLeaderEpoch: 3")));
    assert!(batches[4].starts_with("baseOffset: 8 lastOffset: 9 count: 2 "));
    assert_eq!(
        text.lines().filter(|l| l.starts_with("| offset:")).count(),
        10
    );
    assert!(text.contains("| offset: 9 CreateTime: 1700000000001 keySize: 4 valueSize: 14 sequence: -1 headerKeys: [] key: k4-1 payload: value 4/1 xxxx"));
}

#[test]
fn a_clean_close_without_producers_leaves_no_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (mut log_dir, mut log) = open(dir.path(), small_config());
        for i in 0..40u64 {
            log.append(&client_batch(i, 2, Compression::None, NOW), NOW, 0)
                .unwrap();
        }
        assert!(log.segment_count() > 1, "rolls took snapshots");
        log_dir.shutdown([&mut log], 1, NOW).unwrap();
        let snapshots = std::fs::read_dir(log.dir())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".snapshot"))
            .count();
        assert_eq!(snapshots, 0);
    }
    let (log_dir, mut log) = open(dir.path(), small_config());
    assert!(log_dir.had_clean_shutdown());
    assert_eq!(log.producers().count(), 0);
    assert_eq!(read_all(&mut log, 0).len(), 80);
    assert!(log.append(&idempotent_batch(1, 0, 0, 1), NOW, 0).is_ok());
}

#[test]
fn high_watermarks_survive_a_reopen_until_the_log_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    drop(open(dir.path(), LogConfig::default()));
    let mut log_dir = gregor_log::log_dir::LogDir::open(dir.path(), FileCache::new(8)).unwrap();
    assert_eq!(log_dir.high_watermark(&tp()), None);
    log_dir.checkpoint_high_watermarks([(&tp(), 42)]).unwrap();
    let text = std::fs::read_to_string(
        dir.path()
            .join(gregor_log::checkpoint::REPLICATION_OFFSET_CHECKPOINT),
    )
    .unwrap();
    assert_eq!(
        text,
        format!("0\n1\n{} {} 42\n", tp().topic, tp().partition)
    );
    drop(log_dir);

    let mut log_dir = gregor_log::log_dir::LogDir::open(dir.path(), FileCache::new(8)).unwrap();
    assert_eq!(log_dir.high_watermark(&tp()), Some(42));
    let log = log_dir
        .open_log(tp(), None, LogConfig::default(), NOW)
        .unwrap();
    log_dir.delete_log(log).unwrap();
    assert_eq!(log_dir.high_watermark(&tp()), None);
}

/// A checkpoint file is written again only when an offset in it changed (or a partition left):
/// with a million partitions each is tens of megabytes, the high watermarks' due every 5 s.
#[test]
fn unchanged_checkpoints_are_not_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let (mut log_dir, mut log) = open(dir.path(), LogConfig::default());
    let file = |name: &str| dir.path().join(name);
    let high_watermarks = file(gregor_log::checkpoint::REPLICATION_OFFSET_CHECKPOINT);
    let recovery_points = file(gregor_log::checkpoint::RECOVERY_POINT_CHECKPOINT);

    log_dir.checkpoint_high_watermarks([(&tp(), 0)]).unwrap();
    log_dir.checkpoint([&log]).unwrap();
    assert!(high_watermarks.exists() && recovery_points.exists());
    std::fs::remove_file(&high_watermarks).unwrap();
    std::fs::remove_file(&recovery_points).unwrap();
    log_dir.checkpoint_high_watermarks([(&tp(), 0)]).unwrap();
    log_dir.checkpoint([&log]).unwrap();
    assert!(!high_watermarks.exists() && !recovery_points.exists());

    log_dir.checkpoint_high_watermarks([(&tp(), 7)]).unwrap();
    let line = |offset: i64| format!("0\n1\n{} {} {offset}\n", tp().topic, tp().partition);
    assert_eq!(std::fs::read_to_string(&high_watermarks).unwrap(), line(7));
    log.append(&client_batch(1, 2, Compression::None, NOW), NOW, 0)
        .unwrap();
    log.flush(NOW).unwrap();
    log_dir.checkpoint([&log]).unwrap();
    assert_eq!(std::fs::read_to_string(&recovery_points).unwrap(), line(2));

    // A deleted partition leaves both files at the next checkpoint.
    log_dir.delete_log(log).unwrap();
    log_dir.checkpoint_high_watermarks([]).unwrap();
    log_dir.checkpoint([]).unwrap();
    assert_eq!(std::fs::read_to_string(&high_watermarks).unwrap(), "0\n0\n");
    assert_eq!(std::fs::read_to_string(&recovery_points).unwrap(), "0\n0\n");
}

/// A log in a directory it made starts empty with Kafka's files; a new leader's epoch is
/// written at once without fsync, and every move of the recovery point (a flush, a roll, a
/// deferred roll reported flushed) syncs it first, since recovery rebuilds epochs only above
/// the recovery point.
#[test]
fn a_new_leader_epoch_is_synced_before_the_recovery_point_moves() {
    let dir = tempfile::tempdir().unwrap();
    let (_log_dir, mut log) = open(dir.path(), small_config());
    let part = dir.path().join("orders-3");
    for file in [
        "00000000000000000000.log",
        "00000000000000000000.index",
        "00000000000000000000.timeindex",
        "partition.metadata",
    ] {
        assert!(part.join(file).exists(), "{file}");
    }
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));

    log.assign_leader_epoch(3).unwrap();
    assert!(log.leader_epochs().unsynced());
    assert_eq!(
        gregor_log::checkpoint::read_epochs(&part.join("leader-epoch-checkpoint")).unwrap(),
        vec![(3, 0)],
        "written at once"
    );
    log.append(&client_batch(0, 2, Compression::None, NOW), NOW, 3)
        .unwrap();
    log.flush(NOW).unwrap();
    assert!(!log.leader_epochs().unsynced(), "a flush syncs the epochs");
    assert_eq!(log.recovery_point(), 2);

    log.assign_leader_epoch(4).unwrap();
    log.append(&client_batch(1, 2, Compression::None, NOW), NOW, 4)
        .unwrap();
    assert!(log.leader_epochs().unsynced());
    log.roll(NOW).unwrap();
    assert!(!log.leader_epochs().unsynced(), "a roll syncs the epochs");
    assert_eq!(log.recovery_point(), 4);

    log.defer_rolled_flushes();
    log.assign_leader_epoch(5).unwrap();
    log.append(&client_batch(2, 2, Compression::None, NOW), NOW, 5)
        .unwrap();
    log.roll(NOW).unwrap();
    assert!(
        log.leader_epochs().unsynced(),
        "a deferred roll leaves it to the report"
    );
    let rolled = log.take_rolled();
    rolled[0].flush().unwrap();
    log.rolled_flushed(&rolled[0]).unwrap();
    assert!(!log.leader_epochs().unsynced());
    assert_eq!(log.recovery_point(), 6);
    assert_eq!(log.leader_epochs().entries(), &[(3, 0), (4, 2), (5, 4)]);
}

/// Batches from 100 bytes to 180 KiB in one segment: lookups (which read 16 KiB first and double
/// their reads up to 1 MiB) find every offset's batch, and recovery after a kill walks them all.
#[test]
fn lookups_and_recovery_cross_every_read_size() {
    let dir = tempfile::tempdir().unwrap();
    let sizes: Vec<usize> = (0..80).map(|i| [1, 3, 40, 400, 1_500][i % 5]).collect();
    let mut expected = Vec::new();
    {
        let (_d, mut log) = open(dir.path(), LogConfig::default());
        for (seed, &count) in sizes.iter().enumerate() {
            let mut builder = gregor_log::batch::BatchBuilder::new(Compression::None);
            for i in 0..count {
                let value = vec![(seed % 251) as u8; 120];
                builder.append(
                    NOW + i as i64,
                    Some(format!("k{seed}-{i}").as_bytes()),
                    Some(&value),
                    &[],
                );
                expected.push(format!("k{seed}-{i}").into_bytes());
            }
            log.append(&builder.build().unwrap(), NOW, 0).unwrap();
        }
        assert_eq!(log.segment_count(), 1);
        let leo = log.log_end_offset();
        assert_eq!(leo, expected.len() as i64);
        for offset in (0..leo).step_by(7).chain([leo - 1]) {
            let info = log.read(offset, 1, leo, true).unwrap();
            let bytes = info.slice.unwrap().read().unwrap();
            let batch = RecordBatch::new(&bytes).unwrap();
            assert!(batch.base_offset() <= offset && offset <= batch.last_offset());
        }
        // Dropped without close: recovery rescans the whole segment.
    }
    let (log_dir, mut log) = open(dir.path(), LogConfig::default());
    assert!(!log_dir.had_clean_shutdown());
    let keys: Vec<Vec<u8>> = read_all(&mut log, 0)
        .into_iter()
        .map(|r| r.key.unwrap())
        .collect();
    assert_eq!(keys, expected);
}

#[test]
fn the_longest_topic_name_can_be_deleted_and_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    let mut log_dir = gregor_log::log_dir::LogDir::open(dir.path(), FileCache::new(8)).unwrap();
    // 249 characters, Kafka's longest: `<topic>-<partition>.<32 hex>-delete` would be 295 bytes.
    let longest = gregor_log::checkpoint::TopicPartition::new("t".repeat(249), 12345);
    let log = log_dir
        .open_log(longest.clone(), None, LogConfig::default(), NOW)
        .unwrap();
    let deleted = log_dir.delete_log(log).unwrap();
    let name = deleted.file_name().unwrap().to_str().unwrap().to_owned();
    assert_eq!(name.len(), 255);
    assert!(
        name.starts_with("ttt") && name.ends_with("-delete"),
        "{name}"
    );
    assert!(name.contains("-12345."), "{name}");
    drop(
        log_dir
            .open_log(longest.clone(), None, LogConfig::default(), NOW)
            .unwrap(),
    );
    let stray = log_dir.discard_stray(&longest).unwrap();
    let name = stray.file_name().unwrap().to_str().unwrap();
    assert!(name.len() <= 255 && name.ends_with("-stray"), "{name}");
}

/// `size()` is kept as the segments change rather than summed at each call (it is read after
/// every append): it matches the segment files on disk after appends that roll, retention, a
/// truncation into a sealed segment and one within the active segment, compaction, a full
/// truncation and a reopen.
#[test]
fn size_follows_every_change_of_the_segments() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        file_delete_delay_ms: 60_000,
        cleanup_compact: true,
        min_cleanable_dirty_ratio: 0.0,
        ..small_config()
    };
    let (mut log_dir, mut log) = open(dir.path(), config.clone());
    let check = |log: &gregor_log::log::PartitionLog, step: &str| {
        assert_eq!(log.size(), segment_bytes_on_disk(log), "after {step}");
    };
    check(&log, "the open");
    for i in 0..120u64 {
        // Ten keys written again and again: compaction has something to remove.
        log.append(&client_batch(i % 10, 3, Compression::None, NOW), NOW, 0)
            .unwrap();
        check(&log, "an append");
    }
    assert!(log.segment_count() >= 4, "4 KiB segments roll");
    let leo = log.log_end_offset();

    log.delete_records_before(log.segment_base_offsets()[1])
        .unwrap();
    assert_eq!(log.enforce_retention(NOW, leo).unwrap().segments_deleted, 1);
    check(&log, "retention");

    let sealed = log.segment_base_offsets()[1];
    log.truncate_to(sealed + 1, NOW).unwrap();
    check(&log, "a truncation into a sealed segment");
    log.append(&client_batch(1, 3, Compression::None, NOW), NOW, 0)
        .unwrap();
    log.truncate_to(log.log_end_offset() - 1, NOW).unwrap();
    check(&log, "a truncation within the active segment");

    for i in 0..30u64 {
        log.append(&client_batch(i % 10, 3, Compression::None, NOW), NOW, 0)
            .unwrap();
    }
    let before = log.size();
    let leo = log.log_end_offset();
    assert!(log.compact(NOW, leo, &mut cleaner_map()).unwrap().is_some());
    assert!(log.size() < before);
    check(&log, "compaction");

    log_dir.shutdown([&mut log], 1, NOW).unwrap();
    drop((log_dir, log));
    let (_log_dir, mut log) = open(dir.path(), config);
    check(&log, "a reopen");

    log.truncate_fully_and_start_at(leo + 10, NOW).unwrap();
    assert_eq!(log.size(), 0);
    check(&log, "a full truncation");
}

/// Each fsync of a segment's files is timed for the log dir's flush listener (Kafka's
/// `LogFlushStats`): a flush the flush policy asks for, a roll's seal, and a rolled segment its
/// owner flushes later.
#[test]
fn segment_flushes_are_told_to_the_flush_listener() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        flush_messages: 2,
        ..small_config()
    };
    let (log_dir, mut log) = open(dir.path(), config);
    let flushes = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&flushes);
    log_dir.on_flush(std::sync::Arc::new(move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
    }));
    log.append(&client_batch(0, 1, Compression::None, NOW), NOW, 0)
        .unwrap();
    assert_eq!(flushes.load(Ordering::SeqCst), 0, "one message unflushed");
    log.append(&client_batch(1, 1, Compression::None, NOW), NOW, 0)
        .unwrap();
    assert_eq!(flushes.load(Ordering::SeqCst), 1, "flush.messages reached");
    log.roll(NOW).unwrap();
    assert_eq!(
        flushes.load(Ordering::SeqCst),
        2,
        "the roll sealed a segment"
    );

    log.defer_rolled_flushes();
    log.append(&client_batch(2, 1, Compression::None, NOW), NOW, 0)
        .unwrap();
    log.roll(NOW).unwrap();
    assert_eq!(
        flushes.load(Ordering::SeqCst),
        2,
        "the sealed segment waits"
    );
    for rolled in log.take_rolled() {
        rolled.flush().unwrap();
    }
    assert_eq!(flushes.load(Ordering::SeqCst), 3);
}
