//! [`GroupPublisher`]: tells the group coordinator which `__consumer_offsets` partitions this
//! node leads, from each new metadata image, and which topics were deleted.

use std::collections::HashMap;
use std::sync::Arc;

use actix::Addr;
use gregor_publishers::{
    LoaderManifest, MetadataDelta, MetadataImage, MetadataPublisher, PublishError,
};

use super::actor::{GroupCoordinator, Leadership, TopicsDeleted};
use super::OFFSETS_TOPIC;

/// Follows the leadership of `__consumer_offsets` on this node. Install it after the log
/// manager's publisher, so a partition's log is being opened when its load starts.
pub struct GroupPublisher {
    coordinator: Addr<GroupCoordinator>,
    node_id: i32,
    last: Option<(HashMap<i32, i32>, i32)>,
}

impl GroupPublisher {
    pub fn new(coordinator: Addr<GroupCoordinator>, node_id: i32) -> Self {
        GroupPublisher {
            coordinator,
            node_id,
            last: None,
        }
    }
}

impl MetadataPublisher for GroupPublisher {
    fn name(&self) -> &str {
        "group-coordinator"
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
        _manifest: &LoaderManifest,
    ) -> Result<(), PublishError> {
        // Kafka's `BrokerMetadataPublisher`: the coordinator drops the offsets of deleted topics.
        if let Some(topics) = delta.topics_delta() {
            let deleted: Vec<String> = topics
                .deleted_topics()
                .map(|(_, name)| name.to_owned())
                .collect();
            if !deleted.is_empty() {
                self.coordinator.do_send(TopicsDeleted { topics: deleted });
            }
        }
        // One map lookup and at most `offsets.topic.num.partitions` entries per image.
        let (led, count) = match image.topics.get_by_name(OFFSETS_TOPIC) {
            Some(topic) => {
                let led = topic
                    .partitions()
                    .filter(|(_, p)| p.leader == self.node_id)
                    .map(|(index, p)| (index, p.leader_epoch))
                    .collect();
                (led, topic.partitions().count() as i32)
            }
            None => (HashMap::new(), 0),
        };
        if self.last.as_ref() != Some(&(led.clone(), count)) {
            self.coordinator.do_send(Leadership {
                led: led.clone(),
                partitions: count,
            });
            self.last = Some((led, count));
        }
        Ok(())
    }
}
