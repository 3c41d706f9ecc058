//! Every version of every API in the node's table, sent at that exact version with no
//! ApiVersions negotiation, decoded strictly (no trailing bytes), with error codes and messages
//! checked against Kafka's.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

#[path = "../common/advertised.rs"]
mod advertised;
mod t10_api_versions;
mod t10_create_partitions;
mod t10_create_topics;
mod t10_delete_topics;
mod t10_describe_cluster;
mod t10_every_advertised_version;
mod t10_metadata;
mod t10_update_features;
mod t30_auto_create;
mod t30_concurrent_mutations;
mod t30_create_topics_errors;
mod t30_fetch_kafka_shapes;
mod t30_large_requests;

use gregor_integration::admin::{creatable, create_topics, metadata, topics_of, TopicInfo};
use gregor_integration::{GregorNode, KafkaConn};
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest};
use std::time::Duration;

/// Collects per-version failures so one run reports every broken version, then fails once.
#[derive(Default)]
pub struct Failures(Vec<String>);

impl Failures {
    pub fn check(&mut self, ok: bool, what: impl FnOnce() -> String) {
        if !ok {
            self.0.push(what());
        }
    }

    pub fn eq<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, got: T, want: T) {
        if got != want {
            self.0.push(format!("{what}: got {got:?}, want {want:?}"));
        }
    }

    pub fn push(&mut self, what: String) {
        self.0.push(what);
    }

    pub fn assert_none(self, node: &GregorNode) {
        assert!(
            self.0.is_empty(),
            "{} failure(s):\n  {}\n--- node stderr (tail) ---\n{}",
            self.0.len(),
            self.0.join("\n  "),
            tail(&node.stderr(), 40)
        );
    }
}

pub fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

pub async fn connect(node: &GregorNode) -> KafkaConn {
    KafkaConn::connect(&node.bootstrap()).await.unwrap()
}

/// Creates topics with CreateTopics v7 and asserts success; returns their ids.
pub async fn create_ok(conn: &mut KafkaConn, topics: &[(&str, i32)]) -> Vec<uuid::Uuid> {
    let req = create_topics(
        topics.iter().map(|(n, p)| creatable(n, *p, 1)).collect(),
        false,
    );
    let resp = conn.send::<CreateTopicsRequest>(&req, 7).await.unwrap();
    resp.topics
        .iter()
        .map(|t| {
            assert_eq!(
                t.error_code, 0,
                "creating {:?}: {:?}",
                t.name, t.error_message
            );
            t.topic_id
        })
        .collect()
}

/// All topics according to Metadata v12.
pub async fn all_topics(conn: &mut KafkaConn) -> std::collections::BTreeMap<String, TopicInfo> {
    let resp = conn
        .send::<MetadataRequest>(&metadata(12, None, false), 12)
        .await
        .unwrap();
    topics_of(&resp)
}

/// Waits until Metadata shows `name` with `partitions` partitions (or absent if `None`).
pub async fn wait_topic(conn: &mut KafkaConn, name: &str, partitions: Option<usize>) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let got = all_topics(conn).await.get(name).map(|t| t.partitions);
        if got == partitions {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "topic {name}: Metadata shows {got:?} partitions, want {partitions:?} (waited 10 s)"
        );
        tokio::time::sleep(gregor_integration::wait::POLL_INTERVAL).await;
    }
}
