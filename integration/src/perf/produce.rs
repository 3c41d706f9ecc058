//! `gregor-perf produce`: kafka-producer-perf-test.sh on librdkafka.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use rand::RngCore;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::ClientContext;

use super::args::ProduceArgs;
use super::report::{Latencies, Report, SteadyState};
use super::{client_config, megabytes};

/// How often a progress line is printed (Kafka's tool: every 5 s).
const REPORTING_INTERVAL: Duration = Duration::from_secs(5);
/// How long the final flush may take: past the default delivery timeout (120 s), so records
/// the broker never answered have failed by then.
const FLUSH_TIMEOUT: Duration = Duration::from_secs(130);
/// Records sent between two polls for delivery reports (and progress updates). Each poll and
/// each progress update reads the clock, at about the cost of librdkafka's own per-record work
/// on this VM, and the tool shares the cores with the broker it measures; Kafka's tool does not
/// poll at all (its callbacks run on the producer's I/O thread).
const SENDS_PER_POLL: u64 = 256;

/// Delivery reports, counted by librdkafka's poll thread (this one, through `poll`).
#[derive(Default)]
struct Deliveries {
    /// Since the last progress line.
    window: Latencies,
    window_records: u64,
    window_bytes: u64,
    total: Latencies,
    acknowledged: u64,
    bytes: u64,
    errors: u64,
    first_error: Option<String>,
    /// The records sent after the warm-up (`--warmup-records`), Kafka's steady state.
    steady: Latencies,
    steady_acknowledged: u64,
    steady_bytes: u64,
    /// Set when the warm-up ends: the next progress line is the first of the steady state.
    announce_steady_state: bool,
}

struct PerfContext {
    deliveries: Arc<Mutex<Deliveries>>,
    /// Each record's opaque is its send time as nanoseconds since this instant, so a send
    /// allocates nothing of the tool's.
    epoch: Instant,
    /// A record sent at or after this many nanoseconds since `epoch` counts in the steady
    /// state; `u64::MAX` until the warm-up is over.
    steady_from_nanos: AtomicU64,
}

impl ClientContext for PerfContext {}

impl ProducerContext for PerfContext {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, sent_nanos: Self::DeliveryOpaque) {
        let latency = self
            .epoch
            .elapsed()
            .saturating_sub(Duration::from_nanos(sent_nanos as u64));
        let Ok(mut deliveries) = self.deliveries.lock() else {
            return;
        };
        match result {
            Ok(message) => {
                let bytes = message.payload_len() as u64;
                deliveries.window.record(latency);
                deliveries.total.record(latency);
                deliveries.window_records += 1;
                deliveries.window_bytes += bytes;
                deliveries.acknowledged += 1;
                deliveries.bytes += bytes;
                if sent_nanos as u64 >= self.steady_from_nanos.load(Ordering::Relaxed) {
                    deliveries.steady.record(latency);
                    deliveries.steady_acknowledged += 1;
                    deliveries.steady_bytes += bytes;
                }
            }
            Err((error, _)) => {
                deliveries.errors += 1;
                deliveries
                    .first_error
                    .get_or_insert_with(|| error.to_string());
            }
        }
    }
}

/// Runs the produce test; prints Kafka's progress and final lines and returns the report.
pub fn run(args: &ProduceArgs) -> anyhow::Result<Report> {
    anyhow::ensure!(
        args.warmup_records < args.num_records,
        "the value for --warmup-records must be strictly fewer than the number of records in the test, --num-records"
    );
    let deliveries = Arc::new(Mutex::new(Deliveries::default()));
    let epoch = Instant::now();
    let context = PerfContext {
        deliveries: deliveries.clone(),
        epoch,
        steady_from_nanos: AtomicU64::new(u64::MAX),
    };
    let producer: BaseProducer<PerfContext> =
        // Kafka's delivery.timeout.ms (librdkafka's own default is 300 s): a record the
        // broker never acknowledges (a killed broker) fails after it, and the run ends.
        client_config(
            &args.common.bootstrap_server,
            &[("message.timeout.ms", "120000")],
            &args.producer_props,
        )?
            .create_with_context(context)
            .context("creating the producer")?;
    let mut payload = vec![0u8; args.record_size];
    rand::rng().fill_bytes(&mut payload);
    if args.warmup_records > 0 {
        println!(
            "Warmup first {} records. Steady state results will print after the complete test summary.",
            args.warmup_records
        );
    }
    let progress = super::progress_bar(args.num_records);

    let started = Instant::now();
    let mut steady_started = None;
    let mut window_started = started;
    for sent in 0..args.num_records {
        if sent == args.warmup_records && sent > 0 {
            // As Kafka's tool, the steady state starts when its first record is sent, with a
            // new progress window.
            let now = Instant::now();
            producer.context().steady_from_nanos.store(
                u64::try_from(now.duration_since(epoch).as_nanos()).unwrap_or(u64::MAX),
                Ordering::Relaxed,
            );
            steady_started = Some(now);
            window_started = now;
            if let Ok(mut deliveries) = deliveries.lock() {
                deliveries.window.reset();
                deliveries.window_records = 0;
                deliveries.window_bytes = 0;
                deliveries.announce_steady_state = true;
            }
        }
        if args.throughput > 0.0 {
            // Kafka's ThroughputThrottler: sleep until this record's turn.
            let due = started + Duration::from_secs_f64(sent as f64 / args.throughput);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                producer.poll(Duration::ZERO);
                std::thread::sleep(wait);
            }
        }
        let sent_nanos = epoch.elapsed().as_nanos() as usize;
        let mut record =
            BaseRecord::with_opaque_to(&args.common.topic, sent_nanos).payload(payload.as_slice());
        loop {
            match producer.send::<[u8], [u8]>(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    producer.poll(Duration::from_millis(10));
                }
                Err((error, _)) => return Err(error).context("sending a record"),
            }
        }
        // A paced run is not short of CPU: it keeps Kafka's reporting interval to the record.
        if (sent + 1) % SENDS_PER_POLL == 0 || args.throughput > 0.0 {
            producer.poll(Duration::ZERO);
            if window_started.elapsed() >= REPORTING_INTERVAL {
                print_window(&deliveries, window_started.elapsed());
                window_started = Instant::now();
            }
            progress.set_position(sent + 1);
        }
    }
    // The summary prints even when records are still unacknowledged after the flush (they
    // count as errors), as Kafka's tool prints it after its failed callbacks.
    let unflushed = producer.flush(FLUSH_TIMEOUT).err();
    let finished = Instant::now();
    let elapsed = finished.duration_since(started);
    progress.finish_and_clear();

    let mut deliveries = deliveries
        .lock()
        .map_err(|_| anyhow::anyhow!("delivery statistics poisoned"))?;
    if let Some(error) = unflushed {
        let pending = args
            .num_records
            .saturating_sub(deliveries.acknowledged + deliveries.errors);
        deliveries.errors += pending;
        deliveries
            .first_error
            .get_or_insert_with(|| format!("waiting for every record to be acknowledged: {error}"));
    }
    let mut report = Report::new(
        "produce",
        &args.common.topic,
        deliveries.acknowledged,
        deliveries.bytes,
        elapsed,
    );
    report.errors = deliveries.errors;
    let latency = deliveries.total.summary();
    report.latency = Some(latency);
    print_total(
        "",
        report.records,
        report.records_per_s,
        report.mb_per_s,
        &deliveries.total,
    );
    if let Some(steady_started) = steady_started {
        let steady = SteadyState::new(
            deliveries.steady_acknowledged,
            deliveries.steady_bytes,
            finished.duration_since(steady_started),
            deliveries.steady.summary(),
        );
        print_total(
            " steady state",
            steady.records,
            steady.records_per_s,
            steady.mb_per_s,
            &deliveries.steady,
        );
        report.steady_state = Some(steady);
    }
    if let Some(error) = &deliveries.first_error {
        eprintln!(
            "gregor-perf: {} of {} records were not acknowledged; the first error: {error}",
            deliveries.errors, args.num_records
        );
    }
    Ok(report)
}

/// Kafka's summary line, of all records (`kind` empty) or of the steady state.
fn print_total(kind: &str, records: u64, records_per_s: f64, mb_per_s: f64, latencies: &Latencies) {
    let latency = latencies.summary();
    println!(
        "{records}{kind} records sent, {records_per_s:.1} records/sec ({mb_per_s:.2} MB/sec), {:.2} ms avg latency, \
         {:.2} ms max latency, {:.0} ms 50th, {:.0} ms 95th, {:.0} ms 99th, {:.0} ms 99.9th.",
        latency.avg_ms,
        latency.max_ms,
        latency.p50_ms,
        latency.p95_ms,
        latency.p99_ms,
        latency.p999_ms,
    );
}

/// Kafka's periodic line: what was acknowledged since the previous one.
fn print_window(deliveries: &Mutex<Deliveries>, elapsed: Duration) {
    let Ok(mut deliveries) = deliveries.lock() else {
        return;
    };
    if std::mem::take(&mut deliveries.announce_steady_state) {
        println!("In steady state.");
    }
    let seconds = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
    println!(
        "{} records sent, {:.1} records/sec ({:.2} MB/sec), {:.1} ms avg latency, {:.1} ms max latency.",
        deliveries.window_records,
        deliveries.window_records as f64 / seconds,
        megabytes(deliveries.window_bytes) / seconds,
        deliveries.window.mean_ms(),
        deliveries.window.max_ms(),
    );
    deliveries.window.reset();
    deliveries.window_records = 0;
    deliveries.window_bytes = 0;
}
