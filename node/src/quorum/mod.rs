//! The metadata quorum across processes: the transport that carries openraft's messages over
//! the controller listener ([`transport`], [`rpc`]), the receiving side and forwarding
//! ([`service`]), and how a starting node joins the quorum ([`join_cluster`]).
//!
//! ```text
//!  leader ──AppendEntries/Vote/InstallSnapshot (keys 32000-32002)──▶ follower or learner
//!  starting node ──Join (32003): id, directory id, endpoints, registration──▶ leader
//!        ◀── Joined { read_index } │ NotLeader { leader endpoints } │ Refused { why }
//!  observer ──Join every broker.heartbeat.interval.ms (heartbeat)──▶ leader
//!  broker without a controller listener ──Hello { raft_link }──▶ leader's controller listener
//!        ◀── AppendEntries / InstallSnapshot down that same connection
//!  broker listener: CreateTopics & co. ──same frame──▶ leader's controller listener
//! ```
//!
//! Every connection for private RPCs opens with a Hello (32005: cluster id, node id, directory
//! id); they are served on controller listeners only (see [`service::QuorumService::serve_private`]).

pub(crate) mod rpc;
pub(crate) mod service;
#[doc(hidden)]
pub mod testing;
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
use rpc::{BrokerJoin, JoinRequest, JoinResponse, PeerHello, QuorumRequest, QuorumResponse};
use transport::{address_of, read_peer_frame, Channel, QuorumNetwork, RaftLinks};

use crate::network::peer::{PeerConnector, PeerStream};

/// How long one join attempt may wait for an answer.
const JOIN_CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// Observers announce themselves this often.
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(1);
/// A learner not heard from for this long leaves the membership: the leader stops replicating
/// to it (it joins back with its next heartbeat).
const SILENT_LEARNER_EXPIRY: Duration = gregor_actors::quorum::OBSERVER_EXPIRY;
/// A learner that is no longer registered (unregistered) leaves once silent for this long.
const UNREGISTERED_LEARNER_EXPIRY: Duration = Duration::from_secs(5);

/// A raft link with no frame from the leader for this long is reopened (the leader sends
/// heartbeats every 100 ms; silence means it stopped leading or the connection is dead).
const LINK_IDLE: Duration = Duration::from_secs(5);

/// The network openraft uses, the cell the quorum state goes into once it exists (the
/// transport records replication progress there), and the raft links learners open to this
/// node. `max_request_bytes` is this node's `socket.request.max.bytes`, the stand-in for peers
/// that have not announced theirs (see [`transport::PeerLimits`]).
pub(crate) fn network(
    hello: PeerHello,
    connector: Arc<PeerConnector>,
    max_request_bytes: i32,
) -> (
    QuorumNetwork,
    Arc<std::sync::OnceLock<Arc<QuorumState>>>,
    Arc<RaftLinks>,
) {
    let cell = Arc::new(std::sync::OnceLock::new());
    let links = Arc::new(RaftLinks::default());
    let own = usize::try_from(max_request_bytes).unwrap_or(usize::MAX);
    (
        QuorumNetwork {
            state: cell.clone(),
            limits: Arc::new(transport::PeerLimits::new(own)),
            hello,
            connector,
            links: links.clone(),
        },
        cell,
        links,
    )
}

/// How this node introduces itself on connections for private RPCs.
pub(crate) fn hello(config: &NodeConfig, identity: &NodeIdentity) -> PeerHello {
    PeerHello {
        cluster_id: identity.cluster_id.clone(),
        node_id: config.node_id,
        directory_id: identity.metadata_directory_id,
        raft_link: false,
    }
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

/// How often a node failing to reach its controllers while joining says so.
const JOIN_WARNING_INTERVAL: Duration = Duration::from_secs(5);

/// Joins the quorum: finds the leader (the local membership, then the bootstrap servers, then
/// wherever a non-leader points), registers through it, and waits until this node has applied
/// everything committed before its registration answer. Gives up at `deadline`.
pub(crate) async fn join_cluster(
    config: &NodeConfig,
    service: &QuorumService,
    join: &JoinRequest,
    deadline: Instant,
) -> Result<(), String> {
    let read_index = join_leader(config, service, join, deadline).await?;
    let remaining = deadline.saturating_duration_since(Instant::now());
    service
        .state
        .log
        .wait_applied(read_index, remaining)
        .await
        .map_err(|e| e.to_string())
}

/// Finds the leader and joins through it (see [`join_cluster`]); returns the read index of
/// its answer without waiting to apply it.
async fn join_leader(
    config: &NodeConfig,
    service: &QuorumService,
    join: &JoinRequest,
    deadline: Instant,
) -> Result<u64, String> {
    let bootstrap = &config.controller_quorum_bootstrap_servers;
    let mut next_bootstrap = 0usize;
    let mut pointed: Option<String> = None;
    // Addresses that failed or knew no leader during this call.
    let mut failed: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
    let mut last_error = String::from("no leader found yet");
    // A node that cannot reach its controllers says so (Kafka's NetworkClient warns on each
    // failed connection), at most every few seconds.
    let mut warned_at: Option<Instant> = None;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        if remaining.is_zero() {
            return Err(format!(
                "could not join the metadata quorum in time (bootstrap servers {bootstrap:?}): {last_error}"
            ));
        }
        let own_id = config.node_id as u64;
        let local_leader = service.leader();
        let mut answered_by = None;
        let response = if local_leader.as_ref().is_some_and(|(id, _)| *id == own_id) {
            service.join(join.clone()).await
        } else {
            let leader_addr = local_leader
                .as_ref()
                .and_then(|(_, endpoints)| endpoints.first().map(address_of));
            let addr = next_join_address(
                pointed.take(),
                leader_addr,
                bootstrap,
                &mut next_bootstrap,
                &failed,
                |addr| service.is_unresponsive(addr),
            );
            match addr {
                None if bootstrap.is_empty() && local_leader.is_none() => {
                    last_error = "no leader elected yet and no bootstrap servers".into();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                None => {
                    // Every address failed once in this call: start over after a pause.
                    failed.clear();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                Some(addr) => {
                    answered_by = Some(addr.clone());
                    let mut channel =
                        Channel::new(addr.clone(), &service.hello, service.connector.clone());
                    match channel
                        .call(
                            &QuorumRequest::Join(join.clone()),
                            join_call_timeout(remaining),
                        )
                        .await
                    {
                        Ok(QuorumResponse::Join(response)) => {
                            service.mark_responsive(&addr);
                            response
                        }
                        Ok(_) => {
                            last_error = format!("{addr} answered a join with another message");
                            JoinResponse::NotLeader { leader: None }
                        }
                        Err(e) => {
                            last_error = e.to_string();
                            if warned_at.is_none_or(|at| at.elapsed() >= JOIN_WARNING_INTERVAL) {
                                warned_at = Some(Instant::now());
                                tracing::warn!(
                                    controller = %addr,
                                    error = %last_error,
                                    "cannot reach a controller to join the metadata quorum; retrying (check controller.quorum.bootstrap.servers and that the controllers run)"
                                );
                            }
                            service.mark_unresponsive(&addr);
                            failed.insert(addr);
                            JoinResponse::NotLeader { leader: None }
                        }
                    }
                }
            }
        };
        match response {
            JoinResponse::Joined { read_index, leader } => {
                service.admitted(leader, answered_by);
                return Ok(read_index);
            }
            JoinResponse::Refused { message } => return Err(message),
            JoinResponse::Waiting { reason } => {
                last_error = reason;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            JoinResponse::NotLeader { leader } => {
                match leader {
                    Some((id, endpoints)) => {
                        if id != own_id {
                            pointed = endpoints.first().map(address_of);
                        }
                        last_error = format!("waiting for leader {id}");
                    }
                    // It knows no leader (it may have just stopped leading): ask elsewhere.
                    None => failed.extend(answered_by),
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Where the next join call of an attempt goes: where a non-leader pointed, else the leader
/// this node knows, else the next bootstrap server, skipping the addresses that failed in this
/// attempt and, while others remain, those that failed recently (`unresponsive`). A leader cut
/// off from the network keeps its sockets and swallows calls until they time out; after an
/// election every node still names it as the leader until the new one reaches it, so without
/// the memory each attempt would spend its first call, and half its time, on it again.
/// `None` when every address failed in this attempt.
fn next_join_address(
    pointed: Option<String>,
    known_leader: Option<String>,
    bootstrap: &[String],
    next_bootstrap: &mut usize,
    failed: &std::collections::BTreeSet<String>,
    unresponsive: impl Fn(&str) -> bool,
) -> Option<String> {
    if pointed.is_some() {
        return pointed;
    }
    let untried = |addr: &String| !failed.contains(addr);
    let mut candidates: Vec<String> = known_leader.into_iter().collect();
    for step in 0..bootstrap.len() {
        let addr = &bootstrap[(*next_bootstrap + step) % bootstrap.len()];
        if !candidates.contains(addr) {
            candidates.push(addr.clone());
        }
    }
    let chosen = candidates
        .iter()
        .find(|addr| untried(addr) && !unresponsive(addr))
        .or_else(|| candidates.iter().find(|addr| untried(addr)))
        .cloned()?;
    if let Some(position) = bootstrap.iter().position(|addr| *addr == chosen) {
        *next_bootstrap = position + 1;
    }
    Some(chosen)
}

/// How long one join call of an attempt with `remaining` time left may take: at most half of
/// it, so an address that swallows packets (a leader cut off from the network keeps its
/// sockets) leaves time to ask the next one. Each attempt starts with the leader this node
/// last knew, so a whole attempt spent on it would never reach the voters that know the new
/// one.
fn join_call_timeout(remaining: Duration) -> Duration {
    JOIN_CALL_TIMEOUT
        .min(remaining / 2)
        .max(Duration::from_millis(250))
        .min(remaining)
}

/// While this node leads, fences brokers not heard from within `broker.session.timeout.ms`
/// (observers by their heartbeats, voters by their last accepted AppendEntries) and moves the
/// leadership of their partitions (see [`gregor_actors::fencing`]); and unfences fenced
/// brokers, voters and observers alike, once they are heard from and caught up again. The
/// controller decides both on its working image.
pub(crate) fn spawn_fencing(
    config: Arc<NodeConfig>,
    service: Arc<QuorumService>,
    image: Arc<arc_swap::ArcSwap<gregor_publishers::MetadataImage>>,
    controller: actix::Addr<gregor_actors::controller::Controller>,
) {
    let timeout = Duration::from_millis(config.broker_session_timeout_ms as u64);
    let check_every = fencing_check_interval(timeout);
    tokio::spawn(async move {
        // Brokers get a full session from the moment this node starts leading, as Kafka's new
        // active controller gives them, unless this node heard from them while following.
        let mut leading_since: Option<Instant> = None;
        let mut learners_checked: Option<Instant> = None;
        loop {
            tokio::time::sleep(check_every).await;
            if !service.state.is_leader() {
                leading_since = None;
                continue;
            }
            let since = *leading_since.get_or_insert_with(Instant::now);
            if learners_checked.is_none_or(|at| at.elapsed() >= HEARTBEAT_INTERVAL) {
                learners_checked = Some(Instant::now());
                remove_departed_learners(&service, &image.load_full(), since.elapsed()).await;
            }
            let current = image.load_full();
            let voters = service.voter_ids();
            let liveness = |id: i32| broker_liveness(&service, &voters, id, timeout);
            let mut changes: Vec<(i32, bool)> = Vec::new();
            for broker in current.cluster.brokers() {
                if broker.id == config.node_id {
                    // The leader hears itself: a fenced leader is caught up by definition.
                    if broker.fenced {
                        changes.push((broker.id, false));
                    }
                    continue;
                }
                match (broker.fenced, liveness(broker.id)) {
                    (false, Liveness::Silent)
                        if since.elapsed() >= timeout
                            || went_silent_before_leading(&service, broker.id, since, timeout) =>
                    {
                        changes.push((broker.id, true))
                    }
                    (true, Liveness::CaughtUp) => changes.push((broker.id, false)),
                    _ => {}
                }
            }
            for (broker_id, fence) in changes {
                let outcome = if fence {
                    controller
                        .send(gregor_actors::controller::FenceBroker { broker_id })
                        .await
                } else {
                    controller
                        .send(gregor_actors::controller::UnfenceBroker {
                            broker_id,
                            incarnation_id: None,
                        })
                        .await
                };
                let action = if fence { "fenced" } else { "unfenced" };
                match outcome {
                    Ok(Ok(true)) if fence => tracing::info!(
                        broker_id,
                        "fenced a broker not heard from within broker.session.timeout.ms"
                    ),
                    Ok(Ok(true)) => tracing::info!(broker_id, "unfenced a broker that caught up"),
                    Ok(Ok(false)) => {}
                    Ok(Err(error)) => tracing::warn!(broker_id, %error, "cannot be {action}"),
                    Err(error) => tracing::warn!(broker_id, %error, "cannot be {action}"),
                }
            }
        }
    });
}

/// How often the active controller looks for silent brokers: a small fraction of the session,
/// so a broker is fenced close to `broker.session.timeout.ms` after it went silent, not up to a
/// second later.
fn fencing_check_interval(session_timeout: Duration) -> Duration {
    (session_timeout / 20).clamp(Duration::from_millis(50), HEARTBEAT_INTERVAL)
}

/// How long a new leader waits before it may fence a voter early (see [`may_fence_early`]):
/// three raft heartbeats (100 ms), by which a live voter has accepted the new leader's first
/// AppendEntries.
const NEW_LEADER_MIN_GRACE: Duration = Duration::from_millis(300);

/// How far before a leadership began a voter's last raft call still counts as fresh: elections
/// start 1.5-2 s after the last leader was heard (openraft's lease plus election timeout) and may
/// take a few rounds.
const ELECTION_ALLOWANCE: Duration = Duration::from_secs(5);

/// Whether a node that has just started leading may fence `id` before its first full session
/// (`id` is silent: nothing heard from it for a session).
fn went_silent_before_leading(
    service: &QuorumService,
    id: i32,
    leading_since: Instant,
    timeout: Duration,
) -> bool {
    may_fence_early(
        service.state.last_heard_from(id as u64),
        leading_since,
        Instant::now(),
        timeout,
    )
}

/// A silent voter may be fenced early when this node heard its raft calls shortly before it
/// started leading (typically the voter led the quorum until it died) and this node has led long
/// enough for a live voter to have answered it. Any other broker gets the full session, as
/// Kafka's new active controller gives every broker.
fn may_fence_early(
    last_heard: Option<Instant>,
    leading_since: Instant,
    now: Instant,
    timeout: Duration,
) -> bool {
    now.saturating_duration_since(leading_since) >= NEW_LEADER_MIN_GRACE
        && last_heard.is_some_and(|heard| heard + timeout + ELECTION_ALLOWANCE >= leading_since)
}

/// What the leader knows of a broker's session.
#[derive(Debug, PartialEq, Eq)]
enum Liveness {
    /// Not heard from within the session timeout.
    Silent,
    /// Heard from, but not known to hold everything committed.
    Behind,
    /// Heard from, and it matched the commit index within the last two liveness rounds.
    CaughtUp,
}

/// A voter is heard from through the AppendEntries it accepts; an observer (a learner) through
/// its heartbeat. Either is caught up when an AppendEntries it accepted recently brought it to
/// the commit index.
fn broker_liveness(
    service: &QuorumService,
    voters: &std::collections::BTreeSet<u64>,
    id: i32,
    timeout: Duration,
) -> Liveness {
    let now_ms = gregor_actors::quorum::now_ms();
    let timeout_ms = timeout.as_millis() as i64;
    let recent = |ms: i64| ms >= 0 && now_ms - ms <= timeout_ms;
    let progress = service.state.progress(id as u64);
    let heard = if voters.contains(&(id as u64)) {
        progress.is_some_and(|p| recent(p.last_fetch_ms))
            || service
                .state
                .last_heard_from(id as u64)
                .is_some_and(|heard| heard.elapsed() <= timeout)
    } else {
        service
            .state
            .last_seen(id)
            .is_some_and(|seen| seen.elapsed() <= timeout)
    };
    if !heard {
        return Liveness::Silent;
    }
    // Caught up within the last two liveness rounds, so a replica still catching up after a
    // pause is not unfenced on an old match.
    let caught_up_ms = (HEARTBEAT_INTERVAL * 2).as_millis() as i64;
    if progress
        .is_some_and(|p| p.last_caught_up_ms >= 0 && now_ms - p.last_caught_up_ms <= caught_up_ms)
    {
        Liveness::CaughtUp
    } else {
        Liveness::Behind
    }
}

/// Removes from the membership the learners that are gone: not registered any more and
/// silent for [`UNREGISTERED_LEARNER_EXPIRY`], or silent for [`SILENT_LEARNER_EXPIRY`]
/// (`leading_for` stands for silence when this leader has not heard from one yet). openraft
/// then drops their replication streams, so a departed learner costs the leader nothing.
async fn remove_departed_learners(
    service: &QuorumService,
    image: &gregor_publishers::MetadataImage,
    leading_for: Duration,
) {
    let metrics = service.state.log.metrics();
    let membership = metrics.membership_config.membership();
    let voters: std::collections::BTreeSet<u64> = membership.voter_ids().collect();
    let departed: std::collections::BTreeSet<u64> = membership
        .nodes()
        .map(|(id, _)| *id)
        .filter(|id| !voters.contains(id) && *id != metrics.id)
        .filter(|id| {
            let Ok(node_id) = i32::try_from(*id) else {
                return true;
            };
            let silent_for = service
                .state
                .last_seen(node_id)
                .map_or(leading_for, |seen| seen.elapsed().min(leading_for));
            let registered = image.cluster.broker(node_id).is_some()
                || image.cluster.controller(node_id).is_some();
            silent_for >= SILENT_LEARNER_EXPIRY
                || (!registered && silent_for >= UNREGISTERED_LEARNER_EXPIRY)
        })
        .collect();
    if departed.is_empty() {
        return;
    }
    // One membership change at a time (AddRaftVoter / RemoveRaftVoter take the same guard).
    let Some(_guard) = service.state.begin_voter_change() else {
        return;
    };
    tracing::info!(learners = ?departed, "removing departed learners from the metadata quorum");
    if let Err(error) = service
        .state
        .log
        .change_membership(openraft::ChangeMembers::RemoveNodes(departed), false)
        .await
    {
        tracing::warn!(%error, "cannot remove departed learners");
    }
}

/// Keeps a raft link open to the leader that admitted this node (a broker without a
/// controller listener: the leader sends its AppendEntries and InstallSnapshot down the link,
/// as Kafka's observers fetch from the leader). Follows the leader as joins and heartbeats
/// find it.
pub(crate) fn spawn_raft_link(
    config: Arc<NodeConfig>,
    service: Arc<QuorumService>,
    join: JoinRequest,
) {
    service
        .raft_link
        .store(true, std::sync::atomic::Ordering::Relaxed);
    tokio::spawn(async move {
        let mut address = service.leader_address.subscribe();
        let hello = PeerHello {
            raft_link: true,
            ..service.hello.clone()
        };
        loop {
            let current = address.borrow_and_update().clone();
            let Some(addr) = current else {
                if address.changed().await.is_err() {
                    return;
                }
                continue;
            };
            match open_raft_link(&service.connector, &addr, &hello).await {
                Ok((mut stream, lifetime)) => {
                    tracing::info!(%addr, "raft link to the leader opened");
                    service.link_open.send_replace(true);
                    let mut renew_at = crate::network::peer::renewal_at(lifetime);
                    let ended = loop {
                        match serve_raft_link(&service, &mut stream, &mut address, renew_at).await {
                            LinkEnd::Ended(reason) => break reason,
                            // KIP-368: the leader writes its requests down the link, so the
                            // session cannot be renewed in band; a new link, authenticated
                            // afresh, replaces it before the leader would end it.
                            LinkEnd::RenewalDue => {
                                match open_raft_link(&service.connector, &addr, &hello).await {
                                    Ok((renewed, lifetime)) => {
                                        let old = std::mem::replace(&mut stream, renewed);
                                        tokio::spawn(drain_raft_link(service.clone(), old));
                                        renew_at = crate::network::peer::renewal_at(lifetime);
                                        tracing::debug!(%addr, "raft link renewed");
                                    }
                                    Err(error) => {
                                        // The leader ends the link when its session does; it
                                        // is opened again then.
                                        tracing::warn!(%addr, %error, "cannot renew the raft link");
                                        renew_at = None;
                                    }
                                }
                            }
                        }
                    };
                    service.link_open.send_replace(false);
                    tracing::info!(%addr, reason = %ended, "raft link to the leader ended");
                    if address.has_changed().unwrap_or(false) {
                        continue;
                    }
                }
                Err(error) => tracing::debug!(%addr, %error, "cannot open the raft link"),
            }
            // The leader may have moved: find it now rather than at the next heartbeat (a
            // successful join points the link at it).
            tokio::time::sleep(Duration::from_millis(100)).await;
            let deadline = Instant::now() + HEARTBEAT_INTERVAL * 3;
            if let Err(error) = join_leader(&config, &service, &join, deadline).await {
                tracing::debug!(%error, "cannot find the leader for the raft link");
            }
        }
    });
}

/// Connects to `addr` and opens a raft link with `hello`; also returns the SASL session's
/// lifetime when the leader's listener limits it.
async fn open_raft_link(
    connector: &PeerConnector,
    addr: &str,
    hello: &PeerHello,
) -> Result<(PeerStream, Option<Duration>), String> {
    use tokio::io::AsyncWriteExt;
    let frame = transport::hello_frame(hello)?;
    let open = async {
        let (mut stream, lifetime) = connector
            .connect(addr, transport::CONNECT_TIMEOUT)
            .await
            .map_err(|e| e.to_string())?;
        stream.write_all(&frame).await.map_err(|e| e.to_string())?;
        let answer = read_peer_frame(&mut stream)
            .await
            .map_err(|e| e.to_string())?;
        transport::check_hello_answer(addr, &answer).map_err(|e| e.to_string())?;
        Ok((stream, lifetime))
    };
    tokio::time::timeout(JOIN_CALL_TIMEOUT, open)
        .await
        .map_err(|_| format!("no answer within {JOIN_CALL_TIMEOUT:?}"))?
}

/// Why [`serve_raft_link`] returned.
enum LinkEnd {
    /// The link is over, for this reason.
    Ended(String),
    /// The link's SASL session is due for renewal; the link still serves.
    RenewalDue,
}

/// Answers the leader's requests on the raft link until it fails, goes quiet for
/// [`LINK_IDLE`], the leader moves, or (at `renew_at`) its session is due for renewal.
async fn serve_raft_link(
    service: &QuorumService,
    stream: &mut PeerStream,
    address: &mut tokio::sync::watch::Receiver<Option<String>>,
    renew_at: Option<tokio::time::Instant>,
) -> LinkEnd {
    use tokio::io::AsyncWriteExt;
    let renewal_due = async {
        match renew_at {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(renewal_due);
    loop {
        let frame = tokio::select! {
            frame = tokio::time::timeout(LINK_IDLE, read_peer_frame(stream)) => frame,
            _ = address.changed() => return LinkEnd::Ended("the leader moved".into()),
            _ = &mut renewal_due => return LinkEnd::RenewalDue,
        };
        let frame = match frame {
            Ok(Ok(frame)) if frame.len() >= 8 => frame,
            Ok(Ok(frame)) => return LinkEnd::Ended(format!("a {}-byte frame", frame.len())),
            Ok(Err(error)) => return LinkEnd::Ended(error.to_string()),
            Err(_) => return LinkEnd::Ended(format!("no request within {LINK_IDLE:?}")),
        };
        let Some(answer) = service.serve_link_frame(&frame).await else {
            return LinkEnd::Ended("an unexpected request".into());
        };
        if let Err(error) = stream.write_all(&answer).await {
            return LinkEnd::Ended(error.to_string());
        }
    }
}

/// How long a replaced raft link is kept for requests the leader sent down it before it saw
/// the new one.
const REPLACED_LINK_DRAIN: Duration = Duration::from_secs(1);

/// Answers what the leader still sends down a replaced raft link, then closes it (the leader
/// then drops its side).
async fn drain_raft_link(service: Arc<QuorumService>, mut stream: PeerStream) {
    use tokio::io::AsyncWriteExt;
    while let Ok(Ok(frame)) =
        tokio::time::timeout(REPLACED_LINK_DRAIN, read_peer_frame(&mut stream)).await
    {
        let Some(answer) = service.serve_link_frame(&frame).await else {
            return;
        };
        if stream.write_all(&answer).await.is_err() {
            return;
        }
    }
}

/// Keeps announcing this node to the leader while it is not a voter (observers' heartbeat),
/// so the leader knows which (id, directory id) pairs are alive.
pub(crate) fn spawn_heartbeats(
    config: Arc<NodeConfig>,
    service: Arc<QuorumService>,
    join: JoinRequest,
) {
    let interval = Duration::from_millis(config.broker_heartbeat_interval_ms as u64);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(interval).await;
            if service.voter_ids().contains(&(config.node_id as u64)) {
                continue;
            }
            let deadline = Instant::now() + HEARTBEAT_INTERVAL * 3;
            if let Err(error) = join_leader(&config, &service, &join, deadline).await {
                tracing::debug!(%error, "observer heartbeat failed");
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(list: &[&str]) -> Vec<String> {
        list.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn the_fencing_check_runs_every_twentieth_of_a_session_within_bounds() {
        let ms = Duration::from_millis;
        assert_eq!(fencing_check_interval(ms(9000)), ms(450));
        assert_eq!(fencing_check_interval(ms(1500)), ms(75));
        assert_eq!(fencing_check_interval(ms(500)), ms(50));
        assert_eq!(fencing_check_interval(ms(60_000)), ms(1000));
    }

    #[test]
    fn a_new_leader_fences_early_only_the_voter_it_heard_just_before_leading() {
        let ms = Duration::from_millis;
        let session = ms(1500);
        let start = Instant::now();
        // The old leader's last AppendEntries came 1.7 s before this node won its election.
        let heard = Some(start);
        let leading = start + ms(1700);
        assert!(!may_fence_early(heard, leading, leading + ms(299), session));
        assert!(may_fence_early(heard, leading, leading + ms(300), session));
        // Heard 6.5 s before leading (session + allowance): stale, the full session applies.
        let stale_leading = start + ms(6501);
        assert!(!may_fence_early(
            heard,
            stale_leading,
            stale_leading + ms(300),
            session
        ));
        let edge_leading = start + ms(6500);
        assert!(may_fence_early(
            heard,
            edge_leading,
            edge_leading + ms(300),
            session
        ));
        // Never heard: the full session applies.
        assert!(!may_fence_early(None, leading, leading + ms(5000), session));
    }

    #[test]
    fn a_join_asks_where_it_was_pointed_then_the_known_leader_then_the_bootstrap_servers() {
        let bootstrap = addrs(&["c1:9093", "c2:9093", "c3:9093"]);
        let failed = std::collections::BTreeSet::new();
        let mut cursor = 0;
        let next = |pointed: Option<&str>, leader: Option<&str>, cursor: &mut usize| {
            next_join_address(
                pointed.map(str::to_owned),
                leader.map(str::to_owned),
                &bootstrap,
                cursor,
                &failed,
                |_| false,
            )
        };
        assert_eq!(
            next(Some("c3:9093"), Some("c1:9093"), &mut cursor).as_deref(),
            Some("c3:9093")
        );
        assert_eq!(
            next(None, Some("c2:9093"), &mut cursor).as_deref(),
            Some("c2:9093")
        );
        // Asking an address of the bootstrap list moves the cursor past it.
        assert_eq!(cursor, 2);
        assert_eq!(next(None, None, &mut cursor).as_deref(), Some("c3:9093"));
        assert_eq!(next(None, None, &mut cursor).as_deref(), Some("c1:9093"));
        assert_eq!(next(None, None, &mut cursor).as_deref(), Some("c2:9093"));
    }

    #[test]
    fn a_cut_off_leader_is_asked_last_and_failed_addresses_not_again() {
        let bootstrap = addrs(&["c1:9093", "c2:9093", "c3:9093"]);
        let mut failed = std::collections::BTreeSet::new();
        let mut cursor = 0;
        let cut_off = |addr: &str| addr == "c1:9093";
        // Every node still names c1, which swallowed the last attempt's calls: c2 first, then
        // c3; with only the unresponsive one left, it is still worth one call.
        for expected in ["c2:9093", "c3:9093", "c1:9093"] {
            let chosen = next_join_address(
                None,
                Some("c1:9093".into()),
                &bootstrap,
                &mut cursor,
                &failed,
                cut_off,
            );
            assert_eq!(chosen.as_deref(), Some(expected));
            failed.insert(expected.to_owned());
        }
        assert_eq!(
            next_join_address(None, None, &bootstrap, &mut cursor, &failed, cut_off),
            None
        );
    }

    #[test]
    fn one_join_call_leaves_time_for_another_address() {
        let attempt = HEARTBEAT_INTERVAL * 3;
        assert_eq!(join_call_timeout(attempt), Duration::from_millis(1500));
        assert_eq!(
            join_call_timeout(Duration::from_millis(1500)),
            Duration::from_millis(750)
        );
        // Never below 250 ms (a call needs a round trip), never past the attempt's end.
        assert_eq!(
            join_call_timeout(Duration::from_millis(400)),
            Duration::from_millis(250)
        );
        assert_eq!(
            join_call_timeout(Duration::from_millis(100)),
            Duration::from_millis(100)
        );
        // A long start-up join still waits JOIN_CALL_TIMEOUT per call.
        assert_eq!(
            join_call_timeout(Duration::from_secs(60)),
            JOIN_CALL_TIMEOUT
        );
    }
}
