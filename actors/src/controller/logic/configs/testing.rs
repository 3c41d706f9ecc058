//! Images for the config tests: one registered broker (id 1), topics `orders` and `orders3`,
//! plus whatever records the test adds.

use std::sync::Arc;

use gregor_publishers::records::{
    Endpoint, MetadataRecord, RegisterBrokerRecord, TopicRecord, UnfenceBrokerRecord,
};
use gregor_publishers::{MetadataDelta, MetadataImage};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

pub(crate) fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// An IncrementalAlterConfigs resource with (key, op, value) configs.
pub(crate) fn resource(
    resource_type: i8,
    name: &str,
    ops: &[(&str, i8, Option<&str>)],
) -> AlterConfigsResource {
    AlterConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(s(name))
        .with_configs(
            ops.iter()
                .map(|(key, op, value)| {
                    AlterableConfig::default()
                        .with_name(s(key))
                        .with_config_operation(*op)
                        .with_value(value.map(s))
                })
                .collect(),
        )
}

pub(crate) fn base_records() -> Vec<MetadataRecord> {
    vec![
        MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: 1,
            incarnation_id: Uuid::from_u128(9),
            broker_epoch: 1,
            endpoints: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
                security_protocol: 0,
            }],
            features: vec![],
            rack: None,
            fenced: true,
            in_controlled_shutdown: false,
            log_dirs: vec![],
        }),
        MetadataRecord::UnfenceBroker(UnfenceBrokerRecord { id: 1, epoch: 1 }),
        MetadataRecord::Topic(TopicRecord {
            name: "orders".into(),
            topic_id: Uuid::from_u128(1),
        }),
        MetadataRecord::Topic(TopicRecord {
            name: "orders3".into(),
            topic_id: Uuid::from_u128(3),
        }),
    ]
}

/// `image` with `records` applied.
#[allow(clippy::expect_used)]
pub(crate) fn apply(image: &MetadataImage, records: &[MetadataRecord]) -> MetadataImage {
    let mut delta = MetadataDelta::new(Arc::new(image.clone()));
    for record in records {
        delta.replay(record).expect("test records apply");
    }
    delta.apply(image.provenance)
}

/// The base image plus `extra`.
pub(crate) fn image_with(extra: &[MetadataRecord]) -> MetadataImage {
    let base = apply(&MetadataImage::empty(), &base_records());
    apply(&base, extra)
}
