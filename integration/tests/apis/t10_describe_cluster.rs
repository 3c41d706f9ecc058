//! DescribeCluster v0-2: the same cluster id and controller as Metadata, the one broker with its
//! advertised endpoint.

use gregor_integration::admin::metadata;
use gregor_integration::GregorNode;
use kafka_protocol::messages::{BrokerId, DescribeClusterRequest, MetadataRequest};

use crate::{connect, Failures};

#[tokio::test]
async fn every_version_describes_the_cluster() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = connect(&node).await;
    let md = conn
        .send::<MetadataRequest>(&metadata(12, None, false), 12)
        .await
        .unwrap();
    let cluster_id = md
        .cluster_id
        .clone()
        .map(|s| s.to_string())
        .unwrap_or_default();

    let mut f = Failures::default();
    for version in 0..=2i16 {
        let v = |what: &str| format!("v{version} {what}");
        let mut req = DescribeClusterRequest::default();
        if version >= 1 {
            req = req.with_endpoint_type(1);
        }
        let resp = match conn.send(&req, version).await {
            Ok(r) => r,
            Err(e) => {
                f.push(v(&format!("{e:#}")));
                conn = connect(&node).await;
                continue;
            }
        };
        f.eq(&v("error_code"), resp.error_code, 0);
        f.eq(&v("error_message"), resp.error_message.clone(), None);
        f.eq(&v("throttle_time_ms"), resp.throttle_time_ms, 0);
        f.eq(
            &v("cluster_id (same as Metadata)"),
            resp.cluster_id.to_string(),
            cluster_id.clone(),
        );
        f.eq(&v("controller_id"), resp.controller_id, BrokerId(1));
        // Not requested: Kafka sends Integer.MIN_VALUE.
        f.eq(
            &v("cluster_authorized_operations"),
            resp.cluster_authorized_operations,
            i32::MIN,
        );
        if version >= 1 {
            f.eq(&v("endpoint_type"), resp.endpoint_type, 1);
        }
        f.eq(&v("brokers"), resp.brokers.len(), 1);
        if let Some(b) = resp.brokers.first() {
            f.eq(&v("broker_id"), b.broker_id, BrokerId(1));
            f.eq(&v("host"), b.host.to_string(), "127.0.0.1".to_string());
            f.eq(&v("port"), b.port, i32::from(node.port()));
            f.eq(&v("rack"), b.rack.clone(), None);
            if version >= 2 {
                f.eq(&v("is_fenced"), b.is_fenced, false);
            }
        }
    }
    f.assert_none(&node);
}
