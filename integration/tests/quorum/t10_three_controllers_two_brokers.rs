//! Three controllers and two brokers: topics created through either broker appear on both,
//! DescribeQuorum reports voters and observers, and killing the leader with SIGKILL elects a new
//! one without losing committed topics; the old leader catches up after a restart.

use std::collections::BTreeSet;
use std::time::Instant;

use gregor_integration::admin::{creatable, create_topics, metadata, topics_of};
use gregor_integration::{wait_until, KafkaConn};

use crate::{leader_id, wait_leader, Cluster, FORM_TIMEOUT};

async fn create_via(addr: &str, name: &str) -> anyhow::Result<Option<()>> {
    let mut conn = KafkaConn::connect(addr).await?;
    let response = conn
        .send(&create_topics(vec![creatable(name, 3, 2)], false), 7)
        .await?;
    match response.topics.first().map(|t| t.error_code) {
        Some(0) | Some(36) => Ok(Some(())),
        // NOT_CONTROLLER while a leader is elected: retry.
        Some(41) => Ok(None),
        other => anyhow::bail!("create {name}: {other:?} {:?}", response.topics),
    }
}

async fn topics_on(addr: &str) -> anyhow::Result<BTreeSet<String>> {
    let mut conn = KafkaConn::connect(addr).await?;
    let response = conn.send(&metadata(12, None, false), 12).await?;
    Ok(topics_of(&response).into_keys().collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topics_survive_leader_kill9() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(3, 2)?;
    let controller_addrs: Vec<String> = cluster
        .controllers
        .iter()
        .map(|(_, n)| n.bootstrap())
        .collect();
    let brokers: Vec<String> = cluster.brokers.iter().map(|(_, n)| n.bootstrap()).collect();

    // Created through broker 11 (forwarded), visible on broker 12 from its own image.
    wait_until("create orders", FORM_TIMEOUT, || {
        create_via(&brokers[0], "orders")
    })
    .await?;
    let committed = Instant::now();
    wait_until("orders on broker 12", FORM_TIMEOUT, || async {
        Ok(topics_on(&brokers[1])
            .await?
            .contains("orders")
            .then_some(()))
    })
    .await?;

    // Upper bound of commit → the other broker's image (one Metadata round trip and the 25 ms
    // poll interval included); BENCHMARKS.md quotes it.
    eprintln!(
        "propagation: visible on broker 12 {:?} after the commit answer",
        committed.elapsed()
    );

    // Metadata auto-creation on a broker goes to the active controller too.
    wait_until(
        "auto-created on broker 12, seen on broker 11",
        FORM_TIMEOUT,
        || async {
            let mut conn = KafkaConn::connect(&brokers[1]).await?;
            conn.send(&metadata(12, Some(&["auto"]), true), 12).await?;
            Ok(topics_on(&brokers[0]).await?.contains("auto").then_some(()))
        },
    )
    .await?;

    // Replicas are spread over both unfenced brokers.
    let mut conn = KafkaConn::connect(&brokers[1]).await?;
    let response = conn
        .send(&metadata(12, Some(&["orders"]), false), 12)
        .await?;
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.replica_nodes.len(), 2, "{partition:?}");
    assert_eq!(response.brokers.len(), 2, "{:?}", response.brokers);

    let view = wait_leader(&controller_addrs).await?;
    let p = &view.topics[0].partitions[0];
    assert_eq!(p.current_voters.len(), 3, "{p:?}");
    let observer_ids: BTreeSet<i32> = p.observers.iter().map(|o| o.replica_id.0).collect();
    assert!(
        observer_ids.contains(&11) && observer_ids.contains(&12),
        "{p:?}"
    );
    assert_eq!(view.nodes.len(), 3);
    assert!(p
        .current_voters
        .iter()
        .all(|v| !v.replica_directory_id.is_nil()));

    // Kill the leader; a new one takes over and clients keep working.
    let old_leader = leader_id(&view);
    let killed_at = Instant::now();
    let index = cluster
        .controllers
        .iter()
        .position(|(id, _)| *id == old_leader)
        .expect("leader is a controller");
    cluster.controllers[index].1.kill9()?;
    let survivors: Vec<String> = controller_addrs
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != index)
        .map(|(_, a)| a.clone())
        .collect();
    let view = wait_until("a new leader", FORM_TIMEOUT, || async {
        let view = crate::leader_view(&survivors).await?;
        Ok(view.filter(|v| leader_id(v) != old_leader))
    })
    .await?;
    let failover = killed_at.elapsed();
    eprintln!(
        "failover: new leader {} after {failover:?}",
        leader_id(&view)
    );

    wait_until("create payments", FORM_TIMEOUT, || {
        create_via(&brokers[1], "payments")
    })
    .await?;
    // The new leader accepts writes only once it has applied the log up to its term's start.
    eprintln!(
        "write failover: first create committed {:?} after the kill",
        killed_at.elapsed()
    );
    for broker in &brokers {
        wait_until("both topics on every broker", FORM_TIMEOUT, || async {
            let topics = topics_on(broker).await?;
            Ok((topics.contains("orders") && topics.contains("payments")).then_some(()))
        })
        .await?;
    }

    // The old leader comes back and catches up (it is ready only once it has applied the
    // leader's read index).
    cluster.controllers[index].1.restart_same_ports()?;
    let view = wait_leader(&controller_addrs).await?;
    let p = &view.topics[0].partitions[0];
    let high_watermark = p.high_watermark;
    wait_until("the old leader to catch up", FORM_TIMEOUT, || async {
        let view = crate::leader_view(&controller_addrs).await?;
        Ok(view.and_then(|v| {
            let p = &v.topics[0].partitions[0];
            p.current_voters
                .iter()
                .find(|r| r.replica_id.0 == old_leader)
                .filter(|r| r.log_end_offset >= high_watermark)
                .map(|_| ())
        }))
    })
    .await?;
    Ok(())
}
