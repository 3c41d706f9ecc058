//! Requests per second for ApiVersions and a 1-topic Metadata on 1 and 8 connections (one
//! request in flight on each), each measured side by side with a tokio echo of the same frame
//! sizes on the same number of connections, so the ratio reads as a fraction of the machine's
//! floor.
//!
//! `GREGOR_BIN=target/release/gregor cargo bench -p gregor-integration --bench request_rate --
//! [--secs 5] [--connections 1,8] [--rounds 1] [--bootstrap host:port]`
//!
//! On a small shared machine the echo's own rate moves by a third from one run to the next, so
//! one pair of measurements says little; `--rounds N` alternates the node's slice and the echo's
//! N times per case and ends with each case's median ratio over the N pairs.
//!
//! Without `--bootstrap` it starts its own node (`GREGOR_BIN`, default `target/release/gregor`
//! when built, else `target/debug/gregor`) on ephemeral ports.

use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use gregor_integration::admin::{creatable, create_topics, metadata};
use gregor_integration::churn::conn::ChurnConn;
use gregor_integration::churn::echo::{measure, EchoServer};
use gregor_integration::churn::stats::{new_histogram, Percentiles};
use gregor_integration::GregorNode;
use kafka_protocol::messages::{ApiVersionsRequest, MetadataRequest};
use kafka_protocol::protocol::StrBytes;

const TOPIC: &str = "bench-rate-1";

#[derive(Clone, Copy, Debug)]
enum Kind {
    ApiVersions,
    Metadata,
}

struct Opts {
    secs: f64,
    connections: Vec<usize>,
    rounds: usize,
    bootstrap: Option<String>,
}

fn parse() -> anyhow::Result<Opts> {
    let mut opts = Opts {
        secs: 5.0,
        connections: vec![1, 8],
        rounds: 1,
        bootstrap: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--bench" => {}
            "--secs" => opts.secs = args.next().context("--secs needs a value")?.parse()?,
            "--connections" => {
                opts.connections = args
                    .next()
                    .context("--connections needs a value")?
                    .split(',')
                    .map(|c| c.trim().parse::<usize>())
                    .collect::<Result<_, _>>()?
            }
            "--rounds" => opts.rounds = args.next().context("--rounds needs a value")?.parse()?,
            "--bootstrap" => {
                opts.bootstrap = Some(args.next().context("--bootstrap needs a value")?)
            }
            other => bail!("unknown argument {other:?}"),
        }
    }
    if !(opts.secs > 0.0 && opts.secs.is_finite()) {
        bail!("--secs must be positive");
    }
    if opts.rounds == 0 {
        bail!("--rounds must be at least 1");
    }
    Ok(opts)
}

/// One closed-loop round of `kind` on `conns` connections for `secs`; returns (rate,
/// latency, request bytes, response bytes).
async fn run_kind(
    addr: &str,
    kind: Kind,
    conns: usize,
    secs: f64,
) -> anyhow::Result<(f64, Percentiles, usize, usize)> {
    let mut clients = Vec::new();
    for _ in 0..conns {
        clients.push(ChurnConn::connect(addr, "bench-rate", Duration::from_secs(30), None).await?);
    }
    let deadline = Instant::now() + Duration::from_secs_f64(secs);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for mut c in clients {
        tasks.push(tokio::spawn(async move {
            let mut h = new_histogram();
            let (mut n, mut rq, mut rs) = (0u64, 0usize, 0usize);
            let api = ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("bench"))
                .with_client_software_version(StrBytes::from_static_str("1"));
            let md: MetadataRequest = metadata(c.versions.metadata, Some(&[TOPIC]), false);
            while Instant::now() < deadline {
                let (lat, q, s) = match kind {
                    Kind::ApiVersions => {
                        let a = c.call(&api, c.versions.api_versions).await?;
                        (a.latency, a.request_bytes, a.response_bytes)
                    }
                    Kind::Metadata => {
                        let a = c.call(&md, c.versions.metadata).await?;
                        if a.body.topics.first().map(|t| t.error_code) != Some(0) {
                            bail!("Metadata for {TOPIC} answered an error");
                        }
                        (a.latency, a.request_bytes, a.response_bytes)
                    }
                };
                let _ = h.record(u64::try_from(lat.as_micros()).unwrap_or(u64::MAX).max(1));
                n += 1;
                rq = q;
                rs = s;
            }
            anyhow::Ok((n, h, rq, rs))
        }));
    }
    let mut all = new_histogram();
    let (mut total, mut rq, mut rs) = (0, 0, 0);
    for t in tasks {
        let (n, h, q, s) = t.await??;
        total += n;
        let _ = all.add(&h);
        rq = q;
        rs = s;
    }
    let rate = total as f64 / started.elapsed().as_secs_f64();
    Ok((rate, Percentiles::of(&all), rq, rs))
}

async fn bench(opts: &Opts, addr: &str) -> anyhow::Result<()> {
    let mut c = ChurnConn::connect(addr, "bench-rate", Duration::from_secs(30), None).await?;
    let _ = c
        .call(
            &create_topics(vec![creatable(TOPIC, 1, 1)], false),
            c.versions.create_topics,
        )
        .await?;
    let echo = EchoServer::start(2)?;
    println!("| request | connections | frames (req -> resp) | Gregor req/s | p50 | p99 | echo rt/s | echo p50 | Gregor / echo |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut ratios_by_case = Vec::new();
    for kind in [Kind::ApiVersions, Kind::Metadata] {
        for &n in &opts.connections {
            let mut ratios = Vec::with_capacity(opts.rounds);
            for _ in 0..opts.rounds {
                let (rate, lat, rq, rs) = run_kind(addr, kind, n, opts.secs).await?;
                let e = measure(echo.addr, n, rq, rs, Duration::from_secs_f64(opts.secs)).await?;
                let ratio = rate / e.round_trips_per_s.max(1e-9);
                ratios.push(ratio);
                println!(
                    "| {kind:?} | {n} | {rq} B -> {rs} B | {rate:.0} | {} us | {} us | {:.0} | {} us | {ratio:.2} |",
                    lat.p50_us,
                    lat.p99_us,
                    e.round_trips_per_s,
                    e.latency.p50_us,
                );
            }
            ratios_by_case.push((kind, n, ratios));
        }
    }
    if opts.rounds > 1 {
        println!();
        for (kind, n, mut ratios) in ratios_by_case {
            ratios.sort_by(f64::total_cmp);
            println!(
                "{kind:?}, {n} connection(s): median Gregor / echo {:.2} over {} pairs ({:.2} to {:.2})",
                median(&ratios),
                ratios.len(),
                ratios.first().copied().unwrap_or_default(),
                ratios.last().copied().unwrap_or_default(),
            );
        }
    }
    Ok(())
}

/// The middle of sorted `values` (the mean of the two middle ones for an even count).
fn median(sorted: &[f64]) -> f64 {
    match sorted.len() {
        0 => 0.0,
        len if len % 2 == 1 => sorted[len / 2],
        len => (sorted[len / 2 - 1] + sorted[len / 2]) / 2.0,
    }
}

fn main() -> std::process::ExitCode {
    let result = (|| -> anyhow::Result<()> {
        let opts = parse()?;
        if std::env::var_os("GREGOR_BIN").is_none() {
            let release =
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/release/gregor");
            if release.exists() {
                std::env::set_var("GREGOR_BIN", release);
            }
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        match &opts.bootstrap {
            Some(addr) => rt.block_on(bench(&opts, addr)),
            None => {
                let node = GregorNode::start(&[])?;
                eprintln!(
                    "started {} on {}",
                    gregor_integration::binary_path().display(),
                    node.bootstrap()
                );
                rt.block_on(bench(&opts, &node.bootstrap()))
            }
        }
    })();
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("request_rate bench: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
