//! DeleteTopics v1-5 requests naming many topics, decided without decoding their list and
//! answered as the answer is written.
//!
//! A four-letter name is five bytes on the wire, but a decoded name, the deduplicating
//! decoder's map entry, the controller's entry, set entries, outcome and result, and the
//! encoded answer: a frame of distinct names cost 125 times its size. Here the names stay in
//! the frame, as CreateTopics' do (`topic_list_chunks.rs`): a scan finds each name's first
//! and second appearance and whether it repeats, the controller reads the names from the frame
//! (`ListedNames`) and keeps each distinct name's answer as an index into its few distinct
//! outcomes (`ListedDeletion`), and the answer is written name by name from the frame. The
//! deletion stays one decision: its records are one batch, refused whole past the record
//! limit. Without DELETE on the cluster, each name named once is checked from the frame
//! (DESCRIBE and DELETE, one more bit per name): the controller never reads a denied name, and
//! the answer adds TOPIC_AUTHORIZATION_FAILED for each after the controller's answers, as the
//! decoded request's handler does.
//!
//! The scan sorts the offsets of the names of three bytes or more (four bytes each, at most
//! the frame's size); shorter names, which may be a byte each on the wire, are counted in a
//! table of their 65,793 possible values instead.

use std::sync::Arc;

use anyhow::{bail, Context};
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, RequestKind, TopicName};
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::io::AsyncWrite;

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::controller::logic::{ListedDeletion, ListedNames};
use gregor_actors::handlers::{self, ApiResponse};

use super::dedup_decode::{array_length, need};
use super::metadata_chunks::{bit, set_bit};
use super::repeated::{skip_string, skip_tagged_fields};
use super::topic_list_chunks::{first_appearances, name_at, REPEATED};

/// Names answered per piece of the answer; a request naming no more is decoded whole.
pub const CHUNK: usize = 1024;

/// Names of at most this many bytes are counted in [`ShortNames`].
const SHORT: usize = 2;

/// The first flexible version.
const FLEXIBLE_FROM: i16 = 4;

/// A DeleteTopics request whose names stay in the frame.
#[derive(Clone)]
pub struct ChunkedDeleteTopics {
    /// The list from its first name on.
    names: Bytes,
    version: i16,
    count: usize,
    /// One bit per listed name: set on its first appearance.
    first: Vec<u64>,
    /// One bit per listed name: set on a first appearance whose name appears again.
    repeated: Vec<u64>,
    /// One bit per listed name: set on its second appearance.
    second: Vec<u64>,
    /// One bit per listed name: set on a name named once that the principal may not delete;
    /// empty when none is.
    denied: Vec<u64>,
    /// How many names are denied.
    denied_count: usize,
    /// The bytes of the list's length before `names`, as the client wrote it.
    length_len: usize,
    /// The body after the list: `TimeoutMs` and tagged fields.
    tail: Bytes,
}

/// Reads `body` (a DeleteTopics request body) when it names more than [`CHUNK`] topics by
/// name (v1-5); `None` for other requests, decoded whole. The request is read to its end
/// first, so a malformed one is refused whole, as the crate's decoder refuses it.
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<ChunkedDeleteTopics>> {
    if !(1..=5).contains(&version) {
        return None;
    }
    let mut rest = body.clone();
    let count = array_length(&mut rest, version >= FLEXIBLE_FROM).ok()?;
    if count <= CHUNK as i64 {
        return None;
    }
    let length_len = body.len() - rest.len();
    Some(scan_names(rest, length_len, count as usize, version))
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

fn scan_names(
    names: Bytes,
    length_len: usize,
    count: usize,
    version: i16,
) -> anyhow::Result<ChunkedDeleteTopics> {
    let flexible = version >= FLEXIBLE_FROM;
    let mut short = ShortNames::new();
    let mut first = vec![0u64; count.div_ceil(64)];
    let mut repeated = vec![0u64; count.div_ceil(64)];
    let mut second = vec![0u64; count.div_ceil(64)];
    // The longer names' offsets, four bytes each, each name at least four bytes on the wire.
    let mut offsets: Vec<u32> = Vec::with_capacity(count.min(names.len() / (SHORT + 2)));
    let mut rest = names.clone();
    for index in 0..count {
        let start = u32::try_from(names.len() - rest.len()).context("a frame over 4 GiB")?;
        let name = read_name(&mut rest, flexible)?;
        if name.len() <= SHORT {
            short.add(&name, index as u32);
        } else {
            offsets.push(start);
        }
    }
    let list_len = names.len() - rest.len();
    need(&rest, 4)?;
    rest.advance(4);
    skip_tagged_fields(&mut rest, flexible)?;
    for [at, again] in std::mem::take(&mut short.seen) {
        if at != u32::MAX {
            set_bit(&mut first, at as usize);
            if again != u32::MAX {
                set_bit(&mut repeated, at as usize);
                set_bit(&mut second, again as usize);
            }
        }
    }
    // Each name's first appearance (marked when it repeats) and second, by offset; both are
    // turned into indexes by a walk in frame order.
    let seconds = first_appearances(&mut offsets, |offset| {
        name_at(&names, offset as usize, flexible)
    });
    let firsts = offsets;
    let mut next_first = firsts.iter().peekable();
    let mut next_second = seconds.iter().peekable();
    let mut walk = names.clone();
    for index in 0..count {
        let at = (names.len() - walk.len()) as u32;
        if let Some(offset) = next_first.next_if(|offset| **offset & !REPEATED == at) {
            set_bit(&mut first, index);
            if offset & REPEATED != 0 {
                set_bit(&mut repeated, index);
            }
        }
        if next_second.next_if(|offset| **offset == at).is_some() {
            set_bit(&mut second, index);
        }
        skip_string(&mut walk, flexible)?;
    }
    Ok(ChunkedDeleteTopics {
        names: names.slice(..list_len),
        version,
        count,
        first,
        repeated,
        second,
        denied: Vec::new(),
        denied_count: 0,
        length_len,
        tail: names.slice(list_len..),
    })
}

/// Reads one name, which must be a UTF-8 string (not null), as the crate's decoder requires.
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
    let length = length as usize;
    need(buf, length)?;
    let name = buf.split_to(length);
    std::str::from_utf8(&name).context("a topic name that is not UTF-8")?;
    Ok(name)
}

impl ChunkedDeleteTopics {
    /// Marks the names named once that `may_delete` refuses, asking once per name in request
    /// order (a repeated name is the controller's INVALID_REQUEST, as on the decoded path).
    fn deny(&mut self, may_delete: impl Fn(&str) -> bool) -> anyhow::Result<()> {
        let mut denied = vec![0u64; self.count.div_ceil(64)];
        let mut count = 0;
        self.each_name(|index, name| {
            let named_once = bit(&self.first, index) && !bit(&self.repeated, index);
            if named_once && !may_delete(std::str::from_utf8(name)?) {
                set_bit(&mut denied, index);
                count += 1;
            }
            Ok(true)
        })?;
        if count > 0 {
            self.denied = denied;
        }
        self.denied_count = count;
        Ok(())
    }

    /// Marks the names the request's principal may not delete, as the node deciding the
    /// request does (a broker checks them before it forwards the rest).
    pub(crate) fn authorize(
        &mut self,
        ctx: &HandlerContext,
        info: &RequestInfo,
    ) -> anyhow::Result<()> {
        let access = handlers::DeleteTopicsAccess::new(ctx, info);
        if access.checks_each_topic() {
            self.deny(|name| access.may_delete(name))?;
        }
        Ok(())
    }

    /// How many names are denied.
    pub(crate) fn denied_count(&self) -> usize {
        self.denied_count
    }

    /// `frame`, the request frame (header included, no size prefix) these names were read
    /// from, without the denied names: what a broker forwards to the controller.
    pub(crate) fn without_denied(&self, frame: &Bytes) -> anyhow::Result<Bytes> {
        let flexible = self.version >= FLEXIBLE_FROM;
        let head = frame
            .len()
            .checked_sub(self.tail.len() + self.names.len() + self.length_len)
            .and_then(|end| frame.get(..end))
            .context("a DeleteTopics frame without its list length")?;
        let mut out = BytesMut::with_capacity(frame.len());
        out.extend_from_slice(head);
        super::repeated::put_array_length(&mut out, self.count - self.denied_count, flexible)?;
        let mut walk = self.names.clone();
        for index in 0..self.count {
            let start = self.names.len() - walk.len();
            skip_string(&mut walk, flexible)?;
            if !bit(&self.denied, index) {
                out.extend_from_slice(&self.names[start..self.names.len() - walk.len()]);
            }
        }
        out.extend_from_slice(&self.tail);
        Ok(out.freeze())
    }

    /// The request as what looks at it before the handler sees it, without its names.
    pub(crate) fn shell(&self) -> RequestKind {
        RequestKind::DeleteTopics(DeleteTopicsRequest::default())
    }

    /// Calls `visit` with each listed name, its index and the name's bytes.
    fn each_name(
        &self,
        mut visit: impl FnMut(usize, &[u8]) -> anyhow::Result<bool>,
    ) -> anyhow::Result<()> {
        let flexible = self.version >= FLEXIBLE_FROM;
        let mut rest = self.names.clone();
        for index in 0..self.count {
            let name = read_name(&mut rest, flexible)?;
            if !visit(index, &name)? {
                break;
            }
        }
        Ok(())
    }
}

fn ones(bits: &[u64]) -> usize {
    bits.iter().map(|word| word.count_ones() as usize).sum()
}

/// The denied names are left out: each is named once, so it has no second appearance.
impl ListedNames for ChunkedDeleteTopics {
    fn distinct(&self) -> usize {
        ones(&self.first) - self.denied_count
    }

    fn listed(&self) -> usize {
        self.distinct() + ones(&self.second)
    }

    fn each_first(&self, visit: &mut dyn FnMut(&str, bool) -> bool) -> Result<(), String> {
        self.each_name(|index, name| {
            if !bit(&self.first, index) || bit(&self.denied, index) {
                return Ok(true);
            }
            let name = std::str::from_utf8(name)?;
            Ok(visit(name, bit(&self.repeated, index)))
        })
        .map_err(|e| e.to_string())
    }
}

/// Deletes the named topics with the controller, the names the principal may not delete
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
    /// Whether only the denied names are answered (after a forwarded answer of the others).
    only_denied: bool,
    /// How many topics the answer lists.
    count: usize,
    /// The encoded size of every topic's answer.
    size: usize,
}

impl DeletionResultsWriter {
    fn new(request: Arc<ChunkedDeleteTopics>, deletion: ListedDeletion) -> anyhow::Result<Self> {
        let count = request.denied_count
            + match deletion.refused {
                Some(_) => request.listed(),
                None => request.distinct(),
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

    /// The answers of the denied names alone, which a broker adds after the controller's
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

    /// The topics' answers in frame order, [`CHUNK`] names at a time: a refusal answers each
    /// name's first two copies, as the decoded request holds them; a decision each name once;
    /// then a second pass answers the denied names.
    fn pieces(&self) -> impl FnMut() -> anyhow::Result<Option<BytesMut>> + '_ {
        let request = &self.request;
        let deletion = &self.deletion;
        let flexible = request.version >= FLEXIBLE_FROM;
        let mut rest = request.names.clone();
        let mut index = 0;
        let mut denied_pass = self.only_denied;
        let mut decided = 0;
        let mut answered = 0;
        move || {
            if index >= request.count && !denied_pass && request.denied_count > 0 {
                denied_pass = true;
                index = 0;
                rest = request.names.clone();
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
                let first = bit(&request.first, index);
                let denied = bit(&request.denied, index);
                let answers = if denied_pass {
                    denied
                } else {
                    (first && !denied)
                        || (deletion.refused.is_some() && bit(&request.second, index))
                };
                index += 1;
                if !answers {
                    skip_string(&mut rest, flexible)?;
                    continue;
                }
                let name = TopicName(StrBytes::from_utf8(read_name(&mut rest, flexible)?)?);
                let result = if denied_pass {
                    handlers::deletion_denied(name)
                } else {
                    let (code, message) = match &deletion.refused {
                        Some((code, message)) => (*code, Some(message.as_str())),
                        None => {
                            let (code, message) = deletion
                                .outcome(decided)
                                .context("more topics than answers")?;
                            decided += 1;
                            (*code, message.as_deref())
                        }
                    };
                    DeletableTopicResult::default()
                        .with_name(Some(name))
                        .with_error_code(code)
                        .with_error_message(message.map(|m| StrBytes::from_string(m.to_owned())))
                };
                result.encode(&mut piece, request.version)?;
                answered += 1;
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
    use kafka_protocol::protocol::Decodable;

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
        assert_eq!(scanned.distinct(), once.len());
        let mut visited = Vec::new();
        scanned
            .each_first(&mut |name, repeated| {
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
            per_name: vec![0; once.len()],
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
            .deny(|name| {
                asked.borrow_mut().push(name.to_owned());
                !matches!(name, "x10" | "x1010" | "a")
            })
            .unwrap();
        assert!(!asked.borrow().iter().any(|name| name == "a"), "a repeats");
        assert_eq!(scanned.denied_count, 2);
        let mut seen = std::collections::HashSet::new();
        let allowed: Vec<&String> = names
            .iter()
            .filter(|name| seen.insert(*name) && !matches!(name.as_str(), "x10" | "x1010"))
            .collect();
        assert_eq!(scanned.distinct(), allowed.len());
        let scanned = Arc::new(scanned);
        let decided = ListedDeletion {
            per_name: vec![0; allowed.len()],
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
        bad[1_050] = b"\xff\xfe";
        assert!(scan(&body_of(bad.into_iter()), 4).unwrap().is_err());
    }
}
