//! AlterClientQuotas on the controller: validated by [`logic::client_quotas`] against the
//! working image, written as `ClientQuotaRecord`s, answered once committed.

use std::sync::Arc;

use actix::prelude::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_client_quotas_request::EntryData as RequestEntry;
use kafka_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use kafka_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse};
use kafka_protocol::protocol::StrBytes;

use super::actor::{Controller, Refusable};
use super::logic;
use crate::context::Principal;

/// Alter client quotas. Answers one result per distinct entity.
#[derive(Message)]
#[rtype(result = "AlterClientQuotasResponse")]
pub struct AlterClientQuotas {
    /// The request as the client sent it.
    pub request: AlterClientQuotasRequest,
    /// Its API version.
    pub version: i16,
    /// Who sent it (authorization: ALTER_CONFIGS on CLUSTER, once authorizers exist).
    pub principal: Principal,
    /// Its client id.
    pub client_id: String,
}

impl Handler<AlterClientQuotas> for Controller {
    type Result = ResponseFuture<AlterClientQuotasResponse>;

    fn handle(&mut self, msg: AlterClientQuotas, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        self.mutate(
            ctx,
            &msg,
            |image, _| {
                logic::client_quotas::alter_client_quotas(&image.client_quotas, &msg.request)
            },
            |mut response: AlterClientQuotasResponse, code, message| {
                for entry in &mut response.entries {
                    if entry.error_code == 0 {
                        entry.error_code = code.code();
                        entry.error_message = Some(StrBytes::from_string(message.to_owned()));
                    }
                }
                response
            },
        )
    }
}

impl Refusable for AlterClientQuotas {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        AlterClientQuotasResponse::default().with_entries(
            self.request
                .entries
                .iter()
                .map(|entry| {
                    EntryData::default()
                        .with_error_code(code.code())
                        .with_error_message(Some(StrBytes::from_string(message.to_owned())))
                        .with_entity(
                            entry
                                .entity
                                .iter()
                                .map(|e| {
                                    EntityData::default()
                                        .with_entity_type(e.entity_type.clone())
                                        .with_entity_name(e.entity_name.clone())
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
    }
}

/// Alter client quotas of a request whose entries stay where they are kept (its frame): each
/// distinct entity's first entry is read one at a time, and the answers are kept compactly
/// (issue #11).
#[derive(Message)]
#[rtype(result = "logic::client_quotas::ListedQuotaAlteration")]
pub struct AlterListedClientQuotas {
    /// The request's entries.
    pub entries: Arc<dyn logic::ListedElements<RequestEntry>>,
    /// Decide and answer, write nothing.
    pub validate_only: bool,
}

impl Handler<AlterListedClientQuotas> for Controller {
    type Result = ResponseFuture<logic::client_quotas::ListedQuotaAlteration>;

    fn handle(&mut self, msg: AlterListedClientQuotas, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        self.mutate(
            ctx,
            &msg,
            |image, _| {
                logic::client_quotas::alter_listed_client_quotas(
                    &image.client_quotas,
                    msg.entries.as_ref(),
                    msg.validate_only,
                )
            },
            logic::client_quotas::ListedQuotaAlteration::fail_succeeded,
        )
    }
}

impl Refusable for AlterListedClientQuotas {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        logic::client_quotas::ListedQuotaAlteration::refused(code.code(), message)
    }
}
