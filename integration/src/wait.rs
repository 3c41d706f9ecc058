//! "Wait until a condition holds, or fail after a timeout": the only way tests synchronise with
//! the node. The poll interval is a pacing detail, never a guess at how long something takes.

use std::future::Future;
use std::time::{Duration, Instant};

/// How often [`wait_until`] re-evaluates its condition.
pub const POLL_INTERVAL: Duration = Duration::from_millis(25);

/// Polls `check` until it returns `Ok(Some(value))` or `timeout` passes.
///
/// `Ok(None)` means "not yet"; an `Err` is remembered and reported if the deadline passes (a
/// condition that errors transiently, e.g. while a node restarts, is retried).
pub async fn wait_until<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + timeout;
    let mut last_error: Option<anyhow::Error> = None;
    loop {
        match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(e) => last_error = Some(e),
        }
        if Instant::now() >= deadline {
            return Err(match last_error {
                Some(e) => e.context(format!("timed out after {timeout:?} waiting for {what}")),
                None => anyhow::anyhow!("timed out after {timeout:?} waiting for {what}"),
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}
