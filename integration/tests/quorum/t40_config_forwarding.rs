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
use kafka_protocol::protocol::{Decodable, StrBytes};

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

/// Creates `topic` through `broker` once the cluster has formed.
async fn create_through(broker: &str, topic: &str) -> anyhow::Result<()> {
    wait_until(
        "create a topic through the broker",
        FORM_TIMEOUT,
        || async {
            let mut conn = KafkaConn::connect(broker).await?;
            let response = conn
                .send(&create_topics(vec![creatable(topic, 1, 1)], false), 7)
                .await?;
            Ok(matches!(response.topics[0].error_code, 0 | 36).then_some(()))
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_forwards_config_changes_and_applies_its_loggers() -> anyhow::Result<()> {
    let cluster = Cluster::start(1, 1)?;
    let broker = cluster.brokers[0].1.bootstrap();
    let broker_id = cluster.brokers[0].0;
    create_through(&broker, "forwarded").await?;

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

    retention_visible(&broker, "forwarded", "1234").await
}

/// Waits until `broker` describes `topic`'s retention.ms as `value`, which reaches its image
/// through the controller's log.
async fn retention_visible(broker: &str, topic: &str, value: &str) -> anyhow::Result<()> {
    let describe =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(TOPIC)
            .with_resource_name(StrBytes::from_string(topic.to_owned()))
            .with_configuration_keys(Some(vec![StrBytes::from_static_str("retention.ms")]))]);
    wait_until(
        "the topic config is visible on the broker",
        FORM_TIMEOUT,
        || async {
            let mut conn = KafkaConn::connect(broker).await?;
            let response = conn.send(&describe, 4).await?;
            let described = response.results[0]
                .configs
                .first()
                .and_then(|c| c.value.as_ref().map(|v| v.to_string()));
            Ok((described.as_deref() == Some(value)).then_some(()))
        },
    )
    .await
}

/// Through a broker that does not lead, a request of more resources than one chunk (read from
/// its frame) is split as a short one: the broker refuses its repeats and applies its loggers,
/// the controller decides the rest, and the answers come back in request order, as its parts'
/// do; applied, the topic's config reaches the broker's image.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_splits_a_long_config_change_as_a_short_one() -> anyhow::Result<()> {
    let cluster = Cluster::start(1, 1)?;
    let broker = cluster.brokers[0].1.bootstrap();
    let broker_id = cluster.brokers[0].0.to_string();
    create_through(&broker, "long").await?;
    let part = |tag: &str| {
        let mut resources = vec![
            resource(TOPIC, &format!("{tag}-again"), "retention.ms", "1"),
            resource(TOPIC, &format!("{tag}-copied"), "retention.ms", "1"),
            resource(TOPIC, &format!("{tag}-copied"), "retention.ms", "1"),
            resource(TOPIC, &format!("{tag}-again"), "retention.ms", "2"),
        ];
        resources.extend((0..700).map(|i| resource(TOPIC, &format!("{tag}-{i}"), "flush.ms", "1")));
        resources
    };
    let mut first = part("a");
    first.extend([
        resource(TOPIC, "long", "retention.ms", "4321"),
        resource(BROKER, &broker_id, "log.retention.ms", "5678"),
        resource(BROKER, "99", "log.retention.ms", "5678"),
        resource(BROKER_LOGGER, &broker_id, "gregor_node", "DEBUG"),
        resource(BROKER_LOGGER, &broker_id, "no.such.logger", "DEBUG"),
        resource(TOPIC, "long-gone", "retention.ms", "x"),
    ]);
    let second = part("b");
    let whole: Vec<AlterConfigsResource> = first.iter().chain(&second).cloned().collect();
    let answers =
        |response: IncrementalAlterConfigsResponse| -> Vec<(String, i16, Option<String>)> {
            response
                .responses
                .into_iter()
                .map(|r| {
                    (
                        r.resource_name.to_string(),
                        r.error_code,
                        r.error_message.map(|m| m.to_string()),
                    )
                })
                .collect()
        };
    let send = |resources: Vec<AlterConfigsResource>, validate_only: bool| {
        let broker = broker.clone();
        async move {
            let mut conn = KafkaConn::connect(&broker).await?;
            let request = IncrementalAlterConfigsRequest::default()
                .with_resources(resources)
                .with_validate_only(validate_only);
            anyhow::Ok(answers(conn.send(&request, 1).await?))
        }
    };
    let validated = send(whole.clone(), true).await?;
    let mut as_parts = send(first.clone(), true).await?;
    as_parts.extend(send(second.clone(), true).await?);
    assert_eq!(validated.len(), whole.len());
    if let Some(at) = (0..validated.len()).find(|i| validated[*i] != as_parts[*i]) {
        panic!(
            "resource {at}: {:?}, in parts {:?}",
            validated[at], as_parts[at]
        );
    }
    let named = |name: &str| {
        validated
            .iter()
            .filter(|a| a.0 == name)
            .map(|a| a.1)
            .collect::<Vec<_>>()
    };
    assert_eq!(named("a-again"), vec![42, 42]);
    assert_eq!(named("b-copied"), vec![42, 42]);
    assert_eq!(named("a-5"), vec![3], "decided by the controller");
    assert_eq!(named("long"), vec![0]);
    assert_eq!(named("99"), vec![42], "the broker checks its own id");

    let applied = send(whole, false).await?;
    assert_eq!(applied, validated);
    retention_visible(&broker, "long", "4321").await
}

/// 10 MB of IncrementalAlterConfigs naming distinct unknown topics through a broker that does
/// not lead: the broker hands the resources to the controller as they came and reads its
/// answer (twice the request: each topic's message) as it arrives, keeping a code each, so it
/// stays below four frames too; every topic is answered in order with its own message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_config_change_through_a_broker_stays_within_four_frames() -> anyhow::Result<()> {
    use gregor_integration::frames::{alter_configs_of_distinct_topics, assert_each_topic_unknown};
    const FRAME: usize = 10_000_000;
    let cluster = Cluster::start(1, 1)?;
    let node = &cluster.brokers[0].1;
    let broker = node.bootstrap();
    create_through(&broker, "ready").await?;
    let count = (FRAME - 40) / 21;
    let frame = alter_configs_of_distinct_topics(count, false);
    let mut conn = KafkaConn::connect(&broker).await?;
    conn.set_timeout(std::time::Duration::from_secs(120));
    node.reset_peak_memory()?;
    let before = node.resident_memory()?;
    conn.write_raw(&frame).await?;
    let mut answer = conn
        .read_frame()
        .await?
        .ok_or_else(|| anyhow::anyhow!("no answer"))?;
    let after = node.resident_memory()?;
    let growth = after.peak.saturating_sub(before.current);
    assert!(
        growth < 4 * FRAME as u64,
        "a {}-byte request grew the broker's peak resident memory by {growth} bytes",
        frame.len()
    );
    let header = kafka_protocol::messages::ResponseHeader::decode(&mut answer, 1)?;
    assert_eq!(header.correlation_id, 42);
    assert_each_topic_unknown(answer, count, false);
    Ok(())
}
