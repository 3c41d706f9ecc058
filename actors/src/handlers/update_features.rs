//! UpdateFeatures (key 57): changes finalized feature levels (`metadata.version`,
//! `kraft.version`), decided by the active controller. Served on controller listeners; a broker
//! forwards it, as Kafka's brokers do. ALTER on the cluster is checked before (see
//! `authorize::cluster_denial`).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ResponseKind, UpdateFeaturesRequest};

use super::{ApiResponse, ErrorCounts};
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::logic::features::refused_update_features;
use crate::controller::UpdateFeatures;

pub(super) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: UpdateFeaturesRequest,
) -> ApiResponse {
    let response = if ctx.answers_not_controller(info) {
        // Only the active controller decides (a broker forwards; this is what is left when no
        // active controller could be reached).
        refused_update_features(
            ResponseError::NotController,
            "This node is not the active controller.",
        )
    } else {
        ctx.ask_controller(
            info.controller_failure.as_ref(),
            UpdateFeatures {
                request,
                version: info.api_version,
            },
        )
        .await
        .unwrap_or_else(|error| {
            tracing::error!(%error, "controller actor unavailable");
            refused_update_features(
                ResponseError::NotController,
                "The controller is not available; retry against another node",
            )
        })
    };
    let mut errors = ErrorCounts::default();
    errors.add(response.error_code);
    errors.add_all(response.results.iter().map(|r| r.error_code));
    ApiResponse::new(ResponseKind::UpdateFeatures(response), errors)
}
