//! The end-of-run report: one serialisable value that is printed as a table, written as JSON
//! (`--json`) and drawn (`--plot`), so the three can never disagree.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::args::ChurnArgs;
use super::conn::Versions;
use super::echo::EchoResult;
use super::stats::{Op, Percentiles, Recorder, THROTTLING_QUOTA_EXCEEDED};
use crate::admin::error_name;

/// One operation's line.
#[derive(Debug, Clone, Serialize)]
pub struct OpReport {
    /// `create_topic`, `add_partitions`, `delete_topic` or `metadata`.
    pub name: String,
    /// Requests answered.
    pub requests: u64,
    /// Requests per second over the measured phase.
    pub per_s: f64,
    /// Per-topic results with a non-zero code, THROTTLING_QUOTA_EXCEEDED included.
    pub errors: u64,
    /// THROTTLING_QUOTA_EXCEEDED results.
    pub throttling_quota_exceeded: u64,
    /// Results by Kafka error name (NONE included), THROTTLING_QUOTA_EXCEEDED among them.
    pub errors_by_code: BTreeMap<String, u64>,
    /// Responses carrying `throttle_time_ms > 0`.
    pub throttled_responses: u64,
    /// Sum of `throttle_time_ms`.
    pub throttle_time_ms_total: u64,
    /// Mean request frame size.
    pub mean_request_bytes: f64,
    /// Mean response frame size.
    pub mean_response_bytes: f64,
    /// Latency from the first byte sent to the last byte received.
    pub latency: Percentiles,
}

/// One second of the run.
#[derive(Debug, Clone, Serialize)]
pub struct TimelinePoint {
    /// Seconds since the measured phase started.
    pub t_s: u64,
    /// Mutations answered in this second.
    pub mutations: u64,
    /// Error results of mutations.
    pub errors: u64,
    /// Metadata requests answered.
    pub metadata: u64,
    /// Mutation latency median.
    pub mutation_p50_us: u64,
    /// Mutation latency p99.
    pub mutation_p99_us: u64,
    /// Metadata latency p99.
    pub metadata_p99_us: u64,
    /// Live partitions as the tool counts them.
    pub live_partitions: u64,
}

/// What the fill phase did.
#[derive(Debug, Clone, Serialize)]
pub struct FillReport {
    /// Topics created.
    pub topics: u64,
    /// Partitions live at its end.
    pub live_partitions: u64,
    /// How long it took.
    pub seconds: f64,
    /// Topics per second.
    pub topics_per_s: f64,
}

/// Propagation of creates to another connection.
#[derive(Debug, Clone, Serialize)]
pub struct PropagationReport {
    /// `host:port` the probe asked.
    pub probe_broker: String,
    /// Creates sampled that showed up.
    pub seen: u64,
    /// Creates sampled that did not show up within 10 s.
    pub not_seen: u64,
    /// Delay from the CreateTopics answer to the Metadata answer listing the topic.
    pub delay: Percentiles,
}

/// One RSS sample.
#[derive(Debug, Clone, Serialize)]
pub struct RssSample {
    /// Seconds since the measured phase started.
    pub t_s: f64,
    /// `process_resident_memory_bytes`.
    pub bytes: f64,
    /// Live partitions as the tool counts them at that moment.
    pub live_partitions: u64,
}

/// What the broker's `/metrics` said.
#[derive(Debug, Clone, Serialize, Default)]
pub struct BrokerMetrics {
    /// `kafka_network_requestmetrics_requests_total` increase by request name.
    pub requests_delta: BTreeMap<String, f64>,
    /// `kafka_network_requestmetrics_errors_total` increase by `request/ERROR`, NONE excluded.
    pub errors_delta: BTreeMap<String, f64>,
    /// Resident memory before the run (after fill when there was one).
    pub rss_before_bytes: Option<f64>,
    /// Resident memory after the measured phase, before clean-up.
    pub rss_after_bytes: Option<f64>,
    /// Samples taken during the measured phase (`--rss-interval`).
    pub rss_samples: Vec<RssSample>,
}

/// The echo baseline and the run's fraction of it.
#[derive(Debug, Clone, Serialize)]
pub struct EchoReport {
    /// The echo measurement.
    pub echo: EchoResult,
    /// Churn mutations per second divided by echo round trips per second.
    pub throughput_ratio: f64,
    /// Churn mutation p50 divided by echo p50 (1.0 = as fast as an echo).
    pub latency_p50_multiple: f64,
}

/// Everything a run found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The options as given (after defaults).
    pub args: ChurnArgs,
    /// The seed actually used.
    pub seed: u64,
    /// Topic name prefix actually used.
    pub topic_prefix: String,
    /// `host:port` the mutations went to.
    pub broker: String,
    /// Negotiated versions.
    pub versions: Versions,
    /// Fill phase, when there was one.
    pub fill: Option<FillReport>,
    /// Length of the measured phase.
    pub duration_s: f64,
    /// Mutations answered.
    pub mutations: u64,
    /// Mutations per second.
    pub mutations_per_s: f64,
    /// Mutation latency over all three kinds.
    pub mutation_latency: Percentiles,
    /// Live partitions when the measured phase began.
    pub live_partitions_start: u64,
    /// Live partitions when it ended.
    pub live_partitions_end: u64,
    /// Live topics when it ended.
    pub live_topics_end: u64,
    /// Per-operation lines.
    pub operations: Vec<OpReport>,
    /// All error results (THROTTLING_QUOTA_EXCEEDED included).
    pub errors: u64,
    /// THROTTLING_QUOTA_EXCEEDED results.
    pub throttling_quota_exceeded: u64,
    /// Requests that failed on the wire.
    pub transport_errors: u64,
    /// Propagation probe.
    pub propagation: Option<PropagationReport>,
    /// Broker metrics, with --metrics-url.
    pub broker_metrics: Option<BrokerMetrics>,
    /// Echo baseline, with --echo-baseline.
    pub echo_baseline: Option<EchoReport>,
    /// Topics deleted at the end.
    pub cleanup_deleted: Option<u64>,
    /// Per-second timeline.
    pub timeline: Vec<TimelinePoint>,
    /// Why the run ended early, if it did.
    pub error: Option<String>,
}

impl OpReport {
    /// Summarises one operation of `recorder` over `seconds`.
    pub fn of(recorder: &Recorder, op: Op, seconds: f64) -> Self {
        let s = recorder.op(op);
        let per = |total: u64| {
            if s.requests == 0 {
                0.0
            } else {
                total as f64 / s.requests as f64
            }
        };
        OpReport {
            name: op.name().to_string(),
            requests: s.requests,
            per_s: s.requests as f64 / seconds.max(1e-9),
            errors: s.errors(),
            throttling_quota_exceeded: s
                .codes
                .get(&THROTTLING_QUOTA_EXCEEDED)
                .copied()
                .unwrap_or(0),
            errors_by_code: s
                .codes
                .iter()
                .map(|(code, n)| (code_label(*code), *n))
                .collect(),
            throttled_responses: s.throttled_responses,
            throttle_time_ms_total: s.throttle_ms,
            mean_request_bytes: per(s.request_bytes),
            mean_response_bytes: per(s.response_bytes),
            latency: Percentiles::of(&s.latency),
        }
    }
}

/// `NAME` for known codes, `CODE_<n>` otherwise.
fn code_label(code: i16) -> String {
    match error_name(code) {
        "OTHER" => format!("CODE_{code}"),
        name => name.to_string(),
    }
}

/// The timeline of `recorder`.
pub fn timeline(recorder: &Recorder) -> Vec<TimelinePoint> {
    recorder
        .intervals
        .iter()
        .enumerate()
        .map(|(t, i)| TimelinePoint {
            t_s: t as u64,
            mutations: i.mutations,
            errors: i.errors,
            metadata: i.metadata,
            mutation_p50_us: Percentiles::of(&i.mutation_latency).p50_us,
            mutation_p99_us: Percentiles::of(&i.mutation_latency).p99_us,
            metadata_p99_us: Percentiles::of(&i.metadata_latency).p99_us,
            live_partitions: i.live_partitions,
        })
        .collect()
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

impl Report {
    /// The human-readable table printed at the end.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "gregor-churn against {} (CreateTopics v{}, DeleteTopics v{}, CreatePartitions v{}, Metadata v{}), seed {}",
            self.broker,
            self.versions.create_topics,
            self.versions.delete_topics,
            self.versions.create_partitions,
            self.versions.metadata,
            self.seed
        );
        if let Some(fill) = &self.fill {
            let _ = writeln!(
                out,
                "fill: {} topics in {:.1} s ({:.0} topics/s), {} live partitions",
                fill.topics, fill.seconds, fill.topics_per_s, fill.live_partitions
            );
        }
        let _ = writeln!(
            out,
            "measured: {:.1} s, {} mutations, {:.1} mutations/s, live partitions {} -> {} ({} topics)",
            self.duration_s,
            self.mutations,
            self.mutations_per_s,
            self.live_partitions_start,
            self.live_partitions_end,
            self.live_topics_end
        );
        let _ = writeln!(out);
        let _ = writeln!(
            out,
            "{:<15} {:>9} {:>9} {:>7} {:>7} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9}",
            "operation",
            "requests",
            "per s",
            "errors",
            "quota",
            "throttled",
            "thr ms",
            "p50 ms",
            "p99 ms",
            "p99.9 ms",
            "max ms"
        );
        for op in &self.operations {
            if op.requests == 0 {
                continue;
            }
            let _ = writeln!(
                out,
                "{:<15} {:>9} {:>9.1} {:>7} {:>7} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9}",
                op.name,
                op.requests,
                op.per_s,
                op.errors - op.throttling_quota_exceeded,
                op.throttling_quota_exceeded,
                op.throttled_responses,
                op.throttle_time_ms_total,
                ms(op.latency.p50_us),
                ms(op.latency.p99_us),
                ms(op.latency.p999_us),
                ms(op.latency.max_us)
            );
        }
        let l = &self.mutation_latency;
        let _ = writeln!(
            out,
            "{:<15} {:>9} {:>9.1} {:>7} {:>7} {:>9} {:>10} {:>9} {:>9} {:>9} {:>9}",
            "all mutations",
            self.mutations,
            self.mutations_per_s,
            "",
            "",
            "",
            "",
            ms(l.p50_us),
            ms(l.p99_us),
            ms(l.p999_us),
            ms(l.max_us)
        );
        let errors: Vec<String> = self
            .operations
            .iter()
            .flat_map(|op| {
                op.errors_by_code
                    .iter()
                    .filter(|(name, _)| name.as_str() != "NONE")
                    .map(move |(name, n)| format!("{}: {name} x{n}", op.name))
            })
            .collect();
        let _ = writeln!(out);
        if errors.is_empty() {
            let _ = writeln!(out, "errors by code: none");
        } else {
            let _ = writeln!(out, "errors by code: {}", errors.join(", "));
        }
        let _ = writeln!(
            out,
            "THROTTLING_QUOTA_EXCEEDED: {}   transport errors: {}",
            self.throttling_quota_exceeded, self.transport_errors
        );
        if let Some(p) = &self.propagation {
            let _ = writeln!(
                out,
                "metadata propagation (create answered -> listed on another connection to {}): {} sampled, p50 {} ms, p99 {} ms, max {} ms, {} not seen",
                p.probe_broker,
                p.seen,
                ms(p.delay.p50_us),
                ms(p.delay.p99_us),
                ms(p.delay.max_us),
                p.not_seen
            );
        }
        if let Some(m) = &self.broker_metrics {
            let requests: Vec<String> = m
                .requests_delta
                .iter()
                .map(|(k, v)| format!("{k} {v:.0}"))
                .collect();
            let _ = writeln!(out, "broker requests: {}", requests.join(", "));
            if !m.errors_delta.is_empty() {
                let errs: Vec<String> = m
                    .errors_delta
                    .iter()
                    .map(|(k, v)| format!("{k} {v:.0}"))
                    .collect();
                let _ = writeln!(out, "broker errors: {}", errs.join(", "));
            }
            let _ = writeln!(
                out,
                "broker resident memory: before {}, after {}{}",
                m.rss_before_bytes.map_or("?".into(), mib),
                m.rss_after_bytes.map_or("?".into(), mib),
                match (
                    m.rss_samples.iter().map(|s| s.bytes).reduce(f64::min),
                    m.rss_samples.iter().map(|s| s.bytes).reduce(f64::max)
                ) {
                    (Some(lo), Some(hi)) => format!(
                        ", {} samples between {} and {}",
                        m.rss_samples.len(),
                        mib(lo),
                        mib(hi)
                    ),
                    _ => String::new(),
                }
            );
        }
        if let Some(e) = &self.echo_baseline {
            let _ = writeln!(
                out,
                "echo baseline ({} conns, {} B -> {} B frames): {:.0} round trips/s, p50 {} ms; churn = {:.2}% of echo throughput, churn p50 = {:.0}x echo p50",
                e.echo.connections,
                e.echo.request_bytes,
                e.echo.response_bytes,
                e.echo.round_trips_per_s,
                ms(e.echo.latency.p50_us),
                e.throughput_ratio * 100.0,
                e.latency_p50_multiple
            );
        }
        if let Some(n) = self.cleanup_deleted {
            let _ = writeln!(out, "clean-up: {n} topics deleted");
        }
        if let Some(e) = &self.error {
            let _ = writeln!(out, "RUN ENDED EARLY: {e}");
        }
        out
    }
}
