//! The classic protocol's decisions with exact values: no actor, runtime or log.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::oneshot;

use super::codes::*;
use super::protocols::Protocols;
use super::records::{self, CoordinatorRecord, OffsetKey, OffsetValue};
use super::state::*;
use super::GroupSettings;

fn settings() -> GroupSettings {
    GroupSettings {
        offsets_topic_partitions: 1,
        initial_rebalance_delay: Duration::from_millis(3000),
        ..GroupSettings::default()
    }
}

fn loaded(now: Instant) -> Coordinator {
    let mut c = Coordinator::new(settings());
    assert_eq!(c.lead(&HashSet::from([0])), vec![0]);
    c.loaded(0, Vec::new(), now, 0);
    c
}

fn join_request(member_id: &str, version: i16) -> JoinRequest {
    JoinRequest {
        version,
        group_id: "g".into(),
        member_id: member_id.into(),
        group_instance_id: None,
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 60_000,
        protocol_type: "consumer".into(),
        protocols: Protocols::from_pairs([("range", &b"sub"[..])]),
    }
}

fn answered<T>(mut receiver: oneshot::Receiver<T>) -> T {
    receiver.try_recv().expect("answered")
}

fn pending<T: std::fmt::Debug>(receiver: &mut oneshot::Receiver<T>) {
    assert!(matches!(
        receiver.try_recv(),
        Err(oneshot::error::TryRecvError::Empty)
    ));
}

/// The timers queued since the last call that `pick` keeps (as what it returns), with their
/// instants.
fn timers<T>(c: &mut Coordinator, pick: impl Fn(Timer) -> Option<T>) -> Vec<(T, Instant)> {
    c.take_effects()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Timer { at, timer } => Some((pick(timer)?, at)),
            Effect::Write(_) => None,
        })
        .collect()
}

/// The Join timers queued since the last call, as instants.
fn join_timers(c: &mut Coordinator) -> Vec<Instant> {
    timers(c, |t| matches!(t, Timer::Join { .. }).then_some(()))
        .into_iter()
        .map(|((), at)| at)
        .collect()
}

/// How many writes were queued since the last call.
fn writes_queued(c: &mut Coordinator) -> usize {
    c.take_effects()
        .into_iter()
        .filter(|e| matches!(e, Effect::Write(_)))
        .count()
}

/// A member joins an empty group: MEMBER_ID_REQUIRED, then a parked join answered after the
/// initial delay. Returns the member id and the join result.
fn first_member(c: &mut Coordinator, t0: Instant) -> (String, JoinResult) {
    let required = answered(c.join(join_request("", 5), t0, 0));
    assert_eq!(required.error, MEMBER_ID_REQUIRED);
    assert!(required.member_id.starts_with("client-"));
    let mut join = c.join(join_request(&required.member_id, 5), t0, 0);
    pending(&mut join);
    assert_eq!(join_timers(c), vec![t0 + Duration::from_millis(3000)]);
    let later = t0 + Duration::from_millis(3000);
    c.fire(Timer::Join { group: "g".into() }, later, 3000);
    (required.member_id, answered(join))
}

#[test]
fn first_join_waits_the_initial_delay_then_leads() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let mut early = c.join(join_request("", 5), t0, 0);
    let id = early.try_recv().unwrap().member_id;
    let mut join = c.join(join_request(&id, 5), t0, 0);
    // Before the delay has passed, the timer changes nothing.
    c.fire(
        Timer::Join { group: "g".into() },
        t0 + Duration::from_millis(2999),
        2999,
    );
    pending(&mut join);
    c.fire(
        Timer::Join { group: "g".into() },
        t0 + Duration::from_millis(3000),
        3000,
    );
    let result = answered(join);
    assert_eq!(result.error, NONE);
    assert_eq!(result.generation, 1);
    assert_eq!(result.leader, id);
    assert_eq!(result.protocol_name.as_deref(), Some("range"));
    assert_eq!(
        result.members,
        vec![JoinedMember {
            member_id: id.clone(),
            group_instance_id: None,
            metadata: Bytes::from_static(b"sub"),
        }]
    );
    let sync = c.sync(
        SyncRequest {
            group_id: "g".into(),
            generation: 1,
            member_id: id.clone(),
            group_instance_id: None,
            protocol_type: Some("consumer".into()),
            protocol_name: Some("range".into()),
            assignments: vec![assigned(&id, Bytes::from_static(b"a0"))],
        },
        t0,
        3000,
    );
    assert_eq!(answered(sync).assignment, Bytes::from_static(b"a0"));
    assert_eq!(c.heartbeat("g", &id, None, 1, t0), NONE);
    assert_eq!(c.heartbeat("g", &id, None, 0, t0), ILLEGAL_GENERATION);
    assert_eq!(c.heartbeat("g", "other", None, 1, t0), UNKNOWN_MEMBER_ID);
    let described = c.describe("g", GROUP_ID_NOT_FOUND);
    assert_eq!(described.state, "Stable");
    assert_eq!(described.protocol_data, "range");
    assert_eq!(described.members[0].assignment, Bytes::from_static(b"a0"));
    // The group record is written once the group is stable.
    assert_eq!(writes_queued(&mut c), 1);
}

/// KIP-345: the static leader of a Stable group restarting with the same protocols does not
/// rebalance (Kafka's `updateStaticMemberThenRebalanceOrCompleteJoin`): from JoinGroup v9 it is
/// told it leads and to skip the assignment, before v9 it is told the leader it replaced, so it
/// follows and its SyncGroup returns the assignment the group keeps.
#[test]
fn a_static_leader_rejoining_a_stable_group_keeps_the_generation() {
    for version in [5, 9] {
        let t0 = Instant::now();
        let mut c = loaded(t0);
        let static_join = |member: &str| JoinRequest {
            group_instance_id: Some("i1".into()),
            ..join_request(member, version)
        };
        // A static member joins with its instance id and no member id: no MEMBER_ID_REQUIRED.
        let mut join = c.join(static_join(""), t0, 0);
        c.fire(
            Timer::Join { group: "g".into() },
            t0 + Duration::from_millis(3000),
            3000,
        );
        let first = answered(join);
        assert_eq!(first.error, NONE, "v{version}");
        assert_eq!(first.leader, first.member_id);
        let sync = c.sync(
            SyncRequest {
                group_id: "g".into(),
                generation: first.generation,
                member_id: first.member_id.clone(),
                group_instance_id: Some("i1".into()),
                protocol_type: Some("consumer".into()),
                protocol_name: Some("range".into()),
                assignments: vec![assigned(&first.member_id, Bytes::from_static(b"a0"))],
            },
            t0,
            3000,
        );
        assert_eq!(answered(sync).assignment, Bytes::from_static(b"a0"));
        // The process restarts: same instance id, no member id.
        join = c.join(static_join(""), t0, 4000);
        let back = answered(join);
        assert_eq!(back.error, NONE, "v{version}");
        assert_eq!(
            back.generation, first.generation,
            "v{version}: no rebalance"
        );
        assert_ne!(back.member_id, first.member_id);
        if version >= 9 {
            assert_eq!(back.leader, back.member_id);
            assert!(back.skip_assignment);
        } else {
            assert_eq!(back.leader, first.member_id);
            assert!(!back.skip_assignment && back.members.is_empty());
        }
        assert_eq!(c.describe("g", NONE).state, "Stable");
        let sync = c.sync(
            SyncRequest {
                group_id: "g".into(),
                generation: back.generation,
                member_id: back.member_id.clone(),
                group_instance_id: Some("i1".into()),
                protocol_type: Some("consumer".into()),
                protocol_name: Some("range".into()),
                assignments: Vec::new(),
            },
            t0,
            4000,
        );
        assert_eq!(
            answered(sync).assignment,
            Bytes::from_static(b"a0"),
            "v{version}"
        );
    }
}

#[test]
fn a_second_member_rebalances_and_the_leader_assigns_both() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let (first, _) = first_member(&mut c, t0);
    let sync = c.sync(
        SyncRequest {
            group_id: "g".into(),
            generation: 1,
            member_id: first.clone(),
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: vec![assigned(&first, Bytes::from_static(b"all"))],
        },
        t0,
        0,
    );
    assert_eq!(answered(sync).error, NONE);
    let second = answered(c.join(join_request("", 5), t0, 0)).member_id;
    let mut second_join = c.join(join_request(&second, 5), t0, 0);
    pending(&mut second_join);
    // The first member learns of the rebalance from its heartbeat and rejoins.
    assert_eq!(c.heartbeat("g", &first, None, 1, t0), REBALANCE_IN_PROGRESS);
    let first_join = c.join(join_request(&first, 5), t0, 0);
    let leader = answered(first_join);
    let follower = answered(second_join);
    assert_eq!((leader.generation, follower.generation), (2, 2));
    assert_eq!(leader.leader, first);
    assert_eq!(leader.members.len(), 2);
    assert!(follower.members.is_empty());
    let mut follower_sync = c.sync(
        SyncRequest {
            group_id: "g".into(),
            generation: 2,
            member_id: second.clone(),
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: Vec::new(),
        },
        t0,
        0,
    );
    pending(&mut follower_sync);
    let leader_sync = c.sync(
        SyncRequest {
            group_id: "g".into(),
            generation: 2,
            member_id: first.clone(),
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            // The last assignment naming a member is its own; other ids are ignored.
            assignments: vec![
                assigned(&second, Bytes::from_static(b"stale")),
                assigned("no-member", Bytes::from_static(b"x")),
                assigned(&first, Bytes::from_static(b"p0")),
                assigned(&second, Bytes::from_static(b"p1")),
            ],
        },
        t0,
        0,
    );
    assert_eq!(answered(leader_sync).assignment, Bytes::from_static(b"p0"));
    assert_eq!(
        answered(follower_sync).assignment,
        Bytes::from_static(b"p1")
    );
}

#[test]
fn an_expired_session_removes_the_member_and_empties_the_group() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let (id, joined) = first_member(&mut c, t0);
    assert_eq!(joined.error, NONE);
    let session = Duration::from_millis(10_000);
    let at_join = t0 + Duration::from_millis(3000);
    // A timer before the deadline only re-arms itself.
    c.fire(
        Timer::Session {
            group: "g".into(),
            member: id.clone(),
        },
        at_join + session - Duration::from_millis(1),
        0,
    );
    assert_eq!(c.describe("g", NONE).members.len(), 1);
    c.fire(
        Timer::Session {
            group: "g".into(),
            member: id.clone(),
        },
        at_join + session,
        20_000,
    );
    let described = c.describe("g", NONE);
    assert_eq!(described.state, "Empty");
    assert!(described.members.is_empty());
    assert_eq!(c.heartbeat("g", &id, None, 1, t0), UNKNOWN_MEMBER_ID);
}

#[test]
fn join_errors_follow_kafka() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let mut request = join_request("", 5);
    request.group_id = String::new();
    assert_eq!(answered(c.join(request, t0, 0)).error, INVALID_GROUP_ID);
    let mut request = join_request("", 5);
    request.session_timeout_ms = 5999;
    assert_eq!(
        answered(c.join(request, t0, 0)).error,
        INVALID_SESSION_TIMEOUT
    );
    assert_eq!(
        answered(c.join(join_request("stranger", 5), t0, 0)).error,
        UNKNOWN_MEMBER_ID
    );
    let mut request = join_request("", 5);
    request.group_id = "g".repeat(32_768);
    assert_eq!(answered(c.join(request, t0, 0)).error, INVALID_GROUP_ID);
    let mut request = join_request("", 5);
    request.group_instance_id = Some("i".repeat(20_000));
    assert_eq!(answered(c.join(request, t0, 0)).error, INVALID_REQUEST);
    let mut request = join_request("", 5);
    request.protocols = Protocols::default();
    assert_eq!(
        answered(c.join(request, t0, 0)).error,
        INCONSISTENT_GROUP_PROTOCOL
    );
    let (_, _) = first_member(&mut c, t0);
    let mut other = join_request("", 3);
    other.protocol_type = "connect".into();
    assert_eq!(
        answered(c.join(other, t0, 0)).error,
        INCONSISTENT_GROUP_PROTOCOL
    );
}

#[test]
fn groups_of_unled_or_loading_partitions_are_refused() {
    let t0 = Instant::now();
    let mut c = Coordinator::new(settings());
    assert_eq!(c.heartbeat("g", "m", None, 1, t0), NOT_COORDINATOR);
    c.lead(&HashSet::from([0]));
    // A heartbeat to a loading group is answered NONE, as Kafka's GroupCoordinatorService.
    assert_eq!(c.heartbeat("g", "m", None, 1, t0), NONE);
    assert_eq!(
        answered(c.join(join_request("", 5), t0, 0)).error,
        COORDINATOR_LOAD_IN_PROGRESS
    );
    c.loaded(0, Vec::new(), t0, 0);
    assert_eq!(c.heartbeat("g", "m", None, 1, t0), UNKNOWN_MEMBER_ID);
}

fn commit(generation: i32, member: &str, version: i16, metadata: &str) -> CommitRequest {
    CommitRequest {
        version,
        group_id: "g".into(),
        generation,
        member_id: member.into(),
        group_instance_id: None,
        retention_ms: -1,
        partitions: vec![CommitPartition {
            topic: "t".into(),
            partition: 0,
            offset: 42,
            leader_epoch: 3,
            metadata: Some(metadata.into()),
            error: NONE,
        }],
    }
}

#[test]
fn commits_check_generation_and_member() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let (done, _) = oneshot::channel();
    // No group: a generation ≥ 0 is refused (the code depends on the version).
    assert_eq!(
        c.commit(commit(5, "m", 8, ""), done, t0, 0),
        vec![ILLEGAL_GENERATION]
    );
    let (done, _) = oneshot::channel();
    assert_eq!(
        c.commit(commit(5, "m", 9, ""), done, t0, 0),
        vec![GROUP_ID_NOT_FOUND]
    );
    // Generation -1 creates a simple group and stores the offset.
    let (done, mut written) = oneshot::channel();
    assert_eq!(
        c.commit(commit(-1, "", 8, "meta"), done, t0, 1000),
        vec![NONE]
    );
    pending(&mut written);
    let write = c
        .take_effects()
        .into_iter()
        .find_map(|e| match e {
            Effect::Write(w) => Some(w),
            _ => None,
        })
        .unwrap();
    assert_eq!(write.partition, 0);
    // Not replicated yet: nothing committed to read.
    assert_eq!(c.fetch_offsets("g", None, None).unwrap(), Vec::new());
    c.offsets_written(write.partition, write.offsets_write.unwrap(), true);
    assert_eq!(
        records::decode(&write.records[0].0, write.records[0].1.as_deref()).unwrap(),
        CoordinatorRecord::Offset(
            OffsetKey {
                group: "g".into(),
                topic: "t".into(),
                partition: 0
            },
            Some(OffsetValue {
                offset: 42,
                leader_epoch: 3,
                metadata: "meta".into(),
                commit_timestamp: 1000,
                expire_timestamp: None,
            })
        )
    );
    let fetched = c.fetch_offsets("g", None, None).unwrap();
    assert_eq!(fetched.len(), 1);
    assert_eq!(fetched[0].2.as_ref().map(|o| o.offset), Some(42));
    // Metadata above offset.metadata.max.bytes.
    let (done, _) = oneshot::channel();
    assert_eq!(
        c.commit(commit(-1, "", 8, &"x".repeat(4097)), done, t0, 0),
        vec![OFFSET_METADATA_TOO_LARGE]
    );
    // A live group: the member and generation must match.
    let (id, _) = first_member(&mut c, t0);
    let (done, _) = oneshot::channel();
    assert_eq!(
        c.commit(commit(1, "nobody", 8, ""), done, t0, 0),
        vec![UNKNOWN_MEMBER_ID]
    );
    let (done, _) = oneshot::channel();
    assert_eq!(
        c.commit(commit(7, &id, 8, ""), done, t0, 0),
        vec![ILLEGAL_GENERATION]
    );
    // CompletingRebalance: the member must sync first.
    let (done, _) = oneshot::channel();
    assert_eq!(
        c.commit(commit(1, &id, 8, ""), done, t0, 0),
        vec![REBALANCE_IN_PROGRESS]
    );
    let (done, _) = oneshot::channel();
    assert_eq!(
        c.commit(commit(-1, "", 8, ""), done, t0, 0),
        vec![UNKNOWN_MEMBER_ID]
    );
    // Unknown groups fetch nothing, without error.
    assert_eq!(
        c.fetch_offsets("other", None, Some(&[("t".into(), 0)]))
            .unwrap()[0]
            .2,
        None
    );
}

/// Marks every numbered write of offsets among the pending effects replicated, as the writer
/// task reports it (the effects are dropped).
pub(super) fn replicate_offsets(c: &mut Coordinator) {
    for effect in c.take_effects() {
        if let Effect::Write(Write {
            partition,
            offsets_write: Some(write),
            ..
        }) = effect
        {
            c.offsets_written(partition, write, true);
        }
    }
}

/// The numbered writes of offsets among the pending effects (the effects are dropped).
fn offsets_writes(c: &mut Coordinator) -> Vec<(i32, u64)> {
    c.take_effects()
        .into_iter()
        .filter_map(|effect| match effect {
            Effect::Write(Write {
                partition,
                offsets_write: Some(write),
                ..
            }) => Some((partition, write)),
            _ => None,
        })
        .collect()
}

#[test]
fn offset_fetch_reads_only_replicated_commits() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let at = |offset: i64| {
        let mut request = commit(-1, "", 8, "");
        request.partitions[0].offset = offset;
        request
    };
    let fetched = |c: &Coordinator| {
        c.fetch_offsets("g", None, Some(&[("t".into(), 0)]))
            .unwrap()[0]
            .2
            .as_ref()
            .map(|o| o.offset)
    };
    let (done, _) = oneshot::channel();
    assert_eq!(c.commit(at(5), done, t0, 0), vec![NONE]);
    let first = offsets_writes(&mut c);
    assert_eq!(fetched(&c), None);
    c.offsets_written(first[0].0, first[0].1, true);
    assert_eq!(fetched(&c), Some(5));
    // Appended but not replicated (a write that timed out): still 5.
    let (done, _) = oneshot::channel();
    c.commit(at(7), done, t0, 0);
    let second = offsets_writes(&mut c);
    assert_eq!(fetched(&c), Some(5));
    // A later write that never reached the log is taken back; the one before it counts once
    // replicated.
    let (done, _) = oneshot::channel();
    c.commit(at(9), done, t0, 0);
    let third = offsets_writes(&mut c);
    c.offsets_written(third[0].0, third[0].1, false);
    assert_eq!(fetched(&c), Some(5));
    c.offsets_written(second[0].0, second[0].1, true);
    assert_eq!(fetched(&c), Some(7));
    // A first commit of a partition lost: the group has no offset for it.
    let mut other = at(3);
    other.partitions[0].partition = 1;
    let (done, _) = oneshot::channel();
    c.commit(other, done, t0, 0);
    let lost = offsets_writes(&mut c);
    c.offsets_written(lost[0].0, lost[0].1, false);
    let listed: Vec<(String, i32, Option<i64>)> = c
        .fetch_offsets("g", None, None)
        .unwrap()
        .into_iter()
        .map(|(t, p, o)| (t, p, o.map(|o| o.offset)))
        .collect();
    assert_eq!(listed, vec![("t".to_owned(), 0, Some(7))]);
}

/// A live group "g" of one member joined with `protocol_type` and the default metadata (not a
/// readable consumer subscription).
fn live_group(c: &mut Coordinator, protocol_type: &str, t0: Instant) {
    let mut request = join_request("", 5);
    request.protocol_type = protocol_type.into();
    let id = answered(c.join(request.clone(), t0, 0)).member_id;
    request.member_id = id;
    let join = c.join(request, t0, 0);
    c.fire(
        Timer::Join { group: "g".into() },
        t0 + Duration::from_secs(3),
        0,
    );
    assert_eq!(answered(join).error, NONE);
}

#[test]
fn offset_delete_on_a_live_group_follows_its_protocol_type() {
    // Kafka's ClassicGroup: a consumer group whose subscriptions cannot be read subscribes to
    // every topic (each partition GROUP_SUBSCRIBED_TO_TOPIC); another live group is not empty.
    let t0 = Instant::now();
    let mut c = loaded(t0);
    live_group(&mut c, "consumer", t0);
    assert_eq!(
        c.delete_offsets("g", &[("t".into(), 0), ("u".into(), 0)]),
        Ok(vec![GROUP_SUBSCRIBED_TO_TOPIC, GROUP_SUBSCRIBED_TO_TOPIC])
    );
    let mut c = loaded(t0);
    live_group(&mut c, "connect", t0);
    assert_eq!(
        c.delete_offsets("g", &[("t".into(), 0)]),
        Err(NON_EMPTY_GROUP)
    );
}

/// A Stable classic group "g" of one consumer subscribed to topic "t" (its readable
/// ConsumerProtocolSubscription); the member's id.
fn stable_member_subscribed_to_t(c: &mut Coordinator, t0: Instant) -> String {
    let mut request = join_request("", 5);
    // ConsumerProtocolSubscription v0 for topic "t".
    request.protocols = Protocols::from_pairs([(
        "range",
        &[0, 0, 0, 0, 0, 1, 0, 1, b't', 255, 255, 255, 255][..],
    )]);
    let id = answered(c.join(request.clone(), t0, 0)).member_id;
    request.member_id = id.clone();
    let join = c.join(request, t0, 0);
    c.fire(
        Timer::Join { group: "g".into() },
        t0 + Duration::from_secs(3),
        0,
    );
    assert_eq!(answered(join).error, NONE);
    let sync = c.sync(
        SyncRequest {
            group_id: "g".into(),
            generation: 1,
            member_id: id.clone(),
            group_instance_id: None,
            protocol_type: None,
            protocol_name: None,
            assignments: Vec::new(),
        },
        t0,
        0,
    );
    assert_eq!(answered(sync).error, NONE);
    id
}

#[test]
fn delete_refuses_live_groups_and_subscribed_topics() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    assert_eq!(c.delete_group("g"), GROUP_ID_NOT_FOUND);
    let id = stable_member_subscribed_to_t(&mut c, t0);
    assert_eq!(c.delete_group("g"), NON_EMPTY_GROUP);
    assert_eq!(
        c.delete_offsets("g", &[("t".into(), 0), ("u".into(), 0)]),
        Ok(vec![GROUP_SUBSCRIBED_TO_TOPIC, NONE])
    );
    let (codes, members) = c.leave(
        "g",
        &[
            Leaving {
                member_id: id,
                group_instance_id: None,
            },
            Leaving {
                member_id: "ghost".into(),
                group_instance_id: None,
            },
        ],
        t0,
        0,
    );
    assert_eq!((codes, members), (NONE, vec![NONE, UNKNOWN_MEMBER_ID]));
    assert_eq!(c.describe("g", NONE).state, "Empty");
    assert_eq!(c.delete_group("g"), NONE);
    assert_eq!(
        c.describe("g", GROUP_ID_NOT_FOUND).error,
        GROUP_ID_NOT_FOUND
    );
}

#[test]
fn a_loaded_partition_restores_offsets_and_members() {
    let t0 = Instant::now();
    let mut c = Coordinator::new(settings());
    c.lead(&HashSet::from([0]));
    let key = |p| OffsetKey {
        group: "g".into(),
        topic: "t".into(),
        partition: p,
    };
    let value = |offset| OffsetValue {
        offset,
        leader_epoch: -1,
        metadata: String::new(),
        commit_timestamp: 5,
        expire_timestamp: None,
    };
    c.loaded(
        0,
        vec![
            CoordinatorRecord::Offset(key(0), Some(value(1))),
            CoordinatorRecord::Offset(key(0), Some(value(2))),
            CoordinatorRecord::Offset(key(1), Some(value(9))),
            CoordinatorRecord::Offset(key(1), None),
            CoordinatorRecord::Group(
                "gone".into(),
                Some(records::GroupValue {
                    protocol_type: "consumer".into(),
                    generation: 1,
                    protocol: None,
                    leader: None,
                    current_state_timestamp: 0,
                    members: Vec::new(),
                }),
            ),
            CoordinatorRecord::Group("gone".into(), None),
        ],
        t0,
        10,
    );
    let fetched = c.fetch_offsets("g", None, None).unwrap();
    assert_eq!(fetched.len(), 1);
    assert_eq!(
        (fetched[0].1, fetched[0].2.as_ref().map(|o| o.offset)),
        (0, Some(2))
    );
    let listed: Vec<String> = c.list(&[], &[]).into_iter().map(|g| g.group_id).collect();
    assert_eq!(listed, vec!["g".to_owned()]);
    assert_eq!(c.list(&["stable".into()], &[]), Vec::new());
}

#[test]
fn offsets_of_empty_groups_expire_after_the_retention() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let (done, _) = oneshot::channel();
    assert_eq!(c.commit(commit(-1, "", 8, ""), done, t0, 1_000), vec![NONE]);
    c.take_effects();
    let retention = GroupSettings::default().offsets_retention_ms;
    assert_eq!(c.expire_offsets(1_000 + retention - 1), 0);
    assert_eq!(c.expire_offsets(1_000 + retention), 1);
    // The offset's tombstone and the group's.
    let write = c
        .take_effects()
        .into_iter()
        .find_map(|e| match e {
            Effect::Write(w) => Some(w),
            _ => None,
        })
        .unwrap();
    assert_eq!(write.records.len(), 2);
    assert!(write.records.iter().all(|(_, v)| v.is_none()));
    assert!(c.list(&[], &[]).is_empty());
}

/// Kafka's `ClassicGroup.offsetExpirationCondition`: a Stable classic consumer group whose
/// subscriptions are known keeps the offsets of the topics it subscribes to, and lets the
/// others expire from their commit.
#[test]
fn a_stable_classic_group_lets_offsets_of_other_topics_expire() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let id = stable_member_subscribed_to_t(&mut c, t0);
    assert_eq!(c.describe("g", NONE).state, "Stable");
    for topic in ["t", "u"] {
        let mut request = commit(1, &id, 8, "");
        request.partitions[0].topic = topic.into();
        let (done, _) = oneshot::channel();
        assert_eq!(c.commit(request, done, t0, 1_000), vec![NONE]);
    }
    c.take_effects();
    let retention = GroupSettings::default().offsets_retention_ms;
    assert_eq!(c.expire_offsets(1_000 + retention - 1), 0);
    assert_eq!(c.expire_offsets(1_000 + retention), 1);
    let tombstones: Vec<_> = c
        .take_effects()
        .into_iter()
        .filter_map(|e| match e {
            Effect::Write(w) => Some(w.records),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(tombstones.len(), 1);
    let key = crate::groups::records::offset_key(&crate::groups::records::OffsetKey {
        group: "g".into(),
        topic: "u".into(),
        partition: 0,
    });
    assert_eq!(tombstones[0], (key, None));
}

/// Two members naming n protocols each: the compatibility check of each join and the vote that
/// ends the rebalance count each member's protocols once (a scan of every member's protocols
/// per protocol named was quadratic), and choose as before: the protocol both prefer among
/// those both support.
#[test]
fn members_with_many_protocols_join_in_linear_time() {
    use crate::controller::logic::large_requests::{finishes, LARGE};

    finishes("JoinGroup protocols", LARGE, |n| {
        let t0 = Instant::now();
        let mut c = loaded(t0);
        let protocol = |name: String| (name, Bytes::from_static(b"sub"));
        let with = |member: &str, protocols: Vec<(String, Bytes)>| JoinRequest {
            protocols: Protocols::from_pairs(protocols.iter().map(|(n, m)| (n.as_str(), &m[..]))),
            ..join_request(member, 5)
        };
        // The first member prefers a protocol the second lacks; the second lists p0 to
        // p(n-1) backwards but prefers p0 above all.
        let first_protocols: Vec<_> = std::iter::once("only-first".to_owned())
            .chain((0..n).map(|i| format!("p{i}")))
            .map(protocol)
            .collect();
        let second_protocols: Vec<_> = std::iter::once("p0".to_owned())
            .chain((1..n).rev().map(|i| format!("p{i}")))
            .map(protocol)
            .collect();
        let first = answered(c.join(with("", first_protocols.clone()), t0, 0)).member_id;
        let mut join = c.join(with(&first, first_protocols.clone()), t0, 0);
        c.fire(
            Timer::Join { group: "g".into() },
            t0 + Duration::from_millis(3000),
            3000,
        );
        assert_eq!(answered(join).protocol_name.as_deref(), Some("only-first"));
        let second = answered(c.join(with("", second_protocols.clone()), t0, 0)).member_id;
        let mut second_join = c.join(with(&second, second_protocols), t0, 0);
        pending(&mut second_join);
        join = c.join(with(&first, first_protocols), t0, 0);
        let leader = answered(join);
        assert_eq!(leader.error, NONE);
        assert_eq!(leader.protocol_name.as_deref(), Some("p0"));
        assert_eq!(leader.members.len(), 2);
        assert_eq!(answered(second_join).protocol_name.as_deref(), Some("p0"));
    });
}

/// ListGroups' filters are cut to `LISTABLE_STATES` before the coordinator sees them: a state
/// missing there would never be listed by name.
#[test]
fn every_classic_state_name_is_listable() {
    use GroupState::*;
    for state in [Empty, PreparingRebalance, CompletingRebalance, Stable, Dead] {
        assert!(LISTABLE_STATES.contains(&state.name()), "{state:?}");
    }
}

/// A leader's assignment of `assignment` to `member_id`.
fn assigned(
    member_id: &str,
    assignment: Bytes,
) -> kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment {
    kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment::default()
        .with_member_id(member_id.to_owned().into())
        .with_assignment(assignment)
}

/// A JoinGroup v5 of static member `instance` (its metadata is its instance id), with a session
/// longer than its rebalance timeout, as KIP-345 members have.
fn static_join(instance: &str, member_id: &str) -> JoinRequest {
    JoinRequest {
        group_instance_id: Some(instance.into()),
        session_timeout_ms: 30_000,
        rebalance_timeout_ms: 5_000,
        protocols: Protocols::from_pairs([("range", instance.as_bytes())]),
        ..join_request(member_id, 5)
    }
}

fn sync_request(
    generation: i32,
    member_id: &str,
    instance: Option<&str>,
    assignments: &[(&str, &'static [u8])],
) -> SyncRequest {
    SyncRequest {
        group_id: "g".into(),
        generation,
        member_id: member_id.into(),
        group_instance_id: instance.map(str::to_owned),
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments: assignments
            .iter()
            .map(|(member, assignment)| assigned(member, Bytes::from_static(assignment)))
            .collect(),
    }
}

fn joined(member_id: &str, instance: &str) -> JoinedMember {
    JoinedMember {
        member_id: member_id.into(),
        group_instance_id: Some(instance.into()),
        metadata: Bytes::copy_from_slice(instance.as_bytes()),
    }
}

fn described_ids(c: &Coordinator) -> (&'static str, Vec<String>) {
    let described = c.describe("g", NONE);
    let ids = described.members.into_iter().map(|m| m.member_id).collect();
    (described.state, ids)
}

/// The Session timers queued since the last call, as (member, instant).
fn session_timers(c: &mut Coordinator) -> Vec<(String, Instant)> {
    timers(c, |t| match t {
        Timer::Session { member, .. } => Some(member),
        _ => None,
    })
}

/// Kafka's `completeClassicGroupJoin` drops only dynamic members that did not rejoin: the
/// static leader of generation 1 that stays silent is kept in generation 2 with its old
/// metadata and a fresh session, a member that rejoined leads, and the static member comes
/// back under its instance id without another rebalance.
#[test]
fn a_static_member_that_does_not_rejoin_stays_in_the_next_generation() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut c = loaded(t0);
    let join1 = c.join(static_join("i1", ""), t0, 0);
    let join2 = c.join(static_join("i2", ""), t0, 0);
    c.fire(Timer::Join { group: "g".into() }, t0 + ms(3000), 3000);
    let (first1, first2) = (answered(join1), answered(join2));
    let (i1, i2) = (first1.member_id.clone(), first2.member_id.clone());
    assert_eq!(
        (first1.generation, first1.leader.as_str()),
        (1, i1.as_str())
    );
    let mut follower = c.sync(sync_request(1, &i2, Some("i2"), &[]), t0 + ms(3000), 3000);
    pending(&mut follower);
    let leader = c.sync(
        sync_request(1, &i1, Some("i1"), &[(&i1, b"a1"), (&i2, b"a2")]),
        t0 + ms(3000),
        3000,
    );
    assert_eq!(answered(leader).assignment, Bytes::from_static(b"a1"));
    assert_eq!(answered(follower).assignment, Bytes::from_static(b"a2"));
    c.take_effects();

    // A third static member joins; i2 rejoins, i1 (the leader) stays silent.
    let t1 = t0 + ms(4000);
    let join3 = c.join(static_join("i3", ""), t1, 4000);
    let rejoin2 = c.join(static_join("i2", &i2), t1, 4000);
    assert_eq!(join_timers(&mut c), vec![t1 + ms(5000)]);
    let done = t1 + ms(5000);
    c.fire(Timer::Join { group: "g".into() }, done, 9000);
    let (leader, third) = (answered(rejoin2), answered(join3));
    let i3 = third.member_id.clone();
    assert_eq!((leader.error, leader.generation), (NONE, 2));
    assert_eq!(leader.leader, i2);
    assert_eq!(
        leader.members,
        vec![joined(&i1, "i1"), joined(&i2, "i2"), joined(&i3, "i3")]
    );
    assert_eq!((third.generation, third.leader.as_str()), (2, i2.as_str()));
    assert!(third.members.is_empty());
    assert_eq!(
        described_ids(&c),
        (
            "CompletingRebalance",
            vec![i1.clone(), i2.clone(), i3.clone()]
        )
    );
    // Every member's session starts again at the completion, the silent one's too.
    let mut sessions = session_timers(&mut c);
    sessions.sort();
    assert_eq!(
        sessions,
        vec![
            (i1.clone(), done + ms(30_000)),
            (i2.clone(), done + ms(30_000)),
            (i3.clone(), done + ms(30_000)),
        ]
    );
    // Its timer of generation 1 (30 s after that completion) re-arms instead of removing it.
    let gen1_deadline = t0 + ms(3000) + ms(30_000);
    let gen1_timer = Timer::Session {
        group: "g".into(),
        member: i1.clone(),
    };
    c.fire(gen1_timer, gen1_deadline, 33_000);
    assert_eq!(
        session_timers(&mut c),
        vec![(i1.clone(), done + ms(30_000))]
    );
    assert_eq!(
        c.heartbeat("g", &i1, Some("i1"), 1, done),
        ILLEGAL_GENERATION
    );

    let leader_sync = c.sync(
        sync_request(
            2,
            &i2,
            Some("i2"),
            &[(&i1, b"b1"), (&i2, b"b2"), (&i3, b"b3")],
        ),
        done,
        9000,
    );
    assert_eq!(answered(leader_sync).assignment, Bytes::from_static(b"b2"));
    let third_sync = c.sync(sync_request(2, &i3, Some("i3"), &[]), done, 9000);
    assert_eq!(answered(third_sync).assignment, Bytes::from_static(b"b3"));
    assert_eq!(described_ids(&c).0, "Stable");

    // i1 restarts: same instance, no member id, same protocols. No rebalance.
    let back = answered(c.join(static_join("i1", ""), done + ms(1000), 10_000));
    assert_eq!((back.error, back.generation), (NONE, 2));
    assert_eq!(back.leader, i2);
    assert_ne!(back.member_id, i1);
    let back_sync = c.sync(
        sync_request(2, &back.member_id, Some("i1"), &[]),
        done + ms(1000),
        10_000,
    );
    assert_eq!(answered(back_sync).assignment, Bytes::from_static(b"b1"));
    assert_eq!(described_ids(&c).0, "Stable");
    assert_eq!(
        c.heartbeat("g", &i1, Some("i1"), 2, done),
        FENCED_INSTANCE_ID
    );
}

/// A JoinGroup v5 of a dynamic member with the static members' 5 s rebalance timeout.
fn dynamic_join(member_id: &str) -> JoinRequest {
    JoinRequest {
        rebalance_timeout_ms: 5_000,
        ..join_request(member_id, 5)
    }
}

/// A Stable group of static member `i1` (the leader) and a dynamic member, then a rebalance
/// started by a member that joins and leaves at once, which neither of them rejoins: at its
/// deadline the dynamic member is dropped and the static one kept. Returns the ids and the
/// instant of that deadline.
fn rebalance_nobody_rejoins(c: &mut Coordinator, t0: Instant) -> (String, String, Instant) {
    let ms = Duration::from_millis;
    let static_first = c.join(static_join("i1", ""), t0, 0);
    let dynamic_id = answered(c.join(dynamic_join(""), t0, 0)).member_id;
    let dynamic_first = c.join(dynamic_join(&dynamic_id), t0, 0);
    c.fire(Timer::Join { group: "g".into() }, t0 + ms(3000), 3000);
    let static_id = answered(static_first).member_id;
    assert_eq!(answered(dynamic_first).leader, static_id);
    let follower = c.sync(sync_request(1, &dynamic_id, None, &[]), t0 + ms(3000), 3000);
    let leader = c.sync(
        sync_request(1, &static_id, Some("i1"), &[]),
        t0 + ms(3000),
        3000,
    );
    assert_eq!(
        (answered(leader).error, answered(follower).error),
        (NONE, NONE)
    );
    c.take_effects();

    let t1 = t0 + ms(4000);
    let newcomer = answered(c.join(dynamic_join(""), t1, 4000)).member_id;
    let newcomer_join = c.join(dynamic_join(&newcomer), t1, 4000);
    let leaving = Leaving {
        member_id: newcomer,
        group_instance_id: None,
    };
    assert_eq!(c.leave("g", &[leaving], t1, 4000), (NONE, vec![NONE]));
    assert_eq!(answered(newcomer_join).error, UNKNOWN_MEMBER_ID);
    let deadline = t1 + ms(5000);
    assert_eq!(join_timers(c), vec![deadline]);
    c.fire(Timer::Join { group: "g".into() }, deadline, 9000);
    (static_id, dynamic_id, deadline)
}

/// Kafka does not empty a group whose only members left are static ones that did not rejoin:
/// the join phase waits another rebalance timeout, at the same generation and with their
/// sessions unchanged, until their sessions remove them.
#[test]
fn a_join_phase_nobody_rejoined_waits_for_the_static_members_sessions() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut c = loaded(t0);
    let (static_id, dynamic_id, deadline) = rebalance_nobody_rejoins(&mut c, t0);
    assert_eq!(
        described_ids(&c),
        ("PreparingRebalance", vec![static_id.clone()])
    );
    assert_eq!(join_timers(&mut c), vec![deadline + ms(5000)]);
    assert_eq!(
        c.heartbeat("g", &dynamic_id, None, 1, deadline),
        UNKNOWN_MEMBER_ID
    );
    c.fire(
        Timer::Join { group: "g".into() },
        deadline + ms(5000),
        14_000,
    );
    assert_eq!(described_ids(&c).0, "PreparingRebalance");
    assert_eq!(join_timers(&mut c), vec![deadline + ms(10_000)]);
    // Its session of generation 1 (30 s from that join phase's end) ends: the group is
    // empty, at generation 2.
    let session_end = t0 + ms(3000) + ms(30_000);
    let session = Timer::Session {
        group: "g".into(),
        member: static_id.clone(),
    };
    c.fire(session, session_end, 33_000);
    assert_eq!(described_ids(&c), ("Empty", Vec::new()));
    assert_eq!(
        c.heartbeat("g", &static_id, Some("i1"), 2, session_end),
        UNKNOWN_MEMBER_ID
    );
    // The empty group's record is written.
    assert_eq!(writes_queued(&mut c), 1);
    // Coming back, the member starts generation 3 after the initial delay.
    let rejoin = c.join(static_join("i1", ""), session_end, 33_000);
    let delay_end = session_end + ms(3000);
    c.fire(Timer::Join { group: "g".into() }, delay_end, 36_000);
    assert_eq!(answered(rejoin).generation, 3);
}

/// A static member that comes back while the join phase waits for it completes it at once.
#[test]
fn a_static_member_rejoining_the_waiting_join_phase_completes_it() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut c = loaded(t0);
    let (static_id, _, deadline) = rebalance_nobody_rejoins(&mut c, t0);
    let rejoin = c.join(static_join("i1", &static_id), deadline + ms(1000), 10_000);
    let back = answered(rejoin);
    assert_eq!((back.error, back.generation), (NONE, 2));
    assert_eq!(back.leader, static_id);
    assert_eq!(back.members, vec![joined(&static_id, "i1")]);
    assert_eq!(described_ids(&c), ("CompletingRebalance", vec![static_id]));
}

/// The PendingSync timers queued since the last call, as (generation, instant).
fn pending_sync_timers(c: &mut Coordinator) -> Vec<(i32, Instant)> {
    timers(c, |t| match t {
        Timer::PendingSync { generation, .. } => Some(generation),
        _ => None,
    })
}

fn pending_sync(generation: i32) -> Timer {
    Timer::PendingSync {
        group: "g".into(),
        generation,
    }
}

/// Ends the join phase two members joined at `t0` after the initial delay: generation 1, led
/// by the first, whose members must sync within the 5 s rebalance timeout (Kafka's
/// `schedulePendingSync`). Returns the leader's and the follower's ids.
fn first_generation_of_two(
    c: &mut Coordinator,
    t0: Instant,
    joins: [oneshot::Receiver<JoinResult>; 2],
) -> (String, String) {
    c.take_effects();
    let done = t0 + Duration::from_millis(3000);
    c.fire(Timer::Join { group: "g".into() }, done, 3000);
    let [leader, follower] = joins.map(answered);
    assert_eq!((leader.generation, follower.generation), (1, 1));
    assert_eq!(leader.leader, leader.member_id);
    assert_eq!(
        pending_sync_timers(c),
        vec![(1, done + Duration::from_millis(5000))]
    );
    (leader.member_id, follower.member_id)
}

/// Two dynamic members (5 s rebalance timeout, 10 s session) join at `t0`: generation 1.
fn two_dynamic_members(c: &mut Coordinator, t0: Instant) -> (String, String) {
    let first = answered(c.join(dynamic_join(""), t0, 0)).member_id;
    let second = answered(c.join(dynamic_join(""), t0, 0)).member_id;
    let joins = [
        c.join(dynamic_join(&first), t0, 0),
        c.join(dynamic_join(&second), t0, 0),
    ];
    first_generation_of_two(c, t0, joins)
}

/// Kafka's `expirePendingSync`: a member of the new generation that has not sent SyncGroup one
/// rebalance timeout after the join phase completed is removed, though it heartbeats (answered
/// NONE meanwhile), and the group rebalances at the same generation; the member that synced
/// is told REBALANCE_IN_PROGRESS and its rejoin makes generation 2 of one member. A timer of an
/// earlier generation, or one whose members all synced, changes nothing.
#[test]
fn a_member_that_does_not_sync_within_the_rebalance_timeout_is_removed() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut c = loaded(t0);
    let (leader, follower) = two_dynamic_members(&mut c, t0);
    let leader_sync = c.sync(
        sync_request(1, &leader, None, &[(&leader, b"a1"), (&follower, b"a2")]),
        t0 + ms(3000),
        3000,
    );
    assert_eq!(answered(leader_sync).error, NONE);
    assert_eq!(c.heartbeat("g", &follower, None, 1, t0 + ms(4000)), NONE);
    // Not before its deadline.
    c.fire(pending_sync(1), t0 + ms(7999), 7999);
    assert_eq!(described_ids(&c).0, "Stable");
    assert_eq!(described_ids(&c).1.len(), 2);

    let deadline = t0 + ms(8000);
    c.take_effects();
    c.fire(pending_sync(1), deadline, 8000);
    assert_eq!(
        described_ids(&c),
        ("PreparingRebalance", vec![leader.clone()])
    );
    assert_eq!(join_timers(&mut c), vec![deadline + ms(5000)]);
    assert_eq!(
        c.heartbeat("g", &leader, None, 1, deadline),
        REBALANCE_IN_PROGRESS
    );
    assert_eq!(
        c.heartbeat("g", &follower, None, 1, deadline),
        UNKNOWN_MEMBER_ID
    );
    let late_sync = c.sync(sync_request(1, &follower, None, &[]), deadline, 8000);
    assert_eq!(answered(late_sync).error, UNKNOWN_MEMBER_ID);

    let rejoined_at = deadline + ms(500);
    let rejoin = answered(c.join(dynamic_join(&leader), rejoined_at, 8500));
    assert_eq!((rejoin.error, rejoin.generation), (NONE, 2));
    assert_eq!(rejoin.leader, leader);
    assert_eq!(rejoin.members.len(), 1);
    assert_eq!(
        pending_sync_timers(&mut c),
        vec![(2, rejoined_at + ms(5000))]
    );
    // The timer of generation 1 again: nothing.
    c.fire(pending_sync(1), rejoined_at + ms(5000), 13_500);
    assert_eq!(
        described_ids(&c),
        ("CompletingRebalance", vec![leader.clone()])
    );
    let sync = c.sync(
        sync_request(2, &leader, None, &[(&leader, b"b1")]),
        rejoined_at,
        8500,
    );
    assert_eq!(answered(sync).assignment, Bytes::from_static(b"b1"));
    c.take_effects();
    // Everyone synced: the timer of generation 2 finds nothing to do.
    c.fire(pending_sync(2), rejoined_at + ms(5000), 13_500);
    assert_eq!(described_ids(&c), ("Stable", vec![leader.clone()]));
    assert!(c.take_effects().is_empty());
    assert_eq!(c.heartbeat("g", &leader, None, 2, rejoined_at), NONE);
}

/// A leader that never sends its assignments is removed at the deadline: the follower parked
/// in SyncGroup is told REBALANCE_IN_PROGRESS and leads generation 2.
#[test]
fn a_leader_that_does_not_sync_is_removed_and_its_follower_rejoins() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut c = loaded(t0);
    let (leader, follower) = two_dynamic_members(&mut c, t0);
    let mut follower_sync = c.sync(sync_request(1, &follower, None, &[]), t0 + ms(3000), 3000);
    pending(&mut follower_sync);
    c.fire(pending_sync(1), t0 + ms(8000), 8000);
    assert_eq!(answered(follower_sync).error, REBALANCE_IN_PROGRESS);
    assert_eq!(
        described_ids(&c),
        ("PreparingRebalance", vec![follower.clone()])
    );
    assert_eq!(
        c.heartbeat("g", &leader, None, 1, t0 + ms(8000)),
        UNKNOWN_MEMBER_ID
    );
    let rejoin = answered(c.join(dynamic_join(&follower), t0 + ms(8000), 8000));
    assert_eq!((rejoin.generation, rejoin.leader), (2, follower));
}

/// When no member has synced, every one is removed and the group is Empty at generation 2,
/// its record written.
#[test]
fn a_group_whose_members_never_sync_is_emptied() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut c = loaded(t0);
    let (leader, follower) = two_dynamic_members(&mut c, t0);
    c.fire(pending_sync(1), t0 + ms(8000), 8000);
    assert_eq!(described_ids(&c), ("Empty", Vec::new()));
    assert_eq!(writes_queued(&mut c), 1);
    for member in [leader, follower] {
        assert_eq!(
            c.heartbeat("g", &member, None, 2, t0 + ms(8000)),
            UNKNOWN_MEMBER_ID
        );
    }
}

/// Two static members `i1` (the leader) and `i2` at generation 1; the leader has synced.
/// Returns their ids.
fn two_static_members_leader_synced(c: &mut Coordinator, t0: Instant) -> (String, String) {
    let joins = [
        c.join(static_join("i1", ""), t0, 0),
        c.join(static_join("i2", ""), t0, 0),
    ];
    let (i1, i2) = first_generation_of_two(c, t0, joins);
    let leader_sync = c.sync(
        sync_request(1, &i1, Some("i1"), &[(&i1, b"a1"), (&i2, b"a2")]),
        t0 + Duration::from_millis(3000),
        3000,
    );
    assert_eq!(answered(leader_sync).error, NONE);
    (i1, i2)
}

/// A static member that does not sync is removed with its instance id: its heartbeat under
/// that id answers UNKNOWN_MEMBER_ID.
#[test]
fn a_static_member_that_does_not_sync_is_removed_with_its_instance() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut c = loaded(t0);
    let (i1, i2) = two_static_members_leader_synced(&mut c, t0);
    c.fire(pending_sync(1), t0 + ms(8000), 8000);
    assert_eq!(described_ids(&c), ("PreparingRebalance", vec![i1.clone()]));
    assert_eq!(
        c.heartbeat("g", &i2, Some("i2"), 1, t0 + ms(8000)),
        UNKNOWN_MEMBER_ID
    );
    assert_eq!(
        c.heartbeat("g", &i1, Some("i1"), 1, t0 + ms(8000)),
        REBALANCE_IN_PROGRESS
    );
}

/// As in Kafka, a static member that restarts under a new member id before syncing leaves its
/// old id pending: though it syncs under the new one, the deadline starts a rebalance in which
/// both members stay.
#[test]
fn a_static_member_replaced_before_syncing_still_rebalances_the_group() {
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut c = loaded(t0);
    let (i1, i2) = two_static_members_leader_synced(&mut c, t0);
    let back = answered(c.join(static_join("i2", ""), t0 + ms(4000), 4000));
    assert_eq!((back.error, back.generation), (NONE, 1));
    assert_ne!(back.member_id, i2);
    let back_sync = c.sync(
        sync_request(1, &back.member_id, Some("i2"), &[]),
        t0 + ms(4000),
        4000,
    );
    assert_eq!(answered(back_sync).assignment, Bytes::from_static(b"a2"));
    c.fire(pending_sync(1), t0 + ms(8000), 8000);
    assert_eq!(
        described_ids(&c),
        ("PreparingRebalance", vec![i1, back.member_id.clone()])
    );
    assert_eq!(
        c.heartbeat("g", &back.member_id, Some("i2"), 1, t0 + ms(8000)),
        REBALANCE_IN_PROGRESS
    );
}
