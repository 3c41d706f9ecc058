//! Kafka's broker and controller configuration names, and what start-up does with the keys it
//! is given: a key Gregor implements takes effect (see [`DEFINITIONS`]); a Kafka key Gregor does
//! not implement is accepted and listed in one warning; any other key is warned about with the
//! nearest known name, and start-up goes on, as Kafka's "supplied but are not used yet" does.

use std::collections::BTreeMap;

pub use gregor_actors::controller::logic::configs::kafka_keys::{is_kafka_key, KAFKA_BROKER_KEYS};

use crate::config::{NodeConfig, DEFINITIONS};

/// Whether Gregor acts on `key`.
pub fn is_implemented(key: &str) -> bool {
    // The broker-level defaults of topic configs (`log.segment.bytes`, ...) take effect as the
    // static defaults of this broker's partition logs (the log manager reads them).
    DEFINITIONS.iter().any(|d| d.name == key)
        || crate::config_security::is_implemented_listener_key(key)
        || crate::config_security::TLS_KEYS.contains(&key)
        || gregor_actors::controller::logic::configs::broker::is_log_default_key(key)
}

/// The known name (Gregor's or Kafka's) nearest to `key`, if it is near enough to be a typo:
/// at most 2 edits, or a quarter of the name's length for long names.
pub fn did_you_mean(key: &str) -> Option<&'static str> {
    let limit = (key.len() / 4).max(2);
    DEFINITIONS
        .iter()
        .map(|d| d.name)
        .chain(KAFKA_BROKER_KEYS.iter().copied())
        .map(|known| (strsim::levenshtein(key, known), known))
        .filter(|(distance, _)| *distance <= limit)
        .min()
        .map(|(_, known)| known)
}

/// Shown instead of the value of a key that may hold a credential.
pub const HIDDEN: &str = "[hidden]";

/// The value to log for `key`: [`HIDDEN`] for passwords, secrets and JAAS configs.
pub fn loggable<'a>(key: &str, value: &'a str) -> &'a str {
    let key = key.to_ascii_lowercase();
    // `ssl.keystore.key` holds an inline private key (Kafka's PASSWORD type).
    if key.contains("password")
        || key.contains("secret")
        || key.contains("sasl.jaas.config")
        || key.ends_with("ssl.keystore.key")
    {
        HIDDEN
    } else {
        value
    }
}

/// The keys a configuration was given, sorted by what start-up does with them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct KeyReport {
    /// Every given key with its value (masked where needed): the non-default configuration.
    pub given: BTreeMap<String, String>,
    /// Kafka keys Gregor accepts but does not act on.
    pub unimplemented: Vec<String>,
    /// Keys that are neither Gregor's nor Kafka's, each with the nearest known name.
    pub unknown: Vec<(String, Option<&'static str>)>,
}

impl KeyReport {
    /// Sorts the keys `config` was given.
    pub fn of(config: &NodeConfig) -> Self {
        let mut report = KeyReport::default();
        for (key, value) in &config.originals {
            report
                .given
                .insert(key.clone(), loggable(key, value).to_owned());
            if is_implemented(key) {
                continue;
            }
            if is_kafka_key(key) {
                report.unimplemented.push(key.clone());
            } else {
                report.unknown.push((key.clone(), did_you_mean(key)));
            }
        }
        report
    }

    /// Logs the version, the effective non-default configuration, the unimplemented Kafka keys
    /// (one warning) and each unknown key, and sets the config-key gauges.
    pub fn log(&self) {
        tracing::info!(version = env!("CARGO_PKG_VERSION"), "Gregor starting");
        let given: Vec<String> = self
            .given
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        tracing::info!(
            configuration = %given.join(", "),
            "effective configuration: the keys set by the operator; every other key has its default"
        );
        if !self.unimplemented.is_empty() {
            tracing::warn!(
                count = self.unimplemented.len(),
                keys = %self.unimplemented.join(", "),
                "Kafka configurations accepted but not implemented by Gregor; they have no effect"
            );
        }
        for (key, suggestion) in &self.unknown {
            match suggestion {
                Some(known) => tracing::warn!(
                    key = %key,
                    "'{key}' is not a Kafka or Gregor configuration and is not used; did you mean '{known}'?"
                ),
                None => tracing::warn!(
                    key = %key,
                    "'{key}' is not a Kafka or Gregor configuration and is not used"
                ),
            }
        }
        gregor_metrics::config_keys(self.unimplemented.len(), self.unknown.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gregors_kafka_keys_are_kafka_keys() {
        for def in DEFINITIONS {
            if !crate::config::GREGOR_KEYS.contains(&def.name) {
                assert!(
                    is_kafka_key(def.name),
                    "{} is not in the Kafka table",
                    def.name
                );
            }
        }
    }

    #[test]
    fn typos_get_the_nearest_name() {
        assert_eq!(did_you_mean("num.partitons"), Some("num.partitions"));
        assert_eq!(
            did_you_mean("log.retention.hour"),
            Some("log.retention.hours")
        );
        assert_eq!(did_you_mean("no.such.setting"), None);
    }

    #[test]
    fn credentials_are_hidden() {
        assert_eq!(loggable("ssl.keystore.password", "s3cret"), HIDDEN);
        assert_eq!(loggable("listener.name.x.sasl.jaas.config", "x"), HIDDEN);
        assert_eq!(loggable("delegation.token.secret.key", "k"), HIDDEN);
        assert_eq!(
            loggable("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----"),
            HIDDEN
        );
        assert_eq!(
            loggable(
                "listener.name.ssl.ssl.keystore.key",
                "-----BEGIN PRIVATE KEY-----"
            ),
            HIDDEN
        );
        assert_eq!(loggable("num.partitions", "3"), "3");
    }

    #[test]
    fn keys_are_sorted_by_what_start_up_does_with_them() -> Result<(), crate::config::ConfigError> {
        let overrides: Vec<String> = [
            "num.partitions=3",
            "num.io.threads=8",
            "listener.name.internal.ssl.keystore.password=pw",
            "num.partitons=2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let config = NodeConfig::load(None, &overrides)?;
        let report = KeyReport::of(&config);
        assert_eq!(
            report.given,
            BTreeMap::from([
                (
                    "listener.name.internal.ssl.keystore.password".to_owned(),
                    HIDDEN.to_owned()
                ),
                ("num.io.threads".to_owned(), "8".to_owned()),
                ("num.partitions".to_owned(), "3".to_owned()),
                ("num.partitons".to_owned(), "2".to_owned()),
            ])
        );
        assert_eq!(
            report.unimplemented,
            vec![
                "listener.name.internal.ssl.keystore.password",
                "num.io.threads"
            ]
        );
        assert_eq!(
            report.unknown,
            vec![("num.partitons".to_owned(), Some("num.partitions"))]
        );
        Ok(())
    }
}
