//! The conformance suite every quota callback runs with one call, and the image builder its
//! tests (and anyone's) use.
//!
//! ```
//! use gregor_publishers::quota_callback::testing::run_conformance_suite;
//! use gregor_publishers::quota_callback::DefaultQuotaCallback;
//!
//! run_conformance_suite(|| Box::new(DefaultQuotaCallback::new()));
//! ```
//!
//! The suite checks, on fresh instances, the requirements of
//! [`ClientQuotaCallbackHandler`] that can be checked from outside: configuration with the
//! node's standard keys, deterministic tags, exact update/remove, `quota_reset_required` as a
//! cheap one-shot flag, `update_cluster_metadata` on awkward clusters (fenced and unregistered
//! replica brokers, leaderless partitions, an empty cluster) answering `false` the second time,
//! and concurrent use from request threads while the publisher updates. It panics with a message
//! naming the requirement that failed.

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::view::ImageClusterMetadata;
use super::{
    CallbackConfigs, ClientQuotaCallbackHandler, ClientQuotaEntity, ClientQuotaType, ConfigEntity,
    KafkaPrincipal, QuotaMetricTags,
};
use crate::delta::MetadataDelta;
use crate::image::{MetadataImage, Provenance};
use crate::records::{
    Endpoint, MetadataRecord, PartitionRecord, RegisterBrokerRecord, RemoveTopicRecord,
    TopicRecord, NO_LEADER,
};

/// Builds small images from brokers and topics, for callback tests, doctests and benches.
#[derive(Clone, Debug, Default)]
pub struct ImageBuilder {
    records: Vec<MetadataRecord>,
    topics: usize,
}

/// A deterministic, well-spread topic id for the `index`-th topic named `name`.
pub fn topic_id_for(name: &str, index: usize) -> Uuid {
    // FNV-1a over the name, mixed with the index: stable across runs, distinct per topic.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    Uuid::from_u64_pair(hash, (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
}

/// The log directory of broker `id` in images the builder makes.
pub fn log_dir_of(id: i32) -> Uuid {
    Uuid::from_u128(0xd1_0000 + u128::from(id.unsigned_abs()))
}

/// The records of a topic `name` with id `id` whose partition `i` has leader `partitions[i].0`
/// (-1 for none) and replicas `partitions[i].1` (ISR = replicas).
pub fn topic_records(name: &str, id: Uuid, partitions: &[(i32, &[i32])]) -> Vec<MetadataRecord> {
    let mut out = Vec::with_capacity(partitions.len() + 1);
    out.push(MetadataRecord::Topic(TopicRecord {
        name: name.to_owned(),
        topic_id: id,
    }));
    for (index, (leader, replicas)) in partitions.iter().enumerate() {
        out.push(MetadataRecord::Partition(PartitionRecord {
            partition_id: i32::try_from(index).unwrap_or(i32::MAX),
            topic_id: id,
            replicas: replicas.to_vec(),
            isr: replicas.to_vec(),
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader: *leader,
            leader_recovery_state: 0,
            leader_epoch: 0,
            partition_epoch: 0,
            directories: replicas.iter().map(|b| log_dir_of(*b)).collect(),
        }));
    }
    out
}

/// The record deleting topic `id`.
pub fn remove_topic_record(id: Uuid) -> MetadataRecord {
    MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id: id })
}

/// The registration of broker `id` with one listener per name (ports 9092, 9093, ...).
pub fn broker_record(id: i32, fenced: bool, listeners: &[&str]) -> MetadataRecord {
    MetadataRecord::RegisterBroker(RegisterBrokerRecord {
        broker_id: id,
        incarnation_id: Uuid::from_u128(0xb000 + u128::from(id.unsigned_abs())),
        broker_epoch: 10 + i64::from(id),
        endpoints: listeners
            .iter()
            .zip(9092u16..)
            .map(|(name, port)| Endpoint {
                name: (*name).to_owned(),
                host: format!("broker{id}"),
                port,
                security_protocol: 0,
            })
            .collect(),
        features: vec![],
        rack: Some(format!("rack{}", id.rem_euclid(2))),
        fenced,
        in_controlled_shutdown: false,
        log_dirs: vec![log_dir_of(id)],
    })
}

/// `records` replayed as one delta on `base`: the delta (to publish) and the new image.
///
/// # Panics
/// If a record does not replay (a bug in the test's records).
pub fn apply_records(
    base: &Arc<MetadataImage>,
    records: &[MetadataRecord],
) -> (MetadataDelta, Arc<MetadataImage>) {
    let mut delta = MetadataDelta::new(Arc::clone(base));
    for record in records {
        if let Err(error) = delta.replay(record) {
            panic!("test records do not replay: {error}");
        }
    }
    let image = Arc::new(delta.apply(Provenance::default()));
    (delta, image)
}

impl ImageBuilder {
    /// No broker, no topic.
    pub fn new() -> Self {
        ImageBuilder::default()
    }

    /// An unfenced broker `id` with a `PLAINTEXT` listener.
    pub fn broker(self, id: i32) -> Self {
        self.broker_with(id, false, &["PLAINTEXT"])
    }

    /// A broker `id`, fenced or not, with these listeners.
    pub fn broker_with(mut self, id: i32, fenced: bool, listeners: &[&str]) -> Self {
        self.records.push(broker_record(id, fenced, listeners));
        self
    }

    /// A topic of `partitions` partitions, each with `leader` as leader and only replica.
    pub fn topic_led_by(self, name: &str, partitions: usize, leader: i32) -> Self {
        let replicas = [leader];
        let layout: Vec<(i32, &[i32])> = (0..partitions).map(|_| (leader, &replicas[..])).collect();
        self.topic_with(name, &layout)
    }

    /// A topic whose partition `i` has leader `partitions[i].0` (-1 for none) and replicas
    /// `partitions[i].1`.
    pub fn topic_with(mut self, name: &str, partitions: &[(i32, &[i32])]) -> Self {
        let id = topic_id_for(name, self.topics);
        self.topics += 1;
        self.records.extend(topic_records(name, id, partitions));
        self
    }

    /// The records so far.
    pub fn records(&self) -> &[MetadataRecord] {
        &self.records
    }

    /// The image.
    ///
    /// # Panics
    /// If the records do not replay (two topics of one name, for instance).
    pub fn build(&self) -> MetadataImage {
        let (_, image) = apply_records(&Arc::new(MetadataImage::empty()), &self.records);
        Arc::unwrap_or_clone(image)
    }
}

/// The configuration the suite configures plug-ins with: node 0's id keys.
pub fn standard_configs() -> CallbackConfigs {
    BTreeMap::from([
        ("node.id".to_owned(), "0".to_owned()),
        ("broker.id".to_owned(), "0".to_owned()),
        ("client.quota.callback.class".to_owned(), String::new()),
    ])
}

/// Runs the suite on plug-ins made by `make`, configured with [`standard_configs`].
///
/// # Panics
/// With the requirement that failed.
pub fn run_conformance_suite<F>(make: F)
where
    F: Fn() -> Box<dyn ClientQuotaCallbackHandler>,
{
    run_conformance_suite_with(&standard_configs(), make);
}

/// Runs the suite on plug-ins made by `make`, each configured with `configs`.
///
/// # Panics
/// With the requirement that failed.
pub fn run_conformance_suite_with<F>(configs: &CallbackConfigs, make: F)
where
    F: Fn() -> Box<dyn ClientQuotaCallbackHandler>,
{
    let fresh = || {
        let mut callback = make();
        if let Err(error) = callback.configure(configs) {
            panic!("configure() with the node's standard configs failed: {error}");
        }
        assert!(!callback.name().is_empty(), "name() must not be empty");
        callback
    };
    tags_are_deterministic(&*fresh());
    updates_are_exact(&*fresh());
    reset_flag_is_cheap_and_one_shot(&*fresh());
    cluster_updates_are_idempotent(&*fresh());
    concurrent_use(Arc::from(fresh()));
    let last = fresh();
    last.close();
}

const PRINCIPALS: [&str; 4] = ["alice", "group0_user1", "ANONYMOUS", "a b"];
const CLIENT_IDS: [&str; 3] = ["app", "", "group0_user1:producer"];

/// Tags and limits of every sample (principal, client id), for one quota type.
fn sample_limits(
    callback: &dyn ClientQuotaCallbackHandler,
    quota_type: ClientQuotaType,
) -> Vec<(QuotaMetricTags, Option<f64>)> {
    let mut out = Vec::new();
    for principal in PRINCIPALS {
        let principal = KafkaPrincipal::user(principal);
        for client_id in CLIENT_IDS {
            let tags = callback.quota_metric_tags(quota_type, &principal, client_id);
            let limit = callback.quota_limit(quota_type, &tags);
            out.push((tags, limit));
        }
    }
    out
}

fn sample_entities() -> Vec<ClientQuotaEntity> {
    let users = [
        Some(ConfigEntity::user("alice")),
        Some(ConfigEntity::user("group0_")),
        Some(ConfigEntity::default_user()),
        None,
    ];
    let clients = [
        Some(ConfigEntity::client_id("app")),
        Some(ConfigEntity::default_client_id()),
        None,
    ];
    users
        .iter()
        .flat_map(|user| {
            clients
                .iter()
                .filter_map(|client| ClientQuotaEntity::new(user.clone(), client.clone()))
        })
        .collect()
}

fn tags_are_deterministic(callback: &dyn ClientQuotaCallbackHandler) {
    for quota_type in ClientQuotaType::ALL {
        let first = sample_limits(callback, quota_type);
        let second = sample_limits(callback, quota_type);
        assert_eq!(
            first, second,
            "quota_metric_tags/quota_limit must be deterministic while nothing changes ({quota_type})"
        );
    }
}

fn updates_are_exact(callback: &dyn ClientQuotaCallbackHandler) {
    for quota_type in ClientQuotaType::ALL {
        for entity in sample_entities() {
            let before = sample_limits(callback, quota_type);
            callback.update_quota(quota_type, &entity, 12_345.0);
            callback.update_quota(quota_type, &entity, 23_456.0);
            callback.remove_quota(quota_type, &entity);
            let after = sample_limits(callback, quota_type);
            assert_eq!(
                before, after,
                "update_quota then remove_quota of {quota_type} for [{entity}] must restore every \
                 tag and limit"
            );
        }
    }
}

fn reset_flag_is_cheap_and_one_shot(callback: &dyn ClientQuotaCallbackHandler) {
    for quota_type in ClientQuotaType::ALL {
        let _ = callback.quota_reset_required(quota_type);
        assert!(
            !callback.quota_reset_required(quota_type),
            "quota_reset_required({quota_type}) must answer true at most once per change"
        );
    }
    const CALLS: u32 = 20_000;
    let started = Instant::now();
    for index in 0..CALLS {
        let quota_type = ClientQuotaType::ALL[(index % 4) as usize];
        std::hint::black_box(callback.quota_reset_required(quota_type));
    }
    let per_call = started.elapsed() / CALLS;
    // Generous enough for an unoptimised build on a loaded machine; a lookup or a lock that
    // waits on the publisher would blow it.
    assert!(
        per_call < Duration::from_micros(20),
        "quota_reset_required is called on every request and must be a flag read; it took \
         {per_call:?} per call"
    );
}

fn cluster_updates_are_idempotent(callback: &dyn ClientQuotaCallbackHandler) {
    let awkward = ImageBuilder::new()
        .broker(0)
        .broker_with(1, true, &["PLAINTEXT", "INTERNAL"])
        .broker_with(2, false, &["PLAINTEXT", "INTERNAL", "REPLICATION"])
        .topic_led_by("group0_topic", 3, 0)
        .topic_with(
            "group1_topic",
            &[
                (1, &[1, 0]),
                (NO_LEADER, &[1, 7]),
                (7, &[7]),
                (2, &[2, 1, 0, 7]),
            ],
        )
        .topic_with("plain", &[])
        .build();
    for image in [MetadataImage::empty(), awkward] {
        let view = ImageClusterMetadata::new("conformance", &image);
        let _ = callback.update_cluster_metadata(&view);
        assert!(
            !callback.update_cluster_metadata(&view),
            "update_cluster_metadata must answer false for an unchanged cluster"
        );
        for quota_type in ClientQuotaType::ALL {
            let _ = sample_limits(callback, quota_type);
        }
    }
}

fn concurrent_use(callback: Arc<dyn ClientQuotaCallbackHandler>) {
    const READERS: usize = 3;
    const ROUNDS: usize = 300;
    let (done_tx, done_rx) = mpsc::channel();
    for reader in 0..READERS {
        let callback = Arc::clone(&callback);
        let done = done_tx.clone();
        std::thread::spawn(move || {
            for round in 0..ROUNDS {
                let quota_type = ClientQuotaType::ALL[(round + reader) % 4];
                let principal = KafkaPrincipal::user(PRINCIPALS[round % PRINCIPALS.len()]);
                let client_id = CLIENT_IDS[round % CLIENT_IDS.len()];
                let _ = callback.quota_reset_required(quota_type);
                let tags = callback.quota_metric_tags(quota_type, &principal, client_id);
                let _ = callback.quota_limit(quota_type, &tags);
            }
            let _ = done.send(());
        });
    }
    drop(done_tx);
    let image = ImageBuilder::new()
        .broker(0)
        .topic_led_by("group0_topic", 2, 0)
        .build();
    let entities = sample_entities();
    for round in 0..ROUNDS {
        let quota_type = ClientQuotaType::ALL[round % 4];
        let entity = &entities[round % entities.len()];
        callback.update_quota(quota_type, entity, 1_000.0 + round as f64);
        if round % 7 == 0 {
            let _ = callback.update_cluster_metadata(&ImageClusterMetadata::new("c", &image));
        }
        callback.remove_quota(quota_type, entity);
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    for _ in 0..READERS {
        let left = deadline.saturating_duration_since(Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            panic!(
                "request-path calls did not finish within 30 s while quotas were updated: a \
                 deadlock or a reader panic"
            );
        }
    }
}
