//! HELP texts of every metric in [`names`], registered with the recorder (or rendered by
//! `topics.rs` for its own families) so that each exported family has a `# HELP` line next to
//! its `# TYPE` line. A test checks that no name is left out.

use metrics::Unit;

use crate::names;

/// What kind of series a name is.
#[derive(Clone, Copy)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
    /// A counter of `topics.rs`, which renders it itself (so the recorder never has its name).
    TopicCounter,
    /// A gauge of `partition_logs.rs`, rendered at scrape time (the recorder never has its name).
    LogGauge,
}

use Kind::{Counter, Gauge, Histogram, LogGauge, TopicCounter};

/// Every name in [`names`] with its kind, unit and help text.
const DESCRIPTIONS: &[(&str, Kind, Unit, &str)] = &[
    (names::REQUESTS_TOTAL, Counter, Unit::Count, "Completed requests by API (request) and version."),
    (names::ERRORS_TOTAL, Counter, Unit::Count, "Error codes in responses by API (request) and Kafka error name (error), NONE included."),
    (names::REQUEST_QUEUE_TIME_SECONDS, Histogram, Unit::Seconds, "Time from a complete request frame being read until its handler started."),
    (names::LOCAL_TIME_SECONDS, Histogram, Unit::Seconds, "Time spent in the request's handler, its waits for others excepted."),
    (names::REMOTE_TIME_SECONDS, Histogram, Unit::Seconds, "Time a request waited for others: a Fetch for records to arrive, an acks=all Produce for its followers."),
    (names::THROTTLE_TIME_SECONDS, Histogram, Unit::Seconds, "Throttle time carried by the response."),
    (names::RESPONSE_SEND_TIME_SECONDS, Histogram, Unit::Seconds, "Time to write the response to the socket."),
    (names::TOTAL_TIME_SECONDS, Histogram, Unit::Seconds, "Time from the request frame being read until its response was written."),
    (names::REQUEST_BYTES, Histogram, Unit::Bytes, "Size of request frames (header and body)."),
    (names::CONNECTIONS_ACCEPTED_TOTAL, Counter, Unit::Count, "Connections accepted, by listener."),
    (names::CONNECTIONS_ACTIVE, Gauge, Unit::Count, "Connections currently open, by listener."),
    (names::CONNECTIONS_CLOSED_TOTAL, Counter, Unit::Count, "Connections closed, by listener and reason."),
    (names::RAFT_CURRENT_LEADER, Gauge, Unit::Count, "The metadata quorum's leader as this node knows it; -1 indicates unknown."),
    (names::RAFT_CURRENT_VOTE, Gauge, Unit::Count, "The node this one voted for in the current epoch (itself as leader or candidate); -1 when following a leader or not voted."),
    (names::RAFT_CURRENT_EPOCH, Gauge, Unit::Count, "The metadata quorum's current epoch."),
    (names::RAFT_HIGH_WATERMARK, Gauge, Unit::Count, "The offset after the last metadata record this node applied; -1 if it is unknown."),
    (names::RAFT_LOG_END_OFFSET, Gauge, Unit::Count, "The offset after the last record of this node's metadata log."),
    (names::CONTROLLER_ACTIVE_CONTROLLER_COUNT, Gauge, Unit::Count, "1 on the active controller (leader of the metadata log with the log applied up to its term), 0 elsewhere."),
    (names::CONTROLLER_GLOBAL_TOPIC_COUNT, Gauge, Unit::Count, "Topics in this controller's metadata image."),
    (names::CONTROLLER_GLOBAL_PARTITION_COUNT, Gauge, Unit::Count, "Partitions in this controller's metadata image."),
    (names::CONTROLLER_OFFLINE_PARTITIONS_COUNT, Gauge, Unit::Count, "Partitions without a leader in this controller's metadata image."),
    (names::CONTROLLER_PREFERRED_REPLICA_IMBALANCE_COUNT, Gauge, Unit::Count, "Partitions not led by their first (preferred) replica, leaderless ones included."),
    (names::CONTROLLER_FENCED_BROKER_COUNT, Gauge, Unit::Count, "Registered brokers that are fenced."),
    (names::CONTROLLER_ACTIVE_BROKER_COUNT, Gauge, Unit::Count, "Registered brokers that are not fenced."),
    (names::REPLICA_LEADER_COUNT, Gauge, Unit::Count, "Partitions this broker leads."),
    (names::REPLICA_UNDER_REPLICATED_PARTITIONS, Gauge, Unit::Count, "Partitions this broker leads whose ISR is smaller than their replica set."),
    (names::REPLICA_UNDER_MIN_ISR_PARTITION_COUNT, Gauge, Unit::Count, "Partitions this broker leads whose ISR is smaller than min.insync.replicas (capped at the replica count): acks=all produces to them fail."),
    (names::REPLICA_AT_MIN_ISR_PARTITION_COUNT, Gauge, Unit::Count, "Partitions this broker leads whose ISR is exactly min.insync.replicas (capped at the replica count): one more replica lost and acks=all produces fail."),
    (names::REPLICA_OFFLINE_REPLICA_COUNT, Gauge, Unit::Count, "Partition logs this broker hosts that are offline (their log dir failed, or no log dir could hold them)."),
    (names::REPLICA_PARTITION_COUNT, Gauge, Unit::Count, "Partition logs this broker has opened, including those whose log dir went offline since (as Kafka counts offline partitions)."),
    (names::LOG_OFFLINE_LOG_DIRECTORY_COUNT, Gauge, Unit::Count, "Log dirs marked offline after a storage error; their partitions answer KAFKA_STORAGE_ERROR."),
    (names::REPLICA_ISR_SHRINKS_TOTAL, Counter, Unit::Count, "ISR shrinks this broker's partition leaders committed through AlterPartition."),
    (names::REPLICA_ISR_EXPANDS_TOTAL, Counter, Unit::Count, "ISR expansions this broker's partition leaders committed through AlterPartition."),
    (names::REPLICA_FETCHER_CONSUMER_LAG, Gauge, Unit::Count, "Messages a followed partition's log end is behind the leader's high watermark, as of the last fetch."),
    (names::REPLICA_FETCHER_MAX_LAG, Gauge, Unit::Count, "The largest lag of any partition this broker follows, as of each fetcher's last fetch."),
    (names::SASL_AUTHENTICATIONS_TOTAL, Counter, Unit::Count, "Successful SASL authentications, by listener and mechanism."),
    (names::SASL_AUTHENTICATION_FAILURES_TOTAL, Counter, Unit::Count, "Failed authentications, SASL or TLS (each closes its connection), by listener, mechanism and reason."),
    (names::TOPIC_MESSAGES_IN_TOTAL, TopicCounter, Unit::Count, "Records appended by Produce (duplicates of idempotent batches included, as Kafka counts them), by topic (the series without a topic is the total)."),
    (names::TOPIC_BYTES_IN_TOTAL, TopicCounter, Unit::Bytes, "Bytes of the Produce requests' records for the partitions appended (duplicates of idempotent batches included), by topic (the series without a topic is the total)."),
    (names::TOPIC_BYTES_OUT_TOTAL, TopicCounter, Unit::Bytes, "Record bytes sent to consumers, by topic (the series without a topic is the total)."),
    (names::TOPIC_BYTES_REJECTED_TOTAL, TopicCounter, Unit::Bytes, "Bytes of Produce requests' records refused for a batch larger than max.message.bytes, by topic (the series without a topic is the total)."),
    (names::TOPIC_PRODUCE_REQUESTS_TOTAL, TopicCounter, Unit::Count, "Produce requests per partition, by topic (the series without a topic is the total)."),
    (names::TOPIC_FAILED_PRODUCE_REQUESTS_TOTAL, TopicCounter, Unit::Count, "Produce requests per partition that failed with an error Kafka does not expect (not a moved leader, a batch too large or corrupt, a storage error), by topic (the series without a topic is the total)."),
    (names::REPLICATION_BYTES_OUT_TOTAL, Counter, Unit::Bytes, "Record bytes sent to follower replicas (not counted in bytesout)."),
    (names::REPLICATION_BYTES_IN_TOTAL, Counter, Unit::Bytes, "Record bytes this node appended as a follower (not counted in bytesin)."),
    (names::TOPIC_FETCH_REQUESTS_TOTAL, TopicCounter, Unit::Count, "Fetch requests per partition, by topic (the series without a topic is the total)."),
    (names::TOPIC_FAILED_FETCH_REQUESTS_TOTAL, TopicCounter, Unit::Count, "Fetch requests per partition that failed with an error Kafka does not expect (not a moved leader, an epoch, a storage error or an offset out of range), by topic (the series without a topic is the total)."),
    (names::FETCH_SESSIONS, Gauge, Unit::Count, "Incremental fetch sessions (KIP-227) in the fetch session cache."),
    (names::FETCH_SESSION_PARTITIONS, Gauge, Unit::Count, "Partitions held by all cached incremental fetch sessions."),
    (names::FETCH_SESSION_EVICTIONS_TOTAL, Counter, Unit::Count, "Incremental fetch sessions evicted from the cache to make room for new ones."),
    (names::FETCH_PURGATORY_SIZE, Gauge, Unit::Count, "Operations waiting in a purgatory, by delayedOperation (Fetch: fetches long-polling for records)."),
    (names::INCREMENTAL_FETCHES_TOTAL, Counter, Unit::Count, "Incremental fetches served by a fetch session (each advanced the session's epoch)."),
    (names::LOG_SIZE, LogGauge, Unit::Bytes, "Bytes of the partition's log segments."),
    (names::LOG_NUM_LOG_SEGMENTS, LogGauge, Unit::Count, "Segments of the partition's log."),
    (names::LOG_LOG_START_OFFSET, LogGauge, Unit::Count, "The partition log's start offset."),
    (names::LOG_LOG_END_OFFSET, LogGauge, Unit::Count, "The partition log's end offset."),
    (names::LOG_FLUSH_RATE_AND_TIME_MS, Histogram, Unit::Milliseconds, "Time of each fsync of a log segment's files, in milliseconds."),
    (names::LOG_CLEANER_PASSES_TOTAL, Counter, Unit::Count, "Log cleaner passes that rewrote a compacted log (cleanup.policy=compact)."),
    (names::LOG_CLEANER_BYTES_REMOVED_TOTAL, Counter, Unit::Bytes, "Bytes the log cleaner removed from compacted logs."),
    (names::LOG_CLEANER_CLEAN_SECONDS, Histogram, Unit::Seconds, "Time of one log cleaning pass over one log."),
    (names::MEMORY_POOL_AVAILABLE, Gauge, Unit::Bytes, "Bytes left in the queued.max.request.bytes request memory pool (below 0 by at most one frame)."),
    (names::MEMORY_POOL_USED, Gauge, Unit::Bytes, "Bytes of the request memory pool held by requests being read or served."),
    (names::REQUEST_QUEUE_SIZE, Gauge, Unit::Count, "Requests read from client connections and not yet answered (queued for or held by their handlers)."),
    (names::NETWORK_PROCESSOR_AVG_IDLE, Gauge, Unit::Count, "Fraction of recent time the worker threads serving connections were idle, averaged over the workers (1 = idle)."),
    (names::METADATA_IMAGE_DIGEST, Gauge, Unit::Count, "Low 52 bits of the published image's content digest; equal on every node at the same offset."),
    (names::METADATA_IMAGE_DIGEST_OFFSET, Gauge, Unit::Count, "Metadata log index of the image gregor_metadata_image_digest describes."),
    (names::METADATA_IMAGE_OFFSET, Gauge, Unit::Count, "Metadata log index of the last record applied to the published image."),
    (names::METADATA_IMAGE_TOPICS, Gauge, Unit::Count, "Topics in the published metadata image."),
    (names::METADATA_IMAGE_PARTITIONS, Gauge, Unit::Count, "Partitions in the published metadata image."),
    (names::METADATA_IMAGE_APPLY_SECONDS, Histogram, Unit::Seconds, "Time to build a new metadata image from a batch of committed records."),
    (names::METADATA_REPLAY_ERRORS_TOTAL, Counter, Unit::Count, "Metadata records that could not be replayed into the image."),
    (names::PUBLISHER_PUBLISH_SECONDS, Histogram, Unit::Seconds, "Time each metadata publisher spent on one image, by publisher."),
    (names::PUBLISHER_FAILURES_TOTAL, Counter, Unit::Count, "Metadata publisher errors and panics, by publisher."),
    (names::CONTROLLER_MUTATIONS_TOTAL, Counter, Unit::Count, "Metadata mutations the controller committed, by API (request)."),
    (names::CONTROLLER_RECORDS_TOTAL, Counter, Unit::Count, "Records the controller wrote to the metadata log."),
    (names::CONTROLLER_COMMIT_SECONDS, Histogram, Unit::Seconds, "Time from submitting a batch to the metadata log until it was committed and applied."),
    (names::CONFIG_UNIMPLEMENTED_KEYS, Gauge, Unit::Count, "Kafka configuration keys given at start-up that Gregor accepts but does not act on (listed in a start-up warning)."),
    (names::CONFIG_UNKNOWN_KEYS, Gauge, Unit::Count, "Configuration keys given at start-up that are neither Kafka's nor Gregor's (each logged with a did-you-mean hint)."),
    (names::BUILD_INFO, Gauge, Unit::Count, "Always 1; the version label is the running Gregor version."),
    (names::QUOTA_BYTE_RATE, Gauge, Unit::Count, "Measured byte rate of a Produce or Fetch quota sensor, in bytes per second."),
    (names::QUOTA_REQUEST_TIME, Gauge, Unit::Count, "Request-quota sensor: handler time as a percentage of one thread-second per second."),
    (names::QUOTA_TOKENS, Gauge, Unit::Count, "Controller-mutation quota sensor: tokens left in the bucket (negative when throttled)."),
    (names::QUOTA_MUTATION_RATE, Gauge, Unit::Count, "Controller-mutation quota sensor: partitions mutated per second."),
    (names::QUOTA_THROTTLE_TIME, Gauge, Unit::Count, "Average throttle time in ms applied to a quota sensor's connections."),
    (names::QUOTA_QUEUE_SIZE, Gauge, Unit::Count, "Connections currently muted by a quota manager, by resource."),
    (names::QUOTA_CALLBACK_FAILURES_TOTAL, Counter, Unit::Count, "Quota-callback calls that panicked, by callback and method."),
    (names::QUOTA_CALLBACK_CLUSTER_UPDATE_SECONDS, Histogram, Unit::Seconds, "Time a quota callback's update_cluster_metadata took, by callback."),
];

/// Registers the HELP text of every metric the recorder exports with it.
pub(crate) fn describe_all() {
    for &(name, kind, unit, help) in DESCRIPTIONS {
        match kind {
            Counter => metrics::describe_counter!(name, unit, help),
            Gauge => metrics::describe_gauge!(name, unit, help),
            Histogram => metrics::describe_histogram!(name, unit, help),
            TopicCounter | LogGauge => {}
        }
    }
}

/// The HELP text of `name`.
pub(crate) fn help(name: &str) -> Option<&'static str> {
    DESCRIPTIONS
        .iter()
        .find(|(described, ..)| *described == name)
        .map(|&(.., help)| help)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every string constant of names.rs, read from its source so a new name cannot be missed.
    fn declared_names() -> Vec<&'static str> {
        include_str!("names.rs")
            .split("pub const ")
            .skip(1)
            .filter_map(|declaration| declaration.split('"').nth(1))
            .collect()
    }

    #[test]
    fn every_name_has_a_description() {
        let declared = declared_names();
        assert!(declared.len() >= 30, "{declared:?}");
        for name in declared {
            assert!(
                DESCRIPTIONS
                    .iter()
                    .any(|(described, ..)| *described == name),
                "{name} has no HELP text in describe.rs"
            );
        }
        assert!(DESCRIPTIONS.iter().all(|(_, _, _, help)| !help.is_empty()));
    }
}
