//! The command-line shapes of `gregor configs` and `gregor client-metrics` (clap), and how
//! they run: output to stdout, errors to stderr with a non-zero exit.

use clap::{ArgAction, ArgGroup, ArgMatches, Args, FromArgMatches};

use std::path::PathBuf;

use super::client_metrics::{self, ClientMetricsAction};
use super::configs::{self, ConfigsCommand, EntityType};
use super::{block_on, usage_exit, CommandConfig};
use crate::storage::random_cluster_id;

/// `gregor configs`: kafka-configs.sh.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("action").required(true).args(["describe", "alter"])))]
pub struct ConfigsOptions {
    /// The server(s) to connect to, `host:port[,host:port]`.
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// List configs for the given entity.
    #[arg(long)]
    pub describe: bool,
    /// Alter the configuration of the entity.
    #[arg(long)]
    pub alter: bool,
    /// Type of entity; `users` and `clients` may be given together (the clients of a user).
    #[arg(long, value_enum)]
    pub entity_type: Vec<EntityType>,
    /// The topic's name (`--entity-type topics --entity-name NAME`).
    #[arg(long, value_name = "NAME")]
    pub topic: Option<String>,
    /// The client id (`--entity-type clients --entity-name ID`).
    #[arg(long, value_name = "ID")]
    pub client: Option<String>,
    /// The user's principal name (`--entity-type users --entity-name NAME`).
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// The broker's id (`--entity-type brokers --entity-name ID`).
    #[arg(long, value_name = "ID")]
    pub broker: Option<String>,
    /// The broker's id for its logger config (`--entity-type broker-loggers --entity-name ID`).
    #[arg(long, value_name = "ID")]
    pub broker_logger: Option<String>,
    /// The IP address (`--entity-type ips --entity-name IP`).
    #[arg(long, value_name = "IP")]
    pub ip: Option<String>,
    /// The client-metrics subscription's name.
    #[arg(long, value_name = "NAME")]
    pub client_metrics: Option<String>,
    /// The group's id (`--entity-type groups --entity-name ID`).
    #[arg(long, value_name = "ID")]
    pub group: Option<String>,
    /// The config defaults for all clients.
    #[arg(long)]
    pub client_defaults: bool,
    /// The config defaults for all users.
    #[arg(long)]
    pub user_defaults: bool,
    /// The config defaults for all brokers.
    #[arg(long)]
    pub broker_defaults: bool,
    /// The config defaults for all IPs.
    #[arg(long)]
    pub ip_defaults: bool,
    /// Name of entity (topic name, broker id, group id, client-metrics name, user principal,
    /// client id, ip), one per --entity-type in the same order.
    #[arg(long)]
    pub entity_name: Vec<String>,
    /// The default entity (brokers, users, clients, ips) in place of an --entity-name.
    // One value per occurrence (a count flag keeps one index for all), so each default has
    // its own position among the names.
    #[arg(long, num_args = 0, default_missing_value = "true", action = ArgAction::Append)]
    pub entity_default: Vec<bool>,
    /// With --describe: all configs, not only the dynamic ones.
    #[arg(long)]
    pub all: bool,
    /// Configs to add: `k1=v1,k2=[v1,v2,v2],k3=v3`.
    #[arg(long, value_name = "K=V,...")]
    pub add_config: Option<String>,
    /// A properties file of configs to add; `--add-config` wins for a key in both.
    #[arg(long, value_name = "FILE")]
    pub add_config_file: Option<PathBuf>,
    /// Config keys to remove: `k1,k2`.
    #[arg(long, value_name = "K,...")]
    pub delete_config: Option<String>,
    /// Admin client properties (`client.id`, `security.protocol`).
    #[arg(long, value_name = "FILE")]
    pub command_config: Option<PathBuf>,
}

/// [`ConfigsOptions`] plus the `--entity-name` / `--entity-default` occurrences in command-line
/// order (`""` for a default): kafka-configs.sh pairs the n-th of them with the n-th
/// `--entity-type`, and the derived fields alone lose that order.
#[derive(Debug)]
pub struct ConfigsArgs {
    /// The parsed options.
    pub options: ConfigsOptions,
    /// Entity names in order, `""` = `--entity-default`.
    pub entity_names: Vec<String>,
}

fn ordered_entity_names(matches: &ArgMatches) -> Vec<String> {
    let mut named: Vec<(usize, String)> = matches
        .indices_of("entity_name")
        .into_iter()
        .flatten()
        .zip(
            matches
                .get_many::<String>("entity_name")
                .into_iter()
                .flatten()
                .cloned(),
        )
        .collect();
    named.extend(
        matches
            .indices_of("entity_default")
            .into_iter()
            .flatten()
            .map(|index| (index, String::new())),
    );
    named.sort_by_key(|(index, _)| *index);
    named.into_iter().map(|(_, name)| name).collect()
}

/// kafka-configs.sh's entity options (`--topic T`, `--broker-defaults`, ...) after the
/// `--entity-type` / `--entity-name` pairs, in its fixed order: the named ones, then the
/// defaults.
fn add_entity_shorthands(options: &mut ConfigsOptions, entity_names: &mut Vec<String>) {
    let named = [
        (options.topic.clone(), EntityType::Topics),
        (options.client.clone(), EntityType::Clients),
        (options.user.clone(), EntityType::Users),
        (options.broker.clone(), EntityType::Brokers),
        (options.broker_logger.clone(), EntityType::BrokerLoggers),
        (options.ip.clone(), EntityType::Ips),
        (options.client_metrics.clone(), EntityType::ClientMetrics),
        (options.group.clone(), EntityType::Groups),
    ];
    for (name, entity_type) in named {
        if let Some(name) = name {
            options.entity_type.push(entity_type);
            options.entity_name.push(name.clone());
            entity_names.push(name);
        }
    }
    let defaults = [
        (options.client_defaults, EntityType::Clients),
        (options.user_defaults, EntityType::Users),
        (options.broker_defaults, EntityType::Brokers),
        (options.ip_defaults, EntityType::Ips),
    ];
    for (given, entity_type) in defaults {
        if given {
            options.entity_type.push(entity_type);
            entity_names.push(String::new());
        }
    }
}

impl FromArgMatches for ConfigsArgs {
    fn from_arg_matches(matches: &ArgMatches) -> Result<Self, clap::Error> {
        let mut options = ConfigsOptions::from_arg_matches(matches)?;
        let mut entity_names = ordered_entity_names(matches);
        add_entity_shorthands(&mut options, &mut entity_names);
        Ok(ConfigsArgs {
            options,
            entity_names,
        })
    }

    fn update_from_arg_matches(&mut self, matches: &ArgMatches) -> Result<(), clap::Error> {
        self.options.update_from_arg_matches(matches)?;
        self.entity_names = ordered_entity_names(matches);
        add_entity_shorthands(&mut self.options, &mut self.entity_names);
        Ok(())
    }
}

impl Args for ConfigsArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        ConfigsOptions::augment_args(cmd)
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        ConfigsOptions::augment_args_for_update(cmd)
    }
}

/// Why kafka-configs.sh's checks refuse the arguments.
#[derive(Debug, PartialEq, Eq)]
pub enum ConfigsArgsError {
    /// Printed with the usage (`CommandLineUtils.printUsageAndExit`).
    Usage(String),
    /// Printed alone, exit status 1 (an `IllegalArgumentException` caught by `main`).
    Invalid(String),
}

impl From<String> for ConfigsArgsError {
    fn from(message: String) -> Self {
        ConfigsArgsError::Usage(message)
    }
}

impl From<&str> for ConfigsArgsError {
    fn from(message: &str) -> Self {
        ConfigsArgsError::Usage(message.to_owned())
    }
}

/// kafka-configs.sh's argument checks (`ConfigCommandOptions.checkArgs` and the entity-count
/// check before connecting).
pub fn check_configs_args(args: &ConfigsArgs) -> Result<(), ConfigsArgsError> {
    let options = &args.options;
    let types = &options.entity_type;
    let names = &args.entity_names;
    let adds = options.add_config.is_some() || options.add_config_file.is_some();
    if options.describe && (adds || options.delete_config.is_some()) {
        return Err(
            "--add-config, --add-config-file and --delete-config are only valid with --alter"
                .into(),
        );
    }
    if types.is_empty() {
        return Err("At least one entity type must be specified".into());
    }
    let mut duplicates: Vec<&str> = Vec::new();
    for (i, t) in types.iter().enumerate() {
        if types[..i].contains(t) && !duplicates.contains(&t.plural()) {
            duplicates.push(t.plural());
        }
    }
    if !duplicates.is_empty() {
        return Err(format!(
            "Duplicate entity type(s) specified: {}",
            duplicates.join(",")
        )
        .into());
    }
    if names.len() > types.len() {
        return Err("More entity names specified than entity types".into());
    }
    let pair = [EntityType::Users, EntityType::Clients];
    if types.len() > 1 && !(types.len() == 2 && pair.iter().all(|t| types.contains(t))) {
        return Err("Only 'users' and 'clients' entity types may be specified together".into());
    }
    let has_name = names.iter().any(|n| !n.is_empty());
    let has_default = names.iter().any(String::is_empty);
    let type_list = || {
        types
            .iter()
            .map(|t| t.plural())
            .collect::<Vec<_>>()
            .join(",")
    };
    if has_name && types.contains(&EntityType::Ips) {
        for name in options.entity_name.iter() {
            check_ip(name).map_err(ConfigsArgsError::Invalid)?;
        }
    }
    let defaultable = types.iter().any(|t| {
        matches!(
            t,
            EntityType::Users | EntityType::Clients | EntityType::Brokers | EntityType::Ips
        )
    });
    if options.describe && !defaultable && has_default {
        return Err(format!(
            "--entity-default must not be specified with --describe of {}",
            type_list()
        )
        .into());
    }
    if options.alter {
        if defaultable {
            if !has_name && !has_default {
                return Err("An entity-name or default entity must be specified with --alter of users, clients, brokers or ips".into());
            }
        } else if !has_name {
            return Err(format!(
                "An entity name must be specified with --alter of {}",
                type_list()
            )
            .into());
        }
        if !adds && options.delete_config.is_none() {
            return Err(
                "At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter".into(),
            );
        }
        if types.len() != names.len() {
            return Err("An entity name must be specified for every entity type".into());
        }
    }
    Ok(())
}

/// kafka-configs.sh accepts an IP or a host name that resolves (`InetAddress.getByName`).
fn check_ip(name: &str) -> Result<(), String> {
    use std::net::{IpAddr, ToSocketAddrs};
    if name.parse::<IpAddr>().is_ok() || (name, 0).to_socket_addrs().is_ok() {
        return Ok(());
    }
    Err(format!(
        "The entity name for ips must be a valid IP or resolvable host, but it is: {name}"
    ))
}

/// Runs `gregor configs`; `Err` is the message for stderr.
pub fn run_configs(args: ConfigsArgs) -> Result<(), String> {
    match check_configs_args(&args) {
        Ok(()) => {}
        Err(ConfigsArgsError::Usage(message)) => usage_exit::<ConfigsArgs>("configs", &message),
        Err(ConfigsArgsError::Invalid(message)) => return Err(message),
    }
    let ConfigsArgs {
        options,
        entity_names,
    } = args;
    let entity_type = options
        .entity_type
        .first()
        .copied()
        .ok_or("At least one entity type must be specified")?;
    let command = ConfigsCommand {
        bootstrap_server: options.bootstrap_server,
        alter: options.alter,
        entity_type,
        entity_name: entity_names.first().cloned(),
        all: options.all,
        add_config: options.add_config,
        add_config_file: options.add_config_file,
        delete_config: options.delete_config,
        command_config: options.command_config,
        entity_types: options.entity_type,
        entity_names,
    };
    let mut out = String::new();
    let result = block_on(configs::run(&command, &mut out))?;
    out!("{out}");
    result.map_err(|e| e.to_string())
}

/// `gregor client-metrics`: kafka-client-metrics.sh.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("action").required(true).args(["list", "describe", "alter", "delete"])))]
pub struct ClientMetricsArgs {
    /// The server(s) to connect to, `host:port[,host:port]`.
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// List the client-metrics resources.
    #[arg(long)]
    pub list: bool,
    /// Describe one (--name) or every client-metrics resource.
    #[arg(long)]
    pub describe: bool,
    /// Create or change a client-metrics resource.
    #[arg(long)]
    pub alter: bool,
    /// Delete a client-metrics resource.
    #[arg(long)]
    pub delete: bool,
    /// The client-metrics resource name.
    #[arg(long)]
    pub name: Option<String>,
    /// With --alter: create a resource with a generated unique name (printed).
    #[arg(long, conflicts_with = "name")]
    pub generate_name: bool,
    /// Metric-name prefixes to collect, comma-separated (`*` for all; empty to remove).
    #[arg(long)]
    pub metrics: Option<String>,
    /// Push interval in milliseconds.
    #[arg(long)]
    pub interval: Option<i64>,
    /// Client matching patterns, `selector=regex,...` (empty to remove).
    #[arg(long, value_name = "K=REGEX,...")]
    pub r#match: Option<String>,
    /// Admin client properties (`client.id`, `security.protocol`).
    #[arg(long, value_name = "FILE")]
    pub command_config: Option<PathBuf>,
}

/// `gregor consumer-groups`: kafka-consumer-groups.sh.
#[derive(Debug, clap::Args)]
pub struct ConsumerGroupsArgs {
    /// The server(s) to connect to, `host:port[,host:port]`.
    #[arg(long, value_name = "HOST:PORT")]
    pub bootstrap_server: String,
    /// List all consumer groups.
    #[arg(long)]
    pub list: bool,
    /// Describe a consumer group: its offsets and lag (default), --members or --state.
    #[arg(long)]
    pub describe: bool,
    /// Delete the consumer group(s) (they must have no members).
    #[arg(long)]
    pub delete: bool,
    /// Reset the group's committed offsets (the group must be inactive).
    #[arg(long)]
    pub reset_offsets: bool,
    /// Delete the group's offsets of --topic.
    #[arg(long)]
    pub delete_offsets: bool,
    /// The consumer group (repeatable with --delete).
    #[arg(long)]
    pub group: Vec<String>,
    /// With --describe: the members. With --list: nothing (accepted for kafka-consumer-groups.sh).
    #[arg(long)]
    pub members: bool,
    /// With --describe: the offsets view (the default).
    #[arg(long)]
    pub offsets: bool,
    /// With --describe: the group's state. With --list: a STATE column, and with a value
    /// (comma-separated, any case) only the groups in those states.
    #[arg(long, num_args = 0..=1, value_name = "STATE")]
    pub state: Option<Option<String>>,
    /// With --list: a TYPE column, and with a value (`classic`, `consumer`, comma-separated)
    /// only the groups of those types.
    #[arg(long = "type", num_args = 0..=1, value_name = "TYPE")]
    pub group_type: Option<Option<String>>,
    /// With --describe: Kafka 4's extra columns (--members: epochs and assignments; --offsets:
    /// LEADER-EPOCH; --state: GROUP-EPOCH and TARGET-ASSIGNMENT-EPOCH).
    #[arg(long)]
    pub verbose: bool,
    /// The topic(s) of --reset-offsets or --delete-offsets: `T`, or `T:p,p` for some of its
    /// partitions.
    #[arg(long)]
    pub topic: Vec<String>,
    /// --reset-offsets of every topic the group has offsets for.
    #[arg(long)]
    pub all_topics: bool,
    /// Reset to the earliest offsets.
    #[arg(long)]
    pub to_earliest: bool,
    /// Reset to the latest offsets.
    #[arg(long)]
    pub to_latest: bool,
    /// Reset to this offset.
    #[arg(long)]
    pub to_offset: Option<i64>,
    /// Move the current offsets by this much (may be negative).
    #[arg(long, allow_hyphen_values = true)]
    pub shift_by: Option<i64>,
    /// Reset to the first offset at or after this time, `YYYY-MM-DDTHH:mm:SS.sss[Z|±HH:mm]`
    /// (UTC without a zone).
    #[arg(long)]
    pub to_datetime: Option<String>,
    /// Show the new offsets without committing them (the default).
    #[arg(long)]
    pub dry_run: bool,
    /// Commit the new offsets.
    #[arg(long)]
    pub execute: bool,
    /// How long each request is retried while the group's coordinator is loading or moving (ms).
    #[arg(long, value_name = "MS", default_value_t = super::consumer_groups::DEFAULT_TIMEOUT_MS)]
    pub timeout: u64,
}

/// The `--topic` values of kafka-consumer-groups.sh (`T` or `T:p,p`); one it cannot read is a
/// usage error, as Kafka's IllegalArgumentException is.
fn topic_args(topics: &[String]) -> Vec<super::consumer_groups::TopicArg> {
    topics
        .iter()
        .map(|topic| {
            super::consumer_groups::parse_topic_arg(topic).unwrap_or_else(|message| {
                usage_exit::<ConsumerGroupsArgs>("consumer-groups", &message)
            })
        })
        .collect()
}

/// Runs `gregor consumer-groups`; `Err` is the message for stderr.
pub fn run_consumer_groups(args: ConsumerGroupsArgs) -> Result<(), String> {
    use super::consumer_groups::{GroupsAction, ResetSpec, View};
    let one_group = |what: &str| -> Result<String, String> {
        args.group.first().cloned().ok_or_else(|| {
            format!("Option [{what}] takes one of these options: [all-groups], [group]")
        })
    };
    let action = if args.list {
        GroupsAction::List {
            states: args.state.clone(),
            types: args.group_type.clone(),
        }
    } else if args.describe {
        let view = if args.members {
            View::Members
        } else if args.state.is_some() {
            View::State
        } else {
            View::Offsets
        };
        GroupsAction::Describe {
            group: one_group("describe")?,
            view,
            verbose: args.verbose,
        }
    } else if args.delete {
        if args.group.is_empty() {
            return Err("Option [delete] takes one of these options: [all-groups], [group]".into());
        }
        GroupsAction::Delete {
            groups: args.group.clone(),
        }
    } else if args.reset_offsets {
        let datetime = match &args.to_datetime {
            None => None,
            Some(text) => Some(super::consumer_groups::parse_datetime(text).ok_or_else(|| {
                format!("Error parsing timestamp. It does not contain a valid format: {text}. Expected format: YYYY-MM-DDTHH:mm:SS.sss")
            })?),
        };
        let spec = match (
            args.to_earliest,
            args.to_latest,
            args.to_offset,
            args.shift_by,
            datetime,
        ) {
            (true, false, None, None, None) => ResetSpec::Earliest,
            (false, true, None, None, None) => ResetSpec::Latest,
            (false, false, Some(o), None, None) => ResetSpec::Offset(o),
            (false, false, None, Some(n), None) => ResetSpec::ShiftBy(n),
            (false, false, None, None, Some(ms)) => ResetSpec::Timestamp(ms),
            _ => {
                return Err("Option [reset-offsets] takes exactly one of these options: [to-earliest], [to-latest], [to-offset], [shift-by], [to-datetime]".into())
            }
        };
        if args.all_topics != args.topic.is_empty() {
            return Err(
                "Option [reset-offsets] takes one of these options: [all-topics], [topic]".into(),
            );
        }
        GroupsAction::Reset {
            group: one_group("reset-offsets")?,
            topics: (!args.all_topics).then(|| topic_args(&args.topic)),
            spec,
            execute: args.execute,
        }
    } else if args.delete_offsets {
        let topics = topic_args(&args.topic);
        if topics.is_empty() {
            return Err("Option [delete-offsets] takes the following options: [topic]".into());
        }
        GroupsAction::DeleteOffsets {
            group: one_group("delete-offsets")?,
            topics,
        }
    } else {
        return Err("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, --delete-offsets".into());
    };
    let (mut out, mut err) = (String::new(), String::new());
    let result = block_on(super::consumer_groups::run(
        &args.bootstrap_server,
        std::time::Duration::from_millis(args.timeout),
        &action,
        &mut out,
        &mut err,
    ))?;
    eprint!("{err}");
    out!("{out}");
    result.map_err(|e| format!("Error: {e}"))
}

/// Runs `gregor client-metrics`; `Err` is the message for stderr.
pub fn run_client_metrics(args: ClientMetricsArgs) -> Result<(), String> {
    let action = if args.list {
        ClientMetricsAction::List
    } else if args.describe {
        ClientMetricsAction::Describe(args.name)
    } else if args.alter {
        let name = match (args.name, args.generate_name) {
            (Some(name), false) => name,
            (None, true) => random_cluster_id(),
            _ => usage_exit::<ClientMetricsArgs>(
                "client-metrics",
                "One of --name or --generate-name must be specified with --alter.",
            ),
        };
        let mut configs = Vec::new();
        if let Some(interval) = args.interval {
            configs.push(("interval.ms".to_owned(), interval.to_string()));
        }
        if let Some(metrics) = args.metrics {
            configs.push(("metrics".to_owned(), metrics));
        }
        if let Some(patterns) = args.r#match {
            configs.push(("match".to_owned(), patterns));
        }
        ClientMetricsAction::Alter { name, configs }
    } else {
        let Some(name) = args.name else {
            usage_exit::<ClientMetricsArgs>(
                "client-metrics",
                "A client metrics resource name must be specified with --delete.",
            )
        };
        ClientMetricsAction::Delete(name)
    };
    let mut out = String::new();
    let config = CommandConfig::load(args.command_config.as_deref()).map_err(|e| e.to_string())?;
    let result = block_on(client_metrics::run(
        &config,
        &args.bootstrap_server,
        &action,
        &mut out,
    ))?;
    out!("{out}");
    result.map_err(|e| format!("Error while executing client metrics command : {e}"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ConfigsArgs,
    }

    fn parse(line: &str) -> ConfigsArgs {
        Cli::try_parse_from(std::iter::once("configs").chain(line.split_whitespace()))
            .unwrap()
            .args
    }

    #[test]
    fn entity_shorthands_follow_the_long_forms_in_kafkas_order() {
        let b = "--bootstrap-server h:1";
        let args = parse(&format!("{b} --describe --broker 1"));
        assert_eq!(args.options.entity_type, [EntityType::Brokers]);
        assert_eq!(args.entity_names, ["1"]);
        let args = parse(&format!("{b} --alter --add-config a=1 --user u --client c"));
        assert_eq!(
            args.options.entity_type,
            [EntityType::Clients, EntityType::Users]
        );
        assert_eq!(args.entity_names, ["c", "u"]);
        assert_eq!(check_configs_args(&args), Ok(()));
        let args = parse(&format!(
            "{b} --alter --add-config a=1 --entity-type users --entity-name u --client-defaults"
        ));
        assert_eq!(
            args.options.entity_type,
            [EntityType::Users, EntityType::Clients]
        );
        assert_eq!(args.entity_names, ["u", ""]);
        let args = parse(&format!("{b} --describe --broker-defaults --topic t"));
        assert_eq!(
            args.options.entity_type,
            [EntityType::Topics, EntityType::Brokers]
        );
        assert_eq!(args.entity_names, ["t", ""]);
        assert_eq!(
            check_configs_args(&parse(&format!("{b} --describe"))),
            Err("At least one entity type must be specified".into())
        );
    }

    #[test]
    fn entity_names_keep_their_command_line_order() {
        let b = "--bootstrap-server h:1 --alter --add-config a=1";
        let args = parse(&format!("{b} --entity-type users --entity-name u"));
        assert_eq!(args.entity_names, ["u"]);
        let args = parse(&format!(
            "{b} --entity-type users --entity-default --entity-type clients --entity-name c"
        ));
        assert_eq!(
            args.options.entity_type,
            [EntityType::Users, EntityType::Clients]
        );
        assert_eq!(args.entity_names, ["", "c"]);
        let args = parse(&format!(
            "{b} --entity-type users --entity-name u --entity-type clients --entity-default"
        ));
        assert_eq!(args.entity_names, ["u", ""]);
        let args = parse(&format!(
            "{b} --entity-type users --entity-default --entity-type clients --entity-default"
        ));
        assert_eq!(args.entity_names, ["", ""]);
        assert!(parse(&format!("{b} --entity-type users"))
            .entity_names
            .is_empty());
    }

    #[test]
    fn kafka_configs_argument_checks() {
        let check = |line: &str| check_configs_args(&parse(line));
        let b = "--bootstrap-server h:1";
        assert_eq!(
            check(&format!(
                "{b} --describe --entity-type users --entity-type users"
            )),
            Err("Duplicate entity type(s) specified: users".into())
        );
        assert_eq!(
            check(&format!(
                "{b} --describe --entity-type users --entity-type ips"
            )),
            Err("Only 'users' and 'clients' entity types may be specified together".into())
        );
        assert_eq!(
            check(&format!(
                "{b} --describe --entity-type groups --entity-default"
            )),
            Err("--entity-default must not be specified with --describe of groups".into())
        );
        assert_eq!(
            check(&format!("{b} --alter --entity-type users --add-config a=1")),
            Err("An entity-name or default entity must be specified with --alter of users, clients, brokers or ips".into())
        );
        assert_eq!(
            check(&format!(
                "{b} --alter --entity-type topics --entity-default --add-config a=1"
            )),
            Err("An entity name must be specified with --alter of topics".into())
        );
        assert_eq!(
            check(&format!("{b} --alter --entity-type users --entity-name u")),
            Err("At least one of --add-config, --add-config-file, or --delete-config must be specified with --alter".into())
        );
        assert_eq!(
            check(&format!(
                "{b} --alter --entity-type users --entity-type clients --entity-name u --add-config a=1"
            )),
            Err("An entity name must be specified for every entity type".into())
        );
        assert_eq!(
            check(&format!("{b} --alter --entity-type ips --entity-name no.such.host.invalid --add-config a=1")),
            Err(ConfigsArgsError::Invalid("The entity name for ips must be a valid IP or resolvable host, but it is: no.such.host.invalid".into()))
        );
        assert_eq!(
            check(&format!(
                "{b} --describe --entity-type users --entity-type clients --entity-name u"
            )),
            Ok(())
        );
        assert_eq!(
            check(&format!(
                "{b} --alter --entity-type ips --entity-default --delete-config a"
            )),
            Ok(())
        );
    }
}
