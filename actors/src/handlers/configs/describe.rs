//! DescribeConfigs (32): every requested resource's configs with Kafka's sources and synonyms,
//! from one image snapshot (Kafka's `ConfigHelper.describeConfigs`).

use std::collections::HashSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{DescribeConfigsRequest, DescribeConfigsResponse};
use kafka_protocol::protocol::StrBytes;

use gregor_publishers::MetadataImage;

use super::ConfigSupport;
use crate::controller::logic::configs::{
    broker, client_metrics, config_source as src, group, resource_type as rt, ApiError,
};
use crate::controller::logic::topic_configs::{ConfigType, TopicConfigDef, TOPIC_CONFIGS};
use crate::controller::logic::topic_name;

fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// One config entry before the request's options are applied.
struct Entry {
    name: String,
    value: Option<String>,
    read_only: bool,
    source: i8,
    sensitive: bool,
    /// (name, value, source), most specific first.
    synonyms: Vec<(String, Option<String>, i8)>,
    config_type: i8,
    doc: Option<String>,
}

impl Entry {
    fn from_def(def: &TopicConfigDef, synonyms: Vec<(String, Option<String>, i8)>) -> Self {
        let (value, source) = synonyms
            .first()
            .map(|(_, value, source)| (value.clone(), *source))
            .unwrap_or((Some(def.default.to_owned()), src::DEFAULT_CONFIG));
        Entry {
            name: def.name.to_owned(),
            value,
            read_only: false,
            source,
            sensitive: def.is_sensitive(),
            synonyms,
            config_type: def.config_type.id(),
            doc: Some(def.doc.to_owned()),
        }
    }
}

/// A config value as Kafka prints it once parsed (`ConfigDef.parseType`, then
/// `convertToString`): trimmed, numbers and booleans canonical, list items joined by a bare
/// comma. A value that does not parse is shown as stored.
fn as_parsed(value: &str, config_type: ConfigType) -> String {
    let trimmed = value.trim();
    match config_type {
        ConfigType::Boolean if trimmed.eq_ignore_ascii_case("true") => "true".to_owned(),
        ConfigType::Boolean if trimmed.eq_ignore_ascii_case("false") => "false".to_owned(),
        ConfigType::Int | ConfigType::Short | ConfigType::Long => trimmed
            .parse::<i64>()
            .map_or_else(|_| value.to_owned(), |n| n.to_string()),
        ConfigType::Double => trimmed
            .parse::<f64>()
            .map_or_else(|_| value.to_owned(), java_double),
        ConfigType::List if trimmed.is_empty() => String::new(),
        ConfigType::List => trimmed
            .split(',')
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(","),
        ConfigType::Boolean => value.to_owned(),
        ConfigType::String | ConfigType::Class | ConfigType::Password => trimmed.to_owned(),
    }
}

/// Java's `Double.toString`: the shortest digits, plain with at least one fraction digit
/// from 10^-3 to 10^7, else `d.dddE±n`.
fn java_double(value: f64) -> String {
    if !value.is_finite() {
        return if value.is_nan() {
            "NaN".to_owned()
        } else if value > 0.0 {
            "Infinity".to_owned()
        } else {
            "-Infinity".to_owned()
        };
    }
    let magnitude = value.abs();
    if value == 0.0 || (1e-3..1e7).contains(&magnitude) {
        let plain = format!("{value}");
        return if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        };
    }
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let mantissa = if mantissa.contains('.') {
        mantissa.to_owned()
    } else {
        format!("{mantissa}.0")
    };
    format!("{mantissa}E{exponent}")
}

fn broker_id(name: &str) -> Result<i32, ApiError> {
    name.parse().map_err(|_| {
        ApiError::invalid_request(format!("Broker id must be an integer, but it is: {name}"))
    })
}

/// Kafka's `configSynonyms` for this node: the broker keys `names` (one topic config's
/// broker synonyms, highest precedence first) at each level in turn: this node's dynamic
/// configs, the cluster-wide dynamic defaults, the static configs, then the built-in defaults
/// (only the keys that have one: `log.retention.hours`, not `log.retention.ms`).
fn broker_chain(
    image: &MetadataImage,
    node_id: i32,
    names: &[&str],
    support: &ConfigSupport,
) -> Vec<(String, Option<String>, i8)> {
    let mut chain = dynamic_chain(image, node_id, names);
    for name in names {
        if let Some(value) = support.static_log_configs.get(*name) {
            chain.push((
                (*name).to_owned(),
                Some(value.clone()),
                src::STATIC_BROKER_CONFIG,
            ));
        }
    }
    for name in names {
        if let Some(default) = broker::broker_default(name) {
            chain.push((
                (*name).to_owned(),
                Some(default.to_owned()),
                src::DEFAULT_CONFIG,
            ));
        }
    }
    chain
}

/// The dynamic levels of [`broker_chain`]: the broker keys `names` in this node's dynamic
/// configs, then in the cluster-wide defaults.
fn dynamic_chain(
    image: &MetadataImage,
    node_id: i32,
    names: &[&str],
) -> Vec<(String, Option<String>, i8)> {
    let node = node_id.to_string();
    let mut chain = Vec::new();
    for (resource, source) in [
        (node.as_str(), src::DYNAMIC_BROKER_CONFIG),
        ("", src::DYNAMIC_DEFAULT_BROKER_CONFIG),
    ] {
        for name in names {
            if let Some(value) = image.configs.value(rt::BROKER, resource, name) {
                chain.push(((*name).to_owned(), Some(value.to_owned()), source));
            }
        }
    }
    chain
}

/// The entry of a dynamic broker key whose value is the first of `synonyms`, as Kafka's
/// `createBrokerConfigEntry`: a custom key has no known type, so Kafka takes it as possibly
/// sensitive and shows neither its value nor its synonyms' (and it is read-only: no
/// reconfigurable of Kafka's owns it).
fn dynamic_broker_entry(name: &str, synonyms: Vec<(String, Option<String>, i8)>) -> Entry {
    let (value, source) = synonyms
        .first()
        .map_or((None, src::DEFAULT_CONFIG), |(_, value, source)| {
            (value.clone(), *source)
        });
    let known = broker::broker_config(name)
        .map(|def| (def.config_type.id(), def.doc))
        .or_else(|| {
            broker::CONNECTION_LIMITS
                .iter()
                .find(|(key, ..)| *key == name)
                .map(|(_, config_type, _, doc)| (*config_type, *doc))
        });
    match known {
        Some((config_type, doc)) => Entry {
            name: name.to_owned(),
            value,
            read_only: false,
            source,
            sensitive: false,
            synonyms,
            config_type,
            doc: Some(doc.to_owned()),
        },
        None => Entry {
            name: name.to_owned(),
            value: None,
            read_only: broker::is_custom_config(name),
            source,
            sensitive: true,
            synonyms: synonyms
                .into_iter()
                .map(|(name, _, source)| (name, None, source))
                .collect(),
            config_type: 0,
            doc: None,
        },
    }
}

/// The entry of a broker key that sets a topic config's broker default, as Kafka's
/// `createBrokerConfigEntry`: its synonyms from its own name on (a higher-precedence key such as
/// `log.retention.ms` is its own entry), its value the first of them, or none.
fn broker_log_entry(
    image: &MetadataImage,
    node_id: i32,
    name: &str,
    support: &ConfigSupport,
) -> Option<Entry> {
    let topic = broker::topic_config_of(name)?;
    let names = broker::broker_synonyms_of_topic_config(topic);
    let synonyms: Vec<_> = broker_chain(image, node_id, &names, support)
        .into_iter()
        .skip_while(|(synonym, ..)| synonym != name)
        .collect();
    let (value, source) = synonyms
        .first()
        .map_or((None, src::DEFAULT_CONFIG), |(_, value, source)| {
            (value.clone(), *source)
        });
    let (config_type, doc, read_only) = match broker::broker_config(name) {
        Some(def) => (def.config_type.id(), def.doc, false),
        // The unit synonyms are static INT keys.
        None => (3, "The same broker default in a coarser unit, read only when the keys before it are unset.", true),
    };
    Some(Entry {
        name: name.to_owned(),
        value,
        read_only,
        source,
        sensitive: false,
        synonyms,
        config_type,
        doc: Some(doc.to_owned()),
    })
}

fn describe_one(
    image: &MetadataImage,
    resource_type: i8,
    name: &str,
    node_id: i32,
    support: &ConfigSupport,
) -> Result<Vec<Entry>, ApiError> {
    match resource_type {
        rt::TOPIC => {
            topic_name::validate(name)
                .map_err(|e| ApiError::new(ResponseError::InvalidTopicException, e.to_string()))?;
            if image.topics.get_by_name(name).is_none() {
                return Err(ApiError {
                    code: ResponseError::UnknownTopicOrPartition,
                    message: None,
                });
            }
            Ok(TOPIC_CONFIGS
                .iter()
                .map(|def| {
                    let mut synonyms = Vec::new();
                    if let Some(value) = image.configs.value(rt::TOPIC, name, def.name) {
                        synonyms.push((
                            def.name.to_owned(),
                            Some(value.to_owned()),
                            src::TOPIC_CONFIG,
                        ));
                    }
                    let names = broker::broker_synonyms_of_topic_config(def.name);
                    synonyms.extend(broker_chain(image, node_id, &names, support));
                    let mut entry = Entry::from_def(def, synonyms);
                    // A unit synonym's value (`log.retention.hours=2`) in the topic's unit, as
                    // the parsed value prints (Kafka's `ConfigDef.convertToString`).
                    if let Some((name, Some(value), _)) = entry.synonyms.first() {
                        entry.value = Some(as_parsed(
                            &broker::topic_value_of(name, value),
                            def.config_type,
                        ));
                    }
                    entry
                })
                .collect())
        }
        rt::BROKER if name.is_empty() => Ok(image
            .configs
            .get(rt::BROKER, "")
            .map(|configs| {
                configs
                    .iter()
                    .map(|(key, value)| {
                        let synonyms = vec![(
                            key.to_owned(),
                            Some(value.to_owned()),
                            src::DYNAMIC_DEFAULT_BROKER_CONFIG,
                        )];
                        dynamic_broker_entry(key, synonyms)
                    })
                    .collect()
            })
            .unwrap_or_default()),
        rt::BROKER => {
            if broker_id(name)? != node_id {
                return Err(ApiError::invalid_request(format!(
                    "Unexpected broker id, expected {node_id} or empty string, but received {name}"
                )));
            }
            let mut entries: Vec<Entry> = support
                .static_configs
                .iter()
                .map(|config| {
                    let source = if config.is_default {
                        src::DEFAULT_CONFIG
                    } else {
                        src::STATIC_BROKER_CONFIG
                    };
                    Entry {
                        name: config.name.clone(),
                        value: config.value.clone(),
                        read_only: true,
                        source,
                        sensitive: false,
                        synonyms: vec![(config.name.clone(), config.value.clone(), source)],
                        config_type: config.config_type,
                        doc: Some(config.doc.clone()),
                    }
                })
                .collect();
            for entry in &mut entries {
                if broker::is_connection_limit(&entry.name) {
                    let mut synonyms = dynamic_chain(image, node_id, &[&entry.name]);
                    synonyms.append(&mut entry.synonyms);
                    *entry = Entry {
                        doc: entry.doc.take(),
                        ..dynamic_broker_entry(&entry.name, synonyms)
                    };
                }
            }
            // Custom keys, stored for plugins, are listed as Kafka lists them (its originals).
            let mut custom: Vec<String> = [node_id.to_string(), String::new()]
                .iter()
                .filter_map(|resource| image.configs.get(rt::BROKER, resource))
                .flat_map(|configs| configs.iter().map(|(key, _)| key.to_owned()))
                .filter(|key| broker::is_custom_config(key))
                .collect();
            custom.sort();
            custom.dedup();
            entries.extend(
                custom
                    .iter()
                    .map(|key| dynamic_broker_entry(key, dynamic_chain(image, node_id, &[key]))),
            );
            entries.extend(
                broker::TOPIC_SYNONYMS
                    .iter()
                    .map(|(name, _)| *name)
                    .chain(broker::UNIT_SYNONYMS.iter().map(|unit| unit.name))
                    .filter_map(|name| broker_log_entry(image, node_id, name, support)),
            );
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            Ok(entries)
        }
        rt::BROKER_LOGGER => {
            if name.is_empty() {
                return Err(ApiError::invalid_request("Broker id must not be empty"));
            }
            if broker_id(name)? != node_id {
                return Err(ApiError::invalid_request(format!(
                    "Unexpected broker id, expected {node_id} but received {name}"
                )));
            }
            Ok(support
                .loggers
                .loggers()
                .into_iter()
                .map(|(logger, level)| Entry {
                    name: logger,
                    value: Some(level),
                    read_only: false,
                    source: src::DYNAMIC_BROKER_LOGGER_CONFIG,
                    sensitive: false,
                    synonyms: Vec::new(),
                    config_type: 0,
                    doc: None,
                })
                .collect())
        }
        rt::CLIENT_METRICS => {
            if name.is_empty() {
                return Err(ApiError::invalid_request(
                    "Client metrics subscription name must not be empty",
                ));
            }
            Ok(client_metrics::CLIENT_METRICS_CONFIGS
                .iter()
                .map(|def| {
                    let set = image.configs.value(rt::CLIENT_METRICS, name, def.name);
                    let mut entry = Entry::from_def(def, Vec::new());
                    if let Some(value) = set {
                        entry.value = Some(value.to_owned());
                        entry.source = src::CLIENT_METRICS_CONFIG;
                    }
                    entry
                })
                .collect())
        }
        rt::GROUP => {
            if name.is_empty() {
                return Err(ApiError::invalid_request("Group name must not be empty"));
            }
            Ok(group::GROUP_CONFIGS
                .iter()
                .map(|def| {
                    let synonym = match image.configs.value(rt::GROUP, name, def.name) {
                        Some(value) => (
                            def.name.to_owned(),
                            Some(value.to_owned()),
                            src::GROUP_CONFIG,
                        ),
                        // The broker's `group.*` value, still DEFAULT_CONFIG under the
                        // group key's own name, as Kafka's createGroupConfigEntry.
                        None => (
                            def.name.to_owned(),
                            Some(support.group_defaults.value_of(def)),
                            src::DEFAULT_CONFIG,
                        ),
                    };
                    Entry::from_def(def, vec![synonym])
                })
                .collect())
        }
        other => Err(ApiError::invalid_request(format!(
            "Unsupported resource type: {}",
            rt::name(other)
        ))),
    }
}

/// Kafka's message for INVALID_REQUEST, which a whole refused request carries.
const INVALID_REQUEST_MESSAGE: &str = "This most likely occurs because of a request being malformed by the client library or the message was sent to an incompatible broker. See the broker logs for more details.";

/// The DescribeConfigs response: one result per requested resource, in request order; a
/// failing resource gets its error and empty configs, never affecting the others. A resource
/// of an unknown type fails the whole request: Kafka throws while it sorts the resources by
/// authorization, and every resource gets INVALID_REQUEST with the error's own message.
pub fn describe_configs(
    image: &MetadataImage,
    request: &DescribeConfigsRequest,
    node_id: i32,
    support: &ConfigSupport,
) -> DescribeConfigsResponse {
    let known = [
        rt::TOPIC,
        rt::BROKER,
        rt::BROKER_LOGGER,
        rt::CLIENT_METRICS,
        rt::GROUP,
    ];
    if request
        .resources
        .iter()
        .any(|resource| !known.contains(&resource.resource_type))
    {
        let results = request
            .resources
            .iter()
            .map(|resource| {
                DescribeConfigsResult::default()
                    .with_resource_type(resource.resource_type)
                    .with_resource_name(resource.resource_name.clone())
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_static_str(INVALID_REQUEST_MESSAGE)))
            })
            .collect();
        return DescribeConfigsResponse::default().with_results(results);
    }
    let results = request
        .resources
        .iter()
        .map(|resource| {
            let name = resource.resource_name.as_str();
            let base = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            match describe_one(image, resource.resource_type, name, node_id, support) {
                Err(error) => base
                    .with_error_code(error.code.code())
                    .with_error_message(error.message.map(StrBytes::from_string)),
                Ok(entries) => {
                    let keys: HashSet<&str> = resource
                        .configuration_keys
                        .as_deref()
                        .unwrap_or_default()
                        .iter()
                        .map(|k| k.as_str())
                        .collect();
                    let configs = entries
                        .into_iter()
                        .filter(|entry| keys.is_empty() || keys.contains(entry.name.as_str()))
                        .map(|entry| {
                            let value = if entry.sensitive { None } else { entry.value };
                            let synonyms = if request.include_synonyms {
                                entry
                                    .synonyms
                                    .into_iter()
                                    .map(|(name, value, source)| {
                                        DescribeConfigsSynonym::default()
                                            .with_name(s(&name))
                                            .with_value(if entry.sensitive {
                                                None
                                            } else {
                                                value.map(StrBytes::from_string)
                                            })
                                            .with_source(source)
                                    })
                                    .collect()
                            } else {
                                Vec::new()
                            };
                            DescribeConfigsResourceResult::default()
                                .with_name(StrBytes::from_string(entry.name))
                                .with_value(value.map(StrBytes::from_string))
                                .with_read_only(entry.read_only)
                                .with_config_source(entry.source)
                                .with_is_sensitive(entry.sensitive)
                                .with_synonyms(synonyms)
                                .with_config_type(entry.config_type)
                                .with_documentation(if request.include_documentation {
                                    entry.doc.map(StrBytes::from_string)
                                } else {
                                    None
                                })
                        })
                        .collect();
                    base.with_configs(configs)
                }
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use gregor_publishers::records::{ConfigRecord, MetadataRecord};
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;

    use super::*;
    use crate::controller::logic::configs::group::GroupConfigDefaults;
    use crate::controller::logic::configs::testing::image_with;
    use crate::handlers::configs::loggers::tests::FakeLoggers;

    fn support() -> ConfigSupport {
        ConfigSupport {
            static_configs: Arc::new(vec![
                super::super::StaticBrokerConfig {
                    name: "num.partitions".into(),
                    value: Some("3".into()),
                    is_default: false,
                    config_type: 3,
                    doc: "partitions".into(),
                },
                super::super::StaticBrokerConfig {
                    name: "max.connections".into(),
                    value: Some("2147483647".into()),
                    is_default: true,
                    config_type: 3,
                    doc: "connections".into(),
                },
                super::super::StaticBrokerConfig {
                    name: "max.connections.per.ip".into(),
                    value: Some("50".into()),
                    is_default: false,
                    config_type: 3,
                    doc: "per ip".into(),
                },
            ]),
            static_log_configs: Arc::new(
                [
                    ("log.retention.hours", "2"),
                    ("log.cleanup.policy", "compact"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            ),
            group_defaults: GroupConfigDefaults {
                consumer_session_timeout_ms: 12_000,
                consumer_heartbeat_interval_ms: 2000,
            },
            loggers: Arc::new(FakeLoggers::default()),
        }
    }

    fn config(resource_type: i8, name: &str, key: &str, value: &str) -> MetadataRecord {
        MetadataRecord::Config(ConfigRecord {
            resource_type,
            resource_name: name.into(),
            name: key.into(),
            value: Some(value.into()),
        })
    }

    fn describe(image: &MetadataImage, resource_type: i8, name: &str) -> DescribeConfigsResult {
        let request = DescribeConfigsRequest::default()
            .with_include_synonyms(true)
            .with_resources(vec![DescribeConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(s(name))]);
        describe_configs(image, &request, 1, &support())
            .results
            .remove(0)
    }

    fn entry<'a>(
        result: &'a DescribeConfigsResult,
        key: &str,
    ) -> &'a DescribeConfigsResourceResult {
        result
            .configs
            .iter()
            .find(|c| c.name.as_str() == key)
            .unwrap()
    }

    fn synonyms(entry: &DescribeConfigsResourceResult) -> Vec<(String, Option<String>, i8)> {
        entry
            .synonyms
            .iter()
            .map(|s| {
                (
                    s.name.to_string(),
                    s.value.as_ref().map(ToString::to_string),
                    s.source,
                )
            })
            .collect()
    }

    #[test]
    fn topic_values_show_as_parsed() {
        for (value, config_type, shown) in [
            (" 1000 ", ConfigType::Long, "1000"),
            ("+1048576", ConfigType::Int, "1048576"),
            ("TRUE", ConfigType::Boolean, "true"),
            ("compact, delete", ConfigType::List, "compact,delete"),
            ("  ", ConfigType::List, ""),
            ("0.50", ConfigType::Double, "0.5"),
            ("1", ConfigType::Double, "1.0"),
            ("0.0001", ConfigType::Double, "1.0E-4"),
            ("12345678", ConfigType::Double, "1.2345678E7"),
            (" producer ", ConfigType::String, "producer"),
            ("not-a-number", ConfigType::Long, "not-a-number"),
        ] {
            assert_eq!(as_parsed(value, config_type), shown, "{value:?}");
        }
        let image = image_with(&[config(rt::TOPIC, "orders", "retention.ms", " 1000 ")]);
        let described = describe(&image, rt::TOPIC, "orders");
        let retention = entry(&described, "retention.ms");
        assert_eq!(retention.value.as_deref(), Some("1000"));
        // The synonym is the topic's setting as stored, as Kafka's configSynonyms reads it.
        assert_eq!(
            synonyms(retention)[0],
            (
                "retention.ms".to_owned(),
                Some(" 1000 ".to_owned()),
                src::TOPIC_CONFIG
            )
        );
    }

    #[test]
    fn an_unknown_resource_type_fails_every_resource() {
        let image = image_with(&[]);
        let request = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(rt::BROKER)
                .with_resource_name(s("1")),
            DescribeConfigsResource::default()
                .with_resource_type(99)
                .with_resource_name(s("x")),
        ]);
        let answers: Vec<(i8, String, i16, Option<String>, usize)> =
            describe_configs(&image, &request, 1, &support())
                .results
                .into_iter()
                .map(|r| {
                    (
                        r.resource_type,
                        r.resource_name.to_string(),
                        r.error_code,
                        r.error_message.map(|m| m.to_string()),
                        r.configs.len(),
                    )
                })
                .collect();
        let refused = |resource_type: i8, name: &str| {
            (
                resource_type,
                name.to_owned(),
                42,
                Some(INVALID_REQUEST_MESSAGE.to_owned()),
                0,
            )
        };
        assert_eq!(answers, vec![refused(rt::BROKER, "1"), refused(99, "x")]);
    }

    #[test]
    fn group_configs_of_a_group_that_does_not_exist() {
        let image = image_with(&[config(
            rt::GROUP,
            "G1",
            "consumer.heartbeat.interval.ms",
            "10000",
        )]);
        let result = describe(&image, rt::GROUP, "G1");
        assert_eq!(result.error_code, 0);
        assert_eq!(result.configs.len(), 6);
        let hb = entry(&result, "consumer.heartbeat.interval.ms");
        assert_eq!((hb.value.as_deref(), hb.config_source), (Some("10000"), 8));
        assert_eq!(
            synonyms(hb),
            [(
                "consumer.heartbeat.interval.ms".into(),
                Some("10000".into()),
                8
            )]
        );
        // Unset keys: the node's `group.consumer.*` value (12000 here, not Kafka's 45000),
        // DEFAULT_CONFIG, its one synonym under the group key's name.
        let session = entry(&result, "consumer.session.timeout.ms");
        assert_eq!(
            (session.value.as_deref(), session.config_source),
            (Some("12000"), 5)
        );
        assert_eq!(
            synonyms(session),
            [(
                "consumer.session.timeout.ms".into(),
                Some("12000".into()),
                5
            )]
        );
        let other = describe(&image, rt::GROUP, "G2");
        let hb = entry(&other, "consumer.heartbeat.interval.ms");
        assert_eq!((hb.value.as_deref(), hb.config_source), (Some("2000"), 5));
        let share = entry(&other, "share.session.timeout.ms");
        assert_eq!(
            (share.value.as_deref(), share.config_source),
            (Some("45000"), 5)
        );
        let empty = describe(&image, rt::GROUP, "");
        assert_eq!(
            (empty.error_code, empty.error_message.as_deref()),
            (42, Some("Group name must not be empty"))
        );
    }

    #[test]
    fn topic_synonym_chain() {
        let image = image_with(&[
            config(rt::TOPIC, "orders", "retention.ms", "1000"),
            config(rt::BROKER, "", "log.retention.ms", "2000"),
            config(rt::BROKER, "1", "log.segment.bytes", "2097152"),
        ]);
        let result = describe(&image, rt::TOPIC, "orders");
        assert_eq!(result.configs.len(), TOPIC_CONFIGS.len());
        let retention = entry(&result, "retention.ms");
        assert_eq!(
            (retention.value.as_deref(), retention.config_source),
            (Some("1000"), 1)
        );
        // Kafka's order: each level in turn over the synonyms, then the defaults that exist
        // (`log.retention.ms` has none; `log.retention.hours` is 168).
        assert_eq!(
            synonyms(retention),
            [
                ("retention.ms".into(), Some("1000".into()), 1),
                ("log.retention.ms".into(), Some("2000".into()), 3),
                ("log.retention.hours".into(), Some("2".into()), 4),
                ("log.retention.hours".into(), Some("168".into()), 5),
            ]
        );
        // Without its own value a topic shows the static log default, in its own unit.
        let plain = describe(&image, rt::TOPIC, "orders3");
        let retention = entry(&plain, "retention.ms");
        assert_eq!(
            (retention.value.as_deref(), retention.config_source),
            (Some("2000"), 3)
        );
        let roll = entry(&plain, "segment.ms");
        assert_eq!(
            (roll.value.as_deref(), roll.config_source),
            (Some("604800000"), 5)
        );
        assert_eq!(
            synonyms(roll),
            [("log.roll.hours".into(), Some("168".into()), 5)]
        );
        let cleanup = entry(&plain, "cleanup.policy");
        assert_eq!(
            (cleanup.value.as_deref(), cleanup.config_source),
            (Some("compact"), 4)
        );
        assert_eq!(
            synonyms(cleanup),
            [
                ("log.cleanup.policy".into(), Some("compact".into()), 4),
                ("log.cleanup.policy".into(), Some("delete".into()), 5),
            ]
        );
        let hours_only = image_with(&[]);
        let described = describe(&hours_only, rt::TOPIC, "orders3");
        let retention = entry(&described, "retention.ms");
        assert_eq!(
            (retention.value.as_deref(), retention.config_source),
            (Some("7200000"), 4)
        );
        let segment = entry(&result, "segment.bytes");
        assert_eq!(
            (segment.value.as_deref(), segment.config_source),
            (Some("2097152"), 2)
        );
        let throttled = entry(&result, "leader.replication.throttled.replicas");
        assert_eq!((throttled.config_source, throttled.synonyms.len()), (5, 0));
        assert_eq!(describe(&image, rt::TOPIC, "missing").error_code, 3);
        assert_eq!(describe(&image, rt::TOPIC, "bad/name").error_code, 17);
    }

    #[test]
    fn connection_limits_and_custom_keys_as_dynamic_broker_configs() {
        let image = image_with(&[
            config(rt::BROKER, "", "max.connections", "100"),
            config(rt::BROKER, "1", "max.connections", "10"),
            config(rt::BROKER, "", "my.plugin.secret", "hunter2"),
        ]);
        let this = describe(&image, rt::BROKER, "1");
        let max = entry(&this, "max.connections");
        assert_eq!(
            (max.value.as_deref(), max.config_source, max.read_only),
            (Some("10"), 2, false)
        );
        assert_eq!(
            synonyms(max),
            [
                ("max.connections".into(), Some("10".into()), 2),
                ("max.connections".into(), Some("100".into()), 3),
                ("max.connections".into(), Some("2147483647".into()), 5),
            ]
        );
        // Not set dynamically: the static entry, now writable.
        let per_ip = entry(&this, "max.connections.per.ip");
        assert_eq!(
            (
                per_ip.value.as_deref(),
                per_ip.config_source,
                per_ip.read_only
            ),
            (Some("50"), 4, false)
        );
        // A custom key: unknown type, so possibly sensitive: no value, read-only.
        let custom = entry(&this, "my.plugin.secret");
        assert_eq!(
            (
                custom.value.as_deref(),
                custom.config_source,
                custom.is_sensitive,
                custom.read_only,
                custom.config_type
            ),
            (None, 3, true, true, 0)
        );
        assert_eq!(synonyms(custom), [("my.plugin.secret".into(), None, 3)]);
        let default = describe(&image, rt::BROKER, "");
        let max = entry(&default, "max.connections");
        assert_eq!((max.value.as_deref(), max.config_type), (Some("100"), 3));
        assert_eq!(entry(&default, "my.plugin.secret").value, None);
    }

    #[test]
    fn brokers_loggers_and_client_metrics() {
        let image = image_with(&[
            config(rt::BROKER, "", "log.retention.ms", "2000"),
            config(rt::CLIENT_METRICS, "sub1", "interval.ms", "1000"),
        ]);
        let default = describe(&image, rt::BROKER, "");
        assert_eq!(default.configs.len(), 1);
        assert_eq!(default.configs[0].config_source, 3);
        let this = describe(&image, rt::BROKER, "1");
        let static_entry = entry(&this, "num.partitions");
        assert!(static_entry.read_only);
        assert_eq!(static_entry.config_source, 4);
        assert_eq!(entry(&this, "log.retention.ms").config_source, 3);
        // Kafka's broker entries: each from its own name on; the static unit synonym is read
        // only, and `log.retention.ms` without a value of its own has none.
        let hours = entry(&this, "log.retention.hours");
        assert_eq!(
            (hours.value.as_deref(), hours.config_source, hours.read_only),
            (Some("2"), 4, true)
        );
        assert_eq!(
            synonyms(hours),
            [
                ("log.retention.hours".into(), Some("2".into()), 4),
                ("log.retention.hours".into(), Some("168".into()), 5),
            ]
        );
        let minutes = entry(&this, "log.retention.minutes");
        assert_eq!((minutes.value.as_deref(), minutes.config_source), (None, 5));
        let unset = describe(&image_with(&[]), rt::BROKER, "1");
        let retention = entry(&unset, "log.retention.ms");
        assert_eq!(
            (retention.value.as_deref(), retention.config_source),
            (None, 5)
        );
        assert_eq!(entry(&unset, "log.cleanup.policy").config_source, 4);
        let other = describe(&image, rt::BROKER, "2");
        assert_eq!(
            other.error_message.as_deref(),
            Some("Unexpected broker id, expected 1 or empty string, but received 2")
        );
        assert_eq!(
            describe(&image, rt::BROKER, "x").error_message.as_deref(),
            Some("Broker id must be an integer, but it is: x")
        );
        let loggers = describe(&image, rt::BROKER_LOGGER, "1");
        assert_eq!(loggers.configs[0].name.as_str(), "root");
        assert!(loggers.configs.iter().all(|c| c.config_source == 6));
        assert_eq!(
            describe(&image, rt::BROKER_LOGGER, "")
                .error_message
                .as_deref(),
            Some("Broker id must not be empty")
        );
        let metrics = describe(&image, rt::CLIENT_METRICS, "sub1");
        let got: Vec<_> = metrics
            .configs
            .iter()
            .map(|c| {
                (
                    c.name.to_string(),
                    c.value.as_ref().map(ToString::to_string),
                    c.config_source,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("metrics".into(), Some(String::new()), 5),
                ("interval.ms".into(), Some("1000".into()), 7),
                ("match".into(), Some(String::new()), 5),
            ]
        );
        assert_eq!(describe(&image, rt::CLIENT_METRICS, "").error_code, 42);
        assert_eq!(describe(&image, 64, "x").error_code, 42);
    }
}
