//! `gregor-perf handshakes`: how many SASL authentications a node completes per second. Each
//! task opens a connection, authenticates with the node's own client code (the one its peers
//! use: SaslHandshake v1, SaslAuthenticate v1, PLAIN or SCRAM with the server signature
//! checked), closes it and starts again, until the duration is up.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use gregor_node::config::SaslMechanism;
use gregor_node::config_security::ClientSasl;

use super::args::HandshakeArgs;
use super::report::{Latencies, Report};

/// The node's user + system CPU time so far, from `/proc/<pid>/stat` (clock ticks of 10 ms,
/// Linux's USER_HZ).
fn cpu_time(pid: u32) -> anyhow::Result<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .context("unexpected /proc stat format")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after the name.
    let ticks = |i: usize| -> anyhow::Result<u64> {
        Ok(fields
            .get(i)
            .context("unexpected /proc stat format")?
            .parse()?)
    };
    Ok(Duration::from_millis((ticks(11)? + ticks(12)?) * 10))
}

async fn one_handshake(address: &str, sasl: &ClientSasl) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .with_context(|| format!("connecting to {address}"))?;
    stream.set_nodelay(true)?;
    gregor_node::network::peer::authenticate(&mut stream, sasl)
        .await
        .map_err(|e| anyhow::anyhow!("authentication failed: {e}"))?;
    Ok(started.elapsed())
}

pub fn run(args: &HandshakeArgs) -> anyhow::Result<Report> {
    let mechanism = SaslMechanism::from_name(&args.mechanism)
        .with_context(|| format!("unknown mechanism {}", args.mechanism))?;
    let sasl = ClientSasl {
        mechanism,
        username: args.username.clone(),
        password: args.password.clone(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let cpu_before = args.pid.map(cpu_time).transpose()?;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.duration);
    let results = runtime.block_on(async {
        let tasks: Vec<_> = (0..args.concurrency)
            .map(|_| {
                let address = args.bootstrap_server.clone();
                let sasl = sasl.clone();
                tokio::spawn(async move {
                    let mut latencies = Latencies::default();
                    while Instant::now() < deadline {
                        latencies.record(one_handshake(&address, &sasl).await?);
                    }
                    Ok::<_, anyhow::Error>(latencies)
                })
            })
            .collect();
        let mut all = Vec::new();
        for task in tasks {
            all.push(task.await.context("a handshake task panicked")??);
        }
        Ok::<_, anyhow::Error>(all)
    })?;
    let elapsed = started.elapsed();
    let cpu = match (args.pid, cpu_before) {
        (Some(pid), Some(before)) => Some(cpu_time(pid)?.saturating_sub(before)),
        _ => None,
    };
    let mut merged = Latencies::default();
    let mut count = 0;
    for latencies in &results {
        count += latencies.count();
        merged.merge(latencies);
    }
    let mut report = Report::new("handshakes", "", count, 0, elapsed);
    report.latency = Some(merged.summary());
    println!(
        "{count} {} handshakes in {:.1} s: {:.0} handshakes/s with {} connections at once, \
         {:.2} ms avg latency, {:.2} ms 50th, {:.2} ms 99th.{}",
        args.mechanism,
        elapsed.as_secs_f64(),
        report.records_per_s,
        args.concurrency,
        merged.mean_ms(),
        merged.quantile_ms(0.5),
        merged.quantile_ms(0.99),
        cpu.map(|cpu| format!(
            " Node CPU {:.0} ms in all, {:.3} ms per handshake.",
            cpu.as_secs_f64() * 1000.0,
            cpu.as_secs_f64() * 1000.0 / count.max(1) as f64
        ))
        .unwrap_or_default()
    );
    Ok(report)
}
