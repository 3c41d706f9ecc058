//! A broker forwards a client's CreateTopics inside an Envelope; an answer many times the
//! request (every name refused with its message) crosses the controller and the broker without
//! being held whole by either (issue #11: each node's peak resident memory grows by less than
//! four frames), and a large answer through the broker is the one the controller gives.

use std::time::Duration;

use bytes::{Buf, Bytes};
use gregor_integration::admin::{creatable, create_topics};
use gregor_integration::frames::{compact_length, create_topics_v7, four_letter_name};
use gregor_integration::{decode_response, wait_until, GregorNode, KafkaConn};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{CreateTopicsRequest, ResponseHeader};
use kafka_protocol::protocol::Decodable;

use crate::{Cluster, FORM_TIMEOUT};

/// The frame size: 10 MB, or `GREGOR_FORWARDED_FRAME_BYTES` (BENCHMARKS.md measures the
/// default `socket.request.max.bytes`, 104,857,600).
fn frame_size() -> usize {
    std::env::var("GREGOR_FORWARDED_FRAME_BYTES")
        .ok()
        .and_then(|bytes| bytes.parse().ok())
        .unwrap_or(10_000_000)
}

/// Waits until the broker forwards creations to the controller.
async fn forwarding(broker: &str) -> anyhow::Result<()> {
    wait_until(
        "a topic created through the broker",
        FORM_TIMEOUT,
        || async {
            let mut conn = KafkaConn::connect(broker).await?;
            let request = create_topics(vec![creatable("forwarding-ready", 1, 1)], false);
            let response = conn.send::<CreateTopicsRequest>(&request, 7).await?;
            Ok(matches!(response.topics[0].error_code, 0 | 36).then_some(()))
        },
    )
    .await
}

/// Sends `frame` to `addr` and returns the answer frame (size prefix read).
async fn answer(addr: &str, frame: &[u8]) -> anyhow::Result<Bytes> {
    let mut conn = KafkaConn::connect(addr).await?;
    conn.set_timeout(Duration::from_secs(600));
    conn.write_raw(frame).await?;
    conn.read_frame()
        .await?
        .ok_or_else(|| anyhow::anyhow!("the connection closed without an answer"))
}

fn growth(node: &GregorNode, before: u64) -> u64 {
    node.resident_memory().unwrap().peak.saturating_sub(before)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_answer_many_times_its_request_stays_within_four_frames() -> anyhow::Result<()>
{
    let cluster = Cluster::start(1, 1)?;
    let (controller, broker) = (&cluster.controllers[0].1, &cluster.brokers[0].1);
    forwarding(&broker.bootstrap()).await?;
    // Past the controller's 10,000 records the creation is refused whole: every name is
    // answered with the message, about six times the frame.
    let frame_size = frame_size();
    let count = (frame_size - 40) / 14;
    let frame = create_topics_v7(count, 1, false);
    let (controller_before, broker_before) = (
        controller.resident_memory()?.current,
        broker.resident_memory()?.current,
    );
    let mut body = answer(&broker.bootstrap(), &frame).await?;
    let (controller_growth, broker_growth) = (
        growth(controller, controller_before),
        growth(broker, broker_before),
    );
    let answer_size = body.len();
    let header = ResponseHeader::decode(&mut body, 1)?;
    assert_eq!(header.correlation_id, 42);
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(
        compact_length(&mut body),
        count as u64 + 1,
        "one answer per topic"
    );
    for index in 0..count {
        let topic = CreatableTopicResult::decode(&mut body, 7)?;
        assert_eq!(
            (
                topic.name.as_str().as_bytes(),
                topic.error_code,
                topic.error_message.as_deref()
            ),
            (
                &four_letter_name(index)[..],
                44,
                Some("Unable to perform excessively large batch operation.")
            ),
            "topic {index}"
        );
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
    assert!(
        answer_size > 5 * frame_size,
        "an answer of {answer_size} bytes"
    );
    eprintln!(
        "a {}-byte CreateTopics answered with {answer_size} bytes: peak growth {controller_growth} \
         bytes on the controller, {broker_growth} on the broker",
        frame.len()
    );
    for (node, grown) in [("controller", controller_growth), ("broker", broker_growth)] {
        assert!(
            grown < 4 * frame_size as u64,
            "a {}-byte CreateTopics answered with {answer_size} bytes grew the {node}'s peak \
             resident memory by {grown} bytes",
            frame.len()
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_forwarded_answer_is_the_controllers() -> anyhow::Result<()> {
    let cluster = Cluster::start(1, 1)?;
    let (controller, broker) = (&cluster.controllers[0].1, &cluster.brokers[0].1);
    forwarding(&broker.bootstrap()).await?;
    // Validated only: each topic's answer lists its configs, megabytes in all, more than the
    // broker reads whole.
    let frame = create_topics_v7(3_000, 1, true);
    let through_broker = answer(&broker.bootstrap(), &frame).await?;
    let from_controller = answer(&controller.bootstrap(), &frame).await?;
    assert!(
        through_broker.len() > 2 * 1024 * 1024,
        "an answer of {} bytes",
        through_broker.len()
    );
    let decoded = |frame: Bytes| -> anyhow::Result<Vec<CreatableTopicResult>> {
        let (header, response) = decode_response::<CreateTopicsRequest>(frame, 7)?;
        assert_eq!(header.correlation_id, 42);
        // Topic ids are drawn anew for each validation.
        Ok(response
            .topics
            .into_iter()
            .map(|topic| topic.with_topic_id(Default::default()))
            .collect())
    };
    let (through_broker, from_controller) = (decoded(through_broker)?, decoded(from_controller)?);
    assert_eq!(through_broker.len(), 3_000);
    assert!(through_broker.iter().all(
        |topic| topic.error_code == 0 && topic.configs.as_ref().is_some_and(|c| !c.is_empty())
    ));
    assert!(through_broker == from_controller);
    Ok(())
}
