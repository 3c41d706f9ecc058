//! The leader's side of a follower's Fetch (replica id ≥ 0): reads up to the log end offset,
//! answers a diverging epoch instead of records when the follower's log has left the leader's
//! history (KIP-595 fields, replication since Kafka 2.7), and records the follower's progress,
//! which moves the high watermark and may add the follower to the ISR.

use std::sync::Arc;

use gregor_publishers::MetadataImage;
use kafka_protocol::messages::fetch_request::FetchPartition;
use kafka_protocol::messages::fetch_response::{EpochEndOffset, LeaderIdAndEpoch, PartitionData};
use kafka_protocol::messages::{BrokerId, FetchRequest};

use super::data::{
    fetch_leader_epoch, led_partition, NONE, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE,
    UNKNOWN_LEADER_EPOCH,
};
use crate::context::HandlerContext;
use crate::log_manager::{now_ms, PartitionState};
use crate::replication::IsrChange;

/// The fetching replica's id (−1 for consumers): the top-level field before v15, the tagged
/// `ReplicaState` from v15 (KIP-903).
pub(super) fn replica_id(request: &FetchRequest, version: i16) -> i32 {
    if version >= 15 {
        request.replica_state.replica_id.0
    } else {
        request.replica_id.0
    }
}

/// The offset a waiting fetch watches: followers wait for the log end offset to move,
/// consumers for the high watermark.
pub(super) fn watched_offset(state: &PartitionState, follower: bool) -> i64 {
    if follower {
        state.log_end_offset()
    } else {
        state.high_watermark()
    }
}

/// One partition of a follower's fetch.
pub(super) struct ReplicaRead {
    pub(super) response: PartitionData,
    pub(super) bytes: i64,
    /// The partition to wait on and the log end offset sampled before the read.
    pub(super) wait_on: Option<(Arc<PartitionState>, i64)>,
    /// The answer must go out now (a diverging epoch).
    pub(super) urgent: bool,
}

fn failed(index: i32, code: i16) -> ReplicaRead {
    ReplicaRead {
        response: super::fetch::partition_error(index, code),
        bytes: 0,
        wait_on: None,
        urgent: false,
    }
}

/// Serves partition `wanted` of topic `topic` to follower `replica` (broker epoch
/// `replica_epoch`, −1 when not sent) within `limit` bytes (`first_data`: the first batch goes
/// whole whatever the limit).
#[allow(clippy::too_many_arguments)] // one partition of one request: each is a request field
pub(super) async fn read_partition(
    ctx: &HandlerContext,
    image: &MetadataImage,
    topic: Option<&str>,
    unknown_topic_code: i16,
    wanted: &FetchPartition,
    replica: i32,
    replica_epoch: i64,
    limit: i64,
    first_data: bool,
) -> ReplicaRead {
    let index = wanted.partition;
    let led = match led_partition(
        ctx,
        image,
        topic,
        index,
        unknown_topic_code,
        false,
        fetch_leader_epoch(wanted.current_leader_epoch),
    ) {
        Ok(led) => led,
        Err(not_served) => {
            let mut read = failed(index, not_served.code);
            if let Some((leader, epoch)) = not_served.leader {
                read.response.current_leader = LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(leader))
                    .with_leader_epoch(epoch);
            }
            return read;
        }
    };
    let name = topic.unwrap_or_default();
    let registration = led.registration;
    if !registration.replicas.as_slice().contains(&replica) {
        // Normal during a reassignment: the follower retries once its metadata has caught up.
        let code = if wanted.current_leader_epoch >= 0 {
            UNKNOWN_LEADER_EPOCH
        } else {
            NOT_LEADER_OR_FOLLOWER
        };
        return failed(index, code);
    }
    let registered_epoch = image.cluster.broker(replica).map(|b| b.epoch);
    if replica_epoch >= 0 && registered_epoch.is_some_and(|epoch| replica_epoch < epoch) {
        // A previous incarnation of the follower (KIP-903).
        return failed(index, NOT_LEADER_OR_FOLLOWER);
    }
    let Some(logs) = ctx.logs.as_ref() else {
        return failed(index, NOT_LEADER_OR_FOLLOWER);
    };
    let state = led.state;
    let leader_log_end = state.log_end_offset();
    let fetch_offset = wanted.fetch_offset;
    let log_start = state.log_start_offset();
    match last_fetched_epoch_check(logs, name, index, wanted, log_start).await {
        Ok(Some(diverging)) => {
            let mut read = answered(index, &state);
            read.response.diverging_epoch = diverging;
            read.urgent = true;
            return read;
        }
        Ok(None) => {}
        Err(code) => return failed(index, code),
    }
    if fetch_offset < log_start || fetch_offset > leader_log_end {
        return failed(index, OFFSET_OUT_OF_RANGE);
    }
    let mut read = answered(index, &state);
    if fetch_offset < leader_log_end && (limit > 0 || first_data) {
        match logs
            .read_for_follower(name, index, fetch_offset, limit.max(0) as u64, first_data)
            .await
        {
            Ok(result) => {
                read.bytes = result.records.len() as i64;
                read.response.records = Some(result.records);
            }
            Err(error) => return failed(index, error.code()),
        }
    }
    let eligible = image
        .cluster
        .broker(replica)
        .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
        && (replica_epoch < 0 || registered_epoch == Some(replica_epoch));
    let (expand, log_start_moved) = {
        let mut replication = state.replication();
        let expand = replication.record_follower_fetch(
            replica,
            fetch_offset,
            leader_log_end,
            state.high_watermark(),
            now_ms(),
            eligible,
        );
        let moved = replication.record_follower_log_start(replica, wanted.log_start_offset);
        (expand, moved)
    };
    if state.refresh_high_watermark() || log_start_moved {
        state.appended.notify_waiters();
    }
    if let Some(new_isr) = expand {
        tracing::info!(topic = name, partition = index, replica, isr = ?new_isr, "asking to add a caught-up follower to the ISR");
        let sent = logs.request_isr_change(IsrChange {
            topic: name.to_owned(),
            topic_id: state.topic_id,
            partition: index,
            leader_epoch: registration.leader_epoch,
            partition_epoch: registration.partition_epoch,
            new_isr,
        });
        if !sent {
            state
                .replication()
                .clear_pending_isr(registration.leader_epoch);
        }
    }
    let high_watermark = state.high_watermark();
    read.response.high_watermark = high_watermark;
    read.response.last_stable_offset = high_watermark;
    read.wait_on = Some((state, leader_log_end));
    read
}

/// What a fetch's last fetched epoch (v12+, KIP-595) says before anything is read, for
/// followers and consumers alike, in the order of Kafka's `Partition.readRecords`: `Ok(None)`
/// to read on, `Ok(Some(_))` to answer a diverging epoch without records, or the error code.
pub(super) async fn last_fetched_epoch_check(
    logs: &crate::log_manager::LogManager,
    topic: &str,
    index: i32,
    wanted: &FetchPartition,
    log_start_offset: i64,
) -> Result<Option<EpochEndOffset>, i16> {
    if wanted.last_fetched_epoch < 0 {
        return Ok(None);
    }
    let epoch_end = logs
        .end_offset_for_epoch(topic, index, wanted.last_fetched_epoch)
        .await
        .map_err(|error| error.code())?;
    diverging_epoch(
        epoch_end,
        wanted.last_fetched_epoch,
        wanted.fetch_offset,
        log_start_offset,
    )
}

/// [`last_fetched_epoch_check`] given the end of the last fetched epoch in the leader epoch
/// cache (`(epoch, end_offset)`, −1 when the cache cannot tell): a fetch offset below the log
/// start is out of range whatever the epochs say; an older epoch or an end below the fetch
/// offset means the fetcher's log left this one there.
pub(super) fn diverging_epoch(
    (epoch, end_offset): (i32, i64),
    last_fetched_epoch: i32,
    fetch_offset: i64,
    log_start_offset: i64,
) -> Result<Option<EpochEndOffset>, i16> {
    if epoch == -1 || end_offset == -1 || fetch_offset < log_start_offset {
        return Err(OFFSET_OUT_OF_RANGE);
    }
    if epoch < last_fetched_epoch || end_offset < fetch_offset {
        return Ok(Some(
            EpochEndOffset::default()
                .with_epoch(epoch)
                .with_end_offset(end_offset),
        ));
    }
    Ok(None)
}

/// A successful answer without records yet, with the partition's offsets.
fn answered(index: i32, state: &PartitionState) -> ReplicaRead {
    let high_watermark = state.high_watermark();
    ReplicaRead {
        response: PartitionData::default()
            .with_partition_index(index)
            .with_error_code(NONE)
            .with_high_watermark(high_watermark)
            .with_last_stable_offset(high_watermark)
            .with_log_start_offset(state.log_start_offset())
            .with_preferred_read_replica(BrokerId(-1))
            .with_aborted_transactions(None)
            .with_records(Some(bytes::Bytes::new())),
        bytes: 0,
        wait_on: None,
        urgent: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_last_fetched_epoch_is_checked_in_kafkas_order() {
        // The cache: epoch 2 from 0, 3 from 3, 4 from 6; log start 2.
        let end_of = |epoch: i32| match epoch {
            0..=2 => (2, 3),
            3 => (3, 6),
            4 => (4, 9),
            _ => (-1, -1),
        };
        let check = |last: i32, offset: i64| diverging_epoch(end_of(last), last, offset, 2);
        let diverged = |epoch, end_offset| {
            Ok(Some(
                EpochEndOffset::default()
                    .with_epoch(epoch)
                    .with_end_offset(end_offset),
            ))
        };
        assert_eq!(check(3, 6), Ok(None), "the fetch offset ends the epoch");
        assert_eq!(check(3, 5), Ok(None), "inside the epoch");
        assert_eq!(check(3, 7), diverged(3, 6), "past the end of the epoch");
        assert_eq!(check(2, 4), diverged(2, 3), "an older epoch, past its end");
        assert_eq!(check(5, 9), Err(OFFSET_OUT_OF_RANGE), "above every epoch");
        // Below the log start: out of range even where the epochs diverge.
        assert_eq!(check(3, 1), Err(OFFSET_OUT_OF_RANGE));
        assert_eq!(check(1, 1), Err(OFFSET_OUT_OF_RANGE));
    }
}
