//! The largest requests of the APIs served from the image (DescribeConfigs,
//! DescribeClientQuotas, ListConfigResources): each must finish, O(n log n) or better in the
//! request's size. See `controller/logic/large_requests.rs` for the guard and the report.
#![allow(clippy::expect_used)]

use std::sync::Arc;

use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::{DescribeClientQuotasRequest, DescribeConfigsRequest};
use kafka_protocol::protocol::StrBytes;

use super::configs::{describe_configs, list_config_resources, ConfigSupport, LogLevels};
use crate::controller::logic::configs::testing::image_with;
use crate::controller::logic::large_requests::{finishes, LARGE};

fn s(value: impl Into<String>) -> StrBytes {
    StrBytes::from_string(value.into())
}

/// No loggers: these requests never name BROKER_LOGGER resources.
struct NoLoggers;

impl LogLevels for NoLoggers {
    fn loggers(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    fn set_level(&self, _: &str, _: &str) -> Result<(), String> {
        Err("no loggers".into())
    }
    fn unset_level(&self, _: &str) -> Result<(), String> {
        Err("no loggers".into())
    }
}

#[test]
fn describe_configs_many_resources_and_keys() {
    finishes("DescribeConfigs", LARGE, |n| {
        let image = image_with(&[]);
        let support = ConfigSupport {
            static_configs: Arc::new(Vec::new()),
            static_log_configs: Arc::default(),
            group_defaults: Default::default(),
            loggers: Arc::new(NoLoggers),
        };
        let mut resources: Vec<DescribeConfigsResource> = (0..n)
            .map(|i| {
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s(format!("missing-{i}")))
            })
            .collect();
        // n keys, one of them real: the filter is a set lookup per config, not a scan.
        let mut keys: Vec<StrBytes> = (0..n).map(|i| s(format!("k{i}"))).collect();
        keys.push(s("retention.ms"));
        resources.push(
            DescribeConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_configuration_keys(Some(keys)),
        );
        let request = DescribeConfigsRequest::default().with_resources(resources);
        let response = describe_configs(&image, &request, 1, &support);
        assert_eq!(response.results.len(), n + 1);
        let orders = &response.results[n];
        assert_eq!(orders.error_code, 0);
        assert_eq!(orders.configs.len(), 1);
        assert_eq!(orders.configs[0].name.as_str(), "retention.ms");
    });
}

#[test]
fn describe_client_quotas_many_filter_components() {
    finishes("DescribeClientQuotas", LARGE, |n| {
        let image = image_with(&[]);
        let request = DescribeClientQuotasRequest::default().with_components(
            (0..n)
                .map(|i| {
                    ComponentData::default()
                        .with_entity_type(s(format!("type-{i}")))
                        .with_match_type(2)
                })
                .collect(),
        );
        let error = super::client_quotas::describe(&image.client_quotas, &request)
            .expect_err("unknown types are refused");
        assert_eq!(error.message, "Unsupported entity type type-0");
    });
}

#[test]
fn list_config_resources_many_types() {
    finishes("ListConfigResources", LARGE, |n| {
        let image = image_with(&[]);
        let requested: Vec<i8> = (0..n).map(|_| 2).collect();
        let response = list_config_resources(&image, 1, &requested, "PLAINTEXT");
        assert_eq!(response.error_code, 0);
        assert_eq!(response.config_resources.len(), 2);
    });
}

#[test]
fn describe_user_scram_credentials_many_users() {
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use kafka_protocol::messages::DescribeUserScramCredentialsRequest;

    finishes("DescribeUserScramCredentials", LARGE, |n| {
        // n unknown users, the first named again at the end: repeats are found in a map.
        let mut users: Vec<UserName> = (0..n)
            .map(|i| UserName::default().with_name(s(format!("user-{i}"))))
            .collect();
        users.push(UserName::default().with_name(s("user-0")));
        let request = DescribeUserScramCredentialsRequest::default().with_users(Some(users));
        let response = super::scram::describe_credentials(&Default::default(), &request);
        assert_eq!(response.results.len(), n);
        assert_eq!(response.results[0].error_code, 92);
        assert!(response.results[1..].iter().all(|r| r.error_code == 91));
    });
}
