//! [`ImageDigest`]: a fingerprint of an image's content that every node can compare.
//!
//! The digest is the wrapping sum, modulo 2^128, of a 128-bit hash (XXH3) of every record of
//! the image's snapshot form ([`MetadataImage::to_records`]): feature levels, broker (with its
//! fenced state and epoch) and controller registrations, topics with their ids, partitions with
//! replicas, ISR, leader and epochs, configs and client quotas. The provenance (log offset,
//! time) is not part of it. A sum does not depend on the order of the records, so two images
//! with the same content have the same digest however they were built, and it can be kept up
//! to date by each delta in O(changed records): subtract the hash of what the delta replaces,
//! add the hash of what it puts in its place ([`MetadataDelta::apply`]). Rebuilding the digest
//! of a 10^6-partition image on every change would cost as much as a snapshot.
//!
//!
//! Topics and partitions are the bulk of an image, so their records are hashed without being
//! built: `partition_hash` and `topic_hash` encode the fields straight from the image into a
//! stack buffer, byte for byte what postcard writes for the record (the tests hold them to
//! it), and hash that.
//!
//! [`MetadataImage::to_records`]: super::MetadataImage::to_records
//! [`MetadataDelta::apply`]: crate::delta::MetadataDelta::apply

use std::fmt;

use serde::Serialize;
use twox_hash::XxHash3_128;
use uuid::Uuid;

use super::partition::PartitionRegistration;
use crate::records::{type_ids, MetadataRecord, RecordFrame, CURRENT_VERSION};

/// Order-independent digest of an image's content; see the module docs.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ImageDigest(u128);

impl ImageDigest {
    /// The digest of the records `fill` writes (an area of an image, or one entry of it).
    pub fn of(fill: impl FnOnce(&mut Vec<MetadataRecord>)) -> Self {
        let mut records = Vec::new();
        fill(&mut records);
        let mut digest = ImageDigest::default();
        for record in &records {
            digest.add(record);
        }
        digest
    }

    /// Counts `record` in.
    pub fn add(&mut self, record: &MetadataRecord) {
        self.0 = self.0.wrapping_add(record_hash(record));
    }

    /// Adds every record another digest counted.
    pub fn add_all(&mut self, other: ImageDigest) {
        self.0 = self.0.wrapping_add(other.0);
    }

    /// Removes every record another digest counted.
    pub fn remove_all(&mut self, other: ImageDigest) {
        self.0 = self.0.wrapping_sub(other.0);
    }

    /// Counts in a record whose hash is `hash` (from [`partition_hash`] or [`topic_hash`]).
    pub(crate) fn add_hash(&mut self, hash: u128) {
        self.0 = self.0.wrapping_add(hash);
    }

    /// Takes out a record whose hash is `hash`.
    pub(crate) fn remove_hash(&mut self, hash: u128) {
        self.0 = self.0.wrapping_sub(hash);
    }

    /// The digest as a number.
    pub fn value(self) -> u128 {
        self.0
    }

    /// The low 52 bits: what a Prometheus gauge (an f64) holds exactly.
    pub fn gauge_value(self) -> f64 {
        (self.0 & ((1 << 52) - 1)) as f64
    }
}

/// 32 lowercase hex digits.
impl fmt::Display for ImageDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl fmt::Debug for ImageDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ImageDigest({self})")
    }
}

fn record_hash(record: &MetadataRecord) -> u128 {
    // Records are plain data: postcard encodes them deterministically and cannot fail on them.
    let bytes = postcard::to_allocvec(record).unwrap_or_default();
    XxHash3_128::oneshot(&bytes)
}

/// `PartitionRecord`'s fields borrowed from a registration, in the record's order: serde writes
/// `&[T]` as it writes `Vec<T>`, so postcard encodes this exactly as the record.
#[derive(Serialize)]
struct PartitionRecordFields<'a> {
    partition_id: i32,
    topic_id: &'a Uuid,
    replicas: &'a [i32],
    isr: &'a [i32],
    removing_replicas: &'a [i32],
    adding_replicas: &'a [i32],
    leader: i32,
    leader_recovery_state: i8,
    leader_epoch: i32,
    partition_epoch: i32,
    directories: &'a [Uuid],
}

/// `TopicRecord`'s fields, borrowed.
#[derive(Serialize)]
struct TopicRecordFields<'a> {
    name: &'a str,
    topic_id: &'a Uuid,
}

/// The hash [`ImageDigest::add`] gives the `PartitionRecord` of `partition`, without building it.
pub(crate) fn partition_hash(
    topic_id: &Uuid,
    partition_id: i32,
    partition: &PartitionRegistration,
) -> u128 {
    let mut frame = StackFrame::new();
    frame.i32(partition_id);
    frame.uuid(topic_id);
    frame.ids(&partition.replicas);
    frame.ids(&partition.isr);
    frame.ids(partition.removing_replicas());
    frame.ids(partition.adding_replicas());
    frame.i32(partition.leader);
    frame.byte(partition.leader_recovery_state.to_le_bytes()[0]);
    frame.i32(partition.leader_epoch);
    frame.i32(partition.partition_epoch);
    frame.varint(partition.directories.len() as u64);
    for directory in partition.directories.iter() {
        frame.uuid(directory);
    }
    frame.hash(type_ids::PARTITION).unwrap_or_else(|| {
        framed_hash_alloc(
            type_ids::PARTITION,
            &PartitionRecordFields {
                partition_id,
                topic_id,
                replicas: &partition.replicas,
                isr: &partition.isr,
                removing_replicas: partition.removing_replicas(),
                adding_replicas: partition.adding_replicas(),
                leader: partition.leader,
                leader_recovery_state: partition.leader_recovery_state,
                leader_epoch: partition.leader_epoch,
                partition_epoch: partition.partition_epoch,
                directories: &partition.directories,
            },
        )
    })
}

/// The hash [`ImageDigest::add`] gives the `TopicRecord` of a topic, without building it.
pub(crate) fn topic_hash(name: &str, topic_id: &Uuid) -> u128 {
    let mut frame = StackFrame::new();
    frame.bytes(name.as_bytes());
    frame.uuid(topic_id);
    frame.hash(type_ids::TOPIC).unwrap_or_else(|| {
        framed_hash_alloc(type_ids::TOPIC, &TopicRecordFields { name, topic_id })
    })
}

/// The hash of `postcard(RecordFrame { record_type, CURRENT_VERSION, postcard(payload) })`
/// through serde and the heap: the path for records too long for a [`StackFrame`].
fn framed_hash_alloc(record_type: u16, payload: &impl Serialize) -> u128 {
    let frame = RecordFrame {
        record_type,
        version: CURRENT_VERSION,
        payload: postcard::to_allocvec(payload).unwrap_or_default(),
    };
    XxHash3_128::oneshot(&postcard::to_allocvec(&frame).unwrap_or_default())
}

/// Room for the frame header: two u16 varints (3 bytes each at most) and the payload length
/// (a varint of at most 2 bytes for any payload that fits the buffer; 5 to be safe).
const HEADER_ROOM: usize = 11;

/// postcard's encoding of one record frame, written by hand into a stack buffer: the payload
/// after [`HEADER_ROOM`] bytes, the header just before it once the payload's length is known.
/// Hand-written because serde's generic path cost ~60% of hashing a partition, and the digest
/// hashes two partitions per changed partition; `field_hashes_equal_the_record_hashes` holds
/// it to postcard's bytes. A record that does not fit is hashed through serde instead.
struct StackFrame<const N: usize = 320> {
    buf: [u8; N],
    len: usize,
}

impl StackFrame {
    fn new() -> Self {
        StackFrame {
            buf: [0; 320],
            len: HEADER_ROOM,
        }
    }
}

impl<const N: usize> StackFrame<N> {
    /// Writes one byte, or only counts it past the end (then `hash` gives up).
    fn byte(&mut self, byte: u8) {
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = byte;
        }
        self.len += 1;
    }

    /// postcard's varint: 7 bits a byte, least significant first, high bit = more follows.
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.byte((value as u8) | 0x80);
            value >>= 7;
        }
        self.byte(value as u8);
    }

    /// postcard's i32: zigzag, then varint.
    fn i32(&mut self, value: i32) {
        self.varint(u64::from(((value << 1) ^ (value >> 31)) as u32));
    }

    /// A byte string or `str`: length, then the bytes.
    fn bytes(&mut self, bytes: &[u8]) {
        self.varint(bytes.len() as u64);
        if let Some(slot) = self.buf.get_mut(self.len..self.len + bytes.len()) {
            slot.copy_from_slice(bytes);
        }
        self.len += bytes.len();
    }

    /// uuid serializes as a 16-byte byte string in binary formats.
    fn uuid(&mut self, id: &Uuid) {
        self.bytes(id.as_bytes());
    }

    /// A sequence of i32: length, then each.
    fn ids(&mut self, ids: &[i32]) {
        self.varint(ids.len() as u64);
        for id in ids {
            self.i32(*id);
        }
    }

    /// The hash of the whole frame, or `None` if the payload did not fit (the final `get`
    /// refuses a frame longer than the buffer; the header always fits). By reference, and
    /// the header written in place: moving the frame, or copying the header in through
    /// `memcpy`, cost a fifth of hashing a partition.
    fn hash(&mut self, record_type: u16) -> Option<u128> {
        let payload_end = self.len;
        let payload_len = payload_end.checked_sub(HEADER_ROOM)?;
        let header_len = varint_len(u64::from(record_type))
            + varint_len(u64::from(CURRENT_VERSION))
            + varint_len(payload_len as u64);
        let start = HEADER_ROOM.checked_sub(header_len)?;
        self.len = start;
        self.varint(u64::from(record_type));
        self.varint(u64::from(CURRENT_VERSION));
        self.varint(payload_len as u64);
        self.len = payload_end;
        self.buf.get(start..payload_end).map(XxHash3_128::oneshot)
    }
}

/// The bytes postcard's varint takes for `value`.
fn varint_len(value: u64) -> usize {
    let bits = 64 - value.leading_zeros() as usize;
    bits.div_ceil(7).max(1)
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use crate::delta::MetadataDelta;
    use crate::image::test_util::*;
    use crate::image::{MetadataImage, Provenance};
    use crate::records::*;

    fn full(records: &[MetadataRecord]) -> MetadataImage {
        image(records)
    }

    /// Every record kind an image holds, in the order a cluster would write them.
    fn cluster_records() -> Vec<MetadataRecord> {
        vec![
            feature(METADATA_VERSION_FEATURE, 21),
            register_broker(1, 10, false),
            register_broker(2, 20, false),
            topic("foo", 1),
            partition(1, 0, &[1, 2]),
            partition(1, 1, &[2, 1]),
            topic("bar", 2),
            partition(2, 0, &[1]),
            config(configs_topic(), "foo", "retention.ms", Some("1000")),
            config(4, "", "log.retention.hours", Some("12")),
            quota(
                &[("user", Some("alice"))],
                "producer_byte_rate",
                Some(1024.0),
            ),
        ]
    }

    fn acl(id: u128, name: &str) -> MetadataRecord {
        MetadataRecord::AccessControlEntry(crate::records::AccessControlEntryRecord {
            id: uuid::Uuid::from_u128(id),
            resource_type: 2,
            resource_name: name.into(),
            pattern_type: 4,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: 3,
            permission_type: 3,
        })
    }

    fn configs_topic() -> i8 {
        crate::image::configs::TOPIC_RESOURCE
    }

    #[test]
    fn the_order_of_the_records_does_not_matter() {
        let records = cluster_records();
        let expected = full(&records);
        // Topic "bar" before "foo", configs and quotas first, brokers last.
        let mut reordered = vec![records[0].clone()];
        reordered.extend_from_slice(&records[8..]);
        reordered.extend_from_slice(&records[6..8]);
        reordered.extend_from_slice(&records[3..6]);
        reordered.extend_from_slice(&records[1..3]);
        let other = full(&reordered);
        assert_eq!(other.digest, expected.digest);
        assert_ne!(expected.digest.value(), 0);
    }

    #[test]
    fn the_incremental_digest_is_the_digest_of_the_snapshot() {
        let records = cluster_records();
        // One record per delta, each delta's image the next base.
        let mut base = MetadataImage::empty();
        for record in &records {
            base = apply(&base, std::slice::from_ref(record));
            assert_eq!(base.digest, base.compute_digest());
        }
        let changes = [
            isr_change(1, 0, &[1], Some(1)),
            MetadataRecord::FenceBroker(FenceBrokerRecord { id: 2, epoch: 20 }),
            remove_topic(2),
            config(configs_topic(), "foo", "retention.ms", None),
            quota(&[("user", Some("alice"))], "producer_byte_rate", None),
            partition(1, 2, &[1, 2]),
            topic("bar", 3),
            partition(3, 0, &[2]),
            acl(0xac1, "foo"),
            acl(0xac2, "ba"),
            MetadataRecord::RemoveAccessControlEntry(
                crate::records::RemoveAccessControlEntryRecord {
                    id: uuid::Uuid::from_u128(0xac1),
                },
            ),
        ];
        let mut image = base.clone();
        for change in &changes {
            image = apply(&image, std::slice::from_ref(change));
            assert_eq!(image.digest, image.compute_digest(), "after {change:?}");
        }
        // All at once gives the same image, digest included.
        assert_eq!(apply(&base, &changes), image);
        // A snapshot of the image replays to the same digest.
        assert_eq!(full(&image.to_records()).digest, image.digest);
        // And the delta a late publisher sees.
        let late = MetadataDelta::from_empty_with(&image).apply(Provenance::default());
        assert_eq!(late.digest, image.digest);
    }

    #[test]
    fn any_change_changes_the_digest() {
        let base = full(&cluster_records());
        let changes = [
            isr_change(1, 0, &[1], None),
            isr_change(1, 0, &[1, 2], Some(2)),
            MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id: 1,
                topic_id: uuid::Uuid::from_u128(1),
                ..PartitionChangeRecord::default()
            }),
            MetadataRecord::FenceBroker(FenceBrokerRecord { id: 1, epoch: 10 }),
            register_broker(3, 30, false),
            remove_topic(2),
            config(configs_topic(), "foo", "retention.ms", Some("1001")),
            config(configs_topic(), "bar", "retention.ms", Some("1000")),
            quota(
                &[("user", Some("alice"))],
                "producer_byte_rate",
                Some(1025.0),
            ),
            quota(&[("user", Some("bob"))], "producer_byte_rate", Some(1024.0)),
            feature(METADATA_VERSION_FEATURE, 22),
        ];
        let mut seen = vec![base.digest];
        for change in &changes {
            let changed = apply(&base, std::slice::from_ref(change));
            assert!(!seen.contains(&changed.digest), "{change:?} kept a digest");
            seen.push(changed.digest);
        }
        // The same topic name under another id is another image.
        let mut other_id = cluster_records();
        other_id[6] = topic("bar", 9);
        other_id[7] = partition(9, 0, &[1]);
        assert_ne!(full(&other_id).digest, base.digest);
    }

    #[test]
    fn varint_lengths_match_postcard() {
        for value in [
            0,
            1,
            127,
            128,
            16_383,
            16_384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let encoded = postcard::to_allocvec(&value).unwrap();
            assert_eq!(super::varint_len(value), encoded.len(), "{value}");
        }
    }

    #[test]
    fn field_hashes_equal_the_record_hashes() {
        use super::{partition_hash, record_hash, topic_hash};
        use crate::image::partition::{BrokerIds, DirectoryIds, Reassignment};
        use crate::image::PartitionRegistration;
        use uuid::Uuid;

        let topic_id = Uuid::from_u128(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
        let many: Vec<i32> = (0..200).map(|n| n * 70_001 - 5).collect();
        let dirs: Vec<Uuid> = (0..40).map(|n| Uuid::from_u128(n * 0x1_0001)).collect();
        let registrations = [
            PartitionRegistration::default(),
            PartitionRegistration {
                replicas: BrokerIds::from_slice(&[1, 2, 3]),
                isr: BrokerIds::from_slice(&[3]),
                reassignment: Reassignment::new(&[2], &[7, 8, 9, 10]),
                directories: DirectoryIds::from_slice(&dirs[..3]),
                leader: -1,
                leader_epoch: i32::MAX,
                partition_epoch: i32::MIN,
                leader_recovery_state: 1,
            },
            // A payload of 128 bytes or more: a two-byte length in the header.
            PartitionRegistration {
                replicas: BrokerIds::from_slice(&many[..10]),
                isr: BrokerIds::from_slice(&many[..10]),
                directories: DirectoryIds::from_slice(&dirs[..10]),
                ..PartitionRegistration::default()
            },
            // Longer than the stack buffer: the allocating path.
            PartitionRegistration {
                replicas: BrokerIds::from_slice(&many),
                isr: BrokerIds::from_slice(&many[..150]),
                directories: DirectoryIds::from_slice(&dirs),
                leader: 70_001,
                ..PartitionRegistration::default()
            },
        ];
        for partition in &registrations {
            for partition_id in [0, 1, 63, 64, 8191, -1, i32::MAX] {
                let record = MetadataRecord::Partition(partition.to_record(topic_id, partition_id));
                assert_eq!(
                    partition_hash(&topic_id, partition_id, partition),
                    record_hash(&record),
                    "{record:?}"
                );
            }
        }
        for name in ["a", "topic-0000001", &"x".repeat(249), &"é".repeat(300)] {
            let record = MetadataRecord::Topic(TopicRecord {
                name: name.to_owned(),
                topic_id,
            });
            assert_eq!(topic_hash(name, &topic_id), record_hash(&record));
        }
    }

    #[test]
    fn provenance_is_not_content() {
        let records = cluster_records();
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        delta.replay_all(&records).unwrap();
        let at_one = delta.apply(Provenance {
            last_log_index: 1,
            last_log_term: 1,
            last_applied_time_ms: 5,
        });
        let at_two = delta.apply(Provenance {
            last_log_index: 2,
            last_log_term: 3,
            last_applied_time_ms: 9,
        });
        assert_eq!(at_one.digest, at_two.digest);
        assert_eq!(format!("{}", at_one.digest).len(), 32);
        assert_eq!(MetadataImage::empty().digest.value(), 0);
    }
}
