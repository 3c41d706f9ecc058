//! The key and value schemas of `__consumer_offsets`, as Kafka writes them.
//!
//! kafka-protocol 0.18 has no types for these coordinator records, so they are encoded here from
//! Kafka's `OffsetCommitKey/Value` and `GroupMetadataKey/Value` message definitions. Key and value
//! each start with an int16 version; the key version says which record it is. Gregor writes
//! OffsetCommitKey v1 + OffsetCommitValue v3 (v1 when an explicit expire time is set) and
//! GroupMetadataKey v2 + GroupMetadataValue v3, as Kafka does; it reads every non-flexible value
//! version and the flexible v4 of both values (Kafka 3.x+/4.x writers).

use bytes::{Buf, BufMut, Bytes};

use super::topic_names::TopicNames;
use crate::wire::put_uvarint;

pub use super::assignor::Assignment;

/// Key of an OffsetCommit record (key versions 0 and 1).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OffsetKey {
    pub group: String,
    pub topic: String,
    pub partition: i32,
}

/// One committed offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetValue {
    pub offset: i64,
    /// −1 when unknown.
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp: i64,
    /// Set only by a commit with an explicit retention (OffsetCommit v2–v4).
    pub expire_timestamp: Option<i64>,
}

/// One member as the group record stores it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberValue {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// The state of a classic group (GroupMetadataValue).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupValue {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub current_state_timestamp: i64,
    pub members: Vec<MemberValue>,
}

/// A decoded record of `__consumer_offsets`; `None` values are tombstones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CoordinatorRecord {
    Offset(OffsetKey, Option<OffsetValue>),
    Group(String, Option<GroupValue>),
    /// ConsumerGroupMetadata (key 3): the group epoch and the hash of its subscribed topics.
    ConsumerGroup(String, Option<ConsumerGroupValue>),
    /// ConsumerGroupMemberMetadata (key 5).
    ConsumerMember(String, String, Option<ConsumerMemberValue>),
    /// ConsumerGroupTargetAssignmentMetadata (key 6): the assignment epoch.
    TargetAssignmentEpoch(String, Option<i32>),
    /// ConsumerGroupTargetAssignmentMember (key 7).
    TargetAssignment(String, String, Option<Assignment>),
    /// ConsumerGroupCurrentMemberAssignment (key 8).
    CurrentAssignment(String, String, Option<CurrentAssignmentValue>),
    /// A record type Gregor does not load (partition metadata, regexes, share and streams
    /// groups).
    Other(i16),
}

/// ConsumerGroupMetadataValue: the group epoch, and in tag 0 a hash of the subscribed topics'
/// metadata (Kafka's KIP-1101 field; Gregor's own hash of names, ids and partition counts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerGroupValue {
    pub epoch: i32,
    pub metadata_hash: i64,
}

/// ConsumerGroupMemberMetadataValue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerMemberValue {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: TopicNames,
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    /// Tag 0, ClassicMemberMetadata: set for a member that uses the classic protocol.
    pub classic: Option<ClassicMemberValue>,
}

/// ClassicMemberMetadata: a consumer-group member that joined with JoinGroup keeps its
/// session timeout and its protocols (name, metadata) in request order, so a reload, or a
/// downgrade back to a classic group, has them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassicMemberValue {
    pub session_timeout_ms: i32,
    pub protocols: Vec<(String, Bytes)>,
}

/// ConsumerGroupCurrentMemberAssignmentValue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CurrentAssignmentValue {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    /// Kafka's MemberState: 0 stable, 1 unrevoked partitions, 2 unreleased partitions.
    pub state: i8,
    pub assigned: Assignment,
    pub pending_revocation: Assignment,
}

/// Record types (key versions) of the KIP-848 records.
const CONSUMER_GROUP_METADATA: i16 = 3;
const CONSUMER_GROUP_MEMBER_METADATA: i16 = 5;
const CONSUMER_GROUP_TARGET_METADATA: i16 = 6;
const CONSUMER_GROUP_TARGET_MEMBER: i16 = 7;
const CONSUMER_GROUP_CURRENT_ASSIGNMENT: i16 = 8;

fn put_string(out: &mut Vec<u8>, s: &str) {
    // Group ids, topic names, member ids and metadata all fit an int16 length: their requests
    // carry them with one (or with a shorter compact length), and commit metadata is bounded by
    // `offset.metadata.max.bytes`.
    let len = i16::try_from(s.len()).unwrap_or(i16::MAX);
    out.put_i16(len);
    out.extend_from_slice(&s.as_bytes()[..len as usize]);
}

fn put_nullable_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_string(out, s),
        None => out.put_i16(-1),
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.put_i32(b.len() as i32);
    out.extend_from_slice(b);
}

/// OffsetCommitKey v1.
pub fn offset_key(key: &OffsetKey) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + key.group.len() + key.topic.len());
    out.put_i16(1);
    put_string(&mut out, &key.group);
    put_string(&mut out, &key.topic);
    out.put_i32(key.partition);
    out
}

/// OffsetCommitValue v3, or v1 when the commit carries an explicit expire time.
pub fn offset_value(value: &OffsetValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + value.metadata.len());
    match value.expire_timestamp {
        Some(expire) => {
            out.put_i16(1);
            out.put_i64(value.offset);
            put_string(&mut out, &value.metadata);
            out.put_i64(value.commit_timestamp);
            out.put_i64(expire);
        }
        None => {
            out.put_i16(3);
            out.put_i64(value.offset);
            out.put_i32(value.leader_epoch);
            put_string(&mut out, &value.metadata);
            out.put_i64(value.commit_timestamp);
        }
    }
    out
}

/// GroupMetadataKey v2.
pub fn group_key(group: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + group.len());
    out.put_i16(2);
    put_string(&mut out, group);
    out
}

/// GroupMetadataValue v3.
pub fn group_value(value: &GroupValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.put_i16(3);
    put_string(&mut out, &value.protocol_type);
    out.put_i32(value.generation);
    put_nullable_string(&mut out, value.protocol.as_deref());
    put_nullable_string(&mut out, value.leader.as_deref());
    out.put_i64(value.current_state_timestamp);
    out.put_i32(value.members.len() as i32);
    for member in &value.members {
        put_string(&mut out, &member.member_id);
        put_nullable_string(&mut out, member.group_instance_id.as_deref());
        put_string(&mut out, &member.client_id);
        put_string(&mut out, &member.client_host);
        out.put_i32(member.rebalance_timeout_ms);
        out.put_i32(member.session_timeout_ms);
        put_bytes(&mut out, &member.subscription);
        put_bytes(&mut out, &member.assignment);
    }
    out
}

/// Flexible (compact) encodings of the KIP-848 values: lengths as unsigned varints of
/// length + 1, and an empty tagged-field section after every struct.
fn put_compact_string(out: &mut Vec<u8>, s: &str) {
    put_uvarint(out, s.len() as u32 + 1);
    out.extend_from_slice(s.as_bytes());
}

fn put_compact_nullable_string(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => put_compact_string(out, s),
        None => put_uvarint(out, 0),
    }
}

fn put_compact_assignment(out: &mut Vec<u8>, assignment: &Assignment) {
    put_uvarint(out, assignment.len() as u32 + 1);
    for (topic, partitions) in assignment {
        out.extend_from_slice(topic.as_bytes());
        put_uvarint(out, partitions.len() as u32 + 1);
        for p in partitions {
            out.put_i32(*p);
        }
        put_uvarint(out, 0);
    }
}

/// A KIP-848 key: the record type then the group id (and member id), non-flexible.
fn consumer_key(record_type: i16, group: &str, member: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(6 + group.len() + member.map_or(0, str::len));
    out.put_i16(record_type);
    put_string(&mut out, group);
    if let Some(member) = member {
        put_string(&mut out, member);
    }
    out
}

/// ConsumerGroupMetadataKey.
pub fn consumer_group_key(group: &str) -> Vec<u8> {
    consumer_key(CONSUMER_GROUP_METADATA, group, None)
}

/// ConsumerGroupMetadataValue v0 with the metadata hash in tag 0.
pub fn consumer_group_value(value: &ConsumerGroupValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(20);
    out.put_i16(0);
    out.put_i32(value.epoch);
    put_uvarint(&mut out, 1);
    put_uvarint(&mut out, 0);
    put_uvarint(&mut out, 8);
    out.put_i64(value.metadata_hash);
    out
}

/// ConsumerGroupMemberMetadataKey.
pub fn consumer_member_key(group: &str, member: &str) -> Vec<u8> {
    consumer_key(CONSUMER_GROUP_MEMBER_METADATA, group, Some(member))
}

/// ConsumerGroupMemberMetadataValue v0.
pub fn consumer_member_value(value: &ConsumerMemberValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.put_i16(0);
    put_compact_nullable_string(&mut out, value.instance_id.as_deref());
    put_compact_nullable_string(&mut out, value.rack_id.as_deref());
    put_compact_string(&mut out, &value.client_id);
    put_compact_string(&mut out, &value.client_host);
    put_uvarint(&mut out, value.subscribed_topic_names.len() as u32 + 1);
    for name in value.subscribed_topic_names.iter() {
        put_compact_string(&mut out, name);
    }
    put_compact_nullable_string(&mut out, value.subscribed_topic_regex.as_deref());
    out.put_i32(value.rebalance_timeout_ms);
    put_compact_nullable_string(&mut out, value.server_assignor.as_deref());
    match &value.classic {
        None => put_uvarint(&mut out, 0),
        Some(classic) => {
            // A nullable struct in a tagged field: a presence byte (1), then the struct.
            let mut field = vec![1u8];
            field.put_i32(classic.session_timeout_ms);
            put_uvarint(&mut field, classic.protocols.len() as u32 + 1);
            for (name, metadata) in &classic.protocols {
                put_compact_string(&mut field, name);
                put_uvarint(&mut field, metadata.len() as u32 + 1);
                field.extend_from_slice(metadata);
                put_uvarint(&mut field, 0);
            }
            put_uvarint(&mut field, 0);
            put_uvarint(&mut out, 1);
            put_uvarint(&mut out, 0);
            put_uvarint(&mut out, field.len() as u32);
            out.extend_from_slice(&field);
        }
    }
    out
}

/// ConsumerGroupTargetAssignmentMetadataKey.
pub fn target_epoch_key(group: &str) -> Vec<u8> {
    consumer_key(CONSUMER_GROUP_TARGET_METADATA, group, None)
}

/// ConsumerGroupTargetAssignmentMetadataValue v0.
pub fn target_epoch_value(epoch: i32) -> Vec<u8> {
    let mut out = Vec::with_capacity(7);
    out.put_i16(0);
    out.put_i32(epoch);
    put_uvarint(&mut out, 0);
    out
}

/// ConsumerGroupTargetAssignmentMemberKey.
pub fn target_member_key(group: &str, member: &str) -> Vec<u8> {
    consumer_key(CONSUMER_GROUP_TARGET_MEMBER, group, Some(member))
}

/// ConsumerGroupTargetAssignmentMemberValue v0.
pub fn target_member_value(assignment: &Assignment) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 24 * assignment.len());
    out.put_i16(0);
    put_compact_assignment(&mut out, assignment);
    put_uvarint(&mut out, 0);
    out
}

/// ConsumerGroupCurrentMemberAssignmentKey.
pub fn current_assignment_key(group: &str, member: &str) -> Vec<u8> {
    consumer_key(CONSUMER_GROUP_CURRENT_ASSIGNMENT, group, Some(member))
}

/// ConsumerGroupCurrentMemberAssignmentValue v0.
pub fn current_assignment_value(value: &CurrentAssignmentValue) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + 24 * value.assigned.len());
    out.put_i16(0);
    out.put_i32(value.member_epoch);
    out.put_i32(value.previous_member_epoch);
    out.put_i8(value.state);
    put_compact_assignment(&mut out, &value.assigned);
    put_compact_assignment(&mut out, &value.pending_revocation);
    put_uvarint(&mut out, 0);
    out
}

/// A cursor over a record's key or value that fails instead of panicking on short input.
struct Reader<'a> {
    buf: &'a [u8],
    flexible: bool,
}

type Decoded<T> = Result<T, String>;

impl<'a> Reader<'a> {
    fn need(&self, n: usize) -> Decoded<()> {
        if self.buf.remaining() < n {
            Err(format!(
                "record ends early: {n} bytes needed, {} left",
                self.buf.len()
            ))
        } else {
            Ok(())
        }
    }
    fn i8(&mut self) -> Decoded<i8> {
        self.need(1)?;
        Ok(self.buf.get_i8())
    }
    fn i16(&mut self) -> Decoded<i16> {
        self.need(2)?;
        Ok(self.buf.get_i16())
    }
    fn i32(&mut self) -> Decoded<i32> {
        self.need(4)?;
        Ok(self.buf.get_i32())
    }
    fn i64(&mut self) -> Decoded<i64> {
        self.need(8)?;
        Ok(self.buf.get_i64())
    }
    fn unsigned_varint(&mut self) -> Decoded<u32> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            self.need(1)?;
            let byte = self.buf.get_u8();
            value |= u32::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint longer than 5 bytes".to_owned())
    }
    /// A length: −1 is null. Flexible versions store length + 1 as an unsigned varint.
    fn length(&mut self, wide: bool) -> Decoded<Option<usize>> {
        let len = if self.flexible {
            i64::from(self.unsigned_varint()?) - 1
        } else if wide {
            i64::from(self.i32()?)
        } else {
            i64::from(self.i16()?)
        };
        if len < 0 {
            return Ok(None);
        }
        let len = len as usize;
        self.need(len)?;
        Ok(Some(len))
    }
    fn take(&mut self, len: usize) -> &'a [u8] {
        let (head, tail) = self.buf.split_at(len);
        self.buf = tail;
        head
    }
    fn nullable_string(&mut self) -> Decoded<Option<String>> {
        match self.length(false)? {
            None => Ok(None),
            // As Kafka's `readString`: invalid UTF-8 replaced, not refused.
            Some(len) => Ok(Some(kafka_protocol::protocol::java_utf8_lossy(
                self.take(len),
            ))),
        }
    }
    fn string(&mut self) -> Decoded<String> {
        self.nullable_string()?
            .ok_or_else(|| "null in a non-nullable string".to_owned())
    }
    fn bytes(&mut self) -> Decoded<Bytes> {
        match self.length(true)? {
            None => Ok(Bytes::new()),
            Some(len) => Ok(Bytes::copy_from_slice(self.take(len))),
        }
    }
    fn array_len(&mut self) -> Decoded<usize> {
        let len = if self.flexible {
            i64::from(self.unsigned_varint()?) - 1
        } else {
            i64::from(self.i32()?)
        };
        // Every element takes at least one byte, which bounds what a corrupt count can claim.
        Ok(usize::try_from(len).unwrap_or(0).min(self.buf.len()))
    }
    fn uuid(&mut self) -> Decoded<uuid::Uuid> {
        self.need(16)?;
        let mut id = [0u8; 16];
        id.copy_from_slice(self.take(16));
        Ok(uuid::Uuid::from_bytes(id))
    }
    fn assignment(&mut self) -> Decoded<Assignment> {
        let mut out = Assignment::new();
        for _ in 0..self.array_len()? {
            let topic = self.uuid()?;
            let partitions = out.entry(topic).or_default();
            for _ in 0..self.array_len()? {
                partitions.insert(self.i32()?);
            }
            self.tagged_fields()?;
        }
        Ok(out)
    }
    /// Reads a flexible struct's tagged fields, returning tag 0 when it is an int64.
    fn tagged_i64_zero(&mut self) -> Decoded<Option<i64>> {
        let mut found = None;
        let count = self.unsigned_varint()?;
        for _ in 0..count {
            let tag = self.unsigned_varint()?;
            let size = self.unsigned_varint()? as usize;
            self.need(size)?;
            let data = self.take(size);
            if tag == 0 && size == 8 {
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(data);
                found = Some(i64::from_be_bytes(bytes));
            }
        }
        Ok(found)
    }
    /// Skips a flexible struct's tagged fields.
    fn tagged_fields(&mut self) -> Decoded<()> {
        if !self.flexible {
            return Ok(());
        }
        let count = self.unsigned_varint()?;
        for _ in 0..count {
            self.unsigned_varint()?;
            let size = self.unsigned_varint()? as usize;
            self.need(size)?;
            self.take(size);
        }
        Ok(())
    }
}

/// Decodes one record of `__consumer_offsets` from its key and value.
pub fn decode(key: &[u8], value: Option<&[u8]>) -> Decoded<CoordinatorRecord> {
    let mut k = Reader {
        buf: key,
        flexible: false,
    };
    let key_version = k.i16()?;
    match key_version {
        0 | 1 => {
            let key = OffsetKey {
                group: k.string()?,
                topic: k.string()?,
                partition: k.i32()?,
            };
            let value = value.map(decode_offset_value).transpose()?;
            Ok(CoordinatorRecord::Offset(key, value))
        }
        2 => {
            let group = k.string()?;
            let value = value.map(decode_group_value).transpose()?;
            Ok(CoordinatorRecord::Group(group, value))
        }
        CONSUMER_GROUP_METADATA => {
            let group = k.string()?;
            let value = value
                .map(|v| {
                    let mut r = flexible_value(v)?;
                    let epoch = r.i32()?;
                    let metadata_hash = r.tagged_i64_zero()?.unwrap_or(0);
                    Ok::<_, String>(ConsumerGroupValue {
                        epoch,
                        metadata_hash,
                    })
                })
                .transpose()?;
            Ok(CoordinatorRecord::ConsumerGroup(group, value))
        }
        CONSUMER_GROUP_MEMBER_METADATA => {
            let (group, member) = (k.string()?, k.string()?);
            let value = value.map(decode_consumer_member).transpose()?;
            Ok(CoordinatorRecord::ConsumerMember(group, member, value))
        }
        CONSUMER_GROUP_TARGET_METADATA => {
            let group = k.string()?;
            let value = value.map(|v| flexible_value(v)?.i32()).transpose()?;
            Ok(CoordinatorRecord::TargetAssignmentEpoch(group, value))
        }
        CONSUMER_GROUP_TARGET_MEMBER => {
            let (group, member) = (k.string()?, k.string()?);
            let value = value.map(|v| flexible_value(v)?.assignment()).transpose()?;
            Ok(CoordinatorRecord::TargetAssignment(group, member, value))
        }
        CONSUMER_GROUP_CURRENT_ASSIGNMENT => {
            let (group, member) = (k.string()?, k.string()?);
            let value = value
                .map(|v| {
                    let mut r = flexible_value(v)?;
                    let value = CurrentAssignmentValue {
                        member_epoch: r.i32()?,
                        previous_member_epoch: r.i32()?,
                        state: r.i8()?,
                        assigned: r.assignment()?,
                        pending_revocation: r.assignment()?,
                    };
                    r.tagged_fields()?;
                    Ok::<_, String>(value)
                })
                .transpose()?;
            Ok(CoordinatorRecord::CurrentAssignment(group, member, value))
        }
        other => Ok(CoordinatorRecord::Other(other)),
    }
}

/// A reader past the version of a flexible v0 value.
fn flexible_value(value: &[u8]) -> Decoded<Reader<'_>> {
    let mut r = Reader {
        buf: value,
        flexible: true,
    };
    let version = r.i16()?;
    if version != 0 {
        return Err(format!("unknown KIP-848 record value version {version}"));
    }
    Ok(r)
}

fn decode_consumer_member(value: &[u8]) -> Decoded<ConsumerMemberValue> {
    let mut r = flexible_value(value)?;
    let instance_id = r.nullable_string()?;
    let rack_id = r.nullable_string()?;
    let client_id = r.string()?;
    let client_host = r.string()?;
    let mut subscribed_topic_names = Vec::new();
    for _ in 0..r.array_len()? {
        subscribed_topic_names.push(r.string()?);
    }
    let subscribed_topic_regex = r.nullable_string()?;
    let rebalance_timeout_ms = r.i32()?;
    let server_assignor = r.nullable_string()?;
    let mut classic = None;
    for _ in 0..r.unsigned_varint()? {
        let tag = r.unsigned_varint()?;
        let size = r.unsigned_varint()? as usize;
        r.need(size)?;
        let data = r.take(size);
        if tag == 0 {
            classic = decode_classic_member(data)?;
        }
    }
    Ok(ConsumerMemberValue {
        instance_id,
        rack_id,
        client_id,
        client_host,
        subscribed_topic_names: TopicNames::from_names(subscribed_topic_names),
        subscribed_topic_regex,
        rebalance_timeout_ms,
        server_assignor,
        classic,
    })
}

/// ClassicMemberMetadata from its tagged field: a presence byte (negative: null), the struct.
fn decode_classic_member(data: &[u8]) -> Decoded<Option<ClassicMemberValue>> {
    let mut r = Reader {
        buf: data,
        flexible: true,
    };
    if r.i8()? < 0 {
        return Ok(None);
    }
    let session_timeout_ms = r.i32()?;
    let mut protocols = Vec::new();
    for _ in 0..r.array_len()? {
        let name = r.string()?;
        let metadata = r.bytes()?;
        r.tagged_fields()?;
        protocols.push((name, metadata));
    }
    r.tagged_fields()?;
    Ok(Some(ClassicMemberValue {
        session_timeout_ms,
        protocols,
    }))
}

fn decode_offset_value(value: &[u8]) -> Decoded<OffsetValue> {
    let mut r = Reader {
        buf: value,
        flexible: false,
    };
    let version = r.i16()?;
    if !(0..=4).contains(&version) {
        return Err(format!("unknown OffsetCommitValue version {version}"));
    }
    r.flexible = version >= 4;
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = r.string()?;
    let commit_timestamp = r.i64()?;
    let expire_timestamp = if version == 1 { Some(r.i64()?) } else { None };
    r.tagged_fields()?;
    Ok(OffsetValue {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp,
        expire_timestamp,
    })
}

fn decode_group_value(value: &[u8]) -> Decoded<GroupValue> {
    let mut r = Reader {
        buf: value,
        flexible: false,
    };
    let version = r.i16()?;
    if !(0..=4).contains(&version) {
        return Err(format!("unknown GroupMetadataValue version {version}"));
    }
    r.flexible = version >= 4;
    let protocol_type = r.string()?;
    let generation = r.i32()?;
    let protocol = r.nullable_string()?;
    let leader = r.nullable_string()?;
    let current_state_timestamp = if version >= 2 { r.i64()? } else { -1 };
    let count = r.array_len()?;
    let mut members = Vec::with_capacity(count);
    for _ in 0..count {
        let member_id = r.string()?;
        let group_instance_id = if version >= 3 {
            r.nullable_string()?
        } else {
            None
        };
        let client_id = r.string()?;
        let client_host = r.string()?;
        let rebalance_timeout_ms = if version >= 1 { r.i32()? } else { -1 };
        let session_timeout_ms = r.i32()?;
        let subscription = r.bytes()?;
        let assignment = r.bytes()?;
        r.tagged_fields()?;
        members.push(MemberValue {
            member_id,
            group_instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms: if rebalance_timeout_ms < 0 {
                session_timeout_ms
            } else {
                rebalance_timeout_ms
            },
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    r.tagged_fields()?;
    Ok(GroupValue {
        protocol_type,
        generation,
        protocol,
        leader,
        current_state_timestamp,
        members,
    })
}

/// The topics of a consumer-protocol subscription (`ConsumerProtocolSubscription`, any version:
/// they all start with the int16 version and the topic array); `None` when the bytes are not one.
pub fn subscribed_topics(subscription: &[u8]) -> Option<Vec<String>> {
    let mut r = Reader {
        buf: subscription,
        flexible: false,
    };
    r.i16().ok()?;
    let count = r.array_len().ok()?;
    (0..count).map(|_| r.string().ok()).collect()
}

/// A `ConsumerProtocolSubscription` as the coordinator reads it when a classic member joins a
/// consumer group, or a classic group becomes one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsumerSubscription {
    pub version: i16,
    pub topics: Vec<String>,
    /// v1+: the partitions the member owns, by topic name.
    pub owned: Vec<(String, Vec<i32>)>,
    /// v3+.
    pub rack_id: Option<String>,
}

/// Reads topic partitions as the consumer protocol lists them (topic, int32 array).
fn topic_partitions(r: &mut Reader<'_>) -> Decoded<Vec<(String, Vec<i32>)>> {
    let mut out = Vec::new();
    for _ in 0..r.array_len()? {
        let topic = r.string()?;
        let mut partitions = Vec::new();
        for _ in 0..r.array_len()? {
            partitions.push(r.i32()?);
        }
        out.push((topic, partitions));
    }
    Ok(out)
}

/// Decodes a `ConsumerProtocolSubscription` (v0–v3; a later version is read as v3, as Kafka
/// does); an error (Kafka's SchemaException) for bytes that are not one.
pub fn decode_subscription(bytes: &[u8]) -> Decoded<ConsumerSubscription> {
    let mut r = Reader {
        buf: bytes,
        flexible: false,
    };
    let version = r.i16()?;
    if version < 0 {
        return Err(format!("Unsupported subscription version: {version}"));
    }
    let mut topics = Vec::new();
    for _ in 0..r.array_len()? {
        topics.push(r.string()?);
    }
    if let Some(len) = r.length(true)? {
        r.take(len);
    }
    let mut subscription = ConsumerSubscription {
        version,
        topics,
        ..ConsumerSubscription::default()
    };
    if version >= 1 {
        subscription.owned = topic_partitions(&mut r)?;
    }
    if version >= 2 {
        r.i32()?;
    }
    if version >= 3 {
        subscription.rack_id = r.nullable_string()?;
    }
    Ok(subscription)
}

/// Decodes a `ConsumerProtocolAssignment`'s partitions, by topic name.
pub fn decode_assignment(bytes: &[u8]) -> Decoded<Vec<(String, Vec<i32>)>> {
    let mut r = Reader {
        buf: bytes,
        flexible: false,
    };
    let version = r.i16()?;
    if version < 0 {
        return Err(format!("Unsupported assignment version: {version}"));
    }
    topic_partitions(&mut r)
}

/// Encodes a `ConsumerProtocolAssignment` of `partitions` (by topic name, no user data) in
/// `version` (every version 0–3 has this layout; a later one is written as 3).
pub fn encode_assignment(version: i16, partitions: &[(String, Vec<i32>)]) -> Bytes {
    let mut out = Vec::with_capacity(16);
    out.put_i16(version.clamp(0, 3));
    out.put_i32(partitions.len() as i32);
    for (topic, ps) in partitions {
        put_string(&mut out, topic);
        out.put_i32(ps.len() as i32);
        for p in ps {
            out.put_i32(*p);
        }
    }
    out.put_i32(-1);
    Bytes::from(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn offset_records_match_kafkas_bytes() {
        let key = OffsetKey {
            group: "g".into(),
            topic: "t".into(),
            partition: 3,
        };
        assert_eq!(
            offset_key(&key),
            vec![0, 1, 0, 1, b'g', 0, 1, b't', 0, 0, 0, 3]
        );
        let value = OffsetValue {
            offset: 42,
            leader_epoch: 7,
            metadata: "m".into(),
            commit_timestamp: 1000,
            expire_timestamp: None,
        };
        let bytes = offset_value(&value);
        assert_eq!(
            bytes,
            vec![0, 3, 0, 0, 0, 0, 0, 0, 0, 42, 0, 0, 0, 7, 0, 1, b'm', 0, 0, 0, 0, 0, 0, 3, 232]
        );
        assert_eq!(
            decode(&offset_key(&key), Some(&bytes)).unwrap(),
            CoordinatorRecord::Offset(key.clone(), Some(value))
        );
        assert_eq!(
            decode(&offset_key(&key), None).unwrap(),
            CoordinatorRecord::Offset(key, None)
        );
    }

    #[test]
    fn v1_offset_value_keeps_the_expire_time() {
        let value = OffsetValue {
            offset: 5,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 10,
            expire_timestamp: Some(20),
        };
        let bytes = offset_value(&value);
        assert_eq!(&bytes[..2], &[0, 1]);
        assert_eq!(bytes.len(), 2 + 8 + 2 + 8 + 8);
        assert_eq!(decode_offset_value(&bytes).unwrap(), value);
    }

    #[test]
    fn flexible_v4_offset_value_decodes() {
        // version 4, offset 9, epoch 1, compact "ab", timestamp 2, one tagged field (tag 0, 16
        // bytes: a topic id), then nothing.
        let mut bytes = vec![0, 4];
        bytes.extend_from_slice(&9i64.to_be_bytes());
        bytes.extend_from_slice(&1i32.to_be_bytes());
        bytes.extend_from_slice(&[3, b'a', b'b']);
        bytes.extend_from_slice(&2i64.to_be_bytes());
        bytes.extend_from_slice(&[1, 0, 16]);
        bytes.extend_from_slice(&[0xAA; 16]);
        let value = decode_offset_value(&bytes).unwrap();
        assert_eq!(
            (value.offset, value.leader_epoch, value.metadata.as_str()),
            (9, 1, "ab")
        );
        assert_eq!(value.commit_timestamp, 2);
    }

    #[test]
    fn group_records_round_trip() {
        let value = GroupValue {
            protocol_type: "consumer".into(),
            generation: 4,
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            current_state_timestamp: 99,
            members: vec![MemberValue {
                member_id: "m-1".into(),
                group_instance_id: Some("i".into()),
                client_id: "c".into(),
                client_host: "/127.0.0.1".into(),
                rebalance_timeout_ms: 300_000,
                session_timeout_ms: 45_000,
                subscription: Bytes::from_static(&[1, 2]),
                assignment: Bytes::from_static(&[3]),
            }],
        };
        let key = group_key("grp");
        assert_eq!(key, vec![0, 2, 0, 3, b'g', b'r', b'p']);
        assert_eq!(
            decode(&key, Some(&group_value(&value))).unwrap(),
            CoordinatorRecord::Group("grp".into(), Some(value))
        );
    }

    #[test]
    fn truncated_records_are_errors_not_panics() {
        let value = group_value(&GroupValue {
            protocol_type: "consumer".into(),
            generation: 1,
            protocol: None,
            leader: None,
            current_state_timestamp: 0,
            members: vec![],
        });
        for cut in 0..value.len() - 1 {
            assert!(
                decode(&group_key("g"), Some(&value[..cut])).is_err(),
                "{cut}"
            );
        }
        assert!(decode(&[0], None).is_err());
        // ConsumerGroupPartitionMetadata (key 4) is not loaded.
        assert_eq!(
            decode(&[0, 4, 0, 0], None).unwrap(),
            CoordinatorRecord::Other(4)
        );
    }

    #[test]
    fn consumer_group_records_match_kafkas_bytes() {
        // ConsumerGroupMetadataKey: type 3, "g"; value v0: epoch 7, tag 0 = hash 1.
        assert_eq!(consumer_group_key("g"), vec![0, 3, 0, 1, b'g']);
        let value = ConsumerGroupValue {
            epoch: 7,
            metadata_hash: 1,
        };
        let bytes = consumer_group_value(&value);
        assert_eq!(
            bytes,
            vec![0, 0, 0, 0, 0, 7, 1, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1]
        );
        assert_eq!(
            decode(&consumer_group_key("g"), Some(&bytes)).unwrap(),
            CoordinatorRecord::ConsumerGroup("g".into(), Some(value))
        );
        // TargetAssignmentMetadata v0: epoch 3, no tags.
        assert_eq!(target_epoch_value(3), vec![0, 0, 0, 0, 0, 3, 0]);
        // TargetAssignmentMember v0: one topic (16-byte id), partitions [1, 2].
        let topic = uuid::Uuid::from_u128(0x0102);
        let assignment = Assignment::from([(topic, [1, 2].into_iter().collect())]);
        let mut expected = vec![0, 0, 2];
        expected.extend_from_slice(topic.as_bytes());
        expected.extend_from_slice(&[3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0]);
        assert_eq!(target_member_value(&assignment), expected);
    }

    #[test]
    fn consumer_member_records_round_trip() {
        let member = ConsumerMemberValue {
            instance_id: Some("i".into()),
            rack_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            subscribed_topic_names: TopicNames::from_names(["a", "b"]),
            subscribed_topic_regex: Some("t.*".into()),
            rebalance_timeout_ms: 300_000,
            server_assignor: Some("range".into()),
            classic: None,
        };
        let key = consumer_member_key("g", "m");
        assert_eq!(key, vec![0, 5, 0, 1, b'g', 0, 1, b'm']);
        assert_eq!(
            decode(&key, Some(&consumer_member_value(&member))).unwrap(),
            CoordinatorRecord::ConsumerMember("g".into(), "m".into(), Some(member.clone()))
        );
        // A classic member: tag 0 holds its session timeout and protocols.
        let classic = ConsumerMemberValue {
            classic: Some(ClassicMemberValue {
                session_timeout_ms: 10_000,
                protocols: vec![("range".into(), Bytes::from_static(&[0, 1]))],
            }),
            ..member
        };
        let value = consumer_member_value(&classic);
        // ..., server assignor "range", 1 tagged field: tag 0, 17 bytes: present, 10000,
        // [("range", [0, 1])], no tags.
        assert_eq!(
            value[value.len() - 20..],
            [1, 0, 17, 1, 0, 0, 0x27, 0x10, 2, 6, b'r', b'a', b'n', b'g', b'e', 3, 0, 1, 0, 0]
        );
        assert_eq!(
            decode(&key, Some(&value)).unwrap(),
            CoordinatorRecord::ConsumerMember("g".into(), "m".into(), Some(classic))
        );
        for cut in 0..value.len() - 1 {
            assert!(decode(&key, Some(&value[..cut])).is_err(), "{cut}");
        }
        let topic = uuid::Uuid::from_u128(9);
        let current = CurrentAssignmentValue {
            member_epoch: 4,
            previous_member_epoch: 3,
            state: 1,
            assigned: Assignment::from([(topic, [0].into_iter().collect())]),
            pending_revocation: Assignment::from([(topic, [1].into_iter().collect())]),
        };
        let key = current_assignment_key("g", "m");
        let value = current_assignment_value(&current);
        assert_eq!(
            decode(&key, Some(&value)).unwrap(),
            CoordinatorRecord::CurrentAssignment("g".into(), "m".into(), Some(current))
        );
        for cut in 0..value.len() - 1 {
            assert!(decode(&key, Some(&value[..cut])).is_err(), "{cut}");
        }
        assert_eq!(
            decode(&target_member_key("g", "m"), None).unwrap(),
            CoordinatorRecord::TargetAssignment("g".into(), "m".into(), None)
        );
    }

    #[test]
    fn subscription_topics_are_read() {
        // ConsumerProtocolSubscription v0: version 0, ["a", "bc"], user data null.
        let bytes = [
            0, 0, 0, 0, 0, 2, 0, 1, b'a', 0, 2, b'b', b'c', 255, 255, 255, 255,
        ];
        assert_eq!(
            subscribed_topics(&bytes),
            Some(vec!["a".to_owned(), "bc".to_owned()])
        );
        assert_eq!(subscribed_topics(&[0]), None);
    }

    #[test]
    fn consumer_protocol_subscriptions_and_assignments() {
        // v1: ["t"], user data null, owned [("t", [0, 2])].
        let mut v1 = vec![0, 1, 0, 0, 0, 1, 0, 1, b't', 255, 255, 255, 255];
        v1.extend([0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2]);
        let s = decode_subscription(&v1).unwrap();
        assert_eq!(
            (s.version, s.topics, s.owned, s.rack_id),
            (
                1,
                vec!["t".to_owned()],
                vec![("t".to_owned(), vec![0, 2])],
                None
            )
        );
        // v3: generation 5 and rack "r".
        let mut v3 = v1.clone();
        v3[1] = 3;
        v3.extend([0, 0, 0, 5, 0, 1, b'r']);
        assert_eq!(decode_subscription(&v3).unwrap().rack_id, Some("r".into()));
        assert!(decode_subscription(&v3[..v3.len() - 1]).is_err());
        assert!(decode_subscription(&[255, 255]).is_err());
        let assignment = encode_assignment(1, &[("t".to_owned(), vec![1, 3])]);
        assert_eq!(
            &assignment[..],
            [
                0, 1, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 3, 255, 255, 255,
                255
            ]
        );
        assert_eq!(
            decode_assignment(&assignment).unwrap(),
            vec![("t".to_owned(), vec![1, 3])]
        );
    }
}
