//! A `--config server.properties` file is honoured, and `--override` beats it.

use gregor_integration::admin::{creatable, create_topics};
use gregor_integration::{GregorNode, KafkaConn};
use kafka_protocol::messages::CreateTopicsRequest;

#[tokio::test]
async fn config_file_values_apply_and_overrides_win() {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("server.properties");
    std::fs::write(
        &config,
        "# Kafka-style properties\nnum.partitions=4\ndelete.topic.enable = true\nauto.create.topics.enable=false\n",
    )
    .unwrap();
    let node =
        GregorNode::start_with(&[("auto.create.topics.enable", "true")], Some(&config)).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();

    // num.partitions=4 from the file: a topic created with -1 partitions gets 4.
    let resp = conn
        .send::<CreateTopicsRequest>(
            &create_topics(vec![creatable("from-file", -1, -1)], false),
            7,
        )
        .await
        .unwrap();
    assert_eq!(
        resp.topics[0].error_code, 0,
        "{:?}",
        resp.topics[0].error_message
    );
    assert_eq!(
        resp.topics[0].num_partitions, 4,
        "num.partitions from server.properties"
    );

    // auto.create.topics.enable=true from --override beats the file's false.
    let md = gregor_integration::admin::metadata(12, Some(&["auto-from-override"]), true);
    conn.send::<kafka_protocol::messages::MetadataRequest>(&md, 12)
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let resp = conn
            .send::<kafka_protocol::messages::MetadataRequest>(&md, 12)
            .await
            .unwrap();
        let t = gregor_integration::admin::topics_of(&resp);
        if t.get("auto-from-override")
            .is_some_and(|t| t.error_code == 0)
        {
            assert_eq!(t["auto-from-override"].partitions, 4);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "--override auto.create.topics.enable=true did not beat the file: {t:?}"
        );
        tokio::time::sleep(gregor_integration::wait::POLL_INTERVAL).await;
    }
}
