//! InitProducerId (key 22) for idempotent producers, and the broker's producer-id blocks.
//!
//! Ids come from blocks the active controller hands out through a `ProducerIdsRecord`
//! ([`crate::controller::AllocateProducerIds`]), so an id is never issued twice, across
//! restarts too. Transactions are not served yet: a transactional id gets
//! COORDINATOR_NOT_AVAILABLE (its coordinator cannot be found) and nothing is written, once its
//! transaction timeout passes the check Kafka's coordinator makes first.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AllocateProducerIdsRequest, AllocateProducerIdsResponse, BrokerId, InitProducerIdRequest,
    InitProducerIdResponse, ProducerId, ResponseKind,
};

use gregor_publishers::acl::{AclOperation, ResourceType, CLUSTER_NAME};

use super::data::{INVALID_REQUEST, NONE};
use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::AllocateProducerIds;

const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const INVALID_TRANSACTION_TIMEOUT: i16 = 50;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;

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
            let (start, len) = allocate_block(ctx, broker_epoch).await?;
            tracing::info!(start, len, "allocated a block of producer ids");
            *block = (start, start + len);
        }
        let id = block.0;
        block.0 += 1;
        Ok(id)
    }
}

/// A block from this node's controller when it is the active one, else from the active
/// controller through AllocateProducerIds on its controller listener (KIP-730).
async fn allocate_block(ctx: &HandlerContext, broker_epoch: i64) -> Result<(i64, i64), i16> {
    let local = ctx
        .controller
        .send(AllocateProducerIds {
            broker_id: ctx.node.node_id,
            broker_epoch,
        })
        .await;
    match local {
        Ok(Ok(block)) => return Ok((block.start, block.len)),
        Ok(Err(ResponseError::NotController)) => {}
        Ok(Err(code)) => {
            tracing::warn!(error = ?code, "cannot allocate producer ids");
            return Err(COORDINATOR_LOAD_IN_PROGRESS);
        }
        Err(error) => {
            tracing::warn!(%error, "controller unavailable for producer ids");
            return Err(COORDINATOR_LOAD_IN_PROGRESS);
        }
    }
    let Some(forwarder) = ctx.forwarder.as_ref() else {
        return Err(COORDINATOR_LOAD_IN_PROGRESS);
    };
    let request = AllocateProducerIdsRequest::default()
        .with_broker_id(BrokerId(ctx.node.node_id))
        .with_broker_epoch(broker_epoch);
    match forwarder.allocate_producer_ids(request).await.answered() {
        Some(response) if response.error_code == NONE && response.producer_id_len > 0 => Ok((
            response.producer_id_start.0,
            i64::from(response.producer_id_len),
        )),
        other => {
            tracing::warn!(
                error_code = other.map(|r| r.error_code),
                "the active controller did not allocate producer ids"
            );
            Err(COORDINATOR_LOAD_IN_PROGRESS)
        }
    }
}

/// AllocateProducerIds (key 67, controller listener): a broker asks the active controller for
/// its next block of producer ids.
pub(super) async fn allocate(
    ctx: &HandlerContext,
    request: AllocateProducerIdsRequest,
) -> ApiResponse {
    let allocated = ctx
        .controller
        .send(AllocateProducerIds {
            broker_id: request.broker_id.0,
            broker_epoch: request.broker_epoch,
        })
        .await;
    let response = match allocated {
        Ok(Ok(block)) => AllocateProducerIdsResponse::default()
            .with_producer_id_start(ProducerId(block.start))
            .with_producer_id_len(i32::try_from(block.len).unwrap_or(i32::MAX)),
        Ok(Err(code)) => AllocateProducerIdsResponse::default()
            .with_error_code(code.code())
            .with_producer_id_start(ProducerId(-1)),
        Err(_) => AllocateProducerIdsResponse::default()
            .with_error_code(ResponseError::NotController.code())
            .with_producer_id_start(ProducerId(-1)),
    };
    let mut errors = ErrorCounts::default();
    errors.add(response.error_code);
    ApiResponse::new(ResponseKind::AllocateProducerIds(response), errors)
}

pub(super) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: InitProducerIdRequest,
) -> ApiResponse {
    // Kafka: WRITE on the transactional id; an idempotent producer IDEMPOTENT_WRITE on the
    // cluster or WRITE on some topic (KIP-679).
    let access = Access::new(ctx, info);
    let denied = match request.transactional_id.as_deref() {
        Some(id) => !access.allows(AclOperation::Write, ResourceType::TransactionalId, id),
        None => {
            !access.quietly_allows(
                AclOperation::IdempotentWrite,
                ResourceType::Cluster,
                CLUSTER_NAME,
            ) && !access.allows_any(AclOperation::Write, ResourceType::Topic)
        }
    };
    // An existing producer may name itself (v3+); exactly one of the two unset is malformed,
    // with or without a transactional id (both are unset before v3).
    let half_named = (request.producer_id.0 == -1) != (request.producer_epoch == -1);
    // Kafka's `handleInitProducerIdRequest` order: authorization, the producer id and epoch,
    // then the coordinator's own checks.
    let result = match request.transactional_id.as_deref().map(|id| id.as_str()) {
        Some(_) if denied => Err(TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        None if denied => Err(CLUSTER_AUTHORIZATION_FAILED),
        _ if half_named => Err(INVALID_REQUEST),
        Some("") => Err(INVALID_REQUEST),
        // `TransactionCoordinator.handleInitProducerId` checks the timeout before it looks up
        // the transaction's state: a wrong one is fatal, not a retriable wait.
        Some(_)
            if !(1..=ctx.settings.transaction_max_timeout_ms)
                .contains(&request.transaction_timeout_ms) =>
        {
            Err(INVALID_TRANSACTION_TIMEOUT)
        }
        Some(_) => Err(COORDINATOR_NOT_AVAILABLE),
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
