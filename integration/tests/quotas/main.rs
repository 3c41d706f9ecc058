//! Client quotas end to end: AlterClientQuotas / DescribeClientQuotas against the real binary,
//! and the controller-mutation quota (KIP-599) on CreateTopics, DeleteTopics and
//! CreatePartitions with `controller_mutation_rate = 2` and a 10 × 1 s window (burst 20), as in
//! Kafka's ControllerMutationQuotaTest. Each scenario runs on its own node, so buckets never
//! leak between scenarios.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod t10_client_quotas;
mod t10_controller_mutation;
mod t10_request_quota_thread_time;
mod t30_sensor_expiry;

pub use gregor_integration::admin::quota_entry;
use gregor_integration::{GregorNode, KafkaConn};
use kafka_protocol::messages::AlterClientQuotasRequest;

/// A node whose controller-mutation bucket holds 10 × 1 s × rate.
pub fn start_node() -> GregorNode {
    GregorNode::start(&[
        ("controller.quota.window.num", "10"),
        ("controller.quota.window.size.seconds", "1"),
    ])
    .unwrap()
}

pub async fn connect(node: &GregorNode) -> KafkaConn {
    KafkaConn::connect(&node.bootstrap()).await.unwrap()
}

/// Sets `controller_mutation_rate` for `user` and checks the answer.
pub async fn set_mutation_rate(conn: &mut KafkaConn, user: &str, rate: f64) {
    let request = AlterClientQuotasRequest::default().with_entries(vec![quota_entry(
        &[("user", Some(user))],
        &[("controller_mutation_rate", rate, false)],
    )]);
    let response = conn
        .send::<AlterClientQuotasRequest>(&request, 1)
        .await
        .unwrap();
    assert_eq!(response.entries.len(), 1);
    assert_eq!(
        response.entries[0].error_code, 0,
        "{:?}",
        response.entries[0].error_message
    );
}
