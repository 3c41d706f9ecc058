//! ElectLeaders (key 43): preferred or unclean leader elections, decided by the active
//! controller (a broker forwards the client's request to it, as Kafka's brokers do).

use std::sync::Arc;

use gregor_publishers::acl::AclOperation;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, ResponseKind};

use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::logic::election::{ListedElections, RequestedPartitions};
use crate::controller::{failed_elect_leaders, ElectLeaders, ElectListedLeaders};

/// The response's top-level error code at `version`: the field exists from v1, and Kafka's
/// `ElectLeadersResponse` leaves it out below (v0 carries each error in the partitions' results).
pub(super) fn top_level_error(version: i16, code: i16) -> i16 {
    if version >= 1 {
        code
    } else {
        0
    }
}

pub(super) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ElectLeadersRequest,
) -> ApiResponse {
    let request = std::sync::Arc::new(request);
    let mut response = ctx
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
    response.error_code = top_level_error(info.api_version, response.error_code);
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

/// ElectLeaders for a request whose partitions stay in its frame (`partitions`, `count` of
/// them): the answer's body lists no topics, and the returned outcomes give each named
/// partition's, in request order, for the caller to write as it sends the answer. Decided as
/// [`handle`] decides a decoded request: ALTER on the cluster first (a refusal carries no
/// message, as Kafka's error response), then the controller.
pub async fn elect_listed_leaders(
    ctx: &HandlerContext,
    info: &RequestInfo,
    partitions: Arc<dyn RequestedPartitions>,
    count: usize,
    election_type: i8,
) -> (ApiResponse, ListedElections) {
    let answers = if !Access::new(ctx, info).allows_cluster(AclOperation::Alter) {
        ListedElections::refused(ResponseError::ClusterAuthorizationFailed.code(), None)
    } else {
        ctx.ask_controller(
            info.controller_failure.as_ref(),
            ElectListedLeaders {
                partitions,
                election_type,
                version: info.api_version,
            },
        )
        .await
        .unwrap_or_else(|_| {
            ListedElections::refused(
                ResponseError::NotController.code(),
                Some("The controller is not available; retry against another node".to_owned()),
            )
        })
    };
    let mut errors = ErrorCounts::default();
    let top = top_level_error(
        info.api_version,
        answers.refused.as_ref().map_or(0, |(code, _)| *code),
    );
    errors.add(top);
    match &answers.refused {
        Some((code, _)) => errors.add_times(*code, count as u64),
        None => {
            for outcome in &answers.outcomes {
                errors.add(outcome.code());
            }
        }
    }
    let response = ElectLeadersResponse::default().with_error_code(top);
    let answer = ApiResponse::new(ResponseKind::ElectLeaders(response), errors);
    (answer, answers)
}
