//! The receiving side of the quorum RPCs (openraft's messages into the local raft; joins
//! handled by the leader) and the forwarding of client mutations to the active controller.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use actix::Addr;
use arc_swap::ArcSwap;
use bytes::Bytes;
use gregor_actors::controller::logic::registration::{BrokerRegistrationRequest, NodeRegistration};
use gregor_actors::controller::{Controller, RegisterNode, UnfenceBroker};
use gregor_actors::quorum::{QuorumState, OBSERVER_EXPIRY};
use gregor_actors::raft::MetadataLogError;
use gregor_publishers::records::Endpoint;
use gregor_publishers::MetadataImage;
use kafka_protocol::messages::ApiKey;
use openraft::ChangeMembers;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex;
use uuid::Uuid;

use crate::storage::uuid_to_kafka_string;

use super::rpc::{
    self, HelloResponse, JoinRequest, JoinResponse, PeerHello, QuorumRequest, QuorumResponse,
};
use super::transport::{
    address_of, read_peer_frame, Answer, CallError, Channel, LinkCall, PeerLimits, RaftLinks,
    MAX_RESPONSE_BYTES,
};
use crate::network::envelope;
use crate::network::forwarded::{ForwardedAnswer, StreamedAnswer, WHOLE_ANSWER_LIMIT};
use crate::network::peer::PeerConnector;
use gregor_actors::context::{Caller, ControllerFailure, Forwarded};
use kafka_protocol::error::ResponseError;

/// Mutations a broker hands to the active controller whole (Kafka's forwarded APIs, §1.7), when
/// the routing table also serves them on the controller listener. The config APIs are split by
/// their handler instead: BROKER_LOGGER resources apply on the receiving broker, the rest go to
/// the controller through `ControllerForwarder`.
const FORWARDED: &[ApiKey] = &[
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::AlterClientQuotas,
    ApiKey::AlterUserScramCredentials,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    ApiKey::UnregisterBroker,
    ApiKey::UpdateFeatures,
    ApiKey::ElectLeaders,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::DescribeQuorum,
    ApiKey::AddRaftVoter,
    ApiKey::RemoveRaftVoter,
];

/// Whether a broker may forward a request of `key` inside an Envelope: the APIs it hands to
/// the active controller whole, and the config APIs it hands over in part.
pub(crate) fn is_forwardable(key: ApiKey) -> bool {
    FORWARDED.contains(&key)
        || matches!(key, ApiKey::AlterConfigs | ApiKey::IncrementalAlterConfigs)
}

/// How long a forwarded request may wait for the controller: a KRaft broker's forwarding
/// channel gives up after 60 s (its `retryTimeoutMs`), then answers REQUEST_TIMED_OUT.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a forwarded request still waits for the controller it was sent to once another one
/// leads: long enough for a busy former leader to answer what it was deciding, far shorter than
/// waiting [`FORWARD_TIMEOUT`] for one that froze.
const MOVED_LEADER_GRACE: Duration = Duration::from_secs(10);

/// The wait before sending a forwarded request again that never reached the controller,
/// doubled after each try up to [`RESEND_BACKOFF_MAX`] (Kafka's `reconnect.backoff.ms` and
/// `reconnect.backoff.max.ms`), so a controller that is down is not asked in a tight loop.
const RESEND_BACKOFF: Duration = Duration::from_millis(50);
const RESEND_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Why a request forwarded to the active controller brought no answer back.
#[derive(Debug)]
pub(crate) enum ForwardError {
    /// No active controller could be asked (none known, its connection failed after the
    /// request was written, or it no longer leads): the broker answers the request itself,
    /// NOT_CONTROLLER, so the client looks for the controller again. One that could not be
    /// reached until the forwarding timeout is [`ForwardError::Failed`] with REQUEST_TIMED_OUT.
    Unreachable,
    /// The controller refused the envelope, or did not answer in time: every part of the
    /// request fails with this, as Kafka's `ForwardingManager` answers.
    Failed(ControllerFailure),
    /// The controller could not parse the client's request (UNSUPPORTED_VERSION on the
    /// envelope): Kafka's broker closes the client's connection.
    Unsupported(String),
}

impl ForwardError {
    fn failed(error: ResponseError, message: String) -> Self {
        ForwardError::Failed(ControllerFailure { error, message })
    }

    /// Kafka's reading of an envelope that brought no answer: NOT_CONTROLLER re-routes,
    /// UNSUPPORTED_VERSION closes the client's connection, and anything else (the broker's
    /// principal lacks CLUSTER_ACTION, a principal the controller cannot read) is
    /// UNKNOWN_SERVER_ERROR for the client, since only the operator can mend it.
    fn of_envelope(failure: envelope::EnvelopeFailure) -> Self {
        use envelope::EnvelopeFailure;
        let not_controller = ResponseError::NotController.code();
        let unsupported = ResponseError::UnsupportedVersion.code();
        match failure {
            EnvelopeFailure::Refused(code) if code == not_controller => ForwardError::Unreachable,
            EnvelopeFailure::Refused(code) if code == unsupported => ForwardError::Unsupported(
                "The active controller cannot parse this request (UNSUPPORTED_VERSION)".into(),
            ),
            EnvelopeFailure::Refused(code) => {
                let name = gregor_actors::handlers::error_name(code);
                tracing::warn!(
                    code,
                    name,
                    "the active controller refused a forwarded request's envelope"
                );
                let hint = match code == ResponseError::ClusterAuthorizationFailed.code() {
                    true => ": the broker's principal needs CLUSTER_ACTION on the cluster at the controller",
                    false => "",
                };
                ForwardError::failed(
                    ResponseError::UnknownServerError,
                    format!("The active controller refused the request this broker forwarded ({name}){hint}"),
                )
            }
            EnvelopeFailure::Malformed(detail) => {
                tracing::warn!(%detail, "the active controller's answer to a forwarded request is not an envelope");
                ForwardError::failed(
                    ResponseError::UnknownServerError,
                    format!("The active controller's answer could not be read: {detail}"),
                )
            }
        }
    }

    /// What a handler that forwarded a typed request makes of this (it cannot close the
    /// client's connection, so an unparsable request fails like a refused one).
    pub(crate) fn into_forwarded<T>(self) -> Forwarded<T> {
        match self {
            ForwardError::Unreachable => Forwarded::Unreachable,
            ForwardError::Failed(failure) => Forwarded::Failed(failure),
            ForwardError::Unsupported(message) => Forwarded::Failed(ControllerFailure {
                error: ResponseError::UnknownServerError,
                message,
            }),
        }
    }
}

/// How long a forwarded request waits for this node's raft link to reopen to a new leader.
const LINK_REOPEN_WAIT: Duration = Duration::from_secs(5);
/// How many raft-link requests may queue for one learner (openraft sends one at a time).
const LINK_QUEUE: usize = 4;
/// How long a learner may take to answer one request on its raft link (a snapshot chunk
/// included) before the link is dropped.
const LINK_ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// What a connection has proved about its peer, for the private RPCs on it.
#[derive(Default)]
pub(crate) struct PeerSession {
    /// Set by an accepted hello: the peer's node id, and whether this node knows it.
    peer: Option<(i32, Uuid, bool)>,
}

impl PeerSession {
    /// Whether a node this node knows opened the connection with its hello: a broker's
    /// connection to the active controller (its envelopes, its own requests).
    pub(crate) fn is_known_peer(&self) -> bool {
        self.peer.is_some_and(|(_, _, known)| known)
    }
}

/// What to do after a private frame.
pub(crate) enum PrivateOutcome {
    /// Write this answer and keep reading.
    Reply(Bytes),
    /// Write this answer, then hand the connection to [`QuorumService::serve_raft_link`].
    RaftLink(Bytes, i32),
    /// Write this refusal, then close the connection.
    Refuse(Bytes),
    /// Close the connection without an answer (the reason, for the log).
    Close(String),
}

/// The node's quorum endpoint: serves quorum RPCs, handles joins while leading, forwards.
pub struct QuorumService {
    /// A weak handle on itself, so futures that outlive a borrow (auto-creation) can forward.
    this: std::sync::Weak<QuorumService>,
    pub(crate) state: Arc<QuorumState>,
    controller: Addr<Controller>,
    /// The published image: who is registered, for admitting peers and refusing joins that
    /// claim a live broker's id (reads only; registrations are decided by the controller).
    image: Arc<ArcSwap<MetadataImage>>,
    /// Connections to the active controller for forwarded requests, by address; each is used
    /// by one request at a time and returned afterwards.
    forward_pool: Mutex<BTreeMap<String, Vec<Channel>>>,
    /// What each peer accepts in one raft request, learned from joins.
    peer_limits: Arc<PeerLimits>,
    /// This node's hello, opening every connection it makes for private RPCs.
    pub(crate) hello: PeerHello,
    /// How connections to controller listeners are secured (TLS, SASL).
    pub(crate) connector: Arc<PeerConnector>,
    /// Raft links learners without a controller listener opened to this node.
    links: Arc<RaftLinks>,
    /// The leader that admitted this node (id, directory id): before its log holds a
    /// membership, a joining node accepts raft traffic from this identity only.
    admitted_by: std::sync::Mutex<Option<(u64, Uuid)>>,
    /// The controller address whose join answer admitted this node last; a broker without a
    /// controller listener keeps its raft link there.
    pub(crate) leader_address: tokio::sync::watch::Sender<Option<String>>,
    /// Set when this node keeps a raft link (it has no controller listener).
    pub(crate) raft_link: std::sync::atomic::AtomicBool,
    /// Whether that raft link is open right now (to the controller at `leader_address`).
    pub(crate) link_open: tokio::sync::watch::Sender<bool>,
    /// Controller addresses whose last join call failed, and when (see
    /// [`QuorumService::is_unresponsive`]).
    unresponsive: std::sync::Mutex<BTreeMap<String, std::time::Instant>>,
}

/// How long an address whose join call failed is asked only after the others.
const UNRESPONSIVE_FOR: std::time::Duration = std::time::Duration::from_secs(10);

/// Why a joining node cannot take its node id now.
enum Conflict {
    /// A voter of another directory holds the id: refused.
    Voter(String),
    /// A live broker incarnation with other log dirs holds it: the joiner waits.
    LiveBroker(String),
}

impl QuorumService {
    pub(crate) fn new(
        state: Arc<QuorumState>,
        controller: Addr<Controller>,
        image: Arc<ArcSwap<MetadataImage>>,
        peer_limits: Arc<PeerLimits>,
        hello: PeerHello,
        connector: Arc<PeerConnector>,
        links: Arc<RaftLinks>,
    ) -> Arc<Self> {
        Arc::new_cyclic(|this| QuorumService {
            this: this.clone(),
            state,
            controller,
            image,
            forward_pool: Mutex::new(BTreeMap::new()),
            peer_limits,
            hello,
            connector,
            links,
            admitted_by: std::sync::Mutex::new(None),
            leader_address: tokio::sync::watch::Sender::new(None),
            raft_link: std::sync::atomic::AtomicBool::new(false),
            link_open: tokio::sync::watch::Sender::new(false),
            unresponsive: std::sync::Mutex::new(BTreeMap::new()),
        })
    }

    /// Records that a join call to `addr` failed (no answer in time, or no connection).
    pub(crate) fn mark_unresponsive(&self, addr: &str) {
        if let Ok(mut unresponsive) = self.unresponsive.lock() {
            unresponsive.insert(addr.to_owned(), std::time::Instant::now());
        }
    }

    /// Records that `addr` answered a join call.
    pub(crate) fn mark_responsive(&self, addr: &str) {
        if let Ok(mut unresponsive) = self.unresponsive.lock() {
            unresponsive.remove(addr);
        }
    }

    /// Whether a join call to `addr` failed within [`UNRESPONSIVE_FOR`] and it has not
    /// answered one since: joins ask it only after every other address.
    pub(crate) fn is_unresponsive(&self, addr: &str) -> bool {
        self.unresponsive.lock().is_ok_and(|unresponsive| {
            unresponsive
                .get(addr)
                .is_some_and(|since| since.elapsed() < UNRESPONSIVE_FOR)
        })
    }

    /// Whether this node leads and is one of the voters (a leader that removed itself keeps
    /// leading in openraft's eyes until a voter takes over, but can commit nothing).
    fn leads_as_voter(&self) -> bool {
        let metrics = self.state.log.metrics();
        metrics.current_leader == Some(metrics.id)
            && metrics
                .membership_config
                .membership()
                .voter_ids()
                .any(|id| id == metrics.id)
    }

    /// Records who admitted this node and where (see [`QuorumService::admitted_by`]).
    pub(crate) fn admitted(&self, leader: (u64, Uuid), address: Option<String>) {
        if let Ok(mut admitted) = self.admitted_by.lock() {
            *admitted = Some(leader);
        }
        if address.is_some() {
            self.leader_address.send_if_modified(|current| {
                let changed = *current != address;
                *current = address.clone();
                changed
            });
        }
    }

    /// Whether `(node_id, directory_id)` belongs to the quorum as this node knows it: a node of
    /// its raft membership with that directory, a registered controller with that directory
    /// (a leader that removed itself from the membership), or the leader that admitted this
    /// node while its own log holds no membership yet.
    fn knows(&self, node_id: i32, directory_id: Uuid) -> bool {
        let Ok(id) = u64::try_from(node_id) else {
            return false;
        };
        let metrics = self.state.log.metrics();
        let membership = metrics.membership_config.membership();
        if membership
            .get_node(&id)
            .is_some_and(|node| node.directory_id == directory_id)
        {
            return true;
        }
        let image = self.image.load();
        if image
            .cluster
            .controller(node_id)
            .is_some_and(|c| c.directory_id == directory_id)
        {
            return true;
        }
        membership.voter_ids().next().is_none()
            && self
                .admitted_by
                .lock()
                .ok()
                .and_then(|admitted| *admitted)
                .is_some_and(|leader| leader == (id, directory_id))
    }

    /// Serves one private frame (api keys 32000+, the bytes after the size prefix) on a
    /// controller listener. A connection must open with a hello naming this cluster; then a
    /// node this node knows may send raft traffic and open a raft link, and any node of this
    /// cluster may ask to join.
    pub(crate) async fn serve_private(
        &self,
        session: &mut PeerSession,
        frame: &[u8],
    ) -> PrivateOutcome {
        let key = i16::from_be_bytes([frame[0], frame[1]]);
        // Refuse by key before decoding: a stranger's body is never parsed.
        let allowed = match session.peer {
            None => key == rpc::PEER_HELLO,
            // Any node of this cluster may join, or read the image digest (a tool may ask).
            Some((_, _, known)) => known || key == rpc::JOIN || key == rpc::IMAGE_DIGEST,
        };
        if !allowed {
            return PrivateOutcome::Close(format!(
                "private api key {key} from a peer that is not allowed to send it"
            ));
        }
        let (correlation_id, request) = match rpc::decode_request(frame) {
            Ok(decoded) => decoded,
            Err(error) => return PrivateOutcome::Close(format!("a bad quorum frame: {error}")),
        };
        let known = match (&request, session.peer) {
            (QuorumRequest::Hello(hello), None) => {
                return self.hello(session, correlation_id, hello);
            }
            (QuorumRequest::Hello(_), Some(_)) => {
                return PrivateOutcome::Close("a second hello".into());
            }
            (_, None) => {
                return PrivateOutcome::Close("a quorum request before the hello".into());
            }
            (_, Some((_, _, known))) => known,
        };
        if let (true, Some((node_id, _, _))) = (known, session.peer) {
            // Any raft call shows the sender alive: a follower that becomes leader knows when it
            // last heard from the leader before it (see `spawn_fencing`).
            if matches!(
                request,
                QuorumRequest::AppendEntries(_)
                    | QuorumRequest::Vote(_)
                    | QuorumRequest::InstallSnapshot(_)
            ) {
                self.state.heard_from(node_id as u64);
            }
        }
        let raft = self.state.log.raft();
        let response = match request {
            QuorumRequest::Join(join) => {
                let Some((node_id, directory_id, _)) = session.peer else {
                    return PrivateOutcome::Close("a join before the hello".into());
                };
                if join.node_id != node_id || join.raft_node.directory_id != directory_id {
                    return PrivateOutcome::Close(format!(
                        "a join for node {} from a connection opened by node {node_id}",
                        join.node_id
                    ));
                }
                QuorumResponse::Join(self.join(join).await)
            }
            QuorumRequest::ImageDigest => {
                let image = self.image.load();
                QuorumResponse::ImageDigest {
                    offset: image.provenance.last_log_index,
                    digest: image.digest.value(),
                }
            }
            _ if !known => {
                return PrivateOutcome::Close(
                    "raft traffic from a node outside this quorum".into(),
                );
            }
            QuorumRequest::AppendEntries(rpc) => {
                QuorumResponse::AppendEntries(raft.append_entries(rpc).await)
            }
            QuorumRequest::Vote(rpc) => QuorumResponse::Vote(raft.vote(rpc).await),
            QuorumRequest::InstallSnapshot(rpc) => {
                QuorumResponse::InstallSnapshot(raft.install_snapshot(rpc).await)
            }
            QuorumRequest::Hello(_) => return PrivateOutcome::Close("a second hello".into()),
        };
        match rpc::encode_response(correlation_id, &response) {
            Ok(bytes) => PrivateOutcome::Reply(bytes),
            Err(error) => {
                tracing::error!(%error, "cannot encode a quorum response");
                PrivateOutcome::Close(error)
            }
        }
    }

    /// Answers a hello: refused for another cluster, accepted otherwise (known or not).
    fn hello(
        &self,
        session: &mut PeerSession,
        correlation_id: i32,
        hello: &PeerHello,
    ) -> PrivateOutcome {
        let own_id = self.hello.node_id;
        let (response, link) = if hello.cluster_id != self.state.cluster_id {
            (
                HelloResponse::Refused {
                    message: format!(
                        "The given id \"{}\" doesn't match the cluster id \"{}\"",
                        hello.cluster_id, self.state.cluster_id
                    ),
                },
                false,
            )
        } else {
            let known = self.knows(hello.node_id, hello.directory_id);
            session.peer = Some((hello.node_id, hello.directory_id, known));
            if hello.raft_link && !self.leads_as_voter() {
                (
                    HelloResponse::Refused {
                        message: format!("node {own_id} is not the leader"),
                    },
                    false,
                )
            } else if hello.raft_link && !known {
                (
                    HelloResponse::Refused {
                        message: format!(
                            "node {} with directory id {} is not a member of the quorum; join first",
                            hello.node_id,
                            uuid_to_kafka_string(hello.directory_id)
                        ),
                    },
                    false,
                )
            } else {
                (
                    HelloResponse::Accepted {
                        node_id: own_id,
                        known,
                    },
                    hello.raft_link,
                )
            }
        };
        let refused = matches!(response, HelloResponse::Refused { .. });
        if refused {
            tracing::info!(node_id = hello.node_id, ?response, "refusing a quorum peer");
        }
        match rpc::encode_response(correlation_id, &QuorumResponse::Hello(response)) {
            Ok(bytes) if link => PrivateOutcome::RaftLink(bytes, hello.node_id),
            Ok(bytes) if !refused => PrivateOutcome::Reply(bytes),
            Ok(bytes) => PrivateOutcome::Refuse(bytes),
            Err(error) => PrivateOutcome::Close(error),
        }
    }

    /// Serves a learner's raft link on the connection it opened: openraft's requests for that
    /// node go down it (see [`RaftLinks`]) until either side closes it, a newer link of the
    /// node replaces it, or the link's SASL session ends at `expires_at` (KIP-368: the learner
    /// replaces its link before then). Returns whether the session ended it.
    pub(crate) async fn serve_raft_link<S>(
        &self,
        mut stream: S,
        node_id: i32,
        expires_at: Option<std::time::Instant>,
    ) -> bool
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let id = node_id as u64;
        let (sender, mut calls) = tokio::sync::mpsc::channel::<LinkCall>(LINK_QUEUE);
        self.links.insert(id, sender.clone());
        tracing::info!(node_id, "raft link opened");
        let mut probe = [0u8; 1];
        let mut metrics = self.state.log.metrics_watch();
        let session_end = async {
            match expires_at {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(session_end);
        let mut expired = false;
        loop {
            tokio::select! {
                // A link replaced by a newer one ends with its session without fault: the
                // learner keeps the old one a moment for calls sent before the new one opened.
                _ = &mut session_end => {
                    expired = self.links.is_current(id, &sender);
                    if expired {
                        tracing::info!(node_id, "closing a raft link whose SASL session expired without being replaced");
                    }
                    break;
                }
                // A link is for the leader's traffic: a node that stops leading closes it, so
                // the learner finds the new leader at once.
                changed = metrics.changed() => {
                    if changed.is_err() || !self.leads_as_voter() {
                        break;
                    }
                }
                call = calls.recv() => {
                    let Some(call) = call else { break };
                    if call.reply.is_closed() {
                        // Its caller gave up while it queued: the learner need not do it.
                        continue;
                    }
                    let exchange = async {
                        stream.write_all(&call.frame).await?;
                        read_peer_frame(&mut stream).await
                    };
                    // A learner that stops answering ends its link (its caller gave up already).
                    let answer = tokio::time::timeout(LINK_ANSWER_TIMEOUT, exchange)
                        .await
                        .unwrap_or_else(|_| {
                            Err(std::io::Error::new(
                                std::io::ErrorKind::TimedOut,
                                "the learner did not answer on its raft link",
                            ))
                        });
                    let failed = answer.is_err();
                    let _ = call.reply.send(answer);
                    if failed {
                        break;
                    }
                }
                // The learner writes nothing unasked: data or end of stream ends the link.
                _ = stream.read(&mut probe) => break,
            }
        }
        self.links.remove(id, &sender);
        tracing::info!(node_id, "raft link closed");
        expired
    }

    /// An owned handle for futures that forward later.
    fn forwarding_handle(&self) -> ForwardingHandle {
        ForwardingHandle(self.this.clone())
    }

    /// Answers one frame the leader sent down this node's raft link (AppendEntries or
    /// InstallSnapshot); `None` ends the link.
    pub(crate) async fn serve_link_frame(&self, frame: &[u8]) -> Option<Bytes> {
        let (correlation_id, request) = match rpc::decode_request(frame) {
            Ok(decoded) => decoded,
            Err(error) => {
                tracing::info!(%error, "closing the raft link after a bad frame");
                return None;
            }
        };
        let raft = self.state.log.raft();
        let response = match request {
            QuorumRequest::AppendEntries(rpc) => {
                QuorumResponse::AppendEntries(raft.append_entries(rpc).await)
            }
            QuorumRequest::InstallSnapshot(rpc) => {
                QuorumResponse::InstallSnapshot(raft.install_snapshot(rpc).await)
            }
            other => {
                tracing::info!(
                    api_key = other.api_key(),
                    "closing the raft link after an unexpected request"
                );
                return None;
            }
        };
        rpc::encode_response(correlation_id, &response)
            .map_err(|error| tracing::error!(%error, "cannot encode a quorum response"))
            .ok()
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
        self.peer_limits
            .learn(join.node_id as u64, join.max_request_bytes);
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
        if !self.leads_as_voter() {
            // It removed itself and is stepping down: it knows no other leader yet.
            return JoinResponse::NotLeader { leader: None };
        }
        match self.conflicting_incarnation(&join) {
            Some(Conflict::Voter(message)) => {
                tracing::warn!(node_id = join.node_id, "{message}");
                return JoinResponse::Refused { message };
            }
            // Kafka's BrokerLifecycleManager retries a DUPLICATE_BROKER_REGISTRATION until
            // the old incarnation's session expires (a broker back on a replaced disk).
            Some(Conflict::LiveBroker(reason)) => {
                tracing::info!(node_id = join.node_id, "{reason}");
                return JoinResponse::Waiting { reason };
            }
            None => {}
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
            Ok(read_index) => JoinResponse::Joined {
                read_index,
                leader: (self.hello.node_id as u64, self.hello.directory_id),
            },
            Err(MetadataLogError::NotLeader { .. }) => JoinResponse::NotLeader {
                leader: self.leader(),
            },
            Err(e) => {
                tracing::warn!(error = %e, "cannot confirm leadership for a join");
                JoinResponse::NotLeader { leader: None }
            }
        }
    }

    /// Why `join` must be refused because another live incarnation holds its node id: a
    /// voter of that id with another metadata directory, or a broker of that id registered by
    /// another process with other log dirs that is unfenced and still heard from (Kafka's
    /// DuplicateBrokerRegistrationException). A restart of the same node (same directories)
    /// takes over its own registration.
    fn conflicting_incarnation(&self, join: &JoinRequest) -> Option<Conflict> {
        let node_id = join.node_id as u64;
        let metrics = self.state.log.metrics();
        let membership = metrics.membership_config.membership();
        if membership.voter_ids().any(|id| id == node_id) {
            let voter = membership.get_node(&node_id)?;
            return (voter.directory_id != join.raft_node.directory_id).then(|| {
                Conflict::Voter(format!(
                    "node id {} is a voter with directory id {}; directory {} cannot join under that id",
                    join.node_id,
                    uuid_to_kafka_string(voter.directory_id),
                    uuid_to_kafka_string(join.raft_node.directory_id)
                ))
            });
        }
        let joining = join.broker.as_ref()?;
        let image = self.image.load();
        let registered = image.cluster.broker(join.node_id)?;
        let alive = self
            .state
            .last_seen(join.node_id)
            .is_some_and(|seen| seen.elapsed() < OBSERVER_EXPIRY / 3);
        (registered.incarnation_id != join.incarnation_id
            && !registered.fenced
            && alive
            && registered.log_dirs != joining.log_dirs)
            .then(|| {
                Conflict::LiveBroker(format!(
                    "Another broker is registered with that broker id ({}): a live incarnation with other log dirs holds it until its session expires",
                    join.node_id
                ))
            })
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

    /// Sends a request frame (header and body, without the size prefix) to the active
    /// controller and returns its response frame (size prefix included): inside an Envelope
    /// for `caller` when the request is a client's, as is when it is this broker's own. An
    /// answer over [`WHOLE_ANSWER_LIMIT`] is left on the controller's connection and copied to
    /// the client as it is written. See [`ForwardError`] for what the caller does when no
    /// answer comes back.
    pub(crate) async fn forward(
        &self,
        request: &[u8],
        caller: Option<&Caller>,
    ) -> Result<ForwardedAnswer, ForwardError> {
        let (head, tail) = match caller {
            Some(caller) => match envelope::wrap(request, caller) {
                Ok(parts) => parts,
                Err(error) => {
                    tracing::error!(%error, "cannot wrap a client's request in an envelope");
                    return Err(ForwardError::failed(
                        ResponseError::UnknownServerError,
                        format!("This broker cannot forward the request to the active controller: {error}"),
                    ));
                }
            },
            None => (
                Bytes::copy_from_slice(&(request.len() as i32).to_be_bytes()),
                Bytes::new(),
            ),
        };
        let parts: [&[u8]; 3] = [&head, request, &tail];
        let deadline = tokio::time::Instant::now() + FORWARD_TIMEOUT;
        if caller.is_some() {
            self.await_other_controller(deadline).await?;
        }
        let mut backoff = RESEND_BACKOFF;
        let (addr, channel, answer) = loop {
            let (addr, channel, answer) = self.forward_once(&parts, deadline).await?;
            match answer {
                // The controller never got the request (it was down, or restarted since the
                // connection was made): send it again, to the controller known then, as
                // Kafka's forwarding thread re-queues a disconnected request. A request that
                // was written is never sent again (see `forward_once`).
                Err(error @ (CallError::Connect { .. } | CallError::Unsent { .. }))
                    if tokio::time::Instant::now() + backoff < deadline =>
                {
                    tracing::debug!(%error, "a forwarded request was not sent; sending it again");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(RESEND_BACKOFF_MAX);
                }
                answer => break (addr, channel, answer),
            }
        };
        let body = match answer {
            Ok(Answer::Whole(body)) => {
                self.forward_pool
                    .lock()
                    .await
                    .entry(addr)
                    .or_default()
                    .push(channel);
                body
            }
            Ok(Answer::Open { stream, size }) => {
                return match StreamedAnswer::open(stream, size, caller.is_some(), FORWARD_TIMEOUT)
                    .await
                {
                    Ok(answer) => Ok(ForwardedAnswer::Streamed(Box::new(answer))),
                    Err(error) => {
                        tracing::info!(%error, "cannot read a forwarded request's answer");
                        Err(ForwardError::Unreachable)
                    }
                };
            }
            Err(CallError::TimedOut { addr, after }) => {
                tracing::warn!(%addr, ?after, "the active controller did not answer a forwarded request in time");
                return Err(ForwardError::failed(
                    ResponseError::RequestTimedOut,
                    format!("The active controller at {addr} did not answer within {after:?}"),
                ));
            }
            // Sent again until the forwarding timeout, never delivered: Kafka's forwarding
            // channel answers REQUEST_TIMED_OUT when its retries run out
            // (`ForwardingManager`'s `onTimeout`), which the client does not retry blindly.
            Err(error @ (CallError::Connect { .. } | CallError::Unsent { .. })) => {
                tracing::warn!(%error, "the active controller could not be reached to forward a request before the forwarding timeout");
                return Err(ForwardError::failed(
                    ResponseError::RequestTimedOut,
                    format!(
                        "The active controller could not be reached within {FORWARD_TIMEOUT:?}: {error}"
                    ),
                ));
            }
            Err(error) => {
                tracing::info!(%error, "cannot forward a request to the active controller");
                return Err(ForwardError::Unreachable);
            }
        };
        let body = match caller {
            None => Bytes::from(body),
            Some(_) => envelope::unwrap(Bytes::from(body)).map_err(ForwardError::of_envelope)?,
        };
        let mut out = Vec::with_capacity(body.len() + 4);
        out.extend_from_slice(&(body.len() as i32).to_be_bytes());
        out.extend_from_slice(&body);
        Ok(ForwardedAnswer::Whole(Bytes::from(out)))
    }

    /// One attempt at [`Self::forward`]: the request sent to the controller known now, on a
    /// pooled connection to it or a new one, by `deadline`; with the channel it went on.
    async fn forward_once(
        &self,
        parts: &[&[u8]],
        deadline: tokio::time::Instant,
    ) -> Result<(String, Channel, Result<Answer, CallError>), ForwardError> {
        let addr = self.forward_address().await?;
        let asked = self.leader().map(|(id, _)| id);
        let mut channel = {
            let mut pool = self.forward_pool.lock().await;
            pool.get_mut(&addr)
                .and_then(Vec::pop)
                .unwrap_or_else(|| Channel::new(addr.clone(), &self.hello, self.connector.clone()))
        };
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let answer = {
            let exchange = channel.exchange(parts, left, WHOLE_ANSWER_LIMIT);
            tokio::pin!(exchange);
            tokio::select! {
                answer = &mut exchange => answer,
                () = leader_moved(self.state.log.metrics_watch(), asked) => {
                    // A controller that lost the leadership still answers what it was deciding
                    // (NOT_CONTROLLER, or what needed no commit); one that froze or died does
                    // not, and is not waited for: the request may or may not have been applied,
                    // so it is not sent again (that could apply it twice, or report a failure
                    // for what succeeded) nor handled here (this node may be the new leader);
                    // the client retries against the new controller, as after Kafka's
                    // forwarding channel gives up on the old one.
                    match tokio::time::timeout(MOVED_LEADER_GRACE, &mut exchange).await {
                        Ok(answer) => answer,
                        Err(_) => {
                            tracing::info!(%addr, "the active controller changed and the old one did not answer a forwarded request");
                            return Err(ForwardError::failed(
                                ResponseError::NotController,
                                format!(
                                    "The active controller at {addr} lost the leadership and did not answer; \
                                     the request may or may not have been applied: retry against the new controller"
                                ),
                            ));
                        }
                    }
                }
            }
        };
        Ok((addr, channel, answer))
    }

    /// Whether an active controller to forward to is known now: `Some(true)` when it is this
    /// node (which then answers the request itself), `None` when none is.
    fn controller_known(&self) -> Option<bool> {
        let linked = self.raft_link.load(std::sync::atomic::Ordering::Relaxed);
        if linked && self.leader_address.borrow().is_some() {
            return Some(false);
        }
        let metrics = self.state.log.metrics();
        metrics.current_leader.map(|leader| leader == metrics.id)
    }

    /// Holds a client's forwarded request while no active controller is known (an election
    /// running, or a quorum that lost its majority), as Kafka's forwarding channel keeps a
    /// request queued until it finds the controller; REQUEST_TIMED_OUT at `deadline`. Answering
    /// NOT_CONTROLLER at once instead makes clients that retry it only once (kafka-python's
    /// admin client) fail a CreateTopics sent during an election.
    async fn await_other_controller(
        &self,
        deadline: tokio::time::Instant,
    ) -> Result<(), ForwardError> {
        let mut metrics = self.state.log.metrics_watch();
        let mut address = self.leader_address.subscribe();
        loop {
            match self.controller_known() {
                Some(false) => return Ok(()),
                // This node leads now: its own controller actor answers.
                Some(true) => return Err(ForwardError::Unreachable),
                None => {}
            }
            let elected = async {
                tokio::select! {
                    changed = metrics.changed() => changed.is_ok(),
                    changed = address.changed() => changed.is_ok(),
                }
            };
            match tokio::time::timeout_at(deadline, elected).await {
                Ok(true) => {}
                // The metadata log stopped: the node is shutting down.
                Ok(false) => return Err(ForwardError::Unreachable),
                Err(_) => {
                    tracing::warn!("no active controller was known before the forwarding timeout");
                    return Err(ForwardError::failed(
                        ResponseError::RequestTimedOut,
                        format!("No active controller was known within {FORWARD_TIMEOUT:?}"),
                    ));
                }
            }
        }
    }

    /// The address of the active controller to forward to.
    async fn forward_address(&self) -> Result<String, ForwardError> {
        // A node on a raft link learns of a new leader by joining it, before the leader's
        // first entries reach it. While the link is down (the leader stopped leading or died)
        // the request waits for it to reopen to the new leader, as Kafka's broker holds a
        // forwarded request until it finds the active controller.
        let linked = self.raft_link.load(std::sync::atomic::Ordering::Relaxed);
        if linked && !*self.link_open.borrow() {
            let mut open = self.link_open.subscribe();
            let _ = tokio::time::timeout(LINK_REOPEN_WAIT, open.wait_for(|open| *open)).await;
        }
        let linked = linked
            .then(|| self.leader_address.borrow().clone())
            .flatten();
        match linked {
            Some(addr) => Ok(addr),
            None => {
                let (_, endpoints) = self.leader().ok_or(ForwardError::Unreachable)?;
                Ok(address_of(
                    endpoints.first().ok_or(ForwardError::Unreachable)?,
                ))
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

/// Resolves once the metadata log knows a leader other than `asked` (never, if it does not
/// change, the log stops, or `asked` is unknown: a node on a raft link may not know the leader's
/// id).
async fn leader_moved(
    mut metrics: tokio::sync::watch::Receiver<
        openraft::RaftMetrics<u64, gregor_actors::raft::VoterNode>,
    >,
    asked: Option<u64>,
) {
    if asked.is_none() {
        std::future::pending::<()>().await;
    }
    loop {
        let leader = metrics.borrow_and_update().current_leader;
        if leader.is_some() && leader != asked {
            return;
        }
        if metrics.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// A handle that forwards while the service lives.
struct ForwardingHandle(std::sync::Weak<QuorumService>);

impl ForwardingHandle {
    async fn forward(
        &self,
        request: &[u8],
        caller: Option<&Caller>,
    ) -> Result<Bytes, ForwardError> {
        let service = self.0.upgrade().ok_or(ForwardError::Unreachable)?;
        match service.forward(request, caller).await? {
            ForwardedAnswer::Whole(bytes) => Ok(bytes),
            // A typed forward decodes its answer whole anyway.
            ForwardedAnswer::Streamed(answer) => answer
                .into_bytes(MAX_RESPONSE_BYTES)
                .await
                .map_err(|error| {
                    tracing::info!(%error, "cannot read a forwarded request's answer");
                    ForwardError::Unreachable
                }),
        }
    }
}

impl QuorumService {
    /// Encodes `request` as a client would send it (with `caller`'s client id, inside an
    /// Envelope for `caller`), forwards it, and decodes the answer; `None` when it cannot be
    /// encoded or no active controller answered.
    fn forward_typed<Req: kafka_protocol::protocol::Request + Send + 'static>(
        &self,
        request: Req,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<'static, Forwarded<Req::Response>>
    where
        Req::Response: Send + 'static,
    {
        use kafka_protocol::messages::{RequestHeader, ResponseHeader};
        use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
        let header = RequestHeader::default()
            .with_request_api_key(Req::KEY)
            .with_request_api_version(version)
            .with_correlation_id(1)
            .with_client_id(Some(match &caller {
                Some(caller) => StrBytes::from_string(caller.client_id.clone()),
                None => StrBytes::from_static_str("gregor-broker"),
            }));
        let mut frame = bytes::BytesMut::new();
        let encoded = header
            .encode(&mut frame, Req::header_version(version))
            .and_then(|()| request.encode(&mut frame, version));
        let forwarder = self.forwarding_handle();
        Box::pin(async move {
            let undecodable = |error: &dyn std::fmt::Display| {
                tracing::error!(api_key = Req::KEY, %error, "a forwarded request or its answer could not be encoded or decoded");
                Forwarded::Failed(ControllerFailure {
                    error: ResponseError::UnknownServerError,
                    message: format!("This broker could not forward the request to the active controller: {error}"),
                })
            };
            if let Err(error) = encoded {
                return undecodable(&error);
            }
            let answer = match forwarder.forward(&frame, caller.as_ref()).await {
                Ok(answer) => answer,
                Err(error) => return error.into_forwarded(),
            };
            // Skip the size prefix, then the response header.
            let mut body = answer.slice(4..);
            let decoded = ResponseHeader::decode(&mut body, Req::Response::header_version(version))
                .and_then(|_| Req::Response::decode(&mut body, version));
            match decoded {
                Ok(response) => Forwarded::Answered(response),
                Err(error) => undecodable(&error),
            }
        })
    }
}

/// Requests a broker hands to the active controller from inside a handler (Metadata's
/// auto-creation, the controller part of the config APIs): encoded as a client would send them
/// and forwarded like one.
impl gregor_actors::context::ControllerForwarder for QuorumService {
    fn knows_active_controller(&self) -> bool {
        self.controller_known().is_some()
    }

    fn create_topics(
        &self,
        request: kafka_protocol::messages::CreateTopicsRequest,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::CreateTopicsResponse>,
    > {
        self.forward_typed(request, version, caller)
    }

    fn delete_topics(
        &self,
        request: kafka_protocol::messages::DeleteTopicsRequest,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::DeleteTopicsResponse>,
    > {
        self.forward_typed(request, version, caller)
    }

    fn create_partitions(
        &self,
        request: kafka_protocol::messages::CreatePartitionsRequest,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::CreatePartitionsResponse>,
    > {
        self.forward_typed(request, version, caller)
    }

    fn incremental_alter_configs(
        &self,
        request: kafka_protocol::messages::IncrementalAlterConfigsRequest,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::IncrementalAlterConfigsResponse>,
    > {
        self.forward_typed(request, version, caller)
    }

    fn alter_configs(
        &self,
        request: kafka_protocol::messages::AlterConfigsRequest,
        version: i16,
        caller: Option<Caller>,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::AlterConfigsResponse>,
    > {
        self.forward_typed(request, version, caller)
    }

    fn alter_partition(
        &self,
        request: kafka_protocol::messages::AlterPartitionRequest,
        version: i16,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::AlterPartitionResponse>,
    > {
        self.forward_typed(request, version, None)
    }

    fn broker_heartbeat(
        &self,
        request: kafka_protocol::messages::BrokerHeartbeatRequest,
        version: i16,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::BrokerHeartbeatResponse>,
    > {
        self.forward_typed(request, version, None)
    }

    fn allocate_producer_ids(
        &self,
        request: kafka_protocol::messages::AllocateProducerIdsRequest,
    ) -> futures::future::BoxFuture<
        'static,
        Forwarded<kafka_protocol::messages::AllocateProducerIdsResponse>,
    > {
        self.forward_typed(request, 0, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use envelope::EnvelopeFailure;

    fn failure(error: ForwardError) -> Option<(ResponseError, String)> {
        match error {
            ForwardError::Failed(failure) => Some((failure.error, failure.message)),
            _ => None,
        }
    }

    #[test]
    fn envelope_refusals_are_read_as_kafkas_broker_reads_them() {
        // NOT_CONTROLLER: the request is answered here, so the client finds the controller.
        assert!(matches!(
            ForwardError::of_envelope(EnvelopeFailure::Refused(41)),
            ForwardError::Unreachable
        ));
        // UNSUPPORTED_VERSION: the client's connection is closed.
        assert!(matches!(
            ForwardError::of_envelope(EnvelopeFailure::Refused(35)),
            ForwardError::Unsupported(_)
        ));
        // Anything else is UNKNOWN_SERVER_ERROR, naming the refusal (and what to mend).
        let (error, message) =
            failure(ForwardError::of_envelope(EnvelopeFailure::Refused(31))).unwrap();
        assert_eq!(error, ResponseError::UnknownServerError);
        assert!(
            message.contains("(CLUSTER_AUTHORIZATION_FAILED)"),
            "{message}"
        );
        assert!(message.contains("needs CLUSTER_ACTION"), "{message}");
        let (error, message) =
            failure(ForwardError::of_envelope(EnvelopeFailure::Refused(97))).unwrap();
        assert_eq!(error, ResponseError::UnknownServerError);
        assert!(
            message.contains("(PRINCIPAL_DESERIALIZATION_FAILURE)"),
            "{message}"
        );
        let (error, _) = failure(ForwardError::of_envelope(EnvelopeFailure::Malformed(
            "a 3-byte frame".into(),
        )))
        .unwrap();
        assert_eq!(error, ResponseError::UnknownServerError);
    }

    #[test]
    fn a_handler_sees_an_unparsable_request_fail_like_a_refused_one() {
        let forwarded: Forwarded<()> =
            ForwardError::Unsupported("cannot parse".into()).into_forwarded();
        assert!(matches!(
            forwarded,
            Forwarded::Failed(ControllerFailure {
                error: ResponseError::UnknownServerError,
                ..
            })
        ));
        assert!(matches!(
            ForwardError::Unreachable.into_forwarded::<()>(),
            Forwarded::Unreachable
        ));
    }
}
