//! The images the publisher benches build: `partitions` partitions, 10 per topic, replication
//! factor 3 over brokers 1-3, one log dir per broker (directories set), topic names
//! `topic-0000000`.. and well-spread topic ids. Shared by `image_delta` and `quota_callback`.
#![allow(dead_code)]

use std::sync::Arc;

use gregor_publishers::records::{
    Endpoint, FeatureLevelRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord,
    METADATA_VERSION_FEATURE,
};
use gregor_publishers::{MetadataDelta, MetadataImage, MetadataRecord, Provenance};
use uuid::Uuid;

pub(crate) const BROKERS: [i32; 3] = [1, 2, 3];
pub(crate) const PARTITIONS_PER_TOPIC: usize = 10;

/// A deterministic random-looking topic id (splitmix64), so hash maps see real id spread.
pub(crate) fn topic_id(index: usize) -> Uuid {
    let mix = |mut z: u64| {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let seed = (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    Uuid::from_u64_pair(mix(seed), mix(seed ^ 0xdead_beef))
}

pub(crate) fn log_dir(broker: i32) -> Uuid {
    Uuid::from_u128(0xd1_0000 + broker as u128)
}

pub(crate) fn replicas_of(topic: usize, partition: usize) -> Vec<i32> {
    let first = (topic + partition) % BROKERS.len();
    (0..3)
        .map(|i| BROKERS[(first + i) % BROKERS.len()])
        .collect()
}

pub(crate) fn topic_records(index: usize, out: &mut Vec<MetadataRecord>) {
    let topic_id = topic_id(index);
    out.push(MetadataRecord::Topic(TopicRecord {
        name: format!("topic-{index:07}"),
        topic_id,
    }));
    for partition in 0..PARTITIONS_PER_TOPIC {
        let replicas = replicas_of(index, partition);
        out.push(MetadataRecord::Partition(PartitionRecord {
            partition_id: partition as i32,
            topic_id,
            isr: replicas.clone(),
            directories: replicas.iter().map(|b| log_dir(*b)).collect(),
            leader: replicas[0],
            replicas,
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader_recovery_state: 0,
            leader_epoch: 0,
            partition_epoch: 0,
        }));
    }
}

/// The snapshot of a cluster with `partitions` partitions.
pub(crate) fn snapshot_records(partitions: usize) -> Vec<MetadataRecord> {
    let topics = partitions / PARTITIONS_PER_TOPIC;
    let mut out = Vec::with_capacity(partitions + topics + 8);
    out.push(MetadataRecord::FeatureLevel(FeatureLevelRecord {
        name: METADATA_VERSION_FEATURE.into(),
        feature_level: 22,
    }));
    for broker in BROKERS {
        out.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: broker,
            incarnation_id: Uuid::from_u128(broker as u128),
            broker_epoch: 100 + i64::from(broker),
            endpoints: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: format!("broker{broker}"),
                port: 9092,
                security_protocol: 0,
            }],
            features: vec![],
            rack: None,
            fenced: false,
            in_controlled_shutdown: false,
            log_dirs: vec![log_dir(broker)],
        }));
    }
    for topic in 0..topics {
        topic_records(topic, &mut out);
    }
    out
}

pub(crate) fn load(records: &[MetadataRecord]) -> MetadataImage {
    let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
    for record in records {
        if let Err(error) = delta.replay(record) {
            panic!("snapshot does not replay: {error}");
        }
    }
    delta.apply(Provenance::default())
}

pub(crate) fn apply(base: &Arc<MetadataImage>, records: &[MetadataRecord]) -> MetadataImage {
    let mut delta = MetadataDelta::new(Arc::clone(base));
    for record in records {
        if let Err(error) = delta.replay(record) {
            panic!("delta does not replay: {error}");
        }
    }
    delta.apply(Provenance::default())
}
