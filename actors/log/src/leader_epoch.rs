//! The leader-epoch cache (`leader-epoch-checkpoint`): the start offset of each leader epoch, for
//! OffsetForLeaderEpoch and follower truncation (data-plane reference §5.2).

use std::path::PathBuf;

use crate::checkpoint;
use crate::error::Result;

#[derive(Debug)]
pub struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<(i32, i64)>,
    /// The file holds the entries but may not be on disk yet.
    unsynced: bool,
}

impl LeaderEpochCache {
    /// Loads the cache of a partition directory (empty when the file is absent).
    pub fn load(dir: &std::path::Path) -> Result<Self> {
        let path = dir.join(checkpoint::LEADER_EPOCH_CHECKPOINT);
        let entries = checkpoint::read_epochs(&path)?;
        Ok(LeaderEpochCache {
            path,
            entries,
            unsynced: false,
        })
    }

    /// The cache of a partition directory just made: no file to read.
    pub fn empty(dir: &std::path::Path) -> Self {
        LeaderEpochCache {
            path: dir.join(checkpoint::LEADER_EPOCH_CHECKPOINT),
            entries: Vec::new(),
            unsynced: false,
        }
    }

    /// Whether entries written by [`Self::persist`] may not be on disk yet.
    pub fn unsynced(&self) -> bool {
        self.unsynced
    }

    pub fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.0)
    }

    /// The epoch whose range holds `offset` (the last one starting at or below it), or −1.
    pub fn epoch_for_offset(&self, offset: i64) -> i32 {
        self.entries
            .iter()
            .rev()
            .find(|&&(_, start)| start <= offset)
            .map_or(-1, |&(epoch, _)| epoch)
    }

    /// Records that `epoch` starts at `start_offset` when it is newer than the latest; entries that would
    /// start at or after it are dropped first. Returns whether the cache changed.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || self.latest_epoch().is_some_and(|latest| latest >= epoch) {
            return false;
        }
        self.entries.retain(|&(_, start)| start < start_offset);
        self.entries.push((epoch, start_offset));
        true
    }

    /// Removes epochs starting at or after `end_offset` (after a log truncation).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|&(_, start)| start < end_offset);
        before != self.entries.len()
    }

    /// Drops epochs wholly below `start_offset`; the one covering it now starts there.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let covering = self
            .entries
            .iter()
            .rposition(|&(_, start)| start <= start_offset);
        match covering {
            Some(i) if i > 0 || self.entries[i].1 != start_offset => {
                self.entries.drain(..i);
                self.entries[0].1 = start_offset;
                true
            }
            _ => false,
        }
    }

    /// OffsetForLeaderEpoch, as Kafka's `LeaderEpochFileCache.endOffsetFor`: for the latest epoch
    /// `(epoch, log_end_offset)`; otherwise the largest epoch ≤ `epoch` (or `epoch` itself when it
    /// is older than the cache) and the start of the next epoch; `(-1, -1)` for −1 or an epoch
    /// newer than the latest. Only −1 is undefined: −5 is older than the cache, as in Kafka.
    pub fn end_offset_for(&self, epoch: i32, log_end_offset: i64) -> (i32, i64) {
        if epoch == -1 {
            return (-1, -1);
        }
        if self.latest_epoch() == Some(epoch) {
            return (epoch, log_end_offset);
        }
        let Some(higher) = self.entries.iter().position(|&(e, _)| e > epoch) else {
            return (-1, -1);
        };
        let next_start = self.entries[higher].1;
        match higher.checked_sub(1) {
            Some(floor) => (self.entries[floor].0, next_start),
            None => (epoch, next_start),
        }
    }

    /// Writes the checkpoint file durably.
    pub fn flush(&mut self) -> Result<()> {
        checkpoint::write_epochs(&self.path, &self.entries, true)?;
        self.unsynced = false;
        Ok(())
    }

    /// Writes the checkpoint file without fsync (the append path, as Kafka since KAFKA-15046); the log
    /// makes it durable before it moves its recovery point, and recovery rebuilds epochs above it.
    pub fn persist(&mut self) -> Result<()> {
        checkpoint::write_epochs(&self.path, &self.entries, false)?;
        self.unsynced = true;
        Ok(())
    }

    /// Makes an earlier [`Self::persist`] durable.
    pub fn sync(&mut self) -> Result<()> {
        if self.unsynced {
            self.flush()?;
        }
        Ok(())
    }

    /// Records that an earlier [`Self::persist`] was made durable by a sync of the whole file
    /// system.
    pub fn synced_by_file_system(&mut self) {
        self.unsynced = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_follow_kafkas_rules() {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::load(dir.path()).unwrap();
        assert!(cache.assign(0, 0));
        assert!(!cache.assign(0, 5), "same epoch again");
        assert!(cache.assign(2, 10));
        assert!(cache.assign(4, 25));
        assert_eq!(cache.end_offset_for(0, 40), (0, 10));
        assert_eq!(cache.end_offset_for(1, 40), (0, 10));
        assert_eq!(cache.end_offset_for(3, 40), (2, 25));
        assert_eq!(cache.end_offset_for(4, 40), (4, 40));
        assert_eq!(cache.end_offset_for(9, 40), (-1, -1));
        assert_eq!(cache.end_offset_for(-1, 40), (-1, -1));
        // Below every cached epoch, not undefined: the start of the first one.
        assert_eq!(cache.end_offset_for(-5, 40), (-5, 0));
        cache.truncate_from_end(25);
        assert_eq!(cache.entries(), &[(0, 0), (2, 10)]);
        cache.truncate_from_start(12);
        assert_eq!(cache.entries(), &[(2, 12)]);
        assert_eq!(cache.end_offset_for(1, 40), (1, 12));
        assert_eq!(cache.end_offset_for(-5, 40), (-5, 12));
        cache.flush().unwrap();
        assert_eq!(
            LeaderEpochCache::load(dir.path()).unwrap().entries(),
            &[(2, 12)]
        );
    }

    #[test]
    fn an_empty_cache_knows_no_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let cache = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(cache.end_offset_for(-5, 40), (-1, -1));
        assert_eq!(cache.end_offset_for(0, 40), (-1, -1));
    }
}
