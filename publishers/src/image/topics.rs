//! Topics: [`TopicsImage`] (every topic and partition) and [`TopicsDelta`] (the changes one delta
//! makes to it).
//!
//! Cost model. Topics live in a persistent hash map by id (plus an ordered name → id index), so a
//! new image shares every untouched [`TopicImage`] with the old one (`Arc::ptr_eq`). A delta
//! collects its changes per topic while records are replayed; [`TopicsDelta::apply`] then
//! rebuilds each changed topic once and inserts it into a clone of the base maps. imbl mutates
//! nodes it owns alone in place, so after the first insert copies a path, the rest of the delta
//! writes into those copies: a transient builder, not one path copy per record.
//!
//! A topic's partitions are a sorted boxed slice while the topic has at most
//! `SMALL_TOPIC_PARTITIONS` partitions (no per-map node overhead, one allocation), and an imbl
//! `Vector` above that, so changing one partition of a huge topic stays O(log n).

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::BuildHasher;
use std::num::NonZeroU8;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, OnceLock};

use uuid::Uuid;

use super::digest::{partition_hash, topic_hash};
use super::partition::{DirectoryInterner, PartitionRegistration};
use super::{IdBuildHasher, ImageDigest};
use crate::delta::ReplayError;
use crate::records::{
    MetadataRecord, PartitionChangeRecord, PartitionRecord, RemoveTopicRecord, TopicRecord,
};

/// Topics with at most this many partitions keep them in one sorted slice.
const SMALL_TOPIC_PARTITIONS: usize = 64;

type Entry = (i32, PartitionRegistration);

/// A topic's partitions, sorted by partition id.
#[derive(Clone)]
enum Partitions {
    Small(Box<[Entry]>),
    Large(imbl::Vector<Entry>),
}

impl Partitions {
    fn empty() -> Self {
        Partitions::Small(Box::new([]))
    }

    fn from_sorted(entries: Vec<Entry>) -> Self {
        if entries.len() <= SMALL_TOPIC_PARTITIONS {
            Partitions::Small(entries.into_boxed_slice())
        } else {
            Partitions::Large(entries.into_iter().collect())
        }
    }

    fn len(&self) -> usize {
        match self {
            Partitions::Small(entries) => entries.len(),
            Partitions::Large(entries) => entries.len(),
        }
    }

    fn get(&self, id: i32) -> Option<&PartitionRegistration> {
        match self {
            Partitions::Small(entries) => entries
                .binary_search_by_key(&id, |(key, _)| *key)
                .ok()
                .and_then(|index| entries.get(index))
                .map(|(_, partition)| partition),
            Partitions::Large(entries) => entries
                .binary_search_by(|(key, _)| key.cmp(&id))
                .ok()
                .and_then(|index| entries.get(index))
                .map(|(_, partition)| partition),
        }
    }

    fn iter(&self) -> PartitionIter<'_> {
        match self {
            Partitions::Small(entries) => PartitionIter(PartitionIterRepr::Small(entries.iter())),
            Partitions::Large(entries) => PartitionIter(PartitionIterRepr::Large(entries.iter())),
        }
    }

    /// These partitions with `changes` (new or replaced partitions) applied. The digest of
    /// topic `topic_id` is kept in step on the way: each replaced partition's record hash is
    /// taken out of `digest` and each changed partition's put in, so the old state is read
    /// once, while it is being copied, not looked up again.
    fn with_changes(
        &self,
        changes: &ChangedPartitions,
        topic_id: &Uuid,
        digest: &mut ImageDigest,
    ) -> Partitions {
        if changes.is_empty() {
            return self.clone();
        }
        let mut count =
            |old: Option<&PartitionRegistration>, id: i32, new: &PartitionRegistration| {
                if let Some(old) = old {
                    digest.remove_hash(partition_hash(topic_id, id, old));
                }
                digest.add_hash(partition_hash(topic_id, id, new));
            };
        match self {
            Partitions::Small(entries) => {
                // The exact length, so `into_boxed_slice` does not reallocate and copy.
                let added = new_ids(entries, changes);
                let mut merged = Vec::with_capacity(entries.len() + added);
                let mut old = entries.iter().peekable();
                for (id, partition) in changes.iter() {
                    while let Some(entry) = old.next_if(|(old_id, _)| *old_id < id) {
                        merged.push(entry.clone());
                    }
                    let replaced = old.next_if(|(old_id, _)| *old_id == id);
                    count(replaced.map(|(_, p)| p), id, partition);
                    merged.push((id, partition.clone()));
                }
                merged.extend(old.cloned());
                Partitions::from_sorted(merged)
            }
            Partitions::Large(entries) => {
                let mut entries = entries.clone();
                for (id, partition) in changes.iter() {
                    match entries.binary_search_by(|(key, _)| key.cmp(&id)) {
                        Ok(index) => {
                            let replaced = entries.set(index, (id, partition.clone()));
                            count(Some(&replaced.1), id, partition);
                        }
                        Err(index) if index == entries.len() => {
                            count(None, id, partition);
                            entries.push_back((id, partition.clone()));
                        }
                        Err(index) => {
                            count(None, id, partition);
                            entries.insert(index, (id, partition.clone()));
                        }
                    }
                }
                Partitions::Large(entries)
            }
        }
    }
}

/// How many of `changes`' partition ids `entries` (sorted by id) does not hold.
///
/// A merge walk rather than a binary search per change: a topic's entries are usually cold, and
/// a binary search's loads each wait for the one before, where the walk's sequential loads are
/// fetched together.
fn new_ids(entries: &[Entry], changes: &ChangedPartitions) -> usize {
    let mut old_ids = entries.iter().map(|(id, _)| *id).peekable();
    changes
        .iter()
        .filter(|(id, _)| {
            while old_ids.next_if(|old_id| old_id < id).is_some() {}
            old_ids.peek() != Some(id)
        })
        .count()
}

/// The partitions one delta creates or changes in one topic, in their state at the end of the
/// delta, by partition id.
///
/// Records almost always arrive in partition order (a topic's creation, a snapshot), so they are
/// a sorted `Vec` appended to: one allocation per topic and no per-record node. A record that
/// lands in the middle of a long run switches to a `BTreeMap`, so no order of records costs
/// O(n^2).
#[derive(Clone, Debug)]
enum ChangedPartitions {
    Sorted(Vec<Entry>),
    Map(BTreeMap<i32, PartitionRegistration>),
}

impl ChangedPartitions {
    /// Past this many entries an insert in the middle moves to the map.
    const MAX_SORTED_INSERT: usize = 64;

    fn new() -> Self {
        ChangedPartitions::Sorted(Vec::new())
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn len(&self) -> usize {
        match self {
            ChangedPartitions::Sorted(entries) => entries.len(),
            ChangedPartitions::Map(entries) => entries.len(),
        }
    }

    fn get(&self, id: i32) -> Option<&PartitionRegistration> {
        match self {
            ChangedPartitions::Sorted(entries) => entries
                .binary_search_by_key(&id, |(key, _)| *key)
                .ok()
                .and_then(|index| entries.get(index))
                .map(|(_, partition)| partition),
            ChangedPartitions::Map(entries) => entries.get(&id),
        }
    }

    fn insert(&mut self, id: i32, partition: PartitionRegistration) {
        match self {
            ChangedPartitions::Sorted(entries) => {
                if entries.last().is_none_or(|(last, _)| *last < id) {
                    entries.push((id, partition));
                    return;
                }
                match entries.binary_search_by_key(&id, |(key, _)| *key) {
                    Ok(index) => {
                        if let Some(entry) = entries.get_mut(index) {
                            entry.1 = partition;
                        }
                    }
                    Err(index) if entries.len() < Self::MAX_SORTED_INSERT => {
                        entries.insert(index, (id, partition));
                    }
                    Err(_) => {
                        let mut map: BTreeMap<_, _> = std::mem::take(entries).into_iter().collect();
                        map.insert(id, partition);
                        *self = ChangedPartitions::Map(map);
                    }
                }
            }
            ChangedPartitions::Map(entries) => {
                entries.insert(id, partition);
            }
        }
    }

    fn iter(&self) -> impl Iterator<Item = (i32, &PartitionRegistration)> {
        let (sorted, map) = match self {
            ChangedPartitions::Sorted(entries) => (Some(entries.iter()), None),
            ChangedPartitions::Map(entries) => (None, Some(entries.iter())),
        };
        sorted
            .into_iter()
            .flatten()
            .map(|(id, partition)| (*id, partition))
            .chain(
                map.into_iter()
                    .flatten()
                    .map(|(id, partition)| (*id, partition)),
            )
    }
}

impl PartialEq for Partitions {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}
impl Eq for Partitions {}

impl fmt::Debug for Partitions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

/// Iterator over a topic's partitions in ascending partition id order.
pub struct PartitionIter<'a>(PartitionIterRepr<'a>);

enum PartitionIterRepr<'a> {
    Small(std::slice::Iter<'a, Entry>),
    Large(imbl::vector::Iter<'a, Entry, imbl::shared_ptr::DefaultSharedPtr>),
}

impl<'a> Iterator for PartitionIter<'a> {
    type Item = (i32, &'a PartitionRegistration);

    fn next(&mut self) -> Option<Self::Item> {
        let (id, partition) = match &mut self.0 {
            PartitionIterRepr::Small(iter) => iter.next()?,
            PartitionIterRepr::Large(iter) => iter.next()?,
        };
        Some((*id, partition))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            PartitionIterRepr::Small(iter) => iter.size_hint(),
            PartitionIterRepr::Large(iter) => iter.size_hint(),
        }
    }
}

/// One topic: its name, id and partitions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicImage {
    /// Topic name.
    pub name: Arc<str>,
    /// Topic id.
    pub id: Uuid,
    partitions: Partitions,
}

impl TopicImage {
    /// Partitions in ascending partition id order.
    pub fn partitions(&self) -> PartitionIter<'_> {
        self.partitions.iter()
    }

    /// One partition, if the topic has it.
    pub fn partition(&self, partition_id: i32) -> Option<&PartitionRegistration> {
        self.partitions.get(partition_id)
    }

    /// Number of partitions.
    pub fn partition_count(&self) -> usize {
        self.partitions.len()
    }

    /// The digest of [`to_records`](Self::to_records), computed without building the records.
    pub fn digest(&self) -> ImageDigest {
        let mut digest = ImageDigest::default();
        digest.add_hash(topic_hash(&self.name, &self.id));
        for (partition_id, partition) in self.partitions() {
            digest.add_hash(partition_hash(&self.id, partition_id, partition));
        }
        digest
    }

    /// The topic as records: its `TopicRecord`, then one `PartitionRecord` per partition.
    pub fn to_records(&self, out: &mut Vec<MetadataRecord>) {
        out.push(MetadataRecord::Topic(TopicRecord {
            name: self.name.to_string(),
            topic_id: self.id,
        }));
        out.extend(self.partitions().map(|(partition_id, partition)| {
            MetadataRecord::Partition(partition.to_record(self.id, partition_id))
        }));
    }
}

/// Every topic of the cluster, by id and by name.
///
/// Cloning is O(1); the maps are persistent and share structure with the image they came from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TopicsImage {
    /// Keyed with [`IdBuildHasher`]: ids are the controller's random UUIDs, and `apply` orders
    /// its inserts by that hash.
    by_id: imbl::GenericHashMap<
        Uuid,
        Arc<TopicImage>,
        IdBuildHasher,
        imbl::shared_ptr::DefaultSharedPtr,
    >,
    /// Names in ascending order, for Metadata responses and listings.
    by_name: imbl::OrdMap<NameKey, Uuid>,
    /// Sum of the partition counts of all topics, maintained by `apply`.
    partition_count: usize,
    /// `(name with '.' replaced by '_', name)` for every name containing '.' or '_': Kafka
    /// refuses a new topic whose name collides with an existing one in metric names, and this
    /// answers "which names collide with X" in O(log n) instead of a scan of every topic.
    collisions: imbl::OrdSet<(NameKey, NameKey)>,
}

/// The key under which names that collide in metric names ('.' versus '_') meet.
fn collision_key(name: &str) -> Option<NameKey> {
    name.contains(['.', '_'])
        .then(|| NameKey::from_str(&name.replace('.', "_")))
}

/// The longest name a [`NameKey`] holds inline.
const INLINE_NAME: usize = 23;

/// A topic name as a key of the by-name indexes, ordered as `str` (byte-wise).
///
/// Inserting into a persistent B-tree copies every node on the path, cloning each key in them
/// (about 80 keys for one new topic among 100,000). Names of up to 23 bytes are stored inline
/// here, so that clone is a copy, not an atomic reference-count increment (and a decrement when
/// the copy is dropped). Longer names share the `Arc<str>` their topic already holds, which is
/// why this is hand-written rather than an inline-string crate that would copy them.
#[derive(Clone)]
enum NameKey {
    Inline(InlineName),
    Shared(Arc<str>),
}

/// A name of up to [`INLINE_NAME`] bytes in one aligned 24-byte word triple: a key is cloned
/// as three 8-byte moves, and the length's unused zero lets `NameKey` keep its variant there
/// (24 bytes, not 32), so a B-tree node of keys is a quarter smaller to copy.
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct InlineName {
    /// `bytes[len..]` are zero.
    bytes: [u8; INLINE_NAME],
    /// The length plus one.
    len_plus_one: NonZeroU8,
}

// The variant lives in the length's niche.
const _: () = assert!(std::mem::size_of::<NameKey>() == 24);

impl NameKey {
    /// The key of a topic's name, sharing it when it is long.
    fn new(name: &Arc<str>) -> Self {
        NameKey::inline(name).unwrap_or_else(|| NameKey::Shared(Arc::clone(name)))
    }

    fn from_str(name: &str) -> Self {
        NameKey::inline(name).unwrap_or_else(|| NameKey::Shared(Arc::from(name)))
    }

    fn inline(name: &str) -> Option<Self> {
        let mut bytes = [0; INLINE_NAME];
        bytes
            .get_mut(..name.len())?
            .copy_from_slice(name.as_bytes());
        Some(NameKey::Inline(InlineName {
            bytes,
            // At most INLINE_NAME, so the cast cannot truncate.
            len_plus_one: NonZeroU8::MIN.saturating_add(name.len() as u8),
        }))
    }

    fn as_bytes(&self) -> &[u8] {
        match self {
            NameKey::Inline(name) => name
                .bytes
                .get(..usize::from(name.len_plus_one.get() - 1))
                .unwrap_or_default(),
            NameKey::Shared(name) => name.as_bytes(),
        }
    }

    fn as_str(&self) -> &str {
        match self {
            // Always valid: the bytes were copied from a `str` whole.
            NameKey::Inline(_) => std::str::from_utf8(self.as_bytes()).unwrap_or_default(),
            NameKey::Shared(name) => name,
        }
    }
}

impl PartialEq for NameKey {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}
impl Eq for NameKey {}

impl PartialOrd for NameKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for NameKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

/// Looked up by `name.as_bytes()`: byte order is `str` order.
impl std::borrow::Borrow<[u8]> for NameKey {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl fmt::Debug for NameKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_str().fmt(f)
    }
}

impl TopicsImage {
    /// The image with no topics.
    pub fn empty() -> Self {
        TopicsImage::default()
    }

    /// Whether there are no topics.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The topic named `name`.
    pub fn get_by_name(&self, name: &str) -> Option<&Arc<TopicImage>> {
        self.by_name
            .get(name.as_bytes())
            .and_then(|id| self.by_id.get(id))
    }

    /// The topic with id `id`.
    pub fn get_by_id(&self, id: &Uuid) -> Option<&Arc<TopicImage>> {
        self.by_id.get(id)
    }

    /// Every topic, in ascending name order.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<TopicImage>> + '_ {
        self.by_name.values().filter_map(|id| self.by_id.get(id))
    }

    /// Topic names in ascending order.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.by_name.keys().map(NameKey::as_str)
    }

    /// Existing topic names that differ from `name` at most by '.' versus '_' (including
    /// `name` itself when it exists and contains either), in ascending order.
    pub fn colliding_names<'a>(&'a self, name: &str) -> impl Iterator<Item = &'a str> + 'a {
        let key = collision_key(name);
        let start = key.clone().map(|k| (k, NameKey::from_str("")));
        start
            .into_iter()
            .flat_map(move |start| self.collisions.range(start..))
            .take_while(move |(unified, _)| Some(unified) == key.as_ref())
            .map(|(_, name)| name.as_str())
    }

    /// Number of topics. O(1).
    pub fn topic_count(&self) -> usize {
        self.by_id.len()
    }

    /// Number of partitions over all topics. O(1).
    pub fn partition_count(&self) -> usize {
        self.partition_count
    }

    /// The image as records (topics in name order, each followed by its partitions).
    pub fn to_records(&self, out: &mut Vec<MetadataRecord>) {
        for topic in self.iter() {
            topic.to_records(out);
        }
    }
}

/// The changes one delta makes to one topic: the topic's new and changed partitions, in their
/// state at the end of the delta.
#[derive(Clone, Debug)]
pub struct TopicDelta {
    name: Arc<str>,
    id: Uuid,
    /// The topic in the base image, or `None` if this delta creates it.
    base: Option<Arc<TopicImage>>,
    partitions: ChangedPartitions,
}

impl TopicDelta {
    /// Topic name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Topic id.
    pub fn id(&self) -> Uuid {
        self.id
    }

    /// Whether this delta creates the topic (its `TopicRecord` is in the delta).
    pub fn is_new(&self) -> bool {
        self.base.is_none()
    }

    /// The topic as it was in the base image, if it existed there.
    pub fn base(&self) -> Option<&Arc<TopicImage>> {
        self.base.as_ref()
    }

    /// New or changed partitions, ascending, in their state after the delta.
    pub fn changed_partitions(&self) -> impl Iterator<Item = (i32, &PartitionRegistration)> {
        self.partitions.iter()
    }

    /// Partitions this delta adds (absent from the base topic), ascending.
    pub fn new_partitions(&self) -> impl Iterator<Item = (i32, &PartitionRegistration)> {
        self.changed_partitions().filter(|(id, _)| {
            self.base
                .as_ref()
                .is_none_or(|base| base.partition(*id).is_none())
        })
    }

    /// A partition's state after the delta, whether or not the delta changed it.
    pub fn partition(&self, partition_id: i32) -> Option<&PartitionRegistration> {
        self.partitions.get(partition_id).or_else(|| {
            self.base
                .as_ref()
                .and_then(|base| base.partition(partition_id))
        })
    }

    /// The topic after this delta; `digest` gains the new topic's `TopicRecord` and the
    /// changed partitions, and loses what they replace.
    fn apply(&self, digest: &mut ImageDigest) -> Arc<TopicImage> {
        let partitions = match &self.base {
            Some(base) => base
                .partitions
                .with_changes(&self.partitions, &self.id, digest),
            None => {
                digest.add_hash(topic_hash(&self.name, &self.id));
                Partitions::empty().with_changes(&self.partitions, &self.id, digest)
            }
        };
        Arc::new(TopicImage {
            name: Arc::clone(&self.name),
            id: self.id,
            partitions,
        })
    }
}

/// The changes one delta makes to the topics: created topics, removed topics, and new or
/// changed partitions.
#[derive(Clone, Debug)]
pub struct TopicsDelta {
    base: Arc<TopicsImage>,
    /// Topics created or changed by this delta.
    changed: HashMap<Uuid, TopicDelta, IdBuildHasher>,
    /// Topics of the base image this delta removes, with their names.
    deleted: BTreeMap<Uuid, Arc<str>>,
    /// Names of the topics this delta creates, for the duplicate-name check.
    created_names: HashMap<Arc<str>, Uuid>,
    directories: DirectoryInterner,
}

impl TopicsDelta {
    /// An empty delta on `base`.
    pub fn new(base: Arc<TopicsImage>) -> Self {
        TopicsDelta {
            base,
            changed: HashMap::default(),
            deleted: BTreeMap::new(),
            created_names: HashMap::new(),
            directories: DirectoryInterner::default(),
        }
    }

    /// The delta from the empty image that creates every topic of `image`.
    pub fn from_image(image: &TopicsImage) -> Self {
        let mut delta = TopicsDelta::new(Arc::new(TopicsImage::empty()));
        for topic in image.iter() {
            delta
                .created_names
                .insert(Arc::clone(&topic.name), topic.id);
            delta.changed.insert(
                topic.id,
                TopicDelta {
                    name: Arc::clone(&topic.name),
                    id: topic.id,
                    base: None,
                    partitions: ChangedPartitions::Sorted(
                        topic
                            .partitions()
                            .map(|(id, partition)| (id, partition.clone()))
                            .collect(),
                    ),
                },
            );
        }
        delta
    }

    /// The image this delta applies to.
    pub fn base(&self) -> &Arc<TopicsImage> {
        &self.base
    }

    /// Topics this delta creates, in no particular order.
    pub fn created_topics(&self) -> impl Iterator<Item = &TopicDelta> {
        self.changed.values().filter(|topic| topic.is_new())
    }

    /// Every topic this delta creates or changes, in no particular order.
    pub fn changed_topics(&self) -> impl Iterator<Item = &TopicDelta> {
        self.changed.values()
    }

    /// The changes to one topic, if the delta creates or changes it.
    pub fn changed_topic(&self, id: &Uuid) -> Option<&TopicDelta> {
        self.changed.get(id)
    }

    /// Ids and names of the base image's topics that this delta removes, by id.
    ///
    /// A topic created and removed within the delta appears in neither this nor
    /// [`created_topics`](Self::created_topics). A topic removed and re-created with the same id
    /// appears in both.
    pub fn deleted_topics(&self) -> impl Iterator<Item = (Uuid, &str)> {
        self.deleted.iter().map(|(id, name)| (*id, &**name))
    }

    /// Whether this delta removes the base image's topic `id`.
    pub fn topic_was_deleted(&self, id: &Uuid) -> bool {
        self.deleted.contains_key(id)
    }

    /// The topic `id` as the records replayed so far leave it: `(name, base image)`.
    fn live_name(&self, id: &Uuid) -> Option<&Arc<str>> {
        if let Some(topic) = self.changed.get(id) {
            return Some(&topic.name);
        }
        if self.deleted.contains_key(id) {
            return None;
        }
        self.base.get_by_id(id).map(|topic| &topic.name)
    }

    pub(crate) fn replay_topic(&mut self, record: &TopicRecord) -> Result<(), ReplayError> {
        if let Some(existing_name) = self.live_name(&record.topic_id) {
            return Err(ReplayError::DuplicateTopicId {
                topic_id: record.topic_id,
                existing_name: existing_name.to_string(),
                new_name: record.name.clone(),
            });
        }
        let name_owner = self
            .created_names
            .get(record.name.as_str())
            .copied()
            .or_else(|| {
                self.base
                    .get_by_name(&record.name)
                    .map(|topic| topic.id)
                    .filter(|id| !self.deleted.contains_key(id))
            });
        if let Some(existing_id) = name_owner {
            return Err(ReplayError::DuplicateTopicName {
                name: record.name.clone(),
                existing_id,
                new_id: record.topic_id,
            });
        }
        let name: Arc<str> = Arc::from(record.name.as_str());
        self.created_names
            .insert(Arc::clone(&name), record.topic_id);
        self.changed.insert(
            record.topic_id,
            TopicDelta {
                name,
                id: record.topic_id,
                base: None,
                partitions: ChangedPartitions::new(),
            },
        );
        Ok(())
    }

    pub(crate) fn replay_partition(&mut self, record: &PartitionRecord) -> Result<(), ReplayError> {
        let partition = PartitionRegistration::from_record(record, &mut self.directories);
        let topic = topic_entry(
            &mut self.changed,
            &self.base,
            &self.deleted,
            record.topic_id,
            "PartitionRecord",
        )?;
        topic.partitions.insert(record.partition_id, partition);
        Ok(())
    }

    pub(crate) fn replay_partition_change(
        &mut self,
        record: &PartitionChangeRecord,
    ) -> Result<(), ReplayError> {
        let id = record.topic_id;
        // Look up before inserting anything, so a rejected record leaves the delta unchanged.
        let topic = match self.changed.get(&id) {
            Some(topic) => Some((&topic.name, topic.partition(record.partition_id))),
            None => self
                .base
                .get_by_id(&id)
                .filter(|_| !self.deleted.contains_key(&id))
                .map(|topic| (&topic.name, topic.partition(record.partition_id))),
        };
        let (name, current) = topic.ok_or(ReplayError::UnknownTopic {
            record: "PartitionChangeRecord",
            topic_id: id,
        })?;
        let current = current.ok_or_else(|| ReplayError::UnknownPartition {
            topic_id: id,
            topic_name: name.to_string(),
            partition: record.partition_id,
        })?;
        let next = current.merge(record, &mut self.directories);
        let topic = topic_entry(
            &mut self.changed,
            &self.base,
            &self.deleted,
            id,
            "PartitionChangeRecord",
        )?;
        topic.partitions.insert(record.partition_id, next);
        Ok(())
    }

    /// Removes a topic; returns its name (the caller also drops the topic's configs).
    pub(crate) fn replay_remove_topic(
        &mut self,
        record: &RemoveTopicRecord,
    ) -> Result<Arc<str>, ReplayError> {
        let id = record.topic_id;
        if let Some(topic) = self.changed.remove(&id) {
            if topic.is_new() {
                self.created_names.remove(&topic.name);
            } else {
                self.deleted.insert(id, Arc::clone(&topic.name));
            }
            return Ok(topic.name);
        }
        match self.base.get_by_id(&id) {
            Some(topic) if !self.deleted.contains_key(&id) => {
                let name = Arc::clone(&topic.name);
                self.deleted.insert(id, Arc::clone(&name));
                Ok(name)
            }
            _ => Err(ReplayError::UnknownTopic {
                record: "RemoveTopicRecord",
                topic_id: id,
            }),
        }
    }

    /// The base image with this delta's changes. Each changed topic is rebuilt once; every
    /// other topic is shared with the base image.
    pub fn apply(&self) -> TopicsImage {
        self.apply_counting(&mut ImageDigest::default())
    }

    /// [`apply`](Self::apply), also bringing `digest` (the base image's) in step: the records
    /// of removed topics and of replaced partitions leave it, the new ones join it.
    pub(crate) fn apply_counting(&self, digest: &mut ImageDigest) -> TopicsImage {
        let mut by_id = self.base.by_id.clone();
        let mut by_name = self.base.by_name.clone();
        let mut partition_count = self.base.partition_count;
        let mut collisions = self.base.collisions.clone();
        for (id, name) in &self.deleted {
            if let Some(topic) = by_id.remove(id) {
                partition_count = partition_count.saturating_sub(topic.partition_count());
                digest.remove_all(topic.digest());
            }
            by_name.remove(name.as_bytes());
            if let Some(key) = collision_key(name) {
                collisions.remove(&(key, NameKey::new(name)));
            }
        }
        // Insert in the order of the by-id HAMT's slots (it takes 5 hash bits per level from the
        // low end, so bit-reversed hashes sort each node's entries together): consecutive
        // inserts then share the path they copy, which stays in cache, instead of each one
        // copying a path of cold nodes.
        let hasher = IdBuildHasher::default();
        let mut changed: Vec<(u32, &TopicDelta)> = self
            .changed
            .values()
            .map(|delta| ((hasher.hash_one(delta.id) as u32).reverse_bits(), delta))
            .collect();
        changed.sort_unstable_by_key(|(slot, _)| *slot);
        let mut created = Vec::new();
        rebuild_topics(&changed, digest, |delta, topic| {
            match &delta.base {
                Some(base) => {
                    partition_count = partition_count.saturating_sub(base.partition_count());
                }
                None => created.push((&delta.name, delta.id)),
            }
            partition_count += topic.partition_count();
            by_id.insert(delta.id, topic);
        });
        // Inserting names in order keeps the B-tree path being written hot in cache (a snapshot
        // inserts every name; in hash order each insert was a walk of cache misses).
        created.sort_unstable_by(|a, b| a.0.cmp(b.0));
        for (name, id) in created {
            by_name.insert(NameKey::new(name), id);
            if let Some(key) = collision_key(name) {
                collisions.insert((key, NameKey::new(name)));
            }
        }
        TopicsImage {
            by_id,
            by_name,
            partition_count,
            collisions,
        }
    }
}

/// Below this many changed partitions a delta's topics are rebuilt on the calling thread alone:
/// starting a helper thread costs tens of microseconds, rebuilding a topic well under one.
const PARALLEL_REBUILD_PARTITIONS: usize = 4_096;

/// Topics per unit of work handed between threads: enough that the hand-off is noise, few
/// enough that the inserting thread seldom waits for the next one.
const REBUILD_CHUNK_TOPICS: usize = 64;

/// Rebuilds each changed topic and hands it to `insert` in `changed`'s order, with `digest` kept
/// in step.
///
/// A large delta (a broker leaving thousands of ISRs, a snapshot) is mostly this: copying each
/// topic's partitions, cold in memory, and hashing the old and new state of every changed
/// partition, then writing the result into the persistent maps. The maps take one writer, but
/// topics are independent and the digest is a sum: so for a large delta helper threads (one per
/// other core) rebuild chunks of topics while this thread inserts the finished ones in order,
/// and rebuilds a chunk itself whenever the next one it needs is not ready.
fn rebuild_topics<'a>(
    changed: &[(u32, &'a TopicDelta)],
    digest: &mut ImageDigest,
    mut insert: impl FnMut(&'a TopicDelta, Arc<TopicImage>),
) {
    let changed_partitions: usize = changed
        .iter()
        .map(|(_, delta)| delta.partitions.len())
        .sum();
    let helpers = rebuild_helpers();
    if changed_partitions < PARALLEL_REBUILD_PARTITIONS || helpers == 0 {
        for (_, delta) in changed {
            insert(delta, delta.apply(digest));
        }
        return;
    }
    let chunks: Vec<&[(u32, &'a TopicDelta)]> = changed.chunks(REBUILD_CHUNK_TOPICS).collect();
    let next_chunk = AtomicUsize::new(0);
    let claim = || {
        let index = next_chunk.fetch_add(1, Ordering::Relaxed);
        (index < chunks.len()).then_some(index)
    };
    let rebuild = |index: usize| {
        let mut chunk_digest = ImageDigest::default();
        let topics: Vec<Arc<TopicImage>> = chunks
            .get(index)
            .into_iter()
            .flat_map(|chunk| chunk.iter())
            .map(|(_, delta)| delta.apply(&mut chunk_digest))
            .collect();
        (topics, chunk_digest)
    };
    std::thread::scope(|scope| {
        let (done_tx, done_rx) = mpsc::channel();
        for _ in 0..helpers.min(chunks.len()) {
            let done_tx = done_tx.clone();
            let started = std::thread::Builder::new()
                .name("image-rebuild".into())
                .spawn_scoped(scope, move || {
                    while let Some(index) = claim() {
                        if done_tx.send((index, rebuild(index))).is_err() {
                            return;
                        }
                    }
                });
            if let Err(error) = started {
                // The loop below claims whatever no helper took.
                tracing::warn!(%error, "no thread to help rebuild the image's topics; rebuilding them on this one");
                break;
            }
        }
        drop(done_tx);
        let mut ready = BTreeMap::new();
        for (index, chunk) in chunks.iter().enumerate() {
            let (topics, chunk_digest) = loop {
                if let Some(rebuilt) = ready.remove(&index) {
                    break rebuilt;
                }
                if let Ok((done, rebuilt)) = done_rx.try_recv() {
                    ready.insert(done, rebuilt);
                } else if let Some(unclaimed) = claim() {
                    ready.insert(unclaimed, rebuild(unclaimed));
                } else if let Ok((done, rebuilt)) = done_rx.recv() {
                    ready.insert(done, rebuilt);
                } else {
                    // Every helper has stopped without this chunk (one panicked, which the
                    // scope reports when it ends): rebuild it here.
                    break rebuild(index);
                }
            };
            digest.add_all(chunk_digest);
            for ((_, delta), topic) in chunk.iter().zip(topics) {
                insert(delta, topic);
            }
        }
    });
}

/// Helper threads a large delta's rebuild may start: one per core beyond the caller's.
fn rebuild_helpers() -> usize {
    static HELPERS: OnceLock<usize> = OnceLock::new();
    *HELPERS.get_or_init(|| {
        std::thread::available_parallelism().map_or(0, |cores| cores.get().saturating_sub(1).min(7))
    })
}

/// The delta of topic `id`, started from the base image on the first record that touches it.
fn topic_entry<'a>(
    changed: &'a mut HashMap<Uuid, TopicDelta, IdBuildHasher>,
    base: &TopicsImage,
    deleted: &BTreeMap<Uuid, Arc<str>>,
    id: Uuid,
    record: &'static str,
) -> Result<&'a mut TopicDelta, ReplayError> {
    use std::collections::hash_map::Entry;
    match changed.entry(id) {
        Entry::Occupied(entry) => Ok(entry.into_mut()),
        Entry::Vacant(entry) => {
            let base = base
                .get_by_id(&id)
                .filter(|_| !deleted.contains_key(&id))
                .ok_or(ReplayError::UnknownTopic {
                    record,
                    topic_id: id,
                })?;
            Ok(entry.insert(TopicDelta {
                name: Arc::clone(&base.name),
                id,
                base: Some(Arc::clone(base)),
                partitions: ChangedPartitions::new(),
            }))
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::delta::MetadataDelta;
    use crate::image::test_util::*;
    use crate::image::{MetadataImage, Provenance};

    const FOO: u128 = 1;
    const BAR: u128 = 2;
    const BAZ: u128 = 3;
    const BAR2: u128 = 4;

    #[test]
    fn new_ids_counts_the_changed_partitions_the_topic_lacks() {
        let entries: Vec<Entry> = [0, 2, 4, 6]
            .into_iter()
            .map(|id| (id, PartitionRegistration::default()))
            .collect();
        let changes = |ids: &[i32]| {
            let mut changes = ChangedPartitions::new();
            for id in ids {
                changes.insert(*id, PartitionRegistration::default());
            }
            changes
        };
        assert_eq!(new_ids(&entries, &changes(&[1, 2, 5, 6, 7])), 3);
        assert_eq!(new_ids(&entries, &changes(&[0, 2, 4, 6])), 0);
        assert_eq!(new_ids(&entries, &changes(&[-1, 8, 9])), 3);
        assert_eq!(new_ids(&entries, &changes(&[])), 0);
        assert_eq!(new_ids(&[], &changes(&[0, 1])), 2);
    }

    fn image1_records() -> Vec<MetadataRecord> {
        vec![
            topic("foo", FOO),
            partition(FOO, 0, &[1, 2, 3]),
            partition(FOO, 1, &[2, 3, 1]),
            topic("bar", BAR),
            partition(BAR, 0, &[3, 1, 2]),
        ]
    }

    fn delta1_records() -> Vec<MetadataRecord> {
        vec![
            remove_topic(BAR),
            isr_change(FOO, 0, &[2, 3], Some(2)),
            partition(FOO, 2, &[3, 1, 2]),
            topic("baz", BAZ),
            partition(BAZ, 0, &[1]),
            // "bar" re-created under a new id in the same delta that removed it.
            topic("bar", BAR2),
            partition(BAR2, 0, &[2]),
        ]
    }

    /// IMAGE2 written as a snapshot of the final state, independent of the delta logic.
    fn image2_records() -> Vec<MetadataRecord> {
        let MetadataRecord::Partition(mut foo0) = partition(FOO, 0, &[1, 2, 3]) else {
            unreachable!()
        };
        foo0.isr = vec![2, 3];
        foo0.leader = 2;
        foo0.leader_epoch = 1;
        foo0.partition_epoch = 1;
        vec![
            topic("foo", FOO),
            MetadataRecord::Partition(foo0),
            partition(FOO, 1, &[2, 3, 1]),
            partition(FOO, 2, &[3, 1, 2]),
            topic("baz", BAZ),
            partition(BAZ, 0, &[1]),
            topic("bar", BAR2),
            partition(BAR2, 0, &[2]),
        ]
    }

    #[test]
    fn names_colliding_in_metrics_are_indexed() {
        let image1 = image(&[
            topic("a.b", FOO),
            topic("a_b", BAR),
            topic("ab", BAZ),
            topic("a.c", BAR2),
        ]);
        let colliding = |image: &MetadataImage, name: &str| {
            image
                .topics
                .colliding_names(name)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(colliding(&image1, "a_b"), vec!["a.b", "a_b"]);
        assert_eq!(colliding(&image1, "a.b"), vec!["a.b", "a_b"]);
        assert_eq!(colliding(&image1, "a_c"), vec!["a.c"]);
        assert!(colliding(&image1, "ab").is_empty());
        assert!(colliding(&image1, "x.y").is_empty());
        let image2 = apply(&image1, &[remove_topic(FOO)]);
        assert_eq!(colliding(&image2, "a.b"), vec!["a_b"]);
    }

    #[test]
    fn long_and_short_names_index_alike() {
        // Around the 23-byte inline limit, multi-byte characters, '.' and '_' collisions.
        let names = [
            "a".repeat(22),
            "a".repeat(23),
            "a".repeat(24),
            format!("{}.x", "b".repeat(21)),
            format!("{}_x", "b".repeat(21)),
            format!("{}.long", "b".repeat(30)),
            format!("{}_long", "b".repeat(30)),
            "é".repeat(11),
            "é".repeat(12),
            "z".into(),
        ];
        let records: Vec<_> = names
            .iter()
            .enumerate()
            .map(|(n, name)| topic(name, 100 + n as u128))
            .collect();
        let image1 = image(&records);
        let mut sorted: Vec<&str> = names.iter().map(String::as_str).collect();
        sorted.sort_unstable();
        assert_eq!(image1.topics.names().collect::<Vec<_>>(), sorted);
        for (n, name) in names.iter().enumerate() {
            let found = image1.topics.get_by_name(name).unwrap();
            assert_eq!(found.id, Uuid::from_u128(100 + n as u128));
        }
        assert!(image1.topics.get_by_name(&"a".repeat(25)).is_none());
        let colliding = |image: &MetadataImage, name: &str| {
            image
                .topics
                .colliding_names(name)
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            colliding(&image1, &format!("{}_long", "b".repeat(30))),
            [names[5].clone(), names[6].clone()]
        );
        assert_eq!(
            colliding(&image1, &format!("{}.x", "b".repeat(21))),
            [names[3].clone(), names[4].clone()]
        );
        let image2 = apply(&image1, &[remove_topic(105), remove_topic(102)]);
        assert!(image2.topics.get_by_name(&"a".repeat(24)).is_none());
        assert_eq!(
            colliding(&image2, &format!("{}.long", "b".repeat(30))),
            [names[6].clone()]
        );
        assert_round_trip(&image2);
    }

    #[test]
    fn image1_plus_delta1_is_image2() {
        let image1 = image(&image1_records());
        let image2 = image(&image2_records());
        assert_eq!(apply(&image1, &delta1_records()), image2);

        let topics = &image2.topics;
        assert_eq!(topics.topic_count(), 3);
        assert_eq!(topics.partition_count(), 5);
        assert_eq!(topics.names().collect::<Vec<_>>(), ["bar", "baz", "foo"]);
        let bar = topics.get_by_name("bar").unwrap();
        assert_eq!(bar.id, Uuid::from_u128(BAR2));
        assert!(topics.get_by_id(&Uuid::from_u128(BAR)).is_none());
        let foo0 = topics.get_by_name("foo").unwrap().partition(0).unwrap();
        assert_eq!(foo0.replicas, [1, 2, 3]);
        assert_eq!(foo0.isr, [2, 3]);
        assert_eq!(
            (foo0.leader, foo0.leader_epoch, foo0.partition_epoch),
            (2, 1, 1)
        );
        assert_eq!(
            foo0.directories,
            vec![
                Uuid::from_u128(0xd001),
                Uuid::from_u128(0xd002),
                Uuid::from_u128(0xd003)
            ]
        );
    }

    #[test]
    fn every_batch_split_gives_image2() {
        let image1 = image(&image1_records());
        assert_every_batch_split(&image1, &delta1_records(), &image(&image2_records()));
        assert_every_batch_split(
            &MetadataImage::empty(),
            &image1_records(),
            &image(&image1_records()),
        );
    }

    #[test]
    fn delta1_reports_created_deleted_and_changed_topics() {
        let image1 = Arc::new(image(&image1_records()));
        let mut delta = MetadataDelta::new(Arc::clone(&image1));
        delta.replay_all(&delta1_records()).unwrap();
        let topics = delta.topics_delta().unwrap();
        let mut created: Vec<_> = topics.created_topics().map(|t| t.name()).collect();
        created.sort();
        assert_eq!(created, ["bar", "baz"]);
        assert_eq!(
            topics.deleted_topics().collect::<Vec<_>>(),
            [(Uuid::from_u128(BAR), "bar")]
        );
        let foo = topics.changed_topic(&Uuid::from_u128(FOO)).unwrap();
        assert!(!foo.is_new());
        let changed: Vec<i32> = foo.changed_partitions().map(|(id, _)| id).collect();
        assert_eq!(changed, [0, 2]);
        let added: Vec<i32> = foo.new_partitions().map(|(id, _)| id).collect();
        assert_eq!(added, [2]);
        assert_eq!(foo.partition(1).map(|p| p.leader), Some(2));
        assert!(delta.cluster_delta().is_none());
        assert!(delta.configs_delta().is_none());
    }

    #[test]
    fn topic_created_and_removed_in_one_delta_leaves_no_trace() {
        let image1 = image(&image1_records());
        let mut delta = MetadataDelta::new(Arc::new(image1.clone()));
        delta
            .replay_all(&[topic("tmp", 9), partition(9, 0, &[1]), remove_topic(9)])
            .unwrap();
        let topics = delta.topics_delta().unwrap();
        assert_eq!(topics.created_topics().count(), 0);
        assert_eq!(topics.deleted_topics().count(), 0);
        assert_eq!(*delta.apply(Provenance::default()).topics, *image1.topics);
    }

    #[test]
    fn topic_removed_and_recreated_with_same_id() {
        let image1 = image(&image1_records());
        let image2 = apply(
            &image1,
            &[
                remove_topic(BAR),
                topic("bar", BAR),
                partition(BAR, 0, &[1]),
            ],
        );
        let bar = image2.topics.get_by_name("bar").unwrap();
        assert_eq!(bar.partition(0).unwrap().replicas, [1]);
        assert_eq!(bar.partition_count(), 1);
        assert_eq!(image2.topics.partition_count(), 3);
    }

    #[test]
    fn one_partition_change_shares_every_other_topic() {
        let mut records = Vec::new();
        for t in 0..200u128 {
            records.push(topic(&format!("t{t:03}"), 100 + t));
            for p in 0..3 {
                records.push(partition(100 + t, p, &[1, 2, 3]));
            }
        }
        let image1 = image(&records);
        let image2 = apply(&image1, &[isr_change(150, 1, &[1, 2], None)]);
        assert!(Arc::ptr_eq(&image1.features, &image2.features));
        assert!(Arc::ptr_eq(&image1.cluster, &image2.cluster));
        assert!(Arc::ptr_eq(&image1.configs, &image2.configs));
        assert!(Arc::ptr_eq(&image1.client_quotas, &image2.client_quotas));
        assert!(!Arc::ptr_eq(&image1.topics, &image2.topics));
        let mut shared = 0;
        for old in image1.topics.iter() {
            let new = image2.topics.get_by_id(&old.id).unwrap();
            if Arc::ptr_eq(old, new) {
                shared += 1;
            } else {
                assert_eq!(old.id, Uuid::from_u128(150));
            }
        }
        assert_eq!(shared, 199);
        let changed = image2.topics.get_by_name("t050").unwrap();
        assert_eq!(changed.partition(1).unwrap().isr, [1, 2]);
        assert_eq!(changed.partition(1).unwrap().partition_epoch, 1);
        assert_eq!(changed.partition(1).unwrap().leader_epoch, 0);
        // Untouched partitions of the changed topic keep their directory list (interned once).
        assert_eq!(
            changed.partition(0),
            image1.topics.get_by_name("t050").unwrap().partition(0)
        );
        assert_eq!(image2.topics.partition_count(), 600);
    }

    #[test]
    fn large_topics_cross_from_slice_to_vector() {
        let mut records = vec![topic("big", 7)];
        records.extend((0..60).map(|p| partition(7, p, &[1, 2])));
        let image1 = image(&records);
        assert!(matches!(
            image1.topics.get_by_name("big").unwrap().partitions,
            Partitions::Small(_)
        ));
        let mut grow: Vec<_> = (60..100).rev().map(|p| partition(7, p, &[2, 1])).collect();
        grow.push(isr_change(7, 70, &[2], None));
        grow.push(isr_change(7, 3, &[1], None));
        let image2 = apply(&image1, &grow);
        let big = image2.topics.get_by_name("big").unwrap();
        assert!(matches!(big.partitions, Partitions::Large(_)));
        assert_eq!(big.partition_count(), 100);
        assert_eq!(
            big.partitions().map(|(id, _)| id).collect::<Vec<_>>(),
            (0..100).collect::<Vec<_>>()
        );
        assert_eq!(big.partition(70).unwrap().isr, [2]);
        assert_eq!(big.partition(3).unwrap().isr, [1]);
        // A change inside the large representation.
        let image3 = apply(
            &image2,
            &[isr_change(7, 99, &[1], Some(1)), partition(7, 100, &[1])],
        );
        let big = image3.topics.get_by_name("big").unwrap();
        assert_eq!(big.partition(99).unwrap().leader_epoch, 1);
        assert_eq!(big.partition_count(), 101);
        assert_eq!(image3.topics.partition_count(), 101);
        assert_round_trip(&image3);
    }

    #[test]
    fn partitions_in_any_order_give_the_same_topic() {
        // 300 partitions in a scrambled order (7 is prime to 300): the delta's sorted run
        // takes the in-order ones and switches to a map on the first out-of-order one past 64.
        let scrambled: Vec<i32> = (0..300).map(|n| (n * 7) % 300).collect();
        let mut records = vec![topic("big", 7)];
        records.extend(scrambled.iter().map(|&p| partition(7, p, &[1, 2])));
        records.push(isr_change(7, 150, &[2], Some(2)));
        let mut in_order = vec![topic("big", 7)];
        in_order.extend((0..300).map(|p| partition(7, p, &[1, 2])));
        in_order.push(isr_change(7, 150, &[2], Some(2)));
        let scrambled_image = image(&records);
        assert_eq!(scrambled_image, image(&in_order));
        assert_eq!(scrambled_image.digest, scrambled_image.compute_digest());
        let big = scrambled_image.topics.get_by_name("big").unwrap();
        assert_eq!(big.partition_count(), 300);
        assert_eq!(big.partition(150).unwrap().leader, 2);
        // Changes to a few partitions of the large topic, one out of order, replayed twice.
        let changes = [
            isr_change(7, 299, &[1], None),
            isr_change(7, 3, &[1], None),
            isr_change(7, 299, &[2], None),
        ];
        let changed = apply(&scrambled_image, &changes);
        assert_eq!(changed.digest, changed.compute_digest());
        let big = changed.topics.get_by_name("big").unwrap();
        assert_eq!(big.partition(299).unwrap().isr, [2]);
        assert_eq!(big.partition(299).unwrap().partition_epoch, 2);
        assert_eq!(big.partition(3).unwrap().isr, [1]);
    }

    #[test]
    fn replay_errors_name_the_problem_and_change_nothing() {
        let image1 = Arc::new(image(&image1_records()));
        let mut delta = MetadataDelta::new(Arc::clone(&image1));
        let cases = [
            (
                partition(99, 0, &[1]),
                ReplayError::UnknownTopic {
                    record: "PartitionRecord",
                    topic_id: Uuid::from_u128(99),
                },
            ),
            (
                isr_change(FOO, 5, &[1], None),
                ReplayError::UnknownPartition {
                    topic_id: Uuid::from_u128(FOO),
                    topic_name: "foo".into(),
                    partition: 5,
                },
            ),
            (
                topic("foo", 77),
                ReplayError::DuplicateTopicName {
                    name: "foo".into(),
                    existing_id: Uuid::from_u128(FOO),
                    new_id: Uuid::from_u128(77),
                },
            ),
            (
                topic("other", BAR),
                ReplayError::DuplicateTopicId {
                    topic_id: Uuid::from_u128(BAR),
                    existing_name: "bar".into(),
                    new_name: "other".into(),
                },
            ),
            (
                remove_topic(99),
                ReplayError::UnknownTopic {
                    record: "RemoveTopicRecord",
                    topic_id: Uuid::from_u128(99),
                },
            ),
        ];
        for (record, expected) in cases {
            assert_eq!(delta.replay(&record), Err(expected));
            assert!(
                delta.topics_delta().is_none(),
                "{record:?} left a topics delta"
            );
        }
        assert_eq!(
            ReplayError::UnknownPartition {
                topic_id: Uuid::from_u128(FOO),
                topic_name: "foo".into(),
                partition: 5,
            }
            .to_string(),
            "PartitionChangeRecord for partition 5 of topic 'foo' \
             (00000000-0000-0000-0000-000000000001), which has no such partition: a \
             PartitionRecord must create it first"
        );
        // A removed topic is unknown to later records of the same delta.
        delta.replay(&remove_topic(BAR)).unwrap();
        assert_eq!(
            delta.replay(&isr_change(BAR, 0, &[1], None)),
            Err(ReplayError::UnknownTopic {
                record: "PartitionChangeRecord",
                topic_id: Uuid::from_u128(BAR),
            })
        );
        // A name created in this delta cannot be created twice.
        delta.replay(&topic("new", 50)).unwrap();
        assert!(matches!(
            delta.replay(&topic("new", 51)),
            Err(ReplayError::DuplicateTopicName { .. })
        ));
    }

    /// Large deltas are rebuilt on helper threads (above `PARALLEL_REBUILD_PARTITIONS`); the
    /// image must be the one small deltas applied one topic at a time give.
    #[test]
    fn a_large_delta_gives_the_image_of_small_ones() {
        const TOPICS: u128 = 1_500;
        const PARTITIONS: i32 = 4;
        assert!((TOPICS as usize) * (PARTITIONS as usize) > PARALLEL_REBUILD_PARTITIONS);
        let create = |id: u128| {
            let mut records = vec![topic(&format!("t{id:05}"), id)];
            records.extend((0..PARTITIONS).map(|p| partition(id, p, &[1, 2, 3])));
            records
        };
        // Shrink the ISR of every partition of most topics, delete some, create others.
        let change = |id: u128| match id % 10 {
            0 => vec![remove_topic(id)],
            9 => create(id + TOPICS),
            _ => (0..PARTITIONS)
                .map(|p| isr_change(id, p, &[2, 3], Some(2)))
                .collect(),
        };
        let one_at_a_time =
            |base: MetadataImage, per_topic: &dyn Fn(u128) -> Vec<MetadataRecord>| {
                (1..=TOPICS).fold(base, |image, id| apply(&image, &per_topic(id)))
            };
        let all_at_once =
            |base: &MetadataImage, per_topic: &dyn Fn(u128) -> Vec<MetadataRecord>| {
                apply(base, &(1..=TOPICS).flat_map(per_topic).collect::<Vec<_>>())
            };

        let created = all_at_once(&MetadataImage::empty(), &create);
        let created_small = one_at_a_time(MetadataImage::empty(), &create);
        assert_eq!(created.topics, created_small.topics);
        assert_eq!(created.digest, created_small.digest);
        assert_eq!(created.digest, created.compute_digest());
        assert_eq!(created.topics.partition_count(), 6_000);

        let changed = all_at_once(&created, &change);
        let changed_small = one_at_a_time(created_small, &change);
        assert_eq!(changed.topics, changed_small.topics);
        assert_eq!(changed.digest, changed_small.digest);
        assert_eq!(changed.digest, changed.compute_digest());
        assert_eq!(changed.topics.topic_count(), 1_500);
        let shrunk = changed.topics.get_by_name("t00001").unwrap();
        assert_eq!(shrunk.partition(3).unwrap().isr, [2, 3]);
        assert!(changed.topics.get_by_name("t00010").is_none());
        assert_eq!(
            changed
                .topics
                .get_by_name("t01509")
                .unwrap()
                .partition_count(),
            4
        );
    }

    #[test]
    fn round_trip_through_records() {
        assert_round_trip(&image(&image2_records()));
        assert_round_trip(&image(&image1_records()));
    }
}
