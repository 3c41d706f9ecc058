//! A combined node that knows no active controller (its quorum lost the majority, so no
//! election can finish) holds a client's forwarded request until a controller is elected, as
//! Kafka's forwarding channel keeps it queued, instead of answering NOT_CONTROLLER at once:
//! kafka-python's admin client retries NOT_CONTROLLER once and then fails the call. The quorum
//! gauges (`kafka_server_raft_metrics_*`) show the node without a leader meanwhile.

use std::time::Duration;

use gregor_integration::admin::{creatable, create_topics};
use gregor_integration::prom::{parse, scrape, value};
use gregor_integration::{wait_until, KafkaConn};
use kafka_protocol::messages::CreateTopicsRequest;

use crate::{leader_id, wait_forwarding, wait_leader, FORM_TIMEOUT};

const CURRENT_LEADER: &str = "kafka_server_raft_metrics_current_leader";

async fn current_leader(metrics_addr: &str) -> anyhow::Result<Option<f64>> {
    Ok(value(
        &parse(&scrape(metrics_addr).await?)?,
        CURRENT_LEADER,
        &[],
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_sent_while_no_controller_leads_waits_for_the_election() -> anyhow::Result<()> {
    let cluster = crate::Cluster::start_combined(3, &[])?;
    let controller_addrs = cluster.controller_addrs();
    let nodes = &cluster.controllers;
    let leader = leader_id(&wait_leader(&controller_addrs).await?);
    let survivor = nodes
        .iter()
        .position(|(id, _)| *id != leader)
        .expect("two nodes do not lead");
    let survivor_bootstrap = nodes[survivor].1.bootstrap();
    let survivor_metrics = nodes[survivor].1.metrics_addr();
    wait_forwarding(&survivor_bootstrap).await?;
    assert_eq!(
        current_leader(&survivor_metrics).await?,
        Some(f64::from(leader))
    );

    // Stall both other nodes: the survivor's elections cannot win a majority.
    let stalled: Vec<usize> = (0..nodes.len()).filter(|i| *i != survivor).collect();
    for &i in &stalled {
        nodes[i].1.pause()?;
    }
    let outcome = async {
        wait_until("the survivor without a leader", FORM_TIMEOUT, || async {
            Ok((current_leader(&survivor_metrics).await? == Some(-1.0)).then_some(()))
        })
        .await?;
        let mut conn = KafkaConn::connect(&survivor_bootstrap).await?;
        conn.set_timeout(Duration::from_secs(120));
        let request = create_topics(vec![creatable("created-after-election", 1, 1)], false);
        let mut answer =
            tokio::spawn(async move { conn.send::<CreateTopicsRequest>(&request, 7).await });
        // Before the hold, NOT_CONTROLLER came back at once.
        let early = tokio::time::timeout(Duration::from_secs(3), &mut answer).await;
        assert!(early.is_err(), "answered without a controller: {early:?}");
        nodes[stalled[0]].1.resume()?;
        let response = answer.await??;
        anyhow::Ok(response)
    }
    .await;
    // Resume every node whatever happened, so a failure leaves no stopped process behind.
    for &i in &stalled {
        nodes[i].1.resume()?;
    }
    let topic = &outcome?.topics[0];
    assert_eq!(topic.error_code, 0, "{:?}", topic.error_message);
    let elected = leader_id(&wait_leader(&controller_addrs).await?);
    wait_until(
        "the survivor knows the new leader",
        FORM_TIMEOUT,
        || async {
            Ok(
                (current_leader(&survivor_metrics).await? == Some(f64::from(elected)))
                    .then_some(()),
            )
        },
    )
    .await?;
    Ok(())
}
