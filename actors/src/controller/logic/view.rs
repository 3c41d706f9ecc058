//! The read-only view of the metadata that the pure controller logic needs.
//!
//! The controller actor passes its working `MetadataImage`; the logic only asks these questions
//! of it, which keeps the decisions testable with a tiny fake and independent of how the image
//! stores topics.

use uuid::Uuid;

/// One registered broker, as the replica placer and ISR computation see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerView {
    /// Broker id.
    pub id: i32,
    /// Rack, if configured.
    pub rack: Option<String>,
    /// Whether the broker is fenced.
    pub fenced: bool,
    /// Whether the broker is in controlled shutdown.
    pub in_controlled_shutdown: bool,
}

impl BrokerView {
    /// Kafka's `isActive`: registered, unfenced and not shutting down; only such brokers enter
    /// a new partition's ISR.
    pub fn is_active(&self) -> bool {
        !self.fenced && !self.in_controlled_shutdown
    }
}

/// What the topic mutations read from the current metadata.
pub trait MetadataView {
    /// The id of the topic with this exact name.
    fn topic_id(&self, name: &str) -> Option<Uuid>;
    /// The name of the topic with this id.
    fn topic_name(&self, id: &Uuid) -> Option<String>;
    /// Number of partitions of the topic (0 if unknown).
    fn partition_count(&self, id: &Uuid) -> usize;
    /// Replicas of one partition of the topic.
    fn replicas(&self, id: &Uuid, partition: i32) -> Option<Vec<i32>>;
    /// An existing topic whose name differs from `name` only by '.' versus '_' (or equals it),
    /// if any; when several do, the smallest name. See [`super::topic_name::collides`].
    fn colliding_topic(&self, name: &str) -> Option<String>;
    /// Every registered broker, by ascending id.
    fn brokers(&self) -> Vec<BrokerView>;
}

impl MetadataView for gregor_publishers::image::MetadataImage {
    fn topic_id(&self, name: &str) -> Option<Uuid> {
        self.topics.get_by_name(name).map(|topic| topic.id)
    }

    fn topic_name(&self, id: &Uuid) -> Option<String> {
        self.topics
            .get_by_id(id)
            .map(|topic| topic.name.to_string())
    }

    fn partition_count(&self, id: &Uuid) -> usize {
        self.topics
            .get_by_id(id)
            .map_or(0, |topic| topic.partition_count())
    }

    fn replicas(&self, id: &Uuid, partition: i32) -> Option<Vec<i32>> {
        let topic = self.topics.get_by_id(id)?;
        Some(topic.partition(partition)?.replicas.as_slice().to_vec())
    }

    fn colliding_topic(&self, name: &str) -> Option<String> {
        // The image indexes names containing '.' or '_' by their collision key: O(log n).
        self.topics.colliding_names(name).next().map(str::to_owned)
    }

    fn brokers(&self) -> Vec<BrokerView> {
        self.cluster
            .brokers()
            .map(|broker| BrokerView {
                id: broker.id,
                rack: broker.rack.clone(),
                fenced: broker.fenced,
                in_controlled_shutdown: broker.in_controlled_shutdown,
            })
            .collect()
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use std::sync::Arc;

    use gregor_publishers::image::{MetadataImage, Provenance};
    use gregor_publishers::records::{MetadataRecord, RegisterBrokerRecord};
    use gregor_publishers::MetadataDelta;
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::CreateTopicsRequest;

    use super::*;
    use crate::controller::logic::testing::{topic_name, with_ctx};
    use crate::controller::logic::{create_topics, TopicDefaults};

    fn broker(id: i32, fenced: bool) -> MetadataRecord {
        MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: id,
            incarnation_id: Uuid::from_u128(id as u128),
            broker_epoch: 1,
            endpoints: vec![],
            features: vec![],
            rack: None,
            fenced,
            in_controlled_shutdown: false,
            log_dirs: vec![],
        })
    }

    fn replay(base: &MetadataImage, records: &[MetadataRecord]) -> MetadataImage {
        let mut delta = MetadataDelta::new(Arc::new(base.clone()));
        for record in records {
            delta.replay(record).expect("replays");
        }
        delta.apply(Provenance::default())
    }

    /// The records CreateTopics returns replay into an image that the view then reads back.
    #[test]
    fn image_round_trip() {
        let image = replay(
            &MetadataImage::empty(),
            &[broker(1, false), broker(2, true)],
        );
        assert_eq!(
            image
                .brokers()
                .iter()
                .map(|b| (b.id, b.fenced))
                .collect::<Vec<_>>(),
            vec![(1, false), (2, true)]
        );
        let request = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(topic_name("a.b"))
            .with_num_partitions(2)
            .with_replication_factor(2)]);
        let result =
            with_ctx(|ctx| create_topics(&image, &request, 7, &TopicDefaults::default(), ctx));
        assert_eq!(result.response.topics[0].error_code, 0);
        let image = replay(&image, &result.records);
        let id = image.topic_id("a.b").expect("created");
        assert_eq!(image.topic_name(&id).as_deref(), Some("a.b"));
        assert_eq!(image.partition_count(&id), 2);
        // Broker 2 is fenced: it is a follower, never the leader, and not in the ISR.
        assert_eq!(image.replicas(&id, 0), Some(vec![1, 2]));
        assert_eq!(image.colliding_topic("a_b").as_deref(), Some("a.b"));
        assert_eq!(image.colliding_topic("a-b"), None);
    }
}
