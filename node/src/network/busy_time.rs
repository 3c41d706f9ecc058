//! The time a request keeps a thread busy, for the request quota (`request_percentage`).
//!
//! Kafka charges the network-thread and I/O-thread time spent on a request, not the time it
//! waits for a raft commit, the controller's queue or a forwarded round trip. A handler here is
//! one future: [`PollTimed`] adds up the time spent inside its `poll` calls, which is the work
//! done for it on this connection's task, and leaves out the time it sat parked between polls.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

pin_project_lite::pin_project! {
    /// Polls `inner` and resolves to its output with the time spent inside its polls.
    pub(crate) struct PollTimed<F, C> {
        #[pin]
        inner: F,
        clock: C,
        busy: Duration,
    }
}

impl<F: Future> PollTimed<F, fn() -> Instant> {
    /// Times `inner` on the monotonic clock.
    pub(crate) fn new(inner: F) -> Self {
        Self::with_clock(inner, Instant::now)
    }
}

impl<F: Future, C: Fn() -> Instant> PollTimed<F, C> {
    /// Times `inner` on `clock` (tests pass a clock they move by hand).
    pub(crate) fn with_clock(inner: F, clock: C) -> Self {
        PollTimed {
            inner,
            clock,
            busy: Duration::ZERO,
        }
    }
}

impl<F: Future, C: Fn() -> Instant> Future for PollTimed<F, C> {
    type Output = (F::Output, Duration);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let started = (this.clock)();
        let polled = this.inner.poll(cx);
        *this.busy += (this.clock)().saturating_duration_since(started);
        polled.map(|output| (output, *this.busy))
    }
}

/// Runs `work` and returns its result with the time it took (decoding and encoding, which
/// never wait).
pub(crate) fn timed<T>(work: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let value = work();
    (value, started.elapsed())
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use super::*;

    /// A future that moves the shared clock by `work` in each poll and is ready on its
    /// `polls`-th poll; between polls the test moves the clock as if it waited.
    struct Working {
        now: Rc<Cell<Duration>>,
        work: Duration,
        polls: u32,
    }

    impl Future for Working {
        type Output = &'static str;

        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<&'static str> {
            self.now.set(self.now.get() + self.work);
            self.polls -= 1;
            if self.polls == 0 {
                Poll::Ready("done")
            } else {
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        }
    }

    #[test]
    fn only_time_inside_polls_is_charged() {
        let base = Instant::now();
        let now = Rc::new(Cell::new(Duration::ZERO));
        let clock = {
            let now = now.clone();
            move || base + now.get()
        };
        let mut timed = std::pin::pin!(PollTimed::with_clock(
            Working {
                now: now.clone(),
                work: Duration::from_micros(250),
                polls: 3,
            },
            clock,
        ));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert!(timed.as_mut().poll(&mut cx).is_pending());
        // Parked for a raft commit: 40 ms pass without a poll.
        now.set(now.get() + Duration::from_millis(40));
        assert!(timed.as_mut().poll(&mut cx).is_pending());
        now.set(now.get() + Duration::from_millis(900));
        let Poll::Ready((output, busy)) = timed.as_mut().poll(&mut cx) else {
            panic!("the third poll is ready");
        };
        assert_eq!(output, "done");
        assert_eq!(busy, Duration::from_micros(750));
        assert_eq!(now.get(), Duration::from_micros(940_750));
    }

    #[test]
    fn a_future_ready_at_once_is_charged_its_one_poll() {
        let base = Instant::now();
        let now = Rc::new(Cell::new(Duration::ZERO));
        let clock = {
            let now = now.clone();
            move || base + now.get()
        };
        let mut timed = std::pin::pin!(PollTimed::with_clock(
            Working {
                now: now.clone(),
                work: Duration::from_micros(3),
                polls: 1,
            },
            clock,
        ));
        let mut cx = Context::from_waker(std::task::Waker::noop());
        assert_eq!(
            timed.as_mut().poll(&mut cx),
            Poll::Ready(("done", Duration::from_micros(3)))
        );
    }
}
