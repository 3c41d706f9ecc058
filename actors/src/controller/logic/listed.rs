//! Requests too large to decode whole (issue #11): CreateTopics, CreatePartitions and
//! AlterUserScramCredentials naming many topics or users are decided with their elements read
//! one at a time from where they are kept (the request's frame), and each distinct element's
//! answer is kept as an index into the few distinct outcomes, the element's name left out (the
//! answer is written from the frame, which has it). The decision stays one: its records are
//! one batch, refused whole past [`MAX_RECORDS_PER_USER_OP`] where Kafka bounds it.

use std::collections::HashMap;
use std::hash::Hash;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::protocol::StrBytes;

use gregor_publishers::records::MetadataRecord;

use super::errors::ControllerError;
use super::{ControllerResult, MAX_RECORDS_PER_USER_OP};

/// A request's elements (`T`: a topic, a user's alteration) read one at a time from where
/// they are kept, each named by a topic or user name. Names denied before the decision
/// (authorization) are left out, as the decoded request's handler leaves them out of the
/// controller's request.
pub trait ListedElements<T = CreatableTopic>: Send + Sync {
    /// How many elements a refusal of the whole request answers with its error: each name's
    /// first two copies (a decoded request holds no more, `dedup_decode.rs`), or, when some
    /// names were denied, each name left once (the handler merges the answers back one per
    /// name).
    fn listed(&self) -> usize;

    /// How many distinct names it lists, the denied ones left out.
    fn distinct(&self) -> usize;

    /// How many distinct names were denied (answered by the caller, never visited).
    fn denied(&self) -> usize;

    /// Calls `visit` with each distinct name's first appearance in request order (the denied
    /// ones left out) and whether the request names it again; stops early when `visit`
    /// returns false.
    fn each_first(&self, visit: &mut dyn FnMut(&T, bool) -> bool) -> Result<(), String>;
}

/// The answer to a [`ListedElements`] request, kept compactly: four bytes per distinct
/// element plus its distinct outcomes `O`.
#[derive(Debug, PartialEq)]
pub struct ListedAnswers<O> {
    /// Per distinct element, in request order: its index in `outcomes`.
    pub per_element: Vec<u32>,
    /// With `per_element` empty: this many distinct elements, each answered `outcomes[0]` (a
    /// request refused past the record limit keeps no index per element).
    pub alike: usize,
    pub outcomes: Vec<O>,
    /// A request refused whole: each name's first two copies answered with this code and
    /// message (as the controller's refusal of a decoded request answers it).
    pub refused: Option<(i16, String)>,
    pub throttle_time_ms: i32,
}

impl<O> Default for ListedAnswers<O> {
    fn default() -> Self {
        ListedAnswers {
            per_element: Vec::new(),
            alike: 0,
            outcomes: Vec::new(),
            refused: None,
            throttle_time_ms: 0,
        }
    }
}

impl<O> ListedAnswers<O> {
    /// A request refused whole.
    pub fn refused(code: i16, message: &str) -> Self {
        ListedAnswers {
            refused: Some((code, message.to_owned())),
            ..Default::default()
        }
    }

    /// How many distinct elements are answered (without a refusal).
    pub fn answered(&self) -> usize {
        self.per_element.len().max(self.alike)
    }

    /// The outcome of the distinct element at `index` (in request order).
    pub fn outcome(&self, index: usize) -> Option<&O> {
        let at = match self.per_element.get(index) {
            Some(at) => *at as usize,
            None if index < self.alike => 0,
            None => return None,
        };
        self.outcomes.get(at)
    }

    /// How many distinct elements each outcome answers, in the order of `outcomes`.
    pub fn uses(&self) -> Vec<u64> {
        let mut times = vec![0u64; self.outcomes.len()];
        for index in 0..self.answered() {
            let at = self.per_element.get(index).map_or(0, |at| *at as usize);
            if let Some(count) = times.get_mut(at) {
                *count += 1;
            }
        }
        times
    }

    /// Answers the next distinct element with the success `outcome`, shared with the last
    /// success (`last`, its index in `outcomes`) when they are alike.
    fn push_success(&mut self, last: &mut Option<u32>, outcome: O) -> Result<(), String>
    where
        O: PartialEq,
    {
        if let Some(index) = last.filter(|at| self.outcomes.get(*at as usize) == Some(&outcome)) {
            self.per_element.push(index);
            return Ok(());
        }
        let index = u32::try_from(self.outcomes.len()).map_err(|_| "more than 2^32 outcomes")?;
        self.outcomes.push(outcome);
        self.per_element.push(index);
        *last = Some(index);
        Ok(())
    }

    /// Answers the next distinct element with the outcome `key` stands for, shared with the
    /// elements answered alike before (`seen`: each key's index in `outcomes`).
    fn push_shared<K: Hash + Eq>(
        &mut self,
        seen: &mut HashMap<K, u32>,
        key: K,
        outcome: impl FnOnce(&K) -> O,
    ) -> Result<(), String> {
        if let Some(index) = seen.get(&key) {
            self.per_element.push(*index);
            return Ok(());
        }
        let index = u32::try_from(self.outcomes.len()).map_err(|_| "more than 2^32 outcomes")?;
        self.outcomes.push(outcome(&key));
        seen.insert(key, index);
        self.per_element.push(index);
        Ok(())
    }
}

/// An element's error code and message (0 and none when it succeeded), the message split at
/// the element's name so that elements failing alike share one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ListedError {
    pub code: i16,
    pub message: Option<Vec<String>>,
}

impl ListedError {
    /// The outcome of `error` for the topic named `name` (an empty name is never split).
    pub fn of(name: &str, error: &ControllerError) -> Self {
        let message = error.message().map(|message| {
            if name.is_empty() {
                vec![message]
            } else {
                message.split(name).map(str::to_owned).collect()
            }
        });
        ListedError {
            code: error.code().code(),
            message,
        }
    }

    /// The message for the element named `name`.
    pub fn message_for(&self, name: &str) -> Option<StrBytes> {
        self.message
            .as_ref()
            .map(|parts| StrBytes::from_string(parts.join(name)))
    }
}

/// An outcome that a write which did not commit turns into a failure.
pub trait Uncommitted {
    /// Fails the outcome with `code` and `message` if it is a success.
    fn fail_if_succeeded(&mut self, code: i16, message: &str);
}

impl Uncommitted for ListedError {
    fn fail_if_succeeded(&mut self, code: i16, message: &str) {
        if self.code == 0 {
            self.code = code;
            self.message = Some(vec![message.to_owned()]);
        }
    }
}

impl<O: Uncommitted> ListedAnswers<O> {
    /// The answers with every success failed with `code` and `message` (the records did not
    /// commit).
    pub fn fail_succeeded(mut self, code: ResponseError, message: &str) -> Self {
        for outcome in &mut self.outcomes {
            outcome.fail_if_succeeded(code.code(), message);
        }
        self
    }
}

/// Why one element fails.
pub(super) trait ElementError {
    /// Whether the request would pass [`MAX_RECORDS_PER_USER_OP`] records: it fails whole,
    /// every element answered `self.answer("")`.
    fn is_batch_too_large(&self) -> bool;

    /// The element named `name`'s answer.
    fn answer(&self, name: &str) -> ListedError;
}

impl ElementError for ControllerError {
    fn is_batch_too_large(&self) -> bool {
        matches!(self, ControllerError::BatchTooLarge)
    }

    fn answer(&self, name: &str) -> ListedError {
        ListedError::of(name, self)
    }
}

/// An element's decision: its records and what its answer says (without its name), or why
/// it fails.
pub(super) type Decided<O, E> = Result<(Vec<MetadataRecord>, O), E>;

/// Decides the distinct elements of `elements` in request order with `decide` (given each
/// element, whether it repeats and the records decided so far), sharing each success's outcome
/// with the last success's when alike and each failure's ([`ListedError`], made an outcome by `failed`) among
/// the elements failing alike. Past [`MAX_RECORDS_PER_USER_OP`] (an error saying so) the whole
/// request fails, once per distinct name; a request that cannot be read again is refused
/// whole.
pub(super) fn decide_listed<T, O: PartialEq, E: ElementError>(
    api: &str,
    elements: &dyn ListedElements<T>,
    validate_only: bool,
    mut decide: impl FnMut(&T, bool, usize) -> Decided<O, E>,
    name: fn(&T) -> &str,
    failed: impl Fn(&ListedError) -> O,
) -> ControllerResult<ListedAnswers<O>> {
    // Sized once: a doubling vector's earlier copies stay resident in the allocator.
    let mut answers = ListedAnswers {
        per_element: Vec::with_capacity(elements.distinct()),
        ..Default::default()
    };
    // Sized once for the usual case, at most a batch: a doubling vector's copies cost more.
    let mut records = Vec::with_capacity(elements.distinct().min(MAX_RECORDS_PER_USER_OP));
    let mut failures: HashMap<ListedError, u32> = HashMap::new();
    let mut last_success: Option<u32> = None;
    // The answer of every element when the request would pass the record limit.
    let mut too_large: Option<ListedError> = None;
    let mut broken: Option<String> = None;
    let walked = elements.each_first(&mut |element, repeated| {
        let pushed = match decide(element, repeated, records.len()) {
            Err(error) if error.is_batch_too_large() => {
                too_large = Some(error.answer(""));
                return false;
            }
            Ok((mut new, outcome)) => {
                records.append(&mut new);
                answers.push_success(&mut last_success, outcome)
            }
            Err(error) => answers.push_shared(&mut failures, error.answer(name(element)), &failed),
        };
        pushed.map_err(|error| broken = Some(error)).is_ok()
    });
    if let Some(error) = walked.err().or(broken) {
        tracing::error!(%error, "a {api} request could not be read again");
        return ControllerResult {
            records: Vec::new(),
            response: ListedAnswers::refused(ResponseError::UnknownServerError.code(), &error),
        };
    }
    if let Some(refusal) = too_large {
        // Kafka fails the whole request when it would exceed one batch: every distinct name.
        // What was decided is freed before the answer's indices are all written.
        records = Vec::new();
        answers.outcomes = vec![failed(&refusal)];
        answers.per_element = Vec::new();
        answers.alike = elements.distinct();
    }
    if validate_only {
        records.clear();
    }
    ControllerResult {
        records,
        response: answers,
    }
}

/// A request's elements kept as a list, read as a frame would be (for tests).
#[cfg(test)]
pub(super) struct Listed<T> {
    elements: Vec<T>,
    /// Each element's name; `None`: every element is answered on its own.
    name: Option<fn(&T) -> &str>,
}

#[cfg(test)]
impl<T> Listed<T> {
    /// Elements answered once per distinct `name`.
    pub(super) fn new(elements: Vec<T>, name: fn(&T) -> &str) -> Self {
        Listed {
            elements,
            name: Some(name),
        }
    }

    /// Elements each answered on its own.
    pub(super) fn each(elements: Vec<T>) -> Self {
        Listed {
            elements,
            name: None,
        }
    }

    /// Each distinct name's first appearance (every element, without names), in request
    /// order.
    pub(super) fn firsts(&self) -> Vec<&T> {
        let Some(name) = self.name else {
            return self.elements.iter().collect();
        };
        let mut seen = std::collections::HashSet::new();
        self.elements
            .iter()
            .filter(|element| seen.insert(name(element)))
            .collect()
    }

    fn repeated(&self, element: &T) -> bool {
        self.name.is_some_and(|name| {
            self.elements
                .iter()
                .filter(|other| name(other) == name(element))
                .count()
                > 1
        })
    }
}

#[cfg(test)]
impl<T: Send + Sync> ListedElements<T> for Listed<T> {
    fn listed(&self) -> usize {
        self.elements.len()
    }

    fn distinct(&self) -> usize {
        self.firsts().len()
    }

    fn denied(&self) -> usize {
        0
    }

    fn each_first(&self, visit: &mut dyn FnMut(&T, bool) -> bool) -> Result<(), String> {
        for element in self.firsts() {
            if !visit(element, self.repeated(element)) {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_uncommitted_write_fails_the_successes_only() {
        let refused = ListedError {
            code: 42,
            message: Some(vec!["Duplicate topic name.".to_owned()]),
        };
        let answers = ListedAnswers {
            per_element: vec![0, 1, 0],
            outcomes: vec![ListedError::default(), refused.clone()],
            ..Default::default()
        };
        let failed = answers.fail_succeeded(ResponseError::NotController, "not the leader");
        assert_eq!(
            failed.outcomes,
            vec![
                ListedError {
                    code: ResponseError::NotController.code(),
                    message: Some(vec!["not the leader".to_owned()]),
                },
                refused,
            ]
        );
        assert_eq!(failed.per_element, vec![0, 1, 0]);
    }
}
