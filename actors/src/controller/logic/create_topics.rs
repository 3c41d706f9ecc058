//! CreateTopics (api 19): the decisions of Kafka's `ReplicationControlManager.createTopics`,
//! plus the controller-side request checks of `ControllerApis.createTopics`.
//!
//! Per topic, in this order (the first failure wins, except that an existing topic reports
//! TOPIC_ALREADY_EXISTS over a name or collision error, as in Kafka):
//! 1. named more than once → INVALID_REQUEST "Duplicate topic name." (one result per name);
//! 2. `__cluster_metadata` → INVALID_REQUEST;
//! 3. illegal name → INVALID_TOPIC_EXCEPTION; '.'/'_' collision with an existing topic →
//!    INVALID_TOPIC_EXCEPTION; existing name → TOPIC_ALREADY_EXISTS;
//! 4. null config values, then unknown or invalid configs → INVALID_CONFIG;
//! 5. manual assignment / replication factor / partition count checks, replica placement;
//! 6. the mutation quota is charged with the partition count;
//! 7. success: TopicRecord, ConfigRecords, PartitionRecords (none if `validate_only`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use gregor_publishers::records::{ConfigRecord, MetadataRecord, TopicRecord};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use rand::Rng;
use uuid::Uuid;

use super::errors::ControllerError;
use super::listed::{decide_listed, ListedAnswers, ListedElements, ListedError, Uncommitted};
use super::partitions::{
    active_replicas, all_inactive, no_active_replica, validate_manual_assignment, NewPartition,
};
use super::placement::place;
use super::topic_configs::{effective_configs, validate_creation_configs};
use super::topic_name::{self, CLUSTER_METADATA_TOPIC_NAME};
use super::view::{BrokerView, MetadataView};
use super::{ControllerResult, MutationContext, MAX_RECORDS_PER_USER_OP};

/// ConfigResource type id of topics.
const TOPIC_RESOURCE: i8 = 2;

/// The controller's `num.partitions` and `default.replication.factor`, used when a topic asks
/// for -1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TopicDefaults {
    /// Partitions of a topic created with `num_partitions = -1`.
    pub num_partitions: i32,
    /// Replicas per partition of a topic created with `replication_factor = -1`.
    pub default_replication_factor: i16,
}

impl Default for TopicDefaults {
    /// Kafka's defaults: one partition, one replica.
    fn default() -> Self {
        TopicDefaults {
            num_partitions: 1,
            default_replication_factor: 1,
        }
    }
}

/// A topic that passed every check.
struct Created {
    result: CreatableTopicResult,
    records: Vec<MetadataRecord>,
}

/// Decides a CreateTopics request against `image`. `version` is the request version (the
/// effective configs are only computed for v5+, the first version that returns them).
pub fn create_topics<V: MetadataView + ?Sized>(
    image: &V,
    request: &CreateTopicsRequest,
    version: i16,
    defaults: &TopicDefaults,
    ctx: &mut MutationContext<'_>,
) -> ControllerResult<CreateTopicsResponse> {
    let mut occurrences: HashMap<&str, usize> = HashMap::new();
    for topic in &request.topics {
        *occurrences.entry(topic.name.0.as_str()).or_default() += 1;
    }
    let mut decider = Decider::new(image, version, defaults);
    let mut seen = HashSet::new();
    let mut outcomes = Vec::new();
    for topic in &request.topics {
        let name = topic.name.0.as_str();
        if !seen.insert(name) {
            continue;
        }
        let repeated = occurrences.get(name).copied().unwrap_or(0) > 1;
        let outcome = decider.decide(topic, repeated, ctx);
        if let Err(ControllerError::BatchTooLarge) = &outcome {
            return batch_too_large(&request.topics);
        }
        outcomes.push((topic.name.clone(), outcome));
    }
    let mut records = Vec::with_capacity(decider.record_count);
    let mut results = Vec::with_capacity(outcomes.len());
    for (name, outcome) in outcomes {
        match outcome {
            Ok(created) => {
                records.extend(created.records);
                results.push(created.result);
            }
            Err(error) => results.push(failed(name, &error)),
        }
    }
    if request.validate_only {
        records.clear();
    }
    ControllerResult {
        records,
        response: CreateTopicsResponse::default().with_topics(results),
    }
}

/// Decides the distinct topics of one request in request order, keeping what depends on the
/// topics before (the records so far, the ids handed out).
struct Decider<'a, V: ?Sized> {
    image: &'a V,
    version: i16,
    defaults: &'a TopicDefaults,
    brokers: Vec<BrokerView>,
    used_ids: HashSet<Uuid>,
    record_count: usize,
}

impl<'a, V: MetadataView + ?Sized> Decider<'a, V> {
    fn new(image: &'a V, version: i16, defaults: &'a TopicDefaults) -> Self {
        Decider {
            image,
            version,
            defaults,
            brokers: image.brokers(),
            used_ids: HashSet::new(),
            record_count: 0,
        }
    }

    /// The outcome of a name's first appearance; `repeated`: the request names it again.
    fn decide(
        &mut self,
        topic: &CreatableTopic,
        repeated: bool,
        ctx: &mut MutationContext<'_>,
    ) -> Result<Created, ControllerError> {
        if repeated {
            return Err(ControllerError::DuplicateTopicName);
        }
        let created = create_topic(
            self.image,
            topic,
            self.version,
            self.defaults,
            &self.brokers,
            ctx,
            &mut self.used_ids,
            self.record_count,
        )?;
        self.record_count += created.records.len();
        Ok(created)
    }
}

/// What one distinct topic of a [`ListedElements`] request is answered, without its name (the
/// answer is written from the request's frame, which has it).
#[derive(Debug, Clone, PartialEq)]
pub enum ListedOutcome {
    /// Created, or would be with `validate_only`: the result without name and configs, and the
    /// configs (shared by consecutive topics that have the same).
    Created {
        result: Box<CreatableTopicResult>,
        configs: Arc<Option<Vec<CreatableTopicConfigs>>>,
    },
    /// The error code, and the message as the parts between the occurrences of the topic's
    /// name in it, so that topics failing alike share one outcome.
    Failed {
        code: i16,
        message: Option<Vec<String>>,
    },
}

impl ListedOutcome {
    /// The outcome of a topic that failed with `error`.
    fn failed(error: &ListedError) -> Self {
        ListedOutcome::Failed {
            code: error.code,
            message: error.message.clone(),
        }
    }
}

/// The answer to a [`ListedElements`] CreateTopics request (at most
/// [`MAX_RECORDS_PER_USER_OP`] / 2 topics are created).
pub type ListedCreation = ListedAnswers<ListedOutcome>;

impl ListedAnswers<ListedOutcome> {
    /// The answer to the topic named `name` whose outcome is `outcome`.
    pub fn result(outcome: &ListedOutcome, name: &TopicName) -> CreatableTopicResult {
        match outcome {
            ListedOutcome::Created { result, configs } => {
                let mut result = result.as_ref().clone().with_name(name.clone());
                result.configs = configs.as_ref().clone();
                result
            }
            ListedOutcome::Failed { code, message } => CreatableTopicResult::default()
                .with_name(name.clone())
                .with_error_code(*code)
                .with_error_message(
                    message
                        .as_ref()
                        .map(|parts| StrBytes::from_string(parts.join(name.0.as_str()))),
                ),
        }
    }
}

impl Uncommitted for ListedOutcome {
    /// A created topic fails; a failure stays as it is.
    fn fail_if_succeeded(&mut self, code: i16, message: &str) {
        if let ListedOutcome::Created { result, .. } = self {
            if result.error_code == 0 {
                result.error_code = code;
                result.error_message = Some(StrBytes::from_string(message.to_owned()));
            }
        }
    }
}

/// Decides a request whose topics are read from `topics` as [`create_topics`] decides the
/// same topics, without holding them or their answers whole.
pub fn create_listed_topics<V: MetadataView + ?Sized>(
    image: &V,
    topics: &dyn ListedElements,
    validate_only: bool,
    version: i16,
    defaults: &TopicDefaults,
    ctx: &mut MutationContext<'_>,
) -> ControllerResult<ListedCreation> {
    let mut decider = Decider::new(image, version, defaults);
    let mut last_configs: Option<Arc<Option<Vec<CreatableTopicConfigs>>>> = None;
    decide_listed(
        "CreateTopics",
        topics,
        validate_only,
        |topic, repeated, _| {
            let mut created = decider.decide(topic, repeated, ctx)?;
            let configs = created.result.configs.take();
            let configs = match &last_configs {
                Some(last) if **last == configs => last.clone(),
                _ => Arc::new(configs),
            };
            last_configs = Some(configs.clone());
            created.result.name = TopicName::default();
            let outcome = ListedOutcome::Created {
                result: Box::new(created.result),
                configs,
            };
            Ok::<_, ControllerError>((created.records, outcome))
        },
        |topic| topic.name.0.as_str(),
        ListedOutcome::failed,
    )
}

fn failed(name: TopicName, error: &ControllerError) -> CreatableTopicResult {
    CreatableTopicResult::default()
        .with_name(name)
        .with_error_code(error.code().code())
        .with_error_message(error.message().map(StrBytes::from_string))
}

/// Kafka fails the whole request when it would exceed one batch; every topic gets the error.
fn batch_too_large(topics: &[CreatableTopic]) -> ControllerResult<CreateTopicsResponse> {
    let mut seen = HashSet::new();
    let results = topics
        .iter()
        .filter(|topic| seen.insert(topic.name.0.as_str()))
        .map(|topic| failed(topic.name.clone(), &ControllerError::BatchTooLarge))
        .collect();
    ControllerResult {
        records: Vec::new(),
        response: CreateTopicsResponse::default().with_topics(results),
    }
}

fn check_name<V: MetadataView + ?Sized>(image: &V, name: &str) -> Result<(), ControllerError> {
    if name == CLUSTER_METADATA_TOPIC_NAME {
        return Err(ControllerError::ClusterMetadataTopic);
    }
    let mut error = topic_name::validate(name).err().map(ControllerError::from);
    if topic_name::has_collision_chars(name) {
        if let Some(existing) = image.colliding_topic(name) {
            error = Some(ControllerError::TopicCollision {
                name: name.to_owned(),
                existing,
            });
        }
    }
    if image.topic_id(name).is_some() {
        error = Some(ControllerError::TopicAlreadyExists {
            name: name.to_owned(),
        });
    }
    error.map_or(Ok(()), Err)
}

/// The supplied configs as (key, value), keeping the last value of a repeated key.
fn creation_configs(topic: &CreatableTopic) -> Result<Vec<(String, String)>, ControllerError> {
    let nulls: Vec<String> = topic
        .configs
        .iter()
        .filter(|c| c.value.is_none())
        .map(|c| c.name.to_string())
        .collect();
    if !nulls.is_empty() {
        return Err(ControllerError::NullConfigValues { names: nulls });
    }
    // The last occurrence of each key wins, kept in the order of those last occurrences.
    let mut last: HashMap<&str, usize> = HashMap::with_capacity(topic.configs.len());
    for (index, config) in topic.configs.iter().enumerate() {
        last.insert(config.name.as_str(), index);
    }
    Ok(topic
        .configs
        .iter()
        .enumerate()
        .filter(|(index, config)| last.get(config.name.as_str()) == Some(index))
        .map(|(_, config)| {
            let value = config
                .value
                .as_ref()
                .map(|v| v.to_string())
                .unwrap_or_default();
            (config.name.to_string(), value)
        })
        .collect())
}

#[allow(clippy::too_many_arguments)]
fn create_topic<V: MetadataView + ?Sized>(
    image: &V,
    topic: &CreatableTopic,
    version: i16,
    defaults: &TopicDefaults,
    brokers: &[BrokerView],
    ctx: &mut MutationContext<'_>,
    used_ids: &mut HashSet<Uuid>,
    records_so_far: usize,
) -> Result<Created, ControllerError> {
    let name = topic.name.0.as_str();
    check_name(image, name)?;
    let configs = creation_configs(topic)?;
    validate_creation_configs(&configs)?;
    // Kafka fails the whole request once its records would exceed one batch; checking before
    // placement also keeps a huge partition count from being materialised.
    let budget = MAX_RECORDS_PER_USER_OP.saturating_sub(records_so_far + 1 + configs.len());
    let partitions = new_partitions(topic, defaults, brokers, ctx, budget)?;
    let count = u32::try_from(partitions.len()).unwrap_or(u32::MAX);
    ctx.quota
        .charge(count)
        .map_err(|e| ControllerError::ThrottlingQuotaExceeded {
            throttle_time_ms: e.throttle_time_ms,
        })?;
    let topic_id = new_topic_id(image, ctx, used_ids);
    let replication_factor = partitions
        .values()
        .next()
        .map_or(0, |p| i16::try_from(p.replicas.len()).unwrap_or(i16::MAX));
    let mut result = CreatableTopicResult::default()
        .with_name(topic.name.clone())
        .with_topic_id(topic_id)
        .with_error_code(0)
        .with_error_message(None)
        .with_num_partitions(i32::try_from(partitions.len()).unwrap_or(i32::MAX))
        .with_replication_factor(replication_factor)
        .with_topic_config_error_code(0);
    if version >= 5 {
        let configs = effective_configs(&configs)
            .into_iter()
            .map(|entry| {
                CreatableTopicConfigs::default()
                    .with_name(StrBytes::from_static_str(entry.name))
                    .with_value(entry.value.map(StrBytes::from_string))
                    .with_read_only(false)
                    .with_config_source(entry.source)
                    .with_is_sensitive(entry.sensitive)
            })
            .collect();
        result = result.with_configs(Some(configs));
    }
    let mut records = Vec::with_capacity(1 + configs.len() + partitions.len());
    records.push(MetadataRecord::Topic(TopicRecord {
        name: name.to_owned(),
        topic_id,
    }));
    records.extend(configs.into_iter().map(|(key, value)| {
        MetadataRecord::Config(ConfigRecord {
            resource_type: TOPIC_RESOURCE,
            resource_name: name.to_owned(),
            name: key,
            value: Some(value),
        })
    }));
    records.extend(
        partitions
            .iter()
            .map(|(index, partition)| partition.to_record(topic_id, *index)),
    );
    Ok(Created { result, records })
}

/// The partitions of the new topic by index: from the manual assignment, or placed.
fn new_partitions(
    topic: &CreatableTopic,
    defaults: &TopicDefaults,
    brokers: &[BrokerView],
    ctx: &mut MutationContext<'_>,
    budget: usize,
) -> Result<BTreeMap<i32, NewPartition>, ControllerError> {
    let mut partitions = BTreeMap::new();
    if !topic.assignments.is_empty() {
        if topic.replication_factor != -1 {
            return Err(ControllerError::AssignmentWithReplicationFactor);
        }
        if topic.num_partitions != -1 {
            return Err(ControllerError::AssignmentWithNumPartitions);
        }
        let mut replication_factor = None;
        for assignment in &topic.assignments {
            let index = assignment.partition_index;
            if partitions.contains_key(&index) {
                return Err(ControllerError::InvalidReplicaAssignment(format!(
                    "Found multiple manual partition assignments for partition {index}"
                )));
            }
            let replicas: Vec<i32> = assignment.broker_ids.iter().map(|b| b.0).collect();
            validate_manual_assignment(&replicas, replication_factor, brokers)?;
            replication_factor = Some(replicas.len());
            let isr = active_replicas(&replicas, brokers);
            if isr.is_empty() {
                return Err(all_inactive(index.into()));
            }
            partitions.insert(index, NewPartition { replicas, isr });
        }
        let consecutive = (0..partitions.len())
            .all(|i| i32::try_from(i).is_ok_and(|i| partitions.contains_key(&i)));
        if !consecutive {
            return Err(ControllerError::InvalidReplicaAssignment(
                "partitions should be a consecutive 0-based integer sequence".into(),
            ));
        }
        if partitions.len() > budget {
            return Err(ControllerError::BatchTooLarge);
        }
        return Ok(partitions);
    }
    if topic.replication_factor < -1 || topic.replication_factor == 0 {
        return Err(ControllerError::InvalidReplicationFactor(
            "Replication factor must be larger than 0, or -1 to use the default value.".into(),
        ));
    }
    let non_positive = || {
        ControllerError::InvalidPartitions(
            "Number of partitions was set to an invalid non-positive value.".into(),
        )
    };
    if topic.num_partitions < -1 || topic.num_partitions == 0 {
        return Err(non_positive());
    }
    let num_partitions = if topic.num_partitions == -1 {
        defaults.num_partitions
    } else {
        topic.num_partitions
    };
    let replication_factor = if topic.replication_factor == -1 {
        defaults.default_replication_factor
    } else {
        topic.replication_factor
    };
    let num_partitions = usize::try_from(num_partitions)
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(non_positive)?;
    if num_partitions > budget {
        return Err(ControllerError::BatchTooLarge);
    }
    let placed =
        place(brokers, num_partitions, replication_factor.into(), ctx.rng).map_err(|e| {
            ControllerError::InvalidReplicationFactor(format!(
                "Unable to replicate the partition {replication_factor} time(s): {e}"
            ))
        })?;
    for (index, replicas) in (0_i32..).zip(placed) {
        let isr = active_replicas(&replicas, brokers);
        if isr.is_empty() {
            return Err(no_active_replica(replication_factor));
        }
        partitions.insert(index, NewPartition { replicas, isr });
    }
    Ok(partitions)
}

/// A random (v4) topic id that is neither nil nor in use.
fn new_topic_id<V: MetadataView + ?Sized>(
    image: &V,
    ctx: &mut MutationContext<'_>,
    used: &mut HashSet<Uuid>,
) -> Uuid {
    let mut id = Uuid::nil();
    for _ in 0..64 {
        id = uuid::Builder::from_random_bytes(ctx.rng.random()).into_uuid();
        if !used.contains(&id) && image.topic_name(&id).is_none() {
            break;
        }
    }
    used.insert(id);
    id
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::controller::logic::listed::Listed;
    use crate::controller::logic::quota::Unlimited;
    use crate::controller::logic::testing::{
        outcome, topic_name, with_ctx, CountingRng, FakeView, ScriptedQuota,
    };
    use gregor_publishers::records::PartitionRecord;
    use kafka_protocol::messages::create_topics_request::{
        CreatableReplicaAssignment, CreatableTopicConfig,
    };
    use kafka_protocol::messages::BrokerId;

    fn topic(name: &str, partitions: i32, replication: i16) -> CreatableTopic {
        CreatableTopic::default()
            .with_name(topic_name(name))
            .with_num_partitions(partitions)
            .with_replication_factor(replication)
    }

    fn manual(name: &str, assignments: &[(i32, &[i32])]) -> CreatableTopic {
        topic(name, -1, -1).with_assignments(
            assignments
                .iter()
                .map(|(index, brokers)| {
                    CreatableReplicaAssignment::default()
                        .with_partition_index(*index)
                        .with_broker_ids(brokers.iter().map(|b| BrokerId(*b)).collect())
                })
                .collect(),
        )
    }

    fn with_configs(topic: CreatableTopic, configs: &[(&str, Option<&str>)]) -> CreatableTopic {
        topic.with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string((*k).to_owned()))
                        .with_value(v.map(|v| StrBytes::from_string(v.to_owned())))
                })
                .collect(),
        )
    }

    fn run(view: &FakeView, topics: Vec<CreatableTopic>) -> ControllerResult<CreateTopicsResponse> {
        let request = CreateTopicsRequest::default().with_topics(topics);
        with_ctx(|ctx| create_topics(view, &request, 7, &TopicDefaults::default(), ctx))
    }

    fn outcomes(
        result: &ControllerResult<CreateTopicsResponse>,
    ) -> Vec<(String, i16, Option<String>)> {
        result
            .response
            .topics
            .iter()
            .map(|t| {
                let (code, message) = outcome(t.error_code, &t.error_message);
                (t.name.0.to_string(), code, message)
            })
            .collect()
    }

    fn single_error(view: &FakeView, topic: CreatableTopic) -> (i16, Option<String>) {
        let result = run(view, vec![topic]);
        assert!(result.records.is_empty());
        let all = outcomes(&result);
        assert_eq!(all.len(), 1);
        (all[0].1, all[0].2.clone())
    }

    fn partition(
        topic_id: Uuid,
        partition_id: i32,
        replicas: &[i32],
        isr: &[i32],
    ) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord {
            partition_id,
            topic_id,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader: isr[0],
            leader_recovery_state: 0,
            leader_epoch: 0,
            partition_epoch: 0,
            directories: vec![Uuid::nil(); replicas.len()],
        })
    }

    /// The id the counting rng yields after `consumed` draws.
    fn id_after(consumed: u8) -> Uuid {
        uuid::Builder::from_random_bytes(std::array::from_fn(|i| consumed + 1 + i as u8))
            .into_uuid()
    }

    #[test]
    fn creates_a_placed_topic_with_records_and_configs() {
        let view = FakeView::with_brokers(&[1, 2, 3]);
        let result = run(&view, vec![topic("orders", 2, 2)]);
        // One draw for the broker list's start offset, then sixteen for the id.
        let id = id_after(1);
        assert_eq!(
            result.records,
            vec![
                MetadataRecord::Topic(TopicRecord {
                    name: "orders".into(),
                    topic_id: id
                }),
                partition(id, 0, &[1, 2], &[1, 2]),
                partition(id, 1, &[2, 3], &[2, 3]),
            ]
        );
        let created = &result.response.topics[0];
        assert_eq!(
            (
                created.topic_id,
                created.error_code,
                created.error_message.clone()
            ),
            (id, 0, None)
        );
        assert_eq!((created.num_partitions, created.replication_factor), (2, 2));
        assert_eq!(created.topic_config_error_code, 0);
        let configs = created.configs.as_ref().expect("v5+ returns configs");
        assert_eq!(configs.len(), 33);
        assert_eq!(configs[0].name.as_str(), "cleanup.policy");
        assert_eq!(configs[0].value.as_deref(), Some("delete"));
        assert_eq!(
            (
                configs[0].config_source,
                configs[0].read_only,
                configs[0].is_sensitive
            ),
            (5, false, false)
        );
    }

    #[test]
    fn defaults_apply_to_minus_one() {
        let view = FakeView::with_brokers(&[1, 2, 3]);
        let request = CreateTopicsRequest::default().with_topics(vec![topic("t", -1, -1)]);
        let defaults = TopicDefaults {
            num_partitions: 3,
            default_replication_factor: 3,
        };
        let result = with_ctx(|ctx| create_topics(&view, &request, 4, &defaults, ctx));
        let created = &result.response.topics[0];
        assert_eq!(
            (
                created.error_code,
                created.num_partitions,
                created.replication_factor
            ),
            (0, 3, 3)
        );
        assert_eq!(created.configs, Some(vec![]), "configs only from v5");
        assert_eq!(result.records.len(), 4);
    }

    #[test]
    fn supplied_configs_become_records_between_topic_and_partitions() {
        let view = FakeView::with_brokers(&[1]);
        let t = with_configs(
            topic("t", 1, 1),
            &[
                ("retention.ms", Some("1000")),
                ("cleanup.policy", Some("compact")),
                ("retention.ms", Some("2000")),
            ],
        );
        let result = run(&view, vec![t]);
        let config = |name: &str, value: &str| {
            MetadataRecord::Config(ConfigRecord {
                resource_type: 2,
                resource_name: "t".into(),
                name: name.into(),
                value: Some(value.into()),
            })
        };
        assert_eq!(
            result.records[1..3],
            [
                config("cleanup.policy", "compact"),
                config("retention.ms", "2000")
            ]
        );
        assert!(matches!(result.records[3], MetadataRecord::Partition(_)));
        let configs = result.response.topics[0]
            .configs
            .clone()
            .unwrap_or_default();
        let retention = configs
            .iter()
            .find(|c| c.name.as_str() == "retention.ms")
            .expect("listed");
        assert_eq!(
            (retention.value.as_deref(), retention.config_source),
            (Some("2000"), 1)
        );
    }

    #[test]
    fn name_rules() {
        let view = FakeView::with_brokers(&[1]).topic("a.b", 1, &[&[1]]);
        let invalid = kafka_protocol::error::ResponseError::InvalidTopicException.code();
        assert_eq!(
            single_error(&view, topic("bad name", 1, 1)),
            (invalid, Some("Topic name is invalid: 'bad name' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'".into()))
        );
        assert_eq!(
            single_error(&view, topic("", 1, 1)),
            (
                invalid,
                Some("Topic name is invalid: the empty string is not allowed".into())
            )
        );
        assert_eq!(
            single_error(&view, topic("a_b", 1, 1)),
            (
                invalid,
                Some("Topic 'a_b' collides with existing topic: a.b".into())
            )
        );
        assert_eq!(
            single_error(&view, topic("a.b", 1, 1)),
            (36, Some("Topic 'a.b' already exists.".into()))
        );
        assert_eq!(
            single_error(&view, topic("__cluster_metadata", 1, 1)),
            (
                42,
                Some("Creation of internal topic __cluster_metadata is prohibited.".into())
            )
        );
    }

    #[test]
    fn duplicates_get_one_result_each_in_request_order() {
        let view = FakeView::with_brokers(&[1]);
        let result = run(
            &view,
            vec![topic("x", 1, 1), topic("ok", 1, 1), topic("x", 2, 1)],
        );
        assert_eq!(
            outcomes(&result),
            vec![
                ("x".into(), 42, Some("Duplicate topic name.".into())),
                ("ok".into(), 0, None),
            ]
        );
        assert_eq!(result.records.len(), 2);
    }

    #[test]
    fn config_errors() {
        let view = FakeView::with_brokers(&[1]);
        assert_eq!(
            single_error(
                &view,
                with_configs(
                    topic("t", 1, 1),
                    &[("a", None), ("retention.ms", Some("1")), ("b", None)]
                )
            ),
            (
                40,
                Some("Null value not supported for topic configs: a,b".into())
            )
        );
        assert_eq!(
            single_error(
                &view,
                with_configs(topic("t", 1, 1), &[("retention.hours", Some("1"))])
            ),
            (
                40,
                Some("Unknown topic config name: retention.hours".into())
            )
        );
        assert_eq!(
            single_error(&view, with_configs(topic("t", 1, 1), &[("cleanup.policy", Some("nope"))])),
            (40, Some("Invalid value nope for configuration cleanup.policy: String must be one of: compact, delete".into()))
        );
    }

    #[test]
    fn replication_factor_and_partition_count_rules() {
        let view = FakeView::with_brokers(&[1, 2, 3]);
        assert_eq!(
            single_error(&view, topic("t", 1, 0)),
            (
                38,
                Some(
                    "Replication factor must be larger than 0, or -1 to use the default value."
                        .into()
                )
            )
        );
        assert_eq!(
            single_error(&view, topic("t", 1, -2)),
            (
                38,
                Some(
                    "Replication factor must be larger than 0, or -1 to use the default value."
                        .into()
                )
            )
        );
        assert_eq!(
            single_error(&view, topic("t", 0, 1)),
            (
                37,
                Some("Number of partitions was set to an invalid non-positive value.".into())
            )
        );
        assert_eq!(
            single_error(&view, topic("t", 1, 4)),
            (38, Some("Unable to replicate the partition 4 time(s): The target replication factor of 4 cannot be reached because only 3 broker(s) are registered.".into()))
        );
        let mut fenced = FakeView::with_brokers(&[1, 2]);
        fenced.brokers.iter_mut().for_each(|b| b.fenced = true);
        assert_eq!(
            single_error(&fenced, topic("t", 1, 1)),
            (38, Some("Unable to replicate the partition 1 time(s): All brokers are currently fenced.".into()))
        );
        let mut shutting = FakeView::with_brokers(&[1, 2]);
        shutting.brokers[0].in_controlled_shutdown = true;
        shutting.brokers[1].fenced = true;
        assert_eq!(
            single_error(&shutting, topic("t", 1, 1)),
            (38, Some("Unable to replicate the partition 1 time(s): All brokers are currently fenced.".into()))
        );
        assert_eq!(
            single_error(&view, topic("t", 10_000, 1)),
            (
                44,
                Some("Unable to perform excessively large batch operation.".into())
            )
        );
    }

    #[test]
    fn manual_assignments() {
        let mut view = FakeView::with_brokers(&[1, 2, 3]);
        view.brokers[2].fenced = true;
        let result = run(&view, vec![manual("m", &[(1, &[3, 1]), (0, &[2, 3])])]);
        let id = id_after(0);
        assert_eq!(
            result.records,
            vec![
                MetadataRecord::Topic(TopicRecord {
                    name: "m".into(),
                    topic_id: id
                }),
                partition(id, 0, &[2, 3], &[2]),
                partition(id, 1, &[3, 1], &[1]),
            ]
        );
        assert_eq!(
            (
                result.response.topics[0].num_partitions,
                result.response.topics[0].replication_factor
            ),
            (2, 2)
        );
        let cases: Vec<(CreatableTopic, &str)> = vec![
            (manual("m", &[(0, &[1])]).with_replication_factor(1),
             "A manual partition assignment was specified, but replication factor was not set to -1."),
            (manual("m", &[(0, &[1])]).with_num_partitions(1),
             "A manual partition assignment was specified, but numPartitions was not set to -1."),
        ];
        for (t, message) in cases {
            assert_eq!(single_error(&view, t), (42, Some(message.into())));
        }
        let cases: Vec<(CreatableTopic, &str)> = vec![
            (manual("m", &[(0, &[1]), (0, &[2])]), "Found multiple manual partition assignments for partition 0"),
            (manual("m", &[(0, &[])]), "The manual partition assignment includes an empty replica list."),
            (manual("m", &[(0, &[1, 9])]), "The manual partition assignment includes broker 9, but no such broker is registered."),
            (manual("m", &[(0, &[2, 1, 2])]), "The manual partition assignment includes the broker 2 more than once."),
            (manual("m", &[(0, &[1, 2]), (1, &[1])]),
             "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with previous partitions, which have 2 replica(s)."),
            (manual("m", &[(0, &[3])]), "All brokers specified in the manual partition assignment for partition 0 are fenced or in controlled shutdown."),
            (manual("m", &[(0, &[1]), (2, &[2])]), "partitions should be a consecutive 0-based integer sequence"),
        ];
        for (t, message) in cases {
            assert_eq!(
                single_error(&view, t),
                (39, Some(message.into())),
                "{message}"
            );
        }
    }

    #[test]
    fn validate_only_answers_the_same_without_records() {
        let view = FakeView::with_brokers(&[1, 2]);
        let topics = vec![topic("a", 2, 2), topic("b", 1, 3)];
        let real = run(&view, topics.clone());
        let request = CreateTopicsRequest::default()
            .with_topics(topics)
            .with_validate_only(true);
        let dry = with_ctx(|ctx| create_topics(&view, &request, 7, &TopicDefaults::default(), ctx));
        assert!(dry.records.is_empty());
        assert_eq!(dry.response, real.response);
        assert_eq!(real.records.len(), 3);
    }

    #[test]
    fn quota_is_charged_per_valid_topic_in_order() {
        let view = FakeView::with_brokers(&[1, 2]);
        let request = CreateTopicsRequest::default()
            .with_topics(vec![
                topic("a", 2, 1),
                topic("bad!", 5, 1),
                topic("b", 3, 1),
                topic("c", 1, 1),
            ])
            .with_validate_only(true);
        let mut rng = CountingRng::default();
        let mut quota = ScriptedQuota {
            charges: vec![],
            budget: Some(5),
        };
        let mut ctx = MutationContext {
            rng: &mut rng,
            quota: &mut quota,
        };
        let result = create_topics(&view, &request, 7, &TopicDefaults::default(), &mut ctx);
        assert_eq!(quota.charges, vec![2, 3]);
        let codes: Vec<(i16, Option<String>)> = result
            .response
            .topics
            .iter()
            .map(|t| outcome(t.error_code, &t.error_message))
            .collect();
        assert_eq!(codes[0], (0, None));
        assert_eq!(codes[1].0, 17);
        assert_eq!(codes[2], (0, None));
        assert_eq!(codes[3], (89, None));
        let _ = Unlimited;
    }

    /// The decoded request's answer and records, and the listed one's rebuilt from its outcomes.
    fn both(
        view: &FakeView,
        topics: Vec<CreatableTopic>,
        validate_only: bool,
    ) -> (
        ControllerResult<CreateTopicsResponse>,
        ControllerResult<CreateTopicsResponse>,
        usize,
    ) {
        let request = CreateTopicsRequest::default()
            .with_topics(topics.clone())
            .with_validate_only(validate_only);
        let decoded =
            with_ctx(|ctx| create_topics(view, &request, 7, &TopicDefaults::default(), ctx));
        let listed = Listed::new(topics, |topic| topic.name.as_str());
        let kept = with_ctx(|ctx| {
            create_listed_topics(
                view,
                &listed,
                validate_only,
                7,
                &TopicDefaults::default(),
                ctx,
            )
        });
        let mut names = Vec::new();
        listed
            .each_first(&mut |topic, _| {
                names.push(topic.name.clone());
                true
            })
            .expect("listed");
        assert_eq!(kept.response.answered(), names.len());
        let results = names
            .iter()
            .enumerate()
            .map(|(index, name)| {
                ListedCreation::result(kept.response.outcome(index).expect("answered"), name)
            })
            .collect();
        let outcomes = kept.response.outcomes.len();
        let rebuilt = ControllerResult {
            records: kept.records,
            response: CreateTopicsResponse::default().with_topics(results),
        };
        (decoded, rebuilt, outcomes)
    }

    #[test]
    fn listed_topics_are_answered_as_the_decoded_request() {
        let view = FakeView::with_brokers(&[1, 2])
            .topic("old", 1, &[&[1]])
            .topic("a.b", 1, &[&[1]]);
        let mut topics = vec![
            topic("x", 1, 1),
            topic("ok", 2, 2),
            topic("old", 1, 1),
            topic("a_b", 1, 1),
            topic("bad name", 1, 1),
            topic("x", 1, 1),
            topic("__cluster_metadata", 1, 1),
            with_configs(topic("conf", 1, 1), &[("cleanup.policy", Some("compact"))]),
            topic("x", 3, 1),
            manual("m", &[(0, &[1]), (0, &[2])]),
            topic("rf", 1, 3),
        ];
        // Many failing alike (one outcome for all) and a few created between them.
        for i in 0..3000 {
            topics.push(topic(
                &format!("z{i}"),
                if i % 1000 == 7 { 1 } else { 0 },
                1,
            ));
        }
        for validate_only in [false, true] {
            let (decoded, listed, outcomes) = both(&view, topics.clone(), validate_only);
            assert_eq!(listed.response, decoded.response);
            assert_eq!(listed.records, decoded.records);
            assert!(outcomes < 20, "{outcomes} outcomes kept");
        }
        assert!(!both(&view, topics.clone(), false).0.records.is_empty());
        // Past the record limit the whole request fails, every distinct name once.
        let mut large: Vec<CreatableTopic> = (0..MAX_RECORDS_PER_USER_OP / 2 + 2)
            .map(|i| topic(&format!("t{i}"), 1, 1))
            .collect();
        large.push(topic("t0", 1, 1));
        large.push(topic("bad!", 1, 1));
        let (decoded, listed, outcomes) = both(&view, large, false);
        assert_eq!(listed.response, decoded.response);
        assert!(listed.records.is_empty() && decoded.records.is_empty());
        assert_eq!(outcomes, 1);
    }
}
