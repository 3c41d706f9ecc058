//! DescribeAcls (29), served from the image, and CreateAcls (30) / DeleteAcls (31), decided by
//! the controller (a broker forwards them), as Kafka's `AclApis`: without an authorizer each
//! answers SECURITY_DISABLED; Describe needs DESCRIBE on the cluster, Create and Delete ALTER.

use std::sync::Arc;

use gregor_publishers::acl::{AclFilter, AclOperation};
use gregor_publishers::image::AclsImage;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;

use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::logic::acls::{FilterOutcome, ListedAclCreation, ListedAclDeletion};
use crate::controller::logic::{ListedAnswers, ListedElements};
use crate::controller::{
    refused_create_acls, refused_delete_acls, Controller, CreateAcls, CreateListedAcls, DeleteAcls,
    DeleteListedAcls, Refusable,
};

const SECURITY_DISABLED: &str = "No Authorizer is configured.";
const CLUSTER_DENIED: &str = "Cluster authorization failed.";

/// The ACLs of `acls` that `filter` selects, grouped by resource pattern (in type, name,
/// pattern order).
pub(super) fn describe_acls(acls: &AclsImage, filter: &AclFilter) -> Vec<DescribeAclsResource> {
    let mut selected: Vec<_> = acls
        .iter()
        .map(|(_, acl)| acl)
        .filter(|acl| filter.matches(acl))
        .collect();
    selected.sort_by(|a, b| {
        (a.resource_type, &a.resource_name, a.pattern_type).cmp(&(
            b.resource_type,
            &b.resource_name,
            b.pattern_type,
        ))
    });
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    for acl in selected {
        let description = AclDescription::default()
            .with_principal(StrBytes::from_string(acl.principal.clone()))
            .with_host(StrBytes::from_string(acl.host.clone()))
            .with_operation(acl.operation.code())
            .with_permission_type(acl.permission.code());
        match resources.last_mut() {
            Some(last)
                if last.resource_type == acl.resource_type.code()
                    && last.resource_name.as_str() == acl.resource_name
                    && last.pattern_type == acl.pattern_type.code() =>
            {
                last.acls.push(description)
            }
            _ => resources.push(
                DescribeAclsResource::default()
                    .with_resource_type(acl.resource_type.code())
                    .with_resource_name(StrBytes::from_string(acl.resource_name.clone()))
                    .with_pattern_type(acl.pattern_type.code())
                    .with_acls(vec![description]),
            ),
        }
    }
    resources
}

fn describe_error(code: ResponseError, message: &'static str) -> DescribeAclsResponse {
    DescribeAclsResponse::default()
        .with_error_code(code.code())
        .with_error_message(Some(StrBytes::from_static_str(message)))
}

pub(super) fn describe(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: &DescribeAclsRequest,
) -> ApiResponse {
    let access = Access::new(ctx, info);
    let response = if ctx.authorizer.is_none() {
        describe_error(ResponseError::SecurityDisabled, SECURITY_DISABLED)
    } else if !access.allows_cluster(AclOperation::Describe) {
        describe_error(ResponseError::ClusterAuthorizationFailed, CLUSTER_DENIED)
    } else {
        match AclFilter::from_codes(
            request.resource_type_filter,
            request.resource_name_filter.as_deref(),
            request.pattern_type_filter,
            request.principal_filter.as_deref(),
            request.host_filter.as_deref(),
            request.operation,
            request.permission_type,
        ) {
            None => describe_error(
                ResponseError::InvalidRequest,
                "The filter contains UNKNOWN elements.",
            ),
            Some(filter) => DescribeAclsResponse::default()
                .with_error_message(None)
                .with_resources(describe_acls(&ctx.image.load().acls, &filter)),
        }
    };
    let mut errors = ErrorCounts::default();
    errors.add(response.error_code);
    ApiResponse::new(ResponseKind::DescribeAcls(response), errors)
}

/// Why CreateAcls/DeleteAcls cannot reach the controller here, if they cannot.
fn refusal(ctx: &HandlerContext, info: &RequestInfo) -> Option<(ResponseError, &'static str)> {
    if ctx.authorizer.is_none() {
        return Some((ResponseError::SecurityDisabled, SECURITY_DISABLED));
    }
    if !Access::new(ctx, info).allows_cluster(AclOperation::Alter) {
        return Some((ResponseError::ClusterAuthorizationFailed, CLUSTER_DENIED));
    }
    if ctx.answers_not_controller(info) {
        // Only the active controller decides (a broker forwards; this is what is left when
        // no active controller could be reached).
        return Some((
            ResponseError::NotController,
            "This node is not the active controller",
        ));
    }
    None
}

const CONTROLLER_UNAVAILABLE: &str = "The controller is not available; retry against another node";

pub(super) async fn create(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: CreateAclsRequest,
) -> ApiResponse {
    let response = match refusal(ctx, info) {
        Some((code, message)) => refused_create_acls(&request, code, message),
        None => {
            let request = Arc::new(request);
            let sent = CreateAcls {
                request: Arc::clone(&request),
            };
            match ctx
                .ask_controller(info.controller_failure.as_ref(), sent)
                .await
            {
                Ok(response) => response,
                Err(error) => {
                    tracing::error!(%error, "controller actor unavailable");
                    refused_create_acls(
                        &request,
                        ResponseError::NotController,
                        CONTROLLER_UNAVAILABLE,
                    )
                }
            }
        }
    };
    let mut errors = ErrorCounts::default();
    errors.add_all(response.results.iter().map(|r| r.error_code));
    ApiResponse::new(ResponseKind::CreateAcls(response), errors)
}

/// The answers to a request whose elements stay in its frame (`count` of them, each answered):
/// every element refused alike when the request may not be decided here, else the
/// controller's to `msg`.
async fn listed_answers<M, O>(ctx: &HandlerContext, info: &RequestInfo, msg: M) -> ListedAnswers<O>
where
    M: Refusable<Result = ListedAnswers<O>>,
    O: Send,
    Controller: actix::Handler<M>,
{
    match refusal(ctx, info) {
        Some((code, message)) => ListedAnswers::refused(code.code(), message),
        None => match ctx
            .ask_controller(info.controller_failure.as_ref(), msg)
            .await
        {
            Ok(answers) => answers,
            Err(error) => {
                tracing::error!(%error, "controller actor unavailable");
                ListedAnswers::refused(ResponseError::NotController.code(), CONTROLLER_UNAVAILABLE)
            }
        },
    }
}

/// CreateAcls for a request whose creations stay in its frame: the answer's body lists no
/// results, and the returned answers give each creation's, in request order, for the caller to
/// write as it sends the answer. Decided as [`create`] decides a decoded request.
pub async fn create_listed(
    ctx: &HandlerContext,
    info: &RequestInfo,
    creations: Arc<dyn ListedElements<AclCreation>>,
) -> (ApiResponse, ListedAclCreation) {
    let count = creations.listed();
    let answers = listed_answers(ctx, info, CreateListedAcls { creations }).await;
    let errors = ErrorCounts::of_listed(&answers, count, 0, |outcome| outcome.code);
    let answer = ApiResponse::new(
        ResponseKind::CreateAcls(CreateAclsResponse::default()),
        errors,
    );
    (answer, answers)
}

/// DeleteAcls for a request whose filters stay in its frame, as [`create_listed`] for
/// CreateAcls. Decided as [`delete`] decides a decoded request.
pub async fn delete_listed(
    ctx: &HandlerContext,
    info: &RequestInfo,
    filters: Arc<dyn ListedElements<DeleteAclsFilter>>,
) -> (ApiResponse, ListedAclDeletion) {
    let count = filters.listed();
    let answers = listed_answers(ctx, info, DeleteListedAcls { filters }).await;
    let errors = ErrorCounts::of_listed(&answers, count, 0, |outcome| match outcome {
        FilterOutcome::Failed(error) => error.code,
        FilterOutcome::Matched(_) => 0,
    });
    let answer = ApiResponse::new(
        ResponseKind::DeleteAcls(DeleteAclsResponse::default()),
        errors,
    );
    (answer, answers)
}

pub(super) async fn delete(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: DeleteAclsRequest,
) -> ApiResponse {
    let response: DeleteAclsResponse = match refusal(ctx, info) {
        Some((code, message)) => refused_delete_acls(&request, code, message),
        None => {
            let request = Arc::new(request);
            let sent = DeleteAcls {
                request: Arc::clone(&request),
            };
            match ctx
                .ask_controller(info.controller_failure.as_ref(), sent)
                .await
            {
                Ok(response) => response,
                Err(error) => {
                    tracing::error!(%error, "controller actor unavailable");
                    refused_delete_acls(
                        &request,
                        ResponseError::NotController,
                        CONTROLLER_UNAVAILABLE,
                    )
                }
            }
        }
    };
    let mut errors = ErrorCounts::default();
    errors.add_all(response.filter_results.iter().map(|r| r.error_code));
    ApiResponse::new(ResponseKind::DeleteAcls(response), errors)
}
