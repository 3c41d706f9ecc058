//! KIP-599 end to end (reference §3.7 cases 8-11): with `controller_mutation_rate = 2` for
//! `User:ANONYMOUS` and a 10 × 1 s window the bucket holds 20 tokens. Two 30-partition
//! mutations in one strict request: the first drives the bucket to −10 and succeeds, the second
//! is rejected with THROTTLING_QUOTA_EXCEEDED and a throttle of −(−10) / 2 = 5 s. Permissive
//! (old) versions apply both and report 20 − 60 = −40 ⇒ 20 s.

use std::time::{Duration, Instant};

use gregor_integration::admin::{
    creatable, create_partitions, create_topics, delete_topics_by_name,
};
use gregor_integration::{prom, wait_until, GregorNode, KafkaConn};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, MetadataRequest,
};

use super::{connect, set_mutation_rate, start_node};

const THROTTLING_QUOTA_EXCEEDED: i16 = 89;

async fn create(
    conn: &mut KafkaConn,
    version: i16,
    names: &[&str],
    partitions: i32,
) -> (Vec<i16>, i32) {
    let request = create_topics(
        names.iter().map(|n| creatable(n, partitions, 1)).collect(),
        false,
    );
    let response = conn
        .send::<CreateTopicsRequest>(&request, version)
        .await
        .unwrap();
    (
        response.topics.iter().map(|t| t.error_code).collect(),
        response.throttle_time_ms,
    )
}

async fn delete(conn: &mut KafkaConn, version: i16, names: &[&str]) -> (Vec<i16>, i32) {
    let response = conn
        .send::<DeleteTopicsRequest>(&delete_topics_by_name(version, names), version)
        .await
        .unwrap();
    (
        response.responses.iter().map(|t| t.error_code).collect(),
        response.throttle_time_ms,
    )
}

async fn grow(conn: &mut KafkaConn, version: i16, names: &[&str], count: i32) -> (Vec<i16>, i32) {
    let topics: Vec<CreatePartitionsTopic> = names
        .iter()
        .flat_map(|n| create_partitions(n, count, None, false).topics)
        .collect();
    let request = CreatePartitionsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(30_000);
    let response = conn
        .send::<CreatePartitionsRequest>(&request, version)
        .await
        .unwrap();
    (
        response.results.iter().map(|t| t.error_code).collect(),
        response.throttle_time_ms,
    )
}

/// One topic NONE, the other THROTTLING_QUOTA_EXCEEDED, throttle in (0, 5000].
fn assert_strict((codes, throttle): &(Vec<i16>, i32)) {
    let mut sorted = codes.clone();
    sorted.sort();
    assert_eq!(sorted, vec![0, THROTTLING_QUOTA_EXCEEDED], "{codes:?}");
    assert!(*throttle > 0 && *throttle <= 5000, "throttle {throttle}");
}

/// Both NONE, throttle in (0, 20000].
fn assert_permissive((codes, throttle): &(Vec<i16>, i32)) {
    assert_eq!(codes, &vec![0, 0]);
    assert!(*throttle > 0 && *throttle <= 20_000, "throttle {throttle}");
}

async fn queue_size(node: &GregorNode) -> anyhow::Result<Option<f64>> {
    let samples = prom::parse(&prom::scrape(&node.metrics_addr()).await?)?;
    Ok(prom::value(
        &samples,
        "kafka_server_quota_queue_size",
        &[("resource", "ControllerMutation")],
    ))
}

/// Strict CreateTopics (v7): one created, one rejected; the connection is muted for the
/// throttle and a request pipelined meanwhile is answered afterwards; the retry succeeds.
#[tokio::test]
async fn strict_create_topics_mutes_and_loses_nothing() {
    let node = start_node();
    let mut conn = connect(&node).await;
    set_mutation_rate(&mut conn, "ANONYMOUS", 2.0).await;
    let outcome = create(&mut conn, 7, &["topic-1", "topic-2"], 30).await;
    let answered = Instant::now();
    assert_strict(&outcome);
    let throttle = Duration::from_millis(outcome.1 as u64);
    // Sent while the connection is muted: it waits in the socket, it is not dropped.
    conn.write_request(
        &gregor_integration::admin::metadata(12, None, false),
        12,
        999,
    )
    .await
    .unwrap();
    wait_until(
        "the connection to be counted as muted",
        Duration::from_secs(10),
        || async { Ok(queue_size(&node).await?.filter(|v| *v == 1.0)) },
    )
    .await
    .unwrap();
    let (header, metadata) = conn.read_response::<MetadataRequest>(12).await.unwrap();
    assert_eq!(header.correlation_id, 999);
    // Not a timing measurement: the muted connection cannot have answered before the throttle
    // ran out (minus the moment between the node writing the response and us reading it).
    assert!(answered.elapsed() + Duration::from_millis(250) >= throttle);
    let names: Vec<String> = metadata
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.0.to_string()))
        .collect();
    assert_eq!(names.len(), 1, "{names:?}");
    wait_until("the mute to end", Duration::from_secs(10), || async {
        Ok(queue_size(&node).await?.filter(|v| *v == 0.0))
    })
    .await
    .unwrap();
    // The rejected topic is created by a retry once the bucket has refilled.
    let rejected = if names[0] == "topic-1" {
        "topic-2"
    } else {
        "topic-1"
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (codes, _) = create(&mut conn, 7, &[rejected], 30).await;
        if codes == vec![0] {
            break;
        }
        assert_eq!(codes, vec![THROTTLING_QUOTA_EXCEEDED]);
        assert!(
            Instant::now() < deadline,
            "the retry of {rejected} never succeeded"
        );
        // The node mutes the connection for the throttle it answered, so a retry needs no pause.
    }
    // The throttle-time histogram records the applied throttle.
    let samples = prom::parse(&prom::scrape(&node.metrics_addr()).await.unwrap()).unwrap();
    let max = prom::value(
        &samples,
        "kafka_network_requestmetrics_throttle_time_seconds_sum",
        &[("request", "CreateTopics")],
    );
    assert!(max.is_some_and(|v| v >= 4.0), "{max:?}");
    assert!(prom::value(
        &samples,
        "kafka_server_quota_tokens",
        &[("resource", "ControllerMutation"), ("user", "ANONYMOUS")]
    )
    .is_some());
}

/// Permissive CreateTopics (v5): both created, throttle up to 20 s.
#[tokio::test]
async fn permissive_create_topics() {
    let node = start_node();
    let mut conn = connect(&node).await;
    set_mutation_rate(&mut conn, "ANONYMOUS", 2.0).await;
    assert_permissive(&create(&mut conn, 5, &["topic-1", "topic-2"], 30).await);
}

/// A user without a quota (another user has one): both created, throttle exactly 0.
#[tokio::test]
async fn unbounded_user_is_never_throttled() {
    let node = start_node();
    let mut conn = connect(&node).await;
    set_mutation_rate(&mut conn, "ThrottledPrincipal", 2.0).await;
    assert_eq!(
        create(&mut conn, 7, &["topic-1", "topic-2"], 30).await,
        (vec![0, 0], 0)
    );
    assert_eq!(
        grow(&mut conn, 3, &["topic-1", "topic-2"], 61).await,
        (vec![0, 0], 0)
    );
    assert_eq!(
        delete(&mut conn, 6, &["topic-1", "topic-2"]).await,
        (vec![0, 0], 0)
    );
}

/// DeleteTopics: strict (v6) and permissive (v4) deleting two 30-partition topics.
#[tokio::test]
async fn delete_topics_strict_and_permissive() {
    for (version, strict) in [(6, true), (4, false)] {
        let node = start_node();
        let mut conn = connect(&node).await;
        assert_eq!(
            create(&mut conn, 7, &["topic-1", "topic-2"], 30).await.0,
            vec![0, 0]
        );
        set_mutation_rate(&mut conn, "ANONYMOUS", 2.0).await;
        let outcome = delete(&mut conn, version, &["topic-1", "topic-2"]).await;
        if strict {
            assert_strict(&outcome);
        } else {
            assert_permissive(&outcome);
        }
    }
}

/// CreatePartitions: strict (v3) and permissive (v2) growing two 1-partition topics to 31.
#[tokio::test]
async fn create_partitions_strict_and_permissive() {
    for (version, strict) in [(3, true), (2, false)] {
        let node = start_node();
        let mut conn = connect(&node).await;
        assert_eq!(
            create(&mut conn, 7, &["topic-1", "topic-2"], 1).await.0,
            vec![0, 0]
        );
        set_mutation_rate(&mut conn, "ANONYMOUS", 2.0).await;
        let outcome = grow(&mut conn, version, &["topic-1", "topic-2"], 31).await;
        if strict {
            assert_strict(&outcome);
        } else {
            assert_permissive(&outcome);
        }
    }
}
