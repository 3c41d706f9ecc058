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

use anyhow::{bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{NodeEndpoint, PartitionProduceResponse};
use kafka_protocol::messages::{
    ProduceRequest, RequestKind, ResponseKind, TopicName, TransactionalId,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::AsyncWrite;
use uuid::Uuid;

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::handlers::{self, ApiResponse, Delivery, ErrorCounts};

use super::dedup_decode::{array_length, need, nullable_string};
use super::repeated::{put_array_length, put_uvarint, skip_tagged_fields};

/// Partitions handed to the handler at once; a request naming no more is decoded whole.
pub const CHUNK: usize = 1024;

/// A Produce request whose partitions stay in the frame until their chunk is appended.
pub struct ChunkedProduce {
    /// The request body from the first topic on.
    topics: Bytes,
    version: i16,
    topic_count: usize,
    /// The request's other fields, with an empty topic list.
    shell: ProduceRequest,
}

/// One listed topic's identity, as its answer repeats it.
struct TopicHead {
    name: TopicName,
    topic_id: Uuid,
    partitions: usize,
}

/// Reads a topic up to its partitions: name (to v12) or id (v13+), then the partitions' count.
fn topic_head(buf: &mut Bytes, version: i16) -> anyhow::Result<TopicHead> {
    let flexible = version >= 9;
    let mut name = TopicName::default();
    let mut topic_id = Uuid::nil();
    if version <= 12 {
        let Some(named) = nullable_str(buf, flexible)? else {
            bail!("Produce v{version} topic names must not be null");
        };
        name = TopicName(named);
    } else {
        need(buf, 16)?;
        let mut id = [0u8; 16];
        buf.copy_to_slice(&mut id);
        topic_id = Uuid::from_bytes(id);
    }
    let partitions = array_length(buf, flexible)?;
    let partitions = usize::try_from(partitions).context("a topic's partitions are null")?;
    Ok(TopicHead {
        name,
        topic_id,
        partitions,
    })
}

/// Reads `body` (a Produce request body) when it names more than [`CHUNK`] partitions; `None`
/// for other requests, decoded whole. Such a request is read to its end first, so a malformed
/// one is refused before any chunk is appended, as the crate's decoder refuses it whole.
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<ChunkedProduce>> {
    if !(3..=13).contains(&version) {
        return None;
    }
    let flexible = version >= 9;
    let mut rest = body.clone();
    let transactional_id = nullable_str(&mut rest, flexible).ok()?;
    let acks = rest.try_get_i16().ok()?;
    let timeout_ms = rest.try_get_i32().ok()?;
    let topics = rest.clone();
    let topic_count = usize::try_from(array_length(&mut rest, flexible).ok()?).ok()?;
    let mut partitions = 0usize;
    let mut walk = || -> anyhow::Result<()> {
        for _ in 0..topic_count {
            let head = topic_head(&mut rest, version)?;
            for _ in 0..head.partitions {
                PartitionProduceData::decode(&mut rest, version)?;
                partitions += 1;
            }
            skip_tagged_fields(&mut rest, flexible)?;
        }
        skip_tagged_fields(&mut rest, flexible)
    };
    let walked = walk();
    if partitions <= CHUNK {
        return None;
    }
    let shell = ProduceRequest::default()
        .with_transactional_id(transactional_id.map(TransactionalId))
        .with_acks(acks)
        .with_timeout_ms(timeout_ms);
    Some(walked.map(|()| ChunkedProduce {
        topics,
        version,
        topic_count,
        shell,
    }))
}

/// A nullable string that must be UTF-8.
fn nullable_str(buf: &mut Bytes, flexible: bool) -> anyhow::Result<Option<StrBytes>> {
    nullable_string(buf, flexible)?
        .map(|bytes| StrBytes::from_utf8(bytes).context("a string is not UTF-8"))
        .transpose()
}

impl ChunkedProduce {
    /// The request as the handler sees it, without its topics (for what looks at the request
    /// before the handler).
    pub(crate) fn shell(&self) -> RequestKind {
        RequestKind::Produce(self.shell.clone())
    }
}

/// Walks the topics and their partitions in frame order.
struct Cursor<'a> {
    request: &'a ChunkedProduce,
    rest: Bytes,
    topics_left: usize,
    /// The topic being read and how many of its partitions are left.
    current: Option<(TopicHead, usize)>,
}

/// What the cursor reads next.
enum Item {
    /// A topic starts; its partitions follow.
    Topic(TopicHead),
    Partition(PartitionProduceData),
}

impl<'a> Cursor<'a> {
    fn new(request: &'a ChunkedProduce) -> anyhow::Result<Self> {
        let mut rest = request.topics.clone();
        let count = array_length(&mut rest, request.version >= 9)?;
        if usize::try_from(count).ok() != Some(request.topic_count) {
            bail!("the topic list changed between two reads");
        }
        Ok(Cursor {
            request,
            rest,
            topics_left: request.topic_count,
            current: None,
        })
    }

    fn next_item(&mut self) -> anyhow::Result<Option<Item>> {
        let version = self.request.version;
        if let Some((_, left)) = &mut self.current {
            if *left > 0 {
                *left -= 1;
                return Ok(Some(Item::Partition(PartitionProduceData::decode(
                    &mut self.rest,
                    version,
                )?)));
            }
            skip_tagged_fields(&mut self.rest, version >= 9)?;
            self.current = None;
        }
        if self.topics_left == 0 {
            return Ok(None);
        }
        self.topics_left -= 1;
        let head = topic_head(&mut self.rest, version)?;
        let partitions = head.partitions;
        self.current = Some((
            TopicHead {
                name: head.name.clone(),
                topic_id: head.topic_id,
                partitions,
            },
            partitions,
        ));
        Ok(Some(Item::Topic(head)))
    }

    /// The next topics holding at most [`CHUNK`] partitions in all (a topic split between
    /// chunks appears in each), `None` after the last.
    fn next_chunk(&mut self) -> anyhow::Result<Option<Vec<TopicProduceData>>> {
        let mut chunk: Vec<TopicProduceData> = Vec::new();
        let mut partitions = 0;
        // A topic whose partitions continue from the previous chunk.
        if let Some((head, left)) = &self.current {
            if *left > 0 {
                chunk.push(topic_data(head));
            }
        }
        while partitions < CHUNK {
            match self.next_item()? {
                None => break,
                Some(Item::Topic(head)) => chunk.push(topic_data(&head)),
                Some(Item::Partition(partition)) => {
                    let Some(topic) = chunk.last_mut() else {
                        bail!("a partition outside a topic");
                    };
                    topic.partition_data.push(partition);
                    partitions += 1;
                }
            }
        }
        Ok((!chunk.is_empty()).then_some(chunk))
    }
}

fn topic_data(head: &TopicHead) -> TopicProduceData {
    TopicProduceData::default()
        .with_name(head.name.clone())
        .with_topic_id(head.topic_id)
}

/// The answer to a partition that says nothing but its error code.
fn plain(index: i32, error_code: i16) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(error_code)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
}

/// Every partition's answer in frame order: an error code each, and the answers saying more,
/// as runs of consecutive partitions answered alike but for their index.
struct Answers {
    codes: Vec<i16>,
    /// (first partition, last partition, answer), by partition number in frame order.
    detailed: Vec<(u32, u32, PartitionProduceResponse)>,
}

impl Answers {
    fn keep(&mut self, mut answer: PartitionProduceResponse) -> anyhow::Result<()> {
        let number = u32::try_from(self.codes.len())?;
        self.codes.push(answer.error_code);
        if answer == plain(answer.index, answer.error_code) {
            return Ok(());
        }
        answer.index = 0;
        if let Some((_, last, previous)) = self.detailed.last_mut() {
            if *last + 1 == number && *previous == answer {
                *last = number;
                return Ok(());
            }
        }
        self.detailed.push((number, number, answer));
        Ok(())
    }
}

/// The second pass over the partitions, run while the answer is written: each one's answer
/// rebuilt from what the first pass kept and encoded, a chunk at a time.
pub struct PartitionsWriter {
    request: ChunkedProduce,
    answers: Answers,
    /// The encoded size of every topic's answer.
    size: usize,
}

impl PartitionsWriter {
    fn new(request: ChunkedProduce, answers: Answers) -> anyhow::Result<Self> {
        let mut writer = PartitionsWriter {
            request,
            answers,
            size: 0,
        };
        let mut size = 0;
        let mut pieces = Pieces::new(&writer)?;
        while let Some(piece) = pieces.next_piece()? {
            size += piece.len();
        }
        writer.size = size;
        Ok(writer)
    }

    /// How many topics the answer lists.
    pub(crate) fn count(&self) -> usize {
        self.request.topic_count
    }

    /// The encoded size of every topic's answer.
    pub(crate) fn len(&self) -> usize {
        self.size
    }

    /// Writes every topic's answer, encoding it a piece at a time.
    pub(crate) async fn write_to<W: AsyncWrite + Unpin + Send>(
        &self,
        out: &mut W,
    ) -> std::io::Result<()> {
        let mut pieces = Pieces::new(self).map_err(std::io::Error::other)?;
        super::repeated::write_pieces(out, self.size, "Produce", || pieces.next_piece()).await
    }
}

impl std::fmt::Debug for PartitionsWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionsWriter")
            .field("partitions", &self.answers.codes.len())
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// Encodes the topics' answers in frame order, at most [`CHUNK`] partitions per piece.
struct Pieces<'a> {
    cursor: Cursor<'a>,
    answers: &'a Answers,
    /// The partition's number in frame order.
    number: usize,
    /// The first run of [`Answers::detailed`] not wholly before `number`.
    detailed: usize,
    /// Whether a topic was started whose tagged fields are still to be written.
    open_topic: bool,
    done: bool,
}

impl<'a> Pieces<'a> {
    fn new(writer: &'a PartitionsWriter) -> anyhow::Result<Self> {
        Ok(Pieces {
            cursor: Cursor::new(&writer.request)?,
            answers: &writer.answers,
            number: 0,
            detailed: 0,
            open_topic: false,
            done: false,
        })
    }

    fn answer(&mut self, index: i32) -> anyhow::Result<PartitionProduceResponse> {
        let number = self.number;
        let code = *self
            .answers
            .codes
            .get(number)
            .context("more partitions than answers")?;
        let runs = &self.answers.detailed;
        while runs
            .get(self.detailed)
            .is_some_and(|(_, last, _)| (*last as usize) < number)
        {
            self.detailed += 1;
        }
        Ok(match runs.get(self.detailed) {
            Some((first, _, answer)) if *first as usize <= number => {
                answer.clone().with_index(index)
            }
            _ => plain(index, code),
        })
    }

    fn next_piece(&mut self) -> anyhow::Result<Option<BytesMut>> {
        if self.done {
            return Ok(None);
        }
        let version = self.cursor.request.version;
        let flexible = version >= 9;
        let mut piece = BytesMut::new();
        let mut in_piece = 0;
        while in_piece < CHUNK {
            match self.cursor.next_item()? {
                None => {
                    if self.open_topic && flexible {
                        put_uvarint(&mut piece, 0);
                    }
                    if self.number != self.answers.codes.len() {
                        bail!(
                            "{} partitions read again, {} answered",
                            self.number,
                            self.answers.codes.len()
                        );
                    }
                    self.done = true;
                    break;
                }
                Some(Item::Topic(head)) => {
                    if self.open_topic && flexible {
                        put_uvarint(&mut piece, 0);
                    }
                    if version <= 12 {
                        let name = head.name.0.as_bytes();
                        if flexible {
                            put_uvarint(&mut piece, u32::try_from(name.len() + 1)?);
                        } else {
                            piece.put_i16(i16::try_from(name.len())?);
                        }
                        piece.put_slice(name);
                    } else {
                        piece.extend_from_slice(head.topic_id.as_bytes());
                    }
                    put_array_length(&mut piece, head.partitions, flexible)?;
                    self.open_topic = true;
                }
                Some(Item::Partition(partition)) => {
                    self.answer(partition.index)?.encode(&mut piece, version)?;
                    self.number += 1;
                    in_piece += 1;
                }
            }
        }
        Ok(Some(piece))
    }
}

/// Appends the partitions [`CHUNK`] at a time with the Produce handler, keeping each one's
/// answer as [`Answers`]: the answer's body is the first chunk's without topics, with every
/// chunk's leaders (v10+) and errors, and its topics are written by the [`PartitionsWriter`].
pub(crate) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ChunkedProduce,
) -> anyhow::Result<Option<(ApiResponse, Option<PartitionsWriter>)>> {
    let mut answer: Option<ApiResponse> = None;
    let mut errors = ErrorCounts::default();
    let mut endpoints: Vec<NodeEndpoint> = Vec::new();
    let mut answers = Answers {
        codes: Vec::new(),
        detailed: Vec::new(),
    };
    let mut close = false;
    let mut cursor = Cursor::new(&request)?;
    while let Some(topics) = cursor.next_chunk()? {
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
            for _ in 0..times {
                errors.add(code);
            }
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
        partitions = answers.codes.len(),
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
    let writer = PartitionsWriter::new(request, answers)?;
    Ok(Some((answer, Some(writer))))
}
