//! CreatePartitions (api 37): the decisions of Kafka's
//! `ReplicationControlManager.createPartitions`, plus the duplicate check of
//! `ControllerApis.createPartitions`.
//!
//! Per topic, in request order: named more than once → INVALID_REQUEST "Duplicate topic name."
//! (one result per name); unknown → UNKNOWN_TOPIC_OR_PARTITION (no message); a count that is
//! not an increase → INVALID_PARTITIONS; an assignment list of the wrong length →
//! INVALID_REPLICA_ASSIGNMENT; then the quota is charged with the number of new partitions; the
//! new partitions keep the topic's replication factor, from the manual assignment (each checked
//! like CreateTopics' manual assignments) or placed. `validate_only` answers the same with no
//! records.

use std::collections::{HashMap, HashSet};

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;

use gregor_publishers::records::MetadataRecord;

use super::errors::ControllerError;
use super::listed::{decide_listed, ListedAnswers, ListedElements, ListedError};
use super::partitions::{
    active_replicas, all_inactive, no_active_replica, validate_manual_assignment, NewPartition,
};
use super::placement::place;
use super::view::{BrokerView, MetadataView};
use super::{ControllerResult, MutationContext, MAX_RECORDS_PER_USER_OP};

/// Decides a CreatePartitions request against `image`. No rule depends on the request
/// `version` (v0-3 differ only in encoding and in quota strictness, which the quota decides).
pub fn create_partitions<V: MetadataView + ?Sized>(
    image: &V,
    request: &CreatePartitionsRequest,
    _version: i16,
    ctx: &mut MutationContext<'_>,
) -> ControllerResult<CreatePartitionsResponse> {
    let mut occurrences: HashMap<&str, usize> = HashMap::new();
    for topic in &request.topics {
        *occurrences.entry(topic.name.0.as_str()).or_default() += 1;
    }
    let brokers = image.brokers();
    let mut seen = HashSet::new();
    let mut records = Vec::new();
    let mut results = Vec::new();
    for topic in &request.topics {
        if !seen.insert(topic.name.0.as_str()) {
            continue;
        }
        let outcome = if occurrences.get(topic.name.0.as_str()).copied().unwrap_or(0) > 1 {
            Err(ControllerError::DuplicateTopicName)
        } else {
            grow(image, topic, &brokers, ctx, records.len())
        };
        match outcome {
            Ok(new_records) => {
                records.extend(new_records);
                results.push(result(topic.name.clone(), None));
            }
            Err(ControllerError::BatchTooLarge) => return batch_too_large(&request.topics),
            Err(error) => results.push(result(topic.name.clone(), Some(&error))),
        }
    }
    if request.validate_only {
        records.clear();
    }
    ControllerResult {
        records,
        response: CreatePartitionsResponse::default().with_results(results),
    }
}

/// The answer to a [`ListedElements`] CreatePartitions request: each distinct topic's error
/// code and message.
pub type ListedGrowth = ListedAnswers<ListedError>;

/// Decides a request whose topics are read from `topics` as [`create_partitions`] decides the
/// same topics, without holding them or their answers whole.
pub fn create_listed_partitions<V: MetadataView + ?Sized>(
    image: &V,
    topics: &dyn ListedElements<CreatePartitionsTopic>,
    validate_only: bool,
    ctx: &mut MutationContext<'_>,
) -> ControllerResult<ListedGrowth> {
    let brokers = image.brokers();
    decide_listed(
        "CreatePartitions",
        topics,
        validate_only,
        |topic, repeated, records_so_far| {
            if repeated {
                return Err(ControllerError::DuplicateTopicName);
            }
            let records = grow(image, topic, &brokers, ctx, records_so_far)?;
            Ok((records, ListedError::default()))
        },
        |topic| topic.name.0.as_str(),
        ListedError::clone,
    )
}

fn result(name: TopicName, error: Option<&ControllerError>) -> CreatePartitionsTopicResult {
    CreatePartitionsTopicResult::default()
        .with_name(name)
        .with_error_code(error.map_or(0, |e| e.code().code()))
        .with_error_message(error.and_then(|e| e.message().map(StrBytes::from_string)))
}

/// Kafka fails the whole request when it would exceed one batch; every topic gets the error.
fn batch_too_large(topics: &[CreatePartitionsTopic]) -> ControllerResult<CreatePartitionsResponse> {
    let mut seen = HashSet::new();
    let results = topics
        .iter()
        .filter(|topic| seen.insert(topic.name.0.as_str()))
        .map(|topic| result(topic.name.clone(), Some(&ControllerError::BatchTooLarge)))
        .collect();
    ControllerResult {
        records: Vec::new(),
        response: CreatePartitionsResponse::default().with_results(results),
    }
}

/// The PartitionRecords that grow one topic to its requested count.
fn grow<V: MetadataView + ?Sized>(
    image: &V,
    topic: &CreatePartitionsTopic,
    brokers: &[BrokerView],
    ctx: &mut MutationContext<'_>,
    records_so_far: usize,
) -> Result<Vec<MetadataRecord>, ControllerError> {
    let name = topic.name.0.as_str();
    let topic_id = image.topic_id(name).ok_or(ControllerError::UnknownTopic)?;
    let current = image.partition_count(&topic_id);
    let current_count = i64::try_from(current).unwrap_or(i64::MAX);
    let requested = i64::from(topic.count);
    if requested == current_count {
        return Err(ControllerError::InvalidPartitions(format!(
            "Topic already has {current} partition(s)."
        )));
    }
    if requested < current_count {
        return Err(ControllerError::InvalidPartitions(format!(
            "The topic {name} currently has {current} partition(s); {requested} would not be an increase."
        )));
    }
    let additional = usize::try_from(requested - current_count).unwrap_or(usize::MAX);
    if let Some(assignments) = &topic.assignments {
        if assignments.len() != additional {
            return Err(ControllerError::InvalidReplicaAssignment(format!(
                "Attempted to add {additional} additional partition(s), but only {} assignment(s) were specified.",
                assignments.len()
            )));
        }
    }
    ctx.quota
        .charge(u32::try_from(additional).unwrap_or(u32::MAX))
        .map_err(|e| ControllerError::ThrottlingQuotaExceeded {
            throttle_time_ms: e.throttle_time_ms,
        })?;
    if records_so_far + additional > MAX_RECORDS_PER_USER_OP {
        return Err(ControllerError::BatchTooLarge);
    }
    let replication_factor = image
        .replicas(&topic_id, 0)
        .filter(|_| current > 0)
        .map(|replicas| replicas.len())
        .ok_or_else(|| ControllerError::TopicWithoutPartitions {
            name: name.to_owned(),
        })?;
    let start = i32::try_from(current).unwrap_or(i32::MAX);
    let partitions: Vec<NewPartition> = match &topic.assignments {
        Some(assignments) => {
            let mut partitions = Vec::with_capacity(assignments.len());
            for (offset, assignment) in (0_i64..).zip(assignments) {
                let replicas: Vec<i32> = assignment.broker_ids.iter().map(|b| b.0).collect();
                validate_manual_assignment(&replicas, Some(replication_factor), brokers)?;
                let isr = active_replicas(&replicas, brokers);
                if isr.is_empty() {
                    return Err(all_inactive(i64::from(start) + offset));
                }
                partitions.push(NewPartition { replicas, isr });
            }
            partitions
        }
        None => {
            let factor = i32::try_from(replication_factor).unwrap_or(i32::MAX);
            place(brokers, additional, factor, ctx.rng)
                .map_err(|e| ControllerError::InvalidReplicationFactor(e.to_string()))?
                .into_iter()
                .map(|replicas| {
                    let isr = replicas.clone();
                    NewPartition { replicas, isr }
                })
                .collect()
        }
    };
    let mut records = Vec::with_capacity(partitions.len());
    for (partition_id, partition) in (start..).zip(partitions) {
        let isr = active_replicas(&partition.isr, brokers);
        if isr.is_empty() {
            return Err(no_active_replica(replication_factor));
        }
        let partition = NewPartition {
            replicas: partition.replicas,
            isr,
        };
        records.push(partition.to_record(topic_id, partition_id));
    }
    Ok(records)
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::controller::logic::listed::Listed;
    use crate::controller::logic::testing::{
        outcome, topic_name, with_ctx, CountingRng, FakeView, ScriptedQuota,
    };
    use gregor_publishers::records::PartitionRecord;
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsAssignment;
    use kafka_protocol::messages::BrokerId;
    use uuid::Uuid;

    fn view() -> FakeView {
        FakeView::with_brokers(&[1, 2, 3]).topic("t", 7, &[&[1, 2], &[2, 3]])
    }

    fn grow_to(name: &str, count: i32, assignments: Option<&[&[i32]]>) -> CreatePartitionsTopic {
        CreatePartitionsTopic::default()
            .with_name(topic_name(name))
            .with_count(count)
            .with_assignments(assignments.map(|a| {
                a.iter()
                    .map(|ids| {
                        CreatePartitionsAssignment::default()
                            .with_broker_ids(ids.iter().map(|b| BrokerId(*b)).collect())
                    })
                    .collect()
            }))
    }

    fn run(
        view: &FakeView,
        topics: Vec<CreatePartitionsTopic>,
    ) -> ControllerResult<CreatePartitionsResponse> {
        let request = CreatePartitionsRequest::default().with_topics(topics);
        with_ctx(|ctx| create_partitions(view, &request, 3, ctx))
    }

    fn rows(
        result: &ControllerResult<CreatePartitionsResponse>,
    ) -> Vec<(String, i16, Option<String>)> {
        result
            .response
            .results
            .iter()
            .map(|r| {
                let (code, message) = outcome(r.error_code, &r.error_message);
                (r.name.0.to_string(), code, message)
            })
            .collect()
    }

    fn single_error(view: &FakeView, topic: CreatePartitionsTopic) -> (i16, Option<String>) {
        let result = run(view, vec![topic]);
        assert!(result.records.is_empty());
        let row = rows(&result).remove(0);
        (row.1, row.2)
    }

    fn partition(partition_id: i32, replicas: &[i32], isr: &[i32]) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord {
            partition_id,
            topic_id: Uuid::from_u128(7),
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

    #[test]
    fn grows_with_placement_keeping_the_replication_factor() {
        let result = run(&view(), vec![grow_to("t", 4, None)]);
        assert_eq!(
            result.records,
            vec![
                partition(2, &[1, 2], &[1, 2]),
                partition(3, &[2, 3], &[2, 3])
            ]
        );
        assert_eq!(rows(&result), vec![("t".into(), 0, None)]);
    }

    #[test]
    fn grows_with_manual_assignments() {
        let mut view = view();
        view.brokers[0].fenced = true;
        let result = run(&view, vec![grow_to("t", 4, Some(&[&[3, 1], &[1, 2]]))]);
        assert_eq!(
            result.records,
            vec![partition(2, &[3, 1], &[3]), partition(3, &[1, 2], &[2])]
        );
        let cases: Vec<(CreatePartitionsTopic, &str)> = vec![
            (grow_to("t", 3, Some(&[&[1]])),
             "The manual partition assignment includes a partition with 1 replica(s), but this is not consistent with previous partitions, which have 2 replica(s)."),
            (grow_to("t", 3, Some(&[&[1, 9]])),
             "The manual partition assignment includes broker 9, but no such broker is registered."),
            (grow_to("t", 3, Some(&[&[2, 2]])),
             "The manual partition assignment includes the broker 2 more than once."),
            (grow_to("t", 4, Some(&[&[2, 3]])),
             "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
        ];
        for (topic, message) in cases {
            assert_eq!(
                single_error(&view, topic),
                (39, Some(message.into())),
                "{message}"
            );
        }
        let mut fenced = view.clone();
        fenced.brokers[1].fenced = true;
        assert_eq!(
            single_error(&fenced, grow_to("t", 4, Some(&[&[2, 3], &[1, 2]]))),
            (39, Some("All brokers specified in the manual partition assignment for partition 3 are fenced or in controlled shutdown.".into()))
        );
    }

    #[test]
    fn counts_must_increase() {
        assert_eq!(
            single_error(&view(), grow_to("t", 2, None)),
            (37, Some("Topic already has 2 partition(s).".into()))
        );
        assert_eq!(
            single_error(&view(), grow_to("t", 1, None)),
            (
                37,
                Some(
                    "The topic t currently has 2 partition(s); 1 would not be an increase.".into()
                )
            )
        );
        assert_eq!(single_error(&view(), grow_to("nope", 3, None)), (3, None));
        let lonely = FakeView::with_brokers(&[1]).topic("t", 7, &[&[1, 2]]);
        assert_eq!(
            single_error(&lonely, grow_to("t", 2, None)),
            (38, Some("The target replication factor of 2 cannot be reached because only 1 broker(s) are registered.".into()))
        );
    }

    #[test]
    fn duplicates_validate_only_and_quota() {
        let result = run(
            &view(),
            vec![
                grow_to("t", 3, None),
                grow_to("x", 3, None),
                grow_to("t", 4, None),
            ],
        );
        assert_eq!(
            rows(&result),
            vec![
                ("t".into(), 42, Some("Duplicate topic name.".into())),
                ("x".into(), 3, None)
            ]
        );
        let two = FakeView::with_brokers(&[1, 2, 3])
            .topic("t", 7, &[&[1, 2]])
            .topic("u", 8, &[&[1]]);
        let request = CreatePartitionsRequest::default()
            .with_topics(vec![grow_to("t", 3, None), grow_to("u", 2, None)])
            .with_validate_only(true);
        let mut rng = CountingRng::default();
        let mut quota = ScriptedQuota {
            charges: vec![],
            budget: Some(2),
        };
        let mut ctx = MutationContext {
            rng: &mut rng,
            quota: &mut quota,
        };
        let result = create_partitions(&two, &request, 3, &mut ctx);
        assert!(result.records.is_empty());
        assert_eq!(quota.charges, vec![2]);
        assert_eq!(
            rows(&result),
            vec![("t".into(), 0, None), ("u".into(), 89, None)]
        );
    }

    /// The decoded request's answer and records, and the listed one's rebuilt from its
    /// outcomes, with how many outcomes it kept.
    fn both(
        view: &FakeView,
        topics: Vec<CreatePartitionsTopic>,
        validate_only: bool,
    ) -> (
        ControllerResult<CreatePartitionsResponse>,
        ControllerResult<CreatePartitionsResponse>,
        usize,
    ) {
        let request = CreatePartitionsRequest::default()
            .with_topics(topics.clone())
            .with_validate_only(validate_only);
        let decoded = with_ctx(|ctx| create_partitions(view, &request, 3, ctx));
        let listed = Listed::new(topics, |topic| topic.name.as_str());
        let kept = with_ctx(|ctx| create_listed_partitions(view, &listed, validate_only, ctx));
        let firsts = listed.firsts();
        assert_eq!(kept.response.answered(), firsts.len());
        let results = firsts
            .iter()
            .enumerate()
            .map(|(index, topic)| {
                let outcome = kept.response.outcome(index).expect("answered");
                CreatePartitionsTopicResult::default()
                    .with_name(topic.name.clone())
                    .with_error_code(outcome.code)
                    .with_error_message(outcome.message_for(topic.name.as_str()))
            })
            .collect();
        let rebuilt = ControllerResult {
            records: kept.records,
            response: CreatePartitionsResponse::default().with_results(results),
        };
        (decoded, rebuilt, kept.response.outcomes.len())
    }

    #[test]
    fn listed_topics_are_answered_as_the_decoded_request() {
        let view = FakeView::with_brokers(&[1, 2, 3])
            .topic("t", 7, &[&[1, 2], &[2, 3]])
            .topic("u", 8, &[&[1]])
            .topic("v", 9, &[&[3]]);
        let mut topics = vec![
            grow_to("t", 4, None),
            grow_to("u", 1, None),
            grow_to("u", 3, None),
            grow_to("v", 0, None),
            grow_to("gone", 2, None),
            grow_to("v", 1, None),
        ];
        // Many failing alike (one outcome per message) and a few grown between them.
        let view = (0..3000).fold(view, |view, i| {
            view.topic(&format!("z{i}"), 100 + i, &[&[1]])
        });
        for i in 0..3000 {
            let count = match i % 1000 {
                7 => 3,
                8 => 2,
                _ => 1,
            };
            topics.push(grow_to(&format!("z{i}"), count, None));
            topics.push(grow_to(&format!("missing{i}"), 2, None));
        }
        topics.push(grow_to("w", 2, Some(&[&[1], &[2]])));
        for validate_only in [false, true] {
            let (decoded, listed, outcomes) = both(&view, topics.clone(), validate_only);
            assert_eq!(listed.response, decoded.response);
            assert_eq!(listed.records, decoded.records);
            assert!(outcomes < 20, "{outcomes} outcomes kept");
        }
        assert_eq!(
            both(&view, topics.clone(), false).0.records.len(),
            2 + 3 * 3
        );
        // Past the record limit the whole request fails, every distinct name once.
        let large = vec![
            grow_to("gone", 2, None),
            grow_to("t", 3 + MAX_RECORDS_PER_USER_OP as i32, None),
            grow_to("u", 3, None),
            grow_to("u", 3, None),
        ];
        let (decoded, listed, outcomes) = both(&view, large, false);
        assert_eq!(listed.response, decoded.response);
        assert_eq!(decoded.response.results.len(), 3);
        assert_eq!(decoded.response.results[0].error_code, 44);
        assert!(listed.records.is_empty() && decoded.records.is_empty());
        assert_eq!(outcomes, 1);
    }
}
