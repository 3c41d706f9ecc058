//! A broker whose active controller is gone keeps a forwarded request until the forwarding
//! timeout (60 s, Kafka's `retryTimeoutMs` for the forwarding channel) and then answers
//! REQUEST_TIMED_OUT, as Kafka's `ForwardingManager` does when its retries run out; not
//! NOT_CONTROLLER, which the admin client would retry.

use std::time::Duration;

use gregor_integration::admin::{creatable, create_topics, metadata};
use gregor_integration::KafkaConn;
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest};

use crate::{wait_forwarding, Cluster};

const REQUEST_TIMED_OUT: i16 = 7;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_the_controller_never_gets_times_out() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(1, 1)?;
    let broker = cluster.brokers[0].1.bootstrap();
    wait_forwarding(&broker).await?;
    cluster.controllers[0].1.kill9()?;

    let mut conn = KafkaConn::connect(&broker).await?;
    conn.set_timeout(Duration::from_secs(180));
    let request = create_topics(vec![creatable("never-created", 1, 1)], false);
    let response = conn.send::<CreateTopicsRequest>(&request, 7).await?;
    let topic = &response.topics[0];
    assert_eq!(
        topic.error_code, REQUEST_TIMED_OUT,
        "{:?}",
        topic.error_message
    );
    // The connection serves on: the broker answers Metadata from its own image.
    let brokers = conn
        .send::<MetadataRequest>(&metadata(12, None, false), 12)
        .await?
        .brokers;
    assert_eq!(brokers.len(), 1);
    Ok(())
}
