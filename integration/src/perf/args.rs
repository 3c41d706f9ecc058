//! Command line of `gregor-perf`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "gregor-perf",
    about = "Produce, consume and end-to-end latency load against a Kafka-compatible broker",
    after_help = "Examples:\n  gregor-perf produce --bootstrap-server 127.0.0.1:9092 --topic t \
                  --num-records 1000000 --record-size 1024 --throughput -1 --producer-props acks=1\n  \
                  gregor-perf consume --bootstrap-server 127.0.0.1:9092 --topic t --messages 1000000\n  \
                  gregor-perf latency --bootstrap-server 127.0.0.1:9092 --topic lat --num-records 10000 \
                  --producer-acks 1 --record-size 1024"
)]
pub struct PerfArgs {
    #[command(subcommand)]
    pub mode: Mode,
}

#[derive(Debug, Subcommand)]
pub enum Mode {
    /// As kafka-producer-perf-test.sh: sends records as fast as allowed and reports throughput
    /// and send-to-acknowledgement latency.
    Produce(ProduceArgs),
    /// As kafka-consumer-perf-test.sh: reads records in a consumer group and reports throughput.
    Consume(ConsumeArgs),
    /// As Kafka's EndToEndLatency: one record at a time, from send until a consumer reads it.
    Latency(LatencyArgs),
    /// SASL handshakes per second: new connections that authenticate (SaslHandshake, then
    /// SaslAuthenticate with PLAIN or SCRAM) and close, from several connections at once.
    Handshakes(HandshakeArgs),
}

/// What every mode shares.
#[derive(Debug, Args)]
pub struct Common {
    /// `host:port` of one or more brokers, comma-separated.
    #[arg(
        long,
        visible_alias = "bootstrap-servers",
        default_value = "127.0.0.1:9092"
    )]
    pub bootstrap_server: String,
    /// The topic to use (it must exist).
    #[arg(long)]
    pub topic: String,
    /// Also write the final figures as JSON to this file (after a complete run only).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    pub common: Common,
    /// Records to send.
    #[arg(long)]
    pub num_records: u64,
    /// Value size in bytes (one random payload, sent in every record, as Kafka's tool does).
    #[arg(long)]
    pub record_size: usize,
    /// Records per second at most; -1 for no limit.
    #[arg(long, allow_negative_numbers = true)]
    pub throughput: f64,
    /// Producer properties, `key=value` (librdkafka names; `acks`, `linger.ms`,
    /// `batch.size`, `compression.type`, `enable.idempotence` are Kafka's).
    #[arg(long, num_args = 1..)]
    pub producer_props: Vec<String>,
    /// As Kafka's tool: the first this many records are a warm-up; a steady-state summary of
    /// the records after them is printed after the complete one. It must be fewer than
    /// `--num-records`.
    #[arg(long, default_value_t = 0)]
    pub warmup_records: u64,
}

#[derive(Debug, Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub common: Common,
    /// Records to read.
    #[arg(long)]
    pub messages: u64,
    /// Consumer group (a new one per run by default, so it reads from the beginning).
    #[arg(long)]
    pub group: Option<String>,
    /// Give up after this many milliseconds without a record.
    #[arg(long, default_value_t = 10_000)]
    pub timeout: u64,
    /// Consumer properties, `key=value`.
    #[arg(long, num_args = 1..)]
    pub consumer_props: Vec<String>,
    /// Print a line per reporting interval, as Kafka's `--show-detailed-stats`.
    #[arg(long)]
    pub show_detailed_stats: bool,
    /// The interval of `--show-detailed-stats` lines (milliseconds).
    #[arg(long, default_value_t = 5_000)]
    pub reporting_interval: u64,
}

#[derive(Debug, Args)]
pub struct LatencyArgs {
    #[command(flatten)]
    pub common: Common,
    /// Round trips to measure.
    #[arg(long)]
    pub num_records: u64,
    /// `acks` of the producer: 1 or all.
    #[arg(long, default_value = "1")]
    pub producer_acks: String,
    /// Value size in bytes.
    #[arg(long, default_value_t = 100)]
    pub record_size: usize,
    /// Records per second, sent at a steady pace while the consumer reads them, instead of one
    /// record at a time (Kafka's tool): the latency under a given load. Each record carries its
    /// send time in its first 8 bytes.
    #[arg(long)]
    pub throughput: Option<u32>,
    /// Producer and consumer properties, `key=value`.
    #[arg(long, num_args = 1..)]
    pub props: Vec<String>,
}

#[derive(Debug, Args)]
pub struct HandshakeArgs {
    /// `host:port` of the SASL listener.
    #[arg(long, default_value = "127.0.0.1:9092")]
    pub bootstrap_server: String,
    /// PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
    #[arg(long, default_value = "SCRAM-SHA-512")]
    pub mechanism: String,
    #[arg(long)]
    pub username: String,
    #[arg(long)]
    pub password: String,
    /// Connections authenticating at the same time.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// How long to run, in seconds.
    #[arg(long, default_value_t = 10)]
    pub duration: u64,
    /// The node's process id: the report then gives the node's CPU time per handshake (from
    /// /proc), which the client's own PBKDF2 work does not blur.
    #[arg(long)]
    pub pid: Option<u32>,
    /// Also write the final figures as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Bytes at the start of each paced latency record that hold its send time.
pub const SEND_TIME_BYTES: usize = 8;

impl PerfArgs {
    /// Checks what clap cannot: sizes and counts that make a run.
    pub fn validate(&self) -> anyhow::Result<()> {
        match &self.mode {
            Mode::Produce(args) => {
                // ProducerPerformance's own messages.
                anyhow::ensure!(
                    args.num_records > 0,
                    "--num-records should be greater than zero"
                );
                anyhow::ensure!(
                    args.record_size > 0,
                    "--record-size should be greater than zero"
                );
                anyhow::ensure!(
                    !args.producer_props.is_empty(),
                    "Either --producer-props or --producer.config must be specified."
                );
                anyhow::ensure!(
                    args.throughput == -1.0 || args.throughput > 0.0,
                    "--throughput must be positive, or -1 for no limit"
                );
            }
            Mode::Consume(args) => {
                anyhow::ensure!(args.messages > 0, "--messages must be at least 1");
            }
            Mode::Latency(args) => {
                anyhow::ensure!(args.num_records > 0, "--num-records must be at least 1");
                anyhow::ensure!(
                    matches!(args.producer_acks.as_str(), "1" | "all" | "-1"),
                    "--producer-acks must be 1 or all"
                );
                anyhow::ensure!(
                    args.throughput != Some(0),
                    "--throughput must be at least 1 record per second"
                );
                anyhow::ensure!(
                    args.throughput.is_none() || args.record_size >= SEND_TIME_BYTES,
                    "--record-size must be at least {SEND_TIME_BYTES} with --throughput (the send time)"
                );
            }
            Mode::Handshakes(args) => {
                anyhow::ensure!(args.concurrency > 0, "--concurrency must be at least 1");
                anyhow::ensure!(args.duration > 0, "--duration must be at least 1");
                anyhow::ensure!(
                    gregor_node::config::SaslMechanism::from_name(&args.mechanism).is_some(),
                    "--mechanism must be PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"
                );
            }
        }
        Ok(())
    }

    /// Where the JSON report goes, if anywhere.
    pub fn json(&self) -> Option<&PathBuf> {
        match &self.mode {
            Mode::Produce(args) => args.common.json.as_ref(),
            Mode::Consume(args) => args.common.json.as_ref(),
            Mode::Latency(args) => args.common.json.as_ref(),
            Mode::Handshakes(args) => args.json.as_ref(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(line: &str) -> String {
        let args =
            PerfArgs::try_parse_from(line.split_whitespace()).unwrap_or_else(|e| panic!("{e}"));
        args.validate()
            .err()
            .map_or_else(String::new, |e| e.to_string())
    }

    #[test]
    fn produce_is_refused_as_producer_performance_refuses_it() {
        let base = "gregor-perf produce --topic t --num-records 10 --throughput -1";
        assert_eq!(
            refusal(&format!("{base} --record-size 0 --producer-props acks=1")),
            "--record-size should be greater than zero"
        );
        assert_eq!(
            refusal(&format!("{base} --record-size 10")),
            "Either --producer-props or --producer.config must be specified."
        );
        assert_eq!(
            refusal(&format!("{base} --record-size 10 --producer-props acks=1")),
            ""
        );
    }
}
