//! Fetch answers shaped as Kafka shapes them: a consumer's last fetched epoch checked against
//! the leader epoch cache, and partitions refused before the read answered after those read
//! (with empty records, which librdkafka needs) and not ending a long poll.

use std::time::{Duration, Instant};

use gregor_integration::admin::{creatable, create_topics, topic_name};
use gregor_integration::frames::one_record_batch;
use gregor_integration::{wait_until, GregorNode, KafkaConn};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{BrokerId, FetchRequest, ProduceRequest};

/// A Produce of one record to t1's partition 0.
fn produce_one() -> ProduceRequest {
    let partition = PartitionProduceData::default()
        .with_index(0)
        .with_records(Some(one_record_batch("v").unwrap()));
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name("t1"))
            .with_partition_data(vec![partition])])
}

/// Each topic's name with its partitions' (index, error code).
fn shape<T, P>(
    topics: &[T],
    name: impl Fn(&T) -> String,
    partitions: impl Fn(&T) -> &[P],
    answer: impl Fn(&P) -> (i32, i16),
) -> Vec<(String, Vec<(i32, i16)>)> {
    topics
        .iter()
        .map(|t| (name(t), partitions(t).iter().map(&answer).collect()))
        .collect()
}

/// A node with topic `t1` (2 partitions), partition 0 holding 3 records in leader epoch 0.
async fn node_with_records() -> (GregorNode, KafkaConn) {
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let created = conn
        .send(&create_topics(vec![creatable("t1", 2, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    let bootstrap = node.bootstrap();
    wait_until("t1 takes appends", Duration::from_secs(30), || {
        let bootstrap = bootstrap.clone();
        async move {
            let mut conn = KafkaConn::connect(&bootstrap).await?;
            let answer = conn.send(&produce_one(), 9).await?;
            Ok((answer.responses[0].partition_responses[0].error_code == 0).then_some(()))
        }
    })
    .await
    .unwrap();
    for _ in 0..2 {
        let answer = conn.send(&produce_one(), 9).await.unwrap();
        assert_eq!(answer.responses[0].partition_responses[0].error_code, 0);
    }
    (node, conn)
}

/// A topic to fetch: its name and its partitions (partition, offset, last fetched epoch).
type Fetched<'a> = (&'a str, Vec<(i32, i64, i32)>);

/// A consumer's Fetch (v12, by name, no session) of `topics`.
fn fetch(topics: &[Fetched<'_>], max_wait_ms: i32) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(
            topics
                .iter()
                .map(|(name, partitions)| {
                    FetchTopic::default()
                        .with_topic(topic_name(name))
                        .with_partitions(
                            partitions
                                .iter()
                                .map(|&(partition, offset, last_fetched_epoch)| {
                                    FetchPartition::default()
                                        .with_partition(partition)
                                        .with_fetch_offset(offset)
                                        .with_last_fetched_epoch(last_fetched_epoch)
                                        .with_partition_max_bytes(1 << 20)
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

#[tokio::test]
async fn a_consumers_last_fetched_epoch_is_checked() {
    let (_node, mut conn) = node_with_records().await;
    // Epoch 0 ends at the log end, 3.
    let cases = [
        // (offset, last fetched epoch) -> (error, diverging epoch, end offset)
        ((2, 0), (0, -1, -1)),
        ((3, 0), (0, -1, -1)),
        ((5, 0), (0, 0, 3)),
        ((1, 7), (1, -1, -1)),
    ];
    for ((offset, last), (error, epoch, end_offset)) in cases {
        let started = Instant::now();
        let answer = conn
            .send(&fetch(&[("t1", vec![(0, offset, last)])], 3000), 12)
            .await
            .unwrap();
        let partition = &answer.responses[0].partitions[0];
        let got = (
            partition.error_code,
            partition.diverging_epoch.epoch,
            partition.diverging_epoch.end_offset,
        );
        assert_eq!(
            got,
            (error, epoch, end_offset),
            "offset {offset}, epoch {last}"
        );
        if epoch >= 0 {
            assert!(
                started.elapsed() < Duration::from_secs(2),
                "a diverging epoch is answered at once"
            );
            assert_eq!(partition.records.as_deref(), Some(&b""[..]));
        }
    }
}

#[tokio::test]
async fn partitions_refused_before_the_read_come_last_and_wait_with_the_rest() {
    let (_node, mut conn) = node_with_records().await;
    let request = fetch(
        &[
            ("t1", vec![(1, 0, -1)]),
            ("nosuch", vec![(0, 0, -1)]),
            ("t1", vec![(9, 0, -1), (0, 99, -1)]),
        ],
        0,
    );
    let answer = conn.send(&request, 12).await.unwrap();
    let shape = shape(
        &answer.responses,
        |t| t.topic.to_string(),
        |t| &t.partitions,
        |p| (p.partition_index, p.error_code),
    );
    let want = vec![
        ("t1".to_owned(), vec![(1, 0), (0, 1)]),
        ("nosuch".to_owned(), vec![(0, 3)]),
        ("t1".to_owned(), vec![(9, 3)]),
    ];
    assert_eq!(shape, want);
    // Refused before the read or failed in it: empty records (never null: librdkafka fails
    // the whole response on them), null aborted transactions.
    let refused = &answer.responses[1].partitions[0];
    assert_eq!(refused.records.as_deref(), Some(&b""[..]));
    assert_eq!(refused.aborted_transactions, None);
    let failed = &answer.responses[0].partitions[1];
    assert_eq!(failed.records.as_deref(), Some(&b""[..]));
    assert_eq!(failed.aborted_transactions, None);

    // An unknown topic beside a partition at its high watermark: the long poll waits.
    let started = Instant::now();
    let waiting = fetch(
        &[("t1", vec![(1, 0, -1)]), ("nosuch", vec![(0, 0, -1)])],
        1500,
    );
    conn.send(&waiting, 12).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(1400),
        "{:?}",
        started.elapsed()
    );
    // Only refused partitions: answered at once.
    let started = Instant::now();
    conn.send(&fetch(&[("nosuch", vec![(0, 0, -1)])], 3000), 12)
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}
