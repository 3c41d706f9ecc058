//! Classic-protocol members of a consumer group, and the online migration between the two
//! protocols (Kafka 4.1's `GroupMetadataManager`: `classicGroupJoinToConsumerGroup`,
//! `classicGroupSyncToConsumerGroup`, `classicGroupHeartbeatToConsumerGroup`,
//! `classicGroupLeaveToConsumerGroup`, and the downgrade of `convertToClassicGroup`).
//!
//! A classic member of a consumer group is a [`ConsumerMember`] with `classic` set: its epoch
//! is the generation its JoinGroup answer names, its subscription and owned partitions come
//! from its `ConsumerProtocolSubscription`, and SyncGroup hands it its assigned partitions as
//! a `ConsumerProtocolAssignment`. It never gets a leader's assignment: the server-side
//! assignor decides, and Heartbeat answers REBALANCE_IN_PROGRESS when it must rejoin to give
//! partitions up or to get new ones.

use std::time::Instant;

use uuid::Uuid;

use super::super::super::{records, GroupSettings};
use super::super::{
    codes, millis, Coordinator, GroupState, JoinRequest, JoinResult, KeyValue, Leaving, Member,
    SyncRequest, SyncResult, Timer,
};
use super::{
    arm_session, assignor, bump_epoch, by_id, remove, Assignment, ClassicMember, ConsumerGroup,
    ConsumerMember, MemberState, RegexMatches, Step, TopicLookup, TopicNames,
};

/// The classic protocol type a consumer group's classic members must use.
const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

impl ConsumerGroup {
    /// Kafka's `supportsClassicProtocols`: the consumer protocol type, and a protocol every
    /// classic member supports (any protocol when there are none).
    fn supports_classic(&self, protocol_type: &str, request: &JoinRequest) -> bool {
        if protocol_type != CONSUMER_PROTOCOL_TYPE {
            return false;
        }
        let classic: Vec<&ClassicMember> = self
            .members
            .values()
            .filter_map(|m| m.classic.as_ref())
            .collect();
        request
            .protocols
            .names()
            .any(|name| classic.iter().all(|c| c.protocols.contains(name)))
    }

    /// Kafka's `validateConsumerGroupMember`: the member a classic request names, by its static
    /// instance when it has one.
    fn classic_member(&self, member_id: &str, instance_id: Option<&str>) -> Result<&str, i16> {
        let id = match instance_id {
            None => member_id,
            Some(instance) => match self.static_members.get(instance) {
                None => return Err(codes::UNKNOWN_MEMBER_ID),
                Some(owner) if owner != member_id => return Err(codes::FENCED_INSTANCE_ID),
                Some(owner) => owner.as_str(),
            },
        };
        match self.members.get(id) {
            // Kafka's `throwIfMemberDoesNotUseClassicProtocol`.
            Some(member) if member.classic.is_some() => Ok(member.id.as_str()),
            _ => Err(codes::UNKNOWN_MEMBER_ID),
        }
    }

    /// Kafka's `waitingOnUnreleasedPartition`: a partition of the member's target that it does
    /// not have yet is still held by another member.
    fn waiting_on_unreleased(&self, member: &ConsumerMember) -> bool {
        if member.state != MemberState::UnreleasedPartitions {
            return false;
        }
        let Some(target) = self.target.get(&member.id) else {
            return false;
        };
        target.iter().any(|(topic, partitions)| {
            partitions.iter().any(|p| {
                !member.assigned.get(topic).is_some_and(|a| a.contains(p))
                    && self.owners.contains_key(&(*topic, *p))
            })
        })
    }

    /// Whether `member_id` uses the classic protocol (its offsets commits give generation ids,
    /// checked as such).
    pub(in crate::groups::state) fn uses_classic(&self, member_id: &str) -> bool {
        self.members
            .get(member_id)
            .is_some_and(|m| m.classic.is_some())
    }

    /// Kafka's `validateOnlineDowngradeWithFencedMember` minus the policy and size checks:
    /// the member leaving is the last one using the consumer protocol, and others remain.
    fn only_classic_left_without(&self, leaving: &str) -> bool {
        self.members.len() > 1
            && self
                .members
                .get(leaving)
                .is_some_and(|m| m.classic.is_none())
            && self
                .members
                .values()
                .all(|m| m.id == leaving || m.classic.is_some())
    }
}

/// Whether removing `leaving` downgrades its group to a classic group (Kafka's
/// `validateOnlineDowngradeWithFencedMember`): it is the last member using the consumer
/// protocol, classic members remain, the policy allows it and they fit `group.max.size`.
pub(super) fn downgrades(
    settings: &GroupSettings,
    cg: &ConsumerGroup,
    group_id: &str,
    leaving: &str,
) -> bool {
    if !cg.only_classic_left_without(leaving) {
        return false;
    }
    if !settings.migration_policy.downgrade_enabled() {
        tracing::info!(
            group = group_id,
            "cannot downgrade consumer group to classic group: the online downgrade is disabled"
        );
        return false;
    }
    if cg.members.len() - 1 > settings.max_size {
        tracing::info!(
            group = group_id,
            "cannot downgrade consumer group to classic group: its size is greater than group.max.size"
        );
        return false;
    }
    true
}

/// The partitions of `assignment` by topic name (topics the image no longer has are left out).
fn by_name(assignment: &Assignment, topics: &dyn TopicLookup) -> Vec<(String, Vec<i32>)> {
    assignment
        .iter()
        .filter_map(|(id, partitions)| {
            Some((topics.name_of(id)?, partitions.iter().copied().collect()))
        })
        .collect()
}

/// The version a classic member's assignment is written in: its subscription's (Kafka's
/// `ConsumerProtocol.deserializeVersion` of the protocol's metadata), 0 when unreadable.
fn protocol_version(metadata: &[u8]) -> i16 {
    match metadata {
        [high, low, ..] => i16::from_be_bytes([*high, *low]),
        _ => 0,
    }
}

impl Coordinator {
    /// JoinGroup of a classic member to a non-empty consumer group (Kafka's
    /// `classicGroupJoinToConsumerGroup`): the member joins or rejoins as a consumer-group
    /// member, its subscription and owned partitions read from its protocol metadata, and is
    /// answered at once with its member epoch as the generation, no leader and no members.
    pub(in crate::groups::state) fn classic_join_consumer(
        &mut self,
        request: &JoinRequest,
        now: Instant,
    ) -> JoinResult {
        let fail = |code| JoinResult::error(code, &request.member_id);
        let group_id = request.group_id.clone();
        let max_size = self.settings.consumer_max_size;
        let default_assignor = self
            .settings
            .consumer_assignors
            .first()
            .cloned()
            .unwrap_or_else(|| assignor::ASSIGNORS[0].to_owned());
        let topics = self.topics.clone();
        let Some(group) = self.groups.get_mut(&group_id) else {
            return fail(codes::COORDINATOR_NOT_AVAILABLE);
        };
        let partition = group.partition;
        let Some(cg) = group.consumer.as_deref_mut() else {
            return fail(codes::COORDINATOR_NOT_AVAILABLE);
        };
        let unknown = request.member_id.is_empty();
        let member_id = if unknown {
            gregor_log::checkpoint::topic_id_string(&Uuid::new_v4())
        } else {
            request.member_id.clone()
        };
        // Kafka's `throwIfConsumerGroupIsFull`, then `throwIfClassicProtocolIsNotSupported`.
        if !cg.members.contains_key(&member_id) && cg.members.len() >= max_size {
            return fail(codes::GROUP_MAX_SIZE_REACHED);
        }
        if !cg.supports_classic(&request.protocol_type, request) {
            return fail(codes::INCONSISTENT_GROUP_PROTOCOL);
        }
        if unknown && request.group_instance_id.is_none() && request.version >= 4 {
            // KIP-394: the member comes back with this id, and joins with it then.
            return JoinResult::error(codes::MEMBER_ID_REQUIRED, &member_id);
        }
        let Some((protocol_name, metadata)) = request.protocols.iter().next() else {
            return fail(codes::INCONSISTENT_GROUP_PROTOCOL);
        };
        let protocol_name = protocol_name.to_owned();
        // Kafka answers a malformed subscription with an IllegalStateException.
        let Ok(subscription) = records::decode_subscription(&metadata) else {
            return fail(codes::UNKNOWN_SERVER_ERROR);
        };
        let mut writes: Vec<KeyValue> = Vec::new();
        let mut bump = false;
        let session_timeout = millis(request.session_timeout_ms);
        let blank = |id: &str| {
            ConsumerMember::joined(
                id,
                request.group_instance_id.clone(),
                request.rebalance_timeout_ms,
                session_timeout,
                now,
            )
        };
        let existing = match &request.group_instance_id {
            None => {
                let existing = cg.members.contains_key(&member_id);
                // Kafka takes any new id here; Gregor only the forms it hands out, which every
                // classic member's id has (a SyncGroup leader's assignment to another form is
                // dropped as it is read), so a client inventing one rejoins without it.
                if !existing && !crate::groups::could_be_member_id(&member_id) {
                    return fail(codes::UNKNOWN_MEMBER_ID);
                }
                if !existing {
                    cg.members.insert(member_id.clone(), blank(&member_id));
                    bump = true;
                }
                existing
            }
            Some(instance) if unknown => {
                match cg.static_members.get(instance).cloned() {
                    None => {
                        cg.members.insert(member_id.clone(), blank(&member_id));
                        bump = true;
                    }
                    Some(old_id) => {
                        // The instance's new member takes the old one's place: its
                        // subscription and partitions, at epoch 0 (Kafka's replaceMember).
                        cg.release(&old_id);
                        if let Some(old) = cg.members.remove(&old_id) {
                            cg.members.insert(
                                member_id.clone(),
                                ConsumerMember {
                                    id: member_id.clone(),
                                    epoch: 0,
                                    previous_epoch: 0,
                                    deadline: now + session_timeout,
                                    // The old id's timer is not this member's.
                                    session_timer: None,
                                    revocation_deadline: None,
                                    ..old
                                },
                            );
                        }
                        if let Some(target) = cg.target.remove(&old_id) {
                            writes.push((
                                records::target_member_key(&group_id, &member_id),
                                Some(records::target_member_value(&target)),
                            ));
                            cg.target.insert(member_id.clone(), target);
                        }
                        writes.push((records::current_assignment_key(&group_id, &old_id), None));
                        writes.push((records::target_member_key(&group_id, &old_id), None));
                        writes.push((records::consumer_member_key(&group_id, &old_id), None));
                        cg.claim(&member_id);
                        tracing::info!(group = %group_id, old = %old_id, new = %member_id, "static classic member replaced");
                    }
                }
                cg.static_members
                    .insert(instance.clone(), member_id.clone());
                false
            }
            Some(instance) => match cg.static_members.get(instance) {
                None => return fail(codes::UNKNOWN_MEMBER_ID),
                Some(owner) if *owner != member_id => return fail(codes::FENCED_INSTANCE_ID),
                Some(_) => true,
            },
        };
        let Some(member) = cg.members.get_mut(&member_id) else {
            return fail(codes::UNKNOWN_MEMBER_ID);
        };
        let joined = !existing;
        let before = member.metadata_value();
        let before_names = member.subscribed_names.clone();
        if let Some(instance) = &request.group_instance_id {
            member.instance_id = Some(instance.clone());
        }
        if let Some(rack) = subscription.rack_id {
            member.rack_id = Some(rack);
        }
        if request.rebalance_timeout_ms != -1 {
            member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        }
        member.subscribed_names = TopicNames::from_names(subscription.topics);
        member.client_id = request.client_id.clone();
        member.client_host = request.client_host.clone();
        member.classic = Some(ClassicMember {
            session_timeout_ms: request.session_timeout_ms,
            protocols: request.protocols.clone(),
        });
        let rearm = member.renew_session(session_timeout, now);
        bump |= member.subscribed_names != before_names;
        if member.metadata_value() != before || bump {
            writes.push((
                records::consumer_member_key(&group_id, &member_id),
                Some(records::consumer_member_value(&member.metadata_value())),
            ));
        }
        arm_session(&mut self.effects, &group_id, &member_id, rearm);
        let owned: Vec<(Uuid, Vec<i32>)> = by_id(&subscription.owned, topics.as_ref())
            .into_iter()
            .map(|(topic, partitions)| (topic, partitions.into_iter().collect()))
            .collect();
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
            topics.as_ref(),
            &mut RegexMatches::default(),
            Some(&owned),
            &mut writes,
            &mut self.effects,
        );
        let epoch = cg.members.get(&member_id).map_or(0, |m| m.epoch);
        tracing::info!(group = %group_id, member = %member_id, epoch, "classic member joined the consumer group");
        self.write(partition, writes, None);
        JoinResult {
            error: codes::NONE,
            generation: epoch,
            protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_owned()),
            protocol_name: Some(protocol_name),
            leader: String::new(),
            member_id,
            members: Vec::new(),
            skip_assignment: false,
        }
    }

    /// SyncGroup of a classic member of a consumer group (Kafka's
    /// `classicGroupSyncToConsumerGroup`): its assigned partitions, in the version of its
    /// subscription; REBALANCE_IN_PROGRESS when the group moved on and it must rejoin first.
    pub(in crate::groups::state) fn classic_sync_consumer(
        &mut self,
        request: &SyncRequest,
        now: Instant,
    ) -> SyncResult {
        let topics = self.topics.clone();
        let Some(cg) = self
            .groups
            .get_mut(&request.group_id)
            .and_then(|g| g.consumer.as_deref_mut())
        else {
            return SyncResult::error(codes::UNKNOWN_MEMBER_ID);
        };
        let member_id =
            match cg.classic_member(&request.member_id, request.group_instance_id.as_deref()) {
                Ok(id) => id.to_owned(),
                Err(code) => return SyncResult::error(code),
            };
        let group_epoch = cg.epoch;
        let Some(member) = cg.members.get_mut(&member_id) else {
            return SyncResult::error(codes::UNKNOWN_MEMBER_ID);
        };
        if request.generation != member.epoch {
            return SyncResult::error(codes::ILLEGAL_GENERATION);
        }
        let Some((protocol_name, metadata)) = member.classic.as_ref().and_then(|c| c.first())
        else {
            return SyncResult::error(codes::UNKNOWN_MEMBER_ID);
        };
        let type_mismatch = request
            .protocol_type
            .as_deref()
            .is_some_and(|t| t != CONSUMER_PROTOCOL_TYPE);
        let name_mismatch = request
            .protocol_name
            .as_deref()
            .is_some_and(|n| n != protocol_name);
        if type_mismatch || name_mismatch {
            return SyncResult::error(codes::INCONSISTENT_GROUP_PROTOCOL);
        }
        // Kafka's `throwIfRebalanceInProgress`: a member revoking partitions has rejoined
        // already and finishes that first.
        if group_epoch > member.epoch && member.state != MemberState::UnrevokedPartitions {
            return SyncResult::error(codes::REBALANCE_IN_PROGRESS);
        }
        let version = protocol_version(&metadata);
        member.deadline = now + member.session_timeout;
        SyncResult {
            error: codes::NONE,
            protocol_type: request.protocol_type.clone(),
            protocol_name: request.protocol_name.clone(),
            assignment: records::encode_assignment(
                version,
                &by_name(&member.assigned, topics.as_ref()),
            ),
        }
    }

    /// Heartbeat of a classic member of a consumer group (Kafka's
    /// `classicGroupHeartbeatToConsumerGroup`): REBALANCE_IN_PROGRESS when the group epoch
    /// moved past the member's, when it must revoke partitions, or when the partitions it
    /// waits for are free, so it rejoins and reconciles.
    pub(in crate::groups::state) fn classic_heartbeat_consumer(
        &mut self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now: Instant,
    ) -> i16 {
        let Some(cg) = self
            .groups
            .get_mut(group_id)
            .and_then(|g| g.consumer.as_deref_mut())
        else {
            return codes::UNKNOWN_MEMBER_ID;
        };
        let id = match cg.classic_member(member_id, instance_id) {
            Ok(id) => id.to_owned(),
            Err(code) => return code,
        };
        let group_epoch = cg.epoch;
        let Some(member) = cg.members.get(&id) else {
            return codes::UNKNOWN_MEMBER_ID;
        };
        if generation != member.epoch {
            return codes::ILLEGAL_GENERATION;
        }
        let rejoin = member.epoch < group_epoch
            || member.state == MemberState::UnrevokedPartitions
            || (member.state == MemberState::UnreleasedPartitions
                && !cg.waiting_on_unreleased(member));
        if let Some(member) = cg.members.get_mut(&id) {
            member.deadline = now + member.session_timeout;
        }
        if rejoin {
            codes::REBALANCE_IN_PROGRESS
        } else {
            codes::NONE
        }
    }

    /// LeaveGroup of classic members of a consumer group (Kafka's
    /// `classicGroupLeaveToConsumerGroup`): one code per member; the group epoch moves on once
    /// when any left.
    pub(in crate::groups::state) fn classic_leave_consumer(
        &mut self,
        group_id: &str,
        leaving: &[Leaving],
    ) -> Vec<i16> {
        let Some(group) = self.groups.get_mut(group_id) else {
            return vec![codes::UNKNOWN_MEMBER_ID; leaving.len()];
        };
        let partition = group.partition;
        let Some(cg) = group.consumer.as_deref_mut() else {
            return vec![codes::UNKNOWN_MEMBER_ID; leaving.len()];
        };
        let mut writes = Vec::new();
        let mut out = Vec::with_capacity(leaving.len());
        for leaver in leaving {
            let member_id = match &leaver.group_instance_id {
                None => Some(leaver.member_id.clone()),
                Some(instance) => match cg.static_members.get(instance) {
                    None => None,
                    // An empty member id is the admin's removal by instance (KIP-345).
                    Some(owner) if leaver.member_id.is_empty() || *owner == leaver.member_id => {
                        Some(owner.clone())
                    }
                    Some(_) => {
                        out.push(codes::FENCED_INSTANCE_ID);
                        continue;
                    }
                },
            };
            let Some(member_id) = member_id.filter(|id| cg.uses_classic(id)) else {
                out.push(codes::UNKNOWN_MEMBER_ID);
                continue;
            };
            remove(cg, group_id, &member_id, &mut writes);
            tracing::info!(group = group_id, member = %member_id, "classic member left the consumer group");
            out.push(codes::NONE);
        }
        if !writes.is_empty() {
            bump_epoch(cg, group_id, &mut writes);
        }
        self.write(partition, writes, None);
        out
    }

    /// Kafka's `convertToClassicGroup` with `ClassicGroup.fromConsumerGroup`: the consumer
    /// group's records get tombstones, its members but `leaving` become the members of a
    /// Stable classic group at the group epoch as generation, each with its target assignment
    /// as its assignment, the group record is written, and a rebalance starts.
    pub(super) fn downgrade(&mut self, group_id: &str, leaving: &str, now: Instant, now_ms: i64) {
        let topics = self.topics.clone();
        let Some(group) = self.groups.get_mut(group_id) else {
            return;
        };
        let Some(cg) = group.consumer.take() else {
            return;
        };
        let partition = group.partition;
        let tombstones = Coordinator::consumer_tombstones(group_id, &cg);
        let ConsumerGroup {
            epoch,
            members,
            target,
            ..
        } = *cg;
        for member in members.into_values().filter(|m| m.id != leaving) {
            let Some(classic) = member.classic else {
                continue;
            };
            self.join_seq += 1;
            let session_timeout = millis(classic.session_timeout_ms);
            if let Some(instance) = &member.instance_id {
                group
                    .static_members
                    .insert(instance.clone(), member.id.clone());
            }
            let assigned = target.get(&member.id).cloned().unwrap_or_default();
            group.members.insert(
                member.id.clone(),
                Member {
                    id: member.id.clone(),
                    instance_id: member.instance_id,
                    client_id: member.client_id,
                    client_host: member.client_host,
                    session_timeout,
                    rebalance_timeout: millis(member.rebalance_timeout_ms),
                    protocol_type: CONSUMER_PROTOCOL_TYPE.to_owned(),
                    protocols: classic.protocols,
                    // Written below, in the version of the chosen protocol's metadata.
                    assignment: records::encode_assignment(0, &by_name(&assigned, topics.as_ref())),
                    joined_seq: self.join_seq,
                    deadline: now + session_timeout,
                    join_waiter: None,
                    sync_waiter: None,
                },
            );
        }
        group.generation = epoch;
        group.protocol_type = Some(CONSUMER_PROTOCOL_TYPE.to_owned());
        group.protocol_name = super::super::select_protocol(group.members.values());
        group.leader = group
            .members
            .values()
            .min_by_key(|m| m.joined_seq)
            .map(|m| m.id.clone());
        let protocol = group.protocol_name.clone().unwrap_or_default();
        for member in group.members.values_mut() {
            let version = protocol_version(&member.metadata(&protocol));
            if let Ok(assigned) = records::decode_assignment(&member.assignment) {
                member.assignment = records::encode_assignment(version, &assigned);
            }
        }
        group.transition(GroupState::Stable, now_ms);
        let sessions: Vec<(Instant, String)> = group
            .members
            .values()
            .map(|m| (m.deadline, m.id.clone()))
            .collect();
        tracing::info!(
            group = group_id,
            generation = epoch,
            members = sessions.len(),
            "consumer group downgraded to a classic group"
        );
        self.write(partition, tombstones, None);
        self.write_group(group_id);
        for (at, member) in sessions {
            self.timer(
                at,
                Timer::Session {
                    group: group_id.to_owned(),
                    member,
                },
            );
        }
        self.prepare_rebalance(group_id, now, now_ms);
    }
}
