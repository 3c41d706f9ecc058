//! UnregisterBroker (key 64, v0): removes a departed broker's registration (KIP-631). Served
//! on controller listeners; a broker forwards it to the active controller. Kafka unregisters
//! any registered broker, alive or not (a live one registers again with its next heartbeat),
//! and answers BROKER_ID_NOT_REGISTERED for an id with no registration.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ResponseKind, UnregisterBrokerRequest, UnregisterBrokerResponse};

use super::{ApiResponse, ErrorCounts};
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::UnregisterBroker;

pub(super) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: UnregisterBrokerRequest,
) -> ApiResponse {
    let response = if ctx.answers_not_controller(info) {
        // Only the active controller decides (a broker forwards; this is what is left when no
        // active controller could be reached).
        UnregisterBrokerResponse::default().with_error_code(ResponseError::NotController.code())
    } else {
        match ctx
            .ask_controller(
                info.controller_failure.as_ref(),
                UnregisterBroker {
                    broker_id: request.broker_id.0,
                },
            )
            .await
        {
            Ok(response) => response,
            Err(error) => {
                tracing::error!(%error, "controller actor unavailable");
                UnregisterBrokerResponse::default()
                    .with_error_code(ResponseError::NotController.code())
            }
        }
    };
    let mut errors = ErrorCounts::default();
    errors.add(response.error_code);
    ApiResponse::new(ResponseKind::UnregisterBroker(response), errors)
}
