//! Kafka's configuration keys: a stock Kafka 4.1 `server.properties` starts a node the way
//! Kafka's quick start does (format, then start); the Kafka
//! keys Gregor does not implement are listed in one start-up warning and counted in a metric;
//! a key that is not Kafka's gets a "did you mean" warning and start-up goes on, as in Kafka.

use std::path::PathBuf;
use std::process::Command;

use gregor_integration::admin::{creatable, create_topics};
use gregor_integration::ports::reserve_port;
use gregor_integration::prom::{http_get, parse};
use gregor_integration::{binary_path, GregorNode, KafkaConn};
use gregor_node::config_keys::is_implemented;
use kafka_protocol::messages::CreateTopicsRequest;

fn kafka_server_properties() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/kafka-4.1-server.properties")
}

/// The keys the fixture sets, in file order.
fn fixture_keys() -> Vec<String> {
    std::fs::read_to_string(kafka_server_properties())
        .unwrap()
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(key, _)| key.trim().to_owned())
        .collect()
}

/// Kafka's quick start with the stock file: `storage format --standalone -c server.properties`,
/// then `node -c server.properties`, overriding only ports and directories.
#[tokio::test]
async fn stock_kafka_server_properties_starts_a_node() {
    let keys = fixture_keys();
    assert_eq!(keys.len(), 24, "Kafka 4.1's server.properties sets 24 keys");
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("kraft-combined-logs");
    let (plaintext, controller) = (reserve_port().unwrap(), reserve_port().unwrap());
    let listeners =
        format!("PLAINTEXT://127.0.0.1:{plaintext},CONTROLLER://127.0.0.1:{controller}");
    let bootstrap = format!("127.0.0.1:{controller}");
    let overrides = [
        ("log.dirs", data.to_str().unwrap()),
        ("listeners", listeners.as_str()),
        ("advertised.listeners", listeners.as_str()),
        ("controller.quorum.bootstrap.servers", bootstrap.as_str()),
    ];
    let fixture = kafka_server_properties();
    let cluster_id = Command::new(binary_path())
        .args(["storage", "random-uuid"])
        .output()
        .unwrap();
    let cluster_id = String::from_utf8(cluster_id.stdout).unwrap();
    let mut format = Command::new(binary_path());
    format
        .args([
            "storage",
            "format",
            "--standalone",
            "-t",
            cluster_id.trim(),
            "-c",
        ])
        .arg(&fixture);
    for (key, value) in overrides {
        format.arg("--override").arg(format!("{key}={value}"));
    }
    let formatted = format.output().unwrap();
    assert!(formatted.status.success(), "{formatted:?}");

    let node = GregorNode::start_with(&overrides, Some(&fixture)).unwrap();

    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let created = conn
        .send::<CreateTopicsRequest>(&create_topics(vec![creatable("stock", -1, -1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0, "{:?}", created.topics[0]);
    assert_eq!(
        created.topics[0].num_partitions, 1,
        "num.partitions=1 from the file"
    );

    let unimplemented: Vec<&String> = keys.iter().filter(|k| !is_implemented(k)).collect();
    // The stock file keeps several keys Gregor does not implement (fewer as more are).
    assert!(unimplemented.len() >= 5, "{unimplemented:?}");
    let stderr = node.stderr();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("not implemented by Gregor"))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning lists them all\n{stderr}");
    for key in &unimplemented {
        assert!(
            warnings[0].contains(key.as_str()),
            "{key} not listed: {}",
            warnings[0]
        );
    }
    for key in keys.iter().filter(|k| is_implemented(k)) {
        assert!(
            !warnings[0].contains(&format!(" {key},")) && !warnings[0].ends_with(key.as_str()),
            "{key} is implemented but listed: {}",
            warnings[0]
        );
    }
    assert!(
        !stderr.contains("is not a Kafka or Gregor configuration"),
        "every key of the stock file is a Kafka key\n{stderr}"
    );
    let effective = stderr
        .lines()
        .find(|line| line.contains("effective configuration"))
        .unwrap_or_else(|| panic!("no effective configuration line\n{stderr}"));
    assert!(effective.contains("num.partitions=1"), "{effective}");
    assert!(
        stderr.lines().any(
            |line| line.contains("Gregor starting") && line.contains(env!("CARGO_PKG_VERSION"))
        ),
        "no version line\n{stderr}"
    );

    let scrape = http_get(&node.metrics_addr(), "/metrics").await.unwrap();
    let samples = parse(&scrape.body).unwrap();
    let gauge = |name: &str| {
        samples
            .iter()
            .find(|s| s.name == name)
            .map(|s| s.value)
            .unwrap_or_else(|| panic!("{name} missing from the scrape"))
    };
    assert_eq!(
        gauge("gregor_config_unimplemented_keys"),
        unimplemented.len() as f64
    );
    assert_eq!(gauge("gregor_config_unknown_keys"), 0.0);
}

#[test]
fn a_misspelt_key_is_a_warning_with_a_hint() {
    let mut node = GregorNode::start(&[("num.partitons", "3")]).unwrap();
    let stderr = node.stderr();
    assert!(
        stderr.lines().any(|line| line.contains("'num.partitons'")
            && line.contains("did you mean 'num.partitions'?")),
        "no did-you-mean warning\n{stderr}"
    );
    assert!(
        node.try_exit_status().unwrap().is_none(),
        "the node must keep running"
    );
}

#[test]
fn an_unknown_key_in_a_config_file_is_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("server.properties");
    std::fs::write(
        &config,
        "# a comment\nnum.partitions=2\nbogus.key.from.file=true\n",
    )
    .unwrap();
    let node = GregorNode::start_with(&[], Some(&config)).unwrap();
    let stderr = node.stderr();
    assert!(
        stderr
            .lines()
            .any(|line| line.contains("'bogus.key.from.file'")
                && line.contains("is not a Kafka or Gregor configuration")),
        "no warning names the key\n{stderr}"
    );
}

#[test]
fn passwords_are_hidden_in_the_start_up_log() {
    let node = GregorNode::start(&[("ssl.keystore.password", "hunter2")]).unwrap();
    let stderr = node.stderr();
    assert!(
        !stderr.contains("hunter2"),
        "a password was logged\n{stderr}"
    );
    assert!(
        stderr.contains("ssl.keystore.password=[hidden]"),
        "the key is logged, its value masked\n{stderr}"
    );
}
