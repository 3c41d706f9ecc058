//! Produce (key 0): validate and append each partition's batch to its log.
//!
//! The `records` bytes go to the log library untouched (kafka-protocol hands them over as
//! `Bytes`); it validates, assigns offsets and writes them on the partition's shard thread. A
//! batch that must be decompressed or recompressed is validated before, on a bounded pool of
//! blocking threads, so that it holds up only its own request. All partitions of a request are
//! queued first and awaited together, so they are appended in parallel across shards. acks=-1 is refused before the append when the ISR is smaller than
//! `min.insync.replicas`, and answered once the high watermark has passed the batch (every ISR
//! member has it; see `crate::replication::await_replication`).

use futures::future::join_all;
use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse,
    TopicProduceResponse,
};
use kafka_protocol::messages::{BrokerId, ProduceRequest, ProduceResponse, ResponseKind};
use kafka_protocol::protocol::StrBytes;

use gregor_log::batch::{self, BatchFraming, RecordBatch};
use gregor_log::compression::Compression;
use gregor_log::config::{LogConfig, TopicCompression};
use gregor_log::error::{LogError, RejectedBy};
use gregor_log::log::AppendInfo;
use gregor_metrics::ProduceOutcome;
use gregor_publishers::acl::{AclOperation, ResourceType};

use super::data::{
    leader_endpoints, led_partition, requested_topic, INVALID_REQUIRED_ACKS, KAFKA_STORAGE_ERROR,
    NONE, NOT_ENOUGH_REPLICAS, NOT_LEADER_OR_FOLLOWER, TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, UNSUPPORTED_COMPRESSION_TYPE,
};
use super::{ApiResponse, Delivery, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{HandlerContext, RequestInfo};
use crate::log_manager::{LogManagerError, ProducedBatch};

/// Codec id of zstd in a batch's attributes.
const ZSTD: u8 = 4;
/// Offset of the low byte of the attributes in a record batch v2 header.
const ATTRIBUTES_LOW_BYTE: usize = 22;
const CORRUPT_MESSAGE: i16 = 2;
const MESSAGE_TOO_LARGE: i16 = 10;
const RECORD_LIST_TOO_LARGE: i16 = 18;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;

/// Whether any batch of `records` has the transactional bit (Kafka's
/// `ProduceRequest.hasTransactionalRecords`): the batches the log store's framing finds, as
/// Kafka's iterator; an incomplete or corrupt tail ends the walk, and the append refuses it.
fn has_transactional_batch(records: &[u8]) -> bool {
    let mut rest = records;
    while let BatchFraming::Complete(size) = batch::framing(rest) {
        let Some((head, tail)) = rest.split_at_checked(size) else {
            return false;
        };
        if RecordBatch::new(head).is_ok_and(|batch| batch.is_transactional()) {
            return true;
        }
        rest = tail;
    }
    false
}

/// A partition whose batch is to be appended; `slot` is its place (topic, partition) in the
/// response.
struct Accepted {
    slot: (usize, usize),
    log_start: i64,
    name: String,
    index: i32,
    records: bytes::Bytes,
    /// The size of `records` as the request carried them (Kafka's `records.sizeInBytes`), for
    /// the broker topic metrics once they have been handed to the log.
    request_bytes: u64,
    epoch: i32,
    state: std::sync::Arc<crate::log_manager::PartitionState>,
    logs: std::sync::Arc<crate::log_manager::LogManager>,
}

/// The codec id in the attributes of the batch that starts `records` (read before the log
/// library parses it).
fn codec_id(records: &[u8]) -> Option<u8> {
    records
        .get(ATTRIBUTES_LOW_BYTE)
        .map(|attributes| attributes & 7)
}

/// Whether validating `records` means decompressing or recompressing them: compressed by the
/// producer, or to be compressed for the topic.
fn costly_to_validate(records: &[u8], config: &LogConfig) -> bool {
    codec_id(records).is_some_and(|codec| codec != 0)
        || matches!(config.compression, TopicCompression::Codec(codec) if codec != Compression::None)
}

/// How the broker topic metrics count a refusal with `code` (Kafka's `appendToLocalLog`): the
/// errors it expects are not failures, since its failed-produce meter stands for the broker's
/// unexpected ones.
fn refusal(code: i16) -> ProduceOutcome {
    match code {
        UNKNOWN_TOPIC_OR_PARTITION
        | NOT_LEADER_OR_FOLLOWER
        | MESSAGE_TOO_LARGE
        | RECORD_LIST_TOO_LARGE
        | CORRUPT_MESSAGE
        | KAFKA_STORAGE_ERROR => ProduceOutcome::Refused,
        _ => ProduceOutcome::Failed,
    }
}

/// How the broker topic metrics count an append's `result` for a partition whose request carried
/// `request_bytes`; `None` for records Kafka refuses in `ProduceRequest.validateRecords`, before
/// any meter. A duplicate counts as Kafka's `UnifiedLog.append` answers it: the original
/// offsets' records and the request's bytes. A batch over `max.message.bytes` is rejected
/// bytes.
fn append_outcome(
    result: &Result<AppendInfo, LogManagerError>,
    request_bytes: u64,
) -> Option<ProduceOutcome> {
    match result {
        Ok(appended) => Some(ProduceOutcome::Appended {
            messages: u64::try_from(appended.last_offset - appended.first_offset + 1).unwrap_or(0),
            bytes: request_bytes,
        }),
        Err(LogManagerError::Log(LogError::Rejected(rejection))) => match rejection.by {
            RejectedBy::Request => None,
            RejectedBy::MaxMessageBytes => Some(ProduceOutcome::TooLarge {
                bytes: request_bytes,
            }),
            RejectedBy::Log => Some(refusal(rejection.code.code())),
        },
        Err(error) => Some(refusal(error.code())),
    }
}

fn failed(index: i32, code: i16) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(code)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
}

pub(super) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ProduceRequest,
) -> ApiResponse {
    let version = info.api_version;
    let image = ctx.image.load_full();
    let acks = request.acks;
    let deadline = tokio::time::Instant::now()
        + std::time::Duration::from_millis(u64::try_from(request.timeout_ms).unwrap_or(0));
    let acks_valid = matches!(acks, -1..=1);
    // Kafka: WRITE on the transactional id refuses the whole request, WRITE on each topic
    // its partitions (before the topic's existence is looked at).
    let access = Access::new(ctx, info);
    let transactional = request.topic_data.iter().any(|topic| {
        topic
            .partition_data
            .iter()
            .any(|data| data.records.as_deref().is_some_and(has_transactional_batch))
    });
    let transactional_denied = transactional
        && request.transactional_id.as_ref().is_none_or(|id| {
            !access.allows(AclOperation::Write, ResourceType::TransactionalId, id)
        });
    let mut responses: Vec<TopicProduceResponse> = Vec::with_capacity(request.topic_data.len());
    let mut accepted = Vec::new();
    let mut leaders = Vec::new();
    for (topic_index, topic) in request.topic_data.into_iter().enumerate() {
        let (name, unknown_topic) =
            requested_topic(&image, version >= 13, &topic.topic_id, &topic.name);
        let mut partitions = Vec::with_capacity(topic.partition_data.len());
        let topic_denied = name
            .as_deref()
            .is_some_and(|n| !access.allows(AclOperation::Write, ResourceType::Topic, n));
        for data in topic.partition_data {
            let index = data.index;
            if transactional_denied {
                partitions.push(failed(index, TRANSACTIONAL_ID_AUTHORIZATION_FAILED));
                continue;
            }
            if topic_denied {
                partitions.push(failed(index, TOPIC_AUTHORIZATION_FAILED));
                continue;
            }
            if !acks_valid {
                partitions.push(failed(index, INVALID_REQUIRED_ACKS));
                continue;
            }
            // Only the group coordinator writes __consumer_offsets (Kafka's internal topics
            // refuse client appends, without a message for the client and with an unknown log
            // start offset).
            if name.as_deref() == Some(crate::groups::OFFSETS_TOPIC) {
                // Kafka counts the request (its partition exists) before it refuses the
                // internal topic, without a failure.
                let exists = image
                    .topics
                    .get_by_name(crate::groups::OFFSETS_TOPIC)
                    .is_some_and(|topic| topic.partition(index).is_some());
                if exists {
                    gregor_metrics::topic_produce(
                        crate::groups::OFFSETS_TOPIC,
                        ProduceOutcome::Refused,
                    );
                }
                partitions.push(failed(index, INVALID_TOPIC_EXCEPTION));
                continue;
            }
            let led = match led_partition(
                ctx,
                &image,
                name.as_deref(),
                index,
                unknown_topic,
                true,
                None,
            ) {
                Ok(led) => led,
                Err(not_served) => {
                    // Kafka counts a partition of the metadata before it looks for its leader.
                    if let (Some(name), false) = (
                        &name,
                        matches!(
                            not_served.code,
                            UNKNOWN_TOPIC_OR_PARTITION | UNKNOWN_TOPIC_ID
                        ),
                    ) {
                        gregor_metrics::topic_produce(name, refusal(not_served.code));
                    }
                    let mut response = failed(index, not_served.code);
                    if let (Some((leader, epoch)), true) =
                        (not_served.leader, not_served.code == NOT_LEADER_OR_FOLLOWER)
                    {
                        response.current_leader = LeaderIdAndEpoch::default()
                            .with_leader_id(BrokerId(leader))
                            .with_leader_epoch(epoch);
                        leaders.push(leader);
                    }
                    partitions.push(response);
                    continue;
                }
            };
            let log_start = led.state.log_start_offset();
            let records = data.records.unwrap_or_default();
            if version < 7 && codec_id(&records) == Some(ZSTD) {
                partitions.push(
                    failed(index, UNSUPPORTED_COMPRESSION_TYPE).with_log_start_offset(log_start),
                );
                continue;
            }
            // Gregor has no transaction coordinator, so no transaction is ever open. Kafka
            // verifies a transactional batch with the coordinator before it reaches the log
            // (KIP-890, `transaction.partition.verification.enable`), and answers a coordinator
            // it cannot reach with the retriable NOT_ENOUGH_REPLICAS, which older clients retry
            // without a metadata refresh (`ReplicaManager`'s `postVerificationCallback`).
            if transactional && has_transactional_batch(&records) {
                partitions.push(
                    failed(index, NOT_ENOUGH_REPLICAS)
                        .with_log_start_offset(log_start)
                        .with_error_message(Some(StrBytes::from_static_str(
                            "Unable to verify the partition has been added to the transaction. Underlying error: COORDINATOR_NOT_AVAILABLE",
                        ))),
                );
                continue;
            }
            let replicas = led.registration.replicas.as_slice().len() as i32;
            let isr = led.registration.isr.as_slice().len() as i32;
            // Without a message: Kafka sends only a record validation failure's text to the
            // client (`LogAppendResult`'s `hasCustomErrorMessage`).
            if acks == -1 && isr < led.state.min_insync_replicas().min(replicas) {
                // Kafka's `Partition.appendRecordsToLeader` throws it: an unexpected failure.
                gregor_metrics::topic_produce(
                    name.as_deref().unwrap_or_default(),
                    ProduceOutcome::Failed,
                );
                partitions
                    .push(failed(index, NOT_ENOUGH_REPLICAS).with_log_start_offset(log_start));
                continue;
            }
            let epoch = led.registration.leader_epoch;
            let Some(logs) = ctx.logs.clone() else {
                gregor_metrics::topic_produce(
                    name.as_deref().unwrap_or_default(),
                    refusal(NOT_LEADER_OR_FOLLOWER),
                );
                partitions.push(failed(index, NOT_LEADER_OR_FOLLOWER));
                continue;
            };
            let slot = (topic_index, partitions.len());
            partitions.push(failed(index, NONE));
            accepted.push(Accepted {
                slot,
                log_start,
                name: name.clone().unwrap_or_default(),
                index,
                request_bytes: records.len() as u64,
                records,
                epoch,
                state: led.state,
                logs,
            });
        }
        responses.push(
            TopicProduceResponse::default()
                .with_name(topic.name)
                .with_topic_id(topic.topic_id)
                .with_partition_responses(partitions),
        );
    }
    // A batch that must be decompressed or recompressed is validated first, on a blocking
    // thread, so that a costly one (a decompression bomb) holds up only its own request, not
    // every partition of its shard; the others are validated by their shard as they are
    // appended, cheaper than a hand-off.
    let validations = accepted.iter_mut().map(|partition| {
        let records = std::mem::take(&mut partition.records);
        async move {
            let config = partition.state.config();
            if !costly_to_validate(&records, &config) {
                return Ok(ProducedBatch::Raw(records));
            }
            partition
                .logs
                .validate_apart(config, &partition.name, partition.index, records)
                .await
        }
    });
    let batches = join_all(validations).await;
    // Every append is queued, in request order, before any is awaited: the shards write them in
    // parallel, and a connection serving the next Produce meanwhile queues its appends behind.
    let mut queued = Vec::with_capacity(accepted.len());
    for (partition, batch) in accepted.into_iter().zip(batches) {
        let append = match batch {
            Ok(batch) => {
                let logs = &partition.logs;
                logs.queue_append(&partition.name, partition.index, batch, partition.epoch)
                    .await
            }
            Err(rejected) => Err(rejected),
        };
        queued.push((partition, append));
    }
    if acks != 0 {
        if let Some(appends_queued) = &info.appends_queued {
            appends_queued.raise();
        }
    }
    let appends = queued.into_iter().map(|(partition, append)| async move {
        let result = match append {
            Ok(append) => append.outcome().await,
            Err(error) => Err(error),
        };
        // Only acks=all waits for others (its remote time); the clock is read only then.
        let (replicated, waited) = match &result {
            Ok(appended) if acks == -1 => {
                let waiting = std::time::Instant::now();
                let replicated = crate::replication::await_replication(
                    &partition.state,
                    partition.epoch,
                    appended.last_offset + 1,
                    deadline,
                )
                .await;
                (replicated, waiting.elapsed())
            }
            _ => (Ok(()), std::time::Duration::ZERO),
        };
        if let Some(outcome) = append_outcome(&result, partition.request_bytes) {
            gregor_metrics::topic_produce(&partition.name, outcome);
        }
        (
            partition.slot,
            partition.log_start,
            result,
            replicated,
            waited,
        )
    });
    // The partitions wait together: the request waited as long as the slowest.
    let mut remote_time = std::time::Duration::ZERO;
    for ((topic_index, slot), log_start, result, replicated, waited) in join_all(appends).await {
        remote_time = remote_time.max(waited);
        let response = &mut responses[topic_index].partition_responses[slot];
        match result {
            Ok(_) if replicated.is_err() => {
                response.error_code = replicated.err().unwrap_or(NONE);
                response.log_start_offset = log_start;
            }
            Ok(appended) => {
                response.error_code = NONE;
                response.base_offset = appended.first_offset;
                response.log_append_time_ms = appended.log_append_time;
                response.log_start_offset = appended.log_start_offset;
            }
            Err(error) => {
                response.error_code = error.code();
                response.log_start_offset = log_start;
                if let LogManagerError::Log(gregor_log::error::LogError::Rejected(rejection)) =
                    &error
                {
                    response.record_errors = rejection
                        .record_errors
                        .iter()
                        .map(|e| {
                            BatchIndexAndErrorMessage::default()
                                .with_batch_index(e.batch_index)
                                .with_batch_index_error_message(Some(StrBytes::from_string(
                                    e.message.clone(),
                                )))
                        })
                        .collect();
                    response.error_message = rejection
                        .error_message()
                        .map(|message| StrBytes::from_string(message.to_owned()));
                }
                tracing::debug!(partition = response.index, %error, "produce refused");
            }
        }
    }
    let mut errors = ErrorCounts::default();
    let mut any_error = false;
    for partition in responses.iter().flat_map(|t| &t.partition_responses) {
        errors.add(partition.error_code);
        any_error |= partition.error_code != NONE;
    }
    let mut body = ProduceResponse::default().with_responses(responses);
    if version >= 10 {
        body.node_endpoints = leader_endpoints(
            &image,
            &info.listener_name,
            leaders,
            |id, host, port, rack| {
                NodeEndpoint::default()
                    .with_node_id(BrokerId(id))
                    .with_host(host)
                    .with_port(port)
                    .with_rack(rack)
            },
        );
    }
    let mut response = ApiResponse::new(ResponseKind::Produce(body), errors);
    response.remote_time = remote_time;
    if acks == 0 {
        // No answer at all; on an error Kafka closes the connection so the client refreshes
        // its metadata.
        response.delivery = if any_error {
            Delivery::Close
        } else {
            Delivery::Silent
        };
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use gregor_log::error::{BatchRejection, KafkaCode};

    fn rejected(code: KafkaCode, by: RejectedBy) -> Result<AppendInfo, LogManagerError> {
        Err(LogManagerError::Log(LogError::Rejected(BatchRejection {
            by,
            ..BatchRejection::new(code, "refused")
        })))
    }

    /// Kafka's `appendToLocalLog` counts every partition it is given and fails only what it
    /// does not expect; `validateRecords` refuses before it. A duplicate counts as appended.
    #[test]
    fn appends_count_as_kafkas_append_to_local_log() {
        let duplicate = AppendInfo {
            first_offset: 4,
            last_offset: 6,
            log_append_time: -1,
            log_start_offset: 0,
            record_count: 3,
            duplicate: true,
            rebuilt: false,
        };
        assert_eq!(
            append_outcome(&Ok(duplicate), 120),
            Some(ProduceOutcome::Appended {
                messages: 3,
                bytes: 120
            })
        );
        let refused = Some(ProduceOutcome::Refused);
        let failed = Some(ProduceOutcome::Failed);
        for (code, expected) in [
            (KafkaCode::MessageTooLarge, refused),
            (KafkaCode::RecordListTooLarge, refused),
            (KafkaCode::CorruptMessage, refused),
            (KafkaCode::KafkaStorageError, refused),
            (KafkaCode::InvalidRecord, failed),
            (KafkaCode::InvalidTimestamp, failed),
            (KafkaCode::UnknownServerError, failed),
        ] {
            assert_eq!(
                append_outcome(&rejected(code, RejectedBy::Log), 120),
                expected,
                "{code:?}"
            );
            assert_eq!(
                append_outcome(&rejected(code, RejectedBy::Request), 120),
                None,
                "{code:?}"
            );
        }
        assert_eq!(
            append_outcome(
                &rejected(KafkaCode::MessageTooLarge, RejectedBy::MaxMessageBytes),
                120
            ),
            Some(ProduceOutcome::TooLarge { bytes: 120 })
        );
        for (code, expected) in [
            (KafkaCode::OutOfOrderSequenceNumber, failed),
            (KafkaCode::InvalidProducerEpoch, failed),
        ] {
            let producer = Err(LogManagerError::Log(LogError::Producer {
                code,
                message: String::new(),
            }));
            assert_eq!(append_outcome(&producer, 120), expected, "{code:?}");
        }
        let gone = Err(LogManagerError::NoLog("t-0".into()));
        assert_eq!(append_outcome(&gone, 120), refused);
        let offline = Err(LogManagerError::Log(LogError::LogDirOffline("d".into())));
        assert_eq!(append_outcome(&offline, 120), refused);
    }

    #[test]
    fn refusals_before_the_append_count_as_kafkas() {
        for code in [
            UNKNOWN_TOPIC_OR_PARTITION,
            NOT_LEADER_OR_FOLLOWER,
            KAFKA_STORAGE_ERROR,
            MESSAGE_TOO_LARGE,
            RECORD_LIST_TOO_LARGE,
            CORRUPT_MESSAGE,
        ] {
            assert_eq!(refusal(code), ProduceOutcome::Refused, "{code}");
        }
        const INVALID_RECORD: i16 = 87;
        for code in [NOT_ENOUGH_REPLICAS, INVALID_RECORD, -1] {
            assert_eq!(refusal(code), ProduceOutcome::Failed, "{code}");
        }
    }
}
