//! After a known set of requests on a fresh node, the request counters, error counters and
//! time histograms show exactly those requests.

use std::time::Duration;

use gregor_integration::admin::{creatable, create_topics, delete_topics_by_name, metadata};
use gregor_integration::prom::{self, Sample};
use gregor_integration::{wait_until, GregorNode, KafkaConn};
use kafka_protocol::messages::{
    ApiVersionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeClusterRequest,
    MetadataRequest,
};

const REQUESTS: &str = "kafka_network_requestmetrics_requests_total";
const ERRORS: &str = "kafka_network_requestmetrics_errors_total";

fn v(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    prom::value(samples, name, labels)
}

#[tokio::test]
async fn request_counters_errors_and_histograms() {
    let node = GregorNode::start(&[]).unwrap();

    // The endpoint answers with Prometheus text before any request.
    let resp = prom::http_get(&node.metrics_addr(), "/metrics")
        .await
        .unwrap();
    assert_eq!(resp.status, 200);
    let content_type = resp
        .headers
        .get("content-type")
        .cloned()
        .unwrap_or_default();
    assert!(
        content_type.starts_with("text/plain"),
        "content-type {content_type:?}"
    );
    prom::parse(&resp.body).unwrap();

    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    for _ in 0..3 {
        conn.send::<MetadataRequest>(&metadata(12, None, false), 12)
            .await
            .unwrap();
    }
    conn.send::<MetadataRequest>(&metadata(1, None, false), 1)
        .await
        .unwrap();
    for _ in 0..2 {
        conn.send(&ApiVersionsRequest::default(), 0).await.unwrap();
    }
    let create = create_topics(vec![creatable("metrics-topic", 2, 1)], false);
    let ok = conn.send::<CreateTopicsRequest>(&create, 7).await.unwrap();
    assert_eq!(ok.topics[0].error_code, 0);
    let dup = conn.send::<CreateTopicsRequest>(&create, 7).await.unwrap();
    assert_eq!(dup.topics[0].error_code, 36);
    conn.send(&DescribeClusterRequest::default(), 0)
        .await
        .unwrap();
    let del = conn
        .send::<DeleteTopicsRequest>(&delete_topics_by_name(6, &["never-existed"]), 6)
        .await
        .unwrap();
    assert_eq!(del.responses[0].error_code, 3);

    // Metrics may be recorded just after the response is written: wait for the last one.
    let addr = node.metrics_addr();
    let (text, samples) = wait_until(
        "the DeleteTopics request to be counted",
        Duration::from_secs(10),
        || {
            let addr = addr.clone();
            async move {
                let text = prom::scrape(&addr).await?;
                let samples = prom::parse(&text)?;
                let done = v(
                    &samples,
                    REQUESTS,
                    &[("request", "DeleteTopics"), ("version", "6")],
                ) == Some(1.0)
                    && v(
                        &samples,
                        REQUESTS,
                        &[("request", "Metadata"), ("version", "12")],
                    ) == Some(3.0);
                Ok(done.then_some((text, samples)))
            }
        },
    )
    .await
    .unwrap_or_else(|e| panic!("{e:#}\n--- metrics ---\n{}", futures_text(&node)));

    let mut failures = Vec::new();
    for (request, version, count) in [
        ("Metadata", "12", 3.0),
        ("Metadata", "1", 1.0),
        ("ApiVersions", "0", 2.0),
        ("CreateTopics", "7", 2.0),
        ("DescribeCluster", "0", 1.0),
        ("DeleteTopics", "6", 1.0),
    ] {
        want(
            &mut failures,
            format!("{REQUESTS}{{request={request},version={version}}}"),
            v(
                &samples,
                REQUESTS,
                &[("request", request), ("version", version)],
            ),
            count,
        );
    }
    for (request, error, count) in [
        ("CreateTopics", "NONE", 1.0),
        ("CreateTopics", "TOPIC_ALREADY_EXISTS", 1.0),
        ("DeleteTopics", "UNKNOWN_TOPIC_OR_PARTITION", 1.0),
        ("DescribeCluster", "NONE", 1.0),
    ] {
        want(
            &mut failures,
            format!("{ERRORS}{{request={request},error={error}}}"),
            v(&samples, ERRORS, &[("request", request), ("error", error)]),
            count,
        );
    }
    // No error that did not happen.
    for s in prom::matching(&samples, ERRORS, &[("request", "CreateTopics")]) {
        let e = s.labels.get("error").map(String::as_str).unwrap_or("");
        if !["NONE", "TOPIC_ALREADY_EXISTS"].contains(&e) && s.value != 0.0 {
            failures.push(format!("unexpected CreateTopics error series {s:?}"));
        }
    }

    // Histograms in seconds, one observation per request.
    for base in [
        "kafka_network_requestmetrics_request_queue_time_seconds",
        "kafka_network_requestmetrics_local_time_seconds",
        "kafka_network_requestmetrics_throttle_time_seconds",
        "kafka_network_requestmetrics_response_send_time_seconds",
        "kafka_network_requestmetrics_total_time_seconds",
        "kafka_network_requestmetrics_request_bytes",
    ] {
        let ty = prom::declared_type(&text, base);
        if ty.as_deref() != Some("histogram") {
            failures.push(format!("{base}: # TYPE is {ty:?}, want histogram"));
        }
        for (request, count) in [
            ("Metadata", 4.0),
            ("CreateTopics", 2.0),
            ("ApiVersions", 2.0),
        ] {
            want(
                &mut failures,
                format!("{base}_count{{request={request}}}"),
                v(&samples, &format!("{base}_count"), &[("request", request)]),
                count,
            );
            let sum = v(&samples, &format!("{base}_sum"), &[("request", request)]);
            if !sum.is_some_and(|s| s >= 0.0 && s.is_finite()) {
                failures.push(format!("{base}_sum{{request={request}}} is {sum:?}"));
            }
            let inf = v(
                &samples,
                &format!("{base}_bucket"),
                &[("request", request), ("le", "+Inf")],
            );
            if inf != Some(count) {
                failures.push(format!(
                    "{base}_bucket{{request={request},le=+Inf}}: got {inf:?}, want {count}"
                ));
            }
        }
    }
    // Total time is at least local time, and a request on loopback takes well under a second.
    let total = v(
        &samples,
        "kafka_network_requestmetrics_total_time_seconds_sum",
        &[("request", "Metadata")],
    );
    let local = v(
        &samples,
        "kafka_network_requestmetrics_local_time_seconds_sum",
        &[("request", "Metadata")],
    );
    if let (Some(total), Some(local)) = (total, local) {
        if total + 1e-9 < local {
            failures.push(format!("Metadata total time {total} < local time {local}"));
        }
        if total > 4.0 {
            failures.push(format!(
                "Metadata total time {total} s for 4 requests: not seconds?"
            ));
        }
    }
    // Request bytes are bytes: a Metadata v12 all-topics request is a few dozen.
    let bytes = v(
        &samples,
        "kafka_network_requestmetrics_request_bytes_sum",
        &[("request", "Metadata")],
    );
    if !bytes.is_some_and(|b| (40.0..4000.0).contains(&b)) {
        failures.push(format!(
            "Metadata request_bytes_sum {bytes:?} is not a plausible byte count"
        ));
    }

    assert!(
        failures.is_empty(),
        "{} metric failure(s):\n  {}\n--- metrics (kafka_network_requestmetrics_*) ---\n{}",
        failures.len(),
        failures.join("\n  "),
        text.lines()
            .filter(|l| l.contains("requestmetrics"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

fn want(failures: &mut Vec<String>, what: String, got: Option<f64>, expected: f64) {
    if got != Some(expected) {
        failures.push(format!("{what}: got {got:?}, want {expected}"));
    }
}

/// Best-effort scrape for a failure message.
fn futures_text(node: &GregorNode) -> String {
    let addr = node.metrics_addr();
    std::thread::spawn(move || {
        tokio::runtime::Runtime::new()
            .ok()
            .and_then(|rt| rt.block_on(prom::scrape(&addr)).ok())
            .unwrap_or_default()
    })
    .join()
    .unwrap_or_default()
}
