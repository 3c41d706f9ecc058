//! Metric names. Every series Gregor exports is named here and nowhere else.

/// Completed requests, labels `request` (API name) and `version`.
pub const REQUESTS_TOTAL: &str = "kafka_network_requestmetrics_requests_total";
/// Error codes in responses, labels `request` and `error` (Kafka's error name, `NONE` included).
pub const ERRORS_TOTAL: &str = "kafka_network_requestmetrics_errors_total";
/// Time from a complete request frame being read until its handler starts, label `request`.
pub const REQUEST_QUEUE_TIME_SECONDS: &str =
    "kafka_network_requestmetrics_request_queue_time_seconds";
/// Time spent in the request's handler, label `request`.
pub const LOCAL_TIME_SECONDS: &str = "kafka_network_requestmetrics_local_time_seconds";
/// Time a request waited for others: a Fetch for records, an acks=all Produce for its followers
/// (Kafka's `RemoteTimeMs`, the purgatory wait).
pub const REMOTE_TIME_SECONDS: &str = "kafka_network_requestmetrics_remote_time_seconds";
/// Throttle time carried by the response, label `request`.
pub const THROTTLE_TIME_SECONDS: &str = "kafka_network_requestmetrics_throttle_time_seconds";
/// Time to write the response to the socket, label `request`.
pub const RESPONSE_SEND_TIME_SECONDS: &str =
    "kafka_network_requestmetrics_response_send_time_seconds";
/// Time from the request frame being read until its response is written, label `request`.
pub const TOTAL_TIME_SECONDS: &str = "kafka_network_requestmetrics_total_time_seconds";
/// Size of request frames (header + body), label `request`.
pub const REQUEST_BYTES: &str = "kafka_network_requestmetrics_request_bytes";

/// Records appended by Produce, label `topic` (and a total without it), as the JMX exporter
/// names Kafka's `BrokerTopicMetrics.MessagesInPerSec`.
pub const TOPIC_MESSAGES_IN_TOTAL: &str = "kafka_server_brokertopicmetrics_messagesin_total";
/// Bytes of the Produce requests' records appended, label `topic` (and a total without it).
pub const TOPIC_BYTES_IN_TOTAL: &str = "kafka_server_brokertopicmetrics_bytesin_total";
/// Record bytes sent to consumers, label `topic` (and a total without it).
pub const TOPIC_BYTES_OUT_TOTAL: &str = "kafka_server_brokertopicmetrics_bytesout_total";
/// Bytes of Produce requests' records refused for a batch larger than `max.message.bytes`,
/// label `topic` (and a total without it), as Kafka's `BytesRejectedPerSec`.
pub const TOPIC_BYTES_REJECTED_TOTAL: &str = "kafka_server_brokertopicmetrics_bytesrejected_total";
/// Record bytes sent to follower replicas (Kafka's `ReplicationBytesOutPerSec`, a total).
pub const REPLICATION_BYTES_OUT_TOTAL: &str =
    "kafka_server_brokertopicmetrics_replicationbytesout_total";
/// Record bytes a follower appended from its leaders (`ReplicationBytesInPerSec`, a total).
pub const REPLICATION_BYTES_IN_TOTAL: &str =
    "kafka_server_brokertopicmetrics_replicationbytesin_total";
/// Produce requests per partition, label `topic` (and a total without it).
pub const TOPIC_PRODUCE_REQUESTS_TOTAL: &str =
    "kafka_server_brokertopicmetrics_totalproducerequests_total";
/// Failed produce requests per partition, label `topic` (and a total without it).
pub const TOPIC_FAILED_PRODUCE_REQUESTS_TOTAL: &str =
    "kafka_server_brokertopicmetrics_failedproducerequests_total";
/// Fetch requests per partition, label `topic` (and a total without it).
pub const TOPIC_FETCH_REQUESTS_TOTAL: &str =
    "kafka_server_brokertopicmetrics_totalfetchrequests_total";
/// Failed fetch requests per partition, label `topic` (and a total without it).
pub const TOPIC_FAILED_FETCH_REQUESTS_TOTAL: &str =
    "kafka_server_brokertopicmetrics_failedfetchrequests_total";

/// Incremental fetch sessions in the cache (KIP-227), as the JMX exporter names Kafka's
/// `FetchSessionCache.NumIncrementalFetchSessions`.
pub const FETCH_SESSIONS: &str = "kafka_server_fetchsessioncache_numincrementalfetchsessions";
/// Partitions held by all cached fetch sessions (`NumIncrementalFetchPartitionsCached`).
pub const FETCH_SESSION_PARTITIONS: &str =
    "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached";
/// Fetch sessions evicted to make room (`IncrementalFetchSessionEvictionsPerSec`).
pub const FETCH_SESSION_EVICTIONS_TOTAL: &str =
    "kafka_server_fetchsessioncache_incrementalfetchsessionevictions_total";
/// Fetches waiting for records (Kafka's `DelayedOperationPurgatory.PurgatorySize` with
/// `delayedOperation=Fetch`).
pub const FETCH_PURGATORY_SIZE: &str = "kafka_server_delayedoperationpurgatory_purgatorysize";
/// Incremental fetches served by a session (each one advanced a session epoch).
pub const INCREMENTAL_FETCHES_TOTAL: &str = "gregor_fetch_session_incremental_fetches_total";

/// Log cleaner passes that rewrote a compacted log.
pub const LOG_CLEANER_PASSES_TOTAL: &str = "gregor_log_cleaner_passes_total";
/// Bytes the log cleaner removed from compacted logs.
pub const LOG_CLEANER_BYTES_REMOVED_TOTAL: &str = "gregor_log_cleaner_bytes_removed_total";
/// Time of one log cleaning pass over one log.
pub const LOG_CLEANER_CLEAN_SECONDS: &str = "gregor_log_cleaner_clean_seconds";

/// Connections accepted, label `listener`.
pub const CONNECTIONS_ACCEPTED_TOTAL: &str = "gregor_network_connections_accepted_total";
/// Connections currently open, label `listener`.
pub const CONNECTIONS_ACTIVE: &str = "gregor_network_connections_active";
/// Connections closed, labels `listener` and `reason` (see [`CloseReason`](crate::CloseReason)).
pub const CONNECTIONS_CLOSED_TOTAL: &str = "gregor_network_connections_closed_total";
/// Successful SASL authentications, labels `listener` and `mechanism` (Kafka's
/// `successful-authentication-total`).
pub const SASL_AUTHENTICATIONS_TOTAL: &str = "gregor_authentications_total";
/// Failed authentications (Kafka's `failed-authentication-total`), labels `listener`,
/// `mechanism` (empty before one is agreed, and for TLS) and `reason` (`invalid_credentials`,
/// `unsupported_mechanism`, `illegal_sasl_state`, `malformed_request`, `ssl_handshake_failed`).
pub const SASL_AUTHENTICATION_FAILURES_TOTAL: &str = "gregor_authentication_failures_total";
/// Bytes left in the `queued.max.request.bytes` pool (Kafka's SocketServer
/// `MemoryPoolAvailable`, as the JMX exporter names it).
pub const MEMORY_POOL_AVAILABLE: &str = "kafka_network_socketserver_memorypoolavailable";
/// Bytes of the pool held by requests being read or served (`MemoryPoolUsed`).
pub const MEMORY_POOL_USED: &str = "kafka_network_socketserver_memorypoolused";

/// Requests read from client connections and not yet answered (Kafka's RequestChannel
/// `RequestQueueSize`, as the JMX exporter names it). Gregor has no queue between network and
/// I/O threads: a request's handler runs on its connection's task and waits in the actors'
/// queues, so this counts what Kafka's request queue and its busy I/O threads hold together.
pub const REQUEST_QUEUE_SIZE: &str = "kafka_network_requestchannel_requestqueuesize";
/// Fraction of the last few seconds the runtime's worker threads, which read, decode and
/// answer client requests, spent idle, averaged over the workers (Kafka's SocketServer
/// `NetworkProcessorAvgIdlePercent`: 1 is fully idle).
pub const NETWORK_PROCESSOR_AVG_IDLE: &str =
    "kafka_network_socketserver_networkprocessoravgidlepercent";

/// Raft log index of the last record applied to the published metadata image.
pub const METADATA_IMAGE_OFFSET: &str = "gregor_metadata_image_offset";
/// Topics in the published image.
pub const METADATA_IMAGE_TOPICS: &str = "gregor_metadata_image_topics";
/// Partitions in the published image.
pub const METADATA_IMAGE_PARTITIONS: &str = "gregor_metadata_image_partitions";
/// Digest of the published image's content (its low 52 bits, exact in a gauge): equal on every
/// node that has applied the same log prefix.
pub const METADATA_IMAGE_DIGEST: &str = "gregor_metadata_image_digest";
/// Raft log index of the image `gregor_metadata_image_digest` describes.
pub const METADATA_IMAGE_DIGEST_OFFSET: &str = "gregor_metadata_image_digest_offset";
/// Time to build a new image from a batch of committed records.
pub const METADATA_IMAGE_APPLY_SECONDS: &str = "gregor_metadata_image_apply_seconds";
/// Committed records that could not be applied to the image; each one stops metadata processing
/// and the node exits (Kafka's fatal fault handler).
pub const METADATA_REPLAY_ERRORS_TOTAL: &str = "gregor_metadata_replay_errors_total";
/// Time each publisher spent on one image, label `publisher`.
pub const PUBLISHER_PUBLISH_SECONDS: &str = "gregor_metadata_publisher_publish_seconds";
/// Publisher failures (errors and panics), label `publisher`.
pub const PUBLISHER_FAILURES_TOTAL: &str = "gregor_metadata_publisher_failures_total";

/// Metadata mutations the controller committed, label `request`.
pub const CONTROLLER_MUTATIONS_TOTAL: &str = "gregor_controller_mutations_total";
/// Records the controller wrote to the metadata log.
pub const CONTROLLER_RECORDS_TOTAL: &str = "gregor_controller_records_total";
/// Time from submitting a batch to the metadata log until it was committed and applied.
pub const CONTROLLER_COMMIT_SECONDS: &str = "gregor_controller_commit_seconds";

/// Kafka configuration keys given at start-up that Gregor accepts but does not act on.
pub const CONFIG_UNIMPLEMENTED_KEYS: &str = "gregor_config_unimplemented_keys";
/// Configuration keys given at start-up that are neither Kafka's nor Gregor's.
pub const CONFIG_UNKNOWN_KEYS: &str = "gregor_config_unknown_keys";
/// Gregor's version, as the label `version` of a gauge that is always 1.
pub const BUILD_INFO: &str = "gregor_build_info";

/// Client quotas (names after the JMX-exporter mapping of Kafka's quota metrics, labels
/// `resource`, `user`, `clientId`): the measured byte rate of a Produce or Fetch sensor.
pub const QUOTA_BYTE_RATE: &str = "kafka_server_quota_byte_rate";
/// Request-quota sensor: handler time as a percentage of one thread-second per second.
pub const QUOTA_REQUEST_TIME: &str = "kafka_server_quota_request_time";
/// Controller-mutation sensor: tokens left in the bucket (negative = throttled).
pub const QUOTA_TOKENS: &str = "kafka_server_quota_tokens";
/// Controller-mutation sensor: partitions mutated per second.
pub const QUOTA_MUTATION_RATE: &str = "kafka_server_quota_mutation_rate";
/// Average throttle time (ms) applied to a sensor's connections, label `resource` too.
pub const QUOTA_THROTTLE_TIME: &str = "kafka_server_quota_throttle_time";
/// Connections currently muted by a quota manager, label `resource`.
pub const QUOTA_QUEUE_SIZE: &str = "kafka_server_quota_queue_size";
/// Quota-callback calls that panicked, labels `callback` (its name) and `method`; the node keeps
/// the limits it had and goes on serving.
pub const QUOTA_CALLBACK_FAILURES_TOTAL: &str = "gregor_quota_callback_failures_total";
/// Time a quota callback's `update_cluster_metadata` took, label `callback`.
pub const QUOTA_CALLBACK_CLUSTER_UPDATE_SECONDS: &str =
    "gregor_quota_callback_cluster_update_seconds";

/// The metadata quorum's leader as this node knows it, -1 when unknown (Kafka's `raft-metrics`
/// `current-leader`).
pub const RAFT_CURRENT_LEADER: &str = "kafka_server_raft_metrics_current_leader";
/// The node this one voted for in the current epoch: itself as leader or candidate, -1 when it
/// follows a leader or has not voted (`raft-metrics` `current-vote`).
pub const RAFT_CURRENT_VOTE: &str = "kafka_server_raft_metrics_current_vote";
/// The metadata quorum's epoch (raft term) as this node knows it (`current-epoch`).
pub const RAFT_CURRENT_EPOCH: &str = "kafka_server_raft_metrics_current_epoch";
/// The offset after the last metadata record this node applied, -1 before any
/// (`high-watermark`).
pub const RAFT_HIGH_WATERMARK: &str = "kafka_server_raft_metrics_high_watermark";
/// The offset after the last record in this node's metadata log (`log-end-offset`).
pub const RAFT_LOG_END_OFFSET: &str = "kafka_server_raft_metrics_log_end_offset";

/// 1 on the active controller, 0 on every other node (Kafka's
/// `KafkaController.ActiveControllerCount`).
pub const CONTROLLER_ACTIVE_CONTROLLER_COUNT: &str =
    "kafka_controller_kafkacontroller_activecontrollercount";
/// Topics in the metadata image (`KafkaController.GlobalTopicCount`).
pub const CONTROLLER_GLOBAL_TOPIC_COUNT: &str = "kafka_controller_kafkacontroller_globaltopiccount";
/// Partitions in the metadata image (`KafkaController.GlobalPartitionCount`).
pub const CONTROLLER_GLOBAL_PARTITION_COUNT: &str =
    "kafka_controller_kafkacontroller_globalpartitioncount";
/// Partitions without a leader (`KafkaController.OfflinePartitionsCount`).
pub const CONTROLLER_OFFLINE_PARTITIONS_COUNT: &str =
    "kafka_controller_kafkacontroller_offlinepartitionscount";
/// Partitions not led by their first replica, leaderless ones included
/// (`KafkaController.PreferredReplicaImbalanceCount`).
pub const CONTROLLER_PREFERRED_REPLICA_IMBALANCE_COUNT: &str =
    "kafka_controller_kafkacontroller_preferredreplicaimbalancecount";
/// Registered brokers that are fenced (`KafkaController.FencedBrokerCount`).
pub const CONTROLLER_FENCED_BROKER_COUNT: &str =
    "kafka_controller_kafkacontroller_fencedbrokercount";
/// Registered brokers that are not fenced (`KafkaController.ActiveBrokerCount`).
pub const CONTROLLER_ACTIVE_BROKER_COUNT: &str =
    "kafka_controller_kafkacontroller_activebrokercount";

/// Partitions this broker leads (Kafka's `ReplicaManager.LeaderCount`).
pub const REPLICA_LEADER_COUNT: &str = "kafka_server_replicamanager_leadercount";
/// Partitions this broker leads whose ISR is smaller than their replica set (Kafka's
/// `ReplicaManager.UnderReplicatedPartitions`).
pub const REPLICA_UNDER_REPLICATED_PARTITIONS: &str =
    "kafka_server_replicamanager_underreplicatedpartitions";
/// Partitions this broker leads whose ISR is smaller than their `min.insync.replicas` (capped at
/// the replica count), so acks=all produces fail (Kafka's `ReplicaManager.
/// UnderMinIsrPartitionCount`, from `Partition.isUnderMinIsr`).
pub const REPLICA_UNDER_MIN_ISR_PARTITION_COUNT: &str =
    "kafka_server_replicamanager_underminisrpartitioncount";
/// Partitions this broker leads whose ISR is exactly that minimum: one more replica lost and
/// acks=all produces fail (`ReplicaManager.AtMinIsrPartitionCount`, `Partition.isAtMinIsr`).
pub const REPLICA_AT_MIN_ISR_PARTITION_COUNT: &str =
    "kafka_server_replicamanager_atminisrpartitioncount";
/// Partition logs this broker hosts that are offline: their log dir failed, or no log dir could
/// hold them (Kafka's `ReplicaManager.OfflineReplicaCount`).
pub const REPLICA_OFFLINE_REPLICA_COUNT: &str = "kafka_server_replicamanager_offlinereplicacount";
/// Partition logs this broker has opened, those whose log dir went offline since included (Kafka's
/// `ReplicaManager.PartitionCount`).
pub const REPLICA_PARTITION_COUNT: &str = "kafka_server_replicamanager_partitioncount";
/// Bytes of a partition's log segments, labels `topic` and `partition` (Kafka's
/// `kafka.log:type=Log,name=Size`, as the JMX exporter names it); rendered at scrape time.
pub const LOG_SIZE: &str = "kafka_log_log_size";
/// Segments of a partition's log (`Log.NumLogSegments`), labels `topic` and `partition`.
pub const LOG_NUM_LOG_SEGMENTS: &str = "kafka_log_log_numlogsegments";
/// A partition's log start offset (`Log.LogStartOffset`), labels `topic` and `partition`.
pub const LOG_LOG_START_OFFSET: &str = "kafka_log_log_logstartoffset";
/// A partition's log end offset (`Log.LogEndOffset`), labels `topic` and `partition`.
pub const LOG_LOG_END_OFFSET: &str = "kafka_log_log_logendoffset";
/// Time of each fsync of a segment's files, a histogram in milliseconds (Kafka's
/// `LogFlushStats.LogFlushRateAndTimeMs` timer; its `_count` is the JMX exporter's count).
pub const LOG_FLUSH_RATE_AND_TIME_MS: &str = "kafka_log_logflushstats_logflushrateandtimems";
/// Log dirs marked offline after a storage error (Kafka's `LogManager.OfflineLogDirectoryCount`).
pub const LOG_OFFLINE_LOG_DIRECTORY_COUNT: &str = "kafka_log_logmanager_offlinelogdirectorycount";
/// ISR shrinks this broker's leaders committed through AlterPartition (`IsrShrinksPerSec`).
pub const REPLICA_ISR_SHRINKS_TOTAL: &str = "kafka_server_replicamanager_isrshrinks_total";
/// ISR expansions this broker's leaders committed through AlterPartition (`IsrExpandsPerSec`).
pub const REPLICA_ISR_EXPANDS_TOTAL: &str = "kafka_server_replicamanager_isrexpands_total";
/// How many messages a followed partition's log end is behind the leader's high watermark, per
/// partition (Kafka's `FetcherLagMetrics.ConsumerLag`, labelled `clientId` =
/// `ReplicaFetcherThread-0-<leader id>`, `topic`, `partition`).
pub const REPLICA_FETCHER_CONSUMER_LAG: &str = "kafka_server_fetcherlagmetrics_consumerlag";
/// The largest of those lags on this broker (Kafka's `ReplicaFetcherManager.MaxLag`, labelled
/// `clientId="Replica"`).
pub const REPLICA_FETCHER_MAX_LAG: &str = "kafka_server_replicafetchermanager_maxlag";
