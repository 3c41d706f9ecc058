//! The broker's side of a controlled shutdown: before its logs close, a broker stopping with
//! SIGTERM asks the active controller (BrokerHeartbeat with `want_shut_down`) to move its
//! leaderships to other in-sync replicas, then waits until its image shows it leads no
//! replicated partition, so producers see only retriable NOT_LEADER_OR_FOLLOWER answers.

use std::sync::Arc;
use std::time::Duration;

use actix::Addr;
use arc_swap::ArcSwap;
use gregor_publishers::MetadataImage;
use kafka_protocol::messages::{BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerId};

use crate::context::ControllerForwarder;
use crate::controller::{ControlledShutdown, Controller};

const NOT_CONTROLLER: i16 = 41;
/// BrokerHeartbeat v1 (v0 lacks offline log dirs, which Gregor does not send either).
const BROKER_HEARTBEAT_VERSION: i16 = 1;
/// Between asks while no controller answers.
const RETRY: Duration = Duration::from_millis(200);

/// Whether this node leads a partition that has other replicas to take over.
fn leads_replicated(image: &MetadataImage, node_id: i32) -> bool {
    image.topics.iter().any(|topic| {
        topic.partitions().any(|(_, p)| {
            p.leader == node_id && p.replicas.as_slice().iter().any(|id| *id != node_id)
        })
    })
}

/// Moves this broker's leaderships away within `timeout`; returns whether it leads no
/// replicated partition any more (or never did).
pub async fn controlled_shutdown(
    image: &Arc<ArcSwap<MetadataImage>>,
    controller: &Addr<Controller>,
    forwarder: Option<&Arc<dyn ControllerForwarder>>,
    node_id: i32,
    timeout: Duration,
) -> bool {
    if !leads_replicated(&image.load(), node_id) {
        return true;
    }
    let deadline = tokio::time::Instant::now() + timeout;
    let Some(broker_epoch) = image.load().cluster.broker(node_id).map(|b| b.epoch) else {
        return false;
    };
    tracing::info!(
        broker_epoch,
        "controlled shutdown: moving leaderships to other in-sync replicas"
    );
    while tokio::time::Instant::now() < deadline {
        let answer = ask(controller, forwarder, node_id, broker_epoch).await;
        match answer {
            Some(response) if response.error_code == 0 && response.should_shut_down => break,
            other => {
                tracing::debug!(answer = ?other.map(|r| r.error_code), "controlled shutdown not granted yet");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
    // The records are committed; wait for this node's image to carry them.
    while tokio::time::Instant::now() < deadline {
        if !leads_replicated(&image.load(), node_id) {
            tracing::info!("controlled shutdown: no leaderships left");
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tracing::warn!("controlled shutdown did not complete in time; stopping anyway");
    false
}

async fn ask(
    controller: &Addr<Controller>,
    forwarder: Option<&Arc<dyn ControllerForwarder>>,
    node_id: i32,
    broker_epoch: i64,
) -> Option<BrokerHeartbeatResponse> {
    let local = controller
        .send(ControlledShutdown {
            broker_id: node_id,
            broker_epoch,
        })
        .await
        .ok();
    match local {
        Some(response) if response.error_code != NOT_CONTROLLER => Some(response),
        _ => {
            let request = BrokerHeartbeatRequest::default()
                .with_broker_id(BrokerId(node_id))
                .with_broker_epoch(broker_epoch)
                .with_current_metadata_offset(-1)
                .with_want_shut_down(true);
            forwarder?
                .broker_heartbeat(request, BROKER_HEARTBEAT_VERSION)
                .await
                .answered()
        }
    }
}
