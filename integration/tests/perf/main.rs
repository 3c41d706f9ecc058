//! `gregor-perf` end to end: each mode against a node started by the harness, its output lines
//! and JSON report, and the failures a user meets first.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use gregor_integration::admin::{creatable, create_topics};
use gregor_integration::{GregorNode, KafkaConn};
use kafka_protocol::messages::CreateTopicsRequest;

/// Runs `gregor-perf` with `args` on a blocking thread, failing the test past `timeout`.
async fn perf(args: &[&str], timeout: Duration) -> Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gregor-perf"))
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawning gregor-perf");
        let deadline = Instant::now() + timeout;
        while child.try_wait().expect("waiting for gregor-perf").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let out = child.wait_with_output().expect("collecting output");
                panic!(
                    "gregor-perf {args:?} ran over {timeout:?}\nstdout:\n{}\nstderr:\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        child
            .wait_with_output()
            .expect("collecting gregor-perf output")
    })
    .await
    .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn report(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

async fn create(node: &GregorNode, topics: &[(&str, i32)]) {
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let request = create_topics(
        topics
            .iter()
            .map(|(name, n)| creatable(name, *n, 1))
            .collect(),
        false,
    );
    let response = conn.send::<CreateTopicsRequest>(&request, 7).await.unwrap();
    assert!(
        response.topics.iter().all(|t| t.error_code == 0),
        "{response:?}"
    );
}

/// `gregor-perf produce` of `records` 200-byte records to topic `perf`, the first `warmup` a
/// warm-up, then `more` arguments.
fn produce_to_perf<'a>(
    bootstrap: &'a str,
    records: &'a str,
    warmup: &'a str,
    more: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "produce",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        "perf",
        "--num-records",
        records,
        "--record-size",
        "200",
        "--throughput",
        "-1",
        "--warmup-records",
        warmup,
    ];
    args.extend_from_slice(more);
    args
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_consume_and_latency_runs_report_what_went_through() {
    let node = GregorNode::start(&[("group.initial.rebalance.delay.ms", "0")]).unwrap();
    create(&node, &[("perf", 3), ("round-trip", 1)]).await;
    let bootstrap = node.bootstrap();
    let dir = tempfile::tempdir().unwrap();

    let produced = dir.path().join("produce.json");
    let out = perf(
        &produce_to_perf(
            &bootstrap,
            "3000",
            "1000",
            &[
                "--producer-props",
                "acks=all",
                "enable.idempotence=true",
                "--json",
                produced.to_str().unwrap(),
            ],
        ),
        Duration::from_secs(120),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.first().copied(),
        Some("Warmup first 1000 records. Steady state results will print after the complete test summary."),
        "{stdout}"
    );
    let [.., total, steady] = lines[..] else {
        panic!("no summary lines: {stdout}");
    };
    assert!(
        total.starts_with("3000 records sent, ") && total.ends_with(" ms 99.9th."),
        "{stdout}"
    );
    assert!(
        steady.starts_with("2000 steady state records sent, ") && steady.ends_with(" ms 99.9th."),
        "{stdout}"
    );
    let produce = report(&produced);
    assert_eq!(produce["records"], 3000);
    assert_eq!(produce["bytes"], 600_000);
    assert_eq!(produce["errors"], 0);
    assert!(produce["latency"]["p99_ms"].as_f64().unwrap() > 0.0);
    let steady = &produce["steady_state"];
    assert_eq!(steady["records"], 2000);
    assert_eq!(steady["bytes"], 400_000);
    assert!(steady["elapsed_s"].as_f64().unwrap() <= produce["elapsed_s"].as_f64().unwrap());
    assert!(steady["latency"]["p99_ms"].as_f64().unwrap() > 0.0);

    // As Kafka's tool: the warm-up must leave records to measure.
    let out = perf(
        &produce_to_perf(&bootstrap, "10", "10", &["--producer-props", "acks=1"]),
        Duration::from_secs(60),
    )
    .await;
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--warmup-records must be strictly fewer than"),
        "{}",
        text(&out.stderr)
    );

    let consumed = dir.path().join("consume.json");
    let out = perf(
        &[
            "consume",
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            "perf",
            "--messages",
            "3000",
            "--json",
            consumed.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with(
            "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg"
        ),
        "{stdout}"
    );
    let consume = report(&consumed);
    assert_eq!(consume["records"], 3000);
    assert_eq!(consume["bytes"], 600_000);
    let fetch = &consume["fetch"];
    assert!(fetch["fetch_ms"].as_f64().unwrap() <= consume["elapsed_s"].as_f64().unwrap() * 1000.0);
    assert!(fetch["fetch_mb_per_s"].as_f64().unwrap() >= consume["mb_per_s"].as_f64().unwrap());

    let round_trips = dir.path().join("latency.json");
    let out = perf(
        &[
            "latency",
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            "round-trip",
            "--num-records",
            "50",
            "--producer-acks",
            "all",
            "--json",
            round_trips.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("Avg latency: "), "{stdout}");
    assert!(stdout.contains("Percentiles: 50th = "), "{stdout}");
    let latency = report(&round_trips);
    assert_eq!(latency["records"], 50);
    assert!(latency["latency"]["p50_ms"].as_f64().unwrap() > 0.0);

    // Paced: 500 records at 1,000/s, each read back and timed from the send time it carries.
    let paced = dir.path().join("paced.json");
    let out = perf(
        &[
            "latency",
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            "round-trip",
            "--num-records",
            "500",
            "--record-size",
            "64",
            "--throughput",
            "1000",
            "--json",
            paced.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let paced = report(&paced);
    assert_eq!(paced["records"], 500);
    assert_eq!(paced["bytes"], 500 * 64);
    assert!(
        paced["latency"]["max_ms"].as_f64().unwrap()
            >= paced["latency"]["p50_ms"].as_f64().unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_exit_non_zero_and_write_no_report() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("report.json");
    let json = json.to_str().unwrap();

    // A usage error: exit status 1 with the reason.
    let out = perf(
        &[
            "produce",
            "--topic",
            "t",
            "--num-records",
            "0",
            "--record-size",
            "1",
            "--throughput",
            "-1",
        ],
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--num-records should be greater than zero"));
    let out = perf(
        &[
            "latency",
            "--topic",
            "t",
            "--num-records",
            "5",
            "--record-size",
            "4",
            "--throughput",
            "100",
        ],
        Duration::from_secs(30),
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--record-size must be at least 8 with --throughput"));

    // Nobody listens: every record times out, exit status 1, no report file.
    let out = perf(
        &[
            "produce",
            "--bootstrap-server",
            "127.0.0.1:1",
            "--topic",
            "t",
            "--num-records",
            "5",
            "--record-size",
            "10",
            "--throughput",
            "-1",
            "--producer-props",
            "message.timeout.ms=1000",
            "--json",
            json,
        ],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("5 of 5 records were not acknowledged"),
        "{}",
        text(&out.stderr)
    );
    assert!(!std::path::Path::new(json).exists());

    // The latency test needs a single-partition topic.
    let node = GregorNode::start(&[]).unwrap();
    create(&node, &[("spread", 2)]).await;
    let out = perf(
        &[
            "latency",
            "--bootstrap-server",
            &node.bootstrap(),
            "--topic",
            "spread",
            "--num-records",
            "5",
        ],
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("topic spread has 2 partitions; the latency test needs exactly one"),
        "{}",
        text(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshakes_count_authentications_and_fail_on_a_wrong_password() {
    let jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                user_bench=\"bench-secret\";";
    let node = GregorNode::start(&[
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        ),
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        ),
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("listener.name.sasl_plaintext.plain.sasl.jaas.config", jaas),
    ])
    .unwrap();
    let sasl = node.addrs().listeners["SASL_PLAINTEXT"].clone();
    let pid = node.pid().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("handshakes.json");
    let json = json.to_str().unwrap();
    let run = |password: &'static str| {
        let (sasl, pid) = (sasl.clone(), pid.clone());
        async move {
            perf(
                &[
                    "handshakes",
                    "--bootstrap-server",
                    &sasl,
                    "--mechanism",
                    "PLAIN",
                    "--username",
                    "bench",
                    "--password",
                    password,
                    "--concurrency",
                    "2",
                    "--duration",
                    "1",
                    "--pid",
                    &pid,
                    "--json",
                    json,
                ],
                Duration::from_secs(60),
            )
            .await
        }
    };
    let out = run("bench-secret").await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let line = text(&out.stdout);
    assert!(
        line.contains("PLAIN handshakes in") && line.contains("ms per handshake"),
        "{line}"
    );
    let counted = report(std::path::Path::new(json))["records"]
        .as_u64()
        .unwrap();
    assert!(counted > 0);
    // Every handshake the tool counted is one the node counted.
    let samples = gregor_integration::prom::parse(
        &gregor_integration::prom::scrape(&node.metrics_addr())
            .await
            .unwrap(),
    )
    .unwrap();
    let served = gregor_integration::prom::value(
        &samples,
        "gregor_authentications_total",
        &[("listener", "SASL_PLAINTEXT"), ("mechanism", "PLAIN")],
    )
    .unwrap_or(0.0);
    assert_eq!(served as u64, counted);

    std::fs::remove_file(json).unwrap();
    let out = run("wrong").await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("authentication failed"),
        "{}",
        text(&out.stderr)
    );
    assert!(!std::path::Path::new(json).exists());
}

/// The consumer looks at the clock only every 256 records or when a poll comes back empty; its
/// idle timeout must still run from the last record, so records trickling in more slowly than
/// the timeout's length in all never trip it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_stream_is_read_to_the_end_without_an_idle_timeout() {
    let node = GregorNode::start(&[("group.initial.rebalance.delay.ms", "0")]).unwrap();
    create(&node, &[("trickle", 1)]).await;
    let bootstrap = node.bootstrap();
    // Six records 1.5 s apart: the last arrives about 7.5 s in, past the 5 s timeout counted
    // from the start or from any record but the latest.
    let consume_args = [
        "consume",
        "--bootstrap-server",
        &bootstrap,
        "--topic",
        "trickle",
        "--messages",
        "6",
        "--timeout",
        "5000",
    ];
    let produce_args = [
        "produce",
        "--bootstrap-server",
        &bootstrap,
        "--topic",
        "trickle",
        "--num-records",
        "6",
        "--record-size",
        "10",
        "--throughput",
        "0.67",
        "--producer-props",
        "acks=all",
    ];
    let (consumed, produced) = tokio::join!(
        perf(&consume_args, Duration::from_secs(60)),
        perf(&produce_args, Duration::from_secs(60))
    );
    assert!(produced.status.success(), "{}", text(&produced.stderr));
    assert!(
        consumed.status.success(),
        "stdout:\n{}\nstderr:\n{}",
        text(&consumed.stdout),
        text(&consumed.stderr)
    );
    assert!(
        text(&consumed.stdout).contains(", 6, "),
        "{}",
        text(&consumed.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_and_latency_end_as_kafkas_tools_end() {
    let node = GregorNode::start(&[("group.initial.rebalance.delay.ms", "0")]).unwrap();
    create(&node, &[("few", 1)]).await;
    let bootstrap = node.bootstrap();
    let out = perf(
        &produce_to_perf(&bootstrap, "20", "0", &["--producer-props", "acks=all"])
            .into_iter()
            .map(|a| if a == "perf" { "few" } else { a })
            .collect::<Vec<_>>(),
        Duration::from_secs(60),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));

    // ConsumerPerformance: a timeout before --messages warns, prints the stats and exits 0.
    let out = perf(
        &[
            "consume",
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            "few",
            "--messages",
            "1000",
            "--timeout",
            "8000",
        ],
        Duration::from_secs(60),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(
            "WARNING: Exiting before consuming the expected number of messages: timeout (8000 ms) \
             exceeded. You can use the --timeout option to increase the timeout."
        ),
        "{stdout}"
    );
    assert!(stdout.contains(", 20, "), "{stdout}");

    // --show-detailed-stats: the detailed header, rows, and no summary line.
    let out = perf(
        &[
            "consume",
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            "few",
            "--messages",
            "20",
            "--show-detailed-stats",
            "--reporting-interval",
            "1",
        ],
        Duration::from_secs(60),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("time, threadId, data.consumed.in.MB, MB.sec"),
        "{stdout}"
    );
    assert!(!stdout.contains("start.time"), "{stdout}");

    // EndToEndLatency: a missing topic is created with one partition; record 0's round trip;
    // whole-millisecond percentiles.
    let out = perf(
        &[
            "latency",
            "--bootstrap-server",
            &bootstrap,
            "--topic",
            "latency-new",
            "--num-records",
            "5",
        ],
        Duration::from_secs(60),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with(
            "Topic \"latency-new\" does not exist. Will create topic with 1 partition(s) and \
             replication factor = 1\n0\t"
        ),
        "{stdout}"
    );
    let percentiles = stdout
        .lines()
        .find(|l| l.starts_with("Percentiles: "))
        .unwrap_or_default();
    assert!(
        percentiles.split(", ").all(|p| p
            .rsplit(" = ")
            .next()
            .is_some_and(|n| n.parse::<i64>().is_ok())),
        "{stdout}"
    );
}
