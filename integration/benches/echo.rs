//! The machine's floor: a plain tokio TCP echo on loopback (size-prefixed frames, one request in
//! flight per connection), on 1, 8 and 64 connections.
//!
//! `cargo bench -p gregor-integration --bench echo -- [--secs 3] [--request-bytes 64]
//! [--response-bytes 64] [--connections 1,8,64]`
//!
//! Frame sizes include the 4-byte size prefix. `gregor-churn --echo-baseline` runs the same
//! echo with the churn run's own mean frame sizes.

use std::time::Duration;

use gregor_integration::churn::echo::{measure, EchoServer};

struct Opts {
    secs: f64,
    request_bytes: usize,
    response_bytes: usize,
    connections: Vec<usize>,
}

fn parse() -> Result<Opts, String> {
    let mut opts = Opts {
        secs: 3.0,
        request_bytes: 64,
        response_bytes: 64,
        connections: vec![1, 8, 64],
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            // cargo bench passes --bench to harness=false targets.
            "--bench" => {}
            "--secs" => opts.secs = value()?.parse().map_err(|e| format!("--secs: {e}"))?,
            "--request-bytes" => {
                opts.request_bytes = value()?
                    .parse()
                    .map_err(|e| format!("--request-bytes: {e}"))?
            }
            "--response-bytes" => {
                opts.response_bytes = value()?
                    .parse()
                    .map_err(|e| format!("--response-bytes: {e}"))?
            }
            "--connections" => {
                opts.connections = value()?
                    .split(',')
                    .map(|c| c.trim().parse().map_err(|e| format!("--connections: {e}")))
                    .collect::<Result<_, _>>()?
            }
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if !(opts.secs > 0.0 && opts.secs.is_finite()) {
        return Err("--secs must be positive".into());
    }
    Ok(opts)
}

fn main() -> std::process::ExitCode {
    let opts = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("echo bench: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let result = (|| -> anyhow::Result<()> {
        let server = EchoServer::start(2)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        println!("| setup | frames (req -> resp) | rate | p50 | p99 |\n|---|---|---|---|---|");
        for &c in &opts.connections {
            let r = rt.block_on(measure(
                server.addr,
                c,
                opts.request_bytes,
                opts.response_bytes,
                Duration::from_secs_f64(opts.secs),
            ))?;
            println!(
                "| tokio echo, {c} connection(s) | {} B -> {} B | {:.0} rt/s | {} us | {} us |",
                r.request_bytes,
                r.response_bytes,
                r.round_trips_per_s,
                r.latency.p50_us,
                r.latency.p99_us
            );
        }
        Ok(())
    })();
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("echo bench: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
