//! Requests whose list is topics each naming partitions, kept in their frame (ElectLeaders:
//! `election_chunks.rs`, AlterPartitionReassignments: `reassignment_chunks.rs`): one scan of
//! the topics, one cursor over them, and one writer of an answer with a result per named
//! partition, in request order, made from the frame and the controller's outcomes.

use anyhow::{bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::dedup_decode::{array_length, need, utf8_as_kafka_reads_it, uvarint};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::Decodable;

use super::repeated::{
    put_array_length, put_uvarint, skip_tagged_fields, PieceSource, PiecesWriter,
};

/// Topics and partitions answered per piece of the answer; a request naming no more of
/// either is decoded whole.
pub const CHUNK: usize = 1024;

/// Whether `frame` (header and body) is a request of `key` that `scan` decides from its
/// frame: the repeats of such a request are answered there, not dropped before.
pub fn is_long<T>(
    frame: &Bytes,
    key: ApiKey,
    version: i16,
    scan: fn(&Bytes, i16) -> Option<anyhow::Result<T>>,
) -> bool {
    let mut rest = frame.clone();
    RequestHeader::decode(&mut rest, key.request_header_version(version)).is_ok()
        && matches!(scan(&rest, version), Some(Ok(_)))
}

/// What differs between the requests of topics naming partitions.
pub trait TopicPartitionsApi: Send + Sync + 'static {
    /// The request, for the log and errors.
    const API: &'static str;

    /// One named partition as the frame holds it.
    type Partition;

    /// The controller's answers.
    type Answers: Send + Sync;

    /// Whether `version` is flexible.
    fn flexible(version: i16) -> bool;

    /// Reads one partition off a topic's partitions, as the crate's decoder checks it.
    fn partition(partitions: &mut Bytes, version: i16) -> anyhow::Result<Self::Partition>;

    /// How many partitions `answers` answers one by one; `None` when it refuses the request
    /// whole.
    fn answered(answers: &Self::Answers) -> Option<usize>;

    /// Encodes the answer to the `index`th named partition, `partition` of `topic`.
    fn write_partition(
        answers: &Self::Answers,
        index: usize,
        topic: &str,
        partition: &Self::Partition,
        piece: &mut BytesMut,
        version: i16,
    ) -> anyhow::Result<()>;
}

/// A request's topics in its frame.
#[derive(Clone)]
pub struct TopicList {
    /// The request body.
    body: Bytes,
    pub(super) version: i16,
    /// Where the topics start in `body` (after their list's length), and how many.
    topics_at: usize,
    pub(super) topics: usize,
    /// How many partitions they name.
    pub(super) partitions: usize,
}

/// A topic's name, checked as the crate checks a string.
fn name(rest: &mut Bytes, flexible: bool, api: &str) -> anyhow::Result<Bytes> {
    let length = if flexible {
        i64::from(uvarint(rest)?) - 1
    } else {
        need(rest, 2)?;
        i64::from(rest.get_i16())
    };
    let Ok(length) = usize::try_from(length) else {
        bail!("a {api} topic name must not be null");
    };
    need(rest, length)?;
    Ok(utf8_as_kafka_reads_it(rest.split_to(length)))
}

/// One topic: its name and partitions; `claimed` is how many it names, set even when its
/// list is cut short.
fn topic<A: TopicPartitionsApi>(
    rest: &mut Bytes,
    version: i16,
    claimed: &mut usize,
) -> anyhow::Result<(Bytes, Bytes)> {
    let flexible = A::flexible(version);
    let name = name(rest, flexible, A::API)?;
    *claimed = usize::try_from(array_length(rest, flexible)?)
        .with_context(|| format!("a {} topic's partitions must not be null", A::API))?;
    let start = rest.clone();
    for _ in 0..*claimed {
        A::partition(rest, version)?;
    }
    let mut partitions = start;
    partitions.truncate(partitions.len() - rest.len());
    skip_tagged_fields(rest, flexible)?;
    Ok((name, partitions))
}

impl TopicList {
    /// Reads the topics at `rest` (the list's length on) of `body` when they are more than
    /// [`CHUNK`] or name more than [`CHUNK`] partitions, leaving `rest` after them; `None`
    /// for a null or short list, decoded whole. A long list is read to its end, so a
    /// malformed one is refused before the crate would decode what comes before where it
    /// breaks.
    pub fn scan<A: TopicPartitionsApi>(
        body: &Bytes,
        rest: &mut Bytes,
        version: i16,
    ) -> Option<anyhow::Result<TopicList>> {
        let topics = usize::try_from(array_length(rest, A::flexible(version)).ok()?).ok()?;
        let topics_at = body.len() - rest.len();
        let mut partitions = 0usize;
        for index in 0..topics {
            let mut claimed = 0;
            let read = topic::<A>(rest, version, &mut claimed);
            partitions = partitions.saturating_add(claimed);
            if let Err(e) = read {
                return (index > CHUNK || partitions > CHUNK).then_some(Err(e));
            }
        }
        (topics > CHUNK || partitions > CHUNK).then(|| {
            Ok(TopicList {
                body: body.clone(),
                version,
                topics_at,
                topics,
                partitions,
            })
        })
    }

    /// The writer of the answer to these topics, the controller's `answers`.
    pub fn writer<A: TopicPartitionsApi>(
        &self,
        answers: A::Answers,
    ) -> anyhow::Result<PartitionResultsWriter<A>> {
        PiecesWriter::new(PartitionResults::new(self.clone(), answers)?, self.topics)
    }

    /// Calls `visit` with each topic's name and its partitions, in request order; stops early
    /// when `visit` returns false.
    pub fn each<A: TopicPartitionsApi>(
        &self,
        mut visit: impl FnMut(&str, A::Partition) -> bool,
    ) -> Result<(), String> {
        let mut cursor = Cursor::<A>::new(self);
        while let Some((name, mut partitions)) = cursor.next_topic().map_err(|e| e.to_string())? {
            let topic = text(&name).map_err(|e| e.to_string())?;
            while partitions.has_remaining() {
                let partition =
                    A::partition(&mut partitions, self.version).map_err(|e| e.to_string())?;
                if !visit(topic, partition) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

fn text(name: &Bytes) -> anyhow::Result<&str> {
    std::str::from_utf8(name).context("a topic name that is not UTF-8")
}

/// The topics of a request in order: each one's name and partitions.
struct Cursor<'a, A> {
    list: &'a TopicList,
    rest: Bytes,
    index: usize,
    api: std::marker::PhantomData<A>,
}

impl<'a, A: TopicPartitionsApi> Cursor<'a, A> {
    fn new(list: &'a TopicList) -> Self {
        Cursor {
            list,
            rest: list.body.slice(list.topics_at..),
            index: 0,
            api: std::marker::PhantomData,
        }
    }

    fn next_topic(&mut self) -> anyhow::Result<Option<(Bytes, Bytes)>> {
        if self.index == self.list.topics {
            return Ok(None);
        }
        self.index += 1;
        topic::<A>(&mut self.rest, self.list.version, &mut 0).map(Some)
    }
}

/// The answer's topics, each with a result per named partition, from the frame and the
/// controller's answers.
pub struct PartitionResults<A: TopicPartitionsApi> {
    list: TopicList,
    answers: A::Answers,
}

/// Writes the topics' results, about [`CHUNK`] partitions at a time.
pub type PartitionResultsWriter<A> = PiecesWriter<PartitionResults<A>>;

impl<A: TopicPartitionsApi> PartitionResults<A> {
    /// The answer to `list`, the controller's `answers`.
    fn new(list: TopicList, answers: A::Answers) -> anyhow::Result<Self> {
        if let Some(answered) = A::answered(&answers) {
            if answered != list.partitions {
                bail!("{answered} partitions answered of {}", list.partitions);
            }
        }
        Ok(PartitionResults { list, answers })
    }
}

impl<A: TopicPartitionsApi> PieceSource for PartitionResults<A> {
    const API: &'static str = A::API;

    fn pieces(&self) -> impl FnMut() -> anyhow::Result<Option<BytesMut>> + Send + '_ {
        let version = self.list.version;
        let flexible = A::flexible(version);
        let mut cursor = Cursor::<A>::new(&self.list);
        // The topic being written and its partitions not yet answered.
        let mut current: Option<(Bytes, Bytes)> = None;
        let mut answered = 0;
        move || {
            let mut piece = BytesMut::new();
            let mut in_piece = 0;
            while in_piece < CHUNK {
                let Some((name, partitions)) = current.as_mut() else {
                    let Some((name, partitions)) = cursor.next_topic()? else {
                        break;
                    };
                    match flexible {
                        true => put_uvarint(&mut piece, u32::try_from(name.len() + 1)?),
                        false => piece.put_i16(i16::try_from(name.len())?),
                    }
                    piece.put_slice(&name);
                    let mut counting = partitions.clone();
                    let mut count = 0;
                    while counting.has_remaining() {
                        A::partition(&mut counting, version)?;
                        count += 1;
                    }
                    put_array_length(&mut piece, count, flexible)?;
                    current = Some((name, partitions));
                    in_piece += 1;
                    continue;
                };
                if !partitions.has_remaining() {
                    if flexible {
                        piece.put_u8(0);
                    }
                    current = None;
                    continue;
                }
                let partition = A::partition(partitions, version)?;
                A::write_partition(
                    &self.answers,
                    answered,
                    text(name)?,
                    &partition,
                    &mut piece,
                    version,
                )?;
                answered += 1;
                in_piece += 1;
            }
            Ok((!piece.is_empty()).then_some(piece))
        }
    }
}
