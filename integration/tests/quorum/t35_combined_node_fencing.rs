//! A node that is both broker and voter and stops answering (SIGSTOP) past
//! `broker.session.timeout.ms` is fenced by the active controller (it leaves Metadata and
//! DescribeCluster), and once it runs again (SIGCONT) and has caught up it is unfenced, without
//! a restart. A broker-only observer is unfenced the same way.

use std::collections::BTreeSet;

use gregor_integration::admin::metadata;
use gregor_integration::{wait_until, KafkaConn};
use kafka_protocol::messages::DescribeClusterRequest;

use crate::{leader_id, wait_leader, FORM_TIMEOUT};

async fn brokers_in_metadata(addr: &str) -> anyhow::Result<BTreeSet<i32>> {
    let mut conn = KafkaConn::connect(addr).await?;
    let m = conn.send(&metadata(12, Some(&[]), false), 12).await?;
    Ok(m.brokers.iter().map(|b| b.node_id.0).collect())
}

async fn brokers_in_describe_cluster(addr: &str) -> anyhow::Result<BTreeSet<i32>> {
    let mut conn = KafkaConn::connect(addr).await?;
    let d = conn.send(&DescribeClusterRequest::default(), 0).await?;
    Ok(d.brokers.iter().map(|b| b.broker_id.0).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_combined_node_that_stalls_is_fenced_and_unfenced_after_it_heals() -> anyhow::Result<()> {
    let cluster = crate::Cluster::start_combined(
        3,
        &[
            ("broker.session.timeout.ms", "3000"),
            ("broker.heartbeat.interval.ms", "500"),
        ],
    )?;
    let controller_addrs = cluster.controller_addrs();
    let nodes = &cluster.controllers;
    let all = BTreeSet::from([1, 2, 3]);
    let first = nodes[0].1.bootstrap();
    wait_until("every node unfenced", FORM_TIMEOUT, || async {
        Ok((brokers_in_metadata(&first).await? == all).then_some(()))
    })
    .await?;

    // Stall a node that does not lead, so the quorum keeps its leader.
    let leader = leader_id(&wait_leader(&controller_addrs).await?);
    let victim = nodes
        .iter()
        .position(|(id, _)| *id != leader)
        .expect("two nodes do not lead");
    let victim_id = nodes[victim].0;
    let observer = nodes
        .iter()
        .find(|(id, _)| *id != victim_id)
        .map(|(_, n)| n.bootstrap())
        .expect("two other nodes");
    let pid = nodes[victim].1.pid();
    nodes[victim].1.pause()?;
    let survivors: BTreeSet<i32> = all.iter().copied().filter(|id| *id != victim_id).collect();
    let fenced = wait_until("the stalled node fenced", FORM_TIMEOUT, || async {
        let in_metadata = brokers_in_metadata(&observer).await?;
        let in_cluster = brokers_in_describe_cluster(&observer).await?;
        Ok((in_metadata == survivors && in_cluster == survivors).then_some(()))
    })
    .await;
    // Resume it whatever happened, so a failure does not leave a stopped process behind.
    nodes[victim].1.resume()?;
    fenced?;

    wait_until("the healed node unfenced", FORM_TIMEOUT, || async {
        Ok((brokers_in_metadata(&observer).await? == all).then_some(()))
    })
    .await?;
    let healed = nodes[victim].1.bootstrap();
    wait_until(
        "the healed node sees itself unfenced",
        FORM_TIMEOUT,
        || async { Ok((brokers_in_describe_cluster(&healed).await? == all).then_some(())) },
    )
    .await?;
    assert_eq!(nodes[victim].1.pid(), pid, "healed without a restart");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_that_stalls_is_fenced_and_unfenced_after_it_heals() -> anyhow::Result<()> {
    let cluster = crate::Cluster::start_with(
        1,
        2,
        &[
            ("broker.session.timeout.ms", "3000"),
            ("broker.heartbeat.interval.ms", "500"),
        ],
    )?;
    let survivor = cluster.brokers[1].1.bootstrap();
    let both = BTreeSet::from([11, 12]);
    wait_until("both brokers unfenced", FORM_TIMEOUT, || async {
        Ok((brokers_in_metadata(&survivor).await? == both).then_some(()))
    })
    .await?;
    cluster.brokers[0].1.pause()?;
    let fenced = wait_until("broker 11 fenced", FORM_TIMEOUT, || async {
        Ok((brokers_in_metadata(&survivor).await? == BTreeSet::from([12])).then_some(()))
    })
    .await;
    cluster.brokers[0].1.resume()?;
    fenced?;
    wait_until("broker 11 unfenced", FORM_TIMEOUT, || async {
        Ok((brokers_in_metadata(&survivor).await? == both).then_some(()))
    })
    .await?;
    Ok(())
}
