//! DescribeConfigs (32), IncrementalAlterConfigs (44), AlterConfigs (33) and ListConfigResources
//! (74, KIP-1142).
//!
//! Reads (DescribeConfigs, ListConfigResources) answer from one image snapshot. Writes go to the
//! controller, except BROKER_LOGGER resources: as in Kafka they are applied on the node that
//! receives them, to its live log filter, and never persisted.
//!
//! ```text
//!   IncrementalAlterConfigs ──precheck──┬─ failed ─────────────────────────────┐
//!                                       ├─ BROKER_LOGGER ──▶ LogLevels (live) ──┤ merged in
//!                                       └─ forward ──▶ Controller ──records──▶──┘ request order
//! ```

mod alter_listed;
mod describe;
mod list;
mod loggers;

use std::sync::Arc;

use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, DescribeConfigsRequest, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, ListConfigResourcesRequest, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

use gregor_publishers::acl::AclOperation;

use super::authorize::config_resource_denied;
use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{
    Caller, ControllerForwarder, Forwarded, HandlerContext, ListenerKind, RequestInfo,
};
use crate::controller::logic::configs::{precheck_incremental, ApiError, Precheck};
use crate::controller::{AlterConfigs, IncrementalAlterConfigs};

pub use alter_listed::{alter_listed_configs, ListedConfigAnswers};
pub use describe::describe_configs;
pub use list::{list_config_resources, metric_name_also_counted, LIST_CLIENT_METRICS_RESOURCES};
pub use loggers::{alter_loggers, LogLevels, KNOWN_LOGGERS, ROOT_LOGGER, VALID_LOG_LEVELS};

/// One static broker config as the node was started with it, for DescribeConfigs of this
/// broker (read-only entries).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticBrokerConfig {
    /// Kafka's property name.
    pub name: String,
    /// The value (`None` when the key has no value and no default).
    pub value: Option<String>,
    /// Whether the value is the built-in default rather than set by the operator.
    pub is_default: bool,
    /// `ConfigType` wire id.
    pub config_type: i8,
    /// One-line documentation.
    pub doc: String,
}

/// What the config handlers need beyond the image: this node's static configs, the values its
/// group configs default to, and its live log levels.
#[derive(Clone)]
pub struct ConfigSupport {
    /// The node's static configs (from its properties file, overrides and defaults).
    pub static_configs: Arc<Vec<StaticBrokerConfig>>,
    /// The broker-level log defaults the node was started with (`log.retention.hours`...), by
    /// broker key: the STATIC_BROKER_CONFIG synonyms of topic configs.
    pub static_log_configs: Arc<std::collections::BTreeMap<String, String>>,
    /// The node's `group.consumer.*` values: what a group that sets no config of its own is
    /// described with.
    pub group_defaults: crate::controller::logic::configs::group::GroupConfigDefaults,
    /// The live log filter.
    pub loggers: Arc<dyn LogLevels>,
}

impl std::fmt::Debug for ConfigSupport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfigSupport")
            .field("static_configs", &self.static_configs.len())
            .finish_non_exhaustive()
    }
}

fn message(error: &ApiError) -> Option<StrBytes> {
    error.message.clone().map(StrBytes::from_string)
}

fn unavailable(error: &actix::MailboxError) -> ApiError {
    tracing::error!(%error, "controller actor unavailable");
    ApiError::new(
        kafka_protocol::error::ResponseError::NotController,
        format!("The controller is not available ({error}); retry against another node"),
    )
}

pub(super) fn describe(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: &DescribeConfigsRequest,
) -> ApiResponse {
    let image = ctx.image.load_full();
    let mut response = describe_configs(&image, request, ctx.node.node_id, &ctx.configs);
    let access = Access::new(ctx, info);
    if access.is_enforced() {
        for result in &mut response.results {
            if let Some((code, text)) = config_resource_denied(
                &access,
                AclOperation::DescribeConfigs,
                result.resource_type,
                &result.resource_name,
            ) {
                result.error_code = code.code();
                result.error_message = Some(StrBytes::from_static_str(text));
                result.configs.clear();
            }
        }
    }
    let mut errors = ErrorCounts::default();
    errors.add_all(response.results.iter().map(|r| r.error_code));
    ApiResponse::new(ResponseKind::DescribeConfigs(response), errors)
}

pub(super) fn list(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: &ListConfigResourcesRequest,
) -> ApiResponse {
    let image = ctx.image.load_full();
    let response = if Access::new(ctx, info).allows_cluster(AclOperation::DescribeConfigs) {
        list_config_resources(
            &image,
            info.api_version,
            &request.resource_types,
            &info.listener_name,
        )
    } else {
        kafka_protocol::messages::ListConfigResourcesResponse::default().with_error_code(
            kafka_protocol::error::ResponseError::ClusterAuthorizationFailed.code(),
        )
    };
    let mut errors = ErrorCounts::default();
    errors.add(response.error_code);
    ApiResponse::new(ResponseKind::ListConfigResources(response), errors)
}

/// The receiving broker's id for the broker-side checks, or `None` on a controller listener,
/// where requests arrive as Kafka's controller receives them (possibly forwarded by a broker
/// that already checked them against its own id).
fn broker_side_node(ctx: &HandlerContext, info: &RequestInfo) -> Option<i32> {
    (info.listener_kind == ListenerKind::Broker).then_some(ctx.node.node_id)
}

/// The active controller to hand config changes to when it runs elsewhere, as Kafka's brokers
/// forward them; `None` when this node's own controller actor leads the quorum.
fn remote_controller(ctx: &HandlerContext) -> Option<&Arc<dyn ControllerForwarder>> {
    ctx.forwarder
        .as_ref()
        .filter(|_| ctx.quorum.as_ref().is_some_and(|q| !q.is_leader()))
}

pub(super) async fn incremental_alter(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: IncrementalAlterConfigsRequest,
) -> ApiResponse {
    let node_id = ctx.node.node_id;
    let broker_node = broker_side_node(ctx, info);
    let prechecks = precheck_incremental(&request, broker_node);
    let mut results: Vec<Option<Result<(), ApiError>>> = Vec::with_capacity(prechecks.len());
    let mut forwarded = Vec::new();
    let access = Access::new(ctx, info);
    for (resource, precheck) in request.resources.iter().zip(&prechecks) {
        if let Some((code, text)) = config_resource_denied(
            &access,
            AclOperation::AlterConfigs,
            resource.resource_type,
            &resource.resource_name,
        ) {
            results.push(Some(Err(ApiError::new(code, text))));
            continue;
        }
        results.push(match precheck {
            Precheck::Failed(error) => Some(Err(error.clone())),
            Precheck::BrokerLogger => Some(alter_loggers(
                resource,
                node_id,
                ctx.configs.loggers.as_ref(),
                request.validate_only,
            )),
            Precheck::Forward => {
                forwarded.push(resource.clone());
                None
            }
        });
    }
    let mut answers = Vec::new().into_iter();
    if !forwarded.is_empty() {
        let count = forwarded.len();
        let sub = IncrementalAlterConfigsRequest::default()
            .with_resources(forwarded)
            .with_validate_only(request.validate_only);
        let forwarded = match remote_controller(ctx) {
            Some(forwarder) => {
                forwarder
                    .incremental_alter_configs(
                        sub.clone(),
                        info.api_version,
                        Some(Caller::of(info)),
                    )
                    .await
            }
            None => Forwarded::Unreachable,
        };
        let response = ctx
            .answer_or_ask(
                info,
                forwarded,
                IncrementalAlterConfigs {
                    request: sub,
                    node_id: broker_node,
                },
            )
            .await;
        let outcome: Vec<Result<(), ApiError>> = match response {
            Ok(response) => response
                .responses
                .into_iter()
                .map(|r| to_result(r.error_code, r.error_message))
                .collect(),
            Err(error) => vec![Err(unavailable(&error)); count],
        };
        answers = outcome.into_iter();
    }
    let responses: Vec<_> = request
        .resources
        .iter()
        .zip(results)
        .map(|(resource, result)| {
            // The controller answers every forwarded resource in order; a missing answer
            // would be a bug, reported rather than leaving the client waiting.
            let result = result.or_else(|| answers.next()).unwrap_or_else(|| {
                Err(ApiError::new(
                    kafka_protocol::error::ResponseError::UnknownServerError,
                    "the controller did not answer for this resource",
                ))
            });
            let (code, msg) = match &result {
                Ok(()) => (0, None),
                Err(error) => (error.code.code(), message(error)),
            };
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(msg)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone())
        })
        .collect();
    let mut errors = ErrorCounts::default();
    errors.add_all(responses.iter().map(|r| r.error_code));
    ApiResponse::new(
        ResponseKind::IncrementalAlterConfigs(
            IncrementalAlterConfigsResponse::default().with_responses(responses),
        ),
        errors,
    )
}

fn to_result(code: i16, message: Option<StrBytes>) -> Result<(), ApiError> {
    if code == 0 {
        return Ok(());
    }
    Err(ApiError {
        code: kafka_protocol::error::ResponseError::try_from_code(code)
            .unwrap_or(kafka_protocol::error::ResponseError::UnknownServerError),
        message: message.map(|m| m.to_string()),
    })
}

pub(super) async fn alter(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: AlterConfigsRequest,
) -> ApiResponse {
    let node_id = broker_side_node(ctx, info);
    let mut request = request;
    // Refused resources are answered here; the controller decides the others.
    let access = Access::new(ctx, info);
    let refused: Vec<Option<(kafka_protocol::error::ResponseError, &str)>> = request
        .resources
        .iter()
        .map(|r| {
            config_resource_denied(
                &access,
                AclOperation::AlterConfigs,
                r.resource_type,
                &r.resource_name,
            )
        })
        .collect();
    let all_resources: Vec<(i8, StrBytes)> = request
        .resources
        .iter()
        .map(|r| (r.resource_type, r.resource_name.clone()))
        .collect();
    let mut kept = refused.iter();
    request
        .resources
        .retain(|_| kept.next().is_some_and(Option::is_none));
    let resources: Vec<(i8, StrBytes)> = request
        .resources
        .iter()
        .map(|r| (r.resource_type, r.resource_name.clone()))
        .collect();
    let forwarded = match remote_controller(ctx) {
        Some(forwarder) => {
            forwarder
                .alter_configs(request.clone(), info.api_version, Some(Caller::of(info)))
                .await
        }
        None => Forwarded::Unreachable,
    };
    let response = match ctx
        .answer_or_ask(info, forwarded, AlterConfigs { request, node_id })
        .await
    {
        Ok(response) => response,
        Err(error) => {
            let failure = unavailable(&error);
            AlterConfigsResponse::default().with_responses(
                resources
                    .into_iter()
                    .map(|(resource_type, name)| {
                        alter_configs_response::AlterConfigsResourceResponse::default()
                            .with_error_code(failure.code.code())
                            .with_error_message(message(&failure))
                            .with_resource_type(resource_type)
                            .with_resource_name(name)
                    })
                    .collect(),
            )
        }
    };
    let mut response = response;
    if refused.iter().any(Option::is_some) {
        let mut decided = std::mem::take(&mut response.responses).into_iter();
        response.responses = all_resources
            .into_iter()
            .zip(refused)
            .filter_map(|((resource_type, name), refusal)| match refusal {
                Some((code, text)) => Some(
                    alter_configs_response::AlterConfigsResourceResponse::default()
                        .with_error_code(code.code())
                        .with_error_message(Some(StrBytes::from_static_str(text)))
                        .with_resource_type(resource_type)
                        .with_resource_name(name),
                ),
                None => decided.next(),
            })
            .collect();
    }
    let mut errors = ErrorCounts::default();
    errors.add_all(response.responses.iter().map(|r| r.error_code));
    ApiResponse::new(ResponseKind::AlterConfigs(response), errors)
}
