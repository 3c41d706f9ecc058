//! LeaveGroup, OffsetCommit, OffsetDelete and ListPartitionReassignments naming many
//! members, partitions or topics (`list_chunks.rs`, `partition_list_chunks.rs`): a 10 MB frame of distinct elements keeps the node below four
//! frames with every element answered, and a request longer than a chunk is answered, and
//! changes the group, as the same elements in shorter requests do.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::{Buf, BufMut};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{
    leave_group_response, offset_commit_response, offset_delete_response, GroupId,
    JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest,
};
use kafka_protocol::protocol::{Decodable, StrBytes};

use gregor_integration::admin::{creatable, create_topics, quota_entry, s, topic_name};
use gregor_integration::frames::{compact_length, four_letter_name};
use gregor_integration::{GregorNode, KafkaConn};

use super::t30_request_memory::{
    answer_with_header_within_four_frames, answer_within_four_frames_on, assert_same_entries,
    commit, distinct, groups_ready, node_with_coordinator, FRAME,
};

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const UNKNOWN_MEMBER_ID: i16 = 25;
const MEMBER_ID_REQUIRED: i16 = 79;
const GROUP_ID_NOT_FOUND: i16 = 69;

/// Topic entries of an OffsetCommit: a name and (partition, offset) pairs.
type Commits<'a> = Vec<(&'a str, Vec<(i32, i64)>)>;

#[tokio::test]
async fn leave_group_and_offset_commit_naming_distinct_elements_stay_within_four_frames() {
    let (node, mut conn) = node_with_coordinator().await;
    // Group "g"'s offsets partition loaded: a member of it is unknown, not refused.
    pending_members(&mut conn, "g", 1).await;

    // LeaveGroup v5 of group "g": members {id, instance null, reason null, tags}.
    let (frame, count) = distinct(
        13,
        5,
        b"\x02g",
        8,
        |name, frame| {
            frame.put_u8(5);
            frame.put_slice(name);
            frame.put_slice(&[0, 0, 0]);
        },
        b"\x00",
    );
    let mut body =
        answer_within_four_frames_on(&node, &mut conn, "LeaveGroup distinct members", &frame).await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(body.get_i16(), 0, "the group's code");
    assert_eq!(
        compact_length(&mut body),
        count as u64 + 1,
        "one per member"
    );
    for index in 0..count {
        let member = leave_group_response::MemberResponse::decode(&mut body, 5).unwrap();
        assert_eq!(member.member_id.as_bytes(), &four_letter_name(index)[..]);
        assert_eq!(member.group_instance_id, None);
        assert_eq!(member.error_code, UNKNOWN_MEMBER_ID, "member {index}");
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");

    // OffsetCommit v9 of group "g" (generation -1, member "", instance null): one unknown
    // topic "t" with partitions {0, 1, 2, ..., offset 0, epoch -1, metadata null, tags}.
    let count = (FRAME - 60) / 18;
    let frame = gregor_integration::frames::flexible_list(
        8,
        9,
        b"\x02g\xff\xff\xff\xff\x01\x00\x02\x02t",
        count,
        18,
        |index, frame| {
            frame.put_i32(index as i32);
            frame.put_i64(0);
            frame.put_i32(-1);
            frame.put_slice(&[0, 0]);
        },
        b"\x00\x00",
    );
    let mut body =
        answer_within_four_frames_on(&node, &mut conn, "OffsetCommit distinct partitions", &frame)
            .await;
    assert_eq!(
        &body[..7],
        b"\x00\x00\x00\x00\x02\x02t",
        "throttle, one topic"
    );
    body.advance(7);
    assert_eq!(
        compact_length(&mut body),
        count as u64 + 1,
        "one per partition"
    );
    for index in 0..count {
        let partition =
            offset_commit_response::OffsetCommitResponsePartition::decode(&mut body, 9).unwrap();
        assert_eq!(partition.partition_index, index as i32);
        assert_eq!(partition.error_code, UNKNOWN_TOPIC_OR_PARTITION);
    }
    assert_eq!(
        &body[..],
        b"\x00\x00",
        "the topic's and the body's tagged fields"
    );

    // Distinct topics {name, [partition 0], tags}.
    let (frame, count) = distinct(
        8,
        9,
        b"\x02g\xff\xff\xff\xff\x01\x00",
        25,
        |name, frame| {
            frame.put_u8(5);
            frame.put_slice(name);
            frame.put_u8(2);
            frame.put_i32(0);
            frame.put_i64(0);
            frame.put_i32(-1);
            frame.put_slice(&[0, 0, 0]);
        },
        b"\x00",
    );
    let mut body =
        answer_within_four_frames_on(&node, &mut conn, "OffsetCommit distinct topics", &frame)
            .await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(compact_length(&mut body), count as u64 + 1, "one per topic");
    for index in 0..count {
        let topic =
            offset_commit_response::OffsetCommitResponseTopic::decode(&mut body, 9).unwrap();
        let partitions = topic.partitions.iter();
        partition_zero_unknown(
            index,
            &topic.name,
            partitions.map(|p| (p.partition_index, p.error_code)),
        );
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");

    // OffsetDelete v0 (not flexible) of group "kept", which has an offset of "t": distinct
    // topics {name, [partition 0]}.
    let created = conn
        .send(&create_topics(vec![creatable("t", 1, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    commit(&mut conn, "kept", 5).await;
    let count = (FRAME - 40) / 14;
    let mut frame = bytes::BytesMut::with_capacity(FRAME);
    frame.put_i32(0);
    frame.put_slice(b"\x00\x2f\x00\x00\x00\x00\x00\x2a\x00\x01m\x00\x04kept");
    frame.put_i32(count as i32);
    for index in 0..count {
        frame.put_i16(4);
        frame.put_slice(&four_letter_name(index));
        frame.put_i32(1);
        frame.put_i32(0);
    }
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    let mut body = answer_with_header_within_four_frames(
        &node,
        &mut conn,
        "OffsetDelete distinct topics",
        &frame,
        0,
    )
    .await;
    assert_eq!(body.get_i16(), 0, "the group's code");
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(body.get_i32(), count as i32, "one per topic");
    for index in 0..count {
        let topic =
            offset_delete_response::OffsetDeleteResponseTopic::decode(&mut body, 0).unwrap();
        let partitions = topic.partitions.iter();
        partition_zero_unknown(
            index,
            &topic.name,
            partitions.map(|p| (p.partition_index, p.error_code)),
        );
    }
    assert!(body.is_empty(), "nothing after the topics");
}

/// Checks that the answer to the `index`th topic of a list of distinct names names its
/// partition 0 alone, unknown.
fn partition_zero_unknown(index: usize, name: &str, partitions: impl Iterator<Item = (i32, i16)>) {
    assert_eq!(name.as_bytes(), &four_letter_name(index)[..]);
    let codes: Vec<(i32, i16)> = partitions.collect();
    assert_eq!(
        codes,
        vec![(0, UNKNOWN_TOPIC_OR_PARTITION)],
        "topic {index}"
    );
}

/// Shorter requests for `topics`: each topic entry cut into requests of at most 500 partitions.
fn in_pieces<'a, P: Clone>(topics: &[(&'a str, Vec<P>)]) -> Vec<Vec<(&'a str, Vec<P>)>> {
    topics
        .iter()
        .flat_map(|(name, partitions)| {
            partitions
                .chunks(500)
                .map(|piece| vec![(*name, piece.to_vec())])
        })
        .collect()
}

/// A fresh node with topic "t" of three partitions and its group coordinator loaded.
async fn node_with_topic_t() -> (GregorNode, KafkaConn) {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let created = conn
        .send(&create_topics(vec![creatable("t", 3, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    groups_ready(&mut conn).await;
    (node, conn)
}

/// Joins `count` members to `group` as far as Kafka's first step (KIP-394): each is given a
/// member id and waits as a pending member; returns their ids.
async fn pending_members(conn: &mut KafkaConn, group: &str, count: usize) -> Vec<String> {
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_session_timeout_ms(60_000)
        .with_rebalance_timeout_ms(60_000)
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(bytes::Bytes::from_static(b"\x00\x00\x00\x00\x00\x00"))]);
    let mut ids = Vec::with_capacity(count);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while ids.len() < count {
        let answer = conn.send(&join, 5).await.unwrap();
        match answer.error_code {
            MEMBER_ID_REQUIRED => ids.push(answer.member_id.to_string()),
            // The group's offsets partition is still loading or not yet led here.
            14..=16 if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            code => panic!("{group}: JoinGroup answered {code}"),
        }
    }
    ids
}

/// A LeaveGroup listing `members` (pending ones by their place in `pending`, others by id) and
/// its answers as (what each entry named, its code).
async fn leave(
    conn: &mut KafkaConn,
    version: i16,
    group: &str,
    members: &[Result<usize, String>],
    pending: &[String],
) -> (i16, Vec<(Result<usize, String>, i16)>) {
    let identities = members
        .iter()
        .map(|member| {
            let id = match member {
                Ok(at) => pending[*at].clone(),
                Err(id) => id.clone(),
            };
            MemberIdentity::default().with_member_id(StrBytes::from_string(id))
        })
        .collect();
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_members(identities);
    let answer = conn.send(&request, version).await.unwrap();
    assert_eq!(answer.members.len(), members.len(), "one answer per member");
    let answered = answer
        .members
        .iter()
        .zip(members)
        .map(|(answer, member)| {
            let named = match member {
                Ok(at) => pending[*at].as_str(),
                Err(id) => id.as_str(),
            };
            assert_eq!(answer.member_id.as_str(), named, "answers in request order");
            (member.clone(), answer.error_code)
        })
        .collect();
    (answer.error_code, answered)
}

/// `group`'s committed offsets by topic and partition.
async fn committed(conn: &mut KafkaConn, group: &str) -> BTreeMap<(String, i32), i64> {
    let fetch = OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
        .with_group_id(GroupId(s(group)))
        .with_topics(None)]);
    let answer = conn.send(&fetch, 8).await.unwrap();
    answer.groups[0]
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| ((t.name.to_string(), p.partition_index), p.committed_offset))
        })
        .collect()
}

#[tokio::test]
async fn leave_group_and_offset_commit_of_many_elements_answer_as_shorter_requests() {
    let (_node, mut conn) = node_with_topic_t().await;

    // 1,200 entries (chunks of 256): 40 pending members, each named three times (in different
    // chunks), and unknown ids, one of them repeated.
    let members: Vec<Result<usize, String>> = (0..1_200)
        .map(|index| match index % 30 {
            0 => Ok((index / 30) % 40),
            1 => Err("gone".to_owned()),
            _ => Err(format!("unknown-{index}")),
        })
        .collect();
    for version in [3, 4, 5] {
        let group = format!("leaving-v{version}");
        let pending = pending_members(&mut conn, &group, 40).await;
        let whole = leave(&mut conn, version, &group, &members, &pending).await;
        let pending = pending_members(&mut conn, &group, 40).await;
        let mut parts = (0, Vec::new());
        for part in members.chunks(250) {
            let (code, answered) = leave(&mut conn, version, &group, part, &pending).await;
            parts.0 = code;
            parts.1.extend(answered);
        }
        assert!(whole == parts, "LeaveGroup v{version}");
        let left = whole.1.iter().filter(|(_, code)| *code == 0).count();
        assert_eq!(
            left, 40,
            "LeaveGroup v{version}: each pending member leaves once"
        );
        assert!(
            whole
                .1
                .iter()
                .all(|(_, code)| *code == 0 || *code == UNKNOWN_MEMBER_ID),
            "LeaveGroup v{version}: {whole:?}"
        );
    }

    // 2,500 partitions of "t" (0-2 exist, 3-4 do not) and of an unknown topic, each partition
    // named many times with offsets that grow, so the last copy's offset is the committed one.
    let topics: Commits<'static> = vec![
        ("t", (0..1_500).map(|i| (i % 5, i64::from(i))).collect()),
        ("missing", (0..300).map(|i| (i % 2, 7)).collect()),
        ("t", (1_500..2_200).map(|i| (i % 4, i64::from(i))).collect()),
    ];
    let request = |topics: &Commits<'_>, group: &str| {
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_retention_time_ms(-1)
            .with_topics(
                topics
                    .iter()
                    .map(|(name, partitions)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(topic_name(name))
                            .with_partitions(
                                partitions
                                    .iter()
                                    .map(|(index, offset)| {
                                        OffsetCommitRequestPartition::default()
                                            .with_partition_index(*index)
                                            .with_committed_offset(*offset)
                                            .with_committed_leader_epoch(-1)
                                            .with_committed_metadata(Some(s("m")))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
    };
    let shorter = in_pieces(&topics);
    for version in [2, 7, 8, 9] {
        let whole_group = format!("whole-v{version}");
        let whole = conn
            .send(&request(&topics, &whole_group), version)
            .await
            .unwrap();
        let parts_group = format!("parts-v{version}");
        let mut parts = Vec::new();
        for piece in &shorter {
            parts.extend(
                conn.send(&request(piece, &parts_group), version)
                    .await
                    .unwrap()
                    .topics,
            );
        }
        let flatten = |topics: &[kafka_protocol::messages::offset_commit_response::OffsetCommitResponseTopic]| {
            topics
                .iter()
                .flat_map(|t| {
                    t.partitions
                        .iter()
                        .map(|p| (t.name.to_string(), p.partition_index, p.error_code))
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            whole.topics.len(),
            3,
            "OffsetCommit v{version}: one answer per topic entry"
        );
        assert_eq!(
            flatten(&whole.topics),
            flatten(&parts),
            "OffsetCommit v{version}"
        );
        let codes: std::collections::BTreeSet<i16> = flatten(&whole.topics)
            .iter()
            .map(|(_, _, code)| *code)
            .collect();
        assert_eq!(
            codes,
            [0, UNKNOWN_TOPIC_OR_PARTITION].into(),
            "OffsetCommit v{version}"
        );
        let offsets = committed(&mut conn, &whole_group).await;
        assert_eq!(
            offsets,
            committed(&mut conn, &parts_group).await,
            "v{version}"
        );
        let expected: BTreeMap<(String, i32), i64> = [
            (("t".to_owned(), 0), 2_196),
            (("t".to_owned(), 1), 2_197),
            (("t".to_owned(), 2), 2_198),
        ]
        .into();
        assert_eq!(
            offsets, expected,
            "OffsetCommit v{version}: the last copy's offset"
        );
    }
}

/// OffsetDelete naming more partitions than one chunk (a topic's partitions named many times,
/// missing ones, an unknown topic) deletes and answers as shorter requests do; for a group
/// without offsets it is refused whole, as a short one is.
#[tokio::test]
async fn offset_delete_of_many_partitions_answers_as_shorter_requests() {
    use kafka_protocol::messages::offset_delete_request::{
        OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
    };
    let (_node, mut conn) = node_with_topic_t().await;
    let topics: Vec<(&str, Vec<i32>)> = vec![
        ("t", (0..1_500).map(|i| i % 5).collect()),
        ("missing", (0..300).map(|i| i % 2).collect()),
        ("t", (0..700).map(|i| i % 4).collect()),
    ];
    let request = |topics: &[(&str, Vec<i32>)], group: &str| {
        OffsetDeleteRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(
                topics
                    .iter()
                    .map(|(name, partitions)| {
                        OffsetDeleteRequestTopic::default()
                            .with_name(topic_name(name))
                            .with_partitions(
                                partitions
                                    .iter()
                                    .map(|index| {
                                        OffsetDeleteRequestPartition::default()
                                            .with_partition_index(*index)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
    };
    let shorter = in_pieces(&topics);
    let flatten = |answer: &kafka_protocol::messages::OffsetDeleteResponse| {
        let partitions: Vec<(String, i32, i16)> = answer
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.name.to_string(), p.partition_index, p.error_code))
            })
            .collect();
        (answer.error_code, partitions)
    };
    for group in ["whole", "parts"] {
        commit(&mut conn, group, 5).await;
    }
    let whole = conn.send(&request(&topics, "whole"), 0).await.unwrap();
    let mut parts = (0, Vec::new());
    for piece in &shorter {
        let answer = conn.send(&request(piece, "parts"), 0).await.unwrap();
        let (code, partitions) = flatten(&answer);
        parts.0 = code;
        parts.1.extend(partitions);
    }
    assert_eq!(whole.topics.len(), 3, "one answer per topic entry");
    assert_eq!(flatten(&whole), parts);
    let codes: std::collections::BTreeSet<i16> = parts.1.iter().map(|(_, _, code)| *code).collect();
    assert_eq!(codes, [0, UNKNOWN_TOPIC_OR_PARTITION].into());
    for group in ["whole", "parts"] {
        assert_eq!(
            committed(&mut conn, group).await,
            BTreeMap::new(),
            "{group}"
        );
    }

    let refused = conn.send(&request(&topics, "never"), 0).await.unwrap();
    assert_eq!(
        flatten(&refused),
        (GROUP_ID_NOT_FOUND, Vec::new()),
        "a group without offsets"
    );
    let short = conn.send(&request(&shorter[0], "never"), 0).await.unwrap();
    assert_eq!(flatten(&refused), flatten(&short));
}

/// ListPartitionReassignments v0 naming distinct topics {name, [0]}: a filter served a chunk of
/// topics at a time; none exists, so none is listed.
#[tokio::test]
async fn list_partition_reassignments_naming_distinct_topics_stays_within_four_frames() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(300));
    let (frame, _) = distinct(
        46,
        0,
        b"\x00\x00\x03\xe8",
        11,
        |name, frame| {
            frame.put_u8(5);
            frame.put_slice(name);
            frame.put_u8(2);
            frame.put_i32(0);
            frame.put_u8(0);
        },
        b"\x00",
    );
    let body = answer_within_four_frames_on(
        &node,
        &mut conn,
        "ListPartitionReassignments distinct topics",
        &frame,
    )
    .await;
    // Throttle time, no error, a null message, no topics, tagged fields.
    assert_eq!(&body[..], b"\x00\x00\x00\x00\x00\x00\x00\x01\x00");
}

/// DescribeUserScramCredentials v0 naming distinct unknown users: each is answered
/// RESOURCE_NOT_FOUND in request order, served a chunk of users at a time with the answers
/// kept compressed.
#[tokio::test]
async fn describe_user_scram_credentials_naming_distinct_users_stays_within_four_frames() {
    use kafka_protocol::messages::describe_user_scram_credentials_response::DescribeUserScramCredentialsResult;
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(300));
    // Users {name, tags}, then tags.
    let (frame, count) = distinct(
        50,
        0,
        b"",
        6,
        |name, frame| {
            frame.put_u8(5);
            frame.put_slice(name);
            frame.put_u8(0);
        },
        b"\x00",
    );
    let mut body =
        answer_within_four_frames_on(&node, &mut conn, "DescribeUserScramCredentials", &frame)
            .await;
    // Throttle time, no error, an empty message (the schema's default, which Kafka keeps).
    assert_eq!(&body[..7], b"\x00\x00\x00\x00\x00\x00\x01");
    body.advance(7);
    assert_eq!(compact_length(&mut body), count as u64 + 1, "one per user");
    for index in 0..count {
        let result = DescribeUserScramCredentialsResult::decode(&mut body, 0).unwrap();
        let name = four_letter_name(index);
        assert_eq!(result.user.as_bytes(), &name[..]);
        assert_eq!(result.error_code, 91, "RESOURCE_NOT_FOUND");
        let message = result.error_message.unwrap();
        assert!(message.as_bytes().ends_with(&name), "{message}");
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
}

/// A DescribeUserScramCredentials naming more users than one chunk answers each distinct
/// user once, in the order of first appearance, a user named twice anywhere (in two chunks
/// too) DUPLICATE_RESOURCE; refused by the authorizer, it answers every listed user.
#[tokio::test]
async fn describe_user_scram_credentials_of_many_users_answers_each_distinct_user_once() {
    use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use kafka_protocol::messages::{
        AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
    };
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let upsert = AlterUserScramCredentialsRequest::default().with_upsertions(
        ["alice", "bob"]
            .iter()
            .map(|user| {
                ScramCredentialUpsertion::default()
                    .with_name(s(user))
                    .with_mechanism(1)
                    .with_iterations(4096)
                    .with_salt(bytes::Bytes::from_static(b"salt"))
                    .with_salted_password(bytes::Bytes::from(vec![7; 32]))
            })
            .collect(),
    );
    let altered = conn.send(&upsert, 0).await.unwrap();
    assert!(
        altered.results.iter().all(|r| r.error_code == 0),
        "{altered:?}"
    );
    let mut names: Vec<String> = (0..1_200).map(|i| format!("user-{i}")).collect();
    names[5] = "alice".to_owned();
    names[600] = "bob".to_owned();
    names.extend((0..100).map(|j| format!("user-{}", 3 * j)));
    names.push("bob".to_owned());
    names.push("carol".to_owned());
    let request = |names: &[String]| {
        DescribeUserScramCredentialsRequest::default().with_users(Some(
            names
                .iter()
                .map(|name| UserName::default().with_name(s(name)))
                .collect(),
        ))
    };
    let bootstrap = node.bootstrap();
    gregor_integration::wait_until("the credentials described", Duration::from_secs(30), || {
        let request = request(&["bob".to_owned()]);
        let bootstrap = bootstrap.clone();
        async move {
            let mut conn = KafkaConn::connect(&bootstrap).await?;
            let answer = conn.send(&request, 0).await?;
            Ok((answer.results[0].error_code == 0).then_some(()))
        }
    })
    .await
    .unwrap();
    let answer = conn.send(&request(&names), 0).await.unwrap();
    let mut expected: Vec<(String, i16)> = Vec::new();
    for name in &names {
        if expected.iter().any(|(seen, _)| seen == name) {
            continue;
        }
        let twice = names.iter().filter(|n| *n == name).count() > 1;
        let code = match name.as_str() {
            _ if twice => 92,
            "alice" | "bob" => 0,
            _ => 91,
        };
        expected.push((name.clone(), code));
    }
    let answered: Vec<(String, i16)> = answer
        .results
        .iter()
        .map(|r| (r.user.to_string(), r.error_code))
        .collect();
    assert_eq!(answered.len(), 1_201, "one per distinct user");
    assert_same_entries(&answered, &expected, "each distinct user once");
    assert_eq!(
        answer.results[5].credential_infos.len(),
        1,
        "alice's credential"
    );
    let duplicates = answered.iter().filter(|(_, code)| *code == 92).count();
    assert_eq!(duplicates, 101, "user-0, user-3, ... user-297 and bob");

    // Without DESCRIBE on the cluster (an authorizer, no ACLs): every listed user, repeats
    // included, is refused, without its name (Kafka's `getErrorResponse`).
    let node = GregorNode::start(&[("authorizer.class.name", "StandardAuthorizer")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let answer = conn.send(&request(&names), 0).await.unwrap();
    assert_eq!(answer.error_code, 31, "CLUSTER_AUTHORIZATION_FAILED");
    assert_eq!(answer.results.len(), names.len(), "one per listed user");
    assert!(answer.results.iter().all(|r| r.error_code == 31
        && r.user.is_empty()
        && r.error_message == answer.error_message));
}

/// An AlterUserScramCredentials deleting 10 MB of distinct users' credentials, none of which
/// exists: decided from its frame (`scram_chunks.rs`), each user answered RESOURCE_NOT_FOUND
/// in order (an answer nine times the frame, written as it is built), the node growing by
/// less than four frames.
#[tokio::test]
async fn alter_user_scram_credentials_of_distinct_users_stays_within_four_frames() {
    use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(300));
    // Deletions {name, SCRAM-SHA-256, tags}, then no upsertions and tags.
    let (frame, count) = distinct(
        51,
        0,
        b"",
        7,
        |name, frame| {
            frame.put_u8(5);
            frame.put_slice(name);
            frame.put_slice(b"\x01\x00");
        },
        b"\x01\x00",
    );
    let mut body =
        answer_within_four_frames_on(&node, &mut conn, "AlterUserScramCredentials", &frame).await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(compact_length(&mut body), count as u64 + 1, "one per user");
    for index in 0..count {
        let result = AlterUserScramCredentialsResult::decode(&mut body, 0).unwrap();
        assert_eq!(
            (
                result.user.as_bytes(),
                result.error_code,
                result.error_message.as_deref()
            ),
            (
                &four_letter_name(index)[..],
                91,
                Some("Attempt to delete a user credential that does not exist")
            ),
            "user {index}"
        );
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
}

/// An AlterUserScramCredentials of more alterations than one chunk, decided from its frame on
/// one node, answers as its deletions and its upsertions sent apart (each decoded whole) on
/// another node holding the same credentials, and leaves both with the same credentials:
/// existing and missing credentials deleted, unknown mechanisms, an empty name, users altered
/// twice (DUPLICATE_RESOURCE, or their first alteration's error), valid and refused upsertions.
#[tokio::test]
async fn alter_user_scram_credentials_of_many_users_answers_as_shorter_requests() {
    use kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    use kafka_protocol::messages::{
        AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
    };
    let upsertion = |name: &str, mechanism: i8, iterations: i32| {
        ScramCredentialUpsertion::default()
            .with_name(s(name))
            .with_mechanism(mechanism)
            .with_iterations(iterations)
            .with_salt(bytes::Bytes::from_static(b"salt"))
            .with_salted_password(bytes::Bytes::from(vec![7; 32]))
    };
    let deletion = |name: &str, mechanism: i8| {
        ScramCredentialDeletion::default()
            .with_name(s(name))
            .with_mechanism(mechanism)
    };
    let existing: Vec<_> = (0..40)
        .map(|index| upsertion(&format!("old-{index}"), 1 + (index % 2) as i8, 4096))
        .collect();
    let mut deletions = vec![deletion("", 1), deletion("old-0", 3), deletion("old-1", 2)];
    for index in 2..40 {
        deletions.push(deletion(&format!("old-{index}"), 1 + (index % 2) as i8));
        if index % 10 == 0 {
            deletions.push(deletion(&format!("old-{index}"), 1));
        }
    }
    deletions.extend((0..700).map(|index| deletion(&format!("gone-{index}"), 1)));
    let mut upsertions = vec![upsertion("new-0", 1, 4095), upsertion("new-1", 2, 16385)];
    for index in 2..700 {
        upsertions.push(upsertion(
            &format!("new-{index}"),
            1 + (index % 2) as i8,
            4096,
        ));
        if index % 100 == 0 {
            upsertions.push(upsertion(&format!("new-{index}"), 1, 8192));
        }
    }
    assert!(deletions.len() <= 1024 && upsertions.len() <= 1024);
    assert!(deletions.len() + upsertions.len() > 1024);
    let mut nodes = Vec::new();
    for _ in 0..2 {
        let node = GregorNode::start(&[]).unwrap();
        let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
        conn.set_timeout(Duration::from_secs(120));
        let request = AlterUserScramCredentialsRequest::default().with_upsertions(existing.clone());
        let created = conn.send(&request, 0).await.unwrap();
        assert!(
            created.results.iter().all(|r| r.error_code == 0),
            "{created:?}"
        );
        nodes.push((node, conn));
    }
    let whole = AlterUserScramCredentialsRequest::default()
        .with_deletions(deletions.clone())
        .with_upsertions(upsertions.clone());
    let answer = nodes[0].1.send(&whole, 0).await.unwrap();
    let apart = AlterUserScramCredentialsRequest::default().with_deletions(deletions);
    let mut expected = nodes[1].1.send(&apart, 0).await.unwrap();
    let apart = AlterUserScramCredentialsRequest::default().with_upsertions(upsertions);
    expected
        .results
        .extend(nodes[1].1.send(&apart, 0).await.unwrap().results);
    assert_eq!(answer, expected);
    let count = |code: i16| {
        answer
            .results
            .iter()
            .filter(|r| r.error_code == code)
            .count()
    };
    // Deleted: old-1 to old-39 but old-10, -20 and -30 (named twice); upserted: new-2 to
    // new-699 but the six named twice.
    assert_eq!(
        (count(0), count(91), count(92), count(93), count(33)),
        (36 + 692, 700, 3 + 6, 1 + 2, 1)
    );
    let every_user = DescribeUserScramCredentialsRequest::default().with_users(None);
    let left = nodes[0].1.send(&every_user, 0).await.unwrap();
    let right = nodes[1].1.send(&every_user, 0).await.unwrap();
    assert_eq!(
        left.results.len(),
        4 + 692,
        "old-0, -10, -20, -30 and the upserted"
    );
    assert_eq!(left, right, "both nodes hold the same credentials");

    // Without ALTER on the cluster (an authorizer, no ACLs): each distinct user refused once,
    // in order of first appearance, as the decoded request is.
    let node = GregorNode::start(&[("authorizer.class.name", "StandardAuthorizer")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let refused = conn.send(&whole, 0).await.unwrap();
    let mut users: Vec<&str> = Vec::new();
    for user in whole
        .deletions
        .iter()
        .map(|d| &d.name)
        .chain(whole.upsertions.iter().map(|u| &u.name))
    {
        if !users.contains(&user.as_str()) {
            users.push(user.as_str());
        }
    }
    let answered: Vec<(&str, i16, Option<&str>)> = refused
        .results
        .iter()
        .map(|r| (r.user.as_str(), r.error_code, r.error_message.as_deref()))
        .collect();
    let expected: Vec<_> = users
        .into_iter()
        .map(|user| (user, 31, Some("Cluster authorization failed.")))
        .collect();
    assert_eq!(answered, expected);
}

/// A node with the authorizer on which User:ANONYMOUS may do anything until ACLs say
/// otherwise (CreateAcls needs an authorizer and ALTER on the cluster).
fn acl_node() -> GregorNode {
    GregorNode::start(&[
        ("authorizer.class.name", "StandardAuthorizer"),
        ("allow.everyone.if.no.acl.found", "true"),
    ])
    .unwrap()
}

/// Two nodes with the authorizer ([`acl_node`]), each holding the ACLs `acls` creates, and a
/// connection to each.
async fn acl_nodes_holding(
    acls: Vec<kafka_protocol::messages::create_acls_request::AclCreation>,
) -> Vec<(GregorNode, KafkaConn)> {
    use kafka_protocol::messages::CreateAclsRequest;
    let mut nodes = Vec::new();
    for _ in 0..2 {
        let node = acl_node();
        let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
        conn.set_timeout(Duration::from_secs(120));
        let request = CreateAclsRequest::default().with_creations(acls.clone());
        let created = conn.send(&request, 3).await.unwrap();
        assert!(
            created.results.iter().all(|r| r.error_code == 0),
            "{created:?}"
        );
        nodes.push((node, conn));
    }
    nodes
}

/// DescribeAcls of every ACL: resource type, pattern, operation and permission ANY.
fn every_acl() -> kafka_protocol::messages::DescribeAclsRequest {
    const ANY: i8 = 1;
    kafka_protocol::messages::DescribeAclsRequest::default()
        .with_resource_type_filter(ANY)
        .with_resource_name_filter(None)
        .with_pattern_type_filter(ANY)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(ANY)
        .with_permission_type(ANY)
}

/// Sends a 10 MB v3 `api_key` request of distinct elements on a TOPIC each (the resource type,
/// a four-letter name, then `after_name`; `element_size` bytes) to a fresh node with the
/// authorizer, and checks that it grows by less than four frames and answers every element
/// `expected`, in order.
async fn every_acl_element_answered_within_four_frames<T>(
    what: &str,
    api_key: i16,
    element_size: usize,
    after_name: &[u8],
    expected: T,
) where
    T: Decodable + PartialEq + std::fmt::Debug,
{
    let node = acl_node();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(300));
    let (frame, count) = distinct(
        api_key,
        3,
        b"",
        element_size,
        |name, frame| {
            frame.put_slice(b"\x02\x05");
            frame.put_slice(name);
            frame.put_slice(after_name);
        },
        b"\x00",
    );
    let mut body = answer_within_four_frames_on(&node, &mut conn, what, &frame).await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(
        compact_length(&mut body),
        count as u64 + 1,
        "one per element"
    );
    for index in 0..count {
        assert_eq!(
            T::decode(&mut body, 3).unwrap(),
            expected,
            "element {index}"
        );
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
}

/// A CreateAcls of 10 MB of distinct topic ACLs: decided from its frame (`acl_chunks.rs`),
/// refused whole past 10,000 new ACLs as Kafka's `BoundedList` refuses it, each creation
/// answered in order, the node growing by less than four frames.
#[tokio::test]
async fn create_acls_of_distinct_acls_stays_within_four_frames() {
    use kafka_protocol::messages::create_acls_response::AclCreationResult;
    // {TOPIC, name, LITERAL, "User:x", "*", READ, ALLOW, tags}.
    let refused = AclCreationResult::default()
        .with_error_code(-1)
        .with_error_message(Some(s("A request may create at most 10000 ACLs")));
    every_acl_element_answered_within_four_frames(
        "CreateAcls",
        30,
        20,
        b"\x03\x07User:x\x02*\x03\x03\x00",
        refused,
    )
    .await;
}

/// A CreateAcls of more creations than one chunk, decided from its frame on one node, answers
/// as the same creations in two shorter requests (each decoded whole) on another, and leaves
/// both nodes with the same ACLs: new ones, ones repeated within and across the halves,
/// existing ones and invalid ones (a non-cluster name for CLUSTER, an empty name, ANY types).
#[tokio::test]
async fn create_acls_of_many_creations_answers_as_shorter_requests() {
    use gregor_integration::admin::acl::{ALLOW, CLUSTER, DENY, LITERAL, PREFIXED, TOPIC};
    use gregor_integration::admin::anonymous_acl as acl;
    use kafka_protocol::messages::CreateAclsRequest;
    const READ: i8 = 3;
    const ANY: i8 = 1;
    let old = acl(TOPIC, "old", LITERAL, READ, ALLOW);
    let mut first = vec![
        old.clone(),
        acl(CLUSTER, "not-the-cluster", LITERAL, READ, ALLOW),
        acl(TOPIC, "", LITERAL, READ, ALLOW),
        acl(ANY, "t", LITERAL, READ, ALLOW),
        acl(TOPIC, "t", ANY, READ, ALLOW),
        acl(TOPIC, "t", LITERAL, ANY, ALLOW),
        acl(TOPIC, "t", LITERAL, READ, ANY),
    ];
    first.extend(
        (0..700).map(|index| acl(TOPIC, &format!("a-{}", index % 500), LITERAL, READ, ALLOW)),
    );
    let mut second: Vec<_> = (0..700)
        .map(|index| acl(TOPIC, &format!("b-{index}"), PREFIXED, READ, DENY))
        .collect();
    second.extend((0..100).map(|index| acl(TOPIC, &format!("a-{index}"), LITERAL, READ, ALLOW)));
    let whole: Vec<_> = first.iter().chain(&second).cloned().collect();
    assert!(whole.len() > 1024 && first.len() <= 1024 && second.len() <= 1024);
    let mut nodes = acl_nodes_holding(vec![old.clone()]).await;
    for version in [1, 3] {
        let request = |creations: Vec<_>| CreateAclsRequest::default().with_creations(creations);
        let answer = nodes[0]
            .1
            .send(&request(whole.clone()), version)
            .await
            .unwrap();
        let mut halves = nodes[1]
            .1
            .send(&request(first.clone()), version)
            .await
            .unwrap();
        let second_half = nodes[1]
            .1
            .send(&request(second.clone()), version)
            .await
            .unwrap();
        halves.results.extend(second_half.results);
        assert_eq!(answer, halves, "v{version}");
        let failed = answer.results.iter().filter(|r| r.error_code != 0).count();
        assert_eq!(failed, 6, "v{version}: the invalid creations");
    }
    let left = nodes[0].1.send(&every_acl(), 3).await.unwrap();
    let right = nodes[1].1.send(&every_acl(), 3).await.unwrap();
    assert_eq!(
        left.resources.len(),
        1 + 500 + 700,
        "old, a-0 to a-499, b-0 to b-699"
    );
    assert_eq!(left, right, "both nodes hold the same ACLs");
}

/// A DeleteAcls of 10 MB of distinct filters selecting no ACL: decided from its frame
/// (`acl_chunks.rs`), each filter answered without a match, in order, the node growing by
/// less than four frames.
#[tokio::test]
async fn delete_acls_of_distinct_filters_stays_within_four_frames() {
    use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
    // {TOPIC, name, LITERAL, principal null, host null, ANY, ANY, tags}.
    let nothing = DeleteAclsFilterResult::default().with_error_message(None);
    every_acl_element_answered_within_four_frames(
        "DeleteAcls",
        31,
        12,
        b"\x03\x00\x00\x01\x01\x00",
        nothing,
    )
    .await;
}

/// A DeleteAcls of more filters than one chunk, decided from its frame on one node, answers as
/// the same filters in two shorter requests (each decoded whole) on another holding the same
/// ACLs, and leaves both with the same ACLs: filters selecting one ACL, several, the same ACLs
/// as an earlier filter of their half, none, and invalid ones.
#[tokio::test]
async fn delete_acls_of_many_filters_answers_as_shorter_requests() {
    use gregor_integration::admin::acl::{ALLOW, DENY, LITERAL, PREFIXED, TOPIC};
    use gregor_integration::admin::anonymous_acl as acl;
    use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
    use kafka_protocol::messages::DeleteAclsRequest;
    const READ: i8 = 3;
    const ANY: i8 = 1;
    let mut acls: Vec<_> = (0..300)
        .map(|index| acl(TOPIC, &format!("a-{index}"), LITERAL, READ, ALLOW))
        .collect();
    acls.extend((0..300).map(|index| acl(TOPIC, &format!("b-{index}"), LITERAL, READ, DENY)));
    acls.push(acl(TOPIC, "b-", PREFIXED, READ, ALLOW));
    let filter = |name: Option<&str>, pattern: i8, permission: i8| {
        DeleteAclsFilter::default()
            .with_resource_type_filter(TOPIC)
            .with_resource_name_filter(name.map(s))
            .with_pattern_type_filter(pattern)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_operation(ANY)
            .with_permission_type(permission)
    };
    // The first half selects a-0 to a-199 (some twice) and nothing else; the second half the
    // b- ACLs, b-7 alone and all of them with their prefixed one (a pattern MATCH).
    let mut first = vec![filter(Some("a-1"), 9, ANY)];
    for index in 0..700 {
        first.push(filter(Some(&format!("a-{}", index % 200)), LITERAL, ANY));
        if index % 7 == 0 {
            first.push(filter(Some(&format!("none-{index}")), LITERAL, ANY));
        }
    }
    const MATCH: i8 = 2;
    let mut second = vec![filter(Some("b-7"), MATCH, ANY), filter(None, ANY, DENY)];
    second.extend((0..300).map(|index| filter(Some(&format!("b-{index}")), LITERAL, DENY)));
    second.push(filter(Some("b-"), PREFIXED, ANY));
    let whole: Vec<_> = first.iter().chain(&second).cloned().collect();
    assert!(whole.len() > 1024 && first.len() <= 1024 && second.len() <= 1024);
    let mut nodes = acl_nodes_holding(acls).await;
    let request = |filters: Vec<_>| DeleteAclsRequest::default().with_filters(filters);
    // A filter without a name lists what it selects in the order of the ACLs' ids, which each
    // node draws at random: compared as sets.
    let sorted = |mut answer: kafka_protocol::messages::DeleteAclsResponse| {
        for result in &mut answer.filter_results {
            result.matching_acls.sort_by(|a, b| {
                (&a.resource_name, a.pattern_type).cmp(&(&b.resource_name, b.pattern_type))
            });
        }
        answer
    };
    let answer = sorted(nodes[0].1.send(&request(whole), 3).await.unwrap());
    let mut halves = sorted(nodes[1].1.send(&request(first), 3).await.unwrap());
    let second_half = sorted(nodes[1].1.send(&request(second), 3).await.unwrap());
    halves.filter_results.extend(second_half.filter_results);
    assert_eq!(answer.filter_results.len(), halves.filter_results.len());
    let differs = (answer.filter_results.iter().zip(&halves.filter_results))
        .position(|(whole, half)| whole != half);
    assert_eq!(
        differs,
        None,
        "{:?}",
        differs.map(|at| (&answer.filter_results[at], &halves.filter_results[at]))
    );
    let matched: usize = answer
        .filter_results
        .iter()
        .map(|r| r.matching_acls.len())
        .sum();
    assert_eq!(
        matched,
        700 + 2 + 300 + 300 + 1,
        "each filter reports what it selects"
    );
    let failed = answer
        .filter_results
        .iter()
        .filter(|r| r.error_code != 0)
        .count();
    assert_eq!(failed, 1, "the unknown pattern");
    let left = nodes[0].1.send(&every_acl(), 3).await.unwrap();
    let right = nodes[1].1.send(&every_acl(), 3).await.unwrap();
    assert_eq!(left.resources.len(), 100, "a-200 to a-299");
    assert_eq!(left, right, "both nodes hold the same ACLs");
}

/// A SyncGroup leader assigning to 10 MB of distinct ids of the form members' ids have (the
/// shortest: "-" and a UUID), which the node must decode, stays below four frames; each member
/// gets the last assignment naming it. Assignments to ids of any other form (which no member
/// has) are dropped as they are read: a 4-letter id cost 33 times its size decoded.
#[tokio::test]
async fn sync_group_assigning_to_many_ids_stays_within_four_frames() {
    use kafka_protocol::messages::SyncGroupRequest;
    let (node, mut conn) = node_with_coordinator().await;
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(s("synced")))
        .with_session_timeout_ms(60_000)
        .with_rebalance_timeout_ms(60_000)
        .with_group_instance_id(Some(s("i")))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(s("range"))
            .with_metadata(bytes::Bytes::from_static(b"\x00\x00\x00\x00\x00\x00"))]);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let joined = loop {
        let joined = conn.send(&join, 5).await.unwrap();
        if !(14..=16).contains(&joined.error_code) || std::time::Instant::now() > deadline {
            break joined;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(joined.error_code, 0, "{joined:?}");
    assert_eq!(joined.leader, joined.member_id, "the only member leads");
    let me = joined.member_id.to_string();

    let mut prefix = bytes::BytesMut::new();
    prefix.put_slice(b"\x07synced");
    prefix.put_i32(joined.generation_id);
    for field in [me.as_str(), "i", "consumer", "range"] {
        prefix.put_u8(field.len() as u8 + 1);
        prefix.put_slice(field.as_bytes());
    }
    // {member id, assignment, tags}: this member's first, then distinct ids, then its own last.
    let own = |assignment: &[u8], frame: &mut bytes::BytesMut| {
        frame.put_u8(me.len() as u8 + 1);
        frame.put_slice(me.as_bytes());
        frame.put_u8(assignment.len() as u8 + 1);
        frame.put_slice(assignment);
        frame.put_u8(0);
    };
    let count = (FRAME - 200) / 40;
    let frame = gregor_integration::frames::flexible_list(
        14,
        5,
        &prefix,
        count + 2,
        40,
        |index, frame| match index {
            0 => own(b"stale", frame),
            _ if index == count + 1 => own(b"mine", frame),
            _ => {
                let id = format!("-{}", uuid::Uuid::from_u128(index as u128));
                frame.put_u8(38);
                frame.put_slice(id.as_bytes());
                frame.put_slice(&[1, 0]);
            }
        },
        b"\x00",
    );
    let mut body =
        answer_within_four_frames_on(&node, &mut conn, "SyncGroup member-form ids", &frame).await;
    let answer = kafka_protocol::messages::SyncGroupResponse::decode(&mut body, 5).unwrap();
    assert_eq!(answer.error_code, 0);
    assert_eq!(
        &answer.assignment[..],
        b"mine",
        "the last assignment naming the member"
    );

    // A later SyncGroup of the stable group answers the same assignment, whatever it lists.
    let again = SyncGroupRequest::default()
        .with_group_id(GroupId(s("synced")))
        .with_generation_id(joined.generation_id)
        .with_member_id(joined.member_id.clone())
        .with_group_instance_id(Some(s("i")))
        .with_protocol_type(Some(s("consumer")))
        .with_protocol_name(Some(s("range")));
    let answer = conn.send(&again, 5).await.unwrap();
    assert_eq!(
        (answer.error_code, &answer.assignment[..]),
        (0, &b"mine"[..])
    );
}

/// AlterClientQuotas of distinct client ids, each setting a produce rate: past 10,000 records
/// every entity is refused whole (`quota_chunks.rs`), each answered once with its entity.
#[tokio::test]
async fn alter_client_quotas_of_distinct_entities_stays_within_four_frames() {
    use kafka_protocol::messages::alter_client_quotas_response::EntryData;
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(300));
    // Entries {entity [{"client-id", name, tags}], ops [{"producer_byte_rate", 1024.0, false,
    // tags}], tags}, then validate_only false and tags.
    let (frame, count) = distinct(
        49,
        1,
        b"",
        48,
        |name, frame| {
            frame.put_slice(b"\x02\x0aclient-id\x05");
            frame.put_slice(name);
            frame.put_slice(b"\x00\x02\x13producer_byte_rate");
            frame.put_f64(1024.0);
            frame.put_slice(b"\x00\x00\x00");
        },
        b"\x00\x00",
    );
    let mut body =
        answer_within_four_frames_on(&node, &mut conn, "AlterClientQuotas", &frame).await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(
        compact_length(&mut body),
        count as u64 + 1,
        "one per entity"
    );
    for index in 0..count {
        let entry = EntryData::decode(&mut body, 1).unwrap();
        assert_eq!(
            (entry.error_code, entry.error_message.as_deref()),
            (
                44,
                Some("Unable to perform excessively large batch operation.")
            ),
            "entity {index}"
        );
        assert_eq!(entry.entity.len(), 1);
        assert_eq!(entry.entity[0].entity_type.as_str(), "client-id");
        assert_eq!(
            entry.entity[0].entity_name.as_deref().map(str::as_bytes),
            Some(&four_letter_name(index)[..])
        );
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
}

/// Entries of one half of a long request, `half` naming its entities apart from the other
/// half's: distinct client ids with rates and removals, an entity sent in two orders, a type
/// named twice (its last name counts), an entity of more than four parts equal to a small one,
/// invalid entities and values, a key named three times.
fn quota_half(
    half: usize,
) -> Vec<kafka_protocol::messages::alter_client_quotas_request::EntryData> {
    let name = |what: &str| format!("{what}-{half}");
    let rate = [("producer_byte_rate", 1024.0 * (half + 1) as f64, false)];
    let mut entries: Vec<_> = (0..580)
        .map(|index| {
            let ops = match index % 3 {
                0 => vec![("producer_byte_rate", 1024.0, false)],
                1 => vec![
                    ("consumer_byte_rate", 2048.0, false),
                    ("request_percentage", 50.0, false),
                ],
                _ => vec![("producer_byte_rate", 0.0, true)],
            };
            quota_entry(&[("client-id", Some(&name(&format!("c{index}"))))], &ops)
        })
        .collect();
    let (a, b, k, r) = (name("a"), name("b"), name("k"), name("r"));
    let more = vec![
        quota_entry(&[("user", Some(&a)), ("client-id", Some(&b))], &rate),
        quota_entry(&[("client-id", Some(&b)), ("user", Some(&a))], &rate),
        quota_entry(&[("user", Some("x")), ("user", Some(&a))], &rate),
        quota_entry(
            &[
                ("user", Some("q")),
                ("user", Some("z")),
                ("client-id", Some(&k)),
                ("user", Some("q")),
                ("user", Some(&r)),
            ],
            &rate,
        ),
        quota_entry(&[("client-id", Some(&k)), ("user", Some(&r))], &rate),
        quota_entry(&[("group", Some(&a))], &rate),
        quota_entry(&[(["client-id", "user"][half], Some(""))], &rate),
        quota_entry(&[("ip", Some("10.0.0.1")), ("user", Some(&a))], &rate),
        quota_entry(
            &[("ip", Some(&name("not an ip")))],
            &[("connection_creation_rate", 1.0, false)],
        ),
        quota_entry(&[("user", Some(&b))], &[("producer_byte_rate", 1.5, false)]),
        quota_entry(
            &[("client-id", Some(&a))],
            &[
                ("request_percentage", 1.0, false),
                ("request_percentage", 2.0, false),
                ("request_percentage", 3.0, false),
            ],
        ),
        quota_entry(&[("client-id", Some(&name("c5")))], &rate),
    ];
    for (index, extra) in more.into_iter().enumerate() {
        entries.insert(index * 45 + 7, extra);
    }
    entries
}

/// An AlterClientQuotas of more entries than one chunk, decided from its frame on one node,
/// answers as its two halves (each decoded whole, no entity in both) on another node, and
/// leaves both with the same quotas; validated only, it writes nothing; refused without
/// ALTER_CONFIGS on the cluster, every entry is answered as it was sent.
#[tokio::test]
async fn alter_client_quotas_of_many_entries_answers_as_shorter_requests() {
    use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
    let halves = [quota_half(0), quota_half(1)];
    assert!(halves.iter().all(|half| half.len() <= 1024));
    let whole: Vec<_> = halves.concat();
    let every_quota = DescribeClientQuotasRequest::default().with_strict(false);
    let mut nodes = Vec::new();
    for _ in 0..2 {
        let node = GregorNode::start(&[]).unwrap();
        let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
        conn.set_timeout(Duration::from_secs(120));
        // Quotas to remove: the first half's client ids c2, c5, c8, ...
        let existing = AlterClientQuotasRequest::default().with_entries(
            (2..580)
                .step_by(3)
                .map(|index| {
                    quota_entry(
                        &[("client-id", Some(&format!("c{index}-0")))],
                        &[("producer_byte_rate", 7.0, false)],
                    )
                })
                .collect(),
        );
        let created = conn.send(&existing, 1).await.unwrap();
        assert!(created.entries.iter().all(|e| e.error_code == 0));
        nodes.push((node, conn));
    }
    for validate_only in [true, false] {
        let request = AlterClientQuotasRequest::default()
            .with_entries(whole.clone())
            .with_validate_only(validate_only);
        let answer = nodes[0].1.send(&request, 1).await.unwrap();
        let mut expected = Vec::new();
        for half in &halves {
            let request = AlterClientQuotasRequest::default()
                .with_entries(half.clone())
                .with_validate_only(validate_only);
            expected.extend(nodes[1].1.send(&request, 1).await.unwrap().entries);
        }
        assert_same_entries(
            &answer.entries,
            &expected,
            &format!("validate_only {validate_only}"),
        );
        let codes = |code: i16| {
            answer
                .entries
                .iter()
                .filter(|e| e.error_code == code)
                .count()
        };
        // Per half: 580 client ids (c5 named twice) and 12 more entries naming 9 more
        // entities, 7 of them invalid and 2 named twice.
        assert_eq!((codes(0), codes(42)), (2 * (580 - 1), 2 * (1 + 7 + 2)));
        let left = nodes[0].1.send(&every_quota, 1).await.unwrap();
        let right = nodes[1].1.send(&every_quota, 1).await.unwrap();
        let sorted = |response: kafka_protocol::messages::DescribeClientQuotasResponse| {
            let mut entries = response.entries.unwrap_or_default();
            entries.sort_by_key(|entry| format!("{:?}", entry.entity));
            entries
        };
        let (left, right) = (sorted(left), sorted(right));
        assert_eq!(left, right, "both nodes hold the same quotas");
        let held = match validate_only {
            true => 193,
            // c0, c3, ... and c1, c4, ... of each half (c2, c5, ... removed), and the user
            // and client id named in two orders, whose first entry keeps its change although
            // it is answered as a duplicate, as in Kafka.
            false => 2 * (194 + 193) + 2,
        };
        assert_eq!(left.len(), held, "validate_only {validate_only}");
    }

    // Without ALTER_CONFIGS on the cluster (an authorizer, no ACLs): every entry refused, its
    // entity as sent.
    let node = GregorNode::start(&[("authorizer.class.name", "StandardAuthorizer")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let request = AlterClientQuotasRequest::default().with_entries(whole.clone());
    let refused = conn.send(&request, 1).await.unwrap();
    assert_eq!(refused.entries.len(), whole.len());
    for (answer, entry) in refused.entries.iter().zip(&whole) {
        assert_eq!(
            (answer.error_code, answer.error_message.as_deref()),
            (31, Some("Cluster authorization failed."))
        );
        let sent: Vec<_> = entry
            .entity
            .iter()
            .map(|p| (p.entity_type.as_str(), p.entity_name.as_deref()))
            .collect();
        let echoed: Vec<_> = answer
            .entity
            .iter()
            .map(|p| (p.entity_type.as_str(), p.entity_name.as_deref()))
            .collect();
        assert_eq!(echoed, sent);
    }
}

/// A static member's JoinGroup of `protocols` (name, metadata) to group "gp", at `version`.
fn static_join(instance: &str, protocols: &[(String, Vec<u8>)], version: i16) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s("gp")))
        .with_session_timeout_ms(60_000)
        .with_rebalance_timeout_ms(60_000)
        .with_group_instance_id(Some(StrBytes::from_string(instance.to_owned())))
        .with_protocol_type(s("consumer"))
        .with_protocols(
            protocols
                .iter()
                .map(|(name, metadata)| {
                    JoinGroupRequestProtocol::default()
                        .with_name(StrBytes::from_string(name.clone()))
                        .with_metadata(bytes::Bytes::from(metadata.clone()))
                })
                .collect(),
        )
        .with_reason((version >= 8).then(|| s("many")))
}

/// Members listing more protocols than a node decodes (kept in their frames) and one listing
/// three (decoded) join one group: the protocol chosen is the one most members prefer among
/// those all of them list, and the leader is given each member's metadata for it, whatever
/// form each request took.
#[tokio::test]
async fn join_group_of_many_protocols_chooses_among_those_every_member_lists() {
    let (node, _conn) = node_with_topic_t().await;
    let protocol = |name: String, tag: &str| {
        let metadata = format!("{tag}-{name}").into_bytes();
        (name, metadata)
    };
    // "a" lists p0 to p1499 (prefers p3 to p7), "b" p1499 down to p0 after one only it
    // lists (prefers p7), "c" three, p7 first.
    let a: Vec<(String, Vec<u8>)> = (0..1_500).map(|i| protocol(format!("p{i}"), "a")).collect();
    let b: Vec<(String, Vec<u8>)> = std::iter::once(protocol("only-b".to_owned(), "b"))
        .chain((0..1_500).rev().map(|i| protocol(format!("p{i}"), "b")))
        .collect();
    let c: Vec<(String, Vec<u8>)> = ["p7", "p3", "zz"]
        .iter()
        .map(|name| protocol((*name).to_owned(), "c"))
        .collect();
    let join = |instance: &'static str, protocols: Vec<(String, Vec<u8>)>, version: i16| {
        let address = node.bootstrap();
        async move {
            let mut conn = KafkaConn::connect(&address).await.unwrap();
            conn.set_timeout(Duration::from_secs(120));
            conn.send(&static_join(instance, &protocols, version), version)
                .await
                .unwrap()
        }
    };
    let (a, b, c) = tokio::join!(join("a", a, 9), join("b", b, 5), join("c", c, 7));
    for (who, answer) in [("a", &a), ("b", &b), ("c", &c)] {
        assert_eq!(answer.error_code, 0, "{who}");
        assert_eq!(answer.protocol_name.as_deref(), Some("p7"), "{who}");
    }
    let leader = [&a, &b, &c]
        .into_iter()
        .find(|answer| answer.leader == answer.member_id)
        .expect("a leader");
    let mut metadata: Vec<(String, String)> = leader
        .members
        .iter()
        .map(|member| {
            (
                member
                    .group_instance_id
                    .as_deref()
                    .unwrap_or_default()
                    .to_owned(),
                String::from_utf8(member.metadata.to_vec()).unwrap(),
            )
        })
        .collect();
    metadata.sort();
    assert_eq!(
        metadata,
        [("a", "a-p7"), ("b", "b-p7"), ("c", "c-p7")].map(|(i, m)| (i.to_owned(), m.to_owned()))
    );
}

/// A static member's JoinGroup of 10 MB of distinct protocols: kept in its frame, below four
/// frames, and the group chooses its first protocol.
#[tokio::test]
async fn join_group_of_distinct_protocols_stays_within_four_frames() {
    let (node, mut conn) = node_with_coordinator().await;
    // Group "g", session 10 s, rebalance 10 s, member "", instance "i", "consumer"; protocols
    // {name, empty metadata, tags}; then reason null and tags.
    let prefix = b"\x02g\x00\x00\x27\x10\x00\x00\x27\x10\x01\x02i\x09consumer";
    let (frame, count) = distinct(
        11,
        9,
        prefix,
        7,
        |name, frame| {
            frame.put_u8(5);
            frame.put_slice(name);
            frame.put_slice(b"\x01\x00");
        },
        b"\x00\x00",
    );
    let mut body =
        answer_within_four_frames_on(&node, &mut conn, "JoinGroup distinct protocols", &frame)
            .await;
    let mut framed = bytes::BytesMut::new();
    framed.put_slice(&[0, 0, 0, 42, 0]);
    framed.put_slice(&body.split_off(0));
    let (_, answer) =
        gregor_integration::decode_response::<JoinGroupRequest>(framed.freeze(), 9).unwrap();
    assert_eq!(answer.error_code, 0);
    assert_eq!(
        answer.protocol_name.as_deref().map(str::as_bytes),
        Some(&four_letter_name(0)[..])
    );
    assert_eq!(answer.members.len(), 1);
    assert!(count > 1_000_000, "{count} protocols");
}

/// A ConsumerGroupHeartbeat joining group "cg" as `member`, subscribed to `names`.
fn consumer_join(
    member: &str,
    names: &[String],
) -> kafka_protocol::messages::ConsumerGroupHeartbeatRequest {
    kafka_protocol::messages::ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s("cg")))
        .with_member_id(StrBytes::from_string(member.to_owned()))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(5_000)
        .with_subscribed_topic_names(Some(names.iter().map(|n| topic_name(n)).collect()))
        .with_topic_partitions(Some(Vec::new()))
}

/// ConsumerGroupHeartbeats subscribing to more names than a node decodes (kept in their
/// frames) and to fewer (decoded) keep each member's names once, as ConsumerGroupDescribe
/// shows them; a subscription whose record `__consumer_offsets` cannot take (10 MB of distinct
/// names, over its `max.message.bytes`) is refused with UNKNOWN_SERVER_ERROR below four frames,
/// and the group is left as it was.
#[tokio::test]
async fn consumer_group_heartbeat_of_many_names_keeps_each_once_and_refuses_an_unwritable_one() {
    use kafka_protocol::messages::ConsumerGroupDescribeRequest;
    let (node, mut conn) = node_with_topic_t().await;
    // 1,500 names, each named twice, then "t": framed; 1,000 names once: decoded.
    let mut framed: Vec<String> = (0..1_500).map(|i| format!("n{}", i % 750)).collect();
    framed.push("t".to_owned());
    let decoded: Vec<String> = (0..1_000).map(|i| format!("d{i}")).collect();
    // As a client does, a join is retried while the group's coordinator is still loading its
    // partition of __consumer_offsets (COORDINATOR_LOAD_IN_PROGRESS).
    const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    for (member, names) in [("framed", &framed), ("decoded", &decoded)] {
        let answer = loop {
            let answer = conn.send(&consumer_join(member, names), 1).await.unwrap();
            if answer.error_code != COORDINATOR_LOAD_IN_PROGRESS
                || std::time::Instant::now() >= deadline
            {
                break answer;
            }
            tokio::time::sleep(gregor_integration::wait::POLL_INTERVAL).await;
        };
        assert_eq!(answer.error_code, 0, "{member}: {:?}", answer.error_message);
    }
    let describe = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s("cg"))]);
    let before = conn.send(&describe, 1).await.unwrap();
    let subscribed: BTreeMap<String, Vec<String>> = before.groups[0]
        .members
        .iter()
        .map(|m| {
            let names = m
                .subscribed_topic_names
                .iter()
                .map(|n| n.to_string())
                .collect();
            (m.member_id.to_string(), names)
        })
        .collect();
    let once = |names: &[String]| {
        let mut names = names.to_vec();
        names.sort();
        names.dedup();
        names
    };
    assert_eq!(subscribed["framed"], once(&framed));
    assert_eq!(subscribed["decoded"], once(&decoded));

    // Header v2 (api 68, v1); group "cg", member "framed", epoch 0, instance and rack null,
    // rebalance 5 s; the names; regex and assignor null, no owned partitions, tags.
    let prefix = b"\x03cg\x07framed\x00\x00\x00\x00\x00\x00\x00\x00\x13\x88";
    let (frame, count) = distinct(
        68,
        1,
        prefix,
        5,
        |name, frame| {
            frame.put_u8(5);
            frame.put_slice(name);
        },
        b"\x00\x00\x01\x00",
    );
    let mut body =
        answer_within_four_frames_on(&node, &mut conn, "ConsumerGroupHeartbeat names", &frame)
            .await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(body.get_i16(), -1, "UNKNOWN_SERVER_ERROR for {count} names");
    let after = conn.send(&describe, 1).await.unwrap();
    assert_eq!(after.groups, before.groups, "nothing changed");
}
