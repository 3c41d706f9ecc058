//! A group's committed offsets whose latest writes are not yet replicated to the
//! `__consumer_offsets` ISR. The group acts on its newest offsets at once (they are in the log,
//! in order), but OffsetFetch answers what is committed, as Kafka's coordinator reads at its
//! last committed offset; a write that never reached the log is taken back.

use std::collections::{HashMap, VecDeque};

use super::super::records::OffsetValue;

/// A topic partition of a group's offsets.
pub(super) type OffsetKey = (String, i32);

/// The uncommitted offsets of one group.
#[derive(Default)]
pub(super) struct UncommittedOffsets {
    keys: HashMap<OffsetKey, Pending>,
}

/// One partition's committed offset and the writes after it, oldest first, by write number.
struct Pending {
    committed: Option<OffsetValue>,
    writes: VecDeque<(u64, OffsetValue)>,
}

impl UncommittedOffsets {
    /// Write `write` sets `key` to `value`; `current` is the group's offset before it (the
    /// committed one unless earlier writes are pending).
    pub(super) fn wrote(
        &mut self,
        key: &OffsetKey,
        write: u64,
        value: OffsetValue,
        current: Option<&OffsetValue>,
    ) {
        self.keys
            .entry(key.clone())
            .or_insert_with(|| Pending {
                committed: current.cloned(),
                writes: VecDeque::new(),
            })
            .writes
            .push_back((write, value));
    }

    /// Write `write` and every earlier one of `key` are replicated.
    pub(super) fn replicated(&mut self, key: &OffsetKey, write: u64) {
        let Some(pending) = self.keys.get_mut(key) else {
            return;
        };
        while let Some((_, value)) = pending.writes.pop_front_if(|(seq, _)| *seq <= write) {
            pending.committed = Some(value);
        }
        if pending.writes.is_empty() {
            self.keys.remove(key);
        }
    }

    /// Write `write` of `key` never reached the log: the offset the group holds now (`None`:
    /// none), or `None` when `key` has no pending write.
    pub(super) fn lost(&mut self, key: &OffsetKey, write: u64) -> Option<Option<OffsetValue>> {
        let pending = self.keys.get_mut(key)?;
        pending.writes.retain(|(seq, _)| *seq != write);
        let now = pending
            .writes
            .back()
            .map(|(_, value)| value.clone())
            .or_else(|| pending.committed.clone());
        if pending.writes.is_empty() {
            self.keys.remove(key);
        }
        Some(now)
    }

    /// What a reader sees for `key` while writes of it are pending: its committed offset.
    /// `None` when none is pending (the group's offset is committed).
    pub(super) fn visible(&self, key: &OffsetKey) -> Option<Option<&OffsetValue>> {
        self.keys.get(key).map(|pending| pending.committed.as_ref())
    }

    /// `key`'s offset is deleted (OffsetDelete, expiry): nothing of it is pending any more.
    pub(super) fn forget(&mut self, key: &OffsetKey) {
        self.keys.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(offset: i64) -> OffsetValue {
        OffsetValue {
            offset,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
            expire_timestamp: None,
        }
    }

    #[test]
    fn readers_see_the_last_replicated_write() {
        let key = ("t".to_owned(), 0);
        let mut uncommitted = UncommittedOffsets::default();
        assert_eq!(uncommitted.visible(&key), None);
        uncommitted.wrote(&key, 1, value(5), None);
        uncommitted.wrote(&key, 2, value(7), Some(&value(5)));
        assert_eq!(uncommitted.visible(&key), Some(None));
        uncommitted.replicated(&key, 1);
        assert_eq!(uncommitted.visible(&key), Some(Some(&value(5))));
        uncommitted.replicated(&key, 2);
        assert_eq!(uncommitted.visible(&key), None);
    }

    #[test]
    fn a_lost_write_gives_back_the_offset_before_it() {
        let key = ("t".to_owned(), 0);
        let mut uncommitted = UncommittedOffsets::default();
        uncommitted.wrote(&key, 3, value(7), Some(&value(5)));
        uncommitted.wrote(&key, 4, value(9), Some(&value(7)));
        // The later write lost: the earlier, still pending, is what the group holds.
        assert_eq!(uncommitted.lost(&key, 4), Some(Some(value(7))));
        assert_eq!(uncommitted.visible(&key), Some(Some(&value(5))));
        assert_eq!(uncommitted.lost(&key, 3), Some(Some(value(5))));
        assert_eq!(uncommitted.visible(&key), None);
        // A first offset lost: the group has none.
        uncommitted.wrote(&key, 5, value(1), None);
        assert_eq!(uncommitted.lost(&key, 5), Some(None));
        assert_eq!(uncommitted.lost(&key, 5), None);
    }
}
