//! AllocateProducerIds on the controller (KIP-730): hands a broker the next block of producer
//! ids by writing a `ProducerIdsRecord`, answered once committed, so no id is issued twice,
//! whatever restarts.

use actix::prelude::*;
use gregor_publishers::records::ProducerIdsRecord;
use gregor_publishers::MetadataRecord;
use kafka_protocol::error::ResponseError;

use super::actor::{Controller, Refusable};
use super::logic::ControllerResult;

/// Producer ids per block, as Kafka's `ProducerIdManager`.
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

/// A block of producer ids: `[start, start + len)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProducerIdBlock {
    pub start: i64,
    pub len: i64,
}

/// Allocate the next block of producer ids for a broker. Fails with the Kafka error code.
#[derive(Message)]
#[rtype(result = "Result<ProducerIdBlock, ResponseError>")]
pub struct AllocateProducerIds {
    pub broker_id: i32,
    pub broker_epoch: i64,
}

impl Refusable for AllocateProducerIds {
    fn refuse(&self, code: ResponseError, _message: &str) -> Self::Result {
        Err(code)
    }
}

impl Handler<AllocateProducerIds> for Controller {
    type Result = ResponseFuture<Result<ProducerIdBlock, ResponseError>>;

    fn handle(&mut self, msg: AllocateProducerIds, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        self.mutate(
            ctx,
            &msg,
            |image, _| {
                let start = image.cluster.next_producer_id();
                match start.checked_add(PRODUCER_ID_BLOCK_SIZE) {
                    Some(next) => ControllerResult {
                        records: vec![MetadataRecord::ProducerIds(ProducerIdsRecord {
                            broker_id: msg.broker_id,
                            broker_epoch: msg.broker_epoch,
                            next_producer_id: next,
                        })],
                        response: Ok(ProducerIdBlock {
                            start,
                            len: PRODUCER_ID_BLOCK_SIZE,
                        }),
                    },
                    None => ControllerResult {
                        records: Vec::new(),
                        response: Err(ResponseError::UnknownServerError),
                    },
                }
            },
            |_, code, _| Err(code),
        )
    }
}
