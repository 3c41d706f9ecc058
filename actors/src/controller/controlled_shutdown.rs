//! BrokerHeartbeat (key 63) with `want_shut_down` on the controller: a broker stopping with
//! SIGTERM asks to move its leaderships away first (Kafka's controlled shutdown), decided by
//! `fencing::controlled_shutdown` on the working image and answered once committed.

use actix::prelude::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::BrokerHeartbeatResponse;

use super::actor::{Controller, Refusable};
use super::logic::ControllerResult;

/// Broker `broker_id` at `broker_epoch` is shutting down.
#[derive(Message)]
#[rtype(result = "BrokerHeartbeatResponse")]
pub struct ControlledShutdown {
    pub broker_id: i32,
    pub broker_epoch: i64,
}

impl Refusable for ControlledShutdown {
    fn refuse(&self, code: ResponseError, _message: &str) -> Self::Result {
        BrokerHeartbeatResponse::default().with_error_code(code.code())
    }
}

impl Handler<ControlledShutdown> for Controller {
    type Result = ResponseFuture<BrokerHeartbeatResponse>;

    fn handle(&mut self, msg: ControlledShutdown, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        self.mutate(
            ctx,
            &msg,
            |image, _| {
                match crate::fencing::controlled_shutdown(image, msg.broker_id, msg.broker_epoch) {
                    // Every leadership moves in this one batch: once it is committed the broker
                    // may stop.
                    Ok(records) => ControllerResult {
                        records,
                        response: BrokerHeartbeatResponse::default()
                            .with_is_caught_up(true)
                            .with_should_shut_down(true),
                    },
                    Err(code) => ControllerResult {
                        records: Vec::new(),
                        response: BrokerHeartbeatResponse::default()
                            .with_error_code(code)
                            .with_is_fenced(true),
                    },
                }
            },
            |_, code, _| BrokerHeartbeatResponse::default().with_error_code(code.code()),
        )
    }
}
