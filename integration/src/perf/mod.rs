//! `gregor-perf`: produce, consume and end-to-end latency load with the flags and output of
//! Kafka's `kafka-producer-perf-test.sh`, `kafka-consumer-perf-test.sh` and `EndToEndLatency`.
//!
//! The load runs on librdkafka (the `rdkafka` crate with its bundled library), the client
//! most users' applications sit on, so the figures are what those applications see rather than
//! what a purpose-built client could squeeze out.

pub mod args;
pub mod consume;
pub mod handshakes;
pub mod latency;
pub mod produce;
pub mod report;

use std::time::Duration;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rdkafka::config::ClientConfig;

/// A client configuration from the bootstrap servers and `key=value` properties (librdkafka
/// names, which for the common settings are Kafka's: `acks`, `linger.ms`, `compression.type`,
/// `enable.idempotence`, `security.protocol`, `sasl.*`).
/// `defaults` are set first, so the user's properties override them.
pub fn client_config(
    bootstrap: &str,
    defaults: &[(&str, &str)],
    props: &[String],
) -> anyhow::Result<ClientConfig> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", bootstrap);
    for (key, value) in defaults {
        config.set(*key, *value);
    }
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

/// A progress bar on stderr, drawn only when stderr is a terminal.
pub fn progress_bar(total: u64) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
    if let Ok(style) =
        ProgressStyle::with_template("{elapsed_precise} [{bar:40}] {pos}/{len} records ({per_sec})")
    {
        bar.set_style(style);
    }
    bar
}
