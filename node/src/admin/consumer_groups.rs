//! `gregor consumer-groups`: kafka-consumer-groups.sh (list, describe with LAG, reset and delete
//! offsets, delete groups) with its output, for classic and KIP-848 consumer groups (described
//! with ConsumerGroupDescribe when DescribeGroups does not know them, as the Java admin does).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use bytes::Buf;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::consumer_group_describe_response::Assignment;
use kafka_protocol::messages::delete_groups_request::DeleteGroupsRequest;
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::list_groups_response::ListedGroup;
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
    /// `--describe --group G` with the view; `verbose` adds Kafka 4's columns.
    Describe {
        group: String,
        view: View,
        verbose: bool,
    },
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
    Members,
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

/// The groups the broker at `address` coordinates, as ListGroups `request` filters them. A
/// broker loading a group partition answers COORDINATOR_LOAD_IN_PROGRESS (or, starting,
/// COORDINATOR_NOT_AVAILABLE), which the Java admin client's `listGroups` retries until its
/// timeout: asked again until `timeout` passes.
pub(crate) async fn list_groups_of(
    address: &str,
    request: &ListGroupsRequest,
    timeout: Duration,
) -> Result<Vec<ListedGroup>, AdminError> {
    let mut client = AdminClient::connect(address).await?;
    let deadline = Instant::now() + timeout;
    let response = loop {
        let (_, response) = client.send(request).await?;
        if !retriable(response.error_code) || Instant::now() + RETRY_BACKOFF >= deadline {
            break response;
        }
        tokio::time::sleep(RETRY_BACKOFF).await;
    };
    check(response.error_code, None)?;
    Ok(response.groups)
}

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
    Ok(locate(bootstrap, group, deadline).await?.0)
}

/// [`coordinator`], with the coordinator as `--describe --state` prints it: `host:port  (id)`.
async fn locate(
    bootstrap: &str,
    group: &str,
    deadline: Instant,
) -> Result<(AdminClient, String), AdminError> {
    let mut client = AdminClient::connect(bootstrap).await?;
    let version = client.version_of::<FindCoordinatorRequest>().unwrap_or(0);
    let request = if version >= 4 {
        FindCoordinatorRequest::default().with_coordinator_keys(vec![text(group)])
    } else {
        FindCoordinatorRequest::default().with_key(text(group))
    };
    loop {
        let (version, response) = client.send(&request).await?;
        let (code, message, host, port, node) = if version >= 4 {
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
                c.node_id.0,
            )
        } else {
            (
                response.error_code,
                response.error_message.clone(),
                response.host.to_string(),
                response.port,
                response.node_id.0,
            )
        };
        if code == 0 {
            let client = AdminClient::connect(&format!("{host}:{port}")).await?;
            return Ok((client, format!("{host}:{port}  ({node})")));
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
    /// `host:port  (id)` of the coordinator `client` is connected to.
    node: String,
}

impl GroupCoordinator {
    async fn find(bootstrap: &str, group: &str, timeout: Duration) -> Result<Self, AdminError> {
        let (client, node) = locate(bootstrap, group, Instant::now() + timeout).await?;
        Ok(GroupCoordinator {
            bootstrap: bootstrap.to_owned(),
            group: group.to_owned(),
            timeout,
            client,
            node,
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
                (self.client, self.node) = locate(&self.bootstrap, &self.group, deadline).await?;
            }
        }
    }
}

/// A group as the describe views print it, from DescribeGroups or ConsumerGroupDescribe.
struct Described {
    state: String,
    /// The classic protocol, or the consumer group's server assignor.
    strategy: String,
    /// The group epoch and target assignment epoch of a consumer group (none for classic).
    epochs: Option<(i32, i32)>,
    members: Vec<DescribedMember>,
}

struct DescribedMember {
    id: String,
    /// The static member's `group.instance.id`.
    instance_id: Option<String>,
    host: String,
    client_id: String,
    assigned: Vec<(String, i32)>,
    /// A consumer group member's epoch and target assignment (none for classic).
    target: Option<(i32, Vec<(String, i32)>)>,
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
        epochs: None,
        members: described
            .members
            .iter()
            .map(|m| DescribedMember {
                id: m.member_id.to_string(),
                instance_id: m.group_instance_id.as_ref().map(ToString::to_string),
                host: m.client_host.to_string(),
                client_id: m.client_id.to_string(),
                assigned: assigned_partitions(&m.member_assignment),
                target: None,
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
        epochs: Some((described.group_epoch, described.assignment_epoch)),
        members: described
            .members
            .iter()
            .map(|m| DescribedMember {
                id: m.member_id.to_string(),
                instance_id: m.instance_id.as_ref().map(ToString::to_string),
                host: m.client_host.to_string(),
                client_id: m.client_id.to_string(),
                assigned: topic_partitions(&m.assignment),
                target: Some((m.member_epoch, topic_partitions(&m.target_assignment))),
            })
            .collect(),
    }))
}

/// The topic-partitions of a ConsumerGroupDescribe assignment.
fn topic_partitions(assignment: &Assignment) -> Vec<(String, i32)> {
    assignment
        .topic_partitions
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.topic_name.0.to_string(), *p))
        })
        .collect()
}

/// The group's committed offsets: (topic, partition) → (offset, leader epoch, −1 if none).
async fn committed(
    client: &mut GroupCoordinator,
    group: &str,
) -> Result<BTreeMap<(String, i32), (i64, i32)>, AdminError> {
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
                        out.insert(
                            (t.name.to_string(), p.partition_index),
                            (p.committed_offset, p.committed_leader_epoch),
                        );
                    }
                }
            }
        }
    } else {
        check(response.error_code, None)?;
        for t in response.topics {
            for p in t.partitions {
                if p.committed_offset >= 0 {
                    out.insert(
                        (t.name.to_string(), p.partition_index),
                        (p.committed_offset, p.committed_leader_epoch),
                    );
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

/// Runs `action` against `bootstrap`, writing what kafka-consumer-groups.sh prints to stdout to
/// `out` and its notices for stderr to `err`; `timeout` bounds the retries of each request, as
/// `--timeout` bounds each admin call.
pub async fn run(
    bootstrap: &str,
    timeout: Duration,
    action: &GroupsAction,
    out: &mut String,
    err: &mut String,
) -> Result<(), String> {
    let result = match action {
        GroupsAction::List { states, types } => {
            list(bootstrap, timeout, states.as_ref(), types.as_ref(), out).await
        }
        GroupsAction::Describe {
            group,
            view,
            verbose,
        } => describe(bootstrap, timeout, group, *view, *verbose, out, err).await,
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
        let address = format!("{}:{}", broker.host, broker.port);
        for g in list_groups_of(&address, &request, timeout).await? {
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
    verbose: bool,
    out: &mut String,
    err: &mut String,
) -> Result<(), AdminError> {
    let mut client = GroupCoordinator::find(bootstrap, group, timeout).await?;
    let described = describe_group(&mut client, group).await?;
    if described.state == "Dead" {
        return Err(AdminError::Io(format!(
            "Consumer group '{group}' does not exist."
        )));
    }
    match view {
        View::State => {
            state_notice(group, &described.state, err);
            print_state(group, &client.node, &described, verbose, out);
        }
        View::Members => {
            state_notice(group, &described.state, err);
            print_members(group, &described, verbose, out);
        }
        View::Offsets => {
            let rows = offset_rows(bootstrap, &mut client, group, &described).await?;
            state_notice(group, &described.state, err);
            // Kafka prints no table when there is not one row.
            if !rows.is_empty() {
                print_offsets(group, &rows, verbose, out);
            }
        }
    }
    Ok(())
}

/// What kafka-consumer-groups.sh writes to stderr before a group's table in these states.
fn state_notice(group: &str, state: &str, err: &mut String) {
    match state {
        "Empty" => {
            let _ = writeln!(err, "\nConsumer group '{group}' has no active members.");
        }
        "PreparingRebalance" | "CompletingRebalance" | "Assigning" | "Reconciling" => {
            let _ = writeln!(err, "\nWarning: Consumer group '{group}' is rebalancing.");
        }
        _ => {}
    }
}

/// The widest of `values` and `min`, as Kafka sizes a column to its longest value.
fn width<'a>(min: usize, values: impl Iterator<Item = &'a str>) -> usize {
    values.map(str::len).max().unwrap_or(0).max(min)
}

fn print_state(
    group: &str,
    coordinator: &str,
    described: &Described,
    verbose: bool,
    out: &mut String,
) {
    let g = group.len().max(15);
    let c = coordinator.len().max(25);
    let strategy = if described.strategy.is_empty() {
        "-"
    } else {
        described.strategy.as_str()
    };
    let members = described.members.len().to_string();
    let mut lines = vec![vec![
        "GROUP",
        "COORDINATOR (ID)",
        "ASSIGNMENT-STRATEGY",
        "STATE",
    ]];
    let epochs = described
        .epochs
        .map(|(g, t)| (g.to_string(), t.to_string()));
    lines.push(vec![group, coordinator, strategy, &described.state]);
    if verbose {
        lines[0].extend(["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]);
        let (group_epoch, target_epoch) = epochs
            .as_ref()
            .map_or(("-", "-"), |(g, t)| (g.as_str(), t.as_str()));
        lines[1].extend([group_epoch, target_epoch]);
    }
    lines[0].push("#MEMBERS");
    lines[1].push(&members);
    for line in &lines {
        let _ = write!(
            out,
            "\n{:<g$} {:<c$} {:<20} {:<20}",
            line[0], line[1], line[2], line[3]
        );
        if verbose {
            let _ = write!(out, " {:<15} {:<25}", line[4], line[5]);
        }
        let _ = write!(out, " {}", line[line.len() - 1]);
    }
    let _ = writeln!(out);
}

/// Kafka's text of an assignment: `topic:0,1;other:2`, topics in order, "-" for none.
fn assignment_text(assignment: &[(String, i32)]) -> String {
    if assignment.is_empty() {
        return "-".to_owned();
    }
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (t, p) in assignment {
        by_topic.entry(t).or_default().push(*p);
    }
    let mut topics: Vec<String> = by_topic
        .into_iter()
        .map(|(t, mut ps)| {
            ps.sort_unstable();
            let ps: Vec<String> = ps.iter().map(i32::to_string).collect();
            format!("{t}:{}", ps.join(","))
        })
        .collect();
    // Kafka sorts the topics' texts, where "a:" comes after "a-b:".
    topics.sort();
    topics.join(";")
}

fn print_members(group: &str, described: &Described, verbose: bool, out: &mut String) {
    let members = &described.members;
    let instance = |m: &DescribedMember| m.instance_id.clone().unwrap_or_default();
    let with_instance = members.iter().any(|m| !instance(m).is_empty());
    let g = if members.is_empty() {
        15
    } else {
        group.len().max(15)
    };
    let c = width(15, members.iter().map(|m| m.id.as_str()));
    let i = members
        .iter()
        .map(|m| instance(m).len())
        .max()
        .unwrap_or(0)
        .max(17);
    let h = width(15, members.iter().map(|m| m.host.as_str()));
    let l = width(15, members.iter().map(|m| m.client_id.as_str()));
    // Per member: epoch, assignment, target epoch, target assignment ("-" for a classic group).
    let target_epoch = described
        .epochs
        .map_or("-".to_owned(), |(_, t)| t.to_string());
    let detail: Vec<[String; 4]> = members
        .iter()
        .map(|m| {
            let (epoch, target) = m
                .target
                .as_ref()
                .map_or(("-".to_owned(), "-".to_owned()), |(e, t)| {
                    (e.to_string(), assignment_text(t))
                });
            [
                epoch,
                assignment_text(&m.assigned),
                target_epoch.clone(),
                target,
            ]
        })
        .collect();
    let ca = width(20, detail.iter().map(|d| d[1].as_str()));
    let ta = width(20, detail.iter().map(|d| d[3].as_str()));
    out.push('\n');
    let mut line = |cells: [&str; 6], detail: [&str; 4]| {
        let _ = write!(out, "{:<g$} {:<c$} ", cells[0], cells[1]);
        if with_instance {
            let _ = write!(out, "{:<i$} ", cells[2]);
        }
        let _ = write!(out, "{:<h$} {:<l$} {:<15} ", cells[3], cells[4], cells[5]);
        if verbose {
            let _ = write!(
                out,
                "{:<15} {:<ca$} {:<15} {:<ta$}",
                detail[0], detail[1], detail[2], detail[3]
            );
        }
        let _ = writeln!(out);
    };
    line(
        [
            "GROUP",
            "CONSUMER-ID",
            "GROUP-INSTANCE-ID",
            "HOST",
            "CLIENT-ID",
            "#PARTITIONS",
        ],
        [
            "CURRENT-EPOCH",
            "CURRENT-ASSIGNMENT",
            "TARGET-EPOCH",
            "TARGET-ASSIGNMENT",
        ],
    );
    for (m, d) in members.iter().zip(&detail) {
        let count = m.assigned.len().to_string();
        line(
            [group, &m.id, &instance(m), &m.host, &m.client_id, &count],
            [&d[0], &d[1], &d[2], &d[3]],
        );
    }
}

/// One row of the offsets view.
struct OffsetRow<'a> {
    topic: String,
    partition: i32,
    /// The committed offset and its leader epoch (−1 if none).
    committed: Option<(i64, i32)>,
    end: Option<i64>,
    member: Option<&'a DescribedMember>,
}

/// Kafka's rows: the partitions of each member with some, members with more partitions first,
/// then the committed partitions nobody is assigned; each block by topic and partition.
async fn offset_rows<'a>(
    bootstrap: &str,
    client: &mut GroupCoordinator,
    group: &str,
    described: &'a Described,
) -> Result<Vec<OffsetRow<'a>>, AdminError> {
    let offsets = committed(client, group).await?;
    let mut members: Vec<&DescribedMember> = described
        .members
        .iter()
        .filter(|m| !m.assigned.is_empty())
        .collect();
    // A stable sort: members with as many partitions keep the coordinator's order.
    members.sort_by_key(|m| std::cmp::Reverse(m.assigned.len()));
    let mut blocks = Vec::new();
    for m in members {
        let mut partitions = m.assigned.clone();
        partitions.sort();
        partitions.dedup();
        blocks.push((Some(m), partitions));
    }
    let unassigned: Vec<(String, i32)> = offsets
        .keys()
        .filter(|tp| !blocks.iter().any(|(_, ps)| ps.contains(tp)))
        .cloned()
        .collect();
    if !unassigned.is_empty() {
        blocks.push((None, unassigned));
    }
    let partitions: Vec<(String, i32)> = blocks.iter().flat_map(|(_, ps)| ps.clone()).collect();
    let ends = log_offsets(bootstrap, &partitions, -1).await?;
    Ok(blocks
        .into_iter()
        .flat_map(|(member, partitions)| partitions.into_iter().map(move |tp| (member, tp)))
        .map(|(member, tp)| OffsetRow {
            committed: offsets.get(&tp).copied(),
            end: ends.get(&tp).copied(),
            topic: tp.0,
            partition: tp.1,
            member,
        })
        .collect())
}

/// A member's value in an offsets row, "-" in a row of no member.
fn member_field<'a>(row: &OffsetRow<'a>, f: fn(&'a DescribedMember) -> &'a str) -> &'a str {
    row.member.map_or("-", f)
}

fn print_offsets(group: &str, rows: &[OffsetRow<'_>], verbose: bool, out: &mut String) {
    let g = group.len().max(15);
    let t = width(15, rows.iter().map(|r| r.topic.as_str()));
    let c = width(15, rows.iter().map(|r| member_field(r, |m| &m.id)));
    let h = width(15, rows.iter().map(|r| member_field(r, |m| &m.host)));
    let mut line = |cells: [&str; 10]| {
        let _ = write!(out, "\n{:<g$} {:<t$} {:<10} ", cells[0], cells[1], cells[2]);
        if verbose {
            let _ = write!(out, "{:<15} ", cells[3]);
        }
        let _ = write!(
            out,
            "{:<15} {:<15} {:<15} {:<c$} {:<h$} {}",
            cells[4], cells[5], cells[6], cells[7], cells[8], cells[9]
        );
    };
    line([
        "GROUP",
        "TOPIC",
        "PARTITION",
        "LEADER-EPOCH",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]);
    for row in rows {
        let offset = row.committed.map(|(offset, _)| offset);
        let epoch = row.committed.map(|(_, epoch)| epoch).filter(|e| *e >= 0);
        // Kafka's lag is the plain difference, negative when the commit is past the log end.
        let lag = offset.zip(row.end).map(|(offset, end)| end - offset);
        line([
            group,
            &row.topic,
            &row.partition.to_string(),
            &dash_or(epoch),
            &dash_or(offset),
            &dash_or(row.end),
            &dash_or(lag),
            member_field(row, |m| &m.id),
            member_field(row, |m| &m.host),
            member_field(row, |m| &m.client_id),
        ]);
    }
    let _ = writeln!(out);
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
        // Kafka's ConsumerGroupCommand prints the refusal on stdout, then the group's empty
        // table, and succeeds.
        let _ = writeln!(
            out,
            "\nError: Assignments can only be reset if the group '{group}' is inactive, but the current state is {state}."
        );
        write_reset_table(group, &[], out);
        return Ok(());
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
            ResetSpec::ShiftBy(n) => current
                .get(tp)
                .map_or(low, |(offset, _)| *offset)
                .saturating_add(n),
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
    write_reset_table(group, &targets, out);
    Ok(())
}

/// Kafka's `printOffsetsToReset` for one group: columns as wide as the longest name, at
/// least 15.
fn write_reset_table(group: &str, targets: &[((String, i32), i64)], out: &mut String) {
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
    for ((topic, partition), offset) in targets {
        let _ = writeln!(out, "{group:<g$} {topic:<t$} {partition:<10} {offset}");
    }
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
    fn reset_tables_are_as_wide_as_their_longest_names() {
        let mut out = String::new();
        write_reset_table("cg1", &[], &mut out);
        assert_eq!(
            out,
            "\nGROUP           TOPIC           PARTITION  NEW-OFFSET\n"
        );
        let mut out = String::new();
        let targets = [(("a-rather-long-topic".to_owned(), 2), 17)];
        write_reset_table("cg1", &targets, &mut out);
        assert_eq!(
            out,
            "\nGROUP           TOPIC               PARTITION  NEW-OFFSET\n\
             cg1             a-rather-long-topic 2          17\n"
        );
    }

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

    fn member(id: &str, instance: Option<&str>, assigned: &[(&str, i32)]) -> DescribedMember {
        DescribedMember {
            id: id.to_owned(),
            instance_id: instance.map(str::to_owned),
            host: "/127.0.0.1".to_owned(),
            client_id: "client".to_owned(),
            assigned: assigned
                .iter()
                .map(|(t, p)| ((*t).to_owned(), *p))
                .collect(),
            target: None,
        }
    }

    #[test]
    fn assignments_are_written_as_kafka_4_writes_them() {
        let tps = |v: &[(&str, i32)]| -> Vec<(String, i32)> {
            v.iter().map(|(t, p)| ((*t).to_owned(), *p)).collect()
        };
        assert_eq!(assignment_text(&[]), "-");
        assert_eq!(
            assignment_text(&tps(&[("b", 10), ("a", 2), ("b", 9), ("a-b", 0)])),
            "a-b:0;a:2;b:9,10"
        );
    }

    #[test]
    fn members_of_a_classic_group_show_the_static_members_instance_id() {
        let described = Described {
            state: "Stable".to_owned(),
            strategy: "range".to_owned(),
            epochs: None,
            members: vec![
                member("m-1", Some("static-1"), &[("t", 1), ("t", 0)]),
                member("m-2", None, &[]),
            ],
        };
        let mut out = String::new();
        print_members("g", &described, false, &mut out);
        assert_eq!(
            out,
            "\nGROUP           CONSUMER-ID     GROUP-INSTANCE-ID HOST            CLIENT-ID       #PARTITIONS     \n\
             g               m-1             static-1          /127.0.0.1      client          2               \n\
             g               m-2                               /127.0.0.1      client          0               \n"
        );
        let mut out = String::new();
        print_members("g", &described, true, &mut out);
        assert_eq!(
            out.lines().nth(2),
            Some("g               m-1             static-1          /127.0.0.1      client          2               -               t:0,1                -               -                   ")
        );
    }

    #[test]
    fn members_of_a_consumer_group_show_epochs_and_target_assignments() {
        let mut m = member("abc", None, &[("t", 0)]);
        m.target = Some((7, vec![("t".to_owned(), 0), ("t".to_owned(), 1)]));
        let described = Described {
            state: "Reconciling".to_owned(),
            strategy: "uniform".to_owned(),
            epochs: Some((8, 8)),
            members: vec![m],
        };
        let mut out = String::new();
        print_members("group-with-a-long-name", &described, true, &mut out);
        assert_eq!(
            out,
            "\nGROUP                  CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     CURRENT-EPOCH   CURRENT-ASSIGNMENT   TARGET-EPOCH    TARGET-ASSIGNMENT   \n\
             group-with-a-long-name abc             /127.0.0.1      client          1               7               t:0                  8               t:0,1               \n"
        );
        // No member: the header alone, 15 wide for the group.
        let mut out = String::new();
        let empty = Described {
            members: Vec::new(),
            ..described
        };
        print_members("group-with-a-long-name", &empty, false, &mut out);
        assert_eq!(
            out,
            "\nGROUP           CONSUMER-ID     HOST            CLIENT-ID       #PARTITIONS     \n"
        );
    }

    #[test]
    fn offsets_show_negative_lag_and_unknown_values_as_kafka() {
        let big = member("big", None, &[("t", 1), ("t", 0)]);
        let small = member("small", None, &[("a", 0)]);
        fn row<'a>(
            member: Option<&'a DescribedMember>,
            (topic, partition): (&str, i32),
            committed: Option<(i64, i32)>,
            end: Option<i64>,
        ) -> OffsetRow<'a> {
            OffsetRow {
                topic: topic.to_owned(),
                partition,
                committed,
                end,
                member,
            }
        }
        let rows = vec![
            row(Some(&big), ("t", 0), Some((5, 0)), Some(10)),
            row(Some(&big), ("t", 1), None, Some(3)),
            row(Some(&small), ("a", 0), Some((4, -1)), None),
            row(None, ("u", 0), Some((12, 3)), Some(9)),
        ];
        let mut out = String::new();
        print_offsets("g", &rows, false, &mut out);
        assert_eq!(
            out,
            "\nGROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID\
             \ng               t               0          5               10              5               big             /127.0.0.1      client\
             \ng               t               1          -               3               -               big             /127.0.0.1      client\
             \ng               a               0          4               -               -               small           /127.0.0.1      client\
             \ng               u               0          12              9               -3              -               -               -\n"
        );
        let mut out = String::new();
        print_offsets("g", &rows[3..], true, &mut out);
        assert_eq!(
            out,
            "\nGROUP           TOPIC           PARTITION  LEADER-EPOCH    CURRENT-OFFSET  LOG-END-OFFSET  LAG             CONSUMER-ID     HOST            CLIENT-ID\
             \ng               u               0          3               12              9               -3              -               -               -\n"
        );
    }

    #[test]
    fn state_shows_a_dash_for_no_strategy_and_epochs_when_verbose() {
        let described = Described {
            state: "Empty".to_owned(),
            strategy: String::new(),
            epochs: None,
            members: Vec::new(),
        };
        let mut out = String::new();
        print_state("g", "localhost:9092  (1)", &described, false, &mut out);
        assert_eq!(
            out,
            "\nGROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                #MEMBERS\
             \ng               localhost:9092  (1)       -                    Empty                0\n"
        );
        let consumer = Described {
            state: "Stable".to_owned(),
            strategy: "uniform".to_owned(),
            epochs: Some((4, 3)),
            members: vec![member("m", None, &[])],
        };
        let mut out = String::new();
        print_state("g", "localhost:9092  (1)", &consumer, true, &mut out);
        assert_eq!(
            out,
            "\nGROUP           COORDINATOR (ID)          ASSIGNMENT-STRATEGY  STATE                GROUP-EPOCH     TARGET-ASSIGNMENT-EPOCH   #MEMBERS\
             \ng               localhost:9092  (1)       uniform              Stable               4               3                         1\n"
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
