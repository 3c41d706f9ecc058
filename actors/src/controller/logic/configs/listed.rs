//! IncrementalAlterConfigs and AlterConfigs requests listing many resources, decided one
//! resource at a time from where they are kept (the request's frame, issue #11).
//!
//! A decoded resource, its answer and its error message cost 35-45 times its few bytes on the
//! wire. Here the controller reads each resource it decides, keeps two bytes (its error code)
//! and lets it go. A failure's message is found again when the answer is written, by deciding
//! the resource once more against the same image with the same rules: the decision is a
//! function of those alone (records are limited by count, which fails every resource alike).

use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_request::AlterConfigsResource as LegacyResource;
use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource as IncrementalResource;
use kafka_protocol::protocol::StrBytes;

use futures::future::BoxFuture;
use gregor_publishers::MetadataImage;

use super::super::{ControllerResult, MAX_RECORDS_PER_USER_OP};
use super::alter::{
    decide_one, incremental_change, legacy_change, precheck_copy, Change, TOO_MANY_RECORDS,
};
use super::{ApiError, ConfigRules, Precheck};
use crate::context::{Caller, Forwarded};

/// One resource of either request kind, as it was read.
#[derive(Clone, Copy, Debug)]
pub enum ConfigResource<'a> {
    /// An IncrementalAlterConfigs resource.
    Incremental(&'a IncrementalResource),
    /// An AlterConfigs resource.
    Legacy(&'a LegacyResource),
}

impl ConfigResource<'_> {
    /// The `ConfigResource.Type` id.
    pub fn resource_type(&self) -> i8 {
        match self {
            ConfigResource::Incremental(resource) => resource.resource_type,
            ConfigResource::Legacy(resource) => resource.resource_type,
        }
    }

    /// The resource's name.
    pub fn name(&self) -> &StrBytes {
        match self {
            ConfigResource::Incremental(resource) => &resource.resource_name,
            ConfigResource::Legacy(resource) => &resource.resource_name,
        }
    }

    fn legacy(&self) -> bool {
        matches!(self, ConfigResource::Legacy(_))
    }

    fn change(&self) -> Change {
        match self {
            ConfigResource::Incremental(resource) => incremental_change(resource),
            ConfigResource::Legacy(resource) => legacy_change(resource),
        }
    }

    /// What the receiving node does with it (`duplicated`: another resource of the request
    /// names the same type and name; `node_id` as in [`super::precheck_incremental`]).
    pub fn precheck(&self, duplicated: bool, node_id: Option<i32>) -> Precheck {
        precheck_copy(&self.change(), duplicated, node_id, self.legacy())
    }
}

/// A request's resources read one at a time from where they are kept.
pub trait ListedConfigResources: Send + Sync {
    /// How many resources the request lists.
    fn count(&self) -> usize;

    /// Whether they are AlterConfigs resources (else IncrementalAlterConfigs ones).
    fn legacy(&self) -> bool;

    /// Calls `visit` with each resource in request order: its index, content and whether
    /// another resource names the same type and name. Stops early when `visit` returns false.
    fn each(
        &self,
        visit: &mut dyn FnMut(usize, ConfigResource<'_>, bool) -> bool,
    ) -> Result<(), String>;

    /// Hands the resources routed to the controller (`routes`) to the active controller
    /// elsewhere, as a request of those alone, and keeps its answer as a decision: a code each,
    /// and the messages `against` does not give again. `None` where the resources cannot be
    /// handed over so (the handler then asks this node's controller, which answers
    /// NOT_CONTROLLER when it does not lead).
    fn forward_decided(
        self: Arc<Self>,
        _routes: Arc<Vec<Route>>,
        _validate_only: bool,
        _caller: Caller,
        _against: DecidedAgainst,
    ) -> Option<BoxFuture<'static, Forwarded<ListedConfigDecision>>> {
        None
    }
}

impl DecidedAgainst {
    /// The message a decided resource (`duplicated` as in [`ListedConfigResources::each`])
    /// failing with `code` gets when decided against this image, if it fails so.
    pub fn message(
        &self,
        resource: ConfigResource<'_>,
        duplicated: bool,
        code: i16,
    ) -> Option<String> {
        let precheck = resource.precheck(duplicated, self.node_id);
        decide_one(
            &self.image,
            &resource.change(),
            precheck,
            &self.rules,
            &mut Vec::new(),
        )
        .err()
        .filter(|error| error.code.code() == code)
        .and_then(|error| error.message)
    }
}

/// Where a resource's answer comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Refused by the authorizer on the receiving node.
    Denied,
    /// Answered by the receiving node: refused by its checks, or a BROKER_LOGGER resource.
    Local,
    /// Decided by the controller.
    Decided,
}

/// What a decided resource's message is found again from.
#[derive(Clone, Debug)]
pub struct DecidedAgainst {
    /// The image the controller decided against.
    pub image: Arc<MetadataImage>,
    /// The rules it validated with.
    pub rules: ConfigRules,
    /// The receiving broker's id (see [`super::precheck_incremental`]).
    pub node_id: Option<i32>,
}

/// The controller's answer to the resources it decided, two bytes each.
#[derive(Clone, Debug, Default)]
pub struct ListedConfigDecision {
    /// Per decided resource, in request order: its error code (0: altered, or valid when only
    /// validated). Empty when [`ListedConfigDecision::alike`] answers them all.
    pub codes: Vec<i16>,
    /// Every decided resource's answer: the request was refused whole, or would have written
    /// too many records.
    pub alike: Option<(i16, String)>,
    /// The answer of the resources that succeeded, when their records did not commit.
    pub uncommitted: Option<(i16, String)>,
    /// Messages a controller elsewhere gave, by decided resource (its place among them): all
    /// of them, or those [`ListedConfigDecision::against`] does not give again.
    pub messages: Vec<(u32, Option<String>)>,
    /// What their messages are found again from: the image this node's controller decided
    /// against, or this node's image for a controller elsewhere.
    pub against: Option<DecidedAgainst>,
}

impl ListedConfigDecision {
    /// Every decided resource answered with `code` and `message`.
    pub fn refused(code: ResponseError, message: &str) -> Self {
        ListedConfigDecision {
            alike: Some((code.code(), message.to_owned())),
            ..Default::default()
        }
    }

    /// The decision with every success failed with `code` and `message` (the records did not
    /// commit).
    pub fn fail_succeeded(mut self, code: ResponseError, message: &str) -> Self {
        if self.codes.contains(&0) {
            self.uncommitted = Some((code.code(), message.to_owned()));
        }
        self
    }

    /// The code the decided resource `ordinal` (its place among the decided ones) is
    /// answered with.
    pub fn code(&self, ordinal: usize) -> i16 {
        if let Some((code, _)) = &self.alike {
            return *code;
        }
        match (self.codes.get(ordinal).copied(), &self.uncommitted) {
            (Some(0), Some((code, _))) => *code,
            (Some(code), _) => code,
            // A controller answering fewer resources than it was given is a bug, reported
            // rather than leaving the client waiting.
            (None, _) => ResponseError::UnknownServerError.code(),
        }
    }

    /// The message the decided resource `ordinal` is answered with, `code` its code.
    pub fn message(
        &self,
        ordinal: usize,
        resource: ConfigResource<'_>,
        duplicated: bool,
        code: i16,
    ) -> Option<String> {
        if let Some((_, message)) = &self.alike {
            return Some(message.clone());
        }
        if code == 0 {
            return None;
        }
        if let Ok(at) = self
            .messages
            .binary_search_by_key(&ordinal, |(at, _)| *at as usize)
        {
            return self
                .messages
                .get(at)
                .and_then(|(_, message)| message.clone());
        }
        let decided_again = self
            .against
            .as_ref()
            .and_then(|against| against.message(resource, duplicated, code));
        match (decided_again, &self.uncommitted) {
            (Some(message), _) => Some(message),
            (_, Some((uncommitted, message))) if *uncommitted == code => Some(message.clone()),
            (_, _) if self.codes.get(ordinal).is_none() => {
                Some("the controller did not answer for this resource".to_owned())
            }
            _ => None,
        }
    }
}

/// Decides the resources routed to the controller (`routes`, one per resource) against
/// `image`, as [`super::incremental_alter_configs`] / [`super::alter_configs`] decide a
/// decoded request: the same checks in the same order, and past
/// [`MAX_RECORDS_PER_USER_OP`] records every decided resource fails with POLICY_VIOLATION,
/// validated only or not.
pub fn alter_listed_configs(
    image: &Arc<MetadataImage>,
    resources: &dyn ListedConfigResources,
    routes: &[Route],
    node_id: Option<i32>,
    validate_only: bool,
    rules: &ConfigRules,
) -> ControllerResult<ListedConfigDecision> {
    let decided = routes.iter().filter(|r| **r == Route::Decided).count();
    // Sized once: a doubling vector's earlier copies stay resident in the allocator.
    let mut codes = Vec::with_capacity(decided);
    let mut records = Vec::new();
    let mut too_many = false;
    let walked = resources.each(&mut |index, resource, duplicated| {
        if routes.get(index) != Some(&Route::Decided) {
            return true;
        }
        let precheck = resource.precheck(duplicated, node_id);
        let outcome = decide_one(image, &resource.change(), precheck, rules, &mut records);
        codes.push(outcome.err().map_or(0, |error: ApiError| error.code.code()));
        too_many = records.len() > MAX_RECORDS_PER_USER_OP;
        !too_many
    });
    if let Err(error) = walked {
        tracing::error!(%error, "a config alteration could not be read again");
        return ControllerResult {
            records: Vec::new(),
            response: ListedConfigDecision::refused(ResponseError::UnknownServerError, &error),
        };
    }
    if too_many {
        return ControllerResult {
            records: Vec::new(),
            response: ListedConfigDecision::refused(
                ResponseError::PolicyViolation,
                TOO_MANY_RECORDS,
            ),
        };
    }
    if validate_only {
        records.clear();
    }
    ControllerResult {
        records,
        response: ListedConfigDecision {
            codes,
            against: Some(DecidedAgainst {
                image: Arc::clone(image),
                rules: rules.clone(),
                node_id,
            }),
            ..Default::default()
        },
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests;
