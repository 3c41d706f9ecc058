//! Request handlers, one file per API family, and the one table that routes them.
//!
//! The table [`APIS`] is the single source of truth for what Gregor serves: the network front end
//! refuses anything not in it, and the ApiVersions answer is built from it, so the two cannot
//! drift. Each entry's version range is the `kafka-protocol` crate's range for that request, so
//! every version the crate can encode is served (old clients such as kafkajs keep working).
//!
//! Handlers never touch bytes: they get a decoded request and return a typed response.

mod api_versions;
mod client_quotas;
mod cluster;
pub mod configs;
mod data;
mod errors;
mod fetch;
pub mod init_producer_id;
#[cfg(test)]
mod large_requests;
mod list_offsets;
mod metadata;
mod produce;
pub mod quorum;
mod raft_voters;
mod sasl;
mod scram;
pub mod throttle;
mod topics;
mod unregister_broker;

use kafka_protocol::messages::{
    AlterConfigsRequest, ApiKey, ApiVersionsRequest, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest, FetchRequest,
    IncrementalAlterConfigsRequest, InitProducerIdRequest, ListConfigResourcesRequest,
    ListOffsetsRequest, MetadataRequest, ProduceRequest, RequestKind, ResponseKind,
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
    /// A second request-metric name for some versions (ListConfigResources v0 also counts as
    /// `ListClientMetricsResources`, KIP-1142); errors count under `name` only.
    pub also_counted_as: Option<fn(i16) -> Option<&'static str>>,
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
        also_counted_as: None,
    }
}

/// Every API Gregor serves, in api-key order.
pub const APIS: &[ApiSpec] = &[
    // Advertised from v0 although v0-v2 are refused (the crate cannot decode them, so the
    // connection closes, as Kafka 4 does): librdkafka enables compression only when the
    // advertised range reaches v0 (KAFKA-18659, librdkafka #4956).
    api(
        ApiKey::Produce,
        "Produce",
        VersionRange {
            min: 0,
            max: ProduceRequest::VERSIONS.max,
        },
        true,
        false,
    ),
    api(ApiKey::Fetch, "Fetch", FetchRequest::VERSIONS, true, false),
    api(
        ApiKey::ListOffsets,
        "ListOffsets",
        ListOffsetsRequest::VERSIONS,
        true,
        false,
    ),
    // Brokers ask the active controller for producer-id blocks (KIP-730).
    api(
        ApiKey::AllocateProducerIds,
        "AllocateProducerIds",
        kafka_protocol::messages::AllocateProducerIdsRequest::VERSIONS,
        false,
        true,
    ),
    api(
        ApiKey::InitProducerId,
        "InitProducerId",
        InitProducerIdRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::Metadata,
        "Metadata",
        MetadataRequest::VERSIONS,
        true,
        false,
    ),
    // Served on every listener, as Kafka advertises them; SASL listeners run the exchange in the
    // front end, and what reaches the handlers is answered ILLEGAL_SASL_STATE.
    api(
        ApiKey::SaslHandshake,
        "SaslHandshake",
        kafka_protocol::messages::SaslHandshakeRequest::VERSIONS,
        true,
        true,
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
    api(
        ApiKey::DescribeQuorum,
        "DescribeQuorum",
        kafka_protocol::messages::DescribeQuorumRequest::VERSIONS,
        true,
        true,
    ),
    api(
        ApiKey::UnregisterBroker,
        "UnregisterBroker",
        kafka_protocol::messages::UnregisterBrokerRequest::VERSIONS,
        true,
        true,
    ),
    // v1-v2 / v1 are encoded by node/src/network/raft_voter_versions.rs (the crate has v0).
    api(
        ApiKey::AddRaftVoter,
        "AddRaftVoter",
        VersionRange { min: 0, max: 2 },
        true,
        true,
    ),
    api(
        ApiKey::RemoveRaftVoter,
        "RemoveRaftVoter",
        VersionRange { min: 0, max: 1 },
        true,
        true,
    ),
    api(
        ApiKey::DescribeConfigs,
        "DescribeConfigs",
        DescribeConfigsRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::AlterConfigs,
        "AlterConfigs",
        AlterConfigsRequest::VERSIONS,
        true,
        true,
    ),
    api(
        ApiKey::SaslAuthenticate,
        "SaslAuthenticate",
        kafka_protocol::messages::SaslAuthenticateRequest::VERSIONS,
        true,
        true,
    ),
    api(
        ApiKey::IncrementalAlterConfigs,
        "IncrementalAlterConfigs",
        IncrementalAlterConfigsRequest::VERSIONS,
        true,
        true,
    ),
    api(
        ApiKey::DescribeUserScramCredentials,
        "DescribeUserScramCredentials",
        kafka_protocol::messages::DescribeUserScramCredentialsRequest::VERSIONS,
        true,
        true,
    ),
    api(
        ApiKey::AlterUserScramCredentials,
        "AlterUserScramCredentials",
        kafka_protocol::messages::AlterUserScramCredentialsRequest::VERSIONS,
        true,
        true,
    ),
    api(
        ApiKey::DescribeClientQuotas,
        "DescribeClientQuotas",
        kafka_protocol::messages::DescribeClientQuotasRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::AlterClientQuotas,
        "AlterClientQuotas",
        kafka_protocol::messages::AlterClientQuotasRequest::VERSIONS,
        true,
        true,
    ),
    ApiSpec {
        also_counted_as: Some(configs::metric_name_also_counted),
        ..api(
            ApiKey::ListConfigResources,
            "ListConfigResources",
            ListConfigResourcesRequest::VERSIONS,
            true,
            false,
        )
    },
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

/// The second request-metric name of a request of API `name` at `version`, if it has one
/// (see [`ApiSpec::also_counted_as`]).
pub fn also_counted_as(name: &str, version: i16) -> Option<&'static str> {
    APIS.iter()
        .find(|spec| spec.name == name)
        .and_then(|spec| spec.also_counted_as)
        .and_then(|extra| extra(version))
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
    /// Whether the response is sent (Produce with acks=0 sends none).
    pub delivery: Delivery,
}

/// What the front end does with a handler's response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Write it.
    Send,
    /// Write nothing (Produce acks=0 without errors).
    Silent,
    /// Write nothing and close the connection (Produce acks=0 with a partition error, so the
    /// client refreshes its metadata).
    Close,
}

impl ApiResponse {
    fn new(body: ResponseKind, errors: ErrorCounts) -> Self {
        ApiResponse {
            body,
            errors,
            throttle_time_ms: 0,
            delivery: Delivery::Send,
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
        RequestKind::SaslHandshake(_) => sasl::handshake(),
        RequestKind::SaslAuthenticate(_) => sasl::authenticate(),
        RequestKind::Produce(request) => produce::handle(ctx, info, request).await,
        RequestKind::Fetch(request) => fetch::handle(ctx, info, request).await,
        RequestKind::ListOffsets(request) => list_offsets::handle(ctx, info, request).await,
        RequestKind::InitProducerId(request) => init_producer_id::handle(ctx, info, request).await,
        RequestKind::AllocateProducerIds(request) => init_producer_id::allocate(ctx, request).await,
        RequestKind::Metadata(request) => metadata::handle(ctx, info, request).await,
        RequestKind::DescribeCluster(request) => cluster::handle(ctx, info, &request),
        RequestKind::CreateTopics(request) => topics::create_topics(ctx, info, request).await,
        RequestKind::DeleteTopics(request) => topics::delete_topics(ctx, info, request).await,
        RequestKind::CreatePartitions(request) => {
            topics::create_partitions(ctx, info, request).await
        }
        RequestKind::DescribeQuorum(request) => quorum::handle(ctx, info, &request),
        RequestKind::AddRaftVoter(request) => raft_voters::add(ctx, info, request).await,
        RequestKind::RemoveRaftVoter(request) => raft_voters::remove(ctx, info, request).await,
        RequestKind::DescribeConfigs(request) => configs::describe(ctx, info, &request),
        RequestKind::AlterConfigs(request) => configs::alter(ctx, info, request).await,
        RequestKind::IncrementalAlterConfigs(request) => {
            configs::incremental_alter(ctx, info, request).await
        }
        RequestKind::ListConfigResources(request) => configs::list(ctx, info, &request),
        RequestKind::DescribeClientQuotas(request) => {
            client_quotas::describe_client_quotas(ctx, info, &request)
        }
        RequestKind::AlterClientQuotas(request) => {
            client_quotas::alter_client_quotas(ctx, info, request).await
        }
        RequestKind::DescribeUserScramCredentials(request) => scram::describe(ctx, &request),
        RequestKind::AlterUserScramCredentials(request) => scram::alter(ctx, request).await,
        RequestKind::UnregisterBroker(request) => {
            unregister_broker::handle(ctx, info, request).await
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
            // Gregor encodes the versions the crate lacks for these two (KAFKA-18775).
            if matches!(spec.key, ApiKey::AddRaftVoter | ApiKey::RemoveRaftVoter) {
                continue;
            }
            // The crate's ApiKey table lists v6 (KIP-939), newer than Kafka 4.1 and than
            // the request struct it decodes with (v0-v5).
            if spec.key == ApiKey::InitProducerId {
                assert_eq!((spec.versions.min, spec.versions.max), (0, 5));
                continue;
            }
            // Advertised from v0 for librdkafka, served from the crate's minimum (3).
            if spec.key == ApiKey::Produce {
                assert_eq!((spec.versions.min, spec.versions.max), (0, 13));
                assert_eq!(spec.key.valid_versions().min, 3);
                continue;
            }
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
        assert_eq!(range(ApiKey::DescribeConfigs), Some((1, 4)));
        assert_eq!(range(ApiKey::AlterConfigs), Some((0, 2)));
        assert_eq!(range(ApiKey::IncrementalAlterConfigs), Some((0, 1)));
        assert_eq!(range(ApiKey::ListConfigResources), Some((0, 1)));
        let list =
            lookup(ApiKey::ListConfigResources, ListenerKind::Broker).map(|s| s.also_counted_as);
        assert_eq!(
            list.flatten().map(|f| (f(0), f(1))),
            Some((Some("ListClientMetricsResources"), None))
        );
        assert_eq!(
            also_counted_as("ListConfigResources", 0),
            Some("ListClientMetricsResources")
        );
        assert_eq!(also_counted_as("ListConfigResources", 1), None);
        assert_eq!(also_counted_as("Metadata", 0), None);
        assert!(lookup(ApiKey::Metadata, ListenerKind::Controller).is_none());
        assert_eq!(range(ApiKey::Produce), Some((0, 13)));
        assert_eq!(range(ApiKey::Fetch), Some((4, 18)));
        assert_eq!(range(ApiKey::ListOffsets), Some((1, 10)));
        assert_eq!(range(ApiKey::InitProducerId), Some((0, 5)));
        assert!(lookup(ApiKey::Produce, ListenerKind::Controller).is_none());
    }
}
