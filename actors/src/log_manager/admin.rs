//! What the log admin APIs ask of the logs: DeleteRecords, DescribeProducers, DescribeLogDirs.

use std::path::{Path, PathBuf};

use gregor_log::checkpoint::TopicPartition;
use gregor_log::producer_state::ProducerEntry;

use super::shard::DataCommand;
use super::{LogManager, LogManagerError};

/// One log of a shard: where it lives and how large it is.
#[derive(Debug)]
pub(super) struct LogSize {
    pub(super) tp: TopicPartition,
    pub(super) dir: usize,
    pub(super) size: u64,
}

/// One configured log dir, as DescribeLogDirs reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogDirDescription {
    /// The absolute path.
    pub path: PathBuf,
    /// Whether the dir is usable (else KAFKA_STORAGE_ERROR and nothing else is known).
    pub online: bool,
    /// Size of the file system holding it, in bytes (−1 when unknown).
    pub total_bytes: i64,
    /// Bytes a non-root user may still write there (−1 when unknown).
    pub usable_bytes: i64,
    /// The partition logs in it and their sizes in bytes.
    pub logs: Vec<(TopicPartition, u64)>,
}

impl LogManager {
    /// DeleteRecords on a partition: raises its log start offset to `offset` (`-1`: the high
    /// watermark) and answers the new log start offset (the low watermark).
    pub async fn delete_records(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
    ) -> Result<i64, LogManagerError> {
        let tp = TopicPartition::new(topic, partition);
        let state = self.serving(&tp, false)?;
        self.submit(&state, |reply| DataCommand::DeleteRecords {
            tp,
            offset,
            reply,
        })
        .await
    }

    /// A follower's log start offset raised to its leader's `leader_log_start` (Kafka's
    /// `maybeIncrementLogStartOffset` with `LeaderOffsetIncremented`), never past the
    /// follower's high watermark; answers the follower's log start offset. Records the leader
    /// deleted (DeleteRecords, retention) thus stay deleted once a follower leads.
    pub async fn follow_log_start(
        &self,
        topic: &str,
        partition: i32,
        leader_log_start: i64,
    ) -> Result<i64, LogManagerError> {
        let tp = TopicPartition::new(topic, partition);
        let state = self.serving(&tp, false)?;
        self.submit(&state, |reply| DataCommand::FollowLogStart {
            tp,
            offset: leader_log_start,
            reply,
        })
        .await
    }

    /// The producers a partition's log remembers (DescribeProducers).
    pub async fn producers(
        &self,
        topic: &str,
        partition: i32,
    ) -> Result<Vec<ProducerEntry>, LogManagerError> {
        let tp = TopicPartition::new(topic, partition);
        let state = self.serving(&tp, false)?;
        self.submit(&state, |reply| DataCommand::Producers { tp, reply })
            .await
    }

    /// Every configured log dir with its logs (asked of every shard) and its file system's
    /// total and usable bytes.
    pub async fn describe_log_dirs(&self) -> Vec<LogDirDescription> {
        let mut sizes = Vec::new();
        for shard in &self.shards {
            let (reply, answer) = tokio::sync::oneshot::channel();
            if shard.send(DataCommand::Sizes { reply }).await.is_err() {
                continue;
            }
            if let Ok(Ok(shard_sizes)) = answer.await {
                sizes.extend(shard_sizes);
            }
        }
        let opened: Vec<(PathBuf, bool)> = self
            .shards
            .first()
            .map(|shard| shard.dirs.describe())
            .unwrap_or_default();
        let configured = self.log_dirs.clone();
        // statvfs is a file-system call: off the runtime threads.
        tokio::task::spawn_blocking(move || describe(&configured, &opened, sizes))
            .await
            .unwrap_or_default()
    }
}

fn describe(
    configured: &[PathBuf],
    opened: &[(PathBuf, bool)],
    sizes: Vec<LogSize>,
) -> Vec<LogDirDescription> {
    configured
        .iter()
        .map(|path| {
            let index = opened.iter().position(|(p, _)| p == path);
            let online = index.is_some_and(|i| opened[i].1);
            let space = online.then(|| file_system_space(path)).flatten();
            let mut logs: Vec<(TopicPartition, u64)> = sizes
                .iter()
                .filter(|s| online && Some(s.dir) == index)
                .map(|s| (s.tp.clone(), s.size))
                .collect();
            logs.sort();
            LogDirDescription {
                path: std::path::absolute(path).unwrap_or_else(|_| path.clone()),
                online: online && space.is_some(),
                total_bytes: space.map_or(-1, |(total, _)| total),
                usable_bytes: space.map_or(-1, |(_, usable)| usable),
                logs,
            }
        })
        .collect()
}

/// Total and usable bytes of the file system holding `path` (Java's `FileStore.getTotalSpace`
/// and `getUsableSpace`), capped at `i64::MAX` as Kafka caps them.
fn file_system_space(path: &Path) -> Option<(i64, i64)> {
    let stats = rustix::fs::statvfs(path).ok()?;
    let total = stats.f_blocks.saturating_mul(stats.f_frsize);
    let usable = stats.f_bavail.saturating_mul(stats.f_frsize);
    Some((
        i64::try_from(total).unwrap_or(i64::MAX),
        i64::try_from(usable).unwrap_or(i64::MAX),
    ))
}
