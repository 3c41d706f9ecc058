//! The per-request quota path (sensor lookup + record) with 10,000 tracked entities.
//!
//! `cargo bench -p gregor-actors --bench quota_path`

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use gregor_actors::quota::{QuotaEntity, QuotaManager, QuotaType, SystemClock, WindowConfig};

const ENTITIES: usize = 10_000;

fn populated(quota_type: QuotaType) -> Arc<QuotaManager> {
    let manager = Arc::new(QuotaManager::new(
        quota_type,
        WindowConfig::DEFAULT,
        Arc::new(SystemClock::new()),
    ));
    // One user quota per entity, so every request resolves to its own sensor.
    manager.update_quotas((0..ENTITIES).map(|i| {
        let user = format!("user-{i}");
        (
            QuotaEntity::new(Some(Some(user.as_str())), None),
            Some(1e12),
        )
    }));
    for i in 0..ENTITIES {
        manager.record(&format!("user-{i}"), "client", 1.0);
    }
    manager
}

fn bench(c: &mut Criterion) {
    let users: Vec<String> = (0..ENTITIES).map(|i| format!("user-{i}")).collect();
    let produce = populated(QuotaType::Produce);
    assert_eq!(produce.sensor_count(), ENTITIES);
    let mut i = 0;
    c.bench_function("produce record, 10k sensors", |b| {
        b.iter(|| {
            i = (i + 1) % ENTITIES;
            produce.record(&users[i], "client", 512.0)
        })
    });
    let mutation = populated(QuotaType::ControllerMutation);
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
}

criterion_group!(benches, bench);
criterion_main!(benches);
