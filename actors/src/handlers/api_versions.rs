//! ApiVersions (key 18): the served versions, straight from the routing table.

use std::sync::OnceLock;

use bytes::BytesMut;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::api_versions_response::{
    ApiVersion, FinalizedFeatureKey, SupportedFeatureKey,
};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest, ApiVersionsResponse, ResponseKind};
use kafka_protocol::protocol::{Encodable, Message, StrBytes};

use gregor_publishers::records::{KRAFT_VERSION_FEATURE, METADATA_VERSION_FEATURE};

use super::{ApiResponse, EncodedList, ErrorCounts, APIS};
use crate::context::{HandlerContext, ListenerKind, RequestInfo};
use crate::features::SUPPORTED_FEATURES;

/// Kafka's pattern for client software names and versions (KIP-511).
fn software_field_is_valid(value: &str) -> bool {
    // [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
    let bytes = value.as_bytes();
    let alphanumeric = |b: &u8| b.is_ascii_alphanumeric();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            alphanumeric(first)
                && alphanumeric(last)
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'.')
        }
        _ => false,
    }
}

pub(super) fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: &ApiVersionsRequest,
) -> ApiResponse {
    let mut errors = ErrorCounts::default();
    if info.api_version >= 3
        && !(software_field_is_valid(&request.client_software_name)
            && software_field_is_valid(&request.client_software_version))
    {
        let code = ResponseError::InvalidRequest.code();
        errors.add(code);
        return ApiResponse::new(
            ResponseKind::ApiVersions(ApiVersionsResponse::default().with_error_code(code)),
            errors,
        );
    }
    let image = ctx.image.load();
    // KAFKA-17011: before v4, features whose minimum is 0 are left out.
    let supported_features = SUPPORTED_FEATURES
        .iter()
        .filter(|feature| info.api_version >= 4 || feature.min > 0)
        .map(|feature| {
            SupportedFeatureKey::default()
                .with_name(StrBytes::from_static_str(feature.name))
                .with_min_version(feature.min)
                .with_max_version(feature.max)
        })
        .collect();
    let finalized_features = [METADATA_VERSION_FEATURE, KRAFT_VERSION_FEATURE]
        .into_iter()
        .filter_map(|name| {
            let level = image.features.level(name)?;
            Some(
                FinalizedFeatureKey::default()
                    .with_name(StrBytes::from_static_str(name))
                    .with_min_version_level(level)
                    .with_max_version_level(level),
            )
        })
        .collect();
    errors.add(0);
    let mut answer = ApiResponse::new(
        ResponseKind::ApiVersions(
            ApiVersionsResponse::default()
                .with_supported_features(supported_features)
                .with_finalized_features_epoch(image.provenance.last_log_index as i64)
                .with_finalized_features(finalized_features),
        ),
        errors,
    );
    answer.encoded_list = Some(api_keys(info.listener_kind, info.api_version));
    answer
}

/// The answer's `api_keys`, encoded once per listener kind and encoding (v0-2, then the
/// flexible v3+): the routing table is fixed for the process, and building, encoding and
/// dropping its ~70 entries was a third of the node's work per ApiVersions.
fn api_keys(listener_kind: ListenerKind, api_version: i16) -> EncodedList {
    static ENCODED: [OnceLock<EncodedList>; 4] = [const { OnceLock::new() }; 4];
    let flexible = api_version >= 3;
    let slot = match listener_kind {
        ListenerKind::Broker => 0,
        ListenerKind::Controller => 2,
    } + usize::from(flexible);
    ENCODED[slot]
        .get_or_init(|| encode_api_keys(listener_kind, if flexible { 3 } else { 0 }))
        .clone()
}

/// The routing table's entries served on `listener_kind`, encoded at `api_version`, by key as
/// Kafka lists them (its `ApiKeys` are an `EnumSet`).
fn encode_api_keys(listener_kind: ListenerKind, api_version: i16) -> EncodedList {
    let mut bytes = BytesMut::new();
    let mut count = 0;
    let mut served: Vec<_> = APIS
        .iter()
        .filter(|spec| spec.served_on(listener_kind))
        .collect();
    served.sort_by_key(|spec| spec.key as i16);
    for spec in served {
        let entry = ApiVersion::default()
            .with_api_key(spec.key as i16)
            .with_min_version(spec.versions.min)
            .with_max_version(spec.versions.max);
        // Three integers and, when flexible, an empty tag buffer: nothing that can fail.
        if entry.encode(&mut bytes, api_version).is_ok() {
            count += 1;
        }
    }
    EncodedList {
        count,
        bytes: bytes.freeze(),
    }
}

/// Kafka's answer to an ApiVersions request of a version it does not know (KIP-511): a v0 body
/// with UNSUPPORTED_VERSION and only the ApiVersions range, so the client can retry lower.
pub fn unsupported_version_response() -> ApiVersionsResponse {
    ApiVersionsResponse::default()
        .with_error_code(ResponseError::UnsupportedVersion.code())
        .with_api_keys(vec![ApiVersion::default()
            .with_api_key(ApiKey::ApiVersions as i16)
            .with_min_version(ApiVersionsRequest::VERSIONS.min)
            .with_max_version(ApiVersionsRequest::VERSIONS.max)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn software_names_follow_kip_511() {
        assert!(software_field_is_valid("apache-kafka-java"));
        assert!(software_field_is_valid("2.16.1"));
        assert!(software_field_is_valid("a"));
        assert!(!software_field_is_valid(""));
        assert!(!software_field_is_valid("-leading"));
        assert!(!software_field_is_valid("trailing."));
        assert!(!software_field_is_valid("has space"));
        assert!(!software_field_is_valid("under_score"));
    }

    #[test]
    fn fallback_names_only_api_versions() {
        let response = unsupported_version_response();
        assert_eq!(response.error_code, 35);
        assert_eq!(response.api_keys.len(), 1);
        assert_eq!(
            (
                response.api_keys[0].api_key,
                response.api_keys[0].min_version,
                response.api_keys[0].max_version
            ),
            (18, 0, 4)
        );
    }
}
