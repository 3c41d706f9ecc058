//! CreateTopics v2-7 error results: codes and Kafka's messages, per topic, with nothing created.

use gregor_integration::admin::{creatable, create_topics, with_configs};
use gregor_integration::GregorNode;
use kafka_protocol::messages::create_topics_request::{CreatableReplicaAssignment, CreatableTopic};
use kafka_protocol::messages::{BrokerId, CreateTopicsRequest};
use uuid::Uuid;

use crate::{connect, create_ok, Failures};

/// Expected message: exact, a prefix, or not checked.
enum Msg {
    Exact(String),
    Prefix(&'static str),
    Any,
}

fn cases(version: i16) -> Vec<(String, CreatableTopic, i16, Msg)> {
    let long = "x".repeat(250);
    let mut cases = vec![
        (
            "already exists".to_string(),
            creatable("existing", 1, 1),
            36,
            Msg::Exact("Topic 'existing' already exists.".into()),
        ),
        (
            "zero partitions".into(),
            creatable(&format!("zero-parts-v{version}"), 0, 1),
            37,
            Msg::Exact("Number of partitions was set to an invalid non-positive value.".into()),
        ),
        (
            "-5 partitions".into(),
            creatable(&format!("neg-parts-v{version}"), -5, 1),
            37,
            Msg::Exact("Number of partitions was set to an invalid non-positive value.".into()),
        ),
        (
            "replication factor 0".into(),
            creatable(&format!("zero-rf-v{version}"), 1, 0),
            38,
            Msg::Exact(
                "Replication factor must be larger than 0, or -1 to use the default value.".into(),
            ),
        ),
        (
            "replication factor 3 on one broker".into(),
            creatable(&format!("big-rf-v{version}"), 1, 3),
            38,
            Msg::Prefix(
                "Unable to replicate the partition 3 time(s): The target replication factor of 3 \
                 cannot be reached because only 1 broker(s) are registered",
            ),
        ),
        (
            "name with '/'".into(),
            creatable("bad/name", 1, 1),
            17,
            Msg::Any,
        ),
        ("name '.'".into(), creatable(".", 1, 1), 17, Msg::Any),
        ("name '..'".into(), creatable("..", 1, 1), 17, Msg::Any),
        ("empty name".into(), creatable("", 1, 1), 17, Msg::Any),
        ("250-char name".into(), creatable(&long, 1, 1), 17, Msg::Any),
        (
            "unknown config".into(),
            with_configs(
                creatable(&format!("bad-config-v{version}"), 1, 1),
                &[("no.such.config", "1")],
            ),
            40,
            Msg::Any,
        ),
        (
            "bad config value".into(),
            with_configs(
                creatable(&format!("bad-value-v{version}"), 1, 1),
                &[("retention.ms", "soon")],
            ),
            40,
            Msg::Any,
        ),
        (
            "assignment to an unknown broker".into(),
            creatable(&format!("bad-assign-v{version}"), -1, -1).with_assignments(vec![
                CreatableReplicaAssignment::default()
                    .with_partition_index(0)
                    .with_broker_ids(vec![BrokerId(99)]),
            ]),
            39,
            Msg::Any,
        ),
    ];
    cases.retain(|(_, t, _, _)| version >= 4 || t.num_partitions != -1);
    cases
}

#[tokio::test]
async fn every_version_reports_kafkas_errors() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = connect(&node).await;
    create_ok(&mut conn, &[("existing", 1)]).await;
    let before = crate::all_topics(&mut conn).await;

    let mut f = Failures::default();
    for version in 2..=7i16 {
        for (case, topic, code, msg) in cases(version) {
            let what = |w: &str| format!("v{version} {case}: {w}");
            let name = topic.name.0.to_string();
            let resp = match conn
                .send::<CreateTopicsRequest>(&create_topics(vec![topic], false), version)
                .await
            {
                Ok(r) => r,
                Err(e) => {
                    f.push(what(&format!("{e:#}")));
                    conn = connect(&node).await;
                    continue;
                }
            };
            let Some(t) = resp.topics.iter().find(|t| t.name.0.to_string() == name) else {
                f.push(what("topic not echoed in the response"));
                continue;
            };
            f.eq(&what("error_code"), t.error_code, code);
            let message = t.error_message.as_ref().map(|m| m.to_string());
            match msg {
                Msg::Exact(want) => f.eq(&what("error_message"), message, Some(want)),
                Msg::Prefix(p) => {
                    f.check(message.as_deref().is_some_and(|m| m.starts_with(p)), || {
                        what(&format!(
                            "error_message {message:?} does not start with {p:?}"
                        ))
                    })
                }
                Msg::Any => {}
            }
            if version >= 5 {
                f.eq(&what("num_partitions"), t.num_partitions, -1);
                f.eq(&what("replication_factor"), t.replication_factor, -1);
            }
            if version >= 7 {
                f.eq(&what("topic_id"), t.topic_id, Uuid::nil());
            }
        }

        // The same name twice in one request: INVALID_REQUEST for that name, the others go on.
        let dup = format!("dup-v{version}");
        let ok = format!("dup-sibling-v{version}");
        let resp = conn
            .send::<CreateTopicsRequest>(
                &create_topics(
                    vec![
                        creatable(&dup, 1, 1),
                        creatable(&dup, 1, 1),
                        creatable(&ok, 1, 1),
                    ],
                    false,
                ),
                version,
            )
            .await
            .unwrap();
        for t in &resp.topics {
            if t.name.0.to_string() == dup {
                f.eq(
                    &format!("v{version} duplicate name error_code"),
                    t.error_code,
                    42,
                );
                f.eq(
                    &format!("v{version} duplicate name error_message"),
                    t.error_message.as_ref().map(|m| m.to_string()),
                    Some("Duplicate topic name.".to_string()),
                );
            } else {
                f.eq(
                    &format!("v{version} sibling of a duplicate error_code"),
                    t.error_code,
                    0,
                );
            }
        }
        f.check(
            resp.topics.iter().any(|t| t.name.0.to_string() == dup),
            || format!("v{version}: duplicate name not echoed"),
        );
    }

    // Nothing but the siblings was created.
    let after = crate::all_topics(&mut conn).await;
    let mut created: Vec<&String> = after.keys().filter(|k| !before.contains_key(*k)).collect();
    created.sort();
    let want: Vec<String> = (2..=7).map(|v| format!("dup-sibling-v{v}")).collect();
    f.eq(
        "topics created by failing requests",
        created.into_iter().cloned().collect::<Vec<_>>(),
        want,
    );
    f.assert_none(&node);
}
