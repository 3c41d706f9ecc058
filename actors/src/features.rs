//! Feature versions this node supports and the levels a new cluster starts at.

use gregor_publishers::records::{
    FeatureLevelRecord, FeatureRange, MetadataRecord, KRAFT_VERSION_FEATURE,
    METADATA_VERSION_FEATURE,
};

/// A supported feature range, as advertised in ApiVersions and registrations.
#[derive(Clone, Copy, Debug)]
pub struct SupportedFeature {
    /// Feature name.
    pub name: &'static str,
    /// Lowest supported level.
    pub min: i16,
    /// Highest supported level.
    pub max: i16,
}

/// `metadata.version` 7 is 3.3-IV3, the oldest KRaft level Kafka 4.x accepts; 25 is 4.0-IV3,
/// whose records and APIs Gregor implements.
pub const METADATA_VERSION_MIN: i16 = 7;
/// See [`METADATA_VERSION_MIN`].
pub const METADATA_VERSION_MAX: i16 = 25;

/// Features this node supports.
pub const SUPPORTED_FEATURES: &[SupportedFeature] = &[
    SupportedFeature {
        name: METADATA_VERSION_FEATURE,
        min: METADATA_VERSION_MIN,
        max: METADATA_VERSION_MAX,
    },
    // kraft.version 1 is the dynamic quorum of KIP-853: voters change through the log.
    SupportedFeature {
        name: KRAFT_VERSION_FEATURE,
        min: 0,
        max: 1,
    },
];

/// The feature ranges as registration records carry them.
pub fn supported_ranges() -> Vec<FeatureRange> {
    SUPPORTED_FEATURES
        .iter()
        .map(|f| FeatureRange {
            name: f.name.to_owned(),
            min_supported_version: f.min,
            max_supported_version: f.max,
        })
        .collect()
}

/// The FeatureLevelRecords a brand-new cluster's log starts with.
pub fn bootstrap_records() -> Vec<MetadataRecord> {
    vec![
        MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: METADATA_VERSION_FEATURE.to_owned(),
            feature_level: METADATA_VERSION_MAX,
        }),
        MetadataRecord::FeatureLevel(FeatureLevelRecord {
            name: KRAFT_VERSION_FEATURE.to_owned(),
            feature_level: 1,
        }),
    ]
}
