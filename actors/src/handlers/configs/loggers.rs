//! BROKER_LOGGER: the node's live log levels (Kafka's `RuntimeLoggerManager`).
//!
//! Gregor's "loggers" are `tracing` targets: `root` (the default level) and the crate/module
//! targets in [`KNOWN_LOGGERS`]. Levels use Kafka's (log4j) names; the node maps them onto its
//! `tracing` filter (FATAL and ERROR are both `error`). Changes take effect at once, apply to
//! this node only and are not persisted: a restart returns to `RUST_LOG` / the built-in filter.

use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource;

use crate::controller::logic::configs::{ApiError, OpType};

/// Kafka's name of the root logger.
pub const ROOT_LOGGER: &str = "root";

/// Kafka's valid levels (`LogLevelConfig.VALID_LOG_LEVELS`), sorted as Kafka lists them in
/// messages.
pub const VALID_LOG_LEVELS: &[&str] = &["DEBUG", "ERROR", "FATAL", "INFO", "TRACE", "WARN"];

/// The loggers every node has: root, then the `tracing` targets of Gregor's crates and main
/// modules, and of the libraries whose logs an operator may need.
pub const KNOWN_LOGGERS: &[&str] = &[
    ROOT_LOGGER,
    "actix",
    "gregor_actors",
    "gregor_actors::controller",
    "gregor_actors::handlers",
    "gregor_actors::loader",
    "gregor_actors::raft",
    "gregor_metrics",
    "gregor_node",
    "gregor_node::network",
    "gregor_node::server",
    "gregor_publishers",
    "openraft",
];

/// The node's live log filter. Implemented in `node/` over a `tracing_subscriber` reload
/// handle; validation happens before these are called.
pub trait LogLevels: Send + Sync {
    /// Every logger with its effective level (Kafka's names), `root` first.
    fn loggers(&self) -> Vec<(String, String)>;
    /// Whether `logger` exists.
    fn exists(&self, logger: &str) -> bool {
        self.loggers().iter().any(|(name, _)| name == logger)
    }
    /// Sets `logger` to `level` (one of [`VALID_LOG_LEVELS`]).
    fn set_level(&self, logger: &str, level: &str) -> Result<(), String>;
    /// Removes `logger`'s own level so it follows root again (never called for root).
    fn unset_level(&self, logger: &str) -> Result<(), String>;
}

/// Validates every op of one BROKER_LOGGER resource, then (unless `validate_only`) applies
/// them, as Kafka does: nothing is applied if any op is invalid.
pub fn alter_loggers(
    resource: &AlterConfigsResource,
    node_id: i32,
    loggers: &dyn LogLevels,
    validate_only: bool,
) -> Result<(), ApiError> {
    let name = resource.resource_name.as_str();
    let requested: i32 = name.parse().map_err(|_| {
        ApiError::invalid_request(format!("Node id must be an integer, but it is: {name}"))
    })?;
    if requested != node_id {
        // Kafka's text prints the expected id twice (a typo); Gregor names the received one.
        return Err(ApiError::invalid_request(format!(
            "Unexpected node id. Expected {node_id}, but received {requested}"
        )));
    }
    let exists = |logger: &str| {
        if loggers.exists(logger) {
            Ok(())
        } else {
            Err(ApiError::invalid_config(format!(
                "Logger {logger} does not exist!"
            )))
        }
    };
    for op in &resource.configs {
        let logger = op.name.as_str();
        match OpType::from_id(op.config_operation) {
            Some(OpType::Set) => {
                exists(logger)?;
                let level = op.value.as_ref().map(|v| v.as_str()).unwrap_or_default();
                if !VALID_LOG_LEVELS.contains(&level) {
                    return Err(ApiError::invalid_config(format!(
                        "Cannot set the log level of {logger} to {level} as it is not a supported log level. Valid log levels are {}",
                        VALID_LOG_LEVELS.join(", ")
                    )));
                }
            }
            Some(OpType::Delete) => {
                exists(logger)?;
                if logger == ROOT_LOGGER {
                    return Err(ApiError::invalid_request(format!(
                        "Removing the log level of the {ROOT_LOGGER} logger is not allowed"
                    )));
                }
            }
            Some(kind @ (OpType::Append | OpType::Subtract)) => {
                return Err(ApiError::invalid_request(format!(
                    "{} operation is not allowed for the BROKER_LOGGER resource",
                    kind.name()
                )));
            }
            None => {
                return Err(ApiError::invalid_request(format!(
                    "Unknown operation type {} is not allowed for the BROKER_LOGGER resource",
                    op.config_operation
                )));
            }
        }
    }
    if validate_only {
        return Ok(());
    }
    for op in &resource.configs {
        let logger = op.name.as_str();
        let outcome = if op.config_operation == 0 {
            let level = op.value.as_ref().map(|v| v.as_str()).unwrap_or_default();
            loggers.set_level(logger, level).map(|()| {
                tracing::warn!("Updated the log level of {logger} to {level}");
            })
        } else {
            loggers.unset_level(logger).map(|()| {
                tracing::warn!("Unset the log level of {logger}");
            })
        };
        outcome.map_err(|reason| {
            ApiError::new(
                kafka_protocol::error::ResponseError::UnknownServerError,
                format!("Failed to update the log level of {logger}: {reason}"),
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
pub(crate) mod tests {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    use kafka_protocol::error::ResponseError;
    use kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig;
    use kafka_protocol::protocol::StrBytes;

    use super::*;

    /// Loggers in memory: root at INFO, the others following root unless set.
    #[derive(Default)]
    pub(crate) struct FakeLoggers(pub(crate) Mutex<BTreeMap<String, String>>);

    impl LogLevels for FakeLoggers {
        fn loggers(&self) -> Vec<(String, String)> {
            let set = self.0.lock().unwrap();
            let root = set
                .get(ROOT_LOGGER)
                .cloned()
                .unwrap_or_else(|| "INFO".into());
            KNOWN_LOGGERS
                .iter()
                .map(|name| {
                    let level = set.get(*name).cloned().unwrap_or_else(|| root.clone());
                    ((*name).to_owned(), level)
                })
                .collect()
        }
        fn set_level(&self, logger: &str, level: &str) -> Result<(), String> {
            self.0.lock().unwrap().insert(logger.into(), level.into());
            Ok(())
        }
        fn unset_level(&self, logger: &str) -> Result<(), String> {
            self.0.lock().unwrap().remove(logger);
            Ok(())
        }
    }

    fn resource(name: &str, ops: &[(&str, i8, Option<&str>)]) -> AlterConfigsResource {
        AlterConfigsResource::default()
            .with_resource_type(8)
            .with_resource_name(StrBytes::from_string(name.into()))
            .with_configs(
                ops.iter()
                    .map(|(k, op, v)| {
                        AlterableConfig::default()
                            .with_name(StrBytes::from_string((*k).into()))
                            .with_config_operation(*op)
                            .with_value(v.map(|v| StrBytes::from_string(v.into())))
                    })
                    .collect(),
            )
    }

    fn level(loggers: &FakeLoggers, name: &str) -> String {
        loggers
            .loggers()
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap()
            .1
    }

    #[test]
    fn set_and_delete_levels() {
        let loggers = FakeLoggers::default();
        let ok = resource(
            "1",
            &[
                ("gregor_actors::controller", 0, Some("DEBUG")),
                ("root", 0, Some("WARN")),
            ],
        );
        assert_eq!(alter_loggers(&ok, 1, &loggers, true), Ok(()));
        assert_eq!(level(&loggers, "gregor_actors::controller"), "INFO");
        assert_eq!(alter_loggers(&ok, 1, &loggers, false), Ok(()));
        assert_eq!(level(&loggers, "gregor_actors::controller"), "DEBUG");
        assert_eq!(level(&loggers, "openraft"), "WARN");
        let delete = resource("1", &[("gregor_actors::controller", 1, None)]);
        assert_eq!(alter_loggers(&delete, 1, &loggers, false), Ok(()));
        assert_eq!(level(&loggers, "gregor_actors::controller"), "WARN");
    }

    #[test]
    fn kafkas_errors() {
        let loggers = FakeLoggers::default();
        let err = |r: AlterConfigsResource| {
            let e = alter_loggers(&r, 1, &loggers, false).unwrap_err();
            (e.code, e.message.unwrap())
        };
        assert_eq!(
            err(resource("x", &[])),
            (
                ResponseError::InvalidRequest,
                "Node id must be an integer, but it is: x".into()
            )
        );
        assert_eq!(
            err(resource("2", &[])),
            (
                ResponseError::InvalidRequest,
                "Unexpected node id. Expected 1, but received 2".into()
            )
        );
        assert_eq!(
            err(resource("1", &[("nope", 0, Some("INFO"))])),
            (
                ResponseError::InvalidConfig,
                "Logger nope does not exist!".into()
            )
        );
        assert_eq!(
            err(resource("1", &[("root", 0, Some("info"))])),
            (ResponseError::InvalidConfig, "Cannot set the log level of root to info as it is not a supported log level. Valid log levels are DEBUG, ERROR, FATAL, INFO, TRACE, WARN".into())
        );
        assert_eq!(
            err(resource("1", &[("root", 1, None)])),
            (
                ResponseError::InvalidRequest,
                "Removing the log level of the root logger is not allowed".into()
            )
        );
        assert_eq!(
            err(resource("1", &[("root", 2, Some("INFO"))])),
            (
                ResponseError::InvalidRequest,
                "APPEND operation is not allowed for the BROKER_LOGGER resource".into()
            )
        );
        assert_eq!(
            err(resource("1", &[("root", 3, Some("INFO"))])),
            (
                ResponseError::InvalidRequest,
                "SUBTRACT operation is not allowed for the BROKER_LOGGER resource".into()
            )
        );
        assert_eq!(
            err(resource("1", &[("root", 9, Some("INFO"))])),
            (
                ResponseError::InvalidRequest,
                "Unknown operation type 9 is not allowed for the BROKER_LOGGER resource".into()
            )
        );
        // A bad op anywhere means nothing is applied.
        let mixed = resource(
            "1",
            &[("openraft", 0, Some("DEBUG")), ("nope", 0, Some("INFO"))],
        );
        assert!(alter_loggers(&mixed, 1, &loggers, false).is_err());
        assert_eq!(level(&loggers, "openraft"), "INFO");
    }
}
