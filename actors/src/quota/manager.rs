//! The shared state of one quota type and the per-request path over it.
//!
//! ```text
//!  connection / controller ── record(user, client, value) ──▶ QuotaManager (shared, Arc)
//!        (never waits on a mailbox)                              │ ArcSwap<QuotaTable>  ◀── the actor stores
//!                                                               │ DashMap<tags, Sensor> ◀── the actor expires
//! ```
//!
//! A request loads the table (one atomic load), picks its sensor's tags, finds or creates the
//! sensor in a sharded map, and records under that sensor's own mutex (held for a few
//! arithmetic operations; two requests contend only when they share a (user, client-id)).
//! The table is replaced only by the quota type's actor ([`super::actor`]), which also drops
//! sensors idle for an hour.
//!
//! A connection keeps the sensor it resolved in a [`SensorCache`]: its principal and client id
//! rarely change, so the steady state skips the table, the tags and the map and costs one
//! atomic load of the resolution generation, which every change that could pick another
//! sensor or limit bumps (a quota, the callback's state, an expired sensor).

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Instant;

use arc_swap::ArcSwap;
use dashmap::DashMap;
use gregor_metrics::names;
use gregor_metrics::removable::SeriesValue;
use gregor_metrics::QuotaSensorMetrics;
use gregor_publishers::quota_callback::{
    ClientQuotaCallbackHandler, ClientQuotaType, KafkaPrincipal, QuotaMetricTags,
};
use smallvec::SmallVec;

use super::callback::guarded;
use super::clock::Clock;
use super::entity::{sanitize, MetricTags, QuotaEntity, QuotaTable};
use super::sampler::{RateQuota, SampledAvg, SampledStat, WindowConfig};
use super::token_bucket::{
    permissive_charge, strict_charge, BucketQuota, StrictOutcome, ThrottleMemo, TokenBucket,
};
use super::QuotaType;
use crate::controller::logic::{MutationQuota, QuotaExceeded};

/// Sensors unused for longer than this are dropped (Kafka's 3600 s inactive-sensor expiry).
pub const SENSOR_IDLE_EXPIRY_MS: u64 = 3_600_000;

/// Kafka reports an unlimited quota as `Long.MAX_VALUE`.
pub const UNLIMITED: f64 = i64::MAX as f64;

/// The quota table with a generation number, so sensors notice a change cheaply.
#[derive(Debug, Default)]
struct Table {
    quotas: QuotaTable,
    generation: u64,
}

enum Measure {
    Rate(RateQuota),
    Bucket {
        bucket: BucketQuota,
        mutation_rate: SampledStat,
    },
}

struct SensorState {
    /// Table generation `limit` was computed for.
    generation: u64,
    limit: Option<f64>,
    measure: Measure,
    throttle_time: SampledAvg,
    /// The exported series; dropped when the sensor expires, even if a connection's cache
    /// still holds the sensor.
    metrics: Option<QuotaSensorMetrics>,
}

/// Which sensor a request is recorded in: the built-in (user, client-id) tags, or the tags a
/// configured quota callback chose (`client.quota.callback.class`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SensorTags {
    /// Kafka's built-in tags.
    BuiltIn(MetricTags),
    /// A callback's own tags.
    Callback(QuotaMetricTags),
}

/// The sensor of one (user, client-id) tag pair: the quota-bearing statistic and the average
/// throttle time, with their exported series.
pub struct Sensor {
    tags: SensorTags,
    state: Mutex<SensorState>,
    last_used_ms: AtomicU64,
    /// The manager's window and clock, to measure the exported series at each scrape.
    window: WindowConfig,
    clock: Arc<dyn Clock>,
}

impl SeriesValue for Sensor {
    /// Measured as of the scrape, as Kafka's `KafkaMetric.metricValue` measures its stats: the
    /// samples older than the window are dropped first, so an idle client's rate falls to 0.
    fn series_value(&self, series: &'static str) -> f64 {
        let now = self.clock.now_ms();
        let window = &self.window;
        let mut state = self.lock();
        let SensorState {
            measure,
            throttle_time,
            ..
        } = &mut *state;
        match (series, measure) {
            (names::QUOTA_THROTTLE_TIME, _) => throttle_time.value(window, now),
            (names::QUOTA_MUTATION_RATE, Measure::Bucket { mutation_rate, .. }) => {
                mutation_rate.rate(window, now)
            }
            (names::QUOTA_MUTATION_RATE, Measure::Rate(_)) => 0.0,
            (_, Measure::Rate(rate)) => rate.rate(window, now),
            (_, Measure::Bucket { bucket, .. }) => bucket.tokens(window, now),
        }
    }
}

impl Sensor {
    /// The sensor's tags.
    pub fn tags(&self) -> &SensorTags {
        &self.tags
    }

    fn lock(&self) -> MutexGuard<'_, SensorState> {
        // A panic while holding the lock leaves plain numbers behind; keep using them.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// One quota type's configuration and sensors, shared by every connection.
pub struct QuotaManager {
    quota_type: QuotaType,
    window: WindowConfig,
    clock: Arc<dyn Clock>,
    table: ArcSwap<Table>,
    sensors: DashMap<SensorTags, Arc<Sensor>>,
    throttled: AtomicI64,
    /// The quota callback deciding tags and limits, when one is configured; set once at
    /// start-up, before any request.
    callback: OnceLock<Arc<dyn ClientQuotaCallbackHandler>>,
    /// Bumped whenever the callback's limits may have changed; added to the table generation so
    /// sensors re-read their limit on next use.
    callback_generation: AtomicU64,
    /// Bumped after anything that may resolve a request to another sensor or limit; a
    /// [`SensorCache`] filled at another value resolves again.
    resolution: AtomicU64,
    queue_size: metrics::Gauge,
}

impl std::fmt::Debug for QuotaManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuotaManager")
            .field("quota_type", &self.quota_type)
            .field("window", &self.window)
            .field("sensors", &self.sensors.len())
            .finish_non_exhaustive()
    }
}

impl QuotaManager {
    /// A manager with no quota configured.
    pub fn new(quota_type: QuotaType, window: WindowConfig, clock: Arc<dyn Clock>) -> Self {
        QuotaManager {
            quota_type,
            window,
            clock,
            table: ArcSwap::from_pointee(Table::default()),
            sensors: DashMap::new(),
            throttled: AtomicI64::new(0),
            callback: OnceLock::new(),
            callback_generation: AtomicU64::new(0),
            resolution: AtomicU64::new(0),
            queue_size: gregor_metrics::quota_queue_size(quota_type.resource()),
        }
    }

    /// The quota type.
    pub fn quota_type(&self) -> QuotaType {
        self.quota_type
    }

    /// The sampling windows.
    pub fn window(&self) -> WindowConfig {
        self.window
    }

    /// Milliseconds on this manager's clock.
    pub fn now_ms(&self) -> u64 {
        self.clock.now_ms()
    }

    /// Whether any quota of this type is configured (Kafka records nothing otherwise); always
    /// with a quota callback, which may limit anyone.
    pub fn quotas_enabled(&self) -> bool {
        self.callback.get().is_some() || !self.table.load().quotas.is_empty()
    }

    /// Hands tags and limits to `callback` from now on. Once per manager, at start-up; a second
    /// call is refused (the callback in place stays).
    pub fn install_callback(
        &self,
        callback: Arc<dyn ClientQuotaCallbackHandler>,
    ) -> Result<(), Arc<dyn ClientQuotaCallbackHandler>> {
        self.callback.set(callback)
    }

    /// Makes every live sensor re-read its limit on next use (the callback's limits may have
    /// changed: Kafka's `updateQuotaMetricConfigs`).
    pub fn invalidate_limits(&self) {
        self.callback_generation.fetch_add(1, Ordering::AcqRel);
        self.invalidate_tags();
    }

    /// Makes every connection resolve its sensor again on its next request: the callback was
    /// told something that may change the tags it hands out, even if no limit changed.
    pub fn invalidate_tags(&self) {
        self.resolution.fetch_add(1, Ordering::AcqRel);
    }

    /// Kafka asks `quotaResetRequired` on every request; a `true` re-reads every limit.
    fn check_reset(&self, callback: &Arc<dyn ClientQuotaCallbackHandler>) {
        let quota_type = self.callback_type();
        if guarded(&**callback, "quota_reset_required", || {
            callback.quota_reset_required(quota_type)
        })
        .unwrap_or(false)
        {
            self.invalidate_limits();
        }
    }

    fn callback_type(&self) -> ClientQuotaType {
        match self.quota_type {
            QuotaType::Produce => ClientQuotaType::Produce,
            QuotaType::Fetch => ClientQuotaType::Fetch,
            QuotaType::Request => ClientQuotaType::Request,
            QuotaType::ControllerMutation => ClientQuotaType::ControllerMutation,
        }
    }

    /// The generation sensors compare their limit against.
    fn generation(&self, table: &Table) -> u64 {
        table
            .generation
            .wrapping_add(self.callback_generation.load(Ordering::Acquire))
    }

    /// The tags of a request; `None` when no quota of this type can apply.
    fn tags_for(&self, table: &Table, principal_name: &str, client_id: &str) -> Option<SensorTags> {
        let Some(callback) = self.callback.get() else {
            if table.quotas.is_empty() {
                return None;
            }
            return Some(SensorTags::BuiltIn(
                table
                    .quotas
                    .metric_tags(&sanitize(principal_name), client_id),
            ));
        };
        let quota_type = self.callback_type();
        let principal = KafkaPrincipal::user(principal_name);
        let tags = guarded(&**callback, "quota_metric_tags", || {
            callback.quota_metric_tags(quota_type, &principal, client_id)
        })
        // A failing plug-in puts its requests in the shared unlimited sensor.
        .unwrap_or_default();
        Some(SensorTags::Callback(tags))
    }

    /// The limit of a sensor: `None` = unlimited; the outer `None` = the callback failed (keep
    /// the limit the sensor had).
    fn limit_of(&self, tags: &SensorTags, table: &Table) -> Option<Option<f64>> {
        match (tags, self.callback.get()) {
            (SensorTags::Callback(tags), Some(callback)) => {
                let quota_type = self.callback_type();
                guarded(&**callback, "quota_limit", || {
                    callback.quota_limit(quota_type, tags)
                })
            }
            (SensorTags::BuiltIn(tags), _) => Some(table.quotas.quota_limit(tags)),
            (SensorTags::Callback(_), None) => Some(None),
        }
    }

    /// Applies quota changes (`None` removes). Only the owning actor calls this in a node;
    /// tests and benchmarks call it directly.
    pub fn update_quotas(&self, changes: impl IntoIterator<Item = (QuotaEntity, Option<f64>)>) {
        let current = self.table.load();
        let mut quotas = current.quotas.clone();
        for (entity, value) in changes {
            quotas.update(entity, value);
        }
        self.table.store(Arc::new(Table {
            quotas,
            generation: current.generation + 1,
        }));
        self.invalidate_tags();
    }

    /// Replaces every quota of this type (a snapshot was loaded).
    pub fn replace_quotas(&self, quotas: impl IntoIterator<Item = (QuotaEntity, f64)>) {
        let current = self.table.load();
        let mut table = QuotaTable::new();
        for (entity, value) in quotas {
            table.update(entity, Some(value));
        }
        self.table.store(Arc::new(Table {
            quotas: table,
            generation: current.generation + 1,
        }));
        self.invalidate_tags();
    }

    /// The limit that applies to `principal_name` with `client_id` ([`UNLIMITED`] if none), as
    /// Kafka's `quota(user, clientId)`.
    pub fn quota_for(&self, principal_name: &str, client_id: &str) -> f64 {
        let table = self.table.load();
        if self.callback.get().is_none() {
            return table
                .quotas
                .limit_for(&sanitize(principal_name), client_id)
                .1
                .unwrap_or(UNLIMITED);
        }
        if let Some(callback) = self.callback.get() {
            self.check_reset(callback);
        }
        self.tags_for(&table, principal_name, client_id)
            .and_then(|tags| self.limit_of(&tags, &table).flatten())
            .unwrap_or(UNLIMITED)
    }

    /// The limit the live sensor of this request currently enforces (after bringing it up to
    /// date), `None` when it has no sensor; for tests and diagnostics.
    pub fn sensor_limit(&self, principal_name: &str, client_id: &str) -> Option<Option<f64>> {
        if let Some(callback) = self.callback.get() {
            self.check_reset(callback);
        }
        let table = self.table.load();
        let tags = self.tags_for(&table, principal_name, client_id)?;
        let sensor = self.sensors.get(&tags)?.value().clone();
        let mut state = sensor.lock();
        self.refresh(&mut state, &sensor.tags, &table);
        Some(state.limit)
    }

    /// Number of live sensors.
    pub fn sensor_count(&self) -> usize {
        self.sensors.len()
    }

    /// Connections currently muted by this manager.
    pub fn queue_size(&self) -> i64 {
        self.throttled.load(Ordering::SeqCst)
    }

    /// Finds or creates the sensor for a request; `None` when no quota of this type exists.
    fn sensor_for(
        &self,
        principal_name: &str,
        client_id: &str,
    ) -> Option<(Arc<Sensor>, Arc<Table>)> {
        if let Some(callback) = self.callback.get() {
            self.check_reset(callback);
        }
        self.resolve(principal_name, client_id)
    }

    /// [`sensor_for`](Self::sensor_for) without asking the callback for a reset.
    fn resolve(&self, principal_name: &str, client_id: &str) -> Option<(Arc<Sensor>, Arc<Table>)> {
        let table = self.table.load_full();
        let tags = self.tags_for(&table, principal_name, client_id)?;
        if let Some(sensor) = self.sensors.get(&tags) {
            return Some((Arc::clone(sensor.value()), table));
        }
        let sensor = self
            .sensors
            .entry(tags.clone())
            .or_insert_with(|| Arc::new_cyclic(|sensor| self.new_sensor(tags, &table, sensor)))
            .value()
            .clone();
        Some((sensor, table))
    }

    /// A new sensor, exporting its measured value from `itself` (the `Arc` it is built in).
    fn new_sensor(&self, tags: SensorTags, table: &Table, itself: &Weak<Sensor>) -> Sensor {
        let measure = match self.quota_type {
            QuotaType::ControllerMutation => Measure::Bucket {
                bucket: BucketQuota {
                    bucket: TokenBucket::new(),
                    rate: None,
                },
                mutation_rate: SampledStat::new(),
            },
            _ => Measure::Rate(RateQuota::new()),
        };
        let value: Weak<dyn SeriesValue> = itself.clone();
        let metrics = match &tags {
            SensorTags::BuiltIn(tags) => gregor_metrics::quota_sensor_metrics(
                self.quota_type.resource(),
                &tags.user,
                &tags.client_id,
                value,
            ),
            SensorTags::Callback(tags) => gregor_metrics::quota_sensor_metrics_tagged(
                self.quota_type.resource(),
                tags.iter(),
                value,
            ),
        };
        let generation = self.generation(table);
        let limit = self.limit_of(&tags, table).flatten();
        Sensor {
            tags,
            state: Mutex::new(SensorState {
                generation,
                limit,
                measure,
                throttle_time: SampledAvg::default(),
                metrics: Some(metrics),
            }),
            last_used_ms: AtomicU64::new(self.clock.now_ms()),
            window: self.window,
            clock: Arc::clone(&self.clock),
        }
    }

    /// Brings a sensor's limit up to date with `table` (Kafka updates metric configs when a
    /// quota changes; here the sensor notices the new generation on its next use).
    fn refresh(&self, state: &mut SensorState, tags: &SensorTags, table: &Table) {
        let generation = self.generation(table);
        if state.generation != generation {
            state.generation = generation;
            if let Some(limit) = self.limit_of(tags, table) {
                state.limit = limit;
            }
        }
        if let Measure::Bucket { bucket, .. } = &mut state.measure {
            bucket.rate = state.limit;
        }
    }

    /// Records `value` for a request of `principal_name` / `client_id` and returns the throttle
    /// time in ms (0 within quota). Byte rates and request time use Kafka's rate formula; the
    /// request quota's throttle is capped at one window. Controller mutations go through
    /// [`QuotaManager::new_quota_for`] instead.
    pub fn record(&self, principal_name: &str, client_id: &str, value: f64) -> u64 {
        let Some((sensor, table)) = self.sensor_for(principal_name, client_id) else {
            return 0;
        };
        self.record_in(&sensor, Some(&table), value, self.clock.now_ms())
    }

    /// [`record`](Self::record) for a connection, through its `cache` (used with this manager
    /// only), at `at` (an instant the connection read anyway). The steady state takes no lock
    /// but the sensor's and allocates nothing.
    pub fn record_cached(
        &self,
        cache: &mut SensorCache,
        principal_name: &str,
        client_id: &str,
        value: f64,
        at: Instant,
    ) -> u64 {
        let now = self.clock.ms_at(at);
        self.with_cached_sensor(cache, principal_name, client_id, |sensor, table| {
            self.record_in(sensor, table, value, now)
        })
        .unwrap_or(0)
    }

    /// Takes `value` back off a byte rate without checking the quota (Kafka's
    /// `unrecordQuotaSensor`): a Fetch answered empty because it was throttled sent none of the
    /// bytes it recorded, and keeping them would throttle a client that waits as told longer
    /// each time, holding it well under its quota.
    pub fn unrecord_cached(
        &self,
        cache: &mut SensorCache,
        principal_name: &str,
        client_id: &str,
        value: f64,
        at: Instant,
    ) {
        let now = self.clock.ms_at(at);
        self.with_cached_sensor(cache, principal_name, client_id, |sensor, _| {
            if let Measure::Rate(rate) = &mut sensor.lock().measure {
                rate.unrecord(&self.window, value, now);
            }
        });
    }

    /// The most one request can record without being throttled for certain (Kafka's
    /// `getMaxValueInQuotaWindow`): the quota over all windows but the current one, `limit ×
    /// (samples − 1) × window`; None when no quota applies. A Fetch reads no more than this,
    /// or a response larger than the quota allows over the whole window would be emptied by
    /// the throttle every time and the consumer would never get a record.
    pub fn max_value_in_quota_window_cached(
        &self,
        cache: &mut SensorCache,
        principal_name: &str,
        client_id: &str,
    ) -> Option<f64> {
        let seconds = f64::from(self.window.samples.saturating_sub(1))
            * (self.window.window_ms as f64 / 1000.0);
        self.with_cached_sensor(cache, principal_name, client_id, |sensor, table| {
            let mut state = sensor.lock();
            if let Some(table) = table {
                self.refresh(&mut state, &sensor.tags, table);
            }
            state.limit.map(|limit| limit * seconds)
        })
        .flatten()
    }

    /// Runs `f` on the sensor of `principal_name` / `client_id` through the connection's
    /// `cache` (None when no quota of this type applies). `f` gets the quota table when the
    /// sensor was resolved again, so that it brings the sensor's limit up to date.
    fn with_cached_sensor<R>(
        &self,
        cache: &mut SensorCache,
        principal_name: &str,
        client_id: &str,
        f: impl FnOnce(&Sensor, Option<&Table>) -> R,
    ) -> Option<R> {
        if let Some(callback) = self.callback.get() {
            self.check_reset(callback);
        }
        // Loaded before resolving: a change after this load makes the next request resolve
        // again, so a request sees a change at the latest on the request after it.
        let generation = self.resolution.load(Ordering::Acquire);
        if let Some(sensor) = cache.hit(generation, principal_name, client_id) {
            return sensor.map(|sensor| f(sensor, None));
        }
        let resolved = self.resolve(principal_name, client_id);
        let out = resolved
            .as_ref()
            .map(|(sensor, table)| f(sensor, Some(table)));
        cache.fill(
            generation,
            principal_name,
            client_id,
            resolved.map(|(sensor, _)| sensor),
        );
        out
    }

    /// Records into `sensor` after bringing its limit up to date with `table` (`None`: nothing
    /// changed since the caller's cache was filled, when it was brought up to date).
    fn record_in(&self, sensor: &Sensor, table: Option<&Table>, value: f64, now: u64) -> u64 {
        sensor.last_used_ms.store(now, Ordering::Relaxed);
        let mut state = sensor.lock();
        if let Some(table) = table {
            self.refresh(&mut state, &sensor.tags, table);
        }
        let SensorState { limit, measure, .. } = &mut *state;
        let bound = limit.unwrap_or(f64::INFINITY);
        let throttle = match measure {
            Measure::Rate(rate) => rate.record(&self.window, bound, value, now),
            Measure::Bucket {
                bucket,
                mutation_rate,
            } => {
                mutation_rate.record(&self.window, value, now);
                bucket
                    .record_and_check(&self.window, value, now)
                    .unwrap_or(0)
            }
        };
        match self.quota_type {
            QuotaType::Request => throttle.min(self.window.window_ms),
            _ => throttle,
        }
    }

    /// The controller-mutation quota of one request (Kafka's `newStrictQuotaFor` /
    /// `newPermissiveQuotaFor`): unbounded while no quota of this type exists.
    pub fn new_quota_for(
        self: &Arc<Self>,
        principal_name: &str,
        client_id: &str,
        strict: bool,
    ) -> ControllerMutationQuota {
        match self.sensor_for(principal_name, client_id) {
            None => ControllerMutationQuota::Unbounded,
            Some((sensor, table)) => {
                let bound = BoundQuota {
                    manager: Arc::clone(self),
                    sensor,
                    table,
                    memo: ThrottleMemo::default(),
                };
                if strict {
                    ControllerMutationQuota::Strict {
                        quota: bound,
                        exceeded: false,
                    }
                } else {
                    ControllerMutationQuota::Permissive(bound)
                }
            }
        }
    }

    /// Records that a connection of `principal_name` / `client_id` is muted for
    /// `throttle_ms` (the `throttle-time` average and the queue size). The returned guard
    /// counts the connection as muted until it is dropped.
    pub fn throttle(
        self: &Arc<Self>,
        principal_name: &str,
        client_id: &str,
        throttle_ms: u64,
    ) -> ThrottleGuard {
        if let Some((sensor, _)) = self.sensor_for(principal_name, client_id) {
            let now = self.clock.now_ms();
            sensor.last_used_ms.store(now, Ordering::Relaxed);
            sensor
                .lock()
                .throttle_time
                .record(&self.window, throttle_ms as f64, now);
        }
        let queued = self.throttled.fetch_add(1, Ordering::SeqCst) + 1;
        self.queue_size.set(queued as f64);
        ThrottleGuard {
            manager: Arc::clone(self),
            ends_at_ms: self.clock.now_ms().saturating_add(throttle_ms),
        }
    }

    /// Drops sensors unused for more than `idle_ms` at `now_ms` (Kafka's `Sensor.hasExpired`),
    /// and with them their metric series; returns how many were dropped.
    pub fn expire_idle_sensors(&self, now_ms: u64, idle_ms: u64) -> usize {
        let before = self.sensors.len();
        self.sensors.retain(|_, sensor| {
            let live =
                now_ms.saturating_sub(sensor.last_used_ms.load(Ordering::Relaxed)) <= idle_ms;
            if !live {
                // A connection's cache may still hold the sensor: its series go now, dropped
                // after the sensor's lock (a scrape reads the sensor under the registry's).
                let series = sensor.lock().metrics.take();
                drop(series);
            }
            live
        });
        let dropped = before.saturating_sub(self.sensors.len());
        if dropped > 0 {
            self.invalidate_tags();
        }
        dropped
    }

    /// The tokens of the sensor for this request (controller mutation) or its measured rate,
    /// `None` when it has no sensor; for tests and diagnostics.
    pub fn measured(&self, principal_name: &str, client_id: &str) -> Option<f64> {
        if let Some(callback) = self.callback.get() {
            self.check_reset(callback);
        }
        let table = self.table.load();
        let tags = self.tags_for(&table, principal_name, client_id)?;
        let sensor = self.sensors.get(&tags)?.value().clone();
        let now = self.clock.now_ms();
        let mut state = sensor.lock();
        self.refresh(&mut state, &sensor.tags, &table);
        Some(match &mut state.measure {
            Measure::Rate(rate) => rate.rate(&self.window, now),
            Measure::Bucket { bucket, .. } => bucket.tokens(&self.window, now),
        })
    }
}

/// One connection's resolved sensor of one quota type, valid while the manager's resolution
/// generation stays what it was and the request has the same principal and client id (a
/// client may change its client id per request, a re-authentication the principal).
#[derive(Default)]
pub struct SensorCache {
    resolved: Option<Resolved>,
}

/// A name a cache entry was filled for, inline up to 24 bytes (client ids and user names
/// usually are): comparing it on every request then reads no other allocation.
type CachedName = SmallVec<[u8; 24]>;

struct Resolved {
    generation: u64,
    principal_name: CachedName,
    client_id: CachedName,
    /// `None`: no quota of this type applies.
    sensor: Option<Arc<Sensor>>,
}

impl std::fmt::Debug for SensorCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SensorCache")
            .field("filled", &self.resolved.is_some())
            .finish_non_exhaustive()
    }
}

impl SensorCache {
    /// The cached answer (`Some(None)`: no quota applies) when it is still valid.
    fn hit(
        &self,
        generation: u64,
        principal_name: &str,
        client_id: &str,
    ) -> Option<Option<&Sensor>> {
        self.resolved
            .as_ref()
            .filter(|r| {
                r.generation == generation
                    && r.principal_name.as_slice() == principal_name.as_bytes()
                    && r.client_id.as_slice() == client_id.as_bytes()
            })
            .map(|r| r.sensor.as_deref())
    }

    fn fill(
        &mut self,
        generation: u64,
        principal_name: &str,
        client_id: &str,
        sensor: Option<Arc<Sensor>>,
    ) {
        // The names keep their buffers: refilling for the same names allocates nothing.
        let resolved = self.resolved.get_or_insert_with(|| Resolved {
            generation,
            principal_name: CachedName::new(),
            client_id: CachedName::new(),
            sensor: None,
        });
        resolved.generation = generation;
        resolved.principal_name.clear();
        resolved
            .principal_name
            .extend_from_slice(principal_name.as_bytes());
        resolved.client_id.clear();
        resolved.client_id.extend_from_slice(client_id.as_bytes());
        resolved.sensor = sensor;
    }
}

/// A [`SensorCache`] reached through a shared reference (handlers get the request's
/// [`RequestInfo`](crate::context::RequestInfo) by reference). A connection serves one request
/// at a time, so its lock is never contended; a clone starts empty.
#[derive(Debug, Default)]
pub struct SharedSensorCache(Mutex<SensorCache>);

impl SharedSensorCache {
    /// The cache, for one record.
    pub fn lock(&self) -> MutexGuard<'_, SensorCache> {
        // A cache left by a panic is at worst stale, and the generation check covers that.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Clone for SharedSensorCache {
    fn clone(&self) -> Self {
        SharedSensorCache::default()
    }
}

/// A muted connection, counted in the manager's queue size until dropped.
#[derive(Debug)]
pub struct ThrottleGuard {
    manager: Arc<QuotaManager>,
    ends_at_ms: u64,
}

impl ThrottleGuard {
    /// How much of the throttle is left at the manager's clock (0 once it is over).
    pub fn remaining_ms(&self) -> u64 {
        self.ends_at_ms.saturating_sub(self.manager.clock.now_ms())
    }
}

impl Drop for ThrottleGuard {
    fn drop(&mut self) {
        let queued = self.manager.throttled.fetch_sub(1, Ordering::SeqCst) - 1;
        self.manager.queue_size.set(queued as f64);
    }
}

/// A sensor bound to one request, with the request's throttle bookkeeping.
pub struct BoundQuota {
    manager: Arc<QuotaManager>,
    sensor: Arc<Sensor>,
    table: Arc<Table>,
    memo: ThrottleMemo,
}

impl BoundQuota {
    /// Runs `f` on the sensor's bucket and mutation rate at the current time.
    fn with_bucket<T>(
        &self,
        f: impl FnOnce(&mut BucketQuota, &mut SampledStat, &WindowConfig, u64) -> T,
    ) -> Option<T> {
        let now = self.manager.clock.now_ms();
        self.sensor.last_used_ms.store(now, Ordering::Relaxed);
        let mut state = self.sensor.lock();
        self.manager
            .refresh(&mut state, &self.sensor.tags, &self.table);
        match &mut state.measure {
            Measure::Bucket {
                bucket,
                mutation_rate,
            } => Some(f(bucket, mutation_rate, &self.manager.window, now)),
            Measure::Rate(_) => None,
        }
    }
}

/// The controller-mutation quota of one request (KIP-599): strict for new request versions,
/// permissive for old ones, unbounded when no quota exists.
pub enum ControllerMutationQuota {
    /// No quota of this type is configured: never exceeded, nothing recorded.
    Unbounded,
    /// Check first, then record; once rejected, the rest of the request is rejected too.
    Strict {
        /// The sensor.
        quota: BoundQuota,
        /// Whether a charge of this request was rejected.
        exceeded: bool,
    },
    /// Record and check; always accepted, a violation only sets the throttle time.
    Permissive(BoundQuota),
}

impl std::fmt::Debug for ControllerMutationQuota {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ControllerMutationQuota::Unbounded => f.write_str("Unbounded"),
            ControllerMutationQuota::Strict { exceeded, .. } => f
                .debug_struct("Strict")
                .field("exceeded", exceeded)
                .finish(),
            ControllerMutationQuota::Permissive(_) => f.write_str("Permissive"),
        }
    }
}

impl ControllerMutationQuota {
    /// Whether a strict charge was rejected (`isExceeded`).
    pub fn is_exceeded(&self) -> bool {
        matches!(self, ControllerMutationQuota::Strict { exceeded: true, .. })
    }

    /// What is left of the last throttle now (it decays: the response may leave later).
    pub fn throttle_time_ms(&self) -> u64 {
        match self {
            ControllerMutationQuota::Unbounded => 0,
            ControllerMutationQuota::Strict { quota, .. }
            | ControllerMutationQuota::Permissive(quota) => {
                quota.memo.remaining(quota.manager.clock.now_ms())
            }
        }
    }

    /// Charges `value` mutations: `Err(throttle ms)` when a strict quota rejects them.
    pub fn record(&mut self, value: f64) -> Result<(), u64> {
        match self {
            ControllerMutationQuota::Unbounded => Ok(()),
            ControllerMutationQuota::Strict { quota, exceeded } => {
                let outcome = quota.with_bucket(|bucket, rate, window, now| {
                    let outcome = strict_charge(bucket, window, value, now);
                    if outcome == StrictOutcome::Accepted {
                        rate.record(window, value, now);
                    }
                    (outcome, now)
                });
                match outcome {
                    Some((StrictOutcome::Rejected { throttle_ms }, now)) => {
                        quota.memo.set(throttle_ms, now);
                        *exceeded = true;
                        Err(throttle_ms)
                    }
                    _ => Ok(()),
                }
            }
            ControllerMutationQuota::Permissive(quota) => {
                let throttle = quota.with_bucket(|bucket, rate, window, now| {
                    rate.record(window, value, now);
                    (permissive_charge(bucket, window, value, now), now)
                });
                if let Some((Some(throttle_ms), now)) = throttle {
                    quota.memo.set(throttle_ms, now);
                }
                Ok(())
            }
        }
    }
}

impl MutationQuota for ControllerMutationQuota {
    fn charge(&mut self, partitions: u32) -> Result<(), QuotaExceeded> {
        self.record(f64::from(partitions))
            .map_err(|throttle_ms| QuotaExceeded {
                throttle_time_ms: i32::try_from(throttle_ms).unwrap_or(i32::MAX),
            })
    }
}
