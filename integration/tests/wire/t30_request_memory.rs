//! One request must not make the node allocate many times its frame. The worst request found
//! (issue #11: a Metadata v1 request naming one empty topic name per two bytes, which took a
//! node to 1.28 GB for a 9.5 MB frame) at 10 MB: the node's peak resident memory grows by less
//! than four times the frame, and the answer names the topic once. Then, for each API whose
//! answer has one entry per element, a 10 MB frame repeating its smallest element: the node
//! stays below four frames while its answer (up to 15 times the frame) carries one entry per
//! element, each the same bytes.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use std::time::Duration;

use gregor_integration::admin::{
    creatable, create_topics, delete_topics_by_name, metadata, s, topic_name,
};
use gregor_integration::frames::{compact_length, create_topics_v7, four_letter_name};
use gregor_integration::{decode_response, wait_until, GregorNode, KafkaConn};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::{
    alter_client_quotas_response, delete_topics_response, describe_configs_response,
    describe_groups_response, incremental_alter_configs_response, list_offsets_response,
    offset_commit_response, AlterClientQuotasRequest, MetadataRequest, ResponseHeader,
};
use kafka_protocol::protocol::Decodable;

pub(crate) const FRAME: usize = 10_000_000;

#[tokio::test]
async fn a_metadata_request_repeating_one_topic_stays_within_four_frames() {
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(std::time::Duration::from_secs(120));
    // Header v1 (api 3, v1, correlation 42, client id "m"), then the topic list.
    let names = (FRAME - 20) / 2;
    let mut frame = BytesMut::with_capacity(FRAME);
    frame.put_i32(0);
    frame.put_i16(3);
    frame.put_i16(1);
    frame.put_i32(42);
    frame.put_i16(1);
    frame.put_u8(b'm');
    frame.put_i32(names as i32);
    frame.put_bytes(0, names * 2);
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());

    let before = node.resident_memory().unwrap();
    conn.write_raw(&frame).await.unwrap();
    let answer = conn.read_frame().await.unwrap().unwrap();
    let after = node.resident_memory().unwrap();

    let (header, response) = decode_response::<MetadataRequest>(answer, 1).unwrap();
    assert_eq!(header.correlation_id, 42);
    let topics: Vec<_> = response
        .topics
        .iter()
        .map(|t| (t.name.as_ref().map(|n| n.to_string()), t.error_code))
        .collect();
    // One distinct name, answered once: "" is not a valid topic name (INVALID_TOPIC_EXCEPTION).
    assert_eq!(topics, vec![(Some(String::new()), 17)]);
    let growth = after.peak.saturating_sub(before.current);
    assert!(
        growth < 4 * FRAME as u64,
        "a {FRAME}-byte Metadata request grew the node's peak resident memory by {growth} bytes"
    );
}

/// A flexible request frame (header v2, client id "m"): `prefix`, then a list of `FRAME`'s
/// worth of `element`, then `suffix`. Returns the frame and the element count.
fn repeating(
    api_key: i16,
    version: i16,
    prefix: &[u8],
    element: &[u8],
    suffix: &[u8],
) -> (BytesMut, usize) {
    let count = (FRAME - 30 - prefix.len() - suffix.len()) / element.len();
    (
        listing(api_key, version, prefix, element, count, suffix),
        count,
    )
}

/// A flexible request frame (header v2, client id "m"): `prefix`, a list of `count` times
/// `element`, `suffix`.
fn listing(
    api_key: i16,
    version: i16,
    prefix: &[u8],
    element: &[u8],
    count: usize,
    suffix: &[u8],
) -> BytesMut {
    gregor_integration::frames::flexible_list(
        api_key,
        version,
        prefix,
        count,
        element.len(),
        |_, frame| frame.put_slice(element),
        suffix,
    )
}

/// Sends `frame` to a fresh node and returns its answer's body (header read), checking that
/// the node's peak resident memory grew by less than four frames.
async fn answer_within_four_frames(what: &str, frame: &[u8]) -> Bytes {
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(std::time::Duration::from_secs(120));
    answer_within_four_frames_on(&node, &mut conn, what, frame).await
}

/// [`answer_within_four_frames`] on `node`, over `conn`.
pub(crate) async fn answer_within_four_frames_on(
    node: &GregorNode,
    conn: &mut KafkaConn,
    what: &str,
    frame: &[u8],
) -> Bytes {
    answer_with_header_within_four_frames(node, conn, what, frame, 1).await
}

/// [`answer_within_four_frames_on`] for an answer whose header is of `header_version`.
pub(crate) async fn answer_with_header_within_four_frames(
    node: &GregorNode,
    conn: &mut KafkaConn,
    what: &str,
    frame: &[u8],
    header_version: i16,
) -> Bytes {
    // The peak so far is the node's start-up, not this request's.
    node.reset_peak_memory().unwrap();
    let before = node.resident_memory().unwrap();
    conn.write_raw(frame).await.unwrap();
    let mut answer = conn.read_frame().await.unwrap().unwrap();
    let after = node.resident_memory().unwrap();
    let growth = after.peak.saturating_sub(before.current);
    assert!(
        growth < 4 * FRAME as u64,
        "a {}-byte {what} request grew the node's peak resident memory by {growth} bytes",
        frame.len()
    );
    let header = ResponseHeader::decode(&mut answer, header_version).unwrap();
    assert_eq!(header.correlation_id, 42, "{what}");
    answer
}

/// Checks an answer body `prefix_len` bytes, then a compact list of `count` identical entries,
/// then empty tagged fields; returns the entry, decoded.
fn every_entry_alike<T: Decodable>(
    what: &str,
    mut body: Bytes,
    prefix_len: usize,
    count: usize,
    version: i16,
) -> T {
    body.advance(prefix_len);
    let length = compact_length(&mut body);
    assert_eq!(length, count as u64 + 1, "{what}: one answer per element");
    let mut measured = body.clone();
    let entry = T::decode(&mut measured, version).unwrap();
    let size = body.len() - measured.len();
    let first = body.slice(..size);
    for index in 0..count {
        assert_eq!(
            body.slice(index * size..(index + 1) * size),
            first,
            "{what}: answer {index} differs from the first"
        );
    }
    assert_eq!(
        &body[count * size..],
        b"\x00",
        "{what}: the body's tagged fields"
    );
    entry
}

#[tokio::test]
async fn incremental_alter_configs_repeating_an_empty_resource_stays_within_four_frames() {
    // Resource {TOPIC, "", no configs}, then ValidateOnly and tagged fields.
    let (frame, count) = repeating(44, 1, b"", b"\x02\x01\x01\x00", b"\x00\x00");
    let body = answer_within_four_frames("IncrementalAlterConfigs", &frame).await;
    let answer: incremental_alter_configs_response::AlterConfigsResourceResponse =
        every_entry_alike("IncrementalAlterConfigs", body, 4, count, 1);
    assert_eq!(answer.error_code, 42);
    assert_eq!(
        answer.error_message.as_deref(),
        Some("Each resource must appear at most once.")
    );
}

#[tokio::test]
async fn describe_configs_repeating_an_empty_resource_stays_within_four_frames() {
    // Resource {TOPIC, "", null keys}, then IncludeSynonyms, IncludeDocumentation, tags.
    let (frame, count) = repeating(32, 4, b"", b"\x02\x01\x00\x00", b"\x00\x00\x00");
    let body = answer_within_four_frames("DescribeConfigs", &frame).await;
    let answer: describe_configs_response::DescribeConfigsResult =
        every_entry_alike("DescribeConfigs", body, 4, count, 4);
    assert_eq!(answer.error_code, 17, "INVALID_TOPIC_EXCEPTION");
}

#[tokio::test]
async fn delete_topics_repeating_an_unnamed_entry_stays_within_four_frames() {
    // Entry {null name, zero id}, then TimeoutMs and tags.
    let mut element = vec![0u8; 18];
    element[0] = 0;
    let (frame, count) = repeating(20, 6, b"", &element, b"\x00\x00\x03\xe8\x00");
    let body = answer_within_four_frames("DeleteTopics", &frame).await;
    let answer: delete_topics_response::DeletableTopicResult =
        every_entry_alike("DeleteTopics", body, 4, count, 6);
    assert_eq!(answer.error_code, 42);
    assert_eq!(
        answer.error_message.as_deref(),
        Some("Neither topic name nor id were specified.")
    );
}

#[tokio::test]
async fn alter_client_quotas_repeating_an_empty_entry_stays_within_four_frames() {
    // Entry {no entity, no ops}, then ValidateOnly and tags: one entity, answered once.
    let (frame, _) = repeating(49, 1, b"", b"\x01\x01\x00", b"\x00\x00");
    let body = answer_within_four_frames("AlterClientQuotas", &frame).await;
    let mut framed = BytesMut::new();
    framed.put_slice(&[0, 0, 0, 42, 0]);
    framed.put_slice(&body);
    let (_, response) = decode_response::<AlterClientQuotasRequest>(framed.freeze(), 1).unwrap();
    let entries: Vec<&alter_client_quotas_response::EntryData> = response.entries.iter().collect();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].error_code, 42);
}

#[tokio::test]
async fn describe_groups_repeating_an_empty_group_id_stays_within_four_frames() {
    // Group id "", then IncludeAuthorizedOperations and tags.
    let (frame, count) = repeating(15, 5, b"", b"\x01", b"\x00\x00");
    let body = answer_within_four_frames("DescribeGroups", &frame).await;
    let answer: describe_groups_response::DescribedGroup =
        every_entry_alike("DescribeGroups", body, 4, count, 5);
    assert_eq!(answer.group_id.as_str(), "");
}

#[tokio::test]
async fn offset_commit_and_list_offsets_repeating_an_empty_topic_stay_within_four_frames() {
    // OffsetCommit v8: group "g", generation -1, member "", instance null; topic {"", []}.
    let prefix = b"\x02g\xff\xff\xff\xff\x01\x00";
    let (frame, count) = repeating(8, 8, prefix, b"\x01\x01\x00", b"\x00");
    let body = answer_within_four_frames("OffsetCommit", &frame).await;
    let answer: offset_commit_response::OffsetCommitResponseTopic =
        every_entry_alike("OffsetCommit", body, 4, count, 8);
    assert_eq!(answer.name.as_str(), "");
    // One topic "t" repeating partition {0, offset 0, epoch -1, metadata null}: one answer per
    // partition, inside the topic's one answer.
    let partition = b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\x00\x00";
    let prefix = [&prefix[..], b"\x02\x02t"].concat();
    let (frame, count) = repeating(8, 8, &prefix, partition, b"\x00\x00");
    let mut body = answer_within_four_frames("OffsetCommit", &frame).await;
    // Throttle, one topic, its name "t".
    assert_eq!(&body[..7], b"\x00\x00\x00\x00\x02\x02t");
    body.advance(3);
    let answer: offset_commit_response::OffsetCommitResponsePartition = every_entry_alike(
        "OffsetCommit partitions",
        body.slice(..body.len() - 1),
        4,
        count,
        8,
    );
    assert_eq!(answer.partition_index, 0);
    // ListOffsets v7: replica -1, isolation 0; topic {"", []}.
    let (frame, count) = repeating(2, 7, b"\xff\xff\xff\xff\x00", b"\x01\x01\x00", b"\x00");
    let body = answer_within_four_frames("ListOffsets", &frame).await;
    let answer: list_offsets_response::ListOffsetsTopicResponse =
        every_entry_alike("ListOffsets", body, 4, count, 7);
    assert_eq!(answer.name.as_str(), "");
}

/// A Metadata request naming more topics than one chunk (1,024) is answered in chunks, twice
/// over one image: the answer must be what shorter requests for the same distinct topics,
/// in order of first appearance, answer, topic for topic.
#[tokio::test]
async fn metadata_naming_many_distinct_topics_answers_as_shorter_requests() {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(std::time::Duration::from_secs(120));
    let name = |n: String| TopicName(StrBytes::from_string(n));
    let created = CreateTopicsRequest::default()
        .with_topics(
            ["t7", "t1500"]
                .iter()
                .map(|t| {
                    CreatableTopic::default()
                        .with_name(name(t.to_string()))
                        .with_num_partitions(2)
                        .with_replication_factor(1)
                })
                .collect(),
        )
        .with_timeout_ms(10_000);
    let answer = conn.send::<CreateTopicsRequest>(&created, 7).await.unwrap();
    assert!(answer.topics.iter().all(|t| t.error_code == 0));
    // 3,000 names over 2,000 distinct ones, "" (invalid) and the two topics among them.
    let listed: Vec<String> = (0..3000)
        .map(|i| match i % 1000 {
            999 => String::new(),
            _ => format!("t{}", i % 2000),
        })
        .collect();
    // Before v4 every Metadata request may create topics: the node's setting forbids it.
    let request = |names: &[String], version: i16| {
        MetadataRequest::default()
            .with_topics(Some(
                names
                    .iter()
                    .map(|n| MetadataRequestTopic::default().with_name(Some(name(n.clone()))))
                    .collect(),
            ))
            .with_allow_auto_topic_creation(version < 4)
    };
    let mut distinct: Vec<String> = Vec::new();
    for n in &listed {
        if !distinct.contains(n) {
            distinct.push(n.clone());
        }
    }
    for version in [1i16, 9, 12, 13] {
        let whole = conn
            .send::<MetadataRequest>(&request(&listed, version), version)
            .await
            .unwrap();
        let mut expected = Vec::new();
        for part in distinct.chunks(1000) {
            let answer = conn
                .send::<MetadataRequest>(&request(part, version), version)
                .await
                .unwrap();
            expected.extend(answer.topics);
        }
        assert_eq!(whole.topics.len(), distinct.len(), "v{version}");
        assert_eq!(whole.topics, expected, "v{version}");
        let partitions: Vec<usize> = whole
            .topics
            .iter()
            .filter(|t| t.error_code == 0)
            .map(|t| t.partitions.len())
            .collect();
        assert_eq!(
            partitions,
            vec![2, 2],
            "v{version}: t7 and t1500 are described"
        );
    }
}

/// Sends `frame`, then `short` (the same request with its list's repeats or empty elements
/// left out) on one connection to a fresh node: the node's peak resident memory grows by
/// less than four frames, and both answers are the same bytes. Returns the answer's body.
async fn answers_as_shorter(what: &str, frame: &[u8], short: &[u8]) -> Bytes {
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(std::time::Duration::from_secs(120));
    let before = node.resident_memory().unwrap();
    conn.write_raw(frame).await.unwrap();
    let answer = conn.read_frame().await.unwrap().unwrap();
    let after = node.resident_memory().unwrap();
    let growth = after.peak.saturating_sub(before.current);
    assert!(
        growth < 4 * FRAME as u64,
        "a {}-byte {what} request grew the node's peak resident memory by {growth} bytes",
        frame.len()
    );
    conn.write_raw(short).await.unwrap();
    let shorter = conn.read_frame().await.unwrap().unwrap();
    assert_eq!(
        answer,
        shorter,
        "{what}: the answer to the {}-byte request",
        frame.len()
    );
    let mut body = answer;
    let header = ResponseHeader::decode(&mut body, 1).unwrap();
    assert_eq!(header.correlation_id, 42, "{what}");
    body
}

/// Kafka reads Produce's and Fetch's topic-partitions into a map: a topic naming no
/// partition gets no answer, a partition named again is answered once.
#[tokio::test]
async fn produce_and_fetch_repeating_topics_or_partitions_answer_as_shorter_requests() {
    // Produce v9: transactional id null, acks 1, timeout 1 s; topics {"", [], tags}.
    let prefix = b"\x00\x00\x01\x00\x00\x03\xe8";
    let (frame, _) = repeating(0, 9, prefix, b"\x01\x01\x00", b"\x00");
    let short = listing(0, 9, prefix, b"", 0, b"\x00");
    let body = answers_as_shorter("Produce", &frame, &short).await;
    assert_eq!(&body[..1], b"\x01", "Produce: no topic answered");
    // One topic "t" repeating partition {0, empty records, tags}: answered once (the topic
    // does not exist).
    let prefix = [&prefix[..], b"\x02\x02t"].concat();
    let element = b"\x00\x00\x00\x00\x01\x00";
    let (frame, _) = repeating(0, 9, &prefix, element, b"\x00\x00");
    let short = listing(0, 9, &prefix, element, 1, b"\x00\x00");
    let body = answers_as_shorter("Produce partitions", &frame, &short).await;
    // One topic "t", one partition 0, UNKNOWN_TOPIC_OR_PARTITION.
    assert_eq!(
        &body[..12],
        b"\x02\x02t\x02\x00\x00\x00\x00\x00\x03\xff\xff"
    );
    // Fetch v12: replica -1, wait 0, min 1, max 1 MiB, isolation 0, no session; topics
    // {"", [], tags}; no forgotten topics, rack "".
    let prefix = b"\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x01\x00\x10\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff";
    let (frame, _) = repeating(1, 12, prefix, b"\x01\x01\x00", b"\x01\x01\x00");
    let short = listing(1, 12, prefix, b"", 0, b"\x01\x01\x00");
    let body = answers_as_shorter("Fetch", &frame, &short).await;
    // Throttle, error, session id, then no topic.
    assert_eq!(&body[10..11], b"\x01", "Fetch: no topic answered");
    // One topic "t" repeating partition {0, epoch -1, offset 0, last epoch -1, log start -1,
    // max bytes 1 MiB, tags}.
    let prefix = [&prefix[..], b"\x02\x02t"].concat();
    let mut element = Vec::new();
    element.extend_from_slice(&0i32.to_be_bytes());
    element.extend_from_slice(&(-1i32).to_be_bytes());
    element.extend_from_slice(&0i64.to_be_bytes());
    element.extend_from_slice(&(-1i32).to_be_bytes());
    element.extend_from_slice(&(-1i64).to_be_bytes());
    element.extend_from_slice(&(1i32 << 20).to_be_bytes());
    element.push(0);
    let suffix = b"\x00\x01\x01\x00";
    let (frame, _) = repeating(1, 12, &prefix, &element, suffix);
    let short = listing(1, 12, &prefix, &element, 1, suffix);
    let body = answers_as_shorter("Fetch partitions", &frame, &short).await;
    // One topic "t" with one partition.
    assert_eq!(
        &body[10..15],
        b"\x02\x02t\x02\x00",
        "Fetch: partition 0 once"
    );
}

/// Produce naming distinct partitions of a topic that does not exist: nothing merges them, so
/// the node appends and answers them a chunk at a time and writes its answer (5.5 times the
/// frame) as it builds it, each partition UNKNOWN_TOPIC_OR_PARTITION in the order listed.
#[tokio::test]
async fn produce_naming_distinct_partitions_stays_within_four_frames() {
    use kafka_protocol::messages::produce_response::PartitionProduceResponse;
    // Produce v9: transactional id null, acks 1, timeout 1 s; one topic "t" listing partitions
    // {i, empty records, tags}.
    let count = (FRAME - 40) / 6;
    let mut frame = listing(
        0,
        9,
        b"\x00\x00\x01\x00\x00\x03\xe8\x02\x02t",
        b"",
        count,
        b"",
    );
    for index in 0..count as i32 {
        frame.put_i32(index);
        frame.put_slice(b"\x01\x00");
    }
    frame.put_slice(b"\x00\x00");
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    let mut body = answer_within_four_frames("Produce distinct partitions", &frame).await;
    assert_eq!(&body[..3], b"\x02\x02t", "Produce: one topic answered");
    body.advance(3);
    let length = compact_length(&mut body);
    assert_eq!(length, count as u64 + 1, "one answer per partition");
    for index in 0..count as i32 {
        let answer = PartitionProduceResponse::decode(&mut body, 9).unwrap();
        assert_eq!(
            (answer.index, answer.error_code, answer.base_offset),
            (index, 3, -1),
            "partition {index}"
        );
    }
    // The topic's tagged fields, throttle time, the body's tagged fields.
    assert_eq!(&body[..], b"\x00\x00\x00\x00\x00\x00");
}

/// Fetch naming distinct partitions of a topic that does not exist: read a chunk at a time,
/// each answered UNKNOWN_TOPIC_OR_PARTITION in the order listed, within four frames.
#[tokio::test]
async fn fetch_naming_distinct_partitions_stays_within_four_frames() {
    use kafka_protocol::messages::fetch_response::PartitionData;
    // Fetch v12: replica -1, wait 0, min 1, max 1 MiB, isolation 0, no session; one topic "t"
    // listing partitions {i, epoch -1, offset 0, last epoch -1, log start -1, max 1 MiB, tags}.
    let prefix = b"\xff\xff\xff\xff\x00\x00\x00\x00\x00\x00\x00\x01\x00\x10\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\x02\x02t";
    let count = (FRAME - 80) / 33;
    let mut frame = listing(1, 12, prefix, b"", count, b"");
    for index in 0..count as i32 {
        frame.put_i32(index);
        frame.put_i32(-1);
        frame.put_i64(0);
        frame.put_i32(-1);
        frame.put_i64(-1);
        frame.put_i32(1 << 20);
        frame.put_u8(0);
    }
    frame.put_slice(b"\x00\x01\x01\x00");
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    let mut body = answer_within_four_frames("Fetch distinct partitions", &frame).await;
    // Throttle, error, session id, one topic "t".
    assert_eq!(
        &body[..13],
        b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x02t"
    );
    body.advance(13);
    assert_eq!(
        compact_length(&mut body),
        count as u64 + 1,
        "one answer per partition"
    );
    for index in 0..count as i32 {
        let answer = PartitionData::decode(&mut body, 12).unwrap();
        assert_eq!((answer.partition_index, answer.error_code), (index, 3));
    }
    // The topic's tagged fields, the body's.
    assert_eq!(&body[..], b"\x00\x00");
}

/// CreateTopics names every config with a null value in its error: the message lists all of
/// them, from a request that never held them one by one.
#[tokio::test]
async fn create_topics_with_many_null_configs_names_them_all() {
    use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
    // One topic "t", 1 partition, replication 1, no assignments; configs {"", null, tags};
    // then TimeoutMs, ValidateOnly and tags.
    let prefix = b"\x02\x02t\x00\x00\x00\x01\x00\x01\x01";
    let suffix = b"\x00\x00\x00\x03\xe8\x00\x00";
    let (frame, count) = repeating(19, 7, prefix, b"\x01\x00\x00", suffix);
    let body = answer_within_four_frames("CreateTopics", &frame).await;
    let mut topics = body.slice(4..);
    assert_eq!(topics.get_u8(), 2, "CreateTopics: one topic answered");
    let answer = CreatableTopicResult::decode(&mut topics, 7).unwrap();
    assert_eq!(answer.error_code, 40, "INVALID_CONFIG");
    let expected = format!(
        "Null value not supported for topic configs: {}",
        ",".repeat(count - 1)
    );
    assert!(
        answer.error_message.as_deref() == Some(expected.as_str()),
        "CreateTopics: the message names all {count} configs"
    );
}

/// A Metadata request naming more topics than one chunk on a node that auto-creates topics
/// sends one creation for all the missing ones, as Kafka's broker does: 2,000 missing names
/// are created together; 6,000 (12,000 records, past the controller's 10,000 per request) are
/// refused whole, so none is created. Either way each is answered LEADER_NOT_AVAILABLE.
#[tokio::test]
async fn metadata_naming_many_missing_topics_creates_them_in_one_creation() {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;
    let node = GregorNode::start(&[("auto.create.topics.enable", "true")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(std::time::Duration::from_secs(120));
    let request = |names: &[String], create: bool| {
        MetadataRequest::default()
            .with_topics(Some(
                names
                    .iter()
                    .map(|n| {
                        MetadataRequestTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(n.clone()))))
                    })
                    .collect(),
            ))
            .with_allow_auto_topic_creation(create)
    };
    for (prefix, distinct, created) in [("a", 2000, true), ("b", 6000, false)] {
        // Each name twice, and one invalid name.
        let names: Vec<String> = (0..distinct).map(|i| format!("{prefix}{i}")).collect();
        let mut listed = names.clone();
        listed.extend(names.iter().cloned());
        listed.push(String::new());
        let answer = conn
            .send::<MetadataRequest>(&request(&listed, true), 4)
            .await
            .unwrap();
        let codes: Vec<i16> = answer.topics.iter().map(|t| t.error_code).collect();
        let mut expected = vec![5i16; distinct];
        expected.push(17);
        assert_eq!(
            codes, expected,
            "{distinct} names: LEADER_NOT_AVAILABLE each"
        );
        let described = |answer: &kafka_protocol::messages::MetadataResponse| {
            answer.topics.iter().filter(|t| t.error_code == 0).count()
        };
        if created {
            let bootstrap = node.bootstrap();
            wait_until(
                "the 2,000 topics to be created",
                Duration::from_secs(60),
                || {
                    let request = request(&names, false);
                    let bootstrap = bootstrap.clone();
                    async move {
                        let mut conn = KafkaConn::connect(&bootstrap).await?;
                        let answer = conn.send::<MetadataRequest>(&request, 4).await?;
                        Ok((described(&answer) == distinct).then_some(()))
                    }
                },
            )
            .await
            .unwrap();
        } else {
            // The creation was answered before the Metadata request was: refused whole.
            let answer = conn
                .send::<MetadataRequest>(&request(&names, false), 4)
                .await
                .unwrap();
            assert_eq!(described(&answer), 0, "none of the 6,000 topics is created");
        }
    }
}

/// CreateTopics naming distinct topics: nothing merges them, so the node decides them from the
/// frame and writes its answer (six times the frame) as it builds it. Past the controller's
/// 10,000 records the whole request fails, each name once; topics with no partitions each get
/// INVALID_PARTITIONS with its message.
#[tokio::test]
async fn create_topics_naming_distinct_topics_stays_within_four_frames() {
    use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
    // Distinct four-letter names {name, partitions, replication 1, no assignments or
    // configs, tags}, then TimeoutMs, ValidateOnly and tags.
    let name = four_letter_name;
    let cases: [(i32, i16, &str); 2] = [
        (
            1,
            44,
            "Unable to perform excessively large batch operation.",
        ),
        (
            0,
            37,
            "Number of partitions was set to an invalid non-positive value.",
        ),
    ];
    for (partitions, code, message) in cases {
        let count = (FRAME - 40) / 14;
        let frame = create_topics_v7(count, partitions, false);
        let mut body = answer_within_four_frames("CreateTopics distinct topics", &frame).await;
        assert_eq!(body.get_i32(), 0, "throttle time");
        assert_eq!(compact_length(&mut body), count as u64 + 1, "one per topic");
        for index in 0..count {
            let answer = CreatableTopicResult::decode(&mut body, 7).unwrap();
            assert_eq!(
                (
                    answer.name.as_str().as_bytes(),
                    answer.error_code,
                    answer.error_message.as_deref()
                ),
                (&name(index)[..], code, Some(message)),
                "topic {index}"
            );
        }
        assert_eq!(&body[..], b"\x00", "the body's tagged fields");
    }
}

/// A CreateTopics naming more topics than one chunk is answered as the same topics in two
/// shorter requests (each decoded whole), when no name repeats across the halves: existing,
/// invalid, repeated and new topics, validated only (topic ids aside, drawn at random), then
/// created, the new topics existing afterwards.
#[tokio::test]
async fn create_topics_naming_many_topics_answers_as_shorter_requests() {
    use gregor_integration::admin;
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
    use kafka_protocol::protocol::StrBytes;
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let topic = |name: &str, partitions: i32| {
        CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
            .with_num_partitions(partitions)
            .with_replication_factor(1)
    };
    let created = conn
        .send(&admin::create_topics(vec![topic("old", 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    // Per half: an existing topic, an invalid name, a name three times, one with no
    // partitions per other entry, and new topics between them.
    let half = |tag: &str| -> Vec<CreatableTopic> {
        let mut topics = vec![
            topic("old", 1),
            topic(&format!("bad name {tag}"), 1),
            topic(&format!("dup-{tag}"), 1),
        ];
        for index in 0..700 {
            let partitions = if index % 25 == 0 { 2 } else { 0 };
            topics.push(topic(&format!("{tag}-{index}"), partitions));
            if index % 300 == 0 {
                topics.push(topic(&format!("dup-{tag}"), 1));
            }
        }
        topics
    };
    let (first, second) = (half("a"), half("b"));
    let whole: Vec<CreatableTopic> = first.iter().chain(&second).cloned().collect();
    assert!(whole.len() > 1024 && first.len() <= 1024 && second.len() <= 1024);
    let ask = |topics: Vec<CreatableTopic>, validate_only: bool| -> CreateTopicsRequest {
        admin::create_topics(topics, validate_only)
    };
    let without_ids = |mut response: kafka_protocol::messages::CreateTopicsResponse| {
        for topic in &mut response.topics {
            topic.topic_id = uuid::Uuid::nil();
        }
        response
    };
    // Each half names "old"; in the whole request the second half's is "old-b", a new topic,
    // so that no name repeats across the halves.
    let mut whole_unique = whole.clone();
    whole_unique[first.len()].name = TopicName(StrBytes::from_static_str("old-b"));
    let mut second_unique = second.clone();
    second_unique[0].name = TopicName(StrBytes::from_static_str("old-b"));
    let validated = without_ids(
        conn.send(&ask(whole_unique.clone(), true), 7)
            .await
            .unwrap(),
    );
    let mut halves = conn.send(&ask(first.clone(), true), 7).await.unwrap();
    let second_half = conn.send(&ask(second_unique, true), 7).await.unwrap();
    halves.topics.extend(second_half.topics);
    assert_eq!(validated, without_ids(halves), "validated");
    let created = without_ids(
        conn.send(&ask(whole_unique.clone(), false), 7)
            .await
            .unwrap(),
    );
    assert_eq!(created, validated, "created as validated");
    let new = created.topics.iter().filter(|t| t.error_code == 0).count();
    assert_eq!(new, 2 * 28 + 1, "the new topics and old-b");
    // Asked again, each created topic exists.
    let again = conn.send(&ask(whole_unique, true), 7).await.unwrap();
    for (now, then) in again.topics.iter().zip(&created.topics) {
        if then.error_code == 0 {
            assert_eq!(now.error_code, 36, "{} exists", now.name.as_str());
        }
    }
}

/// CreatePartitions naming distinct topics, none of which exists: the node decides them from
/// the frame and answers each UNKNOWN_TOPIC_OR_PARTITION (without a message, as Kafka), the
/// answer written as it is built.
#[tokio::test]
async fn create_partitions_naming_distinct_topics_stays_within_four_frames() {
    use gregor_integration::frames::create_partitions_v3;
    use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
    let count = (FRAME - 40) / 11;
    let frame = create_partitions_v3(count, 2);
    let mut body = answer_within_four_frames("CreatePartitions distinct topics", &frame).await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(compact_length(&mut body), count as u64 + 1, "one per topic");
    for index in 0..count {
        let answer = CreatePartitionsTopicResult::decode(&mut body, 3).unwrap();
        assert_eq!(
            (
                answer.name.as_str().as_bytes(),
                answer.error_code,
                answer.error_message.as_deref()
            ),
            (&four_letter_name(index)[..], 3, None),
            "topic {index}"
        );
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
}

/// The topics of one half of a CreatePartitions request naming more than one chunk: the
/// existing topics `old-<tag>-<i>` grown to three partitions (the first six by manual
/// assignment, one of them naming an unknown broker), one of them named twice, one asked for
/// the partition it has, one given too few assignments, then 640 unknown names.
pub(crate) fn growth_half(tag: &str) -> Vec<CreatePartitionsTopic> {
    use gregor_integration::admin::growth;
    let old = |index: usize| format!("old-{tag}-{index}");
    let mut topics = Vec::new();
    for index in 0..20 {
        let assignments = match index {
            0..=4 => Some(vec![vec![1], vec![1]]),
            5 => Some(vec![vec![1], vec![7]]),
            _ => None,
        };
        topics.push(growth(&old(index), 3, assignments));
    }
    topics.push(growth(&old(3), 4, None));
    topics.push(growth(&old(20), 1, None));
    topics.push(growth(&old(21), 3, Some(vec![vec![1]])));
    for index in 0..640 {
        topics.push(growth(&format!("{tag}-{index}"), 2, None));
    }
    topics
}

/// The CreatePartitions request `first` and `second` make at `version`, validated only,
/// answered as the two halves are (checked), `whole_answered` awaited once the whole is.
pub(crate) async fn growth_validated_as_halves<F: std::future::Future<Output = ()>>(
    conn: &mut KafkaConn,
    first: &[CreatePartitionsTopic],
    second: &[CreatePartitionsTopic],
    version: i16,
    whole_answered: impl FnOnce() -> F,
) -> kafka_protocol::messages::CreatePartitionsResponse {
    use gregor_integration::admin::grow_partitions;
    let whole: Vec<_> = first.iter().chain(second).cloned().collect();
    assert!(whole.len() > 1024 && first.len() <= 1024 && second.len() <= 1024);
    let answer = conn
        .send(&grow_partitions(whole, true), version)
        .await
        .unwrap();
    whole_answered().await;
    let mut halves = conn
        .send(&grow_partitions(first.to_vec(), true), version)
        .await
        .unwrap();
    let second_half = conn
        .send(&grow_partitions(second.to_vec(), true), version)
        .await
        .unwrap();
    halves.results.extend(second_half.results);
    assert_eq!(answer, halves, "validated v{version}");
    answer
}

/// How many topics `answer` answers with error `code`.
pub(crate) fn answered_with(
    answer: &kafka_protocol::messages::CreatePartitionsResponse,
    code: i16,
) -> usize {
    answer
        .results
        .iter()
        .filter(|r| r.error_code == code)
        .count()
}

/// A CreatePartitions naming more topics than one chunk is answered as the same topics in two
/// shorter requests (each decoded whole), validated only, at a version before and after the
/// flexible ones; then executed, the grown topics having their new partitions afterwards.
#[tokio::test]
async fn create_partitions_naming_many_topics_answers_as_shorter_requests() {
    use gregor_integration::admin::grow_partitions;
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let existing: Vec<_> = ["a", "b"]
        .iter()
        .flat_map(|tag| (0..22).map(move |index| creatable(&format!("old-{tag}-{index}"), 1, 1)))
        .collect();
    let created = conn.send(&create_topics(existing, false), 7).await.unwrap();
    assert!(
        created.topics.iter().all(|t| t.error_code == 0),
        "{created:?}"
    );
    let (first, second) = (growth_half("a"), growth_half("b"));
    let whole: Vec<_> = first.iter().chain(&second).cloned().collect();
    let mut validated = None;
    for version in [1, 3] {
        let answer =
            growth_validated_as_halves(&mut conn, &first, &second, version, || async {}).await;
        validated = Some(answer);
    }
    let validated = validated.unwrap();
    let codes = |code: i16| answered_with(&validated, code);
    // Per half: 18 grown; the unknown broker and the short assignment, the repeated name
    // (once) and the count it has fail; 640 unknown.
    assert_eq!(
        (codes(0), codes(39), codes(42), codes(37), codes(3)),
        (2 * 18, 2 * 2, 2, 2, 2 * 640)
    );
    let grown = conn.send(&grow_partitions(whole, false), 3).await.unwrap();
    assert_eq!(grown, validated, "grown as validated");
    let described = conn
        .send(
            &metadata(
                12,
                Some(&["old-a-0", "old-b-19", "old-a-3", "old-b-20"]),
                false,
            ),
            12,
        )
        .await
        .unwrap();
    let partitions: Vec<(String, usize)> = described
        .topics
        .iter()
        .map(|t| {
            (
                t.name.as_ref().map(|n| n.to_string()).unwrap_or_default(),
                t.partitions.len(),
            )
        })
        .collect();
    assert_eq!(
        partitions,
        [
            ("old-a-0".to_owned(), 3),
            ("old-b-19".to_owned(), 3),
            ("old-a-3".to_owned(), 1),
            ("old-b-20".to_owned(), 1),
        ]
    );
}

/// DescribeGroups naming distinct group ids: nothing merges them, so the node answers them a
/// chunk at a time and keeps the answers compressed until it writes them (four times the
/// frame, an unknown group's answer repeating all but its id).
#[tokio::test]
async fn describe_groups_naming_distinct_groups_stays_within_four_frames() {
    let (frame, count) = distinct(
        15,
        5,
        b"",
        5,
        |name, frame| {
            frame.put_u8(5);
            frame.put_slice(name);
        },
        b"\x00\x00",
    );
    let mut body = answer_within_four_frames("DescribeGroups distinct groups", &frame).await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(compact_length(&mut body), count as u64 + 1, "one per group");
    // Every group is unknown (on a fresh node its coordinator may still be loading): each is
    // answered as the first, but for its own id.
    let mut first = None;
    for index in 0..count {
        let group = describe_groups_response::DescribedGroup::decode(&mut body, 5).unwrap();
        assert_eq!(
            group.group_id.as_str().as_bytes(),
            &four_letter_name(index)[..],
            "group {index}"
        );
        let answer = group.with_group_id(Default::default());
        assert_eq!(
            &answer,
            first.get_or_insert_with(|| answer.clone()),
            "group {index}"
        );
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
}

/// A request naming more group ids than one chunk is answered as the same ids in shorter
/// requests, repeated ids included, for DescribeGroups and ConsumerGroupDescribe.
#[tokio::test]
async fn group_descriptions_of_many_ids_answer_as_shorter_requests() {
    use kafka_protocol::messages::{ConsumerGroupDescribeRequest, DescribeGroupsRequest, GroupId};
    use kafka_protocol::protocol::StrBytes;
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let ids: Vec<GroupId> = (0..2_500)
        .map(|index| match index % 100 {
            7 => "again".to_owned(),
            _ => format!("group-{index}"),
        })
        .map(|id| GroupId(StrBytes::from_string(id)))
        .collect();
    // Parts no longer than a chunk (256 ids), each served whole.
    let halves: Vec<&[GroupId]> = ids.chunks(250).collect();
    for version in [1, 4, 5, 6] {
        let request = |ids: &[GroupId]| {
            DescribeGroupsRequest::default()
                .with_groups(ids.to_vec())
                .with_include_authorized_operations(version >= 3)
        };
        let whole = conn.send(&request(&ids), version).await.unwrap();
        let mut parts = Vec::new();
        for half in &halves {
            parts.extend(conn.send(&request(half), version).await.unwrap().groups);
        }
        assert_eq!(whole.groups.len(), ids.len(), "DescribeGroups v{version}");
        assert!(whole.groups == parts, "DescribeGroups v{version}");
    }
    for version in [0, 1] {
        let request = |ids: &[GroupId]| {
            ConsumerGroupDescribeRequest::default()
                .with_group_ids(ids.to_vec())
                .with_include_authorized_operations(true)
        };
        let whole = conn.send(&request(&ids), version).await.unwrap();
        let mut parts = Vec::new();
        for half in &halves {
            parts.extend(conn.send(&request(half), version).await.unwrap().groups);
        }
        assert_eq!(
            whole.groups.len(),
            ids.len(),
            "ConsumerGroupDescribe v{version}"
        );
        assert!(whole.groups == parts, "ConsumerGroupDescribe v{version}");
    }
}

/// Checks that `answer` lists the entries `expected` does, naming the first that differs (an
/// answer of thousands of entries is too long to print whole).
pub(crate) fn assert_same_entries<T: PartialEq + std::fmt::Debug>(
    answer: &[T],
    expected: &[T],
    what: &str,
) {
    let differing = answer.iter().zip(expected).position(|(a, e)| a != e);
    assert_eq!(
        differing.map(|at| (&answer[at], &expected[at])),
        None,
        "{what}"
    );
    assert_eq!(answer.len(), expected.len(), "{what}");
}

/// A flexible frame of `prefix`, then a list of `count` distinct four-letter ids, each written
/// by `element` in `element_size` bytes, then `suffix` (`flexible_list`).
pub(crate) fn distinct(
    api_key: i16,
    version: i16,
    prefix: &[u8],
    element_size: usize,
    element: impl Fn(&[u8; 4], &mut BytesMut),
    suffix: &[u8],
) -> (BytesMut, usize) {
    let count = (FRAME - 40 - prefix.len() - suffix.len()) / element_size;
    let frame = gregor_integration::frames::flexible_list(
        api_key,
        version,
        prefix,
        count,
        element_size,
        |index, frame| element(&four_letter_name(index), frame),
        suffix,
    );
    (frame, count)
}

/// DescribeConfigs naming distinct topics: each resource is described on its own, so the node
/// answers them a chunk at a time, the answers kept compressed until written.
#[tokio::test]
async fn describe_configs_naming_distinct_topics_stays_within_four_frames() {
    // Resource {TOPIC, name, null keys, tags}, then IncludeSynonyms, IncludeDocumentation, tags.
    let (frame, count) = distinct(
        32,
        4,
        b"",
        8,
        |name, frame| {
            frame.put_slice(&[2, 5]);
            frame.put_slice(name);
            frame.put_slice(&[0, 0]);
        },
        b"\x00\x00\x00",
    );
    let mut body = answer_within_four_frames("DescribeConfigs distinct topics", &frame).await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(
        compact_length(&mut body),
        count as u64 + 1,
        "one per resource"
    );
    for index in 0..count {
        let result =
            describe_configs_response::DescribeConfigsResult::decode(&mut body, 4).unwrap();
        assert_eq!(
            result.resource_name.as_bytes(),
            &four_letter_name(index)[..],
            "resource {index}"
        );
        assert_eq!(result.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
}

/// Asks for a group coordinator (which creates the offsets topic) and waits until it answers
/// OffsetFetch for a group it does not know.
pub(crate) async fn groups_ready(conn: &mut KafkaConn) {
    use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
    use kafka_protocol::messages::{FindCoordinatorRequest, GroupId, OffsetFetchRequest};
    let find = FindCoordinatorRequest::default().with_coordinator_keys(vec![s("ready")]);
    conn.send(&find, 4).await.unwrap();
    let request = OffsetFetchRequest::default().with_groups(vec![
        OffsetFetchRequestGroup::default().with_group_id(GroupId(s("ready"))),
    ]);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while conn.send(&request, 8).await.unwrap().groups[0].error_code != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the group coordinator never loaded"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // ListGroups answers COORDINATOR_LOAD_IN_PROGRESS until every partition is loaded.
    let list = kafka_protocol::messages::ListGroupsRequest::default();
    while conn.send(&list, 4).await.unwrap().error_code != 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the group coordinator never loaded every partition"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A fresh node whose group coordinator is loaded, and a connection to it that waits up to
/// five minutes for an answer.
pub(crate) async fn node_with_coordinator() -> (GregorNode, KafkaConn) {
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(300));
    groups_ready(&mut conn).await;
    (node, conn)
}

/// DeleteGroups and OffsetFetch naming distinct groups: answered a chunk of groups at a time.
#[tokio::test]
async fn delete_groups_and_offset_fetch_naming_distinct_groups_stay_within_four_frames() {
    use kafka_protocol::messages::{delete_groups_response, offset_fetch_response};
    let (node, mut conn) = node_with_coordinator().await;
    // DeleteGroups v2: the ids, then tags.
    let (frame, count) = distinct(
        42,
        2,
        b"",
        5,
        |name, frame| {
            frame.put_u8(5);
            frame.put_slice(name);
        },
        b"\x00",
    );
    let mut body =
        answer_within_four_frames_on(&node, &mut conn, "DeleteGroups distinct groups", &frame)
            .await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(compact_length(&mut body), count as u64 + 1, "one per group");
    for index in 0..count {
        let result = delete_groups_response::DeletableGroupResult::decode(&mut body, 2).unwrap();
        assert_eq!(result.group_id.as_bytes(), &four_letter_name(index)[..]);
        assert_eq!(result.error_code, 69, "GROUP_ID_NOT_FOUND");
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
    // OffsetFetch v8: groups {id, null topics (all), tags}, then RequireStable and tags.
    let (frame, count) = distinct(
        9,
        8,
        b"",
        7,
        |name, frame| {
            frame.put_u8(5);
            frame.put_slice(name);
            frame.put_slice(&[0, 0]);
        },
        b"\x00\x00",
    );
    let mut body =
        answer_within_four_frames_on(&node, &mut conn, "OffsetFetch distinct groups", &frame).await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(compact_length(&mut body), count as u64 + 1, "one per group");
    for index in 0..count {
        let group = offset_fetch_response::OffsetFetchResponseGroup::decode(&mut body, 8).unwrap();
        assert_eq!(group.group_id.as_bytes(), &four_letter_name(index)[..]);
        assert_eq!(
            (group.error_code, group.topics.len()),
            (0, 0),
            "group {index}"
        );
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
}

/// Commits offset `offset` of partition 0 of topic "t" for `group` (a standalone commit).
pub(crate) async fn commit(conn: &mut KafkaConn, group: &str, offset: i64) {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::{GroupId, OffsetCommitRequest};
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(topic_name("t"))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(-1)])]);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let answer = conn.send(&request, 8).await.unwrap();
        let code = answer.topics[0].partitions[0].error_code;
        if code == 0 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{group}'s commit failed: {code}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// DescribeConfigs, DeleteGroups and OffsetFetch naming more elements than one chunk are
/// answered as the same elements in shorter requests, repeats included: a repeated resource
/// described alike, a repeated group deleted at its first appearance only.
#[tokio::test]
async fn configs_and_groups_of_many_elements_answer_as_shorter_requests() {
    use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
    use kafka_protocol::messages::offset_fetch_request::{
        OffsetFetchRequestGroup, OffsetFetchRequestTopics,
    };
    use kafka_protocol::messages::{
        DeleteGroupsRequest, DescribeConfigsRequest, GroupId, OffsetFetchRequest,
    };
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let created = conn
        .send(&create_topics(vec![creatable("t", 1, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    groups_ready(&mut conn).await;
    // Parts no longer than a chunk (256 elements), each served whole.
    let thirds = |count: usize| {
        (0..count)
            .step_by(250)
            .map(move |at| at..(at + 250).min(count))
    };

    let resources: Vec<DescribeConfigsResource> = (0..2_500)
        .map(|index| {
            let (resource_type, name) = match index % 100 {
                7 => (2, "t".to_owned()),
                13 => (4, "1".to_owned()),
                21 => (2, "bad/name".to_owned()),
                _ => (2, format!("topic-{index}")),
            };
            DescribeConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(s(&name))
                .with_configuration_keys((index % 3 == 0).then(|| vec![s("retention.ms")]))
        })
        .collect();
    for version in [1, 3, 4] {
        let request = |resources: &[DescribeConfigsResource]| {
            DescribeConfigsRequest::default()
                .with_resources(resources.to_vec())
                .with_include_synonyms(true)
                .with_include_documentation(version >= 3)
        };
        let whole = conn.send(&request(&resources), version).await.unwrap();
        let mut parts = Vec::new();
        for third in thirds(resources.len()) {
            parts.extend(
                conn.send(&request(&resources[third]), version)
                    .await
                    .unwrap()
                    .results,
            );
        }
        assert_eq!(
            whole.results.len(),
            resources.len(),
            "DescribeConfigs v{version}"
        );
        assert!(whole.results == parts, "DescribeConfigs v{version}");
        assert_eq!(
            whole.results[207].configs.len(),
            1,
            "t's retention.ms is described"
        );
    }

    let groups: Vec<String> = (0..2_500)
        .map(|index| match index % 100 {
            7 => "again".to_owned(),
            _ => format!("group-{index}"),
        })
        .collect();
    let offset_fetch = |groups: &[String]| {
        OffsetFetchRequest::default().with_groups(
            groups
                .iter()
                .enumerate()
                .map(|(index, group)| {
                    OffsetFetchRequestGroup::default()
                        .with_group_id(GroupId(s(group)))
                        .with_topics((index % 2 == 0).then(|| {
                            vec![OffsetFetchRequestTopics::default()
                                .with_name(topic_name("t"))
                                .with_partition_indexes(vec![0, 1])]
                        }))
                })
                .collect(),
        )
    };
    let delete_groups = |groups: &[String]| {
        DeleteGroupsRequest::default()
            .with_groups_names(groups.iter().map(|group| GroupId(s(group))).collect())
    };
    for version in [0, 2] {
        commit(&mut conn, "again", 5).await;
        commit(&mut conn, "group-1500", 6).await;
        let fetched = conn.send(&offset_fetch(&groups), 8).await.unwrap();
        let mut parts = Vec::new();
        for third in thirds(groups.len()) {
            parts.extend(
                conn.send(&offset_fetch(&groups[third]), 8)
                    .await
                    .unwrap()
                    .groups,
            );
        }
        assert_eq!(fetched.groups.len(), groups.len(), "OffsetFetch");
        assert!(fetched.groups == parts, "OffsetFetch");
        let offset =
            |group: &kafka_protocol::messages::offset_fetch_response::OffsetFetchResponseGroup| {
                group
                    .topics
                    .first()
                    .map(|t| t.partitions[0].committed_offset)
            };
        assert_eq!(
            offset(&fetched.groups[1_500]),
            Some(6),
            "group-1500's commit"
        );

        let whole = conn.send(&delete_groups(&groups), version).await.unwrap();
        commit(&mut conn, "again", 5).await;
        commit(&mut conn, "group-1500", 6).await;
        let mut parts = Vec::new();
        for third in thirds(groups.len()) {
            parts.extend(
                conn.send(&delete_groups(&groups[third]), version)
                    .await
                    .unwrap()
                    .results,
            );
        }
        assert_eq!(whole.results.len(), groups.len(), "DeleteGroups v{version}");
        assert!(whole.results == parts, "DeleteGroups v{version}");
        let codes: Vec<(&str, i16)> = whole
            .results
            .iter()
            .filter(|r| matches!(r.group_id.as_str(), "again" | "group-1500"))
            .map(|r| (r.group_id.as_str(), r.error_code))
            .take(3)
            .collect();
        assert_eq!(
            codes,
            vec![("again", 0), ("again", 69), ("again", 69)],
            "DeleteGroups v{version}: the first appearance deletes"
        );
    }
}

/// ListOffsets naming distinct partitions of one unknown topic: looked up a chunk at a time,
/// each answer kept as its error code.
#[tokio::test]
async fn list_offsets_naming_distinct_partitions_stays_within_four_frames() {
    // ReplicaId -1, IsolationLevel 0; topic "t" with {index, epoch -1, timestamp -1, tags}.
    let count = (FRAME - 60) / 17;
    let frame = gregor_integration::frames::flexible_list(
        2,
        7,
        b"\xff\xff\xff\xff\x00\x02\x02t",
        count,
        17,
        |index, frame| {
            frame.put_i32(index as i32);
            frame.put_i32(-1);
            frame.put_i64(-1);
            frame.put_u8(0);
        },
        b"\x00\x00",
    );
    let mut body = answer_within_four_frames("ListOffsets distinct partitions", &frame).await;
    assert_eq!(
        &body[..7],
        b"\x00\x00\x00\x00\x02\x02t",
        "throttle, one topic, t"
    );
    body.advance(7);
    assert_eq!(
        compact_length(&mut body),
        count as u64 + 1,
        "one per partition"
    );
    for index in 0..count {
        let partition =
            list_offsets_response::ListOffsetsPartitionResponse::decode(&mut body, 7).unwrap();
        assert_eq!(partition.partition_index, index as i32);
        assert_eq!(partition.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    }
    assert_eq!(
        &body[..],
        b"\x00\x00",
        "the topic's and the body's tagged fields"
    );
}

/// A ListOffsets naming more partitions than one chunk answers each partition as a request
/// for it alone would, and every appearance of a topic and partition named more than once
/// INVALID_REQUEST, however far apart (in the same topic entry, or in another entry of that
/// name).
#[tokio::test]
async fn list_offsets_of_many_partitions_answers_repeats_across_chunks() {
    use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
    use kafka_protocol::messages::list_offsets_response::ListOffsetsPartitionResponse;
    use kafka_protocol::messages::ListOffsetsRequest;
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let created = conn
        .send(&create_topics(vec![creatable("t", 3, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    let partition = |index: i32, timestamp: i64| {
        ListOffsetsPartition::default()
            .with_partition_index(index)
            .with_current_leader_epoch(-1)
            .with_timestamp(timestamp)
    };
    // t: known partitions every 50th, else unknown ones; u: unknown; t again, repeating both.
    let first_t: Vec<ListOffsetsPartition> = (0..1_200)
        .map(|i| match i % 50 {
            0 => partition((i / 50) % 3, -2),
            _ => partition(100 + i, -1),
        })
        .collect();
    let u: Vec<ListOffsetsPartition> = (0..300).map(|i| partition(i, -1)).collect();
    let second_t: Vec<ListOffsetsPartition> = (0..1_000)
        .map(|j| match j % 100 {
            3 => partition(j % 3, -1),
            _ => partition(100 + (j * 7) % 2_400, -1),
        })
        .collect();
    let topics = vec![
        ListOffsetsTopic::default()
            .with_name(topic_name("t"))
            .with_partitions(first_t),
        ListOffsetsTopic::default()
            .with_name(topic_name("u"))
            .with_partitions(u),
        ListOffsetsTopic::default()
            .with_name(topic_name("t"))
            .with_partitions(second_t),
    ];
    let request = |topics: Vec<ListOffsetsTopic>| {
        ListOffsetsRequest::default()
            .with_replica_id((-1).into())
            .with_topics(topics)
    };
    // Wait until t's partitions are led here.
    let probe = request(vec![ListOffsetsTopic::default()
        .with_name(topic_name("t"))
        .with_partitions(vec![
            partition(0, -1),
            partition(1, -1),
            partition(2, -1),
        ])]);
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while conn.send(&probe, 7).await.unwrap().topics[0]
        .partitions
        .iter()
        .any(|p| p.error_code != 0)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "t's partitions are never led"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for version in [1, 7, 10] {
        let whole = conn.send(&request(topics.clone()), version).await.unwrap();
        assert_eq!(whole.topics.len(), 3, "v{version}");
        // Kafka answers every appearance of a partition named more than once INVALID_REQUEST.
        let mut appearances = std::collections::HashMap::new();
        for topic in &topics {
            for wanted in &topic.partitions {
                *appearances
                    .entry((topic.name.to_string(), wanted.partition_index))
                    .or_insert(0) += 1;
            }
        }
        for (asked, answered) in topics.iter().zip(&whole.topics) {
            assert_eq!(asked.name, answered.name, "v{version}");
            assert_eq!(
                asked.partitions.len(),
                answered.partitions.len(),
                "v{version}"
            );
            for (wanted, got) in asked.partitions.iter().zip(&answered.partitions) {
                let key = (asked.name.to_string(), wanted.partition_index);
                let expected = if appearances[&key] > 1 {
                    ListOffsetsPartitionResponse::default()
                        .with_partition_index(wanted.partition_index)
                        .with_error_code(42)
                        .with_timestamp(-1)
                        .with_offset(-1)
                        .with_leader_epoch(-1)
                } else {
                    let alone = request(vec![ListOffsetsTopic::default()
                        .with_name(asked.name.clone())
                        .with_partitions(vec![wanted.clone()])]);
                    let answer = conn.send(&alone, version).await.unwrap();
                    answer.topics[0].partitions[0].clone()
                };
                assert_eq!(got, &expected, "v{version} {key:?}");
            }
        }
        let repeated = whole.topics[0].partitions[0].clone();
        assert_eq!(
            (repeated.error_code, repeated.offset),
            (42, -1),
            "v{version}: t-0, named again later"
        );
    }
}

/// DeleteTopics naming distinct topics: decided from the frame, each unknown name answered
/// from it.
#[tokio::test]
async fn delete_topics_naming_distinct_topics_stays_within_four_frames() {
    // DeleteTopics v4: the names, then TimeoutMs and tags.
    let (frame, count) = distinct(
        20,
        4,
        b"",
        5,
        |name, frame| {
            frame.put_u8(5);
            frame.put_slice(name);
        },
        b"\x00\x00\x03\xe8\x00",
    );
    let mut body = answer_within_four_frames("DeleteTopics distinct topics", &frame).await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(compact_length(&mut body), count as u64 + 1, "one per topic");
    for index in 0..count {
        let result = delete_topics_response::DeletableTopicResult::decode(&mut body, 4).unwrap();
        let name = result.name.as_ref().map(|n| n.as_bytes().to_vec());
        assert_eq!(
            name,
            Some(four_letter_name(index).to_vec()),
            "topic {index}"
        );
        assert_eq!(result.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
}

/// The distinct names of `names` in order of first appearance, a repeated one twice, as
/// requests of at most 1,000 names: each name is answered as in `names`.
fn shorter_deletions(names: &[String]) -> Vec<Vec<String>> {
    let mut counts = std::collections::HashMap::new();
    for name in names {
        *counts.entry(name.as_str()).or_insert(0) += 1;
    }
    let mut seen = std::collections::HashSet::new();
    let mut requests: Vec<Vec<String>> = vec![Vec::new()];
    for name in names {
        if !seen.insert(name.as_str()) {
            continue;
        }
        let copies = if counts[name.as_str()] > 1 { 2 } else { 1 };
        if requests.last().is_some_and(|r| r.len() + copies > 1_000) {
            requests.push(Vec::new());
        }
        if let Some(request) = requests.last_mut() {
            request.extend(std::iter::repeat_n(name.clone(), copies));
        }
    }
    requests
}

/// DeleteTopics naming more topics than one chunk answers each distinct name as shorter
/// requests do (a repeated name INVALID_REQUEST at its first appearance and nowhere else,
/// even a name of a byte or two), deletes the topics it names once, and stays one decision:
/// past 10,000 deletions the whole request is refused and nothing is deleted.
#[tokio::test]
async fn delete_topics_of_many_names_answers_as_shorter_requests_and_stays_one_decision() {
    use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(300));
    let existing = ["t7", "t1500", "t2100", "a"];
    let create =
        |names: &[&str]| create_topics(names.iter().map(|n| creatable(n, 1, 1)).collect(), false);
    let names: Vec<String> = (0..2_500)
        .map(|index| match index {
            7 => "t7".to_owned(),
            1_500 => "t1500".to_owned(),
            2_100 | 2_101 => "t2100".to_owned(),
            _ if index % 100 == 9 => "again".to_owned(),
            _ if index % 100 == 11 => "a".to_owned(),
            _ if index % 100 == 13 => String::new(),
            _ if index % 500 == 17 => "ab".to_owned(),
            _ => format!("missing-{index}"),
        })
        .collect();
    let names_ref: Vec<&str> = names.iter().map(String::as_str).collect();
    for version in [1, 4, 5] {
        // Repeated names are refused, so "a" and "t2100" outlive each round (36: exists).
        let created = conn.send(&create(&existing), 7).await.unwrap();
        assert!(created
            .topics
            .iter()
            .all(|t| matches!(t.error_code, 0 | 36)));
        let whole = conn
            .send(&delete_topics_by_name(version, &names_ref), version)
            .await
            .unwrap();
        let created = conn.send(&create(&existing), 7).await.unwrap();
        assert!(created
            .topics
            .iter()
            .all(|t| matches!(t.error_code, 0 | 36)));
        let mut parts: Vec<DeletableTopicResult> = Vec::new();
        for request in shorter_deletions(&names) {
            let request: Vec<&str> = request.iter().map(String::as_str).collect();
            let answer = conn
                .send(&delete_topics_by_name(version, &request), version)
                .await
                .unwrap();
            parts.extend(answer.responses);
        }
        assert_eq!(whole.responses.len(), parts.len(), "v{version}");
        assert!(whole.responses == parts, "v{version}");
        let codes: Vec<(String, i16)> = whole
            .responses
            .iter()
            .filter(|r| {
                let name = r.name.as_ref().map_or("", |n| n.as_str());
                existing.contains(&name) || name == "again" || name.is_empty()
            })
            .map(|r| {
                (
                    r.name.as_ref().map_or(String::new(), |n| n.to_string()),
                    r.error_code,
                )
            })
            .collect();
        let expected: Vec<(String, i16)> = [
            ("t7", 0),
            ("again", 42),
            ("a", 42),
            ("", 42),
            ("t1500", 0),
            ("t2100", 42),
        ]
        .iter()
        .map(|(n, c)| (n.to_string(), *c))
        .collect();
        assert_eq!(codes, expected, "v{version}");
    }

    // 10,001 topics, deleted in one request: refused whole (POLICY_VIOLATION each, once).
    let many: Vec<String> = (0..10_001).map(|index| format!("m{index}")).collect();
    for part in many.chunks(3_000) {
        let part: Vec<&str> = part.iter().map(String::as_str).collect();
        let created = conn.send(&create(&part), 7).await.unwrap();
        assert!(created.topics.iter().all(|t| t.error_code == 0));
    }
    let many_ref: Vec<&str> = many.iter().map(String::as_str).collect();
    let refused = conn
        .send(&delete_topics_by_name(4, &many_ref), 4)
        .await
        .unwrap();
    assert_eq!(refused.responses.len(), many.len());
    assert!(
        refused.responses.iter().all(|r| r.error_code == 44),
        "POLICY_VIOLATION"
    );
    let metadata = conn.send(&metadata(12, None, false), 12).await.unwrap();
    // Left from the rounds above: "a" and "t2100", named more than once there.
    assert_eq!(metadata.topics.len(), many.len() + 2, "nothing deleted");
}

/// DeleteTopics v6 listing distinct unknown ids: decided from the frame, each answered
/// UNKNOWN_TOPIC_ID with its id.
#[tokio::test]
async fn delete_topics_v6_of_distinct_ids_stays_within_four_frames() {
    // Entry {null name, id, tags}: the id ends with the four-letter name.
    let id_of = |name: &[u8; 4]| {
        let mut id = [0x67u8; 16];
        id[12..].copy_from_slice(name);
        id
    };
    let (frame, count) = distinct(
        20,
        6,
        b"",
        18,
        |name, frame| {
            frame.put_u8(0);
            frame.put_slice(&id_of(name));
            frame.put_u8(0);
        },
        b"\x00\x00\x03\xe8\x00",
    );
    let mut body = answer_within_four_frames("DeleteTopics v6 distinct ids", &frame).await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(compact_length(&mut body), count as u64 + 1, "one per entry");
    for index in 0..count {
        let result = delete_topics_response::DeletableTopicResult::decode(&mut body, 6).unwrap();
        assert_eq!(
            (result.name, result.topic_id.into_bytes()),
            (None, id_of(&four_letter_name(index))),
            "entry {index}"
        );
        assert_eq!(result.error_code, 100, "UNKNOWN_TOPIC_ID");
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
}

type Spelled = (Option<String>, uuid::Uuid);

/// 2,500 DeleteTopics v6 entries of every kind, the topics' ids from `ids`: names and ids
/// alone that exist (deleted), are unknown or repeat across chunks, entries with both or
/// neither (repeated), an empty name, and a name listed beside its own id.
fn v6_entries(ids: &std::collections::HashMap<String, uuid::Uuid>) -> Vec<Spelled> {
    let name = |name: &str| Some(name.to_owned());
    let nil = uuid::Uuid::nil();
    (0..2_500)
        .map(|index| match index {
            7 => (name("d1"), nil),
            1_500 => (name("d2"), nil),
            20 => (None, ids["i1"]),
            1_800 => (None, ids["i2"]),
            30 | 2_200 => (None, ids["dup"]),
            40 => (None, ids["c"]),
            41 => (name("c"), nil),
            50 | 2_300 => (name("r"), nil),
            _ if index % 100 == 9 => (None, nil),
            _ if index % 100 == 11 => (name("both"), uuid::Uuid::from_u128(5)),
            _ if index % 100 == 13 => (name(""), nil),
            _ if index % 2 == 0 => (Some(format!("missing-{index}")), nil),
            _ => (None, uuid::Uuid::from_u128(0xabc_0000 + index as u128)),
        })
        .collect()
}

/// The entries of `entries` as requests of at most 1,000 answered as the whole is: each name
/// or id alone once in order of first appearance (twice when repeated), every other entry, and
/// a name kept in the request of the id it maps to (the entry before it).
fn shorter_v6(entries: &[Spelled], conflicting: uuid::Uuid) -> Vec<Vec<Spelled>> {
    let alone = |(name, id): &Spelled| name.is_some() == id.is_nil();
    let mut counts = std::collections::HashMap::new();
    for entry in entries.iter().filter(|entry| alone(entry)) {
        *counts.entry(entry.clone()).or_insert(0) += 1;
    }
    let mut seen = std::collections::HashSet::new();
    let mut units: Vec<Vec<Spelled>> = Vec::new();
    for entry in entries {
        if alone(entry) && !seen.insert(entry.clone()) {
            continue;
        }
        let copies = if alone(entry) && counts[entry] > 1 {
            2
        } else {
            1
        };
        let unit = vec![entry.clone(); copies];
        match units.last_mut() {
            Some(last) if last.iter().any(|(_, id)| *id == conflicting) => last.extend(unit),
            _ => units.push(unit),
        }
    }
    let mut requests: Vec<Vec<Spelled>> = vec![Vec::new()];
    for unit in units {
        if requests
            .last()
            .is_some_and(|r| r.len() + unit.len() > 1_000)
        {
            requests.push(Vec::new());
        }
        if let Some(request) = requests.last_mut() {
            request.extend(unit);
        }
    }
    requests
}

/// Creates `topics` (those that exist stay) and returns the id of every topic the connection
/// may see, by name.
pub(crate) async fn created_ids(
    conn: &mut KafkaConn,
    topics: &[&str],
) -> std::collections::HashMap<String, uuid::Uuid> {
    let creatable = topics.iter().map(|n| creatable(n, 1, 1)).collect();
    let created = conn
        .send(&create_topics(creatable, false), 7)
        .await
        .unwrap();
    assert!(created
        .topics
        .iter()
        .all(|t| matches!(t.error_code, 0 | 36)));
    topic_ids(conn).await.into_iter().collect()
}

/// The (name, id) of every topic the connection may see, by name.
pub(crate) async fn topic_ids(conn: &mut KafkaConn) -> Vec<(String, uuid::Uuid)> {
    let described = conn.send(&metadata(12, None, false), 12).await.unwrap();
    let mut topics: Vec<(String, uuid::Uuid)> = described
        .topics
        .iter()
        .map(|t| (t.name.as_ref().unwrap().to_string(), t.topic_id))
        .collect();
    topics.sort();
    topics
}

/// DeleteTopics v6 listing more entries than one chunk answers each entry as shorter requests
/// do: names and ids alone deleted (answered with the id or name they resolve to), each
/// repeated one INVALID_REQUEST at its first appearance only, every entry with both or neither
/// INVALID_REQUEST, a name beside its own id neither deleted; the same request on a node that
/// may not delete answers each distinct entry once.
#[tokio::test]
async fn delete_topics_v6_of_many_entries_answers_as_shorter_requests() {
    use gregor_integration::admin::delete_topic_states;
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(300));
    let topics = ["d1", "d2", "i1", "i2", "dup", "c", "r"];
    let ids = created_ids(&mut conn, &topics).await;
    let entries = v6_entries(&ids);
    let whole = conn
        .send(&delete_topic_states(&entries), 6)
        .await
        .unwrap()
        .responses;
    let left: Vec<String> = topic_ids(&mut conn)
        .await
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(left, ["c", "dup", "r"], "deleted by name and by id");
    let answer_of = |name: Option<&str>, id: uuid::Uuid| {
        whole
            .iter()
            .find(|r| r.name.as_ref().map(|n| n.as_str()) == name && r.topic_id == id)
            .map(|r| r.error_code)
    };
    assert_eq!(answer_of(Some("d1"), ids["d1"]), Some(0));
    assert_eq!(answer_of(Some("i2"), ids["i2"]), Some(0));
    assert_eq!(
        answer_of(Some("c"), ids["c"]),
        Some(42),
        "maps to a listed id"
    );
    assert_eq!(answer_of(None, ids["c"]), Some(42), "a duplicate id");
    assert_eq!(answer_of(None, ids["dup"]), Some(42));

    let new_ids = created_ids(&mut conn, &topics).await;
    let old_of: std::collections::HashMap<uuid::Uuid, uuid::Uuid> = topics
        .iter()
        .map(|topic| (new_ids[*topic], ids[*topic]))
        .collect();
    let mut parts = Vec::new();
    for request in shorter_v6(&v6_entries(&new_ids), new_ids["c"]) {
        let answer = conn.send(&delete_topic_states(&request), 6).await.unwrap();
        parts.extend(answer.responses.into_iter().map(|mut result| {
            result.topic_id = old_of
                .get(&result.topic_id)
                .copied()
                .unwrap_or(result.topic_id);
            result
        }));
    }
    assert_same_entries(&whole, &parts, "DeleteTopics v6");

    // Deletion disabled: every distinct entry once, without a message.
    let refusing = GregorNode::start(&[
        ("auto.create.topics.enable", "false"),
        ("delete.topic.enable", "false"),
    ])
    .unwrap();
    let mut conn = KafkaConn::connect(&refusing.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(300));
    let refused = conn
        .send(&delete_topic_states(&entries), 6)
        .await
        .unwrap()
        .responses;
    let mut seen = std::collections::HashSet::new();
    let distinct: Vec<Spelled> = entries
        .iter()
        .filter(|entry| seen.insert((*entry).clone()))
        .cloned()
        .collect();
    let answered: Vec<Spelled> = refused
        .iter()
        .map(|r| (r.name.as_ref().map(|n| n.to_string()), r.topic_id))
        .collect();
    assert_eq!(answered, distinct);
    assert!(refused
        .iter()
        .all(|r| r.error_code == 73 && r.error_message.is_none()));
}

/// AddRaftVoter listing distinct listeners, none the quorum's: read from the frame, refused
/// with a message naming ten of them.
#[tokio::test]
async fn add_raft_voter_listing_distinct_listeners_stays_within_four_frames() {
    // Cluster id null, timeout, voter 99 with a directory id; listeners {name, "h", 9093,
    // tags}; then AckWhenCommitted and tags.
    let mut prefix = vec![0u8];
    prefix.extend_from_slice(&1_000i32.to_be_bytes());
    prefix.extend_from_slice(&99i32.to_be_bytes());
    prefix.extend_from_slice(&uuid::Uuid::from_u128(99).into_bytes());
    let (frame, count) = distinct(
        80,
        2,
        &prefix,
        10,
        |name, frame| {
            frame.put_u8(5);
            frame.put_slice(name);
            frame.put_slice(b"\x02h\x23\x85\x00");
        },
        b"\x01\x00",
    );
    let mut body = answer_within_four_frames("AddRaftVoter distinct listeners", &frame).await;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(body.get_i16(), 42, "INVALID_REQUEST");
    let length = compact_length(&mut body) as usize - 1;
    let message = std::str::from_utf8(&body[..length]).unwrap().to_owned();
    let named: Vec<String> = (0..10)
        .map(|index| {
            let name = four_letter_name(index);
            format!("{}://h:9093", std::str::from_utf8(&name).unwrap())
        })
        .collect();
    assert_eq!(
        message,
        format!(
            "Add voter request didn't include the endpoint ([{}, and {} more]) for the default listener CONTROLLER",
            named.join(", "),
            count - 10
        )
    );
}

/// FindCoordinator v6 naming distinct keys: each key is located on its own, so the node answers
/// them a chunk at a time. Transactional ids, each refused with a message (an answer 23 times
/// the frame, 228 MB, written from compressed chunks), and group ids.
#[tokio::test]
async fn find_coordinator_naming_distinct_keys_stays_within_four_frames() {
    use kafka_protocol::messages::find_coordinator_response::Coordinator;
    for (key_type, what) in [(1u8, "transactional ids"), (0, "group ids")] {
        let (frame, count) = distinct(
            10,
            6,
            &[key_type],
            5,
            |name, frame| {
                frame.put_u8(5);
                frame.put_slice(name);
            },
            b"\x00",
        );
        let mut body =
            answer_within_four_frames(&format!("FindCoordinator of {what}"), &frame).await;
        assert_eq!(body.get_i32(), 0, "throttle time");
        assert_eq!(compact_length(&mut body), count as u64 + 1, "one per key");
        let mut first = None;
        for index in 0..count {
            let located = Coordinator::decode(&mut body, 6).unwrap();
            assert_eq!(
                located.key.as_str().as_bytes(),
                &four_letter_name(index)[..],
                "{what}: key {index}"
            );
            if key_type == 1 {
                assert_eq!(located.error_code, 15, "{what}: COORDINATOR_NOT_AVAILABLE");
            }
            let answer = located.with_key(Default::default());
            // Group ids fall on the partitions of the offsets topic, all led by this node.
            let answer = answer.with_error_code(0).with_error_message(None);
            assert_eq!(
                &answer,
                first.get_or_insert_with(|| answer.clone()),
                "{what}: key {index}"
            );
        }
        assert_eq!(&body[..], b"\x00", "the body's tagged fields");
    }
}

/// FindCoordinator v4 to v6 naming more keys than one chunk is answered as the same keys in
/// shorter requests, repeated keys included.
#[tokio::test]
async fn find_coordinator_of_many_keys_answers_as_shorter_requests() {
    use kafka_protocol::messages::FindCoordinatorRequest;
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    groups_ready(&mut conn).await;
    let keys: Vec<_> = (0..2_500)
        .map(|index| match index % 100 {
            7 => "again".to_owned(),
            _ => format!("key-{index}"),
        })
        .map(|key| s(&key))
        .collect();
    let parts: Vec<_> = keys.chunks(250).collect();
    for (version, key_type) in [(4, 0), (5, 1), (6, 0), (6, 2)] {
        let request = |keys: &[kafka_protocol::protocol::StrBytes]| {
            FindCoordinatorRequest::default()
                .with_key_type(key_type)
                .with_coordinator_keys(keys.to_vec())
        };
        let whole = conn.send(&request(&keys), version).await.unwrap();
        let mut shorter = Vec::new();
        for part in &parts {
            shorter.extend(
                conn.send(&request(part), version)
                    .await
                    .unwrap()
                    .coordinators,
            );
        }
        assert_eq!(whole.coordinators.len(), keys.len(), "v{version}");
        assert!(
            whole.coordinators == shorter,
            "FindCoordinator v{version} key type {key_type}"
        );
    }
}

/// OffsetForLeaderEpoch v4 naming distinct partitions: answered a chunk of partitions at a
/// time, each answer kept as its error code.
#[tokio::test]
async fn offset_for_leader_epoch_naming_distinct_partitions_stays_within_four_frames() {
    use kafka_protocol::messages::offset_for_leader_epoch_response::EpochEndOffset;
    // ReplicaId -1; topic "t" with {partition, current epoch -1, epoch 0, tags}.
    let count = (FRAME - 60) / 13;
    let frame = gregor_integration::frames::flexible_list(
        23,
        4,
        b"\xff\xff\xff\xff\x02\x02t",
        count,
        13,
        |index, frame| {
            frame.put_i32(index as i32);
            frame.put_i32(-1);
            frame.put_i32(0);
            frame.put_u8(0);
        },
        b"\x00\x00",
    );
    let mut body =
        answer_within_four_frames("OffsetForLeaderEpoch distinct partitions", &frame).await;
    assert_eq!(
        &body[..7],
        b"\x00\x00\x00\x00\x02\x02t",
        "throttle, one topic, t"
    );
    body.advance(7);
    assert_eq!(
        compact_length(&mut body),
        count as u64 + 1,
        "one per partition"
    );
    for index in 0..count {
        let partition = EpochEndOffset::decode(&mut body, 4).unwrap();
        assert_eq!(partition.partition, index as i32);
        assert_eq!(partition.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!((partition.leader_epoch, partition.end_offset), (-1, -1));
    }
    assert_eq!(
        &body[..],
        b"\x00\x00",
        "the topic's and the body's tagged fields"
    );
}

/// An OffsetForLeaderEpoch v3 or v4 naming more partitions than one chunk (an existing topic's
/// partitions, missing ones, repeats, an unknown topic) is answered as shorter requests are.
#[tokio::test]
async fn offset_for_leader_epoch_of_many_partitions_answers_as_shorter_requests() {
    use kafka_protocol::messages::offset_for_leader_epoch_request::{
        OffsetForLeaderPartition, OffsetForLeaderTopic,
    };
    use kafka_protocol::messages::{CreateTopicsRequest, OffsetForLeaderEpochRequest};
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let created = conn
        .send::<CreateTopicsRequest>(&create_topics(vec![creatable("epochs", 3, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    let topic = |name: &str, partitions: std::ops::Range<i32>| {
        OffsetForLeaderTopic::default()
            .with_topic(topic_name(name))
            .with_partitions(
                partitions
                    .map(|index| {
                        OffsetForLeaderPartition::default()
                            .with_partition(index % 5)
                            .with_current_leader_epoch(if index % 7 == 0 { 3 } else { -1 })
                            .with_leader_epoch(0)
                    })
                    .collect(),
            )
    };
    // Parts of at most 1,024 partitions, each served whole.
    let parts = [
        vec![topic("epochs", 0..900), topic("missing", 0..100)],
        vec![topic("epochs", 900..1_800)],
        vec![topic("missing", 0..400), topic("epochs", 0..300)],
    ];
    // The leader's epochs become known once the partitions are led: wait for a stable answer.
    let bootstrap = node.bootstrap();
    wait_until("the partitions led", Duration::from_secs(30), || {
        let request = OffsetForLeaderEpochRequest::default()
            .with_replica_id(kafka_protocol::messages::BrokerId(-1))
            .with_topics(vec![OffsetForLeaderTopic::default()
                .with_topic(topic_name("epochs"))
                .with_partitions(
                    (0..3)
                        .map(|index| {
                            OffsetForLeaderPartition::default()
                                .with_partition(index)
                                .with_current_leader_epoch(-1)
                        })
                        .collect(),
                )]);
        let bootstrap = bootstrap.clone();
        async move {
            let mut conn = KafkaConn::connect(&bootstrap).await?;
            let response = conn.send(&request, 4).await?;
            Ok(response.topics[0]
                .partitions
                .iter()
                .all(|p| p.error_code == 0)
                .then_some(()))
        }
    })
    .await
    .unwrap();
    for version in [3, 4] {
        let request = |topics: Vec<OffsetForLeaderTopic>| {
            OffsetForLeaderEpochRequest::default()
                .with_replica_id(kafka_protocol::messages::BrokerId(-1))
                .with_topics(topics)
        };
        let whole = conn.send(&request(parts.concat()), version).await.unwrap();
        let mut shorter = Vec::new();
        for part in &parts {
            shorter.extend(
                conn.send(&request(part.clone()), version)
                    .await
                    .unwrap()
                    .topics,
            );
        }
        assert_eq!(whole.topics.len(), 5, "v{version}");
        assert!(whole.topics == shorter, "OffsetForLeaderEpoch v{version}");
        let codes: std::collections::BTreeSet<i16> = whole
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect();
        // Led partitions, missing ones, fenced epochs, an unknown topic.
        assert!(codes.contains(&0) && codes.contains(&3), "{codes:?}");
    }
}

/// DescribeProducers v0 and DeleteRecords v2 naming distinct partitions of an unknown topic:
/// answered a chunk of partitions at a time, each answer kept as its error code.
#[tokio::test]
async fn describe_producers_and_delete_records_naming_distinct_partitions_stay_within_four_frames()
{
    use kafka_protocol::messages::delete_records_response::DeleteRecordsPartitionResult;
    use kafka_protocol::messages::describe_producers_response::PartitionResponse;
    // One topic "t" with partition indexes 0, 1, 2, ...
    let count = (FRAME - 60) / 4;
    let frame = gregor_integration::frames::flexible_list(
        61,
        0,
        b"\x02\x02t",
        count,
        4,
        |index, frame| frame.put_i32(index as i32),
        b"\x00\x00",
    );
    let mut body = answer_within_four_frames("DescribeProducers distinct partitions", &frame).await;
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
        let partition = PartitionResponse::decode(&mut body, 0).unwrap();
        assert_eq!(partition.partition_index, index as i32);
        assert_eq!(partition.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
        assert!(partition.active_producers.is_empty());
    }
    assert_eq!(
        &body[..],
        b"\x00\x00",
        "the topic's and the body's tagged fields"
    );

    // One topic "t" with {partition, offset 0, tags}, then a timeout of 1 s.
    let count = (FRAME - 60) / 13;
    let frame = gregor_integration::frames::flexible_list(
        21,
        2,
        b"\x02\x02t",
        count,
        13,
        |index, frame| {
            frame.put_i32(index as i32);
            frame.put_i64(0);
            frame.put_u8(0);
        },
        b"\x00\x00\x00\x03\xe8\x00",
    );
    let mut body = answer_within_four_frames("DeleteRecords distinct partitions", &frame).await;
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
        let partition = DeleteRecordsPartitionResult::decode(&mut body, 2).unwrap();
        assert_eq!(partition.partition_index, index as i32);
        assert_eq!(partition.error_code, 3, "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(partition.low_watermark, -1);
    }
    assert_eq!(
        &body[..],
        b"\x00\x00",
        "the topic's and the body's tagged fields"
    );
}

/// DescribeProducers and DeleteRecords naming more partitions than one chunk (an existing
/// topic's partitions, missing ones, repeats, an unknown topic) are answered as shorter
/// requests are.
#[tokio::test]
async fn describe_producers_and_delete_records_of_many_partitions_answer_as_shorter_requests() {
    use kafka_protocol::messages::delete_records_request::{
        DeleteRecordsPartition, DeleteRecordsTopic,
    };
    use kafka_protocol::messages::describe_producers_request::TopicRequest;
    use kafka_protocol::messages::{
        CreateTopicsRequest, DeleteRecordsRequest, DescribeProducersRequest,
    };
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let created = conn
        .send::<CreateTopicsRequest>(&create_topics(vec![creatable("producers", 3, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    let ranges: [&[(&str, std::ops::Range<i32>)]; 3] = [
        &[("producers", 0..900), ("missing", 0..100)],
        &[("producers", 900..1_800)],
        &[("missing", 0..400), ("producers", 0..300)],
    ];
    let described = |part: &[(&str, std::ops::Range<i32>)]| {
        DescribeProducersRequest::default().with_topics(
            part.iter()
                .map(|(name, range)| {
                    TopicRequest::default()
                        .with_name(topic_name(name))
                        .with_partition_indexes(range.clone().map(|i| i % 5).collect())
                })
                .collect(),
        )
    };
    let deleted = |part: &[(&str, std::ops::Range<i32>)]| {
        DeleteRecordsRequest::default()
            .with_timeout_ms(1_000)
            .with_topics(
                part.iter()
                    .map(|(name, range)| {
                        DeleteRecordsTopic::default()
                            .with_name(topic_name(name))
                            .with_partitions(
                                range
                                    .clone()
                                    .map(|i| {
                                        DeleteRecordsPartition::default()
                                            .with_partition_index(i % 5)
                                            .with_offset(if i % 3 == 0 { 0 } else { 7 })
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
    };
    let bootstrap = node.bootstrap();
    wait_until("the partitions led", Duration::from_secs(30), || {
        let request = described(&[("producers", 0..3)]);
        let bootstrap = bootstrap.clone();
        async move {
            let mut conn = KafkaConn::connect(&bootstrap).await?;
            let response = conn.send(&request, 0).await?;
            Ok(response.topics[0]
                .partitions
                .iter()
                .all(|p| p.error_code == 0)
                .then_some(()))
        }
    })
    .await
    .unwrap();
    let whole = conn.send(&described(&ranges.concat()), 0).await.unwrap();
    let mut shorter = Vec::new();
    for part in ranges {
        shorter.extend(conn.send(&described(part), 0).await.unwrap().topics);
    }
    assert_eq!(whole.topics.len(), 5);
    assert!(whole.topics == shorter, "DescribeProducers");
    for version in [0, 1, 2] {
        let whole = conn
            .send(&deleted(&ranges.concat()), version)
            .await
            .unwrap();
        let mut shorter = Vec::new();
        for part in ranges {
            shorter.extend(conn.send(&deleted(part), version).await.unwrap().topics);
        }
        assert_eq!(whole.topics.len(), 5, "DeleteRecords v{version}");
        assert!(whole.topics == shorter, "DeleteRecords v{version}");
        let codes: std::collections::BTreeSet<i16> = whole
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .collect();
        // Deleted to offset 0, past the end (OFFSET_OUT_OF_RANGE), missing partitions.
        assert!(codes.contains(&0) && codes.contains(&3), "{codes:?}");
    }
}

/// OffsetForLeaderEpoch, DescribeProducers and DeleteRecords naming many partitions, malformed
/// after their first chunk (the last partition's tagged fields claim a field that is not
/// there, or the last index is cut short): the connection is closed without an answer, as the
/// crate's decoder refuses the whole request, and the node serves the next client.
#[tokio::test]
async fn partition_lists_malformed_after_their_first_chunk_are_refused_whole() {
    use kafka_protocol::messages::ApiVersionsRequest;
    let node = GregorNode::start(&[]).unwrap();
    let count = 3_000;
    let epochs = gregor_integration::frames::flexible_list(
        23,
        4,
        b"\xff\xff\xff\xff\x02\x02t",
        count,
        13,
        |index, frame| {
            frame.put_i32(index as i32);
            frame.put_i32(-1);
            frame.put_i32(0);
            frame.put_u8(u8::from(index == count - 1));
        },
        b"\x00\x00",
    );
    let deletions = gregor_integration::frames::flexible_list(
        21,
        2,
        b"\x02\x02t",
        count,
        13,
        |index, frame| {
            frame.put_i32(index as i32);
            frame.put_i64(0);
            frame.put_u8(u8::from(index == count - 1));
        },
        b"\x00\x00\x00\x03\xe8\x00",
    );
    // The last index has two of its four bytes, then the tagged fields.
    let mut producers = gregor_integration::frames::flexible_list(
        61,
        0,
        b"\x02\x02t",
        count,
        4,
        |index, frame| frame.put_i32(index as i32),
        b"\x00\x00",
    );
    let cut = producers.len() - 4;
    producers.copy_within(cut.., cut - 2);
    producers.truncate(producers.len() - 2);
    let size = (producers.len() - 4) as i32;
    producers[..4].copy_from_slice(&size.to_be_bytes());
    for (what, frame) in [
        ("OffsetForLeaderEpoch", epochs),
        ("DeleteRecords", deletions),
        ("DescribeProducers", producers),
    ] {
        let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
        conn.set_timeout(Duration::from_secs(60));
        conn.write_raw(&frame).await.unwrap();
        assert!(
            conn.read_frame().await.map(|f| f.is_none()).unwrap_or(true),
            "{what}: closed without an answer"
        );
        let mut next = KafkaConn::connect(&node.bootstrap()).await.unwrap();
        let versions = next.send(&ApiVersionsRequest::default(), 0).await.unwrap();
        assert_eq!(versions.error_code, 0, "{what}: the node serves on");
    }
}

/// ListGroups v5 filtering by 10 MB of distinct states: the node keeps the names a group's
/// state can have (`collapse.rs`), so the filter lists the group whose state one of them
/// names (ASCII case ignored), and no group when none does.
#[tokio::test]
async fn list_groups_filtering_by_distinct_states_stays_within_four_frames() {
    use kafka_protocol::messages::ListGroupsResponse;
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(300));
    groups_ready(&mut conn).await;
    let created = conn
        .send(&create_topics(vec![creatable("t", 1, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    // A standalone commit makes an Empty classic group.
    commit(&mut conn, "listed", 1).await;
    let count = (FRAME - 60) / 5;
    let states = |last: Option<&[u8]>, types: &[u8]| {
        gregor_integration::frames::flexible_list(
            16,
            5,
            b"",
            count + usize::from(last.is_some()),
            5,
            |index, frame| {
                let name = match (index < count, last) {
                    (false, Some(last)) => last.to_vec(),
                    _ => four_letter_name(index).to_vec(),
                };
                frame.put_u8(name.len() as u8 + 1);
                frame.put_slice(&name);
            },
            types,
        )
    };
    // Then the types filter {"CLASSIC"} (or {"consumer"}) and the body's tags.
    let classic = b"\x02\x08CLASSIC\x00";
    let listed = |mut body: Bytes| {
        let answer = ListGroupsResponse::decode(&mut body, 5).unwrap();
        assert_eq!(answer.error_code, 0);
        assert!(body.is_empty());
        answer
            .groups
            .into_iter()
            .map(|g| {
                (
                    g.group_id.to_string(),
                    g.group_state.to_string(),
                    g.group_type.to_string(),
                )
            })
            .collect::<Vec<_>>()
    };
    let body = answer_within_four_frames_on(
        &node,
        &mut conn,
        "ListGroups distinct states, then eMPTY",
        &states(Some(b"eMPTY"), classic),
    )
    .await;
    assert_eq!(
        listed(body),
        [(
            "listed".to_owned(),
            "Empty".to_owned(),
            "classic".to_owned()
        )]
    );
    for (last, types, what) in [
        (None, &classic[..], "distinct states"),
        (
            Some(&b"Empty"[..]),
            &b"\x02\x09consumer\x00"[..],
            "Empty of type consumer",
        ),
    ] {
        let body = answer_within_four_frames_on(&node, &mut conn, what, &states(last, types)).await;
        assert_eq!(listed(body), [], "{what}");
    }
}

/// DescribeLogDirs v4 naming 10 MB of distinct missing topics, then topic "t" with partitions
/// {2, 1, 1, 7, -1}: the node keeps the topics of its image (`collapse.rs`), so its one dir
/// lists t's partitions 1 and 2 and no other topic's.
#[tokio::test]
async fn describe_log_dirs_naming_distinct_topics_stays_within_four_frames() {
    use kafka_protocol::messages::DescribeLogDirsResponse;
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(300));
    let created = conn
        .send(&create_topics(vec![creatable("t", 3, 1)], false), 7)
        .await
        .unwrap();
    assert_eq!(created.topics[0].error_code, 0);
    // topics {name, [0], tags}, then t's, then the body's tags.
    let count = (FRAME - 60) / 11;
    let frame = gregor_integration::frames::flexible_list(
        35,
        4,
        b"",
        count + 1,
        11,
        |index, frame| {
            if index < count {
                frame.put_u8(5);
                frame.put_slice(&four_letter_name(index));
                frame.put_slice(b"\x02\x00\x00\x00\x00\x00");
            } else {
                frame.put_slice(b"\x02t\x06");
                for partition in [2, 1, 1, 7, -1] {
                    frame.put_i32(partition);
                }
                frame.put_u8(0);
            }
        },
        b"\x00",
    );
    // The logs are created as the image reaches the log manager.
    let described = |mut body: Bytes| {
        let answer = DescribeLogDirsResponse::decode(&mut body, 4).unwrap();
        assert_eq!(answer.error_code, 0);
        assert!(body.is_empty());
        assert_eq!(answer.results.len(), 1, "one log dir");
        let mut listed: Vec<(String, Vec<i32>)> = answer.results[0]
            .topics
            .iter()
            .filter(|t| !t.partitions.is_empty())
            .map(|t| {
                let mut indexes: Vec<i32> =
                    t.partitions.iter().map(|p| p.partition_index).collect();
                indexes.sort_unstable();
                (t.name.to_string(), indexes)
            })
            .collect();
        listed.sort();
        listed
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let body =
            answer_within_four_frames_on(&node, &mut conn, "DescribeLogDirs distinct", &frame)
                .await;
        let listed = described(body);
        if listed == [("t".to_owned(), vec![1, 2])] {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "t's logs never listed: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// DescribeQuorum v2 naming distinct partitions of `__cluster_metadata` (the quorum's one
/// partition among them): such a request never names that partition alone, so Kafka's
/// controller answers each partition UNKNOWN_TOPIC_OR_PARTITION; the answer (five times the
/// frame) is written from the frame.
#[tokio::test]
async fn describe_quorum_naming_distinct_partitions_stays_within_four_frames() {
    let count = (FRAME - 60) / 5;
    let frame = gregor_integration::frames::describe_quorum_v2(count);
    let body = answer_within_four_frames("DescribeQuorum distinct partitions", &frame).await;
    gregor_integration::frames::check_describe_quorum_v2_unknown(body, count).unwrap();
}

/// DescribeQuorum naming more partitions than one chunk, the quorum's partition among them
/// past the first chunk, is answered at v0-2 as shorter requests naming more than one
/// partition: each partition UNKNOWN_TOPIC_OR_PARTITION; the quorum's partition alone is still
/// described.
#[tokio::test]
async fn describe_quorum_of_many_partitions_answers_as_shorter_requests() {
    use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
    use kafka_protocol::messages::DescribeQuorumRequest;
    let node = GregorNode::start(&[]).unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    conn.set_timeout(Duration::from_secs(120));
    let topic = |name: &str, partitions: std::ops::Range<i32>| {
        TopicData::default()
            .with_topic_name(topic_name(name))
            .with_partitions(
                partitions
                    .map(|index| PartitionData::default().with_partition_index(index % 700))
                    .collect(),
            )
    };
    let parts = [
        vec![topic("t", 0..1_000), topic("__cluster_metadata", 1..25)],
        vec![topic("__cluster_metadata", 0..1), topic("t", 5..6)],
    ];
    let request = |topics: Vec<TopicData>| DescribeQuorumRequest::default().with_topics(topics);
    for version in 0..=2 {
        let whole = conn.send(&request(parts.concat()), version).await.unwrap();
        let mut shorter = Vec::new();
        for part in &parts {
            let answer = conn.send(&request(part.clone()), version).await.unwrap();
            assert_eq!(answer.error_code, 0, "v{version}");
            shorter.extend(answer.topics);
        }
        assert_eq!((whole.error_code, whole.nodes.len()), (0, 0), "v{version}");
        assert_eq!(whole.topics.len(), 4, "v{version}");
        assert!(whole.topics == shorter, "DescribeQuorum v{version}");
        assert!(
            whole
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .all(|p| p.error_code == 3),
            "v{version}: every partition UNKNOWN_TOPIC_OR_PARTITION"
        );
        let alone = conn
            .send(&request(vec![topic("__cluster_metadata", 0..1)]), version)
            .await
            .unwrap();
        let described = &alone.topics[0].partitions[0];
        assert_eq!(
            (described.error_code, described.leader_id.0),
            (0, 1),
            "v{version}: the quorum's partition alone is described"
        );
    }
}

/// A long DescribeQuorum refused as a whole (DESCRIBE on the cluster denied) gets the refusal a
/// shorter request gets: CLUSTER_AUTHORIZATION_FAILED at the top, no topics.
#[tokio::test]
async fn describe_quorum_of_many_partitions_refused_whole_as_shorter_requests() {
    use gregor_integration::admin::acl::{CLUSTER, DENY, DESCRIBE, LITERAL};
    use gregor_integration::admin::anonymous_acl;
    use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
    use kafka_protocol::messages::{CreateAclsRequest, DescribeQuorumRequest};
    let node = GregorNode::start(&[
        ("authorizer.class.name", "StandardAuthorizer"),
        ("allow.everyone.if.no.acl.found", "true"),
    ])
    .unwrap();
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let denial = anonymous_acl(CLUSTER, "kafka-cluster", LITERAL, DESCRIBE, DENY);
    let created = conn
        .send(
            &CreateAclsRequest::default().with_creations(vec![denial]),
            3,
        )
        .await
        .unwrap();
    assert_eq!(created.results[0].error_code, 0, "{created:?}");
    let request = |partitions: i32| {
        DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
            .with_topic_name(topic_name("__cluster_metadata"))
            .with_partitions(
                (0..partitions)
                    .map(|index| PartitionData::default().with_partition_index(index))
                    .collect(),
            )])
    };
    let bootstrap = node.bootstrap();
    let short = wait_until(
        "DESCRIBE on the cluster denied",
        Duration::from_secs(30),
        || {
            let bootstrap = bootstrap.clone();
            async move {
                let mut conn = KafkaConn::connect(&bootstrap).await?;
                let answer = conn.send(&request(2), 2).await?;
                Ok((answer.error_code == 31).then_some(answer))
            }
        },
    )
    .await
    .unwrap();
    let long = conn.send(&request(2_000), 2).await.unwrap();
    assert!(long.topics.is_empty(), "{:?}", long.topics.len());
    assert_eq!(
        long, short,
        "CLUSTER_AUTHORIZATION_FAILED, as a shorter request"
    );
}

/// A frame of a few dozen bytes whose first list claims 2^31 - 2 elements (the request
/// header, then that length, then 30 bytes).
fn claiming_a_huge_list(api_key: i16, version: i16, flexible: bool) -> BytesMut {
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    frame.put_i16(api_key);
    frame.put_i16(version);
    frame.put_i32(7);
    frame.put_i16(1);
    frame.put_u8(b'm');
    if flexible {
        frame.put_u8(0);
        // 2^31 - 1 as an unsigned varint: the compact length of 2^31 - 2 elements.
        frame.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x07]);
    } else {
        frame.put_i32(0x7fff_fffe);
    }
    frame.put_bytes(1, 30);
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    frame
}

#[tokio::test]
async fn a_list_longer_than_its_frame_is_refused_without_being_sized() {
    // Each once took the node 262 MB to 1 GB before it closed the connection: the scans of
    // long lists sized their bitmaps and offsets by the claimed length. As Kafka's readers,
    // a length beyond the bytes left refuses the request first.
    let node = GregorNode::start(&[("auto.create.topics.enable", "false")]).unwrap();
    let cases = [
        ("DeleteTopics v1", 20, 1, false),
        ("DeleteTopics v6", 20, 6, true),
        ("AlterConfigs v0", 33, 0, false),
        ("AlterConfigs v2", 33, 2, true),
        ("IncrementalAlterConfigs v1", 44, 1, true),
        ("AlterClientQuotas v0", 49, 0, false),
        ("AlterClientQuotas v1", 49, 1, true),
    ];
    for (what, api_key, version, flexible) in cases {
        node.reset_peak_memory().unwrap();
        let before = node.resident_memory().unwrap();
        let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
        conn.set_timeout(Duration::from_secs(60));
        conn.write_raw(&claiming_a_huge_list(api_key, version, flexible))
            .await
            .unwrap();
        let answer = conn.read_frame().await;
        assert!(
            matches!(answer, Ok(None) | Err(_)),
            "{what}: answered {answer:?} instead of closing the connection"
        );
        let after = node.resident_memory().unwrap();
        let growth = after.peak.saturating_sub(before.current);
        assert!(
            growth < 64 << 20,
            "{what}: a {}-byte frame grew the node's peak resident memory by {growth} bytes",
            claiming_a_huge_list(api_key, version, flexible).len()
        );
    }
    // The node still serves.
    let mut conn = KafkaConn::connect(&node.bootstrap()).await.unwrap();
    let answer = conn.send(&metadata(12, None, false), 12).await.unwrap();
    assert_eq!(answer.topics.len(), 0);
}
