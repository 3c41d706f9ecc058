//! Frames of every private api key, for tests that check who may send them: the integration
//! tests send these to every listener (the bodies are Gregor's own postcard encoding, which
//! only this crate can build). Not used by the node itself.

use gregor_actors::raft::VoterNode;
use gregor_publishers::records::Endpoint;
use openraft::raft::{AppendEntriesRequest, InstallSnapshotRequest, VoteRequest};
use openraft::{SnapshotMeta, Vote};
use uuid::Uuid;

use super::rpc::{self, BrokerJoin, JoinRequest, PeerHello, QuorumRequest};

/// A term no real cluster in a test reaches: a node that accepted it would depose its leader.
const HOSTILE_TERM: u64 = 1_000_000;

/// One frame, size prefix included, and what it is.
pub struct PrivateFrame {
    /// What the frame is, for failure messages.
    pub name: &'static str,
    /// The bytes to write.
    pub bytes: Vec<u8>,
}

fn frame(name: &'static str, request: &QuorumRequest) -> PrivateFrame {
    PrivateFrame {
        name,
        bytes: rpc::encode_request(7, request)
            .map(|b| b.to_vec())
            .unwrap_or_default(),
    }
}

/// `User:<name>` as a broker's Envelope carries it.
pub fn envelope_principal(name: &str) -> Result<bytes::Bytes, String> {
    crate::network::envelope::encode_principal(&gregor_actors::context::Principal {
        principal_type: "User".into(),
        name: name.into(),
    })
}

/// A hello from `(node_id, directory_id)` claiming cluster `cluster_id`.
pub fn hello(cluster_id: &str, node_id: i32, directory_id: Uuid, raft_link: bool) -> Vec<u8> {
    frame(
        "hello",
        &QuorumRequest::Hello(PeerHello {
            cluster_id: cluster_id.to_owned(),
            node_id,
            directory_id,
            raft_link,
        }),
    )
    .bytes
}

/// A join of `node_id` as a broker with one endpoint and one log dir.
pub fn join(cluster_id: &str, node_id: i32, directory_id: Uuid) -> Vec<u8> {
    frame(
        "join",
        &QuorumRequest::Join(JoinRequest {
            cluster_id: cluster_id.to_owned(),
            node_id,
            incarnation_id: Uuid::new_v4(),
            raft_node: VoterNode {
                directory_id,
                endpoints: Vec::new(),
            },
            controller_endpoints: None,
            broker: Some(BrokerJoin {
                endpoints: vec![Endpoint {
                    name: "PLAINTEXT".into(),
                    host: "127.0.0.1".into(),
                    port: 1,
                    security_protocol: 0,
                }],
                rack: None,
                log_dirs: vec![directory_id],
            }),
            max_request_bytes: 104_857_600,
        }),
    )
    .bytes
}

/// Raft traffic from `leader_id` at a term far above the cluster's, a 20-byte AppendEntries
/// with a garbage body and an unassigned private key: what a hostile client sends to depose
/// the leader.
pub fn raft_and_markers(leader_id: u64) -> Vec<PrivateFrame> {
    let vote = Vote::new_committed(HOSTILE_TERM, leader_id);
    let mut frames = vec![
        frame(
            "append-entries",
            &QuorumRequest::AppendEntries(AppendEntriesRequest {
                vote,
                prev_log_id: None,
                entries: Vec::new(),
                leader_commit: None,
            }),
        ),
        frame(
            "vote",
            &QuorumRequest::Vote(VoteRequest::new(Vote::new(HOSTILE_TERM, leader_id), None)),
        ),
        frame(
            "install-snapshot",
            &QuorumRequest::InstallSnapshot(InstallSnapshotRequest {
                vote,
                meta: SnapshotMeta {
                    last_log_id: None,
                    last_membership: Default::default(),
                    snapshot_id: "hostile".into(),
                },
                offset: 0,
                data: Vec::new(),
                done: true,
            }),
        ),
    ];
    let mut short = Vec::with_capacity(20);
    short.extend_from_slice(&16_i32.to_be_bytes());
    short.extend_from_slice(&rpc::APPEND_ENTRIES.to_be_bytes());
    short.extend_from_slice(&0_i16.to_be_bytes());
    short.extend_from_slice(&1_i32.to_be_bytes());
    short.extend_from_slice(&[0x01, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x01, 0x01]);
    frames.push(PrivateFrame {
        name: "append-entries-20-bytes",
        bytes: short,
    });
    let mut unassigned = Vec::with_capacity(12);
    unassigned.extend_from_slice(&8_i32.to_be_bytes());
    unassigned.extend_from_slice(&(rpc::FIRST_API_KEY + 15).to_be_bytes());
    unassigned.extend_from_slice(&0_i16.to_be_bytes());
    unassigned.extend_from_slice(&1_i32.to_be_bytes());
    frames.push(PrivateFrame {
        name: "unassigned-private-key",
        bytes: unassigned,
    });
    frames
}
