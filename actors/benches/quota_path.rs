//! The per-request quota path (sensor lookup + record) with 10,000 tracked entities: the shared
//! path (table, tags, map) and a connection's cached sensor, with and without a callback.
//!
//! `cargo bench -p gregor-actors --bench quota_path`

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use gregor_actors::quota::{
    QuotaEntity, QuotaManager, QuotaType, SensorCache, SystemClock, WindowConfig,
};
use gregor_publishers::quota_callback::{
    ClientQuotaCallbackHandler, ClientQuotaEntity, ClientQuotaType, ConfigEntity,
    DefaultQuotaCallback,
};

const ENTITIES: usize = 10_000;

fn users() -> Vec<String> {
    (0..ENTITIES).map(|i| format!("user-{i}")).collect()
}

/// One user quota per entity, so every request resolves to its own sensor; with
/// `with_callback` the quotas live in the `default` callback instead of the manager's table.
fn populated(quota_type: QuotaType, with_callback: bool) -> Arc<QuotaManager> {
    let manager = Arc::new(QuotaManager::new(
        quota_type,
        WindowConfig::DEFAULT,
        Arc::new(SystemClock::new()),
    ));
    if with_callback {
        let callback = DefaultQuotaCallback::new();
        let callback_type = match quota_type {
            QuotaType::Produce => ClientQuotaType::Produce,
            QuotaType::Fetch => ClientQuotaType::Fetch,
            QuotaType::Request => ClientQuotaType::Request,
            QuotaType::ControllerMutation => ClientQuotaType::ControllerMutation,
        };
        for user in users() {
            if let Some(entity) = ClientQuotaEntity::new(Some(ConfigEntity::user(user)), None) {
                callback.update_quota(callback_type, &entity, 1e12);
            }
        }
        if manager.install_callback(Arc::new(callback)).is_err() {
            panic!("a fresh manager has no callback");
        }
    } else {
        manager.update_quotas(users().iter().map(|user| {
            (
                QuotaEntity::new(Some(Some(user.as_str())), None),
                Some(1e12),
            )
        }));
    }
    for user in users() {
        manager.record(&user, "client", 1.0);
    }
    manager
}

/// `record_cached` over 10,000 connections in turn, time advancing 1 us per request.
fn bench_cached(c: &mut Criterion, name: &str, manager: &QuotaManager, value: f64) {
    let users = users();
    let mut caches: Vec<SensorCache> = (0..ENTITIES).map(|_| SensorCache::default()).collect();
    let start = Instant::now();
    for (cache, user) in caches.iter_mut().zip(&users) {
        manager.record_cached(cache, user, "client", value, start);
    }
    let mut i = 0;
    let mut tick = 0u64;
    c.bench_function(name, |b| {
        b.iter(|| {
            i = (i + 1) % ENTITIES;
            tick += 1;
            let at = start + Duration::from_micros(tick);
            manager.record_cached(&mut caches[i], &users[i], "client", value, at)
        })
    });
}

fn bench(c: &mut Criterion) {
    let users = users();
    let produce = populated(QuotaType::Produce, false);
    assert_eq!(produce.sensor_count(), ENTITIES);
    let mut i = 0;
    c.bench_function("produce record, 10k sensors, shared path", |b| {
        b.iter(|| {
            i = (i + 1) % ENTITIES;
            produce.record(&users[i], "client", 512.0)
        })
    });
    bench_cached(
        c,
        "produce record, 10k connections, cached",
        &produce,
        512.0,
    );
    let produce_callback = populated(QuotaType::Produce, true);
    bench_cached(
        c,
        "produce record, 10k connections, cached, default callback",
        &produce_callback,
        512.0,
    );
    // One connection over and over: its sensor stays in the CPU cache, which the 10k rows
    // above miss on every request.
    let mut hot = SensorCache::default();
    let start = Instant::now();
    let mut tick = 0u64;
    c.bench_function("produce record, one connection, cached", |b| {
        b.iter(|| {
            tick += 1;
            let at = start + Duration::from_micros(tick);
            produce.record_cached(&mut hot, &users[0], "client", 512.0, at)
        })
    });
    let request = populated(QuotaType::Request, false);
    bench_cached(c, "request record, 10k connections, cached", &request, 0.01);
    let request_callback = populated(QuotaType::Request, true);
    bench_cached(
        c,
        "request record, 10k connections, cached, default callback",
        &request_callback,
        0.01,
    );
    let mutation = populated(QuotaType::ControllerMutation, false);
    let mut j = 0;
    c.bench_function("controller mutation charge, 10k sensors", |b| {
        b.iter(|| {
            j = (j + 1) % ENTITIES;
            let mut quota = mutation.new_quota_for(&users[j], "client", true);
            let _ = quota.record(1.0);
            quota.throttle_time_ms()
        })
    });
    let empty = Arc::new(QuotaManager::new(
        QuotaType::Request,
        WindowConfig::DEFAULT,
        Arc::new(SystemClock::new()),
    ));
    c.bench_function("request record, no quota configured", |b| {
        b.iter(|| empty.record("ANONYMOUS", "client", 0.01))
    });
    let mut cache = SensorCache::default();
    let now = Instant::now();
    c.bench_function("request record, no quota configured, cached", |b| {
        b.iter(|| empty.record_cached(&mut cache, "ANONYMOUS", "client", 0.01, now))
    });
    // What the connection already pays per request for its timings; the cached path reuses
    // that instant instead of reading the clock again.
    c.bench_function("Instant::now (the floor of any clock read)", |b| {
        b.iter(|| black_box(Instant::now()))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
