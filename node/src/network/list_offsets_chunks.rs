//! ListOffsets requests naming many partitions, looked up a chunk of partitions at a time and
//! answered as the answer is written.
//!
//! A v7 partition is 17 bytes on the wire but a decoded `ListOffsetsPartition`, an entry of
//! the handler's set of seen partitions, a `ListOffsetsPartitionResponse` and its encoding: a
//! frame of distinct partitions cost 16 times its size. Here the partitions stay in the frame
//! and go to the ListOffsets handler [`CHUNK`] at a time; each answer is kept as its error
//! code unless it says more (`partition_chunks.rs`, as for Produce and Fetch).
//!
//! The handler answers every appearance of a partition named more than once INVALID_REQUEST
//! (or TOPIC_AUTHORIZATION_FAILED on a topic it may not describe). A chunk sees only its own
//! partitions, so the scan marks every appearance of a repeated partition (the partitions'
//! (name, index) sorted, four bytes a partition and the name's offset), and such a partition
//! goes to the handler right after a copy of itself, whose answer is dropped: the handler then
//! answers it as it answers a repeat, however far away the other appearances are.

use anyhow::{bail, Context};
use bytes::{Buf, Bytes};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
use kafka_protocol::messages::{
    ApiKey, BrokerId, ListOffsetsRequest, RequestHeader, RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::Decodable;

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::handlers::{self, ApiResponse, ErrorCounts};

use super::dedup_decode::{array_length, need};
use super::metadata_chunks::{bit, set_bit};
use super::partition_chunks::{
    lists_more_than_chunk, read_list, Answers, Cursor, Listed, PartitionList, PartitionsWriter,
    CHUNK,
};
use super::repeated::{skip_string, skip_tagged_fields};
use super::topic_list_chunks::name_at;

/// The first flexible version.
const FLEXIBLE_FROM: i16 = 6;

/// ListOffsets' topic-partitions.
pub struct ListOffsetsList;

impl PartitionList for ListOffsetsList {
    type Partition = ListOffsetsPartition;
    type Answer = ListOffsetsPartitionResponse;
    const FLEXIBLE_FROM: i16 = FLEXIBLE_FROM;

    fn decode_partition(buf: &mut Bytes, version: i16) -> anyhow::Result<ListOffsetsPartition> {
        ListOffsetsPartition::decode(buf, version)
    }

    fn partition_index(partition: &ListOffsetsPartition) -> i32 {
        partition.partition_index
    }

    /// As the handler answers a partition it has no offset for.
    fn plain(index: i32, error_code: i16) -> ListOffsetsPartitionResponse {
        ListOffsetsPartitionResponse::default()
            .with_partition_index(index)
            .with_error_code(error_code)
            .with_timestamp(-1)
            .with_offset(-1)
            .with_leader_epoch(-1)
    }

    fn error_code(answer: &ListOffsetsPartitionResponse) -> i16 {
        answer.error_code
    }

    fn index_mut(answer: &mut ListOffsetsPartitionResponse) -> &mut i32 {
        &mut answer.partition_index
    }
}

/// A ListOffsets request whose partitions stay in the frame until their chunk is looked up.
pub struct ChunkedListOffsets {
    listed: Listed,
    /// One bit per partition in frame order: set when the same topic and partition is named
    /// elsewhere too.
    repeated: Vec<u64>,
    /// The request's other fields, with an empty topic list.
    shell: ListOffsetsRequest,
}

/// The body's fields before the topics: `ReplicaId`, and `IsolationLevel` from v2.
fn read_prefix(rest: &mut Bytes, version: i16) -> anyhow::Result<(i32, i8)> {
    need(rest, 4 + usize::from(version >= 2))?;
    let replica_id = rest.get_i32();
    let isolation_level = if version >= 2 { rest.get_i8() } else { 0 };
    Ok((replica_id, isolation_level))
}

/// Whether `frame` (a ListOffsets request, header and body) names more than [`CHUNK`]
/// partitions, read only as far as that: such a request handles its own repeats (see the
/// module's comment), so it is not reduced by `repeated.rs` first.
pub fn is_long(frame: &Bytes, version: i16) -> bool {
    let mut rest = frame.clone();
    let header_version = ApiKey::ListOffsets.request_header_version(version);
    RequestHeader::decode(&mut rest, header_version).is_ok()
        && read_prefix(&mut rest, version).is_ok()
        && lists_more_than_chunk::<ListOffsetsList>(&mut rest, version)
}

/// Reads `body` (a ListOffsets request body) when it names more than [`CHUNK`] partitions;
/// `None` for other requests, decoded whole. Such a request is read to its end first, so a
/// malformed one is refused before any chunk is looked up.
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<ChunkedListOffsets>> {
    if !(1..=10).contains(&version) {
        return None;
    }
    let mut rest = body.clone();
    let (replica_id, isolation_level) = read_prefix(&mut rest, version).ok()?;
    let listed = match read_list::<ListOffsetsList>(&mut rest, version) {
        Ok(listed) if listed.partitions > CHUNK => listed,
        Ok(_) => return None,
        // Refused here only when the list is long: a short one is left to the crate.
        Err((e, partitions)) => return (partitions > CHUNK).then_some(Err(e)),
    };
    let read_rest = || -> anyhow::Result<ChunkedListOffsets> {
        let timeout_ms = if version >= 10 {
            need(&rest, 4)?;
            rest.get_i32()
        } else {
            0
        };
        skip_tagged_fields(&mut rest, version >= FLEXIBLE_FROM)?;
        let repeated = repeated_partitions(&listed)?;
        let shell = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(replica_id))
            .with_isolation_level(isolation_level)
            .with_timeout_ms(timeout_ms);
        Ok(ChunkedListOffsets {
            listed,
            repeated,
            shell,
        })
    };
    Some(read_rest())
}

/// One bit per partition in frame order, set on every appearance of a topic and partition
/// named more than once.
fn repeated_partitions(listed: &Listed) -> anyhow::Result<Vec<u64>> {
    let flexible = listed.version >= FLEXIBLE_FROM;
    let topics = &listed.topics;
    // (offset of the topic's name in `topics`, partition index, partition number).
    let mut keys: Vec<(u32, i32, u32)> = Vec::with_capacity(listed.partitions);
    let mut rest = topics.clone();
    let count = array_length(&mut rest, flexible)?;
    let mut number = 0u32;
    for _ in 0..count {
        let name = u32::try_from(topics.len() - rest.len()).context("a frame over 4 GiB")?;
        skip_string(&mut rest, flexible)?;
        let partitions = array_length(&mut rest, flexible)?.max(0);
        for _ in 0..partitions {
            let partition = ListOffsetsPartition::decode(&mut rest, listed.version)?;
            keys.push((name, partition.partition_index, number));
            number += 1;
        }
        skip_tagged_fields(&mut rest, flexible)?;
    }
    let name = |offset: u32| name_at(topics, offset as usize, flexible);
    keys.sort_unstable_by(|a, b| {
        name(a.0)
            .cmp(name(b.0))
            .then(a.1.cmp(&b.1))
            .then(a.2.cmp(&b.2))
    });
    let mut repeated = vec![0u64; listed.partitions.div_ceil(64)];
    for pair in keys.windows(2) {
        if pair[0].1 == pair[1].1 && name(pair[0].0) == name(pair[1].0) {
            set_bit(&mut repeated, pair[0].2 as usize);
            set_bit(&mut repeated, pair[1].2 as usize);
        }
    }
    Ok(repeated)
}

impl ChunkedListOffsets {
    /// The request as the handler sees it, without its topics (for what looks at the request
    /// before the handler).
    pub(crate) fn shell(&self) -> RequestKind {
        RequestKind::ListOffsets(self.shell.clone())
    }
}

/// Looks the partitions up [`CHUNK`] at a time with the ListOffsets handler, keeping each
/// one's answer as [`Answers`]: the answer's body is the first chunk's without topics, and its
/// topics are written by the [`PartitionsWriter`].
pub(crate) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ChunkedListOffsets,
) -> anyhow::Result<(ApiResponse, PartitionsWriter<ListOffsetsList>)> {
    let mut answer: Option<ApiResponse> = None;
    let mut errors = ErrorCounts::default();
    let mut answers = Answers::<ListOffsetsList>::for_list(&request.listed);
    let mut cursor = Cursor::<ListOffsetsList>::new(&request.listed)?;
    let mut number = 0;
    while let Some(mut topics) = cursor.next_chunk(
        |head| ListOffsetsTopic::default().with_name(TopicName(head.name.clone())),
        |topic, partition| topic.partitions.push(partition),
    )? {
        // Each repeat follows a copy of itself (answered, then dropped: `copies`).
        let mut copies = Vec::new();
        for topic in &mut topics {
            let listed = std::mem::take(&mut topic.partitions);
            topic.partitions.reserve(listed.len());
            for partition in listed {
                if bit(&request.repeated, number) {
                    copies.push(true);
                    topic.partitions.push(partition.clone());
                }
                copies.push(false);
                topic.partitions.push(partition);
                number += 1;
            }
        }
        let part = request.shell.clone().with_topics(topics);
        let Some(mut handled) = handlers::handle(ctx, info, RequestKind::ListOffsets(part)).await
        else {
            bail!("the ListOffsets handler gave no answer");
        };
        let ResponseKind::ListOffsets(response) = &mut handled.body else {
            bail!("the ListOffsets handler answered another API");
        };
        let mut copies = copies.into_iter();
        for topic in std::mem::take(&mut response.topics) {
            for partition in topic.partitions {
                match copies.next() {
                    Some(true) => {}
                    Some(false) => answers.keep(partition)?,
                    None => bail!("the ListOffsets handler answered more partitions than asked"),
                }
            }
        }
        if copies.next().is_some() {
            bail!("the ListOffsets handler answered fewer partitions than asked");
        }
        match &mut answer {
            None => answer = Some(handled),
            Some(first) => {
                first.throttle_time_ms = first.throttle_time_ms.max(handled.throttle_time_ms)
            }
        }
    }
    let mut answer = answer.context("a ListOffsets request without partitions")?;
    tracing::debug!(
        partitions = answers.len(),
        "a ListOffsets request looked up in chunks of {CHUNK} partitions"
    );
    // Counted from the answers kept: the handler also counted the copies'.
    answers.count_errors(&mut errors);
    answer.errors = errors;
    let writer = PartitionsWriter::new(request.listed, answers)?;
    Ok((answer, writer))
}
