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
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const LEADER_NOT_AVAILABLE: i16 = 5;
/// The producer's `retry.backoff.ms` between Metadata requests for a topic not there yet.
const METADATA_RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// The console producer's client id.
const CONSOLE_PRODUCER: &str = "console-producer";
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
    /// Records sent in one batch per partition at most.
    #[arg(long, default_value_t = 200)]
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
                Some((header_text, after)) => {
                    rest = after;
                    for header in header_text
                        .split(self.headers_separator.as_str())
                        .filter(|h| !h.is_empty())
                    {
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
    let batch_size = if args.sync { 1 } else { args.batch_size.max(1) };
    let linger = Duration::from_millis(if args.sync { 0 } else { args.timeout });
    let (lines_tx, lines_rx) = tokio::sync::mpsc::channel::<String>(1024);
    // stdin is read on its own thread: a blocking read must not stall the sends.
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if lines_tx.blocking_send(line).is_err() {
                break;
            }
        }
    });
    block_on(produce_lines(
        &args.bootstrap_server,
        &args.topic,
        reader,
        acks,
        compression,
        batch_size,
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
    batch_size: usize,
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
        // One round: the first line, then more until the batch is full or the linger passes.
        let Some(first) = lines.recv().await else {
            break;
        };
        let deadline = tokio::time::Instant::now() + linger;
        let mut round = vec![first];
        while round.len() < batch_size * partitions.len() {
            match tokio::time::timeout_at(deadline, lines.recv()).await {
                Ok(Some(line)) => round.push(line),
                _ => break,
            }
        }
        let mut by_partition: BTreeMap<i32, Vec<LineRecord>> = BTreeMap::new();
        let mut bad_line = None;
        for line in &round {
            line_number += 1;
            match reader.parse(line, line_number) {
                Ok(record) => {
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
            for chunk in records.chunks(batch_size) {
                if let Err(error) =
                    send_batch(&mut brokers, topic, partition, chunk, acks, compression).await
                {
                    failed = true;
                    eprintln!(
                        "[{}] ERROR Error when sending message to topic {topic} with key: {}, value: {} bytes with error: {error} (org.apache.kafka.clients.producer.internals.ErrorLoggingCallback)",
                        now_text(),
                        chunk[0].key.as_ref().map_or("null".to_owned(), |k| format!("{} bytes", k.len())),
                        chunk[0].value.as_ref().map_or(0, Vec::len),
                    );
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

/// Wall-clock time for log lines, as Kafka's tools print it.
fn now_text() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    format!("{now}")
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
    /// print.headers, print.value (true), key.separator (tab), line.separator (newline),
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
            key_separator: get("key.separator", "\t"),
            line_separator: get("line.separator", "\n"),
            headers_separator: get("headers.separator", ","),
            null_literal: get("null.literal", "null"),
        }
    }

    /// One record as the formatter writes it.
    pub fn format(
        &self,
        partition: i32,
        record: &gregor_log::batch::OwnedRecord,
        timestamp_type: &str,
    ) -> Vec<u8> {
        let mut out = Vec::new();
        let text = |bytes: &Option<Vec<u8>>| {
            bytes
                .clone()
                .unwrap_or_else(|| self.null_literal.as_bytes().to_vec())
        };
        if self.print_timestamp {
            out.extend_from_slice(format!("{timestamp_type}:{}", record.timestamp).as_bytes());
            out.extend_from_slice(self.key_separator.as_bytes());
        }
        if self.print_partition {
            out.extend_from_slice(format!("Partition:{partition}").as_bytes());
            out.extend_from_slice(self.key_separator.as_bytes());
        }
        if self.print_offset {
            out.extend_from_slice(format!("Offset:{}", record.offset).as_bytes());
            out.extend_from_slice(self.key_separator.as_bytes());
        }
        if self.print_headers {
            if record.headers.is_empty() {
                out.extend_from_slice(b"NO_HEADERS");
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
                out.extend(headers.join(self.headers_separator.as_bytes()));
            }
            out.extend_from_slice(self.key_separator.as_bytes());
        }
        if self.print_key {
            out.extend(text(&record.key));
            if self.print_value {
                out.extend_from_slice(self.key_separator.as_bytes());
            }
        }
        if self.print_value {
            out.extend(text(&record.value));
        }
        out.extend_from_slice(self.line_separator.as_bytes());
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
    result
}

async fn consume(
    args: &ConsoleConsumerArgs,
    formatter: &Formatter,
    start: i64,
    isolation: i8,
    partition_max_bytes: i32,
    processed: &mut u64,
) -> Result<(), String> {
    let topic = args.topic.as_str();
    let started = Instant::now();
    let timeout = args.timeout_ms.map(Duration::from_millis);
    // Kafka's consumer (allow.auto.create.topics=true) asks for a topic it does not know with
    // auto-creation allowed, and keeps polling until it is there, with its partitions; an
    // assigned `--partition` the topic lacks is waited for the same way. Only --timeout-ms
    // ends the wait.
    let waited = Brokers::wait_for_topic(
        &args.bootstrap_server,
        "console-consumer",
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
    )
    .await
    .map_err(|e| e.to_string())?;
    let mut brokers = match waited {
        TopicWait::Ready(brokers) => brokers,
        TopicWait::TimedOut => {
            print_consumer_timeout();
            return Ok(());
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
        let (joined, assigned) =
            GroupMember::join(&args.bootstrap_server, group, topic, &partitions)
                .await
                .map_err(|e| e.to_string())?;
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
    loop {
        if args.max_messages.is_some_and(|max| *processed >= max) {
            break;
        }
        if timeout.is_some_and(|t| last_message.elapsed() >= t) {
            print_consumer_timeout();
            break;
        }
        if let Some(m) = member.as_mut() {
            if let Some(assigned) = m
                .tick(&positions, &partitions)
                .await
                .map_err(|e| e.to_string())?
            {
                positions = start_positions(&mut brokers, Some(m), topic, &assigned, start).await?;
            }
        }
        if positions.is_empty() {
            // A member without partitions waits for the next rebalance.
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        }
        // One fetch per leader, each over that leader's partitions.
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for &partition in positions.keys() {
            let leader = brokers
                .leader(topic, partition)
                .ok_or_else(|| format!("no leader for {topic}-{partition}"))?;
            by_leader.entry(leader).or_default().push(partition);
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
            let client = brokers.client(leader).await.map_err(|e| e.to_string())?;
            let version = client
                .version_of::<FetchRequest>()
                .map(|v| v.min(LAST_VERSION_BY_NAME))
                .ok_or("the broker does not support Fetch")?;
            let response = client
                .send_at(&request, version)
                .await
                .map_err(|e| e.to_string())?;
            super::check(response.error_code, None).map_err(|e| e.to_string())?;
            for data in response.responses.iter().flat_map(|t| &t.partitions) {
                let partition = data.partition_index;
                match data.error_code {
                    0 => {}
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
                        print_batch(
                            &batch,
                            partition,
                            position,
                            formatter,
                            &mut stdout,
                            processed,
                            args.max_messages,
                        )?;
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
        m.close(&positions).await.map_err(|e| e.to_string())?;
    }
    Ok(())
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

fn print_batch(
    batch: &RecordBatch<'_>,
    partition: i32,
    position: i64,
    formatter: &Formatter,
    out: &mut impl std::io::Write,
    processed: &mut u64,
    max_messages: Option<u64>,
) -> Result<(), String> {
    let timestamp_type = batch.timestamp_type().name();
    let records = batch
        .owned_records()
        .map_err(|e| format!("a record batch could not be read: {e}"))?;
    for record in records {
        if record.offset < position {
            continue;
        }
        if max_messages.is_some_and(|max| *processed >= max) {
            break;
        }
        out.write_all(&formatter.format(partition, &record, timestamp_type))
            .map_err(|e| format!("cannot write to stdout: {e}"))?;
        *processed += 1;
    }
    Ok(())
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
    /// `<timestamp>` / -1 or latest / -2 or earliest / -3 or max-timestamp.
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
        number => number.parse().map_err(|_| {
            format!(
                "Malformed time argument {number}. Please use -1 or latest / -2 or earliest / \
                 -3 or max-timestamp, or a specified long format timestamp"
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
    for (topic, partition) in wanted {
        match brokers.list_offset(&topic, partition, timestamp).await {
            Ok(Some(offset)) => {
                offsets.insert(
                    format!("{topic}-{partition}"),
                    format!("{topic}:{partition}:{offset}"),
                );
            }
            Ok(None) => {}
            Err(error) => eprintln!(
                "Skip getting offsets for topic-partition {topic}-{partition} due to error: {error}"
            ),
        }
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

    #[test]
    fn lines_become_records_as_the_line_reader_reads_them() {
        let props = properties(&[
            "parse.key=true".to_owned(),
            "key.separator=:".to_owned(),
            "parse.headers=true".to_owned(),
            "null.marker=NULL".to_owned(),
        ])
        .unwrap_or_default();
        let reader = LineReader::new(&props);
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
            reader.parse("\tNULL:NULL", 2),
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
            Formatter::new(&all).format(2, &record, "CreateTime"),
            b"CreateTime:1000\tPartition:2\tOffset:7\th:v\tk\tnull\n".to_vec()
        );
        assert_eq!(
            Formatter::new(&HashMap::new()).format(2, &record, "CreateTime"),
            b"null\n".to_vec()
        );
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
        assert!(parse_time("soon").is_err());
    }
}
