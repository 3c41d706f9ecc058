//! CreateTopics and CreatePartitions requests naming many topics, decided without decoding their
//! list and answered as the answer is written.
//!
//! A topic costs 14 bytes on the wire (a four-letter name, one partition, one replica) but a
//! decoded `CreatableTopic`, a `CreatableTopicResult` with its message, a set entry and the
//! encoded answer of about 80 bytes: a frame of distinct names cost 56 times its size (a
//! CreatePartitions topic of 11 bytes, 42 times). Here the topics stay in the frame. A scan
//! finds each name's first appearance and whether it repeats (the elements' offsets sorted by
//! name, then two bits per element); the controller reads the topics from the frame one at a
//! time (`ListedElements`) and keeps each distinct topic's answer as an index into its distinct
//! outcomes (`ListedAnswers`: a failure's message is kept without the name, so topics failing
//! alike share one). The decision stays one: the records of every created topic or partition
//! are one batch, refused whole past the record limit. The answer is then written topic by
//! topic from the frame and the outcomes, never held whole, as `produce_chunks.rs` writes
//! Produce's. What differs between the two APIs is a [`TopicListApi`].
//!
//! With an authorizer, each name named once is then checked (CREATE, or ALTER for
//! CreatePartitions), read from the frame (one more bit per topic, set on a denied name's first
//! appearance): the controller never reads a denied topic, and the answer puts
//! TOPIC_AUTHORIZATION_FAILED in its place, as the decoded request's handler merges its
//! refusals back in request order.

use std::marker::PhantomData;
use std::ops::RangeInclusive;
use std::sync::Arc;

use anyhow::{bail, Context};
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::controller::logic::{
    ListedAnswers, ListedCreation, ListedElements, ListedError,
};
use gregor_actors::handlers::{self, ApiResponse};

use super::dedup_decode::{array_length, need};
use super::metadata_chunks::{bit, set_bit};
use super::repeated::{
    put_array_length, skip, skip_string, skip_tagged_fields, uvarint_at, PieceSource, PiecesWriter,
};

/// What differs between the APIs whose requests list topics by name, each decided by the
/// controller as one batch and answered once per distinct name in request order; both end
/// their request with `TimeoutMs`, `ValidateOnly` and tagged fields.
pub trait TopicListApi: Clone + Send + Sync + 'static {
    /// A topic of the request.
    type Topic: Decodable + Send + Sync + 'static;
    /// A topic's answer.
    type Result: Encodable;
    /// What the controller keeps of a distinct topic's answer.
    type Outcome: Send + Sync + 'static;
    const NAME: &'static str;
    /// The versions whose topics may be left in the frame.
    const VERSIONS: RangeInclusive<i16>;
    const FLEXIBLE_FROM: i16;

    fn name(topic: Self::Topic) -> TopicName;

    /// Skips one topic read whole before.
    fn skip_topic(buf: &mut Bytes, flexible: bool) -> anyhow::Result<()>;

    /// A topic's answer with this error code and message.
    fn answer(name: TopicName, code: i16, message: Option<StrBytes>) -> Self::Result;

    /// The answer to a topic the principal may not change.
    fn denied(name: TopicName) -> Self::Result;

    /// The answer to a topic of a request refused whole.
    fn refused(name: TopicName, code: i16, message: &str) -> Self::Result {
        Self::answer(name, code, Some(StrBytes::from_string(message.to_owned())))
    }

    /// The answer to the topic `name` the controller decided `outcome`.
    fn decided(outcome: &Self::Outcome, name: &TopicName) -> Self::Result;
}

/// CreateTopics v2-7 (the versions that answer with a throttle time first).
#[derive(Clone, Debug)]
pub struct CreateTopicsApi;

impl TopicListApi for CreateTopicsApi {
    type Topic = CreatableTopic;
    type Result = CreatableTopicResult;
    type Outcome = gregor_actors::controller::logic::ListedOutcome;
    const NAME: &'static str = "CreateTopics";
    const VERSIONS: RangeInclusive<i16> = 2..=7;
    const FLEXIBLE_FROM: i16 = 5;

    fn name(topic: CreatableTopic) -> TopicName {
        topic.name
    }

    /// Name, partitions and replication factor, assignments, configs, tagged fields.
    fn skip_topic(buf: &mut Bytes, flexible: bool) -> anyhow::Result<()> {
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

    fn answer(name: TopicName, code: i16, message: Option<StrBytes>) -> CreatableTopicResult {
        CreatableTopicResult::default()
            .with_name(name)
            .with_error_code(code)
            .with_error_message(message)
    }

    fn denied(name: TopicName) -> CreatableTopicResult {
        handlers::creation_denied(name)
    }

    fn decided(outcome: &Self::Outcome, name: &TopicName) -> CreatableTopicResult {
        ListedCreation::result(outcome, name)
    }
}

/// CreatePartitions v0-3.
#[derive(Clone, Debug)]
pub struct CreatePartitionsApi;

impl TopicListApi for CreatePartitionsApi {
    type Topic = CreatePartitionsTopic;
    type Result = CreatePartitionsTopicResult;
    type Outcome = ListedError;
    const NAME: &'static str = "CreatePartitions";
    const VERSIONS: RangeInclusive<i16> = 0..=3;
    const FLEXIBLE_FROM: i16 = 2;

    fn name(topic: CreatePartitionsTopic) -> TopicName {
        topic.name
    }

    /// Name, count, assignments (nullable), tagged fields.
    fn skip_topic(buf: &mut Bytes, flexible: bool) -> anyhow::Result<()> {
        skip_string(buf, flexible)?;
        skip(buf, 4)?;
        for _ in 0..array_length(buf, flexible)?.max(0) {
            for _ in 0..array_length(buf, flexible)?.max(0) {
                skip(buf, 4)?;
            }
            skip_tagged_fields(buf, flexible)?;
        }
        skip_tagged_fields(buf, flexible)
    }

    fn answer(
        name: TopicName,
        code: i16,
        message: Option<StrBytes>,
    ) -> CreatePartitionsTopicResult {
        CreatePartitionsTopicResult::default()
            .with_name(name)
            .with_error_code(code)
            .with_error_message(message)
    }

    fn denied(name: TopicName) -> CreatePartitionsTopicResult {
        handlers::growth_denied(name)
    }

    fn decided(outcome: &ListedError, name: &TopicName) -> CreatePartitionsTopicResult {
        Self::answer(
            name.clone(),
            outcome.code,
            outcome.message_for(name.as_str()),
        )
    }
}

/// Topics answered per piece of the answer; a request naming no more is decoded whole.
pub const CHUNK: usize = 1024;

/// Offsets in a frame fit 31 bits, leaving the top bit to mark a repeated name.
pub(super) const REPEATED: u32 = 1 << 31;

/// A request of `A` whose topics stay in the frame.
#[derive(Clone)]
pub struct ChunkedTopics<A: TopicListApi> {
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
    /// One bit per listed topic: set on the first appearance of a name denied; empty when none
    /// is.
    denied: Vec<u64>,
    /// How many names are denied.
    denied_count: usize,
    validate_only: bool,
    /// The bytes of the list's length before `topics`, as the client wrote it.
    length_len: usize,
    api: PhantomData<A>,
}

/// A CreateTopics request whose topics stay in the frame.
pub type ChunkedCreateTopics = ChunkedTopics<CreateTopicsApi>;

/// A CreatePartitions request whose topics stay in the frame.
pub type ChunkedCreatePartitions = ChunkedTopics<CreatePartitionsApi>;

/// Reads `body` (a request body of `api`) when it names more than [`CHUNK`] topics; `None`
/// for other requests, decoded whole. The request is read to its end first, so a malformed
/// one is refused whole, as the crate's decoder refuses it.
pub fn scan<A: TopicListApi>(
    body: &Bytes,
    version: i16,
) -> Option<anyhow::Result<ChunkedTopics<A>>> {
    if !A::VERSIONS.contains(&version) {
        return None;
    }
    let mut rest = body.clone();
    let count = array_length(&mut rest, version >= A::FLEXIBLE_FROM).ok()?;
    if count <= CHUNK as i64 {
        return None;
    }
    let length_len = body.len() - rest.len();
    Some(scan_topics(rest, length_len, count as usize, version))
}

/// The name of the topic at `offset` (read whole before), as its bytes.
pub(super) fn name_at(topics: &Bytes, offset: usize, flexible: bool) -> &[u8] {
    let element = topics.get(offset..).unwrap_or_default();
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

/// Reduces `offsets` (elements' offsets, named by `name`) to each name's first appearance,
/// the top bit ([`REPEATED`]) set when the name appears again, and returns the second
/// appearances; both sorted by offset.
pub(super) fn first_appearances<'a>(
    offsets: &mut Vec<u32>,
    name: impl Fn(u32) -> &'a [u8],
) -> Vec<u32> {
    first_appearances_by(offsets, |a, b| name(a).cmp(name(b)))
}

/// [`first_appearances`] of elements that `compare` orders (equal: the same element). Sorted
/// by element, then by offset, each element's first appearance leads its run: it is kept in
/// place and the others dropped.
pub(super) fn first_appearances_by(
    offsets: &mut Vec<u32>,
    mut compare: impl FnMut(u32, u32) -> std::cmp::Ordering,
) -> Vec<u32> {
    offsets.sort_unstable_by(|a, b| compare(*a, *b).then(a.cmp(b)));
    let mut seconds = Vec::new();
    let mut kept = 0;
    let mut at = 0;
    while at < offsets.len() {
        let first = offsets[at];
        let mut end = at + 1;
        while end < offsets.len() && compare(offsets[end], first).is_eq() {
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
    seconds
}

fn scan_topics<A: TopicListApi>(
    topics: Bytes,
    length_len: usize,
    count: usize,
    version: i16,
) -> anyhow::Result<ChunkedTopics<A>> {
    let flexible = version >= A::FLEXIBLE_FROM;
    let mut rest = topics.clone();
    // Each topic's offset, four bytes per topic where a set of the names cost ten times that.
    // Sized once (a topic is at least seven bytes): a growing vector is copied, leaving holes.
    let mut offsets: Vec<u32> = Vec::with_capacity(count.min(topics.len() / 7));
    for _ in 0..count {
        let start = u32::try_from(topics.len() - rest.len())
            .ok()
            .filter(|start| *start < REPEATED)
            .with_context(|| format!("a {} frame over 2 GiB", A::NAME))?;
        A::Topic::decode(&mut rest, version)?;
        offsets.push(start);
    }
    need(&rest, 5)?;
    rest.advance(4);
    let validate_only = rest.get_u8() != 0;
    skip_tagged_fields(&mut rest, flexible)?;
    let name = |offset: u32| name_at(&topics, offset as usize, flexible);
    // The second copies, which the decoded path keeps too (`dedup_decode.rs`).
    let seconds = first_appearances(&mut offsets, name);
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
        A::skip_topic(&mut walk, flexible)?;
    }
    Ok(ChunkedTopics {
        topics,
        version,
        count,
        first,
        repeated,
        second,
        denied: Vec::new(),
        denied_count: 0,
        validate_only,
        length_len,
        api: PhantomData,
    })
}

impl<A: TopicListApi> ChunkedTopics<A> {
    fn flexible(&self) -> bool {
        self.version >= A::FLEXIBLE_FROM
    }

    /// Marks the names named once that `may_change` refuses, asking once per name in request
    /// order (a repeated name is the controller's INVALID_REQUEST, as on the decoded path).
    pub(crate) fn deny(&mut self, may_change: impl Fn(&str) -> bool) -> anyhow::Result<()> {
        let flexible = self.flexible();
        let mut denied = vec![0u64; self.count.div_ceil(64)];
        let mut count = 0;
        let mut walk = self.topics.clone();
        for index in 0..self.count {
            if bit(&self.first, index) && !bit(&self.repeated, index) {
                let at = self.topics.len() - walk.len();
                // As Kafka's `readString`: invalid UTF-8 replaced, as the topic's decoder does.
                let bytes = name_at(&self.topics, at, flexible);
                let name = match std::str::from_utf8(bytes) {
                    Ok(name) => std::borrow::Cow::Borrowed(name),
                    Err(_) => {
                        std::borrow::Cow::Owned(kafka_protocol::protocol::java_utf8_lossy(bytes))
                    }
                };
                if !may_change(&name) {
                    set_bit(&mut denied, index);
                    count += 1;
                }
            }
            A::skip_topic(&mut walk, flexible)?;
        }
        if count > 0 {
            self.denied = denied;
        }
        self.denied_count = count;
        Ok(())
    }

    /// `frame`, the request frame (header included, no size prefix) these topics were read
    /// from, without the denied topics: what a broker forwards to the controller.
    pub(crate) fn without_denied(&self, frame: &Bytes) -> anyhow::Result<Bytes> {
        let flexible = self.flexible();
        let head = frame
            .len()
            .checked_sub(self.topics.len() + self.length_len)
            .and_then(|end| frame.get(..end))
            .with_context(|| format!("a {} frame without its list length", A::NAME))?;
        let mut out = BytesMut::with_capacity(frame.len());
        out.extend_from_slice(head);
        put_array_length(&mut out, self.count - self.denied_count, flexible)?;
        let mut walk = self.topics.clone();
        for index in 0..self.count {
            let start = self.topics.len() - walk.len();
            A::skip_topic(&mut walk, flexible)?;
            if !bit(&self.denied, index) {
                out.extend_from_slice(&self.topics[start..self.topics.len() - walk.len()]);
            }
        }
        out.extend_from_slice(&walk);
        Ok(out.freeze())
    }

    /// What a broker forwards to the controller (`frame` without the denied topics), and the
    /// answers it adds after the controller's (`None` when nothing is denied).
    pub(crate) fn into_forwarded(
        self,
        frame: &Bytes,
    ) -> anyhow::Result<(Bytes, Option<DeniedResultsWriter<A>>)> {
        if self.denied_count == 0 {
            return Ok((frame.clone(), None));
        }
        let without = self.without_denied(frame)?;
        Ok((without, Some(DeniedResults::writer(self)?)))
    }
}

impl ChunkedCreateTopics {
    /// Marks the topics the request's principal may not create, as the node deciding the
    /// request does (a broker checks them before it forwards the rest).
    pub(crate) fn authorize(
        &mut self,
        ctx: &HandlerContext,
        info: &RequestInfo,
    ) -> anyhow::Result<()> {
        let access = handlers::CreateTopicsAccess::new(ctx, info);
        if access.checks_each_topic() {
            self.deny(|name| access.may_create(name))?;
        }
        Ok(())
    }
}

impl ChunkedCreatePartitions {
    /// Marks the topics the request's principal may not add partitions to, as the node
    /// deciding the request does (a broker checks them before it forwards the rest).
    pub(crate) fn authorize(
        &mut self,
        ctx: &HandlerContext,
        info: &RequestInfo,
    ) -> anyhow::Result<()> {
        let access = handlers::CreatePartitionsAccess::new(ctx, info);
        if access.checks_each_topic() {
            self.deny(|name| access.may_alter(name))?;
        }
        Ok(())
    }
}

/// The answers of the denied topics (TOPIC_AUTHORIZATION_FAILED, in request order), which a
/// broker writes after a forwarded answer for the others, as Kafka's controller adds them
/// after the answers it decided.
pub struct DeniedResults<A: TopicListApi> {
    request: Arc<ChunkedTopics<A>>,
}

/// Writes the denied topics' answers, [`CHUNK`] at a time.
pub type DeniedResultsWriter<A> = PiecesWriter<DeniedResults<A>>;

impl<A: TopicListApi> DeniedResults<A> {
    /// The writer of `request`'s denied topics' answers.
    pub(crate) fn writer(request: ChunkedTopics<A>) -> anyhow::Result<DeniedResultsWriter<A>> {
        let count = request.denied_count;
        PiecesWriter::new(
            DeniedResults {
                request: Arc::new(request),
            },
            count,
        )
    }
}

impl<A: TopicListApi> PieceSource for DeniedResults<A> {
    const API: &'static str = A::NAME;

    fn pieces(&self) -> impl FnMut() -> anyhow::Result<Option<BytesMut>> + Send + '_ {
        let request = &self.request;
        let mut rest = request.topics.clone();
        let mut index = 0;
        move || {
            let mut piece = BytesMut::new();
            let mut in_piece = 0;
            while in_piece < CHUNK && index < request.count {
                if bit(&request.denied, index) {
                    let name = A::name(A::Topic::decode(&mut rest, request.version)?);
                    A::denied(name).encode(&mut piece, request.version)?;
                    in_piece += 1;
                } else {
                    A::skip_topic(&mut rest, request.flexible())?;
                }
                index += 1;
            }
            Ok((in_piece > 0).then_some(piece))
        }
    }
}

impl<A: TopicListApi> ListedElements<A::Topic> for ChunkedTopics<A> {
    fn listed(&self) -> usize {
        if self.denied_count > 0 {
            return self.distinct();
        }
        self.first
            .iter()
            .chain(&self.second)
            .map(|word| word.count_ones() as usize)
            .sum()
    }

    fn distinct(&self) -> usize {
        let distinct: usize = self
            .first
            .iter()
            .map(|word| word.count_ones() as usize)
            .sum();
        distinct - self.denied_count
    }

    fn denied(&self) -> usize {
        self.denied_count
    }

    fn each_first(&self, visit: &mut dyn FnMut(&A::Topic, bool) -> bool) -> Result<(), String> {
        let mut rest = self.topics.clone();
        let flexible = self.flexible();
        for index in 0..self.count {
            if !bit(&self.first, index) || bit(&self.denied, index) {
                A::skip_topic(&mut rest, flexible).map_err(|e| e.to_string())?;
                continue;
            }
            let topic = A::Topic::decode(&mut rest, self.version).map_err(|e| e.to_string())?;
            if !visit(&topic, bit(&self.repeated, index)) {
                break;
            }
        }
        Ok(())
    }
}

/// The answer's topics, from the frame and the kept outcomes.
pub struct TopicResults<A: TopicListApi> {
    request: Arc<ChunkedTopics<A>>,
    answers: ListedAnswers<A::Outcome>,
    /// How many topics the answer lists.
    count: usize,
}

/// Writes the answer's topics, [`CHUNK`] at a time.
pub type TopicResultsWriter<A> = PiecesWriter<TopicResults<A>>;

impl<A: TopicListApi> TopicResults<A> {
    /// The writer of `request`'s answer, the controller's `answers`.
    fn writer(
        request: Arc<ChunkedTopics<A>>,
        answers: ListedAnswers<A::Outcome>,
    ) -> anyhow::Result<TopicResultsWriter<A>> {
        let count = request.denied()
            + match answers.refused {
                Some(_) => request.listed(),
                None => answers.answered(),
            };
        PiecesWriter::new(
            TopicResults {
                request,
                answers,
                count,
            },
            count,
        )
    }
}

impl<A: TopicListApi> PieceSource for TopicResults<A> {
    const API: &'static str = A::NAME;

    fn pieces(&self) -> impl FnMut() -> anyhow::Result<Option<BytesMut>> + Send + '_ {
        let mut pieces = Pieces::new(self);
        move || pieces.next_piece()
    }
}

/// Encodes the topics' answers in frame order.
struct Pieces<'a, A: TopicListApi> {
    writer: &'a TopicResults<A>,
    rest: Bytes,
    /// The next listed topic.
    index: usize,
    /// How many topics were answered.
    answered: usize,
    /// How many of them the controller decided.
    decided: usize,
}

impl<'a, A: TopicListApi> Pieces<'a, A> {
    fn new(writer: &'a TopicResults<A>) -> Self {
        Pieces {
            writer,
            rest: writer.request.topics.clone(),
            index: 0,
            answered: 0,
            decided: 0,
        }
    }

    fn next_piece(&mut self) -> anyhow::Result<Option<BytesMut>> {
        let request = &self.writer.request;
        let answers = &self.writer.answers;
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
            // holds them, unless names were denied: the decoded request's handler then merges
            // the answers back one per name.
            let first = bit(&request.first, index);
            let answered = first
                || (answers.refused.is_some()
                    && request.denied_count == 0
                    && bit(&request.second, index));
            if !answered {
                A::skip_topic(&mut self.rest, request.flexible())?;
                continue;
            }
            let name = A::name(A::Topic::decode(&mut self.rest, request.version)?);
            let result = if first && bit(&request.denied, index) {
                A::denied(name)
            } else if let Some((code, message)) = &answers.refused {
                A::refused(name, *code, message)
            } else {
                let outcome = answers
                    .outcome(self.decided)
                    .context("more topics than answers")?;
                self.decided += 1;
                A::decided(outcome, &name)
            };
            result.encode(&mut piece, request.version)?;
            self.answered += 1;
            in_piece += 1;
        }
        Ok(Some(piece))
    }
}

/// Creates the topics the principal may create with the controller reading them from the
/// frame: the answer's body lists no topics, and the [`TopicResultsWriter`] writes them.
pub(crate) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    mut request: ChunkedCreateTopics,
) -> anyhow::Result<(ApiResponse, TopicResultsWriter<CreateTopicsApi>)> {
    let access = handlers::CreateTopicsAccess::new(ctx, info);
    if access.checks_each_topic() {
        request.deny(|name| access.may_create(name))?;
    }
    let request = Arc::new(request);
    let validate_only = request.validate_only;
    let (answer, creation) =
        handlers::create_listed_topics(ctx, info, request.clone(), validate_only, &access).await;
    decided(request, answer, creation)
}

/// Adds partitions to the topics the principal may alter with the controller reading them
/// from the frame: the answer's body lists no topics, and the [`TopicResultsWriter`] writes
/// them.
pub(crate) async fn handle_create_partitions(
    ctx: &HandlerContext,
    info: &RequestInfo,
    mut request: ChunkedCreatePartitions,
) -> anyhow::Result<(ApiResponse, TopicResultsWriter<CreatePartitionsApi>)> {
    request.authorize(ctx, info)?;
    let request = Arc::new(request);
    let validate_only = request.validate_only;
    let (answer, growth) =
        handlers::create_listed_partitions(ctx, info, request.clone(), validate_only).await;
    decided(request, answer, growth)
}

/// The answer to `request`, whose topics the controller answered `answers`.
fn decided<A: TopicListApi>(
    request: Arc<ChunkedTopics<A>>,
    answer: ApiResponse,
    answers: ListedAnswers<A::Outcome>,
) -> anyhow::Result<(ApiResponse, TopicResultsWriter<A>)> {
    tracing::debug!(
        topics = request.count,
        denied = request.denied_count,
        outcomes = answers.outcomes.len(),
        "a {} request decided from its frame",
        A::NAME
    );
    let writer = TopicResults::writer(request, answers)?;
    Ok((answer, writer))
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use gregor_actors::controller::logic::{ListedGrowth, ListedOutcome};

    use super::*;

    /// The topics' part of a v7 body naming `names` (one partition each), then the tail.
    fn scanned(names: &[&str]) -> anyhow::Result<ChunkedCreateTopics> {
        let mut body = BytesMut::new();
        for name in names {
            CreatableTopic::default()
                .with_name(TopicName(name.to_string().into()))
                .with_num_partitions(1)
                .with_replication_factor(1)
                .encode(&mut body, 7)?;
        }
        body.extend_from_slice(b"\x00\x00\x03\xe8\x00\x00");
        scan_topics(body.freeze(), 0, names.len(), 7)
    }

    /// A topic's answer: name, error code, message, partitions.
    type Answer = (String, i16, Option<String>, i32);

    /// Every topic's answer, as the writer writes it.
    fn written(
        request: ChunkedCreateTopics,
        creation: ListedCreation,
    ) -> anyhow::Result<Vec<Answer>> {
        let writer = TopicResults::writer(Arc::new(request), creation)?;
        let results: Vec<CreatableTopicResult> = writer.written_as(7)?;
        Ok(results
            .into_iter()
            .map(|result| {
                (
                    result.name.to_string(),
                    result.error_code,
                    result.error_message.map(|m| m.to_string()),
                    result.num_partitions,
                )
            })
            .collect())
    }

    const NAMES: [&str; 8] = ["a", "d1", "b", "a", "d2", "d2", "c", "d3"];

    fn denied_d(request: &mut ChunkedCreateTopics) -> anyhow::Result<Vec<String>> {
        let asked = RefCell::new(Vec::new());
        request.deny(|name| {
            asked.borrow_mut().push(name.to_owned());
            !name.starts_with('d')
        })?;
        Ok(asked.into_inner())
    }

    /// A v7 request frame (header included, no size prefix) naming `names`, and its topics
    /// read from the frame.
    fn framed(names: &[&str]) -> anyhow::Result<(Bytes, ChunkedCreateTopics)> {
        use kafka_protocol::messages::{CreateTopicsRequest, RequestHeader};
        let request = CreateTopicsRequest::default()
            .with_topics(
                names
                    .iter()
                    .map(|name| {
                        CreatableTopic::default()
                            .with_name(TopicName(name.to_string().into()))
                            .with_num_partitions(1)
                            .with_replication_factor(1)
                    })
                    .collect(),
            )
            .with_timeout_ms(1_000);
        let mut frame = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(19)
            .with_request_api_version(7)
            .with_correlation_id(42)
            .encode(&mut frame, 2)?;
        let header = frame.len();
        request.encode(&mut frame, 7)?;
        let frame = frame.freeze();
        let mut topics = frame.slice(header..);
        let listed = topics.len();
        let count = array_length(&mut topics, true)? as usize;
        let length_len = listed - topics.len();
        Ok((frame, scan_topics(topics, length_len, count, 7)?))
    }

    #[test]
    fn a_broker_forwards_the_frame_without_the_denied_topics() -> anyhow::Result<()> {
        use kafka_protocol::messages::{CreateTopicsRequest, RequestHeader};
        // 130 topics: the list's length takes two bytes, and one byte once 10 are denied.
        let names: Vec<String> = (0..130)
            .map(|i| format!("{}{i}", ["a", "d"][i % 13 / 12]))
            .collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let (frame, mut request) = framed(&names)?;
        denied_d(&mut request)?;
        assert_eq!(request.denied_count, 10);
        let mut filtered = request.without_denied(&frame)?;
        assert_eq!(request.length_len, 2);
        RequestHeader::decode(&mut filtered, 2)?;
        let kept = CreateTopicsRequest::decode(&mut filtered, 7)?;
        assert!(filtered.is_empty());
        let kept_names: Vec<String> = kept.topics.iter().map(|t| t.name.to_string()).collect();
        let expected: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| !n.starts_with('d'))
            .collect();
        assert_eq!(kept_names, expected);
        assert_eq!(kept.timeout_ms, 1_000);
        // A client may write the list's length in more bytes than it needs (130 + 1 as five
        // varint bytes): the head is cut where that length began, not where a minimal one
        // would have.
        let header = frame.len() - request.topics.len() - request.length_len;
        let mut padded = BytesMut::from(&frame[..header]);
        padded.extend_from_slice(&[0x83, 0x81, 0x80, 0x80, 0x00]);
        padded.extend_from_slice(&request.topics);
        let padded = padded.freeze();
        let mut topics = padded.slice(header..);
        let count = array_length(&mut topics, true)? as usize;
        let mut long: ChunkedCreateTopics = scan_topics(topics, 5, count, 7)?;
        long.denied = request.denied.clone();
        long.denied_count = request.denied_count;
        assert!(long.without_denied(&padded)? == request.without_denied(&frame)?);
        // The denied topics' answers, in request order, as the decoded path answers them.
        let denied = DeniedResults::writer(request)?;
        let mut written = Vec::new();
        futures::executor::block_on(denied.write_to(&mut written))?;
        assert_eq!(written.len(), denied.len());
        let mut written = Bytes::from(written);
        let mut answered = Vec::new();
        while written.has_remaining() {
            answered.push(CreatableTopicResult::decode(&mut written, 7)?);
        }
        let expected: Vec<CreatableTopicResult> = names
            .iter()
            .filter(|n| n.starts_with('d'))
            .map(|n| handlers::creation_denied(TopicName(n.to_string().into())))
            .collect();
        assert_eq!(answered, expected);
        assert_eq!(denied.count(), 10);
        Ok(())
    }

    #[test]
    fn names_named_once_are_asked_once_and_the_denied_left_out() -> anyhow::Result<()> {
        let mut request = scanned(&NAMES)?;
        assert_eq!(
            (request.listed(), request.distinct(), request.denied()),
            (8, 6, 0)
        );
        // "a" and "d2" repeat: the controller's INVALID_REQUEST, not asked.
        assert_eq!(denied_d(&mut request)?, ["d1", "b", "c", "d3"]);
        assert_eq!(request.denied, vec![0b1000_0010]);
        assert_eq!(
            (request.listed(), request.distinct(), request.denied()),
            (4, 4, 2)
        );
        let mut visited = Vec::new();
        request
            .each_first(&mut |topic, repeated| {
                visited.push((topic.name.to_string(), repeated));
                true
            })
            .map_err(anyhow::Error::msg)?;
        let visited: Vec<(&str, bool)> = visited.iter().map(|(n, r)| (n.as_str(), *r)).collect();
        assert_eq!(
            visited,
            [("a", true), ("b", false), ("d2", true), ("c", false)]
        );
        // Nobody denied: nothing kept.
        let mut request = scanned(&NAMES)?;
        request.deny(|_| true)?;
        assert!(request.denied.is_empty());
        assert_eq!(
            (request.listed(), request.distinct(), request.denied()),
            (8, 6, 0)
        );
        Ok(())
    }

    #[test]
    fn denied_names_are_answered_in_request_order_among_the_decided() -> anyhow::Result<()> {
        let failed = |code, message: &str| ListedOutcome::Failed {
            code,
            message: Some(vec![message.to_owned()]),
        };
        let created = ListedOutcome::Created {
            result: Box::new(
                CreatableTopicResult::default()
                    .with_num_partitions(1)
                    .with_error_message(None),
            ),
            configs: Arc::new(None),
        };
        let creation = ListedCreation {
            per_element: vec![0, 1, 0, 2],
            outcomes: vec![
                failed(42, "Duplicate topic name."),
                created,
                failed(37, "no partitions"),
            ],
            ..Default::default()
        };
        let mut request = scanned(&NAMES)?;
        denied_d(&mut request)?;
        let denied = |name: &str| {
            (
                name.to_owned(),
                29,
                Some("Authorization failed.".into()),
                -1,
            )
        };
        let answer = |name: &str, code, message: Option<&str>, partitions| {
            (
                name.to_owned(),
                code,
                message.map(str::to_owned),
                partitions,
            )
        };
        assert_eq!(
            written(request, creation)?,
            [
                answer("a", 42, Some("Duplicate topic name."), -1),
                denied("d1"),
                answer("b", 0, None, 1),
                answer("d2", 42, Some("Duplicate topic name."), -1),
                answer("c", 37, Some("no partitions"), -1),
                denied("d3"),
            ]
        );
        // Refused whole: once per name with some denied, as the decoded request's handler
        // merges the answers back; the first two copies of each without.
        let mut request = scanned(&NAMES)?;
        denied_d(&mut request)?;
        let refused = |name: &str| answer(name, 41, Some("gone"), -1);
        assert_eq!(
            written(request, ListedCreation::refused(41, "gone"))?,
            [
                refused("a"),
                denied("d1"),
                refused("b"),
                refused("d2"),
                refused("c"),
                denied("d3"),
            ]
        );
        let request = scanned(&NAMES)?;
        let everyone: Vec<_> = NAMES.iter().map(|name| refused(name)).collect();
        assert_eq!(
            written(request, ListedCreation::refused(41, "gone"))?,
            everyone
        );
        Ok(())
    }

    /// A CreatePartitions request `names`, each grown to two partitions more than its index,
    /// every other one with manual assignments, framed at `version`; and the frame's topics.
    fn framed_growth(
        names: &[&str],
        version: i16,
    ) -> anyhow::Result<(Bytes, Vec<CreatePartitionsTopic>, ChunkedCreatePartitions)> {
        use kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment;
        use kafka_protocol::messages::{BrokerId, CreatePartitionsRequest, RequestHeader};
        let topics: Vec<CreatePartitionsTopic> = (0..)
            .zip(names)
            .map(|(index, name)| {
                let assignment = CreatePartitionsAssignment::default()
                    .with_broker_ids(vec![BrokerId(1), BrokerId(index)]);
                CreatePartitionsTopic::default()
                    .with_name(TopicName(name.to_string().into()))
                    .with_count(index + 2)
                    .with_assignments((index % 2 == 0).then(|| vec![assignment; 2]))
            })
            .collect();
        let request = CreatePartitionsRequest::default()
            .with_topics(topics.clone())
            .with_timeout_ms(1_000)
            .with_validate_only(true);
        let header_version = if version >= 2 { 2 } else { 1 };
        let mut frame = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(37)
            .with_request_api_version(version)
            .with_correlation_id(42)
            .encode(&mut frame, header_version)?;
        let header = frame.len();
        request.encode(&mut frame, version)?;
        let frame = frame.freeze();
        let mut listed = frame.slice(header..);
        let before = listed.len();
        let count = array_length(&mut listed, version >= 2)? as usize;
        let length_len = before - listed.len();
        let scanned = scan_topics(listed, length_len, count, version)?;
        Ok((frame, topics, scanned))
    }

    #[test]
    fn create_partitions_topics_are_read_forwarded_and_answered_from_the_frame(
    ) -> anyhow::Result<()> {
        use kafka_protocol::messages::{CreatePartitionsRequest, RequestHeader};
        let names = ["a", "d1", "b", "a", "d2", "c"];
        for version in [1, 3] {
            let (frame, topics, mut request) = framed_growth(&names, version)?;
            assert!(request.validate_only, "v{version}");
            request.deny(|name| !name.starts_with('d'))?;
            assert_eq!(request.denied_count, 2);
            // The controller reads each name's first appearance, the denied left out, whole.
            let mut visited = Vec::new();
            request
                .each_first(&mut |topic, repeated| {
                    visited.push((topic.clone(), repeated));
                    true
                })
                .map_err(anyhow::Error::msg)?;
            let expected = vec![
                (topics[0].clone(), true),
                (topics[2].clone(), false),
                (topics[5].clone(), false),
            ];
            assert_eq!(visited, expected, "v{version}");
            // A broker forwards the others as they came.
            let (mut forwarded, denied) = request.clone().into_forwarded(&frame)?;
            RequestHeader::decode(&mut forwarded, if version >= 2 { 2 } else { 1 })?;
            let kept = CreatePartitionsRequest::decode(&mut forwarded, version)?;
            assert!(forwarded.is_empty());
            let kept_topics: Vec<CreatePartitionsTopic> = topics
                .iter()
                .filter(|t| !t.name.starts_with('d'))
                .cloned()
                .collect();
            assert_eq!(kept.topics, kept_topics, "v{version}");
            assert!(kept.validate_only);
            let denied = denied.context("two denied")?;
            let mut written = Vec::new();
            futures::executor::block_on(denied.write_to(&mut written))?;
            assert_eq!(written.len(), denied.len());
            let mut written = Bytes::from(written);
            let mut answered = Vec::new();
            while written.has_remaining() {
                answered.push(CreatePartitionsTopicResult::decode(&mut written, version)?);
            }
            let expected: Vec<_> = ["d1", "d2"]
                .iter()
                .map(|n| handlers::growth_denied(TopicName(n.to_string().into())))
                .collect();
            assert_eq!(answered, expected, "v{version}");
            // The answer puts the denied in request order among the decided.
            let growth = ListedGrowth {
                per_element: vec![0, 1, 2],
                outcomes: vec![
                    ListedError {
                        code: 42,
                        message: Some(vec!["Duplicate topic name.".to_owned()]),
                    },
                    ListedError::default(),
                    ListedError {
                        code: 37,
                        message: Some(vec!["The topic ".to_owned(), " has 1.".to_owned()]),
                    },
                ],
                ..Default::default()
            };
            let writer = TopicResults::writer(Arc::new(request), growth)?;
            let results: Vec<CreatePartitionsTopicResult> = writer.written_as(version)?;
            let answered: Vec<_> = results
                .into_iter()
                .map(|result| {
                    (
                        result.name.to_string(),
                        result.error_code,
                        result.error_message.map(|m| m.to_string()),
                    )
                })
                .collect();
            let denial = Some("Authorization failed.".to_owned());
            assert_eq!(
                answered,
                [
                    ("a".into(), 42, Some("Duplicate topic name.".into())),
                    ("d1".into(), 29, denial.clone()),
                    ("b".into(), 0, None),
                    ("d2".into(), 29, denial),
                    ("c".into(), 37, Some("The topic c has 1.".into())),
                ],
                "v{version}"
            );
        }
        Ok(())
    }
}
