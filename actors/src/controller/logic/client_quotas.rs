//! AlterClientQuotas (api 49): the decisions of Kafka's `ClientQuotaControlManager`
//! (reference §4.8, messages verbatim from the newer source).
//!
//! Per request entry, in request order:
//! 1. a key named twice in one entry, or an entity already seen in this request →
//!    INVALID_REQUEST "Ignoring duplicate entity <e>" (Kafka records "Duplicate quota key ..."
//!    first and then overwrites it with this message, so that is what clients see);
//! 2. entity checks: empty, a type twice, an unknown type, an empty name;
//! 3. the combination: `ip` with `user`/`client-id`, an `ip` that is not an address;
//! 4. per set key: unknown key, value ≤ 0, fractional or too large for integral keys;
//! 5. removals write a record only if the key exists, sets only if the value changes.
//!
//! One result per distinct entity, in first-appearance order (Kafka answers from a hash map,
//! so its order is unspecified). `validate_only` returns the same results and no records.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::IpAddr;

use gregor_publishers::records::{ClientQuotaRecord, EntityData, MetadataRecord};
use gregor_publishers::ClientQuotasImage;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_request::EntryData;
use kafka_protocol::messages::alter_client_quotas_response::{
    EntityData as ResponseEntity, EntryData as ResponseEntry,
};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use super::listed::{ListedAnswers, ListedElements, Uncommitted};
use super::{ControllerResult, MAX_RECORDS_PER_USER_OP};

/// Entity types.
pub const USER: &str = "user";
/// Entity types.
pub const CLIENT_ID: &str = "client-id";
/// Entity types.
pub const IP: &str = "ip";

/// The value type of a quota key (Kafka's `QuotaConfig` definitions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QuotaKeyType {
    /// Any positive number.
    Double,
    /// A positive whole number up to `Long.MAX_VALUE`.
    Long,
    /// A positive whole number up to `Integer.MAX_VALUE`.
    Int,
}

/// Keys valid on user and/or client-id entities.
pub const USER_CLIENT_KEYS: &[(&str, QuotaKeyType)] = &[
    ("producer_byte_rate", QuotaKeyType::Long),
    ("consumer_byte_rate", QuotaKeyType::Long),
    ("request_percentage", QuotaKeyType::Double),
    ("controller_mutation_rate", QuotaKeyType::Double),
];

/// Keys valid on ip entities.
pub const IP_KEYS: &[(&str, QuotaKeyType)] = &[("connection_creation_rate", QuotaKeyType::Int)];

/// An entity as Kafka's `ClientQuotaEntity` holds it: type → name, a repeated type keeping
/// the last name (a Java map), ordered as Java's `HashMap` prints these three types.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Entity(Vec<(String, Option<String>)>);

fn java_order(entity_type: &str) -> (u8, &str) {
    (type_rank(entity_type.as_bytes()), entity_type)
}

/// Where an entity type comes in an entity (Java's `HashMap` order of the three types, any
/// other type after them): an entity sorted by rank, then type, is Kafka's map of it.
pub fn type_rank(entity_type: &[u8]) -> u8 {
    match entity_type {
        b"ip" => 0,
        b"client-id" => 1,
        b"user" => 2,
        _ => 3,
    }
}

impl Entity {
    fn from_wire(entry: &EntryData) -> Self {
        // A map keeps a hostile entity with many parts O(p log p), as Java's map does.
        let mut by_type: BTreeMap<(u8, &str), Option<&str>> = BTreeMap::new();
        for part in &entry.entity {
            let entity_type = part.entity_type.as_str();
            let name = part.entity_name.as_ref().map(|n| n.as_str());
            by_type.insert(java_order(entity_type), name);
        }
        Entity(
            by_type
                .into_iter()
                .map(|((_, t), n)| (t.to_owned(), n.map(str::to_owned)))
                .collect(),
        )
    }

    fn has(&self, entity_type: &str) -> bool {
        self.0.iter().any(|(t, _)| t == entity_type)
    }

    fn name(&self, entity_type: &str) -> Option<Option<&str>> {
        self.0
            .iter()
            .find(|(t, _)| t == entity_type)
            .map(|(_, n)| n.as_deref())
    }

    fn records_entity(&self) -> Vec<EntityData> {
        let mut parts: Vec<EntityData> = self
            .0
            .iter()
            .map(|(t, n)| EntityData {
                entity_type: t.clone(),
                entity_name: n.clone(),
            })
            .collect();
        parts.sort();
        parts
    }
}

impl std::fmt::Display for Entity {
    /// `ClientQuotaEntity(entries={client-id=app, user=alice})`, `null` for a default.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClientQuotaEntity(entries={")?;
        for (i, (t, n)) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{t}={}", n.as_deref().unwrap_or("null"))?;
        }
        f.write_str("})")
    }
}

/// Why one entity was refused: INVALID_REQUEST with this message.
type Refusal = String;

fn validate_entity(entry: &EntryData) -> Result<(), Refusal> {
    if entry.entity.is_empty() {
        return Err("Invalid empty client quota entity".to_owned());
    }
    let mut seen: HashSet<&str> = HashSet::with_capacity(entry.entity.len());
    for part in &entry.entity {
        let entity_type = part.entity_type.as_str();
        if !seen.insert(entity_type) {
            return Err(format!(
                "Invalid client quota entity, duplicate entity entry {entity_type}"
            ));
        }
        if !matches!(entity_type, USER | CLIENT_ID | IP) {
            return Err(format!("Unhandled client quota entity type: {entity_type}"));
        }
        if part.entity_name.as_ref().is_some_and(|n| n.is_empty()) {
            return Err(format!("Empty {entity_type} not supported"));
        }
    }
    Ok(())
}

/// The keys valid for `entity`, or why the combination is refused.
fn keys_for(entity: &Entity) -> Result<&'static [(&'static str, QuotaKeyType)], Refusal> {
    if entity.has(IP) {
        if entity.has(USER) || entity.has(CLIENT_ID) {
            return Err(
                "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"
                    .to_owned(),
            );
        }
        return match entity.name(IP).flatten() {
            // The controller does not resolve host names (Kafka's `InetAddress.getByName`
            // would): a blocking DNS lookup must not stall the actor every mutation waits on.
            Some(ip) if ip.parse::<IpAddr>().is_err() => {
                Err(format!("{ip} is not a valid IP or resolvable host."))
            }
            _ => Ok(IP_KEYS),
        };
    }
    if entity.has(USER) || entity.has(CLIENT_ID) {
        Ok(USER_CLIENT_KEYS)
    } else {
        Err("Invalid empty client quota entity".to_owned())
    }
}

/// Kafka's `validateQuotaKeyValue`.
pub fn validate_key_value(
    keys: &[(&str, QuotaKeyType)],
    key: &str,
    value: f64,
) -> Result<(), String> {
    let Some((_, key_type)) = keys.iter().find(|(k, _)| *k == key) else {
        return Err(format!("Invalid configuration key {key}"));
    };
    if value <= 0.0 || value.is_nan() {
        return Err(format!("Quota {key} must be greater than 0"));
    }
    let integral = |value: f64| {
        if (value % 1.0).abs() > 1e-6 {
            Err(format!("{key} cannot be a fractional value."))
        } else {
            Ok(())
        }
    };
    match key_type {
        QuotaKeyType::Double => Ok(()),
        QuotaKeyType::Int if value > f64::from(i32::MAX) => {
            Err(format!("Proposed value for {key} is too large for an INT."))
        }
        QuotaKeyType::Long if value > i64::MAX as f64 => {
            Err(format!("Proposed value for {key} is too large for a LONG."))
        }
        QuotaKeyType::Int | QuotaKeyType::Long => integral(value),
    }
}

/// How one distinct entity of a request is answered. The message of a refusal is made from
/// the entity's entry when the answer is written ([`answer_entry`]), so entities refused
/// alike share one outcome whatever their messages say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaOutcome {
    /// Valid: its changes are written.
    Altered,
    /// INVALID_REQUEST with the message its entry's validation gives.
    Invalid,
    /// Named again in the request, or a key named twice in its entry: INVALID_REQUEST
    /// "Ignoring duplicate entity <entity>".
    Duplicate,
    /// Failed with this code and message.
    Failed { code: i16, message: String },
}

impl QuotaOutcome {
    /// Its error code (0 for a success).
    pub fn code(&self) -> i16 {
        match self {
            QuotaOutcome::Altered => 0,
            QuotaOutcome::Invalid | QuotaOutcome::Duplicate => ResponseError::InvalidRequest.code(),
            QuotaOutcome::Failed { code, .. } => *code,
        }
    }
}

impl Uncommitted for QuotaOutcome {
    fn fail_if_succeeded(&mut self, code: i16, message: &str) {
        if *self == QuotaOutcome::Altered {
            *self = QuotaOutcome::Failed {
                code,
                message: message.to_owned(),
            };
        }
    }
}

/// The answer to an AlterClientQuotas request: each distinct entity's outcome, in order of
/// first appearance.
pub type ListedQuotaAlteration = ListedAnswers<QuotaOutcome>;

/// The outcomes every decision starts with, at these indices.
const ALTERED: u32 = 0;
const INVALID: u32 = 1;
const DUPLICATE: u32 = 2;

/// More changes than one batch may write.
const TOO_MANY: &str = "Unable to perform excessively large batch operation.";

/// The entry's ops, each key once (`None` for a removal), or `None` when a key comes twice.
fn distinct_ops(entry: &EntryData) -> Option<Vec<(&str, Option<f64>)>> {
    let mut keys: HashSet<&str> = HashSet::with_capacity(entry.ops.len());
    let mut ops = Vec::with_capacity(entry.ops.len());
    for op in &entry.ops {
        if !keys.insert(op.key.as_str()) {
            return None;
        }
        ops.push((op.key.as_str(), (!op.remove).then_some(op.value)));
    }
    Some(ops)
}

/// Why the entity and ops of an entry are refused, in Kafka's order of checks: the entity,
/// its combination of types, then each value set.
fn validate(
    entry: &EntryData,
    entity: &Entity,
    ops: &[(&str, Option<f64>)],
) -> Result<(), Refusal> {
    validate_entity(entry)?;
    let keys = keys_for(entity)?;
    for (key, value) in ops {
        if let Some(value) = value {
            validate_key_value(keys, key, *value)?;
        }
    }
    Ok(())
}

/// The records that change `entity`'s quotas as `ops` (validated) ask: a removal only of a
/// key it has, a value only when it differs.
fn changes(
    quotas: &ClientQuotasImage,
    entity: &Entity,
    ops: &[(&str, Option<f64>)],
    records: &mut Vec<MetadataRecord>,
) {
    let record_entity = entity.records_entity();
    let current = quotas.get(&record_entity);
    for (key, value) in ops {
        let now = current.and_then(|c| c.get(key));
        let (value, remove) = match value {
            None if now.is_some() => (0.0, true),
            Some(value) if now != Some(*value) => (*value, false),
            _ => continue,
        };
        records.push(MetadataRecord::ClientQuota(ClientQuotaRecord {
            entity: record_entity.clone(),
            key: (*key).to_owned(),
            value,
            remove,
        }));
    }
}

/// Decides an entity's first entry (`repeated`: the request names the entity again), adding
/// its changes to `records`. As in Kafka, a valid entity named again keeps its changes while
/// its answer becomes the duplicate's.
fn decide_first(
    quotas: &ClientQuotasImage,
    entry: &EntryData,
    repeated: bool,
    records: &mut Vec<MetadataRecord>,
) -> u32 {
    let Some(ops) = distinct_ops(entry) else {
        return DUPLICATE;
    };
    let entity = Entity::from_wire(entry);
    let valid = validate(entry, &entity, &ops).is_ok();
    if valid {
        changes(quotas, &entity, &ops, records);
    }
    match (repeated, valid) {
        (true, _) => DUPLICATE,
        (false, true) => ALTERED,
        (false, false) => INVALID,
    }
}

/// Decides an AlterClientQuotas request whose entries are read from `entries` (each distinct
/// entity's first entry, in request order) against the current quotas. Kafka writes the
/// changes as one atomic batch, which its controller refuses past
/// [`MAX_RECORDS_PER_USER_OP`] records; past it every entity fails with POLICY_VIOLATION, as
/// Gregor's other controller writes do. `validate_only` answers the same and writes nothing
/// (Kafka drops its records before the batch is checked, so it is never too large).
pub fn alter_listed_client_quotas(
    quotas: &ClientQuotasImage,
    entries: &dyn ListedElements<EntryData>,
    validate_only: bool,
) -> ControllerResult<ListedQuotaAlteration> {
    let distinct = entries.distinct();
    // Sized once: a doubling vector's earlier copies stay resident in the allocator.
    let mut answers = ListedQuotaAlteration {
        per_element: Vec::with_capacity(distinct),
        outcomes: vec![
            QuotaOutcome::Altered,
            QuotaOutcome::Invalid,
            QuotaOutcome::Duplicate,
        ],
        ..Default::default()
    };
    let mut records = Vec::new();
    let mut too_many = false;
    let walked = entries.each_first(&mut |entry, repeated| {
        answers
            .per_element
            .push(decide_first(quotas, entry, repeated, &mut records));
        if validate_only {
            records.clear();
        }
        too_many = records.len() > MAX_RECORDS_PER_USER_OP;
        !too_many
    });
    if let Err(error) = walked {
        tracing::error!(%error, "an AlterClientQuotas request could not be read again");
        return ControllerResult {
            records: Vec::new(),
            response: ListedAnswers::refused(ResponseError::UnknownServerError.code(), &error),
        };
    }
    if too_many {
        records = Vec::new();
        answers.per_element = Vec::new();
        answers.outcomes = vec![QuotaOutcome::Failed {
            code: ResponseError::PolicyViolation.code(),
            message: TOO_MANY.to_owned(),
        }];
        answers.alike = distinct;
    }
    ControllerResult {
        records,
        response: answers,
    }
}

/// A distinct entity's answer: its entity as Kafka's map holds it (each type once, in Java's
/// order) with `outcome`'s code and message.
pub fn answer_entry(entry: &EntryData, outcome: &QuotaOutcome) -> ResponseEntry {
    let entity = Entity::from_wire(entry);
    let (code, message) = match outcome {
        QuotaOutcome::Altered => (0, None),
        QuotaOutcome::Invalid => {
            let refusal = distinct_ops(entry)
                .and_then(|ops| validate(entry, &entity, &ops).err())
                .map_or(
                    (
                        ResponseError::UnknownServerError,
                        "the entry's refusal could not be found again".to_owned(),
                    ),
                    |message| (ResponseError::InvalidRequest, message),
                );
            (refusal.0.code(), Some(refusal.1))
        }
        QuotaOutcome::Duplicate => (
            ResponseError::InvalidRequest.code(),
            Some(format!("Ignoring duplicate entity {entity}")),
        ),
        QuotaOutcome::Failed { code, message } => (*code, Some(message.clone())),
    };
    ResponseEntry::default()
        .with_error_code(code)
        .with_error_message(message.map(StrBytes::from_string))
        .with_entity(
            entity
                .0
                .into_iter()
                .map(|(t, n)| {
                    ResponseEntity::default()
                        .with_entity_type(StrBytes::from_string(t))
                        .with_entity_name(n.map(StrBytes::from_string))
                })
                .collect(),
        )
}

/// The answer to an entry of a request refused whole: its entity as it was sent.
pub fn refused_entry(entry: &EntryData, code: i16, message: &str) -> ResponseEntry {
    ResponseEntry::default()
        .with_error_code(code)
        .with_error_message(Some(StrBytes::from_string(message.to_owned())))
        .with_entity(
            entry
                .entity
                .iter()
                .map(|part| {
                    ResponseEntity::default()
                        .with_entity_type(part.entity_type.clone())
                        .with_entity_name(part.entity_name.clone())
                })
                .collect(),
        )
}

/// A decoded request's entries: each distinct entity's first entry and whether it comes again.
struct DecodedEntries<'a> {
    entries: &'a [EntryData],
    firsts: Vec<(usize, bool)>,
}

impl<'a> DecodedEntries<'a> {
    fn new(entries: &'a [EntryData]) -> Self {
        // Entity → its place in `firsts`: repeats are found in O(1), not by a scan.
        let mut places: HashMap<Entity, usize> = HashMap::new();
        let mut firsts: Vec<(usize, bool)> = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            match places.entry(Entity::from_wire(entry)) {
                std::collections::hash_map::Entry::Occupied(place) => {
                    firsts[*place.get()].1 = true;
                }
                std::collections::hash_map::Entry::Vacant(place) => {
                    place.insert(firsts.len());
                    firsts.push((index, false));
                }
            }
        }
        DecodedEntries { entries, firsts }
    }
}

impl ListedElements<EntryData> for DecodedEntries<'_> {
    fn listed(&self) -> usize {
        self.entries.len()
    }

    fn distinct(&self) -> usize {
        self.firsts.len()
    }

    fn denied(&self) -> usize {
        0
    }

    fn each_first(&self, visit: &mut dyn FnMut(&EntryData, bool) -> bool) -> Result<(), String> {
        for (index, repeated) in &self.firsts {
            let entry = self.entries.get(*index).ok_or("an entry past the list")?;
            if !visit(entry, *repeated) {
                break;
            }
        }
        Ok(())
    }
}

/// Decides a decoded AlterClientQuotas request against the current quotas: one result per
/// distinct entity, in order of first appearance.
pub fn alter_client_quotas(
    quotas: &ClientQuotasImage,
    request: &AlterClientQuotasRequest,
) -> ControllerResult<AlterClientQuotasResponse> {
    let entries = DecodedEntries::new(&request.entries);
    let ControllerResult { records, response } =
        alter_listed_client_quotas(quotas, &entries, request.validate_only);
    let answered = entries.firsts.iter().enumerate().map(|(at, (index, _))| {
        let entry = &request.entries[*index];
        match (&response.refused, response.outcome(at)) {
            (Some((code, message)), _) => refused_entry(entry, *code, message),
            (None, Some(outcome)) => answer_entry(entry, outcome),
            (None, None) => refused_entry(
                entry,
                ResponseError::UnknownServerError.code(),
                "the entity has no answer",
            ),
        }
    });
    ControllerResult {
        records,
        response: AlterClientQuotasResponse::default().with_entries(answered.collect()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use gregor_publishers::{MetadataDelta, MetadataImage, Provenance};
    use kafka_protocol::messages::alter_client_quotas_request::{EntityData as ReqEntity, OpData};
    use std::sync::Arc;

    fn entry(entity: &[(&str, Option<&str>)], ops: &[(&str, f64, bool)]) -> EntryData {
        EntryData::default()
            .with_entity(
                entity
                    .iter()
                    .map(|(t, n)| {
                        ReqEntity::default()
                            .with_entity_type(StrBytes::from_string((*t).to_owned()))
                            .with_entity_name(n.map(|n| StrBytes::from_string(n.to_owned())))
                    })
                    .collect(),
            )
            .with_ops(
                ops.iter()
                    .map(|(k, v, remove)| {
                        OpData::default()
                            .with_key(StrBytes::from_string((*k).to_owned()))
                            .with_value(*v)
                            .with_remove(*remove)
                    })
                    .collect(),
            )
    }

    fn run(
        quotas: &ClientQuotasImage,
        entries: Vec<EntryData>,
        validate_only: bool,
    ) -> (Vec<MetadataRecord>, Vec<(i16, Option<String>)>) {
        let request = AlterClientQuotasRequest::default()
            .with_entries(entries)
            .with_validate_only(validate_only);
        let result = alter_client_quotas(quotas, &request);
        let outcomes = result
            .response
            .entries
            .iter()
            .map(|e| {
                (
                    e.error_code,
                    e.error_message.as_ref().map(|m| m.to_string()),
                )
            })
            .collect();
        (result.records, outcomes)
    }

    fn one_error(entries: Vec<EntryData>) -> (i16, Option<String>) {
        let (records, outcomes) = run(&ClientQuotasImage::empty(), entries, false);
        assert!(records.is_empty());
        assert_eq!(outcomes.len(), 1);
        outcomes.into_iter().next().unwrap()
    }

    fn invalid(message: &str) -> (i16, Option<String>) {
        (42, Some(message.to_owned()))
    }

    #[test]
    fn validation_messages_are_kafkas() {
        let rate = |v| [("controller_mutation_rate", v, false)];
        assert_eq!(
            one_error(vec![entry(&[], &rate(1.0))]),
            invalid("Invalid empty client quota entity")
        );
        assert_eq!(
            one_error(vec![entry(
                &[("user", Some("a")), ("user", Some("b"))],
                &rate(1.0)
            )]),
            invalid("Invalid client quota entity, duplicate entity entry user")
        );
        assert_eq!(
            one_error(vec![entry(&[("group", Some("g"))], &rate(1.0))]),
            invalid("Unhandled client quota entity type: group")
        );
        assert_eq!(
            one_error(vec![entry(&[("client-id", Some(""))], &rate(1.0))]),
            invalid("Empty client-id not supported")
        );
        assert_eq!(
            one_error(vec![entry(&[("ip", Some("1.2.3.4")), ("user", Some("a"))], &rate(1.0))]),
            invalid("Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId")
        );
        assert_eq!(
            one_error(vec![entry(
                &[("ip", Some("not an ip"))],
                &[("connection_creation_rate", 1.0, false)]
            )]),
            invalid("not an ip is not a valid IP or resolvable host.")
        );
        assert_eq!(
            one_error(vec![entry(&[("ip", Some("::1"))], &rate(1.0))]),
            invalid("Invalid configuration key controller_mutation_rate")
        );
        assert_eq!(
            one_error(vec![entry(
                &[("user", None)],
                &[("connection_creation_rate", 1.0, false)]
            )]),
            invalid("Invalid configuration key connection_creation_rate")
        );
        assert_eq!(
            one_error(vec![entry(&[("user", None)], &rate(0.0))]),
            invalid("Quota controller_mutation_rate must be greater than 0")
        );
        assert_eq!(
            one_error(vec![entry(
                &[("user", None)],
                &[("producer_byte_rate", 1.5, false)]
            )]),
            invalid("producer_byte_rate cannot be a fractional value.")
        );
        assert_eq!(
            one_error(vec![entry(
                &[("user", None)],
                &[("consumer_byte_rate", 1e19, false)]
            )]),
            invalid("Proposed value for consumer_byte_rate is too large for a LONG.")
        );
        assert_eq!(
            one_error(vec![entry(
                &[("ip", None)],
                &[("connection_creation_rate", 3e9, false)]
            )]),
            invalid("Proposed value for connection_creation_rate is too large for an INT.")
        );
        // A repeated key: Kafka's "Duplicate quota key" is overwritten by this message.
        assert_eq!(
            one_error(vec![entry(
                &[("user", Some("alice")), ("client-id", Some("app"))],
                &[
                    ("request_percentage", 1.0, false),
                    ("request_percentage", 2.0, false)
                ]
            )]),
            invalid(
                "Ignoring duplicate entity ClientQuotaEntity(entries={client-id=app, user=alice})"
            )
        );
    }

    #[test]
    fn duplicate_entity_in_one_request() {
        let (records, outcomes) = run(
            &ClientQuotasImage::empty(),
            vec![
                entry(&[("user", None)], &[("request_percentage", 1.0, false)]),
                entry(
                    &[("client-id", Some("c"))],
                    &[("request_percentage", 2.0, false)],
                ),
                entry(&[("user", None)], &[("request_percentage", 3.0, false)]),
            ],
            false,
        );
        // As in Kafka, the first occurrence's records stay; its result becomes the error.
        assert_eq!(records.len(), 2);
        assert_eq!(
            outcomes,
            vec![
                invalid("Ignoring duplicate entity ClientQuotaEntity(entries={user=null})"),
                (0, None)
            ]
        );
    }

    #[test]
    fn records_only_changes_and_validate_only_writes_nothing() {
        let set = vec![entry(
            &[("client-id", Some("app")), ("user", Some("alice"))],
            &[
                ("producer_byte_rate", 1024.0, false),
                ("controller_mutation_rate", 2.0, false),
            ],
        )];
        let (records, outcomes) = run(&ClientQuotasImage::empty(), set.clone(), true);
        assert!(records.is_empty());
        assert_eq!(outcomes, vec![(0, None)]);
        let (records, _) = run(&ClientQuotasImage::empty(), set.clone(), false);
        assert_eq!(records.len(), 2);
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        delta.replay_all(&records).unwrap();
        let image = delta.apply(Provenance::default());
        // Same values again: nothing to write. Removing an absent key: nothing either.
        let (records, outcomes) = run(&image.client_quotas, set, false);
        assert!(records.is_empty());
        assert_eq!(outcomes, vec![(0, None)]);
        let (records, _) = run(
            &image.client_quotas,
            vec![entry(
                &[("user", Some("alice")), ("client-id", Some("app"))],
                &[
                    ("request_percentage", 0.0, true),
                    ("producer_byte_rate", 0.0, true),
                ],
            )],
            false,
        );
        assert_eq!(records.len(), 1);
        let MetadataRecord::ClientQuota(record) = &records[0] else {
            panic!("{records:?}")
        };
        assert!(record.remove);
        assert_eq!(record.key, "producer_byte_rate");
        assert_eq!(record.entity[0].entity_type, "client-id");
    }
    #[test]
    fn at_most_ten_thousand_records_in_one_request() {
        // 5,000 entities of two keys: 10,000 records, written.
        let two_keys = [
            ("producer_byte_rate", 1024.0, false),
            ("consumer_byte_rate", 2048.0, false),
        ];
        let client = |i: usize| format!("c{i}");
        let entries = |n: usize| -> Vec<EntryData> {
            (0..n)
                .map(|i| entry(&[("client-id", Some(client(i).as_str()))], &two_keys))
                .collect()
        };
        let (records, outcomes) = run(&ClientQuotasImage::empty(), entries(5_000), false);
        assert_eq!(records.len(), MAX_RECORDS_PER_USER_OP);
        assert!(outcomes.iter().all(|o| *o == (0, None)));
        // One more entity: every entity refused, nothing written; validated only, all valid.
        let mut over = entries(5_000);
        over.insert(
            7,
            entry(&[("user", None)], &[("request_percentage", 5.0, false)]),
        );
        let (records, outcomes) = run(&ClientQuotasImage::empty(), over.clone(), false);
        assert!(records.is_empty());
        assert_eq!(outcomes.len(), 5_001);
        let too_many = (44, Some(TOO_MANY.to_owned()));
        assert!(outcomes.iter().all(|o| *o == too_many));
        let (records, outcomes) = run(&ClientQuotasImage::empty(), over, true);
        assert!(records.is_empty());
        assert!(outcomes.iter().all(|o| *o == (0, None)));
    }

    #[test]
    fn an_uncommitted_write_fails_the_altered_entities_only() {
        let answers = ListedQuotaAlteration {
            per_element: vec![ALTERED, INVALID, DUPLICATE, ALTERED],
            outcomes: vec![
                QuotaOutcome::Altered,
                QuotaOutcome::Invalid,
                QuotaOutcome::Duplicate,
            ],
            ..Default::default()
        };
        let failed = answers.fail_succeeded(ResponseError::NotController, "lost");
        let lost = QuotaOutcome::Failed {
            code: ResponseError::NotController.code(),
            message: "lost".to_owned(),
        };
        assert_eq!(failed.outcome(0), Some(&lost));
        assert_eq!(failed.outcome(1), Some(&QuotaOutcome::Invalid));
        assert_eq!(failed.outcome(2), Some(&QuotaOutcome::Duplicate));
        assert_eq!(failed.outcome(3), Some(&lost));
    }
}
