//! The cluster view never allocates in proportion to the cluster: every call below allocates
//! a few hundred bytes (the boxes of returned iterators) on a 1,000- and a 100,000-partition
//! image alike. The only growth is logarithmic: imbl's ordered-map iterator (topics by name)
//! keeps a stack as deep as the tree.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::System;

use gregor_publishers::quota_callback::testing::ImageBuilder;
use gregor_publishers::quota_callback::{ClusterMetadata, ImageClusterMetadata};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Bytes allocated by every view call of one "publish", on an image with `topics` topics of 100
/// partitions over brokers 0-2 (broker 2 fenced).
fn bytes_allocated_by_view_calls(topics: usize) -> usize {
    let mut builder =
        ImageBuilder::new()
            .broker(0)
            .broker(1)
            .broker_with(2, true, &["PLAINTEXT", "INTERNAL"]);
    for topic in 0..topics {
        let replicas = [[0, 1, 2], [1, 2, 0], [2, 0, 1]];
        let layout: Vec<(i32, &[i32])> = (0..100)
            .map(|p| (replicas[p % 3][0], &replicas[p % 3][..]))
            .collect();
        builder = builder.topic_with(&format!("t{topic:06}"), &layout);
    }
    let image = builder.build();
    let region = Region::new(GLOBAL);
    let view = ImageClusterMetadata::new("cluster", &image);
    let cluster: &dyn ClusterMetadata = &view;
    assert_eq!(cluster.broker_ids().count(), 3);
    assert!(cluster.broker(2).unwrap().fenced());
    assert_eq!(cluster.topic_count(), topics);
    assert_eq!(cluster.topics().count(), topics);
    let id = cluster.topic_id("t000000").unwrap();
    assert_eq!(cluster.topic_name(&id), Some("t000000"));
    assert_eq!(cluster.partition_count("t000000"), Some(100));
    assert_eq!(cluster.partitions("t000000").count(), 100);
    assert_eq!(cluster.partitions_led_by("t000000", 1).count(), 33);
    let partition = cluster.partition("t000000", 2).unwrap();
    assert_eq!(partition.leader(), 2);
    assert_eq!(
        cluster.offline_replicas(partition).collect::<Vec<i32>>(),
        vec![2]
    );
    let stats = region.change();
    stats.bytes_allocated
}

#[test]
fn view_calls_allocate_the_same_few_bytes_whatever_the_cluster_size() {
    let small = bytes_allocated_by_view_calls(10);
    let large = bytes_allocated_by_view_calls(1_000);
    // 100x the partitions: at most a few more tree levels of iterator stack.
    assert!(
        large <= small + 64,
        "allocation grew with the cluster: {small} B -> {large} B"
    );
    // Nine boxed iterators (a few words each) and the one-element Vec the test collects.
    assert!(large < 1024, "view calls allocated {large} bytes");
}
