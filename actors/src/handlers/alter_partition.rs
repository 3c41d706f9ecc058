//! AlterPartition (key 56, controller listener): a partition leader's ISR change, decided by
//! the controller actor.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{AlterPartitionRequest, ResponseKind};

use super::{ApiResponse, ErrorCounts};
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::{failed_alter_partition, AlterPartition};

pub(super) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: AlterPartitionRequest,
) -> ApiResponse {
    let response = ctx
        .controller
        .send(AlterPartition {
            request,
            version: info.api_version,
        })
        .await
        .unwrap_or_else(|_| failed_alter_partition(ResponseError::NotController));
    let mut errors = ErrorCounts::default();
    errors.add(response.error_code);
    for partition in response.topics.iter().flat_map(|t| &t.partitions) {
        errors.add(partition.error_code);
    }
    ApiResponse::new(ResponseKind::AlterPartition(response), errors)
}
