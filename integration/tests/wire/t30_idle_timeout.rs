//! `connections.max.idle.ms`: a connection with no traffic for that long is closed by the node;
//! one that keeps sending is not.

use std::time::{Duration, Instant};

use gregor_integration::admin::metadata;
use gregor_integration::{Closed, GregorNode, KafkaConn};
use kafka_protocol::messages::MetadataRequest;

const IDLE_MS: u64 = 1500;

#[tokio::test]
async fn idle_connections_are_closed_after_connections_max_idle_ms() {
    let node = GregorNode::start(&[("connections.max.idle.ms", "1500")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.send::<MetadataRequest>(&metadata(12, None, false), 12)
        .await
        .unwrap();
    let last_activity = Instant::now();
    // Kafka closes idle connections on its next check after the idle time: allow generous slack
    // above, none below.
    let closed = conn.wait_closed(Duration::from_millis(IDLE_MS) * 8).await;
    let idle_for = last_activity.elapsed();
    assert_eq!(
        closed,
        Closed::Silently,
        "an idle connection was not closed within {:?}",
        Duration::from_millis(IDLE_MS) * 8
    );
    assert!(
        idle_for >= Duration::from_millis(IDLE_MS - 100),
        "closed after {idle_for:?}, before connections.max.idle.ms={IDLE_MS}"
    );
}

#[tokio::test]
async fn a_busy_connection_outlives_the_idle_timeout() {
    let node = GregorNode::start(&[("connections.max.idle.ms", "1500")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let started = Instant::now();
    // One request every 300 ms for three idle periods: never idle for 1500 ms.
    let mut ticker = tokio::time::interval(Duration::from_millis(300));
    while started.elapsed() < Duration::from_millis(IDLE_MS * 3) {
        ticker.tick().await;
        conn.send::<MetadataRequest>(&metadata(12, None, false), 12)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "a connection active every 300 ms was closed after {:?}: {e:#}",
                    started.elapsed()
                )
            });
    }
}

#[tokio::test]
async fn a_request_still_arriving_outlives_the_idle_timeout() {
    // Kafka's Selector counts idleness from a connection's last read: a request whose bytes
    // trickle in over three idle periods is served, and the connection is closed only after
    // an idle period with no byte at all.
    let node = GregorNode::start(&[("connections.max.idle.ms", "1500")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let frame = gregor_integration::encode_request(&metadata(12, None, false), 12, 7, Some("slow"))
        .unwrap();
    let started = Instant::now();
    let pause = Duration::from_millis(IDLE_MS * 3) / frame.len() as u32;
    for byte in frame.iter() {
        conn.write_raw(&[*byte]).await.unwrap();
        tokio::time::sleep(pause.min(Duration::from_millis(300))).await;
    }
    assert!(started.elapsed() > Duration::from_millis(IDLE_MS));
    let answer = conn.read_frame().await.unwrap_or_else(|e| {
        panic!(
            "a request arriving a byte at a time was cut off after {:?}: {e:#}",
            started.elapsed()
        )
    });
    assert!(answer.is_some(), "closed instead of answered");
}
