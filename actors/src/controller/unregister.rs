//! UnregisterBroker on the controller: decided by [`fencing::unregister_broker`] against the
//! working image, written as PartitionChange records and an UnregisterBrokerRecord, answered
//! once committed.

use actix::prelude::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::UnregisterBrokerResponse;

use super::actor::{Controller, Refusable};
use super::logic::ControllerResult;
use crate::fencing;

/// Unregister one broker (Kafka's `ReplicationControlManager.unregisterBroker`).
#[derive(Message)]
#[rtype(result = "UnregisterBrokerResponse")]
pub struct UnregisterBroker {
    /// The broker id to unregister.
    pub broker_id: i32,
}

impl Handler<UnregisterBroker> for Controller {
    type Result = ResponseFuture<UnregisterBrokerResponse>;

    fn handle(&mut self, msg: UnregisterBroker, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        self.mutate(
            ctx,
            &msg,
            |image, _| match fencing::unregister_broker(image, msg.broker_id) {
                Some(records) => ControllerResult {
                    records,
                    response: UnregisterBrokerResponse::default(),
                },
                // Kafka's controller answers the code only (its message is "Broker ID N is not
                // currently registered", which ControllerApis does not send).
                None => ControllerResult {
                    records: Vec::new(),
                    response: UnregisterBrokerResponse::default()
                        .with_error_code(ResponseError::BrokerIdNotRegistered.code()),
                },
            },
            |response: UnregisterBrokerResponse, code, _| response.with_error_code(code.code()),
        )
    }
}

impl Refusable for UnregisterBroker {
    fn refuse(&self, code: ResponseError, _message: &str) -> Self::Result {
        UnregisterBrokerResponse::default().with_error_code(code.code())
    }
}
