//! What the node knows about the metadata quorum beyond openraft's own state: when each replica
//! last received entries from this leader and when it was last caught up (Kafka's
//! `lastFetchTimestamp` / `lastCaughtUpTimestamp`), and which observers (node id, directory id)
//! have announced themselves. DescribeQuorum and the voter changes read it.
//!
//! openraft pushes entries to followers and learners instead of letting them fetch, so "last
//! fetch" is the time the leader's transport last had an AppendEntries accepted by that replica,
//! and "caught up" means that replica then matched the leader's commit index.
//!
//! Architecture invariant: plain shared state under short-lived std mutexes; no sockets, no
//! awaits while a lock is held.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use uuid::Uuid;

use crate::raft::MetadataLog;

/// How long an observer stays known without a heartbeat (Kafka drops observer state after
/// 300 s without a fetch; Gregor's observers heartbeat every `broker.heartbeat.interval.ms` (2 s), so a much shorter window
/// tells a replaced disk from a live duplicate quickly).
pub const OBSERVER_EXPIRY: Duration = Duration::from_secs(30);

/// Progress of one replica as seen by this node while it leads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplicaProgress {
    /// Highest log index the replica is known to hold.
    pub matched_index: Option<u64>,
    /// Wall-clock ms of the last accepted AppendEntries (-1 unknown).
    pub last_fetch_ms: i64,
    /// Wall-clock ms when the replica last matched the leader's commit index (-1 unknown).
    pub last_caught_up_ms: i64,
}

/// An observer that announced itself to this node (a broker or a controller that is not a
/// voter).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObserverInfo {
    /// Its node id.
    pub node_id: i32,
    /// Directory id of its metadata log dir.
    pub directory_id: Uuid,
    /// When it last announced itself (monotonic, for expiry).
    pub last_seen: Instant,
}

/// The quorum state shared by the transport, the join service and the handlers.
pub struct QuorumState {
    /// The metadata log.
    pub log: Arc<MetadataLog>,
    /// The cluster id (from `meta.properties`).
    pub cluster_id: String,
    replicas: Mutex<BTreeMap<u64, ReplicaProgress>>,
    observers: Mutex<BTreeMap<(i32, Uuid), Instant>>,
    /// When each voter last sent this node a raft call (AppendEntries, Vote, InstallSnapshot).
    heard: Mutex<BTreeMap<u64, Instant>>,
    /// Set while an AddRaftVoter or RemoveRaftVoter is being applied (Kafka allows one).
    voter_change: std::sync::atomic::AtomicBool,
}

/// Held while a voter change runs; clears the flag when dropped.
pub struct VoterChangeGuard<'a>(&'a QuorumState);

impl Drop for VoterChangeGuard<'_> {
    fn drop(&mut self) {
        self.0
            .voter_change
            .store(false, std::sync::atomic::Ordering::Release);
    }
}

/// Milliseconds since the Unix epoch, as Kafka's timestamps are.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl QuorumState {
    /// A new state for `log`.
    pub fn new(log: Arc<MetadataLog>, cluster_id: String) -> Self {
        QuorumState {
            log,
            cluster_id,
            replicas: Mutex::new(BTreeMap::new()),
            observers: Mutex::new(BTreeMap::new()),
            heard: Mutex::new(BTreeMap::new()),
            voter_change: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Starts a voter change unless one is already running.
    pub fn begin_voter_change(&self) -> Option<VoterChangeGuard<'_>> {
        self.voter_change
            .compare_exchange(
                false,
                true,
                std::sync::atomic::Ordering::AcqRel,
                std::sync::atomic::Ordering::Acquire,
            )
            .ok()
            .map(|_| VoterChangeGuard(self))
    }

    /// Whether this node is the leader of the metadata quorum right now.
    pub fn is_leader(&self) -> bool {
        let metrics = self.log.metrics();
        metrics.current_leader == Some(metrics.id)
    }

    /// Records that `target` accepted entries up to `matched` while the leader's commit index
    /// was `committed`.
    pub fn record_replicated(&self, target: u64, matched: Option<u64>, committed: Option<u64>) {
        let now = now_ms();
        if let Ok(mut replicas) = self.replicas.lock() {
            let progress = replicas.entry(target).or_insert(ReplicaProgress {
                matched_index: None,
                last_fetch_ms: -1,
                last_caught_up_ms: -1,
            });
            progress.matched_index = progress.matched_index.max(matched);
            progress.last_fetch_ms = now;
            if matched >= committed {
                progress.last_caught_up_ms = now;
            }
        }
    }

    /// Records that `node` sent this node a raft call just now.
    pub fn heard_from(&self, node: u64) {
        if let Ok(mut heard) = self.heard.lock() {
            heard.insert(node, Instant::now());
        }
    }

    /// When `node` last sent this node a raft call.
    pub fn last_heard_from(&self, node: u64) -> Option<Instant> {
        self.heard.lock().ok()?.get(&node).copied()
    }

    /// The progress of `target`, if this node has replicated to it.
    pub fn progress(&self, target: u64) -> Option<ReplicaProgress> {
        self.replicas.lock().ok()?.get(&target).copied()
    }

    /// Records an observer's announcement.
    pub fn observer_seen(&self, node_id: i32, directory_id: Uuid) {
        if let Ok(mut observers) = self.observers.lock() {
            observers.insert((node_id, directory_id), Instant::now());
        }
    }

    /// Observers seen within [`OBSERVER_EXPIRY`], ordered by node id then directory id.
    pub fn observers(&self) -> Vec<ObserverInfo> {
        let Ok(mut observers) = self.observers.lock() else {
            return Vec::new();
        };
        observers.retain(|_, seen| seen.elapsed() < OBSERVER_EXPIRY);
        observers
            .iter()
            .map(|((node_id, directory_id), seen)| ObserverInfo {
                node_id: *node_id,
                directory_id: *directory_id,
                last_seen: *seen,
            })
            .collect()
    }

    /// When any directory of `node_id` last announced itself.
    pub fn last_seen(&self, node_id: i32) -> Option<Instant> {
        let observers = self.observers.lock().ok()?;
        observers
            .iter()
            .filter(|((id, _), _)| *id == node_id)
            .map(|(_, seen)| *seen)
            .max()
    }

    /// Live observers with node id `node_id`.
    pub fn observers_of(&self, node_id: i32) -> Vec<ObserverInfo> {
        self.observers()
            .into_iter()
            .filter(|o| o.node_id == node_id)
            .collect()
    }
}
