//! `gregor metadata-quorum`: kafka-metadata-quorum.sh (describe --status | --replication,
//! add-controller, remove-controller), with KAFKA-18775's by-id forms.
//!
//! Voter changes and DescribeQuorum must reach the quorum leader. Through `--bootstrap-server`
//! the broker forwards them; through `--bootstrap-controller` the tool asks DescribeCluster
//! (KIP-919) which controller is active and sends the request there.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::add_raft_voter_request::Listener;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::describe_quorum_response::ReplicaState;
use kafka_protocol::messages::{
    AddRaftVoterRequest, DescribeClusterRequest, DescribeQuorumRequest, DescribeQuorumResponse,
    RemoveRaftVoterRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::{block_on, check, usage_exit, AdminClient, AdminError};
use crate::network::raft_voter_versions::{AddRaftVoterRequestV, RemoveRaftVoterRequestV};
use crate::storage::{uuid_from_kafka_string, uuid_to_kafka_string};

/// How long a voter change may take on the leader (Kafka's admin default request timeout).
const VOTER_CHANGE_TIMEOUT_MS: i32 = 30_000;

/// `gregor metadata-quorum`.
#[derive(Args, Debug)]
pub struct MetadataQuorumArgs {
    /// Where to connect.
    #[command(flatten)]
    pub bootstrap: super::Bootstrap,
    /// Property file containing configs to be passed to Admin Client. For add-controller, the
    /// file is used to specify the controller properties as well unless --controller-id is
    /// provided.
    #[arg(long, value_name = "FILE")]
    pub command_config: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: QuorumCommand,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum QuorumCommand {
    /// Describe the metadata quorum info
    Describe {
        /// A short summary of the quorum status and the other provides detailed information
        /// about the status of replication.
        #[arg(long)]
        status: bool,
        /// Detailed information about the status of replication
        #[arg(long)]
        replication: bool,
        /// Human-readable output
        #[arg(long)]
        human_readable: bool,
    },
    /// Add a controller to the KRaft controller cluster
    AddController {
        /// The id of the controller to add (its directory id and endpoints are taken from the
        /// quorum).
        #[arg(long, short = 'i')]
        controller_id: Option<i32>,
        /// True if we should print what would be done, but not do it.
        #[arg(long)]
        dry_run: bool,
    },
    /// Remove a controller from the KRaft controller cluster
    RemoveController {
        /// The id of the controller to remove.
        #[arg(long, short = 'i', allow_negative_numbers = true)]
        controller_id: i32,
        /// The directory ID of the controller to remove (a Kafka UUID may start with '-').
        #[arg(long, short = 'd', allow_hyphen_values = true)]
        controller_directory_id: Option<String>,
        /// True if we should print what would be done, but not do it.
        #[arg(long)]
        dry_run: bool,
    },
}

/// A wrong command line: the message and the usage, exit 1.
fn usage(message: &str) -> ! {
    usage_exit::<MetadataQuorumArgs>("metadata-quorum", message)
}

/// Runs `gregor metadata-quorum`; `Err` is the message for stderr (exit 1).
pub fn run_metadata_quorum(args: MetadataQuorumArgs) -> Result<(), String> {
    block_on(run(args))?
}

async fn run(args: MetadataQuorumArgs) -> Result<(), String> {
    if let Some(file) = &args.command_config {
        if !file.exists() {
            return Err(format!(
                "Properties file {} does not exists!",
                file.display()
            ));
        }
    }
    match &args.command {
        QuorumCommand::Describe {
            status,
            replication,
            human_readable,
        } => {
            if *status && *replication {
                usage("Only one of --status or --replication should be specified with describe sub-command");
            }
            if *status && *human_readable {
                usage("The option --human-readable is only supported along with --replication");
            }
            if !*status && !*replication {
                usage(
                    "One of --status or --replication must be specified with describe sub-command",
                );
            }
            let mut client = connect_leader(&args).await?;
            let quorum = describe(&mut client).await?;
            if *status {
                let cluster_id = cluster_id(&mut client).await?;
                for line in status_lines(&cluster_id, &quorum)? {
                    outln!("{line}");
                }
                outln!("{}", digest_line(&cluster_id, &quorum).await);
            } else {
                out!("{}", replication_table(&quorum, *human_readable, now_ms())?);
            }
            Ok(())
        }
        QuorumCommand::AddController {
            controller_id,
            dry_run,
        } => match (controller_id, &args.command_config) {
            (Some(id), _) => add_controller(&args, *id, *dry_run).await,
            (None, Some(file)) => add_controller_from_properties(&args, file, *dry_run).await,
            (None, None) => usage(
                "You must use --command-config or --controller-id option to add a controller.",
            ),
        },
        QuorumCommand::RemoveController {
            controller_id,
            controller_directory_id,
            dry_run,
        } => {
            if *controller_id < 0 {
                usage(&format!(
                    "Invalid negative --controller-id: {controller_id}"
                ));
            }
            let directory = match controller_directory_id {
                None => None,
                Some(text) => Some(uuid_from_kafka_string(text).ok_or_else(|| {
                    format!(
                        "Failed to parse --controller-directory-id: Invalid UUID string: {text}"
                    )
                })?),
            };
            remove_controller(&args, *controller_id, directory, *dry_run).await
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Connects to the bootstrap address; with `--bootstrap-controller`, then to the active
/// controller named by DescribeCluster. Both connections use `--command-config`'s client id and
/// SASL PLAIN credentials, so an authenticated controller listener can be described.
async fn connect_leader(args: &MetadataQuorumArgs) -> Result<AdminClient, String> {
    let config =
        super::CommandConfig::load(args.command_config.as_deref()).map_err(|e| e.to_string())?;
    if let Some(servers) = &args.bootstrap.bootstrap_server {
        return config.connect(servers).await.map_err(|e| e.to_string());
    }
    let servers = args
        .bootstrap
        .bootstrap_controller
        .clone()
        .unwrap_or_default();
    let client = config.connect(&servers).await.map_err(|e| e.to_string())?;
    super::to_active_controller(client, &config).await
}

fn describe_request() -> DescribeQuorumRequest {
    DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])])
}

async fn describe(client: &mut AdminClient) -> Result<DescribeQuorumResponse, String> {
    let (_, response) = client
        .send(&describe_request())
        .await
        .map_err(|e| e.to_string())?;
    check(response.error_code, response.error_message.as_ref()).map_err(|e| e.to_string())?;
    let partition = response
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or("The DescribeQuorum response has no __cluster_metadata-0 partition")?;
    check(partition.error_code, partition.error_message.as_ref()).map_err(|e| e.to_string())?;
    Ok(response)
}

/// DescribeCluster `endpoint_type` values (KIP-919).
const BROKER_ENDPOINTS: i8 = 1;
const CONTROLLER_ENDPOINTS: i8 = 2;
/// MISMATCHED_ENDPOINT_TYPE: a controller listener answers only for controller endpoints.
const MISMATCHED_ENDPOINT_TYPE: i16 = 114;

async fn cluster_id(client: &mut AdminClient) -> Result<String, String> {
    // A broker describes brokers, a controller (`--bootstrap-controller`) controllers; ask for
    // brokers first and follow the server's answer, as Kafka's admin client does.
    for endpoint_type in [BROKER_ENDPOINTS, CONTROLLER_ENDPOINTS] {
        let request = DescribeClusterRequest::default().with_endpoint_type(endpoint_type);
        let (_, cluster) = client.send(&request).await.map_err(|e| e.to_string())?;
        if cluster.error_code == MISMATCHED_ENDPOINT_TYPE {
            continue;
        }
        check(cluster.error_code, cluster.error_message.as_ref()).map_err(|e| e.to_string())?;
        return Ok(cluster.cluster_id.to_string());
    }
    Err("the server answers DescribeCluster for neither brokers nor controllers".to_owned())
}

fn partition(
    quorum: &DescribeQuorumResponse,
) -> Result<&kafka_protocol::messages::describe_quorum_response::PartitionData, String> {
    quorum
        .topics
        .first()
        .and_then(|t| t.partitions.first())
        .ok_or_else(|| "The DescribeQuorum response has no partition".to_owned())
}

fn endpoints_of(quorum: &DescribeQuorumResponse, id: i32) -> Vec<String> {
    quorum
        .nodes
        .iter()
        .find(|n| n.node_id.0 == id)
        .map(|n| {
            n.listeners
                .iter()
                .map(|l| {
                    let host = l.host.to_string();
                    if host.contains(':') {
                        format!("{}://[{host}]:{}", l.name, l.port)
                    } else {
                        format!("{}://{host}:{}", l.name, l.port)
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

fn replica_list(quorum: &DescribeQuorumResponse, replicas: &[ReplicaState]) -> String {
    let items: Vec<String> = replicas
        .iter()
        .map(|r| {
            let directory = if r.replica_directory_id.is_nil() {
                "null".to_owned()
            } else {
                format!("\"{}\"", uuid_to_kafka_string(r.replica_directory_id))
            };
            let endpoints = endpoints_of(quorum, r.replica_id.0);
            let endpoints = if endpoints.is_empty() {
                String::new()
            } else {
                let quoted: Vec<String> = endpoints.iter().map(|e| format!("\"{e}\"")).collect();
                format!(", \"endpoints\": [{}]", quoted.join(", "))
            };
            format!(
                "{{\"id\": {}, \"directoryId\": {directory}{endpoints}}}",
                r.replica_id.0
            )
        })
        .collect();
    format!("[{}]", items.join(", "))
}

/// Gregor's extra `describe --status` line: the image digest of the active controller, fetched
/// from its controller listener (private RPCs are served nowhere else) with the private
/// ImageDigest RPC after a hello naming this cluster; any node of the cluster may read it, so
/// the tool introduces itself as node -1. Kafka's lines above stay as Kafka prints them.
async fn digest_line(cluster_id: &str, quorum: &DescribeQuorumResponse) -> String {
    let leader = partition(quorum).map(|p| p.leader_id.0).ok();
    let addr = leader.and_then(|leader| {
        endpoints_of(quorum, leader)
            .first()
            .and_then(|e| e.split_once("://").map(|(_, a)| a.to_owned()))
    });
    let Some(addr) = addr else {
        return "MetadataImageDigest:    unavailable (the leader's controller endpoint is unknown)"
            .to_owned();
    };
    let hello = crate::quorum::rpc::PeerHello {
        cluster_id: cluster_id.to_owned(),
        node_id: -1,
        directory_id: uuid::Uuid::nil(),
        raft_link: false,
    };
    let mut channel = crate::quorum::transport::Channel::new(
        addr.clone(),
        &hello,
        crate::network::peer::PeerConnector::plaintext(),
    );
    match channel
        .call(
            &crate::quorum::rpc::QuorumRequest::ImageDigest,
            std::time::Duration::from_secs(10),
        )
        .await
    {
        Ok(crate::quorum::rpc::QuorumResponse::ImageDigest { offset, digest }) => {
            format!("MetadataImageDigest:    {digest:032x} (image of {addr} at offset {offset})")
        }
        Ok(_) => format!("MetadataImageDigest:    unavailable ({addr} answered another kind)"),
        Err(e) => format!("MetadataImageDigest:    unavailable ({e})"),
    }
}

/// The lines of `describe --status`, as MetadataQuorumCommand prints them.
pub fn status_lines(
    cluster_id: &str,
    quorum: &DescribeQuorumResponse,
) -> Result<Vec<String>, String> {
    let p = partition(quorum)?;
    let leader = p
        .current_voters
        .iter()
        .find(|v| v.replica_id == p.leader_id)
        .ok_or("No value present")?;
    let lagging = p
        .current_voters
        .iter()
        .min_by_key(|v| v.log_end_offset)
        .ok_or("No value present")?;
    let max_lag = leader.log_end_offset - lagging.log_end_offset;
    let max_lag_time = if lagging.replica_id == leader.replica_id {
        0
    } else if leader.last_caught_up_timestamp != -1 && lagging.last_caught_up_timestamp != -1 {
        leader.last_caught_up_timestamp - lagging.last_caught_up_timestamp
    } else {
        -1
    };
    Ok(vec![
        format!("ClusterId:              {cluster_id}"),
        format!("LeaderId:               {}", p.leader_id.0),
        format!("LeaderEpoch:            {}", p.leader_epoch),
        format!("HighWatermark:          {}", p.high_watermark),
        format!("MaxFollowerLag:         {max_lag}"),
        format!("MaxFollowerLagTimeMs:   {max_lag_time}"),
        format!(
            "CurrentVoters:          {}",
            replica_list(quorum, &p.current_voters)
        ),
        format!(
            "CurrentObservers:       {}",
            replica_list(quorum, &p.observers)
        ),
    ])
}

/// `describe --replication`: Kafka's table (columns padded to the widest cell, separated by a
/// tab as ToolsUtils.prettyPrintTable does).
pub fn replication_table(
    quorum: &DescribeQuorumResponse,
    human_readable: bool,
    now: i64,
) -> Result<String, String> {
    let p = partition(quorum)?;
    let leader = p
        .current_voters
        .iter()
        .find(|v| v.replica_id == p.leader_id)
        .ok_or("No value present")?;
    let time = |t: i64| {
        if t < 0 {
            "-1".to_owned()
        } else if human_readable {
            format!("{} ms ago", (now - t).max(0))
        } else {
            t.to_string()
        }
    };
    let mut rows: Vec<Vec<String>> = vec![vec![
        "NodeId".into(),
        "DirectoryId".into(),
        "LogEndOffset".into(),
        "Lag".into(),
        "LastFetchTimestamp".into(),
        "LastCaughtUpTimestamp".into(),
        "Status".into(),
    ]];
    let followers = p
        .current_voters
        .iter()
        .filter(|v| v.replica_id != p.leader_id);
    let groups: [(&str, Vec<&ReplicaState>); 3] = [
        ("Leader", vec![leader]),
        ("Follower", followers.collect()),
        ("Observer", p.observers.iter().collect()),
    ];
    for (status, replicas) in groups {
        for r in replicas {
            rows.push(vec![
                r.replica_id.0.to_string(),
                uuid_to_kafka_string(r.replica_directory_id),
                r.log_end_offset.to_string(),
                (leader.log_end_offset - r.log_end_offset).to_string(),
                time(r.last_fetch_timestamp),
                time(r.last_caught_up_timestamp),
                status.to_owned(),
            ]);
        }
    }
    let widths: Vec<usize> = (0..7)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        out.push_str(cells.join("\t").trim_end());
        out.push('\n');
    }
    Ok(out)
}

fn broker_error(error: AdminError) -> String {
    error.to_string()
}

async fn add_controller(args: &MetadataQuorumArgs, id: i32, dry_run: bool) -> Result<(), String> {
    let mut client = connect_leader(args).await?;
    if dry_run {
        // Say what the leader would derive, from what it reports now.
        let quorum = describe(&mut client).await?;
        let p = partition(&quorum)?;
        let candidates: Vec<String> = p
            .observers
            .iter()
            .filter(|o| o.replica_id.0 == id)
            .map(|o| uuid_to_kafka_string(o.replica_directory_id))
            .collect();
        let directory = match candidates.as_slice() {
            [one] => one.clone(),
            [] => "<no observer with this id>".to_owned(),
            many => format!("<one of {}>", many.join(", ")),
        };
        outln!("DRY RUN of adding controller {id} with directory id {directory}");
        return Ok(());
    }
    let request = AddRaftVoterRequestV {
        request: AddRaftVoterRequest::default()
            .with_cluster_id(None)
            .with_timeout_ms(VOTER_CHANGE_TIMEOUT_MS)
            .with_voter_id(id)
            .with_voter_directory_id(Uuid::nil())
            .with_listeners(Vec::<Listener>::new()),
        ack_when_committed: true,
    };
    let version = client.version_of::<AddRaftVoterRequestV>().unwrap_or(0);
    if version < 2 {
        return Err(format!(
            "{} (the cluster does not support adding a controller by id: AddRaftVoter v2 is needed, it supports up to v{version})",
            kafka_message_unsupported()
        ));
    }
    let response = client
        .send_at(&request, version)
        .await
        .map_err(broker_error)?;
    check(response.0.error_code, response.0.error_message.as_ref()).map_err(broker_error)?;
    // Report what the leader used, as the properties-file form does.
    let quorum = describe(&mut client).await?;
    let p = partition(&quorum)?;
    let directory = p
        .current_voters
        .iter()
        .find(|v| v.replica_id.0 == id)
        .map_or_else(String::new, |v| {
            uuid_to_kafka_string(v.replica_directory_id)
        });
    outln!(
        "Added controller {id} with directory id {directory} and endpoints: {}",
        endpoints_of(&quorum, id).join(", ")
    );
    Ok(())
}

/// The properties-file form (before KAFKA-18775): the new controller's own configuration names
/// its id, metadata directory (whose meta.properties holds the directory id) and listeners.
async fn add_controller_from_properties(
    args: &MetadataQuorumArgs,
    file: &std::path::Path,
    dry_run: bool,
) -> Result<(), String> {
    let config = crate::config::NodeConfig::load(Some(file), &[]).map_err(|e| e.to_string())?;
    if !config.has_role(crate::config::ProcessRole::Controller) {
        return Err("process.roles did not contain 'controller' in configuration file. Is this a valid controller configuration file?".into());
    }
    let dir = &config.metadata_log_dir;
    let directory = crate::storage::directory_id_in(dir)
        .map_err(|_| format!("Unable to read meta.properties from {}", dir.display()))?
        .ok_or_else(|| format!("Unable to read meta.properties from {}", dir.display()))?;
    let mut endpoints = Vec::new();
    for name in &config.controller_listener_names {
        let listener = config
            .advertised_listeners
            .iter()
            .chain(config.listeners.iter())
            .find(|l| &l.name == name)
            .ok_or_else(|| {
                format!("Cannot find information about controller listener name: {name}")
            })?;
        let host = if listener.host.is_empty() {
            "localhost".to_owned()
        } else {
            listener.host.clone()
        };
        endpoints.push((name.clone(), host, listener.port));
    }
    if !dry_run {
        let mut client = connect_leader(args).await?;
        let version = client.version_of::<AddRaftVoterRequestV>().unwrap_or(0);
        let request = AddRaftVoterRequestV {
            request: AddRaftVoterRequest::default()
                .with_cluster_id(None)
                .with_timeout_ms(VOTER_CHANGE_TIMEOUT_MS)
                .with_voter_id(config.node_id)
                .with_voter_directory_id(directory)
                .with_listeners(
                    endpoints
                        .iter()
                        .map(|(name, host, port)| {
                            Listener::default()
                                .with_name(StrBytes::from_string(name.clone()))
                                .with_host(StrBytes::from_string(host.clone()))
                                .with_port(*port)
                        })
                        .collect(),
                ),
            ack_when_committed: true,
        };
        let response = client
            .send_at(&request, version)
            .await
            .map_err(broker_error)?;
        check(response.0.error_code, response.0.error_message.as_ref()).map_err(broker_error)?;
    }
    let rendered: Vec<String> = endpoints
        .iter()
        .map(|(name, host, port)| {
            if host.contains(':') {
                format!("{name}://[{host}]:{port}")
            } else {
                format!("{name}://{host}:{port}")
            }
        })
        .collect();
    outln!(
        "{} controller {} with directory id {} and endpoints: {}",
        if dry_run {
            "DRY RUN of adding"
        } else {
            "Added"
        },
        config.node_id,
        uuid_to_kafka_string(directory),
        rendered.join(", ")
    );
    Ok(())
}

fn kafka_message_unsupported() -> String {
    super::kafka_message(ResponseError::UnsupportedVersion.code(), None)
}

async fn remove_controller(
    args: &MetadataQuorumArgs,
    id: i32,
    directory: Option<Uuid>,
    dry_run: bool,
) -> Result<(), String> {
    let mut client = connect_leader(args).await?;
    let explicit = directory;
    let directory = match directory {
        Some(d) => d,
        None => {
            // Name the voter's directory in the output; the leader derives the same one (v1).
            let quorum = describe(&mut client).await?;
            partition(&quorum)?
                .current_voters
                .iter()
                .find(|v| v.replica_id.0 == id)
                .map_or(Uuid::nil(), |v| v.replica_directory_id)
        }
    };
    if !dry_run {
        let version = client.version_of::<RemoveRaftVoterRequestV>().unwrap_or(0);
        let request = RemoveRaftVoterRequestV(
            RemoveRaftVoterRequest::default()
                .with_cluster_id(None)
                .with_voter_id(id)
                // v1 derives the directory when it is zero; v0 needs it spelled out.
                .with_voter_directory_id(match explicit {
                    Some(d) => d,
                    None if version >= 1 => Uuid::nil(),
                    None => directory,
                }),
        );
        let response = client
            .send_at(&request, version)
            .await
            .map_err(broker_error)?;
        check(response.0.error_code, response.0.error_message.as_ref()).map_err(broker_error)?;
    }
    outln!(
        "{} KRaft controller {id} with directory id {}",
        if dry_run {
            "DRY RUN of removing "
        } else {
            "Removed "
        },
        uuid_to_kafka_string(directory)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::describe_quorum_response::{self as dq, Node};
    use kafka_protocol::messages::BrokerId;

    fn replica(id: i32, dir: u128, leo: i64, fetch: i64, caught: i64) -> ReplicaState {
        ReplicaState::default()
            .with_replica_id(BrokerId(id))
            .with_replica_directory_id(Uuid::from_u128(dir))
            .with_log_end_offset(leo)
            .with_last_fetch_timestamp(fetch)
            .with_last_caught_up_timestamp(caught)
    }

    fn quorum() -> DescribeQuorumResponse {
        DescribeQuorumResponse::default()
            .with_topics(vec![dq::TopicData::default().with_partitions(vec![
                dq::PartitionData::default()
                    .with_leader_id(BrokerId(2))
                    .with_leader_epoch(7)
                    .with_high_watermark(120)
                    .with_current_voters(vec![
                        replica(1, 1, 105, 900, 800),
                        replica(2, 2, 120, 1000, 1000),
                    ])
                    .with_observers(vec![replica(4, 0, 100, 950, 700)]),
            ])])
            .with_nodes(vec![Node::default()
                .with_node_id(BrokerId(2))
                .with_listeners(vec![dq::Listener::default()
                    .with_name(StrBytes::from_static_str("CONTROLLER"))
                    .with_host(StrBytes::from_static_str("c2"))
                    .with_port(9093)])])
    }

    #[test]
    fn status_has_kafkas_labels_and_lag() -> Result<(), String> {
        let lines = status_lines("CID", &quorum())?;
        assert_eq!(
            lines,
            vec![
                "ClusterId:              CID",
                "LeaderId:               2",
                "LeaderEpoch:            7",
                "HighWatermark:          120",
                "MaxFollowerLag:         15",
                "MaxFollowerLagTimeMs:   200",
                "CurrentVoters:          [{\"id\": 1, \"directoryId\": \"AAAAAAAAAAAAAAAAAAAAAQ\"}, {\"id\": 2, \"directoryId\": \"AAAAAAAAAAAAAAAAAAAAAg\", \"endpoints\": [\"CONTROLLER://c2:9093\"]}]",
                "CurrentObservers:       [{\"id\": 4, \"directoryId\": null}]",
            ]
        );
        Ok(())
    }

    #[test]
    fn replication_lists_leader_followers_observers() -> Result<(), String> {
        let table = replication_table(&quorum(), true, 1_000)?;
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].starts_with("NodeId\tDirectoryId"), "{table}");
        assert!(
            lines[1].starts_with("2 ") && lines[1].ends_with("Leader"),
            "{table}"
        );
        assert!(
            lines[2].contains("200 ms ago") && lines[2].ends_with("Follower"),
            "{table}"
        );
        assert!(
            lines[3].ends_with("Observer") && lines[3].contains("\t20 "),
            "{table}"
        );
        Ok(())
    }
}
