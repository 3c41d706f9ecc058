//! The Prometheus exporter: a recorder installed once per process and a `/metrics` endpoint.
//!
//! The endpoint is served here with hyper rather than by the exporter crate's own HTTP listener
//! because that listener does not report the address it bound (`metrics.listener` may name port
//! 0) and has no connection limit or timeouts.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use metrics_process::Collector;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::names;

/// Bucket bounds for latency histograms, in seconds (50 us .. 30 s).
const LATENCY_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0, 30.0,
];

/// Bucket bounds for log flush times, in milliseconds (0.1 ms .. 30 s), the unit of Kafka's
/// `LogFlushRateAndTimeMs`.
const FLUSH_MS_BUCKETS: &[f64] = &[
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0,
    10000.0, 30000.0,
];

/// Bucket bounds for request sizes, in bytes (64 B .. 64 MiB).
const SIZE_BUCKETS: &[f64] = &[
    64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
    67108864.0,
];

/// How often histogram buffers are drained into the exporter's state.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// How often the worker threads' busy time is sampled for the idle ratio.
const IDLE_SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// Samples the idle ratio spans, so one busy or quiet second moves it by a fifth (Kafka's
/// processor idle meter also averages over a window of samples).
const IDLE_WINDOW_SAMPLES: usize = 5;

/// Scrapes served at once; more connections are closed at accept, so a flood of scrapers
/// cannot exhaust the node's file descriptors.
const MAX_SCRAPE_CONNECTIONS: usize = 16;

/// How long a client has to send its request head.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one connection may take from accept to the last byte written; a scraper that reads
/// slower than this is cut off.
const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);

/// The only path served.
const METRICS_PATH: &str = "/metrics";

/// Prometheus text exposition format.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Installs the Prometheus recorder as the process-wide `metrics` recorder and registers the
/// HELP text of every metric.
pub fn install_recorder() -> Result<PrometheusHandle, BuildError> {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)?
        .set_buckets_for_metric(Matcher::Full(names::REQUEST_BYTES.into()), SIZE_BUCKETS)?
        .set_buckets_for_metric(
            Matcher::Full(names::LOG_FLUSH_RATE_AND_TIME_MS.into()),
            FLUSH_MS_BUCKETS,
        )?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(BuildError::FailedToSetGlobalRecorder)?;
    crate::describe::describe_all();
    Ok(handle)
}

/// What a scrape renders: the recorder's state plus the process metrics, read at scrape time.
#[derive(Clone)]
struct Scrape {
    handle: PrometheusHandle,
    process: Arc<Collector>,
}

impl Scrape {
    fn render(&self) -> String {
        self.process.collect();
        self.handle.run_upkeep();
        render_all(&self.handle)
    }
}

/// The recorder's families, then those kept outside its registry because they can be removed:
/// the broker topic metrics, the partition logs' gauges (read from the logs at this scrape) and
/// the series that leave with their quota sensor. No name is in two of them, so each family is
/// rendered once, whole.
fn render_all(handle: &PrometheusHandle) -> String {
    let mut body = handle.render();
    crate::topics::render(&mut body);
    crate::partition_logs::render(&mut body);
    crate::removable::render(&mut body);
    body
}

/// Serves `GET` and `HEAD /metrics` over HTTP/1.1 on an already-bound listener until the task
/// is dropped. One request per connection; at most [`MAX_SCRAPE_CONNECTIONS`] at once, each cut
/// off after [`CONNECTION_TIMEOUT`].
pub async fn serve(listener: TcpListener, handle: PrometheusHandle) {
    let process = Collector::default();
    process.describe();
    let scrape = Scrape {
        handle: handle.clone(),
        process: Arc::new(process),
    };
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP_INTERVAL);
        loop {
            tick.tick().await;
            handle.run_upkeep();
        }
    });
    metrics::gauge!(names::REQUEST_QUEUE_SIZE).increment(0.0);
    tokio::spawn(sample_worker_idle(tokio::runtime::Handle::current()));
    let slots = Arc::new(Semaphore::new(MAX_SCRAPE_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::warn!(%error, "metrics listener accept failed");
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!("metrics endpoint busy: connection closed");
            continue;
        };
        let scrape = scrape.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let response = respond(&request, &scrape);
                async move { Ok::<_, Infallible>(response) }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), service);
            match tokio::time::timeout(CONNECTION_TIMEOUT, connection).await {
                Ok(Ok(())) => {}
                Ok(Err(error)) => tracing::debug!(%error, "metrics connection failed"),
                Err(_) => tracing::debug!("metrics connection timed out"),
            }
            drop(slot);
        });
    }
}

/// Keeps `kafka_network_socketserver_networkprocessoravgidlepercent` up to date from the
/// runtime's per-worker busy time. Gregor's connections run on the runtime's worker threads,
/// which play the part of Kafka's network processors.
async fn sample_worker_idle(runtime: tokio::runtime::Handle) {
    let gauge = metrics::gauge!(names::NETWORK_PROCESSOR_AVG_IDLE);
    gauge.set(1.0);
    let busy_total = || {
        let metrics = runtime.metrics();
        let workers = metrics.num_workers();
        let busy: Duration = (0..workers)
            .map(|worker| metrics.worker_total_busy_duration(worker))
            .sum();
        (busy, workers)
    };
    let mut window = std::collections::VecDeque::with_capacity(IDLE_WINDOW_SAMPLES + 1);
    window.push_back((std::time::Instant::now(), busy_total().0));
    let mut tick = tokio::time::interval(IDLE_SAMPLE_INTERVAL);
    tick.tick().await;
    loop {
        tick.tick().await;
        let (busy, workers) = busy_total();
        let now = std::time::Instant::now();
        window.push_back((now, busy));
        if window.len() > IDLE_WINDOW_SAMPLES + 1 {
            window.pop_front();
        }
        if let Some(&(since, busy_then)) = window.front() {
            gauge.set(idle_ratio(
                busy.saturating_sub(busy_then),
                now.duration_since(since),
                workers,
            ));
        }
    }
}

/// The share of `workers` threads' time over `elapsed` not spent busy, in 0..=1.
fn idle_ratio(busy: Duration, elapsed: Duration, workers: usize) -> f64 {
    let capacity = elapsed.as_secs_f64() * workers as f64;
    if capacity <= 0.0 {
        return 1.0;
    }
    (1.0 - busy.as_secs_f64() / capacity).clamp(0.0, 1.0)
}

/// Binds `addr` for the metrics endpoint.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// 200 with the exposition for GET and HEAD of `/metrics` (hyper leaves out the body of a HEAD
/// answer and keeps its Content-Length), 405 for other methods there, 404 elsewhere.
fn respond<B>(request: &Request<B>, scrape: &Scrape) -> Response<Full<Bytes>> {
    let (status, body) = if request.uri().path() != METRICS_PATH {
        (
            StatusCode::NOT_FOUND,
            "not found: try /metrics\n".to_owned(),
        )
    } else if request.method() == Method::GET || request.method() == Method::HEAD {
        (StatusCode::OK, scrape.render())
    } else {
        (
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed: use GET or HEAD\n".to_owned(),
        )
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE));
    if status == StatusCode::METHOD_NOT_ALLOWED {
        headers.insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_types_each_family_once() {
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::with_local_recorder(&recorder, || {
            crate::describe::describe_all();
            let appended = crate::ProduceOutcome::Appended {
                messages: 1,
                bytes: 10,
            };
            crate::topic_produce("exporter-test", appended);
            crate::topic_fetches("exporter-test", 1, 0, 10);
            crate::connection_opened("PLAINTEXT");
            crate::RequestMetrics::default().record_request(
                "Produce",
                9,
                &crate::RequestTimings::default(),
            );
        });
        struct Rate;
        impl crate::removable::SeriesValue for Rate {
            fn series_value(&self, _series: &'static str) -> f64 {
                1.0
            }
        }
        let rate: Arc<dyn crate::removable::SeriesValue> = Arc::new(Rate);
        let _quota =
            crate::quota_sensor_metrics("Produce", "", "exporter-test", Arc::downgrade(&rate));
        let body = render_all(&handle);
        let mut typed = std::collections::HashSet::new();
        for line in body.lines() {
            if let Some(name) = line.strip_prefix("# TYPE ") {
                let name = name.split(' ').next().unwrap_or_default();
                assert!(typed.insert(name.to_owned()), "{name} typed twice:\n{body}");
            }
        }
        for name in [
            names::TOPIC_MESSAGES_IN_TOTAL,
            names::TOPIC_FETCH_REQUESTS_TOTAL,
            names::REQUESTS_TOTAL,
            names::QUOTA_THROTTLE_TIME,
        ] {
            assert!(typed.contains(name), "{name} not in the scrape:\n{body}");
        }
        assert!(body.contains(&format!(
            "{}{{topic=\"exporter-test\"}} 1\n",
            names::TOPIC_MESSAGES_IN_TOTAL
        )));
    }

    #[test]
    fn idle_ratio_is_the_share_of_worker_time_not_busy() {
        let second = Duration::from_secs(1);
        // Two workers over 5 s have 10 s of time; 2.5 s busy leaves 75% idle.
        assert_eq!(idle_ratio(Duration::from_millis(2500), second * 5, 2), 0.75);
        assert_eq!(idle_ratio(Duration::ZERO, second, 2), 1.0);
        // Busy time sampled a little after the clock can exceed the window: never below 0.
        assert_eq!(idle_ratio(second * 3, second, 2), 0.0);
        assert_eq!(idle_ratio(Duration::ZERO, Duration::ZERO, 2), 1.0);
        assert_eq!(idle_ratio(Duration::ZERO, second, 0), 1.0);
    }
}
