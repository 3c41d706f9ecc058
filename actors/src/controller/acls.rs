//! CreateAcls and DeleteAcls on the controller: decided by [`logic::acls`] against the working
//! image, written as ACL records, answered once committed.

use actix::prelude::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::actor::{Controller, Refusable};
use super::logic;

/// Create ACLs. One result per creation, in request order.
#[derive(Message)]
#[rtype(result = "CreateAclsResponse")]
pub struct CreateAcls {
    /// The request as the client sent it, shared with the handler, which answers from it
    /// should the controller be gone.
    pub request: std::sync::Arc<CreateAclsRequest>,
}

/// Create the ACLs of a request too large to decode whole, read from where they are kept and
/// answered compactly (issue #11). One answer per creation, in request order.
#[derive(Message)]
#[rtype(result = "logic::acls::ListedAclCreation")]
pub struct CreateListedAcls {
    /// The request's creations.
    pub creations: std::sync::Arc<
        dyn logic::ListedElements<kafka_protocol::messages::create_acls_request::AclCreation>,
    >,
}

/// Delete the ACLs selected by the filters of a request too large to decode whole, read from
/// where they are kept and answered compactly (issue #11). One answer per filter.
#[derive(Message)]
#[rtype(result = "logic::acls::ListedAclDeletion")]
pub struct DeleteListedAcls {
    /// The request's filters.
    pub filters: std::sync::Arc<
        dyn logic::ListedElements<kafka_protocol::messages::delete_acls_request::DeleteAclsFilter>,
    >,
}

/// Delete the ACLs selected by filters. One result per filter, in request order.
#[derive(Message)]
#[rtype(result = "DeleteAclsResponse")]
pub struct DeleteAcls {
    /// The request as the client sent it, shared with the handler, which answers from it
    /// should the controller be gone.
    pub request: std::sync::Arc<DeleteAclsRequest>,
}

impl Handler<CreateAcls> for Controller {
    type Result = ResponseFuture<CreateAclsResponse>;

    fn handle(&mut self, msg: CreateAcls, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        self.mutate(
            ctx,
            &msg,
            |image, mutation| logic::acls::create_acls(&image.acls, &msg.request, mutation.rng),
            |mut response: CreateAclsResponse, code, message| {
                for result in &mut response.results {
                    if result.error_code == 0 {
                        result.error_code = code.code();
                        result.error_message = Some(StrBytes::from_string(message.to_owned()));
                    }
                }
                response
            },
        )
    }
}

impl Handler<CreateListedAcls> for Controller {
    type Result = ResponseFuture<logic::acls::ListedAclCreation>;

    fn handle(&mut self, msg: CreateListedAcls, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        self.mutate(
            ctx,
            &msg,
            |image, mutation| {
                logic::acls::create_listed_acls(&image.acls, msg.creations.as_ref(), mutation.rng)
            },
            logic::acls::ListedAclCreation::fail_succeeded,
        )
    }
}

impl Refusable for CreateListedAcls {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        logic::acls::ListedAclCreation::refused(code.code(), message)
    }
}

impl Handler<DeleteListedAcls> for Controller {
    type Result = ResponseFuture<logic::acls::ListedAclDeletion>;

    fn handle(&mut self, msg: DeleteListedAcls, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        self.mutate(
            ctx,
            &msg,
            |image, _| logic::acls::delete_listed_acls(&image.acls, msg.filters.as_ref()),
            logic::acls::ListedAclDeletion::fail_succeeded,
        )
    }
}

impl Refusable for DeleteListedAcls {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        logic::acls::ListedAclDeletion::refused(code.code(), message)
    }
}

impl Handler<DeleteAcls> for Controller {
    type Result = ResponseFuture<DeleteAclsResponse>;

    fn handle(&mut self, msg: DeleteAcls, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        self.mutate(
            ctx,
            &msg,
            |image, _| logic::acls::delete_acls(&image.acls, &msg.request),
            |mut response: DeleteAclsResponse, code, message| {
                for result in &mut response.filter_results {
                    if result.error_code == 0 {
                        result.error_code = code.code();
                        result.error_message = Some(StrBytes::from_string(message.to_owned()));
                        result.matching_acls.clear();
                    }
                }
                response
            },
        )
    }
}

impl Refusable for CreateAcls {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        refused_create(&self.request, code, message)
    }
}

impl Refusable for DeleteAcls {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        refused_delete(&self.request, code, message)
    }
}

/// The answer to a CreateAcls that cannot be decided: every creation gets `code`.
pub fn refused_create(
    request: &CreateAclsRequest,
    code: ResponseError,
    message: &str,
) -> CreateAclsResponse {
    CreateAclsResponse::default().with_results(
        request
            .creations
            .iter()
            .map(|_| {
                AclCreationResult::default()
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(message.to_owned())))
            })
            .collect(),
    )
}

/// The answer to a DeleteAcls that cannot be decided: every filter gets `code`.
pub fn refused_delete(
    request: &DeleteAclsRequest,
    code: ResponseError,
    message: &str,
) -> DeleteAclsResponse {
    DeleteAclsResponse::default().with_filter_results(
        request
            .filters
            .iter()
            .map(|_| {
                DeleteAclsFilterResult::default()
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(message.to_owned())))
            })
            .collect(),
    )
}
