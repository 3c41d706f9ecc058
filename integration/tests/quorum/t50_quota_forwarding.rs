//! KIP-599 across processes: a broker forwards quota changes and topic mutations to the active
//! controller, which charges the token bucket; the broker hands the client the controller's
//! throttle and mutes the client's connection for it (Kafka's `sendForwardedResponse`).

use std::time::{Duration, Instant};

use gregor_integration::admin::{creatable, create_topics, default_user_quota, metadata};
use gregor_integration::{wait_until, KafkaConn};
use kafka_protocol::messages::{CreateTopicsRequest, MetadataRequest};

use crate::{Cluster, FORM_TIMEOUT};

const THROTTLING_QUOTA_EXCEEDED: i16 = 89;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_carries_the_controllers_throttle_and_mutes_the_client() -> anyhow::Result<()> {
    let cluster = Cluster::start_with(1, 1, &[("controller.quota.window.num", "10")])?;
    let broker = cluster.brokers[0].1.bootstrap();
    // 2 mutations/s over 10 one-second windows: a bucket of 20 tokens for User:ANONYMOUS.
    let quota = default_user_quota("controller_mutation_rate", 2.0);
    wait_until(
        "the quota is set through the broker",
        FORM_TIMEOUT,
        || async {
            let mut conn = KafkaConn::connect(&broker).await?;
            let response = conn.send(&quota, 1).await?;
            Ok((response.entries[0].error_code == 0).then_some(()))
        },
    )
    .await?;

    let mut conn = KafkaConn::connect(&broker).await?;
    let request = create_topics(
        vec![creatable("charged-a", 30, 1), creatable("charged-b", 30, 1)],
        false,
    );
    // The quota reaches the controller's managers through its image; retry until it bites.
    let (codes, throttle) = wait_until("the controller charges the bucket", FORM_TIMEOUT, || {
        let request = request.clone();
        let broker = broker.clone();
        async move {
            let mut conn = KafkaConn::connect(&broker).await?;
            let response = conn.send::<CreateTopicsRequest>(&request, 7).await?;
            let mut codes: Vec<i16> = response.topics.iter().map(|t| t.error_code).collect();
            codes.sort_unstable();
            Ok((codes.contains(&THROTTLING_QUOTA_EXCEEDED))
                .then_some((codes, response.throttle_time_ms)))
        }
    })
    .await?;
    assert!(
        codes
            .iter()
            .all(|c| matches!(*c, 0 | 36 | THROTTLING_QUOTA_EXCEEDED)),
        "{codes:?}"
    );
    assert!(throttle > 0 && throttle <= 5000, "throttle {throttle}");

    // On a connection that gets a throttled answer, the next request waits out the mute.
    let response = conn
        .send::<CreateTopicsRequest>(
            &create_topics(vec![creatable("charged-c", 30, 1)], false),
            7,
        )
        .await?;
    let first_throttle = throttle;
    let throttle = response.throttle_time_ms;
    assert!(
        throttle > 0,
        "the bucket is still negative (first answer {codes:?}, {first_throttle} ms, then {:?}): {:?}",
        Instant::now(),
        response.topics.iter().map(|t| (t.error_code, t.error_message.clone())).collect::<Vec<_>>()
    );
    let sent = Instant::now();
    conn.send::<MetadataRequest>(&metadata(12, Some(&["charged-c"]), false), 12)
        .await?;
    // Not a timing measurement: a muted connection cannot answer before the throttle ends
    // (with slack for the time the first answer spent in flight).
    let slack = Duration::from_millis(250);
    assert!(
        sent.elapsed() + slack >= Duration::from_millis(throttle as u64),
        "answered after {:?} though throttled for {throttle} ms",
        sent.elapsed()
    );
    Ok(())
}
