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
use gregor_actors::config_publisher::ConfigPublisher;
use gregor_actors::context::{BrokerSettings, HandlerContext, NodeInfo};
use gregor_actors::controller::logic::election::UncleanPolicy;
use gregor_actors::controller::logic::TopicDefaults;
use gregor_actors::controller::{Controller, ControllerSettings, LeadershipSettings};
use gregor_actors::controller_metrics_publisher::ControllerMetricsPublisher;
use gregor_actors::digest_publisher::DigestPublisher;
use gregor_actors::groups::{GroupCoordinator, GroupPublisher, Groups};
use gregor_actors::loader::{
    InstallPublisher, Loader, LoaderApplier, PublishedOffset, TopicChangeLogPublisher,
};
use gregor_actors::log_manager::{LogManager, LogManagerSettings, LogPublisher, StaticLogDefaults};
use gregor_actors::quorum::QuorumState;
use gregor_actors::quota::{
    ClientQuotaPublisher, QuotaCallbackPublisher, QuotaManagers, SensorExpiry, SystemClock,
    WindowConfig,
};
use gregor_actors::raft::{MetadataLog, MetadataLogOptions, VoterNode};
use gregor_actors::replication::{IsrTask, ReplicationPublisher};
use gregor_publishers::quota_callback::{CallbackError, CallbackRegistry};
use gregor_publishers::records::Endpoint;
use gregor_publishers::{MetadataImage, MetadataPublisher};

use crate::config::{ListenerSpec, NodeConfig, ProcessRole};
use crate::network::{self, BoundListener};
use crate::quorum::{self, QuorumService};
use crate::storage::{self, NodeIdentity};

/// How long the metadata log may take to replay and elect itself at start-up.
const METADATA_READY_TIMEOUT: Duration = Duration::from_secs(120);

/// Test only: the environment variable naming a topic whose creation also writes a record that
/// does not apply (see `ControllerSettings::invalid_record_on_create`), so integration tests can
/// check that every node stops on it. Nothing sets it outside tests.
const INVALID_RECORD_HOOK_ENV: &str = "GREGOR_TEST_ONLY_INVALID_RECORD_ON_CREATE";

/// Test only: the environment variable that makes the metadata log take a snapshot every N
/// entries and keep no entry behind it, so that a replica lagging a few entries must be sent
/// the snapshot (integration tests of InstallSnapshot). Nothing sets it outside tests.
const SNAPSHOT_EVERY_HOOK_ENV: &str = "GREGOR_TEST_ONLY_SNAPSHOT_EVERY";

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
    /// `client.quota.callback.class` names no registered plug-in, or the plug-in refused its
    /// configuration.
    #[error(transparent)]
    QuotaCallback(#[from] CallbackError),
}

/// Installs the log formatter: `RUST_LOG` filters (`info` by default), to stderr, coloured only
/// on a terminal so that scripts can parse the lines.
pub fn init_logging() {
    // The filter is reloadable so BROKER_LOGGER changes apply at once (see `log_levels`).
    crate::log_levels::init_logging();
}

/// Runs a node until it is interrupted (SIGINT or SIGTERM).
pub fn run(config: NodeConfig) -> Result<(), StartError> {
    run_with(config, CallbackRegistry::with_builtins())
}

/// [`run`] with the quota callback plug-ins of `callbacks`, for embedders: register a plug-in
/// there and name it in `client.quota.callback.class` (see
/// `integration/examples/custom_quota_callback.rs`).
pub fn run_with(config: NodeConfig, callbacks: CallbackRegistry) -> Result<(), StartError> {
    // Actors live on the system arbiter of this thread (the loader on an arbiter of its own);
    // connections and raft run on the multi-threaded runtime underneath, so both cores serve
    // clients.
    let system = actix_rt::System::with_tokio_rt(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| {
                eprintln!("gregor: cannot start the tokio runtime: {e}");
                std::process::exit(1)
            })
    });
    let served = system.block_on(serve(config, callbacks));
    if served.is_err() {
        // A failed start ends the process: tearing the runtime down under actors that are still
        // starting on other arbiters only makes them panic ("there is no reactor running").
        std::mem::forget(system);
    }
    served
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

async fn serve(config: NodeConfig, callbacks: CallbackRegistry) -> Result<(), StartError> {
    let prometheus = gregor_metrics::exporter::install_recorder()
        .map_err(|e| StartError::Runtime(format!("metrics recorder: {e}")))?;
    crate::config_keys::KeyReport::of(&config).log();
    let _directory_locks = storage::lock_dirs(&config)?;
    let identity = storage::ensure_formatted(&config)?;
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
    // The loader gets a thread of its own: building an image from a large snapshot or batch
    // must not stall the controller actor on this thread (it serves writes) nor a tokio worker.
    // A committed record that does not apply stops the node (Kafka's fatal fault handler halts
    // the process): its image would otherwise differ from every other node's for good.
    let loader_image = image.clone();
    let published = PublishedOffset::default();
    let loader_published = published.clone();
    let loader = Loader::start_in_arbiter(&actix::Arbiter::new().handle(), move |_| {
        Loader::new(loader_image)
            .reporting_to(loader_published)
            .with_fatal_fault_handler(Arc::new(|fault| {
                tracing::error!(error = %fault, "stopping: the metadata log cannot be applied");
                std::process::exit(1);
            }))
    });
    loader
        .send(InstallPublisher(Box::new(DigestPublisher)))
        .await
        .map_err(|e| StartError::Runtime(e.to_string()))?;
    if config.has_role(ProcessRole::Controller) {
        loader
            .send(InstallPublisher(Box::new(
                ControllerMetricsPublisher::default(),
            )))
            .await
            .map_err(|e| StartError::Runtime(e.to_string()))?;
    }
    loader
        .send(InstallPublisher(Box::new(TopicChangeLogPublisher)))
        .await
        .map_err(|e| StartError::Runtime(e.to_string()))?;
    // Applies the dynamic broker configs that concern this node (see `config_publisher`).
    let (dynamic_configs_sender, dynamic_configs) = tokio::sync::watch::channel(Default::default());
    loader
        .send(InstallPublisher(Box::new(
            ConfigPublisher::new(config.node_id).sending_to(dynamic_configs_sender),
        )))
        .await
        .map_err(|e| StartError::Runtime(e.to_string()))?;
    // authorizer.class.name: the ACL authorizer, fed the image's ACLs by its publisher.
    let authorizer = config
        .authorizer
        .clone()
        .map(|settings| Arc::new(gregor_actors::authorizer::Authorizer::new(settings)));
    if let Some(authorizer) = &authorizer {
        loader
            .send(InstallPublisher(Box::new(
                gregor_actors::authorizer::AclPublisher::new(authorizer.clone()),
            )))
            .await
            .map_err(|e| StartError::Runtime(e.to_string()))?;
    }
    // Client quotas: one actor per type, fed by the client-quota publisher from the image.
    let quotas = QuotaManagers::start_with_expiry(
        WindowConfig::new(
            config.quota_window_num,
            u64::from(config.quota_window_size_seconds),
        ),
        WindowConfig::new(
            config.controller_quota_window_num,
            u64::from(config.controller_quota_window_size_seconds),
        ),
        Arc::new(SystemClock::new()),
        quota_sensor_expiry(),
    );
    loader
        .send(InstallPublisher(Box::new(ClientQuotaPublisher::new(
            quotas.clone(),
        ))))
        .await
        .map_err(|e| StartError::Runtime(e.to_string()))?;
    // client.quota.callback.class: a plug-in decides tags and limits for all four managers and
    // follows the image through a borrowed view (unset: the managers' built-in rules).
    let mut plugin_broker_configs = Vec::new();
    if let Some(name) = config.client_quota_callback_class.as_deref() {
        let mut configs = config.originals.clone();
        let node_id = config.node_id.to_string();
        configs
            .entry("node.id".into())
            .or_insert_with(|| node_id.clone());
        configs.entry("broker.id".into()).or_insert(node_id);
        let callback = Arc::from(callbacks.create(Some(name), &configs)?);
        quotas.install_callback(&callback);
        // The controller accepts these as dynamic broker configs, so they can be altered.
        plugin_broker_configs = callback
            .reconfigurable_configs()
            .iter()
            .map(|key| (*key).to_owned())
            .collect();
        loader
            .send(InstallPublisher(Box::new(QuotaCallbackPublisher::new(
                callback,
                &quotas,
                identity.cluster_id.clone(),
                config.node_id,
            ))))
            .await
            .map_err(|e| StartError::Runtime(e.to_string()))?;
    }
    // The publishers of a broker's data plane are installed once the node has joined the
    // quorum and applied what was committed before (`join_quorum`), as Kafka's loader publishes
    // to them only once caught up: a log is opened for the topic the current image names, never
    // for an earlier topic of the same name that an older image replayed at start-up still has.
    let mut data_plane_publishers: Vec<Box<dyn MetadataPublisher>> = Vec::new();
    // The partition logs of a broker, following the image (opened and recovered as the image
    // names them).
    let logs = if config.has_role(ProcessRole::Broker) {
        let logs = start_log_manager(&config)?;
        tokio::spawn(halt_when_log_dirs_fail(
            logs.offline_dirs(),
            logs.log_dirs().to_vec(),
            config.metadata_log_dir.clone(),
        ));
        data_plane_publishers.push(Box::new(LogPublisher::new(
            logs.clone(),
            config.node_id,
            StaticLogDefaults::from_broker_configs(
                config
                    .originals
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str())),
            ),
        )));
        // Leaders and followers of the hosted partitions, after their logs (above) exist.
        let (replication, followed) = ReplicationPublisher::new(logs.clone(), config.node_id);
        data_plane_publishers.push(Box::new(replication));
        Some((logs, followed))
    } else {
        None
    };
    let (logs, followed) = match logs {
        Some((logs, followed)) => (Some(logs), Some(followed)),
        None => (None, None),
    };
    // The group coordinator of a broker: its own thread (arbiter), following the leadership
    // of __consumer_offsets through its publisher (installed after the log manager's, so a
    // partition's log is opening when its load starts).
    let groups = match &logs {
        Some(logs) => {
            let settings = config.groups.clone();
            let coordinator_logs = logs.clone();
            let coordinator_settings = settings.clone();
            let coordinator =
                GroupCoordinator::start_in_arbiter(&actix::Arbiter::new().handle(), move |_| {
                    GroupCoordinator::new(coordinator_settings, Some(coordinator_logs))
                });
            data_plane_publishers.push(Box::new(GroupPublisher::new(
                coordinator.clone(),
                config.node_id,
            )));
            Some(Groups {
                coordinator,
                settings,
            })
        }
        None => None,
    };
    let hello = quorum::hello(&config, &identity);
    let peer_connector = |security: &crate::config::ClientSecurity| {
        crate::network::peer::PeerConnector::new(security.clone())
            .map(Arc::new)
            .map_err(|e| {
                StartError::Network(format!(
                    "connections to listener {} of the peers: {e}",
                    security.listener
                ))
            })
    };
    let controller_connector = peer_connector(&config.controller_client)?;
    let inter_broker_connector = peer_connector(&config.inter_broker_client)?;
    let (network, quorum_cell, raft_links) = quorum::network(
        hello.clone(),
        controller_connector.clone(),
        config.socket_request_max_bytes,
    );
    let peer_limits = network.limits.clone();
    let log = open_metadata_log(&config, &identity, &bound, &image, &loader, network).await?;
    let quorum_state = Arc::new(QuorumState::new(log.clone(), identity.cluster_id.clone()));
    let _ = quorum_cell.set(quorum_state.clone());

    let controller = Controller::new(
        log.clone(),
        image.clone(),
        ControllerSettings {
            defaults: TopicDefaults {
                num_partitions: config.num_partitions,
                default_replication_factor: config.default_replication_factor,
            },
            delete_topic_enable: config.delete_topic_enable,
            invalid_record_on_create: std::env::var(INVALID_RECORD_HOOK_ENV).ok(),
            bootstrap_records: crate::storage::bootstrap_scram_records(&config)?,
            plugin_broker_configs,
            group_config_defaults: config.groups.config_defaults(),
            group_config_bounds:
                gregor_actors::controller::logic::configs::group::GroupConfigBounds {
                    consumer_heartbeat_interval_ms: (
                        config.groups.consumer_min_heartbeat_interval_ms,
                        config.groups.consumer_max_heartbeat_interval_ms,
                    ),
                    consumer_session_timeout_ms: (
                        config.groups.consumer_min_session_timeout_ms,
                        config.groups.consumer_max_session_timeout_ms,
                    ),
                    ..Default::default()
                },
            leadership: LeadershipSettings {
                auto_leader_rebalance_enable: config.auto_leader_rebalance_enable,
                leader_imbalance_check_interval: std::time::Duration::from_secs(
                    config
                        .leader_imbalance_check_interval_seconds
                        .unsigned_abs(),
                ),
                unclean_leader_election_interval: std::time::Duration::from_millis(
                    config.unclean_leader_election_interval_ms.unsigned_abs(),
                ),
                unclean: UncleanPolicy {
                    node_id: config.node_id,
                    static_enabled: config.unclean_leader_election_enable,
                },
            },
        },
    )
    .with_mutation_quotas(quotas.controller_mutation.shared.clone())
    .start();
    let quorum = QuorumService::new(
        quorum_state,
        controller.clone(),
        image.clone(),
        peer_limits,
        hello,
        controller_connector,
        raft_links,
    );
    let handlers = HandlerContext {
        quorum: Some(quorum.state.clone()),
        forwarder: Some(quorum.clone()),
        image: image.clone(),
        published,
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
            transaction_max_timeout_ms: config.transaction_max_timeout_ms,
        }),
        configs: crate::config_support::config_support(&config),
        quotas,
        logs: logs.clone(),
        producer_ids: Arc::default(),
        fetch_sessions: Arc::new(gregor_actors::fetch_session::FetchSessionCache::new(
            config.max_incremental_fetch_session_cache_slots,
        )),
        groups,
        authorizer,
        topic_creation_sent: false,
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
    let join = quorum::join_request(
        &config,
        &identity,
        raft_node(&config, &identity, &bound),
        controller_endpoints(&config, &bound),
        config
            .advertised_listeners
            .iter()
            .map(|l| advertised_endpoint(l, &bound))
            .collect(),
    );
    // Listeners accept before the node is ready: peers' raft traffic must reach this node for
    // it to catch up. Kafka requests wait for `ready`.
    let (ready_sender, ready) = tokio::sync::watch::channel(false);
    let limits = network::NodeLimits::new(&config, &handlers, dynamic_configs);
    for listener in bound {
        let handlers = handlers.clone();
        let config = config.clone();
        let quorum = quorum.clone();
        let ready = ready.clone();
        let limits = limits.clone();
        tokio::spawn(async move {
            network::run(listener, handlers, &config, quorum, ready, limits).await
        });
    }
    if join.raft_node.endpoints.is_empty() {
        // No controller listener: the leader reaches this node over the link it opens.
        quorum::spawn_raft_link(config.clone(), quorum.clone(), join.clone());
    }
    join_quorum(&config, &log, &quorum, &join).await?;
    for publisher in data_plane_publishers {
        loader
            .send(InstallPublisher(publisher))
            .await
            .map_err(|e| StartError::Runtime(e.to_string()))?;
    }
    quorum::spawn_heartbeats(config.clone(), quorum.clone(), join);
    if config.has_role(ProcessRole::Controller) {
        quorum::spawn_fencing(
            config.clone(),
            quorum.clone(),
            image.clone(),
            handlers.controller.clone(),
        );
    }
    if let (Some(logs), Some(followed)) = (handlers.logs.clone(), followed) {
        IsrTask {
            logs: logs.clone(),
            image: image.clone(),
            controller: handlers.controller.clone(),
            forwarder: handlers.forwarder.clone(),
            node_id: config.node_id,
            replica_lag_time_max_ms: config.replica_lag_time_max_ms,
        }
        .spawn();
        crate::replica_fetcher::spawn(
            logs,
            image.clone(),
            followed,
            crate::replica_fetcher::FetcherSettings {
                node_id: config.node_id,
                listener_name: config.inter_broker_listener.clone(),
                connector: inter_broker_connector,
                max_wait_ms: config.replica_fetch_wait_max_ms,
                partition_max_bytes: config.replica_fetch_max_bytes,
                response_max_bytes: config.replica_fetch_response_max_bytes,
                backoff: std::time::Duration::from_millis(
                    u64::try_from(config.replica_fetch_backoff_ms).unwrap_or(0),
                ),
                pause_file: replica_fetch_pause_file(),
            },
        );
    }
    if let Some(logs) = &handlers.logs {
        // Kafka enables request processing only once its log manager has loaded the logs: a
        // partition still opening would answer NOT_LEADER_OR_FOLLOWER while Metadata names
        // this node its leader.
        let loading = std::time::Instant::now();
        logs.changes_applied().await;
        tracing::info!(
            logs = logs.partition_count(),
            elapsed_ms = loading.elapsed().as_millis() as u64,
            "partition logs loaded"
        );
    }
    let _ = ready_sender.send(true);
    tracing::info!(
        node_id = config.node_id,
        cluster_id = %identity.cluster_id,
        listeners = %listeners.join(","),
        metrics = %metrics_address,
        "node ready"
    );

    wait_for_shutdown_signal().await;
    tracing::info!("shutting down");
    if config.has_role(ProcessRole::Broker) {
        gregor_actors::replication::controlled_shutdown(
            &image,
            &handlers.controller,
            handlers.forwarder.as_ref(),
            config.node_id,
            CONTROLLED_SHUTDOWN_TIMEOUT,
        )
        .await;
    }
    if let Some(logs) = logs {
        let broker_epoch = image
            .load()
            .cluster
            .broker(config.node_id)
            .map_or(-1, |b| b.epoch);
        if tokio::task::spawn_blocking(move || logs.shutdown(broker_epoch))
            .await
            .is_err()
        {
            tracing::error!("the log manager did not shut down cleanly");
        }
    }
    if let Err(error) = log.shutdown().await {
        tracing::warn!(%error, "metadata log did not stop cleanly");
    }
    actix_rt::System::current().stop();
    Ok(())
}

/// Opens `log.dirs` and starts the log shard threads (one per core, at most 8).
/// The test-only file that pauses replica fetching (`replica_fetcher::PAUSE_HOOK_ENV`), with a
/// warning when set.
fn replica_fetch_pause_file() -> Option<std::path::PathBuf> {
    let file = std::env::var_os(crate::replica_fetcher::PAUSE_HOOK_ENV)?;
    tracing::warn!(
        file = %std::path::Path::new(&file).display(),
        "test-only hook set: replica fetching pauses while this file exists"
    );
    Some(file.into())
}

/// How long a stopping broker waits for its leaderships to move (Kafka retries its controlled
/// shutdown for about as long with its defaults).
const CONTROLLED_SHUTDOWN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Stops the process, as Kafka halts a broker (`ReplicaManager.handleLogDirFailure`,
/// `LogManager.handleLogDirFailure`), when the log dir holding the metadata log or every log
/// dir has failed: a broker that serves no partition but stays registered keeps its
/// leaderships from moving to replicas that could serve them; once it is gone it is fenced and
/// they move.
async fn halt_when_log_dirs_fail(
    mut offline: tokio::sync::watch::Receiver<std::collections::BTreeSet<std::path::PathBuf>>,
    log_dirs: Vec<std::path::PathBuf>,
    metadata_log_dir: std::path::PathBuf,
) {
    loop {
        let reason = {
            let offline = offline.borrow_and_update();
            if offline.contains(&metadata_log_dir) {
                Some(format!(
                    "the metadata log dir {} has failed",
                    metadata_log_dir.display()
                ))
            } else if offline.len() == log_dirs.len() {
                Some(format!("all log dirs in {log_dirs:?} have failed"))
            } else {
                None
            }
        };
        if let Some(reason) = reason {
            tracing::error!(
                "Shutdown broker because {reason}: repair the disk, then start the node again"
            );
            std::process::exit(1);
        }
        if offline.changed().await.is_err() {
            return;
        }
    }
}

fn start_log_manager(config: &NodeConfig) -> Result<Arc<LogManager>, StartError> {
    let number = |key: &str, default: u64| {
        config
            .originals
            .get(key)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(default)
    };
    let shards = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    LogManager::start(LogManagerSettings {
        log_dirs: config.log_dirs.clone(),
        shards,
        retention_check_interval_ms: number("log.retention.check.interval.ms", 300_000),
        producer_id_expiration_ms: number("producer.id.expiration.ms", 86_400_000),
        producer_id_expiration_check_interval_ms: number(
            "producer.id.expiration.check.interval.ms",
            600_000,
        ),
        checkpoint_interval_ms: number("log.flush.offset.checkpoint.interval.ms", 60_000),
        high_watermark_checkpoint_interval_ms: number(
            "replica.high.watermark.checkpoint.interval.ms",
            5_000,
        ),
        max_open_files: 4096,
        cleaner_enable: config
            .originals
            .get("log.cleaner.enable")
            .is_none_or(|v| v.trim().eq_ignore_ascii_case("true")),
        cleaner_backoff_ms: number("log.cleaner.backoff.ms", 15_000),
        cleaner_threads: usize::try_from(config.log_cleaner_threads).unwrap_or(1),
        cleaner_dedupe_buffer_bytes: u64::try_from(config.log_cleaner_dedupe_buffer_size)
            .unwrap_or(0),
        cleaner_dedupe_load_factor: config.log_cleaner_io_buffer_load_factor,
        recovery_threads_per_dir: usize::try_from(number("num.recovery.threads.per.data.dir", 2))
            .unwrap_or(2)
            .max(1),
        fetch_response_memory_bytes: config.fetch_response_memory_bytes,
    })
    .map_err(StartError::Runtime)
}

async fn open_metadata_log(
    config: &NodeConfig,
    identity: &NodeIdentity,
    bound: &[BoundListener],
    image: &Arc<ArcSwap<MetadataImage>>,
    loader: &Addr<Loader>,
    network: quorum::transport::QuorumNetwork,
) -> Result<Arc<MetadataLog>, StartError> {
    let dir = config.metadata_log_dir.join("__cluster_metadata-0");
    let log_error = |reason: String| StartError::MetadataLog {
        dir: dir.display().to_string(),
        reason,
    };
    let applier = Arc::new(LoaderApplier::new(loader.clone(), image.clone()));
    let defaults = MetadataLogOptions::default();
    let snapshot_every_hook = std::env::var(SNAPSHOT_EVERY_HOOK_ENV)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|every| *every > 0);
    if let Some(every) = snapshot_every_hook {
        tracing::warn!(
            every,
            "{SNAPSHOT_EVERY_HOOK_ENV} is set: a metadata snapshot every {every} entries, no log kept behind it (test only)"
        );
    }
    let log = MetadataLog::open_with_network(
        config.node_id as u64,
        &dir,
        applier,
        MetadataLogOptions {
            // Chunks never larger than the snapshot stream needs, nor than a request frame.
            snapshot_chunk_bytes: quorum::transport::payload_budget(
                usize::try_from(config.socket_request_max_bytes).unwrap_or(usize::MAX),
            )
            .min(8 * 1024 * 1024) as u64,
            snapshot_every: snapshot_every_hook.unwrap_or(defaults.snapshot_every),
            logs_kept_after_snapshot: match snapshot_every_hook {
                Some(_) => 0,
                None => defaults.logs_kept_after_snapshot,
            },
        },
        network,
    )
    .await
    .map_err(|e| log_error(e.to_string()))?;
    let voter = VoterNode {
        directory_id: identity.metadata_directory_id,
        endpoints: controller_endpoints(config, bound),
    };
    quorum::initialize(
        config,
        voter,
        &log,
        config.controller_listener_names.first().map(String::as_str),
    )
    .await
    .map_err(log_error)?;
    Ok(Arc::new(log))
}

/// How the leader reaches this node with raft traffic: its controller listener, or for a
/// broker without one no endpoint at all (it opens a raft link to the leader instead; private
/// RPCs are never served on client listeners).
fn raft_node(config: &NodeConfig, identity: &NodeIdentity, bound: &[BoundListener]) -> VoterNode {
    VoterNode {
        directory_id: identity.metadata_directory_id,
        endpoints: controller_endpoints(config, bound),
    }
}

/// Becomes ready: a standalone quorum first waits to lead; then this node registers through
/// the leader and applies everything committed before the leader's answer.
async fn join_quorum(
    config: &NodeConfig,
    log: &MetadataLog,
    quorum: &QuorumService,
    join: &quorum::rpc::JoinRequest,
) -> Result<(), StartError> {
    let log_error = |reason: String| StartError::MetadataLog {
        dir: config
            .metadata_log_dir
            .join("__cluster_metadata-0")
            .display()
            .to_string(),
        reason,
    };
    let deadline = std::time::Instant::now() + METADATA_READY_TIMEOUT;
    let metrics = log.metrics();
    let membership = metrics.membership_config.membership();
    let sole_voter = membership.voter_ids().collect::<Vec<_>>() == [config.node_id as u64];
    if sole_voter {
        log.wait_ready(METADATA_READY_TIMEOUT)
            .await
            .map_err(|e| log_error(e.to_string()))?;
    }
    quorum::join_cluster(config, quorum, join, deadline)
        .await
        .map_err(|e| log_error(format!("cannot register this node: {e}")))
}

fn controller_endpoints(config: &NodeConfig, bound: &[BoundListener]) -> Vec<Endpoint> {
    config
        .listeners
        .iter()
        .filter(|l| config.is_controller_listener(&l.name))
        .map(|l| advertised_endpoint(l, bound))
        .collect()
}

/// SIGINT, SIGTERM or SIGHUP: the three signals after which Kafka's shutdown hook stops the
/// server cleanly.
async fn wait_for_shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
        ) {
            (Ok(mut terminate), Ok(mut hangup)) => {
                tokio::select! {
                    _ = interrupt => tracing::info!("terminating on signal SIGINT"),
                    _ = terminate.recv() => tracing::info!("terminating on signal SIGTERM"),
                    _ = hangup.recv() => tracing::info!("terminating on signal SIGHUP"),
                }
            }
            _ => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}

/// Kafka's hour of idleness before a quota sensor (and its series) goes, unless the test knob
/// `GREGOR_QUOTA_SENSOR_EXPIRY_MS` shortens it (tests cannot wait an hour).
fn quota_sensor_expiry() -> SensorExpiry {
    match std::env::var("GREGOR_QUOTA_SENSOR_EXPIRY_MS") {
        Ok(value) => match value.parse() {
            Ok(idle_ms) => {
                tracing::warn!(
                    idle_ms,
                    "quota sensors expire early (GREGOR_QUOTA_SENSOR_EXPIRY_MS)"
                );
                SensorExpiry::after_idle_ms(idle_ms)
            }
            Err(_) => {
                tracing::warn!(%value, "ignoring GREGOR_QUOTA_SENSOR_EXPIRY_MS: not a number of ms");
                SensorExpiry::KAFKA
            }
        },
        Err(_) => SensorExpiry::KAFKA,
    }
}
