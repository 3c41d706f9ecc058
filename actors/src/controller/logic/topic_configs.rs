//! The topic-level configs of Kafka 4.x (`LogConfig`), and their validation at topic creation.
//!
//! The definitions carry what DescribeConfigs / IncrementalAlterConfigs will need later: name,
//! type (with Kafka's `ConfigType` wire id), default (as Kafka renders it), sensitivity and a
//! short doc. Validation follows `LogConfig.validate` as the KRaft controller calls it: unknown
//! names first, then each value is parsed and checked against its validator, then the
//! cross-config rules. Messages are Kafka's `ConfigException` / `InvalidConfigurationException`
//! texts.

use std::fmt;

/// Kafka's `ConfigEntry.ConfigType`, with its wire ids (DescribeConfigs v3+ `ConfigType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    /// `true` / `false`.
    Boolean,
    /// A string.
    String,
    /// A 32-bit integer.
    Int,
    /// A 16-bit integer.
    Short,
    /// A 64-bit integer.
    Long,
    /// A double.
    Double,
    /// A comma-separated list.
    List,
    /// A Java class name.
    Class,
    /// A secret string.
    Password,
}

impl ConfigType {
    /// Wire id: BOOLEAN 1, STRING 2, INT 3, SHORT 4, LONG 5, DOUBLE 6, LIST 7, CLASS 8, PASSWORD 9.
    pub fn id(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Short => 4,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
            ConfigType::Class => 8,
            ConfigType::Password => 9,
        }
    }

    /// Kafka's `ConfigDef.Type` name, as it appears in "Not a number of type LONG".
    pub fn kafka_name(self) -> &'static str {
        match self {
            ConfigType::Boolean => "BOOLEAN",
            ConfigType::String => "STRING",
            ConfigType::Int => "INT",
            ConfigType::Short => "SHORT",
            ConfigType::Long => "LONG",
            ConfigType::Double => "DOUBLE",
            ConfigType::List => "LIST",
            ConfigType::Class => "CLASS",
            ConfigType::Password => "PASSWORD",
        }
    }

    /// Whether values of this type are secret (only PASSWORD).
    pub fn is_sensitive(self) -> bool {
        matches!(self, ConfigType::Password)
    }
}

/// Kafka's `DescribeConfigsResponse.ConfigSource` wire ids used for topic configs.
pub mod config_source {
    /// A per-topic override (`DYNAMIC_TOPIC_CONFIG`).
    pub const TOPIC_CONFIG: i8 = 1;
    /// The definition's default.
    pub const DEFAULT_CONFIG: i8 = 5;
}

/// A value check, modelled on the `ConfigDef` validators `LogConfig` uses.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Validator {
    /// Any value of the type.
    Any,
    /// `Range.atLeast` / `Range.between`, bounds inclusive.
    Range {
        /// Lower bound.
        min: Option<i64>,
        /// Upper bound.
        max: Option<i64>,
    },
    /// `ValidString.in`: the value must be one of these.
    OneOf(&'static [&'static str]),
    /// `ValidList.in`: every element must be one of these.
    ListOf(&'static [&'static str]),
    /// GZIP level: 1..=9, or -1 (the library default).
    GzipLevel,
    /// `ThrottledReplicaListValidator`: `*` or `partition:broker` pairs.
    ThrottledReplicas,
}

impl Validator {
    /// Kafka's rendering of the valid values (DescribeConfigs documentation / `toString`).
    pub fn describe(&self) -> String {
        match self {
            Validator::Any => String::new(),
            Validator::Range {
                min: None,
                max: None,
            } => "[...]".into(),
            Validator::Range {
                min: None,
                max: Some(max),
            } => format!("[...,{max}]"),
            Validator::Range {
                min: Some(min),
                max: None,
            } => format!("[{min},...]"),
            Validator::Range {
                min: Some(min),
                max: Some(max),
            } => format!("[{min},...,{max}]"),
            Validator::OneOf(values) | Validator::ListOf(values) => {
                format!("[{}]", values.join(", "))
            }
            Validator::GzipLevel => "[1,...,9] or -1".into(),
            Validator::ThrottledReplicas => {
                "[partitionId]:[brokerId],[partitionId]:[brokerId],...".into()
            }
        }
    }
}

/// One topic-level config definition.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TopicConfigDef {
    /// Config key.
    pub name: &'static str,
    /// Value type.
    pub config_type: ConfigType,
    /// Default, rendered as Kafka renders it (`ConfigDef.convertToString`).
    pub default: &'static str,
    /// Value check.
    pub validator: Validator,
    /// Short description.
    pub doc: &'static str,
}

impl TopicConfigDef {
    /// Whether the value must be hidden (PASSWORD type).
    pub fn is_sensitive(&self) -> bool {
        self.config_type.is_sensitive()
    }
}

/// A definition row (shared by the config tables of other resource types).
pub(crate) const fn def(
    name: &'static str,
    config_type: ConfigType,
    default: &'static str,
    validator: Validator,
    doc: &'static str,
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        config_type,
        default,
        validator,
        doc,
    }
}

/// An integer at least `min`.
pub(crate) const fn at_least(min: i64) -> Validator {
    Validator::Range {
        min: Some(min),
        max: None,
    }
}

const fn between(min: i64, max: i64) -> Validator {
    Validator::Range {
        min: Some(min),
        max: Some(max),
    }
}

const LONG_MAX: &str = "9223372036854775807";

/// Kafka's `BrokerCompressionType` names, in Kafka's order.
pub const COMPRESSION_TYPES: &[&str] =
    &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

use ConfigType::{Boolean, Double, Int, List, Long, String as Str};

/// Every topic-level config of Kafka 4.x, sorted by name.
#[rustfmt::skip]
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def("cleanup.policy", List, "delete", Validator::ListOf(&["compact", "delete"]),
        "Retention policy for old log segments: delete, compact, or both."),
    def("compression.gzip.level", Int, "-1", Validator::GzipLevel,
        "Compression level when compression.type is gzip."),
    def("compression.lz4.level", Int, "9", between(1, 17),
        "Compression level when compression.type is lz4."),
    def("compression.type", Str, "producer", Validator::OneOf(COMPRESSION_TYPES),
        "Final compression of the topic's data; producer keeps the producer's codec."),
    def("compression.zstd.level", Int, "3", between(-131072, 22),
        "Compression level when compression.type is zstd."),
    def("delete.retention.ms", Long, "86400000", at_least(0),
        "How long delete tombstones are kept on compacted topics."),
    def("file.delete.delay.ms", Long, "60000", at_least(0),
        "Delay before a deleted file is removed from the filesystem."),
    def("flush.messages", Long, LONG_MAX, at_least(1),
        "Messages written between forced fsyncs."),
    def("flush.ms", Long, LONG_MAX, at_least(0),
        "Time between forced fsyncs."),
    def("follower.replication.throttled.replicas", List, "", Validator::ThrottledReplicas,
        "Replicas whose follower-side replication is throttled, or *."),
    def("index.interval.bytes", Int, "4096", at_least(0),
        "Bytes between offset index entries."),
    def("leader.replication.throttled.replicas", List, "", Validator::ThrottledReplicas,
        "Replicas whose leader-side replication is throttled, or *."),
    def("local.retention.bytes", Long, "-2", at_least(-2),
        "Local size limit with tiered storage; -2 means retention.bytes."),
    def("local.retention.ms", Long, "-2", at_least(-2),
        "Local time limit with tiered storage; -2 means retention.ms."),
    def("max.compaction.lag.ms", Long, LONG_MAX, at_least(1),
        "Longest time a message stays ineligible for compaction."),
    def("max.message.bytes", Int, "1048588", at_least(0),
        "Largest record batch the topic accepts."),
    def("message.timestamp.after.max.ms", Long, "3600000", at_least(0),
        "How far in the future a CreateTime timestamp may be."),
    def("message.timestamp.before.max.ms", Long, LONG_MAX, at_least(0),
        "How far in the past a CreateTime timestamp may be."),
    def("message.timestamp.type", Str, "CreateTime", Validator::OneOf(&["CreateTime", "LogAppendTime"]),
        "Whether record timestamps are the producer's or the broker's."),
    def("min.cleanable.dirty.ratio", Double, "0.5", between(0, 1),
        "Dirty fraction of the log that triggers compaction."),
    def("min.compaction.lag.ms", Long, "0", at_least(0),
        "Shortest time a message stays uncompacted."),
    def("min.insync.replicas", Int, "1", at_least(1),
        "Fewest in-sync replicas for an acks=all write."),
    def("preallocate", Boolean, "false", Validator::Any,
        "Whether segment files are preallocated."),
    def("remote.log.copy.disable", Boolean, "false", Validator::Any,
        "Stops copying segments to remote storage."),
    def("remote.log.delete.on.disable", Boolean, "false", Validator::Any,
        "Deletes remote data when remote storage is disabled."),
    def("remote.storage.enable", Boolean, "false", Validator::Any,
        "Enables tiered storage for the topic."),
    def("retention.bytes", Long, "-1", Validator::Any,
        "Size limit per partition before old segments are deleted; -1 for none."),
    def("retention.ms", Long, "604800000", at_least(-1),
        "Time limit before old segments are deleted; -1 for none."),
    def("segment.bytes", Int, "1073741824", at_least(1024 * 1024),
        "Segment file size."),
    def("segment.index.bytes", Int, "10485760", at_least(4),
        "Offset index file size."),
    def("segment.jitter.ms", Long, "0", at_least(0),
        "Random jitter subtracted from segment.ms."),
    def("segment.ms", Long, "604800000", at_least(1),
        "Time after which a segment is rolled."),
    def("unclean.leader.election.enable", Boolean, "false", Validator::Any,
        "Whether out-of-sync replicas may become leader."),
];

/// The definition of a topic config key.
pub fn topic_config(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS
        .binary_search_by(|def| def.name.cmp(name))
        .ok()
        .and_then(|index| TOPIC_CONFIGS.get(index))
}

/// A config value parsed to its type.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigValue {
    /// BOOLEAN.
    Boolean(bool),
    /// STRING (trimmed).
    String(String),
    /// INT.
    Int(i32),
    /// LONG.
    Long(i64),
    /// DOUBLE.
    Double(f64),
    /// LIST.
    List(Vec<String>),
}

/// Why supplied topic configs are invalid. `Display` is Kafka's message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Not a topic config.
    #[error("Unknown topic config name: {0}")]
    UnknownName(String),
    /// A value that does not parse or fails its validator (`ConfigException(name, value, msg)`).
    #[error("Invalid value {value} for configuration {name}: {reason}")]
    InvalidValue {
        /// Config key.
        name: String,
        /// The value as Java prints it.
        value: String,
        /// Why.
        reason: String,
    },
    /// min.compaction.lag.ms above max.compaction.lag.ms.
    #[error("conflict topic config setting min.compaction.lag.ms ({min}) > max.compaction.lag.ms ({max})")]
    CompactionLagConflict {
        /// min.compaction.lag.ms.
        min: i64,
        /// max.compaction.lag.ms.
        max: i64,
    },
    /// remote.storage.enable=true; Gregor has no tiered storage.
    #[error("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")]
    TieredStorageDisabled,
}

fn invalid(name: &str, value: impl fmt::Display, reason: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        name: name.to_owned(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

/// Java's `Double.toString`.
fn java_double(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    let magnitude = value.abs();
    if value == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let text = value.to_string();
        if text.contains('.') {
            text
        } else {
            format!("{text}.0")
        }
    } else {
        let text = format!("{value:e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        if mantissa.contains('.') {
            format!("{mantissa}E{exponent}")
        } else {
            format!("{mantissa}.0E{exponent}")
        }
    }
}

/// Java's `List.toString`: `[a, b]`.
fn java_list(values: &[String]) -> String {
    format!("[{}]", values.join(", "))
}

/// Parses one value as `ConfigDef.parseType` does (trimming first).
pub fn parse_value(def: &TopicConfigDef, raw: &str) -> Result<ConfigValue, ConfigError> {
    let trimmed = raw.trim();
    let not_a_number = || {
        invalid(
            def.name,
            raw,
            format!("Not a number of type {}", def.config_type.kafka_name()),
        )
    };
    Ok(match def.config_type {
        ConfigType::Boolean => {
            if trimmed.eq_ignore_ascii_case("true") {
                ConfigValue::Boolean(true)
            } else if trimmed.eq_ignore_ascii_case("false") {
                ConfigValue::Boolean(false)
            } else {
                return Err(invalid(
                    def.name,
                    raw,
                    "Expected value to be either true or false",
                ));
            }
        }
        ConfigType::String | ConfigType::Password | ConfigType::Class => {
            ConfigValue::String(trimmed.to_owned())
        }
        ConfigType::Int => ConfigValue::Int(trimmed.parse().map_err(|_| not_a_number())?),
        ConfigType::Short => {
            ConfigValue::Int(trimmed.parse::<i16>().map_err(|_| not_a_number())?.into())
        }
        ConfigType::Long => ConfigValue::Long(trimmed.parse().map_err(|_| not_a_number())?),
        ConfigType::Double => {
            ConfigValue::Double(parse_java_double(trimmed).ok_or_else(not_a_number)?)
        }
        ConfigType::List => ConfigValue::List(if trimmed.is_empty() {
            Vec::new()
        } else {
            trimmed
                .split(',')
                .map(|part| part.trim().to_owned())
                .collect()
        }),
    })
}

/// `Double.parseDouble` for the forms clients send (decimal, exponent, NaN, Infinity).
fn parse_java_double(text: &str) -> Option<f64> {
    let unsigned = text.trim_start_matches(['+', '-']);
    if unsigned == "NaN" || unsigned == "Infinity" {
        return text.replace("Infinity", "inf").parse().ok();
    }
    if unsigned
        .chars()
        .any(|c| c.is_ascii_alphabetic() && !matches!(c, 'e' | 'E'))
    {
        return None;
    }
    text.parse().ok()
}

/// Checks a parsed value against the definition's validator.
pub fn check_value(def: &TopicConfigDef, value: &ConfigValue) -> Result<(), ConfigError> {
    match (def.validator, value) {
        (Validator::Any, _) => Ok(()),
        (Validator::Range { min, max }, value) => {
            let (number, shown) = match value {
                ConfigValue::Int(v) => (f64::from(*v), v.to_string()),
                ConfigValue::Long(v) => (*v as f64, v.to_string()),
                ConfigValue::Double(v) => (*v, java_double(*v)),
                _ => return Ok(()),
            };
            if let Some(min) = min {
                if number < min as f64 {
                    return Err(invalid(
                        def.name,
                        shown,
                        format!("Value must be at least {min}"),
                    ));
                }
            }
            if let Some(max) = max {
                if number > max as f64 {
                    return Err(invalid(
                        def.name,
                        shown,
                        format!("Value must be no more than {max}"),
                    ));
                }
            }
            Ok(())
        }
        (Validator::OneOf(valid), ConfigValue::String(s)) => one_of(def.name, valid, s),
        (Validator::ListOf(valid), ConfigValue::List(items)) => items
            .iter()
            .try_for_each(|item| one_of(def.name, valid, item)),
        (Validator::GzipLevel, ConfigValue::Int(level)) => {
            if *level > 9 || (*level < 1 && *level != -1) {
                Err(invalid(
                    def.name,
                    level,
                    "Value must be between 1 and 9 or equal to -1",
                ))
            } else {
                Ok(())
            }
        }
        (Validator::ThrottledReplicas, ConfigValue::List(items)) => {
            let pairs = items.iter().all(|item| is_replica_pair_or_empty(item));
            if pairs || items.concat() == "*" {
                Ok(())
            } else {
                Err(invalid(
                    def.name,
                    java_list(items),
                    format!(
                        "{} must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],...",
                        def.name
                    ),
                ))
            }
        }
        _ => Ok(()),
    }
}

fn one_of(name: &str, valid: &[&str], value: &str) -> Result<(), ConfigError> {
    if valid.contains(&value) {
        Ok(())
    } else {
        Err(invalid(
            name,
            value,
            format!("String must be one of: {}", valid.join(", ")),
        ))
    }
}

/// `([0-9]+:[0-9]+)?`
fn is_replica_pair_or_empty(item: &str) -> bool {
    if item.is_empty() {
        return true;
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    matches!(item.split_once(':'), Some((p, b)) if digits(p) && digits(b))
}

/// Validates the configs supplied with a new topic, as Kafka's controller does: every key must
/// be a topic config, every value must parse and pass its validator, then min/max compaction lag
/// must be ordered and tiered storage must stay off. `configs` are (key, value) in request order.
pub fn validate_creation_configs(configs: &[(String, String)]) -> Result<(), ConfigError> {
    for (name, _) in configs {
        if topic_config(name).is_none() {
            return Err(ConfigError::UnknownName(name.clone()));
        }
    }
    let mut min_lag = 0_i64;
    let mut max_lag = i64::MAX;
    let mut remote_storage = false;
    for def in TOPIC_CONFIGS {
        // The last occurrence of a key wins, as in Kafka's map.
        let Some((_, raw)) = configs.iter().rev().find(|(name, _)| name == def.name) else {
            continue;
        };
        let value = parse_value(def, raw)?;
        check_value(def, &value)?;
        match (def.name, value) {
            ("min.compaction.lag.ms", ConfigValue::Long(v)) => min_lag = v,
            ("max.compaction.lag.ms", ConfigValue::Long(v)) => max_lag = v,
            ("remote.storage.enable", ConfigValue::Boolean(v)) => remote_storage = v,
            _ => {}
        }
    }
    if min_lag > max_lag {
        return Err(ConfigError::CompactionLagConflict {
            min: min_lag,
            max: max_lag,
        });
    }
    if remote_storage {
        return Err(ConfigError::TieredStorageDisabled);
    }
    Ok(())
}

/// One entry of a topic's effective config, as CreateTopics v5+ returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectiveConfig {
    /// Config key.
    pub name: &'static str,
    /// Value (`None` for sensitive configs).
    pub value: Option<String>,
    /// [`config_source`] wire id.
    pub source: i8,
    /// Whether the value is secret.
    pub sensitive: bool,
}

/// Every topic config with the value a new topic gets: the supplied one (source TOPIC_CONFIG)
/// or the default (source DEFAULT_CONFIG), sorted by name.
pub fn effective_configs(supplied: &[(String, String)]) -> Vec<EffectiveConfig> {
    TOPIC_CONFIGS
        .iter()
        .map(|def| {
            let own = supplied.iter().rev().find(|(name, _)| name == def.name);
            let (value, source) = match own {
                Some((_, value)) => (value.clone(), config_source::TOPIC_CONFIG),
                None => (def.default.to_owned(), config_source::DEFAULT_CONFIG),
            };
            EffectiveConfig {
                name: def.name,
                value: (!def.is_sensitive()).then_some(value),
                source,
                sensitive: def.is_sensitive(),
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;

    fn configs(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn error(pairs: &[(&str, &str)]) -> String {
        validate_creation_configs(&configs(pairs))
            .expect_err("invalid")
            .to_string()
    }

    #[test]
    fn definitions_are_sorted_and_complete() {
        assert_eq!(TOPIC_CONFIGS.len(), 33);
        assert!(TOPIC_CONFIGS.windows(2).all(|w| w[0].name < w[1].name));
        let def = topic_config("retention.ms").expect("defined");
        assert_eq!((def.config_type.id(), def.default), (5, "604800000"));
        assert_eq!(
            topic_config("cleanup.policy").map(|d| d.config_type.id()),
            Some(7)
        );
        assert_eq!(topic_config("message.format.version"), None);
        // Every default passes its own validator.
        for def in TOPIC_CONFIGS {
            let value = parse_value(def, def.default).expect(def.name);
            assert_eq!(check_value(def, &value), Ok(()), "{}", def.name);
        }
    }

    #[test]
    fn valid_configs_pass() {
        let ok = configs(&[
            ("cleanup.policy", "compact, delete"),
            ("compression.type", "zstd"),
            ("retention.ms", " -1 "),
            ("min.cleanable.dirty.ratio", "0.1"),
            ("message.timestamp.type", "LogAppendTime"),
            ("preallocate", "TRUE"),
            ("leader.replication.throttled.replicas", "0:1,1:2"),
            ("follower.replication.throttled.replicas", "*"),
            ("compression.gzip.level", "-1"),
            ("cleanup.policy", ""),
        ]);
        assert_eq!(validate_creation_configs(&ok), Ok(()));
    }

    #[test]
    fn kafka_messages() {
        assert_eq!(
            error(&[("foo.bar", "1")]),
            "Unknown topic config name: foo.bar"
        );
        assert_eq!(
            error(&[("retention.ms", "abc")]),
            "Invalid value abc for configuration retention.ms: Not a number of type LONG"
        );
        assert_eq!(
            error(&[("retention.ms", "-5")]),
            "Invalid value -5 for configuration retention.ms: Value must be at least -1"
        );
        assert_eq!(
            error(&[("segment.bytes", "1000")]),
            "Invalid value 1000 for configuration segment.bytes: Value must be at least 1048576"
        );
        assert_eq!(
            error(&[("max.message.bytes", "99999999999")]),
            "Invalid value 99999999999 for configuration max.message.bytes: Not a number of type INT"
        );
        assert_eq!(
            error(&[("min.cleanable.dirty.ratio", "2")]),
            "Invalid value 2.0 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"
        );
        assert_eq!(
            error(&[("cleanup.policy", "compact,foo")]),
            "Invalid value foo for configuration cleanup.policy: String must be one of: compact, delete"
        );
        assert_eq!(
            error(&[("compression.type", "brotli")]),
            "Invalid value brotli for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer"
        );
        assert_eq!(
            error(&[("message.timestamp.type", "createtime")]),
            "Invalid value createtime for configuration message.timestamp.type: String must be one of: CreateTime, LogAppendTime"
        );
        assert_eq!(
            error(&[("preallocate", "yes")]),
            "Invalid value yes for configuration preallocate: Expected value to be either true or false"
        );
        assert_eq!(
            error(&[("compression.gzip.level", "0")]),
            "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"
        );
        assert_eq!(
            error(&[("compression.lz4.level", "18")]),
            "Invalid value 18 for configuration compression.lz4.level: Value must be no more than 17"
        );
        assert_eq!(
            error(&[("leader.replication.throttled.replicas", "0:1, x")]),
            "Invalid value [0:1, x] for configuration leader.replication.throttled.replicas: leader.replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
        );
        assert_eq!(
            error(&[("min.compaction.lag.ms", "200"), ("max.compaction.lag.ms", "100")]),
            "conflict topic config setting min.compaction.lag.ms (200) > max.compaction.lag.ms (100)"
        );
        assert_eq!(
            error(&[("remote.storage.enable", "true")]),
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
        );
        // Unknown names are reported before bad values.
        assert_eq!(
            error(&[("retention.ms", "abc"), ("nope", "1")]),
            "Unknown topic config name: nope"
        );
    }

    #[test]
    fn java_double_rendering() {
        assert_eq!(java_double(2.0), "2.0");
        assert_eq!(java_double(1.5), "1.5");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(1.5e-4), "1.5E-4");
        assert_eq!(java_double(f64::NAN), "NaN");
        assert_eq!(parse_java_double("Infinity"), Some(f64::INFINITY));
        assert_eq!(parse_java_double("inf"), None);
    }

    #[test]
    fn effective_configs_mark_overrides() {
        let effective = effective_configs(&configs(&[("retention.ms", "1000")]));
        assert_eq!(effective.len(), 33);
        let find = |name: &str| effective.iter().find(|c| c.name == name).cloned();
        assert_eq!(
            find("retention.ms"),
            Some(EffectiveConfig {
                name: "retention.ms",
                value: Some("1000".into()),
                source: 1,
                sensitive: false,
            })
        );
        assert_eq!(
            find("cleanup.policy"),
            Some(EffectiveConfig {
                name: "cleanup.policy",
                value: Some("delete".into()),
                source: 5,
                sensitive: false,
            })
        );
    }
}
