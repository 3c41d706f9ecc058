//! Fetch answers written with their record batches by reference.
//!
//! A Fetch answer is mostly record batches that a log shard read from a segment file into a
//! buffer of their own. Encoded whole, every batch was copied again into one response buffer,
//! which grew by doubling from its first guess: on a consumer reading 1 KiB records from the
//! page cache that copy and the page faults of the fresh buffers were 40% of the node's CPU.
//! Here a large answer is a list of parts instead: the encoded fields between the batches, and
//! each partition's batches as the shard's buffer, written together with `writev`.
//!
//! kafka-protocol encodes a message into one buffer, and the only hook it offers (its
//! `ByteBufMut`, a `bytes::BufMut`) cannot be implemented without `unsafe`, which this
//! workspace forbids. So the bytes around a list or the records are cut from small encodings
//! of the same struct made by the crate itself: the struct with an empty list (or records) and
//! with one element (one byte) more differ first in the last byte of the length field, and the
//! field's width (an `INT32`, or in flexible versions one varint byte for these small lengths)
//! gives its start. Everything else is the crate's own encoding, and the parts are checked
//! against its size of the whole answer.

use std::io::IoSlice;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::{FetchResponse, ResponseHeader};
use kafka_protocol::protocol::Encodable;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Records at least this long are written from the shard's buffer; shorter ones are copied
/// among the fields around them, so an answer of many small partitions stays a few buffers.
const SHARED_RECORDS: usize = 16 * 1024;

/// How many parts one `writev` takes (Linux allows 1,024).
const PARTS_PER_WRITE: usize = 64;

/// The first version whose lists, strings and byte fields have varint lengths.
const FIRST_FLEXIBLE: i16 = 12;

/// Whether the answer carries enough records to be written in parts.
pub(super) fn worth_parts(response: &FetchResponse) -> bool {
    response
        .responses
        .iter()
        .flat_map(|topic| &topic.partitions)
        .any(|partition| partition_records_len(partition) >= SHARED_RECORDS)
}

fn partition_records_len(partition: &PartitionData) -> usize {
    partition.records.as_ref().map_or(0, Bytes::len)
}

/// A response frame (size prefix included) as consecutive buffers.
#[derive(Debug)]
pub struct Parts {
    parts: Vec<Bytes>,
    len: usize,
}

impl Parts {
    /// The frame's length, size prefix included.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the frame is empty (never, for an encoded response).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buffers in frame order.
    pub fn parts(&self) -> &[Bytes] {
        &self.parts
    }

    /// Writes every part in order, several per system call.
    pub async fn write_to<W: AsyncWrite + Unpin>(&self, out: &mut W) -> std::io::Result<()> {
        let (mut index, mut offset) = (0, 0);
        while index < self.parts.len() {
            let slices: Vec<IoSlice<'_>> = self.parts[index..]
                .iter()
                .take(PARTS_PER_WRITE)
                .enumerate()
                .map(|(i, part)| IoSlice::new(if i == 0 { &part[offset..] } else { part }))
                .collect();
            let mut written = out.write_vectored(&slices).await?;
            if written == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            while index < self.parts.len() && written >= self.parts[index].len() - offset {
                written -= self.parts[index].len() - offset;
                index += 1;
                offset = 0;
            }
            offset += written;
        }
        Ok(())
    }
}

/// Collects the frame: small fields are copied into one buffer, large records shared.
struct PartsBuilder {
    parts: Vec<Bytes>,
    fields: BytesMut,
    len: usize,
}

impl PartsBuilder {
    fn put(&mut self, bytes: &[u8]) {
        self.fields.put_slice(bytes);
        self.len += bytes.len();
    }

    fn put_records(&mut self, records: &Bytes) {
        if records.len() < SHARED_RECORDS {
            return self.put(records);
        }
        if !self.fields.is_empty() {
            self.parts.push(self.fields.split().freeze());
        }
        self.parts.push(records.clone());
        self.len += records.len();
    }

    /// A list's or a records field's length: `INT32`, or in flexible versions a varint of
    /// the length plus one (zero is null).
    fn put_length(&mut self, flexible: bool, len: usize) {
        let before = self.fields.len();
        if flexible {
            super::repeated::put_uvarint(&mut self.fields, len as u32 + 1);
        } else {
            self.fields.put_i32(len as i32);
        }
        self.len += self.fields.len() - before;
    }

    fn finish(mut self) -> Parts {
        if !self.fields.is_empty() {
            self.parts.push(self.fields.freeze());
        }
        Parts {
            parts: self.parts,
            len: self.len,
        }
    }
}

fn encoded<T: Encodable>(value: &T, version: i16) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(64);
    value
        .encode(&mut out, version)
        .map_err(|e| format!("fetch response: {e}"))?;
    Ok(out)
}

/// Where the length field lies in `fewer`, given the encoding of the same struct with one
/// element more (`more`): they first differ in the field's last byte.
fn length_field_at(fewer: &[u8], more: &[u8], width: usize) -> Result<usize, String> {
    let last = fewer
        .iter()
        .zip(more)
        .position(|(a, b)| a != b)
        .ok_or("fetch response: no length field found")?;
    (last + 1)
        .checked_sub(width)
        .filter(|start| start + width <= fewer.len())
        .ok_or_else(|| "fetch response: length field out of place".to_owned())
}

/// The bytes before and after a length field in the encoding of a struct whose list or
/// records are empty.
struct Around {
    encoding: Vec<u8>,
    field: usize,
    width: usize,
}

impl Around {
    fn new(empty: Vec<u8>, one_more: &[u8], width: usize) -> Result<Self, String> {
        let field = length_field_at(&empty, one_more, width)?;
        Ok(Around {
            encoding: empty,
            field,
            width,
        })
    }

    fn before(&self) -> &[u8] {
        &self.encoding[..self.field]
    }

    fn after(&self) -> &[u8] {
        &self.encoding[self.field + self.width..]
    }
}

/// Encodes `size | response header | body` of a Fetch answer as parts; the answer's topics
/// are moved out of `response`.
pub(super) fn encode(
    correlation_id: i32,
    header_version: i16,
    version: i16,
    response: &mut FetchResponse,
) -> Result<Parts, String> {
    let flexible = version >= FIRST_FLEXIBLE;
    let width = if flexible { 1 } else { 4 };
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let body_size = response
        .compute_size(version)
        .map_err(|e| format!("fetch response: {e}"))?;
    let size = header
        .compute_size(header_version)
        .map_err(|e| format!("response header: {e}"))?
        + body_size;
    let mut builder = PartsBuilder {
        parts: Vec::new(),
        fields: BytesMut::with_capacity(512),
        len: 0,
    };
    builder.put(
        &i32::try_from(size)
            .map_err(|_| "response larger than 2 GiB".to_owned())?
            .to_be_bytes(),
    );
    builder.put(&encoded(&header, header_version)?);

    let topics = std::mem::take(&mut response.responses);
    let shell = {
        let empty = encoded(response, version)?;
        response.responses = vec![FetchableTopicResponse::default()];
        let one = encoded(response, version)?;
        response.responses.clear();
        Around::new(empty, &one, width)?
    };
    builder.put(shell.before());
    builder.put_length(flexible, topics.len());
    for mut topic in topics {
        let partitions = std::mem::take(&mut topic.partitions);
        let empty = encoded(&topic, version)?;
        topic.partitions = vec![PartitionData::default()];
        let around = Around::new(empty, &encoded(&topic, version)?, width)?;
        builder.put(around.before());
        builder.put_length(flexible, partitions.len());
        for mut partition in partitions {
            match partition.records.take() {
                Some(records) if records.len() >= SHARED_RECORDS => {
                    partition.records = Some(Bytes::new());
                    let empty = encoded(&partition, version)?;
                    partition.records = Some(Bytes::from_static(b"\0"));
                    let around = Around::new(empty, &encoded(&partition, version)?, width)?;
                    builder.put(around.before());
                    builder.put_length(flexible, records.len());
                    builder.put_records(&records);
                    builder.put(around.after());
                }
                records => {
                    partition.records = records;
                    builder.put(&encoded(&partition, version)?);
                }
            }
        }
        builder.put(around.after());
    }
    builder.put(shell.after());
    let parts = builder.finish();
    if parts.len() != 4 + size {
        return Err(format!(
            "fetch response: {} bytes in parts, {} computed",
            parts.len(),
            4 + size
        ));
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::fetch_response::{
        AbortedTransaction, EpochEndOffset, LeaderIdAndEpoch, NodeEndpoint,
    };
    use kafka_protocol::messages::{ResponseKind, TopicName};
    use kafka_protocol::protocol::StrBytes;

    use super::*;

    fn records(len: usize, seed: u8) -> Bytes {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect::<Vec<u8>>()
            .into()
    }

    /// Topics by name and by id, partitions with large, small, empty and absent records, and
    /// every optional field a version can carry.
    fn answer(version: i16) -> FetchResponse {
        let partition = |index: i32, records: Option<Bytes>| {
            let mut partition = PartitionData::default()
                .with_partition_index(index)
                .with_error_code(if index == 3 { 6 } else { 0 })
                .with_high_watermark(1_000 + i64::from(index))
                .with_last_stable_offset(900)
                .with_log_start_offset(7)
                .with_aborted_transactions(Some(vec![AbortedTransaction::default()
                    .with_producer_id(5.into())
                    .with_first_offset(11)]))
                .with_records(records);
            if version >= 11 {
                partition.preferred_read_replica = 2.into();
            }
            if version >= 12 {
                partition.diverging_epoch =
                    EpochEndOffset::default().with_epoch(4).with_end_offset(77);
                partition.current_leader = LeaderIdAndEpoch::default()
                    .with_leader_id(3.into())
                    .with_leader_epoch(9);
            }
            partition
        };
        let topic = |name: &str, id: u128, partitions: Vec<PartitionData>| {
            let mut topic = FetchableTopicResponse::default().with_partitions(partitions);
            if version >= 13 {
                topic.topic_id = uuid::Uuid::from_u128(id);
            } else {
                topic.topic = TopicName(StrBytes::from_string(name.to_owned()));
            }
            topic
        };
        let mut response = FetchResponse::default()
            .with_throttle_time_ms(12)
            .with_responses(vec![
                topic(
                    "orders",
                    1,
                    vec![
                        partition(0, Some(records(SHARED_RECORDS, 1))),
                        partition(1, Some(records(100, 2))),
                        partition(2, None),
                        partition(3, Some(Bytes::new())),
                        partition(4, Some(records(3 * SHARED_RECORDS + 5, 3))),
                    ],
                ),
                topic("empty", 2, Vec::new()),
                topic(
                    &"t".repeat(300),
                    3,
                    (0..200)
                        .map(|i| partition(i, Some(records(SHARED_RECORDS + i as usize, 4))))
                        .collect(),
                ),
            ]);
        if version >= 7 {
            response.error_code = 0;
            response.session_id = 123_456;
        }
        if version >= 16 {
            response.node_endpoints = vec![NodeEndpoint::default()
                .with_node_id(3.into())
                .with_host(StrBytes::from_static_str("broker-3"))
                .with_port(9092)];
        }
        response
    }

    fn whole(version: i16, response: FetchResponse, header_version: i16) -> Bytes {
        super::super::connection::encode_response(
            42,
            header_version,
            version,
            &ResponseKind::Fetch(response),
        )
        .unwrap()
    }

    fn joined(parts: &Parts) -> Vec<u8> {
        parts
            .parts()
            .iter()
            .flat_map(|part| part.iter().copied())
            .collect()
    }

    #[test]
    fn parts_are_the_whole_encoding_at_every_version() {
        for version in 4..=18 {
            let header_version = if version >= FIRST_FLEXIBLE { 1 } else { 0 };
            let mut response = answer(version);
            assert!(worth_parts(&response));
            let parts = encode(42, header_version, version, &mut response).unwrap();
            let expected = whole(version, answer(version), header_version);
            assert_eq!(parts.len(), expected.len(), "v{version}");
            assert_eq!(joined(&parts), &expected[..], "v{version}");
            // The large records are the shard's own buffers, not copies.
            let shared = parts
                .parts()
                .iter()
                .filter(|part| part.len() >= SHARED_RECORDS)
                .count();
            assert_eq!(shared, 202, "v{version}");
        }
    }

    #[test]
    fn an_answer_of_small_records_is_not_split() {
        let mut response = answer(12);
        for partition in response
            .responses
            .iter_mut()
            .flat_map(|topic| topic.partitions.iter_mut())
        {
            partition.records = Some(records(SHARED_RECORDS - 1, 0));
        }
        assert!(!worth_parts(&response));
    }

    /// Takes at most `max` bytes per call, across as many buffers as given.
    struct Trickle {
        out: Vec<u8>,
        max: usize,
        calls: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            self: std::pin::Pin<&mut Self>,
            cx: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            self.poll_write_vectored(cx, &[IoSlice::new(buf)])
        }

        fn poll_write_vectored(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let this = self.get_mut();
            this.calls += 1;
            let mut taken = 0;
            for buf in bufs {
                let take = buf.len().min(this.max - taken);
                this.out.extend_from_slice(&buf[..take]);
                taken += take;
                if taken == this.max {
                    break;
                }
            }
            std::task::Poll::Ready(Ok(taken))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    async fn trickled(parts: &Parts, max: usize) -> Trickle {
        let mut writer = Trickle {
            out: Vec::new(),
            max,
            calls: 0,
        };
        parts.write_to(&mut writer).await.unwrap();
        writer
    }

    #[tokio::test]
    async fn vectored_writes_cut_anywhere_resume_where_they_stopped() {
        let mut small = answer(12);
        small.responses.truncate(2);
        let parts = encode(42, 1, 12, &mut small).unwrap();
        // Cuts inside parts, at their ends and across several of them.
        for max in [1, 7, SHARED_RECORDS, SHARED_RECORDS + 3] {
            assert_eq!(trickled(&parts, max).await.out, joined(&parts), "max {max}");
        }
        // Hundreds of parts go out 64 at a time.
        let mut large = answer(12);
        let parts = encode(42, 1, 12, &mut large).unwrap();
        let writer = trickled(&parts, 1 << 20).await;
        assert_eq!(writer.out, joined(&parts));
        assert!(
            writer.calls <= parts.parts().len().div_ceil(PARTS_PER_WRITE) + 4,
            "{} calls for {} parts",
            writer.calls,
            parts.parts().len()
        );
    }

    #[tokio::test]
    async fn parts_are_written_in_order_through_short_writes() {
        let mut response = answer(17);
        let parts = encode(42, 1, 17, &mut response).unwrap();
        // A pipe of 64 KiB: the writer is cut short mid-part many times.
        let (mut writer, mut reader) = tokio::io::duplex(64 * 1024);
        let expected = joined(&parts);
        let read = tokio::spawn(async move {
            let mut got = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut reader, &mut got)
                .await
                .map(|_| got)
        });
        parts.write_to(&mut writer).await.unwrap();
        drop(writer);
        assert_eq!(read.await.unwrap().unwrap(), expected);
    }
}
