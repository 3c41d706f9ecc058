//! One segment: `<base offset, 20 digits>.log` with its `.index` and `.timeindex`.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{self, framing, BatchFraming, RecordBatch, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD};
use crate::files::FileCache;
use crate::index::{IndexEntry, IndexFile, OffsetEntry, TimeEntry};
use crate::validate::BatchParts;

/// The first read of a scan: a lookup from an index entry usually ends within
/// `index.interval.bytes` (4 KiB by default) of it, or at the next header.
const FIRST_SCAN_CHUNK: usize = 16 << 10;

/// The most a scan reads at a time; its reads double up to this on a long walk (recovery).
const SCAN_CHUNK: usize = 1 << 20;

/// `<offset>` zero-padded to 20 digits, Kafka's file name stem.
pub fn file_stem(offset: i64) -> String {
    format!("{offset:020}")
}

pub fn log_path(dir: &Path, base_offset: i64) -> PathBuf {
    dir.join(format!("{}.log", file_stem(base_offset)))
}
pub fn index_path(dir: &Path, base_offset: i64) -> PathBuf {
    IndexFile::<OffsetEntry>::path(&log_path(dir, base_offset))
}
pub fn time_index_path(dir: &Path, base_offset: i64) -> PathBuf {
    IndexFile::<TimeEntry>::path(&log_path(dir, base_offset))
}

/// A byte range of a segment file for a fetch: hand `file`, `position` and `len` to sendfile, or call
/// [`FileSlice::read`].
#[derive(Debug, Clone)]
pub struct FileSlice {
    pub file: Arc<File>,
    pub path: PathBuf,
    pub position: u64,
    pub len: u64,
}

impl FileSlice {
    /// Reads the bytes of the slice.
    pub fn read(&self) -> std::io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        read_at(&self.file, &mut buf, self.len as usize, self.position)?;
        Ok(buf)
    }
}

/// Replaces `buf`'s contents with the `len` bytes of `file` at `position`. The buffer is not
/// zeroed first: a fetch reads megabytes, and zeroing them (with the page faults of a fresh
/// buffer) cost as much as the read.
fn read_at(file: &File, buf: &mut Vec<u8>, len: usize, position: u64) -> std::io::Result<()> {
    buf.clear();
    buf.reserve(len);
    while buf.len() < len {
        let at = position + buf.len() as u64;
        match rustix::io::pread(file, rustix::buffer::spare_capacity(&mut *buf), at) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(error) => return Err(error.into()),
        }
    }
    // The allocator may have given more room than asked, and the read filled it.
    buf.truncate(len);
    Ok(())
}

/// Writes `parts` one after the other at `position`, with one `pwritev` unless it is cut short.
fn write_parts_at(file: &File, parts: &[&[u8]], position: u64) -> std::io::Result<()> {
    let slices: Vec<std::io::IoSlice<'_>> =
        parts.iter().map(|p| std::io::IoSlice::new(p)).collect();
    let mut written = loop {
        match rustix::io::pwritev(file, &slices, position) {
            Ok(written) => break written,
            Err(rustix::io::Errno::INTR) => {}
            Err(error) => return Err(error.into()),
        }
    };
    let mut at = position;
    for part in parts {
        let skip = written.min(part.len());
        written -= skip;
        at += skip as u64;
        file.write_all_at(&part[skip..], at)?;
        at += (part.len() - skip) as u64;
    }
    Ok(())
}

/// Where a batch lies in a segment file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLocation {
    pub position: u64,
    pub size: u64,
    pub base_offset: i64,
    pub last_offset: i64,
    pub max_timestamp: i64,
}

/// Why a scan stopped before the end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScanEnd {
    /// Every byte up to the end belonged to a valid batch.
    Clean,
    /// The batch at `position` is invalid or cut short.
    Invalid { position: u64, reason: String },
}

/// Reads batches sequentially from a file in large chunks.
struct Scanner<'f> {
    file: &'f File,
    end: u64,
    buf: Vec<u8>,
    buf_start: u64,
    /// How much the next read takes (at least what is asked).
    chunk: usize,
}

impl<'f> Scanner<'f> {
    fn new(file: &'f File, end: u64) -> Self {
        Scanner {
            file,
            end,
            buf: Vec::new(),
            buf_start: 0,
            chunk: FIRST_SCAN_CHUNK,
        }
    }

    /// The bytes [pos, pos + len), or None when the file ends first.
    fn bytes(&mut self, pos: u64, len: usize) -> std::io::Result<Option<&[u8]>> {
        if pos + len as u64 > self.end {
            return Ok(None);
        }
        let buf_end = self.buf_start + self.buf.len() as u64;
        if pos < self.buf_start || pos + len as u64 > buf_end {
            let want = (len.max(self.chunk) as u64).min(self.end - pos) as usize;
            read_at(self.file, &mut self.buf, want, pos)?;
            self.buf_start = pos;
            self.chunk = (self.chunk * 2).min(SCAN_CHUNK);
        }
        let from = (pos - self.buf_start) as usize;
        Ok(Some(&self.buf[from..from + len]))
    }
}

/// Walks the batches of `file` from `start` to `end`. `full` hands each visitor the whole batch; otherwise
/// only its 61-byte header. The visitor returns false to stop early.
fn scan(
    file: &File,
    start: u64,
    end: u64,
    full: bool,
    mut visit: impl FnMut(u64, &[u8]) -> bool,
) -> std::io::Result<ScanEnd> {
    let mut scanner = Scanner::new(file, end);
    let mut pos = start;
    while pos < end {
        let Some(head) = scanner.bytes(pos, LOG_OVERHEAD.min((end - pos) as usize))? else {
            break;
        };
        if head.len() < LOG_OVERHEAD {
            return Ok(ScanEnd::Invalid {
                position: pos,
                reason: "a batch header is cut short".into(),
            });
        }
        let length = i32::from_be_bytes([head[8], head[9], head[10], head[11]]);
        if length < batch::MIN_LENGTH_FIELD
            || (length as usize) + LOG_OVERHEAD < RECORD_BATCH_OVERHEAD
        {
            return Ok(ScanEnd::Invalid {
                position: pos,
                reason: format!("invalid batch length {length}"),
            });
        }
        let size = length as usize + LOG_OVERHEAD;
        let want = if full { size } else { RECORD_BATCH_OVERHEAD };
        let Some(bytes) = scanner.bytes(pos, want)? else {
            return Ok(ScanEnd::Invalid {
                position: pos,
                reason: format!("a batch of {size} bytes is cut short"),
            });
        };
        if pos + size as u64 > end {
            return Ok(ScanEnd::Invalid {
                position: pos,
                reason: format!("a batch of {size} bytes is cut short"),
            });
        }
        if !visit(pos, bytes) {
            return Ok(ScanEnd::Clean);
        }
        pos += size as u64;
    }
    Ok(ScanEnd::Clean)
}

fn header_location(position: u64, header: &[u8]) -> BatchLocation {
    let size = i32::from_be_bytes([header[8], header[9], header[10], header[11]]) as u64
        + LOG_OVERHEAD as u64;
    let mut b8 = [0u8; 8];
    b8.copy_from_slice(&header[0..8]);
    let base_offset = i64::from_be_bytes(b8);
    let delta = i32::from_be_bytes([header[23], header[24], header[25], header[26]]);
    b8.copy_from_slice(&header[batch::MAX_TIMESTAMP_OFFSET..batch::MAX_TIMESTAMP_OFFSET + 8]);
    BatchLocation {
        position,
        size,
        base_offset,
        last_offset: base_offset + i64::from(delta),
        max_timestamp: i64::from_be_bytes(b8),
    }
}

/// A segment of a partition log.
#[derive(Debug)]
pub struct Segment {
    base_offset: i64,
    log_path: PathBuf,
    index: IndexFile<OffsetEntry>,
    time_index: IndexFile<TimeEntry>,
    size: u64,
    next_offset: i64,
    max_timestamp: i64,
    offset_of_max_timestamp: i64,
    /// The max timestamp of the first batch, which `segment.ms` counts from (else the creation time).
    rolling_timestamp: Option<i64>,
    created_ms: i64,
    bytes_since_last_index: u64,
}

/// Visits every whole batch of the segment file `log_path` below `size` from `from_position`;
/// needs no [`Segment`], so the cleaner reads sealed segments on its own thread.
pub fn for_each_batch_in(
    files: &Arc<FileCache>,
    log_path: &Path,
    size: u64,
    from_position: u64,
    mut visit: impl FnMut(u64, &RecordBatch<'_>) -> bool,
) -> std::io::Result<ScanEnd> {
    let file = files.get(log_path, false)?;
    scan(
        &file,
        from_position,
        size,
        true,
        |pos, bytes| match RecordBatch::new(bytes) {
            Ok(batch) => visit(pos, &batch),
            Err(_) => false,
        },
    )
}

/// The offset after the last whole batch of the segment file `path` whose base offset is
/// `base_offset` (that offset when it holds none): the range a cleaner's `.swap` file covers.
pub fn next_offset_in(path: &Path, base_offset: i64) -> std::io::Result<i64> {
    let file = File::open(path)?;
    let mut next = base_offset;
    scan(&file, 0, file.metadata()?.len(), false, |pos, header| {
        next = header_location(pos, header).last_offset + 1;
        true
    })?;
    Ok(next)
}

/// Unlinks the index files of segment `base_offset` and, with `log`, its `.log`; a file
/// already gone is no error (recovery may repeat what a crash interrupted).
pub fn remove_files(
    dir: &Path,
    base_offset: i64,
    log: bool,
    files: &Arc<FileCache>,
) -> std::io::Result<()> {
    let mut paths = vec![
        index_path(dir, base_offset),
        time_index_path(dir, base_offset),
    ];
    if log {
        paths.push(log_path(dir, base_offset));
    }
    for path in paths {
        files.forget(&path);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl Segment {
    /// Creates an empty segment (truncating leftovers of the same name).
    pub fn create(
        dir: &Path,
        base_offset: i64,
        files: &Arc<FileCache>,
        now_ms: i64,
    ) -> std::io::Result<Self> {
        let log_path = log_path(dir, base_offset);
        files.get(&log_path, true)?.set_len(0)?;
        Ok(Segment {
            base_offset,
            index: IndexFile::create(&log_path, files)?,
            time_index: IndexFile::create(&log_path, files)?,
            log_path,
            size: 0,
            next_offset: base_offset,
            max_timestamp: batch::NO_TIMESTAMP,
            offset_of_max_timestamp: base_offset,
            rolling_timestamp: None,
            created_ms: now_ms,
            bytes_since_last_index: 0,
        })
    }

    /// Opens an existing segment. A `trusted` one (below the recovery point) keeps its indexes unless they
    /// are damaged, and its next offset is found from the last index entry and a short scan; an untrusted
    /// one is left for [`Segment::recover`].
    pub fn open(
        dir: &Path,
        base_offset: i64,
        files: &Arc<FileCache>,
        now_ms: i64,
        trusted: bool,
    ) -> std::io::Result<Self> {
        let log_path = log_path(dir, base_offset);
        let file = files.get(&log_path, false)?;
        let meta = file.metadata()?;
        let created_ms = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(now_ms, |d| d.as_millis() as i64);
        let index = match IndexFile::open(&log_path, files)? {
            Some(index) => index,
            None => IndexFile::create(&log_path, files)?,
        };
        let time_index = match IndexFile::open(&log_path, files)? {
            Some(index) => index,
            None => IndexFile::create(&log_path, files)?,
        };
        let mut segment = Segment {
            base_offset,
            log_path,
            index,
            time_index,
            size: meta.len(),
            next_offset: base_offset,
            max_timestamp: batch::NO_TIMESTAMP,
            offset_of_max_timestamp: base_offset,
            rolling_timestamp: None,
            created_ms,
            bytes_since_last_index: 0,
        };
        if !trusted {
            return Ok(segment);
        }
        // Kafka's sanity check, plus: a non-empty segment without any index entry lost its index files
        // (or never got entries, which a rebuild of a small segment restores cheaply).
        let index_sane = segment
            .index
            .last()
            .is_none_or(|e| u64::from(e.position) < segment.size)
            && !(segment.size > 0 && segment.index.is_empty() && segment.time_index.is_empty());
        if !index_sane {
            segment.rebuild_indexes(files, 4096)?;
            return Ok(segment);
        }
        if let Some(last) = segment.time_index.last() {
            segment.max_timestamp = last.timestamp;
            segment.offset_of_max_timestamp = base_offset + i64::from(last.relative_offset);
        }
        let start = segment.index.last().map_or(0, |e| u64::from(e.position));
        let mut next = base_offset;
        let mut first = true;
        let mut max = (segment.max_timestamp, segment.offset_of_max_timestamp);
        let mut rolling = None;
        scan(&file, start, segment.size, false, |pos, header| {
            let loc = header_location(pos, header);
            if first && pos == 0 {
                rolling = Some(loc.max_timestamp);
            }
            first = false;
            next = loc.last_offset + 1;
            if loc.max_timestamp > max.0 {
                max = (loc.max_timestamp, loc.last_offset);
            }
            true
        })?;
        if segment.size > 0 && rolling.is_none() {
            rolling = segment.first_batch_max_timestamp(files)?;
        }
        segment.rolling_timestamp = rolling;
        (segment.max_timestamp, segment.offset_of_max_timestamp) = max;
        segment.next_offset = next;
        Ok(segment)
    }

    fn first_batch_max_timestamp(&self, files: &Arc<FileCache>) -> std::io::Result<Option<i64>> {
        let mut header = [0u8; RECORD_BATCH_OVERHEAD];
        if self.size < RECORD_BATCH_OVERHEAD as u64 {
            return Ok(None);
        }
        files
            .get(&self.log_path, false)?
            .read_exact_at(&mut header, 0)?;
        Ok(Some(header_location(0, &header).max_timestamp))
    }

    /// Re-reads every batch, validating CRCs and structure, rebuilding both indexes and passing each valid
    /// batch to `visit`; truncates the file at the first invalid or partial batch. Returns the bytes cut.
    pub fn recover(
        &mut self,
        files: &Arc<FileCache>,
        index_interval_bytes: u64,
        mut visit: impl FnMut(&RecordBatch<'_>),
    ) -> std::io::Result<u64> {
        let file = files.get(&self.log_path, false)?;
        self.size = file.metadata()?.len();
        self.index.reset(files, &self.log_path)?;
        self.time_index.reset(files, &self.log_path)?;
        self.reset_stats();
        let base_offset = self.base_offset;
        let mut previous_next = base_offset;
        let mut invalid_at = None;
        let mut index_error = None;
        let end = scan(&file, 0, self.size, true, |pos, bytes| {
            let reason = match RecordBatch::new(bytes) {
                Err(reason) => reason.to_string(),
                Ok(batch) if !batch.is_valid_crc() => "CRC mismatch".to_string(),
                Ok(batch)
                    if batch.base_offset() < previous_next || batch.last_offset_delta() < 0 =>
                {
                    "offsets go backwards".to_string()
                }
                Ok(batch) if batch.last_offset() - base_offset > i64::from(i32::MAX) => {
                    "offset beyond the segment's relative range".to_string()
                }
                Ok(batch) => {
                    previous_next = batch.next_offset();
                    visit(&batch);
                    if let Err(e) =
                        self.record_append(files, header_location(pos, bytes), index_interval_bytes)
                    {
                        index_error = Some(e);
                        return false;
                    }
                    return true;
                }
            };
            invalid_at = Some((pos, reason));
            false
        })?;
        if let Some(e) = index_error {
            return Err(e);
        }
        let valid_end = match (&end, &invalid_at) {
            (_, Some((pos, reason)))
            | (
                ScanEnd::Invalid {
                    position: pos,
                    reason,
                },
                None,
            ) => {
                tracing::warn!(segment = %self.log_path.display(), position = pos, reason = %reason, "truncating the log at an invalid batch");
                *pos
            }
            (ScanEnd::Clean, None) => self.size,
        };
        let cut = self.size - valid_end;
        if cut > 0 {
            file.set_len(valid_end)?;
            self.size = valid_end;
        }
        // As Kafka's LogSegment.recover: the largest timestamp gets its time-index entry even
        // when the index interval was not reached, as a roll or a clean close would have written.
        self.maybe_append_time_entry(files)?;
        Ok(cut)
    }

    fn reset_stats(&mut self) {
        self.next_offset = self.base_offset;
        self.max_timestamp = batch::NO_TIMESTAMP;
        self.offset_of_max_timestamp = self.base_offset;
        self.rolling_timestamp = None;
        self.bytes_since_last_index = 0;
    }

    /// Rebuilds the indexes of a trusted segment whose index files were damaged.
    fn rebuild_indexes(
        &mut self,
        files: &Arc<FileCache>,
        index_interval_bytes: u64,
    ) -> std::io::Result<()> {
        self.recover(files, index_interval_bytes, |_| {})
            .map(|_| ())
    }

    /// Updates indexes and statistics for a batch written at `loc.position` (Kafka's `LogSegment.append`:
    /// an index entry once more than `index.interval.bytes` were written since the last one).
    fn record_append(
        &mut self,
        files: &Arc<FileCache>,
        loc: BatchLocation,
        index_interval_bytes: u64,
    ) -> std::io::Result<()> {
        if self.rolling_timestamp.is_none() {
            self.rolling_timestamp = Some(loc.max_timestamp);
        }
        if loc.max_timestamp > self.max_timestamp {
            self.max_timestamp = loc.max_timestamp;
            self.offset_of_max_timestamp = loc.last_offset;
        }
        if self.bytes_since_last_index > index_interval_bytes {
            self.index.append(
                files,
                &self.log_path,
                OffsetEntry {
                    relative_offset: self.relative(loc.last_offset),
                    position: loc.position as u32,
                },
            )?;
            self.maybe_append_time_entry(files)?;
            self.bytes_since_last_index = 0;
        }
        self.bytes_since_last_index += loc.size;
        self.next_offset = loc.last_offset + 1;
        Ok(())
    }

    fn maybe_append_time_entry(&mut self, files: &Arc<FileCache>) -> std::io::Result<()> {
        if self.max_timestamp > self.time_index.last().map_or(i64::MIN, |e| e.timestamp) {
            let relative_offset = self.relative(self.offset_of_max_timestamp);
            self.time_index.append(
                files,
                &self.log_path,
                TimeEntry {
                    timestamp: self.max_timestamp,
                    relative_offset,
                },
            )?;
        }
        Ok(())
    }

    fn relative(&self, offset: i64) -> u32 {
        (offset - self.base_offset) as u32
    }

    /// Writes one batch whose offsets are already assigned.
    pub fn append(
        &mut self,
        files: &Arc<FileCache>,
        batch: BatchParts<'_>,
        index_interval_bytes: u64,
    ) -> std::io::Result<()> {
        let file = files.get(&self.log_path, false)?;
        let position = self.size;
        write_parts_at(&file, &[batch.header, batch.records], position)?;
        self.size += batch.size() as u64;
        let loc = BatchLocation {
            position,
            size: batch.size() as u64,
            base_offset: batch.base_offset(),
            last_offset: batch.last_offset(),
            max_timestamp: batch.max_timestamp(),
        };
        self.record_append(files, loc, index_interval_bytes)
    }

    /// The batch holding the first offset ≥ `offset` at or after `from_position` (Kafka's `translateOffset`).
    pub fn translate_offset(
        &mut self,
        files: &Arc<FileCache>,
        offset: i64,
    ) -> std::io::Result<Option<BatchLocation>> {
        let start = match self.index.floor(
            files,
            &self.log_path,
            offset.saturating_sub(self.base_offset),
        )? {
            Some(entry) => u64::from(entry.position),
            None => 0,
        };
        let file = files.get(&self.log_path, false)?;
        let mut found = None;
        scan(&file, start, self.size, false, |pos, header| {
            let loc = header_location(pos, header);
            if loc.last_offset >= offset {
                found = Some(loc);
                return false;
            }
            true
        })?;
        Ok(found)
    }

    /// Kafka's `LogSegment.read`: bytes from the batch holding `start_offset`, at most `max_size` (or the
    /// whole first batch when `min_one_batch`), never past `max_position`.
    pub fn read(
        &mut self,
        files: &Arc<FileCache>,
        start_offset: i64,
        max_size: u64,
        max_position: u64,
        min_one_batch: bool,
    ) -> std::io::Result<Option<(FileSlice, BatchLocation)>> {
        let Some(loc) = self.translate_offset(files, start_offset)? else {
            return Ok(None);
        };
        let adjusted = if min_one_batch {
            max_size.max(loc.size)
        } else {
            max_size
        };
        let len = max_position
            .min(self.size)
            .saturating_sub(loc.position)
            .min(adjusted);
        let file = files.get(&self.log_path, false)?;
        Ok(Some((
            FileSlice {
                file,
                path: self.log_path.clone(),
                position: loc.position,
                len,
            },
            loc,
        )))
    }

    /// The first batch whose max timestamp ≥ `timestamp` (for ListOffsets by time).
    pub fn find_offset_by_timestamp(
        &mut self,
        files: &Arc<FileCache>,
        timestamp: i64,
        start_offset: i64,
    ) -> std::io::Result<Option<BatchLocation>> {
        let from_offset =
            match self
                .time_index
                .floor(files, &self.log_path, timestamp.saturating_sub(1))?
            {
                Some(entry) => self.base_offset + i64::from(entry.relative_offset),
                None => self.base_offset,
            }
            .max(start_offset);
        let start = match self
            .index
            .floor(files, &self.log_path, from_offset - self.base_offset)?
        {
            Some(entry) => u64::from(entry.position),
            None => 0,
        };
        let file = files.get(&self.log_path, false)?;
        let mut found = None;
        scan(&file, start, self.size, false, |pos, header| {
            let loc = header_location(pos, header);
            if loc.max_timestamp >= timestamp && loc.last_offset >= start_offset {
                found = Some(loc);
                return false;
            }
            true
        })?;
        Ok(found)
    }

    /// Every batch location of the segment, in order.
    pub fn locations(&self, files: &Arc<FileCache>) -> std::io::Result<Vec<BatchLocation>> {
        let file = files.get(&self.log_path, false)?;
        let mut out = Vec::new();
        scan(&file, 0, self.size, false, |pos, header| {
            out.push(header_location(pos, header));
            true
        })?;
        Ok(out)
    }

    /// Visits every whole batch from `from_position`.
    pub fn for_each_batch(
        &self,
        files: &Arc<FileCache>,
        from_position: u64,
        visit: impl FnMut(u64, &RecordBatch<'_>) -> bool,
    ) -> std::io::Result<ScanEnd> {
        for_each_batch_in(files, &self.log_path, self.size, from_position, visit)
    }

    /// Removes every batch with last offset ≥ `offset`; returns the bytes removed.
    pub fn truncate_to(
        &mut self,
        files: &Arc<FileCache>,
        offset: i64,
        index_interval_bytes: u64,
    ) -> std::io::Result<u64> {
        let Some(loc) = self.translate_offset(files, offset)? else {
            return Ok(0);
        };
        let cut = self.size - loc.position;
        files.get(&self.log_path, false)?.set_len(loc.position)?;
        self.size = loc.position;
        // The indexes and statistics are rebuilt from what remains: cheap next to a truncation's rarity.
        self.recover(files, index_interval_bytes, |_| {})?;
        Ok(cut)
    }

    /// On roll and close: the time index gets the segment's final max timestamp (Kafka's
    /// `onBecomeInactiveSegment`), and everything is fsynced.
    pub fn seal(&mut self, files: &Arc<FileCache>) -> std::io::Result<()> {
        self.maybe_append_time_entry(files)?;
        self.flush(files)
    }

    /// Appends the final time-index entry without fsync (on close; the flush that follows covers it).
    pub fn finish_time_index(&mut self, files: &Arc<FileCache>) -> std::io::Result<()> {
        self.maybe_append_time_entry(files)
    }

    /// Handles on the segment's three files, for a flush on another thread.
    pub fn files_to_flush(
        &self,
        files: &Arc<FileCache>,
    ) -> std::io::Result<Vec<Arc<std::fs::File>>> {
        Ok(vec![
            files.get(&self.log_path, false)?,
            files.get(&IndexFile::<OffsetEntry>::path(&self.log_path), true)?,
            files.get(&IndexFile::<TimeEntry>::path(&self.log_path), true)?,
        ])
    }

    pub fn flush(&self, files: &Arc<FileCache>) -> std::io::Result<()> {
        self.files_to_flush(files)?
            .iter()
            .try_for_each(|file| file.sync_data())
    }

    /// Renames the segment's files with the `.deleted` suffix; returns the new paths.
    pub fn rename_deleted(&self, files: &Arc<FileCache>) -> std::io::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for path in [
            self.log_path.clone(),
            IndexFile::<OffsetEntry>::path(&self.log_path),
            IndexFile::<TimeEntry>::path(&self.log_path),
        ] {
            files.forget(&path);
            let mut deleted = path.clone().into_os_string();
            deleted.push(".deleted");
            let deleted = PathBuf::from(deleted);
            match std::fs::rename(&path, &deleted) {
                Ok(()) => out.push(deleted),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Drops cached index entries (memory for idle partitions).
    pub fn unload_indexes(&mut self) {
        self.index.unload();
        self.time_index.unload();
    }

    pub fn base_offset(&self) -> i64 {
        self.base_offset
    }
    pub fn size(&self) -> u64 {
        self.size
    }
    pub fn next_offset(&self) -> i64 {
        self.next_offset
    }
    pub fn max_timestamp(&self) -> i64 {
        self.max_timestamp
    }
    pub fn offset_of_max_timestamp(&self) -> i64 {
        self.offset_of_max_timestamp
    }
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
    /// The sizes of the `.index` and `.timeindex` files.
    pub fn index_bytes(&self) -> (u64, u64) {
        (
            self.index.len() * OffsetEntry::SIZE as u64,
            self.time_index.len() * TimeEntry::SIZE as u64,
        )
    }
    pub fn index_entries(&self) -> u64 {
        self.index.len()
    }
    pub fn time_index_entries(&self) -> u64 {
        self.time_index.len()
    }
    /// How long this segment has waited to be rolled when a batch whose largest timestamp is
    /// `incoming_max_timestamp` arrives (Kafka's `timeWaitedForRoll`): the distance between the
    /// record timestamps when the first batch has one, so a backfill of old records fills
    /// segments as a live stream does; the wall clock since creation otherwise.
    pub fn time_waited_for_roll(&self, now_ms: i64, incoming_max_timestamp: i64) -> i64 {
        match self.rolling_timestamp {
            Some(first) if first >= 0 => incoming_max_timestamp.saturating_sub(first),
            _ => now_ms.saturating_sub(self.created_ms),
        }
    }

    /// The largest timestamp of the first batch, which `max.compaction.lag.ms` counts from.
    pub fn first_batch_timestamp(&self) -> Option<i64> {
        self.rolling_timestamp
    }

    /// The timestamp time-based retention counts from: the largest record timestamp, or the
    /// segment's file time when no record has one (Kafka's `largestTimestamp`).
    pub fn largest_timestamp(&self) -> i64 {
        if self.max_timestamp >= 0 {
            self.max_timestamp
        } else {
            self.created_ms
        }
    }
}

/// Where the whole batches of a byte buffer end (the rest is a torn tail).
pub fn whole_batches_len(buf: &[u8]) -> usize {
    let mut pos = 0;
    while let BatchFraming::Complete(size) = framing(&buf[pos..]) {
        pos += size;
    }
    pos
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn slice_of(contents: &[u8], position: u64, len: u64) -> FileSlice {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(contents).unwrap();
        FileSlice {
            file: Arc::new(file),
            path: PathBuf::from("00000000000000000000.log"),
            position,
            len,
        }
    }

    #[test]
    fn a_slice_reads_exactly_its_bytes() {
        let contents: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let slice = slice_of(&contents, 12_345, 2_000_000);
        assert_eq!(slice.read().unwrap(), &contents[12_345..2_012_345]);
        assert!(slice_of(&contents, 7, 0).read().unwrap().is_empty());
    }

    #[test]
    fn a_slice_past_the_end_of_its_file_is_an_error() {
        let error = slice_of(b"abcdef", 2, 10).read().unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof);
    }
}
