//! The metadata quorum across processes: the transport that carries openraft's messages over
//! the controller listener ([`transport`], [`rpc`]), the receiving side and forwarding
//! ([`service`]), and how a starting node joins the quorum ([`join_cluster`]).
//!
//! ```text
//!  leader ──AppendEntries/Vote/InstallSnapshot (keys 32000-32002)──▶ follower or learner
//!  starting node ──Join (32003): id, directory id, endpoints, registration──▶ leader
//!        ◀── Joined { read_index } │ NotLeader { leader endpoints } │ Refused { why }
//!  observer ──Join every second (heartbeat)──▶ leader
//!  broker listener: CreateTopics & co. ──same frame──▶ leader's controller listener
//! ```

pub(crate) mod rpc;
pub(crate) mod service;
pub(crate) mod transport;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gregor_actors::quorum::QuorumState;
use gregor_actors::raft::{MetadataLog, VoterNode};
use gregor_publishers::records::Endpoint;
use uuid::Uuid;

pub use service::QuorumService;

use crate::config::{NodeConfig, ProcessRole};
use crate::storage::{self, NodeIdentity};
use rpc::{BrokerJoin, JoinRequest, JoinResponse, QuorumRequest, QuorumResponse};
use transport::{address_of, Channel, QuorumNetwork};

/// How long one join attempt may wait for an answer.
const JOIN_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Observers announce themselves this often.
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);

/// The network openraft uses, and the cell the quorum state goes into once it exists (the
/// transport records replication progress there).
/// `max_request_bytes` is this node's `socket.request.max.bytes`, the stand-in for peers that
/// have not announced theirs (see [`transport::PeerLimits`]).
pub(crate) fn network(
    max_request_bytes: i32,
) -> (QuorumNetwork, Arc<std::sync::OnceLock<Arc<QuorumState>>>) {
    let cell = Arc::new(std::sync::OnceLock::new());
    let own = usize::try_from(max_request_bytes).unwrap_or(usize::MAX);
    (
        QuorumNetwork {
            state: cell.clone(),
            limits: Arc::new(transport::PeerLimits::new(own)),
        },
        cell,
    )
}

/// Initializes a brand-new log from what `storage format` recorded: this node alone
/// (`--standalone`, or a node that formatted itself) or the initial controllers.
pub(crate) async fn initialize(
    config: &NodeConfig,
    own: VoterNode,
    log: &MetadataLog,
    controller_listener: Option<&str>,
) -> Result<(), String> {
    if storage::is_standalone(config) {
        return log
            .initialize_single_voter(own)
            .await
            .map_err(|e| e.to_string());
    }
    let Some(initial) = storage::initial_controllers(config).map_err(|e| e.to_string())? else {
        return Ok(());
    };
    if !initial.iter().any(|c| c.id == config.node_id) {
        // A broker or a later controller formatted with the list: it joins as an observer.
        return Ok(());
    }
    let listener = controller_listener.unwrap_or("CONTROLLER").to_owned();
    let voters: BTreeMap<u64, VoterNode> = initial
        .iter()
        .map(|c| {
            (
                c.id as u64,
                VoterNode {
                    directory_id: c.directory_id,
                    endpoints: vec![Endpoint {
                        name: listener.clone(),
                        host: c.host.clone(),
                        port: c.port,
                        security_protocol: 0,
                    }],
                },
            )
        })
        .collect();
    log.initialize_voters(voters)
        .await
        .map_err(|e| e.to_string())
}

/// What this node tells the leader about itself.
pub(crate) fn join_request(
    config: &NodeConfig,
    identity: &NodeIdentity,
    raft_node: VoterNode,
    controller_endpoints: Vec<Endpoint>,
    broker_endpoints: Vec<Endpoint>,
) -> JoinRequest {
    JoinRequest {
        cluster_id: identity.cluster_id.clone(),
        node_id: config.node_id,
        incarnation_id: Uuid::new_v4(),
        raft_node,
        controller_endpoints: config
            .has_role(ProcessRole::Controller)
            .then_some(controller_endpoints),
        broker: config.has_role(ProcessRole::Broker).then(|| BrokerJoin {
            endpoints: broker_endpoints,
            rack: config.broker_rack.clone(),
            log_dirs: identity.log_dir_ids.clone(),
        }),
        max_request_bytes: config.socket_request_max_bytes,
    }
}

/// Joins the quorum: finds the leader (the local membership, then the bootstrap servers, then
/// wherever a non-leader points), registers through it, and waits until this node has applied
/// everything committed before its registration answer. Gives up at `deadline`.
pub(crate) async fn join_cluster(
    config: &NodeConfig,
    service: &QuorumService,
    join: &JoinRequest,
    deadline: Instant,
) -> Result<(), String> {
    let bootstrap = &config.controller_quorum_bootstrap_servers;
    let mut next_bootstrap = 0usize;
    let mut pointed: Option<String> = None;
    let mut last_error = String::from("no leader found yet");
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(format!(
                "could not join the metadata quorum in time (bootstrap servers {bootstrap:?}): {last_error}"
            ));
        }
        let own_id = config.node_id as u64;
        let local_leader = service.leader();
        let response = if local_leader.as_ref().is_some_and(|(id, _)| *id == own_id) {
            service.join(join.clone()).await
        } else {
            let addr = pointed
                .take()
                .or_else(|| {
                    local_leader
                        .as_ref()
                        .and_then(|(_, endpoints)| endpoints.first().map(address_of))
                })
                .or_else(|| {
                    let addr = bootstrap
                        .get(next_bootstrap % bootstrap.len().max(1))
                        .cloned();
                    next_bootstrap += 1;
                    addr
                });
            match addr {
                None => {
                    last_error = "no leader elected yet and no bootstrap servers".into();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                Some(addr) => {
                    let mut channel = Channel::new(addr.clone());
                    match channel
                        .call(
                            &QuorumRequest::Join(join.clone()),
                            JOIN_CALL_TIMEOUT.min(remaining),
                        )
                        .await
                    {
                        Ok(QuorumResponse::Join(response)) => response,
                        Ok(_) => {
                            last_error = format!("{addr} answered a join with another message");
                            JoinResponse::NotLeader { leader: None }
                        }
                        Err(e) => {
                            last_error = e.to_string();
                            JoinResponse::NotLeader { leader: None }
                        }
                    }
                }
            }
        };
        match response {
            JoinResponse::Joined { read_index } => {
                let remaining = deadline.saturating_duration_since(Instant::now());
                return service
                    .state
                    .log
                    .wait_applied(read_index, remaining)
                    .await
                    .map_err(|e| e.to_string());
            }
            JoinResponse::Refused { message } => return Err(message),
            JoinResponse::Waiting { reason } => {
                last_error = reason;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            JoinResponse::NotLeader { leader } => {
                if let Some((id, endpoints)) = leader {
                    if id != own_id {
                        pointed = endpoints.first().map(address_of);
                    }
                    last_error = format!("waiting for leader {id}");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// While this node leads, fences brokers not heard from within `broker.session.timeout.ms`
/// (observers by their heartbeats, voters by their last accepted AppendEntries) and moves the
/// leadership of their partitions (see [`gregor_actors::fencing`]). A broker that comes back
/// re-registers through its next heartbeat, which unfences it.
pub(crate) fn spawn_fencing(
    config: Arc<NodeConfig>,
    service: Arc<QuorumService>,
    image: Arc<arc_swap::ArcSwap<gregor_publishers::MetadataImage>>,
    controller: actix::Addr<gregor_actors::controller::Controller>,
) {
    let timeout = Duration::from_millis(config.broker_session_timeout_ms as u64);
    tokio::spawn(async move {
        // Brokers get a full session from the moment this node starts leading: a new leader
        // has heard from nobody yet.
        let mut leading_since: Option<Instant> = None;
        loop {
            tokio::time::sleep(HEARTBEAT_INTERVAL).await;
            if !service.state.is_leader() {
                leading_since = None;
                continue;
            }
            let since = *leading_since.get_or_insert_with(Instant::now);
            if since.elapsed() < timeout {
                continue;
            }
            let current = image.load_full();
            let voters = service.voter_ids();
            let now_ms = gregor_actors::quorum::now_ms();
            let stale: Vec<i32> = current
                .cluster
                .brokers()
                .filter(|b| !b.fenced && b.id != config.node_id)
                .filter(|b| {
                    if voters.contains(&(b.id as u64)) {
                        let fetched = service
                            .state
                            .progress(b.id as u64)
                            .map_or(-1, |p| p.last_fetch_ms);
                        fetched < 0 || now_ms - fetched > timeout.as_millis() as i64
                    } else {
                        service
                            .state
                            .last_seen(b.id)
                            .is_none_or(|seen| seen.elapsed() > timeout)
                    }
                })
                .map(|b| b.id)
                .collect();
            for id in stale {
                let records = gregor_actors::fencing::fence_broker(&image.load_full(), id);
                if records.is_empty() {
                    continue;
                }
                tracing::info!(
                    broker_id = id,
                    "fencing a broker not heard from within broker.session.timeout.ms"
                );
                match controller
                    .send(gregor_actors::controller::WriteRecords { records })
                    .await
                {
                    Ok(Ok(_)) => {}
                    Ok(Err(error)) => tracing::warn!(broker_id = id, %error, "cannot fence"),
                    Err(error) => tracing::warn!(broker_id = id, %error, "cannot fence"),
                }
            }
        }
    });
}

/// Keeps announcing this node to the leader while it is not a voter (observers' heartbeat),
/// so the leader knows which (id, directory id) pairs are alive.
pub(crate) fn spawn_heartbeats(
    config: Arc<NodeConfig>,
    service: Arc<QuorumService>,
    join: JoinRequest,
) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(HEARTBEAT_INTERVAL).await;
            if service.voter_ids().contains(&(config.node_id as u64)) {
                continue;
            }
            let deadline = Instant::now() + HEARTBEAT_INTERVAL * 3;
            if let Err(error) = join_cluster(&config, &service, &join, deadline).await {
                tracing::debug!(%error, "observer heartbeat failed");
            }
        }
    });
}
