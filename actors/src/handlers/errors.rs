//! Error bookkeeping shared by the handlers.

use std::collections::HashMap;
use std::sync::OnceLock;

use kafka_protocol::error::ResponseError;

use crate::controller::logic::ListedAnswers;

/// How many times each error code appears in a response, as Kafka's `errorCounts()` reports it
/// for `ErrorsPerSec` (success included as `NONE`). Kept inline: almost every response has one
/// or two distinct codes, and this is built for every request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorCounts(smallvec::SmallVec<[(i16, u64); 2]>);

impl ErrorCounts {
    /// Counts one occurrence of `code`.
    pub fn add(&mut self, code: i16) {
        match self.0.iter_mut().find(|(c, _)| *c == code) {
            Some((_, count)) => *count += 1,
            None => self.0.push((code, 1)),
        }
    }

    /// Counts `times` occurrences of `code` (none: not counted).
    pub fn add_times(&mut self, code: i16, times: u64) {
        if times == 0 {
            return;
        }
        match self.0.iter_mut().find(|(c, _)| *c == code) {
            Some((_, count)) => *count += times,
            None => self.0.push((code, times)),
        }
    }

    /// The error codes of the answer to a request whose elements stayed in its frame:
    /// `denied` elements refused authorization, and the controller's `answers` (each of
    /// `listed` elements its refusal's error when it refused the request whole; `code`: an
    /// outcome's error code).
    pub fn of_listed<O>(
        answers: &ListedAnswers<O>,
        listed: usize,
        denied: usize,
        code: impl Fn(&O) -> i16,
    ) -> Self {
        let mut errors = ErrorCounts::default();
        errors.add_times(
            ResponseError::TopicAuthorizationFailed.code(),
            denied as u64,
        );
        match &answers.refused {
            Some((refused, _)) => errors.add_times(*refused, listed as u64),
            None => {
                for (outcome, times) in answers.outcomes.iter().zip(answers.uses()) {
                    errors.add_times(code(outcome), times);
                }
            }
        }
        errors
    }

    /// Counts one occurrence of each code.
    pub fn add_all(&mut self, codes: impl IntoIterator<Item = i16>) {
        for code in codes {
            self.add(code);
        }
    }

    /// The counts, in first-seen order.
    pub fn iter(&self) -> impl Iterator<Item = (i16, u64)> + '_ {
        self.0.iter().copied()
    }

    /// The counts of one code.
    pub fn count(&self, code: i16) -> u64 {
        self.0
            .iter()
            .find(|(c, _)| *c == code)
            .map_or(0, |(_, n)| *n)
    }
}

/// Kafka's name of an error code (`NONE`, `UNKNOWN_TOPIC_OR_PARTITION`, ...), as used in the
/// `error` label of the request error metric.
pub fn error_name(code: i16) -> &'static str {
    if code == 0 {
        return "NONE";
    }
    error_names().get(&code).copied().unwrap_or("UNKNOWN")
}

/// The crate names its variants in CamelCase after Kafka's `Errors` constants; converting back
/// gives Kafka's names. Built once for every code the crate knows.
fn error_names() -> &'static HashMap<i16, &'static str> {
    static NAMES: OnceLock<HashMap<i16, &'static str>> = OnceLock::new();
    NAMES.get_or_init(|| {
        (-1..=i16::from(u8::MAX))
            .filter_map(ResponseError::try_from_code)
            .filter(|error| !matches!(error, ResponseError::Unknown(_)))
            .map(|error| {
                let camel = error.to_string();
                let mut snake = String::with_capacity(camel.len() + 8);
                for (index, ch) in camel.chars().enumerate() {
                    if ch.is_ascii_uppercase() && index > 0 {
                        snake.push('_');
                    }
                    snake.push(ch.to_ascii_uppercase());
                }
                let name: &'static str = Box::leak(snake.into_boxed_str());
                (error.code(), name)
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_kafkas_errors_constants() {
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(error_name(17), "INVALID_TOPIC_EXCEPTION");
        assert_eq!(error_name(36), "TOPIC_ALREADY_EXISTS");
        assert_eq!(error_name(89), "THROTTLING_QUOTA_EXCEEDED");
        assert_eq!(error_name(100), "UNKNOWN_TOPIC_ID");
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
    }

    #[test]
    fn counts_accumulate_per_code() {
        let mut counts = ErrorCounts::default();
        counts.add_all([0, 36, 0]);
        assert_eq!(counts.count(0), 2);
        assert_eq!(counts.count(36), 1);
        assert_eq!(counts.count(3), 0);
    }
}
