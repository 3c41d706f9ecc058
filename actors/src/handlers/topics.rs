//! CreateTopics (19), DeleteTopics (20), CreatePartitions (37): handed to the controller actor,
//! which validates against its working image, commits the records and answers.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use gregor_publishers::acl::{AclOperation, ResourceType};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::authorize::{denied_once, AUTHORIZATION_FAILED};
use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{Caller, ControllerForwarder, HandlerContext, RequestInfo};
use crate::controller::logic::{ListedCreation, ListedOutcome, ListedTopics};
use crate::controller::{self, CreateListedTopics, CreatePartitions, CreateTopics, DeleteTopics};

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

pub(super) async fn create_topics(
    ctx: &HandlerContext,
    info: &RequestInfo,
    mut request: CreateTopicsRequest,
) -> ApiResponse {
    let names: Vec<_> = request.topics.iter().map(|t| t.name.clone()).collect();
    // Kafka: CREATE on the cluster covers every topic, else CREATE on each topic.
    let access = Access::new(ctx, info);
    let denied = if access.is_enforced() && !access.allows_cluster(AclOperation::Create) {
        denied_once(
            &access,
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
        None => None,
    };
    let response = match forwarded {
        Some(response) => response,
        None => match ctx
            .controller
            .send(CreateTopics {
                request,
                version: info.api_version,
                principal: info.principal.clone(),
                client_id: info.client_id.clone(),
            })
            .await
        {
            Ok(response) => response,
            Err(error) => {
                let (code, message) = unavailable(&error);
                controller::failed_create_topics(names.clone(), code, &message)
            }
        },
    };
    let mut response = response;
    response.topics = merge_in_request_order(
        &names,
        &denied,
        std::mem::take(&mut response.topics),
        |t| t.name.as_str(),
        |name| {
            CreatableTopicResult::default()
                .with_name(name.clone())
                .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                .with_error_message(Some(StrBytes::from_static_str(AUTHORIZATION_FAILED)))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
        },
    );
    if access.is_enforced() {
        // Configs are only shown to who may describe them.
        for topic in response.topics.iter_mut().filter(|t| t.error_code == 0) {
            if !access.quietly_allows(
                AclOperation::DescribeConfigs,
                ResourceType::Topic,
                &topic.name,
            ) {
                topic.configs = Some(Vec::new());
                topic.num_partitions = -1;
                topic.replication_factor = -1;
                topic.topic_config_error_code = ResponseError::TopicAuthorizationFailed.code();
            }
        }
    }
    let mut errors = ErrorCounts::default();
    errors.add_all(response.topics.iter().map(|t| t.error_code));
    ApiResponse {
        throttle_time_ms: response.throttle_time_ms,
        body: ResponseKind::CreateTopics(response),
        errors,
        delivery: super::Delivery::Send,
    }
}

/// CreateTopics for a request whose topics stay in its frame (`ListedTopics`), when no
/// authorizer is configured (each topic's ACL is checked on the decoded path): the answer's
/// body lists no topics, and the returned creation answers each one, for the caller to write
/// as it sends the answer.
pub async fn create_listed_topics(
    ctx: &HandlerContext,
    info: &RequestInfo,
    topics: Arc<dyn ListedTopics>,
    validate_only: bool,
) -> (ApiResponse, ListedCreation) {
    let listed = topics.listed();
    let creation = match ctx
        .controller
        .send(CreateListedTopics {
            topics,
            validate_only,
            version: info.api_version,
            principal: info.principal.clone(),
            client_id: info.client_id.clone(),
        })
        .await
    {
        Ok(creation) => creation,
        Err(error) => {
            let (code, message) = unavailable(&error);
            ListedCreation::refused(code.code(), &message)
        }
    };
    let mut errors = ErrorCounts::default();
    match &creation.refused {
        Some((code, _)) => errors.add_times(*code, listed as u64),
        None => {
            let mut times = vec![0u64; creation.outcomes.len()];
            for index in 0..creation.answered() {
                let at = creation.per_topic.get(index).map_or(0, |at| *at as usize);
                if let Some(count) = times.get_mut(at) {
                    *count += 1;
                }
            }
            for (outcome, times) in creation.outcomes.iter().zip(times) {
                let code = match outcome {
                    ListedOutcome::Created { result, .. } => result.error_code,
                    ListedOutcome::Failed { code, .. } => *code,
                };
                errors.add_times(code, times);
            }
        }
    }
    let response = CreateTopicsResponse::default().with_throttle_time_ms(creation.throttle_time_ms);
    let answer = ApiResponse {
        throttle_time_ms: creation.throttle_time_ms,
        body: ResponseKind::CreateTopics(response),
        errors,
        delivery: super::Delivery::Send,
    };
    (answer, creation)
}

pub(super) async fn delete_topics(
    ctx: &HandlerContext,
    info: &RequestInfo,
    mut request: DeleteTopicsRequest,
) -> ApiResponse {
    // Kafka: DELETE on the cluster covers every topic, else DESCRIBE and DELETE on each; a
    // topic named by id that may not be described is answered without its name. Refused
    // topics are answered after the others (Kafka's order is unspecified).
    let access = Access::new(ctx, info);
    let mut refused: Vec<DeletableTopicResult> = Vec::new();
    if access.is_enforced() && !access.allows_cluster(AclOperation::Delete) {
        let image = ctx.image.load();
        let topic = ResourceType::Topic;
        let refuse = |name: Option<TopicName>, id: uuid::Uuid| {
            DeletableTopicResult::default()
                .with_name(name)
                .with_topic_id(id)
                .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                .with_error_message(Some(StrBytes::from_static_str(AUTHORIZATION_FAILED)))
        };
        let names: Vec<&str> = request.topic_names.iter().map(|n| n.as_str()).collect();
        let undescribable = denied_once(&access, AclOperation::Describe, names.iter().copied());
        let undeletable = denied_once(&access, AclOperation::Delete, names.iter().copied());
        request.topic_names.retain(|name| {
            let denied =
                undescribable.contains(name.as_str()) || undeletable.contains(name.as_str());
            if denied {
                refused.push(refuse(Some(name.clone()), uuid::Uuid::nil()));
            }
            !denied
        });
        request.topics.retain(|state| {
            let (name, hidden) = match &state.name {
                Some(name) => (Some(name.to_string()), false),
                None => match image.topics.get_by_id(&state.topic_id) {
                    Some(known) => (Some(known.name.to_string()), true),
                    None => (None, false),
                },
            };
            let Some(name) = name else { return true };
            if !access.allows(AclOperation::Describe, topic, &name) {
                // Ids are not secret, names are.
                refused.push(refuse(
                    (!hidden).then(|| TopicName(StrBytes::from_string(name))),
                    state.topic_id,
                ));
                return false;
            }
            if !access.allows(AclOperation::Delete, topic, &name) {
                refused.push(refuse(
                    Some(TopicName(StrBytes::from_string(name))),
                    state.topic_id,
                ));
                return false;
            }
            true
        });
    }
    let fallback = controller::failed_delete_topics_for(&request, info.api_version);
    let forwarded = match remote_controller(ctx, !refused.is_empty()) {
        Some(forwarder) => {
            forwarder
                .delete_topics(request.clone(), info.api_version, Some(Caller::of(info)))
                .await
        }
        None => None,
    };
    let response = match forwarded {
        Some(response) => response,
        None => match ctx
            .controller
            .send(DeleteTopics {
                request,
                version: info.api_version,
                principal: info.principal.clone(),
                client_id: info.client_id.clone(),
            })
            .await
        {
            Ok(response) => response,
            Err(error) => {
                let (code, message) = unavailable(&error);
                fallback(code, &message)
            }
        },
    };
    let mut response = response;
    response.responses.extend(refused);
    let mut errors = ErrorCounts::default();
    errors.add_all(response.responses.iter().map(|t| t.error_code));
    ApiResponse {
        throttle_time_ms: response.throttle_time_ms,
        body: ResponseKind::DeleteTopics(response),
        errors,
        delivery: super::Delivery::Send,
    }
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
        None => None,
    };
    let response = match forwarded {
        Some(response) => response,
        None => match ctx
            .controller
            .send(CreatePartitions {
                request,
                version: info.api_version,
                principal: info.principal.clone(),
                client_id: info.client_id.clone(),
            })
            .await
        {
            Ok(response) => response,
            Err(error) => {
                let (code, message) = unavailable(&error);
                controller::failed_create_partitions(names.clone(), code, &message)
            }
        },
    };
    let mut response = response;
    response.results = merge_in_request_order(
        &names,
        &denied,
        std::mem::take(&mut response.results),
        |t| t.name.as_str(),
        |name| {
            CreatePartitionsTopicResult::default()
                .with_name(name.clone())
                .with_error_code(ResponseError::TopicAuthorizationFailed.code())
                .with_error_message(Some(StrBytes::from_static_str(AUTHORIZATION_FAILED)))
        },
    );
    let mut errors = ErrorCounts::default();
    errors.add_all(response.results.iter().map(|t| t.error_code));
    ApiResponse {
        throttle_time_ms: response.throttle_time_ms,
        body: ResponseKind::CreatePartitions(response),
        errors,
        delivery: super::Delivery::Send,
    }
}
