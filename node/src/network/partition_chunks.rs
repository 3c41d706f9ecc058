//! What Produce and Fetch requests naming many partitions share when they are decided a chunk
//! of partitions at a time (`produce_chunks.rs`, `fetch_chunks.rs`): a walk over the topics
//! and partitions left in the frame, each partition's answer kept as its error code unless it
//! says more, and a writer that encodes the answer's topics piece by piece from the frame and
//! what was kept, so neither the request's partitions nor the answer are ever held whole.
//!
//! Both lists are topics (a name to v12, an id from v13), each with partitions that start with
//! their index, and tagged fields in flexible versions; both answers repeat the topic's name or
//! id and answer each partition in the order listed.

use anyhow::{bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::io::AsyncWrite;
use uuid::Uuid;

use gregor_actors::handlers::ErrorCounts;

use super::dedup_decode::{array_length, need, nullable_string};
use super::repeated::{put_array_length, put_uvarint, skip_tagged_fields};

/// Partitions handed to a handler at once; a request naming no more is decoded whole.
pub const CHUNK: usize = 1024;

/// One API's list of topic-partitions and its answers.
pub trait PartitionList {
    /// A partition as the request lists it.
    type Partition;
    /// A partition's answer.
    type Answer: Encodable + Clone + PartialEq;
    /// The first flexible version.
    const FLEXIBLE_FROM: i16;
    fn decode_partition(buf: &mut Bytes, version: i16) -> anyhow::Result<Self::Partition>;
    fn partition_index(partition: &Self::Partition) -> i32;
    /// The answer that says nothing but its error code.
    fn plain(index: i32, error_code: i16) -> Self::Answer;
    fn error_code(answer: &Self::Answer) -> i16;
    fn index_mut(answer: &mut Self::Answer) -> &mut i32;
}

/// One listed topic's identity, as its answer repeats it.
pub struct TopicHead {
    pub name: StrBytes,
    pub topic_id: Uuid,
    pub partitions: usize,
}

/// A nullable string, read as Kafka reads it (invalid UTF-8 replaced).
pub fn nullable_str(buf: &mut Bytes, flexible: bool) -> anyhow::Result<Option<StrBytes>> {
    Ok(nullable_string(buf, flexible)?.map(StrBytes::from_utf8_lossy))
}

/// Reads a topic up to its partitions: name (to v12) or id (v13+), then the partitions' count.
fn topic_head(buf: &mut Bytes, version: i16, flexible: bool) -> anyhow::Result<TopicHead> {
    let mut name = StrBytes::default();
    let mut topic_id = Uuid::nil();
    if version <= 12 {
        let Some(named) = nullable_str(buf, flexible)? else {
            bail!("v{version} topic names must not be null");
        };
        name = named;
    } else {
        need(buf, 16)?;
        let mut id = [0u8; 16];
        buf.copy_to_slice(&mut id);
        topic_id = Uuid::from_bytes(id);
    }
    let partitions = array_length(buf, flexible)?;
    let partitions = usize::try_from(partitions).context("a topic's partitions are null")?;
    Ok(TopicHead {
        name,
        topic_id,
        partitions,
    })
}

/// Whether the list at the start of `rest` names more than [`CHUNK`] partitions, read only as
/// far as that. A malformed list counts as short: it is left to the crate's decoder.
pub fn lists_more_than_chunk<L: PartitionList>(rest: &mut Bytes, version: i16) -> bool {
    let flexible = version >= L::FLEXIBLE_FROM;
    let mut walk = || -> anyhow::Result<bool> {
        let topics = array_length(rest, flexible)?;
        let mut partitions = 0;
        for _ in 0..topics {
            let head = topic_head(rest, version, flexible)?;
            partitions += head.partitions;
            if partitions > CHUNK {
                return Ok(true);
            }
            for _ in 0..head.partitions {
                L::decode_partition(rest, version)?;
            }
            skip_tagged_fields(rest, flexible)?;
        }
        Ok(false)
    };
    walk().unwrap_or(false)
}

/// A list of topics left in the frame: `topics` starts at the list's length.
pub struct Listed {
    pub topics: Bytes,
    pub version: i16,
    pub topic_count: usize,
    pub partitions: usize,
}

/// Reads the whole list at the start of `rest` (so a malformed request is refused before any
/// chunk is decided, as the crate's decoder refuses it whole) and leaves `rest` after it. On a
/// malformed list, the error comes with the partitions read before it.
pub fn read_list<L: PartitionList>(
    rest: &mut Bytes,
    version: i16,
) -> Result<Listed, (anyhow::Error, usize)> {
    let flexible = version >= L::FLEXIBLE_FROM;
    let topics = rest.clone();
    let mut partitions = 0;
    let mut walk = |rest: &mut Bytes| -> anyhow::Result<usize> {
        let topic_count = usize::try_from(array_length(rest, flexible)?).context("null topics")?;
        for _ in 0..topic_count {
            let head = topic_head(rest, version, flexible)?;
            for _ in 0..head.partitions {
                L::decode_partition(rest, version)?;
                partitions += 1;
            }
            skip_tagged_fields(rest, flexible)?;
        }
        Ok(topic_count)
    };
    let walked = walk(rest);
    let topic_count = walked.map_err(|e| (e, partitions))?;
    let topics = topics.slice(..topics.len() - rest.len());
    Ok(Listed {
        topics,
        version,
        topic_count,
        partitions,
    })
}

/// What the cursor reads next.
pub enum Item<P> {
    /// A topic starts; its partitions follow.
    Topic(TopicHead),
    Partition(P),
}

/// Walks the topics and their partitions in frame order.
pub struct Cursor<'a, L: PartitionList> {
    listed: &'a Listed,
    rest: Bytes,
    topics_left: usize,
    /// The topic being read and how many of its partitions are left.
    current: Option<(TopicHead, usize)>,
    list: std::marker::PhantomData<L>,
}

impl<'a, L: PartitionList> Cursor<'a, L> {
    pub fn new(listed: &'a Listed) -> anyhow::Result<Self> {
        let mut rest = listed.topics.clone();
        let count = array_length(&mut rest, listed.version >= L::FLEXIBLE_FROM)?;
        if usize::try_from(count).ok() != Some(listed.topic_count) {
            bail!("the topic list changed between two reads");
        }
        Ok(Cursor {
            listed,
            rest,
            topics_left: listed.topic_count,
            current: None,
            list: std::marker::PhantomData,
        })
    }

    pub fn next_item(&mut self) -> anyhow::Result<Option<Item<L::Partition>>> {
        let version = self.listed.version;
        if let Some((_, left)) = &mut self.current {
            if *left > 0 {
                *left -= 1;
                return Ok(Some(Item::Partition(L::decode_partition(
                    &mut self.rest,
                    version,
                )?)));
            }
            skip_tagged_fields(&mut self.rest, version >= L::FLEXIBLE_FROM)?;
            self.current = None;
        }
        if self.topics_left == 0 {
            return Ok(None);
        }
        self.topics_left -= 1;
        let head = topic_head(&mut self.rest, version, version >= L::FLEXIBLE_FROM)?;
        self.current = Some((
            TopicHead {
                name: head.name.clone(),
                topic_id: head.topic_id,
                partitions: head.partitions,
            },
            head.partitions,
        ));
        Ok(Some(Item::Topic(head)))
    }

    /// The next topics holding at most [`CHUNK`] partitions in all (a topic split between
    /// chunks appears in each), each built by `start` and filled by `add`; `None` after the
    /// last.
    pub fn next_chunk<T>(
        &mut self,
        start: impl Fn(&TopicHead) -> T,
        mut add: impl FnMut(&mut T, L::Partition),
    ) -> anyhow::Result<Option<Vec<T>>> {
        let mut chunk: Vec<T> = Vec::new();
        let mut partitions = 0;
        // A topic whose partitions continue from the previous chunk.
        if let Some((head, left)) = &self.current {
            if *left > 0 {
                chunk.push(start(head));
            }
        }
        while partitions < CHUNK {
            match self.next_item()? {
                None => break,
                Some(Item::Topic(head)) => chunk.push(start(&head)),
                Some(Item::Partition(partition)) => {
                    let Some(topic) = chunk.last_mut() else {
                        bail!("a partition outside a topic");
                    };
                    add(topic, partition);
                    partitions += 1;
                }
            }
        }
        Ok((!chunk.is_empty()).then_some(chunk))
    }
}

/// Every partition's answer in frame order: an error code each, and the answers saying more,
/// as runs of consecutive partitions answered alike but for their index.
pub struct Answers<L: PartitionList> {
    codes: Vec<i16>,
    /// (first partition, last partition, answer), by partition number in frame order.
    detailed: Vec<(u32, u32, L::Answer)>,
}

impl<L: PartitionList> Answers<L> {
    /// Room for the answers of `listed`'s partitions, sized once: a doubling vector's earlier
    /// copies stay resident in the allocator.
    pub fn for_list(listed: &Listed) -> Self {
        Answers {
            codes: Vec::with_capacity(listed.partitions),
            detailed: Vec::new(),
        }
    }

    pub fn keep(&mut self, mut answer: L::Answer) -> anyhow::Result<()> {
        let number = u32::try_from(self.codes.len())?;
        let code = L::error_code(&answer);
        self.codes.push(code);
        let index = *L::index_mut(&mut answer);
        if answer == L::plain(index, code) {
            return Ok(());
        }
        *L::index_mut(&mut answer) = 0;
        if let Some((_, last, previous)) = self.detailed.last_mut() {
            if *last + 1 == number && *previous == answer {
                *last = number;
                return Ok(());
            }
        }
        self.detailed.push((number, number, answer));
        Ok(())
    }

    /// How many partitions were answered.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    /// Counts every partition's error code.
    pub fn count_errors(&self, errors: &mut ErrorCounts) {
        errors.add_all(self.codes.iter().copied());
    }
}

/// The second pass over the partitions, run while the answer is written: each one's answer
/// rebuilt from what the first pass kept and encoded, a chunk at a time.
pub struct PartitionsWriter<L: PartitionList> {
    listed: Listed,
    answers: Answers<L>,
    /// The encoded size of every topic's answer.
    size: usize,
}

impl<L: PartitionList> PartitionsWriter<L> {
    pub fn new(listed: Listed, answers: Answers<L>) -> anyhow::Result<Self> {
        let mut writer = PartitionsWriter {
            listed,
            answers,
            size: 0,
        };
        let mut pieces = Pieces::new(&writer)?;
        writer.size = super::repeated::pieces_size(|| pieces.next_piece())?;
        Ok(writer)
    }

    /// How many topics the answer lists.
    pub fn count(&self) -> usize {
        self.listed.topic_count
    }

    /// The encoded size of every topic's answer.
    pub fn len(&self) -> usize {
        self.size
    }

    pub fn is_empty(&self) -> bool {
        self.size == 0
    }

    /// Writes every topic's answer, encoding it a piece at a time.
    pub async fn write_to<W: AsyncWrite + Unpin + Send>(&self, out: &mut W) -> std::io::Result<()> {
        let mut pieces = Pieces::new(self).map_err(std::io::Error::other)?;
        super::repeated::write_pieces(out, self.size, "Produce or Fetch", || pieces.next_piece())
            .await
    }
}

impl<L: PartitionList> std::fmt::Debug for PartitionsWriter<L> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartitionsWriter")
            .field("partitions", &self.answers.codes.len())
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// Encodes the topics' answers in frame order, at most [`CHUNK`] partitions per piece.
struct Pieces<'a, L: PartitionList> {
    cursor: Cursor<'a, L>,
    answers: &'a Answers<L>,
    /// The partition's number in frame order.
    number: usize,
    /// The first run of [`Answers::detailed`] not wholly before `number`.
    detailed: usize,
    /// Whether a topic was started whose tagged fields are still to be written.
    open_topic: bool,
    done: bool,
}

impl<'a, L: PartitionList> Pieces<'a, L> {
    fn new(writer: &'a PartitionsWriter<L>) -> anyhow::Result<Self> {
        Ok(Pieces {
            cursor: Cursor::new(&writer.listed)?,
            answers: &writer.answers,
            number: 0,
            detailed: 0,
            open_topic: false,
            done: false,
        })
    }

    fn answer(&mut self, index: i32) -> anyhow::Result<L::Answer> {
        let number = self.number;
        let code = *self
            .answers
            .codes
            .get(number)
            .context("more partitions than answers")?;
        let runs = &self.answers.detailed;
        while runs
            .get(self.detailed)
            .is_some_and(|(_, last, _)| (*last as usize) < number)
        {
            self.detailed += 1;
        }
        Ok(match runs.get(self.detailed) {
            Some((first, _, answer)) if *first as usize <= number => {
                let mut answer = answer.clone();
                *L::index_mut(&mut answer) = index;
                answer
            }
            _ => L::plain(index, code),
        })
    }

    fn next_piece(&mut self) -> anyhow::Result<Option<BytesMut>> {
        if self.done {
            return Ok(None);
        }
        let version = self.cursor.listed.version;
        let flexible = version >= L::FLEXIBLE_FROM;
        let mut piece = BytesMut::new();
        let mut in_piece = 0;
        while in_piece < CHUNK {
            match self.cursor.next_item()? {
                None => {
                    if self.open_topic && flexible {
                        put_uvarint(&mut piece, 0);
                    }
                    if self.number != self.answers.codes.len() {
                        bail!(
                            "{} partitions read again, {} answered",
                            self.number,
                            self.answers.codes.len()
                        );
                    }
                    self.done = true;
                    break;
                }
                Some(Item::Topic(head)) => {
                    if self.open_topic && flexible {
                        put_uvarint(&mut piece, 0);
                    }
                    if version <= 12 {
                        let name = head.name.as_bytes();
                        if flexible {
                            put_uvarint(&mut piece, u32::try_from(name.len() + 1)?);
                        } else {
                            piece.put_i16(i16::try_from(name.len())?);
                        }
                        piece.put_slice(name);
                    } else {
                        piece.extend_from_slice(head.topic_id.as_bytes());
                    }
                    put_array_length(&mut piece, head.partitions, flexible)?;
                    self.open_topic = true;
                }
                Some(Item::Partition(partition)) => {
                    self.answer(L::partition_index(&partition))?
                        .encode(&mut piece, version)?;
                    self.number += 1;
                    in_piece += 1;
                }
            }
        }
        Ok(Some(piece))
    }
}
