//! Pipelined requests on one connection are answered in request order, each with its own
//! correlation id echoed verbatim (any int32, no uniqueness check).

use bytes::BytesMut;
use gregor_integration::admin::metadata;
use gregor_integration::{encode_request, GregorNode, KafkaConn};
use kafka_protocol::messages::{ApiVersionsRequest, DescribeClusterRequest, MetadataRequest};
use kafka_protocol::protocol::StrBytes;

#[derive(Clone, Copy, Debug)]
enum Kind {
    ApiVersions(i16),
    Metadata(i16),
    DescribeCluster(i16),
}

#[tokio::test]
async fn fifty_pipelined_requests_come_back_in_order() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();

    let mut plan = Vec::new();
    let mut frames = BytesMut::new();
    for i in 0..50i32 {
        // Correlation ids deliberately out of order, negative, repeated and extreme.
        let correlation_id = match i {
            0 => i32::MIN,
            1 => i32::MAX,
            2 | 3 => 7,
            _ => (i * 7919) ^ -0x5555,
        };
        let kind = match i % 3 {
            0 => Kind::ApiVersions((i % 5) as i16),
            1 => Kind::Metadata((i % 14) as i16),
            _ => Kind::DescribeCluster((i % 3) as i16),
        };
        let frame = match kind {
            Kind::ApiVersions(v) => {
                let req = ApiVersionsRequest::default()
                    .with_client_software_name(StrBytes::from_static_str("pipeline"))
                    .with_client_software_version(StrBytes::from_static_str("1"));
                encode_request(&req, v, correlation_id, Some("pipeline")).unwrap()
            }
            Kind::Metadata(v) => encode_request(
                &metadata(v, None, false),
                v,
                correlation_id,
                Some("pipeline"),
            )
            .unwrap(),
            Kind::DescribeCluster(v) => encode_request(
                &DescribeClusterRequest::default(),
                v,
                correlation_id,
                Some("pipeline"),
            )
            .unwrap(),
        };
        frames.extend_from_slice(&frame);
        plan.push((kind, correlation_id));
    }
    // All 50 in one write: the node must read them back to back and still answer in order.
    conn.write_raw(&frames).await.unwrap();

    for (i, (kind, correlation_id)) in plan.into_iter().enumerate() {
        let (got, version) = match kind {
            Kind::ApiVersions(v) => {
                let (h, b) = conn.read_response::<ApiVersionsRequest>(v).await.unwrap();
                assert_eq!(b.error_code, 0, "response {i} ({kind:?})");
                (h.correlation_id, v)
            }
            Kind::Metadata(v) => {
                let (h, b) = conn
                    .read_response::<MetadataRequest>(v)
                    .await
                    .unwrap_or_else(|e| panic!("response {i} ({kind:?}): {e:#}"));
                assert_eq!(b.brokers.len(), 1, "response {i} ({kind:?})");
                (h.correlation_id, v)
            }
            Kind::DescribeCluster(v) => {
                let (h, b) = conn
                    .read_response::<DescribeClusterRequest>(v)
                    .await
                    .unwrap_or_else(|e| panic!("response {i} ({kind:?}): {e:#}"));
                assert_eq!(b.error_code, 0, "response {i} ({kind:?})");
                (h.correlation_id, v)
            }
        };
        assert_eq!(
            got, correlation_id,
            "response {i} ({kind:?} v{version}) carries the wrong correlation id: out of order?"
        );
    }
}
