//! AlterClientQuotas and DescribeClientQuotas at both versions over the wire.

use gregor_integration::admin::s;
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};

use super::{connect, quota_entry, start_node};

fn describe_user(name: &str) -> DescribeClientQuotasRequest {
    DescribeClientQuotasRequest::default().with_components(vec![ComponentData::default()
        .with_entity_type(s("user"))
        .with_match_type(0)
        .with_match(Some(s(name)))])
}

#[tokio::test]
async fn alter_then_describe_every_version() {
    let node = start_node();
    let mut conn = connect(&node).await;
    for version in 0..=1 {
        let user = format!("alice-{version}");
        let request = AlterClientQuotasRequest::default().with_entries(vec![
            quota_entry(
                &[("user", Some(&user)), ("client-id", Some("app"))],
                &[
                    ("producer_byte_rate", 1024.0, false),
                    ("request_percentage", 12.5, false),
                ],
            ),
            quota_entry(
                &[("user", Some(&user))],
                &[("producer_byte_rate", 1.5, false)],
            ),
        ]);
        let response = conn
            .send::<AlterClientQuotasRequest>(&request, version)
            .await
            .unwrap();
        let outcomes: Vec<_> = response
            .entries
            .iter()
            .map(|e| {
                (
                    e.error_code,
                    e.error_message.as_ref().map(|m| m.to_string()),
                )
            })
            .collect();
        assert_eq!(
            outcomes,
            vec![
                (0, None),
                (
                    42,
                    Some("producer_byte_rate cannot be a fractional value.".to_owned())
                )
            ]
        );
        let response = conn
            .send::<DescribeClientQuotasRequest>(&describe_user(&user), version)
            .await
            .unwrap();
        assert_eq!(response.error_code, 0);
        // Null on success, as Kafka's `fromQuotaEntities` sets it.
        assert_eq!(response.error_message, None);
        let entries = response.entries.unwrap();
        assert_eq!(entries.len(), 1);
        let mut values: Vec<(String, f64)> = entries[0]
            .values
            .iter()
            .map(|v| (v.key.to_string(), v.value))
            .collect();
        values.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            values,
            vec![
                ("producer_byte_rate".to_owned(), 1024.0),
                ("request_percentage".to_owned(), 12.5)
            ]
        );
    }
    // A whole-request filter error.
    let bad = DescribeClientQuotasRequest::default()
        .with_components(vec![ComponentData::default()
            .with_entity_type(s("group"))
            .with_match_type(2)]);
    let response = conn
        .send::<DescribeClientQuotasRequest>(&bad, 1)
        .await
        .unwrap();
    assert_eq!(response.error_code, 35);
    assert_eq!(
        response.error_message.as_deref().map(|m| m.to_string()),
        Some("Unsupported entity type group".to_owned())
    );
    assert!(response.entries.is_none());
}

/// §3.7 case 12: AlterClientQuotas is served on the controller listener too.
#[tokio::test]
async fn alter_on_the_controller_listener() {
    let node = start_node();
    let controller = node
        .addrs()
        .controller
        .clone()
        .expect("a controller listener");
    let mut conn = gregor_integration::KafkaConn::connect(&controller)
        .await
        .unwrap();
    super::set_mutation_rate(&mut conn, "ThrottledPrincipal", 2.0).await;
    let mut client = connect(&node).await;
    let response = client
        .send::<DescribeClientQuotasRequest>(&describe_user("ThrottledPrincipal"), 1)
        .await
        .unwrap();
    let entries = response.entries.unwrap();
    assert_eq!(entries[0].values[0].value, 2.0);
}
