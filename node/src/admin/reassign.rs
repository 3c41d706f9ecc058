//! `gregor reassign-partitions`: kafka-reassign-partitions.sh's `--generate`, `--execute`,
//! `--verify`, `--cancel` and `--list` with its JSON and its lines, over Metadata,
//! DescribeCluster, AlterPartitionReassignments and ListPartitionReassignments.
//!
//! Differences from Kafka's tool: no replication throttles (`--throttle`,
//! `--replica-alter-log-dirs-throttle`: Gregor has no replication quotas, so `--verify` and
//! `--cancel` have none to clear and print no "Clearing ... throttles" lines), no moves between
//! log dirs (a `log_dirs` entry other than "any" is refused). `--generate` places replicas with
//! Kafka's `AdminUtils` algorithms (rack-aware when every listed broker has a rack).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;
use kafka_protocol::messages::alter_partition_reassignments_request::{
    ReassignablePartition, ReassignableTopic,
};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, BrokerId, DescribeClusterRequest,
    ListPartitionReassignmentsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use rand::Rng;
use serde_json::Value;

use super::{block_on, java_message, usage_exit, AdminClient, AdminError, CommandConfig};

/// A topic partition.
pub type Partition = (String, i32);

/// Partitions and their replicas, as in the reassignment JSON.
pub type Assignment = BTreeMap<Partition, Vec<i32>>;

/// An ongoing reassignment's replicas, adding replicas and removing replicas.
pub type Ongoing = BTreeMap<Partition, (Vec<i32>, Vec<i32>, Vec<i32>)>;

/// `gregor reassign-partitions`: kafka-reassign-partitions.sh.
#[derive(Args, Debug)]
pub struct ReassignArgs {
    /// The server(s) to use for bootstrapping. REQUIRED.
    #[arg(long)]
    pub bootstrap_server: Option<String>,
    /// Property file containing configs to be passed to the admin client (`client.id`).
    #[arg(long)]
    pub command_config: Option<PathBuf>,
    /// Generate a candidate partition reassignment configuration (it does not execute it).
    #[arg(long)]
    pub generate: bool,
    /// Kick off the reassignment specified by --reassignment-json-file.
    #[arg(long)]
    pub execute: bool,
    /// Verify the reassignment specified by --reassignment-json-file.
    #[arg(long)]
    pub verify: bool,
    /// Cancel the active reassignments specified by --reassignment-json-file.
    #[arg(long)]
    pub cancel: bool,
    /// List all active partition reassignments.
    #[arg(long)]
    pub list: bool,
    /// The JSON file with the partition reassignment configuration: {"partitions":
    /// [{"topic": "foo", "partition": 1, "replicas": [1,2,3], "log_dirs": ["any","any","any"]}],
    /// "version": 1}.
    #[arg(long)]
    pub reassignment_json_file: Option<PathBuf>,
    /// Generate a reassignment for the topics in this JSON file: {"topics": [{"topic": "foo"},
    /// {"topic": "foo1"}], "version": 1}.
    #[arg(long)]
    pub topics_to_move_json_file: Option<PathBuf>,
    /// The brokers to which the partitions of --topics-to-move-json-file are reassigned,
    /// "0,1,2".
    #[arg(long)]
    pub broker_list: Option<String>,
    /// Execute this reassignment in addition to any other ongoing ones.
    #[arg(long)]
    pub additional: bool,
    /// `--generate` ignores the brokers' racks.
    #[arg(long)]
    pub disable_rack_aware: bool,
    /// Accepted for compatibility: there are no throttles to keep or clear.
    #[arg(long)]
    pub preserve_throttles: bool,
    /// Accepted for compatibility (log dir moves are not supported).
    #[arg(long)]
    pub timeout: Option<u64>,
}

/// Kafka's `TopicPartition.toString()`.
fn name(tp: &(String, i32)) -> String {
    format!("{}-{}", tp.0, tp.1)
}

fn ids(list: &[i32]) -> String {
    list.iter()
        .map(i32::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Kafka's `formatAsReassignmentJson` (Jackson's compact form), partitions sorted.
pub fn reassignment_json(assignment: &Assignment) -> String {
    let partitions: Vec<Value> = assignment
        .iter()
        .map(|((topic, partition), replicas)| {
            serde_json::json!({
                "topic": topic,
                "partition": partition,
                "replicas": replicas,
                "log_dirs": replicas.iter().map(|_| "any").collect::<Vec<_>>(),
            })
        })
        .collect();
    // serde_json keeps insertion order only with `preserve_order`; build the text by hand so
    // the keys come in Kafka's order.
    let mut out = String::from("{\"version\":1,\"partitions\":[");
    for (i, partition) in partitions.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            "{{\"topic\":{},\"partition\":{},\"replicas\":{},\"log_dirs\":{}}}",
            partition["topic"],
            partition["partition"],
            partition["replicas"],
            partition["log_dirs"]
        );
    }
    out.push_str("]}");
    out
}

/// Parses the reassignment JSON of `--execute`, `--verify` and `--cancel`, in file order, with
/// Kafka's checks.
pub fn parse_reassignment_json(text: &str) -> Result<Vec<(Partition, Vec<i32>)>, String> {
    let json: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    match json.get("version").map(Value::as_i64) {
        None | Some(Some(1)) => {}
        Some(Some(other)) => return Err(format!("Not supported version field value {other}")),
        Some(None) => return Err("Expected an int value for version".to_owned()),
    }
    let mut out = Vec::new();
    for entry in json
        .get("partitions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let (topic, partition) = super::json_topic_partition(entry)?;
        let replicas: Vec<i32> = entry
            .get("replicas")
            .ok_or("No such field exists: `replicas`")?
            .as_array()
            .ok_or("Expected JSON array for replicas")?
            .iter()
            .map(|r| r.as_i64().and_then(|r| i32::try_from(r).ok()))
            .collect::<Option<_>>()
            .ok_or("Expected an int value for replicas")?;
        if let Some(dirs) = entry.get("log_dirs") {
            let dirs = dirs.as_array().ok_or("Expected JSON array for log_dirs")?;
            if dirs.len() != replicas.len() {
                return Err(format!(
                    "Size of replicas list {replicas:?} is different from size of log dirs list {dirs:?} for partition {topic}-{partition}"
                ));
            }
            if dirs.iter().any(|d| d.as_str() != Some("any")) {
                return Err(format!(
                    "Moving replicas between log directories is not supported by Gregor (partition {topic}-{partition}): use \"any\""
                ));
            }
        }
        out.push(((topic, partition), replicas));
    }
    Ok(out)
}

/// Kafka's `parseExecuteAssignmentArgs` checks.
fn check_execute(parts: &[(Partition, Vec<i32>)]) -> Result<Assignment, String> {
    if parts.is_empty() {
        return Err("Partition reassignment list cannot be empty".to_owned());
    }
    if parts.iter().any(|(_, replicas)| replicas.is_empty()) {
        return Err("Partition replica list cannot be empty".to_owned());
    }
    let mut seen = BTreeSet::new();
    let duplicates: BTreeSet<String> = parts
        .iter()
        .filter(|(tp, _)| !seen.insert(tp.clone()))
        .map(|(tp, _)| name(tp))
        .collect();
    if !duplicates.is_empty() {
        return Err(format!(
            "Partition reassignment contains duplicate topic partitions: {}",
            duplicates.into_iter().collect::<Vec<_>>().join(",")
        ));
    }
    let repeated: Vec<String> = parts
        .iter()
        .filter_map(|(tp, replicas)| {
            let mut seen = BTreeSet::new();
            let twice: BTreeSet<i32> = replicas
                .iter()
                .filter(|r| !seen.insert(**r))
                .copied()
                .collect();
            (!twice.is_empty()).then(|| {
                format!(
                    "{} contains multiple entries for {}",
                    name(tp),
                    ids(&twice.into_iter().collect::<Vec<_>>())
                )
            })
        })
        .collect();
    if !repeated.is_empty() {
        return Err(format!(
            "Partition replica lists may not contain duplicate entries: {}",
            repeated.join(". ")
        ));
    }
    Ok(parts.iter().cloned().collect())
}

/// Kafka's `AdminUtils.assignReplicasToBrokersRackUnaware` from `start` and `shift` (random in
/// the tool): partition p's first replica is broker (p + start) mod n, the others follow at a
/// shift that grows by one every n partitions, so leaders and followers spread evenly.
pub fn assign_rack_unaware(
    partitions: usize,
    replication_factor: usize,
    brokers: &[i32],
    start: usize,
    shift: usize,
) -> Result<Vec<Vec<i32>>, String> {
    if replication_factor == 0 {
        return Err("Replication factor must be larger than 0.".to_owned());
    }
    if replication_factor > brokers.len() {
        return Err(format!(
            "Replication factor: {replication_factor} larger than available brokers: {}.",
            brokers.len()
        ));
    }
    let n = brokers.len();
    let mut shift = shift;
    let mut out = Vec::with_capacity(partitions);
    for partition in 0..partitions {
        if partition > 0 && partition % n == 0 {
            shift += 1;
        }
        let first = (partition + start) % n;
        let mut replicas = vec![brokers[first]];
        for j in 0..replication_factor - 1 {
            let step = 1 + (shift + j) % (n - 1);
            replicas.push(brokers[(first + step) % n]);
        }
        out.push(replicas);
    }
    Ok(out)
}

/// Kafka's `AdminUtils.getRackAlternatedBrokerList`: one broker of each rack in turn (racks
/// sorted, brokers sorted within their rack), so consecutive brokers sit in different racks.
fn rack_alternated(brokers: &[(i32, Option<String>)]) -> Vec<(i32, String)> {
    let mut by_rack: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (id, rack) in brokers {
        by_rack
            .entry(rack.clone().unwrap_or_default())
            .or_default()
            .push(*id);
    }
    let mut lists: Vec<(String, std::vec::IntoIter<i32>)> = by_rack
        .into_iter()
        .map(|(rack, mut ids)| {
            ids.sort_unstable();
            (rack, ids.into_iter())
        })
        .collect();
    let mut out = Vec::with_capacity(brokers.len());
    let mut rack = 0;
    while out.len() < brokers.len() && !lists.is_empty() {
        if let Some((name, ids)) = lists.get_mut(rack) {
            if let Some(id) = ids.next() {
                out.push((id, name.clone()));
            }
        }
        rack = (rack + 1) % lists.len();
    }
    out
}

/// Kafka's `AdminUtils.assignReplicasToBrokersRackAware` from `start` and `shift`: leaders walk
/// the rack-alternated broker list; each follower is the next broker (at the growing shift) in
/// a rack that has no replica yet, and not already a replica, until every rack (then every
/// broker) has one.
pub fn assign_rack_aware(
    partitions: usize,
    replication_factor: usize,
    brokers: &[(i32, Option<String>)],
    start: usize,
    shift: usize,
) -> Result<Vec<Vec<i32>>, String> {
    if replication_factor == 0 {
        return Err("Replication factor must be larger than 0.".to_owned());
    }
    if replication_factor > brokers.len() {
        return Err(format!(
            "Replication factor: {replication_factor} larger than available brokers: {}.",
            brokers.len()
        ));
    }
    let arranged = rack_alternated(brokers);
    let n = arranged.len();
    let racks = arranged
        .iter()
        .map(|(_, rack)| rack)
        .collect::<BTreeSet<_>>()
        .len();
    let mut shift = shift;
    let mut out = Vec::with_capacity(partitions);
    for partition in 0..partitions {
        if partition > 0 && partition % n == 0 {
            shift += 1;
        }
        let first = (partition + start) % n;
        let (leader, leader_rack) = &arranged[first];
        let mut replicas = vec![*leader];
        let mut racks_used: BTreeSet<&String> = BTreeSet::from([leader_rack]);
        let mut k = 0;
        while replicas.len() < replication_factor {
            let step = 1 + (shift * racks + k) % (n - 1);
            let (broker, rack) = &arranged[(first + step) % n];
            k += 1;
            let rack_ok = !racks_used.contains(rack) || racks_used.len() == racks;
            let broker_ok = !replicas.contains(broker) || replicas.len() == n;
            if rack_ok && broker_ok {
                replicas.push(*broker);
                racks_used.insert(rack);
            }
        }
        out.push(replicas);
    }
    Ok(out)
}

/// Runs `gregor reassign-partitions`; `Err` is the message for stderr.
pub fn run_reassign(args: ReassignArgs) -> Result<(), String> {
    let actions = [
        args.generate,
        args.execute,
        args.verify,
        args.cancel,
        args.list,
    ];
    if actions.iter().filter(|a| **a).count() != 1 {
        usage_exit::<ReassignArgs>(
            "reassign-partitions",
            "Command must include exactly one action: --generate, --execute, --verify, --cancel, --list",
        );
    }
    let Some(bootstrap) = args.bootstrap_server.clone() else {
        usage_exit::<ReassignArgs>(
            "reassign-partitions",
            "Please specify either --bootstrap-server or --bootstrap-controller",
        );
    };
    let read = |path: &Option<PathBuf>, option: &str| -> Result<String, String> {
        let Some(path) = path else {
            usage_exit::<ReassignArgs>(
                "reassign-partitions",
                &format!("Missing required argument \"[{option}]\""),
            );
        };
        std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
    };
    let mut config =
        CommandConfig::load(args.command_config.as_deref()).map_err(|e| e.to_string())?;
    config
        .client_id
        .get_or_insert_with(|| "reassign-partitions-tool".to_owned());
    let mut out = String::new();
    let result = if args.generate {
        let topics = read(&args.topics_to_move_json_file, "topics-to-move-json-file")?;
        let Some(brokers) = args.broker_list.clone() else {
            usage_exit::<ReassignArgs>(
                "reassign-partitions",
                "Missing required argument \"[broker-list]\"",
            );
        };
        block_on(generate(
            &bootstrap,
            &config,
            &topics,
            &brokers,
            !args.disable_rack_aware,
            &mut out,
        ))?
    } else if args.execute {
        let json = read(&args.reassignment_json_file, "reassignment-json-file")?;
        block_on(execute(
            &bootstrap,
            &config,
            &json,
            args.additional,
            &mut out,
        ))?
    } else if args.verify {
        let json = read(&args.reassignment_json_file, "reassignment-json-file")?;
        block_on(verify(&bootstrap, &config, &json, &mut out))?
    } else if args.cancel {
        let json = read(&args.reassignment_json_file, "reassignment-json-file")?;
        block_on(cancel(&bootstrap, &config, &json, &mut out))?
    } else {
        block_on(list(&bootstrap, &config, &mut out))?
    };
    out!("{out}");
    result
}

fn admin(error: AdminError) -> String {
    error.to_string()
}

/// The replicas of every partition of `topics` (Metadata); an unknown topic is an error with
/// Kafka's message.
async fn replicas_of(
    client: &mut AdminClient,
    topics: &BTreeSet<String>,
) -> Result<Assignment, String> {
    let request = MetadataRequest::default()
        .with_allow_auto_topic_creation(false)
        .with_topics(Some(
            topics
                .iter()
                .map(|t| {
                    MetadataRequestTopic::default()
                        .with_name(Some(TopicName(StrBytes::from_string(t.clone()))))
                })
                .collect(),
        ));
    let (_, metadata) = client.send(&request).await.map_err(admin)?;
    let mut out = Assignment::new();
    for topic in &metadata.topics {
        let topic_name = topic
            .name
            .as_ref()
            .map(|n| n.to_string())
            .unwrap_or_default();
        if topic.error_code == 3 {
            return Err(format!(
                "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Topic {topic_name} not found."
            ));
        }
        if topic.error_code != 0 {
            return Err(java_message(topic.error_code, None));
        }
        for partition in &topic.partitions {
            out.insert(
                (topic_name.clone(), partition.partition_index),
                partition.replica_nodes.iter().map(|b| b.0).collect(),
            );
        }
    }
    Ok(out)
}

/// The broker ids DescribeCluster lists.
async fn broker_ids(client: &mut AdminClient) -> Result<BTreeSet<i32>, String> {
    Ok(broker_racks(client).await?.into_keys().collect())
}

/// The brokers DescribeCluster lists, with their racks.
async fn broker_racks(client: &mut AdminClient) -> Result<BTreeMap<i32, Option<String>>, String> {
    let (_, cluster) = client
        .send(&DescribeClusterRequest::default())
        .await
        .map_err(admin)?;
    super::check(cluster.error_code, cluster.error_message.as_ref()).map_err(admin)?;
    Ok(cluster
        .brokers
        .iter()
        .map(|b| (b.broker_id.0, b.rack.as_ref().map(|r| r.to_string())))
        .collect())
}

/// Every ongoing reassignment: partition → (replicas, adding, removing).
async fn ongoing(client: &mut AdminClient) -> Result<Ongoing, String> {
    let (_, response) = client
        .send(&ListPartitionReassignmentsRequest::default().with_timeout_ms(30_000))
        .await
        .map_err(admin)?;
    super::check(response.error_code, response.error_message.as_ref()).map_err(admin)?;
    let list = |ids: &[BrokerId]| ids.iter().map(|b| b.0).collect::<Vec<_>>();
    Ok(response
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| {
                (
                    (t.name.to_string(), p.partition_index),
                    (
                        list(&p.replicas),
                        list(&p.adding_replicas),
                        list(&p.removing_replicas),
                    ),
                )
            })
        })
        .collect())
}

/// Sends AlterPartitionReassignments (`None` cancels); returns the failed partitions with
/// their messages.
async fn alter(
    client: &mut AdminClient,
    targets: &BTreeMap<(String, i32), Option<Vec<i32>>>,
) -> Result<BTreeMap<(String, i32), String>, String> {
    let mut topics: BTreeMap<&str, Vec<ReassignablePartition>> = BTreeMap::new();
    for ((topic, partition), replicas) in targets {
        topics.entry(topic).or_default().push(
            ReassignablePartition::default()
                .with_partition_index(*partition)
                .with_replicas(
                    replicas
                        .as_ref()
                        .map(|r| r.iter().copied().map(BrokerId).collect()),
                ),
        );
    }
    let request = AlterPartitionReassignmentsRequest::default()
        .with_timeout_ms(60_000)
        .with_topics(
            topics
                .into_iter()
                .map(|(name, partitions)| {
                    ReassignableTopic::default()
                        .with_name(TopicName(StrBytes::from_string(name.to_owned())))
                        .with_partitions(partitions)
                })
                .collect(),
        );
    let (_, response) = client.send(&request).await.map_err(admin)?;
    super::check(response.error_code, response.error_message.as_ref()).map_err(admin)?;
    let mut failed = BTreeMap::new();
    for topic in &response.responses {
        for partition in &topic.partitions {
            if partition.error_code != 0 {
                failed.insert(
                    (topic.name.to_string(), partition.partition_index),
                    java_message(partition.error_code, partition.error_message.as_deref()),
                );
            }
        }
    }
    Ok(failed)
}

async fn generate(
    bootstrap: &str,
    config: &CommandConfig,
    topics_json: &str,
    broker_list: &str,
    rack_aware: bool,
    out: &mut String,
) -> Result<(), String> {
    let brokers: Vec<i32> = broker_list
        .split(',')
        .map(|b| {
            b.trim()
                .parse::<i32>()
                .map_err(|_| format!("For input string: \"{b}\""))
        })
        .collect::<Result<_, _>>()?;
    let mut seen = BTreeSet::new();
    let twice: BTreeSet<i32> = brokers
        .iter()
        .filter(|b| !seen.insert(**b))
        .copied()
        .collect();
    if !twice.is_empty() {
        return Err(format!(
            "Broker list contains duplicate entries: [{}]",
            twice
                .iter()
                .map(i32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let json: Value = serde_json::from_str(topics_json)
        .map_err(|_| "The input string is not a valid JSON".to_owned())?;
    let topics: Vec<String> = json
        .get("topics")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|t| {
            t.get("topic")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| "No such field exists: `topic`".to_owned())
        })
        .collect::<Result<_, _>>()?;
    let mut seen = BTreeSet::new();
    let twice: BTreeSet<&String> = topics.iter().filter(|t| !seen.insert(*t)).collect();
    if !twice.is_empty() {
        return Err(format!(
            "List of topics to reassign contains duplicate entries: [{}]",
            twice.into_iter().cloned().collect::<Vec<_>>().join(", ")
        ));
    }
    let mut client = config.connect(bootstrap).await.map_err(admin)?;
    let current = replicas_of(&mut client, &topics.iter().cloned().collect()).await?;
    let registered = broker_racks(&mut client).await?;
    // Kafka's `getBrokerMetadata`: the listed brokers the cluster knows, in its order.
    let usable: Vec<(i32, Option<String>)> = registered
        .into_iter()
        .filter(|(id, _)| brokers.contains(id))
        .map(|(id, rack)| (id, rack.filter(|_| rack_aware)))
        .collect();
    let rackless = usable.iter().filter(|(_, rack)| rack.is_none()).count();
    if rackless != 0 && rackless != usable.len() {
        return Err("Not all brokers have rack information. Add --disable-rack-aware in command line to make replica assignment without rack information.".to_owned());
    }
    let mut proposed = Assignment::new();
    let mut rng = rand::rng();
    for topic in topics.iter().collect::<BTreeSet<_>>() {
        let partitions: Vec<(&(String, i32), &Vec<i32>)> =
            current.iter().filter(|((t, _), _)| t == topic).collect();
        let Some((_, first)) = partitions.first() else {
            continue;
        };
        let n = usable.len().max(1);
        let (start, shift) = (rng.random_range(0..n), rng.random_range(0..n));
        let placed = if rackless == 0 && !usable.is_empty() {
            assign_rack_aware(partitions.len(), first.len(), &usable, start, shift)
        } else {
            let ids: Vec<i32> = usable.iter().map(|(id, _)| *id).collect();
            assign_rack_unaware(partitions.len(), first.len(), &ids, start, shift)
        }
        .map_err(|e| {
            format!("org.apache.kafka.common.errors.InvalidReplicationFactorException: {e}")
        })?;
        for (partition, replicas) in placed.into_iter().enumerate() {
            proposed.insert((topic.clone(), partition as i32), replicas);
        }
    }
    let _ = write!(
        out,
        "Current partition replica assignment\n{}\n\nProposed partition reassignment configuration\n{}\n",
        reassignment_json(&current),
        reassignment_json(&proposed)
    );
    Ok(())
}

async fn execute(
    bootstrap: &str,
    config: &CommandConfig,
    json: &str,
    additional: bool,
    out: &mut String,
) -> Result<(), String> {
    let proposed = check_execute(&parse_reassignment_json(json)?)?;
    let mut client = config.connect(bootstrap).await.map_err(admin)?;
    if !additional && !ongoing(&mut client).await?.is_empty() {
        return Err("Cannot execute because there is an existing partition assignment.  Use --additional to override this and create a new partition assignment in addition to the existing one. The --additional flag can also be used to change the throttle by resubmitting the current reassignment.".to_owned());
    }
    let registered = broker_ids(&mut client).await?;
    if let Some(unknown) = proposed
        .values()
        .flatten()
        .find(|b| !registered.contains(b))
    {
        return Err(format!("Unknown broker id {unknown}"));
    }
    let topics: BTreeSet<String> = proposed.keys().map(|(t, _)| t.clone()).collect();
    let all = replicas_of(&mut client, &topics).await?;
    let missing: Vec<String> = proposed
        .keys()
        .filter(|tp| !all.contains_key(*tp))
        .map(name)
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: Unable to find partition: {}",
            missing.join(", ")
        ));
    }
    let current: Assignment = all
        .into_iter()
        .filter(|(tp, _)| proposed.contains_key(tp))
        .collect();
    let _ = writeln!(
        out,
        "Current partition replica assignment\n\n{}\n\nSave this to use as the --reassignment-json-file option during rollback",
        reassignment_json(&current)
    );
    let targets = proposed
        .iter()
        .map(|(tp, r)| (tp.clone(), Some(r.clone())))
        .collect();
    let failed = alter(&mut client, &targets).await?;
    if !failed.is_empty() {
        return Err(format!(
            "Error reassigning partition(s):\n{}",
            failed
                .iter()
                .map(|(tp, message)| format!("{}: {message}", name(tp)))
                .collect::<Vec<_>>()
                .join("\n")
        ));
    }
    let _ = writeln!(
        out,
        "Successfully started partition reassignment{} for {}",
        if proposed.len() == 1 { "" } else { "s" },
        proposed.keys().map(name).collect::<Vec<_>>().join(",")
    );
    Ok(())
}

/// The `--verify` lines for `targets` given the ongoing reassignments and current replicas
/// (Kafka's `partitionReassignmentStatesToString`).
pub fn verify_lines(targets: &Assignment, ongoing: &Ongoing, current: &Assignment) -> String {
    let mut out = String::from("Status of partition reassignment:\n");
    for (tp, target) in targets {
        if ongoing.contains_key(tp) {
            let _ = writeln!(
                out,
                "Reassignment of partition {} is still in progress.",
                name(tp)
            );
            continue;
        }
        let replicas = current.get(tp).cloned().unwrap_or_default();
        if &replicas == target {
            let _ = writeln!(out, "Reassignment of partition {} is completed.", name(tp));
        } else {
            let _ = writeln!(
                out,
                "There is no active reassignment of partition {}, but replica set is {} rather than {}.",
                name(tp),
                ids(&replicas),
                ids(target)
            );
        }
    }
    out
}

async fn verify(
    bootstrap: &str,
    config: &CommandConfig,
    json: &str,
    out: &mut String,
) -> Result<(), String> {
    let targets: Assignment = parse_reassignment_json(json)?.into_iter().collect();
    let mut client = config.connect(bootstrap).await.map_err(admin)?;
    let ongoing = ongoing(&mut client).await?;
    let mut current = Assignment::new();
    for topic in targets
        .keys()
        .map(|(t, _)| t.clone())
        .collect::<BTreeSet<_>>()
    {
        // A topic that no longer exists reads as no replicas, as in Kafka's tool.
        if let Ok(replicas) = replicas_of(&mut client, &BTreeSet::from([topic])).await {
            current.extend(replicas);
        }
    }
    out.push_str(&verify_lines(&targets, &ongoing, &current));
    // Kafka prints the (empty) list of log dir moves after it.
    out.push('\n');
    Ok(())
}

async fn cancel(
    bootstrap: &str,
    config: &CommandConfig,
    json: &str,
    out: &mut String,
) -> Result<(), String> {
    let targets: Assignment = parse_reassignment_json(json)?.into_iter().collect();
    let mut client = config.connect(bootstrap).await.map_err(admin)?;
    let ongoing = ongoing(&mut client).await?;
    // Kafka's filter: a reassignment that only adds replicas counts once it also removes some.
    let active: BTreeMap<(String, i32), Option<Vec<i32>>> = ongoing
        .iter()
        .filter(|(tp, (_, adding, removing))| {
            targets.contains_key(*tp) && (adding.is_empty() || !removing.is_empty())
        })
        .map(|(tp, _)| (tp.clone(), None))
        .collect();
    if active.is_empty() {
        out.push_str("None of the specified partition reassignments are active.\n");
    } else {
        let failed = alter(&mut client, &active).await?;
        if !failed.is_empty() {
            return Err(format!(
                "Error cancelling partition reassignment{} for:\n{}",
                if failed.len() == 1 { "" } else { "s" },
                failed
                    .iter()
                    .map(|(tp, message)| format!("{}: {message}", name(tp)))
                    .collect::<Vec<_>>()
                    .join("\n")
            ));
        }
        let _ = writeln!(
            out,
            "Successfully cancelled partition reassignment{} for: {}",
            if active.len() == 1 { "" } else { "s" },
            active.keys().map(name).collect::<Vec<_>>().join(",")
        );
    }
    out.push_str("None of the specified partition moves are active.");
    Ok(())
}

async fn list(bootstrap: &str, config: &CommandConfig, out: &mut String) -> Result<(), String> {
    let mut client = config.connect(bootstrap).await.map_err(admin)?;
    let ongoing = ongoing(&mut client).await?;
    if ongoing.is_empty() {
        out.push_str("No partition reassignments found.\n");
        return Ok(());
    }
    out.push_str("Current partition reassignments:\n");
    for (tp, (replicas, adding, removing)) in &ongoing {
        let _ = write!(out, "{}: replicas: {}.", name(tp), ids(replicas));
        if !adding.is_empty() {
            let _ = write!(out, " adding: {}.", ids(adding));
        }
        if !removing.is_empty() {
            let _ = write!(out, " removing: {}.", ids(removing));
        }
        out.push('\n');
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_round_trips_in_kafkas_layout() {
        let assignment: Assignment = [
            (("foo".to_owned(), 1), vec![2, 3]),
            (("foo".to_owned(), 0), vec![1, 2]),
        ]
        .into_iter()
        .collect();
        let text = reassignment_json(&assignment);
        assert_eq!(
            text,
            r#"{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2],"log_dirs":["any","any"]},{"topic":"foo","partition":1,"replicas":[2,3],"log_dirs":["any","any"]}]}"#
        );
        let parsed: Assignment = parse_reassignment_json(&text)
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(parsed, assignment);
    }

    #[test]
    fn execute_checks_have_kafkas_messages() {
        let parse = |text: &str| parse_reassignment_json(text).and_then(|p| check_execute(&p));
        assert_eq!(
            parse(r#"{"version":1,"partitions":[]}"#),
            Err("Partition reassignment list cannot be empty".to_owned())
        );
        assert_eq!(
            parse(r#"{"partitions":[{"topic":"a","partition":0,"replicas":[]}]}"#),
            Err("Partition replica list cannot be empty".to_owned())
        );
        assert_eq!(
            parse(
                r#"{"partitions":[{"topic":"a","partition":0,"replicas":[1]},{"topic":"a","partition":0,"replicas":[2]}]}"#
            ),
            Err("Partition reassignment contains duplicate topic partitions: a-0".to_owned())
        );
        assert_eq!(
            parse(r#"{"partitions":[{"topic":"a","partition":0,"replicas":[1,2,1]}]}"#),
            Err("Partition replica lists may not contain duplicate entries: a-0 contains multiple entries for 1".to_owned())
        );
        assert_eq!(
            parse(r#"{"version":2,"partitions":[]}"#),
            Err("Not supported version field value 2".to_owned())
        );
    }

    #[test]
    fn rack_unaware_assignment_is_kafkas() {
        // 5 brokers, 10 partitions, RF 3, start index 0, shift 0: the shift grows after
        // partition 4, so the second round pairs each leader with other followers.
        let placed = assign_rack_unaware(10, 3, &[0, 1, 2, 3, 4], 0, 0).unwrap_or_default();
        assert_eq!(
            placed,
            vec![
                vec![0, 1, 2],
                vec![1, 2, 3],
                vec![2, 3, 4],
                vec![3, 4, 0],
                vec![4, 0, 1],
                vec![0, 2, 3],
                vec![1, 3, 4],
                vec![2, 4, 0],
                vec![3, 0, 1],
                vec![4, 1, 2],
            ]
        );
        // Every broker leads twice and holds six replicas.
        for broker in 0..5 {
            assert_eq!(placed.iter().filter(|r| r[0] == broker).count(), 2);
            assert_eq!(placed.iter().flatten().filter(|b| **b == broker).count(), 6);
        }
        assert_eq!(
            assign_rack_unaware(1, 3, &[1, 2], 0, 0),
            Err("Replication factor: 3 larger than available brokers: 2.".to_owned())
        );
    }

    #[test]
    fn rack_aware_assignment_spreads_each_partition_over_the_racks() {
        let brokers: Vec<(i32, Option<String>)> =
            [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")]
                .into_iter()
                .map(|(id, rack)| (id, Some(rack.to_owned())))
                .collect();
        assert_eq!(
            rack_alternated(&brokers),
            [(1, "a"), (3, "b"), (5, "c"), (2, "a"), (4, "b"), (6, "c")]
                .map(|(id, rack)| (id, rack.to_owned()))
                .to_vec()
        );
        let placed = assign_rack_aware(12, 3, &brokers, 0, 0).unwrap_or_default();
        assert_eq!(
            placed[..4],
            [vec![1, 3, 5], vec![3, 5, 2], vec![5, 2, 4], vec![2, 4, 6]]
        );
        let rack = |id: &i32| (id + 1) / 2;
        for replicas in &placed {
            let racks: BTreeSet<i32> = replicas.iter().map(rack).collect();
            assert_eq!(racks.len(), 3, "{replicas:?}");
        }
        for broker in 1..=6 {
            assert_eq!(placed.iter().filter(|r| r[0] == broker).count(), 2);
            assert_eq!(placed.iter().flatten().filter(|b| **b == broker).count(), 6);
        }
    }

    #[test]
    fn verify_reports_each_partition() {
        let tp = |p| ("foo".to_owned(), p);
        let targets: Assignment = [
            (tp(0), vec![2, 3, 4]),
            (tp(1), vec![2, 3, 4]),
            (tp(2), vec![1]),
        ]
        .into_iter()
        .collect();
        let ongoing = [(tp(1), (vec![2, 3, 4, 1], vec![4], vec![1]))]
            .into_iter()
            .collect();
        let current: Assignment = [
            (tp(0), vec![2, 3, 4]),
            (tp(1), vec![2, 3, 4, 1]),
            (tp(2), vec![2]),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            verify_lines(&targets, &ongoing, &current),
            "Status of partition reassignment:\n\
             Reassignment of partition foo-0 is completed.\n\
             Reassignment of partition foo-1 is still in progress.\n\
             There is no active reassignment of partition foo-2, but replica set is 2 rather than 1.\n"
        );
    }
}
