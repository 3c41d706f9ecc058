//! Exact answers and records of [`update_features`], step by step in Kafka's order. Numbers
//! from Kafka's `FeatureControlManagerTest` where they fit Gregor's levels (7..25).

use std::sync::Arc;

use gregor_publishers::records::{
    FeatureRange, RegisterBrokerRecord, RegisterControllerRecord, KRAFT_VERSION_FEATURE,
    METADATA_VERSION_FEATURE,
};
use gregor_publishers::{MetadataDelta, MetadataImage};
use kafka_protocol::messages::update_features_request::FeatureUpdateKey;
use uuid::Uuid;

use super::*;

const UPGRADE: i8 = 1;
const SAFE: i8 = 2;
const UNSAFE: i8 = 3;

fn range(name: &str, min: i16, max: i16) -> FeatureRange {
    FeatureRange {
        name: name.to_owned(),
        min_supported_version: min,
        max_supported_version: max,
    }
}

fn gregor_ranges() -> Vec<FeatureRange> {
    crate::features::supported_ranges()
}

fn broker(id: i32, features: Vec<FeatureRange>) -> MetadataRecord {
    MetadataRecord::RegisterBroker(RegisterBrokerRecord {
        broker_id: id,
        incarnation_id: Uuid::from_u128(id as u128),
        broker_epoch: 10,
        endpoints: Vec::new(),
        features,
        rack: None,
        fenced: false,
        in_controlled_shutdown: false,
        log_dirs: Vec::new(),
    })
}

fn controller(id: i32, features: Vec<FeatureRange>) -> MetadataRecord {
    MetadataRecord::RegisterController(RegisterControllerRecord {
        controller_id: id,
        incarnation_id: Uuid::from_u128(100 + id as u128),
        directory_id: Uuid::from_u128(200 + id as u128),
        endpoints: Vec::new(),
        features,
    })
}

/// A combined node 1 at `metadata.version` `mv` and kraft.version 1, plus `extra` records.
fn image_at(mv: i16, extra: Vec<MetadataRecord>) -> MetadataImage {
    let mut records = vec![
        feature_record(METADATA_VERSION_FEATURE, mv),
        feature_record(KRAFT_VERSION_FEATURE, 1),
        broker(1, gregor_ranges()),
        controller(1, gregor_ranges()),
    ];
    records.extend(extra);
    let base = Arc::new(MetadataImage::empty());
    let mut delta = MetadataDelta::new(base.clone());
    delta.replay_all(&records).expect("replays");
    delta.apply(base.provenance)
}

const ALONE: QuorumView<'static> = QuorumView {
    local_id: 1,
    voters: &[1],
};

fn request(updates: &[(&str, i16, i8)]) -> UpdateFeaturesRequest {
    UpdateFeaturesRequest::default().with_feature_updates(
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

/// The whole-request failure carrying `message`.
fn failed(message: &str) -> ControllerResult<UpdateFeaturesResponse> {
    ControllerResult {
        records: Vec::new(),
        response: UpdateFeaturesResponse::default()
            .with_error_code(95)
            .with_error_message(Some(StrBytes::from_string(format!(
                "The update failed for all features since the following feature had an error: \
                 {message}"
            )))),
    }
}

fn decide(
    image: &MetadataImage,
    updates: &[(&str, i16, i8)],
) -> ControllerResult<UpdateFeaturesResponse> {
    update_features(image, ALONE, &request(updates), 2)
}

fn accepted(records: Vec<MetadataRecord>) -> ControllerResult<UpdateFeaturesResponse> {
    ControllerResult {
        records,
        response: UpdateFeaturesResponse::default().with_error_message(None),
    }
}

#[test]
fn an_unknown_upgrade_type_is_refused_first() {
    let image = image_at(25, vec![]);
    for code in [0, 4, -1] {
        assert_eq!(
            decide(&image, &[(METADATA_VERSION_FEATURE, -5, code)]),
            failed(
                "Invalid update version -5 for feature metadata.version. The controller does not \
                 support the given upgrade type."
            )
        );
    }
}

#[test]
fn a_negative_level_is_refused_before_support_is_checked() {
    assert_eq!(
        decide(&image_at(25, vec![]), &[("group.version", -1, SAFE)]),
        failed("Invalid update version -1 for feature group.version. A feature version cannot be less than 0.")
    );
}

#[test]
fn the_local_controller_is_checked_first() {
    let image = image_at(25, vec![broker(2, vec![])]);
    assert_eq!(
        decide(&image, &[("group.version", 1, UPGRADE)]),
        failed(
            "Invalid update version 1 for feature group.version. Local controller 1 does not \
             support this feature."
        )
    );
    assert_eq!(
        decide(&image, &[(METADATA_VERSION_FEATURE, 26, UPGRADE)]),
        failed(
            "Invalid update version 26 for feature metadata.version. Local controller 1 only \
             supports versions 7-25"
        )
    );
    assert_eq!(
        decide(&image, &[(KRAFT_VERSION_FEATURE, 2, UPGRADE)]),
        failed(
            "Invalid update version 2 for feature kraft.version. Local controller 1 only \
             supports versions 0-1"
        )
    );
}

#[test]
fn then_every_broker_by_id() {
    let image = image_at(
        24,
        vec![
            broker(5, vec![]),
            broker(3, vec![range(METADATA_VERSION_FEATURE, 24, 24)]),
        ],
    );
    assert_eq!(
        decide(&image, &[(METADATA_VERSION_FEATURE, 25, UPGRADE)]),
        failed(
            "Invalid update version 25 for feature metadata.version. Broker 3 only supports \
             versions 24"
        )
    );
    let image = image_at(24, vec![broker(5, vec![])]);
    assert_eq!(
        decide(&image, &[(METADATA_VERSION_FEATURE, 25, UPGRADE)]),
        failed(
            "Invalid update version 25 for feature metadata.version. Broker 5 does not support \
             this feature."
        )
    );
}

#[test]
fn then_the_other_controllers_and_the_unregistered_voters() {
    let image = image_at(
        24,
        vec![controller(3, vec![range(METADATA_VERSION_FEATURE, 7, 24)])],
    );
    let quorum = QuorumView {
        local_id: 1,
        voters: &[1, 2, 3],
    };
    let upgrade = request(&[(METADATA_VERSION_FEATURE, 25, UPGRADE)]);
    assert_eq!(
        update_features(&image, quorum, &upgrade, 2),
        failed(
            "Invalid update version 25 for feature metadata.version. Controller 3 only supports \
             versions 7-24"
        )
    );
    let image = image_at(24, vec![controller(3, gregor_ranges())]);
    assert_eq!(
        update_features(&image, quorum, &upgrade, 2),
        failed(
            "Invalid update version 25 for feature metadata.version. controller 2 has not \
             registered, and may not support this feature"
        )
    );
    // Below 3.7-IV0 (15) controllers do not register, and Kafka's controller skips them.
    let image = image_at(14, vec![controller(3, vec![])]);
    assert_eq!(
        update_features(&image, quorum, &upgrade, 2),
        accepted(vec![feature_record(METADATA_VERSION_FEATURE, 25)])
    );
}

#[test]
fn direction_must_match_the_upgrade_type() {
    let image = image_at(24, vec![]);
    assert_eq!(
        decide(&image, &[(METADATA_VERSION_FEATURE, 22, UPGRADE)]),
        failed(
            "Invalid update version 22 for feature metadata.version. Can't downgrade the version \
             of this feature without setting the upgrade type to either safe or unsafe downgrade."
        )
    );
    for code in [SAFE, UNSAFE] {
        assert_eq!(
            decide(&image, &[(METADATA_VERSION_FEATURE, 25, code)]),
            failed(
                "Invalid update version 25 for feature metadata.version. Can't downgrade to a \
                 newer version."
            )
        );
    }
}

#[test]
fn metadata_version_downgrades_follow_did_metadata_change() {
    let lossy = |from: i16, to: i16| {
        failed(&format!(
            "Unsupported metadata.version downgrade from {from} to {to}. Refusing to perform the \
             requested downgrade because it might delete metadata information."
        ))
    };
    let unsafe_refused = |from: i16, to: i16| {
        failed(&format!(
            "Unsupported metadata.version downgrade from {from} to {to}. Unsafe metadata \
             downgrade is not supported in this version."
        ))
    };
    let to = |level: i16| accepted(vec![feature_record(METADATA_VERSION_FEATURE, level)]);
    let at = |level| image_at(level, vec![]);
    assert_eq!(
        decide(&at(25), &[(METADATA_VERSION_FEATURE, 24, SAFE)]),
        to(24)
    );
    assert_eq!(
        decide(&at(25), &[(METADATA_VERSION_FEATURE, 24, UNSAFE)]),
        to(24)
    );
    // 23 changed the metadata.
    assert_eq!(
        decide(&at(25), &[(METADATA_VERSION_FEATURE, 23, SAFE)]),
        to(23)
    );
    assert_eq!(
        decide(&at(25), &[(METADATA_VERSION_FEATURE, 22, SAFE)]),
        lossy(25, 22)
    );
    assert_eq!(
        decide(&at(25), &[(METADATA_VERSION_FEATURE, 22, UNSAFE)]),
        unsafe_refused(25, 22)
    );
    assert_eq!(
        decide(&at(22), &[(METADATA_VERSION_FEATURE, 17, SAFE)]),
        to(17)
    );
    assert_eq!(
        decide(&at(22), &[(METADATA_VERSION_FEATURE, 16, SAFE)]),
        lossy(22, 16)
    );
    // FeatureControlManagerTest.testCannotUseSafeDowngradeIfMetadataChanged: 8 to 7.
    assert_eq!(
        decide(&at(8), &[(METADATA_VERSION_FEATURE, 7, SAFE)]),
        lossy(8, 7)
    );
    assert_eq!(
        decide(&at(8), &[(METADATA_VERSION_FEATURE, 7, UNSAFE)]),
        unsafe_refused(8, 7)
    );
    // The same level is written again, as Kafka does; an upgrade is written.
    assert_eq!(
        decide(&at(25), &[(METADATA_VERSION_FEATURE, 25, UPGRADE)]),
        to(25)
    );
    assert_eq!(
        decide(&at(25), &[(METADATA_VERSION_FEATURE, 25, SAFE)]),
        to(25)
    );
    assert_eq!(
        decide(&at(7), &[(METADATA_VERSION_FEATURE, 25, UPGRADE)]),
        to(25)
    );
}

#[test]
fn kraft_version_stays_at_one() {
    let image = image_at(25, vec![]);
    assert_eq!(
        decide(&image, &[(KRAFT_VERSION_FEATURE, 1, UPGRADE)]),
        accepted(vec![MetadataRecord::NoOp])
    );
    assert_eq!(
        decide(&image, &[(KRAFT_VERSION_FEATURE, 1, SAFE)]),
        accepted(vec![])
    );
    assert_eq!(
        decide(&image, &[(KRAFT_VERSION_FEATURE, 0, SAFE)]),
        failed("Invalid update version 0 for feature kraft.version. Can't downgrade the version of this feature.")
    );
    assert_eq!(
        decide(&image, &[(KRAFT_VERSION_FEATURE, 0, UPGRADE)]),
        failed(
            "Invalid update version 0 for feature kraft.version. Can't downgrade the version of \
             this feature without setting the upgrade type to either safe or unsafe downgrade."
        )
    );
}

#[test]
fn level_zero_of_an_unsupported_feature() {
    let image = image_at(25, vec![]);
    // kafka-features.sh disable: Kafka writes the level-0 record of a feature it knows.
    assert_eq!(
        decide(&image, &[("group.version", 0, SAFE)]),
        accepted(vec![feature_record("group.version", 0)])
    );
    assert_eq!(
        decide(&image, &[("foo", 0, SAFE)]),
        failed("Invalid update version 0 for feature foo. Feature foo not found.")
    );
}

#[test]
fn the_first_failure_in_kafkas_map_order_fails_everything() {
    let image = image_at(25, vec![]);
    // group.version hashes to bucket 0, metadata.version to 7: Kafka checks group.version first.
    assert_eq!(
        decide(
            &image,
            &[
                (METADATA_VERSION_FEATURE, 22, SAFE),
                ("group.version", 1, UPGRADE)
            ]
        ),
        failed(
            "Invalid update version 1 for feature group.version. Local controller 1 does not \
             support this feature."
        )
    );
    // foo shares metadata.version's bucket: insertion order decides.
    assert_eq!(
        decide(
            &image,
            &[("foo", 0, SAFE), (METADATA_VERSION_FEATURE, 22, SAFE)]
        ),
        failed("Invalid update version 0 for feature foo. Feature foo not found.")
    );
    // A failure after an accepted update writes nothing.
    assert_eq!(
        decide(
            &image,
            &[
                (METADATA_VERSION_FEATURE, 24, SAFE),
                ("group.version", 1, UPGRADE)
            ]
        )
        .records,
        Vec::new()
    );
}

#[test]
fn a_feature_named_twice_takes_its_last_update() {
    let image = image_at(25, vec![]);
    assert_eq!(
        decide(
            &image,
            &[
                (METADATA_VERSION_FEATURE, 22, SAFE),
                (METADATA_VERSION_FEATURE, 24, SAFE)
            ]
        ),
        accepted(vec![feature_record(METADATA_VERSION_FEATURE, 24)])
    );
}

#[test]
fn several_updates_are_one_batch_and_validate_only_writes_nothing() {
    let image = image_at(25, vec![]);
    let updates = [
        (METADATA_VERSION_FEATURE, 24, SAFE),
        (KRAFT_VERSION_FEATURE, 1, UPGRADE),
    ];
    // kraft.version (bucket 5) before metadata.version (bucket 7).
    assert_eq!(
        decide(&image, &updates),
        accepted(vec![
            MetadataRecord::NoOp,
            feature_record(METADATA_VERSION_FEATURE, 24)
        ])
    );
    let validate = request(&updates).with_validate_only(true);
    assert_eq!(
        update_features(&image, ALONE, &validate, 2),
        accepted(vec![])
    );
}

#[test]
fn v0_and_v1_list_every_requested_entry() {
    let image = image_at(25, vec![]);
    let updates = request(&[
        (METADATA_VERSION_FEATURE, 25, UPGRADE),
        (KRAFT_VERSION_FEATURE, 1, UPGRADE),
        (METADATA_VERSION_FEATURE, 25, UPGRADE),
    ]);
    let result = |name: &str| {
        UpdatableFeatureResult::default()
            .with_feature(StrBytes::from_string(name.to_owned()))
            .with_error_message(Some(StrBytes::from_static_str("NONE")))
    };
    for version in [0, 1] {
        let decided = update_features(&image, ALONE, &updates, version);
        assert_eq!(
            decided.response,
            UpdateFeaturesResponse::default()
                .with_error_message(None)
                .with_results(vec![
                    result(METADATA_VERSION_FEATURE),
                    result(KRAFT_VERSION_FEATURE),
                    result(METADATA_VERSION_FEATURE),
                ])
        );
    }
    assert_eq!(
        update_features(&image, ALONE, &updates, 2).response,
        UpdateFeaturesResponse::default().with_error_message(None)
    );
    // A failure lists nothing in any version.
    let refused = request(&[(METADATA_VERSION_FEATURE, 22, SAFE)]);
    assert!(update_features(&image, ALONE, &refused, 0)
        .response
        .results
        .is_empty());
}

#[test]
fn java_hash_map_order_matches_kafka() {
    // "foo".hashCode() is 101574 in Java.
    assert_eq!(java_hash("foo"), 101574 ^ 1);
    assert_eq!(java_capacity(12), 16);
    assert_eq!(java_capacity(13), 32);
}
