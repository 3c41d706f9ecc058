//! Node configuration: Kafka's property names and defaults, read from a `server.properties`
//! file and `--override key=value` flags, validated once at start-up.
//!
//! Every key the node acts on is in [`DEFINITIONS`]; a bad value or an inconsistent combination
//! of those is a [`ConfigError`] whose message names the key. Any other key is kept in
//! `originals` and reported at start-up (see [`crate::config_keys`]), as Kafka does.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufReader;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use crate::config_security::{
    client_security, listener_security as listener_security_of, SaslDefaults,
};
pub use crate::config_security::{
    ClientSecurity, ListenerSecurity, SaslMechanism, SecurityProtocol,
};

/// A configuration problem; the message names the key or file and is printed as is.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The value does not parse or is out of range (Kafka's ConfigException wording).
    #[error("Invalid value {value} for configuration {key}: {reason}")]
    InvalidValue {
        /// The key.
        key: &'static str,
        /// The value as given.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The properties file cannot be read.
    #[error("Cannot read configuration file {path}: {reason}")]
    File {
        /// The file.
        path: PathBuf,
        /// The I/O or syntax error.
        reason: String,
    },
    /// A per-listener key (`listener.name.<l>.*`) has a bad value.
    #[error("Invalid value {value} for configuration {key}: {reason}")]
    InvalidListenerValue {
        /// The key.
        key: String,
        /// The value as given (hidden when it may hold a credential).
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An override is not of the form `key=value`.
    #[error("Invalid --override '{0}': expected key=value")]
    BadOverride(String),
}

/// Kafka's config value types, with their DescribeConfigs wire ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    /// `true` / `false`.
    Boolean = 1,
    /// Any string.
    String = 2,
    /// 32-bit integer.
    Int = 3,
    /// 16-bit integer.
    Short = 4,
    /// 64-bit integer.
    Long = 5,
    /// 64-bit floating point.
    Double = 6,
    /// Comma-separated list.
    List = 7,
}

/// One accepted key: its type, Kafka's default and documentation.
#[derive(Debug)]
pub struct ConfigDef {
    /// Property name.
    pub name: &'static str,
    /// Value type.
    pub kind: ConfigType,
    /// Default value as text (`None` = no value).
    pub default: Option<&'static str>,
    /// One-line description.
    pub doc: &'static str,
}

const fn def(
    name: &'static str,
    kind: ConfigType,
    default: Option<&'static str>,
    doc: &'static str,
) -> ConfigDef {
    ConfigDef {
        name,
        kind,
        default,
        doc,
    }
}

/// Name of Gregor's own key for the Prometheus endpoint.
pub const METRICS_LISTENER: &str = "metrics.listener";

/// Name of Gregor's own key for the log format.
pub const LOG_FORMAT: &str = "log.format";

/// Name of Gregor's own key for the read budget of Fetch answers.
pub const FETCH_RESPONSE_MEMORY_BYTES: &str = "fetch.response.memory.bytes";

/// The keys Gregor defines that Kafka has not.
pub const GREGOR_KEYS: [&str; 3] = [METRICS_LISTENER, LOG_FORMAT, FETCH_RESPONSE_MEMORY_BYTES];

/// Every key `gregor node` acts on.
pub const DEFINITIONS: &[ConfigDef] = &[
    def(
        "node.id",
        ConfigType::Int,
        Some("1"),
        "The node id of this process.",
    ),
    def(
        "broker.id",
        ConfigType::Int,
        None,
        "Alias of node.id; must equal it when both are set.",
    ),
    def(
        "process.roles",
        ConfigType::List,
        Some("broker,controller"),
        "Roles of this process: broker, controller or both.",
    ),
    def(
        "listeners",
        ConfigType::List,
        Some("PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"),
        "Listeners to bind, NAME://host:port; port 0 binds an ephemeral port.",
    ),
    def(
        "advertised.listeners",
        ConfigType::List,
        None,
        "Listeners clients are told to use; defaults to the non-controller listeners.",
    ),
    def(
        "controller.listener.names",
        ConfigType::List,
        Some("CONTROLLER"),
        "Names of the listeners used by the controller.",
    ),
    def(
        "listener.security.protocol.map",
        ConfigType::List,
        Some("PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"),
        "Security protocol per listener name: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
    ),
    def(
        "sasl.mechanism.controller.protocol",
        ConfigType::String,
        Some("GSSAPI"),
        "SASL mechanism this node authenticates with to a SASL controller listener (PLAIN, \
         SCRAM-SHA-256 or SCRAM-SHA-512); the user and password come from \
         listener.name.<controller listener>.<mechanism>.sasl.jaas.config.",
    ),
    def(
        "inter.broker.listener.name",
        ConfigType::String,
        None,
        "Listener brokers use among themselves (replica fetching); defaults to the listener \
         named by security.inter.broker.protocol when it is set, else the first advertised \
         listener that is not a controller listener.",
    ),
    def(
        "security.inter.broker.protocol",
        ConfigType::String,
        None,
        "Names the inter-broker listener by its protocol when inter.broker.listener.name is \
         not set (Kafka's default PLAINTEXT).",
    ),
    def(
        "sasl.mechanism.inter.broker.protocol",
        ConfigType::String,
        Some("GSSAPI"),
        "SASL mechanism brokers authenticate with to a SASL inter-broker listener (PLAIN, \
         SCRAM-SHA-256 or SCRAM-SHA-512); the user and password come from \
         listener.name.<inter-broker listener>.<mechanism>.sasl.jaas.config.",
    ),
    def(
        "sasl.enabled.mechanisms",
        ConfigType::List,
        Some("GSSAPI"),
        "SASL mechanisms of SASL listeners (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); \
         listener.name.<l>.sasl.enabled.mechanisms overrides it per listener.",
    ),
    def(
        "sasl.server.max.receive.size",
        ConfigType::Int,
        Some("524288"),
        "Largest frame accepted before a SASL connection has authenticated.",
    ),
    def(
        "connections.max.reauth.ms",
        ConfigType::Long,
        Some("0"),
        "Lifetime of an authenticated SASL session; the client must re-authenticate before it \
         ends or its connection is closed (KIP-368). 0 = sessions never expire.",
    ),
    def(
        "connection.failed.authentication.delay.ms",
        ConfigType::Int,
        Some("100"),
        "How long a connection that failed authentication stays open after its error response.",
    ),
    def(
        "log.dirs",
        ConfigType::List,
        Some("./gregor-data"),
        "Data directories.",
    ),
    def(
        "log.dir",
        ConfigType::String,
        None,
        "Single data directory, used when log.dirs is not set.",
    ),
    def(
        "log.retention.check.interval.ms",
        ConfigType::Long,
        Some("300000"),
        "How often each partition log is checked for segments to delete by retention.",
    ),
    def(
        "producer.id.expiration.ms",
        ConfigType::Int,
        Some("86400000"),
        "How long a partition log remembers an idempotent producer that sent nothing (its last batch's timestamp), before it forgets its sequence state.",
    ),
    def(
        "producer.id.expiration.check.interval.ms",
        ConfigType::Int,
        Some("600000"),
        "How often each partition log forgets the producers idle past producer.id.expiration.ms.",
    ),
    def(
        "log.flush.offset.checkpoint.interval.ms",
        ConfigType::Int,
        Some("60000"),
        "How often the recovery-point and log-start-offset checkpoints of each log dir are written.",
    ),
    def(
        "num.recovery.threads.per.data.dir",
        ConfigType::Int,
        Some("2"),
        "Partition logs opened (and recovered after an unclean shutdown) at once per log dir, shared among the log shards.",
    ),
    def(
        "replica.high.watermark.checkpoint.interval.ms",
        ConfigType::Long,
        Some("5000"),
        "How often each log dir's replication-offset-checkpoint (the replicas' high watermarks) is written.",
    ),
    def(
        "log.cleaner.enable",
        ConfigType::Boolean,
        Some("true"),
        "Whether the log cleaner compacts logs with cleanup.policy=compact.",
    ),
    def(
        "log.cleaner.backoff.ms",
        ConfigType::Long,
        Some("15000"),
        "How often each log shard looks for compacted logs dirty enough to clean.",
    ),
    def(
        "log.cleaner.threads",
        ConfigType::Int,
        Some("1"),
        "Threads that run log compaction passes, apart from the log shards that serve requests.",
    ),
    def(
        "log.cleaner.dedupe.buffer.size",
        ConfigType::Long,
        Some("134217728"),
        "Memory for the cleaner threads' key maps, shared out among them; a pass over more distinct keys than a thread's share holds cleans up to where its map filled.",
    ),
    def(
        "log.cleaner.io.buffer.load.factor",
        ConfigType::Double,
        Some("0.9"),
        "How full, from 0 to 1, a cleaner thread's key map may get.",
    ),
    def(
        "max.incremental.fetch.session.cache.slots",
        ConfigType::Int,
        Some("1000"),
        "Incremental fetch sessions (KIP-227) the broker keeps, over 8 shards of slots/8 each.",
    ),
    def(
        "metadata.log.dir",
        ConfigType::String,
        None,
        "Directory of the metadata log; defaults to the first of log.dirs.",
    ),
    def(
        "transaction.max.timeout.ms",
        ConfigType::Int,
        Some("900000"),
        "The longest transaction timeout InitProducerId accepts (INVALID_TRANSACTION_TIMEOUT past it, checked before the transaction coordinator, which Gregor does not run yet, is looked for).",
    ),
    def(
        "num.partitions",
        ConfigType::Int,
        Some("1"),
        "Default partition count of new topics.",
    ),
    def(
        "default.replication.factor",
        ConfigType::Short,
        Some("1"),
        "Default replication factor of new topics.",
    ),
    def(
        "replica.lag.time.max.ms",
        ConfigType::Long,
        Some("30000"),
        "A follower that has not caught up with its leader for this long leaves the ISR (checked every half of it).",
    ),
    def(
        "replica.fetch.wait.max.ms",
        ConfigType::Int,
        Some("500"),
        "The longest a follower's fetch waits at the leader for new records.",
    ),
    def(
        "replica.fetch.max.bytes",
        ConfigType::Int,
        Some("1048576"),
        "Bytes a follower asks for per partition in one fetch (the first batch always comes whole).",
    ),
    def(
        "replica.fetch.response.max.bytes",
        ConfigType::Int,
        Some("10485760"),
        "Bytes a follower asks for in one fetch response.",
    ),
    def(
        "replica.fetch.backoff.ms",
        ConfigType::Int,
        Some("1000"),
        "How long a follower waits before fetching a partition again after an error.",
    ),
    def(
        "auto.leader.rebalance.enable",
        ConfigType::Boolean,
        Some("true"),
        "Whether the active controller moves leadership back to each partition's first replica.",
    ),
    def(
        "leader.imbalance.check.interval.seconds",
        ConfigType::Long,
        Some("300"),
        "How often the active controller looks for partitions not led by their first replica.",
    ),
    def(
        "leader.imbalance.per.broker.percentage",
        ConfigType::Int,
        Some("10"),
        "Accepted and ignored, as by Kafka's KRaft controller (only its ZooKeeper controller used it).",
    ),
    def(
        "unclean.leader.election.enable",
        ConfigType::Boolean,
        Some("false"),
        "Whether a partition whose in-sync replicas are all gone may elect a replica outside the ISR (records may be lost); topic and dynamic broker configs override it.",
    ),
    def(
        "unclean.leader.election.interval.ms",
        ConfigType::Long,
        Some("300000"),
        "How often the active controller elects leaders for leaderless partitions (Kafka's internal setting).",
    ),
    def(
        "delete.topic.enable",
        ConfigType::Boolean,
        Some("true"),
        "Whether DeleteTopics may delete topics.",
    ),
    def(
        "auto.create.topics.enable",
        ConfigType::Boolean,
        Some("true"),
        "Whether Metadata requests create missing topics.",
    ),
    def(
        "socket.request.max.bytes",
        ConfigType::Int,
        Some("104857600"),
        "Largest request frame accepted.",
    ),
    def(
        "connections.max.idle.ms",
        ConfigType::Long,
        Some("600000"),
        "Idle connections are closed after this many ms.",
    ),
    def(
        "queued.max.request.bytes",
        ConfigType::Long,
        Some("-1"),
        "Memory pool of request frames being read and served; a connection waits for memory \
         when it is used up. -1 (or 0) = unbounded.",
    ),
    def(
        FETCH_RESPONSE_MEMORY_BYTES,
        ConfigType::Long,
        Some("268435456"),
        "Record bytes read for fetch answers not yet written to their sockets; once spent, a \
         fetch returns only its first batch. -1 (or 0) = unbounded. Gregor's own key.",
    ),
    def(
        "max.connections",
        ConfigType::Int,
        Some("2147483647"),
        "Connections the node holds at most; listeners wait to accept more (controller \
         listeners are exempt).",
    ),
    def(
        "max.connections.per.ip",
        ConfigType::Int,
        Some("2147483647"),
        "Connections one address may hold; more are closed at once.",
    ),
    def(
        "max.connections.per.ip.overrides",
        ConfigType::String,
        Some(""),
        "Per-address exceptions to max.connections.per.ip: host:count,...",
    ),
    def(
        "quota.window.num",
        ConfigType::Int,
        Some("11"),
        "Samples kept for client quotas (produce, fetch, request).",
    ),
    def(
        "quota.window.size.seconds",
        ConfigType::Int,
        Some("1"),
        "Length of one client-quota sample in seconds.",
    ),
    def(
        "controller.quota.window.num",
        ConfigType::Int,
        Some("11"),
        "Samples of the controller-mutation quota (burst = samples x size x rate).",
    ),
    def(
        "controller.quota.window.size.seconds",
        ConfigType::Int,
        Some("1"),
        "Length of one controller-mutation quota sample in seconds.",
    ),
    def(
        "broker.rack",
        ConfigType::String,
        None,
        "Rack of this broker.",
    ),
    def(
        "client.quota.callback.class",
        ConfigType::String,
        None,
        "Quota callback plug-in by registered name (`grouped-user`, or an embedder's); unset or \
         `default` = Kafka's built-in quota rules.",
    ),
    def(
        "authorizer.class.name",
        ConfigType::String,
        Some(""),
        "The ACL authorizer: `org.apache.kafka.metadata.authorizer.StandardAuthorizer` (or \
         `StandardAuthorizer`) enforces the ACLs of the metadata log; empty = no authorization \
         (the ACL APIs answer SECURITY_DISABLED).",
    ),
    def(
        "super.users",
        ConfigType::String,
        Some(""),
        "Principals allowed everything, separated by semicolons (`User:admin;User:broker`).",
    ),
    def(
        "allow.everyone.if.no.acl.found",
        ConfigType::Boolean,
        Some("false"),
        "Whether an action on a resource that has no ACL at all is allowed.",
    ),
    def(
        "broker.heartbeat.interval.ms",
        ConfigType::Int,
        Some("2000"),
        "How often a broker that is not a voter heartbeats to the active controller.",
    ),
    def(
        "broker.session.timeout.ms",
        ConfigType::Int,
        Some("9000"),
        "A broker not heard from for this long is fenced by the active controller.",
    ),
    def(
        "controller.quorum.bootstrap.servers",
        ConfigType::List,
        Some(""),
        "host:port of controllers to contact first (KIP-853); empty for a standalone node.",
    ),
    def(
        LOG_FORMAT,
        ConfigType::String,
        Some("text"),
        "Log line format on stderr: `text` or `json` (one object per line); RUST_LOG_FORMAT wins.",
    ),
    def(
        "offsets.topic.num.partitions",
        ConfigType::Int,
        Some("50"),
        "Partitions of __consumer_offsets when it is created.",
    ),
    def(
        "offsets.topic.replication.factor",
        ConfigType::Short,
        Some("3"),
        "Replication factor of __consumer_offsets when it is created (capped at the live brokers).",
    ),
    def(
        "offsets.topic.segment.bytes",
        ConfigType::Int,
        Some("104857600"),
        "segment.bytes of __consumer_offsets.",
    ),
    def(
        "offsets.retention.minutes",
        ConfigType::Int,
        Some("10080"),
        "Committed offsets of a group that has been empty this long are deleted.",
    ),
    def(
        "offsets.retention.check.interval.ms",
        ConfigType::Long,
        Some("600000"),
        "How often offsets are checked for expiry.",
    ),
    def(
        "offsets.commit.timeout.ms",
        ConfigType::Int,
        Some("5000"),
        "How long an OffsetCommit waits for its write before REQUEST_TIMED_OUT.",
    ),
    def(
        "offset.metadata.max.bytes",
        ConfigType::Int,
        Some("4096"),
        "Largest metadata string of a committed offset.",
    ),
    def(
        "group.min.session.timeout.ms",
        ConfigType::Int,
        Some("6000"),
        "Smallest session timeout a group member may ask for.",
    ),
    def(
        "group.max.session.timeout.ms",
        ConfigType::Int,
        Some("1800000"),
        "Largest session timeout a group member may ask for.",
    ),
    def(
        "group.initial.rebalance.delay.ms",
        ConfigType::Int,
        Some("3000"),
        "How long the first rebalance of an empty group waits for more members.",
    ),
    def(
        "group.max.size",
        ConfigType::Int,
        Some("2147483647"),
        "Most members a classic group may have.",
    ),
    def(
        "group.consumer.assignors",
        ConfigType::List,
        Some("uniform,range"),
        "The server-side assignors of consumer groups (uniform, range), the default first.",
    ),
    def(
        "group.consumer.max.size",
        ConfigType::Int,
        Some("2147483647"),
        "Most members a consumer group may have.",
    ),
    def(
        "group.consumer.session.timeout.ms",
        ConfigType::Int,
        Some("45000"),
        "Session timeout of consumer-group members when the group sets none.",
    ),
    def(
        "group.consumer.min.session.timeout.ms",
        ConfigType::Int,
        Some("45000"),
        "Smallest session timeout of a consumer group.",
    ),
    def(
        "group.consumer.max.session.timeout.ms",
        ConfigType::Int,
        Some("60000"),
        "Largest session timeout of a consumer group.",
    ),
    def(
        "group.consumer.heartbeat.interval.ms",
        ConfigType::Int,
        Some("5000"),
        "Heartbeat interval of consumer-group members when the group sets none.",
    ),
    def(
        "group.consumer.min.heartbeat.interval.ms",
        ConfigType::Int,
        Some("5000"),
        "Smallest heartbeat interval of a consumer group.",
    ),
    def(
        "group.consumer.max.heartbeat.interval.ms",
        ConfigType::Int,
        Some("15000"),
        "Largest heartbeat interval of a consumer group.",
    ),
    def(
        "group.consumer.migration.policy",
        ConfigType::String,
        Some("bidirectional"),
        "Whether live groups move between the classic and the consumer protocol: bidirectional, upgrade, downgrade or disabled.",
    ),
    def(
        METRICS_LISTENER,
        ConfigType::String,
        Some("127.0.0.1:9644"),
        "host:port of the Prometheus /metrics endpoint.",
    ),
];

/// How log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

impl LogFormat {
    /// Parses `text` or `json` (any case).
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        match text.trim().to_ascii_lowercase().as_str() {
            "text" => Ok(LogFormat::Text),
            "json" => Ok(LogFormat::Json),
            _ => Err(invalid(
                LOG_FORMAT,
                text.to_owned(),
                "expected text or json",
            )),
        }
    }
}

/// A role of the process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessRole {
    /// Serves clients.
    Broker,
    /// Holds the metadata log.
    Controller,
}

/// A listener as configured: `NAME://host:port`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ListenerSpec {
    /// Listener name, upper case.
    pub name: String,
    /// Host (empty = all interfaces).
    pub host: String,
    /// Port (0 = ephemeral).
    pub port: u16,
}

impl ListenerSpec {
    /// The address to bind.
    pub fn bind_address(&self) -> String {
        let host = if self.host.is_empty() {
            "0.0.0.0"
        } else {
            &self.host
        };
        if host.contains(':') {
            format!("[{host}]:{}", self.port)
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

impl std::fmt::Display for ListenerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "{}://[{}]:{}", self.name, self.host, self.port)
        } else {
            write!(f, "{}://{}:{}", self.name, self.host, self.port)
        }
    }
}

/// The validated configuration of one node.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// `node.id`.
    pub node_id: i32,
    /// `process.roles`.
    pub process_roles: Vec<ProcessRole>,
    /// `listeners`.
    pub listeners: Vec<ListenerSpec>,
    /// `advertised.listeners` (or its default).
    pub advertised_listeners: Vec<ListenerSpec>,
    /// `controller.listener.names`.
    pub controller_listener_names: Vec<String>,
    /// The security of each listener of `listeners`, by name.
    pub listener_security: BTreeMap<String, ListenerSecurity>,
    /// How this node connects to controller listeners (the first of
    /// `controller.listener.names`): quorum RPCs, joins, heartbeats, forwarding.
    pub controller_client: ClientSecurity,
    /// The listener brokers fetch from each other over (`inter.broker.listener.name`).
    pub inter_broker_listener: String,
    /// How this broker connects to other brokers' inter-broker listener.
    pub inter_broker_client: ClientSecurity,
    /// `log.dirs`.
    pub log_dirs: Vec<PathBuf>,
    /// `metadata.log.dir`.
    pub metadata_log_dir: PathBuf,
    /// `log.cleaner.enable`.
    pub log_cleaner_enable: bool,
    /// `log.cleaner.backoff.ms`.
    pub log_cleaner_backoff_ms: i64,
    /// `log.cleaner.threads`.
    pub log_cleaner_threads: i64,
    /// `log.cleaner.dedupe.buffer.size`.
    pub log_cleaner_dedupe_buffer_size: i64,
    /// `log.cleaner.io.buffer.load.factor`.
    pub log_cleaner_io_buffer_load_factor: f64,
    /// `max.incremental.fetch.session.cache.slots`.
    pub max_incremental_fetch_session_cache_slots: usize,
    /// `num.partitions`.
    pub num_partitions: i32,
    /// `default.replication.factor`.
    pub default_replication_factor: i16,
    /// `transaction.max.timeout.ms`: the longest transaction timeout InitProducerId accepts.
    pub transaction_max_timeout_ms: i32,
    /// `replica.lag.time.max.ms`.
    pub replica_lag_time_max_ms: i64,
    /// `replica.fetch.wait.max.ms`.
    pub replica_fetch_wait_max_ms: i32,
    /// `replica.fetch.max.bytes`.
    pub replica_fetch_max_bytes: i32,
    /// `replica.fetch.response.max.bytes`.
    pub replica_fetch_response_max_bytes: i32,
    /// `replica.fetch.backoff.ms`.
    pub replica_fetch_backoff_ms: i32,
    /// `delete.topic.enable`.
    pub delete_topic_enable: bool,
    /// `auto.leader.rebalance.enable`.
    pub auto_leader_rebalance_enable: bool,
    /// `leader.imbalance.check.interval.seconds`.
    pub leader_imbalance_check_interval_seconds: i64,
    /// `unclean.leader.election.enable`.
    pub unclean_leader_election_enable: bool,
    /// `unclean.leader.election.interval.ms`.
    pub unclean_leader_election_interval_ms: i64,
    /// `auto.create.topics.enable`.
    pub auto_create_topics_enable: bool,
    /// `socket.request.max.bytes`.
    pub socket_request_max_bytes: i32,
    /// `connections.max.idle.ms`.
    pub connections_max_idle_ms: i64,
    /// `queued.max.request.bytes` (<= 0: unbounded).
    pub queued_max_request_bytes: i64,
    /// `fetch.response.memory.bytes` (<= 0: unbounded).
    pub fetch_response_memory_bytes: i64,
    /// `max.connections`.
    pub max_connections: i32,
    /// `max.connections.per.ip`.
    pub max_connections_per_ip: i32,
    /// `max.connections.per.ip.overrides`, host names resolved to every address they have.
    pub max_connections_per_ip_overrides: Vec<(IpAddr, i32)>,
    /// `quota.window.num`.
    pub quota_window_num: u32,
    /// `quota.window.size.seconds`.
    pub quota_window_size_seconds: u32,
    /// `controller.quota.window.num`.
    pub controller_quota_window_num: u32,
    /// `controller.quota.window.size.seconds`.
    pub controller_quota_window_size_seconds: u32,
    /// `broker.rack`.
    pub broker_rack: Option<String>,
    /// `client.quota.callback.class`: the registered name of a quota callback plug-in, `None`
    /// for Kafka's built-in rules (also for `default`).
    pub client_quota_callback_class: Option<String>,
    /// `authorizer.class.name`, `super.users` and `allow.everyone.if.no.acl.found`; `None`
    /// without an authorizer.
    pub authorizer: Option<gregor_actors::authorizer::AuthorizerSettings>,
    /// `broker.session.timeout.ms`.
    pub broker_session_timeout_ms: i32,
    /// `broker.heartbeat.interval.ms`.
    pub broker_heartbeat_interval_ms: i32,
    /// The group coordinator's settings (`offsets.*`, `group.*`).
    pub groups: gregor_actors::groups::GroupSettings,
    /// `controller.quorum.bootstrap.servers`: `host:port` entries, in order.
    pub controller_quorum_bootstrap_servers: Vec<String>,
    /// `metrics.listener`.
    pub metrics_listener: SocketAddr,
    /// Every key explicitly given, with its value, for plugins and DescribeConfigs.
    pub originals: BTreeMap<String, String>,
}

impl NodeConfig {
    /// What running a node needs beyond a well-formed configuration (Kafka's
    /// `validateQuorumVotersAndQuorumBootstrapServerForKRaft`): a node with only one role must
    /// find its quorum. The combined default may start a cluster of its own, so the README's
    /// one command gives a working node.
    pub fn check_runnable(&self) -> Result<(), ConfigError> {
        let combined = self.has_role(ProcessRole::Broker) && self.has_role(ProcessRole::Controller);
        if !combined && self.controller_quorum_bootstrap_servers.is_empty() {
            return Err(invalid(
                "controller.quorum.bootstrap.servers",
                String::new(),
                &format!(
                    "If using process.roles={}, controller.quorum.bootstrap.servers must contain the set of bootstrap controllers",
                    self.process_roles
                        .iter()
                        .map(|role| match role {
                            ProcessRole::Broker => "broker",
                            ProcessRole::Controller => "controller",
                        })
                        .collect::<Vec<_>>()
                        .join(",")
                ),
            ));
        }
        Ok(())
    }

    /// Whether the process has the role.
    pub fn has_role(&self, role: ProcessRole) -> bool {
        self.process_roles.contains(&role)
    }

    /// Whether the named listener serves the controller.
    pub fn is_controller_listener(&self, name: &str) -> bool {
        self.controller_listener_names.iter().any(|n| n == name)
    }

    /// `log.format` (validated at load).
    pub fn log_format(&self) -> LogFormat {
        self.originals
            .get(LOG_FORMAT)
            .and_then(|text| LogFormat::parse(text).ok())
            .unwrap_or(LogFormat::Text)
    }

    /// Reads a properties file (if any), applies overrides in order, and validates the result.
    pub fn load(file: Option<&Path>, overrides: &[String]) -> Result<Self, ConfigError> {
        let mut given: BTreeMap<String, String> = BTreeMap::new();
        if let Some(path) = file {
            let reader = File::open(path).map_err(|e| ConfigError::File {
                path: path.to_path_buf(),
                reason: e.to_string(),
            })?;
            let properties =
                java_properties::read(BufReader::new(reader)).map_err(|e| ConfigError::File {
                    path: path.to_path_buf(),
                    reason: e.to_string(),
                })?;
            for (key, value) in properties {
                given.insert(key, value);
            }
        }
        for item in overrides {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| ConfigError::BadOverride(item.clone()))?;
            given.insert(key.trim().to_owned(), value.trim().to_owned());
        }
        Self::from_values(given)
    }

    /// Validates explicitly given values; keys not in [`DEFINITIONS`] are kept but not read.
    pub fn from_values(originals: BTreeMap<String, String>) -> Result<Self, ConfigError> {
        check_static_log_defaults(&originals)?;
        let values = Values { given: &originals };
        let node_id = match (values.optional("node.id"), values.optional("broker.id")) {
            (None, Some(_)) => values.int("broker.id", 0, i32::MAX as i64)?,
            (Some(_), Some(broker_id)) => {
                let node_id = values.int("node.id", 0, i32::MAX as i64)?;
                if values.int("broker.id", 0, i32::MAX as i64)? != node_id {
                    return Err(invalid(
                        "broker.id",
                        broker_id.to_owned(),
                        "must equal node.id when both are set",
                    ));
                }
                node_id
            }
            _ => values.int("node.id", 0, i32::MAX as i64)?,
        } as i32;

        let process_roles = parse_roles(&values.list("process.roles")?)?;
        let controller_listener_names: Vec<String> = values
            .list("controller.listener.names")?
            .into_iter()
            .map(|n| n.to_ascii_uppercase())
            .collect();
        let listeners = parse_listeners("listeners", &values.list("listeners")?)?;
        let protocol_map = values.list("listener.security.protocol.map")?;
        let protocols = check_protocol_map(&protocol_map, &listeners)?;
        let sasl_defaults = SaslDefaults {
            enabled_mechanisms: values.raw("sasl.enabled.mechanisms").unwrap_or_default(),
            max_receive_size: values.int("sasl.server.max.receive.size", 1, i32::MAX as i64)?
                as i32,
            failed_authentication_delay_ms: values.int(
                "connection.failed.authentication.delay.ms",
                0,
                i32::MAX as i64,
            )? as u64,
            reauth_ms: values.int("connections.max.reauth.ms", 0, i64::MAX)?,
        };
        let mut listener_security = BTreeMap::new();
        for (name, protocol) in protocols {
            let security = listener_security_of(&name, protocol, values.given, &sasl_defaults)?;
            listener_security.insert(name, security);
        }
        let advertised_listeners = match values.optional("advertised.listeners") {
            Some(_) => {
                let advertised = parse_listeners(
                    "advertised.listeners",
                    &values.list("advertised.listeners")?,
                )?;
                for listener in &advertised {
                    if !listeners.iter().any(|l| l.name == listener.name) {
                        return Err(invalid(
                            "advertised.listeners",
                            listener.to_string(),
                            &format!(
                                "listener {} is not one of the configured listeners",
                                listener.name
                            ),
                        ));
                    }
                }
                advertised
            }
            None => listeners
                .iter()
                .filter(|l| !controller_listener_names.contains(&l.name))
                .cloned()
                .collect(),
        };
        let controller_client = match controller_listener_names.first() {
            Some(name) => client_security(
                name,
                mapped_protocol(&protocol_map, name)?,
                "sasl.mechanism.controller.protocol",
                &values
                    .raw("sasl.mechanism.controller.protocol")
                    .unwrap_or_default(),
                values.given,
            )?,
            None => ClientSecurity::plaintext(),
        };
        if process_roles.contains(&ProcessRole::Broker)
            && advertised_listeners
                .iter()
                .all(|l| controller_listener_names.contains(&l.name))
        {
            return Err(invalid(
                "advertised.listeners",
                values.raw("advertised.listeners").unwrap_or_default(),
                "There must be at least one broker advertised listener. Perhaps all listeners appear in controller.listener.names?",
            ));
        }
        let inter_broker_listener =
            inter_broker_listener(&values, &advertised_listeners, &controller_listener_names)?;
        let inter_broker_client = if process_roles.contains(&ProcessRole::Broker) {
            client_security(
                &inter_broker_listener,
                mapped_protocol(&protocol_map, &inter_broker_listener)?,
                "sasl.mechanism.inter.broker.protocol",
                &values
                    .raw("sasl.mechanism.inter.broker.protocol")
                    .unwrap_or_default(),
                values.given,
            )?
        } else {
            ClientSecurity::plaintext()
        };
        let roles_text = values.raw("process.roles").unwrap_or_default();
        if process_roles == [ProcessRole::Controller] {
            if let Some(listener) = listeners
                .iter()
                .find(|l| !controller_listener_names.contains(&l.name))
            {
                return Err(invalid(
                    "listeners",
                    values.raw("listeners").unwrap_or_default(),
                    &format!(
                        "The listeners config must only contain KRaft controller listeners from controller.listener.names when process.roles=controller ({} is not one)",
                        listener.name
                    ),
                ));
            }
        }
        if process_roles.contains(&ProcessRole::Controller) {
            for name in &controller_listener_names {
                if !listeners.iter().any(|l| &l.name == name) {
                    return Err(invalid(
                        "controller.listener.names",
                        controller_listener_names.join(","),
                        &format!("listener {name} is not defined in listeners"),
                    ));
                }
            }
            if controller_listener_names.is_empty() {
                return Err(invalid(
                    "controller.listener.names",
                    String::new(),
                    "a controller needs at least one controller listener",
                ));
            }
        }
        if process_roles.contains(&ProcessRole::Broker)
            && !listeners
                .iter()
                .any(|l| !controller_listener_names.contains(&l.name))
        {
            return Err(invalid(
                "listeners",
                values.raw("listeners").unwrap_or_default(),
                &format!(
                    "process.roles={roles_text} includes broker, which needs a listener that is not in controller.listener.names"
                ),
            ));
        }

        let log_dirs: Vec<PathBuf> = match (values.optional("log.dirs"), values.optional("log.dir"))
        {
            (None, Some(dir)) => vec![PathBuf::from(dir)],
            _ => values
                .list("log.dirs")?
                .into_iter()
                .map(PathBuf::from)
                .collect(),
        };
        let Some(first_log_dir) = log_dirs.first().cloned() else {
            return Err(invalid(
                "log.dirs",
                String::new(),
                "at least one directory is required",
            ));
        };
        let metadata_log_dir = values
            .optional("metadata.log.dir")
            .map(PathBuf::from)
            .unwrap_or(first_log_dir);

        let num_partitions = values.int("num.partitions", 1, i32::MAX as i64)? as i32;
        let transaction_max_timeout_ms =
            values.int("transaction.max.timeout.ms", 1, i32::MAX as i64)? as i32;
        let default_replication_factor =
            values.int("default.replication.factor", 1, i16::MAX as i64)? as i16;
        let socket_request_max_bytes =
            values.int("socket.request.max.bytes", 1, i32::MAX as i64)? as i32;
        let connections_max_idle_ms = values.int("connections.max.idle.ms", 1, i64::MAX)?;
        let queued_max_request_bytes =
            values.int("queued.max.request.bytes", i64::MIN, i64::MAX)?;
        if queued_max_request_bytes > 0
            && queued_max_request_bytes < i64::from(socket_request_max_bytes)
        {
            return Err(invalid(
                "queued.max.request.bytes",
                queued_max_request_bytes.to_string(),
                "queued.max.request.bytes must be larger or equal to socket.request.max.bytes",
            ));
        }
        let max_connections = values.int("max.connections", 0, i64::from(i32::MAX))? as i32;
        let max_connections_per_ip =
            values.int("max.connections.per.ip", 0, i64::from(i32::MAX))? as i32;
        let max_connections_per_ip_overrides = per_ip_overrides(&values)?;
        if max_connections_per_ip == 0 && max_connections_per_ip_overrides.is_empty() {
            return Err(invalid(
                "max.connections.per.ip",
                "0".to_owned(),
                "max.connections.per.ip can be set to zero only if \
                 max.connections.per.ip.overrides property is set.",
            ));
        }
        // Kafka's quota window configs are `atLeast(1)` ints.
        let quota_window = |key| values.int(key, 1, i32::MAX as i64).map(|v| v as u32);
        let quota_window_num = quota_window("quota.window.num")?;
        let quota_window_size_seconds = quota_window("quota.window.size.seconds")?;
        let controller_quota_window_num = quota_window("controller.quota.window.num")?;
        let controller_quota_window_size_seconds =
            quota_window("controller.quota.window.size.seconds")?;
        LogFormat::parse(&values.raw(LOG_FORMAT).unwrap_or_default())?;
        let metrics_text = values.raw(METRICS_LISTENER).unwrap_or_default();
        let metrics_listener = metrics_text.parse::<SocketAddr>().map_err(|_| {
            invalid(
                METRICS_LISTENER,
                metrics_text.clone(),
                "expected host:port with a numeric IP, e.g. 127.0.0.1:9644",
            )
        })?;
        let (
            log_cleaner_threads,
            log_cleaner_dedupe_buffer_size,
            log_cleaner_io_buffer_load_factor,
        ) = cleaner_settings(&values)?;
        Ok(NodeConfig {
            node_id,
            process_roles,
            listeners,
            advertised_listeners,
            controller_listener_names,
            listener_security,
            controller_client,
            inter_broker_listener,
            inter_broker_client,
            log_dirs,
            metadata_log_dir,
            // Read again by the log manager; checked here so that a bad value stops start-up.
            log_cleaner_enable: values.boolean("log.cleaner.enable")?,
            log_cleaner_backoff_ms: values.int("log.cleaner.backoff.ms", 0, i64::MAX)?,
            log_cleaner_threads,
            log_cleaner_dedupe_buffer_size,
            log_cleaner_io_buffer_load_factor,
            max_incremental_fetch_session_cache_slots: values.int(
                "max.incremental.fetch.session.cache.slots",
                0,
                i64::from(i32::MAX),
            )? as usize,
            num_partitions,
            default_replication_factor,
            transaction_max_timeout_ms,
            replica_lag_time_max_ms: values.int("replica.lag.time.max.ms", 1, i64::MAX)?,
            replica_fetch_wait_max_ms: values.int(
                "replica.fetch.wait.max.ms",
                0,
                i32::MAX as i64,
            )? as i32,
            replica_fetch_max_bytes: values.int("replica.fetch.max.bytes", 0, i32::MAX as i64)?
                as i32,
            replica_fetch_response_max_bytes: values.int(
                "replica.fetch.response.max.bytes",
                0,
                i32::MAX as i64,
            )? as i32,
            replica_fetch_backoff_ms: values.int("replica.fetch.backoff.ms", 0, i32::MAX as i64)?
                as i32,
            delete_topic_enable: values.boolean("delete.topic.enable")?,
            auto_leader_rebalance_enable: values.boolean("auto.leader.rebalance.enable")?,
            leader_imbalance_check_interval_seconds: values.int(
                "leader.imbalance.check.interval.seconds",
                1,
                i64::from(i32::MAX),
            )?,
            unclean_leader_election_enable: values.boolean("unclean.leader.election.enable")?,
            unclean_leader_election_interval_ms: values.int(
                "unclean.leader.election.interval.ms",
                1,
                i64::MAX / 1_000_000,
            )?,
            auto_create_topics_enable: values.boolean("auto.create.topics.enable")?,
            socket_request_max_bytes,
            connections_max_idle_ms,
            queued_max_request_bytes,
            fetch_response_memory_bytes: values.int(
                FETCH_RESPONSE_MEMORY_BYTES,
                i64::MIN,
                i64::MAX,
            )?,
            max_connections,
            max_connections_per_ip,
            max_connections_per_ip_overrides,
            quota_window_num,
            quota_window_size_seconds,
            controller_quota_window_num,
            controller_quota_window_size_seconds,
            broker_rack: values.optional("broker.rack").map(str::to_owned),
            client_quota_callback_class: values
                .optional("client.quota.callback.class")
                .map(str::trim)
                .filter(|name| !name.is_empty() && *name != "default")
                .map(str::to_owned),
            controller_quorum_bootstrap_servers: static_voters_refused(&values)
                .and_then(|()| bootstrap_servers(&values))?,
            authorizer: authorizer_settings(&values)?,
            broker_session_timeout_ms: values.int(
                "broker.session.timeout.ms",
                1,
                i64::from(i32::MAX),
            )? as i32,
            broker_heartbeat_interval_ms: values.int(
                "broker.heartbeat.interval.ms",
                1,
                i64::from(i32::MAX),
            )? as i32,
            groups: group_settings(&values)?,
            metrics_listener,
            originals,
        })
    }
}

/// `log.cleaner.threads`, `log.cleaner.dedupe.buffer.size` and
/// `log.cleaner.io.buffer.load.factor`: each cleaner thread's share of the buffer, filled to the
/// load factor, must hold a key, or compaction would never move on (Kafka's cleaner refuses to
/// start then; its ConfigDef bounds neither key).
fn cleaner_settings(values: &Values<'_>) -> Result<(i64, i64, f64), ConfigError> {
    const BUFFER: &str = "log.cleaner.dedupe.buffer.size";
    let threads = values.int("log.cleaner.threads", 1, 64)?;
    let buffer = values.int(BUFFER, i64::MIN, i64::MAX)?;
    let load_factor = values.double("log.cleaner.io.buffer.load.factor")?;
    let per_thread = u64::try_from(buffer).unwrap_or(0) / threads as u64;
    if gregor_log::cleaner::OffsetMap::new(per_thread, load_factor).capacity() == 0 {
        return Err(invalid(
            BUFFER,
            buffer.to_string(),
            &format!(
                "each of the {threads} cleaner thread(s) gets {per_thread} bytes, which at a load factor of {load_factor} hold no key: raise it, or lower log.cleaner.threads"
            ),
        ));
    }
    Ok((threads, buffer, load_factor))
}

/// The group coordinator's keys, with Kafka's bounds.
fn group_settings(
    values: &Values<'_>,
) -> Result<gregor_actors::groups::GroupSettings, ConfigError> {
    let int = |key, min| values.int(key, min, i64::from(i32::MAX));
    let millis = |ms: i64| std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    consumer_timeouts_agree(values)?;
    Ok(gregor_actors::groups::GroupSettings {
        offsets_topic_partitions: int("offsets.topic.num.partitions", 1)? as i32,
        offsets_topic_replication_factor: values.int(
            "offsets.topic.replication.factor",
            1,
            i64::from(i16::MAX),
        )? as i16,
        offsets_topic_segment_bytes: int("offsets.topic.segment.bytes", 1)? as i32,
        min_session_timeout_ms: int("group.min.session.timeout.ms", 0)? as i32,
        max_session_timeout_ms: int("group.max.session.timeout.ms", 0)? as i32,
        initial_rebalance_delay: millis(int("group.initial.rebalance.delay.ms", 0)?),
        max_size: int("group.max.size", 1)? as usize,
        offset_metadata_max_bytes: int("offset.metadata.max.bytes", 0)? as usize,
        offsets_retention_ms: int("offsets.retention.minutes", 1)? * 60_000,
        offsets_retention_check_interval: millis(values.int(
            "offsets.retention.check.interval.ms",
            1,
            i64::MAX,
        )?),
        offsets_commit_timeout: millis(int("offsets.commit.timeout.ms", 1)?),
        consumer_assignors: consumer_assignors(values)?,
        consumer_max_size: int("group.consumer.max.size", 1)? as usize,
        consumer_session_timeout_ms: int("group.consumer.session.timeout.ms", 1)? as i32,
        consumer_min_session_timeout_ms: int("group.consumer.min.session.timeout.ms", 1)? as i32,
        consumer_max_session_timeout_ms: int("group.consumer.max.session.timeout.ms", 1)? as i32,
        consumer_heartbeat_interval_ms: int("group.consumer.heartbeat.interval.ms", 1)? as i32,
        consumer_min_heartbeat_interval_ms: int("group.consumer.min.heartbeat.interval.ms", 1)?
            as i32,
        consumer_max_heartbeat_interval_ms: int("group.consumer.max.heartbeat.interval.ms", 1)?
            as i32,
        migration_policy: migration_policy(values)?,
    })
}

/// `group.consumer.migration.policy`, case-insensitive as Kafka's `CaseInsensitiveValidString`.
fn migration_policy(
    values: &Values<'_>,
) -> Result<gregor_actors::groups::MigrationPolicy, ConfigError> {
    use gregor_actors::groups::MigrationPolicy;
    const KEY: &str = "group.consumer.migration.policy";
    let text = values.raw(KEY).unwrap_or_default().trim().to_owned();
    MigrationPolicy::parse(&text).ok_or_else(|| {
        invalid(
            KEY,
            text,
            &format!(
                "String must be one of (case insensitive): {}",
                MigrationPolicy::NAMES.join(", ")
            ),
        )
    })
}

/// The `group.consumer.*` session and heartbeat bounds must hold together, as Kafka's
/// `GroupCoordinatorConfig` requires at start-up: a heartbeat interval at or past the session
/// timeout would expire members that heartbeat on time.
fn consumer_timeouts_agree(values: &Values<'_>) -> Result<(), ConfigError> {
    const HEARTBEAT: &str = "group.consumer.heartbeat.interval.ms";
    const MIN_HEARTBEAT: &str = "group.consumer.min.heartbeat.interval.ms";
    const MAX_HEARTBEAT: &str = "group.consumer.max.heartbeat.interval.ms";
    const SESSION: &str = "group.consumer.session.timeout.ms";
    const MIN_SESSION: &str = "group.consumer.min.session.timeout.ms";
    const MAX_SESSION: &str = "group.consumer.max.session.timeout.ms";
    let int = |key| values.int(key, 1, i64::from(i32::MAX));
    let (heartbeat, min_heartbeat, max_heartbeat) =
        (int(HEARTBEAT)?, int(MIN_HEARTBEAT)?, int(MAX_HEARTBEAT)?);
    let (session, min_session, max_session) = (int(SESSION)?, int(MIN_SESSION)?, int(MAX_SESSION)?);
    let at_least = |key: &'static str, value: i64, other: &str, bound: i64| {
        (value < bound).then(|| {
            invalid(
                key,
                value.to_string(),
                &format!("{key} must be greater than or equal to {other}"),
            )
        })
    };
    let at_most = |key: &'static str, value: i64, other: &str, bound: i64| {
        (value > bound).then(|| {
            invalid(
                key,
                value.to_string(),
                &format!("{key} must be less than or equal to {other}"),
            )
        })
    };
    let refused = at_least(MAX_HEARTBEAT, max_heartbeat, MIN_HEARTBEAT, min_heartbeat)
        .or_else(|| at_least(HEARTBEAT, heartbeat, MIN_HEARTBEAT, min_heartbeat))
        .or_else(|| at_most(HEARTBEAT, heartbeat, MAX_HEARTBEAT, max_heartbeat))
        .or_else(|| at_least(MAX_SESSION, max_session, MIN_SESSION, min_session))
        .or_else(|| at_least(SESSION, session, MIN_SESSION, min_session))
        .or_else(|| at_most(SESSION, session, MAX_SESSION, max_session))
        .or_else(|| {
            (heartbeat >= session).then(|| {
                invalid(
                    HEARTBEAT,
                    heartbeat.to_string(),
                    &format!("{HEARTBEAT} must be less than {SESSION}"),
                )
            })
        });
    refused.map_or(Ok(()), Err)
}

/// `group.consumer.assignors`: Kafka's class names or the short names, each one Gregor has.
fn consumer_assignors(values: &Values<'_>) -> Result<Vec<String>, ConfigError> {
    const KEY: &str = "group.consumer.assignors";
    let text = values.raw(KEY).unwrap_or_default();
    let mut out = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let name = match entry {
            "org.apache.kafka.coordinator.group.assignor.UniformAssignor" => "uniform",
            "org.apache.kafka.coordinator.group.assignor.RangeAssignor" => "range",
            other => other,
        };
        if !gregor_actors::groups::assignor::ASSIGNORS.contains(&name) {
            return Err(invalid(
                KEY,
                text.clone(),
                &format!("unknown assignor '{entry}' (uniform, range)"),
            ));
        }
        out.push(name.to_owned());
    }
    if out.is_empty() {
        return Err(invalid(KEY, text, "at least one assignor is needed"));
    }
    Ok(out)
}

/// `controller.quorum.voters` names a static quorum, which Gregor has not: its quorum is
/// dynamic (KIP-853). Ignoring the key would make each node of a static-quorum cluster form a
/// cluster of its own, so it is refused with the way to express the same cluster.
fn static_voters_refused(values: &Values<'_>) -> Result<(), ConfigError> {
    const KEY: &str = "controller.quorum.voters";
    match values.optional(KEY).map(str::trim).filter(|v| !v.is_empty()) {
        None => Ok(()),
        Some(voters) => Err(invalid(
            KEY,
            voters.to_owned(),
            "Gregor's controller quorum is dynamic (KIP-853) and has no static voters: set controller.quorum.bootstrap.servers to the controllers' host:port list instead, and format the initial controllers with `gregor storage format --initial-controllers id@host:port:directoryid,...` (or --standalone)",
        )),
    }
}

/// Parses `controller.quorum.bootstrap.servers` (`host:port,...`); each port must be a number.
fn bootstrap_servers(values: &Values<'_>) -> Result<Vec<String>, ConfigError> {
    const KEY: &str = "controller.quorum.bootstrap.servers";
    let text = values.optional(KEY).unwrap_or("");
    let mut servers = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let valid = entry
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
        if !valid {
            return Err(invalid(
                KEY,
                text.to_owned(),
                &format!("'{entry}' is not host:port"),
            ));
        }
        servers.push(entry.to_owned());
    }
    Ok(servers)
}

/// Parses `max.connections.per.ip.overrides` (`host:count,...`), resolving each host as Kafka
/// does when the config is read.
fn per_ip_overrides(values: &Values<'_>) -> Result<Vec<(IpAddr, i32)>, ConfigError> {
    const KEY: &str = "max.connections.per.ip.overrides";
    let text = values.optional(KEY).unwrap_or("");
    let mut overrides = Vec::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = |reason: String| invalid(KEY, text.to_owned(), &reason);
        let (host, count) = entry
            .rsplit_once(':')
            .ok_or_else(|| bad(format!("'{entry}' is not host:count")))?;
        let count: i32 = count
            .trim()
            .parse()
            .ok()
            .filter(|c| *c >= 0)
            .ok_or_else(|| bad(format!("'{count}' in '{entry}' is not a connection count")))?;
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => (host, 0)
                .to_socket_addrs()
                .map_err(|e| bad(format!("cannot resolve '{host}': {e}")))?
                .map(|a| a.ip())
                .collect(),
        };
        overrides.extend(addresses.into_iter().map(|ip| (ip, count)));
    }
    Ok(overrides)
}

fn invalid(key: &'static str, value: String, reason: &str) -> ConfigError {
    ConfigError::InvalidValue {
        key,
        value,
        reason: reason.to_owned(),
    }
}

/// Looks values up by key, falling back to the definition's default.
struct Values<'a> {
    given: &'a BTreeMap<String, String>,
}

impl Values<'_> {
    fn definition(key: &'static str) -> Option<&'static ConfigDef> {
        DEFINITIONS.iter().find(|d| d.name == key)
    }

    fn optional(&self, key: &'static str) -> Option<&str> {
        self.given.get(key).map(String::as_str)
    }

    fn raw(&self, key: &'static str) -> Option<String> {
        self.given
            .get(key)
            .cloned()
            .or_else(|| Self::definition(key)?.default.map(str::to_owned))
    }

    fn int(&self, key: &'static str, min: i64, max: i64) -> Result<i64, ConfigError> {
        let text = self.raw(key).unwrap_or_default();
        let kind = Self::definition(key).map_or(ConfigType::Long, |d| d.kind);
        let type_name = match kind {
            ConfigType::Short => "SHORT",
            ConfigType::Int => "INT",
            _ => "LONG",
        };
        let value: i64 = text.trim().parse().map_err(|_| {
            invalid(
                key,
                text.clone(),
                &format!("Not a number of type {type_name}"),
            )
        })?;
        if value < min {
            return Err(invalid(key, text, &format!("Value must be at least {min}")));
        }
        if value > max {
            return Err(invalid(
                key,
                text,
                &format!("Value must be no more than {max}"),
            ));
        }
        Ok(value)
    }

    fn double(&self, key: &'static str) -> Result<f64, ConfigError> {
        let text = self.raw(key).unwrap_or_default();
        text.trim()
            .parse()
            .map_err(|_| invalid(key, text.clone(), "Not a number of type DOUBLE"))
    }

    fn boolean(&self, key: &'static str) -> Result<bool, ConfigError> {
        let text = self.raw(key).unwrap_or_default();
        match text.trim().to_ascii_lowercase().as_str() {
            "true" => Ok(true),
            "false" => Ok(false),
            _ => Err(invalid(
                key,
                text,
                "Expected value to be either true or false",
            )),
        }
    }

    fn list(&self, key: &'static str) -> Result<Vec<String>, ConfigError> {
        Ok(self
            .raw(key)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect())
    }
}

fn authorizer_settings(
    values: &Values<'_>,
) -> Result<Option<gregor_actors::authorizer::AuthorizerSettings>, ConfigError> {
    use gregor_actors::authorizer::{AuthorizerSettings, AUTHORIZER_CLASS_NAMES};
    let class = values.raw("authorizer.class.name").unwrap_or_default();
    let allow_everyone_if_no_acl_found = values.boolean("allow.everyone.if.no.acl.found")?;
    let class_name = class.trim();
    if class_name.is_empty() {
        return Ok(None);
    }
    if !AUTHORIZER_CLASS_NAMES.contains(&class_name) {
        return Err(invalid(
            "authorizer.class.name",
            class.clone(),
            &format!(
                "Class {class_name} cannot be found; the only authorizer is {}",
                AUTHORIZER_CLASS_NAMES[0]
            ),
        ));
    }
    Ok(Some(AuthorizerSettings {
        super_users: AuthorizerSettings::parse_super_users(
            &values.raw("super.users").unwrap_or_default(),
        ),
        allow_everyone_if_no_acl_found,
    }))
}

fn parse_roles(items: &[String]) -> Result<Vec<ProcessRole>, ConfigError> {
    let text = items.join(",");
    let mut roles = Vec::new();
    for item in items {
        let role = match item.to_ascii_lowercase().as_str() {
            "broker" => ProcessRole::Broker,
            "controller" => ProcessRole::Controller,
            _ => {
                return Err(invalid(
                    "process.roles",
                    text,
                    &format!("unknown role '{item}': expected broker and/or controller"),
                ))
            }
        };
        if roles.contains(&role) {
            return Err(invalid(
                "process.roles",
                text,
                &format!("duplicate role '{item}'"),
            ));
        }
        roles.push(role);
    }
    if roles.is_empty() {
        return Err(invalid(
            "process.roles",
            text,
            "at least one role is required",
        ));
    }
    Ok(roles)
}

fn parse_listeners(key: &'static str, items: &[String]) -> Result<Vec<ListenerSpec>, ConfigError> {
    let mut listeners: Vec<ListenerSpec> = Vec::new();
    for item in items {
        let bad = |reason: &str| invalid(key, items.join(","), &format!("'{item}': {reason}"));
        let (name, address) = item
            .split_once("://")
            .ok_or_else(|| bad("expected NAME://host:port"))?;
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| bad("expected NAME://host:port"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port: u16 = port
            .parse()
            .map_err(|_| bad("the port must be a number from 0 to 65535"))?;
        let name = name.to_ascii_uppercase();
        if name.is_empty() {
            return Err(bad("the listener name is empty"));
        }
        if listeners.iter().any(|l| l.name == name) {
            return Err(bad(&format!("listener name {name} appears more than once")));
        }
        if port != 0 && listeners.iter().any(|l| l.port == port && l.host == host) {
            return Err(bad(&format!("port {port} is used by two listeners")));
        }
        listeners.push(ListenerSpec {
            name,
            host: host.to_owned(),
            port,
        });
    }
    if listeners.is_empty() {
        return Err(invalid(
            key,
            String::new(),
            "at least one listener is required",
        ));
    }
    Ok(listeners)
}

/// The protocol of each listener.
fn check_protocol_map(
    items: &[String],
    listeners: &[ListenerSpec],
) -> Result<Vec<(String, SecurityProtocol)>, ConfigError> {
    // Mappings of listeners that are not configured are harmless (Kafka's default maps SSL and
    // SASL names too); only the protocols of listeners Gregor serves are checked.
    listeners
        .iter()
        .map(|listener| {
            Ok((
                listener.name.clone(),
                mapped_protocol(items, &listener.name)?,
            ))
        })
        .collect()
}

/// The protocol `listener.security.protocol.map` gives listener `name` (Kafka's default map
/// names each protocol after itself).
fn mapped_protocol(items: &[String], name: &str) -> Result<SecurityProtocol, ConfigError> {
    let key = "listener.security.protocol.map";
    let mut given = None;
    for item in items {
        let (listener, protocol) = item.split_once(':').ok_or_else(|| {
            invalid(
                key,
                items.join(","),
                &format!("'{item}': expected NAME:PROTOCOL"),
            )
        })?;
        if listener.eq_ignore_ascii_case(name) && given.is_none() {
            given = Some(protocol.to_ascii_uppercase());
        }
    }
    let text = match given {
        Some(text) => text,
        None if SecurityProtocol::parse(name).is_some() => name.to_owned(),
        None => {
            return Err(invalid(
                key,
                items.join(","),
                &format!("no security protocol is defined for listener {name}"),
            ))
        }
    };
    SecurityProtocol::parse(&text).ok_or_else(|| {
        invalid(
            key,
            items.join(","),
            &format!("listener {name} uses unknown security protocol {text}"),
        )
    })
}

/// The listener brokers fetch from each other over: `inter.broker.listener.name`, else the
/// listener named by `security.inter.broker.protocol`, else the first advertised listener that
/// is not a controller listener (Kafka's default would be PLAINTEXT; Gregor keeps a node with
/// differently named listeners working).
fn inter_broker_listener(
    values: &Values<'_>,
    advertised: &[ListenerSpec],
    controller_listener_names: &[String],
) -> Result<String, ConfigError> {
    let named = |key: &'static str| {
        values
            .optional(key)
            .map(|name| name.trim().to_ascii_uppercase())
            .filter(|name| !name.is_empty())
    };
    if values.optional("inter.broker.listener.name").is_some()
        && values.optional("security.inter.broker.protocol").is_some()
    {
        return Err(invalid(
            "security.inter.broker.protocol",
            values.raw("security.inter.broker.protocol").unwrap_or_default(),
            "Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.",
        ));
    }
    let Some(name) =
        named("inter.broker.listener.name").or_else(|| named("security.inter.broker.protocol"))
    else {
        return Ok(advertised
            .iter()
            .find(|l| !controller_listener_names.contains(&l.name))
            .map(|l| l.name.clone())
            .unwrap_or_default());
    };
    if !advertised.iter().any(|l| l.name == name) {
        return Err(invalid(
            "inter.broker.listener.name",
            name.clone(),
            &format!("the inter-broker listener {name} must be one of the advertised listeners"),
        ));
    }
    if controller_listener_names.contains(&name) {
        return Err(invalid(
            "inter.broker.listener.name",
            name.clone(),
            "the inter-broker listener cannot be a controller listener",
        ));
    }
    Ok(name)
}

/// The broker-level defaults of topic configs (`log.segment.bytes`, `log.retention.ms`, ...)
/// given statically are this broker's log defaults: a bad value stops start-up, as in Kafka.
fn check_static_log_defaults(originals: &BTreeMap<String, String>) -> Result<(), ConfigError> {
    use gregor_actors::controller::logic::configs::broker::{
        broker_config, unit_synonym, unit_synonym_ms,
    };

    use gregor_actors::controller::logic::topic_configs::{
        check_value, parse_value, ConfigError as TopicConfigError,
    };
    for (key, raw) in originals {
        if let Some(unit) = unit_synonym(key) {
            if let Some(Err(message)) = unit_synonym_ms(unit.name, raw) {
                // The message names the key and value; ConfigError adds them itself.
                let reason = message
                    .split_once(": ")
                    .map_or(message.clone(), |(_, reason)| reason.to_owned());
                return Err(ConfigError::InvalidValue {
                    key: unit.name,
                    value: raw.clone(),
                    reason,
                });
            }
        }
        let Some(def) = broker_config(key) else {
            continue;
        };
        parse_value(&def, raw)
            .and_then(|value| check_value(&def, &value))
            .map_err(|e| ConfigError::InvalidValue {
                key: def.name,
                value: raw.clone(),
                reason: match e {
                    TopicConfigError::InvalidValue { reason, .. } => reason,
                    other => other.to_string(),
                },
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(overrides: &[&str]) -> Result<NodeConfig, ConfigError> {
        let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
        NodeConfig::load(None, &overrides)
    }

    #[test]
    fn defaults_are_kafkas() -> Result<(), ConfigError> {
        let config = load(&[])?;
        assert_eq!(config.node_id, 1);
        assert_eq!(
            config.process_roles,
            vec![ProcessRole::Broker, ProcessRole::Controller]
        );
        assert_eq!(config.listeners.len(), 2);
        assert_eq!(
            config.listeners[0].to_string(),
            "PLAINTEXT://127.0.0.1:9092"
        );
        assert_eq!(
            config.listeners[1].to_string(),
            "CONTROLLER://127.0.0.1:9093"
        );
        assert_eq!(config.advertised_listeners.len(), 1);
        assert_eq!(
            (
                config.log_cleaner_dedupe_buffer_size,
                config.log_cleaner_io_buffer_load_factor
            ),
            (134_217_728, 0.9)
        );
        assert_eq!(config.advertised_listeners[0].name, "PLAINTEXT");
        assert_eq!(config.log_dirs, vec![PathBuf::from("./gregor-data")]);
        assert_eq!(config.metadata_log_dir, PathBuf::from("./gregor-data"));
        assert_eq!(config.num_partitions, 1);
        assert_eq!(config.default_replication_factor, 1);
        assert!(config.delete_topic_enable);
        assert!(config.auto_create_topics_enable);
        assert_eq!(config.socket_request_max_bytes, 104_857_600);
        assert_eq!(config.connections_max_idle_ms, 600_000);
        assert_eq!(
            (
                config.quota_window_num,
                config.quota_window_size_seconds,
                config.controller_quota_window_num,
                config.controller_quota_window_size_seconds
            ),
            (11, 1, 11, 1)
        );
        assert_eq!(config.metrics_listener.to_string(), "127.0.0.1:9644");
        assert_eq!(config.max_incremental_fetch_session_cache_slots, 1000);
        Ok(())
    }

    #[test]
    fn the_authorizer_is_kafkas_standard_one_or_none() -> Result<(), ConfigError> {
        assert!(load(&[])?.authorizer.is_none());
        let config = load(&[
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin; User:broker ;",
            "allow.everyone.if.no.acl.found=true",
        ])?;
        let settings = config
            .authorizer
            .ok_or_else(|| invalid("authorizer.class.name", String::new(), "no authorizer"))?;
        let mut super_users: Vec<&str> = settings.super_users.iter().map(String::as_str).collect();
        super_users.sort_unstable();
        assert_eq!(super_users, vec!["User:admin", "User:broker"]);
        assert!(settings.allow_everyone_if_no_acl_found);
        assert!(load(&["authorizer.class.name=StandardAuthorizer"])?
            .authorizer
            .is_some_and(|a| !a.allow_everyone_if_no_acl_found && a.super_users.is_empty()));
        let error = load(&["authorizer.class.name=kafka.security.authorizer.AclAuthorizer"])
            .map(|_| ())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains("Class kafka.security.authorizer.AclAuthorizer cannot be found"),
            "{error}"
        );
        Ok(())
    }

    #[test]
    fn overrides_apply_in_order() -> Result<(), ConfigError> {
        let config = load(&["num.partitions=3", "num.partitions=5", "node.id=7"])?;
        assert_eq!(config.num_partitions, 5);
        assert_eq!(config.node_id, 7);
        Ok(())
    }

    #[test]
    fn unknown_keys_are_kept_not_refused() -> Result<(), ConfigError> {
        let config = load(&["num.partitons=3", "num.io.threads=8"])?;
        assert_eq!(config.num_partitions, 1);
        assert_eq!(config.originals["num.partitons"], "3");
        assert_eq!(config.originals["num.io.threads"], "8");
        Ok(())
    }

    #[test]
    fn protocol_map_may_name_listeners_that_are_not_configured() {
        let kafka_default =
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,\
                             SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL";
        assert!(load(&[kafka_default]).is_ok());
        let error = load(&["listener.security.protocol.map=PLAINTEXT:SSL,CONTROLLER:PLAINTEXT"])
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("listener PLAINTEXT uses SSL and needs a PEM keystore"),
            "{error}"
        );
    }

    #[test]
    fn sasl_listeners_get_their_security() -> Result<(), ConfigError> {
        let sasl = [
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "sasl.enabled.mechanisms=SCRAM-SHA-256",
        ];
        let config = load(&sasl)?;
        let protocol = |name: &str| config.listener_security.get(name).map(|s| s.protocol);
        assert_eq!(protocol("PLAINTEXT"), Some(SecurityProtocol::Plaintext));
        assert_eq!(
            protocol("SASL_PLAINTEXT"),
            Some(SecurityProtocol::SaslPlaintext)
        );
        assert_eq!(protocol("CONTROLLER"), Some(SecurityProtocol::Plaintext));
        let error = |overrides: &[&str]| load(overrides).err().map(|e| e.to_string());
        let controller_sasl =
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:SASL_PLAINTEXT";
        assert!(
            error(&[controller_sasl, "sasl.enabled.mechanisms=SCRAM-SHA-512"])
                .is_some_and(|e| e.contains("sasl.mechanism.controller.protocol"))
        );
        Ok(())
    }

    #[test]
    fn peers_authenticate_with_the_configured_mechanism_and_jaas_entry() -> Result<(), ConfigError>
    {
        let plain_jaas = "listener.name.controller.plain.sasl.jaas.config=\
            org.apache.kafka.common.security.plain.PlainLoginModule required \
            username=\"ctl\" password=\"ctl-secret\" user_ctl=\"ctl-secret\";";
        let scram_jaas = "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=\
            org.apache.kafka.common.security.scram.ScramLoginModule required \
            username=\"broker\" password=\"b-secret\";";
        let secure = [
            "listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,\
             CONTROLLER:SASL_PLAINTEXT",
            "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
            "listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-512",
            "sasl.mechanism.controller.protocol=PLAIN",
            "inter.broker.listener.name=SASL_PLAINTEXT",
            "sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
            plain_jaas,
            scram_jaas,
        ];
        let config = load(&secure)?;
        let controller = &config.controller_client;
        assert_eq!(
            (controller.listener.as_str(), controller.protocol),
            ("CONTROLLER", SecurityProtocol::SaslPlaintext)
        );
        let sasl = controller
            .sasl
            .as_ref()
            .map(|s| (s.mechanism, s.username.as_str(), s.password.as_str()));
        assert_eq!(sasl, Some((SaslMechanism::Plain, "ctl", "ctl-secret")));
        assert!(!format!("{controller:?}").contains("ctl-secret"));
        assert_eq!(config.inter_broker_listener, "SASL_PLAINTEXT");
        let broker = config
            .inter_broker_client
            .sasl
            .as_ref()
            .map(|s| (s.mechanism.name(), s.username.as_str()));
        assert_eq!(broker, Some(("SCRAM-SHA-512", "broker")));

        let error = |overrides: &[&str]| {
            load(overrides)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default()
        };
        // No JAAS entry for the chosen mechanism.
        let missing = error(&secure[..secure.len() - 1]);
        assert!(
            missing.contains("listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config"),
            "{missing}"
        );
        // A password never appears in an error.
        let mut wrong_module = secure.to_vec();
        let bad = scram_jaas.replace("scram.ScramLoginModule", "plain.PlainLoginModule");
        wrong_module.push(&bad);
        let refused = error(&wrong_module);
        assert!(
            refused.contains("expected org.apache.kafka.common.security.scram.ScramLoginModule"),
            "{refused}"
        );
        assert!(!refused.contains("b-secret"), "{refused}");
        let mut both = secure.to_vec();
        both.push("security.inter.broker.protocol=SASL_PLAINTEXT");
        assert!(error(&both).contains("Only one of inter.broker.listener.name"));
        // A listener that is not advertised cannot be the inter-broker one.
        let mut unknown = secure.to_vec();
        unknown.push("inter.broker.listener.name=NOPE");
        assert!(error(&unknown).contains("must be one of the advertised listeners"));
        // Without either key, the first advertised non-controller listener, as before.
        assert_eq!(load(&[])?.inter_broker_listener, "PLAINTEXT");
        assert!(error(&["listeners=PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"])
            .contains("SASL mechanism GSSAPI is not supported"));
        assert!(error(&[
            "listeners=PLAINTEXT://127.0.0.1:0,X://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,X:TLS",
        ])
        .contains("listener X uses unknown security protocol TLS"));
        Ok(())
    }

    #[test]
    fn log_format_is_text_or_json() -> Result<(), ConfigError> {
        assert_eq!(load(&[])?.log_format(), LogFormat::Text);
        assert_eq!(load(&["log.format=JSON"])?.log_format(), LogFormat::Json);
        assert!(load(&["log.format=xml"]).is_err());
        Ok(())
    }

    #[test]
    fn migration_policy_is_case_insensitive_and_bidirectional_by_default() {
        use gregor_actors::groups::MigrationPolicy;
        let policy = |o: &[&str]| load(o).map(|c| c.groups.migration_policy).ok();
        assert_eq!(policy(&[]), Some(MigrationPolicy::Bidirectional));
        assert_eq!(
            policy(&["group.consumer.migration.policy=UPGRADE"]),
            Some(MigrationPolicy::Upgrade)
        );
        assert_eq!(
            policy(&["group.consumer.migration.policy=Disabled"]),
            Some(MigrationPolicy::Disabled)
        );
    }

    #[test]
    fn bad_values_use_kafkas_wording() {
        let message = |o: &str| load(&[o]).map(|_| ()).unwrap_err().to_string();
        assert_eq!(
            message("num.partitions=abc"),
            "Invalid value abc for configuration num.partitions: Not a number of type INT"
        );
        assert_eq!(
            message("num.partitions=0"),
            "Invalid value 0 for configuration num.partitions: Value must be at least 1"
        );
        assert_eq!(
            message("delete.topic.enable=yes"),
            "Invalid value yes for configuration delete.topic.enable: Expected value to be either true or false"
        );
        assert_eq!(
            message("socket.request.max.bytes=0"),
            "Invalid value 0 for configuration socket.request.max.bytes: Value must be at least 1"
        );
        assert_eq!(
            message("controller.quota.window.num=0"),
            "Invalid value 0 for configuration controller.quota.window.num: Value must be at least 1"
        );
        assert_eq!(
            message("group.consumer.migration.policy=sideways"),
            "Invalid value sideways for configuration group.consumer.migration.policy: String must be one of (case insensitive): bidirectional, upgrade, downgrade, disabled"
        );
        assert_eq!(
            message("log.cleaner.dedupe.buffer.size=40"),
            "Invalid value 40 for configuration log.cleaner.dedupe.buffer.size: each of the 1 cleaner thread(s) gets 40 bytes, which at a load factor of 0.9 hold no key: raise it, or lower log.cleaner.threads"
        );
        assert!(load(&["log.cleaner.io.buffer.load.factor=1.5"]).is_ok());
        assert!(message("log.cleaner.io.buffer.load.factor=0").contains("hold no key"));
        assert_eq!(
            message("log.cleaner.io.buffer.load.factor=full"),
            "Invalid value full for configuration log.cleaner.io.buffer.load.factor: Not a number of type DOUBLE"
        );
        assert!(message("listeners=PLAINTEXT://127.0.0.1:99999").contains("listeners"));
        assert!(message("metrics.listener=nowhere").contains("metrics.listener"));
        assert!(message("process.roles=broker,zookeeper").contains("process.roles"));
    }

    #[test]
    fn connection_limits_are_kafkas() -> Result<(), ConfigError> {
        let config = load(&[])?;
        assert_eq!(
            (
                config.queued_max_request_bytes,
                config.max_connections,
                config.max_connections_per_ip,
                config.max_connections_per_ip_overrides.len()
            ),
            (-1, i32::MAX, i32::MAX, 0)
        );
        let config = load(&[
            "max.connections.per.ip=0",
            "max.connections.per.ip.overrides=127.0.0.1:5, [::1]:2 ,localhost:3",
            "queued.max.request.bytes=104857600",
        ])?;
        assert_eq!(config.max_connections_per_ip, 0);
        assert_eq!(config.queued_max_request_bytes, 104_857_600);
        let overrides = &config.max_connections_per_ip_overrides;
        assert_eq!(
            overrides[..2],
            [
                (IpAddr::from([127, 0, 0, 1]), 5),
                (IpAddr::from(std::net::Ipv6Addr::LOCALHOST), 2)
            ]
        );
        assert!(overrides[2..]
            .iter()
            .all(|(ip, n)| ip.is_loopback() && *n == 3));

        let message = |o: &[&str]| load(o).map(|_| ()).unwrap_err().to_string();
        assert_eq!(
            message(&["queued.max.request.bytes=1000"]),
            "Invalid value 1000 for configuration queued.max.request.bytes: \
             queued.max.request.bytes must be larger or equal to socket.request.max.bytes"
        );
        assert_eq!(
            message(&["max.connections.per.ip=0"]),
            "Invalid value 0 for configuration max.connections.per.ip: max.connections.per.ip \
             can be set to zero only if max.connections.per.ip.overrides property is set."
        );
        assert!(message(&["max.connections.per.ip.overrides=127.0.0.1"]).contains("host:count"));
        assert!(message(&["max.connections.per.ip.overrides=127.0.0.1:x"])
            .contains("not a connection count"));
        assert!(message(&["max.connections=-1"]).contains("Value must be at least 0"));
        Ok(())
    }

    /// Kafka's `GroupCoordinatorConfigTest` cases for the consumer group's session and
    /// heartbeat bounds, and each other bound Kafka requires.
    #[test]
    fn consumer_group_timeouts_must_agree() {
        let message = |o: &[&str]| load(o).map(|_| ()).unwrap_err().to_string();
        assert_eq!(
            message(&[
                "group.consumer.min.heartbeat.interval.ms=45000",
                "group.consumer.max.heartbeat.interval.ms=60000",
                "group.consumer.heartbeat.interval.ms=50000",
                "group.consumer.session.timeout.ms=50000",
            ]),
            "Invalid value 50000 for configuration group.consumer.heartbeat.interval.ms: \
             group.consumer.heartbeat.interval.ms must be less than \
             group.consumer.session.timeout.ms"
        );
        let cases: [(&[&str], &str); 5] = [
            (
                &["group.consumer.max.heartbeat.interval.ms=1000"],
                "group.consumer.max.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms",
            ),
            (
                &["group.consumer.heartbeat.interval.ms=15001"],
                "group.consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms",
            ),
            (
                &["group.consumer.min.session.timeout.ms=70000"],
                "group.consumer.max.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
            ),
            (
                &["group.consumer.session.timeout.ms=30000"],
                "group.consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms",
            ),
            (
                &["group.consumer.session.timeout.ms=70000"],
                "group.consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms",
            ),
        ];
        for (overrides, expected) in cases {
            assert!(message(overrides).ends_with(expected), "{overrides:?}");
        }
        assert!(load(&[
            "group.consumer.heartbeat.interval.ms=2000",
            "group.consumer.min.heartbeat.interval.ms=1000",
            "group.consumer.session.timeout.ms=6000",
            "group.consumer.min.session.timeout.ms=3000",
        ])
        .is_ok());
    }

    #[test]
    fn controller_listener_must_exist() {
        let error = load(&["listeners=PLAINTEXT://127.0.0.1:0"])
            .map(|_| ())
            .unwrap_err()
            .to_string();
        assert!(error.contains("controller.listener.names"), "{error}");
        let broker_only = load(&["process.roles=broker", "listeners=PLAINTEXT://127.0.0.1:0"]);
        assert!(broker_only.is_ok());
    }

    /// Kafka's `KafkaConfig.validateValues` role rules: a node with one role needs its quorum,
    /// a controller-only node serves only controller listeners, a broker advertises a broker
    /// listener; and a static quorum, which Gregor has not, is refused rather than ignored.
    #[test]
    fn roles_need_their_quorum_and_listeners() {
        let message = |o: &[&str]| load(o).map(|_| ()).unwrap_err().to_string();
        let runnable = |o: &[&str]| {
            load(o)
                .and_then(|config| config.check_runnable())
                .map_err(|e| e.to_string())
        };
        let broker_only = runnable(&["process.roles=broker", "listeners=PLAINTEXT://127.0.0.1:0"]);
        assert_eq!(
            broker_only,
            Err(
                "Invalid value  for configuration controller.quorum.bootstrap.servers: If using \
                 process.roles=broker, controller.quorum.bootstrap.servers must contain the set \
                 of bootstrap controllers"
                    .to_owned()
            )
        );
        assert!(runnable(&[
            "process.roles=broker",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "controller.quorum.bootstrap.servers=127.0.0.1:9093",
        ])
        .is_ok());
        let controller_only = runnable(&[
            "process.roles=controller",
            "listeners=CONTROLLER://127.0.0.1:0",
        ]);
        assert!(
            controller_only
                .as_ref()
                .is_err_and(|e| e.contains("process.roles=controller, controller.quorum")),
            "{controller_only:?}"
        );
        assert!(runnable(&[]).is_ok(), "the combined default starts alone");
        assert!(message(&["process.roles=controller"]).ends_with(
            "The listeners config must only contain KRaft controller listeners from \
             controller.listener.names when process.roles=controller (PLAINTEXT is not one)"
        ));
        assert!(
            message(&["advertised.listeners=CONTROLLER://127.0.0.1:1234"]).ends_with(
                "There must be at least one broker advertised listener. Perhaps all listeners \
             appear in controller.listener.names?"
            )
        );
        let voters = message(&["controller.quorum.voters=1@127.0.0.1:9093"]);
        assert!(
            voters.starts_with(
                "Invalid value 1@127.0.0.1:9093 for configuration controller.quorum.voters: \
                 Gregor's controller quorum is dynamic"
            ) && voters.contains("controller.quorum.bootstrap.servers"),
            "{voters}"
        );
    }

    #[test]
    fn properties_file_is_read_and_overridden() -> Result<(), Box<dyn std::error::Error>> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("server.properties");
        std::fs::write(
            &path,
            "# comment\nnode.id=4\nnum.partitions = 2\nlog.dirs=/tmp/a,/tmp/b\n",
        )?;
        let config = NodeConfig::load(Some(&path), &["num.partitions=9".to_owned()])?;
        assert_eq!(config.node_id, 4);
        assert_eq!(config.num_partitions, 9);
        assert_eq!(
            config.log_dirs,
            vec![PathBuf::from("/tmp/a"), PathBuf::from("/tmp/b")]
        );
        assert_eq!(config.metadata_log_dir, PathBuf::from("/tmp/a"));
        Ok(())
    }

    #[test]
    fn quorum_bootstrap_servers_are_host_port_pairs() -> Result<(), ConfigError> {
        let config = NodeConfig::load(
            None,
            &["controller.quorum.bootstrap.servers=a:1, b:2".to_owned()],
        )?;
        assert_eq!(
            config.controller_quorum_bootstrap_servers,
            vec!["a:1", "b:2"]
        );
        assert_eq!(config.broker_session_timeout_ms, 9000);
        assert_eq!(config.broker_heartbeat_interval_ms, 2000);
        let error = NodeConfig::load(None, &["controller.quorum.bootstrap.servers=a".to_owned()])
            .map(|_| ())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            error.contains("controller.quorum.bootstrap.servers"),
            "{error}"
        );
        Ok(())
    }

    #[test]
    fn static_log_defaults_are_validated() {
        let with = |k: &str, v: &str| {
            let mut originals = BTreeMap::new();
            originals.insert(k.to_owned(), v.to_owned());
            NodeConfig::from_values(originals)
        };
        assert!(with("log.segment.bytes", "1048576").is_ok());
        let error = with("log.segment.bytes", "10").err().map(|e| e.to_string());
        assert_eq!(
            error
                .as_deref()
                .map(|e| e.starts_with("Invalid value 10 for configuration log.segment.bytes")),
            Some(true),
            "{error:?}"
        );
        assert!(with("log.retention.ms", "soon").is_err());
        assert!(with("log.retention.hours", "2").is_ok());
        assert_eq!(
            with("log.retention.hours", "soon")
                .err()
                .map(|e| e.to_string()),
            Some(
                "Invalid value soon for configuration log.retention.hours: Not a number of type INT"
                    .to_owned()
            )
        );
        assert_eq!(
            with("log.roll.hours", "0").err().map(|e| e.to_string()),
            Some(
                "Invalid value 0 for configuration log.roll.hours: Value must be at least 1"
                    .to_owned()
            )
        );
    }
}
