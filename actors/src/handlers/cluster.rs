//! DescribeCluster (key 60): the brokers (or, on a controller listener, the controllers).

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

use super::metadata::{client_facing_controller_id, cluster_operations};
use super::{ApiResponse, ErrorCounts};
use crate::context::{HandlerContext, ListenerKind, RequestInfo};

/// `endpoint_type` values (KIP-919).
const ENDPOINT_TYPE_BROKERS: i8 = 1;
const ENDPOINT_TYPE_CONTROLLERS: i8 = 2;

/// An endpoint-type refusal's code: v0's error table predates KIP-919, so Kafka's `AuthHelper`
/// answers it INVALID_REQUEST.
fn endpoint_type_error(api_version: i16, error: ResponseError) -> i16 {
    if api_version == 0 {
        ResponseError::InvalidRequest.code()
    } else {
        error.code()
    }
}

fn endpoint_type_name(endpoint_type: i8) -> &'static str {
    if endpoint_type == ENDPOINT_TYPE_CONTROLLERS {
        "CONTROLLER"
    } else {
        "BROKER"
    }
}

pub(super) fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: &DescribeClusterRequest,
) -> ApiResponse {
    let image = ctx.image.load();
    let served = match info.listener_kind {
        ListenerKind::Broker => ENDPOINT_TYPE_BROKERS,
        ListenerKind::Controller => ENDPOINT_TYPE_CONTROLLERS,
    };
    // v0 has no endpoint_type and always means brokers.
    let wanted = if info.api_version == 0 {
        ENDPOINT_TYPE_BROKERS
    } else {
        request.endpoint_type
    };
    let mut errors = ErrorCounts::default();
    if wanted != ENDPOINT_TYPE_BROKERS && wanted != ENDPOINT_TYPE_CONTROLLERS {
        let code = endpoint_type_error(info.api_version, ResponseError::UnsupportedEndpointType);
        errors.add(code);
        return ApiResponse::new(
            ResponseKind::DescribeCluster(
                DescribeClusterResponse::default()
                    .with_error_code(code)
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "Unsupported endpoint type {wanted}"
                    )))),
            ),
            errors,
        );
    }
    if wanted != served {
        let code = endpoint_type_error(info.api_version, ResponseError::MismatchedEndpointType);
        errors.add(code);
        return ApiResponse::new(
            ResponseKind::DescribeCluster(
                DescribeClusterResponse::default()
                    .with_error_code(code)
                    .with_error_message(Some(StrBytes::from_string(format!(
                        "The request was sent to an endpoint of type {}, but we wanted an endpoint of type {}",
                        endpoint_type_name(served),
                        endpoint_type_name(wanted)
                    )))),
            ),
            errors,
        );
    }
    let (brokers, controller_id) = if served == ENDPOINT_TYPE_BROKERS {
        let include_fenced = info.api_version >= 2 && request.include_fenced_brokers;
        let brokers = image
            .cluster
            .brokers()
            .filter(|broker| include_fenced || !broker.fenced)
            .filter_map(|broker| {
                let endpoint = broker.endpoint(&info.listener_name)?;
                Some(
                    DescribeClusterBroker::default()
                        .with_broker_id(BrokerId(broker.id))
                        .with_host(StrBytes::from_string(endpoint.host.clone()))
                        .with_port(i32::from(endpoint.port))
                        .with_rack(broker.rack.clone().map(StrBytes::from_string))
                        .with_is_fenced(broker.fenced),
                )
            })
            .collect();
        (
            brokers,
            client_facing_controller_id(&image, ctx.node.node_id),
        )
    } else {
        let controllers = image
            .cluster
            .controllers()
            .filter_map(|controller| {
                let endpoint = controller
                    .endpoints
                    .iter()
                    .find(|e| *e.name == *info.listener_name)?;
                Some(
                    DescribeClusterBroker::default()
                        .with_broker_id(BrokerId(controller.id))
                        .with_host(StrBytes::from_string(endpoint.host.clone()))
                        .with_port(i32::from(endpoint.port))
                        .with_rack(None),
                )
            })
            .collect();
        // The active controller (KIP-919): the quorum leader this node knows, else this node.
        let leader = ctx
            .quorum
            .as_ref()
            .and_then(|q| q.log.metrics().current_leader)
            .map_or(ctx.node.node_id, |id| id as i32);
        (controllers, leader)
    };
    let mut response = DescribeClusterResponse::default()
        .with_endpoint_type(served)
        .with_cluster_id(StrBytes::from_string(ctx.node.cluster_id.clone()))
        .with_controller_id(BrokerId(controller_id))
        .with_brokers(brokers);
    if request.include_cluster_authorized_operations {
        response = response.with_cluster_authorized_operations(cluster_operations(
            &crate::authorizer::Access::new(ctx, info),
        ));
    }
    errors.add(0);
    ApiResponse::new(ResponseKind::DescribeCluster(response), errors)
}
