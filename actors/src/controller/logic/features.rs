//! UpdateFeatures (key 57) on the controller: Kafka 4.1's `FeatureControlManager.updateFeatures`
//! as a function from (image, quorum, request) to (response, records).
//!
//! Updates are checked one at a time in the order Kafka's controller iterates its `HashMap` of
//! them; the first failure fails the whole request and nothing is written. A request that
//! passes writes its records as one batch (or nothing, when `validate_only`).

use std::collections::HashMap;

use gregor_publishers::records::{
    FeatureLevelRecord, MetadataRecord, KRAFT_VERSION_FEATURE, METADATA_VERSION_FEATURE,
};
use gregor_publishers::MetadataImage;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::protocol::StrBytes;

use super::ControllerResult;
use crate::features::SUPPORTED_FEATURES;

/// The quorum as the deciding controller sees it.
#[derive(Clone, Copy, Debug)]
pub struct QuorumView<'a> {
    /// This controller's node id ("Local controller N").
    pub local_id: i32,
    /// The ids of the quorum's voters, each expected to have registered.
    pub voters: &'a [i32],
}

/// `FeatureUpdate.UpgradeType`, from the request's raw code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UpgradeType {
    Upgrade,
    SafeDowngrade,
    UnsafeDowngrade,
    Unknown,
}

impl UpgradeType {
    fn from_code(code: i8) -> Self {
        match code {
            1 => UpgradeType::Upgrade,
            2 => UpgradeType::SafeDowngrade,
            3 => UpgradeType::UnsafeDowngrade,
            _ => UpgradeType::Unknown,
        }
    }
}

/// The first `metadata.version` from which controllers register (3.7-IV0); below it Kafka's
/// controller cannot check the other controllers' support and skips them.
const CONTROLLER_REGISTRATION_LEVEL: i16 = 15;

/// Whether `metadata.version` `level` changed the metadata format (Kafka's `didMetadataChange`),
/// for the levels Gregor supports. Unknown levels count as changed, refusing the downgrade.
fn did_metadata_change(level: i16) -> bool {
    !matches!(level, 9 | 10 | 12 | 16 | 18 | 19 | 20 | 21 | 22 | 24 | 25)
}

/// Kafka's `MetadataVersion.checkIfMetadataChanged` for a downgrade from `current` to `target`:
/// some level in (target, current] changed the metadata.
fn metadata_changed(current: i16, target: i16) -> bool {
    (target.saturating_add(1)..=current).any(did_metadata_change)
}

/// The features of Kafka 4.1's `Feature` enum besides `metadata.version`: a level-0 update of
/// one Gregor does not support is written, as Kafka writes it, and of any other name refused as
/// unknown.
const KAFKA_FEATURES: &[&str] = &[
    KRAFT_VERSION_FEATURE,
    "transaction.version",
    "group.version",
    "eligible.leader.replicas.version",
    "share.version",
    "streams.version",
    "test.feature.version",
    "unit.test.feature.version.0",
    "unit.test.feature.version.1",
    "unit.test.feature.version.2",
    "unit.test.feature.version.3",
    "unit.test.feature.version.4",
    "unit.test.feature.version.5",
    "unit.test.feature.version.6",
    "unit.test.feature.version.7",
];

/// A supported range, Kafka's `VersionRange` (`DISABLED` is 0-0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    min: i16,
    max: i16,
}

const DISABLED: Range = Range { min: 0, max: 0 };

impl std::fmt::Display for Range {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.min == self.max {
            write!(f, "{}", self.min)
        } else {
            write!(f, "{}-{}", self.min, self.max)
        }
    }
}

/// Kafka's `QuorumFeatures.reasonNotSupported`.
fn reason_not_supported(level: i16, what: &str, range: Range) -> Option<String> {
    if (range.min..=range.max).contains(&level) {
        None
    } else if range.max == 0 {
        Some(format!("{what} does not support this feature."))
    } else {
        Some(format!("{what} only supports versions {range}"))
    }
}

/// The range of `name` in a registration's list (the last entry wins, as Kafka's map).
fn registered_range(features: &[gregor_publishers::records::FeatureRange], name: &str) -> Range {
    features
        .iter()
        .rev()
        .find(|f| f.name == name)
        .map_or(DISABLED, |f| Range {
            min: f.min_supported_version,
            max: f.max_supported_version,
        })
}

/// Java's `String.hashCode` over UTF-16 units, spread as `HashMap.hash` spreads it.
fn java_hash(name: &str) -> u32 {
    let h = name.encode_utf16().fold(0i32, |h, unit| {
        h.wrapping_mul(31).wrapping_add(i32::from(unit))
    });
    let h = h as u32;
    h ^ (h >> 16)
}

/// The table size of a `new HashMap<>()` holding `len` keys (16, doubled past 3/4 full).
fn java_capacity(len: usize) -> u32 {
    let mut capacity: u32 = 16;
    while len > (capacity as usize) / 4 * 3 && capacity < (1 << 30) {
        capacity *= 2;
    }
    capacity
}

/// One update as the controller decides it.
#[derive(Clone, Copy, Debug)]
struct Update<'a> {
    name: &'a str,
    level: i16,
    upgrade_type: UpgradeType,
}

/// The request's updates in Kafka's order. Kafka's controller reads them into a `HashMap` by
/// name, so a feature named twice takes its last level and upgrade type (a map put) but keeps
/// its first place, and the checks run in the map's order: by bucket, then by insertion.
/// (Eight or more names in one bucket would make Java re-shape its table; no such request is
/// worth following that far.)
fn updates_in_kafka_order(request: &UpdateFeaturesRequest) -> Vec<Update<'_>> {
    let mut order: Vec<&str> = Vec::new();
    let mut latest: HashMap<&str, (i16, i8)> = HashMap::new();
    for update in &request.feature_updates {
        let name = update.feature.as_str();
        if latest
            .insert(name, (update.max_version_level, update.upgrade_type))
            .is_none()
        {
            order.push(name);
        }
    }
    let mask = java_capacity(order.len()) - 1;
    // A stable sort keeps insertion order within a bucket.
    order.sort_by_key(|name| java_hash(name) & mask);
    order
        .into_iter()
        .filter_map(|name| {
            let (level, code) = latest.get(name).copied()?;
            Some(Update {
                name,
                level,
                upgrade_type: UpgradeType::from_code(code),
            })
        })
        .collect()
}

/// `FeatureControlManager.invalidUpdateVersion`'s message.
fn invalid_update_version(update: &Update<'_>, reason: &str) -> String {
    format!(
        "Invalid update version {} for feature {}. {reason}",
        update.level, update.name
    )
}

/// The other nodes' support, checked after the local controller's (Kafka's
/// `FeatureControlManager.reasonNotSupported`).
fn cluster_reason_not_supported(
    image: &MetadataImage,
    quorum: QuorumView<'_>,
    update: &Update<'_>,
) -> Option<String> {
    let local = SUPPORTED_FEATURES
        .iter()
        .find(|f| f.name == update.name)
        .map_or(DISABLED, |f| Range {
            min: f.min,
            max: f.max,
        });
    let local_what = format!("Local controller {}", quorum.local_id);
    if let Some(reason) = reason_not_supported(update.level, &local_what, local) {
        return Some(reason);
    }
    for broker in image.cluster.brokers() {
        let range = registered_range(&broker.features, update.name);
        let what = format!("Broker {}", broker.id);
        if let Some(reason) = reason_not_supported(update.level, &what, range) {
            return Some(reason);
        }
    }
    let metadata_version = image.features.metadata_version().unwrap_or(0);
    if metadata_version < CONTROLLER_REGISTRATION_LEVEL {
        return None;
    }
    for controller in image.cluster.controllers() {
        if controller.id == quorum.local_id {
            continue;
        }
        let range = registered_range(&controller.features, update.name);
        let what = format!("Controller {}", controller.id);
        if let Some(reason) = reason_not_supported(update.level, &what, range) {
            return Some(reason);
        }
    }
    quorum
        .voters
        .iter()
        .find(|&&id| id != quorum.local_id && image.cluster.controller(id).is_none())
        .map(|id| format!("controller {id} has not registered, and may not support this feature"))
}

/// One update, Kafka's `FeatureControlManager.updateFeature`: the record it writes, if any, or
/// the message failing the request.
fn update_feature(
    image: &MetadataImage,
    quorum: QuorumView<'_>,
    update: &Update<'_>,
) -> Result<Option<MetadataRecord>, String> {
    use UpgradeType::*;
    if update.upgrade_type == Unknown {
        return Err(invalid_update_version(
            update,
            "The controller does not support the given upgrade type.",
        ));
    }
    // Gregor keeps kraft.version in the image too (its bootstrap writes it), so every
    // feature's current level is read there.
    let current = image.features.level(update.name).unwrap_or(0);
    if update.level < 0 {
        return Err(invalid_update_version(
            update,
            "A feature version cannot be less than 0.",
        ));
    }
    if let Some(reason) = cluster_reason_not_supported(image, quorum, update) {
        return Err(invalid_update_version(update, &reason));
    }
    if update.level < current && update.upgrade_type == Upgrade {
        return Err(invalid_update_version(
            update,
            "Can't downgrade the version of this feature without setting the upgrade type to \
             either safe or unsafe downgrade.",
        ));
    }
    if update.level > current && update.upgrade_type != Upgrade {
        return Err(invalid_update_version(
            update,
            "Can't downgrade to a newer version.",
        ));
    }
    if update.name == METADATA_VERSION_FEATURE {
        if update.level < current && metadata_changed(current, update.level) {
            let reason = if update.upgrade_type == UnsafeDowngrade {
                "Unsafe metadata downgrade is not supported in this version."
            } else {
                "Refusing to perform the requested downgrade because it might delete metadata \
                 information."
            };
            return Err(format!(
                "Unsupported metadata.version downgrade from {current} to {}. {reason}",
                update.level
            ));
        }
        // Written even when the level stays, as Kafka writes it.
        return Ok(Some(feature_record(update.name, update.level)));
    }
    if update.name == KRAFT_VERSION_FEATURE {
        return match update.upgrade_type {
            // Kafka writes a no-op so the answer waits for an offset.
            Upgrade if update.level == current => Ok(Some(MetadataRecord::NoOp)),
            // Every cluster Gregor formats starts at kraft.version 1 (a dynamic quorum); a
            // log without it is not one Gregor can move to a dynamic quorum.
            Upgrade => Err(invalid_update_version(
                update,
                "Gregor cannot upgrade the kraft.version of a running quorum.",
            )),
            _ if update.level != current => Err(invalid_update_version(
                update,
                "Can't downgrade the version of this feature.",
            )),
            _ => Ok(None),
        };
    }
    // Only level 0 of a feature Gregor does not support gets here (its local range is 0-0).
    if KAFKA_FEATURES.contains(&update.name) {
        Ok(Some(feature_record(update.name, update.level)))
    } else {
        Err(invalid_update_version(
            update,
            &format!("Feature {} not found.", update.name),
        ))
    }
}

fn feature_record(name: &str, level: i16) -> MetadataRecord {
    MetadataRecord::FeatureLevel(FeatureLevelRecord {
        name: name.to_owned(),
        feature_level: level,
    })
}

/// The answer refusing a whole request with `code` (authorization, NOT_CONTROLLER, a failed
/// write): Kafka's `UpdateFeaturesResponse.createWithErrors`, with no results.
pub fn refused_update_features(code: ResponseError, message: &str) -> UpdateFeaturesResponse {
    UpdateFeaturesResponse::default()
        .with_error_code(code.code())
        .with_error_message(Some(StrBytes::from_string(message.to_owned())))
}

/// Decides an UpdateFeatures request of `version` (Kafka's `QuorumController.updateFeatures`).
pub fn update_features(
    image: &MetadataImage,
    quorum: QuorumView<'_>,
    request: &UpdateFeaturesRequest,
    version: i16,
) -> ControllerResult<UpdateFeaturesResponse> {
    let mut records = Vec::new();
    for update in updates_in_kafka_order(request) {
        match update_feature(image, quorum, &update) {
            Ok(record) => records.extend(record),
            Err(message) => {
                return ControllerResult {
                    records: Vec::new(),
                    response: UpdateFeaturesResponse::default()
                        .with_error_code(ResponseError::InvalidUpdateVersion.code())
                        .with_error_message(Some(StrBytes::from_string(format!(
                            "The update failed for all features since the following feature \
                             had an error: {message}"
                        )))),
                };
            }
        }
    }
    // Only v0 and v1 list the features, one result per requested entry.
    let results = if version <= 1 {
        request
            .feature_updates
            .iter()
            .map(|update| {
                UpdatableFeatureResult::default()
                    .with_feature(update.feature.clone())
                    .with_error_code(0)
                    .with_error_message(Some(StrBytes::from_static_str("NONE")))
            })
            .collect()
    } else {
        Vec::new()
    };
    ControllerResult {
        records: if request.validate_only {
            Vec::new()
        } else {
            records
        },
        // Kafka sets the success's message from `ApiError.NONE`, whose message is null.
        response: UpdateFeaturesResponse::default()
            .with_error_message(None)
            .with_results(results),
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests;
