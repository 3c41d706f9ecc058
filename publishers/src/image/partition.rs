//! One partition's registration, stored compactly.
//!
//! A 1,000,000-partition image holds a million of these, so their layout is the memory budget
//! (performance.md: <= 150 B per partition, everything included), and a delta copies them whole
//! when it rebuilds a topic. Replica and ISR lists of up to three entries (the usual replication
//! factor) live inline in 16 bytes and are copied without touching a reference count; longer
//! lists share one `Arc`. The reassignment lists, empty on all but the partitions being moved,
//! share one pointer. Directory lists are interned (see `DirectoryInterner`), so the handful of
//! distinct lists a cluster has is stored once, whatever the partition count, and copied
//! without a reference count either.

use std::collections::HashSet;
use std::fmt;
use std::num::NonZeroU32;
use std::ops::Deref;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

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
/// Derefs to `[Uuid]`. A cluster has few distinct lists (one per ordered set of its brokers'
/// directories in use), and a delta interns them: the first [`MAX_INTERNED_LISTS`] distinct
/// lists the process meets are kept for its lifetime and shared without a reference count,
/// later ones are shared per delta through an `Arc`. Without a count a clone is a copy: when a
/// large delta is rebuilt on several threads (a broker leaving every ISR), each copied
/// partition no longer writes the count of one of a handful of shared lists, whose cache line
/// then moved between the cores on every partition (about 15% of that rebuild at 10^6
/// partitions).
#[derive(Clone, Default)]
pub struct DirectoryIds(DirsRepr);

#[derive(Clone)]
enum DirsRepr {
    /// One of the process's interned lists, or the empty one.
    Interned(&'static Vec<Uuid>),
    Shared(Arc<Vec<Uuid>>),
}

static NO_DIRECTORIES: Vec<Uuid> = Vec::new();

impl Default for DirsRepr {
    fn default() -> Self {
        DirsRepr::Interned(&NO_DIRECTORIES)
    }
}

/// Distinct directory lists kept for the process's lifetime (a few hundred KB at most); past
/// this many, new lists are shared per delta instead.
pub const MAX_INTERNED_LISTS: usize = 4096;

/// The process's interned lists (only `DirsRepr::Interned` ones), looked up by slice.
fn interned_lists() -> &'static Mutex<HashSet<DirectoryIds>> {
    static LISTS: OnceLock<Mutex<HashSet<DirectoryIds>>> = OnceLock::new();
    LISTS.get_or_init(Mutex::default)
}

impl DirectoryIds {
    /// The empty list.
    pub const EMPTY: DirectoryIds = DirectoryIds(DirsRepr::Interned(&NO_DIRECTORIES));

    /// Copies `dirs` into a new, un-interned list.
    pub fn from_slice(dirs: &[Uuid]) -> Self {
        if dirs.is_empty() {
            DirectoryIds::EMPTY
        } else {
            DirectoryIds(DirsRepr::Shared(Arc::new(dirs.to_vec())))
        }
    }

    /// The process's interned copy of `dirs`, if it has one or may still make one.
    fn interned(dirs: &[Uuid]) -> Option<Self> {
        // The set only grows and an insert cannot leave it half-changed, so a poisoned lock's
        // set is whole.
        let mut lists = interned_lists()
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(list) = lists.get(dirs) {
            return Some(list.clone());
        }
        if lists.len() >= MAX_INTERNED_LISTS {
            return None;
        }
        let list = DirectoryIds(DirsRepr::Interned(Box::leak(Box::new(dirs.to_vec()))));
        lists.insert(list.clone());
        Some(list)
    }

    /// The directory ids as a slice.
    pub fn as_slice(&self) -> &[Uuid] {
        match &self.0 {
            DirsRepr::Interned(dirs) => dirs,
            DirsRepr::Shared(dirs) => dirs,
        }
    }
}

impl Deref for DirectoryIds {
    type Target = [Uuid];
    fn deref(&self) -> &[Uuid] {
        self.as_slice()
    }
}

impl std::borrow::Borrow<[Uuid]> for DirectoryIds {
    fn borrow(&self) -> &[Uuid] {
        self.as_slice()
    }
}

impl PartialEq for DirectoryIds {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}
impl Eq for DirectoryIds {}

impl std::hash::Hash for DirectoryIds {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
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
/// over a few brokers allocates a few lists, not a million. It remembers what it handed out, so
/// most lookups take no lock.
#[derive(Clone, Debug, Default)]
pub(crate) struct DirectoryInterner {
    lists: HashSet<DirectoryIds>,
}

impl DirectoryInterner {
    /// Maximum number of distinct lists one delta remembers; past it, lists are stored unshared
    /// (the memory cost of a cluster with that many distinct assignments is the lists
    /// themselves).
    const MAX_LISTS: usize = 4096;

    pub(crate) fn intern(&mut self, dirs: &[Uuid]) -> DirectoryIds {
        if dirs.is_empty() {
            return DirectoryIds::EMPTY;
        }
        if let Some(known) = self.lists.get(dirs) {
            return known.clone();
        }
        let list = DirectoryIds::interned(dirs).unwrap_or_else(|| DirectoryIds::from_slice(dirs));
        if self.lists.len() < Self::MAX_LISTS {
            self.lists.insert(list.clone());
        }
        list
    }
}

/// The replicas a reassignment removes and adds. Both lists are empty on all but the few
/// partitions being moved, so they share one pointer (8 bytes where two inline lists took 32:
/// a 10^6-partition image is that much smaller, and a delta copies that much less of each
/// partition it rebuilds).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Reassignment(Option<Arc<ReassigningReplicas>>);

#[derive(PartialEq, Eq)]
struct ReassigningReplicas {
    removing: BrokerIds,
    adding: BrokerIds,
}

impl Reassignment {
    /// No reassignment under way.
    pub const NONE: Reassignment = Reassignment(None);

    /// A reassignment removing `removing` and adding `adding` (none if both are empty).
    pub fn new(removing: &[i32], adding: &[i32]) -> Self {
        if removing.is_empty() && adding.is_empty() {
            Reassignment::NONE
        } else {
            Reassignment(Some(Arc::new(ReassigningReplicas {
                removing: BrokerIds::from_slice(removing),
                adding: BrokerIds::from_slice(adding),
            })))
        }
    }

    /// The replicas being removed.
    pub fn removing(&self) -> &[i32] {
        self.0.as_ref().map_or(&[], |moving| &moving.removing)
    }

    /// The replicas being added.
    pub fn adding(&self) -> &[i32] {
        self.0.as_ref().map_or(&[], |moving| &moving.adding)
    }
}

impl fmt::Debug for Reassignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reassignment")
            .field("removing", &self.removing())
            .field("adding", &self.adding())
            .finish()
    }
}

/// The state of one partition, as in Kafka's `PartitionRegistration`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct PartitionRegistration {
    /// Replica broker ids, preferred leader first.
    pub replicas: BrokerIds,
    /// In-sync replicas.
    pub isr: BrokerIds,
    /// The replicas a reassignment under way removes and adds.
    pub reassignment: Reassignment,
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
            reassignment: Reassignment::new(&record.removing_replicas, &record.adding_replicas),
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
            removing_replicas: self.removing_replicas().to_vec(),
            adding_replicas: self.adding_replicas().to_vec(),
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
        if change.removing_replicas.is_some() || change.adding_replicas.is_some() {
            next.reassignment = Reassignment::new(
                change
                    .removing_replicas
                    .as_deref()
                    .unwrap_or(self.removing_replicas()),
                change
                    .adding_replicas
                    .as_deref()
                    .unwrap_or(self.adding_replicas()),
            );
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

    /// Replicas being removed by a reassignment.
    pub fn removing_replicas(&self) -> &[i32] {
        self.reassignment.removing()
    }

    /// Replicas being added by a reassignment.
    pub fn adding_replicas(&self) -> &[i32] {
        self.reassignment.adding()
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
        assert_eq!(std::mem::size_of::<DirectoryIds>(), 16);
        assert_eq!(std::mem::size_of::<Reassignment>(), 8);
        assert_eq!(std::mem::size_of::<PartitionRegistration>(), 72);
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
        assert!(std::ptr::eq(a.as_slice(), b.as_slice()));
        let c = DirectoryInterner::default().intern(&[Uuid::from_u128(1), Uuid::from_u128(2)]);
        assert_eq!(a, c);
        assert_eq!(interner.intern(&[]), DirectoryIds::EMPTY);
    }

    #[test]
    fn lists_past_the_process_cap_are_shared_per_delta() {
        // More distinct lists than the process keeps: every one still reads back as given,
        // and the process never keeps more than its cap.
        let mut interner = DirectoryInterner::default();
        let mut later = DirectoryInterner::default();
        for n in 0..(MAX_INTERNED_LISTS as u128 + 100) {
            let dirs = [Uuid::from_u128(1 << 100), Uuid::from_u128(n)];
            let first = interner.intern(&dirs);
            assert_eq!(first, dirs[..]);
            assert_eq!(later.intern(&dirs), first);
        }
        let kept = interned_lists()
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len();
        assert_eq!(kept, MAX_INTERNED_LISTS);
        let past_cap = [
            Uuid::from_u128(1 << 100),
            Uuid::from_u128(MAX_INTERNED_LISTS as u128 + 99),
        ];
        assert!(matches!(interner.intern(&past_cap).0, DirsRepr::Shared(_)));
    }

    #[test]
    fn a_change_replaces_only_the_reassignment_lists_it_names() {
        let mut dirs = DirectoryInterner::default();
        let base = PartitionRegistration {
            replicas: BrokerIds::from_slice(&[1, 2, 3, 4]),
            reassignment: Reassignment::new(&[1], &[4]),
            ..PartitionRegistration::default()
        };
        let change = |removing: Option<Vec<i32>>, adding: Option<Vec<i32>>| PartitionChangeRecord {
            removing_replicas: removing,
            adding_replicas: adding,
            ..PartitionChangeRecord::default()
        };
        let removing_only = base.merge(&change(Some(vec![1, 2]), None), &mut dirs);
        assert_eq!(removing_only.removing_replicas(), [1, 2]);
        assert_eq!(removing_only.adding_replicas(), [4]);
        let adding_only = base.merge(&change(None, Some(vec![4, 5, 6, 7])), &mut dirs);
        assert_eq!(adding_only.removing_replicas(), [1]);
        assert_eq!(adding_only.adding_replicas(), [4, 5, 6, 7]);
        let untouched = base.merge(&change(None, None), &mut dirs);
        assert_eq!(untouched.reassignment, base.reassignment);
        let done = base.merge(&change(Some(vec![]), Some(vec![])), &mut dirs);
        assert_eq!(done.reassignment, Reassignment::NONE);
        assert!(done.removing_replicas().is_empty() && done.adding_replicas().is_empty());
        let record = adding_only.to_record(Uuid::from_u128(9), 0);
        assert_eq!(
            (record.removing_replicas, record.adding_replicas),
            (vec![1], vec![4, 5, 6, 7])
        );
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
