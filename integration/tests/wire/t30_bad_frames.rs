//! Bad frames: unknown API keys, unsupported versions of APIs other than ApiVersions, garbage or
//! truncated bodies, and negative, zero or oversized sizes. Each gets a closed connection and no
//! response bytes, and no other connection notices (Kafka's NetworkReceive / SocketServer rules).

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use gregor_integration::admin::{creatable, create_topics, metadata};
use gregor_integration::{encode_request, Closed, GregorNode, KafkaConn};
use kafka_protocol::messages::MetadataRequest;

const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// A frame with a hand-written request header v1 (`client_id` "bad") and `body`.
fn raw_frame(api_key: i16, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    buf.put_i16(api_key);
    buf.put_i16(version);
    buf.put_i32(correlation_id);
    buf.put_i16(3);
    buf.put_slice(b"bad");
    buf.put_slice(body);
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    buf.to_vec()
}

fn sized(size: i32, rest: &[u8]) -> Vec<u8> {
    let mut v = size.to_be_bytes().to_vec();
    v.extend_from_slice(rest);
    v
}

/// `(name, bytes)` for every bad-frame case.
fn cases() -> Vec<(&'static str, Vec<u8>)> {
    // A valid CreateTopics v7 frame, then cut: the size prefix matches the shortened body, so
    // the frame is complete but the body ends early.
    let full = encode_request(
        &create_topics(vec![creatable("truncated-topic", 3, 1)], false),
        7,
        99,
        Some("bad"),
    )
    .unwrap();
    let mut truncated = full[4..full.len() - 6].to_vec();
    let mut truncated_frame = ((truncated.len()) as i32).to_be_bytes().to_vec();
    truncated_frame.append(&mut truncated);

    // Metadata v12 (flexible, header v2) with a garbage body.
    let mut garbage = BytesMut::new();
    garbage.put_i16(3);
    garbage.put_i16(12);
    garbage.put_i32(5);
    garbage.put_i16(3);
    garbage.put_slice(b"bad");
    garbage.put_u8(0); // header tagged fields
    garbage.put_slice(&[0xff; 24]);
    let garbage_frame = sized(garbage.len() as i32, &garbage);

    vec![
        ("unknown api key 9999", raw_frame(9999, 0, 1, &[0; 8])),
        ("unknown api key -1", raw_frame(-1, 0, 2, &[0; 8])),
        ("Metadata v14 (above max)", raw_frame(3, 14, 3, &[0; 8])),
        (
            "Metadata v-1 (negative version)",
            raw_frame(3, -1, 4, &[0; 8]),
        ),
        ("CreateTopics v1 (below min)", raw_frame(19, 1, 5, &[0; 12])),
        ("CreateTopics v8 (above max)", raw_frame(19, 8, 6, &[0; 12])),
        ("DeleteTopics v0 (below min)", raw_frame(20, 0, 7, &[0; 8])),
        ("DeleteTopics v7 (above max)", raw_frame(20, 7, 8, &[0; 8])),
        (
            "DescribeCluster v3 (above max)",
            raw_frame(60, 3, 9, &[0; 4]),
        ),
        (
            "CreatePartitions v4 (above max)",
            raw_frame(37, 4, 10, &[0; 12]),
        ),
        ("garbage Metadata v12 body", garbage_frame),
        (
            // Kafka's reader: "non-nullable field topics was serialized as null" (nullable
            // from v2).
            "OffsetFetch v1 with null topics",
            raw_frame(9, 1, 12, &[0, 1, b'g', 0xff, 0xff, 0xff, 0xff]),
        ),
        ("truncated CreateTopics v7 body", truncated_frame),
        ("truncated header (3 bytes)", sized(3, &[0, 3, 0])),
        ("header with an over-long client_id", {
            let mut b = BytesMut::new();
            b.put_i16(3);
            b.put_i16(1);
            b.put_i32(11);
            b.put_i16(30_000);
            b.put_slice(b"short");
            sized(b.len() as i32, &b)
        }),
        ("zero-size frame", sized(0, &[])),
        ("size -1", sized(-1, &[0; 16])),
        ("size i32::MIN", sized(i32::MIN, &[0; 16])),
        (
            "size 104857601 (> socket.request.max.bytes)",
            sized(104_857_601, &[0; 64]),
        ),
        ("size i32::MAX", sized(i32::MAX, &[0; 64])),
    ]
}

/// A connection that was opened before the bad frames and must keep working.
async fn assert_healthy(witness: &mut KafkaConn, node: &GregorNode, after: &str) {
    let resp = witness
        .send::<MetadataRequest>(&metadata(12, None, false), 12)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "the witness connection failed after {after}: {e:#}\n{}",
                node.stderr()
            )
        });
    assert_eq!(resp.brokers.len(), 1, "after {after}");
    let mut fresh = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    fresh
        .send::<MetadataRequest>(&metadata(1, None, false), 1)
        .await
        .unwrap_or_else(|e| panic!("a new connection failed after {after}: {e:#}"));
}

#[tokio::test]
async fn every_bad_frame_closes_only_its_connection_without_a_response() {
    let node = GregorNode::start(&[]).unwrap();
    let mut witness = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    assert_healthy(&mut witness, &node, "start-up").await;

    let mut failures = Vec::new();
    for (name, bytes) in cases() {
        let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
        // The node may close before it has read everything; a failed write is fine here.
        let _ = conn.write_raw(&bytes).await;
        match conn.wait_closed(CLOSE_TIMEOUT).await {
            Closed::Silently => {}
            other => failures.push(format!("{name}: expected a silent close, got {other:?}")),
        }
        assert_healthy(&mut witness, &node, name).await;
    }
    assert!(
        failures.is_empty(),
        "{} of {} bad frames were not handled as Kafka does:\n{}",
        failures.len(),
        cases().len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn a_half_sent_frame_then_eof_is_dropped_quietly() {
    let node = GregorNode::start(&[]).unwrap();
    let mut witness = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let frame = encode_request(&metadata(12, None, false), 12, 1, Some("half")).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.write_raw(&frame[..frame.len() / 2]).await.unwrap();
    use tokio::io::AsyncWriteExt;
    conn.stream_mut().shutdown().await.unwrap();
    assert_eq!(conn.wait_closed(CLOSE_TIMEOUT).await, Closed::Silently);
    assert_healthy(&mut witness, &node, "a half-sent frame").await;
}

/// Builds a Metadata v4 frame (no auto-creation) padded with topic names to exactly `size`
/// bytes after the size prefix.
fn metadata_frame_of_size(size: usize) -> Vec<u8> {
    let base = encode_request(&metadata(4, Some(&["p"]), false), 4, 1, Some("pad")).unwrap();
    let pad = size.checked_sub(base.len() - 4).expect("size too small") + 1;
    let name = "p".repeat(pad);
    let frame = encode_request(&metadata(4, Some(&[&name]), false), 4, 1, Some("pad")).unwrap();
    assert_eq!(frame.len() - 4, size);
    frame.to_vec()
}

#[tokio::test]
async fn socket_request_max_bytes_is_checked_before_the_body() {
    let node = GregorNode::start(&[("socket.request.max.bytes", "1024")]).unwrap();

    // Exactly at the limit: answered.
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.write_raw(&metadata_frame_of_size(1024)).await.unwrap();
    let (header, resp) = conn
        .read_response::<MetadataRequest>(4)
        .await
        .unwrap_or_else(|e| panic!("a 1024-byte request (= max) was not answered: {e:#}"));
    assert_eq!(header.correlation_id, 1);
    assert_eq!(resp.topics.len(), 1);
    // The padding name is longer than Kafka's 249-character limit: Kafka's Metadata names it
    // INVALID_TOPIC_EXCEPTION, auto-creation or not.
    assert_eq!(
        resp.topics[0].error_code, 17,
        "unknown topic with an invalid name"
    );

    // One byte over: closed, silently, and only the size prefix needs to arrive.
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.write_raw(&1025i32.to_be_bytes()).await.unwrap();
    assert_eq!(
        conn.wait_closed(CLOSE_TIMEOUT).await,
        Closed::Silently,
        "a 1025-byte size prefix (> socket.request.max.bytes=1024) must close the connection"
    );

    // The full over-limit frame likewise.
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let _ = conn.write_raw(&metadata_frame_of_size(1025)).await;
    assert_eq!(conn.wait_closed(CLOSE_TIMEOUT).await, Closed::Silently);
}

#[tokio::test]
async fn a_client_id_that_is_not_utf8_is_served() {
    // Kafka's readString replaces invalid UTF-8: a Latin-1 client.id still gets its answer.
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    frame.put_i16(18);
    frame.put_i16(0);
    frame.put_i32(77);
    frame.put_i16(4);
    frame.put_slice(b"caf\xe9");
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    let answer = answer_to(&mut conn, &frame).await;
    // Correlation id, then ApiVersions v0's error code 0.
    assert_eq!(&answer[..6], &[0, 0, 0, 77, 0, 0]);
}

/// Sends `frame` and reads its answer, which must come (the connection not closed).
async fn answer_to(conn: &mut KafkaConn, frame: &[u8]) -> bytes::Bytes {
    conn.write_raw(frame).await.unwrap();
    conn.read_frame()
        .await
        .unwrap()
        .expect("an answer, not a closed connection")
}

/// A CreateTopics v2 body creating each of `names` (bytes as sent) with one partition of one
/// replica, 30 s timeout, not validate-only.
fn create_topics_v2(names: &[&[u8]]) -> BytesMut {
    let mut body = BytesMut::new();
    body.put_i32(names.len() as i32);
    for name in names {
        body.put_i16(name.len() as i16);
        body.put_slice(name);
        body.put_i32(1);
        body.put_i16(1);
        body.put_i32(0);
        body.put_i32(0);
    }
    body.put_i32(30_000);
    body.put_u8(0);
    body
}

/// The start of a CreateTopics v2 answer of one topic: correlation id, throttle time, the
/// topic's name and error code.
fn one_topic_answer(correlation_id: i32, name: &str, error_code: i16) -> BytesMut {
    let mut expected = BytesMut::new();
    expected.put_i32(correlation_id);
    expected.put_i32(0);
    expected.put_i32(1);
    expected.put_i16(name.len() as i16);
    expected.put_slice(name.as_bytes());
    expected.put_i16(error_code);
    expected
}

#[tokio::test]
async fn a_topic_name_that_is_not_utf8_gets_kafkas_answer_not_a_closed_connection() {
    // Kafka's readString replaces invalid UTF-8 (U+FFFD): the name reaches topic validation,
    // which refuses it as an invalid topic, and the connection serves on.
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let body = create_topics_v2(&[b"caf\xe9"]);
    let answer = answer_to(&mut conn, &raw_frame(19, 2, 78, &body)).await;
    let expected = one_topic_answer(78, "caf\u{fffd}", 17);
    assert_eq!(&answer[..expected.len()], &expected[..]);
    assert_healthy(&mut conn, &node, "a topic name that is not UTF-8").await;
}

#[tokio::test]
async fn names_alike_once_decoded_as_the_jdk_decodes_them_are_one_name() {
    // The JDK reads an encoded surrogate (ED A0 80) as one U+FFFD, as it reads a stray byte:
    // Kafka sees one topic named twice, INVALID_REQUEST "Duplicate topic name.".
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let body = create_topics_v2(&[b"d\xed\xa0\x80z", b"d\xffz"]);
    let answer = answer_to(&mut conn, &raw_frame(19, 2, 79, &body)).await;
    let mut expected = one_topic_answer(79, "d\u{fffd}z", 42);
    let message = b"Duplicate topic name.";
    expected.put_i16(message.len() as i16);
    expected.put_slice(message);
    assert_eq!(&answer[..], &expected[..]);
}
