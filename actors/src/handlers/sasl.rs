//! SaslHandshake (17) and SaslAuthenticate (36) that reach the handlers: on a PLAINTEXT
//! listener, or on a SASL connection that has already authenticated (the front end runs the
//! exchange itself before that). Kafka's KafkaApis answers both with ILLEGAL_SASL_STATE.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::{ResponseKind, SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;

use super::{ApiResponse, ErrorCounts};

pub(super) fn handshake() -> ApiResponse {
    let code = ResponseError::IllegalSaslState.code();
    let mut errors = ErrorCounts::default();
    errors.add(code);
    ApiResponse::new(
        ResponseKind::SaslHandshake(SaslHandshakeResponse::default().with_error_code(code)),
        errors,
    )
}

pub(super) fn authenticate() -> ApiResponse {
    let code = ResponseError::IllegalSaslState.code();
    let mut errors = ErrorCounts::default();
    errors.add(code);
    ApiResponse::new(
        ResponseKind::SaslAuthenticate(
            SaslAuthenticateResponse::default()
                .with_error_code(code)
                .with_error_message(Some(StrBytes::from_static_str(
                    "SaslAuthenticate request received after successful authentication",
                ))),
        ),
        errors,
    )
}
