//! Produce and Fetch requests naming more partitions than one chunk
//! (`node/src/network/produce_chunks.rs`, `fetch_chunks.rs`) are decided a chunk at a time and
//! their answers written as they are built: an answer must be the one shorter requests for the
//! same partitions get, every valid batch must be appended once, a malformed request must be
//! refused before anything is appended, and a fetch's byte limit holds across its chunks.

use std::time::Duration;

use bytes::Bytes;
use gregor_integration::admin::{creatable, create_topics, metadata, topic_name};
use gregor_integration::frames::one_record_batch;
use gregor_integration::{encode_request, wait_until, GregorNode, KafkaConn};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{BrokerId, FetchRequest, ProduceRequest};
use uuid::Uuid;

/// Partitions per shorter request: below the node's chunk of 1,024, so decoded whole.
const SHORT: usize = 1000;

/// A topic named `name` (or with id `id`, v13+) listing `partitions`, with `records` for each.
fn topic(
    name: &str,
    id: Uuid,
    partitions: impl IntoIterator<Item = (i32, Option<Bytes>)>,
) -> TopicProduceData {
    TopicProduceData::default()
        .with_name(topic_name(name))
        .with_topic_id(id)
        .with_partition_data(
            partitions
                .into_iter()
                .map(|(index, records)| {
                    PartitionProduceData::default()
                        .with_index(index)
                        .with_records(records)
                })
                .collect(),
        )
}

fn request(topics: Vec<TopicProduceData>, acks: i16) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(10_000)
        .with_topic_data(topics)
}

/// The same topics split into requests of at most [`SHORT`] partitions; `partitions` are a
/// topic's, `with` a copy of a topic holding only some of them.
fn shorter<T, P: Clone>(
    topics: &[T],
    partitions: impl Fn(&T) -> &Vec<P>,
    with: impl Fn(&T, Vec<P>) -> T,
) -> Vec<Vec<T>> {
    let mut requests = vec![Vec::new()];
    let mut count = 0;
    for topic in topics {
        for chunk in partitions(topic).chunks(SHORT) {
            if count + chunk.len() > SHORT {
                requests.push(Vec::new());
                count = 0;
            }
            count += chunk.len();
            requests
                .last_mut()
                .unwrap()
                .push(with(topic, chunk.to_vec()));
        }
    }
    requests
}

/// Topic answers from several responses, a topic split between responses merged back;
/// `same` tells whether two answers are of one topic, `partitions` a topic's answers.
fn merged<T, P>(
    responses: Vec<Vec<T>>,
    same: impl Fn(&T, &T) -> bool,
    partitions: impl Fn(&mut T) -> &mut Vec<P>,
) -> Vec<T> {
    let mut topics: Vec<T> = Vec::new();
    for response in responses {
        for mut topic in response {
            match topics.last_mut() {
                Some(last) if same(last, &topic) => {
                    let more = std::mem::take(partitions(&mut topic));
                    partitions(last).extend(more);
                }
                _ => topics.push(topic),
            }
        }
    }
    topics
}

/// Starts a node with topic `real` (4 partitions) whose partitions take appends.
async fn node_with_real_topic() -> (GregorNode, KafkaConn, Uuid) {
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let created = conn
        .send(&create_topics(vec![creatable("real", 4, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    let id = created.topics[0].topic_id;
    let bootstrap = node.bootstrap();
    wait_until(
        "real's partitions take appends",
        Duration::from_secs(30),
        || {
            let bootstrap = bootstrap.clone();
            async move {
                let mut conn = KafkaConn::connect(&bootstrap).await?;
                let probe = request(
                    vec![topic(
                        "real",
                        id,
                        (0..4).map(|p| (p, Some(one_record_batch("probe").unwrap()))),
                    )],
                    1,
                );
                let answer = conn.send(&probe, 9).await?;
                Ok(answer.responses[0]
                    .partition_responses
                    .iter()
                    .all(|p| p.error_code == 0)
                    .then_some(()))
            }
        },
    )
    .await
    .unwrap();
    let described = conn
        .send(&metadata(12, Some(&["real"]), false), 12)
        .await
        .unwrap();
    assert_eq!(described.topics[0].topic_id, id);
    (node, conn, id)
}

/// Appends one record to each of `real`'s partitions on a new connection; their base offsets.
async fn append_one_each(node: &GregorNode, real_id: Uuid) -> Vec<i64> {
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let records = (0..4).map(|p| (p, Some(one_record_batch("after").unwrap())));
    let answer = conn
        .send(&request(vec![topic("real", real_id, records)], 1), 9)
        .await
        .unwrap();
    answer.responses[0]
        .partition_responses
        .iter()
        .map(|p| p.base_offset)
        .collect()
}

/// The partitions of `real` answered with an append, and their base offsets.
fn appended(topics: &[TopicProduceResponse], real: &str) -> Vec<(i32, i64)> {
    topics
        .iter()
        .filter(|t| t.name.as_str() == real || real.is_empty())
        .flat_map(|t| &t.partition_responses)
        .filter(|p| p.error_code == 0)
        .map(|p| (p.index, p.base_offset))
        .collect()
}

#[tokio::test]
async fn produce_naming_many_partitions_answers_as_shorter_requests() {
    let (_node, mut conn, real_id) = node_with_real_topic().await;
    // Each round appends one record to each of real's four partitions; after the probes,
    // partition p's next offset is `next[p]`.
    let mut next = [1i64; 4];
    for version in [3i16, 8, 9, 12, 13] {
        let by_id = version >= 13;
        let ghost_id = Uuid::from_u128(0xdead_beef);
        let mut topics = vec![topic("ghost", ghost_id, (0..1500).map(|p| (p, None)))];
        if !by_id {
            // Refused with a message per partition (Kafka's internal topic).
            topics.push(topic(
                "__consumer_offsets",
                Uuid::nil(),
                (0..600).map(|p| (p, Some(one_record_batch("x").unwrap()))),
            ));
        }
        // Four partitions with a batch each, then 1,196 that do not exist.
        topics.push(topic(
            "real",
            real_id,
            (0..1200).map(|p| {
                (
                    p,
                    (p < 4).then(|| one_record_batch(&format!("v{version}")).unwrap()),
                )
            }),
        ));
        let whole = conn
            .send(&request(topics.clone(), -1), version)
            .await
            .unwrap();
        let mut answers = Vec::new();
        let parts = shorter(
            &topics,
            |t| &t.partition_data,
            |t, p| t.clone().with_partition_data(p),
        );
        for part in parts {
            let answer = conn.send(&request(part, -1), version).await.unwrap();
            answers.push(answer.responses);
        }
        let short = merged(
            answers,
            |a, b| a.name == b.name && a.topic_id == b.topic_id,
            |t| &mut t.partition_responses,
        );
        assert_eq!(
            whole.responses.len(),
            topics.len(),
            "v{version}: one answer per topic"
        );
        let listed: Vec<usize> = topics.iter().map(|t| t.partition_data.len()).collect();
        let answered: Vec<usize> = whole
            .responses
            .iter()
            .map(|t| t.partition_responses.len())
            .collect();
        assert_eq!(answered, listed, "v{version}: one answer per partition");
        // The valid batches were appended by both: the whole request first, then the short.
        let name = if by_id { "" } else { "real" };
        let expected: Vec<(i32, i64)> = (0..4).map(|p| (p, next[p as usize])).collect();
        assert_eq!(appended(&whole.responses, name), expected, "v{version}");
        let expected: Vec<(i32, i64)> = (0..4).map(|p| (p, next[p as usize] + 1)).collect();
        assert_eq!(appended(&short, name), expected, "v{version}");
        for offset in &mut next {
            *offset += 2;
        }
        // A topic that does not exist: each partition refused alone, as Kafka answers it.
        for (index, answer) in whole.responses[0].partition_responses.iter().enumerate() {
            let expected = PartitionProduceResponse::default()
                .with_index(index as i32)
                .with_error_code(if by_id { 100 } else { 3 })
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1);
            assert_eq!(answer, &expected, "v{version}: ghost partition {index}");
        }
        // Everything else answers alike.
        let without_offsets = |topics: Vec<TopicProduceResponse>| -> Vec<TopicProduceResponse> {
            topics
                .into_iter()
                .map(|mut t| {
                    for p in &mut t.partition_responses {
                        if p.error_code == 0 {
                            p.base_offset = 0;
                        }
                    }
                    t
                })
                .collect()
        };
        assert_eq!(
            without_offsets(whole.responses),
            without_offsets(short),
            "v{version}: the chunked answer is the shorter requests' answer"
        );
    }
}

/// acks=0 sends no answer; a partition error closes the connection, as for a short request.
#[tokio::test]
async fn produce_with_acks_0_naming_many_partitions_closes_on_an_error() {
    let (node, mut conn, real_id) = node_with_real_topic().await;
    let topics = vec![
        topic(
            "real",
            real_id,
            (0..4).map(|p| (p, Some(one_record_batch("zero").unwrap()))),
        ),
        topic("ghost", Uuid::nil(), (0..2000).map(|p| (p, None))),
    ];
    let frame = encode_request(&request(topics, 0), 9, 7, Some("c")).unwrap();
    conn.write_raw(&frame).await.unwrap();
    assert!(
        conn.read_frame().await.map(|f| f.is_none()).unwrap_or(true),
        "closed without an answer"
    );
    // The valid batches were appended: the probes took offset 0, these offset 1.
    let offsets = append_one_each(&node, real_id).await;
    assert_eq!(offsets, vec![2; 4]);
}

/// A request malformed after its first chunk is refused whole: nothing is appended.
#[tokio::test]
async fn produce_malformed_after_its_first_chunk_appends_nothing() {
    let (node, mut conn, real_id) = node_with_real_topic().await;
    let topics = vec![
        topic(
            "real",
            real_id,
            (0..4).map(|p| (p, Some(one_record_batch("never").unwrap()))),
        ),
        topic("ghost", Uuid::nil(), (0..2000).map(|p| (p, None))),
    ];
    let mut frame = encode_request(&request(topics, 1), 9, 7, Some("c")).unwrap();
    // The last partition's tagged fields claim one field that is not there.
    let last = frame.len() - 3;
    frame[last] = 1;
    conn.write_raw(&frame).await.unwrap();
    assert!(
        conn.read_frame().await.map(|f| f.is_none()).unwrap_or(true),
        "closed without an answer"
    );
    let offsets = append_one_each(&node, real_id).await;
    assert_eq!(
        offsets,
        vec![1; 4],
        "nothing of the malformed request was appended"
    );
}

/// A topic to fetch: its name, its id, and its partitions with their fetch offsets.
type Fetched<'a> = (&'a str, Uuid, Vec<(i32, i64)>);

/// A Fetch of `topics`, as a consumer sends it without a session, waiting for nothing.
fn fetch(topics: &[Fetched<'_>], max_bytes: i32) -> FetchRequest {
    let mut request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(
            topics
                .iter()
                .map(|(name, id, partitions)| {
                    FetchTopic::default()
                        .with_topic(topic_name(name))
                        .with_topic_id(*id)
                        .with_partitions(
                            partitions
                                .iter()
                                .map(|(partition, offset)| {
                                    FetchPartition::default()
                                        .with_partition(*partition)
                                        .with_fetch_offset(*offset)
                                        .with_partition_max_bytes(1 << 20)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    request.replica_state.replica_id = BrokerId(-1);
    request
}

#[tokio::test]
async fn fetch_naming_many_partitions_answers_as_shorter_requests() {
    let (_node, mut conn, real_id) = node_with_real_topic().await;
    for version in [4i16, 7, 11, 12, 13, 15, 17] {
        let ghost_id = Uuid::from_u128(0xdead_beef);
        // A topic that does not exist, then real's partitions: three with records, one read
        // past its end (OFFSET_OUT_OF_RANGE), then 1,196 that do not exist.
        let real: Vec<(i32, i64)> = (0..1200)
            .map(|p| (p, if p == 3 { 99 } else { 0 }))
            .collect();
        let topics = [
            ("ghost", ghost_id, (0..1500).map(|p| (p, 0)).collect()),
            ("real", real_id, real),
        ];
        let whole = conn.send(&fetch(&topics, 50 << 20), version).await.unwrap();
        assert_eq!((whole.error_code, whole.session_id), (0, 0), "v{version}");
        let listed: Vec<FetchTopic> = fetch(&topics, 50 << 20).topics;
        let parts = shorter(
            &listed,
            |t| &t.partitions,
            |t, p| t.clone().with_partitions(p),
        );
        let mut answers = Vec::new();
        for part in parts {
            let request = fetch(&[], 50 << 20).with_topics(part);
            answers.push(conn.send(&request, version).await.unwrap().responses);
        }
        let short = merged(
            answers,
            |a, b| a.topic == b.topic && a.topic_id == b.topic_id,
            |t| &mut t.partitions,
        );
        assert_eq!(whole.responses, short, "v{version}: the chunked answer");
        let codes: Vec<i16> = whole.responses[1].partitions[..5]
            .iter()
            .map(|p| p.error_code)
            .collect();
        assert_eq!(codes, vec![0, 0, 0, 1, 3], "v{version}");
        assert!(
            whole.responses[1].partitions[..3]
                .iter()
                .all(|p| p.records.as_ref().is_some_and(|r| !r.is_empty())),
            "v{version}: real's records"
        );
    }
}

/// The byte limit holds across chunks: past it, partitions answer without records, and only
/// the first partition with data may exceed it.
#[tokio::test]
async fn fetch_byte_limit_holds_across_chunks() {
    let (node, mut conn, real_id) = node_with_real_topic().await;
    let ghost = (
        "ghost",
        Uuid::from_u128(7),
        (0..2000).map(|p| (p, 0)).collect(),
    );
    let real = ("real", real_id, (0..4).map(|p| (p, 0)).collect());
    let answer = conn.send(&fetch(&[ghost, real], 1), 12).await.unwrap();
    let records: Vec<usize> = answer.responses[1]
        .partitions
        .iter()
        .map(|p| p.records.as_ref().map_or(0, |r| r.len()))
        .collect();
    assert!(records[0] > 1, "the first batch comes whole: {records:?}");
    assert_eq!(&records[1..], &[0, 0, 0], "nothing past the limit");
    // A full fetch opening a session gets none (the session would hold every partition);
    // an incremental one adding that many is told its session is gone.
    let small = ("real", real_id, vec![(0, 0)]);
    let opened = conn
        .send(&fetch(&[small], 1 << 20).with_session_epoch(0), 12)
        .await
        .unwrap();
    assert_ne!(opened.session_id, 0, "a short full fetch opens a session");
    let ghost = (
        "ghost",
        Uuid::from_u128(7),
        (0..2000).map(|p| (p, 0)).collect(),
    );
    let full = conn
        .send(&fetch(&[ghost], 1 << 20).with_session_epoch(0), 12)
        .await
        .unwrap();
    assert_eq!((full.error_code, full.session_id), (0, 0));
    let ghost = (
        "ghost",
        Uuid::from_u128(7),
        (0..2000).map(|p| (p, 0)).collect(),
    );
    let incremental = fetch(&[ghost], 1 << 20)
        .with_session_id(opened.session_id)
        .with_session_epoch(1);
    let refused = conn.send(&incremental, 12).await.unwrap();
    assert_eq!((refused.error_code, refused.responses.len()), (70, 0));
    let again = fetch(&[], 1 << 20)
        .with_session_id(opened.session_id)
        .with_session_epoch(1);
    let gone = conn.send(&again, 12).await.unwrap();
    assert_eq!(gone.error_code, 70, "the session was closed");
    drop(node);
}

/// A fetch of more partitions than one chunk, all at their end, waits for records and is woken
/// by an append to its last partition: its wait (60 s) is longer than the client's (30 s), so
/// only the wake-up answers it in time.
#[tokio::test]
async fn a_long_poll_over_many_partitions_is_woken_by_an_append() {
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(30));
    let created = conn
        .send(&create_topics(vec![creatable("wide", 1100, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    let id = created.topics[0].topic_id;
    let everywhere = || ("wide", id, (0..1100).map(|p| (p, 0)).collect());
    // Every partition answers once its log is open.
    wait_until("wide's logs are open", Duration::from_secs(30), || {
        let bootstrap = node.bootstrap();
        async move {
            let mut conn = KafkaConn::connect(&bootstrap).await?;
            let answer = conn.send(&fetch(&[everywhere()], 1 << 20), 12).await?;
            Ok(answer.responses[0]
                .partitions
                .iter()
                .all(|p| p.error_code == 0)
                .then_some(()))
        }
    })
    .await
    .unwrap();
    let waiting = fetch(&[everywhere()], 1 << 20).with_max_wait_ms(60_000);
    let frame = encode_request(&waiting, 12, 5, Some("c")).unwrap();
    conn.write_raw(&frame).await.unwrap();
    // Append only once the fetch waits, so that the append must wake it.
    wait_until("the fetch waits", Duration::from_secs(30), || {
        let metrics = node.metrics_addr();
        async move {
            let text = gregor_integration::prom::scrape(&metrics).await?;
            let samples = gregor_integration::prom::parse(&text)?;
            Ok(samples
                .iter()
                .any(|s| {
                    s.name == "kafka_server_delayedoperationpurgatory_purgatorysize"
                        && s.labels.get("delayedOperation").map(String::as_str) == Some("Fetch")
                        && s.value >= 1.0
                })
                .then_some(()))
        }
    })
    .await
    .unwrap();
    let mut appender = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let late = request(
        vec![topic(
            "wide",
            id,
            [(1099, Some(one_record_batch("late").unwrap()))],
        )],
        1,
    );
    let appended = appender.send(&late, 9).await.unwrap();
    assert_eq!(appended.responses[0].partition_responses[0].error_code, 0);
    let (_, answer) = conn
        .read_response::<FetchRequest>(12)
        .await
        .expect("woken by the append, before the client's timeout");
    let with_records: Vec<i32> = answer.responses[0]
        .partitions
        .iter()
        .filter(|p| p.records.as_ref().is_some_and(|r| !r.is_empty()))
        .map(|p| p.partition_index)
        .collect();
    assert_eq!(with_records, vec![1099]);
}
