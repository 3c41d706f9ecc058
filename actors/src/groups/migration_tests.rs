//! Online migration between the classic and the consumer protocol, with exact epochs and
//! assignments: a live classic group upgraded by a KIP-848 member, classic members living in
//! a consumer group (JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit), the
//! downgrade when the last KIP-848 member leaves, and a reload of classic members.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes};
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::protocol::StrBytes;
use tokio::sync::oneshot;
use uuid::Uuid;

use super::assignor::Assignment;
use super::codes::*;
use super::protocols::Protocols;
use super::records::{self, CoordinatorRecord};
use super::state::*;
use super::{GroupSettings, MigrationPolicy};

const T: u128 = 7;

fn t() -> Uuid {
    Uuid::from_u128(T)
}

/// Topic "t" (id 7) with four partitions, standing for the metadata image.
struct Topics;

impl TopicLookup for Topics {
    fn by_name(&self, name: &str) -> Option<(Uuid, i32)> {
        (name == "t").then_some((t(), 4))
    }
    fn names(&self) -> Vec<String> {
        vec!["t".to_owned()]
    }
    fn name_of(&self, id: &Uuid) -> Option<String> {
        (*id == t()).then(|| "t".to_owned())
    }
}

const TIMEOUTS: ConsumerConfigs = ConsumerConfigs {
    session_timeout_ms: 45_000,
    heartbeat_interval_ms: 5000,
    max_write_bytes: crate::groups::DEFAULT_MAX_WRITE_BYTES,
};

fn loaded(now: Instant, policy: MigrationPolicy) -> Coordinator {
    let mut c = Coordinator::new(GroupSettings {
        offsets_topic_partitions: 1,
        migration_policy: policy,
        ..GroupSettings::default()
    });
    assert_eq!(c.lead(&HashSet::from([0])), vec![0]);
    c.loaded(0, Vec::new(), now, 0);
    c.set_topics(Arc::new(Topics));
    c
}

fn parts(ps: &[i32]) -> Assignment {
    if ps.is_empty() {
        return Assignment::new();
    }
    Assignment::from([(t(), ps.iter().copied().collect::<BTreeSet<i32>>())])
}

/// A `ConsumerProtocolSubscription` v1 to "t" owning `owned` of it.
fn subscription(owned: &[i32]) -> Bytes {
    let mut out = Vec::new();
    out.put_i16(1);
    out.put_i32(1);
    out.put_i16(1);
    out.put_slice(b"t");
    out.put_i32(-1);
    if owned.is_empty() {
        out.put_i32(0);
    } else {
        out.put_i32(1);
        out.put_i16(1);
        out.put_slice(b"t");
        out.put_i32(owned.len() as i32);
        for p in owned {
            out.put_i32(*p);
        }
    }
    Bytes::from(out)
}

/// The partitions of "t" a `ConsumerProtocolAssignment` gives.
fn assigned(bytes: &[u8]) -> Vec<i32> {
    let decoded = records::decode_assignment(bytes).unwrap();
    decoded.into_iter().flat_map(|(_, ps)| ps).collect()
}

fn join_request(member_id: &str, owned: &[i32]) -> JoinRequest {
    JoinRequest {
        version: 5,
        group_id: "g".into(),
        member_id: member_id.into(),
        group_instance_id: None,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 60_000,
        protocol_type: "consumer".into(),
        protocols: Protocols::from_pairs([("range", &subscription(owned)[..])]),
    }
}

fn sync_request(member_id: &str, generation: i32) -> SyncRequest {
    SyncRequest {
        group_id: "g".into(),
        generation,
        member_id: member_id.into(),
        group_instance_id: None,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: Vec::new(),
    }
}

fn answered<T>(mut receiver: oneshot::Receiver<T>) -> T {
    receiver.try_recv().expect("answered")
}

fn consumer_join(member: &str) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        version: 1,
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 60_000,
        subscribed_topic_names: Some(crate::groups::topic_names::TopicNames::from_names(["t"])),
        owned: Some(Vec::new()),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        ..ConsumerHeartbeat::default()
    }
}

fn consumer_beat(member: &str, epoch: i32, owns: &[i32]) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        version: 1,
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: Some(if owns.is_empty() {
            Vec::new()
        } else {
            vec![(t(), owns.to_vec())]
        }),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        ..ConsumerHeartbeat::default()
    }
}

/// Every record written so far, decoded, in order.
fn written(c: &mut Coordinator) -> Vec<CoordinatorRecord> {
    let mut log = Vec::new();
    for effect in c.take_effects() {
        if let Effect::Write(write) = effect {
            for (key, value) in write.records {
                log.push(records::decode(&key, value.as_deref()).unwrap());
            }
        }
    }
    log
}

/// The members of the described consumer group: id → (epoch, assigned, classic).
fn described(c: &Coordinator) -> BTreeMap<String, (i32, Vec<i32>, bool)> {
    let d = c.consumer_describe("g");
    assert_eq!(d.error, NONE);
    d.members
        .into_iter()
        .map(|m| {
            let ps = m
                .assignment
                .get(&t())
                .map_or_else(Vec::new, |s| s.iter().copied().collect());
            (m.member_id, (m.member_epoch, ps, m.classic))
        })
        .collect()
}

/// A classic group of the consumer protocol, Stable at generation 1: A (the leader) owns
/// partitions 0 and 1 of "t", B owns 2 and 3. Returns their member ids.
fn classic_group(c: &mut Coordinator, t0: Instant) -> (String, String) {
    // Their client ids order their member ids: A's sorts first.
    let first = |client: &str| JoinRequest {
        client_id: client.into(),
        ..join_request("", &[])
    };
    let a = answered(c.join(first("a"), t0, 0)).member_id;
    let mut join_a = c.join(join_request(&a, &[]), t0, 0);
    let b = answered(c.join(first("b"), t0, 0)).member_id;
    let mut join_b = c.join(join_request(&b, &[]), t0, 0);
    let later = t0 + Duration::from_millis(3000);
    c.fire(Timer::Join { group: "g".into() }, later, 3000);
    let (ja, jb) = (join_a.try_recv().unwrap(), join_b.try_recv().unwrap());
    assert_eq!(
        (ja.generation, jb.generation, ja.leader.as_str()),
        (1, 1, a.as_str())
    );
    let assignment = |member: &str, ps: &[i32]| {
        SyncGroupRequestAssignment::default()
            .with_member_id(StrBytes::from_string(member.to_owned()))
            .with_assignment(records::encode_assignment(
                1,
                &[("t".to_owned(), ps.to_vec())],
            ))
    };
    let mut leader = sync_request(&a, 1);
    leader.assignments = vec![assignment(&a, &[0, 1]), assignment(&b, &[2, 3])];
    assert_eq!(
        assigned(&answered(c.sync(leader, later, 3000)).assignment),
        [0, 1]
    );
    assert_eq!(
        assigned(&answered(c.sync(sync_request(&b, 1), later, 3000)).assignment),
        [2, 3]
    );
    written(c);
    (a, b)
}

#[test]
fn a_consumer_member_upgrades_a_live_classic_group() {
    let t0 = Instant::now();
    let mut c = loaded(t0, MigrationPolicy::Bidirectional);
    let (a, b) = classic_group(&mut c, t0);
    let t1 = t0 + Duration::from_secs(4);
    // C joins with the consumer protocol: the group becomes a consumer group at epoch 1 (the
    // generation), A and B keep their partitions, and C's join is group epoch 2.
    let joined = c.consumer_heartbeat(consumer_join("C"), TIMEOUTS, &Topics, t1, 4000);
    assert_eq!(joined.error, NONE, "{:?}", joined.message);
    assert_eq!(joined.member_epoch, 2);
    let log = written(&mut c);
    assert_eq!(log[0], CoordinatorRecord::Group("g".into(), None));
    // Converted: A's and B's metadata keep their JoinGroup protocols (tag 0).
    let CoordinatorRecord::ConsumerMember(_, member, Some(value)) = &log[1] else {
        panic!("{:?}", log[1]);
    };
    assert_eq!(member, &a);
    let classic = value.classic.as_ref().unwrap();
    assert_eq!(classic.session_timeout_ms, 10_000);
    assert_eq!(
        classic.protocols,
        vec![("range".to_owned(), subscription(&[]))]
    );
    assert!(log.contains(&CoordinatorRecord::TargetAssignmentEpoch(
        "g".into(),
        Some(1)
    )));
    assert!(log.contains(&CoordinatorRecord::TargetAssignmentEpoch(
        "g".into(),
        Some(2)
    )));
    let members = described(&c);
    assert_eq!(members[&a], (1, vec![0, 1], true));
    assert_eq!(members[&b], (1, vec![2, 3], true));
    assert_eq!(members["C"], (2, vec![], false));
    let d = c.consumer_describe("g");
    let targets: BTreeMap<String, Vec<i32>> = d
        .members
        .iter()
        .map(|m| {
            let ps = m
                .target_assignment
                .get(&t())
                .map_or_else(Vec::new, |s| s.iter().copied().collect());
            (m.member_id.clone(), ps)
        })
        .collect();
    // The uniform assignor keeps what it can: B gives up 3 to C.
    assert_eq!(targets[&a], vec![0, 1]);
    assert_eq!(targets[&b], vec![2]);
    assert_eq!(targets["C"], vec![3]);
    assert_eq!(c.list(&[], &[])[0].group_type, "consumer");
    // A heartbeats at generation 1: the group moved on, it must rejoin.
    assert_eq!(c.heartbeat("g", &a, None, 1, t1), REBALANCE_IN_PROGRESS);
    assert_eq!(c.heartbeat("g", &a, None, 2, t1), ILLEGAL_GENERATION);
    // A is at its target already: rejoining moves it to epoch 2, keeping 0 and 1.
    let ja = answered(c.join(join_request(&a, &[0, 1]), t1, 4000));
    assert_eq!((ja.error, ja.generation), (NONE, 2));
    assert_eq!(ja.leader, "");
    assert_eq!(ja.protocol_type.as_deref(), Some("consumer"));
    assert_eq!(ja.protocol_name.as_deref(), Some("range"));
    assert!(ja.members.is_empty());
    let sa = answered(c.sync(sync_request(&a, 2), t1, 4000));
    assert_eq!((sa.error, assigned(&sa.assignment)), (NONE, vec![0, 1]));
    assert_eq!(c.heartbeat("g", &a, None, 2, t1), NONE);
    // B rejoins still owning 2 and 3: it must revoke 3 first, at its epoch 1.
    let jb = answered(c.join(join_request(&b, &[2, 3]), t1, 4000));
    assert_eq!((jb.error, jb.generation), (NONE, 1));
    let sb = answered(c.sync(sync_request(&b, 1), t1, 4000));
    assert_eq!((sb.error, assigned(&sb.assignment)), (NONE, vec![2]));
    assert_eq!(c.heartbeat("g", &b, None, 1, t1), REBALANCE_IN_PROGRESS);
    // C waits for 3 meanwhile.
    let cb = c.consumer_heartbeat(consumer_beat("C", 2, &[]), TIMEOUTS, &Topics, t1, 4000);
    assert_eq!((cb.member_epoch, cb.assignment.clone()), (2, None));
    // B rejoins owning 2 only: epoch 2, and C gets 3.
    let jb = answered(c.join(join_request(&b, &[2]), t1, 4000));
    assert_eq!((jb.error, jb.generation), (NONE, 2));
    let sb = answered(c.sync(sync_request(&b, 2), t1, 4000));
    assert_eq!(assigned(&sb.assignment), vec![2]);
    assert_eq!(c.heartbeat("g", &b, None, 2, t1), NONE);
    let cb = c.consumer_heartbeat(consumer_beat("C", 2, &[]), TIMEOUTS, &Topics, t1, 4000);
    assert_eq!((cb.member_epoch, cb.assignment), (2, Some(parts(&[3]))));
    assert_eq!(c.consumer_describe("g").state, "Stable");
    // Classic members commit with their epoch as generation, in any version.
    let commit = |c: &mut Coordinator, member: &str, generation: i32| {
        let (done, _written) = oneshot::channel();
        c.commit(
            CommitRequest {
                version: 7,
                group_id: "g".into(),
                generation,
                member_id: member.into(),
                group_instance_id: None,
                retention_ms: -1,
                partitions: vec![CommitPartition {
                    topic: "t".into(),
                    partition: 0,
                    offset: 5,
                    leader_epoch: -1,
                    metadata: None,
                    error: NONE,
                }],
            },
            done,
            t1,
            4000,
        )
    };
    assert_eq!(commit(&mut c, &b, 2), vec![NONE]);
    assert_eq!(commit(&mut c, &b, 1), vec![ILLEGAL_GENERATION]);
    assert_eq!(commit(&mut c, "C", 2), vec![UNSUPPORTED_VERSION]);
}

#[test]
fn an_upgrade_follows_the_policy_and_the_protocol_type() {
    for policy in [MigrationPolicy::Disabled, MigrationPolicy::Downgrade] {
        let t0 = Instant::now();
        let mut c = loaded(t0, policy);
        classic_group(&mut c, t0);
        let refused = c.consumer_heartbeat(consumer_join("C"), TIMEOUTS, &Topics, t0, 0);
        assert_eq!(refused.error, GROUP_ID_NOT_FOUND);
        assert_eq!(
            refused.message.as_deref(),
            Some("Group g is not a consumer group.")
        );
        assert!(written(&mut c).is_empty());
        assert_eq!(c.list(&[], &[])[0].group_type, "classic");
    }
    // A heartbeat past joining never upgrades.
    let t0 = Instant::now();
    let mut c = loaded(t0, MigrationPolicy::Upgrade);
    classic_group(&mut c, t0);
    let refused = c.consumer_heartbeat(consumer_beat("C", 1, &[]), TIMEOUTS, &Topics, t0, 0);
    assert_eq!(refused.error, GROUP_ID_NOT_FOUND);
    // A new member between its join and its sync has no assignment, which Kafka reads as a
    // malformed one: no upgrade in the middle of its rebalance.
    let mut c = loaded(t0, MigrationPolicy::Upgrade);
    classic_group(&mut c, t0);
    let id = c
        .join(join_request("", &[]), t0, 0)
        .try_recv()
        .unwrap()
        .member_id;
    let mut parked = c.join(join_request(&id, &[]), t0, 0);
    assert!(parked.try_recv().is_err());
    let refused = c.consumer_heartbeat(consumer_join("C"), TIMEOUTS, &Topics, t0, 0);
    assert_eq!(
        (refused.error, refused.message.as_deref()),
        (
            GROUP_ID_NOT_FOUND,
            Some("Cannot upgrade the classic group g to consumer group because the embedded consumer protocol is malformed.")
        )
    );
    assert!(written(&mut c).is_empty());
    assert_eq!(c.list(&[], &[])[0].group_type, "classic");
    // A member with an assignment rejoining is parked, and told to rejoin when the group
    // converts.
    let mut c = loaded(t0, MigrationPolicy::Upgrade);
    let (a, _) = classic_group(&mut c, t0);
    let mut parked = c.join(join_request(&a, &[]), t0, 0);
    assert!(parked.try_recv().is_err());
    assert_eq!(
        c.consumer_heartbeat(consumer_join("C"), TIMEOUTS, &Topics, t0, 0)
            .error,
        NONE
    );
    assert_eq!(parked.try_recv().unwrap().error, REBALANCE_IN_PROGRESS);
}

#[test]
fn a_classic_member_joins_syncs_and_leaves_a_consumer_group() {
    let t0 = Instant::now();
    let mut c = loaded(t0, MigrationPolicy::Bidirectional);
    let a = c.consumer_heartbeat(consumer_join("A"), TIMEOUTS, &Topics, t0, 0);
    assert_eq!(
        (a.member_epoch, a.assignment),
        (1, Some(parts(&[0, 1, 2, 3])))
    );
    written(&mut c);
    // B joins with JoinGroup v5: first MEMBER_ID_REQUIRED, then group epoch 2.
    let required = answered(c.join(join_request("", &[]), t0, 0));
    assert_eq!(required.error, MEMBER_ID_REQUIRED);
    let b = required.member_id;
    assert_eq!(b.len(), 22, "a Kafka Uuid string");
    // Another protocol type, or no protocol in common with the classic members, is refused.
    let mut other = join_request(&b, &[]);
    other.protocol_type = "connect".into();
    assert_eq!(
        answered(c.join(other, t0, 0)).error,
        INCONSISTENT_GROUP_PROTOCOL
    );
    // An id of no form Gregor hands out is not taken (see `could_be_member_id`).
    assert_eq!(
        answered(c.join(join_request("invented", &[]), t0, 0)).error,
        UNKNOWN_MEMBER_ID
    );
    let jb = answered(c.join(join_request(&b, &[]), t0, 0));
    assert_eq!(
        (jb.error, jb.generation, jb.member_id.as_str()),
        (NONE, 2, b.as_str())
    );
    let mut roundrobin = join_request("", &[]);
    roundrobin.protocols = Protocols::from_pairs([("roundrobin", &subscription(&[])[..])]);
    assert_eq!(
        answered(c.join(roundrobin, t0, 0)).error,
        INCONSISTENT_GROUP_PROTOCOL
    );
    // B's target is 2 and 3, which A still holds: nothing yet, and no rejoin while it waits.
    let sb = answered(c.sync(sync_request(&b, 2), t0, 0));
    assert_eq!((sb.error, assigned(&sb.assignment)), (NONE, vec![]));
    let mut wrong = sync_request(&b, 2);
    wrong.protocol_name = Some("roundrobin".into());
    assert_eq!(
        answered(c.sync(wrong, t0, 0)).error,
        INCONSISTENT_GROUP_PROTOCOL
    );
    assert_eq!(
        answered(c.sync(sync_request(&b, 1), t0, 0)).error,
        ILLEGAL_GENERATION
    );
    assert_eq!(
        answered(c.sync(sync_request("x", 2), t0, 0)).error,
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(c.heartbeat("g", &b, None, 2, t0), NONE);
    // A consumer-protocol member is not a classic one.
    assert_eq!(c.heartbeat("g", "A", None, 1, t0), UNKNOWN_MEMBER_ID);
    // A revokes 2 and 3: B must rejoin to get them.
    let ra = c.consumer_heartbeat(
        consumer_beat("A", 1, &[0, 1, 2, 3]),
        TIMEOUTS,
        &Topics,
        t0,
        0,
    );
    assert_eq!((ra.member_epoch, ra.assignment), (1, Some(parts(&[0, 1]))));
    let ra = c.consumer_heartbeat(consumer_beat("A", 1, &[0, 1]), TIMEOUTS, &Topics, t0, 0);
    assert_eq!(ra.member_epoch, 2);
    assert_eq!(c.heartbeat("g", &b, None, 2, t0), REBALANCE_IN_PROGRESS);
    let jb = answered(c.join(join_request(&b, &[]), t0, 0));
    assert_eq!((jb.error, jb.generation), (NONE, 2));
    let sb = answered(c.sync(sync_request(&b, 2), t0, 0));
    assert_eq!(assigned(&sb.assignment), vec![2, 3]);
    assert_eq!(c.heartbeat("g", &b, None, 2, t0), NONE);
    let members = described(&c);
    assert_eq!(members[&b], (2, vec![2, 3], true));
    assert_eq!(c.consumer_describe("g").state, "Stable");
    written(&mut c);
    // B leaves with LeaveGroup: group epoch 3, A gets everything back.
    let leaving = [Leaving {
        member_id: b.clone(),
        group_instance_id: None,
    }];
    assert_eq!(c.leave("g", &leaving, t0, 0), (NONE, vec![NONE]));
    assert!(written(&mut c)
        .iter()
        .any(|r| matches!(r, CoordinatorRecord::ConsumerGroup(_, Some(v)) if v.epoch == 3)));
    assert_eq!(
        c.leave("g", &leaving, t0, 0),
        (NONE, vec![UNKNOWN_MEMBER_ID])
    );
    let ra = c.consumer_heartbeat(consumer_beat("A", 2, &[0, 1]), TIMEOUTS, &Topics, t0, 0);
    assert_eq!(
        (ra.member_epoch, ra.assignment),
        (3, Some(parts(&[0, 1, 2, 3])))
    );
}

#[test]
fn the_last_consumer_member_leaving_downgrades_the_group() {
    let t0 = Instant::now();
    let mut c = loaded(t0, MigrationPolicy::Bidirectional);
    let (a, b) = classic_group(&mut c, t0);
    let t1 = t0 + Duration::from_secs(4);
    assert_eq!(
        c.consumer_heartbeat(consumer_join("C"), TIMEOUTS, &Topics, t1, 4000)
            .error,
        NONE
    );
    // A and B catch up to epoch 2 (B revoking 3 for C first).
    answered(c.join(join_request(&a, &[0, 1]), t1, 4000));
    answered(c.join(join_request(&b, &[2, 3]), t1, 4000));
    let jb = answered(c.join(join_request(&b, &[2]), t1, 4000));
    assert_eq!(jb.generation, 2);
    written(&mut c);
    // C leaves: every member left uses the classic protocol, so the group is classic again,
    // at generation 2, each member with its target as assignment, and rebalancing.
    let left = c.consumer_heartbeat(consumer_beat("C", -1, &[]), TIMEOUTS, &Topics, t1, 4000);
    assert_eq!((left.error, left.member_epoch), (NONE, -1));
    let log = written(&mut c);
    assert!(log.contains(&CoordinatorRecord::ConsumerGroup("g".into(), None)));
    let group = log.iter().find_map(|r| match r {
        CoordinatorRecord::Group(_, Some(value)) => Some(value.clone()),
        _ => None,
    });
    let group = group.expect("a group record");
    assert_eq!(
        (group.generation, group.protocol_type.as_str()),
        (2, "consumer")
    );
    assert_eq!(group.protocol.as_deref(), Some("range"));
    let by_member: BTreeMap<String, Vec<i32>> = group
        .members
        .iter()
        .map(|m| (m.member_id.clone(), assigned(&m.assignment)))
        .collect();
    // Partition 3 was C's target: nobody's until the rebalance.
    assert_eq!(by_member[&a], vec![0, 1]);
    assert_eq!(by_member[&b], vec![2]);
    let listed = c.list(&[], &[]);
    assert_eq!(
        (listed[0].group_type, listed[0].state),
        ("classic", "PreparingRebalance")
    );
    assert_eq!(c.consumer_describe("g").error, GROUP_ID_NOT_FOUND);
    // The members are told to rejoin, and the rebalance completes at generation 3.
    assert_eq!(c.heartbeat("g", &a, None, 2, t1), REBALANCE_IN_PROGRESS);
    let mut join_a = c.join(join_request(&a, &[0, 1]), t1, 4000);
    let join_b = c.join(join_request(&b, &[2, 3]), t1, 4000);
    let (ja, jb) = (join_a.try_recv().unwrap(), answered(join_b));
    assert_eq!((ja.generation, jb.generation), (3, 3));
    let leader = if ja.leader == a { &ja } else { &jb };
    assert_eq!(leader.members.len(), 2);
    // The leader assigns, and each member gets its own.
    let assignment = |member: &str, ps: &[i32]| {
        SyncGroupRequestAssignment::default()
            .with_member_id(StrBytes::from_string(member.to_owned()))
            .with_assignment(records::encode_assignment(
                1,
                &[("t".to_owned(), ps.to_vec())],
            ))
    };
    let follower = if ja.leader == a { &b } else { &a };
    let mut follower_sync = c.sync(sync_request(follower, 3), t1, 4000);
    let mut leader_sync = sync_request(&leader.member_id, 3);
    leader_sync.assignments = vec![assignment(&a, &[0, 1, 2]), assignment(&b, &[3, 4, 5])];
    let mine = answered(c.sync(leader_sync, t1, 4000));
    let theirs = follower_sync.try_recv().unwrap();
    let (sa, sb) = if ja.leader == a {
        (mine, theirs)
    } else {
        (theirs, mine)
    };
    assert_eq!(assigned(&sa.assignment), vec![0, 1, 2]);
    assert_eq!(assigned(&sb.assignment), vec![3, 4, 5]);
}

#[test]
fn a_downgrade_follows_the_policy() {
    let t0 = Instant::now();
    let mut c = loaded(t0, MigrationPolicy::Upgrade);
    let (a, _b) = classic_group(&mut c, t0);
    assert_eq!(
        c.consumer_heartbeat(consumer_join("C"), TIMEOUTS, &Topics, t0, 0)
            .error,
        NONE
    );
    ok_leave(&mut c, t0);
    // Still a consumer group of two classic members, at epoch 3.
    let d = c.consumer_describe("g");
    assert_eq!((d.error, d.group_epoch, d.members.len()), (NONE, 3, 2));
    assert_eq!(c.heartbeat("g", &a, None, 1, t0), REBALANCE_IN_PROGRESS);
}

fn ok_leave(c: &mut Coordinator, now: Instant) {
    let left = c.consumer_heartbeat(consumer_beat("C", -1, &[]), TIMEOUTS, &Topics, now, 0);
    assert_eq!(left.error, NONE);
}

#[test]
fn a_session_expiry_of_the_last_consumer_member_downgrades_too() {
    let t0 = Instant::now();
    let mut c = loaded(t0, MigrationPolicy::Bidirectional);
    let (a, b) = classic_group(&mut c, t0);
    assert_eq!(
        c.consumer_heartbeat(consumer_join("C"), TIMEOUTS, &Topics, t0, 0)
            .error,
        NONE
    );
    // A and B keep heartbeating; C does not.
    let t1 = t0 + Duration::from_secs(45);
    assert_eq!(c.heartbeat("g", &a, None, 1, t1), REBALANCE_IN_PROGRESS);
    assert_eq!(c.heartbeat("g", &b, None, 1, t1), REBALANCE_IN_PROGRESS);
    c.fire(
        Timer::ConsumerSession {
            group: "g".into(),
            member: "C".into(),
        },
        t1,
        45_000,
    );
    let listed = c.list(&[], &[]);
    assert_eq!(
        (listed[0].group_type, listed[0].state),
        ("classic", "PreparingRebalance")
    );
    assert_eq!(c.describe("g", GROUP_ID_NOT_FOUND).members.len(), 2);
}

#[test]
fn classic_members_of_a_consumer_group_are_reloaded() {
    let t0 = Instant::now();
    let mut c = loaded(t0, MigrationPolicy::Bidirectional);
    let (a, b) = classic_group(&mut c, t0);
    let mut log = Vec::new();
    assert_eq!(
        c.consumer_heartbeat(consumer_join("C"), TIMEOUTS, &Topics, t0, 0)
            .error,
        NONE
    );
    log.extend(written(&mut c));
    answered(c.join(join_request(&a, &[0, 1]), t0, 0));
    log.extend(written(&mut c));
    let before = described(&c);
    // A new coordinator replays the records: the classic members are back, as they were.
    let mut again = Coordinator::new(GroupSettings {
        offsets_topic_partitions: 1,
        ..GroupSettings::default()
    });
    again.lead(&HashSet::from([0]));
    again.loaded(0, log, t0, 0);
    again.set_topics(Arc::new(Topics));
    assert_eq!(described(&again), before);
    // A syncs at its epoch and gets its partitions; B must rejoin.
    let sa = answered(again.sync(sync_request(&a, 2), t0, 0));
    assert_eq!((sa.error, assigned(&sa.assignment)), (NONE, vec![0, 1]));
    assert_eq!(again.heartbeat("g", &b, None, 1, t0), REBALANCE_IN_PROGRESS);
    // Their sessions are their own: 10 seconds, not the consumer groups' 45.
    let timers: Vec<Duration> = again
        .take_effects()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Timer {
                at,
                timer: Timer::ConsumerSession { member, .. },
            } if member != "C" => Some(at - t0),
            _ => None,
        })
        .collect();
    assert_eq!(timers, vec![Duration::from_secs(10); 2]);
}

#[test]
fn a_classic_member_heartbeating_with_the_consumer_protocol_uses_it_from_then_on() {
    let t0 = Instant::now();
    let mut c = loaded(t0, MigrationPolicy::Bidirectional);
    let (a, _b) = classic_group(&mut c, t0);
    assert_eq!(
        c.consumer_heartbeat(consumer_join("C"), TIMEOUTS, &Topics, t0, 0)
            .error,
        NONE
    );
    let ja = answered(c.join(join_request(&a, &[0, 1]), t0, 0));
    assert_eq!(ja.generation, 2);
    let beat = c.consumer_heartbeat(consumer_beat(&a, 2, &[0, 1]), TIMEOUTS, &Topics, t0, 0);
    assert_eq!((beat.error, beat.member_epoch), (NONE, 2));
    assert_eq!(described(&c)[&a], (2, vec![0, 1], false));
    let log = written(&mut c);
    assert!(log.iter().any(|r| matches!(
        r,
        CoordinatorRecord::ConsumerMember(_, m, Some(v)) if *m == a && v.classic.is_none()
    )));
    // Its classic requests are refused now.
    assert_eq!(c.heartbeat("g", &a, None, 2, t0), UNKNOWN_MEMBER_ID);
}
