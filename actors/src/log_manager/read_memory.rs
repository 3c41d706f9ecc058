//! `fetch.response.memory.bytes`: record bytes read for fetches and not yet written to their
//! sockets.
//!
//! Kafka sends a fetch's records straight from the segment files (`FileRecords.writeTo`), so a
//! client that never reads its answers holds file references, not memory. Gregor's shards copy
//! the records into buffers; unbounded, every such connection held up to `fetch.max.bytes`
//! (55 MiB) for as long as it liked, and 50 of them took 5.7 GiB. A fetch now takes what it may
//! read from this budget and gives it back once its answer is written. When the budget is spent
//! a fetch still gets its first batch (the one Kafka always returns whole), so consumers go on,
//! slower, and the memory stays within the budget plus one batch per answer being written.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;

/// The node's budget; `None` (a configured value <= 0) never limits a read.
#[derive(Debug)]
pub struct ReadMemory {
    available: Option<AtomicI64>,
}

impl ReadMemory {
    pub fn new(capacity: i64) -> Arc<Self> {
        Arc::new(ReadMemory {
            available: (capacity > 0).then(|| AtomicI64::new(capacity)),
        })
    }

    /// Takes `wanted` bytes, or what is left of the budget when less.
    pub fn take_up_to(self: &Arc<Self>, wanted: i64) -> ReadMemoryHold {
        let wanted = wanted.max(0);
        let Some(available) = &self.available else {
            return ReadMemoryHold {
                memory: None,
                bytes: wanted,
            };
        };
        let mut left = available.load(Ordering::Acquire);
        loop {
            let taken = wanted.min(left.max(0));
            match available.compare_exchange_weak(
                left,
                left - taken,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => {
                    return ReadMemoryHold {
                        memory: Some(Arc::clone(self)),
                        bytes: taken,
                    }
                }
                Err(now) => left = now,
            }
        }
    }

    /// Bytes not held (below zero by the first batches read past a spent budget).
    pub fn available(&self) -> Option<i64> {
        self.available
            .as_ref()
            .map(|available| available.load(Ordering::Acquire))
    }
}

/// Bytes of [`ReadMemory`] held by one fetch answer; given back when dropped.
#[derive(Debug, Default)]
pub struct ReadMemoryHold {
    memory: Option<Arc<ReadMemory>>,
    bytes: i64,
}

impl ReadMemoryHold {
    pub fn bytes(&self) -> i64 {
        self.bytes
    }

    /// Holds exactly `used` bytes: gives back what the read left unused, or takes what a first
    /// batch read past the hold (the budget may go below zero by that batch).
    pub fn keep(&mut self, used: i64) {
        let used = used.max(0);
        if let Some(available) = self.memory.as_ref().and_then(|m| m.available.as_ref()) {
            available.fetch_add(self.bytes - used, Ordering::AcqRel);
        }
        self.bytes = used;
    }

    /// Adds `other`'s bytes to this hold (the chunks of one answer).
    pub fn merge(&mut self, mut other: ReadMemoryHold) {
        if self.memory.is_none() {
            self.memory = other.memory.take();
        }
        self.bytes += std::mem::take(&mut other.bytes);
    }
}

impl Drop for ReadMemoryHold {
    fn drop(&mut self) {
        if let Some(available) = self.memory.as_ref().and_then(|m| m.available.as_ref()) {
            available.fetch_add(self.bytes, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hold_takes_what_is_left_and_gives_back_what_it_does_not_keep() {
        let memory = ReadMemory::new(100);
        let mut first = memory.take_up_to(60);
        assert_eq!((first.bytes(), memory.available()), (60, Some(40)));
        let mut second = memory.take_up_to(60);
        assert_eq!((second.bytes(), memory.available()), (40, Some(0)));
        // A spent budget: nothing, but a first batch read anyway is taken past it.
        let mut third = memory.take_up_to(10);
        assert_eq!(third.bytes(), 0);
        third.keep(7);
        assert_eq!(memory.available(), Some(-7));
        first.keep(25);
        assert_eq!(memory.available(), Some(28));
        second.merge(third);
        assert_eq!(second.bytes(), 47);
        drop(second);
        assert_eq!(memory.available(), Some(75));
        drop(first);
        assert_eq!(memory.available(), Some(100));
    }

    #[test]
    fn an_unbounded_budget_grants_everything() {
        let memory = ReadMemory::new(0);
        let mut hold = memory.take_up_to(1 << 40);
        assert_eq!(hold.bytes(), 1 << 40);
        hold.keep(5);
        assert_eq!(memory.available(), None);
    }

    #[test]
    fn merging_into_an_empty_hold_keeps_the_budget() {
        let memory = ReadMemory::new(100);
        let mut answer = ReadMemoryHold::default();
        answer.merge(memory.take_up_to(30));
        assert_eq!(memory.available(), Some(70));
        drop(answer);
        assert_eq!(memory.available(), Some(100));
    }
}
