//! Kafka's `CustomQuotaCallbackTest` (reference §5.5), ported to the quota layer: two nodes,
//! each with its own `grouped-user` callback, four managers and callback publisher, fed the same
//! real metadata images (brokers, topics, client-quota records, dynamic broker configs). There
//! is no Produce/Fetch API yet, so principals are injected where the managers record: a
//! "produce" is a 1,000-byte record into the leader's produce manager, a "fetch" a 1,000-byte
//! response into its fetch manager, each also charging request time, 1 ms apart on a manual
//! clock; "until throttled" stops at the first non-zero throttle, at most 1,000 records, as the
//! Kafka test does.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gregor_publishers::quota_callback::builtin::{
    GroupedUserStats, DEFAULT_FETCH_QUOTA_CONFIG, DEFAULT_PRODUCE_QUOTA_CONFIG,
};
use gregor_publishers::quota_callback::testing::{
    apply_records, broker_record, remove_topic_record, topic_id_for, topic_records,
};
use gregor_publishers::quota_callback::{
    CallbackConfigs, CallbackRegistry, ClientQuotaCallbackHandler, ClientQuotaType,
    GroupedUserQuotaCallback,
};
use gregor_publishers::records::{ClientQuotaRecord, ConfigRecord, EntityData};
use gregor_publishers::{
    LoaderManifest, MetadataImage, MetadataPublisher, MetadataRecord, Provenance,
};
use uuid::Uuid;

use super::QuotaCallbackPublisher;
use crate::quota::manager::{QuotaManager, UNLIMITED};
use crate::quota::{ManualClock, QuotaType, WindowConfig};

const DEFAULT_REQUEST_QUOTA: f64 = 1000.0;
const DEFAULT_PRODUCE_QUOTA: f64 = 2_000_000_000.0;
const DEFAULT_CONSUME_QUOTA: f64 = 1_000_000_000.0;
const RECORD_BYTES: f64 = 1000.0;

struct TestNode {
    managers: [Arc<QuotaManager>; 4],
    publisher: QuotaCallbackPublisher,
}

impl TestNode {
    fn manager(&self, quota_type: QuotaType) -> &QuotaManager {
        match quota_type {
            QuotaType::Produce => &self.managers[0],
            QuotaType::Fetch => &self.managers[1],
            QuotaType::Request => &self.managers[2],
            QuotaType::ControllerMutation => &self.managers[3],
        }
    }
}

struct Cluster {
    image: Arc<MetadataImage>,
    nodes: Vec<TestNode>,
    clock: Arc<ManualClock>,
    stats: Arc<Mutex<Vec<Arc<GroupedUserStats>>>>,
    instances: usize,
    topics: HashMap<String, Uuid>,
    offset: u64,
}

struct User {
    name: String,
    group: String,
    leader: usize,
    producer: String,
    consumer: String,
}

impl Cluster {
    /// Two nodes configured with `client.quota.callback.class=grouped-user`, created through
    /// the registry (counting instances, keeping each one's call counters).
    fn start() -> Cluster {
        let stats: Arc<Mutex<Vec<Arc<GroupedUserStats>>>> = Arc::default();
        let mut registry = CallbackRegistry::with_builtins();
        let kept = Arc::clone(&stats);
        registry
            .register("grouped-user-counted", move || {
                let callback = GroupedUserQuotaCallback::new();
                kept.lock().unwrap().push(callback.stats());
                Box::new(callback)
            })
            .unwrap();
        let clock = Arc::new(ManualClock::starting_at(1_000_000));
        let window = WindowConfig::new(11, 1);
        let mut nodes = Vec::new();
        for node_id in 0..2 {
            let configs = CallbackConfigs::from([
                ("node.id".to_owned(), node_id.to_string()),
                (
                    "client.quota.callback.class".to_owned(),
                    "grouped-user-counted".to_owned(),
                ),
            ]);
            let callback: Arc<dyn ClientQuotaCallbackHandler> = Arc::from(
                registry
                    .create(Some("grouped-user-counted"), &configs)
                    .unwrap(),
            );
            let managers = QuotaType::ALL.map(|quota_type| {
                let clock: Arc<dyn crate::quota::Clock> = clock.clone();
                let manager = Arc::new(QuotaManager::new(quota_type, window, clock));
                assert!(manager.install_callback(Arc::clone(&callback)).is_ok());
                manager
            });
            let publisher = QuotaCallbackPublisher::with_managers(
                callback,
                managers.clone(),
                "custom-quota-callback-test",
                node_id,
            );
            nodes.push(TestNode {
                managers,
                publisher,
            });
        }
        let instances = stats.lock().unwrap().len();
        let mut cluster = Cluster {
            image: Arc::new(MetadataImage::empty()),
            nodes,
            clock,
            stats,
            instances,
            topics: HashMap::new(),
            offset: 0,
        };
        cluster.apply(vec![
            broker_record(0, false, &["CLIENT", "BROKER"]),
            broker_record(1, false, &["CLIENT", "BROKER"]),
        ]);
        cluster
    }

    /// Commits `records` as one batch: the loader's delta and image go to both nodes.
    fn apply(&mut self, records: Vec<MetadataRecord>) {
        let (delta, image) = apply_records(&self.image, &records);
        self.offset += 1;
        let manifest = LoaderManifest::LogDelta {
            provenance: Provenance {
                last_log_index: self.offset,
                last_log_term: 1,
                last_applied_time_ms: 0,
            },
            num_batches: 1,
            num_records: records.len(),
            elapsed_ns: 0,
        };
        for node in &mut self.nodes {
            node.publisher
                .on_metadata_update(&delta, &image, &manifest)
                .unwrap();
        }
        self.image = image;
    }

    fn quota_records(group: &str, values: [(&str, Option<f64>); 3]) -> Vec<MetadataRecord> {
        values
            .into_iter()
            .map(|(key, value)| {
                MetadataRecord::ClientQuota(ClientQuotaRecord {
                    entity: vec![EntityData {
                        entity_type: "user".into(),
                        entity_name: Some(format!("{group}_")),
                    }],
                    key: key.into(),
                    value: value.unwrap_or(0.0),
                    remove: value.is_none(),
                })
            })
            .collect()
    }

    /// `kafka-configs --alter --entity-type users --entity-name <group>_` (group "" = `_`, the
    /// default group).
    fn configure_quota(&mut self, group: &str, produce: f64, fetch: f64) {
        self.apply(Self::quota_records(
            group,
            [
                ("producer_byte_rate", Some(produce)),
                ("consumer_byte_rate", Some(fetch)),
                ("request_percentage", Some(DEFAULT_REQUEST_QUOTA)),
            ],
        ));
    }

    fn remove_quota_overrides(&mut self, group: &str) {
        self.apply(Self::quota_records(
            group,
            [
                ("producer_byte_rate", None),
                ("consumer_byte_rate", None),
                ("request_percentage", None),
            ],
        ));
    }

    fn create_topic(&mut self, name: &str, partitions: usize, leader: i32) {
        let id = topic_id_for(name, self.topics.len());
        let replicas = [leader];
        let layout: Vec<(i32, &[i32])> = (0..partitions).map(|_| (leader, &replicas[..])).collect();
        self.apply(topic_records(name, id, &layout));
        self.topics.insert(name.to_owned(), id);
    }

    fn delete_topic(&mut self, name: &str) {
        let id = self.topics.remove(name).unwrap();
        self.apply(vec![remove_topic_record(id)]);
    }

    /// Cluster-wide dynamic broker configs (`perBrokerConfig = false`).
    fn alter_cluster_configs(&mut self, values: &[(&str, &str)]) {
        self.apply(
            values
                .iter()
                .map(|(name, value)| {
                    MetadataRecord::Config(ConfigRecord {
                        resource_type: 4,
                        resource_name: String::new(),
                        name: (*name).to_owned(),
                        value: Some((*value).to_owned()),
                    })
                })
                .collect(),
        );
    }

    fn user(&self, name: &str, leader: usize) -> User {
        User {
            name: name.to_owned(),
            group: gregor_publishers::quota_callback::builtin::group_of(name).to_owned(),
            leader,
            producer: format!("{name}:producer-client-id"),
            consumer: format!("{name}:consumer-client-id"),
        }
    }

    /// `createGroupWithOneUser`: the group's one-partition topic led by `leader`, and the
    /// default group quota set to the large defaults.
    fn create_group_with_one_user(&mut self, name: &str, leader: usize) -> User {
        let user = self.user(name, leader);
        self.create_topic(&format!("{}_topic", user.group), 1, leader as i32);
        self.configure_quota("", DEFAULT_PRODUCE_QUOTA, DEFAULT_CONSUME_QUOTA);
        self.wait_for_quota_update(&user, DEFAULT_PRODUCE_QUOTA, DEFAULT_CONSUME_QUOTA);
        user
    }

    /// `waitForQuotaUpdate`: the leader's managers apply these limits to the user now.
    fn wait_for_quota_update(&self, user: &User, produce: f64, fetch: f64) {
        let node = &self.nodes[user.leader];
        let actual = (
            node.manager(QuotaType::Produce)
                .quota_for(&user.name, &user.producer),
            node.manager(QuotaType::Fetch)
                .quota_for(&user.name, &user.consumer),
            node.manager(QuotaType::Request)
                .quota_for(&user.name, &user.producer),
        );
        assert_eq!(
            actual,
            (produce, fetch, DEFAULT_REQUEST_QUOTA),
            "quotas of {}",
            user.name
        );
    }

    fn configure_and_wait_for_quota(
        &mut self,
        user: &User,
        group: Option<&str>,
        produce: f64,
        fetch: f64,
        divisor: f64,
    ) {
        let group = group.unwrap_or("");
        self.configure_quota(group, produce, fetch);
        self.wait_for_quota_update(user, produce / divisor, fetch / divisor);
    }

    /// `removeThrottleMetrics` on every node, and enough time for old samples to expire.
    fn remove_throttle_metrics(&self) {
        self.clock.advance(60_000);
        for node in &self.nodes {
            for manager in &node.managers {
                manager.expire_idle_sensors(self.clock_ms(), 0);
            }
        }
    }

    fn clock_ms(&self) -> u64 {
        self.nodes[0].managers[0].now_ms()
    }

    fn until_throttled(&self, user: &User, quota_type: QuotaType, client_id: &str) -> bool {
        let node = &self.nodes[user.leader];
        for _ in 0..1000 {
            self.clock.advance(1);
            node.manager(QuotaType::Request)
                .record(&user.name, client_id, 0.01);
            if node
                .manager(quota_type)
                .record(&user.name, client_id, RECORD_BYTES)
                > 0
            {
                return true;
            }
        }
        false
    }

    fn produce_consume(
        &self,
        user: &User,
        expect_produce_throttle: bool,
        expect_consume_throttle: bool,
    ) {
        let produced = self.until_throttled(user, QuotaType::Produce, &user.producer);
        assert_eq!(
            produced, expect_produce_throttle,
            "produce throttle of {}",
            user.name
        );
        let consumed = self.until_throttled(user, QuotaType::Fetch, &user.consumer);
        assert_eq!(
            consumed, expect_consume_throttle,
            "consume throttle of {}",
            user.name
        );
        // Each step starts from fresh sensors (the test removes the throttle metrics).
        self.remove_throttle_metrics();
    }

    fn quota_limit_calls(&self, node: usize, quota_type: ClientQuotaType) -> u64 {
        self.stats.lock().unwrap()[node].quota_limit_calls(quota_type)
    }

    fn reset_counters(&self) {
        for stats in self.stats.lock().unwrap().iter() {
            stats.reset();
        }
    }
}

#[test]
fn custom_quota_callback_scenario() {
    let mut cluster = Cluster::start();

    // 1. Large quota override: no throttle; quotaLimit is asked once per sensor.
    let mut user = cluster.create_group_with_one_user("group0_user1", 0);
    cluster.configure_and_wait_for_quota(&user, Some("group0"), 1_000_000.0, 2_000_000.0, 1.0);
    cluster.reset_counters();
    cluster.produce_consume(&user, false, false);
    assert_eq!(cluster.quota_limit_calls(0, ClientQuotaType::Produce), 1);
    // Kafka asks > 2 times for fetch (also from getMaxValueInQuotaWindow, per fetch); Gregor's
    // managers ask when a sensor is created or its limits were invalidated.
    assert!(cluster.quota_limit_calls(0, ClientQuotaType::Fetch) >= 1);
    assert!(cluster.quota_limit_calls(0, ClientQuotaType::Request) <= 10);

    // 2. Large quota updated to small: throttled.
    cluster.configure_and_wait_for_quota(&user, Some("group0"), 9000.0, 3000.0, 1.0);
    cluster.produce_consume(&user, true, true);

    // 3. Override removed: the default group quota applies (large, no throttle).
    user = cluster.user("group0_user2", 0);
    cluster.remove_quota_overrides("group0");
    cluster.wait_for_quota_update(&user, DEFAULT_PRODUCE_QUOTA, DEFAULT_CONSUME_QUOTA);
    cluster.remove_throttle_metrics();
    cluster.produce_consume(&user, false, false);

    // 4. Smaller default: throttled.
    cluster.configure_and_wait_for_quota(&user, None, 8000.0, 2500.0, 1.0);
    cluster.produce_consume(&user, true, true);

    // 5. Large override again: not throttled.
    user = cluster.user("group0_user3", 0);
    cluster.configure_and_wait_for_quota(&user, Some("group0"), 2_000_000.0, 2_000_000.0, 1.0);
    cluster.remove_throttle_metrics();
    cluster.produce_consume(&user, false, false);

    // 6. group1 on node 1: quota large enough for its one partition.
    user = cluster.create_group_with_one_user("group1_user1", 1);
    cluster.configure_and_wait_for_quota(
        &user,
        Some("group1"),
        8000.0 * 100.0,
        2500.0 * 100.0,
        1.0,
    );
    cluster.produce_consume(&user, false, false);

    // 7. 99 partitions of group1 led by node 0: node 1 leads 1/100 of the group.
    cluster.create_topic("group1_largeTopic", 99, 0);
    cluster.wait_for_quota_update(&user, 8000.0, 2500.0);
    cluster.produce_consume(&user, true, true);

    // 8. Default quota scaled by the same share. (The ZooKeeper-era test relied on SCRAM
    //    credential creation removing group1's override; in KRaft it is removed explicitly.)
    user = cluster.user("group1_user2", 1);
    cluster.remove_quota_overrides("group1");
    cluster.wait_for_quota_update(
        &user,
        DEFAULT_PRODUCE_QUOTA / 100.0,
        DEFAULT_CONSUME_QUOTA / 100.0,
    );
    cluster.remove_throttle_metrics();
    cluster.produce_consume(&user, false, false);
    cluster.configure_and_wait_for_quota(&user, None, 8000.0 * 100.0, 2500.0 * 100.0, 100.0);
    cluster.produce_consume(&user, true, true);

    // 9. The large topic deleted: the share is back to 1, no throttle.
    cluster.delete_topic("group1_largeTopic");
    user = cluster.user("group1_user3", 1);
    cluster.wait_for_quota_update(&user, 8000.0 * 100.0, 2500.0 * 100.0);
    cluster.remove_throttle_metrics();
    cluster.produce_consume(&user, false, false);

    // 10. The callback's own dynamic configs, cluster-wide: throttled.
    cluster.alter_cluster_configs(&[
        (DEFAULT_PRODUCE_QUOTA_CONFIG, "8000"),
        (DEFAULT_FETCH_QUOTA_CONFIG, "2500"),
    ]);
    cluster.wait_for_quota_update(&user, 8000.0, 2500.0);
    cluster.produce_consume(&user, true, true);

    // 11. One callback instance per node.
    assert_eq!(cluster.instances, 2);
    // Both nodes followed every topic change through the view since the counters were reset
    // in step 1: group1_topic, group1_largeTopic, its deletion (quota and config changes are
    // not cluster changes).
    for node in 0..2 {
        assert_eq!(cluster.stats.lock().unwrap()[node].cluster_updates(), 3);
    }
}

/// A panicking plug-in is contained: the publisher and the request path keep working with the
/// limits they had, and the failure is counted.
#[test]
fn a_panicking_callback_is_contained() {
    struct Panics;
    impl ClientQuotaCallbackHandler for Panics {
        fn name(&self) -> &str {
            "panics"
        }
        fn configure(
            &mut self,
            _: &CallbackConfigs,
        ) -> Result<(), gregor_publishers::quota_callback::CallbackError> {
            Ok(())
        }
        fn quota_metric_tags(
            &self,
            _: ClientQuotaType,
            _: &gregor_publishers::quota_callback::KafkaPrincipal,
            _: &str,
        ) -> gregor_publishers::quota_callback::QuotaMetricTags {
            panic!("tags exploded")
        }
        fn quota_limit(
            &self,
            _: ClientQuotaType,
            _: &gregor_publishers::quota_callback::QuotaMetricTags,
        ) -> Option<f64> {
            panic!("limit exploded")
        }
        fn update_quota(
            &self,
            _: ClientQuotaType,
            _: &gregor_publishers::quota_callback::ClientQuotaEntity,
            _: f64,
        ) {
            panic!("update exploded")
        }
        fn remove_quota(
            &self,
            _: ClientQuotaType,
            _: &gregor_publishers::quota_callback::ClientQuotaEntity,
        ) {
        }
        fn quota_reset_required(&self, _: ClientQuotaType) -> bool {
            panic!("flag exploded")
        }
        fn update_cluster_metadata(
            &self,
            _: &dyn gregor_publishers::quota_callback::ClusterMetadata,
        ) -> bool {
            panic!("cluster exploded")
        }
    }
    let recorder = metrics_util::debugging::DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || {
        let callback: Arc<dyn ClientQuotaCallbackHandler> = Arc::new(Panics);
        let clock: Arc<dyn crate::quota::Clock> = Arc::new(ManualClock::starting_at(0));
        let managers = QuotaType::ALL.map(|quota_type| {
            let manager = Arc::new(QuotaManager::new(
                quota_type,
                WindowConfig::new(11, 1),
                Arc::clone(&clock),
            ));
            assert!(manager.install_callback(Arc::clone(&callback)).is_ok());
            manager
        });
        let mut publisher =
            QuotaCallbackPublisher::with_managers(callback, managers.clone(), "c", 0);
        let mut records = vec![broker_record(0, false, &["PLAINTEXT"])];
        records.extend(topic_records("t", topic_id_for("t", 0), &[(0, &[0])]));
        records.push(MetadataRecord::ClientQuota(ClientQuotaRecord {
            entity: vec![EntityData {
                entity_type: "user".into(),
                entity_name: Some("u".into()),
            }],
            key: "producer_byte_rate".into(),
            value: 10.0,
            remove: false,
        }));
        let (delta, image) = apply_records(&Arc::new(MetadataImage::empty()), &records);
        let manifest = LoaderManifest::LogDelta {
            provenance: Provenance::default(),
            num_batches: 1,
            num_records: records.len(),
            elapsed_ns: 0,
        };
        assert!(publisher
            .on_metadata_update(&delta, &image, &manifest)
            .is_ok());
        // Requests still get an answer: unlimited, no throttle.
        assert_eq!(managers[0].record("u", "c", 1e9), 0);
        assert_eq!(managers[0].quota_for("u", "c"), UNLIMITED);
    });
    let failures: u64 = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter(|(key, ..)| {
            key.key().name() == gregor_metrics::names::QUOTA_CALLBACK_FAILURES_TOTAL
        })
        .map(|(_, _, _, value)| match value {
            metrics_util::debugging::DebugValue::Counter(n) => n,
            _ => 0,
        })
        .sum();
    // update_quota, update_cluster_metadata, then per request: flag, tags, limit (record and
    // quota_for each ask).
    assert!(failures >= 5, "{failures} failures counted");
}

/// With no callback configured the managers use their own copy of Kafka's built-in rules
/// (`QuotaTable`); it must answer exactly as the `default` plug-in does, tags and limits, for
/// every mixture of the eight entity levels.
#[test]
fn built_in_table_and_default_plugin_agree() {
    use crate::quota::entity::{EntityName, QuotaEntity, QuotaTable};
    use gregor_publishers::quota_callback::{
        ClientQuotaEntity, ConfigEntity, DefaultQuotaCallback, KafkaPrincipal, QuotaMetricTags,
    };

    let named = |n: &str| Some(EntityName::Named(n.to_owned()));
    let shapes: Vec<(QuotaEntity, ClientQuotaEntity)> = [
        (named("alice"), named("app")),
        (named("alice"), Some(EntityName::Default)),
        (named("alice"), None),
        (Some(EntityName::Default), named("app")),
        (Some(EntityName::Default), Some(EntityName::Default)),
        (Some(EntityName::Default), None),
        (None, named("app")),
        (None, Some(EntityName::Default)),
    ]
    .into_iter()
    .map(|(user, client)| {
        let callback_user = user.as_ref().map(|u| match u {
            EntityName::Named(n) => ConfigEntity::user(n.clone()),
            EntityName::Default => ConfigEntity::default_user(),
        });
        let callback_client = client.as_ref().map(|c| match c {
            EntityName::Named(n) => ConfigEntity::client_id(n.clone()),
            EntityName::Default => ConfigEntity::default_client_id(),
        });
        (
            QuotaEntity {
                user,
                client_id: client,
            },
            ClientQuotaEntity::new(callback_user, callback_client).unwrap(),
        )
    })
    .collect();
    let t = ClientQuotaType::Produce;
    // Every subset of the eight levels (256 mixtures), each level with its own value.
    for mask in 0u32..256 {
        let mut table = QuotaTable::new();
        let plugin = DefaultQuotaCallback::new();
        for (level, (entity, callback_entity)) in shapes.iter().enumerate() {
            if mask & (1 << level) != 0 {
                table.update(entity.clone(), Some(level as f64 + 1.0));
                plugin.update_quota(t, callback_entity, level as f64 + 1.0);
            }
        }
        for (user, client) in [
            ("alice", "app"),
            ("bob", "app"),
            ("alice", "other"),
            ("bob", ""),
        ] {
            let (tags, limit) = table.limit_for(user, client);
            let plugin_tags = plugin.quota_metric_tags(t, &KafkaPrincipal::user(user), client);
            assert_eq!(
                plugin_tags,
                QuotaMetricTags::user_client_id(&tags.user, &tags.client_id),
                "tags, mask {mask:#010b}, ({user}, {client})"
            );
            assert_eq!(
                plugin.quota_limit(t, &plugin_tags),
                limit,
                "limit, mask {mask:#010b}"
            );
        }
    }
}
