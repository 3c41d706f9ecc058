//! The config publisher: follows dynamic configs in the image and applies what this node acts
//! on.
//!
//! Today that is the dynamic broker configs that concern this node (its own BROKER resource
//! over the cluster-wide default ""): the publisher follows their effective values, logs every
//! change, so an operator sees when it took effect, and hands them to whoever follows them (the
//! network's connection limits) through a watch channel. The broker-level defaults of topic
//! configs are read from the image itself by the config handlers and the log manager. Topic,
//! group and client-metrics configs are read straight from the image by the handlers;
//! BROKER_LOGGER changes never reach the log (they are applied by the handler on the receiving
//! node).

use std::collections::BTreeMap;
use std::sync::Arc;

use gregor_publishers::{
    LoaderManifest, MetadataDelta, MetadataImage, MetadataPublisher, PublishError,
};
use tokio::sync::watch;

use crate::controller::logic::configs::resource_type::BROKER;

/// This node's effective dynamic broker configs: key → (value, from the per-node resource).
pub type DynamicBrokerConfigs = BTreeMap<String, (String, bool)>;

/// See the module documentation.
pub struct ConfigPublisher {
    node: String,
    effective: DynamicBrokerConfigs,
    followers: Option<watch::Sender<DynamicBrokerConfigs>>,
}

impl ConfigPublisher {
    /// A publisher for node `node_id`.
    pub fn new(node_id: i32) -> Self {
        ConfigPublisher {
            node: node_id.to_string(),
            effective: DynamicBrokerConfigs::new(),
            followers: None,
        }
    }

    /// Also sends every change of the effective configs to `followers`.
    pub fn sending_to(mut self, followers: watch::Sender<DynamicBrokerConfigs>) -> Self {
        self.followers = Some(followers);
        self
    }

    /// The effective dynamic broker configs of this node, as of the last image.
    pub fn effective(&self) -> &DynamicBrokerConfigs {
        &self.effective
    }
}

/// The effective dynamic broker configs of `node` in `image`.
pub fn effective_broker_configs(image: &MetadataImage, node: &str) -> DynamicBrokerConfigs {
    let mut out = DynamicBrokerConfigs::new();
    for (resource, own) in [("", false), (node, true)] {
        if let Some(configs) = image.configs.get(BROKER, resource) {
            for (key, value) in configs.iter() {
                out.insert(key.to_owned(), (value.to_owned(), own));
            }
        }
    }
    out
}

impl MetadataPublisher for ConfigPublisher {
    fn name(&self) -> &str {
        "dynamic-config"
    }

    fn on_metadata_update(
        &mut self,
        delta: &MetadataDelta,
        image: &Arc<MetadataImage>,
        _manifest: &LoaderManifest,
    ) -> Result<(), PublishError> {
        let Some(configs) = delta.configs_delta() else {
            return Ok(());
        };
        let touched = configs
            .changed_resources()
            .any(|(t, name, _)| t == BROKER && (name.is_empty() || name == self.node));
        if !touched {
            return Ok(());
        }
        let next = effective_broker_configs(image, &self.node);
        let previous = &self.effective;
        for (key, (value, _)) in &next {
            if previous.get(key).map(|(v, _)| v) != Some(value) {
                tracing::info!(config = %key, %value, "dynamic broker config applied");
            }
        }
        for key in previous.keys().filter(|k| !next.contains_key(*k)) {
            tracing::info!(config = %key, "dynamic broker config removed; the static value applies");
        }
        self.effective = next;
        if let Some(followers) = &self.followers {
            // Nobody following (the node is stopping) is not the publisher's fault.
            followers.send_replace(self.effective.clone());
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use gregor_publishers::records::{ConfigRecord, MetadataRecord};
    use gregor_publishers::Provenance;

    use super::*;

    fn config(name: &str, key: &str, value: Option<&str>) -> MetadataRecord {
        MetadataRecord::Config(ConfigRecord {
            resource_type: BROKER,
            resource_name: name.into(),
            name: key.into(),
            value: value.map(str::to_owned),
        })
    }

    fn publish(
        publisher: &mut ConfigPublisher,
        base: &Arc<MetadataImage>,
        records: &[MetadataRecord],
    ) -> Arc<MetadataImage> {
        let mut delta = MetadataDelta::new(Arc::clone(base));
        for record in records {
            delta.replay(record).unwrap();
        }
        let image = Arc::new(delta.apply(Provenance::default()));
        let manifest = LoaderManifest::LogDelta {
            provenance: Provenance::default(),
            num_batches: 1,
            num_records: records.len(),
            elapsed_ns: 0,
        };
        publisher
            .on_metadata_update(&delta, &image, &manifest)
            .unwrap();
        image
    }

    #[test]
    fn node_overrides_beat_the_cluster_default_and_other_nodes_are_ignored() {
        let (sender, followed) = watch::channel(DynamicBrokerConfigs::new());
        let mut publisher = ConfigPublisher::new(1).sending_to(sender);
        let image = publish(
            &mut publisher,
            &Arc::new(MetadataImage::empty()),
            &[
                config("", "log.retention.ms", Some("1000")),
                config("1", "log.retention.ms", Some("2000")),
                config("2", "message.max.bytes", Some("10")),
                config("", "log.segment.bytes", Some("2097152")),
            ],
        );
        let got = publisher.effective().clone();
        assert_eq!(
            got.get("log.retention.ms"),
            Some(&("2000".to_owned(), true))
        );
        assert_eq!(
            got.get("log.segment.bytes"),
            Some(&("2097152".to_owned(), false))
        );
        assert_eq!(got.get("message.max.bytes"), None);
        assert_eq!(*followed.borrow(), got);
        publish(
            &mut publisher,
            &image,
            &[config("1", "log.retention.ms", None)],
        );
        assert_eq!(
            publisher.effective().get("log.retention.ms"),
            Some(&("1000".to_owned(), false))
        );
        assert_eq!(*followed.borrow(), *publisher.effective());
    }
}
