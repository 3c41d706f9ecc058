//! Latency histograms and the JSON report every mode writes.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Latencies in microseconds (1 us to 10 min, 3 significant digits, as the churn tool's).
pub struct Latencies(Histogram<u64>);

impl Default for Latencies {
    fn default() -> Self {
        Latencies(crate::churn::stats::new_histogram())
    }
}

impl Latencies {
    pub fn record(&mut self, latency: Duration) {
        self.0
            .saturating_record((latency.as_micros() as u64).max(1));
    }

    pub fn count(&self) -> u64 {
        self.0.len()
    }

    /// Milliseconds at `quantile` (0..=1).
    pub fn quantile_ms(&self, quantile: f64) -> f64 {
        self.0.value_at_quantile(quantile) as f64 / 1000.0
    }

    pub fn mean_ms(&self) -> f64 {
        self.0.mean() / 1000.0
    }

    pub fn max_ms(&self) -> f64 {
        self.0.max() as f64 / 1000.0
    }

    pub fn reset(&mut self) {
        self.0.reset();
    }

    /// Adds `other`'s latencies to these.
    pub fn merge(&mut self, other: &Latencies) {
        // Both histograms share bounds, so adding cannot fail; a failure would only drop data.
        let _ = self.0.add(&other.0);
    }

    /// The latency part of a report.
    pub fn summary(&self) -> LatencySummary {
        LatencySummary {
            avg_ms: self.mean_ms(),
            max_ms: self.max_ms(),
            p50_ms: self.quantile_ms(0.50),
            p95_ms: self.quantile_ms(0.95),
            p99_ms: self.quantile_ms(0.99),
            p999_ms: self.quantile_ms(0.999),
        }
    }
}

#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct LatencySummary {
    pub avg_ms: f64,
    pub max_ms: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
}

/// The final figures of a run, as `--json` writes them.
#[derive(Debug, Serialize)]
pub struct Report {
    pub mode: &'static str,
    pub topic: String,
    pub records: u64,
    pub bytes: u64,
    pub errors: u64,
    pub elapsed_s: f64,
    pub records_per_s: f64,
    pub mb_per_s: f64,
    /// Send to acknowledgement (produce), send to read (latency); absent for consume.
    pub latency: Option<LatencySummary>,
    /// Paced latency only: the round trip of the record sent before the measured ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm_up_ms: Option<f64>,
    /// Produce with `--warmup-records` only: the records after the warm-up.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steady_state: Option<SteadyState>,
    /// Consume only: the rates after the group assigned the partitions (Kafka's
    /// `fetch.MB.sec` and `fetch.nMsg.sec`), and the time that took (`rebalance.time.ms`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fetch: Option<FetchSummary>,
}

/// A produce run's records after its warm-up, from the first one's send to the end of the run
/// (Kafka's steady-state summary).
#[derive(Debug, Serialize)]
pub struct SteadyState {
    pub records: u64,
    pub bytes: u64,
    pub elapsed_s: f64,
    pub records_per_s: f64,
    pub mb_per_s: f64,
    pub latency: LatencySummary,
}

impl SteadyState {
    pub fn new(records: u64, bytes: u64, elapsed: Duration, latency: LatencySummary) -> Self {
        let (records_per_s, mb_per_s) = rates(records, bytes, elapsed);
        SteadyState {
            records,
            bytes,
            elapsed_s: elapsed.as_secs_f64(),
            records_per_s,
            mb_per_s,
            latency,
        }
    }
}

/// Records and megabytes per second over `elapsed`.
fn rates(records: u64, bytes: u64, elapsed: Duration) -> (f64, f64) {
    let seconds = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
    (records as f64 / seconds, super::megabytes(bytes) / seconds)
}

/// The part of a consume run after the group's first assignment.
#[derive(Debug, Clone, Serialize)]
pub struct FetchSummary {
    pub rebalance_ms: f64,
    pub fetch_ms: f64,
    pub fetch_mb_per_s: f64,
    pub fetch_records_per_s: f64,
}

impl Report {
    pub fn new(
        mode: &'static str,
        topic: &str,
        records: u64,
        bytes: u64,
        elapsed: Duration,
    ) -> Self {
        let (records_per_s, mb_per_s) = rates(records, bytes, elapsed);
        Report {
            mode,
            topic: topic.to_owned(),
            records,
            bytes,
            errors: 0,
            elapsed_s: elapsed.as_secs_f64(),
            records_per_s,
            mb_per_s,
            latency: None,
            warm_up_ms: None,
            steady_state: None,
            fetch: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_in_milliseconds() {
        let mut latencies = Latencies::default();
        for ms in 1..=1000u64 {
            latencies.record(Duration::from_millis(ms));
        }
        let summary = latencies.summary();
        assert_eq!(latencies.count(), 1000);
        // 3 significant digits: within 0.1% of the exact values.
        assert!((summary.p50_ms - 500.0).abs() <= 0.5, "{summary:?}");
        assert!((summary.p99_ms - 990.0).abs() <= 1.0, "{summary:?}");
        assert!((summary.max_ms - 1000.0).abs() <= 1.0, "{summary:?}");
        assert!((summary.avg_ms - 500.5).abs() <= 0.5, "{summary:?}");
    }

    #[test]
    fn rates_come_from_the_elapsed_time() {
        let report = Report::new("produce", "t", 2_000, 2 << 20, Duration::from_secs(2));
        assert_eq!(report.records_per_s, 1_000.0);
        assert_eq!(report.mb_per_s, 1.0);
    }
}
