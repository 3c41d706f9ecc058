//! Cost of publishing a one-partition change to a quota callback at 10^3 .. 10^6 partitions:
//! through the borrowed view (Gregor's `ClientQuotaCallbackHandler`), next to the legacy
//! adapter that builds Kafka's whole `Cluster` for a `ClientQuotaCallback`, on the same images
//! (those of `image_delta`: 10 partitions per topic, RF 3 over 3 brokers).
//!
//! Run: `cargo bench -p gregor-publishers --bench quota_callback`
//!
//! Each iteration is what the quota publisher does for one delta: check the delta touches
//! topics or the cluster, wrap the new image in an `ImageClusterMetadata`, and call
//! `update_cluster_metadata`. The image is built once per size, outside the timing. Before
//! criterion runs, the bench prints the bytes each path allocates per publish and the live
//! size of the legacy `Cluster` (counting global allocator).

use std::alloc::System;
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion};
use gregor_publishers::quota_callback::{
    CallbackConfigs, CallbackError, ClientQuotaCallback, ClientQuotaCallbackHandler,
    ClientQuotaEntity, ClientQuotaType, Cluster, ClusterMetadata, GroupedUserQuotaCallback,
    ImageClusterMetadata, KafkaPrincipal, Legacy, QuotaMetricTags,
};
use gregor_publishers::records::PartitionChangeRecord;
use gregor_publishers::{MetadataDelta, MetadataImage, MetadataRecord};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[path = "support/image.rs"]
mod image;
use image::{apply, load, snapshot_records};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const SIZES: [usize; 4] = [1_000, 10_000, 100_000, 1_000_000];

/// A callback of the kind quota plug-ins are: it follows the leader of the partitions it cares
/// about (here one) and the number of brokers, reading them through the view.
#[derive(Default)]
struct FollowsOneLeader {
    state: std::sync::Mutex<(i32, usize)>,
}

impl ClientQuotaCallbackHandler for FollowsOneLeader {
    fn name(&self) -> &str {
        "follows-one-leader"
    }
    fn configure(&mut self, _: &CallbackConfigs) -> Result<(), CallbackError> {
        Ok(())
    }
    fn quota_metric_tags(
        &self,
        _: ClientQuotaType,
        _: &KafkaPrincipal,
        _: &str,
    ) -> QuotaMetricTags {
        QuotaMetricTags::empty()
    }
    fn quota_limit(&self, _: ClientQuotaType, _: &QuotaMetricTags) -> Option<f64> {
        None
    }
    fn update_quota(&self, _: ClientQuotaType, _: &ClientQuotaEntity, _: f64) {}
    fn remove_quota(&self, _: ClientQuotaType, _: &ClientQuotaEntity) {}
    fn quota_reset_required(&self, _: ClientQuotaType) -> bool {
        false
    }
    fn update_cluster_metadata(&self, cluster: &dyn ClusterMetadata) -> bool {
        let leader = cluster
            .partition("topic-0000007", 3)
            .map_or(-1, |p| p.leader());
        let brokers = cluster.broker_ids().count();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let changed = *state != (leader, brokers);
        *state = (leader, brokers);
        changed
    }
}

/// The same plug-in written against Kafka's old contract (it receives a whole `Cluster`).
#[derive(Default)]
struct LegacyFollowsOneLeader {
    state: std::sync::Mutex<(i32, usize)>,
}

impl ClientQuotaCallback for LegacyFollowsOneLeader {
    fn name(&self) -> &str {
        "legacy-follows-one-leader"
    }
    fn configure(&mut self, _: &CallbackConfigs) -> Result<(), CallbackError> {
        Ok(())
    }
    fn quota_metric_tags(
        &self,
        _: ClientQuotaType,
        _: &KafkaPrincipal,
        _: &str,
    ) -> QuotaMetricTags {
        QuotaMetricTags::empty()
    }
    fn quota_limit(&self, _: ClientQuotaType, _: &QuotaMetricTags) -> Option<f64> {
        None
    }
    fn update_quota(&self, _: ClientQuotaType, _: &ClientQuotaEntity, _: f64) {}
    fn remove_quota(&self, _: ClientQuotaType, _: &ClientQuotaEntity) {}
    fn quota_reset_required(&self, _: ClientQuotaType) -> bool {
        false
    }
    fn update_cluster_metadata_legacy(&self, cluster: &Cluster) -> bool {
        let leader = cluster.leader_for("topic-0000007", 3).map_or(-1, |n| n.id);
        let brokers = cluster.nodes().len();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let changed = *state != (leader, brokers);
        *state = (leader, brokers);
        changed
    }
}

/// What the quota publisher does with one delta.
fn publish(
    callback: &dyn ClientQuotaCallbackHandler,
    delta: &MetadataDelta,
    image: &MetadataImage,
) -> bool {
    if delta.topics_delta().is_none() && delta.cluster_delta().is_none() {
        return false;
    }
    callback.update_cluster_metadata(&ImageClusterMetadata::new("bench-cluster", image))
}

/// The one-partition change (leader of topic-0000007/3 moves) on `base`.
fn one_partition_change(base: &Arc<MetadataImage>) -> (MetadataDelta, MetadataImage) {
    let topic_id = base
        .topics
        .get_by_name("topic-0000007")
        .map(|t| t.id)
        .unwrap_or_default();
    let change = [MetadataRecord::PartitionChange(PartitionChangeRecord {
        partition_id: 3,
        topic_id,
        isr: Some(vec![1, 2]),
        leader: Some(2),
        ..PartitionChangeRecord::default()
    })];
    let mut delta = MetadataDelta::new(Arc::clone(base));
    for record in &change {
        if let Err(error) = delta.replay(record) {
            panic!("{error}");
        }
    }
    let image = apply(base, &change);
    (delta, image)
}

fn report_memory() {
    println!(
        "bytes allocated per publish (counting allocator), and the legacy Cluster's live size:"
    );
    for partitions in SIZES {
        let base = Arc::new(load(&snapshot_records(partitions)));
        let (delta, image) = one_partition_change(&base);
        let view_callback = FollowsOneLeader::default();
        let legacy_callback = Legacy(LegacyFollowsOneLeader::default());

        let region = Region::new(GLOBAL);
        black_box(publish(&view_callback, &delta, &image));
        let view = region.change();

        let region = Region::new(GLOBAL);
        black_box(publish(&legacy_callback, &delta, &image));
        let legacy = region.change();

        let region = Region::new(GLOBAL);
        let cluster = Cluster::from_view(&ImageClusterMetadata::new("bench-cluster", &image));
        let live = region.change();
        // stats_alloc already counts a realloc's growth in `bytes_allocated` (and a shrink in
        // `bytes_deallocated`); `bytes_reallocated` is the same change again.
        let live_bytes = live.bytes_allocated as i64 - live.bytes_deallocated as i64;
        black_box(&cluster);
        drop(cluster);
        println!(
            "  {partitions:>9} partitions: view {} B in {} allocations; legacy {} B in {} \
             allocations, Cluster live {:.1} MiB ({:.0} B/partition)",
            view.bytes_allocated,
            view.allocations,
            legacy.bytes_allocated,
            legacy.allocations,
            live_bytes as f64 / (1024.0 * 1024.0),
            live_bytes as f64 / partitions as f64,
        );
    }
}

fn bench(c: &mut Criterion) {
    for partitions in SIZES {
        let base = Arc::new(load(&snapshot_records(partitions)));
        let (delta, image) = one_partition_change(&base);
        let mut group = c.benchmark_group("quota_callback_publish");
        if partitions >= 100_000 {
            group.sample_size(10);
        }
        let view_callback = FollowsOneLeader::default();
        group.bench_function(
            BenchmarkId::new("view/one_partition_change", partitions),
            |b| b.iter(|| black_box(publish(&view_callback, &delta, &image))),
        );
        let legacy_callback = Legacy(LegacyFollowsOneLeader::default());
        group.bench_function(
            BenchmarkId::new("legacy_cluster/one_partition_change", partitions),
            |b| b.iter(|| black_box(publish(&legacy_callback, &delta, &image))),
        );
        // grouped-user reads every partition's leader by design (its cost is its own scan,
        // with no copy): shown for scale.
        let mut grouped = GroupedUserQuotaCallback::new();
        let configs = CallbackConfigs::from([("node.id".to_owned(), "1".to_owned())]);
        if let Err(error) = grouped.configure(&configs) {
            panic!("{error}");
        }
        group.bench_function(
            BenchmarkId::new("view_grouped_user/one_partition_change", partitions),
            |b| b.iter(|| black_box(publish(&grouped, &delta, &image))),
        );
        group.finish();
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
