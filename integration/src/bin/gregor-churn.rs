//! `gregor-churn`: synthetic partition churn against a Kafka-compatible broker. See
//! `gregor_integration::churn` and `gregor-churn --help`.
//!
//! Exit status: 0 after a complete run, 1 when the run could not start or ended early (the
//! report of what was measured is still printed, but no report file is written, so a file
//! always describes a complete run), 2 for bad arguments.

use std::path::Path;
use std::process::ExitCode;

use clap::Parser;
use gregor_integration::churn::{self, args::ChurnArgs};

fn main() -> ExitCode {
    let args = match ChurnArgs::try_parse() {
        Ok(args) => args,
        Err(e) => {
            // Help and version on stdout (exit 0), usage errors on stderr with exit 1, as Kafka's tools.
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 1 } else { 0 });
        }
    };
    if let Err(e) = args.validate() {
        eprintln!("gregor-churn: {e:#}");
        return ExitCode::from(1);
    }
    // Checked before the run, so an unwritable path fails in a second, not after it.
    for path in [&args.json, &args.plot].into_iter().flatten() {
        if let Err(e) = check_writable(path) {
            eprintln!("gregor-churn: cannot write {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("gregor-churn: starting the tokio runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let json = args.json.clone();
    let plot = args.plot.clone();
    let report = match runtime.block_on(churn::run(args)) {
        Ok(report) => report,
        Err(e) => {
            eprintln!("gregor-churn: {e:#}");
            return ExitCode::from(1);
        }
    };
    print!("{}", report.table());
    if report.error.is_some() {
        if json.is_some() || plot.is_some() {
            eprintln!("gregor-churn: the run ended early; no report file was written");
        }
        return ExitCode::from(1);
    }
    let mut status = 0;
    if let Some(path) = json {
        let written = serde_json::to_vec_pretty(&report)
            .map_err(anyhow::Error::from)
            .and_then(|bytes| std::fs::write(&path, bytes).map_err(anyhow::Error::from));
        if let Err(e) = written {
            eprintln!("gregor-churn: writing {}: {e:#}", path.display());
            status = 1;
        }
    }
    if let Some(path) = plot {
        if let Err(e) = churn::plot::draw(&report, &path) {
            eprintln!("gregor-churn: writing {}: {e:#}", path.display());
            status = 1;
        }
    }
    ExitCode::from(status)
}

/// Whether `path` can be written, leaving the file system as it was: an existing file is
/// opened for appending (not truncated), a new one is created and removed again.
fn check_writable(path: &Path) -> std::io::Result<()> {
    if path.exists() {
        std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map(drop)
    } else {
        std::fs::File::create(path)?;
        std::fs::remove_file(path)
    }
}
