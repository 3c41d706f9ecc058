//! The log cleaner threads (`log.cleaner.threads`): compaction passes planned by the shards run
//! here, so a long pass over large segments never holds up the appends, reads and fetches of
//! the partitions that share its shard (Kafka's `LogCleaner` threads, beside its request path).
//!
//! A shard plans a pass on a log it owns ([`gregor_log::log::PartitionLog::plan_cleaning`]),
//! sends it here, and installs the result when it comes back on the shard's own channel; at most
//! one pass per partition is in flight.

use std::time::Instant;

use crossbeam::channel::{self, Receiver, Sender, TrySendError};
use gregor_log::checkpoint::TopicPartition;
use gregor_log::cleaner::{CleanedLog, CleaningJob, OffsetMap};

/// Passes waiting for a cleaner thread; past this a shard tries again at its next check.
const QUEUED_PASSES: usize = 64;

/// A pass for a cleaner thread, and where its result goes.
pub(super) struct CleanerTask {
    pub(super) tp: TopicPartition,
    pub(super) job: CleaningJob,
    pub(super) done: Sender<Cleaned>,
}

/// A finished pass, back to the shard that owns the log.
pub(super) struct Cleaned {
    pub(super) tp: TopicPartition,
    pub(super) started: Instant,
    pub(super) result: gregor_log::error::Result<CleanedLog>,
}

/// Where shards send passes; the threads end when every shard has dropped its sender.
#[derive(Clone)]
pub(super) struct Cleaners {
    tasks: Sender<CleanerTask>,
}

impl Cleaners {
    /// Starts `threads` cleaner threads (at least one), each with its share of
    /// `dedupe_buffer_bytes` for its offset map, filled to `load_factor` (Kafka's
    /// `log.cleaner.dedupe.buffer.size` and `log.cleaner.io.buffer.load.factor`).
    pub(super) fn start(
        threads: usize,
        dedupe_buffer_bytes: u64,
        load_factor: f64,
    ) -> std::io::Result<Self> {
        let threads = threads.max(1);
        let mut per_thread = dedupe_buffer_bytes / threads as u64;
        // As Kafka's cleaner threads, at most 2 GiB each.
        let most = i32::MAX as u64;
        if per_thread > most {
            tracing::warn!(
                per_thread,
                "log.cleaner.dedupe.buffer.size gives each cleaner thread more than 2 GiB: each uses 2 GiB"
            );
            per_thread = most;
        }
        let (tasks, queue) = channel::bounded(QUEUED_PASSES);
        for index in 0..threads {
            let queue: Receiver<CleanerTask> = queue.clone();
            let mut map = OffsetMap::new(per_thread, load_factor);
            std::thread::Builder::new()
                .name(format!("log-cleaner-{index}"))
                .spawn(move || {
                    for task in queue {
                        let started = Instant::now();
                        let result = task.job.run(&mut map);
                        let cleaned = Cleaned {
                            tp: task.tp,
                            started,
                            result,
                        };
                        if let Err(channel::SendError(unwanted)) = task.done.send(cleaned) {
                            // The shard has stopped: nobody will install these files.
                            if let Ok(log) = unwanted.result {
                                log.discard();
                            }
                        }
                    }
                })?;
        }
        Ok(Cleaners { tasks })
    }

    /// Queues a pass; false when the queue is full (the shard plans again later).
    pub(super) fn submit(&self, task: CleanerTask) -> bool {
        match self.tasks.try_send(task) {
            Ok(()) => true,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => false,
        }
    }
}
