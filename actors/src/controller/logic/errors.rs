//! Every way a topic mutation can fail, each mapped to its Kafka error code and to the
//! `error_message` Kafka puts in the response.
//!
//! Kafka's `ApiError` rules decide the message: an error built from an exception whose message
//! equals the code's default message (or has none) is sent with a null message, whereas an
//! `ApiError` built from the code alone carries the default message. [`ControllerError::message`]
//! reproduces which is which, variant by variant.

use kafka_protocol::error::ResponseError;

use super::topic_configs::ConfigError;
use super::topic_name::InvalidTopicName;

const NULL_CONFIG_VALUES: &str = "Null value not supported for topic configs: ";

/// Names joined with commas, written without building the joined string first.
struct Joined<'a>(&'a [String]);

impl std::fmt::Display for Joined<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (index, name) in self.0.iter().enumerate() {
            if index > 0 {
                f.write_str(",")?;
            }
            f.write_str(name)?;
        }
        Ok(())
    }
}

/// A per-topic failure of CreateTopics, DeleteTopics or CreatePartitions.
/// `Display` is the message Kafka sends (see [`ControllerError::message`] for when it is null).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ControllerError {
    /// The name breaks Kafka's topic name rules.
    #[error(transparent)]
    InvalidTopicName(#[from] InvalidTopicName),
    /// The name collides ('.' versus '_') with an existing topic.
    #[error("Topic '{name}' collides with existing topic: {existing}")]
    TopicCollision {
        /// Requested name.
        name: String,
        /// The existing topic it collides with.
        existing: String,
    },
    /// A topic of that name exists.
    #[error("Topic '{name}' already exists.")]
    TopicAlreadyExists {
        /// Requested name.
        name: String,
    },
    /// The request names the topic more than once.
    #[error("Duplicate topic name.")]
    DuplicateTopicName,
    /// The request names the topic id more than once.
    #[error("Duplicate topic id.")]
    DuplicateTopicId,
    /// CreateTopics of the raft metadata topic.
    #[error("Creation of internal topic __cluster_metadata is prohibited.")]
    ClusterMetadataTopic,
    /// Configs with a null value at creation.
    #[error("{NULL_CONFIG_VALUES}{}", Joined(names))]
    NullConfigValues {
        /// Keys whose value was null, in request order.
        names: Vec<String>,
    },
    /// A supplied config is unknown or has an invalid value.
    #[error(transparent)]
    InvalidConfig(#[from] ConfigError),
    /// Manual assignment together with an explicit replication factor.
    #[error(
        "A manual partition assignment was specified, but replication factor was not set to -1."
    )]
    AssignmentWithReplicationFactor,
    /// Manual assignment together with an explicit partition count.
    #[error("A manual partition assignment was specified, but numPartitions was not set to -1.")]
    AssignmentWithNumPartitions,
    /// A manual replica assignment is unusable; the text says why.
    #[error("{0}")]
    InvalidReplicaAssignment(String),
    /// The replication factor is invalid or cannot be met; the text says why.
    #[error("{0}")]
    InvalidReplicationFactor(String),
    /// The partition count is invalid or not an increase; the text says why.
    #[error("{0}")]
    InvalidPartitions(String),
    /// CreatePartitions of a topic that does not exist (Kafka sends no message).
    #[error("This server does not host this topic-partition.")]
    UnknownTopic,
    /// DeleteTopics of a name that does not exist (Kafka sends the default message).
    #[error("This server does not host this topic-partition.")]
    UnknownTopicName,
    /// DeleteTopics of an id that does not exist (Kafka sends the default message).
    #[error("This server does not host this topic ID.")]
    UnknownTopicId,
    /// DeleteTopics entry with neither a name nor an id.
    #[error("Neither topic name nor id were specified.")]
    NeitherNameNorId,
    /// DeleteTopics entry with both a name and an id.
    #[error("You may not specify both topic name and topic id.")]
    BothNameAndId,
    /// DeleteTopics names a topic whose id the request also lists.
    #[error("The provided topic name maps to an ID that was already supplied.")]
    NameMapsToSuppliedId,
    /// DeleteTopics while `delete.topic.enable=false`; before v3 Kafka answers INVALID_REQUEST.
    #[error("Topic deletion is disabled.")]
    TopicDeletionDisabled {
        /// DeleteTopics request version.
        version: i16,
    },
    /// The strict controller-mutation quota is exhausted.
    #[error("The throttling quota has been exceeded.")]
    ThrottlingQuotaExceeded {
        /// Back-off for the client.
        throttle_time_ms: i32,
    },
    /// The request would write more records than one controller batch may hold.
    #[error("Unable to perform excessively large batch operation.")]
    BatchTooLarge,
    /// The topic has no partitions, which the metadata should never allow.
    #[error("Invalid state: topic {name} appears to have no partitions.")]
    TopicWithoutPartitions {
        /// Topic name.
        name: String,
    },
}

impl ControllerError {
    /// The Kafka error code of this failure.
    pub fn code(&self) -> ResponseError {
        use ControllerError::*;
        match self {
            InvalidTopicName(_) | TopicCollision { .. } => ResponseError::InvalidTopicException,
            TopicAlreadyExists { .. } => ResponseError::TopicAlreadyExists,
            DuplicateTopicName
            | DuplicateTopicId
            | ClusterMetadataTopic
            | AssignmentWithReplicationFactor
            | AssignmentWithNumPartitions
            | NeitherNameNorId
            | BothNameAndId
            | NameMapsToSuppliedId => ResponseError::InvalidRequest,
            NullConfigValues { .. } | InvalidConfig(_) => ResponseError::InvalidConfig,
            InvalidReplicaAssignment(_) => ResponseError::InvalidReplicaAssignment,
            InvalidReplicationFactor(_) => ResponseError::InvalidReplicationFactor,
            InvalidPartitions(_) => ResponseError::InvalidPartitions,
            UnknownTopic | UnknownTopicName => ResponseError::UnknownTopicOrPartition,
            UnknownTopicId => ResponseError::UnknownTopicId,
            TopicDeletionDisabled { version } if *version < 3 => ResponseError::InvalidRequest,
            TopicDeletionDisabled { .. } => ResponseError::TopicDeletionDisabled,
            ThrottlingQuotaExceeded { .. } => ResponseError::ThrottlingQuotaExceeded,
            BatchTooLarge => ResponseError::PolicyViolation,
            TopicWithoutPartitions { .. } => ResponseError::UnknownServerError,
        }
    }

    /// The `error_message` Kafka sends for this failure (`None` = null on the wire).
    pub fn message(&self) -> Option<String> {
        use ControllerError::*;
        match self {
            // Exceptions whose message is the code's default or absent, UNKNOWN_SERVER_ERROR,
            // and whole-request errors (DeleteTopicsRequest.getErrorResponse sets no message).
            UnknownTopic
            | ThrottlingQuotaExceeded { .. }
            | TopicWithoutPartitions { .. }
            | TopicDeletionDisabled { .. } => None,
            InvalidTopicName(_)
            | TopicCollision { .. }
            | TopicAlreadyExists { .. }
            | DuplicateTopicName
            | DuplicateTopicId
            | ClusterMetadataTopic
            | InvalidConfig(_)
            | AssignmentWithReplicationFactor
            | AssignmentWithNumPartitions
            | InvalidReplicaAssignment(_)
            | InvalidReplicationFactor(_)
            | InvalidPartitions(_)
            | UnknownTopicName
            | UnknownTopicId
            | NeitherNameNorId
            | BothNameAndId
            | NameMapsToSuppliedId
            | BatchTooLarge => Some(self.to_string()),
            // As long as the request's config names: written into one allocation of its size.
            NullConfigValues { names } => {
                let joined = names.iter().map(String::len).sum::<usize>() + names.len();
                let mut message = String::with_capacity(NULL_CONFIG_VALUES.len() + joined);
                // Writing to a String cannot fail.
                let _ = std::fmt::Write::write_fmt(&mut message, format_args!("{self}"));
                Some(message)
            }
        }
    }

    /// The throttle time a failure asks for (only quota failures have one).
    pub fn throttle_time_ms(&self) -> i32 {
        match self {
            ControllerError::ThrottlingQuotaExceeded { throttle_time_ms } => *throttle_time_ms,
            _ => 0,
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_null_messages() {
        let e = ControllerError::UnknownTopic;
        assert_eq!((e.code().code(), e.message()), (3, None));
        let e = ControllerError::UnknownTopicName;
        assert_eq!(
            (e.code().code(), e.message().as_deref()),
            (3, Some("This server does not host this topic-partition."))
        );
        let e = ControllerError::UnknownTopicId;
        assert_eq!(
            (e.code().code(), e.message().as_deref()),
            (100, Some("This server does not host this topic ID."))
        );
        let e = ControllerError::TopicDeletionDisabled { version: 2 };
        assert_eq!((e.code().code(), e.message()), (42, None));
        let e = ControllerError::TopicDeletionDisabled { version: 3 };
        assert_eq!((e.code().code(), e.message()), (73, None));
        let e = ControllerError::ThrottlingQuotaExceeded {
            throttle_time_ms: 500,
        };
        assert_eq!(
            (e.code().code(), e.message(), e.throttle_time_ms()),
            (89, None, 500)
        );
        let e = ControllerError::TopicWithoutPartitions { name: "t".into() };
        assert_eq!((e.code().code(), e.message()), (-1, None));
        let e = ControllerError::NullConfigValues {
            names: vec!["a".into(), "b".into()],
        };
        assert_eq!(
            (e.code().code(), e.message().as_deref()),
            (40, Some("Null value not supported for topic configs: a,b"))
        );
    }
}
