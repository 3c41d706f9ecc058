//! The network front end: one tokio task per listener accepting connections, one task per
//! connection (see [`connection`]). Handlers never touch bytes; this module never touches the
//! image.

mod busy_time;
mod connection;
mod frame;
pub mod raft_voter_versions;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use gregor_actors::context::{HandlerContext, ListenerKind};
use tokio::net::TcpListener;

use crate::config::{ListenerSpec, NodeConfig};
use crate::quorum::QuorumService;
use connection::ConnectionSettings;

/// A listener bound to its socket, not yet accepting.
pub struct BoundListener {
    /// The configured listener.
    pub spec: ListenerSpec,
    /// What it serves.
    pub kind: ListenerKind,
    /// The address actually bound (the real port when the configured one is 0).
    pub local_addr: SocketAddr,
    listener: TcpListener,
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
) {
    let settings = ConnectionSettings {
        quorum,
        ready,
        listener_name: bound.spec.name.clone(),
        listener_kind: bound.kind,
        max_request_size: config.socket_request_max_bytes,
        idle_timeout: Duration::from_millis(config.connections_max_idle_ms.max(1) as u64),
    };
    loop {
        match bound.listener.accept().await {
            Ok((stream, _)) => {
                let _ = stream.set_nodelay(true);
                let handlers = handlers.clone();
                let settings = settings.clone();
                tokio::spawn(async move {
                    gregor_metrics::connection_opened(&settings.listener_name);
                    let listener = settings.listener_name.clone();
                    let reason = connection::serve(stream, handlers, settings).await;
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
