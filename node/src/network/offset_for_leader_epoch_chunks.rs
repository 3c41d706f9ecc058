//! OffsetForLeaderEpoch requests naming many partitions, answered a chunk of partitions at a
//! time as the answer is written.
//!
//! A v4 partition is 12 bytes on the wire but a decoded `OffsetForLeaderPartition`, an
//! `EpochEndOffset` and its encoding: a frame of distinct partitions cost 14 times its size.
//! Here the partitions stay in the frame and go to the handler [`CHUNK`] at a time; each answer
//! is kept as its error code unless it says more (`partition_chunks.rs`, as for ListOffsets).
//! The handler answers every partition listed on its own, repeats included, so the chunks'
//! answers are the whole request's.

use anyhow::{bail, Context};
use bytes::{Buf, Bytes};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::EpochEndOffset;
use kafka_protocol::messages::{
    ApiKey, BrokerId, OffsetForLeaderEpochRequest, RequestHeader, RequestKind, ResponseKind,
    TopicName,
};
use kafka_protocol::protocol::Decodable;

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::handlers::{self, ApiResponse, ErrorCounts};

use super::dedup_decode::need;
use super::partition_chunks::{
    read_list, Answers, Cursor, Listed, PartitionList, PartitionsWriter, CHUNK,
};
use super::repeated::skip_tagged_fields;

/// The first flexible version.
const FLEXIBLE_FROM: i16 = 4;

/// The versions served a chunk at a time: those with `ReplicaId` before the topics.
const VERSIONS: std::ops::RangeInclusive<i16> = 3..=4;

/// OffsetForLeaderEpoch's topic-partitions.
pub struct OffsetForLeaderEpochList;

impl PartitionList for OffsetForLeaderEpochList {
    type Partition = OffsetForLeaderPartition;
    type Answer = EpochEndOffset;
    const FLEXIBLE_FROM: i16 = FLEXIBLE_FROM;

    fn decode_partition(buf: &mut Bytes, version: i16) -> anyhow::Result<OffsetForLeaderPartition> {
        OffsetForLeaderPartition::decode(buf, version)
    }

    fn partition_index(partition: &OffsetForLeaderPartition) -> i32 {
        partition.partition
    }

    /// As the handler answers a partition it has no end offset for.
    fn plain(index: i32, error_code: i16) -> EpochEndOffset {
        EpochEndOffset::default()
            .with_partition(index)
            .with_error_code(error_code)
            .with_leader_epoch(-1)
            .with_end_offset(-1)
    }

    fn error_code(answer: &EpochEndOffset) -> i16 {
        answer.error_code
    }

    fn index_mut(answer: &mut EpochEndOffset) -> &mut i32 {
        &mut answer.partition
    }
}

/// An OffsetForLeaderEpoch request whose partitions stay in the frame until their chunk is
/// answered.
pub struct ChunkedOffsetForLeaderEpoch {
    listed: Listed,
    /// The request's other fields, with an empty topic list.
    shell: OffsetForLeaderEpochRequest,
}

/// Reads `body` (an OffsetForLeaderEpoch request body) when it names more than [`CHUNK`]
/// partitions; `None` for other requests, decoded whole. Such a request is read to
/// its end first, so a malformed one is refused before any chunk is answered.
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<ChunkedOffsetForLeaderEpoch>> {
    if !VERSIONS.contains(&version) {
        return None;
    }
    let mut rest = body.clone();
    need(&rest, 4).ok()?;
    let replica_id = rest.get_i32();
    let listed = match read_list::<OffsetForLeaderEpochList>(&mut rest, version) {
        Ok(listed) if listed.partitions > CHUNK => listed,
        Ok(_) => return None,
        // Refused here only when the list is long: a short one is left to the crate.
        Err((e, partitions)) => return (partitions > CHUNK).then_some(Err(e)),
    };
    let read_rest = || -> anyhow::Result<ChunkedOffsetForLeaderEpoch> {
        skip_tagged_fields(&mut rest, version >= FLEXIBLE_FROM)?;
        Ok(ChunkedOffsetForLeaderEpoch {
            listed,
            shell: OffsetForLeaderEpochRequest::default().with_replica_id(BrokerId(replica_id)),
        })
    };
    Some(read_rest())
}

/// Whether `frame` (header and body) is an OffsetForLeaderEpoch request this module serves (a
/// walk over its list that keeps nothing): it is not reduced by `repeated.rs` first, as the
/// handler answers repeats itself.
pub fn is_long(frame: &Bytes, version: i16) -> bool {
    let mut body = frame.clone();
    let header_version = ApiKey::OffsetForLeaderEpoch.request_header_version(version);
    RequestHeader::decode(&mut body, header_version).is_ok() && scan(&body, version).is_some()
}

impl ChunkedOffsetForLeaderEpoch {
    /// The request as the handler sees it, without its topics (for what looks at the request
    /// before the handler).
    pub(crate) fn shell(&self) -> RequestKind {
        RequestKind::OffsetForLeaderEpoch(self.shell.clone())
    }
}

/// Answers the partitions [`CHUNK`] at a time with the OffsetForLeaderEpoch handler, keeping
/// each one's answer as [`Answers`]: the answer's body is the first chunk's without topics, and
/// its topics are written by the [`PartitionsWriter`].
pub(crate) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ChunkedOffsetForLeaderEpoch,
) -> anyhow::Result<(ApiResponse, PartitionsWriter<OffsetForLeaderEpochList>)> {
    let mut answer: Option<ApiResponse> = None;
    let mut answers = Answers::<OffsetForLeaderEpochList>::default();
    let mut cursor = Cursor::<OffsetForLeaderEpochList>::new(&request.listed)?;
    while let Some(topics) = cursor.next_chunk(
        |head| OffsetForLeaderTopic::default().with_topic(TopicName(head.name.clone())),
        |topic, partition| topic.partitions.push(partition),
    )? {
        let asked: usize = topics.iter().map(|topic| topic.partitions.len()).sum();
        let part = request.shell.clone().with_topics(topics);
        let request = RequestKind::OffsetForLeaderEpoch(part);
        let Some(mut handled) = handlers::handle(ctx, info, request).await else {
            bail!("the OffsetForLeaderEpoch handler gave no answer");
        };
        let ResponseKind::OffsetForLeaderEpoch(response) = &mut handled.body else {
            bail!("the OffsetForLeaderEpoch handler answered another API");
        };
        let mut answered = 0;
        for topic in std::mem::take(&mut response.topics) {
            for partition in topic.partitions {
                answers.keep(partition)?;
                answered += 1;
            }
        }
        if answered != asked {
            bail!("the OffsetForLeaderEpoch handler answered {answered} of {asked} partitions");
        }
        match &mut answer {
            None => answer = Some(handled),
            Some(first) => {
                first.throttle_time_ms = first.throttle_time_ms.max(handled.throttle_time_ms)
            }
        }
    }
    let mut answer = answer.context("an OffsetForLeaderEpoch request without partitions")?;
    let mut errors = ErrorCounts::default();
    answers.count_errors(&mut errors);
    answer.errors = errors;
    let writer = PartitionsWriter::new(request.listed, answers)?;
    Ok((answer, writer))
}
