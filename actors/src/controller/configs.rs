//! The controller's config mutations: IncrementalAlterConfigs and AlterConfigs. The decisions
//! are `logic::configs`; this shell validates against the working image and commits the
//! `ConfigRecord`s, like the topic mutations in `actor.rs`.

use std::sync::Arc;

use actix::prelude::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::incremental_alter_configs_response::AlterConfigsResourceResponse;
use kafka_protocol::messages::{
    alter_configs_response, AlterConfigsRequest, AlterConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::actor::{Controller, Refusable};
use super::logic::configs;
use super::logic::ControllerResult;

/// Alter configs incrementally (SET / DELETE / APPEND / SUBTRACT). The handler has removed the
/// BROKER_LOGGER resources (applied on the node, never persisted). One result per resource, in
/// request order.
#[derive(Message)]
#[rtype(result = "IncrementalAlterConfigsResponse")]
pub struct IncrementalAlterConfigs {
    /// The request (possibly without its BROKER_LOGGER resources).
    pub request: IncrementalAlterConfigsRequest,
    /// The broker that received it: BROKER resources may only name this node (or ""). `None`
    /// when it arrived on a controller listener (sent there, or forwarded by a broker that
    /// checked it): any registered node may then be named.
    pub node_id: Option<i32>,
}

/// Replace the configs of each resource (legacy AlterConfigs).
#[derive(Message)]
#[rtype(result = "AlterConfigsResponse")]
pub struct AlterConfigs {
    /// The request.
    pub request: AlterConfigsRequest,
    /// As in [`IncrementalAlterConfigs::node_id`].
    pub node_id: Option<i32>,
}

impl Handler<IncrementalAlterConfigs> for Controller {
    type Result = ResponseFuture<IncrementalAlterConfigsResponse>;

    fn handle(&mut self, msg: IncrementalAlterConfigs, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        let rules = self.settings.config_rules();
        self.mutate(
            ctx,
            &msg,
            |image, _| -> ControllerResult<_> {
                configs::incremental_alter_configs(image, &msg.request, msg.node_id, &rules)
            },
            |mut response: IncrementalAlterConfigsResponse, code, message| {
                for resource in &mut response.responses {
                    if resource.error_code == 0 {
                        resource.error_code = code.code();
                        resource.error_message = Some(StrBytes::from_string(message.to_owned()));
                    }
                }
                response
            },
        )
    }
}

impl Handler<AlterConfigs> for Controller {
    type Result = ResponseFuture<AlterConfigsResponse>;

    fn handle(&mut self, msg: AlterConfigs, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        let rules = self.settings.config_rules();
        self.mutate(
            ctx,
            &msg,
            |image, _| -> ControllerResult<_> {
                configs::alter_configs(image, &msg.request, msg.node_id, &rules)
            },
            |mut response: AlterConfigsResponse, code, message| {
                for resource in &mut response.responses {
                    if resource.error_code == 0 {
                        resource.error_code = code.code();
                        resource.error_message = Some(StrBytes::from_string(message.to_owned()));
                    }
                }
                response
            },
        )
    }
}

impl Refusable for IncrementalAlterConfigs {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        IncrementalAlterConfigsResponse::default().with_responses(
            self.request
                .resources
                .iter()
                .map(|r| {
                    AlterConfigsResourceResponse::default()
                        .with_resource_type(r.resource_type)
                        .with_resource_name(r.resource_name.clone())
                        .with_error_code(code.code())
                        .with_error_message(Some(StrBytes::from_string(message.to_owned())))
                })
                .collect(),
        )
    }
}

impl Refusable for AlterConfigs {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        AlterConfigsResponse::default().with_responses(
            self.request
                .resources
                .iter()
                .map(|r| {
                    alter_configs_response::AlterConfigsResourceResponse::default()
                        .with_resource_type(r.resource_type)
                        .with_resource_name(r.resource_name.clone())
                        .with_error_code(code.code())
                        .with_error_message(Some(StrBytes::from_string(message.to_owned())))
                })
                .collect(),
        )
    }
}

/// Alter the configs of a request whose resources stay where they are kept (its frame): the
/// resources routed here are read one at a time and answered with a code each (issue #11).
#[derive(Message)]
#[rtype(result = "configs::ListedConfigDecision")]
pub struct AlterListedConfigs {
    /// The request's resources.
    pub resources: Arc<dyn configs::ListedConfigResources>,
    /// Per resource: whether it is decided here.
    pub routes: Arc<Vec<configs::Route>>,
    /// As in [`IncrementalAlterConfigs::node_id`].
    pub node_id: Option<i32>,
    /// Decide and answer, write nothing.
    pub validate_only: bool,
}

impl Handler<AlterListedConfigs> for Controller {
    type Result = ResponseFuture<configs::ListedConfigDecision>;

    fn handle(&mut self, msg: AlterListedConfigs, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        let rules = self.settings.config_rules();
        // The image `mutate` decides against, kept by the answer to explain its failures.
        let image = self.base_image();
        self.mutate(
            ctx,
            &msg,
            |_, _| {
                configs::alter_listed_configs(
                    &image,
                    msg.resources.as_ref(),
                    &msg.routes,
                    msg.node_id,
                    msg.validate_only,
                    &rules,
                )
            },
            configs::ListedConfigDecision::fail_succeeded,
        )
    }
}

impl Refusable for AlterListedConfigs {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        configs::ListedConfigDecision::refused(code, message)
    }
}
