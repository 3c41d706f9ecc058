//! Kafka's sparse `.index` (8-byte entries: relative offset u32, file position u32) and `.timeindex`
//! (12-byte entries: timestamp i64, relative offset u32), big-endian.
//!
//! Difference from Kafka, on purpose: Kafka preallocates index files to `segment.index.bytes` and trims
//! them on roll or close; here entries are appended, so a file always has exactly its entries (what Kafka's
//! files look like after a trim) and a crash never leaves zero-filled tails. Entries are read into memory
//! only when a lookup needs them and dropped with [`IndexFile::unload`], so idle partitions cost no memory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::os::unix::fs::FileExt;

use crate::files::FileCache;

/// One index entry type.
pub trait IndexEntry: Copy + std::fmt::Debug {
    const SIZE: usize;
    /// The file's extension, beside the segment's `.log`.
    const EXTENSION: &'static str;
    fn decode(bytes: &[u8]) -> Self;
    fn encode(&self, out: &mut Vec<u8>);
    /// The sort key lookups search on.
    fn key(&self) -> i64;
}

/// `.index` entry: offset − base offset, and the byte position of the batch in the `.log`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
}

impl IndexEntry for OffsetEntry {
    const SIZE: usize = 8;
    const EXTENSION: &'static str = "index";
    fn decode(b: &[u8]) -> Self {
        OffsetEntry {
            relative_offset: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            position: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        }
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
        out.extend_from_slice(&self.position.to_be_bytes());
    }
    fn key(&self) -> i64 {
        i64::from(self.relative_offset)
    }
}

/// `.timeindex` entry: the largest timestamp so far and the relative offset of the batch holding it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeEntry {
    pub timestamp: i64,
    pub relative_offset: u32,
}

impl IndexEntry for TimeEntry {
    const SIZE: usize = 12;
    const EXTENSION: &'static str = "timeindex";
    fn decode(b: &[u8]) -> Self {
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&b[0..8]);
        TimeEntry {
            timestamp: i64::from_be_bytes(ts),
            relative_offset: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
        }
    }
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.timestamp.to_be_bytes());
        out.extend_from_slice(&self.relative_offset.to_be_bytes());
    }
    fn key(&self) -> i64 {
        self.timestamp
    }
}

/// An index file whose entries are loaded on demand. It keeps no path: the file is the one
/// beside its segment's `.log` with [`IndexEntry::EXTENSION`], and every call that touches the
/// file is given that `.log` path (a path per index would be two of the three allocations a
/// new partition's segment makes, ~250 bytes per partition).
#[derive(Debug)]
pub struct IndexFile<E: IndexEntry> {
    count: u64,
    last: Option<E>,
    entries: Option<Vec<E>>,
}

impl<E: IndexEntry> IndexFile<E> {
    /// The index file of the segment whose `.log` is `segment`.
    pub fn path(segment: &Path) -> PathBuf {
        segment.with_extension(E::EXTENSION)
    }

    /// Opens (or creates) the index of `segment`. A size that is not a whole number of entries
    /// means a damaged file: `Ok(None)` tells the caller to rebuild it.
    pub fn open(segment: &Path, files: &Arc<FileCache>) -> std::io::Result<Option<Self>> {
        let file = files.get(&Self::path(segment), true)?;
        let len = file.metadata()?.len();
        if len % E::SIZE as u64 != 0 {
            return Ok(None);
        }
        let count = len / E::SIZE as u64;
        let last = if count > 0 {
            let mut buf = vec![0u8; E::SIZE];
            file.read_exact_at(&mut buf, (count - 1) * E::SIZE as u64)?;
            Some(E::decode(&buf))
        } else {
            None
        };
        Ok(Some(IndexFile {
            count,
            last,
            entries: None,
        }))
    }

    /// Creates an empty index for `segment`, replacing any file there.
    pub fn create(segment: &Path, files: &Arc<FileCache>) -> std::io::Result<Self> {
        let file = files.get(&Self::path(segment), true)?;
        file.set_len(0)?;
        Ok(IndexFile {
            count: 0,
            last: None,
            entries: None,
        })
    }

    pub fn len(&self) -> u64 {
        self.count
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    pub fn last(&self) -> Option<E> {
        self.last
    }

    fn load(&mut self, files: &Arc<FileCache>, segment: &Path) -> std::io::Result<&Vec<E>> {
        if self.entries.is_none() {
            let file = files.get(&Self::path(segment), false)?;
            let mut buf = vec![0u8; (self.count as usize) * E::SIZE];
            file.read_exact_at(&mut buf, 0)?;
            self.entries = Some(buf.chunks_exact(E::SIZE).map(E::decode).collect());
        }
        Ok(self.entries.get_or_insert_with(Vec::new))
    }

    /// Drops the in-memory entries; the next lookup reads the file again.
    pub fn unload(&mut self) {
        self.entries = None;
    }

    /// The last entry whose key is ≤ `key`.
    pub fn floor(
        &mut self,
        files: &Arc<FileCache>,
        segment: &Path,
        key: i64,
    ) -> std::io::Result<Option<E>> {
        let entries = self.load(files, segment)?;
        let idx = entries.partition_point(|e| e.key() <= key);
        Ok(idx.checked_sub(1).map(|i| entries[i]))
    }

    pub fn append(
        &mut self,
        files: &Arc<FileCache>,
        segment: &Path,
        entry: E,
    ) -> std::io::Result<()> {
        let mut buf = Vec::with_capacity(E::SIZE);
        entry.encode(&mut buf);
        files
            .get(&Self::path(segment), true)?
            .write_all_at(&buf, self.count * E::SIZE as u64)?;
        self.count += 1;
        self.last = Some(entry);
        if let Some(entries) = self.entries.as_mut() {
            entries.push(entry);
        }
        Ok(())
    }

    /// Empties the index (before a rebuild).
    pub fn reset(&mut self, files: &Arc<FileCache>, segment: &Path) -> std::io::Result<()> {
        files.get(&Self::path(segment), true)?.set_len(0)?;
        self.count = 0;
        self.last = None;
        self.entries = Some(Vec::new());
        Ok(())
    }
}
