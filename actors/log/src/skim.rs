//! A produced batch's records read as a stream for validation, keys, values and headers skipped
//! (Kafka's `skipKeyValueIterator`): validating a compressed batch that is stored as it came
//! needs each record's offset delta, timestamp delta and whether it has a key, so memory stays
//! a small buffer whatever the batch decompresses to. A batch that is rebuilt (recompressed, or
//! with offset deltas out of order) is decompressed whole afterwards, as it must be rewritten.

use std::borrow::Cow;
use std::io::Read;

use crate::compression::{self, Compression, MAX_DECOMPRESSED_BYTES};

/// What validation reads of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SkimmedRecord {
    pub offset_delta: i32,
    pub timestamp_delta: i64,
    pub has_key: bool,
}

/// Why a skim stopped.
#[derive(Debug)]
pub enum SkimError {
    /// The compressed data could not be decompressed (Kafka's CORRUPT_MESSAGE).
    Decompress(std::io::Error),
    /// The records are malformed (INVALID_RECORD), in the words of the batch parser.
    Record(String),
}

/// The records of a batch's records section, `count` of them, read from `codec`'s stream.
pub struct RecordSkimmer<'a> {
    reader: Box<dyn Read + 'a>,
    /// The section itself when it is not compressed (read in place, nothing copied), else a
    /// buffer the decompressor fills.
    buffer: Cow<'a, [u8]>,
    start: usize,
    end: usize,
    /// Decompressed bytes read so far, bounded by [`MAX_DECOMPRESSED_BYTES`].
    consumed: usize,
    remaining: i32,
}

const BUFFER: usize = 64 * 1024;

impl<'a> RecordSkimmer<'a> {
    pub fn new(codec: Compression, section: &'a [u8], count: i32) -> Result<Self, SkimError> {
        let (reader, buffer, end): (Box<dyn Read + 'a>, _, _) = match codec {
            Compression::None => (
                Box::new(std::io::empty()),
                Cow::Borrowed(section),
                section.len(),
            ),
            codec => (
                compression::reader(codec, section).map_err(SkimError::Decompress)?,
                Cow::Owned(vec![0; BUFFER]),
                0,
            ),
        };
        Ok(RecordSkimmer {
            reader,
            buffer,
            start: 0,
            end,
            consumed: 0,
            remaining: count.max(0),
        })
    }

    /// The next record; `None` after the last, once the stream is checked to end there.
    pub fn next_record(&mut self) -> Result<Option<SkimmedRecord>, SkimError> {
        if self.remaining == 0 {
            let left = self.drain()?;
            if left > 0 {
                return Err(SkimError::Record(format!(
                    "incorrect declared batch size: {left} bytes remain after the last record"
                )));
            }
            return Ok(None);
        }
        self.remaining -= 1;
        let length = self.varint()?;
        if length < 0 {
            return Err(SkimError::Record(format!("invalid record size {length}")));
        }
        let mut body = RecordBody {
            skimmer: self,
            left: length as usize,
        };
        body.bytes_skipped(1)?;
        let timestamp_delta = body.varlong()?;
        let offset_delta = body.varint()?;
        let has_key = body.nullable_skipped()?;
        body.nullable_skipped()?;
        let headers = body.varint()?;
        if headers < 0 {
            return Err(SkimError::Record(format!(
                "invalid negative header count {headers}"
            )));
        }
        // Each header takes at least two bytes.
        if headers as usize > body.left / 2 {
            return Err(SkimError::Record(format!(
                "header count {headers} does not fit in the record"
            )));
        }
        for _ in 0..headers {
            match body.varint()? {
                n if n < 0 => {
                    return Err(SkimError::Record(format!(
                        "invalid negative header key size {n}"
                    )))
                }
                n => body.bytes_skipped(n as usize)?,
            }
            body.nullable_skipped()?;
        }
        if body.left != 0 {
            // As the batch parser, which takes the whole declared record first: a record cut
            // by the end of the stream is a premature end.
            let unread = body.left;
            body.bytes_skipped(unread)?;
            return Err(SkimError::Record(format!(
                "invalid record size: expected to read {length} bytes in the record payload, read {}",
                length as usize - unread
            )));
        }
        Ok(Some(SkimmedRecord {
            offset_delta,
            timestamp_delta,
            has_key,
        }))
    }

    /// One byte of the stream; `None` at its end.
    fn byte(&mut self) -> Result<Option<u8>, SkimError> {
        if self.start == self.end && !self.fill()? {
            return Ok(None);
        }
        let byte = self.buffer[self.start];
        self.start += 1;
        Ok(Some(byte))
    }

    /// Refills the buffer; false at the end of the stream.
    fn fill(&mut self) -> Result<bool, SkimError> {
        // An uncompressed section is all in the buffer already.
        let Cow::Owned(buffer) = &mut self.buffer else {
            return Ok(false);
        };
        loop {
            match self.reader.read(buffer) {
                Ok(0) => return Ok(false),
                Ok(read) => {
                    self.consumed += read;
                    if self.consumed > MAX_DECOMPRESSED_BYTES {
                        return Err(SkimError::Decompress(compression::past_limit()));
                    }
                    self.start = 0;
                    self.end = read;
                    return Ok(true);
                }
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
                Err(error) => return Err(SkimError::Decompress(error)),
            }
        }
    }

    /// Skips `count` bytes; false when the stream ends first.
    fn skip(&mut self, mut count: usize) -> Result<bool, SkimError> {
        while count > 0 {
            if self.start == self.end && !self.fill()? {
                return Ok(false);
            }
            let step = count.min(self.end - self.start);
            self.start += step;
            count -= step;
        }
        Ok(true)
    }

    /// How many bytes are left in the stream (read to its end, within the limit).
    fn drain(&mut self) -> Result<usize, SkimError> {
        let mut left = self.end - self.start;
        self.start = self.end;
        while self.fill()? {
            left += self.end;
            self.start = self.end;
        }
        Ok(left)
    }

    /// A zig-zag varint outside a record (its length), as the batch parser reads it.
    fn varint(&mut self) -> Result<i32, SkimError> {
        let raw = self.unsigned(5, None)?;
        let raw = u32::try_from(raw).map_err(|_| SkimError::Record(STRUCTURE.to_owned()))?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    /// An unsigned varint of at most `max_bytes`; each byte read counts against `left`.
    fn unsigned(
        &mut self,
        max_bytes: usize,
        mut left: Option<&mut usize>,
    ) -> Result<u64, SkimError> {
        let mut value = 0u64;
        for i in 0..max_bytes {
            if let Some(left) = left.as_deref_mut() {
                if *left == 0 {
                    return Err(SkimError::Record(STRUCTURE.to_owned()));
                }
                *left -= 1;
            }
            let Some(byte) = self.byte()? else {
                return Err(SkimError::Record(if left.is_some() {
                    PREMATURE_END.to_owned()
                } else {
                    "invalid record structure: bad length varint".to_owned()
                }));
            };
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(SkimError::Record(STRUCTURE.to_owned()))
    }
}

const STRUCTURE: &str = "invalid record structure";
const PREMATURE_END: &str = "incorrect declared batch size, premature end of records";

/// The rest of one record: what is read of it counts against its declared length.
struct RecordBody<'s, 'a> {
    skimmer: &'s mut RecordSkimmer<'a>,
    left: usize,
}

impl RecordBody<'_, '_> {
    fn varint(&mut self) -> Result<i32, SkimError> {
        let raw = self.skimmer.unsigned(5, Some(&mut self.left))?;
        let raw = u32::try_from(raw).map_err(|_| SkimError::Record(STRUCTURE.to_owned()))?;
        Ok(((raw >> 1) as i32) ^ -((raw & 1) as i32))
    }

    fn varlong(&mut self) -> Result<i64, SkimError> {
        let raw = self.skimmer.unsigned(10, Some(&mut self.left))?;
        Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64))
    }

    fn bytes_skipped(&mut self, count: usize) -> Result<(), SkimError> {
        if count > self.left {
            return Err(SkimError::Record(STRUCTURE.to_owned()));
        }
        self.left -= count;
        if self.skimmer.skip(count)? {
            Ok(())
        } else {
            Err(SkimError::Record(PREMATURE_END.to_owned()))
        }
    }

    /// A varint length and that many bytes skipped; whether it was not null.
    fn nullable_skipped(&mut self) -> Result<bool, SkimError> {
        match self.varint()? {
            // Kafka reads every negative length as null, not only −1.
            n if n < 0 => Ok(false),
            n => self.bytes_skipped(n as usize).map(|()| true),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::batch::{BatchBuilder, RecordBatch, RECORD_BATCH_OVERHEAD};

    fn skim_all(codec: Compression, batch: &[u8]) -> Result<Vec<SkimmedRecord>, SkimError> {
        let parsed = RecordBatch::new(batch).unwrap();
        let mut skimmer = RecordSkimmer::new(
            codec,
            &batch[RECORD_BATCH_OVERHEAD..],
            parsed.records_count(),
        )?;
        let mut out = Vec::new();
        while let Some(record) = skimmer.next_record()? {
            out.push(record);
        }
        Ok(out)
    }

    #[test]
    fn every_codec_skims_what_the_parser_reads() {
        for codec in Compression::ALL {
            let mut builder = BatchBuilder::new(codec);
            let big = vec![7u8; 200_000];
            builder.append(1_000, Some(b"k"), Some(&big), &[]);
            builder.append(1_005, None, Some(b"v"), &[]);
            let header = crate::batch::Header {
                key: b"h",
                value: Some(b"x"),
            };
            builder.append(990, Some(b""), None, &[header, header]);
            let batch = builder.build().unwrap();
            let parsed = RecordBatch::new(&batch).unwrap();
            let payload = parsed.decompressed_records().unwrap();
            let expected: Vec<SkimmedRecord> = parsed
                .records_in(&payload)
                .map(|r| {
                    let r = r.unwrap();
                    SkimmedRecord {
                        offset_delta: r.offset_delta,
                        timestamp_delta: r.timestamp_delta,
                        has_key: r.key.is_some(),
                    }
                })
                .collect();
            assert_eq!(expected.len(), 3);
            assert_eq!(skim_all(codec, &batch).unwrap(), expected, "{codec:?}");
        }
    }

    #[test]
    fn malformed_records_are_refused_as_the_parser_refuses_them() {
        let mut builder = BatchBuilder::new(Compression::None);
        builder.append(0, Some(b"key"), Some(b"value"), &[]);
        let batch = builder.build().unwrap();
        let section = &batch[RECORD_BATCH_OVERHEAD..];
        let refused = |section: &[u8], count: i32| {
            let mut skimmer = RecordSkimmer::new(Compression::None, section, count).unwrap();
            loop {
                match skimmer.next_record() {
                    Ok(Some(_)) => continue,
                    Ok(None) => return None,
                    Err(SkimError::Record(message)) => return Some(message),
                    Err(SkimError::Decompress(error)) => panic!("{error}"),
                }
            }
        };
        assert_eq!(refused(section, 1), None);
        // A count that lies either way, a cut record, trailing bytes.
        assert_eq!(
            refused(section, 2).as_deref(),
            Some("invalid record structure: bad length varint")
        );
        assert_eq!(
            refused(section, 0).as_deref(),
            Some(
                format!(
                    "incorrect declared batch size: {} bytes remain after the last record",
                    section.len()
                )
                .as_str()
            )
        );
        assert_eq!(
            refused(&section[..section.len() - 2], 1).as_deref(),
            Some(PREMATURE_END)
        );
        let mut trailing = section.to_vec();
        trailing.push(0);
        assert_eq!(
            refused(&trailing, 1).as_deref(),
            Some("incorrect declared batch size: 1 bytes remain after the last record")
        );
    }

    #[test]
    fn a_compression_bomb_is_read_in_a_small_buffer_and_refused_past_the_limit() {
        // One record whose value is 300 MiB of zeros: a few hundred KB compressed.
        let mut record = Vec::new();
        let value_len = 300usize << 20;
        let mut body = vec![0u8, 0, 0, 1];
        crate::varint::write_varint(&mut body, value_len as i32);
        let mut tail = Vec::new();
        crate::varint::write_varint(&mut tail, 0);
        crate::varint::write_varint(&mut record, (body.len() + value_len + tail.len()) as i32);
        record.extend_from_slice(&body);
        let mut raw = record;
        raw.resize(raw.len() + value_len, 0);
        raw.extend_from_slice(&tail);
        let compressed = zstd::stream::encode_all(&raw[..], 3).unwrap();
        drop(raw);
        let mut skimmer = RecordSkimmer::new(Compression::Zstd, &compressed, 1).unwrap();
        match skimmer.next_record() {
            Err(SkimError::Decompress(error)) => {
                assert_eq!(
                    error.to_string(),
                    "decompressed batch exceeds the broker's limit"
                );
                assert!(compression::is_past_limit(&error));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(skimmer.buffer.len(), BUFFER);
    }
}
