//! Start-up wiring: from a validated configuration to a serving node.
//!
//! Order matters and every step fails with a message naming what is wrong: data directories
//! (formatted on first start), ports (metrics and every listener, bound before anything is
//! written), the metadata log and its image (replayed to the committed point before any client
//! is served), the controller, this node's registration, and only then accepting connections.

use std::sync::Arc;
use std::time::Duration;

use actix::{Actor, Addr};
use arc_swap::ArcSwap;
use gregor_actors::context::{BrokerSettings, HandlerContext, NodeInfo};
use gregor_actors::controller::logic::TopicDefaults;
use gregor_actors::controller::{Controller, ControllerSettings, WriteRecords};
use gregor_actors::features;
use gregor_actors::loader::{InstallPublisher, Loader, LoaderApplier, TopicChangeLogPublisher};
use gregor_actors::raft::{MetadataLog, MetadataLogOptions, VoterNode};
use gregor_publishers::records::{
    Endpoint, MetadataRecord, RegisterBrokerRecord, RegisterControllerRecord, UnfenceBrokerRecord,
};
use gregor_publishers::MetadataImage;
use uuid::Uuid;

use crate::config::{ListenerSpec, NodeConfig, ProcessRole};
use crate::network::{self, BoundListener};
use crate::storage::{self, NodeIdentity};

/// How long the metadata log may take to replay and elect itself at start-up.
const METADATA_READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Kafka's id of the PLAINTEXT security protocol.
const PLAINTEXT: i16 = 0;

/// A start-up failure; printed as one line.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A data directory problem.
    #[error(transparent)]
    Storage(#[from] storage::StorageError),
    /// A port or socket problem.
    #[error("{0}")]
    Network(String),
    /// The metadata log could not start.
    #[error("metadata log in {dir}: {reason}")]
    MetadataLog {
        /// Its directory.
        dir: String,
        /// What failed.
        reason: String,
    },
    /// The runtime could not start.
    #[error("cannot start the runtime: {0}")]
    Runtime(String),
}

/// Installs the log formatter: `RUST_LOG` filters (`info` by default), to stderr, coloured only
/// on a terminal so that scripts can parse the lines.
pub fn init_logging() {
    use std::io::IsTerminal;
    // openraft narrates every election at info; its warnings are what an operator needs.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,openraft=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr)
        .init();
}

/// Runs a node until it is interrupted (SIGINT or SIGTERM).
pub fn run(config: NodeConfig) -> Result<(), StartError> {
    // Actors live on the system arbiter of this thread; connections and raft run on the
    // multi-threaded runtime underneath, so both cores serve clients.
    let system = actix_rt::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| {
                eprintln!("gregor: cannot start the tokio runtime: {e}");
                std::process::exit(1)
            })
    });
    system.block_on(serve(config))
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// The endpoint clients are told to use for `spec`: port 0 means the bound port, and a wildcard
/// host means this machine's name (never 0.0.0.0, which clients cannot connect to).
fn advertised_endpoint(spec: &ListenerSpec, bound: &[BoundListener]) -> Endpoint {
    let bound_port = bound
        .iter()
        .find(|b| b.spec.name == spec.name)
        .map(|b| b.local_addr.port());
    let port = match (spec.port, bound_port) {
        (0, Some(port)) => port,
        (port, _) => port,
    };
    let host = if spec.host.is_empty() || spec.host == "0.0.0.0" || spec.host == "::" {
        hostname()
    } else {
        spec.host.clone()
    };
    Endpoint {
        name: spec.name.clone(),
        host,
        port,
        security_protocol: PLAINTEXT,
    }
}

async fn serve(config: NodeConfig) -> Result<(), StartError> {
    let identity = storage::ensure_formatted(&config)?;
    let prometheus = gregor_metrics::exporter::install_recorder()
        .map_err(|e| StartError::Runtime(format!("metrics recorder: {e}")))?;
    let metrics_listener = gregor_metrics::exporter::bind(config.metrics_listener)
        .await
        .map_err(|e| {
            StartError::Network(format!(
                "Cannot bind metrics.listener {}: {e}",
                config.metrics_listener
            ))
        })?;
    let metrics_address = metrics_listener
        .local_addr()
        .map_err(|e| StartError::Network(format!("metrics.listener: {e}")))?;
    let bound = network::bind_all(&config)
        .await
        .map_err(StartError::Network)?;

    let image = Arc::new(ArcSwap::from_pointee(MetadataImage::empty()));
    let loader = Loader::new(image.clone()).start();
    loader
        .send(InstallPublisher(Box::new(TopicChangeLogPublisher)))
        .await
        .map_err(|e| StartError::Runtime(e.to_string()))?;
    let log = open_metadata_log(&config, &identity, &bound, &image, &loader).await?;

    let controller = Controller::new(
        log.clone(),
        image.clone(),
        ControllerSettings {
            defaults: TopicDefaults {
                num_partitions: config.num_partitions,
                default_replication_factor: config.default_replication_factor,
            },
            delete_topic_enable: config.delete_topic_enable,
        },
    )
    .start();
    register(&config, &identity, &bound, &image, &controller).await?;

    let handlers = HandlerContext {
        image: image.clone(),
        controller,
        node: Arc::new(NodeInfo {
            node_id: config.node_id,
            cluster_id: identity.cluster_id.clone(),
            is_broker: config.has_role(ProcessRole::Broker),
            is_controller: config.has_role(ProcessRole::Controller),
        }),
        settings: Arc::new(BrokerSettings {
            auto_create_topics_enable: config.auto_create_topics_enable,
            num_partitions: config.num_partitions,
            default_replication_factor: config.default_replication_factor,
        }),
    };
    tokio::spawn(gregor_metrics::exporter::serve(
        metrics_listener,
        prometheus,
    ));
    let listeners: Vec<String> = bound
        .iter()
        .map(|b| format!("{}://{}", b.spec.name, b.local_addr))
        .collect();
    let config = Arc::new(config);
    for listener in bound {
        let handlers = handlers.clone();
        let config = config.clone();
        tokio::spawn(async move { network::run(listener, handlers, &config).await });
    }
    tracing::info!(
        node_id = config.node_id,
        cluster_id = %identity.cluster_id,
        listeners = %listeners.join(","),
        metrics = %metrics_address,
        "node ready"
    );

    wait_for_shutdown_signal().await;
    tracing::info!("shutting down");
    if let Err(error) = log.shutdown().await {
        tracing::warn!(%error, "metadata log did not stop cleanly");
    }
    actix_rt::System::current().stop();
    Ok(())
}

async fn open_metadata_log(
    config: &NodeConfig,
    identity: &NodeIdentity,
    bound: &[BoundListener],
    image: &Arc<ArcSwap<MetadataImage>>,
    loader: &Addr<Loader>,
) -> Result<Arc<MetadataLog>, StartError> {
    let dir = config.metadata_log_dir.join("__cluster_metadata-0");
    let log_error = |reason: String| StartError::MetadataLog {
        dir: dir.display().to_string(),
        reason,
    };
    let applier = Arc::new(LoaderApplier::new(loader.clone(), image.clone()));
    let log = MetadataLog::open(
        config.node_id as u64,
        &dir,
        applier,
        MetadataLogOptions::default(),
    )
    .await
    .map_err(|e| log_error(e.to_string()))?;
    let voter = VoterNode {
        directory_id: identity.metadata_directory_id,
        endpoints: controller_endpoints(config, bound),
    };
    if storage::is_standalone(config) {
        log.initialize_single_voter(voter)
            .await
            .map_err(|e| log_error(e.to_string()))?;
    }
    log.wait_ready(METADATA_READY_TIMEOUT)
        .await
        .map_err(|e| log_error(e.to_string()))?;
    Ok(Arc::new(log))
}

fn controller_endpoints(config: &NodeConfig, bound: &[BoundListener]) -> Vec<Endpoint> {
    config
        .listeners
        .iter()
        .filter(|l| config.is_controller_listener(&l.name))
        .map(|l| advertised_endpoint(l, bound))
        .collect()
}

/// Writes the bootstrap feature levels on a brand-new log, then this node's registrations.
async fn register(
    config: &NodeConfig,
    identity: &NodeIdentity,
    bound: &[BoundListener],
    image: &Arc<ArcSwap<MetadataImage>>,
    controller: &Addr<Controller>,
) -> Result<(), StartError> {
    let current = image.load_full();
    let mut records = Vec::new();
    if current.features.metadata_version().is_none() {
        records.extend(features::bootstrap_records());
    }
    if config.has_role(ProcessRole::Controller) {
        records.push(MetadataRecord::RegisterController(
            RegisterControllerRecord {
                controller_id: config.node_id,
                incarnation_id: Uuid::new_v4(),
                directory_id: identity.metadata_directory_id,
                endpoints: controller_endpoints(config, bound),
                features: features::supported_ranges(),
            },
        ));
    }
    if config.has_role(ProcessRole::Broker) {
        let epoch = current.provenance.last_log_index as i64 + 1;
        records.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: config.node_id,
            incarnation_id: Uuid::new_v4(),
            broker_epoch: epoch,
            endpoints: config
                .advertised_listeners
                .iter()
                .map(|l| advertised_endpoint(l, bound))
                .collect(),
            features: features::supported_ranges(),
            rack: config.broker_rack.clone(),
            fenced: true,
            in_controlled_shutdown: false,
            log_dirs: identity.log_dir_ids.clone(),
        }));
        // With one node the broker is caught up as soon as it is registered.
        records.push(MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
            id: config.node_id,
            epoch,
        }));
    }
    let written = controller
        .send(WriteRecords { records })
        .await
        .map_err(|e| StartError::Runtime(e.to_string()))?;
    written.map_err(|e| StartError::MetadataLog {
        dir: config.metadata_log_dir.display().to_string(),
        reason: format!("cannot register this node: {e}"),
    })?;
    Ok(())
}

async fn wait_for_shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = interrupt => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(_) => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}
