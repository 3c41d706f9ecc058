//! AlterClientQuotas on the controller: validated by [`logic::client_quotas`] against the
//! working image, written as `ClientQuotaRecord`s, answered once committed.

use actix::prelude::*;
use kafka_protocol::error::ResponseError;
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
