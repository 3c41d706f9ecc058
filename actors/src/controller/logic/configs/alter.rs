//! IncrementalAlterConfigs (44) and AlterConfigs (33): from (image, request) to per-resource
//! results and the `ConfigRecord`s of the resources that passed.
//!
//! Kafka splits the checks between the receiving broker (`ConfigAdminManager.preprocess`:
//! duplicates, null values, BROKER_LOGGER, this node's BROKER id) and the controller
//! (`ConfigurationControlManager`: names, existence, operations, validation, records). Gregor's
//! node is both, so [`precheck_incremental`] / [`precheck_legacy`] are the broker half (the
//! handler runs them to route BROKER_LOGGER resources locally) and the alter functions run both
//! halves, in Kafka's order, for every resource on its own. As Kafka's `BoundedList` of records,
//! one request writes at most [`MAX_RECORDS_PER_USER_OP`] config records: one more fails every
//! resource with POLICY_VIOLATION, validated only or not (Gregor's message for that limit, as
//! for its other controller writes).

use std::collections::{BTreeMap, HashSet};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_configs_request::AlterConfigsResource as LegacyResource;
use kafka_protocol::messages::incremental_alter_configs_request::AlterConfigsResource as IncrementalResource;
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use gregor_publishers::records::{ConfigRecord, MetadataRecord};
use gregor_publishers::MetadataImage;

use super::super::topic_configs::{self, ConfigType, TopicConfigDef};
use super::super::topic_name;
use super::super::{ControllerResult, MAX_RECORDS_PER_USER_OP};
use super::{broker, client_metrics, group, resource_type as rt, ApiError, OpType};

/// The message of every resource of a request that would write more than
/// [`MAX_RECORDS_PER_USER_OP`] config records.
pub(super) const TOO_MANY_RECORDS: &str = "Unable to perform excessively large batch operation.";

/// What resource configs are validated against beyond Kafka's definitions: this controller's
/// `group.*` values and bounds, and the dynamic broker configs its node's quota callback reconfigures on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigRules {
    /// The values of group configs a group does not set.
    pub group_defaults: group::GroupConfigDefaults,
    /// Bounds of group configs.
    pub group_bounds: group::GroupConfigBounds,
    /// The quota callback's `reconfigurable_configs`: accepted in BROKER resources with any
    /// value (the plug-in checks it when reconfigured, as Kafka's broker hands such keys to its
    /// reconfigurable plug-ins).
    pub plugin_broker_configs: Vec<String>,
}

/// What the receiving node does with one resource before the controller sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precheck {
    /// Refused; the resource's answer is this error.
    Failed(ApiError),
    /// A BROKER_LOGGER resource: applied on this node, never persisted.
    BrokerLogger,
    /// Goes to the controller.
    Forward,
}

/// One operation of a resource, as both request kinds reduce to it.
#[derive(Debug, Clone)]
pub(super) struct Op {
    name: String,
    op: i8,
    value: Option<String>,
}

/// One resource of either request kind.
#[derive(Debug, Clone)]
pub(super) struct Change {
    resource_type: i8,
    name: String,
    ops: Vec<Op>,
    /// AlterConfigs: the ops are the whole new set; keys not named are deleted.
    replace: bool,
}

fn duplicated_resources(changes: &[Change]) -> HashSet<usize> {
    let mut seen: BTreeMap<(i8, &str), usize> = BTreeMap::new();
    let mut duplicated = HashSet::new();
    for (index, change) in changes.iter().enumerate() {
        if let Some(first) = seen.insert((change.resource_type, change.name.as_str()), index) {
            duplicated.insert(first);
            duplicated.insert(index);
        }
    }
    duplicated
}

/// The broker half for one resource (Kafka's order): duplicate keys, null values, the resource
/// type, this node's id for BROKER resources and their values.
pub(super) fn precheck_one(change: &Change, node_id: Option<i32>, legacy: bool) -> Precheck {
    let mut names = HashSet::new();
    if !change.ops.iter().all(|op| names.insert(op.name.as_str())) {
        return Precheck::Failed(ApiError::invalid_request(
            "Error due to duplicate config keys",
        ));
    }
    let nulls: Vec<&str> = change
        .ops
        .iter()
        .filter(|op| op.value.is_none() && (legacy || op.op != 1))
        .map(|op| op.name.as_str())
        .collect();
    if !nulls.is_empty() {
        return Precheck::Failed(ApiError::invalid_request(format!(
            "Null value not supported for : {}",
            nulls.join(", ")
        )));
    }
    match change.resource_type {
        rt::BROKER_LOGGER if !legacy => Precheck::BrokerLogger,
        rt::BROKER => {
            if !change.name.is_empty() {
                match change.name.parse::<i32>() {
                    Err(_) => {
                        return Precheck::Failed(ApiError::invalid_request(format!(
                            "Node id must be an integer, but it is: {}",
                            change.name
                        )))
                    }
                    Ok(id) if node_id.is_some_and(|own| own != id) => {
                        return Precheck::Failed(ApiError::invalid_request(format!(
                            "Unexpected broker id, expected {}, but received {}",
                            node_id.unwrap_or_default(),
                            change.name
                        )))
                    }
                    Ok(_) => {}
                }
            }
            Precheck::Forward
        }
        rt::TOPIC | rt::CLIENT_METRICS | rt::GROUP => Precheck::Forward,
        other => Precheck::Failed(ApiError::invalid_request(format!(
            "Unknown resource type {other}"
        ))),
    }
}

/// The broker half for one resource that another resource of the request may name too
/// (`duplicated`: every copy is refused, as Kafka's `ConfigAdminManager` refuses them).
pub(super) fn precheck_copy(
    change: &Change,
    duplicated: bool,
    node_id: Option<i32>,
    legacy: bool,
) -> Precheck {
    if duplicated {
        return Precheck::Failed(ApiError::invalid_request(
            "Each resource must appear at most once.",
        ));
    }
    precheck_one(change, node_id, legacy)
}

fn precheck_all(changes: &[Change], node_id: Option<i32>, legacy: bool) -> Vec<Precheck> {
    let duplicated = duplicated_resources(changes);
    changes
        .iter()
        .enumerate()
        .map(|(index, change)| precheck_copy(change, duplicated.contains(&index), node_id, legacy))
        .collect()
}

/// An IncrementalAlterConfigs resource as a change.
pub(super) fn incremental_change(resource: &IncrementalResource) -> Change {
    Change {
        resource_type: resource.resource_type,
        name: resource.resource_name.to_string(),
        ops: resource
            .configs
            .iter()
            .map(|config| Op {
                name: config.name.to_string(),
                op: config.config_operation,
                value: config.value.as_ref().map(ToString::to_string),
            })
            .collect(),
        replace: false,
    }
}

/// An AlterConfigs resource as a change: its configs replace the resource's.
pub(super) fn legacy_change(resource: &LegacyResource) -> Change {
    Change {
        resource_type: resource.resource_type,
        name: resource.resource_name.to_string(),
        ops: resource
            .configs
            .iter()
            .map(|config| Op {
                name: config.name.to_string(),
                op: 0,
                value: config.value.as_ref().map(ToString::to_string),
            })
            .collect(),
        replace: true,
    }
}

fn incremental_changes(request: &IncrementalAlterConfigsRequest) -> Vec<Change> {
    request.resources.iter().map(incremental_change).collect()
}

fn legacy_changes(request: &AlterConfigsRequest) -> Vec<Change> {
    request.resources.iter().map(legacy_change).collect()
}

/// The broker half of IncrementalAlterConfigs, one entry per resource in request order.
///
/// `node_id` is the receiving broker's id, which a BROKER resource must name; `None` on the
/// controller side (a request that arrived on a controller listener, possibly forwarded by a
/// broker that already checked it), where any registered node id may be named.
pub fn precheck_incremental(
    request: &IncrementalAlterConfigsRequest,
    node_id: Option<i32>,
) -> Vec<Precheck> {
    precheck_all(&incremental_changes(request), node_id, false)
}

/// The broker half of AlterConfigs (BROKER_LOGGER is an unknown type there, as in Kafka).
pub fn precheck_legacy(request: &AlterConfigsRequest, node_id: Option<i32>) -> Vec<Precheck> {
    precheck_all(&legacy_changes(request), node_id, true)
}

/// The definition of `key` for a resource type, if Gregor knows it.
fn definition(resource_type: i8, key: &str) -> Option<TopicConfigDef> {
    match resource_type {
        rt::TOPIC => topic_configs::topic_config(key).copied(),
        rt::BROKER => broker::broker_config(key),
        rt::GROUP => group::group_config(key).copied(),
        rt::CLIENT_METRICS => client_metrics::client_metrics_config(key).copied(),
        _ => None,
    }
}

fn split_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The controller's name and existence checks (`ConfigurationControlManager` with
/// `ControllerConfigurationValidator`), before any value is looked at.
fn check_resource(image: &MetadataImage, change: &Change) -> Result<(), ApiError> {
    match change.resource_type {
        rt::TOPIC => {
            if change.name.is_empty() {
                return Err(ApiError::invalid_request(
                    "Default topic resources are not allowed.",
                ));
            }
            topic_name::validate(&change.name)
                .map_err(|e| ApiError::new(ResponseError::InvalidTopicException, e.to_string()))?;
            if image.topics.get_by_name(&change.name).is_none() {
                return Err(ApiError::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("The topic '{}' does not exist.", change.name),
                ));
            }
            Ok(())
        }
        rt::BROKER => {
            if change.name.is_empty() {
                return Ok(());
            }
            let id: i32 = change.name.parse().map_err(|_| {
                ApiError::invalid_request("Unable to parse broker name as a base 10 number.")
            })?;
            if id < 0 {
                return Err(ApiError::invalid_request("Invalid negative broker ID."));
            }
            if image.cluster.broker(id).is_none() && image.cluster.controller(id).is_none() {
                return Err(ApiError::new(
                    ResponseError::BrokerIdNotRegistered,
                    format!("No node with id {id} found."),
                ));
            }
            Ok(())
        }
        rt::GROUP if change.name.is_empty() => Err(ApiError::invalid_request(
            "Default group resources are not allowed.",
        )),
        rt::GROUP | rt::CLIENT_METRICS => Ok(()),
        other => Err(ApiError::new(
            ResponseError::UnsupportedVersion,
            format!("Unknown resource type {other}."),
        )),
    }
}

/// Applies the ops to the resource's current configs, giving its whole new config map.
fn apply_ops(
    current: &BTreeMap<String, String>,
    change: &Change,
) -> Result<BTreeMap<String, String>, ApiError> {
    if change.replace {
        return Ok(change
            .ops
            .iter()
            .filter_map(|op| Some((op.name.clone(), op.value.clone()?)))
            .collect());
    }
    let mut next = current.clone();
    for op in &change.ops {
        let kind = OpType::from_id(op.op).ok_or_else(|| {
            ApiError::invalid_request(format!("Unknown operation type {}", op.op))
        })?;
        let value = op.value.clone().unwrap_or_default();
        match kind {
            OpType::Set => {
                next.insert(op.name.clone(), value);
            }
            OpType::Delete => {
                next.remove(&op.name);
            }
            OpType::Append | OpType::Subtract => {
                let def = definition(change.resource_type, &op.name)
                    .filter(|def| def.config_type == ConfigType::List)
                    .ok_or_else(|| {
                        ApiError::invalid_config(format!(
                            "Can't {} to key {} because its type is not LIST.",
                            kind.name(),
                            op.name
                        ))
                    })?;
                // The list starts from the current value, or the default when unset.
                let base = next.get(&op.name).map_or(def.default, String::as_str);
                let mut items = split_list(base);
                let operands = split_list(&value);
                // Sets keep long lists (a throttled-replicas list, say) linear.
                if kind == OpType::Append {
                    let mut present: HashSet<String> = items.iter().cloned().collect();
                    for item in operands {
                        if present.insert(item.clone()) {
                            items.push(item);
                        }
                    }
                } else {
                    let removed: HashSet<String> = operands.into_iter().collect();
                    items.retain(|item| !removed.contains(item));
                }
                next.insert(op.name.clone(), items.join(","));
            }
        }
    }
    Ok(next)
}

/// Validates a resource's new config map for its type.
fn validate(
    change: &Change,
    next: &BTreeMap<String, String>,
    rules: &ConfigRules,
) -> Result<(), ApiError> {
    match change.resource_type {
        rt::TOPIC => {
            let pairs: Vec<(String, String)> =
                next.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            topic_configs::validate_creation_configs(&pairs)
                .map_err(|e| ApiError::invalid_config(e.to_string()))
        }
        rt::BROKER => broker::validate(next, &rules.plugin_broker_configs),
        rt::GROUP => group::validate(next, &rules.group_defaults, &rules.group_bounds),
        rt::CLIENT_METRICS => client_metrics::validate(&change.name, next),
        _ => Ok(()),
    }
}

/// The records taking a resource from `current` to `next`. For BROKER resources every key the
/// request names is written even if unchanged, as Kafka does so that brokers reload it
/// (KAFKA-14136).
fn records_for(
    change: &Change,
    current: &BTreeMap<String, String>,
    next: &BTreeMap<String, String>,
) -> Vec<MetadataRecord> {
    let record = |name: &str, value: Option<&String>| {
        MetadataRecord::Config(ConfigRecord {
            resource_type: change.resource_type,
            resource_name: change.name.clone(),
            name: name.to_owned(),
            value: value.cloned(),
        })
    };
    let always = change.resource_type == rt::BROKER;
    let mut out = Vec::new();
    let mut written = HashSet::new();
    for op in &change.ops {
        if !written.insert(op.name.clone()) {
            continue;
        }
        let before = current.get(&op.name);
        let after = next.get(&op.name);
        if before != after || (always && after.is_some()) {
            out.push(record(&op.name, after));
        }
    }
    // AlterConfigs deletes every key it does not name.
    for (name, _) in current.iter().filter(|(k, _)| !next.contains_key(*k)) {
        if written.insert(name.clone()) {
            out.push(record(name, None));
        }
    }
    out
}

/// Decides every resource: prechecks, controller checks, ops, validation, records.
fn decide(
    image: &MetadataImage,
    changes: &[Change],
    node_id: Option<i32>,
    legacy: bool,
    validate_only: bool,
    rules: &ConfigRules,
) -> (Vec<Result<(), ApiError>>, Vec<MetadataRecord>) {
    let prechecks = precheck_all(changes, node_id, legacy);
    let mut records = Vec::new();
    let mut results = Vec::with_capacity(changes.len());
    for (change, precheck) in changes.iter().zip(prechecks) {
        results.push(decide_one(image, change, precheck, rules, &mut records));
        // Kafka's `BoundedList` of records fails the whole request, validated only or not.
        if records.len() > MAX_RECORDS_PER_USER_OP {
            let too_large = ApiError {
                code: ResponseError::PolicyViolation,
                message: Some(TOO_MANY_RECORDS.to_owned()),
            };
            return (vec![Err(too_large); changes.len()], Vec::new());
        }
    }
    if validate_only {
        records.clear();
    }
    (results, records)
}

/// One resource's decision, its records added to `records`.
pub(super) fn decide_one(
    image: &MetadataImage,
    change: &Change,
    precheck: Precheck,
    rules: &ConfigRules,
    records: &mut Vec<MetadataRecord>,
) -> Result<(), ApiError> {
    match precheck {
        Precheck::Failed(error) => return Err(error),
        // The handler applies these locally; one that reaches here is refused rather than
        // persisted.
        Precheck::BrokerLogger => {
            return Err(ApiError::invalid_request(
                "BROKER_LOGGER resources are applied by the node that receives them",
            ))
        }
        Precheck::Forward => {}
    }
    check_resource(image, change)?;
    let current: BTreeMap<String, String> = image
        .configs
        .get(change.resource_type, &change.name)
        .map(|configs| {
            configs
                .iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let next = apply_ops(&current, change)?;
    validate(change, &next, rules)?;
    records.extend(records_for(change, &current, &next));
    Ok(())
}

fn parts(result: &Result<(), ApiError>) -> (i16, Option<StrBytes>) {
    match result {
        Ok(()) => (0, None),
        Err(error) => (
            error.code.code(),
            error.message.clone().map(StrBytes::from_string),
        ),
    }
}

/// IncrementalAlterConfigs for every resource of `request` (BROKER_LOGGER resources are the
/// handler's; see [`precheck_incremental`]). One result per resource, in request order.
pub fn incremental_alter_configs(
    image: &MetadataImage,
    request: &IncrementalAlterConfigsRequest,
    node_id: Option<i32>,
    rules: &ConfigRules,
) -> ControllerResult<IncrementalAlterConfigsResponse> {
    let changes = incremental_changes(request);
    let (results, records) = decide(
        image,
        &changes,
        node_id,
        false,
        request.validate_only,
        rules,
    );
    let responses = request
        .resources
        .iter()
        .zip(&results)
        .map(|(resource, result)| {
            let (code, message) = parts(result);
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone())
        })
        .collect();
    ControllerResult {
        records,
        response: IncrementalAlterConfigsResponse::default().with_responses(responses),
    }
}

/// AlterConfigs: each resource's configs become exactly the ones given.
pub fn alter_configs(
    image: &MetadataImage,
    request: &AlterConfigsRequest,
    node_id: Option<i32>,
    rules: &ConfigRules,
) -> ControllerResult<AlterConfigsResponse> {
    let changes = legacy_changes(request);
    let (results, records) = decide(image, &changes, node_id, true, request.validate_only, rules);
    let responses = request
        .resources
        .iter()
        .zip(&results)
        .map(|(resource, result)| {
            let (code, message) = parts(result);
            alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone())
        })
        .collect();
    ControllerResult {
        records,
        response: AlterConfigsResponse::default().with_responses(responses),
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests;
