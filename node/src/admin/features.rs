//! `gregor features`: kafka-features.sh's `describe`, `upgrade`, `downgrade` and `disable`.
//!
//! `describe` reads the supported and finalized features from ApiVersions (what the admin
//! client's `describeFeatures` asks); the others send one UpdateFeatures and print each
//! feature's outcome as Kafka's `FeatureCommand` prints it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Args, Subcommand};
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::{ApiVersionsRequest, UpdateFeaturesRequest};
use kafka_protocol::protocol::StrBytes;

use super::{block_on, java_message, AdminClient, CommandConfig};

/// `FeatureUpdate.UpgradeType` codes.
const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;
const UNSAFE_DOWNGRADE: i8 = 3;

const METADATA_VERSION: &str = "metadata.version";

/// Kafka 4.1's `MetadataVersion` names of the KRaft levels (3.3-IV3 is the first), so that a
/// level the cluster does not support is still sent and refused by the controller.
const METADATA_VERSIONS: &[(i16, &str)] = &[
    (7, "3.3-IV3"),
    (8, "3.4-IV0"),
    (9, "3.5-IV0"),
    (10, "3.5-IV1"),
    (11, "3.5-IV2"),
    (12, "3.6-IV0"),
    (13, "3.6-IV1"),
    (14, "3.6-IV2"),
    (15, "3.7-IV0"),
    (16, "3.7-IV1"),
    (17, "3.7-IV2"),
    (18, "3.7-IV3"),
    (19, "3.7-IV4"),
    (20, "3.8-IV0"),
    (21, "3.9-IV0"),
    (22, "4.0-IV0"),
    (23, "4.0-IV1"),
    (24, "4.0-IV2"),
    (25, "4.0-IV3"),
    (26, "4.1-IV0"),
    (27, "4.1-IV1"),
];

/// `gregor features`.
#[derive(Args, Debug)]
pub struct FeaturesArgs {
    /// Where to connect.
    #[command(flatten)]
    pub bootstrap: super::Bootstrap,
    /// Property file containing configs to be passed to Admin Client.
    #[arg(long, value_name = "FILE")]
    pub command_config: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: FeaturesCommand,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum FeaturesCommand {
    /// Describes the current active feature flags.
    Describe,
    /// Upgrade one or more feature flags.
    Upgrade(Levels),
    /// Downgrade one or more feature flags.
    Downgrade {
        /// The levels.
        #[command(flatten)]
        levels: Levels,
        /// Perform this downgrade even if it may irreversibly destroy metadata.
        #[arg(long)]
        r#unsafe: bool,
    },
    /// Disable one or more feature flags. This is the same as downgrading the version to zero.
    Disable {
        /// A feature flag to disable.
        #[arg(long)]
        feature: Vec<String>,
        /// Disable this feature flag even if it may irreversibly destroy metadata.
        #[arg(long)]
        r#unsafe: bool,
        /// Perform a dry-run of this disable operation.
        #[arg(long)]
        dry_run: bool,
    },
}

/// The levels `upgrade` and `downgrade` ask for.
#[derive(Args, Debug)]
pub struct Levels {
    /// DEPRECATED -- The level to change the metadata to. For example, 3.3-IV3.
    #[arg(long)]
    metadata: Option<String>,
    /// A feature change we should perform, in feature=level format. For example:
    /// `metadata.version=5`.
    #[arg(long)]
    feature: Vec<String>,
    /// Validate this change, but do not perform it.
    #[arg(long)]
    dry_run: bool,
}

/// Runs `gregor features`; `Err` is the message for stderr (exit 1).
pub fn run_features(args: FeaturesArgs) -> Result<(), String> {
    block_on(run(args))?
}

async fn run(args: FeaturesArgs) -> Result<(), String> {
    let bootstrap = args
        .bootstrap
        .bootstrap_server
        .as_deref()
        .or(args.bootstrap.bootstrap_controller.as_deref())
        .unwrap_or_default();
    let config = CommandConfig::load(args.command_config.as_deref()).map_err(|e| e.to_string())?;
    let (op, updates, dry_run) = match args.command {
        FeaturesCommand::Describe => {
            let mut client = config.connect(bootstrap).await.map_err(|e| e.to_string())?;
            return describe(&mut client).await;
        }
        FeaturesCommand::Upgrade(asked) => ("upgrade", updates(&asked, UPGRADE)?, asked.dry_run),
        FeaturesCommand::Downgrade { levels, r#unsafe } => (
            "downgrade",
            updates(&levels, downgrade_type(r#unsafe))?,
            levels.dry_run,
        ),
        FeaturesCommand::Disable {
            feature,
            r#unsafe,
            dry_run,
        } => {
            let mut updates = BTreeMap::new();
            for name in feature {
                if updates
                    .insert(name.clone(), (0, downgrade_type(r#unsafe)))
                    .is_some()
                {
                    return Err(format!("Feature {name} was specified more than once."));
                }
            }
            ("disable", updates, dry_run)
        }
    };
    if updates.is_empty() {
        return Err(format!("You must specify at least one feature to {op}"));
    }
    // The admin client's `updateFeatures` refuses a blank name before sending anything.
    if updates.keys().any(|name| name.trim().is_empty()) {
        return Err("Provided feature can not be empty.".to_owned());
    }
    let mut client = config.connect(bootstrap).await.map_err(|e| e.to_string())?;
    update(&mut client, op, &updates, dry_run).await
}

fn downgrade_type(r#unsafe: bool) -> i8 {
    if r#unsafe {
        UNSAFE_DOWNGRADE
    } else {
        SAFE_DOWNGRADE
    }
}

/// The updates `--metadata` and `--feature` ask for, by feature name.
fn updates(asked: &Levels, upgrade_type: i8) -> Result<BTreeMap<String, (i16, i8)>, String> {
    let mut updates = BTreeMap::new();
    if let Some(version) = asked.metadata.as_deref() {
        outln!(" `metadata` flag is deprecated and may be removed in a future release.");
        let level = metadata_level(version).ok_or_else(|| {
            let supported: Vec<&str> = METADATA_VERSIONS.iter().map(|(_, name)| *name).collect();
            format!(
                "Unknown metadata.version {version}. Supported metadata.version are {}",
                supported.join(", ")
            )
        })?;
        updates.insert(METADATA_VERSION.to_owned(), (level, upgrade_type));
    }
    for feature in &asked.feature {
        let (name, level) = name_and_level(feature)?;
        check_level(level, upgrade_type)?;
        if updates
            .insert(name.clone(), (level, upgrade_type))
            .is_some()
        {
            return Err(format!("Feature {name} was specified more than once."));
        }
    }
    Ok(updates)
}

/// Kafka's `MetadataVersion.fromVersionString`: `4.0-IV3`, or `4.0` for the last of its
/// release.
fn metadata_level(version: &str) -> Option<i16> {
    let release = version.split('.').take(2).collect::<Vec<_>>().join(".");
    let key = if version.split('.').count() > 2 {
        release.as_str()
    } else {
        version
    };
    METADATA_VERSIONS
        .iter()
        .rev()
        .find(|(_, name)| *name == key || name.split('-').next() == Some(key))
        .map(|(level, _)| *level)
}

fn metadata_name(level: i16) -> String {
    METADATA_VERSIONS
        .iter()
        .find(|(known, _)| *known == level)
        .map_or_else(
            || format!("UNKNOWN {level}"),
            |(_, name)| (*name).to_owned(),
        )
}

/// What the admin client's `FeatureUpdate` refuses before anything is sent.
fn check_level(level: i16, upgrade_type: i8) -> Result<(), String> {
    if level == 0 && upgrade_type == UPGRADE {
        return Err(format!(
            "The upgradeType flag should be set to SAFE_DOWNGRADE or UNSAFE_DOWNGRADE when the provided maxVersionLevel:{level} is < 1."
        ));
    }
    if level < 0 {
        return Err("Cannot specify a negative version level.".to_owned());
    }
    Ok(())
}

/// Kafka's `FeatureCommand.parseNameAndLevel`.
fn name_and_level(input: &str) -> Result<(String, i16), String> {
    let Some((name, level)) = input.split_once('=') else {
        return Err(format!(
            "Can't parse feature=level string {input}: equals sign not found."
        ));
    };
    let level = level.trim();
    let parsed = level.parse::<i16>().map_err(|_| {
        format!("Can't parse feature=level string {input}: unable to parse {level} as a short.")
    })?;
    Ok((name.trim().to_owned(), parsed))
}

/// A level as `describe` prints it: `metadata.version` by its release name.
fn level_text(feature: &str, level: i16) -> String {
    if feature == METADATA_VERSION {
        metadata_name(level)
    } else {
        level.to_string()
    }
}

async fn describe(client: &mut AdminClient) -> Result<(), String> {
    // A v3+ request must name its client software (KIP-511).
    let request = ApiVersionsRequest::default()
        .with_client_software_name(StrBytes::from_static_str("gregor-features"))
        .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
    let (_, answer) = client.send(&request).await.map_err(|e| e.to_string())?;
    super::check(answer.error_code, None).map_err(|e| e.to_string())?;
    let finalized: BTreeMap<&str, i16> = answer
        .finalized_features
        .iter()
        .map(|f| (f.name.as_str(), f.max_version_level))
        .collect();
    let epoch = match answer.finalized_features_epoch {
        epoch if epoch >= 0 => epoch.to_string(),
        _ => "-".to_owned(),
    };
    let mut supported: Vec<_> = answer.supported_features.iter().collect();
    supported.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
    for feature in supported {
        let name = feature.name.as_str();
        outln!(
            "Feature: {name}\tSupportedMinVersion: {}\tSupportedMaxVersion: {}\tFinalizedVersionLevel: {}\tEpoch: {epoch}",
            level_text(name, feature.min_version),
            level_text(name, feature.max_version),
            level_text(name, finalized.get(name).copied().unwrap_or(0)),
        );
    }
    Ok(())
}

/// Sends the updates and prints each feature's outcome in name order; `Err` when any failed.
async fn update(
    client: &mut AdminClient,
    op: &str,
    updates: &BTreeMap<String, (i16, i8)>,
    dry_run: bool,
) -> Result<(), String> {
    let request = UpdateFeaturesRequest::default()
        .with_timeout_ms(30_000)
        .with_validate_only(dry_run)
        .with_feature_updates(
            updates
                .iter()
                .map(|(name, (level, upgrade_type))| {
                    FeatureUpdateKey::default()
                        .with_feature(StrBytes::from_string(name.clone()))
                        .with_max_version_level(*level)
                        .with_upgrade_type(*upgrade_type)
                })
                .collect(),
        );
    let (_, answer) = client.send(&request).await.map_err(|e| e.to_string())?;
    // A top-level error fails every feature (the admin client's `updateFeatures`); a
    // version-1 answer may also carry one per feature.
    let failure = |name: &str| -> Option<String> {
        if answer.error_code != 0 {
            return Some(java_message(
                answer.error_code,
                answer.error_message.as_deref(),
            ));
        }
        answer
            .results
            .iter()
            .find(|r| r.feature.as_str() == name && r.error_code != 0)
            .map(|r| java_message(r.error_code, r.error_message.as_deref()))
    };
    let mut failures = 0;
    for (name, (level, _)) in updates {
        let what = if op == "disable" {
            format!("disable {name}")
        } else {
            format!("{op} {name} to {level}")
        };
        match failure(name) {
            Some(message) => {
                failures += 1;
                let helper = if dry_run { "Can not" } else { "Could not" };
                outln!("{helper} {what}. {message}");
            }
            None => {
                let verb = if dry_run { "can be" } else { "was" };
                let done = if op == "disable" {
                    "disabled.".to_owned()
                } else {
                    format!("{op}d to {level}.")
                };
                outln!("{name} {verb} {done}");
            }
        }
    }
    if failures > 0 {
        return Err(format!(
            "{failures} out of {} operation(s) failed.",
            updates.len()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_versions_are_read_as_kafka_reads_them() {
        assert_eq!(metadata_level("4.0-IV3"), Some(25));
        assert_eq!(metadata_level("4.0"), Some(25));
        assert_eq!(metadata_level("3.7"), Some(19));
        assert_eq!(metadata_level("3.3-IV3"), Some(7));
        assert_eq!(metadata_level("4.1"), Some(27));
        assert_eq!(metadata_level("3.3-IV0"), None);
        assert_eq!(metadata_level("5.0"), None);
        assert_eq!(metadata_name(25), "4.0-IV3");
        assert_eq!(metadata_name(3), "UNKNOWN 3");
    }

    #[test]
    fn levels_the_admin_client_refuses_are_refused_before_sending() {
        assert_eq!(
            check_level(0, UPGRADE),
            Err("The upgradeType flag should be set to SAFE_DOWNGRADE or UNSAFE_DOWNGRADE when the provided maxVersionLevel:0 is < 1.".to_owned())
        );
        assert_eq!(check_level(0, SAFE_DOWNGRADE), Ok(()));
        assert_eq!(
            check_level(-1, SAFE_DOWNGRADE),
            Err("Cannot specify a negative version level.".to_owned())
        );
        assert_eq!(check_level(25, UPGRADE), Ok(()));
    }

    #[test]
    fn feature_levels_are_parsed_as_kafka_parses_them() {
        assert_eq!(
            name_and_level(" metadata.version = 24 "),
            Ok(("metadata.version".to_owned(), 24))
        );
        assert_eq!(
            name_and_level("metadata.version"),
            Err(
                "Can't parse feature=level string metadata.version: equals sign not found."
                    .to_owned()
            )
        );
        assert_eq!(
            name_and_level("kraft.version=x"),
            Err(
                "Can't parse feature=level string kraft.version=x: unable to parse x as a short."
                    .to_owned()
            )
        );
    }
}
