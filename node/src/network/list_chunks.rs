//! Requests listing many group ids whose answer to each id is its own (DescribeGroups,
//! ConsumerGroupDescribe), served a chunk of ids at a time.
//!
//! A four-letter group id is five bytes on the wire, but a decoded id, a described group and
//! its encoded answer of about 20 bytes: a frame of distinct ids cost 60 times its size, and
//! `repeated.rs` reduces only repeats. Here each chunk of [`CHUNK`] ids is sent through the
//! usual path as a request of its own (the same header and fields around a shorter list), and
//! its answers are kept zstd-compressed (an unknown group's answer repeats all but its id) until
//! the last chunk is done, when the answer's size is known: it is written from them, one chunk
//! decompressed at a time. This holds only because each id's answer depends on nothing but the
//! id (not on the other ids, nor on whether it repeats).

use anyhow::Context;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{consumer_group_describe_response, describe_groups_response};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::Decodable;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::dedup_decode::array_length;
use super::repeated::{put_array_length, skip_string};

/// Ids per chunk; a request listing no more is served whole.
pub const CHUNK: usize = 1024;

/// Whether `key` at `version` lists group ids whose answers are each their own, in order,
/// after `ThrottleTimeMs`.
fn chunked_api(key: ApiKey, version: i16) -> bool {
    matches!(
        (key, version),
        (ApiKey::DescribeGroups, 1..=6) | (ApiKey::ConsumerGroupDescribe, 0..=1)
    )
}

fn flexible(key: ApiKey, version: i16) -> bool {
    key == ApiKey::ConsumerGroupDescribe || version >= 5
}

/// A request whose list of ids stays in its frame.
pub struct ChunkedIds {
    key: ApiKey,
    version: i16,
    /// The request header.
    header: Bytes,
    /// The ids, each as it came.
    ids: Bytes,
    count: usize,
    /// The body's fields after the list.
    rest: Bytes,
}

/// Reads `frame` (header and body, no size prefix) when it is a request of a chunked API
/// listing more than [`CHUNK`] ids; `None` otherwise. The list is read to its end first, so a
/// malformed request is refused whole.
pub fn scan(frame: &Bytes, key: ApiKey, version: i16) -> Option<anyhow::Result<ChunkedIds>> {
    if !chunked_api(key, version) {
        return None;
    }
    let mut body = frame.clone();
    RequestHeader::decode(&mut body, key.request_header_version(version)).ok()?;
    let header = frame.slice(..frame.len() - body.len());
    let flexible = flexible(key, version);
    let count = array_length(&mut body, flexible).ok()?;
    if count <= CHUNK as i64 {
        return None;
    }
    Some(scan_ids(
        key,
        version,
        header,
        body,
        count as usize,
        flexible,
    ))
}

fn scan_ids(
    key: ApiKey,
    version: i16,
    header: Bytes,
    body: Bytes,
    count: usize,
    flexible: bool,
) -> anyhow::Result<ChunkedIds> {
    let mut rest = body.clone();
    for _ in 0..count {
        skip_string(&mut rest, flexible)?;
    }
    Ok(ChunkedIds {
        key,
        version,
        header,
        ids: body.slice(..body.len() - rest.len()),
        count,
        rest,
    })
}

impl ChunkedIds {
    /// The requests of [`CHUNK`] ids each (header and body, no size prefix), in order, with
    /// how many ids each lists.
    pub(crate) fn requests(&self) -> impl Iterator<Item = anyhow::Result<(Bytes, usize)>> + '_ {
        let flexible = flexible(self.key, self.version);
        let mut ids = self.ids.clone();
        let mut left = self.count;
        std::iter::from_fn(move || {
            if left == 0 {
                return None;
            }
            let listed = left.min(CHUNK);
            left -= listed;
            let mut next = || {
                let mut chunk = ids.clone();
                for _ in 0..listed {
                    skip_string(&mut chunk, flexible)?;
                }
                let taken = ids.len() - chunk.len();
                let mut frame =
                    BytesMut::with_capacity(self.header.len() + 5 + taken + self.rest.len());
                frame.put_slice(&self.header);
                put_array_length(&mut frame, listed, flexible)?;
                frame.put_slice(&ids[..taken]);
                frame.put_slice(&self.rest);
                ids.advance(taken);
                Ok((frame.freeze(), listed))
            };
            let result = next();
            Some(result)
        })
    }

    /// Gathers the answers to the chunks' requests into one answer.
    pub(crate) fn answer(&self) -> std::io::Result<AnswerBuilder> {
        Ok(AnswerBuilder {
            key: self.key,
            version: self.version,
            count: self.count,
            head: None,
            tail: Bytes::new(),
            chunks: Vec::new(),
            size: 0,
            compressor: zstd::bulk::Compressor::new(1)?,
        })
    }
}

/// The answers of the chunks so far: the first one's header and throttle time, each chunk's
/// entries compressed, the body's fields after the list.
pub struct AnswerBuilder {
    key: ApiKey,
    version: i16,
    count: usize,
    /// The answer's header and `ThrottleTimeMs` (no size prefix).
    head: Option<Bytes>,
    tail: Bytes,
    /// Each chunk's entries: their size, compressed.
    chunks: Vec<(usize, Vec<u8>)>,
    size: usize,
    compressor: zstd::bulk::Compressor<'static>,
}

impl AnswerBuilder {
    /// Adds the answer (size prefix included) to a chunk listing `listed` ids.
    pub(crate) fn add(&mut self, answer: &[u8], listed: usize) -> anyhow::Result<()> {
        let flexible = flexible(self.key, self.version);
        let all = Bytes::copy_from_slice(answer.get(4..).context("an answer without its size")?);
        let mut body = all.clone();
        ResponseHeader::decode(&mut body, self.key.response_header_version(self.version))?;
        anyhow::ensure!(body.remaining() >= 4, "an answer without its throttle time");
        body.advance(4);
        let head = all.slice(..all.len() - body.len());
        let answered = array_length(&mut body, flexible)?;
        anyhow::ensure!(
            answered == listed as i64,
            "{answered} answers to {listed} ids"
        );
        let mut rest = body.clone();
        for _ in 0..listed {
            match self.key {
                ApiKey::ConsumerGroupDescribe => {
                    consumer_group_describe_response::DescribedGroup::decode(
                        &mut rest,
                        self.version,
                    )
                    .map(drop)?;
                }
                _ => describe_groups_response::DescribedGroup::decode(&mut rest, self.version)
                    .map(drop)?,
            }
        }
        let entries = &body[..body.len() - rest.len()];
        self.size += entries.len();
        // zstd's fastest level, one context for every chunk; the output is cut to its size
        // (it is allocated for the worst case, as large as the entries).
        let mut compressed = self.compressor.compress(entries)?;
        compressed.shrink_to_fit();
        self.chunks.push((entries.len(), compressed));
        self.tail = rest;
        if self.head.is_none() {
            self.head = Some(head);
        }
        Ok(())
    }

    /// The whole answer, its throttle time `throttle_time_ms`.
    pub(crate) fn finish(self, throttle_time_ms: i32) -> anyhow::Result<ChunkedAnswer> {
        let first = self.head.context("no chunk answered")?;
        let flexible = flexible(self.key, self.version);
        let mut head = BytesMut::with_capacity(first.len() + 5);
        head.put_slice(&first[..first.len() - 4]);
        head.put_i32(throttle_time_ms);
        put_array_length(&mut head, self.count, flexible)?;
        let size = i32::try_from(head.len() + self.size + self.tail.len())
            .context("an answer over 2 GiB")?;
        Ok(ChunkedAnswer {
            size,
            head: head.freeze(),
            chunks: self.chunks,
            tail: self.tail,
        })
    }
}

/// An answer whose entries are kept compressed until they are written.
pub struct ChunkedAnswer {
    size: i32,
    head: Bytes,
    chunks: Vec<(usize, Vec<u8>)>,
    tail: Bytes,
}

impl std::fmt::Debug for ChunkedAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkedAnswer")
            .field("size", &self.size)
            .field("chunks", &self.chunks.len())
            .finish_non_exhaustive()
    }
}

impl ChunkedAnswer {
    /// The answer's size on the wire, size prefix included.
    pub fn len(&self) -> usize {
        4 + self.size as usize
    }

    /// Whether the answer is empty (never: it has a size prefix and a header).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Writes the answer, size prefix included, decompressing one chunk at a time.
    pub async fn write_to<W: AsyncWrite + Unpin + Send>(&self, out: &mut W) -> std::io::Result<()> {
        super::forwarded::write_head(out, self.size, &self.head).await?;
        let mut decompressor = zstd::bulk::Decompressor::new()?;
        for (size, compressed) in &self.chunks {
            let entries = decompressor.decompress(compressed, *size)?;
            out.write_all(&entries).await?;
        }
        out.write_all(&self.tail).await
    }
}
