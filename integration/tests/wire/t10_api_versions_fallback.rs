//! An ApiVersions request at a version the node does not support gets Kafka's KIP-511 fallback:
//! a v0 body (response header v0) with UNSUPPORTED_VERSION and only the ApiVersions range, so a
//! newer client can retry at the advertised maximum on the same connection.

use bytes::{BufMut, BytesMut};
use gregor_integration::{GregorNode, KafkaConn};
use kafka_protocol::messages::{ApiVersionsRequest, RequestHeader};
use kafka_protocol::protocol::{Encodable, StrBytes};

/// A frame for ApiVersions at `version` with request header v2 (the flexible rule applies to
/// every version from 3 up) and a v3-shaped body, which the node must not try to parse.
fn api_versions_frame(version: i16, correlation_id: i32) -> Vec<u8> {
    let header = RequestHeader::default()
        .with_request_api_key(18)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("future-client")));
    let body = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("future-client"))
        .with_client_software_version(StrBytes::from_static_str("9.9.9"));
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header.encode(&mut buf, 2).unwrap();
    body.encode(&mut buf, 3).unwrap();
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    buf.to_vec()
}

/// The exact fallback frame: size 16, correlation id, error 35, one entry [18, 0, 4].
fn expected_fallback(correlation_id: i32) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&16i32.to_be_bytes());
    v.extend_from_slice(&correlation_id.to_be_bytes());
    v.extend_from_slice(&35i16.to_be_bytes());
    v.extend_from_slice(&1i32.to_be_bytes());
    v.extend_from_slice(&18i16.to_be_bytes());
    v.extend_from_slice(&0i16.to_be_bytes());
    v.extend_from_slice(&4i16.to_be_bytes());
    v
}

#[tokio::test]
async fn unsupported_api_versions_versions_get_the_exact_v0_fallback() {
    let node = GregorNode::start(&[]).unwrap();
    for (version, correlation_id) in [(5i16, 0x0102_0304i32), (127, -7), (i16::MAX, 0)] {
        let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
        conn.write_raw(&api_versions_frame(version, correlation_id))
            .await
            .unwrap();
        let raw = conn.read_raw_frame().await.unwrap_or_else(|e| {
            panic!(
                "ApiVersions v{version}: no fallback response: {e:#}\n{}",
                node.stderr()
            )
        });
        assert_eq!(
            raw,
            expected_fallback(correlation_id),
            "ApiVersions v{version}: fallback bytes differ"
        );
    }
}

#[tokio::test]
async fn after_the_fallback_the_client_retries_at_the_max_on_the_same_connection() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.write_raw(&api_versions_frame(5, 41)).await.unwrap();
    assert_eq!(conn.read_raw_frame().await.unwrap(), expected_fallback(41));
    // What kafka-python and the Java client do next: retry at the advertised max, v4.
    let req = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("gregor-it"))
        .with_client_software_version(StrBytes::from_static_str("1.0"));
    let resp = conn.send(&req, 4).await.unwrap();
    assert_eq!(resp.error_code, 0);
    let entry = resp
        .api_keys
        .iter()
        .find(|k| k.api_key == 18)
        .expect("ApiVersions lists itself");
    assert_eq!((entry.min_version, entry.max_version), (0, 4));
}
