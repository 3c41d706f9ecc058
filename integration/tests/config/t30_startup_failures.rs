//! Every way start-up can fail because of configuration: bad value of a key Gregor implements,
//! port in use, unwritable data directory, missing file. Each must exit non-zero (not hang, not
//! panic) and name the culprit. Unknown keys do not stop start-up (see `t20_kafka_keys`).

use std::net::TcpListener;
use std::time::Duration;

use gregor_integration::{GregorNode, NodeExit};

const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

fn run(overrides: &[(&str, &str)]) -> NodeExit {
    GregorNode::run_expect_exit(overrides, None, EXIT_TIMEOUT).unwrap()
}

/// Non-zero exit, no panic, and some stderr line containing every one of `needles`.
fn assert_failed_naming(exit: &NodeExit, case: &str, needles: &[&str]) {
    assert!(
        !exit.status.success(),
        "{case}: exited successfully\n--- stderr ---\n{}",
        exit.stderr
    );
    assert!(
        exit.status.code().is_some(),
        "{case}: killed by a signal ({}), expected a clean non-zero exit\n--- stderr ---\n{}",
        exit.status,
        exit.stderr
    );
    assert!(
        !exit.stderr.contains("panicked at"),
        "{case}: the node panicked instead of reporting the error\n--- stderr ---\n{}",
        exit.stderr
    );
    assert!(
        exit.stderr
            .lines()
            .any(|line| needles.iter().all(|n| line.contains(n))),
        "{case}: no stderr line names {needles:?}\n--- stderr ---\n{}",
        exit.stderr
    );
}

#[test]
fn bad_values() {
    for (key, value) in [
        ("num.partitions", "many"),
        ("num.partitions", "0"),
        ("socket.request.max.bytes", "0"),
        ("socket.request.max.bytes", "-5"),
        ("connections.max.idle.ms", "soon"),
        ("auto.create.topics.enable", "maybe"),
        ("delete.topic.enable", "yes please"),
        ("default.replication.factor", "x"),
        ("node.id", "one"),
        ("listeners", "not a listener"),
        ("metrics.listener", "nowhere"),
        ("log.format", "xml"),
        (
            "listener.security.protocol.map",
            "PLAINTEXT:TLS,CONTROLLER:PLAINTEXT",
        ),
        // The controller listener without a protocol.
        ("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT"),
        ("connections.max.reauth.ms", "-1"),
    ] {
        let exit = run(&[(key, value)]);
        assert_failed_naming(&exit, &format!("{key}={value}"), &[key]);
    }
}

#[test]
fn plaintext_port_in_use() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let listeners = format!("PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:0");
    let exit = run(&[("listeners", &listeners)]);
    assert_failed_naming(&exit, "PLAINTEXT port in use", &[&port]);
}

#[test]
fn controller_port_in_use() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let listeners = format!("PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}");
    let exit = run(&[("listeners", &listeners)]);
    assert_failed_naming(&exit, "CONTROLLER port in use", &[&port]);
}

#[test]
fn metrics_port_in_use() {
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let port = taken.local_addr().unwrap().port().to_string();
    let exit = run(&[("metrics.listener", &addr)]);
    assert_failed_naming(&exit, "metrics port in use", &[&port]);
}

#[test]
fn unwritable_log_dirs() {
    // Tests may run as root, which ignores permission bits: use a path below a regular file,
    // which nobody can create.
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let dir = file.join("data");
    let dir = dir.to_str().unwrap();
    let exit = run(&[("log.dirs", dir)]);
    assert_failed_naming(&exit, "unwritable log.dirs", &[dir]);
}

#[test]
fn missing_config_file() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("absent.properties");
    let exit = GregorNode::run_expect_exit(&[], Some(&config), EXIT_TIMEOUT).unwrap();
    assert_failed_naming(&exit, "missing config file", &[config.to_str().unwrap()]);
}

/// A second process given a log dir the first one uses (the same node started twice, each
/// with its own first dir) is refused before it reads anything there, as Kafka's
/// `LogManager.lockLogDirs`: it would otherwise take the first one's partitions for strays.
#[test]
fn a_log_dir_in_use_by_another_process() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = |name: &str| tmp.path().join(name).to_str().unwrap().to_owned();
    let (first, second, shared) = (dir("a"), dir("b"), dir("shared"));
    let running = GregorNode::start(&[("log.dirs", &format!("{first},{shared}"))]).unwrap();
    let exit = run(&[("log.dirs", &format!("{second},{shared}"))]);
    assert_failed_naming(
        &exit,
        "a log dir in use",
        &["Failed to acquire lock on file", &shared],
    );
    drop(running);
}

/// A broker-only node without its quorum's bootstrap servers, and a static quorum (which
/// Gregor has not), are refused as Kafka's `KafkaConfig` refuses the first: neither forms a
/// cluster of its own.
#[test]
fn a_node_that_cannot_find_its_quorum() {
    let exit = run(&[
        ("process.roles", "broker"),
        ("listeners", "PLAINTEXT://127.0.0.1:0"),
    ]);
    assert_failed_naming(
        &exit,
        "broker-only without bootstrap servers",
        &[
            "controller.quorum.bootstrap.servers",
            "process.roles=broker",
        ],
    );
    let exit = run(&[("controller.quorum.voters", "1@127.0.0.1:9093")]);
    assert_failed_naming(
        &exit,
        "a static quorum",
        &[
            "controller.quorum.voters",
            "controller.quorum.bootstrap.servers",
        ],
    );
}

/// A data directory that holds data but lost its `meta.properties` is not formatted again:
/// a new cluster and directory id over old partition logs and an old metadata log would only
/// fail later, with the identity the operator needs to repair it already overwritten. Kafka
/// refuses it too ("No readable meta.properties files found.").
#[test]
fn a_data_dir_that_lost_its_identity_is_not_formatted_again() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data");
    let dir_text = dir.to_str().unwrap().to_owned();
    let mut node = GregorNode::start(&[("log.dirs", &dir_text)]).unwrap();
    node.kill9().unwrap();
    std::fs::remove_file(dir.join("meta.properties")).unwrap();
    let exit = run(&[("log.dirs", &dir_text)]);
    assert_failed_naming(
        &exit,
        "meta.properties lost",
        &["No readable meta.properties files found in", &dir_text],
    );
    assert!(!dir.join("meta.properties").exists(), "formatted again");
}
