//! A linearizability-style checker of the metadata quorum: clients create and delete topics with
//! unique names, through both brokers and all three controllers, while controllers are killed
//! with SIGKILL and restarted, leaders are frozen with SIGSTOP and resumed, and, where the
//! machine allows network namespaces (root and `ip netns`), leaders are cut off from every
//! other node by a real network partition while they keep running, and healed. Without
//! namespaces the run says why on stderr and does everything but the partitions, on loopback.
//! Then the history is checked against what the cluster holds:
//!
//! - every acknowledged create is present with the topic id it was acknowledged with, unless
//!   a delete of it was acknowledged (or may have happened: its outcome is unknown);
//! - every acknowledged delete is gone;
//! - a delete never answers "unknown topic" for an acknowledged create;
//! - a create that failed validation left nothing behind;
//! - no topic exists that was never requested;
//! - every node (3 controllers, 2 brokers) converges to the same image digest at the same
//!   offset (`gregor_metadata_image_digest`).
//!
//! Requests whose outcome is unknown (timeouts, lost connections, NOT_CONTROLLER after a write
//! may already be in the log) may go either way. The run ends after `GREGOR_CHECKER_LEADER_CHANGES`
//! leader changes (30 by default); `GREGOR_CHECKER_SEED` replays a run's choice of victims.
//!
//! A partition (`NetLab::partition`): every node runs in a namespace of its own on a private
//! bridge, the test in the hub namespace that reaches them all. The leader loses every packet
//! to and from the other controllers and the brokers, but the clients still reach it (writes
//! sent to it must never be acknowledged: it cannot commit them). The majority elects a new
//! leader and acknowledges a create; then the partition heals and the old leader must follow
//! the new one, its image reaching the new leader's offset, before the next disruption.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gregor_integration::admin::{
    creatable, create_topics, delete_topics_by_name, metadata, topics_of,
};
use gregor_integration::netns::{Host, NetLab};
use gregor_integration::{prom, wait_until, GregorNode, KafkaConn};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use uuid::Uuid;

use crate::{leader_id, leader_view, Cluster, FORM_TIMEOUT};

/// Kafka error codes the checker tells apart.
const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_PARTITIONS: i16 = 37;
const INVALID_REPLICATION_FACTOR: i16 = 38;
const INVALID_TOPIC: i16 = 17;

/// A client's pause after an answer that says "not here, not now" (no answer, NOT_CONTROLLER),
/// as Kafka clients back off (`retry.backoff.ms`), so clients do not spin on a dead node.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
const NOT_CONTROLLER: i16 = 41;

/// How long one request may take before its outcome counts as unknown.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// What became of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Outcome<T> {
    /// Acknowledged, with what the answer carried.
    Ok(T),
    /// Refused by validation: nothing was written.
    Refused(i16),
    /// The answer (if any) does not say whether it was written.
    Unknown,
}

/// Everything the clients asked and what they were told, by topic name (each name is created
/// at most once and deleted at most once).
#[derive(Debug, Default)]
struct History {
    creates: BTreeMap<String, Outcome<Uuid>>,
    deletes: BTreeMap<String, Outcome<()>>,
    /// Deletes answered UNKNOWN_TOPIC_OR_PARTITION for an acknowledged create.
    lost_on_delete: Vec<String>,
    /// Answers by error code (`None`: no answer), for the report.
    answers: BTreeMap<Option<i16>, usize>,
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A create's outcome and the error code answered (`None`: no answer).
async fn create(addr: &str, name: &str, partitions: i32) -> (Outcome<Uuid>, Option<i16>) {
    let attempt = async {
        let mut conn = KafkaConn::connect(addr).await?;
        conn.set_timeout(REQUEST_TIMEOUT);
        conn.send(
            &create_topics(vec![creatable(name, partitions, 2)], false),
            7,
        )
        .await
    };
    let answer = tokio::time::timeout(REQUEST_TIMEOUT, attempt).await;
    let code = match &answer {
        Ok(Ok(response)) => response.topics.first().map(|t| t.error_code),
        _ => None,
    };
    let outcome = match answer {
        Ok(Ok(response)) => match response.topics.first() {
            Some(topic) if topic.error_code == NONE => Outcome::Ok(topic.topic_id),
            Some(topic)
                if [
                    INVALID_PARTITIONS,
                    INVALID_REPLICATION_FACTOR,
                    INVALID_TOPIC,
                ]
                .contains(&topic.error_code) =>
            {
                Outcome::Refused(topic.error_code)
            }
            _ => Outcome::Unknown,
        },
        _ => Outcome::Unknown,
    };
    (outcome, code)
}

/// A delete's outcome, or `Err(())` for UNKNOWN_TOPIC_OR_PARTITION.
async fn delete(addr: &str, name: &str) -> Result<Outcome<()>, ()> {
    let attempt = async {
        let mut conn = KafkaConn::connect(addr).await?;
        conn.set_timeout(REQUEST_TIMEOUT);
        conn.send(&delete_topics_by_name(6, &[name]), 6).await
    };
    match tokio::time::timeout(REQUEST_TIMEOUT, attempt).await {
        Ok(Ok(response)) => match response.responses.first().map(|r| r.error_code) {
            Some(NONE) => Ok(Outcome::Ok(())),
            Some(UNKNOWN_TOPIC_OR_PARTITION) => Err(()),
            _ => Ok(Outcome::Unknown),
        },
        _ => Ok(Outcome::Unknown),
    }
}

/// One client: creates unique names and deletes some of the topics it was told it created,
/// each time through a random node, until `stop`.
async fn client(
    id: usize,
    addrs: Vec<String>,
    history: Arc<Mutex<History>>,
    stop: Arc<AtomicBool>,
    seed: u64,
) {
    let mut rng = StdRng::seed_from_u64(seed ^ (id as u64).wrapping_mul(0x9e37_79b9));
    let mut created: Vec<String> = Vec::new();
    let mut n = 0;
    while !stop.load(Ordering::Relaxed) {
        let addr = &addrs[rng.random_range(0..addrs.len())];
        if !created.is_empty() && rng.random_bool(0.3) {
            let name = created.swap_remove(rng.random_range(0..created.len()));
            let outcome = delete(addr, &name).await;
            let mut history = history.lock().unwrap();
            match outcome {
                Ok(outcome) => {
                    history.deletes.insert(name, outcome);
                }
                Err(()) => {
                    history.lost_on_delete.push(name.clone());
                    history.deletes.insert(name, Outcome::Unknown);
                }
            }
            continue;
        }
        n += 1;
        let name = format!("chk-{id}-{n}");
        // One in twenty asks for 0 partitions: refused by validation, must leave no trace.
        let partitions = if rng.random_ratio(1, 20) {
            0
        } else {
            rng.random_range(1..=3)
        };
        let (outcome, code) = create(addr, &name, partitions).await;
        if matches!(outcome, Outcome::Ok(_)) {
            created.push(name.clone());
        }
        {
            let mut history = history.lock().unwrap();
            *history.answers.entry(code).or_default() += 1;
            history.creates.insert(name, outcome);
        }
        if matches!(code, None | Some(NOT_CONTROLLER)) {
            tokio::time::sleep(RETRY_BACKOFF).await;
        }
    }
}

/// `(digest offset, digest)` a node reports, if it answers.
async fn digest_of(node: &GregorNode) -> anyhow::Result<(f64, f64)> {
    let samples = prom::parse(&prom::scrape(&node.metrics_addr()).await?)?;
    let offset = prom::value(&samples, "gregor_metadata_image_digest_offset", &[])
        .ok_or_else(|| anyhow::anyhow!("no digest offset"))?;
    let digest = prom::value(&samples, "gregor_metadata_image_digest", &[])
        .ok_or_else(|| anyhow::anyhow!("no digest"))?;
    Ok((offset, digest))
}

fn signal(node: &GregorNode, signal: &str) -> anyhow::Result<()> {
    let pid = node
        .pid()
        .ok_or_else(|| anyhow::anyhow!("the node is not running"))?;
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()?;
    anyhow::ensure!(status.success(), "kill {signal} {pid} failed");
    Ok(())
}

/// The leader id and epoch as the running controllers see it.
async fn current_leader(addrs: &[String]) -> anyhow::Result<Option<(i32, i32)>> {
    Ok(leader_view(addrs)
        .await?
        .map(|v| (leader_id(&v), v.topics[0].partitions[0].leader_epoch)))
}

/// Waits for a leader other than `old` (or the same one in a later epoch), asking `addrs`.
async fn wait_new_leader(addrs: &[String], old: (i32, i32)) -> anyhow::Result<(i32, i32)> {
    wait_until("a new leader", FORM_TIMEOUT, || async {
        Ok(current_leader(addrs)
            .await?
            .filter(|(id, epoch)| *id != old.0 && *epoch > old.1))
    })
    .await
}

/// Acknowledged creates so far.
fn acknowledged_creates(history: &Mutex<History>) -> usize {
    history.lock().map_or(0, |h| {
        h.creates
            .values()
            .filter(|o| matches!(o, Outcome::Ok(_)))
            .count()
    })
}

/// Create answers by error code so far (`None`: no answer).
fn answers(history: &Mutex<History>) -> BTreeMap<Option<i16>, usize> {
    history
        .lock()
        .map_or_else(|_| BTreeMap::new(), |h| h.answers.clone())
}

/// Cuts the leader (at `leader_index`) off from every other node, waits for the others to
/// elect a new leader and acknowledge a create, checks that the cut-off leader still runs,
/// heals, and waits for the old leader's image to reach the new leader's. Returns the new
/// leader.
async fn partition_leader(
    cluster: &mut Cluster,
    leader_index: usize,
    leader: (i32, i32),
    others: &[String],
    history: &Mutex<History>,
) -> anyhow::Result<(i32, i32)> {
    let lab = cluster
        .lab
        .clone()
        .ok_or_else(|| anyhow::anyhow!("no lab"))?;
    let isolated = cluster
        .hosts
        .get(&leader.0)
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("no host for node {}", leader.0))?;
    let rest: Vec<&Host> = cluster
        .hosts
        .iter()
        .filter(|(id, _)| **id != leader.0)
        .map(|(_, host)| host)
        .collect();
    lab.partition(&isolated, &rest)?;
    let during = async {
        let next = wait_new_leader(others, leader).await?;
        let acknowledged = acknowledged_creates(history);
        let answers_before = answers(history);
        let progress = wait_until(
            "a create acknowledged by the majority side",
            FORM_TIMEOUT,
            || async { Ok((acknowledged_creates(history) > acknowledged).then_some(())) },
        )
        .await;
        if let Err(e) = progress {
            anyhow::bail!(
                "{e:#}: leader {next:?} elected after cutting off {leader:?}; create answers \
                 by error code before {answers_before:?}, now {:?}",
                answers(history)
            );
        }
        // Cut off, not stopped: the old leader runs and still answers the test (the hub).
        let node = &mut cluster.controllers[leader_index].1;
        anyhow::ensure!(
            node.try_exit_status()?.is_none(),
            "the partitioned leader exited"
        );
        digest_of(node).await?;
        Ok(next)
    };
    let next = during.await;
    // Heal whatever happened, so that a failure leaves a cluster that can still be inspected.
    lab.heal()?;
    let next = next?;
    let new_index = cluster
        .controllers
        .iter()
        .position(|(id, _)| *id == next.0)
        .ok_or_else(|| anyhow::anyhow!("leader {} is not a controller", next.0))?;
    let (target, _) = digest_of(&cluster.controllers[new_index].1).await?;
    let healed = &cluster.controllers[leader_index].1;
    wait_until(
        "the healed old leader to follow the new one",
        FORM_TIMEOUT,
        || async { Ok((digest_of(healed).await?.0 >= target).then_some(())) },
    )
    .await?;
    Ok(next)
}

/// Runs the checker on its own thread: inside the lab's hub namespace when namespaces are
/// available (every thread of its runtime enters the hub too), else on loopback.
#[test]
fn acknowledged_mutations_survive_leader_changes() -> anyhow::Result<()> {
    // Partitions need root and `ip netns`; GREGOR_CHECKER_PARTITIONS=0 leaves them out.
    let lab = match std::env::var("GREGOR_CHECKER_PARTITIONS").as_deref() {
        Ok("0") => Err(gregor_integration::netns::Unavailable(
            "GREGOR_CHECKER_PARTITIONS=0".into(),
        )),
        _ => NetLab::new(),
    };
    let lab = match lab {
        Ok(lab) => Some(Arc::new(lab)),
        Err(reason) => {
            eprintln!("checker: no leader partitions, only kills and freezes: {reason}");
            None
        }
    };
    let runner = std::thread::spawn(move || -> anyhow::Result<()> {
        let mut runtime = tokio::runtime::Builder::new_multi_thread();
        runtime.worker_threads(2).enable_all();
        if let Some(lab) = &lab {
            lab.enter_hub()?;
            runtime.on_thread_start(lab.hub_entry());
        }
        runtime.build()?.block_on(check(lab))
    });
    match runner.join() {
        Ok(result) => result,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

async fn check(lab: Option<Arc<NetLab>>) -> anyhow::Result<()> {
    let target_changes = env_number("GREGOR_CHECKER_LEADER_CHANGES", 30);
    let clients = env_number("GREGOR_CHECKER_CLIENTS", 3) as usize;
    let seed = env_number(
        "GREGOR_CHECKER_SEED",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64),
    );
    eprintln!("checker: seed {seed}, {target_changes} leader changes, {clients} clients");
    let rng = StdRng::seed_from_u64(seed);
    let partitions_possible = lab.is_some();
    let mut cluster = tokio::task::block_in_place(|| match lab {
        Some(lab) => Cluster::start_in_lab(lab, 3, 2),
        None => Cluster::start(3, 2),
    })?;
    let outcome = check_cluster(
        &mut cluster,
        seed,
        target_changes,
        clients,
        rng,
        partitions_possible,
    )
    .await;
    if outcome.is_err() {
        keep_node_logs(&cluster, seed);
    }
    outcome
}

/// Writes every node's log to a directory named after the seed and prints where, so a failed
/// run (in CI too) can be read after the nodes are gone.
fn keep_node_logs(cluster: &Cluster, seed: u64) {
    let dir = std::env::temp_dir().join(format!("gregor-checker-{seed}"));
    if let Err(error) = std::fs::create_dir_all(&dir) {
        eprintln!(
            "checker: cannot keep the node logs in {}: {error}",
            dir.display()
        );
        return;
    }
    for (id, node) in cluster.controllers.iter().chain(cluster.brokers.iter()) {
        let path = dir.join(format!("node-{id}.log"));
        if let Err(error) = std::fs::write(&path, node.stderr()) {
            eprintln!("checker: cannot write {}: {error}", path.display());
        }
    }
    eprintln!("checker: node logs kept in {}", dir.display());
}

async fn check_cluster(
    cluster: &mut Cluster,
    seed: u64,
    target_changes: u64,
    clients: usize,
    mut rng: StdRng,
    partitions_possible: bool,
) -> anyhow::Result<()> {
    let controller_addrs: Vec<String> = cluster
        .controllers
        .iter()
        .map(|(_, n)| n.bootstrap())
        .collect();
    let mut client_addrs: Vec<String> =
        cluster.brokers.iter().map(|(_, n)| n.bootstrap()).collect();
    client_addrs.extend(controller_addrs.iter().cloned());

    let history = Arc::new(Mutex::new(History::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let tasks: Vec<_> = (0..clients)
        .map(|id| {
            tokio::spawn(client(
                id,
                client_addrs.clone(),
                history.clone(),
                stop.clone(),
                seed,
            ))
        })
        .collect();

    let started = Instant::now();
    let mut leader = wait_until("a leader", FORM_TIMEOUT, || {
        current_leader(&controller_addrs)
    })
    .await?;
    let (mut changes, mut kills, mut freezes, mut partitions, mut follower_kills) = (0, 0, 0, 0, 0);
    // With namespaces, 30% of disruptions are partitions, taken from the kills and freezes.
    let (partition_below, freeze_below) = if partitions_possible {
        (0.45, 0.6)
    } else {
        (0.15, 0.35)
    };
    while changes < target_changes {
        let leader_index = cluster
            .controllers
            .iter()
            .position(|(id, _)| *id == leader.0)
            .expect("the leader is a controller");
        let others: Vec<String> = controller_addrs
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != leader_index)
            .map(|(_, a)| a.clone())
            .collect();
        let roll: f64 = rng.random();
        if roll < 0.15 {
            // A follower dies and comes back: the leader stays, writes go on.
            let victim = (leader_index + rng.random_range(1..3)) % 3;
            let node = &mut cluster.controllers[victim].1;
            tokio::task::block_in_place(|| node.restart_same_ports())?;
            follower_kills += 1;
            continue;
        }
        if roll < partition_below {
            leader = partition_leader(cluster, leader_index, leader, &others, &history).await?;
            partitions += 1;
        } else if roll < freeze_below {
            // The leader freezes past the election timeout, as if cut off, then resumes and
            // must step down without deciding anything on its stale view.
            signal(&cluster.controllers[leader_index].1, "-STOP")?;
            let next = wait_new_leader(&others, leader).await;
            signal(&cluster.controllers[leader_index].1, "-CONT")?;
            leader = next?;
            freezes += 1;
        } else {
            cluster.controllers[leader_index].1.kill9()?;
            leader = wait_new_leader(&others, leader).await?;
            let node = &mut cluster.controllers[leader_index].1;
            tokio::task::block_in_place(|| node.restart_same_ports())?;
            kills += 1;
        }
        changes += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await?;
    }
    let chaos = started.elapsed();

    // Every node converges to one image: same offset, same digest.
    let nodes: Vec<&GregorNode> = cluster
        .controllers
        .iter()
        .chain(cluster.brokers.iter())
        .map(|(_, n)| n)
        .collect();
    let converged = wait_until(
        "every node at the same image digest",
        FORM_TIMEOUT,
        || async {
            let mut seen = BTreeSet::new();
            let mut first = None;
            for node in &nodes {
                let (offset, digest) = digest_of(node).await?;
                first.get_or_insert((offset, digest));
                seen.insert((offset as u64, digest as u64));
            }
            Ok((seen.len() == 1).then_some(first))
        },
    )
    .await?;

    let mut conn = KafkaConn::connect(&cluster.brokers[0].1.bootstrap()).await?;
    let present = topics_of(&conn.send(&metadata(12, None, false), 12).await?);
    let history = history.lock().unwrap();
    let mut violations = Vec::new();
    for (name, outcome) in &history.creates {
        let deleted = history.deletes.get(name);
        let found = present.get(name);
        match (outcome, deleted, found) {
            (Outcome::Ok(_), Some(Outcome::Ok(())), Some(_)) => {
                violations.push(format!("{name}: deleted (acknowledged) but present"))
            }
            (Outcome::Ok(id), None | Some(Outcome::Unknown), Some(found))
                if found.topic_id != *id =>
            {
                violations.push(format!(
                    "{name}: acknowledged with id {id}, present with id {}",
                    found.topic_id
                ))
            }
            (Outcome::Ok(id), None, None) => {
                violations.push(format!("{name}: acknowledged with id {id}, missing"))
            }
            (Outcome::Refused(code), _, Some(_)) => {
                violations.push(format!("{name}: refused with error {code}, present"))
            }
            _ => {}
        }
    }
    for name in present.keys() {
        if !history.creates.contains_key(name) {
            violations.push(format!("{name}: present, never requested"));
        }
    }
    for name in &history.lost_on_delete {
        violations.push(format!(
            "{name}: acknowledged create, later deleted as an unknown topic"
        ));
    }
    let count = |f: fn(&Outcome<Uuid>) -> bool| history.creates.values().filter(|o| f(o)).count();
    eprintln!(
        "checker: {chaos:?} of chaos, {changes} leader changes ({kills} leader kills, {freezes} \
         leader freezes, {partitions} leader partitions) and {follower_kills} follower kills; creates: {} acknowledged, {} \
         refused, {} unknown; deletes: {} acknowledged, {} unknown; {} topics at the end; \
         converged at {converged:?}; create answers by error code: {:?}",
        count(|o| matches!(o, Outcome::Ok(_))),
        count(|o| matches!(o, Outcome::Refused(_))),
        count(|o| matches!(o, Outcome::Unknown)),
        history
            .deletes
            .values()
            .filter(|o| matches!(o, Outcome::Ok(())))
            .count(),
        history
            .deletes
            .values()
            .filter(|o| matches!(o, Outcome::Unknown))
            .count(),
        present.len(),
        history.answers,
    );
    anyhow::ensure!(
        violations.is_empty(),
        "{} violations (seed {seed}):\n{}",
        violations.len(),
        violations.join("\n")
    );
    anyhow::ensure!(
        count(|o| matches!(o, Outcome::Ok(_))) > 0,
        "no create was acknowledged"
    );
    Ok(())
}
