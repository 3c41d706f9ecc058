//! AddRaftVoter (key 80, v0-2) and RemoveRaftVoter (key 81, v0-1): change the voters of the
//! metadata quorum, in Kafka's validation order (KIP-853, KAFKA-18775; reference §8.2-8.3).
//!
//! v2 of AddRaftVoter (and v1 of RemoveRaftVoter) let the operator name only the node id: a zero
//! directory id is taken from the observer of that id this leader knows (the voter of that id
//! for a removal), and an empty listener list from the controller registration in the image.
//! Where Kafka leaves the answer open, Gregor answers INVALID_REQUEST with a message that says
//! what to do (several observers share the id; no observer or registration exists for it).
//!
//! The voter set is openraft's membership: a voter is added by promoting the learner that
//! replicates to it (after pointing the learner's endpoints at the requested listeners, one
//! per listener name, the last given winning, as Kafka's `Endpoints` map keeps them), and a
//! removed voter stays a learner, like a Kafka controller that becomes an observer.
//!
//! The listeners are read through [`VoterListeners`], from a decoded request or from a frame
//! listing too many to decode (issue #11); a refusal names at most [`LISTED`] of them.

use std::collections::BTreeMap;
use std::time::Duration;

use gregor_publishers::kafka_uuid::to_kafka_string;
use gregor_publishers::records::Endpoint;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_raft_voter_request::Listener;
use kafka_protocol::messages::{
    AddRaftVoterRequest, AddRaftVoterResponse, RemoveRaftVoterRequest, RemoveRaftVoterResponse,
    RequestKind, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use openraft::ChangeMembers;
use uuid::Uuid;

use super::{ApiResponse, ErrorCounts};
use crate::context::{HandlerContext, RequestInfo};
use crate::quorum::{now_ms, QuorumState, VoterChangeGuard};
use crate::raft::{MetadataLogError, VoterNode};

/// "Caught up" must be recent (Kafka: a fetch within the last hour and a caught-up time set).
const CAUGHT_UP_WITHIN_MS: i64 = 3_600_000;

/// A new voter must answer now: Kafka's leader first asks it for its ApiVersions and aborts on
/// an error. Here the leader's own replication to the learner (every heartbeat, 100 ms) tells
/// the same: silent for longer than Kafka's `controller.quorum.fetch.timeout.ms` default, it is
/// down or frozen, and adding it would cost the quorum a failure it can tolerate.
const ANSWERED_WITHIN_MS: i64 = 2_000;

/// How many listeners a refusal names: Kafka's message lists every one, which for a request
/// of millions is an answer larger than the request and no help to the person reading it.
pub const LISTED: usize = 10;

/// The listeners of an AddRaftVoter request, read one at a time from where they are kept.
pub trait VoterListeners: Send + Sync {
    /// How many listeners the request lists.
    fn count(&self) -> usize;

    /// Calls `visit` with each listener's name, host and port in request order; stops early
    /// when `visit` returns false.
    fn each(&self, visit: &mut dyn FnMut(&str, &str, u16) -> bool) -> Result<(), String>;
}

impl VoterListeners for Vec<Listener> {
    fn count(&self) -> usize {
        self.len()
    }

    fn each(&self, visit: &mut dyn FnMut(&str, &str, u16) -> bool) -> Result<(), String> {
        for listener in self {
            if !visit(&listener.name, &listener.host, listener.port) {
                break;
            }
        }
        Ok(())
    }
}

/// The requested listeners as the voter's endpoints: one per name, the last given winning, in
/// order of each name's first appearance.
fn requested_endpoints(listeners: &dyn VoterListeners) -> Result<Vec<Endpoint>, Refusal> {
    let mut endpoints: Vec<Endpoint> = Vec::new();
    let mut by_name: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    listeners
        .each(&mut |name, host, port| {
            let endpoint = Endpoint {
                name: name.to_owned(),
                host: host.to_owned(),
                port,
                security_protocol: 0,
            };
            match by_name.get(name) {
                Some(at) => endpoints[*at] = endpoint,
                None => {
                    by_name.insert(name.to_owned(), endpoints.len());
                    endpoints.push(endpoint);
                }
            }
            true
        })
        .map_err(|error| refuse(ResponseError::InvalidRequest, error))?;
    Ok(endpoints)
}

/// Kafka's `ReplicaKey.toString()`.
fn replica_key(id: i32, directory_id: Uuid) -> String {
    let directory = if directory_id.is_nil() {
        "<undefined>".to_owned()
    } else {
        to_kafka_string(directory_id)
    };
    format!("ReplicaKey(id={id}, directoryId={directory})")
}

/// A voter-change failure: code and message.
struct Refusal(ResponseError, Option<String>);

fn refuse(error: ResponseError, message: impl Into<String>) -> Refusal {
    Refusal(error, Some(message.into()))
}

fn voter_keys(state: &QuorumState) -> String {
    let metrics = state.log.metrics();
    let membership = metrics.membership_config.membership();
    let keys: Vec<String> = membership
        .voter_ids()
        .map(|id| {
            let directory = membership
                .get_node(&id)
                .map(|n| n.directory_id)
                .unwrap_or_default();
            replica_key(id as i32, directory)
        })
        .collect();
    format!("[{}]", keys.join(", "))
}

/// Steps 1-2 of Kafka's order: cluster id, then leadership.
fn check_cluster_and_leader(
    state: &QuorumState,
    cluster_id: Option<&StrBytes>,
) -> Result<(), Refusal> {
    if let Some(given) = cluster_id {
        if given.as_str() != state.cluster_id {
            return Err(refuse(
                ResponseError::InconsistentClusterId,
                format!(
                    "The given id \"{}\" doesn't match the cluster id \"{}\"",
                    given.as_str(),
                    state.cluster_id
                ),
            ));
        }
    }
    if !state.is_leader() {
        return Err(Refusal(ResponseError::NotLeaderOrFollower, None));
    }
    Ok(())
}

fn membership_change_pending(state: &QuorumState) -> bool {
    let metrics = state.log.metrics();
    let config = &metrics.membership_config;
    let uncommitted = match (config.log_id(), metrics.last_applied) {
        (Some(membership), Some(applied)) => membership.index > applied.index,
        (Some(_), None) => true,
        (None, _) => false,
    };
    uncommitted || config.membership().get_joint_config().len() > 1
}

/// Kafka's step 7: voters change through the log only on a dynamic quorum (`kraft.version` 1,
/// KIP-853); a static quorum (level 0) refuses with UNSUPPORTED_VERSION.
fn check_dynamic_quorum(ctx: &HandlerContext, change: &str) -> Result<(), Refusal> {
    let level = ctx
        .image
        .load()
        .features
        .level(gregor_publishers::records::KRAFT_VERSION_FEATURE);
    dynamic_quorum_refusal(level, change).map_or(Ok(()), Err)
}

/// Kafka's steps 5, 7 and 8, common to adding and removing a voter: one change at a time, a
/// dynamic quorum, and the latest voter set committed. The change ends when the guard drops.
fn begin_change<'a>(
    ctx: &HandlerContext,
    state: &'a QuorumState,
    change: &str,
) -> Result<VoterChangeGuard<'a>, Refusal> {
    let Some(guard) = state.begin_voter_change() else {
        return Err(refuse(
            ResponseError::RequestTimedOut,
            "Request timed out waiting for another voter change to complete",
        ));
    };
    check_dynamic_quorum(ctx, change)?;
    if membership_change_pending(state) {
        return Err(refuse(
            ResponseError::RequestTimedOut,
            "Request timed out waiting for the latest voter set to be committed",
        ));
    }
    Ok(guard)
}

fn dynamic_quorum_refusal(kraft_version: Option<i16>, change: &str) -> Option<Refusal> {
    let level = kraft_version.unwrap_or(0);
    (level < 1).then(|| {
        refuse(
            ResponseError::UnsupportedVersion,
            format!(
                "Cluster doesn't support {change} voter because the kraft.version feature is {level}"
            ),
        )
    })
}

fn map_log_error(error: MetadataLogError, what: &str) -> Refusal {
    match error {
        MetadataLogError::NotLeader { .. } => Refusal(ResponseError::NotLeaderOrFollower, None),
        MetadataLogError::Shutdown(_) => Refusal(ResponseError::BrokerNotAvailable, None),
        other => refuse(ResponseError::RequestTimedOut, format!("{what}: {other}")),
    }
}

fn respond_add(result: Result<(), Refusal>) -> ApiResponse {
    let (code, message) = match result {
        Ok(()) => (0, None),
        Err(Refusal(error, message)) => (error.code(), message),
    };
    let mut errors = ErrorCounts::default();
    errors.add(code);
    ApiResponse::new(
        ResponseKind::AddRaftVoter(
            AddRaftVoterResponse::default()
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string)),
        ),
        errors,
    )
}

fn respond_remove(result: Result<(), Refusal>) -> ApiResponse {
    let (code, message) = match result {
        Ok(()) => (0, None),
        Err(Refusal(error, message)) => (error.code(), message),
    };
    let mut errors = ErrorCounts::default();
    errors.add(code);
    ApiResponse::new(
        ResponseKind::RemoveRaftVoter(
            RemoveRaftVoterResponse::default()
                .with_error_code(code)
                .with_error_message(message.map(StrBytes::from_string)),
        ),
        errors,
    )
}

pub(super) async fn add(
    ctx: &HandlerContext,
    info: &RequestInfo,
    mut request: AddRaftVoterRequest,
) -> ApiResponse {
    let listeners = std::mem::take(&mut request.listeners);
    add_with(ctx, info, request, &listeners).await
}

/// AddRaftVoter of `request` (its own listeners ignored) to the voters, with `listeners`, for
/// a request whose listeners stay in its frame: authorized here (ALTER on the cluster), as
/// [`super::handle`] authorizes a decoded one.
pub async fn add_listed(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: AddRaftVoterRequest,
    listeners: &dyn VoterListeners,
) -> ApiResponse {
    // The request without its listeners: a clone of a few fields.
    let shell = RequestKind::AddRaftVoter(request.clone());
    if let Some(denied) = super::authorize::cluster_denial(ctx, info, &shell) {
        return denied;
    }
    add_with(ctx, info, request, listeners).await
}

async fn add_with(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: AddRaftVoterRequest,
    listeners: &dyn VoterListeners,
) -> ApiResponse {
    if let Some(failure) = &info.controller_failure {
        return respond_add(Err(refuse(failure.error, failure.message.clone())));
    }
    let Some(state) = ctx.quorum.as_deref() else {
        return respond_add(Err(Refusal(ResponseError::NotLeaderOrFollower, None)));
    };
    respond_add(add_voter(ctx, state, info.api_version, request, listeners).await)
}

async fn add_voter(
    ctx: &HandlerContext,
    state: &QuorumState,
    version: i16,
    request: AddRaftVoterRequest,
    listeners: &dyn VoterListeners,
) -> Result<(), Refusal> {
    check_cluster_and_leader(state, request.cluster_id.as_ref())?;
    let voter_id = request.voter_id;
    let derive = version >= 2;
    if voter_id < 0 || (request.voter_directory_id.is_nil() && !derive) {
        return Err(refuse(
            ResponseError::InvalidRequest,
            "Add voter request didn't include a valid voter",
        ));
    }
    let metrics = state.log.metrics();
    let membership = metrics.membership_config.membership().clone();
    let is_voter = membership.voter_ids().any(|id| id == voter_id as u64);
    let no_listeners = listeners.count() == 0;
    // Duplicate ids first when the operator named only the id: "already a voter" is the
    // answer they need, not "no observer".
    if is_voter && (request.voter_directory_id.is_nil() || no_listeners) {
        let key = replica_key(voter_id, request.voter_directory_id);
        return Err(refuse(
            ResponseError::DuplicateVoter,
            format!(
                "The voter id for {key} is already part of the set of voters {}.",
                voter_keys(state)
            ),
        ));
    }
    let directory_id = if request.voter_directory_id.is_nil() {
        let observers = state.observers_of(voter_id);
        match observers.as_slice() {
            [one] => one.directory_id,
            [] => {
                return Err(refuse(
                    ResponseError::InvalidRequest,
                    format!(
                        "Cannot add controller {voter_id}: no observer with node id {voter_id} is known to the leader. \
                         Start it with process.roles=controller and controller.quorum.bootstrap.servers pointing at this quorum, \
                         wait until it has joined as an observer (see `gregor metadata-quorum describe --status`), then retry"
                    ),
                ))
            }
            many => {
                let ids: Vec<String> = many.iter().map(|o| to_kafka_string(o.directory_id)).collect();
                return Err(refuse(
                    ResponseError::InvalidRequest,
                    format!(
                        "Cannot add controller {voter_id}: {} observers share node id {voter_id}, with directory ids {}. \
                         Stop the ones that should not join, or name the directory id explicitly \
                         (add-controller --command-config with that controller's properties)",
                        many.len(),
                        ids.join(", ")
                    ),
                ));
            }
        }
    } else {
        request.voter_directory_id
    };
    // The registration's endpoints when v2 names none; else the request's, read when needed.
    let derived: Option<Vec<Endpoint>> = if no_listeners && derive {
        let image = ctx.image.load();
        match image.cluster.controller(voter_id) {
            Some(registration) if !registration.endpoints.is_empty() => {
                Some(registration.endpoints.clone())
            }
            _ => {
                return Err(refuse(
                    ResponseError::InvalidRequest,
                    format!(
                        "Cannot add controller {voter_id}: the metadata has no controller registration (endpoints) for node {voter_id}. \
                         A controller registers when it joins the quorum; check that node {voter_id} runs with process.roles=controller, \
                         or pass its listeners explicitly"
                    ),
                ))
            }
        }
    } else {
        None
    };
    // Step 4: the quorum's default listener (the leader's first controller listener).
    let default_listener = membership
        .get_node(&metrics.id)
        .and_then(|n| n.endpoints.first())
        .map(|e| e.name.clone());
    if let Some(default) = &default_listener {
        let mut present = false;
        let mut named: Vec<String> = Vec::new();
        let mut visit = |name: &str, host: &str, port: u16| {
            present |= name == default;
            if named.len() < LISTED {
                named.push(format!("{name}://{host}:{port}"));
            }
            true
        };
        let count = match &derived {
            Some(endpoints) => {
                for e in endpoints {
                    visit(&e.name, &e.host, e.port);
                }
                endpoints.len()
            }
            None => {
                listeners
                    .each(&mut visit)
                    .map_err(|error| refuse(ResponseError::InvalidRequest, error))?;
                listeners.count()
            }
        };
        if !present {
            if count > named.len() {
                named.push(format!("and {} more", count - named.len()));
            }
            return Err(refuse(
                ResponseError::InvalidRequest,
                format!(
                    "Add voter request didn't include the endpoint ([{}]) for the default listener {default}",
                    named.join(", ")
                ),
            ));
        }
    }
    // Steps 5, 7 and 8.
    let _change = begin_change(ctx, state, "adding")?;
    // Step 9.
    if is_voter {
        return Err(refuse(
            ResponseError::DuplicateVoter,
            format!(
                "The voter id for {} is already part of the set of voters {}.",
                replica_key(voter_id, directory_id),
                voter_keys(state)
            ),
        ));
    }
    // Step 12: the new voter must be the learner of that (id, directory id) and caught up.
    let key = replica_key(voter_id, directory_id);
    let lagging = || {
        refuse(
            ResponseError::RequestTimedOut,
            format!("Aborted add voter operation for {key} since it is lagging behind"),
        )
    };
    let learner = membership.get_node(&(voter_id as u64)).cloned();
    let Some(learner) = learner.filter(|l| l.directory_id == directory_id) else {
        return Err(lagging());
    };
    let progress = state.progress(voter_id as u64).unwrap_or_default();
    let silent_ms = now_ms() - progress.last_fetch_ms;
    if progress.last_fetch_ms > 0 && silent_ms > ANSWERED_WITHIN_MS {
        return Err(refuse(
            ResponseError::RequestTimedOut,
            format!(
                "Aborted add voter operation for {key} since it has not answered the leader for {silent_ms} ms; \
                 check that controller {voter_id} is running and reachable, then retry"
            ),
        ));
    }
    let recent = silent_ms < CAUGHT_UP_WITHIN_MS;
    if progress.last_caught_up_ms <= 0 || !recent {
        return Err(lagging());
    }
    // Step 13: point the learner at the requested listeners, then promote it.
    let timeout = Duration::from_millis(request.timeout_ms.max(1) as u64);
    let endpoints = match derived {
        Some(endpoints) => endpoints,
        None => requested_endpoints(listeners)?,
    };
    let change = async {
        let node = VoterNode {
            directory_id,
            endpoints,
        };
        if node != learner {
            state
                .log
                .change_membership(
                    ChangeMembers::SetNodes(BTreeMap::from([(voter_id as u64, node)])),
                    true,
                )
                .await?;
        }
        state
            .log
            .change_membership(
                ChangeMembers::AddVoterIds([voter_id as u64].into_iter().collect()),
                true,
            )
            .await
    };
    match tokio::time::timeout(timeout, change).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) => Err(map_log_error(error, "Add voter failed")),
        Err(_) => Err(refuse(
            ResponseError::RequestTimedOut,
            format!("Add voter operation for {key} timed out after {timeout:?}"),
        )),
    }
}

pub(super) async fn remove(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: RemoveRaftVoterRequest,
) -> ApiResponse {
    if let Some(failure) = &info.controller_failure {
        return respond_remove(Err(refuse(failure.error, failure.message.clone())));
    }
    let Some(state) = ctx.quorum.as_deref() else {
        return respond_remove(Err(Refusal(ResponseError::NotLeaderOrFollower, None)));
    };
    respond_remove(remove_voter(ctx, state, info.api_version, request).await)
}

async fn remove_voter(
    ctx: &HandlerContext,
    state: &QuorumState,
    version: i16,
    request: RemoveRaftVoterRequest,
) -> Result<(), Refusal> {
    check_cluster_and_leader(state, request.cluster_id.as_ref())?;
    let voter_id = request.voter_id;
    if voter_id < 0 || (request.voter_directory_id.is_nil() && version < 1) {
        return Err(refuse(
            ResponseError::InvalidRequest,
            "Remove voter request didn't include a valid voter",
        ));
    }
    let _change = begin_change(ctx, state, "removing")?;
    let metrics = state.log.metrics();
    let membership = metrics.membership_config.membership();
    let voters: Vec<u64> = membership.voter_ids().collect();
    let current = voters
        .iter()
        .find(|id| **id == voter_id as u64)
        .and_then(|id| membership.get_node(id))
        .map(|n| n.directory_id);
    let directory_id = if request.voter_directory_id.is_nil() {
        current.unwrap_or_default()
    } else {
        request.voter_directory_id
    };
    let matches = current == Some(directory_id);
    if !matches || voters.len() <= 1 {
        return Err(refuse(
            ResponseError::VoterNotFound,
            format!(
                "Cannot remove voter {} from the set of voters {}",
                replica_key(voter_id, directory_id),
                voter_keys(state)
            ),
        ));
    }
    // A removed voter stays a learner (Kafka's observer) so its image keeps following, except
    // the active controller removing itself: openraft lets any member lead, learners included,
    // so the leader leaves the membership altogether to step down, as Kafka's leader resigns.
    // Its observer heartbeat then joins it back as a learner of the new leader.
    let removing_self = voter_id as u64 == state.log.node_id();
    state
        .log
        .change_membership(
            ChangeMembers::RemoveVoters([voter_id as u64].into_iter().collect()),
            !removing_self,
        )
        .await
        .map(|_| ())
        .map_err(|e| map_log_error(e, "Remove voter failed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn voter_changes_need_a_dynamic_quorum() {
        let refusal = dynamic_quorum_refusal(Some(0), "adding");
        assert!(matches!(
            refusal,
            Some(Refusal(ResponseError::UnsupportedVersion, Some(ref m)))
                if m == "Cluster doesn't support adding voter because the kraft.version feature is 0"
        ));
        assert!(dynamic_quorum_refusal(None, "removing").is_some());
        assert!(dynamic_quorum_refusal(Some(1), "adding").is_none());
    }

    #[test]
    fn replica_keys_print_as_kafka_does() {
        assert_eq!(
            replica_key(4, Uuid::nil()),
            "ReplicaKey(id=4, directoryId=<undefined>)"
        );
    }
}
