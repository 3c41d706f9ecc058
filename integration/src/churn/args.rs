//! Command-line options of `gregor-churn`, parsed with clap and checked once before any
//! connection is made, so a typo costs a message, not a ten-minute run.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Parser;
use serde::Serialize;

/// Relative weights of the three mutations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mix {
    /// CreateTopics of one new topic.
    pub create: u32,
    /// CreatePartitions growing one live topic.
    pub add_partitions: u32,
    /// DeleteTopics of one live topic.
    pub delete: u32,
}

impl Mix {
    /// Sum of the weights.
    pub fn total(&self) -> u32 {
        self.create + self.add_partitions + self.delete
    }
}

/// Parses `CREATE:ADD:DELETE`, e.g. `40:20:40`.
pub fn parse_mix(s: &str) -> Result<Mix, String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 3 {
        return Err(format!(
            "expected CREATE:ADD_PARTITIONS:DELETE weights such as 40:20:40, got {s:?}"
        ));
    }
    let mut w = [0u32; 3];
    for (slot, part) in w.iter_mut().zip(&parts) {
        *slot = part
            .trim()
            .parse()
            .map_err(|_| format!("weight {part:?} in {s:?} is not a non-negative integer"))?;
    }
    let mix = Mix {
        create: w[0],
        add_partitions: w[1],
        delete: w[2],
    };
    if mix.total() == 0 {
        return Err(format!("mix {s:?} has no non-zero weight"));
    }
    Ok(mix)
}

/// Parses `500ms`, `10s`, `5m`, `1h` or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (number, unit) = match s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{s:?} is not a duration such as 500ms, 30s, 10m"))?;
    let secs = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => {
            return Err(format!(
                "unknown unit {unit:?} in {s:?} (use ms, s, m or h)"
            ))
        }
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("{s:?} is not a valid duration"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// `gregor-churn`: synthetic partition churn against any Kafka-compatible broker.
#[derive(Debug, Clone, Parser, Serialize)]
#[command(
    name = "gregor-churn",
    version,
    about = "Synthetic partition churn against a Kafka-compatible broker: topics created, grown \
             and deleted at a target rate while optional readers ask for metadata.",
    after_help = "Example: gregor-churn -b 127.0.0.1:9092 --live-partitions 100000 \
                  --partitions-per-topic 10 --concurrency 8 --duration 60s --json out.json"
)]
pub struct ChurnArgs {
    /// Comma-separated `host:port` list. Mutations go to the first that answers; the
    /// propagation probe uses the next one when there is one (another broker of the cluster).
    #[arg(
        short = 'b',
        long,
        visible_alias = "bootstrap-server",
        value_delimiter = ',',
        default_value = "127.0.0.1:9092"
    )]
    pub bootstrap_servers: Vec<String>,

    /// Target mutations per second over all connections; 0 = as fast as the broker answers.
    #[arg(long, default_value_t = 0.0)]
    pub rate: f64,

    /// Weights `CREATE:ADD_PARTITIONS:DELETE` of the operation mix.
    #[arg(long, default_value = "40:20:40", value_parser = parse_mix)]
    pub mix: Mix,

    /// Partitions of each created topic.
    #[arg(long, default_value_t = 1)]
    pub partitions_per_topic: i32,

    /// Partitions added by one add-partitions operation.
    #[arg(long, default_value_t = 1)]
    pub add_partitions: i32,

    /// Replication factor of created topics.
    #[arg(long, default_value_t = 1)]
    pub replication_factor: i16,

    /// Live partitions to hold steady: filled before the measured phase (unless --no-fill),
    /// then creates and deletes are steered to stay near it.
    #[arg(long, default_value_t = 1000)]
    pub live_partitions: u64,

    /// Skip the fill phase: start measuring at once and let the mix move towards the target.
    #[arg(long)]
    pub no_fill: bool,

    /// Topics per CreateTopics request in the fill phase.
    #[arg(long, default_value_t = 50)]
    pub fill_batch: usize,

    /// Connections issuing mutations (one request in flight on each).
    #[arg(short = 'c', long, default_value_t = 4)]
    pub concurrency: usize,

    /// Length of the measured phase (`30s`, `10m`). Default 10s when --ops is not given.
    #[arg(short = 'd', long, value_parser = parse_duration)]
    pub duration: Option<Duration>,

    /// Number of mutations of the measured phase (stops at whichever of --ops and --duration
    /// comes first).
    #[arg(short = 'n', long)]
    pub ops: Option<u64>,

    /// Extra connections that ask for the metadata of one random live topic in a loop.
    #[arg(long, default_value_t = 0)]
    pub metadata_readers: usize,

    /// Client id sent in request headers (quota entity).
    #[arg(long, default_value = "gregor-churn")]
    pub client_id: String,

    /// Spread connections over this many client ids (`ID-0` .. `ID-{N-1}`) to load several quota
    /// entities; 1 = every connection uses --client-id as given.
    #[arg(long, default_value_t = 1)]
    pub client_ids: usize,

    /// Send the next request at once even when a response carried `throttle_time_ms`
    /// (a well-behaved client waits it out, KIP-219).
    #[arg(long)]
    pub ignore_throttle: bool,

    /// CreateTopics version to send (v6+ gets THROTTLING_QUOTA_EXCEEDED when over a quota,
    /// older versions are throttled after the fact); default: the highest both sides know.
    #[arg(long)]
    pub create_topics_version: Option<i16>,

    /// Seed of the operation choices (a random one is used and reported when absent).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Prefix of created topic names (default `churn-<seed>-<random>`).
    #[arg(long)]
    pub topic_prefix: Option<String>,

    /// Leave the topics in place at the end instead of deleting them.
    #[arg(long)]
    pub keep_topics: bool,

    /// How long to wait for one response.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub request_timeout: Duration,

    /// Write the whole report as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,

    /// Draw throughput and latency over time into this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,

    /// The broker's Prometheus endpoint (`http://host:port/metrics`): scraped before and after
    /// for broker-side request counts and `process_resident_memory_bytes`.
    #[arg(long)]
    pub metrics_url: Option<String>,

    /// With --metrics-url: also sample the broker's resident memory at this interval (soak).
    #[arg(long, value_parser = parse_duration)]
    pub rss_interval: Option<Duration>,

    /// After the run, measure a plain tokio TCP echo with the run's mean frame sizes on the same
    /// number of connections, and report churn throughput as a fraction of it.
    #[arg(long)]
    pub echo_baseline: bool,

    /// Length of the echo baseline.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub echo_duration: Duration,

    /// No progress bar (it is also hidden when stderr is not a terminal).
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

/// Where and how to scrape the broker's metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetricsTarget {
    /// `host:port`.
    pub addr: String,
    /// Path with query, e.g. `/metrics`.
    pub path: String,
}

/// Parses `http://host:port/path` (only plain HTTP: the node's exporter speaks nothing else).
pub fn parse_metrics_url(url: &str) -> anyhow::Result<MetricsTarget> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("--metrics-url {url:?} must start with http://"))?;
    let (addr, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/metrics"),
    };
    check_host_port(addr).with_context(|| format!("--metrics-url {url:?}"))?;
    Ok(MetricsTarget {
        addr: addr.to_string(),
        path: path.to_string(),
    })
}

fn check_host_port(addr: &str) -> anyhow::Result<()> {
    let (host, port) = addr
        .rsplit_once(':')
        .with_context(|| format!("{addr:?} is not host:port"))?;
    if host.is_empty() {
        bail!("{addr:?} has no host");
    }
    port.parse::<u16>()
        .ok()
        .filter(|p| *p != 0)
        .with_context(|| format!("{addr:?} has no valid port"))?;
    Ok(())
}

impl ChurnArgs {
    /// Checks what clap cannot: ranges and combinations. Returns one message naming the option.
    pub fn validate(&self) -> anyhow::Result<()> {
        if self.bootstrap_servers.is_empty() {
            bail!("--bootstrap-servers: give at least one host:port");
        }
        for server in &self.bootstrap_servers {
            check_host_port(server).with_context(|| format!("--bootstrap-servers {server:?}"))?;
        }
        if !self.rate.is_finite() || self.rate < 0.0 {
            bail!("--rate must be a non-negative number, got {}", self.rate);
        }
        if self.partitions_per_topic < 1 {
            bail!("--partitions-per-topic must be at least 1");
        }
        if self.add_partitions < 1 {
            bail!("--add-partitions must be at least 1");
        }
        if self.replication_factor < 1 {
            bail!("--replication-factor must be at least 1");
        }
        if self.concurrency < 1 || self.concurrency > 10_000 {
            bail!("--concurrency must be between 1 and 10000");
        }
        if self.metadata_readers > 10_000 {
            bail!("--metadata-readers must be at most 10000");
        }
        if self.fill_batch < 1 {
            bail!("--fill-batch must be at least 1");
        }
        if self.client_ids < 1 {
            bail!("--client-ids must be at least 1");
        }
        if self.ops == Some(0) {
            bail!("--ops must be at least 1");
        }
        if self.duration == Some(Duration::ZERO) {
            bail!("--duration must be longer than zero");
        }
        if self.request_timeout.is_zero() {
            bail!("--request-timeout must be longer than zero");
        }
        if let Some(v) = self.create_topics_version {
            if v < 0 {
                bail!("--create-topics-version must be non-negative");
            }
        }
        if let Some(url) = &self.metrics_url {
            parse_metrics_url(url)?;
        }
        if self.rss_interval.is_some() && self.metrics_url.is_none() {
            bail!(
                "--rss-interval needs --metrics-url (the memory is read from the broker's metrics)"
            );
        }
        if self.rss_interval == Some(Duration::ZERO) {
            bail!("--rss-interval must be longer than zero");
        }
        if self.echo_duration.is_zero() {
            bail!("--echo-duration must be longer than zero");
        }
        if let Some(prefix) = &self.topic_prefix {
            if prefix.is_empty()
                || !prefix
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
            {
                bail!("--topic-prefix {prefix:?} must be non-empty and use only [a-zA-Z0-9._-]");
            }
        }
        Ok(())
    }

    /// The measured phase's length when neither --duration nor --ops was given.
    pub fn effective_duration(&self) -> Option<Duration> {
        match (self.duration, self.ops) {
            (None, None) => Some(Duration::from_secs(10)),
            (d, _) => d,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn parses_mix_and_durations() {
        assert_eq!(
            parse_mix("40:20:40").unwrap(),
            Mix {
                create: 40,
                add_partitions: 20,
                delete: 40
            }
        );
        assert!(parse_mix("1:2").is_err());
        assert!(parse_mix("0:0:0").is_err());
        assert!(parse_mix("a:1:1").is_err());
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("2m").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert!(parse_duration("3 parsecs").is_err());
    }

    #[test]
    fn validates_ranges_and_urls() {
        let ok = ChurnArgs::try_parse_from(["gregor-churn", "-b", "127.0.0.1:9092"]).unwrap();
        ok.validate().unwrap();
        assert_eq!(ok.effective_duration(), Some(Duration::from_secs(10)));
        // Like every other Gregor tool, `--bootstrap-server` names the brokers.
        let long = ChurnArgs::try_parse_from([
            "gregor-churn",
            "--bootstrap-server",
            "127.0.0.1:9092,127.0.0.1:9093",
        ])
        .unwrap();
        assert_eq!(long.bootstrap_servers, ["127.0.0.1:9092", "127.0.0.1:9093"]);
        let bad = ChurnArgs::try_parse_from(["gregor-churn", "-b", "nohost"]).unwrap();
        assert!(bad.validate().is_err());
        let bad = ChurnArgs::try_parse_from(["gregor-churn", "--concurrency", "0"]).unwrap();
        assert!(bad.validate().is_err());
        assert_eq!(
            parse_metrics_url("http://127.0.0.1:9644/metrics").unwrap(),
            MetricsTarget {
                addr: "127.0.0.1:9644".into(),
                path: "/metrics".into()
            }
        );
        assert!(parse_metrics_url("https://x:1/metrics").is_err());
    }
}
