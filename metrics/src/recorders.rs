//! Small typed helpers over the `metrics` macros, one per thing Gregor measures.

use std::sync::Weak;
use std::time::Duration;

use hashbrown::HashMap;
use metrics::{counter, gauge, histogram, Counter, Gauge, Histogram};

use crate::names;
use crate::removable::{RemovableGauges, SeriesValue};

/// Why a connection was closed; the `reason` label of
/// [`CONNECTIONS_CLOSED_TOTAL`](names::CONNECTIONS_CLOSED_TOTAL).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CloseReason {
    /// The client closed the connection between requests.
    ClientClosed,
    /// The client closed the connection in the middle of a frame.
    Truncated,
    /// The frame size was negative.
    NegativeSize,
    /// The frame size exceeded `socket.request.max.bytes`.
    OversizedRequest,
    /// The request header named an API key Gregor does not know.
    UnknownApiKey,
    /// The API exists but not at the requested version, or not on this listener.
    UnsupportedVersion,
    /// The header or body could not be decoded.
    MalformedRequest,
    /// No request arrived within `connections.max.idle.ms`.
    Idle,
    /// A socket read or write failed.
    IoError,
    /// The node is shutting down.
    Shutdown,
    /// The client's address already had `max.connections.per.ip` (or its override)
    /// connections; closed at once, as Kafka's acceptor does.
    MaxConnectionsPerIp,
    /// The client's address exceeded its `connection_creation_rate` quota (KIP-612); closed
    /// after the throttle time, as Kafka's acceptor does.
    ConnectionRateThrottled,
    /// A Produce with acks=0 failed on some partition: Kafka closes the connection so the
    /// client, which gets no response, refreshes its metadata.
    ProduceFailedWithoutAcks,
    /// SASL authentication failed (or the exchange broke its rules); closed after
    /// `connection.failed.authentication.delay.ms`.
    AuthenticationFailed,
    /// A request arrived after the connection's SASL session expired without re-authentication
    /// (KIP-368, Kafka's `expired-connections-killed-count`).
    SessionExpired,
    /// A private quorum RPC on an authenticated controller listener from a connection that
    /// has not authenticated, or whose principal may not CLUSTER_ACTION the cluster.
    ClusterAuthorizationFailed,
}

impl CloseReason {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::ClientClosed => "client_closed",
            CloseReason::Truncated => "truncated",
            CloseReason::NegativeSize => "negative_size",
            CloseReason::OversizedRequest => "oversized_request",
            CloseReason::UnknownApiKey => "unknown_api_key",
            CloseReason::UnsupportedVersion => "unsupported_version",
            CloseReason::MalformedRequest => "malformed_request",
            CloseReason::Idle => "idle",
            CloseReason::IoError => "io_error",
            CloseReason::Shutdown => "shutdown",
            CloseReason::MaxConnectionsPerIp => "max_connections_per_ip",
            CloseReason::ConnectionRateThrottled => "connection_rate_throttled",
            CloseReason::ProduceFailedWithoutAcks => "produce_failed_without_acks",
            CloseReason::AuthenticationFailed => "authentication_failed",
            CloseReason::SessionExpired => "session_expired",
            CloseReason::ClusterAuthorizationFailed => "cluster_authorization_failed",
        }
    }
}

/// Records a successful SASL authentication.
pub fn authenticated(listener: &str, mechanism: &str) {
    counter!(
        names::SASL_AUTHENTICATIONS_TOTAL,
        "listener" => listener.to_owned(),
        "mechanism" => mechanism.to_owned()
    )
    .increment(1);
}

/// Records a failed authentication (SASL, or a TLS handshake); `mechanism` is empty when none
/// was agreed on.
pub fn authentication_failed(listener: &str, mechanism: &str, reason: &'static str) {
    counter!(
        names::SASL_AUTHENTICATION_FAILURES_TOTAL,
        "listener" => listener.to_owned(),
        "mechanism" => mechanism.to_owned(),
        "reason" => reason
    )
    .increment(1);
}

/// Records a new connection on a listener.
pub fn connection_opened(listener: &str) {
    counter!(names::CONNECTIONS_ACCEPTED_TOTAL, "listener" => listener.to_owned()).increment(1);
    gauge!(names::CONNECTIONS_ACTIVE, "listener" => listener.to_owned()).increment(1.0);
}

/// Sets the request memory pool gauges (`queued.max.request.bytes`).
pub fn memory_pool(available: i64, capacity: i64) {
    gauge!(names::MEMORY_POOL_AVAILABLE).set(available as f64);
    gauge!(names::MEMORY_POOL_USED).set(capacity.saturating_sub(available) as f64);
}

/// A request between being read from its connection and its answer (or its connection's
/// close); counted in `kafka_network_requestchannel_requestqueuesize` while it lives.
#[must_use = "the request counts as queued only while the guard lives"]
pub struct QueuedRequest(Gauge);

impl Drop for QueuedRequest {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

/// One connection's handles on the request metrics' series, registered at its first request
/// of each API and version: the `metrics` macros build a series' key (its label array, the
/// version as a string) and look it up in the registry on every call, which was about two
/// thirds of the allocations of a small request. Handles are registered with the recorder in
/// effect when first used (a test's local recorder, or the exporter's).
#[derive(Default)]
pub struct RequestMetrics {
    requests: HashMap<(&'static str, i16), RequestSeries>,
    errors: HashMap<(&'static str, &'static str), Counter>,
    queue_size: Option<Gauge>,
}

/// The series one completed request of an API and version is recorded in.
struct RequestSeries {
    total: Counter,
    queue_time: Histogram,
    local_time: Histogram,
    remote_time: Histogram,
    throttle_time: Histogram,
    send_time: Histogram,
    total_time: Histogram,
    request_bytes: Histogram,
}

impl RequestSeries {
    fn register(request: &'static str, version: i16) -> Self {
        RequestSeries {
            total: counter!(names::REQUESTS_TOTAL, "request" => request, "version" => version.to_string()),
            queue_time: histogram!(names::REQUEST_QUEUE_TIME_SECONDS, "request" => request),
            local_time: histogram!(names::LOCAL_TIME_SECONDS, "request" => request),
            remote_time: histogram!(names::REMOTE_TIME_SECONDS, "request" => request),
            throttle_time: histogram!(names::THROTTLE_TIME_SECONDS, "request" => request),
            send_time: histogram!(names::RESPONSE_SEND_TIME_SECONDS, "request" => request),
            total_time: histogram!(names::TOTAL_TIME_SECONDS, "request" => request),
            request_bytes: histogram!(names::REQUEST_BYTES, "request" => request),
        }
    }
}

impl RequestMetrics {
    /// Counts one more request in the queue until the guard is dropped.
    pub fn queued(&mut self) -> QueuedRequest {
        let gauge = self
            .queue_size
            .get_or_insert_with(|| gauge!(names::REQUEST_QUEUE_SIZE))
            .clone();
        gauge.increment(1.0);
        QueuedRequest(gauge)
    }

    /// Records one completed request under the metric name `request` (an API name such as
    /// `Metadata`; some APIs are counted under two names, see the handlers).
    pub fn record_request(
        &mut self,
        request: &'static str,
        version: i16,
        timings: &RequestTimings,
    ) {
        let series = self
            .requests
            .entry((request, version))
            .or_insert_with(|| RequestSeries::register(request, version));
        series.total.increment(1);
        series.queue_time.record(timings.queue.as_secs_f64());
        series.local_time.record(timings.local.as_secs_f64());
        series.remote_time.record(timings.remote.as_secs_f64());
        series.throttle_time.record(timings.throttle.as_secs_f64());
        series.send_time.record(timings.send.as_secs_f64());
        series.total_time.record(timings.total.as_secs_f64());
        series.request_bytes.record(timings.request_bytes as f64);
    }

    /// Adds `count` occurrences of the error named `error` (Kafka's name, e.g. `NONE`) to
    /// `request`.
    pub fn record_errors(&mut self, request: &'static str, error: &'static str, count: u64) {
        self.errors
            .entry((request, error))
            .or_insert_with(
                || counter!(names::ERRORS_TOTAL, "request" => request, "error" => error),
            )
            .increment(count);
    }
}

/// Records a closed connection and why.
pub fn connection_closed(listener: &str, reason: CloseReason) {
    gauge!(names::CONNECTIONS_ACTIVE, "listener" => listener.to_owned()).decrement(1.0);
    counter!(
        names::CONNECTIONS_CLOSED_TOTAL,
        "listener" => listener.to_owned(),
        "reason" => reason.as_str()
    )
    .increment(1);
}

/// Timings and sizes of one completed request, as Kafka's `RequestMetrics` records them.
#[derive(Clone, Debug, Default)]
pub struct RequestTimings {
    /// Frame read until the handler started.
    pub queue: Duration,
    /// Time inside the handler, its waits for others excepted.
    pub local: Duration,
    /// Time the handler waited for others (a Fetch's long poll, an acks=all Produce).
    pub remote: Duration,
    /// Throttle time the response carries.
    pub throttle: Duration,
    /// Time to write the response.
    pub send: Duration,
    /// Frame read until the response was written.
    pub total: Duration,
    /// Request frame size in bytes.
    pub request_bytes: usize,
}

/// Counts one log cleaning pass that removed `bytes_removed` bytes in `elapsed`.
pub fn log_cleaned(bytes_removed: u64, elapsed: Duration) {
    counter!(names::LOG_CLEANER_PASSES_TOTAL).increment(1);
    counter!(names::LOG_CLEANER_BYTES_REMOVED_TOTAL).increment(bytes_removed);
    histogram!(names::LOG_CLEANER_CLEAN_SECONDS).record(elapsed.as_secs_f64());
}

/// Counts record bytes sent to followers: Kafka's `BrokerTopicStats.updateBytesOut` keeps them
/// out of the topics' bytes out, which count what consumers read.
pub fn replication_bytes_out(bytes: u64) {
    if bytes > 0 {
        counter!(names::REPLICATION_BYTES_OUT_TOTAL).increment(bytes);
    }
}

/// Counts record bytes this node appended as a follower.
pub fn replication_bytes_in(bytes: u64) {
    if bytes > 0 {
        counter!(names::REPLICATION_BYTES_IN_TOTAL).increment(bytes);
    }
}

/// Records the size of the fetch session cache: its sessions and the partitions they hold.
pub fn fetch_session_cache(sessions: usize, partitions: usize) {
    gauge!(names::FETCH_SESSIONS).set(sessions as f64);
    gauge!(names::FETCH_SESSION_PARTITIONS).set(partitions as f64);
}

/// Registers the fetch session cache's series at 0, as Kafka's cache registers its gauges and
/// eviction meter when it is built: a dashboard finds them before the first session.
pub fn fetch_session_cache_started() {
    fetch_session_cache(0, 0);
    counter!(names::FETCH_SESSION_EVICTIONS_TOTAL).increment(0);
}

/// Counts one fetch session evicted from the cache.
pub fn fetch_session_evicted() {
    counter!(names::FETCH_SESSION_EVICTIONS_TOTAL).increment(1);
}

/// A fetch starts (`true`) or stops (`false`) waiting for records.
pub fn fetch_waiting(waiting: bool) {
    let gauge = gauge!(names::FETCH_PURGATORY_SIZE, "delayedOperation" => "Fetch");
    if waiting {
        gauge.increment(1.0);
    } else {
        gauge.decrement(1.0);
    }
}

/// Counts one incremental fetch served by a fetch session.
pub fn incremental_fetch() {
    counter!(names::INCREMENTAL_FETCHES_TOTAL).increment(1);
}

/// Records the state of a newly published image.
pub fn image_published(offset: u64, topics: usize, partitions: usize, apply_time: Duration) {
    gauge!(names::METADATA_IMAGE_OFFSET).set(offset as f64);
    gauge!(names::METADATA_IMAGE_TOPICS).set(topics as f64);
    gauge!(names::METADATA_IMAGE_PARTITIONS).set(partitions as f64);
    histogram!(names::METADATA_IMAGE_APPLY_SECONDS).record(apply_time.as_secs_f64());
}

/// Records the digest of the published image at `offset` (`digest`: the gauge's exact value).
pub fn image_digest(offset: u64, digest: f64) {
    gauge!(names::METADATA_IMAGE_DIGEST_OFFSET).set(offset as f64);
    gauge!(names::METADATA_IMAGE_DIGEST).set(digest);
}

/// Where this node stands in the metadata quorum (Kafka's `raft-metrics`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RaftStanding {
    /// The leader's id, -1 when unknown.
    pub leader: i64,
    /// The id voted for in this epoch, -1 when none (or following a leader).
    pub vote: i64,
    /// The raft term.
    pub epoch: u64,
    /// The offset after the last applied record, -1 before any.
    pub high_watermark: i64,
    /// The offset after the last record of the log.
    pub log_end_offset: u64,
}

/// Records where this node stands in the metadata quorum.
pub fn raft_standing(standing: RaftStanding) {
    gauge!(names::RAFT_CURRENT_LEADER).set(standing.leader as f64);
    gauge!(names::RAFT_CURRENT_VOTE).set(standing.vote as f64);
    gauge!(names::RAFT_CURRENT_EPOCH).set(standing.epoch as f64);
    gauge!(names::RAFT_HIGH_WATERMARK).set(standing.high_watermark as f64);
    gauge!(names::RAFT_LOG_END_OFFSET).set(standing.log_end_offset as f64);
}

/// Whether this node is the active controller.
pub fn active_controller(active: bool) {
    gauge!(names::CONTROLLER_ACTIVE_CONTROLLER_COUNT).set(if active { 1.0 } else { 0.0 });
}

/// The cluster-wide counts a controller reports from its image.
pub fn controller_image_counts(counts: ControllerImageCounts) {
    gauge!(names::CONTROLLER_GLOBAL_TOPIC_COUNT).set(counts.topics as f64);
    gauge!(names::CONTROLLER_GLOBAL_PARTITION_COUNT).set(counts.partitions as f64);
    gauge!(names::CONTROLLER_OFFLINE_PARTITIONS_COUNT).set(counts.offline_partitions as f64);
    gauge!(names::CONTROLLER_FENCED_BROKER_COUNT).set(counts.fenced_brokers as f64);
    gauge!(names::CONTROLLER_ACTIVE_BROKER_COUNT).set(counts.active_brokers as f64);
    gauge!(names::CONTROLLER_PREFERRED_REPLICA_IMBALANCE_COUNT)
        .set(counts.preferred_replica_imbalance as f64);
}

/// What [`controller_image_counts`] reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ControllerImageCounts {
    /// Topics.
    pub topics: usize,
    /// Partitions.
    pub partitions: usize,
    /// Partitions without a leader.
    pub offline_partitions: usize,
    /// Fenced brokers.
    pub fenced_brokers: usize,
    /// Unfenced brokers.
    pub active_brokers: usize,
    /// Partitions not led by their first (preferred) replica.
    pub preferred_replica_imbalance: usize,
}

/// Records a record that could not be replayed into the image.
pub fn replay_error() {
    counter!(names::METADATA_REPLAY_ERRORS_TOTAL).increment(1);
}

/// Records how long one publisher took to handle one image.
pub fn publisher_ran(publisher: &str, elapsed: Duration) {
    histogram!(names::PUBLISHER_PUBLISH_SECONDS, "publisher" => publisher.to_owned())
        .record(elapsed.as_secs_f64());
}

/// Records a publisher that returned an error or panicked.
pub fn publisher_failed(publisher: &str) {
    counter!(names::PUBLISHER_FAILURES_TOTAL, "publisher" => publisher.to_owned()).increment(1);
}

/// Records a committed controller mutation and its records.
pub fn controller_committed(request: &'static str, records: usize, commit_time: Duration) {
    counter!(names::CONTROLLER_MUTATIONS_TOTAL, "request" => request).increment(1);
    counter!(names::CONTROLLER_RECORDS_TOTAL).increment(records as u64);
    histogram!(names::CONTROLLER_COMMIT_SECONDS).record(commit_time.as_secs_f64());
}

/// Records how many given configuration keys were unimplemented Kafka keys and unknown keys,
/// and the running version.
pub fn config_keys(unimplemented: usize, unknown: usize) {
    gauge!(names::CONFIG_UNIMPLEMENTED_KEYS).set(unimplemented as f64);
    gauge!(names::CONFIG_UNKNOWN_KEYS).set(unknown as f64);
    gauge!(names::BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
}

/// The series of one quota sensor, registered once when the sensor is created; their values
/// (the quota-bearing value: byte rate, request time or tokens, by resource; the average
/// throttle time; the mutation rate of ControllerMutation) are the sensor's own, measured at
/// each scrape ([`SeriesValue`]). Their labels come from clients, so the series are
/// [removable](crate::removable): they leave the scrape when the sensor (its last clone of
/// this value) is dropped.
#[derive(Clone)]
pub struct QuotaSensorMetrics {
    _series: RemovableGauges,
}

/// Registers the series of the sensor of `resource` (`Produce`, `Fetch`, `Request`,
/// `ControllerMutation`) tagged (`user`, `clientId`): the label names the Prometheus JMX
/// exporter's Kafka rules give Kafka's `user` and `client-id` quota tags.
pub fn quota_sensor_metrics(
    resource: &'static str,
    user: &str,
    client_id: &str,
    value: Weak<dyn SeriesValue>,
) -> QuotaSensorMetrics {
    quota_sensor_metrics_tagged(resource, [("user", user), ("clientId", client_id)], value)
}

/// The series of a sensor keyed by a quota callback's own tags (Kafka: custom tags replace
/// `user` and `client-id`); each tag becomes a label: `client-id` is `clientId`, as the JMX
/// exporter names it, and in other tags '-' and '.' turn into '_'.
pub fn quota_sensor_metrics_tagged<'a>(
    resource: &'static str,
    tags: impl IntoIterator<Item = (&'a str, &'a str)>,
    value: Weak<dyn SeriesValue>,
) -> QuotaSensorMetrics {
    let tags: Vec<(String, &str)> = tags
        .into_iter()
        .map(|(key, value)| match key {
            "client-id" => ("clientId".to_owned(), value),
            _ => (key.replace(['-', '.'], "_"), value),
        })
        .collect();
    let labels = std::iter::once(("resource", resource))
        .chain(tags.iter().map(|(key, value)| (key.as_str(), *value)));
    let value_name = match resource {
        "Produce" | "Fetch" => names::QUOTA_BYTE_RATE,
        "Request" => names::QUOTA_REQUEST_TIME,
        _ => names::QUOTA_TOKENS,
    };
    let owned: &[&'static str] = if resource == "ControllerMutation" {
        &[
            value_name,
            names::QUOTA_THROTTLE_TIME,
            names::QUOTA_MUTATION_RATE,
        ]
    } else {
        &[value_name, names::QUOTA_THROTTLE_TIME]
    };
    let (series, []) = RemovableGauges::register_with_owned((value, owned), [], labels);
    QuotaSensorMetrics { _series: series }
}

/// Records a quota-callback call that panicked.
pub fn quota_callback_failed(callback: &str, method: &'static str) {
    counter!(names::QUOTA_CALLBACK_FAILURES_TOTAL, "callback" => callback.to_owned(), "method" => method)
        .increment(1);
}

/// Records the time of a quota callback's `update_cluster_metadata`.
pub fn quota_callback_cluster_updated(callback: &str, elapsed: Duration) {
    histogram!(names::QUOTA_CALLBACK_CLUSTER_UPDATE_SECONDS, "callback" => callback.to_owned())
        .record(elapsed.as_secs_f64());
}

/// The gauge of connections muted by the `resource` quota manager.
pub fn quota_queue_size(resource: &'static str) -> metrics::Gauge {
    gauge!(names::QUOTA_QUEUE_SIZE, "resource" => resource)
}

/// The partitions this broker leads, and how many of them are in each state the
/// `ReplicaManager` gauges count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Leadership {
    pub leaders: usize,
    pub under_replicated: usize,
    pub under_min_isr: usize,
    pub at_min_isr: usize,
}

/// Sets the `ReplicaManager` gauges of the partitions this broker leads.
pub fn replica_leadership(leadership: &Leadership) {
    gauge!(names::REPLICA_LEADER_COUNT).set(leadership.leaders as f64);
    gauge!(names::REPLICA_UNDER_REPLICATED_PARTITIONS).set(leadership.under_replicated as f64);
    gauge!(names::REPLICA_UNDER_MIN_ISR_PARTITION_COUNT).set(leadership.under_min_isr as f64);
    gauge!(names::REPLICA_AT_MIN_ISR_PARTITION_COUNT).set(leadership.at_min_isr as f64);
}

/// The partitions whose log is open on this broker, those of them offline, and the log dirs
/// that are offline.
pub fn hosted_logs(partitions: usize, offline_partitions: usize, offline_log_dirs: usize) {
    gauge!(names::REPLICA_PARTITION_COUNT).set(partitions as f64);
    gauge!(names::REPLICA_OFFLINE_REPLICA_COUNT).set(offline_partitions as f64);
    gauge!(names::LOG_OFFLINE_LOG_DIRECTORY_COUNT).set(offline_log_dirs as f64);
}

/// Records the time of one fsync of a log segment's files.
pub fn log_flushed(elapsed: Duration) {
    histogram!(names::LOG_FLUSH_RATE_AND_TIME_MS).record(elapsed.as_secs_f64() * 1000.0);
}

/// The lag gauge of one partition a replica fetcher follows from `leader`; it leaves the scrape
/// when the returned series is dropped (the partition is no longer followed from that leader),
/// as Kafka removes a partition's fetcher lag metric.
pub fn replica_fetcher_partition_lag(
    leader: i32,
    topic: &str,
    partition: i32,
) -> (RemovableGauges, metrics::Gauge) {
    let client_id = format!("ReplicaFetcherThread-0-{leader}");
    let partition = partition.to_string();
    let (series, [lag]) = RemovableGauges::register(
        [names::REPLICA_FETCHER_CONSUMER_LAG],
        [
            ("clientId", client_id.as_str()),
            ("topic", topic),
            ("partition", partition.as_str()),
        ],
    );
    (series, lag)
}

/// The largest lag of any partition this broker follows.
pub fn replica_fetcher_max_lag(lag: i64) {
    gauge!(names::REPLICA_FETCHER_MAX_LAG, "clientId" => "Replica").set(lag as f64);
}

/// Counts one committed ISR change of a partition this broker leads.
pub fn isr_changed(expanded: bool) {
    if expanded {
        counter!(names::REPLICA_ISR_EXPANDS_TOTAL).increment(1);
    } else {
        counter!(names::REPLICA_ISR_SHRINKS_TOTAL).increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    #[test]
    fn request_series_are_registered_once_and_recorded_on_every_request() {
        let recorder = DebuggingRecorder::new();
        let snapshotter = recorder.snapshotter();
        let held = metrics::with_local_recorder(&recorder, || {
            let mut metrics = RequestMetrics::default();
            metrics.record_request("Metadata", 12, &RequestTimings::default());
            metrics.record_request("Metadata", 12, &RequestTimings::default());
            metrics.record_request("Metadata", 1, &RequestTimings::default());
            metrics.record_errors("Metadata", "NONE", 3);
            metrics.record_errors("Metadata", "NONE", 1);
            let held = metrics.queued();
            drop(metrics.queued());
            held
        });
        // One snapshot: the debugging recorder hands out each value once.
        let snapshot = snapshotter.snapshot().into_vec();
        drop(held);
        let value = |name: &str, label: Option<(&str, &str)>| {
            snapshot
                .iter()
                .find(|(key, ..)| {
                    key.key().name() == name
                        && label.is_none_or(|(k, v)| {
                            key.key().labels().any(|l| l.key() == k && l.value() == v)
                        })
                })
                .map(|(.., value)| value)
        };
        assert_eq!(
            value(names::REQUEST_QUEUE_SIZE, None),
            Some(&DebugValue::Gauge(1.0.into()))
        );
        assert_eq!(
            value(names::REQUESTS_TOTAL, Some(("version", "12"))),
            Some(&DebugValue::Counter(2))
        );
        assert_eq!(
            value(names::REQUESTS_TOTAL, Some(("version", "1"))),
            Some(&DebugValue::Counter(1))
        );
        assert_eq!(
            value(names::ERRORS_TOTAL, Some(("error", "NONE"))),
            Some(&DebugValue::Counter(4))
        );
        let Some(DebugValue::Histogram(times)) = value(names::TOTAL_TIME_SECONDS, None) else {
            panic!("no total-time histogram");
        };
        assert_eq!(times.len(), 3);
    }
}
