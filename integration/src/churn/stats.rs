//! What a run records: per-operation counts, error codes, throttling and HDR latency histograms,
//! plus one-second intervals for the live view and the plot. One `Mutex` guards it all: a
//! record is a few hundred nanoseconds and the broker answers at most a few thousand requests a
//! second, so contention is noise next to a network round trip.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;

/// THROTTLING_QUOTA_EXCEEDED, counted apart from other errors.
pub const THROTTLING_QUOTA_EXCEEDED: i16 = 89;

/// Latencies are recorded in microseconds up to this (longer ones are clamped).
const MAX_LATENCY_US: u64 = 600_000_000;

/// The operations the tool times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    /// CreateTopics of one topic.
    Create,
    /// CreatePartitions of one topic.
    AddPartitions,
    /// DeleteTopics of one topic.
    Delete,
    /// Metadata of one topic (readers).
    Metadata,
}

impl Op {
    /// Every operation, in report order.
    pub const ALL: [Op; 4] = [Op::Create, Op::AddPartitions, Op::Delete, Op::Metadata];

    /// Name in tables and JSON.
    pub fn name(self) -> &'static str {
        match self {
            Op::Create => "create_topic",
            Op::AddPartitions => "add_partitions",
            Op::Delete => "delete_topic",
            Op::Metadata => "metadata",
        }
    }

    fn index(self) -> usize {
        match self {
            Op::Create => 0,
            Op::AddPartitions => 1,
            Op::Delete => 2,
            Op::Metadata => 3,
        }
    }

    /// Whether this is a mutation (counted in the churn rate).
    pub fn is_mutation(self) -> bool {
        !matches!(self, Op::Metadata)
    }
}

/// A latency histogram in microseconds, 3 significant digits up to 10 minutes (~50 KiB).
pub fn new_histogram() -> Histogram<u64> {
    histogram_with(3)
}

/// The bounds are constants (1 us to 10 min, 2 or 3 digits), which `new_with_bounds` always
/// accepts; `histograms_build` checks it.
#[allow(clippy::expect_used)]
fn histogram_with(sigfig: u8) -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_LATENCY_US, sigfig).expect("constant histogram bounds")
}

fn record(h: &mut Histogram<u64>, latency: Duration) {
    let us = u64::try_from(latency.as_micros())
        .unwrap_or(MAX_LATENCY_US)
        .clamp(1, MAX_LATENCY_US);
    let _ = h.record(us);
}

/// Counters and latencies of one operation.
#[derive(Debug, Clone)]
pub struct OpStats {
    /// Requests answered.
    pub requests: u64,
    /// Per-topic results by error code (0 included).
    pub codes: BTreeMap<i16, u64>,
    /// Responses with `throttle_time_ms > 0`.
    pub throttled_responses: u64,
    /// Sum of `throttle_time_ms`.
    pub throttle_ms: u64,
    /// Request bytes on the wire.
    pub request_bytes: u64,
    /// Response bytes on the wire.
    pub response_bytes: u64,
    /// Latency in microseconds.
    pub latency: Histogram<u64>,
}

impl Default for OpStats {
    fn default() -> Self {
        OpStats {
            requests: 0,
            codes: BTreeMap::new(),
            throttled_responses: 0,
            throttle_ms: 0,
            request_bytes: 0,
            response_bytes: 0,
            latency: new_histogram(),
        }
    }
}

impl OpStats {
    /// Results with a non-zero error code.
    pub fn errors(&self) -> u64 {
        self.codes
            .iter()
            .filter(|(code, _)| **code != 0)
            .map(|(_, n)| n)
            .sum()
    }
}

/// One second of the run.
#[derive(Debug, Clone)]
pub struct Interval {
    /// Mutations answered in this second.
    pub mutations: u64,
    /// Non-zero per-topic results of mutations.
    pub errors: u64,
    /// Metadata requests answered.
    pub metadata: u64,
    /// Mutation latency.
    pub mutation_latency: Histogram<u64>,
    /// Metadata latency.
    pub metadata_latency: Histogram<u64>,
    /// Live partitions at the end of the second (as the tool counts them).
    pub live_partitions: u64,
}

impl Default for Interval {
    fn default() -> Self {
        // Two significant digits keep a 10-minute timeline small (~2x600 small histograms).
        let small = || histogram_with(2);
        Interval {
            mutations: 0,
            errors: 0,
            metadata: 0,
            mutation_latency: small(),
            metadata_latency: small(),
            live_partitions: 0,
        }
    }
}

/// Everything recorded during the measured phase.
#[derive(Debug)]
pub struct Recorder {
    started: Instant,
    /// Per operation, indexed by `Op::index`.
    ops: [OpStats; 4],
    /// Time from a CreateTopics answer until Metadata on another connection lists the topic.
    pub propagation: Histogram<u64>,
    /// Probes that never saw their topic before the deadline.
    pub propagation_not_seen: u64,
    /// Requests that failed on the wire (timeout, closed connection, undecodable answer).
    pub transport_errors: u64,
    /// One entry per second since `started`.
    pub intervals: Vec<Interval>,
}

impl Recorder {
    /// A recorder whose clock starts now.
    pub fn new() -> Self {
        Recorder {
            started: Instant::now(),
            ops: Default::default(),
            propagation: new_histogram(),
            propagation_not_seen: 0,
            transport_errors: 0,
            intervals: Vec::new(),
        }
    }

    /// Restarts the clock and forgets everything (after the fill phase).
    pub fn reset(&mut self) {
        *self = Recorder::new();
    }

    /// When the measured phase started.
    pub fn started(&self) -> Instant {
        self.started
    }

    fn interval(&mut self) -> &mut Interval {
        let second = usize::try_from(self.started.elapsed().as_secs()).unwrap_or(usize::MAX);
        // Bound the timeline (a day) so a runaway clock cannot exhaust memory.
        let second = second.min(86_400);
        if self.intervals.len() <= second {
            self.intervals.resize_with(second + 1, Interval::default);
        }
        &mut self.intervals[second]
    }

    /// Records one answered request with its per-topic error codes.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        op: Op,
        latency: Duration,
        codes: &[i16],
        throttle_ms: i32,
        request_bytes: usize,
        response_bytes: usize,
        live_partitions: u64,
    ) {
        let stats = &mut self.ops[op.index()];
        stats.requests += 1;
        for code in codes {
            *stats.codes.entry(*code).or_default() += 1;
        }
        if throttle_ms > 0 {
            stats.throttled_responses += 1;
            stats.throttle_ms += u64::try_from(throttle_ms).unwrap_or(0);
        }
        stats.request_bytes += request_bytes as u64;
        stats.response_bytes += response_bytes as u64;
        record(&mut stats.latency, latency);
        let errors = codes.iter().filter(|c| **c != 0).count() as u64;
        let interval = self.interval();
        interval.live_partitions = live_partitions;
        if op.is_mutation() {
            interval.mutations += 1;
            interval.errors += errors;
            record(&mut interval.mutation_latency, latency);
        } else {
            interval.metadata += 1;
            record(&mut interval.metadata_latency, latency);
        }
    }

    /// Records one propagation delay.
    pub fn record_propagation(&mut self, delay: Option<Duration>) {
        match delay {
            Some(d) => record(&mut self.propagation, d),
            None => self.propagation_not_seen += 1,
        }
    }

    /// Stats of one operation.
    pub fn op(&self, op: Op) -> &OpStats {
        &self.ops[op.index()]
    }

    /// Mutations answered so far.
    pub fn mutations(&self) -> u64 {
        Op::ALL
            .iter()
            .filter(|o| o.is_mutation())
            .map(|o| self.op(*o).requests)
            .sum()
    }

    /// Non-zero results so far, all operations, plus transport errors.
    pub fn errors(&self) -> u64 {
        Op::ALL.iter().map(|o| self.op(*o).errors()).sum::<u64>() + self.transport_errors
    }

    /// THROTTLING_QUOTA_EXCEEDED results so far.
    pub fn quota_exceeded(&self) -> u64 {
        Op::ALL
            .iter()
            .map(|o| {
                self.op(*o)
                    .codes
                    .get(&THROTTLING_QUOTA_EXCEEDED)
                    .copied()
                    .unwrap_or(0)
            })
            .sum()
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

/// p50 / p99 / p99.9 / max / mean of a histogram, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Samples.
    pub count: u64,
    /// Median.
    pub p50_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Largest.
    pub max_us: u64,
    /// Mean.
    pub mean_us: f64,
}

impl Percentiles {
    /// Reads a histogram (all zero when empty).
    pub fn of(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Percentiles::default();
        }
        Percentiles {
            count: h.len(),
            p50_us: h.value_at_quantile(0.50),
            p99_us: h.value_at_quantile(0.99),
            p999_us: h.value_at_quantile(0.999),
            max_us: h.max(),
            mean_us: h.mean(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn histograms_build() {
        let _ = histogram_with(2);
        let _ = histogram_with(3);
    }

    #[test]
    fn counts_errors_and_quota_apart() {
        let mut r = Recorder::new();
        r.record(Op::Create, Duration::from_micros(500), &[0], 0, 100, 50, 1);
        r.record(
            Op::Create,
            Duration::from_micros(700),
            &[89],
            20,
            100,
            50,
            1,
        );
        r.record(Op::Delete, Duration::from_micros(900), &[3], 0, 80, 40, 0);
        assert_eq!(r.mutations(), 3);
        assert_eq!(r.errors(), 2);
        assert_eq!(r.quota_exceeded(), 1);
        assert_eq!(r.op(Op::Create).throttle_ms, 20);
        assert_eq!(r.op(Op::Create).throttled_responses, 1);
        let p = Percentiles::of(&r.op(Op::Create).latency);
        assert_eq!(p.count, 2);
        assert_eq!(p.max_us, 700);
        assert_eq!(r.intervals.len(), 1);
        assert_eq!(r.intervals[0].mutations, 3);
    }
}
