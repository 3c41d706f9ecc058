//! Produce requests naming many partitions, appended a chunk of partitions at a time and
//! answered as the answer is written.
//!
//! A partition costs six bytes on the wire (index, null records, tagged fields) but a decoded
//! `PartitionProduceData`, a `PartitionProduceResponse` and its encoding of about 300 bytes,
//! and its answer alone is 33 bytes: a frame of distinct partitions of an unknown topic cost 46
//! times its size, and no deduplication helps (`collapse.rs` already merged the repeats).
//! Here the partitions stay in the frame: they are handed to the Produce handler [`CHUNK`] at a
//! time, and each one's answer is kept as its error code (two bytes) unless it says more (an
//! append's offsets, a leader, a message), which only partitions that exist can. The answer is
//! then written partition by partition from what was kept, never held whole, as
//! `metadata_chunks.rs` writes Metadata's topics. Appends and replication waits of a chunk run
//! together; chunks run one after the other, so only a request of more than [`CHUNK`]
//! partitions with acks=-1 waits for replication more than once.

use anyhow::bail;
use bytes::{Buf, Bytes};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{NodeEndpoint, PartitionProduceResponse};
use kafka_protocol::messages::{
    ProduceRequest, RequestKind, ResponseKind, TopicName, TransactionalId,
};
use kafka_protocol::protocol::Decodable;

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::handlers::{self, ApiResponse, Delivery, ErrorCounts};

use super::partition_chunks::{
    nullable_str, read_list, Answers, Cursor, Listed, PartitionList, PartitionsWriter, CHUNK,
};

/// Produce's topic-partitions.
pub struct ProduceList;

impl PartitionList for ProduceList {
    type Partition = PartitionProduceData;
    type Answer = PartitionProduceResponse;
    const FLEXIBLE_FROM: i16 = 9;

    fn decode_partition(buf: &mut Bytes, version: i16) -> anyhow::Result<PartitionProduceData> {
        PartitionProduceData::decode(buf, version)
    }

    fn partition_index(partition: &PartitionProduceData) -> i32 {
        partition.index
    }

    fn plain(index: i32, error_code: i16) -> PartitionProduceResponse {
        PartitionProduceResponse::default()
            .with_index(index)
            .with_error_code(error_code)
            .with_base_offset(-1)
            .with_log_append_time_ms(-1)
            .with_log_start_offset(-1)
    }

    fn error_code(answer: &PartitionProduceResponse) -> i16 {
        answer.error_code
    }

    fn index_mut(answer: &mut PartitionProduceResponse) -> &mut i32 {
        &mut answer.index
    }
}

/// A Produce request whose partitions stay in the frame until their chunk is appended.
pub struct ChunkedProduce {
    listed: Listed,
    /// The request's other fields, with an empty topic list.
    shell: ProduceRequest,
}

/// Reads `body` (a Produce request body) when it names more than [`CHUNK`] partitions; `None`
/// for other requests, decoded whole. Such a request is read to its end first, so a malformed
/// one is refused before any chunk is appended.
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<ChunkedProduce>> {
    if !(3..=13).contains(&version) {
        return None;
    }
    let mut rest = body.clone();
    let transactional_id = nullable_str(&mut rest, version >= 9).ok()?;
    let acks = rest.try_get_i16().ok()?;
    let timeout_ms = rest.try_get_i32().ok()?;
    let listed = match read_list::<ProduceList>(&mut rest, version) {
        Ok(listed) if listed.partitions > CHUNK => listed,
        Ok(_) => return None,
        // Refused here only when the list is long: a short one is left to the crate.
        Err((e, partitions)) => return (partitions > CHUNK).then_some(Err(e)),
    };
    let shell = ProduceRequest::default()
        .with_transactional_id(transactional_id.map(TransactionalId))
        .with_acks(acks)
        .with_timeout_ms(timeout_ms);
    Some(Ok(ChunkedProduce { listed, shell }))
}

impl ChunkedProduce {
    /// The request as the handler sees it, without its topics (for what looks at the request
    /// before the handler).
    pub(crate) fn shell(&self) -> RequestKind {
        RequestKind::Produce(self.shell.clone())
    }
}

/// Appends the partitions [`CHUNK`] at a time with the Produce handler, keeping each one's
/// answer as [`Answers`]: the answer's body is the first chunk's without topics, with every
/// chunk's leaders (v10+) and errors, and its topics are written by the [`PartitionsWriter`].
pub(crate) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ChunkedProduce,
) -> anyhow::Result<Option<(ApiResponse, Option<PartitionsWriter<ProduceList>>)>> {
    let mut answer: Option<ApiResponse> = None;
    let mut errors = ErrorCounts::default();
    let mut endpoints: Vec<NodeEndpoint> = Vec::new();
    let mut answers = Answers::<ProduceList>::for_list(&request.listed);
    let mut close = false;
    let mut cursor = Cursor::<ProduceList>::new(&request.listed)?;
    while let Some(topics) = cursor.next_chunk(
        |head| {
            TopicProduceData::default()
                .with_name(TopicName(head.name.clone()))
                .with_topic_id(head.topic_id)
        },
        |topic, partition| topic.partition_data.push(partition),
    )? {
        let listed: Vec<usize> = topics.iter().map(|t| t.partition_data.len()).collect();
        let part = request.shell.clone().with_topic_data(topics);
        let Some(mut handled) = handlers::handle(ctx, info, RequestKind::Produce(part)).await
        else {
            return Ok(None);
        };
        let ResponseKind::Produce(response) = &mut handled.body else {
            bail!("the Produce handler answered another API");
        };
        let responses = std::mem::take(&mut response.responses);
        if responses.len() != listed.len() {
            bail!(
                "the Produce handler answered {} topics of {}",
                responses.len(),
                listed.len()
            );
        }
        for (topic, expected) in responses.into_iter().zip(listed) {
            if topic.partition_responses.len() != expected {
                bail!("the Produce handler answered a topic's partitions out of order");
            }
            for partition in topic.partition_responses {
                answers.keep(partition)?;
            }
        }
        endpoints.append(&mut response.node_endpoints);
        for (code, times) in handled.errors.iter() {
            errors.add_times(code, times);
        }
        close |= handled.delivery == Delivery::Close;
        match &mut answer {
            None => answer = Some(handled),
            Some(first) => {
                first.throttle_time_ms = first.throttle_time_ms.max(handled.throttle_time_ms)
            }
        }
    }
    let Some(mut answer) = answer else {
        return Ok(None);
    };
    tracing::debug!(
        partitions = answers.len(),
        "a Produce request appended in chunks of {CHUNK} partitions"
    );
    endpoints.sort_by_key(|endpoint| endpoint.node_id.0);
    endpoints.dedup_by_key(|endpoint| endpoint.node_id.0);
    if let ResponseKind::Produce(response) = &mut answer.body {
        response.node_endpoints = endpoints;
    }
    answer.errors = errors;
    if close {
        answer.delivery = Delivery::Close;
    }
    // acks=0: nothing is written.
    if answer.delivery != Delivery::Send {
        return Ok(Some((answer, None)));
    }
    let writer = PartitionsWriter::new(request.listed, answers)?;
    Ok(Some((answer, Some(writer))))
}
