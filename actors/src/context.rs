//! What a request handler may use: the published image, the controller, and who is asking.

use std::sync::Arc;

use actix::Addr;
use arc_swap::ArcSwap;
use gregor_publishers::MetadataImage;

use crate::controller::Controller;

/// Static facts about this node that handlers report.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    /// `node.id`.
    pub node_id: i32,
    /// The cluster id from `meta.properties`.
    pub cluster_id: String,
    /// Whether the node serves clients (`process.roles` contains `broker`).
    pub is_broker: bool,
    /// Whether the node holds the metadata log (`process.roles` contains `controller`).
    pub is_controller: bool,
}

/// Broker settings the handlers apply.
#[derive(Clone, Debug)]
pub struct BrokerSettings {
    /// `auto.create.topics.enable`.
    pub auto_create_topics_enable: bool,
    /// `num.partitions`, for auto-created topics.
    pub num_partitions: i32,
    /// `default.replication.factor`, for auto-created topics.
    pub default_replication_factor: i16,
}

/// Everything handlers share; cheap to clone (one per connection).
#[derive(Clone)]
pub struct HandlerContext {
    /// The image the loader published last. Handlers load it once per request.
    pub image: Arc<ArcSwap<MetadataImage>>,
    /// The controller actor, which owns every metadata mutation.
    pub controller: Addr<Controller>,
    /// This node.
    pub node: Arc<NodeInfo>,
    /// Broker settings.
    pub settings: Arc<BrokerSettings>,
    /// The metadata quorum (DescribeQuorum, voter changes); `None` in tests without a log.
    pub quorum: Option<Arc<crate::quorum::QuorumState>>,
    /// Hands a controller request to the active controller when this node is not it (Metadata's
    /// auto-creation on a broker); `None` in tests and single-node set-ups without peers.
    pub forwarder: Option<Arc<dyn ControllerForwarder>>,
    /// Static configs and live log levels for the config APIs.
    pub configs: crate::handlers::configs::ConfigSupport,
    /// The client-quota managers (produce, fetch, request, controller mutation).
    pub quotas: crate::quota::QuotaManagers,
    /// The partition logs of this node; `None` on a controller-only node.
    pub logs: Option<Arc<crate::log_manager::LogManager>>,
    /// The block of producer ids this broker issues from (InitProducerId).
    pub producer_ids: Arc<crate::handlers::init_producer_id::ProducerIdManager>,
    /// Fetch sessions (KIP-227).
    pub fetch_sessions: Arc<crate::fetch_session::FetchSessionCache>,
    /// The group coordinator; `None` on a controller-only node.
    pub groups: Option<crate::groups::Groups>,
    /// The ACL authorizer (`authorizer.class.name`); `None`: every request is allowed and the
    /// ACL APIs answer SECURITY_DISABLED.
    pub authorizer: Option<Arc<crate::authorizer::Authorizer>>,
    /// Set on the context a long Metadata request's chunks are decided with, once the
    /// request's one auto-creation was sent: the handler answers the topics it would create
    /// as being created without asking the controller again.
    pub topic_creation_sent: bool,
}

/// Sends a request this node would give its own controller actor to the active controller
/// instead (implemented by the node over the controller listener).
///
/// A request made for a client (`caller`) goes inside an Envelope, so the controller
/// authorizes it and charges its quotas as that client; the broker's own requests (`None`,
/// and AlterPartition, BrokerHeartbeat, AllocateProducerIds) go as the broker's.
pub trait ControllerForwarder: Send + Sync {
    /// CreateTopics at `version`; `None` when no active controller could be asked.
    fn create_topics(
        &self,
        request: kafka_protocol::messages::CreateTopicsRequest,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<'static, Option<kafka_protocol::messages::CreateTopicsResponse>>;

    /// DeleteTopics at `version` (the topics a broker let through when it refused others).
    fn delete_topics(
        &self,
        request: kafka_protocol::messages::DeleteTopicsRequest,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<'static, Option<kafka_protocol::messages::DeleteTopicsResponse>>;

    /// CreatePartitions at `version` (the topics a broker let through when it refused others).
    fn create_partitions(
        &self,
        request: kafka_protocol::messages::CreatePartitionsRequest,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<
        'static,
        Option<kafka_protocol::messages::CreatePartitionsResponse>,
    >;

    /// IncrementalAlterConfigs at `version` (the resources the broker does not handle itself).
    fn incremental_alter_configs(
        &self,
        request: kafka_protocol::messages::IncrementalAlterConfigsRequest,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<
        'static,
        Option<kafka_protocol::messages::IncrementalAlterConfigsResponse>,
    >;

    /// AllocateProducerIds (v0), for the producer-id block of a broker that is not the active
    /// controller.
    fn allocate_producer_ids(
        &self,
        request: kafka_protocol::messages::AllocateProducerIdsRequest,
    ) -> futures::future::BoxFuture<
        'static,
        Option<kafka_protocol::messages::AllocateProducerIdsResponse>,
    >;

    /// AlterPartition at `version`: a leader's ISR change for the active controller.
    fn alter_partition(
        &self,
        request: kafka_protocol::messages::AlterPartitionRequest,
        version: i16,
    ) -> futures::future::BoxFuture<'static, Option<kafka_protocol::messages::AlterPartitionResponse>>;

    /// BrokerHeartbeat at `version` (a controlled shutdown) for the active controller.
    fn broker_heartbeat(
        &self,
        request: kafka_protocol::messages::BrokerHeartbeatRequest,
        version: i16,
    ) -> futures::future::BoxFuture<
        'static,
        Option<kafka_protocol::messages::BrokerHeartbeatResponse>,
    >;

    /// AlterConfigs at `version`.
    fn alter_configs(
        &self,
        request: kafka_protocol::messages::AlterConfigsRequest,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<'static, Option<kafka_protocol::messages::AlterConfigsResponse>>;
}

/// Which kind of listener a request arrived on; decides which APIs it may call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenerKind {
    /// A client listener (e.g. `PLAINTEXT`).
    Broker,
    /// A listener named in `controller.listener.names`.
    Controller,
}

/// The authenticated identity of a connection, Kafka's `KafkaPrincipal`.
///
/// Until authentication exists every connection is `User:ANONYMOUS`; the value travels with the
/// connection so that quotas and, later, authentication can use it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal {
    /// Principal type, `User` for every built-in principal.
    pub principal_type: String,
    /// Principal name.
    pub name: String,
}

impl Principal {
    /// `User:ANONYMOUS`, the principal of an unauthenticated connection.
    pub fn anonymous() -> Self {
        Principal {
            principal_type: "User".to_owned(),
            name: "ANONYMOUS".to_owned(),
        }
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// Who sent one request, and how.
#[derive(Clone, Debug)]
pub struct RequestInfo {
    /// The request's API version.
    pub api_version: i16,
    /// The header's client id ("" when null).
    pub client_id: String,
    /// Name of the listener the request arrived on.
    pub listener_name: String,
    /// Kind of that listener.
    pub listener_kind: ListenerKind,
    /// The connection's principal.
    pub principal: Principal,
    /// The client's address in Kafka's form (`/127.0.0.1`), "" when unknown. For a request
    /// that came inside an Envelope, the principal and address are the forwarding broker's
    /// client's.
    pub client_host: String,
    /// The connection's fetch-quota sensor, lent to this request (Fetch records there).
    pub fetch_quota: crate::quota::SharedSensorCache,
}

/// The client a broker forwards a request for: the controller handles it as this principal
/// from this address (Kafka's Envelope, KIP-590), with this client id in its header.
#[derive(Clone, Debug)]
pub struct Caller {
    /// The client's principal.
    pub principal: Principal,
    /// The client's address in Kafka's form (`/127.0.0.1`).
    pub client_host: String,
    /// The client's client id.
    pub client_id: String,
}

impl Caller {
    /// The client that sent `info`'s request.
    pub fn of(info: &RequestInfo) -> Self {
        Caller {
            principal: info.principal.clone(),
            client_host: info.client_host.clone(),
            client_id: info.client_id.clone(),
        }
    }
}
