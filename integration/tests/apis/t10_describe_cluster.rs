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

#[tokio::test]
async fn a_refused_endpoint_type_is_invalid_request_at_v0() {
    // Kafka's AuthHelper: v0's error table predates KIP-919, so a v0 request (which always
    // means brokers) on a controller listener is INVALID_REQUEST; from v1 it is
    // MISMATCHED_ENDPOINT_TYPE, and an unknown type UNSUPPORTED_ENDPOINT_TYPE.
    let node = GregorNode::start(&[]).unwrap();
    let controller = node.addrs().controller.clone().unwrap();
    let mut conn = gregor_integration::KafkaConn::connect(&controller)
        .await
        .unwrap();
    let mut f = Failures::default();
    for (version, endpoint_type, code, message) in [
        (
            0,
            1,
            42,
            "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER",
        ),
        (
            1,
            1,
            114,
            "The request was sent to an endpoint of type CONTROLLER, but we wanted an endpoint of type BROKER",
        ),
        (1, 9, 115, "Unsupported endpoint type 9"),
    ] {
        let request = DescribeClusterRequest::default().with_endpoint_type(endpoint_type);
        let response = conn.send(&request, version).await.unwrap();
        let what = format!("v{version} endpoint type {endpoint_type}");
        f.eq(&what, response.error_code, code);
        f.eq(
            &what,
            response.error_message.map(|m| m.to_string()),
            Some(message.to_owned()),
        );
    }
    let mut conn = connect(&node).await;
    let response = conn
        .send(&DescribeClusterRequest::default().with_endpoint_type(9), 1)
        .await
        .unwrap();
    f.eq(
        "v1 unknown type on the broker listener",
        response.error_code,
        115,
    );
    f.assert_none(&node);
}
