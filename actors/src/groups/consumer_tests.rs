//! The KIP-848 consumer protocol's decisions with exact epochs and assignments: no actor,
//! runtime or log.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use uuid::Uuid;

use super::assignor::Assignment;
use super::codes::*;
use super::records::{self, CoordinatorRecord};
use super::state::*;
use super::GroupSettings;

/// Topics by name → (id, partitions), standing for the metadata image.
#[derive(Default)]
struct Topics(BTreeMap<String, (Uuid, i32)>);

impl Topics {
    fn with(mut self, name: &str, id: u128, partitions: i32) -> Self {
        self.0
            .insert(name.to_owned(), (Uuid::from_u128(id), partitions));
        self
    }
}

impl TopicLookup for Topics {
    fn by_name(&self, name: &str) -> Option<(Uuid, i32)> {
        self.0.get(name).copied()
    }
    fn names(&self) -> Vec<String> {
        self.0.keys().cloned().collect()
    }
}

const T: u128 = 7;

fn t() -> Uuid {
    Uuid::from_u128(T)
}

fn parts(ps: &[i32]) -> Assignment {
    if ps.is_empty() {
        return Assignment::new();
    }
    Assignment::from([(t(), ps.iter().copied().collect::<BTreeSet<i32>>())])
}

fn owned(ps: &[i32]) -> Option<Vec<(Uuid, Vec<i32>)>> {
    Some(if ps.is_empty() {
        Vec::new()
    } else {
        vec![(t(), ps.to_vec())]
    })
}

const TIMEOUTS: ConsumerConfigs = ConsumerConfigs {
    session_timeout_ms: 45_000,
    heartbeat_interval_ms: 5000,
    max_write_bytes: crate::groups::DEFAULT_MAX_WRITE_BYTES,
};

fn loaded(now: Instant) -> Coordinator {
    let mut c = Coordinator::new(GroupSettings {
        offsets_topic_partitions: 1,
        ..GroupSettings::default()
    });
    assert_eq!(c.lead(&HashSet::from([0])), vec![0]);
    c.loaded(0, Vec::new(), now, 0);
    c
}

fn join(member: &str) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        version: 1,
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: 0,
        rebalance_timeout_ms: 60_000,
        subscribed_topic_names: Some(crate::groups::topic_names::TopicNames::from_names(["t"])),
        owned: owned(&[]),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        ..ConsumerHeartbeat::default()
    }
}

fn beat(member: &str, epoch: i32, owns: Option<&[i32]>) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        version: 1,
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        owned: owns.and_then(owned),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        ..ConsumerHeartbeat::default()
    }
}

/// Every record written so far, decoded, in order.
fn written(c: &mut Coordinator, log: &mut Vec<CoordinatorRecord>) {
    for effect in c.take_effects() {
        if let Effect::Write(write) = effect {
            for (key, value) in write.records {
                log.push(records::decode(&key, value.as_deref()).unwrap());
            }
        }
    }
}

fn ok(result: &ConsumerHeartbeatResult) -> (i32, Option<Assignment>) {
    assert_eq!(result.error, NONE, "{:?}", result.message);
    (result.member_epoch, result.assignment.clone())
}

#[test]
fn a_partition_moves_only_after_its_owner_revoked_it() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let topics = Topics::default().with("t", T, 4);
    // A joins alone: group epoch 1, everything.
    let a = c.consumer_heartbeat(join("A"), TIMEOUTS, &topics, t0, 0);
    assert_eq!(ok(&a), (1, Some(parts(&[0, 1, 2, 3]))));
    assert_eq!(a.heartbeat_interval_ms, 5000);
    // B joins: epoch 2, target A {0,1} B {2,3}; A still owns 2 and 3, so B waits with nothing.
    let b = c.consumer_heartbeat(join("B"), TIMEOUTS, &topics, t0, 0);
    assert_eq!(ok(&b), (2, Some(parts(&[]))));
    let d = c.consumer_describe("g");
    assert_eq!(
        (d.state, d.group_epoch, d.assignment_epoch),
        ("Reconciling", 2, 2)
    );
    // A is told to keep {0,1}, at its old epoch, while it revokes {2,3}.
    let a = c.consumer_heartbeat(beat("A", 1, Some(&[0, 1, 2, 3])), TIMEOUTS, &topics, t0, 0);
    assert_eq!(ok(&a), (1, Some(parts(&[0, 1]))));
    // B: still nothing to take.
    let b = c.consumer_heartbeat(beat("B", 2, None), TIMEOUTS, &topics, t0, 0);
    assert_eq!(ok(&b), (2, None));
    // A reports {0,1}: revocation done, epoch 2.
    let a = c.consumer_heartbeat(beat("A", 1, Some(&[0, 1])), TIMEOUTS, &topics, t0, 0);
    assert_eq!(ok(&a), (2, None));
    // B now gets {2,3}.
    let b = c.consumer_heartbeat(beat("B", 2, Some(&[])), TIMEOUTS, &topics, t0, 0);
    assert_eq!(ok(&b), (2, Some(parts(&[2, 3]))));
    let d = c.consumer_describe("g");
    assert_eq!(
        (d.state, d.group_epoch, d.assignment_epoch),
        ("Stable", 2, 2)
    );
    assert_eq!(d.assignor, "uniform");
    let members: Vec<(String, i32, Assignment)> = d
        .members
        .into_iter()
        .map(|m| (m.member_id, m.member_epoch, m.assignment))
        .collect();
    assert_eq!(
        members,
        vec![
            ("A".into(), 2, parts(&[0, 1])),
            ("B".into(), 2, parts(&[2, 3]))
        ]
    );
}

#[test]
fn epochs_and_bad_requests_get_kafkas_codes() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let topics = Topics::default().with("t", T, 2);
    let code = |c: &mut Coordinator, r: ConsumerHeartbeat| {
        c.consumer_heartbeat(r, TIMEOUTS, &topics, t0, 0).error
    };
    // No group yet: a member that is not joining.
    assert_eq!(code(&mut c, beat("A", 1, None)), GROUP_ID_NOT_FOUND);
    assert_eq!(code(&mut c, join("A")), NONE);
    assert_eq!(code(&mut c, beat("X", 1, None)), UNKNOWN_MEMBER_ID);
    // Ahead of the coordinator, or behind it without being the previous epoch.
    assert_eq!(code(&mut c, beat("A", 2, None)), FENCED_MEMBER_EPOCH);
    // B joins (epoch 2); A revokes partition 1 and reaches epoch 2.
    assert_eq!(code(&mut c, join("B")), NONE);
    assert_eq!(code(&mut c, beat("A", 1, Some(&[0, 1]))), NONE);
    assert_eq!(code(&mut c, beat("A", 1, Some(&[0]))), NONE);
    // The previous epoch with owned partitions within the assignment: a lost response.
    assert_eq!(code(&mut c, beat("A", 1, Some(&[0]))), NONE);
    assert_eq!(
        code(&mut c, beat("A", 1, Some(&[0, 1]))),
        FENCED_MEMBER_EPOCH
    );
    assert_eq!(code(&mut c, beat("A", 1, None)), FENCED_MEMBER_EPOCH);
    let mut bad = join("C");
    bad.group_id = String::new();
    assert_eq!(code(&mut c, bad), INVALID_REQUEST);
    let mut bad = join("C");
    bad.rebalance_timeout_ms = -1;
    assert_eq!(code(&mut c, bad), INVALID_REQUEST);
    let mut bad = join("C");
    bad.owned = None;
    assert_eq!(code(&mut c, bad), INVALID_REQUEST);
    let mut bad = join("C");
    bad.subscribed_topic_names = None;
    let refused = c.consumer_heartbeat(bad, TIMEOUTS, &topics, t0, 0);
    assert_eq!(
        (refused.error, refused.message.as_deref()),
        (
            INVALID_REQUEST,
            Some("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        )
    );
    // An empty regex is a subscription to nothing (KAFKA-18095), as an empty list of names.
    let mut nothing = join("E");
    nothing.subscribed_topic_names = None;
    nothing.subscribed_topic_regex = Some(String::new());
    assert_eq!(code(&mut c, nothing), NONE);
    assert_eq!(code(&mut c, beat("E", -1, None)), NONE);
    let mut bad = join("");
    bad.version = 1;
    assert_eq!(code(&mut c, bad), INVALID_REQUEST);
    let mut bad = beat("A", -3, None);
    bad.member_epoch = -3;
    assert_eq!(code(&mut c, bad), INVALID_REQUEST);
    assert_eq!(code(&mut c, beat("A", -2, None)), INVALID_REQUEST);
    let mut bad = join("C");
    bad.server_assignor = Some("sticky".into());
    assert_eq!(code(&mut c, bad), UNSUPPORTED_ASSIGNOR);
    let mut bad = join("C");
    bad.subscribed_topic_regex = Some("(".into());
    assert_eq!(code(&mut c, bad), INVALID_REGULAR_EXPRESSION);
    // A classic member of another protocol type cannot join a consumer group.
    let mut classic = c.join(
        JoinRequest {
            version: 5,
            group_id: "g".into(),
            member_id: String::new(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "h".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 10_000,
            protocol_type: "connect".into(),
            protocols: crate::groups::protocols::Protocols::from_pairs([("range", &b""[..])]),
        },
        t0,
        0,
    );
    assert_eq!(
        classic.try_recv().unwrap().error,
        INCONSISTENT_GROUP_PROTOCOL
    );
}

#[test]
fn leaving_and_expiring_members_give_their_partitions_away() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let topics = Topics::default().with("t", T, 2);
    ok(&c.consumer_heartbeat(join("A"), TIMEOUTS, &topics, t0, 0));
    ok(&c.consumer_heartbeat(join("B"), TIMEOUTS, &topics, t0, 0));
    ok(&c.consumer_heartbeat(beat("A", 1, Some(&[0, 1])), TIMEOUTS, &topics, t0, 0));
    ok(&c.consumer_heartbeat(beat("A", 1, Some(&[0])), TIMEOUTS, &topics, t0, 0));
    let b = c.consumer_heartbeat(beat("B", 2, Some(&[])), TIMEOUTS, &topics, t0, 0);
    assert_eq!(ok(&b), (2, Some(parts(&[1]))));
    // B leaves: epoch −1 answered, group epoch 3, A takes partition 1 at once.
    let left = c.consumer_heartbeat(beat("B", -1, None), TIMEOUTS, &topics, t0, 0);
    assert_eq!(ok(&left), (-1, None));
    let a = c.consumer_heartbeat(beat("A", 2, Some(&[0])), TIMEOUTS, &topics, t0, 0);
    assert_eq!(ok(&a), (3, Some(parts(&[0, 1]))));
    // C joins, then A stops heartbeating: its session ends and C gets everything.
    let t1 = t0 + Duration::from_secs(10);
    ok(&c.consumer_heartbeat(join("C"), TIMEOUTS, &topics, t1, 0));
    c.fire(
        Timer::ConsumerSession {
            group: "g".into(),
            member: "A".into(),
        },
        t0 + Duration::from_millis(44_999),
        0,
    );
    assert_eq!(c.consumer_describe("g").members.len(), 2);
    c.fire(
        Timer::ConsumerSession {
            group: "g".into(),
            member: "A".into(),
        },
        t0 + Duration::from_millis(45_000),
        0,
    );
    let d = c.consumer_describe("g");
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.group_epoch, 5);
    let c_beat = c.consumer_heartbeat(beat("C", 4, Some(&[])), TIMEOUTS, &topics, t1, 0);
    assert_eq!(ok(&c_beat), (5, Some(parts(&[0, 1]))));
    // The last member leaves: the group is Empty, and listed as a consumer group.
    ok(&c.consumer_heartbeat(beat("C", -1, None), TIMEOUTS, &topics, t1, 0));
    let listed = c.list(&[], &["Consumer".into()]);
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (
            listed[0].state,
            listed[0].group_type,
            listed[0].protocol_type.as_str()
        ),
        ("Empty", "consumer", "consumer")
    );
    assert!(c.list(&[], &["classic".into()]).is_empty());
}

#[test]
fn a_member_that_never_revokes_is_fenced_after_its_rebalance_timeout() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let topics = Topics::default().with("t", T, 2);
    ok(&c.consumer_heartbeat(join("A"), TIMEOUTS, &topics, t0, 0));
    ok(&c.consumer_heartbeat(join("B"), TIMEOUTS, &topics, t0, 0));
    ok(&c.consumer_heartbeat(beat("A", 1, Some(&[0, 1])), TIMEOUTS, &topics, t0, 0));
    let revocation = Timer::ConsumerRevocation {
        group: "g".into(),
        member: "A".into(),
        epoch: 1,
    };
    c.fire(revocation.clone(), t0 + Duration::from_millis(59_999), 0);
    assert_eq!(c.consumer_describe("g").members.len(), 2);
    c.fire(revocation, t0 + Duration::from_millis(60_000), 0);
    let d = c.consumer_describe("g");
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].member_id, "B");
}

#[test]
fn static_members_keep_their_partitions_across_a_restart() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let topics = Topics::default().with("t", T, 2);
    let mut a = join("A");
    a.instance_id = Some("i1".into());
    assert_eq!(
        ok(&c.consumer_heartbeat(a, TIMEOUTS, &topics, t0, 0)),
        (1, Some(parts(&[0, 1])))
    );
    // Another process with the same instance id while A is alive.
    let mut a2 = join("A2");
    a2.instance_id = Some("i1".into());
    assert_eq!(
        c.consumer_heartbeat(a2.clone(), TIMEOUTS, &topics, t0, 0)
            .error,
        UNRELEASED_INSTANCE_ID
    );
    // A leaves for now (−2); A2 takes its place, epoch and partitions with no new epoch.
    let mut leave = beat("A", -2, None);
    leave.instance_id = Some("i1".into());
    assert_eq!(
        ok(&c.consumer_heartbeat(leave, TIMEOUTS, &topics, t0, 0)),
        (-2, None)
    );
    assert_eq!(
        ok(&c.consumer_heartbeat(a2, TIMEOUTS, &topics, t0, 0)),
        (1, Some(parts(&[0, 1])))
    );
    let d = c.consumer_describe("g");
    assert_eq!(d.group_epoch, 1);
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].instance_id.as_deref(), Some("i1"));
    // The replaced process heartbeating again is fenced by its instance (fatal for the
    // client), not told it is unknown (which would make it rejoin); an instance nobody holds
    // is unknown.
    let mut stale = beat("A", 1, Some(&[0, 1]));
    stale.instance_id = Some("i1".into());
    let fenced = c.consumer_heartbeat(stale, TIMEOUTS, &topics, t0, 0);
    assert_eq!(
        (fenced.error, fenced.message.as_deref()),
        (
            FENCED_INSTANCE_ID,
            Some("Static member A with instance id i1 was fenced by member A2.")
        )
    );
    let mut stranger = beat("A2", 1, Some(&[0, 1]));
    stranger.instance_id = Some("i9".into());
    let unknown = c.consumer_heartbeat(stranger, TIMEOUTS, &topics, t0, 0);
    assert_eq!(
        (unknown.error, unknown.message.as_deref()),
        (UNKNOWN_MEMBER_ID, Some("Instance id i9 is unknown."))
    );
}

/// Kafka's `throwIfConsumerGroupIsFull` counts a static member that left for now, so a full
/// group refuses even the member that would replace it.
#[test]
fn a_full_group_refuses_every_new_member_id() {
    let t0 = Instant::now();
    let mut c = Coordinator::new(GroupSettings {
        offsets_topic_partitions: 1,
        consumer_max_size: 2,
        ..GroupSettings::default()
    });
    assert_eq!(c.lead(&HashSet::from([0])), vec![0]);
    c.loaded(0, Vec::new(), t0, 0);
    let topics = Topics::default().with("t", T, 2);
    let mut a = join("A");
    a.instance_id = Some("i1".into());
    assert_eq!(
        c.consumer_heartbeat(a, TIMEOUTS, &topics, t0, 0).error,
        NONE
    );
    assert_eq!(
        c.consumer_heartbeat(join("B"), TIMEOUTS, &topics, t0, 0)
            .error,
        NONE
    );
    let mut leave = beat("A", -2, None);
    leave.instance_id = Some("i1".into());
    assert_eq!(
        c.consumer_heartbeat(leave, TIMEOUTS, &topics, t0, 0).error,
        NONE
    );
    let mut a2 = join("A2");
    a2.instance_id = Some("i1".into());
    let full = c.consumer_heartbeat(a2, TIMEOUTS, &topics, t0, 0);
    assert_eq!(
        (full.error, full.message.as_deref()),
        (
            GROUP_MAX_SIZE_REACHED,
            Some("The consumer group has reached its maximum capacity of 2 members.")
        )
    );
    // A member already in the group still heartbeats.
    assert_eq!(
        c.consumer_heartbeat(beat("B", 2, None), TIMEOUTS, &topics, t0, 0)
            .error,
        NONE
    );
}

#[test]
fn new_partitions_and_the_range_assignor_rebalance_the_group() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let topics = Topics::default().with("t", T, 2);
    let mut a = join("A");
    a.server_assignor = Some("range".into());
    ok(&c.consumer_heartbeat(a, TIMEOUTS, &topics, t0, 0));
    let mut b = join("B");
    b.server_assignor = Some("range".into());
    ok(&c.consumer_heartbeat(b, TIMEOUTS, &topics, t0, 0));
    ok(&c.consumer_heartbeat(beat("A", 1, Some(&[0, 1])), TIMEOUTS, &topics, t0, 0));
    ok(&c.consumer_heartbeat(beat("A", 1, Some(&[0])), TIMEOUTS, &topics, t0, 0));
    ok(&c.consumer_heartbeat(beat("B", 2, Some(&[])), TIMEOUTS, &topics, t0, 0));
    assert_eq!(c.consumer_describe("g").assignor, "range");
    // The topic grows to 6 partitions: the next heartbeat bumps the group epoch; range gives
    // A 0-2 and B 3-5, and B's partition 1 moves to A once B has revoked it.
    let grown = Topics::default().with("t", T, 6);
    let a = c.consumer_heartbeat(beat("A", 2, Some(&[0])), TIMEOUTS, &grown, t0, 0);
    assert_eq!(ok(&a), (3, Some(parts(&[0, 2]))));
    let b = c.consumer_heartbeat(beat("B", 2, Some(&[1])), TIMEOUTS, &grown, t0, 0);
    assert_eq!(ok(&b), (2, Some(parts(&[]))));
    let b = c.consumer_heartbeat(beat("B", 2, Some(&[])), TIMEOUTS, &grown, t0, 0);
    assert_eq!(ok(&b), (3, Some(parts(&[3, 4, 5]))));
    let a = c.consumer_heartbeat(beat("A", 3, Some(&[0, 2])), TIMEOUTS, &grown, t0, 0);
    assert_eq!(ok(&a), (3, Some(parts(&[0, 1, 2]))));
    // The topic is deleted: everything is revoked.
    let gone = Topics::default();
    let a = c.consumer_heartbeat(beat("A", 3, Some(&[0, 1, 2])), TIMEOUTS, &gone, t0, 0);
    assert_eq!(ok(&a), (3, Some(parts(&[]))));
    let a = c.consumer_heartbeat(beat("A", 3, Some(&[])), TIMEOUTS, &gone, t0, 0);
    assert_eq!(ok(&a), (4, None));
}

#[test]
fn regex_subscriptions_match_whole_names() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let topics = Topics::default()
        .with("t", T, 1)
        .with("orders-eu", 8, 1)
        .with("xorders-eu", 9, 1);
    let mut a = join("A");
    a.subscribed_topic_names = None;
    a.subscribed_topic_regex = Some("orders-.*".into());
    let (_, assignment) = ok(&c.consumer_heartbeat(a, TIMEOUTS, &topics, t0, 0));
    let topics_got: Vec<Uuid> = assignment.unwrap().into_keys().collect();
    assert_eq!(topics_got, vec![Uuid::from_u128(8)]);
}

#[test]
fn a_regex_resolves_to_the_topics_its_members_principal_may_describe() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let mut log = Vec::new();
    let (open, secret, new) = (Uuid::from_u128(8), Uuid::from_u128(9), Uuid::from_u128(10));
    let topics = Topics::default()
        .with("orders-open", 8, 2)
        .with("orders-secret", 9, 2);
    let alice = DescribableTopics::only(|topic| topic != "orders-secret");
    let everything = DescribableTopics::default();
    let with_regex =
        |heartbeat: ConsumerHeartbeat, describable: &DescribableTopics| ConsumerHeartbeat {
            subscribed_topic_names: None,
            subscribed_topic_regex: Some("orders-.*".into()),
            describable: describable.clone(),
            ..heartbeat
        };
    let topics_of = |result: &ConsumerHeartbeatResult| -> BTreeSet<Uuid> {
        ok(result).1.unwrap().into_keys().collect()
    };
    let targets = |c: &Coordinator| -> BTreeMap<String, BTreeSet<Uuid>> {
        c.consumer_describe("g")
            .members
            .into_iter()
            .map(|m| (m.member_id, m.target_assignment.into_keys().collect()))
            .collect()
    };

    // Alice may not describe orders-secret: her regex does not get it.
    let a = c.consumer_heartbeat(with_regex(join("A"), &alice), TIMEOUTS, &topics, t0, 0);
    assert_eq!(topics_of(&a), BTreeSet::from([open]));
    // An ACL granted applies at her next heartbeat, one removed too (the member revokes it).
    let a = c.consumer_heartbeat(
        with_regex(beat("A", 1, Some(&[])), &everything),
        TIMEOUTS,
        &topics,
        t0,
        0,
    );
    assert_eq!(topics_of(&a), BTreeSet::from([open, secret]));
    let a = c.consumer_heartbeat(
        with_regex(beat("A", 2, None), &alice),
        TIMEOUTS,
        &topics,
        t0,
        0,
    );
    assert_eq!(topics_of(&a), BTreeSet::from([open]));
    assert_eq!(targets(&c)["A"], BTreeSet::from([open]));

    // Another member's heartbeat resolves A's regex within what A's principal may describe.
    ok(&c.consumer_heartbeat(with_regex(join("B"), &everything), TIMEOUTS, &topics, t0, 0));
    let after_b = targets(&c);
    assert_eq!(after_b["A"], BTreeSet::from([open]), "{after_b:?}");
    assert!(after_b["B"].contains(&secret), "{after_b:?}");

    // Reloaded, A's regex keeps to its target's topics until A heartbeats: B's heartbeat
    // finding a new matching topic rebalances without giving A anything new.
    written(&mut c, &mut log);
    let mut reloaded = fresh();
    reloaded.loaded(0, log, t0, 0);
    let grown = Topics::default()
        .with("orders-open", 8, 2)
        .with("orders-secret", 9, 2)
        .with("orders-new", 10, 2);
    let b_epoch = reloaded.consumer_describe("g").members[1].member_epoch;
    ok(&reloaded.consumer_heartbeat(
        with_regex(beat("B", b_epoch, None), &everything),
        TIMEOUTS,
        &grown,
        t0,
        0,
    ));
    let reloaded_targets = targets(&reloaded);
    assert_eq!(reloaded_targets["A"], after_b["A"], "{reloaded_targets:?}");
    assert!(reloaded_targets["B"].contains(&new), "{reloaded_targets:?}");
    assert!(reloaded.consumer_describe("g").group_epoch > c.consumer_describe("g").group_epoch);
}

#[test]
fn commits_and_fetches_check_the_member_epoch() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let topics = Topics::default().with("t", T, 1);
    ok(&c.consumer_heartbeat(join("A"), TIMEOUTS, &topics, t0, 0));
    let commit = |c: &mut Coordinator, member: &str, epoch: i32, version: i16| {
        let (done, _written) = oneshot::channel();
        c.commit(
            CommitRequest {
                version,
                group_id: "g".into(),
                generation: epoch,
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
            t0,
            0,
        )[0]
    };
    assert_eq!(commit(&mut c, "A", 0, 9), STALE_MEMBER_EPOCH);
    assert_eq!(commit(&mut c, "B", 1, 9), UNKNOWN_MEMBER_ID);
    assert_eq!(commit(&mut c, "A", 1, 8), UNSUPPORTED_VERSION);
    // An admin commit while the group has members.
    assert_eq!(commit(&mut c, "", -1, 9), UNKNOWN_MEMBER_ID);
    assert_eq!(commit(&mut c, "A", 1, 9), NONE);
    super::tests::replicate_offsets(&mut c);
    assert_eq!(
        c.fetch_offsets("g", Some(("A", 0)), None),
        Err(STALE_MEMBER_EPOCH)
    );
    let fetched = c.fetch_offsets("g", Some(("A", 1)), None).unwrap();
    assert_eq!(fetched[0].2.as_ref().map(|c| c.offset), Some(5));
    // The committed topic is subscribed: its offsets cannot be deleted.
    assert_eq!(
        c.delete_offsets("g", &[("t".into(), 0)]),
        Ok(vec![GROUP_SUBSCRIBED_TO_TOPIC])
    );
    assert_eq!(c.delete_group("g"), NON_EMPTY_GROUP);
}

#[test]
fn a_reload_restores_epochs_members_and_assignments() {
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let mut log = Vec::new();
    let topics = Topics::default().with("t", T, 4);
    ok(&c.consumer_heartbeat(join("A"), TIMEOUTS, &topics, t0, 0));
    ok(&c.consumer_heartbeat(join("B"), TIMEOUTS, &topics, t0, 0));
    ok(&c.consumer_heartbeat(beat("A", 1, Some(&[0, 1, 2, 3])), TIMEOUTS, &topics, t0, 0));
    written(&mut c, &mut log);
    let before = c.consumer_describe("g");

    let mut reloaded = fresh();
    reloaded.loaded(0, log.clone(), t0, 0);
    assert_eq!(reloaded.consumer_describe("g"), before);
    // A, mid-revocation at epoch 1, carries on where it was.
    let a = reloaded.consumer_heartbeat(beat("A", 1, Some(&[0, 1])), TIMEOUTS, &topics, t0, 0);
    assert_eq!(ok(&a), (2, None));
    let b = reloaded.consumer_heartbeat(beat("B", 2, Some(&[])), TIMEOUTS, &topics, t0, 0);
    assert_eq!(ok(&b), (2, Some(parts(&[2, 3]))));

    // Deleting the emptied group leaves nothing behind after another reload.
    ok(&reloaded.consumer_heartbeat(beat("A", -1, None), TIMEOUTS, &topics, t0, 0));
    ok(&reloaded.consumer_heartbeat(beat("B", -1, None), TIMEOUTS, &topics, t0, 0));
    assert_eq!(reloaded.delete_group("g"), NONE);
    written(&mut reloaded, &mut log);
    let mut again = fresh();
    again.loaded(0, log, t0, 0);
    assert_eq!(again.consumer_describe("g").error, GROUP_ID_NOT_FOUND);
}

fn fresh() -> Coordinator {
    let mut c = Coordinator::new(GroupSettings {
        offsets_topic_partitions: 1,
        ..GroupSettings::default()
    });
    c.lead(&HashSet::from([0]));
    c
}

#[test]
fn group_configs_are_kept_within_the_broker_bounds() {
    let settings = GroupSettings::default();
    assert_eq!(
        settings.consumer_configs(None, None),
        ConsumerConfigs {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5000,
            max_write_bytes: crate::groups::DEFAULT_MAX_WRITE_BYTES,
        }
    );
    assert_eq!(
        settings.consumer_configs(Some(50_000), Some(8000)),
        ConsumerConfigs {
            session_timeout_ms: 50_000,
            heartbeat_interval_ms: 8000,
            max_write_bytes: crate::groups::DEFAULT_MAX_WRITE_BYTES,
        }
    );
    // Outside the bounds (stored before the bounds changed): clamped.
    assert_eq!(
        settings.consumer_configs(Some(1000), Some(99_000)),
        ConsumerConfigs {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 15_000,
            max_write_bytes: crate::groups::DEFAULT_MAX_WRITE_BYTES,
        }
    );
    // The interval a heartbeat answers with, and the session it arms, are the group's now.
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let topics = Topics::default().with("t", T, 1);
    let timeouts = settings.consumer_configs(Some(50_000), Some(8000));
    let a = c.consumer_heartbeat(join("A"), timeouts, &topics, t0, 0);
    assert_eq!(a.heartbeat_interval_ms, 8000);
    let session = Timer::ConsumerSession {
        group: "g".into(),
        member: "A".into(),
    };
    c.fire(session.clone(), t0 + Duration::from_millis(49_999), 0);
    assert_eq!(c.consumer_describe("g").members.len(), 1);
    c.fire(session, t0 + Duration::from_millis(50_000), 0);
    assert!(c.consumer_describe("g").members.is_empty());
}

/// The instants of the session timers the coordinator asked for since the last call.
fn session_timers(c: &mut Coordinator) -> Vec<Instant> {
    c.take_effects()
        .into_iter()
        .filter_map(|effect| match effect {
            Effect::Timer {
                at,
                timer: Timer::ConsumerSession { .. },
            } => Some(at),
            _ => None,
        })
        .collect()
}

/// A shorter `consumer.session.timeout.ms` counts from the member's next heartbeat, as Kafka
/// reschedules the session timer on every heartbeat: the member is gone at its last heartbeat
/// plus the new timeout, not when the timer its longer session armed fires.
#[test]
fn a_shorter_session_timeout_takes_effect_at_the_next_heartbeat() {
    let configs = |session_timeout_ms| ConsumerConfigs {
        session_timeout_ms,
        ..TIMEOUTS
    };
    let at = |t0: Instant, ms| t0 + Duration::from_millis(ms);
    let session = Timer::ConsumerSession {
        group: "g".into(),
        member: "A".into(),
    };
    let topics = Topics::default().with("t", T, 1);

    // Join at t0 with 20000, shortened to 10000, a heartbeat at t0+2000, then silence.
    let t0 = Instant::now();
    let mut c = loaded(t0);
    ok(&c.consumer_heartbeat(join("A"), configs(20_000), &topics, t0, 0));
    assert_eq!(session_timers(&mut c), [at(t0, 20_000)]);
    let short = configs(10_000);
    ok(&c.consumer_heartbeat(beat("A", 1, Some(&[0])), short, &topics, at(t0, 2000), 0));
    assert_eq!(session_timers(&mut c), [at(t0, 12_000)]);
    c.fire(session.clone(), at(t0, 11_999), 0);
    assert_eq!(c.consumer_describe("g").members.len(), 1);
    c.fire(session.clone(), at(t0, 12_000), 0);
    assert!(c.consumer_describe("g").members.is_empty());
    c.fire(session.clone(), at(t0, 20_000), 0);
    assert!(session_timers(&mut c).is_empty());

    // Heartbeats that go on: one timer stays armed, and the one left behind does nothing.
    let mut c = loaded(t0);
    ok(&c.consumer_heartbeat(join("A"), configs(20_000), &topics, t0, 0));
    ok(&c.consumer_heartbeat(beat("A", 1, Some(&[0])), short, &topics, at(t0, 2000), 0));
    assert_eq!(session_timers(&mut c), [at(t0, 20_000), at(t0, 12_000)]);
    ok(&c.consumer_heartbeat(beat("A", 1, Some(&[0])), short, &topics, at(t0, 11_000), 0));
    assert!(session_timers(&mut c).is_empty());
    c.fire(session.clone(), at(t0, 12_000), 0);
    assert_eq!(session_timers(&mut c), [at(t0, 21_000)]);
    c.fire(session.clone(), at(t0, 20_000), 0);
    assert!(session_timers(&mut c).is_empty());
    assert_eq!(c.consumer_describe("g").members.len(), 1);
    c.fire(session, at(t0, 21_000), 0);
    assert!(c.consumer_describe("g").members.is_empty());
}

/// A subscription whose member record the offsets partition cannot take (its
/// `max.message.bytes`) is refused with UNKNOWN_SERVER_ERROR before anything changes, as
/// Kafka's coordinator fails the write; a smaller one is taken, each name once.
#[test]
fn a_subscription_too_large_to_write_is_refused_and_changes_nothing() {
    use crate::groups::topic_names::TopicNames;
    let t0 = Instant::now();
    let mut c = loaded(t0);
    let topics = Topics::default().with("t", T, 4);
    let limits = ConsumerConfigs {
        max_write_bytes: 400,
        ..TIMEOUTS
    };
    let names = |count: usize| TopicNames::from_names((0..count).map(|i| format!("n{i:03}")));
    let join_with = |count: usize| ConsumerHeartbeat {
        subscribed_topic_names: Some(names(count)),
        ..join("A")
    };
    // 60 names of four bytes: five bytes each on the wire, 300 bytes, over 400 with the rest.
    let refused = c.consumer_heartbeat(join_with(60), limits, &topics, t0, 0);
    assert_eq!(refused.error, UNKNOWN_SERVER_ERROR, "{:?}", refused.message);
    assert!(c.take_effects().is_empty(), "nothing written");
    assert_eq!(c.consumer_describe("g").error, GROUP_ID_NOT_FOUND);
    let taken = c.consumer_heartbeat(join_with(20), limits, &topics, t0, 0);
    ok(&taken);
    let described = c.consumer_describe("g");
    assert_eq!(described.members[0].subscribed_topic_names.len(), 20);
    // The member's own subscription stays when a larger one is refused.
    let larger = ConsumerHeartbeat {
        subscribed_topic_names: Some(names(60)),
        ..beat("A", taken.member_epoch, None)
    };
    let refused = c.consumer_heartbeat(larger, limits, &topics, t0, 0);
    assert_eq!(refused.error, UNKNOWN_SERVER_ERROR);
    assert_eq!(c.consumer_describe("g"), described);
}

#[test]
fn uvarint_lengths() {
    use crate::wire::{put_uvarint, uvarint_len};
    for value in [
        0,
        1,
        127,
        128,
        16_383,
        16_384,
        2_097_151,
        2_097_152,
        u32::MAX,
    ] {
        let mut out = Vec::new();
        put_uvarint(&mut out, value);
        assert_eq!(uvarint_len(value), out.len(), "{value}");
    }
}
