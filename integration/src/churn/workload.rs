//! The churn itself: a pool of live topics, the choice of the next mutation (steered to hold the
//! live partition count near its target), and the tasks that send requests: mutation workers,
//! fill and clean-up, Metadata readers and the propagation probe.
//!
//! A topic being mutated is taken out of the pool until its answer comes back, so no two
//! connections touch one topic at once and every result is unambiguous. The live partition
//! count moves when a mutation is *planned* (and is corrected if it fails), so steering sees
//! what is in flight.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::anyhow;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest,
};
use rand::rngs::StdRng;
use rand::Rng;
use tokio::sync::watch;

use super::args::Mix;
use super::conn::ChurnConn;
use super::stats::{Op, Recorder, THROTTLING_QUOTA_EXCEEDED};
use crate::admin::{creatable, create_partitions, create_topics, delete_topics_by_name, metadata};

/// UNKNOWN_TOPIC_OR_PARTITION: a delete of a topic that is already gone still removes it.
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// How long the propagation probe waits for one topic to show up.
const PROPAGATION_DEADLINE: Duration = Duration::from_secs(10);

/// Locks a mutex, recovering from poisoning: a panicked task must not hide the report.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A topic the tool created and has not deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveTopic {
    /// Its name.
    pub name: String,
    /// Its partition count.
    pub partitions: i32,
}

/// The next mutation, with the topic it owns until the answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Planned {
    /// Create `topic`.
    Create(LiveTopic),
    /// Grow `topic` to `to` partitions.
    AddPartitions {
        /// The topic as it is now.
        topic: LiveTopic,
        /// The new count.
        to: i32,
    },
    /// Delete `topic`.
    Delete(LiveTopic),
}

/// How mutations are chosen.
#[derive(Debug, Clone)]
pub struct Steering {
    /// Weights.
    pub mix: Mix,
    /// Partitions of a new topic.
    pub partitions_per_topic: i32,
    /// Partitions one add-partitions adds.
    pub add_partitions: i32,
    /// Live partitions to hold.
    pub target: u64,
    /// Half-width of the band around the target inside which the mix is followed as given.
    pub band: u64,
}

/// The live topics that are not in flight, and the counts including those that are.
#[derive(Debug, Default)]
pub struct Pool {
    idle: Vec<LiveTopic>,
    /// Live partitions, in-flight mutations included as if they succeed.
    pub live_partitions: u64,
    /// Live topics, likewise.
    pub live_topics: u64,
    next_id: u64,
    prefix: String,
}

impl Pool {
    /// An empty pool naming topics `<prefix>-<n>`.
    pub fn new(prefix: &str) -> Self {
        Pool {
            prefix: prefix.to_string(),
            ..Pool::default()
        }
    }

    fn new_name(&mut self) -> String {
        self.next_id += 1;
        format!("{}-{}", self.prefix, self.next_id)
    }

    /// Reserves a new topic for creation (fill and create).
    pub fn reserve_create(&mut self, partitions: i32) -> LiveTopic {
        self.live_partitions += partitions as u64;
        self.live_topics += 1;
        LiveTopic {
            name: self.new_name(),
            partitions,
        }
    }

    fn take_random(&mut self, rng: &mut StdRng) -> Option<LiveTopic> {
        if self.idle.is_empty() {
            return None;
        }
        let i = rng.random_range(0..self.idle.len());
        Some(self.idle.swap_remove(i))
    }

    /// A random idle topic's name, for readers (the topic stays in the pool).
    pub fn random_name(&self, rng: &mut StdRng) -> Option<String> {
        if self.idle.is_empty() {
            return None;
        }
        Some(self.idle[rng.random_range(0..self.idle.len())].name.clone())
    }

    /// Every idle topic, removed from the pool (clean-up).
    pub fn drain(&mut self) -> Vec<LiveTopic> {
        std::mem::take(&mut self.idle)
    }

    /// Chooses the next mutation: the mix as given inside the band around the target; below
    /// it only creates, above it only deletes (when the mix has them at all).
    pub fn plan(&mut self, rng: &mut StdRng, s: &Steering) -> Planned {
        let mut w = [s.mix.create, s.mix.add_partitions, s.mix.delete];
        if self.idle.is_empty() {
            w[1] = 0;
            w[2] = 0;
        }
        let live = self.live_partitions;
        if live > s.target + s.band && w[2] > 0 {
            w = [0, 0, w[2]];
        } else if live + s.band < s.target && w[0] > 0 {
            w = [w[0], 0, 0];
        }
        if w.iter().sum::<u32>() == 0 {
            // Only deletes or adds were allowed and there is nothing to touch: create one.
            w = [1, 0, 0];
        }
        let mut pick = rng.random_range(0..w.iter().sum::<u32>());
        let mut choice = 0;
        for (i, weight) in w.iter().enumerate() {
            if pick < *weight {
                choice = i;
                break;
            }
            pick -= weight;
        }
        let taken = if choice == 0 {
            None
        } else {
            self.take_random(rng)
        };
        match (choice, taken) {
            (1, Some(topic)) => {
                self.live_partitions += s.add_partitions as u64;
                let to = topic.partitions.saturating_add(s.add_partitions);
                Planned::AddPartitions { topic, to }
            }
            (2, Some(topic)) => {
                self.live_partitions = self.live_partitions.saturating_sub(topic.partitions as u64);
                self.live_topics = self.live_topics.saturating_sub(1);
                Planned::Delete(topic)
            }
            _ => Planned::Create(self.reserve_create(s.partitions_per_topic)),
        }
    }

    /// Settles a create: kept if it succeeded, unreserved otherwise.
    pub fn finish_create(&mut self, topic: LiveTopic, ok: bool) {
        if ok {
            self.idle.push(topic);
        } else {
            self.live_partitions = self.live_partitions.saturating_sub(topic.partitions as u64);
            self.live_topics = self.live_topics.saturating_sub(1);
        }
    }

    /// Settles an add-partitions.
    pub fn finish_add(&mut self, mut topic: LiveTopic, to: i32, ok: bool) {
        if ok {
            topic.partitions = to;
        } else {
            self.live_partitions = self
                .live_partitions
                .saturating_sub(to.saturating_sub(topic.partitions) as u64);
        }
        self.idle.push(topic);
    }

    /// Settles a delete: a failed one puts the topic back.
    pub fn finish_delete(&mut self, topic: LiveTopic, ok: bool) {
        if !ok {
            self.live_partitions += topic.partitions as u64;
            self.live_topics += 1;
            self.idle.push(topic);
        }
    }

    /// Idle topics (not in flight).
    pub fn idle_len(&self) -> usize {
        self.idle.len()
    }
}

/// What every task shares.
#[derive(Debug)]
pub struct Shared {
    /// Live topics.
    pub pool: Mutex<Pool>,
    /// Measurements.
    pub recorder: Mutex<Recorder>,
    /// Set when the measured phase is over (or a task failed for good).
    pub stop: AtomicBool,
    /// The first error that ended the run early.
    pub fatal: Mutex<Option<String>>,
    /// Tickets of the measured phase (pacing and the --ops limit).
    pub tickets: AtomicU64,
    /// Latest successful create, for the propagation probe.
    pub created: watch::Sender<Option<(String, Instant)>>,
}

impl Shared {
    /// A fresh state with an empty pool.
    pub fn new(prefix: &str) -> Arc<Self> {
        let (created, _) = watch::channel(None);
        Arc::new(Shared {
            pool: Mutex::new(Pool::new(prefix)),
            recorder: Mutex::new(Recorder::new()),
            stop: AtomicBool::new(false),
            fatal: Mutex::new(None),
            tickets: AtomicU64::new(0),
            created,
        })
    }

    /// Ends the run early with `error` (the first one wins).
    pub fn fail(&self, error: String) {
        let mut fatal = lock(&self.fatal);
        if fatal.is_none() {
            *fatal = Some(error);
        }
        self.stop.store(true, Ordering::SeqCst);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

/// Limits of the measured phase.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Mutations per second over all workers (0 = unpaced).
    pub rate: f64,
    /// Stop after this many mutations.
    pub ops: Option<u64>,
    /// Stop at this instant.
    pub deadline: Option<Instant>,
    /// Wait out `throttle_time_ms` before the next request.
    pub honor_throttle: bool,
}

/// Outcome of one mutation request.
struct Outcome {
    op: Op,
    codes: Vec<i16>,
    throttle_ms: i32,
    request_bytes: usize,
    response_bytes: usize,
    latency: Duration,
}

/// Sends `planned` and settles the pool; `Err` only when the connection failed.
async fn execute(
    conn: &mut ChurnConn,
    shared: &Shared,
    planned: Planned,
    replication_factor: i16,
) -> anyhow::Result<Outcome> {
    let v = conn.versions;
    match planned {
        Planned::Create(topic) => {
            let request: CreateTopicsRequest = create_topics(
                vec![creatable(&topic.name, topic.partitions, replication_factor)],
                false,
            );
            let answer = match conn.call(&request, v.create_topics).await {
                Ok(a) => a,
                Err(e) => {
                    lock(&shared.pool).finish_create(topic, false);
                    return Err(e);
                }
            };
            let codes: Vec<i16> = answer.body.topics.iter().map(|t| t.error_code).collect();
            let ok = codes.first() == Some(&0);
            if ok {
                shared
                    .created
                    .send_replace(Some((topic.name.clone(), Instant::now())));
            }
            lock(&shared.pool).finish_create(topic, ok);
            Ok(Outcome {
                op: Op::Create,
                codes,
                throttle_ms: answer.body.throttle_time_ms,
                request_bytes: answer.request_bytes,
                response_bytes: answer.response_bytes,
                latency: answer.latency,
            })
        }
        Planned::AddPartitions { topic, to } => {
            let request: CreatePartitionsRequest = create_partitions(&topic.name, to, None, false);
            let answer = match conn.call(&request, v.create_partitions).await {
                Ok(a) => a,
                Err(e) => {
                    lock(&shared.pool).finish_add(topic, to, false);
                    return Err(e);
                }
            };
            let codes: Vec<i16> = answer.body.results.iter().map(|t| t.error_code).collect();
            lock(&shared.pool).finish_add(topic, to, codes.first() == Some(&0));
            Ok(Outcome {
                op: Op::AddPartitions,
                codes,
                throttle_ms: answer.body.throttle_time_ms,
                request_bytes: answer.request_bytes,
                response_bytes: answer.response_bytes,
                latency: answer.latency,
            })
        }
        Planned::Delete(topic) => {
            let request: DeleteTopicsRequest =
                delete_topics_by_name(v.delete_topics, &[topic.name.as_str()]);
            let answer = match conn.call(&request, v.delete_topics).await {
                Ok(a) => a,
                Err(e) => {
                    lock(&shared.pool).finish_delete(topic, false);
                    return Err(e);
                }
            };
            let codes: Vec<i16> = answer.body.responses.iter().map(|t| t.error_code).collect();
            let ok = matches!(codes.first(), Some(&0) | Some(&UNKNOWN_TOPIC_OR_PARTITION));
            lock(&shared.pool).finish_delete(topic, ok);
            Ok(Outcome {
                op: Op::Delete,
                codes,
                throttle_ms: answer.body.throttle_time_ms,
                request_bytes: answer.request_bytes,
                response_bytes: answer.response_bytes,
                latency: answer.latency,
            })
        }
    }
}

/// Reconnect parameters for a worker whose connection failed.
#[derive(Debug, Clone)]
pub struct Reconnect {
    /// Where.
    pub addr: String,
    /// Client id.
    pub client_id: String,
    /// Response timeout.
    pub timeout: Duration,
    /// Forced CreateTopics version.
    pub create_topics_version: Option<i16>,
}

impl Reconnect {
    /// Opens a fresh connection (ApiVersions first).
    pub async fn connect_now(&self) -> anyhow::Result<ChurnConn> {
        ChurnConn::connect(
            &self.addr,
            &self.client_id,
            self.timeout,
            self.create_topics_version,
        )
        .await
    }
}

/// One mutation worker of the measured phase. A failed request is counted as a transport
/// error and the connection is re-opened once; if that fails too the whole run stops.
#[allow(clippy::too_many_arguments)]
pub async fn mutation_worker(
    mut conn: ChurnConn,
    reconnect: Reconnect,
    shared: Arc<Shared>,
    steering: Steering,
    limits: Limits,
    started: Instant,
    replication_factor: i16,
    mut rng: StdRng,
) {
    while !shared.stopped() {
        let ticket = shared.tickets.fetch_add(1, Ordering::SeqCst);
        if limits.ops.is_some_and(|max| ticket >= max) {
            break;
        }
        if limits.rate > 0.0 {
            let at = started + Duration::from_secs_f64(ticket as f64 / limits.rate);
            if limits.deadline.is_some_and(|d| at >= d) {
                break;
            }
            tokio::time::sleep_until(at.into()).await;
        }
        if limits.deadline.is_some_and(|d| Instant::now() >= d) || shared.stopped() {
            break;
        }
        let planned = lock(&shared.pool).plan(&mut rng, &steering);
        match execute(&mut conn, &shared, planned, replication_factor).await {
            Ok(out) => {
                let live = lock(&shared.pool).live_partitions;
                lock(&shared.recorder).record(
                    out.op,
                    out.latency,
                    &out.codes,
                    out.throttle_ms,
                    out.request_bytes,
                    out.response_bytes,
                    live,
                );
                if limits.honor_throttle && out.throttle_ms > 0 {
                    tokio::time::sleep(Duration::from_millis(out.throttle_ms as u64)).await;
                }
            }
            Err(error) => {
                lock(&shared.recorder).transport_errors += 1;
                match reconnect.connect_now().await {
                    Ok(fresh) => conn = fresh,
                    Err(again) => {
                        shared.fail(format!(
                            "a request failed ({error:#}) and reconnecting failed too: {again:#}"
                        ));
                        break;
                    }
                }
            }
        }
    }
}

/// Fills the pool to the target with multi-topic CreateTopics requests. Returns the number of
/// topics created; fails when the broker refuses creates for a reason other than a quota.
pub async fn fill_worker(
    mut conn: ChurnConn,
    shared: Arc<Shared>,
    steering: Steering,
    batch: usize,
    replication_factor: i16,
    honor_throttle: bool,
) -> anyhow::Result<u64> {
    let mut created = 0u64;
    let pp = steering.partitions_per_topic as u64;
    while !shared.stopped() {
        let topics: Vec<LiveTopic> = {
            let mut pool = lock(&shared.pool);
            let room = steering.target.saturating_sub(pool.live_partitions) / pp;
            let n = usize::try_from(room).unwrap_or(usize::MAX).min(batch);
            (0..n)
                .map(|_| pool.reserve_create(steering.partitions_per_topic))
                .collect()
        };
        if topics.is_empty() {
            break;
        }
        let request: CreateTopicsRequest = create_topics(
            topics
                .iter()
                .map(|t| creatable(&t.name, t.partitions, replication_factor))
                .collect(),
            false,
        );
        let answer = match conn.call(&request, conn.versions.create_topics).await {
            Ok(a) => a,
            Err(e) => {
                let mut pool = lock(&shared.pool);
                for t in topics {
                    pool.finish_create(t, false);
                }
                return Err(e.context("fill phase"));
            }
        };
        let mut refused = None;
        let mut ok_here = 0;
        {
            let mut pool = lock(&shared.pool);
            for topic in topics {
                let result = answer.body.topics.iter().find(|r| r.name.0 == *topic.name);
                let code = result.map_or(-1, |r| r.error_code);
                if code == 0 {
                    ok_here += 1;
                } else if code != THROTTLING_QUOTA_EXCEEDED && refused.is_none() {
                    let message = result
                        .and_then(|r| r.error_message.as_ref())
                        .map(|m| m.to_string())
                        .unwrap_or_default();
                    refused = Some(format!(
                        "{} ({code}) {message}",
                        crate::admin::error_name(code)
                    ));
                }
                pool.finish_create(topic, code == 0);
            }
        }
        created += ok_here;
        if ok_here == 0 {
            if let Some(why) = refused {
                return Err(anyhow!(
                    "fill phase: the broker refused CreateTopics: {why}"
                ));
            }
        }
        if honor_throttle && answer.body.throttle_time_ms > 0 {
            tokio::time::sleep(Duration::from_millis(answer.body.throttle_time_ms as u64)).await;
        }
    }
    Ok(created)
}

/// Deletes `topics` in batches; returns how many the broker confirmed.
pub async fn cleanup_worker(
    mut conn: ChurnConn,
    topics: Vec<LiveTopic>,
    batch: usize,
) -> anyhow::Result<u64> {
    let mut deleted = 0;
    for chunk in topics.chunks(batch.max(1)) {
        let names: Vec<&str> = chunk.iter().map(|t| t.name.as_str()).collect();
        let request = delete_topics_by_name(conn.versions.delete_topics, &names);
        let answer = conn
            .call(&request, conn.versions.delete_topics)
            .await
            .map_err(|e| e.context("clean-up"))?;
        deleted += answer
            .body
            .responses
            .iter()
            .filter(|r| r.error_code == 0)
            .count() as u64;
        if answer.body.throttle_time_ms > 0 {
            tokio::time::sleep(Duration::from_millis(answer.body.throttle_time_ms as u64)).await;
        }
    }
    Ok(deleted)
}

/// Asks for one random live topic's metadata in a loop until the run stops.
pub async fn metadata_reader(mut conn: ChurnConn, shared: Arc<Shared>, mut rng: StdRng) {
    while !shared.stopped() {
        let name = lock(&shared.pool).random_name(&mut rng);
        let Some(name) = name else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let request: MetadataRequest = metadata(conn.versions.metadata, Some(&[&name]), false);
        match conn.call(&request, conn.versions.metadata).await {
            Ok(answer) => {
                let codes: Vec<i16> = answer.body.topics.iter().map(|t| t.error_code).collect();
                let live = lock(&shared.pool).live_partitions;
                lock(&shared.recorder).record(
                    Op::Metadata,
                    answer.latency,
                    &codes,
                    answer.body.throttle_time_ms,
                    answer.request_bytes,
                    answer.response_bytes,
                    live,
                );
            }
            Err(error) => {
                lock(&shared.recorder).transport_errors += 1;
                shared.fail(format!("metadata reader: {error:#}"));
                break;
            }
        }
    }
}

/// Measures propagation: takes the latest successful create (sampling when creates come
/// faster than it can probe) and asks for its metadata on its own connection until it is
/// listed without error. The delay ends when that answer arrives, so it includes one Metadata
/// round trip.
pub async fn propagation_probe(mut conn: ChurnConn, shared: Arc<Shared>) {
    let mut rx = shared.created.subscribe();
    while !shared.stopped() {
        match tokio::time::timeout(Duration::from_millis(100), rx.changed()).await {
            Err(_) => continue,
            Ok(Err(_)) => break,
            Ok(Ok(())) => {}
        }
        let Some((name, answered)) = rx.borrow_and_update().clone() else {
            continue;
        };
        let request: MetadataRequest = metadata(conn.versions.metadata, Some(&[&name]), false);
        let seen = loop {
            match conn.call(&request, conn.versions.metadata).await {
                Ok(answer) => {
                    let listed = answer
                        .body
                        .topics
                        .iter()
                        .any(|t| t.error_code == 0 && !t.partitions.is_empty());
                    if listed {
                        break Some(answered.elapsed());
                    }
                }
                Err(error) => {
                    shared.fail(format!("propagation probe: {error:#}"));
                    return;
                }
            }
            if answered.elapsed() > PROPAGATION_DEADLINE || shared.stopped() {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        lock(&shared.recorder).record_propagation(seen);
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn steering(target: u64) -> Steering {
        Steering {
            mix: Mix {
                create: 40,
                add_partitions: 20,
                delete: 40,
            },
            partitions_per_topic: 2,
            add_partitions: 1,
            target,
            band: 4,
        }
    }

    #[test]
    fn holds_the_live_count_near_the_target() {
        let mut pool = Pool::new("t");
        let mut rng = StdRng::seed_from_u64(7);
        let s = steering(100);
        for _ in 0..5_000 {
            match pool.plan(&mut rng, &s) {
                Planned::Create(t) => pool.finish_create(t, true),
                Planned::AddPartitions { topic, to } => pool.finish_add(topic, to, true),
                Planned::Delete(t) => pool.finish_delete(t, true),
            }
        }
        assert!(
            pool.live_partitions.abs_diff(100) <= 4 + 2,
            "{}",
            pool.live_partitions
        );
        let actual: u64 = pool.idle.iter().map(|t| t.partitions as u64).sum();
        assert_eq!(actual, pool.live_partitions);
        assert_eq!(pool.idle.len() as u64, pool.live_topics);
    }

    #[test]
    fn failed_mutations_restore_the_counts() {
        let mut pool = Pool::new("t");
        let mut rng = StdRng::seed_from_u64(1);
        let t = pool.reserve_create(3);
        pool.finish_create(t, true);
        let s = Steering {
            mix: Mix {
                create: 0,
                add_partitions: 1,
                delete: 0,
            },
            ..steering(3)
        };
        let Planned::AddPartitions { topic, to } = pool.plan(&mut rng, &s) else {
            panic!("expected an add");
        };
        assert_eq!((pool.live_partitions, to), (4, 4));
        pool.finish_add(topic, to, false);
        assert_eq!(pool.live_partitions, 3);
        let s = Steering {
            mix: Mix {
                create: 0,
                add_partitions: 0,
                delete: 1,
            },
            ..steering(3)
        };
        let Planned::Delete(topic) = pool.plan(&mut rng, &s) else {
            panic!("expected a delete");
        };
        assert_eq!(pool.live_partitions, 0);
        pool.finish_delete(topic, false);
        assert_eq!(
            (pool.live_partitions, pool.live_topics, pool.idle_len()),
            (3, 1, 1)
        );
    }
}
