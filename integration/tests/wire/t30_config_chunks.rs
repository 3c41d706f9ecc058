//! IncrementalAlterConfigs and AlterConfigs listing more resources than one chunk
//! (`node/src/network/config_chunks.rs`): decided from the frame, a code kept per resource, and
//! answered as the same resources in shorter requests decoded whole are (every kind of
//! resource and refusal, repeats, BROKER_LOGGER on the node, denials by the authorizer); 10 MB
//! of distinct resources stays below four frames with every answer checked.

use std::time::Duration;

use gregor_integration::admin::acl::{
    ALLOW, ALTER_CONFIGS, CLUSTER, DENY, GROUP, LITERAL, PREFIXED, TOPIC,
};
use gregor_integration::admin::{anonymous_acl as acl, creatable, create_topics, s};
use gregor_integration::frames::{alter_configs_of_distinct_topics, assert_each_topic_unknown};
use gregor_integration::{wait_until, GregorNode, KafkaConn};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    alter_configs_request, AlterConfigsRequest, CreateAclsRequest, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest,
};
use kafka_protocol::protocol::StrBytes;

use crate::t30_request_memory::{answer_within_four_frames_on, FRAME};

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

fn resource(t: i8, name: &str, ops: &[(&str, i8, Option<&str>)]) -> AlterConfigsResource {
    AlterConfigsResource::default()
        .with_resource_type(t)
        .with_resource_name(s(name))
        .with_configs(
            ops.iter()
                .map(|(key, op, value)| {
                    AlterableConfig::default()
                        .with_name(s(key))
                        .with_config_operation(*op)
                        .with_value(value.map(s))
                })
                .collect(),
        )
}

/// One part of a long request: every kind of resource and refusal, repeats within the part
/// (a name far apart, copies right after their first), then unknown topics up to 800.
fn part(tag: &str) -> Vec<AlterConfigsResource> {
    let set = |value: &'static str| vec![("flush.ms", 0, Some(value))];
    let keys: Vec<(&str, i8, Option<&str>)> = vec![("flush.ms", 0, Some("2")); 40];
    let mut resources = vec![
        resource(2, &format!("old-{tag}-0"), &[("flush.ms", 0, Some("5"))]),
        resource(2, &format!("old-{tag}-1"), &[("flush.ms", 0, Some("x"))]),
        resource(
            2,
            &format!("old-{tag}-2"),
            &[("cleanup.policy", 2, Some("compact"))],
        ),
        resource(2, &format!("old-{tag}-3"), &[("flush.ms", 9, Some("1"))]),
        resource(2, &format!("old-{tag}-4"), &[("retention.ms", 1, None)]),
        resource(2, &format!("old-{tag}-5"), &keys),
        resource(2, &format!("old-{tag}-6"), &[("flush.ms", 0, None)]),
        resource(
            2,
            &format!("old-{tag}-7"),
            &[("no.such.config", 0, Some("1"))],
        ),
        resource(2, &format!("bad/{tag}"), &[]),
        resource(
            32,
            &format!("g-{tag}"),
            &[("consumer.session.timeout.ms", 0, Some("50000"))],
        ),
        resource(
            32,
            &format!("h-{tag}"),
            &[("consumer.session.timeout.ms", 0, Some("1"))],
        ),
        resource(16, &format!("m-{tag}"), &[("interval.ms", 0, Some("1000"))]),
        resource(2, &format!("old-{tag}-8"), &set("7")),
        resource(2, &format!("old-{tag}-8"), &set("7")),
        resource(2, &format!("old-{tag}-8"), &set("7")),
    ];
    // Resources whose names are the same in every part, each in one part only.
    resources.extend(match tag {
        "a" => vec![
            resource(4, "1", &[("log.retention.ms", 0, Some("100"))]),
            resource(8, "1", &[("root", 0, Some("INFO"))]),
            resource(2, "", &[]),
        ],
        "b" => vec![
            resource(4, "", &[("log.retention.ms", 0, Some("nope"))]),
            resource(8, "01", &[("no.such.logger", 0, Some("INFO"))]),
            resource(4, "5", &[]),
        ],
        _ => vec![
            resource(4, "x", &[]),
            resource(8, "2", &[("root", 0, Some("INFO"))]),
            resource(8, "001", &[("root", 2, Some("INFO"))]),
            resource(99, "z", &[]),
        ],
    });
    resources.push(resource(2, &format!("old-{tag}-0"), &set("6")));
    while resources.len() < 800 {
        let index = resources.len();
        resources.push(resource(2, &format!("{tag}-{index}"), &set("1")));
    }
    resources.insert(400, resources[399].clone());
    resources
}

fn legacy(resources: &[AlterConfigsResource]) -> Vec<alter_configs_request::AlterConfigsResource> {
    resources
        .iter()
        .map(|r| {
            alter_configs_request::AlterConfigsResource::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone())
                .with_configs(
                    r.configs
                        .iter()
                        .map(|c| {
                            alter_configs_request::AlterableConfig::default()
                                .with_name(c.name.clone())
                                .with_value(c.value.clone())
                        })
                        .collect(),
                )
        })
        .collect()
}

type Answers = Vec<(i8, String, i16, Option<String>)>;

/// Each answer's resource, code and message.
fn answers_of(answers: impl Iterator<Item = (i8, StrBytes, i16, Option<StrBytes>)>) -> Answers {
    answers
        .map(|(t, name, code, message)| (t, name.to_string(), code, message.map(|m| m.to_string())))
        .collect()
}

/// Checks two answers are the same, naming the first resource answered differently.
fn assert_same(got: &Answers, expected: &Answers, what: &str) {
    if let Some(at) = (0..got.len().min(expected.len())).find(|i| got[*i] != expected[*i]) {
        panic!(
            "{what}: resource {at} answered {:?}, expected {:?}",
            got[at], expected[at]
        );
    }
    assert_eq!(got.len(), expected.len(), "{what}: answers");
}

async fn incremental(
    conn: &mut KafkaConn,
    resources: &[AlterConfigsResource],
    validate_only: bool,
    version: i16,
) -> Answers {
    let request = IncrementalAlterConfigsRequest::default()
        .with_resources(resources.to_vec())
        .with_validate_only(validate_only);
    let answer = conn.send(&request, version).await.unwrap();
    answers_of(answer.responses.into_iter().map(|r| {
        (
            r.resource_type,
            r.resource_name,
            r.error_code,
            r.error_message,
        )
    }))
}

async fn replacing(
    conn: &mut KafkaConn,
    resources: &[AlterConfigsResource],
    validate_only: bool,
    version: i16,
) -> Answers {
    let request = AlterConfigsRequest::default()
        .with_resources(legacy(resources))
        .with_validate_only(validate_only);
    let answer = conn.send(&request, version).await.unwrap();
    answers_of(answer.responses.into_iter().map(|r| {
        (
            r.resource_type,
            r.resource_name,
            r.error_code,
            r.error_message,
        )
    }))
}

/// The answers of `parts` sent one after the other (each decoded whole), concatenated.
async fn as_parts(
    conn: &mut KafkaConn,
    parts: &[Vec<AlterConfigsResource>],
    validate_only: bool,
    version: i16,
    legacy_api: bool,
) -> Answers {
    let mut answers = Vec::new();
    for part in parts {
        answers.extend(if legacy_api {
            replacing(conn, part, validate_only, version).await
        } else {
            incremental(conn, part, validate_only, version).await
        });
    }
    answers
}

async fn node_with_old_topics(overrides: &[(&str, &str)]) -> (GregorNode, KafkaConn) {
    // The debug line tells which requests were decided from their frame.
    let node = GregorNode::start_with_env(
        overrides,
        None,
        &[("RUST_LOG", "info,gregor_node::network::config_chunks=debug")],
    )
    .unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let old: Vec<_> = ["a", "b", "c"]
        .iter()
        .flat_map(|tag| (0..9).map(move |i| creatable(&format!("old-{tag}-{i}"), 1, 1)))
        .collect();
    let created = conn.send(&create_topics(old, false), 7).await.unwrap();
    assert!(
        created.topics.iter().all(|t| t.error_code == 0),
        "{created:?}"
    );
    (node, conn)
}

/// The value `topic` overrides `key` with, if it does.
async fn topic_config(conn: &mut KafkaConn, topic: &str, key: &str) -> Option<String> {
    let described = conn
        .send(
            &DescribeConfigsRequest::default().with_resources(vec![
                DescribeConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s(topic))
                    .with_configuration_keys(Some(vec![s(key)])),
            ]),
            4,
        )
        .await
        .unwrap();
    described.results[0]
        .configs
        .iter()
        .find(|c| c.config_source == 1)
        .and_then(|c| c.value.as_ref().map(ToString::to_string))
}

/// 2,401 resources of every kind, validated only, are answered exactly as their three parts
/// are, at every version of both APIs; then applied, the valid changes are in the image and
/// the invalid ones are not.
#[tokio::test]
async fn config_alterations_of_many_resources_answer_as_shorter_requests() {
    let (node, mut conn) = node_with_old_topics(&[]).await;
    let parts = vec![part("a"), part("b"), part("c")];
    let whole: Vec<AlterConfigsResource> = parts.iter().flatten().cloned().collect();
    assert!(whole.len() > 1024 && parts.iter().all(|p| p.len() <= 1024));
    let framed = || {
        node.stderr()
            .matches("a config alteration decided from its frame")
            .count()
    };
    for version in [0, 1] {
        let answers = incremental(&mut conn, &whole, true, version).await;
        assert_eq!(answers.len(), whole.len());
        let expected = as_parts(&mut conn, &parts, true, version, false).await;
        assert_same(
            &answers,
            &expected,
            &format!("IncrementalAlterConfigs v{version}"),
        );
        // The log is read as the node writes it: the count is awaited, and never passes it.
        let expected_framed = 1 + version as usize;
        wait_until(
            "the framed request's log line",
            Duration::from_secs(10),
            || async { Ok((framed() >= expected_framed).then_some(())) },
        )
        .await
        .unwrap();
        assert_eq!(
            framed(),
            expected_framed,
            "only the whole request is framed"
        );
        let codes: std::collections::BTreeSet<i16> = answers.iter().map(|a| a.2).collect();
        assert_eq!(codes.len(), 5, "every kind of answer: {codes:?}");
        assert_eq!(
            answers[0].3.as_deref(),
            Some("Each resource must appear at most once.")
        );
    }
    for version in [0, 1, 2] {
        let answers = replacing(&mut conn, &whole, true, version).await;
        let expected = as_parts(&mut conn, &parts, true, version, true).await;
        assert_same(&answers, &expected, &format!("AlterConfigs v{version}"));
    }
    // Applied: the valid changes only (old-a-8 is named three times, old-a-0 twice).
    let answers = incremental(&mut conn, &whole, false, 1).await;
    let answered = |name: &str| {
        answers
            .iter()
            .find(|a| a.1 == name)
            .map(|a| a.2)
            .unwrap_or(-2)
    };
    assert_eq!(answered("old-b-0"), 42);
    assert_eq!(answered("old-b-7"), 40, "INVALID_CONFIG");
    assert_eq!(answered("a-30"), UNKNOWN_TOPIC_OR_PARTITION);
    assert_eq!(topic_config(&mut conn, "old-b-8", "flush.ms").await, None);
    assert_eq!(topic_config(&mut conn, "old-b-1", "flush.ms").await, None);
    assert_eq!(
        topic_config(&mut conn, "old-c-2", "cleanup.policy")
            .await
            .as_deref(),
        Some("delete,compact")
    );
    let replaced = replacing(
        &mut conn,
        &whole
            .iter()
            .filter(|r| r.resource_name.as_str() != "old-c-8")
            .cloned()
            .collect::<Vec<_>>(),
        false,
        2,
    )
    .await;
    assert_eq!(replaced.len(), whole.len() - 3);
    let ok = whole
        .iter()
        .position(|r| r.resource_name.as_str() == "old-a-2")
        .unwrap();
    assert_eq!(replaced[ok].2, 0, "{:?}", replaced[ok]);
    assert_eq!(
        topic_config(&mut conn, "old-a-2", "cleanup.policy")
            .await
            .as_deref(),
        Some("compact")
    );
}

/// With an authorizer, resources the principal may not alter are refused in request order
/// (topics and groups by name, the others by the cluster) and the rest decided, as in shorter
/// requests.
#[tokio::test]
async fn config_alterations_with_an_authorizer_answer_as_shorter_requests() {
    let (_node, mut conn) = node_with_old_topics(&[
        ("authorizer.class.name", "StandardAuthorizer"),
        ("allow.everyone.if.no.acl.found", "true"),
    ])
    .await;
    let acls = vec![
        acl(TOPIC, "old-b-", PREFIXED, ALTER_CONFIGS, DENY),
        acl(TOPIC, "c-", PREFIXED, ALTER_CONFIGS, DENY),
        acl(GROUP, "g-c", LITERAL, ALTER_CONFIGS, DENY),
        acl(CLUSTER, "kafka-cluster", LITERAL, ALTER_CONFIGS, DENY),
        acl(TOPIC, "old-a-", PREFIXED, ALTER_CONFIGS, ALLOW),
    ];
    let created = conn
        .send(&CreateAclsRequest::default().with_creations(acls), 3)
        .await
        .unwrap();
    assert!(created.results.iter().all(|r| r.error_code == 0));
    let parts = vec![part("a"), part("b"), part("c")];
    let whole: Vec<AlterConfigsResource> = parts.iter().flatten().cloned().collect();
    for version in [0, 1] {
        let answers = incremental(&mut conn, &whole, true, version).await;
        let expected = as_parts(&mut conn, &parts, true, version, false).await;
        assert_same(
            &answers,
            &expected,
            &format!("IncrementalAlterConfigs v{version}"),
        );
        let denied = |code: i16| answers.iter().filter(|a| a.2 == code).count();
        assert!(denied(29) > 700, "topics");
        assert_eq!(denied(30), 1, "a group");
        assert_eq!(denied(31), 3 * 3 + 2, "the cluster's resources");
    }
    let answers = replacing(&mut conn, &whole, true, 1).await;
    let expected = as_parts(&mut conn, &parts, true, 1, true).await;
    assert_same(&answers, &expected, "AlterConfigs");
}

/// 10 MB of IncrementalAlterConfigs naming distinct topics that do not exist: each is answered
/// UNKNOWN_TOPIC_OR_PARTITION with its own message, in order, below four frames.
#[tokio::test]
async fn incremental_alter_configs_naming_distinct_topics_stays_within_four_frames() {
    distinct_topics_within_four_frames(false).await;
}

/// The same for AlterConfigs.
#[tokio::test]
async fn alter_configs_naming_distinct_topics_stays_within_four_frames() {
    distinct_topics_within_four_frames(true).await;
}

async fn distinct_topics_within_four_frames(legacy_api: bool) {
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let count = (FRAME - 40) / if legacy_api { 20 } else { 21 };
    let frame = alter_configs_of_distinct_topics(count, legacy_api);
    let what = if legacy_api {
        "AlterConfigs"
    } else {
        "IncrementalAlterConfigs"
    };
    let body = answer_within_four_frames_on(&node, &mut conn, what, &frame).await;
    assert_each_topic_unknown(body, count, legacy_api);
}
