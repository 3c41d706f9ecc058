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
use openraft::{LogId, Vote};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, Notify};

use crate::network::peer::{ConnectError, PeerConnector, PeerStream};
use crate::network::tls::MaybeTls;

use super::rpc::{self, HelloResponse, PeerHello, QuorumRequest, QuorumResponse};

/// Largest frame accepted from a peer on a connection this node opened (snapshot chunks and
/// entry batches are far smaller; a larger size means a corrupt stream).
pub(crate) const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

/// How long the leader waits for a learner's raft link to appear before calling it
/// unreachable (the learner opens it as soon as its join is answered).
const LINK_WAIT: Duration = Duration::from_millis(500);

/// How long connecting to a peer may take (TCP, then TLS and SASL when the listener has them).
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Test only: the environment variable naming a file while whose existence this node neither
/// sends nor serves any quorum RPC (raft, join, heartbeat, forwarding), as if a network fault
/// cut it off from every other controller while its clients and replica fetchers still reach
/// it. Nothing sets it outside tests.
pub(crate) const ISOLATION_HOOK_ENV: &str = "GREGOR_TEST_ONLY_ISOLATE_QUORUM_FILE";

static ISOLATION_FILE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();

/// Whether the test-only isolation file exists (one `stat` per quorum frame, only when the
/// hook is set).
pub(crate) fn isolated_by_test_hook() -> bool {
    ISOLATION_FILE
        .get_or_init(|| {
            let file = std::env::var_os(ISOLATION_HOOK_ENV)?;
            tracing::warn!(
                file = %std::path::Path::new(&file).display(),
                "test-only hook set: quorum traffic stops while this file exists"
            );
            Some(file.into())
        })
        .as_ref()
        .is_some_and(|file| file.exists())
}

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
    /// No answer came within the call's timeout.
    #[error("{addr}: no response within {after:?}")]
    TimedOut {
        /// Peer address.
        addr: String,
        /// The timeout.
        after: Duration,
    },
    /// The connection failed while the request was written: the peer cannot have read the
    /// whole request, so it may be sent again.
    #[error("{addr}: {reason} (the request was not sent)")]
    Unsent {
        /// Peer address.
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
    /// How connections to the peer's controller listener are secured.
    connector: Arc<PeerConnector>,
    stream: Option<PeerStream>,
    /// When the connection's SASL session must be renewed (KIP-368; `None`: never).
    renew_at: Option<tokio::time::Instant>,
    next_correlation: i32,
    /// This node's hello, sent and accepted first on every new connection.
    hello: Bytes,
}

/// Reads one size-prefixed frame of at most [`MAX_RESPONSE_BYTES`] and returns its body.
pub(crate) async fn read_peer_frame<S: AsyncRead + Unpin>(
    stream: &mut S,
) -> std::io::Result<Vec<u8>> {
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
    pub(crate) fn new(addr: String, hello: &PeerHello, connector: Arc<PeerConnector>) -> Self {
        Channel {
            addr,
            connector,
            stream: None,
            renew_at: None,
            next_correlation: 0,
            hello: hello_frame(hello).unwrap_or_default(),
        }
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
        match self
            .exchange(&[&frame], timeout, MAX_RESPONSE_BYTES)
            .await?
        {
            Answer::Whole(body) => Ok(body),
            Answer::Open { .. } => Err(CallError::Io {
                addr: self.addr.clone(),
                reason: "an answer larger than any frame read whole".into(),
            }),
        }
    }

    /// Writes a request frame given as `parts` (size prefix included) and reads the answer's
    /// size: an answer of at most `whole_limit` bytes is read whole and the connection kept;
    /// a larger one is left unread on the connection, which the caller takes (the next call
    /// reconnects). Forwarded answers can be several times a request frame: read whole, they
    /// would hold that much memory for one client.
    pub(crate) async fn exchange(
        &mut self,
        parts: &[&[u8]],
        timeout: Duration,
        whole_limit: usize,
    ) -> Result<Answer, CallError> {
        let mut stream = self.connected(timeout).await?;
        let exchange = async {
            // The flush pushes out what TLS still holds: only then is the request whole at
            // the peer, so any failure up to here means it was not sent.
            let written = async {
                for part in parts {
                    stream.write_all(part).await?;
                }
                stream.flush().await
            };
            written.await.map_err(Failure::Unsent)?;
            read_answer(&mut stream, whole_limit)
                .await
                .map_err(Failure::Read)
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(Ok(body))) => {
                self.stream = Some(stream);
                Ok(Answer::Whole(body))
            }
            Ok(Ok(Err(size))) => Ok(Answer::Open { stream, size }),
            Ok(Err(Failure::Unsent(e))) => Err(CallError::Unsent {
                addr: self.addr.clone(),
                reason: e.to_string(),
            }),
            Ok(Err(Failure::Read(e))) => Err(CallError::Io {
                addr: self.addr.clone(),
                reason: e.to_string(),
            }),
            Err(_) => Err(CallError::TimedOut {
                addr: self.addr.clone(),
                after: timeout,
            }),
        }
    }

    /// The connection, made (hello accepted) or renewed as needed and taken out of the
    /// channel: it is put back only once an exchange completed, so a caller that drops its
    /// future half-way (openraft gives up on an AppendEntries after a heartbeat interval)
    /// never leaves an unread answer on a connection that is reused.
    async fn connected(&mut self, timeout: Duration) -> Result<PeerStream, CallError> {
        if isolated_by_test_hook() {
            self.stream = None;
            return Err(CallError::Io {
                addr: self.addr.clone(),
                reason: "cut off by the test-only isolation hook".into(),
            });
        }
        if self.stream.as_ref().is_some_and(peer_closed) {
            // Its peer closed it while it was idle (a controller that restarted): a request
            // written to it would be lost, so it is replaced before anything is sent.
            tracing::debug!(addr = %self.addr, "a peer closed an idle connection; reconnecting");
            self.stream = None;
        }
        if self.stream.is_none() {
            // A refused TLS handshake or SASL exchange counts as unreachable too: openraft
            // backs off before the next try, and the reason says what to fix.
            let stream = match self.connector.connect(&self.addr, CONNECT_TIMEOUT).await {
                Ok((stream, lifetime)) => {
                    self.renew_at = crate::network::peer::renewal_at(lifetime);
                    stream
                }
                Err(ConnectError::Unreachable(reason)) => {
                    return Err(CallError::Connect {
                        addr: self.addr.clone(),
                        reason,
                    })
                }
                Err(ConnectError::Refused(reason)) => {
                    // A misconfiguration the operator must see (a wrong password, an
                    // untrusted certificate), unlike a peer that is down.
                    tracing::warn!(addr = %self.addr, %reason, "a controller refused this node's connection");
                    return Err(CallError::Connect {
                        addr: self.addr.clone(),
                        reason,
                    });
                }
            };
            self.stream = Some(stream);
            let answer = Box::pin(self.round_trip(self.hello.clone(), timeout)).await?;
            if let Err(error) = check_hello_answer(&self.addr, &answer) {
                self.stream = None;
                return Err(error);
            }
        }
        // A session past its renewal time re-authenticates on the same connection before the
        // next request, so the controller never closes a peer link as expired.
        if let (Some(stream), Some(at)) = (self.stream.as_mut(), self.renew_at) {
            if tokio::time::Instant::now() >= at {
                match tokio::time::timeout(timeout, self.connector.reauthenticate(stream)).await {
                    Ok(Ok(lifetime)) => self.renew_at = crate::network::peer::renewal_at(lifetime),
                    failed => {
                        self.stream = None;
                        let reason = match failed {
                            Ok(Err(reason)) => reason,
                            _ => format!("re-authentication not done within {timeout:?}"),
                        };
                        tracing::warn!(addr = %self.addr, %reason, "a controller refused this node's re-authentication");
                        return Err(CallError::Io {
                            addr: self.addr.clone(),
                            reason,
                        });
                    }
                }
            }
        }
        self.stream.take().ok_or_else(|| CallError::Io {
            addr: self.addr.clone(),
            reason: "not connected".into(),
        })
    }
}

/// How an exchange failed: before the request was whole at the peer, or after.
enum Failure {
    Unsent(std::io::Error),
    Read(std::io::Error),
}

/// Reads an answer's size, then its body when it is at most `whole_limit` bytes (`Err(size)`:
/// left on the stream).
async fn read_answer(
    stream: &mut PeerStream,
    whole_limit: usize,
) -> std::io::Result<Result<Vec<u8>, usize>> {
    let size = stream.read_i32().await?;
    let size = usize::try_from(size).map_err(|_| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame size {size}"),
        )
    })?;
    if size > whole_limit {
        return Ok(Err(size));
    }
    let mut body = vec![0; size];
    stream.read_exact(&mut body).await?;
    Ok(Ok(body))
}

/// Whether the peer closed or reset `stream` (a FIN or RST is in), asked of the kernel without
/// waiting and without reading: an idle connection has nothing else to read.
fn peer_closed(stream: &PeerStream) -> bool {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let tcp = match stream {
        MaybeTls::Plain(tcp) => tcp,
        MaybeTls::Tls(tls) => tls.get_ref().0,
    };
    let mut fds = [PollFd::new(tcp, PollFlags::RDHUP)];
    let now = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // A failed poll (EINTR) says nothing: the exchange finds out.
    poll(&mut fds, Some(&now)).is_ok_and(|_| {
        fds[0]
            .revents()
            .intersects(PollFlags::RDHUP | PollFlags::HUP | PollFlags::ERR)
    })
}

/// What an exchange read of the answer.
pub(crate) enum Answer {
    /// The frame's body.
    Whole(Vec<u8>),
    /// The connection, with the frame's body of `size` bytes still to read.
    Open { stream: PeerStream, size: usize },
}

/// Room left in a request frame for everything but the entries or the snapshot bytes: the
/// frame header, the vote, the log ids, the snapshot meta (membership with endpoints).
const FRAME_OVERHEAD_BYTES: usize = 64 * 1024;

/// The largest request frame each peer accepts (its `socket.request.max.bytes`), so that every
/// AppendEntries and snapshot chunk sent to it fits and a lagging peer can always catch up.
/// A peer announces its limit in its join; until then (a voter that joined an earlier leader)
/// this node's own limit stands in, as clusters usually share one configuration.
#[derive(Debug)]
pub(crate) struct PeerLimits {
    own: usize,
    announced: std::sync::Mutex<std::collections::HashMap<u64, usize>>,
}

impl PeerLimits {
    pub(crate) fn new(own: usize) -> Self {
        PeerLimits {
            own,
            announced: std::sync::Mutex::default(),
        }
    }

    /// Records the limit `peer` announced.
    pub(crate) fn learn(&self, peer: u64, max_request_bytes: i32) {
        let Ok(bytes) = usize::try_from(max_request_bytes) else {
            return;
        };
        if let Ok(mut announced) = self.announced.lock() {
            announced.insert(peer, bytes);
        }
    }

    /// Bytes of entries or snapshot data one request to `peer` may carry (at least 1, so a
    /// snapshot always makes progress).
    pub(crate) fn payload_budget(&self, peer: u64) -> usize {
        let limit = self
            .announced
            .lock()
            .ok()
            .and_then(|announced| announced.get(&peer).copied())
            .unwrap_or(self.own);
        payload_budget(limit)
    }
}

/// Payload bytes that fit in a request frame of at most `max_request_bytes`.
pub(crate) fn payload_budget(max_request_bytes: usize) -> usize {
    if max_request_bytes > 2 * FRAME_OVERHEAD_BYTES {
        max_request_bytes - FRAME_OVERHEAD_BYTES
    } else {
        (max_request_bytes / 2).max(1)
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

    /// Whether `sender`'s link is still the link of `node_id` (no newer one replaced it).
    pub(crate) fn is_current(&self, node_id: u64, sender: &mpsc::Sender<LinkCall>) -> bool {
        self.links
            .lock()
            .is_ok_and(|links| links.get(&node_id).is_some_and(|s| s.same_channel(sender)))
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
    /// What each peer accepts.
    pub(crate) limits: Arc<PeerLimits>,
    /// This node's hello.
    pub(crate) hello: PeerHello,
    /// How connections to controller listeners are secured.
    pub(crate) connector: Arc<PeerConnector>,
    /// Links opened by learners without a controller listener.
    pub(crate) links: Arc<RaftLinks>,
}

/// How openraft reaches one peer.
#[derive(Clone)]
enum Route {
    /// The peer's controller listener (locked by the one call on it at a time, which may
    /// outlive the openraft call that started it: see [`SentAppend`]).
    Direct(Arc<tokio::sync::Mutex<Channel>>),
    /// The raft link the peer (a broker without a controller listener) opened to this node.
    Link(Arc<RaftLinks>),
}

/// openraft's connection to one peer.
pub(crate) struct PeerClient {
    target: u64,
    /// Where the peer is reached, for errors.
    addr: String,
    route: Route,
    next_correlation: i32,
    state: Arc<std::sync::OnceLock<Arc<QuorumState>>>,
    limits: Arc<PeerLimits>,
    /// Entry bytes the next AppendEntries may carry (see [`REPLICATION_BATCH_BYTES`]).
    batch_bytes: usize,
    /// The last AppendEntries sent whose answer has not been read yet.
    outstanding: Option<SentAppend>,
    /// The furthest entry the peer confirmed holding under a vote: what it confirmed after
    /// openraft gave up on a request still answers openraft's next requests.
    acked: Option<(Vote<u64>, LogId<u64>)>,
}

/// An AppendEntries on its way. openraft gives each one a heartbeat interval (100 ms) and then
/// sends the same range again, but the peer appends what it was sent whatever the leader
/// decided: on a loaded machine a batch that takes a little longer would be sent, appended
/// and abandoned forever. So the call runs in its own task for up to [`LATE_ANSWER_WAIT`], and
/// the next call waits for its answer instead of sending behind it.
struct SentAppend {
    vote: Vote<u64>,
    prev: Option<LogId<u64>>,
    /// The last entry sent (`prev` for a heartbeat).
    last: Option<LogId<u64>>,
    /// The leader's commit index it carried.
    committed: Option<u64>,
    answer: tokio::task::JoinHandle<Result<QuorumResponse, CallError>>,
}

/// How long an AppendEntries may wait for its answer once openraft has given up on it.
const LATE_ANSWER_WAIT: Duration = Duration::from_secs(10);

/// Most entry bytes one AppendEntries carries when it holds more than one entry (the
/// controller's submitter keeps one entry under this size). A batch openraft gave up on still
/// counts once answered (see [`SentAppend`]), so a slow peer is best served by large batches;
/// each peer's batch halves only when a send fails and grows back by a quarter after each
/// success.
const REPLICATION_BATCH_BYTES: usize = 1024 * 1024;
/// The smallest batch the halving goes down to (one entry is always sent, whatever its size).
const MIN_REPLICATION_BATCH_BYTES: usize = 16 * 1024;

/// How many of the leading `entries` to send: as many as fit in `soft` bytes, and at least the
/// first if it fits in `hard` bytes (what the peer accepts). Zero when the first is larger.
fn entries_within<T: serde::Serialize>(entries: &[T], soft: usize, hard: usize) -> usize {
    let mut used = 0_usize;
    for (count, entry) in entries.iter().enumerate() {
        used = used
            .saturating_add(postcard::experimental::serialized_size(entry).unwrap_or(usize::MAX));
        let budget = if count == 0 { hard } else { soft.min(hard) };
        if used > budget {
            return count;
        }
    }
    entries.len()
}

impl RaftNetworkFactory<TypeConfig> for QuorumNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: u64, node: &VoterNode) -> PeerClient {
        // The first endpoint is the controller listener; a node without one (a broker) is
        // reached over the raft link it opens.
        let (addr, route) = match node.endpoints.first() {
            Some(endpoint) => {
                let addr = address_of(endpoint);
                let channel = Channel::new(addr.clone(), &self.hello, self.connector.clone());
                (
                    addr,
                    Route::Direct(Arc::new(tokio::sync::Mutex::new(channel))),
                )
            }
            None => (
                format!("raft link of node {target}"),
                Route::Link(self.links.clone()),
            ),
        };
        PeerClient {
            target,
            addr,
            route,
            next_correlation: 0,
            state: self.state.clone(),
            limits: self.limits.clone(),
            batch_bytes: REPLICATION_BATCH_BYTES,
            outstanding: None,
            acked: None,
        }
    }
}

impl Drop for PeerClient {
    /// A replication stream that ends (leadership or membership moved on) stops waiting for
    /// its last answer.
    fn drop(&mut self) {
        if let Some(sent) = &self.outstanding {
            sent.answer.abort();
        }
    }
}

impl PeerClient {
    fn addr(&self) -> String {
        self.addr.clone()
    }

    /// The call of `request`, owning all it needs so it can run in a task of its own.
    fn start_call(
        &mut self,
        request: QuorumRequest,
        timeout: Duration,
    ) -> impl std::future::Future<Output = Result<QuorumResponse, CallError>> + Send + 'static {
        self.next_correlation = self.next_correlation.wrapping_add(1);
        let correlation = self.next_correlation;
        let route = self.route.clone();
        let target = self.target;
        let addr = self.addr();
        async move {
            let links = match route {
                Route::Direct(channel) => {
                    return channel.lock().await.call(&request, timeout).await
                }
                Route::Link(links) => links,
            };
            let io = |reason: String| CallError::Io {
                addr: addr.clone(),
                reason,
            };
            let frame = rpc::encode_request(correlation, &request).map_err(io)?;
            let answer = links.round_trip(target, frame, timeout).await?;
            let (got, response) = rpc::decode_response(&answer).map_err(io)?;
            if got != correlation {
                return Err(io(format!(
                    "response for correlation id {got}, expected {correlation}"
                )));
            }
            Ok(response)
        }
    }

    /// openraft's error for an answer not in within `ttl`.
    fn timed_out<E: std::error::Error>(&self, ttl: Duration) -> RPCError<u64, VoterNode, E> {
        RPCError::Network(NetworkError::new(&CallError::TimedOut {
            addr: self.addr(),
            after: ttl,
        }))
    }

    fn rpc_error<E: std::error::Error>(error: CallError) -> RPCError<u64, VoterNode, E> {
        match error {
            e @ CallError::Connect { .. } => RPCError::Unreachable(Unreachable::new(&e)),
            e => RPCError::Network(NetworkError::new(&e)),
        }
    }

    /// Waits up to `ttl` for the outstanding AppendEntries' answer; `None` if it is not in
    /// yet (it stays outstanding) or nothing is outstanding.
    async fn take_answer(
        &mut self,
        ttl: Duration,
    ) -> Option<(SentAppend, Result<QuorumResponse, CallError>)> {
        let sent = self.outstanding.as_mut()?;
        let joined = tokio::time::timeout(ttl, &mut sent.answer).await.ok()?;
        let sent = self.outstanding.take()?;
        let answer = joined.unwrap_or_else(|e| {
            Err(CallError::Io {
                addr: self.addr(),
                reason: format!("the AppendEntries task ended: {e}"),
            })
        });
        Some((sent, answer))
    }

    /// What the peer answered to `sent`, with what it confirmed recorded (progress, the batch
    /// size, [`PeerClient::acked`]).
    // The error is openraft's own, as `append_entries` returns it.
    #[allow(clippy::result_large_err)]
    fn absorb(
        &mut self,
        sent: &SentAppend,
        answer: Result<QuorumResponse, CallError>,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, VoterNode, RaftError<u64>>> {
        let response = match answer {
            Ok(QuorumResponse::AppendEntries(Ok(response))) => response,
            Ok(QuorumResponse::AppendEntries(Err(e))) => {
                return Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            Ok(_) => return Err(self.unexpected()),
            Err(e) => {
                self.batch_bytes = (self.batch_bytes / 2).max(MIN_REPLICATION_BATCH_BYTES);
                return Err(Self::rpc_error(e));
            }
        };
        if matches!(response, AppendEntriesResponse::Success) {
            self.batch_bytes =
                (self.batch_bytes + self.batch_bytes / 4).min(REPLICATION_BATCH_BYTES);
            if let Some(state) = self.state.get() {
                state.record_replicated(self.target, sent.last.map(|l| l.index), sent.committed);
            }
            if let Some(last) = sent.last {
                let further = match &self.acked {
                    Some((vote, acked)) => *vote != sent.vote || last.index > acked.index,
                    None => true,
                };
                if further {
                    self.acked = Some((sent.vote, last));
                }
            }
        }
        Ok(response)
    }

    async fn send<E: std::error::Error>(
        &mut self,
        request: QuorumRequest,
        option: &RPCOption,
    ) -> Result<QuorumResponse, RPCError<u64, VoterNode, E>> {
        self.start_call(request, option.hard_ttl())
            .await
            .map_err(Self::rpc_error)
    }

    fn unexpected<E: std::error::Error>(&self) -> RPCError<u64, VoterNode, E> {
        let e = CallError::Io {
            addr: self.addr(),
            reason: "answered with a response of another kind".into(),
        };
        RPCError::Network(NetworkError::new(&e))
    }
}

/// The answer to `rpc` a peer already gave by confirming `acked`: the leading entries it holds
/// under the same vote (a leader's log up to what a peer confirmed never changes within a
/// vote). Heartbeats are always sent: they carry the commit index.
fn answered_by(
    acked: Option<&(Vote<u64>, LogId<u64>)>,
    rpc: &AppendEntriesRequest<TypeConfig>,
) -> Option<AppendEntriesResponse<u64>> {
    let (vote, acked) = acked?;
    let last = rpc.entries.last()?.log_id;
    if *vote != rpc.vote || rpc.prev_log_id.is_some_and(|p| p.index >= acked.index) {
        return None;
    }
    if last.index <= acked.index {
        return Some(AppendEntriesResponse::Success);
    }
    let confirmed = rpc.entries.iter().find(|e| e.log_id.index == acked.index)?;
    Some(AppendEntriesResponse::PartialSuccess(Some(
        confirmed.log_id,
    )))
}

/// `rpc` as chunks of at most `budget` data bytes each, in order; only the last keeps `done`.
fn split_chunk(
    rpc: InstallSnapshotRequest<TypeConfig>,
    budget: usize,
) -> Vec<InstallSnapshotRequest<TypeConfig>> {
    if rpc.data.len() <= budget {
        return vec![rpc];
    }
    let pieces = rpc.data.chunks(budget.max(1)).count();
    rpc.data
        .chunks(budget.max(1))
        .enumerate()
        .map(|(i, data)| InstallSnapshotRequest {
            vote: rpc.vote,
            meta: rpc.meta.clone(),
            offset: rpc.offset + (i * budget.max(1)) as u64,
            data: data.to_vec(),
            done: rpc.done && i + 1 == pieces,
        })
        .collect()
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
        mut rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, VoterNode, RaftError<u64>>> {
        let ttl = option.hard_ttl();
        if self.outstanding.is_some() {
            let Some((earlier, answer)) = self.take_answer(ttl).await else {
                return Err(self.timed_out(ttl));
            };
            match self.absorb(&earlier, answer) {
                Ok(AppendEntriesResponse::HigherVote(vote)) if vote > rpc.vote => {
                    return Ok(AppendEntriesResponse::HigherVote(vote))
                }
                Ok(AppendEntriesResponse::Conflict)
                    if earlier.vote == rpc.vote && earlier.prev == rpc.prev_log_id =>
                {
                    return Ok(AppendEntriesResponse::Conflict)
                }
                _ => {}
            }
        }
        if let Some(answered) = answered_by(self.acked.as_ref(), &rpc) {
            return Ok(answered);
        }
        // openraft bounds a request by entry count; an entry can hold a large group commit, so
        // send only the leading entries that fit what the peer accepts and tell openraft how
        // far this got (PartialSuccess): it sends the rest next.
        let hard = self.limits.payload_budget(self.target);
        let fitting = entries_within(&rpc.entries, self.batch_bytes, hard);
        let trimmed = fitting < rpc.entries.len();
        if trimmed {
            if fitting == 0 {
                let e = CallError::Io {
                    addr: self.addr(),
                    reason: format!(
                        "log entry {} alone is larger than the {} bytes node {} accepts \
                         (socket.request.max.bytes); raise it on that node",
                        rpc.entries[0].log_id, hard, self.target
                    ),
                };
                tracing::warn!(error = %e, "cannot replicate");
                return Err(RPCError::Unreachable(Unreachable::new(&e)));
            }
            tracing::debug!(
                target = self.target,
                sent = fitting,
                batch_bytes = self.batch_bytes,
                "AppendEntries trimmed to the peer's budget"
            );
            // Freeing the entries not sent (up to `max_payload_entries` large batches) takes
            // a while; not inside the heartbeat-long deadline of this request.
            let unsent = rpc.entries.split_off(fitting);
            tokio::task::spawn_blocking(move || drop(unsent));
        }
        let (vote, prev) = (rpc.vote, rpc.prev_log_id);
        let last = rpc.entries.last().map(|e| e.log_id).or(prev);
        let committed = rpc.leader_commit.map(|l| l.index);
        let call = self.start_call(QuorumRequest::AppendEntries(rpc), LATE_ANSWER_WAIT);
        self.outstanding = Some(SentAppend {
            vote,
            prev,
            last,
            committed,
            answer: tokio::spawn(call),
        });
        let Some((sent, answer)) = self.take_answer(ttl).await else {
            // Our own deadline (the same heartbeat interval) may fire before openraft's.
            return Err(self.timed_out(ttl));
        };
        match self.absorb(&sent, answer)? {
            AppendEntriesResponse::Success if trimmed => {
                Ok(AppendEntriesResponse::PartialSuccess(sent.last))
            }
            response => Ok(response),
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
        // openraft cuts chunks of `snapshot_max_chunk_size` (this node's limit); a peer that
        // accepts less gets each chunk as several smaller ones, at their own offsets.
        let budget = self.limits.payload_budget(self.target);
        let mut pieces = split_chunk(rpc, budget).into_iter().peekable();
        while let Some(piece) = pieces.next() {
            let vote = piece.vote;
            let response = match self
                .send(QuorumRequest::InstallSnapshot(piece), &option)
                .await?
            {
                QuorumResponse::InstallSnapshot(Ok(response)) => response,
                QuorumResponse::InstallSnapshot(Err(e)) => {
                    return Err(RPCError::RemoteError(RemoteError::new(self.target, e)))
                }
                _ => return Err(self.unexpected()),
            };
            if pieces.peek().is_none() || response.vote != vote {
                return Ok(response);
            }
        }
        Err(self.unexpected())
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use openraft::{CommittedLeaderId, EntryPayload, SnapshotMeta};

    use super::*;

    fn log_id(index: u64) -> LogId<u64> {
        LogId::new(CommittedLeaderId::new(3, 1), index)
    }

    /// An AppendEntries of leader 1 in term 3 after `prev`, with entries `first..=last`.
    fn append(
        prev: Option<u64>,
        entries: std::ops::RangeInclusive<u64>,
    ) -> AppendEntriesRequest<TypeConfig> {
        AppendEntriesRequest {
            vote: Vote::new_committed(3, 1),
            prev_log_id: prev.map(log_id),
            leader_commit: None,
            entries: entries
                .map(|i| openraft::Entry {
                    log_id: log_id(i),
                    payload: EntryPayload::Blank,
                })
                .collect(),
        }
    }

    #[test]
    fn a_confirmed_prefix_answers_the_requests_it_covers() {
        let acked = (Vote::new_committed(3, 1), log_id(10));
        let answer = |rpc| answered_by(Some(&acked), &rpc);
        assert_eq!(
            answer(append(Some(5), 6..=9)),
            Some(AppendEntriesResponse::Success)
        );
        assert_eq!(
            answer(append(Some(5), 6..=10)),
            Some(AppendEntriesResponse::Success)
        );
        assert_eq!(
            answer(append(Some(5), 6..=20)),
            Some(AppendEntriesResponse::PartialSuccess(Some(log_id(10))))
        );
        assert_eq!(
            answer(append(None, 1..=20)),
            Some(AppendEntriesResponse::PartialSuccess(Some(log_id(10))))
        );
        // Nothing new confirmed, a heartbeat, another vote: sent to the peer.
        assert_eq!(answer(append(Some(10), 11..=20)), None);
        let mut heartbeat = append(Some(5), 6..=6);
        heartbeat.entries.clear();
        assert_eq!(answer(heartbeat), None);
        let mut other_term = append(Some(5), 6..=9);
        other_term.vote = Vote::new_committed(4, 1);
        assert_eq!(answer(other_term), None);
        assert_eq!(answered_by(None, &append(Some(5), 6..=9)), None);
    }

    /// openraft gives an AppendEntries one heartbeat interval and then sends the same range
    /// again: a learner that takes longer is sent the batch once, and the answer it gives late
    /// answers openraft's next call.
    #[tokio::test]
    async fn an_answer_after_openraft_gave_up_counts_and_the_batch_is_not_sent_twice(
    ) -> Result<(), String> {
        let links = Arc::new(RaftLinks::default());
        let (sender, mut calls) = mpsc::channel::<LinkCall>(4);
        links.insert(12, sender);
        let received = Arc::new(AtomicUsize::new(0));
        let counted = received.clone();
        tokio::spawn(async move {
            while let Some(call) = calls.recv().await {
                counted.fetch_add(1, Ordering::SeqCst);
                let Ok((correlation, _)) = rpc::decode_request(&call.frame[4..]) else {
                    return;
                };
                tokio::time::sleep(Duration::from_millis(250)).await;
                let answer = QuorumResponse::AppendEntries(Ok(AppendEntriesResponse::Success));
                let Ok(frame) = rpc::encode_response(correlation, &answer) else {
                    return;
                };
                let _ = call.reply.send(Ok(frame[4..].to_vec()));
            }
        });
        let mut client = PeerClient {
            target: 12,
            addr: "raft link of node 12".into(),
            route: Route::Link(links),
            next_correlation: 0,
            state: Arc::new(std::sync::OnceLock::new()),
            limits: Arc::new(PeerLimits::new(1 << 20)),
            batch_bytes: REPLICATION_BATCH_BYTES,
            outstanding: None,
            acked: None,
        };
        let heartbeat = Duration::from_millis(100);
        let mut answers = Vec::new();
        for _ in 0..6 {
            let call = client.append_entries(append(Some(4), 5..=8), RPCOption::new(heartbeat));
            match tokio::time::timeout(heartbeat, call).await {
                Ok(Ok(answer)) => {
                    answers.push(answer);
                    break;
                }
                Ok(Err(_)) | Err(_) => continue,
            }
        }
        assert_eq!(answers, vec![AppendEntriesResponse::Success]);
        assert_eq!(received.load(Ordering::SeqCst), 1);
        // The next range starts from what was confirmed.
        let next = client.append_entries(
            append(Some(8), 9..=9),
            RPCOption::new(Duration::from_secs(1)),
        );
        assert_eq!(
            next.await.map_err(|e| e.to_string())?,
            AppendEntriesResponse::Success
        );
        assert_eq!(received.load(Ordering::SeqCst), 2);
        Ok(())
    }

    #[test]
    fn entries_fill_the_soft_budget_but_one_may_use_the_hard_one() {
        // postcard encodes a Vec<u8> of n < 128 bytes in n + 1 bytes.
        let entries = vec![vec![0_u8; 99], vec![1; 99], vec![2; 99]];
        assert_eq!(entries_within(&entries, 1000, 1000), 3);
        assert_eq!(entries_within(&entries, 200, 1000), 2);
        assert_eq!(entries_within(&entries, 199, 1000), 1);
        // The first entry alone may exceed the soft budget, never the hard one.
        assert_eq!(entries_within(&entries, 10, 1000), 1);
        assert_eq!(entries_within(&entries, 10, 99), 0);
        assert_eq!(entries_within::<Vec<u8>>(&[], 10, 10), 0);
    }

    #[test]
    fn budgets_leave_room_for_the_frame() {
        assert_eq!(payload_budget(104_857_600), 104_857_600 - 65_536);
        assert_eq!(payload_budget(1000), 500);
        assert_eq!(payload_budget(1), 1);
        let limits = PeerLimits::new(1 << 20);
        assert_eq!(limits.payload_budget(7), (1 << 20) - 65_536);
        limits.learn(7, 200_000);
        assert_eq!(limits.payload_budget(7), 200_000 - 65_536);
        limits.learn(7, -1);
        assert_eq!(limits.payload_budget(7), 200_000 - 65_536);
    }

    #[test]
    fn a_chunk_too_large_for_the_peer_is_split_at_its_offsets() {
        let chunk = |offset: u64, data: Vec<u8>, done: bool| InstallSnapshotRequest::<TypeConfig> {
            vote: Vote::new(3, 1),
            meta: SnapshotMeta::default(),
            offset,
            data,
            done,
        };
        let data: Vec<u8> = (0..10).collect();
        let pieces = split_chunk(chunk(100, data.clone(), true), 4);
        let shape: Vec<_> = pieces
            .iter()
            .map(|p| (p.offset, p.data.clone(), p.done))
            .collect();
        assert_eq!(
            shape,
            vec![
                (100, vec![0, 1, 2, 3], false),
                (104, vec![4, 5, 6, 7], false),
                (108, vec![8, 9], true),
            ]
        );
        let not_last = split_chunk(chunk(0, data.clone(), false), 5);
        assert!(not_last.iter().all(|p| !p.done));
        assert_eq!(split_chunk(chunk(0, data, true), 10).len(), 1);
    }

    /// What the fake controller of [`fake_peer`] does once it answered a connection's first
    /// request.
    #[derive(Clone, Copy)]
    enum AfterAnswer {
        /// Closes the connection (a controller that restarts).
        Close,
        /// Keeps it open and reads nothing more.
        Hold,
    }

    /// A controller listener that accepts hellos and reports each request frame it reads as
    /// (connection number, body). With `answer` false it closes a connection on its first
    /// request instead of answering.
    async fn fake_peer(
        answer: bool,
        after: AfterAnswer,
    ) -> Result<(String, mpsc::UnboundedReceiver<(usize, Vec<u8>)>), String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let addr = listener
            .local_addr()
            .map_err(|e| e.to_string())?
            .to_string();
        let (report, received) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut held = Vec::new();
            for connection in 1.. {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let Ok(hello) = read_peer_frame(&mut socket).await else {
                    continue;
                };
                let Ok((correlation, _)) = rpc::decode_request(&hello) else {
                    continue;
                };
                let accepted = QuorumResponse::Hello(HelloResponse::Accepted {
                    node_id: 1,
                    known: true,
                });
                let Ok(frame) = rpc::encode_response(correlation, &accepted) else {
                    continue;
                };
                if socket.write_all(&frame).await.is_err() {
                    continue;
                }
                let Ok(request) = read_peer_frame(&mut socket).await else {
                    continue;
                };
                let _ = report.send((connection, request));
                if answer {
                    let _ = socket.write_all(&[0, 0, 0, 2, b'o', b'k']).await;
                    if let AfterAnswer::Hold = after {
                        held.push(socket);
                    }
                }
            }
        });
        Ok((addr, received))
    }

    fn channel_to(addr: &str) -> Channel {
        let hello = PeerHello {
            cluster_id: "c".into(),
            node_id: 2,
            directory_id: uuid::Uuid::from_u128(2),
            raft_link: false,
        };
        Channel::new(addr.to_owned(), &hello, PeerConnector::plaintext())
    }

    fn request(body: &[u8]) -> Vec<u8> {
        let mut frame = (body.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(body);
        frame
    }

    const WAIT: Duration = Duration::from_secs(5);

    /// A pooled connection whose controller restarted is not written to: the request goes on
    /// a new connection, once. Before, the write went to the dead socket and the exchange
    /// failed.
    #[tokio::test]
    async fn an_idle_connection_the_peer_closed_is_replaced_before_sending() -> Result<(), String> {
        let (addr, mut received) = fake_peer(true, AfterAnswer::Close).await?;
        let mut channel = channel_to(&addr);
        let first = channel.exchange(&[&request(b"first")], WAIT, 64).await;
        assert!(matches!(first, Ok(Answer::Whole(ref body)) if body == b"ok"));
        assert_eq!(received.recv().await, Some((1, b"first".to_vec())));
        // The controller's FIN is in once the kernel reports it.
        let closed = async {
            while !channel.stream.as_ref().is_some_and(peer_closed) {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(WAIT, closed)
            .await
            .map_err(|_| "the peer's close never showed".to_string())?;
        let second = channel.exchange(&[&request(b"second")], WAIT, 64).await;
        assert!(matches!(second, Ok(Answer::Whole(ref body)) if body == b"ok"));
        assert_eq!(received.recv().await, Some((2, b"second".to_vec())));
        assert!(received.try_recv().is_err());
        Ok(())
    }

    /// A request whose write fails is `Unsent` (the forwarding path sends it again); one
    /// written whole whose answer never comes is not.
    #[tokio::test]
    async fn only_a_request_not_written_whole_is_unsent() -> Result<(), String> {
        let (addr, mut received) = fake_peer(true, AfterAnswer::Hold).await?;
        let mut channel = channel_to(&addr);
        let first = channel.exchange(&[&request(b"first")], WAIT, 64).await;
        assert!(matches!(first, Ok(Answer::Whole(_))));
        // This side's writing half shut: the next write fails (EPIPE) before any byte leaves.
        if let Some(stream) = channel.stream.as_mut() {
            stream.shutdown().await.map_err(|e| e.to_string())?;
        }
        let second = channel.exchange(&[&request(b"x"), b"y"], WAIT, 64).await;
        assert!(
            matches!(second, Err(CallError::Unsent { .. })),
            "{:?}",
            second.err()
        );
        assert_eq!(received.recv().await, Some((1, b"first".to_vec())));

        let (addr, mut received) = fake_peer(false, AfterAnswer::Close).await?;
        let mut channel = channel_to(&addr);
        let lost = channel.exchange(&[&request(b"lost")], WAIT, 64).await;
        assert!(
            matches!(lost, Err(CallError::Io { .. })),
            "{:?}",
            lost.err()
        );
        assert_eq!(received.recv().await, Some((1, b"lost".to_vec())));
        Ok(())
    }
}
