//! CreateTopics v2-7 success paths: partitions, configs at creation, defaults (-1), manual
//! assignments, validate_only, and what v5+ (KIP-525) and v7 (topic id) disclose.

use gregor_integration::admin::{creatable, create_topics, metadata, topics_of, with_configs};
use gregor_integration::GregorNode;
use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
use kafka_protocol::messages::{BrokerId, CreateTopicsRequest, MetadataRequest};
use uuid::Uuid;

use crate::{connect, Failures};

#[tokio::test]
async fn every_version_creates_topics() {
    let node = GregorNode::start(&[("num.partitions", "2")]).unwrap();
    let mut conn = connect(&node).await;
    let mut f = Failures::default();
    for version in 2..=7i16 {
        let v = |what: &str| format!("v{version} {what}");
        let name = format!("ct-v{version}");
        let topic = with_configs(
            creatable(&name, 3, 1),
            &[("cleanup.policy", "compact"), ("retention.ms", "123456")],
        );
        let resp = match conn
            .send::<CreateTopicsRequest>(&create_topics(vec![topic], false), version)
            .await
        {
            Ok(r) => r,
            Err(e) => {
                f.push(v(&format!("{e:#}")));
                conn = connect(&node).await;
                continue;
            }
        };
        f.eq(&v("throttle_time_ms"), resp.throttle_time_ms, 0);
        f.eq(&v("results"), resp.topics.len(), 1);
        let Some(t) = resp.topics.first() else {
            continue;
        };
        f.eq(&v("name"), t.name.0.to_string(), name.clone());
        f.eq(&v("error_code"), t.error_code, 0);
        f.eq(&v("error_message"), t.error_message.clone(), None);
        if version >= 5 {
            f.eq(&v("num_partitions"), t.num_partitions, 3);
            f.eq(&v("replication_factor"), t.replication_factor, 1);
            f.eq(&v("topic_config_error_code"), t.topic_config_error_code, 0);
            let configs = t.configs.clone().unwrap_or_default();
            for (key, value) in [("cleanup.policy", "compact"), ("retention.ms", "123456")] {
                match configs.iter().find(|c| c.name.to_string() == key) {
                    Some(c) => {
                        f.eq(
                            &v(&format!("config {key}")),
                            c.value.as_ref().map(|s| s.to_string()),
                            Some(value.to_string()),
                        );
                        // DYNAMIC_TOPIC_CONFIG
                        f.eq(&v(&format!("config {key} source")), c.config_source, 1);
                        f.eq(&v(&format!("config {key} read_only")), c.read_only, false);
                    }
                    None => f.push(v(&format!("config {key} missing from the v5+ result"))),
                }
            }
        }
        if version >= 7 {
            f.check(t.topic_id != Uuid::nil(), || v("topic_id is zero"));
        }
        // The topic is there, with three partitions.
        crate::wait_topic(&mut conn, &name, Some(3)).await;

        // KIP-464 defaults (v4+): -1 takes num.partitions (2) and default.replication.factor (1).
        if version >= 4 {
            let name = format!("ct-default-v{version}");
            let resp = conn
                .send::<CreateTopicsRequest>(
                    &create_topics(vec![creatable(&name, -1, -1)], false),
                    version,
                )
                .await
                .unwrap();
            let t = &resp.topics[0];
            f.eq(&v("defaults error_code"), t.error_code, 0);
            if version >= 5 {
                f.eq(&v("defaults num_partitions"), t.num_partitions, 2);
                f.eq(&v("defaults replication_factor"), t.replication_factor, 1);
            }
            crate::wait_topic(&mut conn, &name, Some(2)).await;
        }

        // Manual assignment: two partitions on broker 1, counts left at -1.
        let name = format!("ct-assigned-v{version}");
        let topic = creatable(&name, -1, -1).with_assignments(
            (0..2)
                .map(|p| {
                    CreatableReplicaAssignment::default()
                        .with_partition_index(p)
                        .with_broker_ids(vec![BrokerId(1)])
                })
                .collect(),
        );
        let resp = conn
            .send::<CreateTopicsRequest>(&create_topics(vec![topic], false), version)
            .await
            .unwrap();
        f.eq(
            &v("manual assignment error_code"),
            resp.topics[0].error_code,
            0,
        );
        crate::wait_topic(&mut conn, &name, Some(2)).await;

        // validate_only: success, nothing created.
        let name = format!("ct-validate-v{version}");
        let resp = conn
            .send::<CreateTopicsRequest>(
                &create_topics(vec![creatable(&name, 4, 1)], true),
                version,
            )
            .await
            .unwrap();
        f.eq(&v("validate_only error_code"), resp.topics[0].error_code, 0);
        if version >= 5 {
            f.eq(
                &v("validate_only num_partitions"),
                resp.topics[0].num_partitions,
                4,
            );
        }
        let md = conn
            .send::<MetadataRequest>(&metadata(12, Some(&[&name]), false), 12)
            .await
            .unwrap();
        f.eq(
            &v("validate_only topic in Metadata"),
            topics_of(&md).get(&name).map(|t| t.error_code),
            Some(3),
        );

        // Several topics in one request: each echoed in order of the request.
        let names: Vec<String> = (0..3).map(|i| format!("ct-multi-{i}-v{version}")).collect();
        let resp = conn
            .send::<CreateTopicsRequest>(
                &create_topics(names.iter().map(|n| creatable(n, 1, 1)).collect(), false),
                version,
            )
            .await
            .unwrap();
        let mut got: Vec<(String, i16)> = resp
            .topics
            .iter()
            .map(|t| (t.name.0.to_string(), t.error_code))
            .collect();
        got.sort();
        f.eq(
            &v("multi-topic results"),
            got,
            names.iter().map(|n| (n.clone(), 0)).collect(),
        );
    }
    f.assert_none(&node);
}
