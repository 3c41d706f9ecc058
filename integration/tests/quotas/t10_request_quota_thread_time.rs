//! The request quota (`request_percentage`) charges the thread time spent on a request, not the
//! time it waits: CreateTopics spends most of its wall time waiting for the controller, the raft
//! commit (fsync) and the new image, and is charged only for decoding, encoding and the
//! handler's polls.

use std::time::{Duration, Instant};

use gregor_integration::admin::{creatable, create_topics};
use gregor_integration::{prom, GregorNode};
use kafka_protocol::messages::{AlterClientQuotasRequest, CreateTopicsRequest};

use super::{connect, quota_entry};

/// Two windows of an hour: every request lands in the first one, and the rate the node reports
/// is the total charged over a span between one window and one window plus the test's length.
const WINDOW_SECONDS: f64 = 3600.0;
const CLIENT: &str = "raft-waiter";
const REQUESTS: usize = 60;

#[tokio::test]
async fn create_topics_is_charged_far_less_than_its_wall_time() {
    let node = GregorNode::start(&[
        ("quota.window.num", "2"),
        ("quota.window.size.seconds", "3600"),
    ])
    .unwrap();
    let test_started = Instant::now();
    let mut admin = connect(&node).await;
    // A quota far above what the client uses: it turns the client's sensor on, never throttles.
    let request = AlterClientQuotasRequest::default().with_entries(vec![quota_entry(
        &[("client-id", Some(CLIENT))],
        &[("request_percentage", 1000.0, false)],
    )]);
    let response = admin
        .send::<AlterClientQuotasRequest>(&request, 1)
        .await
        .unwrap();
    assert_eq!(response.entries[0].error_code, 0);

    let mut client = connect(&node).await;
    client.set_client_id(Some(CLIENT));
    let mut wall = Duration::ZERO;
    for i in 0..REQUESTS {
        let request = create_topics(vec![creatable(&format!("charged-{i}"), 1, 1)], false);
        let sent = Instant::now();
        let response = client
            .send::<CreateTopicsRequest>(&request, 7)
            .await
            .unwrap();
        wall += sent.elapsed();
        assert_eq!(response.topics[0].error_code, 0, "{:?}", response.topics[0]);
        assert_eq!(response.throttle_time_ms, 0);
    }

    let samples = prom::parse(&prom::scrape(&node.metrics_addr()).await.unwrap()).unwrap();
    let rate = prom::value(
        &samples,
        "kafka_server_quota_request_time",
        &[("clientId", CLIENT)],
    )
    .unwrap_or_else(|| panic!("no request-time series for {CLIENT}"));
    // The rate is percent of a thread-second per second: charged seconds = rate / 100 × span.
    let span_upper = WINDOW_SECONDS + test_started.elapsed().as_secs_f64();
    let charged_upper = rate / 100.0 * span_upper;
    assert!(rate > 0.0, "the requests were charged nothing");
    assert!(
        charged_upper * 4.0 < wall.as_secs_f64(),
        "{REQUESTS} CreateTopics took {wall:?} of wall time and were charged up to \
         {charged_upper:.4} s: the waits are being charged"
    );
}
