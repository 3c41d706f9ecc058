#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use gregor_log::batch::BatchBuilder;
use gregor_log::checkpoint::TopicPartition;
use gregor_log::compression::Compression;
use gregor_log::config::LogConfig;
use gregor_publishers::records::ConfigRecord;
use gregor_publishers::{MetadataDelta, MetadataImage, MetadataRecord};

use super::*;

fn config(resource_type: i8, resource_name: &str, name: &str, value: &str) -> MetadataRecord {
    MetadataRecord::Config(ConfigRecord {
        resource_type,
        resource_name: resource_name.into(),
        name: name.into(),
        value: Some(value.into()),
    })
}

#[test]
fn topic_configs_override_node_then_cluster_defaults_then_static_ones() {
    let empty = Arc::new(MetadataImage::empty());
    let mut delta = MetadataDelta::new(empty.clone());
    for record in [
        config(4, "", "log.retention.ms", "1000"),
        config(4, "", "log.segment.bytes", "2000000"),
        config(4, "7", "log.segment.bytes", "3000000"),
        config(4, "8", "log.roll.ms", "5"),
        config(2, "t", "retention.ms", "42"),
        config(2, "t", "min.insync.replicas", "2"),
        config(2, "other", "retention.ms", "1"),
    ] {
        delta.replay(&record).unwrap();
    }
    let image = delta.apply(empty.provenance);
    let statics = StaticLogDefaults::from_broker_configs([
        ("log.segment.bytes", "4000000"),
        ("message.max.bytes", "5000"),
        ("num.partitions", "3"),
    ]);
    let (log, min_isr) = effective_log_config(&image, &statics, "7", "t");
    assert_eq!(log.retention_ms, 42);
    assert_eq!(log.segment_bytes, 3_000_000);
    assert_eq!(log.max_message_bytes, 5000);
    assert_eq!(log.segment_ms, LogConfig::default().segment_ms);
    assert_eq!(min_isr, 2);
    let (log, min_isr) = effective_log_config(&image, &statics, "9", "u");
    assert_eq!(
        (log.retention_ms, log.segment_bytes, min_isr),
        (1000, 2_000_000, 1)
    );
}

/// Kafka's `logRetentionTimeMillis` and `logRollTimeMillis`: `.ms`, else `.minutes`, else
/// `.hours`; a negative retention is unlimited.
#[test]
fn static_unit_synonyms_follow_kafkas_precedence() {
    let image = MetadataImage::empty();
    let effective = |pairs: &[(&str, &str)]| {
        let statics = StaticLogDefaults::from_broker_configs(pairs.iter().copied());
        let (log, _) = effective_log_config(&image, &statics, "1", "t");
        (log.retention_ms, log.segment_ms, log.segment_jitter_ms)
    };
    let week = 604_800_000;
    assert_eq!(effective(&[]), (week, week, 0));
    assert_eq!(
        effective(&[
            ("log.retention.hours", "2"),
            ("log.roll.hours", "3"),
            ("log.roll.jitter.hours", "1")
        ]),
        (7_200_000, 10_800_000, 3_600_000)
    );
    assert_eq!(
        effective(&[
            ("log.retention.hours", "2"),
            ("log.retention.minutes", "90")
        ])
        .0,
        5_400_000
    );
    assert_eq!(
        effective(&[
            ("log.retention.minutes", "90"),
            ("log.retention.ms", "1000"),
            ("log.roll.ms", "5000"),
            ("log.roll.hours", "3")
        ]),
        (1000, 5000, 0)
    );
    assert_eq!(effective(&[("log.retention.hours", "-5")]).0, -1);
}

fn records(values: &[&str], producer: Option<(i64, i32)>) -> Bytes {
    let mut builder = BatchBuilder::new(Compression::None);
    if let Some((id, sequence)) = producer {
        builder.producer_id = id;
        builder.producer_epoch = 0;
        builder.base_sequence = sequence;
    }
    for value in values {
        // Now: an old timestamp would roll a segment per append (segment.ms counts from the
        // first batch's timestamp), and a read stops at a segment's end.
        builder.append(now_ms(), Some(b"k"), Some(value.as_bytes()), &[]);
    }
    Bytes::from(builder.build().unwrap())
}

/// This node (id 1) leads the partition alone: what it appends is committed.
fn lead_alone(state: &PartitionState) {
    state.replication().assign(
        1,
        &crate::replication::Assignment {
            leader: 1,
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: vec![1],
            isr: vec![1],
        },
        0,
        0,
    );
}

/// Hosts partition 0 of `topic` (topic id `id`) on this node (id 1); its state.
fn host(
    manager: &LogManager,
    topic: &str,
    id: uuid::Uuid,
    config: LogConfig,
) -> Arc<PartitionState> {
    let mut changes = manager.changes();
    changes.ensure(TopicPartition::new(topic, 0), id, &Arc::new(config), 1);
    changes.send();
    manager.partition(topic, 0).unwrap()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_open_append_read_dedupe_and_delete() {
    let dir = tempfile::tempdir().unwrap();
    let manager = LogManager::start(LogManagerSettings {
        shards: 2,
        cleaner_enable: true,
        ..LogManagerSettings::for_tests(dir.path())
    })
    .unwrap();
    let id = uuid::Uuid::from_u128(7);
    let config = LogConfig {
        file_delete_delay_ms: 0,
        ..LogConfig::default()
    };
    lead_alone(&host(&manager, "t", id, config));
    // Appends queued while the log is being opened are served once it is.
    let first = manager
        .append("t", 0, records(&["a", "b"], Some((5, 0))), 3)
        .await
        .unwrap();
    let second = manager
        .append("t", 0, records(&["c"], Some((5, 2))), 3)
        .await
        .unwrap();
    assert_eq!((first.first_offset, first.last_offset), (0, 1));
    assert_eq!((second.first_offset, second.duplicate), (2, false));
    let retry = manager
        .append("t", 0, records(&["c"], Some((5, 2))), 3)
        .await
        .unwrap();
    assert_eq!((retry.first_offset, retry.duplicate), (2, true));
    let out_of_order = manager
        .append("t", 0, records(&["e"], Some((5, 9))), 3)
        .await
        .unwrap_err();
    assert_eq!(out_of_order.code(), 45);
    let state = manager.partition("t", 0).unwrap();
    assert_eq!((state.high_watermark(), state.log_start_offset()), (3, 0));

    let all = manager.read("t", 0, 0, 1 << 20, true).await.unwrap();
    assert_eq!(all.high_watermark, 3);
    let batches: Vec<_> = gregor_log::batch::batches(&all.records)
        .map(|b| b.unwrap().base_offset())
        .collect();
    assert_eq!(batches, vec![0, 2]);
    // From inside the first batch: the batch holding the offset comes first.
    let from_one = manager.read("t", 0, 1, 1, true).await.unwrap();
    assert_eq!(
        gregor_log::batch::batches(&from_one.records).count(),
        1,
        "only the first batch when the limit is below it"
    );
    let past_end = manager.read("t", 0, 4, 1 << 20, true).await.unwrap_err();
    assert_eq!(past_end.code(), 1);
    let found = manager
        .offset_lookup("t", 0, OffsetQuery::Timestamp(0))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.offset, 0);

    let mut changes = manager.changes();
    changes.remove(&TopicPartition::new("t", 0));
    changes.send();
    assert!(manager.partition("t", 0).is_none());
    assert_eq!(
        manager
            .append("t", 0, records(&["x"], None), 3)
            .await
            .unwrap_err()
            .code(),
        6
    );
    // Renamed to `-delete` at once, removed after file.delete.delay.ms (0 here).
    wait_until("the deleted log to be removed", || {
        std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .all(|e| !e.file_name().to_string_lossy().starts_with("t-0"))
    });
    let manager_for_shutdown = manager.clone();
    tokio::task::spawn_blocking(move || manager_for_shutdown.shutdown(1))
        .await
        .unwrap();
    assert!(dir.path().join(".kafka_cleanshutdown").exists());
}

/// A log manager over one temporary dir hosting partition `t-0` of topic id 7, with this node
/// (id 1) in `leader`'s partition of replicas 1 and 2.
async fn hosting(dir: &tempfile::TempDir, leader: i32, epoch: i32) -> Arc<LogManager> {
    let manager = LogManager::start(LogManagerSettings {
        cleaner_enable: true,
        ..LogManagerSettings::for_tests(dir.path())
    })
    .unwrap();
    let state = host(
        &manager,
        "t",
        uuid::Uuid::from_u128(7),
        LogConfig::default(),
    );
    state.replication().assign(
        1,
        &crate::replication::Assignment {
            leader,
            leader_epoch: epoch,
            partition_epoch: 0,
            replicas: vec![1, 2],
            isr: vec![1, 2],
        },
        0,
        0,
    );
    wait_until("the log open", || state.is_serving());
    manager
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_appends_the_leaders_batches_and_truncates_a_divergent_tail() {
    let (leader_dir, follower_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let leader = hosting(&leader_dir, 1, 1).await;
    let follower = hosting(&follower_dir, 2, 1).await;
    leader
        .append("t", 0, records(&["a", "b"], None), 1)
        .await
        .unwrap();
    leader
        .append("t", 0, records(&["c"], None), 2)
        .await
        .unwrap();
    // Not committed yet: follower 2 has not fetched.
    assert_eq!(leader.partition("t", 0).unwrap().high_watermark(), 0);
    let batches = leader
        .read_for_follower("t", 0, 0, 1 << 20, true)
        .await
        .unwrap();
    // Fetched for another leader epoch, or by the leader itself: refused, nothing appended.
    let stale = follower
        .append_as_follower("t", 0, (2, 0), batches.records.clone())
        .await;
    assert!(
        matches!(stale, Err(LogManagerError::NotFollowing(..))),
        "{stale:?}"
    );
    let own = leader
        .append_as_follower("t", 0, (1, 1), batches.records.clone())
        .await;
    assert!(
        matches!(own, Err(LogManagerError::NotFollowing(..))),
        "{own:?}"
    );
    assert_eq!(follower.partition("t", 0).unwrap().log_end_offset(), 0);
    let appended = follower
        .append_as_follower("t", 0, (2, 1), batches.records)
        .await
        .unwrap();
    assert_eq!(
        appended,
        FollowerLog {
            log_end_offset: 3,
            latest_epoch: Some(2),
        }
    );
    assert_eq!(
        follower.end_offset_for_epoch("t", 0, 1).await.unwrap(),
        (1, 2)
    );
    assert_eq!(
        follower.end_offset_for_epoch("t", 0, 2).await.unwrap(),
        (2, 3)
    );
    // The leader says epoch 1 ends at 2 in its history: the epoch-2 batch goes.
    let stale = follower.truncate_to("t", 0, (3, 1), 0).await;
    assert!(
        matches!(stale, Err(LogManagerError::NotFollowing(..))),
        "{stale:?}"
    );
    let truncated = follower.truncate_to("t", 0, (2, 1), 2).await.unwrap();
    assert_eq!(
        truncated,
        FollowerLog {
            log_end_offset: 2,
            latest_epoch: Some(1),
        }
    );
    let state = follower.partition("t", 0).unwrap();
    assert_eq!(state.log_end_offset(), 2);
    // A follower's high watermark is the leader's, never past its own log.
    assert!(state.set_follower_high_watermark(3));
    assert_eq!(state.high_watermark(), 2);
    for manager in [leader, follower] {
        tokio::task::spawn_blocking(move || manager.shutdown(1))
            .await
            .unwrap();
    }
}

/// The new logs of one batch open on several threads and are served in the batch's order: a
/// partition deleted and created again within the batch ends up as the new topic's, and a
/// restart opens every log again with its records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_new_logs_opens_on_several_threads_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (old_id, new_id) = (uuid::Uuid::from_u128(7), uuid::Uuid::from_u128(8));
    let config = Arc::new(LogConfig {
        file_delete_delay_ms: 60_000,
        ..LogConfig::default()
    });
    // Four open threads on the one shard, and its 300 partitions of topic "m" in one batch.
    let start = || {
        LogManager::start(LogManagerSettings {
            recovery_threads_per_dir: 4,
            ..LogManagerSettings::for_tests(dir.path())
        })
        .unwrap()
    };
    let ensure_300 = |changes: &mut LogChanges<'_>, id_of: &dyn Fn(i32) -> uuid::Uuid| {
        for partition in 0..300 {
            changes.ensure(
                TopicPartition::new("m", partition),
                id_of(partition),
                &config,
                1,
            );
        }
    };
    let manager = start();
    let mut changes = manager.changes();
    ensure_300(&mut changes, &|_| old_id);
    changes.remove(&TopicPartition::new("m", 5));
    changes.ensure(TopicPartition::new("m", 5), new_id, &config, 1);
    changes.send();
    let serving = |manager: &LogManager| {
        (0..300).all(|p| manager.partition("m", p).is_some_and(|s| s.is_serving()))
    };
    wait_until("300 logs open", || serving(&manager));
    assert_eq!(manager.partition("m", 5).unwrap().topic_id, new_id);
    let listed: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed.iter().filter(|n| n.starts_with("m-")).count(), 301);
    assert_eq!(listed.iter().filter(|n| n.starts_with("m-5.")).count(), 1);
    let metadata = std::fs::read_to_string(dir.path().join("m-5/partition.metadata")).unwrap();
    assert!(metadata.contains(&gregor_log::checkpoint::topic_id_string(&new_id)));

    lead_alone(&manager.partition("m", 299).unwrap());
    let appended = manager
        .append("m", 299, records(&["a", "b", "c"], None), 3)
        .await
        .unwrap();
    assert_eq!(appended.last_offset, 2);
    let stopping = manager.clone();
    tokio::task::spawn_blocking(move || stopping.shutdown(1))
        .await
        .unwrap();

    let manager = start();
    let mut changes = manager.changes();
    ensure_300(&mut changes, &|p| if p == 5 { new_id } else { old_id });
    changes.send();
    wait_until("300 logs open again", || serving(&manager));
    assert_eq!(manager.partition("m", 299).unwrap().log_end_offset(), 3);
    assert_eq!(manager.partition("m", 0).unwrap().log_end_offset(), 0);
    let stopping = manager.clone();
    tokio::task::spawn_blocking(move || stopping.shutdown(1))
        .await
        .unwrap();
}

/// `replication-offset-checkpoint` is written when a high watermark moved (or a log left),
/// not every interval: an idle node with a million partitions reads none of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_high_watermark_checkpoint_waits_for_a_move() {
    let dir = tempfile::tempdir().unwrap();
    let manager = LogManager::start(LogManagerSettings {
        high_watermark_checkpoint_interval_ms: 100,
        ..LogManagerSettings::for_tests(dir.path())
    })
    .unwrap();
    let state = host(
        &manager,
        "h",
        uuid::Uuid::from_u128(9),
        LogConfig::default(),
    );
    lead_alone(&state);
    wait_until("the log open", || state.is_serving());
    let checkpoint = dir
        .path()
        .join(gregor_log::checkpoint::REPLICATION_OFFSET_CHECKPOINT);
    let recorded = |offset: i64| {
        std::fs::read_to_string(&checkpoint)
            .is_ok_and(|text| text.ends_with(&format!("h 0 {offset}\n")))
    };
    manager
        .append("h", 0, records(&["a"], None), 3)
        .await
        .unwrap();
    wait_until("high watermark 1 checkpointed", || recorded(1));

    std::fs::remove_file(&checkpoint).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(!checkpoint.exists(), "rewritten without a move");

    manager
        .append("h", 0, records(&["b"], None), 3)
        .await
        .unwrap();
    wait_until("high watermark 2 checkpointed", || recorded(2));
    let stopping = manager.clone();
    tokio::task::spawn_blocking(move || stopping.shutdown(1))
        .await
        .unwrap();
}

#[test]
fn a_topics_partitions_take_the_shards_in_turn() {
    for shards in 1..=4 {
        for topic in ["perf", "orders", "__consumer_offsets"] {
            let of = |partition| shard_of(&TopicPartition::new(topic, partition), shards);
            let mut per_shard = vec![0; shards];
            for partition in 0..(shards as i32 * 3) {
                per_shard[of(partition)] += 1;
                assert_eq!(
                    of(partition + 1),
                    (of(partition) + 1) % shards,
                    "{topic}-{partition}"
                );
            }
            assert!(
                per_shard.iter().all(|&count| count == 3),
                "{topic}: {per_shard:?}"
            );
        }
    }
    // Topics start at different shards, so one-partition topics spread too.
    let firsts: std::collections::HashSet<usize> = (0..16)
        .map(|n| shard_of(&TopicPartition::new(format!("t{n}"), 0), 4))
        .collect();
    assert!(firsts.len() > 1, "{firsts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topics_metrics_go_with_its_last_hosted_partition() {
    let dir = tempfile::tempdir().unwrap();
    let manager = LogManager::start(LogManagerSettings {
        shards: 2,
        ..LogManagerSettings::for_tests(dir.path())
    })
    .unwrap();
    let topic = "log-manager-metrics";
    let series = format!("{{topic=\"{topic}\"}}");
    let scraped = || {
        let mut body = String::new();
        gregor_metrics::topics::render(&mut body);
        body.contains(&series)
    };
    let config = Arc::new(LogConfig::default());
    let mut changes = manager.changes();
    for partition in 0..2 {
        let tp = TopicPartition::new(topic, partition);
        changes.ensure(tp, uuid::Uuid::from_u128(9), &config, 1);
    }
    changes.send();
    let appended = gregor_metrics::ProduceOutcome::Appended {
        messages: 1,
        bytes: 10,
    };
    gregor_metrics::topic_produce(topic, appended);
    assert!(scraped());
    let mut changes = manager.changes();
    changes.remove(&TopicPartition::new(topic, 0));
    changes.send();
    assert!(scraped(), "partition 1 is still hosted");
    let mut changes = manager.changes();
    changes.remove(&TopicPartition::new(topic, 1));
    changes.send();
    assert!(!scraped(), "no partition of the topic is hosted");
    let manager_for_shutdown = manager.clone();
    tokio::task::spawn_blocking(move || manager_for_shutdown.shutdown(1))
        .await
        .unwrap();
}

/// Kafka's `PeriodicProducerExpirationCheck`: a producer idle for `producer.id.expiration.ms`
/// is forgotten at the next check, another one still writing is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_producers_expire() {
    let dir = tempfile::tempdir().unwrap();
    let manager = LogManager::start(LogManagerSettings {
        producer_id_expiration_ms: 1_500,
        producer_id_expiration_check_interval_ms: 100,
        ..LogManagerSettings::for_tests(dir.path())
    })
    .unwrap();
    let state = host(
        &manager,
        "p",
        uuid::Uuid::from_u128(11),
        LogConfig::default(),
    );
    lead_alone(&state);
    manager
        .append("p", 0, records(&["idle"], Some((21, 0))), 1)
        .await
        .unwrap();
    async fn producers(manager: &LogManager) -> Vec<i64> {
        let mut ids: Vec<i64> = manager
            .producers("p", 0)
            .await
            .unwrap()
            .iter()
            .map(|p| p.producer_id)
            .collect();
        ids.sort_unstable();
        ids
    }
    assert_eq!(producers(&manager).await, [21]);
    // Producer 22 keeps writing (each batch a new timestamp) while 21 goes idle.
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut sequence = 0;
    loop {
        manager
            .append("p", 0, records(&["busy"], Some((22, sequence))), 1)
            .await
            .unwrap();
        sequence += 1;
        if producers(&manager).await == [22] {
            break;
        }
        assert!(Instant::now() < deadline, "producer 21 never expired");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Kafka's `loadFromSnapshot`: a producer that expired while the node was down is not loaded
/// back, so it may start again at any sequence; one still within the expiration is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn producers_expired_while_down_are_not_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let restart = |expiration_ms: u64| {
        let manager = LogManager::start(LogManagerSettings {
            producer_id_expiration_ms: expiration_ms,
            ..LogManagerSettings::for_tests(dir.path())
        })
        .unwrap();
        let state = host(
            &manager,
            "e",
            uuid::Uuid::from_u128(12),
            LogConfig::default(),
        );
        lead_alone(&state);
        wait_until("the log open", || state.is_serving());
        manager
    };
    let stop = |manager: Arc<LogManager>| async move {
        tokio::task::spawn_blocking(move || manager.shutdown(1))
            .await
            .unwrap();
    };
    let manager = restart(86_400_000);
    manager
        .append("e", 0, records(&["a", "b"], Some((31, 0))), 1)
        .await
        .unwrap();
    stop(manager).await;

    let manager = restart(86_400_000);
    let kept = manager.producers("e", 0).await.unwrap();
    assert_eq!(kept.iter().map(|p| p.producer_id).collect::<Vec<_>>(), [31]);
    stop(manager).await;

    tokio::time::sleep(Duration::from_millis(50)).await;
    let manager = restart(10);
    assert!(manager.producers("e", 0).await.unwrap().is_empty());
    let fresh = manager
        .append("e", 0, records(&["c"], Some((31, 7))), 1)
        .await
        .unwrap();
    assert!(!fresh.duplicate);
    stop(manager).await;
}

/// The logs' gauges a scrape reads, per log: bytes and segments as appends roll them, the log
/// start and end offsets; an offline log and one no longer hosted are not shown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_gauges_show_each_serving_log() {
    use gregor_metrics::partition_logs::{LogGauges, PartitionLogs};
    let dir = tempfile::tempdir().unwrap();
    let manager = LogManager::start(LogManagerSettings {
        shards: 2,
        ..LogManagerSettings::for_tests(dir.path())
    })
    .unwrap();
    let topic = "gauged";
    // Each batch fills a segment: every append after the first rolls.
    let config = Arc::new(LogConfig {
        segment_bytes: 100,
        ..LogConfig::default()
    });
    let mut changes = manager.changes();
    for partition in 0..2 {
        let tp = TopicPartition::new(topic, partition);
        changes.ensure(tp, uuid::Uuid::from_u128(11), &config, 1);
    }
    changes.send();
    for partition in 0..2 {
        lead_alone(&manager.partition(topic, partition).unwrap());
    }
    let mut size = 0;
    for value in ["first", "second", "third"] {
        let batch = records(&[value, value], None);
        size += batch.len() as u64;
        manager.append(topic, 0, batch, 0).await.unwrap();
    }
    manager.changes_applied().await;
    let shown = |manager: &LogManager| {
        let mut shown = std::collections::BTreeMap::new();
        manager.for_each_log(&mut |topic, partition, gauges| {
            shown.insert((topic.to_owned(), partition), gauges);
        });
        shown
    };
    let gauges = |size, segments, log_start_offset, log_end_offset| LogGauges {
        size,
        segments,
        log_start_offset,
        log_end_offset,
    };
    assert_eq!(
        shown(&manager),
        [
            ((topic.to_owned(), 0), gauges(size, 3, 0, 6)),
            ((topic.to_owned(), 1), gauges(0, 1, 0, 0)),
        ]
        .into()
    );
    assert_eq!(manager.delete_records(topic, 0, 3).await.unwrap(), 3);
    assert_eq!(shown(&manager)[&(topic.to_owned(), 0)].log_start_offset, 3);

    let offline = manager.partition(topic, 1).unwrap();
    offline.mark_offline();
    assert_eq!(manager.offline_replicas.load(Ordering::Relaxed), 1);
    assert_eq!(shown(&manager).len(), 1, "an offline log is not shown");
    let mut changes = manager.changes();
    changes.remove(&TopicPartition::new(topic, 1));
    changes.remove(&TopicPartition::new(topic, 0));
    changes.send();
    assert_eq!(manager.offline_replicas.load(Ordering::Relaxed), 0);
    // A storage error after the removal no longer counts the partition.
    offline.mark_offline();
    assert_eq!(manager.offline_replicas.load(Ordering::Relaxed), 0);
    assert!(shown(&manager).is_empty());
    let manager_for_shutdown = manager.clone();
    tokio::task::spawn_blocking(move || manager_for_shutdown.shutdown(1))
        .await
        .unwrap();
}

/// Kafka's `handleLogDirFailure`: when a storage error takes a log dir offline, every log of
/// that dir goes offline with it (counted among the offline replicas), not only the one whose
/// operation failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_log_dir_takes_each_of_its_logs_offline() {
    let dir = tempfile::tempdir().unwrap();
    let manager = LogManager::start(LogManagerSettings::for_tests(dir.path())).unwrap();
    let config = LogConfig {
        segment_bytes: 100,
        ..LogConfig::default()
    };
    let failing = host(&manager, "failing", uuid::Uuid::from_u128(12), config);
    let idle = host(
        &manager,
        "idle",
        uuid::Uuid::from_u128(13),
        LogConfig::default(),
    );
    lead_alone(&failing);
    lead_alone(&idle);
    manager
        .append("failing", 0, records(&["a", "b"], None), 0)
        .await
        .unwrap();
    manager.changes_applied().await;
    // The next append rolls into a directory that is gone: an I/O error.
    std::fs::remove_dir_all(dir.path().join("failing-0")).unwrap();
    let refused = manager
        .append("failing", 0, records(&["c", "d"], None), 0)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), 56, "{refused}");
    assert!(failing.is_offline());
    wait_until("the other log of the dir offline", || idle.is_offline());
    assert_eq!(manager.offline_replicas.load(Ordering::Relaxed), 2);
    let manager_for_shutdown = manager.clone();
    tokio::task::spawn_blocking(move || manager_for_shutdown.shutdown(1))
        .await
        .unwrap();
}
