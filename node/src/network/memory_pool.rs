//! `queued.max.request.bytes`: Kafka's request memory pool (KIP-72).
//!
//! A connection reads a frame's 4-byte size, reserves that many bytes here, and only then reads
//! the body; the reservation is returned once the request is handled. Like Kafka's
//! broker pool (`SimpleMemoryPool` in non-strict mode), a reservation is granted whenever any
//! memory is left, so the pool may go below zero by at most one frame, and a connection that
//! finds it empty waits (reads nothing more) until another request returns its bytes.

use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::Notify;

/// The shared pool; `None` capacity (Kafka's `-1` or `0`) never makes anyone wait.
#[derive(Debug)]
pub struct MemoryPool {
    capacity: Option<i64>,
    available: Mutex<i64>,
    freed: Notify,
}

/// Bytes held for one request; returned to the pool when dropped.
#[derive(Debug)]
pub struct Reservation {
    pool: Option<Arc<MemoryPool>>,
    bytes: i64,
}

impl MemoryPool {
    /// A pool of `queued_max_request_bytes` (Kafka: a value <= 0 means unbounded).
    pub fn new(queued_max_request_bytes: i64) -> Arc<Self> {
        let capacity = (queued_max_request_bytes > 0).then_some(queued_max_request_bytes);
        if let Some(capacity) = capacity {
            gregor_metrics::memory_pool(capacity, capacity);
        }
        Arc::new(MemoryPool {
            capacity,
            available: Mutex::new(capacity.unwrap_or(0)),
            freed: Notify::new(),
        })
    }

    /// Bytes not reserved (negative when the last grant overshot); `None` when unbounded.
    #[cfg(test)]
    pub(crate) fn available(&self) -> Option<i64> {
        self.capacity.map(|_| {
            *self
                .available
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
        })
    }

    /// Waits until some memory is free, then reserves `bytes`.
    pub(crate) async fn reserve(self: &Arc<Self>, bytes: usize) -> Reservation {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        if self.capacity.is_none() || bytes == 0 {
            return Reservation { pool: None, bytes };
        }
        loop {
            // Registered before the check, so a release between the check and the wait is seen.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            if self.try_reserve(bytes) {
                return Reservation {
                    pool: Some(self.clone()),
                    bytes,
                };
            }
            freed.await;
        }
    }

    fn try_reserve(&self, bytes: i64) -> bool {
        let mut available = self
            .available
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if *available > 0 {
            *available -= bytes;
            gregor_metrics::memory_pool(*available, self.capacity.unwrap_or(0));
            true
        } else {
            false
        }
    }

    fn release(&self, bytes: i64) {
        let mut available = self
            .available
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *available += bytes;
        gregor_metrics::memory_pool(*available, self.capacity.unwrap_or(0));
        drop(available);
        self.freed.notify_waiters();
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.take() {
            pool.release(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn grants_while_anything_is_left_then_waits_for_a_release() {
        let pool = MemoryPool::new(100);
        let first = pool.reserve(60).await;
        // Non-strict: 40 bytes are left, so 70 are granted and the pool goes to -30.
        let second = pool.reserve(70).await;
        assert_eq!(pool.available(), Some(-30));
        let waiting = tokio::spawn({
            let pool = pool.clone();
            async move { pool.reserve(10).await }
        });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished());
        drop(first);
        assert_eq!(pool.available(), Some(30));
        let third = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .ok()
            .and_then(Result::ok);
        assert_eq!(pool.available(), Some(20));
        drop(third);
        drop(second);
        assert_eq!(pool.available(), Some(100));
    }

    #[tokio::test]
    async fn an_unbounded_pool_never_waits() {
        for capacity in [-1, 0] {
            let pool = MemoryPool::new(capacity);
            let held: Vec<_> = [usize::MAX, 1 << 40].map(|b| pool.reserve(b)).into();
            for reservation in held {
                drop(reservation.await);
            }
            assert_eq!(pool.available(), None);
        }
    }
}
