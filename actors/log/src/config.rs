//! Per-log configuration: the topic keys of data-plane reference §6.4 with Kafka 4.1's defaults.

use crate::batch::TimestampType;
use crate::compression::{Compression, CompressionLevels};

/// `compression.type` of a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopicCompression {
    /// Keep the producer's codec (the default).
    Producer,
    /// Store with this codec, rebuilding batches that use another.
    Codec(Compression),
}

/// Configuration one partition log follows; the caller rebuilds it when topic or broker configs change.
#[derive(Debug, Clone, PartialEq)]
pub struct LogConfig {
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub segment_jitter_ms: i64,
    pub segment_index_bytes: u64,
    pub index_interval_bytes: u64,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub cleanup_delete: bool,
    pub cleanup_compact: bool,
    pub delete_retention_ms: i64,
    pub min_compaction_lag_ms: i64,
    pub max_compaction_lag_ms: i64,
    pub min_cleanable_dirty_ratio: f64,
    pub flush_messages: i64,
    pub flush_ms: i64,
    pub file_delete_delay_ms: i64,
    pub max_message_bytes: u64,
    pub timestamp_type: TimestampType,
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
    pub compression: TopicCompression,
    pub compression_levels: CompressionLevels,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1_073_741_824,
            segment_ms: 604_800_000,
            segment_jitter_ms: 0,
            segment_index_bytes: 10_485_760,
            index_interval_bytes: 4096,
            retention_ms: 604_800_000,
            retention_bytes: -1,
            cleanup_delete: true,
            cleanup_compact: false,
            delete_retention_ms: 86_400_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            file_delete_delay_ms: 60_000,
            max_message_bytes: 1_048_588,
            timestamp_type: TimestampType::CreateTime,
            timestamp_before_max_ms: i64::MAX,
            timestamp_after_max_ms: 3_600_000,
            compression: TopicCompression::Producer,
            compression_levels: CompressionLevels::default(),
        }
    }
}

impl LogConfig {
    /// Applies one topic config (Kafka's topic key and string value); unknown keys are ignored because
    /// topic configs also carry keys this layer does not use (e.g. `min.insync.replicas`).
    pub fn apply(&mut self, key: &str, value: &str) -> Result<(), String> {
        let int = || {
            value
                .trim()
                .parse::<i64>()
                .map_err(|_| format!("{key}: '{value}' is not a number"))
        };
        let non_negative =
            || int().and_then(|v| u64::try_from(v).map_err(|_| format!("{key}: must be >= 0")));
        match key {
            "segment.bytes" => self.segment_bytes = non_negative()?.max(1),
            "segment.ms" => self.segment_ms = int()?,
            "segment.jitter.ms" => self.segment_jitter_ms = int()?,
            "segment.index.bytes" => self.segment_index_bytes = non_negative()?,
            "index.interval.bytes" => self.index_interval_bytes = non_negative()?,
            "retention.ms" => self.retention_ms = int()?,
            "retention.bytes" => self.retention_bytes = int()?,
            "cleanup.policy" => {
                let policies: Vec<&str> = value
                    .split(',')
                    .map(str::trim)
                    .filter(|p| !p.is_empty())
                    .collect();
                if let Some(bad) = policies
                    .iter()
                    .find(|p| !matches!(**p, "delete" | "compact"))
                {
                    return Err(format!("cleanup.policy: unknown policy '{bad}'"));
                }
                self.cleanup_delete = policies.contains(&"delete");
                self.cleanup_compact = policies.contains(&"compact");
            }
            "delete.retention.ms" => self.delete_retention_ms = int()?,
            "min.compaction.lag.ms" => self.min_compaction_lag_ms = int()?,
            "max.compaction.lag.ms" => self.max_compaction_lag_ms = int()?,
            "min.cleanable.dirty.ratio" => {
                self.min_cleanable_dirty_ratio = value
                    .trim()
                    .parse::<f64>()
                    .map_err(|_| format!("{key}: '{value}' is not a number"))?
            }
            "flush.messages" => self.flush_messages = int()?,
            "flush.ms" => self.flush_ms = int()?,
            "file.delete.delay.ms" => self.file_delete_delay_ms = int()?,
            "max.message.bytes" => self.max_message_bytes = non_negative()?,
            "message.timestamp.type" => {
                self.timestamp_type = match value {
                    "CreateTime" => TimestampType::CreateTime,
                    "LogAppendTime" => TimestampType::LogAppendTime,
                    _ => {
                        return Err(format!(
                            "{key}: '{value}' is neither CreateTime nor LogAppendTime"
                        ))
                    }
                }
            }
            "message.timestamp.before.max.ms" => self.timestamp_before_max_ms = int()?,
            "message.timestamp.after.max.ms" => self.timestamp_after_max_ms = int()?,
            "compression.type" => {
                self.compression = match value {
                    "producer" => TopicCompression::Producer,
                    "uncompressed" => TopicCompression::Codec(Compression::None),
                    "gzip" => TopicCompression::Codec(Compression::Gzip),
                    "snappy" => TopicCompression::Codec(Compression::Snappy),
                    "lz4" => TopicCompression::Codec(Compression::Lz4),
                    "zstd" => TopicCompression::Codec(Compression::Zstd),
                    _ => return Err(format!("{key}: unknown compression type '{value}'")),
                }
            }
            "compression.gzip.level" => self.compression_levels.gzip = int()? as i32,
            "compression.lz4.level" => self.compression_levels.lz4 = int()? as i32,
            "compression.zstd.level" => self.compression_levels.zstd = int()? as i32,
            _ => {}
        }
        Ok(())
    }

    /// Entries an offset index sized `index_bytes` (`segment.index.bytes`) may hold before its
    /// segment must roll.
    pub fn max_index_entries_for(index_bytes: u64) -> u64 {
        (index_bytes / 8).max(1)
    }

    /// Entries a time index sized `index_bytes` may hold before its segment must roll.
    pub fn max_time_index_entries_for(index_bytes: u64) -> u64 {
        (index_bytes / 12).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_keys_apply() {
        let mut c = LogConfig::default();
        c.apply("cleanup.policy", "compact,delete").unwrap();
        assert!(c.cleanup_compact && c.cleanup_delete);
        c.apply("cleanup.policy", "compact").unwrap();
        assert!(c.cleanup_compact && !c.cleanup_delete);
        c.apply("compression.type", "zstd").unwrap();
        assert_eq!(c.compression, TopicCompression::Codec(Compression::Zstd));
        c.apply("message.timestamp.type", "LogAppendTime").unwrap();
        assert_eq!(c.timestamp_type, TimestampType::LogAppendTime);
        assert!(c.apply("segment.bytes", "-5").is_err());
        assert!(c.apply("cleanup.policy", "shred").is_err());
        c.apply("max.compaction.lag.ms", "60000").unwrap();
        assert_eq!(c.max_compaction_lag_ms, 60_000);
        c.apply("min.insync.replicas", "2").unwrap();
    }
}
