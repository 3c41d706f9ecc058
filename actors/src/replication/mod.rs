//! Replication: what a partition's leader knows of its followers, the high watermark, and the
//! ISR changes it asks the controller for.
//!
//! Every hosted partition has a [`Replication`] (inside its `PartitionState`), set from the
//! metadata image by [`ReplicationPublisher`]: leader (with the committed ISR and the progress
//! of each follower) or follower. On the leader, the high watermark is the smallest log end
//! offset of the ISR (Kafka's `maybeIncrementLeaderHW`), recomputed on every local append and
//! every follower fetch, never moved back, and frozen while the ISR is smaller than the
//! effective `min.insync.replicas` (KIP-966 strict min ISR). On a follower it is the leader's,
//! clamped to the local log end offset (the fetcher sets it).
//!
//! ISR changes go to the controller as AlterPartition through [`IsrChanges`]; one change per
//! partition is in flight at a time, and the leader keeps the committed ISR until the image
//! carries the new one.

mod isr;
mod publisher;
mod shutdown;

use std::collections::HashMap;

pub use isr::IsrTask;
pub use publisher::{FollowedPartition, FollowerAssignments, ReplicationPublisher};
pub use shutdown::controlled_shutdown;

/// The ISR size a partition of `replicas` replicas needs: `min.insync.replicas`, capped at the
/// replica count (Kafka's `Partition.effectiveMinIsr`: a minimum above the replication factor
/// would otherwise never be met).
pub(crate) fn effective_min_isr(min_insync_replicas: i32, replicas: usize) -> usize {
    usize::try_from(min_insync_replicas.max(1))
        .unwrap_or(1)
        .min(replicas.max(1))
}

/// What this node is for one partition.
#[derive(Debug, Default)]
pub enum Role {
    /// Not known yet (the image has not been applied to the state).
    #[default]
    Unassigned,
    /// This node leads the partition.
    Leader(LeaderState),
    /// This node follows `leader`.
    Follower { leader: i32, leader_epoch: i32 },
}

/// A follower as its leader sees it (Kafka's `Replica` state, KIP-497 era).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerProgress {
    /// The follower's log end offset (its last fetch offset); −1 until it fetches.
    pub log_end_offset: i64,
    /// Last time the follower was caught up (ms since the epoch).
    pub last_caught_up_ms: i64,
    /// The leader's log end offset when the previous fetch arrived.
    pub last_fetch_leader_log_end_offset: i64,
    /// When the previous fetch arrived.
    pub last_fetch_ms: i64,
    /// The follower's log start offset as its last fetch told it; −1 until it fetches.
    pub log_start_offset: i64,
}

impl FollowerProgress {
    fn reset(in_isr: bool, now_ms: i64) -> Self {
        FollowerProgress {
            log_end_offset: -1,
            last_caught_up_ms: if in_isr { now_ms } else { 0 },
            last_fetch_leader_log_end_offset: -1,
            last_fetch_ms: 0,
            log_start_offset: -1,
        }
    }

    /// Kafka's `updateFetchStateOrThrow`: a fetch at `fetch_offset` while the leader's log ends
    /// at `leader_log_end_offset`.
    fn on_fetch(&mut self, fetch_offset: i64, leader_log_end_offset: i64, now_ms: i64) {
        if fetch_offset >= leader_log_end_offset {
            self.last_caught_up_ms = self.last_caught_up_ms.max(now_ms);
        } else if fetch_offset >= self.last_fetch_leader_log_end_offset {
            self.last_caught_up_ms = self.last_caught_up_ms.max(self.last_fetch_ms);
        }
        self.last_fetch_leader_log_end_offset =
            leader_log_end_offset.max(self.last_fetch_leader_log_end_offset);
        self.last_fetch_ms = now_ms;
        self.log_end_offset = fetch_offset;
    }

    /// Caught up: at the leader's log end offset, or caught up within `lag_ms`.
    fn caught_up(&self, leader_log_end_offset: i64, lag_ms: i64, now_ms: i64) -> bool {
        self.log_end_offset == leader_log_end_offset
            || now_ms.saturating_sub(self.last_caught_up_ms) <= lag_ms
    }
}

/// The leader's view of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderState {
    /// This node's id.
    pub me: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    /// The committed ISR (from the image).
    pub isr: Vec<i32>,
    /// The log end offset when this node became leader at this epoch: a follower must reach it
    /// before it may join the ISR.
    pub epoch_start_offset: i64,
    /// Remote replicas (every replica but this node).
    pub followers: HashMap<i32, FollowerProgress>,
    /// An AlterPartition is in flight with this ISR.
    pub pending_isr: Option<Vec<i32>>,
}

/// One partition's replication state.
#[derive(Debug, Default)]
pub struct Replication {
    pub role: Role,
}

/// What the image says of a hosted partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub leader: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
}

/// What applying an assignment changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleChange {
    /// Same role and epoch (the ISR or partition epoch may have moved).
    Unchanged,
    /// This node became leader at a new epoch.
    BecameLeader,
    /// This node follows (a new leader or epoch).
    BecameFollower,
}

impl Replication {
    /// Applies the image's view of the partition for node `me` with the local log end offset
    /// `log_end_offset`.
    pub fn assign(
        &mut self,
        me: i32,
        assignment: &Assignment,
        log_end_offset: i64,
        now_ms: i64,
    ) -> RoleChange {
        if assignment.leader == me {
            if let Role::Leader(state) = &mut self.role {
                if state.leader_epoch == assignment.leader_epoch {
                    if state.partition_epoch != assignment.partition_epoch {
                        state.pending_isr = None;
                    }
                    state.partition_epoch = assignment.partition_epoch;
                    state.isr.clone_from(&assignment.isr);
                    state.replicas.clone_from(&assignment.replicas);
                    state
                        .followers
                        .retain(|id, _| assignment.replicas.contains(id));
                    for id in assignment.replicas.iter().filter(|id| **id != me) {
                        state
                            .followers
                            .entry(*id)
                            .or_insert_with(|| FollowerProgress::reset(false, now_ms));
                    }
                    return RoleChange::Unchanged;
                }
            }
            let followers = assignment
                .replicas
                .iter()
                .filter(|id| **id != me)
                .map(|id| {
                    (
                        *id,
                        FollowerProgress::reset(assignment.isr.contains(id), now_ms),
                    )
                })
                .collect();
            self.role = Role::Leader(LeaderState {
                me,
                leader_epoch: assignment.leader_epoch,
                partition_epoch: assignment.partition_epoch,
                replicas: assignment.replicas.clone(),
                isr: assignment.isr.clone(),
                epoch_start_offset: log_end_offset,
                followers,
                pending_isr: None,
            });
            return RoleChange::BecameLeader;
        }
        let same = matches!(self.role, Role::Follower { leader, leader_epoch }
            if leader == assignment.leader && leader_epoch == assignment.leader_epoch);
        self.role = Role::Follower {
            leader: assignment.leader,
            leader_epoch: assignment.leader_epoch,
        };
        if same {
            RoleChange::Unchanged
        } else {
            RoleChange::BecameFollower
        }
    }

    /// Whether this node follows `leader` at `leader_epoch`.
    pub fn follows(&self, leader: i32, leader_epoch: i32) -> bool {
        matches!(self.role, Role::Follower { leader: l, leader_epoch: e } if l == leader && e == leader_epoch)
    }

    /// The leader epoch when this node leads the partition.
    pub fn leader_epoch(&self) -> Option<i32> {
        match &self.role {
            Role::Leader(state) => Some(state.leader_epoch),
            _ => None,
        }
    }

    /// The log has opened at `log_end_offset` after this node took the leadership: the epoch
    /// starts there, as Kafka makes a broker leader only once its log is loaded (an assignment
    /// made while the log was still opening saw no log end yet).
    pub fn log_opened(&mut self, log_end_offset: i64) {
        if let Role::Leader(state) = &mut self.role {
            state.epoch_start_offset = state.epoch_start_offset.max(log_end_offset);
        }
    }

    /// The log end offset this node started its current leader epoch at, when it leads.
    pub fn leader_epoch_start_offset(&self) -> Option<i64> {
        match &self.role {
            Role::Leader(state) => Some(state.epoch_start_offset),
            _ => None,
        }
    }

    /// Whether this node has moved past leading the partition at `leader_epoch`: it leads at a
    /// later epoch, or follows at that epoch or a later one. (Before it takes up the role,
    /// it may still follow at an earlier epoch.)
    pub fn moved_past_leading(&self, leader_epoch: i32) -> bool {
        match &self.role {
            Role::Leader(state) => state.leader_epoch > leader_epoch,
            Role::Follower {
                leader_epoch: epoch,
                ..
            } => *epoch >= leader_epoch,
            Role::Unassigned => false,
        }
    }

    /// The committed ISR's size when this node leads.
    pub fn isr_size(&self) -> Option<usize> {
        match &self.role {
            Role::Leader(state) => Some(state.isr.len()),
            _ => None,
        }
    }

    /// The high watermark a leader may publish: the smallest log end offset of the maximal ISR
    /// (the committed one and a follower being added, Kafka's `maximalIsr`: a replica that
    /// joins must hold everything below the high watermark, or an acknowledged record could be
    /// missing from a member of the ISR; this node's is `log_end_offset`), never below
    /// `current`, unchanged while the committed ISR is smaller than `min_insync_replicas`
    /// (capped at the replica count). `None` when this node does not lead: the fetcher sets a
    /// follower's.
    pub fn leader_high_watermark(
        &self,
        log_end_offset: i64,
        current: i64,
        min_insync_replicas: i32,
    ) -> Option<i64> {
        let Role::Leader(state) = &self.role else {
            return None;
        };
        if state.isr.len() < effective_min_isr(min_insync_replicas, state.replicas.len()) {
            return Some(current.min(log_end_offset));
        }
        let mut candidate = log_end_offset;
        let adding = state.pending_isr.iter().flatten();
        for id in state.isr.iter().chain(adding).filter(|id| **id != state.me) {
            let follower = state
                .followers
                .get(id)
                .map_or(-1, |progress| progress.log_end_offset);
            candidate = candidate.min(follower);
        }
        Some(candidate.max(current).min(log_end_offset))
    }

    /// Records a follower's fetch at `fetch_offset` while the leader's log ends at
    /// `leader_log_end_offset`. Returns the ISR to ask for when the follower, outside the ISR
    /// and `eligible` (unfenced, its broker epoch current), has reached both the high watermark
    /// and the start of the current epoch (Kafka's `maybeExpandIsr`). `None` also when the
    /// replica is not a follower of this leader.
    pub fn record_follower_fetch(
        &mut self,
        replica: i32,
        fetch_offset: i64,
        leader_log_end_offset: i64,
        high_watermark: i64,
        now_ms: i64,
        eligible: bool,
    ) -> Option<Vec<i32>> {
        let Role::Leader(state) = &mut self.role else {
            return None;
        };
        let progress = state.followers.get_mut(&replica)?;
        progress.on_fetch(fetch_offset, leader_log_end_offset, now_ms);
        let joins = eligible
            && !state.isr.contains(&replica)
            && state.pending_isr.is_none()
            && fetch_offset >= high_watermark
            && fetch_offset >= state.epoch_start_offset;
        if !joins {
            return None;
        }
        let mut isr = state.isr.clone();
        isr.push(replica);
        state.pending_isr = Some(isr.clone());
        Some(isr)
    }

    /// Records the log start offset `replica` sent in its fetch; whether it changed (a
    /// DeleteRecords may be waiting for it).
    pub fn record_follower_log_start(&mut self, replica: i32, log_start_offset: i64) -> bool {
        let Role::Leader(state) = &mut self.role else {
            return false;
        };
        let Some(progress) = state.followers.get_mut(&replica) else {
            return false;
        };
        let changed = progress.log_start_offset != log_start_offset;
        progress.log_start_offset = log_start_offset;
        changed
    }

    /// The smallest log start offset among this leader and its followers on live brokers
    /// (`alive`), Kafka's `lowWatermarkIfLeader`; `None` when this node does not lead.
    pub fn low_watermark(&self, leader_log_start: i64, alive: impl Fn(i32) -> bool) -> Option<i64> {
        let Role::Leader(state) = &self.role else {
            return None;
        };
        Some(
            state
                .followers
                .iter()
                .filter(|(replica, _)| alive(**replica))
                .map(|(_, progress)| progress.log_start_offset)
                .fold(leader_log_start, i64::min),
        )
    }

    /// The ISR without its members that are not caught up within `lag_ms` (Kafka's
    /// `maybeShrinkIsr`), when that removes anyone and no change is in flight.
    pub fn shrink_isr(
        &mut self,
        log_end_offset: i64,
        lag_ms: i64,
        now_ms: i64,
    ) -> Option<Vec<i32>> {
        let Role::Leader(state) = &mut self.role else {
            return None;
        };
        if state.pending_isr.is_some() {
            return None;
        }
        let isr: Vec<i32> = state
            .isr
            .iter()
            .copied()
            .filter(|id| {
                *id == state.me
                    || state
                        .followers
                        .get(id)
                        .is_some_and(|p| p.caught_up(log_end_offset, lag_ms, now_ms))
            })
            .collect();
        if isr.len() == state.isr.len() {
            return None;
        }
        state.pending_isr = Some(isr.clone());
        Some(isr)
    }

    /// Forgets an in-flight ISR change that failed, so a later one may be tried.
    pub fn clear_pending_isr(&mut self, leader_epoch: i32) {
        if let Role::Leader(state) = &mut self.role {
            if state.leader_epoch == leader_epoch {
                state.pending_isr = None;
            }
        }
    }
}

impl Replication {
    /// Whether the committed ISR holds at least `min_insync_replicas` (capped at the replica
    /// count) members; `false` when this node does not lead.
    pub fn isr_satisfies(&self, min_insync_replicas: i32) -> bool {
        match &self.role {
            Role::Leader(state) => {
                state.isr.len() >= effective_min_isr(min_insync_replicas, state.replicas.len())
            }
            _ => false,
        }
    }
}

const NOT_LEADER_OR_FOLLOWER: i16 = 6;
const REQUEST_TIMED_OUT: i16 = 7;
const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;

/// acks=all (Kafka's DelayedProduce): waits until the high watermark reaches `required` (the
/// offset after the appended batch), woken by the partition's `Notify` (follower progress moves
/// the high watermark), not by polling. Then the ISR must still satisfy
/// `min.insync.replicas` (else NOT_ENOUGH_REPLICAS_AFTER_APPEND: the records stay in the log).
/// REQUEST_TIMED_OUT at `deadline`; NOT_LEADER_OR_FOLLOWER once this node no longer leads at
/// `leader_epoch`.
pub async fn await_replication(
    state: &crate::log_manager::PartitionState,
    leader_epoch: i32,
    required: i64,
    deadline: tokio::time::Instant,
) -> Result<(), i16> {
    await_as_leader(state, leader_epoch, deadline, |replication| {
        (state.high_watermark() >= required).then(|| {
            if replication.isr_satisfies(state.min_insync_replicas()) {
                Ok(())
            } else {
                Err(NOT_ENOUGH_REPLICAS_AFTER_APPEND)
            }
        })
    })
    .await
}

/// DeleteRecords (Kafka's DelayedDeleteRecords): waits until every replica on a live broker
/// (`alive`, asked again at each wake-up) has a log start offset of at least `required`, woken
/// when a follower's fetch reports a new one. Answers the low watermark then;
/// REQUEST_TIMED_OUT at `deadline`; NOT_LEADER_OR_FOLLOWER once this node no longer leads at
/// `leader_epoch`.
pub async fn await_low_watermark(
    state: &crate::log_manager::PartitionState,
    leader_epoch: i32,
    required: i64,
    deadline: tokio::time::Instant,
    alive: impl Fn(i32) -> bool,
) -> Result<i64, i16> {
    await_as_leader(
        state,
        leader_epoch,
        deadline,
        |replication| match replication.low_watermark(state.log_start_offset(), &alive) {
            Some(low_watermark) if low_watermark >= required => Some(Ok(low_watermark)),
            Some(_) => None,
            None => Some(Err(NOT_LEADER_OR_FOLLOWER)),
        },
    )
    .await
}

/// Kafka's purgatory for one partition: `outcome` is asked, under the replication lock, at
/// first and after each wake-up of the partition's `Notify` until it answers. The wait ends
/// with NOT_LEADER_OR_FOLLOWER once this node no longer leads at `leader_epoch` or serves the
/// log, and with REQUEST_TIMED_OUT at `deadline`.
async fn await_as_leader<T>(
    state: &crate::log_manager::PartitionState,
    leader_epoch: i32,
    deadline: tokio::time::Instant,
    outcome: impl Fn(&Replication) -> Option<Result<T, i16>>,
) -> Result<T, i16> {
    loop {
        let notified = state.appended.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        {
            let replication = state.replication();
            if replication.leader_epoch() != Some(leader_epoch) || !state.is_serving() {
                return Err(NOT_LEADER_OR_FOLLOWER);
            }
            if let Some(answer) = outcome(&replication) {
                return answer;
            }
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return Err(REQUEST_TIMED_OUT);
        }
    }
}

/// An ISR change a leader asks the controller for (AlterPartition).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    pub topic: String,
    pub topic_id: uuid::Uuid,
    pub partition: i32,
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub new_isr: Vec<i32>,
}

/// Where leaders send their ISR changes; the node drains it into AlterPartition requests.
pub type IsrChanges = tokio::sync::mpsc::UnboundedSender<IsrChange>;

#[cfg(test)]
mod tests {
    use super::*;

    fn assignment(leader: i32, epoch: i32, isr: &[i32]) -> Assignment {
        Assignment {
            leader,
            leader_epoch: epoch,
            partition_epoch: epoch,
            replicas: vec![1, 2, 3],
            isr: isr.to_vec(),
        }
    }

    #[test]
    fn high_watermark_is_the_smallest_isr_log_end_offset() {
        let mut replication = Replication::default();
        assert_eq!(
            replication.assign(1, &assignment(1, 4, &[1, 2, 3]), 100, 1_000),
            RoleChange::BecameLeader
        );
        // Followers not heard from yet: the high watermark stays.
        assert_eq!(replication.leader_high_watermark(120, 90, 2), Some(90));
        replication.record_follower_fetch(2, 110, 120, 90, 1_100, true);
        assert_eq!(replication.leader_high_watermark(120, 90, 2), Some(90));
        replication.record_follower_fetch(3, 105, 120, 90, 1_100, true);
        assert_eq!(replication.leader_high_watermark(120, 90, 2), Some(105));
        // Never backwards.
        replication.record_follower_fetch(3, 95, 120, 105, 1_200, true);
        assert_eq!(replication.leader_high_watermark(120, 105, 2), Some(105));
        // A single replica commits what it appends.
        let mut single = Replication::default();
        single.assign(
            1,
            &Assignment {
                leader: 1,
                leader_epoch: 0,
                partition_epoch: 0,
                replicas: vec![1],
                isr: vec![1],
            },
            0,
            0,
        );
        assert_eq!(single.leader_high_watermark(7, 0, 2), Some(7));
    }

    #[test]
    fn the_low_watermark_is_the_smallest_log_start_of_live_replicas() {
        let mut replication = Replication::default();
        replication.assign(1, &assignment(1, 4, &[1, 2, 3]), 100, 0);
        // Followers not heard from: unknown (−1), as Kafka's replica state starts.
        assert_eq!(replication.low_watermark(6, |_| true), Some(-1));
        assert!(replication.record_follower_log_start(2, 6));
        assert!(!replication.record_follower_log_start(2, 6));
        assert!(replication.record_follower_log_start(3, 4));
        assert_eq!(replication.low_watermark(6, |_| true), Some(4));
        // A replica on a fenced broker does not hold it back.
        assert_eq!(
            replication.low_watermark(6, |replica| replica != 3),
            Some(6)
        );
        assert!(!Replication::default().record_follower_log_start(2, 6));
        assert_eq!(Replication::default().low_watermark(6, |_| true), None);
    }

    #[test]
    fn a_follower_being_added_holds_the_high_watermark_back() {
        let mut replication = Replication::default();
        replication.assign(1, &assignment(1, 4, &[1, 2]), 100, 0);
        replication.record_follower_fetch(2, 100, 100, 95, 10, true);
        assert_eq!(replication.leader_high_watermark(100, 95, 1), Some(100));
        // Follower 3 reaches the high watermark and the epoch's start: asked to join.
        assert_eq!(
            replication.record_follower_fetch(3, 101, 130, 100, 20, true),
            Some(vec![1, 2, 3])
        );
        replication.record_follower_fetch(2, 130, 130, 100, 30, true);
        // Until the change is answered, the high watermark waits for 3 as for a member.
        assert_eq!(replication.leader_high_watermark(130, 100, 1), Some(101));
        replication.record_follower_fetch(3, 125, 130, 101, 40, true);
        assert_eq!(replication.leader_high_watermark(130, 101, 1), Some(125));
        // Refused: 3 is no longer waited for.
        replication.clear_pending_isr(4);
        assert_eq!(replication.leader_high_watermark(130, 125, 1), Some(130));
    }

    #[test]
    fn strict_min_isr_freezes_the_high_watermark() {
        let mut replication = Replication::default();
        replication.assign(1, &assignment(1, 4, &[1]), 100, 0);
        assert_eq!(replication.leader_high_watermark(150, 100, 2), Some(100));
        assert_eq!(replication.leader_high_watermark(150, 100, 1), Some(150));
    }

    #[test]
    fn a_follower_joins_the_isr_once_it_reaches_the_high_watermark_and_the_epoch_start() {
        let mut replication = Replication::default();
        replication.assign(1, &assignment(1, 4, &[1, 2]), 100, 0);
        assert_eq!(
            replication.record_follower_fetch(3, 90, 130, 95, 10, true),
            None
        );
        // Past the high watermark but below the epoch's start (100).
        assert_eq!(
            replication.record_follower_fetch(3, 98, 130, 95, 20, true),
            None
        );
        assert_eq!(
            replication.record_follower_fetch(3, 101, 130, 95, 30, true),
            Some(vec![1, 2, 3])
        );
        // One change in flight at a time.
        assert_eq!(
            replication.record_follower_fetch(3, 130, 130, 95, 40, true),
            None
        );
        replication.clear_pending_isr(4);
        assert_eq!(
            replication.record_follower_fetch(3, 130, 130, 95, 50, true),
            Some(vec![1, 2, 3])
        );
        // The image commits it: the pending change is done.
        replication.assign(
            1,
            &Assignment {
                partition_epoch: 5,
                ..assignment(1, 4, &[1, 2, 3])
            },
            130,
            60,
        );
        assert_eq!(replication.isr_size(), Some(3));
    }

    #[test]
    fn lagging_followers_leave_the_isr() {
        let mut replication = Replication::default();
        replication.assign(1, &assignment(1, 4, &[1, 2, 3]), 100, 1_000);
        // Follower 2 keeps up; follower 3 last fetched at 1_000 far behind.
        replication.record_follower_fetch(2, 100, 100, 100, 1_000, true);
        replication.record_follower_fetch(3, 50, 100, 100, 1_000, true);
        assert_eq!(replication.shrink_isr(200, 30_000, 20_000), None);
        replication.record_follower_fetch(2, 200, 200, 100, 35_000, true);
        assert_eq!(
            replication.shrink_isr(200, 30_000, 35_000),
            Some(vec![1, 2])
        );
        assert_eq!(replication.shrink_isr(200, 30_000, 36_000), None);
    }

    #[test]
    fn a_new_epoch_resets_the_followers() {
        let mut replication = Replication::default();
        replication.assign(1, &assignment(1, 4, &[1, 2, 3]), 100, 0);
        replication.record_follower_fetch(2, 100, 100, 100, 1, true);
        assert_eq!(
            replication.assign(1, &assignment(2, 5, &[2, 3]), 100, 2),
            RoleChange::BecameFollower
        );
        assert_eq!(replication.leader_epoch(), None);
        assert_eq!(
            replication.assign(1, &assignment(1, 6, &[1, 2, 3]), 140, 3),
            RoleChange::BecameLeader
        );
        let Role::Leader(state) = &replication.role else {
            unreachable!("assigned as leader above");
        };
        assert_eq!(state.epoch_start_offset, 140);
        assert_eq!(state.followers.get(&2).map(|f| f.log_end_offset), Some(-1));
    }

    /// A leadership taken while the log was still opening starts its epoch at the log end the
    /// log opened with; a follower's role is untouched.
    #[test]
    fn an_epoch_taken_before_the_log_opened_starts_at_its_log_end() {
        let mut replication = Replication::default();
        replication.assign(1, &assignment(1, 4, &[1, 2, 3]), 0, 0);
        assert_eq!(replication.leader_epoch_start_offset(), Some(0));
        replication.log_opened(15);
        assert_eq!(replication.leader_epoch_start_offset(), Some(15));
        replication.assign(1, &assignment(2, 5, &[1, 2, 3]), 15, 1);
        replication.log_opened(20);
        assert_eq!(replication.leader_epoch_start_offset(), None);
        assert!(replication.follows(2, 5));
    }
}
