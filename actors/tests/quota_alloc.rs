//! The steady-state quota path of a connection allocates nothing (counting global allocator),
//! with and without a quota callback. One test in this binary, so no other test allocates
//! while it counts.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::alloc::System;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gregor_actors::quota::{
    QuotaEntity, QuotaManager, QuotaType, SensorCache, SystemClock, WindowConfig,
};
use gregor_publishers::quota_callback::{
    ClientQuotaCallbackHandler, ClientQuotaEntity, ClientQuotaType, ConfigEntity,
    DefaultQuotaCallback,
};
use stats_alloc::{Region, StatsAlloc, INSTRUMENTED_SYSTEM};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const CONNECTIONS: usize = 100;

fn user(i: usize) -> String {
    format!("user-{i}")
}

/// A manager with one user quota per connection, either in its own table or in a callback.
fn manager(quota_type: QuotaType, with_callback: bool) -> QuotaManager {
    let manager = QuotaManager::new(
        quota_type,
        WindowConfig::DEFAULT,
        Arc::new(SystemClock::new()),
    );
    if with_callback {
        let callback = DefaultQuotaCallback::new();
        let callback_type = match quota_type {
            QuotaType::Produce => ClientQuotaType::Produce,
            QuotaType::Fetch => ClientQuotaType::Fetch,
            QuotaType::Request => ClientQuotaType::Request,
            QuotaType::ControllerMutation => ClientQuotaType::ControllerMutation,
        };
        for i in 0..CONNECTIONS {
            let entity = ClientQuotaEntity::new(Some(ConfigEntity::user(user(i))), None).unwrap();
            callback.update_quota(callback_type, &entity, 1e12);
        }
        manager
            .install_callback(Arc::new(callback))
            .map_err(|_| "installed twice")
            .unwrap();
    } else {
        manager.update_quotas((0..CONNECTIONS).map(|i| {
            let user = user(i);
            (
                QuotaEntity::new(Some(Some(user.as_str())), None),
                Some(1e12),
            )
        }));
    }
    manager
}

#[test]
fn the_cached_quota_path_allocates_nothing() {
    let users: Vec<String> = (0..CONNECTIONS).map(user).collect();
    let start = Instant::now();
    for quota_type in [QuotaType::Produce, QuotaType::Fetch, QuotaType::Request] {
        for with_callback in [false, true] {
            let manager = manager(quota_type, with_callback);
            let mut caches: Vec<SensorCache> =
                (0..CONNECTIONS).map(|_| SensorCache::default()).collect();
            // The first request of each connection resolves its sensor and may allocate;
            // its windows fill over the first 11 s of time.
            for round in 0..12u64 {
                let at = start + Duration::from_secs(round);
                for (cache, user) in caches.iter_mut().zip(&users) {
                    manager.record_cached(cache, user, "client", 512.0, at);
                }
            }
            let region = Region::new(GLOBAL);
            for round in 0..1000u64 {
                let at = start + Duration::from_secs(12) + Duration::from_millis(round * 7);
                for (cache, user) in caches.iter_mut().zip(&users) {
                    manager.record_cached(cache, user, "client", 512.0, at);
                }
            }
            let change = region.change();
            assert_eq!(
                (change.allocations, change.reallocations),
                (0, 0),
                "{quota_type:?} (callback: {with_callback}): {change:?}"
            );
        }
    }
}
