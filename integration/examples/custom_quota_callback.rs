//! Embedding Gregor with your own client quota callback.
//!
//! A plug-in implements `ClientQuotaCallbackHandler`, proves itself with the conformance suite,
//! is registered under a name, and is selected with `client.quota.callback.class`:
//!
//! ```sh
//! cargo run -p gregor-integration --example custom_quota_callback            # checks, then exits
//! cargo run -p gregor-integration --example custom_quota_callback -- serve   # also runs a node
//! ```
//!
//! This plug-in gives every client id its own quota, equal to a `per-client.byte.rate` config
//! divided by the number of brokers that lead at least one partition: it reads the cluster
//! through the borrowed view, so a topic change costs it one pass over the partitions it asks
//! about, never a copy of the cluster.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};

use gregor_publishers::quota_callback::testing::{run_conformance_suite_with, standard_configs};
use gregor_publishers::quota_callback::{
    CallbackConfigs, CallbackError, CallbackRegistry, ClientQuotaCallbackHandler,
    ClientQuotaEntity, ClientQuotaType, ClusterMetadata, KafkaPrincipal, QuotaMetricTags,
};

/// One quota per client id, shared across the brokers that lead partitions.
#[derive(Default)]
struct PerClientQuota {
    byte_rate: f64,
    /// Number of brokers leading at least one partition (f64 bits; 0 = not known yet).
    leaders: AtomicU64,
}

impl ClientQuotaCallbackHandler for PerClientQuota {
    fn name(&self) -> &str {
        "per-client"
    }

    fn configure(&mut self, configs: &CallbackConfigs) -> Result<(), CallbackError> {
        let text = configs
            .get("per-client.byte.rate")
            .map_or("1048576", String::as_str);
        self.byte_rate = text.parse().map_err(|_| CallbackError::Config {
            callback: "per-client".into(),
            message: format!("per-client.byte.rate must be a number, not '{text}'"),
        })?;
        Ok(())
    }

    fn quota_metric_tags(
        &self,
        _quota_type: ClientQuotaType,
        _principal: &KafkaPrincipal,
        client_id: &str,
    ) -> QuotaMetricTags {
        QuotaMetricTags::from_pairs([("client-id", client_id)])
    }

    fn quota_limit(&self, quota_type: ClientQuotaType, _tags: &QuotaMetricTags) -> Option<f64> {
        match quota_type {
            ClientQuotaType::Produce | ClientQuotaType::Fetch => {
                let leaders = f64::from_bits(self.leaders.load(Ordering::Relaxed)).max(1.0);
                Some(self.byte_rate / leaders)
            }
            ClientQuotaType::Request | ClientQuotaType::ControllerMutation => None,
        }
    }

    // Quotas written with kafka-configs are not used by this plug-in.
    fn update_quota(&self, _: ClientQuotaType, _: &ClientQuotaEntity, _: f64) {}
    fn remove_quota(&self, _: ClientQuotaType, _: &ClientQuotaEntity) {}

    fn quota_reset_required(&self, _: ClientQuotaType) -> bool {
        false
    }

    fn update_cluster_metadata(&self, cluster: &dyn ClusterMetadata) -> bool {
        let mut leaders = BTreeSet::new();
        for (_, topic) in cluster.topics() {
            leaders.extend(
                cluster
                    .partitions(topic)
                    .filter(|(_, p)| p.is_available())
                    .map(|(_, p)| p.leader()),
            );
        }
        let count = (leaders.len() as f64).to_bits();
        self.leaders.swap(count, Ordering::Relaxed) != count
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. The plug-in meets the contract the quota managers rely on.
    let mut configs = standard_configs();
    configs.insert("per-client.byte.rate".into(), "2097152".into());
    run_conformance_suite_with(&configs, || Box::new(PerClientQuota::default()));
    println!("per-client: conformance suite passed");

    // 2. Register it next to the built-ins.
    let mut registry = CallbackRegistry::with_builtins();
    registry.register("per-client", || Box::new(PerClientQuota::default()))?;
    println!(
        "registered quota callbacks: {:?}",
        registry.names().collect::<Vec<_>>()
    );

    // 3. Optionally run a node that uses it (until Ctrl-C).
    if std::env::args().any(|arg| arg == "serve") {
        let data = tempfile::tempdir()?;
        let config = gregor_node::config::NodeConfig::from_values(
            [
                ("client.quota.callback.class", "per-client"),
                ("per-client.byte.rate", "2097152"),
                ("log.dirs", &*data.path().to_string_lossy()),
                (
                    "listeners",
                    "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
                ),
                ("metrics.listener", "127.0.0.1:0"),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        )?;
        gregor_node::server::init_logging();
        gregor_node::server::run_with(config, registry)?;
    }
    Ok(())
}
