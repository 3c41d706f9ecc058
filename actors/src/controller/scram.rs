//! AlterUserScramCredentials on the controller: decided by [`logic::scram`] against the working
//! image, written as SCRAM credential records, answered once committed.

use std::collections::HashSet;
use std::sync::Arc;

use actix::prelude::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::actor::{Controller, Refusable};
use super::logic;

/// Alter SCRAM credentials. Answers one result per distinct user.
#[derive(Message)]
#[rtype(result = "AlterUserScramCredentialsResponse")]
pub struct AlterUserScramCredentials {
    /// The request as the client sent it, shared with the handler, which answers from it
    /// should the controller be gone.
    pub request: Arc<AlterUserScramCredentialsRequest>,
}

impl Handler<AlterUserScramCredentials> for Controller {
    type Result = ResponseFuture<AlterUserScramCredentialsResponse>;

    fn handle(&mut self, msg: AlterUserScramCredentials, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        self.mutate(
            ctx,
            &msg,
            |image, _| logic::scram::alter_user_scram_credentials(&image.scram, &msg.request),
            |mut response: AlterUserScramCredentialsResponse, code, message| {
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

/// Alter the SCRAM credentials of a request too large to decode whole, read from where they
/// are kept and answered compactly (issue #11).
#[derive(Message)]
#[rtype(result = "logic::scram::ListedScramAlteration")]
pub struct AlterListedScramCredentials {
    /// The request's deletions, then its upsertions.
    pub alterations: Arc<dyn logic::ListedElements<logic::scram::ScramAlteration>>,
}

impl Handler<AlterListedScramCredentials> for Controller {
    type Result = ResponseFuture<logic::scram::ListedScramAlteration>;

    fn handle(
        &mut self,
        msg: AlterListedScramCredentials,
        ctx: &mut Self::Context,
    ) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        self.mutate(
            ctx,
            &msg,
            |image, _| {
                logic::scram::alter_listed_credentials(&image.scram, msg.alterations.as_ref())
            },
            logic::scram::ListedScramAlteration::fail_succeeded,
        )
    }
}

impl Refusable for AlterListedScramCredentials {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        logic::scram::ListedScramAlteration::refused(code.code(), message)
    }
}

impl Refusable for AlterUserScramCredentials {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        refused(&self.request, code, message)
    }
}

/// The answer to `request` when it cannot be decided: every distinct user gets `code`.
pub fn refused(
    request: &AlterUserScramCredentialsRequest,
    code: ResponseError,
    message: &str,
) -> AlterUserScramCredentialsResponse {
    let names = request
        .deletions
        .iter()
        .map(|d| &d.name)
        .chain(request.upsertions.iter().map(|u| &u.name));
    let mut seen = HashSet::new();
    let users: Vec<&StrBytes> = names.filter(|name| seen.insert(*name)).collect();
    AlterUserScramCredentialsResponse::default().with_results(
        users
            .into_iter()
            .map(|user| {
                AlterUserScramCredentialsResult::default()
                    .with_user(user.clone())
                    .with_error_code(code.code())
                    .with_error_message(Some(StrBytes::from_string(message.to_owned())))
            })
            .collect(),
    )
}
