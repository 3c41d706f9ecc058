//! Kafka's per-partition log gauges (`kafka.log:type=Log`: `Size`, `NumLogSegments`,
//! `LogStartOffset`, `LogEndOffset`, labelled `topic` and `partition`) and its flush timer
//! (`LogFlushStats.LogFlushRateAndTimeMs`) on a live node: exact values after produces that
//! roll segments and a DeleteRecords, and every series of a deleted topic gone.

use std::time::Duration;

use gregor_integration::admin::{
    creatable, create_topics, delete_topics_by_name, topic_name, with_configs,
};
use gregor_integration::frames::one_record_batch;
use gregor_integration::prom::{self, http_get};
use gregor_integration::{wait_until, GregorNode, KafkaConn};
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    CreateTopicsRequest, DeleteRecordsRequest, DeleteTopicsRequest, ProduceRequest,
};

const TOPIC: &str = "logged";

/// Size, NumLogSegments, LogStartOffset, LogEndOffset.
const LOG_GAUGES: [&str; 4] = [
    "kafka_log_log_size",
    "kafka_log_log_numlogsegments",
    "kafka_log_log_logstartoffset",
    "kafka_log_log_logendoffset",
];

const FLUSHES: &str = "kafka_log_logflushstats_logflushrateandtimems_count";

/// The four gauges of each partition of [`TOPIC`] (`None`: absent), and the flush count.
async fn scrape(
    node: &GregorNode,
    partitions: i32,
) -> anyhow::Result<(Vec<[Option<f64>; 4]>, f64)> {
    let samples = prom::parse(&http_get(&node.metrics_addr(), "/metrics").await?.body)?;
    let gauges = (0..partitions)
        .map(|partition| {
            let partition = partition.to_string();
            LOG_GAUGES.map(|name| {
                prom::value(
                    &samples,
                    name,
                    &[("topic", TOPIC), ("partition", partition.as_str())],
                )
            })
        })
        .collect();
    Ok((gauges, prom::value(&samples, FLUSHES, &[]).unwrap_or(0.0)))
}

/// Waits until the scrape shows `expected` gauges for partitions 0 and 1 and `flushes` flushes.
async fn wait_for_logs(node: &GregorNode, expected: [[Option<f64>; 4]; 2], flushes: f64) {
    let shown = wait_until("the log gauges", Duration::from_secs(30), || async {
        let (gauges, flushed) = scrape(node, 2).await?;
        Ok((gauges == expected && flushed == flushes).then_some(()))
    })
    .await;
    if shown.is_err() {
        let last = scrape(node, 2).await;
        panic!("wanted {expected:?} and {flushes} flushes, last {last:?}");
    }
}

fn produce(value: &str) -> ProduceRequest {
    let partition = PartitionProduceData::default()
        .with_index(0)
        .with_records(Some(one_record_batch(value).unwrap()));
    ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(TOPIC))
            .with_partition_data(vec![partition])])
}

#[tokio::test]
async fn log_gauges_follow_appends_rolls_and_deletions() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    // The smallest segments Kafka allows, and a flush after every append.
    let topic = with_configs(
        creatable(TOPIC, 2, 1),
        &[("segment.bytes", "1048576"), ("flush.messages", "1")],
    );
    let created = conn
        .send::<CreateTopicsRequest>(&create_topics(vec![topic], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    let empty = [Some(0.0), Some(1.0), Some(0.0), Some(0.0)];
    wait_for_logs(&node, [empty, empty], 0.0).await;

    // Three batches of 600,000-byte records: the second and the third each roll a segment.
    let value = "x".repeat(600_000);
    let batch = one_record_batch(&value).unwrap().len() as f64;
    for _ in 0..3 {
        let answer = conn
            .send::<ProduceRequest>(&produce(&value), 9)
            .await
            .unwrap();
        let partition = &answer.responses[0].partition_responses[0];
        assert_eq!(partition.error_code, 0, "{answer:?}");
    }
    // Each append flushes the active segment, and the flusher thread each rolled one.
    wait_for_logs(
        &node,
        [[Some(3.0 * batch), Some(3.0), Some(0.0), Some(3.0)], empty],
        5.0,
    )
    .await;

    // DeleteRecords moves the log start; the segments below it go at the next retention pass.
    let deleted = conn
        .send::<DeleteRecordsRequest>(
            &DeleteRecordsRequest::default()
                .with_timeout_ms(30_000)
                .with_topics(vec![DeleteRecordsTopic::default()
                    .with_name(topic_name(TOPIC))
                    .with_partitions(vec![DeleteRecordsPartition::default()
                        .with_partition_index(0)
                        .with_offset(2)])]),
            2,
        )
        .await
        .unwrap();
    assert_eq!(deleted.topics[0].partitions[0].error_code, 0, "{deleted:?}");
    wait_for_logs(
        &node,
        [[Some(3.0 * batch), Some(3.0), Some(2.0), Some(3.0)], empty],
        5.0,
    )
    .await;

    let gone = conn
        .send::<DeleteTopicsRequest>(&delete_topics_by_name(6, &[TOPIC]), 6)
        .await
        .unwrap();
    assert_eq!(gone.responses[0].error_code, 0, "{gone:?}");
    wait_for_logs(&node, [[None; 4], [None; 4]], 5.0).await;
}
