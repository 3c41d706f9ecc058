//! ElectLeaders (key 43): preferred or unclean leader elections, decided by the active
//! controller (a broker forwards the client's request to it, as Kafka's brokers do).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ElectLeadersRequest, ResponseKind};

use super::{ApiResponse, ErrorCounts};
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::{failed_elect_leaders, ElectLeaders};

pub(super) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ElectLeadersRequest,
) -> ApiResponse {
    let request = std::sync::Arc::new(request);
    let response = ctx
        .ask_controller(
            info.controller_failure.as_ref(),
            ElectLeaders {
                request: std::sync::Arc::clone(&request),
                version: info.api_version,
            },
        )
        .await
        .unwrap_or_else(|_| {
            failed_elect_leaders(
                &request,
                ResponseError::NotController,
                "The controller is not available; retry against another node",
            )
        });
    let mut errors = ErrorCounts::default();
    errors.add(response.error_code);
    errors.add_all(
        response
            .replica_election_results
            .iter()
            .flat_map(|t| &t.partition_result)
            .map(|p| p.error_code),
    );
    ApiResponse::new(ResponseKind::ElectLeaders(response), errors)
}
