//! A short churn run against a real node: every option that changes what is measured, the
//! JSON report's shape, the SVG plot, broker metrics, and a clean broker afterwards.

use std::time::Duration;

use gregor_integration::admin::metadata;
use gregor_integration::{GregorNode, KafkaConn};
use kafka_protocol::messages::MetadataRequest;
use serde_json::Value;

use crate::churn;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn short_run_writes_a_complete_report_and_cleans_up() {
    let node = GregorNode::start(&[]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let svg = dir.path().join("plot.svg");
    let bootstrap = node.bootstrap();
    let metrics_url = node.metrics_url();
    let (json_s, svg_s) = (json.to_str().unwrap(), svg.to_str().unwrap());
    let out = tokio::task::spawn_blocking({
        let args: Vec<String> = [
            "-b",
            &bootstrap,
            "--live-partitions",
            "40",
            "--partitions-per-topic",
            "2",
            "--concurrency",
            "2",
            "--ops",
            "60",
            "--duration",
            "60s",
            "--metadata-readers",
            "1",
            "--seed",
            "42",
            "--topic-prefix",
            "t10-churn",
            "--metrics-url",
            &metrics_url,
            "--rss-interval",
            "200ms",
            "--echo-baseline",
            "--echo-duration",
            "300ms",
            "--json",
            json_s,
            "--plot",
            svg_s,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            churn(&args, Duration::from_secs(120))
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(stdout.contains("create_topic"), "{stdout}");
    assert!(stdout.contains("p99.9 ms"), "{stdout}");

    let report: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(report["seed"], 42);
    assert_eq!(report["mutations"], 60, "{report:#}");
    assert_eq!(report["errors"], 0, "{report:#}");
    assert_eq!(report["transport_errors"], 0);
    assert_eq!(report["fill"]["topics"], 20);
    assert_eq!(report["live_partitions_start"], 40);
    let ops = report["operations"].as_array().unwrap();
    let names: Vec<&str> = ops.iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["create_topic", "add_partitions", "delete_topic", "metadata"]
    );
    let total: u64 = ops[..3]
        .iter()
        .map(|o| o["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 60);
    for op in ops {
        for key in ["p50_us", "p99_us", "p999_us", "max_us", "count"] {
            assert!(op["latency"][key].is_u64(), "{key} in {op:#}");
        }
        assert!(op["throttling_quota_exceeded"].is_u64());
        assert!(op["throttle_time_ms_total"].is_u64());
        assert!(op["errors_by_code"].is_object());
    }
    assert!(ops[3]["requests"].as_u64().unwrap() > 0, "readers ran");
    assert!(report["propagation"]["seen"].as_u64().unwrap() > 0);
    let m = &report["broker_metrics"];
    assert_eq!(
        m["requests_delta"]["CreateTopics"].as_f64().unwrap() as u64,
        ops[0]["requests"].as_u64().unwrap(),
        "broker-side count of the measured phase"
    );
    assert!(m["rss_after_bytes"].as_f64().unwrap() > 1e6);
    assert!(!m["rss_samples"].as_array().unwrap().is_empty());
    assert!(
        report["echo_baseline"]["echo"]["round_trips_per_s"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert!(!report["timeline"].as_array().unwrap().is_empty());
    let svg_text = std::fs::read_to_string(&svg).unwrap();
    assert!(svg_text.contains("<svg"), "{svg_text:.200}");

    // The clean-up deleted every topic the run still held.
    assert_eq!(
        report["cleanup_deleted"].as_u64(),
        report["live_topics_end"].as_u64()
    );
    let mut conn = KafkaConn::connect(&bootstrap).await.unwrap();
    let listed = conn
        .send::<MetadataRequest>(&metadata(12, None, false), 12)
        .await
        .unwrap();
    let left: Vec<_> = listed
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .filter(|n| n.starts_with("t10-churn"))
        .collect();
    assert!(left.is_empty(), "topics left behind: {left:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn library_run_with_a_permissive_create_version_and_several_client_ids() {
    use clap::Parser;
    use gregor_integration::churn::{args::ChurnArgs, run};
    let node = GregorNode::start(&[]).unwrap();
    let args = ChurnArgs::try_parse_from([
        "gregor-churn",
        // Kafka's tools' spelling, as every other Gregor tool takes it.
        "--bootstrap-server",
        &node.bootstrap(),
        "--live-partitions",
        "10",
        "--mix",
        "1:0:1",
        "--concurrency",
        "3",
        "--client-ids",
        "3",
        "--create-topics-version",
        "5",
        "--duration",
        "1s",
        "--rate",
        "50",
        "--quiet",
    ])
    .unwrap();
    let report = run(args).await.unwrap();
    assert_eq!(report.versions.create_topics, 5);
    assert_eq!(report.error, None);
    // Paced at 50/s for 1 s: about 50 mutations (the pacing is the limit, not the broker).
    assert!(
        (30..=51).contains(&report.mutations),
        "{}",
        report.mutations
    );
    assert_eq!(report.errors, 0);
    // Only creates and deletes, steered around the 10-partition target.
    assert_eq!(report.operations[1].requests, 0);
    assert!(
        report.live_partitions_end <= 14,
        "{}",
        report.live_partitions_end
    );
}
