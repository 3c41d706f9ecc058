//! DeleteTopics (api 20): the controller-side checks of Kafka's `ControllerApis.deleteTopics`
//! and the decisions of `ReplicationControlManager.deleteTopics`.
//!
//! Topics are named by `topic_names` (v0-5) or by `topics` entries holding a name or an id (v6).
//! With `delete.topic.enable=false` every entry fails (INVALID_REQUEST before v3,
//! TOPIC_DELETION_DISABLED from v3). Otherwise, per entry: neither or both of name and id →
//! INVALID_REQUEST; a repeated name or id → INVALID_REQUEST once; an unknown id →
//! UNKNOWN_TOPIC_ID; an unknown name → UNKNOWN_TOPIC_OR_PARTITION; a name whose id is also
//! listed → INVALID_REQUEST; then the quota is charged with the topic's partition count and a
//! RemoveTopicRecord is written.
//!
//! Kafka shuffles the results; Gregor answers in request order. Where Kafka would drop the
//! result of an id whose name is also listed, Gregor answers it with "Duplicate topic id." so
//! every entry is echoed.

use std::collections::{HashMap, HashSet};

use gregor_publishers::records::{MetadataRecord, RemoveTopicRecord};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::errors::ControllerError;
use super::view::MetadataView;
use super::{ControllerResult, MutationContext, MAX_RECORDS_PER_USER_OP};

/// One requested topic as the request spelled it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Entry {
    name: Option<TopicName>,
    id: Uuid,
}

/// What happens to one entry.
enum Outcome {
    Failed(Option<TopicName>, Uuid, ControllerError),
    Delete(TopicName, Uuid),
    /// Reported elsewhere (a repeated name or id).
    Skip,
}

/// Decides a DeleteTopics request against `image`. `delete_topic_enable` is the controller's
/// `delete.topic.enable`. Only `ctx.quota` is used (DeleteTopics draws no randomness).
pub fn delete_topics<V: MetadataView + ?Sized>(
    image: &V,
    request: &DeleteTopicsRequest,
    version: i16,
    delete_topic_enable: bool,
    ctx: &mut MutationContext<'_>,
) -> ControllerResult<DeleteTopicsResponse> {
    let entries: Vec<Entry> = request
        .topic_names
        .iter()
        .map(|name| Entry {
            name: Some(name.clone()),
            id: Uuid::nil(),
        })
        .chain(request.topics.iter().map(|t| Entry {
            name: t.name.clone(),
            id: t.topic_id,
        }))
        .collect();
    if !delete_topic_enable {
        return whole_request_error(
            &entries,
            &ControllerError::TopicDeletionDisabled { version },
        );
    }

    let mut name_count: HashMap<&str, usize> = HashMap::new();
    let mut id_count: HashMap<Uuid, usize> = HashMap::new();
    for entry in &entries {
        match (&entry.name, entry.id.is_nil()) {
            (Some(name), true) => *name_count.entry(name.0.as_str()).or_default() += 1,
            (None, false) => *id_count.entry(entry.id).or_default() += 1,
            _ => {}
        }
    }
    // Ids listed once, with their names: a name that resolves to one of them conflicts.
    let listed_ids: HashSet<Uuid> = id_count.keys().copied().collect();
    let mut conflicting_ids = HashSet::new();
    let mut seen = HashSet::new();
    let mut outcomes = Vec::with_capacity(entries.len());
    for entry in &entries {
        let outcome = match (&entry.name, entry.id.is_nil()) {
            (None, true) => Outcome::Failed(None, entry.id, ControllerError::NeitherNameNorId),
            (Some(name), false) => {
                Outcome::Failed(Some(name.clone()), entry.id, ControllerError::BothNameAndId)
            }
            (Some(name), true) => {
                if !seen.insert(entry.clone()) {
                    Outcome::Skip
                } else if name_count.get(name.0.as_str()).copied().unwrap_or(0) > 1 {
                    Outcome::Failed(
                        Some(name.clone()),
                        Uuid::nil(),
                        ControllerError::DuplicateTopicName,
                    )
                } else {
                    match image.topic_id(name.0.as_str()) {
                        None => Outcome::Failed(
                            Some(name.clone()),
                            Uuid::nil(),
                            ControllerError::UnknownTopicName,
                        ),
                        Some(id) if listed_ids.contains(&id) => {
                            conflicting_ids.insert(id);
                            Outcome::Failed(
                                Some(name.clone()),
                                id,
                                ControllerError::NameMapsToSuppliedId,
                            )
                        }
                        Some(id) => Outcome::Delete(name.clone(), id),
                    }
                }
            }
            (None, false) => {
                if !seen.insert(entry.clone()) {
                    Outcome::Skip
                } else if id_count.get(&entry.id).copied().unwrap_or(0) > 1 {
                    Outcome::Failed(None, entry.id, ControllerError::DuplicateTopicId)
                } else {
                    match image.topic_name(&entry.id) {
                        None => Outcome::Failed(None, entry.id, ControllerError::UnknownTopicId),
                        Some(name) => {
                            Outcome::Delete(TopicName(StrBytes::from_string(name)), entry.id)
                        }
                    }
                }
            }
        };
        outcomes.push(outcome);
    }

    let deletions = outcomes
        .iter()
        .filter(|o| matches!(o, Outcome::Delete(..)))
        .count();
    if deletions > MAX_RECORDS_PER_USER_OP {
        return whole_request_error(&entries, &ControllerError::BatchTooLarge);
    }
    let mut records = Vec::with_capacity(deletions);
    let mut results = Vec::with_capacity(outcomes.len());
    for outcome in outcomes {
        let (name, id, error) = match outcome {
            Outcome::Skip => continue,
            Outcome::Failed(name, id, error) => (name, id, Some(error)),
            Outcome::Delete(_, id) if conflicting_ids.contains(&id) => {
                (None, id, Some(ControllerError::DuplicateTopicId))
            }
            Outcome::Delete(name, id) => {
                let partitions = u32::try_from(image.partition_count(&id)).unwrap_or(u32::MAX);
                match ctx.quota.charge(partitions) {
                    Ok(()) => {
                        records.push(MetadataRecord::RemoveTopic(RemoveTopicRecord {
                            topic_id: id,
                        }));
                        (Some(name), id, None)
                    }
                    Err(e) => (
                        Some(name),
                        id,
                        Some(ControllerError::ThrottlingQuotaExceeded {
                            throttle_time_ms: e.throttle_time_ms,
                        }),
                    ),
                }
            }
        };
        results.push(result(name, id, error.as_ref()));
    }
    ControllerResult {
        records,
        response: DeleteTopicsResponse::default().with_responses(results),
    }
}

fn result(
    name: Option<TopicName>,
    id: Uuid,
    error: Option<&ControllerError>,
) -> DeletableTopicResult {
    DeletableTopicResult::default()
        .with_name(name)
        .with_topic_id(id)
        .with_error_code(error.map_or(0, |e| e.code().code()))
        .with_error_message(error.and_then(|e| e.message().map(StrBytes::from_string)))
}

/// Kafka's `DeleteTopicsRequest.getErrorResponse`: every entry gets the code, no message.
fn whole_request_error(
    entries: &[Entry],
    error: &ControllerError,
) -> ControllerResult<DeleteTopicsResponse> {
    let mut seen = HashSet::new();
    let results = entries
        .iter()
        .filter(|entry| seen.insert(*entry))
        .map(|entry| {
            DeletableTopicResult::default()
                .with_name(entry.name.clone())
                .with_topic_id(entry.id)
                .with_error_code(error.code().code())
                .with_error_message(None)
        })
        .collect();
    ControllerResult {
        records: Vec::new(),
        response: DeleteTopicsResponse::default().with_responses(results),
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::controller::logic::testing::{
        outcome, topic_name, with_ctx, CountingRng, FakeView, ScriptedQuota,
    };
    use kafka_protocol::messages::delete_topics_request::DeleteTopicState;

    fn view() -> FakeView {
        FakeView::with_brokers(&[1])
            .topic("a", 10, &[&[1], &[1]])
            .topic("b", 11, &[&[1], &[1], &[1]])
    }

    type Row = (Option<String>, Uuid, i16, Option<String>);

    fn rows(result: &ControllerResult<DeleteTopicsResponse>) -> Vec<Row> {
        result
            .response
            .responses
            .iter()
            .map(|r| {
                let (code, message) = outcome(r.error_code, &r.error_message);
                (
                    r.name.as_ref().map(|n| n.0.to_string()),
                    r.topic_id,
                    code,
                    message,
                )
            })
            .collect()
    }

    fn by_name(names: &[&str]) -> DeleteTopicsRequest {
        DeleteTopicsRequest::default()
            .with_topic_names(names.iter().map(|n| topic_name(n)).collect())
    }

    fn by_state(states: &[(Option<&str>, u128)]) -> DeleteTopicsRequest {
        DeleteTopicsRequest::default().with_topics(
            states
                .iter()
                .map(|(name, id)| {
                    DeleteTopicState::default()
                        .with_name(name.map(topic_name))
                        .with_topic_id(Uuid::from_u128(*id))
                })
                .collect(),
        )
    }

    fn remove(id: u128) -> MetadataRecord {
        MetadataRecord::RemoveTopic(RemoveTopicRecord {
            topic_id: Uuid::from_u128(id),
        })
    }

    const UNKNOWN_NAME: &str = "This server does not host this topic-partition.";

    #[test]
    fn deletes_by_name() {
        let result =
            with_ctx(|ctx| delete_topics(&view(), &by_name(&["b", "zz", "a"]), 5, true, ctx));
        assert_eq!(result.records, vec![remove(11), remove(10)]);
        assert_eq!(
            rows(&result),
            vec![
                (Some("b".into()), Uuid::from_u128(11), 0, None),
                (Some("zz".into()), Uuid::nil(), 3, Some(UNKNOWN_NAME.into())),
                (Some("a".into()), Uuid::from_u128(10), 0, None),
            ]
        );
    }

    #[test]
    fn deletes_by_id_and_checks_entries() {
        let request = by_state(&[
            (None, 10),
            (None, 99),
            (None, 0),
            (Some("b"), 11),
            (Some("b"), 0),
        ]);
        let result = with_ctx(|ctx| delete_topics(&view(), &request, 6, true, ctx));
        assert_eq!(result.records, vec![remove(10), remove(11)]);
        assert_eq!(
            rows(&result),
            vec![
                (Some("a".into()), Uuid::from_u128(10), 0, None),
                (
                    None,
                    Uuid::from_u128(99),
                    100,
                    Some("This server does not host this topic ID.".into())
                ),
                (
                    None,
                    Uuid::nil(),
                    42,
                    Some("Neither topic name nor id were specified.".into())
                ),
                (
                    Some("b".into()),
                    Uuid::from_u128(11),
                    42,
                    Some("You may not specify both topic name and topic id.".into())
                ),
                (Some("b".into()), Uuid::from_u128(11), 0, None),
            ]
        );
    }

    #[test]
    fn duplicates_and_name_id_overlap() {
        let request = by_state(&[
            (Some("a"), 0),
            (None, 11),
            (Some("a"), 0),
            (None, 11),
            (None, 10),
        ]);
        let result = with_ctx(|ctx| delete_topics(&view(), &request, 6, true, ctx));
        assert_eq!(result.records, vec![remove(10)]);
        assert_eq!(rows(&result), expected_overlap());
        // A name whose id is also listed: the name gets the overlap error, the id a duplicate.
        let request = by_state(&[(None, 10), (Some("a"), 0)]);
        let result = with_ctx(|ctx| delete_topics(&view(), &request, 6, true, ctx));
        assert!(result.records.is_empty());
        assert_eq!(
            rows(&result),
            vec![
                (
                    None,
                    Uuid::from_u128(10),
                    42,
                    Some("Duplicate topic id.".into())
                ),
                (
                    Some("a".into()),
                    Uuid::from_u128(10),
                    42,
                    Some("The provided topic name maps to an ID that was already supplied.".into())
                ),
            ]
        );
    }

    fn expected_overlap() -> Vec<Row> {
        vec![
            (
                Some("a".into()),
                Uuid::nil(),
                42,
                Some("Duplicate topic name.".into()),
            ),
            (
                None,
                Uuid::from_u128(11),
                42,
                Some("Duplicate topic id.".into()),
            ),
            // Deleted by id: the result carries the resolved name.
            (Some("a".into()), Uuid::from_u128(10), 0, None),
        ]
    }

    #[test]
    fn deletion_disabled() {
        let result =
            with_ctx(|ctx| delete_topics(&view(), &by_name(&["a", "a", "x"]), 2, false, ctx));
        assert!(result.records.is_empty());
        assert_eq!(
            rows(&result),
            vec![
                (Some("a".into()), Uuid::nil(), 42, None),
                (Some("x".into()), Uuid::nil(), 42, None)
            ]
        );
        let result =
            with_ctx(|ctx| delete_topics(&view(), &by_state(&[(None, 10)]), 6, false, ctx));
        assert_eq!(rows(&result), vec![(None, Uuid::from_u128(10), 73, None)]);
    }

    #[test]
    fn quota_charges_partition_counts() {
        let mut rng = CountingRng::default();
        let mut quota = ScriptedQuota {
            charges: vec![],
            budget: Some(2),
        };
        let mut ctx = MutationContext {
            rng: &mut rng,
            quota: &mut quota,
        };
        let result = delete_topics(&view(), &by_name(&["a", "b"]), 6, true, &mut ctx);
        assert_eq!(quota.charges, vec![2]);
        assert_eq!(result.records, vec![remove(10)]);
        assert_eq!(
            rows(&result)[1],
            (Some("b".into()), Uuid::from_u128(11), 89, None)
        );
    }
}
