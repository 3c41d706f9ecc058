//! AlterPartitionReassignments (45) and ListPartitionReassignments (46) on the controller,
//! decided by `logic::reassignment` on the working image (a list is answered once a quorum
//! confirms this node still leads, like every answer that writes nothing).

use actix::prelude::*;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::actor::{Controller, Refusable};
use super::logic::reassignment::{
    alter_listed_reassignments, alter_partition_reassignments, list_partition_reassignments,
    ListedReassignments, RequestedReassignments,
};
use super::logic::ControllerResult;

/// AlterPartitionReassignments as a client sent it, at `version`.
#[derive(Message)]
#[rtype(result = "AlterPartitionReassignmentsResponse")]
pub struct AlterPartitionReassignments {
    /// The request as the client sent it, shared with the handler, which answers from it
    /// should the controller be gone.
    pub request: std::sync::Arc<AlterPartitionReassignmentsRequest>,
    pub version: i16,
}

/// AlterPartitionReassignments naming its partitions where they are kept (its frame): read one
/// at a time, answered with an outcome per partition (issue #11).
#[derive(Message)]
#[rtype(result = "ListedReassignments")]
pub struct AlterListedReassignments {
    pub partitions: std::sync::Arc<dyn RequestedReassignments>,
    pub allow_replication_factor_change: bool,
    pub version: i16,
}

impl Refusable for AlterListedReassignments {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        ListedReassignments::refused(code.code(), message)
    }
}

impl Handler<AlterListedReassignments> for Controller {
    type Result = ResponseFuture<ListedReassignments>;

    fn handle(&mut self, msg: AlterListedReassignments, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        let policy = self.leadership().unclean;
        self.mutate(
            ctx,
            &msg,
            |image, _| {
                alter_listed_reassignments(
                    image,
                    msg.partitions.as_ref(),
                    msg.allow_replication_factor_change,
                    msg.version,
                    &policy,
                )
            },
            |_, code, message| ListedReassignments::refused(code.code(), message),
        )
    }
}

/// ListPartitionReassignments as a client sent it.
#[derive(Message)]
#[rtype(result = "ListPartitionReassignmentsResponse")]
pub struct ListPartitionReassignments {
    pub request: ListPartitionReassignmentsRequest,
}

/// An AlterPartitionReassignments response failing the request and every partition with
/// `code` (Kafka's `getErrorResponse`).
pub fn failed_alter_partition_reassignments(
    request: &AlterPartitionReassignmentsRequest,
    code: ResponseError,
    message: &str,
) -> AlterPartitionReassignmentsResponse {
    let text = || Some(StrBytes::from_string(message.to_owned()));
    AlterPartitionReassignmentsResponse::default()
        .with_error_code(code.code())
        .with_error_message(text())
        .with_responses(
            request
                .topics
                .iter()
                .map(|topic| {
                    ReassignableTopicResponse::default()
                        .with_name(topic.name.clone())
                        .with_partitions(
                            topic
                                .partitions
                                .iter()
                                .map(|p| {
                                    ReassignablePartitionResponse::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(code.code())
                                        .with_error_message(text())
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
}

/// A ListPartitionReassignments response failing with `code`.
pub fn failed_list_partition_reassignments(
    code: ResponseError,
    message: &str,
) -> ListPartitionReassignmentsResponse {
    ListPartitionReassignmentsResponse::default()
        .with_error_code(code.code())
        .with_error_message(Some(StrBytes::from_string(message.to_owned())))
}

impl Refusable for AlterPartitionReassignments {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        failed_alter_partition_reassignments(&self.request, code, message)
    }
}

impl Refusable for ListPartitionReassignments {
    fn refuse(&self, code: ResponseError, message: &str) -> Self::Result {
        failed_list_partition_reassignments(code, message)
    }
}

impl Handler<AlterPartitionReassignments> for Controller {
    type Result = ResponseFuture<AlterPartitionReassignmentsResponse>;

    fn handle(
        &mut self,
        msg: AlterPartitionReassignments,
        ctx: &mut Self::Context,
    ) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        let policy = self.leadership().unclean;
        let request = msg.request.clone();
        self.mutate(
            ctx,
            &msg,
            |image, _| alter_partition_reassignments(image, &msg.request, msg.version, &policy),
            move |_, code, message| failed_alter_partition_reassignments(&request, code, message),
        )
    }
}

impl Handler<ListPartitionReassignments> for Controller {
    type Result = ResponseFuture<ListPartitionReassignmentsResponse>;

    fn handle(&mut self, msg: ListPartitionReassignments, ctx: &mut Self::Context) -> Self::Result {
        let msg = match self.admit(msg, ctx) {
            Ok(msg) => msg,
            Err(answer) => return answer,
        };
        self.mutate(
            ctx,
            &msg,
            |image, _| ControllerResult {
                records: Vec::new(),
                response: list_partition_reassignments(image, &msg.request),
            },
            |_, code, message| failed_list_partition_reassignments(code, message),
        )
    }
}
