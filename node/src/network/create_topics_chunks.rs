//! CreateTopics requests naming many topics, decided without decoding their list and answered
//! as the answer is written.
//!
//! A topic costs 14 bytes on the wire (a four-letter name, one partition, one replica) but a
//! decoded `CreatableTopic`, a `CreatableTopicResult` with its message, a set entry and the
//! encoded answer of about 80 bytes: a frame of distinct names cost 56 times its size. Here the
//! topics stay in the frame. A scan finds each name's first appearance and whether it repeats
//! (the elements' offsets sorted by name, then two bits per element); the controller reads the
//! topics from the frame one at a time (`ListedTopics`) and keeps each distinct topic's answer
//! as an index into its distinct outcomes (`ListedCreation`: a failure's message is kept
//! without the name, so topics failing alike share one). The creation stays one decision: the
//! records of every created topic are one batch, refused whole past the record limit. The
//! answer is then written topic by topic from the frame and the outcomes, never held whole, as
//! `produce_chunks.rs` writes Produce's.

use std::sync::Arc;

use anyhow::{bail, Context};
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::protocol::{Decodable, Encodable};
use tokio::io::AsyncWrite;

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::controller::logic::{ListedCreation, ListedTopics};
use gregor_actors::handlers::{self, ApiResponse};

use super::dedup_decode::{array_length, need};
use super::metadata_chunks::{bit, set_bit};
use super::repeated::{skip_tagged_fields, uvarint_at};

/// Topics answered per piece of the answer; a request naming no more is decoded whole.
pub const CHUNK: usize = 1024;

/// Offsets in a frame fit 31 bits, leaving the top bit to mark a repeated name.
const REPEATED: u32 = 1 << 31;

/// A CreateTopics request whose topics stay in the frame.
pub struct ChunkedCreateTopics {
    /// The request body from the first topic on.
    topics: Bytes,
    version: i16,
    count: usize,
    /// One bit per listed topic: set on its name's first appearance.
    first: Vec<u64>,
    /// One bit per first appearance: set when the name appears again.
    repeated: Vec<u64>,
    /// One bit per listed topic: set on its name's second appearance.
    second: Vec<u64>,
    validate_only: bool,
}

/// Reads `body` (a CreateTopics request body) when it names more than [`CHUNK`] topics; `None`
/// for other requests, decoded whole. The request is read to its end first, so a malformed
/// one is refused whole, as the crate's decoder refuses it.
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<ChunkedCreateTopics>> {
    if !(2..=7).contains(&version) {
        return None;
    }
    let mut rest = body.clone();
    let count = array_length(&mut rest, version >= 5).ok()?;
    if count <= CHUNK as i64 {
        return None;
    }
    Some(scan_topics(rest, count as usize, version))
}

/// The name of the topic at `offset` (read whole before), as its bytes.
fn name_at(topics: &Bytes, offset: u32, flexible: bool) -> &[u8] {
    let element = topics.get(offset as usize..).unwrap_or_default();
    let mut at = 0;
    let length = if flexible {
        uvarint_at(element, &mut at).saturating_sub(1) as usize
    } else {
        at = 2;
        element
            .get(..2)
            .map_or(0, |b| i16::from_be_bytes([b[0], b[1]]).max(0) as usize)
    };
    element.get(at..at + length).unwrap_or_default()
}

fn scan_topics(topics: Bytes, count: usize, version: i16) -> anyhow::Result<ChunkedCreateTopics> {
    let flexible = version >= 5;
    let mut rest = topics.clone();
    // Each topic's offset, four bytes per topic where a set of the names cost ten times that.
    // Sized once (a topic is at least ten bytes): a growing vector is copied, leaving holes.
    let mut offsets: Vec<u32> = Vec::with_capacity(count.min(topics.len() / 10));
    for _ in 0..count {
        let start = u32::try_from(topics.len() - rest.len())
            .ok()
            .filter(|start| *start < REPEATED)
            .context("a CreateTopics frame over 2 GiB")?;
        CreatableTopic::decode(&mut rest, version)?;
        offsets.push(start);
    }
    need(&rest, 5)?;
    rest.advance(4);
    let validate_only = rest.get_u8() != 0;
    skip_tagged_fields(&mut rest, flexible)?;
    // Sorted by name, then by offset: each name's first appearance leads its run. It is kept,
    // marked when the run is longer, and the others dropped, in place.
    let name = |offset: &u32| name_at(&topics, *offset, flexible);
    offsets.sort_unstable_by(|a, b| name(a).cmp(name(b)).then(a.cmp(b)));
    let mut kept = 0;
    let mut at = 0;
    // The second copies, which the decoded path keeps too (`dedup_decode.rs`).
    let mut seconds: Vec<u32> = Vec::new();
    while at < offsets.len() {
        let first = offsets[at];
        let mut end = at + 1;
        while end < offsets.len() && name(&offsets[end]) == name(&first) {
            end += 1;
        }
        offsets[kept] = if end - at > 1 {
            seconds.push(offsets[at + 1]);
            first | REPEATED
        } else {
            first
        };
        kept += 1;
        at = end;
    }
    offsets.truncate(kept);
    offsets.sort_unstable_by_key(|offset| offset & !REPEATED);
    seconds.sort_unstable();
    let mut first = vec![0u64; count.div_ceil(64)];
    let mut repeated = vec![0u64; count.div_ceil(64)];
    let mut second = vec![0u64; count.div_ceil(64)];
    let mut next = offsets.iter().peekable();
    let mut next_second = seconds.iter().peekable();
    let mut walk = topics.clone();
    for index in 0..count {
        let at = topics.len() - walk.len();
        if let Some(offset) = next.next_if(|offset| (**offset & !REPEATED) as usize == at) {
            set_bit(&mut first, index);
            if offset & REPEATED != 0 {
                set_bit(&mut repeated, index);
            }
        }
        if next_second
            .next_if(|offset| **offset as usize == at)
            .is_some()
        {
            set_bit(&mut second, index);
        }
        skip_topic(&mut walk, flexible)?;
    }
    Ok(ChunkedCreateTopics {
        topics,
        version,
        count,
        first,
        repeated,
        second,
        validate_only,
    })
}

/// Skips one topic read whole before: name, partitions and replication factor, assignments,
/// configs, tagged fields.
fn skip_topic(buf: &mut Bytes, flexible: bool) -> anyhow::Result<()> {
    use super::repeated::{skip, skip_string};
    skip_string(buf, flexible)?;
    skip(buf, 6)?;
    for _ in 0..array_length(buf, flexible)?.max(0) {
        skip(buf, 4)?;
        for _ in 0..array_length(buf, flexible)?.max(0) {
            skip(buf, 4)?;
        }
        skip_tagged_fields(buf, flexible)?;
    }
    for _ in 0..array_length(buf, flexible)?.max(0) {
        skip_string(buf, flexible)?;
        skip_string(buf, flexible)?;
        skip_tagged_fields(buf, flexible)?;
    }
    skip_tagged_fields(buf, flexible)
}

impl ListedTopics for ChunkedCreateTopics {
    fn listed(&self) -> usize {
        self.first
            .iter()
            .chain(&self.second)
            .map(|word| word.count_ones() as usize)
            .sum()
    }

    fn distinct(&self) -> usize {
        self.first
            .iter()
            .map(|word| word.count_ones() as usize)
            .sum()
    }

    fn each_first(
        &self,
        visit: &mut dyn FnMut(&CreatableTopic, bool) -> bool,
    ) -> Result<(), String> {
        let mut rest = self.topics.clone();
        let flexible = self.version >= 5;
        for index in 0..self.count {
            if !bit(&self.first, index) {
                skip_topic(&mut rest, flexible).map_err(|e| e.to_string())?;
                continue;
            }
            let topic =
                CreatableTopic::decode(&mut rest, self.version).map_err(|e| e.to_string())?;
            if !visit(&topic, bit(&self.repeated, index)) {
                break;
            }
        }
        Ok(())
    }
}

/// Writes the answer's topics from the frame and the kept outcomes, [`CHUNK`] at a time.
pub struct TopicResultsWriter {
    request: Arc<ChunkedCreateTopics>,
    creation: ListedCreation,
    /// How many topics the answer lists.
    count: usize,
    /// The encoded size of every topic's answer.
    size: usize,
}

impl TopicResultsWriter {
    fn new(request: Arc<ChunkedCreateTopics>, creation: ListedCreation) -> anyhow::Result<Self> {
        let count = match creation.refused {
            Some(_) => request.listed(),
            None => creation.answered(),
        };
        let mut writer = TopicResultsWriter {
            request,
            creation,
            count,
            size: 0,
        };
        let mut size = 0;
        let mut pieces = Pieces::new(&writer);
        while let Some(piece) = pieces.next_piece()? {
            size += piece.len();
        }
        writer.size = size;
        Ok(writer)
    }

    /// How many topics the answer lists.
    pub(crate) fn count(&self) -> usize {
        self.count
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
        let mut pieces = Pieces::new(self);
        super::repeated::write_pieces(out, self.size, "CreateTopics", || pieces.next_piece()).await
    }
}

impl std::fmt::Debug for TopicResultsWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicResultsWriter")
            .field("count", &self.count)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// Encodes the topics' answers in frame order.
struct Pieces<'a> {
    writer: &'a TopicResultsWriter,
    rest: Bytes,
    /// The next listed topic.
    index: usize,
    /// How many distinct topics were answered.
    answered: usize,
}

impl<'a> Pieces<'a> {
    fn new(writer: &'a TopicResultsWriter) -> Self {
        Pieces {
            writer,
            rest: writer.request.topics.clone(),
            index: 0,
            answered: 0,
        }
    }

    fn next_piece(&mut self) -> anyhow::Result<Option<BytesMut>> {
        let request = &self.writer.request;
        let creation = &self.writer.creation;
        if self.index >= request.count {
            if self.answered != self.writer.count {
                bail!("{} topics answered of {}", self.answered, self.writer.count);
            }
            return Ok(None);
        }
        let mut piece = BytesMut::new();
        let mut in_piece = 0;
        while in_piece < CHUNK && self.index < request.count {
            let index = self.index;
            self.index += 1;
            // A refusal answers the first two copies of each name, as the decoded request
            // holds them.
            let answered = bit(&request.first, index)
                || (creation.refused.is_some() && bit(&request.second, index));
            if !answered {
                skip_topic(&mut self.rest, request.version >= 5)?;
                continue;
            }
            let name = CreatableTopic::decode(&mut self.rest, request.version)?.name;
            let result = match &creation.refused {
                Some((code, message)) => CreatableTopicResult::default()
                    .with_name(name)
                    .with_error_code(*code)
                    .with_error_message(Some(message.clone().into())),
                None => {
                    let outcome = creation
                        .outcome(self.answered)
                        .context("more topics than answers")?;
                    ListedCreation::result(outcome, &name)
                }
            };
            result.encode(&mut piece, request.version)?;
            self.answered += 1;
            in_piece += 1;
        }
        Ok(Some(piece))
    }
}

/// Creates the topics with the controller reading them from the frame: the answer's body lists
/// no topics, and the [`TopicResultsWriter`] writes them.
pub(crate) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ChunkedCreateTopics,
) -> anyhow::Result<(ApiResponse, TopicResultsWriter)> {
    let request = Arc::new(request);
    let validate_only = request.validate_only;
    let (answer, creation) =
        handlers::create_listed_topics(ctx, info, request.clone(), validate_only).await;
    tracing::debug!(
        topics = request.count,
        outcomes = creation.outcomes.len(),
        "a CreateTopics request decided from its frame"
    );
    let writer = TopicResultsWriter::new(request, creation)?;
    Ok((answer, writer))
}
