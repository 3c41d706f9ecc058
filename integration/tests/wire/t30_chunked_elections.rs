//! ElectLeaders and AlterPartitionReassignments naming many partitions (`election_chunks.rs`,
//! `reassignment_chunks.rs`): a 10 MB frame of distinct
//! partitions keeps the node below four frames with every partition answered, and a request
//! longer than a chunk answers as the same topics in shorter requests.

use std::time::Duration;

use bytes::{Buf, BufMut};
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::elect_leaders_response::ReplicaElectionResult;
use kafka_protocol::messages::{ElectLeadersRequest, TopicName};
use kafka_protocol::protocol::Decodable;

use gregor_integration::admin::{creatable, create_topics, s};
use gregor_integration::frames::compact_length;
use gregor_integration::{GregorNode, KafkaConn};

use super::t30_request_memory::{answer_within_four_frames_on, assert_same_entries, FRAME};

/// ElectLeaders v2 of one topic "t" naming partitions 0, 1, 2, ... (the node has no such
/// topic): each partition answered UNKNOWN_TOPIC_OR_PARTITION with Kafka's message naming it,
/// an answer eight times the frame written as it is built.
#[tokio::test]
async fn elect_leaders_of_distinct_partitions_stays_within_four_frames() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(300));
    let count = (FRAME - 40) / 4;
    // PREFERRED, one topic {"t", partitions, tags}, then timeout and tags.
    let frame = gregor_integration::frames::flexible_list(
        43,
        2,
        b"\x00\x02\x02t",
        count,
        4,
        |index, frame| frame.put_i32(index as i32),
        b"\x00\x00\x00\x03\xe8\x00",
    );
    let mut body = answer_within_four_frames_on(&node, &mut conn, "ElectLeaders", &frame).await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(body.get_i16(), 0, "the request's error code");
    assert_eq!(compact_length(&mut body), 2, "one topic");
    let topic = ReplicaElectionResult::decode(&mut body, 2).unwrap();
    assert_eq!(topic.topic.as_str(), "t");
    assert_eq!(topic.partition_result.len(), count);
    for (index, partition) in topic.partition_result.iter().enumerate() {
        assert_eq!(
            (
                partition.partition_id,
                partition.error_code,
                partition.error_message.as_deref()
            ),
            (index as i32, 3, Some("No such topic as t")),
            "partition {index}"
        );
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
}

fn topic(name: &str, partitions: impl IntoIterator<Item = i32>) -> TopicPartitions {
    TopicPartitions::default()
        .with_topic(TopicName(s(name)))
        .with_partitions(partitions.into_iter().collect())
}

/// An ElectLeaders naming 1,204 partitions (each of topic "t"'s 300 four times, an unknown
/// topic, an unknown partition, a topic naming none), decided from its frame, answers as its
/// two halves do, at each version and election type (an unknown type refuses the request
/// whole); refused without ALTER on the cluster, every partition carries the error and no
/// message.
#[tokio::test]
async fn elect_leaders_of_many_partitions_answers_as_shorter_requests() {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let created = conn
        .send(&create_topics(vec![creatable("t", 300, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    let first = vec![
        topic("t", 0..300),
        topic("gone", [1, 2]),
        topic("t", 0..300),
    ];
    let second = vec![
        topic("t", [5000, 3]),
        topic("t", 0..300),
        topic("t", (0..300).rev()),
        topic("t", []),
    ];
    let whole: Vec<_> = first.iter().chain(&second).cloned().collect();
    let request = |topics: &[TopicPartitions], election_type: i8| {
        ElectLeadersRequest::default()
            .with_election_type(election_type)
            .with_topic_partitions(Some(topics.to_vec()))
            .with_timeout_ms(5000)
    };
    for (version, election_type) in [(0, 0), (1, 1), (2, 0), (2, 1), (2, 9)] {
        let answer = conn
            .send(&request(&whole, election_type), version)
            .await
            .unwrap();
        let mut expected = Vec::new();
        for half in [&first, &second] {
            let part = conn
                .send(&request(half, election_type), version)
                .await
                .unwrap();
            assert_eq!(part.error_code, answer.error_code);
            expected.extend(part.replica_election_results);
        }
        assert_eq!(expected.len(), 7);
        assert_same_entries(
            &answer.replica_election_results,
            &expected,
            &format!("v{version} type {election_type}"),
        );
        let codes: Vec<i16> = answer
            .replica_election_results
            .iter()
            .flat_map(|t| &t.partition_result)
            .map(|p| p.error_code)
            .collect();
        assert_eq!(codes.len(), 1204);
        let not_needed = codes.iter().filter(|c| **c == 84).count();
        match election_type {
            9 => assert!(codes.iter().all(|c| *c == 42) && answer.error_code == 42),
            _ => assert_eq!(not_needed, 1201, "v{version} type {election_type}"),
        }
    }

    let node = GregorNode::start(&[("authorizer.class.name", "StandardAuthorizer")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let refused = conn.send(&request(&whole, 0), 2).await.unwrap();
    assert_eq!(refused.error_code, 31);
    let partitions: Vec<_> = refused
        .replica_election_results
        .iter()
        .flat_map(|t| &t.partition_result)
        .collect();
    assert_eq!(partitions.len(), 1204);
    assert!(partitions
        .iter()
        .all(|p| p.error_code == 31 && p.error_message.is_none()));
}

/// AlterPartitionReassignments v1 cancelling partitions 0, 1, 2, ... of a topic "t" the node
/// does not have (`reassignment_chunks.rs`): each partition answered UNKNOWN_TOPIC_OR_PARTITION
/// with Kafka's message, an answer about six times the frame written as it is built.
#[tokio::test]
async fn alter_partition_reassignments_of_distinct_partitions_stays_within_four_frames() {
    use kafka_protocol::messages::alter_partition_reassignments_response::ReassignableTopicResponse;
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(300));
    let count = (FRAME - 40) / 6;
    // Timeout, allow_replication_factor_change, one topic {"t", partitions {index, null
    // replicas, tags}, tags}, then tags.
    let frame = gregor_integration::frames::flexible_list(
        45,
        1,
        b"\x00\x00\x03\xe8\x01\x02\x02t",
        count,
        6,
        |index, frame| {
            frame.put_i32(index as i32);
            frame.put_slice(b"\x00\x00");
        },
        b"\x00\x00",
    );
    let mut body =
        answer_within_four_frames_on(&node, &mut conn, "AlterPartitionReassignments", &frame).await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(body.get_u8(), 1, "allow_replication_factor_change");
    assert_eq!(body.get_i16(), 0, "the request's error code");
    assert_eq!(body.get_u8(), 0, "a null message");
    assert_eq!(compact_length(&mut body), 2, "one topic");
    let topic = ReassignableTopicResponse::decode(&mut body, 1).unwrap();
    assert_eq!(topic.name.as_str(), "t");
    assert_eq!(topic.partitions.len(), count);
    for (index, partition) in topic.partitions.iter().enumerate() {
        assert_eq!(
            (
                partition.partition_index,
                partition.error_code,
                partition.error_message.as_deref()
            ),
            (index as i32, 3, Some("Unable to find a topic named t.")),
            "partition {index}"
        );
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
}

/// An AlterPartitionReassignments naming 1,204 partitions (cancellations of idle partitions,
/// moves to where they are, unknown brokers, an unknown topic and partition), decided from its
/// frame, answers as its two halves do at each version; refused without ALTER on the cluster,
/// every partition carries the error.
#[tokio::test]
async fn alter_partition_reassignments_of_many_partitions_answers_as_shorter_requests() {
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::{AlterPartitionReassignmentsRequest, BrokerId};
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let created = conn
        .send(&create_topics(vec![creatable("t", 300, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    // The embedded default node is node 1.
    let node_id = 1;
    let topic = |name: &str, partitions: Vec<(i32, Option<Vec<i32>>)>| {
        ReassignableTopic::default()
            .with_name(TopicName(s(name)))
            .with_partitions(
                partitions
                    .into_iter()
                    .map(|(index, replicas)| {
                        ReassignablePartition::default()
                            .with_partition_index(index)
                            .with_replicas(
                                replicas.map(|ids| ids.into_iter().map(BrokerId).collect()),
                            )
                    })
                    .collect(),
            )
    };
    let cancel = |range: std::ops::Range<i32>| range.map(|i| (i, None)).collect::<Vec<_>>();
    let stay =
        |range: std::ops::Range<i32>| range.map(|i| (i, Some(vec![node_id]))).collect::<Vec<_>>();
    let first = vec![
        topic("t", cancel(0..300)),
        topic("gone", vec![(1, None), (2, Some(vec![node_id]))]),
        topic("t", stay(0..300)),
    ];
    let second = vec![
        topic("t", vec![(5000, None), (3, Some(vec![node_id + 1]))]),
        topic("t", cancel(0..300)),
        topic("t", stay(0..300)),
        topic("t", Vec::new()),
    ];
    let whole: Vec<_> = first.iter().chain(&second).cloned().collect();
    let request = |topics: &[ReassignableTopic]| {
        AlterPartitionReassignmentsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(topics.to_vec())
    };
    for version in [0, 1] {
        let answer = conn.send(&request(&whole), version).await.unwrap();
        let mut expected = Vec::new();
        for half in [&first, &second] {
            let part = conn.send(&request(half), version).await.unwrap();
            assert_eq!(part.error_code, answer.error_code);
            expected.extend(part.responses);
        }
        assert_same_entries(&answer.responses, &expected, &format!("v{version}"));
        let codes: Vec<i16> = answer
            .responses
            .iter()
            .flat_map(|t| &t.partitions)
            .map(|p| p.error_code)
            .collect();
        assert_eq!(codes.len(), 1204);
        let count = |code: i16| codes.iter().filter(|c| **c == code).count();
        assert_eq!((count(85), count(0), count(3), count(39)), (600, 600, 3, 1));
    }

    let node = GregorNode::start(&[("authorizer.class.name", "StandardAuthorizer")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let refused = conn.send(&request(&whole), 1).await.unwrap();
    assert_eq!(refused.error_code, 31);
    let partitions: Vec<_> = refused
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .collect();
    assert_eq!(partitions.len(), 1204);
    assert!(partitions.iter().all(|p| p.error_code == 31));
}
