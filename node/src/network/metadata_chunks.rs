//! Metadata requests naming many distinct topics, decided a chunk of topics at a time.
//!
//! A distinct topic costs a few bytes on the wire (a four-letter name is six) but a decoded
//! `MetadataRequestTopic`, a `MetadataResponseTopic` and a set entry of about 250 bytes, so a
//! frame of distinct names cost 40 times its size, and no deduplication helps. Here the list
//! is read from the frame twice: once to find each distinct topic's first appearance (the
//! elements' offsets sorted by the bytes naming them, then one bit per element), then to hand
//! those topics to the Metadata handler [`CHUNK`] at a time on an image pinned for the
//! request. A first pass keeps each chunk's encoded size; a second, run as the answer is
//! written, decides each chunk again on the same image and writes it, so neither the
//! request's topics nor the answer's are ever held whole. The answer is the first chunk's
//! (brokers, cluster, controller) with the topics in place of its empty list
//! (`repeated::ResponseBytes::Chunked`), in the order of first appearance, as
//! `dedup_decode.rs` answers a shorter list. Written on the wire primitives: the crate decodes
//! the whole list at once.

use std::sync::Arc;

use anyhow::bail;
use bytes::{Buf, Bytes, BytesMut};

use arc_swap::ArcSwap;
use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::controller::logic::MAX_RECORDS_PER_USER_OP;
use gregor_actors::handlers::{self, ApiResponse, ErrorCounts};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{MetadataRequest, RequestKind, ResponseKind, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::io::{AsyncWrite, AsyncWriteExt};
use uuid::Uuid;

use super::dedup_decode::{need, utf8_as_kafka_reads_it, uvarint};

/// Topics handed to the handler at once; a list no longer than this is decoded whole.
pub const CHUNK: usize = 1024;

/// A Metadata request whose topics stay in the frame until their chunk is decided.
pub struct ChunkedMetadata {
    /// The request body from the first topic on.
    topics: Bytes,
    version: i16,
    count: usize,
    /// One bit per listed topic: set on its first appearance.
    first: Vec<u64>,
    /// The request's other fields, with an empty topic list.
    shell: MetadataRequest,
}

/// The second pass over the topics, run while the answer is written: each chunk decided again
/// on the same pinned image and encoded, its size checked against the first pass's.
pub struct TopicsWriter {
    ctx: HandlerContext,
    info: RequestInfo,
    request: ChunkedMetadata,
    /// Per chunk, the encoded size of its topics in the first pass.
    sizes: Vec<usize>,
    /// How many topics the answer lists.
    pub(crate) count: usize,
}

impl TopicsWriter {
    /// The encoded size of every topic.
    pub(crate) fn len(&self) -> usize {
        self.sizes.iter().sum()
    }

    /// Decides the topics again, chunk by chunk, and writes them.
    pub(crate) async fn write_to<W: AsyncWrite + Unpin + Send>(
        &self,
        out: &mut W,
    ) -> std::io::Result<()> {
        let failed = |detail: String| {
            tracing::warn!(%detail, "a chunked Metadata answer changed while it was written");
            std::io::Error::other(detail)
        };
        let mut cursor = Cursor::new(&self.request);
        let mut index = 0;
        while let Some(topics) = cursor.next_chunk().map_err(|e| failed(e.to_string()))? {
            let handled = decide(&self.ctx, &self.info, &self.request, topics)
                .await
                .map_err(|e| failed(e.to_string()))?;
            let Some((_, topics)) = handled else {
                return Err(failed("the Metadata handler did not answer".to_owned()));
            };
            let bytes = encode(&topics, self.request.version).map_err(|e| failed(e.to_string()))?;
            if self.sizes.get(index) != Some(&bytes.len()) {
                return Err(failed(format!("chunk {index} is {} bytes", bytes.len())));
            }
            out.write_all(&bytes).await?;
            index += 1;
        }
        Ok(())
    }
}

/// One listed topic: where its identity (id, then name) ends, and the name (`None`: null).
fn topic(buf: &mut Bytes, version: i16) -> anyhow::Result<(Uuid, Option<Bytes>)> {
    let flexible = version >= 9;
    let id = if version >= 10 {
        need(buf, 16)?;
        let mut id = [0u8; 16];
        buf.copy_to_slice(&mut id);
        Uuid::from_bytes(id)
    } else {
        Uuid::nil()
    };
    let length = if flexible {
        i64::from(uvarint(buf)?) - 1
    } else {
        need(buf, 2)?;
        i64::from(buf.get_i16())
    };
    let name = if length < 0 {
        if version < 10 {
            bail!("Metadata v{version} topic names must not be null");
        }
        None
    } else {
        need(buf, length as usize)?;
        Some(utf8_as_kafka_reads_it(buf.split_to(length as usize)))
    };
    if flexible {
        for _ in 0..uvarint(buf)? {
            uvarint(buf)?;
            let size = uvarint(buf)? as usize;
            need(buf, size)?;
            buf.advance(size);
        }
    }
    Ok((id, name))
}

/// Whether bit `index` of a bit set (one `u64` per 64 elements) is set.
pub(super) fn bit(bits: &[u64], index: usize) -> bool {
    bits.get(index / 64)
        .is_some_and(|word| word & (1 << (index % 64)) != 0)
}

pub(super) fn set_bit(bits: &mut [u64], index: usize) {
    if let Some(word) = bits.get_mut(index / 64) {
        *word |= 1 << (index % 64);
    }
}

/// Reads `body` (a Metadata request body) when it lists more than [`CHUNK`] topics; `None`
/// for other requests, decoded whole.
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<ChunkedMetadata>> {
    if !(0..=13).contains(&version) {
        return None;
    }
    let mut rest = body.clone();
    let count = if version >= 9 {
        i64::from(uvarint(&mut rest).ok()?) - 1
    } else {
        i64::from(rest.try_get_i32().ok()?)
    };
    if count <= CHUNK as i64 {
        return None;
    }
    Some(scan_topics(rest, count as usize, version))
}

/// The bytes naming a listed topic at `start` (its id and name as on the wire, without its
/// tagged fields): equal bytes name the same topic. The element was read whole before.
fn identity_bytes(topics: &Bytes, start: u32, version: i16) -> &[u8] {
    let element = topics.get(start as usize..).unwrap_or_default();
    let mut at = if version >= 10 { 16 } else { 0 };
    let length = if version >= 9 {
        super::repeated::uvarint_at(element, &mut at) as i64 - 1
    } else {
        let length = element
            .get(at..at + 2)
            .map_or(-1, |b| i64::from(i16::from_be_bytes([b[0], b[1]])));
        at += 2;
        length
    };
    at += usize::try_from(length.max(0)).unwrap_or(0);
    &element[..at.min(element.len())]
}

fn scan_topics(topics: Bytes, count: usize, version: i16) -> anyhow::Result<ChunkedMetadata> {
    let mut rest = topics.clone();
    // The listed topics' offsets, sorted by what they name to find each distinct topic's first
    // appearance, then back in frame order: four bytes per element, where a hash set of the
    // names cost ten times that.
    // A topic repeating the one before it is never a first appearance: not kept, so a list
    // repeating one topic costs nothing here.
    let mut offsets: Vec<u32> = Vec::new();
    let mut previous: Option<u32> = None;
    for _ in 0..count {
        let start = u32::try_from(topics.len() - rest.len())?;
        topic(&mut rest, version)?;
        let repeats = previous.is_some_and(|previous| {
            identity_bytes(&topics, previous, version) == identity_bytes(&topics, start, version)
        });
        if !repeats {
            offsets.push(start);
        }
        previous = Some(start);
    }
    let key = |offset: &u32| identity_bytes(&topics, *offset, version);
    offsets.sort_unstable_by(|a, b| key(a).cmp(key(b)).then(a.cmp(b)));
    offsets.dedup_by(|later, first| key(later) == key(first));
    offsets.sort_unstable();
    // One bit per listed topic from here on: the offsets are freed before the answer grows.
    let mut first = vec![0u64; count.div_ceil(64)];
    let mut next = offsets.iter().peekable();
    let mut walk = topics.clone();
    for index in 0..count {
        let at = topics.len() - walk.len();
        if next.peek().is_some_and(|offset| **offset as usize == at) {
            next.next();
            set_bit(&mut first, index);
        }
        topic(&mut walk, version)?;
    }
    drop(offsets);
    let mut shell = MetadataRequest::default().with_topics(Some(Vec::new()));
    let boolean = |rest: &mut Bytes| -> anyhow::Result<bool> {
        need(rest, 1)?;
        Ok(rest.get_u8() != 0)
    };
    if version >= 4 {
        shell.allow_auto_topic_creation = boolean(&mut rest)?;
    }
    if (8..=10).contains(&version) {
        shell.include_cluster_authorized_operations = boolean(&mut rest)?;
    }
    if version >= 8 {
        shell.include_topic_authorized_operations = boolean(&mut rest)?;
    }
    Ok(ChunkedMetadata {
        topics,
        version,
        count,
        first,
        shell,
    })
}

impl ChunkedMetadata {
    /// Whether the request asks to create missing topics (always before v4).
    pub fn may_create_topics(&self) -> bool {
        self.version < 4 || self.shell.allow_auto_topic_creation
    }

    /// The distinct topics in the order of their first appearance, as (id, name).
    pub fn distinct_topics(&self) -> anyhow::Result<Vec<(Uuid, Option<Bytes>)>> {
        let mut rest = self.topics.clone();
        let mut distinct = Vec::new();
        for index in 0..self.count {
            let named = topic(&mut rest, self.version)?;
            if bit(&self.first, index) {
                distinct.push(named);
            }
        }
        Ok(distinct)
    }

    /// The request as the handler sees it, without its topics (for what looks at the request
    /// before the handler).
    pub(crate) fn shell(&self) -> RequestKind {
        RequestKind::Metadata(self.shell.clone())
    }
}

/// Walks the distinct topics a chunk at a time.
struct Cursor<'a> {
    request: &'a ChunkedMetadata,
    rest: Bytes,
    index: usize,
}

impl<'a> Cursor<'a> {
    fn new(request: &'a ChunkedMetadata) -> Self {
        Cursor {
            request,
            rest: request.topics.clone(),
            index: 0,
        }
    }

    /// The next [`CHUNK`] distinct topics, `None` after the last.
    fn next_chunk(&mut self) -> anyhow::Result<Option<Vec<MetadataRequestTopic>>> {
        let request = self.request;
        let mut chunk = Vec::with_capacity(CHUNK);
        while self.index < request.count && chunk.len() < CHUNK {
            let index = self.index;
            self.index += 1;
            let (id, name) = topic(&mut self.rest, request.version)?;
            if !bit(&request.first, index) {
                continue;
            }
            let name = name.map(|n| TopicName(StrBytes::from_utf8_lossy(n)));
            chunk.push(
                MetadataRequestTopic::default()
                    .with_topic_id(id)
                    .with_name(name),
            );
        }
        Ok((!chunk.is_empty()).then_some(chunk))
    }
}

/// One chunk's answer from the Metadata handler, its topics taken out.
async fn decide(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: &ChunkedMetadata,
    topics: Vec<MetadataRequestTopic>,
) -> anyhow::Result<Option<(ApiResponse, Vec<MetadataResponseTopic>)>> {
    let part = request.shell.clone().with_topics(Some(topics));
    let Some(mut handled) = handlers::handle(ctx, info, RequestKind::Metadata(part)).await else {
        return Ok(None);
    };
    let ResponseKind::Metadata(response) = &mut handled.body else {
        bail!("the Metadata handler answered another API");
    };
    let topics = std::mem::take(&mut response.topics);
    Ok(Some((handled, topics)))
}

fn encode(topics: &[MetadataResponseTopic], version: i16) -> anyhow::Result<BytesMut> {
    let mut size = 0;
    for topic in topics {
        size += topic.compute_size(version)?;
    }
    let mut bytes = BytesMut::with_capacity(size);
    for topic in topics {
        topic.encode(&mut bytes, version)?;
    }
    Ok(bytes)
}

/// Names from which one creation is refused whole (every new topic takes at least two
/// records, its own and a partition's), so a longer list of names to create is not kept.
const CREATION_REFUSED_WHOLE: usize = MAX_RECORDS_PER_USER_OP / 2 + 1;

/// Kafka asks the controller once per Metadata request to create the missing topics it names
/// (`AutoTopicCreationManager`), and one creation past the controller's record limit is
/// refused whole. The names are found chunk by chunk on the pinned image and sent in one
/// creation; past [`CREATION_REFUSED_WHOLE`] names the creation is refused whole whatever
/// follows, so only that many are sent. The chunks are then decided with `pinned` marked so
/// that the handler answers those topics as being created (LEADER_NOT_AVAILABLE, as Kafka
/// answers them whether or not the creation passes) without creating them again.
async fn create_missing_topics(
    pinned: &mut HandlerContext,
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: &ChunkedMetadata,
) -> anyhow::Result<()> {
    if !request.may_create_topics() || !ctx.settings.auto_create_topics_enable {
        return Ok(());
    }
    let mut names = Vec::new();
    let mut cursor = Cursor::new(request);
    while let Some(topics) = cursor.next_chunk()? {
        names.extend(handlers::topics_to_create(
            pinned,
            info,
            &request.shell,
            &topics,
        ));
        if names.len() >= CREATION_REFUSED_WHOLE {
            names.truncate(CREATION_REFUSED_WHOLE);
            break;
        }
    }
    if !names.is_empty() {
        handlers::auto_create(ctx, info, &names).await;
    }
    pinned.topic_creation_sent = true;
    Ok(())
}

/// Decides the topics [`CHUNK`] at a time with the Metadata handler, on an image pinned for
/// this request, keeping only each chunk's encoded size: the answer's body is the first
/// chunk's without topics (brokers, cluster and controller are the same for every chunk), its
/// errors those of every chunk, and its topics are decided again on the same image as they are
/// written ([`TopicsWriter`]), so the answer is never held whole.
pub(crate) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ChunkedMetadata,
) -> anyhow::Result<Option<(ApiResponse, TopicsWriter)>> {
    let mut pinned = ctx.clone();
    pinned.image = Arc::new(ArcSwap::new(ctx.image.load_full()));
    create_missing_topics(&mut pinned, ctx, info, &request).await?;
    let mut answer: Option<ApiResponse> = None;
    let mut errors = ErrorCounts::default();
    let mut sizes = Vec::new();
    let mut count = 0;
    let mut cursor = Cursor::new(&request);
    while let Some(topics) = cursor.next_chunk()? {
        let Some((handled, topics)) = decide(&pinned, info, &request, topics).await? else {
            return Ok(None);
        };
        for (code, times) in handled.errors.iter() {
            errors.add_times(code, times);
        }
        let mut size = 0;
        for topic in &topics {
            size += topic.compute_size(request.version)?;
        }
        sizes.push(size);
        count += topics.len();
        answer.get_or_insert(handled);
    }
    Ok(answer.map(|mut answer| {
        answer.errors = errors;
        let writer = TopicsWriter {
            ctx: pinned,
            info: info.clone(),
            request,
            sizes,
            count,
        };
        (answer, writer)
    }))
}

#[cfg(test)]
mod tests {
    use kafka_protocol::protocol::Encodable;

    use super::*;

    #[test]
    fn long_lists_keep_each_topic_once_in_order_of_first_appearance() -> anyhow::Result<()> {
        for version in [1i16, 4, 9, 10, 12, 13] {
            let ids = version >= 10;
            let topic = |i: usize| {
                let name = (!i.is_multiple_of(3) || !ids)
                    .then(|| TopicName(StrBytes::from(format!("t{}", i % 1500))));
                let id = if ids && i.is_multiple_of(3) {
                    Uuid::from_u128((i % 700) as u128)
                } else {
                    Uuid::nil()
                };
                MetadataRequestTopic::default()
                    .with_name(name)
                    .with_topic_id(id)
            };
            let listed: Vec<MetadataRequestTopic> = (0..4000).map(topic).collect();
            let mut request = MetadataRequest::default().with_topics(Some(listed.clone()));
            if version >= 4 {
                request.allow_auto_topic_creation = false;
            }
            let mut wire = BytesMut::new();
            request.encode(&mut wire, version)?;
            let Some(scanned) = scan(&wire.freeze(), version) else {
                panic!("v{version}: 4000 topics are scanned");
            };
            let scanned = scanned?;
            let mut seen = std::collections::HashSet::new();
            let expected: Vec<(Uuid, Option<Bytes>)> = listed
                .iter()
                .map(|t| {
                    (
                        t.topic_id,
                        t.name.as_ref().map(|n| Bytes::from(n.0.to_string())),
                    )
                })
                .filter(|key| seen.insert(key.clone()))
                .collect();
            assert_eq!(scanned.distinct_topics()?, expected, "v{version}");
            let RequestKind::Metadata(shell) = scanned.shell() else {
                panic!("a Metadata shell");
            };
            assert_eq!(shell.allow_auto_topic_creation, version < 4, "v{version}");
        }
        let mut short = BytesMut::new();
        MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default(); 3]))
            .encode(&mut short, 12)?;
        assert!(scan(&short.freeze(), 12).is_none());
        // A count the frame cannot hold fails at the frame's end, without allocating for it.
        assert!(
            scan(&Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 1]), 1)
                .is_some_and(|r| r.is_err())
        );
        Ok(())
    }
}
