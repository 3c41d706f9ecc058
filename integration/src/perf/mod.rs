//! `gregor-perf`: produce, consume and end-to-end latency load with the flags and output of
//! Kafka's `kafka-producer-perf-test.sh`, `kafka-consumer-perf-test.sh` and `EndToEndLatency`.
//!
//! The load runs on librdkafka (the `rdkafka` crate with its bundled library), the client
//! most users' applications sit on, so the figures are what those applications see rather than
//! what a purpose-built client could squeeze out.

pub mod args;
pub mod consume;
pub mod latency;
pub mod produce;
pub mod report;

use std::time::Duration;

use anyhow::Context as _;
use rdkafka::config::ClientConfig;

/// A client configuration from the bootstrap servers and `key=value` properties (librdkafka
/// names, which for the common settings are Kafka's: `acks`, `linger.ms`, `compression.type`,
/// `enable.idempotence`, `security.protocol`, `sasl.*`).
pub fn client_config(bootstrap: &str, props: &[String]) -> anyhow::Result<ClientConfig> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for prop in props {
        let (key, value) = prop
            .split_once('=')
            .with_context(|| format!("property {prop:?} is not key=value"))?;
        config.set(key.trim(), value.trim());
    }
    Ok(config)
}

/// Milliseconds as Kafka's tools print them.
pub fn millis(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1000.0
}

/// Megabytes (2^20 bytes) as Kafka's tools count them.
pub fn megabytes(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}
