//! `gregor-perf latency`: Kafka's EndToEndLatency on librdkafka. One record at a time: send it,
//! wait until the consumer reads it back, then send the next. With `--throughput`, records are
//! sent at a steady pace from another thread while the consumer reads them, each carrying its
//! send time, so the latency is measured under that load.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use rand::RngCore;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::{Message, Offset, TopicPartitionList};

use super::args::{LatencyArgs, SEND_TIME_BYTES};
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
    let mut partitions = metadata
        .topics()
        .first()
        .filter(|t| t.error().is_none())
        .map_or(0, |t| t.partitions().len());
    if partitions == 0 {
        // EndToEndLatency.createTopic: a missing topic is created with 1 partition, RF 1.
        create_topic(&args.common.bootstrap_server, topic, &args.props)?;
        partitions = 1;
    }
    anyhow::ensure!(
        partitions == 1,
        "topic {topic} has {partitions} partitions; the latency test needs exactly one"
    );
    // A topic just created may not have its leader yet: ask again for a while.
    let asking_since = Instant::now();
    let (_, high) = loop {
        match consumer.fetch_watermarks(topic, 0, ROUND_TRIP_TIMEOUT) {
            Ok(watermarks) => break watermarks,
            Err(_) if asking_since.elapsed() < ROUND_TRIP_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(error) => return Err(error).context("reading the partition's end offset"),
        }
    };
    let mut assignment = TopicPartitionList::new();
    assignment
        .add_partition_offset(topic, 0, Offset::Offset(high))
        .context("assigning the partition")?;
    consumer
        .assign(&assignment)
        .context("assigning the partition")?;

    if let Some(rate) = args.throughput {
        return paced(args, rate, producer, &consumer);
    }
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
        // As EndToEndLatency: the round trip of records 0, 1000, 2000, ...
        if i % 1000 == 0 {
            progress.suspend(|| println!("{i}\t{}", sent.elapsed().as_secs_f64() * 1000.0));
        }
    }
    let elapsed = started.elapsed();
    producer
        .flush(ROUND_TRIP_TIMEOUT)
        .context("waiting for the last acknowledgements")?;
    progress.finish_and_clear();
    Ok(report(args, &latencies, elapsed))
}

/// Kafka's closing lines, and the report.
fn report(args: &LatencyArgs, latencies: &Latencies, elapsed: Duration) -> Report {
    let topic = &args.common.topic;
    let summary = latencies.summary();
    println!("Avg latency: {:.4} ms", summary.avg_ms);
    // EndToEndLatency keeps whole milliseconds (truncated) and prints them with %d.
    println!(
        "Percentiles: 50th = {}, 99th = {}, 99.9th = {}",
        summary.p50_ms as i64, summary.p99_ms as i64, summary.p999_ms as i64
    );
    let mut report = Report::new(
        "latency",
        topic,
        latencies.count(),
        latencies.count() * args.record_size as u64,
        elapsed,
    );
    report.latency = Some(summary);
    report
}

/// Sends `num_records` records at `rate` per second from a second thread while this one reads
/// them; each latency is from the record's send time (its first bytes) to its arrival here.
fn paced(
    args: &LatencyArgs,
    rate: u32,
    producer: BaseProducer,
    consumer: &BaseConsumer,
) -> anyhow::Result<Report> {
    let topic = args.common.topic.as_str();
    let interval = Duration::from_secs(1) / rate;
    let warm_up = warm_up(args, &producer, consumer)?;
    println!(
        "Warm-up round trip: {:.3} ms (the producer's first metadata and connection; not counted)",
        warm_up.as_secs_f64() * 1000.0
    );
    let origin = Instant::now();
    let progress = super::progress_bar(args.num_records);
    let mut latencies = Latencies::default();
    std::thread::scope(|scope| {
        let sender = scope.spawn(|| -> anyhow::Result<()> {
            let mut payload = vec![0u8; args.record_size];
            rand::rng().fill_bytes(&mut payload);
            for i in 0..args.num_records {
                let due = origin + interval * u32::try_from(i).unwrap_or(u32::MAX);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
                let sent = u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX);
                payload[..SEND_TIME_BYTES].copy_from_slice(&sent.to_be_bytes());
                loop {
                    match producer.send(BaseRecord::<(), [u8]>::to(topic).payload(&payload)) {
                        Ok(()) => break,
                        Err((
                            rdkafka::error::KafkaError::MessageProduction(
                                rdkafka::types::RDKafkaErrorCode::QueueFull,
                            ),
                            _,
                        )) => {
                            producer.poll(Duration::from_millis(1));
                        }
                        Err((error, _)) => return Err(error).context("sending a record"),
                    }
                }
                producer.poll(Duration::ZERO);
            }
            producer
                .flush(ROUND_TRIP_TIMEOUT)
                .context("waiting for the last acknowledgements")
        });
        let mut last_arrival = Instant::now();
        while latencies.count() < args.num_records {
            anyhow::ensure!(
                last_arrival.elapsed() < ROUND_TRIP_TIMEOUT,
                "no record read for {ROUND_TRIP_TIMEOUT:?} after {} of {}",
                latencies.count(),
                args.num_records
            );
            match consumer.poll(Duration::from_millis(100)) {
                Some(Ok(message)) => {
                    let arrived = origin.elapsed();
                    last_arrival = Instant::now();
                    let sent = message
                        .payload()
                        .and_then(|p| p.get(..SEND_TIME_BYTES))
                        .and_then(|b| <[u8; SEND_TIME_BYTES]>::try_from(b).ok())
                        .map(u64::from_be_bytes)
                        .context("a record without its send time")?;
                    latencies.record(arrived.saturating_sub(Duration::from_nanos(sent)));
                    progress.set_position(latencies.count());
                }
                Some(Err(error)) => return Err(error).context("consuming"),
                None => {}
            }
        }
        sender
            .join()
            .map_err(|_| anyhow::anyhow!("the sending thread panicked"))?
    })?;
    progress.finish_and_clear();
    let mut report = report(args, &latencies, origin.elapsed());
    report.warm_up_ms = Some(warm_up.as_secs_f64() * 1000.0);
    Ok(report)
}

/// Sends one record and reads it back before the paced run: a new producer's first send
/// waits for the topic's metadata and a connection to the leader (tens of ms), and at 10,000
/// records/s every record queued behind it would carry that wait, the steady state measured
/// after.
fn warm_up(
    args: &LatencyArgs,
    producer: &BaseProducer,
    consumer: &BaseConsumer,
) -> anyhow::Result<Duration> {
    let payload = vec![0u8; args.record_size];
    let sent = Instant::now();
    producer
        .send(BaseRecord::<(), [u8]>::to(&args.common.topic).payload(payload.as_slice()))
        .map_err(|(error, _)| error)
        .context("sending the warm-up record")?;
    loop {
        let left = ROUND_TRIP_TIMEOUT.saturating_sub(sent.elapsed());
        anyhow::ensure!(
            !left.is_zero(),
            "the warm-up record was not read back within {ROUND_TRIP_TIMEOUT:?}"
        );
        producer.poll(Duration::ZERO);
        match consumer.poll(left.min(Duration::from_millis(10))) {
            Some(Ok(_)) => return Ok(sent.elapsed()),
            Some(Err(error)) => return Err(error).context("consuming the warm-up record"),
            None => {}
        }
    }
}

/// EndToEndLatency.createTopic: the topic with 1 partition and replication factor 1.
fn create_topic(bootstrap: &str, topic: &str, props: &[String]) -> anyhow::Result<()> {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    println!(
        "Topic \"{topic}\" does not exist. Will create topic with 1 partition(s) and replication factor = 1"
    );
    let admin: AdminClient<DefaultClientContext> = client_config(bootstrap, &[], props)?
        .create()
        .context("creating the admin client")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting a runtime")?;
    let created = runtime.block_on(admin.create_topics(
        &[NewTopic::new(topic, 1, TopicReplication::Fixed(1))],
        &AdminOptions::new().operation_timeout(Some(ROUND_TRIP_TIMEOUT)),
    ));
    let outcome =
        created
            .map_err(anyhow::Error::from)
            .and_then(|results| match results.into_iter().next() {
                Some(Err((_, code))) => Err(anyhow::anyhow!("{code}")),
                _ => Ok(()),
            });
    if outcome.is_err() {
        println!("Creation of topic {topic} failed");
    }
    outcome
}
