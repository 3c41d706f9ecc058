//! The server-side assignors of the KIP-848 consumer protocol: `uniform` (the default) and
//! `range`, named as `group.consumer.assignors` and the clients' `group.remote.assignor` name them.
//!
//! Both are pure functions of the members' subscriptions, the subscribed topics' partition
//! counts and (for `uniform`) the previous target assignment, so they are unit-tested with exact
//! results. They follow Kafka's rules, not its exact code: `uniform` is balanced (partition counts
//! differ by at most one between members that could take each other's partitions) and sticky
//! (a partition stays with its previous owner unless balance needs it moved); `range` gives each
//! member a contiguous range of every topic it subscribes to, the first members one more.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

/// Partitions per topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// The assignor names the broker knows, the default first (`group.consumer.assignors`).
pub const ASSIGNORS: [&str; 2] = ["uniform", "range"];

/// One member as an assignor sees it.
pub struct AssignorMember<'a> {
    pub id: &'a str,
    pub topics: BTreeSet<Uuid>,
    /// Its previous target assignment (stickiness).
    pub current: Option<&'a Assignment>,
}

/// Runs the named assignor (`None` for an unknown name).
pub fn assign(
    name: &str,
    members: &[AssignorMember<'_>],
    topics: &BTreeMap<Uuid, i32>,
) -> Option<BTreeMap<String, Assignment>> {
    match name {
        "uniform" => Some(uniform(members, topics)),
        "range" => Some(range(members, topics)),
        _ => None,
    }
}

/// Kafka's RangeAssignor rule per topic: the subscribed members in member-id order, each a
/// contiguous range of `partitions / members`, the first `partitions % members` one more.
pub fn range(
    members: &[AssignorMember<'_>],
    topics: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.id.to_owned(), Assignment::new()))
        .collect();
    for (&topic, &count) in topics {
        let mut subscribed: Vec<&str> = members
            .iter()
            .filter(|m| m.topics.contains(&topic))
            .map(|m| m.id)
            .collect();
        if subscribed.is_empty() || count <= 0 {
            continue;
        }
        subscribed.sort_unstable();
        let n = subscribed.len() as i32;
        let (quota, extra) = (count / n, count % n);
        let mut start = 0;
        for (i, member) in subscribed.iter().enumerate() {
            let len = quota + i32::from((i as i32) < extra);
            if len > 0 {
                if let Some(assignment) = out.get_mut(*member) {
                    assignment.insert(topic, (start..start + len).collect());
                }
            }
            start += len;
        }
    }
    out
}

/// The uniform assignor: previous owners keep what they may (up to their fair share when all
/// members subscribe to the same topics), the rest goes to the least loaded eligible member,
/// then partitions move from a member to an eligible one holding two or more fewer.
pub fn uniform(
    members: &[AssignorMember<'_>],
    topics: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut sorted: Vec<&AssignorMember<'_>> = members.iter().collect();
    sorted.sort_unstable_by(|a, b| a.id.cmp(b.id));
    let index: BTreeMap<&str, usize> = sorted.iter().enumerate().map(|(i, m)| (m.id, i)).collect();
    let valid = |m: &AssignorMember<'_>, topic: &Uuid, p: i32| {
        m.topics.contains(topic) && topics.get(topic).is_some_and(|&count| p >= 0 && p < count)
    };
    let homogeneous = sorted.windows(2).all(|w| w[0].topics == w[1].topics);
    let total: usize = if homogeneous {
        sorted.first().map_or(0, |m| {
            m.topics
                .iter()
                .filter_map(|t| topics.get(t))
                .map(|&c| c.max(0) as usize)
                .sum()
        })
    } else {
        0
    };
    // Owner of every assigned partition (member index), and each member's partitions.
    let mut owner: BTreeMap<(Uuid, i32), usize> = BTreeMap::new();
    let mut held: Vec<BTreeSet<(Uuid, i32)>> = vec![BTreeSet::new(); sorted.len()];
    // 1. Stickiness: keep previous partitions that are still valid.
    for (i, member) in sorted.iter().enumerate() {
        let Some(current) = member.current else {
            continue;
        };
        for (topic, partitions) in current {
            for &p in partitions {
                if valid(member, topic, p) && !owner.contains_key(&(*topic, p)) {
                    owner.insert((*topic, p), i);
                    held[i].insert((*topic, p));
                }
            }
        }
    }
    // 2. With one subscription for all, nobody keeps more than its fair share.
    if homogeneous && !sorted.is_empty() {
        let n = sorted.len();
        let (min_quota, mut extra) = (total / n, total % n);
        for partitions in held.iter_mut() {
            let quota = if partitions.len() > min_quota && extra > 0 {
                extra -= 1;
                min_quota + 1
            } else {
                min_quota
            };
            while partitions.len() > quota {
                if let Some(last) = partitions.pop_last() {
                    owner.remove(&last);
                }
            }
        }
    }
    // 3. Unowned partitions go to the least loaded eligible member (ties: member id).
    for (&topic, &count) in topics {
        for p in 0..count.max(0) {
            if owner.contains_key(&(topic, p)) {
                continue;
            }
            let best = sorted
                .iter()
                .enumerate()
                .filter(|(_, m)| m.topics.contains(&topic))
                .min_by_key(|(i, _)| (held[*i].len(), *i))
                .map(|(i, _)| i);
            if let Some(i) = best {
                owner.insert((topic, p), i);
                held[i].insert((topic, p));
            }
        }
    }
    // 4. Balance: move a partition to an eligible member holding two or more fewer.
    if !homogeneous {
        let limit = owner.len() + 1;
        for _ in 0..limit {
            let mut moved = false;
            let keys: Vec<((Uuid, i32), usize)> = owner.iter().map(|(k, v)| (*k, *v)).collect();
            for ((topic, p), from) in keys {
                let target = sorted
                    .iter()
                    .enumerate()
                    .filter(|(i, m)| *i != from && m.topics.contains(&topic))
                    .min_by_key(|(i, _)| (held[*i].len(), *i))
                    .map(|(i, _)| i);
                if let Some(to) = target {
                    if held[to].len() + 1 < held[from].len() {
                        held[from].remove(&(topic, p));
                        held[to].insert((topic, p));
                        owner.insert((topic, p), to);
                        moved = true;
                    }
                }
            }
            if !moved {
                break;
            }
        }
    }
    let mut out: BTreeMap<String, Assignment> = BTreeMap::new();
    for member in &sorted {
        let i = index[member.id];
        let mut assignment = Assignment::new();
        for (topic, p) in &held[i] {
            assignment.entry(*topic).or_default().insert(*p);
        }
        out.insert(member.id.to_owned(), assignment);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn member<'a>(
        name: &'a str,
        topics: &[Uuid],
        current: Option<&'a Assignment>,
    ) -> AssignorMember<'a> {
        AssignorMember {
            id: name,
            topics: topics.iter().copied().collect(),
            current,
        }
    }

    fn parts(entries: &[(Uuid, &[i32])]) -> Assignment {
        entries
            .iter()
            .map(|(t, ps)| (*t, ps.iter().copied().collect()))
            .collect()
    }

    fn count(a: &Assignment) -> usize {
        a.values().map(BTreeSet::len).sum()
    }

    #[test]
    fn range_gives_contiguous_ranges_first_members_one_more() {
        // Kafka's RangeAssignorTest: 2 members, topic1 with 3 partitions, topic2 with 3.
        let (t1, t2) = (id(1), id(2));
        let topics = BTreeMap::from([(t1, 3), (t2, 3)]);
        let members = [member("A", &[t1, t2], None), member("B", &[t1, t2], None)];
        let out = range(&members, &topics);
        assert_eq!(out["A"], parts(&[(t1, &[0, 1]), (t2, &[0, 1])]));
        assert_eq!(out["B"], parts(&[(t1, &[2]), (t2, &[2])]));
    }

    #[test]
    fn range_per_topic_only_among_its_subscribers() {
        let (t1, t2) = (id(1), id(2));
        let topics = BTreeMap::from([(t1, 3), (t2, 2)]);
        let members = [
            member("A", &[t1], None),
            member("B", &[t1, t2], None),
            member("C", &[t2], None),
        ];
        let out = range(&members, &topics);
        assert_eq!(out["A"], parts(&[(t1, &[0, 1])]));
        assert_eq!(out["B"], parts(&[(t1, &[2]), (t2, &[0])]));
        assert_eq!(out["C"], parts(&[(t2, &[1])]));
    }

    #[test]
    fn range_more_members_than_partitions_leaves_some_empty() {
        let t1 = id(1);
        let topics = BTreeMap::from([(t1, 2)]);
        let members = [
            member("A", &[t1], None),
            member("B", &[t1], None),
            member("C", &[t1], None),
        ];
        let out = range(&members, &topics);
        assert_eq!(out["A"], parts(&[(t1, &[0])]));
        assert_eq!(out["B"], parts(&[(t1, &[1])]));
        assert!(out["C"].is_empty());
    }

    #[test]
    fn uniform_first_assignment_is_balanced_in_id_order() {
        // Two members over topic1 (3 partitions) and topic3 (2 partitions): 5 partitions, so
        // one member gets 3 and the other 2, least loaded first.
        let (t1, t3) = (id(1), id(3));
        let topics = BTreeMap::from([(t1, 3), (t3, 2)]);
        let members = [member("A", &[t1, t3], None), member("B", &[t1, t3], None)];
        let out = uniform(&members, &topics);
        assert_eq!(out["A"], parts(&[(t1, &[0, 2]), (t3, &[1])]));
        assert_eq!(out["B"], parts(&[(t1, &[1]), (t3, &[0])]));
    }

    #[test]
    fn uniform_is_sticky_when_a_member_joins() {
        let t1 = id(1);
        let topics = BTreeMap::from([(t1, 6)]);
        let a = parts(&[(t1, &[0, 1, 2])]);
        let b = parts(&[(t1, &[3, 4, 5])]);
        let members = [
            member("A", &[t1], Some(&a)),
            member("B", &[t1], Some(&b)),
            member("C", &[t1], None),
        ];
        let out = uniform(&members, &topics);
        // Each previous owner keeps its first two; the released ones go to the newcomer.
        assert_eq!(out["A"], parts(&[(t1, &[0, 1])]));
        assert_eq!(out["B"], parts(&[(t1, &[3, 4])]));
        assert_eq!(out["C"], parts(&[(t1, &[2, 5])]));
    }

    #[test]
    fn uniform_moves_only_the_leavers_partitions() {
        let t1 = id(1);
        let topics = BTreeMap::from([(t1, 6)]);
        let a = parts(&[(t1, &[0, 1])]);
        let c = parts(&[(t1, &[2, 5])]);
        let members = [member("A", &[t1], Some(&a)), member("C", &[t1], Some(&c))];
        let out = uniform(&members, &topics);
        assert_eq!(out["A"], parts(&[(t1, &[0, 1, 3])]));
        assert_eq!(out["C"], parts(&[(t1, &[2, 4, 5])]));
    }

    #[test]
    fn uniform_drops_partitions_of_unsubscribed_or_deleted_topics() {
        let (t1, t2) = (id(1), id(2));
        // t2 was deleted: only t1 remains in the metadata.
        let topics = BTreeMap::from([(t1, 2)]);
        let a = parts(&[(t1, &[0]), (t2, &[0, 1])]);
        let members = [
            member("A", &[t1, t2], Some(&a)),
            member("B", &[t1, t2], None),
        ];
        let out = uniform(&members, &topics);
        assert_eq!(out["A"], parts(&[(t1, &[0])]));
        assert_eq!(out["B"], parts(&[(t1, &[1])]));
    }

    #[test]
    fn uniform_heterogeneous_balances_among_eligible_members() {
        // A subscribes to t1 only, B to t1 and t2: B takes all of t2, so A takes more of t1.
        let (t1, t2) = (id(1), id(2));
        let topics = BTreeMap::from([(t1, 4), (t2, 2)]);
        let members = [member("A", &[t1], None), member("B", &[t1, t2], None)];
        let out = uniform(&members, &topics);
        assert_eq!(count(&out["A"]), 3);
        assert_eq!(count(&out["B"]), 3);
        assert_eq!(out["B"].get(&t2), Some(&BTreeSet::from([0, 1])));
        assert!(!out["A"].contains_key(&t2));
    }

    #[test]
    fn uniform_spreads_1000_partitions_over_100_members() {
        let topic_ids: Vec<Uuid> = (1..=10).map(id).collect();
        let topics: BTreeMap<Uuid, i32> = topic_ids.iter().map(|t| (*t, 100)).collect();
        let names: Vec<String> = (0..100).map(|i| format!("m{i:03}")).collect();
        let members: Vec<AssignorMember<'_>> =
            names.iter().map(|n| member(n, &topic_ids, None)).collect();
        let out = uniform(&members, &topics);
        assert!(out.values().all(|a| count(a) == 10));
        let mut all = BTreeSet::new();
        for a in out.values() {
            for (t, ps) in a {
                for p in ps {
                    assert!(all.insert((*t, *p)), "a partition is assigned twice");
                }
            }
        }
        assert_eq!(all.len(), 1000);
    }

    #[test]
    fn unknown_assignor_is_none() {
        assert!(assign("sticky", &[], &BTreeMap::new()).is_none());
        assert!(assign("range", &[], &BTreeMap::new()).is_some());
    }
}
