//! Topic auto-creation through Metadata happens only with `auto.create.topics.enable=true`, and
//! then only when the request allows it (v4+) — v0-3 always allow it.

use std::time::{Duration, Instant};

use gregor_integration::admin::{metadata, topics_of};
use gregor_integration::GregorNode;
use kafka_protocol::messages::MetadataRequest;

use crate::{connect, Failures};

#[tokio::test]
async fn metadata_auto_creates_only_when_enabled_and_allowed() {
    let node = GregorNode::start(&[
        ("auto.create.topics.enable", "true"),
        ("num.partitions", "3"),
    ])
    .unwrap();
    let mut conn = connect(&node).await;
    let mut f = Failures::default();
    for version in 0..=13i16 {
        let v = |w: &str| format!("v{version} {w}");
        if version >= 4 {
            // Not allowed by the request: not created.
            let name = format!("auto-denied-v{version}");
            let resp = conn
                .send::<MetadataRequest>(&metadata(version, Some(&[&name]), false), version)
                .await
                .unwrap();
            f.eq(
                &v("allow=false error"),
                topics_of(&resp).get(&name).map(|t| t.error_code),
                Some(3),
            );
            let all = crate::all_topics(&mut conn).await;
            f.check(!all.contains_key(&name), || {
                v("created although allow_auto_topic_creation=false")
            });
        }
        // Allowed: the first answer is NONE or LEADER_NOT_AVAILABLE, then the topic appears with
        // num.partitions partitions.
        let name = format!("auto-v{version}");
        let resp = conn
            .send::<MetadataRequest>(&metadata(version, Some(&[&name]), true), version)
            .await
            .unwrap();
        let first = topics_of(&resp).get(&name).map(|t| t.error_code);
        f.check(matches!(first, Some(0) | Some(5)), || {
            v(&format!(
                "first answer for an auto-created topic: {first:?}, want 0 or 5"
            ))
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let resp = conn
                .send::<MetadataRequest>(&metadata(version, Some(&[&name]), true), version)
                .await
                .unwrap();
            let t = topics_of(&resp).get(&name).cloned();
            if t.as_ref()
                .is_some_and(|t| t.error_code == 0 && t.partitions == 3)
            {
                break;
            }
            if Instant::now() > deadline {
                f.push(v(&format!(
                    "auto-created topic not ready after 10 s: {t:?}"
                )));
                break;
            }
            tokio::time::sleep(gregor_integration::wait::POLL_INTERVAL).await;
        }
    }
    f.assert_none(&node);
}

#[tokio::test]
async fn metadata_never_auto_creates_when_disabled() {
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = connect(&node).await;
    let mut f = Failures::default();
    for version in 0..=13i16 {
        let name = format!("no-auto-v{version}");
        let resp = conn
            .send::<MetadataRequest>(&metadata(version, Some(&[&name]), true), version)
            .await
            .unwrap();
        f.eq(
            &format!("v{version} error for an unknown topic"),
            topics_of(&resp).get(&name).map(|t| t.error_code),
            Some(3),
        );
    }
    let all = crate::all_topics(&mut conn).await;
    f.eq("topics after asking for unknown ones", all.len(), 0);
    f.assert_none(&node);
}
