//! DeleteTopics requests listing many topics, decided without decoding their list and
//! answered as the answer is written.
//!
//! A four-letter name is five bytes on the wire, but a decoded name, the deduplicating
//! decoder's map entry, the controller's entry, set entries, outcome and result, and the
//! encoded answer: a frame of distinct names cost 125 times its size (v6's entries of an id
//! each, 45 times). Here the entries stay in the frame, as CreateTopics' do
//! (`topic_list_chunks.rs`): a scan finds the first and second appearance of each name or id
//! listed alone and whether it repeats, and the first of each entry listing both or neither
//! (each is answered on its own, but a request rejected whole answers it once); the
//! controller reads the entries from the frame (`ListedTopics`) and keeps each answered
//! entry's answer as an index into its few distinct outcomes (`ListedDeletion`), and the
//! answer is written entry by entry from the frame. The deletion stays one decision: its
//! records are one batch, refused whole past the record limit. Without DELETE on the cluster,
//! each name or id listed alone once is checked (DESCRIBE and DELETE, one more bit per entry):
//! the controller never reads a denied entry, and the answer adds TOPIC_AUTHORIZATION_FAILED
//! for each after the controller's answers, as the decoded request's handler does.
//!
//! The scan sorts the offsets of the names of three bytes or more and of v6's entries (four
//! bytes each, at most the frame's size); shorter v1-5 names, which may be a byte each on the
//! wire, are counted in a table of their 65,793 possible values instead.

use std::sync::Arc;

use anyhow::{bail, Context};
use bytes::{Buf, Bytes, BytesMut};
use gregor_publishers::image::MetadataImage;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    ApiKey, DeleteTopicsRequest, RequestHeader, RequestKind, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::AsyncWrite;
use uuid::Uuid;

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::controller::logic::{ListedDeletion, ListedTopic, ListedTopics};
use gregor_actors::handlers::{self, ApiResponse};

use super::dedup_decode::{need, request_array_length, utf8_as_kafka_reads_it};
use super::metadata_chunks::{bit, set_bit};
use super::repeated::{skip_tagged_fields, uvarint_at};
use super::topic_list_chunks::{first_appearances_by, REPEATED};

/// Entries answered per piece of the answer; a request listing no more is decoded whole.
pub const CHUNK: usize = 1024;

/// Names of at most this many bytes are counted in [`ShortNames`].
const SHORT: usize = 2;

/// The first flexible version.
const FLEXIBLE_FROM: i16 = 4;

/// The version whose entries hold a name or an id (`DeleteTopicState`).
const STATES_FROM: i16 = 6;

/// One entry as the request spelled it.
struct Entry {
    name: Option<Bytes>,
    id: Uuid,
}

impl Entry {
    /// Whether it lists a name alone or an id alone (one of a kind the controller looks up).
    fn alone(&self) -> bool {
        self.name.is_some() == self.id.is_nil()
    }

    fn topic_name(&self) -> anyhow::Result<Option<TopicName>> {
        self.name
            .clone()
            .map(|name| Ok(TopicName(StrBytes::from_utf8_lossy(name))))
            .transpose()
    }
}

/// A DeleteTopics request whose entries stay in the frame.
#[derive(Clone)]
pub struct ChunkedDeleteTopics {
    /// The list from its first entry on.
    entries: Bytes,
    version: i16,
    count: usize,
    /// Where each entry appears again.
    seen: Appearances,
    /// One bit per entry: set on a name or id listed alone once that the principal may not
    /// delete; empty when none is.
    denied: Vec<u64>,
    /// One bit per entry: set on a denied id whose name the answer shows.
    shown: Vec<u64>,
    /// The image the denials were decided on, where the shown names are found.
    denied_on: Option<Arc<MetadataImage>>,
    /// How many entries are denied.
    denied_count: usize,
    /// The bytes of the list's length before `entries`, as the client wrote it.
    length_len: usize,
    /// The body after the list: `TimeoutMs` and tagged fields.
    tail: Bytes,
}

/// Whether `frame` (header included) is a DeleteTopics v6 listing more than [`CHUNK`]
/// entries, which its scan answers repeats and all (`repeated.rs` leaves it alone).
pub fn is_long(frame: &Bytes, version: i16) -> bool {
    let mut rest = frame.clone();
    let header_version = ApiKey::DeleteTopics.request_header_version(version);
    version >= STATES_FROM
        && RequestHeader::decode(&mut rest, header_version).is_ok()
        && request_array_length(&mut rest, true).is_ok_and(|count| count > CHUNK as i64)
}

/// Reads `body` (a DeleteTopics request body) when it lists more than [`CHUNK`] topics
/// (v1-6); `None` for other requests, decoded whole. The request is read to its end first, so
/// a malformed one is refused whole, as the crate's decoder refuses it.
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<ChunkedDeleteTopics>> {
    if !(1..=STATES_FROM).contains(&version) {
        return None;
    }
    let mut rest = body.clone();
    let count = request_array_length(&mut rest, version >= FLEXIBLE_FROM).ok()?;
    if count <= CHUNK as i64 {
        return None;
    }
    let length_len = body.len() - rest.len();
    let count = count as usize;
    let scanned = if version >= STATES_FROM {
        scan_states(rest, count)
    } else {
        scan_names(rest, count, version)
    };
    Some(scanned.map(|(entries, seen, tail_len)| {
        let list_len = entries.len() - tail_len;
        ChunkedDeleteTopics {
            entries: entries.slice(..list_len),
            version,
            count,
            seen,
            denied: Vec::new(),
            shown: Vec::new(),
            denied_on: None,
            denied_count: 0,
            length_len,
            tail: entries.slice(list_len..),
        }
    }))
}

/// Where the entries of a request appear again, as its scan finds it.
#[derive(Clone)]
struct Appearances {
    /// One bit per entry listing a name or an id alone: set on its first appearance.
    first: Vec<u64>,
    /// One bit per entry: set on a first appearance whose name or id appears again.
    repeated: Vec<u64>,
    /// One bit per entry: set on the second appearance of a name or an id alone.
    second: Vec<u64>,
    /// One bit per entry listing both or neither (v6): set on the first of equal ones.
    other_first: Vec<u64>,
    /// How many entries list both or neither.
    others: usize,
    /// The offsets of the ids listed alone and not denied, each once, ordered by id.
    ids: Vec<u32>,
}

impl Appearances {
    fn new(count: usize) -> Self {
        Appearances {
            first: vec![0u64; count.div_ceil(64)],
            repeated: vec![0u64; count.div_ceil(64)],
            second: vec![0u64; count.div_ceil(64)],
            other_first: Vec::new(),
            others: 0,
            ids: Vec::new(),
        }
    }

    /// Marks the entries at `firsts` (their first appearances, [`REPEATED`] when they appear
    /// again) and `seconds`, both offsets ordered, by a walk of `entries` in frame order.
    fn mark(
        &mut self,
        entries: &Bytes,
        count: usize,
        version: i16,
        firsts: &[u32],
        seconds: &[u32],
    ) -> anyhow::Result<()> {
        let mut next_first = firsts.iter().peekable();
        let mut next_second = seconds.iter().peekable();
        let mut walk = entries.clone();
        for index in 0..count {
            let at = (entries.len() - walk.len()) as u32;
            if let Some(offset) = next_first.next_if(|offset| **offset & !REPEATED == at) {
                set_bit(&mut self.first, index);
                if offset & REPEATED != 0 {
                    set_bit(&mut self.repeated, index);
                }
            }
            if next_second.next_if(|offset| **offset == at).is_some() {
                set_bit(&mut self.second, index);
            }
            read_entry(&mut walk, version)?;
        }
        Ok(())
    }
}

/// The first and second appearances of the names of at most [`SHORT`] bytes, by value.
struct ShortNames {
    /// Per value: its first and second appearance's index, `u32::MAX` when there is none.
    seen: Vec<[u32; 2]>,
}

impl ShortNames {
    fn new() -> Self {
        ShortNames {
            seen: vec![[u32::MAX; 2]; 1 + 256 + 256 * 256],
        }
    }

    /// Where a short name's appearances are kept.
    fn slot(name: &[u8]) -> usize {
        match name {
            [] => 0,
            [a] => 1 + usize::from(*a),
            [a, b, ..] => 1 + 256 + usize::from(*a) * 256 + usize::from(*b),
        }
    }

    fn add(&mut self, name: &[u8], index: u32) {
        let seen = &mut self.seen[Self::slot(name)];
        if seen[0] == u32::MAX {
            seen[0] = index;
        } else if seen[1] == u32::MAX {
            seen[1] = index;
        }
    }
}

/// The offset of the entry `rest` starts at.
fn offset_in(entries: &Bytes, rest: &Bytes) -> anyhow::Result<u32> {
    let offset = u32::try_from(entries.len() - rest.len()).context("a frame over 2 GiB")?;
    if offset & REPEATED != 0 {
        bail!("a frame over 2 GiB");
    }
    Ok(offset)
}

/// Reads the rest of the body after the list: `TimeoutMs` and tagged fields.
fn read_tail(rest: &mut Bytes, flexible: bool) -> anyhow::Result<()> {
    need(rest, 4)?;
    rest.advance(4);
    skip_tagged_fields(rest, flexible)
}

/// v1-5: names only. Returns the list and what follows it, where each entry appears, and the
/// length of what follows.
fn scan_names(
    names: Bytes,
    count: usize,
    version: i16,
) -> anyhow::Result<(Bytes, Appearances, usize)> {
    let flexible = version >= FLEXIBLE_FROM;
    let mut seen = Appearances::new(count);
    let mut short = ShortNames::new();
    // The longer names' offsets, four bytes each, each name at least four bytes on the wire.
    let mut offsets: Vec<u32> = Vec::with_capacity(count.min(names.len() / (SHORT + 2)));
    let mut rest = names.clone();
    for index in 0..count {
        let start = offset_in(&names, &rest)?;
        let name = read_name(&mut rest, flexible)?;
        if name.len() <= SHORT {
            short.add(&name, index as u32);
        } else {
            offsets.push(start);
        }
    }
    let tail_len = rest.len();
    read_tail(&mut rest, flexible)?;
    for [at, again] in std::mem::take(&mut short.seen) {
        if at != u32::MAX {
            set_bit(&mut seen.first, at as usize);
            if again != u32::MAX {
                set_bit(&mut seen.repeated, at as usize);
                set_bit(&mut seen.second, again as usize);
            }
        }
    }
    let seconds = first_appearances_by(&mut offsets, |a, b| {
        name_bytes_at(&names, a, flexible).cmp(name_bytes_at(&names, b, flexible))
    });
    seen.mark(&names, count, version, &offsets, &seconds)?;
    Ok((names, seen, tail_len))
}

/// v6: entries of a name, an id, both or neither.
fn scan_states(states: Bytes, count: usize) -> anyhow::Result<(Bytes, Appearances, usize)> {
    let mut seen = Appearances::new(count);
    seen.other_first = vec![0u64; count.div_ceil(64)];
    // Each entry is at least 18 bytes on the wire.
    let mut alone: Vec<u32> = Vec::with_capacity(count.min(states.len() / 18));
    let mut both: Vec<u32> = Vec::new();
    let mut neither = None;
    let mut rest = states.clone();
    for index in 0..count {
        let start = offset_in(&states, &rest)?;
        let entry = read_entry(&mut rest, STATES_FROM)?;
        if entry.alone() {
            alone.push(start);
        } else if entry.name.is_some() {
            both.push(start);
        } else {
            neither.get_or_insert(index);
        }
        seen.others += usize::from(!entry.alone());
    }
    let tail_len = rest.len();
    read_tail(&mut rest, true)?;
    let compare = |a: u32, b: u32| state_at(&states, a).cmp(&state_at(&states, b));
    let seconds = first_appearances_by(&mut alone, compare);
    seen.mark(&states, count, STATES_FROM, &alone, &seconds)?;
    seen.ids = alone
        .iter()
        .map(|offset| offset & !REPEATED)
        .filter(|offset| state_at(&states, *offset).0.is_none())
        .collect();
    seen.ids.sort_unstable_by(|a, b| compare(*a, *b));
    drop(first_appearances_by(&mut both, compare));
    let mut next_both = both.iter().peekable();
    let mut walk = states.clone();
    for index in 0..count {
        let at = (states.len() - walk.len()) as u32;
        if next_both
            .next_if(|offset| **offset & !REPEATED == at)
            .is_some()
            || neither == Some(index)
        {
            set_bit(&mut seen.other_first, index);
        }
        read_entry(&mut walk, STATES_FROM)?;
    }
    Ok((states, seen, tail_len))
}

/// A v1-5 name at `offset` of a list the scan has read (so well formed).
fn name_bytes_at(names: &Bytes, offset: u32, flexible: bool) -> &[u8] {
    super::topic_list_chunks::name_at(names, offset as usize, flexible)
}

/// A v6 entry's name (`None`: null) and id at `offset` of a list the scan has read (so well
/// formed), ordered as the controller tells them apart.
fn state_at(states: &Bytes, offset: u32) -> (Option<&[u8]>, &[u8]) {
    let entry = states.get(offset as usize..).unwrap_or_default();
    let mut at = 0;
    let length = uvarint_at(entry, &mut at);
    let name = match length.checked_sub(1) {
        None => None,
        Some(length) => {
            let name = entry.get(at..at + length as usize).unwrap_or_default();
            at += length as usize;
            Some(name)
        }
    };
    (name, entry.get(at..at + 16).unwrap_or_default())
}

/// Reads one v1-5 name, which must be a UTF-8 string (not null), as the crate's decoder
/// requires.
fn read_name(buf: &mut Bytes, flexible: bool) -> anyhow::Result<Bytes> {
    let length = if flexible {
        i64::from(super::dedup_decode::uvarint(buf)?) - 1
    } else {
        need(buf, 2)?;
        i64::from(buf.get_i16())
    };
    if length < 0 {
        bail!("DeleteTopics topic names must not be null");
    }
    read_utf8(buf, length as usize)
}

fn read_utf8(buf: &mut Bytes, length: usize) -> anyhow::Result<Bytes> {
    need(buf, length)?;
    Ok(utf8_as_kafka_reads_it(buf.split_to(length)))
}

/// Reads one entry: a v1-5 name, or a v6 `DeleteTopicState` (a nullable UTF-8 name, an id and
/// tagged fields).
fn read_entry(buf: &mut Bytes, version: i16) -> anyhow::Result<Entry> {
    if version < STATES_FROM {
        let name = read_name(buf, version >= FLEXIBLE_FROM)?;
        return Ok(Entry {
            name: Some(name),
            id: Uuid::nil(),
        });
    }
    let length = super::dedup_decode::uvarint(buf)?;
    let name = match length.checked_sub(1) {
        None => None,
        Some(length) => Some(read_utf8(buf, length as usize)?),
    };
    need(buf, 16)?;
    let id = Uuid::from_slice(&buf.split_to(16))?;
    skip_tagged_fields(buf, true)?;
    Ok(Entry { name, id })
}

impl ChunkedDeleteTopics {
    /// Marks the names and ids listed alone once that `denial` refuses (`Some(shown)`: denied,
    /// the name shown in the answer), asking once per entry in request order (a repeated name
    /// or id, or an entry with both or neither, is the controller's INVALID_REQUEST, as on the
    /// decoded path). An id is asked by the name `image` gives it; an unknown id is the
    /// controller's.
    fn deny(
        &mut self,
        image: Option<&Arc<MetadataImage>>,
        denial: impl Fn(&str, bool) -> Option<bool>,
    ) -> anyhow::Result<()> {
        let mut denied = vec![0u64; self.count.div_ceil(64)];
        let mut shown = Vec::new();
        let mut denied_ids = Vec::new();
        let mut count = 0;
        self.each_entry(|index, offset, entry| {
            if !bit(&self.seen.first, index) || bit(&self.seen.repeated, index) || !entry.alone() {
                return Ok(true);
            }
            let decided = match &entry.name {
                Some(name) => denial(std::str::from_utf8(name)?, false),
                None => match image.and_then(|image| image.topics.get_by_id(&entry.id)) {
                    Some(topic) => denial(&topic.name, true),
                    None => None,
                },
            };
            if let Some(show) = decided {
                set_bit(&mut denied, index);
                count += 1;
                if entry.name.is_none() {
                    denied_ids.push(offset);
                    if show {
                        shown.resize(self.count.div_ceil(64), 0);
                        set_bit(&mut shown, index);
                    }
                }
            }
            Ok(true)
        })?;
        if count > 0 {
            self.denied = denied;
            self.shown = shown;
            self.denied_on = image.cloned();
            self.seen
                .ids
                .retain(|offset| denied_ids.binary_search(offset).is_err());
        }
        self.denied_count = count;
        Ok(())
    }

    /// Marks the entries the request's principal may not delete, as the node deciding the
    /// request does (a broker checks them before it forwards the rest).
    pub(crate) fn authorize(
        &mut self,
        ctx: &HandlerContext,
        info: &RequestInfo,
    ) -> anyhow::Result<()> {
        let access = handlers::DeleteTopicsAccess::new(ctx, info);
        if access.checks_each_topic() {
            let image = ctx.image.load_full();
            self.deny(Some(&image), |name, by_id| {
                if by_id {
                    access.denial_by_id(name)
                } else {
                    (!access.may_delete(name)).then_some(true)
                }
            })?;
        }
        Ok(())
    }

    /// How many entries are denied.
    pub(crate) fn denied_count(&self) -> usize {
        self.denied_count
    }

    /// `frame`, the request frame (header included, no size prefix) these entries were read
    /// from, without the denied entries: what a broker forwards to the controller.
    pub(crate) fn without_denied(&self, frame: &Bytes) -> anyhow::Result<Bytes> {
        let flexible = self.version >= FLEXIBLE_FROM;
        let head = frame
            .len()
            .checked_sub(self.tail.len() + self.entries.len() + self.length_len)
            .and_then(|end| frame.get(..end))
            .context("a DeleteTopics frame without its list length")?;
        let mut out = BytesMut::with_capacity(frame.len());
        out.extend_from_slice(head);
        super::repeated::put_array_length(&mut out, self.count - self.denied_count, flexible)?;
        let mut walk = self.entries.clone();
        for index in 0..self.count {
            let start = self.entries.len() - walk.len();
            read_entry(&mut walk, self.version)?;
            if !bit(&self.denied, index) {
                out.extend_from_slice(&self.entries[start..self.entries.len() - walk.len()]);
            }
        }
        out.extend_from_slice(&self.tail);
        Ok(out.freeze())
    }

    /// The request as what looks at it before the handler sees it, without its entries.
    pub(crate) fn shell(&self) -> RequestKind {
        RequestKind::DeleteTopics(DeleteTopicsRequest::default())
    }

    /// Calls `visit` with each entry's index, offset and content.
    fn each_entry(
        &self,
        mut visit: impl FnMut(usize, u32, Entry) -> anyhow::Result<bool>,
    ) -> anyhow::Result<()> {
        let mut rest = self.entries.clone();
        for index in 0..self.count {
            let offset = (self.entries.len() - rest.len()) as u32;
            let entry = read_entry(&mut rest, self.version)?;
            if !visit(index, offset, entry)? {
                break;
            }
        }
        Ok(())
    }

    /// Whether the decision answers the entry at `index`.
    fn decided(&self, index: usize, entry: &Entry) -> bool {
        !entry.alone() || (bit(&self.seen.first, index) && !bit(&self.denied, index))
    }
}

fn ones(bits: &[u64]) -> usize {
    bits.iter().map(|word| word.count_ones() as usize).sum()
}

/// The denied entries are left out: each is listed once, so it has no second appearance.
impl ListedTopics for ChunkedDeleteTopics {
    fn answered(&self) -> usize {
        ones(&self.seen.first) - self.denied_count + self.seen.others
    }

    fn listed(&self) -> usize {
        self.answered() + ones(&self.seen.second)
    }

    fn distinct(&self) -> usize {
        ones(&self.seen.first) - self.denied_count + ones(&self.seen.other_first)
    }

    fn each_answered(
        &self,
        visit: &mut dyn FnMut(ListedTopic<'_>, bool) -> bool,
    ) -> Result<(), String> {
        self.each_entry(|index, _, entry| {
            if !self.decided(index, &entry) {
                return Ok(true);
            }
            let repeated = bit(&self.seen.repeated, index);
            Ok(match (&entry.name, entry.id.is_nil()) {
                (Some(name), true) => {
                    visit(ListedTopic::Name(std::str::from_utf8(name)?), repeated)
                }
                (None, false) => visit(ListedTopic::Id(entry.id), repeated),
                (Some(_), false) => visit(ListedTopic::Both, false),
                (None, true) => visit(ListedTopic::Neither, false),
            })
        })
        .map_err(|e| e.to_string())
    }

    fn lists_id(&self, id: &Uuid) -> bool {
        self.seen
            .ids
            .binary_search_by(|offset| {
                state_at(&self.entries, *offset)
                    .1
                    .cmp(id.as_bytes().as_slice())
            })
            .is_ok()
    }
}

/// Deletes the listed topics with the controller, the entries the principal may not delete
/// left out and answered after the others.
pub(crate) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    mut request: ChunkedDeleteTopics,
) -> anyhow::Result<(ApiResponse, DeletionResultsWriter)> {
    request.authorize(ctx, info)?;
    let denied = request.denied_count;
    let request = Arc::new(request);
    let (answer, deletion) =
        handlers::delete_listed_topics(ctx, info, request.clone(), denied).await;
    Ok((answer, DeletionResultsWriter::new(request, deletion)?))
}

/// Writes the answer's topics from the frame and the deletion's outcomes, [`CHUNK`] at a time.
pub struct DeletionResultsWriter {
    request: Arc<ChunkedDeleteTopics>,
    deletion: ListedDeletion,
    /// Whether only the denied entries are answered (after a forwarded answer of the others).
    only_denied: bool,
    /// How many topics the answer lists.
    count: usize,
    /// The encoded size of every topic's answer.
    size: usize,
}

impl DeletionResultsWriter {
    fn new(request: Arc<ChunkedDeleteTopics>, deletion: ListedDeletion) -> anyhow::Result<Self> {
        let count = request.denied_count
            + match (&deletion.refused, deletion.rejected) {
                (Some(_), _) => request.listed(),
                (None, Some(_)) => request.distinct(),
                (None, None) => request.answered(),
            };
        let mut writer = DeletionResultsWriter {
            request,
            deletion,
            only_denied: false,
            count,
            size: 0,
        };
        writer.size = super::repeated::pieces_size(writer.pieces())?;
        Ok(writer)
    }

    /// The answers of the denied entries alone, which a broker adds after the controller's
    /// answer to the rest.
    pub(crate) fn denied(request: ChunkedDeleteTopics) -> anyhow::Result<Self> {
        let mut writer = DeletionResultsWriter {
            count: request.denied_count,
            request: Arc::new(request),
            deletion: ListedDeletion::default(),
            only_denied: true,
            size: 0,
        };
        writer.size = super::repeated::pieces_size(writer.pieces())?;
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

    /// Whether the entry at `index` is answered in this pass.
    fn answers(&self, index: usize, entry: &Entry, denied_pass: bool) -> bool {
        let request = &self.request;
        if denied_pass {
            return bit(&request.denied, index);
        }
        match (&self.deletion.refused, self.deletion.rejected) {
            (Some(_), _) => request.decided(index, entry) || bit(&request.seen.second, index),
            (None, Some(_)) if !entry.alone() => bit(&request.seen.other_first, index),
            _ => request.decided(index, entry),
        }
    }

    /// The answer to the entry at `index`, the `decided`-th the decision answers.
    fn answer(
        &self,
        index: usize,
        entry: Entry,
        denied_pass: bool,
        decided: &mut usize,
    ) -> anyhow::Result<DeletableTopicResult> {
        let name = entry.topic_name()?;
        let spelled = |code: i16, message: Option<&str>| {
            DeletableTopicResult::default()
                .with_name(name.clone())
                .with_topic_id(entry.id)
                .with_error_code(code)
                .with_error_message(message.map(|m| StrBytes::from_string(m.to_owned())))
        };
        if denied_pass {
            let name = match name {
                Some(name) => Some(name),
                None if bit(&self.request.shown, index) => self
                    .request
                    .denied_on
                    .as_ref()
                    .and_then(|image| image.topics.get_by_id(&entry.id))
                    .map(|topic| TopicName(StrBytes::from_string(topic.name.to_string()))),
                None => None,
            };
            return Ok(handlers::deletion_denied(name, entry.id));
        }
        Ok(match (&self.deletion.refused, self.deletion.rejected) {
            (Some((code, message)), _) => spelled(*code, Some(message)),
            (None, Some(code)) => spelled(code, None),
            (None, None) => {
                let result = self
                    .deletion
                    .answer(*decided, name.clone(), entry.id)
                    .context("more topics than answers")?;
                *decided += 1;
                result
            }
        })
    }

    /// The topics' answers in frame order, [`CHUNK`] entries at a time: a refusal answers each
    /// name's or id's first two copies, as the decoded request holds them, a rejection each
    /// distinct entry once, a decision each name or id once and every other entry; then a
    /// second pass answers the denied entries.
    fn pieces(&self) -> impl FnMut() -> anyhow::Result<Option<BytesMut>> + '_ {
        let request = &self.request;
        let mut rest = request.entries.clone();
        let mut index = 0;
        let mut denied_pass = self.only_denied;
        let mut decided = 0;
        let mut answered = 0;
        move || {
            if index >= request.count && !denied_pass && request.denied_count > 0 {
                denied_pass = true;
                index = 0;
                rest = request.entries.clone();
            }
            if index >= request.count {
                if answered != self.count {
                    bail!("{answered} topics answered of {}", self.count);
                }
                return Ok(None);
            }
            let mut piece = BytesMut::new();
            let end = (index + CHUNK).min(request.count);
            while index < end {
                let entry = read_entry(&mut rest, request.version)?;
                if self.answers(index, &entry, denied_pass) {
                    let result = self.answer(index, entry, denied_pass, &mut decided)?;
                    result.encode(&mut piece, request.version)?;
                    answered += 1;
                }
                index += 1;
            }
            Ok(Some(piece))
        }
    }

    /// Writes every topic's answer, encoding it a piece at a time.
    pub(crate) async fn write_to<W: AsyncWrite + Unpin + Send>(
        &self,
        out: &mut W,
    ) -> std::io::Result<()> {
        let mut pieces = self.pieces();
        super::repeated::write_pieces(out, self.size, "DeleteTopics", &mut pieces).await
    }
}

impl std::fmt::Debug for DeletionResultsWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeletionResultsWriter")
            .field("count", &self.count)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use bytes::BufMut;
    use gregor_actors::controller::logic::{delete_listed_topics, delete_topics, MutationContext};
    use gregor_publishers::records::{PartitionRecord, TopicRecord};
    use gregor_publishers::{MetadataDelta, MetadataRecord};
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
    use rand::SeedableRng;

    /// A v4 body listing `names`.
    fn body(names: &[String]) -> Bytes {
        body_of(names.iter().map(|name| name.as_bytes()))
    }

    fn body_of<'a>(names: impl ExactSizeIterator<Item = &'a [u8]>) -> Bytes {
        let mut body = BytesMut::new();
        super::super::repeated::put_array_length(&mut body, names.len(), true).unwrap();
        for name in names {
            body.put_u8(name.len() as u8 + 1);
            body.put_slice(name);
        }
        body.put_i32(1000);
        body.put_u8(0);
        body.freeze()
    }

    fn names() -> Vec<String> {
        (0..1_100)
            .map(|index| match index % 100 {
                3 => "a".to_owned(),
                5 => String::new(),
                7 => "ab".to_owned(),
                9 => "again".to_owned(),
                _ => format!("x{index}"),
            })
            .collect()
    }

    /// The answers a writer writes: (name, code).
    fn written(writer: &DeletionResultsWriter) -> Vec<(String, i16)> {
        let mut pieces = writer.pieces();
        let mut answers = Vec::new();
        while let Some(piece) = pieces().unwrap() {
            let mut piece = piece.freeze();
            while piece.has_remaining() {
                let result = DeletableTopicResult::decode(&mut piece, 4).unwrap();
                answers.push((result.name.unwrap().to_string(), result.error_code));
            }
        }
        answers
    }

    #[test]
    fn a_count_beyond_the_frame_is_left_to_the_decoder_unsized() {
        // A 43-byte DeleteTopics v6 claiming 2^31 - 2 entries once sized three bitmaps and an
        // offset vector from the claim (about 1 GB); now nothing is scanned.
        for version in [1, 4, 6] {
            let mut body = BytesMut::new();
            if version >= 4 {
                super::super::repeated::put_array_length(&mut body, 0x7fff_fffe, true).unwrap();
            } else {
                body.put_i32(0x7fff_fffe);
            }
            body.put_slice(&[1; 30]);
            assert!(scan(&body.freeze(), version).is_none(), "v{version}");
        }
    }

    #[test]
    fn a_refusal_answers_each_names_first_two_copies_and_a_decision_each_name_once() {
        let names = names();
        let scanned = scan(&body(&names), 4).unwrap().unwrap();
        let mut copies = std::collections::HashMap::new();
        let twice: Vec<(String, i16)> = names
            .iter()
            .filter(|name| {
                let seen = copies.entry(name.as_str()).or_insert(0);
                *seen += 1;
                *seen <= 2
            })
            .map(|name| (name.clone(), 41))
            .collect();
        let mut seen = std::collections::HashSet::new();
        let once: Vec<&String> = names.iter().filter(|name| seen.insert(*name)).collect();
        assert_eq!(scanned.listed(), twice.len());
        assert_eq!(scanned.answered(), once.len());
        let mut visited = Vec::new();
        scanned
            .each_answered(&mut |topic, repeated| {
                let ListedTopic::Name(name) = topic else {
                    panic!("{topic:?} in a v4 request");
                };
                visited.push((name.to_owned(), repeated));
                true
            })
            .unwrap();
        let repeated = ["a", "", "ab", "again"];
        let expected: Vec<(String, bool)> = once
            .iter()
            .map(|name| (name.to_string(), repeated.contains(&name.as_str())))
            .collect();
        assert_eq!(visited, expected);

        let scanned = Arc::new(scanned);
        let refused = ListedDeletion::refused(41, "not the controller");
        let writer = DeletionResultsWriter::new(scanned.clone(), refused).unwrap();
        assert_eq!(writer.count(), twice.len());
        assert_eq!(written(&writer), twice);

        let decided = ListedDeletion {
            per_entry: vec![0; once.len()],
            outcomes: vec![(3, None)],
            ..Default::default()
        };
        let writer = DeletionResultsWriter::new(scanned, decided).unwrap();
        let each_once: Vec<(String, i16)> = once.iter().map(|name| (name.to_string(), 3)).collect();
        assert_eq!(written(&writer), each_once);
    }

    #[test]
    fn denied_names_are_left_out_and_answered_after_the_others() {
        let names = names();
        let mut scanned = scan(&body(&names), 4).unwrap().unwrap();
        let asked = std::cell::RefCell::new(Vec::new());
        scanned
            .deny(None, |name, _| {
                asked.borrow_mut().push(name.to_owned());
                matches!(name, "x10" | "x1010" | "a").then_some(true)
            })
            .unwrap();
        assert!(!asked.borrow().iter().any(|name| name == "a"), "a repeats");
        assert_eq!(scanned.denied_count, 2);
        let mut seen = std::collections::HashSet::new();
        let allowed: Vec<&String> = names
            .iter()
            .filter(|name| seen.insert(*name) && !matches!(name.as_str(), "x10" | "x1010"))
            .collect();
        assert_eq!(scanned.answered(), allowed.len());
        let scanned = Arc::new(scanned);
        let decided = ListedDeletion {
            per_entry: vec![0; allowed.len()],
            outcomes: vec![(3, None)],
            ..Default::default()
        };
        let writer = DeletionResultsWriter::new(scanned, decided).unwrap();
        let mut expected: Vec<(String, i16)> =
            allowed.iter().map(|name| (name.to_string(), 3)).collect();
        expected.push(("x10".to_owned(), 29));
        expected.push(("x1010".to_owned(), 29));
        assert_eq!(written(&writer), expected);
    }

    #[test]
    fn a_short_request_is_left_to_the_crate_and_a_malformed_one_refused_whole() {
        let names = names();
        assert!(scan(&body(&names[..1_000]), 4).is_none());
        let whole = body(&names);
        assert!(scan(&whole.slice(..whole.len() - 3), 4).unwrap().is_err());
        let mut bad: Vec<&[u8]> = names.iter().map(|name| name.as_bytes()).collect();
        // Not UTF-8 is not malformed: read as Kafka reads it.
        bad[1_050] = b"\xff\xfe";
        assert!(scan(&body_of(bad.into_iter()), 4).unwrap().is_ok());
    }

    /// v6 entries: (name, id); 0 is the nil id.
    type Spelled = (Option<String>, u128);

    fn body_v6(entries: &[Spelled]) -> Bytes {
        let request = DeleteTopicsRequest::default()
            .with_topics(
                entries
                    .iter()
                    .map(|(name, id)| {
                        DeleteTopicState::default()
                            .with_name(
                                name.clone()
                                    .map(|name| TopicName(StrBytes::from_string(name))),
                            )
                            .with_topic_id(Uuid::from_u128(*id))
                    })
                    .collect(),
            )
            .with_timeout_ms(1000);
        let mut body = BytesMut::new();
        request.encode(&mut body, 6).unwrap();
        body.freeze()
    }

    /// Topics "t0".."t3" (ids 100..103, t3 of two partitions), "c" (id 200).
    fn image() -> MetadataImage {
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        for (name, id, partitions) in [
            ("t0", 100, 1),
            ("t1", 101, 1),
            ("t2", 102, 1),
            ("t3", 103, 2),
            ("c", 200, 1),
        ] {
            let topic_id = Uuid::from_u128(id);
            delta
                .replay(&MetadataRecord::Topic(TopicRecord {
                    name: name.into(),
                    topic_id,
                }))
                .unwrap();
            for partition_id in 0..partitions {
                delta
                    .replay(&MetadataRecord::Partition(PartitionRecord {
                        partition_id,
                        topic_id,
                        replicas: vec![1],
                        isr: vec![1],
                        removing_replicas: Vec::new(),
                        adding_replicas: Vec::new(),
                        leader: 1,
                        leader_recovery_state: 0,
                        leader_epoch: 0,
                        partition_epoch: 0,
                        directories: Vec::new(),
                    }))
                    .unwrap();
            }
        }
        delta.apply(Default::default())
    }

    /// 1,100 entries of every kind: names and ids alone that exist, are unknown or repeat
    /// (across chunks), entries with both or neither (repeated, and equal to each other), a
    /// name whose id is listed too.
    fn states() -> Vec<Spelled> {
        let name = |name: &str| Some(name.to_owned());
        (0..1_100)
            .map(|index| match index {
                3 => (name("t0"), 0),
                4 => (None, 101),
                5 | 6 | 1_050 => (name("t2"), 102),
                7 => (None, 200),
                8 => (name("c"), 0),
                9 => (None, 103),
                10 | 1_070 => (name("t2"), 0),
                15 | 1_080 => (None, 102),
                _ if index % 100 == 11 => (None, 0),
                _ if index % 100 == 12 => (name(""), 0),
                _ if index % 100 == 13 => (None, 999),
                _ if index % 100 == 14 => (name("gone"), 5),
                _ if index % 2 == 0 => (name(&format!("x{index}")), 0),
                _ => (None, 10_000 + index as u128),
            })
            .collect()
    }

    /// (name, id, code, message) of each answer a writer writes at v6.
    fn written_v6(
        writer: &DeletionResultsWriter,
    ) -> Vec<(Option<String>, Uuid, i16, Option<String>)> {
        let mut pieces = writer.pieces();
        let mut answers = Vec::new();
        while let Some(piece) = pieces().unwrap() {
            let mut piece = piece.freeze();
            while piece.has_remaining() {
                let result = DeletableTopicResult::decode(&mut piece, 6).unwrap();
                answers.push(rows_of(&result));
            }
        }
        answers
    }

    fn rows_of(result: &DeletableTopicResult) -> (Option<String>, Uuid, i16, Option<String>) {
        (
            result.name.as_ref().map(|n| n.to_string()),
            result.topic_id,
            result.error_code,
            result.error_message.as_ref().map(|m| m.to_string()),
        )
    }

    fn decide(
        image: &MetadataImage,
        topics: &dyn ListedTopics,
        enabled: bool,
    ) -> (Vec<MetadataRecord>, ListedDeletion) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0);
        let mut quota = gregor_actors::controller::logic::Unlimited;
        let mut ctx = MutationContext {
            rng: &mut rng,
            quota: &mut quota,
        };
        let result = delete_listed_topics(image, topics, 6, enabled, &mut ctx);
        (result.records, result.response)
    }

    #[test]
    fn v6_entries_are_decided_and_answered_as_the_decoded_request() {
        let image = image();
        let states = states();
        let body = body_v6(&states);
        let decoded_request =
            super::super::dedup_decode::decode(ApiKey::DeleteTopics, &mut body.clone(), 6)
                .unwrap()
                .unwrap();
        let RequestKind::DeleteTopics(decoded_request) = decoded_request else {
            panic!("not DeleteTopics");
        };
        for enabled in [true, false] {
            let mut rng = rand::rngs::StdRng::seed_from_u64(0);
            let mut quota = gregor_actors::controller::logic::Unlimited;
            let mut ctx = MutationContext {
                rng: &mut rng,
                quota: &mut quota,
            };
            let decoded = delete_topics(&image, &decoded_request, 6, enabled, &mut ctx);
            let scanned = Arc::new(scan(&body, 6).unwrap().unwrap());
            let (records, deletion) = decide(&image, scanned.as_ref(), enabled);
            assert_eq!(records, decoded.records, "enabled: {enabled}");
            let writer = DeletionResultsWriter::new(scanned, deletion).unwrap();
            let expected: Vec<_> = decoded.response.responses.iter().map(rows_of).collect();
            assert_eq!(writer.count(), expected.len());
            assert_eq!(written_v6(&writer), expected, "enabled: {enabled}");
        }
        // Deleted by name (t0, with its id) and by id (t1, t3, with their names); t2 is
        // listed twice by name and by id, c by its name and its id.
        let scanned = scan(&body, 6).unwrap().unwrap();
        let (records, _) = decide(&image, &scanned, true);
        let removed: Vec<u128> = records
            .iter()
            .filter_map(|record| match record {
                MetadataRecord::RemoveTopic(remove) => Some(remove.topic_id.as_u128()),
                _ => None,
            })
            .collect();
        assert_eq!(removed, vec![100, 101, 103]);
    }

    #[test]
    fn a_v6_refusal_answers_as_the_decoded_request_holds_it() {
        let states = states();
        let body = body_v6(&states);
        let scanned = Arc::new(scan(&body, 6).unwrap().unwrap());
        let RequestKind::DeleteTopics(decoded) =
            super::super::dedup_decode::decode(ApiKey::DeleteTopics, &mut body.clone(), 6)
                .unwrap()
                .unwrap()
        else {
            panic!("not DeleteTopics");
        };
        let expected: Vec<_> = gregor_actors::controller::failed_delete_topics_for(&decoded, 6)(
            kafka_protocol::error::ResponseError::NotController,
            "not the controller",
        )
        .responses
        .iter()
        .map(rows_of)
        .collect();
        assert_eq!(scanned.listed(), expected.len());
        let writer =
            DeletionResultsWriter::new(scanned, ListedDeletion::refused(41, "not the controller"))
                .unwrap();
        assert_eq!(written_v6(&writer), expected);
    }

    #[test]
    fn v6_denials_leave_out_names_and_ids_listed_once_and_answer_them_after() {
        let image = Arc::new(image());
        let states = states();
        let mut scanned = scan(&body_v6(&states), 6).unwrap().unwrap();
        let asked = std::cell::RefCell::new(Vec::new());
        // t1 (by id) may be described, t3 (by id) not; x20 (by name) is denied.
        scanned
            .deny(Some(&image), |name, by_id| {
                asked.borrow_mut().push((name.to_owned(), by_id));
                match name {
                    "t1" => Some(true),
                    "t3" | "x20" => Some(false),
                    _ => None,
                }
            })
            .unwrap();
        let asked = asked.into_inner();
        assert!(asked.contains(&("t0".to_owned(), false)));
        assert!(asked.contains(&("t1".to_owned(), true)));
        assert!(
            !asked
                .iter()
                .any(|(name, _)| matches!(name.as_str(), "t2" | "gone")),
            "repeated names and ids, and entries with both, are the controller's: {asked:?}"
        );
        assert_eq!(scanned.denied_count(), 3);
        let (records, deletion) = decide(&image, &scanned, true);
        assert_eq!(records.len(), 1, "t0 alone");
        let writer = DeletionResultsWriter::new(Arc::new(scanned.clone()), deletion).unwrap();
        let written = written_v6(&writer);
        let denied = &written[written.len() - 3..];
        assert_eq!(
            denied
                .iter()
                .map(|(name, id, code, _)| (name.clone(), id.as_u128(), *code))
                .collect::<Vec<_>>(),
            vec![
                (Some("t1".to_owned()), 101, 29),
                (None, 103, 29),
                (Some("x20".to_owned()), 0, 29),
            ]
        );
        // What a broker forwards: the same request without the denied entries.
        let mut frame = BytesMut::from(&b"head"[..]);
        let body = body_v6(&states);
        frame.extend_from_slice(&body);
        let frame = frame.freeze();
        let mut without = scanned.without_denied(&frame).unwrap().slice(4..);
        let forwarded = DeleteTopicsRequest::decode(&mut without, 6).unwrap();
        assert_eq!(forwarded.topics.len(), states.len() - 3);
        assert!(!forwarded.topics.iter().any(|t| t.topic_id.as_u128() == 101
            || t.topic_id.as_u128() == 103
            || t.name.as_ref().is_some_and(|n| n.as_str() == "x20")));
        // The forwarded request no longer lists t1's id: nothing conflicts with it.
        let forwarded_scan = scan(&without_body(&forwarded), 6).unwrap().unwrap();
        assert!(!forwarded_scan.lists_id(&Uuid::from_u128(101)));
        assert!(forwarded_scan.lists_id(&Uuid::from_u128(200)));
        assert!(!scanned.lists_id(&Uuid::from_u128(101)), "denied");
        assert!(scanned.lists_id(&Uuid::from_u128(200)));
    }

    fn without_body(request: &DeleteTopicsRequest) -> Bytes {
        let mut body = BytesMut::new();
        request.encode(&mut body, 6).unwrap();
        body.freeze()
    }

    #[test]
    fn a_malformed_v6_request_is_refused_whole() {
        let body = body_v6(&states());
        assert!(scan(&body.slice(..body.len() - 3), 6).unwrap().is_err());
        assert!(!is_long(&body, 6), "a body without its header");
    }

    #[test]
    fn a_name_that_is_not_utf8_is_read_as_kafka_reads_it() {
        let mut states = states();
        states[1_020] = (Some("\u{fffd}".to_owned()), 0);
        let mut bad = BytesMut::from(&body_v6(&states)[..]);
        let at = bad
            .windows(3)
            .position(|w| w == "\u{fffd}".as_bytes())
            .unwrap();
        bad[at] = 0xff;
        assert!(scan(&bad.freeze(), 6).unwrap().is_ok());
        let mut name = Bytes::from_static(b"a\xffb\xef\xbfc");
        assert_eq!(
            &read_utf8(&mut name, 6).unwrap()[..],
            "a\u{fffd}b\u{fffd}c".as_bytes()
        );
    }
}
