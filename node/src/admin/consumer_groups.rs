//! `gregor consumer-groups`: kafka-consumer-groups.sh (list, describe with LAG, reset and delete
//! offsets, delete groups) with its output, for classic and KIP-848 consumer groups (described
//! with ConsumerGroupDescribe when DescribeGroups does not know them, as the Java admin does).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use bytes::Buf;
use kafka_protocol::error::ResponseError;
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
use kafka_protocol::protocol::{Request, StrBytes};
use tokio::time::Instant;

use super::records::{cluster_view, exception_text};
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
    /// `--reset-offsets --group G (--topic T[:p,p]... | --all-topics) <spec> (--dry-run | --execute)`.
    Reset {
        group: String,
        /// `None`: every topic the group has offsets for.
        topics: Option<Vec<TopicArg>>,
        spec: ResetSpec,
        execute: bool,
    },
    /// `--delete-offsets --group G --topic T[:p,p]...`.
    DeleteOffsets {
        group: String,
        topics: Vec<TopicArg>,
    },
}

/// A `--topic` value: `T` (every partition) or `T:p,p`.
pub type TopicArg = (String, Option<Vec<i32>>);

/// Reads a `--topic` value as Kafka's parseTopicsWithPartitions does, with its messages.
pub fn parse_topic_arg(arg: &str) -> Result<TopicArg, String> {
    let Some((topic, partitions)) = arg.split_once(':') else {
        return Ok((arg.to_owned(), None));
    };
    if partitions.contains(':') || partitions.is_empty() {
        return Err(format!(
            "Invalid topic arg '{arg}', expected topic name and partitions"
        ));
    }
    let partitions = partitions
        .split(',')
        .map(|p| {
            p.parse::<i32>()
                .map_err(|_| format!("Invalid partition '{p}' specified in topic arg '{arg}''"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok((topic.to_owned(), Some(partitions)))
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

/// Coordinator errors the Java admin client retries until its timeout: the coordinator is
/// loading the group's partition, or it is not (yet, or any longer) the group's coordinator,
/// which sends the client back to FindCoordinator.
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
const NOT_COORDINATOR: i16 = 16;
/// The admin client's `retry.backoff.ms`.
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// kafka-consumer-groups.sh's `--timeout` default.
pub const DEFAULT_TIMEOUT_MS: u64 = 5_000;

fn retriable(code: i16) -> bool {
    matches!(
        code,
        COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE | NOT_COORDINATOR
    )
}

/// Connects to the coordinator of `group` (FindCoordinator through `bootstrap`), asking again
/// until `deadline` while there is none yet: a new cluster creates __consumer_offsets on the
/// first request.
pub(super) async fn coordinator(
    bootstrap: &str,
    group: &str,
    deadline: Instant,
) -> Result<AdminClient, AdminError> {
    let mut client = AdminClient::connect(bootstrap).await?;
    let version = client.version_of::<FindCoordinatorRequest>().unwrap_or(0);
    let request = if version >= 4 {
        FindCoordinatorRequest::default().with_coordinator_keys(vec![text(group)])
    } else {
        FindCoordinatorRequest::default().with_key(text(group))
    };
    loop {
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
        if code == 0 {
            return AdminClient::connect(&format!("{host}:{port}")).await;
        }
        if !retriable(code) || Instant::now() + RETRY_BACKOFF >= deadline {
            return Err(AdminError::Broker {
                code,
                message: message.map(|m| m.to_string()),
            });
        }
        tokio::time::sleep(RETRY_BACKOFF).await;
    }
}

/// A connection to a group's coordinator whose requests are retried, as the Java admin client
/// retries them within the tool's `--timeout`, while the coordinator is loading or has moved.
struct GroupCoordinator {
    bootstrap: String,
    group: String,
    timeout: Duration,
    client: AdminClient,
}

impl GroupCoordinator {
    async fn find(bootstrap: &str, group: &str, timeout: Duration) -> Result<Self, AdminError> {
        let client = coordinator(bootstrap, group, Instant::now() + timeout).await?;
        Ok(GroupCoordinator {
            bootstrap: bootstrap.to_owned(),
            group: group.to_owned(),
            timeout,
            client,
        })
    }

    /// Sends `request`, again while the coordinator error `error_of` finds in the answer is
    /// retriable and the timeout has not passed; the last answer is the caller's to judge.
    async fn send<R: Request>(
        &mut self,
        request: &R,
        error_of: impl Fn(i16, &R::Response) -> i16,
    ) -> Result<(i16, R::Response), AdminError> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let (version, response) = self.client.send(request).await?;
            let code = error_of(version, &response);
            if !retriable(code) || Instant::now() + RETRY_BACKOFF >= deadline {
                return Ok((version, response));
            }
            tokio::time::sleep(RETRY_BACKOFF).await;
            if code != COORDINATOR_LOAD_IN_PROGRESS {
                self.client = coordinator(&self.bootstrap, &self.group, deadline).await?;
            }
        }
    }
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

async fn describe_group(
    client: &mut GroupCoordinator,
    group: &str,
) -> Result<Described, AdminError> {
    let request = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]);
    let (_, response) = client
        .send(&request, |_, r| {
            r.groups.first().map_or(0, |g| g.error_code)
        })
        .await?;
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
    client: &mut GroupCoordinator,
    group: &str,
) -> Result<Option<Described>, AdminError> {
    if client
        .client
        .version_of::<ConsumerGroupDescribeRequest>()
        .is_none()
    {
        return Ok(None);
    }
    let request =
        ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(group))]);
    let (_, response) = client
        .send(&request, |_, r| {
            r.groups.first().map_or(0, |g| g.error_code)
        })
        .await?;
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
    client: &mut GroupCoordinator,
    group: &str,
) -> Result<BTreeMap<(String, i32), i64>, AdminError> {
    let version = client
        .client
        .version_of::<OffsetFetchRequest>()
        .unwrap_or(1);
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
    let (version, response) = client
        .send(&request, |version, r| {
            if version >= 8 {
                r.groups.first().map_or(0, |g| g.error_code)
            } else {
                r.error_code
            }
        })
        .await?;
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
    // Metadata that may not create a topic, as the admin client's.
    let names: Vec<String> = topics.keys().map(|t| (*t).to_owned()).collect();
    let view = cluster_view(&mut client, Some(&names), false).await?;
    let brokers = view.brokers;
    let mut by_leader: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
    for ((name, partition), leader) in view.leaders {
        if topics
            .get(name.as_str())
            .is_some_and(|wanted| wanted.contains(&partition))
        {
            by_leader.entry(leader).or_default().push((name, partition));
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

/// Kafka's `Errors` texts of the group error codes (the broker sends none with them).
fn group_error_message(code: i16) -> Option<&'static str> {
    Some(match code {
        24 => "The configured groupId is invalid.",
        30 => "Group authorization failed.",
        68 => "The group is not empty.",
        69 => "The group id does not exist.",
        86 => "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.",
        _ => return None,
    })
}

/// The Java exception kafka-consumer-groups.sh prints for an error code (its `toString()`).
fn group_exception(code: i16) -> String {
    let class = match code {
        24 => "InvalidGroupIdException",
        30 => "GroupAuthorizationException",
        68 => "GroupNotEmptyException",
        69 => "GroupIdNotFoundException",
        86 => "GroupSubscribedToTopicException",
        _ => return exception_text(code),
    };
    let message = group_error_message(code).unwrap_or_default();
    format!("org.apache.kafka.common.errors.{class}: {message}")
}

/// The name of Kafka's `Errors` constant of `code` (`COORDINATOR_NOT_AVAILABLE`).
fn errors_name(code: i16) -> String {
    let Some(error) = ResponseError::try_from_code(code) else {
        return "UNKNOWN_SERVER_ERROR".to_owned();
    };
    let mut name = String::new();
    for (i, c) in format!("{error:?}").chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_uppercase());
    }
    name
}

fn dash_or<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// Runs `action` against `bootstrap`, writing what kafka-consumer-groups.sh prints to `out`;
/// `timeout` bounds the retries of each request, as `--timeout` bounds each admin call.
pub async fn run(
    bootstrap: &str,
    timeout: Duration,
    action: &GroupsAction,
    out: &mut String,
) -> Result<(), String> {
    let result = match action {
        GroupsAction::List { states, types } => {
            list(bootstrap, timeout, states.as_ref(), types.as_ref(), out).await
        }
        GroupsAction::Describe { group, view } => {
            describe(bootstrap, timeout, group, *view, out).await
        }
        GroupsAction::Delete { groups } => delete(bootstrap, timeout, groups, out).await,
        GroupsAction::Reset {
            group,
            topics,
            spec,
            execute,
        } => {
            let target = ResetTarget {
                topics: topics.as_deref(),
                spec: *spec,
                execute: *execute,
            };
            reset(bootstrap, timeout, group, target, out).await
        }
        GroupsAction::DeleteOffsets { group, topics } => {
            delete_offsets(bootstrap, timeout, group, topics, out).await
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
    timeout: Duration,
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
        // A broker loading a group partition answers COORDINATOR_LOAD_IN_PROGRESS, which the
        // Java admin client retries.
        let deadline = Instant::now() + timeout;
        let response = loop {
            let (_, response) = broker_client.send(&request).await?;
            if !retriable(response.error_code) || Instant::now() + RETRY_BACKOFF >= deadline {
                break response;
            }
            tokio::time::sleep(RETRY_BACKOFF).await;
        };
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
    timeout: Duration,
    group: &str,
    view: View,
    out: &mut String,
) -> Result<(), AdminError> {
    let mut client = GroupCoordinator::find(bootstrap, group, timeout).await?;
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
                .client
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

async fn delete(
    bootstrap: &str,
    timeout: Duration,
    groups: &[String],
    out: &mut String,
) -> Result<(), AdminError> {
    let mut deleted = Vec::new();
    let mut failed = Vec::new();
    for group in groups {
        match delete_group(bootstrap, timeout, group).await {
            Ok(()) => deleted.push(format!("'{group}'")),
            Err(error) => failed.push((group, error)),
        }
    }
    if failed.is_empty() {
        let _ = writeln!(
            out,
            "Deletion of requested consumer groups ({}) was successful.",
            deleted.join(", ")
        );
        return Ok(());
    }
    // As kafka-consumer-groups.sh, all on stdout: the failures, then the groups deleted.
    let _ = writeln!(out, "\nError: Deletion of some consumer groups failed:");
    for (group, error) in &failed {
        let cause = match error {
            AdminError::Broker { code, .. } => group_exception(*code),
            other => other.to_string(),
        };
        let _ = writeln!(
            out,
            "* Group '{group}' could not be deleted due to: {cause}"
        );
    }
    if !deleted.is_empty() {
        let _ = writeln!(
            out,
            "\nThese consumer groups were deleted successfully: {}",
            deleted.join(", ")
        );
    }
    Err(AdminError::Io(format!(
        "{} group(s) could not be deleted",
        failed.len()
    )))
}

async fn delete_group(bootstrap: &str, timeout: Duration, group: &str) -> Result<(), AdminError> {
    let mut client = GroupCoordinator::find(bootstrap, group, timeout).await?;
    let request = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(text(group))]);
    let (_, response) = client
        .send(&request, |_, r| {
            r.results.first().map_or(0, |g| g.error_code)
        })
        .await?;
    for result in &response.results {
        check(result.error_code, None)?;
    }
    Ok(())
}

/// What `--reset-offsets` resets, and where to.
struct ResetTarget<'a> {
    /// `None`: every partition the group has an offset for.
    topics: Option<&'a [TopicArg]>,
    spec: ResetSpec,
    execute: bool,
}

/// Kafka's parseTopicPartitionsToReset and checkAllTopicPartitionsValid: the partitions named
/// by `T:p,p` and every partition of each plain `T`, all of which must exist (Metadata that
/// may not create a topic, as the admin client's describeTopics) and have a leader.
async fn partitions_to_reset(
    bootstrap: &str,
    topics: &[TopicArg],
) -> Result<Vec<(String, i32)>, AdminError> {
    let mut client = AdminClient::connect(bootstrap).await?;
    let mut names: Vec<String> = topics.iter().map(|(t, _)| t.clone()).collect();
    names.sort();
    names.dedup();
    let view = cluster_view(&mut client, Some(&names), false).await?;
    if let Some((_, code)) = view.topic_errors.iter().next() {
        return Err(AdminError::Broker {
            code: *code,
            message: None,
        });
    }
    let mut partitions = Vec::new();
    for (topic, wanted) in topics {
        match wanted {
            Some(wanted) => partitions.extend(wanted.iter().map(|p| (topic.clone(), *p))),
            None => partitions.extend(view.leaders.keys().filter(|(t, _)| t == topic).cloned()),
        }
    }
    partitions.sort();
    partitions.dedup();
    let listed = |tps: Vec<&(String, i32)>| {
        let tps: Vec<String> = tps.iter().map(|(t, p)| format!("{t}-{p}")).collect();
        tps.join(",")
    };
    let missing: Vec<&(String, i32)> = partitions
        .iter()
        .filter(|tp| !view.leaders.contains_key(*tp))
        .collect();
    if !missing.is_empty() {
        return Err(AdminError::Broker {
            code: 3,
            message: Some(format!(
                "The partitions \"{}\" do not exist",
                listed(missing)
            )),
        });
    }
    let leaderless: Vec<&(String, i32)> = partitions
        .iter()
        .filter(|tp| view.leaders.get(*tp).is_some_and(|l| *l < 0))
        .collect();
    if !leaderless.is_empty() {
        return Err(AdminError::Broker {
            code: 5,
            message: Some(format!(
                "The partitions \"{}\" have no leader",
                listed(leaderless)
            )),
        });
    }
    Ok(partitions)
}

async fn reset(
    bootstrap: &str,
    timeout: Duration,
    group: &str,
    target: ResetTarget<'_>,
    out: &mut String,
) -> Result<(), AdminError> {
    let ResetTarget {
        topics,
        spec,
        execute,
    } = target;
    let mut client = GroupCoordinator::find(bootstrap, group, timeout).await?;
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
        Some(topics) => partitions_to_reset(bootstrap, topics).await?,
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
        let (_, response) = client
            .send(&request, |_, r| {
                r.topics
                    .iter()
                    .flat_map(|t| &t.partitions)
                    .map(|p| p.error_code)
                    .find(|code| *code != 0)
                    .unwrap_or(0)
            })
            .await?;
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
    timeout: Duration,
    group: &str,
    topics: &[TopicArg],
    out: &mut String,
) -> Result<(), AdminError> {
    // Each row: (topic, partition, or -1 for a topic that could not be described) → its error.
    let mut rows: BTreeMap<(String, i32), Option<String>> = BTreeMap::new();
    let mut asked: BTreeMap<String, Vec<i32>> = BTreeMap::new();
    for (topic, partitions) in topics {
        if let Some(partitions) = partitions {
            asked
                .entry(topic.clone())
                .or_default()
                .extend(partitions.iter().copied());
        }
    }
    // The partitions of the topics named without any: Metadata that may not create a topic,
    // as the admin client's describeTopics.
    let mut whole: Vec<String> = topics
        .iter()
        .filter(|(_, p)| p.is_none())
        .map(|(t, _)| t.clone())
        .collect();
    whole.sort();
    whole.dedup();
    if !whole.is_empty() {
        let mut client = AdminClient::connect(bootstrap).await?;
        let view = cluster_view(&mut client, Some(&whole), false).await?;
        for (topic, code) in &view.topic_errors {
            rows.insert((topic.clone(), -1), Some(exception_text(*code)));
        }
        for (topic, partition) in view.leaders.keys() {
            asked.entry(topic.clone()).or_default().push(*partition);
        }
    }
    for partitions in asked.values_mut() {
        partitions.sort_unstable();
        partitions.dedup();
    }
    let mut client = GroupCoordinator::find(bootstrap, group, timeout).await?;
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
    let (_, response) = client.send(&request, |_, r| r.error_code).await?;
    // A group-level error fails every partition; otherwise the first partition error is the
    // request's (the admin client's `all()`).
    let mut top_level = response.error_code;
    for (topic, partitions) in &asked {
        for partition in partitions {
            let code = if response.error_code != 0 {
                response.error_code
            } else {
                response
                    .topics
                    .iter()
                    .filter(|t| t.name.as_str() == topic)
                    .flat_map(|t| &t.partitions)
                    .find(|p| p.partition_index == *partition)
                    .map_or(0, |p| p.error_code)
            };
            if top_level == 0 {
                top_level = code;
            }
            rows.insert(
                (topic.clone(), *partition),
                (code != 0).then(|| group_exception(code)),
            );
        }
    }
    match top_level {
        0 => {
            let _ = writeln!(
                out,
                "Request succeeded for deleting offsets from group {group}."
            );
        }
        24 | 30 | 68 | 69 => {
            let _ = writeln!(
                out,
                "\nError: {}",
                group_error_message(top_level).unwrap_or_default()
            );
        }
        86 | 29 | 3 => {
            let _ = writeln!(
                out,
                "\nError: Encountered some partition-level error, see the follow-up details."
            );
        }
        code => {
            let _ = writeln!(
                out,
                "\nError: Encountered some unknown error: {}",
                errors_name(code)
            );
        }
    }
    // Kafka's rows: sorted by topic and partition as one string, the partition of a topic
    // that could not be described shown as "-".
    let mut sorted: Vec<(&(String, i32), &Option<String>)> = rows.iter().collect();
    sorted.sort_by_key(|((topic, partition), _)| format!("{topic}{partition}"));
    let t = rows.keys().map(|(t, _)| t.len()).max().unwrap_or(0).max(15);
    let _ = write!(
        out,
        "\n{:<t$} {:<10} {:<15}",
        "TOPIC", "PARTITION", "STATUS"
    );
    for ((topic, partition), error) in sorted {
        let partition = if *partition >= 0 {
            partition.to_string()
        } else {
            "-".to_owned()
        };
        let status = error
            .as_ref()
            .map_or_else(|| "Successful".to_owned(), |e| format!("Error: {e}"));
        let _ = write!(out, "\n{topic:<t$} {partition:<10} {status:<15}");
    }
    let _ = writeln!(out);
    if rows.values().any(Option::is_some) {
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
    fn topic_args_are_read_as_kafka_reads_them() {
        assert_eq!(parse_topic_arg("t"), Ok(("t".to_owned(), None)));
        assert_eq!(
            parse_topic_arg("t:0,2"),
            Ok(("t".to_owned(), Some(vec![0, 2])))
        );
        assert_eq!(
            parse_topic_arg("t:0,x"),
            Err("Invalid partition 'x' specified in topic arg 't:0,x''".to_owned())
        );
        for bad in ["t:", "t:0:1"] {
            assert_eq!(
                parse_topic_arg(bad),
                Err(format!(
                    "Invalid topic arg '{bad}', expected topic name and partitions"
                ))
            );
        }
    }

    #[test]
    fn errors_are_named_as_kafkas_errors_enum() {
        assert_eq!(errors_name(15), "COORDINATOR_NOT_AVAILABLE");
        assert_eq!(errors_name(17), "INVALID_TOPIC_EXCEPTION");
        assert_eq!(
            group_exception(3),
            "org.apache.kafka.common.errors.UnknownTopicOrPartitionException: This server does not host this topic-partition."
        );
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
