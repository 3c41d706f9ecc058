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
    /// `transaction.max.timeout.ms`: InitProducerId refuses a longer transaction timeout.
    pub transaction_max_timeout_ms: i32,
}

/// Everything handlers share; cheap to clone (one per connection).
#[derive(Clone)]
pub struct HandlerContext {
    /// The image the loader published last. Handlers load it once per request.
    pub image: Arc<ArcSwap<MetadataImage>>,
    /// The offset of the last image every publisher has taken in, which the logs, leaderships
    /// and group coordinator follow a little behind `image` (see [`Self::publishers_caught_up`]).
    pub published: crate::loader::PublishedOffset,
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
    /// CreateTopics at `version`; [`Forwarded::Unreachable`] when no active controller
    /// could be asked.
    fn create_topics(
        &self,
        request: kafka_protocol::messages::CreateTopicsRequest,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::CreateTopicsResponse>,
    >;

    /// DeleteTopics at `version` (the topics a broker let through when it refused others).
    fn delete_topics(
        &self,
        request: kafka_protocol::messages::DeleteTopicsRequest,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::DeleteTopicsResponse>,
    >;

    /// CreatePartitions at `version` (the topics a broker let through when it refused others).
    fn create_partitions(
        &self,
        request: kafka_protocol::messages::CreatePartitionsRequest,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::CreatePartitionsResponse>,
    >;

    /// IncrementalAlterConfigs at `version` (the resources the broker does not handle itself).
    fn incremental_alter_configs(
        &self,
        request: kafka_protocol::messages::IncrementalAlterConfigsRequest,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::IncrementalAlterConfigsResponse>,
    >;

    /// AllocateProducerIds (v0), for the producer-id block of a broker that is not the active
    /// controller.
    fn allocate_producer_ids(
        &self,
        request: kafka_protocol::messages::AllocateProducerIdsRequest,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::AllocateProducerIdsResponse>,
    >;

    /// AlterPartition at `version`: a leader's ISR change for the active controller.
    fn alter_partition(
        &self,
        request: kafka_protocol::messages::AlterPartitionRequest,
        version: i16,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::AlterPartitionResponse>,
    >;

    /// BrokerHeartbeat at `version` (a controlled shutdown) for the active controller.
    fn broker_heartbeat(
        &self,
        request: kafka_protocol::messages::BrokerHeartbeatRequest,
        version: i16,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::BrokerHeartbeatResponse>,
    >;

    /// Whether an active controller is known now. A client's forwarded request waits for one
    /// (up to the forwarding timeout); Metadata's auto-creation must not hold its answer.
    fn knows_active_controller(&self) -> bool;

    /// AlterConfigs at `version`.
    fn alter_configs(
        &self,
        request: kafka_protocol::messages::AlterConfigsRequest,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::AlterConfigsResponse>,
    >;
}

/// What a request forwarded to the active controller brought back.
#[derive(Debug)]
pub enum Forwarded<T> {
    /// The controller's answer.
    Answered(T),
    /// No active controller could be asked: this node answers the request itself (its own
    /// controller actor, which answers NOT_CONTROLLER when it does not lead, so the client
    /// looks for the controller again).
    Unreachable,
    /// The controller refused the envelope or did not answer in time: every part of the
    /// request fails with this (Kafka's `ForwardingManager`).
    Failed(ControllerFailure),
}

impl<T> Forwarded<T> {
    /// The answer, else the failure every part of the request gets (`None`: this node's
    /// controller actor decides). `earlier` is how the controller failed this request's
    /// forward as it came ([`RequestInfo::controller_failure`]), which an unreachable
    /// controller now does not undo.
    fn or_failure(
        self,
        earlier: Option<&ControllerFailure>,
    ) -> Result<T, Option<ControllerFailure>> {
        match self {
            Forwarded::Answered(answer) => Ok(answer),
            Forwarded::Failed(failure) => Err(Some(failure)),
            Forwarded::Unreachable => Err(earlier.cloned()),
        }
    }

    /// The answer, if the controller gave one.
    pub fn answered(self) -> Option<T> {
        match self {
            Forwarded::Answered(answer) => Some(answer),
            Forwarded::Unreachable | Forwarded::Failed(_) => None,
        }
    }
}

/// Why a forwarded request failed at the active controller, as the client is told: Kafka's
/// broker answers UNKNOWN_SERVER_ERROR for an envelope the controller refused and
/// REQUEST_TIMED_OUT for one it did not answer.
#[derive(Clone, Debug)]
pub struct ControllerFailure {
    /// The error every part of the request gets.
    pub error: kafka_protocol::error::ResponseError,
    /// What the operator should look at.
    pub message: String,
}

/// How long a request waits for the publishers to take in the image it sees before it reads
/// what state there is (a snapshot of 10^6 partitions takes the log publisher seconds; the
/// request then finds the partition not yet served, a retriable answer).
const PUBLISHERS_CATCH_UP_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

impl HandlerContext {
    /// Waits until every publisher has taken in the image handlers see now. The log manager,
    /// the replication roles and the group coordinator follow the image through publishers
    /// that run after a metadata write is answered; a request reading their state (a produce
    /// to a topic just created, a join to a group whose coordinator just moved here) waits for
    /// them here instead of finding them one image behind. Free when they are caught up.
    pub async fn publishers_caught_up(&self) {
        let offset = self.image.load().provenance.last_log_index;
        if !self
            .published
            .wait_for(offset, PUBLISHERS_CATCH_UP_LIMIT)
            .await
        {
            tracing::debug!(
                offset,
                published = self.published.offset(),
                "the publishers are still taking in the image; answering from their state"
            );
        }
    }

    /// Whether a controller request this node cannot decide is answered NOT_CONTROLLER here:
    /// another node leads, and this request's forward to it did not fail (a failure is
    /// answered instead, by [`HandlerContext::ask_controller`]).
    pub(crate) fn answers_not_controller(&self, info: &RequestInfo) -> bool {
        info.controller_failure.is_none() && self.quorum.as_ref().is_some_and(|q| !q.is_leader())
    }

    /// The answer a typed forward of this request brought, else this node's controller
    /// actor's for `msg` (refused with the forward's failure, or the failure of this request's
    /// forward as it came, if there was one).
    pub(crate) async fn answer_or_ask<M>(
        &self,
        info: &RequestInfo,
        forwarded: Forwarded<M::Result>,
        msg: M,
    ) -> Result<M::Result, actix::MailboxError>
    where
        M: crate::controller::Refusable,
        M::Result: Send,
        Controller: actix::Handler<M>,
    {
        match forwarded.or_failure(info.controller_failure.as_ref()) {
            Ok(answer) => Ok(answer),
            Err(failure) => self.ask_controller(failure.as_ref(), msg).await,
        }
    }

    /// Asks this node's controller actor `msg`, unless `failure` says the active controller
    /// (elsewhere) already failed the request: then `msg` is refused with that failure, as the
    /// controller answers a request it refuses whole.
    pub(crate) async fn ask_controller<M>(
        &self,
        failure: Option<&ControllerFailure>,
        msg: M,
    ) -> Result<M::Result, actix::MailboxError>
    where
        M: crate::controller::Refusable,
        M::Result: Send,
        Controller: actix::Handler<M>,
    {
        match failure {
            Some(failure) => Ok(msg.refuse(failure.error, &failure.message)),
            None => self.controller.send(msg).await,
        }
    }
}

/// Which kind of listener a request arrived on; decides which APIs it may call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenerKind {
    /// A client listener (e.g. `PLAINTEXT`).
    Broker,
    /// A listener named in `controller.listener.names`.
    Controller,
}

/// The authenticated identity of a connection, Kafka's `KafkaPrincipal`: `User:ANONYMOUS` on a
/// PLAINTEXT or SSL listener without a client certificate, else the SASL user or the mapped
/// certificate subject; quotas, quota callbacks and the authorizer see it.
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
    /// The header's client id ("" when null). Shared, like the connection's fields below: a
    /// connection's requests carry the same ones, and a copy per request was an allocation.
    pub client_id: Arc<str>,
    /// Name of the listener the request arrived on.
    pub listener_name: Arc<str>,
    /// Kind of that listener.
    pub listener_kind: ListenerKind,
    /// The connection's principal.
    pub principal: Arc<Principal>,
    /// The client's address in Kafka's form (`/127.0.0.1`), "" when unknown. For a request
    /// that came inside an Envelope, the principal and address are the forwarding broker's
    /// client's.
    pub client_host: Arc<str>,
    /// The connection's fetch-quota sensor, lent to this request (Fetch records there).
    pub fetch_quota: crate::quota::SharedSensorCache,
    /// Set when this broker forwarded the request and the active controller failed it: the
    /// handler answers every part with this instead of deciding anything.
    pub controller_failure: Option<ControllerFailure>,
    /// Raised by a Produce (acks 1 or -1) once all its appends are queued on their shards: the
    /// connection may then start serving its next Produce, whose appends queue behind them.
    pub appends_queued: Option<Arc<AppendsQueued>>,
}

/// A flag a Produce raises once every append it makes is queued (see
/// [`RequestInfo::appends_queued`]); raised once, it stays raised.
#[derive(Debug, Default)]
pub struct AppendsQueued {
    raised: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl AppendsQueued {
    pub fn raise(&self) {
        self.raised
            .store(true, std::sync::atomic::Ordering::Release);
        self.notify.notify_one();
    }

    pub fn is_raised(&self) -> bool {
        self.raised.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Returns once the flag is raised (at once if it already is).
    pub async fn raised(&self) {
        // A raise between the check and the wait leaves the notification's permit behind.
        while !self.is_raised() {
            self.notify.notified().await;
        }
    }
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
            principal: (*info.principal).clone(),
            client_host: info.client_host.to_string(),
            client_id: info.client_id.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::error::ResponseError;

    fn timed_out() -> ControllerFailure {
        ControllerFailure {
            error: ResponseError::RequestTimedOut,
            message: "late".into(),
        }
    }

    #[test]
    fn a_typed_forward_keeps_the_failure_of_the_raw_one() {
        let refused = ControllerFailure {
            error: ResponseError::UnknownServerError,
            message: "refused".into(),
        };
        assert_eq!(
            Forwarded::Answered(7).or_failure(Some(&refused)).ok(),
            Some(7)
        );
        let failure = |forwarded: Forwarded<()>, earlier| {
            forwarded
                .or_failure(earlier)
                .err()
                .flatten()
                .map(|f| f.error)
        };
        assert_eq!(
            failure(Forwarded::Failed(timed_out()), Some(&refused)),
            Some(ResponseError::RequestTimedOut)
        );
        assert_eq!(
            failure(Forwarded::Unreachable, Some(&refused)),
            Some(ResponseError::UnknownServerError)
        );
        assert_eq!(failure(Forwarded::Unreachable, None), None);
    }
}
