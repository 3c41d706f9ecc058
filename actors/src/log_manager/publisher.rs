//! [`LogPublisher`]: makes the log manager follow the metadata image.

use std::collections::BTreeMap;
use std::sync::Arc;

use gregor_log::checkpoint::TopicPartition;
use gregor_log::config::LogConfig;
use gregor_publishers::image::topics::TopicImage;
use gregor_publishers::{
    LoaderManifest, MetadataDelta, MetadataImage, MetadataPublisher, PublishError,
};

use super::{LogChanges, LogManager};
use crate::controller::logic::configs::broker::{unit_synonym_ms, TOPIC_SYNONYMS, UNIT_SYNONYMS};
use crate::controller::logic::configs::resource_type::{BROKER, TOPIC};
use crate::controller::logic::topic_name::CLUSTER_METADATA_TOPIC_NAME;

/// The topic-level values of this node's static broker configs (`log.segment.bytes` becomes
/// `segment.bytes`...), the bottom of the precedence: topic config, then the dynamic broker
/// default of this node, then the cluster-wide one, then these.
#[derive(Debug, Clone, Default)]
pub struct StaticLogDefaults(pub Vec<(String, String)>);

impl StaticLogDefaults {
    /// From `(broker key, value)` pairs; keys that are not topic-config synonyms are ignored.
    /// A unit synonym (`log.retention.hours`...) counts only while the keys before it are
    /// unset, as Kafka reads `log.retention.ms`, else `.minutes`, else `.hours`.
    pub fn from_broker_configs<'a>(configs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let given: BTreeMap<&str, &str> = configs.into_iter().collect();
        // Lowest precedence first: a later pair overrides an earlier one when applied.
        let units = UNIT_SYNONYMS.iter().rev().filter_map(|unit| {
            let raw = given.get(unit.name)?;
            match unit_synonym_ms(unit.name, raw)? {
                Ok((topic, ms)) => Some((topic.to_owned(), ms.to_string())),
                Err(error) => {
                    tracing::warn!(%error, "ignoring a static log config");
                    None
                }
            }
        });
        let primaries = TOPIC_SYNONYMS.iter().filter_map(|(broker, topic)| {
            given
                .get(broker)
                .map(|value| ((*topic).to_owned(), (*value).to_owned()))
        });
        StaticLogDefaults(units.chain(primaries).collect())
    }
}

/// The effective log config of `topic` on node `node` and its `min.insync.replicas`.
pub fn effective_log_config(
    image: &MetadataImage,
    statics: &StaticLogDefaults,
    node: &str,
    topic: &str,
) -> (LogConfig, i32) {
    let mut config = LogConfig::default();
    let mut min_insync_replicas = 1;
    let mut apply = |key: &str, value: &str| {
        if key == "min.insync.replicas" {
            if let Ok(v) = value.trim().parse::<i32>() {
                min_insync_replicas = v;
            }
            return;
        }
        // Values in the image were validated by the controller; a stale one is skipped.
        if let Err(error) = config.apply(key, value) {
            tracing::warn!(topic, %error, "ignoring a config value the log cannot use");
        }
    };
    for (key, value) in &statics.0 {
        apply(key, value);
    }
    for resource in ["", node] {
        if let Some(configs) = image.configs.get(BROKER, resource) {
            for (key, value) in configs.iter() {
                if let Some((_, topic_key)) = TOPIC_SYNONYMS.iter().find(|(b, _)| *b == key) {
                    apply(topic_key, value);
                }
            }
        }
    }
    if let Some(configs) = image.configs.get(TOPIC, topic) {
        for (key, value) in configs.iter() {
            apply(key, value);
        }
    }
    (config, min_insync_replicas)
}

/// Opens the logs of partitions this node hosts (replicas containing its id), deletes those of
/// deleted topics or of partitions moved away, and applies config changes.
pub struct LogPublisher {
    manager: Arc<LogManager>,
    node_id: i32,
    node: String,
    statics: StaticLogDefaults,
    /// Whether the logs on disk were checked against an image yet (see `on_metadata_update`).
    strays_checked: bool,
}

impl LogPublisher {
    /// A publisher for the node's log manager. Install it once the node's image has caught up
    /// with the quorum: its first image decides which logs on disk are strays.
    pub fn new(manager: Arc<LogManager>, node_id: i32, statics: StaticLogDefaults) -> Self {
        LogPublisher {
            manager,
            node_id,
            node: node_id.to_string(),
            statics,
            strays_checked: false,
        }
    }

    fn sync_topic(&self, changes: &mut LogChanges<'_>, image: &MetadataImage, topic: &TopicImage) {
        let (config, min_isr) = effective_log_config(image, &self.statics, &self.node, &topic.name);
        let config = Arc::new(config);
        for (partition, registration) in topic.partitions() {
            let tp = TopicPartition::new(topic.name.to_string(), partition);
            if registration.replicas.as_slice().contains(&self.node_id) {
                changes.ensure(tp, topic.id, &config, min_isr);
            } else if self.manager.partition(&topic.name, partition).is_some() {
                changes.remove(&tp);
            }
        }
    }

    fn sync_all(&self, changes: &mut LogChanges<'_>, image: &MetadataImage) {
        for topic in image.topics.iter() {
            self.sync_topic(changes, image, topic);
        }
        for (tp, topic_id) in self.manager.hosted() {
            if hosting_topic_id(image, self.node_id, &tp) != Some(topic_id) {
                changes.remove(&tp);
            }
        }
    }
}

/// The id of the topic whose partition `tp` `image` places on node `node_id`, if it does.
fn hosting_topic_id(
    image: &MetadataImage,
    node_id: i32,
    tp: &TopicPartition,
) -> Option<uuid::Uuid> {
    let topic = image.topics.get_by_name(&tp.topic)?;
    let partition = topic.partition(tp.partition)?;
    partition
        .replicas
        .as_slice()
        .contains(&node_id)
        .then_some(topic.id)
}

impl MetadataPublisher for LogPublisher {
    fn name(&self) -> &str {
        "log-manager"
    }

    /// Requests reading this state wait for the loader's published offset
    /// (`HandlerContext::publishers_caught_up`), so a write's answer need not.
    fn holds_the_answer(&self) -> bool {
        false
    }

    fn on_metadata_update(
        &mut self,
        delta: &MetadataDelta,
        image: &Arc<MetadataImage>,
        manifest: &LoaderManifest,
    ) -> Result<(), PublishError> {
        let broker_defaults_changed = delta.configs_delta().is_some_and(|c| {
            c.changed_resources()
                .any(|(t, name, _)| t == BROKER && (name.is_empty() || name == self.node))
        });
        let mut changes = self.manager.changes();
        if !self.strays_checked {
            changes.hosted_before_start();
        }
        if matches!(manifest, LoaderManifest::Snapshot { .. }) || broker_defaults_changed {
            self.sync_all(&mut changes, image);
            if !self.strays_checked {
                // Kafka's stray logs at start-up: a log on disk of a topic the image no longer
                // has, or of a partition no longer assigned here, was left by changes made
                // while this node was down.
                self.strays_checked = true;
                let image = Arc::clone(image);
                let node_id = self.node_id;
                changes.discard_strays(Arc::new(move |tp: &TopicPartition| {
                    // The metadata log lives in the first log dir unless moved elsewhere.
                    tp.topic == CLUSTER_METADATA_TOPIC_NAME
                        || hosting_topic_id(&image, node_id, tp).is_some()
                }));
            }
            changes.send();
            return Ok(());
        }
        if let Some(topics) = delta.topics_delta() {
            // A deleted topic's partitions are those of the image before the delta: only
            // they are looked at, so a deletion costs its own partitions, not every log.
            for (id, name) in topics.deleted_topics() {
                let Some(deleted) = delta.base().topics.get_by_id(&id) else {
                    continue;
                };
                for (partition, _) in deleted.partitions() {
                    let hosted = self.manager.partition(name, partition);
                    if hosted.is_some_and(|state| state.topic_id == id) {
                        changes.remove(&TopicPartition::new(name.to_owned(), partition));
                    }
                }
            }
            for changed in topics.changed_topics() {
                if let Some(topic) = image.topics.get_by_id(&changed.id()) {
                    self.sync_topic(&mut changes, image, topic);
                }
            }
        }
        if let Some(configs) = delta.configs_delta() {
            for (resource_type, name, _) in configs.changed_resources() {
                if resource_type == TOPIC {
                    if let Some(topic) = image.topics.get_by_name(name) {
                        self.sync_topic(&mut changes, image, topic);
                    }
                }
            }
        }
        changes.send();
        Ok(())
    }
}
