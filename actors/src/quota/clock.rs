//! Time for the quota maths: milliseconds from a [`Clock`], so tests drive time by hand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// A source of milliseconds. Only differences matter; the origin is arbitrary.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the clock's origin.
    fn now_ms(&self) -> u64;

    /// The milliseconds of an instant the caller already read (a connection reads the clock
    /// for its own timings; on a VM a clock read can cost more than the whole quota path).
    fn ms_at(&self, at: Instant) -> u64;
}

/// Monotonic time since the clock was created (wall-clock jumps cannot refill a bucket).
#[derive(Debug, Clone, Copy)]
pub struct SystemClock {
    origin: Instant,
}

impl SystemClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        SystemClock {
            origin: Instant::now(),
        }
    }
}

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock::new()
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        self.ms_at(Instant::now())
    }

    fn ms_at(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.origin).as_millis()).unwrap_or(u64::MAX)
    }
}

/// A clock that only moves when told to (Kafka's `MockTime`); clones share the time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock reading `start_ms`.
    pub fn starting_at(start_ms: u64) -> Self {
        ManualClock {
            now: Arc::new(AtomicU64::new(start_ms)),
        }
    }

    /// Moves time forward by `ms` (Kafka's `time.sleep`).
    pub fn advance(&self, ms: u64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.now.load(Ordering::SeqCst)
    }

    /// Tests drive time by hand: the instant is ignored.
    fn ms_at(&self, _at: Instant) -> u64 {
        self.now_ms()
    }
}
