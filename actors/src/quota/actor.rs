//! The quota manager actor: one per quota type (produce, fetch, request, controller
//! mutation). It owns the type's configuration: it is the only writer of the shared table
//! requests read, and it drops sensors idle for an hour, and with them their metric series
//! (Kafka's rule). Requests never send it anything.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::entity::QuotaEntity;
use super::manager::{QuotaManager, SENSOR_IDLE_EXPIRY_MS};

/// When idle sensors go: Kafka drops a quota sensor after 3600 s without a recording,
/// looking every 30 s (`Metrics`' `ExpireSensorTask`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SensorExpiry {
    /// Idle time after which a sensor goes.
    pub idle_ms: u64,
    /// How often idle sensors are looked for.
    pub scan_interval: Duration,
}

impl SensorExpiry {
    /// Kafka's: an hour idle, checked every 30 s.
    pub const KAFKA: SensorExpiry = SensorExpiry {
        idle_ms: SENSOR_IDLE_EXPIRY_MS,
        scan_interval: Duration::from_secs(30),
    };

    /// Sensors go after `idle_ms` (a test knob: an hour is too long to wait for); looked for
    /// four times per idle period, so one goes within 1.25 × `idle_ms`.
    pub fn after_idle_ms(idle_ms: u64) -> SensorExpiry {
        SensorExpiry {
            idle_ms,
            scan_interval: Duration::from_millis(idle_ms / 4)
                .clamp(Duration::from_millis(10), Self::KAFKA.scan_interval),
        }
    }
}

/// Apply quota changes of this type (`None` removes the entity's quota).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct UpdateQuotas(pub Vec<(QuotaEntity, Option<f64>)>);

/// Replace every quota of this type (a snapshot was loaded).
#[derive(Message, Debug, Clone)]
#[rtype(result = "()")]
pub struct ReplaceQuotas(pub Vec<(QuotaEntity, f64)>);

/// Drop sensors idle for `idle_ms` now; answers how many were dropped.
#[derive(Message, Debug, Clone, Copy)]
#[rtype(result = "usize")]
pub struct ExpireIdleSensors {
    /// Idle time after which a sensor goes.
    pub idle_ms: u64,
}

/// The actor of one quota type.
pub struct QuotaManagerActor {
    manager: Arc<QuotaManager>,
    expiry: SensorExpiry,
}

impl QuotaManagerActor {
    /// The actor owning `manager`'s configuration, expiring its sensors by `expiry`.
    pub fn new(manager: Arc<QuotaManager>, expiry: SensorExpiry) -> Self {
        QuotaManagerActor { manager, expiry }
    }
}

impl Actor for QuotaManagerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(self.expiry.scan_interval, |actor, _| {
            let now = actor.manager.now_ms();
            let dropped = actor.manager.expire_idle_sensors(now, actor.expiry.idle_ms);
            if dropped > 0 {
                tracing::debug!(
                    quota = actor.manager.quota_type().resource(),
                    dropped,
                    "dropped idle quota sensors"
                );
            }
        });
    }
}

impl Handler<UpdateQuotas> for QuotaManagerActor {
    type Result = ();

    fn handle(&mut self, msg: UpdateQuotas, _: &mut Self::Context) {
        self.manager.update_quotas(msg.0);
    }
}

impl Handler<ReplaceQuotas> for QuotaManagerActor {
    type Result = ();

    fn handle(&mut self, msg: ReplaceQuotas, _: &mut Self::Context) {
        self.manager.replace_quotas(msg.0);
    }
}

impl Handler<ExpireIdleSensors> for QuotaManagerActor {
    type Result = usize;

    fn handle(&mut self, msg: ExpireIdleSensors, _: &mut Self::Context) -> usize {
        let now = self.manager.now_ms();
        self.manager.expire_idle_sensors(now, msg.idle_ms)
    }
}
