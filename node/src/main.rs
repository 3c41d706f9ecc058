//! `gregor`: a Kafka-compatible broker node.
//!
//! Subcommands: `node` starts a node; `storage format` / `storage random-uuid` prepare data
//! directories as `kafka-storage.sh` does.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

use gregor_node::config::NodeConfig;
use gregor_node::{server, storage};

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
}

#[derive(Args)]
struct ConfigArgs {
    /// A server.properties file (Kafka's property names).
    #[arg(long, value_name = "FILE")]
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
        /// The cluster id (22 base64url characters, see `random-uuid`).
        #[arg(long, short = 't')]
        cluster_id: String,
        /// Start the metadata log as a quorum of this node alone.
        #[arg(long, short = 's')]
        standalone: bool,
        /// Skip directories that are already formatted instead of failing.
        #[arg(long, short = 'g')]
        ignore_formatted: bool,
    },
    /// Print a new random cluster id.
    RandomUuid,
}

fn load(args: &ConfigArgs) -> Result<NodeConfig, String> {
    NodeConfig::load(args.config.as_deref(), &args.overrides).map_err(|e| e.to_string())
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        Command::Node(args) => {
            let config = load(&args)?;
            server::run(config).map_err(|e| e.to_string())
        }
        Command::Storage(StorageCommand::Format {
            config,
            cluster_id,
            standalone,
            ignore_formatted,
        }) => {
            let config = load(&config)?;
            let formatted = storage::format(&config, &cluster_id, ignore_formatted, standalone)
                .map_err(|e| e.to_string())?;
            for dir in formatted {
                println!(
                    "Formatting metadata directory {} with metadata.version 4.0-IV3.",
                    dir.display()
                );
            }
            Ok(())
        }
        Command::Storage(StorageCommand::RandomUuid) => {
            println!("{}", storage::random_cluster_id());
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    server::init_logging();
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("gregor: {message}");
            ExitCode::FAILURE
        }
    }
}
