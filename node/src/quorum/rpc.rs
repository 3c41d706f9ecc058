//! Gregor's private quorum RPCs in Kafka-style frames.
//!
//! ```text
//! request:  i32 size | i16 api_key | i16 api_version (0) | i32 correlation_id | postcard body
//! response: i32 size | i32 correlation_id | postcard body
//! ```
//!
//! The api keys are in a range Kafka does not use ([`FIRST_API_KEY`]..); the first four bytes
//! are laid out as a Kafka request header's, so the front end reads these frames with the same
//! size check and tells them apart by key before any Kafka decoding. Bodies are openraft's own
//! messages (serde) and Gregor's join request, encoded with postcard: compact, and both ends run
//! the same Gregor build within a cluster (a version mismatch fails to decode and closes the
//! connection, which the sender reports as unreachable).

use bytes::{BufMut, Bytes, BytesMut};
use gregor_actors::raft::{TypeConfig, VoterNode};
use gregor_publishers::records::Endpoint;
use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// First api key of Gregor's private range (Kafka's keys are below 100).
pub(crate) const FIRST_API_KEY: i16 = 32_000;
/// openraft AppendEntries (leader → follower or learner).
pub(crate) const APPEND_ENTRIES: i16 = FIRST_API_KEY;
/// openraft Vote (candidate → voter).
pub(crate) const VOTE: i16 = FIRST_API_KEY + 1;
/// openraft InstallSnapshot chunk (leader → lagging replica).
pub(crate) const INSTALL_SNAPSHOT: i16 = FIRST_API_KEY + 2;
/// Gregor Join: a node announces itself to the leader (registration, learner, heartbeat).
pub(crate) const JOIN: i16 = FIRST_API_KEY + 3;
/// Gregor Hello: the first frame of every connection that carries private RPCs, naming the
/// cluster and the node that opened it (see [`PeerHello`]).
pub(crate) const PEER_HELLO: i16 = FIRST_API_KEY + 5;
/// Gregor ImageDigest: the digest of the answering node's published image and its offset
/// (`gregor metadata-quorum describe --status`; DescribeQuorum stays Kafka's).
pub(crate) const IMAGE_DIGEST: i16 = FIRST_API_KEY + 6;
/// One past the last key of the range.
const END_API_KEY: i16 = FIRST_API_KEY + 16;

/// Whether a frame with this api key is a quorum RPC.
pub(crate) fn is_quorum_api_key(key: i16) -> bool {
    (FIRST_API_KEY..END_API_KEY).contains(&key)
}

/// Who opened a connection for private RPCs. The receiver serves nothing private before it,
/// and serves raft traffic and raft links only to a node it knows (see
/// `QuorumService::serve_private`). On an authenticated controller listener the connection's
/// principal must also be allowed CLUSTER_ACTION (checked before any private frame is decoded).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct PeerHello {
    /// The cluster id the node was formatted with.
    pub(crate) cluster_id: String,
    /// Its node id.
    pub(crate) node_id: i32,
    /// Directory id of its metadata log dir.
    pub(crate) directory_id: Uuid,
    /// True: the connection becomes this node's raft link (a broker without a controller
    /// listener asks the leader to send it AppendEntries and InstallSnapshot over it).
    pub(crate) raft_link: bool,
}

/// The answer to a [`PeerHello`].
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum HelloResponse {
    /// Accepted; `known` tells whether the node may send more than a Join.
    Accepted {
        /// The answering node's id.
        node_id: i32,
        /// Whether the answering node knows the sender (a member of its quorum or a registered
        /// controller); only a Join is served otherwise.
        known: bool,
    },
    /// Refused; the connection closes after this answer.
    Refused {
        /// For the operator.
        message: String,
    },
}

/// A node announcing itself to the leader: at start-up (to register and become a learner) and
/// then every `broker.heartbeat.interval.ms` while it is not a voter (Kafka's observers fetch; this is their heartbeat).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct JoinRequest {
    /// The cluster id the node was formatted with.
    pub(crate) cluster_id: String,
    /// Its node id.
    pub(crate) node_id: i32,
    /// The id of this run of the process; registrations are rewritten only when it changes.
    pub(crate) incarnation_id: Uuid,
    /// Where the leader reaches it with raft traffic, and its directory id.
    pub(crate) raft_node: VoterNode,
    /// Its controller registration, when it has the controller role.
    pub(crate) controller_endpoints: Option<Vec<Endpoint>>,
    /// Its broker registration, when it has the broker role.
    pub(crate) broker: Option<BrokerJoin>,
    /// Its `socket.request.max.bytes`: raft requests sent to it must fit.
    pub(crate) max_request_bytes: i32,
}

/// The broker part of a join.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct BrokerJoin {
    /// Advertised client endpoints.
    pub(crate) endpoints: Vec<Endpoint>,
    /// `broker.rack`.
    pub(crate) rack: Option<String>,
    /// Directory ids of `log.dirs`.
    pub(crate) log_dirs: Vec<Uuid>,
}

/// The leader's answer to a join.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum JoinResponse {
    /// Registered (if needed) and replicating to the node: once it has applied `read_index`
    /// its image holds everything committed before, its own registration included.
    Joined {
        /// The index to apply before serving.
        read_index: u64,
        /// The leader's node id and metadata directory id: a node without a membership yet
        /// accepts raft traffic from this identity only.
        leader: (u64, Uuid),
    },
    /// Ask `leader` instead (None: no leader known right now, retry).
    NotLeader {
        /// The leader's id and controller endpoints, if known.
        leader: Option<(u64, Vec<Endpoint>)>,
    },
    /// Refused for good; the message says why and what to do.
    Refused {
        /// For the operator.
        message: String,
    },
    /// Known as an observer but not replicated to yet; retry later (the message says why).
    Waiting {
        /// For the operator.
        reason: String,
    },
}

/// A quorum request body.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum QuorumRequest {
    /// See [`APPEND_ENTRIES`].
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    /// See [`VOTE`].
    Vote(VoteRequest<u64>),
    /// See [`INSTALL_SNAPSHOT`].
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
    /// See [`JOIN`].
    Join(JoinRequest),
    /// See [`PEER_HELLO`].
    Hello(PeerHello),
    /// See [`IMAGE_DIGEST`].
    ImageDigest,
}

impl QuorumRequest {
    pub(crate) fn api_key(&self) -> i16 {
        match self {
            QuorumRequest::AppendEntries(_) => APPEND_ENTRIES,
            QuorumRequest::Vote(_) => VOTE,
            QuorumRequest::InstallSnapshot(_) => INSTALL_SNAPSHOT,
            QuorumRequest::Join(_) => JOIN,
            QuorumRequest::Hello(_) => PEER_HELLO,
            QuorumRequest::ImageDigest => IMAGE_DIGEST,
        }
    }
}

/// The answer to one [`QuorumRequest`], of the matching variant.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum QuorumResponse {
    /// openraft's answer or error.
    AppendEntries(Result<AppendEntriesResponse<u64>, RaftError<u64>>),
    /// openraft's answer or error.
    Vote(Result<VoteResponse<u64>, RaftError<u64>>),
    /// openraft's answer or error.
    InstallSnapshot(Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>>),
    /// The join outcome.
    Join(JoinResponse),
    /// The hello outcome.
    Hello(HelloResponse),
    /// The answering node's image: its offset (last applied log index) and digest.
    ImageDigest {
        /// Raft log index of the last entry in the image.
        offset: u64,
        /// `gregor_publishers::ImageDigest` of the image.
        digest: u128,
    },
}

/// Encodes a request frame (size prefix included).
pub(crate) fn encode_request(
    correlation_id: i32,
    request: &QuorumRequest,
) -> Result<Bytes, String> {
    let body = postcard::to_allocvec(request).map_err(|e| format!("cannot encode: {e}"))?;
    let mut out = BytesMut::with_capacity(12 + body.len());
    let size = i32::try_from(8 + body.len()).map_err(|_| "request larger than 2 GiB")?;
    out.put_i32(size);
    out.put_i16(request.api_key());
    out.put_i16(0);
    out.put_i32(correlation_id);
    out.put_slice(&body);
    Ok(out.freeze())
}

/// Decodes a request frame body (after the size prefix): correlation id and request.
pub(crate) fn decode_request(frame: &[u8]) -> Result<(i32, QuorumRequest), String> {
    if frame.len() < 8 {
        return Err(format!("a {}-byte quorum frame has no header", frame.len()));
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let request: QuorumRequest =
        postcard::from_bytes(&frame[8..]).map_err(|e| format!("cannot decode key {key}: {e}"))?;
    if request.api_key() != key {
        return Err(format!(
            "api key {key} carries a {} body",
            request.api_key()
        ));
    }
    Ok((correlation_id, request))
}

/// Encodes a response frame (size prefix included).
pub(crate) fn encode_response(
    correlation_id: i32,
    response: &QuorumResponse,
) -> Result<Bytes, String> {
    let body = postcard::to_allocvec(response).map_err(|e| format!("cannot encode: {e}"))?;
    let mut out = BytesMut::with_capacity(8 + body.len());
    let size = i32::try_from(4 + body.len()).map_err(|_| "response larger than 2 GiB")?;
    out.put_i32(size);
    out.put_i32(correlation_id);
    out.put_slice(&body);
    Ok(out.freeze())
}

/// Decodes a response frame body (after the size prefix).
pub(crate) fn decode_response(frame: &[u8]) -> Result<(i32, QuorumResponse), String> {
    if frame.len() < 4 {
        return Err(format!("a {}-byte quorum response", frame.len()));
    }
    let correlation_id = i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
    let response = postcard::from_bytes(&frame[4..]).map_err(|e| format!("cannot decode: {e}"))?;
    Ok((correlation_id, response))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_round_trips_with_a_kafka_shaped_header() -> Result<(), String> {
        let request = QuorumRequest::Join(JoinRequest {
            cluster_id: "c".into(),
            node_id: 4,
            incarnation_id: Uuid::from_u128(7),
            raft_node: VoterNode::default(),
            controller_endpoints: None,
            broker: None,
            max_request_bytes: 1 << 20,
        });
        let frame = encode_request(99, &request)?;
        assert_eq!(
            i32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]) as usize,
            frame.len() - 4
        );
        assert_eq!(i16::from_be_bytes([frame[4], frame[5]]), JOIN);
        assert!(is_quorum_api_key(JOIN));
        assert!(!is_quorum_api_key(18));
        let (correlation, decoded) = decode_request(&frame[4..])?;
        assert_eq!(correlation, 99);
        assert!(matches!(decoded, QuorumRequest::Join(j) if j.node_id == 4));
        let response = encode_response(
            5,
            &QuorumResponse::Join(JoinResponse::Joined {
                read_index: 12,
                leader: (1, Uuid::from_u128(3)),
            }),
        )?;
        let (correlation, decoded) = decode_response(&response[4..])?;
        assert_eq!(correlation, 5);
        assert!(matches!(
            decoded,
            QuorumResponse::Join(JoinResponse::Joined { read_index: 12, .. })
        ));
        assert!(decode_request(&[0, 1, 2]).is_err());
        Ok(())
    }

    #[test]
    fn image_digest_round_trips_all_128_bits() -> Result<(), String> {
        let frame = encode_request(3, &QuorumRequest::ImageDigest)?;
        assert_eq!(i16::from_be_bytes([frame[4], frame[5]]), IMAGE_DIGEST);
        assert!(matches!(
            decode_request(&frame[4..])?,
            (3, QuorumRequest::ImageDigest)
        ));
        let digest = u128::MAX - 5;
        let response = encode_response(3, &QuorumResponse::ImageDigest { offset: 9, digest })?;
        assert!(matches!(
            decode_response(&response[4..])?,
            (3, QuorumResponse::ImageDigest { offset: 9, digest: d }) if d == digest
        ));
        Ok(())
    }

    #[test]
    fn hello_round_trips_and_a_key_must_match_its_body() -> Result<(), String> {
        let hello = QuorumRequest::Hello(PeerHello {
            cluster_id: "c".into(),
            node_id: 11,
            directory_id: Uuid::from_u128(5),
            raft_link: true,
        });
        let frame = encode_request(3, &hello)?;
        assert_eq!(i16::from_be_bytes([frame[4], frame[5]]), PEER_HELLO);
        let (_, decoded) = decode_request(&frame[4..])?;
        assert!(matches!(
            decoded,
            QuorumRequest::Hello(h) if h.node_id == 11 && h.raft_link && h.directory_id == Uuid::from_u128(5)
        ));
        // The same body under another key is refused (a frame cannot pass as another RPC).
        let mut relabelled = frame.to_vec();
        relabelled[4..6].copy_from_slice(&JOIN.to_be_bytes());
        assert!(decode_request(&relabelled[4..]).is_err());
        let answer = encode_response(
            3,
            &QuorumResponse::Hello(HelloResponse::Accepted {
                node_id: 1,
                known: false,
            }),
        )?;
        let (_, decoded) = decode_response(&answer[4..])?;
        assert!(matches!(
            decoded,
            QuorumResponse::Hello(HelloResponse::Accepted {
                node_id: 1,
                known: false
            })
        ));
        Ok(())
    }
}
