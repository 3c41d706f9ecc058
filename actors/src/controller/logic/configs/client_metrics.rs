//! Client-metrics subscription configs (Kafka's `ClientMetricsConfigs`, KIP-714): `metrics`,
//! `interval.ms` and `match`. A subscription exists while it has at least one key.

use std::collections::BTreeMap;

use super::super::topic_configs::{
    parse_value, ConfigType, ConfigValue, TopicConfigDef, Validator,
};
use super::ApiError;

/// `metrics`: metric-name prefixes, `*` for all.
pub const METRICS: &str = "metrics";
/// `interval.ms`: push interval.
pub const INTERVAL_MS: &str = "interval.ms";
/// `match`: `selector=regex` entries.
pub const MATCH: &str = "match";

/// Push interval bounds (inclusive).
pub const MIN_INTERVAL_MS: i32 = 100;
/// See [`MIN_INTERVAL_MS`].
pub const MAX_INTERVAL_MS: i32 = 3_600_000;

/// The selectors a `match` entry may use.
pub const MATCH_SELECTORS: &[&str] = &[
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
];

/// The three keys in Kafka's definition order (DescribeConfigs lists them in this order).
#[rustfmt::skip]
pub const CLIENT_METRICS_CONFIGS: &[TopicConfigDef] = &[
    TopicConfigDef { name: METRICS, config_type: ConfigType::List, default: "", validator: Validator::Any, doc: "Subscription metrics list" },
    TopicConfigDef { name: INTERVAL_MS, config_type: ConfigType::Int, default: "300000", validator: Validator::Any, doc: "Push interval in milliseconds" },
    TopicConfigDef { name: MATCH, config_type: ConfigType::List, default: "", validator: Validator::Any, doc: "Client match pattern list" },
];

/// The definition of a client-metrics key.
pub fn client_metrics_config(name: &str) -> Option<&'static TopicConfigDef> {
    CLIENT_METRICS_CONFIGS.iter().find(|def| def.name == name)
}

/// Validates a subscription's keys after a change (`ClientMetricsConfigs.validate`): the name
/// must not be empty and the keys known (INVALID_REQUEST), values must parse (INVALID_CONFIG),
/// the interval must be within bounds (INVALID_REQUEST) and every match entry must be a known
/// selector with a regex that compiles (INVALID_CONFIG).
pub fn validate(subscription: &str, configs: &BTreeMap<String, String>) -> Result<(), ApiError> {
    if subscription.is_empty() {
        return Err(ApiError::invalid_request(
            "Subscription name can't be empty",
        ));
    }
    for name in configs.keys() {
        if client_metrics_config(name).is_none() {
            return Err(ApiError::invalid_request(format!(
                "Unknown client metrics configuration: {name}"
            )));
        }
    }
    let mut parsed = BTreeMap::new();
    for def in CLIENT_METRICS_CONFIGS {
        if let Some(raw) = configs.get(def.name) {
            let value =
                parse_value(def, raw).map_err(|e| ApiError::invalid_config(e.to_string()))?;
            parsed.insert(def.name, value);
        }
    }
    if let Some(ConfigValue::Int(interval)) = parsed.get(INTERVAL_MS) {
        if !(MIN_INTERVAL_MS..=MAX_INTERVAL_MS).contains(interval) {
            return Err(ApiError::invalid_request(format!(
                "Invalid value {interval} for interval.ms, interval must be between 100 and 3600000 (1 hour)"
            )));
        }
    }
    if let Some(ConfigValue::List(patterns)) = parsed.get(MATCH) {
        for pattern in patterns {
            check_match_pattern(pattern)?;
        }
    }
    Ok(())
}

/// One `selector=regex` entry. Like Java's `split("=")`, an entry with more than one '=' (or
/// none) is illegal, and trailing empty parts are dropped ("a=" has one part).
fn check_match_pattern(pattern: &str) -> Result<(), ApiError> {
    let illegal =
        || ApiError::invalid_config(format!("Illegal client matching pattern: {pattern}"));
    let mut parts: Vec<&str> = pattern.split('=').collect();
    while parts.len() > 1 && parts.last().is_some_and(|p| p.is_empty()) {
        parts.pop();
    }
    let [selector, regex] = parts.as_slice() else {
        return Err(illegal());
    };
    if !MATCH_SELECTORS.contains(&selector.trim()) {
        return Err(illegal());
    }
    // Rust's regex syntax is close to Java's for the patterns clients use; look-around and
    // back-references (which Java accepts) are refused here.
    regex::Regex::new(regex.trim()).map_err(|_| illegal())?;
    Ok(())
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;
    use kafka_protocol::error::ResponseError;

    fn check(pairs: &[(&str, &str)]) -> Result<(), (ResponseError, String)> {
        let map = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        validate("sub", &map).map_err(|e| (e.code, e.message.unwrap_or_default()))
    }

    #[test]
    fn interval_boundaries() {
        assert_eq!(check(&[(INTERVAL_MS, "100")]), Ok(()));
        assert_eq!(check(&[(INTERVAL_MS, "3600000")]), Ok(()));
        assert_eq!(
            check(&[(INTERVAL_MS, "99")]),
            Err((
                ResponseError::InvalidRequest,
                "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)".into()
            ))
        );
        assert_eq!(
            check(&[(INTERVAL_MS, "3600001")]),
            Err((
                ResponseError::InvalidRequest,
                "Invalid value 3600001 for interval.ms, interval must be between 100 and 3600000 (1 hour)".into()
            ))
        );
        assert_eq!(
            check(&[(INTERVAL_MS, "soon")]),
            Err((
                ResponseError::InvalidConfig,
                "Invalid value soon for configuration interval.ms: Not a number of type INT".into()
            ))
        );
    }

    #[test]
    fn names_and_match_patterns() {
        assert_eq!(
            check(&[("metric", "x")]),
            Err((
                ResponseError::InvalidRequest,
                "Unknown client metrics configuration: metric".into()
            ))
        );
        assert_eq!(
            check(&[
                (METRICS, "org.apache.kafka.producer., *"),
                (MATCH, "client_id=app-.*, client_software_name=kafka-python")
            ]),
            Ok(())
        );
        for bad in [
            "client_idd=x",
            "client_id",
            "client_id=a=b",
            "client_id=(unclosed",
            "=x",
        ] {
            assert_eq!(
                check(&[(MATCH, bad)]),
                Err((
                    ResponseError::InvalidConfig,
                    format!("Illegal client matching pattern: {bad}")
                )),
                "{bad}"
            );
        }
        assert_eq!(
            validate("", &BTreeMap::new()),
            Err(ApiError::invalid_request(
                "Subscription name can't be empty"
            ))
        );
    }
}
