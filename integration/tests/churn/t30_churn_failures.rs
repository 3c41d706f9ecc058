//! What a user sees first when something is wrong: a one-line message naming the problem and a
//! non-zero exit, never a panic.

use std::time::Duration;

use gregor_integration::GregorNode;

use crate::churn;

fn assert_clean_failure(args: &[&str], code: i32, needle: &str) {
    let out = churn(args, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: expected {needle:?} in {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn bad_arguments_are_named() {
    assert_clean_failure(&["--concurrency", "0"], 1, "--concurrency");
    assert_clean_failure(&["--mix", "1:2"], 1, "CREATE:ADD_PARTITIONS:DELETE");
    assert_clean_failure(&["--duration", "5 parsecs"], 1, "duration");
    assert_clean_failure(&["-b", "localhost"], 1, "host:port");
    assert_clean_failure(&["--rss-interval", "1s"], 1, "--metrics-url");
    assert_clean_failure(&["--metrics-url", "ftp://x:1/"], 1, "http://");
    assert_clean_failure(&["--no-such-flag"], 1, "--no-such-flag");
    assert_clean_failure(
        &["--json", "/nonexistent-dir/x/report.json"],
        1,
        "cannot write",
    );
}

#[test]
fn unreachable_broker_is_reported() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    assert_clean_failure(
        &["-b", &addr, "-d", "1s"],
        1,
        "no bootstrap server answered",
    );
}

#[test]
fn unsupported_create_topics_version_is_reported() {
    let node = GregorNode::start(&[]).unwrap();
    assert_clean_failure(
        &[
            "-b",
            &node.bootstrap(),
            "--create-topics-version",
            "99",
            "-d",
            "1s",
        ],
        1,
        "CreateTopics v99 is not supported",
    );
}

#[test]
fn a_run_that_fails_leaves_no_report_files() {
    let node = GregorNode::start(&[]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (json, svg) = (dir.path().join("run.json"), dir.path().join("run.svg"));
    assert_clean_failure(
        &[
            "-b",
            &node.bootstrap(),
            "--create-topics-version",
            "99",
            "-d",
            "1s",
            "--json",
            json.to_str().unwrap(),
            "--plot",
            svg.to_str().unwrap(),
        ],
        1,
        "CreateTopics v99 is not supported",
    );
    assert!(!json.exists(), "a failed run wrote {}", json.display());
    assert!(!svg.exists(), "a failed run wrote {}", svg.display());
}
