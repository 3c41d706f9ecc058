//! The receiving side of the quorum RPCs (openraft's messages into the local raft; joins
//! handled by the leader) and the forwarding of client mutations to the active controller.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use actix::Addr;
use bytes::Bytes;
use gregor_actors::controller::logic::registration::{BrokerRegistrationRequest, NodeRegistration};
use gregor_actors::controller::{Controller, RegisterNode, UnfenceBroker};
use gregor_actors::quorum::{QuorumState, OBSERVER_EXPIRY};
use gregor_actors::raft::MetadataLogError;
use gregor_publishers::records::Endpoint;
use kafka_protocol::messages::ApiKey;
use openraft::ChangeMembers;
use tokio::sync::Mutex;

use crate::storage::uuid_to_kafka_string;

use super::rpc::{self, JoinRequest, JoinResponse, QuorumRequest, QuorumResponse};
use super::transport::{address_of, Channel};

/// Mutations a broker hands to the active controller whole (Kafka's forwarded APIs, §1.7), when
/// the routing table also serves them on the controller listener. The config APIs are split by
/// their handler instead: BROKER_LOGGER resources apply on the receiving broker, the rest go to
/// the controller through `ControllerForwarder`.
const FORWARDED: &[ApiKey] = &[
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::AlterClientQuotas,
    ApiKey::DescribeQuorum,
    ApiKey::AddRaftVoter,
    ApiKey::RemoveRaftVoter,
];

/// How long a forwarded request may wait for the controller (Kafka's default
/// `request.timeout.ms` is 30 s; clients time out themselves long before a stuck leader
/// is replaced).
const FORWARD_TIMEOUT: Duration = Duration::from_secs(30);

/// The node's quorum endpoint: serves quorum RPCs, handles joins while leading, forwards.
pub struct QuorumService {
    /// A weak handle on itself, so futures that outlive a borrow (auto-creation) can forward.
    this: std::sync::Weak<QuorumService>,
    pub(crate) state: Arc<QuorumState>,
    controller: Addr<Controller>,
    /// Connections to the active controller for forwarded requests, by address; each is used
    /// by one request at a time and returned afterwards.
    forward_pool: Mutex<BTreeMap<String, Vec<Channel>>>,
}

impl QuorumService {
    pub(crate) fn new(state: Arc<QuorumState>, controller: Addr<Controller>) -> Arc<Self> {
        Arc::new_cyclic(|this| QuorumService {
            this: this.clone(),
            state,
            controller,
            forward_pool: Mutex::new(BTreeMap::new()),
        })
    }

    /// An owned handle for futures that forward later.
    fn forwarding_handle(&self) -> ForwardingHandle {
        ForwardingHandle(self.this.clone())
    }

    /// Answers one quorum frame (the bytes after the size prefix); `None` closes the connection.
    pub(crate) async fn serve_frame(&self, frame: &[u8]) -> Option<Bytes> {
        let (correlation_id, request) = match rpc::decode_request(frame) {
            Ok(decoded) => decoded,
            Err(error) => {
                tracing::info!(%error, "closing a connection with a bad quorum frame");
                return None;
            }
        };
        let raft = self.state.log.raft();
        let response = match request {
            QuorumRequest::AppendEntries(rpc) => {
                QuorumResponse::AppendEntries(raft.append_entries(rpc).await)
            }
            QuorumRequest::Vote(rpc) => QuorumResponse::Vote(raft.vote(rpc).await),
            QuorumRequest::InstallSnapshot(rpc) => {
                QuorumResponse::InstallSnapshot(raft.install_snapshot(rpc).await)
            }
            QuorumRequest::Join(join) => QuorumResponse::Join(self.join(join).await),
        };
        match rpc::encode_response(correlation_id, &response) {
            Ok(bytes) => Some(bytes),
            Err(error) => {
                tracing::error!(%error, "cannot encode a quorum response");
                None
            }
        }
    }

    /// The leader id and its controller endpoints, from the local membership.
    pub(crate) fn leader(&self) -> Option<(u64, Vec<Endpoint>)> {
        let metrics = self.state.log.metrics();
        let leader = metrics.current_leader?;
        let node = metrics.membership_config.membership().get_node(&leader)?;
        Some((leader, node.endpoints.clone()))
    }

    /// Handles a join: only the leader accepts it.
    pub(crate) async fn join(&self, join: JoinRequest) -> JoinResponse {
        if join.cluster_id != self.state.cluster_id {
            return JoinResponse::Refused {
                message: format!(
                    "The given id \"{}\" doesn't match the cluster id \"{}\"; node {} was formatted for another cluster",
                    join.cluster_id, self.state.cluster_id, join.node_id
                ),
            };
        }
        if !self.state.is_leader() {
            return JoinResponse::NotLeader {
                leader: self.leader(),
            };
        }
        match self.admit(&join).await {
            Ok(None) => {}
            Ok(Some(reason)) => return JoinResponse::Waiting { reason },
            Err(MetadataLogError::NotLeader { .. }) => {
                return JoinResponse::NotLeader {
                    leader: self.leader(),
                }
            }
            Err(e) => {
                tracing::warn!(node_id = join.node_id, error = %e, "join failed");
                return JoinResponse::NotLeader { leader: None };
            }
        }
        match self.state.log.read_index().await {
            Ok(read_index) => JoinResponse::Joined { read_index },
            Err(MetadataLogError::NotLeader { .. }) => JoinResponse::NotLeader {
                leader: self.leader(),
            },
            Err(e) => {
                tracing::warn!(error = %e, "cannot confirm leadership for a join");
                JoinResponse::NotLeader { leader: None }
            }
        }
    }

    /// Makes the joining node a learner (unless it is a member already) and writes its
    /// registrations if this incarnation is not registered yet. `Some(reason)` when the node
    /// must wait: another live directory of its node id holds the learner slot.
    async fn admit(&self, join: &JoinRequest) -> Result<Option<String>, MetadataLogError> {
        let node_id = join.node_id as u64;
        let metrics = self.state.log.metrics();
        let membership = metrics.membership_config.membership();
        let is_voter = membership.voter_ids().any(|id| id == node_id);
        if !is_voter {
            self.state
                .observer_seen(join.node_id, join.raft_node.directory_id);
        }
        match membership.get_node(&node_id) {
            None => {
                self.state
                    .log
                    .change_membership(
                        ChangeMembers::AddNodes(BTreeMap::from([(
                            node_id,
                            join.raft_node.clone(),
                        )])),
                        true,
                    )
                    .await?;
            }
            Some(current) if !is_voter && current != &join.raft_node => {
                // A learner that restarted with other endpoints, or another disk of that node
                // id: take over the learner slot unless the other directory is still alive.
                let other_alive = current.directory_id != join.raft_node.directory_id
                    && self.state.observers_of(join.node_id).iter().any(|o| {
                        o.directory_id == current.directory_id
                            && o.last_seen.elapsed() < OBSERVER_EXPIRY / 3
                    });
                if other_alive {
                    let reason = format!(
                        "node id {} is already observed with directory id {}; this directory ({}) \
                         is not replicated to while that one is alive",
                        join.node_id,
                        uuid_to_kafka_string(current.directory_id),
                        uuid_to_kafka_string(join.raft_node.directory_id)
                    );
                    tracing::warn!(node_id = join.node_id, "{reason}");
                    return Ok(Some(reason));
                }
                self.state
                    .log
                    .change_membership(
                        ChangeMembers::SetNodes(BTreeMap::from([(
                            node_id,
                            join.raft_node.clone(),
                        )])),
                        true,
                    )
                    .await?;
            }
            Some(_) => {}
        }
        let registration = NodeRegistration {
            node_id: join.node_id,
            incarnation_id: join.incarnation_id,
            directory_id: join.raft_node.directory_id,
            controller_endpoints: join.controller_endpoints.clone(),
            broker: join.broker.as_ref().map(|b| BrokerRegistrationRequest {
                endpoints: b.endpoints.clone(),
                rack: b.rack.clone(),
                log_dirs: b.log_dirs.clone(),
            }),
        };
        let registered_broker = self
            .controller
            .send(RegisterNode(registration))
            .await
            .map_err(|e| MetadataLogError::Raft(e.to_string()))??;
        if registered_broker {
            // A new incarnation starts fenced; it is caught up once it has applied its read
            // index, which it waits for before serving (Gregor brokers hold no partition data
            // to catch up on), so it is unfenced at once. A broker fenced later is unfenced by
            // the liveness task once it has caught up again.
            self.controller
                .send(UnfenceBroker {
                    broker_id: join.node_id,
                    incarnation_id: Some(join.incarnation_id),
                })
                .await
                .map_err(|e| MetadataLogError::Raft(e.to_string()))??;
        }
        Ok(None)
    }

    /// Whether a request of `key` on a client listener goes to the active controller instead
    /// of being handled here.
    pub(crate) fn should_forward(&self, key: ApiKey) -> bool {
        FORWARDED.contains(&key)
            && gregor_actors::handlers::lookup(
                key,
                gregor_actors::context::ListenerKind::Controller,
            )
            .is_some()
            && !self.state.is_leader()
    }

    /// Sends a client's request frame (header and body, without the size prefix) to the active
    /// controller and returns its response frame (size prefix included). `None` when no
    /// controller could be asked; the caller then handles the request locally, which answers
    /// NOT_CONTROLLER so the client retries.
    pub(crate) async fn forward(&self, request: &[u8]) -> Option<Bytes> {
        let (_, endpoints) = self.leader()?;
        let addr = address_of(endpoints.first()?);
        let mut channel = {
            let mut pool = self.forward_pool.lock().await;
            pool.get_mut(&addr)
                .and_then(Vec::pop)
                .unwrap_or_else(|| Channel::forwarding(addr.clone()))
        };
        let mut frame = Vec::with_capacity(request.len() + 4);
        frame.extend_from_slice(&(request.len() as i32).to_be_bytes());
        frame.extend_from_slice(request);
        match channel
            .round_trip(Bytes::from(frame), FORWARD_TIMEOUT)
            .await
        {
            Ok(body) => {
                self.forward_pool
                    .lock()
                    .await
                    .entry(addr)
                    .or_default()
                    .push(channel);
                let mut out = Vec::with_capacity(body.len() + 4);
                out.extend_from_slice(&(body.len() as i32).to_be_bytes());
                out.extend_from_slice(&body);
                Some(Bytes::from(out))
            }
            Err(error) => {
                tracing::info!(%error, "cannot forward a request to the active controller");
                None
            }
        }
    }

    /// Node ids of the current voters.
    pub(crate) fn voter_ids(&self) -> BTreeSet<u64> {
        self.state
            .log
            .metrics()
            .membership_config
            .membership()
            .voter_ids()
            .collect()
    }
}

/// A handle that forwards while the service lives.
struct ForwardingHandle(std::sync::Weak<QuorumService>);

impl ForwardingHandle {
    async fn forward(&self, request: &[u8]) -> Option<Bytes> {
        self.0.upgrade()?.forward(request).await
    }
}

impl QuorumService {
    /// Encodes `request` as a client would send it, forwards it like one, and decodes the
    /// answer; `None` when it cannot be encoded or no active controller answered.
    fn forward_typed<Req: kafka_protocol::protocol::Request + Send + 'static>(
        &self,
        request: Req,
        version: i16,
    ) -> futures::future::BoxFuture<'static, Option<Req::Response>>
    where
        Req::Response: Send + 'static,
    {
        use kafka_protocol::messages::{RequestHeader, ResponseHeader};
        use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
        let header = RequestHeader::default()
            .with_request_api_key(Req::KEY)
            .with_request_api_version(version)
            .with_correlation_id(1)
            .with_client_id(Some(StrBytes::from_static_str("gregor-broker")));
        let mut frame = bytes::BytesMut::new();
        let encoded = header
            .encode(&mut frame, Req::header_version(version))
            .and_then(|()| request.encode(&mut frame, version));
        let forwarder = self.forwarding_handle();
        Box::pin(async move {
            if let Err(error) = encoded {
                tracing::error!(api_key = Req::KEY, %error, "cannot encode a request to forward");
                return None;
            }
            let answer = forwarder.forward(&frame).await?;
            // Skip the size prefix, then the response header.
            let mut body = answer.slice(4..);
            ResponseHeader::decode(&mut body, Req::Response::header_version(version)).ok()?;
            Req::Response::decode(&mut body, version).ok()
        })
    }
}

/// Requests a broker hands to the active controller from inside a handler (Metadata's
/// auto-creation, the controller part of the config APIs): encoded as a client would send them
/// and forwarded like one.
impl gregor_actors::context::ControllerForwarder for QuorumService {
    fn create_topics(
        &self,
        request: kafka_protocol::messages::CreateTopicsRequest,
        version: i16,
    ) -> futures::future::BoxFuture<'static, Option<kafka_protocol::messages::CreateTopicsResponse>>
    {
        self.forward_typed(request, version)
    }

    fn incremental_alter_configs(
        &self,
        request: kafka_protocol::messages::IncrementalAlterConfigsRequest,
        version: i16,
    ) -> futures::future::BoxFuture<
        'static,
        Option<kafka_protocol::messages::IncrementalAlterConfigsResponse>,
    > {
        self.forward_typed(request, version)
    }

    fn alter_configs(
        &self,
        request: kafka_protocol::messages::AlterConfigsRequest,
        version: i16,
    ) -> futures::future::BoxFuture<'static, Option<kafka_protocol::messages::AlterConfigsResponse>>
    {
        self.forward_typed(request, version)
    }

    fn allocate_producer_ids(
        &self,
        request: kafka_protocol::messages::AllocateProducerIdsRequest,
    ) -> futures::future::BoxFuture<
        'static,
        Option<kafka_protocol::messages::AllocateProducerIdsResponse>,
    > {
        self.forward_typed(request, 0)
    }
}
