//! Request handlers, one file per API family, and the one table that routes them.
//!
//! The table [`APIS`] is the single source of truth for what Gregor serves: the network front end
//! refuses anything not in it, and the ApiVersions answer is built from it, so the two cannot
//! drift. Each entry's version range is the `kafka-protocol` crate's range for that request, so
//! every version the crate can encode is served (old clients such as kafkajs keep working).
//!
//! Handlers never touch bytes: they get a decoded request and return a typed response.

mod api_versions;
mod cluster;
mod errors;
mod metadata;
mod topics;

use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest,
    DescribeClusterRequest, MetadataRequest, RequestKind, ResponseKind,
};
use kafka_protocol::protocol::{Message, VersionRange};

pub use api_versions::unsupported_version_response;
pub use errors::{error_name, ErrorCounts};

use crate::context::{HandlerContext, ListenerKind, RequestInfo};

/// One API Gregor serves.
#[derive(Clone, Copy, Debug)]
pub struct ApiSpec {
    /// The API key.
    pub key: ApiKey,
    /// Kafka's name of the API, used in request metrics.
    pub name: &'static str,
    /// Versions served.
    pub versions: VersionRange,
    /// Served on client (broker) listeners.
    pub on_broker_listener: bool,
    /// Served on controller listeners.
    pub on_controller_listener: bool,
}

const fn api(
    key: ApiKey,
    name: &'static str,
    versions: VersionRange,
    on_broker_listener: bool,
    on_controller_listener: bool,
) -> ApiSpec {
    ApiSpec {
        key,
        name,
        versions,
        on_broker_listener,
        on_controller_listener,
    }
}

/// Every API Gregor serves, in api-key order.
pub const APIS: &[ApiSpec] = &[
    api(
        ApiKey::Metadata,
        "Metadata",
        MetadataRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::ApiVersions,
        "ApiVersions",
        ApiVersionsRequest::VERSIONS,
        true,
        true,
    ),
    api(
        ApiKey::CreateTopics,
        "CreateTopics",
        CreateTopicsRequest::VERSIONS,
        true,
        true,
    ),
    api(
        ApiKey::DeleteTopics,
        "DeleteTopics",
        DeleteTopicsRequest::VERSIONS,
        true,
        true,
    ),
    api(
        ApiKey::CreatePartitions,
        "CreatePartitions",
        CreatePartitionsRequest::VERSIONS,
        true,
        true,
    ),
    api(
        ApiKey::DescribeCluster,
        "DescribeCluster",
        DescribeClusterRequest::VERSIONS,
        true,
        true,
    ),
];

/// The entry for `key` if it is served on listeners of `kind`.
pub fn lookup(key: ApiKey, kind: ListenerKind) -> Option<&'static ApiSpec> {
    APIS.iter().find(|spec| {
        spec.key == key
            && match kind {
                ListenerKind::Broker => spec.on_broker_listener,
                ListenerKind::Controller => spec.on_controller_listener,
            }
    })
}

/// A handler's answer: the response and what the request metrics need from it.
#[derive(Debug)]
pub struct ApiResponse {
    /// The response body.
    pub body: ResponseKind,
    /// Error codes in the response, for `kafka_network_requestmetrics_errors_total`.
    pub errors: ErrorCounts,
    /// The response's `throttle_time_ms`.
    pub throttle_time_ms: i32,
}

impl ApiResponse {
    fn new(body: ResponseKind, errors: ErrorCounts) -> Self {
        ApiResponse {
            body,
            errors,
            throttle_time_ms: 0,
        }
    }
}

/// Handles one decoded request. The caller has checked that the API and version are served on
/// the request's listener (see [`lookup`]); a request of an API without a route is a bug in the
/// table, logged, and answered with `None` so the front end closes the connection as Kafka
/// closes it for an API it does not serve.
pub async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: RequestKind,
) -> Option<ApiResponse> {
    Some(match request {
        RequestKind::ApiVersions(request) => api_versions::handle(ctx, info, &request),
        RequestKind::Metadata(request) => metadata::handle(ctx, info, request).await,
        RequestKind::DescribeCluster(request) => cluster::handle(ctx, info, &request),
        RequestKind::CreateTopics(request) => topics::create_topics(ctx, info, request).await,
        RequestKind::DeleteTopics(request) => topics::delete_topics(ctx, info, request).await,
        RequestKind::CreatePartitions(request) => {
            topics::create_partitions(ctx, info, request).await
        }
        other => {
            tracing::error!(request = ?other, "request reached the handlers without a route");
            return None;
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_ranges_are_the_crates_ranges() {
        for spec in APIS {
            let crate_range = spec.key.valid_versions();
            assert_eq!(
                (spec.versions.min, spec.versions.max),
                (crate_range.min, crate_range.max),
                "{}",
                spec.name
            );
        }
    }

    #[test]
    fn issue_versions_are_served() {
        let range =
            |key| lookup(key, ListenerKind::Broker).map(|s| (s.versions.min, s.versions.max));
        assert_eq!(range(ApiKey::ApiVersions), Some((0, 4)));
        assert_eq!(range(ApiKey::Metadata), Some((0, 13)));
        assert_eq!(range(ApiKey::DescribeCluster), Some((0, 2)));
        assert_eq!(range(ApiKey::CreateTopics), Some((2, 7)));
        assert_eq!(range(ApiKey::DeleteTopics), Some((1, 6)));
        assert_eq!(range(ApiKey::CreatePartitions), Some((0, 3)));
        assert!(lookup(ApiKey::Metadata, ListenerKind::Controller).is_none());
        assert!(lookup(ApiKey::Produce, ListenerKind::Broker).is_none());
    }
}
