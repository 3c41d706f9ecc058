//! The `users`, `clients` and `ips` entity types of `gregor configs`: kafka-configs.sh's client
//! quota describe and alter over DescribeClientQuotas / AlterClientQuotas, with its output.
//!
//! kafka-configs.sh prints the maps its Java admin client builds, so the order of the entities
//! and of the keys on a line is Java `HashMap` iteration order; `java_hash_order` reproduces it so
//! the output matches line for line.

use std::fmt::Write as _;

use gregor_publishers::scram::{ScramMechanism, MIN_ITERATIONS};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterUserScramCredentialsRequest, DescribeClientQuotasRequest,
    DescribeUserScramCredentialsRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::configs::{ConfigsCommand, EntityType};
use super::{check, AdminClient, AdminError};

/// Kafka's `QuotaConfig.isClientOrUserQuotaConfig` keys (users and clients).
const USER_CLIENT_KEYS: [&str; 4] = [
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
];
/// Kafka's `QuotaConfig.ipConfigs` keys.
const IP_KEYS: [&str; 1] = ["connection_creation_rate"];
/// SCRAM mechanisms, which kafka-configs.sh also accepts for users (as credentials, not quotas).
const SCRAM_KEYS: [&str; 2] = ["SCRAM-SHA-256", "SCRAM-SHA-512"];

/// Describe filter match types (DescribeClientQuotas `MatchType`).
const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

/// The protocol's entity type of a tool entity type.
fn wire_type(entity_type: EntityType) -> Result<&'static str, AdminError> {
    match entity_type {
        EntityType::Users => Ok("user"),
        EntityType::Clients => Ok("client-id"),
        EntityType::Ips => Ok("ip"),
        other => Err(AdminError::Io(format!(
            "Unexpected entity type {}",
            other.plural()
        ))),
    }
}

/// Runs `--describe` or `--alter` for quota entities; the output goes to `out`.
pub async fn run(
    client: &mut AdminClient,
    command: &ConfigsCommand,
    out: &mut String,
) -> Result<(), AdminError> {
    if command.alter {
        alter(client, command, out).await
    } else {
        describe(client, &command.entity_types, &command.entity_names, out).await
    }
}

/// One described entity: `(wire type, name or None for the default)` pairs and its values, both
/// in the order the Java admin client's maps iterate.
type Described = (Vec<(String, Option<String>)>, Vec<(String, f64)>);

/// DescribeClientQuotas with kafka-configs.sh's strict filter: one component per entity type,
/// matching the named entity, the default one (`""`), or any (no name given).
async fn describe_entities(
    client: &mut AdminClient,
    types: &[EntityType],
    names: &[String],
) -> Result<Vec<Described>, AdminError> {
    let mut components = Vec::new();
    for (i, entity_type) in types.iter().enumerate() {
        let component = ComponentData::default()
            .with_entity_type(StrBytes::from_static_str(wire_type(*entity_type)?));
        // The match string must be null unless the type is EXACT (the default is "").
        components.push(match names.get(i) {
            None => component.with_match_type(MATCH_SPECIFIED).with_match(None),
            Some(name) if name.is_empty() => {
                component.with_match_type(MATCH_DEFAULT).with_match(None)
            }
            Some(name) => component
                .with_match_type(MATCH_EXACT)
                .with_match(Some(StrBytes::from_string(name.clone()))),
        });
    }
    let request = DescribeClientQuotasRequest::default()
        .with_components(components)
        .with_strict(true);
    let (_, response) = client.send(&request).await?;
    check(response.error_code, response.error_message.as_ref())?;
    let entries = response.entries.unwrap_or_default();
    // `new HashMap<>(entries.size())` of ClientQuotaEntity → `new HashMap<>(values.size())`.
    let entities: Vec<Described> = entries
        .iter()
        .map(|entry| {
            let entity: Vec<(String, Option<String>)> = entry
                .entity
                .iter()
                .map(|e| {
                    (
                        e.entity_type.to_string(),
                        e.entity_name.as_ref().map(|n| n.to_string()),
                    )
                })
                .collect();
            let hashes: Vec<i32> = entry
                .values
                .iter()
                .map(|v| java_string_hash(&v.key))
                .collect();
            let values = java_hash_order(&hashes, Some(entry.values.len()))
                .into_iter()
                .filter_map(|i| entry.values.get(i))
                .map(|v| (v.key.to_string(), v.value))
                .collect();
            (entity, values)
        })
        .collect();
    let hashes: Vec<i32> = entities.iter().map(|(e, _)| entity_hash(e)).collect();
    let order = java_hash_order(&hashes, Some(entities.len()));
    let mut slots: Vec<Option<Described>> = entities.into_iter().map(Some).collect();
    Ok(order
        .into_iter()
        .filter_map(|i| slots.get_mut(i).and_then(Option::take))
        .collect())
}

/// `ClientQuotaEntity.hashCode()`: `Objects.hash(entries)` over a `HashMap<String, String>`.
fn entity_hash(entity: &[(String, Option<String>)]) -> i32 {
    let map = entity.iter().fold(0_i32, |sum, (key, value)| {
        sum.wrapping_add(java_string_hash(key) ^ value.as_deref().map_or(0, java_string_hash))
    });
    31_i32.wrapping_add(map)
}

/// `Quota configs for user-principal 'u', client-id 'c' are k=v, k=v` lines.
async fn describe(
    client: &mut AdminClient,
    types: &[EntityType],
    names: &[String],
    out: &mut String,
) -> Result<(), AdminError> {
    for (entity, values) in describe_entities(client, types, names).await? {
        let _ = writeln!(out, "{}", describe_line(&entity, &values));
    }
    // As kafka-configs.sh: SCRAM credentials of users, unless clients or defaults are described.
    let users_only = types.iter().all(|t| *t == EntityType::Users);
    if users_only && !names.iter().any(String::is_empty) {
        describe_scram(client, names, out).await?;
    }
    Ok(())
}

/// kafka-configs.sh's `SCRAM credential configs for user-principal 'alice' are
/// SCRAM-SHA-256=iterations=8192` line for each named user (every user when none is named)
/// that has credentials.
async fn describe_scram(
    client: &mut AdminClient,
    names: &[String],
    out: &mut String,
) -> Result<(), AdminError> {
    let users = names
        .iter()
        .map(|name| UserName::default().with_name(StrBytes::from_string(name.clone())))
        .collect();
    let request = DescribeUserScramCredentialsRequest::default().with_users(Some(users));
    let (_, response) = client.send(&request).await?;
    check(response.error_code, response.error_message.as_ref())?;
    for result in response.results.iter().filter(|r| r.error_code == 0) {
        let credentials: Vec<String> = result
            .credential_infos
            .iter()
            .filter_map(|info| {
                let mechanism = ScramMechanism::from_type(info.mechanism)?;
                Some(format!("{mechanism}=iterations={}", info.iterations))
            })
            .collect();
        let _ = writeln!(
            out,
            "SCRAM credential configs for user-principal '{}' are {}",
            result.user,
            credentials.join(", ")
        );
    }
    Ok(())
}

/// One describe line, as kafka-configs.sh formats it.
pub fn describe_line(entity: &[(String, Option<String>)], values: &[(String, f64)]) -> String {
    let part = |wire: &str, shown: &str| {
        entity
            .iter()
            .find(|(t, _)| t == wire)
            .map(|(_, name)| match name {
                Some(name) if !name.is_empty() => format!("{shown} '{name}'"),
                _ => format!("the default {shown}"),
            })
    };
    let entity_text: Vec<String> = [
        part("user", "user-principal"),
        part("client-id", "client-id"),
        part("ip", "ip"),
    ]
    .into_iter()
    .flatten()
    .collect();
    let values_text: Vec<String> = values
        .iter()
        .map(|(key, value)| format!("{key}={}", java_double(*value)))
        .collect();
    format!(
        "Quota configs for {} are {}",
        entity_text.join(", "),
        values_text.join(", ")
    )
}

async fn alter(
    client: &mut AdminClient,
    command: &ConfigsCommand,
    out: &mut String,
) -> Result<(), AdminError> {
    let types = &command.entity_types;
    let names = &command.entity_names;
    let (Some(first_type), Some(first_name)) = (types.first(), names.first()) else {
        return Err(AdminError::Io(
            "An entity name must be specified for every entity type".into(),
        ));
    };
    let (added, deleted) = super::configs::alterations(command)?;
    check_keys(types, names, &added, &deleted)?;
    if alters_scram(&added, &deleted) {
        return alter_scram(client, first_name, &added, &deleted, out).await;
    }
    if types.len() != names.len() {
        return Err(AdminError::Io(
            "Exactly one entity name must be specified for every entity type".into(),
        ));
    }
    // As kafka-configs.sh: deleting a key the entity does not have is refused up front.
    let current = describe_entities(client, types, names)
        .await?
        .into_iter()
        .next()
        .map(|(_, values)| values)
        .unwrap_or_default();
    let missing: Vec<&str> = deleted
        .iter()
        .map(String::as_str)
        .filter(|key| !current.iter().any(|(k, _)| k == key))
        .collect();
    if !missing.is_empty() {
        return Err(AdminError::Io(format!(
            "Invalid config(s): {}",
            missing.join(",")
        )));
    }
    let mut ops = Vec::new();
    for (key, value) in &added {
        let number = parse_java_double(value).ok_or_else(|| {
            AdminError::Io(format!(
                "Cannot parse quota configuration value for {key}: {value}"
            ))
        })?;
        ops.push(
            OpData::default()
                .with_key(StrBytes::from_string(key.clone()))
                .with_value(number),
        );
    }
    ops.extend(deleted.iter().map(|key| {
        OpData::default()
            .with_key(StrBytes::from_string(key.clone()))
            .with_remove(true)
    }));
    let mut entity = Vec::new();
    for (entity_type, name) in types.iter().zip(names) {
        entity.push(
            EntityData::default()
                .with_entity_type(StrBytes::from_static_str(wire_type(*entity_type)?))
                .with_entity_name((!name.is_empty()).then(|| StrBytes::from_string(name.clone()))),
        );
    }
    let request = AlterClientQuotasRequest::default()
        .with_entries(vec![EntryData::default().with_entity(entity).with_ops(ops)]);
    let (_, response) = client.send(&request).await?;
    for entry in &response.entries {
        check(entry.error_code, entry.error_message.as_ref())?;
    }
    // kafka-configs.sh names only the first entity given, even for a user + client pair.
    if first_name.is_empty() {
        let _ = writeln!(
            out,
            "Completed updating default config for {} in the cluster.",
            first_type.plural()
        );
    } else {
        let _ = writeln!(
            out,
            "Completed updating config for {} {first_name}.",
            first_type.singular()
        );
    }
    Ok(())
}

/// kafka-configs.sh's key checks before anything is sent.
fn check_keys(
    types: &[EntityType],
    names: &[String],
    added: &[(String, String)],
    deleted: &[String],
) -> Result<(), AdminError> {
    let first = types.first().copied();
    let unexpected = |allowed: &[&str], keys: &mut dyn Iterator<Item = &String>| -> Vec<String> {
        keys.filter(|k| !allowed.contains(&k.as_str()))
            .cloned()
            .collect()
    };
    let added_keys = || added.iter().map(|(k, _)| k);
    if first == Some(EntityType::Ips) {
        let mut all = added_keys().chain(deleted.iter());
        let unknown = unexpected(&IP_KEYS, &mut all);
        if !unknown.is_empty() {
            return Err(AdminError::Io(format!(
                "Only connection quota configs can be added for 'ips' using --bootstrap-server. Unexpected config names: {}",
                unknown.join(", ")
            )));
        }
        return Ok(());
    }
    if first == Some(EntityType::Clients) || types.len() == 2 {
        let unknown = unexpected(&USER_CLIENT_KEYS, &mut added_keys());
        if !unknown.is_empty() {
            return Err(AdminError::Io(format!(
                "Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected config names: {}",
                unknown.join(",")
            )));
        }
        let unknown = unexpected(&USER_CLIENT_KEYS, &mut deleted.iter());
        if !unknown.is_empty() {
            return Err(AdminError::Io(format!(
                "Only quota configs can be deleted for 'clients' using --bootstrap-server. Unexpected config names: {}",
                unknown.join(",")
            )));
        }
        return Ok(());
    }
    let user_keys: Vec<&str> = USER_CLIENT_KEYS
        .iter()
        .chain(&SCRAM_KEYS)
        .copied()
        .collect();
    let unknown = unexpected(&user_keys, &mut added_keys());
    if !unknown.is_empty() {
        return Err(AdminError::Io(format!(
            "Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. Unexpected config names: {}",
            unknown.join(",")
        )));
    }
    let unknown = unexpected(&user_keys, &mut deleted.iter());
    if !unknown.is_empty() {
        return Err(AdminError::Io(format!(
            "Only quota and SCRAM credential configs can be deleted for 'users' using --bootstrap-server. Unexpected config names: {}",
            unknown.join(",")
        )));
    }
    let scram = added_keys()
        .chain(deleted.iter())
        .any(|k| SCRAM_KEYS.contains(&k.as_str()));
    if scram {
        if names.iter().any(String::is_empty) {
            return Err(AdminError::Io("The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials using --bootstrap-server.".into()));
        }
        let quota = added_keys()
            .chain(deleted.iter())
            .any(|k| USER_CLIENT_KEYS.contains(&k.as_str()));
        if quota {
            return Err(AdminError::Io("Cannot alter both quota and SCRAM credential configs simultaneously for 'users' using --bootstrap-server.".into()));
        }
    }
    Ok(())
}

/// Whether an alteration of users changes SCRAM credentials (then it changes nothing else).
fn alters_scram(added: &[(String, String)], deleted: &[String]) -> bool {
    added
        .iter()
        .map(|(k, _)| k)
        .chain(deleted)
        .any(|k| SCRAM_KEYS.contains(&k.as_str()))
}

/// kafka-configs.sh's `iterations=N,password=P` (iterations optional, 4096 by default, -1 too).
fn iterations_and_password(
    mechanism: ScramMechanism,
    text: &str,
) -> Result<(i32, String), AdminError> {
    let invalid = || AdminError::Io(format!("Invalid credential property {mechanism}={text}"));
    let (iterations, password) = match text.strip_prefix("iterations=") {
        Some(rest) => {
            let (iterations, password) = rest.split_once(',').ok_or_else(invalid)?;
            let password = password.strip_prefix("password=").ok_or_else(invalid)?;
            let iterations: i32 = match iterations {
                "" | "-1" => DEFAULT_SCRAM_ITERATIONS,
                number => number.parse().map_err(|_| invalid())?,
            };
            (iterations, password)
        }
        None => (
            DEFAULT_SCRAM_ITERATIONS,
            text.strip_prefix("password=").ok_or_else(invalid)?,
        ),
    };
    if iterations < MIN_ITERATIONS {
        return Err(AdminError::Io(format!(
            "Iterations {iterations} is less than the minimum {MIN_ITERATIONS} required for {mechanism}"
        )));
    }
    Ok((iterations, password.to_owned()))
}

/// kafka-configs.sh's default SCRAM iteration count.
const DEFAULT_SCRAM_ITERATIONS: i32 = 4096;

/// A random salt as Kafka's admin client makes one: the UTF-8 bytes of a random 130-bit number
/// in base 36.
fn random_salt() -> Vec<u8> {
    use rand::Rng;
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut random = rand::rng();
    (0..26)
        .map(|_| DIGITS[random.random_range(0..DIGITS.len())])
        .collect()
}

/// The SCRAM part of `--alter --entity-type users`: AlterUserScramCredentials with the salted
/// password computed here, as Kafka's admin client does, so the password never leaves the tool.
async fn alter_scram(
    client: &mut AdminClient,
    user: &str,
    added: &[(String, String)],
    deleted: &[String],
    out: &mut String,
) -> Result<(), AdminError> {
    let mut upsertions = Vec::new();
    for (key, value) in added {
        let mechanism = ScramMechanism::from_name(key)
            .ok_or_else(|| AdminError::Io(format!("Unknown SCRAM mechanism {key}")))?;
        let (iterations, password) = iterations_and_password(mechanism, value)?;
        let salt = random_salt();
        let salted = mechanism.salted_password(password.as_bytes(), &salt, iterations as u32);
        upsertions.push(
            ScramCredentialUpsertion::default()
                .with_name(StrBytes::from_string(user.to_owned()))
                .with_mechanism(mechanism.type_code())
                .with_iterations(iterations)
                .with_salt(salt.into())
                .with_salted_password(salted.into()),
        );
    }
    let mut deletions = Vec::new();
    for key in deleted {
        let mechanism = ScramMechanism::from_name(key)
            .ok_or_else(|| AdminError::Io(format!("Unknown SCRAM mechanism {key}")))?;
        deletions.push(
            ScramCredentialDeletion::default()
                .with_name(StrBytes::from_string(user.to_owned()))
                .with_mechanism(mechanism.type_code()),
        );
    }
    let request = AlterUserScramCredentialsRequest::default()
        .with_upsertions(upsertions)
        .with_deletions(deletions);
    let (_, response) = client.send(&request).await?;
    for result in &response.results {
        check(result.error_code, result.error_message.as_ref())?;
    }
    let _ = writeln!(out, "Completed updating config for user {user}.");
    Ok(())
}

/// `Double.parseDouble` for the values people type (leading/trailing whitespace allowed, a
/// trailing `d`/`f` type suffix, `NaN`, `Infinity`); `None` where Java throws.
pub fn parse_java_double(text: &str) -> Option<f64> {
    let text = text.trim();
    let body = text
        .strip_suffix(['d', 'D', 'f', 'F'])
        .filter(|b| !b.is_empty() && !b.ends_with(['e', 'E']))
        .unwrap_or(text);
    match body.trim_start_matches(['+', '-']) {
        "NaN" => return Some(f64::NAN),
        "Infinity" => {
            return Some(if body.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            })
        }
        // Rust also accepts `inf`/`nan` spellings that Java refuses.
        rest if rest
            .chars()
            .any(|c| c.is_ascii_alphabetic() && !matches!(c, 'e' | 'E')) =>
        {
            return None
        }
        _ => {}
    }
    body.parse().ok()
}

/// `Double.toString` (JDK 19+: shortest digits that round-trip): plain notation with at least
/// one fractional digit for 10⁻³ ≤ |v| < 10⁷, otherwise `d.dddE±n`.
pub fn java_double(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "Infinity" } else { "-Infinity" }.into();
    }
    if value == 0.0 {
        return if value.is_sign_negative() {
            "-0.0"
        } else {
            "0.0"
        }
        .into();
    }
    if (1e-3..1e7).contains(&value.abs()) {
        let text = format!("{value}");
        return if text.contains('.') {
            text
        } else {
            format!("{text}.0")
        };
    }
    let text = format!("{value:e}");
    let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
    if mantissa.contains('.') {
        format!("{mantissa}E{exponent}")
    } else {
        format!("{mantissa}.0E{exponent}")
    }
}

/// Java's `String.hashCode` (over UTF-16 code units, wrapping).
pub fn java_string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0_i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The iteration order of a `java.util.HashMap` after inserting keys with `hashes` in order
/// (distinct keys), created with `new HashMap<>(initial)` or `new HashMap<>()` (None): indexes
/// into `hashes`. Buckets iterate in index order, each in insertion order (resizes keep it).
pub fn java_hash_order(hashes: &[i32], initial: Option<usize>) -> Vec<usize> {
    let mut capacity = initial.map_or(16, |c| c.max(1).next_power_of_two());
    let threshold = |capacity: usize| capacity * 3 / 4;
    for size in 1..=hashes.len() {
        if size > threshold(capacity) {
            capacity *= 2;
        }
    }
    let bucket = |hash: i32| {
        // HashMap.hash(): the high half folded into the low half.
        let spread = (hash ^ ((hash as u32) >> 16) as i32) as u32;
        spread as usize & (capacity - 1)
    };
    let mut order: Vec<usize> = (0..hashes.len()).collect();
    order.sort_by_key(|&i| hashes.get(i).map_or(0, |h| bucket(*h)));
    order
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn java_double_formats_like_double_to_string() {
        assert_eq!(java_double(1024.0), "1024.0");
        assert_eq!(java_double(2.0), "2.0");
        assert_eq!(java_double(0.5), "0.5");
        assert_eq!(java_double(0.001), "0.001");
        assert_eq!(java_double(0.0001), "1.0E-4");
        assert_eq!(java_double(1e7), "1.0E7");
        assert_eq!(java_double(10485760.0), "1.048576E7");
        assert_eq!(java_double(2147483647.0), "2.147483647E9");
        assert_eq!(java_double(9999999.0), "9999999.0");
        assert_eq!(java_double(-3.5), "-3.5");
    }

    #[test]
    fn java_double_parsing() {
        assert_eq!(parse_java_double(" 1024 "), Some(1024.0));
        assert_eq!(parse_java_double("1e3"), Some(1000.0));
        assert_eq!(parse_java_double("2.5d"), Some(2.5));
        assert_eq!(parse_java_double("abc"), None);
        assert_eq!(parse_java_double("inf"), None);
        assert_eq!(parse_java_double(""), None);
        assert!(parse_java_double("NaN").unwrap().is_nan());
    }

    #[test]
    fn java_hashes_and_hash_map_order() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("a"), 97);
        assert_eq!(java_string_hash("ab"), 97 * 31 + 98);
        // Orders printed by a JVM (jshell, OpenJDK 17) for the same insertions.
        let order_of = |keys: &[&str], initial: Option<usize>| -> Vec<String> {
            let hashes: Vec<i32> = keys.iter().map(|k| java_string_hash(k)).collect();
            java_hash_order(&hashes, initial)
                .into_iter()
                .map(|i| keys[i].to_owned())
                .collect()
        };
        assert_eq!(
            order_of(&USER_CLIENT_KEYS, Some(4)),
            [
                "producer_byte_rate",
                "consumer_byte_rate",
                "controller_mutation_rate",
                "request_percentage"
            ]
        );
        assert_eq!(
            order_of(&["producer_byte_rate", "controller_mutation_rate"], Some(2)),
            ["controller_mutation_rate", "producer_byte_rate"]
        );
        assert_eq!(
            order_of(&["alpha", "beta", "orders"], Some(3)),
            ["beta", "orders", "alpha"]
        );
        assert_eq!(
            order_of(
                &[
                    "cleanup.policy",
                    "retention.ms",
                    "segment.bytes",
                    "min.insync.replicas",
                    "max.message.bytes",
                    "compression.type"
                ],
                None
            ),
            [
                "compression.type",
                "cleanup.policy",
                "max.message.bytes",
                "min.insync.replicas",
                "retention.ms",
                "segment.bytes"
            ]
        );
        // Same bucket → insertion order is kept.
        assert_eq!(java_hash_order(&[16, 0, 32], Some(3)), [0, 1, 2]);
        // Different buckets → bucket order.
        assert_eq!(java_hash_order(&[3, 1, 2], Some(3)), [1, 2, 0]);
    }

    #[test]
    fn describe_lines() {
        let entity = vec![("user".to_owned(), Some("alice".to_owned()))];
        assert_eq!(
            describe_line(&entity, &[("producer_byte_rate".into(), 1024.0)]),
            "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0"
        );
        let entity = vec![
            ("client-id".to_owned(), None),
            ("user".to_owned(), Some("u".to_owned())),
        ];
        assert_eq!(
            describe_line(
                &entity,
                &[
                    ("consumer_byte_rate".into(), 2.0),
                    ("request_percentage".into(), 50.5)
                ]
            ),
            "Quota configs for user-principal 'u', the default client-id are consumer_byte_rate=2.0, request_percentage=50.5"
        );
        let entity = vec![("ip".to_owned(), Some("1.2.3.4".to_owned()))];
        assert_eq!(
            describe_line(&entity, &[("connection_creation_rate".into(), 1e7)]),
            "Quota configs for ip '1.2.3.4' are connection_creation_rate=1.0E7"
        );
    }

    #[test]
    fn scram_credential_properties_as_kafka_configs_reads_them() {
        let parse = |text: &str| {
            iterations_and_password(ScramMechanism::Sha256, text).map_err(|e| e.to_string())
        };
        assert_eq!(
            parse("iterations=8192,password=a,b=c"),
            Ok((8192, "a,b=c".to_owned()))
        );
        assert_eq!(parse("password=pw"), Ok((4096, "pw".to_owned())));
        assert_eq!(
            parse("iterations=-1,password=pw"),
            Ok((4096, "pw".to_owned()))
        );
        assert_eq!(
            parse("iterations=10,password=pw"),
            Err(
                "Iterations 10 is less than the minimum 4096 required for SCRAM-SHA-256".to_owned()
            )
        );
        assert_eq!(
            parse("pass=pw"),
            Err("Invalid credential property SCRAM-SHA-256=pass=pw".to_owned())
        );
        assert_eq!(random_salt().len(), 26);
    }

    #[test]
    fn key_checks() {
        let users = [EntityType::Users];
        let name = ["u".to_owned()];
        let add = |k: &str| vec![(k.to_owned(), "1".to_owned())];
        assert!(check_keys(&users, &name, &add("producer_byte_rate"), &[]).is_ok());
        assert_eq!(
            check_keys(&users, &name, &add("foo"), &[]).unwrap_err().to_string(),
            "Only quota and SCRAM credential configs can be added for 'users' using --bootstrap-server. Unexpected config names: foo"
        );
        assert_eq!(
            check_keys(&[EntityType::Clients], &name, &[], &["foo".into()])
                .unwrap_err()
                .to_string(),
            "Only quota configs can be deleted for 'clients' using --bootstrap-server. Unexpected config names: foo"
        );
        assert_eq!(
            check_keys(&[EntityType::Users, EntityType::Clients], &name, &add("SCRAM-SHA-256"), &[])
                .unwrap_err()
                .to_string(),
            "Only quota configs can be added for 'clients' using --bootstrap-server. Unexpected config names: SCRAM-SHA-256"
        );
        assert_eq!(
            check_keys(&[EntityType::Ips], &name, &add("producer_byte_rate"), &[])
                .unwrap_err()
                .to_string(),
            "Only connection quota configs can be added for 'ips' using --bootstrap-server. Unexpected config names: producer_byte_rate"
        );
        assert!(check_keys(
            &[EntityType::Ips],
            &name,
            &add("connection_creation_rate"),
            &[]
        )
        .is_ok());
        assert_eq!(
            check_keys(&users, &[String::new()], &add("SCRAM-SHA-256"), &[])
                .unwrap_err()
                .to_string(),
            "The use of --entity-default or --user-defaults is not allowed with User SCRAM Credentials using --bootstrap-server."
        );
    }
}
