//! Hand-built request frames for the hostile-request tests: lists far longer than any client
//! sends, written straight into the frame.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The `index`th distinct four-letter topic name, in the order of the alphabet `a..zA..Z0..9`
/// (62^4, 14.8 million, of them).
pub fn four_letter_name(index: usize) -> [u8; 4] {
    let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    let mut name = [0u8; 4];
    let mut rest = index;
    for byte in name.iter_mut().rev() {
        *byte = alphabet[rest % alphabet.len()];
        rest /= alphabet.len();
    }
    name
}

/// A flexible request frame (size prefix included; header v2 with correlation id 42 and client
/// id "m") for `api_key` at `version`: `prefix`, then a compact list of `count` elements, each
/// written by `element` from its index, then `suffix`.
pub fn flexible_list(
    api_key: i16,
    version: i16,
    prefix: &[u8],
    count: usize,
    element_size: usize,
    mut element: impl FnMut(usize, &mut BytesMut),
    suffix: &[u8],
) -> BytesMut {
    let mut frame = BytesMut::with_capacity(30 + prefix.len() + count * element_size);
    frame.put_i32(0);
    frame.put_i16(api_key);
    frame.put_i16(version);
    frame.put_i32(42);
    frame.put_i16(1);
    frame.put_u8(b'm');
    frame.put_u8(0);
    frame.put_slice(prefix);
    let mut compact = count as u32 + 1;
    while compact >= 0x80 {
        frame.put_u8((compact as u8 & 0x7f) | 0x80);
        compact >>= 7;
    }
    frame.put_u8(compact as u8);
    for index in 0..count {
        element(index, &mut frame);
    }
    frame.put_slice(suffix);
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    frame
}

/// A CreateTopics v7 frame naming the first `count` distinct four-letter topics, each with
/// `partitions` partitions of one replica, no assignments and no configs (see
/// [`flexible_list`] for the header).
pub fn create_topics_v7(count: usize, partitions: i32, validate_only: bool) -> BytesMut {
    // TimeoutMs, ValidateOnly, tagged fields.
    let mut suffix = 1_000i32.to_be_bytes().to_vec();
    suffix.extend([u8::from(validate_only), 0]);
    flexible_list(
        19,
        7,
        b"",
        count,
        14,
        |index, frame| {
            frame.put_u8(5);
            frame.put_slice(&four_letter_name(index));
            frame.put_i32(partitions);
            // Replication factor 1, no assignments, no configs, no tagged fields.
            frame.put_slice(b"\x00\x01\x01\x01\x00");
        },
        &suffix,
    )
}

/// A CreatePartitions v3 frame growing the first `count` distinct four-letter topics to
/// `partitions` partitions each, without assignments (see [`flexible_list`] for the header).
pub fn create_partitions_v3(count: usize, partitions: i32) -> BytesMut {
    // TimeoutMs, ValidateOnly false, tagged fields.
    let mut suffix = 1_000i32.to_be_bytes().to_vec();
    suffix.extend([0, 0]);
    flexible_list(
        37,
        3,
        b"",
        count,
        11,
        |index, frame| {
            frame.put_u8(5);
            frame.put_slice(&four_letter_name(index));
            frame.put_i32(partitions);
            // Assignments null, no tagged fields.
            frame.put_slice(b"\x00\x00");
        },
        &suffix,
    )
}

/// A DescribeQuorum v2 frame naming partitions 0 to `count - 1` of `__cluster_metadata` (see
/// [`flexible_list`] for the header).
pub fn describe_quorum_v2(count: usize) -> BytesMut {
    // One topic, `__cluster_metadata`, then its partitions {index, tags}; then the topic's and
    // the body's tagged fields.
    flexible_list(
        55,
        2,
        b"\x02\x13__cluster_metadata",
        count,
        5,
        |index, frame| {
            frame.put_i32(index as i32);
            frame.put_u8(0);
        },
        b"\x00\x00",
    )
}

/// Checks that `body` (after the response header) is the answer Gregor and Kafka give
/// [`describe_quorum_v2`]: each partition UNKNOWN_TOPIC_OR_PARTITION.
pub fn check_describe_quorum_v2_unknown(mut body: Bytes, count: usize) -> anyhow::Result<()> {
    use kafka_protocol::messages::describe_quorum_response::PartitionData;
    use kafka_protocol::protocol::Decodable;
    // No error, an empty message (the schema's default), one topic.
    let head = b"\x00\x00\x01\x02\x13__cluster_metadata";
    anyhow::ensure!(
        body.starts_with(head),
        "DescribeQuorum's head: {:?}",
        body.slice(..head.len().min(body.len()))
    );
    body.advance(head.len());
    let length = compact_length(&mut body);
    anyhow::ensure!(
        length == count as u64 + 1,
        "{length} - 1 answers for {count} partitions"
    );
    for index in 0..count {
        let partition = PartitionData::decode(&mut body, 2)?;
        let expected = PartitionData::default()
            .with_partition_index(index as i32)
            .with_error_code(3);
        anyhow::ensure!(
            partition == expected,
            "partition {index} not UNKNOWN_TOPIC_OR_PARTITION: {partition:?}"
        );
    }
    // The topic's tagged fields, no nodes, the body's tagged fields.
    anyhow::ensure!(
        &body[..] == b"\x00\x01\x00",
        "DescribeQuorum's tail: {body:?}"
    );
    Ok(())
}

/// Reads a compact array's length (the count plus one, as an unsigned varint).
pub fn compact_length(body: &mut Bytes) -> u64 {
    let mut length = 0u64;
    for shift in (0..35).step_by(7) {
        let byte = body.get_u8();
        length |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
    }
    length
}

/// An IncrementalAlterConfigs v1 frame (AlterConfigs v2 when `legacy`) of `count` resources,
/// each a distinct four-letter TOPIC setting `flush.ms` to 1 (21 and 20 bytes each), not
/// validated only.
pub fn alter_configs_of_distinct_topics(count: usize, legacy: bool) -> BytesMut {
    let (api_key, version, size) = if legacy { (33, 2, 20) } else { (44, 1, 21) };
    flexible_list(
        api_key,
        version,
        b"",
        count,
        size,
        |index, frame| {
            frame.put_u8(2);
            frame.put_u8(5);
            frame.put_slice(&four_letter_name(index));
            frame.put_u8(2);
            frame.put_u8(9);
            frame.put_slice(b"flush.ms");
            if !legacy {
                frame.put_u8(0);
            }
            frame.put_slice(b"\x021\x00\x00");
        },
        b"\x00\x00",
    )
}

/// Checks the body of the answer to [`alter_configs_of_distinct_topics`] (its header read):
/// each of the `count` topics answered UNKNOWN_TOPIC_OR_PARTITION with its own message, in
/// request order.
pub fn assert_each_topic_unknown(mut body: Bytes, count: usize, legacy: bool) {
    use kafka_protocol::messages::{alter_configs_response, incremental_alter_configs_response};
    use kafka_protocol::protocol::Decodable;
    let what = if legacy {
        "AlterConfigs"
    } else {
        "IncrementalAlterConfigs"
    };
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(
        compact_length(&mut body),
        count as u64 + 1,
        "{what}: one per resource"
    );
    for index in 0..count {
        let name = four_letter_name(index);
        let name = std::str::from_utf8(&name).unwrap_or_default();
        let decoded = if legacy {
            alter_configs_response::AlterConfigsResourceResponse::decode(&mut body, 2).map(|r| {
                (
                    r.error_code,
                    r.error_message,
                    r.resource_type,
                    r.resource_name,
                )
            })
        } else {
            incremental_alter_configs_response::AlterConfigsResourceResponse::decode(&mut body, 1)
                .map(|r| {
                    (
                        r.error_code,
                        r.error_message,
                        r.resource_type,
                        r.resource_name,
                    )
                })
        };
        let (code, message, resource_type, resource_name) =
            decoded.unwrap_or_else(|e| panic!("{what} resource {index}: {e}"));
        assert_eq!(
            (
                code,
                message.as_deref(),
                resource_type,
                resource_name.as_str()
            ),
            (
                3,
                Some(format!("The topic '{name}' does not exist.").as_str()),
                2,
                name
            ),
            "{what} resource {index}"
        );
    }
    assert_eq!(&body[..], b"\x00", "{what}: the body's tagged fields");
}

/// A record batch (v2, uncompressed) of one record with `value`, as a producer sends it.
pub fn one_record_batch(value: &str) -> anyhow::Result<bytes::Bytes> {
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(bytes::Bytes::copy_from_slice(value.as_bytes())),
        headers: Default::default(),
    };
    let mut buf = bytes::BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, [&record], &options)?;
    Ok(buf.freeze())
}
