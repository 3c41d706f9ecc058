//! CreateTopics (19), DeleteTopics (20), CreatePartitions (37): handed to the controller actor,
//! which validates against its working image, commits the records and answers.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use gregor_publishers::acl::{AclOperation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteTopicsRequest, DeleteTopicsResponse, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::authorize::{denied_once, AUTHORIZATION_FAILED};
use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{Caller, ControllerForwarder, Forwarded, HandlerContext, RequestInfo};
use crate::controller::logic::{
    ListedAlone, ListedCreation, ListedDeletion, ListedElements, ListedGrowth, ListedOutcome,
    ListedTopics,
};
use crate::controller::{
    self, CreateListedElements, CreateListedPartitions, CreatePartitions, CreateTopics,
    DeleteListedTopics, DeleteTopics,
};

/// Why the controller could not be asked: its mailbox is gone, so the node is shutting down.
fn unavailable(error: &actix::MailboxError) -> (ResponseError, String) {
    tracing::error!(%error, "controller actor unavailable");
    (
        ResponseError::NotController,
        format!("The controller is not available ({error}); retry against another node"),
    )
}

/// The active controller to hand the authorized part of a request to, when this broker refused
/// another part (so it did not forward the request whole) and another node leads the quorum.
fn remote_controller(
    ctx: &HandlerContext,
    refused_some: bool,
) -> Option<&Arc<dyn ControllerForwarder>> {
    ctx.forwarder
        .as_ref()
        .filter(|_| refused_some && ctx.quorum.as_ref().is_some_and(|q| !q.is_leader()))
}

/// The answer to a topic request: the active controller's when it was forwarded there, else
/// this node's controller actor's for `msg` (which refuses every part with the forward's
/// failure, if it had one); `unavailable` builds the answer when the actor is gone.
async fn decided<M>(
    ctx: &HandlerContext,
    info: &RequestInfo,
    forwarded: Forwarded<M::Result>,
    msg: M,
    unavailable_answer: impl FnOnce(ResponseError, &str) -> M::Result,
) -> M::Result
where
    M: crate::controller::Refusable,
    M::Result: Send,
    controller::Controller: actix::Handler<M>,
{
    match ctx.answer_or_ask(info, forwarded, msg).await {
        Ok(response) => response,
        Err(error) => {
            let (code, message) = unavailable(&error);
            unavailable_answer(code, &message)
        }
    }
}

/// Puts results for the `denied` names back among the controller's, in request order (one per
/// distinct name, as the controller answers).
fn merge_in_request_order<T>(
    requested: &[TopicName],
    denied: &HashSet<String>,
    decided: Vec<T>,
    name_of: impl Fn(&T) -> &str,
    refused: impl Fn(&TopicName) -> T,
) -> Vec<T> {
    if denied.is_empty() {
        return decided;
    }
    let mut by_name: HashMap<String, T> = decided
        .into_iter()
        .map(|result| (name_of(&result).to_owned(), result))
        .collect();
    let mut seen = HashSet::new();
    requested
        .iter()
        .filter(|name| seen.insert(name.as_str()))
        .filter_map(|name| match denied.contains(name.as_str()) {
            true => Some(refused(name)),
            false => by_name.remove(name.as_str()),
        })
        .collect()
}

/// Who may create the topics of one CreateTopics request. Kafka: CREATE on the cluster covers
/// every topic, else CREATE on each; a created topic's configs are shown only to who may
/// DESCRIBE_CONFIGS it.
pub struct CreateTopicsAccess<'a> {
    access: Access<'a>,
    each_topic: bool,
}

impl<'a> CreateTopicsAccess<'a> {
    /// Checks CREATE on the cluster (logged when denied, as the decoded request's check is).
    pub fn new(ctx: &'a HandlerContext, info: &'a RequestInfo) -> Self {
        let access = Access::new(ctx, info);
        let each_topic = access.is_enforced() && !access.allows_cluster(AclOperation::Create);
        CreateTopicsAccess { access, each_topic }
    }

    /// Whether each topic's CREATE is checked (an authorizer, and no CREATE on the cluster).
    pub fn checks_each_topic(&self) -> bool {
        self.each_topic
    }

    /// Whether the topic `name`, named once, may be created; a denial is logged. A name given
    /// twice is the controller's INVALID_REQUEST whatever the ACLs say, so it is not asked.
    pub fn may_create(&self, name: &str) -> bool {
        !self.each_topic
            || self
                .access
                .allows(AclOperation::Create, ResourceType::Topic, name)
    }

    /// Whether the created topic `name`'s configs are shown (asked quietly, as a filter).
    fn shows_configs(&self, name: &str) -> bool {
        self.access
            .quietly_allows(AclOperation::DescribeConfigs, ResourceType::Topic, name)
    }
}

/// The answer to a topic whose CREATE is denied.
pub fn creation_denied(name: TopicName) -> CreatableTopicResult {
    CreatableTopicResult::default()
        .with_name(name)
        .with_error_code(ResponseError::TopicAuthorizationFailed.code())
        .with_error_message(Some(StrBytes::from_static_str(AUTHORIZATION_FAILED)))
        .with_num_partitions(-1)
        .with_replication_factor(-1)
}

/// What a created topic's answer shows a principal that may not describe its configs.
fn hide_configs(result: &mut CreatableTopicResult) {
    result.configs = Some(Vec::new());
    result.num_partitions = -1;
    result.replication_factor = -1;
    result.topic_config_error_code = ResponseError::TopicAuthorizationFailed.code();
}

pub(super) async fn create_topics(
    ctx: &HandlerContext,
    info: &RequestInfo,
    mut request: CreateTopicsRequest,
) -> ApiResponse {
    let names: Vec<_> = request.topics.iter().map(|t| t.name.clone()).collect();
    let access = CreateTopicsAccess::new(ctx, info);
    let denied = if access.checks_each_topic() {
        denied_once(
            &access.access,
            AclOperation::Create,
            names.iter().map(|n| n.as_str()),
        )
    } else {
        HashSet::new()
    };
    request.topics.retain(|t| !denied.contains(t.name.as_str()));
    let forwarded = match remote_controller(ctx, !denied.is_empty()) {
        Some(forwarder) => {
            forwarder
                .create_topics(request.clone(), info.api_version, Some(Caller::of(info)))
                .await
        }
        None => Forwarded::Unreachable,
    };
    let response = decided(
        ctx,
        info,
        forwarded,
        CreateTopics {
            request,
            version: info.api_version,
            principal: (*info.principal).clone(),
            client_id: info.client_id.to_string(),
        },
        |code, message| controller::failed_create_topics(names.clone(), code, message),
    )
    .await;
    let mut response = response;
    response.topics = merge_in_request_order(
        &names,
        &denied,
        std::mem::take(&mut response.topics),
        |t| t.name.as_str(),
        |name| creation_denied(name.clone()),
    );
    if access.access.is_enforced() {
        for topic in response.topics.iter_mut().filter(|t| t.error_code == 0) {
            if !access.shows_configs(&topic.name) {
                hide_configs(topic);
            }
        }
    }
    let mut errors = ErrorCounts::default();
    errors.add_all(response.topics.iter().map(|t| t.error_code));
    ApiResponse::throttled(
        response.throttle_time_ms,
        ResponseKind::CreateTopics(response),
        errors,
    )
}

/// CreateTopics for a request whose topics stay in its frame (`ListedElements`, which leaves out
/// the names `access` denied): the answer's body lists no topics, and the returned creation
/// answers each topic given to the controller, for the caller to write as it sends the answer
/// (with the denied names answered [`creation_denied`] in their place).
pub async fn create_listed_topics(
    ctx: &HandlerContext,
    info: &RequestInfo,
    topics: Arc<dyn ListedElements>,
    validate_only: bool,
    access: &CreateTopicsAccess<'_>,
) -> (ApiResponse, ListedCreation) {
    let listed = topics.listed();
    let denied = topics.denied();
    let mut creation = match ctx
        .ask_controller(
            info.controller_failure.as_ref(),
            CreateListedElements {
                topics: topics.clone(),
                validate_only,
                version: info.api_version,
                principal: (*info.principal).clone(),
                client_id: info.client_id.to_string(),
            },
        )
        .await
    {
        Ok(creation) => creation,
        Err(error) => {
            let (code, message) = unavailable(&error);
            ListedCreation::refused(code.code(), &message)
        }
    };
    if access.access.is_enforced() {
        hide_listed_configs(topics.as_ref(), &mut creation, |name| {
            access.shows_configs(name)
        });
    }
    let errors = ErrorCounts::of_listed(&creation, listed, denied, |outcome| match outcome {
        ListedOutcome::Created { result, .. } => result.error_code,
        ListedOutcome::Failed { code, .. } => *code,
    });
    let response = CreateTopicsResponse::default().with_throttle_time_ms(creation.throttle_time_ms);
    let answer = ApiResponse::throttled(
        creation.throttle_time_ms,
        ResponseKind::CreateTopics(response),
        errors,
    );
    (answer, creation)
}

/// Hides the configs of each created topic of `creation` that `shows` refuses, as the decoded
/// request's answer does. Each created topic has an outcome of its own
/// (`logic::create_listed_topics`), so changing it changes that topic's answer only; the walk
/// stops at the last created topic. Should the topics not read again, every created topic's
/// configs are hidden: they are never shown unchecked.
fn hide_listed_configs(
    topics: &dyn ListedElements,
    creation: &mut ListedCreation,
    mut shows: impl FnMut(&str) -> bool,
) {
    let created = |outcome: &ListedOutcome| matches!(outcome, ListedOutcome::Created { result, .. } if result.error_code == 0);
    let mut left = creation.outcomes.iter().filter(|o| created(o)).count();
    if left == 0 || creation.refused.is_some() {
        return;
    }
    let hidden = Arc::new(Some(Vec::new()));
    let hide = |outcome: &mut ListedOutcome| {
        if let ListedOutcome::Created { result, configs } = outcome {
            hide_configs(result);
            *configs = hidden.clone();
        }
    };
    let mut decided = 0;
    let walked = topics.each_first(&mut |topic, _| {
        let at = creation.per_element.get(decided).map(|at| *at as usize);
        decided += 1;
        if let Some(outcome) = at.and_then(|at| creation.outcomes.get_mut(at)) {
            if created(outcome) {
                left -= 1;
                if !shows(topic.name.as_str()) {
                    hide(outcome);
                }
            }
        }
        left > 0
    });
    if let Err(error) = walked {
        tracing::error!(%error, "a CreateTopics request could not be read again: no configs shown");
        creation
            .outcomes
            .iter_mut()
            .filter(|o| created(o))
            .for_each(hide);
    }
}

pub(super) async fn delete_topics(
    ctx: &HandlerContext,
    info: &RequestInfo,
    mut request: DeleteTopicsRequest,
) -> ApiResponse {
    // Kafka: DELETE on the cluster covers every topic, else DESCRIBE and DELETE on each name or
    // id listed alone once (the rest are the controller's INVALID_REQUEST, as in Kafka's
    // `ControllerApis.deleteTopics`); a topic named by id that may not be described is
    // answered without its name. Refused topics are answered after the others (Kafka's order
    // is unspecified).
    let access = DeleteTopicsAccess::new(ctx, info);
    let mut refused: Vec<DeletableTopicResult> = Vec::new();
    if access.checks_each_topic() {
        let image = ctx.image.load();
        let alone = ListedAlone::of(&request);
        let spelled = request
            .topic_names
            .iter()
            .map(|name| (Some(name), uuid::Uuid::nil()))
            .chain(request.topics.iter().map(|t| (t.name.as_ref(), t.topic_id)));
        let denied: Vec<bool> = spelled
            .map(|(name, id)| {
                let denial =
                    match (name, id.is_nil()) {
                        (Some(name), true) if alone.name_times(name.as_str()) == 1 => {
                            (!access.may_delete(name)).then(|| Some(name.clone()))
                        }
                        (None, false) if alone.id_times(&id) == 1 => {
                            image.topics.get_by_id(&id).and_then(|known| {
                                let shown = access.denial_by_id(&known.name)?;
                                Some(shown.then(|| {
                                    TopicName(StrBytes::from_string(known.name.to_string()))
                                }))
                            })
                        }
                        _ => None,
                    };
                if let Some(name) = &denial {
                    refused.push(deletion_denied(name.clone(), id));
                }
                denial.is_some()
            })
            .collect();
        let mut denied = denied.into_iter();
        request
            .topic_names
            .retain(|_| !denied.next().unwrap_or(false));
        request.topics.retain(|_| !denied.next().unwrap_or(false));
    }
    let fallback = controller::failed_delete_topics_for(&request, info.api_version);
    let forwarded = match remote_controller(ctx, !refused.is_empty()) {
        Some(forwarder) => {
            forwarder
                .delete_topics(request.clone(), info.api_version, Some(Caller::of(info)))
                .await
        }
        None => Forwarded::Unreachable,
    };
    let response = decided(
        ctx,
        info,
        forwarded,
        DeleteTopics {
            request,
            version: info.api_version,
            principal: (*info.principal).clone(),
            client_id: info.client_id.to_string(),
        },
        fallback,
    )
    .await;
    let mut response = response;
    response.responses.extend(refused);
    let mut errors = ErrorCounts::default();
    errors.add_all(response.responses.iter().map(|t| t.error_code));
    ApiResponse::throttled(
        response.throttle_time_ms,
        ResponseKind::DeleteTopics(response),
        errors,
    )
}

/// How DeleteTopics is authorized for a request whose names stay in its frame: DELETE on the
/// cluster covers every topic, else DESCRIBE and DELETE are checked on each name named once
/// (a repeated name is the controller's INVALID_REQUEST, unchecked, as `denied_once` leaves it).
pub struct DeleteTopicsAccess<'a> {
    access: Access<'a>,
    each_topic: bool,
}

impl<'a> DeleteTopicsAccess<'a> {
    pub fn new(ctx: &'a HandlerContext, info: &'a RequestInfo) -> Self {
        let access = Access::new(ctx, info);
        let each_topic = access.is_enforced() && !access.allows_cluster(AclOperation::Delete);
        DeleteTopicsAccess { access, each_topic }
    }

    /// Whether each topic is checked.
    pub fn checks_each_topic(&self) -> bool {
        self.each_topic
    }

    /// Whether the topic `name`, listed once by name, may be deleted.
    pub fn may_delete(&self, name: &str) -> bool {
        self.denial_by_id(name).is_none()
    }

    /// Whether the topic `name`, listed once by id, may be deleted: `None` if so, else whether
    /// its name may be shown in the answer (it may be described). DESCRIBE and DELETE are both
    /// asked (and logged when denied), as Kafka asks both of every topic.
    pub fn denial_by_id(&self, name: &str) -> Option<bool> {
        if !self.each_topic {
            return None;
        }
        let describe = self
            .access
            .allows(AclOperation::Describe, ResourceType::Topic, name);
        let delete = self
            .access
            .allows(AclOperation::Delete, ResourceType::Topic, name);
        (!(describe && delete)).then_some(describe)
    }
}

/// The answer to a topic the principal may not delete, as the request spelled it (an id's name
/// only where it may be described).
pub fn deletion_denied(name: Option<TopicName>, id: uuid::Uuid) -> DeletableTopicResult {
    DeletableTopicResult::default()
        .with_name(name)
        .with_topic_id(id)
        .with_error_code(ResponseError::TopicAuthorizationFailed.code())
        .with_error_message(Some(StrBytes::from_static_str(AUTHORIZATION_FAILED)))
}

/// DeleteTopics for a request whose entries stay in its frame (`ListedTopics`, which leaves
/// out the `denied` entries): the answer's body lists no topics, and the returned deletion
/// answers each entry given to the controller, for the caller to write as it sends the answer
/// (followed by the denied entries, each TOPIC_AUTHORIZATION_FAILED, as the decoded request's
/// handler answers them after the others).
pub async fn delete_listed_topics(
    ctx: &HandlerContext,
    info: &RequestInfo,
    topics: Arc<dyn ListedTopics>,
    denied: usize,
) -> (ApiResponse, ListedDeletion) {
    let listed = topics.listed();
    let distinct = topics.distinct();
    let deletion = match ctx
        .ask_controller(
            info.controller_failure.as_ref(),
            DeleteListedTopics {
                topics,
                version: info.api_version,
                principal: (*info.principal).clone(),
                client_id: info.client_id.to_string(),
            },
        )
        .await
    {
        Ok(deletion) => deletion,
        Err(error) => {
            let (code, message) = unavailable(&error);
            ListedDeletion::refused(code.code(), &message)
        }
    };
    let mut errors = ErrorCounts::default();
    errors.add_times(
        ResponseError::TopicAuthorizationFailed.code(),
        denied as u64,
    );
    match (&deletion.refused, deletion.rejected) {
        (Some((code, _)), _) => errors.add_times(*code, listed as u64),
        (None, Some(code)) => errors.add_times(code, distinct as u64),
        (None, None) => {
            let mut times = vec![0u64; deletion.outcomes.len()];
            for at in &deletion.per_entry {
                if let Some(count) = times.get_mut(*at as usize) {
                    *count += 1;
                }
            }
            for ((code, _), times) in deletion.outcomes.iter().zip(times) {
                errors.add_times(*code, times);
            }
        }
    }
    let response = DeleteTopicsResponse::default().with_throttle_time_ms(deletion.throttle_time_ms);
    let answer = ApiResponse::throttled(
        deletion.throttle_time_ms,
        ResponseKind::DeleteTopics(response),
        errors,
    );
    (answer, deletion)
}

/// Who may add partitions to the topics of one CreatePartitions request. Kafka: ALTER on each
/// topic.
pub struct CreatePartitionsAccess<'a> {
    access: Access<'a>,
}

impl<'a> CreatePartitionsAccess<'a> {
    pub fn new(ctx: &'a HandlerContext, info: &'a RequestInfo) -> Self {
        CreatePartitionsAccess {
            access: Access::new(ctx, info),
        }
    }

    /// Whether each topic's ALTER is checked (an authorizer).
    pub fn checks_each_topic(&self) -> bool {
        self.access.is_enforced()
    }

    /// Whether partitions may be added to the topic `name`, named once; a denial is logged. A
    /// name given twice is the controller's INVALID_REQUEST whatever the ACLs say, so it is not
    /// asked.
    pub fn may_alter(&self, name: &str) -> bool {
        !self.access.is_enforced()
            || self
                .access
                .allows(AclOperation::Alter, ResourceType::Topic, name)
    }
}

/// The answer to a topic whose ALTER is denied.
pub fn growth_denied(name: TopicName) -> CreatePartitionsTopicResult {
    CreatePartitionsTopicResult::default()
        .with_name(name)
        .with_error_code(ResponseError::TopicAuthorizationFailed.code())
        .with_error_message(Some(StrBytes::from_static_str(AUTHORIZATION_FAILED)))
}

/// CreatePartitions for a request whose topics stay in its frame (`ListedElements`, which leaves
/// out the denied names): the answer's body lists no topics, and the returned growth answers
/// each topic given to the controller, for the caller to write as it sends the answer (with
/// the denied names answered [`growth_denied`] in their place).
pub async fn create_listed_partitions(
    ctx: &HandlerContext,
    info: &RequestInfo,
    topics: Arc<dyn ListedElements<CreatePartitionsTopic>>,
    validate_only: bool,
) -> (ApiResponse, ListedGrowth) {
    let listed = topics.listed();
    let denied = topics.denied();
    let growth = match ctx
        .ask_controller(
            info.controller_failure.as_ref(),
            CreateListedPartitions {
                topics,
                validate_only,
                version: info.api_version,
                principal: (*info.principal).clone(),
                client_id: info.client_id.to_string(),
            },
        )
        .await
    {
        Ok(growth) => growth,
        Err(error) => {
            let (code, message) = unavailable(&error);
            ListedGrowth::refused(code.code(), &message)
        }
    };
    let errors = ErrorCounts::of_listed(&growth, listed, denied, |outcome| outcome.code);
    let response =
        CreatePartitionsResponse::default().with_throttle_time_ms(growth.throttle_time_ms);
    let answer = ApiResponse::throttled(
        growth.throttle_time_ms,
        ResponseKind::CreatePartitions(response),
        errors,
    );
    (answer, growth)
}

pub(super) async fn create_partitions(
    ctx: &HandlerContext,
    info: &RequestInfo,
    mut request: CreatePartitionsRequest,
) -> ApiResponse {
    let names: Vec<_> = request.topics.iter().map(|t| t.name.clone()).collect();
    // Kafka: ALTER on each topic.
    let access = Access::new(ctx, info);
    let denied = if access.is_enforced() {
        denied_once(
            &access,
            AclOperation::Alter,
            names.iter().map(|n| n.as_str()),
        )
    } else {
        HashSet::new()
    };
    request.topics.retain(|t| !denied.contains(t.name.as_str()));
    let forwarded = match remote_controller(ctx, !denied.is_empty()) {
        Some(forwarder) => {
            forwarder
                .create_partitions(request.clone(), info.api_version, Some(Caller::of(info)))
                .await
        }
        None => Forwarded::Unreachable,
    };
    let response = decided(
        ctx,
        info,
        forwarded,
        CreatePartitions {
            request,
            version: info.api_version,
            principal: (*info.principal).clone(),
            client_id: info.client_id.to_string(),
        },
        |code, message| controller::failed_create_partitions(names.clone(), code, message),
    )
    .await;
    let mut response = response;
    response.results = merge_in_request_order(
        &names,
        &denied,
        std::mem::take(&mut response.results),
        |t| t.name.as_str(),
        |name| growth_denied(name.clone()),
    );
    let mut errors = ErrorCounts::default();
    errors.add_all(response.results.iter().map(|t| t.error_code));
    ApiResponse::throttled(
        response.throttle_time_ms,
        ResponseKind::CreatePartitions(response),
        errors,
    )
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::create_topics_response::CreatableTopicConfigs;

    use super::*;

    /// Distinct topics named once each; counts the topics it visits, or fails to read.
    struct Names {
        names: Vec<&'static str>,
        visited: AtomicUsize,
        broken: bool,
    }

    impl ListedElements for Names {
        fn listed(&self) -> usize {
            self.names.len()
        }

        fn distinct(&self) -> usize {
            self.names.len()
        }

        fn denied(&self) -> usize {
            0
        }

        fn each_first(
            &self,
            visit: &mut dyn FnMut(&CreatableTopic, bool) -> bool,
        ) -> Result<(), String> {
            if self.broken {
                return Err("unreadable".to_owned());
            }
            for name in &self.names {
                self.visited.fetch_add(1, Ordering::Relaxed);
                let topic = CreatableTopic::default().with_name(TopicName((*name).into()));
                if !visit(&topic, false) {
                    break;
                }
            }
            Ok(())
        }
    }

    /// "ok", "x", "hid", "late" (created but its records did not commit), "hid2", then 5 more
    /// failing alike: the created ones have an outcome each, with configs.
    fn decided() -> ListedCreation {
        let configs = Arc::new(Some(vec![CreatableTopicConfigs::default()
            .with_name("cleanup.policy".into())
            .with_value(Some("delete".into()))]));
        let created = |code: i16| ListedOutcome::Created {
            result: Box::new(
                CreatableTopicResult::default()
                    .with_error_code(code)
                    .with_num_partitions(3)
                    .with_replication_factor(1),
            ),
            configs: configs.clone(),
        };
        ListedCreation {
            per_element: vec![0, 1, 2, 3, 4, 1, 1, 1, 1, 1],
            outcomes: vec![
                created(0),
                ListedOutcome::Failed {
                    code: 37,
                    message: None,
                },
                created(0),
                created(7),
                created(0),
            ],
            ..Default::default()
        }
    }

    fn names(broken: bool) -> Names {
        let mut names = vec!["ok", "x", "hid", "late", "hid2"];
        names.extend(["y1", "y2", "y3", "y4", "y5"]);
        Names {
            names,
            visited: AtomicUsize::new(0),
            broken,
        }
    }

    /// Each answer as (name, partitions, replication, config error, config count).
    fn answers(creation: &ListedCreation, topics: &Names) -> Vec<(String, i32, i16, i16, usize)> {
        topics
            .names
            .iter()
            .enumerate()
            .map(|(index, name)| {
                let outcome = creation.outcome(index).expect("answered");
                let result = ListedCreation::result(outcome, &TopicName((*name).into()));
                (
                    result.name.to_string(),
                    result.num_partitions,
                    result.replication_factor,
                    result.topic_config_error_code,
                    result.configs.map_or(0, |c| c.len()),
                )
            })
            .collect()
    }

    #[test]
    fn configs_are_hidden_from_who_may_not_describe_them() {
        let topics = names(false);
        let mut creation = decided();
        let mut asked = Vec::new();
        hide_listed_configs(&topics, &mut creation, |name| {
            asked.push(name.to_owned());
            !name.starts_with("hid")
        });
        // Asked for the created topics only, and no further than the last one.
        assert_eq!(asked, ["ok", "hid", "hid2"]);
        assert_eq!(topics.visited.load(Ordering::Relaxed), 5);
        let answer = |name: &str, p, r, e, c| (name.to_owned(), p, r, e, c);
        let failed = |name: &str| answer(name, -1, -1, 0, 0);
        let mut expected = vec![
            answer("ok", 3, 1, 0, 1),
            failed("x"),
            answer("hid", -1, -1, 29, 0),
            answer("late", 3, 1, 0, 1),
            answer("hid2", -1, -1, 29, 0),
        ];
        expected.extend(["y1", "y2", "y3", "y4", "y5"].map(failed));
        assert_eq!(answers(&creation, &topics), expected);
        // Unreadable topics: no created topic's configs are shown.
        let topics = names(true);
        let mut creation = decided();
        hide_listed_configs(&topics, &mut creation, |_| true);
        let hidden: Vec<_> = answers(&creation, &topics)
            .into_iter()
            .filter(|a| a.3 == 29)
            .map(|a| a.0)
            .collect();
        assert_eq!(hidden, ["ok", "hid", "hid2"]);
    }
}
