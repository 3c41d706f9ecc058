//! One shard thread: owns some partition logs and runs every file operation on them.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use crossbeam::channel::{self, Receiver, Sender, TrySendError};
use gregor_log::checkpoint::TopicPartition;
use gregor_log::config::LogConfig;
use gregor_log::error::LogError;
use gregor_log::log::{AppendInfo, OffsetMatch, PartitionLog, RolledSegment};
use gregor_log::log_dir::{LogDir, LogOpener};

use gregor_log::producer_state::ProducerEntry;

use super::admin::LogSize;
use super::cleaner::{Cleaned, CleanerTask, Cleaners};
use super::{
    now_ms, FollowerLog, LogManagerError, LogManagerSettings, OffsetQuery, PartitionState,
    ProducedBatch, ReadResult, Reply, DATA_CHANNEL_CAPACITY,
};
use crate::partition_runs::PartitionRuns;

/// Requests from handlers.
pub(super) enum DataCommand {
    Append {
        tp: TopicPartition,
        batch: ProducedBatch,
        leader_epoch: i32,
        reply: Reply<AppendInfo>,
    },
    Read {
        tp: TopicPartition,
        offset: i64,
        max_bytes: u64,
        min_one_batch: bool,
        reply: Reply<ReadResult>,
    },
    Lookup {
        tp: TopicPartition,
        query: OffsetQuery,
        reply: Reply<Option<OffsetMatch>>,
    },
    /// DeleteRecords: raise the log start offset (`-1`: to the high watermark).
    DeleteRecords {
        tp: TopicPartition,
        offset: i64,
        reply: Reply<i64>,
    },
    /// A follower raises its log start offset to its leader's (capped at its own high
    /// watermark), as Kafka's fetcher does after each fetch.
    FollowLogStart {
        tp: TopicPartition,
        offset: i64,
        reply: Reply<i64>,
    },
    /// DescribeProducers: the producers the log remembers.
    Producers {
        tp: TopicPartition,
        reply: Reply<Vec<ProducerEntry>>,
    },
    /// DescribeLogDirs: every log of this shard, with its dir and size.
    Sizes { reply: Reply<Vec<LogSize>> },
    /// A follower's read: up to the log end offset.
    ReadToLogEnd {
        tp: TopicPartition,
        offset: i64,
        max_bytes: u64,
        min_one_batch: bool,
        reply: Reply<ReadResult>,
    },
    EpochEndOffset {
        tp: TopicPartition,
        epoch: i32,
        reply: Reply<(i32, i64)>,
    },
    AppendReplicated {
        tp: TopicPartition,
        /// The leader and leader epoch the records were fetched from.
        fetched_from: (i32, i32),
        records: Bytes,
        reply: Reply<FollowerLog>,
    },
    Truncate {
        tp: TopicPartition,
        /// The leader and leader epoch whose answer asked for the truncation.
        fetched_from: (i32, i32),
        offset: i64,
        /// Every record goes and the log starts empty at `offset`, past its end.
        fully: bool,
        reply: Reply<FollowerLog>,
    },
    FollowerLog {
        tp: TopicPartition,
        reply: Reply<FollowerLog>,
    },
}

/// Changes from the metadata image, and shutdown.
pub(super) enum Control {
    /// Applied in order (see [`super::LogChanges`]).
    Changes(Vec<Change>),
    /// Answered once every change queued before it is applied (its logs open or offline).
    Barrier(tokio::sync::oneshot::Sender<()>),
    Shutdown {
        broker_epoch: i64,
        done: std::sync::mpsc::Sender<Vec<(usize, PartitionLog)>>,
    },
}

/// One partition's change from the metadata image.
pub(super) enum Change {
    Open {
        tp: TopicPartition,
        /// Shared by the partitions of a topic.
        config: Arc<LogConfig>,
        state: Arc<PartitionState>,
        /// In the node's first image: a log it had before it started, which may lie in a dir
        /// that is offline now (Kafka's `getOrCreateLog` with `isNew` false refuses to create
        /// it while any dir is offline), not a partition just assigned to it.
        hosted_before_start: bool,
    },
    Configure {
        tp: TopicPartition,
        config: Arc<LogConfig>,
    },
    Delete {
        tp: TopicPartition,
    },
    BecomeLeader {
        tp: TopicPartition,
        epoch: i32,
    },
    /// Moves aside (`-stray`, kept) this shard's logs on disk that the image does not host here
    /// (Kafka's stray logs: topics deleted, or partitions moved away, while this node was down).
    DiscardStrays {
        hosted: HostedHere,
        shards: usize,
    },
}

/// Whether the image hosts a partition on this node.
pub(super) type HostedHere = Arc<dyn Fn(&TopicPartition) -> bool + Send + Sync>;

/// The log dirs, shared by the shards (locked only to open, delete and checkpoint logs).
pub(super) struct LogDirs {
    dirs: Vec<Mutex<LogDir>>,
    /// Logs placed in each dir (open, or being opened).
    hosted: Vec<std::sync::atomic::AtomicUsize>,
    /// Held while a dir is chosen and counted, so shards placing partitions at the same time
    /// see each other's choices (a new topic's partitions spread over the dirs).
    placing: Mutex<()>,
    /// See `PartitionState::high_watermark_moves`; a deleted log counts as a move too (its
    /// entry leaves the checkpoint).
    pub(super) high_watermark_moves: Arc<std::sync::atomic::AtomicU64>,
    /// Hosted partitions that are offline, counted by their states (`PartitionState::
    /// mark_offline`) and recorded in the gauges with the dirs'.
    pub(super) offline_replicas: Arc<std::sync::atomic::AtomicUsize>,
}

impl LogDirs {
    pub(super) fn new(dirs: Vec<LogDir>) -> Self {
        LogDirs {
            hosted: dirs
                .iter()
                .map(|_| std::sync::atomic::AtomicUsize::new(0))
                .collect(),
            dirs: dirs.into_iter().map(Mutex::new).collect(),
            placing: Mutex::new(()),
            high_watermark_moves: Arc::default(),
            offline_replicas: Arc::default(),
        }
    }

    fn lock(&self, index: usize) -> std::sync::MutexGuard<'_, LogDir> {
        self.dirs[index]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn len(&self) -> usize {
        self.dirs.len()
    }

    /// The dir already holding the partition, else the online one hosting the fewest logs
    /// (Kafka's `nextLogDirs`), counted at once as hosting it; [`LogDirs::unplace`] takes a
    /// log that failed to open off the count. A log `hosted_before_start` that no online dir
    /// holds while a dir is offline gets none: it may be in the offline dir, and a new empty
    /// log elsewhere would serve its offsets again with other records.
    fn place(&self, tp: &TopicPartition, hosted_before_start: bool) -> Option<usize> {
        let _placing = self
            .placing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let online: Vec<usize> = (0..self.dirs.len())
            .filter(|i| !self.lock(*i).is_offline())
            .collect();
        if hosted_before_start && online.len() < self.dirs.len() {
            let name = tp.dir_name();
            let found = online
                .iter()
                .copied()
                .find(|i| self.lock(*i).path().join(&name).is_dir())?;
            self.hosted[found].fetch_add(1, Ordering::Relaxed);
            return Some(found);
        }
        let dir = if let [only] = online[..] {
            // One online dir: nothing to choose, no directory to look up.
            only
        } else {
            let name = tp.dir_name();
            online
                .iter()
                .copied()
                .find(|i| self.lock(*i).path().join(&name).is_dir())
                .or_else(|| {
                    online
                        .iter()
                        .copied()
                        .min_by_key(|i| self.hosted[*i].load(Ordering::Relaxed))
                })?
        };
        self.hosted[dir].fetch_add(1, Ordering::Relaxed);
        Some(dir)
    }

    fn unplace(&self, dir: usize) {
        self.hosted[dir].fetch_sub(1, Ordering::Relaxed);
    }

    /// Which dirs are offline, in index order.
    fn offline(&self) -> Vec<bool> {
        (0..self.dirs.len())
            .map(|i| self.lock(i).is_offline())
            .collect()
    }

    /// Records the open logs of every shard, the offline ones and the offline dirs in the
    /// broker's gauges.
    fn record_gauges(&self, offline_dirs: &[bool]) {
        let partitions = self
            .hosted
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .sum();
        gregor_metrics::hosted_logs(
            partitions,
            self.offline_replicas.load(Ordering::Relaxed),
            offline_dirs.iter().filter(|offline| **offline).count(),
        );
    }

    /// Each opened dir's path and whether it is online, in index order.
    pub(super) fn describe(&self) -> Vec<(PathBuf, bool)> {
        (0..self.dirs.len())
            .map(|i| {
                let dir = self.lock(i);
                (dir.path().to_path_buf(), !dir.is_offline())
            })
            .collect()
    }

    /// Clean shutdown of every dir with the logs it holds.
    pub(super) fn shutdown(&self, mut logs: Vec<(usize, PartitionLog)>, broker_epoch: i64) {
        let now = now_ms();
        for index in 0..self.dirs.len() {
            let mut dir = self.lock(index);
            if dir.is_offline() {
                continue;
            }
            let result = dir.shutdown(
                logs.iter_mut()
                    .filter(|(d, _)| *d == index)
                    .map(|(_, log)| log),
                broker_epoch,
                now,
            );
            match result {
                Ok(()) => tracing::info!(log_dir = %dir.path().display(), "log dir closed cleanly"),
                Err(error) => {
                    tracing::error!(log_dir = %dir.path().display(), %error, "log dir did not close cleanly")
                }
            }
        }
    }
}

/// The handle of one shard thread.
pub(super) struct Shard {
    data: Sender<DataCommand>,
    control: Sender<Control>,
    pub(super) dirs: Arc<LogDirs>,
}

impl Shard {
    pub(super) fn control(&self, command: Control) {
        if self.control.send(command).is_err() {
            tracing::warn!("log shard stopped; dropping a metadata change");
        }
    }

    /// Queues a data command; when the queue is full the wait happens on a blocking-pool thread.
    pub(super) async fn send(&self, command: DataCommand) -> Result<(), LogManagerError> {
        match self.data.try_send(command) {
            Ok(()) => Ok(()),
            Err(TrySendError::Disconnected(_)) => Err(LogManagerError::ShuttingDown),
            Err(TrySendError::Full(command)) => {
                let data = self.data.clone();
                tokio::task::spawn_blocking(move || data.send(command))
                    .await
                    .map_err(|_| LogManagerError::ShuttingDown)?
                    .map_err(|_| LogManagerError::ShuttingDown)
            }
        }
    }
}

struct Hosted {
    dir: usize,
    log: PartitionLog,
    state: Arc<PartitionState>,
}

impl Hosted {
    /// Moves the recovery point past a rolled segment the flusher made durable.
    fn rolled_flushed(&mut self, tp: &TopicPartition, rolled: &RolledSegment) {
        if let Err(error) = self.log.rolled_flushed(rolled) {
            tracing::error!(partition = %tp.dir_name(), %error, "cannot move the recovery point past a flushed segment");
            self.failed(&error);
        }
    }

    /// A storage error takes the partition offline (its log dir is already); waiting fetches
    /// and produces wake to see it.
    fn failed(&self, error: &gregor_log::error::LogError) {
        if error.is_storage_error() {
            self.state.mark_offline();
            self.state.appended.notify_waiters();
        }
    }
}

/// Fewer new logs than this per thread are opened on the shard's own thread.
const MIN_OPENS_PER_THREAD: usize = 64;

/// How long the shard leaves a batch of opens to its idle-priority helper alone (see
/// [`open_yielding_first`]): longer than answering the request that brought them takes.
const OPEN_GRACE: Duration = Duration::from_millis(20);

/// A log about to be opened (see [`Worker::open_all`]).
struct Opening {
    tp: TopicPartition,
    dir: usize,
    opener: LogOpener,
    config: Arc<LogConfig>,
    state: Arc<PartitionState>,
    /// The dir's checkpointed high watermark for the partition.
    high_watermark: Option<i64>,
}

/// An [`Opening`] after its open.
struct Opened {
    tp: TopicPartition,
    dir: usize,
    config: Arc<LogConfig>,
    state: Arc<PartitionState>,
    high_watermark: Option<i64>,
    elapsed: Duration,
}

impl Opening {
    fn open(self) -> (Opened, gregor_log::error::Result<PartitionLog>) {
        let started = Instant::now();
        let result = self.opener.open(
            Some(self.state.topic_id),
            Arc::clone(&self.config),
            now_ms(),
        );
        let opened = Opened {
            tp: self.tp,
            dir: self.dir,
            config: self.config,
            state: self.state,
            high_watermark: self.high_watermark,
            elapsed: started.elapsed(),
        };
        (opened, result)
    }
}

struct Worker {
    index: usize,
    dirs: Arc<LogDirs>,
    /// Boxed: a hash table keeps up to twice its entries' room in empty slots, and a log is
    /// hundreds of bytes (measured: 1,000,000 partitions took 1.1 GB of slots unboxed).
    logs: HashMap<TopicPartition, Box<Hosted>>,
    /// Renamed `-delete` directories and when to remove them.
    pending_deletes: Vec<(Instant, PathBuf)>,
    retention_every: Duration,
    /// `producer.id.expiration.check.interval.ms` and `producer.id.expiration.ms`.
    producer_expiration_every: Duration,
    producer_id_expiration_ms: i64,
    next_producer_expiration: Instant,
    checkpoint_every: Duration,
    high_watermark_checkpoint_every: Duration,
    next_high_watermark_checkpoint: Instant,
    next_retention: Instant,
    next_checkpoint: Instant,
    /// `None` with `log.cleaner.enable=false`.
    clean_every: Option<Duration>,
    next_clean: Instant,
    next_gauges: Instant,
    /// The dirs offline at the last look (see [`Worker::follow_offline_dirs`]).
    offline_dirs: Vec<bool>,
    /// The cleaner threads (`None` with `log.cleaner.enable=false`), and where they answer.
    cleaners: Option<Cleaners>,
    cleaned: Sender<Cleaned>,
    /// Partitions with a pass at a cleaner thread.
    cleaning: HashSet<TopicPartition>,
    /// Log dirs changed by the batch of metadata changes being applied.
    touched_dirs: Vec<usize>,
    /// Partitions of the batch being applied that found no online log dir, by topic: logged
    /// once per topic after the batch (a failed disk under a 1,000-partition topic is one
    /// line, not 1,000).
    unplaced: BTreeMap<String, PartitionRuns>,
    /// Logs the batch being applied renamed for deletion, by topic, log dir and delay: logged
    /// once per entry after the batch, as `unplaced` (each rename at DEBUG).
    scheduled_deletions: BTreeMap<(String, usize, u64), PartitionRuns>,
    /// This shard's flusher thread, which fsyncs the segments appends roll.
    flusher: Sender<(TopicPartition, RolledSegment)>,
    /// `LogDirs::high_watermark_moves` at this shard's last high-watermark checkpoint.
    checkpointed_high_watermark_moves: Option<u64>,
    /// Threads that open a batch's new logs at once: this shard's share of
    /// `num.recovery.threads.per.data.dir` over the log dirs.
    open_threads: usize,
}

/// fsyncs rolled segments in the order they were rolled, off the shard's thread: up to
/// `segment.bytes` of dirty data, which the appends after a roll need not wait for (Kafka's
/// `flush-log` task). Reports the flushed ones back; a failed flush has taken its log dir
/// offline. Ends when the shard does.
fn run_flusher(
    jobs: &Receiver<(TopicPartition, RolledSegment)>,
    flushed: &Sender<(TopicPartition, RolledSegment)>,
) {
    for (tp, rolled) in jobs {
        if let Err(error) = rolled.flush() {
            tracing::error!(partition = %tp.dir_name(), up_to = rolled.up_to(), %error, "cannot flush a rolled segment");
        } else if flushed.send((tp, rolled)).is_err() {
            return;
        }
    }
}

/// Starts shard `index`.
pub(super) fn spawn(
    index: usize,
    dirs: Arc<LogDirs>,
    settings: &LogManagerSettings,
    cleaners: Option<Cleaners>,
) -> std::io::Result<(Shard, std::thread::JoinHandle<()>)> {
    let (data_tx, data_rx) = channel::bounded(DATA_CHANNEL_CAPACITY);
    let (control_tx, control_rx) = channel::unbounded();
    let (cleaned_tx, cleaned_rx) = channel::unbounded();
    let (flush_tx, flush_rx) = channel::unbounded();
    let (flushed_tx, flushed_rx) = channel::unbounded();
    std::thread::Builder::new()
        .name(format!("log-flush-{index}"))
        .spawn(move || run_flusher(&flush_rx, &flushed_tx))?;
    let now = Instant::now();
    let retention_every = Duration::from_millis(settings.retention_check_interval_ms.max(1000));
    let checkpoint_every = Duration::from_millis(settings.checkpoint_interval_ms.max(1000));
    let producer_expiration_every =
        Duration::from_millis(settings.producer_id_expiration_check_interval_ms.max(1));
    let high_watermark_checkpoint_every =
        Duration::from_millis(settings.high_watermark_checkpoint_interval_ms.max(100));
    let worker = Worker {
        index,
        dirs: Arc::clone(&dirs),
        logs: HashMap::new(),
        pending_deletes: Vec::new(),
        retention_every,
        producer_expiration_every,
        producer_id_expiration_ms: i64::try_from(settings.producer_id_expiration_ms)
            .unwrap_or(i64::MAX),
        next_producer_expiration: now + producer_expiration_every,
        checkpoint_every,
        next_retention: now + retention_every,
        next_checkpoint: now + checkpoint_every,
        high_watermark_checkpoint_every,
        next_high_watermark_checkpoint: now + high_watermark_checkpoint_every,
        clean_every: cleaners
            .is_some()
            .then(|| Duration::from_millis(settings.cleaner_backoff_ms.max(100))),
        next_clean: now,
        next_gauges: now,
        offline_dirs: vec![false; dirs.len()],
        cleaners,
        cleaned: cleaned_tx,
        cleaning: HashSet::new(),
        touched_dirs: Vec::new(),
        unplaced: BTreeMap::new(),
        scheduled_deletions: BTreeMap::new(),
        flusher: flush_tx,
        checkpointed_high_watermark_moves: None,
        open_threads: (settings.recovery_threads_per_dir * dirs.len())
            .div_ceil(settings.shards.max(1))
            .max(1),
    };
    let thread = std::thread::Builder::new()
        .name(format!("log-shard-{index}"))
        .spawn(move || worker.run(&data_rx, &control_rx, &cleaned_rx, &flushed_rx))?;
    Ok((
        Shard {
            data: data_tx,
            control: control_tx,
            dirs,
        },
        thread,
    ))
}

/// How often a shard wakes for its periodic work when idle.
const TICK: Duration = Duration::from_millis(500);

impl Worker {
    fn run(
        mut self,
        data: &Receiver<DataCommand>,
        control: &Receiver<Control>,
        cleaned: &Receiver<Cleaned>,
        flushed: &Receiver<(TopicPartition, RolledSegment)>,
    ) {
        loop {
            // Metadata first: a log opened before a request was sent must be there to serve it.
            while let Ok(command) = control.try_recv() {
                if !self.on_control(command) {
                    return;
                }
            }
            crossbeam::select! {
                recv(control) -> command => match command {
                    Ok(command) => {
                        if !self.on_control(command) {
                            return;
                        }
                    }
                    Err(_) => return,
                },
                recv(data) -> command => match command {
                    Ok(command) => self.on_data(command),
                    Err(_) => return,
                },
                recv(cleaned) -> pass => {
                    if let Ok(pass) = pass {
                        self.on_cleaned(pass);
                    }
                }
                recv(flushed) -> done => {
                    if let Ok((tp, rolled)) = done {
                        if let Some(hosted) = self.logs.get_mut(&tp) {
                            hosted.rolled_flushed(&tp, &rolled);
                        }
                    }
                }
                default(TICK) => {}
            }
            self.periodic();
        }
    }

    fn on_control(&mut self, command: Control) -> bool {
        match command {
            Control::Changes(changes) => {
                // Changes come while the write that made them is still being answered, by
                // threads just woken; preparing a large batch first would hold this core from
                // them for about half a millisecond.
                std::thread::yield_now();
                let mut opening = Vec::new();
                // The partitions in `opening`: a set, as a restart's batch holds 500,000.
                let mut pending = HashSet::new();
                for change in changes {
                    match change {
                        Change::Open {
                            tp,
                            config,
                            state,
                            hosted_before_start,
                        } if !self.logs.contains_key(&tp) && !pending.contains(&tp) => {
                            if let Some(prepared) =
                                self.prepare_open(tp, config, state, hosted_before_start)
                            {
                                pending.insert(prepared.tp.clone());
                                opening.push(prepared);
                            }
                        }
                        change => {
                            pending.clear();
                            self.open_all(std::mem::take(&mut opening));
                            self.on_change(change);
                        }
                    }
                }
                self.open_all(opening);
                self.sync_touched_dirs();
                self.report_unplaced();
                self.report_scheduled_deletions();
            }
            Control::Barrier(done) => {
                let _ = done.send(());
            }
            Control::Shutdown { done, broker_epoch } => {
                tracing::debug!(shard = self.index, broker_epoch, "log shard stopping");
                self.checkpoint_high_watermarks();
                let logs = self
                    .logs
                    .drain()
                    .map(|(_, hosted)| {
                        hosted.state.open.store(false, Ordering::Release);
                        hosted.state.appended.notify_waiters();
                        (hosted.dir, hosted.log)
                    })
                    .collect();
                let _ = done.send(logs);
                return false;
            }
        }
        true
    }

    fn on_change(&mut self, change: Change) {
        match change {
            Change::Open {
                tp,
                config,
                state,
                hosted_before_start,
            } => self.open(tp, config, state, hosted_before_start),
            Change::Configure { tp, config } => {
                if let Some(hosted) = self.logs.get_mut(&tp) {
                    hosted.log.set_config(config);
                }
            }
            Change::Delete { tp } => self.delete(&tp),
            Change::DiscardStrays { hosted, shards } => self.discard_strays(&hosted, shards),
            Change::BecomeLeader { tp, epoch } => {
                if let Some(hosted) = self.logs.get_mut(&tp) {
                    match hosted.log.assign_leader_epoch(epoch) {
                        Ok(()) => hosted.state.publish_log_start_epoch(&hosted.log),
                        // The dir's failure was logged when it went offline.
                        Err(error @ LogError::LogDirOffline(_)) => hosted.failed(&error),
                        Err(error) => {
                            tracing::error!(partition = %tp.dir_name(), %error, "cannot record the new leader epoch");
                            hosted.failed(&error);
                        }
                    }
                    let dir = hosted.dir;
                    self.touch(dir);
                }
            }
        }
    }

    /// Notes a log dir whose entries a change made, renamed or wrote.
    fn touch(&mut self, dir: usize) {
        if !self.touched_dirs.contains(&dir) {
            self.touched_dirs.push(dir);
        }
    }

    /// One fsync per log dir after a batch of changes, instead of syncs per log: the new and
    /// renamed partition directories become durable together, and on a journaled file system
    /// the batch's metadata is committed here, on the shard, rather than by the next fsync of
    /// the metadata log sharing the file system (which would then wait for it).
    fn sync_touched_dirs(&mut self) {
        for dir in std::mem::take(&mut self.touched_dirs) {
            let shared = {
                let log_dir = self.dirs.lock(dir);
                if log_dir.is_offline() {
                    continue;
                }
                log_dir.shared()
            };
            if let Err(error) = shared.sync_directory() {
                tracing::error!(%error, "cannot sync the log dir after metadata changes");
            }
        }
    }

    fn report_unplaced(&mut self) {
        for (topic, partitions) in std::mem::take(&mut self.unplaced) {
            tracing::error!(
                %topic,
                count = partitions.count(),
                %partitions,
                "no online log dir for these partitions (none is online, or they were hosted here before the node started and no online dir holds them while another dir is offline: they may be in that dir and are not created again elsewhere): they answer KAFKA_STORAGE_ERROR until the node restarts with a working log dir"
            );
        }
    }

    fn report_scheduled_deletions(&mut self) {
        for ((topic, dir, delay_ms), partitions) in std::mem::take(&mut self.scheduled_deletions) {
            let log_dir = self.dirs.lock(dir).path().display().to_string();
            tracing::info!(
                %topic,
                count = partitions.count(),
                %partitions,
                %log_dir,
                delay_ms,
                "partition logs renamed with the -delete suffix and scheduled for deletion"
            );
        }
    }

    /// Writes every dir's `replication-offset-checkpoint` with this shard's high watermarks
    /// (every `replica.high.watermark.checkpoint.interval.ms`, and at a clean shutdown before
    /// the logs are handed back).
    fn checkpoint_high_watermarks(&mut self) {
        let moves = self.dirs.high_watermark_moves.load(Ordering::Relaxed);
        if self.checkpointed_high_watermark_moves == Some(moves) {
            return;
        }
        self.checkpointed_high_watermark_moves = Some(moves);
        for dir in 0..self.dirs.dirs.len() {
            let mut log_dir = self.dirs.lock(dir);
            if log_dir.is_offline() {
                continue;
            }
            let high_watermarks = self
                .logs
                .iter()
                .filter(|(_, h)| h.dir == dir)
                .map(|(tp, h)| (tp, h.state.high_watermark()));
            if let Err(error) = log_dir.checkpoint_high_watermarks(high_watermarks) {
                tracing::error!(log_dir = %log_dir.path().display(), %error, "high watermark checkpoint failed");
            }
        }
    }

    fn open(
        &mut self,
        tp: TopicPartition,
        config: Arc<LogConfig>,
        state: Arc<PartitionState>,
        hosted_before_start: bool,
    ) {
        if let Some(hosted) = self.logs.get_mut(&tp) {
            if hosted.state.topic_id == state.topic_id {
                // Already open: the new state takes over serving it.
                state.publish_offsets(&hosted.log);
                state.open.store(true, Ordering::Release);
                hosted.state = state;
                return;
            }
            self.delete(&tp);
        }
        if let Some(prepared) = self.prepare_open(tp, config, state, hosted_before_start) {
            self.open_all(vec![prepared]);
        }
    }

    /// Picks the log dir of a partition not open here and takes what its open needs from the
    /// dir; None (the partition marked offline) when no dir is online.
    fn prepare_open(
        &mut self,
        tp: TopicPartition,
        config: Arc<LogConfig>,
        state: Arc<PartitionState>,
        hosted_before_start: bool,
    ) -> Option<Opening> {
        let prepared = self.dirs.place(&tp, hosted_before_start).and_then(|dir| {
            let log_dir = self.dirs.lock(dir);
            let high_watermark = log_dir.high_watermark(&tp);
            let opener = log_dir.opener(tp.clone()).ok();
            drop(log_dir);
            if opener.is_none() {
                self.dirs.unplace(dir);
            }
            opener.map(|opener| (dir, opener, high_watermark))
        });
        let Some((dir, opener, high_watermark)) = prepared else {
            state.mark_offline();
            self.unplaced.entry(tp.topic).or_default().add(tp.partition);
            return None;
        };
        self.touch(dir);
        Some(Opening {
            tp,
            dir,
            opener,
            config,
            state,
            high_watermark,
        })
    }

    /// Opens the logs (file reads, and recovery after an unclean shutdown) on up to
    /// `open_threads` threads, then serves them in order. The opens hold no lock: the shards
    /// open their logs side by side, and a restart with many partitions keeps several reads in
    /// flight (measured: one at a time, 1,000,000 logs on a cold page cache took over 30 min).
    /// With one thread, several opens start on an idle-priority helper
    /// ([`open_yielding_first`]).
    fn open_all(&mut self, opening: Vec<Opening>) {
        if opening.is_empty() {
            return;
        }
        let threads = self
            .open_threads
            .min(opening.len().div_ceil(MIN_OPENS_PER_THREAD));
        let opened = if threads <= 1 && opening.len() > 1 {
            open_yielding_first(opening)
        } else if threads <= 1 {
            opening.into_iter().map(Opening::open).collect()
        } else {
            let mut chunks = Vec::with_capacity(threads);
            let per_thread = opening.len().div_ceil(threads);
            let mut opening = opening.into_iter();
            loop {
                let chunk: Vec<Opening> = opening.by_ref().take(per_thread).collect();
                if chunk.is_empty() {
                    break;
                }
                chunks.push(chunk);
            }
            std::thread::scope(|scope| {
                let workers: Vec<_> = chunks
                    .into_iter()
                    .map(|chunk| {
                        scope
                            .spawn(move || chunk.into_iter().map(Opening::open).collect::<Vec<_>>())
                    })
                    .collect();
                workers
                    .into_iter()
                    .flat_map(|worker| match worker.join() {
                        Ok(opened) => opened,
                        Err(panic) => std::panic::resume_unwind(panic),
                    })
                    .collect::<Vec<_>>()
            })
        };
        for (opening, result) in opened {
            self.serve_opened(opening, result);
        }
    }

    fn serve_opened(&mut self, opening: Opened, result: gregor_log::error::Result<PartitionLog>) {
        let Opened {
            tp,
            dir,
            config,
            state,
            high_watermark,
            elapsed,
        } = opening;
        match result {
            Ok(mut log) => {
                log.defer_rolled_flushes();
                // Kafka's `loadFromSnapshot` skips producers expired while the node was down;
                // kept, they would refuse a valid sequence until the next periodic check.
                log.remove_expired_producers(now_ms(), self.producer_id_expiration_ms);
                state.publish_offsets(&log);
                // A restarted replica serves what it knew to be committed before its first
                // fetch or ISR report moves it (Kafka's high-watermark checkpoint).
                if let Some(high_watermark) = high_watermark {
                    state.restore_high_watermark(high_watermark, log.log_end_offset());
                }
                state.replication().log_opened(log.log_end_offset());
                state.open.store(true, Ordering::Release);
                tracing::debug!(
                    partition = %tp.dir_name(),
                    log_end_offset = log.log_end_offset(),
                    elapsed_ms = elapsed.as_millis() as u64,
                    "partition log open"
                );
                self.logs.insert(tp, Box::new(Hosted { dir, log, state }));
            }
            Err(LogError::LogDirOffline(_)) => {
                self.dirs.unplace(dir);
                state.mark_offline();
                self.unplaced.entry(tp.topic).or_default().add(tp.partition);
            }
            Err(LogError::TopicIdMismatch { stored, .. }) => {
                self.replace_stray(tp, dir, config, state, stored);
            }
            Err(error) => {
                self.dirs.unplace(dir);
                tracing::error!(partition = %tp.dir_name(), %error, "cannot open the partition log");
                state.mark_offline();
            }
        }
    }

    /// Replaces the log of another topic of the same name, found where the partition's log
    /// should be (the topic was deleted and created again while this node was away): as
    /// Kafka's stray logs, it is moved aside and kept (`-stray`), and a new log is opened in its
    /// place. The node opens logs only once its image has caught up with the quorum, so the
    /// image's topic id is the current one.
    fn replace_stray(
        &mut self,
        tp: TopicPartition,
        dir: usize,
        config: Arc<LogConfig>,
        state: Arc<PartitionState>,
        stored: uuid::Uuid,
    ) {
        let discarded = self.dirs.lock(dir).discard_stray(&tp);
        let path = match discarded {
            Ok(path) => path,
            Err(error) => {
                self.dirs.unplace(dir);
                tracing::error!(partition = %tp.dir_name(), %error, "cannot move a stray partition log aside");
                state.mark_offline();
                return;
            }
        };
        tracing::warn!(
            partition = %tp.dir_name(),
            stray_topic_id = %stored,
            topic_id = %state.topic_id,
            renamed = %path.display(),
            "the log on disk belongs to another topic of this name: moved aside as a stray log and kept; remove it once its records are not needed"
        );
        let opener = self.dirs.lock(dir).opener(tp.clone());
        let (opened, result) = match opener {
            Ok(opener) => Opening {
                tp,
                dir,
                opener,
                config,
                state,
                high_watermark: None,
            }
            .open(),
            // The dir went offline meanwhile: served as any open that finds it so.
            Err(error) => (
                Opened {
                    tp,
                    dir,
                    config,
                    state,
                    high_watermark: None,
                    elapsed: Duration::ZERO,
                },
                Err(error),
            ),
        };
        self.serve_opened(opened, result);
    }

    /// See [`Change::DiscardStrays`]: the stray logs of this shard, in every online log dir,
    /// moved aside (`-stray`) and kept, as Kafka keeps them: a log the metadata does not place
    /// here may still hold the only copy of acknowledged records (a metadata log that lost its
    /// tail, a node started with the wrong `node.id`).
    fn discard_strays(&mut self, hosted: &HostedHere, shards: usize) {
        for dir in 0..self.dirs.len() {
            let mut log_dir = self.dirs.lock(dir);
            if log_dir.is_offline() {
                continue;
            }
            let on_disk = match log_dir.partitions_on_disk() {
                Ok(on_disk) => on_disk,
                Err(error) => {
                    tracing::error!(%error, "cannot list the log dir's partitions");
                    continue;
                }
            };
            let strays = on_disk.into_iter().filter(|tp| {
                super::shard_of(tp, shards) == self.index
                    && !self.logs.contains_key(tp)
                    && !hosted(tp)
            });
            let mut discarded: BTreeMap<String, PartitionRuns> = BTreeMap::new();
            for tp in strays {
                match log_dir.discard_stray(&tp) {
                    Ok(_) => discarded.entry(tp.topic).or_default().add(tp.partition),
                    Err(error) => {
                        tracing::error!(partition = %tp.dir_name(), %error, "cannot move a stray partition log aside")
                    }
                }
            }
            let path = log_dir.path().to_path_buf();
            drop(log_dir);
            for (topic, partitions) in discarded {
                tracing::warn!(
                    %topic,
                    %partitions,
                    log_dir = %path.display(),
                    "stray partition logs (not hosted here by the metadata) moved aside as <topic>-<partition>.<id>-stray and kept: remove them once their records are not needed"
                );
            }
        }
    }

    fn delete(&mut self, tp: &TopicPartition) {
        let Some(hosted) = self.logs.remove(tp) else {
            return;
        };
        self.dirs
            .high_watermark_moves
            .fetch_add(1, Ordering::Relaxed);
        self.touch(hosted.dir);
        hosted.state.open.store(false, Ordering::Release);
        hosted.state.appended.notify_waiters();
        let delay = hosted.log.config().file_delete_delay_ms.max(0) as u64;
        let dir = hosted.dir;
        self.dirs.unplace(dir);
        let renamed = self.dirs.lock(dir).delete_log(hosted.log);
        match renamed {
            Ok(path) => {
                tracing::debug!(partition = %tp.dir_name(), renamed = %path.display(), delay_ms = delay, "partition log scheduled for deletion");
                self.scheduled_deletions
                    .entry((tp.topic.clone(), dir, delay))
                    .or_default()
                    .add(tp.partition);
                self.pending_deletes
                    .push((Instant::now() + Duration::from_millis(delay), path));
            }
            Err(error) => {
                tracing::error!(partition = %tp.dir_name(), %error, "cannot delete the partition log")
            }
        }
    }

    fn on_data(&mut self, command: DataCommand) {
        match command {
            DataCommand::Append {
                tp,
                batch,
                leader_epoch,
                reply,
            } => {
                let result = self.with_log(&tp, |hosted| {
                    let info = match batch {
                        ProducedBatch::Raw(records) => {
                            hosted.log.append(&records, now_ms(), leader_epoch)?
                        }
                        ProducedBatch::Validated(batch) => {
                            hosted
                                .log
                                .append_validated(*batch, now_ms(), leader_epoch)?
                        }
                    };
                    hosted.state.publish_offsets(&hosted.log);
                    if !info.duplicate {
                        hosted.state.appended.notify_waiters();
                    }
                    Ok(info)
                });
                let _ = reply.send(result);
            }
            DataCommand::Read {
                tp,
                offset,
                max_bytes,
                min_one_batch,
                reply,
            } => {
                let result = self.with_log(&tp, |hosted| {
                    let high_watermark = hosted.state.high_watermark();
                    read_records(hosted, offset, max_bytes, high_watermark, min_one_batch)
                });
                let _ = reply.send(result);
            }
            DataCommand::ReadToLogEnd {
                tp,
                offset,
                max_bytes,
                min_one_batch,
                reply,
            } => {
                let result = self.with_log(&tp, |hosted| {
                    let log_end = hosted.log.log_end_offset();
                    read_records(hosted, offset, max_bytes, log_end, min_one_batch)
                });
                let _ = reply.send(result);
            }
            DataCommand::EpochEndOffset { tp, epoch, reply } => {
                let result =
                    self.with_log(&tp, |hosted| Ok(hosted.log.end_offset_for_epoch(epoch)));
                let _ = reply.send(result);
            }
            DataCommand::AppendReplicated {
                tp,
                fetched_from: (leader, leader_epoch),
                records,
                reply,
            } => {
                // A fetch answered by a leader this node no longer follows (it may lead the
                // partition now) must not reach the log. A leadership taken between this check
                // and the append is applied after it (`Change::BecomeLeader` comes through this
                // shard), so the records count as fetched before it, as in Kafka.
                if let Err(error) = following(
                    &tp,
                    self.logs.get(&tp).map(Box::as_ref),
                    leader,
                    leader_epoch,
                ) {
                    let _ = reply.send(Err(error));
                    return;
                }
                let result = self.with_log(&tp, |hosted| {
                    hosted.log.append_as_follower(&records, now_ms())?;
                    hosted.state.publish_offsets(&hosted.log);
                    hosted.state.appended.notify_waiters();
                    Ok(follower_log(&hosted.log))
                });
                let _ = reply.send(result);
            }
            DataCommand::Truncate {
                tp,
                fetched_from: (leader, leader_epoch),
                offset,
                fully,
                reply,
            } => {
                // As for an append: only the leader this node follows may cut its log.
                if let Err(error) = following(
                    &tp,
                    self.logs.get(&tp).map(Box::as_ref),
                    leader,
                    leader_epoch,
                ) {
                    let _ = reply.send(Err(error));
                    return;
                }
                let result = self.with_log(&tp, |hosted| {
                    let before = hosted.log.log_end_offset();
                    if fully {
                        hosted.log.truncate_fully_and_start_at(offset, now_ms())?;
                        tracing::info!(partition = %tp.dir_name(), from = before, start = offset, "emptied a log to start at its leader's log start");
                    } else {
                        hosted.log.truncate_to(offset, now_ms())?;
                    }
                    let after = hosted.log.log_end_offset();
                    if after < before {
                        tracing::info!(partition = %tp.dir_name(), from = before, to = after, "truncated a divergent log tail");
                    }
                    hosted.state.publish_offsets(&hosted.log);
                    Ok(follower_log(&hosted.log))
                });
                let _ = reply.send(result);
            }
            DataCommand::FollowerLog { tp, reply } => {
                let result = self.with_log(&tp, |hosted| Ok(follower_log(&hosted.log)));
                let _ = reply.send(result);
            }
            DataCommand::Lookup { tp, query, reply } => {
                let result = self.with_log(&tp, |hosted| match query {
                    OffsetQuery::Timestamp(ts) => hosted.log.offset_for_timestamp(ts),
                    OffsetQuery::MaxTimestamp => hosted.log.max_timestamp_offset(),
                });
                let _ = reply.send(result);
            }
            DataCommand::DeleteRecords { tp, offset, reply } => {
                let result = self.delete_records(&tp, offset);
                let _ = reply.send(result);
            }
            DataCommand::FollowLogStart { tp, offset, reply } => {
                let result = self.with_log(&tp, |hosted| {
                    let offset = offset.min(hosted.state.high_watermark());
                    let log_start = hosted.log.delete_records_before(offset)?;
                    hosted.state.publish_offsets(&hosted.log);
                    Ok(log_start)
                });
                let _ = reply.send(result);
            }
            DataCommand::Producers { tp, reply } => {
                let result =
                    self.with_log(&tp, |hosted| Ok(hosted.log.producers().cloned().collect()));
                let _ = reply.send(result);
            }
            DataCommand::Sizes { reply } => {
                let sizes = self
                    .logs
                    .iter()
                    .map(|(tp, hosted)| LogSize {
                        tp: tp.clone(),
                        dir: hosted.dir,
                        size: hosted.log.size(),
                    })
                    .collect();
                let _ = reply.send(Ok(sizes));
            }
        }
    }

    /// Kafka's `Partition.deleteRecordsOnLeader`: only with `cleanup.policy` delete, at most to
    /// the high watermark; the new log start offset is the answer (the low watermark).
    fn delete_records(&mut self, tp: &TopicPartition, offset: i64) -> Result<i64, LogManagerError> {
        let hosted = self
            .logs
            .get(tp)
            .ok_or_else(|| LogManagerError::NoLog(tp.dir_name()))?;
        if !hosted.log.config().cleanup_delete {
            return Err(LogManagerError::PolicyViolation(format!(
                "Records of partition {} can not be deleted due to the configured policy",
                tp.dir_name()
            )));
        }
        let high_watermark = hosted.state.high_watermark();
        let offset = if offset == -1 { high_watermark } else { offset };
        if offset < 0 || offset > high_watermark {
            return Err(LogManagerError::Log(
                gregor_log::error::LogError::OffsetOutOfRange {
                    offset,
                    log_start_offset: hosted.log.log_start_offset(),
                    log_end_offset: high_watermark,
                },
            ));
        }
        self.with_log(tp, |hosted| {
            let low_watermark = hosted.log.delete_records_before(offset)?;
            hosted.state.publish_offsets(&hosted.log);
            Ok(low_watermark)
        })
    }

    fn with_log<T>(
        &mut self,
        tp: &TopicPartition,
        operation: impl FnOnce(&mut Hosted) -> Result<T, gregor_log::error::LogError>,
    ) -> Result<T, LogManagerError> {
        let hosted = self
            .logs
            .get_mut(tp)
            .ok_or_else(|| LogManagerError::NoLog(tp.dir_name()))?;
        let result = operation(hosted);
        for rolled in hosted.log.take_rolled() {
            if let Err(unsent) = self.flusher.send((tp.clone(), rolled)) {
                // The flusher thread is gone: flush here rather than never.
                let (_, rolled) = unsent.into_inner();
                if rolled.flush().is_ok() {
                    hosted.rolled_flushed(tp, &rolled);
                }
            }
        }
        result.map_err(|error| {
            hosted.failed(&error);
            LogManagerError::Log(error)
        })
    }

    /// One cleaner pass over the compacted logs of this shard (Kafka's log cleaner runs on its
    /// own threads and locks segments; here the shard that owns the log cleans it, between
    /// commands, so appends to this shard wait while a log is rewritten).
    /// Sends a pass to the cleaner threads for each compacted log dirty enough to clean.
    fn compact_logs(&mut self) {
        let Some(cleaners) = &self.cleaners else {
            return;
        };
        let now_ms = now_ms();
        for (tp, hosted) in &mut self.logs {
            if !hosted.log.config().cleanup_compact
                || !hosted.state.is_serving()
                || self.cleaning.contains(tp)
            {
                continue;
            }
            match hosted
                .log
                .plan_cleaning(now_ms, hosted.state.high_watermark())
            {
                Ok(Some(job)) => {
                    let task = CleanerTask {
                        tp: tp.clone(),
                        job,
                        done: self.cleaned.clone(),
                    };
                    if cleaners.submit(task) {
                        self.cleaning.insert(tp.clone());
                    }
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(partition = %tp.dir_name(), %error, "cannot plan log cleaning");
                }
            }
        }
    }

    /// Installs a pass a cleaner thread finished, if its log is still here.
    fn on_cleaned(&mut self, pass: Cleaned) {
        self.cleaning.remove(&pass.tp);
        let Some(hosted) = self.logs.get_mut(&pass.tp) else {
            if let Ok(log) = pass.result {
                log.discard();
            }
            return;
        };
        let tp = &pass.tp;
        match hosted.log.install_cleaned(pass.result, now_ms()) {
            Ok(stats) => {
                hosted.state.publish_size(&hosted.log);
                let elapsed = pass.started.elapsed();
                tracing::info!(
                    partition = %tp.dir_name(),
                    segments_replaced = stats.segments_replaced,
                    bytes_before = stats.bytes_before,
                    bytes_after = stats.bytes_after,
                    records_removed = stats.records_removed,
                    tombstones_removed = stats.tombstones_removed,
                    first_dirty_offset = stats.first_dirty_offset,
                    elapsed_ms = elapsed.as_millis() as u64,
                    "log cleaned"
                );
                gregor_metrics::log_cleaned(
                    stats.bytes_before.saturating_sub(stats.bytes_after),
                    elapsed,
                );
            }
            Err(error) => {
                tracing::warn!(partition = %tp.dir_name(), %error, "log cleaning failed");
                hosted.failed(&error);
            }
        }
    }

    /// Kafka's `handleLogDirFailure`: every log of a dir gone offline goes offline with it, not
    /// only those whose next operation fails, so each answers KAFKA_STORAGE_ERROR and counts
    /// among the offline replicas at once.
    fn follow_offline_dirs(&mut self, offline: &[bool]) {
        if offline == self.offline_dirs.as_slice() {
            return;
        }
        for hosted in self.logs.values() {
            if offline.get(hosted.dir).copied().unwrap_or(false) && !hosted.state.is_offline() {
                hosted.state.mark_offline();
                hosted.state.appended.notify_waiters();
            }
        }
        self.offline_dirs = offline.to_vec();
    }

    fn periodic(&mut self) {
        let now = Instant::now();
        if now >= self.next_gauges {
            self.next_gauges = now + TICK;
            let offline = self.dirs.offline();
            self.follow_offline_dirs(&offline);
            self.dirs.record_gauges(&offline);
        }
        if now >= self.next_retention {
            self.next_retention = now + self.retention_every;
            let now_ms = now_ms();
            for (tp, hosted) in &mut self.logs {
                let high_watermark = hosted.state.high_watermark();
                match hosted.log.enforce_retention(now_ms, high_watermark) {
                    Ok(removed) if removed.segments_deleted > 0 => {
                        tracing::info!(partition = %tp.dir_name(), segments = removed.segments_deleted, bytes = removed.bytes_deleted, log_start_offset = removed.log_start_offset, "retention deleted segments");
                        hosted.state.publish_offsets(&hosted.log);
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::warn!(partition = %tp.dir_name(), %error, "retention failed")
                    }
                }
                if let Err(error) = hosted.log.purge_deleted_files(now_ms) {
                    tracing::warn!(partition = %tp.dir_name(), %error, "cannot remove deleted segments");
                }
            }
        }
        if now >= self.next_producer_expiration {
            // Kafka's `PeriodicProducerExpirationCheck`: producers idle for longer than
            // `producer.id.expiration.ms` are forgotten, so their state cannot grow for ever.
            self.next_producer_expiration = now + self.producer_expiration_every;
            let now_ms = now_ms();
            for (tp, hosted) in &mut self.logs {
                let expired = hosted
                    .log
                    .remove_expired_producers(now_ms, self.producer_id_expiration_ms);
                if expired > 0 {
                    tracing::debug!(partition = %tp.dir_name(), expired, "idle producers expired");
                }
            }
        }
        if let Some(every) = self.clean_every.filter(|_| now >= self.next_clean) {
            self.next_clean = now + every;
            self.compact_logs();
        }
        if now >= self.next_high_watermark_checkpoint {
            self.next_high_watermark_checkpoint = now + self.high_watermark_checkpoint_every;
            self.checkpoint_high_watermarks();
        }
        if now >= self.next_checkpoint {
            self.next_checkpoint = now + self.checkpoint_every;
            for dir in 0..self.dirs.dirs.len() {
                let logs = self.logs.values().filter(|h| h.dir == dir).map(|h| &h.log);
                let mut log_dir = self.dirs.lock(dir);
                if log_dir.is_offline() {
                    continue;
                }
                if let Err(error) = log_dir.checkpoint(logs) {
                    tracing::error!(log_dir = %log_dir.path().display(), %error, "checkpoint failed");
                }
            }
        }
        let due: Vec<PathBuf> = self
            .pending_deletes
            .iter()
            .filter(|(at, _)| *at <= now)
            .map(|(_, path)| path.clone())
            .collect();
        if !due.is_empty() {
            self.pending_deletes.retain(|(at, _)| *at > now);
            for path in due {
                match std::fs::remove_dir_all(&path) {
                    Ok(()) => {
                        tracing::info!(path = %path.display(), "deleted partition log removed")
                    }
                    Err(error) => {
                        tracing::warn!(path = %path.display(), %error, "cannot remove a deleted partition log")
                    }
                }
            }
        }
    }
}

/// Whole batches from the one holding `offset`, never at or past `max_offset`.
fn read_records(
    hosted: &mut Hosted,
    offset: i64,
    max_bytes: u64,
    max_offset: i64,
    min_one_batch: bool,
) -> Result<ReadResult, gregor_log::error::LogError> {
    let high_watermark = hosted.state.high_watermark();
    let log_start_offset = hosted.log.log_start_offset();
    let info = hosted
        .log
        .read(offset, max_bytes, max_offset, min_one_batch)?;
    let records = match info.slice {
        None => Bytes::new(),
        Some(slice) => {
            let mut bytes = slice.read().map_err(|e| gregor_log::error::LogError::Io {
                op: "read",
                path: slice.path.clone(),
                source: e,
            })?;
            bytes.truncate(gregor_log::segment::whole_batches_len(&bytes));
            Bytes::from(bytes)
        }
    };
    Ok(ReadResult {
        records,
        high_watermark,
        log_start_offset,
    })
}

fn follower_log(log: &PartitionLog) -> FollowerLog {
    FollowerLog {
        log_end_offset: log.log_end_offset(),
        latest_epoch: log.latest_epoch(),
    }
}

/// Whether this node follows `leader` at `leader_epoch` for the partition; otherwise why a
/// fetch result from it is refused.
fn following(
    tp: &TopicPartition,
    hosted: Option<&Hosted>,
    leader: i32,
    leader_epoch: i32,
) -> Result<(), LogManagerError> {
    if hosted.is_some_and(|hosted| hosted.state.replication().follows(leader, leader_epoch)) {
        Ok(())
    } else {
        Err(LogManagerError::NotFollowing(
            tp.dir_name(),
            leader,
            leader_epoch,
        ))
    }
}

/// Opens `opening` on a helper thread at idle priority (`SCHED_IDLE`: any other thread
/// preempts it at once) and, once [`OPEN_GRACE`] has passed, on the shard's own thread too;
/// answers in the given order. The metadata change that brings a new topic's logs wakes the
/// shards halfway through publishing its image, and making the logs' files then kept both
/// cores busy for hundreds of milliseconds while the request that created the topic waited
/// for one to be answered (measured: one-at-a-time creates of 1,000 partitions 0.7 ms sooner
/// at the median, over eight runs in turn, the logs ready as soon). The shard joins at its
/// normal priority, so a busy node still opens the logs at the pace it did; a fresh helper
/// per batch because an unprivileged thread cannot leave `SCHED_IDLE`.
fn open_yielding_first(
    opening: Vec<Opening>,
) -> Vec<(Opened, gregor_log::error::Result<PartitionLog>)> {
    let queue = std::sync::Mutex::new(opening.into_iter().enumerate());
    let work = || {
        let mut done = Vec::new();
        loop {
            let next = queue
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .next();
            match next {
                Some((index, item)) => done.push((index, item.open())),
                None => return done,
            }
        }
    };
    let mut opened = std::thread::scope(|scope| {
        let (finished, helper_finished) = crossbeam::channel::bounded::<()>(1);
        let work = &work;
        let helper = scope.spawn(move || {
            lower_to_idle_priority();
            let done = work();
            let _ = finished.send(());
            done
        });
        let mut mine = Vec::new();
        if helper_finished.recv_timeout(OPEN_GRACE).is_err() {
            mine = work();
        }
        match helper.join() {
            Ok(mut theirs) => {
                theirs.append(&mut mine);
                theirs
            }
            Err(panic) => std::panic::resume_unwind(panic),
        }
    });
    opened.sort_unstable_by_key(|(index, _)| *index);
    opened.into_iter().map(|(_, opened)| opened).collect()
}

/// Puts the calling thread in `SCHED_IDLE`; where that is refused (a sandbox), the thread
/// keeps its priority and the opens run as before.
fn lower_to_idle_priority() {
    use thread_priority::unix::{
        set_thread_priority_and_policy, thread_native_id, NormalThreadSchedulePolicy,
        ThreadSchedulePolicy,
    };
    let idle = ThreadSchedulePolicy::Normal(NormalThreadSchedulePolicy::Idle);
    if let Err(error) = set_thread_priority_and_policy(
        thread_native_id(),
        thread_priority::ThreadPriority::Min,
        idle,
    ) {
        tracing::debug!(?error, "log opens keep the shard's priority");
    }
}

#[cfg(test)]
mod tests {
    /// The scheduling policy of the calling thread, as the kernel reports it.
    fn own_policy() -> Option<i32> {
        let sched = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
        let line = sched.lines().find(|line| line.starts_with("policy"))?;
        line.split(':').nth(1)?.trim().parse().ok()
    }

    /// The helper that opens logs first runs at `SCHED_IDLE` (policy 5).
    #[test]
    fn the_opening_helper_runs_at_idle_priority() {
        let policies = std::thread::spawn(|| {
            let before = own_policy();
            super::lower_to_idle_priority();
            (before, own_policy())
        })
        .join()
        .unwrap();
        assert_eq!(policies, (Some(0), Some(5)));
        assert_eq!(own_policy(), Some(0), "only the helper's thread changes");
    }
}
