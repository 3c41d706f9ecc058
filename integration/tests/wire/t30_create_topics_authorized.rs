//! CreateTopics and CreatePartitions naming more topics than one chunk on a node with an
//! authorizer (`node/src/network/topic_list_chunks.rs`): decided from its frame as without one,
//! each name named once checked for CREATE unless the cluster allows it (ALTER on each topic
//! for CreatePartitions). The answer must be the one
//! the same topics get in shorter requests decoded whole (denied names TOPIC_AUTHORIZATION_FAILED
//! in request order, repeated names INVALID_REQUEST unchecked, configs hidden from who may not
//! describe them), each denial logged once, and 10 MB of distinct names must stay below four
//! frames.

use std::time::Duration;

use bytes::Buf;
use gregor_integration::admin::acl::{
    ALLOW, ALTER, CLUSTER, CREATE, DENY, DESCRIBE_CONFIGS, LITERAL, PREFIXED, TOPIC,
};
use gregor_integration::admin::{anonymous_acl as acl, creatable, create_topics, s};
use gregor_integration::{wait_until, GregorNode, KafkaConn};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{CreateAclsRequest, CreateTopicsResponse, DeleteAclsRequest};
use kafka_protocol::protocol::Decodable;

use crate::t30_request_memory::{answer_within_four_frames_on, FRAME};
use gregor_integration::frames::{compact_length, create_topics_v7, four_letter_name};

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;

/// A node with the authorizer on which a principal without ACLs may do anything: the
/// connections' principal (User:ANONYMOUS) is then limited by the ACLs each test adds. Its
/// debug line tells which CreateTopics were decided from their frame.
fn authorized_node() -> GregorNode {
    GregorNode::start_with_env(
        &[
            ("auto.create.topics.enable", "false"),
            ("authorizer.class.name", "StandardAuthorizer"),
            ("allow.everyone.if.no.acl.found", "true"),
        ],
        None,
        &[(
            "RUST_LOG",
            "info,gregor_node::network::topic_list_chunks=debug",
        )],
    )
    .unwrap()
}

async fn add_acls(conn: &mut KafkaConn, acls: Vec<AclCreation>) {
    let answer = conn
        .send(&CreateAclsRequest::default().with_creations(acls), 3)
        .await
        .unwrap();
    assert!(
        answer.results.iter().all(|r| r.error_code == 0),
        "{answer:?}"
    );
}

/// The lines of `node`'s log denying CREATE on a topic, by topic name.
fn create_denials(node: &GregorNode) -> Vec<String> {
    denials(node, "CREATE")
}

/// The lines of `node`'s log denying `operation` on a topic, by topic name.
fn denials(node: &GregorNode, operation: &str) -> Vec<String> {
    let operation = format!("operation=\"{operation}\"");
    node.stderr()
        .lines()
        .filter(|line| line.contains("gregor::authorizer") && line.contains(&operation))
        .filter_map(|line| line.split("resource=TOPIC:").nth(1))
        .map(str::to_owned)
        .collect()
}

/// The denials logged after the first `seen`, once `marker` (a denied topic created alone,
/// after the request) is among them: the log is read in order, so every earlier line is in.
async fn denials_since(
    node: &GregorNode,
    conn: &mut KafkaConn,
    seen: usize,
    marker: &str,
) -> Vec<String> {
    let answer = conn
        .send(&create_topics(vec![creatable(marker, 1, 1)], true), 7)
        .await
        .unwrap();
    assert_eq!(answer.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    wait_until(
        "the marker's denial in the log",
        Duration::from_secs(30),
        || {
            let denials = create_denials(node);
            async move {
                Ok(denials
                    .last()
                    .is_some_and(|last| last == marker)
                    .then(|| denials[seen..denials.len() - 1].to_vec()))
            }
        },
    )
    .await
    .unwrap()
}

/// How many CreateTopics requests the node decided from their frame.
fn decided_from_frame(node: &GregorNode) -> usize {
    node.stderr()
        .matches("a CreateTopics request decided from its frame")
        .count()
}

/// How many CreatePartitions requests the node decided from their frame.
fn growths_decided_from_frame(node: &GregorNode) -> usize {
    node.stderr()
        .matches("a CreatePartitions request decided from its frame")
        .count()
}

fn without_ids(mut response: CreateTopicsResponse) -> CreateTopicsResponse {
    for topic in &mut response.topics {
        topic.topic_id = uuid::Uuid::nil();
    }
    response
}

/// Per half (no name in both): existing, invalid and repeated names, each also denied
/// ("d-" prefix: denied CREATE) and with hidden configs ("h-" prefix: CREATE allowed,
/// DESCRIBE_CONFIGS denied), then 700 names of the three kinds, a few with one partition
/// (created), the others none (INVALID_PARTITIONS).
fn half(tag: &str) -> Vec<CreatableTopic> {
    let mut topics = vec![
        creatable(&format!("old-{tag}"), 1, 1),
        creatable(&format!("d-old-{tag}"), 1, 1),
        creatable(&format!("bad name {tag}"), 1, 1),
        creatable(&format!("d-bad name {tag}"), 1, 1),
        creatable(&format!("dup-{tag}"), 1, 1),
        creatable(&format!("d-dup-{tag}"), 1, 1),
        creatable(&format!("h-dup-{tag}"), 1, 1),
    ];
    for index in 0..700 {
        let name = match index % 5 {
            0 => format!("d-{tag}-{index}"),
            1 => format!("h-{tag}-{index}"),
            _ => format!("{tag}-{index}"),
        };
        let partitions = i32::from(index % 20 < 3);
        topics.push(creatable(&name, partitions, 1));
        if index % 300 == 0 {
            for repeated in ["dup", "d-dup", "h-dup"] {
                topics.push(creatable(&format!("{repeated}-{tag}"), 1, 1));
            }
        }
    }
    topics
}

/// The whole request and its two halves at `version`, validated only: equal entry for entry
/// (topic ids aside), the whole decided from its frame. Returns the whole's answer.
async fn validated_as_halves(
    node: &GregorNode,
    conn: &mut KafkaConn,
    first: &[CreatableTopic],
    second: &[CreatableTopic],
    version: i16,
) -> CreateTopicsResponse {
    let whole: Vec<CreatableTopic> = first.iter().chain(second).cloned().collect();
    assert!(whole.len() > 1024 && first.len() <= 1024 && second.len() <= 1024);
    let chunked = decided_from_frame(node);
    let validated = without_ids(
        conn.send(&create_topics(whole, true), version)
            .await
            .unwrap(),
    );
    wait_until("the request's debug line", Duration::from_secs(30), || {
        let decided = decided_from_frame(node);
        async move { Ok((decided > chunked).then_some(())) }
    })
    .await
    .unwrap();
    let mut halves = conn
        .send(&create_topics(first.to_vec(), true), version)
        .await
        .unwrap();
    let second = conn
        .send(&create_topics(second.to_vec(), true), version)
        .await
        .unwrap();
    halves.topics.extend(second.topics);
    assert_eq!(validated, without_ids(halves), "validated v{version}");
    assert_eq!(
        decided_from_frame(node),
        chunked + 1,
        "only the whole from its frame"
    );
    validated
}

/// The answers' kinds: (denied, created with configs hidden, created with configs shown).
fn kinds(response: &CreateTopicsResponse) -> (usize, usize, usize) {
    let denied = |t: &&CreatableTopicResult| {
        t.error_code == TOPIC_AUTHORIZATION_FAILED
            && t.error_message.as_deref() == Some("Authorization failed.")
            && (t.num_partitions, t.replication_factor) == (-1, -1)
    };
    let hidden = |t: &&CreatableTopicResult| {
        t.error_code == 0
            && t.topic_config_error_code == TOPIC_AUTHORIZATION_FAILED
            && t.configs.as_ref().is_some_and(Vec::is_empty)
            && (t.num_partitions, t.replication_factor) == (-1, -1)
    };
    let shown = |t: &&CreatableTopicResult| {
        t.error_code == 0
            && t.topic_config_error_code == 0
            && t.configs.as_ref().is_some_and(|c| !c.is_empty())
            && (t.num_partitions, t.replication_factor) == (1, 1)
    };
    let topics = &response.topics;
    (
        topics.iter().filter(denied).count(),
        topics.iter().filter(hidden).count(),
        topics.iter().filter(shown).count(),
    )
}

#[tokio::test]
async fn create_topics_naming_many_topics_with_acls_answers_as_shorter_requests() {
    let node = authorized_node();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let existing = [
        "old-a", "d-old-a", "old-b", "d-old-b", "old-c", "d-old-c", "old-e", "d-old-e",
    ];
    let old: Vec<CreatableTopic> = existing.iter().map(|n| creatable(n, 1, 1)).collect();
    let answer = conn.send(&create_topics(old, false), 7).await.unwrap();
    assert!(
        answer.topics.iter().all(|t| t.error_code == 0),
        "{answer:?}"
    );
    add_acls(
        &mut conn,
        vec![
            acl(CLUSTER, "kafka-cluster", LITERAL, ALTER, ALLOW),
            acl(CLUSTER, "kafka-cluster", LITERAL, CREATE, DENY),
            acl(TOPIC, "d-", PREFIXED, CREATE, DENY),
            acl(TOPIC, "h-", PREFIXED, CREATE, ALLOW),
            acl(TOPIC, "h-", PREFIXED, DESCRIBE_CONFIGS, DENY),
        ],
    )
    .await;

    // CREATE checked on each topic.
    let (first, second) = (half("a"), half("b"));
    let seen = create_denials(&node).len();
    // The same answers where a version lacks configs (v4) or partitions and replication (v2).
    for version in [2, 4, 5] {
        validated_as_halves(&node, &mut conn, &first, &second, version).await;
    }
    let validated = validated_as_halves(&node, &mut conn, &first, &second, 7).await;
    // Per half: d-old, d-bad name and 140 d- names; not d-dup, repeated.
    assert_eq!(kinds(&validated), (2 * 142, 2 * 35, 2 * 35));
    assert_eq!(validated.topics.len(), 2 * (7 + 700));
    let denials = denials_since(&node, &mut conn, seen, "d-marker-1").await;
    // Each of the four whole requests and four pairs of halves denied every d- name named
    // once, once.
    let mut expected: Vec<String> = validated
        .topics
        .iter()
        .filter(|t| t.error_code == TOPIC_AUTHORIZATION_FAILED)
        .flat_map(|t| vec![t.name.to_string(); 8])
        .collect();
    expected.sort();
    let mut logged = denials;
    logged.sort();
    assert_eq!(logged, expected, "each denial logged once per request");
    let whole: Vec<CreatableTopic> = first.iter().chain(&second).cloned().collect();
    let created = without_ids(conn.send(&create_topics(whole, false), 7).await.unwrap());
    assert_eq!(created, validated, "created as validated");

    // CREATE on the cluster covers every topic: the d- names are created too.
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let filter = DeleteAclsFilter::default()
        .with_resource_type_filter(CLUSTER)
        .with_resource_name_filter(Some(s("kafka-cluster")))
        .with_pattern_type_filter(LITERAL)
        .with_principal_filter(Some(s("User:ANONYMOUS")))
        .with_host_filter(Some(s("*")))
        .with_operation(CREATE)
        .with_permission_type(DENY);
    let deleted = conn
        .send(&DeleteAclsRequest::default().with_filters(vec![filter]), 3)
        .await
        .unwrap();
    assert_eq!(deleted.filter_results[0].matching_acls.len(), 1);
    add_acls(
        &mut conn,
        vec![acl(CLUSTER, "kafka-cluster", LITERAL, CREATE, ALLOW)],
    )
    .await;
    let mut first = half("c");
    first.push(creatable("d-old-b", 1, 1));
    let second = half("e");
    let validated = validated_as_halves(&node, &mut conn, &first, &second, 7).await;
    // Denied none; the d- names with a partition are created, their configs hidden (the d-
    // ACL is not a DESCRIBE_CONFIGS one, so none matches).
    assert_eq!(kinds(&validated), (0, 2 * 70, 2 * 35));
    assert_eq!(validated.topics.len(), 2 * (7 + 700) + 1);
    let whole: Vec<CreatableTopic> = first.iter().chain(&second).cloned().collect();
    let created = without_ids(conn.send(&create_topics(whole, false), 7).await.unwrap());
    assert_eq!(created, validated, "created as validated");
}

/// CreatePartitions naming more topics than one chunk, ALTER denied on the "d-" topics: each
/// name named once is checked from the frame (once per request), the denied ones answered
/// TOPIC_AUTHORIZATION_FAILED in request order, a repeated one INVALID_REQUEST unchecked, the
/// others decided as in two shorter requests decoded whole.
#[tokio::test]
async fn create_partitions_of_many_topics_with_acls_answers_as_shorter_requests() {
    use crate::t30_request_memory::{answered_with, growth_half, growth_validated_as_halves};
    use gregor_integration::admin::{grow_partitions, growth};
    use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
    let node = authorized_node();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let existing: Vec<CreatableTopic> = ["a", "b"]
        .iter()
        .flat_map(|tag| {
            (0..22)
                .map(move |index| format!("old-{tag}-{index}"))
                .chain([format!("d-old-{tag}")])
        })
        .map(|name| creatable(&name, 1, 1))
        .collect();
    let created = conn.send(&create_topics(existing, false), 7).await.unwrap();
    assert!(
        created.topics.iter().all(|t| t.error_code == 0),
        "{created:?}"
    );
    add_acls(&mut conn, vec![acl(TOPIC, "d-", PREFIXED, ALTER, DENY)]).await;
    // Per half: the denied existing topic and 50 denied unknown ones among the others, and a
    // denied name given twice.
    let half = |tag: &str| -> Vec<CreatePartitionsTopic> {
        let mut topics = growth_half(tag);
        topics.insert(7, growth(&format!("d-old-{tag}"), 2, None));
        topics.insert(9, growth(&format!("d-dup-{tag}"), 2, None));
        for index in 0..50 {
            topics.insert(
                30 + 10 * index,
                growth(&format!("d-{tag}-{index}"), 2, None),
            );
        }
        topics.push(growth(&format!("d-dup-{tag}"), 3, None));
        topics
    };
    let (first, second) = (half("a"), half("b"));
    let whole: Vec<CreatePartitionsTopic> = first.iter().chain(&second).cloned().collect();
    let seen = denials(&node, "ALTER").len();
    let mut validated = None;
    for version in [1, 3] {
        let chunked = growths_decided_from_frame(&node);
        let whole_logged = || async {
            wait_until("the request's debug line", Duration::from_secs(30), || {
                let decided = growths_decided_from_frame(&node);
                async move { Ok((decided > chunked).then_some(())) }
            })
            .await
            .unwrap();
        };
        let answer =
            growth_validated_as_halves(&mut conn, &first, &second, version, whole_logged).await;
        assert_eq!(growths_decided_from_frame(&node), chunked + 1);
        validated = Some(answer);
    }
    let validated = validated.unwrap();
    let codes = |code: i16| answered_with(&validated, code);
    assert_eq!(
        (codes(TOPIC_AUTHORIZATION_FAILED), codes(42), codes(0)),
        (2 * 51, 2 * 2, 2 * 18)
    );
    // Each denied name logged once per request: the whole and the halves, at two versions.
    let marker = conn
        .send(&grow_partitions(vec![growth("d-marker", 2, None)], true), 3)
        .await
        .unwrap();
    assert_eq!(marker.results[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    let logged = wait_until(
        "the marker's denial in the log",
        Duration::from_secs(30),
        || {
            let logged = denials(&node, "ALTER");
            async move {
                Ok(logged
                    .last()
                    .is_some_and(|last| last == "d-marker")
                    .then(|| logged[seen..logged.len() - 1].to_vec()))
            }
        },
    )
    .await
    .unwrap();
    let mut expected: Vec<String> = validated
        .results
        .iter()
        .filter(|r| r.error_code == TOPIC_AUTHORIZATION_FAILED)
        .flat_map(|r| vec![r.name.to_string(); 4])
        .collect();
    expected.sort();
    let mut logged = logged;
    logged.sort();
    assert_eq!(logged, expected, "each denial logged once per request");
    let grown = conn.send(&grow_partitions(whole, false), 3).await.unwrap();
    assert_eq!(grown, validated, "grown as validated");
}

/// 10 MB of distinct names, CREATE checked on each: the names starting "ab" (3,844 of them)
/// are denied, every other is refused with the whole creation past the record limit; each
/// answered in request order, the node growing by less than four frames.
#[tokio::test]
async fn create_topics_naming_distinct_topics_with_acls_stays_within_four_frames() {
    let node = authorized_node();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    add_acls(
        &mut conn,
        vec![
            acl(CLUSTER, "kafka-cluster", LITERAL, CREATE, DENY),
            acl(TOPIC, "ab", PREFIXED, CREATE, DENY),
        ],
    )
    .await;
    let count = (FRAME - 40) / 14;
    let frame = create_topics_v7(count, 1, false);
    let mut body =
        answer_within_four_frames_on(&node, &mut conn, "CreateTopics with ACLs", &frame).await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(compact_length(&mut body), count as u64 + 1, "one per topic");
    let mut denied = 0;
    for index in 0..count {
        let answer = CreatableTopicResult::decode(&mut body, 7).unwrap();
        let name = four_letter_name(index);
        let expected = match name.starts_with(b"ab") {
            true => (TOPIC_AUTHORIZATION_FAILED, "Authorization failed.", -1),
            false => (
                44,
                "Unable to perform excessively large batch operation.",
                -1,
            ),
        };
        denied += usize::from(expected.0 == TOPIC_AUTHORIZATION_FAILED);
        assert_eq!(
            (
                answer.name.as_str().as_bytes(),
                answer.error_code,
                answer.error_message.as_deref().unwrap_or_default(),
                answer.num_partitions
            ),
            (&name[..], expected.0, expected.1, expected.2),
            "topic {index}"
        );
    }
    assert_eq!(denied, 3844);
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
}

/// DeleteTopics naming more topics than one chunk, without DELETE on the cluster: each name
/// named once is checked (DESCRIBE and DELETE) from the frame, the controller decides the
/// others, and the denied ones follow its answers, as the decoded request's handler answers
/// them; repeated names are INVALID_REQUEST unchecked.
#[tokio::test]
async fn delete_topics_of_many_names_checks_each_name_and_answers_the_denied_after() {
    use gregor_integration::admin::acl::DELETE;
    use gregor_integration::admin::delete_topics_by_name;
    use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
    let node = authorized_node();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let created = conn
        .send(
            &create_topics(
                ["keep-1", "no-1", "no-2", "t7"]
                    .iter()
                    .map(|name| creatable(name, 1, 1))
                    .collect(),
                false,
            ),
            7,
        )
        .await
        .unwrap();
    assert!(created.topics.iter().all(|t| t.error_code == 0));
    add_acls(
        &mut conn,
        vec![
            acl(CLUSTER, "kafka-cluster", LITERAL, DELETE, DENY),
            acl(TOPIC, "no", PREFIXED, DELETE, DENY),
        ],
    )
    .await;
    let names: Vec<String> = (0..2_000)
        .map(|index| match index {
            7 => "t7".to_owned(),
            900 => "no-1".to_owned(),
            1_500 => "keep-1".to_owned(),
            // Named twice: INVALID_REQUEST, never checked.
            300 | 1_700 => "no-2".to_owned(),
            _ if index % 100 == 33 => format!("no-missing-{index}"),
            _ => format!("missing-{index}"),
        })
        .collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let whole = conn
        .send(&delete_topics_by_name(5, &refs), 5)
        .await
        .unwrap();
    let denied = |name: &str| name.starts_with("no") && name != "no-2";
    let mut expected: Vec<DeletableTopicResult> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for name in names.iter().filter(|name| !denied(name)) {
        if !seen.insert(name.as_str()) {
            continue;
        }
        let (code, message) = match name.as_str() {
            "t7" | "keep-1" => (0, None),
            "no-2" => (42, Some("Duplicate topic name.")),
            _ => (3, Some("This server does not host this topic-partition.")),
        };
        expected.push(
            DeletableTopicResult::default()
                .with_name(Some(gregor_integration::admin::topic_name(name)))
                .with_error_code(code)
                .with_error_message(message.map(s)),
        );
    }
    for name in names.iter().filter(|name| denied(name)) {
        expected.push(
            DeletableTopicResult::default()
                .with_name(Some(gregor_integration::admin::topic_name(name)))
                .with_error_code(TOPIC_AUTHORIZATION_FAILED)
                .with_error_message(Some(s("Authorization failed."))),
        );
    }
    assert_eq!(whole.responses.len(), expected.len());
    for (index, (got, want)) in whole.responses.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "answer {index}");
    }
    // no-1 is still there; t7 and keep-1 are gone.
    let again = conn
        .send(&delete_topics_by_name(5, &["no-1", "t7"]), 5)
        .await
        .unwrap();
    let codes: Vec<i16> = again.responses.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![3, TOPIC_AUTHORIZATION_FAILED]);
}

/// DeleteTopics v6 listing more entries than one chunk, without DELETE on the cluster: each
/// name or id listed alone once is checked from the frame (an id by its topic's name), the
/// denied ones follow the controller's answers with the name shown only where it may be
/// described; repeated ids and entries with both are INVALID_REQUEST unchecked.
#[tokio::test]
async fn delete_topics_v6_of_many_entries_checks_each_name_and_id_and_answers_the_denied_after() {
    use crate::t30_request_memory::{created_ids, topic_ids};
    use gregor_integration::admin::acl::{DELETE, DESCRIBE};
    use gregor_integration::admin::{delete_topic_states, topic_name};
    use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
    use uuid::Uuid;
    let node = authorized_node();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let topics = ["keep-1", "no-1", "no-2", "no-3", "hid-1"];
    let id = created_ids(&mut conn, &topics).await;
    add_acls(
        &mut conn,
        vec![
            acl(CLUSTER, "kafka-cluster", LITERAL, DELETE, DENY),
            acl(TOPIC, "no", PREFIXED, DELETE, DENY),
            acl(TOPIC, "no", PREFIXED, DESCRIBE, ALLOW),
            acl(TOPIC, "hid", PREFIXED, DESCRIBE, DENY),
        ],
    )
    .await;
    let name = |name: &str| Some(name.to_owned());
    let nil = Uuid::nil();
    let entries: Vec<(Option<String>, Uuid)> = (0..2_000)
        .map(|index| match index {
            7 => (None, id["keep-1"]),
            900 => (None, id["no-1"]),
            950 => (None, id["hid-1"]),
            1_200 => (name("no-3"), nil),
            // Listed twice, or with both: INVALID_REQUEST, never checked.
            300 | 1_700 => (None, id["no-2"]),
            1_100 => (name("no-1"), id["no-1"]),
            _ if index % 100 == 33 => (Some(format!("no-missing-{index}")), nil),
            _ if index % 2 == 0 => (Some(format!("missing-{index}")), nil),
            _ => (None, Uuid::from_u128(0xabc_0000 + index as u128)),
        })
        .collect();
    let whole = conn
        .send(&delete_topic_states(&entries), 6)
        .await
        .unwrap()
        .responses;
    let denied = |(entry_name, entry_id): &(Option<String>, Uuid)| match entry_name {
        Some(entry_name) => entry_id.is_nil() && entry_name.starts_with("no"),
        None => [id["no-1"], id["hid-1"]].contains(entry_id),
    };
    let result = |name: Option<&str>, topic_id: Uuid, code: i16, message: Option<&str>| {
        DeletableTopicResult::default()
            .with_name(name.map(topic_name))
            .with_topic_id(topic_id)
            .with_error_code(code)
            .with_error_message(message.map(s))
    };
    let mut expected = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for entry in entries.iter().filter(|entry| !denied(entry)) {
        let (entry_name, entry_id) = entry;
        if entry_name.is_some() == entry_id.is_nil() && !seen.insert(entry.clone()) {
            continue;
        }
        expected.push(match (entry_name.as_deref(), *entry_id) {
            (None, topic_id) if topic_id == id["keep-1"] => {
                result(Some("keep-1"), topic_id, 0, None)
            }
            (None, topic_id) if topic_id == id["no-2"] => {
                result(None, topic_id, 42, Some("Duplicate topic id."))
            }
            (Some("no-1"), topic_id) => result(
                Some("no-1"),
                topic_id,
                42,
                Some("You may not specify both topic name and topic id."),
            ),
            (None, topic_id) => result(
                None,
                topic_id,
                100,
                Some("This server does not host this topic ID."),
            ),
            (entry_name, _) => result(
                entry_name,
                nil,
                3,
                Some("This server does not host this topic-partition."),
            ),
        });
    }
    for (entry_name, entry_id) in entries.iter().filter(|entry| denied(entry)) {
        let shown = match entry_name {
            Some(entry_name) => Some(entry_name.as_str()),
            None if *entry_id == id["no-1"] => Some("no-1"),
            None => None,
        };
        expected.push(result(
            shown,
            *entry_id,
            TOPIC_AUTHORIZATION_FAILED,
            Some("Authorization failed."),
        ));
    }
    crate::t30_request_memory::assert_same_entries(&whole, &expected, "DeleteTopics v6");
    // A short request, decoded whole, is checked alike.
    let short: Vec<(Option<String>, Uuid)> = [0, 300, 900, 950, 1_100, 1_200, 1_700]
        .iter()
        .map(|index| entries[*index].clone())
        .collect();
    let decoded = conn
        .send(&delete_topic_states(&short), 6)
        .await
        .unwrap()
        .responses;
    let codes: Vec<(Option<String>, i16)> = decoded
        .iter()
        .map(|r| (r.name.as_ref().map(|n| n.to_string()), r.error_code))
        .collect();
    assert_eq!(
        codes,
        [
            (Some("missing-0".to_owned()), 3),
            (None, 42),
            (Some("no-1".to_owned()), 42),
            (Some("no-1".to_owned()), TOPIC_AUTHORIZATION_FAILED),
            (None, TOPIC_AUTHORIZATION_FAILED),
            (Some("no-3".to_owned()), TOPIC_AUTHORIZATION_FAILED),
        ]
    );
    let left: Vec<String> = topic_ids(&mut conn)
        .await
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    // hid-1 is kept too, unseen by who may not describe it.
    assert_eq!(left, ["no-1", "no-2", "no-3"], "keep-1 deleted");
}
