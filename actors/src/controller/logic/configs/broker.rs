//! The dynamic broker configs Gregor accepts (BROKER resources, per node or cluster-wide "").
//!
//! Gregor accepts the broker-level defaults of topic configs (Kafka's `DynamicLogConfig`, the
//! `ServerTopicConfigSynonyms` names such as `log.retention.ms` for `retention.ms`): they are what
//! a topic without its own override falls back to, so DescribeConfigs of a topic reports them as
//! synonyms. Other Kafka dynamic broker configs (thread pools, listeners, connection quotas...)
//! act on machinery Gregor does not have and are refused, as Kafka refuses a static config.

use std::collections::BTreeMap;

use super::super::topic_configs::{check_value, parse_value, topic_config, TopicConfigDef};
use super::ApiError;

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
/// broker runs it): keys Gregor cannot update are listed together, then each value must parse
/// and pass its validator. Failures are INVALID_REQUEST, Kafka's historic choice (KAFKA-13609).
/// `plugin_configs` (the quota callback's reconfigurable keys) are accepted as they are.
pub fn validate(
    configs: &BTreeMap<String, String>,
    plugin_configs: &[String],
) -> Result<(), ApiError> {
    let refused: Vec<&str> = configs
        .keys()
        .filter(|name| broker_config(name).is_none() && !plugin_configs.contains(name))
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
    Ok(())
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
    fn the_quota_callbacks_keys_are_accepted() {
        assert_eq!(check(&[("default.produce.quota", "8000")]), Ok(()));
        assert_eq!(
            check(&[("default.fetch.quota", "2500")]),
            Err("Cannot update these configs dynamically: Set(default.fetch.quota)".into())
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
