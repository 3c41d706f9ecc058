//! Quota series are labelled with client-chosen client ids; Kafka removes them with their
//! sensor after an hour idle. The node here runs with the test knob
//! `GREGOR_QUOTA_SENSOR_EXPIRY_MS=1500`, so the whole life of a series is seen in a few seconds
//! of a live scrape.

use std::time::Duration;

use gregor_integration::prom;
use gregor_integration::wait::wait_until;
use gregor_integration::{GregorNode, KafkaConn};
use kafka_protocol::messages::{AlterClientQuotasRequest, ApiVersionsRequest};

use super::quota_entry;

const EXPIRY_MS: &str = "1500";

/// Whether the scrape has a `kafka_server_quota_request_time` series for `client_id`.
async fn has_request_series(node: &GregorNode, client_id: &str) -> anyhow::Result<bool> {
    let samples = prom::parse(&prom::scrape(&node.metrics_addr()).await?)?;
    Ok(prom::value(
        &samples,
        "kafka_server_quota_request_time",
        &[("resource", "Request"), ("clientId", client_id)],
    )
    .is_some())
}

#[tokio::test]
async fn an_idle_client_ids_series_leave_the_scrape_with_its_sensor() {
    let node =
        GregorNode::start_with_env(&[], None, &[("GREGOR_QUOTA_SENSOR_EXPIRY_MS", EXPIRY_MS)])
            .unwrap();
    let mut admin = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    // A default request quota for every client id gives each client id its own sensor.
    let response = admin
        .send::<AlterClientQuotasRequest>(
            &AlterClientQuotasRequest::default().with_entries(vec![quota_entry(
                &[("client-id", None)],
                &[("request_percentage", 1000.0, false)],
            )]),
            1,
        )
        .await
        .unwrap();
    assert_eq!(response.entries[0].error_code, 0);

    let mut client = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    client.set_client_id(Some("short-lived-client"));
    let client = tokio::sync::Mutex::new(client);
    // One request from the client, then whether its series is in the scrape.
    let use_then_scrape = || async {
        client
            .lock()
            .await
            .send::<ApiVersionsRequest>(&ApiVersionsRequest::default(), 3)
            .await?;
        Ok(has_request_series(&node, "short-lived-client")
            .await?
            .then_some(()))
    };
    // The quota reaches the request path through the image; ask until a request is recorded.
    wait_until(
        "the client id's quota series",
        Duration::from_secs(30),
        use_then_scrape,
    )
    .await
    .unwrap();

    // Idle from now on: the series goes with the sensor (1.5 s idle, scanned every 375 ms).
    wait_until(
        "the idle client id's series to leave the scrape",
        Duration::from_secs(30),
        || async { Ok((!has_request_series(&node, "short-lived-client").await?).then_some(())) },
    )
    .await
    .unwrap();
    // The node keeps serving, and a returning client id gets a fresh series.
    wait_until(
        "the returning client id's series",
        Duration::from_secs(30),
        use_then_scrape,
    )
    .await
    .unwrap();
}
