//! Errors of the log layer, each mapped to the Kafka error code a handler puts in its response.

use std::path::{Path, PathBuf};

/// Kafka error codes this crate produces (values from Kafka's `Errors`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KafkaCode {
    /// What Kafka answers for a failure it has no code for (a stream that does not decompress,
    /// an unknown codec id).
    UnknownServerError,
    OffsetOutOfRange,
    CorruptMessage,
    MessageTooLarge,
    RecordListTooLarge,
    InvalidTimestamp,
    OutOfOrderSequenceNumber,
    InvalidProducerEpoch,
    KafkaStorageError,
    InvalidRecord,
}

impl KafkaCode {
    /// The wire value of the code.
    pub fn code(self) -> i16 {
        match self {
            KafkaCode::UnknownServerError => -1,
            KafkaCode::OffsetOutOfRange => 1,
            KafkaCode::CorruptMessage => 2,
            KafkaCode::MessageTooLarge => 10,
            KafkaCode::RecordListTooLarge => 18,
            KafkaCode::InvalidTimestamp => 32,
            KafkaCode::OutOfOrderSequenceNumber => 45,
            KafkaCode::InvalidProducerEpoch => 47,
            KafkaCode::KafkaStorageError => 56,
            KafkaCode::InvalidRecord => 87,
        }
    }
}

/// One rejected record of a batch, as Produce v8+ reports it in `record_errors`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// Index of the record inside its batch.
    pub batch_index: i32,
    pub message: String,
}

/// Which of Kafka's checks refused a batch: the broker topic metrics count them differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectedBy {
    /// The request's own check of a partition's records (Kafka's
    /// `ProduceRequest.validateRecords`: no whole batch, not magic 2, a second batch), made
    /// before the partition's log is reached, so no produce metric counts it.
    Request,
    /// The log's checks of the batch (Kafka's `UnifiedLog.append` and `LogValidator`).
    Log,
    /// The log's size check, for a batch larger than `max.message.bytes` as produced or once
    /// recompressed: Kafka's `UnifiedLog` also adds the request's records to
    /// BytesRejectedPerSec.
    MaxMessageBytes,
}

/// Why a produced batch was refused; nothing of it was appended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchRejection {
    pub code: KafkaCode,
    pub message: String,
    /// Filled only for INVALID_RECORD and INVALID_TIMESTAMP raised per record, as Kafka does.
    pub record_errors: Vec<RecordError>,
    pub by: RejectedBy,
}

impl BatchRejection {
    /// A rejection by the log's checks.
    pub fn new(code: KafkaCode, message: impl Into<String>) -> Self {
        BatchRejection {
            code,
            message: message.into(),
            record_errors: Vec::new(),
            by: RejectedBy::Log,
        }
    }

    /// The Produce answer's `error_message`: Kafka sends one only for a record validation
    /// failure (`RecordValidationException`, the one refusal with `record_errors`; its
    /// `LogAppendResult.hasCustomErrorMessage`), null for every other refusal of the batch.
    pub fn error_message(&self) -> Option<&str> {
        (!self.record_errors.is_empty()).then_some(self.message.as_str())
    }
}

impl std::fmt::Display for BatchRejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

/// Every failure of a log operation.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// A file operation failed; the log dir holding `path` is marked offline.
    #[error("I/O error while trying to {op} {}: {source}", path.display())]
    Io {
        op: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// The log dir was marked offline after an earlier I/O error.
    #[error("log dir {} is offline", .0.display())]
    LogDirOffline(PathBuf),
    /// The batch failed validation (§1.3/§1.4 of the data-plane reference).
    #[error("batch rejected: {0}")]
    Rejected(BatchRejection),
    /// The idempotence checks refused the batch.
    #[error("producer state check failed ({code:?}): {message}")]
    Producer { code: KafkaCode, message: String },
    /// A read or offset request outside [log start offset, log end offset].
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    /// A file of the log holds bytes this crate cannot interpret (a checkpoint, a snapshot).
    #[error("corrupt file {}: {message}", path.display())]
    CorruptFile { path: PathBuf, message: String },
    /// The partition's directory holds the log of another topic id: a topic of the same name
    /// that was deleted while this node was away (Kafka's stray log). Not a disk failure: the
    /// caller decides whether to discard it ([`crate::log_dir::LogDir::discard_stray`]).
    #[error("topic id {} on disk in {} differs from the metadata's {}", crate::checkpoint::topic_id_string(stored), path.display(), crate::checkpoint::topic_id_string(given))]
    TopicIdMismatch {
        path: PathBuf,
        stored: uuid::Uuid,
        given: uuid::Uuid,
    },
    /// A caller passed an argument the log cannot honour (e.g. a negative offset).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl LogError {
    pub(crate) fn io(op: &'static str, path: &Path, source: std::io::Error) -> Self {
        LogError::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }

    /// True for errors that mean the disk, not the request, failed.
    pub fn is_storage_error(&self) -> bool {
        matches!(
            self,
            LogError::Io { .. } | LogError::LogDirOffline(_) | LogError::CorruptFile { .. }
        )
    }

    /// The Kafka error code for this failure.
    pub fn kafka_code(&self) -> KafkaCode {
        match self {
            LogError::Io { .. }
            | LogError::LogDirOffline(_)
            | LogError::CorruptFile { .. }
            | LogError::TopicIdMismatch { .. } => KafkaCode::KafkaStorageError,
            LogError::Rejected(r) => r.code,
            LogError::Producer { code, .. } => *code,
            LogError::OffsetOutOfRange { .. } => KafkaCode::OffsetOutOfRange,
            LogError::InvalidArgument(_) => KafkaCode::InvalidRecord,
        }
    }
}

impl From<BatchRejection> for LogError {
    fn from(r: BatchRejection) -> Self {
        LogError::Rejected(r)
    }
}

pub type Result<T, E = LogError> = std::result::Result<T, E>;
