//! KIP-368 between peers: a quorum whose SASL_PLAINTEXT (PLAIN) controller listener limits
//! sessions to `connections.max.reauth.ms`. Controllers re-authenticate their raft connections,
//! and a broker its joins, heartbeats and forwarding connections, on the same connections
//! before the sessions end, and the broker replaces its raft link (which the leader ends with
//! its session): the controllers count renewed authentications, close no connection as
//! expired, keep their leader, and a topic created through the broker long after its
//! forwarding connection opened goes through.

use gregor_integration::admin::{creatable, create_topics};
use gregor_integration::{prom, wait_until, KafkaConn};
use kafka_protocol::messages::CreateTopicsRequest;

use crate::t65_authenticated_controller_listener::{
    closes, jaas, leader_view, secure_overrides, start_secure_broker, CONTROLLER_USER,
};
use crate::{leader_id, Cluster, FORM_TIMEOUT};

/// The session lifetime: short, so the test sees several renewals of each connection.
const REAUTH_MS: &str = "1500";

async fn authentications(metrics: &[String]) -> anyhow::Result<f64> {
    let mut total = 0.0;
    for addr in metrics {
        let samples = prom::parse(&prom::scrape(addr).await?)?;
        total += prom::value(
            &samples,
            "gregor_authentications_total",
            &[("listener", "CONTROLLER"), ("mechanism", "PLAIN")],
        )
        .unwrap_or(0.0);
    }
    Ok(total)
}

async fn create_through(broker: &str, topic: &str) -> anyhow::Result<Option<()>> {
    let mut conn = KafkaConn::connect(broker).await?;
    let request = create_topics(vec![creatable(topic, 1, 1)], false);
    let response = conn.send::<CreateTopicsRequest>(&request, 7).await?;
    Ok(matches!(response.topics[0].error_code, 0 | 36).then_some(()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_links_renew_their_sasl_sessions() -> anyhow::Result<()> {
    let jaas_ok = jaas(CONTROLLER_USER.1);
    let mut overrides = secure_overrides(&jaas_ok);
    overrides.push(("connections.max.reauth.ms", REAUTH_MS.to_owned()));
    // The test's client is User:ANONYMOUS on the broker's PLAINTEXT listener.
    overrides.push(("allow.everyone.if.no.acl.found", "true".to_owned()));
    let borrowed: Vec<(&str, &str)> = overrides.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let cluster = Cluster::start_with(3, 0, &borrowed)?;
    let controllers: Vec<String> = cluster
        .controllers
        .iter()
        .map(|(_, n)| n.bootstrap())
        .collect();
    let metrics: Vec<String> = cluster
        .controllers
        .iter()
        .map(|(_, n)| n.metrics_addr())
        .collect();
    // A broker-only node authenticating to the controller listener like the controllers.
    let broker_node = start_secure_broker(&cluster, &borrowed)?;
    let broker = broker_node.bootstrap();
    let view = wait_until("a quorum leader", FORM_TIMEOUT, || {
        leader_view(&controllers)
    })
    .await?;
    let leader = leader_id(&view);
    let epoch = view.topics[0].partitions[0].leader_epoch;
    // The broker's forwarding connection opens here and stays in its pool.
    wait_until("a topic through the broker", FORM_TIMEOUT, || {
        create_through(&broker, "before-renewal")
    })
    .await?;

    // Every connection renews at half its 1.5 s session: wait for several rounds of renewals
    // across the quorum's connections (each counted as an authentication).
    let start = authentications(&metrics).await?;
    wait_until("renewed sessions", FORM_TIMEOUT, || {
        let metrics = metrics.clone();
        async move { Ok((authentications(&metrics).await? >= start + 12.0).then_some(())) }
    })
    .await?;
    // The pooled forwarding connection, idle past its session's end, renews before it sends.
    wait_until("a topic through the broker", FORM_TIMEOUT, || {
        create_through(&broker, "after-renewal")
    })
    .await?;

    for addr in &metrics {
        assert_eq!(closes(addr, "session_expired").await?, 0.0, "{addr}");
    }
    let after = wait_until("a quorum leader", FORM_TIMEOUT, || {
        leader_view(&controllers)
    })
    .await?;
    assert_eq!(
        (
            leader_id(&after),
            after.topics[0].partitions[0].leader_epoch
        ),
        (leader, epoch),
        "the leader changed while sessions renewed"
    );
    Ok(())
}
