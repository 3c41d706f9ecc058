//! InitProducerId (key 22) for idempotent producers, and the broker's producer-id blocks.
//!
//! Ids come from blocks the active controller hands out through a `ProducerIdsRecord`
//! ([`crate::controller::AllocateProducerIds`]), so an id is never issued twice, across
//! restarts too. Transactions are not served yet: a transactional id gets
//! COORDINATOR_NOT_AVAILABLE (its coordinator cannot be found) and nothing is written.

use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, ResponseKind,
};

use super::data::{INVALID_REQUEST, NONE};
use super::{ApiResponse, ErrorCounts};
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::AllocateProducerIds;

const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;

/// The block of producer ids this broker is issuing from: `[next, end)`.
#[derive(Debug, Default)]
pub struct ProducerIdManager {
    block: tokio::sync::Mutex<(i64, i64)>,
}

impl ProducerIdManager {
    /// The next producer id, fetching a new block from the controller when this one is used up.
    /// While no block can be had the answer is COORDINATOR_LOAD_IN_PROGRESS (retriable), as
    /// Kafka answers: older clients treat REQUEST_TIMED_OUT as fatal.
    async fn next_id(&self, ctx: &HandlerContext) -> Result<i64, i16> {
        let mut block = self.block.lock().await;
        if block.0 >= block.1 {
            let broker_epoch = ctx
                .image
                .load()
                .cluster
                .broker(ctx.node.node_id)
                .map_or(-1, |b| b.epoch);
            let allocated = ctx
                .controller
                .send(AllocateProducerIds {
                    broker_id: ctx.node.node_id,
                    broker_epoch,
                })
                .await;
            match allocated {
                Ok(Ok(new_block)) => {
                    tracing::info!(
                        start = new_block.start,
                        len = new_block.len,
                        "allocated a block of producer ids"
                    );
                    *block = (new_block.start, new_block.start + new_block.len);
                }
                Ok(Err(code)) => {
                    tracing::warn!(error = ?code, "cannot allocate producer ids");
                    return Err(COORDINATOR_LOAD_IN_PROGRESS);
                }
                Err(error) => {
                    tracing::warn!(%error, "controller unavailable for producer ids");
                    return Err(COORDINATOR_LOAD_IN_PROGRESS);
                }
            }
        }
        let id = block.0;
        block.0 += 1;
        Ok(id)
    }
}

pub(super) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: InitProducerIdRequest,
) -> ApiResponse {
    let result = match request.transactional_id.as_ref().map(|t| t.is_empty()) {
        Some(true) => Err(INVALID_REQUEST),
        Some(false) => Err(COORDINATOR_NOT_AVAILABLE),
        // v3+: an existing producer may name itself; exactly one of the two unset is malformed.
        None if info.api_version >= 3
            && ((request.producer_id.0 == -1) != (request.producer_epoch == -1)) =>
        {
            Err(INVALID_REQUEST)
        }
        None => ctx.producer_ids.next_id(ctx).await,
    };
    let response = match result {
        Ok(id) => InitProducerIdResponse::default()
            .with_error_code(NONE)
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(code) => InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    };
    let mut errors = ErrorCounts::default();
    errors.add(response.error_code);
    ApiResponse::new(ResponseKind::InitProducerId(response), errors)
}
