//! One request must not make the node allocate many times its frame. The worst request found
//! (issue #11: a Metadata v1 request naming one empty topic name per two bytes, which took a
//! node to 1.28 GB for a 9.5 MB frame) at 10 MB: the node's peak resident memory grows by less
//! than four times the frame, and the answer names the topic once.

use bytes::{BufMut, BytesMut};
use gregor_integration::{decode_response, GregorNode, KafkaConn};
use kafka_protocol::messages::MetadataRequest;

const FRAME: usize = 10_000_000;

#[tokio::test]
async fn a_metadata_request_repeating_one_topic_stays_within_four_frames() {
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(std::time::Duration::from_secs(120));
    // Header v1 (api 3, v1, correlation 42, client id "m"), then the topic list.
    let names = (FRAME - 20) / 2;
    let mut frame = BytesMut::with_capacity(FRAME);
    frame.put_i32(0);
    frame.put_i16(3);
    frame.put_i16(1);
    frame.put_i32(42);
    frame.put_i16(1);
    frame.put_u8(b'm');
    frame.put_i32(names as i32);
    frame.put_bytes(0, names * 2);
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());

    let before = node.resident_memory().unwrap();
    conn.write_raw(&frame).await.unwrap();
    let answer = conn.read_frame().await.unwrap().unwrap();
    let after = node.resident_memory().unwrap();

    let (header, response) = decode_response::<MetadataRequest>(answer, 1).unwrap();
    assert_eq!(header.correlation_id, 42);
    let topics: Vec<_> = response
        .topics
        .iter()
        .map(|t| (t.name.as_ref().map(|n| n.to_string()), t.error_code))
        .collect();
    // One distinct name, answered once: "" is not a valid topic name (INVALID_TOPIC_EXCEPTION).
    assert_eq!(topics, vec![(Some(String::new()), 17)]);
    let growth = after.peak.saturating_sub(before.current);
    assert!(
        growth < 4 * FRAME as u64,
        "a {FRAME}-byte Metadata request grew the node's peak resident memory by {growth} bytes"
    );
}
