//! The controller actor: owns every metadata mutation.
//!
//! It validates each request against its *working image* (the committed image plus the records
//! of writes still in flight), appends the resulting records to the metadata log, and answers
//! once they are committed and applied, so a client that reads after the answer sees its change.
//! Writes are pipelined: the next request is validated while earlier ones wait for the disk, and
//! the working image makes it see them (two creates of one name in flight cannot both succeed).
//!
//! ```text
//!  handler ──CreateTopics──▶ Controller ──(validate on working image, records)──▶ submitter task
//!     ▲                          │  working += records                            │ raft append
//!     └──────── response ◀───────┴──────── WriteFinished ◀── committed + applied ──┘
//! ```
//!
//! It decides only while it is the *active* controller ([`Activation`]): the leader of the
//! quorum that has applied the log up to the start of its term. At that moment, and whenever a
//! write fails, the working image is rebuilt from the published image and a new *generation*
//! begins; batches validated on the discarded image are failed by the submitter, never
//! committed. Requests that arrive while a new leader catches up wait for it (at most
//! [`ACTIVATION_WAIT`], then REQUEST_TIMED_OUT); on a node that is not the leader they are
//! refused with NOT_CONTROLLER.
//!
//! Node registrations and fencing are decided here too (`RegisterNode`, `FenceBroker`,
//! `UnfenceBroker`), so every record that reaches the log was validated on the working image.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use arc_swap::ArcSwap;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rand::rngs::StdRng;
use rand::SeedableRng;
use tokio::sync::{mpsc, oneshot, watch};
use uuid::Uuid;

use gregor_publishers::records::{
    MetadataBatch, MetadataRecord, UnfenceBrokerRecord, BROKER_EPOCH_AT_OFFSET,
};
use gregor_publishers::{MetadataDelta, MetadataImage};

use super::activation::{self, Activation};
use super::elections::{self, LeadershipSettings};
use super::logic::registration::{self, NodeRegistration};
use super::logic::{self, MutationContext, MutationQuota, TopicDefaults, Unlimited};
use super::submitter::{self, Submission};
use crate::context::Principal;
use crate::quota::{ControllerMutationQuota, QuotaManager};
use crate::raft::{MetadataLog, MetadataLogError, MetadataLogId};

/// The CreateTopics version the controller's own requests (auto-creation) use.
pub const LATEST_CREATE_TOPICS_VERSION: i16 = 7;

/// How long a write waits for a newly elected controller to apply the log up to the start of
/// its term before it is answered REQUEST_TIMED_OUT.
pub const ACTIVATION_WAIT: Duration = Duration::from_secs(5);

/// What topic creations and deletions are decided with.
#[derive(Clone, Copy)]
struct TopicRules {
    defaults: TopicDefaults,
    delete_topic_enable: bool,
}

/// Settings the controller applies to mutations.
#[derive(Clone, Debug)]
pub struct ControllerSettings {
    /// `num.partitions` and `default.replication.factor`.
    pub defaults: TopicDefaults,
    /// `delete.topic.enable`.
    pub delete_topic_enable: bool,
    /// Test only: creating a topic of this name also writes a record that does not apply,
    /// bypassing validation, so tests can watch every node stop on it (the node sets it from
    /// `GREGOR_TEST_ONLY_INVALID_RECORD_ON_CREATE`). Never set in production.
    pub invalid_record_on_create: Option<String>,
    /// Records a brand-new metadata log starts with after the feature levels: the SCRAM
    /// credentials of `storage format --add-scram` (KIP-900).
    pub bootstrap_records: Vec<MetadataRecord>,
    /// Preferred-leader rebalancing and unclean elections.
    pub leadership: LeadershipSettings,
    /// The `group.consumer.*` values group configs default to (the controller validates with
    /// its own, as Kafka's).
    pub group_config_defaults: crate::controller::logic::configs::group::GroupConfigDefaults,
    /// The `group.consumer.*` / `group.share.*` bounds group configs are validated against.
    pub group_config_bounds: crate::controller::logic::configs::group::GroupConfigBounds,
    /// The dynamic broker configs the node's quota callback reconfigures on (empty without
    /// one): accepted in BROKER resources.
    pub plugin_broker_configs: Vec<String>,
}

impl ControllerSettings {
    /// What config changes are validated against.
    pub fn config_rules(&self) -> crate::controller::logic::configs::ConfigRules {
        crate::controller::logic::configs::ConfigRules {
            group_defaults: self.group_config_defaults,
            group_bounds: self.group_config_bounds,
            plugin_broker_configs: self.plugin_broker_configs.clone(),
        }
    }
}

/// Create topics. Answers with one result per requested topic, in request order.
#[derive(Message)]
#[rtype(result = "CreateTopicsResponse")]
pub struct CreateTopics {
    /// The request as the client sent it.
    pub request: CreateTopicsRequest,
    /// Its API version.
    pub version: i16,
    /// Who sent it.
    pub principal: Principal,
    /// Its client id.
    pub client_id: String,
}

/// Create the topics of a request too large to decode whole, read from where they are kept
/// and answered compactly (issue #11).
#[derive(Message)]
#[rtype(result = "logic::ListedCreation")]
pub struct CreateListedElements {
    /// The request's topics.
    pub topics: Arc<dyn logic::ListedElements>,
    /// Whether only to validate.
    pub validate_only: bool,
    /// The request's API version.
    pub version: i16,
    /// Who sent it.
    pub principal: Principal,
    /// Its client id.
    pub client_id: String,
}

/// Delete topics by name or id.
#[derive(Message)]
#[rtype(result = "DeleteTopicsResponse")]
pub struct DeleteTopics {
    /// The request as the client sent it.
    pub request: DeleteTopicsRequest,
    /// Its API version.
    pub version: i16,
    /// Who sent it.
    pub principal: Principal,
    /// Its client id.
    pub client_id: String,
}

/// Delete the topics of a DeleteTopics request too large to decode whole, read from where
/// they are kept and answered compactly (issue #11).
#[derive(Message)]
#[rtype(result = "logic::ListedDeletion")]
pub struct DeleteListedTopics {
    /// The request's entries.
    pub topics: Arc<dyn logic::ListedTopics>,
    /// The request's API version.
    pub version: i16,
    /// Who sent it.
    pub principal: Principal,
    /// Its client id.
    pub client_id: String,
}

/// Add partitions to topics.
#[derive(Message)]
#[rtype(result = "CreatePartitionsResponse")]
pub struct CreatePartitions {
    /// The request as the client sent it.
    pub request: CreatePartitionsRequest,
    /// Its API version.
    pub version: i16,
    /// Who sent it.
    pub principal: Principal,
    /// Its client id.
    pub client_id: String,
}

/// Add partitions to the topics of a request too large to decode whole, read from where they
/// are kept and answered compactly (issue #11).
#[derive(Message)]
#[rtype(result = "logic::ListedGrowth")]
pub struct CreateListedPartitions {
    /// The request's topics.
    pub topics: Arc<dyn logic::ListedElements<CreatePartitionsTopic>>,
    /// Whether only to validate.
    pub validate_only: bool,
    /// The request's API version.
    pub version: i16,
    /// Who sent it.
    pub principal: Principal,
    /// Its client id.
    pub client_id: String,
}

/// Append records the node itself produces. They are replayed on the working image first and
/// refused if they do not apply there.
#[derive(Message)]
#[rtype(result = "Result<MetadataLogId, MetadataLogError>")]
pub struct WriteRecords {
    /// The records, applied atomically.
    pub records: Vec<MetadataRecord>,
}

/// Register a node that joined the quorum (bootstrap features on an empty log,
/// RegisterController, RegisterBroker fenced with its epoch at its offset), decided on the
/// working image. Answers whether a broker registration was written (the broker then starts
/// fenced).
#[derive(Message)]
#[rtype(result = "Result<bool, MetadataLogError>")]
pub struct RegisterNode(pub NodeRegistration);

/// Fence a broker not heard from within `broker.session.timeout.ms` and move the leadership of
/// its partitions ([`crate::fencing::fence_broker`] on the working image). Answers whether
/// anything was written.
#[derive(Message)]
#[rtype(result = "Result<bool, MetadataLogError>")]
pub struct FenceBroker {
    /// The broker.
    pub broker_id: i32,
}

/// Unfence a broker that has caught up (of `incarnation_id`, when given). Answers whether
/// anything was written.
#[derive(Message)]
#[rtype(result = "Result<bool, MetadataLogError>")]
pub struct UnfenceBroker {
    /// The broker.
    pub broker_id: i32,
    /// Only this incarnation of it.
    pub incarnation_id: Option<Uuid>,
}

/// Internal: a write left the pipeline.
#[derive(Message)]
#[rtype(result = "()")]
struct WriteFinished {
    /// The generation of the working image it was validated on.
    generation: u64,
    /// The log index it was committed at; `None` when it failed.
    committed_at: Option<u64>,
    /// Brokers it registered (id, incarnation), whose epoch is that index.
    registered: Vec<(i32, Uuid)>,
}

/// The controller. State is plain fields: the mailbox serialises access.
pub struct Controller {
    committed: Arc<ArcSwap<MetadataImage>>,
    /// Committed image plus in-flight writes; `None` when nothing is in flight.
    working: Option<Arc<MetadataImage>>,
    in_flight: usize,
    submissions: mpsc::UnboundedSender<Submission>,
    pub(super) settings: ControllerSettings,
    rng: StdRng,
    /// The controller-mutation quota manager (KIP-599); `None` charges nothing.
    mutation_quotas: Option<Arc<QuotaManager>>,
    activation: watch::Receiver<Activation>,
    log: Arc<MetadataLog>,
    /// The term the working image was rebuilt for; `None` while not active.
    active_term: Option<u64>,
    /// The generation of the working image; batches carry it to the submitter.
    generation: u64,
    /// Generations below this are discarded (shared with the submitter, which raises it when
    /// a write fails).
    valid_from: Arc<AtomicU64>,
}

/// A request the controller answers with an error, without deciding it, when it is not the
/// active controller.
pub(crate) trait Refusable: Message + Send + 'static
where
    Self::Result: Send,
{
    /// The answer refusing every part of this request with `code`.
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result;
}

impl Controller {
    /// A controller writing through `log` and reading the image the loader publishes.
    ///
    /// Batches go to raft through one submitter task in the order the actor produced them, so
    /// the log order is the validation order.
    pub fn new(
        log: Arc<MetadataLog>,
        committed: Arc<ArcSwap<MetadataImage>>,
        settings: ControllerSettings,
    ) -> Self {
        let (submissions, queue) = mpsc::unbounded_channel::<Submission>();
        let valid_from = Arc::new(AtomicU64::new(0));
        tokio::spawn(submitter::run(log.clone(), queue, valid_from.clone()));
        let (activation_sender, activation) = watch::channel(Activation::Inactive);
        tokio::spawn(activation::run(log.clone(), activation_sender));
        if let Some(topic) = &settings.invalid_record_on_create {
            tracing::warn!(
                topic,
                "TEST HOOK: creating this topic writes a record that does not apply and stops every node"
            );
        }
        Controller {
            committed,
            working: None,
            in_flight: 0,
            submissions,
            settings,
            rng: StdRng::from_os_rng(),
            mutation_quotas: None,
            activation,
            log,
            active_term: None,
            generation: 0,
            valid_from,
        }
    }

    /// Rebuilds the working image from the published one when the controller became active in
    /// a new term or stopped being active.
    fn follow_activation(&mut self) {
        let term = match *self.activation.borrow() {
            Activation::Active { term } => Some(term),
            _ => None,
        };
        if term != self.active_term {
            self.active_term = term;
            self.discard_working();
        }
    }

    /// Drops the working image (its writes failed or belong to another term) and starts a new
    /// generation, so the batches validated on it are failed instead of written.
    fn discard_working(&mut self) {
        self.working = None;
        self.generation = (self.generation + 1).max(self.valid_from.load(Ordering::Acquire));
        self.valid_from.fetch_max(self.generation, Ordering::AcqRel);
    }

    /// Lets `msg` through when this controller is active; otherwise answers it: NOT_CONTROLLER
    /// on a node that does not lead, or after waiting for a new leader to catch up (the message
    /// is then handled again), REQUEST_TIMED_OUT if that takes longer than [`ACTIVATION_WAIT`].
    pub(super) fn admit<M>(
        &mut self,
        msg: M,
        ctx: &mut Context<Self>,
    ) -> Result<M, ResponseFuture<M::Result>>
    where
        M: Refusable,
        M::Result: Send,
        Self: Handler<M>,
    {
        self.follow_activation();
        let activation = *self.activation.borrow();
        match activation {
            Activation::Active { .. } => Ok(msg),
            // Raft made this node leader a moment ago and the activation task has not seen it
            // yet: wait for it to (it then catches up, and the request waits again).
            Activation::Inactive if self.raft_leads() => {
                Err(self.wait_then_resend(msg, ctx, |a| *a != Activation::Inactive))
            }
            Activation::Inactive => {
                let answer = msg.refuse(
                    ResponseError::NotController,
                    "This node is not the active controller.",
                );
                Err(Box::pin(async move { answer }))
            }
            Activation::CatchingUp { .. } => {
                Err(self
                    .wait_then_resend(msg, ctx, |a| !matches!(a, Activation::CatchingUp { .. })))
            }
        }
    }

    /// Whether this node is the active controller now (for its own periodic decisions, which
    /// are skipped rather than held while it is not).
    pub(super) fn is_active(&mut self) -> bool {
        self.follow_activation();
        matches!(*self.activation.borrow(), Activation::Active { .. })
    }

    /// Preferred-leader rebalancing and unclean-election settings.
    pub(super) fn leadership(&self) -> &LeadershipSettings {
        &self.settings.leadership
    }

    /// This node's id and the quorum's voter ids (ascending), as openraft knows them; ids that
    /// do not fit a Kafka node id are left out.
    pub(super) fn quorum_ids(&self) -> (i32, Vec<i32>) {
        let metrics = self.log.metrics();
        let local_id = i32::try_from(metrics.id).unwrap_or(-1);
        let mut voters: Vec<i32> = metrics
            .membership_config
            .membership()
            .voter_ids()
            .filter_map(|id| i32::try_from(id).ok())
            .collect();
        voters.sort_unstable();
        (local_id, voters)
    }

    /// Whether openraft has this node as the leader right now.
    fn raft_leads(&self) -> bool {
        let metrics = self.log.metrics();
        metrics.current_leader == Some(metrics.id)
    }

    /// Waits (at most [`ACTIVATION_WAIT`]) until the activation satisfies `settled`, then hands
    /// `msg` to the actor again unless this node no longer leads.
    fn wait_then_resend<M>(
        &self,
        msg: M,
        ctx: &mut Context<Self>,
        settled: impl Fn(&Activation) -> bool + Send + 'static,
    ) -> ResponseFuture<M::Result>
    where
        M: Refusable,
        M::Result: Send,
        Self: Handler<M>,
    {
        let mut activation = self.activation.clone();
        let address = ctx.address();
        Box::pin(async move {
            let outcome = tokio::time::timeout(ACTIVATION_WAIT, activation.wait_for(settled))
                .await
                .map(|state| state.map(|a| *a));
            match outcome {
                Ok(Ok(Activation::Inactive)) | Ok(Err(_)) => msg.refuse(
                    ResponseError::NotController,
                    "This node is no longer the active controller.",
                ),
                Ok(Ok(_)) => {
                    let stopped =
                        msg.refuse(ResponseError::NotController, "The controller stopped.");
                    address.send(msg).await.unwrap_or(stopped)
                }
                Err(_) => msg.refuse(
                    ResponseError::RequestTimedOut,
                    "The new active controller is still applying the metadata log.",
                ),
            }
        })
    }

    /// Charges CreateTopics, DeleteTopics and CreatePartitions to `quotas` (the node's
    /// controller-mutation quota manager).
    pub fn with_mutation_quotas(mut self, quotas: Arc<QuotaManager>) -> Self {
        self.mutation_quotas = Some(quotas);
        self
    }

    /// The KIP-599 quota of one topic mutation: strict from `strict_since` (clients that
    /// understand THROTTLING_QUOTA_EXCEEDED), permissive below.
    fn mutation_quota(
        &self,
        principal: &Principal,
        client_id: &str,
        version: i16,
        strict_since: i16,
    ) -> ControllerMutationQuota {
        match &self.mutation_quotas {
            Some(quotas) => {
                quotas.new_quota_for(&principal.name, client_id, version >= strict_since)
            }
            None => ControllerMutationQuota::Unbounded,
        }
    }

    pub(super) fn base_image(&self) -> Arc<MetadataImage> {
        match &self.working {
            Some(working) => working.clone(),
            None => self.committed.load_full(),
        }
    }

    /// Moves the working image forward by `records` and queues them for the log. Returns a
    /// receiver for the commit outcome, or the reason the records do not apply (a bug in the
    /// logic that produced them).
    fn append(
        &mut self,
        records: Vec<MetadataRecord>,
        ctx: &mut Context<Self>,
    ) -> Result<oneshot::Receiver<Result<MetadataLogId, MetadataLogError>>, String> {
        let base = self.base_image();
        let mut delta = MetadataDelta::new(base.clone());
        for record in &records {
            delta.replay(record).map_err(|e| e.to_string())?;
        }
        self.working = Some(Arc::new(delta.apply(base.provenance)));
        self.in_flight += 1;
        let registered: Vec<(i32, Uuid)> = records
            .iter()
            .filter_map(|record| match record {
                MetadataRecord::RegisterBroker(r) if r.broker_epoch == BROKER_EPOCH_AT_OFFSET => {
                    Some((r.broker_id, r.incarnation_id))
                }
                _ => None,
            })
            .collect();
        let mut records = records;
        if let Some(invalid) = self.test_invalid_record(&records) {
            records.push(invalid);
        }
        let (done, outcome) = oneshot::channel();
        let record_count = records.len();
        let generation = self.generation;
        if self
            .submissions
            .send(Submission {
                batch: MetadataBatch { records },
                generation,
                done,
            })
            .is_err()
        {
            return Err("the metadata log submitter has stopped".to_owned());
        }
        // Watch the outcome to retire the write from the pipeline whatever the caller does.
        let (forward, result) = oneshot::channel();
        let started = Instant::now();
        let address = ctx.address();
        actix::spawn(async move {
            let outcome = outcome
                .await
                .unwrap_or_else(|_| Err(MetadataLogError::Shutdown(String::new())));
            address.do_send(WriteFinished {
                generation,
                committed_at: outcome.as_ref().ok().map(|log_id| log_id.index),
                registered,
            });
            if outcome.is_ok() {
                gregor_metrics::controller_committed("metadata", record_count, started.elapsed());
            }
            let _ = forward.send(outcome);
        });
        Ok(result)
    }

    /// Test only (see [`ControllerSettings::invalid_record_on_create`]): the record that does
    /// not apply, when `records` create the hook's topic. It is written without being replayed
    /// on the working image: an unfencing of a broker id no broker can have.
    fn test_invalid_record(&self, records: &[MetadataRecord]) -> Option<MetadataRecord> {
        let topic = self.settings.invalid_record_on_create.as_deref()?;
        let creates = records
            .iter()
            .any(|r| matches!(r, MetadataRecord::Topic(t) if t.name == topic));
        creates.then(|| {
            tracing::warn!(topic, "TEST HOOK: writing a record that does not apply");
            MetadataRecord::UnfenceBroker(UnfenceBrokerRecord { id: -1, epoch: 0 })
        })
    }

    /// Sets the epoch of brokers registered by a write committed at `index` in the working
    /// image (which holds [`BROKER_EPOCH_AT_OFFSET`] for them until then).
    fn resolve_epochs(&mut self, registered: &[(i32, Uuid)], index: u64) {
        let Some(working) = self.working.clone() else {
            return;
        };
        let mut delta = MetadataDelta::new(working.clone());
        let mut changed = false;
        for (broker_id, incarnation_id) in registered {
            let Some(broker) = working.cluster.broker(*broker_id) else {
                continue;
            };
            if broker.incarnation_id != *incarnation_id || broker.epoch != BROKER_EPOCH_AT_OFFSET {
                continue;
            }
            let record = MetadataRecord::RegisterBroker(broker.to_record());
            changed |= delta.replay_at(&record, index).is_ok();
        }
        if changed {
            self.working = Some(Arc::new(delta.apply(working.provenance)));
        }
    }

    /// Writes records decided by `decide` on the working image (registrations, fencing);
    /// answers whether there was anything to write.
    pub(super) fn write_decided(
        &mut self,
        ctx: &mut Context<Self>,
        decide: impl FnOnce(&MetadataImage) -> Vec<MetadataRecord>,
    ) -> ResponseFuture<Result<bool, MetadataLogError>> {
        let records = decide(&self.base_image());
        if records.is_empty() {
            return Box::pin(async { Ok(false) });
        }
        match self.append(records, ctx) {
            Ok(outcome) => Box::pin(async move {
                outcome
                    .await
                    .unwrap_or_else(|_| Err(MetadataLogError::Shutdown(String::new())))
                    .map(|_| true)
            }),
            Err(bug) => Box::pin(async move { Err(MetadataLogError::Raft(bug)) }),
        }
    }

    /// Runs one mutation for `msg`: decide with `decide`, then either answer once leadership is
    /// confirmed (no records) or append and answer when committed, turning a failed commit into
    /// `fail`'s response.
    pub(super) fn mutate<M>(
        &mut self,
        ctx: &mut Context<Self>,
        msg: &M,
        decide: impl FnOnce(
            &MetadataImage,
            &mut MutationContext<'_>,
        ) -> logic::ControllerResult<M::Result>,
        fail: impl FnOnce(M::Result, ResponseError, &str) -> M::Result + Send + 'static,
    ) -> ResponseFuture<M::Result>
    where
        M: Refusable,
        M::Result: Send,
    {
        self.mutate_charged(ctx, msg, &mut Unlimited, decide, fail)
    }

    /// [`Controller::mutate`] charging `quota` for the mutations `decide` makes.
    fn mutate_charged<M>(
        &mut self,
        ctx: &mut Context<Self>,
        msg: &M,
        quota: &mut dyn MutationQuota,
        decide: impl FnOnce(
            &MetadataImage,
            &mut MutationContext<'_>,
        ) -> logic::ControllerResult<M::Result>,
        fail: impl FnOnce(M::Result, ResponseError, &str) -> M::Result + Send + 'static,
    ) -> ResponseFuture<M::Result>
    where
        M: Refusable,
        M::Result: Send,
    {
        let base = self.base_image();
        let result = {
            let mut mutation = MutationContext {
                rng: &mut self.rng,
                quota,
            };
            decide(&base, &mut mutation)
        };
        if result.records.is_empty() {
            return self.answer_when_still_leading(msg, result.response);
        }
        let response = result.response;
        match self.append(result.records, ctx) {
            Ok(outcome) => Box::pin(async move {
                match outcome.await {
                    Ok(Ok(_)) => response,
                    Ok(Err(error)) => {
                        tracing::error!(%error, "metadata write failed");
                        let code = match error {
                            MetadataLogError::NotLeader { .. } => ResponseError::NotController,
                            _ => ResponseError::UnknownServerError,
                        };
                        fail(response, code, &error.to_string())
                    }
                    Err(_) => fail(
                        response,
                        ResponseError::UnknownServerError,
                        "the controller stopped before the write finished",
                    ),
                }
            }),
            Err(bug) => {
                tracing::error!(%bug, "controller produced records that do not apply");
                Box::pin(async move { fail(response, ResponseError::UnknownServerError, &bug) })
            }
        }
    }
    /// Answers `response`, decided without writing anything, once a quorum has confirmed that
    /// this node still leads (openraft's read index); else refuses `msg` with NOT_CONTROLLER.
    /// A leader cut off from the quorum keeps leading in openraft's eyes until it hears a
    /// higher term, while the others elect a new leader and commit without it: its image can
    /// then lack a topic it would answer UNKNOWN_TOPIC_OR_PARTITION for (Kafka's leader
    /// resigns after its check-quorum timeout; confirming each such answer closes the window).
    fn answer_when_still_leading<M>(
        &self,
        msg: &M,
        response: M::Result,
    ) -> ResponseFuture<M::Result>
    where
        M: Refusable,
        M::Result: Send,
    {
        let stale = msg.refuse(
            ResponseError::NotController,
            "This node could not confirm that it is still the active controller.",
        );
        let log = self.log.clone();
        Box::pin(async move {
            match tokio::time::timeout(ACTIVATION_WAIT, log.read_index()).await {
                Ok(Ok(_)) => response,
                Ok(Err(error)) => {
                    tracing::debug!(%error, "leadership not confirmed; refusing an answer that writes nothing");
                    stale
                }
                Err(_) => stale,
            }
        })
    }
}

impl Actor for Controller {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Self::Context) {
        elections::start_timers(&self.settings.leadership, ctx);
    }
}

impl Handler<WriteFinished> for Controller {
    type Result = ();

    fn handle(&mut self, msg: WriteFinished, _: &mut Self::Context) {
        self.in_flight = self.in_flight.saturating_sub(1);
        // A write of a discarded generation changes nothing: its image is gone already.
        if msg.generation == self.generation {
            match msg.committed_at {
                Some(index) => self.resolve_epochs(&msg.registered, index),
                // The working image holds records that never committed, and the batches
                // behind them were validated on those: start over from the published image.
                None => self.discard_working(),
            }
        }
        if self.in_flight == 0 {
            self.working = None;
        }
    }
}

impl Handler<CreateTopics> for Controller {
    type Result = ResponseFuture<CreateTopicsResponse>;

    fn handle(&mut self, msg: CreateTopics, ctx: &mut Self::Context) -> Self::Result {
        self.topics_charged(
            msg,
            ctx,
            |msg| (&msg.principal, &msg.client_id, msg.version),
            6,
            |msg, image, rules, mutation| {
                logic::create_topics(image, &msg.request, msg.version, &rules.defaults, mutation)
            },
            |mut response: CreateTopicsResponse, code, message| {
                for topic in &mut response.topics {
                    if topic.error_code == 0 {
                        topic.error_code = code.code();
                        topic.error_message = Some(StrBytes::from_string(message.to_owned()));
                    }
                }
                response
            },
            |response| &mut response.throttle_time_ms,
        )
    }
}

impl Handler<CreateListedElements> for Controller {
    type Result = ResponseFuture<logic::ListedCreation>;

    fn handle(&mut self, msg: CreateListedElements, ctx: &mut Self::Context) -> Self::Result {
        self.topics_charged(
            msg,
            ctx,
            |msg| (&msg.principal, &msg.client_id, msg.version),
            6,
            |msg, image, rules, mutation| {
                logic::create_listed_topics(
                    image,
                    msg.topics.as_ref(),
                    msg.validate_only,
                    msg.version,
                    &rules.defaults,
                    mutation,
                )
            },
            logic::ListedCreation::fail_succeeded,
            |response| &mut response.throttle_time_ms,
        )
    }
}

impl Controller {
    /// Decides a topic creation or deletion with `decide`, charged to the sender's mutation
    /// quota (strict from `strict_from`: CreateTopics v6, DeleteTopics v5), whose throttle is
    /// added to the answer's (`throttle`).
    #[allow(clippy::too_many_arguments)]
    fn topics_charged<M>(
        &mut self,
        msg: M,
        ctx: &mut Context<Self>,
        sender: impl Fn(&M) -> (&Principal, &str, i16),
        strict_from: i16,
        decide: impl FnOnce(
            &M,
            &MetadataImage,
            TopicRules,
            &mut MutationContext<'_>,
        ) -> logic::ControllerResult<M::Result>,
        fail: impl FnOnce(M::Result, ResponseError, &str) -> M::Result + Send + 'static,
        throttle: fn(&mut M::Result) -> &mut i32,
    ) -> ResponseFuture<M::Result>
    where
        M: Refusable,
        M::Result: Send,
        Self: Handler<M>,
    {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        let rules = TopicRules {
            defaults: self.settings.defaults,
            delete_topic_enable: self.settings.delete_topic_enable,
        };
        let (principal, client_id, version) = sender(&msg);
        let mut quota = self.mutation_quota(principal, client_id, version, strict_from);
        let response = self.mutate_charged(
            ctx,
            &msg,
            &mut quota,
            |image, mutation| decide(&msg, image, rules, mutation),
            fail,
        );
        Box::pin(async move {
            let mut response = response.await;
            let current = throttle(&mut response);
            *current = with_throttle(*current, &quota);
            response
        })
    }
}

impl Handler<DeleteTopics> for Controller {
    type Result = ResponseFuture<DeleteTopicsResponse>;

    fn handle(&mut self, msg: DeleteTopics, ctx: &mut Self::Context) -> Self::Result {
        self.topics_charged(
            msg,
            ctx,
            |msg| (&msg.principal, &msg.client_id, msg.version),
            5,
            |msg, image, rules, mutation| {
                logic::delete_topics(
                    image,
                    &msg.request,
                    msg.version,
                    rules.delete_topic_enable,
                    mutation,
                )
            },
            |mut response: DeleteTopicsResponse, code, message| {
                for topic in &mut response.responses {
                    if topic.error_code == 0 {
                        topic.error_code = code.code();
                        topic.error_message = Some(StrBytes::from_string(message.to_owned()));
                    }
                }
                response
            },
            |response| &mut response.throttle_time_ms,
        )
    }
}

impl Handler<DeleteListedTopics> for Controller {
    type Result = ResponseFuture<logic::ListedDeletion>;

    fn handle(&mut self, msg: DeleteListedTopics, ctx: &mut Self::Context) -> Self::Result {
        self.topics_charged(
            msg,
            ctx,
            |msg| (&msg.principal, &msg.client_id, msg.version),
            5,
            |msg, image, rules, mutation| {
                logic::delete_listed_topics(
                    image,
                    msg.topics.as_ref(),
                    msg.version,
                    rules.delete_topic_enable,
                    mutation,
                )
            },
            |mut response: logic::ListedDeletion, code, message| {
                response.fail_deleted(code.code(), message);
                response
            },
            |response| &mut response.throttle_time_ms,
        )
    }
}

impl Handler<CreatePartitions> for Controller {
    type Result = ResponseFuture<CreatePartitionsResponse>;

    fn handle(&mut self, msg: CreatePartitions, ctx: &mut Self::Context) -> Self::Result {
        self.topics_charged(
            msg,
            ctx,
            |msg| (&msg.principal, &msg.client_id, msg.version),
            3,
            |msg, image, _, mutation| {
                logic::create_partitions(image, &msg.request, msg.version, mutation)
            },
            |mut response: CreatePartitionsResponse, code, message| {
                for topic in &mut response.results {
                    if topic.error_code == 0 {
                        topic.error_code = code.code();
                        topic.error_message = Some(StrBytes::from_string(message.to_owned()));
                    }
                }
                response
            },
            |response| &mut response.throttle_time_ms,
        )
    }
}

impl Handler<CreateListedPartitions> for Controller {
    type Result = ResponseFuture<logic::ListedGrowth>;

    fn handle(&mut self, msg: CreateListedPartitions, ctx: &mut Self::Context) -> Self::Result {
        self.topics_charged(
            msg,
            ctx,
            |msg| (&msg.principal, &msg.client_id, msg.version),
            3,
            |msg, image, _, mutation| {
                logic::create_listed_partitions(
                    image,
                    msg.topics.as_ref(),
                    msg.validate_only,
                    mutation,
                )
            },
            logic::ListedGrowth::fail_succeeded,
            |response| &mut response.throttle_time_ms,
        )
    }
}

impl Handler<WriteRecords> for Controller {
    type Result = ResponseFuture<Result<MetadataLogId, MetadataLogError>>;

    fn handle(&mut self, msg: WriteRecords, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        match self.append(msg.records, ctx) {
            Ok(outcome) => Box::pin(async move {
                outcome
                    .await
                    .unwrap_or_else(|_| Err(MetadataLogError::Shutdown(String::new())))
            }),
            Err(bug) => Box::pin(async move { Err(MetadataLogError::Raft(bug)) }),
        }
    }
}

impl Handler<RegisterNode> for Controller {
    type Result = ResponseFuture<Result<bool, MetadataLogError>>;

    fn handle(&mut self, msg: RegisterNode, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        let decision = registration::register_node(
            &self.base_image(),
            &msg.0,
            &self.settings.bootstrap_records,
        );
        let registers_broker = decision.registers_broker;
        let written = self.write_decided(ctx, |_| decision.records);
        Box::pin(async move { written.await.map(|_| registers_broker) })
    }
}

impl Handler<FenceBroker> for Controller {
    type Result = ResponseFuture<Result<bool, MetadataLogError>>;

    fn handle(&mut self, msg: FenceBroker, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        let image = self.base_image();
        let policy = self.settings.leadership.unclean;
        let records = elections::with_leaderless_elections(
            &image,
            crate::fencing::fence_broker(&image, msg.broker_id),
            &policy,
        );
        self.write_decided(ctx, |_| records)
    }
}

impl Handler<UnfenceBroker> for Controller {
    type Result = ResponseFuture<Result<bool, MetadataLogError>>;

    fn handle(&mut self, msg: UnfenceBroker, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        let image = self.base_image();
        let policy = self.settings.leadership.unclean;
        let records = elections::with_leaderless_elections(
            &image,
            registration::unfence_broker(&image, msg.broker_id, msg.incarnation_id),
            &policy,
        );
        self.write_decided(ctx, |_| records)
    }
}

/// A log error for internal writes refused because this node is not the active controller.
fn refused_write<T>(code: ResponseError, message: &str) -> Result<T, MetadataLogError> {
    Err(match code {
        ResponseError::NotController => MetadataLogError::NotLeader { leader_id: None },
        _ => MetadataLogError::Raft(message.to_owned()),
    })
}

impl Refusable for WriteRecords {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        refused_write(code, message)
    }
}

impl Refusable for RegisterNode {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        refused_write(code, message)
    }
}

impl Refusable for FenceBroker {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        refused_write(code, message)
    }
}

impl Refusable for UnfenceBroker {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        refused_write(code, message)
    }
}

impl Refusable for CreateTopics {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        let names = self.request.topics.iter().map(|t| t.name.clone()).collect();
        failed_create_topics(names, code, message)
    }
}

impl Refusable for CreateListedElements {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        logic::ListedCreation::refused(code.code(), message)
    }
}

impl Refusable for DeleteTopics {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        failed_delete_topics_for(&self.request, self.version)(code, message)
    }
}

impl Refusable for DeleteListedTopics {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        logic::ListedDeletion::refused(code.code(), message)
    }
}

impl Refusable for CreateListedPartitions {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        logic::ListedGrowth::refused(code.code(), message)
    }
}

impl Refusable for CreatePartitions {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        let names = self.request.topics.iter().map(|t| t.name.clone()).collect();
        failed_create_partitions(names, code, message)
    }
}

/// The response's throttle time with what is left of the mutation quota's throttle (the
/// quota's throttle decays while the write commits, as Kafka computes it when responding).
fn with_throttle(current: i32, quota: &ControllerMutationQuota) -> i32 {
    current.max(i32::try_from(quota.throttle_time_ms()).unwrap_or(i32::MAX))
}

/// A CreateTopics response failing every named topic, for when the controller cannot be asked.
pub fn failed_create_topics(
    names: Vec<TopicName>,
    code: ResponseError,
    message: &str,
) -> CreateTopicsResponse {
    CreateTopicsResponse::default().with_topics(
        names
            .into_iter()
            .map(|name| {
                CreatableTopicResult::default()
                    .with_name(name)
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(message.to_owned())))
            })
            .collect(),
    )
}

/// A CreatePartitions response failing every named topic.
pub fn failed_create_partitions(
    names: Vec<TopicName>,
    code: ResponseError,
    message: &str,
) -> CreatePartitionsResponse {
    CreatePartitionsResponse::default().with_results(
        names
            .into_iter()
            .map(|name| {
                CreatePartitionsTopicResult::default()
                    .with_name(name)
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(message.to_owned())))
            })
            .collect(),
    )
}

/// A builder of DeleteTopics responses failing every topic of `request` (names before v6, names
/// or ids from v6), for when the controller cannot be asked.
pub fn failed_delete_topics_for(
    request: &DeleteTopicsRequest,
    version: i16,
) -> impl FnOnce(ResponseError, &str) -> DeleteTopicsResponse {
    let targets: Vec<(Option<TopicName>, uuid::Uuid)> = if version >= 6 {
        request
            .topics
            .iter()
            .map(|t| (t.name.clone(), t.topic_id))
            .collect()
    } else {
        request
            .topic_names
            .iter()
            .map(|n| (Some(n.clone()), uuid::Uuid::nil()))
            .collect()
    };
    move |code, message| {
        DeleteTopicsResponse::default().with_responses(
            targets
                .into_iter()
                .map(|(name, id)| {
                    DeletableTopicResult::default()
                        .with_name(name)
                        .with_topic_id(id)
                        .with_error_code(code.code())
                        .with_error_message(Some(StrBytes::from_string(message.to_owned())))
                })
                .collect(),
        )
    }
}
