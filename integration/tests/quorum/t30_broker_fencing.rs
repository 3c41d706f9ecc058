//! A broker that stops heartbeating is fenced by the active controller: it leaves Metadata's
//! broker list and the partitions it led get another in-sync leader; when it comes back it is
//! unfenced.

use std::collections::BTreeSet;

use gregor_integration::admin::{creatable, create_topics, metadata};
use gregor_integration::{wait_until, KafkaConn};
use kafka_protocol::messages::MetadataResponse;

use crate::{Cluster, FORM_TIMEOUT};

async fn metadata_of(addr: &str) -> anyhow::Result<MetadataResponse> {
    let mut conn = KafkaConn::connect(addr).await?;
    conn.send(&metadata(12, Some(&["fenced"]), false), 12).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_broker_is_fenced_and_loses_leadership() -> anyhow::Result<()> {
    let mut cluster = Cluster::start_with(
        3,
        2,
        &[
            ("broker.session.timeout.ms", "3000"),
            ("broker.heartbeat.interval.ms", "500"),
        ],
    )?;
    let survivor = cluster.brokers[1].1.bootstrap();
    wait_until("create fenced", FORM_TIMEOUT, || async {
        let mut conn = KafkaConn::connect(&survivor).await?;
        let response = conn
            .send(&create_topics(vec![creatable("fenced", 4, 2)], false), 7)
            .await?;
        Ok(matches!(response.topics[0].error_code, 0 | 36).then_some(()))
    })
    .await?;
    let before = wait_until("fenced in metadata", FORM_TIMEOUT, || async {
        let m = metadata_of(&survivor).await?;
        Ok((m.topics.len() == 1 && m.topics[0].partitions.len() == 4).then_some(m))
    })
    .await?;
    assert!(
        before.topics[0]
            .partitions
            .iter()
            .any(|p| p.leader_id.0 == 11),
        "broker 11 leads some partition: {:?}",
        before.topics[0].partitions
    );

    cluster.brokers[0].1.kill9()?;
    wait_until(
        "broker 11 fenced and leadership moved",
        FORM_TIMEOUT,
        || async {
            let m = metadata_of(&survivor).await?;
            let brokers: BTreeSet<i32> = m.brokers.iter().map(|b| b.node_id.0).collect();
            let leaders_ok = m.topics[0]
                .partitions
                .iter()
                .all(|p| p.leader_id.0 == 12 && !p.isr_nodes.iter().any(|r| r.0 == 11));
            Ok((brokers == BTreeSet::from([12]) && leaders_ok).then_some(()))
        },
    )
    .await?;

    cluster.brokers[0].1.restart()?;
    wait_until("broker 11 unfenced", FORM_TIMEOUT, || async {
        let m = metadata_of(&survivor).await?;
        let brokers: BTreeSet<i32> = m.brokers.iter().map(|b| b.node_id.0).collect();
        Ok((brokers == BTreeSet::from([11, 12])).then_some(()))
    })
    .await?;
    Ok(())
}
