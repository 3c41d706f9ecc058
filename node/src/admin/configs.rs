//! `gregor configs`: kafka-configs.sh for topics, brokers, broker-loggers, groups and
//! client-metrics, with its output formats and messages (KIP-1142 wording for resources that
//! neither exist nor have dynamic configs).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    DescribeConfigsRequest, IncrementalAlterConfigsRequest, ListConfigResourcesRequest,
    ListGroupsRequest, MetadataRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::consumer_groups::list_groups_of;
use super::{check, AdminClient, AdminError, CommandConfig};

/// ConfigResource type ids.
/// The Java admin client's `default.api.timeout.ms`: how long a retriable answer is asked again.
const API_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const CLIENT_METRICS: i8 = 16;
const GROUP: i8 = 32;

/// An entity type of the tool, as typed on the command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EntityType {
    /// Topics.
    Topics,
    /// Brokers (a node id, or `--entity-default` for the cluster-wide default).
    Brokers,
    /// A broker's loggers.
    BrokerLoggers,
    /// Groups (they need not exist).
    Groups,
    /// Client-metrics subscriptions.
    ClientMetrics,
    /// Client quotas of user principals.
    Users,
    /// Client quotas of client ids.
    Clients,
    /// Connection quotas of IP addresses.
    Ips,
}

impl EntityType {
    /// The name as typed (`broker-loggers`).
    pub(crate) fn plural(self) -> &'static str {
        match self {
            EntityType::Topics => "topics",
            EntityType::Brokers => "brokers",
            EntityType::BrokerLoggers => "broker-loggers",
            EntityType::Groups => "groups",
            EntityType::ClientMetrics => "client-metrics",
            EntityType::Users => "users",
            EntityType::Clients => "clients",
            EntityType::Ips => "ips",
        }
    }

    /// Kafka's singular (the plural without its last letter: `client-metric`).
    pub(crate) fn singular(self) -> &'static str {
        let plural = self.plural();
        &plural[..plural.len() - 1]
    }

    fn resource_type(self) -> i8 {
        match self {
            EntityType::Topics => TOPIC,
            EntityType::Brokers => BROKER,
            EntityType::BrokerLoggers => BROKER_LOGGER,
            EntityType::Groups => GROUP,
            EntityType::ClientMetrics => CLIENT_METRICS,
            // Quotas are not config resources (client_quotas.rs never asks for this).
            EntityType::Users | EntityType::Clients | EntityType::Ips => 0,
        }
    }

    /// The ConfigSource shown without `--all` (None = every entry).
    fn dynamic_source(self, default_broker: bool) -> Option<i8> {
        match self {
            EntityType::Topics => Some(1),
            EntityType::Brokers if default_broker => Some(3),
            EntityType::Brokers => Some(2),
            EntityType::BrokerLoggers => None,
            EntityType::Groups => Some(8),
            EntityType::ClientMetrics => Some(7),
            EntityType::Users | EntityType::Clients | EntityType::Ips => None,
        }
    }

    /// Whether the type's configs are client quotas (DescribeClientQuotas/AlterClientQuotas).
    pub fn is_client_quota(self) -> bool {
        matches!(
            self,
            EntityType::Users | EntityType::Clients | EntityType::Ips
        )
    }
}

/// The admin-client name of a ConfigSource wire id (`ConfigEntry.ConfigSource`).
pub fn source_name(source: i8) -> &'static str {
    match source {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "DYNAMIC_CLIENT_METRICS_CONFIG",
        8 => "DYNAMIC_GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

/// Splits `--add-config` as kafka-configs.sh does: entries separated by commas outside square
/// brackets, each `key=value`; `[a,b]` becomes the list value `a,b`.
/// The `--add-config` pairs and the `--delete-config` keys of an `--alter`.
pub(crate) type Alterations = (Vec<(String, String)>, Vec<String>);

/// The `--add-config-file` and `--add-config` pairs (the latter win for a key in both, as in
/// kafka-configs.sh) and the `--delete-config` keys of an `--alter`.
pub(crate) fn alterations(command: &ConfigsCommand) -> Result<Alterations, AdminError> {
    let mut added = match &command.add_config_file {
        Some(path) => read_add_config_file(path)?,
        None => Vec::new(),
    };
    if let Some(text) = &command.add_config {
        for (key, value) in parse_add_config(text).map_err(AdminError::Io)? {
            added.retain(|(existing, _)| *existing != key);
            added.push((key, value));
        }
    }
    let deleted = command
        .delete_config
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(str::to_owned)
        .collect();
    Ok((added, deleted))
}

/// The pairs of an `--add-config-file` (Java properties), in file order.
fn read_add_config_file(path: &Path) -> Result<Vec<(String, String)>, AdminError> {
    let unreadable =
        |e: &dyn std::fmt::Display| AdminError::Io(format!("cannot read {}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(|e| unreadable(&e))?;
    let mut pairs = Vec::new();
    java_properties::PropertiesIter::new(std::io::BufReader::new(file))
        .read_into(|key, value| pairs.push((key, value)))
        .map_err(|e| unreadable(&e))?;
    Ok(pairs)
}

pub fn parse_add_config(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut entries = Vec::new();
    let mut depth = 0_i32;
    let mut current = String::new();
    for c in text.chars() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                entries.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    entries.push(current);
    entries
        .into_iter()
        .filter(|entry| !entry.trim().is_empty())
        .map(|entry| {
            let (key, value) = entry.split_once('=').ok_or_else(|| {
                format!("Invalid entity config: all configs to be added must be in the format \"key=val\". Found: {entry}")
            })?;
            let value = value.trim();
            let value = value
                .strip_prefix('[')
                .and_then(|v| v.strip_suffix(']'))
                .unwrap_or(value);
            Ok((key.trim().to_owned(), value.to_owned()))
        })
        .collect()
}

/// What to do.
#[derive(Debug)]
pub struct ConfigsCommand {
    /// `host:port[,host:port]`.
    pub bootstrap_server: String,
    /// `--alter` (else `--describe`).
    pub alter: bool,
    /// The entity type.
    pub entity_type: EntityType,
    /// `--entity-name`, or `Some("")` for `--entity-default`.
    pub entity_name: Option<String>,
    /// `--all`.
    pub all: bool,
    /// `--add-config`.
    pub add_config: Option<String>,
    /// `--add-config-file`.
    pub add_config_file: Option<PathBuf>,
    /// `--delete-config`.
    pub delete_config: Option<String>,
    /// `--command-config`.
    pub command_config: Option<PathBuf>,
    /// Every `--entity-type` in order (a user + client pair has two).
    pub entity_types: Vec<EntityType>,
    /// Every `--entity-name` / `--entity-default` (`""`) in order, paired by index with
    /// `entity_types` as kafka-configs.sh pairs them.
    pub entity_names: Vec<String>,
}

/// Runs the command; the output goes to `out`.
pub async fn run(command: &ConfigsCommand, out: &mut String) -> Result<(), AdminError> {
    let mut client = CommandConfig::load(command.command_config.as_deref())?
        .connect(&command.bootstrap_server)
        .await?;
    if command.entity_type.is_client_quota() {
        return super::client_quotas::run(&mut client, command, out).await;
    }
    if command.alter {
        alter(&mut client, command, out).await
    } else {
        describe(&mut client, command, out).await
    }
}

/// Lists config resources of `types` (ListConfigResources, v0 only for client metrics).
pub async fn list_config_resources(
    client: &mut AdminClient,
    types: &[i8],
) -> Result<Vec<String>, AdminError> {
    let version = client
        .version_of::<ListConfigResourcesRequest>()
        .ok_or_else(|| {
            AdminError::UnsupportedVersion(
                "The broker does not support ListConfigResources (Kafka 3.7+ is needed)".into(),
            )
        })?;
    if version == 0 && types != [CLIENT_METRICS] {
        return Err(AdminError::UnsupportedVersion(
            "The broker is too old: The v0 ListConfigResources only supports CLIENT_METRICS (listing other resources needs Kafka 4.1+)".into(),
        ));
    }
    // v0 (ListClientMetricsResources) has no ResourceTypes field: it lists client metrics only.
    let request = if version == 0 {
        ListConfigResourcesRequest::default()
    } else {
        ListConfigResourcesRequest::default().with_resource_types(types.to_vec())
    };
    let response = client.send_at(&request, version).await?;
    check(response.error_code, None)?;
    Ok(response
        .config_resources
        .iter()
        .filter(|r| version == 0 || types.contains(&r.resource_type))
        .map(|r| r.resource_name.to_string())
        .collect())
}

async fn topic_and_broker_names(
    client: &mut AdminClient,
) -> Result<(Vec<String>, Vec<String>), AdminError> {
    let (_, metadata) = client
        .send(&MetadataRequest::default().with_topics(None))
        .await?;
    let topics = metadata
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect();
    let brokers = metadata
        .brokers
        .iter()
        .map(|b| b.node_id.0.to_string())
        .collect();
    Ok((topics, brokers))
}

/// Existing group ids: ListGroups of every broker (each lists the groups it coordinates), as
/// kafka-configs.sh's admin client does; none when the brokers do not serve ListGroups.
async fn group_ids(client: &mut AdminClient) -> Result<Vec<String>, AdminError> {
    if client.version_of::<ListGroupsRequest>().is_none() {
        return Ok(Vec::new());
    }
    let (_, metadata) = client
        .send(&MetadataRequest::default().with_topics(Some(Vec::new())))
        .await?;
    let mut ids = Vec::new();
    for broker in &metadata.brokers {
        let address = format!("{}:{}", broker.host, broker.port);
        let listed = list_groups_of(&address, &ListGroupsRequest::default(), API_TIMEOUT).await?;
        for group in listed {
            let id = group.group_id.to_string();
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
    }
    Ok(ids)
}

/// The names `--describe` without `--entity-name` covers, or whether a named one exists.
async fn known_names(
    client: &mut AdminClient,
    entity_type: EntityType,
) -> Result<Vec<String>, AdminError> {
    Ok(match entity_type {
        EntityType::Topics => topic_and_broker_names(client).await?.0,
        EntityType::Brokers | EntityType::BrokerLoggers => topic_and_broker_names(client).await?.1,
        EntityType::ClientMetrics => list_config_resources(client, &[CLIENT_METRICS]).await?,
        EntityType::Groups => {
            let mut names = group_ids(client).await?;
            for name in list_config_resources(client, &[GROUP]).await? {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
            names
        }
        // Quota entities are listed by DescribeClientQuotas itself (`run` dispatches them).
        EntityType::Users | EntityType::Clients | EntityType::Ips => Vec::new(),
    })
}

async fn describe(
    client: &mut AdminClient,
    command: &ConfigsCommand,
    out: &mut String,
) -> Result<(), AdminError> {
    let entity_type = command.entity_type;
    let known = known_names(client, entity_type).await?;
    let entities = match &command.entity_name {
        Some(name) if name.is_empty() => vec![String::new()],
        Some(name) => {
            // As kafka-configs.sh: `--all` describes any name (its defaults at least).
            if !command.all && !known.contains(name) {
                let _ = writeln!(
                    out,
                    "The {} '{name}' doesn't exist and doesn't have dynamic config.",
                    entity_type.singular()
                );
                return Ok(());
            }
            vec![name.clone()]
        }
        None => {
            let mut all = known;
            if entity_type == EntityType::Brokers {
                all.push(String::new());
            }
            all
        }
    };
    for entity in entities {
        let filter = if command.all {
            None
        } else {
            entity_type.dynamic_source(entity.is_empty())
        };
        // Fetched before the header, as kafka-configs.sh does: a failure prints no header.
        let lines = describe_lines(client, entity_type.resource_type(), &entity, filter).await?;
        if entity.is_empty() {
            let _ = writeln!(
                out,
                "Default configs for {} in the cluster are:",
                entity_type.plural()
            );
        } else {
            let _ = writeln!(
                out,
                "{} configs for {} {entity} are:",
                if command.all { "All" } else { "Dynamic" },
                entity_type.singular()
            );
        }
        for line in lines {
            let _ = writeln!(out, "{line}");
        }
    }
    Ok(())
}

/// `  name=value sensitive=b synonyms={SOURCE:name=value, ...}` per entry, sorted by name.
async fn describe_lines(
    client: &mut AdminClient,
    resource_type: i8,
    name: &str,
    source: Option<i8>,
) -> Result<Vec<String>, AdminError> {
    let request = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(StrBytes::from_string(name.to_owned()))
            .with_configuration_keys(None)]);
    let (_, response) = client.send(&request).await?;
    let result = response
        .results
        .first()
        .ok_or_else(|| AdminError::Io("DescribeConfigs answered without a result".into()))?;
    check(result.error_code, result.error_message.as_ref())?;
    let mut entries: Vec<_> = result
        .configs
        .iter()
        .filter(|c| source.is_none_or(|s| c.config_source == s))
        .collect();
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let java = |v: &Option<StrBytes>| {
        v.as_ref()
            .map_or_else(|| "null".to_owned(), |v| v.to_string())
    };
    Ok(entries
        .into_iter()
        .map(|c| {
            let synonyms: Vec<String> = c
                .synonyms
                .iter()
                .map(|s| {
                    format!(
                        "{}:{}={}",
                        source_name(s.source),
                        s.name.as_str(),
                        java(&s.value)
                    )
                })
                .collect();
            format!(
                "  {}={} sensitive={} synonyms={{{}}}",
                c.name.as_str(),
                java(&c.value),
                c.is_sensitive,
                synonyms.join(", ")
            )
        })
        .collect())
}

async fn alter(
    client: &mut AdminClient,
    command: &ConfigsCommand,
    out: &mut String,
) -> Result<(), AdminError> {
    let entity_type = command.entity_type;
    let name = command.entity_name.clone().unwrap_or_default();
    let (added, deleted) = alterations(command)?;
    // As kafka-configs.sh: deleting a key the resource does not have is refused up front.
    if !deleted.is_empty() && entity_type != EntityType::BrokerLoggers {
        let filter = entity_type.dynamic_source(name.is_empty());
        let current = describe_lines(client, entity_type.resource_type(), &name, filter).await?;
        let has = |key: &str| {
            current
                .iter()
                .any(|line| line.trim_start().starts_with(&format!("{key}=")))
        };
        let missing: Vec<&str> = deleted
            .iter()
            .map(String::as_str)
            .filter(|k| !has(k))
            .collect();
        if !missing.is_empty() {
            return Err(AdminError::Io(format!(
                "Invalid config(s): {}",
                missing.join(",")
            )));
        }
    }
    let configs = added
        .iter()
        .map(|(key, value)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(key.clone()))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(value.clone())))
        })
        .chain(deleted.iter().map(|key| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(key.clone()))
                .with_config_operation(1)
                .with_value(Some(StrBytes::from_static_str("")))
        }))
        .collect();
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(entity_type.resource_type())
            .with_resource_name(StrBytes::from_string(name.clone()))
            .with_configs(configs),
    ]);
    let (_, response) = client.send(&request).await?;
    for result in &response.responses {
        check(result.error_code, result.error_message.as_ref())?;
    }
    if name.is_empty() {
        let _ = writeln!(
            out,
            "Completed updating default config for {} in the cluster.",
            entity_type.plural()
        );
    } else {
        let _ = writeln!(
            out,
            "Completed updating config for {} {name}.",
            entity_type.singular()
        );
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn add_config_parsing() {
        assert_eq!(
            parse_add_config("a=1,b=[x,y],c=z=w").unwrap(),
            [
                ("a".into(), "1".into()),
                ("b".into(), "x,y".into()),
                ("c".into(), "z=w".into())
            ]
        );
        assert!(parse_add_config("nokey").is_err());
        assert_eq!(EntityType::ClientMetrics.singular(), "client-metric");
        assert_eq!(EntityType::BrokerLoggers.singular(), "broker-logger");
    }
}
