//! UpdateFeatures on the controller: decided by [`logic::features`] against the working image
//! and the quorum's voters, written as one batch, answered once committed.

use actix::prelude::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};

use super::actor::{Controller, Refusable};
use super::logic;
use super::logic::features::{refused_update_features, QuorumView};

/// Update finalized feature levels (Kafka's `QuorumController.updateFeatures`).
#[derive(Message)]
#[rtype(result = "UpdateFeaturesResponse")]
pub struct UpdateFeatures {
    /// The request as the client sent it.
    pub request: UpdateFeaturesRequest,
    /// Its API version (v0 and v1 list the features in a successful answer).
    pub version: i16,
}

impl Handler<UpdateFeatures> for Controller {
    type Result = ResponseFuture<UpdateFeaturesResponse>;

    fn handle(&mut self, msg: UpdateFeatures, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        let (local_id, voters) = self.quorum_ids();
        self.mutate(
            ctx,
            &msg,
            |image, _| {
                let quorum = QuorumView {
                    local_id,
                    voters: &voters,
                };
                logic::features::update_features(image, quorum, &msg.request, msg.version)
            },
            // A write that failed is the whole request's failure, without results.
            |_, code, message| refused_update_features(code, message),
        )
    }
}

impl Refusable for UpdateFeatures {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        refused_update_features(code, message)
    }
}
