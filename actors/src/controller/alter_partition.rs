//! AlterPartition (key 56) on the controller: a leader's ISR change, decided by
//! `logic::alter_partition` on the working image and answered once committed.

use actix::prelude::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse};

use super::actor::{Controller, Refusable};
use super::logic::alter_partition::alter_partition;

/// A leader's AlterPartition request at `version`.
#[derive(Message)]
#[rtype(result = "AlterPartitionResponse")]
pub struct AlterPartition {
    pub request: AlterPartitionRequest,
    pub version: i16,
}

/// The whole request failed with `code` (NOT_CONTROLLER makes the leader find the active one).
pub fn failed_alter_partition(code: ResponseError) -> AlterPartitionResponse {
    AlterPartitionResponse::default().with_error_code(code.code())
}

impl Refusable for AlterPartition {
    fn refuse(&self, code: ResponseError, _message: &str) -> Self::Result {
        failed_alter_partition(code)
    }
}

impl Handler<AlterPartition> for Controller {
    type Result = ResponseFuture<AlterPartitionResponse>;

    fn handle(&mut self, msg: AlterPartition, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        self.mutate(
            ctx,
            &msg,
            |image, _| alter_partition(image, &msg.request, msg.version),
            |_, code, _| failed_alter_partition(code),
        )
    }
}
