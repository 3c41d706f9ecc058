//! A bounded cache of open file handles shared by every segment of a broker.
//!
//! 100,000 partitions hold at least 300,000 files (`.log`, `.index`, `.timeindex`); keeping them all open
//! would exhaust the process's descriptors. Segments therefore never own a `File`: they ask this cache,
//! which opens on demand and closes the least recently used handle beyond its capacity. Reads and writes
//! use positional I/O (`pread`/`pwrite`), so one shared handle needs no seek state and no lock.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

/// Open handles, least recently used closed first.
#[derive(Debug)]
pub struct FileCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    open: HashMap<PathBuf, (Arc<File>, u64)>,
    by_use: BTreeMap<u64, PathBuf>,
    tick: u64,
    opens: u64,
}

impl FileCache {
    /// A cache holding at most `capacity` open files (at least 1).
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(FileCache {
            capacity: capacity.max(1),
            inner: Mutex::new(Inner::default()),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding this lock leaves the maps consistent (every update is a single insert or
        // remove pair), so a poisoned lock is still usable.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The handle of `path`, opened read-write; `create` makes a missing file.
    pub fn get(&self, path: &Path, create: bool) -> std::io::Result<Arc<File>> {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        if let Some((file, used)) = inner.open.get_mut(path) {
            let file = Arc::clone(file);
            let old = std::mem::replace(used, tick);
            inner.by_use.remove(&old);
            inner.by_use.insert(tick, path.to_path_buf());
            return Ok(file);
        }
        let file = Arc::new(
            OpenOptions::new()
                .read(true)
                .write(true)
                .create(create)
                .truncate(false)
                .open(path)?,
        );
        inner.opens += 1;
        inner
            .open
            .insert(path.to_path_buf(), (Arc::clone(&file), tick));
        inner.by_use.insert(tick, path.to_path_buf());
        while inner.open.len() > self.capacity {
            let Some((_, victim)) = inner.by_use.pop_first() else {
                break;
            };
            inner.open.remove(&victim);
        }
        Ok(file)
    }

    /// Drops the cached handle of `path` (before it is renamed or deleted).
    pub fn forget(&self, path: &Path) {
        let mut inner = self.lock();
        if let Some((_, used)) = inner.open.remove(path) {
            inner.by_use.remove(&used);
        }
    }

    /// Files open right now.
    pub fn open_files(&self) -> usize {
        self.lock().open.len()
    }

    /// Files opened since the cache was made (a measure of churn).
    pub fn total_opens(&self) -> u64 {
        self.lock().opens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closes_least_recently_used_beyond_capacity() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(2);
        let paths: Vec<PathBuf> = (0..3).map(|i| dir.path().join(format!("{i}"))).collect();
        cache.get(&paths[0], true).unwrap();
        cache.get(&paths[1], true).unwrap();
        cache.get(&paths[0], false).unwrap();
        cache.get(&paths[2], true).unwrap();
        assert_eq!(cache.open_files(), 2);
        assert_eq!(cache.total_opens(), 3);
        cache.get(&paths[0], false).unwrap();
        assert_eq!(
            cache.total_opens(),
            3,
            "0 was used more recently than 1, so 1 was closed"
        );
        cache.get(&paths[1], false).unwrap();
        assert_eq!(cache.total_opens(), 4);
        assert!(cache.get(&dir.path().join("missing"), false).is_err());
    }
}
