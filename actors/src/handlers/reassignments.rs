//! AlterPartitionReassignments (45) and ListPartitionReassignments (46), decided by the active
//! controller (a broker forwards the client's request to it, as Kafka's brokers do).

use std::sync::Arc;

use gregor_publishers::acl::AclOperation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest, ResponseKind,
};

use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::logic::reassignment::{ListedReassignments, RequestedReassignments};
use crate::controller::{
    failed_alter_partition_reassignments, failed_list_partition_reassignments,
    AlterListedReassignments, AlterPartitionReassignments, ListPartitionReassignments,
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

/// AlterPartitionReassignments for a request whose partitions stay in its frame (`partitions`,
/// `count` of them): the answer's body lists no topics, and the returned outcomes give each
/// named partition's, in request order, for the caller to write as it sends the answer.
/// Decided as [`alter`] decides a decoded request: ALTER on the cluster first, then the
/// controller.
pub async fn alter_listed_reassignments(
    ctx: &HandlerContext,
    info: &RequestInfo,
    partitions: Arc<dyn RequestedReassignments>,
    count: usize,
    allow_replication_factor_change: bool,
) -> (ApiResponse, ListedReassignments) {
    let answers = if !Access::new(ctx, info).allows_cluster(AclOperation::Alter) {
        ListedReassignments::refused(
            ResponseError::ClusterAuthorizationFailed.code(),
            "Cluster authorization failed.",
        )
    } else {
        ctx.ask_controller(
            info.controller_failure.as_ref(),
            AlterListedReassignments {
                partitions,
                allow_replication_factor_change,
                version: info.api_version,
            },
        )
        .await
        .unwrap_or_else(|_| {
            ListedReassignments::refused(ResponseError::NotController.code(), UNAVAILABLE)
        })
    };
    let mut errors = ErrorCounts::default();
    let response = match &answers.refused {
        Some((code, message)) => {
            errors.add(*code);
            errors.add_times(*code, count as u64);
            AlterPartitionReassignmentsResponse::default()
                .with_error_code(*code)
                .with_error_message(Some(kafka_protocol::protocol::StrBytes::from_string(
                    message.clone(),
                )))
        }
        None => {
            errors.add(0);
            for outcome in answers.outcomes.iter() {
                errors.add(outcome.code());
            }
            // Kafka sets the message null (the schema's default is the empty string).
            AlterPartitionReassignmentsResponse::default()
                .with_error_message(None)
                .with_allow_replication_factor_change(answers.allow_replication_factor_change)
        }
    };
    let answer = ApiResponse::new(ResponseKind::AlterPartitionReassignments(response), errors);
    (answer, answers)
}
