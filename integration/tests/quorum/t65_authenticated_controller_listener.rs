//! A quorum whose controller listener is SASL_PLAINTEXT with PLAIN and an authorizer whose only
//! super user is the controllers' own principal: the three controllers authenticate to each
//! other and elect a leader; connections that did not authenticate, or authenticated as a user
//! without CLUSTER_ACTION, are closed at their first private frame whatever it is (hellos,
//! joins, raft traffic at a hostile term) and change nothing; the
//! controllers' principal still goes through the hello checks; and a node configured with a
//! wrong password cannot join.

use std::collections::BTreeSet;
use std::time::Duration;

use gregor_integration::{prom, wait_until, Closed, GregorNode, KafkaConn};
use gregor_node::quorum::testing;
use kafka_protocol::messages::DescribeQuorumResponse;
use uuid::Uuid;

use crate::{describe_quorum_request, leader_id, Cluster, FORM_TIMEOUT};

const CLOSE_WITHIN: Duration = Duration::from_secs(10);
pub(crate) const CONTROLLER_USER: (&str, &str) = ("ctl", "ctl-secret");
const OTHER_USER: (&str, &str) = ("mallory", "m-secret");
/// SaslAuthenticate's SASL_AUTHENTICATION_FAILED.
const SASL_AUTHENTICATION_FAILED: i16 = 58;

pub(crate) fn jaas(password: &str) -> String {
    format!(
        "org.apache.kafka.common.security.plain.PlainLoginModule required \
         username=\"{}\" password=\"{password}\" user_{}=\"{}\" user_{}=\"{}\";",
        CONTROLLER_USER.0, CONTROLLER_USER.0, CONTROLLER_USER.1, OTHER_USER.0, OTHER_USER.1
    )
}

pub(crate) fn secure_overrides(jaas: &str) -> Vec<(&'static str, String)> {
    vec![
        (
            "listener.security.protocol.map",
            "CONTROLLER:SASL_PLAINTEXT".to_owned(),
        ),
        (
            "listener.name.controller.sasl.enabled.mechanisms",
            "PLAIN".to_owned(),
        ),
        ("sasl.mechanism.controller.protocol", "PLAIN".to_owned()),
        (
            "listener.name.controller.plain.sasl.jaas.config",
            jaas.to_owned(),
        ),
        ("authorizer.class.name", "StandardAuthorizer".to_owned()),
        ("super.users", format!("User:{}", CONTROLLER_USER.0)),
    ]
}

/// Starts broker-only node 11 of `cluster`, authenticating to its SASL controller listener
/// with `controller_overrides` (the controllers' own), its client listener PLAINTEXT.
pub(crate) fn start_secure_broker(
    cluster: &Cluster,
    controller_overrides: &[(&str, &str)],
) -> anyhow::Result<GregorNode> {
    let mut overrides: Vec<(&str, &str)> = controller_overrides
        .iter()
        .copied()
        .filter(|(key, _)| *key != "listener.security.protocol.map")
        .collect();
    overrides.extend([
        ("node.id", "11"),
        ("process.roles", "broker"),
        ("listeners", "PLAINTEXT://127.0.0.1:0"),
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        ),
        (
            "controller.quorum.bootstrap.servers",
            cluster.bootstrap_controllers.as_str(),
        ),
    ]);
    tokio::task::block_in_place(|| {
        GregorNode::start_formatted(&overrides, &["--cluster-id", &cluster.cluster_id], true)
    })
}

/// A connection to `addr` authenticated as `user` (`None`: not authenticated).
async fn connect_as(addr: &str, user: Option<(&str, &str)>) -> anyhow::Result<KafkaConn> {
    let mut conn = KafkaConn::connect(addr).await?;
    if let Some((name, password)) = user {
        if let Some(code) = conn.authenticate_plain(name, password).await? {
            anyhow::bail!("{name} was refused with error {code}");
        }
    }
    Ok(conn)
}

/// DescribeQuorum as the controllers' principal from whichever controller leads.
pub(crate) async fn leader_view(
    addrs: &[String],
) -> anyhow::Result<Option<DescribeQuorumResponse>> {
    for addr in addrs {
        let Ok(mut conn) = connect_as(addr, Some(CONTROLLER_USER)).await else {
            continue;
        };
        let Ok(response) = conn.send(&describe_quorum_request(), 2).await else {
            continue;
        };
        let partition = response.topics.first().and_then(|t| t.partitions.first());
        if response.error_code == 0 && partition.is_some_and(|p| p.error_code == 0) {
            return Ok(Some(response));
        }
    }
    Ok(None)
}

/// What must not change: (leader id, leader epoch, voters, observers).
fn quorum_state(view: &DescribeQuorumResponse) -> (i32, i32, BTreeSet<i32>, BTreeSet<i32>) {
    let partition = &view.topics[0].partitions[0];
    let ids = |replicas: &[kafka_protocol::messages::describe_quorum_response::ReplicaState]| {
        replicas.iter().map(|r| r.replica_id.0).collect()
    };
    (
        leader_id(view),
        partition.leader_epoch,
        ids(&partition.current_voters),
        ids(&partition.observers),
    )
}

pub(crate) async fn closes(metrics: &str, reason: &str) -> anyhow::Result<f64> {
    let samples = prom::parse(&prom::scrape(metrics).await?)?;
    Ok(prom::value(
        &samples,
        "gregor_network_connections_closed_total",
        &[("listener", "CONTROLLER"), ("reason", reason)],
    )
    .unwrap_or(0.0))
}

async fn authentication_failures(metrics: &str) -> anyhow::Result<f64> {
    let samples = prom::parse(&prom::scrape(metrics).await?)?;
    Ok(samples
        .iter()
        .filter(|s| {
            s.name == "gregor_authentication_failures_total"
                && s.labels.get("listener").map(String::as_str) == Some("CONTROLLER")
        })
        .map(|s| s.value)
        .sum())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_controller_principals_may_send_private_rpcs() -> anyhow::Result<()> {
    let jaas_ok = jaas(CONTROLLER_USER.1);
    let overrides = secure_overrides(&jaas_ok);
    let borrowed: Vec<(&str, &str)> = overrides.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // The voters only elect a leader if they authenticate to each other.
    let cluster = Cluster::start_with(3, 0, &borrowed)?;
    let controllers: Vec<String> = cluster
        .controllers
        .iter()
        .map(|(_, n)| n.bootstrap())
        .collect();
    let view = wait_until("a quorum leader", FORM_TIMEOUT, || {
        leader_view(&controllers)
    })
    .await?;
    let before = quorum_state(&view);
    let leader = before.0;
    let leader_node = cluster
        .controllers
        .iter()
        .find(|(id, _)| *id == leader)
        .map(|(_, n)| n)
        .ok_or_else(|| anyhow::anyhow!("leader {leader} is not a controller"))?;
    let leader_addr = leader_node.bootstrap();
    let metrics = leader_node.metrics_addr();
    let refused_before = closes(&metrics, "cluster_authorization_failed").await?;

    let cluster_id = cluster.cluster_id.clone();
    let stranger = Uuid::new_v4();
    let mut frames = testing::raft_and_markers(leader as u64);
    frames.push(testing::PrivateFrame {
        name: "hello",
        bytes: testing::hello(&cluster_id, 77, stranger, false),
    });
    frames.push(testing::PrivateFrame {
        name: "raft-link-hello",
        bytes: testing::hello(&cluster_id, 77, stranger, true),
    });
    frames.push(testing::PrivateFrame {
        name: "voter-hello",
        bytes: testing::hello(&cluster_id, leader, stranger, false),
    });
    frames.push(testing::PrivateFrame {
        name: "join",
        bytes: testing::join(&cluster_id, 77, stranger),
    });
    let mut refused = 0.0;
    for (who, user) in [
        ("no SASL", None),
        ("a user without CLUSTER_ACTION", Some(OTHER_USER)),
    ] {
        for frame in &frames {
            let mut conn = connect_as(&leader_addr, user).await?;
            conn.write_raw(&frame.bytes).await?;
            let outcome = conn.wait_closed(CLOSE_WITHIN).await;
            assert!(
                matches!(outcome, Closed::Silently),
                "{who}, {}: {outcome:?}",
                frame.name
            );
            refused += 1.0;
        }
    }
    // Not authenticated means closed, not parked: the count is exact.
    assert_eq!(
        closes(&metrics, "cluster_authorization_failed").await? - refused_before,
        refused
    );
    // A wrong password is refused by SASL itself.
    let mut conn = KafkaConn::connect(&leader_addr).await?;
    assert_eq!(
        conn.authenticate_plain(CONTROLLER_USER.0, "wrong").await?,
        Some(SASL_AUTHENTICATION_FAILED)
    );

    // The controllers' principal still goes through the quorum's own checks: a hello from a
    // node the quorum does not know is accepted, its raft traffic is not.
    let mut conn = connect_as(&leader_addr, Some(CONTROLLER_USER)).await?;
    conn.write_raw(&testing::hello(&cluster_id, 77, stranger, false))
        .await?;
    let answer = conn.read_frame().await?;
    assert!(answer.is_some(), "the hello is answered");
    conn.write_raw(&testing::raft_and_markers(leader as u64)[1].bytes)
        .await?;
    assert!(matches!(
        conn.wait_closed(CLOSE_WITHIN).await,
        Closed::Silently
    ));

    let after = wait_until("the quorum answers", FORM_TIMEOUT, || {
        leader_view(&controllers)
    })
    .await?;
    assert_eq!(quorum_state(&after), before);

    // A node whose JAAS entry holds a wrong password cannot join: the leader refuses its
    // authentication and it never becomes an observer.
    let failures_before = authentication_failures(&metrics).await?;
    let jaas_wrong = jaas("not-the-password");
    let wrong = secure_overrides(&jaas_wrong);
    let mut overrides: Vec<(&str, &str)> = wrong.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let bootstrap = cluster.bootstrap_controllers.clone();
    overrides.extend([
        ("node.id", "4"),
        ("process.roles", "controller"),
        ("listeners", "CONTROLLER://127.0.0.1:0"),
        ("controller.quorum.bootstrap.servers", bootstrap.as_str()),
    ]);
    let intruder = GregorNode::start_formatted(&overrides, &["--cluster-id", &cluster_id], false)?;
    wait_until("the intruder's failed authentication", FORM_TIMEOUT, || {
        let stderr = intruder.stderr();
        let metrics = metrics.clone();
        async move {
            let counted = authentication_failures(&metrics).await? > failures_before;
            let logged =
                stderr.contains("SASL PLAIN authentication as ctl to listener CONTROLLER failed");
            Ok((counted && logged).then_some(()))
        }
    })
    .await?;
    let view = wait_until("the quorum answers", FORM_TIMEOUT, || {
        leader_view(&controllers)
    })
    .await?;
    assert!(!quorum_state(&view).3.contains(&4), "{view:?}");
    Ok(())
}
