//! `gregor delete-records` (kafka-delete-records.sh) and `gregor log-dirs`
//! (kafka-log-dirs.sh): requests that go to the brokers holding the partitions, found through
//! Metadata from the bootstrap server.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::delete_records_request::{
    DeleteRecordsPartition, DeleteRecordsTopic,
};
use kafka_protocol::messages::{
    DeleteRecordsRequest, DescribeLogDirsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use serde_json::Value;

use super::{block_on, java_message, AdminClient, AdminError, CommandConfig};

/// `gregor delete-records`: kafka-delete-records.sh.
#[derive(Args, Debug)]
pub struct DeleteRecordsArgs {
    /// REQUIRED: The server to connect to.
    #[arg(long, required = true)]
    pub bootstrap_server: String,
    /// REQUIRED: The JSON file with offset per partition. The format to use is:
    /// {"partitions": [{"topic": "foo", "partition": 1, "offset": 1}], "version": 1}
    #[arg(long, required = true)]
    pub offset_json_file: PathBuf,
    /// A property file containing configs to be passed to Admin Client (`client.id`).
    #[arg(long)]
    pub command_config: Option<PathBuf>,
}

/// `gregor log-dirs`: kafka-log-dirs.sh.
#[derive(Args, Debug)]
pub struct LogDirsArgs {
    /// REQUIRED: the server(s) to use for bootstrapping.
    #[arg(long, required = true)]
    pub bootstrap_server: String,
    /// Describe the specified log directories on the specified brokers.
    #[arg(long, required = true)]
    pub describe: bool,
    /// The list of topics to be queried in the form "topic1,topic2,topic3". All topics will be
    /// queried if no topic list is specified.
    #[arg(long, default_value = "")]
    pub topic_list: String,
    /// The list of brokers to be queried in the form "0,1,2". All brokers in the cluster will be
    /// queried if no broker list is specified.
    #[arg(long, default_value = "")]
    pub broker_list: String,
    /// Property file containing configs to be passed to Admin Client (`client.id`).
    #[arg(long)]
    pub command_config: Option<PathBuf>,
}

/// Parses kafka-delete-records.sh's offset JSON: (topic, partition, offset) in file order, with
/// Kafka's messages for a bad file.
pub fn parse_offset_json(text: &str) -> Result<Vec<(String, i32, i64)>, String> {
    let json: Value = serde_json::from_str(text)
        .map_err(|_| "The input string is not a valid JSON".to_owned())?;
    let version = match json.get("version") {
        None => 1,
        Some(v) => v
            .as_i64()
            .ok_or_else(|| format!("Expected an int value for version, got {v}"))?,
    };
    if version != 1 {
        return Err(format!("Not supported version field value {version}"));
    }
    let partitions = json
        .get("partitions")
        .ok_or_else(|| "Missing partitions field".to_owned())?
        .as_array()
        .ok_or_else(|| "Expected JSON array for partitions".to_owned())?;
    let mut out = Vec::with_capacity(partitions.len());
    for entry in partitions {
        let (topic, partition) = super::json_topic_partition(entry)?;
        let offset = entry
            .get("offset")
            .ok_or_else(|| "No such field exists: `offset`".to_owned())?
            .as_i64()
            .ok_or_else(|| "Expected a long value for offset".to_owned())?;
        out.push((topic, partition, offset));
    }
    let mut seen = BTreeSet::new();
    let duplicates: BTreeSet<String> = out
        .iter()
        .filter(|(t, p, _)| !seen.insert((t.clone(), *p)))
        .map(|(t, p, _)| format!("{t}-{p}"))
        .collect();
    if !duplicates.is_empty() {
        return Err(format!(
            "Offset json file contains duplicate topic partitions: {}",
            duplicates.into_iter().collect::<Vec<_>>().join(",")
        ));
    }
    Ok(out)
}

/// What the Java client's exception for `code` prints (`getMessage()` of the
/// `ExecutionException`: the cause's class and message).
pub fn exception_text(code: i16) -> String {
    let class = match ResponseError::try_from_code(code) {
        Some(ResponseError::OffsetOutOfRange) => "OffsetOutOfRangeException",
        Some(ResponseError::UnknownTopicOrPartition) => "UnknownTopicOrPartitionException",
        Some(ResponseError::NotLeaderOrFollower) => "NotLeaderOrFollowerException",
        Some(ResponseError::PolicyViolation) => "PolicyViolationException",
        Some(ResponseError::KafkaStorageError) => "KafkaStorageException",
        Some(ResponseError::TopicAuthorizationFailed) => "TopicAuthorizationException",
        Some(ResponseError::ClusterAuthorizationFailed) => "ClusterAuthorizationException",
        Some(ResponseError::InvalidTopicException) => "InvalidTopicException",
        _ => "KafkaException",
    };
    let message = match code {
        1 => "The requested offset is not within the range of offsets maintained by the server."
            .to_owned(),
        6 => "For requests intended only for the leader, this error indicates that the broker is \
              not the current leader. For requests intended for any replica, this error \
              indicates that the broker is not a replica of the topic partition."
            .to_owned(),
        56 => "Disk error when trying to access log file on the disk.".to_owned(),
        _ => java_message(code, None),
    };
    format!("org.apache.kafka.common.errors.{class}: {message}")
}

/// The cluster as Metadata shows it: broker id → `host:port`, and the leader of each
/// partition of the topics asked for (`None`: every topic).
pub(crate) struct ClusterView {
    pub(crate) brokers: BTreeMap<i32, String>,
    pub(crate) leaders: BTreeMap<(String, i32), i32>,
    /// Topics Metadata answered with an error code.
    pub(crate) topic_errors: BTreeMap<String, i16>,
}

pub(crate) async fn cluster_view(
    client: &mut AdminClient,
    topics: Option<&[String]>,
    allow_auto_topic_creation: bool,
) -> Result<ClusterView, AdminError> {
    let request = MetadataRequest::default()
        .with_allow_auto_topic_creation(allow_auto_topic_creation)
        .with_topics(topics.map(|names| {
            names
                .iter()
                .map(|name| {
                    kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(name.clone()))))
                })
                .collect()
        }));
    let (_, metadata) = client.send(&request).await?;
    let mut view = ClusterView {
        brokers: metadata
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect(),
        leaders: BTreeMap::new(),
        topic_errors: BTreeMap::new(),
    };
    for topic in &metadata.topics {
        let Some(name) = topic.name.as_ref().map(|n| n.to_string()) else {
            continue;
        };
        if topic.error_code != 0 {
            view.topic_errors.insert(name, topic.error_code);
            continue;
        }
        for partition in &topic.partitions {
            view.leaders.insert(
                (name.clone(), partition.partition_index),
                partition.leader_id.0,
            );
        }
    }
    Ok(view)
}

/// Runs `gregor delete-records`; `Err` is the message for stderr.
pub fn run_delete_records(args: DeleteRecordsArgs) -> Result<(), String> {
    let text = std::fs::read_to_string(&args.offset_json_file)
        .map_err(|e| format!("{}: {e}", args.offset_json_file.display()))?;
    let wanted = parse_offset_json(&text)?;
    let config = CommandConfig::load(args.command_config.as_deref()).map_err(|e| e.to_string())?;
    let mut out = String::new();
    let result = block_on(delete_records(
        &args.bootstrap_server,
        &config,
        &wanted,
        &mut out,
    ))?;
    out!("{out}");
    result.map_err(|e| e.to_string())
}

async fn delete_records(
    bootstrap: &str,
    config: &CommandConfig,
    wanted: &[(String, i32, i64)],
    out: &mut String,
) -> Result<(), AdminError> {
    let mut client = config.connect(bootstrap).await?;
    let topics: Vec<String> = wanted
        .iter()
        .map(|(t, _, _)| t.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let view = cluster_view(&mut client, Some(&topics), false).await?;
    let _ = writeln!(out, "Executing records delete operation");
    // Partitions by leader; those without one answer with the error the Java admin client
    // reports for them.
    let mut by_leader: BTreeMap<i32, Vec<&(String, i32, i64)>> = BTreeMap::new();
    let mut results: BTreeMap<(String, i32), Result<i64, i16>> = BTreeMap::new();
    for entry in wanted {
        let (topic, partition, _) = entry;
        match view.leaders.get(&(topic.clone(), *partition)) {
            Some(leader) if *leader >= 0 => by_leader.entry(*leader).or_default().push(entry),
            Some(_) => {
                results.insert((topic.clone(), *partition), Err(5));
            }
            None => {
                let code = view.topic_errors.get(topic).copied().unwrap_or(3);
                results.insert((topic.clone(), *partition), Err(code));
            }
        }
    }
    for (leader, entries) in by_leader {
        let mut leader_client = match view.brokers.get(&leader) {
            Some(address) => config.connect(address).await?,
            None => config.connect(bootstrap).await?,
        };
        let mut topics: BTreeMap<&str, Vec<DeleteRecordsPartition>> = BTreeMap::new();
        for (topic, partition, offset) in &entries {
            topics.entry(topic).or_default().push(
                DeleteRecordsPartition::default()
                    .with_partition_index(*partition)
                    .with_offset(*offset),
            );
        }
        let request = DeleteRecordsRequest::default()
            .with_timeout_ms(30_000)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(name, partitions)| {
                        DeleteRecordsTopic::default()
                            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
        let (_, response) = leader_client.send(&request).await?;
        for topic in &response.topics {
            for partition in &topic.partitions {
                let result = if partition.error_code == 0 {
                    Ok(partition.low_watermark)
                } else {
                    Err(partition.error_code)
                };
                results.insert((topic.name.to_string(), partition.partition_index), result);
            }
        }
    }
    let _ = writeln!(out, "Records delete operation completed:");
    for (topic, partition, _) in wanted {
        match results.get(&(topic.clone(), *partition)) {
            Some(Ok(low_watermark)) => {
                let _ = writeln!(
                    out,
                    "partition: {topic}-{partition}\tlow_watermark: {low_watermark}"
                );
            }
            Some(Err(code)) => {
                let _ = writeln!(
                    out,
                    "partition: {topic}-{partition}\terror: {}",
                    exception_text(*code)
                );
            }
            None => {
                let _ = writeln!(
                    out,
                    "partition: {topic}-{partition}\terror: {}",
                    exception_text(-1)
                );
            }
        }
    }
    Ok(())
}

/// Runs `gregor log-dirs --describe`; `Err` is the message for stderr.
pub fn run_log_dirs(args: LogDirsArgs) -> Result<(), String> {
    let mut config =
        CommandConfig::load(args.command_config.as_deref()).map_err(|e| e.to_string())?;
    config
        .client_id
        .get_or_insert_with(|| "log-dirs-tool".to_owned());
    let topics: BTreeSet<String> = args
        .topic_list
        .split(',')
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect();
    let brokers = args
        .broker_list
        .split(',')
        .filter(|b| !b.is_empty())
        .map(|b| {
            b.trim()
                .parse::<i32>()
                .map_err(|_| format!("For input string: \"{b}\""))
        })
        .collect::<Result<BTreeSet<i32>, String>>()?;
    let mut out = String::new();
    let result = block_on(log_dirs(
        &args.bootstrap_server,
        &config,
        &topics,
        &brokers,
        &mut out,
    ))?;
    out!("{out}");
    result
}

async fn log_dirs(
    bootstrap: &str,
    config: &CommandConfig,
    topics: &BTreeSet<String>,
    wanted_brokers: &BTreeSet<i32>,
    out: &mut String,
) -> Result<(), String> {
    let mut client = config.connect(bootstrap).await.map_err(|e| e.to_string())?;
    let view = cluster_view(&mut client, Some(&[]), false)
        .await
        .map_err(|e| e.to_string())?;
    let cluster: BTreeSet<i32> = view.brokers.keys().copied().collect();
    let missing: Vec<String> = wanted_brokers
        .difference(&cluster)
        .map(ToString::to_string)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "ERROR: The given brokers do not exist from --broker-list: {}. Current existent brokers: {}",
            missing.join(","),
            cluster.iter().map(ToString::to_string).collect::<Vec<_>>().join(",")
        ));
    }
    let queried: Vec<i32> = if wanted_brokers.is_empty() {
        cluster.into_iter().collect()
    } else {
        wanted_brokers.iter().copied().collect()
    };
    let _ = writeln!(out, "Querying brokers for log directories information");
    let mut brokers_json = Vec::new();
    for broker in &queried {
        let address = view.brokers.get(broker).cloned().unwrap_or_default();
        let mut broker_client = config.connect(&address).await.map_err(|e| e.to_string())?;
        let (_, response) = broker_client
            .send(&DescribeLogDirsRequest::default().with_topics(None))
            .await
            .map_err(|e| e.to_string())?;
        let mut dirs_json = Vec::new();
        for dir in &response.results {
            let error = if dir.error_code == 0 {
                "null".to_owned()
            } else {
                json_string(&format!(
                    "org.apache.kafka.common.errors.{}",
                    exception_class(dir.error_code)
                ))
            };
            let mut partitions = Vec::new();
            for topic in &dir.topics {
                if !topics.is_empty() && !topics.contains(topic.name.as_str()) {
                    continue;
                }
                for partition in &topic.partitions {
                    partitions.push(format!(
                        "{{\"partition\":{},\"size\":{},\"offsetLag\":{},\"isFuture\":{}}}",
                        json_string(&format!(
                            "{}-{}",
                            topic.name.as_str(),
                            partition.partition_index
                        )),
                        partition.partition_size,
                        partition.offset_lag,
                        partition.is_future_key
                    ));
                }
            }
            dirs_json.push(format!(
                "{{\"logDir\":{},\"error\":{error},\"partitions\":[{}]}}",
                json_string(dir.log_dir.as_str()),
                partitions.join(",")
            ));
        }
        brokers_json.push(format!(
            "{{\"broker\":{broker},\"logDirs\":[{}]}}",
            dirs_json.join(",")
        ));
    }
    let _ = writeln!(
        out,
        "Received log directory information from brokers {}",
        queried
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    let _ = writeln!(
        out,
        "{{\"version\":1,\"brokers\":[{}]}}",
        brokers_json.join(",")
    );
    Ok(())
}

fn exception_class(code: i16) -> &'static str {
    match code {
        56 => "KafkaStorageException",
        31 => "ClusterAuthorizationException",
        _ => "KafkaException",
    }
}

fn json_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offset_json_is_read_as_kafka_reads_it() {
        assert_eq!(
            parse_offset_json(
                r#"{"partitions": [{"topic": "foo", "partition": 1, "offset": 5},
                                   {"topic": "bar", "partition": 0, "offset": -1}], "version": 1}"#
            ),
            Ok(vec![("foo".into(), 1, 5), ("bar".into(), 0, -1)])
        );
        assert_eq!(
            parse_offset_json(r#"{"partitions": []}"#),
            Ok(Vec::new()),
            "the version defaults to 1"
        );
        assert_eq!(
            parse_offset_json("{not json"),
            Err("The input string is not a valid JSON".into())
        );
        assert_eq!(
            parse_offset_json(r#"{"version": 2, "partitions": []}"#),
            Err("Not supported version field value 2".into())
        );
        assert_eq!(
            parse_offset_json(r#"{"version": 1}"#),
            Err("Missing partitions field".into())
        );
        assert_eq!(
            parse_offset_json(
                r#"{"partitions": [{"topic": "a", "partition": 0, "offset": 1},
                                   {"topic": "a", "partition": 0, "offset": 2}]}"#
            ),
            Err("Offset json file contains duplicate topic partitions: a-0".into())
        );
    }

    #[test]
    fn errors_print_as_the_java_client_prints_them() {
        assert_eq!(
            exception_text(1),
            "org.apache.kafka.common.errors.OffsetOutOfRangeException: The requested offset is \
             not within the range of offsets maintained by the server."
        );
        assert_eq!(
            exception_text(44),
            "org.apache.kafka.common.errors.PolicyViolationException: Request parameters do not \
             satisfy the configured policy."
        );
    }
}
