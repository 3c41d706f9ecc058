//! Requests listing many elements whose answer to each element is its own, in order
//! (FindCoordinator v4-6, DescribeGroups, ConsumerGroupDescribe, DescribeConfigs, DeleteGroups,
//! OffsetFetch v8-9, LeaveGroup v3-5), served a chunk of elements at a time.
//!
//! A four-letter group id is five bytes on the wire, but a decoded id, a described group and
//! its encoded answer of about 20 bytes: a frame of distinct ids cost 60 times its size (a
//! frame of distinct DescribeConfigs resources 36 times, of DeleteGroups ids 25 times), and
//! `repeated.rs` reduces only repeats. Here each chunk of [`CHUNK`] elements is sent through
//! the usual path as a request of its own (the same header and fields around a shorter list),
//! and its answers are kept zstd-compressed (an unknown group's answer repeats all but its id)
//! until the last chunk is done, when the answer's size is known: it is written from them, one
//! chunk decompressed at a time. The list's layout is `repeated.rs`'s shape of the API.
//!
//! ListPartitionReassignments is a filter: its answer lists, in request order, the named topics
//! with a reassignment in progress among their named partitions, so a chunk's answer may list
//! fewer topics than its request, and the answer is the chunks' lists one after the other.
//! DescribeUserScramCredentials answers each distinct user once (DUPLICATE_RESOURCE for one
//! named twice or more, Kafka's `ScramImage.describe`): the list is read once first, its
//! distinct names found by a table of offsets into the frame, and each chunk names only the
//! users that first appear in it, twice those named again anywhere in the request, so the
//! handler answers each as the whole request would.
//!
//! This holds only because each element's answer depends on nothing but the element and what
//! the elements before it did: FindCoordinator locates each key on its own, DescribeGroups,
//! ConsumerGroupDescribe, DescribeConfigs and OffsetFetch describe each element on its own, and
//! DeleteGroups deletes its groups one after the other (a repeated id finds its group gone), as
//! the chunks are served. LeaveGroup removes its members one after the other too, and its
//! answer's group-level code is the first chunk's: the group is looked up and authorized the
//! same way for every chunk.

use std::hash::BuildHasher;
use std::pin::Pin;
use std::task::{Context as TaskContext, Poll};

use anyhow::{bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::Decodable;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use zstd::stream::raw::{self, InBuffer, Operation, OutBuffer};

use super::dedup_decode::{array_length, need};
use super::metadata_chunks::{bit, set_bit};
use super::repeated::{leading_list, put_array_length, skip, skip_string, LeadingList, Skip};

/// Elements per chunk; a request listing no more is served whole. Smaller than the other
/// chunked paths' 1,024: a chunk's decoded request and answer (a described group is a few
/// hundred bytes) are freed to the allocator, which keeps freed pages a while before returning
/// them, so smaller chunks keep the peak down (ConsumerGroupDescribe of distinct ids 3.6-4.7x
/// the frame at 1,024, 2.4-3.1x at 256) for a tenth more time.
pub const CHUNK: usize = 256;

/// An element's key, from its bytes, when a list answers each distinct key once.
type KeyOf = fn(&[u8]) -> anyhow::Result<&[u8]>;

/// A list whose chunks may answer fewer elements than they list: its layout, and the key of
/// its elements when each distinct key is answered once.
struct FilteredList {
    shape: LeadingList,
    distinct_by: Option<KeyOf>,
}

/// `ThrottleTimeMs`, `ErrorCode` and `ErrorMessage`, the fields both filters' answers have
/// before their lists.
fn skip_throttle_error_message(buf: &mut Bytes, _: i16) -> anyhow::Result<()> {
    skip(buf, 6)?;
    skip_string(buf, true)
}

/// ListPartitionReassignments v0's topics (after `TimeoutMs`), each answered topic one
/// `OngoingTopicReassignment`; DescribeUserScramCredentials v0's users, keyed by name, each
/// distinct one answered once.
fn filtered_list(key: ApiKey, version: i16) -> Option<FilteredList> {
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use kafka_protocol::messages::describe_user_scram_credentials_response::DescribeUserScramCredentialsResult;
    use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
    use kafka_protocol::messages::list_partition_reassignments_response::OngoingTopicReassignment;
    match (key, version) {
        (ApiKey::ListPartitionReassignments, 0) => Some(FilteredList {
            shape: LeadingList {
                flexible: true,
                skip_prefix: |buf, _| skip(buf, 4),
                skip_element: |buf, version| {
                    ListPartitionReassignmentsTopics::decode(buf, version).map(drop)
                },
                skip_answers_prefix: skip_throttle_error_message,
                skip_answer: |buf, version| {
                    OngoingTopicReassignment::decode(buf, version).map(drop)
                },
            },
            distinct_by: None,
        }),
        (ApiKey::DescribeUserScramCredentials, 0) => Some(FilteredList {
            shape: LeadingList {
                flexible: true,
                skip_prefix: |_, _| Ok(()),
                skip_element: |buf, version| UserName::decode(buf, version).map(drop),
                skip_answers_prefix: skip_throttle_error_message,
                skip_answer: |buf, version| {
                    DescribeUserScramCredentialsResult::decode(buf, version).map(drop)
                },
            },
            distinct_by: Some(compact_string_first),
        }),
        _ => None,
    }
}

/// The compact string an element starts with (a user's name).
fn compact_string_first(element: &[u8]) -> anyhow::Result<&[u8]> {
    let mut at = 0;
    let length = super::repeated::uvarint_at(element, &mut at);
    let length = usize::try_from(length.checked_sub(1).context("a null name")?)?;
    element.get(at..at + length).context("a name cut short")
}

/// Which elements of a list answering each distinct key once are sent, as bits by an
/// element's offset in the list: its key's first appearance, and a key named again later.
struct DistinctKeys {
    first: Vec<u64>,
    repeated: Vec<u64>,
}

impl DistinctKeys {
    /// Reads the `count` elements of `elements`, keeping a table of the offsets of each
    /// distinct key's first element (four bytes and a control byte per slot) while it runs.
    fn find(
        elements: &Bytes,
        count: usize,
        version: i16,
        skip_element: Skip,
        key_of: KeyOf,
    ) -> anyhow::Result<DistinctKeys> {
        let words = elements.len() / 64 + 1;
        let mut keys = DistinctKeys {
            first: vec![0; words],
            repeated: vec![0; words],
        };
        let hasher = foldhash::fast::RandomState::default();
        // Sized once: growing would hold the old table and the new one at once.
        let mut table: hashbrown::HashTable<u32> = hashbrown::HashTable::with_capacity(count);
        let key_at = |at: u32| key_of(&elements[at as usize..]);
        let mut rest = elements.clone();
        for _ in 0..count {
            let at = elements.len() - rest.len();
            skip_element(&mut rest, version)?;
            let key = key_of(&elements[at..])?;
            let offset = u32::try_from(at)?;
            let entry = table.entry(
                hasher.hash_one(key),
                |&first| key_at(first).is_ok_and(|known| known == key),
                |&first| hasher.hash_one(key_at(first).unwrap_or_default()),
            );
            match entry {
                hashbrown::hash_table::Entry::Occupied(first) => {
                    set_bit(&mut keys.repeated, *first.get() as usize)
                }
                hashbrown::hash_table::Entry::Vacant(slot) => {
                    slot.insert(offset);
                    set_bit(&mut keys.first, at);
                }
            }
        }
        Ok(keys)
    }
}

/// Whether `key` at `version` lists elements whose answers are each their own (see the
/// module's comment), answered in order.
fn chunked_api(key: ApiKey, version: i16) -> bool {
    matches!(
        (key, version),
        (ApiKey::FindCoordinator, 4..=6)
            | (ApiKey::DescribeGroups, 1..=6)
            | (ApiKey::ConsumerGroupDescribe, 0..=1)
            | (ApiKey::DescribeConfigs, 1..=4)
            | (ApiKey::DeleteGroups, 0..=2)
            | (ApiKey::OffsetFetch, 8..=9)
            | (ApiKey::LeaveGroup, 3..=5)
            | (ApiKey::ListPartitionReassignments, 0)
            | (ApiKey::DescribeUserScramCredentials, 0)
    )
}

/// A request whose list stays in its frame.
pub struct ChunkedList {
    key: ApiKey,
    version: i16,
    shape: LeadingList,
    /// Whether a chunk's answer lists only some of its elements (a filter's).
    filter: bool,
    /// For a list answering each distinct key once, the elements sent.
    distinct: Option<DistinctKeys>,
    /// The request header.
    header: Bytes,
    /// The body's fields before the list.
    prefix: Bytes,
    /// The elements, each as it came.
    elements: Bytes,
    count: usize,
    /// The body's fields after the list.
    rest: Bytes,
}

/// Reads `frame` (header and body, no size prefix) when it is a request of a chunked API
/// listing more than [`CHUNK`] elements; `None` otherwise. The list is read to its end first,
/// so a malformed request is refused whole.
pub fn scan(frame: &Bytes, key: ApiKey, version: i16) -> Option<anyhow::Result<ChunkedList>> {
    if !chunked_api(key, version) {
        return None;
    }
    let (shape, filter, distinct_by) = match leading_list(key, version) {
        Some(shape) => (shape, false, None),
        None => {
            let filtered = filtered_list(key, version)?;
            (filtered.shape, true, filtered.distinct_by)
        }
    };
    let mut body = frame.clone();
    RequestHeader::decode(&mut body, key.request_header_version(version)).ok()?;
    let header = frame.slice(..frame.len() - body.len());
    let before_prefix = body.clone();
    (shape.skip_prefix)(&mut body, version).ok()?;
    let prefix = before_prefix.slice(..before_prefix.len() - body.len());
    let count = array_length(&mut body, shape.flexible).ok()?;
    if count <= CHUNK as i64 {
        return None;
    }
    let mut rest = body.clone();
    let count = count as usize;
    let scanned = (0..count).try_for_each(|_| (shape.skip_element)(&mut rest, version));
    let elements = body.slice(..body.len() - rest.len());
    let distinct = scanned.and_then(|()| {
        distinct_by
            .map(|key_of| DistinctKeys::find(&elements, count, version, shape.skip_element, key_of))
            .transpose()
    });
    Some(distinct.map(|distinct| ChunkedList {
        key,
        version,
        elements,
        shape,
        filter,
        distinct,
        header,
        prefix,
        count,
        rest,
    }))
}

impl ChunkedList {
    /// The requests of [`CHUNK`] elements each (header and body, no size prefix), in order,
    /// with how many elements each lists.
    pub(crate) fn requests(&self) -> impl Iterator<Item = anyhow::Result<(Bytes, usize)>> + '_ {
        let mut elements = self.elements.clone();
        let mut left = self.count;
        std::iter::from_fn(move || loop {
            if left == 0 {
                return None;
            }
            let in_chunk = left.min(CHUNK);
            left -= in_chunk;
            match self.chunk(&mut elements, in_chunk) {
                // Every element of the chunk repeats an earlier key: nothing to send (an empty
                // list would mean "all" to some APIs).
                Ok((_, 0)) => continue,
                answered => return Some(answered),
            }
        })
    }

    /// The request for the next `in_chunk` elements of `elements`, which it advances past
    /// them, with how many elements it lists.
    fn chunk(&self, elements: &mut Bytes, in_chunk: usize) -> anyhow::Result<(Bytes, usize)> {
        let start = self.elements.len() - elements.len();
        let mut chunk = elements.clone();
        // The elements sent: runs of (offset in `elements`, length, times sent).
        let mut sent: Vec<(usize, usize, usize)> = Vec::new();
        let mut listed = 0;
        for _ in 0..in_chunk {
            let at = elements.len() - chunk.len();
            (self.shape.skip_element)(&mut chunk, self.version)?;
            let length = elements.len() - chunk.len() - at;
            let times = match &self.distinct {
                None => 1,
                Some(keys) if !bit(&keys.first, start + at) => 0,
                Some(keys) => 1 + usize::from(bit(&keys.repeated, start + at)),
            };
            listed += times;
            match sent.last_mut() {
                Some((run_at, run_length, 1)) if times == 1 && *run_at + *run_length == at => {
                    *run_length += length
                }
                _ if times > 0 => sent.push((at, length, times)),
                _ => {}
            }
        }
        let taken = elements.len() - chunk.len();
        let mut frame = BytesMut::with_capacity(
            self.header.len() + self.prefix.len() + 5 + 2 * taken + self.rest.len(),
        );
        frame.put_slice(&self.header);
        frame.put_slice(&self.prefix);
        put_array_length(&mut frame, listed, self.shape.flexible)?;
        for &(at, length, times) in &sent {
            for _ in 0..times {
                frame.put_slice(&elements[at..at + length]);
            }
        }
        frame.put_slice(&self.rest);
        elements.advance(taken);
        Ok((frame.freeze(), listed))
    }

    /// The list with every element sent as it came: a request refused whole answers each
    /// listed element, repeats included.
    pub(crate) fn without_distinct_keys(mut self) -> Self {
        self.distinct = None;
        self
    }

    /// Whether repeated keys are sent once (see [`DistinctKeys`]).
    pub(crate) fn sends_distinct_keys(&self) -> bool {
        self.distinct.is_some()
    }

    /// Gathers the answers to the chunks' requests into one answer.
    pub(crate) fn answer(&self) -> std::io::Result<AnswerBuilder> {
        Ok(AnswerBuilder {
            key: self.key,
            version: self.version,
            flexible: self.shape.flexible,
            skip_answers_prefix: self.shape.skip_answers_prefix,
            skip_answer: self.shape.skip_answer,
            filter: self.filter,
            count: if self.filter { 0 } else { self.count },
            head: None,
            tail: Bytes::new(),
            chunks: Vec::new(),
            size: 0,
            encoder: raw::Encoder::new(1)?,
        })
    }
}

/// The answers of the chunks so far: the first one's header and fields before the list
/// (ThrottleTimeMs first), each chunk's entries compressed, the body's fields after the list.
pub struct AnswerBuilder {
    key: ApiKey,
    version: i16,
    flexible: bool,
    skip_answers_prefix: Skip,
    skip_answer: Skip,
    /// Whether chunks answer only some of their elements; then `count` sums their answers.
    filter: bool,
    count: usize,
    /// The answer's header and the fields before its list (no size prefix), with where its
    /// `ThrottleTimeMs` is.
    head: Option<(Bytes, usize)>,
    tail: Bytes,
    /// Each chunk's entries: their size, and one zstd frame of them.
    chunks: Vec<(usize, Vec<u8>)>,
    size: usize,
    /// zstd's fastest level, one context for every chunk.
    encoder: raw::Encoder<'static>,
}

/// Where a chunk's answer is read as it is written.
enum Stage {
    /// The size prefix, header, throttle time and the list's length.
    Head,
    /// The entries; so many are left.
    Entries(usize),
    /// The body's fields after the list.
    Tail,
}

impl AnswerBuilder {
    /// What the answer to a chunk listing `listed` elements is written into: it may be far
    /// larger than the chunk's request (a repeated element's answer written again for each
    /// copy, `repeated.rs`), so its entries are compressed as they come, never held whole.
    pub(crate) fn chunk(&mut self, listed: usize) -> ChunkSink<'_> {
        ChunkSink {
            builder: self,
            listed,
            pending: BytesMut::new(),
            stage: Stage::Head,
            retry_at: 0,
            entries: 0,
            compressed: Vec::new(),
            failure: None,
        }
    }

    /// Whether the first chunk's answer refused the request whole: a nonzero error code after
    /// the throttle time (the filters' answers have one there).
    pub(crate) fn refused(&self) -> bool {
        self.filter
            && self.head.as_ref().is_some_and(|(head, throttle_at)| {
                head.get(throttle_at + 4..throttle_at + 6)
                    .is_some_and(|code| code != [0, 0])
            })
    }

    /// The whole answer, its throttle time `throttle_time_ms`.
    pub(crate) fn finish(self, throttle_time_ms: i32) -> anyhow::Result<ChunkedAnswer> {
        let (first, throttle_at) = self.head.context("no chunk answered")?;
        let mut head = BytesMut::with_capacity(first.len() + 5);
        head.put_slice(&first[..throttle_at]);
        head.put_i32(throttle_time_ms);
        head.put_slice(&first[throttle_at + 4..]);
        put_array_length(&mut head, self.count, self.flexible)?;
        let size = i32::try_from(head.len() + self.size + self.tail.len())
            .context("an answer over 2 GiB")?;
        Ok(ChunkedAnswer {
            size,
            head: head.freeze(),
            chunks: self.chunks,
            tail: self.tail,
        })
    }
}

/// One chunk's answer being written (size prefix included): entries compressed as soon as
/// each is whole, a partial one kept until the rest comes.
pub(crate) struct ChunkSink<'a> {
    builder: &'a mut AnswerBuilder,
    listed: usize,
    /// Bytes not yet read.
    pending: BytesMut,
    stage: Stage,
    /// What `pending` must hold before it is read again after a read found it short (twice
    /// what it held then, so a long entry is read a few times, not once per write).
    retry_at: usize,
    /// The size of the entries compressed so far.
    entries: usize,
    compressed: Vec<u8>,
    failure: Option<anyhow::Error>,
}

impl ChunkSink<'_> {
    /// Reads what `pending` holds as far as it goes.
    fn advance(&mut self) -> anyhow::Result<()> {
        if self.pending.len() < self.retry_at {
            return Ok(());
        }
        let all = self.pending.split().freeze();
        let mut rest = all.clone();
        let complete = self.read(&mut rest)?;
        self.pending.extend_from_slice(&rest);
        self.retry_at = if complete { 0 } else { 2 * rest.len() };
        Ok(())
    }

    /// Reads `rest` through the stages; `false` when it ends within a part.
    fn read(&mut self, rest: &mut Bytes) -> anyhow::Result<bool> {
        let builder = &mut *self.builder;
        if let Stage::Head = self.stage {
            let mut body = rest.clone();
            let Ok(head) = read_head(builder, &mut body) else {
                return Ok(false);
            };
            let answered = head.1;
            // A filter's chunk answers some of its elements, any other chunk each of them.
            let listed = self.listed as i64;
            let fits = if builder.filter {
                (0..=listed).contains(&answered)
            } else {
                answered == listed
            };
            anyhow::ensure!(
                fits,
                "{answered} answers to {listed} {:?} elements",
                builder.key
            );
            let entries = answered as usize;
            if builder.filter {
                builder.count += entries;
            }
            builder.head.get_or_insert(head.0);
            *rest = body;
            self.stage = Stage::Entries(entries);
            builder.encoder.reinit()?;
        }
        if let Stage::Entries(left) = &mut self.stage {
            let start = rest.clone();
            let mut whole = 0;
            while *left > 0 {
                let mut entry = rest.clone();
                if (builder.skip_answer)(&mut entry, builder.version).is_err() {
                    break;
                }
                whole = start.len() - entry.len();
                *rest = entry;
                *left -= 1;
            }
            *rest = start.slice(whole..);
            compress(&mut builder.encoder, &start[..whole], &mut self.compressed)?;
            self.entries += whole;
            anyhow::ensure!(
                builder.size + self.entries <= i32::MAX as usize,
                "an answer over 2 GiB"
            );
            if *left > 0 {
                return Ok(false);
            }
            self.stage = Stage::Tail;
        }
        Ok(true)
    }

    /// Ends the chunk once its answer is written whole.
    pub(crate) fn finish(mut self) -> anyhow::Result<()> {
        if let Some(failure) = self.failure.take() {
            return Err(failure);
        }
        self.retry_at = 0;
        self.advance()?;
        let Stage::Tail = self.stage else {
            bail!(
                "a chunk's {:?} answer ends within its entries",
                self.builder.key
            );
        };
        loop {
            self.compressed.reserve(64);
            let filled = self.compressed.len();
            let mut output = OutBuffer::around_pos(&mut self.compressed, filled);
            if self.builder.encoder.finish(&mut output, true)? == 0 {
                break;
            }
        }
        self.compressed.shrink_to_fit();
        let builder = &mut *self.builder;
        builder.size += self.entries;
        builder
            .chunks
            .push((self.entries, std::mem::take(&mut self.compressed)));
        builder.tail = self.pending.split().freeze();
        Ok(())
    }
}

/// Reads an answer's size prefix, header and fields before the list, and its list's length:
/// the header and those fields with where the throttle time is, and the length.
fn read_head(builder: &AnswerBuilder, body: &mut Bytes) -> anyhow::Result<((Bytes, usize), i64)> {
    need(body, 4)?;
    body.advance(4);
    let all = body.clone();
    ResponseHeader::decode(body, builder.key.response_header_version(builder.version))?;
    let throttle_at = all.len() - body.len();
    need(body, 4)?;
    (builder.skip_answers_prefix)(body, builder.version)?;
    let head = all.slice(..all.len() - body.len());
    Ok(((head, throttle_at), array_length(body, builder.flexible)?))
}

/// Compresses `input` onto the end of `out`.
fn compress(
    encoder: &mut raw::Encoder<'_>,
    input: &[u8],
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    let mut input = InBuffer::around(input);
    while input.pos() < input.src.len() {
        out.reserve((input.src.len() - input.pos()).min(64 << 10) / 2 + 64);
        let filled = out.len();
        let mut output = OutBuffer::around_pos(out, filled);
        encoder.run(&mut input, &mut output)?;
    }
    Ok(())
}

impl AsyncWrite for ChunkSink<'_> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _: &mut TaskContext<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let sink = &mut *self;
        if sink.failure.is_none() {
            sink.pending.extend_from_slice(buf);
            if let Err(e) = sink.advance() {
                sink.failure = Some(e);
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut TaskContext<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// An answer whose entries are kept compressed until they are written.
pub struct ChunkedAnswer {
    size: i32,
    head: Bytes,
    chunks: Vec<(usize, Vec<u8>)>,
    tail: Bytes,
}

impl std::fmt::Debug for ChunkedAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkedAnswer")
            .field("size", &self.size)
            .field("chunks", &self.chunks.len())
            .finish_non_exhaustive()
    }
}

/// Decompressed bytes written to the socket at once.
const WRITE_PIECE: usize = 64 << 10;

impl ChunkedAnswer {
    /// The answer's size on the wire, size prefix included.
    pub fn len(&self) -> usize {
        4 + self.size as usize
    }

    /// Whether the answer is empty (never: it has a size prefix and a header).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the answer, size prefix included, decompressing a piece at a time.
    pub async fn write_to<W: AsyncWrite + Unpin + Send>(&self, out: &mut W) -> std::io::Result<()> {
        super::forwarded::write_head(out, self.size, &self.head).await?;
        let mut decoder = raw::Decoder::new()?;
        let mut piece = vec![0u8; WRITE_PIECE];
        for (size, compressed) in &self.chunks {
            decoder.reinit()?;
            let mut input = InBuffer::around(compressed);
            let mut written = 0;
            while written < *size {
                let mut output = OutBuffer::around(piece.as_mut_slice());
                decoder.run(&mut input, &mut output)?;
                let produced = output.pos();
                if produced == 0 {
                    return Err(std::io::Error::other("a compressed chunk ended short"));
                }
                written += produced;
                out.write_all(&piece[..produced]).await?;
            }
        }
        out.write_all(&self.tail).await
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
    use kafka_protocol::messages::list_partition_reassignments_response::{
        OngoingPartitionReassignment, OngoingTopicReassignment,
    };
    use kafka_protocol::messages::{
        BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
    };
    use kafka_protocol::protocol::{Encodable, StrBytes};

    /// What a controller would answer for `topics`: every topic whose number ends in 7, with
    /// its first named partition in progress.
    fn reassigning(topics: &[ListPartitionReassignmentsTopics]) -> Vec<OngoingTopicReassignment> {
        topics
            .iter()
            .filter(|t| t.name.as_str().ends_with('7'))
            .map(|t| {
                OngoingTopicReassignment::default()
                    .with_name(t.name.clone())
                    .with_partitions(vec![OngoingPartitionReassignment::default()
                        .with_partition_index(t.partition_indexes[0])
                        .with_replicas(vec![BrokerId(1), BrokerId(2)])
                        .with_adding_replicas(vec![BrokerId(2)])])
            })
            .collect()
    }

    fn answer_bytes(topics: Vec<OngoingTopicReassignment>, throttle_time_ms: i32) -> Vec<u8> {
        let mut body = BytesMut::new();
        ResponseHeader::default()
            .with_correlation_id(9)
            .encode(&mut body, 1)
            .unwrap();
        ListPartitionReassignmentsResponse::default()
            .with_throttle_time_ms(throttle_time_ms)
            .with_topics(topics)
            .encode(&mut body, 0)
            .unwrap();
        let mut framed = (body.len() as i32).to_be_bytes().to_vec();
        framed.extend_from_slice(&body);
        framed
    }

    /// A ListPartitionReassignments of 700 topics is cut into chunks of [`CHUNK`] topics, and the
    /// chunks' answers, each listing some of their topics (one none), make the answer to the
    /// whole list, the largest throttle time first.
    #[tokio::test]
    async fn a_filters_chunks_answers_join_into_the_whole_answer() {
        let topics: Vec<ListPartitionReassignmentsTopics> = (0..700)
            .map(|index| {
                // The second chunk's names never end in 7: it answers no topic.
                let number = if (CHUNK..2 * CHUNK).contains(&index) {
                    index * 10
                } else {
                    index
                };
                ListPartitionReassignmentsTopics::default()
                    .with_name(TopicName(StrBytes::from_string(format!("t{number}"))))
                    .with_partition_indexes(vec![index as i32 % 3, 5])
            })
            .collect();
        let mut frame = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(ApiKey::ListPartitionReassignments as i16)
            .with_correlation_id(9)
            .encode(&mut frame, 2)
            .unwrap();
        ListPartitionReassignmentsRequest::default()
            .with_timeout_ms(1_000)
            .with_topics(Some(topics.clone()))
            .encode(&mut frame, 0)
            .unwrap();
        let frame = frame.freeze();
        let list = scan(&frame, ApiKey::ListPartitionReassignments, 0)
            .expect("a long list is chunked")
            .unwrap();
        let mut answer = list.answer().unwrap();
        let mut listed_in_all = 0;
        for (index, request) in list.requests().enumerate() {
            let (mut chunk, listed) = request.unwrap();
            RequestHeader::decode(&mut chunk, 2).unwrap();
            let decoded = ListPartitionReassignmentsRequest::decode(&mut chunk, 0).unwrap();
            assert_eq!(decoded.timeout_ms, 1_000);
            let named = decoded.topics.unwrap();
            assert_eq!(named.len(), listed);
            assert_eq!(named[..], topics[listed_in_all..listed_in_all + listed]);
            listed_in_all += listed;
            let mut sink = answer.chunk(listed);
            let bytes = answer_bytes(reassigning(&named), index as i32 * 10);
            sink.write_all(&bytes).await.unwrap();
            sink.finish().unwrap();
        }
        assert_eq!(listed_in_all, topics.len());
        let mut written = Vec::new();
        answer
            .finish(20)
            .unwrap()
            .write_to(&mut written)
            .await
            .unwrap();
        assert_eq!(written, answer_bytes(reassigning(&topics), 20));
    }
}
