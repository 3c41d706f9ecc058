//! The raft network over the controller listener: one TCP connection per peer, requests sent
//! one at a time (openraft serialises the calls of one replication stream), reconnecting after
//! any error. Also the plain request/response channel the join and forwarding paths use.
//!
//! Every connection opens with a [`PeerHello`] naming the cluster and this node; the receiver
//! serves private RPCs only after it, and only on its controller listener. A broker without a
//! controller listener opens a *raft link* to the leader instead ([`RaftLinks`] on the leader,
//! `quorum::spawn_raft_link` on the broker): the leader sends that learner's AppendEntries and
//! InstallSnapshot down the connection the learner opened.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use gregor_actors::quorum::QuorumState;
use gregor_actors::raft::{TypeConfig, VoterNode};
use gregor_publishers::records::Endpoint;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Notify};

use super::rpc::{self, HelloResponse, PeerHello, QuorumRequest, QuorumResponse};

/// Largest frame accepted from a peer on a connection this node opened (snapshot chunks and
/// entry batches are far smaller; a larger size means a corrupt stream).
pub(crate) const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

/// How long the leader waits for a learner's raft link to appear before calling it
/// unreachable (the learner opens it as soon as its join is answered).
const LINK_WAIT: Duration = Duration::from_millis(500);

/// How long connecting to a peer may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    /// No connection could be made.
    #[error("cannot connect to {addr}: {reason}")]
    Connect {
        /// Address tried.
        addr: String,
        /// Why.
        reason: String,
    },
    /// The connection failed or the answer made no sense.
    #[error("{addr}: {reason}")]
    Io {
        /// Peer address.
        addr: String,
        /// Why.
        reason: String,
    },
}

/// `host:port` of an endpoint (IPv6 hosts bracketed).
pub(crate) fn address_of(endpoint: &Endpoint) -> String {
    if endpoint.host.contains(':') {
        format!("[{}]:{}", endpoint.host, endpoint.port)
    } else {
        format!("{}:{}", endpoint.host, endpoint.port)
    }
}

/// One lazily (re)connected connection to a peer address.
pub(crate) struct Channel {
    addr: String,
    stream: Option<TcpStream>,
    next_correlation: i32,
    /// This node's hello, sent and accepted first on every new connection.
    hello: Bytes,
    /// A frame sent and answered after the hello on every new connection (see
    /// [`Channel::forwarding`]).
    opening: Option<Bytes>,
}

/// Reads one size-prefixed frame of at most [`MAX_RESPONSE_BYTES`] and returns its body.
pub(crate) async fn read_peer_frame(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let size = stream.read_i32().await?;
    let size = usize::try_from(size)
        .ok()
        .filter(|s| *s <= MAX_RESPONSE_BYTES)
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("frame size {size}"),
            )
        })?;
    let mut body = vec![0; size];
    stream.read_exact(&mut body).await?;
    Ok(body)
}

/// The hello frame for `hello`, or an error naming why it cannot be encoded.
pub(crate) fn hello_frame(hello: &PeerHello) -> Result<Bytes, String> {
    rpc::encode_request(0, &QuorumRequest::Hello(hello.clone()))
}

/// Checks the answer to a hello: accepted, or the receiver's reason.
pub(crate) fn check_hello_answer(addr: &str, answer: &[u8]) -> Result<(), CallError> {
    match rpc::decode_response(answer) {
        Ok((_, QuorumResponse::Hello(HelloResponse::Accepted { .. }))) => Ok(()),
        Ok((_, QuorumResponse::Hello(HelloResponse::Refused { message }))) => Err(CallError::Io {
            addr: addr.to_owned(),
            reason: format!("refused this node: {message}"),
        }),
        Ok(_) => Err(CallError::Io {
            addr: addr.to_owned(),
            reason: "answered a hello with another message".into(),
        }),
        Err(reason) => Err(CallError::Io {
            addr: addr.to_owned(),
            reason,
        }),
    }
}

impl Channel {
    pub(crate) fn new(addr: String, hello: &PeerHello) -> Self {
        Channel {
            addr,
            stream: None,
            next_correlation: 0,
            hello: hello_frame(hello).unwrap_or_default(),
            opening: None,
        }
    }

    /// A channel for forwarded client requests: each connection it opens first announces
    /// itself as one, so the controller leaves throttling its clients to this broker.
    pub(crate) fn forwarding(addr: String, hello: &PeerHello) -> Self {
        Channel {
            opening: Some(rpc::forwarding_channel_frame()),
            ..Channel::new(addr, hello)
        }
    }

    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// Sends one quorum request and reads its response within `timeout`.
    pub(crate) async fn call(
        &mut self,
        request: &QuorumRequest,
        timeout: Duration,
    ) -> Result<QuorumResponse, CallError> {
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let correlation = self.next_correlation;
        let frame = rpc::encode_request(correlation, request).map_err(|reason| CallError::Io {
            addr: self.addr.clone(),
            reason,
        })?;
        let answer = self.round_trip(frame, timeout).await?;
        let (got, response) = rpc::decode_response(&answer).map_err(|reason| {
            self.stream = None;
            CallError::Io {
                addr: self.addr.clone(),
                reason,
            }
        })?;
        if got != correlation {
            self.stream = None;
            return Err(CallError::Io {
                addr: self.addr.clone(),
                reason: format!("response for correlation id {got}, expected {correlation}"),
            });
        }
        Ok(response)
    }

    /// Writes `frame` (size prefix included) and returns the body of the response frame. Any
    /// failure drops the connection so the next call reconnects.
    pub(crate) async fn round_trip(
        &mut self,
        frame: Bytes,
        timeout: Duration,
    ) -> Result<Vec<u8>, CallError> {
        if self.stream.is_none() {
            let connect = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&self.addr));
            let stream = match connect.await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    return Err(CallError::Connect {
                        addr: self.addr.clone(),
                        reason: e.to_string(),
                    })
                }
                Err(_) => {
                    return Err(CallError::Connect {
                        addr: self.addr.clone(),
                        reason: format!("no answer within {CONNECT_TIMEOUT:?}"),
                    })
                }
            };
            let _ = stream.set_nodelay(true);
            self.stream = Some(stream);
            let answer = Box::pin(self.round_trip(self.hello.clone(), timeout)).await?;
            if let Err(error) = check_hello_answer(&self.addr, &answer) {
                self.stream = None;
                return Err(error);
            }
            if let Some(opening) = self.opening.clone() {
                Box::pin(self.round_trip(opening, timeout)).await?;
            }
        }
        let Some(stream) = self.stream.as_mut() else {
            return Err(CallError::Io {
                addr: self.addr.clone(),
                reason: "not connected".into(),
            });
        };
        let exchange = async {
            stream.write_all(&frame).await?;
            read_peer_frame(stream).await
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(body)) => Ok(body),
            Ok(Err(e)) => {
                self.stream = None;
                Err(CallError::Io {
                    addr: self.addr.clone(),
                    reason: e.to_string(),
                })
            }
            Err(_) => {
                self.stream = None;
                Err(CallError::Io {
                    addr: self.addr.clone(),
                    reason: format!("no response within {timeout:?}"),
                })
            }
        }
    }
}

/// One request the leader sends down a learner's raft link, and where its answer goes.
pub(crate) struct LinkCall {
    /// The request frame, size prefix included.
    pub(crate) frame: Bytes,
    /// The response frame's body.
    pub(crate) reply: oneshot::Sender<std::io::Result<Vec<u8>>>,
}

/// The raft links learners without a controller listener opened to this node, by node id.
#[derive(Default)]
pub(crate) struct RaftLinks {
    links: Mutex<HashMap<u64, mpsc::Sender<LinkCall>>>,
    opened: Notify,
}

impl RaftLinks {
    /// Makes `sender` the link of `node_id` (a newer link replaces an older one, whose task
    /// ends when its sender is dropped).
    pub(crate) fn insert(&self, node_id: u64, sender: mpsc::Sender<LinkCall>) {
        if let Ok(mut links) = self.links.lock() {
            links.insert(node_id, sender);
        }
        self.opened.notify_waiters();
    }

    /// Forgets the link of `node_id` if it is still `sender`'s.
    pub(crate) fn remove(&self, node_id: u64, sender: &mpsc::Sender<LinkCall>) {
        if let Ok(mut links) = self.links.lock() {
            if links.get(&node_id).is_some_and(|s| s.same_channel(sender)) {
                links.remove(&node_id);
            }
        }
    }

    fn get(&self, node_id: u64) -> Option<mpsc::Sender<LinkCall>> {
        let links = self.links.lock().ok()?;
        links.get(&node_id).filter(|s| !s.is_closed()).cloned()
    }

    /// Sends `frame` down `node_id`'s link and returns the response frame's body; waits up to
    /// [`LINK_WAIT`] for the link to open.
    async fn round_trip(
        &self,
        node_id: u64,
        frame: Bytes,
        timeout: Duration,
    ) -> Result<Vec<u8>, CallError> {
        let addr = format!("raft link of node {node_id}");
        let deadline = tokio::time::Instant::now() + LINK_WAIT.min(timeout);
        let sender = loop {
            let opened = self.opened.notified();
            if let Some(sender) = self.get(node_id) {
                break sender;
            }
            if tokio::time::timeout_at(deadline, opened).await.is_err() {
                return Err(CallError::Connect {
                    addr,
                    reason: "the learner has not opened its raft link".into(),
                });
            }
        };
        let (reply, answer) = oneshot::channel();
        let exchange = async {
            if sender.send(LinkCall { frame, reply }).await.is_err() {
                return None;
            }
            answer.await.ok()
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Some(Ok(body))) => Ok(body),
            Ok(Some(Err(e))) => Err(CallError::Io {
                addr,
                reason: e.to_string(),
            }),
            Ok(None) => Err(CallError::Io {
                addr,
                reason: "the raft link closed".into(),
            }),
            Err(_) => Err(CallError::Io {
                addr,
                reason: format!("no response within {timeout:?}"),
            }),
        }
    }
}

/// Builds a [`PeerClient`] per peer openraft replicates to or asks for votes.
#[derive(Clone)]
pub(crate) struct QuorumNetwork {
    /// Where replication progress is recorded (set once the state exists).
    pub(crate) state: Arc<std::sync::OnceLock<Arc<QuorumState>>>,
    /// This node's hello.
    pub(crate) hello: PeerHello,
    /// Links opened by learners without a controller listener.
    pub(crate) links: Arc<RaftLinks>,
}

/// How openraft reaches one peer.
enum Route {
    /// The peer's controller listener.
    Direct(Channel),
    /// The raft link the peer (a broker without a controller listener) opened to this node.
    Link(Arc<RaftLinks>),
}

/// openraft's connection to one peer.
pub(crate) struct PeerClient {
    target: u64,
    route: Route,
    next_correlation: i32,
    state: Arc<std::sync::OnceLock<Arc<QuorumState>>>,
}

impl RaftNetworkFactory<TypeConfig> for QuorumNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: u64, node: &VoterNode) -> PeerClient {
        // The first endpoint is the controller listener; a node without one (a broker) is
        // reached over the raft link it opens.
        let route = match node.endpoints.first() {
            Some(endpoint) => Route::Direct(Channel::new(address_of(endpoint), &self.hello)),
            None => Route::Link(self.links.clone()),
        };
        PeerClient {
            target,
            route,
            next_correlation: 0,
            state: self.state.clone(),
        }
    }
}

impl PeerClient {
    fn addr(&self) -> String {
        match &self.route {
            Route::Direct(channel) => channel.addr().to_owned(),
            Route::Link(_) => format!("raft link of node {}", self.target),
        }
    }

    async fn call(
        &mut self,
        request: &QuorumRequest,
        timeout: Duration,
    ) -> Result<QuorumResponse, CallError> {
        let links = match &mut self.route {
            Route::Direct(channel) => return channel.call(request, timeout).await,
            Route::Link(links) => links.clone(),
        };
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let correlation = self.next_correlation;
        let io = |reason: String| CallError::Io {
            addr: format!("raft link of node {}", self.target),
            reason,
        };
        let frame = rpc::encode_request(correlation, request).map_err(io)?;
        let answer = links.round_trip(self.target, frame, timeout).await?;
        let (got, response) = rpc::decode_response(&answer).map_err(io)?;
        if got != correlation {
            return Err(io(format!(
                "response for correlation id {got}, expected {correlation}"
            )));
        }
        Ok(response)
    }

    async fn send<E: std::error::Error>(
        &mut self,
        request: QuorumRequest,
        option: &RPCOption,
    ) -> Result<QuorumResponse, RPCError<u64, VoterNode, E>> {
        match self.call(&request, option.hard_ttl()).await {
            Ok(response) => Ok(response),
            Err(e @ CallError::Connect { .. }) => Err(RPCError::Unreachable(Unreachable::new(&e))),
            Err(e) => Err(RPCError::Network(NetworkError::new(&e))),
        }
    }

    fn unexpected<E: std::error::Error>(&self) -> RPCError<u64, VoterNode, E> {
        let e = CallError::Io {
            addr: self.addr(),
            reason: "answered with a response of another kind".into(),
        };
        RPCError::Network(NetworkError::new(&e))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
    fn backoff(&self) -> Backoff {
        // A missing raft link reports itself after LINK_WAIT already; retry soon after.
        let pause = match self.route {
            Route::Direct(_) => Duration::from_millis(500),
            Route::Link(_) => Duration::from_millis(100),
        };
        Backoff::new(std::iter::repeat(pause))
    }

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, VoterNode, RaftError<u64>>> {
        let matched = rpc
            .entries
            .last()
            .map(|e| e.log_id.index)
            .or(rpc.prev_log_id.map(|l| l.index));
        let committed = rpc.leader_commit.map(|l| l.index);
        match self
            .send(QuorumRequest::AppendEntries(rpc), &option)
            .await?
        {
            QuorumResponse::AppendEntries(Ok(response)) => {
                if matches!(response, AppendEntriesResponse::Success) {
                    if let Some(state) = self.state.get() {
                        state.record_replicated(self.target, matched, committed);
                    }
                }
                Ok(response)
            }
            QuorumResponse::AppendEntries(Err(e)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(self.unexpected()),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, VoterNode, RaftError<u64, InstallSnapshotError>>,
    > {
        match self
            .send(QuorumRequest::InstallSnapshot(rpc), &option)
            .await?
        {
            QuorumResponse::InstallSnapshot(Ok(response)) => Ok(response),
            QuorumResponse::InstallSnapshot(Err(e)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(self.unexpected()),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, VoterNode, RaftError<u64>>> {
        match self.send(QuorumRequest::Vote(rpc), &option).await? {
            QuorumResponse::Vote(Ok(response)) => Ok(response),
            QuorumResponse::Vote(Err(e)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(self.unexpected()),
        }
    }
}
