//! The dynamic broker configs Gregor accepts (BROKER resources, per node or cluster-wide "").
//!
//! Gregor accepts the broker-level defaults of topic configs (Kafka's `DynamicLogConfig`, the
//! `ServerTopicConfigSynonyms` names such as `log.retention.ms` for `retention.ms`): they are what
//! a topic without its own override falls back to, so DescribeConfigs of a topic reports them as
//! synonyms. It accepts Kafka's connection limits (`max.connections`, `max.connections.per.ip`
//! and its overrides), which the listeners follow without a restart, and, as Kafka does, any
//! key that is not one of Kafka's (a custom config for plugins, stored as it is). Other Kafka
//! dynamic broker configs (thread pools, listeners...) act on machinery Gregor does not have
//! and are refused, as Kafka refuses a static config.

use std::collections::BTreeMap;

use super::super::topic_configs::{check_value, parse_value, topic_config, TopicConfigDef};
use super::kafka_keys::is_kafka_key;
use super::ApiError;

/// `max.connections`: connections the node's client listeners hold at once.
pub const MAX_CONNECTIONS: &str = "max.connections";
/// `max.connections.per.ip`: connections one address may hold.
pub const MAX_CONNECTIONS_PER_IP: &str = "max.connections.per.ip";
/// `max.connections.per.ip.overrides`: `host:count,...`, per-address exceptions.
pub const MAX_CONNECTIONS_PER_IP_OVERRIDES: &str = "max.connections.per.ip.overrides";

/// The connection limits Kafka's `SocketServer` reconfigures (less `max.connection.creation.rate`,
/// which Gregor does not implement), with their ConfigDef type ids (INT 3, STRING 2), defaults and
/// documentation.
pub const CONNECTION_LIMITS: &[(&str, i8, &str, &str)] = &[
    (
        MAX_CONNECTIONS,
        3,
        "2147483647",
        "The maximum number of connections the broker allows at any time on its client listeners; new ones wait to be accepted.",
    ),
    (
        MAX_CONNECTIONS_PER_IP,
        3,
        "2147483647",
        "The maximum number of connections allowed from each ip address.",
    ),
    (
        MAX_CONNECTIONS_PER_IP_OVERRIDES,
        2,
        "",
        "A comma-separated list of per-ip or hostname overrides to the default maximum number of connections, e.g. hostName:100,127.0.0.1:200",
    ),
];

/// Whether `name` is one of the [`CONNECTION_LIMITS`].
pub fn is_connection_limit(name: &str) -> bool {
    CONNECTION_LIMITS.iter().any(|(key, ..)| *key == name)
}

/// Whether `name` is a custom config: not a Kafka key, so stored for plugins as it is.
pub fn is_custom_config(name: &str) -> bool {
    !is_kafka_key(name)
}

/// A connection count as Kafka's ConfigDef reads an INT `atLeast(0)`, with its messages.
pub fn parse_connection_count(name: &str, raw: &str) -> Result<i32, String> {
    let value: i32 = raw.trim().parse().map_err(|_| {
        format!("Invalid value {raw} for configuration {name}: Not a number of type INT")
    })?;
    if value < 0 {
        return Err(format!(
            "Invalid value {value} for configuration {name}: Value must be at least 0"
        ));
    }
    Ok(value)
}

/// `max.connections.per.ip.overrides` as Kafka reads it (`Csv.parseCsvMap`, then each count as an
/// int and each host checked against `Utils.validHostPattern`): `(host, count)` pairs, hosts
/// unresolved. Errors carry Kafka's messages.
pub fn parse_per_ip_overrides(raw: &str) -> Result<Vec<(String, i32)>, String> {
    let mut overrides = Vec::new();
    if raw.is_empty() {
        return Ok(overrides);
    }
    for entry in raw.split(',').map(str::trim) {
        let (host, count) = entry.rsplit_once(':').ok_or_else(|| {
            format!(
                "Error parsing configuration property '{MAX_CONNECTIONS_PER_IP_OVERRIDES}': \
                 '{entry}' is not host:count"
            )
        })?;
        let count = count.trim();
        let count: i32 = count
            .parse()
            .map_err(|_| format!("For input string: \"{count}\""))?;
        overrides.push((host.trim().to_owned(), count));
    }
    let invalid: Vec<&str> = overrides
        .iter()
        .map(|(host, _)| host.as_str())
        .filter(|host| {
            !host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-%._:".contains(c))
        })
        .collect();
    if !invalid.is_empty() {
        return Err(format!(
            "requirement failed: {MAX_CONNECTIONS_PER_IP_OVERRIDES} contains invalid addresses : {}",
            invalid.join(",")
        ));
    }
    Ok(overrides)
}

/// Validates the connection limits among a resource's configs as Kafka's `KafkaConfig` and the
/// listeners' `validateReconfiguration` do.
fn validate_connection_limits(configs: &BTreeMap<String, String>) -> Result<(), String> {
    if let Some(raw) = configs.get(MAX_CONNECTIONS) {
        if parse_connection_count(MAX_CONNECTIONS, raw)? == 0 {
            // The listeners' check, which Kafka reports only as this.
            return Err("Invalid dynamic configuration".to_owned());
        }
    }
    let per_ip = configs
        .get(MAX_CONNECTIONS_PER_IP)
        .map(|raw| parse_connection_count(MAX_CONNECTIONS_PER_IP, raw))
        .transpose()?;
    let overrides = configs
        .get(MAX_CONNECTIONS_PER_IP_OVERRIDES)
        .map(|raw| parse_per_ip_overrides(raw))
        .transpose()?
        .unwrap_or_default();
    if per_ip == Some(0) && overrides.is_empty() {
        return Err(format!(
            "requirement failed: {MAX_CONNECTIONS_PER_IP} can be set to zero only if \
             {MAX_CONNECTIONS_PER_IP_OVERRIDES} property is set."
        ));
    }
    Ok(())
}

/// `(broker config, topic config)` pairs, sorted by broker name. Only the primary synonym is
/// accepted (Kafka also reads `log.retention.hours`/`.minutes`, `log.roll.hours`... which are
/// not dynamic in Gregor).
pub const TOPIC_SYNONYMS: &[(&str, &str)] = &[
    ("compression.gzip.level", "compression.gzip.level"),
    ("compression.lz4.level", "compression.lz4.level"),
    ("compression.type", "compression.type"),
    ("compression.zstd.level", "compression.zstd.level"),
    ("log.cleaner.delete.retention.ms", "delete.retention.ms"),
    ("log.cleaner.max.compaction.lag.ms", "max.compaction.lag.ms"),
    (
        "log.cleaner.min.cleanable.ratio",
        "min.cleanable.dirty.ratio",
    ),
    ("log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms"),
    ("log.cleanup.policy", "cleanup.policy"),
    ("log.flush.interval.messages", "flush.messages"),
    ("log.flush.interval.ms", "flush.ms"),
    ("log.index.interval.bytes", "index.interval.bytes"),
    ("log.index.size.max.bytes", "segment.index.bytes"),
    ("log.local.retention.bytes", "local.retention.bytes"),
    ("log.local.retention.ms", "local.retention.ms"),
    (
        "log.message.timestamp.after.max.ms",
        "message.timestamp.after.max.ms",
    ),
    (
        "log.message.timestamp.before.max.ms",
        "message.timestamp.before.max.ms",
    ),
    ("log.message.timestamp.type", "message.timestamp.type"),
    ("log.preallocate", "preallocate"),
    ("log.retention.bytes", "retention.bytes"),
    ("log.retention.ms", "retention.ms"),
    ("log.roll.jitter.ms", "segment.jitter.ms"),
    ("log.roll.ms", "segment.ms"),
    ("log.segment.bytes", "segment.bytes"),
    ("log.segment.delete.delay.ms", "file.delete.delay.ms"),
    ("message.max.bytes", "max.message.bytes"),
    ("min.insync.replicas", "min.insync.replicas"),
    (
        "unclean.leader.election.enable",
        "unclean.leader.election.enable",
    ),
];

/// A static broker key giving a topic config's broker default in a coarser unit (Kafka's
/// `log.retention.minutes`/`.hours`, `log.roll.hours`, `log.roll.jitter.hours`), read only when
/// the keys before it for the same topic config (its `TOPIC_SYNONYMS` key first) are unset.
#[derive(Debug, Clone, Copy)]
pub struct UnitSynonym {
    pub name: &'static str,
    pub topic_config: &'static str,
    pub unit_ms: i64,
    /// The lowest value Kafka accepts.
    pub at_least: Option<i32>,
    /// Kafka's default, if it has one.
    pub default: Option<&'static str>,
}

/// The unit synonyms, each after the ones it yields to.
pub const UNIT_SYNONYMS: &[UnitSynonym] = &[
    UnitSynonym {
        name: "log.retention.minutes",
        topic_config: "retention.ms",
        unit_ms: 60_000,
        at_least: None,
        default: None,
    },
    UnitSynonym {
        name: "log.retention.hours",
        topic_config: "retention.ms",
        unit_ms: 3_600_000,
        at_least: None,
        default: Some("168"),
    },
    UnitSynonym {
        name: "log.roll.hours",
        topic_config: "segment.ms",
        unit_ms: 3_600_000,
        at_least: Some(1),
        default: Some("168"),
    },
    UnitSynonym {
        name: "log.roll.jitter.hours",
        topic_config: "segment.jitter.ms",
        unit_ms: 3_600_000,
        at_least: Some(0),
        default: Some("0"),
    },
];

/// The unit synonym named `name`.
pub fn unit_synonym(name: &str) -> Option<&'static UnitSynonym> {
    UNIT_SYNONYMS.iter().find(|unit| unit.name == name)
}

/// Whether `name` is a broker key setting a topic config's broker default (a dynamic one, or a
/// static unit synonym).
pub fn is_log_default_key(name: &str) -> bool {
    broker_config(name).is_some() || unit_synonym(name).is_some()
}

/// The broker keys setting topic config `topic`, highest precedence first (Kafka's
/// `brokerConfigSynonyms`): its `TOPIC_SYNONYMS` key, then its unit synonyms.
pub fn broker_synonyms_of_topic_config(topic: &str) -> Vec<&'static str> {
    synonym_of_topic_config(topic)
        .into_iter()
        .chain(
            UNIT_SYNONYMS
                .iter()
                .filter(|unit| unit.topic_config == topic)
                .map(|unit| unit.name),
        )
        .collect()
}

/// The topic config a broker key sets.
pub fn topic_config_of(broker: &str) -> Option<&'static str> {
    TOPIC_SYNONYMS
        .iter()
        .find(|(name, _)| *name == broker)
        .map(|(_, topic)| *topic)
        .or_else(|| unit_synonym(broker).map(|unit| unit.topic_config))
}

/// Kafka's default of a broker key, None where Kafka has none (`log.retention.ms`: unset, so
/// `log.retention.hours` applies).
pub fn broker_default(broker: &str) -> Option<&'static str> {
    if let Some(unit) = unit_synonym(broker) {
        return unit.default;
    }
    let topic = topic_config_of(broker)?;
    if UNIT_SYNONYMS.iter().any(|unit| unit.topic_config == topic) {
        return None;
    }
    broker_config(broker).map(|def| def.default)
}

/// The topic config value a static unit synonym's value stands for, in ms (Kafka's
/// `logRetentionTimeMillis`: a negative retention is unlimited, -1); None for other keys.
/// Errors carry Kafka's messages.
pub fn unit_synonym_ms(broker: &str, raw: &str) -> Option<Result<(&'static str, i64), String>> {
    let unit = unit_synonym(broker)?;
    let name = unit.name;
    let parsed = raw.trim().parse::<i32>().map_err(|_| {
        format!("Invalid value {raw} for configuration {name}: Not a number of type INT")
    });
    Some(parsed.and_then(|value| {
        if let Some(min) = unit.at_least.filter(|min| value < *min) {
            return Err(format!(
                "Invalid value {value} for configuration {name}: Value must be at least {min}"
            ));
        }
        let ms = i64::from(value) * unit.unit_ms;
        let ms = if unit.topic_config == "retention.ms" {
            ms.max(-1)
        } else {
            ms
        };
        Ok((unit.topic_config, ms))
    }))
}

/// The topic config value a broker key's value stands for (a unit synonym's in ms; others as
/// they are).
pub fn topic_value_of(broker: &str, raw: &str) -> String {
    match unit_synonym_ms(broker, raw) {
        Some(Ok((_, ms))) => ms.to_string(),
        _ => raw.to_owned(),
    }
}

/// The definition of a dynamic broker config: its topic config's type, default and validator
/// under the broker name.
pub fn broker_config(name: &str) -> Option<TopicConfigDef> {
    let index = TOPIC_SYNONYMS
        .binary_search_by(|(broker, _)| broker.cmp(&name))
        .ok()?;
    let (broker, topic) = TOPIC_SYNONYMS.get(index)?;
    let def = topic_config(topic)?;
    Some(TopicConfigDef {
        name: broker,
        ..*def
    })
}

/// The broker synonym of a topic config, if it has one.
pub fn synonym_of_topic_config(topic: &str) -> Option<&'static str> {
    TOPIC_SYNONYMS
        .iter()
        .find(|(_, t)| *t == topic)
        .map(|(broker, _)| *broker)
}

/// Validates a broker resource's configs after a change (`DynamicBrokerConfig.validate` as the
/// broker runs it): Kafka keys Gregor cannot update are listed together (custom keys are
/// accepted), then each value must parse and pass its validator. Failures are INVALID_REQUEST, Kafka's historic choice (KAFKA-13609).
/// `plugin_configs` (the quota callback's reconfigurable keys) are accepted as they are.
pub fn validate(
    configs: &BTreeMap<String, String>,
    plugin_configs: &[String],
) -> Result<(), ApiError> {
    let refused: Vec<&str> = configs
        .keys()
        .filter(|name| {
            broker_config(name).is_none()
                && !is_connection_limit(name)
                && !is_custom_config(name)
                && !plugin_configs.contains(name)
        })
        .map(String::as_str)
        .collect();
    if !refused.is_empty() {
        return Err(ApiError::invalid_request(format!(
            "Cannot update these configs dynamically: Set({})",
            refused.join(", ")
        )));
    }
    for (name, raw) in configs {
        if let Some(def) = broker_config(name) {
            let value =
                parse_value(&def, raw).map_err(|e| ApiError::invalid_request(e.to_string()))?;
            check_value(&def, &value).map_err(|e| ApiError::invalid_request(e.to_string()))?;
        }
    }
    validate_connection_limits(configs).map_err(ApiError::invalid_request)
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;

    fn check(pairs: &[(&str, &str)]) -> Result<(), String> {
        let map = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        validate(&map, &["default.produce.quota".to_owned()])
            .map_err(|e| e.message.unwrap_or_default())
    }

    #[test]
    fn table_is_sorted_and_every_synonym_is_a_topic_config() {
        assert!(TOPIC_SYNONYMS.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(TOPIC_SYNONYMS
            .iter()
            .all(|(broker, _)| broker_config(broker).is_some()));
        assert_eq!(
            synonym_of_topic_config("retention.ms"),
            Some("log.retention.ms")
        );
        assert_eq!(
            synonym_of_topic_config("leader.replication.throttled.replicas"),
            None
        );
        let def = broker_config("log.retention.ms").unwrap();
        assert_eq!((def.name, def.default), ("log.retention.ms", "604800000"));
    }

    #[test]
    fn values_at_and_past_the_bounds() {
        assert_eq!(check(&[("log.retention.ms", "-1")]), Ok(()));
        assert_eq!(
            check(&[("log.retention.ms", "-2")]),
            Err(
                "Invalid value -2 for configuration log.retention.ms: Value must be at least -1"
                    .into()
            )
        );
        assert_eq!(check(&[("log.segment.bytes", "1048576")]), Ok(()));
        assert_eq!(
            check(&[("log.segment.bytes", "1048575")]),
            Err("Invalid value 1048575 for configuration log.segment.bytes: Value must be at least 1048576".into())
        );
        assert_eq!(check(&[("min.insync.replicas", "1")]), Ok(()));
        assert_eq!(
            check(&[("min.insync.replicas", "0")]),
            Err(
                "Invalid value 0 for configuration min.insync.replicas: Value must be at least 1"
                    .into()
            )
        );
        assert_eq!(
            check(&[("log.cleanup.policy", "compact,remove")]),
            Err("Invalid value remove for configuration log.cleanup.policy: String must be one of: compact, delete".into())
        );
    }

    #[test]
    fn the_quota_callbacks_keys_and_custom_keys_are_accepted() {
        assert_eq!(check(&[("default.produce.quota", "8000")]), Ok(()));
        // Not a Kafka key: a custom config Kafka stores for plugins.
        assert_eq!(check(&[("default.fetch.quota", "2500")]), Ok(()));
        assert_eq!(check(&[("my.plugin.setting", "x y z")]), Ok(()));
        // A listener-prefixed key is Kafka's, and Gregor does not update listeners.
        assert_eq!(
            check(&[("listener.name.plaintext.max.connections", "5")]),
            Err("Cannot update these configs dynamically: Set(listener.name.plaintext.max.connections)".into())
        );
    }

    #[test]
    fn connection_limits_with_kafkas_messages() {
        assert_eq!(check(&[("max.connections", "10")]), Ok(()));
        assert_eq!(
            check(&[("max.connections", "0")]),
            Err("Invalid dynamic configuration".into())
        );
        assert_eq!(
            check(&[("max.connections", "-1")]),
            Err(
                "Invalid value -1 for configuration max.connections: Value must be at least 0"
                    .into()
            )
        );
        assert_eq!(
            check(&[("max.connections.per.ip", "ten")]),
            Err("Invalid value ten for configuration max.connections.per.ip: Not a number of type INT".into())
        );
        assert_eq!(
            check(&[("max.connections.per.ip", "0")]),
            Err("requirement failed: max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set.".into())
        );
        assert_eq!(
            check(&[
                ("max.connections.per.ip", "0"),
                (
                    "max.connections.per.ip.overrides",
                    "127.0.0.1:5, broker-2.example:7"
                )
            ]),
            Ok(())
        );
        assert_eq!(
            parse_per_ip_overrides("127.0.0.1:5, broker-2.example:7, [::1]:3"),
            Err("requirement failed: max.connections.per.ip.overrides contains invalid addresses : [::1]".into())
        );
        assert_eq!(
            parse_per_ip_overrides("::1:3,10.0.0.1 : 4"),
            Ok(vec![("::1".to_owned(), 3), ("10.0.0.1".to_owned(), 4)])
        );
        assert_eq!(
            check(&[("max.connections.per.ip.overrides", "127.0.0.1:x")]),
            Err("For input string: \"x\"".into())
        );
        assert_eq!(
            check(&[("max.connections.per.ip.overrides", "127.0.0.1")]),
            Err("Error parsing configuration property 'max.connections.per.ip.overrides': '127.0.0.1' is not host:count".into())
        );
    }

    #[test]
    fn unknown_and_static_keys_are_refused_together() {
        assert_eq!(
            check(&[
                ("num.io.threads", "8"),
                ("log.retention.ms", "1"),
                ("broker.rack", "a")
            ]),
            Err("Cannot update these configs dynamically: Set(broker.rack, num.io.threads)".into())
        );
    }
}
