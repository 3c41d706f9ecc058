//! A broker that does not lead the quorum splits a config change as Kafka's brokers do: its own
//! BROKER_LOGGER resources apply on it, everything else goes to the active controller, which
//! accepts a BROKER resource naming the forwarding broker.

use gregor_integration::admin::{creatable, create_topics};
use gregor_integration::{wait_until, KafkaConn};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    DescribeConfigsRequest, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use crate::{Cluster, FORM_TIMEOUT};

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const SET: i8 = 0;

fn resource(kind: i8, name: &str, key: &str, value: &str) -> AlterConfigsResource {
    AlterConfigsResource::default()
        .with_resource_type(kind)
        .with_resource_name(StrBytes::from_string(name.to_owned()))
        .with_configs(vec![AlterableConfig::default()
            .with_name(StrBytes::from_string(key.to_owned()))
            .with_config_operation(SET)
            .with_value(Some(StrBytes::from_string(value.to_owned())))])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_forwards_config_changes_and_applies_its_loggers() -> anyhow::Result<()> {
    let cluster = Cluster::start(1, 1)?;
    let broker = cluster.brokers[0].1.bootstrap();
    let broker_id = cluster.brokers[0].0;
    wait_until(
        "create a topic through the broker",
        FORM_TIMEOUT,
        || async {
            let mut conn = KafkaConn::connect(&broker).await?;
            let response = conn
                .send(&create_topics(vec![creatable("forwarded", 1, 1)], false), 7)
                .await?;
            Ok(matches!(response.topics[0].error_code, 0 | 36).then_some(()))
        },
    )
    .await?;

    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        resource(TOPIC, "forwarded", "retention.ms", "1234"),
        resource(BROKER, &broker_id.to_string(), "log.retention.ms", "5678"),
        resource(
            BROKER_LOGGER,
            &broker_id.to_string(),
            "gregor_node",
            "DEBUG",
        ),
    ]);
    let mut conn = KafkaConn::connect(&broker).await?;
    let response: IncrementalAlterConfigsResponse = conn.send(&request, 1).await?;
    let codes: Vec<(i16, Option<String>)> = response
        .responses
        .iter()
        .map(|r| {
            (
                r.error_code,
                r.error_message.as_ref().map(|m| m.to_string()),
            )
        })
        .collect();
    assert_eq!(codes, vec![(0, None), (0, None), (0, None)]);

    // The topic config reached the broker's image through the controller's log.
    let describe =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(TOPIC)
            .with_resource_name(StrBytes::from_static_str("forwarded"))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str("retention.ms")]))]);
    wait_until(
        "the topic config is visible on the broker",
        FORM_TIMEOUT,
        || async {
            let mut conn = KafkaConn::connect(&broker).await?;
            let response = conn.send(&describe, 4).await?;
            let value = response.results[0]
                .configs
                .first()
                .and_then(|c| c.value.as_ref().map(|v| v.to_string()));
            Ok((value.as_deref() == Some("1234")).then_some(()))
        },
    )
    .await?;
    Ok(())
}
