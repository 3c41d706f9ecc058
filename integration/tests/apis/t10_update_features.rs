//! UpdateFeatures v0-2 on a combined node (node 1): `metadata.version` moves as Kafka 4.1's
//! controller allows and ApiVersions shows the finalized level once answered; refusals carry
//! Kafka's messages and change nothing; without ALTER on the cluster the request is refused.

use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{ApiVersionsRequest, UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::protocol::StrBytes;

use gregor_integration::{GregorNode, KafkaConn};

use crate::connect;

const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;

fn request(updates: &[(&str, i16, i8)], validate_only: bool) -> UpdateFeaturesRequest {
    UpdateFeaturesRequest::default()
        .with_timeout_ms(30_000)
        .with_validate_only(validate_only)
        .with_feature_updates(
            updates
                .iter()
                .map(|(name, level, upgrade_type)| {
                    FeatureUpdateKey::default()
                        .with_feature(StrBytes::from_string((*name).to_owned()))
                        .with_max_version_level(*level)
                        .with_upgrade_type(*upgrade_type)
                })
                .collect(),
        )
}

/// The finalized `metadata.version` ApiVersions v3 shows.
async fn finalized_metadata_version(conn: &mut KafkaConn) -> Option<i16> {
    let answer = conn
        .send(
            &ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("gregor-test"))
                .with_client_software_version(StrBytes::from_static_str("1")),
            3,
        )
        .await
        .unwrap();
    answer
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "metadata.version")
        .map(|f| {
            assert_eq!(f.min_version_level, f.max_version_level);
            f.max_version_level
        })
}

fn succeeded(results: &[&str]) -> UpdateFeaturesResponse {
    UpdateFeaturesResponse::default()
        .with_error_message(None)
        .with_results(
            results
                .iter()
                .map(|name| {
                    UpdatableFeatureResult::default()
                        .with_feature(StrBytes::from_string((*name).to_owned()))
                        .with_error_message(Some(StrBytes::from_static_str("NONE")))
                })
                .collect(),
        )
}

fn failed(message: &str) -> UpdateFeaturesResponse {
    UpdateFeaturesResponse::default()
        .with_error_code(95)
        .with_error_message(Some(StrBytes::from_string(format!(
            "The update failed for all features since the following feature had an error: \
             {message}"
        ))))
}

#[tokio::test]
async fn metadata_version_moves_as_kafka_allows() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = connect(&node).await;
    assert_eq!(finalized_metadata_version(&mut conn).await, Some(25));
    let mv = "metadata.version";
    let lossy = failed(
        "Unsupported metadata.version downgrade from 25 to 22. Refusing to perform the requested \
         downgrade because it might delete metadata information.",
    );
    let unsupported = failed(
        "Invalid update version 1 for feature group.version. Local controller 1 does not support \
         this feature.",
    );
    // (what, updates, validate_only, version, answer, finalized level after it)
    let steps = [
        // v0 has no upgrade type on the wire: UPGRADE, here to the current level.
        (
            "no-op upgrade",
            vec![(mv, 25, UPGRADE)],
            false,
            0,
            succeeded(&[mv]),
            25,
        ),
        (
            "validate only",
            vec![(mv, 24, SAFE_DOWNGRADE)],
            true,
            1,
            succeeded(&[mv]),
            25,
        ),
        // Across a level without metadata changes; v2 lists no results.
        (
            "safe downgrade",
            vec![(mv, 24, SAFE_DOWNGRADE)],
            false,
            2,
            UpdateFeaturesResponse::default().with_error_message(None),
            24,
        ),
        (
            "upgrade back",
            vec![(mv, 25, UPGRADE)],
            false,
            2,
            UpdateFeaturesResponse::default().with_error_message(None),
            25,
        ),
        // 23 changed the metadata.
        (
            "lossy downgrade v1",
            vec![(mv, 22, SAFE_DOWNGRADE)],
            false,
            1,
            lossy.clone(),
            25,
        ),
        (
            "lossy downgrade v2",
            vec![(mv, 22, SAFE_DOWNGRADE)],
            false,
            2,
            lossy,
            25,
        ),
        // The accepted update beside a refused one is not written.
        (
            "unsupported feature",
            vec![(mv, 24, SAFE_DOWNGRADE), ("group.version", 1, UPGRADE)],
            false,
            1,
            unsupported,
            25,
        ),
    ];
    for (what, updates, validate_only, version, answer, level) in steps {
        let got = conn
            .send(&request(&updates, validate_only), version)
            .await
            .unwrap();
        assert_eq!(got, answer, "{what}");
        assert_eq!(
            finalized_metadata_version(&mut conn).await,
            Some(level),
            "{what}"
        );
    }
}

#[tokio::test]
async fn without_alter_on_the_cluster_the_request_is_refused() {
    let node = GregorNode::start(&[("authorizer.class.name", "StandardAuthorizer")]).unwrap();
    let mut conn = connect(&node).await;
    for version in 0..=2 {
        let answer = conn
            .send(
                &request(&[("metadata.version", 25, UPGRADE)], false),
                version,
            )
            .await
            .unwrap();
        assert_eq!(
            answer,
            UpdateFeaturesResponse::default()
                .with_error_code(31)
                .with_error_message(Some(StrBytes::from_static_str(
                    "Cluster authorization failed."
                ))),
            "v{version}"
        );
    }
}
