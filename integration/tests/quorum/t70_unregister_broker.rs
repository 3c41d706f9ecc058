//! UnregisterBroker (api 64) and `gregor cluster`: a stopped broker is unregistered through
//! another broker (forwarded to the active controller); the image and Metadata no longer show
//! it, its partitions keep naming it as a replica but not in their ISR or as leader (Kafka's
//! `handleBrokerUnregistered`), and the leader drops it from the raft membership so it stops
//! replicating to it; restarted, it joins and registers again. An unknown id gets
//! BROKER_ID_NOT_REGISTERED, on the wire and from the tool.

use std::process::Command;

use gregor_integration::admin::{creatable, create_topics, metadata};
use gregor_integration::node::strip_ansi;
use gregor_integration::{binary_path, wait_until, KafkaConn};
use kafka_protocol::messages::{BrokerId, UnregisterBrokerRequest};

use crate::{Cluster, FORM_TIMEOUT};

const BROKER_ID_NOT_REGISTERED: i16 = 102;

fn cluster_tool(args: &[&str]) -> anyhow::Result<std::process::Output> {
    Ok(Command::new(binary_path())
        .arg("cluster")
        .args(args)
        .output()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_broker_is_unregistered_and_left_behind() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(1, 2)?;
    let controller = cluster.controllers[0].1.bootstrap();
    let broker = cluster.brokers[0].1.bootstrap();

    let out = cluster_tool(&["cluster-id", "--bootstrap-server", &broker])?;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("Cluster ID: {}\n", cluster.cluster_id)
    );

    // Every partition names both brokers.
    wait_until("create left-behind", FORM_TIMEOUT, || async {
        let mut conn = KafkaConn::connect(&broker).await?;
        let response = conn
            .send(
                &create_topics(vec![creatable("left-behind", 4, 2)], false),
                7,
            )
            .await?;
        Ok(matches!(response.topics[0].error_code, 0 | 36).then_some(()))
    })
    .await?;

    cluster.brokers[1].1.kill9()?;
    let out = cluster_tool(&["unregister", "--bootstrap-server", &broker, "--id", "12"])?;
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Broker 12 is no longer registered.\n"
    );

    // Broker 11's image (the forwarded write is committed before the answer; 11 applies it
    // from the leader's next entries).
    wait_until("12 gone from Metadata", FORM_TIMEOUT, || async {
        let mut conn = KafkaConn::connect(&broker).await?;
        let response = conn
            .send(&metadata(12, Some(&["left-behind"]), false), 12)
            .await?;
        let brokers: Vec<i32> = response.brokers.iter().map(|b| b.node_id.0).collect();
        Ok((brokers == [11]).then_some(response))
    })
    .await
    .map(|response| {
        for partition in &response.topics[0].partitions {
            let replicas: Vec<i32> = partition.replica_nodes.iter().map(|r| r.0).collect();
            let isr: Vec<i32> = partition.isr_nodes.iter().map(|r| r.0).collect();
            assert!(replicas.contains(&12), "{partition:?}");
            assert_eq!(isr, [11], "{partition:?}");
            assert_eq!(partition.leader_id.0, 11, "{partition:?}");
        }
    })?;

    // The leader stops replicating to the departed learner.
    let leader = &cluster.controllers[0].1;
    wait_until("learner 12 leaves the membership", FORM_TIMEOUT, || async {
        let log = strip_ansi(&leader.stderr());
        Ok(log
            .lines()
            .any(|l| l.contains("removing departed learners") && l.contains("{12}"))
            .then_some(()))
    })
    .await?;

    // Unknown (and now unregistered) ids: Kafka's error on the wire, on either listener.
    for addr in [&broker, &controller] {
        let mut conn = KafkaConn::connect(addr).await?;
        let response = conn
            .send(
                &UnregisterBrokerRequest::default().with_broker_id(BrokerId(12)),
                0,
            )
            .await?;
        assert_eq!(response.error_code, BROKER_ID_NOT_REGISTERED, "{addr}");
        // Kafka's ControllerApis sets the code only: the message keeps its default, "".
        assert_eq!(
            response.error_message.as_ref().map(|m| m.as_str()),
            Some("")
        );
    }
    // The departed broker comes back: it joins as a new learner, registers again and catches
    // up over a new raft link (ready means it applied everything committed before its join).
    cluster.brokers[1].1.restart()?;
    let returned = cluster.brokers[1].1.bootstrap();
    wait_until("12 registered again", FORM_TIMEOUT, || async {
        let mut conn = KafkaConn::connect(&returned).await?;
        let response = conn
            .send(&metadata(12, Some(&["left-behind"]), false), 12)
            .await?;
        let brokers: Vec<i32> = response.brokers.iter().map(|b| b.node_id.0).collect();
        Ok((brokers == [11, 12] && response.topics[0].error_code == 0).then_some(()))
    })
    .await?;

    let out = cluster_tool(&[
        "unregister",
        "--bootstrap-controller",
        &controller,
        "--id",
        "99",
    ])?;
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "org.apache.kafka.common.errors.BrokerIdNotRegisteredException: The given broker ID was not registered."
        ),
        "{out:?}"
    );
    Ok(())
}
