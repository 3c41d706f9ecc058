//! `gregor`: a Kafka-compatible broker node.
//!
//! Subcommands: `node` starts a node; `storage format` / `storage info` / `storage random-uuid`
//! prepare and inspect data directories as `kafka-storage.sh` does; `completions` prints a shell
//! completion script.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};
use clap_complete::Shell;
use mimalloc::MiMalloc;

use gregor_node::admin::write_stdout;
use gregor_node::config::NodeConfig;
use gregor_node::{log_levels, server, storage, storage_info};

#[derive(Parser)]
#[command(name = "gregor", version, about = "A Kafka-compatible broker node")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a node (formats empty data directories itself).
    Node(ConfigArgs),
    /// Prepare data directories.
    #[command(subcommand)]
    Storage(StorageCommand),
    /// Describe or alter dynamic configs, as kafka-configs.sh.
    Configs(gregor_node::admin::cli::ConfigsArgs),
    /// List, describe, alter or delete client-metrics resources, as kafka-client-metrics.sh.
    ClientMetrics(gregor_node::admin::cli::ClientMetricsArgs),
    /// Create, delete, alter, list or describe topics, as kafka-topics.sh.
    Topics(gregor_node::admin::topics::TopicsArgs),
    /// List, describe or delete consumer groups and reset or delete their offsets, as
    /// kafka-consumer-groups.sh.
    ConsumerGroups(gregor_node::admin::cli::ConsumerGroupsArgs),
    /// Describe the metadata quorum and add or remove controllers, as kafka-metadata-quorum.sh.
    MetadataQuorum(gregor_node::admin::metadata_quorum::MetadataQuorumArgs),
    /// Describe, upgrade, downgrade or disable feature flags (metadata.version, kraft.version),
    /// as kafka-features.sh.
    Features(gregor_node::admin::features::FeaturesArgs),
    /// Print a completion script for a shell, e.g. `gregor completions bash > /etc/bash_completion.d/gregor`.
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: Shell,
    },
    /// Get the cluster id, or unregister a broker (kafka-cluster.sh)
    Cluster(gregor_node::admin::cluster::ClusterArgs),
    /// Write stdin lines as records to a topic, as kafka-console-producer.sh.
    ConsoleProducer(gregor_node::admin::console::ConsoleProducerArgs),
    /// Print the records of a topic, alone or as a member of a consumer group, as kafka-console-consumer.sh.
    ConsoleConsumer(gregor_node::admin::console::ConsoleConsumerArgs),
    /// Print partition offsets (latest, earliest, by time), as kafka-get-offsets.sh.
    GetOffsets(gregor_node::admin::console::GetOffsetsArgs),
    /// Delete records of partitions down to an offset, as kafka-delete-records.sh.
    DeleteRecords(gregor_node::admin::records::DeleteRecordsArgs),
    /// Describe the log directories of brokers, as kafka-log-dirs.sh.
    LogDirs(gregor_node::admin::records::LogDirsArgs),
    /// Elect partition leaders (preferred or unclean), as kafka-leader-election.sh.
    LeaderElection(gregor_node::admin::leader_election::LeaderElectionArgs),
    /// Move partition replicas between brokers, as kafka-reassign-partitions.sh.
    ReassignPartitions(gregor_node::admin::reassign::ReassignArgs),
    /// Add, remove and list ACLs, as kafka-acls.sh.
    Acls(gregor_node::admin::acls::AclsArgs),
    /// Print the contents of log segment, index, time index and producer snapshot files, as
    /// kafka-dump-log.sh.
    DumpLog {
        /// Comma-separated files to dump (`.log`, `.index`, `.timeindex`, `.snapshot`).
        #[arg(long, required = true, value_delimiter = ',', value_name = "FILES")]
        files: Vec<PathBuf>,
        /// Print each record's key, value and headers too.
        #[arg(long)]
        print_data_log: bool,
    },
}

#[derive(Args)]
struct ConfigArgs {
    /// A server.properties file (Kafka's property names).
    #[arg(long, short = 'c', value_name = "FILE")]
    config: Option<PathBuf>,
    /// Set a property, `key=value`; repeatable, applied after the file in order.
    #[arg(long = "override", value_name = "KEY=VALUE")]
    overrides: Vec<String>,
}

#[derive(Subcommand)]
enum StorageCommand {
    /// Write meta.properties into every log directory of the node.
    Format {
        #[command(flatten)]
        config: ConfigArgs,
        /// The cluster id (22 base64url characters, see `random-uuid`; may start with '-').
        #[arg(long, short = 't', allow_hyphen_values = true)]
        cluster_id: String,
        /// Start the metadata log as a quorum of this node alone.
        #[arg(long, short = 's', conflicts_with = "initial_controllers")]
        standalone: bool,
        /// The initial voters, `id@host:port:directoryid,...` (Kafka's form).
        #[arg(long, short = 'I', value_name = "CONTROLLERS")]
        initial_controllers: Option<String>,
        /// Skip directories that are already formatted instead of failing.
        #[arg(long, short = 'g')]
        ignore_formatted: bool,
        /// A SCRAM credential the new cluster starts with, as kafka-storage.sh:
        /// `SCRAM-SHA-256=[name=alice,password=alice-secret]` (optional iterations, salt, or
        /// salt and saltedpassword instead of password); repeatable.
        #[arg(long, short = 'S', value_name = "CREDENTIAL")]
        add_scram: Vec<String>,
    },
    /// Describe the node's directories and their meta.properties, as kafka-storage.sh info.
    Info(ConfigArgs),
    /// Print a new random cluster id.
    RandomUuid,
}

fn load(args: &ConfigArgs) -> Result<NodeConfig, String> {
    NodeConfig::load(args.config.as_deref(), &args.overrides).map_err(|e| e.to_string())
}

/// `huge_pages`: whether the node's process could turn transparent huge pages off.
fn run(cli: Cli, huge_pages: std::io::Result<()>) -> Result<(), String> {
    match cli.command {
        Command::Node(args) => {
            let config = load(&args)?;
            config.check_runnable().map_err(|e| e.to_string())?;
            log_levels::init_logging_as(Some(config.log_format()));
            if let Err(error) = huge_pages {
                tracing::warn!(%error, "cannot turn transparent huge pages off for this process; the node runs with them");
            }
            server::run(config).map_err(|e| e.to_string())
        }
        Command::Storage(StorageCommand::Format {
            config,
            cluster_id,
            standalone,
            initial_controllers,
            ignore_formatted,
            add_scram,
        }) => {
            let config = load(&config)?;
            let scram = add_scram
                .iter()
                .map(|entry| storage::parse_add_scram(entry))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            let initial = initial_controllers
                .as_deref()
                .map(storage::parse_initial_controllers)
                .transpose()
                .map_err(|e| e.to_string())?;
            let formatted = storage::format_with(
                &config,
                &cluster_id,
                ignore_formatted,
                standalone,
                initial.as_deref(),
                &scram,
            )
            .map_err(|e| e.to_string())?;
            for dir in formatted {
                write_stdout(format_args!(
                    "Formatting metadata directory {} with metadata.version 4.0-IV3.\n",
                    dir.display()
                ));
            }
            Ok(())
        }
        Command::Configs(args) => gregor_node::admin::cli::run_configs(args),
        Command::ClientMetrics(args) => gregor_node::admin::cli::run_client_metrics(args),
        Command::Topics(args) => gregor_node::admin::topics::run_topics(args),
        Command::ConsumerGroups(args) => gregor_node::admin::cli::run_consumer_groups(args),
        Command::MetadataQuorum(args) => {
            gregor_node::admin::metadata_quorum::run_metadata_quorum(args)
        }
        Command::Features(args) => gregor_node::admin::features::run_features(args),
        Command::Storage(StorageCommand::Info(args)) => {
            let config = load(&args)?;
            let problems = storage_info::info(&config, &mut std::io::stdout().lock())
                .map_err(|e| format!("cannot write the report: {e}"))?;
            if problems {
                return Err("the storage directories have problems (listed above)".into());
            }
            Ok(())
        }
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "gregor", &mut std::io::stdout());
            Ok(())
        }
        Command::Cluster(args) => gregor_node::admin::cluster::run_cluster(args),
        Command::ConsoleProducer(args) => gregor_node::admin::console::run_console_producer(args),
        Command::ConsoleConsumer(args) => gregor_node::admin::console::run_console_consumer(args),
        Command::GetOffsets(args) => gregor_node::admin::console::run_get_offsets(args),
        Command::DeleteRecords(args) => gregor_node::admin::records::run_delete_records(args),
        Command::LogDirs(args) => gregor_node::admin::records::run_log_dirs(args),
        Command::ReassignPartitions(args) => gregor_node::admin::reassign::run_reassign(args),
        Command::LeaderElection(args) => {
            gregor_node::admin::leader_election::run_leader_election(args)
        }
        Command::Acls(args) => gregor_node::admin::acls::run_acls(args),
        Command::DumpLog {
            files,
            print_data_log,
        } => {
            let mut out = std::io::stdout().lock();
            for file in &files {
                match gregor_log::dump::dump_file(file, print_data_log, &mut out) {
                    Ok(()) => {}
                    // A reader that stopped early (`| head`) ends the dump cleanly.
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
                    Err(e) => return Err(format!("cannot dump {}: {e}", file.display())),
                }
            }
            Ok(())
        }
        Command::Storage(StorageCommand::RandomUuid) => {
            write_stdout(format_args!("{}\n", storage::random_cluster_id()));
            Ok(())
        }
    }
}

/// glibc's malloc keeps per-thread arenas whose freed pages it rarely returns: under steady
/// partition churn the node's resident memory climbed to several times its live heap before
/// levelling off. mimalloc returns freed pages to the system.
#[global_allocator]
static ALLOCATOR: MiMalloc = MiMalloc;

/// mimalloc marks its arenas `MADV_HUGEPAGE`, so where the kernel's transparent huge pages are
/// on for such memory (the common `madvise` mode), a fresh allocation faults in and zeroes a
/// whole 2 MiB page. A node creating one 1,000-partition topic a second spent a third of its
/// time zeroing them, for several times the p99 latency and twice the peak memory, while the
/// image's speed does not depend on them (BENCHMARKS.md, "mimalloc's huge pages"). So a node
/// turns them off for its process, unless the operator chose with mimalloc's own setting,
/// `MIMALLOC_ALLOW_THP`.
fn disable_huge_pages_unless_chosen() -> std::io::Result<()> {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return Ok(());
    }
    Ok(rustix::thread::disable_transparent_huge_pages(true)?)
}

fn main() -> ExitCode {
    // Before the node's own allocations (only what the runtime and mimalloc set up before
    // `main` can still be in huge pages); a failure is reported once logging is set up.
    let huge_pages = disable_huge_pages_unless_chosen();
    let cli = Cli::try_parse().unwrap_or_else(|error| gregor_node::admin::exit_for_usage(error));
    // A node logs in the format its configuration names, so it starts logging once that is
    // loaded (a configuration error is printed on its own line either way).
    if !matches!(cli.command, Command::Node(_)) {
        server::init_logging();
    }
    match run(cli, huge_pages) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("gregor: {message}");
            ExitCode::FAILURE
        }
    }
}
