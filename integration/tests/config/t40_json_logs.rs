//! `log.format=json` or `RUST_LOG_FORMAT=json`: every stderr line is one JSON object, so log
//! shippers can read the `node ready` line's fields without parsing text.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gregor_integration::node::binary_path;

const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Starts a node with `overrides` and `env`, returns its stderr lines up to `node ready`, and
/// kills it.
fn lines_until_ready(overrides: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, lines) = start_until_ready(&binary_path(), dir.path(), overrides, env);
    child.kill().unwrap();
    child.wait().unwrap();
    lines
}

/// Starts `bin` as a node on ephemeral ports with its data in `dir`, plus `overrides` and
/// `env`; returns the running child and its stderr lines up to and including `node ready`.
pub(crate) fn start_until_ready(
    bin: &Path,
    dir: &Path,
    overrides: &[&str],
    env: &[(&str, &str)],
) -> (Child, Vec<String>) {
    let log_dirs = format!("log.dirs={}", dir.join("data").display());
    let mut command = Command::new(bin);
    command.arg("node");
    for setting in [
        "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "metrics.listener=127.0.0.1:0",
        log_dirs.as_str(),
    ]
    .iter()
    .chain(overrides)
    {
        command.arg("--override").arg(setting);
    }
    command
        .env_remove("RUST_LOG")
        .env_remove("RUST_LOG_FORMAT")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + READY_TIMEOUT;
    let mut lines = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                let ready = line.contains("node ready");
                lines.push(line);
                if ready {
                    break;
                }
            }
            Err(error) => {
                let _ = child.kill();
                panic!("no `node ready` line ({error})\n{}", lines.join("\n"));
            }
        }
    }
    (child, lines)
}

fn assert_json_lines(lines: &[String]) {
    for line in lines {
        let parsed: serde_json::Value = serde_json::from_str(line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {line}\n{}", lines.join("\n")));
        assert!(parsed["level"].is_string(), "{line}");
        assert!(parsed["timestamp"].is_string(), "{line}");
    }
    let ready: serde_json::Value = serde_json::from_str(lines.last().unwrap()).unwrap();
    assert_eq!(ready["fields"]["message"], "node ready");
    assert_eq!(ready["level"], "INFO");
    assert_eq!(ready["fields"]["node_id"], 1);
    let listeners = ready["fields"]["listeners"].as_str().unwrap();
    assert!(listeners.contains("PLAINTEXT://127.0.0.1:"), "{listeners}");
    assert!(ready["fields"]["cluster_id"].is_string());
}

#[test]
fn log_format_json_writes_one_object_per_line() {
    assert_json_lines(&lines_until_ready(&["log.format=json"], &[]));
}

#[test]
fn rust_log_format_env_wins_over_the_key() {
    let lines = lines_until_ready(&["log.format=text"], &[("RUST_LOG_FORMAT", "json")]);
    assert_json_lines(&lines);
}

/// Topic ids appear in logs in Kafka's base64 form, the form CreateTopics answers with and
/// `gregor topics --describe` prints, so a log line can be matched against Kafka's tools.
#[tokio::test]
async fn topic_ids_are_logged_in_kafkas_form() {
    use gregor_integration::admin::{creatable, create_topics};
    use gregor_integration::wait::wait_until;
    use gregor_integration::{GregorNode, KafkaConn};
    use gregor_publishers::kafka_uuid::KafkaUuid;
    use kafka_protocol::messages::CreateTopicsRequest;

    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let created = conn
        .send::<CreateTopicsRequest>(&create_topics(vec![creatable("logged", 1, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0, "{:?}", created.topics[0]);
    let expected = format!("id={}", KafkaUuid(created.topics[0].topic_id));
    wait_until("the topic created line", Duration::from_secs(30), || {
        let stderr = node.stderr();
        let line = stderr
            .lines()
            .find(|line| line.contains("topic created") && line.contains("topic=\"logged\""))
            .map(str::to_owned);
        async move { Ok(line) }
    })
    .await
    .map(|line| assert!(line.contains(&expected), "{line} lacks {expected}"))
    .unwrap();
}
