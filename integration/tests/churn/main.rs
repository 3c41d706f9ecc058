//! `gregor-churn` end to end: short bounded runs against a node started by the harness, the
//! JSON report's shape, and the failures a user meets first (bad arguments, no broker).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod t10_churn_run;
mod t30_churn_failures;

use std::process::{Command, Output};
use std::time::Duration;

/// Runs the `gregor-churn` binary with `args`, failing the test if it runs over `timeout`.
pub(crate) fn churn(args: &[&str], timeout: Duration) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gregor-churn"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawning gregor-churn");
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if child
            .try_wait()
            .expect("waiting for gregor-churn")
            .is_some()
        {
            return child
                .wait_with_output()
                .expect("collecting gregor-churn output");
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collecting output");
            panic!(
                "gregor-churn {args:?} ran over {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
