//! The Prometheus exporter: a recorder installed once per process and a `/metrics` endpoint.
//!
//! The endpoint is served here rather than by the exporter crate's own HTTP listener because
//! that listener does not report the address it bound, and `metrics.listener` may name port 0.

use std::net::SocketAddr;
use std::time::Duration;

use metrics_exporter_prometheus::{BuildError, Matcher, PrometheusBuilder, PrometheusHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::names;

/// Bucket bounds for latency histograms, in seconds (50 us .. 30 s).
const LATENCY_BUCKETS: &[f64] = &[
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
    2.5, 5.0, 10.0, 30.0,
];

/// Bucket bounds for request sizes, in bytes (64 B .. 64 MiB).
const SIZE_BUCKETS: &[f64] = &[
    64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
    67108864.0,
];

/// How often histogram buffers are drained into the exporter's state.
const UPKEEP_INTERVAL: Duration = Duration::from_secs(5);

/// Largest HTTP request head the endpoint reads; scrapers send a few hundred bytes.
const MAX_HTTP_HEAD: usize = 8192;

/// Installs the Prometheus recorder as the process-wide `metrics` recorder.
pub fn install_recorder() -> Result<PrometheusHandle, BuildError> {
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), LATENCY_BUCKETS)?
        .set_buckets_for_metric(Matcher::Full(names::REQUEST_BYTES.into()), SIZE_BUCKETS)?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(BuildError::FailedToSetGlobalRecorder)?;
    Ok(handle)
}

/// Serves `GET /metrics` on an already-bound listener until the task is dropped.
pub async fn serve(listener: TcpListener, handle: PrometheusHandle) {
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP_INTERVAL);
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let handle = handle.clone();
                tokio::spawn(async move {
                    if let Err(error) = answer(stream, &handle).await {
                        tracing::debug!(%error, "metrics scrape failed");
                    }
                });
            }
            Err(error) => tracing::warn!(%error, "metrics listener accept failed"),
        }
    }
}

/// Binds `addr` for the metrics endpoint.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

async fn answer(mut stream: TcpStream, handle: &PrometheusHandle) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = stream.read(&mut chunk).await?;
        if read == 0 || head.len() + read > MAX_HTTP_HEAD {
            return Ok(());
        }
        head.extend_from_slice(&chunk[..read]);
    }
    let request_line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let path = request_line
        .split(|b| *b == b' ')
        .nth(1)
        .unwrap_or_default();
    let (status, body) = if request_line.starts_with(b"GET ") && path.starts_with(b"/metrics") {
        handle.run_upkeep();
        let mut body = handle.render();
        crate::removable::render(&mut body);
        append_process_metrics(&mut body);
        ("200 OK", body)
    } else {
        ("404 Not Found", "not found: try /metrics\n".to_owned())
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

/// Appends the process's resident memory, read from `/proc/self/statm` at scrape time.
fn append_process_metrics(body: &mut String) {
    let Some(resident_pages) = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|statm| statm.split_whitespace().nth(1)?.parse::<u64>().ok())
    else {
        return;
    };
    let bytes = resident_pages * PAGE_SIZE;
    let name = names::PROCESS_RESIDENT_MEMORY_BYTES;
    body.push_str(&format!(
        "# HELP {name} Resident memory size in bytes.\n# TYPE {name} gauge\n{name} {bytes}\n"
    ));
}

/// statm counts pages; 4 KiB is the page size of Linux on x86_64 and of default aarch64 kernels.
const PAGE_SIZE: u64 = 4096;
