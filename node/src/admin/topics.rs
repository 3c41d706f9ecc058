//! `gregor topics`: kafka-topics.sh (create, delete, alter partitions, list, describe) with its
//! argument rules, output and messages.
//!
//! Like kafka-topics.sh (which sets `retryOnQuotaViolation(false)`), a topic refused with
//! THROTTLING_QUOTA_EXCEEDED is reported at once, with the throttle time the broker asked for,
//! and the tool exits non-zero: retrying would only queue the operator behind the quota.
//!
//! Kafka's texts are kept, and so is its failure split: usage mistakes print the usage; what
//! `checkArgs` refuses prints its message alone; anything failing in the action (an invalid
//! value, a missing topic, a broker's error) prints `Error while executing topic command :
//! <message>` (kafka-topics.sh writes that one to stdout, Gregor to stderr like every other
//! error).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{
    CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::{
    BrokerId, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest,
    DescribeConfigsRequest, ListPartitionReassignmentsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::client_quotas::{java_hash_order, java_string_hash};
use super::{block_on, java_message, usage_exit, AdminClient, AdminError, CommandConfig};
use crate::storage::uuid_to_kafka_string;

/// How long the broker may take over a create, delete or alter (the admin client's default).
const OPERATION_TIMEOUT_MS: i32 = 30_000;
/// ConfigResource type of topics and the DEFAULT_CONFIG source.
const TOPIC: i8 = 2;
const DEFAULT_CONFIG: i8 = 5;
/// THROTTLING_QUOTA_EXCEEDED and TOPIC_ALREADY_EXISTS.
const THROTTLING_QUOTA_EXCEEDED: i16 = 89;
const TOPIC_ALREADY_EXISTS: i16 = 36;
/// Kafka's internal topics (`Topic.isInternal`).
const INTERNAL_TOPICS: [&str; 3] = [
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
];
/// kafka-topics.sh's hint on --alter with --config.
const CONFIGS_TOOL_HINT: &str =
    " (To alter topic configurations, the kafka-configs tool can be used.)";

/// `gregor topics`: kafka-topics.sh.
#[derive(Args, Debug, Default)]
pub struct TopicsArgs {
    /// REQUIRED: The Kafka server to connect to, `host:port[,host:port]`.
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: Option<String>,
    /// Property file containing configs to be passed to Admin Client (`client.id` is used;
    /// only PLAINTEXT connections are supported).
    #[arg(long, value_name = "FILE")]
    pub command_config: Option<PathBuf>,
    /// List all available topics.
    #[arg(long)]
    pub list: bool,
    /// Create a new topic.
    #[arg(long)]
    pub create: bool,
    /// Delete a topic.
    #[arg(long)]
    pub delete: bool,
    /// Alter the number of partitions and replica assignment. (To alter topic configurations,
    /// the configs tool can be used.)
    #[arg(long)]
    pub alter: bool,
    /// List details for the given topics.
    #[arg(long)]
    pub describe: bool,
    /// The topic to create, alter, describe or delete. It also accepts a regular expression,
    /// except for --create option.
    #[arg(long)]
    pub topic: Option<String>,
    /// The number of partitions for the topic being created or altered. If not supplied with
    /// --create, the topic uses the cluster default.
    #[arg(long, value_name = "# of partitions", allow_negative_numbers = true)]
    pub partitions: Option<i32>,
    /// The replication factor for each partition in the topic being created. If not supplied,
    /// the topic uses the cluster default.
    #[arg(long, value_name = "replication factor", allow_negative_numbers = true)]
    pub replication_factor: Option<i32>,
    /// A topic configuration override for the topic being created (repeatable). It is
    /// supported only in combination with --create.
    #[arg(long, value_name = "name=value")]
    pub config: Vec<String>,
    /// A list of manual partition-to-broker assignments for the topic being created or altered:
    /// `broker_id_for_part1_replica1:broker_id_for_part1_replica2,broker_id_for_part2_replica1:...`.
    #[arg(long, value_name = "ASSIGNMENT")]
    pub replica_assignment: Option<String>,
    /// If set when altering or deleting or describing topics, the action will only execute if
    /// the topic exists.
    #[arg(long)]
    pub if_exists: bool,
    /// If set when creating topics, the create request will not fail if the topic already
    /// exists, but the request will still be sent.
    #[arg(long)]
    pub if_not_exists: bool,
    /// Exclude internal topics when listing or describing topics.
    #[arg(long)]
    pub exclude_internal: bool,
    /// If set when describing topics, only show under-replicated partitions.
    #[arg(long)]
    pub under_replicated_partitions: bool,
    /// If set when describing topics, only show partitions whose leader is not available.
    #[arg(long)]
    pub unavailable_partitions: bool,
    /// If set when describing topics, only show partitions whose isr count is less than the
    /// configured minimum.
    #[arg(long)]
    pub under_min_isr_partitions: bool,
    /// If set when describing topics, only show partitions whose isr count is equal to the
    /// configured minimum.
    #[arg(long)]
    pub at_min_isr_partitions: bool,
    /// If set when describing topics, only show topics that have overridden configs.
    #[arg(long)]
    pub topics_with_overrides: bool,
}

/// How a run fails, in kafka-topics.sh's three ways.
#[derive(Debug, PartialEq, Eq)]
pub enum TopicsError {
    /// A usage mistake: the message, then the usage (`printUsageAndExit`).
    Usage(String),
    /// An argument check before anything runs: the message alone (`checkArgs`' throw).
    Invalid(String),
    /// A failure while executing: `Error while executing topic command : <message>`.
    Command(String),
}

impl From<AdminError> for TopicsError {
    fn from(error: AdminError) -> Self {
        match error {
            AdminError::Broker { code, message } => {
                TopicsError::Command(java_message(code, message.as_deref()))
            }
            other => TopicsError::Command(other.to_string()),
        }
    }
}

/// The action, decided by [`check_args`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `--create`.
    Create,
    /// `--delete`.
    Delete,
    /// `--alter`.
    Alter,
    /// `--list`.
    List,
    /// `--describe`.
    Describe,
}

/// kafka-topics.sh's option names, as joptsimple prints them in messages.
fn opt(name: &str) -> String {
    format!("\"[{name}]\"")
}

/// `TopicCommandOptions.checkArgs`: exactly one action, required and incompatible options.
pub fn check_args(args: &TopicsArgs) -> Result<Action, TopicsError> {
    let actions = [
        (args.alter, Action::Alter, "alter"),
        (args.create, Action::Create, "create"),
        (args.describe, Action::Describe, "describe"),
        (args.list, Action::List, "list"),
        (args.delete, Action::Delete, "delete"),
    ];
    let chosen: Vec<_> = actions.iter().filter(|(set, _, _)| *set).collect();
    let [(_, action, _)] = chosen.as_slice() else {
        return Err(TopicsError::Usage(
            "Command must include exactly one action: --list, --describe, --create, --alter or --delete".into(),
        ));
    };
    let action = *action;
    if args.bootstrap_server.is_none() {
        return Err(TopicsError::Invalid(
            "--bootstrap-server must be specified".into(),
        ));
    }
    if action == Action::Describe && args.if_exists && args.topic.is_none() {
        return Err(TopicsError::Usage(
            "--topic or --topic-id is required to describe a topic".into(),
        ));
    }
    if !matches!(action, Action::List | Action::Describe) && args.topic.is_none() {
        return Err(TopicsError::Usage(format!(
            "Missing required argument {}",
            opt("topic")
        )));
    }
    if action == Action::Alter {
        if !args.config.is_empty() {
            return Err(TopicsError::Usage(format!(
                "Option combination \"[[bootstrap-server], [config]]\" can't be used with option {}{CONFIGS_TOOL_HINT}",
                opt("alter")
            )));
        }
        if args.partitions.is_none() {
            return Err(TopicsError::Usage(format!(
                "Missing required argument {}",
                opt("partitions")
            )));
        }
    }
    // `checkInvalidArgs`: each option against the actions (and options) it cannot go with.
    let action_name = actions
        .iter()
        .find(|(_, a, _)| *a == action)
        .map_or("", |(_, _, name)| *name);
    let not_with = |used: bool, name: &str, allowed: &[Action]| {
        if used && !allowed.contains(&action) {
            Err(TopicsError::Usage(format!(
                "Option {} can't be used with option {}",
                opt(name),
                opt(action_name)
            )))
        } else {
            Ok(())
        }
    };
    let create_or_alter = [Action::Create, Action::Alter];
    not_with(!args.config.is_empty(), "config", &create_or_alter)?;
    not_with(args.partitions.is_some(), "partitions", &create_or_alter)?;
    not_with(
        args.replication_factor.is_some(),
        "replication-factor",
        &[Action::Create],
    )?;
    not_with(
        args.replica_assignment.is_some(),
        "replica-assignment",
        &create_or_alter,
    )?;
    if action == Action::Create && args.replica_assignment.is_some() {
        for (used, name) in [
            (args.partitions.is_some(), "partitions"),
            (args.replication_factor.is_some(), "replication-factor"),
        ] {
            if used {
                return Err(TopicsError::Usage(format!(
                    "Option {} can't be used with option {}",
                    opt("replica-assignment"),
                    opt(name)
                )));
            }
        }
    }
    let reports = [
        (
            args.under_replicated_partitions,
            "under-replicated-partitions",
        ),
        (args.under_min_isr_partitions, "under-min-isr-partitions"),
        (args.at_min_isr_partitions, "at-min-isr-partitions"),
        (args.unavailable_partitions, "unavailable-partitions"),
    ];
    for (used, name) in reports {
        not_with(used, name, &[Action::Describe])?;
        if used && args.topics_with_overrides {
            return Err(TopicsError::Usage(format!(
                "Option {} can't be used with option {}",
                opt(name),
                opt("topics-with-overrides")
            )));
        }
    }
    not_with(
        args.topics_with_overrides,
        "topics-with-overrides",
        &[Action::Describe],
    )?;
    not_with(
        args.if_exists,
        "if-exists",
        &[Action::Alter, Action::Delete, Action::Describe],
    )?;
    not_with(args.if_not_exists, "if-not-exists", &[Action::Create])?;
    not_with(
        args.exclude_internal,
        "exclude-internal",
        &[Action::List, Action::Describe],
    )?;
    Ok(action)
}

/// `TopicCommand.parseReplicaAssignment`: partitions separated by `,`, replicas by `:`.
pub fn parse_replica_assignment(text: &str) -> Result<Vec<Vec<i32>>, TopicsError> {
    let mut partitions: Vec<Vec<i32>> = Vec::new();
    // Java's String.split drops trailing empty strings.
    let mut parts: Vec<&str> = text.split(',').collect();
    while parts.len() > 1 && parts.last() == Some(&"") {
        parts.pop();
    }
    for (index, part) in parts.into_iter().enumerate() {
        let mut replicas = Vec::new();
        for id in part.split(':').map(str::trim) {
            let id: i32 = id
                .parse()
                .map_err(|_| TopicsError::Command(format!("For input string: \"{id}\"")))?;
            replicas.push(id);
        }
        let mut duplicates: Vec<String> = Vec::new();
        for (i, id) in replicas.iter().enumerate() {
            if replicas[..i].contains(id) && !duplicates.contains(&id.to_string()) {
                duplicates.push(id.to_string());
            }
        }
        if !duplicates.is_empty() {
            return Err(TopicsError::Command(format!(
                "Partition replica lists may not contain duplicate entries: {}",
                duplicates.join(",")
            )));
        }
        if let Some(first) = partitions.first() {
            if first.len() != replicas.len() {
                let list: Vec<String> = replicas.iter().map(i32::to_string).collect();
                return Err(TopicsError::Command(format!(
                    "Partition {index} has different replication factor: [{}]",
                    list.join(", ")
                )));
            }
        }
        partitions.push(replicas);
    }
    Ok(partitions)
}

/// `parseTopicConfigsToBeAdded`: each `--config` is `key=value` (split on `=` with the spaces
/// around it; exactly two parts).
pub fn parse_topic_configs(configs: &[String]) -> Result<Vec<(String, String)>, TopicsError> {
    let mut parsed: Vec<(String, String)> = Vec::new();
    for config in configs {
        let mut parts: Vec<&str> = config.split('=').map(str::trim).collect();
        // Java's split drops trailing empty strings (so `a=` has one part).
        while parts.len() > 1 && parts.last() == Some(&"") {
            parts.pop();
        }
        let [key, value] = parts.as_slice() else {
            return Err(TopicsError::Command(
                "requirement failed: Invalid topic config: all configs to be added must be in the format \"key=val\".".into(),
            ));
        };
        // A later value for the same key wins, as in the Java map.
        parsed.retain(|(k, _)| k != key);
        parsed.push(((*key).to_owned(), (*value).to_owned()));
    }
    Ok(parsed)
}

/// `TopicFilter.IncludeList`: `,` means `|`, spaces and surrounding quotes are dropped, and the
/// whole name must match.
pub fn topic_filter(raw: &str) -> Result<regex::Regex, TopicsError> {
    let cleaned = raw.trim().replace(',', "|").replace(' ', "");
    let cleaned = cleaned
        .trim_start_matches(['"', '\''])
        .trim_end_matches(['"', '\'']);
    regex::Regex::new(&format!("^(?:{cleaned})$"))
        .map_err(|_| TopicsError::Command(format!("{cleaned} is an invalid regex.")))
}

fn is_internal(topic: &str) -> bool {
    INTERNAL_TOPICS.contains(&topic)
}

/// `Topic.hasCollisionChars`.
fn has_collision_chars(topic: &str) -> bool {
    topic.contains('.') || topic.contains('_')
}

/// Runs `gregor topics`; usage mistakes exit through clap with the usage, other failures are
/// the message for stderr.
pub fn run_topics(args: TopicsArgs) -> Result<(), String> {
    let mut out = String::new();
    let result = match check_args(&args) {
        Ok(action) => block_on(run(&args, action, &mut out))?,
        Err(error) => Err(error),
    };
    out!("{out}");
    match result {
        Ok(()) => Ok(()),
        Err(TopicsError::Usage(message)) => usage_exit::<TopicsArgs>("topics", &message),
        Err(TopicsError::Invalid(message)) => Err(message),
        Err(TopicsError::Command(message)) => {
            Err(format!("Error while executing topic command : {message}"))
        }
    }
}

/// Connects with the `--command-config` settings that apply.
async fn connect(args: &TopicsArgs) -> Result<AdminClient, TopicsError> {
    let bootstrap = args.bootstrap_server.as_deref().unwrap_or_default();
    let config = CommandConfig::load(args.command_config.as_deref())
        .map_err(|e| TopicsError::Command(e.to_string()))?;
    Ok(config.connect(bootstrap).await?)
}

async fn run(args: &TopicsArgs, action: Action, out: &mut String) -> Result<(), TopicsError> {
    match action {
        Action::Create => create(args, out).await,
        Action::List => {
            let mut client = connect(args).await?;
            let (topics, _) = matching_topics(&mut client, args).await?;
            let names: Vec<&str> = topics.iter().map(|t| t.0.as_str()).collect();
            let _ = writeln!(out, "{}", names.join("\n"));
            Ok(())
        }
        Action::Describe => describe(args, out).await,
        Action::Alter => alter(args).await,
        Action::Delete => delete(args).await,
    }
}

/// A topic as Metadata reports it: name, id, sorted partitions.
type TopicInfo = (String, Uuid, Vec<PartitionInfo>);

/// Partition id, leader (-1 = none), replicas, ISR.
#[derive(Debug, Clone)]
struct PartitionInfo {
    id: i32,
    leader: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
}

/// Every topic (sorted by name) with the live broker ids.
async fn all_topics(client: &mut AdminClient) -> Result<(Vec<TopicInfo>, Vec<i32>), TopicsError> {
    let request = MetadataRequest::default()
        .with_topics(None)
        .with_allow_auto_topic_creation(false);
    let (_, metadata) = client.send(&request).await?;
    let ids = |v: &[BrokerId]| v.iter().map(|b| b.0).collect::<Vec<i32>>();
    let mut topics: Vec<TopicInfo> = metadata
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .filter_map(|t: &MetadataResponseTopic| {
            let name = t.name.as_ref()?.to_string();
            let mut partitions: Vec<PartitionInfo> = t
                .partitions
                .iter()
                .map(|p| PartitionInfo {
                    id: p.partition_index,
                    leader: p.leader_id.0,
                    replicas: ids(&p.replica_nodes),
                    isr: ids(&p.isr_nodes),
                })
                .collect();
            partitions.sort_by_key(|p| p.id);
            Some((name, t.topic_id, partitions))
        })
        .collect();
    topics.sort_by(|a, b| a.0.cmp(&b.0));
    let brokers = metadata.brokers.iter().map(|b| b.node_id.0).collect();
    Ok((topics, brokers))
}

/// `getTopics`: the sorted topics matching `--topic` (all without it), internal ones dropped
/// with `--exclude-internal`.
async fn matching_topics(
    client: &mut AdminClient,
    args: &TopicsArgs,
) -> Result<(Vec<TopicInfo>, Vec<i32>), TopicsError> {
    let filter = args.topic.as_deref().map(topic_filter).transpose()?;
    let (topics, brokers) = all_topics(client).await?;
    let topics = topics
        .into_iter()
        .filter(|(name, _, _)| filter.as_ref().is_none_or(|f| f.is_match(name)))
        .filter(|(name, _, _)| !(args.exclude_internal && is_internal(name)))
        .collect();
    Ok((topics, brokers))
}

/// `ensureTopicExists`: a named topic that matched nothing is an error unless `--if-exists`.
fn ensure_exists(args: &TopicsArgs, found: &[TopicInfo]) -> Result<(), TopicsError> {
    match &args.topic {
        Some(topic) if !topic.is_empty() && !args.if_exists && found.is_empty() => Err(
            TopicsError::Command(format!("Topic '{topic}' does not exist as expected")),
        ),
        _ => Ok(()),
    }
}

/// THROTTLING_QUOTA_EXCEEDED with the response's throttle time; other codes as Kafka's text.
fn topic_error(code: i16, message: Option<&StrBytes>, throttle_time_ms: i32) -> TopicsError {
    let text = java_message(code, message.map(|m| m.as_str()));
    if code == THROTTLING_QUOTA_EXCEEDED {
        TopicsError::Command(format!("{text} (throttle time: {throttle_time_ms} ms)"))
    } else {
        TopicsError::Command(text)
    }
}

async fn create(args: &TopicsArgs, out: &mut String) -> Result<(), TopicsError> {
    let name = args.topic.clone().unwrap_or_default();
    let assignment = match args.replica_assignment.as_deref() {
        Some(text) if !text.is_empty() => Some(parse_replica_assignment(text)?),
        _ => None,
    };
    let configs = parse_topic_configs(&args.config)?;
    if has_collision_chars(&name) {
        let _ = writeln!(out, "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') could collide. To avoid issues it is best to use either, but not both.");
    }
    let replication_factor = match args.replication_factor {
        Some(rf) => Some(
            i16::try_from(rf)
                .ok()
                .filter(|rf| *rf >= 1)
                .ok_or_else(|| {
                    TopicsError::Command(
                        "The replication factor must be between 1 and 32767 inclusive".into(),
                    )
                })?,
        ),
        None => None,
    };
    if args.partitions.is_some_and(|p| p < 1) {
        return Err(TopicsError::Command(
            "The partitions must be greater than 0".into(),
        ));
    }
    let mut topic = CreatableTopic::default()
        .with_name(TopicName(StrBytes::from_string(name.clone())))
        .with_configs(
            configs
                .into_iter()
                .map(|(key, value)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string(key))
                        .with_value(Some(StrBytes::from_string(value)))
                })
                .collect(),
        );
    topic = match assignment {
        Some(assignment) => topic
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(
                assignment
                    .into_iter()
                    .zip(0..)
                    .map(|(brokers, index)| {
                        CreatableReplicaAssignment::default()
                            .with_partition_index(index)
                            .with_broker_ids(brokers.into_iter().map(BrokerId).collect())
                    })
                    .collect(),
            ),
        None => topic
            .with_num_partitions(args.partitions.unwrap_or(-1))
            .with_replication_factor(replication_factor.unwrap_or(-1)),
    };
    let request = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(OPERATION_TIMEOUT_MS);
    let mut client = connect(args).await?;
    let (_, response) = client.send(&request).await?;
    let result = response
        .topics
        .iter()
        .find(|t| t.name.0.as_str() == name)
        .ok_or_else(|| TopicsError::Command("CreateTopics answered without the topic".into()))?;
    match result.error_code {
        0 => {
            let _ = writeln!(out, "Created topic {name}.");
            Ok(())
        }
        TOPIC_ALREADY_EXISTS if args.if_not_exists => Ok(()),
        code => Err(topic_error(
            code,
            result.error_message.as_ref(),
            response.throttle_time_ms,
        )),
    }
}

async fn alter(args: &TopicsArgs) -> Result<(), TopicsError> {
    let assignment = match args.replica_assignment.as_deref() {
        Some(text) if !text.is_empty() => Some(parse_replica_assignment(text)?),
        _ => None,
    };
    let count = args.partitions.unwrap_or_default();
    let mut client = connect(args).await?;
    let (topics, _) = matching_topics(&mut client, args).await?;
    ensure_exists(args, &topics)?;
    if topics.is_empty() {
        return Ok(());
    }
    let request = CreatePartitionsRequest::default()
        .with_timeout_ms(OPERATION_TIMEOUT_MS)
        .with_topics(
            topics
                .iter()
                .map(|(name, _, partitions)| {
                    // The assignment lists every partition; only the new ones are sent.
                    let new = assignment.as_ref().map(|all| {
                        all.iter()
                            .skip(partitions.len())
                            .map(|brokers| {
                                CreatePartitionsAssignment::default().with_broker_ids(
                                    brokers.iter().copied().map(BrokerId).collect(),
                                )
                            })
                            .collect()
                    });
                    CreatePartitionsTopic::default()
                        .with_name(TopicName(StrBytes::from_string(name.clone())))
                        .with_count(count)
                        .with_assignments(new)
                })
                .collect(),
        );
    let (_, response) = client.send(&request).await?;
    match response.results.iter().find(|r| r.error_code != 0) {
        Some(failed) => Err(topic_error(
            failed.error_code,
            failed.error_message.as_ref(),
            response.throttle_time_ms,
        )),
        None => Ok(()),
    }
}

async fn delete(args: &TopicsArgs) -> Result<(), TopicsError> {
    let mut client = connect(args).await?;
    let (topics, _) = matching_topics(&mut client, args).await?;
    ensure_exists(args, &topics)?;
    if topics.is_empty() {
        return Ok(());
    }
    let version = client
        .version_of::<DeleteTopicsRequest>()
        .ok_or_else(|| TopicsError::Command("The broker does not support DeleteTopics".into()))?;
    let names: Vec<TopicName> = topics
        .iter()
        .map(|(name, _, _)| TopicName(StrBytes::from_string(name.clone())))
        .collect();
    // v6 names topics in `topics` (by name or id); older versions in `topic_names`.
    let request = if version >= 6 {
        DeleteTopicsRequest::default().with_topics(
            names
                .into_iter()
                .map(|name| DeleteTopicState::default().with_name(Some(name)))
                .collect(),
        )
    } else {
        DeleteTopicsRequest::default().with_topic_names(names)
    }
    .with_timeout_ms(OPERATION_TIMEOUT_MS);
    let response = client.send_at(&request, version).await?;
    match response.responses.iter().find(|r| r.error_code != 0) {
        Some(failed) => Err(topic_error(
            failed.error_code,
            failed.error_message.as_ref(),
            response.throttle_time_ms,
        )),
        None => Ok(()),
    }
}

/// A topic's configs as the Java admin client's `Config` iterates them: `(name, value, source)`.
async fn topic_configs(
    client: &mut AdminClient,
    names: &[&str],
) -> Result<BTreeMap<String, Vec<(String, Option<String>, i8)>>, TopicsError> {
    let request = DescribeConfigsRequest::default().with_resources(
        names
            .iter()
            .map(|name| {
                DescribeConfigsResource::default()
                    .with_resource_type(TOPIC)
                    .with_resource_name(StrBytes::from_string((*name).to_owned()))
                    .with_configuration_keys(None)
            })
            .collect(),
    );
    let (_, response) = client.send(&request).await?;
    let mut configs = BTreeMap::new();
    for result in &response.results {
        if result.error_code != 0 {
            return Err(topic_error(
                result.error_code,
                result.error_message.as_ref(),
                0,
            ));
        }
        // `Config` keeps its entries in a `new HashMap<>()`.
        let hashes: Vec<i32> = result
            .configs
            .iter()
            .map(|c| java_string_hash(&c.name))
            .collect();
        let entries = java_hash_order(&hashes, None)
            .into_iter()
            .filter_map(|i| result.configs.get(i))
            .map(|c| {
                (
                    c.name.to_string(),
                    c.value.as_ref().map(|v| v.to_string()),
                    c.config_source,
                )
            })
            .collect();
        configs.insert(result.resource_name.to_string(), entries);
    }
    Ok(configs)
}

async fn describe(args: &TopicsArgs, out: &mut String) -> Result<(), TopicsError> {
    let mut client = connect(args).await?;
    let (topics, live) = matching_topics(&mut client, args).await?;
    ensure_exists(args, &topics)?;
    if topics.is_empty() {
        return Ok(());
    }
    // `describeTopics(...).allTopicNames()` is a `new HashMap<>(n)`: print in its order.
    let hashes: Vec<i32> = topics
        .iter()
        .map(|(name, _, _)| java_string_hash(name))
        .collect();
    let order = java_hash_order(&hashes, Some(topics.len()));
    let names: Vec<&str> = topics.iter().map(|(name, _, _)| name.as_str()).collect();
    let configs = topic_configs(&mut client, &names).await?;
    let moving = reassignments(&mut client, &topics).await?;
    let reporting = args.under_replicated_partitions
        || args.unavailable_partitions
        || args.under_min_isr_partitions
        || args.at_min_isr_partitions;
    for (name, id, partitions) in order.into_iter().filter_map(|i| topics.get(i)) {
        let entries = configs.get(name).cloned().unwrap_or_default();
        let overridden: Vec<String> = entries
            .iter()
            .filter(|(_, _, source)| *source != DEFAULT_CONFIG)
            .map(|(key, value, _)| format!("{key}={}", value.as_deref().unwrap_or("null")))
            .collect();
        let min_isr = entries
            .iter()
            .find(|(key, _, _)| key == "min.insync.replicas")
            .and_then(|(_, value, _)| value.as_deref()?.parse::<usize>().ok())
            .unwrap_or(1);
        if !reporting && (!args.topics_with_overrides || !overridden.is_empty()) {
            let mut line = format!("Topic: {name}");
            if !id.is_nil() {
                let _ = write!(line, "\tTopicId: {}", uuid_to_kafka_string(*id));
            }
            // Kafka's getReplicationFactor: a partition being reassigned counts its replicas
            // without the ones being added.
            let replication_factor = partitions.first().map_or(0, |p| {
                let adding = moving
                    .get(&(name.clone(), p.id))
                    .map_or(0, |(adding, _)| adding.len());
                p.replicas.len().saturating_sub(adding)
            });
            let _ = write!(
                line,
                "\tPartitionCount: {}\tReplicationFactor: {replication_factor}\tConfigs: {}",
                partitions.len(),
                overridden.join(",")
            );
            let _ = writeln!(out, "{line}");
        }
        if args.topics_with_overrides {
            continue;
        }
        for partition in partitions {
            let has_leader = partition.leader >= 0;
            let shown = !reporting
                || (args.under_replicated_partitions
                    && partition.replicas.len() > partition.isr.len())
                || (args.unavailable_partitions
                    && (!has_leader || !live.contains(&partition.leader)))
                || (args.under_min_isr_partitions
                    && (!has_leader || partition.isr.len() < min_isr))
                || (args.at_min_isr_partitions && partition.isr.len() == min_isr);
            if shown {
                let reassignment = moving.get(&(name.clone(), partition.id));
                let _ = writeln!(out, "{}", partition_line(name, partition, reassignment));
            }
        }
    }
    Ok(())
}

/// Adding and removing replicas of a partition being reassigned.
type Moving = (Vec<i32>, Vec<i32>);

/// The reassignments in progress among `topics`' partitions (Kafka's `listAllReassignments`):
/// none when the broker does not serve ListPartitionReassignments.
async fn reassignments(
    client: &mut AdminClient,
    topics: &[TopicInfo],
) -> Result<BTreeMap<(String, i32), Moving>, TopicsError> {
    if client
        .version_of::<ListPartitionReassignmentsRequest>()
        .is_none()
    {
        return Ok(BTreeMap::new());
    }
    let request = ListPartitionReassignmentsRequest::default()
        .with_timeout_ms(30_000)
        .with_topics(Some(
            topics
                .iter()
                .map(|(name, _, partitions)| {
                    ListPartitionReassignmentsTopics::default()
                        .with_name(TopicName(StrBytes::from_string(name.clone())))
                        .with_partition_indexes(partitions.iter().map(|p| p.id).collect())
                })
                .collect(),
        ));
    let (_, response) = client.send(&request).await?;
    let ids = |list: &[BrokerId]| list.iter().map(|b| b.0).collect::<Vec<_>>();
    Ok(response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    (t.name.to_string(), p.partition_index),
                    (ids(&p.adding_replicas), ids(&p.removing_replicas)),
                )
            })
        })
        .collect())
}

/// `\tTopic: T\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tElr: \tLastKnownElr: `
/// (kafka-topics.sh 4.x describes through DescribeTopicPartitions, whose ELR lists are empty
/// while eligible leader replicas are off; it shows N/A only for a broker without that API), with
/// `\tAdding Replicas: 4\tRemoving Replicas: 1` before `Elr` while a reassignment runs.
fn partition_line(topic: &str, partition: &PartitionInfo, moving: Option<&Moving>) -> String {
    let join = |ids: &[i32]| ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",");
    let leader = if partition.leader >= 0 {
        partition.leader.to_string()
    } else {
        "none".to_owned()
    };
    let reassignment = moving.map_or_else(String::new, |(adding, removing)| {
        format!(
            "\tAdding Replicas: {}\tRemoving Replicas: {}",
            join(adding),
            join(removing)
        )
    });
    format!(
        "\tTopic: {topic}\tPartition: {}\tLeader: {leader}\tReplicas: {}\tIsr: {}{reassignment}\tElr: \tLastKnownElr: ",
        partition.id,
        join(&partition.replicas),
        join(&partition.isr)
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: TopicsArgs,
    }

    fn parse(line: &str) -> Result<TopicsArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("topics").chain(line.split_whitespace()))
            .map(|cli| cli.args)
    }

    fn check(line: &str) -> Result<Action, TopicsError> {
        check_args(&parse(line).unwrap())
    }

    fn usage(text: &str) -> Result<Action, TopicsError> {
        Err(TopicsError::Usage(text.into()))
    }

    #[test]
    fn one_action_is_required() {
        let message = "Command must include exactly one action: --list, --describe, --create, --alter or --delete";
        assert_eq!(check("--bootstrap-server h:1"), usage(message));
        assert_eq!(
            check("--bootstrap-server h:1 --list --describe"),
            usage(message)
        );
        assert_eq!(check("--bootstrap-server h:1 --list"), Ok(Action::List));
        assert_eq!(
            check("--list"),
            Err(TopicsError::Invalid(
                "--bootstrap-server must be specified".into()
            ))
        );
    }

    #[test]
    fn required_and_invalid_combinations() {
        let b = "--bootstrap-server h:1";
        assert_eq!(
            check(&format!("{b} --create")),
            usage("Missing required argument \"[topic]\"")
        );
        assert_eq!(
            check(&format!("{b} --alter --topic t")),
            usage("Missing required argument \"[partitions]\"")
        );
        assert_eq!(
            check(&format!("{b} --alter --topic t --partitions 2 --config a=b")),
            usage("Option combination \"[[bootstrap-server], [config]]\" can't be used with option \"[alter]\" (To alter topic configurations, the kafka-configs tool can be used.)")
        );
        assert_eq!(
            check(&format!("{b} --list --config a=b")),
            usage("Option \"[config]\" can't be used with option \"[list]\"")
        );
        assert_eq!(
            check(&format!("{b} --describe --partitions 3")),
            usage("Option \"[partitions]\" can't be used with option \"[describe]\"")
        );
        assert_eq!(
            check(&format!(
                "{b} --alter --topic t --partitions 3 --replication-factor 1"
            )),
            usage("Option \"[replication-factor]\" can't be used with option \"[alter]\"")
        );
        assert_eq!(
            check(&format!(
                "{b} --create --topic t --replica-assignment 1 --partitions 1"
            )),
            usage("Option \"[replica-assignment]\" can't be used with option \"[partitions]\"")
        );
        assert_eq!(
            check(&format!("{b} --create --topic t --if-exists")),
            usage("Option \"[if-exists]\" can't be used with option \"[create]\"")
        );
        assert_eq!(
            check(&format!("{b} --delete --topic t --if-not-exists")),
            usage("Option \"[if-not-exists]\" can't be used with option \"[delete]\"")
        );
        assert_eq!(
            check(&format!("{b} --describe --under-replicated-partitions --topics-with-overrides")),
            usage("Option \"[under-replicated-partitions]\" can't be used with option \"[topics-with-overrides]\"")
        );
        assert_eq!(
            check(&format!("{b} --describe --if-exists")),
            usage("--topic or --topic-id is required to describe a topic")
        );
        assert_eq!(
            check(&format!("{b} --create --topic t --exclude-internal")),
            usage("Option \"[exclude-internal]\" can't be used with option \"[create]\"")
        );
        assert_eq!(
            check(&format!("{b} --create --topic t --partitions 3 --replication-factor 1 --config a=b --config c=d --if-not-exists")),
            Ok(Action::Create)
        );
        assert_eq!(
            check(&format!("{b} --delete --topic t --if-exists")),
            Ok(Action::Delete)
        );
        // Unknown options and bad numbers are clap's usage errors.
        assert!(parse(&format!("{b} --list --bogus")).is_err());
        assert!(parse(&format!("{b} --create --topic t --partitions x")).is_err());
        assert!(parse(&format!("{b} --create --topic t --partitions -1")).is_ok());
    }

    #[test]
    fn replica_assignments() {
        assert_eq!(
            parse_replica_assignment("1:2, 2:3,3 : 1").unwrap(),
            [vec![1, 2], vec![2, 3], vec![3, 1]]
        );
        assert_eq!(
            parse_replica_assignment("1,2,").unwrap(),
            [vec![1], vec![2]]
        );
        assert_eq!(
            parse_replica_assignment("1:x"),
            Err(TopicsError::Command("For input string: \"x\"".into()))
        );
        assert_eq!(
            parse_replica_assignment("1:1:2"),
            Err(TopicsError::Command(
                "Partition replica lists may not contain duplicate entries: 1".into()
            ))
        );
        assert_eq!(
            parse_replica_assignment("1,1:2"),
            Err(TopicsError::Command(
                "Partition 1 has different replication factor: [1, 2]".into()
            ))
        );
    }

    #[test]
    fn topic_configs_and_filters() {
        assert_eq!(
            parse_topic_configs(&[
                "retention.ms = 1000".into(),
                "cleanup.policy=compact".into()
            ])
            .unwrap(),
            [
                ("retention.ms".to_owned(), "1000".to_owned()),
                ("cleanup.policy".to_owned(), "compact".to_owned())
            ]
        );
        let bad = Err(TopicsError::Command("requirement failed: Invalid topic config: all configs to be added must be in the format \"key=val\".".into()));
        assert_eq!(parse_topic_configs(&["a".into()]), bad);
        assert_eq!(parse_topic_configs(&["a=".into()]), bad);
        assert_eq!(parse_topic_configs(&["a=b=c".into()]), bad);
        // As in Java, only quotes around the whole text are dropped.
        let filter = topic_filter("'orders.*, payments'").unwrap();
        assert!(filter.is_match("orders-1") && filter.is_match("payments"));
        assert!(!filter.is_match("xorders") && !filter.is_match("payments2"));
        assert_eq!(
            topic_filter("a(").unwrap_err(),
            TopicsError::Command("a( is an invalid regex.".into())
        );
    }

    #[test]
    fn partition_lines() {
        let partition = PartitionInfo {
            id: 2,
            leader: -1,
            replicas: vec![1, 2],
            isr: vec![2],
        };
        assert_eq!(
            partition_line("t", &partition, None),
            "\tTopic: t\tPartition: 2\tLeader: none\tReplicas: 1,2\tIsr: 2\tElr: \tLastKnownElr: "
        );
        assert_eq!(
            partition_line("t", &partition, Some(&(vec![2], vec![3, 4]))),
            "\tTopic: t\tPartition: 2\tLeader: none\tReplicas: 1,2\tIsr: 2\tAdding Replicas: 2\tRemoving Replicas: 3,4\tElr: \tLastKnownElr: "
        );
    }

    #[test]
    fn quota_violation_names_the_throttle_time() {
        assert_eq!(
            topic_error(89, None, 4500),
            TopicsError::Command(
                "The throttling quota has been exceeded. (throttle time: 4500 ms)".into()
            )
        );
        assert_eq!(
            topic_error(
                36,
                Some(&StrBytes::from_static_str("Topic 't' already exists.")),
                0
            ),
            TopicsError::Command("Topic 't' already exists.".into())
        );
    }
}
