//! `dump-log`: renders segment files as Kafka's `kafka-dump-log.sh` (DumpLogSegments) does, so people who
//! know Kafka read them the same way. `.log` files list batches (and records with `print_data_log`, which
//! decodes keys and values as UTF-8); `.index` and `.timeindex` list their entries; `.snapshot` lists
//! producers.

use std::io::Write;
use std::path::Path;

use crate::batch::{self, RecordBatch};
use crate::index::{IndexEntry, OffsetEntry, TimeEntry};
use crate::producer_state;

/// Writes the dump of `path` to `out`.
pub fn dump_file(path: &Path, print_data_log: bool, out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "Dumping {}", path.display())?;
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let base_offset: i64 = name
        .split('.')
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let bytes = std::fs::read(path)?;
    match path.extension().and_then(|e| e.to_str()) {
        Some("log") => dump_log(&bytes, base_offset, print_data_log, path, out),
        Some("index") => dump_index::<OffsetEntry>(&bytes, out, |e| {
            format!(
                "offset: {} position: {}",
                base_offset + i64::from(e.relative_offset),
                e.position
            )
        }),
        Some("timeindex") => dump_index::<TimeEntry>(&bytes, out, |e| {
            format!(
                "timestamp: {} offset: {}",
                e.timestamp,
                base_offset + i64::from(e.relative_offset)
            )
        }),
        Some("snapshot") => dump_snapshot(&bytes, out),
        _ => writeln!(out, "Ignoring unknown file {}", path.display()),
    }
}

fn dump_index<E: IndexEntry>(
    bytes: &[u8],
    out: &mut dyn Write,
    line: impl Fn(&E) -> String,
) -> std::io::Result<()> {
    for chunk in bytes.chunks_exact(E::SIZE) {
        writeln!(out, "{}", line(&E::decode(chunk)))?;
    }
    if !bytes.len().is_multiple_of(E::SIZE) {
        writeln!(
            out,
            "Found {} trailing bytes that do not form an entry",
            bytes.len() % E::SIZE
        )?;
    }
    Ok(())
}

fn dump_snapshot(bytes: &[u8], out: &mut dyn Write) -> std::io::Result<()> {
    match producer_state::decode_snapshot(bytes) {
        None => writeln!(out, "The snapshot is corrupt (bad version, CRC or size)"),
        Some(entries) => {
            for e in entries {
                let last = e.batches.back();
                writeln!(
                    out,
                    "producerId: {} producerEpoch: {} coordinatorEpoch: {} currentTxnFirstOffset: {} lastTimestamp: {} firstSequence: {} lastSequence: {} lastOffset: {} offsetDelta: {} timestamp: {}",
                    e.producer_id,
                    e.epoch,
                    e.coordinator_epoch,
                    e.current_txn_first_offset.map_or("OptionalLong.empty".to_string(), |o| format!("OptionalLong[{o}]")),
                    e.last_timestamp,
                    last.map_or(-1, |b| b.first_seq),
                    last.map_or(-1, |b| b.last_seq),
                    last.map_or(-1, |b| b.last_offset),
                    last.map_or(0, |b| b.offset_delta),
                    last.map_or(-1, |b| b.timestamp),
                )?;
            }
            Ok(())
        }
    }
}

fn optional_long(value: Option<i64>) -> String {
    value.map_or("OptionalLong.empty".to_string(), |v| {
        format!("OptionalLong[{v}]")
    })
}

fn dump_log(
    bytes: &[u8],
    base_offset: i64,
    print_data_log: bool,
    path: &Path,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(out, "Log starting offset: {base_offset}")?;
    let mut position = 0usize;
    for batch in batch::batches(bytes) {
        let Ok(batch) = batch else { break };
        write_batch(&batch, position, out)?;
        if print_data_log {
            write_records(&batch, out)?;
        }
        position += batch.size();
    }
    if position < bytes.len() {
        writeln!(
            out,
            "Found {} invalid bytes at the end of {}",
            bytes.len() - position,
            path.display()
        )?;
    }
    Ok(())
}

fn write_batch(
    batch: &RecordBatch<'_>,
    position: usize,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    writeln!(
        out,
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} producerEpoch: {} partitionLeaderEpoch: {} isTransactional: {} isControl: {} deleteHorizonMs: {} position: {} {}: {} size: {} magic: {} compresscodec: {} crc: {} isvalid: {}",
        batch.base_offset(),
        batch.last_offset(),
        batch.records_count(),
        batch.base_sequence(),
        batch.last_sequence(),
        batch.producer_id(),
        batch.producer_epoch(),
        batch.partition_leader_epoch(),
        batch.is_transactional(),
        batch.is_control(),
        optional_long(batch.delete_horizon_ms()),
        position,
        batch.timestamp_type().name(),
        batch.max_timestamp(),
        batch.size(),
        batch.magic(),
        batch.compression().map_or("unknown", |c| c.name()),
        batch.crc(),
        batch.is_valid_crc(),
    )
}

fn write_records(batch: &RecordBatch<'_>, out: &mut dyn Write) -> std::io::Result<()> {
    let payload = match batch.decompressed_records() {
        Ok(payload) => payload,
        Err(e) => return writeln!(out, "| failed to decompress the records: {e}"),
    };
    for record in batch.records_in(&payload) {
        let record = match record {
            Ok(record) => record,
            Err(e) => return writeln!(out, "| invalid record: {e}"),
        };
        let sequence = if batch.base_sequence() < 0 {
            -1
        } else {
            batch::increment_sequence(batch.base_sequence(), record.offset_delta)
        };
        let headers: Vec<String> = record
            .headers
            .iter()
            .map(|h| String::from_utf8_lossy(h.key).into_owned())
            .collect();
        let mut line = format!(
            "| offset: {} {}: {} keySize: {} valueSize: {} sequence: {} headerKeys: [{}]",
            batch.base_offset() + i64::from(record.offset_delta),
            batch.timestamp_type().name(),
            batch.record_timestamp(&record),
            record.key.map_or(-1, |k| k.len() as i64),
            record.value.map_or(-1, |v| v.len() as i64),
            sequence,
            headers.join(","),
        );
        if batch.is_control() {
            line.push_str(&control_description(record.key, record.value));
        } else {
            if let Some(key) = record.key {
                line.push_str(&format!(" key: {}", String::from_utf8_lossy(key)));
            }
            // A null value prints no payload at all, as DumpLogSegments' parser gives None.
            if let Some(value) = record.value {
                line.push_str(&format!(" payload: {}", String::from_utf8_lossy(value)));
            }
        }
        writeln!(out, "{line}")?;
    }
    Ok(())
}

/// Control records: key = int16 version, int16 type; markers carry int16 version, int32 coordinator epoch.
fn control_description(key: Option<&[u8]>, value: Option<&[u8]>) -> String {
    let Some(key) = key.filter(|k| k.len() >= 4) else {
        return " controlType: invalid".to_string();
    };
    let type_id = i16::from_be_bytes([key[2], key[3]]);
    let name = match type_id {
        0 => "ABORT",
        1 => "COMMIT",
        2 => "LEADER_CHANGE",
        3 => "SNAPSHOT_HEADER",
        4 => "SNAPSHOT_FOOTER",
        5 => "KRAFT_VERSION",
        6 => "KRAFT_VOTERS",
        _ => "UNKNOWN",
    };
    match (type_id, value) {
        (0 | 1, Some(v)) if v.len() >= 6 => {
            format!(
                " endTxnMarker: {name} coordinatorEpoch: {}",
                i32::from_be_bytes([v[2], v[3], v[4], v[5]])
            )
        }
        _ => format!(" controlType: {name}({type_id})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{BatchBuilder, Header};
    use crate::compression::Compression;

    #[test]
    fn renders_like_kafka_dump_log() {
        let dir = tempfile::tempdir().unwrap();
        let mut b = BatchBuilder::new(Compression::Gzip);
        b.base_offset = 5;
        b.partition_leader_epoch = 2;
        b.producer_id = 9;
        b.producer_epoch = 0;
        b.base_sequence = 3;
        b.append(
            1000,
            Some(b"k1"),
            Some(b"hello"),
            &[Header {
                key: b"h",
                value: Some(b"1"),
            }],
        );
        b.append(1001, None, None, &[]);
        let mut bytes = b.build().unwrap();
        let crc = RecordBatch::new(&bytes).unwrap().crc();
        let size = bytes.len();
        bytes.extend_from_slice(&[0, 0, 0]);
        let path = dir.path().join("00000000000000000005.log");
        std::fs::write(&path, &bytes).unwrap();
        let mut out = Vec::new();
        dump_file(&path, true, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[1], "Log starting offset: 5");
        assert_eq!(
            lines[2],
            format!("baseOffset: 5 lastOffset: 6 count: 2 baseSequence: 3 lastSequence: 4 producerId: 9 producerEpoch: 0 partitionLeaderEpoch: 2 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1001 size: {size} magic: 2 compresscodec: gzip crc: {crc} isvalid: true")
        );
        assert_eq!(lines[3], "| offset: 5 CreateTime: 1000 keySize: 2 valueSize: 5 sequence: 3 headerKeys: [h] key: k1 payload: hello");
        assert_eq!(
            lines[4],
            "| offset: 6 CreateTime: 1001 keySize: -1 valueSize: -1 sequence: 4 headerKeys: []"
        );
        assert!(lines[5].starts_with("Found 3 invalid bytes at the end of"));

        let index = dir.path().join("00000000000000000005.index");
        std::fs::write(&index, [0, 0, 0, 2, 0, 0, 1, 0]).unwrap();
        let mut out = Vec::new();
        dump_file(&index, false, &mut out).unwrap();
        assert!(String::from_utf8(out)
            .unwrap()
            .ends_with("offset: 7 position: 256\n"));
    }
}
