//! The leader's batch validation (§1.3–§1.5): each refusal with Kafka's code, and the rewrites.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use gregor_log::batch::{self, BatchBuilder, Header, RecordBatch, TimestampType};
use gregor_log::compression::{Compression, CompressionLevels};
use gregor_log::config::{LogConfig, TopicCompression};
use gregor_log::error::{KafkaCode, RejectedBy};
use gregor_log::validate::validate;

const NOW: i64 = 1_700_000_000_000;

fn batch_of(codec: Compression, records: &[(Option<&[u8]>, i64)]) -> Vec<u8> {
    let mut builder = BatchBuilder::new(codec);
    for (key, ts) in records {
        builder.append(
            *ts,
            *key,
            Some(b"value"),
            &[Header {
                key: b"h",
                value: Some(b"1"),
            }],
        );
    }
    builder.build().unwrap()
}

fn refix_crc(bytes: &mut [u8]) {
    let crc = crc32c::crc32c(&bytes[batch::ATTRIBUTES_OFFSET..]);
    bytes[batch::CRC_OFFSET..batch::CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
}

fn code(bytes: &[u8], config: &LogConfig) -> KafkaCode {
    validate(bytes, config, NOW, "t-0").unwrap_err().code
}

fn rejected_by(bytes: &[u8], config: &LogConfig) -> RejectedBy {
    validate(bytes, config, NOW, "t-0").unwrap_err().by
}

#[test]
fn a_valid_batch_is_kept_in_place_with_the_record_maximum_timestamp() {
    let mut bytes = batch_of(
        Compression::None,
        &[
            (Some(b"a"), NOW - 5),
            (Some(b"b"), NOW - 1),
            (Some(b"c"), NOW - 3),
        ],
    );
    // A producer's wrong max timestamp is replaced by the record maximum, with a new CRC.
    bytes[batch::MAX_TIMESTAMP_OFFSET..batch::MAX_TIMESTAMP_OFFSET + 8]
        .copy_from_slice(&7i64.to_be_bytes());
    refix_crc(&mut bytes);
    let mut v = validate(&bytes, &LogConfig::default(), NOW, "t-0").unwrap();
    assert!(!v.rebuilt);
    assert_eq!(
        (
            v.record_count,
            v.last_offset_delta,
            v.max_timestamp,
            v.log_append_time
        ),
        (3, 2, NOW - 1, -1)
    );
    let appended = v.to_vec();
    let view = RecordBatch::new(&appended).unwrap();
    assert_eq!(view.max_timestamp(), NOW - 1);
    assert!(view.is_valid_crc());
    let crc = view.crc();
    v.assign_offsets(500, 3);
    let appended = v.to_vec();
    let view = RecordBatch::new(&appended).unwrap();
    assert_eq!(
        (
            view.base_offset(),
            view.last_offset(),
            view.partition_leader_epoch()
        ),
        (500, 502, 3)
    );
    assert_eq!(view.crc(), crc, "offsets and epoch are outside the CRC");
    assert!(view.is_valid_crc());
}

#[test]
fn log_append_time_topics_stamp_now() {
    let config = LogConfig {
        timestamp_type: TimestampType::LogAppendTime,
        ..LogConfig::default()
    };
    for codec in [Compression::None, Compression::Lz4] {
        let bytes = batch_of(codec, &[(Some(b"a"), 5), (Some(b"b"), 6)]);
        let v = validate(&bytes, &config, NOW, "t-0").unwrap();
        assert!(!v.rebuilt, "{codec:?}");
        assert_eq!((v.log_append_time, v.max_timestamp), (NOW, NOW));
        let appended = v.to_vec();
        let view = RecordBatch::new(&appended).unwrap();
        assert_eq!(view.timestamp_type(), TimestampType::LogAppendTime);
        assert_eq!(
            view.base_timestamp(),
            5,
            "the base timestamp and deltas are left alone"
        );
        assert!(view.is_valid_crc());
        assert!(view
            .owned_records()
            .unwrap()
            .iter()
            .all(|r| r.timestamp == NOW));
    }
}

#[test]
fn framing_magic_and_batch_count() {
    let config = LogConfig::default();
    let one = batch_of(Compression::None, &[(Some(b"a"), NOW)]);
    assert_eq!(code(&[], &config), KafkaCode::InvalidRecord, "no batch");
    let mut two = one.clone();
    two.extend_from_slice(&one);
    assert_eq!(code(&two, &config), KafkaCode::InvalidRecord, "two batches");
    let mut trailing = one.clone();
    trailing.extend_from_slice(&one[..20]);
    assert!(
        validate(&trailing, &config, NOW, "t-0").is_ok(),
        "a trailing partial batch is trimmed"
    );
    let mut magic1 = one.clone();
    magic1[batch::MAGIC_OFFSET] = 1;
    assert_eq!(code(&magic1, &config), KafkaCode::InvalidRecord);
    let mut magic9 = one.clone();
    magic9[batch::MAGIC_OFFSET] = 9;
    assert_eq!(code(&magic9, &config), KafkaCode::CorruptMessage);
    let mut tiny = one.clone();
    tiny[8..12].copy_from_slice(&13i32.to_be_bytes());
    assert_eq!(
        code(&tiny, &config),
        KafkaCode::CorruptMessage,
        "length below 14"
    );
    let mut short = one[..40].to_vec();
    short[8..12].copy_from_slice(&28i32.to_be_bytes());
    assert_eq!(
        code(&short, &config),
        KafkaCode::CorruptMessage,
        "shorter than the 61-byte header"
    );
    // Kafka refuses each of these in `ProduceRequest.validateRecords`, before the log.
    for refused in [&[][..], &two, &magic1, &magic9, &tiny] {
        assert_eq!(rejected_by(refused, &config), RejectedBy::Request);
    }
    // Its batch iterator takes a batch shorter than a header; its log finds it corrupt.
    assert_eq!(rejected_by(&short, &config), RejectedBy::Log);
}

#[test]
fn header_checks_in_kafkas_order() {
    let config = LogConfig::default();
    let good = batch_of(Compression::None, &[(Some(b"a"), NOW), (Some(b"b"), NOW)]);

    let mut offset = good.clone();
    batch::set_base_offset(&mut offset, 3);
    assert_eq!(code(&offset, &config), KafkaCode::InvalidRecord);
    assert_eq!(rejected_by(&offset, &config), RejectedBy::Log);

    let small = LogConfig {
        max_message_bytes: good.len() as u64 - 1,
        ..LogConfig::default()
    };
    assert_eq!(code(&good, &small), KafkaCode::MessageTooLarge);
    assert_eq!(rejected_by(&good, &small), RejectedBy::MaxMessageBytes);

    let mut crc = good.clone();
    let last = crc.len() - 1;
    crc[last] ^= 1;
    assert_eq!(code(&crc, &config), KafkaCode::CorruptMessage);

    let mut codec = good.clone();
    codec[batch::ATTRIBUTES_OFFSET + 1] |= 5;
    refix_crc(&mut codec);
    assert_eq!(code(&codec, &config), KafkaCode::UnknownServerError);

    let mut control = good.clone();
    control[batch::ATTRIBUTES_OFFSET + 1] |= 0x20;
    refix_crc(&mut control);
    assert_eq!(code(&control, &config), KafkaCode::InvalidRecord);

    let mut no_seq = good.clone();
    no_seq[batch::PRODUCER_ID_OFFSET..batch::PRODUCER_ID_OFFSET + 8]
        .copy_from_slice(&9i64.to_be_bytes());
    refix_crc(&mut no_seq);
    assert_eq!(
        code(&no_seq, &config),
        KafkaCode::InvalidRecord,
        "producer id without a sequence"
    );

    let mut count = good.clone();
    count[batch::RECORDS_COUNT_OFFSET..batch::RECORDS_COUNT_OFFSET + 4]
        .copy_from_slice(&3i32.to_be_bytes());
    refix_crc(&mut count);
    assert_eq!(
        code(&count, &config),
        KafkaCode::InvalidRecord,
        "count ≠ last offset delta + 1"
    );

    let mut delta = good.clone();
    delta[batch::LAST_OFFSET_DELTA_OFFSET..batch::LAST_OFFSET_DELTA_OFFSET + 4]
        .copy_from_slice(&(-1i32).to_be_bytes());
    refix_crc(&mut delta);
    assert_eq!(code(&delta, &config), KafkaCode::InvalidRecord);

    let mut framing = good.clone();
    framing[batch::RECORD_BATCH_OVERHEAD] = 0x7f; // the first record's length runs past the end
    refix_crc(&mut framing);
    assert_eq!(code(&framing, &config), KafkaCode::InvalidRecord);

    let lat = batch_of(Compression::None, &[(Some(b"a"), -1)]);
    let mut lat = lat;
    let (header, rest) = lat.split_at_mut(batch::RECORD_BATCH_OVERHEAD);
    batch::set_max_timestamp(
        header.try_into().unwrap(),
        rest,
        TimestampType::LogAppendTime,
        0,
    );
    assert_eq!(
        code(&lat, &config),
        KafkaCode::InvalidTimestamp,
        "producers may not set LogAppendTime"
    );

    let segment = LogConfig {
        segment_bytes: good.len() as u64 - 1,
        ..LogConfig::default()
    };
    assert_eq!(code(&good, &segment), KafkaCode::RecordListTooLarge);
}

/// Kafka sends an `error_message` only with LogValidator's `RecordValidationException` (per-record
/// errors, INVALID_TIMESTAMP ones included); a refusal of the batch as a whole, an
/// InvalidRecordException among them, answers none.
#[test]
fn only_record_validation_failures_carry_an_error_message() {
    let good = batch_of(Compression::None, &[(None, NOW), (Some(b"b"), NOW)]);
    let message = |bytes: &[u8], config: &LogConfig| {
        let refused = validate(bytes, config, NOW, "t-0").unwrap_err();
        (refused.code, refused.error_message().map(str::to_owned))
    };
    let mut control = good.clone();
    control[batch::ATTRIBUTES_OFFSET + 1] |= 0x20;
    refix_crc(&mut control);
    let mut framing = good.clone();
    framing[batch::RECORD_BATCH_OVERHEAD] = 0x7f;
    refix_crc(&mut framing);
    let mut corrupt = batch_of(Compression::Lz4, &[(Some(b"a"), NOW)]);
    corrupt[batch::RECORD_BATCH_OVERHEAD + 8] ^= 0xff;
    corrupt[batch::RECORD_BATCH_OVERHEAD + 9] ^= 0xff;
    refix_crc(&mut corrupt);
    for (bytes, code) in [
        (control, KafkaCode::InvalidRecord),
        (framing, KafkaCode::InvalidRecord),
        (corrupt, KafkaCode::UnknownServerError),
    ] {
        assert_eq!(message(&bytes, &LogConfig::default()), (code, None));
    }

    let compact = LogConfig {
        cleanup_compact: true,
        ..LogConfig::default()
    };
    assert_eq!(
        message(&good, &compact),
        (
            KafkaCode::InvalidRecord,
            Some(
                "One or more records have been rejected due to 1 record errors in total, and only \
                 showing the first three errors at most: [RecordError(batchIndex=0, message='Compacted \
                 topic cannot accept message without key in topic partition t-0')]"
                    .to_owned()
            )
        )
    );
    let late = LogConfig {
        timestamp_before_max_ms: 1000,
        ..LogConfig::default()
    };
    let old = batch_of(Compression::None, &[(Some(b"a"), NOW - 5000)]);
    assert_eq!(
        message(&old, &late),
        (
            KafkaCode::InvalidTimestamp,
            Some("One or more records have been rejected due to invalid timestamp".to_owned())
        )
    );
}

#[test]
fn per_record_errors_name_the_records() {
    let compact = LogConfig {
        cleanup_compact: true,
        ..LogConfig::default()
    };
    let bytes = batch_of(
        Compression::Gzip,
        &[(Some(b"a"), NOW), (None, NOW), (None, NOW)],
    );
    let err = validate(&bytes, &compact, NOW, "t-0").unwrap_err();
    assert_eq!(err.code, KafkaCode::InvalidRecord);
    assert_eq!(
        err.record_errors
            .iter()
            .map(|e| e.batch_index)
            .collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(
        err.record_errors[0].message,
        "Compacted topic cannot accept message without key in topic partition t-0"
    );
    assert_eq!(
        err.message,
        "One or more records have been rejected due to 2 record errors in total, and only showing \
         the first three errors at most: [RecordError(batchIndex=1, message='Compacted topic cannot \
         accept message without key in topic partition t-0'), RecordError(batchIndex=2, \
         message='Compacted topic cannot accept message without key in topic partition t-0')]"
    );

    let config = LogConfig::default();
    let future = NOW + config.timestamp_after_max_ms + 1;
    let bytes = batch_of(
        Compression::None,
        &[(Some(b"a"), NOW), (Some(b"b"), future), (Some(b"c"), -1)],
    );
    let err = validate(&bytes, &config, NOW, "t-0").unwrap_err();
    assert_eq!(err.code, KafkaCode::InvalidTimestamp);
    assert_eq!(
        err.message,
        "One or more records have been rejected due to invalid timestamp"
    );
    assert_eq!(err.record_errors.len(), 1);
    assert_eq!(err.record_errors[0].batch_index, 1);
    assert_eq!(
        err.record_errors[0].message,
        format!(
            "Timestamp {future} of message with offset 1 is out of range. The timestamp should be within [{}, {}]",
            NOW.saturating_sub(config.timestamp_before_max_ms),
            NOW + config.timestamp_after_max_ms
        )
    );

    // Both kinds: INVALID_TIMESTAMP wins and every record error is listed.
    let past = LogConfig {
        cleanup_compact: true,
        timestamp_before_max_ms: 1000,
        ..LogConfig::default()
    };
    let bytes = batch_of(Compression::None, &[(None, NOW), (Some(b"b"), NOW - 5000)]);
    let err = validate(&bytes, &past, NOW, "t-0").unwrap_err();
    assert_eq!(err.code, KafkaCode::InvalidTimestamp);
    assert_eq!(err.record_errors.len(), 2);
}

#[test]
fn topic_codec_recompresses_and_bad_inner_offsets_rebuild() {
    let producer = batch_of(
        Compression::Gzip,
        &[(Some(b"a"), NOW), (Some(b"b"), NOW + 1)],
    );
    let original = RecordBatch::new(&producer)
        .unwrap()
        .owned_records()
        .unwrap();
    for target in [
        Compression::None,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ] {
        let config = LogConfig {
            compression: TopicCompression::Codec(target),
            ..LogConfig::default()
        };
        let v = validate(&producer, &config, NOW, "t-0").unwrap();
        assert!(v.rebuilt);
        let appended = v.to_vec();
        let view = RecordBatch::new(&appended).unwrap();
        assert_eq!(view.compression(), Some(target));
        assert!(view.is_valid_crc());
        assert_eq!(view.owned_records().unwrap(), original, "{target:?}");
    }
    let same = LogConfig {
        compression: TopicCompression::Codec(Compression::Gzip),
        ..LogConfig::default()
    };
    assert!(!validate(&producer, &same, NOW, "t-0").unwrap().rebuilt);

    let mut builder = BatchBuilder::new(Compression::Snappy);
    builder.append_with_offset_delta(0, NOW, Some(b"a"), Some(b"1"), &[]);
    builder.append_with_offset_delta(5, NOW, Some(b"b"), Some(b"2"), &[]);
    builder.last_offset_delta = Some(1);
    let gappy = builder.build().unwrap();
    let v = validate(&gappy, &LogConfig::default(), NOW, "t-0").unwrap();
    assert!(v.rebuilt, "inner offsets 0, 5 are rewritten to 0, 1");
    let appended = v.to_vec();
    let offsets: Vec<i64> = RecordBatch::new(&appended)
        .unwrap()
        .owned_records()
        .unwrap()
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(offsets, vec![0, 1]);

    let too_big = LogConfig {
        compression: TopicCompression::Codec(Compression::None),
        max_message_bytes: producer.len() as u64,
        ..LogConfig::default()
    };
    let mut wide = BatchBuilder::new(Compression::Zstd);
    for _ in 0..100 {
        wide.append(NOW, Some(b"k"), Some(&[b'x'; 100]), &[]);
    }
    let wide = wide.build().unwrap();
    let too_big = LogConfig {
        max_message_bytes: wide.len() as u64 + 100,
        ..too_big
    };
    assert_eq!(
        code(&wide, &too_big),
        KafkaCode::MessageTooLarge,
        "too large once decompressed"
    );
    assert_eq!(rejected_by(&wide, &too_big), RejectedBy::MaxMessageBytes);
}

/// A batch the broker rebuilds (inner offsets 0, 5, 2) is compressed at the topic's level only
/// when the topic names the codec; under `compression.type=producer` Kafka's
/// `BrokerCompressionType.targetCompression` builds the producer's codec at its default level.
#[test]
fn a_batch_rebuilt_in_the_producers_codec_takes_the_codecs_default_level() {
    let text: Vec<u8> = (0..20_000u32)
        .flat_map(|i| format!("{} ", (i * 7919) % 1000).into_bytes())
        .collect();
    let mut builder = BatchBuilder::new(Compression::Gzip);
    for delta in [0, 5, 2] {
        builder.append_with_offset_delta(delta, NOW, Some(b"k"), Some(&text), &[]);
    }
    builder.last_offset_delta = Some(2);
    let unordered = builder.build().unwrap();
    let rebuilt = |compression: TopicCompression, gzip_level: i32| {
        let config = LogConfig {
            compression,
            compression_levels: CompressionLevels {
                gzip: gzip_level,
                ..CompressionLevels::default()
            },
            ..LogConfig::default()
        };
        let validated = validate(&unordered, &config, NOW, "t-0").unwrap();
        assert!(validated.rebuilt);
        validated.to_vec()
    };
    let default_level = rebuilt(TopicCompression::Producer, -1);
    assert_eq!(rebuilt(TopicCompression::Producer, 1), default_level);
    assert_eq!(rebuilt(TopicCompression::Producer, 9), default_level);
    let gzip = TopicCompression::Codec(Compression::Gzip);
    assert_eq!(rebuilt(gzip, -1), default_level);
    assert!(
        rebuilt(gzip, 1).len() > default_level.len(),
        "the topic's own codec takes its level"
    );
}

/// Kafka's record iterator wraps the codec's IOException in a KafkaException, which its
/// ReplicaManager answers UNKNOWN_SERVER_ERROR: not CORRUPT_MESSAGE, which producers retry.
#[test]
fn a_corrupt_compressed_stream_with_a_valid_crc_is_an_unknown_server_error() {
    let mut bytes = batch_of(Compression::Lz4, &[(Some(b"a"), NOW)]);
    let at = batch::RECORD_BATCH_OVERHEAD + 8;
    bytes[at] ^= 0xff;
    bytes[at + 1] ^= 0xff;
    refix_crc(&mut bytes);
    assert_eq!(
        code(&bytes, &LogConfig::default()),
        KafkaCode::UnknownServerError
    );
}

/// How a batch of `plain`'s header with records section `section` in `codec` is refused: its
/// length, attributes and CRC fixed.
fn refusal(plain: &[u8], codec: Compression, section: &[u8]) -> (KafkaCode, String) {
    let mut bytes = plain[..batch::RECORD_BATCH_OVERHEAD].to_vec();
    bytes.extend_from_slice(section);
    let length = (bytes.len() - batch::LOG_OVERHEAD) as i32;
    bytes[batch::LENGTH_OFFSET..batch::LENGTH_OFFSET + 4].copy_from_slice(&length.to_be_bytes());
    bytes[batch::ATTRIBUTES_OFFSET + 1] |= codec.id();
    refix_crc(&mut bytes);
    let refused = validate(&bytes, &LogConfig::default(), NOW, "t-0").unwrap_err();
    (refused.code, refused.message)
}

/// Kafka's `Lz4BlockInputStream` refuses a frame of dependent blocks (`FLG.validate`) with a
/// RuntimeException its `Lz4Compression` wraps in a KafkaException: UNKNOWN_SERVER_ERROR, as
/// for other corrupt frames, though lz4_flex would read it.
#[test]
fn an_lz4_frame_of_dependent_blocks_is_an_unknown_server_error() {
    use std::io::Write;
    let records: Vec<(Option<&[u8]>, i64)> = vec![(Some(b"k"), NOW); 40];
    let plain = batch_of(Compression::None, &records);
    let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(
        lz4_flex::frame::FrameInfo::new()
            .block_size(lz4_flex::frame::BlockSize::Max64KB)
            .block_mode(lz4_flex::frame::BlockMode::Linked),
        Vec::new(),
    );
    encoder
        .write_all(&plain[batch::RECORD_BATCH_OVERHEAD..])
        .unwrap();
    let linked = encoder.finish().unwrap();
    assert_eq!(
        refusal(&plain, Compression::Lz4, &linked),
        (
            KafkaCode::UnknownServerError,
            "failed to decompress the lz4 record batch: dependent lz4 block stream is unsupported"
                .to_owned()
        )
    );
}

/// A raw snappy block whose length header claims more than its bytes can expand to (256 MiB - 1
/// from 64 bytes) is corrupt, refused before the decoder allocates the claim: UNKNOWN_SERVER_ERROR,
/// as for other corrupt snappy data (snappy-java's IOException, wrapped in a KafkaException).
#[test]
fn a_snappy_block_claiming_more_than_its_bytes_hold_is_an_unknown_server_error() {
    let plain = batch_of(Compression::None, &[(Some(b"a"), NOW)]);
    let mut liar = vec![0xff, 0xff, 0xff, 0x7f];
    liar.resize(64, 0);
    assert_eq!(
        refusal(&plain, Compression::Snappy, &liar),
        (
            KafkaCode::UnknownServerError,
            "failed to decompress the snappy record batch: snappy block of 64 bytes claims 268435455 bytes uncompressed"
                .to_owned()
        )
    );
}

/// Kafka's `DefaultRecord.readFrom` reads any negative key or value length as null (only a
/// negative header key size is invalid): such a record is accepted as it was sent.
#[test]
fn a_key_length_below_minus_one_is_a_null_key() {
    let mut bytes = batch_of(Compression::None, &[(None, NOW)]);
    // Record: length, attributes, timestamp delta 0, offset delta 0, then the key length.
    let key_length = batch::RECORD_BATCH_OVERHEAD + 4;
    assert_eq!(bytes[key_length], 0x01, "zig-zag −1");
    bytes[key_length] = 0x0d; // zig-zag −7
    refix_crc(&mut bytes);
    let validated = validate(&bytes, &LogConfig::default(), NOW, "t-0").unwrap();
    assert!(!validated.rebuilt);
    assert_eq!(validated.to_vec(), bytes);
    let stored = batch::RecordBatch::new(&bytes).unwrap();
    let payload = stored.decompressed_records().unwrap();
    let record = stored.records_in(&payload).next().unwrap().unwrap();
    assert_eq!(record.key, None);
    assert_eq!(record.value, Some(&b"value"[..]));
}
