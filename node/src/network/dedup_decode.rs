//! Decoders that deduplicate a request's list while reading it, for requests whose list may
//! repeat one tiny element millions of times.
//!
//! Metadata is the worst case: a topic costs two bytes on the wire (an empty name) and a
//! `MetadataRequestTopic` of about 70 bytes once decoded, then a response topic of about 150, so
//! a 10 MB frame grew the node by more than a gigabyte. Kafka answers a set of the requested
//! topics (`KafkaApis.handleTopicMetadataRequest`: `topics.asScala.toSet`), so the duplicates
//! carry no meaning: they are dropped as they are read and never allocated. DeleteTopics v1-5
//! names topics by name only, and the controller answers a repeated name once
//! (INVALID_REQUEST "Duplicate topic name."), so a name is kept at most twice: the controller
//! still sees the repetition and answers exactly as for the whole list; DeleteTopics v6 does
//! the same for entries naming a topic by name only or by id only (an entry with both or
//! neither is answered on its own, so each is kept). CreateTopics and
//! CreatePartitions answer a repeated name once too (INVALID_REQUEST "Duplicate topic name."),
//! so their topics are decoded one at a time with the crate's element decoder and a name is
//! kept at most twice. DescribeClientQuotas is decided by its first four filter components at
//! most (a valid filter names each of Kafka's three entity types at most once, so a fourth
//! component is always refused and the filter stops there), so only those are kept; later ones
//! are read and dropped. DescribeConfigs filters each resource's configs by the set of
//! requested keys, so each key is kept once per resource. A SyncGroup leader's assignment to
//! an id no member can have (members' ids have two forms, `groups::could_be_member_id`) is
//! ignored by the coordinator, so it is dropped as it is read: a frame of distinct short ids
//! cost 33 times its size. Written on the wire primitives because the crate decodes whole
//! lists at once.

use std::collections::{HashMap, HashSet};

use anyhow::bail;
use bytes::{Buf, Bytes};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest,
    DescribeClientQuotasRequest, DescribeConfigsRequest, GroupId, MetadataRequest, RequestKind,
    SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use uuid::Uuid;

/// Decodes `key` at `version` when this module has a deduplicating decoder for it.
pub(crate) fn decode(
    key: ApiKey,
    buf: &mut Bytes,
    version: i16,
) -> Option<anyhow::Result<RequestKind>> {
    match key {
        ApiKey::Metadata => Some(decode_metadata(buf, version).map(RequestKind::Metadata)),
        ApiKey::CreateTopics if (2..=7).contains(&version) => Some(
            decode_topic_list::<CreatableTopic>(buf, version, version >= 5, |t| &t.name.0).map(
                |list| {
                    RequestKind::CreateTopics(
                        CreateTopicsRequest::default()
                            .with_topics(list.topics)
                            .with_timeout_ms(list.timeout_ms)
                            .with_validate_only(list.validate_only)
                            .with_unknown_tagged_fields(list.tagged),
                    )
                },
            ),
        ),
        ApiKey::CreatePartitions if (0..=3).contains(&version) => Some(
            decode_topic_list::<CreatePartitionsTopic>(buf, version, version >= 2, |t| &t.name.0)
                .map(|list| {
                    RequestKind::CreatePartitions(
                        CreatePartitionsRequest::default()
                            .with_topics(list.topics)
                            .with_timeout_ms(list.timeout_ms)
                            .with_validate_only(list.validate_only)
                            .with_unknown_tagged_fields(list.tagged),
                    )
                }),
        ),
        ApiKey::DeleteTopics if (1..=5).contains(&version) => {
            Some(decode_delete_topics_by_name(buf, version).map(RequestKind::DeleteTopics))
        }
        ApiKey::DeleteTopics if version == 6 => {
            Some(decode_delete_topics_v6(buf, version).map(RequestKind::DeleteTopics))
        }
        ApiKey::DescribeClientQuotas if (0..=1).contains(&version) => {
            Some(decode_describe_client_quotas(buf, version).map(RequestKind::DescribeClientQuotas))
        }
        ApiKey::DescribeConfigs if (1..=4).contains(&version) => {
            Some(decode_describe_configs(buf, version).map(RequestKind::DescribeConfigs))
        }
        ApiKey::SyncGroup if (0..=5).contains(&version) => {
            Some(decode_sync_group(buf, version).map(RequestKind::SyncGroup))
        }
        _ => None,
    }
}

/// Fails unless `n` more bytes are left.
pub(super) fn need(buf: &Bytes, n: usize) -> anyhow::Result<()> {
    if buf.remaining() < n {
        bail!("truncated: {n} bytes needed, {} left", buf.remaining());
    }
    Ok(())
}

/// An unsigned varint of at most 5 bytes (Kafka's compact lengths and tag numbers).
pub(super) fn uvarint(buf: &mut Bytes) -> anyhow::Result<u32> {
    let mut value = 0u32;
    for shift in (0..35).step_by(7) {
        need(buf, 1)?;
        let byte = buf.get_u8();
        value |= u32::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    bail!("varint longer than 5 bytes")
}

/// Tagged fields, kept (unknown to this version, they are carried as the crate carries them).
fn tagged_fields(buf: &mut Bytes) -> anyhow::Result<std::collections::BTreeMap<i32, Bytes>> {
    let mut tagged = std::collections::BTreeMap::new();
    for _ in 0..uvarint(buf)? {
        let tag = uvarint(buf)?;
        let size = uvarint(buf)? as usize;
        need(buf, size)?;
        tagged.insert(tag as i32, buf.split_to(size));
    }
    Ok(tagged)
}

/// Skips a flexible message's tagged fields.
pub(super) fn skip_tagged_fields(buf: &mut Bytes) -> anyhow::Result<()> {
    for _ in 0..uvarint(buf)? {
        uvarint(buf)?;
        let size = uvarint(buf)? as usize;
        need(buf, size)?;
        buf.advance(size);
    }
    Ok(())
}

/// A nullable string: compact (length + 1 as a varint) when `flexible`, else an i16 length.
pub(super) fn nullable_string(buf: &mut Bytes, flexible: bool) -> anyhow::Result<Option<Bytes>> {
    let length = if flexible {
        i64::from(uvarint(buf)?) - 1
    } else {
        need(buf, 2)?;
        i64::from(buf.get_i16())
    };
    if length < 0 {
        return Ok(None);
    }
    let length = length as usize;
    need(buf, length)?;
    Ok(Some(utf8_as_kafka_reads_it(buf.split_to(length))))
}

/// A string's bytes as Kafka's `Readable.readString` reads them (`new String(bytes, UTF_8)`):
/// invalid UTF-8 replaced by U+FFFD, so a request naming such a string gets its answer (an
/// invalid topic name, for one) instead of a closed connection. Valid bytes are not copied.
pub(super) fn utf8_as_kafka_reads_it(bytes: Bytes) -> Bytes {
    match std::str::from_utf8(&bytes) {
        Ok(_) => bytes,
        Err(_) => Bytes::from(kafka_protocol::protocol::java_utf8_lossy(&bytes)),
    }
}

/// An array's length (-1 for null): compact in flexible versions, an `i32` before. For answers
/// read a piece at a time, whose elements need not be in `buf` yet.
pub(super) fn array_length(buf: &mut Bytes, flexible: bool) -> anyhow::Result<i64> {
    if flexible {
        Ok(i64::from(uvarint(buf)?) - 1)
    } else {
        need(buf, 4)?;
        Ok(i64::from(buf.get_i32()))
    }
}

/// A request's array length, its elements in `buf`: as Kafka's generated readers, a length
/// beyond the bytes left is refused before anything is sized by it (every element takes at
/// least one byte, so callers may allocate per element).
pub(super) fn request_array_length(buf: &mut Bytes, flexible: bool) -> anyhow::Result<i64> {
    let length = array_length(buf, flexible)?;
    if length > buf.remaining() as i64 {
        bail!(
            "Tried to allocate a collection of size {length}, but there are only {} bytes remaining.",
            buf.remaining()
        );
    }
    Ok(length)
}

/// Whether an element named `key` is kept: at most two copies of a name, so the decision still
/// sees (and refuses) a repeat without memory growing with the number of copies.
fn keep_at_most_twice<K: std::hash::Hash + Eq>(times_seen: &mut HashMap<K, u8>, key: K) -> bool {
    let seen = times_seen.entry(key).or_insert(0);
    if *seen < 2 {
        *seen += 1;
        true
    } else {
        false
    }
}

fn boolean(buf: &mut Bytes) -> anyhow::Result<bool> {
    need(buf, 1)?;
    Ok(buf.get_u8() != 0)
}

/// Metadata v0-13 (Kafka's `MetadataRequest.json`), each distinct topic kept once, in the
/// order of its first appearance.
fn decode_metadata(buf: &mut Bytes, version: i16) -> anyhow::Result<MetadataRequest> {
    if !(0..=13).contains(&version) {
        bail!("Metadata v{version} is not supported");
    }
    let flexible = version >= 9;
    let count = array_length(buf, flexible)?;
    let topics = if count < 0 {
        if version < 1 {
            bail!("Metadata v0 topics must not be null");
        }
        None
    } else {
        // A short list (the common request names one topic) is searched instead of hashed,
        // which would allocate a table per request.
        let searched = count <= 16;
        let mut seen: HashSet<(Option<Bytes>, Uuid)> = HashSet::new();
        let mut topics: Vec<MetadataRequestTopic> =
            Vec::with_capacity(count.clamp(0, 1024) as usize);
        for _ in 0..count {
            let topic_id = if version >= 10 {
                need(buf, 16)?;
                let mut id = [0u8; 16];
                buf.copy_to_slice(&mut id);
                Uuid::from_bytes(id)
            } else {
                Uuid::nil()
            };
            let name = nullable_string(buf, flexible)?;
            if name.is_none() && version < 10 {
                bail!("Metadata v{version} topic names must not be null");
            }
            if flexible {
                skip_tagged_fields(buf)?;
            }
            let first = if searched {
                !topics.iter().any(|kept| {
                    kept.topic_id == topic_id
                        && kept.name.as_ref().map(|n| n.0.as_bytes()) == name.as_deref()
                })
            } else {
                seen.insert((name.clone(), topic_id))
            };
            if first {
                let name = name.map(|n| TopicName(StrBytes::from_utf8_lossy(n)));
                topics.push(
                    MetadataRequestTopic::default()
                        .with_topic_id(topic_id)
                        .with_name(name),
                );
            }
        }
        Some(topics)
    };
    let mut request = MetadataRequest::default().with_topics(topics);
    if version >= 4 {
        request.allow_auto_topic_creation = boolean(buf)?;
    }
    if (8..=10).contains(&version) {
        request.include_cluster_authorized_operations = boolean(buf)?;
    }
    if version >= 8 {
        request.include_topic_authorized_operations = boolean(buf)?;
    }
    if flexible {
        skip_tagged_fields(buf)?;
    }
    Ok(request)
}

/// The shape CreateTopics (v2-7) and CreatePartitions (v0-3) share: `Topics`, `TimeoutMs`,
/// `ValidateOnly`, then tagged fields when flexible.
struct TopicList<T> {
    topics: Vec<T>,
    timeout_ms: i32,
    validate_only: bool,
    tagged: std::collections::BTreeMap<i32, Bytes>,
}

fn decode_topic_list<T: Decodable>(
    buf: &mut Bytes,
    version: i16,
    flexible: bool,
    name_of: fn(&T) -> &StrBytes,
) -> anyhow::Result<TopicList<T>> {
    let count = array_length(buf, flexible)?;
    if count < 0 {
        bail!("the topic list must not be null");
    }
    let mut times_seen: HashMap<StrBytes, u8> = HashMap::new();
    let mut topics = Vec::new();
    for _ in 0..count {
        let topic = T::decode(buf, version)?;
        if keep_at_most_twice(&mut times_seen, name_of(&topic).clone()) {
            topics.push(topic);
        }
    }
    need(buf, 5)?;
    let timeout_ms = buf.get_i32();
    let validate_only = buf.get_u8() != 0;
    let mut tagged = std::collections::BTreeMap::new();
    if flexible {
        for _ in 0..uvarint(buf)? {
            let tag = uvarint(buf)?;
            let size = uvarint(buf)? as usize;
            need(buf, size)?;
            tagged.insert(tag as i32, buf.split_to(size));
        }
    }
    Ok(TopicList {
        topics,
        timeout_ms,
        validate_only,
        tagged,
    })
}

/// DeleteTopics v1-5 (`TopicNames`, `TimeoutMs`), each name kept at most twice.
fn decode_delete_topics_by_name(
    buf: &mut Bytes,
    version: i16,
) -> anyhow::Result<DeleteTopicsRequest> {
    let flexible = version >= 4;
    let count = array_length(buf, flexible)?;
    if count < 0 {
        bail!("DeleteTopics topic names must not be null");
    }
    let mut times_seen: HashMap<Bytes, u8> = HashMap::new();
    let mut names = Vec::new();
    for _ in 0..count {
        let name = nullable_string(buf, flexible)?
            .ok_or_else(|| anyhow::anyhow!("DeleteTopics topic names must not be null"))?;
        if keep_at_most_twice(&mut times_seen, name.clone()) {
            names.push(TopicName(StrBytes::from_utf8_lossy(name)));
        }
    }
    need(buf, 4)?;
    let timeout_ms = buf.get_i32();
    if flexible {
        skip_tagged_fields(buf)?;
    }
    Ok(DeleteTopicsRequest::default()
        .with_topic_names(names)
        .with_timeout_ms(timeout_ms))
}

/// What a DeleteTopics v6 entry names, for keeping repeats at most twice.
#[derive(Hash, PartialEq, Eq)]
enum NamedBy {
    Name(StrBytes),
    Id(Uuid),
}

/// DeleteTopics v6 (`Topics`, each a name or an id, then `TimeoutMs`): an entry with only a
/// name is kept at most twice per name and one with only an id at most twice per id (the
/// controller answers a repeat once, INVALID_REQUEST); an entry with both or neither is
/// answered on its own, so every one is kept.
fn decode_delete_topics_v6(buf: &mut Bytes, version: i16) -> anyhow::Result<DeleteTopicsRequest> {
    let count = array_length(buf, true)?;
    if count < 0 {
        bail!("DeleteTopics topics must not be null");
    }
    let mut times_seen: HashMap<NamedBy, u8> = HashMap::new();
    let mut topics = Vec::new();
    for _ in 0..count {
        let topic = DeleteTopicState::decode(buf, version)?;
        let named_by = match (&topic.name, topic.topic_id.is_nil()) {
            (Some(name), true) => Some(NamedBy::Name(name.0.clone())),
            (None, false) => Some(NamedBy::Id(topic.topic_id)),
            _ => None,
        };
        if named_by.is_none_or(|key| keep_at_most_twice(&mut times_seen, key)) {
            topics.push(topic);
        }
    }
    need(buf, 4)?;
    let timeout_ms = buf.get_i32();
    let tagged = tagged_fields(buf)?;
    Ok(DeleteTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(timeout_ms)
        .with_unknown_tagged_fields(tagged))
}

/// Filter components of DescribeClientQuotas that can decide its answer: one per entity type
/// (user, client-id, ip) and the one after them, which is always refused.
const DECIDING_QUOTA_COMPONENTS: usize = 4;

/// DescribeClientQuotas v0-1 (`Components`, `Strict`), keeping the first
/// [`DECIDING_QUOTA_COMPONENTS`] components.
fn decode_describe_client_quotas(
    buf: &mut Bytes,
    version: i16,
) -> anyhow::Result<DescribeClientQuotasRequest> {
    let flexible = version >= 1;
    let count = array_length(buf, flexible)?;
    if count < 0 {
        bail!("DescribeClientQuotas components must not be null");
    }
    let mut components = Vec::new();
    for _ in 0..count {
        let component = ComponentData::decode(buf, version)?;
        if components.len() < DECIDING_QUOTA_COMPONENTS {
            components.push(component);
        }
    }
    let strict = boolean(buf)?;
    let tagged = if flexible {
        tagged_fields(buf)?
    } else {
        Default::default()
    };
    Ok(DescribeClientQuotasRequest::default()
        .with_components(components)
        .with_strict(strict)
        .with_unknown_tagged_fields(tagged))
}

/// A string that must not be null.
pub(super) fn string(buf: &mut Bytes, flexible: bool, what: &str) -> anyhow::Result<StrBytes> {
    let bytes = nullable_string(buf, flexible)?
        .ok_or_else(|| anyhow::anyhow!("{what} must not be null"))?;
    Ok(StrBytes::from_utf8_lossy(bytes))
}

/// SyncGroup v0-5, keeping the assignments to ids a member could have, in order.
fn decode_sync_group(buf: &mut Bytes, version: i16) -> anyhow::Result<SyncGroupRequest> {
    let flexible = version >= 4;
    let optional = |buf: &mut Bytes| super::partition_chunks::nullable_str(buf, flexible);
    let group_id = string(buf, flexible, "the group id")?;
    need(buf, 4)?;
    let generation_id = buf.get_i32();
    let member_id = string(buf, flexible, "the member id")?;
    let group_instance_id = if version >= 3 { optional(buf)? } else { None };
    let (protocol_type, protocol_name) = if version >= 5 {
        (optional(buf)?, optional(buf)?)
    } else {
        (None, None)
    };
    let count = array_length(buf, flexible)?;
    if count < 0 {
        bail!("SyncGroup assignments must not be null");
    }
    // Counted first, so the kept ones are allocated once at their size: a list grown by
    // doubling held up to one and a half times its size while it grew.
    let could_be_member = |assignment: &SyncGroupRequestAssignment| {
        gregor_actors::groups::could_be_member_id(&assignment.member_id)
    };
    let mut counting = buf.clone();
    let mut kept = 0;
    for _ in 0..count {
        kept += usize::from(could_be_member(&SyncGroupRequestAssignment::decode(
            &mut counting,
            version,
        )?));
    }
    let mut assignments = Vec::with_capacity(kept);
    for _ in 0..count {
        let assignment = SyncGroupRequestAssignment::decode(buf, version)?;
        if could_be_member(&assignment) {
            assignments.push(assignment);
        }
    }
    let tagged = if flexible {
        tagged_fields(buf)?
    } else {
        Default::default()
    };
    Ok(SyncGroupRequest::default()
        .with_group_id(GroupId(group_id))
        .with_generation_id(generation_id)
        .with_member_id(member_id)
        .with_group_instance_id(group_instance_id)
        .with_protocol_type(protocol_type)
        .with_protocol_name(protocol_name)
        .with_assignments(assignments)
        .with_unknown_tagged_fields(tagged))
}

/// DescribeConfigs v1-4 (`Resources`, `IncludeSynonyms`, `IncludeDocumentation`), each
/// resource's configuration keys kept once, in the order of their first appearance.
fn decode_describe_configs(
    buf: &mut Bytes,
    version: i16,
) -> anyhow::Result<DescribeConfigsRequest> {
    let flexible = version >= 4;
    let count = array_length(buf, flexible)?;
    if count < 0 {
        bail!("DescribeConfigs resources must not be null");
    }
    let mut resources = Vec::new();
    for _ in 0..count {
        need(buf, 1)?;
        let resource_type = buf.get_i8();
        let resource_name = string(buf, flexible, "a resource name")?;
        let keys = array_length(buf, flexible)?;
        let configuration_keys = if keys < 0 {
            None
        } else {
            let mut seen: HashSet<Bytes> = HashSet::new();
            let mut kept = Vec::new();
            for _ in 0..keys {
                let key = nullable_string(buf, flexible)?
                    .ok_or_else(|| anyhow::anyhow!("a configuration key must not be null"))?;
                if seen.insert(key.clone()) {
                    kept.push(StrBytes::from_utf8_lossy(key));
                }
            }
            Some(kept)
        };
        let tagged = if flexible {
            tagged_fields(buf)?
        } else {
            Default::default()
        };
        resources.push(
            DescribeConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(resource_name)
                .with_configuration_keys(configuration_keys)
                .with_unknown_tagged_fields(tagged),
        );
    }
    let mut request = DescribeConfigsRequest::default().with_resources(resources);
    if version >= 1 {
        request.include_synonyms = boolean(buf)?;
    }
    if version >= 3 {
        request.include_documentation = boolean(buf)?;
    }
    if flexible {
        request.unknown_tagged_fields = tagged_fields(buf)?;
    }
    Ok(request)
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;
    use kafka_protocol::protocol::{Decodable, Encodable};

    use super::*;

    fn topic(name: Option<&str>, id: u128) -> MetadataRequestTopic {
        MetadataRequestTopic::default()
            .with_name(name.map(|n| TopicName(StrBytes::from_string(n.to_owned()))))
            .with_topic_id(Uuid::from_u128(id))
    }

    #[test]
    fn every_version_matches_the_crate_without_duplicates() -> anyhow::Result<()> {
        // Short lists are searched, longer ones hashed: both, with repeats.
        for (version, padding) in (0..=13i16).flat_map(|v| [(v, 0usize), (v, 20)]) {
            let ids = version >= 10;
            let id = |n: u128| if ids { n } else { 0 };
            let name_only = |n: &str| topic(Some(n), 0);
            let mut listed = vec![
                name_only("orders"),
                topic(Some("orders"), id(0)),
                name_only(""),
                name_only("payments"),
                name_only(""),
                name_only("orders"),
            ];
            if ids {
                listed.push(topic(None, 7));
                listed.push(topic(None, 7));
                listed.push(topic(None, 8));
            }
            for i in 0..padding {
                listed.push(name_only(&format!("t{i}")));
                listed.push(name_only(&format!("t{}", i / 2)));
            }
            let mut request = MetadataRequest::default().with_topics(Some(listed));
            if version >= 4 {
                request.allow_auto_topic_creation = false;
            }
            if (8..=10).contains(&version) {
                request.include_cluster_authorized_operations = true;
            }
            if version >= 8 {
                request.include_topic_authorized_operations = true;
            }
            let mut wire = BytesMut::new();
            request.encode(&mut wire, version)?;
            let wire = wire.freeze();
            let ours = decode_metadata(&mut wire.clone(), version)?;
            let mut expected = MetadataRequest::decode(&mut wire.clone(), version)?;
            let mut seen = HashSet::new();
            if let Some(topics) = expected.topics.as_mut() {
                topics.retain(|t| seen.insert((t.name.clone(), t.topic_id)));
            }
            assert_eq!(ours, expected, "Metadata v{version}");
            let distinct = 3 + if ids { 2 } else { 0 } + padding;
            assert_eq!(ours.topics.map(|t| t.len()), Some(distinct), "v{version}");
        }
        Ok(())
    }

    #[test]
    fn an_array_longer_than_its_frame_is_refused_before_it_is_sized() -> anyhow::Result<()> {
        // Kafka's generated readers: a length beyond the bytes left fails the request.
        let mut compact = BytesMut::new();
        super::super::repeated::put_array_length(&mut compact, 0x7fff_fffe, true)?;
        compact.extend_from_slice(&[0; 30]);
        let error = request_array_length(&mut compact.freeze(), true)
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("Tried to allocate a collection of size 2147483646, but there are only 30 bytes remaining.")
        );
        let legacy = Bytes::from_static(&[0x7f, 0, 0, 1, 0, 0]);
        assert!(request_array_length(&mut legacy.clone(), false).is_err());
        // Up to the bytes left, and null, are lengths; an answer's list may come later.
        assert_eq!(
            request_array_length(&mut Bytes::from_static(&[0, 0, 0, 2, 0, 0]), false)?,
            2
        );
        assert_eq!(
            request_array_length(&mut Bytes::from_static(&[0]), true)?,
            -1
        );
        assert_eq!(array_length(&mut legacy.clone(), false)?, 0x7f00_0001);
        Ok(())
    }

    #[test]
    fn null_lists_and_bad_input() -> anyhow::Result<()> {
        for version in [1i16, 9, 13] {
            let mut wire = BytesMut::new();
            MetadataRequest::default()
                .with_topics(None)
                .encode(&mut wire, version)?;
            assert_eq!(decode_metadata(&mut wire.freeze(), version)?.topics, None);
        }
        // v0 cannot say "null"; a truncated list is an error, not a panic.
        assert!(decode_metadata(&mut Bytes::from_static(&[0xff, 0xff, 0xff, 0xff]), 0).is_err());
        assert!(decode_metadata(&mut Bytes::from_static(&[0, 0, 0, 2, 0, 0]), 1).is_err());
        // Invalid UTF-8 is read as Kafka's `readString` reads it (the JDK's decoder: an
        // encoded surrogate is one U+FFFD, as one stray byte is), so these names are one.
        let topics = decode_metadata(
            &mut Bytes::from_static(&[0, 0, 0, 3, 0, 1, 0xff, 0, 1, 0xfe, 0, 3, 0xed, 0xa0, 0x80]),
            1,
        )?
        .topics
        .unwrap_or_default();
        let names: Vec<_> = topics.iter().filter_map(|t| t.name.as_deref()).collect();
        assert_eq!(names, ["\u{fffd}"]);
        Ok(())
    }

    #[test]
    fn delete_topics_v6_keeps_each_name_and_id_at_most_twice() -> anyhow::Result<()> {
        let state = |name: Option<&str>, id: u128| {
            DeleteTopicState::default()
                .with_name(name.map(|n| TopicName(StrBytes::from_string(n.to_owned()))))
                .with_topic_id(Uuid::from_u128(id))
        };
        let listed = vec![
            state(Some("a"), 0),
            state(None, 7),
            state(Some("a"), 0),
            state(Some("a"), 0),
            state(None, 7),
            state(None, 7),
            state(None, 0),
            state(None, 0),
            state(None, 0),
            state(Some("a"), 7),
            state(Some("a"), 7),
            state(Some("a"), 7),
            state(Some(""), 0),
        ];
        let request = DeleteTopicsRequest::default()
            .with_topics(listed.clone())
            .with_timeout_ms(99);
        let mut wire = BytesMut::new();
        request.encode(&mut wire, 6)?;
        let Some(Ok(RequestKind::DeleteTopics(ours))) =
            decode(ApiKey::DeleteTopics, &mut wire.freeze(), 6)
        else {
            panic!("DeleteTopics v6 decodes");
        };
        let expected: Vec<DeleteTopicState> = [0, 1, 2, 4, 6, 7, 8, 9, 10, 11, 12]
            .iter()
            .map(|i| listed[*i].clone())
            .collect();
        assert_eq!(ours.topics, expected);
        assert_eq!(ours.timeout_ms, 99);
        assert!(decode_delete_topics_v6(&mut Bytes::from_static(&[2, 0]), 6).is_err());
        Ok(())
    }

    #[test]
    fn describe_client_quotas_keeps_the_four_deciding_components() -> anyhow::Result<()> {
        let component = |t: &str, m: Option<&str>| {
            ComponentData::default()
                .with_entity_type(StrBytes::from_string(t.to_owned()))
                .with_match_type(if m.is_some() { 0 } else { 2 })
                .with_match(m.map(|m| StrBytes::from_string(m.to_owned())))
        };
        let listed = [
            component("user", Some("alice")),
            component("client-id", None),
            component("ip", Some("10.0.0.1")),
            component("user", None),
            component("", None),
            component("ip", None),
        ];
        for version in 0..=1i16 {
            for n in [0, 3, 4, 6] {
                let request = DescribeClientQuotasRequest::default()
                    .with_components(listed[..n].to_vec())
                    .with_strict(true);
                let mut wire = BytesMut::new();
                request.encode(&mut wire, version)?;
                let wire = wire.freeze();
                let ours = decode_describe_client_quotas(&mut wire.clone(), version)?;
                let mut expected = DescribeClientQuotasRequest::decode(&mut wire.clone(), version)?;
                expected.components.truncate(DECIDING_QUOTA_COMPONENTS);
                assert_eq!(ours, expected, "v{version} with {n} components");
            }
        }
        assert!(decode_describe_client_quotas(&mut Bytes::from_static(&[0, 0, 0, 1]), 0).is_err());
        Ok(())
    }

    #[test]
    fn describe_configs_keeps_each_key_once_per_resource() -> anyhow::Result<()> {
        let key = |k: &str| StrBytes::from_string(k.to_owned());
        let resource = |name: &str, keys: Option<&[&str]>| {
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(key(name))
                .with_configuration_keys(keys.map(|keys| keys.iter().map(|k| key(k)).collect()))
        };
        for version in 1..=4i16 {
            let request = DescribeConfigsRequest::default()
                .with_resources(vec![
                    resource(
                        "t",
                        Some(&["retention.ms", "", "retention.ms", "", "cleanup.policy"]),
                    ),
                    resource("t", None),
                    resource("", Some(&[])),
                    resource("u", Some(&["a", "b"])),
                ])
                .with_include_synonyms(true)
                .with_include_documentation(version >= 3);
            let mut wire = BytesMut::new();
            request.encode(&mut wire, version)?;
            let wire = wire.freeze();
            let ours = decode_describe_configs(&mut wire.clone(), version)?;
            let mut expected = DescribeConfigsRequest::decode(&mut wire.clone(), version)?;
            expected.resources[0].configuration_keys =
                Some(vec![key("retention.ms"), key(""), key("cleanup.policy")]);
            assert_eq!(ours, expected, "DescribeConfigs v{version}");
        }
        assert!(
            decode_describe_configs(&mut Bytes::from_static(&[0, 0, 0, 1, 2, 0xff, 0xff]), 0)
                .is_err()
        );
        Ok(())
    }

    #[test]
    fn delete_topics_by_name_keeps_each_name_at_most_twice() -> anyhow::Result<()> {
        let name = |n: &str| TopicName(StrBytes::from_string(n.to_owned()));
        let listed = ["a", "b", "a", "a", "", "c", "a", "", ""]
            .map(name)
            .to_vec();
        for version in 1..=5i16 {
            let request = DeleteTopicsRequest::default()
                .with_topic_names(listed.clone())
                .with_timeout_ms(1234);
            let mut wire = BytesMut::new();
            request.encode(&mut wire, version)?;
            let ours = decode_delete_topics_by_name(&mut wire.freeze(), version)?;
            let kept: Vec<&str> = ours.topic_names.iter().map(|n| n.0.as_str()).collect();
            assert_eq!(kept, ["a", "b", "a", "", "c", ""], "v{version}");
            assert_eq!(ours.timeout_ms, 1234);
        }
        assert!(decode(ApiKey::DeleteTopics, &mut Bytes::new(), 0).is_none());
        Ok(())
    }

    #[test]
    fn create_topics_and_partitions_keep_each_name_at_most_twice() -> anyhow::Result<()> {
        let names = ["a", "b", "a", "a", "", "", "", "c"];
        let kept = ["a", "b", "a", "", "", "c"];
        for version in 2..=7i16 {
            let topics = names
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    CreatableTopic::default()
                        .with_name(TopicName(StrBytes::from_string((*n).to_owned())))
                        .with_num_partitions(i as i32)
                })
                .collect();
            let request = CreateTopicsRequest::default()
                .with_topics(topics)
                .with_timeout_ms(77)
                .with_validate_only(true);
            let mut wire = BytesMut::new();
            request.encode(&mut wire, version)?;
            let Some(Ok(RequestKind::CreateTopics(ours))) =
                decode(ApiKey::CreateTopics, &mut wire.freeze(), version)
            else {
                panic!("CreateTopics v{version} decodes");
            };
            let got: Vec<(&str, i32)> = ours
                .topics
                .iter()
                .map(|t| (t.name.0.as_str(), t.num_partitions))
                .collect();
            assert_eq!(
                got,
                [("a", 0), ("b", 1), ("a", 2), ("", 4), ("", 5), ("c", 7)],
                "v{version}"
            );
            assert_eq!((ours.timeout_ms, ours.validate_only), (77, true));
        }
        for version in 0..=3i16 {
            let topics = names
                .iter()
                .map(|n| {
                    CreatePartitionsTopic::default()
                        .with_name(TopicName(StrBytes::from_string((*n).to_owned())))
                        .with_count(3)
                })
                .collect();
            let request = CreatePartitionsRequest::default()
                .with_topics(topics)
                .with_timeout_ms(5);
            let mut wire = BytesMut::new();
            request.encode(&mut wire, version)?;
            let Some(Ok(RequestKind::CreatePartitions(ours))) =
                decode(ApiKey::CreatePartitions, &mut wire.freeze(), version)
            else {
                panic!("CreatePartitions v{version} decodes");
            };
            let got: Vec<&str> = ours.topics.iter().map(|t| t.name.0.as_str()).collect();
            assert_eq!(got, kept, "v{version}");
            assert_eq!((ours.timeout_ms, ours.validate_only), (5, false));
        }
        Ok(())
    }
}
