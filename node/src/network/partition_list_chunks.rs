//! Requests naming many partitions that their handler answers each on its own, repeats
//! included (OffsetForLeaderEpoch, DescribeProducers, DeleteRecords, OffsetCommit), answered a
//! chunk of partitions at a time as the answer is written.
//!
//! A partition is 4 to 13 bytes on the wire but a decoded partition, its answer and the
//! answer's encoding: a frame of distinct partitions cost 11 to 30 times its size. Here the
//! partitions stay in the frame and go to the handler [`CHUNK`] at a time; each answer is kept
//! as its error code unless it says more (`partition_chunks.rs`, as for ListOffsets). Since
//! each partition's answer depends on nothing but the partition (a DeleteRecords repeat deletes
//! up to its own offset, as it would in one request), the chunks' answers are the whole
//! request's. An OffsetCommit's chunks are checked against the group each (its generation,
//! member and authorization, the same for every chunk unless the group changes meanwhile) and
//! written in order, so a partition named twice keeps its last offset, as in one request; the
//! one difference is that the chunks are separate writes to the offsets log, which a group
//! change between two chunks can split (the later ones then fail, as a retry of them would).
//! OffsetDelete likewise: a group that cannot have offsets deleted refuses the first chunk,
//! which is then the answer; one that starts refusing later answers the rest with that code.
//!
//! DescribeQuorum is read the same way but decided once: the quorum has one partition, and
//! Kafka's controller answers a request naming any other list than that one partition with
//! each listed partition UNKNOWN_TOPIC_OR_PARTITION, so a long request's answer is the
//! handler's answer to its shell and, unless that refuses the request as a whole, the same
//! error for every partition, written from the frame.

use std::ops::RangeInclusive;

use anyhow::{bail, Context};
use bytes::{Buf, Bytes};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::delete_records_response::DeleteRecordsPartitionResult;
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_producers_response::PartitionResponse;
use kafka_protocol::messages::describe_quorum_request;
use kafka_protocol::messages::describe_quorum_response::PartitionData;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_commit_response::OffsetCommitResponsePartition;
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_delete_response::OffsetDeleteResponsePartition;
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::offset_for_leader_epoch_response::EpochEndOffset;
use kafka_protocol::messages::{
    ApiKey, BrokerId, DeleteRecordsRequest, DescribeProducersRequest, DescribeQuorumRequest,
    GroupId, OffsetCommitRequest, OffsetDeleteRequest, OffsetForLeaderEpochRequest, RequestHeader,
    RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::Decodable;

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::handlers::{self, ApiResponse, ErrorCounts};

use super::dedup_decode::{need, string};
use super::partition_chunks::{
    lists_more_than_chunk, nullable_str, read_list, Answers, Cursor, Item, Listed, PartitionList,
    PartitionsWriter, TopicHead, CHUNK,
};
use super::repeated::skip_tagged_fields;

/// An API whose long requests are read here: its list and the request around it.
pub trait LongPartitionList: PartitionList + Sized {
    const KEY: ApiKey;
    /// The versions read here.
    const VERSIONS: RangeInclusive<i16>;
    /// The request's other fields, with an empty topic list.
    type Shell: Clone;
    /// Reads the body's fields before the topics.
    fn read_prefix(rest: &mut Bytes, version: i16) -> anyhow::Result<Self::Shell>;
    /// Reads the body's fields after the topics (tagged fields included) into `shell`.
    fn read_suffix(rest: &mut Bytes, version: i16, shell: &mut Self::Shell) -> anyhow::Result<()>;
    /// The shell as the request that looks at it before the handler sees.
    fn shell(shell: &Self::Shell) -> RequestKind;
}

/// An API whose handler answers each partition on its own: how a chunk becomes a request and
/// its answer the partitions' answers.
pub trait ChunkedPartitions: LongPartitionList {
    /// A topic of the request.
    type Topic;
    fn topic(head: &TopicHead) -> Self::Topic;
    fn add(topic: &mut Self::Topic, partition: Self::Partition);
    /// How many partitions `topic` lists.
    fn partitions(topic: &Self::Topic) -> usize;
    fn request(shell: Self::Shell, topics: Vec<Self::Topic>) -> RequestKind;
    /// The partitions' answers of the handler's answer, in order; `None` for another API.
    fn answers(response: &mut ResponseKind) -> Option<Vec<Self::Answer>>;
    /// The code of an answer refusing the whole request, which then names no partition.
    fn refused(_response: &ResponseKind) -> Option<i16> {
        None
    }
}

/// A request whose partitions stay in the frame until their chunk is answered.
pub struct Chunked<L: LongPartitionList> {
    listed: Listed,
    shell: L::Shell,
}

/// Reads `body` (a request body of `L`) when it names more than [`CHUNK`] partitions; `None`
/// for other requests, decoded whole. Such a request is read to its end first, so a malformed
/// one is refused before any chunk is answered.
pub fn scan<L: LongPartitionList>(
    body: &Bytes,
    version: i16,
) -> Option<anyhow::Result<Chunked<L>>> {
    if !L::VERSIONS.contains(&version) {
        return None;
    }
    let mut rest = body.clone();
    let mut shell = L::read_prefix(&mut rest, version).ok()?;
    let listed = match read_list::<L>(&mut rest, version) {
        Ok(listed) if listed.partitions > CHUNK => listed,
        Ok(_) => return None,
        // Refused here only when the list is long: a short one is left to the crate.
        Err((e, partitions)) => return (partitions > CHUNK).then_some(Err(e)),
    };
    Some(L::read_suffix(&mut rest, version, &mut shell).map(|()| Chunked { listed, shell }))
}

/// Whether `frame` (header and body) is a request of `L` naming more than [`CHUNK`]
/// partitions, read only as far as that: such a request is not reduced by `repeated.rs` first,
/// as the handler answers repeats itself.
pub fn is_long<L: LongPartitionList>(frame: &Bytes, version: i16) -> bool {
    let mut rest = frame.clone();
    let header_version = L::KEY.request_header_version(version);
    L::VERSIONS.contains(&version)
        && RequestHeader::decode(&mut rest, header_version).is_ok()
        && L::read_prefix(&mut rest, version).is_ok()
        && lists_more_than_chunk::<L>(&mut rest, version)
}

impl<L: LongPartitionList> Chunked<L> {
    /// The request as the handler sees it, without its topics (for what looks at the request
    /// before the handler).
    pub(crate) fn shell(&self) -> RequestKind {
        L::shell(&self.shell)
    }
}

/// Answers the partitions [`CHUNK`] at a time with `L`'s handler, keeping each one's answer as
/// [`Answers`]: the answer's body is the first chunk's without topics, and its topics are
/// written by the [`PartitionsWriter`]. A first chunk refused whole (see
/// [`ChunkedPartitions::refused`]) is the answer as it is, without a writer; a later one
/// answers its partitions with the refusal's code.
pub(crate) async fn handle<L: ChunkedPartitions>(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: Chunked<L>,
) -> anyhow::Result<(ApiResponse, Option<PartitionsWriter<L>>)> {
    let mut answer: Option<ApiResponse> = None;
    let mut answers = Answers::<L>::for_list(&request.listed);
    let mut cursor = Cursor::<L>::new(&request.listed)?;
    let mut indexes = Vec::with_capacity(CHUNK);
    while let Some(topics) = cursor.next_chunk(L::topic, |topic, partition| {
        indexes.push(L::partition_index(&partition));
        L::add(topic, partition)
    })? {
        let asked: usize = topics.iter().map(L::partitions).sum();
        let part = L::request(request.shell.clone(), topics);
        let Some(mut handled) = handlers::handle(ctx, info, part).await else {
            bail!("the {:?} handler gave no answer", L::KEY);
        };
        if let Some(code) = L::refused(&handled.body) {
            let Some(first) = &mut answer else {
                return Ok((handled, None));
            };
            first.throttle_time_ms = first.throttle_time_ms.max(handled.throttle_time_ms);
            for index in indexes.drain(..) {
                answers.keep(L::plain(index, code))?;
            }
            continue;
        }
        indexes.clear();
        let Some(partitions) = L::answers(&mut handled.body) else {
            bail!("the {:?} handler answered another API", L::KEY);
        };
        if partitions.len() != asked {
            bail!(
                "the {:?} handler answered {} of {asked} partitions",
                L::KEY,
                partitions.len()
            );
        }
        for partition in partitions {
            answers.keep(partition)?;
        }
        match &mut answer {
            None => answer = Some(handled),
            Some(first) => {
                first.throttle_time_ms = first.throttle_time_ms.max(handled.throttle_time_ms)
            }
        }
    }
    let mut answer =
        answer.with_context(|| format!("a {:?} request without partitions", L::KEY))?;
    let mut errors = ErrorCounts::default();
    answers.count_errors(&mut errors);
    answer.errors = errors;
    let writer = PartitionsWriter::new(request.listed, answers)?;
    Ok((answer, Some(writer)))
}

/// Reads `ReplicaId`, the field before OffsetForLeaderEpoch's topics from v3.
fn replica_id(rest: &mut Bytes) -> anyhow::Result<BrokerId> {
    need(rest, 4)?;
    Ok(BrokerId(rest.get_i32()))
}

/// OffsetForLeaderEpoch v3-4's topic-partitions.
pub struct OffsetForLeaderEpochList;

impl PartitionList for OffsetForLeaderEpochList {
    type Partition = OffsetForLeaderPartition;
    type Answer = EpochEndOffset;
    const FLEXIBLE_FROM: i16 = 4;

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

impl LongPartitionList for OffsetForLeaderEpochList {
    const KEY: ApiKey = ApiKey::OffsetForLeaderEpoch;
    const VERSIONS: RangeInclusive<i16> = 3..=4;
    type Shell = OffsetForLeaderEpochRequest;

    fn read_prefix(rest: &mut Bytes, _: i16) -> anyhow::Result<OffsetForLeaderEpochRequest> {
        Ok(OffsetForLeaderEpochRequest::default().with_replica_id(replica_id(rest)?))
    }

    fn read_suffix(rest: &mut Bytes, version: i16, _: &mut Self::Shell) -> anyhow::Result<()> {
        skip_tagged_fields(rest, version >= Self::FLEXIBLE_FROM)
    }

    fn shell(shell: &OffsetForLeaderEpochRequest) -> RequestKind {
        Self::request(shell.clone(), Vec::new())
    }
}

impl ChunkedPartitions for OffsetForLeaderEpochList {
    type Topic = OffsetForLeaderTopic;

    fn topic(head: &TopicHead) -> OffsetForLeaderTopic {
        OffsetForLeaderTopic::default().with_topic(TopicName(head.name.clone()))
    }

    fn add(topic: &mut OffsetForLeaderTopic, partition: OffsetForLeaderPartition) {
        topic.partitions.push(partition);
    }

    fn partitions(topic: &OffsetForLeaderTopic) -> usize {
        topic.partitions.len()
    }

    fn request(shell: Self::Shell, topics: Vec<OffsetForLeaderTopic>) -> RequestKind {
        RequestKind::OffsetForLeaderEpoch(shell.with_topics(topics))
    }

    fn answers(response: &mut ResponseKind) -> Option<Vec<EpochEndOffset>> {
        let ResponseKind::OffsetForLeaderEpoch(response) = response else {
            return None;
        };
        let topics = std::mem::take(&mut response.topics);
        Some(topics.into_iter().flat_map(|t| t.partitions).collect())
    }
}

/// DescribeProducers v0's topic-partitions: each partition is its index alone.
pub struct DescribeProducersList;

impl PartitionList for DescribeProducersList {
    type Partition = i32;
    type Answer = PartitionResponse;
    const FLEXIBLE_FROM: i16 = 0;

    fn decode_partition(buf: &mut Bytes, _: i16) -> anyhow::Result<i32> {
        need(buf, 4)?;
        Ok(buf.get_i32())
    }

    fn partition_index(partition: &i32) -> i32 {
        *partition
    }

    /// As the handler answers a partition it has no producers for.
    fn plain(index: i32, error_code: i16) -> PartitionResponse {
        PartitionResponse::default()
            .with_partition_index(index)
            .with_error_code(error_code)
    }

    fn error_code(answer: &PartitionResponse) -> i16 {
        answer.error_code
    }

    fn index_mut(answer: &mut PartitionResponse) -> &mut i32 {
        &mut answer.partition_index
    }
}

impl LongPartitionList for DescribeProducersList {
    const KEY: ApiKey = ApiKey::DescribeProducers;
    const VERSIONS: RangeInclusive<i16> = 0..=0;
    type Shell = DescribeProducersRequest;

    fn read_prefix(_: &mut Bytes, _: i16) -> anyhow::Result<DescribeProducersRequest> {
        Ok(DescribeProducersRequest::default())
    }

    fn read_suffix(rest: &mut Bytes, _: i16, _: &mut Self::Shell) -> anyhow::Result<()> {
        skip_tagged_fields(rest, true)
    }

    fn shell(shell: &DescribeProducersRequest) -> RequestKind {
        Self::request(shell.clone(), Vec::new())
    }
}

impl ChunkedPartitions for DescribeProducersList {
    type Topic = TopicRequest;

    fn topic(head: &TopicHead) -> TopicRequest {
        TopicRequest::default().with_name(TopicName(head.name.clone()))
    }

    fn add(topic: &mut TopicRequest, partition: i32) {
        topic.partition_indexes.push(partition);
    }

    fn partitions(topic: &TopicRequest) -> usize {
        topic.partition_indexes.len()
    }

    fn request(shell: Self::Shell, topics: Vec<TopicRequest>) -> RequestKind {
        RequestKind::DescribeProducers(shell.with_topics(topics))
    }

    fn answers(response: &mut ResponseKind) -> Option<Vec<PartitionResponse>> {
        let ResponseKind::DescribeProducers(response) = response else {
            return None;
        };
        let topics = std::mem::take(&mut response.topics);
        Some(topics.into_iter().flat_map(|t| t.partitions).collect())
    }
}

/// DeleteRecords v0-2's topic-partitions.
pub struct DeleteRecordsList;

impl PartitionList for DeleteRecordsList {
    type Partition = DeleteRecordsPartition;
    type Answer = DeleteRecordsPartitionResult;
    const FLEXIBLE_FROM: i16 = 2;

    fn decode_partition(buf: &mut Bytes, version: i16) -> anyhow::Result<DeleteRecordsPartition> {
        DeleteRecordsPartition::decode(buf, version)
    }

    fn partition_index(partition: &DeleteRecordsPartition) -> i32 {
        partition.partition_index
    }

    /// As the handler answers a partition whose records it did not delete.
    fn plain(index: i32, error_code: i16) -> DeleteRecordsPartitionResult {
        DeleteRecordsPartitionResult::default()
            .with_partition_index(index)
            .with_low_watermark(-1)
            .with_error_code(error_code)
    }

    fn error_code(answer: &DeleteRecordsPartitionResult) -> i16 {
        answer.error_code
    }

    fn index_mut(answer: &mut DeleteRecordsPartitionResult) -> &mut i32 {
        &mut answer.partition_index
    }
}

impl LongPartitionList for DeleteRecordsList {
    const KEY: ApiKey = ApiKey::DeleteRecords;
    const VERSIONS: RangeInclusive<i16> = 0..=2;
    type Shell = DeleteRecordsRequest;

    fn read_prefix(_: &mut Bytes, _: i16) -> anyhow::Result<DeleteRecordsRequest> {
        Ok(DeleteRecordsRequest::default())
    }

    /// `TimeoutMs`, then the tagged fields (v2+).
    fn read_suffix(rest: &mut Bytes, version: i16, shell: &mut Self::Shell) -> anyhow::Result<()> {
        need(rest, 4)?;
        shell.timeout_ms = rest.get_i32();
        skip_tagged_fields(rest, version >= Self::FLEXIBLE_FROM)
    }

    fn shell(shell: &DeleteRecordsRequest) -> RequestKind {
        Self::request(shell.clone(), Vec::new())
    }
}

impl ChunkedPartitions for DeleteRecordsList {
    type Topic = DeleteRecordsTopic;

    fn topic(head: &TopicHead) -> DeleteRecordsTopic {
        DeleteRecordsTopic::default().with_name(TopicName(head.name.clone()))
    }

    fn add(topic: &mut DeleteRecordsTopic, partition: DeleteRecordsPartition) {
        topic.partitions.push(partition);
    }

    fn partitions(topic: &DeleteRecordsTopic) -> usize {
        topic.partitions.len()
    }

    fn request(shell: Self::Shell, topics: Vec<DeleteRecordsTopic>) -> RequestKind {
        RequestKind::DeleteRecords(shell.with_topics(topics))
    }

    fn answers(response: &mut ResponseKind) -> Option<Vec<DeleteRecordsPartitionResult>> {
        let ResponseKind::DeleteRecords(response) = response else {
            return None;
        };
        let topics = std::mem::take(&mut response.topics);
        Some(topics.into_iter().flat_map(|t| t.partitions).collect())
    }
}

/// OffsetCommit v2-9's topic-partitions (named topics in every version).
pub struct OffsetCommitList;

impl PartitionList for OffsetCommitList {
    type Partition = OffsetCommitRequestPartition;
    type Answer = OffsetCommitResponsePartition;
    const FLEXIBLE_FROM: i16 = 8;

    fn decode_partition(
        buf: &mut Bytes,
        version: i16,
    ) -> anyhow::Result<OffsetCommitRequestPartition> {
        OffsetCommitRequestPartition::decode(buf, version)
    }

    fn partition_index(partition: &OffsetCommitRequestPartition) -> i32 {
        partition.partition_index
    }

    /// Every partition's answer is its error code.
    fn plain(index: i32, error_code: i16) -> OffsetCommitResponsePartition {
        OffsetCommitResponsePartition::default()
            .with_partition_index(index)
            .with_error_code(error_code)
    }

    fn error_code(answer: &OffsetCommitResponsePartition) -> i16 {
        answer.error_code
    }

    fn index_mut(answer: &mut OffsetCommitResponsePartition) -> &mut i32 {
        &mut answer.partition_index
    }
}

impl LongPartitionList for OffsetCommitList {
    const KEY: ApiKey = ApiKey::OffsetCommit;
    const VERSIONS: RangeInclusive<i16> = 2..=9;
    type Shell = OffsetCommitRequest;

    /// `GroupId`, `GenerationIdOrMemberEpoch`, `MemberId`, `RetentionTimeMs` (v2-4) and
    /// `GroupInstanceId` (v7+).
    fn read_prefix(rest: &mut Bytes, version: i16) -> anyhow::Result<OffsetCommitRequest> {
        let flexible = version >= Self::FLEXIBLE_FROM;
        let group_id = string(rest, flexible, "the group id")?;
        need(rest, 4)?;
        let generation = rest.get_i32();
        let member_id = string(rest, flexible, "the member id")?;
        let mut shell = OffsetCommitRequest::default()
            .with_group_id(GroupId(group_id))
            .with_generation_id_or_member_epoch(generation)
            .with_member_id(member_id);
        if version <= 4 {
            need(rest, 8)?;
            shell.retention_time_ms = rest.get_i64();
        }
        if version >= 7 {
            shell.group_instance_id = nullable_str(rest, flexible)?;
        }
        Ok(shell)
    }

    fn read_suffix(rest: &mut Bytes, version: i16, _: &mut Self::Shell) -> anyhow::Result<()> {
        skip_tagged_fields(rest, version >= Self::FLEXIBLE_FROM)
    }

    fn shell(shell: &OffsetCommitRequest) -> RequestKind {
        Self::request(shell.clone(), Vec::new())
    }
}

impl ChunkedPartitions for OffsetCommitList {
    type Topic = OffsetCommitRequestTopic;

    fn topic(head: &TopicHead) -> OffsetCommitRequestTopic {
        OffsetCommitRequestTopic::default().with_name(TopicName(head.name.clone()))
    }

    fn add(topic: &mut OffsetCommitRequestTopic, partition: OffsetCommitRequestPartition) {
        topic.partitions.push(partition);
    }

    fn partitions(topic: &OffsetCommitRequestTopic) -> usize {
        topic.partitions.len()
    }

    fn request(shell: Self::Shell, topics: Vec<OffsetCommitRequestTopic>) -> RequestKind {
        RequestKind::OffsetCommit(shell.with_topics(topics))
    }

    fn answers(response: &mut ResponseKind) -> Option<Vec<OffsetCommitResponsePartition>> {
        let ResponseKind::OffsetCommit(response) = response else {
            return None;
        };
        let topics = std::mem::take(&mut response.topics);
        Some(topics.into_iter().flat_map(|t| t.partitions).collect())
    }
}

/// OffsetDelete v0's topic-partitions (not flexible): each partition is its index alone.
pub struct OffsetDeleteList;

impl PartitionList for OffsetDeleteList {
    type Partition = i32;
    type Answer = OffsetDeleteResponsePartition;
    const FLEXIBLE_FROM: i16 = i16::MAX;

    fn decode_partition(buf: &mut Bytes, version: i16) -> anyhow::Result<i32> {
        Ok(OffsetDeleteRequestPartition::decode(buf, version)?.partition_index)
    }

    fn partition_index(partition: &i32) -> i32 {
        *partition
    }

    fn plain(index: i32, error_code: i16) -> OffsetDeleteResponsePartition {
        OffsetDeleteResponsePartition::default()
            .with_partition_index(index)
            .with_error_code(error_code)
    }

    fn error_code(answer: &OffsetDeleteResponsePartition) -> i16 {
        answer.error_code
    }

    fn index_mut(answer: &mut OffsetDeleteResponsePartition) -> &mut i32 {
        &mut answer.partition_index
    }
}

impl LongPartitionList for OffsetDeleteList {
    const KEY: ApiKey = ApiKey::OffsetDelete;
    const VERSIONS: RangeInclusive<i16> = 0..=0;
    type Shell = OffsetDeleteRequest;

    fn read_prefix(rest: &mut Bytes, _: i16) -> anyhow::Result<OffsetDeleteRequest> {
        let group_id = string(rest, false, "the group id")?;
        Ok(OffsetDeleteRequest::default().with_group_id(GroupId(group_id)))
    }

    fn read_suffix(_: &mut Bytes, _: i16, _: &mut Self::Shell) -> anyhow::Result<()> {
        Ok(())
    }

    fn shell(shell: &OffsetDeleteRequest) -> RequestKind {
        Self::request(shell.clone(), Vec::new())
    }
}

impl ChunkedPartitions for OffsetDeleteList {
    type Topic = OffsetDeleteRequestTopic;

    fn topic(head: &TopicHead) -> OffsetDeleteRequestTopic {
        OffsetDeleteRequestTopic::default().with_name(TopicName(head.name.clone()))
    }

    fn add(topic: &mut OffsetDeleteRequestTopic, partition: i32) {
        topic
            .partitions
            .push(OffsetDeleteRequestPartition::default().with_partition_index(partition));
    }

    fn partitions(topic: &OffsetDeleteRequestTopic) -> usize {
        topic.partitions.len()
    }

    fn request(shell: Self::Shell, topics: Vec<OffsetDeleteRequestTopic>) -> RequestKind {
        RequestKind::OffsetDelete(shell.with_topics(topics))
    }

    fn answers(response: &mut ResponseKind) -> Option<Vec<OffsetDeleteResponsePartition>> {
        let ResponseKind::OffsetDelete(response) = response else {
            return None;
        };
        let topics = std::mem::take(&mut response.topics);
        Some(topics.into_iter().flat_map(|t| t.partitions).collect())
    }

    /// The group-level code (no coordinator, a denied or unknown group, a group not empty).
    fn refused(response: &ResponseKind) -> Option<i16> {
        match response {
            ResponseKind::OffsetDelete(response) if response.error_code != 0 => {
                Some(response.error_code)
            }
            _ => None,
        }
    }
}

/// DescribeQuorum v0-2's topic-partitions (every version is flexible).
pub struct DescribeQuorumList;

impl PartitionList for DescribeQuorumList {
    type Partition = i32;
    type Answer = PartitionData;
    const FLEXIBLE_FROM: i16 = 0;

    fn decode_partition(buf: &mut Bytes, version: i16) -> anyhow::Result<i32> {
        Ok(describe_quorum_request::PartitionData::decode(buf, version)?.partition_index)
    }

    fn partition_index(partition: &i32) -> i32 {
        *partition
    }

    /// As the handler echoes a partition it does not describe.
    fn plain(index: i32, error_code: i16) -> PartitionData {
        PartitionData::default()
            .with_partition_index(index)
            .with_error_code(error_code)
    }

    fn error_code(answer: &PartitionData) -> i16 {
        answer.error_code
    }

    fn index_mut(answer: &mut PartitionData) -> &mut i32 {
        &mut answer.partition_index
    }
}

impl LongPartitionList for DescribeQuorumList {
    const KEY: ApiKey = ApiKey::DescribeQuorum;
    const VERSIONS: RangeInclusive<i16> = 0..=2;
    type Shell = DescribeQuorumRequest;

    fn read_prefix(_: &mut Bytes, _: i16) -> anyhow::Result<DescribeQuorumRequest> {
        Ok(DescribeQuorumRequest::default())
    }

    fn read_suffix(rest: &mut Bytes, _: i16, _: &mut Self::Shell) -> anyhow::Result<()> {
        skip_tagged_fields(rest, true)
    }

    fn shell(shell: &DescribeQuorumRequest) -> RequestKind {
        RequestKind::DescribeQuorum(shell.clone())
    }
}

/// Decides a DescribeQuorum naming more than [`CHUNK`] partitions, so never the quorum's one
/// partition alone: the handler answers its shell (no topics). A refusal of the whole request
/// (a top-level error: denied, or the controller's failure) or an answer naming a partition of
/// its own (a node outside the quorum) is the answer as it is; otherwise every listed partition
/// is answered UNKNOWN_TOPIC_OR_PARTITION, written by the [`PartitionsWriter`].
pub(crate) async fn handle_describe_quorum(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: Chunked<DescribeQuorumList>,
) -> anyhow::Result<(ApiResponse, Option<PartitionsWriter<DescribeQuorumList>>)> {
    let Some(mut answer) = handlers::handle(ctx, info, request.shell()).await else {
        bail!("the DescribeQuorum handler gave no answer");
    };
    let ResponseKind::DescribeQuorum(body) = &answer.body else {
        bail!("the DescribeQuorum handler answered another API");
    };
    if body.error_code != 0 || !body.topics.is_empty() {
        return Ok((answer, None));
    }
    if !body.nodes.is_empty() {
        bail!("the DescribeQuorum handler described nodes for a request naming no partition");
    }
    let code = ResponseError::UnknownTopicOrPartition.code();
    let mut answers = Answers::<DescribeQuorumList>::for_list(&request.listed);
    let mut cursor = Cursor::<DescribeQuorumList>::new(&request.listed)?;
    while let Some(item) = cursor.next_item()? {
        if let Item::Partition(index) = item {
            answers.keep(DescribeQuorumList::plain(index, code))?;
        }
    }
    let mut errors = ErrorCounts::default();
    errors.add(body.error_code);
    answers.count_errors(&mut errors);
    answer.errors = errors;
    let writer = PartitionsWriter::new(request.listed, answers)?;
    Ok((answer, Some(writer)))
}
