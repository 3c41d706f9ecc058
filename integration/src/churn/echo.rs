//! The machine's floor: a minimal tokio TCP echo on loopback with Kafka-style size-prefixed
//! frames. The client sends a request frame of a chosen size whose first 4 body bytes say how
//! large the answer must be; the server answers with a frame of that size. With the same frame
//! sizes and the same number of connections (one request in flight on each), its round-trip
//! rate is what a broker doing no work at all could reach, so a broker's rate divided by it
//! reads as a fraction of the machine's limit.
//!
//! The server runs on its own 2-worker tokio runtime on its own threads, as a broker process
//! would, so client and server compete for the cores the way they do against a real node.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Mutex;

use super::stats::{new_histogram, Percentiles};

/// Largest frame either side accepts (keeps a stray client from allocating gigabytes).
const MAX_FRAME: usize = 16 * 1024 * 1024;

/// A running echo server; dropping it stops the runtime and closes the listener.
#[derive(Debug)]
pub struct EchoServer {
    /// Where it listens (`127.0.0.1:port`).
    pub addr: SocketAddr,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for EchoServer {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl EchoServer {
    /// Binds `127.0.0.1:0` and serves on a dedicated runtime with `workers` threads.
    pub fn start(workers: usize) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers.max(1))
            .thread_name("echo-server")
            .enable_all()
            .build()
            .context("starting the echo server runtime")?;
        // Bound with std so this works from inside another runtime (no block_on).
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").context("binding the echo server")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        runtime.spawn(async move {
            let Ok(listener) = TcpListener::from_std(listener) else {
                return;
            };
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let _ = serve(stream).await;
                });
            }
        });
        Ok(EchoServer {
            addr,
            runtime: Some(runtime),
        })
    }
}

async fn serve(mut stream: TcpStream) -> anyhow::Result<()> {
    stream.set_nodelay(true)?;
    let mut body = Vec::new();
    let mut reply = Vec::new();
    loop {
        let mut size = [0u8; 4];
        if stream.read_exact(&mut size).await.is_err() {
            return Ok(());
        }
        let size = usize::try_from(i32::from_be_bytes(size)).unwrap_or(usize::MAX);
        if !(4..=MAX_FRAME).contains(&size) {
            bail!("bad echo frame size {size}");
        }
        body.resize(size, 0);
        stream.read_exact(&mut body).await?;
        let want = usize::try_from(i32::from_be_bytes([body[0], body[1], body[2], body[3]]))
            .unwrap_or(0)
            .min(MAX_FRAME);
        reply.clear();
        reply.extend_from_slice(&(want as i32).to_be_bytes());
        reply.resize(4 + want, 0);
        stream.write_all(&reply).await?;
    }
}

/// What one echo measurement found.
#[derive(Debug, Clone, Serialize)]
pub struct EchoResult {
    /// Connections, one request in flight on each.
    pub connections: usize,
    /// Request frame size on the wire (with the 4-byte prefix).
    pub request_bytes: usize,
    /// Response frame size on the wire (with the prefix).
    pub response_bytes: usize,
    /// Round trips completed.
    pub round_trips: u64,
    /// How long it ran.
    pub seconds: f64,
    /// Round trips per second.
    pub round_trips_per_s: f64,
    /// Round-trip latency.
    pub latency: Percentiles,
}

/// One client connection of the echo, for the rate benches that reuse it.
#[derive(Debug)]
pub struct EchoConn {
    stream: TcpStream,
    request: Vec<u8>,
    response: Vec<u8>,
}

impl EchoConn {
    /// Connects; each round trip sends `request_bytes` and expects `response_bytes` (frame
    /// sizes with the prefix; at least 8 and 4).
    pub async fn connect(
        addr: SocketAddr,
        request_bytes: usize,
        response_bytes: usize,
    ) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr)
            .await
            .with_context(|| format!("connecting to the echo server at {addr}"))?;
        stream.set_nodelay(true)?;
        let request_bytes = request_bytes.clamp(8, MAX_FRAME);
        let response_bytes = response_bytes.clamp(4, MAX_FRAME);
        let mut request = vec![0u8; request_bytes];
        request[..4].copy_from_slice(&((request_bytes - 4) as i32).to_be_bytes());
        request[4..8].copy_from_slice(&((response_bytes - 4) as i32).to_be_bytes());
        Ok(EchoConn {
            stream,
            request,
            response: vec![0u8; response_bytes],
        })
    }

    /// One round trip.
    pub async fn round_trip(&mut self) -> anyhow::Result<()> {
        self.stream.write_all(&self.request).await?;
        self.stream.read_exact(&mut self.response).await?;
        Ok(())
    }
}

/// Runs `connections` closed-loop clients against `addr` for `duration`.
pub async fn measure(
    addr: SocketAddr,
    connections: usize,
    request_bytes: usize,
    response_bytes: usize,
    duration: Duration,
) -> anyhow::Result<EchoResult> {
    let hist = Arc::new(Mutex::new(new_histogram()));
    let mut conns = Vec::with_capacity(connections);
    for _ in 0..connections.max(1) {
        conns.push(EchoConn::connect(addr, request_bytes, response_bytes).await?);
    }
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::new();
    for mut conn in conns {
        let hist = hist.clone();
        tasks.push(tokio::spawn(async move {
            // Each task keeps its own histogram and merges once, so the loop has no lock.
            let mut local: Histogram<u64> = new_histogram();
            let mut n = 0u64;
            while Instant::now() < deadline {
                let t = Instant::now();
                conn.round_trip().await?;
                let us = u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX);
                let _ = local.record(us.max(1));
                n += 1;
            }
            let _ = hist.lock().await.add(&local);
            anyhow::Ok(n)
        }));
    }
    let mut round_trips = 0;
    for task in tasks {
        round_trips += task.await.context("echo client task")??;
    }
    let seconds = started.elapsed().as_secs_f64();
    let latency = Percentiles::of(&*hist.lock().await);
    Ok(EchoResult {
        connections: connections.max(1),
        request_bytes: request_bytes.clamp(8, MAX_FRAME),
        response_bytes: response_bytes.clamp(4, MAX_FRAME),
        round_trips,
        seconds,
        round_trips_per_s: round_trips as f64 / seconds.max(1e-9),
        latency,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn echo_answers_with_the_asked_size() {
        let server = EchoServer::start(1).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let result = rt
            .block_on(measure(
                server.addr,
                2,
                100,
                300,
                Duration::from_millis(200),
            ))
            .unwrap();
        assert!(result.round_trips > 10, "{result:?}");
        assert_eq!(result.request_bytes, 100);
        assert_eq!(result.response_bytes, 300);
    }
}
