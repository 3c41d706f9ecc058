//! A Produce request naming more partitions than one chunk (`node/src/network/produce_chunks.rs`)
//! is appended a chunk at a time and its answer written as it is built: the answer must be
//! the one shorter requests for the same partitions get, every valid batch must be appended
//! once, and a malformed request must be refused before anything is appended.

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use gregor_integration::admin::{creatable, create_topics, metadata, topic_name};
use gregor_integration::{encode_request, wait_until, GregorNode, KafkaConn};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse};
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use uuid::Uuid;

/// Partitions per shorter request: below the node's chunk of 1,024, so decoded whole.
const SHORT: usize = 1000;

/// A batch of one record.
fn batch(value: &str) -> Bytes {
    let record = Record {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: 1_700_000_000_000,
        key: None,
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [&record],
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

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

/// The same topics split into requests of at most [`SHORT`] partitions.
fn shorter(topics: &[TopicProduceData]) -> Vec<Vec<TopicProduceData>> {
    let mut requests = vec![Vec::new()];
    let mut count = 0;
    for topic in topics {
        for chunk in topic.partition_data.chunks(SHORT) {
            if count + chunk.len() > SHORT {
                requests.push(Vec::new());
                count = 0;
            }
            let mut part = topic.clone();
            part.partition_data = chunk.to_vec();
            count += chunk.len();
            requests.last_mut().unwrap().push(part);
        }
    }
    requests
}

/// Topic answers from several responses, a topic split between responses merged back.
fn merged(responses: Vec<ProduceResponse>) -> Vec<TopicProduceResponse> {
    let mut topics: Vec<TopicProduceResponse> = Vec::new();
    for response in responses {
        for topic in response.responses {
            match topics.last_mut() {
                Some(last) if last.name == topic.name && last.topic_id == topic.topic_id => {
                    last.partition_responses.extend(topic.partition_responses);
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
                    vec![topic("real", id, (0..4).map(|p| (p, Some(batch("probe")))))],
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
    let records = (0..4).map(|p| (p, Some(batch("after"))));
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
                (0..600).map(|p| (p, Some(batch("x")))),
            ));
        }
        // Four partitions with a batch each, then 1,196 that do not exist.
        topics.push(topic(
            "real",
            real_id,
            (0..1200).map(|p| (p, (p < 4).then(|| batch(&format!("v{version}"))))),
        ));
        let whole = conn
            .send(&request(topics.clone(), -1), version)
            .await
            .unwrap();
        let mut answers = Vec::new();
        for part in shorter(&topics) {
            answers.push(conn.send(&request(part, -1), version).await.unwrap());
        }
        let short = merged(answers);
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
        topic("real", real_id, (0..4).map(|p| (p, Some(batch("zero"))))),
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
        topic("real", real_id, (0..4).map(|p| (p, Some(batch("never"))))),
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
