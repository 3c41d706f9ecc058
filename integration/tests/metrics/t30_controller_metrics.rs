//! The controller gauges Kafka dashboards read (`kafka.controller:type=KafkaController`): the
//! active controller count and the image's topic, partition, offline-partition and broker
//! counts, following topic creation and deletion on a live node.

use std::time::Duration;

use gregor_integration::admin::{creatable, create_topics, delete_topics_by_name};
use gregor_integration::prom::{self, http_get};
use gregor_integration::{wait_until, GregorNode, KafkaConn};
use kafka_protocol::messages::{CreateTopicsRequest, DeleteTopicsRequest};

const GAUGES: [&str; 6] = [
    "kafka_controller_kafkacontroller_activecontrollercount",
    "kafka_controller_kafkacontroller_globaltopiccount",
    "kafka_controller_kafkacontroller_globalpartitioncount",
    "kafka_controller_kafkacontroller_offlinepartitionscount",
    "kafka_controller_kafkacontroller_fencedbrokercount",
    "kafka_controller_kafkacontroller_activebrokercount",
];

/// Waits until the node's gauges read `expected` (in `GAUGES` order).
async fn wait_for_gauges(node: &GregorNode, expected: [f64; 6]) {
    let addr = node.metrics_addr();
    wait_until("the controller gauges", Duration::from_secs(30), || {
        let addr = addr.clone();
        async move {
            let body = http_get(&addr, "/metrics").await?.body;
            let samples = prom::parse(&body)?;
            let read: Vec<Option<f64>> = GAUGES
                .iter()
                .map(|name| prom::value(&samples, name, &[]))
                .collect();
            Ok((read == expected.map(Some)).then_some(()))
        }
    })
    .await
    .unwrap();
}

#[tokio::test]
async fn controller_gauges_follow_the_image() {
    let node = GregorNode::start(&[]).unwrap();
    // One combined node: the active controller, one unfenced broker, no topics yet.
    wait_for_gauges(&node, [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]).await;

    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let created = conn
        .send::<CreateTopicsRequest>(
            &create_topics(
                vec![creatable("gauged-a", 3, 1), creatable("gauged-b", 2, 1)],
                false,
            ),
            7,
        )
        .await
        .unwrap();
    assert!(
        created.topics.iter().all(|t| t.error_code == 0),
        "{created:?}"
    );
    wait_for_gauges(&node, [1.0, 2.0, 5.0, 0.0, 0.0, 1.0]).await;

    let deleted = conn
        .send::<DeleteTopicsRequest>(&delete_topics_by_name(6, &["gauged-a"]), 6)
        .await
        .unwrap();
    assert_eq!(deleted.responses[0].error_code, 0, "{deleted:?}");
    wait_for_gauges(&node, [1.0, 1.0, 2.0, 0.0, 0.0, 1.0]).await;
}
