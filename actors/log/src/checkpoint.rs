//! Kafka's small text files: offset checkpoints (`recovery-point-offset-checkpoint`,
//! `log-start-offset-checkpoint`, `cleaner-offset-checkpoint`), `leader-epoch-checkpoint` and
//! `partition.metadata`. All are written to `<name>.tmp`, fsynced and renamed over the old file, as
//! Kafka's `CheckpointFile` does, so a crash leaves either the old or the new content.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::path::{Path, PathBuf};

use base64::Engine as _;

use crate::error::{LogError, Result};

pub const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub const CLEANER_OFFSET_CHECKPOINT: &str = "cleaner-offset-checkpoint";
/// The high watermark of each replica in the dir (Kafka's `ReplicaManager` checkpoint, written
/// every `replica.high.watermark.checkpoint.interval.ms` and at a clean shutdown).
pub const REPLICATION_OFFSET_CHECKPOINT: &str = "replication-offset-checkpoint";
pub const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";
pub const PARTITION_METADATA: &str = "partition.metadata";

/// A topic and partition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> Self {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    /// The partition's directory name, `<topic>-<partition>`.
    pub fn dir_name(&self) -> String {
        format!("{}-{}", self.topic, self.partition)
    }

    /// Parses a directory name; the partition is after the last '-'.
    pub fn from_dir_name(name: &str) -> Option<Self> {
        let (topic, partition) = name.rsplit_once('-')?;
        if topic.is_empty() {
            return None;
        }
        Some(TopicPartition {
            topic: topic.to_string(),
            partition: partition.parse().ok()?,
        })
    }
}

/// Writes `contents` to `path` atomically and durably.
pub fn write_atomically(path: &Path, contents: &[u8]) -> Result<()> {
    write_replacing(path, contents, true)
}

/// Writes `contents` to `path` through a renamed temporary file; `durable` adds the fsyncs (without
/// them a crash may leave the old content, never a torn one).
pub fn write_replacing(path: &Path, contents: &[u8], durable: bool) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let write = || -> std::io::Result<()> {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(contents)?;
        if durable {
            file.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        if let (true, Some(dir)) = (durable, path.parent()) {
            std::fs::File::open(dir)?.sync_all()?;
        }
        Ok(())
    };
    write().map_err(|e| LogError::io("write checkpoint", path, e))
}

fn corrupt(path: &Path, message: impl Into<String>) -> LogError {
    LogError::CorruptFile {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Reads a checkpoint of the shape `version 0`, `count`, then `count` lines of `fields` fields.
fn read_lines(path: &Path, fields: usize) -> Result<Option<Vec<Vec<String>>>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io("read checkpoint", path, e)),
    };
    let mut lines = text.lines();
    match lines.next().map(str::trim) {
        Some("0") => {}
        other => {
            return Err(corrupt(
                path,
                format!("unsupported checkpoint version {other:?}"),
            ))
        }
    }
    let count: usize = lines
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| corrupt(path, "missing entry count"))?;
    let mut out = Vec::with_capacity(count.min(1 << 20));
    for _ in 0..count {
        let line = lines
            .next()
            .ok_or_else(|| corrupt(path, "fewer entries than its count"))?;
        let parts: Vec<String> = line.split(' ').map(str::to_string).collect();
        if parts.len() != fields {
            return Err(corrupt(path, format!("malformed line '{line}'")));
        }
        out.push(parts);
    }
    Ok(Some(out))
}

/// Reads an offset checkpoint (`<topic> <partition> <offset>` lines); a missing file is empty.
pub fn read_offsets(path: &Path) -> Result<BTreeMap<TopicPartition, i64>> {
    let mut out = BTreeMap::new();
    for parts in read_lines(path, 3)?.unwrap_or_default() {
        let partition = parts[1]
            .parse()
            .map_err(|_| corrupt(path, "bad partition"))?;
        let offset = parts[2].parse().map_err(|_| corrupt(path, "bad offset"))?;
        out.insert(
            TopicPartition {
                topic: parts[0].clone(),
                partition,
            },
            offset,
        );
    }
    Ok(out)
}

/// Writes an offset checkpoint.
pub fn write_offsets(path: &Path, offsets: &BTreeMap<TopicPartition, i64>) -> Result<()> {
    let mut text = format!("0\n{}\n", offsets.len());
    for (tp, offset) in offsets {
        // Writing into a String cannot fail.
        let _ = writeln!(text, "{} {} {}", tp.topic, tp.partition, offset);
    }
    write_atomically(path, text.as_bytes())
}

/// Reads `leader-epoch-checkpoint` (`<epoch> <start offset>` lines).
pub fn read_epochs(path: &Path) -> Result<Vec<(i32, i64)>> {
    let mut out = Vec::new();
    for parts in read_lines(path, 2)?.unwrap_or_default() {
        let epoch = parts[0].parse().map_err(|_| corrupt(path, "bad epoch"))?;
        let offset = parts[1].parse().map_err(|_| corrupt(path, "bad offset"))?;
        out.push((epoch, offset));
    }
    Ok(out)
}

pub fn write_epochs(path: &Path, epochs: &[(i32, i64)], durable: bool) -> Result<()> {
    let mut text = format!("0\n{}\n", epochs.len());
    for (epoch, offset) in epochs {
        text.push_str(&format!("{epoch} {offset}\n"));
    }
    write_replacing(path, text.as_bytes(), durable)
}

/// Kafka's text form of a topic id: URL-safe base64 of the 16 bytes, without padding.
pub fn topic_id_string(id: &uuid::Uuid) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(id.as_bytes())
}

pub fn parse_topic_id(text: &str) -> Option<uuid::Uuid> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim())
        .ok()?;
    uuid::Uuid::from_slice(&bytes).ok()
}

/// Writes `partition.metadata`: `version: 0` and `topic_id: <id>`. Without fsync: the file is rewritten
/// from the metadata image whenever it is missing, and creating 100,000 partitions must not cost
/// 200,000 fsyncs.
pub fn write_partition_metadata(dir: &Path, topic_id: &uuid::Uuid) -> Result<()> {
    let text = format!("version: 0\ntopic_id: {}\n", topic_id_string(topic_id));
    write_replacing(&dir.join(PARTITION_METADATA), text.as_bytes(), false)
}

/// Reads `partition.metadata`; None when absent.
pub fn read_partition_metadata(dir: &Path) -> Result<Option<uuid::Uuid>> {
    let path = dir.join(PARTITION_METADATA);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io("read", &path, e)),
    };
    let mut version = None;
    let mut topic_id = None;
    for line in text.lines() {
        match line.split_once(':') {
            Some(("version", v)) => version = Some(v.trim().to_string()),
            Some(("topic_id", v)) => {
                topic_id = Some(parse_topic_id(v).ok_or_else(|| corrupt(&path, "bad topic id"))?)
            }
            _ => return Err(corrupt(&path, format!("malformed line '{line}'"))),
        }
    }
    if version.as_deref() != Some("0") {
        return Err(corrupt(&path, "unsupported version"));
    }
    topic_id
        .map(Some)
        .ok_or_else(|| corrupt(&path, "no topic_id"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_checkpoint_is_kafkas_text() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(RECOVERY_POINT_CHECKPOINT);
        let mut offsets = BTreeMap::new();
        offsets.insert(TopicPartition::new("orders", 0), 42);
        offsets.insert(TopicPartition::new("my-topic", 11), 7);
        write_offsets(&path, &offsets).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "0\n2\nmy-topic 11 7\norders 0 42\n"
        );
        assert_eq!(read_offsets(&path).unwrap(), offsets);
        assert!(read_offsets(&dir.path().join("missing"))
            .unwrap()
            .is_empty());
        std::fs::write(&path, "0\n3\nx 0 1\n").unwrap();
        assert!(matches!(
            read_offsets(&path),
            Err(LogError::CorruptFile { .. })
        ));
    }

    #[test]
    fn partition_metadata_and_epochs() {
        let dir = tempfile::tempdir().unwrap();
        let id = uuid::Uuid::from_bytes([
            0x4b, 0x6a, 0x3c, 0x1d, 0x6d, 0x3f, 0x4e, 0x2a, 0x9e, 0x8f, 0x12, 0x34, 0x56, 0x78,
            0x9a, 0xbc,
        ]);
        write_partition_metadata(dir.path(), &id).unwrap();
        let text = std::fs::read_to_string(dir.path().join(PARTITION_METADATA)).unwrap();
        assert_eq!(text, "version: 0\ntopic_id: S2o8HW0_TiqejxI0VniavA\n");
        assert_eq!(read_partition_metadata(dir.path()).unwrap(), Some(id));
        let path = dir.path().join(LEADER_EPOCH_CHECKPOINT);
        write_epochs(&path, &[(0, 0), (3, 120)], true).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "0\n2\n0 0\n3 120\n"
        );
        assert_eq!(read_epochs(&path).unwrap(), vec![(0, 0), (3, 120)]);
        assert_eq!(
            TopicPartition::from_dir_name("my-topic-11"),
            Some(TopicPartition::new("my-topic", 11))
        );
    }
}
