//! The KIP-848 consumer group protocol as pure state: ConsumerGroupHeartbeat and
//! ConsumerGroupDescribe, member and group epochs, the target assignment of the server-side
//! assignors and the reconciliation of each member towards it (Kafka's
//! `CurrentAssignmentBuilder` rules: a member first revokes what it no longer owns, keeping its
//! epoch; it gets a partition only once the previous owner has released it).
//!
//! A consumer group is a [`Group`] whose `consumer` is set: its offsets, partition and id live
//! there as for a classic group; members, epochs and assignments live in [`ConsumerGroup`].
//! Every change is written as Kafka's KIP-848 records so a reload restores the group.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::super::assignor::{self, Assignment, AssignorMember};
use bytes::Bytes;

use super::super::protocols::Protocols;
use super::super::records::{
    self, ClassicMemberValue, ConsumerGroupValue, ConsumerMemberValue, CoordinatorRecord,
    CurrentAssignmentValue,
};
use super::super::topic_names::TopicNames;
mod classic;

use super::{
    codes, millis, Coordinator, Effect, Group, GroupState, JoinResult, KeyValue, SyncResult, Timer,
};

/// Kafka's MemberState values (as stored in CurrentMemberAssignment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberState {
    Stable = 0,
    UnrevokedPartitions = 1,
    UnreleasedPartitions = 2,
}

impl MemberState {
    fn from_i8(value: i8) -> Self {
        match value {
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Stable,
        }
    }
}

/// Epoch −1: the member leaves. −2: a static member leaves for now, keeping its partitions
/// until its session expires.
pub(super) const LEAVE_EPOCH: i32 = -1;
pub(super) const STATIC_LEAVE_EPOCH: i32 = -2;

/// What the coordinator needs from the metadata image to resolve subscriptions.
pub trait TopicLookup {
    /// A topic's id and partition count.
    fn by_name(&self, name: &str) -> Option<(Uuid, i32)>;
    /// Every topic name a regex subscription may match (internal topics excluded).
    fn names(&self) -> Vec<String>;
    /// A topic's name by id (classic members of a consumer group get their partitions by
    /// name).
    fn name_of(&self, _id: &Uuid) -> Option<String> {
        None
    }
}

/// No topics: what the coordinator resolves against before it is told the image.
pub(super) struct NoTopics;

impl TopicLookup for NoTopics {
    fn by_name(&self, _name: &str) -> Option<(Uuid, i32)> {
        None
    }
    fn names(&self) -> Vec<String> {
        Vec::new()
    }
}

/// Whether a principal may DESCRIBE a topic.
type DescribeCheck = dyn Fn(&str) -> bool + Send + Sync;

/// Which topics a heartbeat's principal may DESCRIBE: the handler's authorizer check, or every
/// topic (the default) where nothing is checked.
#[derive(Clone, Default)]
pub struct DescribableTopics(Option<Arc<DescribeCheck>>);

impl DescribableTopics {
    /// Only the topics `check` allows.
    pub fn only(check: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        DescribableTopics(Some(Arc::new(check)))
    }

    fn allows(&self, topic: &str) -> bool {
        self.0.as_ref().is_none_or(|check| check(topic))
    }
}

impl std::fmt::Debug for DescribableTopics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Some(_) => "DescribableTopics(checked)",
            None => "DescribableTopics(all)",
        })
    }
}

/// A ConsumerGroupHeartbeat, validated for shape by [`validate`].
#[derive(Clone, Debug, Default)]
pub struct ConsumerHeartbeat {
    pub version: i16,
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<TopicNames>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    pub owned: Option<Vec<(Uuid, Vec<i32>)>>,
    pub client_id: String,
    pub client_host: String,
    /// The topics a regex subscription may resolve to (Kafka 4.1 filters a regex's matches by
    /// the heartbeat's DESCRIBE ACLs).
    pub describable: DescribableTopics,
}

/// The group's session timeout and heartbeat interval now (its dynamic configs within the
/// broker's bounds), and the largest batch its `__consumer_offsets` partition takes; read on
/// every heartbeat so a config change applies to the next one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConsumerConfigs {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    /// The partition's `max.message.bytes`: Kafka's coordinator refuses a write larger than
    /// it (UNKNOWN_SERVER_ERROR, nothing changed), and so does this one.
    pub max_write_bytes: usize,
}

/// The answer to a ConsumerGroupHeartbeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerHeartbeatResult {
    pub error: i16,
    pub message: Option<String>,
    pub member_id: Option<String>,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    pub assignment: Option<Assignment>,
}

impl ConsumerHeartbeatResult {
    fn error(error: i16, message: impl Into<String>) -> Self {
        ConsumerHeartbeatResult {
            error,
            message: Some(message.into()),
            member_id: None,
            member_epoch: 0,
            heartbeat_interval_ms: 0,
            assignment: None,
        }
    }
}

/// One member as ConsumerGroupDescribe reports it (topic ids; the handler adds names).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerMemberDescription {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub assignment: Assignment,
    pub target_assignment: Assignment,
    /// It uses the classic protocol (ConsumerGroupDescribe v1's MemberType 0, else 1).
    pub classic: bool,
}

/// One group as ConsumerGroupDescribe reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerGroupDescription {
    pub error: i16,
    pub message: Option<String>,
    pub state: &'static str,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    pub members: Vec<ConsumerMemberDescription>,
}

pub(super) struct ConsumerMember {
    id: String,
    instance_id: Option<String>,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    subscribed_names: TopicNames,
    regex: Option<String>,
    /// The topics its regex matched that its principal may DESCRIBE, as of its last heartbeat:
    /// another member's heartbeat resolves this member's regex within them, having no
    /// principal of this member's to check new matches with.
    regex_topics: BTreeSet<Uuid>,
    rebalance_timeout_ms: i32,
    server_assignor: Option<String>,
    epoch: i32,
    previous_epoch: i32,
    state: MemberState,
    assigned: Assignment,
    pending_revocation: Assignment,
    session_timeout: Duration,
    deadline: Instant,
    /// When the session timer the member relies on fires (`None`: none armed yet). One timer
    /// serves many heartbeats: firing before the deadline it re-arms there.
    session_timer: Option<Instant>,
    /// Set while the member must revoke partitions: past it, the member is fenced.
    revocation_deadline: Option<Instant>,
    /// Set for a member that uses the classic protocol (JoinGroup, SyncGroup, Heartbeat).
    classic: Option<ClassicMember>,
}

/// What a classic-protocol member of a consumer group keeps of its JoinGroup (Kafka's
/// ClassicMemberMetadata): its session timeout and its protocols, in request order; the first
/// protocol's name is the one its JoinGroup and SyncGroup answers name.
#[derive(Clone)]
pub(super) struct ClassicMember {
    session_timeout_ms: i32,
    protocols: Protocols,
}

impl ClassicMember {
    fn value(&self) -> ClassicMemberValue {
        ClassicMemberValue {
            session_timeout_ms: self.session_timeout_ms,
            protocols: self
                .protocols
                .iter()
                .map(|(name, metadata)| (name.to_owned(), metadata))
                .collect(),
        }
    }

    fn from_value(value: &ClassicMemberValue) -> Self {
        ClassicMember {
            session_timeout_ms: value.session_timeout_ms,
            protocols: Protocols::from_pairs(
                value
                    .protocols
                    .iter()
                    .map(|(name, metadata)| (name.as_str(), &metadata[..])),
            ),
        }
    }

    /// The first protocol's name and metadata.
    fn first(&self) -> Option<(&str, Bytes)> {
        self.protocols.iter().next()
    }
}

/// Asks for `member`'s session timer at `at`, when it needs one.
fn arm_session(effects: &mut Vec<Effect>, group: &str, member: &str, at: Option<Instant>) {
    if let Some(at) = at {
        effects.push(Effect::Timer {
            at,
            timer: Timer::ConsumerSession {
                group: group.to_owned(),
                member: member.to_owned(),
            },
        });
    }
}

impl ConsumerMember {
    /// A member that has just joined: no subscription, assignment or epoch yet.
    pub(super) fn joined(
        id: &str,
        instance_id: Option<String>,
        rebalance_timeout_ms: i32,
        session_timeout: Duration,
        now: Instant,
    ) -> Self {
        ConsumerMember {
            id: id.to_owned(),
            instance_id,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            subscribed_names: TopicNames::default(),
            regex: None,
            regex_topics: BTreeSet::new(),
            rebalance_timeout_ms,
            server_assignor: None,
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            assigned: Assignment::new(),
            pending_revocation: Assignment::new(),
            session_timeout,
            deadline: now + session_timeout,
            session_timer: None,
            revocation_deadline: None,
            classic: None,
        }
    }

    /// A new session of `session_timeout` from `now`, as Kafka reschedules the session timer
    /// on every heartbeat with the group's timeout then: the instant a timer must be armed at
    /// when none is armed or the one armed fires after the new deadline (a shorter timeout);
    /// an armed one firing earlier re-arms itself at the deadline.
    fn renew_session(&mut self, session_timeout: Duration, now: Instant) -> Option<Instant> {
        self.session_timeout = session_timeout;
        self.deadline = now + session_timeout;
        if self
            .session_timer
            .is_some_and(|armed| armed <= self.deadline)
        {
            return None;
        }
        self.session_timer = Some(self.deadline);
        self.session_timer
    }

    fn metadata_value(&self) -> ConsumerMemberValue {
        ConsumerMemberValue {
            instance_id: self.instance_id.clone(),
            rack_id: self.rack_id.clone(),
            client_id: self.client_id.clone(),
            client_host: self.client_host.clone(),
            subscribed_topic_names: self.subscribed_names.clone(),
            subscribed_topic_regex: self.regex.clone(),
            rebalance_timeout_ms: self.rebalance_timeout_ms,
            server_assignor: self.server_assignor.clone(),
            classic: self.classic.as_ref().map(ClassicMember::value),
        }
    }

    fn assignment_value(&self) -> CurrentAssignmentValue {
        CurrentAssignmentValue {
            member_epoch: self.epoch,
            previous_member_epoch: self.previous_epoch,
            state: self.state as i8,
            assigned: self.assigned.clone(),
            pending_revocation: self.pending_revocation.clone(),
        }
    }

    fn set_epoch(&mut self, epoch: i32) {
        self.previous_epoch = self.epoch;
        self.epoch = epoch;
    }
}

/// The KIP-848 state of a consumer group.
#[derive(Default)]
pub(super) struct ConsumerGroup {
    epoch: i32,
    assignment_epoch: i32,
    metadata_hash: i64,
    members: BTreeMap<String, ConsumerMember>,
    target: BTreeMap<String, Assignment>,
    /// Which member holds each partition (assigned or pending revocation).
    owners: HashMap<(Uuid, i32), String>,
    /// `group.instance.id` → member id.
    static_members: HashMap<String, String>,
}

impl ConsumerGroup {
    pub(super) fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Kafka's consumer group states.
    pub(super) fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.epoch > self.assignment_epoch {
            "Assigning"
        } else if self
            .members
            .values()
            .any(|m| m.epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    /// Whether a member subscribes to `topic` by name (offsets of subscribed topics cannot be
    /// deleted, and do not expire).
    pub(super) fn subscribes_to(&self, topic: &str) -> bool {
        self.members
            .values()
            .any(|m| m.subscribed_names.contains(topic))
    }

    /// Validates an OffsetCommit or OffsetFetch member and epoch.
    pub(super) fn check_member_epoch(&self, member_id: &str, epoch: i32) -> Result<(), i16> {
        let Some(member) = self.members.get(member_id) else {
            return Err(codes::UNKNOWN_MEMBER_ID);
        };
        if epoch != member.epoch {
            // A classic member's epoch is its generation.
            return Err(if member.classic.is_some() {
                codes::ILLEGAL_GENERATION
            } else {
                codes::STALE_MEMBER_EPOCH
            });
        }
        Ok(())
    }

    fn release(&mut self, member_id: &str) {
        if let Some(member) = self.members.get(member_id) {
            for (topic, partitions) in member.assigned.iter().chain(&member.pending_revocation) {
                for p in partitions {
                    if self
                        .owners
                        .get(&(*topic, *p))
                        .is_some_and(|o| o == member_id)
                    {
                        self.owners.remove(&(*topic, *p));
                    }
                }
            }
        }
    }

    fn claim(&mut self, member_id: &str) {
        if let Some(member) = self.members.get(member_id) {
            for (topic, partitions) in member.assigned.iter().chain(&member.pending_revocation) {
                for p in partitions {
                    self.owners.insert((*topic, *p), member_id.to_owned());
                }
            }
        }
    }

    /// The assignor the group uses: the one most members ask for, else the broker's first.
    fn assignor(&self, default: &str) -> String {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some(name) = &member.server_assignor {
                *counts.entry(name).or_default() += 1;
            }
        }
        counts
            .into_iter()
            .max_by_key(|(name, count)| (*count, std::cmp::Reverse(*name)))
            .map_or_else(|| default.to_owned(), |(name, _)| name.to_owned())
    }
}

/// Compiles a subscription regex with Java's `matches()` semantics (the whole name).
fn compile(regex: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&format!("^(?:{regex})$"))
}

/// Topics a member subscribes to that exist, by name → (id, partitions).
/// Regex subscriptions resolved once per heartbeat: members sharing a regex share the work.
/// An upper bound of the batch that writes the member's metadata record alone when the
/// heartbeat subscribes it to `names`: the batch header (61 bytes), the record's fields, its
/// key (group and member ids) and value (each string with a five-byte length at most, each
/// name with its own).
fn member_write_bytes(request: &ConsumerHeartbeat, names: &TopicNames) -> usize {
    const BATCH_HEADER: usize = 61;
    const RECORD_FIELDS: usize = 32;
    let string = |value: Option<&str>| 5 + value.map_or(0, str::len);
    let key = 2 + string(Some(&request.group_id)) + string(Some(&request.member_id));
    let value = 2
        + string(request.instance_id.as_deref())
        + string(request.rack_id.as_deref())
        + string(Some(&request.client_id))
        + string(Some(&request.client_host))
        + 5
        + names
            .iter()
            .map(|name| crate::wire::uvarint_len(name.len() as u32 + 1) + name.len())
            .sum::<usize>()
        + string(request.subscribed_topic_regex.as_deref())
        + 4
        + string(request.server_assignor.as_deref())
        + 1;
    BATCH_HEADER + RECORD_FIELDS + key + value
}

#[derive(Default)]
struct RegexMatches {
    all_names: Option<Vec<String>>,
    matched: HashMap<String, Vec<String>>,
}

impl RegexMatches {
    /// The names of the topics `regex` matches (none for an invalid one).
    fn matches(&mut self, regex: &str, topics: &dyn TopicLookup) -> &[String] {
        if !self.matched.contains_key(regex) {
            let matched = match compile(regex) {
                Ok(compiled) => self
                    .all_names
                    .get_or_insert_with(|| topics.names())
                    .iter()
                    .filter(|name| compiled.is_match(name))
                    .cloned()
                    .collect(),
                Err(_) => Vec::new(),
            };
            self.matched.insert(regex.to_owned(), matched);
        }
        self.matched.get(regex).map_or(&[], Vec::as_slice)
    }
}

/// A member's subscription as topic name → (id, partitions): the named topics that exist and
/// the regex's matches among `regex_topics`.
fn resolve(
    names: &TopicNames,
    regex: Option<&str>,
    regex_topics: &BTreeSet<Uuid>,
    topics: &dyn TopicLookup,
    regexes: &mut RegexMatches,
) -> BTreeMap<String, (Uuid, i32)> {
    let mut out = BTreeMap::new();
    for name in names.iter() {
        if let Some(found) = topics.by_name(name) {
            out.insert(name.to_owned(), found);
        }
    }
    if let Some(regex) = regex {
        for name in regexes.matches(regex, topics) {
            if let Some(found) = topics
                .by_name(name)
                .filter(|(id, _)| regex_topics.contains(id))
            {
                out.insert(name.clone(), found);
            }
        }
    }
    out
}

/// A stable hash of the subscribed topics' metadata (FNV-1a over names, ids and counts): a
/// different value means a topic was created, deleted or grew, and the group must rebalance.
fn metadata_hash(topics: &BTreeMap<String, (Uuid, i32)>) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for b in bytes {
            hash ^= u64::from(*b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    for (name, (id, count)) in topics {
        feed(name.as_bytes());
        feed(id.as_bytes());
        feed(&count.to_be_bytes());
    }
    hash as i64
}

fn is_subset(owned: Option<&[(Uuid, Vec<i32>)]>, assigned: &Assignment) -> bool {
    let Some(owned) = owned else {
        return false;
    };
    owned.iter().all(|(topic, partitions)| {
        partitions
            .iter()
            .all(|p| assigned.get(topic).is_some_and(|set| set.contains(p)))
    })
}

/// Whether the member still reports owning any of `revoking` (not reporting counts as owning).
fn owns_any(owned: Option<&[(Uuid, Vec<i32>)]>, revoking: &Assignment) -> bool {
    let Some(owned) = owned else {
        return true;
    };
    owned.iter().any(|(topic, partitions)| {
        revoking
            .get(topic)
            .is_some_and(|set| partitions.iter().any(|p| set.contains(p)))
    })
}

/// The request checks Kafka makes before touching any state (INVALID_REQUEST with its
/// messages; an unknown assignor is UNSUPPORTED_ASSIGNOR).
pub fn validate(request: &ConsumerHeartbeat, assignors: &[String]) -> Result<(), (i16, String)> {
    let invalid = |message: &str| Err((codes::INVALID_REQUEST, message.to_owned()));
    if request.group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if request.instance_id.as_deref() == Some("") {
        return invalid("InstanceId can't be empty.");
    }
    if request.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    // Member and instance ids are stored in record keys with an int16 length.
    if request.member_id.len() > i16::MAX as usize
        || request
            .instance_id
            .as_ref()
            .is_some_and(|i| i.len() > i16::MAX as usize)
    {
        return invalid("MemberId and InstanceId must be shorter than 32768 bytes.");
    }
    if request.member_id.is_empty() && (request.version >= 1 || request.member_epoch != 0) {
        return invalid("MemberId can't be empty.");
    }
    match request.member_epoch {
        0 => {
            if request.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if request.owned.as_ref().is_none_or(|o| !o.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            // An empty list of names or an empty regex joins with no topics (KAFKA-18095).
            if request.subscribed_topic_names.is_none() && request.subscribed_topic_regex.is_none()
            {
                return invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                );
            }
        }
        STATIC_LEAVE_EPOCH if request.instance_id.is_none() => {
            return invalid("InstanceId can't be null.");
        }
        epoch if epoch < STATIC_LEAVE_EPOCH => {
            return invalid(&format!("MemberEpoch {epoch} is invalid."));
        }
        _ => {}
    }
    if let Some(regex) = request.subscribed_topic_regex.as_deref() {
        if !regex.is_empty() {
            if let Err(error) = compile(regex) {
                return Err((
                    codes::INVALID_REGULAR_EXPRESSION,
                    format!("SubscribedTopicRegex `{regex}` is not a valid regular expression: {error}."),
                ));
            }
        }
    }
    if let Some(assignor) = request.server_assignor.as_deref() {
        if !assignors.iter().any(|a| a == assignor) {
            return Err((
                codes::UNSUPPORTED_ASSIGNOR,
                format!(
                    "ServerAssignor {assignor} is not supported. Supported assignors: {}.",
                    assignors.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// Kafka's FENCED_INSTANCE_ID message for a static member whose instance another member took.
fn fenced_instance_message(member_id: &str, instance: &str, owner: &str) -> String {
    format!("Static member {member_id} with instance id {instance} was fenced by member {owner}.")
}

impl Coordinator {
    /// ConsumerGroupHeartbeat: joins, leaves, reconciles, and answers with the member's epoch
    /// and (when it changed, or on a full request) its assignment.
    pub fn consumer_heartbeat(
        &mut self,
        mut request: ConsumerHeartbeat,
        timeouts: ConsumerConfigs,
        topics: &dyn TopicLookup,
        now: Instant,
        now_ms: i64,
    ) -> ConsumerHeartbeatResult {
        if let Err((code, message)) = validate(&request, &self.settings.consumer_assignors) {
            return ConsumerHeartbeatResult::error(code, message);
        }
        if request.member_id.is_empty() {
            // v0 joins without an id: the coordinator names the member (v1 clients do).
            request.member_id = gregor_log::checkpoint::topic_id_string(&Uuid::new_v4());
        }
        let partition = match self.coordinator_for(&request.group_id) {
            Ok(p) => p,
            Err(code) => return ConsumerHeartbeatResult::error(code, super::error_name(code)),
        };
        // A subscription whose record the partition cannot take is refused before anything
        // changes, as Kafka's coordinator fails the write (RecordTooLargeException, answered
        // UNKNOWN_SERVER_ERROR) and reverts.
        if let Some(names) = &request.subscribed_topic_names {
            let bytes = member_write_bytes(&request, names);
            if bytes > timeouts.max_write_bytes {
                return ConsumerHeartbeatResult::error(
                    codes::UNKNOWN_SERVER_ERROR,
                    format!(
                        "The member's subscription to {} topic names needs a __consumer_offsets record of {bytes} bytes, more than the {} bytes (max.message.bytes) its partition takes. Subscribe to fewer names, or by a regular expression.",
                        names.len(),
                        timeouts.max_write_bytes
                    ),
                );
            }
        }
        let mut writes: Vec<KeyValue> = Vec::new();
        let group_id = request.group_id.clone();
        // The group: created by a join; an empty classic or simple group becomes a consumer
        // group (its offsets stay); a classic group with members is not a consumer group.
        match self.groups.get_mut(&group_id) {
            None if request.member_epoch != 0 => {
                return ConsumerHeartbeatResult::error(
                    codes::GROUP_ID_NOT_FOUND,
                    format!("Consumer group {group_id} not found."),
                );
            }
            None => {
                let mut group = Group::new(&group_id, partition, now_ms);
                group.consumer = Some(Box::default());
                self.groups.insert(group_id.clone(), group);
            }
            Some(group) if group.consumer.is_none() => {
                let empty = group.members.is_empty() && group.pending.is_empty();
                if request.member_epoch != 0 || group.state == GroupState::Dead {
                    return ConsumerHeartbeatResult::error(
                        codes::GROUP_ID_NOT_FOUND,
                        format!("Group {group_id} is not a consumer group."),
                    );
                }
                if !empty {
                    // Kafka's online upgrade: a KIP-848 member joining a live classic group
                    // of the consumer protocol turns it into a consumer group.
                    let policy = self.settings.migration_policy;
                    let max_size = self.settings.consumer_max_size;
                    if let Err(message) = upgrade(group, policy, max_size, topics, now, &mut writes)
                    {
                        return ConsumerHeartbeatResult::error(codes::GROUP_ID_NOT_FOUND, message);
                    }
                    for member in group.consumer.iter().flat_map(|cg| cg.members.values()) {
                        self.effects.push(Effect::Timer {
                            at: member.deadline,
                            timer: Timer::ConsumerSession {
                                group: group_id.clone(),
                                member: member.id.clone(),
                            },
                        });
                    }
                } else if group.protocol_type.is_some() {
                    writes.push((records::group_key(&group_id), None));
                }
                if empty {
                    group.protocol_type = None;
                    group.protocol_name = None;
                    group.leader = None;
                    group.generation = 0;
                    group.consumer = Some(Box::default());
                    tracing::info!(group = %group_id, "empty classic group converted to a consumer group");
                }
            }
            Some(_) => {}
        }
        let max_size = self.settings.consumer_max_size;
        let default_assignor = self
            .settings
            .consumer_assignors
            .first()
            .cloned()
            .unwrap_or_else(|| assignor::ASSIGNORS[0].to_owned());
        let session_timeout = millis(timeouts.session_timeout_ms);
        let Some(group) = self.groups.get_mut(&group_id) else {
            return ConsumerHeartbeatResult::error(
                codes::COORDINATOR_NOT_AVAILABLE,
                "group vanished",
            );
        };
        let Some(cg) = group.consumer.as_deref_mut() else {
            return ConsumerHeartbeatResult::error(
                codes::COORDINATOR_NOT_AVAILABLE,
                "group vanished",
            );
        };

        // Leaving.
        if request.member_epoch == LEAVE_EPOCH || request.member_epoch == STATIC_LEAVE_EPOCH {
            let member_id = match &request.instance_id {
                Some(instance) => match cg.static_members.get(instance) {
                    Some(owner) if *owner == request.member_id => owner.clone(),
                    Some(owner) => {
                        return ConsumerHeartbeatResult::error(
                            codes::FENCED_INSTANCE_ID,
                            fenced_instance_message(&request.member_id, instance, owner),
                        )
                    }
                    None => {
                        return ConsumerHeartbeatResult::error(
                            codes::UNKNOWN_MEMBER_ID,
                            format!("Instance id {instance} is unknown."),
                        )
                    }
                },
                None => request.member_id.clone(),
            };
            if !cg.members.contains_key(&member_id) {
                return ConsumerHeartbeatResult::error(
                    codes::UNKNOWN_MEMBER_ID,
                    format!("Member {member_id} is not a member of group {group_id}."),
                );
            }
            if request.member_epoch == STATIC_LEAVE_EPOCH {
                // The member keeps its partitions until its session ends or its instance
                // rejoins with a new member id.
                if let Some(member) = cg.members.get_mut(&member_id) {
                    member.set_epoch(STATIC_LEAVE_EPOCH);
                    let rearm = member.renew_session(member.session_timeout, now);
                    writes.push((
                        records::current_assignment_key(&group_id, &member_id),
                        Some(records::current_assignment_value(
                            &member.assignment_value(),
                        )),
                    ));
                    arm_session(&mut self.effects, &group_id, &member_id, rearm);
                }
                tracing::info!(group = %group_id, member = %member_id, "static member left temporarily");
            } else if classic::downgrades(&self.settings, cg, &group_id, &member_id) {
                tracing::info!(group = %group_id, member = %member_id, "last consumer-protocol member left");
                self.write(partition, writes, None);
                self.downgrade(&group_id, &member_id, now, now_ms);
                return ConsumerHeartbeatResult {
                    error: codes::NONE,
                    message: None,
                    member_id: Some(member_id),
                    member_epoch: request.member_epoch,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                };
            } else {
                fence(cg, &group_id, &member_id, &mut writes);
                tracing::info!(group = %group_id, member = %member_id, "member left");
            }
            self.write(partition, writes, None);
            return ConsumerHeartbeatResult {
                error: codes::NONE,
                message: None,
                member_id: Some(member_id),
                member_epoch: request.member_epoch,
                heartbeat_interval_ms: 0,
                assignment: None,
            };
        }

        // The member: joining, replacing a static member, or known with a valid epoch.
        let mut bump = false;
        let existing = cg.members.contains_key(&request.member_id);
        // Kafka's `throwIfConsumerGroupIsFull`: a static member that left for now still
        // counts, so even its replacement is refused.
        if !existing && cg.members.len() >= max_size {
            return ConsumerHeartbeatResult::error(
                codes::GROUP_MAX_SIZE_REACHED,
                format!(
                    "The consumer group has reached its maximum capacity of {max_size} members."
                ),
            );
        }
        // A static member's instance is checked before its member id: an instance taken over
        // by a replacement is fenced (fatal to the client), not an unknown member (rejoin).
        if request.member_epoch != 0 {
            if let Some(instance) = &request.instance_id {
                match cg.static_members.get(instance) {
                    None => {
                        return ConsumerHeartbeatResult::error(
                            codes::UNKNOWN_MEMBER_ID,
                            format!("Instance id {instance} is unknown."),
                        )
                    }
                    Some(owner) if *owner != request.member_id => {
                        return ConsumerHeartbeatResult::error(
                            codes::FENCED_INSTANCE_ID,
                            fenced_instance_message(&request.member_id, instance, owner),
                        )
                    }
                    Some(_) => {}
                }
            }
        }
        if request.member_epoch == 0 && !existing {
            let replaced = match &request.instance_id {
                Some(instance) => match cg.static_members.get(instance).cloned() {
                    Some(old) => {
                        let active = cg
                            .members
                            .get(&old)
                            .is_some_and(|m| m.epoch != STATIC_LEAVE_EPOCH);
                        if active {
                            return ConsumerHeartbeatResult::error(
                                codes::UNRELEASED_INSTANCE_ID,
                                format!("Static member {old} with instance id {instance} is not released yet."),
                            );
                        }
                        Some(old)
                    }
                    None => None,
                },
                None => None,
            };
            let mut member = ConsumerMember::joined(
                &request.member_id,
                request.instance_id.clone(),
                request.rebalance_timeout_ms,
                session_timeout,
                now,
            );
            if let Some(old_id) = replaced {
                // The new member takes the old one's place: its epoch and partitions.
                cg.release(&old_id);
                if let Some(old) = cg.members.remove(&old_id) {
                    // Its subscription too: an unchanged one needs no new group epoch.
                    member.subscribed_names = old.subscribed_names;
                    member.regex = old.regex;
                    member.rack_id = old.rack_id;
                    member.server_assignor = old.server_assignor;
                    member.epoch = old.previous_epoch.max(0);
                    member.previous_epoch = old.previous_epoch;
                    member.state = old.state;
                    member.assigned = old.assigned;
                    member.pending_revocation = old.pending_revocation;
                }
                if let Some(target) = cg.target.remove(&old_id) {
                    writes.push((
                        records::target_member_key(&group_id, &request.member_id),
                        Some(records::target_member_value(&target)),
                    ));
                    cg.target.insert(request.member_id.clone(), target);
                }
                writes.push((records::current_assignment_key(&group_id, &old_id), None));
                writes.push((records::target_member_key(&group_id, &old_id), None));
                writes.push((records::consumer_member_key(&group_id, &old_id), None));
                tracing::info!(group = %group_id, old = %old_id, new = %request.member_id, "static member replaced");
            } else {
                bump = true;
                tracing::info!(group = %group_id, member = %request.member_id, "member joined");
            }
            if let Some(instance) = &request.instance_id {
                cg.static_members
                    .insert(instance.clone(), request.member_id.clone());
            }
            cg.members.insert(request.member_id.clone(), member);
            cg.claim(&request.member_id);
        } else if !existing {
            return ConsumerHeartbeatResult::error(
                codes::UNKNOWN_MEMBER_ID,
                format!(
                    "Member {} is not a member of group {group_id}.",
                    request.member_id
                ),
            );
        } else {
            let Some(member) = cg.members.get(&request.member_id) else {
                return ConsumerHeartbeatResult::error(codes::UNKNOWN_MEMBER_ID, "unknown member");
            };
            if let Some((instance, owner)) = request.instance_id.as_ref().and_then(|instance| {
                cg.static_members
                    .get(instance)
                    .filter(|owner| **owner != request.member_id)
                    .map(|owner| (instance, owner))
            }) {
                return ConsumerHeartbeatResult::error(
                    codes::FENCED_INSTANCE_ID,
                    fenced_instance_message(&request.member_id, instance, owner),
                );
            }
            if request.member_epoch != 0 {
                let received = request.member_epoch;
                let fenced = received > member.epoch
                    || (received < member.epoch
                        && (received != member.previous_epoch
                            || !is_subset(request.owned.as_deref(), &member.assigned)));
                if fenced {
                    return ConsumerHeartbeatResult::error(
                        codes::FENCED_MEMBER_EPOCH,
                        format!("The consumer group member has a {} member epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
                            if received > member.epoch { "greater" } else { "smaller" }, member.epoch),
                    );
                }
            }
        }

        // Update the member's metadata; a subscription change bumps the group epoch.
        let Some(member) = cg.members.get_mut(&request.member_id) else {
            return ConsumerHeartbeatResult::error(codes::UNKNOWN_MEMBER_ID, "unknown member");
        };
        let before = member.metadata_value();
        let before_subscription = (member.subscribed_names.clone(), member.regex.clone());
        if let Some(rack) = &request.rack_id {
            member.rack_id = Some(rack.clone());
        }
        if request.rebalance_timeout_ms != -1 {
            member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        }
        if let Some(names) = &request.subscribed_topic_names {
            member.subscribed_names = names.clone();
        }
        if let Some(regex) = &request.subscribed_topic_regex {
            member.regex = Some(regex.clone()).filter(|r| !r.is_empty());
        }
        if let Some(assignor) = &request.server_assignor {
            member.server_assignor = Some(assignor.clone());
        }
        member.client_id = request.client_id.clone();
        member.client_host = request.client_host.clone();
        // A classic member heartbeating with the consumer protocol uses it from now on.
        member.classic = None;
        let rearm = member.renew_session(session_timeout, now);
        if (member.subscribed_names.clone(), member.regex.clone()) != before_subscription {
            bump = true;
        }
        // The regex's matches this heartbeat's principal may DESCRIBE now (Kafka's
        // `filterTopicDescribeAuthorizedTopics`); a change (a topic created, an ACL granted or
        // removed) is a new target, as another member may subscribe to the same topics.
        let mut regexes = RegexMatches::default();
        let regex_topics: BTreeSet<Uuid> = match member.regex.as_deref() {
            None => BTreeSet::new(),
            Some(regex) => regexes
                .matches(regex, topics)
                .iter()
                .filter(|name| request.describable.allows(name))
                .filter_map(|name| topics.by_name(name))
                .map(|(id, _)| id)
                .collect(),
        };
        if regex_topics != member.regex_topics {
            member.regex_topics = regex_topics;
            bump = true;
        }
        if member.metadata_value() != before || bump {
            writes.push((
                records::consumer_member_key(&group_id, &member.id),
                Some(records::consumer_member_value(&member.metadata_value())),
            ));
        }
        arm_session(&mut self.effects, &group_id, &request.member_id, rearm);

        let member_id = request.member_id.clone();
        let before_assigned = cg.members.get(&member_id).map(|m| m.assigned.clone());
        let joined = request.member_epoch == 0 && !existing;
        let step = Step {
            group_id: &group_id,
            member_id: &member_id,
            default_assignor: &default_assignor,
            now,
        };
        step.assign_and_reconcile(
            cg,
            bump,
            joined,
            topics,
            &mut regexes,
            request.owned.as_deref(),
            &mut writes,
            &mut self.effects,
        );
        let Some(member) = cg.members.get(&member_id) else {
            return ConsumerHeartbeatResult::error(codes::UNKNOWN_MEMBER_ID, "unknown member");
        };
        let full = request.member_epoch == 0
            || (request.rebalance_timeout_ms != -1
                && (request.subscribed_topic_names.is_some()
                    || request.subscribed_topic_regex.is_some())
                && request.owned.is_some());
        let changed = before_assigned.as_ref() != Some(&member.assigned);
        let result = ConsumerHeartbeatResult {
            error: codes::NONE,
            message: None,
            member_id: Some(member_id),
            member_epoch: member.epoch,
            heartbeat_interval_ms: timeouts.heartbeat_interval_ms,
            assignment: (full || changed).then(|| member.assigned.clone()),
        };
        self.write(partition, writes, None);
        result
    }

    /// A consumer member's session or revocation deadline: past it, the member is fenced.
    pub(super) fn fire_consumer(
        &mut self,
        group_id: &str,
        member_id: &str,
        revocation: Option<i32>,
        now: Instant,
        now_ms: i64,
    ) {
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let partition = group.partition;
        let Some(cg) = group.consumer.as_deref_mut() else {
            return;
        };
        let Some(member) = cg.members.get_mut(member_id) else {
            return;
        };
        match revocation {
            None if now < member.deadline => {
                // A timer left behind when a shorter session armed an earlier one.
                if member.session_timer.is_some_and(|armed| armed > now) {
                    return;
                }
                member.session_timer = Some(member.deadline);
                arm_session(&mut self.effects, group_id, member_id, member.session_timer);
                return;
            }
            None => tracing::info!(
                group = group_id,
                member = member_id,
                "consumer member session expired"
            ),
            Some(epoch) => {
                let overdue = member.epoch == epoch
                    && member.state == MemberState::UnrevokedPartitions
                    && member.revocation_deadline.is_some_and(|d| now >= d);
                if !overdue {
                    return;
                }
                tracing::info!(
                    group = group_id,
                    member = member_id,
                    "consumer member did not revoke its partitions within the rebalance timeout"
                );
            }
        }
        if classic::downgrades(&self.settings, cg, group_id, member_id) {
            self.downgrade(group_id, member_id, now, now_ms);
            return;
        }
        let mut writes = Vec::new();
        fence(cg, group_id, member_id, &mut writes);
        self.write(partition, writes, None);
    }

    /// ConsumerGroupDescribe of one group.
    pub fn consumer_describe(&self, group_id: &str) -> ConsumerGroupDescription {
        let fail = |error: i16, message: String| ConsumerGroupDescription {
            error,
            message: Some(message),
            state: "Dead",
            group_epoch: -1,
            assignment_epoch: -1,
            assignor: String::new(),
            members: Vec::new(),
        };
        if let Err(code) = self.coordinator_for(group_id) {
            return fail(code, super::error_name(code).to_owned());
        }
        let Some(group) = self.groups.get(group_id) else {
            return fail(
                codes::GROUP_ID_NOT_FOUND,
                format!("Group {group_id} not found."),
            );
        };
        let Some(cg) = group.consumer.as_deref() else {
            return fail(
                codes::GROUP_ID_NOT_FOUND,
                format!("Group {group_id} is not a consumer group."),
            );
        };
        let default = self
            .settings
            .consumer_assignors
            .first()
            .cloned()
            .unwrap_or_default();
        ConsumerGroupDescription {
            error: codes::NONE,
            message: None,
            state: cg.state_name(),
            group_epoch: cg.epoch,
            assignment_epoch: cg.assignment_epoch,
            assignor: cg.assignor(&default),
            members: cg
                .members
                .values()
                .map(|m| ConsumerMemberDescription {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed_names.iter().map(str::to_owned).collect(),
                    subscribed_topic_regex: m.regex.clone(),
                    assignment: m.assigned.clone(),
                    target_assignment: cg.target.get(&m.id).cloned().unwrap_or_default(),
                    classic: m.classic.is_some(),
                })
                .collect(),
        }
    }

    /// Tombstones for every KIP-848 record of a group being deleted.
    pub(super) fn consumer_tombstones(group_id: &str, cg: &ConsumerGroup) -> Vec<KeyValue> {
        let mut out = Vec::new();
        for member in cg.members.keys() {
            out.push((records::current_assignment_key(group_id, member), None));
            out.push((records::target_member_key(group_id, member), None));
            out.push((records::consumer_member_key(group_id, member), None));
        }
        out.push((records::target_epoch_key(group_id), None));
        out.push((records::consumer_group_key(group_id), None));
        out
    }
}

/// Kafka's `validateOnlineUpgrade` and `convertToConsumerGroup`: a live classic group of the
/// consumer protocol becomes a consumer group whose members are its members, still using the
/// classic protocol, at the group's generation as their epoch, with the partitions of their
/// last assignment (also their target) and the subscriptions of their JoinGroup metadata.
/// Parked joins and syncs are told REBALANCE_IN_PROGRESS (the joining member is a new group
/// epoch, so each must rejoin anyway); the classic record gets a tombstone and the consumer
/// group's records follow. The error is GROUP_ID_NOT_FOUND's message; nothing has changed then.
fn upgrade(
    group: &mut Group,
    policy: super::super::MigrationPolicy,
    max_size: usize,
    topics: &dyn TopicLookup,
    now: Instant,
    writes: &mut Vec<KeyValue>,
) -> Result<(), String> {
    let group_id = group.id.clone();
    let refused = |why: &str| {
        tracing::info!(group = %group_id, "cannot upgrade classic group to consumer group: {why}");
        Err(format!("Group {group_id} is not a consumer group."))
    };
    if !policy.upgrade_enabled() {
        return refused("the online upgrade is disabled");
    }
    if group.protocol_type.as_deref() != Some("consumer") {
        return refused("the group does not use the consumer embedded protocol");
    }
    if group.members.len() > max_size {
        return refused("the group size exceeds the consumer group maximum size");
    }
    let malformed = || {
        Err(format!(
            "Cannot upgrade the classic group {group_id} to consumer group because the embedded consumer protocol is malformed."
        ))
    };
    let Some(protocol) = group.protocol_name.clone() else {
        return malformed();
    };
    let generation = group.generation;
    let mut cg = ConsumerGroup {
        epoch: generation,
        assignment_epoch: generation,
        ..ConsumerGroup::default()
    };
    for member in group.members.values() {
        // A member between a join and its sync has no assignment yet, and Kafka reads that as
        // a malformed one: the group is not upgraded in the middle of a rebalance, when a
        // member's last partitions are unknown (it may still own some).
        let Ok(assigned) = records::decode_assignment(&member.assignment) else {
            return malformed();
        };
        let Ok(subscription) = records::decode_subscription(&member.metadata(&protocol)) else {
            return malformed();
        };
        let assigned = by_id(&assigned, topics);
        let session_timeout = member.session_timeout;
        let converted = ConsumerMember {
            id: member.id.clone(),
            instance_id: member.instance_id.clone(),
            rack_id: subscription.rack_id,
            client_id: member.client_id.clone(),
            client_host: member.client_host.clone(),
            subscribed_names: TopicNames::from_names(subscription.topics),
            regex: None,
            regex_topics: BTreeSet::new(),
            rebalance_timeout_ms: super::duration_ms(member.rebalance_timeout),
            server_assignor: None,
            epoch: generation,
            previous_epoch: generation,
            state: MemberState::Stable,
            assigned: assigned.clone(),
            pending_revocation: Assignment::new(),
            session_timeout,
            deadline: now + session_timeout,
            // Armed by the upgrade for every member.
            session_timer: Some(now + session_timeout),
            revocation_deadline: None,
            classic: Some(ClassicMember {
                session_timeout_ms: super::duration_ms(session_timeout),
                protocols: member.protocols.clone(),
            }),
        };
        if let Some(instance) = &member.instance_id {
            cg.static_members
                .insert(instance.clone(), member.id.clone());
        }
        cg.target.insert(member.id.clone(), assigned);
        cg.members.insert(member.id.clone(), converted);
        cg.claim(&member.id);
    }
    // The conversion stands: pending requests end, the classic state goes.
    for member in group.members.values_mut() {
        if let Some(waiter) = member.join_waiter.take() {
            let _ = waiter.send(JoinResult::error(codes::REBALANCE_IN_PROGRESS, &member.id));
        }
        if let Some(waiter) = member.sync_waiter.take() {
            let _ = waiter.send(SyncResult::error(codes::REBALANCE_IN_PROGRESS));
        }
    }
    writes.push((records::group_key(&group_id), None));
    for member in cg.members.values() {
        writes.push((
            records::consumer_member_key(&group_id, &member.id),
            Some(records::consumer_member_value(&member.metadata_value())),
        ));
    }
    writes.push((
        records::consumer_group_key(&group_id),
        Some(records::consumer_group_value(&ConsumerGroupValue {
            epoch: cg.epoch,
            metadata_hash: cg.metadata_hash,
        })),
    ));
    for (member_id, assignment) in &cg.target {
        writes.push((
            records::target_member_key(&group_id, member_id),
            Some(records::target_member_value(assignment)),
        ));
    }
    writes.push((
        records::target_epoch_key(&group_id),
        Some(records::target_epoch_value(cg.assignment_epoch)),
    ));
    for member in cg.members.values() {
        writes.push((
            records::current_assignment_key(&group_id, &member.id),
            Some(records::current_assignment_value(
                &member.assignment_value(),
            )),
        ));
    }
    group.members.clear();
    group.pending.clear();
    group.static_members.clear();
    group.protocol_type = None;
    group.protocol_name = None;
    group.leader = None;
    group.generation = 0;
    group.rebalance_deadline = None;
    group.join_not_before = None;
    group.pending_sync = None;
    group.state = GroupState::Empty;
    tracing::info!(group = %group_id, members = cg.members.len(), epoch = cg.epoch, "classic group upgraded to a consumer group");
    group.consumer = Some(Box::new(cg));
    Ok(())
}

/// Partitions by topic name as ids (topics the image does not have are dropped, as Kafka's
/// `toTopicPartitionMap` drops them).
fn by_id(partitions: &[(String, Vec<i32>)], topics: &dyn TopicLookup) -> Assignment {
    let mut out = Assignment::new();
    for (name, ps) in partitions {
        if let Some((id, _)) = topics.by_name(name) {
            out.entry(id).or_default().extend(ps.iter().copied());
        }
    }
    out.retain(|_, ps| !ps.is_empty());
    out
}

/// Who and when for [`Step::assign_and_reconcile`].
struct Step<'a> {
    group_id: &'a str,
    member_id: &'a str,
    default_assignor: &'a str,
    now: Instant,
}

impl Step<'_> {
    /// What a member's heartbeat (or a classic member's JoinGroup) does once its metadata is
    /// updated: the subscribed topics' metadata (a change is a new group epoch), a new target
    /// assignment for a new group epoch, and the member reconciled towards its target.
    #[allow(clippy::too_many_arguments)]
    fn assign_and_reconcile(
        &self,
        cg: &mut ConsumerGroup,
        mut bump: bool,
        joined: bool,
        topics: &dyn TopicLookup,
        regexes: &mut RegexMatches,
        owned: Option<&[(Uuid, Vec<i32>)]>,
        writes: &mut Vec<KeyValue>,
        effects: &mut Vec<Effect>,
    ) {
        let group_id = self.group_id;
        // The subscribed topics as the image has them now; a change is a new group epoch.
        let mut subscribed: BTreeMap<String, (Uuid, i32)> = BTreeMap::new();
        let mut per_member: BTreeMap<String, BTreeSet<Uuid>> = BTreeMap::new();
        for m in cg.members.values() {
            let resolved = resolve(
                &m.subscribed_names,
                m.regex.as_deref(),
                &m.regex_topics,
                topics,
                regexes,
            );
            per_member.insert(m.id.clone(), resolved.values().map(|(id, _)| *id).collect());
            subscribed.extend(resolved);
        }
        let hash = metadata_hash(&subscribed);
        if hash != cg.metadata_hash {
            bump = true;
        }
        if bump {
            cg.epoch += 1;
            cg.metadata_hash = hash;
            writes.push((
                records::consumer_group_key(group_id),
                Some(records::consumer_group_value(&ConsumerGroupValue {
                    epoch: cg.epoch,
                    metadata_hash: hash,
                })),
            ));
        }

        // A new target assignment for the new group epoch.
        if cg.epoch > cg.assignment_epoch {
            let name = cg.assignor(self.default_assignor);
            let topic_counts: BTreeMap<Uuid, i32> = subscribed.values().copied().collect();
            let assignor_members: Vec<AssignorMember<'_>> = cg
                .members
                .keys()
                .map(|id| AssignorMember {
                    id,
                    topics: per_member.get(id).cloned().unwrap_or_default(),
                    current: cg.target.get(id),
                })
                .collect();
            let target = assignor::assign(&name, &assignor_members, &topic_counts)
                .unwrap_or_else(|| assignor::uniform(&assignor_members, &topic_counts));
            for (member_id, assignment) in &target {
                if cg.target.get(member_id) != Some(assignment) {
                    writes.push((
                        records::target_member_key(group_id, member_id),
                        Some(records::target_member_value(assignment)),
                    ));
                }
            }
            cg.target = target;
            cg.assignment_epoch = cg.epoch;
            writes.push((
                records::target_epoch_key(group_id),
                Some(records::target_epoch_value(cg.assignment_epoch)),
            ));
            tracing::debug!(group = %group_id, epoch = cg.epoch, assignor = %name, "new target assignment");
        }

        // Reconcile the member towards its target.
        let member_id = self.member_id;
        let before_value = cg
            .members
            .get(member_id)
            .map(ConsumerMember::assignment_value);
        reconcile(cg, member_id, per_member.get(member_id), owned, self.now);
        let Some(member) = cg.members.get(member_id) else {
            return;
        };
        if Some(member.assignment_value()) != before_value || joined {
            writes.push((
                records::current_assignment_key(group_id, member_id),
                Some(records::current_assignment_value(
                    &member.assignment_value(),
                )),
            ));
        }
        let was_revoking = before_value
            .as_ref()
            .is_some_and(|v| v.state == MemberState::UnrevokedPartitions as i8);
        if let Some(at) = member.revocation_deadline.filter(|_| !was_revoking) {
            effects.push(Effect::Timer {
                at,
                timer: Timer::ConsumerRevocation {
                    group: group_id.to_owned(),
                    member: member_id.to_owned(),
                    epoch: member.epoch,
                },
            });
        }
    }
}

/// Removes a member: its partitions are free, the group epoch moves on so the others get a new
/// target, and its records get tombstones.
fn fence(cg: &mut ConsumerGroup, group_id: &str, member_id: &str, writes: &mut Vec<KeyValue>) {
    remove(cg, group_id, member_id, writes);
    bump_epoch(cg, group_id, writes);
}

/// Removes a member and writes its tombstones, leaving the group epoch as it is.
fn remove(cg: &mut ConsumerGroup, group_id: &str, member_id: &str, writes: &mut Vec<KeyValue>) {
    cg.release(member_id);
    let Some(member) = cg.members.remove(member_id) else {
        return;
    };
    if let Some(instance) = &member.instance_id {
        if cg
            .static_members
            .get(instance)
            .is_some_and(|m| m == member_id)
        {
            cg.static_members.remove(instance);
        }
    }
    cg.target.remove(member_id);
    writes.push((records::current_assignment_key(group_id, member_id), None));
    writes.push((records::target_member_key(group_id, member_id), None));
    writes.push((records::consumer_member_key(group_id, member_id), None));
}

/// A new group epoch, written.
fn bump_epoch(cg: &mut ConsumerGroup, group_id: &str, writes: &mut Vec<KeyValue>) {
    cg.epoch += 1;
    writes.push((
        records::consumer_group_key(group_id),
        Some(records::consumer_group_value(&ConsumerGroupValue {
            epoch: cg.epoch,
            metadata_hash: cg.metadata_hash,
        })),
    ));
}

/// Kafka's CurrentAssignmentBuilder: moves one member towards its target assignment.
fn reconcile(
    cg: &mut ConsumerGroup,
    member_id: &str,
    subscribed: Option<&BTreeSet<Uuid>>,
    owned: Option<&[(Uuid, Vec<i32>)]>,
    now: Instant,
) {
    let target_epoch = cg.assignment_epoch;
    let Some(member) = cg.members.get(member_id) else {
        return;
    };
    let next_epoch = match member.state {
        MemberState::Stable if member.epoch == target_epoch => return,
        MemberState::Stable | MemberState::UnreleasedPartitions => member.epoch,
        MemberState::UnrevokedPartitions => {
            if owns_any(owned, &member.pending_revocation) {
                return;
            }
            member.epoch
        }
    };
    let empty = Assignment::new();
    let target = cg.target.get(member_id).unwrap_or(&empty);
    let no_topics = BTreeSet::new();
    let subscribed = subscribed.unwrap_or(&no_topics);
    let mut assigned = Assignment::new();
    let mut revoking = Assignment::new();
    let mut to_assign = Assignment::new();
    let mut unreleased = false;
    let topics: BTreeSet<Uuid> = target
        .keys()
        .chain(member.assigned.keys())
        .copied()
        .collect();
    for topic in topics {
        let target_set = if subscribed.contains(&topic) {
            target.get(&topic).cloned().unwrap_or_default()
        } else {
            BTreeSet::new()
        };
        let current = member.assigned.get(&topic).cloned().unwrap_or_default();
        let keep: BTreeSet<i32> = current.intersection(&target_set).copied().collect();
        let revoke: BTreeSet<i32> = current.difference(&keep).copied().collect();
        let mut pending: BTreeSet<i32> = target_set.difference(&keep).copied().collect();
        let own_pending = member.pending_revocation.get(&topic);
        pending.retain(|p| {
            let held_by_other = cg.owners.get(&(topic, *p)).is_some_and(|o| o != member_id)
                && !own_pending.is_some_and(|s| s.contains(p));
            unreleased |= held_by_other;
            !held_by_other
        });
        if !keep.is_empty() {
            assigned.insert(topic, keep);
        }
        if !revoke.is_empty() {
            revoking.insert(topic, revoke);
        }
        if !pending.is_empty() {
            to_assign.insert(topic, pending);
        }
    }
    let rebalance_timeout = millis(member.rebalance_timeout_ms.max(0));
    cg.release(member_id);
    let Some(member) = cg.members.get_mut(member_id) else {
        return;
    };
    if !revoking.is_empty() && owns_any(owned, &revoking) {
        member.state = MemberState::UnrevokedPartitions;
        member.set_epoch(next_epoch);
        member.assigned = assigned;
        member.pending_revocation = revoking;
        member.revocation_deadline = Some(now + rebalance_timeout);
    } else {
        for (topic, partitions) in to_assign {
            assigned.entry(topic).or_default().extend(partitions);
        }
        member.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        member.set_epoch(target_epoch);
        member.assigned = assigned;
        member.pending_revocation = Assignment::new();
        member.revocation_deadline = None;
    }
    cg.claim(member_id);
}

/// KIP-848 records of one group read back at load, in log order.
#[derive(Default)]
pub(super) struct ConsumerLoad {
    group: Option<ConsumerGroupValue>,
    members: BTreeMap<String, ConsumerMemberValue>,
    target_epoch: Option<i32>,
    targets: BTreeMap<String, Assignment>,
    current: BTreeMap<String, CurrentAssignmentValue>,
}

impl ConsumerLoad {
    /// Replays one record; returns false for records that are not KIP-848 ones.
    pub(super) fn replay(
        loads: &mut HashMap<String, ConsumerLoad>,
        record: CoordinatorRecord,
    ) -> Option<CoordinatorRecord> {
        match record {
            CoordinatorRecord::ConsumerGroup(group, value) => match value {
                Some(v) => loads.entry(group).or_default().group = Some(v),
                // The group's last record: it is gone.
                None => {
                    loads.remove(&group);
                }
            },
            CoordinatorRecord::ConsumerMember(group, member, value) => {
                let load = loads.entry(group).or_default();
                match value {
                    Some(v) => {
                        load.members.insert(member, v);
                    }
                    None => {
                        load.members.remove(&member);
                    }
                }
            }
            CoordinatorRecord::TargetAssignmentEpoch(group, value) => {
                loads.entry(group).or_default().target_epoch = value;
            }
            CoordinatorRecord::TargetAssignment(group, member, value) => {
                let load = loads.entry(group).or_default();
                match value {
                    Some(v) => {
                        load.targets.insert(member, v);
                    }
                    None => {
                        load.targets.remove(&member);
                    }
                }
            }
            CoordinatorRecord::CurrentAssignment(group, member, value) => {
                let load = loads.entry(group).or_default();
                match value {
                    Some(v) => {
                        load.current.insert(member, v);
                    }
                    None => {
                        load.current.remove(&member);
                    }
                }
            }
            other => return Some(other),
        }
        None
    }

    /// The group rebuilt from its records, members with a fresh session of `session_timeout`
    /// (their next heartbeat sets the group's own); `None` when its metadata record is gone.
    pub(super) fn build(
        self,
        session_timeout: Duration,
        now: Instant,
    ) -> Option<(ConsumerGroup, Vec<(String, Instant)>)> {
        let meta = self.group?;
        let mut cg = ConsumerGroup {
            epoch: meta.epoch,
            assignment_epoch: self.target_epoch.unwrap_or(0),
            metadata_hash: meta.metadata_hash,
            ..ConsumerGroup::default()
        };
        let mut timers = Vec::new();
        for (id, value) in self.members {
            let current = self.current.get(&id);
            // A classic member's session is its own, from its JoinGroup.
            let classic = value.classic;
            let session_timeout = classic
                .as_ref()
                .map_or(session_timeout, |c| millis(c.session_timeout_ms));
            let member = ConsumerMember {
                id: id.clone(),
                instance_id: value.instance_id.clone(),
                rack_id: value.rack_id,
                client_id: value.client_id,
                client_host: value.client_host,
                subscribed_names: value.subscribed_topic_names,
                regex: value.subscribed_topic_regex,
                // Its target's topics, below.
                regex_topics: BTreeSet::new(),
                rebalance_timeout_ms: value.rebalance_timeout_ms,
                server_assignor: value.server_assignor,
                epoch: current.map_or(0, |c| c.member_epoch),
                previous_epoch: current.map_or(0, |c| c.previous_member_epoch),
                state: current.map_or(MemberState::Stable, |c| MemberState::from_i8(c.state)),
                assigned: current.map(|c| c.assigned.clone()).unwrap_or_default(),
                pending_revocation: current
                    .map(|c| c.pending_revocation.clone())
                    .unwrap_or_default(),
                session_timeout,
                deadline: now + session_timeout,
                // Armed by the caller, from `timers`.
                session_timer: Some(now + session_timeout),
                revocation_deadline: None,
                classic: classic.as_ref().map(ClassicMember::from_value),
            };
            if let Some(instance) = &value.instance_id {
                cg.static_members.insert(instance.clone(), id.clone());
            }
            timers.push((id.clone(), member.deadline));
            cg.members.insert(id.clone(), member);
            cg.claim(&id);
        }
        for (id, assignment) in self.targets {
            if let Some(member) = cg.members.get_mut(&id) {
                // Its principal is not in its records: until its next heartbeat its regex keeps
                // to the topics of its target, which that principal could describe.
                if member.regex.is_some() {
                    member.regex_topics.extend(assignment.keys().copied());
                }
                cg.target.insert(id, assignment);
            }
        }
        Some((cg, timers))
    }
}
