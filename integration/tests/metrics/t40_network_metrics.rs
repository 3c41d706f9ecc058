//! The network gauges Kafka dashboards read: the request queue size (requests read and not yet
//! answered) and the network processors' average idle ratio.

use std::time::Duration;

use gregor_integration::admin::{creatable, create_topics, topic_name};
use gregor_integration::prom::{self, http_get};
use gregor_integration::{wait_until, GregorNode, KafkaConn};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{BrokerId, CreateTopicsRequest, FetchRequest};

const QUEUE_SIZE: &str = "kafka_network_requestchannel_requestqueuesize";
const IDLE: &str = "kafka_network_socketserver_networkprocessoravgidlepercent";

async fn gauge(node: &GregorNode, name: &str) -> anyhow::Result<Option<f64>> {
    let body = http_get(&node.metrics_addr(), "/metrics").await?.body;
    Ok(prom::value(&prom::parse(&body)?, name, &[]))
}

async fn wait_for_queue_size(node: &GregorNode, expected: f64) {
    wait_until(
        &format!("{QUEUE_SIZE} = {expected}"),
        Duration::from_secs(30),
        || async move { Ok((gauge(node, QUEUE_SIZE).await? == Some(expected)).then_some(())) },
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_waiting_fetch_is_counted_in_the_request_queue_until_answered() {
    let node = GregorNode::start(&[]).unwrap();
    let mut admin = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let created = admin
        .send::<CreateTopicsRequest>(&create_topics(vec![creatable("long-poll", 1, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    // An empty partition and min_bytes 1: the fetch waits its whole max_wait_ms in the handler,
    // long enough for a scrape on a loaded machine to see it.
    let fetch = |max_wait_ms| {
        FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(max_wait_ms)
            .with_min_bytes(1)
            .with_max_bytes(1 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(topic_name("long-poll"))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(0)
                    .with_partition_max_bytes(1 << 20)])])
    };
    // Until its log is open a fetch is answered at once (NOT_LEADER_OR_FOLLOWER).
    wait_until("the partition served", Duration::from_secs(30), || {
        let fetch = fetch(0);
        let addr = node.bootstrap();
        async move {
            let mut conn = KafkaConn::connect(&addr).await?;
            let answer = conn.send::<FetchRequest>(&fetch, 12).await?;
            Ok((answer.responses[0].partitions[0].error_code == 0).then_some(()))
        }
    })
    .await
    .unwrap();
    wait_for_queue_size(&node, 0.0).await;
    let mut consumer = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    consumer.set_timeout(Duration::from_secs(60));
    consumer.write_request(&fetch(15_000), 12, 1).await.unwrap();
    wait_for_queue_size(&node, 1.0).await;

    let (_, answer) = consumer.read_response::<FetchRequest>(12).await.unwrap();
    assert_eq!(answer.responses[0].partitions[0].error_code, 0);
    wait_for_queue_size(&node, 0.0).await;
}

#[tokio::test]
async fn the_processor_idle_ratio_is_a_fraction() {
    let node = GregorNode::start(&[]).unwrap();
    // Sampled every second from the runtime's worker busy time; present from start-up.
    let idle = wait_until(IDLE, Duration::from_secs(30), || async {
        gauge(&node, IDLE).await
    })
    .await
    .unwrap();
    assert!((0.0..=1.0).contains(&idle), "{IDLE} = {idle}");
}
