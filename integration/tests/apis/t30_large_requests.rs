//! The largest requests over the wire, through decoding, the handler, the controller and
//! encoding: each must be answered (work O(n log n) in the request's size, issue #11). The
//! generous timeout only guards against a hang; nothing here asserts a time.

use std::time::Duration;

use gregor_integration::admin::{metadata, s};
use gregor_integration::{GregorNode, KafkaConn};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::{AlterClientQuotasRequest, MetadataRequest};

const ENTRIES: usize = 100_000;
const HANG_GUARD: Duration = Duration::from_secs(180);

async fn connect(node: &GregorNode) -> KafkaConn {
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(HANG_GUARD);
    conn
}

/// Metadata naming 100,000 missing topics with auto-creation on: every name is answered once.
#[tokio::test]
async fn metadata_with_100000_auto_created_names() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = connect(&node).await;
    let names: Vec<String> = (0..ENTRIES).map(|i| format!("auto-{i}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let response = conn
        .send::<MetadataRequest>(&metadata(4, Some(&refs), true), 4)
        .await
        .unwrap();
    assert_eq!(response.topics.len(), ENTRIES);
    // A creation beyond one batch's records is refused whole; each name is still answered.
    assert!(response.topics.iter().all(|t| t.error_code != 0));
}

/// AlterClientQuotas (validate_only) with 100,000 distinct entities and then the same entities
/// twice: one result per distinct entity.
#[tokio::test]
async fn alter_client_quotas_with_100000_entities() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = connect(&node).await;
    let entry = |i: usize| {
        EntryData::default()
            .with_entity(vec![EntityData::default()
                .with_entity_type(s("client-id"))
                .with_entity_name(Some(s(&format!("client-{i}"))))])
            .with_ops(vec![OpData::default()
                .with_key(s("request_percentage"))
                .with_value(50.0)])
    };
    let distinct = AlterClientQuotasRequest::default()
        .with_entries((0..ENTRIES).map(entry).collect())
        .with_validate_only(true);
    let response = conn
        .send::<AlterClientQuotasRequest>(&distinct, 1)
        .await
        .unwrap();
    assert_eq!(response.entries.len(), ENTRIES);
    assert!(response.entries.iter().all(|e| e.error_code == 0));

    let repeated = AlterClientQuotasRequest::default()
        .with_entries((0..ENTRIES).map(|i| entry(i % (ENTRIES / 2))).collect())
        .with_validate_only(true);
    let response = conn
        .send::<AlterClientQuotasRequest>(&repeated, 1)
        .await
        .unwrap();
    assert_eq!(response.entries.len(), ENTRIES / 2);
    assert!(response.entries.iter().all(|e| e.error_code == 42));
}
