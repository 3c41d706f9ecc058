//! Dynamic configs of every resource kind (KIP-1142 / Kafka's `ConfigurationControlManager`):
//! the definitions Gregor accepts per resource type, their validation with Kafka's codes and
//! messages, and the IncrementalAlterConfigs / AlterConfigs decisions (`alter`).
//!
//! ```text
//!   handler ──(request minus BROKER_LOGGER)──▶ Controller ──▶ alter::incremental_alter_configs
//!                                                                │ per resource: ops → new map
//!                                                                │ → validate(type) → records
//!                                                                ▼
//!                          ControllerResult { ConfigRecords (none if validate_only), response }
//! ```
//!
//! Every resource is decided on its own: a bad resource gets its error and never blocks the
//! good ones of the same request.

pub mod alter;
pub mod broker;
pub mod client_metrics;
pub mod group;
pub mod kafka_keys;
pub mod listed;
#[cfg(test)]
pub(crate) mod testing;

use kafka_protocol::error::ResponseError;

pub use alter::{
    alter_configs, incremental_alter_configs, precheck_incremental, precheck_legacy, ConfigRules,
    Precheck,
};
pub use listed::{
    alter_listed_configs, ConfigResource, DecidedAgainst, ListedConfigDecision,
    ListedConfigResources, Route,
};

/// `ConfigResource.Type` ids on the wire.
pub mod resource_type {
    /// UNKNOWN.
    pub const UNKNOWN: i8 = 0;
    /// TOPIC.
    pub const TOPIC: i8 = 2;
    /// BROKER (name = node id, or "" for the cluster-wide default).
    pub const BROKER: i8 = 4;
    /// BROKER_LOGGER (name = node id); never persisted.
    pub const BROKER_LOGGER: i8 = 8;
    /// CLIENT_METRICS (name = subscription name).
    pub const CLIENT_METRICS: i8 = 16;
    /// GROUP (name = group id; the group need not exist).
    pub const GROUP: i8 = 32;

    /// Kafka's `ConfigResource.Type` name of an id, as used in messages.
    pub fn name(id: i8) -> &'static str {
        match id {
            TOPIC => "TOPIC",
            BROKER => "BROKER",
            BROKER_LOGGER => "BROKER_LOGGER",
            CLIENT_METRICS => "CLIENT_METRICS",
            GROUP => "GROUP",
            _ => "UNKNOWN",
        }
    }
}

/// `DescribeConfigsResponse.ConfigSource` wire ids.
pub mod config_source {
    /// A per-topic override (admin name DYNAMIC_TOPIC_CONFIG).
    pub const TOPIC_CONFIG: i8 = 1;
    /// A per-broker dynamic config.
    pub const DYNAMIC_BROKER_CONFIG: i8 = 2;
    /// The cluster-wide dynamic default (BROKER "").
    pub const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
    /// From the node's properties file / overrides.
    pub const STATIC_BROKER_CONFIG: i8 = 4;
    /// The definition's default.
    pub const DEFAULT_CONFIG: i8 = 5;
    /// A logger level.
    pub const DYNAMIC_BROKER_LOGGER_CONFIG: i8 = 6;
    /// A client-metrics subscription key.
    pub const CLIENT_METRICS_CONFIG: i8 = 7;
    /// A group override (admin name DYNAMIC_GROUP_CONFIG).
    pub const GROUP_CONFIG: i8 = 8;
}

/// `AlterConfigOp.OpType` wire ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpType {
    /// Set the value.
    Set,
    /// Remove the key (back to the default).
    Delete,
    /// Add elements to a LIST value.
    Append,
    /// Remove elements from a LIST value.
    Subtract,
}

impl OpType {
    /// The op of a wire id.
    pub fn from_id(id: i8) -> Option<Self> {
        match id {
            0 => Some(OpType::Set),
            1 => Some(OpType::Delete),
            2 => Some(OpType::Append),
            3 => Some(OpType::Subtract),
            _ => None,
        }
    }

    /// Kafka's enum name, as it appears in messages.
    pub fn name(self) -> &'static str {
        match self {
            OpType::Set => "SET",
            OpType::Delete => "DELETE",
            OpType::Append => "APPEND",
            OpType::Subtract => "SUBTRACT",
        }
    }
}

/// A per-resource failure: Kafka's code and the message sent with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The error code.
    pub code: ResponseError,
    /// The `error_message` (`None` = null on the wire).
    pub message: Option<String>,
}

impl ApiError {
    /// INVALID_REQUEST with `message`.
    pub fn invalid_request(message: impl Into<String>) -> Self {
        ApiError {
            code: ResponseError::InvalidRequest,
            message: Some(message.into()),
        }
    }

    /// INVALID_CONFIG with `message`.
    pub fn invalid_config(message: impl Into<String>) -> Self {
        ApiError {
            code: ResponseError::InvalidConfig,
            message: Some(message.into()),
        }
    }

    /// `code` with `message`.
    pub fn new(code: ResponseError, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: Some(message.into()),
        }
    }
}
