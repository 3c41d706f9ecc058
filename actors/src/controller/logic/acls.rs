//! CreateAcls and DeleteAcls as Kafka's `AclApis` and `AclControlManager` decide them.
//!
//! Create: each creation is validated alone (CLUSTER only as `kafka-cluster`, no empty name, a
//! concrete type, pattern, operation and permission, a `type:name` principal: INVALID_REQUEST
//! otherwise); an ACL equal
//! to an existing one (or to an earlier one of the same request) succeeds without a record.
//! Delete: each filter selects from the ACLs of the image; an ACL selected by several filters
//! is reported by each and removed once; the whole request is one atomic batch.

use std::collections::{HashMap, HashSet};

use gregor_publishers::acl::{
    AclFilter, AclOperation, AclPermission, PatternType, ResourceType, CLUSTER_NAME,
};
use gregor_publishers::image::{AclsImage, StandardAcl};
use gregor_publishers::records::{MetadataRecord, RemoveAccessControlEntryRecord};
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
};
use kafka_protocol::protocol::StrBytes;
use rand::RngCore;
use uuid::Uuid;

use super::listed::{
    decide_listed, ElementError, ListedAnswers, ListedElements, ListedError, Uncommitted,
};
use super::{ControllerResult, MAX_RECORDS_PER_USER_OP};

/// Kafka's limit on the ACLs one DeleteAcls may remove (`AclControlManager` refuses more).
pub const MAX_DELETED_ACLS: usize = 10_000;

fn invalid(message: String) -> (ResponseError, String) {
    (ResponseError::InvalidRequest, message)
}

/// The ACL a creation asks for, or why it is refused.
fn validate(creation: &AclCreation) -> Result<StandardAcl, (ResponseError, String)> {
    let resource_type = ResourceType::from_code(creation.resource_type);
    if resource_type == Some(ResourceType::Cluster)
        && creation.resource_name.as_str() != CLUSTER_NAME
    {
        return Err(invalid(format!(
            "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
        )));
    }
    if creation.resource_name.is_empty() {
        return Err(invalid("Invalid empty resource name".to_owned()));
    }
    let resource_type = resource_type.filter(|t| t.is_concrete()).ok_or_else(|| {
        invalid(format!(
            "Invalid resourceType {}",
            ResourceType::from_code(creation.resource_type).map_or("UNKNOWN", |t| t.name())
        ))
    })?;
    let pattern_type = PatternType::from_code(creation.resource_pattern_type)
        .filter(|p| p.is_concrete())
        .ok_or_else(|| {
            invalid(format!(
                "Invalid patternType {}",
                PatternType::from_code(creation.resource_pattern_type)
                    .map_or("UNKNOWN", |p| p.name())
            ))
        })?;
    let operation = AclOperation::from_code(creation.operation)
        .filter(|o| o.is_concrete())
        .ok_or_else(|| {
            invalid(format!(
                "Invalid operation {}",
                AclOperation::from_code(creation.operation).map_or("UNKNOWN", |o| o.name())
            ))
        })?;
    let permission = AclPermission::from_code(creation.permission_type)
        .filter(|p| p.is_concrete())
        .ok_or_else(|| {
            invalid(format!(
                "Invalid permissionType {}",
                AclPermission::from_code(creation.permission_type).map_or("UNKNOWN", |p| p.name())
            ))
        })?;
    // Kafka 4.0+ (KAFKA-18051): an ACL whose principal has no type matches no one, yet it
    // would count as an ACL on its resource (allow.everyone.if.no.acl.found).
    if !creation.principal.contains(':') {
        return Err(invalid(format!(
            "Could not parse principal from `{}` (no colon is present separating the principal \
             type from the principal name)",
            creation.principal
        )));
    }
    Ok(StandardAcl {
        resource_type,
        resource_name: creation.resource_name.to_string(),
        pattern_type,
        principal: creation.principal.to_string(),
        host: creation.host.to_string(),
        operation,
        permission,
    })
}

/// A random (version 4) id not used by any ACL of `image` nor by `taken`.
fn new_acl_id(image: &AclsImage, taken: &HashSet<Uuid>, rng: &mut dyn RngCore) -> Uuid {
    loop {
        let mut bytes = [0u8; 16];
        rng.fill_bytes(&mut bytes);
        let id = uuid::Builder::from_random_bytes(bytes).into_uuid();
        if image.get(&id).is_none() && !taken.contains(&id) {
            return id;
        }
    }
}

/// Decides a CreateAcls request against `image`; results in request order. Past
/// [`MAX_RECORDS_PER_USER_OP`] new ACLs the whole request fails, as Kafka's `BoundedList` of
/// records fails `createAcls`: the decision stops at the first ACL too many, so a request of
/// millions of creations never holds more than the limit.
pub fn create_acls(
    image: &AclsImage,
    request: &CreateAclsRequest,
    rng: &mut dyn RngCore,
) -> ControllerResult<CreateAclsResponse> {
    let mut records = Vec::new();
    let mut created: HashSet<StandardAcl> = HashSet::new();
    let mut ids = HashSet::new();
    let mut results = Vec::with_capacity(request.creations.len().min(MAX_RECORDS_PER_USER_OP));
    for creation in &request.creations {
        results.push(match validate(creation) {
            Err((code, message)) => AclCreationResult::default()
                .with_error_code(code.code())
                .with_error_message(Some(StrBytes::from_string(message))),
            Ok(acl) => {
                if !image.contains(&acl) && !created.contains(&acl) {
                    if records.len() == MAX_RECORDS_PER_USER_OP {
                        return too_many_acls(request);
                    }
                    let id = new_acl_id(image, &ids, rng);
                    ids.insert(id);
                    records.push(MetadataRecord::AccessControlEntry(acl.to_record(id)));
                    created.insert(acl);
                }
                AclCreationResult::default().with_error_message(None)
            }
        });
    }
    ControllerResult {
        records,
        response: CreateAclsResponse::default().with_results(results),
    }
}

/// Every creation of `request` refused: it would create more than [`MAX_RECORDS_PER_USER_OP`]
/// ACLs (Kafka's UNKNOWN_SERVER_ERROR; here with a message saying what to do).
fn too_many_acls(request: &CreateAclsRequest) -> ControllerResult<CreateAclsResponse> {
    let message = StrBytes::from_string(too_many_message());
    let refused = AclCreationResult::default()
        .with_error_code(ResponseError::UnknownServerError.code())
        .with_error_message(Some(message));
    ControllerResult {
        records: Vec::new(),
        response: CreateAclsResponse::default()
            .with_results(vec![refused; request.creations.len()]),
    }
}

/// Why one creation of a [`ListedElements`] CreateAcls request is refused.
pub(super) enum CreationRefusal {
    /// Not a valid ACL.
    Invalid((ResponseError, String)),
    /// One ACL more than a request may create: every creation fails.
    TooMany,
}

impl ElementError for CreationRefusal {
    fn is_batch_too_large(&self) -> bool {
        matches!(self, CreationRefusal::TooMany)
    }

    /// The messages never name the ACL.
    fn answer(&self, _: &str) -> ListedError {
        let (code, message) = match self {
            CreationRefusal::Invalid((code, message)) => (*code, message.clone()),
            CreationRefusal::TooMany => (ResponseError::UnknownServerError, too_many_message()),
        };
        ListedError {
            code: code.code(),
            message: Some(vec![message]),
        }
    }
}

fn too_many_message() -> String {
    format!("A request may create at most {MAX_RECORDS_PER_USER_OP} ACLs")
}

/// The answer to a [`ListedElements`] CreateAcls request: each creation's error code and
/// message, in request order.
pub type ListedAclCreation = ListedAnswers<ListedError>;

/// Decides a request whose creations are read from `creations` (each one listed on its own:
/// every creation is answered) as [`create_acls`] decides the same creations, without
/// holding them or their answers whole.
pub fn create_listed_acls(
    image: &AclsImage,
    creations: &dyn ListedElements<AclCreation>,
    rng: &mut dyn RngCore,
) -> ControllerResult<ListedAclCreation> {
    let mut created: HashSet<StandardAcl> = HashSet::new();
    let mut ids = HashSet::new();
    decide_listed(
        "CreateAcls",
        creations,
        false,
        |creation, _, records_so_far| {
            let acl = validate(creation).map_err(CreationRefusal::Invalid)?;
            if image.contains(&acl) || created.contains(&acl) {
                return Ok((Vec::new(), ListedError::default()));
            }
            if records_so_far == MAX_RECORDS_PER_USER_OP {
                return Err(CreationRefusal::TooMany);
            }
            let id = new_acl_id(image, &ids, rng);
            ids.insert(id);
            let record = MetadataRecord::AccessControlEntry(acl.to_record(id));
            created.insert(acl);
            Ok((vec![record], ListedError::default()))
        },
        |creation| creation.resource_name.as_str(),
        ListedError::clone,
    )
}

/// The response field of one ACL.
pub fn matching_acl(acl: &StandardAcl) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(acl.resource_type.code())
        .with_resource_name(StrBytes::from_string(acl.resource_name.clone()))
        .with_pattern_type(acl.pattern_type.code())
        .with_principal(StrBytes::from_string(acl.principal.clone()))
        .with_host(StrBytes::from_string(acl.host.clone()))
        .with_operation(acl.operation.code())
        .with_permission_type(acl.permission.code())
        .with_error_message(None)
}

/// The ACL filter a DeleteAcls filter asks for; `None` when it names an unknown pattern or
/// entry.
fn acl_filter(filter: &DeleteAclsFilter) -> Option<AclFilter> {
    AclFilter::from_codes(
        filter.resource_type_filter,
        filter.resource_name_filter.as_deref(),
        filter.pattern_type_filter,
        filter.principal_filter.as_deref(),
        filter.host_filter.as_deref(),
        filter.operation,
        filter.permission_type,
    )
}

const UNKNOWN_FILTER: &str = "Unknown patternFilter or entryFilter.";

/// Why a DeleteAcls selecting more ACLs than one request may delete fails, every filter alike.
fn too_many_deleted() -> String {
    format!("Cannot delete more than {MAX_DELETED_ACLS} ACLs in one request")
}

/// Decides a DeleteAcls request against `image`; one result per filter, in request order.
/// Past [`MAX_DELETED_ACLS`] selected ACLs the whole request fails: the decision stops at the
/// first filter selecting one too many.
pub fn delete_acls(
    image: &AclsImage,
    request: &DeleteAclsRequest,
) -> ControllerResult<DeleteAclsResponse> {
    let mut removed: Vec<Uuid> = Vec::new();
    let mut seen: HashSet<Uuid> = HashSet::new();
    let mut results = Vec::with_capacity(request.filters.len());
    for filter in &request.filters {
        let Some(filter) = acl_filter(filter) else {
            results.push(
                DeleteAclsFilterResult::default()
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_error_message(Some(StrBytes::from_static_str(UNKNOWN_FILTER))),
            );
            continue;
        };
        let matching = image.matching(&filter);
        for (id, _) in &matching {
            if seen.insert(**id) {
                removed.push(**id);
            }
        }
        if removed.len() > MAX_DELETED_ACLS {
            let refused = DeleteAclsFilterResult::default()
                .with_error_code(ResponseError::UnknownServerError.code())
                .with_error_message(Some(StrBytes::from_string(too_many_deleted())));
            return ControllerResult {
                records: Vec::new(),
                response: DeleteAclsResponse::default().with_filter_results(vec![
                    refused;
                    request
                        .filters
                        .len()
                ]),
            };
        }
        results.push(
            DeleteAclsFilterResult::default()
                .with_error_message(None)
                .with_matching_acls(
                    matching
                        .into_iter()
                        .map(|(_, acl)| matching_acl(acl))
                        .collect(),
                ),
        );
    }
    ControllerResult {
        records: removed_records(removed),
        response: DeleteAclsResponse::default().with_filter_results(results),
    }
}

fn removed_records(removed: Vec<Uuid>) -> Vec<MetadataRecord> {
    removed
        .into_iter()
        .map(|id| MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord { id }))
        .collect()
}

/// What one filter of a [`ListedElements`] DeleteAcls request is answered.
#[derive(Debug, Clone, PartialEq)]
pub enum FilterOutcome {
    Failed(ListedError),
    /// The ACLs it selects, as the image before the request holds them.
    Matched(Vec<StandardAcl>),
}

impl Uncommitted for FilterOutcome {
    /// A filter's selection fails; a failure stays as it is.
    fn fail_if_succeeded(&mut self, code: i16, message: &str) {
        if matches!(self, FilterOutcome::Matched(_)) {
            *self = FilterOutcome::Failed(ListedError {
                code,
                message: Some(vec![message.to_owned()]),
            });
        }
    }
}

/// The answer to a [`ListedElements`] DeleteAcls request: each filter's outcome, in request
/// order, filters selecting the same ACLs sharing one.
pub type ListedAclDeletion = ListedAnswers<FilterOutcome>;

/// Decides a request whose filters are read from `filters` (each listed on its own: every
/// filter is answered) as [`delete_acls`] decides the same filters, without holding them or
/// their answers whole.
pub fn delete_listed_acls(
    image: &AclsImage,
    filters: &dyn ListedElements<DeleteAclsFilter>,
) -> ControllerResult<ListedAclDeletion> {
    let mut answers = ListedAclDeletion {
        per_element: Vec::with_capacity(filters.distinct()),
        ..Default::default()
    };
    let mut removed: Vec<Uuid> = Vec::new();
    let mut seen: HashSet<Uuid> = HashSet::new();
    // Each selection's outcome, by the ids it selects (the unknown filter's by none).
    let mut selections: HashMap<Option<Vec<Uuid>>, u32> = HashMap::new();
    let mut too_many = false;
    let mut broken: Option<String> = None;
    let walked = filters.each_first(&mut |filter, _| {
        let selected = acl_filter(filter).map(|filter| image.matching(&filter));
        for (id, _) in selected.iter().flatten() {
            if seen.insert(**id) {
                removed.push(**id);
            }
        }
        if removed.len() > MAX_DELETED_ACLS {
            too_many = true;
            return false;
        }
        let key = selected
            .as_ref()
            .map(|matching| matching.iter().map(|(id, _)| **id).collect::<Vec<Uuid>>());
        let index = match selections.get(&key) {
            Some(index) => *index,
            None => {
                let Ok(index) = u32::try_from(answers.outcomes.len()) else {
                    broken = Some("more than 2^32 outcomes".to_owned());
                    return false;
                };
                answers.outcomes.push(match selected {
                    None => FilterOutcome::Failed(ListedError {
                        code: ResponseError::InvalidRequest.code(),
                        message: Some(vec![UNKNOWN_FILTER.to_owned()]),
                    }),
                    Some(matching) => FilterOutcome::Matched(
                        matching.into_iter().map(|(_, acl)| acl.clone()).collect(),
                    ),
                });
                selections.insert(key, index);
                index
            }
        };
        answers.per_element.push(index);
        true
    });
    if let Some(error) = walked.err().or(broken) {
        tracing::error!(%error, "a DeleteAcls request could not be read again");
        return ControllerResult {
            records: Vec::new(),
            response: ListedAnswers::refused(ResponseError::UnknownServerError.code(), &error),
        };
    }
    if too_many {
        return ControllerResult {
            records: Vec::new(),
            response: ListedAclDeletion {
                alike: filters.distinct(),
                outcomes: vec![FilterOutcome::Failed(ListedError {
                    code: ResponseError::UnknownServerError.code(),
                    message: Some(vec![too_many_deleted()]),
                })],
                ..Default::default()
            },
        };
    }
    ControllerResult {
        records: removed_records(removed),
        response: answers,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use gregor_publishers::{MetadataDelta, MetadataImage, Provenance};
    use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
    use rand::SeedableRng;

    use super::*;

    fn creation(t: i8, name: &str, p: i8, principal: &str, op: i8, perm: i8) -> AclCreation {
        AclCreation::default()
            .with_resource_type(t)
            .with_resource_name(StrBytes::from_string(name.into()))
            .with_resource_pattern_type(p)
            .with_principal(StrBytes::from_string(principal.into()))
            .with_host(StrBytes::from_static_str("*"))
            .with_operation(op)
            .with_permission_type(perm)
    }

    fn applied(base: &MetadataImage, records: &[MetadataRecord]) -> MetadataImage {
        let mut delta = MetadataDelta::new(Arc::new(base.clone()));
        assert!(delta.replay_all(records).is_ok());
        delta.apply(Provenance::default())
    }

    /// Kafka's `MAX_RECORDS_PER_USER_OP`: 10,000 new ACLs (and any number of repeats or
    /// invalid ones) are created; one more fails the whole request, nothing written.
    #[test]
    fn at_most_ten_thousand_acls_are_created_in_one_request() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let topics = |n: usize| -> Vec<AclCreation> {
            (0..n)
                .map(|i| creation(2, &format!("t{i}"), 3, "User:alice", 3, 3))
                .collect()
        };
        let mut at_limit = topics(MAX_RECORDS_PER_USER_OP);
        at_limit.push(creation(2, "t0", 3, "User:alice", 3, 3));
        at_limit.push(creation(2, "", 3, "User:alice", 3, 3));
        let request = CreateAclsRequest::default().with_creations(at_limit);
        let result = create_acls(&AclsImage::default(), &request, &mut rng);
        assert_eq!(result.records.len(), MAX_RECORDS_PER_USER_OP);
        let codes: Vec<i16> = result
            .response
            .results
            .iter()
            .map(|r| r.error_code)
            .collect();
        assert_eq!(codes.len(), MAX_RECORDS_PER_USER_OP + 2);
        assert!(codes[..=MAX_RECORDS_PER_USER_OP].iter().all(|c| *c == 0));
        assert_eq!(codes[MAX_RECORDS_PER_USER_OP + 1], 42);

        let mut over = topics(MAX_RECORDS_PER_USER_OP + 1);
        over.push(creation(2, "", 3, "User:alice", 3, 3));
        let request = CreateAclsRequest::default().with_creations(over);
        let result = create_acls(&AclsImage::default(), &request, &mut rng);
        assert!(result.records.is_empty());
        assert_eq!(result.response.results.len(), MAX_RECORDS_PER_USER_OP + 2);
        for answer in &result.response.results {
            assert_eq!(answer.error_code, -1);
            assert_eq!(
                answer.error_message.as_deref(),
                Some("A request may create at most 10000 ACLs")
            );
        }
    }

    #[test]
    fn creations_are_validated_one_by_one_and_deduplicated() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let request = CreateAclsRequest::default().with_creations(vec![
            creation(2, "orders", 3, "User:alice", 3, 3),
            creation(4, "my-cluster", 3, "User:alice", 7, 3),
            creation(2, "", 3, "User:alice", 3, 3),
            creation(1, "x", 3, "User:alice", 3, 3),
            creation(2, "x", 2, "User:alice", 3, 3),
            creation(2, "x", 3, "User:alice", 1, 3),
            creation(2, "x", 3, "User:alice", 3, 1),
            creation(2, "orders", 3, "User:alice", 3, 3),
            creation(4, "kafka-cluster", 3, "User:bob", 9, 2),
            creation(2, "orders", 3, "alice", 3, 3),
        ]);
        let result = create_acls(&AclsImage::default(), &request, &mut rng);
        let outcome: Vec<(i16, Option<String>)> = result
            .response
            .results
            .iter()
            .map(|r| {
                (
                    r.error_code,
                    r.error_message.as_ref().map(|m| m.to_string()),
                )
            })
            .collect();
        let bad = |m: &str| (42, Some(m.to_owned()));
        assert_eq!(
            outcome,
            vec![
                (0, None),
                bad("The only valid name for the CLUSTER resource is kafka-cluster"),
                bad("Invalid empty resource name"),
                bad("Invalid resourceType ANY"),
                bad("Invalid patternType MATCH"),
                bad("Invalid operation ANY"),
                bad("Invalid permissionType ANY"),
                (0, None),
                (0, None),
                bad("Could not parse principal from `alice` (no colon is present separating the principal type from the principal name)"),
            ]
        );
        assert_eq!(result.records.len(), 2, "the repeated ACL is written once");
        let image = applied(&MetadataImage::empty(), &result.records);
        let again = create_acls(&image.acls, &request, &mut rng);
        assert!(
            again.records.is_empty(),
            "existing ACLs are not written again"
        );
    }

    #[test]
    fn deletions_report_per_filter_and_remove_once() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let created = create_acls(
            &AclsImage::default(),
            &CreateAclsRequest::default().with_creations(vec![
                creation(2, "orders", 3, "User:alice", 3, 3),
                creation(2, "ord", 4, "User:bob", 4, 3),
                creation(3, "g", 3, "User:alice", 3, 3),
            ]),
            &mut rng,
        );
        let image = applied(&MetadataImage::empty(), &created.records);
        let filter = |t: i8, name: Option<&str>, p: i8, principal: Option<&str>| {
            DeleteAclsFilter::default()
                .with_resource_type_filter(t)
                .with_resource_name_filter(name.map(|n| StrBytes::from_string(n.into())))
                .with_pattern_type_filter(p)
                .with_principal_filter(principal.map(|n| StrBytes::from_string(n.into())))
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1)
        };
        let request = DeleteAclsRequest::default().with_filters(vec![
            filter(2, Some("orders"), 2, None),
            filter(1, None, 1, Some("User:alice")),
            filter(0, None, 1, None),
        ]);
        let result = delete_acls(&image.acls, &request);
        let counts: Vec<(i16, usize)> = result
            .response
            .filter_results
            .iter()
            .map(|r| (r.error_code, r.matching_acls.len()))
            .collect();
        assert_eq!(counts, vec![(0, 2), (0, 2), (42, 0)]);
        assert_eq!(result.records.len(), 3, "orders/alice is removed once");
        let after = applied(&image, &result.records);
        assert!(after.acls.is_empty());
    }

    #[test]
    fn listed_creations_are_answered_as_the_decoded_request() {
        use crate::controller::logic::listed::Listed;
        let existing = CreateAclsRequest::default().with_creations(vec![creation(
            2,
            "old",
            3,
            "User:alice",
            3,
            3,
        )]);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let created = create_acls(&AclsImage::default(), &existing, &mut rng);
        let image = applied(&MetadataImage::empty(), &created.records);
        let mut creations = vec![
            creation(2, "old", 3, "User:alice", 3, 3),
            creation(4, "not-the-cluster", 3, "User:alice", 3, 3),
            creation(2, "", 3, "User:alice", 3, 3),
            creation(1, "t", 3, "User:alice", 3, 3),
            creation(2, "t", 1, "User:alice", 3, 3),
            creation(2, "t", 3, "User:alice", 1, 3),
            creation(2, "t", 3, "User:alice", 3, 1),
        ];
        for index in 0..3_000 {
            creations.push(creation(
                2,
                &format!("t{}", index % 1_500),
                3,
                "User:bob",
                3,
                3,
            ));
            creations.push(creation(2, "", 3, "User:bob", 3, 3));
        }
        let results = |creations: Vec<AclCreation>, limit: bool| {
            let request = CreateAclsRequest::default().with_creations(creations.clone());
            let decoded = create_acls(
                &image.acls,
                &request,
                &mut rand::rngs::StdRng::seed_from_u64(9),
            );
            let listed = Listed::each(creations);
            let kept = create_listed_acls(
                &image.acls,
                &listed,
                &mut rand::rngs::StdRng::seed_from_u64(9),
            );
            let rebuilt: Vec<AclCreationResult> = (0..listed.distinct())
                .map(|index| {
                    let outcome = match &kept.response.refused {
                        Some(_) => unreachable!("decided"),
                        None => kept.response.outcome(index).expect("answered"),
                    };
                    AclCreationResult::default()
                        .with_error_code(outcome.code)
                        .with_error_message(outcome.message_for(""))
                })
                .collect();
            assert_eq!(rebuilt, decoded.response.results, "limit {limit}");
            assert_eq!(kept.records, decoded.records, "limit {limit}");
            assert!(
                kept.response.outcomes.len() < 10,
                "{:?}",
                kept.response.outcomes
            );
            decoded.records.len()
        };
        assert_eq!(results(creations.clone(), false), 1_500, "t0 to t1499");
        // Past 10,000 new ACLs every creation fails alike.
        creations.extend(
            (0..MAX_RECORDS_PER_USER_OP)
                .map(|i| creation(2, &format!("u{i}"), 3, "User:bob", 3, 3)),
        );
        assert_eq!(results(creations, true), 0);
    }

    #[test]
    fn listed_filters_are_answered_as_the_decoded_request() {
        use crate::controller::logic::listed::Listed;
        use crate::controller::logic::ListedElements;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut acls: Vec<AclCreation> = (0..30)
            .map(|i| creation(2, &format!("t{i}"), 3, "User:alice", 3, 3))
            .collect();
        acls.push(creation(2, "t", 4, "User:bob", 3, 3));
        let created = create_acls(
            &AclsImage::default(),
            &CreateAclsRequest::default().with_creations(acls),
            &mut rng,
        );
        let image = applied(&MetadataImage::empty(), &created.records);
        let filter = |name: Option<&str>, pattern: i8, principal: Option<&str>| {
            DeleteAclsFilter::default()
                .with_resource_type_filter(2)
                .with_resource_name_filter(name.map(|n| StrBytes::from_string(n.to_owned())))
                .with_pattern_type_filter(pattern)
                .with_principal_filter(principal.map(|p| StrBytes::from_string(p.to_owned())))
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1)
        };
        let mut filters = vec![
            filter(None, 1, Some("User:bob")),
            filter(Some("t3"), 9, None),
            filter(Some("t3"), 3, None),
            filter(Some("t3"), 3, Some("User:alice")),
            filter(Some("t"), 4, None),
            filter(Some("t3"), 1, None),
        ];
        for index in 0..2_000 {
            filters.push(filter(Some(&format!("t{}", index % 40)), 3, None));
            filters.push(filter(Some("zz"), 3, None));
        }
        let rebuilt = |filters: Vec<DeleteAclsFilter>| {
            let request = DeleteAclsRequest::default().with_filters(filters.clone());
            let decoded = delete_acls(&image.acls, &request);
            let listed = Listed::each(filters);
            let kept = delete_listed_acls(&image.acls, &listed);
            let results: Vec<DeleteAclsFilterResult> = (0..listed.distinct())
                .map(
                    |index| match kept.response.outcome(index).expect("answered") {
                        FilterOutcome::Failed(error) => DeleteAclsFilterResult::default()
                            .with_error_code(error.code)
                            .with_error_message(error.message_for("")),
                        FilterOutcome::Matched(acls) => DeleteAclsFilterResult::default()
                            .with_error_message(None)
                            .with_matching_acls(acls.iter().map(matching_acl).collect()),
                    },
                )
                .collect();
            assert_eq!(results, decoded.response.filter_results);
            assert_eq!(kept.records, decoded.records);
            (kept.records.len(), kept.response.outcomes.len())
        };
        // bob's, t3 (once, however many filters select it), t0 to t29; "t" prefixed is bob's.
        let (removed, outcomes) = rebuilt(filters.clone());
        assert_eq!(removed, 31);
        assert!(outcomes < 40, "{outcomes} outcomes");
        // Past the limit every filter fails alike.
        let many: Vec<AclCreation> = (0..MAX_DELETED_ACLS)
            .map(|i| creation(2, &format!("u{i}"), 3, "User:carol", 3, 3))
            .collect();
        let more = create_acls(
            &image.acls,
            &CreateAclsRequest::default().with_creations(many),
            &mut rng,
        );
        let image = applied(&image, &more.records);
        let mut over = filters;
        over.push(filter(None, 1, Some("User:carol")));
        let request = DeleteAclsRequest::default().with_filters(over.clone());
        let decoded = delete_acls(&image.acls, &request);
        assert!(decoded.records.is_empty());
        let listed = Listed::each(over);
        let kept = delete_listed_acls(&image.acls, &listed);
        assert!(kept.records.is_empty());
        assert_eq!(
            kept.response.answered(),
            decoded.response.filter_results.len()
        );
        assert_eq!(
            kept.response.outcomes,
            vec![FilterOutcome::Failed(ListedError {
                code: -1,
                message: Some(vec![
                    "Cannot delete more than 10000 ACLs in one request".to_owned()
                ]),
            })]
        );
        assert!(decoded
            .response
            .filter_results
            .iter()
            .all(|r| r.error_code == -1));
    }

    #[test]
    fn an_uncommitted_deletion_fails_the_selections_only() {
        let invalid = FilterOutcome::Failed(ListedError {
            code: 42,
            message: Some(vec![UNKNOWN_FILTER.to_owned()]),
        });
        let answers = ListedAclDeletion {
            per_element: vec![0, 1],
            outcomes: vec![FilterOutcome::Matched(Vec::new()), invalid.clone()],
            ..Default::default()
        };
        let failed = answers.fail_succeeded(ResponseError::NotController, "gone");
        let gone = FilterOutcome::Failed(ListedError {
            code: ResponseError::NotController.code(),
            message: Some(vec!["gone".to_owned()]),
        });
        assert_eq!(failed.outcomes, vec![gone, invalid]);
    }
}
