//! The leader's validation of a produced batch (data-plane reference §1.3–§1.5), as a pure function.
//!
//! [`validate`] takes the `records` field of one Produce partition, the topic's [`LogConfig`] and the clock,
//! and either refuses the batch with Kafka's error code (and `record_errors` where Kafka gives them) or
//! returns the batch ready to append: max timestamp and LogAppendTime applied, CRC updated, recompressed when
//! the topic's `compression.type` asks for it. Offsets and the leader epoch are assigned later, under the
//! log's append lock, by [`ValidatedBatch::assign_offsets`]; both lie outside the CRC.

use std::borrow::Cow;

use crate::batch::{
    self, framing, BatchBuilder, BatchFraming, RecordBatch, TimestampType, CURRENT_MAGIC,
    RECORD_BATCH_OVERHEAD,
};
use crate::compression::{self, Compression, CompressionLevels};
use crate::config::{LogConfig, TopicCompression};
use crate::error::{BatchRejection, KafkaCode, RecordError, RejectedBy};
use crate::skim::{RecordSkimmer, SkimError};

/// A batch that passed validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedBatch<'a> {
    /// The batch header (base offset to record count); base offset 0 until
    /// [`Self::assign_offsets`].
    header: [u8; RECORD_BATCH_OVERHEAD],
    /// What follows the header: the producer's bytes, borrowed, unless the batch was rebuilt.
    /// Validation rewrites at most header fields, so an append copies the records once, into the
    /// page cache.
    records: Cow<'a, [u8]>,
    pub record_count: i32,
    pub last_offset_delta: i32,
    /// The batch's max timestamp as stored (now for LogAppendTime topics).
    pub max_timestamp: i64,
    /// `now` for LogAppendTime topics, −1 otherwise (Produce's `log_append_time_ms`).
    pub log_append_time: i64,
    /// The batch was decompressed and re-encoded (codec change or bad inner offsets).
    pub rebuilt: bool,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub transactional: bool,
}

impl ValidatedBatch<'_> {
    /// Sets the base offset and partition leader epoch; the CRC stays valid (neither is covered).
    pub fn assign_offsets(&mut self, base_offset: i64, partition_leader_epoch: i32) {
        batch::set_base_offset(&mut self.header, base_offset);
        batch::set_partition_leader_epoch(&mut self.header, partition_leader_epoch);
    }

    pub fn last_sequence(&self) -> i32 {
        if self.base_sequence < 0 {
            return self.base_sequence;
        }
        batch::increment_sequence(self.base_sequence, self.last_offset_delta)
    }

    /// The batch holding its own bytes (a copy of the producer's when validation kept them), so
    /// it may be validated on one thread and appended on another.
    pub fn into_owned(self) -> ValidatedBatch<'static> {
        ValidatedBatch {
            header: self.header,
            records: Cow::Owned(self.records.into_owned()),
            record_count: self.record_count,
            last_offset_delta: self.last_offset_delta,
            max_timestamp: self.max_timestamp,
            log_append_time: self.log_append_time,
            rebuilt: self.rebuilt,
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            base_sequence: self.base_sequence,
            transactional: self.transactional,
        }
    }

    /// The batch as it is appended: its header, then its records.
    pub fn parts(&self) -> BatchParts<'_> {
        BatchParts {
            header: &self.header,
            records: &self.records,
        }
    }

    /// The batch's bytes in one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        [&self.header[..], &self.records].concat()
    }
}

/// A v2 batch as two slices: its 61-byte header and the records after it.
#[derive(Debug, Clone, Copy)]
pub struct BatchParts<'b> {
    pub header: &'b [u8; RECORD_BATCH_OVERHEAD],
    pub records: &'b [u8],
}

impl<'b> BatchParts<'b> {
    /// Splits a whole batch (at least a header long, as [`RecordBatch::new`] checks).
    pub fn of(batch: &RecordBatch<'b>) -> Self {
        let (header, records) = batch.bytes().split_at(RECORD_BATCH_OVERHEAD);
        BatchParts {
            header: header.try_into().unwrap_or(&[0; RECORD_BATCH_OVERHEAD]),
            records,
        }
    }

    pub fn size(&self) -> usize {
        RECORD_BATCH_OVERHEAD + self.records.len()
    }
    pub fn base_offset(&self) -> i64 {
        batch::be_i64(self.header, batch::BASE_OFFSET_OFFSET)
    }
    pub fn last_offset(&self) -> i64 {
        let delta = batch::be_i32(self.header, batch::LAST_OFFSET_DELTA_OFFSET);
        self.base_offset() + i64::from(delta)
    }
    pub fn max_timestamp(&self) -> i64 {
        batch::be_i64(self.header, batch::MAX_TIMESTAMP_OFFSET)
    }
}

fn reject(code: KafkaCode, message: impl Into<String>) -> BatchRejection {
    BatchRejection::new(code, message)
}

/// MESSAGE_TOO_LARGE for a batch over `max.message.bytes`.
fn too_large(message: String) -> BatchRejection {
    BatchRejection {
        by: RejectedBy::MaxMessageBytes,
        ..reject(KafkaCode::MessageTooLarge, message)
    }
}

/// Splits a Produce partition's `records` into its single v2 batch as `ProduceRequest.validateRecords`
/// does: a trailing partial batch is dropped silently; none, a first batch not of magic 2, or a second
/// whole batch → INVALID_RECORD; unreadable framing → CORRUPT_MESSAGE (each [`RejectedBy::Request`]).
pub fn single_batch(records: &[u8]) -> Result<&[u8], BatchRejection> {
    split_single_batch(records).map_err(|rejection| BatchRejection {
        by: RejectedBy::Request,
        ..rejection
    })
}

fn split_single_batch(records: &[u8]) -> Result<&[u8], BatchRejection> {
    let first = match framing(records) {
        BatchFraming::Complete(size) => &records[..size],
        BatchFraming::Incomplete => {
            return Err(reject(
                KafkaCode::InvalidRecord,
                "produce request has no record batch",
            ))
        }
        BatchFraming::Corrupt(reason) => return Err(reject(KafkaCode::CorruptMessage, reason)),
    };
    if first[batch::MAGIC_OFFSET] as i8 != CURRENT_MAGIC {
        return Err(reject(
            KafkaCode::InvalidRecord,
            "produce requests v3+ may only carry record batches of magic 2",
        ));
    }
    match framing(&records[first.len()..]) {
        BatchFraming::Incomplete => Ok(first),
        BatchFraming::Complete(_) => Err(reject(
            KafkaCode::InvalidRecord,
            "produce requests v3+ must carry exactly one record batch per partition",
        )),
        BatchFraming::Corrupt(reason) => Err(reject(KafkaCode::CorruptMessage, reason)),
    }
}

/// Validates one produced partition's records for a client append to `partition` (named in
/// some of Kafka's messages, as `topic-index`).
pub fn validate<'a>(
    records: &'a [u8],
    config: &LogConfig,
    now_ms: i64,
    partition: &str,
) -> Result<ValidatedBatch<'a>, BatchRejection> {
    let bytes = single_batch(records)?;
    let base_offset = i64::from_be_bytes(bytes[0..8].try_into().unwrap_or_default());
    if base_offset != 0 {
        return Err(reject(
            KafkaCode::InvalidRecord,
            format!(
                "the base offset of a produced record batch must be 0, but it is {base_offset}"
            ),
        ));
    }
    if bytes.len() as u64 > config.max_message_bytes {
        return Err(too_large(format!(
            "the record batch is {} bytes, larger than the topic's max.message.bytes ({})",
            bytes.len(),
            config.max_message_bytes
        )));
    }
    let batch =
        RecordBatch::new(bytes).map_err(|reason| reject(KafkaCode::CorruptMessage, reason))?;
    if !batch.is_valid_crc() {
        return Err(reject(
            KafkaCode::CorruptMessage,
            format!(
                "record batch is corrupt (stored crc = {}, computed crc = {})",
                batch.crc(),
                batch.compute_crc()
            ),
        ));
    }
    let source_codec = batch.compression().ok_or_else(|| {
        reject(
            KafkaCode::UnknownServerError,
            format!("unknown compression type id {}", batch.compression_id()),
        )
    })?;
    if batch.is_control() {
        return Err(reject(
            KafkaCode::InvalidRecord,
            "clients may not send control batches",
        ));
    }
    if batch.has_producer_id() && batch.base_sequence() < 0 {
        return Err(reject(
            KafkaCode::InvalidRecord,
            format!(
                "invalid sequence number {} in a batch with producer id {}",
                batch.base_sequence(),
                batch.producer_id()
            ),
        ));
    }
    let count_from_offsets = i64::from(batch.last_offset_delta()) + 1;
    if count_from_offsets <= 0 {
        return Err(reject(
            KafkaCode::InvalidRecord,
            format!(
                "batch has an invalid offset range: last offset delta {}",
                batch.last_offset_delta()
            ),
        ));
    }
    let count = batch.records_count();
    if count <= 0 {
        return Err(reject(
            KafkaCode::InvalidRecord,
            format!("invalid reported count for record batch: {count}"),
        ));
    }
    if count_from_offsets != i64::from(count) {
        return Err(reject(
            KafkaCode::InvalidRecord,
            format!("inconsistent batch offset range ({count_from_offsets} offsets) and record count ({count})"),
        ));
    }

    let decompress_failed = |e: std::io::Error| {
        if compression::is_past_limit(&e) {
            return reject(
                KafkaCode::MessageTooLarge,
                format!(
                    "the {} record batch decompresses to more than {} bytes, this broker's limit",
                    source_codec.name(),
                    compression::MAX_DECOMPRESSED_BYTES
                ),
            );
        }
        reject(
            KafkaCode::UnknownServerError,
            format!(
                "failed to decompress the {} record batch: {e}",
                source_codec.name()
            ),
        )
    };
    // Read as a stream, keys and values skipped: memory does not follow the decompressed size.
    let mut records = RecordSkimmer::new(source_codec, batch.records_section(), count)
        .map_err(|e| skim_rejection(e, &decompress_failed))?;
    let mut record_errors = Vec::new();
    let mut max_timestamp = batch::NO_TIMESTAMP;
    let mut inner_deltas_in_order = true;
    let mut index = 0i32;
    while let Some(record) = records
        .next_record()
        .map_err(|e| skim_rejection(e, &decompress_failed))?
    {
        if record.offset_delta != index {
            inner_deltas_in_order = false;
        }
        if config.cleanup_compact && !record.has_key {
            record_errors.push((
                KafkaCode::InvalidRecord,
                RecordError {
                    batch_index: index,
                    message: format!(
                        "Compacted topic cannot accept message without key in topic partition {partition}"
                    ),
                },
            ));
        }
        let timestamp = batch.base_timestamp().wrapping_add(record.timestamp_delta);
        if let Some(message) =
            timestamp_error(&batch, timestamp, record.offset_delta, config, now_ms)
        {
            record_errors.push((
                KafkaCode::InvalidTimestamp,
                RecordError {
                    batch_index: index,
                    message,
                },
            ));
        }
        max_timestamp = max_timestamp.max(timestamp);
        index += 1;
    }
    drop(records);
    if !record_errors.is_empty() {
        return Err(record_rejection(record_errors));
    }

    let target_codec = match config.compression {
        TopicCompression::Producer => source_codec,
        TopicCompression::Codec(codec) => codec,
    };
    let log_append_time = match config.timestamp_type {
        TimestampType::LogAppendTime => now_ms,
        TimestampType::CreateTime => batch::NO_TIMESTAMP,
    };
    let in_place = target_codec == source_codec
        && (source_codec == Compression::None || inner_deltas_in_order);
    let (header, records, rebuilt) = if in_place {
        let parts = BatchParts::of(&batch);
        let mut header = *parts.header;
        let stored_max = match config.timestamp_type {
            TimestampType::LogAppendTime => now_ms,
            TimestampType::CreateTime => max_timestamp,
        };
        batch::set_max_timestamp(
            &mut header,
            parts.records,
            config.timestamp_type,
            stored_max,
        );
        (header, Cow::Borrowed(parts.records), false)
    } else {
        let mut builder = BatchBuilder::new(target_codec);
        // Kafka's `BrokerCompressionType.targetCompression`: the topic's levels go with the
        // topic's codec; a batch rebuilt in the producer's codec takes that codec's default.
        builder.levels = match config.compression {
            TopicCompression::Producer => CompressionLevels::default(),
            TopicCompression::Codec(_) => config.compression_levels,
        };
        builder.log_append_time =
            (config.timestamp_type == TimestampType::LogAppendTime).then_some(now_ms);
        builder.transactional = batch.is_transactional();
        builder.producer_id = batch.producer_id();
        builder.producer_epoch = batch.producer_epoch();
        builder.base_sequence = batch.base_sequence();
        let payload = batch.decompressed_records().map_err(decompress_failed)?;
        for record in batch.records_in(&payload) {
            let record = record.map_err(|e| reject(KafkaCode::InvalidRecord, e))?;
            let timestamp = batch.base_timestamp().wrapping_add(record.timestamp_delta);
            builder.append(timestamp, record.key, record.value, &record.headers);
        }
        let out = builder.build().map_err(|e| {
            reject(
                KafkaCode::CorruptMessage,
                format!("failed to recompress the batch: {e}"),
            )
        })?;
        if out.len() as u64 > config.max_message_bytes {
            return Err(too_large(format!(
                "the batch is {} bytes after recompression to {}, larger than max.message.bytes ({})",
                out.len(),
                target_codec.name(),
                config.max_message_bytes
            )));
        }
        let mut records = out;
        let header: [u8; RECORD_BATCH_OVERHEAD] = records
            .get(..RECORD_BATCH_OVERHEAD)
            .and_then(|header| header.try_into().ok())
            .ok_or_else(|| {
                reject(
                    KafkaCode::CorruptMessage,
                    "the recompressed batch is shorter than a batch header",
                )
            })?;
        records.drain(..RECORD_BATCH_OVERHEAD);
        (header, Cow::Owned(records), true)
    };
    let size = RECORD_BATCH_OVERHEAD + records.len();
    if size as u64 > config.segment_bytes {
        return Err(reject(
            KafkaCode::RecordListTooLarge,
            format!(
                "the batch is {} bytes, larger than the topic's segment.bytes ({})",
                size, config.segment_bytes
            ),
        ));
    }
    Ok(ValidatedBatch {
        record_count: count,
        last_offset_delta: count - 1,
        max_timestamp: if log_append_time >= 0 {
            now_ms
        } else {
            max_timestamp
        },
        log_append_time,
        rebuilt,
        producer_id: batch.producer_id(),
        producer_epoch: batch.producer_epoch(),
        base_sequence: batch.base_sequence(),
        transactional: batch.is_transactional(),
        header,
        records,
    })
}

/// Kafka's timestamp checks and messages; a produced batch's base offset is 0, so a record's
/// offset there is its offset delta.
fn timestamp_error(
    batch: &RecordBatch<'_>,
    timestamp: i64,
    offset: i32,
    config: &LogConfig,
    now_ms: i64,
) -> Option<String> {
    if config.timestamp_type == TimestampType::CreateTime && timestamp != batch::NO_TIMESTAMP {
        let lower = now_ms.saturating_sub(config.timestamp_before_max_ms);
        let upper = now_ms.saturating_add(config.timestamp_after_max_ms);
        if timestamp < lower || timestamp > upper {
            return Some(format!(
                "Timestamp {timestamp} of message with offset {offset} is out of range. The timestamp should be within [{lower}, {upper}]"
            ));
        }
        return None;
    }
    (batch.timestamp_type() == TimestampType::LogAppendTime)
        .then(|| format!("the record at offset {offset} has timestamp type LogAppendTime, which producers may not set"))
}

/// Kafka's `processRecordErrors`: INVALID_TIMESTAMP wins over INVALID_RECORD; the message names at most 3.
fn record_rejection(errors: Vec<(KafkaCode, RecordError)>) -> BatchRejection {
    let any_timestamp = errors
        .iter()
        .any(|(code, _)| *code == KafkaCode::InvalidTimestamp);
    let record_errors: Vec<RecordError> = errors.into_iter().map(|(_, e)| e).collect();
    let (code, message) = if any_timestamp {
        (
            KafkaCode::InvalidTimestamp,
            "One or more records have been rejected due to invalid timestamp".to_string(),
        )
    } else {
        // Java's `List.toString` of Kafka's `RecordError`s, which clients log as they are.
        let shown: Vec<String> = record_errors
            .iter()
            .take(3)
            .map(|e| {
                format!(
                    "RecordError(batchIndex={}, message='{}')",
                    e.batch_index, e.message
                )
            })
            .collect();
        (
            KafkaCode::InvalidRecord,
            format!(
                "One or more records have been rejected due to {} record errors in total, and only showing the first three errors at most: [{}]",
                record_errors.len(),
                shown.join(", ")
            ),
        )
    };
    BatchRejection {
        code,
        message,
        record_errors,
        by: RejectedBy::Log,
    }
}

/// A skim's failure as the produce answer: the decompressor's as CORRUPT_MESSAGE, a malformed
/// record as INVALID_RECORD.
fn skim_rejection(
    error: SkimError,
    decompress_failed: &impl Fn(std::io::Error) -> BatchRejection,
) -> BatchRejection {
    match error {
        SkimError::Decompress(error) => decompress_failed(error),
        SkimError::Record(message) => reject(KafkaCode::InvalidRecord, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_appended_as_produced_keeps_the_producers_records() {
        let now = 1_700_000_000_000;
        let mut builder = BatchBuilder::new(Compression::None);
        builder.append(now, Some(b"k"), Some(&[7; 5000]), &[]);
        let produced = builder.build().unwrap();
        let validated = validate(&produced, &LogConfig::default(), now, "t-0").unwrap();
        assert!(
            matches!(&validated.records, Cow::Borrowed(records)
                if std::ptr::eq(records.as_ptr(), produced[RECORD_BATCH_OVERHEAD..].as_ptr())),
            "the records are the request's bytes, not a copy"
        );
        assert_eq!(validated.to_vec(), produced);

        let log_append_time = LogConfig {
            timestamp_type: TimestampType::LogAppendTime,
            ..LogConfig::default()
        };
        let stamped = validate(&produced, &log_append_time, now + 5, "t-0").unwrap();
        assert!(matches!(stamped.records, Cow::Borrowed(_)));
        let appended = stamped.to_vec();
        let view = RecordBatch::new(&appended).unwrap();
        assert!(
            view.is_valid_crc(),
            "the CRC covers the new header and the same records"
        );
        assert_eq!(view.max_timestamp(), now + 5);
    }
}
