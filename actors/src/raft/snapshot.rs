//! The snapshot file: the image as records, with the raft position it was taken at.
//!
//! There is one file, `raft-snapshot.bin` in the metadata log dir, holding the latest snapshot.
//! A new snapshot is written to `raft-snapshot.bin.tmp`, fsynced, renamed over the old one and
//! the directory fsynced, so a crash leaves either the old or the new snapshot, never a mix.
//!
//! Layout (integers little-endian):
//!
//! | bytes | field                                                      |
//! |-------|------------------------------------------------------------|
//! | 8     | magic `GREGSNAP`                                           |
//! | 4     | format version (1)                                         |
//! | 8     | body length                                                |
//! | 4     | CRC-32C of the body                                        |
//! | n     | body: postcard of `{ meta: SnapshotMeta, data: Vec<u8> }`  |
//!
//! `data` is the snapshot as openraft ships it: the postcard encoding of `Vec<MetadataRecord>`,
//! each record a versioned [`RecordFrame`](gregor_publishers::records::RecordFrame).

use std::io::Write;
use std::path::{Path, PathBuf};

use gregor_publishers::records::MetadataRecord;
use openraft::SnapshotMeta;
use serde::{Deserialize, Serialize};

use super::error::MetadataLogError;
use super::types::VoterNode;

/// Name of the snapshot file inside the metadata log dir.
pub const SNAPSHOT_FILE_NAME: &str = "raft-snapshot.bin";
const TMP_SUFFIX: &str = ".tmp";
const MAGIC: &[u8; 8] = b"GREGSNAP";
const FORMAT_VERSION: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 8 + 4;

/// A snapshot as stored: its raft metadata and its data bytes.
pub(crate) struct StoredSnapshot {
    pub(crate) meta: SnapshotMeta<u64, VoterNode>,
    pub(crate) data: Vec<u8>,
}

#[derive(Serialize, Deserialize)]
struct Body {
    meta: SnapshotMeta<u64, VoterNode>,
    data: Vec<u8>,
}

/// Path of the snapshot file in `dir`.
pub(crate) fn snapshot_path(dir: &Path) -> PathBuf {
    dir.join(SNAPSHOT_FILE_NAME)
}

fn tmp_path(dir: &Path) -> PathBuf {
    dir.join(format!("{SNAPSHOT_FILE_NAME}{TMP_SUFFIX}"))
}

/// Encodes image records as snapshot data.
pub(crate) fn encode_records(records: &[MetadataRecord]) -> Vec<u8> {
    // Records serialize as frames of plain data: postcard cannot fail on them.
    postcard::to_allocvec(records).unwrap_or_default()
}

/// Decodes snapshot data; `source` names where it came from for the error.
pub(crate) fn decode_records(
    source: &Path,
    data: &[u8],
) -> Result<Vec<MetadataRecord>, MetadataLogError> {
    postcard::from_bytes(data).map_err(|e| {
        MetadataLogError::corrupt(source, format!("snapshot records do not decode: {e}"))
    })
}

/// Writes the snapshot durably, replacing the previous one (blocking).
pub(crate) fn write(dir: &Path, snapshot: &StoredSnapshot) -> Result<(), MetadataLogError> {
    let body = postcard::to_allocvec(&Body {
        meta: snapshot.meta.clone(),
        data: snapshot.data.clone(),
    })
    .map_err(|e| {
        MetadataLogError::storage(snapshot_path(dir), format!("cannot encode snapshot: {e}"))
    })?;
    let mut bytes = Vec::with_capacity(HEADER_LEN + body.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&(body.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    bytes.extend_from_slice(&body);

    let tmp = tmp_path(dir);
    let io = |path: &Path, what: &str, e: std::io::Error| {
        MetadataLogError::storage(path, format!("{what}: {e}"))
    };
    let mut file = std::fs::File::create(&tmp).map_err(|e| io(&tmp, "cannot create", e))?;
    file.write_all(&bytes)
        .map_err(|e| io(&tmp, "cannot write", e))?;
    file.sync_all().map_err(|e| io(&tmp, "cannot fsync", e))?;
    drop(file);
    let path = snapshot_path(dir);
    std::fs::rename(&tmp, &path)
        .map_err(|e| io(&path, "cannot rename the new snapshot into place", e))?;
    sync_dir(dir)
}

/// Reads the snapshot in `dir`, if there is one (blocking). A leftover temporary file from an
/// interrupted write is removed: the snapshot it was meant to become was never acknowledged.
pub(crate) fn read(dir: &Path) -> Result<Option<StoredSnapshot>, MetadataLogError> {
    let tmp = tmp_path(dir);
    match std::fs::remove_file(&tmp) {
        Ok(()) => tracing::warn!(path = %tmp.display(), "removed an unfinished snapshot"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(MetadataLogError::storage(
                &tmp,
                format!("cannot remove: {e}"),
            ))
        }
    }
    let path = snapshot_path(dir);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(MetadataLogError::storage(
                &path,
                format!("cannot read: {e}"),
            ))
        }
    };
    parse(&path, &bytes).map(Some)
}

fn parse(path: &Path, bytes: &[u8]) -> Result<StoredSnapshot, MetadataLogError> {
    let corrupt = |detail: String| MetadataLogError::corrupt(path, detail);
    let (header, body) = bytes.split_at_checked(HEADER_LEN).ok_or_else(|| {
        corrupt(format!(
            "file is {} bytes, shorter than the header",
            bytes.len()
        ))
    })?;
    let (magic, rest) = header.split_at(8);
    if magic != MAGIC {
        return Err(corrupt("not a Gregor snapshot file (bad magic)".into()));
    }
    let (version, rest) = rest.split_at(4);
    let (len, crc) = rest.split_at(8);
    let version = u32::from_le_bytes(version.try_into().unwrap_or_default());
    let len = u64::from_le_bytes(len.try_into().unwrap_or_default());
    let crc = u32::from_le_bytes(crc.try_into().unwrap_or_default());
    if version != FORMAT_VERSION {
        return Err(corrupt(format!(
            "snapshot format version {version} is not supported by this build (supports {FORMAT_VERSION})"
        )));
    }
    if body.len() as u64 != len {
        return Err(corrupt(format!(
            "body is {} bytes but the header says {len} (truncated write?)",
            body.len()
        )));
    }
    if crc32c::crc32c(body) != crc {
        return Err(corrupt("checksum mismatch".into()));
    }
    let body: Body =
        postcard::from_bytes(body).map_err(|e| corrupt(format!("body does not decode: {e}")))?;
    Ok(StoredSnapshot {
        meta: body.meta,
        data: body.data,
    })
}

fn sync_dir(dir: &Path) -> Result<(), MetadataLogError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| MetadataLogError::storage(dir, format!("cannot fsync the directory: {e}")))
}
