//! `gregor-churn`: synthetic partition churn against any Kafka-compatible broker.
//!
//! ```text
//!  connect (ApiVersions first) ─▶ fill to --live-partitions ─▶ measured phase ─▶ scrape ─▶ clean-up ─▶ echo
//!                                   (multi-topic creates)       │ workers: create / add / delete, paced
//!                                                               │ readers: Metadata of a random topic
//!                                                               │ probe: latest create seen elsewhere?
//!                                                               └ RSS sampler (--rss-interval)
//! ```
//!
//! [`run`] returns a [`report::Report`]; the binary prints it, writes JSON and the plot.

pub mod args;
pub mod conn;
pub mod echo;
pub mod plot;
pub mod report;
pub mod stats;
pub mod workload;

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use self::args::{parse_metrics_url, ChurnArgs, MetricsTarget};
use self::conn::ChurnConn;
use self::report::{
    BrokerMetrics, EchoReport, FillReport, OpReport, PropagationReport, Report, RssSample,
};
use self::stats::{Op, Percentiles};
use self::workload::{lock, Limits, Reconnect, Shared, Steering};
use crate::prom;

/// Topics per DeleteTopics request in the clean-up.
const CLEANUP_BATCH: usize = 100;

/// Connects to the first bootstrap server that answers ApiVersions.
async fn first_reachable(args: &ChurnArgs) -> anyhow::Result<(String, ChurnConn)> {
    let mut failures = Vec::new();
    for addr in &args.bootstrap_servers {
        match ChurnConn::connect(
            addr,
            &args.client_id,
            args.request_timeout,
            args.create_topics_version,
        )
        .await
        {
            Ok(conn) => return Ok((addr.clone(), conn)),
            Err(e) => failures.push(format!("{addr}: {e:#}")),
        }
    }
    bail!("no bootstrap server answered: {}", failures.join("; "))
}

fn client_id_for(args: &ChurnArgs, i: usize) -> String {
    if args.client_ids > 1 {
        format!("{}-{}", args.client_id, i % args.client_ids)
    } else {
        args.client_id.clone()
    }
}

async fn scrape(target: &MetricsTarget) -> anyhow::Result<Vec<prom::Sample>> {
    let resp = prom::http_get(&target.addr, &target.path).await?;
    if resp.status != 200 {
        bail!(
            "GET http://{}{} returned {}",
            target.addr,
            target.path,
            resp.status
        );
    }
    prom::parse(&resp.body)
}

fn sum_by(samples: &[prom::Sample], name: &str, label: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for s in prom::matching(samples, name, &[]) {
        let key = s.labels.get(label).cloned().unwrap_or_default();
        *out.entry(key).or_insert(0.0) += s.value;
    }
    out
}

fn errors_by(samples: &[prom::Sample]) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for s in prom::matching(samples, "kafka_network_requestmetrics_errors_total", &[]) {
        let error = s.labels.get("error").cloned().unwrap_or_default();
        if error == "NONE" {
            continue;
        }
        let request = s.labels.get("request").cloned().unwrap_or_default();
        *out.entry(format!("{request}/{error}")).or_insert(0.0) += s.value;
    }
    out
}

fn delta(before: &BTreeMap<String, f64>, after: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, d)| *d != 0.0)
        .collect()
}

fn rss_of(samples: &[prom::Sample]) -> Option<f64> {
    prom::value(samples, "process_resident_memory_bytes", &[])
}

fn progress_bar(args: &ChurnArgs, len: u64, what: &str) -> ProgressBar {
    if args.quiet || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    let template = format!("{what} [{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} {{msg}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar
}

/// Runs the whole tool: validation, connections, fill, measured phase, scrape, clean-up, echo.
/// Errors before the measured phase are returned; an error during it ends the run early and is
/// reported in `Report::error` with everything measured until then.
pub async fn run(args: ChurnArgs) -> anyhow::Result<Report> {
    args.validate()?;
    let seed = args.seed.unwrap_or_else(|| rand::rng().random());
    let topic_prefix = match &args.topic_prefix {
        Some(p) => p.clone(),
        None => format!("churn-{seed}-{:08x}", rand::rng().random::<u32>()),
    };
    let metrics = args
        .metrics_url
        .as_deref()
        .map(parse_metrics_url)
        .transpose()?;

    let (broker, first) = first_reachable(&args).await?;
    let versions = first.versions;
    let reconnect = |i: usize| Reconnect {
        addr: broker.clone(),
        client_id: client_id_for(&args, i),
        timeout: args.request_timeout,
        create_topics_version: args.create_topics_version,
    };
    let mut conns = vec![first];
    for i in 1..args.concurrency {
        conns.push(
            reconnect(i)
                .connect_now()
                .await
                .with_context(|| format!("opening connection {} of {}", i + 1, args.concurrency))?,
        );
    }
    let mut readers = Vec::new();
    for i in 0..args.metadata_readers {
        readers.push(
            reconnect(args.concurrency + i)
                .connect_now()
                .await
                .context("opening a metadata reader connection")?,
        );
    }
    // The probe asks another broker when there is one, else another connection to this one.
    let probe_broker = args
        .bootstrap_servers
        .iter()
        .find(|s| **s != broker)
        .cloned()
        .unwrap_or_else(|| broker.clone());
    let probe = ChurnConn::connect(
        &probe_broker,
        &args.client_id,
        args.request_timeout,
        args.create_topics_version,
    )
    .await
    .with_context(|| format!("opening the propagation probe connection to {probe_broker}"))?;

    let shared = Shared::new(&topic_prefix);
    let pp = args.partitions_per_topic as u64;
    let steering = Steering {
        mix: args.mix,
        partitions_per_topic: args.partitions_per_topic,
        add_partitions: args.add_partitions,
        target: args.live_partitions,
        band: pp.max(args.add_partitions as u64) * (args.concurrency as u64 + 1),
    };

    // Fill.
    let mut fill = None;
    if !args.no_fill && args.live_partitions >= pp {
        let bar = progress_bar(&args, args.live_partitions, "fill");
        let started = Instant::now();
        let mut tasks = Vec::new();
        let (batch, rf, honor) = (
            args.fill_batch,
            args.replication_factor,
            !args.ignore_throttle,
        );
        for conn in conns.drain(..) {
            let shared = shared.clone();
            let steering = steering.clone();
            tasks.push(tokio::spawn(async move {
                let result = workload::fill_worker(conn, shared, steering, batch, rf, honor).await;
                (result, ())
            }));
        }
        let ticker = {
            let shared = shared.clone();
            let bar = bar.clone();
            tokio::spawn(async move {
                loop {
                    bar.set_position(lock(&shared.pool).live_partitions);
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            })
        };
        let mut topics = 0;
        let mut first_error = None;
        for task in tasks {
            match task.await {
                Ok((Ok(n), ())) => topics += n,
                Ok((Err(e), ())) => {
                    shared.stop.store(true, std::sync::atomic::Ordering::SeqCst);
                    first_error.get_or_insert(e);
                }
                Err(join) => {
                    first_error.get_or_insert(anyhow::anyhow!("fill task failed: {join}"));
                }
            }
        }
        ticker.abort();
        bar.finish_and_clear();
        if let Some(e) = first_error {
            // Leave nothing behind: delete what the fill created before giving up.
            let leftovers = lock(&shared.pool).drain();
            if !args.keep_topics && !leftovers.is_empty() {
                if let Ok(conn) = reconnect(0).connect_now().await {
                    let _ = workload::cleanup_worker(conn, leftovers, CLEANUP_BATCH).await;
                }
            }
            return Err(e);
        }
        let seconds = started.elapsed().as_secs_f64();
        fill = Some(FillReport {
            topics,
            live_partitions: lock(&shared.pool).live_partitions,
            seconds,
            topics_per_s: topics as f64 / seconds.max(1e-9),
        });
        for i in 0..args.concurrency {
            conns.push(
                reconnect(i)
                    .connect_now()
                    .await
                    .context("re-opening connections after the fill")?,
            );
        }
    }

    let before =
        match &metrics {
            Some(target) => Some(scrape(target).await.with_context(|| {
                format!("scraping {}", args.metrics_url.as_deref().unwrap_or(""))
            })?),
            None => None,
        };

    // Measured phase.
    let live_partitions_start = lock(&shared.pool).live_partitions;
    lock(&shared.recorder).reset();
    let started = lock(&shared.recorder).started();
    let duration = args.effective_duration();
    let limits = Limits {
        rate: args.rate,
        ops: args.ops,
        deadline: duration.map(|d| started + d),
        honor_throttle: !args.ignore_throttle,
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut workers = Vec::new();
    for (i, conn) in conns.into_iter().enumerate() {
        workers.push(tokio::spawn(workload::mutation_worker(
            conn,
            reconnect(i),
            shared.clone(),
            steering.clone(),
            limits.clone(),
            started,
            args.replication_factor,
            StdRng::seed_from_u64(rng.random()),
        )));
    }
    let mut helpers = Vec::new();
    for conn in readers {
        helpers.push(tokio::spawn(workload::metadata_reader(
            conn,
            shared.clone(),
            StdRng::seed_from_u64(rng.random()),
        )));
    }
    helpers.push(tokio::spawn(workload::propagation_probe(
        probe,
        shared.clone(),
    )));
    let rss_samples = Arc::new(std::sync::Mutex::new(Vec::<RssSample>::new()));
    if let (Some(target), Some(every)) = (metrics.clone(), args.rss_interval) {
        let shared = shared.clone();
        let samples = rss_samples.clone();
        helpers.push(tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            while !shared.stop.load(std::sync::atomic::Ordering::SeqCst) {
                tick.tick().await;
                if let Ok(s) = scrape(&target).await {
                    if let Some(bytes) = rss_of(&s) {
                        let live = lock(&shared.pool).live_partitions;
                        lock(&samples).push(RssSample {
                            t_s: started.elapsed().as_secs_f64(),
                            bytes,
                            live_partitions: live,
                        });
                    }
                }
            }
        }));
    }
    let (len, by_ops) = match (args.ops, duration) {
        (Some(n), _) => (n, true),
        (None, Some(d)) => (d.as_secs().max(1), false),
        (None, None) => (1, false),
    };
    let bar = progress_bar(&args, len, "churn");
    let ticker = {
        let shared = shared.clone();
        let bar = bar.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let (mutations, errors, quota, transport, last) = {
                    let r = lock(&shared.recorder);
                    let n = r.intervals.len();
                    // The last complete second gives the live rate.
                    let last = if n >= 2 {
                        let i = &r.intervals[n - 2];
                        (
                            i.mutations,
                            i.metadata,
                            Percentiles::of(&i.mutation_latency).p99_us,
                        )
                    } else {
                        (0, 0, 0)
                    };
                    (
                        r.mutations(),
                        r.errors(),
                        r.quota_exceeded(),
                        r.transport_errors,
                        last,
                    )
                };
                let live = lock(&shared.pool).live_partitions;
                bar.set_position(if by_ops {
                    mutations
                } else {
                    started.elapsed().as_secs()
                });
                bar.set_message(format!(
                    "{} mut/s, {} md/s, p99 {:.1} ms | {mutations} ops, {errors} errors ({quota} quota, {transport} transport) | {live} live partitions",
                    last.0,
                    last.1,
                    last.2 as f64 / 1000.0
                ));
            }
        })
    };
    for w in workers {
        let _ = w.await;
    }
    let ended = Instant::now();
    shared.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    for h in helpers {
        let _ = h.await;
    }
    ticker.abort();
    bar.finish_and_clear();
    let duration_s = ended.duration_since(started).as_secs_f64();
    let error = lock(&shared.fatal).clone();

    // Broker side, at steady state, before the clean-up changes it.
    let broker_metrics = match (&metrics, before) {
        (Some(target), Some(before)) => {
            let after = scrape(target).await.ok();
            let after_samples = after.as_deref().unwrap_or(&[]);
            Some(BrokerMetrics {
                requests_delta: delta(
                    &sum_by(
                        &before,
                        "kafka_network_requestmetrics_requests_total",
                        "request",
                    ),
                    &sum_by(
                        after_samples,
                        "kafka_network_requestmetrics_requests_total",
                        "request",
                    ),
                ),
                errors_delta: delta(&errors_by(&before), &errors_by(after_samples)),
                rss_before_bytes: rss_of(&before),
                rss_after_bytes: rss_of(after_samples),
                rss_samples: std::mem::take(&mut *lock(&rss_samples)),
            })
        }
        _ => None,
    };

    let (live_partitions_end, live_topics_end) = {
        let pool = lock(&shared.pool);
        (pool.live_partitions, pool.live_topics)
    };
    let cleanup_deleted = if args.keep_topics {
        None
    } else {
        let topics = lock(&shared.pool).drain();
        let per_conn = topics.len().div_ceil(args.concurrency).max(1);
        let mut tasks = Vec::new();
        for (i, chunk) in topics.chunks(per_conn).enumerate() {
            let conn = reconnect(i).connect_now().await;
            let chunk = chunk.to_vec();
            tasks.push(tokio::spawn(async move {
                workload::cleanup_worker(conn?, chunk, CLEANUP_BATCH).await
            }));
        }
        let mut deleted = 0;
        for t in tasks {
            if let Ok(Ok(n)) = t.await {
                deleted += n;
            }
        }
        Some(deleted)
    };

    // Taken out of the mutex: every task has ended, and no guard may live across the echo.
    let recorder = std::mem::take(&mut *lock(&shared.recorder));
    let operations: Vec<OpReport> = Op::ALL
        .iter()
        .map(|op| OpReport::of(&recorder, *op, duration_s))
        .collect();
    let mut all = stats::new_histogram();
    for op in Op::ALL.iter().filter(|o| o.is_mutation()) {
        let _ = all.add(&recorder.op(*op).latency);
    }
    let mutations = recorder.mutations();
    let mutations_per_s = mutations as f64 / duration_s.max(1e-9);
    let mutation_latency = Percentiles::of(&all);
    let propagation = Some(PropagationReport {
        probe_broker,
        seen: recorder.propagation.len(),
        not_seen: recorder.propagation_not_seen,
        delay: Percentiles::of(&recorder.propagation),
    });

    let echo_baseline = if args.echo_baseline && mutations > 0 {
        let (req_bytes, resp_bytes) = {
            let (mut rq, mut rs) = (0u64, 0u64);
            for op in Op::ALL.iter().filter(|o| o.is_mutation()) {
                rq += recorder.op(*op).request_bytes;
                rs += recorder.op(*op).response_bytes;
            }
            ((rq / mutations) as usize, (rs / mutations) as usize)
        };
        let server = echo::EchoServer::start(2)?;
        let echo = echo::measure(
            server.addr,
            args.concurrency,
            req_bytes,
            resp_bytes,
            args.echo_duration,
        )
        .await?;
        Some(EchoReport {
            throughput_ratio: mutations_per_s / echo.round_trips_per_s.max(1e-9),
            latency_p50_multiple: mutation_latency.p50_us as f64
                / (echo.latency.p50_us.max(1)) as f64,
            echo,
        })
    } else {
        None
    };

    Ok(Report {
        seed,
        topic_prefix,
        broker,
        versions,
        fill,
        duration_s,
        mutations,
        mutations_per_s,
        mutation_latency,
        live_partitions_start,
        live_partitions_end,
        live_topics_end,
        errors: recorder.errors(),
        throttling_quota_exceeded: recorder.quota_exceeded(),
        transport_errors: recorder.transport_errors,
        operations,
        propagation,
        broker_metrics,
        echo_baseline,
        cleanup_deleted,
        timeline: report::timeline(&recorder),
        error,
        args,
    })
}
