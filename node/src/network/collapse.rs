//! Rewrites of a request frame that leave Kafka's answer unchanged and drop what would cost
//! memory without meaning, before the crate decodes the frame into structs.
//!
//! - Produce and Fetch: Kafka's handlers read the request's topic-partitions into a map keyed
//!   by topic-partition (Produce's `authorizedRequestInfo` and error maps, Fetch's
//!   `FetchRequest.fetchData`, a `LinkedHashMap`), and build the answer from that map. So a
//!   topic naming no partition gets no answer, and a partition named twice is appended or
//!   fetched once, with the data of its last copy; Fetch answers in the order of first
//!   appearance, consecutive partitions of one topic under one topic, and Produce one entry
//!   per topic. The frame is rewritten that way: an empty topic costs three bytes on the wire
//!   and about 150 once decoded and answered, a repeated partition six and about 200. Fetch's
//!   forgotten topics naming no partition remove nothing from a session and are dropped too.
//! - CreateTopics: a topic with a null config value is refused with "Null value not supported
//!   for topic configs: " and the names of those configs joined with commas; its other configs
//!   are never looked at. Those names are packed, already joined, into a few configs of at most
//!   [`PACKED_NAME`] bytes each, so the controller writes the same message from tens of configs
//!   instead of millions.
//! - ListGroups v4-5: a group is listed when its state (and type) equals, ASCII case ignored,
//!   one name of the states (and types) filter, or when that filter is empty. A group's state
//!   and type are among a few known names, so each filter keeps the first copy of each known
//!   name it lists, or, when it lists none, its first name (matching no group, as before): a
//!   frame of distinct unknown states cost 18 times its size decoded, and the coordinator
//!   compared each group with every name.
//! - DescribeLogDirs: the answer lists a requested partition only in the dir holding its log,
//!   however often it is named, and this node's logs are of partitions of its image (the log
//!   manager follows the image). So [`reduce_log_dir_topics`] keeps the topics of the image,
//!   each once with its distinct partitions that exist: a frame naming distinct missing
//!   topics cost 19 times its size, decoded and put in the handler's set.
//!
//! Written on the wire primitives, as `repeated.rs` is: the crate decodes a whole list at
//! once. What is malformed is left for the crate's decoder to refuse: a frame whose dropped
//! part would have been refused (a null name or list) is not rewritten. A string that is not
//! UTF-8 is not malformed: Kafka's `readString`, and the crate, replace its invalid bytes.

use std::collections::HashMap;
use std::hash::BuildHasher;

use arc_swap::ArcSwap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use hashbrown::HashTable;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::produce_request::PartitionProduceData;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, StrBytes};

use gregor_actors::groups::state::{GROUP_TYPES, LISTABLE_STATES};
use gregor_publishers::image::MetadataImage;

use super::dedup_decode::{array_length, need, uvarint};
use super::metadata_chunks::{bit, set_bit};
use super::repeated::{put_array_length, put_uvarint, skip, skip_string, skip_tagged_fields};

/// The longest packed config name: what a non-flexible string's `i16` length can say.
const PACKED_NAME: usize = i16::MAX as usize;

/// `frame` (request header and body) rewritten when `key` at `version` has something to drop;
/// `None` when it is served as it came. `images` is loaded only for a rewrite that reads the
/// image (DescribeLogDirs).
pub(super) fn rewrite(
    key: ApiKey,
    version: i16,
    frame: &Bytes,
    images: &ArcSwap<MetadataImage>,
) -> anyhow::Result<Option<Bytes>> {
    let data = match key {
        ApiKey::Produce if (3..=13).contains(&version) => DataTopics {
            flexible: version >= 9,
            by_id: version >= 13,
            grouped_by_topic: true,
            skip_partition: |buf, version| PartitionProduceData::decode(buf, version).map(drop),
        },
        ApiKey::Fetch if (4..=18).contains(&version) => DataTopics {
            flexible: version >= 12,
            by_id: version >= 13,
            grouped_by_topic: false,
            skip_partition: |buf, version| FetchPartition::decode(buf, version).map(drop),
        },
        ApiKey::CreateTopics if (2..=7).contains(&version) => {
            return pack_null_configs(frame, key, version)
        }
        ApiKey::ListGroups if (4..=5).contains(&version) => {
            return reduce_group_filters(frame, version)
        }
        ApiKey::DescribeLogDirs => return reduce_log_dir_topics(frame, version, &images.load()),
        _ => return Ok(None),
    };
    let mut rest = frame.clone();
    RequestHeader::decode(&mut rest, key.request_header_version(version))?;
    skip_prefix(&mut rest, key, version)?;
    let topics_start = offset(frame, &rest);
    let Some(topics) = collapse_partitions(frame, &mut rest, &data, version)? else {
        return Ok(None);
    };
    let topics_end = offset(frame, &rest);
    let forgotten = if key == ApiKey::Fetch && version >= 7 {
        let start = offset(frame, &rest);
        drop_empty_forgotten(frame, &mut rest, &data)?
            .map(|list| (start, offset(frame, &rest), list))
    } else {
        None
    };
    if topics.is_none() && forgotten.is_none() {
        return Ok(None);
    }
    let mut reduced = BytesMut::with_capacity(frame.len().min(1 << 20));
    reduced.put_slice(&frame[..topics_start]);
    let mut copied = topics_start;
    if let Some(topics) = topics {
        reduced.put_slice(&topics);
        copied = topics_end;
    }
    if let Some((start, end, list)) = forgotten {
        reduced.put_slice(&frame[copied..start]);
        reduced.put_slice(&list);
        copied = end;
    }
    reduced.put_slice(&frame[copied..]);
    Ok(Some(reduced.freeze()))
}

/// Produce's and Fetch's list of topics, each `name` (or `topic_id` when `by_id`),
/// `partitions` (each starting with its index), tagged fields.
struct DataTopics {
    flexible: bool,
    by_id: bool,
    /// Produce answers one entry per topic; Fetch one per run of consecutive partitions of a
    /// topic.
    grouped_by_topic: bool,
    skip_partition: fn(&mut Bytes, i16) -> anyhow::Result<()>,
}

/// Skips the request body's fields before its list of topics.
fn skip_prefix(buf: &mut Bytes, key: ApiKey, version: i16) -> anyhow::Result<()> {
    if key == ApiKey::Produce {
        skip_string(buf, version >= 9)?;
        return skip(buf, 6);
    }
    // Fetch: replica id (to v14), max wait, min bytes, max bytes, isolation level, then the
    // session id and epoch (v7+).
    let replica = if version <= 14 { 4 } else { 0 };
    let session = if version >= 7 { 8 } else { 0 };
    skip(buf, replica + 13 + session)
}

fn offset(frame: &Bytes, rest: &Bytes) -> usize {
    frame.len() - rest.len()
}

fn offset32(frame: &Bytes, rest: &Bytes) -> anyhow::Result<u32> {
    u32::try_from(offset(frame, rest)).map_err(|_| anyhow::anyhow!("frame over 4 GiB"))
}

/// One partition of the request: its topic (numbered in order of first appearance), where
/// its first copy is (its place in the answer) and where its last copy is (its data). Twelve
/// bytes per partition, which is at least six on the wire.
#[derive(Clone, Copy)]
struct Part {
    topic: u32,
    first: u32,
    data: u32,
}

/// The partition index at `at` (every partition starts with it).
fn index_at(frame: &[u8], at: u32) -> i32 {
    let at = at as usize;
    frame
        .get(at..at + 4)
        .and_then(|b| b.try_into().ok())
        .map_or(i32::MIN, i32::from_be_bytes)
}

/// Reads the list of topics at `rest` and returns it rewritten as Kafka answers it (see the
/// module's comment), `Some(None)` when that is the list as it came, `None` when the frame
/// must be left as it came (a null list or name).
fn collapse_partitions(
    frame: &Bytes,
    rest: &mut Bytes,
    data: &DataTopics,
    version: i16,
) -> anyhow::Result<Option<Option<BytesMut>>> {
    let flexible = data.flexible;
    let count = array_length(rest, flexible)?;
    if count < 0 {
        return Ok(None);
    }
    // Distinct topic keys (name or id) as ranges of the frame, found by hash.
    let hasher = foldhash::fast::RandomState::default();
    let mut keys: Vec<(u32, u32)> = Vec::new();
    let mut by_key: HashTable<u32> = HashTable::new();
    let mut parts: Vec<Part> = Vec::new();
    let mut empty_topics = false;
    for _ in 0..count {
        let key_start = offset32(frame, rest)?;
        if data.by_id {
            skip(rest, 16)?;
        } else if string_bytes(rest, flexible)?.is_none() {
            return Ok(None);
        }
        let key_end = offset32(frame, rest)?;
        let key = &frame[key_start as usize..key_end as usize];
        let hash = hasher.hash_one(key);
        let same = |ordinal: &u32| {
            let (start, end) = keys[*ordinal as usize];
            &frame[start as usize..end as usize] == key
        };
        let topic = match by_key.find(hash, same) {
            Some(ordinal) => *ordinal,
            None => {
                let ordinal = u32::try_from(keys.len())?;
                keys.push((key_start, key_end));
                by_key.insert_unique(hash, ordinal, |ordinal| {
                    let (start, end) = keys[*ordinal as usize];
                    hasher.hash_one(&frame[start as usize..end as usize])
                });
                ordinal
            }
        };
        let partitions = array_length(rest, flexible)?;
        if partitions < 0 {
            return Ok(None);
        }
        // Sized by the list's length (each partition is at least six bytes), so a long list
        // is not held at twice its size by a doubling vector.
        parts.reserve((partitions as usize).min(rest.len() / 6));
        for _ in 0..partitions {
            need(rest, 1)?;
            let at = offset32(frame, rest)?;
            (data.skip_partition)(rest, version)?;
            parts.push(Part {
                topic,
                first: at,
                data: at,
            });
        }
        skip_tagged_fields(rest, flexible)?;
        empty_topics |= partitions == 0;
    }
    drop(by_key);
    // Each (topic, index) once: placed at its first copy, with the data of its last.
    let total = parts.len();
    parts.sort_unstable_by_key(|p| (p.topic, index_at(frame, p.first), p.first));
    let mut kept = 0;
    for i in 0..parts.len() {
        let part = parts[i];
        let same_as_kept = kept > 0 && {
            let last: Part = parts[kept - 1];
            last.topic == part.topic && index_at(frame, last.first) == index_at(frame, part.first)
        };
        if same_as_kept {
            parts[kept - 1].data = part.data;
        } else {
            parts[kept] = part;
            kept += 1;
        }
    }
    parts.truncate(kept);
    if data.grouped_by_topic {
        parts.sort_unstable_by_key(|p| (p.topic, p.first));
    } else {
        parts.sort_unstable_by_key(|p| p.first);
    }
    let groups = 1 + parts
        .windows(2)
        .filter(|w| w[0].topic != w[1].topic)
        .count();
    let groups = if parts.is_empty() { 0 } else { groups };
    if kept == total && !empty_topics && groups as i64 == count {
        return Ok(Some(None));
    }
    let mut list = BytesMut::new();
    put_array_length(&mut list, groups, flexible)?;
    for run in parts.chunk_by(|a, b| a.topic == b.topic) {
        let (start, end) = keys[run[0].topic as usize];
        list.put_slice(&frame[start as usize..end as usize]);
        put_array_length(&mut list, run.len(), flexible)?;
        for part in run {
            let mut partition = frame.slice(part.data as usize..);
            (data.skip_partition)(&mut partition, version)?;
            list.put_slice(&frame[part.data as usize..frame.len() - partition.len()]);
        }
        // The topic's tagged fields (none known).
        if flexible {
            list.put_u8(0);
        }
    }
    Ok(Some(Some(list)))
}

/// Fetch's forgotten topics (v7+) without those naming no partition; `None` when none is
/// dropped.
fn drop_empty_forgotten(
    frame: &Bytes,
    rest: &mut Bytes,
    data: &DataTopics,
) -> anyhow::Result<Option<BytesMut>> {
    let flexible = data.flexible;
    let count = array_length(rest, flexible)?;
    // Kept topics as ranges of the frame, adjacent ones merged.
    let mut kept: Vec<(usize, usize)> = Vec::new();
    let mut kept_count = 0usize;
    for _ in 0..count.max(0) {
        let start = offset(frame, rest);
        if data.by_id {
            skip(rest, 16)?;
        } else {
            string_bytes(rest, flexible)?;
        }
        let partitions = array_length(rest, flexible)?;
        skip(rest, 4 * partitions.max(0) as usize)?;
        skip_tagged_fields(rest, flexible)?;
        let end = offset(frame, rest);
        // A null list is left for the crate to refuse.
        if partitions != 0 {
            kept_count += 1;
            match kept.last_mut() {
                Some((_, last_end)) if *last_end == start => *last_end = end,
                _ => kept.push((start, end)),
            }
        }
    }
    if kept_count as i64 == count.max(0) {
        return Ok(None);
    }
    let mut list = BytesMut::new();
    put_array_length(&mut list, kept_count, flexible)?;
    for (start, end) in kept {
        list.put_slice(&frame[start..end]);
    }
    Ok(Some(list))
}

/// A string's length (-1 for null), its bytes left in `buf`.
fn string_length(buf: &mut Bytes, flexible: bool) -> anyhow::Result<i64> {
    if flexible {
        Ok(i64::from(uvarint(buf)?) - 1)
    } else {
        need(buf, 2)?;
        Ok(i64::from(buf.get_i16()))
    }
}

/// A string field's bytes (`None` for null).
fn string_bytes(buf: &mut Bytes, flexible: bool) -> anyhow::Result<Option<Bytes>> {
    let length = string_length(buf, flexible)?;
    if length < 0 {
        return Ok(None);
    }
    let length = length as usize;
    need(buf, length)?;
    Ok(Some(buf.split_to(length)))
}

/// ListGroups v4-5 with its states filter (and, from v5, its types filter) reduced to the
/// names a group can match (see the module's comment); `None` when both are that already.
fn reduce_group_filters(frame: &Bytes, version: i16) -> anyhow::Result<Option<Bytes>> {
    let mut rest = frame.clone();
    RequestHeader::decode(
        &mut rest,
        ApiKey::ListGroups.request_header_version(version),
    )?;
    let states_start = offset(frame, &rest);
    let states = reduce_filter(&mut rest, &LISTABLE_STATES)?;
    let types_start = offset(frame, &rest);
    let types = match version {
        5.. => reduce_filter(&mut rest, &GROUP_TYPES)?,
        _ => None,
    };
    let types_end = offset(frame, &rest);
    if states.is_none() && types.is_none() {
        return Ok(None);
    }
    let states = states
        .as_deref()
        .unwrap_or(&frame[states_start..types_start]);
    let types = types.as_deref().unwrap_or(&frame[types_start..types_end]);
    let mut reduced =
        BytesMut::with_capacity(states_start + states.len() + types.len() + rest.len());
    reduced.put_slice(&frame[..states_start]);
    reduced.put_slice(states);
    reduced.put_slice(types);
    reduced.put_slice(&rest);
    Ok(Some(reduced.freeze()))
}

/// A filter (a compact array of compact strings) cut to the first copy of each name of
/// `known` it lists (ASCII case ignored), or to its first name when it lists none; `None`
/// when it is that already. What the crate's decoder refuses in a dropped name (null, not
/// UTF-8) is refused here.
fn reduce_filter(buf: &mut Bytes, known: &[&str]) -> anyhow::Result<Option<BytesMut>> {
    let count = array_length(buf, true)?;
    if count < 0 {
        anyhow::bail!("a filter's array length is negative ({count})");
    }
    let mut kept: Vec<Bytes> = Vec::with_capacity(known.len());
    let mut seen = vec![false; known.len()];
    let mut first_unknown = None;
    for _ in 0..count {
        let (name, element) = required_string(buf, true)?;
        match known.iter().position(|k| k.eq_ignore_ascii_case(&name)) {
            Some(at) if !seen[at] => {
                seen[at] = true;
                kept.push(element);
            }
            Some(_) => {}
            None => {
                first_unknown.get_or_insert(element);
            }
        }
    }
    if kept.is_empty() {
        kept.extend(first_unknown);
    }
    if kept.len() as i64 == count {
        return Ok(None);
    }
    let mut list = BytesMut::new();
    put_array_length(&mut list, kept.len(), true)?;
    for element in kept {
        list.put_slice(&element);
    }
    Ok(Some(list))
}

/// A string field the crate decodes as non-nullable: its text and its bytes as they came
/// (length included). Null is refused, as the crate's decoder refuses it; invalid UTF-8 is
/// replaced, as the crate (and Kafka's `readString`) replace it.
fn required_string(buf: &mut Bytes, flexible: bool) -> anyhow::Result<(StrBytes, Bytes)> {
    let field = buf.clone();
    let Some(bytes) = string_bytes(buf, flexible)? else {
        anyhow::bail!("a non-nullable string is null");
    };
    let text = StrBytes::from_utf8_lossy(bytes);
    Ok((text, field.slice(..field.len() - buf.len())))
}

/// DescribeLogDirs v1-4 naming topics, cut to the topics of `image`, each at its first
/// appearance (its name as it came) with the partitions it names that exist, ascending and
/// once each; `None` for a request naming none (null lists every partition). What the crate's
/// decoder refuses in a dropped topic (a null or non-UTF-8 name, a null list) is refused
/// here.
pub(super) fn reduce_log_dir_topics(
    frame: &Bytes,
    version: i16,
    image: &MetadataImage,
) -> anyhow::Result<Option<Bytes>> {
    if !(1..=4).contains(&version) {
        return Ok(None);
    }
    let flexible = version >= 2;
    let mut rest = frame.clone();
    RequestHeader::decode(
        &mut rest,
        ApiKey::DescribeLogDirs.request_header_version(version),
    )?;
    let list_start = offset(frame, &rest);
    let count = array_length(&mut rest, flexible)?;
    if count <= 0 {
        return Ok(None);
    }
    // Each kept topic's name as it came and one bit per partition named.
    let mut kept: Vec<(Bytes, Vec<u64>)> = Vec::new();
    let mut kept_at: HashMap<StrBytes, usize> = HashMap::new();
    for _ in 0..count {
        let (name, encoded_name) = required_string(&mut rest, flexible)?;
        let listed = array_length(&mut rest, flexible)?;
        let Ok(listed) = usize::try_from(listed) else {
            anyhow::bail!("a topic's partition list is null");
        };
        need(&rest, 4 * listed)?;
        let indexes = rest.split_to(4 * listed);
        skip_tagged_fields(&mut rest, flexible)?;
        let Some(topic) = image.topics.get_by_name(&name) else {
            continue;
        };
        let at = *kept_at.entry(name).or_insert_with(|| {
            kept.push((encoded_name, vec![0; topic.partition_count().div_ceil(64)]));
            kept.len() - 1
        });
        for index in indexes.chunks_exact(4) {
            let index = i32::from_be_bytes([index[0], index[1], index[2], index[3]]);
            if topic.partition(index).is_some() {
                set_bit(&mut kept[at].1, index as usize);
            }
        }
    }
    let mut reduced = BytesMut::with_capacity(list_start + rest.len() + 64);
    reduced.put_slice(&frame[..list_start]);
    put_array_length(&mut reduced, kept.len(), flexible)?;
    for (name, bits) in &kept {
        reduced.put_slice(name);
        let named = bits.iter().map(|word| word.count_ones() as usize).sum();
        put_array_length(&mut reduced, named, flexible)?;
        for index in (0..bits.len() * 64).filter(|index| bit(bits, *index)) {
            reduced.put_i32(index as i32);
        }
        if flexible {
            reduced.put_u8(0);
        }
    }
    reduced.put_slice(&rest);
    Ok(Some(reduced.freeze()))
}

/// CreateTopics v2-7: each topic with a null config value gets its configs replaced by the
/// names of its null-valued configs, joined with commas and cut at name boundaries into
/// pieces of at most [`PACKED_NAME`] bytes (a longer name is a piece of its own), each a
/// config with a null value: joining the pieces with commas gives the same message.
fn pack_null_configs(frame: &Bytes, key: ApiKey, version: i16) -> anyhow::Result<Option<Bytes>> {
    let flexible = version >= 5;
    let mut rest = frame.clone();
    RequestHeader::decode(&mut rest, key.request_header_version(version))?;
    let mut reduced = BytesMut::new();
    let mut copied = 0;
    for _ in 0..array_length(&mut rest, flexible)?.max(0) {
        skip_string(&mut rest, flexible)?;
        skip(&mut rest, 6)?;
        for _ in 0..array_length(&mut rest, flexible)?.max(0) {
            skip(&mut rest, 4)?;
            for _ in 0..array_length(&mut rest, flexible)?.max(0) {
                skip(&mut rest, 4)?;
            }
            skip_tagged_fields(&mut rest, flexible)?;
        }
        let configs_start = offset(frame, &rest);
        let count = array_length(&mut rest, flexible)?;
        let configs = rest.clone();
        // The configs are read twice: first for the packed list's size, so it is written
        // into one allocation of that size.
        let mut joined = Joiner::default();
        let (mut pieces, mut bytes) = (0usize, 0usize);
        let mut count_piece = |piece: &[u8]| {
            pieces += 1;
            bytes += piece.len();
        };
        let read_all = for_each_config(&mut rest, count, flexible, |name, value| {
            if value.is_none() {
                joined.push(name, &mut count_piece);
            }
        })?;
        joined.finish(&mut count_piece);
        if !read_all {
            return Ok(None);
        }
        let configs_end = offset(frame, &rest);
        skip_tagged_fields(&mut rest, flexible)?;
        if pieces == 0 || count < 2 {
            continue;
        }
        let head = &frame[copied..configs_start];
        // Each piece: a length of at most three bytes, a null value, no tagged fields.
        reduced.reserve(head.len() + 5 + bytes + pieces * 6 + (frame.len() - configs_end));
        reduced.put_slice(head);
        put_array_length(&mut reduced, pieces, flexible)?;
        let mut joined = Joiner::default();
        let mut write_piece = |piece: &[u8]| put_null_config(&mut reduced, piece, flexible);
        for_each_config(&mut configs.clone(), count, flexible, |name, value| {
            if value.is_none() {
                joined.push(name, &mut write_piece);
            }
        })?;
        joined.finish(&mut write_piece);
        copied = configs_end;
    }
    if copied == 0 {
        return Ok(None);
    }
    reduced.put_slice(&frame[copied..]);
    Ok(Some(reduced.freeze()))
}

/// Calls `each(name, value)` for `count` configs; `false` when a name is null (the crate
/// refuses it).
fn for_each_config(
    buf: &mut Bytes,
    count: i64,
    flexible: bool,
    mut each: impl FnMut(&[u8], Option<&[u8]>),
) -> anyhow::Result<bool> {
    for _ in 0..count.max(0) {
        let Some(name) = string_bytes(buf, flexible)? else {
            return Ok(false);
        };
        let value = string_bytes(buf, flexible)?;
        skip_tagged_fields(buf, flexible)?;
        each(&name, value.as_deref());
    }
    Ok(true)
}

/// A config named `name` with a null value and no tagged fields. A piece is at most
/// [`PACKED_NAME`] bytes, or one name as long as it came, so its length fits the field.
fn put_null_config(out: &mut BytesMut, name: &[u8], flexible: bool) {
    if flexible {
        put_uvarint(out, name.len() as u32 + 1);
        out.put_slice(name);
        out.put_slice(&[0, 0]);
    } else {
        out.put_i16(name.len() as i16);
        out.put_slice(name);
        out.put_i16(-1);
    }
}

/// Joins names with commas into pieces of at most [`PACKED_NAME`] bytes, cut at name
/// boundaries, handing each finished piece to `flush`.
#[derive(Default)]
struct Joiner {
    piece: Vec<u8>,
    started: bool,
}

impl Joiner {
    fn push(&mut self, name: &[u8], flush: &mut impl FnMut(&[u8])) {
        if self.started && self.piece.len() + 1 + name.len() > PACKED_NAME {
            flush(&self.piece);
            self.piece.clear();
            self.started = false;
        }
        if self.started {
            self.piece.push(b',');
        }
        self.piece.extend_from_slice(name);
        self.started = true;
    }

    fn finish(self, flush: &mut impl FnMut(&[u8])) {
        if self.started {
            flush(&self.piece);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
    use kafka_protocol::messages::fetch_request::{FetchTopic, ForgottenTopic};
    use kafka_protocol::messages::produce_request::TopicProduceData;
    use kafka_protocol::messages::{
        CreateTopicsRequest, FetchRequest, ListGroupsRequest, ProduceRequest, RequestKind,
        TopicName,
    };
    use kafka_protocol::protocol::{Encodable, Message, StrBytes};
    use uuid::Uuid;

    use super::*;

    fn frame<T: Encodable + Message>(key: ApiKey, version: i16, body: &T) -> Bytes {
        let mut out = BytesMut::new();
        RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(7)
            .encode(&mut out, key.request_header_version(version))
            .unwrap();
        body.encode(&mut out, version).unwrap();
        out.freeze()
    }

    /// [`super::rewrite`] on a node whose image is empty.
    fn rewrite(key: ApiKey, version: i16, frame: &Bytes) -> anyhow::Result<Option<Bytes>> {
        super::rewrite(
            key,
            version,
            frame,
            &ArcSwap::from_pointee(MetadataImage::empty()),
        )
    }

    fn decoded(key: ApiKey, version: i16, mut frame: Bytes) -> RequestKind {
        RequestHeader::decode(&mut frame, key.request_header_version(version)).unwrap();
        RequestKind::decode(key, &mut frame, version).unwrap()
    }

    fn name(n: &str) -> TopicName {
        TopicName(StrBytes::from_string(n.to_owned()))
    }

    fn produce_topic(topic: &str, partitions: &[(i32, &'static [u8])]) -> TopicProduceData {
        TopicProduceData::default()
            .with_name(name(topic))
            .with_topic_id(Uuid::from_u128(topic.len() as u128))
            .with_partition_data(
                partitions
                    .iter()
                    .map(|(index, records)| {
                        PartitionProduceData::default()
                            .with_index(*index)
                            .with_records(Some(Bytes::from_static(records)))
                    })
                    .collect(),
            )
    }

    /// A Produce topic as compared: its id, its name, its partitions' indexes and records.
    type ProducedTopic = (Uuid, String, Vec<(i32, Option<Bytes>)>);

    /// Produce answers one entry per topic and partition: the rewritten request names each
    /// once, with its last copy's records, topics in order of first appearance.
    #[test]
    fn produce_keeps_each_partition_once_with_its_last_records() {
        for version in 3..=13i16 {
            // Topics by id from v13: names of different lengths give different ids.
            let request = ProduceRequest::default().with_acks(1).with_topic_data(vec![
                produce_topic("t", &[(0, b"a"), (1, b"b")]),
                produce_topic("uu", &[]),
                produce_topic("vvv", &[(0, b"c")]),
                produce_topic("t", &[(0, b"d")]),
            ]);
            let wire = frame(ApiKey::Produce, version, &request);
            let rewritten = rewrite(ApiKey::Produce, version, &wire).unwrap().unwrap();
            let RequestKind::Produce(ours) = decoded(ApiKey::Produce, version, rewritten) else {
                panic!("Produce");
            };
            let expected = ProduceRequest::default().with_acks(1).with_topic_data(vec![
                produce_topic("t", &[(0, b"d"), (1, b"b")]),
                produce_topic("vvv", &[(0, b"c")]),
            ]);
            let key = |r: &ProduceRequest| -> Vec<ProducedTopic> {
                r.topic_data
                    .iter()
                    .map(|t| {
                        let name = if version >= 13 {
                            String::new()
                        } else {
                            t.name.to_string()
                        };
                        let id = if version >= 13 {
                            t.topic_id
                        } else {
                            Uuid::nil()
                        };
                        let parts = t
                            .partition_data
                            .iter()
                            .map(|p| (p.index, p.records.clone()))
                            .collect();
                        (id, name, parts)
                    })
                    .collect()
            };
            assert_eq!(key(&ours), key(&expected), "Produce v{version}");
            assert_eq!(ours.acks, 1);
        }
    }

    /// By name before v13, by id after (names of different lengths give different ids).
    fn fetch_topic(version: i16, topic: &str, partitions: &[(i32, i64)]) -> FetchTopic {
        let (topic, id) = if version >= 13 {
            ("", topic.len() as u128)
        } else {
            (topic, 0)
        };
        FetchTopic::default()
            .with_topic(name(topic))
            .with_topic_id(Uuid::from_u128(id))
            .with_partitions(
                partitions
                    .iter()
                    .map(|(index, offset)| {
                        FetchPartition::default()
                            .with_partition(*index)
                            .with_fetch_offset(*offset)
                    })
                    .collect(),
            )
    }

    fn forgotten(version: i16, topic: &str, partitions: Vec<i32>) -> ForgottenTopic {
        let (topic, id) = if version >= 13 {
            ("", topic.len() as u128)
        } else {
            (topic, 0)
        };
        ForgottenTopic::default()
            .with_topic(name(topic))
            .with_topic_id(Uuid::from_u128(id))
            .with_partitions(partitions)
    }

    /// Fetch's `LinkedHashMap`: each partition at its first appearance with its last copy's
    /// position, consecutive partitions of a topic under one topic.
    #[test]
    fn fetch_keeps_each_partition_once_in_order_of_first_appearance() {
        for version in 4..=18i16 {
            let topic = |t, partitions: &[(i32, i64)]| fetch_topic(version, t, partitions);
            let mut request = FetchRequest::default()
                .with_max_wait_ms(5)
                .with_topics(vec![
                    topic("t", &[(0, 10), (1, 11)]),
                    topic("t", &[(2, 12)]),
                    topic("uu", &[]),
                    topic("vvv", &[(0, 13)]),
                    topic("t", &[(0, 14), (3, 15)]),
                ]);
            let mut forgotten_kept = Vec::new();
            if version >= 7 {
                forgotten_kept = vec![forgotten(version, "w", vec![4])];
                request.forgotten_topics_data =
                    vec![forgotten(version, "uu", vec![]), forgotten_kept[0].clone()];
            }
            if version >= 11 {
                request.rack_id = StrBytes::from_static_str("r");
            }
            let wire = frame(ApiKey::Fetch, version, &request);
            let rewritten = rewrite(ApiKey::Fetch, version, &wire).unwrap().unwrap();
            let RequestKind::Fetch(ours) = decoded(ApiKey::Fetch, version, rewritten) else {
                panic!("Fetch");
            };
            let expected = decoded(
                ApiKey::Fetch,
                version,
                frame(
                    ApiKey::Fetch,
                    version,
                    &request
                        .clone()
                        .with_topics(vec![
                            topic("t", &[(0, 14), (1, 11), (2, 12)]),
                            topic("vvv", &[(0, 13)]),
                            topic("t", &[(3, 15)]),
                        ])
                        .with_forgotten_topics_data(forgotten_kept),
                ),
            );
            assert_eq!(RequestKind::Fetch(ours), expected, "Fetch v{version}");
        }
    }

    #[test]
    fn requests_with_nothing_to_drop_stay_as_they_came() {
        let request = FetchRequest::default().with_topics(vec![
            fetch_topic(12, "t", &[(0, 1), (1, 1)]),
            fetch_topic(12, "u", &[(0, 1)]),
            fetch_topic(12, "t", &[(2, 1)]),
        ]);
        let wire = frame(ApiKey::Fetch, 12, &request);
        assert!(rewrite(ApiKey::Fetch, 12, &wire).unwrap().is_none());
        let request = ProduceRequest::default()
            .with_topic_data(vec![produce_topic("t", &[(0, b"a"), (1, b"b")])]);
        let wire = frame(ApiKey::Produce, 9, &request);
        assert!(rewrite(ApiKey::Produce, 9, &wire).unwrap().is_none());
        // An empty topic whose name is not UTF-8 (Kafka reads it with U+FFFD) is dropped as
        // any empty topic.
        let mut wire = BytesMut::from(
            &frame(
                ApiKey::Produce,
                9,
                &ProduceRequest::default().with_topic_data(vec![produce_topic("\u{e9}", &[])]),
            )[..],
        );
        let at = wire.iter().position(|b| *b == 0xc3).unwrap();
        wire[at] = 0xff;
        let rewritten = rewrite(ApiKey::Produce, 9, &wire.freeze())
            .unwrap()
            .unwrap();
        let RequestKind::Produce(rewritten) = decoded(ApiKey::Produce, 9, rewritten) else {
            panic!("not a Produce");
        };
        assert!(rewritten.topic_data.is_empty());
    }

    fn config(name: &str, value: Option<&str>) -> CreatableTopicConfig {
        CreatableTopicConfig::default()
            .with_name(StrBytes::from_string(name.to_owned()))
            .with_value(value.map(|v| StrBytes::from_string(v.to_owned())))
    }

    /// The null-valued configs' names, joined with commas, are the same string after the
    /// rewrite, however they are cut into pieces.
    #[test]
    fn create_topics_null_config_names_join_the_same() {
        let long = "x".repeat(20_000);
        let mut many: Vec<CreatableTopicConfig> = vec![config("retention.ms", Some("5"))];
        many.extend((0..40_000).map(|i| config(if i % 3 == 0 { "a" } else { "" }, None)));
        many.push(config(&long, None));
        many.push(config(&long, None));
        let cases = [
            vec![config("a", None), config("b", Some("1")), config("", None)],
            many,
        ];
        for version in 2..=7i16 {
            for configs in &cases {
                let request = CreateTopicsRequest::default()
                    .with_topics(vec![
                        CreatableTopic::default()
                            .with_name(name("ok"))
                            .with_configs(vec![
                                config("cleanup.policy", Some("compact")),
                                config("retention.ms", Some("1")),
                            ]),
                        CreatableTopic::default()
                            .with_name(name("t"))
                            .with_num_partitions(3)
                            .with_configs(configs.clone()),
                    ])
                    .with_timeout_ms(99);
                let wire = frame(ApiKey::CreateTopics, version, &request);
                let rewritten = rewrite(ApiKey::CreateTopics, version, &wire)
                    .unwrap()
                    .unwrap_or_else(|| panic!("v{version} {} configs rewritten", configs.len()));
                let RequestKind::CreateTopics(ours) =
                    decoded(ApiKey::CreateTopics, version, rewritten)
                else {
                    panic!("CreateTopics");
                };
                let joined = |configs: &[CreatableTopicConfig]| {
                    configs
                        .iter()
                        .filter(|c| c.value.is_none())
                        .map(|c| c.name.to_string())
                        .collect::<Vec<_>>()
                        .join(",")
                };
                assert_eq!(ours.topics[0], request.topics[0], "v{version}");
                let packed = &ours.topics[1].configs;
                assert!(packed.iter().all(|c| c.value.is_none()));
                assert!(packed.iter().all(|c| c.name.len() <= PACKED_NAME));
                assert!(packed.len() < 10, "v{version}: {} configs", packed.len());
                assert_eq!(joined(packed), joined(configs), "v{version}");
                assert_eq!(ours.topics[1].num_partitions, 3);
                assert_eq!(ours.timeout_ms, 99);
            }
        }
    }

    fn list_groups(version: i16, states: &[&str], types: &[&str]) -> Bytes {
        let strings = |names: &[&str]| {
            names
                .iter()
                .map(|n| StrBytes::from(n.to_string()))
                .collect()
        };
        let request = ListGroupsRequest::default()
            .with_states_filter(strings(states))
            .with_types_filter(strings(types));
        frame(ApiKey::ListGroups, version, &request)
    }

    fn filters(version: i16, wire: Bytes) -> (Vec<String>, Vec<String>) {
        let RequestKind::ListGroups(request) = decoded(ApiKey::ListGroups, version, wire) else {
            panic!("ListGroups");
        };
        let names = |list: Vec<StrBytes>| list.iter().map(|n| n.to_string()).collect();
        (names(request.states_filter), names(request.types_filter))
    }

    #[test]
    fn list_groups_filters_keep_the_first_copy_of_each_known_name() {
        let states = [
            "nope",
            "STABLE",
            "empty",
            "Stable",
            "other",
            "Empty",
            "assigning",
        ];
        let types = ["x", "Consumer", "consumer", "y", "CLASSIC"];
        let wire = list_groups(5, &states, &types);
        let rewritten = rewrite(ApiKey::ListGroups, 5, &wire).unwrap().unwrap();
        assert_eq!(
            filters(5, rewritten),
            (
                vec!["STABLE".into(), "empty".into(), "assigning".into()],
                vec!["Consumer".into(), "CLASSIC".into()]
            )
        );
        // v4 has no types filter.
        let wire = list_groups(4, &states, &[]);
        let rewritten = rewrite(ApiKey::ListGroups, 4, &wire).unwrap().unwrap();
        assert_eq!(filters(4, rewritten).0, ["STABLE", "empty", "assigning"]);
    }

    #[test]
    fn list_groups_filters_of_unknown_names_keep_their_first() {
        let wire = list_groups(5, &["a", "b", "c"], &["share", "streams"]);
        let rewritten = rewrite(ApiKey::ListGroups, 5, &wire).unwrap().unwrap();
        assert_eq!(
            filters(5, rewritten),
            (vec!["a".into()], vec!["share".into()])
        );
        // Nothing to drop: empty filters (every group), or one name each.
        for (states, types) in [(&[][..], &[][..]), (&["a"][..], &["classic"][..])] {
            let wire = list_groups(5, states, types);
            assert_eq!(rewrite(ApiKey::ListGroups, 5, &wire).unwrap(), None);
        }
        // Only the states filter to cut: the types filter is copied as it came.
        let wire = list_groups(5, &["Stable", "stable"], &["consumer"]);
        let rewritten = rewrite(ApiKey::ListGroups, 5, &wire).unwrap().unwrap();
        assert_eq!(
            filters(5, rewritten),
            (vec!["Stable".into()], vec!["consumer".into()])
        );
    }

    #[test]
    fn list_groups_filters_with_a_name_the_decoder_refuses_are_refused() {
        let wire = list_groups(5, &["Stable", "a", "b"], &[]);
        // The second name ("a", after its length byte) made not UTF-8: read as Kafka reads
        // it (U+FFFD), a name no group matches; then null, refused.
        let at = wire.iter().rposition(|b| *b == b'a').unwrap();
        let mut bad = BytesMut::from(&wire[..]);
        bad[at] = 0xff;
        let rewritten = rewrite(ApiKey::ListGroups, 5, &bad.freeze())
            .unwrap()
            .unwrap();
        assert_eq!(filters(5, rewritten), (vec!["Stable".into()], vec![]));
        let mut null = BytesMut::from(&wire[..]);
        null[at - 1] = 0;
        assert!(rewrite(ApiKey::ListGroups, 5, &null.freeze()).is_err());
    }

    /// An image holding topic "t" of three partitions.
    fn image_with_t() -> MetadataImage {
        use gregor_publishers::records::{MetadataRecord, PartitionRecord, TopicRecord};
        let id = Uuid::from_u128(7);
        let mut delta =
            gregor_publishers::MetadataDelta::new(std::sync::Arc::new(MetadataImage::empty()));
        let topic = TopicRecord {
            name: "t".into(),
            topic_id: id,
        };
        delta.replay(&MetadataRecord::Topic(topic)).unwrap();
        for partition_id in 0..3 {
            let partition = PartitionRecord::in_sync(id, partition_id, vec![1]);
            delta.replay(&MetadataRecord::Partition(partition)).unwrap();
        }
        delta.apply(Default::default())
    }

    #[test]
    fn log_dir_topics_keep_the_images_each_once_with_its_partitions() {
        use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
        use kafka_protocol::messages::DescribeLogDirsRequest;
        let image = image_with_t();
        let topic = |topic: &str, partitions: &[i32]| {
            DescribableLogDirTopic::default()
                .with_topic(name(topic))
                .with_partitions(partitions.to_vec())
        };
        let reduced = |version, topics| {
            let request = DescribeLogDirsRequest::default().with_topics(Some(topics));
            let wire = frame(ApiKey::DescribeLogDirs, version, &request);
            let rewritten = reduce_log_dir_topics(&wire, version, &image)
                .unwrap()
                .unwrap();
            let RequestKind::DescribeLogDirs(ours) =
                decoded(ApiKey::DescribeLogDirs, version, rewritten)
            else {
                panic!("DescribeLogDirs");
            };
            ours.topics
        };
        for version in 1..=4 {
            let topics = vec![
                topic("gone", &[0, 1]),
                topic("t", &[2, 9, -1]),
                topic("other", &[0]),
                topic("t", &[0, 2, 2]),
            ];
            assert_eq!(
                reduced(version, topics),
                Some(vec![topic("t", &[0, 2])]),
                "v{version}"
            );
            // Naming only missing topics leaves an empty list: no partition, as before.
            let topics = vec![topic("gone", &[0]), topic("other", &[1])];
            assert_eq!(reduced(version, topics), Some(vec![]), "v{version}");
            // Every partition (null) and none (empty) stay as they came.
            for topics in [None, Some(vec![])] {
                let request = DescribeLogDirsRequest::default().with_topics(topics);
                let wire = frame(ApiKey::DescribeLogDirs, version, &request);
                assert_eq!(reduce_log_dir_topics(&wire, version, &image).unwrap(), None);
            }
        }
    }

    #[test]
    fn log_dir_topics_the_decoder_refuses_are_refused_and_invalid_utf8_is_read_as_kafka_reads_it() {
        use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
        use kafka_protocol::messages::DescribeLogDirsRequest;
        let request = DescribeLogDirsRequest::default().with_topics(Some(vec![
            DescribableLogDirTopic::default().with_topic(name("x")),
        ]));
        let wire = frame(ApiKey::DescribeLogDirs, 4, &request);
        let at = wire.iter().rposition(|b| *b == b'x').unwrap();
        let image = image_with_t();
        let mut bad = BytesMut::from(&wire[..]);
        bad[at] = 0xff;
        // A topic that is not in the image, whatever its bytes: dropped.
        let reduced = reduce_log_dir_topics(&bad.freeze(), 4, &image)
            .unwrap()
            .unwrap();
        let mut body = reduced.clone();
        RequestHeader::decode(&mut body, 2).unwrap();
        let decoded = DescribeLogDirsRequest::decode(&mut body, 4).unwrap();
        assert_eq!(decoded.topics, Some(vec![]));
        let mut truncated = wire.clone();
        truncated.truncate(at + 2);
        assert!(reduce_log_dir_topics(&truncated, 4, &image).is_err());
    }
}
