//! Metadata v0-13: brokers with the advertised endpoint, controller id, cluster id, topics with
//! ids, partitions, leaders, replicas and ISR.

use gregor_integration::admin::{metadata, topics_of};
use gregor_integration::GregorNode;
use kafka_protocol::messages::{BrokerId, MetadataRequest};

use crate::{connect, create_ok, Failures};

#[tokio::test]
async fn every_version_describes_the_node_and_its_topics() {
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = connect(&node).await;
    let ids = create_ok(&mut conn, &[("md-three", 3), ("md-one", 1)]).await;
    crate::wait_topic(&mut conn, "md-three", Some(3)).await;
    crate::wait_topic(&mut conn, "md-one", Some(1)).await;

    let mut f = Failures::default();
    let mut cluster_ids = Vec::new();
    for version in 0..=13i16 {
        let resp = match conn
            .send::<MetadataRequest>(&metadata(version, None, false), version)
            .await
        {
            Ok(r) => r,
            Err(e) => {
                f.push(format!("Metadata v{version} (all topics): {e:#}"));
                conn = connect(&node).await;
                continue;
            }
        };
        let v = |what: &str| format!("v{version} {what}");
        f.eq(&v("brokers"), resp.brokers.len(), 1);
        if let Some(b) = resp.brokers.first() {
            f.eq(&v("broker node_id"), b.node_id, BrokerId(1));
            f.eq(
                &v("broker host"),
                b.host.to_string(),
                "127.0.0.1".to_string(),
            );
            f.eq(&v("broker port"), b.port, i32::from(node.port()));
            f.eq(&v("broker rack"), b.rack.clone(), None);
        }
        if version >= 1 {
            f.eq(&v("controller_id"), resp.controller_id, BrokerId(1));
        }
        if version >= 2 {
            match &resp.cluster_id {
                Some(id) if !id.is_empty() => cluster_ids.push(id.to_string()),
                other => f.push(v(&format!("cluster_id is {other:?}"))),
            }
        }
        if version >= 3 {
            f.eq(&v("throttle_time_ms"), resp.throttle_time_ms, 0);
        }
        if version >= 13 {
            f.eq(&v("top-level error_code"), resp.error_code, 0);
        }
        let topics = topics_of(&resp);
        for (name, (want_partitions, id)) in [("md-three", (3, ids[0])), ("md-one", (1, ids[1]))] {
            let Some(t) = topics.get(name) else {
                f.push(v(&format!("topic {name} missing from all-topics Metadata")));
                continue;
            };
            f.eq(&v(&format!("{name} error_code")), t.error_code, 0);
            f.eq(
                &v(&format!("{name} partitions")),
                t.partitions,
                want_partitions,
            );
            if version >= 10 {
                f.eq(&v(&format!("{name} topic_id")), t.topic_id, id);
            }
        }
        for t in &resp.topics {
            let name = t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default();
            if version >= 1 {
                f.check(!t.is_internal || name.starts_with("__"), || {
                    v(&format!("{name} is_internal"))
                });
            }
            let mut indexes: Vec<i32> = t.partitions.iter().map(|p| p.partition_index).collect();
            indexes.sort_unstable();
            f.eq(
                &v(&format!("{name} partition indexes")),
                indexes,
                (0..t.partitions.len() as i32).collect::<Vec<_>>(),
            );
            for p in &t.partitions {
                let pv = |w: &str| v(&format!("{name}-{} {w}", p.partition_index));
                f.eq(&pv("error_code"), p.error_code, 0);
                f.eq(&pv("leader_id"), p.leader_id, BrokerId(1));
                f.eq(
                    &pv("replica_nodes"),
                    p.replica_nodes.clone(),
                    vec![BrokerId(1)],
                );
                f.eq(&pv("isr_nodes"), p.isr_nodes.clone(), vec![BrokerId(1)]);
                if version >= 5 {
                    f.eq(&pv("offline_replicas"), p.offline_replicas.clone(), vec![]);
                }
                if version >= 7 {
                    f.check(p.leader_epoch >= 0, || {
                        pv(&format!("leader_epoch {}", p.leader_epoch))
                    });
                }
            }
        }

        // Asking for one topic returns exactly that topic.
        match conn
            .send::<MetadataRequest>(&metadata(version, Some(&["md-one"]), false), version)
            .await
        {
            Ok(resp) => {
                let names: Vec<String> = topics_of(&resp).into_keys().collect();
                f.eq(
                    &v("topics when asking for md-one"),
                    names,
                    vec!["md-one".to_string()],
                );
            }
            Err(e) => {
                f.push(v(&format!("Metadata for one topic: {e:#}")));
                conn = connect(&node).await;
            }
        }

        // An unknown topic: UNKNOWN_TOPIC_OR_PARTITION (auto-creation is off on this node, so
        // v0-3, which always allow it, get the same answer).
        match conn
            .send::<MetadataRequest>(&metadata(version, Some(&["md-missing"]), false), version)
            .await
        {
            Ok(resp) => {
                let topics = topics_of(&resp);
                f.eq(
                    &v("unknown topic"),
                    topics
                        .get("md-missing")
                        .map(|t| (t.error_code, t.partitions)),
                    Some((3, 0)),
                );
            }
            Err(e) => {
                f.push(v(&format!("Metadata for an unknown topic: {e:#}")));
                conn = connect(&node).await;
            }
        }
    }
    cluster_ids.dedup();
    f.eq("distinct cluster ids across versions", cluster_ids.len(), 1);
    let topics = crate::all_topics(&mut conn).await;
    f.check(!topics.contains_key("md-missing"), || {
        "md-missing was auto-created with auto.create.topics.enable=false".to_string()
    });
    f.assert_none(&node);
}
