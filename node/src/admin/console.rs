//! `gregor console-producer` (kafka-console-producer.sh), `gregor console-consumer`
//! (kafka-console-consumer.sh, with or without a consumer group) and `gregor get-offsets`
//! (kafka-get-offsets.sh). They speak the wire protocol to each partition's leader, found
//! through Metadata, and build and read record batches with `gregor-log`.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, Write as _};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use clap::Args;
use gregor_log::batch::{BatchBuilder, Header, RecordBatch};
use gregor_log::compression::Compression;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    BrokerId, FetchRequest, ListOffsetsRequest, ProduceRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::console_group::GroupMember;
use super::records::{cluster_view, ClusterView};
use super::{block_on, AdminClient, AdminError};

/// Produce v12 and Fetch v12 are the last versions that name topics (v13 uses ids).
const LAST_VERSION_BY_NAME: i16 = 12;
const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
/// The local log's start (KIP-405; without tiered storage, the earliest offset).
const EARLIEST_LOCAL: i64 = -4;
/// The last tiered offset (KIP-1005; none without tiered storage).
const LATEST_TIERED: i64 = -5;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const LEADER_NOT_AVAILABLE: i16 = 5;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
const ILLEGAL_GENERATION: i16 = 22;
const UNKNOWN_MEMBER_ID: i16 = 25;
/// The producer's `retry.backoff.ms` between Metadata requests for a topic not there yet.
const METADATA_RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// The console producer's client id.
const CONSOLE_PRODUCER: &str = "console-producer";
/// The console consumer's client id.
const CONSOLE_CONSUMER: &str = "console-consumer";
/// The admin client's `default.api.timeout.ms`, which bounds listOffsets' retries.
const LIST_OFFSETS_TIMEOUT: Duration = Duration::from_secs(60);
/// The producer's `max.block.ms` default.
const DEFAULT_MAX_BLOCK_MS: u64 = 60_000;

/// How a wait for a topic in Metadata ended.
enum TopicWait {
    /// The topic is there as the caller needs it.
    Ready(Brokers),
    /// The deadline passed first.
    TimedOut,
    /// Metadata answered an error that waiting does not cure.
    Failed(i16),
}

/// Connections to the brokers of a cluster, opened when first needed.
struct Brokers {
    bootstrap: String,
    client_id: String,
    view: ClusterView,
    open: HashMap<i32, AdminClient>,
}

impl Brokers {
    async fn connect(
        bootstrap: &str,
        client_id: &str,
        topics: Option<&[String]>,
    ) -> Result<Self, AdminError> {
        let mut client = AdminClient::connect(bootstrap).await?;
        client.set_client_id(client_id);
        let view = cluster_view(&mut client, topics, false).await?;
        Ok(Brokers::new(bootstrap, client_id, view))
    }

    /// Waits for `topic` as a Java client's first send or poll does: Metadata asked with
    /// auto-creation allowed (so `auto.create.topics.enable` creates the topic), on one
    /// connection, again every `METADATA_RETRY_BACKOFF` while the topic is unknown or leaderless,
    /// until `ready` holds for what it shows or `deadline` (`None`: never) passes.
    async fn wait_for_topic(
        bootstrap: &str,
        client_id: &str,
        topic: &str,
        deadline: Option<tokio::time::Instant>,
        ready: impl Fn(&Brokers) -> bool,
    ) -> Result<TopicWait, AdminError> {
        let mut client = AdminClient::connect(bootstrap).await?;
        client.set_client_id(client_id);
        loop {
            let view = cluster_view(&mut client, Some(&[topic.to_owned()]), true).await?;
            let brokers = Brokers::new(bootstrap, client_id, view);
            match brokers.view.topic_errors.get(topic) {
                None if ready(&brokers) => return Ok(TopicWait::Ready(brokers)),
                None | Some(&(UNKNOWN_TOPIC_OR_PARTITION | LEADER_NOT_AVAILABLE)) => {}
                Some(code) => return Ok(TopicWait::Failed(*code)),
            }
            if deadline.is_some_and(|d| tokio::time::Instant::now() >= d) {
                return Ok(TopicWait::TimedOut);
            }
            tokio::time::sleep(METADATA_RETRY_BACKOFF).await;
        }
    }

    /// The brokers `view` shows, connections opened when first needed.
    fn new(bootstrap: &str, client_id: &str, view: ClusterView) -> Self {
        Brokers {
            bootstrap: bootstrap.to_owned(),
            client_id: client_id.to_owned(),
            view,
            open: HashMap::new(),
        }
    }

    /// The partitions of `topic`, sorted.
    fn partitions(&self, topic: &str) -> Vec<i32> {
        self.view
            .leaders
            .keys()
            .filter(|(t, _)| t == topic)
            .map(|(_, p)| *p)
            .collect()
    }

    fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        self.view
            .leaders
            .get(&(topic.to_owned(), partition))
            .copied()
            .filter(|l| *l >= 0)
    }

    async fn client(&mut self, broker: i32) -> Result<&mut AdminClient, AdminError> {
        if !self.open.contains_key(&broker) {
            let address = self
                .view
                .brokers
                .get(&broker)
                .cloned()
                .unwrap_or_else(|| self.bootstrap.clone());
            let mut client = AdminClient::connect(&address).await?;
            client.set_client_id(&self.client_id);
            self.open.insert(broker, client);
        }
        self.open
            .get_mut(&broker)
            .ok_or_else(|| AdminError::Io(format!("no connection to broker {broker}")))
    }

    /// ListOffsets for one partition at its leader; `None` when there is no such offset.
    async fn list_offset(
        &mut self,
        topic: &str,
        partition: i32,
        timestamp: i64,
    ) -> Result<Option<i64>, AdminError> {
        let leader = self.leader(topic, partition).ok_or(AdminError::Broker {
            code: 5,
            message: None,
        })?;
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_current_leader_epoch(-1)
                    .with_timestamp(timestamp)])]);
        let (_, response) = self.client(leader).await?.send(&request).await?;
        let answer = response
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or_else(|| AdminError::Io("ListOffsets answered without the partition".into()))?;
        super::check(answer.error_code, None)?;
        Ok((answer.offset >= 0).then_some(answer.offset))
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

/// Kafka's `Utils.murmur2`, which its default partitioner hashes keys with; hand-written
/// because the partition of a keyed record must match the Java client's bit for bit.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let length = data.len() as u32;
    let mut h = SEED ^ length;
    let chunks = data.chunks_exact(4);
    let tail = chunks.remainder();
    for chunk in chunks {
        let mut k = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The default partitioner's choice for a keyed record.
pub fn partition_for_key(key: &[u8], partitions: usize) -> usize {
    ((murmur2(key) & 0x7fff_ffff) as usize) % partitions.max(1)
}

/// `--property k=v` pairs.
fn properties(items: &[String]) -> Result<HashMap<String, String>, String> {
    items
        .iter()
        .map(|item| {
            item.split_once('=')
                .map(|(k, v)| (k.trim().to_owned(), v.to_owned()))
                .ok_or_else(|| format!("Invalid property: {item} (expected key=value)"))
        })
        .collect()
}

/// `--property` values are Java property strings: `\t` and `\n` escapes are honoured.
fn unescape(value: &str) -> String {
    value.replace("\\t", "\t").replace("\\n", "\n")
}

fn flag(props: &HashMap<String, String>, key: &str, default: bool) -> bool {
    props
        .get(key)
        .map_or(default, |v| v.trim().eq_ignore_ascii_case("true"))
}

/// `gregor console-producer`: kafka-console-producer.sh.
#[derive(Args, Debug)]
pub struct ConsoleProducerArgs {
    /// REQUIRED: The server(s) to connect to.
    #[arg(long, required = true)]
    pub bootstrap_server: String,
    /// REQUIRED: The topic id to produce messages to.
    #[arg(long, required = true)]
    pub topic: String,
    /// The required acks of the producer requests: -1 (all), 0 or 1.
    #[arg(long, default_value = "-1", allow_hyphen_values = true)]
    pub request_required_acks: String,
    /// The compression codec: none, gzip, snappy, lz4 or zstd (gzip when given without a value).
    #[arg(long, num_args = 0..=1, default_missing_value = "gzip")]
    pub compression_codec: Option<String>,
    /// The producer's `batch.size`: bytes of one partition's batch at most (a larger record
    /// goes alone).
    #[arg(long, default_value_t = 16_384)]
    pub batch_size: usize,
    /// How long a partial batch may wait for more lines, in ms (linger).
    #[arg(long, default_value_t = 1000)]
    pub timeout: u64,
    /// Send each line on its own and wait for its answer.
    #[arg(long)]
    pub sync: bool,
    /// Producer properties, `acks=1` or `compression.type=lz4` (over the flags above).
    #[arg(long)]
    pub producer_property: Vec<String>,
    /// Line reader properties: parse.key, key.separator (tab), parse.headers,
    /// headers.delimiter (tab), headers.separator (,), headers.key.separator (:),
    /// null.marker, ignore.error.
    #[arg(long)]
    pub property: Vec<String>,
}

/// How stdin lines become records (Kafka's `LineMessageReader`).
#[derive(Debug, Clone)]
pub struct LineReader {
    parse_key: bool,
    key_separator: String,
    parse_headers: bool,
    headers_delimiter: String,
    headers_separator: String,
    headers_key_separator: String,
    null_marker: Option<String>,
    ignore_error: bool,
}

/// One record read from a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineRecord {
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl LineReader {
    /// Reads `--property` settings.
    pub fn new(props: &HashMap<String, String>) -> Self {
        let get = |key: &str, default: &str| {
            props
                .get(key)
                .map_or_else(|| default.to_owned(), |v| unescape(v))
        };
        LineReader {
            parse_key: flag(props, "parse.key", false),
            key_separator: get("key.separator", "\t"),
            parse_headers: flag(props, "parse.headers", false),
            headers_delimiter: get("headers.delimiter", "\t"),
            headers_separator: get("headers.separator", ","),
            headers_key_separator: get("headers.key.separator", ":"),
            null_marker: props.get("null.marker").map(|v| unescape(v)),
            ignore_error: flag(props, "ignore.error", false),
        }
    }

    /// The record of line `line_number` (from 1), or Kafka's error for a line without the
    /// separator it needs.
    pub fn parse(&self, line: &str, line_number: u64) -> Result<LineRecord, String> {
        let mut rest = line;
        let mut headers = Vec::new();
        if self.parse_headers {
            match rest.split_once(self.headers_delimiter.as_str()) {
                // A header section equal to null.marker means no headers (as Kafka's reader).
                Some((header_text, after)) if self.null_marker.as_deref() == Some(header_text) => {
                    rest = after;
                }
                Some((header_text, after)) => {
                    rest = after;
                    for header in split_headers(header_text, &self.headers_separator) {
                        let (key, value) =
                            match header.split_once(self.headers_key_separator.as_str()) {
                                Some((k, v)) => (k, Some(v)),
                                None if self.ignore_error => (header, None),
                                None => {
                                    return Err(format!(
                                        "No header key separator found in pair '{header}' on line number {line_number}"
                                    ))
                                }
                            };
                        if self.null_marker.as_deref() == Some(key) {
                            return Err(format!(
                                "Header keys should not be equal to the null marker '{key}' as they can't be null"
                            ));
                        }
                        let value = value.filter(|v| self.null_marker.as_deref() != Some(*v));
                        headers.push((
                            key.as_bytes().to_vec(),
                            value.map(|v| v.as_bytes().to_vec()),
                        ));
                    }
                }
                None if self.ignore_error => {}
                None => {
                    return Err(format!(
                        "No headers delimiter found on line number {line_number}: '{line}'"
                    ))
                }
            }
        }
        let (key, value) = if self.parse_key {
            match rest.split_once(self.key_separator.as_str()) {
                Some((k, v)) => (Some(k), v),
                None if self.ignore_error => (None, rest),
                None => {
                    return Err(format!(
                        "No key separator found on line number {line_number}: '{line}'"
                    ))
                }
            }
        } else {
            (None, rest)
        };
        let nullable = |text: &str| {
            (self.null_marker.as_deref() != Some(text)).then(|| text.as_bytes().to_vec())
        };
        Ok(LineRecord {
            key: key.and_then(nullable),
            value: nullable(value),
            headers,
        })
    }
}

/// The pairs of a header section as Java's `Pattern.split` gives them: empty pairs at the
/// start and in the middle are kept (and refused by the caller as Kafka refuses them), trailing
/// ones dropped; an empty section is one empty pair.
fn split_headers<'a>(text: &'a str, separator: &str) -> Vec<&'a str> {
    if text.is_empty() || separator.is_empty() {
        return vec![text];
    }
    let mut pairs: Vec<&str> = text.split(separator).collect();
    while pairs.last().is_some_and(|p| p.is_empty()) {
        pairs.pop();
    }
    pairs
}

/// Splits what `read_until(b'\n')` returned into lines as Java's `BufferedReader.readLine`
/// does: `\n`, `\r` and `\r\n` each end a line, and none is part of it.
pub fn split_lines(chunk: &[u8]) -> Vec<&[u8]> {
    if chunk.is_empty() {
        return Vec::new();
    }
    let body = chunk.strip_suffix(b"\n").unwrap_or(chunk);
    let mut lines: Vec<&[u8]> = body.split(|b| *b == b'\r').collect();
    // A `\r` that ends the chunk (before its `\n`, or at the end of input) ends the line
    // before it: the empty piece after it is no line.
    if body.ends_with(b"\r") {
        lines.pop();
    }
    lines
}

fn compression_of(name: &str) -> Result<Compression, String> {
    Ok(match name.trim().to_ascii_lowercase().as_str() {
        "none" | "" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        other => return Err(format!("Unknown compression codec: {other}")),
    })
}

/// Runs `gregor console-producer`: one record per stdin line until end of input.
pub fn run_console_producer(args: ConsoleProducerArgs) -> Result<(), String> {
    let props = properties(&args.property)?;
    let producer_props = properties(&args.producer_property)?;
    let reader = LineReader::new(&props);
    let acks: i16 = producer_props
        .get("acks")
        .map_or(args.request_required_acks.as_str(), String::as_str)
        .trim()
        .replace("all", "-1")
        .parse()
        .map_err(|_| "acks must be -1 (all), 0 or 1".to_owned())?;
    let codec = producer_props
        .get("compression.type")
        .cloned()
        .or(args.compression_codec.clone())
        .unwrap_or_else(|| "none".to_owned());
    let compression = compression_of(&codec)?;
    let max_block = Duration::from_millis(
        producer_props
            .get("max.block.ms")
            .map(|v| {
                v.trim()
                    .parse()
                    .map_err(|_| format!("max.block.ms must be a number of milliseconds: {v}"))
            })
            .transpose()?
            .unwrap_or(DEFAULT_MAX_BLOCK_MS),
    );
    let number = |key: &str, default: usize| -> Result<usize, String> {
        producer_props.get(key).map_or(Ok(default), |v| {
            v.trim()
                .parse()
                .map_err(|_| format!("{key} must be a number of bytes: {v}"))
        })
    };
    let limits = ProducerLimits {
        batch_size: number("batch.size", args.batch_size)?,
        max_request_size: number("max.request.size", 1_048_576)?,
        sync: args.sync,
    };
    let linger = Duration::from_millis(if args.sync { 0 } else { args.timeout });
    let (lines_tx, lines_rx) = tokio::sync::mpsc::channel::<String>(1024);
    // stdin is read on its own thread: a blocking read must not stall the sends.
    // Bytes are read and decoded lossily, as Java's UTF-8 reader replaces a malformed
    // sequence with U+FFFD: a line that is not UTF-8 is sent, not the end of the input.
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut chunk = Vec::new();
        loop {
            chunk.clear();
            match stdin.read_until(b'\n', &mut chunk) {
                Ok(0) => break,
                Ok(_) => {}
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    eprintln!("cannot read stdin: {error}");
                    break;
                }
            }
            for line in split_lines(&chunk) {
                if lines_tx
                    .blocking_send(String::from_utf8_lossy(line).into_owned())
                    .is_err()
                {
                    return;
                }
            }
        }
    });
    block_on(produce_lines(
        &args.bootstrap_server,
        &args.topic,
        reader,
        acks,
        compression,
        limits,
        linger,
        max_block,
        lines_rx,
    ))?
}

#[allow(clippy::too_many_arguments)]
async fn produce_lines(
    bootstrap: &str,
    topic: &str,
    reader: LineReader,
    acks: i16,
    compression: Compression,
    limits: ProducerLimits,
    linger: Duration,
    max_block: Duration,
    mut lines: tokio::sync::mpsc::Receiver<String>,
) -> Result<(), String> {
    // As Kafka's producer: Metadata may create the topic (auto.create.topics.enable), and the
    // first send waits up to max.block.ms for it to appear with its partitions.
    let metadata_deadline = tokio::time::Instant::now() + max_block;
    let waited = Brokers::wait_for_topic(
        bootstrap,
        CONSOLE_PRODUCER,
        topic,
        Some(metadata_deadline),
        |brokers| !brokers.partitions(topic).is_empty(),
    )
    .await
    .map_err(|e| e.to_string())?;
    let mut brokers = match waited {
        TopicWait::Ready(brokers) => brokers,
        TopicWait::TimedOut => {
            return Err(format!(
                "Topic {topic} not present in metadata after {} ms.",
                max_block.as_millis()
            ))
        }
        TopicWait::Failed(code) => {
            return Err(format!(
                "Topic {topic} not present in metadata: {}",
                super::kafka_message(code, None)
            ))
        }
    };
    let partitions = brokers.partitions(topic);
    let mut next_unkeyed = 0usize;
    let mut failed = false;
    let mut line_number = 0u64;
    loop {
        // One round: the first line, then more until the linger passes or every partition
        // could fill a batch (a bound on memory, not on what one request carries).
        let Some(first) = lines.recv().await else {
            break;
        };
        let deadline = tokio::time::Instant::now() + linger;
        let round_bytes = limits.batch_size.saturating_mul(partitions.len()).max(1);
        let mut read = first.len();
        let mut round = vec![first];
        while !limits.sync && read < round_bytes {
            match tokio::time::timeout_at(deadline, lines.recv()).await {
                Ok(Some(line)) => {
                    read += line.len();
                    round.push(line);
                }
                _ => break,
            }
        }
        let mut by_partition: BTreeMap<i32, Vec<LineRecord>> = BTreeMap::new();
        let mut bad_line = None;
        for line in &round {
            line_number += 1;
            match reader.parse(line, line_number) {
                Ok(record) => {
                    // As KafkaProducer.ensureValidRecordSize: each record alone against
                    // max.request.size; only that record fails.
                    let size = record_size_upper_bound(&record);
                    if size > limits.max_request_size {
                        failed = true;
                        log_send_error(
                            topic,
                            &record,
                            &format!(
                                "org.apache.kafka.common.errors.RecordTooLargeException: The message is {size} bytes when serialized which is larger than {}, which is the value of the max.request.size configuration.",
                                limits.max_request_size
                            ),
                        );
                        continue;
                    }
                    let index = match &record.key {
                        Some(key) => partition_for_key(key, partitions.len()),
                        None => {
                            next_unkeyed = (next_unkeyed + 1) % partitions.len();
                            next_unkeyed
                        }
                    };
                    by_partition
                        .entry(partitions[index])
                        .or_default()
                        .push(record);
                }
                // As Kafka's tool, which exits on the error after closing its producer: what
                // was read before the bad line is still sent.
                Err(message) => {
                    bad_line = Some(message);
                    break;
                }
            }
        }
        for (partition, records) in by_partition {
            for chunk in batches_by_size(&records, limits.batch_size, limits.sync) {
                if let Err(error) =
                    send_batch(&mut brokers, topic, partition, chunk, acks, compression).await
                {
                    failed = true;
                    // Every record of the failed batch gets its callback's line, as Kafka's.
                    for record in chunk {
                        log_send_error(topic, record, &error);
                    }
                }
            }
        }
        if let Some(message) = bad_line {
            return Err(message);
        }
    }
    if failed {
        Err("some records were not produced (see above)".into())
    } else {
        Ok(())
    }
}

/// How the console producer sizes its batches and requests.
#[derive(Debug, Clone, Copy)]
struct ProducerLimits {
    /// `batch.size`: bytes of one partition's batch (one record at least).
    batch_size: usize,
    /// `max.request.size`: the largest record accepted.
    max_request_size: usize,
    /// `--sync`: one record per request.
    sync: bool,
}

/// Kafka's `ErrorLoggingCallback` line for a record that was not produced.
fn log_send_error(topic: &str, record: &LineRecord, error: &str) {
    let size = |bytes: &Option<Vec<u8>>| {
        bytes
            .as_ref()
            .map_or("null".to_owned(), |b| format!("{} bytes", b.len()))
    };
    eprintln!(
        "[{}] ERROR Error when sending message to topic {topic} with key: {}, value: {} with error: (org.apache.kafka.clients.producer.internals.ErrorLoggingCallback)\n{error}",
        now_text(),
        size(&record.key),
        size(&record.value),
    );
}

/// Zig-zag varint length, as Kafka's `ByteUtils.sizeOfVarint`.
fn varint_size(value: i64) -> usize {
    let mut v = ((value << 1) ^ (value >> 63)) as u64;
    let mut bytes = 1;
    while v >= 0x80 {
        v >>= 7;
        bytes += 1;
    }
    bytes
}

/// Kafka's `DefaultRecordBatch.estimateBatchSizeUpperBound` for one record: what the producer
/// checks against max.request.size and counts towards batch.size.
fn record_size_upper_bound(record: &LineRecord) -> usize {
    let field = |bytes: Option<&[u8]>| match bytes {
        None => varint_size(-1),
        Some(b) => varint_size(b.len() as i64) + b.len(),
    };
    let mut size = gregor_log::batch::RECORD_BATCH_OVERHEAD
        + 21
        + field(record.key.as_deref())
        + field(record.value.as_deref())
        + varint_size(record.headers.len() as i64);
    for (key, value) in &record.headers {
        size += field(Some(key)) + field(value.as_deref());
    }
    size
}

/// A partition's records cut into batches of at most `batch_size` bytes each (a record larger
/// than that goes alone), as the producer's accumulator fills them.
fn batches_by_size(records: &[LineRecord], batch_size: usize, sync: bool) -> Vec<&[LineRecord]> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut bytes = gregor_log::batch::RECORD_BATCH_OVERHEAD;
    for (i, record) in records.iter().enumerate() {
        let size = record_size_upper_bound(record) - gregor_log::batch::RECORD_BATCH_OVERHEAD;
        if i > start && (sync || bytes + size > batch_size) {
            out.push(&records[start..i]);
            start = i;
            bytes = gregor_log::batch::RECORD_BATCH_OVERHEAD;
        }
        bytes += size;
    }
    if start < records.len() {
        out.push(&records[start..]);
    }
    out
}

/// Wall-clock time for log lines, as Kafka's log4j pattern prints it
/// (`2026-01-31 12:00:00,123`, in UTC).
fn now_text() -> String {
    log_time(now_ms())
}

/// `ms` since the epoch as `yyyy-MM-dd HH:mm:ss,SSS` (UTC); Howard Hinnant's civil-from-days,
/// hand-written as a few lines rather than a date crate for one format.
fn log_time(ms: i64) -> String {
    let (days, in_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02},{:03}",
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000
    )
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

async fn send_batch(
    brokers: &mut Brokers,
    topic: &str,
    partition: i32,
    records: &[LineRecord],
    acks: i16,
    compression: Compression,
) -> Result<(), String> {
    let mut builder = BatchBuilder::new(compression);
    let now = now_ms();
    for record in records {
        let headers: Vec<Header<'_>> = record
            .headers
            .iter()
            .map(|(k, v)| Header {
                key: k,
                value: v.as_deref(),
            })
            .collect();
        builder.append(
            now,
            record.key.as_deref(),
            record.value.as_deref(),
            &headers,
        );
    }
    let batch = builder.build().map_err(|e| e.to_string())?;
    let leader = brokers
        .leader(topic, partition)
        .ok_or_else(|| format!("no leader for {topic}-{partition}"))?;
    let request = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(30_000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(Bytes::from(batch)))])]);
    let client = brokers.client(leader).await.map_err(|e| e.to_string())?;
    let version = client
        .version_of::<ProduceRequest>()
        .map(|v| v.min(LAST_VERSION_BY_NAME))
        .ok_or("the broker does not support Produce")?;
    // zstd needs Produce v7 (which every broker that has it serves).
    if acks == 0 {
        return client
            .send_only(&request, version)
            .await
            .map_err(|e| e.to_string());
    }
    let response = client
        .send_at(&request, version)
        .await
        .map_err(|e| e.to_string())?;
    for partition in response
        .responses
        .iter()
        .flat_map(|t| &t.partition_responses)
    {
        super::check(partition.error_code, partition.error_message.as_ref())
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `gregor console-consumer`: kafka-console-consumer.sh, alone or as a member of a classic
/// consumer group (`--group`).
#[derive(Args, Debug)]
pub struct ConsoleConsumerArgs {
    /// REQUIRED: The server(s) to connect to.
    #[arg(long, required = true)]
    pub bootstrap_server: String,
    /// The topic to consume on.
    #[arg(long, required = true)]
    pub topic: String,
    /// The partition to consume from (all partitions without it).
    #[arg(long, conflicts_with = "group")]
    pub partition: Option<i32>,
    /// The consumer group to join: partitions come from the group's `range` assignment,
    /// reading starts at the group's committed offsets, and positions are committed every
    /// 5 s and on exit.
    #[arg(long)]
    pub group: Option<String>,
    /// The offset to start from: a non-negative number, `earliest` or `latest` (needs
    /// --partition).
    #[arg(long, requires = "partition")]
    pub offset: Option<String>,
    /// Start with the earliest message present rather than the latest.
    #[arg(long)]
    pub from_beginning: bool,
    /// Exit after this many messages.
    #[arg(long)]
    pub max_messages: Option<u64>,
    /// Exit when no message arrived for this long, in ms.
    #[arg(long)]
    pub timeout_ms: Option<u64>,
    /// Formatter properties: print.timestamp, print.key, print.offset, print.partition,
    /// print.headers, print.value (true), print.epoch, print.delivery, key.separator (tab),
    /// line.separator (newline),
    /// headers.separator (,), null.literal (null).
    #[arg(long)]
    pub property: Vec<String>,
    /// Consumer properties, e.g. `max.partition.fetch.bytes=1048576`.
    #[arg(long)]
    pub consumer_property: Vec<String>,
    /// Read committed (`read_committed`) or every record (`read_uncommitted`).
    #[arg(long, default_value = "read_uncommitted")]
    pub isolation_level: String,
}

/// How records are printed (Kafka's `DefaultMessageFormatter`).
#[derive(Debug, Clone)]
pub struct Formatter {
    print_timestamp: bool,
    print_key: bool,
    print_offset: bool,
    print_partition: bool,
    print_headers: bool,
    print_value: bool,
    print_delivery: bool,
    print_epoch: bool,
    key_separator: String,
    line_separator: String,
    headers_separator: String,
    null_literal: String,
}

impl Formatter {
    /// Reads `--property` settings.
    pub fn new(props: &HashMap<String, String>) -> Self {
        let get = |key: &str, default: &str| {
            props
                .get(key)
                .map_or_else(|| default.to_owned(), |v| unescape(v))
        };
        Formatter {
            print_timestamp: flag(props, "print.timestamp", false),
            print_key: flag(props, "print.key", false),
            print_offset: flag(props, "print.offset", false),
            print_partition: flag(props, "print.partition", false),
            print_headers: flag(props, "print.headers", false),
            print_value: flag(props, "print.value", true),
            print_delivery: flag(props, "print.delivery", false),
            print_epoch: flag(props, "print.epoch", false),
            key_separator: get("key.separator", "\t"),
            line_separator: get("line.separator", "\n"),
            headers_separator: get("headers.separator", ","),
            null_literal: get("null.literal", "null"),
        }
    }

    /// One record as the formatter writes it (`leader_epoch`: its batch's partition leader
    /// epoch, -1 for none). As Kafka's `writeTo`, a field's separator follows it only when a
    /// later field is printed, and the line separator only follows a printed value.
    pub fn format(
        &self,
        partition: i32,
        record: &gregor_log::batch::OwnedRecord,
        timestamp_type: &str,
        leader_epoch: i32,
    ) -> Vec<u8> {
        let text = |bytes: &Option<Vec<u8>>| {
            bytes
                .clone()
                .unwrap_or_else(|| self.null_literal.as_bytes().to_vec())
        };
        let mut fields: Vec<Vec<u8>> = Vec::new();
        if self.print_timestamp {
            fields.push(format!("{timestamp_type}:{}", record.timestamp).into_bytes());
        }
        if self.print_partition {
            fields.push(format!("Partition:{partition}").into_bytes());
        }
        if self.print_offset {
            fields.push(format!("Offset:{}", record.offset).into_bytes());
        }
        if self.print_delivery {
            // Only share groups' records carry a delivery count.
            fields.push(b"Delivery:NOT_PRESENT".to_vec());
        }
        if self.print_epoch {
            fields.push(if leader_epoch >= 0 {
                format!("Epoch:{leader_epoch}").into_bytes()
            } else {
                b"Epoch:NOT_PRESENT".to_vec()
            });
        }
        if self.print_headers {
            if record.headers.is_empty() {
                fields.push(b"NO_HEADERS".to_vec());
            } else {
                let headers: Vec<Vec<u8>> = record
                    .headers
                    .iter()
                    .map(|(k, v)| {
                        let mut h = k.clone();
                        h.push(b':');
                        h.extend(text(v));
                        h
                    })
                    .collect();
                fields.push(headers.join(self.headers_separator.as_bytes()));
            }
        }
        if self.print_key {
            fields.push(text(&record.key));
        }
        if self.print_value {
            fields.push(text(&record.value));
        }
        let mut out = fields.join(self.key_separator.as_bytes());
        if self.print_value {
            out.extend_from_slice(self.line_separator.as_bytes());
        }
        out
    }
}

/// Runs `gregor console-consumer`; prints `Processed a total of N messages` on stderr at the end.
pub fn run_console_consumer(args: ConsoleConsumerArgs) -> Result<(), String> {
    let formatter = Formatter::new(&properties(&args.property)?);
    let consumer_props = properties(&args.consumer_property)?;
    let partition_max_bytes: i32 = consumer_props
        .get("max.partition.fetch.bytes")
        .map_or(Ok(1_048_576), |v| v.trim().parse())
        .map_err(|_| "max.partition.fetch.bytes must be a number".to_owned())?;
    let start = match (&args.offset, args.from_beginning) {
        (Some(_), true) => {
            return Err(
                "Options from-beginning and offset cannot be specified together.".to_owned(),
            )
        }
        (Some(offset), false) => match offset.as_str() {
            "earliest" => EARLIEST,
            "latest" => LATEST,
            number => number
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| {
                    format!(
                        "The provided offset value '{number}' is incorrect. Valid values are \
                         'earliest', 'latest', or a non-negative long."
                    )
                })?,
        },
        (None, true) => EARLIEST,
        (None, false) => LATEST,
    };
    let isolation = match args.isolation_level.as_str() {
        "read_committed" => 1,
        _ => 0,
    };
    let mut processed = 0u64;
    let result = block_on(consume(
        &args,
        &formatter,
        start,
        isolation,
        partition_max_bytes,
        &mut processed,
    ))?;
    eprintln!("Processed a total of {processed} messages");
    match result {
        // The JVM ends a process whose shutdown hook ran on a signal with 128 + its number
        // (java.lang.Terminator), after the hook's commit, LeaveGroup and count above.
        Ok(Some(signal)) => {
            let _ = std::io::stdout().flush();
            std::process::exit(128 + signal)
        }
        Ok(None) => Ok(()),
        Err(error) => Err(error),
    }
}

/// SIGINT and SIGTERM, as the JVM's shutdown hook sees them: the first one's number is sent on
/// the returned channel (0 until then).
fn shutdown_signals() -> Result<tokio::sync::watch::Receiver<i32>, String> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = tokio::sync::watch::channel(0);
    let mut interrupt =
        signal(SignalKind::interrupt()).map_err(|e| format!("cannot handle SIGINT: {e}"))?;
    let mut terminate =
        signal(SignalKind::terminate()).map_err(|e| format!("cannot handle SIGTERM: {e}"))?;
    tokio::spawn(async move {
        let number = tokio::select! {
            _ = interrupt.recv() => 2,
            _ = terminate.recv() => 15,
        };
        let _ = tx.send(number);
    });
    Ok(rx)
}

/// Resolves once a signal came (never otherwise).
async fn signalled(stop: &tokio::sync::watch::Receiver<i32>) -> i32 {
    let mut stop = stop.clone();
    let seen = stop.wait_for(|n| *n != 0).await.map(|n| *n);
    match seen {
        Ok(n) => n,
        Err(_) => std::future::pending().await,
    }
}

async fn consume(
    args: &ConsoleConsumerArgs,
    formatter: &Formatter,
    start: i64,
    isolation: i8,
    partition_max_bytes: i32,
    processed: &mut u64,
) -> Result<Option<i32>, String> {
    let stop = shutdown_signals()?;
    let topic = args.topic.as_str();
    let started = Instant::now();
    let timeout = args.timeout_ms.map(Duration::from_millis);
    // Kafka's consumer (allow.auto.create.topics=true) asks for a topic it does not know with
    // auto-creation allowed, and keeps polling until it is there, with its partitions; an
    // assigned `--partition` the topic lacks is waited for the same way. Only --timeout-ms
    // ends the wait.
    let waited = Brokers::wait_for_topic(
        &args.bootstrap_server,
        CONSOLE_CONSUMER,
        topic,
        timeout.map(|t| tokio::time::Instant::now() + t),
        |brokers| {
            let partitions = brokers.partitions(topic);
            let wanted = match args.partition {
                Some(p) => vec![p],
                None => partitions.clone(),
            };
            !wanted.is_empty()
                && wanted
                    .iter()
                    .all(|p| partitions.contains(p) && brokers.leader(topic, *p).is_some())
        },
    );
    let waited = tokio::select! {
        waited = waited => waited.map_err(|e| e.to_string())?,
        signal = signalled(&stop) => return Ok(Some(signal)),
    };
    let mut brokers = match waited {
        TopicWait::Ready(brokers) => brokers,
        TopicWait::TimedOut => {
            print_consumer_timeout();
            return Ok(None);
        }
        TopicWait::Failed(code) => {
            return Err(format!(
                "Error processing message, terminating consumer process: {}",
                super::kafka_message(code, None)
            ))
        }
    };
    let partitions = match args.partition {
        Some(p) => vec![p],
        None => brokers.partitions(topic),
    };
    let mut member = None;
    let positions_of = if let Some(group) = &args.group {
        let joining = GroupMember::join(&args.bootstrap_server, group, topic, &partitions);
        let (joined, assigned) = tokio::select! {
            joined = joining => joined.map_err(|e| e.to_string())?,
            signal = signalled(&stop) => return Ok(Some(signal)),
        };
        member = Some(joined);
        assigned
    } else {
        partitions.clone()
    };
    let mut positions =
        start_positions(&mut brokers, member.as_mut(), topic, &positions_of, start).await?;
    let mut stdout = std::io::stdout().lock();
    // The wait for the topic counts against the first poll's --timeout-ms.
    let mut last_message = started;
    let mut signal = None;
    // Set when a fetch failed in a way new metadata may cure (a lost connection, a moved
    // leader): the consumer keeps polling, as Kafka's does, until --timeout-ms or
    // --max-messages ends it.
    let mut backoff: Option<Duration> = None;
    let mut coordinator_lost = false;
    'poll: loop {
        if *stop.borrow() != 0 {
            signal = Some(*stop.borrow());
            break;
        }
        if args.max_messages.is_some_and(|max| *processed >= max) {
            break;
        }
        if timeout.is_some_and(|t| last_message.elapsed() >= t) {
            print_consumer_timeout();
            break;
        }
        if let Some(m) = member.as_mut() {
            let ticked = if coordinator_lost {
                tokio::select! {
                    joined = m.reconnect(&positions, &partitions) => {
                        joined.map(Some)
                    }
                    _ = signalled(&stop) => continue,
                }
            } else {
                m.tick(&positions, &partitions).await
            };
            match ticked {
                Ok(assigned) => {
                    coordinator_lost = false;
                    if let Some(assigned) = assigned {
                        positions =
                            start_positions(&mut brokers, Some(m), topic, &assigned, start).await?;
                    }
                }
                // A lost coordinator connection is found again after a backoff, as Kafka's
                // consumer rediscovers its coordinator; --timeout-ms still ends the run.
                Err(
                    AdminError::Io(_)
                    | AdminError::Broker {
                        code:
                            COORDINATOR_NOT_AVAILABLE
                            | NOT_COORDINATOR
                            | ILLEGAL_GENERATION
                            | UNKNOWN_MEMBER_ID,
                        ..
                    },
                ) => {
                    coordinator_lost = true;
                    backoff = Some(next_backoff(backoff));
                    tokio::select! {
                        _ = tokio::time::sleep(backoff.unwrap_or_default()) => {}
                        _ = signalled(&stop) => {}
                    }
                    continue;
                }
                Err(error) => return Err(error.to_string()),
            }
        }
        if positions.is_empty() {
            // A member without partitions waits for the next rebalance.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        if let Some(delay) = backoff {
            // reconnect.backoff.ms (50) doubling up to reconnect.backoff.max.ms (1000).
            tokio::select! {
                _ = tokio::time::sleep(delay) => {}
                _ = signalled(&stop) => continue,
            }
            if let Ok(fresh) = Brokers::connect(
                &args.bootstrap_server,
                CONSOLE_CONSUMER,
                Some(std::slice::from_ref(&args.topic)),
            )
            .await
            {
                brokers = fresh;
            }
        }
        // One fetch per leader, each over that leader's partitions.
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        let mut leaderless = false;
        for &partition in positions.keys() {
            match brokers.leader(topic, partition) {
                Some(leader) => by_leader.entry(leader).or_default().push(partition),
                None => leaderless = true,
            }
        }
        if leaderless {
            backoff = Some(next_backoff(backoff));
        }
        let wait = args
            .timeout_ms
            .map_or(500, |t| t.min(500))
            .try_into()
            .unwrap_or(500);
        for (leader, owned) in by_leader {
            let request = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(wait)
                .with_min_bytes(1)
                .with_max_bytes(52_428_800)
                .with_isolation_level(isolation)
                .with_session_id(0)
                .with_session_epoch(-1)
                .with_topics(vec![FetchTopic::default()
                    .with_topic(topic_name(topic))
                    .with_partitions(
                        owned
                            .iter()
                            .map(|p| {
                                FetchPartition::default()
                                    .with_partition(*p)
                                    .with_fetch_offset(positions[p])
                                    .with_current_leader_epoch(-1)
                                    .with_last_fetched_epoch(-1)
                                    .with_log_start_offset(-1)
                                    .with_partition_max_bytes(partition_max_bytes)
                            })
                            .collect(),
                    )]);
            if args.max_messages.is_some_and(|max| *processed >= max) {
                break;
            }
            let fetched = tokio::select! {
                fetched = fetch(&mut brokers, leader, &request) => fetched,
                // The fetch connection is dropped unread: nothing is fetched after a signal.
                _ = signalled(&stop) => continue 'poll,
            };
            let response = match fetched {
                Ok(response) => {
                    if !leaderless {
                        backoff = None;
                    }
                    response
                }
                Err(FetchFailure::Fatal(error)) => return Err(error),
                Err(FetchFailure::Retriable) => {
                    brokers.open.remove(&leader);
                    backoff = Some(next_backoff(backoff));
                    continue;
                }
            };
            for data in response.responses.iter().flat_map(|t| &t.partitions) {
                let partition = data.partition_index;
                // Partitions after the last printed record keep their position: the group
                // commits only what was printed (Kafka's resetUnconsumedOffsets).
                if args.max_messages.is_some_and(|max| *processed >= max) {
                    break;
                }
                match data.error_code {
                    0 => {}
                    // A moved or unknown leader: new metadata, then the next poll.
                    code if retriable_fetch_error(code) => {
                        backoff = Some(next_backoff(backoff));
                        continue;
                    }
                    // OFFSET_OUT_OF_RANGE: auto.offset.reset (latest, or earliest with
                    // --from-beginning).
                    1 => {
                        let reset = if start == EARLIEST { EARLIEST } else { LATEST };
                        let offset = brokers
                            .list_offset(topic, partition, reset)
                            .await
                            .map_err(|e| e.to_string())?
                            .unwrap_or(0);
                        positions.insert(partition, offset);
                        continue;
                    }
                    code => {
                        return Err(format!(
                            "Error processing message, terminating consumer process: {}",
                            super::kafka_message(code, None)
                        ))
                    }
                }
                let Some(records) = data.records.as_ref() else {
                    continue;
                };
                let mut position = positions[&partition];
                for batch in gregor_log::batch::batches(records) {
                    let Ok(batch) = batch else { break };
                    if batch.next_offset() <= position {
                        continue;
                    }
                    if !batch.is_control() {
                        if let Some(unprinted) = print_batch(
                            &batch,
                            partition,
                            position,
                            formatter,
                            &mut stdout,
                            processed,
                            args.max_messages,
                        )? {
                            position = unprinted;
                            break;
                        }
                    }
                    position = batch.next_offset();
                    if args.max_messages.is_some_and(|max| *processed >= max) {
                        break;
                    }
                }
                if position > positions[&partition] {
                    last_message = Instant::now();
                }
                positions.insert(partition, position);
            }
        }
        let _ = stdout.flush();
    }
    if let Some(m) = member {
        // As Kafka's consumer.close(): a failed final commit or LeaveGroup is a warning.
        if let Err(error) = m.close(&positions).await {
            eprintln!(
                "[{}] WARN Failed to commit the offsets or leave the group on close: {error} (org.apache.kafka.clients.consumer.internals.ConsumerCoordinator)",
                now_text()
            );
        }
    }
    Ok(signal)
}

/// Why a fetch got no response to read.
enum FetchFailure {
    /// The connection failed or the leader moved: reconnect after new metadata.
    Retriable,
    /// An error polling again does not cure.
    Fatal(String),
}

/// One Fetch at `leader`.
async fn fetch(
    brokers: &mut Brokers,
    leader: i32,
    request: &FetchRequest,
) -> Result<kafka_protocol::messages::FetchResponse, FetchFailure> {
    let client = brokers
        .client(leader)
        .await
        .map_err(|_| FetchFailure::Retriable)?;
    let version = client
        .version_of::<FetchRequest>()
        .map(|v| v.min(LAST_VERSION_BY_NAME))
        .ok_or_else(|| FetchFailure::Fatal("the broker does not support Fetch".into()))?;
    let response = client
        .send_at(request, version)
        .await
        .map_err(|_| FetchFailure::Retriable)?;
    match response.error_code {
        0 => Ok(response),
        code if retriable_fetch_error(code) => Err(FetchFailure::Retriable),
        code => Err(FetchFailure::Fatal(super::kafka_message(code, None))),
    }
}

/// Fetch errors Kafka's fetcher answers with a metadata refresh rather than an exception.
fn retriable_fetch_error(code: i16) -> bool {
    // UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
    // REPLICA_NOT_AVAILABLE, NETWORK_EXCEPTION, KAFKA_STORAGE_ERROR, FENCED_LEADER_EPOCH,
    // UNKNOWN_LEADER_EPOCH, OFFSET_NOT_AVAILABLE, REQUEST_TIMED_OUT.
    matches!(code, 3 | 5 | 6 | 7 | 9 | 13 | 56 | 74 | 75 | 78)
}

/// The consumer's reconnect backoff: 50 ms doubling up to 1 s.
fn next_backoff(previous: Option<Duration>) -> Duration {
    previous.map_or(Duration::from_millis(50), |d| {
        (d * 2).min(Duration::from_secs(1))
    })
}

/// What kafka-console-consumer.sh prints when `--timeout-ms` passes without a record.
fn print_consumer_timeout() {
    eprintln!("[{}] ERROR Error processing message, terminating consumer process:  (org.apache.kafka.tools.consumer.ConsoleConsumer$)\norg.apache.kafka.common.errors.TimeoutException", now_text());
}

/// Where to start reading each partition: the group's committed offset, else `start` (an
/// offset, or latest / earliest through ListOffsets).
async fn start_positions(
    brokers: &mut Brokers,
    member: Option<&mut GroupMember>,
    topic: &str,
    partitions: &[i32],
    start: i64,
) -> Result<BTreeMap<i32, i64>, String> {
    let committed = match member {
        Some(m) => m.committed(partitions).await.map_err(|e| e.to_string())?,
        None => BTreeMap::new(),
    };
    let mut positions = BTreeMap::new();
    for &partition in partitions {
        let offset = match committed.get(&partition) {
            Some(offset) => *offset,
            None if start >= 0 => start,
            None => brokers
                .list_offset(topic, partition, start)
                .await
                .map_err(|e| e.to_string())?
                .unwrap_or(0),
        };
        positions.insert(partition, offset);
    }
    Ok(positions)
}

/// Prints the records of `batch` from `position` on; `Some(offset)` of the first record left
/// unprinted when `max_messages` was reached inside the batch.
fn print_batch(
    batch: &RecordBatch<'_>,
    partition: i32,
    position: i64,
    formatter: &Formatter,
    out: &mut impl std::io::Write,
    processed: &mut u64,
    max_messages: Option<u64>,
) -> Result<Option<i64>, String> {
    let timestamp_type = batch.timestamp_type().name();
    let leader_epoch = batch.partition_leader_epoch();
    let records = batch
        .owned_records()
        .map_err(|e| format!("a record batch could not be read: {e}"))?;
    for record in records {
        if record.offset < position {
            continue;
        }
        if max_messages.is_some_and(|max| *processed >= max) {
            return Ok(Some(record.offset));
        }
        out.write_all(&formatter.format(partition, &record, timestamp_type, leader_epoch))
            .map_err(|e| format!("cannot write to stdout: {e}"))?;
        *processed += 1;
    }
    Ok(None)
}

/// `gregor get-offsets`: kafka-get-offsets.sh.
#[derive(Args, Debug)]
pub struct GetOffsetsArgs {
    /// REQUIRED. The server(s) to connect to in the form HOST1:PORT1,HOST2:PORT2.
    #[arg(long, required = true)]
    pub bootstrap_server: String,
    /// Comma separated list of topic-partition patterns `topic-regex:partition` (a number,
    /// `N-M` lower inclusive, upper exclusive, `N-`, `-M`, or nothing for all).
    #[arg(long, conflicts_with_all = ["topic", "partitions"])]
    pub topic_partitions: Option<String>,
    /// The topic to get the offsets for; a regular expression. All topics without it.
    #[arg(long)]
    pub topic: Option<String>,
    /// Comma separated list of partition ids (all without it).
    #[arg(long)]
    pub partitions: Option<String>,
    /// `<timestamp>` / -1 or latest / -2 or earliest / -3 or max-timestamp / -4 or
    /// earliest-local / -5 or latest-tiered.
    #[arg(long, default_value = "latest", allow_hyphen_values = true)]
    pub time: String,
    /// Internal topics are excluded.
    #[arg(long)]
    pub exclude_internal_topics: bool,
    /// Property file containing configs to be passed to Admin Client (ignored but for
    /// compatibility).
    #[arg(long)]
    pub command_config: Option<PathBuf>,
}

/// A `--topic-partitions` rule: a topic regex and a partition range [low, high).
#[derive(Debug)]
pub struct PartitionRule {
    topic: regex::Regex,
    low: i32,
    high: i32,
}

impl PartitionRule {
    fn allows(&self, topic: &str, partition: i32) -> bool {
        self.topic.is_match(topic) && partition >= self.low && partition < self.high
    }
}

fn full_match(pattern: &str) -> Result<regex::Regex, String> {
    regex::Regex::new(&format!("^(?:{pattern})$"))
        .map_err(|e| format!("Invalid regular expression {pattern}: {e}"))
}

/// Parses one `--topic-partitions` rule as kafka-get-offsets.sh does.
pub fn parse_rule(spec: &str) -> Result<PartitionRule, String> {
    let invalid = || format!("Invalid rule specification: {spec}");
    let (topic, partitions) = match spec.split_once(':') {
        Some((t, p)) => (t, Some(p)),
        None => (spec, None),
    };
    if topic.contains(',') {
        return Err(invalid());
    }
    let topic = full_match(if topic.is_empty() { ".*" } else { topic })?;
    let number = |text: &str| -> Result<Option<i32>, String> {
        if text.is_empty() {
            Ok(None)
        } else if text.bytes().all(|b| b.is_ascii_digit()) {
            text.parse().map(Some).map_err(|_| invalid())
        } else {
            Err(invalid())
        }
    };
    let (low, high) = match partitions {
        None => (0, i32::MAX),
        Some(p) => match p.split_once('-') {
            Some((low, high)) => (number(low)?.unwrap_or(0), number(high)?.unwrap_or(i32::MAX)),
            None => match number(p)? {
                Some(n) => (n, n.saturating_add(1)),
                None => (0, i32::MAX),
            },
        },
    };
    Ok(PartitionRule { topic, low, high })
}

/// `--time`'s ListOffsets timestamp.
pub fn parse_time(text: &str) -> Result<i64, String> {
    match text {
        "earliest" => Ok(EARLIEST),
        "latest" => Ok(LATEST),
        "max-timestamp" => Ok(MAX_TIMESTAMP),
        "earliest-local" => Ok(EARLIEST_LOCAL),
        "latest-tiered" => Ok(LATEST_TIERED),
        number => number.parse().map_err(|_| {
            format!(
                "Malformed time argument {number}. Please use -1 or latest / -2 or earliest / \
                 -3 or max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a \
                 specified long format timestamp"
            )
        }),
    }
}

/// Runs `gregor get-offsets`; errors print as `Error occurred: ...`.
pub fn run_get_offsets(args: GetOffsetsArgs) -> Result<(), String> {
    let outcome = (|| {
        let timestamp = parse_time(&args.time)?;
        let rules = match &args.topic_partitions {
            Some(specs) => specs
                .split(',')
                .map(parse_rule)
                .collect::<Result<Vec<_>, _>>()?,
            None => {
                let partitions: Option<Vec<i32>> = match args.partitions.as_deref() {
                    None | Some("") => None,
                    Some(list) => Some(
                        list.split(',')
                            .map(|p| p.trim().parse::<i32>())
                            .collect::<Result<_, _>>()
                            .map_err(|_| {
                                format!(
                                    "--partitions expects a comma separated list of numeric \
                                     partition ids, but received: {list}"
                                )
                            })?,
                    ),
                };
                let topic = full_match(args.topic.as_deref().unwrap_or(".*"))?;
                match partitions {
                    None => vec![PartitionRule {
                        topic,
                        low: 0,
                        high: i32::MAX,
                    }],
                    Some(list) => list
                        .into_iter()
                        .map(|p| PartitionRule {
                            topic: topic.clone(),
                            low: p,
                            high: p.saturating_add(1),
                        })
                        .collect(),
                }
            }
        };
        let lines = block_on(get_offsets(
            &args.bootstrap_server,
            &rules,
            timestamp,
            args.exclude_internal_topics,
        ))??;
        for line in lines {
            outln!("{line}");
        }
        Ok(())
    })();
    outcome.map_err(|message: String| format!("Error occurred: {message}"))
}

async fn get_offsets(
    bootstrap: &str,
    rules: &[PartitionRule],
    timestamp: i64,
    exclude_internal: bool,
) -> Result<Vec<String>, String> {
    let mut brokers = Brokers::connect(bootstrap, "GetOffsetShell", None)
        .await
        .map_err(|e| e.to_string())?;
    let wanted: Vec<(String, i32)> = brokers
        .view
        .leaders
        .keys()
        .filter(|(topic, _)| !(exclude_internal && topic.starts_with("__")))
        .filter(|(topic, partition)| rules.iter().any(|r| r.allows(topic, *partition)))
        .cloned()
        .collect();
    if wanted.is_empty() {
        return Err("Could not match any topic-partitions with the specified filters".into());
    }
    let mut offsets: BTreeMap<String, String> = BTreeMap::new();
    // As the admin client's listOffsets: a retriable error (a leader not elected yet or moved,
    // a lost connection) refreshes metadata and asks again until default.api.timeout.ms.
    let deadline = Instant::now() + LIST_OFFSETS_TIMEOUT;
    let mut pending = wanted;
    let mut failures: BTreeMap<(String, i32), String> = BTreeMap::new();
    loop {
        let mut retry = Vec::new();
        for (topic, partition) in pending {
            match brokers.list_offset(&topic, partition, timestamp).await {
                Ok(Some(offset)) => {
                    failures.remove(&(topic.clone(), partition));
                    offsets.insert(
                        format!("{topic}-{partition}"),
                        format!("{topic}:{partition}:{offset}"),
                    );
                }
                Ok(None) => {
                    failures.remove(&(topic.clone(), partition));
                }
                Err(error) => {
                    let retriable = match &error {
                        AdminError::Io(_) => {
                            if let Some(leader) = brokers.leader(&topic, partition) {
                                brokers.open.remove(&leader);
                            }
                            true
                        }
                        AdminError::Broker { code, .. } => retriable_fetch_error(*code),
                        AdminError::UnsupportedVersion(_) => false,
                    };
                    failures.insert((topic.clone(), partition), error.to_string());
                    if retriable {
                        retry.push((topic, partition));
                    }
                }
            }
        }
        if retry.is_empty() || Instant::now() >= deadline {
            break;
        }
        tokio::time::sleep(METADATA_RETRY_BACKOFF).await;
        if let Ok(fresh) = Brokers::connect(bootstrap, "GetOffsetShell", None).await {
            brokers = fresh;
        }
        pending = retry;
    }
    for ((topic, partition), error) in failures {
        eprintln!(
            "Skip getting offsets for topic-partition {topic}-{partition} due to error: {error}"
        );
    }
    // Sorted as kafka-get-offsets.sh sorts them: by `topic-partition` as text.
    Ok(offsets.into_values().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_is_kafkas() {
        // Values from Kafka's UtilsTest.testMurmur2.
        assert_eq!(murmur2(b"21"), -973_932_308);
        assert_eq!(murmur2(b"foobar"), -790_332_482);
        assert_eq!(murmur2(b"a-little-bit-long-string"), -985_981_536);
        assert_eq!(murmur2(b"a-little-bit-longer-string"), -1_486_304_829);
        assert_eq!(
            murmur2(b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8"),
            -58_897_971
        );
        assert_eq!(murmur2(b"abc"), 479_470_107);
    }

    /// A reader of keys (`k:v`) and headers (`h1:v1,h2:v2<TAB>`) with `NULL` as null marker.
    fn keys_and_headers_reader() -> LineReader {
        let props = properties(&[
            "parse.key=true".to_owned(),
            "key.separator=:".to_owned(),
            "parse.headers=true".to_owned(),
            "null.marker=NULL".to_owned(),
        ])
        .unwrap_or_default();
        LineReader::new(&props)
    }

    #[test]
    fn lines_become_records_as_the_line_reader_reads_them() {
        let reader = keys_and_headers_reader();
        assert_eq!(
            reader.parse("h1:v1,h2:NULL\tk:value", 1),
            Ok(LineRecord {
                key: Some(b"k".to_vec()),
                value: Some(b"value".to_vec()),
                headers: vec![
                    (b"h1".to_vec(), Some(b"v1".to_vec())),
                    (b"h2".to_vec(), None)
                ],
            })
        );
        assert_eq!(
            reader.parse("NULL\tNULL:NULL", 2),
            Ok(LineRecord {
                key: None,
                value: None,
                headers: Vec::new()
            })
        );
        assert_eq!(
            reader.parse("no-delimiter", 3),
            Err("No headers delimiter found on line number 3: 'no-delimiter'".to_owned())
        );
        assert_eq!(
            reader.parse("h1:v1,bad\tk:v", 4),
            Err("No header key separator found in pair 'bad' on line number 4".to_owned())
        );
        assert_eq!(
            reader.parse("NULL:v\tk:v", 5),
            Err(
                "Header keys should not be equal to the null marker 'NULL' as they can't be null"
                    .to_owned()
            )
        );
        assert_eq!(
            reader.parse("h:v\tno-separator", 6),
            Err("No key separator found on line number 6: 'h:v\tno-separator'".to_owned())
        );
        let plain = LineReader::new(&HashMap::new());
        assert_eq!(
            plain.parse("a\tb", 1),
            Ok(LineRecord {
                key: None,
                value: Some(b"a\tb".to_vec()),
                headers: Vec::new()
            })
        );
    }

    #[test]
    fn records_print_as_the_default_formatter_prints_them() {
        let record = gregor_log::batch::OwnedRecord {
            offset: 7,
            timestamp: 1000,
            key: Some(b"k".to_vec()),
            value: None,
            headers: vec![(b"h".to_vec(), Some(b"v".to_vec()))],
        };
        let all = properties(&[
            "print.timestamp=true".to_owned(),
            "print.partition=true".to_owned(),
            "print.offset=true".to_owned(),
            "print.headers=true".to_owned(),
            "print.key=true".to_owned(),
        ])
        .unwrap_or_default();
        assert_eq!(
            Formatter::new(&all).format(2, &record, "CreateTime", -1),
            b"CreateTime:1000\tPartition:2\tOffset:7\th:v\tk\tnull\n".to_vec()
        );
        assert_eq!(
            Formatter::new(&HashMap::new()).format(2, &record, "CreateTime", -1),
            b"null\n".to_vec()
        );
        // No stray separator when neither key nor value is printed, and no line separator
        // without a value (Kafka's writeTo).
        let offset_only = properties(&[
            "print.offset=true".to_owned(),
            "print.value=false".to_owned(),
        ])
        .unwrap_or_default();
        assert_eq!(
            Formatter::new(&offset_only).format(2, &record, "CreateTime", 3),
            b"Offset:7".to_vec()
        );
        let epoch = properties(&[
            "print.epoch=true".to_owned(),
            "print.delivery=true".to_owned(),
        ])
        .unwrap_or_default();
        assert_eq!(
            Formatter::new(&epoch).format(2, &record, "CreateTime", 3),
            b"Delivery:NOT_PRESENT\tEpoch:3\tnull\n".to_vec()
        );
        assert_eq!(
            Formatter::new(&epoch).format(2, &record, "CreateTime", -1),
            b"Delivery:NOT_PRESENT\tEpoch:NOT_PRESENT\tnull\n".to_vec()
        );
    }

    #[test]
    fn log_lines_carry_a_readable_date() {
        assert_eq!(log_time(0), "1970-01-01 00:00:00,000");
        assert_eq!(log_time(1_709_251_199_999), "2024-02-29 23:59:59,999");
        assert_eq!(log_time(951_782_400_000), "2000-02-29 00:00:00,000");
    }

    #[test]
    fn lines_end_as_javas_read_line_ends_them() {
        let lines = |chunk: &[u8]| -> Vec<Vec<u8>> {
            split_lines(chunk).into_iter().map(<[u8]>::to_vec).collect()
        };
        assert_eq!(lines(b"b\rc\n"), vec![b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(lines(b"a\r\n"), vec![b"a".to_vec()]);
        assert_eq!(lines(b"x\r\r\n"), vec![b"x".to_vec(), Vec::<u8>::new()]);
        assert_eq!(lines(b"\n"), vec![Vec::<u8>::new()]);
        assert_eq!(lines(b"tail"), vec![b"tail".to_vec()]);
        assert!(lines(b"").is_empty());
    }

    #[test]
    fn header_sections_split_as_kafkas_reader_splits_them() {
        let reader = keys_and_headers_reader();
        // A header section equal to null.marker: no headers.
        assert_eq!(
            reader.parse("NULL\tk:v", 1),
            Ok(LineRecord {
                key: Some(b"k".to_vec()),
                value: Some(b"v".to_vec()),
                headers: Vec::new()
            })
        );
        let plain =
            LineReader::new(&properties(&["parse.headers=true".to_owned()]).unwrap_or_default());
        assert_eq!(
            plain.parse("\tv", 2),
            Err("No header key separator found in pair '' on line number 2".to_owned())
        );
        assert_eq!(
            plain.parse("a:1,,b:2\tv", 3),
            Err("No header key separator found in pair '' on line number 3".to_owned())
        );
        // Trailing empty pairs are dropped, as Java's Pattern.split drops them.
        assert_eq!(plain.parse("a:1,,\tv", 4).map(|r| r.headers.len()), Ok(1));
    }

    #[test]
    fn records_are_batched_by_bytes_and_checked_alone() {
        let record = |n: usize| LineRecord {
            key: None,
            value: Some(vec![b'x'; n]),
            headers: Vec::new(),
        };
        // Kafka's upper bound: 61 (batch) + 21 (record) + 1 (null key) + varint + value + 1
        // (no headers).
        assert_eq!(
            record_size_upper_bound(&record(10)),
            61 + 21 + 1 + 1 + 10 + 1
        );
        assert_eq!(
            record_size_upper_bound(&record(10_000)),
            61 + 21 + 1 + 3 + 10_000 + 1
        );
        let records: Vec<LineRecord> = (0..5).map(|_| record(10_000)).collect();
        let sizes: Vec<usize> = batches_by_size(&records, 16_384, false)
            .iter()
            .map(|b| b.len())
            .collect();
        assert_eq!(sizes, vec![1, 1, 1, 1, 1]);
        let small: Vec<LineRecord> = (0..300).map(|_| record(100)).collect();
        // 61 + 130 * 125 bytes fit in 16384, one more does not (zig-zag 100 takes 2 bytes).
        let sizes: Vec<usize> = batches_by_size(&small, 16_384, false)
            .iter()
            .map(|b| b.len())
            .collect();
        assert_eq!(sizes, vec![130, 130, 40]);
        assert_eq!(batches_by_size(&small[..3], 16_384, true).len(), 3);
    }

    #[test]
    fn get_offsets_rules_are_kafkas() {
        let rule = parse_rule("topic1:1").unwrap_or_else(|e| panic!("{e}"));
        assert!(
            rule.allows("topic1", 1) && !rule.allows("topic1", 2) && !rule.allows("topic10", 1)
        );
        let range = parse_rule("t.*:2-4").unwrap_or_else(|e| panic!("{e}"));
        assert!(range.allows("tx", 2) && range.allows("tx", 3) && !range.allows("tx", 4));
        let open = parse_rule(":5-").unwrap_or_else(|e| panic!("{e}"));
        assert!(open.allows("any", 9) && !open.allows("any", 4));
        let upper = parse_rule("t:-3").unwrap_or_else(|e| panic!("{e}"));
        assert!(upper.allows("t", 0) && !upper.allows("t", 3));
        assert_eq!(
            parse_rule("t:x").map(|_| ()),
            Err("Invalid rule specification: t:x".to_owned())
        );
        assert_eq!(parse_time("-2"), Ok(-2));
        assert_eq!(parse_time("max-timestamp"), Ok(-3));
        assert_eq!(parse_time("earliest-local"), Ok(-4));
        assert_eq!(parse_time("latest-tiered"), Ok(-5));
        assert!(parse_time("x")
            .err()
            .is_some_and(|e| e.contains("-4 or earliest-local / -5 or latest-tiered")));
        assert!(parse_time("soon").is_err());
    }
}
