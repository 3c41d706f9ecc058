//! `gregor-perf latency`: Kafka's EndToEndLatency on librdkafka. One record at a time: send it,
//! wait until the consumer reads it back, then send the next.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use rand::RngCore;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};

use super::args::LatencyArgs;
use super::client_config;
use super::report::{Latencies, Report};

/// How long one round trip may take before the run fails (Kafka's tool: 10 s).
const ROUND_TRIP_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the latency test; prints Kafka's lines and returns the report.
pub fn run(args: &LatencyArgs) -> anyhow::Result<Report> {
    let topic = &args.common.topic;
    let mut producer_config = client_config(&args.common.bootstrap_server, &[], &args.props)?;
    producer_config
        .set("acks", &args.producer_acks)
        .set("linger.ms", "0");
    let producer: BaseProducer = producer_config.create().context("creating the producer")?;
    let mut consumer_config = client_config(&args.common.bootstrap_server, &[], &args.props)?;
    consumer_config
        .set(
            "group.id",
            format!("end-to-end-latency-{}", rand::random::<u32>()),
        )
        .set("enable.auto.commit", "false")
        // A fetch waits at the broker until the record arrives (Gregor wakes it on the append),
        // so the measure is not a polling interval.
        .set("fetch.wait.max.ms", "100");
    let consumer: BaseConsumer = consumer_config.create().context("creating the consumer")?;

    // Like Kafka's tool: one partition, read from its end.
    let metadata = consumer
        .fetch_metadata(Some(topic), ROUND_TRIP_TIMEOUT)
        .context("reading the topic's metadata")?;
    let partitions = metadata
        .topics()
        .first()
        .map_or(0, |t| t.partitions().len());
    anyhow::ensure!(
        partitions == 1,
        "topic {topic} has {partitions} partitions; the latency test needs exactly one"
    );
    let (_, high) = consumer
        .fetch_watermarks(topic, 0, ROUND_TRIP_TIMEOUT)
        .context("reading the partition's end offset")?;
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Offset(high))
        .context("assigning the partition")?;
    consumer
        .assign(&assignment)
        .context("assigning the partition")?;

    let progress = super::progress_bar(args.num_records);
    let mut latencies = Latencies::default();
    let mut payload = vec![0u8; args.record_size];
    let started = Instant::now();
    for i in 0..args.num_records {
        rand::rng().fill_bytes(&mut payload);
        let sent = Instant::now();
        producer
            .send(BaseRecord::<(), [u8]>::to(topic).payload(payload.as_slice()))
            .map_err(|(error, _)| error)
            .context("sending a record")?;
        // Serve delivery reports without waiting for this one: librdkafka's flush sleeps in
        // 100 ms steps, and the record coming back proves it was written.
        producer.poll(Duration::ZERO);
        let received = loop {
            let left = ROUND_TRIP_TIMEOUT.saturating_sub(sent.elapsed());
            anyhow::ensure!(
                !left.is_zero(),
                "record {i} was not read back within {ROUND_TRIP_TIMEOUT:?}"
            );
            match consumer.poll(left) {
                Some(Ok(message)) => break message.payload().map(<[u8]>::to_vec),
                Some(Err(error)) => return Err(error).context("consuming"),
                None => {}
            }
        };
        anyhow::ensure!(
            received.as_deref() == Some(payload.as_slice()),
            "record {i} came back with other bytes than were sent"
        );
        latencies.record(sent.elapsed());
        progress.set_position(i + 1);
        if (i + 1) % 1000 == 0 {
            progress
                .suspend(|| println!("{}\t{:.3}", i + 1, sent.elapsed().as_secs_f64() * 1000.0));
        }
    }
    let elapsed = started.elapsed();
    producer
        .flush(ROUND_TRIP_TIMEOUT)
        .context("waiting for the last acknowledgements")?;
    progress.finish_and_clear();
    let summary = latencies.summary();
    println!("Avg latency: {:.4} ms", summary.avg_ms);
    println!(
        "Percentiles: 50th = {:.3}, 99th = {:.3}, 99.9th = {:.3}",
        summary.p50_ms, summary.p99_ms, summary.p999_ms
    );
    let mut report = Report::new(
        "latency",
        topic,
        latencies.count(),
        latencies.count() * args.record_size as u64,
        elapsed,
    );
    report.latency = Some(summary);
    Ok(report)
}
