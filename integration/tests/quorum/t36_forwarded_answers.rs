//! A broker forwards a client's CreateTopics inside an Envelope; an answer many times the
//! request (every name refused with its message) crosses the controller and the broker without
//! being held whole by either (issue #11: each node's peak resident memory grows by less than
//! four frames), and a large answer through the broker is the one the controller gives.

use std::time::Duration;

use bytes::{Buf, Bytes};
use gregor_integration::admin::acl::{
    ALLOW, ALTER, CLUSTER, CLUSTER_ACTION, CREATE, DENY, LITERAL, PREFIXED, TOPIC,
};
use gregor_integration::admin::{anonymous_acl, creatable, create_topics, metadata, s};
use gregor_integration::frames::{compact_length, create_topics_v7, four_letter_name};
use gregor_integration::{decode_response, wait_until, GregorNode, KafkaConn};
use kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateTopicsRequest, DescribeAclsRequest, MetadataRequest, ResponseHeader,
};
use kafka_protocol::protocol::Decodable;

use crate::{wait_forwarding, Cluster, FORM_TIMEOUT};

/// The frame size: 10 MB, or `GREGOR_FORWARDED_FRAME_BYTES` (BENCHMARKS.md measures the
/// default `socket.request.max.bytes`, 104,857,600).
fn frame_size() -> usize {
    std::env::var("GREGOR_FORWARDED_FRAME_BYTES")
        .ok()
        .and_then(|bytes| bytes.parse().ok())
        .unwrap_or(10_000_000)
}

/// The controller's `broker.session.timeout.ms` in these clusters: a debug build on two busy
/// cores takes tens of seconds over a 10 MB request, and a broker it cannot hear from in that
/// time would be fenced, which these tests are not about.
const SLOW_SESSION: (&str, &str) = ("broker.session.timeout.ms", "120000");

/// Sends `frame` to `addr` and returns the answer frame (size prefix read).
async fn answer(addr: &str, frame: &[u8]) -> anyhow::Result<Bytes> {
    let mut conn = KafkaConn::connect(addr).await?;
    conn.set_timeout(Duration::from_secs(600));
    conn.write_raw(frame).await?;
    conn.read_frame()
        .await?
        .ok_or_else(|| anyhow::anyhow!("the connection closed without an answer"))
}

fn growth(node: &GregorNode, before: u64) -> u64 {
    node.resident_memory().unwrap().peak.saturating_sub(before)
}

/// Logs how much `request` (a frame of `frame_len` bytes, `frame_size()` asked for) grew the
/// peak resident memory of the controller and of the broker, and checks each grew by less than
/// four frames.
fn within_four_frames(request: &str, frame_len: usize, controller_growth: u64, broker_growth: u64) {
    eprintln!(
        "a {frame_len}-byte {request}: peak growth {controller_growth} bytes on the controller, \
         {broker_growth} on the broker"
    );
    for (node, grown) in [("controller", controller_growth), ("broker", broker_growth)] {
        assert!(
            grown < 4 * frame_size() as u64,
            "a {frame_len}-byte {request} grew the {node}'s peak resident memory by {grown} bytes"
        );
    }
}

/// Sends `frame` through `broker` and returns the answer frame with how much the peak
/// resident memory of `controller` and of `broker` grew meanwhile.
async fn answer_through(
    controller: &GregorNode,
    broker: &GregorNode,
    frame: &[u8],
) -> anyhow::Result<(Bytes, u64, u64)> {
    let (controller_before, broker_before) = (
        controller.resident_memory()?.current,
        broker.resident_memory()?.current,
    );
    let body = answer(&broker.bootstrap(), frame).await?;
    Ok((
        body,
        growth(controller, controller_before),
        growth(broker, broker_before),
    ))
}

/// Sends `frame_size()` of distinct four-letter names of one partition each through the
/// cluster's broker. Past the controller's 10,000 records the creation is refused whole: every
/// allowed name is answered with the message (the answer is about six times the frame), then
/// each name `denied` CREATE. Checks every answer and that neither node's peak resident memory
/// grew by four frames.
async fn distinct_topics_within_four_frames(
    cluster: &Cluster,
    what: &str,
    denied: impl Fn(usize) -> bool,
) -> anyhow::Result<()> {
    let (controller, broker) = (&cluster.controllers[0].1, &cluster.brokers[0].1);
    let frame_size = frame_size();
    let count = (frame_size - 40) / 14;
    let frame = create_topics_v7(count, 1, false);
    let (mut body, controller_growth, broker_growth) =
        answer_through(controller, broker, &frame).await?;
    let answer_size = body.len();
    let header = ResponseHeader::decode(&mut body, 1)?;
    assert_eq!(header.correlation_id, 42);
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(
        compact_length(&mut body),
        count as u64 + 1,
        "one answer per topic"
    );
    let order = (0..count)
        .filter(|index| !denied(*index))
        .chain((0..count).filter(|index| denied(*index)));
    for index in order {
        let topic = CreatableTopicResult::decode(&mut body, 7)?;
        let expected = match denied(index) {
            true => (29, "Authorization failed."),
            false => (44, "Unable to perform excessively large batch operation."),
        };
        assert_eq!(
            (
                topic.name.as_str().as_bytes(),
                topic.error_code,
                topic.error_message.as_deref()
            ),
            (&four_letter_name(index)[..], expected.0, Some(expected.1)),
            "topic {index}"
        );
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
    assert!(
        answer_size > 5 * frame_size,
        "an answer of {answer_size} bytes"
    );
    within_four_frames(
        &format!("CreateTopics {what} answered with {answer_size} bytes"),
        frame.len(),
        controller_growth,
        broker_growth,
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_answer_many_times_its_request_stays_within_four_frames() -> anyhow::Result<()>
{
    let cluster = Cluster::start_with(1, 1, &[SLOW_SESSION])?;
    wait_forwarding(&cluster.brokers[0].1.bootstrap()).await?;
    distinct_topics_within_four_frames(&cluster, "without an authorizer", |_| false).await
}

/// A DescribeQuorum naming distinct partitions, forwarded by the broker: the controller answers
/// each partition UNKNOWN_TOPIC_OR_PARTITION from the frame (five times the frame), and neither
/// node holds the request or the answer whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_describe_quorum_of_distinct_partitions_stays_within_four_frames(
) -> anyhow::Result<()> {
    let cluster = Cluster::start_with(1, 1, &[SLOW_SESSION])?;
    let (controller, broker) = (&cluster.controllers[0].1, &cluster.brokers[0].1);
    wait_forwarding(&broker.bootstrap()).await?;
    let frame_size = frame_size();
    let count = (frame_size - 60) / 5;
    let frame = gregor_integration::frames::describe_quorum_v2(count);
    let (mut body, controller_growth, broker_growth) =
        answer_through(controller, broker, &frame).await?;
    let header = ResponseHeader::decode(&mut body, 1)?;
    assert_eq!(header.correlation_id, 42);
    gregor_integration::frames::check_describe_quorum_v2_unknown(body, count)?;
    within_four_frames(
        "DescribeQuorum",
        frame.len(),
        controller_growth,
        broker_growth,
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_forwarded_answer_is_the_controllers() -> anyhow::Result<()> {
    let cluster = Cluster::start_with(1, 1, &[SLOW_SESSION])?;
    let (controller, broker) = (&cluster.controllers[0].1, &cluster.brokers[0].1);
    wait_forwarding(&broker.bootstrap()).await?;
    // Validated only: each topic's answer lists its configs, megabytes in all, more than the
    // broker reads whole.
    let frame = create_topics_v7(3_000, 1, true);
    let through_broker = answer(&broker.bootstrap(), &frame).await?;
    let from_controller = answer(&controller.bootstrap(), &frame).await?;
    assert!(
        through_broker.len() > 2 * 1024 * 1024,
        "an answer of {} bytes",
        through_broker.len()
    );
    let (through_broker, from_controller) = (
        topic_answers(through_broker)?,
        topic_answers(from_controller)?,
    );
    assert_eq!(through_broker.len(), 3_000);
    assert!(through_broker.iter().all(
        |topic| topic.error_code == 0 && topic.configs.as_ref().is_some_and(|c| !c.is_empty())
    ));
    assert!(through_broker == from_controller);
    Ok(())
}

/// One controller and one broker, both with the authorizer, on which User:ANONYMOUS (every
/// connection here) may send the broker's envelopes (CLUSTER_ACTION), may not create topics
/// through the cluster, and may create and alter each topic but those prefixed `ab`.
async fn authorized_cluster() -> anyhow::Result<Cluster> {
    let authorizer = [
        ("authorizer.class.name", "StandardAuthorizer"),
        ("allow.everyone.if.no.acl.found", "true"),
    ];
    let mut cluster = Cluster::start_with(1, 0, &[authorizer[0], authorizer[1], SLOW_SESSION])?;
    cluster.add_broker_with(11, &authorizer)?;
    let broker = cluster.brokers[0].1.bootstrap();
    // Created in one request: once the cluster has ACLs, none of them would allow the next.
    let acls = CreateAclsRequest::default().with_creations(vec![
        anonymous_acl(CLUSTER, "kafka-cluster", LITERAL, CLUSTER_ACTION, ALLOW),
        anonymous_acl(CLUSTER, "kafka-cluster", LITERAL, CREATE, DENY),
        anonymous_acl(TOPIC, "ab", PREFIXED, CREATE, DENY),
        anonymous_acl(TOPIC, "ab", PREFIXED, ALTER, DENY),
    ]);
    wait_until("the ACLs are created", FORM_TIMEOUT, || async {
        let mut conn = KafkaConn::connect(&broker).await?;
        let answer = conn.send(&acls, 3).await?;
        Ok(answer
            .results
            .iter()
            .all(|result| result.error_code == 0)
            .then_some(()))
    })
    .await?;
    // The broker knows them once its own answers change: DESCRIBE on the cluster and on
    // topics named `ab...` is denied once ACLs exist for those resources. A CreateTopics
    // through the broker cannot tell: the controller denies alike when the broker forwards it
    // whole, but answers the denied topics in their place instead of after the others.
    wait_until("the broker applies the ACLs", FORM_TIMEOUT, || async {
        let mut conn = KafkaConn::connect(&broker).await?;
        // Every ACL: resource type, pattern, operation and permission ANY.
        let every_acl = DescribeAclsRequest::default()
            .with_resource_type_filter(1)
            .with_pattern_type_filter(1)
            .with_operation(1)
            .with_permission_type(1);
        let acls = conn.send::<DescribeAclsRequest>(&every_acl, 3).await?;
        let topics = conn
            .send::<MetadataRequest>(&metadata(12, Some(&["abq"]), false), 12)
            .await?;
        Ok((acls.error_code == 31 && topics.topics[0].error_code == 29).then_some(()))
    })
    .await?;
    // And the controller once the broker denies a topic and forwards another.
    wait_until("the controller applies the ACLs", FORM_TIMEOUT, || async {
        let mut conn = KafkaConn::connect(&broker).await?;
        let request = create_topics(vec![creatable("abx", 1, 1), creatable("ready", 1, 1)], true);
        let answer = conn.send::<CreateTopicsRequest>(&request, 7).await?;
        let codes: Vec<i16> = answer.topics.iter().map(|t| t.error_code).collect();
        Ok((codes == [29, 0]).then_some(()))
    })
    .await?;
    Ok(cluster)
}

/// The topics' answers of a CreateTopics answer frame, topic ids zeroed (drawn anew for each
/// validation).
fn topic_answers(frame: Bytes) -> anyhow::Result<Vec<CreatableTopicResult>> {
    let (header, response) = decode_response::<CreateTopicsRequest>(frame, 7)?;
    assert_eq!(header.correlation_id, 42);
    Ok(response
        .topics
        .into_iter()
        .map(|topic| topic.with_topic_id(Default::default()))
        .collect())
}

/// A broker with an authorizer forwards a CreateTopics naming many topics without the denied
/// ones and adds their answers after the controller's, as Kafka's controller does; with few
/// topics allowed the controller's answer is read whole, with many it is streamed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_forwards_many_topics_without_the_denied_ones() -> anyhow::Result<()> {
    let cluster = authorized_cluster().await?;
    let (controller, broker) = (&cluster.controllers[0].1, &cluster.brokers[0].1);
    // A third denied (the controller's answer over 1 MiB, streamed), then all but one in a
    // hundred (a small answer, read whole).
    type Case = (usize, fn(usize) -> bool, bool);
    let cases: [Case; 2] = [
        (1_500, |index| index % 3 == 0, true),
        (1_100, |index| index % 100 != 0, false),
    ];
    for (topics, denied, streamed) in cases {
        // A name repeated is the controller's INVALID_REQUEST, whatever the ACLs say.
        let name = |index: usize| match denied(index) {
            true => format!("ab-{index}"),
            false => format!("ok-{index}"),
        };
        let mut listed: Vec<_> = (0..topics)
            .map(|index| creatable(&name(index), 1, 1))
            .collect();
        listed.push(creatable("ok-1", 1, 1));
        let request = create_topics(listed, true);
        let frame = gregor_integration::encode_request(&request, 7, 42, Some("m"))?;
        let through_broker = answer(&broker.bootstrap(), &frame).await?;
        // The controller, asked the allowed topics alone, answers them alike.
        let allowed: Vec<_> = request
            .topics
            .iter()
            .filter(|topic| !topic.name.starts_with("ab"))
            .cloned()
            .collect();
        let allowed_frame =
            gregor_integration::encode_request(&create_topics(allowed, true), 7, 42, Some("m"))?;
        let mut expected = topic_answers(answer(&controller.bootstrap(), &allowed_frame).await?)?;
        for index in (0..topics).filter(|index| denied(*index)) {
            expected.push(
                CreatableTopicResult::default()
                    .with_name(gregor_integration::admin::topic_name(&name(index)))
                    .with_error_code(29)
                    .with_error_message(Some(s("Authorization failed.")))
                    .with_num_partitions(-1)
                    .with_replication_factor(-1),
            );
        }
        assert_eq!(
            through_broker.len() > 1024 * 1024,
            streamed,
            "an answer of {} bytes",
            through_broker.len()
        );
        let through_broker = topic_answers(through_broker)?;
        assert_eq!(through_broker.len(), expected.len(), "{topics} topics");
        for (index, (got, want)) in through_broker.iter().zip(&expected).enumerate() {
            assert_eq!(got, want, "answer {index} of {topics} topics");
        }
    }
    Ok(())
}

/// A broker with an authorizer forwards a CreatePartitions naming many topics without those
/// it denies ALTER and adds their answers after the controller's, as for CreateTopics: the
/// controller's answer to the allowed topics alone, then each denied one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_forwards_a_create_partitions_without_the_denied_topics() -> anyhow::Result<()> {
    use gregor_integration::admin::{grow_partitions, growth, topic_name};
    use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
    use kafka_protocol::messages::CreatePartitionsRequest;
    let cluster = authorized_cluster().await?;
    let (controller, broker) = (&cluster.controllers[0].1, &cluster.brokers[0].1);
    let mut conn = KafkaConn::connect(&broker.bootstrap()).await?;
    let existing: Vec<_> = (0..10)
        .map(|index| creatable(&format!("ok-{index}"), 1, 1))
        .collect();
    let created = conn
        .send::<CreateTopicsRequest>(&create_topics(existing, false), 7)
        .await?;
    assert!(
        created.topics.iter().all(|t| t.error_code == 0),
        "{created:?}"
    );
    // A third denied; ok-0 to ok-9 grown (ok-1 named twice: INVALID_REQUEST), the others
    // unknown.
    let name = |index: usize| match index % 3 {
        0 => format!("ab-{index}"),
        _ => format!("ok-{index}"),
    };
    let mut topics: Vec<_> = (0..1_500)
        .map(|index| growth(&name(index), 2, None))
        .collect();
    topics.push(growth("ok-1", 3, None));
    let results = |frame: Bytes| -> anyhow::Result<Vec<CreatePartitionsTopicResult>> {
        let (header, response) = decode_response::<CreatePartitionsRequest>(frame, 3)?;
        assert_eq!(header.correlation_id, 42);
        Ok(response.results)
    };
    let frame = gregor_integration::encode_request(
        &grow_partitions(topics.clone(), true),
        3,
        42,
        Some("m"),
    )?;
    let through_broker = results(answer(&broker.bootstrap(), &frame).await?)?;
    let allowed: Vec<_> = topics
        .iter()
        .filter(|topic| !topic.name.starts_with("ab"))
        .cloned()
        .collect();
    let allowed_frame =
        gregor_integration::encode_request(&grow_partitions(allowed, true), 3, 42, Some("m"))?;
    let mut expected = results(answer(&controller.bootstrap(), &allowed_frame).await?)?;
    for index in (0..1_500).filter(|index| index % 3 == 0) {
        expected.push(
            CreatePartitionsTopicResult::default()
                .with_name(topic_name(&name(index)))
                .with_error_code(29)
                .with_error_message(Some(s("Authorization failed."))),
        );
    }
    assert_eq!(through_broker.len(), 1_000 + 500);
    for (index, (got, want)) in through_broker.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "answer {index}");
    }
    let grown = through_broker.iter().filter(|r| r.error_code == 0).count();
    assert_eq!(grown, 5, "ok-2, ok-4, ok-5, ok-7 and ok-8 grown");
    Ok(())
}

/// 10 MB of distinct names through a broker with an authorizer, 3,844 of them denied: the
/// rest is refused whole by the controller past its record limit, the denied ones follow, and
/// neither node holds the request decoded or the answer whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_with_an_authorizer_forwards_distinct_topics_within_four_frames(
) -> anyhow::Result<()> {
    let cluster = authorized_cluster().await?;
    distinct_topics_within_four_frames(&cluster, "with an authorizer", |index| {
        four_letter_name(index).starts_with(b"ab")
    })
    .await
}

/// A request with repeats is reduced before it is forwarded and its answer expanded after: an
/// answer over the size the broker streams is read whole for that, so the client still gets
/// an answer per element (here every ACL binding is invalid and answered with its error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_forwarded_answer_to_a_reduced_request_is_expanded() -> anyhow::Result<()> {
    let cluster = Cluster::start_with(1, 1, &[SLOW_SESSION])?;
    let (controller, broker) = (&cluster.controllers[0].1, &cluster.brokers[0].1);
    wait_forwarding(&broker.bootstrap()).await?;
    // Resource type 1 (ANY) cannot be created: each binding is answered INVALID_REQUEST with a
    // message, over a megabyte in all. One binding comes three times.
    let mut creations: Vec<_> = (0..40_000)
        .map(|index| anonymous_acl(1, &format!("acl-{index}"), LITERAL, CREATE, ALLOW))
        .collect();
    creations.extend([creations[7].clone(), creations[7].clone()]);
    let request = CreateAclsRequest::default().with_creations(creations);
    let frame = gregor_integration::encode_request(&request, 3, 42, Some("m"))?;
    let decoded = |frame: Bytes| -> anyhow::Result<_> {
        let (header, response) = decode_response::<CreateAclsRequest>(frame, 3)?;
        assert_eq!(header.correlation_id, 42);
        Ok(response.results)
    };
    let through_broker = answer(&broker.bootstrap(), &frame).await?;
    assert!(
        through_broker.len() > 1024 * 1024,
        "an answer of {} bytes",
        through_broker.len()
    );
    let through_broker = decoded(through_broker)?;
    let from_controller = decoded(answer(&controller.bootstrap(), &frame).await?)?;
    assert_eq!(through_broker.len(), 40_002);
    assert!(through_broker.iter().all(|result| result.error_code != 0));
    assert!(through_broker == from_controller);
    Ok(())
}

/// A DeleteTopics naming `frame_size()` of distinct names, forwarded by a broker as it came:
/// the controller decides it from the frame (`delete_topics_chunks.rs`), deletes the two
/// topics it names that exist, answers every other name UNKNOWN_TOPIC_OR_PARTITION, and
/// neither node's peak resident memory grows by four frames.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_delete_topics_of_distinct_names_stays_within_four_frames() -> anyhow::Result<()>
{
    use bytes::BufMut;
    use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
    let cluster = Cluster::start_with(1, 1, &[SLOW_SESSION])?;
    let (controller, broker) = (&cluster.controllers[0].1, &cluster.brokers[0].1);
    wait_forwarding(&broker.bootstrap()).await?;
    let mut conn = KafkaConn::connect(&broker.bootstrap()).await?;
    let created = conn
        .send::<CreateTopicsRequest>(
            &create_topics(vec![creatable("dd1", 1, 1), creatable("dd2", 1, 1)], false),
            7,
        )
        .await?;
    assert!(created.topics.iter().all(|t| t.error_code == 0));
    let name = |index: usize| match index {
        100 => b"dd1".to_vec(),
        200 => b"dd2".to_vec(),
        _ => four_letter_name(index).to_vec(),
    };
    let frame_size = frame_size();
    let count = (frame_size - 40) / 5;
    let frame = gregor_integration::frames::flexible_list(
        20,
        4,
        b"",
        count,
        5,
        |index, frame| {
            let name = name(index);
            frame.put_u8(name.len() as u8 + 1);
            frame.put_slice(&name);
        },
        b"\x00\x00\x75\x30\x00",
    );
    let (mut body, controller_growth, broker_growth) =
        answer_through(controller, broker, &frame).await?;
    let header = ResponseHeader::decode(&mut body, 1)?;
    assert_eq!(header.correlation_id, 42);
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(compact_length(&mut body), count as u64 + 1, "one per name");
    for index in 0..count {
        let result = DeletableTopicResult::decode(&mut body, 4)?;
        let expected = if matches!(index, 100 | 200) { 0 } else { 3 };
        assert_eq!(
            (
                result.name.map(|n| n.as_bytes().to_vec()),
                result.error_code
            ),
            (Some(name(index)), expected),
            "name {index}"
        );
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
    within_four_frames(
        "DeleteTopics through a broker",
        frame.len(),
        controller_growth,
        broker_growth,
    );
    let created = conn
        .send::<CreateTopicsRequest>(&create_topics(vec![creatable("dd1", 1, 1)], false), 7)
        .await?;
    assert_eq!(created.topics[0].error_code, 0, "dd1 was deleted");
    Ok(())
}

/// An AlterUserScramCredentials deleting `frame_size()` of distinct users' credentials,
/// forwarded by a broker as it came: the controller decides it from the frame
/// (`scram_chunks.rs`) and answers every user RESOURCE_NOT_FOUND (nine times the frame), and
/// neither node's peak resident memory grows by four frames.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_alter_user_scram_credentials_of_distinct_users_stays_within_four_frames(
) -> anyhow::Result<()> {
    use bytes::BufMut;
    use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
    let cluster = Cluster::start_with(1, 1, &[SLOW_SESSION])?;
    let (controller, broker) = (&cluster.controllers[0].1, &cluster.brokers[0].1);
    wait_forwarding(&broker.bootstrap()).await?;
    let frame_size = frame_size();
    let count = (frame_size - 40) / 7;
    // Deletions {name, SCRAM-SHA-256, tags}, then no upsertions and tags.
    let frame = gregor_integration::frames::flexible_list(
        51,
        0,
        b"",
        count,
        7,
        |index, frame| {
            frame.put_u8(5);
            frame.put_slice(&four_letter_name(index));
            frame.put_slice(b"\x01\x00");
        },
        b"\x01\x00",
    );
    let (mut body, controller_growth, broker_growth) =
        answer_through(controller, broker, &frame).await?;
    let header = ResponseHeader::decode(&mut body, 1)?;
    assert_eq!(header.correlation_id, 42);
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(compact_length(&mut body), count as u64 + 1, "one per user");
    for index in 0..count {
        let result = AlterUserScramCredentialsResult::decode(&mut body, 0)?;
        assert_eq!(
            (result.user.as_bytes(), result.error_code),
            (&four_letter_name(index)[..], 91),
            "user {index}"
        );
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
    within_four_frames(
        "AlterUserScramCredentials through a broker",
        frame.len(),
        controller_growth,
        broker_growth,
    );
    Ok(())
}

/// An AlterClientQuotas setting a produce rate for `frame_size()` of distinct client ids,
/// forwarded by a broker as it came: the controller decides it from the frame
/// (`quota_chunks.rs`) and, past 10,000 records, refuses every entity with POLICY_VIOLATION,
/// and neither node's peak resident memory grows by four frames.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_alter_client_quotas_of_distinct_entities_stays_within_four_frames(
) -> anyhow::Result<()> {
    use bytes::BufMut;
    use kafka_protocol::messages::alter_client_quotas_response::EntryData;
    let cluster = Cluster::start_with(1, 1, &[SLOW_SESSION])?;
    let (controller, broker) = (&cluster.controllers[0].1, &cluster.brokers[0].1);
    wait_forwarding(&broker.bootstrap()).await?;
    let frame_size = frame_size();
    let count = (frame_size - 40) / 48;
    // Entries {entity [{"client-id", name, tags}], ops [{"producer_byte_rate", 1024.0,
    // false, tags}], tags}, then validate_only false and tags.
    let frame = gregor_integration::frames::flexible_list(
        49,
        1,
        b"",
        count,
        48,
        |index, frame| {
            frame.put_slice(b"\x02\x0aclient-id\x05");
            frame.put_slice(&four_letter_name(index));
            frame.put_slice(b"\x00\x02\x13producer_byte_rate");
            frame.put_f64(1024.0);
            frame.put_slice(b"\x00\x00\x00");
        },
        b"\x00\x00",
    );
    let (mut body, controller_growth, broker_growth) =
        answer_through(controller, broker, &frame).await?;
    let header = ResponseHeader::decode(&mut body, 1)?;
    assert_eq!(header.correlation_id, 42);
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(
        compact_length(&mut body),
        count as u64 + 1,
        "one per entity"
    );
    for index in 0..count {
        let entry = EntryData::decode(&mut body, 1)?;
        assert_eq!(
            (
                entry.entity[0].entity_name.as_deref().map(str::as_bytes),
                entry.error_code
            ),
            (Some(&four_letter_name(index)[..]), 44),
            "entity {index}"
        );
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
    within_four_frames(
        "AlterClientQuotas through a broker",
        frame.len(),
        controller_growth,
        broker_growth,
    );
    Ok(())
}

/// A broker with an authorizer checks a DeleteTopics naming many topics from its frame,
/// forwards it without the names it denies DELETE, and adds their TOPIC_AUTHORIZATION_FAILED
/// answers after the controller's; at `frame_size()` of distinct names neither node's peak
/// resident memory grows by four frames.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_forwards_a_delete_topics_without_the_denied_names() -> anyhow::Result<()> {
    use bytes::BufMut;
    use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
    let cluster = authorized_cluster().await?;
    let (controller, broker) = (&cluster.controllers[0].1, &cluster.brokers[0].1);
    let mut conn = KafkaConn::connect(&broker.bootstrap()).await?;
    for version in [5, 6] {
        let created = conn
            .send::<CreateTopicsRequest>(
                &create_topics(
                    vec![creatable("ok-del", 1, 1), creatable("ok-id", 1, 1)],
                    false,
                ),
                7,
            )
            .await?;
        assert!(created.topics.iter().all(|t| t.error_code == 0));
        let id_of = |name: &str| {
            created
                .topics
                .iter()
                .find(|t| t.name.as_str() == name)
                .map_or(uuid::Uuid::nil(), |t| t.topic_id)
        };
        // Topics prefixed "ab" have an ACL, none allowing DELETE: denied. At v6 "ok-id" is
        // named by its id, and a deleted name is answered with its topic's id.
        let entries: Vec<(Option<String>, uuid::Uuid)> = (0..1_500)
            .map(|index| match index {
                700 => (Some("ok-del".to_owned()), uuid::Uuid::nil()),
                800 if version == 6 => (None, id_of("ok-id")),
                _ if index % 3 == 0 => (Some(format!("ab-{index}")), uuid::Uuid::nil()),
                _ => (Some(format!("ok-{index}")), uuid::Uuid::nil()),
            })
            .collect();
        let request = if version == 6 {
            gregor_integration::admin::delete_topic_states(&entries)
        } else {
            let names: Vec<&str> = entries.iter().filter_map(|(n, _)| n.as_deref()).collect();
            gregor_integration::admin::delete_topics_by_name(5, &names)
        };
        let frame = gregor_integration::encode_request(&request, version, 42, Some("m"))?;
        let (header, response) = decode_response::<kafka_protocol::messages::DeleteTopicsRequest>(
            answer(&broker.bootstrap(), &frame).await?,
            version,
        )?;
        assert_eq!(header.correlation_id, 42);
        let result = |name: &str, id: uuid::Uuid, code: i16, message: Option<&str>| {
            DeletableTopicResult::default()
                .with_name(Some(gregor_integration::admin::topic_name(name)))
                .with_topic_id(if version == 6 { id } else { uuid::Uuid::nil() })
                .with_error_code(code)
                .with_error_message(message.map(s))
        };
        let unknown = Some("This server does not host this topic-partition.");
        let denied = |name: &Option<String>| name.as_ref().is_some_and(|n| n.starts_with("ab"));
        let expected: Vec<DeletableTopicResult> = entries
            .iter()
            .filter(|(name, _)| !denied(name))
            .map(|(name, _)| match name.as_deref() {
                Some("ok-del") => result("ok-del", id_of("ok-del"), 0, None),
                None => result("ok-id", id_of("ok-id"), 0, None),
                Some(name) => result(name, uuid::Uuid::nil(), 3, unknown),
            })
            .chain(
                entries
                    .iter()
                    .filter(|(name, _)| denied(name))
                    .map(|(name, _)| {
                        let name = name.as_deref().unwrap_or_default();
                        result(name, uuid::Uuid::nil(), 29, Some("Authorization failed."))
                    }),
            )
            .collect();
        assert_eq!(response.responses.len(), expected.len(), "v{version}");
        for (index, (got, want)) in response.responses.iter().zip(&expected).enumerate() {
            assert_eq!(got, want, "v{version} answer {index}");
        }
        if version == 5 {
            let again = conn
                .send::<kafka_protocol::messages::DeleteTopicsRequest>(
                    &gregor_integration::admin::delete_topics_by_name(5, &["ok-id"]),
                    5,
                )
                .await?;
            assert_eq!(again.responses[0].error_code, 0);
        }
    }

    // Distinct four-letter names, those prefixed "ab" denied: within four frames on each node.
    let frame_size = frame_size();
    let count = (frame_size - 40) / 5;
    let frame = gregor_integration::frames::flexible_list(
        20,
        4,
        b"",
        count,
        5,
        |index, frame| {
            frame.put_u8(5);
            frame.put_slice(&four_letter_name(index));
        },
        b"\x00\x00\x75\x30\x00",
    );
    let (mut body, controller_growth, broker_growth) =
        answer_through(controller, broker, &frame).await?;
    ResponseHeader::decode(&mut body, 1)?;
    assert_eq!(body.get_i32(), 0, "throttle time");
    assert_eq!(compact_length(&mut body), count as u64 + 1, "one per name");
    let denied = |index: usize| four_letter_name(index).starts_with(b"ab");
    let order = (0..count)
        .filter(|index| !denied(*index))
        .chain((0..count).filter(|index| denied(*index)));
    for index in order {
        let result = DeletableTopicResult::decode(&mut body, 4)?;
        let code = if denied(index) { 29 } else { 3 };
        assert_eq!(
            (
                result.name.map(|n| n.as_bytes().to_vec()),
                result.error_code
            ),
            (Some(four_letter_name(index).to_vec()), code),
            "name {index}"
        );
    }
    assert_eq!(&body[..], b"\x00", "the body's tagged fields");
    within_four_frames(
        "DeleteTopics through a broker with an authorizer",
        frame.len(),
        controller_growth,
        broker_growth,
    );
    Ok(())
}

/// The active controller is killed (kill -9) while the broker copies its answer, over 1 MiB, to
/// the client: the client gets the start of the answer and then a closed connection, never a
/// frame that ends short or another answer in its place; the broker keeps serving and forwards
/// the next request to the new active controller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_killed_while_its_answer_is_copied_closes_only_that_connection(
) -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut cluster = Cluster::start(3, 1)?;
    let broker = cluster.brokers[0].1.bootstrap();
    wait_forwarding(&broker).await?;
    let controller_addrs: Vec<String> = cluster
        .controllers
        .iter()
        .map(|(_, node)| node.bootstrap())
        .collect();
    let leader = crate::leader_id(&crate::wait_leader(&controller_addrs).await?);
    // Past the controller's 10,000 records every name is refused with its message: an answer
    // about six times the frame, streamed through the broker.
    let count = (10_000_000 - 40) / 14;
    let frame = create_topics_v7(count, 1, false);
    let mut client = tokio::net::TcpStream::connect(&broker).await?;
    client.write_all(&frame).await?;
    let mut size = [0u8; 4];
    let read_for = Duration::from_secs(120);
    tokio::time::timeout(read_for, client.read_exact(&mut size)).await??;
    let size = u32::from_be_bytes(size) as usize;
    assert!(size > 5 * 10_000_000, "an answer of {size} bytes");
    let mut start = vec![0u8; 64 * 1024];
    tokio::time::timeout(read_for, client.read_exact(&mut start)).await??;
    // The client reads no more until the controller is gone, so most of the answer is still
    // on the controller's side.
    let index = cluster
        .controllers
        .iter()
        .position(|(id, _)| *id == leader)
        .expect("the leader is a controller");
    cluster.controllers[index].1.kill9()?;
    let mut received = start.len();
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        match tokio::time::timeout(read_for, client.read(&mut buffer)).await? {
            Ok(0) | Err(_) => break,
            Ok(read) => received += read,
        }
    }
    assert!(
        received < size,
        "the whole {size}-byte answer arrived though its controller was killed"
    );
    // The broker serves on, and forwards to the new active controller.
    let survivors: Vec<String> = controller_addrs
        .iter()
        .enumerate()
        .filter(|(at, _)| *at != index)
        .map(|(_, addr)| addr.clone())
        .collect();
    wait_until("a new leader", FORM_TIMEOUT, || async {
        let view = crate::leader_view(&survivors).await?;
        Ok(view.filter(|view| crate::leader_id(view) != leader))
    })
    .await?;
    wait_until("a topic created after the kill", FORM_TIMEOUT, || async {
        let mut conn = KafkaConn::connect(&broker).await?;
        let request = create_topics(vec![creatable("after-the-kill", 1, 1)], false);
        let response = conn.send::<CreateTopicsRequest>(&request, 7).await?;
        Ok(matches!(response.topics[0].error_code, 0 | 36).then_some(()))
    })
    .await?;
    assert!(
        !cluster.brokers[0].1.stderr().contains("panicked"),
        "the broker panicked"
    );
    Ok(())
}
