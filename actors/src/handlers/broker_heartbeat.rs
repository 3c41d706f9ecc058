//! BrokerHeartbeat (key 63, controller listener). Gregor tracks broker liveness through its own
//! quorum heartbeat, so only `want_shut_down` acts (controlled shutdown); any other heartbeat
//! of a registered broker at its epoch is answered with its fenced state, and an unknown broker
//! or another epoch gets STALE_BROKER_EPOCH, as Kafka answers.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{BrokerHeartbeatRequest, BrokerHeartbeatResponse, ResponseKind};

use super::{ApiResponse, ErrorCounts};
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::ControlledShutdown;
use crate::fencing::STALE_BROKER_EPOCH;

pub(super) async fn handle(
    ctx: &HandlerContext,
    _info: &RequestInfo,
    request: BrokerHeartbeatRequest,
) -> ApiResponse {
    let response = if request.want_shut_down {
        ctx.controller
            .send(ControlledShutdown {
                broker_id: request.broker_id.0,
                broker_epoch: request.broker_epoch,
            })
            .await
            .unwrap_or_else(|_| {
                BrokerHeartbeatResponse::default()
                    .with_error_code(ResponseError::NotController.code())
            })
    } else {
        let image = ctx.image.load();
        match image
            .cluster
            .broker(request.broker_id.0)
            .filter(|b| b.epoch == request.broker_epoch)
        {
            Some(broker) => BrokerHeartbeatResponse::default()
                .with_is_caught_up(true)
                .with_is_fenced(broker.fenced),
            None => BrokerHeartbeatResponse::default()
                .with_error_code(STALE_BROKER_EPOCH)
                .with_is_fenced(true),
        }
    };
    let mut errors = ErrorCounts::default();
    errors.add(response.error_code);
    ApiResponse::new(ResponseKind::BrokerHeartbeat(response), errors)
}
