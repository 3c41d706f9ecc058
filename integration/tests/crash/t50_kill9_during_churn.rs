//! Several tasks create and delete topics (each task only touches its own names, so each topic's
//! history is sequential); the node is killed with SIGKILL at a random moment and restarted on
//! the same data directory. Then:
//! * every acknowledged create is present (same id, same partition count) unless an acknowledged
//!   delete followed it;
//! * every acknowledged delete is absent;
//! * an unanswered request may or may not have taken effect, but the topic is then either
//!   absent or exactly as requested;
//! * no topic exists that nobody asked for;
//! * a second kill -9 / restart with no traffic shows the identical topic set (the image is a
//!   function of the durable log).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gregor_integration::admin::{
    creatable, create_topics, delete_topics_by_name, metadata, topics_of, TopicInfo,
};
use gregor_integration::{GregorNode, KafkaConn};
use kafka_protocol::messages::{CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest};
use rand::{Rng, SeedableRng};
use uuid::Uuid;

const TASKS: usize = 4;
const TEST_BUDGET: Duration = Duration::from_secs(240);

/// What a topic may look like after the restart.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Absent,
    /// Present with this many partitions and, if the create was answered, this id.
    Present {
        partitions: usize,
        id: Option<Uuid>,
    },
}

#[derive(Debug, Clone)]
enum Outcome {
    Unanswered,
    Answered { error_code: i16, id: Uuid },
}

#[derive(Debug, Clone)]
enum OpKind {
    Create { partitions: i32 },
    Delete,
}

#[derive(Debug, Clone)]
struct Op {
    topic: String,
    kind: OpKind,
    outcome: Outcome,
}

/// One churn task: runs until its connection fails (the node was killed).
async fn churn(
    addr: String,
    task: usize,
    iteration: usize,
    seed: u64,
    acked: Arc<AtomicUsize>,
) -> Vec<Op> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut ops = Vec::new();
    let Ok(mut conn) = KafkaConn::connect(&addr).await else {
        return ops;
    };
    conn.set_timeout(Duration::from_secs(20));
    let mut live: Vec<String> = Vec::new();
    for n in 0.. {
        let delete = !live.is_empty() && rng.random_bool(0.4);
        if delete {
            let topic = live.swap_remove(rng.random_range(0..live.len()));
            ops.push(Op {
                topic: topic.clone(),
                kind: OpKind::Delete,
                outcome: Outcome::Unanswered,
            });
            let Ok(resp) = conn
                .send::<DeleteTopicsRequest>(&delete_topics_by_name(6, &[&topic]), 6)
                .await
            else {
                return ops;
            };
            let r = &resp.responses[0];
            if let Some(last) = ops.last_mut() {
                last.outcome = Outcome::Answered {
                    error_code: r.error_code,
                    id: r.topic_id,
                };
            }
            if r.error_code != 0 {
                live.push(topic);
            }
        } else {
            let topic = format!("i{iteration}-t{task}-n{n}");
            let partitions = rng.random_range(1..=3);
            ops.push(Op {
                topic: topic.clone(),
                kind: OpKind::Create { partitions },
                outcome: Outcome::Unanswered,
            });
            let req = create_topics(vec![creatable(&topic, partitions, 1)], false);
            let Ok(resp) = conn.send::<CreateTopicsRequest>(&req, 7).await else {
                return ops;
            };
            let r = &resp.topics[0];
            if let Some(last) = ops.last_mut() {
                last.outcome = Outcome::Answered {
                    error_code: r.error_code,
                    id: r.topic_id,
                };
            }
            if r.error_code == 0 {
                live.push(topic);
            }
        }
        acked.fetch_add(1, Ordering::SeqCst);
    }
    ops
}

/// Folds one topic's history into the states allowed after a crash. `known` is the state before
/// this iteration. Returns an error for an answer that should never happen.
fn allowed_states(known: &State, ops: &[&Op]) -> Result<Vec<State>, String> {
    let mut allowed = vec![known.clone()];
    for op in ops {
        match (&op.kind, &op.outcome) {
            (OpKind::Create { partitions }, Outcome::Answered { error_code: 0, id }) => {
                allowed = vec![State::Present {
                    partitions: *partitions as usize,
                    id: Some(*id),
                }];
            }
            (OpKind::Create { partitions }, Outcome::Unanswered) => {
                allowed.push(State::Present {
                    partitions: *partitions as usize,
                    id: None,
                });
            }
            (OpKind::Delete, Outcome::Answered { error_code: 0, .. }) => {
                allowed = vec![State::Absent]
            }
            (OpKind::Delete, Outcome::Unanswered) => allowed.push(State::Absent),
            // A timeout or a lost controller: the outcome is unknown.
            (
                OpKind::Create { partitions },
                Outcome::Answered {
                    error_code: 7 | 41, ..
                },
            ) => {
                allowed.push(State::Present {
                    partitions: *partitions as usize,
                    id: None,
                });
            }
            (
                OpKind::Delete,
                Outcome::Answered {
                    error_code: 7 | 41, ..
                },
            ) => allowed.push(State::Absent),
            (_, Outcome::Answered { error_code, .. }) => {
                return Err(format!(
                    "{}: unexpected error {error_code} for {:?}",
                    op.topic, op.kind
                ));
            }
        }
    }
    Ok(allowed)
}

fn matches(state: &State, seen: Option<&TopicInfo>) -> bool {
    match (state, seen) {
        (State::Absent, None) => true,
        (State::Present { partitions, id }, Some(t)) => {
            t.error_code == 0 && t.partitions == *partitions && id.is_none_or(|id| id == t.topic_id)
        }
        _ => false,
    }
}

async fn snapshot(node: &GregorNode) -> BTreeMap<String, TopicInfo> {
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let resp = conn
        .send::<MetadataRequest>(&metadata(12, None, false), 12)
        .await
        .unwrap();
    topics_of(&resp)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledged_mutations_survive_kill_9() {
    let iterations: usize = std::env::var("GREGOR_CRASH_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(5);
    let seed: u64 = std::env::var("GREGOR_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random());
    eprintln!("crash test seed {seed} (GREGOR_CRASH_SEED to replay), {iterations} iterations");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let started = Instant::now();

    let mut node = GregorNode::start(&[]).unwrap();
    // Model: what each topic is known to be after the last verification.
    let mut known: BTreeMap<String, State> = BTreeMap::new();
    let mut total_acked = 0;
    for iteration in 0..iterations {
        assert!(
            started.elapsed() < TEST_BUDGET,
            "crash test over its time budget"
        );
        let acked = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..TASKS)
            .map(|task| {
                tokio::spawn(churn(
                    node.bootstrap(),
                    task,
                    iteration,
                    rng.random(),
                    acked.clone(),
                ))
            })
            .collect();

        // A random moment: after 5..60 acknowledged mutations, plus up to 30 ms.
        let target = rng.random_range(5..60);
        let deadline = Instant::now() + Duration::from_secs(60);
        while acked.load(Ordering::SeqCst) < target {
            assert!(
                Instant::now() < deadline,
                "iteration {iteration}: only {} of {target} mutations acknowledged in 60 s\n{}",
                acked.load(Ordering::SeqCst),
                node.stderr()
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        tokio::time::sleep(Duration::from_micros(rng.random_range(0..30_000))).await;
        node.kill9().unwrap();

        let mut ops: Vec<Op> = Vec::new();
        for t in tasks {
            let task_ops = tokio::time::timeout(Duration::from_secs(30), t)
                .await
                .expect("a churn task did not notice the killed node within 30 s")
                .unwrap();
            ops.extend(task_ops);
        }
        let answered = ops
            .iter()
            .filter(|o| matches!(o.outcome, Outcome::Answered { .. }))
            .count();
        total_acked += answered;

        node.restart().unwrap();

        // Expected states per topic.
        let mut by_topic: BTreeMap<String, Vec<&Op>> = BTreeMap::new();
        for op in &ops {
            by_topic.entry(op.topic.clone()).or_default().push(op);
        }
        let mut expected: BTreeMap<String, Vec<State>> = known
            .iter()
            .map(|(k, s)| (k.clone(), vec![s.clone()]))
            .collect();
        let mut failures = Vec::new();
        for (topic, topic_ops) in &by_topic {
            let before = known.get(topic).cloned().unwrap_or(State::Absent);
            match allowed_states(&before, topic_ops) {
                Ok(allowed) => {
                    expected.insert(topic.clone(), allowed);
                }
                Err(e) => failures.push(e),
            }
        }

        // Acknowledged topics must be visible once the node is ready; give the image a moment to
        // be served, then judge the full set.
        let wait_deadline = Instant::now() + Duration::from_secs(10);
        let seen = loop {
            let seen = snapshot(&node).await;
            let certain_ok = expected
                .iter()
                .all(|(topic, allowed)| allowed.len() > 1 || matches(&allowed[0], seen.get(topic)));
            if certain_ok || Instant::now() > wait_deadline {
                break seen;
            }
            tokio::time::sleep(gregor_integration::wait::POLL_INTERVAL).await;
        };
        for (topic, allowed) in &expected {
            let got = seen.get(topic);
            if !allowed.iter().any(|s| matches(s, got)) {
                let history: Vec<String> = by_topic
                    .get(topic)
                    .map(|ops| {
                        ops.iter()
                            .map(|o| format!("{:?} -> {:?}", o.kind, o.outcome))
                            .collect()
                    })
                    .unwrap_or_default();
                failures.push(format!(
                    "{topic}: after restart {got:?}, allowed {allowed:?}; history this iteration: {history:?}"
                ));
            }
        }
        for topic in seen.keys() {
            if !expected.contains_key(topic) {
                failures.push(format!(
                    "{topic}: present after restart but never requested"
                ));
            }
        }
        assert!(
            failures.is_empty(),
            "iteration {iteration} (seed {seed}): {} violation(s) of crash safety:\n  {}\n--- node stderr (tail) ---\n{}",
            failures.len(),
            failures.join("\n  "),
            node.stderr().lines().rev().take(40).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
        );
        eprintln!(
            "iteration {iteration}: {} ops ({answered} answered), {} topics now present",
            ops.len(),
            seen.len()
        );

        // Resolve unknowns from what the node shows now.
        known = seen
            .iter()
            .map(|(k, t)| {
                (
                    k.clone(),
                    State::Present {
                        partitions: t.partitions,
                        id: Some(t.topic_id),
                    },
                )
            })
            .collect();
    }
    assert!(
        total_acked >= iterations * 5,
        "too few acknowledged mutations to mean anything"
    );

    // Kill again with no traffic: the image rebuilt from the log is identical.
    let before = snapshot(&node).await;
    node.kill9().unwrap();
    node.restart().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let after = loop {
        let after = snapshot(&node).await;
        if after == before || Instant::now() > deadline {
            break after;
        }
        tokio::time::sleep(gregor_integration::wait::POLL_INTERVAL).await;
    };
    assert_eq!(
        after, before,
        "the topic set changed across a quiet kill -9 / restart"
    );
}
