//! Removing the active controller by id: it resigns (as Kafka's leader does), another voter
//! leads, the removed controller keeps following as an observer, and it can be added back by id.

use std::process::Command;

use gregor_integration::admin::{creatable, create_topics};
use gregor_integration::{binary_path, prom, wait_until, KafkaConn};

use crate::{leader_id, leader_view, wait_leader, Cluster, FORM_TIMEOUT};

fn quorum_tool(args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new(binary_path())
        .arg("metadata-quorum")
        .args(args)
        .output()?;
    anyhow::ensure!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_active_controller_resigns_when_removed_and_can_return() -> anyhow::Result<()> {
    let cluster = Cluster::start(3, 1)?;
    let controllers: Vec<String> = cluster
        .controllers
        .iter()
        .map(|(_, n)| n.bootstrap())
        .collect();
    let old_leader = leader_id(&wait_leader(&controllers).await?);
    let removed = cluster
        .controllers
        .iter()
        .find(|(id, _)| *id == old_leader)
        .map(|(_, node)| node)
        .ok_or_else(|| anyhow::anyhow!("leader {old_leader} is not one of the controllers"))?;

    let out = quorum_tool(&[
        "--bootstrap-controller",
        &cluster.bootstrap_controllers,
        "remove-controller",
        "--controller-id",
        &old_leader.to_string(),
    ])?;
    assert!(
        out.starts_with(&format!("Removed  KRaft controller {old_leader}")),
        "{out}"
    );

    // Another voter leads, and the removed controller is an observer again.
    wait_until(
        "a new leader with the old one observing",
        FORM_TIMEOUT,
        || async {
            let Some(view) = leader_view(&controllers).await? else {
                return Ok(None);
            };
            let partition = &view.topics[0].partitions[0];
            let voters: Vec<i32> = partition
                .current_voters
                .iter()
                .map(|v| v.replica_id.0)
                .collect();
            let observing = partition
                .observers
                .iter()
                .any(|o| o.replica_id.0 == old_leader);
            Ok((partition.leader_id.0 != old_leader
                && !voters.contains(&old_leader)
                && voters.contains(&partition.leader_id.0)
                && observing)
                .then_some(()))
        },
    )
    .await?;

    // Mutations keep working, and the removed controller's image still follows.
    let broker = cluster.brokers[0].1.bootstrap();
    let mut conn = KafkaConn::connect(&broker).await?;
    let response = conn
        .send(
            &create_topics(vec![creatable("after-resign", 2, 1)], false),
            7,
        )
        .await?;
    assert_eq!(response.topics[0].error_code, 0);
    let metrics = removed.metrics_addr();
    wait_until(
        "the removed controller's image has the topic",
        FORM_TIMEOUT,
        || async {
            let samples = prom::parse(&prom::scrape(&metrics).await?)?;
            Ok(
                (prom::value(&samples, "gregor_metadata_image_topics", &[]) == Some(1.0))
                    .then_some(()),
            )
        },
    )
    .await?;

    // Added back by id alone (KAFKA-18775).
    quorum_tool(&[
        "--bootstrap-controller",
        &cluster.bootstrap_controllers,
        "add-controller",
        "--controller-id",
        &old_leader.to_string(),
    ])?;
    wait_until("the old leader is a voter again", FORM_TIMEOUT, || async {
        let Some(view) = leader_view(&controllers).await? else {
            return Ok(None);
        };
        let voters = &view.topics[0].partitions[0].current_voters;
        Ok(voters
            .iter()
            .any(|v| v.replica_id.0 == old_leader)
            .then_some(()))
    })
    .await?;
    Ok(())
}
