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
use kafka_protocol::error::ResponseError;
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

/// A DeleteTopics v1-5 request's names read one at a time from where they are kept (the
/// request's frame), for requests too large to decode whole (issue #11).
pub trait ListedNames: Send + Sync {
    /// How many distinct names it lists.
    fn distinct(&self) -> usize;

    /// How many names a refusal of the whole request answers: each name's first two copies,
    /// as a decoded request holds them (`dedup_decode.rs`).
    fn listed(&self) -> usize;

    /// Calls `visit` with each distinct name's first appearance in request order and whether
    /// the request names it again; stops early when `visit` returns false.
    fn each_first(&self, visit: &mut dyn FnMut(&str, bool) -> bool) -> Result<(), String>;
}

/// The answer to a [`ListedNames`] request, kept compactly: two bytes per distinct name and
/// its few distinct outcomes (an error code and message, or a deletion's code 0; at most
/// [`MAX_RECORDS_PER_USER_OP`] deletions, so fewer than 65,536 outcomes).
#[derive(Debug, Default, PartialEq)]
pub struct ListedDeletion {
    /// Per distinct name, in request order: its index in `outcomes`.
    pub per_name: Vec<u16>,
    pub outcomes: Vec<(i16, Option<String>)>,
    /// A request the controller could not decide: every copy of each name the decoded request
    /// holds (its first two) answered with this code and message, as
    /// [`crate::controller::failed_delete_topics_for`] answers it.
    pub refused: Option<(i16, String)>,
    pub throttle_time_ms: i32,
}

impl ListedDeletion {
    /// A request refused before it was decided.
    pub fn refused(code: i16, message: &str) -> Self {
        ListedDeletion {
            refused: Some((code, message.to_owned())),
            ..Default::default()
        }
    }

    /// The code and message of the distinct name at `index` (in request order).
    pub fn outcome(&self, index: usize) -> Option<&(i16, Option<String>)> {
        self.outcomes.get(*self.per_name.get(index)? as usize)
    }

    /// Marks every deleted topic failed (the records did not commit).
    pub fn fail_deleted(&mut self, code: i16, message: &str) {
        for outcome in &mut self.outcomes {
            if outcome.0 == 0 {
                *outcome = (code, Some(message.to_owned()));
            }
        }
    }
}

/// Decides a request whose names are read from `names` as [`delete_topics`] decides the same
/// names, without holding them or their answers whole.
pub fn delete_listed_topics<V: MetadataView + ?Sized>(
    image: &V,
    names: &dyn ListedNames,
    version: i16,
    delete_topic_enable: bool,
    ctx: &mut MutationContext<'_>,
) -> ControllerResult<ListedDeletion> {
    let alike = |error: &ControllerError| ControllerResult {
        records: Vec::new(),
        response: ListedDeletion {
            per_name: vec![0; names.distinct()],
            outcomes: vec![(error.code().code(), None)],
            ..Default::default()
        },
    };
    if !delete_topic_enable {
        return alike(&ControllerError::TopicDeletionDisabled { version });
    }
    let mut deletion = ListedDeletion {
        per_name: Vec::with_capacity(names.distinct()),
        ..Default::default()
    };
    let mut index_of: HashMap<(i16, Option<String>), u16> = HashMap::new();
    // Distinct outcomes: a few errors and one per deletion (at most the record limit).
    let mut outcome_index = |outcome: (i16, Option<String>), outcomes: &mut Vec<_>| {
        *index_of.entry(outcome.clone()).or_insert_with(|| {
            outcomes.push(outcome);
            u16::try_from(outcomes.len() - 1).unwrap_or(u16::MAX)
        })
    };
    // (the name's position in `per_name`, its topic), decided once the count is known.
    let mut deletions: Vec<(usize, Uuid)> = Vec::new();
    let mut too_large = false;
    let walked = names.each_first(&mut |name, repeated| {
        let error = if repeated {
            ControllerError::DuplicateTopicName
        } else {
            match image.topic_id(name) {
                None => ControllerError::UnknownTopicName,
                Some(id) => {
                    if deletions.len() == MAX_RECORDS_PER_USER_OP {
                        too_large = true;
                        return false;
                    }
                    deletions.push((deletion.per_name.len(), id));
                    deletion.per_name.push(u16::MAX);
                    return true;
                }
            }
        };
        let at = outcome_index(
            (error.code().code(), error.message()),
            &mut deletion.outcomes,
        );
        deletion.per_name.push(at);
        true
    });
    if let Err(error) = walked {
        tracing::error!(%error, "the names of a DeleteTopics request did not read again");
        let at = outcome_index(
            (ResponseError::UnknownServerError.code(), Some(error)),
            &mut deletion.outcomes,
        );
        deletion.per_name.clear();
        deletion.per_name.resize(names.distinct(), at);
        return ControllerResult {
            records: Vec::new(),
            response: deletion,
        };
    }
    if too_large {
        return alike(&ControllerError::BatchTooLarge);
    }
    let mut records = Vec::with_capacity(deletions.len());
    for (position, id) in deletions {
        let partitions = u32::try_from(image.partition_count(&id)).unwrap_or(u32::MAX);
        let outcome = match ctx.quota.charge(partitions) {
            Ok(()) => {
                records.push(MetadataRecord::RemoveTopic(RemoveTopicRecord {
                    topic_id: id,
                }));
                (0, None)
            }
            Err(e) => {
                let error = ControllerError::ThrottlingQuotaExceeded {
                    throttle_time_ms: e.throttle_time_ms,
                };
                (error.code().code(), error.message())
            }
        };
        deletion.per_name[position] = outcome_index(outcome, &mut deletion.outcomes);
    }
    ControllerResult {
        records,
        response: deletion,
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

    /// Names as a frame would list them, for [`delete_listed_topics`].
    struct Names(Vec<&'static str>);

    impl ListedNames for Names {
        fn distinct(&self) -> usize {
            self.0.iter().collect::<HashSet<_>>().len()
        }

        fn listed(&self) -> usize {
            let mut copies: HashMap<&str, usize> = HashMap::new();
            self.0
                .iter()
                .filter(|name| {
                    let seen = copies.entry(name).or_default();
                    *seen += 1;
                    *seen <= 2
                })
                .count()
        }

        fn each_first(&self, visit: &mut dyn FnMut(&str, bool) -> bool) -> Result<(), String> {
            let mut seen = HashSet::new();
            for name in &self.0 {
                let repeated = self.0.iter().filter(|n| *n == name).count() > 1;
                if seen.insert(*name) && !visit(name, repeated) {
                    break;
                }
            }
            Ok(())
        }
    }

    type NameRow = (String, i16, Option<String>);

    /// What the decoded request is answered, without topic ids (not in v1-5's answer).
    fn decoded_rows(result: &ControllerResult<DeleteTopicsResponse>) -> Vec<NameRow> {
        rows(result)
            .into_iter()
            .map(|(name, _, code, message)| (name.unwrap_or_default(), code, message))
            .collect()
    }

    /// What the listed request is answered: each distinct name in order, with its outcome.
    fn listed_rows(names: &Names, result: &ControllerResult<ListedDeletion>) -> Vec<NameRow> {
        let mut seen = HashSet::new();
        let firsts = names.0.iter().filter(|name| seen.insert(**name));
        firsts
            .enumerate()
            .map(|(index, name)| {
                let (code, message) = result.response.outcome(index).cloned().unwrap_or_default();
                (name.to_string(), code, message)
            })
            .collect()
    }

    /// Decides `names` both ways with a fresh quota each (`budget` partitions, or unlimited),
    /// and checks that records and answers agree.
    fn agree(view: &FakeView, names: Vec<&'static str>, enabled: bool, budget: Option<u32>) {
        let listed = Names(names);
        let decide = |listed_path: bool| {
            let mut rng = CountingRng::default();
            let mut quota = ScriptedQuota {
                charges: Vec::new(),
                budget,
            };
            let mut ctx = MutationContext {
                rng: &mut rng,
                quota: &mut quota,
            };
            if listed_path {
                let result = delete_listed_topics(view, &listed, 5, enabled, &mut ctx);
                (result.records.clone(), listed_rows(&listed, &result))
            } else {
                let result = delete_topics(view, &by_name(&listed.0), 5, enabled, &mut ctx);
                (result.records.clone(), decoded_rows(&result))
            }
        };
        assert_eq!(decide(true), decide(false), "{:?}", listed.0);
    }

    #[test]
    fn listed_names_are_decided_as_the_decoded_request() {
        let names = vec!["b", "zz", "a", "zz", "zz", "c", "", "", "b2"];
        agree(&view(), names.clone(), true, None);
        agree(&view(), names.clone(), false, None);
        agree(&view(), vec!["a", "b"], true, Some(2));
        let mut many = FakeView::with_brokers(&[1]);
        let mut listed = Vec::new();
        for index in 0..=MAX_RECORDS_PER_USER_OP {
            let name: &'static str = Box::leak(format!("t{index}").into_boxed_str());
            many = many.topic(name, index as u128 + 1, &[&[1]]);
            listed.push(name);
        }
        agree(&many, listed.clone(), true, None);
        listed.pop();
        agree(&many, listed, true, None);
    }
}
