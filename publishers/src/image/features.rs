//! Finalized feature levels: [`FeaturesImage`] and [`FeaturesDelta`].

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::delta::ReplayError;
use crate::records::{FeatureLevelRecord, MetadataRecord, METADATA_VERSION_FEATURE};

/// The finalized level of every feature (`metadata.version`, `kraft.version`, ...).
///
/// A handful of entries: a plain sorted map, copied whole when a feature changes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FeaturesImage {
    levels: BTreeMap<String, i16>,
}

impl FeaturesImage {
    /// The image with no finalized feature.
    pub fn empty() -> Self {
        FeaturesImage::default()
    }

    /// Whether no feature is finalized.
    pub fn is_empty(&self) -> bool {
        self.levels.is_empty()
    }

    /// The finalized level of `name`, if any.
    pub fn level(&self, name: &str) -> Option<i16> {
        self.levels.get(name).copied()
    }

    /// The finalized `metadata.version` level, if set.
    pub fn metadata_version(&self) -> Option<i16> {
        self.level(METADATA_VERSION_FEATURE)
    }

    /// Every finalized `(name, level)`, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, i16)> {
        self.levels
            .iter()
            .map(|(name, level)| (name.as_str(), *level))
    }

    /// The image as records, `metadata.version` first (it decides how the rest is read).
    pub fn to_records(&self, out: &mut Vec<MetadataRecord>) {
        let record = |name: &str, level: i16| {
            MetadataRecord::FeatureLevel(FeatureLevelRecord {
                name: name.to_string(),
                feature_level: level,
            })
        };
        if let Some(level) = self.metadata_version() {
            out.push(record(METADATA_VERSION_FEATURE, level));
        }
        out.extend(
            self.iter()
                .filter(|(name, _)| *name != METADATA_VERSION_FEATURE)
                .map(|(name, level)| record(name, level)),
        );
    }
}

/// Feature level changes of one delta.
#[derive(Clone, Debug)]
pub struct FeaturesDelta {
    base: Arc<FeaturesImage>,
    /// New level per changed feature; `None` removes the feature (level 0).
    changes: BTreeMap<String, Option<i16>>,
}

impl FeaturesDelta {
    /// An empty delta on `base`.
    pub fn new(base: Arc<FeaturesImage>) -> Self {
        FeaturesDelta {
            base,
            changes: BTreeMap::new(),
        }
    }

    /// The image this delta applies to.
    pub fn base(&self) -> &Arc<FeaturesImage> {
        &self.base
    }

    /// Changed features by name: the new level, or `None` if the feature was removed.
    pub fn changes(&self) -> impl Iterator<Item = (&str, Option<i16>)> {
        self.changes
            .iter()
            .map(|(name, level)| (name.as_str(), *level))
    }

    /// The new `metadata.version` level, if this delta changes it.
    pub fn metadata_version_change(&self) -> Option<Option<i16>> {
        self.changes.get(METADATA_VERSION_FEATURE).copied()
    }

    pub(crate) fn replay(&mut self, record: &FeatureLevelRecord) -> Result<(), ReplayError> {
        if record.feature_level < 0 {
            return Err(ReplayError::InvalidFeatureLevel {
                name: record.name.clone(),
                level: record.feature_level,
            });
        }
        let level = (record.feature_level != 0).then_some(record.feature_level);
        self.changes.insert(record.name.clone(), level);
        Ok(())
    }

    /// The base image with this delta's changes.
    pub fn apply(&self) -> FeaturesImage {
        let mut levels = self.base.levels.clone();
        for (name, level) in &self.changes {
            match level {
                Some(level) => levels.insert(name.clone(), *level),
                None => levels.remove(name),
            };
        }
        FeaturesImage { levels }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::delta::MetadataDelta;
    use crate::image::test_util::*;
    use crate::records::KRAFT_VERSION_FEATURE;

    fn image1_records() -> Vec<MetadataRecord> {
        vec![
            feature(METADATA_VERSION_FEATURE, 21),
            feature(KRAFT_VERSION_FEATURE, 1),
            feature("group.version", 1),
        ]
    }

    fn delta1_records() -> Vec<MetadataRecord> {
        vec![
            feature(METADATA_VERSION_FEATURE, 22),
            feature("group.version", 0),
            feature("transaction.version", 2),
        ]
    }

    fn image2_records() -> Vec<MetadataRecord> {
        vec![
            feature(METADATA_VERSION_FEATURE, 22),
            feature(KRAFT_VERSION_FEATURE, 1),
            feature("transaction.version", 2),
        ]
    }

    #[test]
    fn image1_plus_delta1_is_image2() {
        let image2 = apply(&image(&image1_records()), &delta1_records());
        assert_eq!(image2, image(&image2_records()));
        assert_eq!(image2.features.metadata_version(), Some(22));
        assert_eq!(image2.features.level(KRAFT_VERSION_FEATURE), Some(1));
        assert_eq!(image2.features.level("group.version"), None);
        assert_eq!(
            image2.features.iter().collect::<Vec<_>>(),
            [
                (KRAFT_VERSION_FEATURE, 1),
                (METADATA_VERSION_FEATURE, 22),
                ("transaction.version", 2)
            ]
        );
    }

    #[test]
    fn every_batch_split_gives_image2() {
        assert_every_batch_split(
            &image(&image1_records()),
            &delta1_records(),
            &image(&image2_records()),
        );
    }

    #[test]
    fn delta_reports_changes_and_rejects_negative_levels() {
        let mut delta = MetadataDelta::new(Arc::new(image(&image1_records())));
        delta.replay_all(&delta1_records()).unwrap();
        let features = delta.features_delta().unwrap();
        assert_eq!(features.metadata_version_change(), Some(Some(22)));
        assert_eq!(
            features.changes().collect::<Vec<_>>(),
            [
                ("group.version", None),
                (METADATA_VERSION_FEATURE, Some(22)),
                ("transaction.version", Some(2))
            ]
        );
        let mut delta = MetadataDelta::new(Arc::new(image(&image1_records())));
        assert_eq!(
            delta.replay(&feature("group.version", -1)),
            Err(ReplayError::InvalidFeatureLevel {
                name: "group.version".into(),
                level: -1
            })
        );
        assert!(delta.features_delta().is_none());
    }

    #[test]
    fn records_put_metadata_version_first() {
        let image = image(&image2_records());
        let mut records = Vec::new();
        image.features.to_records(&mut records);
        assert_eq!(
            records.first(),
            Some(&feature(METADATA_VERSION_FEATURE, 22))
        );
        assert_round_trip(&image);
    }
}
