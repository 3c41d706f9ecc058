//! Dynamic configs: [`ConfigsImage`] and [`ConfigsDelta`].
//!
//! Resources are keyed by `(resource_type, resource_name)` with Kafka's `ConfigResource.Type`
//! ids: 2 topic, 4 broker (name "" = cluster-wide default), 16 client metrics, 32 group.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::records::{ConfigRecord, MetadataRecord};

/// `ConfigResource.Type` id of topics.
pub const TOPIC_RESOURCE: i8 = 2;

/// The config key → value map of one resource (never empty inside an image).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceConfigs {
    entries: BTreeMap<String, String>,
}

impl ResourceConfigs {
    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries.get(key).map(String::as_str)
    }

    /// Every `(key, value)`, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of keys set.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Every resource's dynamic configs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConfigsImage {
    by_type: BTreeMap<i8, imbl::OrdMap<String, Arc<ResourceConfigs>>>,
}

impl ConfigsImage {
    /// The image with no config.
    pub fn empty() -> Self {
        ConfigsImage::default()
    }

    /// Whether no resource has a config.
    pub fn is_empty(&self) -> bool {
        self.by_type.is_empty()
    }

    /// The configs of resource `(resource_type, name)`, if it has any.
    pub fn get(&self, resource_type: i8, name: &str) -> Option<&Arc<ResourceConfigs>> {
        self.by_type.get(&resource_type)?.get(name)
    }

    /// One config value, if set.
    pub fn value(&self, resource_type: i8, name: &str, key: &str) -> Option<&str> {
        self.get(resource_type, name)?.get(key)
    }

    /// Resources of one type that have configs, by name.
    pub fn iter_type(
        &self,
        resource_type: i8,
    ) -> impl Iterator<Item = (&str, &Arc<ResourceConfigs>)> + '_ {
        self.by_type
            .get(&resource_type)
            .into_iter()
            .flat_map(|resources| resources.iter().map(|(name, c)| (name.as_str(), c)))
    }

    /// Every resource with configs as `(type, name, configs)`, by type then name.
    pub fn iter(&self) -> impl Iterator<Item = (i8, &str, &Arc<ResourceConfigs>)> + '_ {
        self.by_type.iter().flat_map(|(resource_type, resources)| {
            resources
                .iter()
                .map(move |(name, configs)| (*resource_type, name.as_str(), configs))
        })
    }

    /// The image as records, one `ConfigRecord` per key.
    pub fn to_records(&self, out: &mut Vec<MetadataRecord>) {
        for (resource_type, resource_name, configs) in self.iter() {
            out.extend(configs.iter().map(|(name, value)| {
                MetadataRecord::Config(ConfigRecord {
                    resource_type,
                    resource_name: resource_name.to_string(),
                    name: name.to_string(),
                    value: Some(value.to_string()),
                })
            }));
        }
    }
}

/// The changes of one delta to one resource.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResourceConfigsDelta {
    /// Whether every key of the base image was dropped first (the topic was removed).
    cleared: bool,
    /// New value per changed key; `None` deletes it.
    keys: BTreeMap<String, Option<String>>,
}

impl ResourceConfigsDelta {
    /// Changed keys: the new value, or `None` if deleted.
    pub fn changes(&self) -> impl Iterator<Item = (&str, Option<&str>)> {
        self.keys
            .iter()
            .map(|(key, value)| (key.as_str(), value.as_deref()))
    }

    /// Whether every key the resource had before the delta was dropped.
    pub fn cleared(&self) -> bool {
        self.cleared
    }
}

/// Config changes of one delta.
#[derive(Clone, Debug)]
pub struct ConfigsDelta {
    base: Arc<ConfigsImage>,
    changes: BTreeMap<(i8, String), ResourceConfigsDelta>,
}

impl ConfigsDelta {
    /// An empty delta on `base`.
    pub fn new(base: Arc<ConfigsImage>) -> Self {
        ConfigsDelta {
            base,
            changes: BTreeMap::new(),
        }
    }

    /// The delta from the empty image that sets every config of `image`.
    pub fn from_image(image: &ConfigsImage) -> Self {
        let changes = image
            .iter()
            .map(|(resource_type, name, configs)| {
                let keys = configs
                    .iter()
                    .map(|(k, v)| (k.to_string(), Some(v.to_string())))
                    .collect();
                let change = ResourceConfigsDelta {
                    cleared: false,
                    keys,
                };
                ((resource_type, name.to_string()), change)
            })
            .collect();
        ConfigsDelta {
            base: Arc::new(ConfigsImage::empty()),
            changes,
        }
    }

    /// The image this delta applies to.
    pub fn base(&self) -> &Arc<ConfigsImage> {
        &self.base
    }

    /// Changed resources as `(type, name, change)`, by type then name.
    pub fn changed_resources(&self) -> impl Iterator<Item = (i8, &str, &ResourceConfigsDelta)> {
        self.changes
            .iter()
            .map(|((resource_type, name), change)| (*resource_type, name.as_str(), change))
    }

    /// The change to one resource, if any.
    pub fn changes(&self, resource_type: i8, name: &str) -> Option<&ResourceConfigsDelta> {
        self.changes.get(&(resource_type, name.to_string()))
    }

    pub(crate) fn replay(&mut self, record: &ConfigRecord) {
        self.changes
            .entry((record.resource_type, record.resource_name.clone()))
            .or_default()
            .keys
            .insert(record.name.clone(), record.value.clone());
    }

    /// Drops every config of `(resource_type, name)`.
    pub(crate) fn clear_resource(&mut self, resource_type: i8, name: &str) {
        let change = self
            .changes
            .entry((resource_type, name.to_string()))
            .or_default();
        change.cleared = true;
        change.keys.clear();
    }

    /// Whether `(resource_type, name)` has configs in the base image or in this delta.
    pub(crate) fn may_have_configs(
        base: &ConfigsImage,
        delta: Option<&Self>,
        resource_type: i8,
        name: &str,
    ) -> bool {
        base.get(resource_type, name).is_some()
            || delta.is_some_and(|delta| {
                delta
                    .changes
                    .contains_key(&(resource_type, name.to_string()))
            })
    }

    /// The base image with this delta's changes.
    pub fn apply(&self) -> ConfigsImage {
        let mut by_type = self.base.by_type.clone();
        for ((resource_type, name), change) in &self.changes {
            let resources = by_type.entry(*resource_type).or_default();
            let mut entries = match resources.get(name.as_str()) {
                Some(configs) if !change.cleared => configs.entries.clone(),
                _ => BTreeMap::new(),
            };
            for (key, value) in &change.keys {
                match value {
                    Some(value) => entries.insert(key.clone(), value.clone()),
                    None => entries.remove(key),
                };
            }
            if entries.is_empty() {
                resources.remove(name.as_str());
            } else {
                resources.insert(name.clone(), Arc::new(ResourceConfigs { entries }));
            }
            if resources.is_empty() {
                by_type.remove(resource_type);
            }
        }
        ConfigsImage { by_type }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::delta::MetadataDelta;
    use crate::image::test_util::*;

    const BROKER: i8 = 4;
    const GROUP: i8 = 32;

    fn image1_records() -> Vec<MetadataRecord> {
        vec![
            topic("foo", 1),
            config(TOPIC_RESOURCE, "foo", "retention.ms", Some("1000")),
            config(TOPIC_RESOURCE, "foo", "cleanup.policy", Some("compact")),
            config(BROKER, "", "log.retention.hours", Some("12")),
            config(BROKER, "1", "num.io.threads", Some("8")),
        ]
    }

    fn delta1_records() -> Vec<MetadataRecord> {
        vec![
            config(TOPIC_RESOURCE, "foo", "retention.ms", Some("2000")),
            config(TOPIC_RESOURCE, "foo", "cleanup.policy", None),
            config(BROKER, "1", "num.io.threads", None),
            config(GROUP, "g1", "consumer.session.timeout.ms", Some("45000")),
        ]
    }

    fn image2_records() -> Vec<MetadataRecord> {
        vec![
            topic("foo", 1),
            config(TOPIC_RESOURCE, "foo", "retention.ms", Some("2000")),
            config(BROKER, "", "log.retention.hours", Some("12")),
            config(GROUP, "g1", "consumer.session.timeout.ms", Some("45000")),
        ]
    }

    #[test]
    fn image1_plus_delta1_is_image2() {
        let image2 = apply(&image(&image1_records()), &delta1_records());
        assert_eq!(image2, image(&image2_records()));
        let configs = &image2.configs;
        assert_eq!(
            configs.value(TOPIC_RESOURCE, "foo", "retention.ms"),
            Some("2000")
        );
        assert_eq!(configs.value(TOPIC_RESOURCE, "foo", "cleanup.policy"), None);
        // Broker 1's last key was deleted: the resource is gone.
        assert!(configs.get(BROKER, "1").is_none());
        assert_eq!(configs.value(BROKER, "", "log.retention.hours"), Some("12"));
        assert_eq!(
            configs
                .iter_type(BROKER)
                .map(|(name, _)| name)
                .collect::<Vec<_>>(),
            [""]
        );
        assert_eq!(
            configs
                .iter()
                .map(|(t, name, c)| (t, name, c.len()))
                .collect::<Vec<_>>(),
            [
                (TOPIC_RESOURCE, "foo", 1),
                (BROKER, "", 1),
                (GROUP, "g1", 1)
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
    fn removing_a_topic_drops_its_configs() {
        let image1 = Arc::new(image(&image1_records()));
        let mut delta = MetadataDelta::new(Arc::clone(&image1));
        delta.replay(&remove_topic(1)).unwrap();
        let change = delta
            .configs_delta()
            .unwrap()
            .changes(TOPIC_RESOURCE, "foo")
            .unwrap();
        assert!(change.cleared());
        let image2 = delta.apply(Default::default());
        assert!(image2.configs.get(TOPIC_RESOURCE, "foo").is_none());
        assert_eq!(image2.configs.iter().count(), 2);
        // Re-created in the same delta with a new config: only the new key survives.
        let image3 = apply(
            &image1,
            &[
                remove_topic(1),
                topic("foo", 2),
                config(TOPIC_RESOURCE, "foo", "segment.ms", Some("60000")),
            ],
        );
        let foo = image3.configs.get(TOPIC_RESOURCE, "foo").unwrap();
        assert_eq!(foo.iter().collect::<Vec<_>>(), [("segment.ms", "60000")]);
        // A topic without configs leaves the configs area untouched.
        let mut delta = MetadataDelta::new(Arc::new(image(&[topic("bare", 3)])));
        delta.replay(&remove_topic(3)).unwrap();
        assert!(delta.configs_delta().is_none());
    }

    #[test]
    fn round_trip_through_records() {
        assert_round_trip(&image(&image1_records()));
        assert_round_trip(&image(&image2_records()));
    }
}
