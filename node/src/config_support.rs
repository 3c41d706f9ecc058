//! What the config APIs need from the node: its static configs (read-only entries of
//! DescribeConfigs BROKER <this node>), its `group.consumer.*` values (what GROUP resources
//! default to) and its live log filter (BROKER_LOGGER).

use std::sync::Arc;

use gregor_actors::controller::logic::configs::broker::is_log_default_key;
use gregor_actors::handlers::configs::{ConfigSupport, StaticBrokerConfig};

use crate::config::{NodeConfig, DEFINITIONS};
use crate::log_levels;

/// Every key `gregor node` accepts, with the value this node runs with: set by the operator
/// (STATIC_BROKER_CONFIG) or the default (DEFAULT_CONFIG).
pub fn static_broker_configs(config: &NodeConfig) -> Vec<StaticBrokerConfig> {
    DEFINITIONS
        .iter()
        .map(|def| {
            let set = config.originals.get(def.name).cloned();
            StaticBrokerConfig {
                name: def.name.to_owned(),
                is_default: set.is_none(),
                value: set.or_else(|| def.default.map(str::to_owned)),
                config_type: def.kind as i8,
                doc: def.doc.to_owned(),
            }
        })
        .collect()
}

/// The handlers' [`ConfigSupport`] for a node started with `config`.
pub fn config_support(config: &NodeConfig) -> ConfigSupport {
    ConfigSupport {
        static_configs: Arc::new(static_broker_configs(config)),
        static_log_configs: Arc::new(
            config
                .originals
                .iter()
                .filter(|(key, _)| is_log_default_key(key))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        ),
        group_defaults: config.groups.config_defaults(),
        loggers: log_levels::installed(),
    }
}
