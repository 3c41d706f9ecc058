//! ListConfigResources (74): which config resources exist (KIP-1142). Version 0 is the former
//! ListClientMetricsResources and lists client-metrics subscriptions only; version 1 lists the
//! requested types (empty = all) in Kafka's fixed type order.

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::ListConfigResourcesResponse;
use kafka_protocol::protocol::StrBytes;

use gregor_publishers::MetadataImage;

use crate::controller::logic::configs::resource_type as rt;

/// The metric name v0 requests are also counted under (Kafka's name of API 74 before 4.1).
pub const LIST_CLIENT_METRICS_RESOURCES: &str = "ListClientMetricsResources";

/// The second request-metric name of a ListConfigResources request: v0 counts under
/// `ListClientMetricsResources` too, v1 only under `ListConfigResources`.
pub fn metric_name_also_counted(version: i16) -> Option<&'static str> {
    (version == 0).then_some(LIST_CLIENT_METRICS_RESOURCES)
}

/// Types each version supports, in Kafka's listing order.
fn supported(version: i16) -> &'static [i8] {
    if version == 0 {
        &[rt::CLIENT_METRICS]
    } else {
        &[
            rt::GROUP,
            rt::CLIENT_METRICS,
            rt::BROKER_LOGGER,
            rt::BROKER,
            rt::TOPIC,
        ]
    }
}

/// The response for a request of `version` asking for `requested` types, arriving on
/// `listener_name` (brokers are listed if they have an endpoint for it).
pub fn list_config_resources(
    image: &MetadataImage,
    version: i16,
    requested: &[i8],
    listener_name: &str,
) -> ListConfigResourcesResponse {
    let supported = supported(version);
    // v0 has no field: always "all its types".
    let requested: &[i8] = if version == 0 { &[] } else { requested };
    if requested.iter().any(|t| !supported.contains(t)) {
        return ListConfigResourcesResponse::default()
            .with_error_code(ResponseError::UnsupportedVersion.code());
    }
    let wanted = |t: i8| requested.is_empty() || requested.contains(&t);
    let mut out = Vec::new();
    let mut push = |name: &str, resource_type: i8| {
        out.push(
            ConfigResource::default()
                .with_resource_name(StrBytes::from_string(name.to_owned()))
                .with_resource_type(resource_type),
        );
    };
    let brokers: Vec<String> = image
        .cluster
        .brokers()
        .filter(|broker| broker.endpoint(listener_name).is_some())
        .map(|broker| broker.id.to_string())
        .collect();
    for &resource_type in supported.iter().filter(|t| wanted(**t)) {
        match resource_type {
            rt::GROUP | rt::CLIENT_METRICS => {
                for (name, _) in image.configs.iter_type(resource_type) {
                    push(name, resource_type);
                }
            }
            rt::BROKER_LOGGER | rt::BROKER => {
                for id in &brokers {
                    push(id, resource_type);
                }
            }
            rt::TOPIC => {
                for name in image.topics.names() {
                    push(name, resource_type);
                }
            }
            _ => {}
        }
    }
    ListConfigResourcesResponse::default().with_config_resources(out)
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use gregor_publishers::records::{ConfigRecord, MetadataRecord};

    use super::*;
    use crate::controller::logic::configs::testing::image_with;

    fn config(resource_type: i8, name: &str, key: &str) -> MetadataRecord {
        MetadataRecord::Config(ConfigRecord {
            resource_type,
            resource_name: name.into(),
            name: key.into(),
            value: Some("1000".into()),
        })
    }

    fn image() -> MetadataImage {
        image_with(&[
            config(rt::GROUP, "G1", "consumer.heartbeat.interval.ms"),
            config(rt::CLIENT_METRICS, "sub1", "interval.ms"),
            config(rt::TOPIC, "orders", "retention.ms"),
            config(rt::BROKER, "", "log.retention.ms"),
        ])
    }

    fn listed(response: &ListConfigResourcesResponse) -> Vec<(String, i8)> {
        response
            .config_resources
            .iter()
            .map(|r| (r.resource_name.to_string(), r.resource_type))
            .collect()
    }

    #[test]
    fn v1_empty_lists_everything_in_type_order() {
        let response = list_config_resources(&image(), 1, &[], "PLAINTEXT");
        assert_eq!(response.error_code, 0);
        assert_eq!(
            listed(&response),
            [
                ("G1".into(), 32),
                ("sub1".into(), 16),
                ("1".into(), 8),
                ("1".into(), 4),
                ("orders".into(), 2),
                ("orders3".into(), 2),
            ]
        );
        // Brokers without an endpoint on the request's listener are not listed.
        let other = list_config_resources(&image(), 1, &[4, 8], "OTHER");
        assert!(other.config_resources.is_empty());
    }

    #[test]
    fn v1_filters_and_duplicates() {
        let response = list_config_resources(&image(), 1, &[2, 32, 32], "PLAINTEXT");
        assert_eq!(
            listed(&response),
            [
                ("G1".into(), 32),
                ("orders".into(), 2),
                ("orders3".into(), 2)
            ]
        );
    }

    #[test]
    fn v1_unsupported_type_fails_the_whole_response() {
        for bad in [0, 1, 64] {
            let response = list_config_resources(&image(), 1, &[16, bad], "PLAINTEXT");
            assert_eq!(response.error_code, 35, "{bad}");
            assert!(response.config_resources.is_empty());
        }
    }

    #[test]
    fn v0_lists_client_metrics_only() {
        let response = list_config_resources(&image(), 0, &[2], "PLAINTEXT");
        assert_eq!(response.error_code, 0);
        assert_eq!(listed(&response), [("sub1".into(), 16)]);
    }

    #[test]
    fn dual_counting_names() {
        assert_eq!(
            metric_name_also_counted(0),
            Some("ListClientMetricsResources")
        );
        assert_eq!(metric_name_also_counted(1), None);
    }
}
