//! What Produce, Fetch and ListOffsets share: finding the log of a partition this node leads.

use std::sync::Arc;

use gregor_publishers::image::PartitionRegistration;
use gregor_publishers::MetadataImage;
use kafka_protocol::protocol::StrBytes;

use crate::context::HandlerContext;
use crate::log_manager::PartitionState;

pub(super) const UNKNOWN_SERVER_ERROR: i16 = -1;
pub(super) const NONE: i16 = 0;
pub(super) const OFFSET_OUT_OF_RANGE: i16 = 1;
pub(super) const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
pub(super) const NOT_LEADER_OR_FOLLOWER: i16 = 6;
pub(super) const REPLICA_NOT_AVAILABLE: i16 = 9;
pub(super) const NOT_ENOUGH_REPLICAS: i16 = 19;
pub(super) const INVALID_REQUIRED_ACKS: i16 = 21;
pub(super) const UNSUPPORTED_VERSION: i16 = 35;
pub(super) const INVALID_REQUEST: i16 = 42;
pub(super) const KAFKA_STORAGE_ERROR: i16 = 56;
pub(super) const FENCED_LEADER_EPOCH: i16 = 74;
pub(super) const UNKNOWN_LEADER_EPOCH: i16 = 75;
pub(super) const UNSUPPORTED_COMPRESSION_TYPE: i16 = 76;
pub(super) const UNKNOWN_TOPIC_ID: i16 = 100;
pub(super) const INCONSISTENT_TOPIC_ID: i16 = 103;
pub(super) const TOPIC_AUTHORIZATION_FAILED: i16 = 29;

/// KIP-951's `node_endpoints`: each of `leaders` (ids in any order, repeats allowed) that is
/// registered with an endpoint on `listener`, once, by id, built by `endpoint(id, host, port,
/// rack)` (Produce and Fetch each have their own generated type).
pub(super) fn leader_endpoints<T>(
    image: &MetadataImage,
    listener: &str,
    mut leaders: Vec<i32>,
    endpoint: impl Fn(i32, StrBytes, i32, Option<StrBytes>) -> T,
) -> Vec<T> {
    leaders.sort_unstable();
    leaders.dedup();
    leaders
        .into_iter()
        .filter_map(|id| image.cluster.broker(id))
        .filter_map(|broker| {
            let address = broker.endpoint(listener)?;
            Some(endpoint(
                broker.id,
                StrBytes::from_string(address.host.clone()),
                i32::from(address.port),
                broker.rack.clone().map(StrBytes::from_string),
            ))
        })
        .collect()
}

/// The name of a requested topic and the code for an unknown one: from v13 on, Produce and
/// Fetch name topics by id (UNKNOWN_TOPIC_ID), before that by name.
pub(super) fn requested_topic(
    image: &MetadataImage,
    by_id: bool,
    id: &uuid::Uuid,
    name: &str,
) -> (Option<String>, i16) {
    if by_id {
        (
            image.topics.get_by_id(id).map(|t| t.name.to_string()),
            UNKNOWN_TOPIC_ID,
        )
    } else {
        (Some(name.to_owned()), UNKNOWN_TOPIC_OR_PARTITION)
    }
}

/// A partition this node leads and whose log is open.
pub(super) struct Led<'a> {
    pub(super) registration: &'a PartitionRegistration,
    pub(super) state: Arc<PartitionState>,
}

/// Why a partition cannot be served here.
pub(super) struct NotServed {
    pub(super) code: i16,
    /// The leader as the image knows it (id, epoch), for `current_leader`.
    pub(super) leader: Option<(i32, i32)>,
}

/// The partition `partition` of `topic` (a name; `None` when the topic is unknown) if this node
/// leads it and serves its log (`or_opening`: or is opening it, which appends may wait for).
/// `current_leader_epoch` is the request's (`None`: unchecked); as Kafka's
/// `Partition.getLocalLog`, a replica checks it before whether it leads, so a client behind or
/// ahead of the partition's epoch learns so (FENCED / UNKNOWN_LEADER_EPOCH) from a follower
/// too, and a log dir gone offline answers KAFKA_STORAGE_ERROR before either.
pub(super) fn led_partition<'a>(
    ctx: &HandlerContext,
    image: &'a MetadataImage,
    topic: Option<&str>,
    partition: i32,
    unknown_topic_code: i16,
    or_opening: bool,
    current_leader_epoch: Option<i32>,
) -> Result<Led<'a>, NotServed> {
    let not_served = |code, leader| Err(NotServed { code, leader });
    let Some(topic) = topic.and_then(|name| image.topics.get_by_name(name)) else {
        return not_served(unknown_topic_code, None);
    };
    let Some(registration) = topic.partition(partition) else {
        return not_served(UNKNOWN_TOPIC_OR_PARTITION, None);
    };
    let leader = Some((registration.leader, registration.leader_epoch));
    let node_id = ctx.node.node_id;
    if !registration.replicas.as_slice().contains(&node_id) {
        return not_served(NOT_LEADER_OR_FOLLOWER, leader);
    }
    let state = ctx
        .logs
        .as_ref()
        .and_then(|logs| logs.partition(&topic.name, partition));
    if state.as_ref().is_some_and(|state| state.is_offline()) {
        return not_served(KAFKA_STORAGE_ERROR, leader);
    }
    if let Err(code) = check_leader_epoch(current_leader_epoch, registration.leader_epoch) {
        return not_served(code, leader);
    }
    if registration.leader != node_id {
        return not_served(NOT_LEADER_OR_FOLLOWER, leader);
    }
    match state {
        Some(state)
            if state.topic_id == topic.id
                && (state.is_serving() || or_opening && state.is_opening()) =>
        {
            Ok(Led {
                registration,
                state,
            })
        }
        // Not open yet (the image is ahead of the log manager): retriable.
        _ => not_served(NOT_LEADER_OR_FOLLOWER, leader),
    }
}

/// FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH for a request's current leader epoch, as Kafka's
/// `Partition.checkCurrentLeaderEpoch` (`None`: unchecked).
fn check_leader_epoch(requested: Option<i32>, current: i32) -> Result<(), i16> {
    match requested {
        None => Ok(()),
        Some(requested) if requested == current => Ok(()),
        Some(requested) if requested < current => Err(FENCED_LEADER_EPOCH),
        Some(_) => Err(UNKNOWN_LEADER_EPOCH),
    }
}

/// A Fetch's current leader epoch: Kafka's `FetchRequest` reads every negative value as absent.
pub(super) fn fetch_leader_epoch(epoch: i32) -> Option<i32> {
    (epoch >= 0).then_some(epoch)
}

/// A ListOffsets or OffsetForLeaderEpoch current leader epoch: there only −1 is absent
/// (`ReplicaManager.fetchOffset`, `lastOffsetForLeaderEpoch`), so −5 is fenced.
pub(super) fn listed_leader_epoch(epoch: i32) -> Option<i32> {
    (epoch != -1).then_some(epoch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_fetch_reads_every_negative_epoch_as_absent() {
        // Leader epoch 3 at the partition.
        assert_eq!(check_leader_epoch(fetch_leader_epoch(-1), 3), Ok(()));
        assert_eq!(check_leader_epoch(fetch_leader_epoch(-5), 3), Ok(()));
        assert_eq!(check_leader_epoch(listed_leader_epoch(-1), 3), Ok(()));
        assert_eq!(
            check_leader_epoch(listed_leader_epoch(-5), 3),
            Err(FENCED_LEADER_EPOCH)
        );
        assert_eq!(check_leader_epoch(listed_leader_epoch(3), 3), Ok(()));
        assert_eq!(
            check_leader_epoch(listed_leader_epoch(2), 3),
            Err(FENCED_LEADER_EPOCH)
        );
        assert_eq!(
            check_leader_epoch(fetch_leader_epoch(4), 3),
            Err(UNKNOWN_LEADER_EPOCH)
        );
        assert_eq!(FENCED_LEADER_EPOCH, 74);
    }
}
