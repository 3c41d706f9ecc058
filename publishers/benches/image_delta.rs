//! Cost of applying metadata deltas to images of 10^3 .. 10^6 partitions (10 partitions per
//! topic, replication factor 3 over 3 brokers, one log dir per broker), and the memory an image
//! holds per partition.
//!
//! Run: `cargo bench -p gregor-publishers --bench image_delta -- --warm-up-time 1 --measurement-time 3`
//!
//! Memory is measured with a counting global allocator (`stats_alloc`): the bytes requested and
//! still live after the image is built and every temporary (records, delta) is dropped. It does
//! not include the allocator's own per-allocation overhead (glibc: 8 B header, 16 B rounding),
//! which is printed separately from the live allocation count.

use std::alloc::System;
use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion};
use gregor_publishers::records::{PartitionChangeRecord, NO_LEADER};
use gregor_publishers::{MetadataDelta, MetadataImage, MetadataRecord, Provenance};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

#[path = "support/image.rs"]
mod image;
use image::{apply, load, snapshot_records, topic_records};

/// Broker 3 leaves every ISR; where it led, the next ISR member takes over.
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

fn bench(c: &mut Criterion) {
    for partitions in [1_000, 10_000, 100_000, 1_000_000] {
        let records = snapshot_records(partitions);
        let image = Arc::new(load(&records));
        assert_eq!(image.topics.partition_count(), partitions);

        let mut group = c.benchmark_group("image_delta");
        let some_topic = image.topics.get_by_name("topic-0000007").map(|t| t.id);
        let shrink = [MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 3,
            topic_id: some_topic.unwrap_or_default(),
            isr: Some(vec![1, 2]),
            ..PartitionChangeRecord::default()
        })];
        group.bench_with_input(
            BenchmarkId::new("one_partition_isr_shrink", partitions),
            &shrink,
            |b, records| b.iter(|| black_box(apply(&image, records))),
        );
        let mut create = Vec::new();
        topic_records(partitions, &mut create);
        group.bench_with_input(
            BenchmarkId::new("create_10_partition_topic", partitions),
            &create,
            |b, records| b.iter(|| black_box(apply(&image, records))),
        );

        if partitions >= 100_000 {
            group.sample_size(10);
            let leave = broker_leaves_every_isr(&image);
            group.bench_with_input(
                BenchmarkId::new("broker_leaves_every_isr/replay_and_apply", partitions),
                &leave,
                |b, records| b.iter(|| black_box(apply(&image, records))),
            );
            let mut delta = MetadataDelta::new(Arc::clone(&image));
            for record in &leave {
                if let Err(error) = delta.replay(record) {
                    panic!("{error}");
                }
            }
            group.bench_function(
                BenchmarkId::new("broker_leaves_every_isr/apply_only", partitions),
                |b| b.iter(|| black_box(delta.apply(Provenance::default()))),
            );
            drop(delta);
            group.bench_with_input(
                BenchmarkId::new("snapshot_load", partitions),
                &records,
                |b, records| b.iter(|| black_box(load(records))),
            );
        }
        group.finish();
    }
}

/// Live bytes and allocations an image holds, per partition.
fn report_memory() {
    println!("image memory (counting allocator, live after build, temporaries dropped):");
    for partitions in [100_000, 1_000_000] {
        // The records are allocated before the region and freed after it, so the region sees
        // only the image and the delta's temporaries (allocated and freed inside `load`).
        let records = snapshot_records(partitions);
        let region = Region::new(GLOBAL);
        let started = Instant::now();
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        for record in &records {
            if let Err(error) = delta.replay(record) {
                panic!("snapshot does not replay: {error}");
            }
        }
        let replayed = started.elapsed();
        let image = delta.apply(Provenance::default());
        let applied = started.elapsed();
        drop(delta);
        let elapsed = started.elapsed();
        let stats = region.change();
        // stats_alloc already counts a realloc's growth in `bytes_allocated` (and a shrink in
        // `bytes_deallocated`); `bytes_reallocated` is the same change again.
        let live_bytes = stats.bytes_allocated as i64 - stats.bytes_deallocated as i64;
        let live_allocs = stats.allocations as i64 - stats.deallocations as i64;
        let per_partition = live_bytes as f64 / partitions as f64;
        let overhead = live_allocs as f64 * 8.0 / partitions as f64;
        println!(
            "  {partitions:>9} partitions: {live_bytes} B live in {live_allocs} allocations = \
             {per_partition:.1} B/partition (+~{overhead:.1} B/partition malloc headers); \
             load {elapsed:?} (replay {replayed:?}, apply {:?}, drop delta {:?})",
            applied - replayed,
            elapsed - applied
        );
        black_box(&image);
        drop(records);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if !args.iter().any(|a| a == "--list") {
        report_memory();
    }
    if args.iter().any(|a| a == "memory-only") {
        return;
    }
    let mut criterion = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    bench(&mut criterion);
    criterion.final_summary();
}
