//! Kafka's connection limits (`ConnectionQuotas`): `max.connections`,
//! `max.connections.per.ip` with its overrides, and the `connection_creation_rate` quota of
//! `ip` client-quota entities (KIP-612).
//!
//! * `max.connections`: a listener waits before accepting while the node holds that many
//!   connections, so new ones queue in the kernel's backlog. Controller listeners are exempt
//!   and not counted (Kafka exempts its inter-broker listener): quorum peers and the node's
//!   own quorum traffic must always get in, and never use up the clients' connections.
//! * `max.connections.per.ip`: a connection from an address that already has its maximum is
//!   closed at once, without a response.
//! * `connection_creation_rate`: each accepted connection is recorded in its address's rate
//!   (the address's own quota, else the default `ip` entity's); one that exceeds it is not
//!   counted, and is closed after the throttle time, at most one quota window.
//!
//! The first three are dynamic broker configs as in Kafka: this node's BROKER resource, then the
//! cluster-wide default, then the static config. A change applies to new connections; raising
//! `max.connections` lets waiting ones in at once, lowering a limit closes no connection.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use arc_swap::ArcSwap;
use gregor_actors::config_publisher::DynamicBrokerConfigs;
use gregor_actors::controller::logic::configs::broker::{
    parse_connection_count, parse_per_ip_overrides, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_IP,
    MAX_CONNECTIONS_PER_IP_OVERRIDES,
};
use gregor_actors::quota::sampler::{RateQuota, WindowConfig};
use gregor_publishers::image::MetadataImage;
use gregor_publishers::records::EntityData;
use tokio::sync::{watch, Notify};

/// The client-quota key of the per-address connection rate.
const CONNECTION_CREATION_RATE: &str = "connection_creation_rate";

/// Per-address rate sensors beyond this many are pruned of idle ones before adding another.
const PRUNE_ABOVE: usize = 1024;

/// Why a connection is refused right after it was accepted.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The address already had `max` connections.
    TooMany { max: usize },
    /// The address's connection rate is over its quota; close after this many ms.
    Throttled { ms: u64 },
}

/// The limits as configured.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LimitSettings {
    pub(crate) max_connections: usize,
    pub(crate) max_connections_per_ip: usize,
    pub(crate) per_ip_overrides: HashMap<IpAddr, usize>,
    pub(crate) window: WindowConfig,
}

/// A configured count as a limit (a negative override allows nothing).
pub(crate) fn count(value: i32) -> usize {
    usize::try_from(value).unwrap_or(0)
}

impl LimitSettings {
    /// These (static) settings with the node's effective dynamic broker configs over them. An
    /// override's host name is resolved here, off the accept path; one that does not resolve is
    /// left out with a warning, as Kafka keeps its old overrides when a reconfiguration fails.
    pub(crate) async fn with_dynamic(&self, dynamic: &DynamicBrokerConfigs) -> LimitSettings {
        let mut settings = self.clone();
        let value = |key: &str| dynamic.get(key).map(|(value, _)| value.as_str());
        let apply_count = |key: &str, target: &mut usize| {
            if let Some(raw) = value(key) {
                match parse_connection_count(key, raw) {
                    Ok(parsed) => *target = count(parsed),
                    Err(error) => tracing::warn!(config = key, %error, "dynamic config ignored"),
                }
            }
        };
        apply_count(MAX_CONNECTIONS, &mut settings.max_connections);
        apply_count(MAX_CONNECTIONS_PER_IP, &mut settings.max_connections_per_ip);
        if let Some(raw) = value(MAX_CONNECTIONS_PER_IP_OVERRIDES) {
            match parse_per_ip_overrides(raw) {
                Ok(overrides) => {
                    settings.per_ip_overrides = HashMap::new();
                    for (host, max) in overrides {
                        for ip in resolve(&host).await {
                            settings.per_ip_overrides.insert(ip, count(max));
                        }
                    }
                }
                Err(error) => tracing::warn!(
                    config = MAX_CONNECTIONS_PER_IP_OVERRIDES,
                    %error,
                    "dynamic config ignored"
                ),
            }
        }
        settings
    }
}

/// The addresses of an override's host: itself if it is one, else what it resolves to.
async fn resolve(host: &str) -> Vec<IpAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return vec![ip];
    }
    match tokio::net::lookup_host((host, 0)).await {
        Ok(addresses) => addresses.map(|a| a.ip()).collect(),
        Err(error) => {
            tracing::warn!(
                config = MAX_CONNECTIONS_PER_IP_OVERRIDES,
                %host,
                %error,
                "the override's host does not resolve; it is left out"
            );
            Vec::new()
        }
    }
}

struct IpRate {
    rate: RateQuota,
    last_ms: u64,
}

#[derive(Default)]
struct Counts {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
    rates: HashMap<IpAddr, IpRate>,
}

/// Connection counts and rates of the whole node, shared by every listener.
pub(crate) struct ConnectionLimits {
    settings: ArcSwap<LimitSettings>,
    image: Arc<ArcSwap<MetadataImage>>,
    counts: Mutex<Counts>,
    slot_freed: Notify,
    started: Instant,
}

/// A connection counted in `max.connections`; uncounted when dropped.
pub(crate) struct Slot {
    limits: Arc<ConnectionLimits>,
    ip: Option<IpAddr>,
    counted: bool,
}

impl ConnectionLimits {
    pub(crate) fn new(settings: LimitSettings, image: Arc<ArcSwap<MetadataImage>>) -> Arc<Self> {
        Arc::new(ConnectionLimits {
            settings: ArcSwap::from_pointee(settings),
            image,
            counts: Mutex::new(Counts::default()),
            slot_freed: Notify::new(),
            started: Instant::now(),
        })
    }

    /// Applies new settings: waiting connections see a raised `max.connections` at once.
    pub(crate) fn reconfigure(&self, settings: LimitSettings) {
        let before = self.settings.swap(Arc::new(settings));
        let now = self.settings.load();
        if before.max_connections != now.max_connections {
            tracing::info!(
                max_connections = now.max_connections,
                "Updating broker-wide max.connections"
            );
        }
        if before.max_connections_per_ip != now.max_connections_per_ip {
            tracing::info!(
                max_connections_per_ip = now.max_connections_per_ip,
                "Updating max.connections.per.ip"
            );
        }
        if before.per_ip_overrides != now.per_ip_overrides {
            tracing::info!(overrides = ?now.per_ip_overrides, "Updating max.connections.per.ip.overrides");
        }
        self.slot_freed.notify_waiters();
    }

    /// Follows this node's dynamic broker configs, over the static `base` settings, until the
    /// publisher goes away.
    pub(crate) async fn follow(
        self: Arc<Self>,
        base: LimitSettings,
        mut configs: watch::Receiver<DynamicBrokerConfigs>,
    ) {
        loop {
            let dynamic = configs.borrow_and_update().clone();
            self.reconfigure(base.with_dynamic(&dynamic).await);
            if configs.changed().await.is_err() {
                return;
            }
        }
    }

    fn counts(&self) -> MutexGuard<'_, Counts> {
        self.counts.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Takes a connection slot, waiting for one unless `exempt` (controller listeners, whose
    /// connections are not counted either).
    pub(crate) async fn slot(self: &Arc<Self>, exempt: bool) -> Slot {
        loop {
            let freed = self.slot_freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut counts = self.counts();
                if exempt || counts.total < self.settings.load().max_connections {
                    counts.total += usize::from(!exempt);
                    return Slot {
                        limits: self.clone(),
                        ip: None,
                        counted: !exempt,
                    };
                }
            }
            freed.await;
        }
    }

    /// The connection rate quota of `ip`: its own `ip` entity, else the default one.
    fn rate_quota(&self, ip: IpAddr) -> Option<f64> {
        let image = self.image.load();
        let entity = |name: Option<String>| {
            [EntityData {
                entity_type: "ip".to_owned(),
                entity_name: name,
            }]
        };
        let quotas = &image.client_quotas;
        quotas
            .get(&entity(Some(ip.to_string())))
            .and_then(|q| q.get(CONNECTION_CREATION_RATE))
            .or_else(|| {
                quotas
                    .get(&entity(None))
                    .and_then(|q| q.get(CONNECTION_CREATION_RATE))
            })
    }

    /// Admits the connection of `slot` from `ip`, in Kafka's order: the rate quota first (a
    /// throttled connection is not recorded), then the per-address count.
    pub(crate) fn admit(&self, slot: &mut Slot, ip: IpAddr) -> Result<(), Refused> {
        let quota = self.rate_quota(ip);
        let now_ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let settings = self.settings.load();
        let window = settings.window;
        let mut counts = self.counts();
        if let Some(bound) = quota {
            if counts.rates.len() > PRUNE_ABOVE && !counts.rates.contains_key(&ip) {
                let horizon = window.window_ms.saturating_mul(u64::from(window.samples));
                counts
                    .rates
                    .retain(|_, r| now_ms.saturating_sub(r.last_ms) < horizon);
            }
            let sensor = counts.rates.entry(ip).or_insert_with(|| IpRate {
                rate: RateQuota::new(),
                last_ms: now_ms,
            });
            sensor.last_ms = now_ms;
            let throttle = sensor.rate.record(&window, bound, 1.0, now_ms);
            if throttle > 0 {
                // Kafka un-records a connection it does not accept.
                sensor.rate.record(&window, f64::INFINITY, -1.0, now_ms);
                return Err(Refused::Throttled {
                    ms: throttle.min(window.window_ms),
                });
            }
        }
        let count = counts.per_ip.entry(ip).or_insert(0);
        *count += 1;
        slot.ip = Some(ip);
        let max = settings
            .per_ip_overrides
            .get(&ip)
            .copied()
            .unwrap_or(settings.max_connections_per_ip);
        if *count > max {
            return Err(Refused::TooMany { max });
        }
        Ok(())
    }

    fn release(&self, ip: Option<IpAddr>, counted: bool) {
        let mut counts = self.counts();
        counts.total = counts.total.saturating_sub(usize::from(counted));
        if let Some(ip) = ip {
            if let Some(count) = counts.per_ip.get_mut(&ip) {
                *count -= 1;
                if *count == 0 {
                    counts.per_ip.remove(&ip);
                }
            }
        }
        drop(counts);
        self.slot_freed.notify_waiters();
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.limits.release(self.ip, self.counted);
    }
}

#[cfg(test)]
mod tests {
    use gregor_publishers::image::Provenance;
    use gregor_publishers::records::{ClientQuotaRecord, MetadataRecord};
    use gregor_publishers::MetadataDelta;

    use super::*;

    const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const OTHER: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 7));

    fn limits(max: usize, per_ip: usize, overrides: &[(IpAddr, usize)]) -> Arc<ConnectionLimits> {
        ConnectionLimits::new(
            LimitSettings {
                max_connections: max,
                max_connections_per_ip: per_ip,
                per_ip_overrides: overrides.iter().copied().collect(),
                window: WindowConfig::DEFAULT,
            },
            Arc::new(ArcSwap::from_pointee(MetadataImage::empty())),
        )
    }

    #[tokio::test]
    async fn per_ip_limits_and_overrides() {
        let limits = limits(100, 2, &[(OTHER, 1)]);
        let mut held = Vec::new();
        for _ in 0..2 {
            let mut slot = limits.slot(false).await;
            assert_eq!(limits.admit(&mut slot, LOCAL), Ok(()));
            held.push(slot);
        }
        let mut third = limits.slot(false).await;
        assert_eq!(
            limits.admit(&mut third, LOCAL),
            Err(Refused::TooMany { max: 2 })
        );
        drop(third);
        let mut other = limits.slot(false).await;
        assert_eq!(limits.admit(&mut other, OTHER), Ok(()));
        let mut other2 = limits.slot(false).await;
        assert_eq!(
            limits.admit(&mut other2, OTHER),
            Err(Refused::TooMany { max: 1 })
        );
        drop(other2);
        held.pop();
        let mut again = limits.slot(false).await;
        assert_eq!(limits.admit(&mut again, LOCAL), Ok(()));
        assert_eq!(limits.counts().total, 3);
        assert_eq!(limits.counts().per_ip.get(&LOCAL), Some(&2));
    }

    #[tokio::test]
    async fn max_connections_waits_for_a_slot_but_not_on_exempt_listeners() {
        let limits = limits(1, 10, &[]);
        let first = limits.slot(false).await;
        let waiting = tokio::spawn({
            let limits = limits.clone();
            async move { limits.slot(false).await }
        });
        let controller = limits.slot(true).await;
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        assert_eq!(limits.counts().total, 1);
        drop(controller);
        assert_eq!(limits.counts().total, 1);
        drop(first);
        let second = tokio::time::timeout(std::time::Duration::from_secs(10), waiting).await;
        assert!(matches!(second, Ok(Ok(_))));
        assert_eq!(limits.counts().total, 1);
    }

    #[tokio::test]
    async fn the_ip_rate_quota_throttles_and_does_not_count_refused_connections() {
        let limits = limits(100, 100, &[]);
        // Default ip entity: 2 connections/s over the 11 x 1 s window (a 10 s minimum span).
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        delta
            .replay(&MetadataRecord::ClientQuota(ClientQuotaRecord {
                entity: vec![EntityData {
                    entity_type: "ip".to_owned(),
                    entity_name: None,
                }],
                key: CONNECTION_CREATION_RATE.to_owned(),
                value: 2.0,
                remove: false,
            }))
            .ok();
        limits
            .image
            .store(Arc::new(delta.apply(Provenance::default())));
        let began_ms = u64::try_from(limits.started.elapsed().as_millis()).unwrap_or(0);
        let mut held = Vec::new();
        for _ in 0..20 {
            let mut slot = limits.slot(false).await;
            assert_eq!(limits.admit(&mut slot, LOCAL), Ok(()));
            held.push(slot);
        }
        let mut slot = limits.slot(false).await;
        let Err(Refused::Throttled { ms }) = limits.admit(&mut slot, LOCAL) else {
            panic!("the 21st connection within a window is throttled");
        };
        // 21 in a 10 s span is 2.1/s: (2.1 - 2) / 2 x 10 s = 500 ms.
        assert!((1..=1000).contains(&ms), "{ms}");
        assert_eq!(limits.counts().per_ip.get(&LOCAL), Some(&20));
        // The refused connection was un-recorded: the rate is back at 20 connections, over the
        // 10 s minimum span plus the milliseconds since the first (Kafka's `Rate`): 21 would
        // be above 2/s until half a second passed.
        let now_ms = u64::try_from(limits.started.elapsed().as_millis()).unwrap_or(0);
        let since_first = (now_ms - began_ms + 1) as f64 / 1000.0;
        let rate = limits
            .counts()
            .rates
            .get_mut(&LOCAL)
            .map(|r| r.rate.rate(&WindowConfig::DEFAULT, now_ms))
            .unwrap_or_default();
        assert!(
            rate >= 20.0 / (10.0 + since_first) && rate <= 2.0,
            "{rate} after {since_first} s"
        );
        // An address with no quota of its own takes the default too; one named address does not.
        let mut other = limits.slot(false).await;
        assert_eq!(limits.admit(&mut other, OTHER), Ok(()));
    }
}
