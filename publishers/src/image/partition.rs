//! One partition's registration, stored compactly.
//!
//! A 1,000,000-partition image holds a million of these, so their layout is the memory budget
//! (performance.md: <= 150 B per partition, everything included). Broker-id lists of up to three
//! entries (the usual replication factor, and the always-empty adding/removing lists) live inline
//! in 16 bytes and are copied without touching a reference count; longer lists share one `Arc`.
//! Directory lists are interned by the delta that builds them (see `DirectoryInterner`), so the
//! handful of distinct lists a cluster has is stored once, whatever the partition count.

use std::collections::HashSet;
use std::fmt;
use std::num::NonZeroU32;
use std::ops::Deref;
use std::sync::Arc;

use uuid::Uuid;

use crate::records::{PartitionChangeRecord, PartitionRecord};

/// Kafka's `DirectoryId.UNASSIGNED`: the replica's directory is not known yet.
pub const DIRECTORY_UNASSIGNED: Uuid = Uuid::from_u64_pair(0, 0);

const INLINE_IDS: usize = 3;

/// An ordered list of broker ids (replicas, ISR, adding or removing replicas).
///
/// Derefs to `[i32]`, so `ids.contains(&1)`, `ids.len()`, `ids.first()` and `&ids[..]` work as
/// on a slice. Lists of up to three ids are stored inline (16 bytes, `Copy`-cheap to clone).
#[derive(Clone)]
pub struct BrokerIds(IdsRepr);

#[derive(Clone)]
enum IdsRepr {
    Inline(InlineIds),
    /// Always more than `INLINE_IDS` entries.
    Shared(Arc<Vec<i32>>),
}

/// Up to three ids in two aligned 8-byte words, so a clone is two moves (copying a partition's
/// four lists field by field stalled on partial store forwarding), and the length's unused
/// zero holds `IdsRepr`'s variant.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct InlineIds {
    /// `ids[len..]` are always zero.
    ids: [i32; INLINE_IDS],
    /// The length plus one.
    len_plus_one: NonZeroU32,
}

impl InlineIds {
    const fn new(len: u32, ids: [i32; INLINE_IDS]) -> Self {
        InlineIds {
            ids,
            len_plus_one: NonZeroU32::MIN.saturating_add(len),
        }
    }

    fn as_slice(&self) -> &[i32] {
        let len = (self.len_plus_one.get() - 1) as usize;
        self.ids.get(..len).unwrap_or_default()
    }
}

impl BrokerIds {
    /// The empty list.
    pub const EMPTY: BrokerIds = BrokerIds(IdsRepr::Inline(InlineIds::new(0, [0; INLINE_IDS])));

    /// Copies `ids` into a new list.
    pub fn from_slice(ids: &[i32]) -> Self {
        if ids.len() <= INLINE_IDS {
            let mut inline = [0; INLINE_IDS];
            inline[..ids.len()].copy_from_slice(ids);
            // `ids.len() <= 3`, so the cast cannot truncate.
            BrokerIds(IdsRepr::Inline(InlineIds::new(ids.len() as u32, inline)))
        } else {
            BrokerIds(IdsRepr::Shared(Arc::new(ids.to_vec())))
        }
    }

    /// The ids as a slice.
    pub fn as_slice(&self) -> &[i32] {
        match &self.0 {
            IdsRepr::Inline(ids) => ids.as_slice(),
            IdsRepr::Shared(ids) => ids,
        }
    }
}

impl Default for BrokerIds {
    fn default() -> Self {
        BrokerIds::EMPTY
    }
}

impl Deref for BrokerIds {
    type Target = [i32];
    fn deref(&self) -> &[i32] {
        self.as_slice()
    }
}

impl PartialEq for BrokerIds {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}
impl Eq for BrokerIds {}

impl PartialEq<[i32]> for BrokerIds {
    fn eq(&self, other: &[i32]) -> bool {
        self.as_slice() == other
    }
}
impl PartialEq<Vec<i32>> for BrokerIds {
    fn eq(&self, other: &Vec<i32>) -> bool {
        self.as_slice() == other.as_slice()
    }
}
impl<const N: usize> PartialEq<[i32; N]> for BrokerIds {
    fn eq(&self, other: &[i32; N]) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl std::hash::Hash for BrokerIds {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl fmt::Debug for BrokerIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

impl From<&[i32]> for BrokerIds {
    fn from(ids: &[i32]) -> Self {
        BrokerIds::from_slice(ids)
    }
}
impl From<Vec<i32>> for BrokerIds {
    fn from(ids: Vec<i32>) -> Self {
        BrokerIds::from_slice(&ids)
    }
}

/// The log directory id of each replica, in replica order (empty when the metadata version
/// predates directory assignment).
///
/// Derefs to `[Uuid]`. Lists are shared: cloning costs one reference-count increment, and the
/// delta that builds an image interns equal lists so a cluster's few distinct lists are stored
/// once.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub struct DirectoryIds(Option<Arc<Vec<Uuid>>>);

impl DirectoryIds {
    /// The empty list.
    pub const EMPTY: DirectoryIds = DirectoryIds(None);

    /// Copies `dirs` into a new, un-interned list.
    pub fn from_slice(dirs: &[Uuid]) -> Self {
        if dirs.is_empty() {
            DirectoryIds(None)
        } else {
            DirectoryIds(Some(Arc::new(dirs.to_vec())))
        }
    }

    /// The directory ids as a slice.
    pub fn as_slice(&self) -> &[Uuid] {
        match &self.0 {
            None => &[],
            Some(dirs) => dirs,
        }
    }
}

impl Deref for DirectoryIds {
    type Target = [Uuid];
    fn deref(&self) -> &[Uuid] {
        self.as_slice()
    }
}

impl PartialEq<[Uuid]> for DirectoryIds {
    fn eq(&self, other: &[Uuid]) -> bool {
        self.as_slice() == other
    }
}
impl PartialEq<Vec<Uuid>> for DirectoryIds {
    fn eq(&self, other: &Vec<Uuid>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl fmt::Debug for DirectoryIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_slice().fmt(f)
    }
}

/// Shares equal directory lists while a delta is replayed, so a snapshot of a million partitions
/// over a few brokers allocates a few lists, not a million.
#[derive(Clone, Debug, Default)]
pub(crate) struct DirectoryInterner {
    lists: HashSet<InternedDirs>,
}

/// A shared list, looked up by slice so a hit allocates nothing.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct InternedDirs(Arc<Vec<Uuid>>);

impl std::borrow::Borrow<[Uuid]> for InternedDirs {
    fn borrow(&self) -> &[Uuid] {
        self.0.as_slice()
    }
}

impl DirectoryInterner {
    /// Maximum number of distinct lists remembered; past it, lists are stored unshared (the
    /// memory cost of a cluster with that many distinct assignments is the lists themselves).
    const MAX_LISTS: usize = 4096;

    pub(crate) fn intern(&mut self, dirs: &[Uuid]) -> DirectoryIds {
        if dirs.is_empty() {
            return DirectoryIds::EMPTY;
        }
        if let Some(shared) = self.lists.get(dirs) {
            return DirectoryIds(Some(Arc::clone(&shared.0)));
        }
        let shared = Arc::new(dirs.to_vec());
        if self.lists.len() < Self::MAX_LISTS {
            self.lists.insert(InternedDirs(Arc::clone(&shared)));
        }
        DirectoryIds(Some(shared))
    }
}

/// The state of one partition, as in Kafka's `PartitionRegistration`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PartitionRegistration {
    /// Replica broker ids, preferred leader first.
    pub replicas: BrokerIds,
    /// In-sync replicas.
    pub isr: BrokerIds,
    /// Replicas being removed by a reassignment.
    pub removing_replicas: BrokerIds,
    /// Replicas being added by a reassignment.
    pub adding_replicas: BrokerIds,
    /// Directory id per replica, in replica order (empty if not tracked).
    pub directories: DirectoryIds,
    /// Leader broker id, or [`NO_LEADER`](crate::records::NO_LEADER).
    pub leader: i32,
    /// Bumped whenever a change sets the leader.
    pub leader_epoch: i32,
    /// Bumped on every change.
    pub partition_epoch: i32,
    /// 0 = recovered, 1 = recovering.
    pub leader_recovery_state: i8,
}

impl PartitionRegistration {
    /// Builds the registration a `PartitionRecord` describes.
    pub(crate) fn from_record(record: &PartitionRecord, dirs: &mut DirectoryInterner) -> Self {
        PartitionRegistration {
            replicas: BrokerIds::from_slice(&record.replicas),
            isr: BrokerIds::from_slice(&record.isr),
            removing_replicas: BrokerIds::from_slice(&record.removing_replicas),
            adding_replicas: BrokerIds::from_slice(&record.adding_replicas),
            directories: dirs.intern(&record.directories),
            leader: record.leader,
            leader_epoch: record.leader_epoch,
            partition_epoch: record.partition_epoch,
            leader_recovery_state: record.leader_recovery_state,
        }
    }

    /// This registration as the `PartitionRecord` that recreates it.
    pub fn to_record(&self, topic_id: Uuid, partition_id: i32) -> PartitionRecord {
        PartitionRecord {
            partition_id,
            topic_id,
            replicas: self.replicas.to_vec(),
            isr: self.isr.to_vec(),
            removing_replicas: self.removing_replicas.to_vec(),
            adding_replicas: self.adding_replicas.to_vec(),
            leader: self.leader,
            leader_recovery_state: self.leader_recovery_state,
            leader_epoch: self.leader_epoch,
            partition_epoch: self.partition_epoch,
            directories: self.directories.to_vec(),
        }
    }

    /// The registration after `change`, as Kafka's `PartitionRegistration.merge`:
    /// the partition epoch is always bumped; the leader epoch is bumped whenever the record sets
    /// the leader (the controller only sets it when the leader changes or it wants fenced
    /// followers to notice). When replicas change without new directories, each kept replica
    /// keeps its directory and a new one gets [`DIRECTORY_UNASSIGNED`].
    pub(crate) fn merge(
        &self,
        change: &PartitionChangeRecord,
        dirs: &mut DirectoryInterner,
    ) -> Self {
        let mut next = self.clone();
        if let Some(replicas) = &change.replicas {
            next.replicas = BrokerIds::from_slice(replicas);
        }
        match (&change.directories, &change.replicas) {
            (Some(directories), _) => next.directories = dirs.intern(directories),
            (None, Some(replicas)) if !self.directories.is_empty() => {
                let moved: Vec<Uuid> = replicas
                    .iter()
                    .map(|replica| {
                        self.replicas
                            .iter()
                            .position(|old| old == replica)
                            .and_then(|index| self.directories.get(index).copied())
                            .unwrap_or(DIRECTORY_UNASSIGNED)
                    })
                    .collect();
                next.directories = dirs.intern(&moved);
            }
            (None, _) => {}
        }
        if let Some(isr) = &change.isr {
            next.isr = BrokerIds::from_slice(isr);
        }
        if let Some(removing) = &change.removing_replicas {
            next.removing_replicas = BrokerIds::from_slice(removing);
        }
        if let Some(adding) = &change.adding_replicas {
            next.adding_replicas = BrokerIds::from_slice(adding);
        }
        if let Some(leader) = change.leader {
            next.leader = leader;
            next.leader_epoch = self.leader_epoch.wrapping_add(1);
        }
        if let Some(state) = change.leader_recovery_state {
            next.leader_recovery_state = state;
        }
        next.partition_epoch = self.partition_epoch.wrapping_add(1);
        next
    }

    /// Whether the partition has a leader.
    pub fn has_leader(&self) -> bool {
        self.leader != crate::records::NO_LEADER
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_compact() {
        assert_eq!(std::mem::size_of::<BrokerIds>(), 16);
        assert_eq!(std::mem::size_of::<DirectoryIds>(), 8);
        assert_eq!(std::mem::size_of::<PartitionRegistration>(), 88);
    }

    #[test]
    fn broker_ids_compare_by_content_whatever_the_storage() {
        assert_eq!(BrokerIds::from_slice(&[1, 2]), [1, 2]);
        assert_eq!(BrokerIds::from_slice(&[1, 2, 3, 4, 5]), vec![1, 2, 3, 4, 5]);
        assert_ne!(
            BrokerIds::from_slice(&[1, 2]),
            BrokerIds::from_slice(&[1, 2, 0])
        );
        assert_eq!(BrokerIds::EMPTY.len(), 0);
        assert_eq!(format!("{:?}", BrokerIds::from_slice(&[3, 1])), "[3, 1]");
    }

    #[test]
    fn interner_shares_equal_lists() {
        let mut interner = DirectoryInterner::default();
        let a = interner.intern(&[Uuid::from_u128(1), Uuid::from_u128(2)]);
        let b = interner.intern(&[Uuid::from_u128(1), Uuid::from_u128(2)]);
        match (&a.0, &b.0) {
            (Some(a), Some(b)) => assert!(Arc::ptr_eq(a, b)),
            _ => panic!("expected shared lists"),
        }
        assert_eq!(interner.intern(&[]), DirectoryIds::EMPTY);
    }

    #[test]
    fn merge_follows_kafka_epoch_rules() {
        let mut dirs = DirectoryInterner::default();
        let (d1, d2, d3) = (
            Uuid::from_u128(11),
            Uuid::from_u128(12),
            Uuid::from_u128(13),
        );
        let base = PartitionRegistration {
            replicas: BrokerIds::from_slice(&[1, 2, 3]),
            isr: BrokerIds::from_slice(&[1, 2, 3]),
            directories: DirectoryIds::from_slice(&[d1, d2, d3]),
            leader: 1,
            leader_epoch: 4,
            partition_epoch: 9,
            ..PartitionRegistration::default()
        };
        let shrink = base.merge(
            &PartitionChangeRecord {
                isr: Some(vec![1, 2]),
                ..PartitionChangeRecord::default()
            },
            &mut dirs,
        );
        assert_eq!(
            (shrink.leader, shrink.leader_epoch, shrink.partition_epoch),
            (1, 4, 10)
        );
        assert_eq!(shrink.isr, [1, 2]);
        let moved = shrink.merge(
            &PartitionChangeRecord {
                leader: Some(2),
                replicas: Some(vec![2, 4]),
                ..PartitionChangeRecord::default()
            },
            &mut dirs,
        );
        assert_eq!(
            (moved.leader, moved.leader_epoch, moved.partition_epoch),
            (2, 5, 11)
        );
        assert_eq!(moved.directories, vec![d2, DIRECTORY_UNASSIGNED]);
    }
}
