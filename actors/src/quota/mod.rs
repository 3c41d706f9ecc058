//! Client quotas: one manager per quota type, the maths they run, and the publisher that feeds
//! them configuration (reference §3-4).
//!
//! ```text
//!  Loader ──delta──▶ ClientQuotaPublisher ──UpdateQuotas──▶ QuotaManagerActor (×4, owns config)
//!                                                                 │ stores table / expires sensors
//!                                                                 ▼
//!  connection ──record(request time)──▶ QuotaManager (shared: ArcSwap table + DashMap sensors)
//!  controller ──new_quota_for(..).charge(partitions)──▶        ▲
//! ```
//!
//! - [`sampler`], [`token_bucket`], [`entity`]: pure maths with time passed in (STYLE #6).
//! - [`manager`]: the shared per-type state and the per-request path (no mailbox on it).
//! - [`actor`]: the actor per type that owns the configuration and drops idle sensors.
//! - [`publisher`]: image changes → actors.

pub mod actor;
pub mod callback;
pub mod clock;
pub mod entity;
pub mod manager;
pub mod publisher;
pub mod sampler;
pub mod token_bucket;

use std::sync::Arc;

use actix::{Actor, Addr};

pub use actor::{QuotaManagerActor, SensorExpiry};
pub use callback::QuotaCallbackPublisher;
pub use clock::{Clock, ManualClock, SystemClock};
pub use entity::{sanitize, EntityName, MetricTags, QuotaEntity, QuotaTable};
pub use manager::{
    ControllerMutationQuota, QuotaManager, SensorCache, SharedSensorCache, ThrottleGuard, UNLIMITED,
};
pub use publisher::ClientQuotaPublisher;
pub use sampler::WindowConfig;

/// Kafka's quota types (`QuotaType`), each with its own manager.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum QuotaType {
    /// `producer_byte_rate`: request bytes of Produce.
    Produce,
    /// `consumer_byte_rate`: response bytes of Fetch.
    Fetch,
    /// `request_percentage`: handler time.
    Request,
    /// `controller_mutation_rate`: partitions created, added or deleted.
    ControllerMutation,
}

impl QuotaType {
    /// Every type.
    pub const ALL: [QuotaType; 4] = [
        QuotaType::Produce,
        QuotaType::Fetch,
        QuotaType::Request,
        QuotaType::ControllerMutation,
    ];

    /// Kafka's metric group, the `resource` label.
    pub fn resource(self) -> &'static str {
        match self {
            QuotaType::Produce => "Produce",
            QuotaType::Fetch => "Fetch",
            QuotaType::Request => "Request",
            QuotaType::ControllerMutation => "ControllerMutation",
        }
    }

    /// The client-quota key configuring this type.
    pub fn config_key(self) -> &'static str {
        match self {
            QuotaType::Produce => "producer_byte_rate",
            QuotaType::Fetch => "consumer_byte_rate",
            QuotaType::Request => "request_percentage",
            QuotaType::ControllerMutation => "controller_mutation_rate",
        }
    }

    /// The type a client-quota key configures (`connection_creation_rate` and unknown keys:
    /// none).
    pub fn for_key(key: &str) -> Option<QuotaType> {
        QuotaType::ALL.into_iter().find(|t| t.config_key() == key)
    }
}

/// One quota type: the shared state requests use and the actor owning its configuration.
#[derive(Clone, Debug)]
pub struct QuotaHandle {
    /// Read and recorded by requests.
    pub shared: Arc<QuotaManager>,
    /// Receives configuration changes.
    pub actor: Addr<QuotaManagerActor>,
}

/// The four quota managers of a node.
#[derive(Clone, Debug)]
pub struct QuotaManagers {
    /// Produce byte rate.
    pub produce: QuotaHandle,
    /// Fetch byte rate.
    pub fetch: QuotaHandle,
    /// Request time.
    pub request: QuotaHandle,
    /// Controller mutations (token bucket).
    pub controller_mutation: QuotaHandle,
}

impl QuotaManagers {
    /// Starts the four actors (call inside an actix system). `client` is
    /// `quota.window.num` × `quota.window.size.seconds`, `controller` the
    /// `controller.quota.window.*` pair.
    pub fn start(client: WindowConfig, controller: WindowConfig, clock: Arc<dyn Clock>) -> Self {
        Self::start_with_expiry(client, controller, clock, SensorExpiry::KAFKA)
    }

    /// [`start`](Self::start) with sensors expiring by `expiry` instead of Kafka's hour.
    pub fn start_with_expiry(
        client: WindowConfig,
        controller: WindowConfig,
        clock: Arc<dyn Clock>,
        expiry: SensorExpiry,
    ) -> Self {
        let handle = |quota_type: QuotaType, window: WindowConfig| {
            let shared = Arc::new(QuotaManager::new(quota_type, window, Arc::clone(&clock)));
            let actor = QuotaManagerActor::new(Arc::clone(&shared), expiry).start();
            QuotaHandle { shared, actor }
        };
        QuotaManagers {
            produce: handle(QuotaType::Produce, client),
            fetch: handle(QuotaType::Fetch, client),
            request: handle(QuotaType::Request, client),
            controller_mutation: handle(QuotaType::ControllerMutation, controller),
        }
    }

    /// Hands tags and limits of all four managers to `callback` (`client.quota.callback.class`),
    /// before the node serves requests; feed it with a [`QuotaCallbackPublisher`].
    pub fn install_callback(
        &self,
        callback: &Arc<dyn gregor_publishers::quota_callback::ClientQuotaCallbackHandler>,
    ) {
        for quota_type in QuotaType::ALL {
            if self
                .get(quota_type)
                .shared
                .install_callback(Arc::clone(callback))
                .is_err()
            {
                tracing::warn!(
                    ?quota_type,
                    "a quota callback is already installed; keeping it"
                );
            }
        }
    }

    /// The manager of `quota_type`.
    pub fn get(&self, quota_type: QuotaType) -> &QuotaHandle {
        match quota_type {
            QuotaType::Produce => &self.produce,
            QuotaType::Fetch => &self.fetch,
            QuotaType::Request => &self.request,
            QuotaType::ControllerMutation => &self.controller_mutation,
        }
    }
}

#[cfg(test)]
mod tests;
