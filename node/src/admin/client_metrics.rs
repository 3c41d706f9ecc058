//! `gregor client-metrics`: kafka-client-metrics.sh (list, describe, alter and delete
//! client-metrics subscriptions) with its output.

use std::fmt::Write as _;

use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{DescribeConfigsRequest, IncrementalAlterConfigsRequest};
use kafka_protocol::protocol::StrBytes;

use super::configs::list_config_resources;
use super::{check, AdminClient, AdminError, CommandConfig};

const CLIENT_METRICS: i8 = 16;

/// The action.
#[derive(Debug)]
pub enum ClientMetricsAction {
    /// `--list`.
    List,
    /// `--describe [--name N]`.
    Describe(Option<String>),
    /// `--alter --name N` with the keys to set (an empty value deletes the key).
    Alter {
        /// Subscription name.
        name: String,
        /// `(key, value)` pairs.
        configs: Vec<(String, String)>,
    },
    /// `--delete --name N`.
    Delete(String),
}

async fn entries(
    client: &mut AdminClient,
    name: &str,
) -> Result<Vec<(String, String)>, AdminError> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(CLIENT_METRICS)
            .with_resource_name(StrBytes::from_string(name.to_owned()))
            .with_configuration_keys(None)]);
    let (_, response) = client.send(&request).await?;
    let result = response
        .results
        .first()
        .ok_or_else(|| AdminError::Io("DescribeConfigs answered without a result".into()))?;
    check(result.error_code, result.error_message.as_ref())?;
    Ok(result
        .configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                c.value
                    .as_ref()
                    .map_or_else(|| "null".into(), |v| v.to_string()),
            )
        })
        .collect())
}

fn not_found(name: &str) -> String {
    format!("The client-metric '{name}' doesn't exist and doesn't have dynamic config.")
}

/// Runs `action` against `bootstrap`; the output goes to `out`.
pub async fn run(
    config: &CommandConfig,
    bootstrap: &str,
    action: &ClientMetricsAction,
    out: &mut String,
) -> Result<(), AdminError> {
    let mut client = config.connect(bootstrap).await?;
    match action {
        ClientMetricsAction::List => {
            let names = list_config_resources(&mut client, &[CLIENT_METRICS]).await?;
            let _ = writeln!(out, "{}", names.join("\n"));
        }
        ClientMetricsAction::Describe(name) => {
            let known = list_config_resources(&mut client, &[CLIENT_METRICS]).await?;
            let names = match name {
                Some(name) if !known.contains(name) => {
                    let _ = writeln!(out, "{}", not_found(name));
                    return Ok(());
                }
                Some(name) => vec![name.clone()],
                None => known,
            };
            for name in names {
                let _ = writeln!(out, "Client metrics configs for {name} are:");
                for (key, value) in entries(&mut client, &name).await? {
                    let _ = writeln!(out, "  {key}={value}");
                }
            }
        }
        ClientMetricsAction::Alter { name, configs } => {
            let ops = configs
                .iter()
                .map(|(key, value)| {
                    AlterableConfig::default()
                        .with_name(StrBytes::from_string(key.clone()))
                        .with_config_operation(if value.is_empty() { 1 } else { 0 })
                        .with_value(Some(StrBytes::from_string(value.clone())))
                })
                .collect();
            alter(&mut client, name, ops).await?;
            let _ = writeln!(out, "Altered client metrics config for {name}.");
        }
        ClientMetricsAction::Delete(name) => {
            let ops = entries(&mut client, name)
                .await?
                .into_iter()
                .map(|(key, _)| {
                    AlterableConfig::default()
                        .with_name(StrBytes::from_string(key))
                        .with_config_operation(1)
                        .with_value(Some(StrBytes::from_static_str("")))
                })
                .collect();
            alter(&mut client, name, ops).await?;
            let _ = writeln!(out, "Deleted client metrics config for {name}.");
        }
    }
    Ok(())
}

async fn alter(
    client: &mut AdminClient,
    name: &str,
    ops: Vec<AlterableConfig>,
) -> Result<(), AdminError> {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(CLIENT_METRICS)
            .with_resource_name(StrBytes::from_string(name.to_owned()))
            .with_configs(ops),
    ]);
    let (_, response) = client.send(&request).await?;
    for result in &response.responses {
        check(result.error_code, result.error_message.as_ref())?;
    }
    Ok(())
}
