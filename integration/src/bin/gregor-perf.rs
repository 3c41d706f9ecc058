//! `gregor-perf`: produce, consume and end-to-end latency load. See
//! `gregor_integration::perf` and `gregor-perf --help`.
//!
//! Exit status: 0 after a complete run, 1 when the run failed or a record was not
//! acknowledged (no report file is written then), 2 for bad arguments.

use std::process::ExitCode;

use clap::Parser;
use gregor_integration::perf::{self, args::Mode, args::PerfArgs};

fn main() -> ExitCode {
    let args = match PerfArgs::try_parse() {
        Ok(args) => args,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 1 } else { 0 });
        }
    };
    if let Err(e) = args.validate() {
        eprintln!("gregor-perf: {e:#}");
        return ExitCode::from(1);
    }
    let outcome = match &args.mode {
        Mode::Produce(produce) => perf::produce::run(produce),
        Mode::Consume(consume) => perf::consume::run(consume),
        Mode::Latency(latency) => perf::latency::run(latency),
        Mode::Handshakes(handshakes) => perf::handshakes::run(handshakes),
    };
    let report = match outcome {
        Ok(report) => report,
        Err(e) => {
            eprintln!("gregor-perf: {e:#}");
            return ExitCode::from(1);
        }
    };
    if report.errors > 0 {
        return ExitCode::from(1);
    }
    if let Some(path) = args.json() {
        let written = serde_json::to_vec_pretty(&report)
            .map_err(|e| e.to_string())
            .and_then(|json| std::fs::write(path, json).map_err(|e| e.to_string()));
        if let Err(e) = written {
            eprintln!("gregor-perf: cannot write {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    ExitCode::SUCCESS
}
