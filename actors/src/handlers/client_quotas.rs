//! DescribeClientQuotas (48), served from the image, and AlterClientQuotas (49), handed to the
//! controller (reference §4.7-4.8).

use std::sync::Arc;

use gregor_publishers::records::EntityData;
use gregor_publishers::ClientQuotasImage;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_request::EntryData as RequestEntry;
use kafka_protocol::messages::alter_client_quotas_response::{
    EntityData as AlterEntity, EntryData as AlterEntry,
};
use kafka_protocol::messages::describe_client_quotas_response::{
    EntityData as DescribeEntity, EntryData as DescribeEntry, ValueData,
};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

use super::{ApiResponse, ErrorCounts};
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::logic::client_quotas::{ListedQuotaAlteration, CLIENT_ID, IP, USER};
use crate::controller::logic::ListedElements;
use crate::controller::{AlterClientQuotas, AlterListedClientQuotas};

const MATCH_TYPE_EXACT: i8 = 0;
const MATCH_TYPE_DEFAULT: i8 = 1;
const MATCH_TYPE_SPECIFIED: i8 = 2;

/// A filter that cannot be served: the whole response carries this error.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct FilterError {
    /// INVALID_REQUEST or UNSUPPORTED_VERSION.
    pub(super) code: ResponseError,
    /// Kafka's message.
    pub(super) message: String,
}

fn invalid(message: impl Into<String>) -> FilterError {
    FilterError {
        code: ResponseError::InvalidRequest,
        message: message.into(),
    }
}

/// Kafka's `ClientQuotasImage.describe`: the entities of `quotas` matching the request's
/// filter, each with every key it has, in entity order.
pub(super) fn describe(
    quotas: &ClientQuotasImage,
    request: &DescribeClientQuotasRequest,
) -> Result<Vec<DescribeEntry>, FilterError> {
    // type → Some(name) for EXACT, Some(None) for DEFAULT, None for SPECIFIED.
    let mut filter: Vec<(&str, Option<Option<&str>>)> = Vec::new();
    for component in &request.components {
        let entity_type = component.entity_type.as_str();
        if entity_type.is_empty() {
            return Err(invalid("Invalid empty entity type."));
        }
        if filter.iter().any(|(t, _)| *t == entity_type) {
            return Err(invalid(format!(
                "Entity type {entity_type} cannot appear more than once in the filter."
            )));
        }
        if !matches!(entity_type, USER | CLIENT_ID | IP) {
            return Err(FilterError {
                code: ResponseError::UnsupportedVersion,
                message: format!("Unsupported entity type {entity_type}"),
            });
        }
        let matcher = component._match.as_ref().map(|m| m.as_str());
        let wanted =
            match (component.match_type, matcher) {
                (MATCH_TYPE_EXACT, Some(name)) => Some(Some(name)),
                (MATCH_TYPE_EXACT, None) => {
                    return Err(invalid(
                        "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                    ))
                }
                (MATCH_TYPE_DEFAULT, None) => Some(None),
                (MATCH_TYPE_DEFAULT, Some(_)) => {
                    return Err(invalid(
                        "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                    ))
                }
                (MATCH_TYPE_SPECIFIED, None) => None,
                (MATCH_TYPE_SPECIFIED, Some(_)) => return Err(invalid(
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )),
                (other, _) => return Err(invalid(format!("Unknown match type {other}"))),
            };
        filter.push((entity_type, wanted));
    }
    let has = |t: &str| filter.iter().any(|(ft, _)| *ft == t);
    if has(IP) && (has(USER) || has(CLIENT_ID)) {
        return Err(invalid(
            "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.",
        ));
    }
    // Kafka answers nothing for a strict filter without components, everything for a
    // non-strict one.
    if filter.is_empty() && request.strict {
        return Ok(Vec::new());
    }
    let matches = |entity: &[EntityData]| {
        if request.strict && entity.len() != filter.len() {
            return false;
        }
        filter.iter().all(|(t, wanted)| {
            let part = entity.iter().find(|p| p.entity_type == *t);
            match (part, wanted) {
                (None, _) => false,
                (Some(_), None) => true,
                (Some(part), Some(name)) => part.entity_name.as_deref() == *name,
            }
        })
    };
    Ok(quotas
        .iter()
        .filter(|(entity, _)| matches(entity))
        .map(|(entity, values)| {
            DescribeEntry::default()
                .with_entity(
                    entity
                        .iter()
                        .map(|p| {
                            DescribeEntity::default()
                                .with_entity_type(StrBytes::from_string(p.entity_type.clone()))
                                .with_entity_name(p.entity_name.clone().map(StrBytes::from_string))
                        })
                        .collect(),
                )
                .with_values(
                    values
                        .iter()
                        .map(|(key, value)| {
                            ValueData::default()
                                .with_key(StrBytes::from_string(key.to_owned()))
                                .with_value(value)
                        })
                        .collect(),
                )
        })
        .collect())
}

pub(super) fn describe_client_quotas(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: &DescribeClientQuotasRequest,
) -> ApiResponse {
    let image = ctx.image.load();
    let mut errors = ErrorCounts::default();
    // Kafka: DESCRIBE_CONFIGS on the cluster.
    let allowed = crate::authorizer::Access::new(ctx, info)
        .allows_cluster(gregor_publishers::acl::AclOperation::DescribeConfigs);
    let described = if allowed {
        describe(&image.client_quotas, request)
    } else {
        Err(FilterError {
            code: kafka_protocol::error::ResponseError::ClusterAuthorizationFailed,
            message: "Cluster authorization failed.".to_owned(),
        })
    };
    let response = match described {
        Ok(entries) => {
            errors.add(0);
            // Kafka's `fromQuotaEntities`: a null message on success (the crate's default is "").
            DescribeClientQuotasResponse::default()
                .with_error_code(0)
                .with_error_message(None)
                .with_entries(Some(entries))
        }
        Err(error) => {
            errors.add(error.code.code());
            DescribeClientQuotasResponse::default()
                .with_error_code(error.code.code())
                .with_error_message(Some(StrBytes::from_string(error.message)))
                .with_entries(None)
        }
    };
    ApiResponse::new(ResponseKind::DescribeClientQuotas(response), errors)
}

pub(super) async fn alter_client_quotas(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: AlterClientQuotasRequest,
) -> ApiResponse {
    let entities: Vec<Vec<AlterEntity>> = request
        .entries
        .iter()
        .map(|entry| {
            entry
                .entity
                .iter()
                .map(|p| {
                    AlterEntity::default()
                        .with_entity_type(p.entity_type.clone())
                        .with_entity_name(p.entity_name.clone())
                })
                .collect()
        })
        .collect();
    // Kafka: ALTER_CONFIGS on the cluster, else every entry is refused.
    if !crate::authorizer::Access::new(ctx, info)
        .allows_cluster(gregor_publishers::acl::AclOperation::AlterConfigs)
    {
        let code = ResponseError::ClusterAuthorizationFailed.code();
        let response = AlterClientQuotasResponse::default().with_entries(
            entities
                .into_iter()
                .map(|entity| {
                    AlterEntry::default()
                        .with_error_code(code)
                        .with_error_message(Some(StrBytes::from_static_str(
                            "Cluster authorization failed.",
                        )))
                        .with_entity(entity)
                })
                .collect(),
        );
        let mut errors = ErrorCounts::default();
        errors.add_all(response.entries.iter().map(|e| e.error_code));
        return ApiResponse::new(ResponseKind::AlterClientQuotas(response), errors);
    }
    let response = match ctx
        .ask_controller(
            info.controller_failure.as_ref(),
            AlterClientQuotas {
                request,
                version: info.api_version,
                principal: (*info.principal).clone(),
                client_id: info.client_id.to_string(),
            },
        )
        .await
    {
        Ok(response) => response,
        Err(error) => {
            tracing::error!(%error, "controller actor unavailable");
            let message =
                format!("The controller is not available ({error}); retry against another node");
            AlterClientQuotasResponse::default().with_entries(
                entities
                    .into_iter()
                    .map(|entity| {
                        AlterEntry::default()
                            .with_error_code(ResponseError::NotController.code())
                            .with_error_message(Some(StrBytes::from_string(message.clone())))
                            .with_entity(entity)
                    })
                    .collect(),
            )
        }
    };
    let mut errors = ErrorCounts::default();
    errors.add_all(response.entries.iter().map(|e| e.error_code));
    ApiResponse::new(ResponseKind::AlterClientQuotas(response), errors)
}

/// AlterClientQuotas for a request whose entries stay in its frame: the answer's body lists no
/// entries, and the returned answers give each distinct entity's, in order of first
/// appearance (or every entry's, when the request is refused whole), for the caller to write
/// as it sends the answer. Decided as [`alter_client_quotas`] decides a decoded request.
pub async fn alter_listed_client_quotas(
    ctx: &HandlerContext,
    info: &RequestInfo,
    entries: Arc<dyn ListedElements<RequestEntry>>,
    validate_only: bool,
) -> (ApiResponse, ListedQuotaAlteration) {
    let listed = entries.listed();
    let answers = if !crate::authorizer::Access::new(ctx, info)
        .allows_cluster(gregor_publishers::acl::AclOperation::AlterConfigs)
    {
        ListedQuotaAlteration::refused(
            ResponseError::ClusterAuthorizationFailed.code(),
            "Cluster authorization failed.",
        )
    } else {
        match ctx
            .ask_controller(
                info.controller_failure.as_ref(),
                AlterListedClientQuotas {
                    entries: Arc::clone(&entries),
                    validate_only,
                },
            )
            .await
        {
            Ok(answers) => answers,
            Err(error) => {
                tracing::error!(%error, "controller actor unavailable");
                ListedQuotaAlteration::refused(
                    ResponseError::NotController.code(),
                    &format!(
                        "The controller is not available ({error}); retry against another node"
                    ),
                )
            }
        }
    };
    let errors = ErrorCounts::of_listed(&answers, listed, 0, |outcome| outcome.code());
    let response = AlterClientQuotasResponse::default();
    let answer = ApiResponse::new(ResponseKind::AlterClientQuotas(response), errors);
    (answer, answers)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use gregor_publishers::records::{ClientQuotaRecord, MetadataRecord};
    use gregor_publishers::{MetadataDelta, MetadataImage, Provenance};
    use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
    use std::sync::Arc;

    fn image() -> MetadataImage {
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        let entities: &[&[(&str, Option<&str>)]] = &[
            &[("user", Some("alice"))],
            &[("user", None)],
            &[("user", Some("alice")), ("client-id", Some("app"))],
            &[("client-id", None)],
            &[("ip", Some("1.2.3.4"))],
        ];
        for (i, entity) in entities.iter().enumerate() {
            delta
                .replay(&MetadataRecord::ClientQuota(ClientQuotaRecord {
                    entity: entity
                        .iter()
                        .map(|(t, n)| EntityData {
                            entity_type: (*t).to_owned(),
                            entity_name: n.map(str::to_owned),
                        })
                        .collect(),
                    key: "request_percentage".to_owned(),
                    value: i as f64 + 1.0,
                    remove: false,
                }))
                .unwrap();
        }
        delta.apply(Provenance::default())
    }

    fn component(t: &str, match_type: i8, m: Option<&str>) -> ComponentData {
        ComponentData::default()
            .with_entity_type(StrBytes::from_string(t.to_owned()))
            .with_match_type(match_type)
            .with_match(m.map(|m| StrBytes::from_string(m.to_owned())))
    }

    fn run(components: Vec<ComponentData>, strict: bool) -> Result<Vec<f64>, FilterError> {
        let request = DescribeClientQuotasRequest::default()
            .with_components(components)
            .with_strict(strict);
        describe(&image().client_quotas, &request)
            .map(|entries| entries.iter().map(|e| e.values[0].value).collect())
    }

    #[test]
    fn filters_match_like_kafka() {
        assert_eq!(run(vec![], false).unwrap().len(), 5);
        assert_eq!(run(vec![], true).unwrap(), Vec::<f64>::new());
        let alice = || component("user", MATCH_TYPE_EXACT, Some("alice"));
        let mut got = run(vec![alice()], false).unwrap();
        got.sort_by(f64::total_cmp);
        assert_eq!(got, vec![1.0, 3.0]);
        assert_eq!(run(vec![alice()], true).unwrap(), vec![1.0]);
        assert_eq!(
            run(vec![component("user", MATCH_TYPE_DEFAULT, None)], false).unwrap(),
            vec![2.0]
        );
        let mut got = run(vec![component("user", MATCH_TYPE_SPECIFIED, None)], true).unwrap();
        got.sort_by(f64::total_cmp);
        assert_eq!(got, vec![1.0, 2.0]);
        assert_eq!(
            run(
                vec![alice(), component("client-id", MATCH_TYPE_SPECIFIED, None)],
                true
            )
            .unwrap(),
            vec![3.0]
        );
        assert_eq!(
            run(vec![component("ip", MATCH_TYPE_SPECIFIED, None)], false).unwrap(),
            vec![5.0]
        );
    }

    #[test]
    fn filter_errors_are_kafkas() {
        let err = |components, code: ResponseError, message: &str| {
            assert_eq!(
                run(components, false),
                Err(FilterError {
                    code,
                    message: message.to_owned()
                })
            );
        };
        use ResponseError::{InvalidRequest, UnsupportedVersion};
        err(
            vec![component("", 0, Some("x"))],
            InvalidRequest,
            "Invalid empty entity type.",
        );
        err(
            vec![component("user", 2, None), component("user", 1, None)],
            InvalidRequest,
            "Entity type user cannot appear more than once in the filter.",
        );
        err(
            vec![component("group", 2, None)],
            UnsupportedVersion,
            "Unsupported entity type group",
        );
        err(
            vec![component("user", 0, None)],
            InvalidRequest,
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        );
        err(
            vec![component("user", 1, Some("a"))],
            InvalidRequest,
            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
        );
        err(
            vec![component("user", 2, Some("a"))],
            InvalidRequest,
            "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
        );
        err(
            vec![component("user", 7, None)],
            InvalidRequest,
            "Unknown match type 7",
        );
        err(
            vec![component("ip", 2, None), component("client-id", 2, None)],
            InvalidRequest,
            "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.",
        );
    }
}
