//! Kafka's topic name rules (clients `common.internals.Topic`), with Kafka's exact messages.

/// Longest legal topic name, in UTF-16 code units as Java counts them.
pub const MAX_NAME_LENGTH: usize = 249;

/// The raft metadata log's name; CreateTopics refuses it.
pub const CLUSTER_METADATA_TOPIC_NAME: &str = "__cluster_metadata";

/// Why a topic name is illegal. `Display` is Kafka's `InvalidTopicException` message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTopicName {
    /// The empty string.
    #[error("Topic name is invalid: the empty string is not allowed")]
    Empty,
    /// Exactly ".".
    #[error("Topic name is invalid: '.' is not allowed")]
    Dot,
    /// Exactly "..".
    #[error("Topic name is invalid: '..' is not allowed")]
    DotDot,
    /// Longer than [`MAX_NAME_LENGTH`].
    #[error(
        "Topic name is invalid: the length of '{0}' is longer than the max allowed length 249"
    )]
    TooLong(String),
    /// Contains a character outside `[a-zA-Z0-9._-]`.
    #[error(
        "Topic name is invalid: '{0}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    )]
    IllegalCharacters(String),
}

/// Checks a topic name against Kafka's rules, in Kafka's order (empty, ".", "..", length,
/// characters).
pub fn validate(name: &str) -> Result<(), InvalidTopicName> {
    if name.is_empty() {
        return Err(InvalidTopicName::Empty);
    }
    if name == "." {
        return Err(InvalidTopicName::Dot);
    }
    if name == ".." {
        return Err(InvalidTopicName::DotDot);
    }
    // Java's String.length() counts UTF-16 code units.
    if name.encode_utf16().count() > MAX_NAME_LENGTH {
        return Err(InvalidTopicName::TooLong(name.to_owned()));
    }
    if !name.chars().all(is_legal_char) {
        return Err(InvalidTopicName::IllegalCharacters(name.to_owned()));
    }
    Ok(())
}

fn is_legal_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-'
}

/// Whether the name contains '.' or '_', the two characters that collide in metric names.
pub fn has_collision_chars(name: &str) -> bool {
    name.contains(['.', '_'])
}

/// The name with every '.' replaced by '_': two topics collide when these are equal.
pub fn unify_collision_chars(name: &str) -> String {
    name.replace('.', "_")
}

/// Whether two names collide in metric names ('.' and '_' in the same positions, or equal).
pub fn collides(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .all(|(x, y)| x == y || (matches!(x, b'.' | b'_') && matches!(y, b'.' | b'_')))
}

/// The smallest of `existing` that collides with `name`; a helper for
/// [`super::view::MetadataView::colliding_topic`] implementations.
pub fn first_colliding<'a>(
    existing: impl IntoIterator<Item = &'a str>,
    name: &str,
) -> Option<&'a str> {
    if !has_collision_chars(name) {
        return None;
    }
    existing
        .into_iter()
        .filter(|other| collides(other, name))
        .min()
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn legal_names_pass() {
        for name in [
            "a",
            "A-b_c.9",
            "...",
            "__consumer_offsets",
            &"x".repeat(249),
        ] {
            assert_eq!(validate(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn illegal_names_have_kafkas_messages() {
        let cases = [
            ("", "Topic name is invalid: the empty string is not allowed".to_owned()),
            (".", "Topic name is invalid: '.' is not allowed".to_owned()),
            ("..", "Topic name is invalid: '..' is not allowed".to_owned()),
            (
                &"x".repeat(250),
                format!(
                    "Topic name is invalid: the length of '{}' is longer than the max allowed length 249",
                    "x".repeat(250)
                ),
            ),
            (
                "a b",
                "Topic name is invalid: 'a b' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
                    .to_owned(),
            ),
            (
                "caf\u{e9}",
                "Topic name is invalid: 'caf\u{e9}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
                    .to_owned(),
            ),
        ];
        for (name, message) in cases {
            let error = validate(name).expect_err(name);
            assert_eq!(error.to_string(), message);
        }
    }

    #[test]
    fn length_counts_utf16_units_before_characters() {
        // 125 two-unit characters = 250 UTF-16 units: too long wins over illegal characters.
        let name = "\u{1F600}".repeat(125);
        assert!(matches!(validate(&name), Err(InvalidTopicName::TooLong(_))));
    }

    #[test]
    fn collisions() {
        assert!(has_collision_chars("a.b"));
        assert!(has_collision_chars("a_b"));
        assert!(!has_collision_chars("a-b"));
        assert_eq!(unify_collision_chars("a.b_c"), "a_b_c");
        assert!(collides("a.b", "a_b"));
        assert!(collides("a.b", "a.b"));
        assert!(!collides("a.b", "a-b"));
        assert!(!collides("a.b", "a.bc"));
        assert_eq!(first_colliding(["a_b", "a.b", "x"], "a_b"), Some("a.b"));
        assert_eq!(first_colliding(["ab"], "ab"), None);
    }
}
