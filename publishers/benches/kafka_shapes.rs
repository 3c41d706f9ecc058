//! Apache Kafka's jmh metadata-image benchmarks, ported shape for shape so Gregor's figures can
//! stand beside Kafka's (`shared/reference/performance.md`): `TopicsImageSnapshotLoadBenchmark`,
//! `TopicsImageSingleRecordChangeBenchmark` and `TopicsImageZonalOutageBenchmark` at 12,500,
//! 25,000, 50,000 and 100,000 topics x 10 partitions, replication factor 3, 10,000 replicas per
//! broker (so 36 to 300 brokers), leaders assigned round robin and each replica list the next
//! brokers after the leader, as Kafka's `getInitialTopicsDelta` builds them.
//!
//! Kafka times `TopicsDelta.apply()` on a delta whose records were replayed during set-up; the
//! `apply_only` cases do the same. jmh hands the result to a blackhole and the garbage collector
//! frees it outside the timed operation, so `apply_only` drops the new image outside the timing
//! too (`apply_then_drop`), and `zonal_outage/drop` times that drop on its own: a node pays
//! it when it lets go of the image the delta replaced. The `replay_and_apply` cases also count
//! the replay and the drop, which a node pays when it loads a snapshot or a batch.
//!
//! `all_partitions` is the other end: Gregor's own 3-broker cluster (`support/image.rs`, 10^6
//! partitions, RF 3, directories set) where one broker leaves every ISR, so every partition
//! changes (a `PartitionChangeRecord` each).
//!
//! Run: `cargo bench -p gregor-publishers --bench kafka_shapes -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, BenchmarkId, Criterion};
use gregor_publishers::records::{PartitionChangeRecord, PartitionRecord, TopicRecord, NO_LEADER};
use gregor_publishers::{MetadataDelta, MetadataImage, MetadataRecord, Provenance};
use uuid::Uuid;

/// The node's allocator (`node/src/main.rs`), so the figures are the node's.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/image.rs"]
mod image;

const TOPIC_COUNTS: [usize; 4] = [12_500, 25_000, 50_000, 100_000];
const PARTITIONS_PER_TOPIC: usize = 10;
const REPLICATION_FACTOR: usize = 3;
const REPLICAS_PER_BROKER: usize = 10_000;

/// Kafka's `getNumBrokers`: enough brokers for 10,000 replicas each, a multiple of 3.
fn broker_count(topics: usize) -> i32 {
    let brokers = topics * PARTITIONS_PER_TOPIC * REPLICATION_FACTOR / REPLICAS_PER_BROKER;
    (brokers - brokers % 3) as i32
}

/// Kafka's `getReplicas`: the leader, then the next brokers round the ring.
fn replicas(leader: i32, brokers: i32) -> Vec<i32> {
    (0..REPLICATION_FACTOR as i32)
        .map(|n| (leader + n) % brokers)
        .collect()
}

fn topic_id(index: usize) -> Uuid {
    // Spread like random ids (splitmix64), but the same every run.
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let seed = (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    Uuid::from_u64_pair(mix(seed), mix(seed ^ 0x5eed))
}

fn partition_record(
    topic_id: Uuid,
    partition_id: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
) -> PartitionRecord {
    PartitionRecord {
        partition_id,
        topic_id,
        leader: isr[0],
        isr,
        replicas,
        directories: vec![],
        removing_replicas: vec![],
        adding_replicas: vec![],
        leader_recovery_state: 0,
        leader_epoch: 0,
        partition_epoch: 0,
    }
}

/// The records of Kafka's `getInitialTopicsDelta`.
fn snapshot_records(topics: usize) -> Vec<MetadataRecord> {
    let brokers = broker_count(topics);
    let mut leader = 0;
    let mut out = Vec::with_capacity(topics * (PARTITIONS_PER_TOPIC + 1));
    for index in 0..topics {
        let topic_id = topic_id(index);
        out.push(MetadataRecord::Topic(TopicRecord {
            name: format!("topic{index}"),
            topic_id,
        }));
        for partition in 0..PARTITIONS_PER_TOPIC as i32 {
            let replicas = replicas(leader, brokers);
            out.push(MetadataRecord::Partition(partition_record(
                topic_id,
                partition,
                replicas.clone(),
                replicas,
            )));
            leader = (leader + 1) % brokers;
        }
    }
    out
}

fn replayed(base: &Arc<MetadataImage>, records: &[MetadataRecord]) -> MetadataDelta {
    let mut delta = MetadataDelta::new(Arc::clone(base));
    for record in records {
        if let Err(error) = delta.replay(record) {
            panic!("the benchmark's records do not replay: {error}");
        }
    }
    delta
}

/// Kafka's zonal outage: every partition with broker 0 in its ISR gets a full PartitionRecord
/// without it (the leader becomes the first remaining ISR member).
fn zonal_outage_records(image: &MetadataImage) -> Vec<MetadataRecord> {
    let mut out = Vec::new();
    for topic in image.topics.iter() {
        for (partition_id, partition) in topic.partitions() {
            if !partition.isr.contains(&0) {
                continue;
            }
            let isr: Vec<i32> = partition.isr.iter().copied().filter(|b| *b != 0).collect();
            out.push(MetadataRecord::Partition(partition_record(
                topic.id,
                partition_id,
                partition.replicas.to_vec(),
                isr,
            )));
        }
    }
    out
}

/// Times `delta.apply` alone; each new image is dropped right after its iteration, outside the
/// timing. (Keeping them all until the end, as `iter_with_large_drop` does, made every
/// iteration fault in fresh pages, which a node that frees the image it replaced does not.)
fn apply_then_drop(b: &mut criterion::Bencher<'_>, delta: &MetadataDelta) {
    b.iter_batched(
        || (),
        |()| delta.apply(Provenance::default()),
        BatchSize::PerIteration,
    )
}

fn bench(c: &mut Criterion) {
    let empty = Arc::new(MetadataImage::empty());
    for topics in TOPIC_COUNTS {
        let records = snapshot_records(topics);
        let image = Arc::new(replayed(&empty, &records).apply(Provenance::default()));
        assert_eq!(
            image.topics.partition_count(),
            topics * PARTITIONS_PER_TOPIC
        );
        let mut group = c.benchmark_group("kafka_shapes");
        group.sample_size(10);

        let snapshot = replayed(&empty, &records);
        group.bench_function(BenchmarkId::new("snapshot_load/apply_only", topics), |b| {
            apply_then_drop(b, &snapshot)
        });
        drop(snapshot);
        group.bench_with_input(
            BenchmarkId::new("snapshot_load/replay_and_apply", topics),
            &records,
            |b, records| {
                b.iter(|| black_box(replayed(&empty, records).apply(Provenance::default())))
            },
        );

        let new_topic = topic_id(usize::MAX);
        let single = [
            MetadataRecord::Topic(TopicRecord {
                name: "newtopic".into(),
                topic_id: new_topic,
            }),
            MetadataRecord::Partition(partition_record(
                new_topic,
                0,
                replicas(0, broker_count(topics)),
                replicas(0, broker_count(topics)),
            )),
        ];
        let single_delta = replayed(&image, &single);
        group.sample_size(100);
        group.bench_function(
            BenchmarkId::new("single_record_change/apply_only", topics),
            |b| apply_then_drop(b, &single_delta),
        );
        group.bench_with_input(
            BenchmarkId::new("single_record_change/replay_and_apply", topics),
            &single,
            |b, records| {
                b.iter(|| black_box(replayed(&image, records).apply(Provenance::default())))
            },
        );
        drop(single_delta);

        group.sample_size(10);
        let outage = zonal_outage_records(&image);
        println!(
            "zonal outage at {topics} topics: perturbing 1 of {} brokers, {} partitions",
            broker_count(topics),
            outage.len()
        );
        let outage_delta = replayed(&image, &outage);
        group.bench_function(BenchmarkId::new("zonal_outage/apply_only", topics), |b| {
            apply_then_drop(b, &outage_delta)
        });
        group.bench_function(BenchmarkId::new("zonal_outage/drop", topics), |b| {
            b.iter_batched(
                || outage_delta.apply(Provenance::default()),
                drop,
                BatchSize::PerIteration,
            )
        });
        group.bench_with_input(
            BenchmarkId::new("zonal_outage/replay_and_apply", topics),
            &outage,
            |b, records| {
                b.iter(|| black_box(replayed(&image, records).apply(Provenance::default())))
            },
        );
        group.finish();
    }
}

/// Broker 3 of the 3-broker image leaves the ISR of every partition (a new leader where it led).
fn broker_leaves_every_isr(image: &MetadataImage) -> Vec<MetadataRecord> {
    let mut out = Vec::with_capacity(image.topics.partition_count());
    for topic in image.topics.iter() {
        for (partition_id, partition) in topic.partitions() {
            let isr: Vec<i32> = partition.isr.iter().copied().filter(|b| *b != 3).collect();
            let leader = (partition.leader == 3).then(|| isr.first().copied().unwrap_or(NO_LEADER));
            out.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id,
                topic_id: topic.id,
                isr: Some(isr),
                leader,
                ..PartitionChangeRecord::default()
            }));
        }
    }
    out
}

fn bench_all_partitions(c: &mut Criterion) {
    const PARTITIONS: usize = 1_000_000;
    let image = Arc::new(image::load(&image::snapshot_records(PARTITIONS)));
    let leave = broker_leaves_every_isr(&image);
    let mut group = c.benchmark_group("kafka_shapes");
    group.sample_size(10);
    let delta = replayed(&image, &leave);
    group.bench_function(
        BenchmarkId::new("all_partitions/apply_only", PARTITIONS),
        |b| apply_then_drop(b, &delta),
    );
    drop(delta);
    group.bench_with_input(
        BenchmarkId::new("all_partitions/replay_and_apply", PARTITIONS),
        &leave,
        |b, records| b.iter(|| black_box(replayed(&image, records).apply(Provenance::default()))),
    );
    group.finish();
}

fn main() {
    // As the node does (`node/src/main.rs`), so its image is measured on the same pages.
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
        if let Err(error) = rustix::thread::disable_transparent_huge_pages(true) {
            eprintln!("transparent huge pages stay on: {error}");
        }
    }
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    bench(&mut criterion);
    bench_all_partitions(&mut criterion);
    criterion.final_summary();
}
