//! The log manager: the partition logs of this node, on dedicated threads.
//!
//! `gregor-log` is plain blocking file I/O, so it never runs on the async runtime or the actix
//! arbiter. Partitions are spread over a few **shard threads** (hash of topic and partition);
//! each shard owns its `PartitionLog`s outright, which is Kafka's per-partition append lock
//! without a lock. Handlers talk to a shard through two channels:
//!
//! * a bounded **data** channel (append, read, offset lookups), each command answered through a
//!   oneshot channel the handler awaits. When it is full the handler waits on a blocking-pool
//!   thread, so back pressure never stalls the runtime;
//! * an unbounded **control** channel fed by [`LogPublisher`] from the metadata image (open,
//!   reconfigure, delete, shut down). A shard drains it before every data command, so a log
//!   opened before a request was sent is there when the request is served.
//!
//! What the network side needs without a round trip lives in [`PartitionState`] (atomics for
//! the high watermark, log start and log end offsets, the effective `min.insync.replicas`) with
//! a `Notify` that every append wakes: a waiting Fetch sleeps on it, not on a timer.
//!
//! Gregor has no replication yet: the high watermark is the log end offset.

mod admin;
mod cleaner;
mod publisher;
mod read_memory;
mod shard;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::sync::atomic::{
    AtomicBool, AtomicI32, AtomicI64, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering,
};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use bytes::Bytes;
use dashmap::DashMap;
use gregor_log::checkpoint::TopicPartition;
use gregor_log::config::LogConfig;
use gregor_log::error::LogError;
pub use gregor_log::log::OffsetMatch;
use gregor_log::log::{AppendInfo, PartitionLog};
use gregor_log::validate::ValidatedBatch;
use tokio::sync::{oneshot, Notify};

pub use admin::LogDirDescription;
pub use publisher::{effective_log_config, LogPublisher, StaticLogDefaults};
pub use read_memory::{ReadMemory, ReadMemoryHold};

use crate::replication::Replication;
use shard::{Change, Control, DataCommand, Shard};

/// Commands that may wait in one shard's data channel.
const DATA_CHANNEL_CAPACITY: usize = 1024;

/// Batches validated at once off the shard threads: Kafka validates on its request threads,
/// `num.io.threads` of them (8 by default).
const VALIDATIONS_AT_ONCE: usize = 8;

/// A produced batch on its way to its partition's shard.
#[derive(Debug)]
pub enum ProducedBatch {
    /// As the producer sent it: the shard validates it as it appends it.
    Raw(Bytes),
    /// Validated before it was queued ([`LogManager::validate_apart`]); boxed, as its header
    /// alone is larger than the other commands.
    Validated(Box<ValidatedBatch<'static>>),
}

/// What the network side knows of one partition log without asking its shard.
#[derive(Debug)]
pub struct PartitionState {
    /// The topic id the log was opened with.
    pub topic_id: uuid::Uuid,
    shard: usize,
    high_watermark: AtomicI64,
    log_start_offset: AtomicI64,
    /// The leader epoch of the log start offset, −1 when the log knows none.
    log_start_epoch: AtomicI32,
    log_end_offset: AtomicI64,
    /// The log's bytes and segments, for the `kafka_log_log_*` gauges a scrape reads.
    size: AtomicU64,
    segments: AtomicU32,
    min_insync_replicas: AtomicI32,
    /// The log's configuration as last sent to its shard, for work done before a command
    /// reaches the shard: the group coordinator's size check, a compressed batch's validation.
    config: ArcSwap<LogConfig>,
    /// Set once the log is open (recovered) and serving.
    open: AtomicBool,
    /// [`OFFLINE`] once the log could not be opened or its log dir went offline, [`REMOVED`]
    /// once the state left the manager's partitions: one atomic, so that a storage error and a
    /// removal racing on two threads count the partition in `offline_replicas` only while it
    /// is hosted.
    offline: AtomicU8,
    /// The manager's count of hosted partitions that are offline (Kafka's
    /// `ReplicaManager.OfflineReplicaCount`).
    offline_replicas: Arc<AtomicUsize>,
    /// Woken after every append, every high-watermark move and when the log goes away or
    /// changes leader, for waiting fetches and acks=all produces.
    pub appended: Notify,
    /// Leader or follower, with the followers' progress (see [`crate::replication`]).
    replication: Mutex<Replication>,
    /// Counts the moves of every hosted partition's high watermark (shared by the manager's
    /// partitions): a shard whose count has not moved since its last `replication-offset-
    /// checkpoint` skips the next, instead of reading a million idle partitions every 5 s.
    high_watermark_moves: Arc<AtomicU64>,
}

/// Bits of [`PartitionState::offline`].
const OFFLINE: u8 = 1;
const REMOVED: u8 = 2;

impl PartitionState {
    pub fn high_watermark(&self) -> i64 {
        self.high_watermark.load(Ordering::Acquire)
    }
    pub fn log_start_offset(&self) -> i64 {
        self.log_start_offset.load(Ordering::Acquire)
    }
    pub fn log_start_epoch(&self) -> i32 {
        self.log_start_epoch.load(Ordering::Acquire)
    }
    pub fn log_end_offset(&self) -> i64 {
        self.log_end_offset.load(Ordering::Acquire)
    }
    pub fn min_insync_replicas(&self) -> i32 {
        self.min_insync_replicas.load(Ordering::Acquire)
    }
    pub fn max_message_bytes(&self) -> u64 {
        self.config.load().max_message_bytes
    }
    pub fn config(&self) -> Arc<LogConfig> {
        self.config.load_full()
    }
    /// Open and online: it can serve requests.
    pub fn is_serving(&self) -> bool {
        self.open.load(Ordering::Acquire) && !self.is_offline()
    }
    pub fn is_offline(&self) -> bool {
        self.offline.load(Ordering::Acquire) & OFFLINE != 0
    }

    /// Takes the partition offline, for good (a log dir never comes back while the node
    /// runs); counted once among the offline replicas while it is hosted.
    pub(crate) fn mark_offline(&self) {
        if self.offline.fetch_or(OFFLINE, Ordering::AcqRel) == 0 {
            self.offline_replicas.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The state left the manager's partitions: no longer counted if it was offline.
    fn mark_removed(&self) {
        if self.offline.fetch_or(REMOVED, Ordering::AcqRel) == OFFLINE {
            self.offline_replicas.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// What the `kafka_log_log_*` gauges show of the log.
    fn log_gauges(&self) -> gregor_metrics::partition_logs::LogGauges {
        gregor_metrics::partition_logs::LogGauges {
            size: self.size.load(Ordering::Relaxed),
            segments: self.segments.load(Ordering::Relaxed),
            log_start_offset: self.log_start_offset(),
            log_end_offset: self.log_end_offset(),
        }
    }

    /// Registered by the metadata image and being opened (recovered) by its shard. Appends may
    /// already be queued: the shard opens the log before it serves any command sent after the
    /// open reached it (one sent in the moment between the registration and the log
    /// publisher's send gets NOT_LEADER_OR_FOLLOWER, which clients retry). Offsets are not
    /// known yet.
    pub fn is_opening(&self) -> bool {
        !self.open.load(Ordering::Acquire) && !self.is_offline()
    }

    /// After a new leader epoch: an empty log's first epoch is its start offset's.
    fn publish_log_start_epoch(&self, log: &PartitionLog) {
        self.log_start_epoch
            .store(log.log_start_epoch(), Ordering::Release);
    }

    /// Publishes the log's size and segment count (two stores: `PartitionLog::size` keeps its
    /// total as the segments change).
    fn publish_size(&self, log: &PartitionLog) {
        self.size.store(log.size(), Ordering::Relaxed);
        let segments = u32::try_from(log.segment_count()).unwrap_or(u32::MAX);
        self.segments.store(segments, Ordering::Relaxed);
    }

    /// Publishes what requests and scrapes read without asking the shard, after any change of
    /// the log's offsets, segments or leader epochs.
    fn publish_offsets(&self, log: &PartitionLog) {
        self.publish_size(log);
        self.publish_log_start_epoch(log);
        self.log_start_offset
            .store(log.log_start_offset(), Ordering::Release);
        self.log_end_offset
            .store(log.log_end_offset(), Ordering::Release);
        self.refresh_high_watermark();
    }

    /// The replication state, locked (briefly: no I/O is done under it).
    pub fn replication(&self) -> std::sync::MutexGuard<'_, Replication> {
        self.replication
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Recomputes the high watermark from the replication state: on a leader the smallest log
    /// end offset of the ISR (never backwards), elsewhere at most the log end offset. Returns
    /// whether it moved.
    pub fn refresh_high_watermark(&self) -> bool {
        let replication = self.replication();
        let log_end = self.log_end_offset();
        let current = self.high_watermark();
        let next = replication
            .leader_high_watermark(log_end, current, self.min_insync_replicas())
            .unwrap_or_else(|| current.min(log_end));
        self.high_watermark.store(next, Ordering::Release);
        let moved = next != current;
        if moved {
            self.high_watermark_moves.fetch_add(1, Ordering::Relaxed);
        }
        moved
    }

    /// Starts the high watermark of a log just opened at its checkpointed value (clamped to
    /// the log end offset), unless replication has already set one.
    pub(crate) fn restore_high_watermark(&self, checkpointed: i64, log_end_offset: i64) {
        let restored = checkpointed.clamp(0, log_end_offset.max(0));
        let _ =
            self.high_watermark
                .compare_exchange(0, restored, Ordering::AcqRel, Ordering::Acquire);
    }

    /// A follower's high watermark: the leader's, clamped to the local log. Returns whether it
    /// moved.
    pub fn set_follower_high_watermark(&self, leader_high_watermark: i64) -> bool {
        let replication = self.replication();
        if replication.leader_epoch().is_some() {
            return false;
        }
        let next = leader_high_watermark.min(self.log_end_offset()).max(0);
        let previous = self.high_watermark.swap(next, Ordering::AcqRel);
        let moved = previous != next;
        if moved {
            self.high_watermark_moves.fetch_add(1, Ordering::Relaxed);
        }
        moved
    }
}

/// Bytes read from a log, and the offsets sampled with them.
#[derive(Debug, Clone)]
pub struct ReadResult {
    /// Whole batches, starting with the one holding the fetch offset (empty when none).
    pub records: Bytes,
    pub high_watermark: i64,
    pub log_start_offset: i64,
}

/// A follower's log after an append or a truncation: what its next fetch sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerLog {
    pub log_end_offset: i64,
    /// The latest epoch of its leader-epoch cache (`None` when empty).
    pub latest_epoch: Option<i32>,
}

/// Why the log manager could not run a command.
#[derive(Debug, thiserror::Error)]
pub enum LogManagerError {
    /// The log failed the operation (its Kafka code says why).
    #[error(transparent)]
    Log(#[from] LogError),
    /// This node has no (open) log for the partition.
    #[error("no log for {0} on this node")]
    NoLog(String),
    /// The log manager is shutting down.
    #[error("the log manager is shutting down")]
    ShuttingDown,
    /// The topic's configuration forbids the operation (POLICY_VIOLATION).
    #[error("{0}")]
    PolicyViolation(String),
    /// A fetch result for a partition this node no longer follows from that leader at that
    /// epoch (it leads it now, or follows another leader or epoch): never appended.
    #[error("{0} is no longer followed from leader {1} at leader epoch {2}")]
    NotFollowing(String, i32, i32),
}

impl LogManagerError {
    /// The Kafka error code a response carries for this failure.
    pub fn code(&self) -> i16 {
        match self {
            LogManagerError::Log(e) => e.kafka_code().code(),
            // NOT_LEADER_OR_FOLLOWER: retriable, the client refreshes its metadata.
            LogManagerError::NoLog(_) => 6,
            LogManagerError::ShuttingDown => 6,
            LogManagerError::PolicyViolation(_) => 44,
            // FENCED_LEADER_EPOCH: the fetch was made for an older leadership.
            LogManagerError::NotFollowing(..) => 74,
        }
    }
}

type Reply<T> = oneshot::Sender<Result<T, LogManagerError>>;

/// A command queued on its shard: [`Queued::outcome`] waits for its answer.
pub struct Queued<T>(oneshot::Receiver<Result<T, LogManagerError>>);

impl<T> Queued<T> {
    /// The command's result, once the shard has carried it out.
    pub async fn outcome(self) -> Result<T, LogManagerError> {
        self.0.await.map_err(|_| LogManagerError::ShuttingDown)?
    }
}

/// The partition logs of this node. Cheap to share (`Arc`).
pub struct LogManager {
    /// `log.dirs` as configured, usable or not (DescribeLogDirs lists them all).
    log_dirs: Vec<PathBuf>,
    shards: Vec<Shard>,
    partitions: DashMap<TopicPartition, Arc<PartitionState>>,
    /// How many of `partitions` each topic has: its broker topic metrics go with the last one
    /// (counted so that removing a partition does not scan every hosted log).
    topic_partitions: DashMap<String, usize>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
    /// Where leaders send ISR changes (set once by the node that sends AlterPartition).
    isr_changes: std::sync::OnceLock<crate::replication::IsrChanges>,
    /// Given to every partition's state; the shards read it (see `PartitionState`).
    high_watermark_moves: Arc<AtomicU64>,
    /// Given to every partition's state, which counts itself while offline; the shards record
    /// it (see `LogDirs::offline_replicas`).
    offline_replicas: Arc<AtomicUsize>,
    /// Bounds the blocking threads validating batches (see [`LogManager::validate_apart`]).
    validation_slots: tokio::sync::Semaphore,
    /// Record bytes read for fetches whose answers are not written yet.
    read_memory: Arc<ReadMemory>,
    /// The log dirs offline now (they never come back while the node runs).
    offline_dirs: tokio::sync::watch::Sender<std::collections::BTreeSet<PathBuf>>,
}

impl std::fmt::Debug for LogManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogManager")
            .field("shards", &self.shards.len())
            .field("partitions", &self.partitions.len())
            .finish()
    }
}

/// Settings of the log manager (broker configs, not per topic).
#[derive(Debug, Clone)]
pub struct LogManagerSettings {
    /// `log.dirs`.
    pub log_dirs: Vec<PathBuf>,
    /// Shard threads (at least 1).
    pub shards: usize,
    /// `log.retention.check.interval.ms`.
    pub retention_check_interval_ms: u64,
    /// `producer.id.expiration.ms`: idempotent producers idle this long are forgotten.
    pub producer_id_expiration_ms: u64,
    /// `producer.id.expiration.check.interval.ms`: how often they are looked for.
    pub producer_id_expiration_check_interval_ms: u64,
    /// `log.flush.offset.checkpoint.interval.ms`.
    pub checkpoint_interval_ms: u64,
    /// `replica.high.watermark.checkpoint.interval.ms`: how often `replication-offset-checkpoint`
    /// is written.
    pub high_watermark_checkpoint_interval_ms: u64,
    /// Open file handles shared by every segment.
    pub max_open_files: usize,
    /// `log.cleaner.enable`: compact `cleanup.policy=compact` logs.
    pub cleaner_enable: bool,
    /// `log.cleaner.backoff.ms`: how often each shard looks for logs to compact.
    pub cleaner_backoff_ms: u64,
    /// `log.cleaner.threads`: threads that run compaction passes.
    pub cleaner_threads: usize,
    /// `log.cleaner.dedupe.buffer.size`: memory for the cleaner threads' offset maps, shared out
    /// among them.
    pub cleaner_dedupe_buffer_bytes: u64,
    /// `log.cleaner.io.buffer.load.factor`: how full an offset map may get.
    pub cleaner_dedupe_load_factor: f64,
    /// `num.recovery.threads.per.data.dir`: logs opened (and recovered) at once per log dir,
    /// shared out among the shards.
    pub recovery_threads_per_dir: usize,
    /// `fetch.response.memory.bytes` (see [`ReadMemory`]; <= 0: unbounded).
    pub fetch_response_memory_bytes: i64,
}

#[cfg(test)]
impl LogManagerSettings {
    /// One shard over `dir` with Kafka's intervals and no cleaner.
    pub(crate) fn for_tests(dir: &std::path::Path) -> Self {
        LogManagerSettings {
            log_dirs: vec![dir.to_path_buf()],
            shards: 1,
            retention_check_interval_ms: 300_000,
            producer_id_expiration_ms: 86_400_000,
            producer_id_expiration_check_interval_ms: 600_000,
            checkpoint_interval_ms: 60_000,
            high_watermark_checkpoint_interval_ms: 5_000,
            max_open_files: 64,
            cleaner_enable: false,
            cleaner_backoff_ms: 15_000,
            cleaner_threads: 1,
            cleaner_dedupe_buffer_bytes: gregor_log::cleaner::DEFAULT_DEDUPE_BUFFER_BYTES,
            cleaner_dedupe_load_factor: gregor_log::cleaner::DEFAULT_DEDUPE_LOAD_FACTOR,
            recovery_threads_per_dir: 2,
            fetch_response_memory_bytes: 0,
        }
    }
}

/// Kafka's `LogManager.loadLog` refuses to start on a partition found in two log dirs: which
/// copy is current cannot be told, and serving either could hide the other's records.
fn refuse_duplicate_logs(dirs: &[gregor_log::log_dir::LogDir]) -> Result<(), String> {
    let online: Vec<_> = dirs.iter().filter(|dir| !dir.is_offline()).collect();
    if online.len() < 2 {
        return Ok(());
    }
    let mut found = std::collections::HashMap::new();
    for dir in online {
        let partitions = dir.partitions_on_disk().map_err(|e| {
            format!(
                "cannot list the partitions of {}: {e}",
                dir.path().display()
            )
        })?;
        for tp in partitions {
            if let Some(first) = found.insert(tp.clone(), dir.path()) {
                return Err(format!(
                    "Duplicate log directories for {} are found in both {} and {}: remove the one \
                     in the log directory known to have failed recently, then start the node again",
                    tp.dir_name(),
                    first.join(tp.dir_name()).display(),
                    dir.path().join(tp.dir_name()).display()
                ));
            }
        }
    }
    Ok(())
}

impl LogManager {
    /// Opens every log dir and starts the shard threads. Logs are opened (and recovered) when the
    /// metadata image says this node hosts them. A log dir that cannot be opened stays offline
    /// (an error in the log; its logs are served as offline, never created elsewhere); with no
    /// usable dir, or a partition found in two dirs, this fails.
    pub fn start(settings: LogManagerSettings) -> Result<Arc<Self>, String> {
        let files = gregor_log::files::FileCache::new(settings.max_open_files.max(16));
        let mut dirs = Vec::new();
        for path in &settings.log_dirs {
            match gregor_log::log_dir::LogDir::open(path.clone(), Arc::clone(&files)) {
                Ok(dir) => {
                    if dir.had_clean_shutdown() {
                        tracing::info!(log_dir = %path.display(), "clean shutdown file found: the logs of this dir skip recovery");
                    } else {
                        tracing::info!(log_dir = %path.display(), "no clean shutdown file: the logs of this dir recover what lies above their recovery points as they open");
                    }
                    // Leftovers of deletions interrupted by the last shutdown, and strays.
                    match dir.sweep_leftovers() {
                        Ok(leftovers) => {
                            for stray in leftovers.strays {
                                tracing::warn!(stray = %stray.display(), "a stray partition log moved aside earlier is still here: remove it once its records are not needed");
                            }
                        }
                        Err(error) => {
                            tracing::warn!(log_dir = %path.display(), %error, "cannot remove deleted logs");
                        }
                    }
                    dirs.push(dir);
                }
                Err(error) => {
                    tracing::error!(log_dir = %path.display(), %error, "log dir unusable: it stays offline, and the partitions it holds are offline until it is repaired and the node restarted");
                    dirs.push(gregor_log::log_dir::LogDir::unusable(
                        path.clone(),
                        Arc::clone(&files),
                        &error,
                    ));
                }
            }
        }
        if dirs.iter().all(|dir| dir.is_offline()) {
            return Err(format!(
                "no usable log dir among {:?} (log.dirs)",
                settings.log_dirs
            ));
        }
        refuse_duplicate_logs(&dirs)?;
        let offline_dirs = tokio::sync::watch::Sender::new(std::collections::BTreeSet::new());
        for dir in &dirs {
            let offline = offline_dirs.clone();
            dir.on_offline(Arc::new(move |path: &std::path::Path| {
                offline.send_if_modified(|dirs| dirs.insert(path.to_path_buf()));
            }));
            dir.on_flush(Arc::new(gregor_metrics::log_flushed));
        }
        let dirs = Arc::new(shard::LogDirs::new(dirs));
        let count = settings.shards.max(1);
        let mut shards = Vec::with_capacity(count);
        let mut threads = Vec::with_capacity(count);
        let cleaners = if settings.cleaner_enable {
            Some(
                cleaner::Cleaners::start(
                    settings.cleaner_threads,
                    settings.cleaner_dedupe_buffer_bytes,
                    settings.cleaner_dedupe_load_factor,
                )
                .map_err(|e| format!("cannot start the log cleaner threads: {e}"))?,
            )
        } else {
            None
        };
        for index in 0..count {
            let (shard, worker) =
                shard::spawn(index, Arc::clone(&dirs), &settings, cleaners.clone())
                    .map_err(|e| format!("cannot start log shard thread {index}: {e}"))?;
            shards.push(shard);
            threads.push(worker);
        }
        let manager = Arc::new(LogManager {
            log_dirs: settings.log_dirs.clone(),
            shards,
            partitions: DashMap::new(),
            topic_partitions: DashMap::new(),
            threads: Mutex::new(threads),
            isr_changes: std::sync::OnceLock::new(),
            high_watermark_moves: Arc::clone(&dirs.high_watermark_moves),
            offline_replicas: Arc::clone(&dirs.offline_replicas),
            validation_slots: tokio::sync::Semaphore::new(VALIDATIONS_AT_ONCE),
            read_memory: ReadMemory::new(settings.fetch_response_memory_bytes),
            offline_dirs,
        });
        let logs: std::sync::Weak<dyn gregor_metrics::partition_logs::PartitionLogs> =
            Arc::downgrade(&manager) as _;
        gregor_metrics::partition_logs::register(logs);
        Ok(manager)
    }

    /// Follows the log dirs that are offline (each goes offline once, for good).
    pub fn offline_dirs(
        &self,
    ) -> tokio::sync::watch::Receiver<std::collections::BTreeSet<PathBuf>> {
        self.offline_dirs.subscribe()
    }

    /// `log.dirs` as configured, usable or not.
    pub fn log_dirs(&self) -> &[PathBuf] {
        &self.log_dirs
    }

    /// The budget of record bytes read for fetch answers not written yet.
    pub fn read_memory(&self) -> &Arc<ReadMemory> {
        &self.read_memory
    }

    /// The state of a partition's log, if this node hosts it.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<Arc<PartitionState>> {
        self.partitions
            .get(&TopicPartition::new(topic, partition))
            .map(|s| Arc::clone(s.value()))
    }

    /// Number of partition logs this node hosts.
    pub fn partition_count(&self) -> usize {
        self.partitions.len()
    }

    fn shard_of(&self, tp: &TopicPartition) -> usize {
        shard_of(tp, self.shards.len())
    }

    /// Gathers metadata changes for the shards; they reach them when [`LogChanges::send`] is
    /// called.
    pub(crate) fn changes(&self) -> LogChanges<'_> {
        LogChanges {
            manager: self,
            per_shard: (0..self.shards.len()).map(|_| Vec::new()).collect(),
            hosted_before_start: false,
        }
    }

    fn new_state(
        &self,
        tp: &TopicPartition,
        topic_id: uuid::Uuid,
        shard: usize,
        min_insync_replicas: i32,
        config: &Arc<LogConfig>,
    ) -> Arc<PartitionState> {
        let state = Arc::new(PartitionState {
            topic_id,
            shard,
            high_watermark: AtomicI64::new(0),
            log_start_offset: AtomicI64::new(0),
            log_start_epoch: AtomicI32::new(-1),
            log_end_offset: AtomicI64::new(0),
            size: AtomicU64::new(0),
            segments: AtomicU32::new(0),
            min_insync_replicas: AtomicI32::new(min_insync_replicas),
            config: ArcSwap::new(Arc::clone(config)),
            open: AtomicBool::new(false),
            offline: AtomicU8::new(0),
            offline_replicas: Arc::clone(&self.offline_replicas),
            appended: Notify::new(),
            replication: Mutex::new(Replication::default()),
            high_watermark_moves: Arc::clone(&self.high_watermark_moves),
        });
        // Never replaces a state: `ensure` removes a recreated topic's old one first.
        self.partitions.insert(tp.clone(), Arc::clone(&state));
        *self.topic_partitions.entry(tp.topic.clone()).or_default() += 1;
        state
    }

    /// After `tp`'s state left `partitions`: when it was its topic's last, the topic's broker
    /// topic metrics go too (Kafka's `ReplicaManager.maybeRemoveTopicMetrics`), so a topic
    /// re-created under the same name counts from 0.
    fn partition_removed(&self, tp: &TopicPartition) {
        if let Some(mut count) = self.topic_partitions.get_mut(&tp.topic) {
            *count = count.saturating_sub(1);
        }
        // Checked under the map's lock: a partition of the topic added meanwhile keeps it.
        if self
            .topic_partitions
            .remove_if(&tp.topic, |_, count| *count == 0)
            .is_some()
        {
            gregor_metrics::remove_topic_metrics(&tp.topic);
        }
    }

    /// Topic-partitions currently hosted.
    pub(crate) fn hosted(&self) -> Vec<(TopicPartition, uuid::Uuid)> {
        self.partitions
            .iter()
            .map(|e| (e.key().clone(), e.value().topic_id))
            .collect()
    }

    async fn submit<T>(
        &self,
        state: &PartitionState,
        make: impl FnOnce(Reply<T>) -> DataCommand,
    ) -> Result<T, LogManagerError> {
        self.queue(state, make).await?.outcome().await
    }

    /// Queues a command on the partition's shard, behind every command queued before it.
    async fn queue<T>(
        &self,
        state: &PartitionState,
        make: impl FnOnce(Reply<T>) -> DataCommand,
    ) -> Result<Queued<T>, LogManagerError> {
        let (reply, answer) = oneshot::channel();
        self.shards[state.shard].send(make(reply)).await?;
        Ok(Queued(answer))
    }

    /// Appends a produced batch (validated by the library) at `leader_epoch`.
    pub async fn append(
        &self,
        topic: &str,
        partition: i32,
        records: Bytes,
        leader_epoch: i32,
    ) -> Result<AppendInfo, LogManagerError> {
        self.queue_append(topic, partition, ProducedBatch::Raw(records), leader_epoch)
            .await?
            .outcome()
            .await
    }

    /// Queues a produced batch's append on its shard, behind every command queued before it,
    /// and returns where its outcome arrives: a caller knows its appends are in order before
    /// it waits for them (a connection serving its next Produce meanwhile relies on it).
    pub async fn queue_append(
        &self,
        topic: &str,
        partition: i32,
        batch: ProducedBatch,
        leader_epoch: i32,
    ) -> Result<Queued<AppendInfo>, LogManagerError> {
        let tp = TopicPartition::new(topic, partition);
        let state = self.serving(&tp, true)?;
        self.queue(&state, |reply| DataCommand::Append {
            tp,
            batch,
            leader_epoch,
            reply,
        })
        .await
    }

    /// Validates a produced batch of `topic`-`partition` on a blocking thread with the log's
    /// `config` (its [`PartitionState::config`]), for [`LogManager::queue_append`]. A batch
    /// that must be decompressed or recompressed can take seconds (a decompression bomb); on
    /// the shard thread that would stall every partition of the shard, reads included.
    pub async fn validate_apart(
        &self,
        config: Arc<LogConfig>,
        topic: &str,
        partition: i32,
        records: Bytes,
    ) -> Result<ProducedBatch, LogManagerError> {
        let _slot = self
            .validation_slots
            .acquire()
            .await
            .map_err(|_| LogManagerError::ShuttingDown)?;
        let name = TopicPartition::new(topic, partition).dir_name();
        tokio::task::spawn_blocking(move || {
            gregor_log::validate::validate(&records, &config, now_ms(), &name)
                .map(|batch| ProducedBatch::Validated(Box::new(batch.into_owned())))
        })
        .await
        .map_err(|_| LogManagerError::ShuttingDown)?
        .map_err(|rejection| LogManagerError::Log(LogError::from(rejection)))
    }

    /// Reads whole batches from `offset`, up to `max_bytes` (the whole first batch when
    /// `min_one_batch`), below the high watermark.
    pub async fn read(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: u64,
        min_one_batch: bool,
    ) -> Result<ReadResult, LogManagerError> {
        let tp = TopicPartition::new(topic, partition);
        let state = self.serving(&tp, false)?;
        self.submit(&state, |reply| DataCommand::Read {
            tp,
            offset,
            max_bytes,
            min_one_batch,
            reply,
        })
        .await
    }

    /// Like [`LogManager::read`], for a log that may still be being opened: the shard opens it
    /// before it serves the read (the group coordinator loads a partition as soon as it leads it).
    pub async fn read_when_open(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: u64,
    ) -> Result<ReadResult, LogManagerError> {
        let tp = TopicPartition::new(topic, partition);
        let state = self.serving(&tp, true)?;
        self.submit(&state, |reply| DataCommand::Read {
            tp,
            offset,
            max_bytes,
            min_one_batch: true,
            reply,
        })
        .await
    }

    /// ListOffsets: the offset `query` names, with its timestamp and leader epoch; `None` when
    /// no record matches.
    pub async fn offset_lookup(
        &self,
        topic: &str,
        partition: i32,
        query: OffsetQuery,
    ) -> Result<Option<OffsetMatch>, LogManagerError> {
        let tp = TopicPartition::new(topic, partition);
        let state = self.serving(&tp, false)?;
        self.submit(&state, |reply| DataCommand::Lookup { tp, query, reply })
            .await
    }

    /// The state of a log that serves requests (`or_opening`: or is being opened).
    fn serving(
        &self,
        tp: &TopicPartition,
        or_opening: bool,
    ) -> Result<Arc<PartitionState>, LogManagerError> {
        let state = self
            .partitions
            .get(tp)
            .map(|s| Arc::clone(s.value()))
            .ok_or_else(|| LogManagerError::NoLog(tp.dir_name()))?;
        if state.is_offline() {
            return Err(LogManagerError::Log(LogError::LogDirOffline(
                PathBuf::from(tp.dir_name()),
            )));
        }
        if !(state.is_serving() || or_opening && state.is_opening()) {
            return Err(LogManagerError::NoLog(tp.dir_name()));
        }
        Ok(state)
    }

    /// Reads whole batches from `offset` for a follower: up to the log end offset, not the high
    /// watermark.
    pub async fn read_for_follower(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: u64,
        min_one_batch: bool,
    ) -> Result<ReadResult, LogManagerError> {
        let tp = TopicPartition::new(topic, partition);
        let state = self.serving(&tp, false)?;
        self.submit(&state, |reply| DataCommand::ReadToLogEnd {
            tp,
            offset,
            max_bytes,
            min_one_batch,
            reply,
        })
        .await
    }

    /// OffsetForLeaderEpoch: the largest epoch ≤ `epoch` this log knows and where it ends.
    pub async fn end_offset_for_epoch(
        &self,
        topic: &str,
        partition: i32,
        epoch: i32,
    ) -> Result<(i32, i64), LogManagerError> {
        let tp = TopicPartition::new(topic, partition);
        let state = self.serving(&tp, false)?;
        self.submit(&state, |reply| DataCommand::EpochEndOffset {
            tp,
            epoch,
            reply,
        })
        .await
    }

    /// Appends batches fetched from the leader as they are (offsets and epochs kept).
    pub async fn append_as_follower(
        &self,
        topic: &str,
        partition: i32,
        fetched_from: (i32, i32),
        records: Bytes,
    ) -> Result<FollowerLog, LogManagerError> {
        let tp = TopicPartition::new(topic, partition);
        let state = self.serving(&tp, false)?;
        self.submit(&state, |reply| DataCommand::AppendReplicated {
            tp,
            fetched_from,
            records,
            reply,
        })
        .await
    }

    /// Removes every record at or past `offset` (a follower's divergent tail).
    pub async fn truncate_to(
        &self,
        topic: &str,
        partition: i32,
        fetched_from: (i32, i32),
        offset: i64,
    ) -> Result<FollowerLog, LogManagerError> {
        self.truncate_follower(topic, partition, fetched_from, offset, false)
            .await
    }

    /// A follower's log cut to `offset` (`truncate_to`), or with `fully` emptied to start at
    /// `offset`, its leader's log start past the follower's end (Kafka's
    /// `truncateFullyAndStartAt`).
    pub async fn truncate_follower(
        &self,
        topic: &str,
        partition: i32,
        fetched_from: (i32, i32),
        offset: i64,
        fully: bool,
    ) -> Result<FollowerLog, LogManagerError> {
        let tp = TopicPartition::new(topic, partition);
        let state = self.serving(&tp, false)?;
        self.submit(&state, |reply| DataCommand::Truncate {
            tp,
            fetched_from,
            offset,
            fully,
            reply,
        })
        .await
    }

    /// Where a follower's log ends and the epoch of its last batch.
    pub async fn follower_log(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<FollowerLog, LogManagerError> {
        let tp = TopicPartition::new(topic, partition);
        let state = self.serving(&tp, false)?;
        self.submit(&state, |reply| DataCommand::FollowerLog { tp, reply })
            .await
    }

    /// Sets where leaders send ISR changes (once; later calls are ignored).
    pub fn set_isr_changes(&self, changes: crate::replication::IsrChanges) {
        let _ = self.isr_changes.set(changes);
    }

    /// Asks for an ISR change; `false` when nobody sends them (a single node without peers).
    pub fn request_isr_change(&self, change: crate::replication::IsrChange) -> bool {
        self.isr_changes
            .get()
            .is_some_and(|changes| changes.send(change).is_ok())
    }

    /// Waits until every log change published so far is applied: the logs the image names
    /// are open (recovered) or offline. The node is ready only then, as Kafka's broker serves
    /// requests only after its log manager has loaded the logs.
    pub async fn changes_applied(&self) {
        let mut applied = Vec::with_capacity(self.shards.len());
        for shard in &self.shards {
            let (done, shard_applied) = tokio::sync::oneshot::channel();
            shard.control(shard::Control::Barrier(done));
            applied.push(shard_applied);
        }
        for shard_applied in applied {
            let _ = shard_applied.await;
        }
    }

    /// Every hosted partition with its state (for the ISR shrink scan).
    pub fn partitions(&self) -> Vec<(TopicPartition, Arc<PartitionState>)> {
        self.partitions
            .iter()
            .map(|e| (e.key().clone(), Arc::clone(e.value())))
            .collect()
    }

    /// Clean shutdown: every shard closes its logs, then each log dir writes its checkpoints and
    /// the clean-shutdown marker. Blocking: call it from a blocking thread.
    pub fn shutdown(&self, broker_epoch: i64) {
        let (done, finished) = std::sync::mpsc::channel();
        for shard in &self.shards {
            shard.control(Control::Shutdown {
                broker_epoch,
                done: done.clone(),
            });
        }
        drop(done);
        let mut logs = Vec::new();
        while let Ok(shard_logs) = finished.recv() {
            logs.extend(shard_logs);
        }
        if let Some(first) = self.shards.first() {
            first.dirs.shutdown(logs, broker_epoch);
        }
        let threads = std::mem::take(
            &mut *self
                .threads
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        for thread in threads {
            if thread.join().is_err() {
                tracing::error!("a log shard thread panicked");
            }
        }
    }
}

/// The `kafka_log_log_*` gauges of a scrape come from the states the shards publish for
/// requests: nothing is registered per partition, and the append path stores nothing more
/// than its offsets and the log's size.
impl gregor_metrics::partition_logs::PartitionLogs for LogManager {
    fn for_each_log(
        &self,
        each: &mut dyn FnMut(&str, i32, gregor_metrics::partition_logs::LogGauges),
    ) {
        for entry in self.partitions.iter() {
            // A log still opening has no offsets yet; an offline one has none Kafka shows.
            if entry.value().is_serving() {
                each(
                    &entry.key().topic,
                    entry.key().partition,
                    entry.value().log_gauges(),
                );
            }
        }
    }
}

/// Metadata changes for the shards, gathered while a publisher walks a delta and sent as one
/// message per shard: a 1,000-partition topic costs each shard one channel message, not 1,000
/// (and the publisher, on the path of the request that created the topic, a few allocations
/// instead of a channel slot per partition). Each shard applies its changes in the order they
/// were made.
#[must_use = "the changes reach the shards only when sent"]
pub(crate) struct LogChanges<'a> {
    manager: &'a LogManager,
    per_shard: Vec<Vec<Change>>,
    /// Whether the logs opened are ones this node hosted before it started (its first image),
    /// not partitions just assigned to it: see [`Change::Open`].
    hosted_before_start: bool,
}

impl LogChanges<'_> {
    /// Marks the logs opened from here on as hosted before this node started (its first image):
    /// one not found in an online dir while a dir is offline is not created again elsewhere.
    pub(crate) fn hosted_before_start(&mut self) {
        self.hosted_before_start = true;
    }

    /// Opens (or reconfigures) the log of a hosted partition.
    pub(crate) fn ensure(
        &mut self,
        tp: TopicPartition,
        topic_id: uuid::Uuid,
        config: &Arc<LogConfig>,
        min_insync_replicas: i32,
    ) {
        let manager = self.manager;
        let shard = manager.shard_of(&tp);
        let existing = manager.partitions.get(&tp).map(|s| Arc::clone(s.value()));
        let state = match existing {
            Some(state) if state.topic_id == topic_id => {
                state
                    .min_insync_replicas
                    .store(min_insync_replicas, Ordering::Release);
                state.config.store(Arc::clone(config));
                let config = Arc::clone(config);
                self.per_shard[shard].push(Change::Configure { tp, config });
                return;
            }
            Some(_) => {
                // Same name, new topic id: the old topic was deleted and recreated.
                self.remove(&tp);
                manager.new_state(&tp, topic_id, shard, min_insync_replicas, config)
            }
            None => manager.new_state(&tp, topic_id, shard, min_insync_replicas, config),
        };
        let config = Arc::clone(config);
        let hosted_before_start = self.hosted_before_start;
        self.per_shard[shard].push(Change::Open {
            tp,
            config,
            state,
            hosted_before_start,
        });
    }

    /// Stops serving a partition and deletes its log (rename to `-delete`, removal after
    /// `file.delete.delay.ms`).
    pub(crate) fn remove(&mut self, tp: &TopicPartition) {
        if let Some((tp, state)) = self.manager.partitions.remove(tp) {
            self.manager.partition_removed(&tp);
            state.mark_removed();
            state.open.store(false, Ordering::Release);
            state.appended.notify_waiters();
            self.per_shard[state.shard].push(Change::Delete { tp });
        }
    }

    /// Records that this node leads the partition from `epoch` on (in its leader-epoch cache,
    /// at its log end offset).
    pub(crate) fn become_leader(&mut self, tp: &TopicPartition, epoch: i32) {
        if let Some(state) = self.manager.partitions.get(tp) {
            let tp = tp.clone();
            self.per_shard[state.shard].push(Change::BecomeLeader { tp, epoch });
        }
    }

    /// Moves aside the logs on disk that `hosted` says this node does not host (see
    /// [`Change::DiscardStrays`]), after the changes gathered so far.
    pub(crate) fn discard_strays(&mut self, hosted: shard::HostedHere) {
        let shards = self.per_shard.len();
        for changes in &mut self.per_shard {
            changes.push(Change::DiscardStrays {
                hosted: Arc::clone(&hosted),
                shards,
            });
        }
    }

    /// Hands each shard its changes.
    pub(crate) fn send(self) {
        for (shard, changes) in self.manager.shards.iter().zip(self.per_shard) {
            if !changes.is_empty() {
                shard.control(Control::Changes(changes));
            }
        }
    }
}

/// A ListOffsets lookup the log answers from its indexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetQuery {
    /// The first record with timestamp ≥ this.
    Timestamp(i64),
    /// The record with the largest timestamp (KIP-734).
    MaxTimestamp,
}

/// Now, in milliseconds since the epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The shard of a partition's log among `shards`: a topic's partitions go round robin over
/// the shards from one its name picks, so a Produce or Fetch of several partitions of a topic
/// has every shard working on it (hashing each partition on its own put three of a 4-partition
/// topic's partitions on one of two shards).
fn shard_of(tp: &TopicPartition, shards: usize) -> usize {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    tp.topic.hash(&mut hasher);
    let shards = shards.max(1) as u64;
    let first = hasher.finish() % shards;
    ((first + u64::from(tp.partition.unsigned_abs()) % shards) % shards) as usize
}
