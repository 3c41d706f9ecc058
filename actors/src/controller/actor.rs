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

use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;
use arc_swap::ArcSwap;
use kafka_protocol::error::ResponseError;
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
use tokio::sync::{mpsc, oneshot};

use gregor_publishers::records::{MetadataBatch, MetadataRecord};
use gregor_publishers::{MetadataDelta, MetadataImage};

use super::logic::{self, MutationContext, MutationQuota, TopicDefaults, Unlimited};
use super::submitter::{self, Submission};
use crate::context::Principal;
use crate::quota::{ControllerMutationQuota, QuotaManager};
use crate::raft::{MetadataLog, MetadataLogError, MetadataLogId};

/// The CreateTopics version the controller's own requests (auto-creation) use.
pub const LATEST_CREATE_TOPICS_VERSION: i16 = 7;

/// Settings the controller applies to mutations.
#[derive(Clone, Debug)]
pub struct ControllerSettings {
    /// `num.partitions` and `default.replication.factor`.
    pub defaults: TopicDefaults,
    /// `delete.topic.enable`.
    pub delete_topic_enable: bool,
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

/// Append records the node itself produces (bootstrap features, registrations).
#[derive(Message)]
#[rtype(result = "Result<MetadataLogId, MetadataLogError>")]
pub struct WriteRecords {
    /// The records, applied atomically.
    pub records: Vec<MetadataRecord>,
}

/// Internal: a write left the pipeline.
#[derive(Message)]
#[rtype(result = "()")]
struct WriteFinished {
    succeeded: bool,
}

/// The controller. State is plain fields: the mailbox serialises access.
pub struct Controller {
    committed: Arc<ArcSwap<MetadataImage>>,
    /// Committed image plus in-flight writes; `None` when nothing is in flight.
    working: Option<Arc<MetadataImage>>,
    in_flight: usize,
    submissions: mpsc::UnboundedSender<Submission>,
    settings: ControllerSettings,
    rng: StdRng,
    /// The controller-mutation quota manager (KIP-599); `None` charges nothing.
    mutation_quotas: Option<Arc<QuotaManager>>,
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
        tokio::spawn(submitter::run(log, queue));
        Controller {
            committed,
            working: None,
            in_flight: 0,
            submissions,
            settings,
            rng: StdRng::from_os_rng(),
            mutation_quotas: None,
        }
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
        let (done, outcome) = oneshot::channel();
        let record_count = records.len();
        if self
            .submissions
            .send(Submission {
                batch: MetadataBatch { records },
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
                succeeded: outcome.is_ok(),
            });
            if outcome.is_ok() {
                gregor_metrics::controller_committed("metadata", record_count, started.elapsed());
            }
            let _ = forward.send(outcome);
        });
        Ok(result)
    }

    /// Runs one mutation: decide with `decide`, then either answer at once (no records) or
    /// append and answer when committed, turning a failed commit into `fail`'s response.
    pub(super) fn mutate<R: Send + 'static>(
        &mut self,
        ctx: &mut Context<Self>,
        decide: impl FnOnce(&MetadataImage, &mut MutationContext<'_>) -> logic::ControllerResult<R>,
        fail: impl FnOnce(R, ResponseError, &str) -> R + Send + 'static,
    ) -> ResponseFuture<R> {
        self.mutate_charged(ctx, &mut Unlimited, decide, fail)
    }

    /// [`Controller::mutate`] charging `quota` for the mutations `decide` makes.
    fn mutate_charged<R: Send + 'static>(
        &mut self,
        ctx: &mut Context<Self>,
        quota: &mut dyn MutationQuota,
        decide: impl FnOnce(&MetadataImage, &mut MutationContext<'_>) -> logic::ControllerResult<R>,
        fail: impl FnOnce(R, ResponseError, &str) -> R + Send + 'static,
    ) -> ResponseFuture<R> {
        let base = self.base_image();
        let result = {
            let mut mutation = MutationContext {
                rng: &mut self.rng,
                quota,
            };
            decide(&base, &mut mutation)
        };
        if result.records.is_empty() {
            return Box::pin(async move { result.response });
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
}

impl Actor for Controller {
    type Context = Context<Self>;
}

impl Handler<WriteFinished> for Controller {
    type Result = ();

    fn handle(&mut self, msg: WriteFinished, _: &mut Self::Context) {
        self.in_flight = self.in_flight.saturating_sub(1);
        // After a failure the working image holds records that never committed: drop it.
        if self.in_flight == 0 || !msg.succeeded {
            self.working = None;
        }
    }
}

impl Handler<CreateTopics> for Controller {
    type Result = ResponseFuture<CreateTopicsResponse>;

    fn handle(&mut self, msg: CreateTopics, ctx: &mut Self::Context) -> Self::Result {
        let defaults = self.settings.defaults;
        let mut quota = self.mutation_quota(&msg.principal, &msg.client_id, msg.version, 6);
        let response = self.mutate_charged(
            ctx,
            &mut quota,
            |image, mutation| {
                logic::create_topics(image, &msg.request, msg.version, &defaults, mutation)
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
        );
        Box::pin(async move {
            let mut response = response.await;
            response.throttle_time_ms = with_throttle(response.throttle_time_ms, &quota);
            response
        })
    }
}

impl Handler<DeleteTopics> for Controller {
    type Result = ResponseFuture<DeleteTopicsResponse>;

    fn handle(&mut self, msg: DeleteTopics, ctx: &mut Self::Context) -> Self::Result {
        let enabled = self.settings.delete_topic_enable;
        let mut quota = self.mutation_quota(&msg.principal, &msg.client_id, msg.version, 5);
        let response = self.mutate_charged(
            ctx,
            &mut quota,
            |image, mutation| {
                logic::delete_topics(image, &msg.request, msg.version, enabled, mutation)
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
        );
        Box::pin(async move {
            let mut response = response.await;
            response.throttle_time_ms = with_throttle(response.throttle_time_ms, &quota);
            response
        })
    }
}

impl Handler<CreatePartitions> for Controller {
    type Result = ResponseFuture<CreatePartitionsResponse>;

    fn handle(&mut self, msg: CreatePartitions, ctx: &mut Self::Context) -> Self::Result {
        let mut quota = self.mutation_quota(&msg.principal, &msg.client_id, msg.version, 3);
        let response = self.mutate_charged(
            ctx,
            &mut quota,
            |image, mutation| logic::create_partitions(image, &msg.request, msg.version, mutation),
            |mut response: CreatePartitionsResponse, code, message| {
                for topic in &mut response.results {
                    if topic.error_code == 0 {
                        topic.error_code = code.code();
                        topic.error_message = Some(StrBytes::from_string(message.to_owned()));
                    }
                }
                response
            },
        );
        Box::pin(async move {
            let mut response = response.await;
            response.throttle_time_ms = with_throttle(response.throttle_time_ms, &quota);
            response
        })
    }
}

impl Handler<WriteRecords> for Controller {
    type Result = ResponseFuture<Result<MetadataLogId, MetadataLogError>>;

    fn handle(&mut self, msg: WriteRecords, ctx: &mut Self::Context) -> Self::Result {
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
