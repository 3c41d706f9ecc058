//! The container image's configuration (`packaging/docker.properties`, baked in by
//! `packaging/Dockerfile`) starts a single node that formats its own data directory and serves
//! clients. No Docker engine runs on CI machines, so the image itself is not built here; the
//! test also checks that the Dockerfile copies that file and builds the `gregor` binary.

use std::path::PathBuf;

use gregor_integration::admin::{creatable, create_topics};
use gregor_integration::{GregorNode, KafkaConn};
use kafka_protocol::messages::CreateTopicsRequest;

fn packaging(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../packaging")
        .join(file)
}

#[test]
fn the_dockerfile_builds_gregor_and_bakes_in_its_config() {
    let dockerfile = std::fs::read_to_string(packaging("Dockerfile")).unwrap();
    assert!(
        dockerfile.contains("-p gregor-node --bin gregor"),
        "{dockerfile}"
    );
    assert!(
        dockerfile.contains("COPY packaging/docker.properties /etc/gregor/server.properties"),
        "{dockerfile}"
    );
    assert!(
        dockerfile.contains(r#"ENTRYPOINT ["/usr/local/bin/gregor", "node", "--config", "/etc/gregor/server.properties"]"#),
        "{dockerfile}"
    );
}

#[tokio::test]
async fn the_container_config_starts_a_node_that_serves_clients() {
    let config = packaging("docker.properties");
    // Only what binds or writes outside the test's sandbox is overridden: the harness gives
    // ephemeral loopback listeners, a temporary log dir and metrics port.
    let node = GregorNode::start_with(&[], Some(&config)).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let created = conn
        .send::<CreateTopicsRequest>(&create_topics(vec![creatable("boxed", 2, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0, "{:?}", created.topics[0]);
    let stderr = node.stderr();
    assert!(
        !stderr.contains("not implemented by Gregor") && !stderr.contains("did you mean"),
        "every key of the container config is implemented\n{stderr}"
    );
}
