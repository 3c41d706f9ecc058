//! AlterClientQuotas requests listing many entries, decided without decoding their list and
//! answered as the answer is written.
//!
//! An entry naming one client id is a dozen bytes on the wire, but a decoded `EntryData`, the
//! controller's map of entities, its result and the encoded answer cost 70 times its size.
//! Here the entries stay in the frame, as AlterUserScramCredentials' alterations do
//! (`scram_chunks.rs`): a scan sorts the entries' offsets by entity (Kafka's map of type to
//! name: each type once, its last name) for each entity's first entry and whether the entity
//! comes again (two bits per entry), the controller reads the first entries from the frame one
//! at a time (`ListedElements<EntryData>`) and keeps each entity's answer as an index into its
//! few outcomes, and the answer, one result per distinct entity in order of first appearance
//! (every entry as sent when the request is refused whole), is written from the frame and the
//! outcomes.

use std::cmp::Ordering;
use std::sync::Arc;

use anyhow::{bail, Context};
use bytes::{Bytes, BytesMut};
use hashbrown::HashMap;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::controller::logic::client_quotas::{
    answer_entry, refused_entry, type_rank, ListedQuotaAlteration,
};
use gregor_actors::controller::logic::ListedElements;
use gregor_actors::handlers::{self, ApiResponse};

use super::dedup_decode::{array_length, request_array_length};
use super::metadata_chunks::{bit, set_bit};
use super::repeated::{
    skip_quota_entry, skip_tagged_fields, uvarint_at, PieceSource, PiecesWriter,
};
use super::topic_list_chunks::{first_appearances_by, REPEATED};

/// Entities answered per piece of the answer; a request with no more entries is decoded
/// whole.
pub const CHUNK: usize = 1024;

/// Entities with more parts than this have their canonical parts found once, by the scan;
/// smaller ones are put in order on the stack each time they are compared.
const INLINE_PARTS: usize = 4;

/// An AlterClientQuotas request whose entries stay in the frame.
#[derive(Clone)]
pub struct ChunkedQuotaAlteration {
    /// The request body.
    body: Bytes,
    version: i16,
    /// Where the entries start in `body` (after their list's length), and how many.
    entries_at: usize,
    entries: usize,
    validate_only: bool,
    /// One bit per entry: set on its entity's first entry.
    first: Vec<u64>,
    /// One bit per first entry: set when the entity comes again.
    repeated: Vec<u64>,
}

/// Reads `body` (an AlterClientQuotas request body) when it lists more than [`CHUNK`]
/// entries; `None` for other requests, decoded whole. The request is read to its end first,
/// so a malformed one is refused whole, as the crate's decoder refuses it.
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<ChunkedQuotaAlteration>> {
    if !(0..=1).contains(&version) {
        return None;
    }
    let mut rest = body.clone();
    let entries = usize::try_from(request_array_length(&mut rest, version >= 1).ok()?).ok()?;
    if entries <= CHUNK {
        return None;
    }
    Some(scan_entries(
        body,
        body.len() - rest.len(),
        entries,
        version,
    ))
}

/// One part of an entity as the frame holds it: its type's rank, its type and its name.
type Part<'a> = (u8, &'a [u8], Option<&'a [u8]>);

/// A string or nullable string at `at` (moved past it), leniently (the scan read it before).
fn string_at<'a>(bytes: &'a [u8], at: &mut usize, flexible: bool) -> Option<&'a [u8]> {
    let length = if flexible {
        uvarint_at(bytes, at) as i64 - 1
    } else {
        let length = bytes
            .get(*at..*at + 2)
            .map_or(-1, |b| i64::from(i16::from_be_bytes([b[0], b[1]])));
        *at += 2;
        length
    };
    let length = usize::try_from(length).ok()?;
    let text = bytes.get(*at..*at + length).unwrap_or_default();
    *at += length;
    Some(text)
}

/// The entity part at `at` in `body` (moved past it).
fn part_at<'a>(body: &'a [u8], at: &mut usize, flexible: bool) -> Part<'a> {
    let entity_type = string_at(body, at, flexible).unwrap_or_default();
    let name = string_at(body, at, flexible);
    if flexible {
        for _ in 0..uvarint_at(body, at) {
            uvarint_at(body, at);
            *at += uvarint_at(body, at) as usize;
        }
    }
    (type_rank(entity_type), entity_type, name)
}

/// How many parts the entity of the entry at `at` has, and where the first starts.
fn parts_at(body: &[u8], at: usize, flexible: bool) -> (usize, usize) {
    let mut at = at;
    let count = if flexible {
        uvarint_at(body, &mut at).saturating_sub(1) as usize
    } else {
        let count = body.get(at..at + 4).map_or(0, |b| {
            i32::from_be_bytes([b[0], b[1], b[2], b[3]]).max(0) as usize
        });
        at += 4;
        count
    };
    (count, at)
}

/// Orders `parts` as Kafka's map of them (by rank, then type) and keeps each type's last part
/// at the front, returning how many are kept: a stable sort keeps a type's parts in request
/// order.
fn canonical<'a, P>(parts: &mut [P], key: impl Fn(&P) -> (u8, &'a [u8])) -> usize {
    parts.sort_by(|a, b| key(a).cmp(&key(b)));
    let mut kept = 0;
    for i in 0..parts.len() {
        let last_of_its_type = parts
            .get(i + 1)
            .is_none_or(|next| key(next) != key(&parts[i]));
        if last_of_its_type {
            parts.swap(kept, i);
            kept += 1;
        }
    }
    kept
}

/// The entities of the entries with more than [`INLINE_PARTS`] parts, put in order once: per
/// entry (by offset) where its canonical parts' offsets start in `parts` and how many.
#[derive(Default)]
struct LargeEntities {
    entries: Vec<(u32, u32, u32)>,
    parts: Vec<u32>,
}

impl LargeEntities {
    fn parts_of(&self, entry: u32) -> &[u32] {
        match self.entries.binary_search_by_key(&entry, |(at, _, _)| *at) {
            Ok(found) => {
                let (_, start, count) = self.entries[found];
                self.parts
                    .get(start as usize..(start + count) as usize)
                    .unwrap_or_default()
            }
            Err(_) => &[],
        }
    }
}

/// Compares the entities of the entries at `a` and `b` as Kafka's maps of them compare for
/// equality (a total order whose ties are equal maps).
fn compare_entities(
    body: &[u8],
    large: &LargeEntities,
    flexible: bool,
    a: u32,
    b: u32,
) -> Ordering {
    let mut a_parts = [(0, &[][..], None); INLINE_PARTS];
    let mut b_parts = [(0, &[][..], None); INLINE_PARTS];
    Iterator::cmp(
        entity_parts(body, large, flexible, a, &mut a_parts),
        entity_parts(body, large, flexible, b, &mut b_parts),
    )
}

/// The canonical parts of the entity of the entry at `entry`: put in order in `inline` for a
/// small entity, read where the scan found them for a large one.
fn entity_parts<'a, 'b>(
    body: &'a [u8],
    large: &'b LargeEntities,
    flexible: bool,
    entry: u32,
    inline: &'b mut [Part<'a>; INLINE_PARTS],
) -> EntityParts<'a, 'b> {
    let (count, mut at) = parts_at(body, entry as usize, flexible);
    if count > INLINE_PARTS {
        return EntityParts::Large {
            body,
            flexible,
            offsets: large.parts_of(entry).iter(),
        };
    }
    for part in inline.iter_mut().take(count) {
        *part = part_at(body, &mut at, flexible);
    }
    let kept = canonical(&mut inline[..count], |(rank, entity_type, _)| {
        (*rank, *entity_type)
    });
    EntityParts::Inline(inline[..kept].iter())
}

/// An entity's canonical parts, in order.
enum EntityParts<'a, 'b> {
    Inline(std::slice::Iter<'b, Part<'a>>),
    Large {
        body: &'a [u8],
        flexible: bool,
        offsets: std::slice::Iter<'b, u32>,
    },
}

impl<'a> Iterator for EntityParts<'a, '_> {
    type Item = Part<'a>;

    fn next(&mut self) -> Option<Part<'a>> {
        match self {
            EntityParts::Inline(parts) => parts.next().copied(),
            EntityParts::Large {
                body,
                flexible,
                offsets,
            } => {
                let mut at = *offsets.next()? as usize;
                Some(part_at(body, &mut at, *flexible))
            }
        }
    }
}

/// The offset of `rest`'s first byte in `body`, below [`REPEATED`].
fn offset_in(body: &Bytes, rest: &Bytes) -> anyhow::Result<u32> {
    u32::try_from(body.len() - rest.len())
        .ok()
        .filter(|offset| *offset < REPEATED)
        .context("an AlterClientQuotas frame over 2 GiB")
}

/// Reads one entry as the crate's decoder would (its parts and ops one at a time), noting
/// a large entity's canonical parts in `large`.
fn scan_entry(
    body: &Bytes,
    rest: &mut Bytes,
    version: i16,
    large: &mut LargeEntities,
    scratch: &mut Vec<u32>,
) -> anyhow::Result<()> {
    let flexible = version >= 1;
    let entry = offset_in(body, rest)?;
    let parts = usize::try_from(array_length(rest, flexible)?)
        .context("an AlterClientQuotas entity must not be null")?;
    scratch.clear();
    for _ in 0..parts {
        if parts > INLINE_PARTS {
            scratch.push(offset_in(body, rest)?);
        }
        EntityData::decode(rest, version)?;
    }
    if parts > INLINE_PARTS {
        // Four bytes per part, its type read from the frame to compare.
        let type_of = |at: &u32| {
            let (rank, entity_type, _) = part_at(body, &mut (*at as usize), flexible);
            (rank, entity_type)
        };
        let kept = canonical(scratch, type_of);
        let start = u32::try_from(large.parts.len()).context("too many entity parts")?;
        large.parts.extend_from_slice(&scratch[..kept]);
        large.entries.push((entry, start, kept as u32));
    }
    let ops = usize::try_from(array_length(rest, flexible)?)
        .context("AlterClientQuotas ops must not be null")?;
    for _ in 0..ops {
        OpData::decode(rest, version)?;
    }
    skip_tagged_fields(rest, flexible)
}

fn scan_entries(
    body: &Bytes,
    entries_at: usize,
    entries: usize,
    version: i16,
) -> anyhow::Result<ChunkedQuotaAlteration> {
    let flexible = version >= 1;
    let mut rest = body.slice(entries_at..);
    // Each entry's offset, four bytes where a decoded one costs fifty times that. Sized once
    // (an entry is at least three bytes): a growing vector is copied, leaving holes.
    let mut offsets: Vec<u32> = Vec::with_capacity(entries.min(body.len() / 3));
    let mut large = LargeEntities::default();
    let mut scratch = Vec::new();
    // An entry the same bytes as the one before repeats it without an offset of its own
    // (a frame of one entry over and over costs bits, not four bytes per entry): per entry,
    // set when such copies follow it.
    let mut copied = vec![0u64; entries.div_ceil(64)];
    let mut previous = Bytes::new();
    let mut head = 0;
    for index in 0..entries {
        let mut entry = rest.clone();
        let at = offset_in(body, &rest)?;
        scan_entry(body, &mut rest, version, &mut large, &mut scratch)?;
        entry.truncate(entry.len() - rest.len());
        if index > 0 && entry == previous {
            set_bit(&mut copied, head);
            if let Some((_, start, _)) = large.entries.pop_if(|(entry, ..)| *entry == at) {
                large.parts.truncate(start as usize);
            }
            continue;
        }
        offsets.push(at);
        head = index;
        previous = entry;
    }
    drop(scratch);
    let validate_only = match rest.first() {
        Some(byte) => *byte != 0,
        None => bail!("truncated: an AlterClientQuotas request without validate_only"),
    };
    let mut tail = rest.slice(1..);
    skip_tagged_fields(&mut tail, flexible)?;
    first_appearances_by(&mut offsets, |a, b| {
        compare_entities(body, &large, flexible, a, b)
    });
    drop(large);
    let mut request = ChunkedQuotaAlteration {
        body: body.clone(),
        version,
        entries_at,
        entries,
        validate_only,
        first: Vec::new(),
        repeated: Vec::new(),
    };
    let mut first = vec![0u64; entries.div_ceil(64)];
    let mut repeated = vec![0u64; entries.div_ceil(64)];
    let mut next = offsets.iter().peekable();
    let mut cursor = request.cursor();
    while let Some((index, at, _)) = cursor.next_entry()? {
        if let Some(offset) = next.next_if(|offset| (**offset & !REPEATED) as usize == at) {
            set_bit(&mut first, index);
            if offset & REPEATED != 0 || bit(&copied, index) {
                set_bit(&mut repeated, index);
            }
        }
    }
    request.first = first;
    request.repeated = repeated;
    Ok(request)
}

/// The entries of a request in order: each one's index, offset and bytes.
struct Cursor<'a> {
    request: &'a ChunkedQuotaAlteration,
    rest: Bytes,
    index: usize,
}

impl Cursor<'_> {
    fn next_entry(&mut self) -> anyhow::Result<Option<(usize, usize, Bytes)>> {
        if self.index == self.request.entries {
            return Ok(None);
        }
        let at = self.request.body.len() - self.rest.len();
        let mut entry = self.rest.clone();
        skip_quota_entry(&mut self.rest, self.request.version >= 1)?;
        entry.truncate(entry.len() - self.rest.len());
        self.index += 1;
        Ok(Some((self.index - 1, at, entry)))
    }
}

/// Reads an entry whole but for its ops' repeats: each key's first two copies are kept (a
/// key named twice makes the entity a duplicate, whatever else the copies say).
fn decode_entry(bytes: &mut Bytes, version: i16) -> anyhow::Result<EntryData> {
    let flexible = version >= 1;
    let parts = usize::try_from(array_length(bytes, flexible)?)
        .context("an AlterClientQuotas entity must not be null")?;
    let mut entity = Vec::with_capacity(parts.min(bytes.len()));
    for _ in 0..parts {
        entity.push(EntityData::decode(bytes, version)?);
    }
    let count = usize::try_from(array_length(bytes, flexible)?)
        .context("AlterClientQuotas ops must not be null")?;
    let mut ops = Vec::new();
    let mut copies: HashMap<StrBytes, u8> = HashMap::new();
    for _ in 0..count {
        let op = OpData::decode(bytes, version)?;
        let seen = copies.entry(op.key.clone()).or_insert(0);
        if *seen < 2 {
            *seen += 1;
            ops.push(op);
        }
    }
    skip_tagged_fields(bytes, flexible)?;
    Ok(EntryData::default().with_entity(entity).with_ops(ops))
}

impl ChunkedQuotaAlteration {
    fn cursor(&self) -> Cursor<'_> {
        Cursor {
            request: self,
            rest: self.body.slice(self.entries_at..),
            index: 0,
        }
    }
}

impl ListedElements<EntryData> for ChunkedQuotaAlteration {
    /// A refusal answers every entry, as Kafka's error response does.
    fn listed(&self) -> usize {
        self.entries
    }

    fn distinct(&self) -> usize {
        self.first
            .iter()
            .map(|word| word.count_ones() as usize)
            .sum()
    }

    fn denied(&self) -> usize {
        0
    }

    fn each_first(&self, visit: &mut dyn FnMut(&EntryData, bool) -> bool) -> Result<(), String> {
        let mut cursor = self.cursor();
        while let Some((index, _, mut bytes)) = cursor.next_entry().map_err(|e| e.to_string())? {
            if !bit(&self.first, index) {
                continue;
            }
            let entry = decode_entry(&mut bytes, self.version).map_err(|e| e.to_string())?;
            if !visit(&entry, bit(&self.repeated, index)) {
                break;
            }
        }
        Ok(())
    }
}

/// The answer's entries, one per distinct entity in order of first appearance (every entry
/// when refused whole), from the frame and the kept outcomes.
pub struct QuotaResults {
    request: Arc<ChunkedQuotaAlteration>,
    answers: ListedQuotaAlteration,
}

/// Writes the entities' results, [`CHUNK`] at a time.
pub type QuotaResultsWriter = PiecesWriter<QuotaResults>;

impl PieceSource for QuotaResults {
    const API: &'static str = "AlterClientQuotas";

    fn pieces(&self) -> impl FnMut() -> anyhow::Result<Option<BytesMut>> + Send + '_ {
        let request = &self.request;
        let mut cursor = request.cursor();
        let mut answered = 0;
        move || {
            let mut piece = BytesMut::new();
            let mut in_piece = 0;
            while in_piece < CHUNK {
                let Some((index, _, mut bytes)) = cursor.next_entry()? else {
                    break;
                };
                let refused = self.answers.refused.as_ref();
                if refused.is_none() && !bit(&request.first, index) {
                    continue;
                }
                let entry = decode_entry(&mut bytes, request.version)?;
                let result = match refused {
                    Some((code, message)) => refused_entry(&entry, *code, message),
                    None => {
                        let outcome = self
                            .answers
                            .outcome(answered)
                            .context("more entities than answers")?;
                        answer_entry(&entry, outcome)
                    }
                };
                result.encode(&mut piece, request.version)?;
                answered += 1;
                in_piece += 1;
            }
            Ok((in_piece > 0).then_some(piece))
        }
    }
}

/// The writer of `request`'s answer, the controller's `answers`.
fn results_writer(
    request: Arc<ChunkedQuotaAlteration>,
    answers: ListedQuotaAlteration,
) -> anyhow::Result<QuotaResultsWriter> {
    let count = match answers.refused {
        Some(_) => request.entries,
        None => request.distinct(),
    };
    if answers.refused.is_none() && answers.answered() != count {
        bail!("{} entities answered of {count}", answers.answered());
    }
    PiecesWriter::new(QuotaResults { request, answers }, count)
}

/// Alters the quotas with the controller reading the entries from the frame: the answer's
/// body lists no entries, and the [`QuotaResultsWriter`] writes them.
pub(crate) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ChunkedQuotaAlteration,
) -> anyhow::Result<(ApiResponse, QuotaResultsWriter)> {
    let request = Arc::new(request);
    let validate_only = request.validate_only;
    let (answer, answers) =
        handlers::alter_listed_client_quotas(ctx, info, request.clone(), validate_only).await;
    tracing::debug!(
        entries = request.entries,
        entities = request.distinct(),
        "an AlterClientQuotas request decided from its frame"
    );
    Ok((answer, results_writer(request, answers)?))
}

#[cfg(test)]
mod tests {
    use gregor_actors::controller::logic::client_quotas::{
        alter_client_quotas, alter_listed_client_quotas,
    };
    use gregor_publishers::ClientQuotasImage;
    use kafka_protocol::messages::alter_client_quotas_response::EntryData as ResultEntry;
    use kafka_protocol::messages::AlterClientQuotasRequest;

    use super::*;

    fn entry(entity: &[(&str, Option<&str>)], ops: &[(&str, f64, bool)]) -> EntryData {
        EntryData::default()
            .with_entity(
                entity
                    .iter()
                    .map(|(t, n)| {
                        EntityData::default()
                            .with_entity_type(StrBytes::from_string((*t).to_owned()))
                            .with_entity_name(n.map(|n| StrBytes::from_string(n.to_owned())))
                    })
                    .collect(),
            )
            .with_ops(
                ops.iter()
                    .map(|(key, value, remove)| {
                        OpData::default()
                            .with_key(StrBytes::from_string((*key).to_owned()))
                            .with_value(*value)
                            .with_remove(*remove)
                    })
                    .collect(),
            )
    }

    fn body(request: &AlterClientQuotasRequest, version: i16) -> anyhow::Result<Bytes> {
        let mut body = BytesMut::new();
        request.encode(&mut body, version)?;
        Ok(body.freeze())
    }

    /// 1,200 entries: distinct client ids, an entity sent in two orders, a type named twice
    /// (its last name counts), entities of more than four parts equal to small ones, invalid
    /// entities and values of each kind, a key named three times, removals.
    fn mixed() -> Vec<EntryData> {
        let rate = [("producer_byte_rate", 1024.0, false)];
        let mut entries: Vec<EntryData> = (0..1150)
            .map(|i| entry(&[("client-id", Some(format!("c{i}").as_str()))], &rate))
            .collect();
        let more = [
            entry(&[("user", Some("a")), ("client-id", Some("b"))], &rate),
            entry(&[("client-id", Some("b")), ("user", Some("a"))], &rate),
            entry(&[("user", Some("x")), ("user", Some("y"))], &rate),
            entry(
                &[("user", Some("y"))],
                &[("request_percentage", 5.0, false)],
            ),
            entry(
                &[
                    ("user", Some("q")),
                    ("user", Some("z")),
                    ("client-id", Some("k")),
                    ("user", Some("q")),
                    ("user", Some("r")),
                ],
                &rate,
            ),
            entry(&[("client-id", Some("k")), ("user", Some("r"))], &rate),
            entry(
                &[
                    ("ip", Some("1.2.3.4")),
                    ("group", Some("g")),
                    ("user", None),
                    ("client-id", None),
                    ("role", Some("r")),
                    ("group", Some("h")),
                ],
                &rate,
            ),
            entry(&[("group", Some("g"))], &rate),
            entry(&[], &rate),
            entry(&[("client-id", Some(""))], &rate),
            entry(&[("ip", Some("1.2.3.4")), ("user", Some("a"))], &rate),
            entry(
                &[("ip", Some("not an ip"))],
                &[("connection_creation_rate", 1.0, false)],
            ),
            entry(&[("ip", Some("::1"))], &rate),
            entry(&[("ip", None)], &[("connection_creation_rate", 3e9, false)]),
            entry(&[("user", None)], &[("producer_byte_rate", 1.5, false)]),
            entry(&[("user", None)], &[("unknown", 1.0, false)]),
            entry(
                &[("user", Some("twice"))],
                &[
                    ("request_percentage", 1.0, false),
                    ("request_percentage", 2.0, false),
                    ("request_percentage", 3.0, false),
                ],
            ),
            entry(
                &[("client-id", Some("gone"))],
                &[("producer_byte_rate", 0.0, true), ("whatever", 0.0, true)],
            ),
            entry(&[("client-id", Some("c7"))], &rate),
            entry(
                &[("client-id", None)],
                &[("consumer_byte_rate", 10.0, false)],
            ),
        ];
        for (i, extra) in more.into_iter().enumerate() {
            entries.insert(i * 50 + 3, extra);
        }
        // Copies right after their first entry: a client id, a large entity (twice), an
        // invalid entity.
        for at in [203, 203, 303, 1000] {
            entries.insert(at, entries[at].clone());
        }
        entries
    }

    fn quotas() -> ClientQuotasImage {
        use gregor_publishers::records::{ClientQuotaRecord, EntityData, MetadataRecord};
        use gregor_publishers::{MetadataDelta, MetadataImage, Provenance};
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        let record = MetadataRecord::ClientQuota(ClientQuotaRecord {
            entity: vec![EntityData {
                entity_type: "client-id".to_owned(),
                entity_name: Some("gone".to_owned()),
            }],
            key: "producer_byte_rate".to_owned(),
            value: 5.0,
            remove: false,
        });
        delta.replay(&record).unwrap_or_else(|e| panic!("{e}"));
        (*delta.apply(Provenance::default()).client_quotas).clone()
    }

    #[test]
    fn entities_are_read_from_the_frame_and_answered_as_decoded() -> anyhow::Result<()> {
        let quotas = quotas();
        for version in [0, 1] {
            for validate_only in [false, true] {
                let request = AlterClientQuotasRequest::default()
                    .with_entries(mixed())
                    .with_validate_only(validate_only);
                let decoded = alter_client_quotas(&quotas, &request);
                let body = body(&request, version)?;
                assert!(scan(&body, 2).is_none(), "no such version");
                let chunked = scan(&body, version).context("chunked")??;
                assert_eq!(chunked.validate_only, validate_only);
                assert_eq!(chunked.distinct(), decoded.response.entries.len());
                let listed = alter_listed_client_quotas(&quotas, &chunked, validate_only);
                assert_eq!(listed.records, decoded.records, "v{version}");
                let writer = results_writer(Arc::new(chunked), listed.response)?;
                assert_eq!(
                    writer.written_as::<ResultEntry>(version)?,
                    decoded.response.entries
                );
            }
        }
        // The answers are Kafka's: the entity in the order of its map, duplicates named.
        let decoded = alter_client_quotas(
            &quotas,
            &AlterClientQuotasRequest::default().with_entries(mixed()),
        );
        let message = |at: usize| decoded.response.entries[at].error_message.as_deref();
        assert_eq!(
            message(3),
            Some("Ignoring duplicate entity ClientQuotaEntity(entries={client-id=b, user=a})")
        );
        assert_eq!(decoded.response.entries.len(), 1150 + 20 - 5);
        let copied = mixed()[1000].entity.clone();
        let answer = decoded
            .response
            .entries
            .iter()
            .find(|e| e.entity.first().map(|p| &p.entity_name) == Some(&copied[0].entity_name))
            .context("the copied entity's answer")?;
        let name = copied[0].entity_name.as_deref().unwrap_or_default();
        assert_eq!(
            answer.error_message.as_deref(),
            Some(
                format!(
                    "Ignoring duplicate entity ClientQuotaEntity(entries={{client-id={name}}})"
                )
                .as_str()
            )
        );
        Ok(())
    }

    #[test]
    fn a_refused_request_answers_every_entry_as_sent() -> anyhow::Result<()> {
        let request = AlterClientQuotasRequest::default().with_entries(mixed());
        let body = body(&request, 1)?;
        let chunked = scan(&body, 1).context("chunked")??;
        let writer = results_writer(
            Arc::new(chunked),
            ListedQuotaAlteration::refused(31, "Cluster authorization failed."),
        )?;
        let results = writer.written_as::<ResultEntry>(1)?;
        let expected: Vec<_> = request
            .entries
            .iter()
            .map(|entry| refused_entry(entry, 31, "Cluster authorization failed."))
            .collect();
        assert_eq!(results, expected);
        Ok(())
    }

    #[test]
    fn a_malformed_entry_after_the_first_chunk_refuses_the_request() -> anyhow::Result<()> {
        let request = AlterClientQuotasRequest::default().with_entries(mixed());
        for version in [0, 1] {
            let body = body(&request, version)?;
            assert!(scan(&body, version).context("chunked")?.is_ok());
            // Cut inside the last entry.
            let cut = body.slice(..body.len() - 12);
            assert!(scan(&cut, version).context("chunked")?.is_err());
        }
        // Few entries: decoded whole.
        let few = AlterClientQuotasRequest::default().with_entries(mixed()[..CHUNK].to_vec());
        assert!(scan(&body(&few, 1)?, 1).is_none());
        Ok(())
    }
}
