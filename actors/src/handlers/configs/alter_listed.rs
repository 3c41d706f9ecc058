//! IncrementalAlterConfigs and AlterConfigs requests whose resources stay in their frame
//! (issue #11): the receiving node's half of the decoded handlers ([`super::incremental_alter`],
//! [`super::alter`]) done one resource at a time, keeping three bytes per resource.
//!
//! ```text
//!   resources ──walk──┬─ denied ───────────────────────────── code ─┐
//!                     ├─ refused by the node's checks ──────── code ─┤ one code per resource;
//!                     ├─ BROKER_LOGGER ──▶ LogLevels (live) ── code ─┤ messages found again
//!                     └─ decided ──▶ Controller (here, or elsewhere) ┘ when the answer is written
//! ```

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    AlterConfigsResponse, IncrementalAlterConfigsResponse, ResponseKind,
};

use gregor_publishers::acl::AclOperation;

use super::super::authorize::{config_denial_message, config_resource_denied};
use super::super::{ApiResponse, ErrorCounts};
use super::{alter_loggers, broker_side_node, remote_controller, unavailable, LogLevels};
use crate::authorizer::Access;
use crate::context::{Caller, Forwarded, HandlerContext, RequestInfo};
use crate::controller::logic::configs::{
    ConfigResource, ConfigRules, DecidedAgainst, ListedConfigDecision, ListedConfigResources,
    Precheck, Route,
};
use crate::controller::AlterListedConfigs;

/// The answers to a request's resources: a route and a code each, the decided ones' messages
/// kept by the controller's decision, the others' found again from the resource.
pub struct ListedConfigAnswers {
    routes: Arc<Vec<Route>>,
    codes: Vec<i16>,
    decision: ListedConfigDecision,
    /// BROKER_LOGGER resources that were valid but could not be applied, by index: their
    /// message is the live filter's, which the resource alone does not give again.
    logger_failures: Vec<(u32, String)>,
    broker_node: Option<i32>,
    node_id: i32,
    loggers: Arc<dyn LogLevels>,
}

impl ListedConfigAnswers {
    /// How many resources are answered.
    pub fn count(&self) -> usize {
        self.codes.len()
    }

    /// Answers the resources, each called for in request order (index, content, whether
    /// another resource names the same type and name): its code and message.
    pub fn in_order(
        &self,
    ) -> impl FnMut(usize, ConfigResource<'_>, bool) -> (i16, Option<String>) + Send + '_ {
        let mut decided = 0;
        move |index, resource, duplicated| {
            let code = self
                .codes
                .get(index)
                .copied()
                .unwrap_or(ResponseError::UnknownServerError.code());
            let message = match self.routes.get(index) {
                Some(Route::Denied) => Some(config_denial_message(code).to_owned()),
                Some(Route::Decided) => {
                    decided += 1;
                    self.decision
                        .message(decided - 1, resource, duplicated, code)
                }
                _ => self.local_message(index, resource, duplicated, code),
            };
            (code, message)
        }
    }

    /// The message of a resource this node answered.
    fn local_message(
        &self,
        index: usize,
        resource: ConfigResource<'_>,
        duplicated: bool,
        code: i16,
    ) -> Option<String> {
        if code == 0 {
            return None;
        }
        if let Ok(at) = self
            .logger_failures
            .binary_search_by_key(&index, |(at, _)| *at as usize)
        {
            return self.logger_failures.get(at).map(|(_, m)| m.clone());
        }
        match (resource.precheck(duplicated, self.broker_node), resource) {
            (Precheck::Failed(error), _) => error.message,
            (Precheck::BrokerLogger, ConfigResource::Incremental(resource)) => {
                alter_loggers(resource, self.node_id, self.loggers.as_ref(), true)
                    .err()
                    .and_then(|error| error.message)
            }
            _ => None,
        }
    }
}

/// Alters the configs of a request whose resources are read from `resources`, as the decoded
/// handlers do: the answer's body lists no resources, and the returned answers give each
/// one's in request order, for the caller to write as it sends the answer.
pub async fn alter_listed_configs(
    ctx: &HandlerContext,
    info: &RequestInfo,
    resources: Arc<dyn ListedConfigResources>,
    validate_only: bool,
) -> Result<(ApiResponse, ListedConfigAnswers), String> {
    let count = resources.count();
    let access = Access::new(ctx, info);
    let broker_node = broker_side_node(ctx, info);
    let node_id = ctx.node.node_id;
    let loggers = Arc::clone(&ctx.configs.loggers);
    let mut routes = Vec::with_capacity(count);
    let mut codes = Vec::with_capacity(count);
    let mut logger_failures = Vec::new();
    resources.each(&mut |index, resource, duplicated| {
        if let Some((code, _)) = config_resource_denied(
            &access,
            AclOperation::AlterConfigs,
            resource.resource_type(),
            resource.name(),
        ) {
            routes.push(Route::Denied);
            codes.push(code.code());
            return true;
        }
        let (route, code) = match resource.precheck(duplicated, broker_node) {
            Precheck::Failed(error) => (Route::Local, error.code.code()),
            Precheck::BrokerLogger => {
                let outcome = match resource {
                    ConfigResource::Incremental(resource) => {
                        alter_loggers(resource, node_id, loggers.as_ref(), validate_only)
                            .inspect_err(|error| {
                                // Valid but not applied: the live filter's reason is kept.
                                if alter_loggers(resource, node_id, loggers.as_ref(), true).is_ok()
                                {
                                    logger_failures.push((
                                        index as u32,
                                        error.message.clone().unwrap_or_default(),
                                    ));
                                }
                            })
                    }
                    // AlterConfigs has no BROKER_LOGGER type: its precheck refuses it.
                    ConfigResource::Legacy(_) => Ok(()),
                };
                (Route::Local, outcome.err().map_or(0, |e| e.code.code()))
            }
            Precheck::Forward => (Route::Decided, 0),
        };
        routes.push(route);
        codes.push(code);
        true
    })?;
    let routes = Arc::new(routes);
    let decided = routes.iter().filter(|r| **r == Route::Decided).count();
    let decision = if decided == 0 {
        ListedConfigDecision::default()
    } else {
        let forwarded = match remote_controller(ctx) {
            Some(_) => {
                // The controller elsewhere decides against its image; its messages are found
                // again against this node's where they are the same.
                let against = DecidedAgainst {
                    image: ctx.image.load_full(),
                    rules: ConfigRules::default(),
                    node_id: None,
                };
                let handed = Arc::clone(&resources).forward_decided(
                    Arc::clone(&routes),
                    validate_only,
                    Caller::of(info),
                    against,
                );
                match handed {
                    Some(forwarded) => forwarded.await,
                    // Resources that cannot be handed over are this node's controller's,
                    // which answers NOT_CONTROLLER when it does not lead.
                    None => Forwarded::Unreachable,
                }
            }
            None => Forwarded::Unreachable,
        };
        let ask = AlterListedConfigs {
            resources: Arc::clone(&resources),
            routes: Arc::clone(&routes),
            node_id: broker_node,
            validate_only,
        };
        match ctx.answer_or_ask(info, forwarded, ask).await {
            Ok(decision) => decision,
            Err(error) => {
                let failure = unavailable(&error);
                ListedConfigDecision::refused(failure.code, &failure.message.unwrap_or_default())
            }
        }
    };
    let mut ordinal = 0;
    for (route, code) in routes.iter().zip(codes.iter_mut()) {
        if *route == Route::Decided {
            *code = decision.code(ordinal);
            ordinal += 1;
        }
    }
    let mut errors = ErrorCounts::default();
    errors.add_all(codes.iter().copied());
    let response = if resources.legacy() {
        ResponseKind::AlterConfigs(AlterConfigsResponse::default())
    } else {
        ResponseKind::IncrementalAlterConfigs(IncrementalAlterConfigsResponse::default())
    };
    let answers = ListedConfigAnswers {
        routes,
        codes,
        decision,
        logger_failures,
        broker_node,
        node_id,
        loggers,
    };
    Ok((ApiResponse::new(response, errors), answers))
}
