//! DescribeTopicPartitions (key 75, KIP-966): the partitions of named topics, or of every
//! topic the caller may describe, a page at a time, from one image snapshot (Kafka's
//! `DescribeTopicPartitionsRequestHandler` and `getTopicMetadataForDescribeTopicResponse`).
//!
//! Topics are answered in name order from the request's cursor; a page holds at most
//! `response_partition_limit` partitions (and never more than [`MAX_PARTITIONS_PER_PAGE`]), and
//! `next_cursor` names where the next page starts. Gregor keeps no eligible leader replicas, so
//! both ELR lists are empty.

use std::collections::BTreeSet;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, ResponseKind,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use gregor_publishers::acl::{AclOperation, ResourceType};
use gregor_publishers::MetadataImage;

use super::metadata::{is_internal, BrokerTable, ALL_TOPIC_OPERATIONS};
use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::logic::topic_name;

/// Kafka's `max.request.partition.size.limit` default: the most partitions one answer holds.
const MAX_PARTITIONS_PER_PAGE: i32 = 2000;

pub(super) fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: &DescribeTopicPartitionsRequest,
) -> ApiResponse {
    let image = ctx.image.load_full();
    let access = Access::new(ctx, info);
    let response = describe(
        &image,
        &info.listener_name,
        request,
        |name| access.allows(AclOperation::Describe, ResourceType::Topic, name),
        |name| {
            if access.is_enforced() {
                access.authorized_operations(ResourceType::Topic, name)
            } else {
                ALL_TOPIC_OPERATIONS
            }
        },
    );
    let mut errors = ErrorCounts::default();
    for topic in &response.topics {
        errors.add(topic.error_code);
    }
    ApiResponse::new(ResponseKind::DescribeTopicPartitions(response), errors)
}

/// The answer to `request` for a caller who may describe the topics `may_describe` lets
/// through, with `operations` as each described topic's authorized operations.
fn describe(
    image: &MetadataImage,
    listener_name: &str,
    request: &DescribeTopicPartitionsRequest,
    may_describe: impl Fn(&str) -> bool,
    operations: impl Fn(&str) -> i32,
) -> DescribeTopicPartitionsResponse {
    let all_topics = request.topics.is_empty();
    let cursor_topic = request
        .cursor
        .as_ref()
        .map_or("", |cursor| cursor.topic_name.as_str());
    // A set, as Kafka's: repeated names are answered once, in name order.
    let topics: BTreeSet<&str> = if all_topics {
        image
            .topics
            .names()
            .filter(|n| *n >= cursor_topic)
            .collect()
    } else {
        request
            .topics
            .iter()
            .map(|topic| topic.name.as_str())
            .filter(|n| *n >= cursor_topic)
            .collect()
    };
    if let Some(cursor) = &request.cursor {
        if !all_topics && !topics.contains(cursor.topic_name.as_str()) {
            return invalid_request(request);
        }
    }
    // Unauthorized topics are not looked up, so their existence is not disclosed; in the
    // all-topics form they are left out.
    let (authorized, denied): (Vec<&str>, Vec<&str>) =
        topics.into_iter().partition(|name| may_describe(name));
    let limit = request
        .response_partition_limit
        .min(MAX_PARTITIONS_PER_PAGE);
    let brokers = BrokerTable::new(image, listener_name);
    let mut response = DescribeTopicPartitionsResponse::default();
    let mut remaining = i64::from(limit);
    for name in authorized {
        if remaining <= 0 {
            // The next page starts at this topic (which may not exist).
            if remaining == 0 {
                response.next_cursor = Some(cursor(name, 0));
            }
            break;
        }
        let Some(topic) = image.topics.get_by_name(name) else {
            if !all_topics {
                let error = if topic_name::validate(name).is_err() {
                    ResponseError::InvalidTopicException
                } else {
                    ResponseError::UnknownTopicOrPartition
                };
                response
                    .topics
                    .push(error_topic(name, error.code(), is_internal(name)));
            }
            continue;
        };
        let start = if name == cursor_topic {
            request
                .cursor
                .as_ref()
                .map_or(0, |c| i64::from(c.partition_index))
        } else {
            0
        };
        let count = topic.partition_count() as i64;
        let upper = count.min(start.saturating_add(remaining));
        let mut partitions = Vec::new();
        for index in start.max(0)..upper {
            let Some(partition) = i32::try_from(index).ok().and_then(|i| topic.partition(i)) else {
                continue;
            };
            let leader = if brokers.is_reachable(partition.leader) {
                partition.leader
            } else {
                -1
            };
            partitions.push(
                DescribeTopicPartitionsResponsePartition::default()
                    .with_partition_index(index as i32)
                    .with_leader_id(BrokerId(leader))
                    .with_leader_epoch(partition.leader_epoch)
                    .with_replica_nodes(partition.replicas.iter().map(|id| BrokerId(*id)).collect())
                    .with_isr_nodes(partition.isr.iter().map(|id| BrokerId(*id)).collect())
                    .with_eligible_leader_replicas(Some(Vec::new()))
                    .with_last_known_elr(Some(Vec::new()))
                    .with_offline_replicas(
                        partition
                            .replicas
                            .iter()
                            .filter(|id| brokers.is_offline(**id))
                            .map(|id| BrokerId(*id))
                            .collect(),
                    ),
            );
        }
        let described = partitions.len() as i64;
        response.topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(name.to_owned()))))
                .with_topic_id(topic.id)
                .with_is_internal(is_internal(name))
                .with_partitions(partitions)
                .with_topic_authorized_operations(operations(name)),
        );
        if upper < count {
            response.next_cursor = Some(cursor(name, upper as i32));
            break;
        }
        remaining -= described;
    }
    // Refused topics come last, with no id (Kafka's handler appends them after the page).
    response.topics.extend(
        denied
            .into_iter()
            .filter(|_| !all_topics)
            .map(|name| error_topic(name, ResponseError::TopicAuthorizationFailed.code(), false)),
    );
    response
}

fn cursor(topic: &str, partition_index: i32) -> Cursor {
    Cursor::default()
        .with_topic_name(TopicName(StrBytes::from_string(topic.to_owned())))
        .with_partition_index(partition_index)
}

fn error_topic(name: &str, code: i16, internal: bool) -> DescribeTopicPartitionsResponseTopic {
    DescribeTopicPartitionsResponseTopic::default()
        .with_error_code(code)
        .with_name(Some(TopicName(StrBytes::from_string(name.to_owned()))))
        .with_topic_id(Uuid::nil())
        .with_is_internal(internal)
}

/// Kafka's error response to a cursor naming a topic the request does not list: every
/// requested topic with INVALID_REQUEST.
fn invalid_request(request: &DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse {
    DescribeTopicPartitionsResponse::default().with_topics(
        request
            .topics
            .iter()
            .map(|topic| error_topic(&topic.name, ResponseError::InvalidRequest.code(), false))
            .collect(),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use gregor_publishers::records::{MetadataRecord, PartitionRecord, TopicRecord};
    use kafka_protocol::messages::describe_topic_partitions_request::{
        Cursor as RequestCursor, TopicRequest,
    };

    use super::*;
    use crate::controller::logic::configs::testing::image_with;

    fn topic(name: &str, id: u128, partitions: i32) -> Vec<MetadataRecord> {
        let mut records = vec![MetadataRecord::Topic(TopicRecord {
            name: name.into(),
            topic_id: Uuid::from_u128(id),
        })];
        records.extend((0..partitions).map(|p| {
            MetadataRecord::Partition(PartitionRecord {
                partition_id: p,
                topic_id: Uuid::from_u128(id),
                replicas: vec![1, 9],
                isr: vec![1],
                removing_replicas: vec![],
                adding_replicas: vec![],
                // Partition 1 is led by an unknown broker: no leader for the client.
                leader: if p == 1 { 9 } else { 1 },
                leader_recovery_state: 0,
                leader_epoch: 4,
                partition_epoch: 0,
                directories: vec![],
            })
        }));
        records
    }

    fn image() -> MetadataImage {
        let mut records = topic("a", 100, 3);
        records.extend(topic("b", 101, 2));
        records.extend(topic("c", 102, 4));
        image_with(&records)
    }

    fn request(
        topics: &[&str],
        limit: i32,
        cursor: Option<(&str, i32)>,
    ) -> DescribeTopicPartitionsRequest {
        DescribeTopicPartitionsRequest::default()
            .with_topics(
                topics
                    .iter()
                    .map(|t| {
                        TopicRequest::default()
                            .with_name(TopicName(StrBytes::from_string((*t).to_owned())))
                    })
                    .collect(),
            )
            .with_response_partition_limit(limit)
            .with_cursor(cursor.map(|(t, p)| {
                RequestCursor::default()
                    .with_topic_name(TopicName(StrBytes::from_string(t.to_owned())))
                    .with_partition_index(p)
            }))
    }

    /// An answered topic: name, error code, partition indexes.
    type Answered = (String, i16, Vec<i32>);

    /// The answered topics and the next cursor.
    fn run(
        request: &DescribeTopicPartitionsRequest,
        denied: &[&str],
    ) -> (Vec<Answered>, Option<(String, i32)>) {
        let response = describe(
            &image(),
            "PLAINTEXT",
            request,
            |n| !denied.contains(&n),
            |_| 8,
        );
        let topics = response
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.as_ref().unwrap().to_string(),
                    t.error_code,
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                )
            })
            .collect();
        let cursor = response
            .next_cursor
            .map(|c| (c.topic_name.to_string(), c.partition_index));
        (topics, cursor)
    }

    fn found(name: &str, partitions: &[i32]) -> Answered {
        (name.to_owned(), 0, partitions.to_vec())
    }

    #[test]
    fn pages_follow_the_cursor_in_name_order() {
        // Every topic the caller may describe (the base image's `orders` ones included).
        let (topics, cursor) = run(&request(&[], 4, None), &["orders", "orders3"]);
        assert_eq!(topics, vec![found("a", &[0, 1, 2]), found("b", &[0])]);
        assert_eq!(cursor, Some(("b".into(), 1)));
        let (topics, cursor) = run(&request(&[], 4, Some(("b", 1))), &["orders", "orders3"]);
        assert_eq!(topics, vec![found("b", &[1]), found("c", &[0, 1, 2])]);
        assert_eq!(cursor, Some(("c".into(), 3)));
        let (topics, cursor) = run(&request(&[], 4, Some(("c", 3))), &["orders", "orders3"]);
        assert_eq!(topics, vec![found("c", &[3])]);
        assert_eq!(cursor, None);
        // A page ending exactly at a topic's end points at the next topic's start.
        let (topics, cursor) = run(&request(&["c", "a"], 3, None), &[]);
        assert_eq!(topics, vec![found("a", &[0, 1, 2])]);
        assert_eq!(cursor, Some(("c".into(), 0)));
    }

    #[test]
    fn named_topics_unknown_invalid_and_refused() {
        let (topics, cursor) = run(
            &request(&["zz", "b", "secret", "b", "bad/name"], 2000, None),
            &["secret"],
        );
        assert_eq!(
            topics,
            vec![
                ("b".into(), 0, vec![0, 1]),
                ("bad/name".into(), 17, vec![]),
                ("zz".into(), 3, vec![]),
                ("secret".into(), 29, vec![]),
            ]
        );
        assert_eq!(cursor, None);
        // A cursor on a topic the request does not list: every listed topic INVALID_REQUEST.
        let (topics, _) = run(&request(&["a", "b"], 10, Some(("c", 0))), &[]);
        assert_eq!(
            topics,
            vec![("a".into(), 42, vec![]), ("b".into(), 42, vec![])]
        );
    }

    #[test]
    fn partitions_carry_kafkas_fields() {
        let response = describe(
            &image(),
            "PLAINTEXT",
            &request(&["a"], 10, None),
            |_| true,
            |_| 8,
        );
        let topic = &response.topics[0];
        assert_eq!(
            (
                topic.topic_id,
                topic.is_internal,
                topic.topic_authorized_operations
            ),
            (Uuid::from_u128(100), false, 8)
        );
        let led = &topic.partitions[0];
        assert_eq!((led.leader_id, led.leader_epoch), (BrokerId(1), 4));
        assert_eq!(led.replica_nodes, vec![BrokerId(1), BrokerId(9)]);
        assert_eq!(led.isr_nodes, vec![BrokerId(1)]);
        assert_eq!(led.offline_replicas, vec![BrokerId(9)]);
        assert_eq!(led.eligible_leader_replicas, Some(vec![]));
        // Led by a broker that is not alive: no leader.
        assert_eq!(topic.partitions[1].leader_id, BrokerId(-1));
    }
}
