//! Group configs (Kafka's `GroupConfig`): what `--entity-type groups` may set. Groups need not
//! exist to carry them.
//!
//! A key a group does not set takes the broker's `group.*` value (Kafka's
//! `GroupCoordinatorConfig.extractGroupConfigMap`), and each value is checked against the
//! broker's `group.*` bounds; the messages name the broker config a person would change.

use std::collections::BTreeMap;

use super::super::topic_configs::{
    at_least, check_value, def, parse_value, ConfigType, ConfigValue, TopicConfigDef, Validator,
};
use super::ApiError;

/// `consumer.session.timeout.ms`.
pub const CONSUMER_SESSION_TIMEOUT_MS: &str = "consumer.session.timeout.ms";
/// `consumer.heartbeat.interval.ms`.
pub const CONSUMER_HEARTBEAT_INTERVAL_MS: &str = "consumer.heartbeat.interval.ms";
/// `share.session.timeout.ms`.
pub const SHARE_SESSION_TIMEOUT_MS: &str = "share.session.timeout.ms";
/// `share.heartbeat.interval.ms`.
pub const SHARE_HEARTBEAT_INTERVAL_MS: &str = "share.heartbeat.interval.ms";
/// `share.record.lock.duration.ms`.
pub const SHARE_RECORD_LOCK_DURATION_MS: &str = "share.record.lock.duration.ms";
/// `share.auto.offset.reset`.
pub const SHARE_AUTO_OFFSET_RESET: &str = "share.auto.offset.reset";

/// Every group config, sorted by name; defaults are Kafka's broker-level defaults.
#[rustfmt::skip]
pub const GROUP_CONFIGS: &[TopicConfigDef] = &[
    def(CONSUMER_HEARTBEAT_INTERVAL_MS, ConfigType::Int, "5000", at_least(1),
        "The heartbeat interval given to the members of a consumer group."),
    def(CONSUMER_SESSION_TIMEOUT_MS, ConfigType::Int, "45000", at_least(1),
        "The timeout to detect client failures when using the consumer group protocol."),
    def(SHARE_AUTO_OFFSET_RESET, ConfigType::String, "latest", Validator::OneOf(&["latest", "earliest"]),
        "Where a share group starts consuming when it has no committed offset."),
    def(SHARE_HEARTBEAT_INTERVAL_MS, ConfigType::Int, "5000", at_least(1),
        "The heartbeat interval given to the members of a share group."),
    def(SHARE_RECORD_LOCK_DURATION_MS, ConfigType::Int, "30000", at_least(1000),
        "The record acquisition lock duration of a share group."),
    def(SHARE_SESSION_TIMEOUT_MS, ConfigType::Int, "45000", at_least(1),
        "The timeout to detect client failures when using the share group protocol."),
];

/// The broker's `group.consumer.*` values a group config takes where the group sets none
/// (Kafka's `extractConsumerGroupConfigMap`); the default is Kafka's defaults. The `share.*`
/// keys take Kafka's defaults of their `group.share.*` broker configs, which Gregor has no
/// setting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupConfigDefaults {
    /// `group.consumer.session.timeout.ms`.
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.heartbeat.interval.ms`.
    pub consumer_heartbeat_interval_ms: i32,
}

impl Default for GroupConfigDefaults {
    fn default() -> Self {
        GroupConfigDefaults {
            consumer_session_timeout_ms: 45000,
            consumer_heartbeat_interval_ms: 5000,
        }
    }
}

impl GroupConfigDefaults {
    /// The value of `def` for a group that does not set it (`GroupConfig.fromProps`).
    pub fn value_of(&self, def: &TopicConfigDef) -> String {
        match def.name {
            CONSUMER_SESSION_TIMEOUT_MS => self.consumer_session_timeout_ms.to_string(),
            CONSUMER_HEARTBEAT_INTERVAL_MS => self.consumer_heartbeat_interval_ms.to_string(),
            _ => def.default.to_owned(),
        }
    }
}

/// The broker-config bounds one key is checked against: (min, min config, max, max config).
struct Bounds {
    key: &'static str,
    min: i32,
    min_config: &'static str,
    max: i32,
    max_config: &'static str,
}

/// The broker's `group.consumer.*` / `group.share.*` bounds that group configs must stay
/// within; the default is Kafka's defaults. The controller checks with its own node's settings,
/// as Kafka's controller validates with its `GroupCoordinatorConfig`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupConfigBounds {
    /// `group.consumer.{min,max}.heartbeat.interval.ms`.
    pub consumer_heartbeat_interval_ms: (i32, i32),
    /// `group.consumer.{min,max}.session.timeout.ms`.
    pub consumer_session_timeout_ms: (i32, i32),
    /// `group.share.{min,max}.heartbeat.interval.ms`.
    pub share_heartbeat_interval_ms: (i32, i32),
    /// `group.share.{min,max}.session.timeout.ms`.
    pub share_session_timeout_ms: (i32, i32),
    /// `group.share.{min,max}.record.lock.duration.ms`.
    pub share_record_lock_duration_ms: (i32, i32),
}

impl Default for GroupConfigBounds {
    fn default() -> Self {
        GroupConfigBounds {
            consumer_heartbeat_interval_ms: (5000, 15000),
            consumer_session_timeout_ms: (45000, 60000),
            share_heartbeat_interval_ms: (5000, 15000),
            share_session_timeout_ms: (45000, 60000),
            share_record_lock_duration_ms: (15000, 60000),
        }
    }
}

impl GroupConfigBounds {
    /// Each bounded key with its bounds, in Kafka's check order.
    fn checks(&self) -> [Bounds; 5] {
        let bound = |key, (min, max): (i32, i32), min_config, max_config| Bounds {
            key,
            min,
            min_config,
            max,
            max_config,
        };
        [
            bound(
                CONSUMER_HEARTBEAT_INTERVAL_MS,
                self.consumer_heartbeat_interval_ms,
                "group.consumer.min.heartbeat.interval.ms",
                "group.consumer.max.heartbeat.interval.ms",
            ),
            bound(
                CONSUMER_SESSION_TIMEOUT_MS,
                self.consumer_session_timeout_ms,
                "group.consumer.min.session.timeout.ms",
                "group.consumer.max.session.timeout.ms",
            ),
            bound(
                SHARE_HEARTBEAT_INTERVAL_MS,
                self.share_heartbeat_interval_ms,
                "group.share.min.heartbeat.interval.ms",
                "group.share.max.heartbeat.interval.ms",
            ),
            bound(
                SHARE_SESSION_TIMEOUT_MS,
                self.share_session_timeout_ms,
                "group.share.min.session.timeout.ms",
                "group.share.max.session.timeout.ms",
            ),
            bound(
                SHARE_RECORD_LOCK_DURATION_MS,
                self.share_record_lock_duration_ms,
                "group.share.min.record.lock.duration.ms",
                "group.share.max.record.lock.duration.ms",
            ),
        ]
    }
}

/// The definition of a group config key.
pub fn group_config(name: &str) -> Option<&'static TopicConfigDef> {
    GROUP_CONFIGS.iter().find(|def| def.name == name)
}

/// The broker config a group key defaults from (`group.` + key), Kafka's synonym name.
pub fn broker_synonym(name: &str) -> String {
    format!("group.{name}")
}

/// Validates the whole override set a group would have after a change
/// (`GroupConfigManager.validate`): names, then values parsed over the broker's `defaults`,
/// then the broker `bounds`, then session timeouts above heartbeat intervals. Every failure is
/// INVALID_CONFIG.
pub fn validate(
    configs: &BTreeMap<String, String>,
    defaults: &GroupConfigDefaults,
    bounds: &GroupConfigBounds,
) -> Result<(), ApiError> {
    for name in configs.keys() {
        if group_config(name).is_none() {
            return Err(ApiError::invalid_config(format!(
                "Unknown group config name: {name}"
            )));
        }
    }
    let mut ints: BTreeMap<&str, i32> = BTreeMap::new();
    for def in GROUP_CONFIGS {
        let raw = configs
            .get(def.name)
            .cloned()
            .unwrap_or_else(|| defaults.value_of(def));
        let value = parse_value(def, &raw).map_err(|e| ApiError::invalid_config(e.to_string()))?;
        check_value(def, &value).map_err(|e| ApiError::invalid_config(e.to_string()))?;
        if let ConfigValue::Int(v) = value {
            ints.insert(def.name, v);
        }
    }
    let get = |key: &str| ints.get(key).copied().unwrap_or_default();
    for bound in bounds.checks() {
        let value = get(bound.key);
        if value < bound.min {
            return Err(ApiError::invalid_config(format!(
                "{} must be greater than or equal to {}",
                bound.key, bound.min_config
            )));
        }
        if value > bound.max {
            return Err(ApiError::invalid_config(format!(
                "{} must be less than or equal to {}",
                bound.key, bound.max_config
            )));
        }
    }
    for (session, heartbeat) in [
        (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
        (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS),
    ] {
        if get(session) <= get(heartbeat) {
            return Err(ApiError::invalid_config(format!(
                "{session} must be greater than {heartbeat}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;
    use kafka_protocol::error::ResponseError;

    fn check(pairs: &[(&str, &str)]) -> Result<(), String> {
        check_within(pairs, &GroupConfigBounds::default())
    }

    fn check_within(pairs: &[(&str, &str)], bounds: &GroupConfigBounds) -> Result<(), String> {
        check_with(pairs, &GroupConfigDefaults::default(), bounds)
    }

    fn check_with(
        pairs: &[(&str, &str)],
        defaults: &GroupConfigDefaults,
        bounds: &GroupConfigBounds,
    ) -> Result<(), String> {
        let map = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        validate(&map, defaults, bounds).map_err(|e| {
            assert_eq!(e.code, ResponseError::InvalidConfig);
            e.message.unwrap_or_default()
        })
    }

    #[test]
    fn the_nodes_own_bounds_apply() {
        let wider = GroupConfigBounds {
            consumer_session_timeout_ms: (10_000, 120_000),
            ..GroupConfigBounds::default()
        };
        // Outside Kafka's default bounds, inside the node's.
        assert_eq!(
            check_within(&[(CONSUMER_SESSION_TIMEOUT_MS, "100000")], &wider),
            Ok(())
        );
        assert_eq!(
            check_within(&[(CONSUMER_SESSION_TIMEOUT_MS, "120001")], &wider),
            Err("consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms".into())
        );
        assert!(check(&[(CONSUMER_SESSION_TIMEOUT_MS, "100000")]).is_err());
    }

    /// A key the group does not set is checked at the broker's value, not Kafka's default:
    /// with bounds that exclude 45000 / 5000, another key's change and the deletion of an
    /// override still pass (GroupConfigManager.validate puts the broker's values first).
    #[test]
    fn unset_keys_take_the_brokers_values() {
        let bounds = GroupConfigBounds {
            consumer_session_timeout_ms: (10_000, 20_000),
            consumer_heartbeat_interval_ms: (1000, 15_000),
            ..GroupConfigBounds::default()
        };
        let defaults = GroupConfigDefaults {
            consumer_session_timeout_ms: 12_000,
            consumer_heartbeat_interval_ms: 2000,
        };
        assert_eq!(check_with(&[], &defaults, &bounds), Ok(()));
        assert_eq!(
            check_with(
                &[(CONSUMER_HEARTBEAT_INTERVAL_MS, "3000")],
                &defaults,
                &bounds
            ),
            Ok(())
        );
        assert_eq!(
            check_with(
                &[(CONSUMER_SESSION_TIMEOUT_MS, "15000")],
                &defaults,
                &bounds
            ),
            Ok(())
        );
        // The heartbeat interval set is compared with the broker's session timeout, 12000.
        assert_eq!(
            check_with(
                &[(CONSUMER_HEARTBEAT_INTERVAL_MS, "12000")],
                &defaults,
                &bounds
            ),
            Err(
                "consumer.session.timeout.ms must be greater than consumer.heartbeat.interval.ms"
                    .into()
            )
        );
        assert_eq!(
            check_with(
                &[(CONSUMER_HEARTBEAT_INTERVAL_MS, "11999")],
                &defaults,
                &bounds
            ),
            Ok(())
        );
        // Kafka's defaults would have been refused by these bounds.
        assert_eq!(
            check_within(&[(CONSUMER_HEARTBEAT_INTERVAL_MS, "3000")], &bounds),
            Err("consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms".into())
        );
        let defaulted = |name| {
            let def = group_config(name).expect("a group config");
            defaults.value_of(def)
        };
        assert_eq!(defaulted(CONSUMER_SESSION_TIMEOUT_MS), "12000");
        assert_eq!(defaulted(CONSUMER_HEARTBEAT_INTERVAL_MS), "2000");
        assert_eq!(defaulted(SHARE_SESSION_TIMEOUT_MS), "45000");
        assert_eq!(defaulted(SHARE_AUTO_OFFSET_RESET), "latest");
    }

    #[test]
    fn defaults_and_boundaries_pass() {
        assert_eq!(check(&[]), Ok(()));
        for (key, value) in [
            (CONSUMER_HEARTBEAT_INTERVAL_MS, "5000"),
            (CONSUMER_HEARTBEAT_INTERVAL_MS, "15000"),
            (CONSUMER_SESSION_TIMEOUT_MS, "45000"),
            (CONSUMER_SESSION_TIMEOUT_MS, "60000"),
            (SHARE_HEARTBEAT_INTERVAL_MS, "15000"),
            (SHARE_SESSION_TIMEOUT_MS, "60000"),
            (SHARE_RECORD_LOCK_DURATION_MS, "15000"),
            (SHARE_RECORD_LOCK_DURATION_MS, "60000"),
            (SHARE_AUTO_OFFSET_RESET, "earliest"),
        ] {
            assert_eq!(check(&[(key, value)]), Ok(()), "{key}={value}");
        }
    }

    #[test]
    fn bounds_one_past_each_edge_fail_with_kafkas_messages() {
        assert_eq!(
            check(&[(CONSUMER_HEARTBEAT_INTERVAL_MS, "4999")]),
            Err("consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms".into())
        );
        assert_eq!(
            check(&[(CONSUMER_HEARTBEAT_INTERVAL_MS, "15001")]),
            Err("consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms".into())
        );
        assert_eq!(
            check(&[(CONSUMER_SESSION_TIMEOUT_MS, "44999")]),
            Err("consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms".into())
        );
        assert_eq!(
            check(&[(CONSUMER_SESSION_TIMEOUT_MS, "60001")]),
            Err("consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms".into())
        );
        assert_eq!(
            check(&[(SHARE_SESSION_TIMEOUT_MS, "44999")]),
            Err("share.session.timeout.ms must be greater than or equal to group.share.min.session.timeout.ms".into())
        );
        assert_eq!(
            check(&[(SHARE_HEARTBEAT_INTERVAL_MS, "15001")]),
            Err("share.heartbeat.interval.ms must be less than or equal to group.share.max.heartbeat.interval.ms".into())
        );
        assert_eq!(
            check(&[(SHARE_RECORD_LOCK_DURATION_MS, "14999")]),
            Err("share.record.lock.duration.ms must be greater than or equal to group.share.min.record.lock.duration.ms".into())
        );
        // The static validator (at least 1000) comes before the broker bounds.
        assert_eq!(
            check(&[(SHARE_RECORD_LOCK_DURATION_MS, "999")]),
            Err("Invalid value 999 for configuration share.record.lock.duration.ms: Value must be at least 1000".into())
        );
        assert_eq!(
            check(&[(CONSUMER_SESSION_TIMEOUT_MS, "0")]),
            Err("Invalid value 0 for configuration consumer.session.timeout.ms: Value must be at least 1".into())
        );
    }

    #[test]
    fn names_types_and_cross_checks() {
        assert_eq!(
            check(&[("consumer.foo", "1")]),
            Err("Unknown group config name: consumer.foo".into())
        );
        assert_eq!(
            check(&[(CONSUMER_HEARTBEAT_INTERVAL_MS, "ten")]),
            Err("Invalid value ten for configuration consumer.heartbeat.interval.ms: Not a number of type INT".into())
        );
        assert_eq!(
            check(&[(SHARE_AUTO_OFFSET_RESET, "none")]),
            Err("Invalid value none for configuration share.auto.offset.reset: String must be one of: latest, earliest".into())
        );
        // Both within bounds, but the session is not above the heartbeat: impossible with the
        // default bounds ([45000, 60000] vs [5000, 15000]), so only the message order matters;
        // the check itself is exercised through the share pair at its extreme values.
        assert_eq!(
            check(&[
                (SHARE_SESSION_TIMEOUT_MS, "45000"),
                (SHARE_HEARTBEAT_INTERVAL_MS, "15000")
            ]),
            Ok(())
        );
    }
}
