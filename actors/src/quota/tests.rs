//! Ports of Kafka's ControllerMutationQuotaManagerTest / ControllerMutationQuotaTest (reference
//! §3.7, same numbers), the ClientQuotaManager worked example through a manager, and the
//! publisher → actor path. Time is a [`ManualClock`]; nothing sleeps.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use gregor_publishers::records::{ClientQuotaRecord, EntityData, MetadataRecord};
use gregor_publishers::{
    LoaderManifest, MetadataDelta, MetadataImage, MetadataPublisher, Provenance,
};

use super::actor::ExpireIdleSensors;
use super::manager::SENSOR_IDLE_EXPIRY_MS;
use super::*;
use crate::controller::logic::MutationQuota;

const USER: &str = "ANONYMOUS";
const CLIENT: &str = "test-client";

fn manager(quota_type: QuotaType, samples: u32, clock: &ManualClock) -> Arc<QuotaManager> {
    Arc::new(QuotaManager::new(
        quota_type,
        WindowConfig::new(samples, 1),
        Arc::new(clock.clone()),
    ))
}

fn user_client(user: &str, client: &str) -> QuotaEntity {
    QuotaEntity::new(Some(Some(user)), Some(Some(client)))
}

/// §3.7 case 1: strict quota, 10/s, 10 × 1 s (burst 100).
#[test]
fn strict_controller_mutation_quota() {
    let clock = ManualClock::starting_at(1_700_000_000_000);
    let manager = manager(QuotaType::ControllerMutation, 10, &clock);
    manager.update_quotas([(user_client(USER, CLIENT), Some(10.0))]);
    let mut quota = manager.new_quota_for(USER, CLIENT, true);
    assert!(!quota.is_exceeded());
    assert_eq!(quota.record(90.0), Ok(()));
    assert!(!quota.is_exceeded());
    assert_eq!(quota.throttle_time_ms(), 0);
    assert_eq!(quota.record(90.0), Ok(()));
    assert!(!quota.is_exceeded());
    assert_eq!(quota.throttle_time_ms(), 0);
    assert_eq!(manager.measured(USER, CLIENT), Some(-80.0));
    assert_eq!(quota.record(90.0), Err(8000));
    assert!(quota.is_exceeded());
    assert_eq!(quota.throttle_time_ms(), 8000);
    clock.advance(5000);
    assert_eq!(quota.throttle_time_ms(), 3000);
}

/// §3.7 case 2: permissive quota, same numbers; never "exceeded".
#[test]
fn permissive_controller_mutation_quota() {
    let clock = ManualClock::starting_at(1_700_000_000_000);
    let manager = manager(QuotaType::ControllerMutation, 10, &clock);
    manager.update_quotas([(user_client(USER, CLIENT), Some(10.0))]);
    let mut quota = manager.new_quota_for(USER, CLIENT, false);
    assert_eq!(quota.record(90.0), Ok(()));
    assert_eq!(quota.throttle_time_ms(), 0);
    assert_eq!(quota.record(90.0), Ok(()));
    assert_eq!(quota.throttle_time_ms(), 8000);
    assert_eq!(quota.record(90.0), Ok(()));
    assert!(!quota.is_exceeded());
    assert_eq!(quota.throttle_time_ms(), 17000);
    clock.advance(5000);
    assert_eq!(quota.throttle_time_ms(), 12000);
}

/// The `MutationQuota` hook the controller logic calls reports the same throttle.
#[test]
fn mutation_quota_hook_maps_rejections() {
    let clock = ManualClock::starting_at(0);
    let manager = manager(QuotaType::ControllerMutation, 10, &clock);
    manager.update_quotas([(QuotaEntity::new(Some(Some(USER)), None), Some(2.0))]);
    let mut quota = manager.new_quota_for(USER, "", true);
    // Burst 20: 30 partitions are admitted (bucket 20 → −10), the next topic is rejected
    // with −(−10) / 2 = 5 s.
    assert_eq!(quota.charge(30), Ok(()));
    let rejected = quota.charge(30).unwrap_err();
    assert_eq!(rejected.throttle_time_ms, 5000);
    assert_eq!(quota.throttle_time_ms(), 5000);
    // Permissive v5: 2 × 30 → 20 − 60 = −40 ⇒ 20 s.
    let mut fresh = manager.new_quota_for("ANONYMOUS", "", false);
    clock.advance(100_000);
    assert_eq!(fresh.charge(30), Ok(()));
    assert_eq!(fresh.charge(30), Ok(()));
    assert_eq!(fresh.throttle_time_ms(), 20_000);
}

/// §3.7 case 4: the manager with quota 10 for (ANONYMOUS, test-client), 10 × 1 s.
#[test]
fn controller_mutation_quota_violation() {
    let clock = ManualClock::starting_at(1_700_000_000_000);
    let manager = manager(QuotaType::ControllerMutation, 10, &clock);
    manager.update_quotas([(user_client(USER, CLIENT), Some(10.0))]);
    let record = |value: f64| match manager.new_quota_for(USER, CLIENT, true).record(value) {
        Ok(()) => 0,
        Err(throttle) => throttle,
    };
    for _ in 0..10 {
        assert_eq!(record(10.0), 0);
        clock.advance(1000);
    }
    assert_eq!(manager.queue_size(), 0);
    // Strict: checked before recording, so the first spike of 110 (bucket 100) is accepted.
    assert_eq!(record(110.0), 0);
    // The bucket is at −10: the second spike is rejected, 10 / 10 s = 1000 ms.
    let throttle = record(110.0);
    assert_eq!(throttle, 1000);
    // Throttling puts the connection in the queue until the throttle ends.
    let guard = manager.throttle(USER, CLIENT, throttle);
    assert_eq!(manager.queue_size(), 1);
    clock.advance(999);
    assert_eq!(guard.remaining_ms(), 1);
    clock.advance(1);
    assert_eq!(guard.remaining_ms(), 0);
    drop(guard);
    assert_eq!(manager.queue_size(), 0);
    // The bucket refilled to 0 during the throttle: a new spike is accepted.
    assert_eq!(record(110.0), 0);
}

/// §3.7 case 5: unbounded until any quota of the type exists.
#[test]
fn new_quota_for_is_unbounded_without_quotas() {
    let clock = ManualClock::starting_at(0);
    let manager = manager(QuotaType::ControllerMutation, 10, &clock);
    assert!(matches!(
        manager.new_quota_for(USER, CLIENT, true),
        ControllerMutationQuota::Unbounded
    ));
    assert!(matches!(
        manager.new_quota_for(USER, CLIENT, false),
        ControllerMutationQuota::Unbounded
    ));
    manager.update_quotas([(
        QuotaEntity::new(Some(Some("someone-else")), None),
        Some(1.0),
    )]);
    assert!(matches!(
        manager.new_quota_for(USER, CLIENT, true),
        ControllerMutationQuota::Strict { .. }
    ));
    assert!(matches!(
        manager.new_quota_for(USER, CLIENT, false),
        ControllerMutationQuota::Permissive(_)
    ));
    // A user without a quota of its own is never throttled.
    let mut quota = manager.new_quota_for(USER, CLIENT, true);
    for _ in 0..100 {
        assert_eq!(quota.record(1e6), Ok(()));
    }
}

/// §3.7 case 6 (manager side): unlimited, then the set value, then unlimited again.
#[test]
fn quota_set_and_unset() {
    let clock = ManualClock::starting_at(0);
    let manager = manager(QuotaType::ControllerMutation, 10, &clock);
    let entity = QuotaEntity::new(Some(Some("ThrottledPrincipal")), None);
    assert_eq!(manager.quota_for("ThrottledPrincipal", ""), UNLIMITED);
    manager.update_quotas([(entity.clone(), Some(1.5))]);
    assert_eq!(manager.quota_for("ThrottledPrincipal", ""), 1.5);
    manager.update_quotas([(entity, None)]);
    assert_eq!(manager.quota_for("ThrottledPrincipal", ""), UNLIMITED);
}

/// §3.7 case 7: the sensor follows a quota update (rate 2 → 4 doubles the burst).
#[test]
fn quota_update_reaches_existing_sensors() {
    let clock = ManualClock::starting_at(0);
    let manager = manager(QuotaType::ControllerMutation, 10, &clock);
    let entity = QuotaEntity::new(Some(Some("ThrottledPrincipal")), None);
    manager.update_quotas([(entity.clone(), Some(2.0))]);
    assert_eq!(manager.sensor_count(), 0, "sensors are created lazily");
    let mut quota = manager.new_quota_for("ThrottledPrincipal", "", true);
    quota.record(0.0).unwrap();
    assert_eq!(manager.measured("ThrottledPrincipal", ""), Some(20.0));
    manager.update_quotas([(entity, Some(4.0))]);
    clock.advance(10_000);
    assert_eq!(manager.measured("ThrottledPrincipal", ""), Some(40.0));
}

/// The ClientQuotaManager worked example through the produce manager: 2100 ms.
#[test]
fn produce_manager_worked_example() {
    let clock = ManualClock::starting_at(0);
    let manager = manager(QuotaType::Produce, 11, &clock);
    manager.update_quotas([(QuotaEntity::new(None, Some(Some("unknown"))), Some(500.0))]);
    for _ in 0..10 {
        assert_eq!(manager.record(USER, "unknown", 400.0), 0);
        clock.advance(1000);
    }
    clock.advance(500);
    assert_eq!(manager.record(USER, "unknown", 2300.0), 2100);
    // Another client is not limited by a client-id quota of "unknown".
    assert_eq!(manager.record(USER, "other", 1e9), 0);
}

/// The request quota's throttle is capped at one window.
#[test]
fn request_throttle_is_capped_at_one_window() {
    let clock = ManualClock::starting_at(0);
    let manager = manager(QuotaType::Request, 11, &clock);
    manager.update_quotas([(QuotaEntity::new(Some(None), None), Some(1.0))]);
    // 1000 % of a thread-second in one go against a 1 % quota.
    assert_eq!(manager.record(USER, CLIENT, 1000.0), 1000);
}

#[test]
fn no_quota_records_nothing() {
    let clock = ManualClock::starting_at(0);
    let manager = manager(QuotaType::Fetch, 11, &clock);
    assert_eq!(manager.record(USER, CLIENT, 1e12), 0);
    assert_eq!(manager.sensor_count(), 0);
    assert!(!manager.quotas_enabled());
}

#[test]
fn idle_sensors_expire_after_an_hour() {
    let clock = ManualClock::starting_at(0);
    let manager = manager(QuotaType::Produce, 11, &clock);
    manager.update_quotas([(QuotaEntity::new(None, Some(None)), Some(1e9))]);
    manager.record(USER, "a", 1.0);
    clock.advance(SENSOR_IDLE_EXPIRY_MS);
    manager.record(USER, "b", 1.0);
    // Exactly an hour idle is not yet expired (Kafka: idle > expiry).
    assert_eq!(
        manager.expire_idle_sensors(clock.now_ms(), SENSOR_IDLE_EXPIRY_MS),
        0
    );
    clock.advance(1);
    assert_eq!(
        manager.expire_idle_sensors(clock.now_ms(), SENSOR_IDLE_EXPIRY_MS),
        1
    );
    assert_eq!(manager.sensor_count(), 1);
}

/// Kafka removes a sensor's metrics with the sensor: a client cycling through client ids must
/// not grow the scrape without bound.
#[test]
fn an_expired_sensor_takes_its_series_out_of_the_scrape() {
    let scrape = || {
        let mut body = String::new();
        gregor_metrics::removable::render(&mut body);
        body
    };
    let clock = ManualClock::starting_at(0);
    let manager = manager(QuotaType::Produce, 11, &clock);
    manager.update_quotas([(QuotaEntity::new(None, Some(None)), Some(1e9))]);
    manager.record(USER, "expiring-client", 1000.0);
    manager.record(USER, "staying-client", 1000.0);
    // Series of `name` labelled with `client` in a scrape.
    let has = |body: &str, name: &str, client: &str| {
        body.lines().any(|line| {
            line.starts_with(&format!("{name}{{"))
                && line.contains(&format!("clientId=\"{client}\""))
        })
    };
    let body = scrape();
    assert!(
        has(&body, "kafka_server_quota_byte_rate", "expiring-client"),
        "{body}"
    );
    assert!(
        has(&body, "kafka_server_quota_throttle_time", "expiring-client"),
        "{body}"
    );
    clock.advance(SENSOR_IDLE_EXPIRY_MS);
    manager.record(USER, "staying-client", 1000.0);
    clock.advance(1);
    assert_eq!(
        manager.expire_idle_sensors(clock.now_ms(), SENSOR_IDLE_EXPIRY_MS),
        1
    );
    let body = scrape();
    assert!(!body.contains("expiring-client"), "{body}");
    assert!(
        has(&body, "kafka_server_quota_byte_rate", "staying-client"),
        "{body}"
    );
}

/// The series are measured at the scrape, as Kafka's `KafkaMetric.metricValue`: once a client
/// stops, its rate and average throttle time fall to 0 when its samples leave the window.
#[test]
fn a_scrape_measures_the_series_as_of_the_scrape() {
    let clock = ManualClock::starting_at(0);
    let manager = manager(QuotaType::Fetch, 11, &clock);
    manager.update_quotas([(QuotaEntity::new(None, Some(None)), Some(100.0))]);
    let series = |client: &str| -> Vec<(String, f64)> {
        let mut body = String::new();
        gregor_metrics::removable::render(&mut body);
        body.lines()
            .filter(|line| line.contains(&format!("clientId=\"{client}\"")))
            .filter_map(|line| {
                let (name, value) = line.rsplit_once(' ')?;
                let name = name.split('{').next()?.to_owned();
                Some((name, value.parse().ok()?))
            })
            .collect()
    };
    // 11 x 1 s windows: 2,000 bytes in the first second, over at least 10 s, is 200 B/s.
    let throttle = manager.record(USER, "scraped", 2000.0);
    assert!(throttle > 0);
    let _guard = manager.throttle(USER, "scraped", throttle);
    clock.advance(1000);
    assert_eq!(
        series("scraped"),
        [
            ("kafka_server_quota_byte_rate".to_owned(), 200.0),
            (
                "kafka_server_quota_throttle_time".to_owned(),
                throttle as f64
            ),
        ]
    );
    // Every sample is older than the 11 windows: nothing is left to measure.
    clock.advance(11_000);
    assert_eq!(
        series("scraped"),
        [
            ("kafka_server_quota_byte_rate".to_owned(), 0.0),
            ("kafka_server_quota_throttle_time".to_owned(), 0.0),
        ]
    );
}

/// A connection's cached sensor sees a quota change on its next request, and no quota at all
/// once the last one goes.
#[test]
fn a_cached_sensor_follows_quota_changes_on_the_next_request() {
    let clock = ManualClock::starting_at(0);
    let manager = manager(QuotaType::Produce, 11, &clock);
    let mut cache = SensorCache::default();
    let now = std::time::Instant::now();
    let entity = QuotaEntity::new(None, Some(Some("unknown")));
    assert_eq!(
        manager.record_cached(&mut cache, USER, "unknown", 1e9, now),
        0
    );
    assert_eq!(manager.sensor_count(), 0, "no quota: nothing recorded");
    manager.update_quotas([(entity.clone(), Some(500.0))]);
    // The worked example through the cache: 2100 ms.
    for _ in 0..10 {
        assert_eq!(
            manager.record_cached(&mut cache, USER, "unknown", 400.0, now),
            0
        );
        clock.advance(1000);
    }
    clock.advance(500);
    assert_eq!(
        manager.record_cached(&mut cache, USER, "unknown", 2300.0, now),
        2100
    );
    // Raising the quota applies to the very next request: 6300 B / 10.5 s = 600 B/s.
    manager.update_quotas([(entity.clone(), Some(600.0))]);
    assert_eq!(
        manager.record_cached(&mut cache, USER, "unknown", 0.0, now),
        0
    );
    manager.update_quotas([(entity, None)]);
    assert_eq!(
        manager.record_cached(&mut cache, USER, "unknown", 1e12, now),
        0
    );
}

/// The cache is keyed by the request's principal and client id: a client changing its client
/// id (or re-authenticating) records in the other sensor.
#[test]
fn a_cached_sensor_follows_the_client_id_and_principal() {
    let clock = ManualClock::starting_at(0);
    let manager = manager(QuotaType::Produce, 11, &clock);
    // <default> user with <default> client id: one sensor per (user, client id).
    manager.update_quotas([(QuotaEntity::new(Some(None), Some(None)), Some(100.0))]);
    let mut cache = SensorCache::default();
    let now = std::time::Instant::now();
    // 1000 B in a 10 s span is the limit exactly; one more byte is over.
    assert_eq!(manager.record_cached(&mut cache, USER, "a", 1000.0, now), 0);
    assert_eq!(manager.record_cached(&mut cache, USER, "b", 1000.0, now), 0);
    assert_eq!(manager.sensor_count(), 2);
    assert_eq!(
        manager.record_cached(&mut cache, "alice", "b", 1000.0, now),
        0
    );
    assert_eq!(manager.sensor_count(), 3);
    assert_eq!(manager.record_cached(&mut cache, USER, "a", 1.0, now), 10);
}

/// A sensor that expires while a connection's cache holds it leaves the scrape at once, and
/// the connection's next request records in a new sensor.
#[test]
fn an_expired_cached_sensor_leaves_the_scrape_and_is_resolved_again() {
    let scrape = || {
        let mut body = String::new();
        gregor_metrics::removable::render(&mut body);
        body
    };
    let clock = ManualClock::starting_at(0);
    let manager = manager(QuotaType::Fetch, 11, &clock);
    manager.update_quotas([(QuotaEntity::new(None, Some(None)), Some(1e9))]);
    let mut cache = SensorCache::default();
    let now = std::time::Instant::now();
    manager.record_cached(&mut cache, USER, "cached-expiring-client", 1.0, now);
    assert!(scrape().contains("cached-expiring-client"));
    clock.advance(SENSOR_IDLE_EXPIRY_MS + 1);
    assert_eq!(
        manager.expire_idle_sensors(clock.now_ms(), SENSOR_IDLE_EXPIRY_MS),
        1
    );
    let body = scrape();
    assert!(!body.contains("cached-expiring-client"), "{body}");
    manager.record_cached(&mut cache, USER, "cached-expiring-client", 1.0, now);
    assert_eq!(manager.sensor_count(), 1);
    assert!(scrape().contains("cached-expiring-client"));
}

/// A callback that counts how often it is asked for tags and whether a reset is required.
#[derive(Default)]
struct CountingCallback {
    tags_calls: std::sync::atomic::AtomicU64,
    reset_calls: std::sync::atomic::AtomicU64,
    /// The group every principal is put in.
    group: std::sync::Mutex<String>,
}

impl gregor_publishers::quota_callback::ClientQuotaCallbackHandler for CountingCallback {
    fn name(&self) -> &str {
        "counting"
    }

    fn configure(
        &mut self,
        _: &gregor_publishers::quota_callback::CallbackConfigs,
    ) -> Result<(), gregor_publishers::quota_callback::CallbackError> {
        Ok(())
    }

    fn quota_metric_tags(
        &self,
        _: gregor_publishers::quota_callback::ClientQuotaType,
        _: &gregor_publishers::quota_callback::KafkaPrincipal,
        _: &str,
    ) -> gregor_publishers::quota_callback::QuotaMetricTags {
        use std::sync::atomic::Ordering;
        self.tags_calls.fetch_add(1, Ordering::SeqCst);
        let group = self.group.lock().unwrap().clone();
        gregor_publishers::quota_callback::QuotaMetricTags::from_pairs([("group", group.as_str())])
    }

    fn quota_limit(
        &self,
        _: gregor_publishers::quota_callback::ClientQuotaType,
        _: &gregor_publishers::quota_callback::QuotaMetricTags,
    ) -> Option<f64> {
        Some(100.0)
    }

    fn update_quota(
        &self,
        _: gregor_publishers::quota_callback::ClientQuotaType,
        _: &gregor_publishers::quota_callback::ClientQuotaEntity,
        _: f64,
    ) {
    }

    fn remove_quota(
        &self,
        _: gregor_publishers::quota_callback::ClientQuotaType,
        _: &gregor_publishers::quota_callback::ClientQuotaEntity,
    ) {
    }

    fn quota_reset_required(&self, _: gregor_publishers::quota_callback::ClientQuotaType) -> bool {
        self.reset_calls
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        false
    }

    fn update_cluster_metadata(
        &self,
        _: &dyn gregor_publishers::quota_callback::ClusterMetadata,
    ) -> bool {
        false
    }
}

/// With a callback, a connection asks for its tags once and again after the publisher told the
/// callback something; `quota_reset_required` is asked on every request, as in Kafka.
#[test]
fn a_cached_callback_sensor_asks_for_tags_again_only_after_a_change() {
    use std::sync::atomic::Ordering;
    let clock = ManualClock::starting_at(0);
    let manager = manager(QuotaType::Produce, 11, &clock);
    let callback = Arc::new(CountingCallback {
        group: std::sync::Mutex::new("first".to_owned()),
        ..CountingCallback::default()
    });
    manager
        .install_callback(callback.clone())
        .map_err(|_| "installed twice")
        .unwrap();
    let mut cache = SensorCache::default();
    let now = std::time::Instant::now();
    for _ in 0..5 {
        manager.record_cached(&mut cache, USER, CLIENT, 100.0, now);
    }
    assert_eq!(callback.tags_calls.load(Ordering::SeqCst), 1);
    assert_eq!(callback.reset_calls.load(Ordering::SeqCst), 5);
    // The callback's state changes (as an update would change it) and the publisher, having
    // told it something, invalidates the tags.
    *callback.group.lock().unwrap() = "second".to_owned();
    manager.invalidate_tags();
    // 500 B more on the sensor of group "first" would be over; the new group's sensor is fresh.
    assert_eq!(
        manager.record_cached(&mut cache, USER, CLIENT, 500.0, now),
        0
    );
    assert_eq!(callback.tags_calls.load(Ordering::SeqCst), 2);
    assert_eq!(manager.sensor_count(), 2);
}

fn quota_record(entity: &[(&str, Option<&str>)], key: &str, value: Option<f64>) -> MetadataRecord {
    MetadataRecord::ClientQuota(ClientQuotaRecord {
        entity: entity
            .iter()
            .map(|(t, n)| EntityData {
                entity_type: (*t).to_owned(),
                entity_name: n.map(str::to_owned),
            })
            .collect(),
        key: key.to_owned(),
        value: value.unwrap_or(0.0),
        remove: value.is_none(),
    })
}

/// Records → image delta → publisher → actor → the shared table requests read.
#[actix_rt::test]
async fn publisher_feeds_the_actors() {
    let clock: Arc<dyn Clock> = Arc::new(ManualClock::starting_at(0));
    let managers = QuotaManagers::start(WindowConfig::DEFAULT, WindowConfig::new(10, 1), clock);
    let mut publisher = ClientQuotaPublisher::new(managers.clone());
    let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
    for record in [
        quota_record(
            &[("user", Some("a b"))],
            "controller_mutation_rate",
            Some(2.0),
        ),
        quota_record(&[("client-id", None)], "producer_byte_rate", Some(1024.0)),
        quota_record(
            &[("user", None), ("client-id", Some("c"))],
            "request_percentage",
            Some(50.0),
        ),
        quota_record(
            &[("ip", Some("10.0.0.1"))],
            "connection_creation_rate",
            Some(5.0),
        ),
        quota_record(&[("user", Some("x"))], "consumer_byte_rate", Some(7.0)),
    ] {
        delta.replay(&record).unwrap();
    }
    let image = Arc::new(delta.apply(Provenance::default()));
    let manifest = LoaderManifest::LogDelta {
        provenance: Provenance::default(),
        num_batches: 1,
        num_records: 5,
        elapsed_ns: 0,
    };
    publisher
        .on_metadata_update(&delta, &image, &manifest)
        .unwrap();
    // A message behind the updates in each mailbox: once answered, the updates are applied.
    for quota_type in QuotaType::ALL {
        managers
            .get(quota_type)
            .actor
            .send(ExpireIdleSensors { idle_ms: u64::MAX })
            .await
            .unwrap();
    }
    assert_eq!(
        managers.controller_mutation.shared.quota_for("a b", ""),
        2.0
    );
    assert_eq!(managers.produce.shared.quota_for("anyone", "any"), 1024.0);
    assert_eq!(managers.request.shared.quota_for("anyone", "c"), 50.0);
    assert_eq!(managers.fetch.shared.quota_for("x", "c"), 7.0);
    assert_eq!(managers.fetch.shared.quota_for("y", "c"), UNLIMITED);

    // Removing the key through a second delta.
    let mut delta = MetadataDelta::new(Arc::clone(&image));
    delta
        .replay(&quota_record(
            &[("user", Some("a b"))],
            "controller_mutation_rate",
            None,
        ))
        .unwrap();
    let image2 = Arc::new(delta.apply(Provenance::default()));
    publisher
        .on_metadata_update(&delta, &image2, &manifest)
        .unwrap();
    managers
        .controller_mutation
        .actor
        .send(ExpireIdleSensors { idle_ms: u64::MAX })
        .await
        .unwrap();
    assert_eq!(
        managers.controller_mutation.shared.quota_for("a b", ""),
        UNLIMITED
    );

    // A snapshot replaces everything.
    let snapshot = MetadataDelta::from_empty_with(&image2);
    let manifest = LoaderManifest::Snapshot {
        provenance: Provenance::default(),
        num_records: 4,
        elapsed_ns: 0,
    };
    managers
        .produce
        .shared
        .update_quotas([(QuotaEntity::new(None, Some(Some("stale"))), Some(1.0))]);
    publisher
        .on_metadata_update(&snapshot, &image2, &manifest)
        .unwrap();
    managers
        .produce
        .actor
        .send(ExpireIdleSensors { idle_ms: u64::MAX })
        .await
        .unwrap();
    assert_eq!(managers.produce.shared.quota_for("anyone", "stale"), 1024.0);
}

/// The records of one AlterClientQuotas naming n distinct client ids, applied as a node applies
/// them: into a quota manager's table and through the default quota callback. Each quota costs
/// O(1) (a kind's count kept, not every entity scanned), so n = 300,000 finishes.
#[test]
fn many_distinct_quotas_apply_in_linear_time() {
    use gregor_publishers::quota_callback::{
        ClientQuotaCallbackHandler, ClientQuotaType, DefaultQuotaCallback, KafkaPrincipal,
    };

    use super::publisher::quota_entity;
    use crate::controller::logic::large_requests::{finishes, LARGE};

    finishes("ClientQuota records applied", 3 * LARGE, |n| {
        let clients: Vec<String> = (0..n).map(|i| format!("client-{i}")).collect();
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        for client in &clients {
            delta
                .replay(&quota_record(
                    &[("client-id", Some(client))],
                    "producer_byte_rate",
                    Some(1024.0),
                ))
                .unwrap();
        }
        let image = Arc::new(delta.apply(Provenance::default()));
        let changes: Vec<_> = delta
            .client_quotas_delta()
            .unwrap()
            .changed_entities()
            .flat_map(|(parts, keys)| {
                let entity = quota_entity(parts).unwrap();
                keys.map(move |(_, value)| (entity.clone(), value))
            })
            .collect();
        assert_eq!(changes.len(), n);
        let clock = ManualClock::starting_at(0);
        let produce = manager(QuotaType::Produce, 10, &clock);
        produce.update_quotas(changes);
        assert_eq!(produce.quota_for("anyone", &clients[n - 1]), 1024.0);

        let callback = Arc::new(DefaultQuotaCallback::new());
        let managers = [
            Arc::clone(&produce),
            manager(QuotaType::Fetch, 10, &clock),
            manager(QuotaType::Request, 10, &clock),
            manager(QuotaType::ControllerMutation, 10, &clock),
        ];
        let mut publisher =
            QuotaCallbackPublisher::with_managers(callback.clone(), managers, "cluster", 1);
        let manifest = LoaderManifest::LogDelta {
            provenance: Provenance::default(),
            num_batches: 1,
            num_records: n,
            elapsed_ns: 0,
        };
        publisher
            .on_metadata_update(&delta, &image, &manifest)
            .unwrap();
        let principal = KafkaPrincipal::user("anyone");
        let tags = callback.quota_metric_tags(ClientQuotaType::Produce, &principal, &clients[0]);
        assert_eq!(
            callback.quota_limit(ClientQuotaType::Produce, &tags),
            Some(1024.0)
        );
    });
}

/// A fetch reads at most limit × (samples − 1) × window (Kafka's `getMaxValueInQuotaWindow`),
/// and a throttled fetch's bytes are taken back (`unrecordQuotaSensor`): a client that waits as
/// told is throttled the same each time, not longer and longer.
#[test]
fn a_fetch_reads_within_its_quota_window_and_throttled_bytes_are_taken_back() {
    let clock = ManualClock::starting_at(0);
    let manager = manager(QuotaType::Fetch, 11, &clock);
    let mut cache = SensorCache::default();
    let now = std::time::Instant::now();
    assert_eq!(
        manager.max_value_in_quota_window_cached(&mut cache, USER, CLIENT),
        None
    );
    manager.update_quotas([(QuotaEntity::new(None, Some(Some(CLIENT))), Some(100.0))]);
    assert_eq!(
        manager.max_value_in_quota_window_cached(&mut cache, USER, CLIENT),
        Some(1000.0)
    );
    // The whole window's worth passes; as much again is twice the rate: 10 s of throttle.
    assert_eq!(
        manager.record_cached(&mut cache, USER, CLIENT, 1000.0, now),
        0
    );
    for _ in 0..3 {
        assert_eq!(
            manager.record_cached(&mut cache, USER, CLIENT, 1000.0, now),
            10_000
        );
        manager.unrecord_cached(&mut cache, USER, CLIENT, 1000.0, now);
    }
    assert_eq!(manager.record_cached(&mut cache, USER, CLIENT, 0.0, now), 0);
}
