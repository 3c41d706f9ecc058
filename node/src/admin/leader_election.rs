//! `gregor leader-election`: kafka-leader-election.sh. Sends one ElectLeaders request (through
//! any broker, which forwards it to the active controller) and prints Kafka's lines:
//! `Successfully completed leader election (PREFERRED) for partitions foo-0, foo-1`,
//! `Valid replica already elected for partitions foo-2`, and one
//! `Error completing leader election (PREFERRED) for partition: foo-3: <exception>` per failure
//! (then exit 1 with `N replica(s) could not be elected`).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Args;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use serde_json::Value;

use super::{block_on, java_message, usage_exit, AdminError, CommandConfig};

const NOT_CONTROLLER: i16 = 41;
const ELECTION_NOT_NEEDED: i16 = 84;

/// How long the tool retries while the cluster elects a controller (Kafka's tool gives the
/// admin client 30 s).
const RETRY_FOR: Duration = Duration::from_secs(30);

/// `gregor leader-election`: kafka-leader-election.sh.
#[derive(Args, Debug)]
pub struct LeaderElectionArgs {
    /// A hostname and port for the broker to connect to, in the form host:port. Multiple comma
    /// separated URLs can be given. REQUIRED.
    #[arg(long)]
    pub bootstrap_server: Option<String>,
    /// Type of election to attempt: "preferred" or "unclean". REQUIRED.
    #[arg(long, value_parser = parse_election_type)]
    pub election_type: Option<ElectionType>,
    /// Name of topic for which to perform an election. Not allowed if --path-to-json-file or
    /// --all-topic-partitions is specified.
    #[arg(long)]
    pub topic: Option<String>,
    /// Partition id for which to perform an election. REQUIRED if --topic is specified.
    #[arg(long)]
    pub partition: Option<i32>,
    /// Perform election on all of the eligible topic partitions based on the type of election.
    /// Not allowed if --topic or --path-to-json-file is specified.
    #[arg(long)]
    pub all_topic_partitions: bool,
    /// The JSON file with the list of partitions for which leader elections should be performed:
    /// {"partitions": [{"topic": "foo", "partition": 1}, {"topic": "foobar", "partition": 2}]}.
    /// Not allowed if --all-topic-partitions or --topic flags are specified.
    #[arg(long)]
    pub path_to_json_file: Option<PathBuf>,
    /// Config properties file to pass to the admin client (`client.id`).
    #[arg(long)]
    pub command_config: Option<PathBuf>,
}

/// Kafka's `ElectionType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectionType {
    /// 0: the first replica leads.
    Preferred,
    /// 1: a leaderless partition may elect a replica outside its ISR.
    Unclean,
}

impl ElectionType {
    fn wire(self) -> i8 {
        match self {
            ElectionType::Preferred => 0,
            ElectionType::Unclean => 1,
        }
    }

    fn name(self) -> &'static str {
        match self {
            ElectionType::Preferred => "PREFERRED",
            ElectionType::Unclean => "UNCLEAN",
        }
    }
}

/// joptsimple's `EnumConverter`: the constant's name, any case.
fn parse_election_type(value: &str) -> Result<ElectionType, String> {
    match value.to_ascii_uppercase().as_str() {
        "PREFERRED" => Ok(ElectionType::Preferred),
        "UNCLEAN" => Ok(ElectionType::Unclean),
        _ => Err(format!(
            "Value [{value}] is not one of [PREFERRED, UNCLEAN]"
        )),
    }
}

/// Parses the `--path-to-json-file` contents with Kafka's messages for a bad file.
pub fn parse_election_json(text: &str) -> Result<Vec<(String, i32)>, String> {
    if text.trim().is_empty() {
        return Err("Replica election data is empty".to_owned());
    }
    let json: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let partitions = json
        .get("partitions")
        .ok_or_else(|| "Replica election data is missing \"partitions\" field".to_owned())?
        .as_array()
        .ok_or_else(|| "Expected JSON array for partitions".to_owned())?;
    let mut out = Vec::with_capacity(partitions.len());
    for entry in partitions {
        out.push(super::json_topic_partition(entry)?);
    }
    let mut seen = BTreeSet::new();
    let duplicates: BTreeSet<String> = out
        .iter()
        .filter(|(t, p)| !seen.insert((t.clone(), *p)))
        .map(|(t, p)| format!("{t}-{p}"))
        .collect();
    if !duplicates.is_empty() {
        return Err(format!(
            "Replica election data contains duplicate partitions: [{}]",
            duplicates.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    Ok(out)
}

/// The Java exception an ElectLeaders partition error becomes (`ApiError.exception()`), as
/// `Throwable.toString()` prints it.
fn exception(code: i16, message: Option<&str>) -> String {
    let class = match ResponseError::try_from_code(code) {
        Some(ResponseError::PreferredLeaderNotAvailable) => "PreferredLeaderNotAvailableException",
        Some(ResponseError::EligibleLeadersNotAvailable) => "EligibleLeadersNotAvailableException",
        Some(ResponseError::UnknownTopicOrPartition) => "UnknownTopicOrPartitionException",
        Some(ResponseError::InvalidRequest) => "InvalidRequestException",
        Some(ResponseError::NotController) => "NotControllerException",
        Some(ResponseError::ClusterAuthorizationFailed) => "ClusterAuthorizationException",
        Some(ResponseError::TopicAuthorizationFailed) => "TopicAuthorizationException",
        Some(ResponseError::RequestTimedOut) => "TimeoutException",
        _ => "KafkaException",
    };
    let text = match (code, message) {
        (_, Some(message)) if !message.is_empty() => message.to_owned(),
        (80, _) => "The preferred leader was not available.".to_owned(),
        (83, _) => "Eligible topic partition leaders are not available.".to_owned(),
        _ => java_message(code, None),
    };
    format!("org.apache.kafka.common.errors.{class}: {text}")
}

/// Runs `gregor leader-election`; `Err` is the message for stderr.
pub fn run_leader_election(args: LeaderElectionArgs) -> Result<(), String> {
    let (bootstrap, election) = match (&args.bootstrap_server, args.election_type) {
        (Some(bootstrap), Some(election)) => (bootstrap.clone(), election),
        (bootstrap, election) => {
            let missing: Vec<&str> = [
                bootstrap.is_none().then_some("bootstrap-server"),
                election.is_none().then_some("election-type"),
            ]
            .into_iter()
            .flatten()
            .collect();
            usage_exit::<LeaderElectionArgs>(
                "leader-election",
                &format!("Missing required option(s): {}", missing.join(", ")),
            )
        }
    };
    let chosen = [
        args.topic.is_some(),
        args.all_topic_partitions,
        args.path_to_json_file.is_some(),
    ]
    .into_iter()
    .filter(|given| *given)
    .count();
    if chosen != 1 {
        usage_exit::<LeaderElectionArgs>(
            "leader-election",
            "One and only one of the following options is required: topic, all-topic-partitions, path-to-json-file",
        );
    }
    let partitions: Option<Vec<(String, i32)>> = match (&args.topic, args.partition) {
        (Some(topic), Some(partition)) => Some(vec![(topic.clone(), partition)]),
        (Some(_), None) => usage_exit::<LeaderElectionArgs>(
            "leader-election",
            "Missing required option(s): partition",
        ),
        (None, Some(_)) => usage_exit::<LeaderElectionArgs>(
            "leader-election",
            "Option partition is only allowed if topic is used",
        ),
        (None, None) => match &args.path_to_json_file {
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                Some(parse_election_json(&text)?)
            }
            None => None,
        },
    };
    let config = CommandConfig::load(args.command_config.as_deref()).map_err(|e| e.to_string())?;
    let response = block_on(elect(&bootstrap, &config, election, partitions.as_deref()))?
        .map_err(|e| e.to_string())?;
    let mut out = String::new();
    let failed = report(&response, election, &mut out);
    out!("{out}");
    if failed > 0 {
        return Err(format!("{failed} replica(s) could not be elected"));
    }
    Ok(())
}

fn request(election: ElectionType, partitions: Option<&[(String, i32)]>) -> ElectLeadersRequest {
    let topics = partitions.map(|partitions| {
        let mut topics: Vec<TopicPartitions> = Vec::new();
        for (topic, partition) in partitions {
            match topics.iter_mut().find(|t| t.topic.as_str() == topic) {
                Some(entry) => entry.partitions.push(*partition),
                None => topics.push(
                    TopicPartitions::default()
                        .with_topic(TopicName(StrBytes::from_string(topic.clone())))
                        .with_partitions(vec![*partition]),
                ),
            }
        }
        topics
    });
    ElectLeadersRequest::default()
        .with_election_type(election.wire())
        .with_topic_partitions(topics)
        .with_timeout_ms(30_000)
}

/// Sends ElectLeaders, again while the answer is NOT_CONTROLLER (a controller being elected).
async fn elect(
    bootstrap: &str,
    config: &CommandConfig,
    election: ElectionType,
    partitions: Option<&[(String, i32)]>,
) -> Result<ElectLeadersResponse, AdminError> {
    let request = request(election, partitions);
    let deadline = Instant::now() + RETRY_FOR;
    loop {
        let mut client = config.connect(bootstrap).await?;
        let (version, response) = client.send(&request).await?;
        if answered_by_no_controller(&response) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        if version >= 1 && response.error_code != 0 {
            return Err(AdminError::Io(exception(response.error_code, None)));
        }
        return Ok(response);
    }
}

/// Whether the node asked was no controller: the whole answer, or every partition in it, is
/// NOT_CONTROLLER. Only a non-empty list of results counts: an election of every partition
/// leaves out those that need none, so its topics may all come back empty.
fn answered_by_no_controller(response: &ElectLeadersResponse) -> bool {
    let mut partitions = response
        .replica_election_results
        .iter()
        .flat_map(|t| &t.partition_result)
        .peekable();
    response.error_code == NOT_CONTROLLER
        || (partitions.peek().is_some() && partitions.all(|p| p.error_code == NOT_CONTROLLER))
}

/// Writes Kafka's lines for `response` to `out`; returns how many partitions failed.
fn report(response: &ElectLeadersResponse, election: ElectionType, out: &mut String) -> usize {
    let mut succeeded = BTreeSet::new();
    let mut noop = BTreeSet::new();
    let mut failed = Vec::new();
    for topic in &response.replica_election_results {
        for partition in &topic.partition_result {
            let key = (topic.topic.to_string(), partition.partition_id);
            match partition.error_code {
                0 => {
                    succeeded.insert(key);
                }
                ELECTION_NOT_NEEDED => {
                    noop.insert(key);
                }
                code => failed.push((key, exception(code, partition.error_message.as_deref()))),
            }
        }
    }
    let names = |set: &BTreeSet<(String, i32)>| {
        set.iter()
            .map(|(t, p)| format!("{t}-{p}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !succeeded.is_empty() {
        let _ = writeln!(
            out,
            "Successfully completed leader election ({}) for partitions {}",
            election.name(),
            names(&succeeded)
        );
    }
    if !noop.is_empty() {
        let _ = writeln!(
            out,
            "Valid replica already elected for partitions {}",
            names(&noop)
        );
    }
    failed.sort();
    for ((topic, partition), error) in &failed {
        let _ = writeln!(
            out,
            "Error completing leader election ({}) for partition: {topic}-{partition}: {error}",
            election.name()
        );
    }
    failed.len()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use kafka_protocol::messages::elect_leaders_response::{
        PartitionResult, ReplicaElectionResult,
    };

    #[test]
    fn only_not_controller_answers_are_asked_again() {
        let topic = |codes: &[i16]| {
            ReplicaElectionResult::default().with_partition_result(
                codes
                    .iter()
                    .map(|code| PartitionResult::default().with_error_code(*code))
                    .collect(),
            )
        };
        let answer = |topics: Vec<ReplicaElectionResult>| {
            ElectLeadersResponse::default().with_replica_election_results(topics)
        };
        // Every partition already led by its preferred replica: topics without results.
        assert!(!answered_by_no_controller(&answer(vec![
            topic(&[]),
            topic(&[])
        ])));
        assert!(!answered_by_no_controller(&answer(Vec::new())));
        assert!(answered_by_no_controller(&answer(vec![
            topic(&[NOT_CONTROLLER]),
            topic(&[NOT_CONTROLLER, NOT_CONTROLLER])
        ])));
        assert!(!answered_by_no_controller(&answer(vec![topic(&[
            NOT_CONTROLLER,
            0
        ])])));
        assert!(answered_by_no_controller(
            &ElectLeadersResponse::default().with_error_code(NOT_CONTROLLER)
        ));
    }

    #[test]
    fn json_file_errors_are_kafkas() {
        assert_eq!(
            parse_election_json(
                r#"{"partitions": [{"topic": "foo", "partition": 1}, {"topic": "bar", "partition": 2}]}"#
            ),
            Ok(vec![("foo".to_owned(), 1), ("bar".to_owned(), 2)])
        );
        assert_eq!(
            parse_election_json("  "),
            Err("Replica election data is empty".to_owned())
        );
        assert_eq!(
            parse_election_json("{}"),
            Err("Replica election data is missing \"partitions\" field".to_owned())
        );
        assert_eq!(
            parse_election_json(
                r#"{"partitions": [{"topic": "foo", "partition": 1}, {"topic": "foo", "partition": 1}]}"#
            ),
            Err("Replica election data contains duplicate partitions: [foo-1]".to_owned())
        );
    }

    #[test]
    fn report_prints_kafkas_lines() {
        let result = |id, code| {
            PartitionResult::default()
                .with_partition_id(id)
                .with_error_code(code)
        };
        let response = ElectLeadersResponse::default().with_replica_election_results(vec![
            ReplicaElectionResult::default()
                .with_topic(TopicName(StrBytes::from_static_str("foo")))
                .with_partition_result(vec![
                    result(1, 0),
                    result(0, 0),
                    result(2, ELECTION_NOT_NEEDED),
                    result(3, 80),
                ]),
        ]);
        let mut out = String::new();
        assert_eq!(report(&response, ElectionType::Preferred, &mut out), 1);
        assert_eq!(
            out,
            "Successfully completed leader election (PREFERRED) for partitions foo-0, foo-1\n\
             Valid replica already elected for partitions foo-2\n\
             Error completing leader election (PREFERRED) for partition: foo-3: \
             org.apache.kafka.common.errors.PreferredLeaderNotAvailableException: The preferred leader was not available.\n"
        );
        assert_eq!(parse_election_type("unclean"), Ok(ElectionType::Unclean));
        assert!(parse_election_type("other").is_err());
    }
}
