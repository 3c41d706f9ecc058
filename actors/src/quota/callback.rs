//! A configured quota callback (`client.quota.callback.class`) in the node: the publisher that
//! feeds it the image, and the panic guard around every call into it.
//!
//! ```text
//!  Loader ──(delta, image)──▶ QuotaCallbackPublisher
//!     client-quota delta  ──▶ callback.update_quota / remove_quota ─┐
//!     broker "" / own-id dynamic configs ──▶ callback.reconfigure  ─┤ then every manager's
//!     topics or cluster delta ──▶ callback.update_cluster_metadata ─┘ limits are re-read
//!                                 (ImageClusterMetadata: borrowed, O(1))  (on true)
//!  request ──▶ QuotaManager ──▶ callback.quota_reset_required / quota_metric_tags / quota_limit
//! ```
//!
//! With no callback configured (or `default`), the managers resolve quotas with their own
//! lock-free copy of Kafka's built-in rules ([`super::entity::QuotaTable`], the table
//! [`DefaultQuotaCallback`](gregor_publishers::quota_callback::DefaultQuotaCallback) wraps; a
//! differential test checks both paths agree) and this publisher is not installed.
//!
//! Re-reading limits is lazy: a change bumps the managers' limit generation, and each live
//! sensor calls `quota_limit` again on its next use, so an idle sensor costs nothing. Tags are
//! lazy too: a connection asks `quota_metric_tags` when it first records and again only after
//! the publisher told the plug-in anything (the trait requires deterministic tags), while
//! `quota_reset_required` is asked on every request, as Kafka does.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

use gregor_publishers::quota_callback::{
    CallbackConfigs, ClientQuotaCallbackHandler, ClientQuotaEntity, ClientQuotaType,
    ImageClusterMetadata,
};
use gregor_publishers::{
    LoaderManifest, MetadataDelta, MetadataImage, MetadataPublisher, PublishError,
};

use super::manager::QuotaManager;
use super::QuotaManagers;

/// Kafka's ConfigResource type id of brokers (cluster default = name "").
const BROKER_RESOURCE: i8 = 4;

/// Runs one call into a plug-in; a panic is logged, counted in
/// `gregor_quota_callback_failures_total{callback, method}` and becomes `None`, so the caller
/// keeps what it had and the node keeps serving.
pub fn guarded<T>(
    callback: &dyn ClientQuotaCallbackHandler,
    method: &'static str,
    call: impl FnOnce() -> T,
) -> Option<T> {
    match catch_unwind(AssertUnwindSafe(call)) {
        Ok(value) => Some(value),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-text panic".to_owned());
            // The name comes from the plug-in too; asking it again could panic again.
            let name = catch_unwind(AssertUnwindSafe(|| callback.name().to_owned()))
                .unwrap_or_else(|_| "unnamed".to_owned());
            tracing::error!(callback = %name, method, %message, "quota callback panicked; keeping the previous limits");
            gregor_metrics::quota_callback_failed(&name, method);
            None
        }
    }
}

/// Feeds a configured quota callback from the image: client quotas, the dynamic configs it
/// reconfigures on, and topic/broker changes through a borrowed view.
pub struct QuotaCallbackPublisher {
    callback: Arc<dyn ClientQuotaCallbackHandler>,
    /// The plug-in's name, asked once (metrics label).
    callback_name: String,
    managers: [Arc<QuotaManager>; 4],
    cluster_id: String,
    node_id: String,
    /// What the callback has been told, so a snapshot can be turned into updates and removals.
    told: BTreeMap<(ClientQuotaType, ClientQuotaEntity), f64>,
    /// Last values of the callback's reconfigurable keys handed to `reconfigure`.
    dynamic: CallbackConfigs,
}

impl QuotaCallbackPublisher {
    /// A publisher for `callback`, whose limits the four `managers` use (see
    /// [`QuotaManagers::install_callback`]); `cluster_id` is what the view reports.
    pub fn new(
        callback: Arc<dyn ClientQuotaCallbackHandler>,
        managers: &QuotaManagers,
        cluster_id: impl Into<String>,
        node_id: i32,
    ) -> Self {
        Self::with_managers(
            callback,
            [
                Arc::clone(&managers.produce.shared),
                Arc::clone(&managers.fetch.shared),
                Arc::clone(&managers.request.shared),
                Arc::clone(&managers.controller_mutation.shared),
            ],
            cluster_id,
            node_id,
        )
    }

    /// [`new`](Self::new) over the shared halves of the managers (produce, fetch, request,
    /// controller mutation), with no actor system (tests, embedders).
    pub fn with_managers(
        callback: Arc<dyn ClientQuotaCallbackHandler>,
        managers: [Arc<QuotaManager>; 4],
        cluster_id: impl Into<String>,
        node_id: i32,
    ) -> Self {
        let callback_name = guarded(&*callback, "name", || callback.name().to_owned())
            .unwrap_or_else(|| "unnamed".to_owned());
        QuotaCallbackPublisher {
            callback,
            callback_name,
            managers,
            cluster_id: cluster_id.into(),
            node_id: node_id.to_string(),
            told: BTreeMap::new(),
            dynamic: CallbackConfigs::new(),
        }
    }

    fn invalidate_all(&self) {
        for manager in &self.managers {
            manager.invalidate_limits();
        }
    }

    /// Every (type, entity) → value the image configures for the callback.
    fn quotas_in(image: &MetadataImage) -> BTreeMap<(ClientQuotaType, ClientQuotaEntity), f64> {
        let mut out = BTreeMap::new();
        for (parts, quotas) in image.client_quotas.iter() {
            let Some(entity) = ClientQuotaEntity::from_record_entity(parts) else {
                continue;
            };
            for (key, value) in quotas.iter() {
                if let Some(quota_type) = ClientQuotaType::for_config_key(key) {
                    out.insert((quota_type, entity.clone()), value);
                }
            }
        }
        out
    }

    /// Brings the callback's quotas to `target`; returns whether anything changed.
    fn sync_quotas(&mut self, target: BTreeMap<(ClientQuotaType, ClientQuotaEntity), f64>) -> bool {
        let callback = Arc::clone(&self.callback);
        let mut changed = false;
        for (key, _) in self
            .told
            .iter()
            .filter(|(key, _)| !target.contains_key(*key))
        {
            guarded(&*callback, "remove_quota", || {
                callback.remove_quota(key.0, &key.1)
            });
            changed = true;
        }
        for (key, value) in &target {
            if self.told.get(key) != Some(value) {
                guarded(&*callback, "update_quota", || {
                    callback.update_quota(key.0, &key.1, *value)
                });
                changed = true;
            }
        }
        self.told = target;
        changed
    }

    /// Applies the client-quota changes of `delta`; returns whether anything changed.
    fn apply_quota_delta(&mut self, delta: &MetadataDelta) -> bool {
        let Some(quotas) = delta.client_quotas_delta() else {
            return false;
        };
        let callback = Arc::clone(&self.callback);
        let mut changed = false;
        for (parts, keys) in quotas.changed_entities() {
            let Some(entity) = ClientQuotaEntity::from_record_entity(parts) else {
                continue;
            };
            for (key, value) in keys {
                let Some(quota_type) = ClientQuotaType::for_config_key(key) else {
                    continue;
                };
                let slot = (quota_type, entity.clone());
                match value {
                    Some(value) => {
                        guarded(&*callback, "update_quota", || {
                            callback.update_quota(quota_type, &entity, value)
                        });
                        self.told.insert(slot, value);
                    }
                    None => {
                        guarded(&*callback, "remove_quota", || {
                            callback.remove_quota(quota_type, &entity)
                        });
                        self.told.remove(&slot);
                    }
                }
                changed = true;
            }
        }
        changed
    }

    /// Hands the callback the current values of its reconfigurable keys when they changed
    /// (this node's own broker config wins over the cluster default, as in Kafka).
    fn apply_dynamic_configs(&mut self, image: &MetadataImage) -> bool {
        let callback = Arc::clone(&self.callback);
        let keys: Vec<String> = guarded(&*callback, "reconfigurable_configs", || {
            callback
                .reconfigurable_configs()
                .iter()
                .map(|key| (*key).to_owned())
                .collect()
        })
        .unwrap_or_default();
        if keys.is_empty() {
            return false;
        }
        let mut values = CallbackConfigs::new();
        for key in keys {
            let value = image
                .configs
                .value(BROKER_RESOURCE, &self.node_id, &key)
                .or_else(|| image.configs.value(BROKER_RESOURCE, "", &key));
            if let Some(value) = value {
                values.insert(key, value.to_owned());
            }
        }
        if values == self.dynamic {
            return false;
        }
        match guarded(&*callback, "reconfigure", || callback.reconfigure(&values)) {
            Some(Ok(())) => {}
            Some(Err(error)) => {
                // A bad dynamic value is refused by the plug-in; it keeps its old values.
                tracing::warn!(%error, "quota callback refused its dynamic configs");
            }
            None => {}
        }
        self.dynamic = values;
        true
    }
}

impl MetadataPublisher for QuotaCallbackPublisher {
    fn name(&self) -> &str {
        "quota-callback"
    }

    fn on_metadata_update(
        &mut self,
        delta: &MetadataDelta,
        image: &Arc<MetadataImage>,
        manifest: &LoaderManifest,
    ) -> Result<(), PublishError> {
        let mut changed = match manifest {
            LoaderManifest::Snapshot { .. } => self.sync_quotas(Self::quotas_in(image)),
            LoaderManifest::LogDelta { .. } => self.apply_quota_delta(delta),
        };
        if delta.configs_delta().is_some() {
            changed |= self.apply_dynamic_configs(image);
        }
        if delta.topics_delta().is_some() || delta.cluster_delta().is_some() {
            let callback = Arc::clone(&self.callback);
            let view = ImageClusterMetadata::new(&self.cluster_id, image);
            let started = Instant::now();
            let answer = guarded(&*callback, "update_cluster_metadata", || {
                callback.update_cluster_metadata(&view)
            });
            gregor_metrics::quota_callback_cluster_updated(&self.callback_name, started.elapsed());
            // A panicking callback may have half-changed its state: re-reading is the safe side.
            changed |= answer.unwrap_or(true);
            if !changed {
                // No limit moved, but the tags the plug-in hands out may depend on the
                // cluster: connections resolve their sensors again.
                for manager in &self.managers {
                    manager.invalidate_tags();
                }
            }
        }
        if changed {
            self.invalidate_all();
        }
        Ok(())
    }

    fn close(&mut self) {
        let callback = Arc::clone(&self.callback);
        guarded(&*callback, "close", || callback.close());
    }
}

#[cfg(test)]
mod tests;
