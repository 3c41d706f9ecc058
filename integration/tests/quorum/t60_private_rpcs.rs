//! Gregor's private quorum RPCs (api keys 32000+) from strangers: every private key, with valid
//! and hostile bodies, sent to the broker's client listener and to every controller listener,
//! without a hello, with a wrong cluster id, and as nodes the quorum does not know. Nothing
//! changes: the leader and its epoch, the registered brokers, the voters and a throttled
//! client's throttle stay as they were; the client listener closes each connection as it
//! closes any unknown api key. A stranger's Envelope is refused as Kafka refuses one from a
//! principal without CLUSTER_ACTION.

use std::collections::BTreeSet;
use std::time::Duration;

use gregor_integration::admin::{creatable, create_topics, default_user_quota, metadata};
use gregor_integration::client::encode_request;
use gregor_integration::{prom, wait_until, Closed, GregorNode, KafkaConn};
use gregor_node::quorum::testing;
use kafka_protocol::messages::{CreateTopicsRequest, EnvelopeRequest};
use uuid::Uuid;

use crate::{leader_id, wait_leader, Cluster, FORM_TIMEOUT};

const CLOSE_WITHIN: Duration = Duration::from_secs(10);

/// An Envelope for `User:admin` from 127.0.0.1 creating topic `smuggled`.
fn hostile_envelope() -> anyhow::Result<EnvelopeRequest> {
    let inner = create_topics(vec![creatable("smuggled", 1, 1)], false);
    let frame = encode_request(&inner, 7, 1, Some("smuggler"))?;
    Ok(EnvelopeRequest::default()
        .with_request_data(frame.freeze().slice(4..))
        .with_request_principal(Some(
            testing::envelope_principal("admin").map_err(anyhow::Error::msg)?,
        ))
        .with_client_host_address(bytes::Bytes::from_static(&[127, 0, 0, 1])))
}

/// Sends `hello` (if any) and reads its answer, then `frame` (reading the answer of a frame
/// that is a hello, which is refused before the connection closes); returns how the
/// connection ended after `frame`.
async fn send_after_hello(
    addr: &str,
    hello: Option<&[u8]>,
    frame: &testing::PrivateFrame,
) -> anyhow::Result<Closed> {
    let mut conn = KafkaConn::connect(addr).await?;
    if let Some(hello) = hello {
        conn.write_raw(hello).await?;
        if conn.read_frame().await.ok().flatten().is_none() {
            // Closed at the hello itself (a client listener): nothing more to send.
            return Ok(Closed::Silently);
        }
    }
    if conn.write_raw(&frame.bytes).await.is_err() {
        // Closed after a refused hello.
        return Ok(Closed::Silently);
    }
    if frame.name.ends_with("hello") && conn.read_frame().await.ok().flatten().is_none() {
        return Ok(Closed::Silently);
    }
    Ok(conn.wait_closed(CLOSE_WITHIN).await)
}

/// What must not change: (leader id, leader epoch, voters, registered brokers and their
/// ports).
async fn cluster_state(
    controllers: &[String],
    broker: &str,
) -> anyhow::Result<(i32, i32, BTreeSet<i32>, BTreeSet<(i32, i32)>)> {
    let view = wait_leader(controllers).await?;
    let partition = &view.topics[0].partitions[0];
    let voters = partition
        .current_voters
        .iter()
        .map(|v| v.replica_id.0)
        .collect();
    let mut conn = KafkaConn::connect(broker).await?;
    let response = conn.send(&metadata(12, Some(&[]), false), 12).await?;
    let brokers = response
        .brokers
        .iter()
        .map(|b| (b.node_id.0, b.port))
        .collect();
    Ok((leader_id(&view), partition.leader_epoch, voters, brokers))
}

async fn unknown_api_key_closes(metrics: &str) -> anyhow::Result<f64> {
    let samples = prom::parse(&prom::scrape(metrics).await?)?;
    Ok(prom::value(
        &samples,
        "gregor_network_connections_closed_total",
        &[("listener", "PLAINTEXT"), ("reason", "unknown_api_key")],
    )
    .unwrap_or(0.0))
}

/// Sends every private frame a stranger can build, under each opening (no hello, a wrong
/// cluster id, an unknown node, a voter's id with another directory), to every client and
/// controller listener; checks each connection is closed (a join of a new id is refused with
/// an answer instead). Returns how many connections went to client listeners.
async fn probe_listeners(
    clients: &[String],
    controllers: &[String],
    cluster_id: &str,
    leader: i32,
    stranger: Uuid,
) -> anyhow::Result<f64> {
    let mut frames = testing::raft_and_markers(leader as u64);
    frames.push(testing::PrivateFrame {
        name: "join",
        bytes: testing::join(cluster_id, 77, stranger),
    });
    frames.push(testing::PrivateFrame {
        name: "join-wrong-cluster",
        bytes: testing::join("not-this-cluster", 77, stranger),
    });
    frames.push(testing::PrivateFrame {
        name: "raft-link-hello",
        bytes: testing::hello(cluster_id, 77, stranger, true),
    });
    let openings: Vec<(&str, Option<Vec<u8>>)> = vec![
        ("no hello", None),
        (
            "wrong cluster id",
            Some(testing::hello("not-this-cluster", 77, stranger, false)),
        ),
        (
            "unknown node",
            Some(testing::hello(cluster_id, 77, stranger, false)),
        ),
        (
            "a voter's id with another directory",
            Some(testing::hello(cluster_id, leader, stranger, false)),
        ),
    ];
    let mut to_clients = 0.0;
    for (opening, hello) in &openings {
        for frame in &frames {
            // A stranger's join of its own new id is how nodes join (right cluster id): it is
            // sent only where it must be refused.
            if frame.name == "join" && *opening == "unknown node" {
                continue;
            }
            for client in clients {
                let outcome = send_after_hello(client, hello.as_deref(), frame).await?;
                assert!(
                    matches!(outcome, Closed::Silently),
                    "client listener {client}, {opening}, {}: {outcome:?}",
                    frame.name
                );
                to_clients += 1.0;
            }
            for controller in controllers {
                let outcome = send_after_hello(controller, hello.as_deref(), frame).await?;
                let refused_join = frame.name.starts_with("join") && *opening != "no hello";
                assert!(
                    refused_join || matches!(outcome, Closed::Silently),
                    "controller listener {controller}, {opening}, {}: {outcome:?}",
                    frame.name
                );
            }
        }
    }
    Ok(to_clients)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strangers_private_rpcs_change_nothing() -> anyhow::Result<()> {
    let cluster = Cluster::start_with(3, 1, &[("controller.quota.window.num", "10")])?;
    let controllers: Vec<String> = cluster
        .controllers
        .iter()
        .map(|(_, n)| n.bootstrap())
        .collect();
    let broker = cluster.brokers[0].1.bootstrap();
    let broker_metrics = cluster.brokers[0].1.metrics_addr();

    // A throttled client: 2 controller mutations/s for User:ANONYMOUS, spent at once.
    let quota = default_user_quota("controller_mutation_rate", 2.0);
    wait_until("the quota is set", FORM_TIMEOUT, || async {
        let mut conn = KafkaConn::connect(&broker).await?;
        let response = conn.send(&quota, 1).await?;
        Ok((response.entries[0].error_code == 0).then_some(()))
    })
    .await?;
    let leader = leader_id(&wait_leader(&controllers).await?);
    let leader_addr = cluster
        .controllers
        .iter()
        .find(|(id, _)| *id == leader)
        .map(|(_, n)| n.bootstrap())
        .ok_or_else(|| anyhow::anyhow!("leader {leader} is not a controller"))?;
    let spend = create_topics(vec![creatable("spent", 60, 1)], false);
    wait_until("the client is throttled", FORM_TIMEOUT, || {
        let (spend, leader_addr) = (spend.clone(), leader_addr.clone());
        async move {
            let mut conn = KafkaConn::connect(&leader_addr).await?;
            conn.send::<CreateTopicsRequest>(&spend, 7).await?;
            let probe = create_topics(vec![creatable("probe", 1, 1)], false);
            let response = conn.send::<CreateTopicsRequest>(&probe, 7).await?;
            Ok((response.throttle_time_ms > 0).then_some(()))
        }
    })
    .await?;

    // An Envelope claiming another principal, from a client with no hello or from a node the
    // quorum does not know, is answered CLUSTER_AUTHORIZATION_FAILED and creates nothing; on
    // the broker's client listener it is an API that is not enabled, and closes.
    let smuggled = hostile_envelope()?;
    let stranger_hello = testing::hello(&cluster.cluster_id, 77, Uuid::new_v4(), false);
    for hello in [None, Some(&stranger_hello)] {
        let mut conn = KafkaConn::connect(&leader_addr).await?;
        if let Some(hello) = hello {
            conn.write_raw(hello).await?;
            conn.read_frame().await?;
        }
        let answer = conn.send(&smuggled, 0).await?;
        assert_eq!(answer.error_code, 31, "{answer:?}");
        assert!(answer.response_data.is_none());
    }
    let mut conn = KafkaConn::connect(&broker).await?;
    assert!(conn.send(&smuggled, 0).await.is_err());
    let mut conn = KafkaConn::connect(&broker).await?;
    let smuggled_topic = conn
        .send(&metadata(12, Some(&["smuggled"]), false), 12)
        .await?;
    assert_ne!(smuggled_topic.topics[0].error_code, 0, "{smuggled_topic:?}");

    let before = cluster_state(&controllers, &broker).await?;
    let closes_before = unknown_api_key_closes(&broker_metrics).await?;
    let cluster_id = cluster.cluster_id.clone();
    let stranger = Uuid::new_v4();
    let to_broker = probe_listeners(
        std::slice::from_ref(&broker),
        &controllers,
        &cluster_id,
        leader,
        stranger,
    )
    .await?;
    // A join claiming the live broker 11 with other directories is refused.
    for controller in &controllers {
        let mut conn = KafkaConn::connect(controller).await?;
        conn.write_raw(&testing::hello(&cluster_id, 11, stranger, false))
            .await?;
        conn.read_frame().await?;
        conn.write_raw(&testing::join(&cluster_id, 11, stranger))
            .await?;
        let answer = conn.read_frame().await?.unwrap_or_default();
        let answer = String::from_utf8_lossy(&answer);
        // Followers point at the leader; the leader refuses.
        assert!(
            *controller != leader_addr
                || answer.contains("Another broker is registered with that broker id"),
            "{answer}"
        );
    }

    // The quota still bites: spending again is throttled.
    let mut conn = KafkaConn::connect(&leader_addr).await?;
    conn.send::<CreateTopicsRequest>(&create_topics(vec![creatable("spent-2", 60, 1)], false), 7)
        .await?;
    let response = conn
        .send::<CreateTopicsRequest>(&create_topics(vec![creatable("probe-2", 1, 1)], false), 7)
        .await?;
    assert!(response.throttle_time_ms > 0, "{response:?}");

    assert_eq!(cluster_state(&controllers, &broker).await?, before);
    assert_eq!(
        unknown_api_key_closes(&broker_metrics).await? - closes_before,
        to_broker,
        "every private frame on the client listener is an unknown api key"
    );
    // The cluster still works through the broker.
    let mut conn = KafkaConn::connect(&broker).await?;
    let created = conn
        .send::<CreateTopicsRequest>(&create_topics(vec![creatable("after", 1, 1)], false), 7)
        .await?;
    assert!(
        matches!(created.topics[0].error_code, 0 | 89),
        "{created:?}"
    );
    Ok(())
}

/// A combined broker+controller node: its client listener and its controller listener.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_combined_nodes_listeners_refuse_strangers() -> anyhow::Result<()> {
    let node = GregorNode::start(&[])?;
    let client = node.addrs().plaintext.clone();
    let controller = node
        .addrs()
        .controller
        .clone()
        .ok_or_else(|| anyhow::anyhow!("the combined node has no controller listener"))?;
    let mut conn = KafkaConn::connect(&client).await?;
    let cluster_id = conn
        .send(&metadata(12, Some(&[]), false), 12)
        .await?
        .cluster_id
        .map(|c| c.to_string())
        .unwrap_or_default();
    let controllers = [controller];
    let before = cluster_state(&controllers, &client).await?;
    let leader = before.0;
    let closes_before = unknown_api_key_closes(&node.metrics_addr()).await?;
    let to_client = probe_listeners(
        std::slice::from_ref(&client),
        &controllers,
        &cluster_id,
        leader,
        Uuid::new_v4(),
    )
    .await?;
    assert_eq!(cluster_state(&controllers, &client).await?, before);
    assert_eq!(
        unknown_api_key_closes(&node.metrics_addr()).await? - closes_before,
        to_client
    );
    Ok(())
}
