//! Leader elections on the controller actor: ElectLeaders (api 43), the periodic
//! preferred-leader rebalance (`auto.leader.rebalance.enable` every
//! `leader.imbalance.check.interval.seconds`) and the periodic election of leaderless
//! partitions (`unclean.leader.election.interval.ms`), all decided by `logic::election` on the
//! working image by the active controller only.

use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use gregor_publishers::records::MetadataRecord;
use gregor_publishers::{MetadataDelta, MetadataImage};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};
use kafka_protocol::protocol::StrBytes;

use super::actor::{Controller, Refusable};
use super::logic::election::{
    balance_leaders, elect_leaderless, elect_leaders, elect_listed_leaders, ListedElections,
    RequestedPartitions, UncleanPolicy, MAX_ELECTIONS_PER_PASS,
};

/// How the controller keeps leadership where it belongs.
#[derive(Clone, Copy, Debug)]
pub struct LeadershipSettings {
    /// `auto.leader.rebalance.enable`.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.check.interval.seconds`.
    pub leader_imbalance_check_interval: Duration,
    /// `unclean.leader.election.interval.ms` (Kafka's internal scan of leaderless partitions).
    pub unclean_leader_election_interval: Duration,
    /// Where `unclean.leader.election.enable` is read.
    pub unclean: UncleanPolicy,
}

impl Default for LeadershipSettings {
    fn default() -> Self {
        LeadershipSettings {
            auto_leader_rebalance_enable: true,
            leader_imbalance_check_interval: Duration::from_secs(300),
            unclean_leader_election_interval: Duration::from_millis(300_000),
            unclean: UncleanPolicy::default(),
        }
    }
}

/// When the rebalance hit its per-pass cap, the next pass runs this soon (Kafka reschedules
/// at once; a short pause lets the first batch commit).
const CAPPED_PASS_DELAY: Duration = Duration::from_millis(10);

/// ElectLeaders as a client sent it, at `version`.
#[derive(Message)]
#[rtype(result = "ElectLeadersResponse")]
pub struct ElectLeaders {
    /// The request as the client sent it, shared with the handler, which answers from it
    /// should the controller be gone.
    pub request: std::sync::Arc<ElectLeadersRequest>,
    pub version: i16,
}

/// An ElectLeaders response failing every requested partition with `code` (null partitions:
/// the top-level code only).
pub fn failed_elect_leaders(
    request: &ElectLeadersRequest,
    code: ResponseError,
    message: &str,
) -> ElectLeadersResponse {
    let results = request
        .topic_partitions
        .iter()
        .flatten()
        .map(|topic| {
            ReplicaElectionResult::default()
                .with_topic(topic.topic.clone())
                .with_partition_result(
                    topic
                        .partitions
                        .iter()
                        .map(|id| {
                            PartitionResult::default()
                                .with_partition_id(*id)
                                .with_error_code(code.code())
                                .with_error_message(Some(StrBytes::from_string(message.to_owned())))
                        })
                        .collect(),
                )
        })
        .collect();
    ElectLeadersResponse::default()
        .with_error_code(code.code())
        .with_replica_election_results(results)
}

impl Refusable for ElectLeaders {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        failed_elect_leaders(&self.request, code, message)
    }
}

impl Handler<ElectLeaders> for Controller {
    type Result = ResponseFuture<ElectLeadersResponse>;

    fn handle(&mut self, msg: ElectLeaders, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        let request = msg.request.clone();
        self.mutate(
            ctx,
            &msg,
            |image, _| elect_leaders(image, &msg.request, msg.version),
            move |_, code, message| failed_elect_leaders(&request, code, message),
        )
    }
}

/// ElectLeaders naming its partitions where they are kept (its frame): read one at a time,
/// answered with an outcome per partition (issue #11).
#[derive(Message)]
#[rtype(result = "ListedElections")]
pub struct ElectListedLeaders {
    pub partitions: Arc<dyn RequestedPartitions>,
    pub election_type: i8,
    pub version: i16,
}

impl Refusable for ElectListedLeaders {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        ListedElections::refused(code.code(), Some(message.to_owned()))
    }
}

impl Handler<ElectListedLeaders> for Controller {
    type Result = ResponseFuture<ListedElections>;

    fn handle(&mut self, msg: ElectListedLeaders, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        self.mutate(
            ctx,
            &msg,
            |image, _| {
                elect_listed_leaders(
                    image,
                    msg.partitions.as_ref(),
                    msg.election_type,
                    msg.version,
                )
            },
            |_, code, message| ListedElections::refused(code.code(), Some(message.to_owned())),
        )
    }
}

/// Internal: one auto-rebalance pass.
#[derive(Message)]
#[rtype(result = "()")]
struct BalanceLeaders;

/// Internal: one pass electing leaders for leaderless partitions.
#[derive(Message)]
#[rtype(result = "()")]
struct ElectLeaderless;

/// Starts the periodic passes the settings ask for (called once when the actor starts).
pub(super) fn start_timers(settings: &LeadershipSettings, ctx: &mut Context<Controller>) {
    if settings.auto_leader_rebalance_enable {
        ctx.run_interval(settings.leader_imbalance_check_interval, |_, ctx| {
            ctx.notify(BalanceLeaders)
        });
    }
    ctx.run_interval(settings.unclean_leader_election_interval, |_, ctx| {
        ctx.notify(ElectLeaderless)
    });
}

impl Handler<BalanceLeaders> for Controller {
    type Result = ();

    fn handle(&mut self, _: BalanceLeaders, ctx: &mut Self::Context) {
        if !self.is_active() {
            return;
        }
        let (records, capped) = balance_leaders(&self.base_image(), MAX_ELECTIONS_PER_PASS);
        if records.is_empty() {
            return;
        }
        tracing::info!(
            elections = records.len(),
            "moving leadership back to preferred replicas"
        );
        let written = self.write_decided(ctx, |_| records);
        ctx.spawn(
            async move {
                if let Err(error) = written.await {
                    tracing::warn!(%error, "preferred leader elections not written");
                }
            }
            .into_actor(self),
        );
        if capped {
            ctx.notify_later(BalanceLeaders, CAPPED_PASS_DELAY);
        }
    }
}

impl Handler<ElectLeaderless> for Controller {
    type Result = ();

    fn handle(&mut self, _: ElectLeaderless, ctx: &mut Self::Context) {
        if !self.is_active() {
            return;
        }
        let policy = self.leadership().unclean;
        let records = elect_leaderless(&self.base_image(), &policy, MAX_ELECTIONS_PER_PASS);
        if records.is_empty() {
            return;
        }
        tracing::info!(
            elections = records.len(),
            "electing leaders for leaderless partitions"
        );
        let written = self.write_decided(ctx, |_| records);
        ctx.spawn(
            async move {
                if let Err(error) = written.await {
                    tracing::warn!(%error, "leaderless partition elections not written");
                }
            }
            .into_actor(self),
        );
    }
}

/// `records` followed by the elections they make possible or necessary: after a broker is
/// fenced its partitions left without an ISR leader elect uncleanly where allowed; after one
/// is unfenced the leaderless partitions whose ISR names it elect it (Kafka's
/// `handleBrokerFenced` / `handleBrokerUnfenced`). Records that do not apply are returned
/// alone, for the caller's own check to report.
pub(super) fn with_leaderless_elections(
    image: &Arc<MetadataImage>,
    records: Vec<MetadataRecord>,
    policy: &UncleanPolicy,
) -> Vec<MetadataRecord> {
    if records.is_empty() {
        return records;
    }
    let mut delta = MetadataDelta::new(image.clone());
    for record in &records {
        if delta.replay(record).is_err() {
            return records;
        }
    }
    let after = delta.apply(image.provenance);
    let mut records = records;
    records.extend(elect_leaderless(&after, policy, MAX_ELECTIONS_PER_PASS));
    records
}
