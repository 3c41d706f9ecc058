//! The network front end: one tokio task per listener accepting connections, one task per
//! connection (see [`connection`]). Handlers never touch bytes; this module never touches the
//! image.

pub mod acl_chunks;
mod busy_time;
mod collapse;
pub mod config_chunks;
mod connection;
pub mod consumer_heartbeat_frame;
mod dedup_decode;
pub mod delete_topics_chunks;
pub mod election_chunks;
pub mod envelope;
pub mod fetch_chunks;
pub mod fetch_parts;
pub mod forwarded;
pub mod frame;
mod frame_source;
mod idle;
pub mod join_group_frame;
mod limits;
pub mod list_chunks;
pub mod list_offsets_chunks;
pub mod memory_pool;
pub mod metadata_chunks;
pub mod partition_chunks;
pub mod partition_list_chunks;
pub mod peer;
pub mod produce_chunks;
pub mod quota_chunks;
pub mod raft_voter_versions;
pub mod reassignment_chunks;
pub mod repeated;
mod sasl;
pub mod scram_chunks;
pub mod tls;
pub mod topic_list_chunks;
pub mod topic_partitions;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gregor_actors::config_publisher::DynamicBrokerConfigs;
use gregor_actors::context::{HandlerContext, ListenerKind, Principal};
use gregor_actors::quota::sampler::WindowConfig;
use gregor_metrics::CloseReason;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::config::{ListenerSpec, NodeConfig};
use crate::quorum::QuorumService;
use connection::ConnectionSettings;
use limits::{count, ConnectionLimits, LimitSettings, Refused};
use memory_pool::MemoryPool;

/// What every listener of the node shares: the connection limits and the request memory pool.
#[derive(Clone)]
pub struct NodeLimits {
    connections: Arc<ConnectionLimits>,
    memory: Arc<MemoryPool>,
}

impl NodeLimits {
    /// The limits of `config`; `ip` connection-rate quotas are read from `handlers`' image, and
    /// the dynamic connection limits from `dynamic_configs` (the config publisher's).
    pub fn new(
        config: &NodeConfig,
        handlers: &HandlerContext,
        dynamic_configs: watch::Receiver<DynamicBrokerConfigs>,
    ) -> Self {
        let settings = LimitSettings {
            max_connections: count(config.max_connections),
            max_connections_per_ip: count(config.max_connections_per_ip),
            per_ip_overrides: config
                .max_connections_per_ip_overrides
                .iter()
                .map(|(ip, max)| (*ip, count(*max)))
                .collect(),
            window: WindowConfig::new(
                config.quota_window_num,
                u64::from(config.quota_window_size_seconds),
            ),
        };
        let connections = ConnectionLimits::new(settings.clone(), handlers.image.clone());
        tokio::spawn(connections.clone().follow(settings, dynamic_configs));
        NodeLimits {
            connections,
            memory: MemoryPool::new(config.queued_max_request_bytes),
        }
    }
}

/// A listener bound to its socket, not yet accepting.
pub struct BoundListener {
    /// The configured listener.
    pub spec: ListenerSpec,
    /// What it serves.
    pub kind: ListenerKind,
    /// The address actually bound (the real port when the configured one is 0).
    pub local_addr: SocketAddr,
    listener: TcpListener,
    /// The TLS acceptor of an SSL or SASL_SSL listener.
    tls: Option<tls::TlsListener>,
}

/// Binds every configured listener; the error names the listener and address.
pub async fn bind_all(config: &NodeConfig) -> Result<Vec<BoundListener>, String> {
    let mut bound = Vec::new();
    for spec in &config.listeners {
        let address = spec.bind_address();
        let listener = TcpListener::bind(&address).await.map_err(|e| {
            format!(
                "Cannot bind listener {} to {address} (from listeners): {e}",
                spec.name
            )
        })?;
        let local_addr = listener
            .local_addr()
            .map_err(|e| format!("Cannot read the address of listener {}: {e}", spec.name))?;
        let tls = match config
            .listener_security
            .get(&spec.name)
            .and_then(|security| security.tls.clone())
        {
            Some(settings) => Some(
                tls::TlsListener::new(settings)
                    .map_err(|e| format!("Cannot serve TLS on listener {}: {e}", spec.name))?,
            ),
            None => None,
        };
        let kind = if config.is_controller_listener(&spec.name) {
            ListenerKind::Controller
        } else {
            ListenerKind::Broker
        };
        bound.push(BoundListener {
            spec: spec.clone(),
            kind,
            local_addr,
            listener,
            tls,
        });
    }
    Ok(bound)
}

/// Accepts connections on `bound` forever, serving each on its own task. Quorum RPCs are
/// served at once; Kafka requests wait until `ready` turns true.
pub async fn run(
    bound: BoundListener,
    handlers: HandlerContext,
    config: &NodeConfig,
    quorum: Arc<QuorumService>,
    ready: tokio::sync::watch::Receiver<bool>,
    limits: NodeLimits,
) {
    let settings = ConnectionSettings {
        quorum,
        ready,
        // Controller listeners carry the quorum: their frames never wait behind client frames
        // (a full pool of forwarded CreateTopics waiting for a commit must not block the
        // AppendEntries that commits them), as Kafka's controller has a socket server of its own.
        memory: if bound.kind == ListenerKind::Controller {
            MemoryPool::new(-1)
        } else {
            limits.memory.clone()
        },
        listener_name: bound.spec.name.as_str().into(),
        listener_kind: bound.kind,
        max_request_size: config.socket_request_max_bytes,
        idle_timeout: Duration::from_millis(config.connections_max_idle_ms.max(1) as u64),
        sasl: config
            .listener_security
            .get(&bound.spec.name)
            .and_then(|security| security.sasl.clone()),
        authenticated_listener: config.listener_security.get(&bound.spec.name).is_some_and(
            |security| security.protocol != crate::config::SecurityProtocol::Plaintext,
        ),
    };
    if let Some(tls) = &bound.tls {
        tls.watch(bound.spec.name.clone());
    }
    let exempt = bound.kind == ListenerKind::Controller;
    loop {
        // max.connections: wait for a slot before accepting, so new connections queue in the
        // kernel's backlog as they do behind Kafka's blocked acceptor.
        let mut slot = limits.connections.slot(exempt).await;
        match bound.listener.accept().await {
            Ok((stream, peer)) => {
                let _ = stream.set_nodelay(true);
                gregor_metrics::connection_opened(&settings.listener_name);
                let listener = settings.listener_name.clone();
                match limits.connections.admit(&mut slot, peer.ip()) {
                    Ok(()) => {}
                    Err(Refused::TooMany { max }) => {
                        tracing::info!(
                            listener = %listener,
                            "Rejected connection from {}, address already has the configured maximum of {max} connections.",
                            peer.ip()
                        );
                        // Counted before the close, so whoever sees the close sees the count.
                        gregor_metrics::connection_closed(
                            &listener,
                            CloseReason::MaxConnectionsPerIp,
                        );
                        drop((stream, slot));
                        continue;
                    }
                    Err(Refused::Throttled { ms }) => {
                        tracing::debug!(%peer, ms, "Delaying closing of connection (connection_creation_rate)");
                        // Not counted as a connection of its address; closed after the delay.
                        drop(slot);
                        tokio::spawn(async move {
                            tokio::time::sleep(Duration::from_millis(ms)).await;
                            gregor_metrics::connection_closed(
                                &listener,
                                CloseReason::ConnectionRateThrottled,
                            );
                            drop(stream);
                        });
                        continue;
                    }
                }
                let handlers = handlers.clone();
                let settings = settings.clone();
                let tls = bound.tls.clone();
                tokio::spawn(async move {
                    let reason = match tls {
                        None => {
                            let stream = tls::Stream::Plain(stream);
                            connection::serve(stream, Principal::anonymous(), handlers, settings)
                                .await
                        }
                        // The handshake gets the idle timeout: a peer that sends nothing cannot
                        // hold the slot longer than an idle connection.
                        Some(tls) => {
                            match tokio::time::timeout(settings.idle_timeout, tls.accept(stream))
                                .await
                            {
                                Ok(Ok((stream, principal))) => {
                                    connection::serve(stream, principal, handlers, settings).await
                                }
                                Ok(Err(detail)) => {
                                    tracing::info!(%peer, listener = %listener, %detail, "closing connection");
                                    gregor_metrics::authentication_failed(
                                        &listener,
                                        "",
                                        "ssl_handshake_failed",
                                    );
                                    CloseReason::AuthenticationFailed
                                }
                                Err(_) => CloseReason::Idle,
                            }
                        }
                    };
                    drop(slot);
                    gregor_metrics::connection_closed(&listener, reason);
                });
            }
            Err(error) => {
                // Out of file descriptors and the like: keep accepting once the pressure eases.
                tracing::warn!(listener = %bound.spec.name, %error, "accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
