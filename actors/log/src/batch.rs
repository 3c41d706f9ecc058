//! Record batch v2 (magic 2): a zero-copy view over a batch's bytes, its records, and a builder.
//!
//! Layout (big-endian, data-plane reference §1.1): base offset i64 @0, length i32 @8 (batch size − 12),
//! partition leader epoch i32 @12, magic i8 @16, CRC-32C u32 @17 over bytes 21..end, attributes i16 @21,
//! last offset delta i32 @23, base timestamp i64 @27, max timestamp i64 @35, producer id i64 @43, producer
//! epoch i16 @51, base sequence i32 @53, record count i32 @57, records @61. Base offset, length and
//! partition leader epoch lie outside the CRC, so the broker assigns offsets and epochs without a new CRC.

use crate::compression::{self, Compression, CompressionLevels};
use crate::varint::{read_varint, read_varlong, varint_size, write_varint, write_varlong};

pub const BASE_OFFSET_OFFSET: usize = 0;
pub const LENGTH_OFFSET: usize = 8;
pub const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
pub const MAGIC_OFFSET: usize = 16;
pub const CRC_OFFSET: usize = 17;
pub const ATTRIBUTES_OFFSET: usize = 21;
pub const LAST_OFFSET_DELTA_OFFSET: usize = 23;
pub const BASE_TIMESTAMP_OFFSET: usize = 27;
pub const MAX_TIMESTAMP_OFFSET: usize = 35;
pub const PRODUCER_ID_OFFSET: usize = 43;
pub const PRODUCER_EPOCH_OFFSET: usize = 51;
pub const BASE_SEQUENCE_OFFSET: usize = 53;
pub const RECORDS_COUNT_OFFSET: usize = 57;
/// Size of the batch header; the records start here.
pub const RECORD_BATCH_OVERHEAD: usize = 61;
/// Base offset plus length: the bytes before the length field's count starts.
pub const LOG_OVERHEAD: usize = 12;
/// Kafka's smallest legal length field (the legacy v0 record overhead).
pub const MIN_LENGTH_FIELD: i32 = 14;
pub const CURRENT_MAGIC: i8 = 2;

pub const NO_TIMESTAMP: i64 = -1;
pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_MASK: i16 = 0x08;
const TRANSACTIONAL_MASK: i16 = 0x10;
const CONTROL_MASK: i16 = 0x20;
const DELETE_HORIZON_MASK: i16 = 0x40;

/// Attributes bit 3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

impl TimestampType {
    pub fn name(self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }
}

pub(crate) fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}
pub(crate) fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

/// What the 12-byte log overhead plus magic at the head of `buf` announce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchFraming {
    /// A whole batch of this many bytes starts `buf`.
    Complete(usize),
    /// `buf` ends before the announced batch does (a torn tail or a trimmed request).
    Incomplete,
    /// The header cannot start a batch (length below 14, or a magic outside 0..=2).
    Corrupt(&'static str),
}

/// Reads the framing of the batch at the start of `buf` as Kafka's batch iterator does.
pub fn framing(buf: &[u8]) -> BatchFraming {
    if buf.len() < LOG_OVERHEAD {
        return BatchFraming::Incomplete;
    }
    let length = be_i32(buf, LENGTH_OFFSET);
    if length < MIN_LENGTH_FIELD {
        return BatchFraming::Corrupt(
            "record size is smaller than the minimum record overhead (14)",
        );
    }
    let size = length as usize + LOG_OVERHEAD;
    if buf.len() < size {
        return BatchFraming::Incomplete;
    }
    let magic = buf[MAGIC_OFFSET] as i8;
    if !(0..=2).contains(&magic) {
        return BatchFraming::Corrupt("invalid magic byte");
    }
    BatchFraming::Complete(size)
}

/// A borrowed record batch of magic 2 whose slice is exactly one batch.
#[derive(Clone, Copy)]
pub struct RecordBatch<'a> {
    bytes: &'a [u8],
}

impl std::fmt::Debug for RecordBatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordBatch")
            .field("base_offset", &self.base_offset())
            .field("last_offset", &self.last_offset())
            .field("size", &self.size())
            .finish()
    }
}

impl<'a> RecordBatch<'a> {
    /// Views `bytes` as one v2 batch: needs at least 61 bytes, magic 2 and a length field matching the slice.
    pub fn new(bytes: &'a [u8]) -> Result<Self, &'static str> {
        if bytes.len() < RECORD_BATCH_OVERHEAD {
            return Err("record batch is smaller than the v2 batch header (61 bytes)");
        }
        if bytes[MAGIC_OFFSET] as i8 != CURRENT_MAGIC {
            return Err("record batch magic is not 2");
        }
        if be_i32(bytes, LENGTH_OFFSET) as i64 != bytes.len() as i64 - LOG_OVERHEAD as i64 {
            return Err("record batch length field does not match its size");
        }
        Ok(RecordBatch { bytes })
    }

    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }
    pub fn size(&self) -> usize {
        self.bytes.len()
    }
    pub fn base_offset(&self) -> i64 {
        be_i64(self.bytes, BASE_OFFSET_OFFSET)
    }
    pub fn length(&self) -> i32 {
        be_i32(self.bytes, LENGTH_OFFSET)
    }
    pub fn partition_leader_epoch(&self) -> i32 {
        be_i32(self.bytes, PARTITION_LEADER_EPOCH_OFFSET)
    }
    pub fn magic(&self) -> i8 {
        self.bytes[MAGIC_OFFSET] as i8
    }
    /// The CRC stored in the header.
    pub fn crc(&self) -> u32 {
        be_i32(self.bytes, CRC_OFFSET) as u32
    }
    /// CRC-32C of bytes 21..end, which the stored CRC must equal.
    pub fn compute_crc(&self) -> u32 {
        crc32c::crc32c(&self.bytes[ATTRIBUTES_OFFSET..])
    }
    pub fn is_valid_crc(&self) -> bool {
        self.crc() == self.compute_crc()
    }
    pub fn attributes(&self) -> i16 {
        be_i16(self.bytes, ATTRIBUTES_OFFSET)
    }
    /// The codec id of attributes bits 0–2; ids 5–7 are not codecs.
    pub fn compression_id(&self) -> u8 {
        (self.attributes() & COMPRESSION_MASK) as u8
    }
    pub fn compression(&self) -> Option<Compression> {
        Compression::from_id(self.compression_id())
    }
    pub fn timestamp_type(&self) -> TimestampType {
        if self.attributes() & TIMESTAMP_TYPE_MASK != 0 {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes() & TRANSACTIONAL_MASK != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes() & CONTROL_MASK != 0
    }
    pub fn has_delete_horizon(&self) -> bool {
        self.attributes() & DELETE_HORIZON_MASK != 0
    }
    /// The compaction delete horizon (KIP-534), stored in the base timestamp field when bit 6 is set.
    pub fn delete_horizon_ms(&self) -> Option<i64> {
        self.has_delete_horizon().then(|| self.base_timestamp())
    }
    pub fn last_offset_delta(&self) -> i32 {
        be_i32(self.bytes, LAST_OFFSET_DELTA_OFFSET)
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset() + i64::from(self.last_offset_delta())
    }
    pub fn next_offset(&self) -> i64 {
        self.last_offset() + 1
    }
    pub fn base_timestamp(&self) -> i64 {
        be_i64(self.bytes, BASE_TIMESTAMP_OFFSET)
    }
    pub fn max_timestamp(&self) -> i64 {
        be_i64(self.bytes, MAX_TIMESTAMP_OFFSET)
    }
    pub fn producer_id(&self) -> i64 {
        be_i64(self.bytes, PRODUCER_ID_OFFSET)
    }
    pub fn producer_epoch(&self) -> i16 {
        be_i16(self.bytes, PRODUCER_EPOCH_OFFSET)
    }
    pub fn base_sequence(&self) -> i32 {
        be_i32(self.bytes, BASE_SEQUENCE_OFFSET)
    }
    pub fn has_producer_id(&self) -> bool {
        self.producer_id() > NO_PRODUCER_ID
    }
    /// Last sequence = base + last offset delta, wrapping past INT32_MAX to 0 as Kafka does.
    pub fn last_sequence(&self) -> i32 {
        let base = self.base_sequence();
        if base == NO_SEQUENCE {
            return NO_SEQUENCE;
        }
        increment_sequence(base, self.last_offset_delta())
    }
    pub fn records_count(&self) -> i32 {
        be_i32(self.bytes, RECORDS_COUNT_OFFSET)
    }
    /// The records section as stored (compressed when the batch is).
    pub fn records_section(&self) -> &'a [u8] {
        &self.bytes[RECORD_BATCH_OVERHEAD..]
    }

    /// The records section, decompressed when needed; borrowed for uncompressed batches.
    pub fn decompressed_records(&self) -> std::io::Result<std::borrow::Cow<'a, [u8]>> {
        match self.compression() {
            Some(Compression::None) => Ok(std::borrow::Cow::Borrowed(self.records_section())),
            Some(codec) => Ok(std::borrow::Cow::Owned(compression::decompress(
                codec,
                self.records_section(),
            )?)),
            None => Err(std::io::Error::other(format!(
                "unknown compression type id {}",
                self.compression_id()
            ))),
        }
    }

    /// Iterates the records of `payload` (from [`Self::decompressed_records`]), expecting exactly
    /// `records_count` of them.
    pub fn records_in<'b>(&self, payload: &'b [u8]) -> RecordIter<'b> {
        RecordIter {
            buf: payload,
            pos: 0,
            remaining: self.records_count().max(0),
            failed: false,
        }
    }

    /// A record's timestamp as readers see it: the batch max timestamp under LogAppendTime.
    pub fn record_timestamp(&self, record: &Record<'_>) -> i64 {
        match self.timestamp_type() {
            TimestampType::LogAppendTime => self.max_timestamp(),
            TimestampType::CreateTime => self.base_timestamp().wrapping_add(record.timestamp_delta),
        }
    }

    /// Decodes every record into owned values (a convenience for tests, tools and rewrites).
    pub fn owned_records(&self) -> Result<Vec<OwnedRecord>, String> {
        let payload = self
            .decompressed_records()
            .map_err(|e| format!("failed to decompress: {e}"))?;
        // Every record takes at least 7 bytes, which bounds the allocation a hostile count can ask for.
        let mut out =
            Vec::with_capacity((self.records_count().max(0) as usize).min(payload.len() / 7));
        for record in self.records_in(&payload) {
            let record = record?;
            out.push(OwnedRecord {
                offset: self.base_offset() + i64::from(record.offset_delta),
                timestamp: self.record_timestamp(&record),
                key: record.key.map(<[u8]>::to_vec),
                value: record.value.map(<[u8]>::to_vec),
                headers: record
                    .headers
                    .iter()
                    .map(|h| (h.key.to_vec(), h.value.map(<[u8]>::to_vec)))
                    .collect(),
            });
        }
        Ok(out)
    }
}

/// `sequence + delta` with Kafka's wrap from INT32_MAX to 0.
pub fn increment_sequence(sequence: i32, delta: i32) -> i32 {
    if delta < 0 {
        return sequence;
    }
    if sequence > i32::MAX - delta {
        delta - (i32::MAX - sequence) - 1
    } else {
        sequence + delta
    }
}

/// One header of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header<'b> {
    pub key: &'b [u8],
    pub value: Option<&'b [u8]>,
}

/// One record, borrowed from a batch's (decompressed) records section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record<'b> {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    pub key: Option<&'b [u8]>,
    pub value: Option<&'b [u8]>,
    pub headers: Vec<Header<'b>>,
    /// Bytes of the record including its length varint.
    pub size_in_bytes: usize,
}

/// A record with absolute offset and timestamp, owning its bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnedRecord {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// Iterator over the records of a batch; the first framing error ends it.
pub struct RecordIter<'b> {
    buf: &'b [u8],
    pos: usize,
    remaining: i32,
    failed: bool,
}

impl<'b> Iterator for RecordIter<'b> {
    type Item = Result<Record<'b>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.remaining == 0 {
            if self.pos != self.buf.len() {
                self.failed = true;
                return Some(Err(format!(
                    "incorrect declared batch size: {} bytes remain after the last record",
                    self.buf.len() - self.pos
                )));
            }
            return None;
        }
        self.remaining -= 1;
        match decode_record(&self.buf[self.pos..]) {
            Ok(record) => {
                self.pos += record.size_in_bytes;
                Some(Ok(record))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}

struct Cursor<'b> {
    buf: &'b [u8],
    pos: usize,
}

impl<'b> Cursor<'b> {
    fn varint(&mut self) -> Option<i32> {
        let (v, n) = read_varint(self.buf.get(self.pos..)?)?;
        self.pos += n;
        Some(v)
    }
    fn varlong(&mut self) -> Option<i64> {
        let (v, n) = read_varlong(self.buf.get(self.pos..)?)?;
        self.pos += n;
        Some(v)
    }
    fn bytes(&mut self, len: usize) -> Option<&'b [u8]> {
        let out = self.buf.get(self.pos..self.pos.checked_add(len)?)?;
        self.pos += len;
        Some(out)
    }
    /// A varint length then that many bytes; any negative length is null, as Kafka reads it.
    fn nullable_bytes(&mut self) -> Option<Option<&'b [u8]>> {
        match self.varint()? {
            n if n < 0 => Some(None),
            n => self.bytes(n as usize).map(Some),
        }
    }
}

/// Decodes the record at the start of `buf` (DefaultRecord's layout).
pub fn decode_record(buf: &[u8]) -> Result<Record<'_>, String> {
    let (length, prefix) = read_varint(buf).ok_or("invalid record structure: bad length varint")?;
    if length < 0 {
        return Err(format!("invalid record size {length}"));
    }
    let end = prefix + length as usize;
    let body = buf
        .get(prefix..end)
        .ok_or("incorrect declared batch size, premature end of records")?;
    let mut c = Cursor { buf: body, pos: 0 };
    let bad = || "invalid record structure".to_string();
    let attributes = *c.bytes(1).ok_or_else(bad)?.first().ok_or_else(bad)? as i8;
    let timestamp_delta = c.varlong().ok_or_else(bad)?;
    let offset_delta = c.varint().ok_or_else(bad)?;
    let key = c.nullable_bytes().ok_or_else(bad)?;
    let value = c.nullable_bytes().ok_or_else(bad)?;
    let header_count = c.varint().ok_or_else(bad)?;
    if header_count < 0 {
        return Err(format!("invalid negative header count {header_count}"));
    }
    // Each header takes at least two bytes, so a count beyond that cannot fit and is refused before allocating.
    if header_count as usize > body.len().saturating_sub(c.pos) / 2 {
        return Err(format!(
            "header count {header_count} does not fit in the record"
        ));
    }
    let mut headers = Vec::with_capacity(header_count as usize);
    for _ in 0..header_count {
        let key = match c.varint().ok_or_else(bad)? {
            n if n < 0 => return Err(format!("invalid negative header key size {n}")),
            n => c.bytes(n as usize).ok_or_else(bad)?,
        };
        let value = c.nullable_bytes().ok_or_else(bad)?;
        headers.push(Header { key, value });
    }
    if c.pos != body.len() {
        return Err(format!(
            "invalid record size: expected to read {} bytes in the record payload, read {}",
            body.len(),
            c.pos
        ));
    }
    Ok(Record {
        attributes,
        timestamp_delta,
        offset_delta,
        key,
        value,
        headers,
        size_in_bytes: end,
    })
}

/// Sets the base offset (outside the CRC).
pub fn set_base_offset(batch: &mut [u8], offset: i64) {
    batch[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8].copy_from_slice(&offset.to_be_bytes());
}

/// Sets the partition leader epoch (outside the CRC).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) {
    batch[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
        .copy_from_slice(&epoch.to_be_bytes());
}

/// Sets the timestamp type bit and max timestamp in a batch's `header`, recomputing the CRC
/// (over the header's covered part and the `records` after it) only when something changed
/// (Kafka's `setMaxTimestamp`).
pub fn set_max_timestamp(
    header: &mut [u8; RECORD_BATCH_OVERHEAD],
    records: &[u8],
    timestamp_type: TimestampType,
    max_timestamp: i64,
) {
    let attributes = be_i16(header, ATTRIBUTES_OFFSET);
    let new_attributes = match timestamp_type {
        TimestampType::CreateTime => attributes & !TIMESTAMP_TYPE_MASK,
        TimestampType::LogAppendTime => attributes | TIMESTAMP_TYPE_MASK,
    };
    if new_attributes == attributes && be_i64(header, MAX_TIMESTAMP_OFFSET) == max_timestamp {
        return;
    }
    header[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&new_attributes.to_be_bytes());
    header[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
        .copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&header[ATTRIBUTES_OFFSET..]), records);
    header[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

/// Builds one v2 batch. Records get consecutive offset deltas unless given explicitly (compaction keeps the
/// original offsets and `last_offset_delta` so producer sequences survive).
#[derive(Debug, Clone)]
pub struct BatchBuilder {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub compression: Compression,
    pub levels: CompressionLevels,
    /// Some(now) writes a LogAppendTime batch whose max timestamp is `now`.
    pub log_append_time: Option<i64>,
    pub transactional: bool,
    pub control: bool,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    /// KIP-534 delete horizon: stored as the base timestamp with attributes bit 6.
    pub delete_horizon_ms: Option<i64>,
    /// Overrides `count − 1` (compaction keeps the original last offset delta).
    pub last_offset_delta: Option<i32>,
    base_timestamp: Option<i64>,
    max_timestamp: i64,
    next_offset_delta: i32,
    count: i32,
    records: Vec<u8>,
    scratch: Vec<u8>,
}

impl Default for BatchBuilder {
    fn default() -> Self {
        BatchBuilder {
            base_offset: 0,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            compression: Compression::None,
            levels: CompressionLevels::default(),
            log_append_time: None,
            transactional: false,
            control: false,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            delete_horizon_ms: None,
            last_offset_delta: None,
            base_timestamp: None,
            max_timestamp: NO_TIMESTAMP,
            next_offset_delta: 0,
            count: 0,
            records: Vec::new(),
            scratch: Vec::new(),
        }
    }
}

impl BatchBuilder {
    pub fn new(compression: Compression) -> Self {
        BatchBuilder {
            compression,
            ..Default::default()
        }
    }

    /// Builder that keeps `source`'s header fields (offsets, producer, attributes) for a rewrite.
    pub fn like(source: &RecordBatch<'_>, compression: Compression) -> Self {
        BatchBuilder {
            base_offset: source.base_offset(),
            partition_leader_epoch: source.partition_leader_epoch(),
            compression,
            log_append_time: (source.timestamp_type() == TimestampType::LogAppendTime)
                .then(|| source.max_timestamp()),
            transactional: source.is_transactional(),
            control: source.is_control(),
            producer_id: source.producer_id(),
            producer_epoch: source.producer_epoch(),
            base_sequence: source.base_sequence(),
            last_offset_delta: Some(source.last_offset_delta()),
            ..Default::default()
        }
    }

    /// The header-only batch that stands for `source` once every record of it is gone (Kafka's
    /// `DefaultRecordBatch.writeEmptyHeader`): uncompressed, since an empty compressed payload
    /// is no stream librdkafka can decode; no base timestamp, and `source`'s max timestamp.
    pub fn empty_like(source: &RecordBatch<'_>) -> std::io::Result<Vec<u8>> {
        let mut builder = BatchBuilder::like(source, Compression::None);
        builder.max_timestamp = source.max_timestamp();
        builder.build()
    }

    pub fn record_count(&self) -> i32 {
        self.count
    }

    /// Appends a record at the next offset delta.
    pub fn append(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) {
        let delta = self.next_offset_delta;
        self.append_with_offset_delta(delta, timestamp, key, value, headers);
    }

    /// Appends a record with an explicit offset delta (must grow from record to record).
    pub fn append_with_offset_delta(
        &mut self,
        offset_delta: i32,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header<'_>],
    ) {
        let base_timestamp = *self
            .base_timestamp
            .get_or_insert(self.delete_horizon_ms.unwrap_or(timestamp));
        self.max_timestamp = self.max_timestamp.max(timestamp);
        let body = &mut self.scratch;
        body.clear();
        body.push(0);
        write_varlong(body, timestamp.wrapping_sub(base_timestamp));
        write_varint(body, offset_delta);
        write_nullable(body, key);
        write_nullable(body, value);
        write_varint(body, headers.len() as i32);
        for header in headers {
            write_nullable(body, Some(header.key));
            write_nullable(body, header.value);
        }
        write_varint(&mut self.records, body.len() as i32);
        self.records.extend_from_slice(body);
        self.count += 1;
        self.next_offset_delta = offset_delta + 1;
    }

    /// Encodes the batch with its CRC.
    pub fn build(&self) -> std::io::Result<Vec<u8>> {
        let payload = match self.compression {
            Compression::None => std::borrow::Cow::Borrowed(&self.records[..]),
            codec => {
                std::borrow::Cow::Owned(compression::compress(codec, &self.records, self.levels)?)
            }
        };
        let size = RECORD_BATCH_OVERHEAD + payload.len();
        let length = i32::try_from(size - LOG_OVERHEAD).map_err(std::io::Error::other)?;
        let mut attributes = i16::from(self.compression.id());
        if self.log_append_time.is_some() {
            attributes |= TIMESTAMP_TYPE_MASK;
        }
        if self.transactional {
            attributes |= TRANSACTIONAL_MASK;
        }
        if self.control {
            attributes |= CONTROL_MASK;
        }
        if self.delete_horizon_ms.is_some() {
            attributes |= DELETE_HORIZON_MASK;
        }
        let last_offset_delta = self
            .last_offset_delta
            .unwrap_or((self.next_offset_delta - 1).max(0));
        let base_timestamp = self
            .delete_horizon_ms
            .or(self.base_timestamp)
            .unwrap_or(NO_TIMESTAMP);
        let max_timestamp = self.log_append_time.unwrap_or(self.max_timestamp);
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(&self.base_offset.to_be_bytes());
        out.extend_from_slice(&length.to_be_bytes());
        out.extend_from_slice(&self.partition_leader_epoch.to_be_bytes());
        out.push(CURRENT_MAGIC as u8);
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&attributes.to_be_bytes());
        out.extend_from_slice(&last_offset_delta.to_be_bytes());
        out.extend_from_slice(&base_timestamp.to_be_bytes());
        out.extend_from_slice(&max_timestamp.to_be_bytes());
        out.extend_from_slice(&self.producer_id.to_be_bytes());
        out.extend_from_slice(&self.producer_epoch.to_be_bytes());
        out.extend_from_slice(&self.base_sequence.to_be_bytes());
        out.extend_from_slice(&self.count.to_be_bytes());
        out.extend_from_slice(&payload);
        let crc = crc32c::crc32c(&out[ATTRIBUTES_OFFSET..]);
        out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        Ok(out)
    }
}

fn write_nullable(out: &mut Vec<u8>, bytes: Option<&[u8]>) {
    match bytes {
        None => write_varint(out, -1),
        Some(b) => {
            write_varint(out, b.len() as i32);
            out.extend_from_slice(b);
        }
    }
}

/// Upper bound of a record's encoded size, for callers sizing buffers.
pub fn estimate_record_size(key_len: usize, value_len: usize) -> usize {
    21 + key_len + value_len + varint_size(key_len as i32) + varint_size(value_len as i32)
}

/// Iterates the whole batches of a byte buffer (a `.log` file section or a fetch response), stopping at a
/// torn tail; yields an error for framing that cannot be a batch.
pub fn batches(buf: &[u8]) -> impl Iterator<Item = Result<RecordBatch<'_>, &'static str>> {
    let mut pos = 0;
    let mut done = false;
    std::iter::from_fn(move || {
        if done {
            return None;
        }
        match framing(&buf[pos..]) {
            BatchFraming::Incomplete => None,
            BatchFraming::Corrupt(reason) => {
                done = true;
                Some(Err(reason))
            }
            BatchFraming::Complete(size) => {
                let slice = &buf[pos..pos + size];
                pos += size;
                let batch = RecordBatch::new(slice);
                done = batch.is_err();
                Some(batch)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kafka-python 3.0.12's `DefaultRecordBatchBuilder`: one record, key "k", value "v", timestamp 1000,
    /// uncompressed, no producer id (it writes partition leader epoch 0 where Java writes −1).
    const KAFKA_PYTHON_PLAIN: &str = "00000000000000000000003a0000000002716a618900000000000000000000000003e800000000000003e8ffffffffffffffffffffffffffff0000000110000000026b027600";
    /// The same client: gzip, producer id 4000, epoch 2, base sequence 17, three records with two headers.
    const KAFKA_PYTHON_GZIP: &str = "00000000000000000000007c00000000022c117d5b0001000000020000018bcfe568000000018bcfe568020000000000000fa0000200000011000000031f8b0800f2ab0d6b02ffcb636060e0ca4eadd435702b4bcc294dd535c047b1b064183255b0641831e631303181f51942f519e2a390f5b1b080f51941f519e1a310fa00eebb4884a8000000";

    /// kafka-python 3.0.12 with python-snappy (xerial framing), lz4 (LZ4 frame with content size) and
    /// zstandard: three records `key-i` → `value-i` × 5 with header h1 = "x", timestamps 1700000000000 + i.
    const KAFKA_PYTHON_SNAPPY: &str = "00000000000000000000008e000000000289db15e60002000000020000018bcfe568000000018bcfe56802ffffffffffffffffffffffffffff0000000382534e41505059000000000100000001000000499c0144660000000a6b65792d304676616c75652d306e07002402046831027866000202053400310d34003109345607001134040404053400320d340032093456070014020468310278";
    const KAFKA_PYTHON_LZ4: &str = "0000000000000000000000930000000002ed299c710003000000020000018bcfe568000000018bcfe56802ffffffffffffffffffffffffffff0000000304224d1868409c00000000000000054b000000ff03660000000a6b65792d304676616c75652d30070009a102046831027866000202340013313400123134000f070003043400210404340013323400123234000f0700036002046831027800000000";
    const KAFKA_PYTHON_ZSTD: &str = "00000000000000000000007a00000000021299bc4e0004000000020000018bcfe568000000018bcfe56802ffffffffffffffffffffffffffff0000000328b52ffd209c0502008402660000000a6b65792d304676616c75652d30020468310278660002023131040432320204683102780a00400118079281d6e035a0028c03c9ae6a3b31250c";

    #[test]
    fn real_client_batches_in_every_codec_decode() {
        for (fixture, codec) in [
            (KAFKA_PYTHON_SNAPPY, Compression::Snappy),
            (KAFKA_PYTHON_LZ4, Compression::Lz4),
            (KAFKA_PYTHON_ZSTD, Compression::Zstd),
        ] {
            let bytes = hex(fixture);
            let batch = RecordBatch::new(&bytes).unwrap();
            assert!(batch.is_valid_crc(), "{codec:?}");
            assert_eq!(batch.compression(), Some(codec));
            let records = batch.owned_records().unwrap();
            assert_eq!(records.len(), 3, "{codec:?}");
            for (i, r) in records.iter().enumerate() {
                assert_eq!(r.timestamp, 1_700_000_000_000 + i as i64);
                assert_eq!(r.key.as_deref(), Some(format!("key-{i}").as_bytes()));
                assert_eq!(
                    r.value.as_deref(),
                    Some(format!("value-{i}").repeat(5).as_bytes())
                );
                assert_eq!(r.headers, vec![(b"h1".to_vec(), Some(b"x".to_vec()))]);
            }
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn crc32c_known_vector() {
        assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
    }

    #[test]
    fn hand_encoded_batch_matches_the_spec_field_by_field() {
        // Built by hand from §1.1/§1.2: header, then one record of 9 bytes.
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&0i64.to_be_bytes()); // base offset
        bytes.extend_from_slice(&58i32.to_be_bytes()); // length = 70 − 12
        bytes.extend_from_slice(&0i32.to_be_bytes()); // partition leader epoch
        bytes.push(2); // magic
        bytes.extend_from_slice(&0x716a_6189u32.to_be_bytes()); // CRC-32C of bytes 21..
        bytes.extend_from_slice(&0i16.to_be_bytes()); // attributes
        bytes.extend_from_slice(&0i32.to_be_bytes()); // last offset delta
        bytes.extend_from_slice(&1000i64.to_be_bytes()); // base timestamp
        bytes.extend_from_slice(&1000i64.to_be_bytes()); // max timestamp
        bytes.extend_from_slice(&(-1i64).to_be_bytes()); // producer id
        bytes.extend_from_slice(&(-1i16).to_be_bytes()); // producer epoch
        bytes.extend_from_slice(&(-1i32).to_be_bytes()); // base sequence
        bytes.extend_from_slice(&1i32.to_be_bytes()); // records count
                                                      // length 8 (zig-zag 0x10), attributes, ts delta 0, offset delta 0, key len 1 (0x02) "k",
                                                      // value len 1 "v", 0 headers.
        bytes.extend_from_slice(&[0x10, 0x00, 0x00, 0x00, 0x02, b'k', 0x02, b'v', 0x00]);
        assert_eq!(
            bytes,
            hex(KAFKA_PYTHON_PLAIN),
            "the spec and a real client agree"
        );

        let batch = RecordBatch::new(&bytes).unwrap();
        assert_eq!(batch.base_offset(), 0);
        assert_eq!(batch.length(), 58);
        assert_eq!(batch.partition_leader_epoch(), 0);
        assert_eq!(batch.magic(), 2);
        assert_eq!(batch.crc(), 0x716a_6189);
        assert_eq!(batch.compute_crc(), 0x716a_6189);
        assert!(batch.is_valid_crc());
        assert_eq!(batch.compression(), Some(Compression::None));
        assert_eq!(batch.timestamp_type(), TimestampType::CreateTime);
        assert!(!batch.is_transactional() && !batch.is_control() && !batch.has_delete_horizon());
        assert_eq!(
            (
                batch.last_offset_delta(),
                batch.last_offset(),
                batch.next_offset()
            ),
            (0, 0, 1)
        );
        assert_eq!(
            (batch.base_timestamp(), batch.max_timestamp()),
            (1000, 1000)
        );
        assert_eq!(
            (
                batch.producer_id(),
                batch.producer_epoch(),
                batch.base_sequence()
            ),
            (-1, -1, -1)
        );
        assert_eq!(batch.records_count(), 1);
        let payload = batch.decompressed_records().unwrap();
        let records: Vec<Record<'_>> = batch.records_in(&payload).map(Result::unwrap).collect();
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].key, Some(&b"k"[..]));
        assert_eq!(records[0].value, Some(&b"v"[..]));
        assert_eq!(records[0].size_in_bytes, 9);
        assert_eq!(batch.record_timestamp(&records[0]), 1000);

        // The builder produces the same bytes.
        let mut builder = BatchBuilder::new(Compression::None);
        builder.partition_leader_epoch = 0;
        builder.append(1000, Some(b"k"), Some(b"v"), &[]);
        assert_eq!(builder.build().unwrap(), bytes);

        // Offsets and epoch lie outside the CRC; the max timestamp does not.
        let mut patched = bytes.clone();
        set_base_offset(&mut patched, 1234);
        set_partition_leader_epoch(&mut patched, 7);
        let view = RecordBatch::new(&patched).unwrap();
        assert!(view.is_valid_crc());
        assert_eq!(
            (view.base_offset(), view.partition_leader_epoch()),
            (1234, 7)
        );
        let (header, rest) = patched.split_at_mut(RECORD_BATCH_OVERHEAD);
        set_max_timestamp(
            header.try_into().unwrap(),
            rest,
            TimestampType::LogAppendTime,
            5000,
        );
        let view = RecordBatch::new(&patched).unwrap();
        assert!(view.is_valid_crc());
        assert_ne!(view.crc(), 0x716a_6189);
        assert_eq!(view.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!(
            view.record_timestamp(&records[0]),
            5000,
            "LogAppendTime readers see the max timestamp"
        );
    }

    #[test]
    fn real_client_gzip_batch_decodes() {
        let bytes = hex(KAFKA_PYTHON_GZIP);
        let batch = RecordBatch::new(&bytes).unwrap();
        assert!(batch.is_valid_crc());
        assert_eq!(batch.compression(), Some(Compression::Gzip));
        assert_eq!(
            (
                batch.producer_id(),
                batch.producer_epoch(),
                batch.base_sequence()
            ),
            (4000, 2, 17)
        );
        assert_eq!((batch.last_offset_delta(), batch.last_sequence()), (2, 19));
        let records = batch.owned_records().unwrap();
        assert_eq!(records.len(), 3);
        for (i, r) in records.iter().enumerate() {
            assert_eq!(r.offset, i as i64);
            assert_eq!(r.timestamp, 1_700_000_000_000 + i as i64);
            assert_eq!(r.key.as_deref(), Some(format!("key-{i}").as_bytes()));
            assert_eq!(
                r.value.as_deref(),
                Some(format!("value-{i}").repeat(5).as_bytes())
            );
            assert_eq!(
                r.headers,
                vec![
                    (b"h1".to_vec(), Some(b"x".to_vec())),
                    (b"h2".to_vec(), None)
                ]
            );
        }
        // Rebuilding with the same fields in every codec keeps the records.
        for codec in Compression::ALL {
            let mut builder = BatchBuilder::like(&batch, codec);
            let payload = batch.decompressed_records().unwrap();
            for record in batch.records_in(&payload) {
                let record = record.unwrap();
                builder.append_with_offset_delta(
                    record.offset_delta,
                    batch.record_timestamp(&record),
                    record.key,
                    record.value,
                    &record.headers,
                );
            }
            let rebuilt = builder.build().unwrap();
            let view = RecordBatch::new(&rebuilt).unwrap();
            assert!(view.is_valid_crc());
            assert_eq!(view.compression(), Some(codec));
            assert_eq!(view.owned_records().unwrap(), records, "{codec:?}");
            assert_eq!(view.last_sequence(), 19);
        }
    }

    #[test]
    fn malformed_records_are_refused() {
        // Negative header count.
        let mut rec = vec![0x0c, 0x00, 0x00, 0x00, 0x01, 0x01, 0x01];
        assert!(decode_record(&rec).unwrap_err().contains("header"));
        // Length claims more than present.
        rec[0] = 0x40;
        assert!(decode_record(&rec).is_err());
        // A record with one byte left over inside its length.
        assert!(
            decode_record(&[0x0e, 0x00, 0x00, 0x00, 0x01, 0x01, 0x00, 0x00])
                .unwrap_err()
                .contains("invalid record size")
        );
        // A batch whose count says 2 but holds 1 record, and one with leftover bytes.
        let mut builder = BatchBuilder::new(Compression::None);
        builder.append(1, None, Some(b"v"), &[]);
        let mut bytes = builder.build().unwrap();
        bytes[RECORDS_COUNT_OFFSET + 3] = 2;
        let payload = bytes[RECORD_BATCH_OVERHEAD..].to_vec();
        let batch = RecordBatch::new(&bytes).unwrap();
        assert!(batch.records_in(&payload).any(|r| r.is_err()));
        bytes[RECORDS_COUNT_OFFSET + 3] = 0;
        let batch = RecordBatch::new(&bytes).unwrap();
        assert!(batch
            .records_in(&payload)
            .next()
            .unwrap()
            .unwrap_err()
            .contains("remain"));
    }

    #[test]
    fn framing_of_buffers() {
        let bytes = hex(KAFKA_PYTHON_PLAIN);
        assert_eq!(framing(&bytes), BatchFraming::Complete(70));
        assert_eq!(framing(&bytes[..69]), BatchFraming::Incomplete);
        let mut short = bytes.clone();
        short[8..12].copy_from_slice(&13i32.to_be_bytes());
        assert!(matches!(framing(&short), BatchFraming::Corrupt(_)));
        let mut two = bytes.clone();
        two.extend_from_slice(&bytes);
        two.extend_from_slice(&bytes[..30]);
        assert_eq!(
            batches(&two).count(),
            2,
            "the torn third batch is not yielded"
        );
    }

    #[test]
    fn delete_horizon_is_the_base_timestamp() {
        let mut builder = BatchBuilder::new(Compression::None);
        builder.delete_horizon_ms = Some(9_000);
        builder.append(1_000, Some(b"k"), None, &[]);
        let bytes = builder.build().unwrap();
        let batch = RecordBatch::new(&bytes).unwrap();
        assert_eq!(batch.delete_horizon_ms(), Some(9_000));
        assert_eq!(batch.owned_records().unwrap()[0].timestamp, 1_000);
    }
}
