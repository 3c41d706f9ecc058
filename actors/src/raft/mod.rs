//! The metadata log as an openraft group: a durable raft log ([`LogStore`], one redb file), a
//! state machine that forwards committed batches to the node's [`MetadataApplier`] and keeps
//! snapshots of the image ([`StateMachine`]), and a pluggable network: the node passes its
//! transport over the controller listener to [`MetadataLog::open_with_network`];
//! [`NoPeersNetwork`] serves a single voter that has no peers. [`MetadataLog`] is the handle the
//! node uses.
//!
//! Layout of the metadata log dir (e.g. `<metadata.log.dir>/__cluster_metadata-0/`):
//! `raft-log.redb` (entries, vote, committed and purged log ids) and `raft-snapshot.bin` (the
//! latest snapshot, see [`snapshot`]).
//!
//! Architecture invariant: nothing here holds or interprets the image; the applier does.

mod error;
mod log_store;
mod network;
pub mod snapshot;
mod state_machine;
#[cfg(test)]
mod tests;
mod types;

use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use gregor_publishers::records::MetadataBatch;
use openraft::error::{CheckIsLeaderError, ClientWriteError, Fatal, InitializeError, RaftError};
use openraft::metrics::WaitError;
use openraft::network::RaftNetworkFactory;
use openraft::{ChangeMembers, Config, Raft, RaftMetrics, SnapshotPolicy};

pub use error::{ApplyError, MetadataLogError};
pub use log_store::{LogStore, LOG_FILE_NAME};
pub use network::{NoPeers, NoPeersError, NoPeersNetwork};
pub use snapshot::SNAPSHOT_FILE_NAME;
pub use state_machine::{MetadataApplier, SnapshotBuilder, SnapshotRecords, StateMachine};
pub use types::{MetadataLogId, TypeConfig, VoterNode};

/// Tuning of the metadata log.
#[derive(Clone, Debug)]
pub struct MetadataLogOptions {
    /// Take a snapshot once this many entries have been applied since the last one.
    pub snapshot_every: u64,
    /// Entries kept in the log behind a snapshot (older ones are purged after it is written).
    pub logs_kept_after_snapshot: u64,
    /// Largest snapshot chunk sent to a lagging replica: what fits in a request frame of this
    /// node's `socket.request.max.bytes` (the transport splits further for a peer that
    /// accepts less).
    pub snapshot_chunk_bytes: u64,
}

impl Default for MetadataLogOptions {
    fn default() -> Self {
        MetadataLogOptions {
            snapshot_every: 20_000,
            logs_kept_after_snapshot: 1_000,
            snapshot_chunk_bytes: 3 * 1024 * 1024,
        }
    }
}

/// The metadata log of this node: open it, initialize it once, wait until it is ready, write.
pub struct MetadataLog {
    node_id: u64,
    dir: PathBuf,
    raft: Raft<TypeConfig>,
}

impl MetadataLog {
    /// Opens the metadata log stored in `dir` (created if missing) and starts its raft group.
    ///
    /// If a snapshot is stored, it is handed to `applier.install_snapshot` before raft starts;
    /// raft then re-applies the committed entries after it through `applier.apply`, so the image
    /// is rebuilt from snapshot + log. Call [`MetadataLog::wait_ready`] before serving clients.
    pub async fn open(
        node_id: u64,
        dir: &Path,
        applier: Arc<dyn MetadataApplier>,
        options: MetadataLogOptions,
    ) -> Result<Self, MetadataLogError> {
        Self::open_with_network(node_id, dir, applier, options, NoPeersNetwork).await
    }

    /// [`MetadataLog::open`] with a network that reaches the other members of the quorum (the
    /// node's transport over the controller listener).
    pub async fn open_with_network<N: RaftNetworkFactory<TypeConfig>>(
        node_id: u64,
        dir: &Path,
        applier: Arc<dyn MetadataApplier>,
        options: MetadataLogOptions,
        network: N,
    ) -> Result<Self, MetadataLogError> {
        std::fs::create_dir_all(dir).map_err(|e| {
            MetadataLogError::storage(dir, format!("cannot create the log dir: {e}"))
        })?;
        let log_store = LogStore::open(dir).await?;
        let state_machine = StateMachine::open(dir, applier).await?;
        if let Some(purged) = log_store.last_purged().await? {
            if state_machine.last_applied() < Some(purged) {
                return Err(MetadataLogError::corrupt(
                    snapshot::snapshot_path(dir),
                    format!(
                        "the log was purged through {purged} but the snapshot covers only up to {:?}; \
                         the snapshot is missing or older than the log",
                        state_machine.last_applied()
                    ),
                ));
            }
        }
        let config = Config {
            cluster_name: "gregor-metadata".to_string(),
            snapshot_policy: SnapshotPolicy::LogsSinceLast(options.snapshot_every),
            max_in_snapshot_log_to_keep: options.logs_kept_after_snapshot,
            // openraft's defaults (50 ms heartbeats, 150-300 ms elections) are tuned for a LAN
            // under no load; controllers share two cores with brokers and builds here, so a
            // missed tick must not cost a leader. Kafka's quorum uses 1 s / 2 s.
            heartbeat_interval: 100,
            election_timeout_min: 500,
            election_timeout_max: 1000,
            snapshot_max_chunk_size: options.snapshot_chunk_bytes.max(1),
            // A lagging replica is sent up to this many entries at once, read from the log and
            // decoded first; the transport then sends only what fits its byte budget, so a
            // few dozen (each up to 1 MiB, see the submitter) keep that read short.
            max_payload_entries: 64,
            // The last chunk is answered once the replica has installed the snapshot (decoded
            // it, built the image, written the file): seconds at 10^6 partitions, not
            // openraft's 200 ms, or the replica would be sent the snapshot again forever.
            install_snapshot_timeout: 60_000,
            ..Config::default()
        }
        .validate()
        .map_err(|e| MetadataLogError::Raft(format!("invalid raft configuration: {e}")))?;
        let raft = Raft::new(node_id, Arc::new(config), network, log_store, state_machine)
            .await
            .map_err(fatal)?;
        tokio::spawn(record_standing(raft.metrics()));
        Ok(MetadataLog {
            node_id,
            dir: dir.to_path_buf(),
            raft,
        })
    }

    /// This node's id in the quorum.
    pub fn node_id(&self) -> u64 {
        self.node_id
    }

    /// The metadata log dir.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Makes a brand-new log a quorum of one voter: this node, described by `node`. On a log
    /// that is already initialized (a restart) this does nothing and succeeds; the stored
    /// membership is kept as it is.
    pub async fn initialize_single_voter(&self, node: VoterNode) -> Result<(), MetadataLogError> {
        if self.raft.is_initialized().await.map_err(fatal)? {
            return Ok(());
        }
        match self
            .raft
            .initialize(BTreeMap::from([(self.node_id, node)]))
            .await
        {
            Ok(()) => Ok(()),
            // Initialized between the check and the call: same outcome.
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(RaftError::APIError(e)) => Err(MetadataLogError::Initialize(e.to_string())),
            Err(RaftError::Fatal(f)) => Err(fatal(f)),
        }
    }

    /// Makes a brand-new log a quorum of `voters` (`storage format --initial-controllers`).
    /// Every initial voter calls this with the same set, which openraft accepts: the first
    /// membership entry is identical everywhere. A restart keeps the stored membership.
    pub async fn initialize_voters(
        &self,
        voters: BTreeMap<u64, VoterNode>,
    ) -> Result<(), MetadataLogError> {
        if self.raft.is_initialized().await.map_err(fatal)? {
            return Ok(());
        }
        match self.raft.initialize(voters).await {
            Ok(()) => Ok(()),
            Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
            Err(RaftError::APIError(e)) => Err(MetadataLogError::Initialize(e.to_string())),
            Err(RaftError::Fatal(f)) => Err(fatal(f)),
        }
    }

    /// The raft handle, for the transport that delivers peers' messages to it.
    pub fn raft(&self) -> &Raft<TypeConfig> {
        &self.raft
    }

    /// Applies a membership change (learners joining, voters added or removed) and returns the
    /// log id of the membership entry once it is committed. `retain` keeps removed voters as
    /// learners.
    pub async fn change_membership(
        &self,
        changes: ChangeMembers<u64, VoterNode>,
        retain: bool,
    ) -> Result<MetadataLogId, MetadataLogError> {
        self.raft
            .change_membership(changes, retain)
            .await
            .map(|response| response.log_id)
            .map_err(write_error)
    }

    /// Confirms this node is the leader and returns the index every follower must apply to
    /// have seen all that was committed before now (openraft's read index).
    pub async fn read_index(&self) -> Result<u64, MetadataLogError> {
        match self.raft.ensure_linearizable().await {
            Ok(read) => Ok(read.map_or(0, |id| id.index)),
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                Err(MetadataLogError::NotLeader {
                    leader_id: f.leader_id,
                })
            }
            Err(RaftError::APIError(e)) => Err(MetadataLogError::Raft(e.to_string())),
            Err(RaftError::Fatal(f)) => Err(fatal(f)),
        }
    }

    /// Resolves once this node has applied the entry at `index` (so its image contains
    /// everything the leader had committed when it reported `index`). Gives up after `timeout`.
    pub async fn wait_applied(
        &self,
        index: u64,
        timeout: Duration,
    ) -> Result<(), MetadataLogError> {
        let result = self
            .raft
            .wait(Some(timeout))
            .metrics(
                |m| m.last_applied.is_some_and(|applied| applied.index >= index),
                "applied the leader's read index",
            )
            .await;
        match result {
            Ok(_) => Ok(()),
            Err(WaitError::ShuttingDown) => Err(MetadataLogError::Shutdown(String::new())),
            Err(WaitError::Timeout(..)) => {
                let m = self.metrics();
                Err(MetadataLogError::NotReady {
                    timeout,
                    detail: format!(
                        "waiting to apply index {index}: state {:?}, leader {:?}, applied {:?}",
                        m.state, m.current_leader, m.last_applied
                    ),
                })
            }
        }
    }

    /// Resolves once this node is the leader and has applied everything committed when it
    /// became leader, so the image is caught up. Gives up after `timeout`.
    pub async fn wait_ready(&self, timeout: Duration) -> Result<(), MetadataLogError> {
        let node_id = self.node_id;
        let ready = async {
            self.raft
                .wait(None)
                .metrics(|m| m.current_leader == Some(node_id), "this node is leader")
                .await
                .map_err(|e| match e {
                    WaitError::ShuttingDown => MetadataLogError::Shutdown(String::new()),
                    WaitError::Timeout(..) => MetadataLogError::Raft(e.to_string()),
                })?;
            // Confirms leadership and waits until the state machine has applied the read log
            // id: at least the blank entry of this term, hence all that was committed before.
            match self.raft.ensure_linearizable().await {
                Ok(_) => Ok(()),
                Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                    Err(MetadataLogError::NotLeader {
                        leader_id: f.leader_id,
                    })
                }
                Err(RaftError::APIError(e)) => Err(MetadataLogError::Raft(e.to_string())),
                Err(RaftError::Fatal(f)) => Err(fatal(f)),
            }
        };
        match tokio::time::timeout(timeout, ready).await {
            Ok(result) => result,
            Err(_) => {
                let m = self.metrics();
                Err(MetadataLogError::NotReady {
                    timeout,
                    detail: format!(
                        "state {:?}, leader {:?}, term {}, last log index {:?}, applied {:?}",
                        m.state, m.current_leader, m.current_term, m.last_log_index, m.last_applied
                    ),
                })
            }
        }
    }

    /// Appends `batch` and returns its log id once it is committed and applied through the
    /// applier (so the image containing it has been published).
    pub async fn write(&self, batch: MetadataBatch) -> Result<MetadataLogId, MetadataLogError> {
        self.raft
            .client_write(batch)
            .await
            .map(|response| response.log_id)
            .map_err(write_error)
    }

    /// Pipelined [`MetadataLog::write`]: hands `batch` to raft and returns as soon as it is
    /// queued, with a future that resolves to its log id once it is committed and applied.
    ///
    /// Batches submitted one after another (each `submit` awaited before the next) enter the
    /// log in that order, while earlier ones may still be committing.
    pub async fn submit(
        &self,
        batch: MetadataBatch,
    ) -> Result<
        impl Future<Output = Result<MetadataLogId, MetadataLogError>> + Send + 'static,
        MetadataLogError,
    > {
        let receiver = self.raft.client_write_ff(batch).await.map_err(fatal)?;
        Ok(async move {
            match receiver.await {
                Ok(result) => result
                    .map(|response| response.log_id)
                    .map_err(|e| write_error(RaftError::APIError(e))),
                Err(_) => Err(MetadataLogError::Shutdown(
                    " before the write was committed".into(),
                )),
            }
        })
    }

    /// The current raft metrics: leader, term, last log index, last applied, snapshot, purged,
    /// membership (for DescribeQuorum).
    pub fn metrics(&self) -> RaftMetrics<u64, VoterNode> {
        self.raft.metrics().borrow().clone()
    }

    /// A watch of the raft metrics, updated on every change.
    pub fn metrics_watch(&self) -> tokio::sync::watch::Receiver<RaftMetrics<u64, VoterNode>> {
        self.raft.metrics()
    }

    /// Stops the raft group; the files stay consistent (every acknowledged write is on disk).
    pub async fn shutdown(&self) -> Result<(), MetadataLogError> {
        self.raft
            .shutdown()
            .await
            .map_err(|e| MetadataLogError::Shutdown(format!(" abnormally: {e}")))
    }
}

/// Maps a failed client write.
fn write_error(e: RaftError<u64, ClientWriteError<u64, VoterNode>>) -> MetadataLogError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => MetadataLogError::NotLeader {
            leader_id: f.leader_id,
        },
        RaftError::APIError(e) => MetadataLogError::Raft(e.to_string()),
        RaftError::Fatal(f) => fatal(f),
    }
}

/// Maps openraft's fatal errors: all mean the group is no longer running.
fn fatal(f: Fatal<u64>) -> MetadataLogError {
    match f {
        Fatal::Stopped => MetadataLogError::Shutdown(String::new()),
        Fatal::Panicked => MetadataLogError::Shutdown(" after a panic in the raft core".into()),
        Fatal::StorageError(e) => {
            MetadataLogError::Shutdown(format!(" after a storage error: {e}"))
        }
    }
}

/// Where `metrics` says this node stands in the quorum, as Kafka's `raft-metrics` report it.
fn standing(metrics: &RaftMetrics<u64, VoterNode>) -> gregor_metrics::RaftStanding {
    use openraft::ServerState;
    let vote = match metrics.state {
        ServerState::Leader | ServerState::Candidate => Some(metrics.id),
        // A follower of a known leader reports no vote, nor does a node that never voted (term
        // 0); one that only voted reports whom for.
        _ if metrics.vote.is_committed() || metrics.vote.leader_id().get_term() == 0 => None,
        _ => metrics.vote.leader_id().voted_for(),
    };
    gregor_metrics::RaftStanding {
        leader: metrics.current_leader.map_or(-1, |id| id as i64),
        vote: vote.map_or(-1, |id| id as i64),
        epoch: metrics.current_term,
        high_watermark: metrics.last_applied.map_or(-1, |l| l.index as i64 + 1),
        log_end_offset: metrics.last_log_index.map_or(0, |index| index + 1),
    }
}

/// Keeps the quorum gauges current until the raft group stops.
async fn record_standing(mut metrics: tokio::sync::watch::Receiver<RaftMetrics<u64, VoterNode>>) {
    let mut last = None;
    loop {
        let now = standing(&metrics.borrow_and_update());
        if last != Some(now) {
            gregor_metrics::raft_standing(now);
            last = Some(now);
        }
        if metrics.changed().await.is_err() {
            return;
        }
    }
}
