//! Kafka's broker and controller configuration names, and what start-up does with the keys it
//! is given: a key Gregor implements takes effect (see [`DEFINITIONS`]); a Kafka key Gregor does
//! not implement is accepted and listed in one warning; any other key is warned about with the
//! nearest known name, and start-up goes on, as Kafka's "supplied but are not used yet" does.

use std::collections::BTreeMap;

use crate::config::{NodeConfig, DEFINITIONS};

/// Every name in Kafka's broker/controller `ConfigDef` (AbstractKafkaConfig.CONFIG_DEF: server,
/// KRaft, socket server, replication, group and share coordinators, log and cleaner, remote log,
/// transaction, quorum, metric, quota, security, delegation-token and password-encoder configs,
/// with the `log.*` synonyms of topic configs), extracted from Kafka's source (trunk of late 2024)
/// plus the streams-group, share-session and OAuth keys 4.1 added and the two keys Kafka's
/// `StandardAuthorizer` reads itself (`super.users`, `allow.everyone.if.no.acl.found`); sorted, so
/// that lookups are binary searches. The ZooKeeper keys Kafka 4 removed are not in it.
pub const KAFKA_BROKER_KEYS: &[&str] = &[
    "advertised.listeners",
    "allow.everyone.if.no.acl.found",
    "alter.config.policy.class.name",
    "alter.log.dirs.replication.quota.window.num",
    "alter.log.dirs.replication.quota.window.size.seconds",
    "authorizer.class.name",
    "auto.create.topics.enable",
    "auto.leader.rebalance.enable",
    "background.threads",
    "broker.heartbeat.interval.ms",
    "broker.id",
    "broker.id.generation.enable",
    "broker.rack",
    "broker.session.timeout.ms",
    "client.quota.callback.class",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.type",
    "compression.zstd.level",
    "connection.failed.authentication.delay.ms",
    "connections.max.idle.ms",
    "connections.max.reauth.ms",
    "control.plane.listener.name",
    "controlled.shutdown.enable",
    "controlled.shutdown.max.retries",
    "controlled.shutdown.retry.backoff.ms",
    "controller.listener.names",
    "controller.quorum.append.linger.ms",
    "controller.quorum.bootstrap.servers",
    "controller.quorum.election.backoff.max.ms",
    "controller.quorum.election.timeout.ms",
    "controller.quorum.fetch.timeout.ms",
    "controller.quorum.request.timeout.ms",
    "controller.quorum.retry.backoff.ms",
    "controller.quorum.voters",
    "controller.quota.window.num",
    "controller.quota.window.size.seconds",
    "controller.socket.timeout.ms",
    "create.topic.policy.class.name",
    "default.replication.factor",
    "delegation.token.expiry.check.interval.ms",
    "delegation.token.expiry.time.ms",
    "delegation.token.max.lifetime.ms",
    "delegation.token.secret.key",
    "delete.records.purgatory.purge.interval.requests",
    "delete.topic.enable",
    "early.start.listeners",
    "eligible.leader.replicas.enable",
    "fetch.max.bytes",
    "fetch.purgatory.purge.interval.requests",
    "follower.replication.throttled.rate",
    "group.consumer.assignors",
    "group.consumer.heartbeat.interval.ms",
    "group.consumer.max.heartbeat.interval.ms",
    "group.consumer.max.session.timeout.ms",
    "group.consumer.max.size",
    "group.consumer.min.heartbeat.interval.ms",
    "group.consumer.min.session.timeout.ms",
    "group.consumer.session.timeout.ms",
    "group.coordinator.append.linger.ms",
    "group.coordinator.rebalance.protocols",
    "group.coordinator.threads",
    "group.initial.rebalance.delay.ms",
    "group.max.session.timeout.ms",
    "group.max.size",
    "group.min.session.timeout.ms",
    "group.share.delivery.count.limit",
    "group.share.heartbeat.interval.ms",
    "group.share.max.groups",
    "group.share.max.heartbeat.interval.ms",
    "group.share.max.record.lock.duration.ms",
    "group.share.max.session.timeout.ms",
    "group.share.max.share.sessions",
    "group.share.max.size",
    "group.share.min.heartbeat.interval.ms",
    "group.share.min.record.lock.duration.ms",
    "group.share.min.session.timeout.ms",
    "group.share.partition.max.record.locks",
    "group.share.record.lock.duration.ms",
    "group.share.session.timeout.ms",
    "group.streams.heartbeat.interval.ms",
    "group.streams.max.heartbeat.interval.ms",
    "group.streams.max.session.timeout.ms",
    "group.streams.max.size",
    "group.streams.max.standby.replicas",
    "group.streams.min.heartbeat.interval.ms",
    "group.streams.min.session.timeout.ms",
    "group.streams.num.standby.replicas",
    "group.streams.session.timeout.ms",
    "initial.broker.registration.timeout.ms",
    "inter.broker.listener.name",
    "inter.broker.protocol.version",
    "kafka.metrics.polling.interval.secs",
    "kafka.metrics.reporters",
    "leader.imbalance.check.interval.seconds",
    "leader.imbalance.per.broker.percentage",
    "leader.replication.throttled.rate",
    "listener.security.protocol.map",
    "listeners",
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.enable",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.min.cleanable.ratio",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.threads",
    "log.cleanup.policy",
    "log.dir",
    "log.dir.failure.timeout.ms",
    "log.dirs",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.flush.offset.checkpoint.interval.ms",
    "log.flush.scheduler.interval.ms",
    "log.flush.start.offset.checkpoint.interval.ms",
    "log.index.interval.bytes",
    "log.index.size.max.bytes",
    "log.local.retention.bytes",
    "log.local.retention.ms",
    "log.message.downconversion.enable",
    "log.message.format.version",
    "log.message.timestamp.after.max.ms",
    "log.message.timestamp.before.max.ms",
    "log.message.timestamp.difference.max.ms",
    "log.message.timestamp.type",
    "log.preallocate",
    "log.retention.bytes",
    "log.retention.check.interval.ms",
    "log.retention.hours",
    "log.retention.minutes",
    "log.retention.ms",
    "log.roll.hours",
    "log.roll.jitter.hours",
    "log.roll.jitter.ms",
    "log.roll.ms",
    "log.segment.bytes",
    "log.segment.delete.delay.ms",
    "max.connection.creation.rate",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "max.incremental.fetch.session.cache.slots",
    "max.request.partition.size.limit",
    "message.max.bytes",
    "metadata.log.dir",
    "metadata.log.max.record.bytes.between.snapshots",
    "metadata.log.max.snapshot.interval.ms",
    "metadata.log.segment.bytes",
    "metadata.log.segment.ms",
    "metadata.max.idle.interval.ms",
    "metadata.max.retention.bytes",
    "metadata.max.retention.ms",
    "metric.reporters",
    "metrics.num.samples",
    "metrics.recording.level",
    "metrics.sample.window.ms",
    "min.insync.replicas",
    "node.id",
    "num.io.threads",
    "num.network.threads",
    "num.partitions",
    "num.recovery.threads.per.data.dir",
    "num.replica.alter.log.dirs.threads",
    "num.replica.fetchers",
    "offset.metadata.max.bytes",
    "offsets.commit.timeout.ms",
    "offsets.load.buffer.size",
    "offsets.retention.check.interval.ms",
    "offsets.retention.minutes",
    "offsets.topic.compression.codec",
    "offsets.topic.num.partitions",
    "offsets.topic.replication.factor",
    "offsets.topic.segment.bytes",
    "password.encoder.cipher.algorithm",
    "password.encoder.iterations",
    "password.encoder.key.length",
    "password.encoder.keyfactory.algorithm",
    "password.encoder.old.secret",
    "password.encoder.secret",
    "principal.builder.class",
    "process.roles",
    "producer.id.expiration.ms",
    "producer.purgatory.purge.interval.requests",
    "queued.max.request.bytes",
    "queued.max.requests",
    "quota.window.num",
    "quota.window.size.seconds",
    "remote.fetch.max.wait.ms",
    "remote.list.offsets.request.timeout.ms",
    "remote.log.index.file.cache.total.size.bytes",
    "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.copy.quota.window.num",
    "remote.log.manager.copy.quota.window.size.seconds",
    "remote.log.manager.expiration.thread.pool.size",
    "remote.log.manager.fetch.max.bytes.per.second",
    "remote.log.manager.fetch.quota.window.num",
    "remote.log.manager.fetch.quota.window.size.seconds",
    "remote.log.manager.follower.thread.pool.size",
    "remote.log.manager.task.interval.ms",
    "remote.log.manager.thread.pool.size",
    "remote.log.metadata.custom.metadata.max.bytes",
    "remote.log.metadata.manager.class.name",
    "remote.log.metadata.manager.class.path",
    "remote.log.metadata.manager.impl.prefix",
    "remote.log.metadata.manager.listener.name",
    "remote.log.reader.max.pending.tasks",
    "remote.log.reader.threads",
    "remote.log.storage.manager.class.name",
    "remote.log.storage.manager.class.path",
    "remote.log.storage.manager.impl.prefix",
    "remote.log.storage.system.enable",
    "replica.alter.log.dirs.io.max.bytes.per.second",
    "replica.fetch.backoff.ms",
    "replica.fetch.max.bytes",
    "replica.fetch.min.bytes",
    "replica.fetch.response.max.bytes",
    "replica.fetch.wait.max.ms",
    "replica.high.watermark.checkpoint.interval.ms",
    "replica.lag.time.max.ms",
    "replica.selector.class",
    "replica.socket.receive.buffer.bytes",
    "replica.socket.timeout.ms",
    "replication.quota.window.num",
    "replication.quota.window.size.seconds",
    "request.timeout.ms",
    "reserved.broker.max.id",
    "sasl.client.callback.handler.class",
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.min.time.before.relogin",
    "sasl.kerberos.principal.to.local.rules",
    "sasl.kerberos.service.name",
    "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.ticket.renew.window.factor",
    "sasl.login.callback.handler.class",
    "sasl.login.class",
    "sasl.login.connect.timeout.ms",
    "sasl.login.read.timeout.ms",
    "sasl.login.refresh.buffer.seconds",
    "sasl.login.refresh.min.period.seconds",
    "sasl.login.refresh.window.factor",
    "sasl.login.refresh.window.jitter",
    "sasl.login.retry.backoff.max.ms",
    "sasl.login.retry.backoff.ms",
    "sasl.mechanism",
    "sasl.mechanism.controller.protocol",
    "sasl.mechanism.inter.broker.protocol",
    "sasl.oauthbearer.clock.skew.seconds",
    "sasl.oauthbearer.expected.audience",
    "sasl.oauthbearer.expected.issuer",
    "sasl.oauthbearer.header.urlencode",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
    "sasl.oauthbearer.jwks.endpoint.url",
    "sasl.oauthbearer.jwt.retriever.class",
    "sasl.oauthbearer.jwt.validator.class",
    "sasl.oauthbearer.scope.claim.name",
    "sasl.oauthbearer.sub.claim.name",
    "sasl.oauthbearer.token.endpoint.url",
    "sasl.server.callback.handler.class",
    "sasl.server.max.receive.size",
    "security.inter.broker.protocol",
    "security.providers",
    "share.coordinator.append.linger.ms",
    "share.coordinator.load.buffer.size",
    "share.coordinator.snapshot.update.records.per.snapshot",
    "share.coordinator.state.topic.compression.codec",
    "share.coordinator.state.topic.min.isr",
    "share.coordinator.state.topic.num.partitions",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.segment.bytes",
    "share.coordinator.threads",
    "share.coordinator.write.timeout.ms",
    "share.fetch.purgatory.purge.interval.requests",
    "socket.connection.setup.timeout.max.ms",
    "socket.connection.setup.timeout.ms",
    "socket.listen.backlog.size",
    "socket.receive.buffer.bytes",
    "socket.request.max.bytes",
    "socket.send.buffer.bytes",
    "ssl.allow.dn.changes",
    "ssl.allow.san.changes",
    "ssl.cipher.suites",
    "ssl.client.auth",
    "ssl.enabled.protocols",
    "ssl.endpoint.identification.algorithm",
    "ssl.engine.factory.class",
    "ssl.key.password",
    "ssl.keymanager.algorithm",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.keystore.type",
    "ssl.principal.mapping.rules",
    "ssl.protocol",
    "ssl.provider",
    "ssl.secure.random.implementation",
    "ssl.trustmanager.algorithm",
    "ssl.truststore.certificates",
    "ssl.truststore.location",
    "ssl.truststore.password",
    "ssl.truststore.type",
    "super.users",
    "telemetry.max.bytes",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.max.timeout.ms",
    "transaction.partition.verification.enable",
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    "transaction.state.log.load.buffer.size",
    "transaction.state.log.min.isr",
    "transaction.state.log.num.partitions",
    "transaction.state.log.replication.factor",
    "transaction.state.log.segment.bytes",
    "transactional.id.expiration.ms",
    "unclean.leader.election.enable",
    // Internal in Kafka (`ReplicationConfigs`), set by tests that want leaderless partitions
    // elected sooner than every five minutes.
    "unclean.leader.election.interval.ms",
    "unstable.feature.versions.enable",
    "zookeeper.metadata.migration.enable",
];

/// Per-listener overrides (`listener.name.<listener>.<config>`) are Kafka keys whatever the
/// listener is called.
const LISTENER_PREFIX: &str = "listener.name.";

/// Whether `key` is one of Kafka's broker or controller configuration names.
pub fn is_kafka_key(key: &str) -> bool {
    key.starts_with(LISTENER_PREFIX) || KAFKA_BROKER_KEYS.binary_search(&key).is_ok()
}

/// Whether Gregor acts on `key`.
pub fn is_implemented(key: &str) -> bool {
    // The broker-level defaults of topic configs (`log.segment.bytes`, ...) take effect as the
    // static defaults of this broker's partition logs (the log manager reads them).
    DEFINITIONS.iter().any(|d| d.name == key)
        || crate::config_security::is_implemented_listener_key(key)
        || crate::config_security::TLS_KEYS.contains(&key)
        || gregor_actors::controller::logic::configs::broker::is_log_default_key(key)
}

/// The known name (Gregor's or Kafka's) nearest to `key`, if it is near enough to be a typo:
/// at most 2 edits, or a quarter of the name's length for long names.
pub fn did_you_mean(key: &str) -> Option<&'static str> {
    let limit = (key.len() / 4).max(2);
    DEFINITIONS
        .iter()
        .map(|d| d.name)
        .chain(KAFKA_BROKER_KEYS.iter().copied())
        .map(|known| (strsim::levenshtein(key, known), known))
        .filter(|(distance, _)| *distance <= limit)
        .min()
        .map(|(_, known)| known)
}

/// Shown instead of the value of a key that may hold a credential.
pub const HIDDEN: &str = "[hidden]";

/// The value to log for `key`: [`HIDDEN`] for passwords, secrets and JAAS configs.
pub fn loggable<'a>(key: &str, value: &'a str) -> &'a str {
    let key = key.to_ascii_lowercase();
    // `ssl.keystore.key` holds an inline private key (Kafka's PASSWORD type).
    if key.contains("password")
        || key.contains("secret")
        || key.contains("sasl.jaas.config")
        || key.ends_with("ssl.keystore.key")
    {
        HIDDEN
    } else {
        value
    }
}

/// The keys a configuration was given, sorted by what start-up does with them.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct KeyReport {
    /// Every given key with its value (masked where needed): the non-default configuration.
    pub given: BTreeMap<String, String>,
    /// Kafka keys Gregor accepts but does not act on.
    pub unimplemented: Vec<String>,
    /// Keys that are neither Gregor's nor Kafka's, each with the nearest known name.
    pub unknown: Vec<(String, Option<&'static str>)>,
}

impl KeyReport {
    /// Sorts the keys `config` was given.
    pub fn of(config: &NodeConfig) -> Self {
        let mut report = KeyReport::default();
        for (key, value) in &config.originals {
            report
                .given
                .insert(key.clone(), loggable(key, value).to_owned());
            if is_implemented(key) {
                continue;
            }
            if is_kafka_key(key) {
                report.unimplemented.push(key.clone());
            } else {
                report.unknown.push((key.clone(), did_you_mean(key)));
            }
        }
        report
    }

    /// Logs the version, the effective non-default configuration, the unimplemented Kafka keys
    /// (one warning) and each unknown key, and sets the config-key gauges.
    pub fn log(&self) {
        tracing::info!(version = env!("CARGO_PKG_VERSION"), "Gregor starting");
        let given: Vec<String> = self
            .given
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect();
        tracing::info!(
            configuration = %given.join(", "),
            "effective configuration: the keys set by the operator; every other key has its default"
        );
        if !self.unimplemented.is_empty() {
            tracing::warn!(
                count = self.unimplemented.len(),
                keys = %self.unimplemented.join(", "),
                "Kafka configurations accepted but not implemented by Gregor; they have no effect"
            );
        }
        for (key, suggestion) in &self.unknown {
            match suggestion {
                Some(known) => tracing::warn!(
                    key = %key,
                    "'{key}' is not a Kafka or Gregor configuration and is not used; did you mean '{known}'?"
                ),
                None => tracing::warn!(
                    key = %key,
                    "'{key}' is not a Kafka or Gregor configuration and is not used"
                ),
            }
        }
        gregor_metrics::config_keys(self.unimplemented.len(), self.unknown.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_has_no_duplicates() {
        assert!(KAFKA_BROKER_KEYS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn gregors_kafka_keys_are_kafka_keys() {
        for def in DEFINITIONS {
            if def.name != crate::config::METRICS_LISTENER && def.name != "log.format" {
                assert!(
                    is_kafka_key(def.name),
                    "{} is not in the Kafka table",
                    def.name
                );
            }
        }
    }

    #[test]
    fn typos_get_the_nearest_name() {
        assert_eq!(did_you_mean("num.partitons"), Some("num.partitions"));
        assert_eq!(
            did_you_mean("log.retention.hour"),
            Some("log.retention.hours")
        );
        assert_eq!(did_you_mean("no.such.setting"), None);
    }

    #[test]
    fn credentials_are_hidden() {
        assert_eq!(loggable("ssl.keystore.password", "s3cret"), HIDDEN);
        assert_eq!(loggable("listener.name.x.sasl.jaas.config", "x"), HIDDEN);
        assert_eq!(loggable("delegation.token.secret.key", "k"), HIDDEN);
        assert_eq!(
            loggable("ssl.keystore.key", "-----BEGIN PRIVATE KEY-----"),
            HIDDEN
        );
        assert_eq!(
            loggable(
                "listener.name.ssl.ssl.keystore.key",
                "-----BEGIN PRIVATE KEY-----"
            ),
            HIDDEN
        );
        assert_eq!(loggable("num.partitions", "3"), "3");
    }

    #[test]
    fn keys_are_sorted_by_what_start_up_does_with_them() -> Result<(), crate::config::ConfigError> {
        let overrides: Vec<String> = [
            "num.partitions=3",
            "num.io.threads=8",
            "listener.name.internal.ssl.keystore.password=pw",
            "num.partitons=2",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let config = NodeConfig::load(None, &overrides)?;
        let report = KeyReport::of(&config);
        assert_eq!(
            report.given,
            BTreeMap::from([
                (
                    "listener.name.internal.ssl.keystore.password".to_owned(),
                    HIDDEN.to_owned()
                ),
                ("num.io.threads".to_owned(), "8".to_owned()),
                ("num.partitions".to_owned(), "3".to_owned()),
                ("num.partitons".to_owned(), "2".to_owned()),
            ])
        );
        assert_eq!(
            report.unimplemented,
            vec![
                "listener.name.internal.ssl.keystore.password",
                "num.io.threads"
            ]
        );
        assert_eq!(
            report.unknown,
            vec![("num.partitons".to_owned(), Some("num.partitions"))]
        );
        Ok(())
    }
}
