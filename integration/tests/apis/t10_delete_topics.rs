//! DeleteTopics v1-6: by name (all versions) and by topic id (v6), unknown names and ids, and
//! TOPIC_DELETION_DISABLED when `delete.topic.enable=false`.

use gregor_integration::admin::{delete_topics_by_id, delete_topics_by_name};
use gregor_integration::GregorNode;
use kafka_protocol::messages::DeleteTopicsRequest;
use uuid::Uuid;

use crate::{connect, create_ok, Failures};

#[tokio::test]
async fn every_version_deletes_by_name() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = connect(&node).await;
    let mut f = Failures::default();
    for version in 1..=6i16 {
        let v = |w: &str| format!("v{version} {w}");
        let name = format!("dt-v{version}");
        let ids = create_ok(&mut conn, &[(&name, 2)]).await;
        crate::wait_topic(&mut conn, &name, Some(2)).await;
        let resp = match conn
            .send::<DeleteTopicsRequest>(
                &delete_topics_by_name(version, &[&name, "dt-missing"]),
                version,
            )
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
        f.eq(&v("results"), resp.responses.len(), 2);
        for r in &resp.responses {
            let rname = r.name.as_ref().map(|n| n.0.to_string());
            if rname.as_deref() == Some(name.as_str()) {
                f.eq(&v("error_code"), r.error_code, 0);
                if version >= 5 {
                    f.eq(&v("error_message"), r.error_message.clone(), None);
                }
                if version >= 6 {
                    f.eq(&v("topic_id of a delete by name"), r.topic_id, ids[0]);
                }
            } else if rname.as_deref() == Some("dt-missing") {
                f.eq(&v("unknown topic error_code"), r.error_code, 3);
            } else {
                f.push(v(&format!("unexpected result for {rname:?}")));
            }
        }
        crate::wait_topic(&mut conn, &name, None).await;
    }
    f.assert_none(&node);
}

#[tokio::test]
async fn v6_deletes_by_topic_id() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = connect(&node).await;
    let ids = create_ok(&mut conn, &[("by-id", 1)]).await;
    let unknown = Uuid::from_u128(0x1234_5678_9abc_def0_1234_5678_9abc_def0);
    let resp = conn
        .send::<DeleteTopicsRequest>(&delete_topics_by_id(&[ids[0], unknown]), 6)
        .await
        .unwrap();
    let mut f = Failures::default();
    f.eq("results", resp.responses.len(), 2);
    for r in &resp.responses {
        if r.topic_id == ids[0] {
            f.eq("delete by id error_code", r.error_code, 0);
            f.eq(
                "delete by id echoes the name",
                r.name.as_ref().map(|n| n.0.to_string()),
                Some("by-id".to_string()),
            );
        } else if r.topic_id == unknown {
            f.eq(
                "unknown id error_code (UNKNOWN_TOPIC_ID)",
                r.error_code,
                100,
            );
            f.eq("unknown id name", r.name.clone(), None);
        } else {
            f.push(format!("unexpected result {r:?}"));
        }
    }
    crate::wait_topic(&mut conn, "by-id", None).await;
    f.assert_none(&node);
}

#[tokio::test]
async fn deletion_disabled_is_reported_per_version() {
    let node = GregorNode::start(&[("delete.topic.enable", "false")]).unwrap();
    let mut conn = connect(&node).await;
    create_ok(&mut conn, &[("keep-me", 1)]).await;
    let mut f = Failures::default();
    for version in 1..=6i16 {
        let resp = conn
            .send::<DeleteTopicsRequest>(&delete_topics_by_name(version, &["keep-me"]), version)
            .await
            .unwrap();
        // TOPIC_DELETION_DISABLED exists from v3; older versions get INVALID_REQUEST.
        let want = if version >= 3 { 73 } else { 42 };
        f.eq(
            &format!("v{version} error codes"),
            resp.responses
                .iter()
                .map(|r| r.error_code)
                .collect::<Vec<_>>(),
            vec![want],
        );
    }
    crate::wait_topic(&mut conn, "keep-me", Some(1)).await;
    f.assert_none(&node);
}
