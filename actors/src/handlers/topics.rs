//! CreateTopics (19), DeleteTopics (20), CreatePartitions (37): handed to the controller actor,
//! which validates against its working image, commits the records and answers.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, ResponseKind,
};

use super::{ApiResponse, ErrorCounts};
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::{self, CreatePartitions, CreateTopics, DeleteTopics};

/// Why the controller could not be asked: its mailbox is gone, so the node is shutting down.
fn unavailable(error: &actix::MailboxError) -> (ResponseError, String) {
    tracing::error!(%error, "controller actor unavailable");
    (
        ResponseError::NotController,
        format!("The controller is not available ({error}); retry against another node"),
    )
}

pub(super) async fn create_topics(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: CreateTopicsRequest,
) -> ApiResponse {
    let names: Vec<_> = request.topics.iter().map(|t| t.name.clone()).collect();
    let response = match ctx
        .controller
        .send(CreateTopics {
            request,
            version: info.api_version,
            principal: info.principal.clone(),
            client_id: info.client_id.clone(),
        })
        .await
    {
        Ok(response) => response,
        Err(error) => {
            let (code, message) = unavailable(&error);
            controller::failed_create_topics(names, code, &message)
        }
    };
    let mut errors = ErrorCounts::default();
    errors.add_all(response.topics.iter().map(|t| t.error_code));
    ApiResponse {
        throttle_time_ms: response.throttle_time_ms,
        body: ResponseKind::CreateTopics(response),
        errors,
        delivery: super::Delivery::Send,
    }
}

pub(super) async fn delete_topics(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: DeleteTopicsRequest,
) -> ApiResponse {
    let fallback = controller::failed_delete_topics_for(&request, info.api_version);
    let response = match ctx
        .controller
        .send(DeleteTopics {
            request,
            version: info.api_version,
            principal: info.principal.clone(),
            client_id: info.client_id.clone(),
        })
        .await
    {
        Ok(response) => response,
        Err(error) => {
            let (code, message) = unavailable(&error);
            fallback(code, &message)
        }
    };
    let mut errors = ErrorCounts::default();
    errors.add_all(response.responses.iter().map(|t| t.error_code));
    ApiResponse {
        throttle_time_ms: response.throttle_time_ms,
        body: ResponseKind::DeleteTopics(response),
        errors,
        delivery: super::Delivery::Send,
    }
}

pub(super) async fn create_partitions(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: CreatePartitionsRequest,
) -> ApiResponse {
    let names: Vec<_> = request.topics.iter().map(|t| t.name.clone()).collect();
    let response = match ctx
        .controller
        .send(CreatePartitions {
            request,
            version: info.api_version,
            principal: info.principal.clone(),
            client_id: info.client_id.clone(),
        })
        .await
    {
        Ok(response) => response,
        Err(error) => {
            let (code, message) = unavailable(&error);
            controller::failed_create_partitions(names, code, &message)
        }
    };
    let mut errors = ErrorCounts::default();
    errors.add_all(response.results.iter().map(|t| t.error_code));
    ApiResponse {
        throttle_time_ms: response.throttle_time_ms,
        body: ResponseKind::CreatePartitions(response),
        errors,
        delivery: super::Delivery::Send,
    }
}
