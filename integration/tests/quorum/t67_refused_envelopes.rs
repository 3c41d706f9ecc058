//! A controller that refuses a broker's envelopes (its principal lost CLUSTER_ACTION on the
//! cluster after the broker's forwarding connection opened): the client of each forwarded API
//! gets Kafka's answer for it, UNKNOWN_SERVER_ERROR in every part with a message naming the
//! controller's refusal, instead of NOT_CONTROLLER, which sent clients looking for a controller
//! forever. Raw forwards (CreateTopics, CreatePartitions, DeleteTopics, DescribeQuorum,
//! AlterClientQuotas, CreateAcls, ListPartitionReassignments) and the typed ones of
//! IncrementalAlterConfigs and AlterConfigs alike.

use gregor_integration::admin::acl::{ALL, ALLOW, CLUSTER, CLUSTER_ACTION, DENY, LITERAL};
use gregor_integration::admin::{
    anonymous_acl, creatable, create_partitions, create_topics, default_user_quota,
    delete_topics_by_name, metadata, s, topic_name, topics_of,
};
use gregor_integration::{wait_until, KafkaConn};
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    alter_configs_request, AlterClientQuotasRequest, AlterConfigsRequest, CreateAclsRequest,
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeAclsRequest,
    DescribeQuorumRequest, IncrementalAlterConfigsRequest, ListPartitionReassignmentsRequest,
    MetadataRequest,
};

use crate::t65_authenticated_controller_listener::{
    jaas, secure_overrides, start_secure_broker, CONTROLLER_USER,
};
use crate::{Cluster, FORM_TIMEOUT};

const UNKNOWN_SERVER_ERROR: i16 = -1;
const REFUSAL: &str = "refused the request this broker forwarded (CLUSTER_AUTHORIZATION_FAILED)";

async fn create_through(broker: &str, topic: &str) -> anyhow::Result<(i16, Option<String>)> {
    let mut conn = KafkaConn::connect(broker).await?;
    let request = create_topics(vec![creatable(topic, 1, 1)], false);
    let response = conn.send::<CreateTopicsRequest>(&request, 7).await?;
    let topic = &response.topics[0];
    Ok((
        topic.error_code,
        topic.error_message.as_ref().map(|m| m.to_string()),
    ))
}

fn refused(answer: (i16, Option<String>)) -> bool {
    answer.0 == UNKNOWN_SERVER_ERROR && answer.1.as_deref().is_some_and(|m| m.contains(REFUSAL))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_envelope_fails_each_forwarded_api_with_unknown_server_error(
) -> anyhow::Result<()> {
    let jaas_ok = jaas(CONTROLLER_USER.1);
    // No super users: the brokers' principal `ctl` may send envelopes only while no ACL on the
    // cluster says otherwise.
    let mut overrides: Vec<(&str, String)> = secure_overrides(&jaas_ok)
        .into_iter()
        .filter(|(key, _)| *key != "super.users")
        .collect();
    overrides.push(("allow.everyone.if.no.acl.found", "true".to_owned()));
    let borrowed: Vec<(&str, &str)> = overrides.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let cluster = Cluster::start_with(1, 0, &borrowed)?;
    let broker_node = start_secure_broker(&cluster, &borrowed)?;
    let broker = broker_node.bootstrap();
    // The broker's forwarding connection opens and stays in its pool.
    wait_until("a topic through the broker", FORM_TIMEOUT, || async {
        let answer = create_through(&broker, "before-deny").await?;
        Ok(matches!(answer.0, 0 | 36).then_some(()))
    })
    .await?;

    // Through the same connection: the brokers' principal may no longer CLUSTER_ACTION, and
    // the test's client (User:ANONYMOUS) may still do anything on the cluster.
    let mut conn = KafkaConn::connect(&broker).await?;
    let deny = anonymous_acl(CLUSTER, "kafka-cluster", LITERAL, CLUSTER_ACTION, DENY)
        .with_principal(s(&format!("User:{}", CONTROLLER_USER.0)));
    let allow = anonymous_acl(CLUSTER, "kafka-cluster", LITERAL, ALL, ALLOW);
    let created = conn
        .send::<CreateAclsRequest>(
            &CreateAclsRequest::default().with_creations(vec![deny, allow]),
            3,
        )
        .await?;
    assert_eq!(
        created
            .results
            .iter()
            .map(|r| r.error_code)
            .collect::<Vec<_>>(),
        [0, 0],
        "{created:?}"
    );
    wait_until("the ACL in the broker's image", FORM_TIMEOUT, || async {
        let mut conn = KafkaConn::connect(&broker).await?;
        // Every ACL: ANY everywhere, and no name, principal or host (the crate's defaults are
        // empty strings, which match nothing).
        let filter = DescribeAclsRequest::default()
            .with_resource_type_filter(1)
            .with_resource_name_filter(None)
            .with_pattern_type_filter(1)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(1)
            .with_permission_type(1);
        let described = conn.send::<DescribeAclsRequest>(&filter, 3).await?;
        Ok((described.error_code == 0 && !described.resources.is_empty()).then_some(()))
    })
    .await?;

    // CreateTopics, forwarded as it came.
    let answer = create_through(&broker, "after-deny").await?;
    assert!(refused(answer.clone()), "{answer:?}");

    let created = conn
        .send::<CreatePartitionsRequest>(&create_partitions("before-deny", 2, None, false), 3)
        .await?;
    let result = &created.results[0];
    assert_eq!(
        (result.name.as_str(), result.error_code),
        ("before-deny", UNKNOWN_SERVER_ERROR),
        "{created:?}"
    );
    assert!(result
        .error_message
        .as_ref()
        .is_some_and(|m| m.contains(REFUSAL)));

    let deleted = conn
        .send::<DeleteTopicsRequest>(&delete_topics_by_name(6, &["before-deny"]), 6)
        .await?;
    let result = &deleted.responses[0];
    assert_eq!(
        (result.name.as_ref().map(|n| n.as_str()), result.error_code),
        (Some("before-deny"), UNKNOWN_SERVER_ERROR),
        "{deleted:?}"
    );

    // IncrementalAlterConfigs, which the broker forwards decoded (the config APIs' controller
    // part).
    let alter = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("before-deny"))
            .with_configs(vec![AlterableConfig::default()
                .with_name(s("retention.ms"))
                .with_config_operation(0)
                .with_value(Some(s("1000")))]),
    ]);
    let altered = conn
        .send::<IncrementalAlterConfigsRequest>(&alter, 1)
        .await?;
    let result = &altered.responses[0];
    assert_eq!(result.error_code, UNKNOWN_SERVER_ERROR, "{altered:?}");
    assert!(result
        .error_message
        .as_ref()
        .is_some_and(|m| m.contains(REFUSAL)));

    // DescribeQuorum: Kafka's error response puts the error at the top level.
    let describe = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(topic_name("__cluster_metadata"))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
    let described = conn.send::<DescribeQuorumRequest>(&describe, 2).await?;
    assert_eq!(described.error_code, UNKNOWN_SERVER_ERROR, "{described:?}");
    assert!(described
        .error_message
        .as_ref()
        .is_some_and(|m| m.contains(REFUSAL)));

    // AlterClientQuotas, CreateAcls and ListPartitionReassignments, forwarded as they came.
    let quota = default_user_quota("controller_mutation_rate", 2.0);
    let quoted = conn.send::<AlterClientQuotasRequest>(&quota, 1).await?;
    assert_eq!(
        quoted.entries[0].error_code, UNKNOWN_SERVER_ERROR,
        "{quoted:?}"
    );
    let acl = anonymous_acl(CLUSTER, "kafka-cluster", LITERAL, ALL, DENY);
    let created = conn
        .send::<CreateAclsRequest>(&CreateAclsRequest::default().with_creations(vec![acl]), 3)
        .await?;
    assert_eq!(
        created.results[0].error_code, UNKNOWN_SERVER_ERROR,
        "{created:?}"
    );
    let listed = conn
        .send::<ListPartitionReassignmentsRequest>(
            &ListPartitionReassignmentsRequest::default().with_topics(None),
            0,
        )
        .await?;
    assert_eq!(listed.error_code, UNKNOWN_SERVER_ERROR, "{listed:?}");
    // AlterConfigs, forwarded decoded like IncrementalAlterConfigs.
    let alter = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("before-deny"))
            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                .with_name(s("retention.ms"))
                .with_value(Some(s("1000")))]),
    ]);
    let altered = conn.send::<AlterConfigsRequest>(&alter, 2).await?;
    assert_eq!(
        altered.responses[0].error_code, UNKNOWN_SERVER_ERROR,
        "{altered:?}"
    );

    // Nothing was decided: the broker's image still has the topic, of one partition, and not
    // the refused one.
    let listed = conn
        .send::<MetadataRequest>(
            &metadata(12, Some(&["before-deny", "after-deny"]), false),
            12,
        )
        .await?;
    let topics = topics_of(&listed);
    assert_eq!(topics["before-deny"].partitions, 1, "{topics:?}");
    assert_eq!(topics["after-deny"].error_code, 3, "{topics:?}");
    Ok(())
}
