//! The raft network over the controller listener: one TCP connection per peer, requests sent
//! one at a time (openraft serialises the calls of one replication stream), reconnecting after
//! any error. Also the plain request/response channel the join and forwarding paths use.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use gregor_actors::quorum::QuorumState;
use gregor_actors::raft::{TypeConfig, VoterNode};
use gregor_publishers::records::Endpoint;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::rpc::{self, QuorumRequest, QuorumResponse};

/// Largest response frame accepted from a peer (snapshot chunks and entry batches are far
/// smaller; a larger size means a corrupt stream).
const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

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
    /// A frame sent and answered first on every new connection (see
    /// [`Channel::forwarding`]).
    opening: Option<Bytes>,
}

impl Channel {
    pub(crate) fn new(addr: String) -> Self {
        Channel {
            addr,
            stream: None,
            next_correlation: 0,
            opening: None,
        }
    }

    /// A channel for forwarded client requests: each connection it opens first announces
    /// itself as one, so the controller leaves throttling its clients to this broker.
    pub(crate) fn forwarding(addr: String) -> Self {
        Channel {
            opening: Some(rpc::forwarding_channel_frame()),
            ..Channel::new(addr)
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
            let size = stream.read_i32().await?;
            let size = usize::try_from(size)
                .ok()
                .filter(|s| *s <= MAX_RESPONSE_BYTES)
                .ok_or_else(|| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("response frame size {size}"),
                    )
                })?;
            let mut body = vec![0; size];
            stream.read_exact(&mut body).await?;
            Ok::<_, std::io::Error>(body)
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

/// Builds a [`PeerClient`] per peer openraft replicates to or asks for votes.
#[derive(Clone)]
pub(crate) struct QuorumNetwork {
    /// Where replication progress is recorded (set once the state exists).
    pub(crate) state: Arc<std::sync::OnceLock<Arc<QuorumState>>>,
}

/// openraft's connection to one peer.
pub(crate) struct PeerClient {
    target: u64,
    channel: Channel,
    state: Arc<std::sync::OnceLock<Arc<QuorumState>>>,
}

impl RaftNetworkFactory<TypeConfig> for QuorumNetwork {
    type Network = PeerClient;

    async fn new_client(&mut self, target: u64, node: &VoterNode) -> PeerClient {
        // The first endpoint is the controller listener (or, for a broker, its first
        // advertised listener, which also accepts quorum RPCs).
        let addr = node
            .endpoints
            .first()
            .map(address_of)
            .unwrap_or_else(|| "unknown-endpoint:0".to_owned());
        PeerClient {
            target,
            channel: Channel::new(addr),
            state: self.state.clone(),
        }
    }
}

impl PeerClient {
    async fn send<E: std::error::Error>(
        &mut self,
        request: QuorumRequest,
        option: &RPCOption,
    ) -> Result<QuorumResponse, RPCError<u64, VoterNode, E>> {
        match self.channel.call(&request, option.hard_ttl()).await {
            Ok(response) => Ok(response),
            Err(e @ CallError::Connect { .. }) => Err(RPCError::Unreachable(Unreachable::new(&e))),
            Err(e) => Err(RPCError::Network(NetworkError::new(&e))),
        }
    }

    fn unexpected<E: std::error::Error>(&self) -> RPCError<u64, VoterNode, E> {
        let e = CallError::Io {
            addr: self.channel.addr().to_owned(),
            reason: "answered with a response of another kind".into(),
        };
        RPCError::Network(NetworkError::new(&e))
    }
}

impl RaftNetwork<TypeConfig> for PeerClient {
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
