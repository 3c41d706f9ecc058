//! Fetch requests naming many partitions, read a chunk of partitions at a time and answered as
//! the answer is written.
//!
//! A partition costs 33 bytes on the wire but a decoded `FetchPartition`, a `PartitionData` and
//! its encoding of about 500 bytes: a frame of distinct partitions of an unknown topic cost 17
//! times its size. Here the partitions stay in the frame and are read [`CHUNK`] at a time by
//! the Fetch handler's own pass (`fetch::read_all`), the byte limits and the first batch
//! returned whole holding across the chunks; each answer is kept as its error code unless it
//! says more (which only partitions that exist can), and the answer is written from what was
//! kept (`partition_chunks.rs`). A long poll re-reads every chunk when a partition it watches
//! gets news, as the whole fetch does.
//!
//! Such a fetch opens no fetch session (Kafka's answer when its session cache has no room:
//! session id 0, and the fetcher goes on with full fetches), so no session ever holds its
//! partitions; it closes the session it names, as a full fetch does. An incremental fetch
//! adding that many partitions to its session is answered FETCH_SESSION_ID_NOT_FOUND and its
//! session closed, as if the session had been evicted: the fetcher starts over with a full
//! fetch.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::{FetchRequest, FetchResponse, RequestKind, ResponseKind, TopicName};
use kafka_protocol::protocol::{Decodable, Encodable};

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::handlers::fetch::{self, Limits, TopicFetchCounts, Watched};
use gregor_actors::handlers::{ApiResponse, Delivery, ErrorCounts};
use gregor_actors::log_manager::ReadMemoryHold;

use super::partition_chunks::{
    read_list, Answers, Cursor, Listed, PartitionList, PartitionsWriter, CHUNK,
};

/// Kafka's FETCH_SESSION_ID_NOT_FOUND.
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;

/// Fetch's topic-partitions.
pub struct FetchList;

impl PartitionList for FetchList {
    type Partition = FetchPartition;
    type Answer = PartitionData;
    const FLEXIBLE_FROM: i16 = 12;

    fn decode_partition(buf: &mut Bytes, version: i16) -> anyhow::Result<FetchPartition> {
        FetchPartition::decode(buf, version)
    }

    fn partition_index(partition: &FetchPartition) -> i32 {
        partition.partition
    }

    fn plain(index: i32, error_code: i16) -> PartitionData {
        fetch::partition_error(index, error_code)
    }

    fn error_code(answer: &PartitionData) -> i16 {
        answer.error_code
    }

    fn index_mut(answer: &mut PartitionData) -> &mut i32 {
        &mut answer.partition_index
    }
}

/// A Fetch request whose partitions stay in the frame until their chunk is read.
pub struct ChunkedFetch {
    listed: Listed,
    /// The request's other fields, with an empty topic list.
    shell: FetchRequest,
}

/// Reads `body` (a Fetch request body) when it names more than [`CHUNK`] partitions; `None`
/// for other requests, decoded whole. Such a request is read to its end first, so a malformed
/// one is refused before any chunk is read.
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<ChunkedFetch>> {
    if !(4..=18).contains(&version) {
        return None;
    }
    // Replica id (to v14), max wait, min bytes, max bytes, isolation level, then the session
    // id and epoch (v7+).
    let prefix = if version <= 14 { 4 } else { 0 } + 13 + if version >= 7 { 8 } else { 0 };
    if body.len() < prefix {
        return None;
    }
    let mut rest = body.slice(prefix..);
    let listed = match read_list::<FetchList>(&mut rest, version) {
        Ok(listed) if listed.partitions > CHUNK => listed,
        Ok(_) => return None,
        // Refused here only when the list is long: a short one is left to the crate.
        Err((e, partitions)) => return (partitions > CHUNK).then_some(Err(e)),
    };
    // The request's other fields, decoded by the crate from the frame without its topics.
    let mut shell = BytesMut::with_capacity(prefix + 5 + rest.len());
    shell.put_slice(&body[..prefix]);
    if version >= 12 {
        shell.put_u8(1);
    } else {
        shell.put_i32(0);
    }
    shell.put_slice(&rest);
    Some(
        FetchRequest::decode(&mut shell.freeze(), version)
            .map(|shell| ChunkedFetch { listed, shell }),
    )
}

impl ChunkedFetch {
    /// The request as the handler sees it, without its topics (for what looks at the request
    /// before the handler).
    pub(crate) fn shell(&self) -> RequestKind {
        RequestKind::Fetch(self.shell.clone())
    }
}

fn answer(body: FetchResponse, errors: ErrorCounts, throttle_time_ms: i32) -> ApiResponse {
    ApiResponse {
        body: ResponseKind::Fetch(body),
        errors,
        throttle_time_ms,
        delivery: Delivery::Send,
        encoded_list: None,
        read_memory: ReadMemoryHold::default(),
        metric_alias: None,
        remote_time: std::time::Duration::ZERO,
    }
}

/// Reads the partitions [`CHUNK`] at a time with the Fetch handler's pass, waiting as a whole
/// fetch waits, and keeps each one's answer as [`Answers`]; the answer's topics are written by
/// the [`PartitionsWriter`].
pub(crate) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ChunkedFetch,
) -> anyhow::Result<(ApiResponse, Option<PartitionsWriter<FetchList>>)> {
    let version = info.api_version;
    let shell = &request.shell;
    if version >= 7 && shell.session_id != 0 {
        ctx.fetch_sessions.close(shell.session_id);
    }
    if version >= 7 && shell.session_epoch > 0 {
        let mut errors = ErrorCounts::default();
        errors.add(FETCH_SESSION_ID_NOT_FOUND);
        let body = FetchResponse::default().with_error_code(FETCH_SESSION_ID_NOT_FOUND);
        return Ok((answer(body, errors, 0), None));
    }
    // Each chunk is read as a sessionless fetch that never waits.
    let part = shell
        .clone()
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_forgotten_topics_data(Vec::new());
    let follower = fetch::is_follower(shell, version);
    let limits = Limits::of(shell, fetch::quota_window_bytes(ctx, info, follower));
    let mut waited = std::time::Duration::ZERO;
    let (answers, mut counts, read_memory) = loop {
        let mut answers = Answers::<FetchList>::for_list(&request.listed);
        let mut read_memory = ReadMemoryHold::default();
        let mut counts = TopicFetchCounts::default();
        let mut watched = Watched::default();
        let (mut bytes, mut any_error, mut urgent) = (0, false, false);
        let mut cursor = Cursor::<FetchList>::new(&request.listed)?;
        while let Some(topics) = cursor.next_chunk(
            |head| {
                FetchTopic::default()
                    .with_topic(TopicName(head.name.clone()))
                    .with_topic_id(head.topic_id)
            },
            |topic, partition| topic.partitions.push(partition),
        )? {
            let listed: Vec<usize> = topics.iter().map(|t| t.partitions.len()).collect();
            let chunk = part.clone().with_topics(topics);
            let mut pass = fetch::read_all(ctx, info, &chunk, limits.max_bytes, bytes).await;
            bytes = pass.bytes;
            any_error |= pass.any_error;
            urgent |= pass.urgent;
            watched.append(&mut pass.watched);
            read_memory.merge(pass.read_memory);
            counts.add(ctx, &pass.topics);
            // Before the answer's size is taken: the quota counts a refused partition's empty
            // answer, where Kafka counts what was read.
            fetch::refuse_zstd_below_v10(ctx, version, &mut pass.topics, &mut counts);
            if pass.topics.len() != listed.len() {
                anyhow::bail!("the Fetch pass answered {} topics", pass.topics.len());
            }
            for (topic, expected) in pass.topics.into_iter().zip(listed) {
                if topic.partitions.len() != expected {
                    anyhow::bail!("the Fetch pass answered a topic's partitions out of order");
                }
                for partition in topic.partitions {
                    answers.keep(partition)?;
                }
            }
        }
        if limits.done(bytes, any_error, urgent, &watched) {
            break (answers, counts, read_memory);
        }
        let waiting = std::time::Instant::now();
        fetch::wait_for_news(&watched, follower, limits.deadline()).await;
        waited += waiting.elapsed();
    };
    let mut errors = ErrorCounts::default();
    answers.count_errors(&mut errors);
    tracing::debug!(
        partitions = answers.len(),
        "a Fetch request read in chunks of {CHUNK} partitions"
    );
    let writer = PartitionsWriter::new(request.listed, answers)?;
    // The fetch byte-rate quota counts the response this would send (size prefix included);
    // over quota, the answer is empty and carries the throttle time, as a whole fetch's.
    let mut empty = BytesMut::new();
    FetchResponse::default().encode(&mut empty, version)?;
    let list_length = {
        let mut length = BytesMut::new();
        super::repeated::put_array_length(&mut length, writer.count(), version >= 12)?;
        length.len()
    };
    let empty_list = if version >= 12 { 1 } else { 4 };
    let header = if version >= 12 { 5 } else { 4 };
    let size = 4 + header + empty.len() - empty_list + list_length + writer.len();
    let throttle = fetch::record_quota(ctx, info, size, follower);
    let mut answered = answer(FetchResponse::default(), errors, throttle);
    answered.metric_alias = Some(fetch::metric_alias(follower));
    answered.remote_time = waited;
    if throttle > 0 {
        counts.throttled();
    }
    counts.record(follower);
    if throttle > 0 {
        return Ok((answered, None));
    }
    answered.read_memory = read_memory;
    Ok((answered, Some(writer)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::BrokerId;

    #[test]
    fn the_shell_keeps_every_field_but_the_topics() -> anyhow::Result<()> {
        use kafka_protocol::messages::fetch_request::ForgottenTopic;
        for version in [4i16, 7, 11, 12, 13, 15, 17] {
            let topics = (0..3)
                .map(|t| {
                    FetchTopic::default()
                        .with_topic(TopicName(format!("t{t}").into()))
                        .with_topic_id(uuid::Uuid::from_u128(t + 1))
                        .with_partitions(
                            (0..500)
                                .map(|p| FetchPartition::default().with_partition(p))
                                .collect(),
                        )
                })
                .collect();
            let mut request = FetchRequest::default()
                .with_max_wait_ms(500)
                .with_min_bytes(7)
                .with_max_bytes(1 << 20)
                .with_topics(topics);
            if version >= 7 {
                request = request.with_session_id(9).with_session_epoch(0);
                request.forgotten_topics_data = vec![ForgottenTopic::default()
                    .with_topic(TopicName("gone".into()))
                    .with_topic_id(uuid::Uuid::from_u128(77))
                    .with_partitions(vec![1, 2])];
            }
            if version >= 11 {
                request.rack_id = "rack".into();
            }
            if version >= 15 {
                request.replica_state.replica_epoch = 3;
            } else {
                request.replica_id = BrokerId(-1);
            }
            let mut wire = BytesMut::new();
            request.encode(&mut wire, version)?;
            let wire = wire.freeze();
            // What the version carries, decoded whole.
            let mut expected = FetchRequest::decode(&mut wire.clone(), version)?;
            expected.topics.clear();
            let Some(scanned) = scan(&wire, version) else {
                panic!("v{version}: 1,500 partitions are read in chunks");
            };
            let scanned = scanned?;
            assert_eq!(scanned.listed.partitions, 1500, "v{version}");
            assert_eq!(scanned.shell, expected, "v{version}");
            let mut cursor = Cursor::<FetchList>::new(&scanned.listed)?;
            let mut names = Vec::new();
            while let Some(chunk) = cursor.next_chunk(
                |head| (head.name.to_string(), head.topic_id, 0usize),
                |topic, _| topic.2 += 1,
            )? {
                names.push(chunk);
            }
            let by_name = version <= 12;
            let name = |t: usize| {
                if by_name {
                    format!("t{t}")
                } else {
                    String::new()
                }
            };
            let id = |t: u128| {
                if by_name {
                    uuid::Uuid::nil()
                } else {
                    uuid::Uuid::from_u128(t + 1)
                }
            };
            assert_eq!(
                names,
                vec![
                    vec![
                        (name(0), id(0), 500),
                        (name(1), id(1), 500),
                        (name(2), id(2), 24)
                    ],
                    vec![(name(2), id(2), 476)],
                ],
                "v{version}"
            );
        }
        Ok(())
    }
}
