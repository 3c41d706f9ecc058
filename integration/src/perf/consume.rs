//! `gregor-perf consume`: kafka-consumer-perf-test.sh on librdkafka.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::{ClientContext, Message};

use super::args::ConsumeArgs;
use super::report::{FetchSummary, Report};
use super::{client_config, megabytes, millis, progress_bar};

/// Records consumed between two looks at the clock.
const RECORDS_PER_CHECK: u64 = 256;

/// When the group first assigned partitions to this consumer (kafka-consumer-perf-test's
/// rebalance time ends there).
struct PerfContext {
    assigned_at: Arc<Mutex<Option<Instant>>>,
}

impl ClientContext for PerfContext {}

impl ConsumerContext for PerfContext {
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        if let Rebalance::Assign(_) = rebalance {
            if let Ok(mut assigned) = self.assigned_at.lock() {
                assigned.get_or_insert_with(Instant::now);
            }
        }
    }
}

/// Runs the consume test; prints Kafka's header and result line and returns the report.
pub fn run(args: &ConsumeArgs) -> anyhow::Result<Report> {
    let group = args
        .group
        .clone()
        .unwrap_or_else(|| format!("perf-consumer-{}", rand::random::<u32>()));
    let config = client_config(
        &args.common.bootstrap_server,
        &[
            ("group.id", &group),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "true"),
        ],
        &args.consumer_props,
    )?;
    let assigned_at = Arc::new(Mutex::new(None));
    let consumer: BaseConsumer<PerfContext> = config
        .create_with_context(PerfContext {
            assigned_at: assigned_at.clone(),
        })
        .context("creating the consumer")?;
    consumer
        .subscribe(&[&args.common.topic])
        .context("subscribing")?;
    let progress = progress_bar(args.messages);
    let timeout = Duration::from_millis(args.timeout);
    let interval = Duration::from_millis(args.reporting_interval);

    // ConsumerPerformance prints its header before it consumes; the detailed one names the
    // per-interval rows.
    println!("{}", header(args.show_detailed_stats));
    let started = Instant::now();
    let (mut records, mut bytes) = (0u64, 0u64);
    // The join time not yet reported in a detailed row (joinTimeMsInSingleRound).
    let mut join_unreported = true;
    // Clock reads cost about as much as librdkafka's delivery of a record on this VM, and the
    // tool shares the cores with the broker it measures: the idle timeout, the progress bar and
    // the detailed stats are checked when a poll comes back empty or every `RECORDS_PER_CHECK`.
    // A record counted since the last check arrived at most one poll ago, so the idle timeout
    // runs from the check that first sees it.
    let mut last_record = Instant::now();
    let mut records_at_last_record = 0u64;
    let mut window = (Instant::now(), 0u64, 0u64);
    while records < args.messages {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(message)) => {
                records += 1;
                bytes += (message.payload_len() + message.key().map_or(0, <[u8]>::len)) as u64;
                if records % RECORDS_PER_CHECK != 0 && records < args.messages {
                    continue;
                }
            }
            Some(Err(error)) => return Err(error).context("consuming"),
            None => {}
        }
        if records != records_at_last_record {
            last_record = Instant::now();
            records_at_last_record = records;
            progress.set_position(records);
        }
        if last_record.elapsed() > timeout {
            break;
        }
        if args.show_detailed_stats && window.0.elapsed() >= interval {
            let now = Instant::now();
            let elapsed_ms = millis(now.duration_since(window.0));
            let join_ms = match *assigned_at
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?
            {
                Some(at) if join_unreported => {
                    join_unreported = false;
                    millis(at.duration_since(started)).min(elapsed_ms)
                }
                _ => 0.0,
            };
            let fetch_ms = (elapsed_ms - join_ms).floor();
            let interval_mb = megabytes(bytes - window.2);
            let per_fetch_s = |x: f64| {
                if fetch_ms <= 0.0 {
                    0.0
                } else {
                    1000.0 * x / fetch_ms
                }
            };
            let row = format!(
                "{}, 0, {:.4}, {:.4}, {records}, {:.4}, {:.0}, {:.0}, {:.4}, {:.4}",
                timestamp(now),
                megabytes(bytes),
                1000.0 * interval_mb / elapsed_ms,
                1000.0 * (records - window.1) as f64 / elapsed_ms,
                join_ms,
                fetch_ms,
                per_fetch_s(interval_mb),
                per_fetch_s((records - window.1) as f64),
            );
            progress.suspend(|| println!("{row}"));
            window = (now, records, bytes);
        }
    }
    let ended = Instant::now();
    let elapsed = ended.duration_since(started);
    progress.finish_and_clear();
    // As ConsumerPerformance: a timeout ends the run with a warning, and the stats still print.
    if records < args.messages {
        println!("{}", timeout_warning(args.timeout));
    }
    let join = assigned_at
        .lock()
        .ok()
        .and_then(|at| *at)
        .map_or(Duration::ZERO, |at| at.duration_since(started));
    let fetch = elapsed.saturating_sub(join);
    let mut report = Report::new("consume", &args.common.topic, records, bytes, elapsed);
    let fetch_seconds = fetch.as_secs_f64().max(f64::MIN_POSITIVE);
    let summary = FetchSummary {
        rebalance_ms: millis(join),
        fetch_ms: millis(fetch),
        fetch_mb_per_s: megabytes(bytes) / fetch_seconds,
        fetch_records_per_s: records as f64 / fetch_seconds,
    };
    report.fetch = Some(summary.clone());
    // With --show-detailed-stats the rows were the output: no summary line.
    if args.show_detailed_stats {
        return Ok(report);
    }
    println!(
        "{}, {}, {:.4}, {:.4}, {}, {:.4}, {:.0}, {:.0}, {:.4}, {:.4}",
        timestamp(started),
        timestamp(ended),
        megabytes(bytes),
        report.mb_per_s,
        records,
        report.records_per_s,
        summary.rebalance_ms,
        summary.fetch_ms,
        summary.fetch_mb_per_s,
        summary.fetch_records_per_s,
    );
    Ok(report)
}

/// ConsumerPerformance.printHeader.
fn header(detailed: bool) -> String {
    format!(
        "{}, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, \
         fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec",
        if detailed {
            "time, threadId"
        } else {
            "start.time, end.time"
        }
    )
}

/// ConsumerPerformance's line when `--timeout` passed before `--messages` records.
fn timeout_warning(timeout_ms: u64) -> String {
    format!(
        "WARNING: Exiting before consuming the expected number of messages: timeout ({timeout_ms} ms) exceeded. You can use the --timeout option to increase the timeout."
    )
}

/// Kafka's `yyyy-MM-dd HH:mm:ss:SSS` (UTC here) for an instant of this run.
fn timestamp(at: Instant) -> String {
    let wall = std::time::SystemTime::now() - Instant::now().saturating_duration_since(at);
    let since_epoch = wall
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since_epoch.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02}:{:03}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since_epoch.subsec_millis()
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm; no date
/// crate is a dependency of the tools for one line of output).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_kafkas() {
        assert!(header(true).starts_with("time, threadId, data.consumed.in.MB, MB.sec"));
        assert!(header(false).starts_with("start.time, end.time, data.consumed.in.MB"));
        assert!(header(false).ends_with("fetch.MB.sec, fetch.nMsg.sec"));
    }

    #[test]
    fn the_timeout_warning_is_kafkas() {
        assert_eq!(
            timeout_warning(5000),
            "WARNING: Exiting before consuming the expected number of messages: timeout (5000 ms) exceeded. You can use the --timeout option to increase the timeout."
        );
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_787), (2026, 11, 30));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }
}
