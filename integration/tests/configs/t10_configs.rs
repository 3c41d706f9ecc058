//! A group config on a group that does not exist, read back and listed; bad entries beside good
//! ones; validate_only; ListConfigResources v0 versus v1.

use gregor_integration::admin::s;
use gregor_integration::{GregorNode, KafkaConn};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    DescribeConfigsRequest, IncrementalAlterConfigsRequest, ListConfigResourcesRequest,
};

fn set(resource_type: i8, name: &str, key: &str, value: &str) -> AlterConfigsResource {
    AlterConfigsResource::default()
        .with_resource_type(resource_type)
        .with_resource_name(s(name))
        .with_configs(vec![AlterableConfig::default()
            .with_name(s(key))
            .with_config_operation(0)
            .with_value(Some(s(value)))])
}

#[tokio::test]
async fn group_configs_listing_and_validate_only() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();

    let dry = IncrementalAlterConfigsRequest::default()
        .with_validate_only(true)
        .with_resources(vec![set(
            32,
            "dry",
            "consumer.heartbeat.interval.ms",
            "6000",
        )]);
    let resp = conn.send(&dry, 1).await.unwrap();
    assert_eq!(resp.responses[0].error_code, 0);

    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        set(32, "G1", "consumer.heartbeat.interval.ms", "10000"),
        set(32, "G2", "consumer.heartbeat.interval.ms", "16000"),
        set(16, "sub1", "interval.ms", "1000"),
    ]);
    for version in [0, 1] {
        let resp = conn.send(&req, version).await.unwrap();
        let got: Vec<_> = resp
            .responses
            .iter()
            .map(|r| {
                (
                    r.error_code,
                    r.error_message.as_ref().map(|m| m.to_string()),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (0, None),
                (40, Some("consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms".into())),
                (0, None),
            ],
            "v{version}"
        );
    }

    let describe = DescribeConfigsRequest::default()
        .with_include_synonyms(true)
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(32)
            .with_resource_name(s("G1"))
            .with_configuration_keys(Some(vec![s(
                "consumer.heartbeat.interval.ms",
            )]))]);
    for version in 1..=4 {
        let resp = conn.send(&describe, version).await.unwrap();
        let config = &resp.results[0].configs[0];
        assert_eq!(
            (config.value.as_deref(), config.config_source),
            (Some("10000"), 8),
            "v{version}"
        );
    }

    let v1 = conn
        .send(&ListConfigResourcesRequest::default(), 1)
        .await
        .unwrap();
    let listed: Vec<_> = v1
        .config_resources
        .iter()
        .map(|r| (r.resource_name.to_string(), r.resource_type))
        .collect();
    assert_eq!(
        listed,
        [
            ("G1".to_owned(), 32),
            ("sub1".to_owned(), 16),
            ("1".to_owned(), 8),
            ("1".to_owned(), 4),
        ]
    );
    let v0 = conn
        .send(&ListConfigResourcesRequest::default(), 0)
        .await
        .unwrap();
    assert_eq!(v0.config_resources.len(), 1);
    assert_eq!(v0.config_resources[0].resource_name.as_str(), "sub1");
    // "dry" was validate_only: nothing was written.
    assert!(!listed.iter().any(|(name, _)| name == "dry"));
}
