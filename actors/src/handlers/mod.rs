//! Request handlers, one file per API family, and the one table that routes them.
//!
//! The table [`APIS`] is the single source of truth for what Gregor serves: the network front end
//! refuses anything not in it, and the ApiVersions answer is built from it, so the two cannot
//! drift. Each entry's version range is the `kafka-protocol` crate's range for that request, so
//! every version the crate can encode is served (old clients such as kafkajs keep working).
//!
//! Handlers never touch bytes: they get a decoded request and return a typed response.

mod acls;
mod alter_partition;
mod api_versions;
mod authorize;
mod broker_heartbeat;
mod client_quotas;
mod cluster;
pub mod configs;
mod data;
mod describe_topic_partitions;
mod elect_leaders;
mod errors;
pub mod fetch;
mod groups;
pub mod init_producer_id;
#[cfg(test)]
mod large_requests;
mod list_offsets;
mod log_admin;
mod metadata;
mod offset_for_leader_epoch;
mod produce;
pub mod quorum;
pub mod raft_voters;
mod reassignments;
mod replica_fetch;
mod sasl;
mod scram;
pub use acls::{create_listed as create_listed_acls, delete_listed as delete_listed_acls};
pub use client_quotas::alter_listed_client_quotas;
pub use elect_leaders::elect_listed_leaders;
pub use groups::{consumer_group_heartbeat_listed, join_group_listed};
pub use reassignments::alter_listed_reassignments;
pub use scram::alter_listed as alter_listed_scram_credentials;
pub mod throttle;
mod topics;
mod unregister_broker;
mod update_features;

use kafka_protocol::messages::{
    AlterConfigsRequest, ApiKey, ApiVersionsRequest, CreatePartitionsRequest, CreateTopicsRequest,
    DeleteTopicsRequest, DescribeClusterRequest, DescribeConfigsRequest,
    DescribeTopicPartitionsRequest, FetchRequest, IncrementalAlterConfigsRequest,
    InitProducerIdRequest, ListConfigResourcesRequest, ListOffsetsRequest, MetadataRequest,
    ProduceRequest, RequestKind, ResponseKind,
};
use kafka_protocol::protocol::{Message, VersionRange};

pub use api_versions::unsupported_version_response;
pub use authorize::fully_authorized;
pub use errors::{error_name, ErrorCounts};
pub use metadata::{
    auto_create, encode_all_topics, encoded_size_bound, response_brokers, topics_to_create,
    BrokerTable,
};
pub use topics::{
    create_listed_partitions, create_listed_topics, creation_denied, delete_listed_topics,
    deletion_denied, growth_denied, CreatePartitionsAccess, CreateTopicsAccess, DeleteTopicsAccess,
};

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

impl ApiSpec {
    /// Whether the API is served on listeners of `kind`.
    pub fn served_on(&self, kind: ListenerKind) -> bool {
        match kind {
            ListenerKind::Broker => self.on_broker_listener,
            ListenerKind::Controller => self.on_controller_listener,
        }
    }
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
    api(
        ApiKey::DeleteRecords,
        "DeleteRecords",
        kafka_protocol::messages::DeleteRecordsRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::DescribeLogDirs,
        "DescribeLogDirs",
        kafka_protocol::messages::DescribeLogDirsRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::DescribeProducers,
        "DescribeProducers",
        kafka_protocol::messages::DescribeProducersRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::OffsetForLeaderEpoch,
        "OffsetForLeaderEpoch",
        kafka_protocol::messages::OffsetForLeaderEpochRequest::VERSIONS,
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
        ApiKey::OffsetCommit,
        "OffsetCommit",
        kafka_protocol::messages::OffsetCommitRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::OffsetFetch,
        "OffsetFetch",
        kafka_protocol::messages::OffsetFetchRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::FindCoordinator,
        "FindCoordinator",
        kafka_protocol::messages::FindCoordinatorRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::JoinGroup,
        "JoinGroup",
        kafka_protocol::messages::JoinGroupRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::Heartbeat,
        "Heartbeat",
        kafka_protocol::messages::HeartbeatRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::LeaveGroup,
        "LeaveGroup",
        kafka_protocol::messages::LeaveGroupRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::SyncGroup,
        "SyncGroup",
        kafka_protocol::messages::SyncGroupRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::DescribeGroups,
        "DescribeGroups",
        kafka_protocol::messages::DescribeGroupsRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::ListGroups,
        "ListGroups",
        kafka_protocol::messages::ListGroupsRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::DeleteGroups,
        "DeleteGroups",
        kafka_protocol::messages::DeleteGroupsRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::OffsetDelete,
        "OffsetDelete",
        kafka_protocol::messages::OffsetDeleteRequest::VERSIONS,
        true,
        false,
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
    // Only `want_shut_down` acts: a broker's controlled shutdown.
    api(
        ApiKey::BrokerHeartbeat,
        "BrokerHeartbeat",
        kafka_protocol::messages::BrokerHeartbeatRequest::VERSIONS,
        false,
        true,
    ),
    // Partition leaders send their ISR changes to the active controller.
    api(
        ApiKey::AlterPartition,
        "AlterPartition",
        kafka_protocol::messages::AlterPartitionRequest::VERSIONS,
        false,
        true,
    ),
    // Forwarded by brokers to the active controller.
    api(
        ApiKey::UpdateFeatures,
        "UpdateFeatures",
        kafka_protocol::messages::UpdateFeaturesRequest::VERSIONS,
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
    api(
        ApiKey::ConsumerGroupHeartbeat,
        "ConsumerGroupHeartbeat",
        kafka_protocol::messages::ConsumerGroupHeartbeatRequest::VERSIONS,
        true,
        false,
    ),
    api(
        ApiKey::ConsumerGroupDescribe,
        "ConsumerGroupDescribe",
        kafka_protocol::messages::ConsumerGroupDescribeRequest::VERSIONS,
        true,
        false,
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
        ApiKey::DescribeAcls,
        "DescribeAcls",
        kafka_protocol::messages::DescribeAclsRequest::VERSIONS,
        true,
        true,
    ),
    api(
        ApiKey::CreateAcls,
        "CreateAcls",
        kafka_protocol::messages::CreateAclsRequest::VERSIONS,
        true,
        true,
    ),
    api(
        ApiKey::DeleteAcls,
        "DeleteAcls",
        kafka_protocol::messages::DeleteAclsRequest::VERSIONS,
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
    // Forwarded by brokers to the active controller.
    api(
        ApiKey::ElectLeaders,
        "ElectLeaders",
        kafka_protocol::messages::ElectLeadersRequest::VERSIONS,
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
    // Forwarded by brokers to the active controller.
    api(
        ApiKey::AlterPartitionReassignments,
        "AlterPartitionReassignments",
        kafka_protocol::messages::AlterPartitionReassignmentsRequest::VERSIONS,
        true,
        true,
    ),
    api(
        ApiKey::ListPartitionReassignments,
        "ListPartitionReassignments",
        kafka_protocol::messages::ListPartitionReassignmentsRequest::VERSIONS,
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
    // Brokers wrap their clients' requests in it for the active controller (KIP-590); the
    // front end opens it (`network/connection.rs`), so it never reaches `handle`.
    api(
        ApiKey::Envelope,
        "Envelope",
        kafka_protocol::messages::EnvelopeRequest::VERSIONS,
        false,
        true,
    ),
    api(
        ApiKey::DescribeTopicPartitions,
        "DescribeTopicPartitions",
        DescribeTopicPartitionsRequest::VERSIONS,
        true,
        false,
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
    APIS.iter()
        .find(|spec| spec.key == key && spec.served_on(kind))
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
    /// The body's list, already encoded, when the handler wrote it straight to bytes (an
    /// all-topics Metadata answer's topics, ApiVersions' api keys); the body then holds an
    /// empty list in its place.
    pub encoded_list: Option<EncodedList>,
    /// The budget a Fetch answer's records hold until the answer is written.
    pub read_memory: crate::log_manager::ReadMemoryHold,
    /// A second request-metric name for this request (Fetch is also counted as
    /// `FetchConsumer` or `FetchFollower`, as Kafka's `RequestChannel` counts it).
    pub metric_alias: Option<&'static str>,
    /// How long the handler waited for others (Kafka's remote time): a Fetch for records, an
    /// acks=all Produce for its followers.
    pub remote_time: std::time::Duration,
}

/// A response's list encoded at the request's version, without its length prefix.
#[derive(Clone, Debug)]
pub struct EncodedList {
    /// How many elements it holds.
    pub count: usize,
    /// The elements' bytes.
    pub bytes: bytes::Bytes,
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
    /// A response carrying the throttle time `throttle_time_ms`.
    fn throttled(throttle_time_ms: i32, body: ResponseKind, errors: ErrorCounts) -> Self {
        ApiResponse {
            throttle_time_ms,
            ..ApiResponse::new(body, errors)
        }
    }

    fn new(body: ResponseKind, errors: ErrorCounts) -> Self {
        ApiResponse {
            body,
            errors,
            throttle_time_ms: 0,
            delivery: Delivery::Send,
            encoded_list: None,
            read_memory: crate::log_manager::ReadMemoryHold::default(),
            metric_alias: None,
            remote_time: std::time::Duration::ZERO,
        }
    }
}

/// Whether a request reads what the publishers that run after a write's answer keep (the
/// partition logs, leaderships, the group coordinator), so it first waits for them to take in
/// the image ([`HandlerContext::publishers_caught_up`]). Fetch waits in its read pass, JoinGroup
/// and ConsumerGroupHeartbeat in their `_listed` forms, which the front end also calls.
fn reads_published_state(request: &RequestKind) -> bool {
    matches!(
        request,
        RequestKind::Produce(_)
            | RequestKind::ListOffsets(_)
            | RequestKind::OffsetForLeaderEpoch(_)
            | RequestKind::DeleteRecords(_)
            | RequestKind::DescribeLogDirs(_)
            | RequestKind::DescribeProducers(_)
            | RequestKind::SyncGroup(_)
            | RequestKind::Heartbeat(_)
            | RequestKind::LeaveGroup(_)
            | RequestKind::OffsetCommit(_)
            | RequestKind::OffsetFetch(_)
            | RequestKind::ListGroups(_)
            | RequestKind::DescribeGroups(_)
            | RequestKind::DeleteGroups(_)
            | RequestKind::OffsetDelete(_)
            | RequestKind::ConsumerGroupDescribe(_)
    )
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
    if let Some(denied) = authorize::cluster_denial(ctx, info, &request) {
        return Some(denied);
    }
    if reads_published_state(&request) {
        ctx.publishers_caught_up().await;
    }
    Some(match request {
        RequestKind::ApiVersions(request) => api_versions::handle(ctx, info, &request),
        RequestKind::SaslHandshake(_) => sasl::handshake(),
        RequestKind::SaslAuthenticate(_) => sasl::authenticate(),
        RequestKind::Produce(request) => produce::handle(ctx, info, request).await,
        RequestKind::Fetch(request) => fetch::handle(ctx, info, request).await,
        RequestKind::ListOffsets(request) => list_offsets::handle(ctx, info, request).await,
        RequestKind::OffsetForLeaderEpoch(request) => {
            offset_for_leader_epoch::handle(ctx, info, request).await
        }
        RequestKind::InitProducerId(request) => init_producer_id::handle(ctx, info, request).await,
        RequestKind::DeleteRecords(request) => log_admin::delete_records(ctx, info, request).await,
        RequestKind::DescribeLogDirs(request) => {
            log_admin::describe_log_dirs(ctx, info, request).await
        }
        RequestKind::DescribeProducers(request) => {
            log_admin::describe_producers(ctx, info, request).await
        }
        RequestKind::AllocateProducerIds(request) => init_producer_id::allocate(ctx, request).await,
        RequestKind::Metadata(request) => metadata::handle(ctx, info, request).await,
        RequestKind::FindCoordinator(request) => groups::find_coordinator(ctx, info, request).await,
        RequestKind::JoinGroup(request) => groups::join_group(ctx, info, request).await,
        RequestKind::SyncGroup(request) => groups::sync_group(ctx, info, request).await,
        RequestKind::Heartbeat(request) => groups::heartbeat(ctx, info, request).await,
        RequestKind::LeaveGroup(request) => groups::leave_group(ctx, info, request).await,
        RequestKind::OffsetCommit(request) => groups::offset_commit(ctx, info, request).await,
        RequestKind::OffsetFetch(request) => groups::offset_fetch(ctx, info, request).await,
        RequestKind::ListGroups(request) => groups::list_groups(ctx, info, request).await,
        RequestKind::DescribeGroups(request) => groups::describe_groups(ctx, info, request).await,
        RequestKind::DeleteGroups(request) => groups::delete_groups(ctx, info, request).await,
        RequestKind::OffsetDelete(request) => groups::offset_delete(ctx, info, request).await,
        RequestKind::ConsumerGroupHeartbeat(request) => {
            groups::consumer_group_heartbeat(ctx, info, request).await
        }
        RequestKind::ConsumerGroupDescribe(request) => {
            groups::consumer_group_describe(ctx, info, request).await
        }
        RequestKind::DescribeCluster(request) => cluster::handle(ctx, info, &request),
        RequestKind::DescribeTopicPartitions(request) => {
            describe_topic_partitions::handle(ctx, info, &request)
        }
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
        RequestKind::BrokerHeartbeat(request) => broker_heartbeat::handle(ctx, info, request).await,
        RequestKind::AlterPartition(request) => alter_partition::handle(ctx, info, request).await,
        RequestKind::DescribeUserScramCredentials(request) => scram::describe(ctx, info, &request),
        RequestKind::AlterUserScramCredentials(request) => scram::alter(ctx, info, request).await,
        RequestKind::DescribeAcls(request) => acls::describe(ctx, info, &request),
        RequestKind::CreateAcls(request) => acls::create(ctx, info, request).await,
        RequestKind::DeleteAcls(request) => acls::delete(ctx, info, request).await,
        RequestKind::ElectLeaders(request) => elect_leaders::handle(ctx, info, request).await,
        RequestKind::AlterPartitionReassignments(request) => {
            reassignments::alter(ctx, info, request).await
        }
        RequestKind::ListPartitionReassignments(request) => {
            reassignments::list(ctx, info, request).await
        }
        RequestKind::UnregisterBroker(request) => {
            unregister_broker::handle(ctx, info, request).await
        }
        RequestKind::UpdateFeatures(request) => update_features::handle(ctx, info, request).await,
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
            // The crate's ApiKey table lists v10 (topic ids, newer than Kafka 4.1); the request
            // structs it decodes with stop at v9.
            if spec.key == ApiKey::OffsetCommit {
                assert_eq!((spec.versions.min, spec.versions.max), (2, 9));
                continue;
            }
            if spec.key == ApiKey::OffsetFetch {
                assert_eq!((spec.versions.min, spec.versions.max), (1, 9));
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
        assert_eq!(range(ApiKey::OffsetForLeaderEpoch), Some((2, 4)));
        assert_eq!(range(ApiKey::InitProducerId), Some((0, 5)));
        assert_eq!(range(ApiKey::DeleteRecords), Some((0, 2)));
        assert_eq!(range(ApiKey::DescribeLogDirs), Some((1, 4)));
        assert_eq!(range(ApiKey::DescribeProducers), Some((0, 0)));
        assert!(lookup(ApiKey::Produce, ListenerKind::Controller).is_none());
        assert_eq!(range(ApiKey::FindCoordinator), Some((0, 6)));
        assert_eq!(range(ApiKey::JoinGroup), Some((0, 9)));
        assert_eq!(range(ApiKey::SyncGroup), Some((0, 5)));
        assert_eq!(range(ApiKey::Heartbeat), Some((0, 4)));
        assert_eq!(range(ApiKey::LeaveGroup), Some((0, 5)));
        assert_eq!(range(ApiKey::DescribeGroups), Some((0, 6)));
        assert_eq!(range(ApiKey::ListGroups), Some((0, 5)));
        assert_eq!(range(ApiKey::DeleteGroups), Some((0, 2)));
        assert_eq!(range(ApiKey::OffsetDelete), Some((0, 0)));
        assert_eq!(range(ApiKey::DescribeAcls), Some((1, 3)));
        assert_eq!(range(ApiKey::CreateAcls), Some((1, 3)));
        assert_eq!(range(ApiKey::DeleteAcls), Some((1, 3)));
        assert_eq!(range(ApiKey::UpdateFeatures), Some((0, 2)));
        assert!(lookup(ApiKey::JoinGroup, ListenerKind::Controller).is_none());
        assert!(lookup(ApiKey::AlterPartition, ListenerKind::Broker).is_none());
        assert_eq!(
            lookup(ApiKey::AlterPartition, ListenerKind::Controller)
                .map(|s| (s.versions.min, s.versions.max)),
            Some((2, 3))
        );
    }
}
