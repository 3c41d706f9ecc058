//! The raft network: none yet. Gregor runs the metadata quorum with a single voter, so openraft
//! never has a peer to contact; should it try (a membership with other voters), every call fails
//! as unreachable with a message saying why. A later change carries openraft's messages over
//! the CONTROLLER listener and replaces this.

use openraft::error::{InstallSnapshotError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};

use super::types::{TypeConfig, VoterNode};

/// Builds [`NoPeers`] clients.
#[derive(Clone, Debug, Default)]
pub struct NoPeersNetwork;

/// A "connection" to a peer that always reports it unreachable.
#[derive(Debug)]
pub struct NoPeers {
    target: u64,
}

/// The error every peer call returns.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot reach controller {target}: no controller peers are configured; \
     multi-controller quorum is not enabled on this node"
)]
pub struct NoPeersError {
    target: u64,
}

impl NoPeers {
    fn unreachable<E: std::error::Error>(&self) -> RPCError<u64, VoterNode, E> {
        RPCError::Unreachable(Unreachable::new(&NoPeersError {
            target: self.target,
        }))
    }
}

impl RaftNetworkFactory<TypeConfig> for NoPeersNetwork {
    type Network = NoPeers;

    async fn new_client(&mut self, target: u64, _node: &VoterNode) -> Self::Network {
        NoPeers { target }
    }
}

impl RaftNetwork<TypeConfig> for NoPeers {
    async fn append_entries(
        &mut self,
        _rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, RPCError<u64, VoterNode, RaftError<u64>>> {
        Err(self.unreachable())
    }

    async fn install_snapshot(
        &mut self,
        _rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<u64>,
        RPCError<u64, VoterNode, RaftError<u64, InstallSnapshotError>>,
    > {
        Err(self.unreachable())
    }

    async fn vote(
        &mut self,
        _rpc: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, RPCError<u64, VoterNode, RaftError<u64>>> {
        Err(self.unreachable())
    }
}
