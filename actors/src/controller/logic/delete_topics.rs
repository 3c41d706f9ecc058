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
//!
//! One decision serves both forms of a request: [`delete_listed_topics`] reads the entries
//! through [`ListedTopics`] one at a time and keeps a compact answer, whether they stay in a
//! frame too large to decode whole (issue #11) or were decoded ([`delete_topics`]).

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

/// One entry of a DeleteTopics request, as the decision reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListedTopic<'a> {
    /// A name alone (every v0-5 entry).
    Name(&'a str),
    /// An id alone.
    Id(Uuid),
    /// Both a name and an id: refused on its own.
    Both,
    /// Neither a name nor an id: refused on its own.
    Neither,
}

/// A DeleteTopics request's entries read one at a time from where they are kept (the request
/// frame, or a decoded request), as [`delete_listed_topics`] decides them.
pub trait ListedTopics: Send + Sync {
    /// How many entries a decision answers: each distinct name or id alone once, at its first
    /// appearance, and every entry with both or neither.
    fn answered(&self) -> usize;

    /// How many entries a refusal of the whole request answers: each name's or id's first two
    /// copies, as a decoded request holds them (`dedup_decode.rs`), and every other entry.
    fn listed(&self) -> usize;

    /// How many distinct entries the request holds, which a rejection of the whole request
    /// answers (Kafka's `getErrorResponse` over its set of entries).
    fn distinct(&self) -> usize;

    /// Calls `visit` with each answered entry in request order and whether the request names
    /// its name or id alone again; stops early when `visit` returns false.
    fn each_answered(
        &self,
        visit: &mut dyn FnMut(ListedTopic<'_>, bool) -> bool,
    ) -> Result<(), String>;

    /// Whether an entry names `id` alone.
    fn lists_id(&self, id: &Uuid) -> bool;
}

/// The answer to a [`ListedTopics`] request, kept compactly: two bytes per answered entry and
/// its few distinct outcomes (an error code and message, or a deletion's code 0), with the
/// names and ids the answer takes from the image beside, by entry (at most
/// [`MAX_RECORDS_PER_USER_OP`] deletions, and one id per name that maps to a listed id).
#[derive(Debug, Default, PartialEq)]
pub struct ListedDeletion {
    /// Per answered entry, in request order: its index in `outcomes`.
    pub per_entry: Vec<u16>,
    pub outcomes: Vec<(i16, Option<String>)>,
    /// (answered entry, the topic id of the name it lists), by entry.
    pub resolved_ids: Vec<(u32, Uuid)>,
    /// (answered entry, the name of the id it lists), by entry.
    pub resolved_names: Vec<(u32, String)>,
    /// A request the controller rejected whole (deletion disabled, too many deletions): each
    /// distinct entry answered with this code and no message, as Kafka's `getErrorResponse`.
    pub rejected: Option<i16>,
    /// A request the controller could not decide: every copy of each entry the decoded request
    /// holds ([`ListedTopics::listed`]) answered with this code and message, as
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

    /// The code and message of the answered entry at `index` (in request order).
    pub fn outcome(&self, index: usize) -> Option<&(i16, Option<String>)> {
        self.outcomes.get(*self.per_entry.get(index)? as usize)
    }

    /// The answer to the answered entry at `index`, which the request spelled `name` and `id`
    /// (a name alone answered with its topic's id, an id alone with its topic's name, where
    /// the topic was found).
    pub fn answer(
        &self,
        index: usize,
        name: Option<TopicName>,
        id: Uuid,
    ) -> Option<DeletableTopicResult> {
        let (code, message) = self.outcome(index)?;
        let at = u32::try_from(index).ok()?;
        let (name, id) = match (name, id.is_nil()) {
            (Some(name), true) => {
                let resolved = self.resolved_ids.binary_search_by_key(&at, |(at, _)| *at);
                (
                    Some(name),
                    resolved.map_or(id, |found| self.resolved_ids[found].1),
                )
            }
            (None, false) => {
                let resolved = self.resolved_names.binary_search_by_key(&at, |(at, _)| *at);
                let name = resolved.ok().map(|found| {
                    TopicName(StrBytes::from_string(self.resolved_names[found].1.clone()))
                });
                (name, id)
            }
            (name, _) => (name, id),
        };
        Some(
            DeletableTopicResult::default()
                .with_name(name)
                .with_topic_id(id)
                .with_error_code(*code)
                .with_error_message(message.clone().map(StrBytes::from_string)),
        )
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

/// A topic to delete once the request is known to stay within one batch.
struct Candidate {
    /// Its answered entry.
    entry: usize,
    id: Uuid,
    /// The image's name of a topic listed by id.
    name: Option<String>,
}

/// Decides a DeleteTopics request whose entries are read from `topics`. `delete_topic_enable`
/// is the controller's `delete.topic.enable`. Only `ctx.quota` is used (DeleteTopics draws no
/// randomness).
pub fn delete_listed_topics<V: MetadataView + ?Sized>(
    image: &V,
    topics: &dyn ListedTopics,
    version: i16,
    delete_topic_enable: bool,
    ctx: &mut MutationContext<'_>,
) -> ControllerResult<ListedDeletion> {
    let rejected = |error: &ControllerError| ControllerResult {
        records: Vec::new(),
        response: ListedDeletion {
            rejected: Some(error.code().code()),
            ..Default::default()
        },
    };
    if !delete_topic_enable {
        return rejected(&ControllerError::TopicDeletionDisabled { version });
    }
    let mut deletion = ListedDeletion {
        per_entry: Vec::with_capacity(topics.answered()),
        ..Default::default()
    };
    let mut index_of: HashMap<(i16, Option<String>), u16> = HashMap::new();
    // Distinct outcomes: a few errors and the few a deletion can end with.
    let mut outcome_index = |outcome: (i16, Option<String>), outcomes: &mut Vec<_>| {
        *index_of.entry(outcome.clone()).or_insert_with(|| {
            outcomes.push(outcome);
            u16::try_from(outcomes.len() - 1).unwrap_or(u16::MAX)
        })
    };
    let mut candidates: Vec<Candidate> = Vec::new();
    // Ids listed alone that a listed name maps to: answered as duplicates, never deleted.
    let mut conflicting: Vec<Uuid> = Vec::new();
    let mut too_large = false;
    let walked = topics.each_answered(&mut |topic, repeated| {
        let entry = deletion.per_entry.len();
        let mut candidate = |id: Uuid, name: Option<String>| {
            if candidates.len() == MAX_RECORDS_PER_USER_OP {
                too_large = true;
                return false;
            }
            candidates.push(Candidate { entry, id, name });
            true
        };
        let error = match topic {
            ListedTopic::Neither => ControllerError::NeitherNameNorId,
            ListedTopic::Both => ControllerError::BothNameAndId,
            ListedTopic::Name(_) if repeated => ControllerError::DuplicateTopicName,
            ListedTopic::Id(_) if repeated => ControllerError::DuplicateTopicId,
            ListedTopic::Name(name) => match image.topic_id(name) {
                None => ControllerError::UnknownTopicName,
                Some(id) if topics.lists_id(&id) => {
                    conflicting.push(id);
                    if let Ok(at) = u32::try_from(entry) {
                        deletion.resolved_ids.push((at, id));
                    }
                    ControllerError::NameMapsToSuppliedId
                }
                Some(id) => {
                    deletion.per_entry.push(u16::MAX);
                    return candidate(id, None);
                }
            },
            ListedTopic::Id(id) => match image.topic_name(&id) {
                None => ControllerError::UnknownTopicId,
                Some(name) => {
                    deletion.per_entry.push(u16::MAX);
                    return candidate(id, Some(name));
                }
            },
        };
        let at = outcome_index(
            (error.code().code(), error.message()),
            &mut deletion.outcomes,
        );
        deletion.per_entry.push(at);
        true
    });
    if let Err(error) = walked {
        tracing::error!(%error, "the entries of a DeleteTopics request did not read again");
        let at = outcome_index(
            (ResponseError::UnknownServerError.code(), Some(error)),
            &mut deletion.outcomes,
        );
        deletion.per_entry.clear();
        deletion.per_entry.resize(topics.answered(), at);
        deletion.resolved_ids.clear();
        return ControllerResult {
            records: Vec::new(),
            response: deletion,
        };
    }
    if too_large {
        return rejected(&ControllerError::BatchTooLarge);
    }
    conflicting.sort_unstable();
    let mut records = Vec::with_capacity(candidates.len());
    for Candidate { entry, id, name } in candidates {
        let listed_by_name = name.is_none();
        let outcome = if !listed_by_name && conflicting.binary_search(&id).is_ok() {
            let error = ControllerError::DuplicateTopicId;
            (error.code().code(), error.message())
        } else {
            let at = u32::try_from(entry).unwrap_or(u32::MAX);
            match name {
                None => deletion.resolved_ids.push((at, id)),
                Some(name) => deletion.resolved_names.push((at, name)),
            }
            let partitions = u32::try_from(image.partition_count(&id)).unwrap_or(u32::MAX);
            match ctx.quota.charge(partitions) {
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
            }
        };
        deletion.per_entry[entry] = outcome_index(outcome, &mut deletion.outcomes);
    }
    deletion.resolved_ids.sort_unstable_by_key(|(at, _)| *at);
    ControllerResult {
        records,
        response: deletion,
    }
}

/// A decoded request's entries, as the request spelled them.
struct DecodedTopics<'a> {
    entries: Vec<(Option<&'a str>, Uuid)>,
    alone: ListedAlone<'a>,
}

/// How many entries of a decoded DeleteTopics request list each name alone, and each id alone:
/// a name or id listed alone more than once is refused, unchecked (Kafka's
/// `ControllerApis.deleteTopics`).
pub struct ListedAlone<'a> {
    names: HashMap<&'a str, usize>,
    ids: HashMap<Uuid, usize>,
}

impl<'a> ListedAlone<'a> {
    /// Counts the entries of `request` (names of v0-5, then v6's states).
    pub fn of(request: &'a DeleteTopicsRequest) -> Self {
        let mut alone = ListedAlone {
            names: HashMap::new(),
            ids: HashMap::new(),
        };
        for (name, id) in entries(request) {
            match (name, id.is_nil()) {
                (Some(name), true) => *alone.names.entry(name).or_default() += 1,
                (None, false) => *alone.ids.entry(id).or_default() += 1,
                _ => {}
            }
        }
        alone
    }

    /// How many entries list `name` alone.
    pub fn name_times(&self, name: &str) -> usize {
        self.names.get(name).copied().unwrap_or_default()
    }

    /// How many entries list `id` alone.
    pub fn id_times(&self, id: &Uuid) -> usize {
        self.ids.get(id).copied().unwrap_or_default()
    }
}

/// Each entry of `request` as (name, id): v0-5's names with no id, then v6's states.
fn entries(request: &DeleteTopicsRequest) -> impl Iterator<Item = (Option<&str>, Uuid)> {
    request
        .topic_names
        .iter()
        .map(|name| (Some(name.0.as_str()), Uuid::nil()))
        .chain(
            request
                .topics
                .iter()
                .map(|t| (t.name.as_ref().map(|name| name.0.as_str()), t.topic_id)),
        )
}

impl<'a> DecodedTopics<'a> {
    fn new(request: &'a DeleteTopicsRequest) -> Self {
        DecodedTopics {
            entries: entries(request).collect(),
            alone: ListedAlone::of(request),
        }
    }

    /// Each entry as the decision reads it, and whether it is answered (every entry with both
    /// or neither; a name or id alone at its first appearance).
    fn each(&self, mut visit: impl FnMut(&(Option<&'a str>, Uuid), ListedTopic<'a>, bool, bool)) {
        let mut seen = HashSet::new();
        for entry in &self.entries {
            let (topic, repeated) = match *entry {
                (Some(name), id) if id.is_nil() => {
                    (ListedTopic::Name(name), self.alone.name_times(name) > 1)
                }
                (None, id) if !id.is_nil() => (ListedTopic::Id(id), self.alone.id_times(&id) > 1),
                (Some(_), _) => (ListedTopic::Both, false),
                (None, _) => (ListedTopic::Neither, false),
            };
            let answered = match topic {
                ListedTopic::Name(_) | ListedTopic::Id(_) => seen.insert(*entry),
                ListedTopic::Both | ListedTopic::Neither => true,
            };
            visit(entry, topic, repeated, answered);
        }
    }
}

impl ListedTopics for DecodedTopics<'_> {
    fn answered(&self) -> usize {
        let mut count = 0;
        self.each(|_, _, _, answered| count += usize::from(answered));
        count
    }

    fn listed(&self) -> usize {
        self.entries.len()
    }

    fn distinct(&self) -> usize {
        self.entries.iter().collect::<HashSet<_>>().len()
    }

    fn each_answered(
        &self,
        visit: &mut dyn FnMut(ListedTopic<'_>, bool) -> bool,
    ) -> Result<(), String> {
        let mut going = true;
        self.each(|_, topic, repeated, answered| {
            if going && answered {
                going = visit(topic, repeated);
            }
        });
        Ok(())
    }

    fn lists_id(&self, id: &Uuid) -> bool {
        self.alone.id_times(id) > 0
    }
}

/// Decides a decoded DeleteTopics request (each name or id alone kept at most twice,
/// `dedup_decode.rs`) as [`delete_listed_topics`] decides the same entries.
pub fn delete_topics<V: MetadataView + ?Sized>(
    image: &V,
    request: &DeleteTopicsRequest,
    version: i16,
    delete_topic_enable: bool,
    ctx: &mut MutationContext<'_>,
) -> ControllerResult<DeleteTopicsResponse> {
    let topics = DecodedTopics::new(request);
    let ControllerResult {
        records,
        response: deletion,
    } = delete_listed_topics(image, &topics, version, delete_topic_enable, ctx);
    let spelled = |(name, id): &(Option<&str>, Uuid)| {
        (
            name.map(|name| TopicName(StrBytes::from_string(name.to_owned()))),
            *id,
        )
    };
    let mut results = Vec::new();
    match deletion.rejected {
        Some(code) => {
            let mut seen = HashSet::new();
            for entry in topics.entries.iter().filter(|entry| seen.insert(*entry)) {
                let (name, id) = spelled(entry);
                results.push(
                    DeletableTopicResult::default()
                        .with_name(name)
                        .with_topic_id(id)
                        .with_error_code(code),
                );
            }
        }
        None => topics.each(|entry, _, _, answered| {
            if answered {
                let (name, id) = spelled(entry);
                results.extend(deletion.answer(results.len(), name, id));
            }
        }),
    }
    ControllerResult {
        records,
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

    /// Names as a frame would list them, for [`delete_listed_topics`].
    struct Names(Vec<&'static str>);

    impl ListedTopics for Names {
        fn answered(&self) -> usize {
            self.distinct()
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

        fn distinct(&self) -> usize {
            self.0.iter().collect::<HashSet<_>>().len()
        }

        fn each_answered(
            &self,
            visit: &mut dyn FnMut(ListedTopic<'_>, bool) -> bool,
        ) -> Result<(), String> {
            let mut seen = HashSet::new();
            for name in &self.0 {
                let repeated = self.0.iter().filter(|n| *n == name).count() > 1;
                if seen.insert(*name) && !visit(ListedTopic::Name(name), repeated) {
                    break;
                }
            }
            Ok(())
        }

        fn lists_id(&self, _: &Uuid) -> bool {
            false
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
                let (code, message) = match result.response.rejected {
                    Some(code) => (code, None),
                    None => result.response.outcome(index).cloned().unwrap_or_default(),
                };
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
