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
//! [`MetadataImage::to_records`]: super::MetadataImage::to_records
//! [`MetadataDelta::apply`]: crate::delta::MetadataDelta::apply

use std::fmt;

use twox_hash::XxHash3_128;

use crate::records::MetadataRecord;

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
