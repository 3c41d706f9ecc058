//! AlterPartitionReassignments (45) and ListPartitionReassignments (46), decided by the active
//! controller (a broker forwards the client's request to it, as Kafka's brokers do).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, ListPartitionReassignmentsRequest, ResponseKind,
};

use super::{ApiResponse, ErrorCounts};
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::{
    failed_alter_partition_reassignments, failed_list_partition_reassignments,
    AlterPartitionReassignments, ListPartitionReassignments,
};

const UNAVAILABLE: &str = "The controller is not available; retry against another node";

pub(super) async fn alter(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: AlterPartitionReassignmentsRequest,
) -> ApiResponse {
    let request = std::sync::Arc::new(request);
    let response = ctx
        .ask_controller(
            info.controller_failure.as_ref(),
            AlterPartitionReassignments {
                request: std::sync::Arc::clone(&request),
                version: info.api_version,
            },
        )
        .await
        .unwrap_or_else(|_| {
            failed_alter_partition_reassignments(
                &request,
                ResponseError::NotController,
                UNAVAILABLE,
            )
        });
    let mut errors = ErrorCounts::default();
    errors.add(response.error_code);
    errors.add_all(
        response
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code),
    );
    ApiResponse::new(ResponseKind::AlterPartitionReassignments(response), errors)
}

pub(super) async fn list(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ListPartitionReassignmentsRequest,
) -> ApiResponse {
    let response = ctx
        .ask_controller(
            info.controller_failure.as_ref(),
            ListPartitionReassignments { request },
        )
        .await
        .unwrap_or_else(|_| {
            failed_list_partition_reassignments(ResponseError::NotController, UNAVAILABLE)
        });
    let mut errors = ErrorCounts::default();
    errors.add(response.error_code);
    ApiResponse::new(ResponseKind::ListPartitionReassignments(response), errors)
}
