//! `gregor consumer-groups`: kafka-consumer-groups.sh (list, describe with LAG, reset and delete
//! offsets, delete groups) with its output, for classic and KIP-848 consumer groups (described
//! with ConsumerGroupDescribe when DescribeGroups does not know them, as the Java admin does).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bytes::Buf;
use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::{
    BrokerId, ConsumerGroupDescribeRequest, DescribeGroupsRequest, FindCoordinatorRequest, GroupId,
    ListGroupsRequest, ListOffsetsRequest, MetadataRequest, OffsetCommitRequest,
    OffsetDeleteRequest, OffsetFetchRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::{check, java_message, AdminClient, AdminError};

/// What to do.
#[derive(Debug, Clone)]
pub enum GroupsAction {
    /// `--list [--state]`.
    /// `--state [S]` and `--type [T]`: `Some` adds the column, `Some(Some(..))` also filters.
    List {
        states: Option<Option<String>>,
        types: Option<Option<String>>,
    },
    /// `--describe --group G` with the view.
    Describe { group: String, view: View },
    /// `--delete --group G...`.
    Delete { groups: Vec<String> },
    /// `--reset-offsets --group G (--topic T | --all-topics) <spec> (--dry-run | --execute)`.
    Reset {
        group: String,
        /// `None`: every topic the group has offsets for.
        topics: Option<Vec<String>>,
        spec: ResetSpec,
        execute: bool,
    },
    /// `--delete-offsets --group G --topic T[:p,p]...`.
    DeleteOffsets {
        group: String,
        topics: Vec<(String, Option<Vec<i32>>)>,
    },
}

/// `--describe` views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Offsets,
    Members { verbose: bool },
    State,
}

/// Where `--reset-offsets` moves the offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetSpec {
    Earliest,
    Latest,
    Offset(i64),
    ShiftBy(i64),
    /// The first offset whose timestamp is at or after this (epoch ms).
    Timestamp(i64),
}

/// Parses kafka-consumer-groups.sh's `--to-datetime` value, `YYYY-MM-DDTHH:mm:SS.sss` with an
/// optional `Z` or `±HH:mm` zone, into epoch milliseconds. Without a zone the time is UTC
/// (Kafka takes the JVM's zone). Hand-written: the days-from-civil arithmetic is a few lines and
/// no date crate is in the build.
pub fn parse_datetime(text: &str) -> Option<i64> {
    let (date, rest) = text.split_once('T')?;
    let mut date_parts = date.split('-');
    let year: i64 = date_parts.next()?.parse().ok()?;
    let month: i64 = date_parts.next()?.parse().ok()?;
    let day: i64 = date_parts.next()?.parse().ok()?;
    if date_parts.next().is_some() || !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let (time, offset_minutes) = if let Some(time) = rest.strip_suffix('Z') {
        (time, 0)
    } else if let Some(at) = rest.rfind(['+', '-']).filter(|at| *at >= 8) {
        let (time, zone) = rest.split_at(at);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (hours, minutes) = zone[1..].split_once(':').unwrap_or((&zone[1..], "0"));
        let minutes = hours.parse::<i64>().ok()? * 60 + minutes.parse::<i64>().ok()?;
        (time, sign * minutes)
    } else {
        (rest, 0)
    };
    let (hms, millis) = time.split_once('.').unwrap_or((time, "0"));
    let mut hms = hms.split(':');
    let hour: i64 = hms.next()?.parse().ok()?;
    let minute: i64 = hms.next()?.parse().ok()?;
    let second: i64 = hms.next().unwrap_or("0").parse().ok()?;
    let millis: i64 = millis.parse().ok()?;
    if hour > 23 || minute > 59 || second > 59 || millis > 999 {
        return None;
    }
    // Days from 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    let days = era * 146_097 + day_of_era - 719_468;
    Some(((days * 24 + hour) * 60 + minute - offset_minutes) * 60_000 + second * 1000 + millis)
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// Connects to the coordinator of `group` (FindCoordinator through `bootstrap`).
pub(super) async fn coordinator(bootstrap: &str, group: &str) -> Result<AdminClient, AdminError> {
    let mut client = AdminClient::connect(bootstrap).await?;
    let version = client.version_of::<FindCoordinatorRequest>().unwrap_or(0);
    let request = if version >= 4 {
        FindCoordinatorRequest::default().with_coordinator_keys(vec![text(group)])
    } else {
        FindCoordinatorRequest::default().with_key(text(group))
    };
    // A new cluster creates __consumer_offsets on the first request: retry while it is
    // COORDINATOR_NOT_AVAILABLE or loading, for up to about ten seconds.
    for _ in 0..100 {
        let (version, response) = client.send(&request).await?;
        let (code, message, host, port) = if version >= 4 {
            let Some(c) = response.coordinators.first() else {
                return Err(AdminError::Io(
                    "FindCoordinator answered no coordinator".into(),
                ));
            };
            (
                c.error_code,
                c.error_message.clone(),
                c.host.to_string(),
                c.port,
            )
        } else {
            (
                response.error_code,
                response.error_message.clone(),
                response.host.to_string(),
                response.port,
            )
        };
        match code {
            0 => return AdminClient::connect(&format!("{host}:{port}")).await,
            15 | 14 => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
            _ => check(code, message.as_ref())?,
        }
    }
    Err(AdminError::Broker {
        code: 15,
        message: None,
    })
}

/// A group as the describe views print it, from DescribeGroups or ConsumerGroupDescribe.
struct Described {
    state: String,
    /// The classic protocol, or the consumer group's server assignor.
    strategy: String,
    members: Vec<DescribedMember>,
}

struct DescribedMember {
    id: String,
    host: String,
    client_id: String,
    assigned: Vec<(String, i32)>,
}

async fn describe_group(client: &mut AdminClient, group: &str) -> Result<Described, AdminError> {
    let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]);
    let (_, response) = client.send(&request).await?;
    let described = response
        .groups
        .into_iter()
        .next()
        .ok_or_else(|| AdminError::Io("DescribeGroups answered no group".into()))?;
    if described.error_code != 69 {
        check(described.error_code, described.error_message.as_ref())?;
    }
    if described.group_state.as_str() == "Dead" {
        if let Some(consumer) = describe_consumer_group(client, group).await? {
            return Ok(consumer);
        }
    }
    Ok(classic(described))
}

fn classic(described: DescribedGroup) -> Described {
    Described {
        state: described.group_state.to_string(),
        strategy: described.protocol_data.to_string(),
        members: described
            .members
            .iter()
            .map(|m| DescribedMember {
                id: m.member_id.to_string(),
                host: m.client_host.to_string(),
                client_id: m.client_id.to_string(),
                assigned: assigned_partitions(&m.member_assignment),
            })
            .collect(),
    }
}

/// ConsumerGroupDescribe of a KIP-848 group; `None` when the node has not the API or the group
/// is not a consumer group.
async fn describe_consumer_group(
    client: &mut AdminClient,
    group: &str,
) -> Result<Option<Described>, AdminError> {
    if client
        .version_of::<ConsumerGroupDescribeRequest>()
        .is_none()
    {
        return Ok(None);
    }
    let request =
        ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(group))]);
    let (_, response) = client.send(&request).await?;
    let Some(described) = response.groups.into_iter().next() else {
        return Ok(None);
    };
    if described.error_code == 69 {
        return Ok(None);
    }
    check(described.error_code, described.error_message.as_ref())?;
    Ok(Some(Described {
        state: described.group_state.to_string(),
        strategy: described.assignor_name.to_string(),
        members: described
            .members
            .iter()
            .map(|m| DescribedMember {
                id: m.member_id.to_string(),
                host: m.client_host.to_string(),
                client_id: m.client_id.to_string(),
                assigned: m
                    .assignment
                    .topic_partitions
                    .iter()
                    .flat_map(|t| {
                        t.partitions
                            .iter()
                            .map(|p| (t.topic_name.0.to_string(), *p))
                    })
                    .collect(),
            })
            .collect(),
    }))
}

/// The group's committed offsets: (topic, partition) → offset.
async fn committed(
    client: &mut AdminClient,
    group: &str,
) -> Result<BTreeMap<(String, i32), i64>, AdminError> {
    let version = client.version_of::<OffsetFetchRequest>().unwrap_or(1);
    let mut request = OffsetFetchRequest::default();
    if version >= 8 {
        request.groups = vec![
            kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(text(group)))
                .with_topics(None),
        ];
    } else {
        request.group_id = GroupId(text(group));
        request.topics = None;
    }
    let (version, response) = client.send(&request).await?;
    let mut out = BTreeMap::new();
    if version >= 8 {
        for g in response.groups {
            check(g.error_code, None)?;
            for t in g.topics {
                for p in t.partitions {
                    if p.committed_offset >= 0 {
                        out.insert((t.name.to_string(), p.partition_index), p.committed_offset);
                    }
                }
            }
        }
    } else {
        check(response.error_code, None)?;
        for t in response.topics {
            for p in t.partitions {
                if p.committed_offset >= 0 {
                    out.insert((t.name.to_string(), p.partition_index), p.committed_offset);
                }
            }
        }
    }
    Ok(out)
}

/// ListOffsets (`timestamp` −1 latest, −2 earliest) of partitions, asked of their leaders.
async fn log_offsets(
    bootstrap: &str,
    partitions: &[(String, i32)],
    timestamp: i64,
) -> Result<BTreeMap<(String, i32), i64>, AdminError> {
    let mut client = AdminClient::connect(bootstrap).await?;
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in partitions {
        topics.entry(t.as_str()).or_default().push(*p);
    }
    let metadata = MetadataRequest::default().with_topics(Some(
        topics
            .keys()
            .map(|t| {
                kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                    .with_name(Some(TopicName(text(t))))
            })
            .collect(),
    ));
    let (_, metadata) = client.send(&metadata).await?;
    let brokers: BTreeMap<i32, String> = metadata
        .brokers
        .iter()
        .map(|b| (b.node_id.0, format!("{}:{}", b.host, b.port)))
        .collect();
    let mut by_leader: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
    for topic in &metadata.topics {
        let Some(name) = topic.name.as_ref() else {
            continue;
        };
        for p in &topic.partitions {
            if topics
                .get(name.as_str())
                .is_some_and(|wanted| wanted.contains(&p.partition_index))
            {
                by_leader
                    .entry(p.leader_id.0)
                    .or_default()
                    .push((name.to_string(), p.partition_index));
            }
        }
    }
    let mut out = BTreeMap::new();
    for (leader, partitions) in by_leader {
        let Some(address) = brokers.get(&leader) else {
            continue;
        };
        let mut leader_client = AdminClient::connect(address).await?;
        let mut grouped: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for (t, p) in partitions {
            grouped.entry(t).or_default().push(p);
        }
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(
                grouped
                    .iter()
                    .map(|(t, ps)| {
                        ListOffsetsTopic::default()
                            .with_name(TopicName(text(t)))
                            .with_partitions(
                                ps.iter()
                                    .map(|p| {
                                        ListOffsetsPartition::default()
                                            .with_partition_index(*p)
                                            .with_timestamp(timestamp)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let (_, response) = leader_client.send(&request).await?;
        for t in response.topics {
            for p in t.partitions {
                if p.error_code == 0 {
                    out.insert((t.name.to_string(), p.partition_index), p.offset);
                }
            }
        }
    }
    Ok(out)
}

/// The topic-partitions of a `ConsumerProtocolAssignment` (any version: all start with the
/// int16 version and the topic array); empty when the bytes are not one.
pub(super) fn assigned_partitions(assignment: &[u8]) -> Vec<(String, i32)> {
    fn read(mut buf: &[u8]) -> Option<Vec<(String, i32)>> {
        let mut out = Vec::new();
        if buf.remaining() < 6 {
            return None;
        }
        buf.get_i16();
        let topics = buf.get_i32();
        for _ in 0..topics.max(0) {
            if buf.remaining() < 2 {
                return None;
            }
            let len = usize::try_from(buf.get_i16()).ok()?;
            if buf.remaining() < len + 4 {
                return None;
            }
            let topic = String::from_utf8(buf[..len].to_vec()).ok()?;
            buf.advance(len);
            let partitions = buf.get_i32();
            for _ in 0..partitions.max(0) {
                if buf.remaining() < 4 {
                    return None;
                }
                out.push((topic.clone(), buf.get_i32()));
            }
        }
        Some(out)
    }
    read(assignment).unwrap_or_default()
}

/// The Java exception kafka-consumer-groups.sh prints for a group error code.
fn group_exception(code: i16) -> String {
    match code {
        68 => "org.apache.kafka.common.errors.GroupNotEmptyException: The group is not empty.".into(),
        69 => "org.apache.kafka.common.errors.GroupIdNotFoundException: The group id does not exist.".into(),
        86 => "org.apache.kafka.common.errors.GroupSubscribedToTopicException: Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.".into(),
        other => java_message(other, None),
    }
}

fn dash_or<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// Runs `action` against `bootstrap`, writing what kafka-consumer-groups.sh prints to `out`.
pub async fn run(bootstrap: &str, action: &GroupsAction, out: &mut String) -> Result<(), String> {
    let result = match action {
        GroupsAction::List { states, types } => {
            list(bootstrap, states.as_ref(), types.as_ref(), out).await
        }
        GroupsAction::Describe { group, view } => describe(bootstrap, group, *view, out).await,
        GroupsAction::Delete { groups } => delete(bootstrap, groups, out).await,
        GroupsAction::Reset {
            group,
            topics,
            spec,
            execute,
        } => reset(bootstrap, group, topics.as_deref(), *spec, *execute, out).await,
        GroupsAction::DeleteOffsets { group, topics } => {
            delete_offsets(bootstrap, group, topics, out).await
        }
    };
    result.map_err(|e| match e {
        AdminError::Broker { code, message } => java_message(code, message.as_deref()),
        other => other.to_string(),
    })
}

/// Kafka's group states a `--state` filter may name.
const GROUP_STATES: &[&str] = &[
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
    "Empty",
    "Assigning",
    "Reconciling",
];

/// Kafka's spelling of each group state or type a comma-separated filter names (any case);
/// an unknown one is the usage error kafka-consumer-groups.sh gives.
fn filter_values(
    text: Option<&Option<String>>,
    known: &[&str],
    what: &str,
) -> Result<Vec<String>, AdminError> {
    let Some(Some(text)) = text else {
        return Ok(Vec::new());
    };
    text.split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(|value| {
            known
                .iter()
                .find(|k| k.eq_ignore_ascii_case(value))
                .map(|k| (*k).to_owned())
                .ok_or_else(|| {
                    AdminError::Io(format!(
                        "Invalid {what} value '{value}'. Valid values are: {}",
                        known.join(", ")
                    ))
                })
        })
        .collect()
}

async fn list(
    bootstrap: &str,
    states: Option<&Option<String>>,
    types: Option<&Option<String>>,
    out: &mut String,
) -> Result<(), AdminError> {
    let states_filter = filter_values(states, GROUP_STATES, "state")?;
    let types_filter = filter_values(types, &["Classic", "Consumer"], "group type")?;
    let mut client = AdminClient::connect(bootstrap).await?;
    let (_, metadata) = client
        .send(&MetadataRequest::default().with_topics(Some(Vec::new())))
        .await?;
    // group id -> (type, state)
    let mut groups: BTreeMap<String, (String, String)> = BTreeMap::new();
    let request = ListGroupsRequest::default()
        .with_states_filter(
            states_filter
                .iter()
                .map(|s| StrBytes::from_string(s.clone()))
                .collect(),
        )
        .with_types_filter(
            types_filter
                .iter()
                .map(|t| StrBytes::from_string(t.clone()))
                .collect(),
        );
    // Each broker lists the groups it coordinates.
    for broker in &metadata.brokers {
        let mut broker_client =
            AdminClient::connect(&format!("{}:{}", broker.host, broker.port)).await?;
        let (_, response) = broker_client.send(&request).await?;
        check(response.error_code, None)?;
        for g in response.groups {
            let group_type = match g.group_type.to_ascii_lowercase().as_str() {
                "classic" => "Classic",
                "consumer" => "Consumer",
                _ => "Unknown",
            };
            groups.insert(
                g.group_id.0.to_string(),
                (group_type.to_owned(), g.group_state.to_string()),
            );
        }
    }
    if states.is_none() && types.is_none() {
        for group in groups.keys() {
            let _ = writeln!(out, "{group}");
        }
        return Ok(());
    }
    // Kafka 4's columns: GROUP padded to its longest value (at least 15) plus 10, then each
    // extra column padded to 20.
    let width = groups.keys().map(String::len).max().unwrap_or(0).max(15) + 10;
    let row = |group: &str, group_type: &str, state: &str| {
        let mut line = format!("{group:<width$}");
        if types.is_some() {
            line.push_str(&format!(" {group_type:<20}"));
        }
        if states.is_some() {
            line.push_str(&format!(" {state:<20}"));
        }
        line
    };
    let _ = writeln!(out, "{}", row("GROUP", "TYPE", "STATE"));
    for (group, (group_type, state)) in &groups {
        let _ = writeln!(out, "{}", row(group, group_type, state));
    }
    Ok(())
}

async fn describe(
    bootstrap: &str,
    group: &str,
    view: View,
    out: &mut String,
) -> Result<(), AdminError> {
    let mut client = coordinator(bootstrap, group).await?;
    let described = describe_group(&mut client, group).await?;
    let state = described.state.clone();
    if state == "Dead" {
        return Err(AdminError::Io(format!(
            "Consumer group '{group}' does not exist."
        )));
    }
    let members = &described.members;
    match view {
        View::State => {
            let (_, metadata) = client
                .send(&MetadataRequest::default().with_topics(Some(Vec::new())))
                .await?;
            let coordinator = metadata
                .brokers
                .first()
                .map(|b| format!("{}:{}  ({})", b.host, b.port, b.node_id.0))
                .unwrap_or_default();
            let widths = (group.len().max(15), coordinator.len().max(25));
            let _ = writeln!(
                out,
                "\n{:<g$} {:<c$} {:<20} {:<20} #MEMBERS",
                "GROUP",
                "COORDINATOR (ID)",
                "ASSIGNMENT-STRATEGY",
                "STATE",
                g = widths.0,
                c = widths.1
            );
            let _ = writeln!(
                out,
                "{:<g$} {:<c$} {:<20} {:<20} {}",
                group,
                coordinator,
                described.strategy,
                state,
                members.len(),
                g = widths.0,
                c = widths.1
            );
        }
        View::Members { verbose } => {
            if members.is_empty() {
                let _ = writeln!(out, "\nConsumer group '{group}' has no active members.");
                return Ok(());
            }
            let id_width = members
                .iter()
                .map(|m| m.id.len())
                .max()
                .unwrap_or(0)
                .max(15);
            let host_width = members
                .iter()
                .map(|m| m.host.len())
                .max()
                .unwrap_or(0)
                .max(15);
            let client_width = members
                .iter()
                .map(|m| m.client_id.len())
                .max()
                .unwrap_or(0)
                .max(15);
            let g = group.len().max(15);
            let _ = write!(
                out,
                "\n{:<g$} {:<id_width$} {:<host_width$} {:<client_width$} {:<12}",
                "GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"
            );
            if verbose {
                let _ = write!(out, " ASSIGNMENT");
            }
            let _ = writeln!(out);
            for m in members {
                let assigned = &m.assigned;
                let _ = write!(
                    out,
                    "{:<g$} {:<id_width$} {:<host_width$} {:<client_width$} {:<12}",
                    group,
                    m.id,
                    m.host,
                    m.client_id,
                    assigned.len()
                );
                if verbose {
                    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
                    for (t, p) in assigned {
                        by_topic.entry(t).or_default().push(*p);
                    }
                    let text: Vec<String> = by_topic
                        .iter()
                        .map(|(t, ps)| {
                            let ps: Vec<String> = ps.iter().map(i32::to_string).collect();
                            format!("{t}({})", ps.join(","))
                        })
                        .collect();
                    let _ = write!(
                        out,
                        " {}",
                        if text.is_empty() {
                            "-".to_owned()
                        } else {
                            text.join(",")
                        }
                    );
                }
                let _ = writeln!(out);
            }
        }
        View::Offsets => {
            let offsets = committed(&mut client, group).await?;
            // Assigned partitions (with their member) and committed ones.
            let mut rows: BTreeMap<(String, i32), Option<usize>> = BTreeMap::new();
            for (index, m) in members.iter().enumerate() {
                for tp in &m.assigned {
                    rows.insert(tp.clone(), Some(index));
                }
            }
            for tp in offsets.keys() {
                rows.entry(tp.clone()).or_insert(None);
            }
            let partitions: Vec<(String, i32)> = rows.keys().cloned().collect();
            let ends = log_offsets(bootstrap, &partitions, -1).await?;
            if members.is_empty() {
                let _ = writeln!(out, "\nConsumer group '{group}' has no active members.");
            }
            let member = |index: Option<usize>| index.and_then(|i| members.get(i));
            let g = group.len().max(15);
            let t = partitions
                .iter()
                .map(|(t, _)| t.len())
                .max()
                .unwrap_or(0)
                .max(15);
            let c = rows
                .values()
                .filter_map(|i| member(*i))
                .map(|m| m.id.len())
                .max()
                .unwrap_or(0)
                .max(15);
            let h = rows
                .values()
                .filter_map(|i| member(*i))
                .map(|m| m.host.len())
                .max()
                .unwrap_or(0)
                .max(15);
            let _ = writeln!(
                out,
                "\n{:<g$} {:<t$} {:<10} {:<15} {:<15} {:<15} {:<c$} {:<h$} CLIENT-ID",
                "GROUP",
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
            );
            for ((topic, partition), index) in &rows {
                let current = offsets.get(&(topic.clone(), *partition)).copied();
                let end = ends.get(&(topic.clone(), *partition)).copied();
                let lag = current.zip(end).map(|(c, e)| (e - c).max(0));
                let m = member(*index);
                let _ = writeln!(
                    out,
                    "{:<g$} {:<t$} {:<10} {:<15} {:<15} {:<15} {:<c$} {:<h$} {}",
                    group,
                    topic,
                    partition,
                    dash_or(current),
                    dash_or(end),
                    dash_or(lag),
                    m.map_or("-", |m| m.id.as_str()),
                    m.map_or("-", |m| m.host.as_str()),
                    m.map_or("-", |m| m.client_id.as_str()),
                );
            }
        }
    }
    Ok(())
}

async fn delete(bootstrap: &str, groups: &[String], out: &mut String) -> Result<(), AdminError> {
    let mut failed = Vec::new();
    for group in groups {
        let mut client = coordinator(bootstrap, group).await?;
        let request = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text(group))]);
        let (_, response) = client.send(&request).await?;
        for result in response.results {
            if result.error_code != 0 {
                failed.push((result.group_id.0.to_string(), result.error_code));
            }
        }
    }
    if failed.is_empty() {
        let names: Vec<String> = groups.iter().map(|g| format!("'{g}'")).collect();
        let _ = writeln!(
            out,
            "Deletion of requested consumer groups ({}) was successful.",
            names.join(", ")
        );
        return Ok(());
    }
    let _ = writeln!(out, "Deletion of some consumer groups failed:");
    for (group, code) in &failed {
        let _ = writeln!(
            out,
            "* Group '{group}' could not be deleted due to: {}",
            group_exception(*code)
        );
    }
    Err(AdminError::Io(format!(
        "{} group(s) could not be deleted",
        failed.len()
    )))
}

async fn reset(
    bootstrap: &str,
    group: &str,
    topics: Option<&[String]>,
    spec: ResetSpec,
    execute: bool,
    out: &mut String,
) -> Result<(), AdminError> {
    let mut client = coordinator(bootstrap, group).await?;
    let described = describe_group(&mut client, group).await?;
    let state = described.state.clone();
    if state != "Empty" && state != "Dead" {
        return Err(AdminError::Io(format!(
            "Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}."
        )));
    }
    let current = committed(&mut client, group).await?;
    let partitions: Vec<(String, i32)> = match topics {
        None => current.keys().cloned().collect(),
        Some(topics) => {
            let mut meta_client = AdminClient::connect(bootstrap).await?;
            let request = MetadataRequest::default().with_topics(Some(
                topics
                    .iter()
                    .map(|t| {
                        kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                            .with_name(Some(TopicName(text(t))))
                    })
                    .collect(),
            ));
            let (_, metadata) = meta_client.send(&request).await?;
            let mut out = Vec::new();
            for topic in metadata.topics {
                check(topic.error_code, None)?;
                let name = topic.name.map(|n| n.to_string()).unwrap_or_default();
                for p in topic.partitions {
                    out.push((name.clone(), p.partition_index));
                }
            }
            out.sort();
            out
        }
    };
    let earliest = log_offsets(bootstrap, &partitions, -2).await?;
    let latest = log_offsets(bootstrap, &partitions, -1).await?;
    let by_time = match spec {
        ResetSpec::Timestamp(ms) => log_offsets(bootstrap, &partitions, ms).await?,
        _ => BTreeMap::new(),
    };
    let mut targets = Vec::new();
    for tp in &partitions {
        let (low, high) = (
            earliest.get(tp).copied().unwrap_or(0),
            latest.get(tp).copied().unwrap_or(0),
        );
        let wanted = match spec {
            ResetSpec::Earliest => low,
            ResetSpec::Latest => high,
            ResetSpec::Offset(o) => o,
            ResetSpec::ShiftBy(n) => current.get(tp).copied().unwrap_or(low).saturating_add(n),
            // No record at or after the time: the log end.
            ResetSpec::Timestamp(_) => by_time.get(tp).copied().filter(|o| *o >= 0).unwrap_or(high),
        };
        // Kafka clamps a target outside the log to its start or end.
        targets.push((tp.clone(), wanted.clamp(low, high.max(low))));
    }
    if execute {
        let mut by_topic: BTreeMap<&str, Vec<(i32, i64)>> = BTreeMap::new();
        for ((t, p), o) in &targets {
            by_topic.entry(t).or_default().push((*p, *o));
        }
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(
                by_topic
                    .iter()
                    .map(|(t, ps)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(text(t)))
                            .with_partitions(
                                ps.iter()
                                    .map(|(p, o)| {
                                        OffsetCommitRequestPartition::default()
                                            .with_partition_index(*p)
                                            .with_committed_offset(*o)
                                            .with_committed_leader_epoch(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            );
        let (_, response) = client.send(&request).await?;
        for t in &response.topics {
            for p in &t.partitions {
                check(p.error_code, None)?;
            }
        }
    }
    let g = group.len().max(15);
    let t = targets
        .iter()
        .map(|((t, _), _)| t.len())
        .max()
        .unwrap_or(0)
        .max(15);
    let _ = writeln!(
        out,
        "\n{:<g$} {:<t$} {:<10} NEW-OFFSET",
        "GROUP", "TOPIC", "PARTITION"
    );
    for ((topic, partition), offset) in &targets {
        let _ = writeln!(out, "{group:<g$} {topic:<t$} {partition:<10} {offset}");
    }
    Ok(())
}

async fn delete_offsets(
    bootstrap: &str,
    group: &str,
    topics: &[(String, Option<Vec<i32>>)],
    out: &mut String,
) -> Result<(), AdminError> {
    let mut client = coordinator(bootstrap, group).await?;
    let mut asked: Vec<(String, Vec<i32>)> = Vec::new();
    let whole: Vec<&String> = topics
        .iter()
        .filter(|(_, p)| p.is_none())
        .map(|(t, _)| t)
        .collect();
    if !whole.is_empty() {
        let request = MetadataRequest::default().with_topics(Some(
            whole
                .iter()
                .map(|t| {
                    kafka_protocol::messages::metadata_request::MetadataRequestTopic::default()
                        .with_name(Some(TopicName(text(t))))
                })
                .collect(),
        ));
        let (_, metadata) = client.send(&request).await?;
        for topic in metadata.topics {
            let name = topic.name.map(|n| n.to_string()).unwrap_or_default();
            asked.push((
                name,
                topic.partitions.iter().map(|p| p.partition_index).collect(),
            ));
        }
    }
    for (t, ps) in topics {
        if let Some(ps) = ps {
            asked.push((t.clone(), ps.clone()));
        }
    }
    let request = OffsetDeleteRequest::default()
        .with_group_id(GroupId(text(group)))
        .with_topics(
            asked
                .iter()
                .map(|(t, ps)| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(TopicName(text(t)))
                        .with_partitions(
                            ps.iter()
                                .map(|p| {
                                    OffsetDeleteRequestPartition::default().with_partition_index(*p)
                                })
                                .collect(),
                        )
                })
                .collect(),
        );
    let (_, response) = client.send(&request).await?;
    if response.error_code != 0 {
        return Err(AdminError::Io(group_exception(response.error_code)));
    }
    let failed = response
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .any(|p| p.error_code != 0);
    let names: Vec<&str> = asked.iter().map(|(t, _)| t.as_str()).collect();
    if failed {
        let _ = writeln!(
            out,
            "Request failed for deleting offsets with topic {} group {group}",
            names.join(",")
        );
    } else {
        let _ = writeln!(
            out,
            "Request succeed for deleting offsets with topic {} group {group}",
            names.join(",")
        );
    }
    let t = asked
        .iter()
        .map(|(t, _)| t.len())
        .max()
        .unwrap_or(0)
        .max(15);
    let _ = writeln!(out, "\n{:<t$} {:<10} STATUS", "TOPIC", "PARTITION");
    for topic in &response.topics {
        for p in &topic.partitions {
            let status = if p.error_code == 0 {
                "Successful".to_owned()
            } else {
                format!("Error: {}", group_exception(p.error_code))
            };
            let _ = writeln!(
                out,
                "{:<t$} {:<10} {}",
                topic.name.as_str(),
                p.partition_index,
                status
            );
        }
    }
    if failed {
        return Err(AdminError::Io("some offsets could not be deleted".into()));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn datetimes_are_read_as_kafka_writes_them() {
        assert_eq!(parse_datetime("1970-01-01T00:00:00.000"), Some(0));
        assert_eq!(
            parse_datetime("2024-03-01T12:30:15.250Z"),
            Some(1_709_296_215_250)
        );
        assert_eq!(
            parse_datetime("2024-03-01T14:30:15.250+02:00"),
            Some(1_709_296_215_250)
        );
        assert_eq!(
            parse_datetime("2024-02-29T23:59:59"),
            Some(1_709_251_199_000)
        );
        assert_eq!(parse_datetime("2024-13-01T00:00:00"), None);
        assert_eq!(parse_datetime("yesterday"), None);
    }

    #[test]
    fn assignments_are_read() {
        // ConsumerProtocolAssignment v0: [("t", [0, 2])], user data null.
        let bytes = [
            0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 2, 255, 255, 255, 255,
        ];
        assert_eq!(
            assigned_partitions(&bytes),
            vec![("t".to_owned(), 0), ("t".to_owned(), 2)]
        );
        assert!(assigned_partitions(&[0, 0, 0]).is_empty());
        assert!(assigned_partitions(&[0, 0, 0, 0, 0, 1, 0, 9, b't']).is_empty());
    }
}
