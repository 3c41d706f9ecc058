//! The quota manager actor: one per quota type (produce, fetch, request, controller
//! mutation). It owns the type's configuration: it is the only writer of the shared table
//! requests read, and it drops sensors idle for an hour. Requests never send it anything.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;

use super::entity::QuotaEntity;
use super::manager::{QuotaManager, SENSOR_IDLE_EXPIRY_MS};

/// How often idle sensors are looked for.
const EXPIRY_SCAN_INTERVAL: Duration = Duration::from_secs(60);

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
}

impl QuotaManagerActor {
    /// The actor owning `manager`'s configuration.
    pub fn new(manager: Arc<QuotaManager>) -> Self {
        QuotaManagerActor { manager }
    }
}

impl Actor for QuotaManagerActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        ctx.run_interval(EXPIRY_SCAN_INTERVAL, |actor, _| {
            let now = actor.manager.now_ms();
            let dropped = actor
                .manager
                .expire_idle_sensors(now, SENSOR_IDLE_EXPIRY_MS);
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
