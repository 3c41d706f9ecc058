//! Kafka's connection limits and request memory pool: `max.connections.per.ip` and its
//! overrides, `max.connections`, the `connection_creation_rate` quota of an `ip` entity
//! (KIP-612) and `queued.max.request.bytes`.

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use gregor_integration::admin::s;
use gregor_integration::{prom, wait_until, Closed, GregorNode, KafkaConn};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, ApiVersionsRequest, IncrementalAlterConfigsRequest,
};

const WAIT: Duration = Duration::from_secs(20);

async fn closed_total(node: &GregorNode, reason: &str) -> f64 {
    let text = prom::scrape(&node.metrics_addr()).await.unwrap();
    let samples = prom::parse(&text).unwrap();
    prom::value(
        &samples,
        "gregor_network_connections_closed_total",
        &[("reason", reason)],
    )
    .unwrap_or(0.0)
}

/// Whether `conn` is served: an ApiVersions v0 round trip.
async fn served(conn: &mut KafkaConn) -> bool {
    conn.send(&ApiVersionsRequest::default(), 0).await.is_ok()
}

#[tokio::test]
async fn max_connections_per_ip_override_closes_the_extra_connection_at_once() {
    // The default would allow 100; the override for this address allows 2.
    let node = GregorNode::start(&[
        ("max.connections.per.ip", "100"),
        ("max.connections.per.ip.overrides", "127.0.0.1:2"),
    ])
    .unwrap();
    let mut first = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let mut second = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    assert!(served(&mut first).await && served(&mut second).await);
    let mut third = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    assert_eq!(third.wait_closed(WAIT).await, Closed::Silently);
    // The limit is per address across every listener.
    let controller = node.addrs().controller.clone().unwrap();
    let mut fourth = KafkaConn::connect(&controller).await.unwrap();
    assert_eq!(fourth.wait_closed(WAIT).await, Closed::Silently);
    assert_eq!(closed_total(&node, "max_connections_per_ip").await, 2.0);
    assert!(node
        .stderr()
        .contains("address already has the configured maximum of 2 connections."));
    // A closed connection frees its place.
    drop(first);
    wait_until("a new connection to be served", WAIT, || {
        let addr = node.bootstrap();
        async move {
            let mut conn = KafkaConn::connect(&addr).await?;
            Ok(served(&mut conn).await.then_some(()))
        }
    })
    .await
    .unwrap();
    assert!(served(&mut second).await);
}

#[tokio::test]
async fn max_connections_makes_new_connections_wait_for_a_slot() {
    let node = GregorNode::start(&[("max.connections", "2")]).unwrap();
    let mut first = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let mut second = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    assert!(served(&mut first).await && served(&mut second).await);
    // The third is in the kernel's backlog: connected, not accepted, its request unread.
    let mut third = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    third.set_timeout(Duration::from_secs(60));
    let waiting = tokio::spawn(async move {
        let answered = served(&mut third).await;
        (answered, third)
    });
    // Controller listeners are exempt, so quorum peers always get in.
    let controller = node.addrs().controller.clone().unwrap();
    let mut peer = KafkaConn::connect(&controller).await.unwrap();
    assert!(served(&mut peer).await);
    assert!(!waiting.is_finished());
    drop(first);
    let (answered, _third) = tokio::time::timeout(WAIT, waiting).await.unwrap().unwrap();
    assert!(
        answered,
        "the waiting connection is served once a slot frees"
    );
    assert!(served(&mut second).await);
}

/// Sets (or with `None` deletes) dynamic broker configs of BROKER resource `broker` ("" is the
/// cluster default); the (code, message) of the answer.
async fn alter_broker(
    conn: &mut KafkaConn,
    broker: &str,
    configs: &[(&str, Option<&str>)],
) -> (i16, Option<String>) {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(4)
            .with_resource_name(s(broker))
            .with_configs(
                configs
                    .iter()
                    .map(|(name, value)| {
                        AlterableConfig::default()
                            .with_name(s(name))
                            .with_config_operation(if value.is_some() { 0 } else { 1 })
                            .with_value(value.map(s))
                    })
                    .collect(),
            ),
    ]);
    let answer = conn.send(&request, 1).await.unwrap();
    let result = &answer.responses[0];
    (
        result.error_code,
        result.error_message.as_ref().map(ToString::to_string),
    )
}

/// Waits until a new connection from this address is served (`true`) or closed (`false`).
async fn wait_for_new_connections(node: &GregorNode, served_now: bool, what: &str) -> KafkaConn {
    wait_until(what, WAIT, || {
        let addr = node.bootstrap();
        async move {
            let mut conn = KafkaConn::connect(&addr).await?;
            Ok((served(&mut conn).await == served_now).then_some(conn))
        }
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn connection_limits_follow_dynamic_broker_configs_without_a_restart() {
    let node = GregorNode::start(&[]).unwrap();
    let mut admin = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    // Kafka's validation, with its messages.
    assert_eq!(
        alter_broker(&mut admin, "", &[("max.connections.per.ip", Some("0"))]).await,
        (
            42,
            Some(
                "requirement failed: max.connections.per.ip can be set to zero only if \
                 max.connections.per.ip.overrides property is set."
                    .into()
            )
        )
    );
    assert_eq!(
        alter_broker(&mut admin, "", &[("max.connections", Some("0"))]).await,
        (42, Some("Invalid dynamic configuration".into()))
    );
    // The cluster default: two connections per address, the admin's among them.
    assert_eq!(
        alter_broker(&mut admin, "", &[("max.connections.per.ip", Some("2"))]).await,
        (0, None)
    );
    let mut second = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    assert!(served(&mut second).await);
    wait_for_new_connections(&node, false, "the per-address limit of 2").await;
    // This node's own override of the address beats the default.
    assert_eq!(
        alter_broker(
            &mut admin,
            "1",
            &[("max.connections.per.ip.overrides", Some("127.0.0.1:3"))]
        )
        .await,
        (0, None)
    );
    let mut third = wait_for_new_connections(&node, true, "the override of 3").await;
    let mut fourth = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    assert_eq!(fourth.wait_closed(WAIT).await, Closed::Silently);
    // Lowering a limit closes no connection; deleting both brings back the static values.
    assert!(served(&mut third).await);
    assert_eq!(
        alter_broker(
            &mut admin,
            "1",
            &[("max.connections.per.ip.overrides", None)]
        )
        .await,
        (0, None)
    );
    assert_eq!(
        alter_broker(&mut admin, "", &[("max.connections.per.ip", None)]).await,
        (0, None)
    );
    let _fourth = wait_for_new_connections(&node, true, "the static limits again").await;
    assert!(served(&mut third).await && served(&mut second).await);
}

#[tokio::test]
async fn raising_max_connections_dynamically_lets_a_waiting_connection_in() {
    let node = GregorNode::start(&[("max.connections", "1")]).unwrap();
    // The controller listener is exempt: administer through it while the client one is full.
    let controller = node.addrs().controller.clone().unwrap();
    let mut admin = KafkaConn::connect(&controller).await.unwrap();
    let mut first = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    assert!(served(&mut first).await);
    let mut second = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    second.set_timeout(Duration::from_secs(60));
    let waiting = tokio::spawn(async move {
        let answered = served(&mut second).await;
        (answered, second)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished());
    assert_eq!(
        alter_broker(&mut admin, "1", &[("max.connections", Some("2"))]).await,
        (0, None)
    );
    let (answered, _second) = tokio::time::timeout(WAIT, waiting).await.unwrap().unwrap();
    assert!(
        answered,
        "the waiting connection is served once the limit is raised"
    );
    assert!(served(&mut first).await);
}

fn ip_rate_entry(ip: Option<&str>, rate: f64) -> EntryData {
    EntryData::default()
        .with_entity(vec![EntityData::default()
            .with_entity_type(s("ip"))
            .with_entity_name(ip.map(s))])
        .with_ops(vec![OpData::default()
            .with_key(s("connection_creation_rate"))
            .with_value(rate)])
}

#[tokio::test]
async fn connection_creation_rate_of_an_ip_closes_connections_beyond_it() {
    let node = GregorNode::start(&[]).unwrap();
    let mut admin = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    // The default ip entity is generous; 127.0.0.1's own quota (1 per second over Kafka's
    // 11 x 1 s window, measured over at least 10 s) takes precedence.
    let request = AlterClientQuotasRequest::default().with_entries(vec![
        ip_rate_entry(None, 1000.0),
        ip_rate_entry(Some("127.0.0.1"), 1.0),
    ]);
    let response = admin
        .send::<AlterClientQuotasRequest>(&request, 1)
        .await
        .unwrap();
    assert!(response.entries.iter().all(|e| e.error_code == 0));
    let mut accepted = Vec::new();
    let mut throttled_after = None;
    for n in 0..30 {
        let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
        if served(&mut conn).await {
            accepted.push(conn);
        } else {
            throttled_after = Some(n);
            break;
        }
    }
    // At 1/s over a 10 s span, ten connections fit; the eleventh is over the quota.
    assert_eq!(throttled_after, Some(10));
    assert_eq!(closed_total(&node, "connection_rate_throttled").await, 1.0);
    // Established connections are not affected.
    for conn in &mut accepted {
        assert!(served(conn).await);
    }
}

/// An ApiVersions v3 request carrying `padding` bytes in an unknown tagged field: a frame of
/// any size that decodes without copying and gets a small answer.
fn padded_api_versions(padding: usize, correlation_id: i32) -> Vec<u8> {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    buf.put_i16(18);
    buf.put_i16(3);
    buf.put_i32(correlation_id);
    buf.put_i16(-1); // null client id
    buf.put_u8(0); // header tagged fields
    for text in ["gregor-integration", "1.0"] {
        buf.put_u8(text.len() as u8 + 1);
        buf.put_slice(text.as_bytes());
    }
    buf.put_u8(1); // one tagged field
    put_uvarint(&mut buf, 9999);
    put_uvarint(&mut buf, padding as u32);
    buf.put_bytes(b'p', padding);
    let size = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&size.to_be_bytes());
    buf.to_vec()
}

fn put_uvarint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

#[tokio::test]
async fn queued_max_request_bytes_bounds_frames_being_read_and_serves_them_all() {
    const FRAME: usize = 20 << 20;
    const CLIENTS: usize = 10;
    let node = GregorNode::start(&[
        ("socket.request.max.bytes", &(FRAME + 1024).to_string()),
        ("queued.max.request.bytes", &(FRAME + 1024).to_string()),
    ])
    .unwrap();
    let before = node.resident_memory().unwrap();
    let mut clients = Vec::new();
    for client in 0..CLIENTS {
        let addr = node.bootstrap();
        clients.push(tokio::spawn(async move {
            let mut conn = KafkaConn::connect(&addr).await?;
            conn.set_timeout(Duration::from_secs(120));
            let frame = padded_api_versions(FRAME - 64, client as i32);
            conn.write_raw(&frame).await?;
            let answer = conn
                .read_frame()
                .await?
                .ok_or_else(|| anyhow::anyhow!("client {client}: closed without an answer"))?;
            anyhow::ensure!(answer[..4] == (client as i32).to_be_bytes());
            anyhow::Ok(())
        }));
    }
    for client in clients {
        client.await.unwrap().unwrap();
    }
    let after = node.resident_memory().unwrap();
    // Ten 20 MiB frames arrive at once. The pool lets at most two be read together (it grants
    // while anything is left); the allocator may still hold the pages of two just served while
    // the next two arrive. Unbounded reading holds all ten (measured: 211 MB).
    let growth = after.peak.saturating_sub(before.current);
    assert!(
        growth < 6 * FRAME as u64,
        "peak resident memory grew by {growth} bytes for {CLIENTS} frames of {FRAME}"
    );
    // A connection returns its reservation once its answer is written, which the client may
    // have read already.
    let metrics = node.metrics_addr();
    wait_until(
        "every reservation is returned",
        Duration::from_secs(30),
        || {
            let metrics = metrics.clone();
            async move {
                let samples = prom::parse(&prom::scrape(&metrics).await?)?;
                let available = prom::value(
                    &samples,
                    "kafka_network_socketserver_memorypoolavailable",
                    &[],
                );
                Ok((available == Some((FRAME + 1024) as f64)).then_some(()))
            }
        },
    )
    .await
    .unwrap();
}
