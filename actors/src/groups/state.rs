//! The classic group protocol as pure state: groups, members, committed offsets, and the
//! decisions of JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and friends.
//!
//! Time is passed in (`Instant` for deadlines, epoch milliseconds for what is stored), and what
//! the coordinator must do outside (append records to `__consumer_offsets`, wake up at a
//! deadline) is queued as [`Effect`]s the actor drains after each call. Parked JoinGroup and
//! SyncGroup requests are oneshot senders answered when the group's state allows. So this file is
//! unit-tested with exact values and no actor system, runtime or log.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::protocols::{CommonProtocols, Protocols};
use super::records::{self, CoordinatorRecord, GroupValue, MemberValue, OffsetKey, OffsetValue};
use super::{codes, partition_for, GroupSettings};

mod consumer;
mod uncommitted;

pub use consumer::{
    validate as validate_consumer_heartbeat, ConsumerConfigs, ConsumerGroupDescription,
    ConsumerHeartbeat, ConsumerHeartbeatResult, ConsumerMemberDescription, DescribableTopics,
    MemberState, TopicLookup,
};
use consumer::{ConsumerGroup, ConsumerLoad, NoTopics};
use uncommitted::UncommittedOffsets;

/// Kafka's default message of the coordinator errors answered before a group is looked at.
fn error_name(code: i16) -> &'static str {
    match code {
        codes::NOT_COORDINATOR => "This is not the correct coordinator.",
        codes::COORDINATOR_LOAD_IN_PROGRESS => {
            "The coordinator is loading and hence can't process requests."
        }
        codes::COORDINATOR_NOT_AVAILABLE => "The coordinator is not available.",
        codes::INVALID_GROUP_ID => "The group id is invalid.",
        _ => "",
    }
}

/// Every state name a listed group can have, classic ([`GroupState::name`]) and consumer
/// (`ConsumerGroup::state_name`): what ListGroups' states filter can match.
pub const LISTABLE_STATES: [&str; 7] = [
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
    "Assigning",
    "Reconciling",
];

/// The group types ListGroups reports (and its types filter can match).
pub const GROUP_TYPES: [&str; 2] = [CLASSIC_TYPE, CONSUMER_TYPE];
const CLASSIC_TYPE: &str = "classic";
const CONSUMER_TYPE: &str = "consumer";

/// Classic group states (Kafka's `ClassicGroupState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// Kafka's name, as ListGroups and DescribeGroups report it.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

/// A JoinGroup request, as the coordinator needs it.
#[derive(Clone, Debug)]
pub struct JoinRequest {
    pub version: i16,
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Protocols,
}

/// One member in the leader's JoinGroup answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinedMember {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub metadata: Bytes,
}

/// The answer to a JoinGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinResult {
    pub error: i16,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    pub members: Vec<JoinedMember>,
    pub skip_assignment: bool,
}

impl JoinResult {
    pub fn error(error: i16, member_id: &str) -> Self {
        JoinResult {
            error,
            generation: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.to_owned(),
            members: Vec::new(),
            skip_assignment: false,
        }
    }
}

/// A SyncGroup request.
#[derive(Clone, Debug)]
pub struct SyncRequest {
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    /// The leader's assignments as it listed them (kept as decoded: a leader may list many).
    pub assignments: Vec<kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment>,
}

/// The answer to a SyncGroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncResult {
    pub error: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResult {
    pub fn error(error: i16) -> Self {
        SyncResult {
            error,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// One member to remove in a LeaveGroup.
#[derive(Clone, Debug)]
pub struct Leaving {
    pub member_id: String,
    pub group_instance_id: Option<String>,
}

/// One partition of an OffsetCommit.
#[derive(Clone, Debug)]
pub struct CommitPartition {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
    /// Checked by the handler against the image (UNKNOWN_TOPIC_OR_PARTITION) before it gets here.
    pub error: i16,
}

/// An OffsetCommit.
#[derive(Clone, Debug)]
pub struct CommitRequest {
    pub version: i16,
    pub group_id: String,
    pub generation: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// −1: the broker's retention.
    pub retention_ms: i64,
    pub partitions: Vec<CommitPartition>,
}

/// A committed offset as OffsetFetch reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Committed {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
}

/// What DescribeGroups reports of one member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberDescription {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// What DescribeGroups reports of one group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupDescription {
    pub error: i16,
    pub state: &'static str,
    pub protocol_type: String,
    pub protocol_data: String,
    pub members: Vec<MemberDescription>,
}

/// One group in ListGroups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: &'static str,
    /// "classic" or "consumer".
    pub group_type: &'static str,
}

/// A deadline the coordinator wants to be woken at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Timer {
    /// A member's session may have expired.
    Session { group: String, member: String },
    /// A member that got MEMBER_ID_REQUIRED may not have come back.
    Pending { group: String, member: String },
    /// The join phase of a rebalance may be complete (initial delay or rebalance timeout).
    Join { group: String },
    /// Members of `generation` may not have sent SyncGroup one rebalance timeout after its
    /// join phase completed.
    PendingSync { group: String, generation: i32 },
    /// A consumer-protocol member's session may have expired.
    ConsumerSession { group: String, member: String },
    /// A consumer-protocol member may not have revoked its partitions within its rebalance
    /// timeout (at that member epoch).
    ConsumerRevocation {
        group: String,
        member: String,
        epoch: i32,
    },
}

/// One record's key and value (`None`: a tombstone).
pub type KeyValue = (Vec<u8>, Option<Vec<u8>>);

/// Records to append to one partition of `__consumer_offsets`.
pub struct Write {
    pub partition: i32,
    pub records: Vec<KeyValue>,
    /// Told the append's error code (NONE on success) when the write is done.
    pub done: Option<oneshot::Sender<i16>>,
    /// A write of offsets, numbered: its outcome goes back to
    /// [`Coordinator::offsets_written`].
    pub offsets_write: Option<u64>,
}

/// What the coordinator must do outside the pure state.
pub enum Effect {
    Write(Write),
    Timer { at: Instant, timer: Timer },
}

struct Member {
    id: String,
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout: Duration,
    rebalance_timeout: Duration,
    protocol_type: String,
    protocols: Protocols,
    assignment: Bytes,
    /// Order of joining: the first joiner leads.
    joined_seq: u64,
    deadline: Instant,
    join_waiter: Option<oneshot::Sender<JoinResult>>,
    sync_waiter: Option<oneshot::Sender<SyncResult>>,
}

impl Member {
    fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols.metadata(protocol).unwrap_or_default()
    }
    fn same_protocols(&self, protocol_type: &str, protocols: &Protocols) -> bool {
        self.protocol_type == protocol_type && &self.protocols == protocols
    }
}

/// Kafka's `pendingSyncMembers` with its timer: the members of the generation whose join phase
/// just completed that have not sent SyncGroup, removed at `deadline` if still silent.
struct PendingSync {
    members: HashSet<String>,
    deadline: Instant,
}

/// The protocols every one of `members` supports (Kafka's `supportedProtocols` counted to the
/// group's size), found once so each name is then one lookup.
fn common_protocols<'a>(members: impl Iterator<Item = &'a Member>) -> CommonProtocols<'a> {
    let protocols: Vec<&Protocols> = members.map(|member| &member.protocols).collect();
    CommonProtocols::of(&protocols)
}

struct Group {
    id: String,
    partition: i32,
    state: GroupState,
    protocol_type: Option<String>,
    protocol_name: Option<String>,
    generation: i32,
    leader: Option<String>,
    members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, until they join or their session passes.
    pending: HashMap<String, Instant>,
    /// `group.instance.id` → member id.
    static_members: HashMap<String, String>,
    offsets: BTreeMap<(String, i32), OffsetValue>,
    /// Offsets whose latest writes are not yet replicated: OffsetFetch answers the committed.
    uncommitted: UncommittedOffsets,
    state_timestamp_ms: i64,
    rebalance_deadline: Option<Instant>,
    /// The initial rebalance delay: the join phase does not end before this.
    join_not_before: Option<Instant>,
    /// Set from the completion of a join phase until every member has synced or a rebalance
    /// starts (so only in CompletingRebalance and Stable).
    pending_sync: Option<PendingSync>,
    /// Set for a KIP-848 consumer group (its classic fields stay empty).
    consumer: Option<Box<ConsumerGroup>>,
}

impl Group {
    /// Forgets the offset of `(topic, partition)`, committed or in flight; the tombstone to
    /// write when one was committed.
    fn remove_offset(&mut self, topic: String, partition: i32) -> Option<KeyValue> {
        let key = (topic, partition);
        self.uncommitted.forget(&key);
        self.offsets.remove(&key)?;
        let (topic, partition) = key;
        let key = OffsetKey {
            group: self.id.clone(),
            topic,
            partition,
        };
        Some((records::offset_key(&key), None))
    }

    fn new(id: &str, partition: i32, now_ms: i64) -> Self {
        Group {
            id: id.to_owned(),
            partition,
            state: GroupState::Empty,
            protocol_type: None,
            protocol_name: None,
            generation: 0,
            leader: None,
            members: BTreeMap::new(),
            pending: HashMap::new(),
            static_members: HashMap::new(),
            offsets: BTreeMap::new(),
            uncommitted: UncommittedOffsets::default(),
            state_timestamp_ms: now_ms,
            rebalance_deadline: None,
            join_not_before: None,
            pending_sync: None,
            consumer: None,
        }
    }

    /// Whether the group has no members (classic or consumer).
    fn is_empty(&self) -> bool {
        match &self.consumer {
            Some(cg) => cg.is_empty(),
            None => self.members.is_empty() && self.pending.is_empty(),
        }
    }

    fn record_value(&self) -> GroupValue {
        let protocol = self.protocol_name.clone();
        GroupValue {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: protocol.clone(),
            leader: self.leader.clone(),
            current_state_timestamp: self.state_timestamp_ms,
            members: self
                .members
                .values()
                .map(|m| MemberValue {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: duration_ms(m.rebalance_timeout),
                    session_timeout_ms: duration_ms(m.session_timeout),
                    subscription: protocol
                        .as_deref()
                        .map(|p| m.metadata(p))
                        .unwrap_or_default(),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    /// Topics the members' consumer-protocol subscriptions name.
    fn subscribed_topics(&self) -> Option<HashSet<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol_name.as_deref()?;
        let mut topics = HashSet::new();
        for member in self.members.values() {
            topics.extend(records::subscribed_topics(&member.metadata(protocol))?);
        }
        Some(topics)
    }

    fn transition(&mut self, state: GroupState, now_ms: i64) {
        self.state = state;
        self.state_timestamp_ms = now_ms;
    }

    fn max_rebalance_timeout(&self) -> Duration {
        self.members
            .values()
            .map(|m| m.rebalance_timeout)
            .max()
            .unwrap_or_default()
    }

    /// A member sent SyncGroup in CompletingRebalance or Stable (Kafka's
    /// `removePendingSyncMember`): once none is left the expiry has nothing to do.
    fn synced(&mut self, member_id: &str) {
        if let Some(pending) = &mut self.pending_sync {
            pending.members.remove(member_id);
            if pending.members.is_empty() {
                self.pending_sync = None;
            }
        }
    }

    /// Takes a member out (Kafka's `ClassicGroup.remove`); its parked requests are told
    /// UNKNOWN_MEMBER_ID. False when there is no such member.
    fn remove(&mut self, member_id: &str) -> bool {
        let Some(mut member) = self.members.remove(member_id) else {
            return false;
        };
        if let Some(waiter) = member.join_waiter.take() {
            let _ = waiter.send(JoinResult::error(codes::UNKNOWN_MEMBER_ID, member_id));
        }
        if let Some(waiter) = member.sync_waiter.take() {
            let _ = waiter.send(SyncResult::error(codes::UNKNOWN_MEMBER_ID));
        }
        if let Some(instance) = &member.instance_id {
            self.static_members.remove(instance);
        }
        true
    }

    fn all_joined(&self) -> bool {
        self.pending.is_empty() && self.members.values().all(|m| m.join_waiter.is_some())
    }

    /// Validates a member id and static instance id: UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID.
    fn check_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<(), i16> {
        if let Some(instance) = instance_id {
            match self.static_members.get(instance) {
                Some(owner) if owner != member_id => return Err(codes::FENCED_INSTANCE_ID),
                Some(_) => return Ok(()),
                None => return Err(codes::UNKNOWN_MEMBER_ID),
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(codes::UNKNOWN_MEMBER_ID)
        }
    }
}

fn duration_ms(d: Duration) -> i32 {
    i32::try_from(d.as_millis()).unwrap_or(i32::MAX)
}

fn millis(ms: i32) -> Duration {
    Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// Whether this node serves a partition's groups yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PartitionStatus {
    Loading,
    Loaded,
}

/// A numbered write of offsets: its number, its group and the partitions it sets.
type OffsetsWrite = (u64, String, Vec<(String, i32)>);

/// Every group of the `__consumer_offsets` partitions this node leads.
pub struct Coordinator {
    settings: GroupSettings,
    partitions: HashMap<i32, PartitionStatus>,
    groups: HashMap<String, Group>,
    effects: Vec<Effect>,
    join_seq: u64,
    /// The last number given to a write of offsets.
    offsets_write_seq: u64,
    /// Per partition, its writes of offsets not yet replicated, in write order: the number,
    /// the group and the partitions it sets.
    offsets_writes: HashMap<i32, VecDeque<OffsetsWrite>>,
    /// The topics of the last metadata image a request came with: classic members of a
    /// consumer group give and get partitions by name, and a timer's downgrade names them.
    topics: Arc<dyn TopicLookup + Send + Sync>,
}

impl Coordinator {
    pub fn new(settings: GroupSettings) -> Self {
        Coordinator {
            settings,
            partitions: HashMap::new(),
            groups: HashMap::new(),
            effects: Vec::new(),
            join_seq: 0,
            offsets_write_seq: 0,
            offsets_writes: HashMap::new(),
            topics: Arc::new(NoTopics),
        }
    }

    /// The topics of the image the request being handled came with.
    pub fn set_topics(&mut self, topics: Arc<dyn TopicLookup + Send + Sync>) {
        self.topics = topics;
    }

    pub fn settings(&self) -> &GroupSettings {
        &self.settings
    }

    /// The partition count of `__consumer_offsets` as the image has it (it decides which
    /// partition a group lives in).
    pub fn set_partition_count(&mut self, partitions: i32) {
        if partitions > 0 {
            self.settings.offsets_topic_partitions = partitions;
        }
    }

    /// The effects queued since the last call.
    pub fn take_effects(&mut self) -> Vec<Effect> {
        std::mem::take(&mut self.effects)
    }

    fn timer(&mut self, at: Instant, timer: Timer) {
        self.effects.push(Effect::Timer { at, timer });
    }

    fn write(
        &mut self,
        partition: i32,
        records: Vec<KeyValue>,
        done: Option<oneshot::Sender<i16>>,
    ) {
        if records.is_empty() {
            if let Some(done) = done {
                let _ = done.send(codes::NONE);
            }
            return;
        }
        self.effects.push(Effect::Write(Write {
            partition,
            records,
            done,
            offsets_write: None,
        }));
    }

    /// The outcome of write `write` of offsets on `partition`: replicated (with every earlier
    /// one), or never in the log (taken back).
    pub fn offsets_written(&mut self, partition: i32, write: u64, replicated: bool) {
        let Some(writes) = self.offsets_writes.get_mut(&partition) else {
            return;
        };
        let done: Vec<OffsetsWrite> = if replicated {
            let mut done = Vec::new();
            while let Some(entry) = writes.pop_front_if(|(seq, ..)| *seq <= write) {
                done.push(entry);
            }
            done
        } else {
            match writes.iter().position(|(seq, ..)| *seq == write) {
                Some(at) => writes.remove(at).into_iter().collect(),
                None => Vec::new(),
            }
        };
        for (seq, group_id, keys) in done {
            let Some(group) = self.groups.get_mut(&group_id) else {
                continue;
            };
            for key in keys {
                if replicated {
                    group.uncommitted.replicated(&key, seq);
                    continue;
                }
                match group.uncommitted.lost(&key, seq) {
                    Some(Some(value)) => {
                        group.offsets.insert(key, value);
                    }
                    Some(None) => {
                        group.offsets.remove(&key);
                    }
                    None => {}
                }
            }
        }
    }

    fn write_group(&mut self, group_id: &str) {
        let Some(group) = self.groups.get(group_id) else {
            return;
        };
        let record = (
            records::group_key(group_id),
            Some(records::group_value(&group.record_value())),
        );
        let partition = group.partition;
        self.write(partition, vec![record], None);
    }

    /// The partition of `group_id` if this node serves it: NOT_COORDINATOR when another node
    /// leads it, COORDINATOR_LOAD_IN_PROGRESS while it is being loaded.
    pub fn coordinator_for(&self, group_id: &str) -> Result<i32, i16> {
        // The records store ids with an int16 length; a longer one (possible in flexible
        // requests) could not be written, so it is refused before anything changes.
        if group_id.len() > i16::MAX as usize {
            return Err(codes::INVALID_GROUP_ID);
        }
        let partition = partition_for(group_id, self.settings.offsets_topic_partitions);
        match self.partitions.get(&partition) {
            None => Err(codes::NOT_COORDINATOR),
            Some(PartitionStatus::Loading) => Err(codes::COORDINATOR_LOAD_IN_PROGRESS),
            Some(PartitionStatus::Loaded) => Ok(partition),
        }
    }

    /// Partitions led now but not before: they must be loaded (the caller reads their logs and
    /// calls [`Coordinator::loaded`]).
    pub fn lead(&mut self, led: &HashSet<i32>) -> Vec<i32> {
        let gone: Vec<i32> = self
            .partitions
            .keys()
            .filter(|p| !led.contains(p))
            .copied()
            .collect();
        for partition in gone {
            self.unload(partition);
        }
        let mut new = Vec::new();
        for partition in led {
            if !self.partitions.contains_key(partition) {
                self.partitions.insert(*partition, PartitionStatus::Loading);
                new.push(*partition);
            }
        }
        new.sort_unstable();
        new
    }

    /// Stops serving a partition: its groups are dropped and parked requests answered
    /// NOT_COORDINATOR (the client finds the new coordinator).
    pub fn unload(&mut self, partition: i32) {
        self.partitions.remove(&partition);
        self.offsets_writes.remove(&partition);
        let ids: Vec<String> = self
            .groups
            .values()
            .filter(|g| g.partition == partition)
            .map(|g| g.id.clone())
            .collect();
        for id in ids {
            if let Some(mut group) = self.groups.remove(&id) {
                for member in group.members.values_mut() {
                    if let Some(waiter) = member.join_waiter.take() {
                        let _ = waiter.send(JoinResult::error(codes::NOT_COORDINATOR, &member.id));
                    }
                    if let Some(waiter) = member.sync_waiter.take() {
                        let _ = waiter.send(SyncResult::error(codes::NOT_COORDINATOR));
                    }
                }
            }
        }
        tracing::info!(
            partition,
            "no longer coordinator of this __consumer_offsets partition"
        );
    }

    /// Installs the records of a partition read from its log, in log order, and starts serving
    /// its groups. Members of groups that had some are back with a fresh session.
    pub fn loaded(
        &mut self,
        partition: i32,
        log: Vec<CoordinatorRecord>,
        now: Instant,
        now_ms: i64,
    ) {
        if self.partitions.get(&partition) != Some(&PartitionStatus::Loading) {
            return;
        }
        let mut values: HashMap<String, Option<GroupValue>> = HashMap::new();
        let mut offsets: HashMap<String, BTreeMap<(String, i32), OffsetValue>> = HashMap::new();
        let mut consumer_loads: HashMap<String, ConsumerLoad> = HashMap::new();
        for record in log {
            let Some(record) = ConsumerLoad::replay(&mut consumer_loads, record) else {
                continue;
            };
            match record {
                CoordinatorRecord::Offset(key, value) => {
                    let group = offsets.entry(key.group).or_default();
                    match value {
                        Some(value) => {
                            group.insert((key.topic, key.partition), value);
                        }
                        None => {
                            group.remove(&(key.topic, key.partition));
                        }
                    }
                }
                CoordinatorRecord::Group(id, value) => {
                    values.insert(id, value);
                }
                _ => {}
            }
        }
        let consumer_session = millis(self.settings.consumer_session_timeout_ms);
        let mut consumer_groups: HashMap<String, Box<ConsumerGroup>> = HashMap::new();
        for (id, load) in consumer_loads {
            if let Some((cg, timers)) = load.build(consumer_session, now) {
                for (member, at) in timers {
                    self.effects.push(Effect::Timer {
                        at,
                        timer: Timer::ConsumerSession {
                            group: id.clone(),
                            member,
                        },
                    });
                }
                consumer_groups.insert(id, Box::new(cg));
            }
        }
        let mut ids: HashSet<String> = values
            .iter()
            .filter(|(_, v)| v.is_some())
            .map(|(id, _)| id.clone())
            .collect();
        ids.extend(
            offsets
                .iter()
                .filter(|(_, o)| !o.is_empty())
                .map(|(id, _)| id.clone()),
        );
        ids.extend(consumer_groups.keys().cloned());
        let (mut group_count, mut offset_count) = (0usize, 0usize);
        for id in ids {
            let mut group = Group::new(&id, partition, now_ms);
            if let Some(cg) = consumer_groups.remove(&id) {
                group.consumer = Some(cg);
            } else if let Some(Some(value)) = values.remove(&id) {
                group.protocol_type = Some(value.protocol_type).filter(|t| !t.is_empty());
                group.generation = value.generation;
                group.protocol_name = value.protocol.clone();
                group.leader = value.leader;
                if value.current_state_timestamp >= 0 {
                    group.state_timestamp_ms = value.current_state_timestamp;
                }
                for member in value.members {
                    self.join_seq += 1;
                    let session_timeout = millis(member.session_timeout_ms);
                    let protocols = value
                        .protocol
                        .as_deref()
                        .map(|p| Protocols::from_pairs([(p, &member.subscription[..])]))
                        .unwrap_or_default();
                    if let Some(instance) = &member.group_instance_id {
                        group
                            .static_members
                            .insert(instance.clone(), member.member_id.clone());
                    }
                    self.effects.push(Effect::Timer {
                        at: now + session_timeout,
                        timer: Timer::Session {
                            group: id.clone(),
                            member: member.member_id.clone(),
                        },
                    });
                    group.members.insert(
                        member.member_id.clone(),
                        Member {
                            id: member.member_id,
                            instance_id: member.group_instance_id,
                            client_id: member.client_id,
                            client_host: member.client_host,
                            session_timeout,
                            rebalance_timeout: millis(member.rebalance_timeout_ms),
                            protocol_type: group.protocol_type.clone().unwrap_or_default(),
                            protocols,
                            assignment: member.assignment,
                            joined_seq: self.join_seq,
                            deadline: now + session_timeout,
                            join_waiter: None,
                            sync_waiter: None,
                        },
                    );
                }
                group.state = if group.members.is_empty() {
                    GroupState::Empty
                } else {
                    GroupState::Stable
                };
            }
            if let Some(committed) = offsets.remove(&id) {
                offset_count += committed.len();
                group.offsets = committed;
            }
            group_count += 1;
            self.groups.insert(id, group);
        }
        self.partitions.insert(partition, PartitionStatus::Loaded);
        if group_count > 0 {
            tracing::info!(
                partition,
                groups = group_count,
                offsets = offset_count,
                "loaded __consumer_offsets partition"
            );
        }
    }

    /// JoinGroup. The answer comes through the returned receiver, at once or when the join
    /// phase of the rebalance completes.
    pub fn join(
        &mut self,
        request: JoinRequest,
        now: Instant,
        now_ms: i64,
    ) -> oneshot::Receiver<JoinResult> {
        let (sender, receiver) = oneshot::channel();
        if let Err(error) = self.try_join(request, sender, now, now_ms) {
            // try_join hands the sender back only when it answered nothing.
            let (code, member_id, sender) = error;
            let _ = sender.send(JoinResult::error(code, &member_id));
        }
        receiver
    }

    #[allow(clippy::type_complexity)]
    fn try_join(
        &mut self,
        request: JoinRequest,
        sender: oneshot::Sender<JoinResult>,
        now: Instant,
        now_ms: i64,
    ) -> Result<(), (i16, String, oneshot::Sender<JoinResult>)> {
        let fail = |code, sender| Err((code, request.member_id.clone(), sender));
        if request.group_id.is_empty() {
            return fail(codes::INVALID_GROUP_ID, sender);
        }
        let partition = match self.coordinator_for(&request.group_id) {
            Ok(p) => p,
            Err(code) => return fail(code, sender),
        };
        if request
            .group_instance_id
            .as_ref()
            .is_some_and(|i| i.len() > i16::MAX as usize / 2)
        {
            // The member id is `<instance id>-<uuid>` and is stored with an int16 length.
            return fail(codes::INVALID_REQUEST, sender);
        }
        if request.session_timeout_ms < self.settings.min_session_timeout_ms
            || request.session_timeout_ms > self.settings.max_session_timeout_ms
        {
            return fail(codes::INVALID_SESSION_TIMEOUT, sender);
        }
        let exists = self.groups.contains_key(&request.group_id);
        if !exists {
            if !request.member_id.is_empty() {
                return fail(codes::UNKNOWN_MEMBER_ID, sender);
            }
            self.groups.insert(
                request.group_id.clone(),
                Group::new(&request.group_id, partition, now_ms),
            );
        }
        // A consumer group with members does not take classic members; an empty one becomes
        // a classic group again (its offsets stay).
        let consumer_members = self
            .groups
            .get(&request.group_id)
            .and_then(|g| g.consumer.as_deref())
            .is_some_and(|cg| !cg.is_empty());
        if consumer_members {
            // A classic member of a consumer group (Kafka's online migration).
            let result = self.classic_join_consumer(&request, now);
            let _ = sender.send(result);
            return Ok(());
        }
        if let Some(cg) = self
            .groups
            .get(&request.group_id)
            .and_then(|g| g.consumer.as_deref())
        {
            let tombstones = Coordinator::consumer_tombstones(&request.group_id, cg);
            if let Some(group) = self.groups.get_mut(&request.group_id) {
                group.consumer = None;
            }
            self.write(partition, tombstones, None);
        }
        let max_size = self.settings.max_size;
        let Some(group) = self.groups.get_mut(&request.group_id) else {
            return fail(codes::COORDINATOR_NOT_AVAILABLE, sender);
        };
        if group.state == GroupState::Dead {
            return fail(codes::COORDINATOR_NOT_AVAILABLE, sender);
        }
        // The protocol type and protocols must be compatible with the group's.
        let compatible = if request.protocol_type.is_empty() || request.protocols.is_empty() {
            false
        } else if group.members.is_empty() {
            true
        } else {
            let common = common_protocols(group.members.values());
            group.protocol_type.as_deref() == Some(request.protocol_type.as_str())
                && request.protocols.names().any(|name| common.contains(name))
        };
        if !compatible {
            return fail(codes::INCONSISTENT_GROUP_PROTOCOL, sender);
        }

        if request.member_id.is_empty() {
            if let Some(instance) = request.group_instance_id.clone() {
                if let Some(old_id) = group.static_members.get(&instance).cloned() {
                    self.replace_static_member(request, old_id, sender, now, now_ms);
                    return Ok(());
                }
            }
            if group.members.len() + group.pending.len() >= max_size {
                return fail(codes::GROUP_MAX_SIZE_REACHED, sender);
            }
            let prefix = request
                .group_instance_id
                .as_deref()
                .unwrap_or(&request.client_id);
            let member_id = super::new_member_id(prefix);
            if request.group_instance_id.is_none() && request.version >= 4 {
                // KIP-394: the member must come back with this id.
                let session = millis(request.session_timeout_ms);
                group.pending.insert(member_id.clone(), now + session);
                let group_id = group.id.clone();
                self.timer(
                    now + session,
                    Timer::Pending {
                        group: group_id,
                        member: member_id.clone(),
                    },
                );
                let _ = sender.send(JoinResult::error(codes::MEMBER_ID_REQUIRED, &member_id));
                return Ok(());
            }
            self.add_member(request, member_id, sender, now, now_ms);
            return Ok(());
        }

        if group.pending.remove(&request.member_id).is_some() {
            let member_id = request.member_id.clone();
            self.add_member(request, member_id, sender, now, now_ms);
            return Ok(());
        }
        if let Err(code) =
            group.check_member(&request.member_id, request.group_instance_id.as_deref())
        {
            return fail(code, sender);
        }
        let is_leader = group.leader.as_deref() == Some(request.member_id.as_str());
        let group_id = group.id.clone();
        let state = group.state;
        let Some(member) = group.members.get_mut(&request.member_id) else {
            return fail(codes::UNKNOWN_MEMBER_ID, sender);
        };
        let unchanged = member.same_protocols(&request.protocol_type, &request.protocols);
        member.deadline = member.deadline.max(now + member.session_timeout);
        match state {
            GroupState::PreparingRebalance => {
                update_member(member, &request, sender);
                self.try_complete_join(&group_id, now, now_ms);
            }
            GroupState::CompletingRebalance | GroupState::Stable
                if unchanged && !(state == GroupState::Stable && is_leader) =>
            {
                // A repeated join (a lost response): answer with the current generation.
                let result = current_join_result(group, &request.member_id, false);
                let _ = sender.send(result);
            }
            GroupState::CompletingRebalance | GroupState::Stable => {
                update_member(member, &request, sender);
                self.prepare_rebalance(&group_id, now, now_ms);
            }
            GroupState::Empty | GroupState::Dead => return fail(codes::UNKNOWN_MEMBER_ID, sender),
        }
        Ok(())
    }

    fn add_member(
        &mut self,
        request: JoinRequest,
        member_id: String,
        sender: oneshot::Sender<JoinResult>,
        now: Instant,
        now_ms: i64,
    ) {
        self.join_seq += 1;
        let seq = self.join_seq;
        let Some(group) = self.groups.get_mut(&request.group_id) else {
            return;
        };
        let session_timeout = millis(request.session_timeout_ms);
        if group.members.is_empty() {
            group.protocol_type = Some(request.protocol_type.clone());
        }
        if let Some(instance) = &request.group_instance_id {
            group
                .static_members
                .insert(instance.clone(), member_id.clone());
        }
        group.members.insert(
            member_id.clone(),
            Member {
                id: member_id.clone(),
                instance_id: request.group_instance_id.clone(),
                client_id: request.client_id.clone(),
                client_host: request.client_host.clone(),
                session_timeout,
                rebalance_timeout: millis(request.rebalance_timeout_ms),
                protocol_type: request.protocol_type.clone(),
                protocols: request.protocols.clone(),
                assignment: Bytes::new(),
                joined_seq: seq,
                deadline: now + session_timeout,
                join_waiter: Some(sender),
                sync_waiter: None,
            },
        );
        let group_id = group.id.clone();
        let state = group.state;
        // A joiner during the initial delay extends it, within the rebalance timeout.
        if let (Some(not_before), Some(deadline)) =
            (group.join_not_before, group.rebalance_deadline)
        {
            if now < not_before {
                let extended = (now + self.settings.initial_rebalance_delay).min(deadline);
                group.join_not_before = Some(extended);
                self.timer(
                    extended,
                    Timer::Join {
                        group: group_id.clone(),
                    },
                );
            }
        }
        self.timer(
            now + session_timeout,
            Timer::Session {
                group: group_id.clone(),
                member: member_id,
            },
        );
        if state == GroupState::PreparingRebalance {
            self.try_complete_join(&group_id, now, now_ms);
        } else {
            self.prepare_rebalance(&group_id, now, now_ms);
        }
    }

    /// A static member rejoined with an empty member id: it gets a new id, the old one is
    /// fenced, and a stable group keeps its assignment without a rebalance when nothing changed.
    fn replace_static_member(
        &mut self,
        request: JoinRequest,
        old_id: String,
        sender: oneshot::Sender<JoinResult>,
        now: Instant,
        now_ms: i64,
    ) {
        let Some(group) = self.groups.get_mut(&request.group_id) else {
            return;
        };
        let Some(mut member) = group.members.remove(&old_id) else {
            return;
        };
        if let Some(waiter) = member.join_waiter.take() {
            let _ = waiter.send(JoinResult::error(codes::FENCED_INSTANCE_ID, &old_id));
        }
        if let Some(waiter) = member.sync_waiter.take() {
            let _ = waiter.send(SyncResult::error(codes::FENCED_INSTANCE_ID));
        }
        let prefix = request.group_instance_id.as_deref().unwrap_or_default();
        let new_id = super::new_member_id(prefix);
        let unchanged = member.same_protocols(&request.protocol_type, &request.protocols);
        member.id = new_id.clone();
        member.session_timeout = millis(request.session_timeout_ms);
        member.rebalance_timeout = millis(request.rebalance_timeout_ms);
        member.client_id = request.client_id.clone();
        member.client_host = request.client_host.clone();
        member.deadline = now + member.session_timeout;
        let session = member.session_timeout;
        if let Some(instance) = &request.group_instance_id {
            group
                .static_members
                .insert(instance.clone(), new_id.clone());
        }
        let previous_leader = group.leader.clone().unwrap_or_default();
        let was_leader = previous_leader == old_id;
        if was_leader {
            group.leader = Some(new_id.clone());
        }
        let group_id = group.id.clone();
        self.timer(
            now + session,
            Timer::Session {
                group: group_id.clone(),
                member: new_id.clone(),
            },
        );
        let Some(group) = self.groups.get_mut(&group_id) else {
            return;
        };
        match group.state {
            // Kafka's `updateStaticMemberThenRebalanceOrCompleteJoin`: a static member back
            // with the same protocols changes nothing in a Stable group, its leader included.
            GroupState::Stable if unchanged => {
                group.members.insert(new_id.clone(), member);
                let result = if request.version >= 9 {
                    // KIP-814: a returning leader is told not to assign again.
                    current_join_result(group, &new_id, was_leader)
                } else {
                    // An older client told it leads would assign again: it is told the leader
                    // it replaced (a member id gone now), so it follows and its SyncGroup gets
                    // the assignment the group keeps.
                    JoinResult {
                        leader: previous_leader,
                        members: Vec::new(),
                        ..current_join_result(group, &new_id, false)
                    }
                };
                let _ = sender.send(result);
                self.write_group(&group_id);
            }
            GroupState::PreparingRebalance => {
                update_member(&mut member, &request, sender);
                group.members.insert(new_id, member);
                self.try_complete_join(&group_id, now, now_ms);
            }
            _ => {
                update_member(&mut member, &request, sender);
                group.members.insert(new_id, member);
                self.prepare_rebalance(&group_id, now, now_ms);
            }
        }
    }

    /// Starts a rebalance: parked syncs are told REBALANCE_IN_PROGRESS, and the join phase
    /// ends when every member has rejoined or at the rebalance timeout (after the initial
    /// delay when the group was empty).
    fn prepare_rebalance(&mut self, group_id: &str, now: Instant, now_ms: i64) {
        let initial_delay = self.settings.initial_rebalance_delay;
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        if group.state == GroupState::CompletingRebalance {
            for member in group.members.values_mut() {
                member.assignment = Bytes::new();
                if let Some(waiter) = member.sync_waiter.take() {
                    let _ = waiter.send(SyncResult::error(codes::REBALANCE_IN_PROGRESS));
                }
            }
        }
        group.pending_sync = None;
        let was_empty = group.state == GroupState::Empty;
        let deadline = now + group.max_rebalance_timeout();
        group.rebalance_deadline = Some(deadline);
        group.join_not_before = was_empty.then(|| (now + initial_delay).min(deadline));
        group.transition(GroupState::PreparingRebalance, now_ms);
        let wake = group.join_not_before.unwrap_or(deadline);
        tracing::debug!(
            group = group_id,
            generation = group.generation,
            "preparing rebalance"
        );
        self.timer(
            wake,
            Timer::Join {
                group: group_id.to_owned(),
            },
        );
        self.try_complete_join(group_id, now, now_ms);
    }

    fn try_complete_join(&mut self, group_id: &str, now: Instant, now_ms: i64) {
        let Some(group) = self.groups.get(group_id) else {
            return;
        };
        if group.state != GroupState::PreparingRebalance {
            return;
        }
        if group.join_not_before.is_some_and(|t| now < t) {
            return;
        }
        let expired = group.rebalance_deadline.is_none_or(|d| now >= d);
        if group.all_joined() || expired || group.join_not_before.is_some() {
            self.complete_join(group_id, now, now_ms);
        }
    }

    fn complete_join(&mut self, group_id: &str, now: Instant, now_ms: i64) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        // Only dynamic members that did not rejoin are dropped (Kafka's
        // `completeClassicGroupJoin`): a static member stays with its old metadata, so it can
        // come back under its instance id without another rebalance; its session decides.
        group
            .members
            .retain(|_, m| m.join_waiter.is_some() || m.instance_id.is_some());
        // The leader must be a member that rejoined: it assigns from the metadata just sent.
        let leader = match group.leader.as_ref().and_then(|l| group.members.get(l)) {
            Some(leader) if leader.join_waiter.is_some() => Some(leader.id.clone()),
            _ => group
                .members
                .values()
                .filter(|m| m.join_waiter.is_some())
                .min_by_key(|m| m.joined_seq)
                .map(|m| m.id.clone()),
        };
        if leader.is_none() && !group.members.is_empty() {
            // Only static members that have not rejoined are left: as Kafka, the group is not
            // emptied but waits another rebalance timeout, until they rejoin or their sessions
            // remove them (a removal or a join tries to complete again).
            let deadline = now + group.max_rebalance_timeout();
            group.rebalance_deadline = Some(deadline);
            group.join_not_before = None;
            tracing::warn!(
                group = group_id,
                generation = group.generation,
                "rebalance: no member rejoined, the join phase waits again"
            );
            // A zero timeout needs no timer: any join or removal finds the deadline passed.
            if deadline > now {
                self.timer(
                    deadline,
                    Timer::Join {
                        group: group_id.to_owned(),
                    },
                );
            }
            return;
        }
        group.rebalance_deadline = None;
        group.join_not_before = None;
        group.generation += 1;
        if group.members.is_empty() {
            group.protocol_name = None;
            group.leader = None;
            group.transition(GroupState::Empty, now_ms);
            tracing::info!(
                group = group_id,
                generation = group.generation,
                "group is empty"
            );
            self.write_group(group_id);
            return;
        }
        group.protocol_name = select_protocol(group.members.values());
        group.leader = leader;
        group.transition(GroupState::CompletingRebalance, now_ms);
        let protocol = group.protocol_name.clone().unwrap_or_default();
        let leader = group.leader.clone().unwrap_or_default();
        let all: Vec<JoinedMember> = group
            .members
            .values()
            .map(|m| JoinedMember {
                member_id: m.id.clone(),
                group_instance_id: m.instance_id.clone(),
                metadata: m.metadata(&protocol),
            })
            .collect();
        let generation = group.generation;
        let protocol_type = group.protocol_type.clone();
        // Kafka's `schedulePendingSync`: every member must send SyncGroup within the group's
        // rebalance timeout, or is removed.
        let sync_deadline = now + group.max_rebalance_timeout();
        group.pending_sync = Some(PendingSync {
            members: group.members.keys().cloned().collect(),
            deadline: sync_deadline,
        });
        let mut sessions = Vec::new();
        for member in group.members.values_mut() {
            // Every session starts again, a static member's that did not rejoin too (Kafka
            // reschedules each member's heartbeat here).
            member.deadline = now + member.session_timeout;
            sessions.push((member.deadline, member.id.clone()));
            if let Some(waiter) = member.join_waiter.take() {
                let _ = waiter.send(JoinResult {
                    error: codes::NONE,
                    generation,
                    protocol_type: protocol_type.clone(),
                    protocol_name: Some(protocol.clone()),
                    leader: leader.clone(),
                    member_id: member.id.clone(),
                    members: if member.id == leader {
                        all.clone()
                    } else {
                        Vec::new()
                    },
                    skip_assignment: false,
                });
            }
        }
        tracing::info!(
            group = group_id,
            generation,
            members = all.len(),
            protocol = %protocol,
            "rebalance: join phase complete"
        );
        for (at, member) in sessions {
            self.timer(
                at,
                Timer::Session {
                    group: group_id.to_owned(),
                    member,
                },
            );
        }
        self.timer(
            sync_deadline,
            Timer::PendingSync {
                group: group_id.to_owned(),
                generation,
            },
        );
    }

    /// SyncGroup.
    pub fn sync(
        &mut self,
        request: SyncRequest,
        now: Instant,
        now_ms: i64,
    ) -> oneshot::Receiver<SyncResult> {
        let (sender, receiver) = oneshot::channel();
        self.try_sync(request, sender, now, now_ms);
        receiver
    }

    fn try_sync(
        &mut self,
        request: SyncRequest,
        sender: oneshot::Sender<SyncResult>,
        now: Instant,
        now_ms: i64,
    ) {
        let reply = |sender: oneshot::Sender<SyncResult>, code| {
            let _ = sender.send(SyncResult::error(code));
        };
        if let Err(code) = self.coordinator_for(&request.group_id) {
            return reply(sender, code);
        }
        if self
            .groups
            .get(&request.group_id)
            .is_some_and(|g| g.consumer.is_some())
        {
            let result = self.classic_sync_consumer(&request, now);
            let _ = sender.send(result);
            return;
        }
        let Some(group) = self.groups.get_mut(&request.group_id) else {
            return reply(sender, codes::UNKNOWN_MEMBER_ID);
        };
        if group.state == GroupState::Dead {
            return reply(sender, codes::COORDINATOR_NOT_AVAILABLE);
        }
        if let Err(code) =
            group.check_member(&request.member_id, request.group_instance_id.as_deref())
        {
            return reply(sender, code);
        }
        if request.generation != group.generation {
            return reply(sender, codes::ILLEGAL_GENERATION);
        }
        let type_mismatch = request
            .protocol_type
            .as_ref()
            .is_some_and(|t| group.protocol_type.as_ref() != Some(t));
        let name_mismatch = request
            .protocol_name
            .as_ref()
            .is_some_and(|n| group.protocol_name.as_ref() != Some(n));
        if type_mismatch || name_mismatch {
            return reply(sender, codes::INCONSISTENT_GROUP_PROTOCOL);
        }
        let protocol_type = group.protocol_type.clone();
        let protocol_name = group.protocol_name.clone();
        match group.state {
            GroupState::Empty | GroupState::Dead => reply(sender, codes::UNKNOWN_MEMBER_ID),
            GroupState::PreparingRebalance => reply(sender, codes::REBALANCE_IN_PROGRESS),
            GroupState::Stable => {
                group.synced(&request.member_id);
                let Some(member) = group.members.get_mut(&request.member_id) else {
                    return reply(sender, codes::UNKNOWN_MEMBER_ID);
                };
                member.deadline = member.deadline.max(now + member.session_timeout);
                let _ = sender.send(SyncResult {
                    error: codes::NONE,
                    protocol_type,
                    protocol_name,
                    assignment: member.assignment.clone(),
                });
            }
            GroupState::CompletingRebalance => {
                let is_leader = group.leader.as_deref() == Some(request.member_id.as_str());
                let Some(member) = group.members.get_mut(&request.member_id) else {
                    return reply(sender, codes::UNKNOWN_MEMBER_ID);
                };
                member.deadline = member.deadline.max(now + member.session_timeout);
                member.sync_waiter = Some(sender);
                group.synced(&request.member_id);
                if !is_leader {
                    return;
                }
                // Each member gets the last assignment naming it (Kafka reads them into a
                // map), one without any an empty one; ids of no member are ignored.
                for member in group.members.values_mut() {
                    member.assignment = Bytes::new();
                }
                for listed in request.assignments {
                    if let Some(member) = group.members.get_mut(listed.member_id.as_str()) {
                        member.assignment = listed.assignment;
                    }
                }
                group.transition(GroupState::Stable, now_ms);
                for member in group.members.values_mut() {
                    if let Some(waiter) = member.sync_waiter.take() {
                        let _ = waiter.send(SyncResult {
                            error: codes::NONE,
                            protocol_type: protocol_type.clone(),
                            protocol_name: protocol_name.clone(),
                            assignment: member.assignment.clone(),
                        });
                    }
                }
                tracing::info!(
                    group = %request.group_id,
                    generation = request.generation,
                    "group is stable"
                );
                self.write_group(&request.group_id);
            }
        }
    }

    /// Heartbeat: NONE, or what the member must do (rejoin, or start over).
    pub fn heartbeat(
        &mut self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> i16 {
        match self.coordinator_for(group_id) {
            // Kafka's `GroupCoordinatorService.heartbeat` answers a heartbeat to a loading
            // group NONE ("blindly"): the member keeps its session and learns the group's
            // state from its next heartbeat, instead of logging an error.
            Err(codes::COORDINATOR_LOAD_IN_PROGRESS) => return codes::NONE,
            Err(code) => return code,
            Ok(_) => {}
        }
        if self
            .groups
            .get(group_id)
            .is_some_and(|g| g.consumer.is_some())
        {
            return self.classic_heartbeat_consumer(
                group_id,
                member_id,
                instance_id,
                generation,
                now,
            );
        }
        let Some(group) = self.groups.get_mut(group_id) else {
            return codes::UNKNOWN_MEMBER_ID;
        };
        if group.state == GroupState::Dead {
            return codes::COORDINATOR_NOT_AVAILABLE;
        }
        if let Err(code) = group.check_member(member_id, instance_id) {
            return code;
        }
        if generation != group.generation {
            return codes::ILLEGAL_GENERATION;
        }
        let state = group.state;
        if let Some(member) = group.members.get_mut(member_id) {
            member.deadline = member.deadline.max(now + member.session_timeout);
        }
        match state {
            GroupState::Empty | GroupState::Dead => codes::UNKNOWN_MEMBER_ID,
            GroupState::PreparingRebalance => codes::REBALANCE_IN_PROGRESS,
            GroupState::CompletingRebalance | GroupState::Stable => codes::NONE,
        }
    }

    /// LeaveGroup: the top-level code and one code per member.
    pub fn leave(
        &mut self,
        group_id: &str,
        leaving: &[Leaving],
        now: Instant,
        now_ms: i64,
    ) -> (i16, Vec<i16>) {
        if let Err(code) = self.coordinator_for(group_id) {
            return (code, vec![code; leaving.len()]);
        }
        if !self.groups.contains_key(group_id) {
            return (codes::NONE, vec![codes::UNKNOWN_MEMBER_ID; leaving.len()]);
        }
        if self
            .groups
            .get(group_id)
            .is_some_and(|g| g.consumer.is_some())
        {
            return (codes::NONE, self.classic_leave_consumer(group_id, leaving));
        }
        let mut codes_out = Vec::with_capacity(leaving.len());
        for leaver in leaving {
            codes_out.push(self.leave_one(group_id, leaver, now, now_ms));
        }
        (codes::NONE, codes_out)
    }

    fn leave_one(&mut self, group_id: &str, leaver: &Leaving, now: Instant, now_ms: i64) -> i16 {
        let Some(group) = self.groups.get_mut(group_id) else {
            return codes::UNKNOWN_MEMBER_ID;
        };
        if group.state == GroupState::Dead {
            return codes::COORDINATOR_NOT_AVAILABLE;
        }
        let member_id = match &leaver.group_instance_id {
            Some(instance) => match group.static_members.get(instance) {
                // An instance leaving with an empty member id is the admin's removal (KIP-345).
                Some(owner) if leaver.member_id.is_empty() || *owner == leaver.member_id => {
                    owner.clone()
                }
                Some(_) => return codes::FENCED_INSTANCE_ID,
                None => return codes::UNKNOWN_MEMBER_ID,
            },
            None => leaver.member_id.clone(),
        };
        if group.pending.remove(&member_id).is_some() {
            self.try_complete_join(group_id, now, now_ms);
            return codes::NONE;
        }
        if !group.members.contains_key(&member_id) {
            return codes::UNKNOWN_MEMBER_ID;
        }
        self.remove_member(group_id, &member_id, now, now_ms);
        codes::NONE
    }

    fn remove_member(&mut self, group_id: &str, member_id: &str, now: Instant, now_ms: i64) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        if !group.remove(member_id) {
            return;
        }
        tracing::info!(group = group_id, member = member_id, "member removed");
        match group.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                self.prepare_rebalance(group_id, now, now_ms)
            }
            GroupState::PreparingRebalance => self.try_complete_join(group_id, now, now_ms),
            GroupState::Empty | GroupState::Dead => {}
        }
    }

    /// A timer the actor scheduled has fired.
    pub fn fire(&mut self, timer: Timer, now: Instant, now_ms: i64) {
        match timer {
            Timer::Session { group, member } => {
                let Some(g) = self.groups.get_mut(&group) else {
                    return;
                };
                let Some(m) = g.members.get_mut(&member) else {
                    return;
                };
                if now < m.deadline {
                    let at = m.deadline;
                    self.timer(at, Timer::Session { group, member });
                    return;
                }
                // A member parked in JoinGroup or SyncGroup is alive: its request holds it.
                if m.join_waiter.is_some() || m.sync_waiter.is_some() {
                    m.deadline = now + m.session_timeout;
                    let at = m.deadline;
                    self.timer(at, Timer::Session { group, member });
                    return;
                }
                tracing::info!(group = %group, member = %member, "member session expired");
                self.remove_member(&group, &member, now, now_ms);
            }
            Timer::Pending { group, member } => {
                let Some(g) = self.groups.get_mut(&group) else {
                    return;
                };
                if g.pending
                    .get(&member)
                    .is_some_and(|deadline| now >= *deadline)
                {
                    g.pending.remove(&member);
                    self.try_complete_join(&group, now, now_ms);
                }
            }
            Timer::Join { group } => self.try_complete_join(&group, now, now_ms),
            Timer::PendingSync { group, generation } => {
                self.expire_pending_sync(&group, generation, now, now_ms)
            }
            Timer::ConsumerSession { group, member } => {
                self.fire_consumer(&group, &member, None, now, now_ms)
            }
            Timer::ConsumerRevocation {
                group,
                member,
                epoch,
            } => self.fire_consumer(&group, &member, Some(epoch), now, now_ms),
        }
    }

    /// Kafka's `expirePendingSync`: the members of `generation` that have not sent SyncGroup
    /// one rebalance timeout after its join phase completed are removed, and the group
    /// rebalances (at the same generation until that join phase completes).
    fn expire_pending_sync(&mut self, group_id: &str, generation: i32, now: Instant, now_ms: i64) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        // A timer of an earlier generation does nothing; one left by a group deleted and
        // created again at the same generation acts only once the new deadline has passed.
        if group.generation != generation {
            return;
        }
        let Some(pending) = group.pending_sync.take_if(|p| now >= p.deadline) else {
            return;
        };
        // A static member replaced under its instance id since is no member any more: its old
        // id still counts as not synced, as in Kafka, so the group rebalances all the same.
        for member_id in &pending.members {
            group.remove(member_id);
        }
        tracing::info!(
            group = group_id,
            generation,
            members = pending.members.len(),
            "members removed: no SyncGroup within the rebalance timeout"
        );
        self.prepare_rebalance(group_id, now, now_ms);
    }

    /// Validates an OffsetCommit and, when it passes, stores the offsets and queues their
    /// records; the returned codes follow the request's partitions. `done` hears when the
    /// records are written (at once when there are none).
    pub fn commit(
        &mut self,
        request: CommitRequest,
        done: oneshot::Sender<i16>,
        now: Instant,
        now_ms: i64,
    ) -> Vec<i16> {
        let partition = match self.coordinator_for(&request.group_id) {
            Ok(p) => p,
            Err(code) => {
                let _ = done.send(codes::NONE);
                return vec![code; request.partitions.len()];
            }
        };
        // Kafka drops unknown partitions before the coordinator sees the commit: with none
        // left, the group is neither checked nor created.
        if request.partitions.iter().all(|p| p.error != codes::NONE) {
            let _ = done.send(codes::NONE);
            return request.partitions.iter().map(|p| p.error).collect();
        }
        let group_error = self.validate_commit(&request, partition, now, now_ms);
        let mut out = Vec::with_capacity(request.partitions.len());
        let mut writes = Vec::new();
        let max_metadata = self.settings.offset_metadata_max_bytes;
        self.offsets_write_seq += 1;
        let write = self.offsets_write_seq;
        let mut written = Vec::new();
        if let Some(group) = self.groups.get_mut(&request.group_id) {
            for p in &request.partitions {
                let code = if let Err(code) = group_error {
                    code
                } else if p.error != codes::NONE {
                    p.error
                } else if p.metadata.as_ref().is_some_and(|m| m.len() > max_metadata) {
                    codes::OFFSET_METADATA_TOO_LARGE
                } else {
                    let value = OffsetValue {
                        offset: p.offset,
                        leader_epoch: p.leader_epoch,
                        metadata: p.metadata.clone().unwrap_or_default(),
                        commit_timestamp: now_ms,
                        expire_timestamp: (request.retention_ms >= 0)
                            .then(|| now_ms.saturating_add(request.retention_ms)),
                    };
                    let key = OffsetKey {
                        group: request.group_id.clone(),
                        topic: p.topic.clone(),
                        partition: p.partition,
                    };
                    writes.push((
                        records::offset_key(&key),
                        Some(records::offset_value(&value)),
                    ));
                    let at = (p.topic.clone(), p.partition);
                    group
                        .uncommitted
                        .wrote(&at, write, value.clone(), group.offsets.get(&at));
                    group.offsets.insert(at.clone(), value);
                    written.push(at);
                    codes::NONE
                };
                out.push(code);
            }
        } else {
            let code = group_error
                .err()
                .unwrap_or(codes::COORDINATOR_NOT_AVAILABLE);
            out = vec![code; request.partitions.len()];
        }
        if written.is_empty() {
            self.write(partition, writes, Some(done));
        } else {
            self.offsets_writes
                .entry(partition)
                .or_default()
                .push_back((write, request.group_id.clone(), written));
            self.effects.push(Effect::Write(Write {
                partition,
                records: writes,
                done: Some(done),
                offsets_write: Some(write),
            }));
        }
        out
    }

    fn validate_commit(
        &mut self,
        request: &CommitRequest,
        partition: i32,
        now: Instant,
        now_ms: i64,
    ) -> Result<(), i16> {
        let Some(group) = self.groups.get(&request.group_id) else {
            if request.generation >= 0 {
                return Err(if request.version >= 9 {
                    codes::GROUP_ID_NOT_FOUND
                } else {
                    codes::ILLEGAL_GENERATION
                });
            }
            // A commit outside any group creates a "simple" group holding the offsets.
            self.groups.insert(
                request.group_id.clone(),
                Group::new(&request.group_id, partition, now_ms),
            );
            return Ok(());
        };
        if group.state == GroupState::Dead {
            return Err(codes::COORDINATOR_NOT_AVAILABLE);
        }
        if let Some(cg) = group.consumer.as_deref() {
            // KIP-848: an admin commit (no member, epoch < 0) only while the group is empty;
            // otherwise the member must exist, use v9+ and give its current epoch.
            if request.generation < 0 && cg.is_empty() && request.member_id.is_empty() {
                return Ok(());
            }
            cg.check_member_epoch(&request.member_id, request.generation)?;
            // A classic member of the group commits with any version, its epoch as generation.
            if request.version < 9 && !cg.uses_classic(&request.member_id) {
                return Err(codes::UNSUPPORTED_VERSION);
            }
            return Ok(());
        }
        if request.generation < 0 && group.state == GroupState::Empty {
            return Ok(());
        }
        if request.generation >= 0
            || !request.member_id.is_empty()
            || request.group_instance_id.is_some()
        {
            group.check_member(&request.member_id, request.group_instance_id.as_deref())?;
            if request.generation != group.generation {
                return Err(codes::ILLEGAL_GENERATION);
            }
            if group.state == GroupState::CompletingRebalance {
                return Err(codes::REBALANCE_IN_PROGRESS);
            }
            if let Some(member) = self
                .groups
                .get_mut(&request.group_id)
                .and_then(|g| g.members.get_mut(&request.member_id))
            {
                // A commit is a sign of life, as in Kafka.
                member.deadline = member.deadline.max(now + member.session_timeout);
            }
            return Ok(());
        }
        Err(codes::UNKNOWN_MEMBER_ID)
    }

    /// OffsetFetch: the group's error, and the committed offset of each asked partition
    /// (`None`: every committed partition).
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        member: Option<(&str, i32)>,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<Vec<(String, i32, Option<Committed>)>, i16> {
        self.coordinator_for(group_id)?;
        let group = self.groups.get(group_id);
        if group.is_some_and(|g| g.state == GroupState::Dead) {
            return Err(codes::GROUP_ID_NOT_FOUND);
        }
        // v9+ with a member id: a KIP-848 member must be known and at its current epoch.
        if let Some((member_id, epoch)) = member {
            match group.and_then(|g| g.consumer.as_deref()) {
                Some(cg) => cg.check_member_epoch(member_id, epoch)?,
                None if group.is_none() => return Err(codes::GROUP_ID_NOT_FOUND),
                None => {}
            }
        }
        let committed = |topic: &str, partition: i32| {
            let key = (topic.to_owned(), partition);
            group
                .and_then(|g| g.uncommitted.visible(&key).unwrap_or(g.offsets.get(&key)))
                .map(|v| Committed {
                    offset: v.offset,
                    leader_epoch: v.leader_epoch,
                    metadata: v.metadata.clone(),
                })
        };
        Ok(match partitions {
            Some(asked) => asked
                .iter()
                .map(|(t, p)| (t.clone(), *p, committed(t, *p)))
                .collect(),
            None => group
                .map(|g| {
                    g.offsets
                        .keys()
                        .filter_map(|(t, p)| Some((t.clone(), *p, Some(committed(t, *p)?))))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }

    /// ListGroups over the loaded partitions, filtered by state names (case-insensitive; empty:
    /// all).
    pub fn list(&self, states: &[String], types: &[String]) -> Vec<GroupListing> {
        let mut out: Vec<GroupListing> = self
            .groups
            .values()
            .filter(|g| g.state != GroupState::Dead)
            .map(|g| match g.consumer.as_deref() {
                Some(cg) => GroupListing {
                    group_id: g.id.clone(),
                    protocol_type: "consumer".to_owned(),
                    state: cg.state_name(),
                    group_type: CONSUMER_TYPE,
                },
                None => GroupListing {
                    group_id: g.id.clone(),
                    protocol_type: g.protocol_type.clone().unwrap_or_default(),
                    state: g.state.name(),
                    group_type: CLASSIC_TYPE,
                },
            })
            .filter(|g| states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(g.state)))
            .filter(|g| {
                types.is_empty() || types.iter().any(|t| t.eq_ignore_ascii_case(g.group_type))
            })
            .collect();
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// Whether the coordinator loads any partition (ListGroups answers COORDINATOR_LOAD_IN_PROGRESS
    /// while one is loading).
    pub fn is_loading(&self) -> bool {
        self.partitions
            .values()
            .any(|s| *s == PartitionStatus::Loading)
    }

    /// DescribeGroups of one group; an unknown group is described as Dead with `unknown_code`.
    pub fn describe(&self, group_id: &str, unknown_code: i16) -> GroupDescription {
        let dead = |error| GroupDescription {
            error,
            state: GroupState::Dead.name(),
            protocol_type: String::new(),
            protocol_data: String::new(),
            members: Vec::new(),
        };
        if let Err(code) = self.coordinator_for(group_id) {
            return dead(code);
        }
        let Some(group) = self.groups.get(group_id) else {
            return dead(unknown_code);
        };
        if group.consumer.is_some() {
            // DescribeGroups describes classic groups only; Kafka answers a consumer group as
            // one it does not know.
            return dead(unknown_code);
        }
        let stable = group.state == GroupState::Stable;
        let protocol = group.protocol_name.clone().unwrap_or_default();
        GroupDescription {
            error: codes::NONE,
            state: group.state.name(),
            protocol_type: group.protocol_type.clone().unwrap_or_default(),
            protocol_data: if stable {
                protocol.clone()
            } else {
                String::new()
            },
            members: group
                .members
                .values()
                .map(|m| MemberDescription {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(&protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
        }
    }

    /// DeleteGroups of one group: tombstones for its offsets and its record.
    pub fn delete_group(&mut self, group_id: &str) -> i16 {
        let partition = match self.coordinator_for(group_id) {
            Ok(p) => p,
            Err(code) => return code,
        };
        let Some(group) = self.groups.get(group_id) else {
            return codes::GROUP_ID_NOT_FOUND;
        };
        if group.state == GroupState::Dead {
            return codes::GROUP_ID_NOT_FOUND;
        }
        if !group.is_empty() {
            return codes::NON_EMPTY_GROUP;
        }
        let mut tombstones: Vec<KeyValue> = group
            .offsets
            .keys()
            .map(|(topic, p)| {
                let key = OffsetKey {
                    group: group_id.to_owned(),
                    topic: topic.clone(),
                    partition: *p,
                };
                (records::offset_key(&key), None)
            })
            .collect();
        match group.consumer.as_deref() {
            Some(cg) => tombstones.extend(Coordinator::consumer_tombstones(group_id, cg)),
            None => tombstones.push((records::group_key(group_id), None)),
        }
        self.groups.remove(group_id);
        self.write(partition, tombstones, None);
        tracing::info!(group = group_id, "group deleted");
        codes::NONE
    }

    /// OffsetDelete: the group's error, or one code per asked partition.
    pub fn delete_offsets(
        &mut self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<Vec<i16>, i16> {
        let partition = self.coordinator_for(group_id)?;
        let Some(group) = self.groups.get_mut(group_id) else {
            return Err(codes::GROUP_ID_NOT_FOUND);
        };
        if group.state == GroupState::Dead {
            return Err(codes::GROUP_ID_NOT_FOUND);
        }
        let subscribed = if let Some(cg) = group.consumer.as_deref() {
            partitions
                .iter()
                .filter(|(topic, _)| cg.subscribes_to(topic))
                .map(|(topic, _)| topic.clone())
                .collect()
        } else if group.state == GroupState::Empty {
            HashSet::new()
        } else if group.protocol_type.as_deref() != Some("consumer") {
            return Err(codes::NON_EMPTY_GROUP);
        } else {
            // Kafka's ClassicGroup.isSubscribedToTopic: a consumer group whose subscriptions
            // cannot be read is taken to subscribe to every topic.
            group
                .subscribed_topics()
                .unwrap_or_else(|| partitions.iter().map(|(topic, _)| topic.clone()).collect())
        };
        let mut out = Vec::with_capacity(partitions.len());
        let mut tombstones = Vec::new();
        for (topic, p) in partitions {
            if subscribed.contains(topic) {
                out.push(codes::GROUP_SUBSCRIBED_TO_TOPIC);
                continue;
            }
            tombstones.extend(group.remove_offset(topic.clone(), *p));
            out.push(codes::NONE);
        }
        self.write(partition, tombstones, None);
        Ok(out)
    }

    /// The offsets every loaded group committed for partitions of `topics`, deleted from the
    /// metadata, get tombstones (Kafka's `OffsetMetadataManager.onPartitionsDeleted`): a topic
    /// created again under the same name starts without its predecessor's offsets. Returns how
    /// many offsets were removed.
    pub fn delete_offsets_of_topics(&mut self, topics: &[String]) -> usize {
        let topics: HashSet<&str> = topics.iter().map(String::as_str).collect();
        let mut writes: HashMap<i32, Vec<KeyValue>> = HashMap::new();
        let mut removed = 0;
        for group in self.groups.values_mut() {
            if !self
                .partitions
                .get(&group.partition)
                .is_some_and(|s| *s == PartitionStatus::Loaded)
            {
                continue;
            }
            let deleted: Vec<(String, i32)> = group
                .offsets
                .keys()
                .filter(|(topic, _)| topics.contains(topic.as_str()))
                .cloned()
                .collect();
            for (topic, p) in deleted {
                removed += 1;
                writes
                    .entry(group.partition)
                    .or_default()
                    .extend(group.remove_offset(topic, p));
            }
        }
        for (partition, records) in writes {
            self.write(partition, records, None);
        }
        removed
    }

    /// Offset expiry (KIP-211): offsets of empty and simple groups older than the retention
    /// (counted from when the group became empty, or from the commit for a simple group), and
    /// offsets past an explicit expire time, get tombstones; an empty group left without offsets
    /// is deleted. Returns how many offsets expired.
    pub fn expire_offsets(&mut self, now_ms: i64) -> usize {
        let retention = self.settings.offsets_retention_ms;
        let mut writes: HashMap<i32, Vec<KeyValue>> = HashMap::new();
        let mut emptied = Vec::new();
        let mut expired_count = 0;
        for group in self.groups.values_mut() {
            if !self
                .partitions
                .get(&group.partition)
                .is_some_and(|s| *s == PartitionStatus::Loaded)
            {
                continue;
            }
            let consumer = group.consumer.as_deref();
            let empty = match consumer {
                Some(cg) => cg.is_empty(),
                None => group.state == GroupState::Empty,
            };
            let simple = group.protocol_type.is_none() && consumer.is_none();
            // Kafka's `ClassicGroup.offsetExpirationCondition`: a Stable classic consumer group
            // whose subscriptions are known lets the offsets of other topics expire.
            let classic_subscribed = (consumer.is_none() && group.state == GroupState::Stable)
                .then(|| group.subscribed_topics())
                .flatten();
            let expired: Vec<(String, i32)> = group
                .offsets
                .iter()
                .filter(|((topic, _), v)| match v.expire_timestamp {
                    Some(expire) => now_ms >= expire,
                    // A consumer group with members keeps the offsets of the topics it
                    // subscribes to; the others expire from their commit.
                    None if !empty && consumer.is_some_and(|cg| !cg.subscribes_to(topic)) => {
                        now_ms >= v.commit_timestamp.saturating_add(retention)
                    }
                    None if classic_subscribed
                        .as_ref()
                        .is_some_and(|topics| !topics.contains(topic)) =>
                    {
                        now_ms >= v.commit_timestamp.saturating_add(retention)
                    }
                    None if empty => {
                        let base = if simple {
                            v.commit_timestamp
                        } else {
                            group.state_timestamp_ms.max(v.commit_timestamp)
                        };
                        now_ms >= base.saturating_add(retention)
                    }
                    None => false,
                })
                .map(|(k, _)| k.clone())
                .collect();
            for (topic, p) in expired {
                expired_count += 1;
                writes
                    .entry(group.partition)
                    .or_default()
                    .extend(group.remove_offset(topic, p));
            }
            if empty && group.offsets.is_empty() && group.pending.is_empty() {
                emptied.push(group.id.clone());
                let tombstones = match group.consumer.as_deref() {
                    Some(cg) => Coordinator::consumer_tombstones(&group.id, cg),
                    None => vec![(records::group_key(&group.id), None)],
                };
                writes
                    .entry(group.partition)
                    .or_default()
                    .extend(tombstones);
            }
        }
        for id in emptied {
            self.groups.remove(&id);
        }
        for (partition, records) in writes {
            self.write(partition, records, None);
        }
        expired_count
    }
}

/// The group's protocol: each member votes for its most preferred protocol that every member
/// supports; the first member's order breaks ties.
fn select_protocol<'a>(members: impl Iterator<Item = &'a Member> + Clone) -> Option<String> {
    let common = common_protocols(members.clone());
    let mut votes: HashMap<&str, usize> = HashMap::new();
    for member in members.clone() {
        if let Some(name) = member.protocols.names().find(|n| common.contains(n)) {
            *votes.entry(name).or_default() += 1;
        }
    }
    let mut members = members;
    let candidates = members
        .next()
        .into_iter()
        .flat_map(|m| m.protocols.names())
        .filter(|name| common.contains(name));
    candidates
        .fold(None::<(&str, usize)>, |best, name| {
            let count = votes.get(name).copied().unwrap_or(0);
            match best {
                Some(b) if b.1 >= count => Some(b),
                _ => Some((name, count)),
            }
        })
        .map(|(name, _)| name.to_owned())
}

fn update_member(member: &mut Member, request: &JoinRequest, sender: oneshot::Sender<JoinResult>) {
    member.protocol_type = request.protocol_type.clone();
    member.protocols = request.protocols.clone();
    member.session_timeout = millis(request.session_timeout_ms);
    member.rebalance_timeout = millis(request.rebalance_timeout_ms);
    if let Some(old) = member.join_waiter.replace(sender) {
        // A second join while the first is parked: the first is superseded.
        let _ = old.send(JoinResult::error(codes::UNKNOWN_MEMBER_ID, &member.id));
    }
}

/// The JoinGroup answer of the current generation, for a member whose join changes nothing.
fn current_join_result(group: &Group, member_id: &str, skip_assignment: bool) -> JoinResult {
    let protocol = group.protocol_name.clone().unwrap_or_default();
    let is_leader = group.leader.as_deref() == Some(member_id);
    JoinResult {
        error: codes::NONE,
        generation: group.generation,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol_name.clone(),
        leader: group.leader.clone().unwrap_or_default(),
        member_id: member_id.to_owned(),
        members: if is_leader {
            group
                .members
                .values()
                .map(|m| JoinedMember {
                    member_id: m.id.clone(),
                    group_instance_id: m.instance_id.clone(),
                    metadata: m.metadata(&protocol),
                })
                .collect()
        } else {
            Vec::new()
        },
        skip_assignment,
    }
}
