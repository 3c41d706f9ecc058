//! AlterPartitionReassignments requests naming many partitions, decided without decoding
//! their list and answered as the answer is written.
//!
//! A cancelled partition is six bytes on the wire, but a decoded request, its result (with a
//! message naming the topic and partition for an unknown one) and the encoded answer cost 75 to
//! 95 times that. As ElectLeaders' (`election_chunks.rs`), the topics stay in the frame
//! (`topic_partitions.rs`): the controller reads the named partitions one at a time
//! (`RequestedReassignments`) and keeps a one-byte outcome per partition, whose message is
//! made from the frame's topic, partition and replicas when the answer is written. Kafka
//! answers every named partition in request order, so nothing here looks for repeats.

use std::sync::Arc;

use anyhow::Context;
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::alter_partition_reassignments_response::ReassignablePartitionResponse;
use kafka_protocol::protocol::{Encodable, StrBytes};

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::controller::logic::reassignment::{
    ListedReassignments, RequestedReassignments, Wanted,
};
use gregor_actors::handlers::{self, ApiResponse};

use super::dedup_decode::{array_length, need};
use super::repeated::{skip, skip_tagged_fields};
use super::topic_partitions::{PartitionResultsWriter, TopicList, TopicPartitionsApi};

/// AlterPartitionReassignments as a list of topics naming partitions, each with the replicas
/// it wants (four bytes each; `None`: cancel). Every version is flexible.
pub struct ReassignmentsApi;

impl TopicPartitionsApi for ReassignmentsApi {
    const API: &'static str = "AlterPartitionReassignments";
    type Partition = (i32, Option<Bytes>);
    type Answers = ListedReassignments;

    fn flexible(_: i16) -> bool {
        true
    }

    fn partition(partitions: &mut Bytes, _: i16) -> anyhow::Result<(i32, Option<Bytes>)> {
        need(partitions, 4)?;
        let index = partitions.get_i32();
        let replicas = match usize::try_from(array_length(partitions, true)?) {
            Ok(count) => {
                let size = count.checked_mul(4).context("too many replicas")?;
                need(partitions, size)?;
                Some(partitions.split_to(size))
            }
            Err(_) => None,
        };
        skip_tagged_fields(partitions, true)?;
        Ok((index, replicas))
    }

    fn answered(answers: &ListedReassignments) -> Option<usize> {
        answers.refused.is_none().then_some(answers.outcomes.len())
    }

    fn write_partition(
        answers: &ListedReassignments,
        index: usize,
        topic: &str,
        (partition, replicas): &(i32, Option<Bytes>),
        piece: &mut BytesMut,
        version: i16,
    ) -> anyhow::Result<()> {
        let wanted = replicas.as_ref().map_or(0, |ids| ids.len() / 4);
        let (code, message) = match &answers.refused {
            Some((code, message)) => (*code, Some(message.clone())),
            None => answers
                .outcomes
                .get(index)
                .context("more partitions than outcomes")?
                .answer(topic, *partition, wanted),
        };
        ReassignablePartitionResponse::default()
            .with_partition_index(*partition)
            .with_error_code(code)
            .with_error_message(message.map(StrBytes::from_string))
            .encode(piece, version)?;
        Ok(())
    }
}

/// An AlterPartitionReassignments request whose topics stay in the frame.
#[derive(Clone)]
pub struct ChunkedReassignments {
    topics: TopicList,
    allow_replication_factor_change: bool,
}

/// Reads `body` (an AlterPartitionReassignments request body) when it names more than
/// [`CHUNK`] topics or partitions; `None` for other requests, decoded whole. A long request
/// is read to its end first, so a malformed one is refused whole.
///
/// [`CHUNK`]: super::topic_partitions::CHUNK
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<ChunkedReassignments>> {
    if !(0..=1).contains(&version) {
        return None;
    }
    let mut rest = body.clone();
    skip(&mut rest, 4).ok()?;
    let allow_replication_factor_change = match version {
        0 => true,
        _ => rest.try_get_u8().ok()? != 0,
    };
    let topics = TopicList::scan::<ReassignmentsApi>(body, &mut rest, version)?;
    Some(topics.and_then(|topics| {
        skip_tagged_fields(&mut rest, true)?;
        Ok(ChunkedReassignments {
            topics,
            allow_replication_factor_change,
        })
    }))
}

impl RequestedReassignments for ChunkedReassignments {
    fn count(&self) -> usize {
        self.topics.partitions
    }

    fn each(&self, visit: &mut dyn FnMut(Wanted<'_>) -> bool) -> Result<(), String> {
        let mut replica_ids = Vec::new();
        self.topics
            .each::<ReassignmentsApi>(|topic, (partition, replicas)| {
                let replicas = replicas.map(|mut ids| {
                    replica_ids.clear();
                    while ids.has_remaining() {
                        replica_ids.push(ids.get_i32());
                    }
                    replica_ids.as_slice()
                });
                visit(Wanted {
                    topic,
                    partition,
                    replicas,
                })
            })
    }
}

/// Writes the topics' results (`topic_partitions.rs`).
pub type ReassignmentResultsWriter = PartitionResultsWriter<ReassignmentsApi>;

/// Alters the reassignments with the controller reading the partitions from the frame: the
/// answer's body lists no topics, and the [`ReassignmentResultsWriter`] writes them.
pub(crate) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ChunkedReassignments,
) -> anyhow::Result<(ApiResponse, ReassignmentResultsWriter)> {
    let request = Arc::new(request);
    let (answer, answers) = handlers::alter_listed_reassignments(
        ctx,
        info,
        request.clone(),
        request.topics.partitions,
        request.allow_replication_factor_change,
    )
    .await;
    tracing::debug!(
        topics = request.topics.topics,
        partitions = request.topics.partitions,
        "an AlterPartitionReassignments request decided from its frame"
    );
    Ok((answer, request.topics.writer::<ReassignmentsApi>(answers)?))
}

#[cfg(test)]
mod tests {
    use gregor_actors::controller::logic::election::UncleanPolicy;
    use gregor_actors::controller::logic::reassignment::{
        alter_listed_reassignments, alter_partition_reassignments,
    };
    use gregor_publishers::records::{
        MetadataRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord,
    };
    use gregor_publishers::{MetadataDelta, MetadataImage};
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use kafka_protocol::messages::alter_partition_reassignments_response::ReassignableTopicResponse;
    use kafka_protocol::messages::{AlterPartitionReassignmentsRequest, BrokerId, TopicName};
    use uuid::Uuid;

    use super::*;

    /// Brokers 1 to 3 and topic "t" of 1,500 partitions on [1, 2]; partition 7 is being
    /// moved to [2, 3].
    fn image() -> MetadataImage {
        let mut records: Vec<MetadataRecord> = (1..=3)
            .map(|id| {
                MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                    broker_id: id,
                    incarnation_id: Uuid::from_u128(id as u128),
                    broker_epoch: 10,
                    endpoints: Vec::new(),
                    features: Vec::new(),
                    rack: None,
                    fenced: false,
                    in_controlled_shutdown: false,
                    log_dirs: Vec::new(),
                })
            })
            .collect();
        let t = Uuid::from_u128(7);
        records.push(MetadataRecord::Topic(TopicRecord {
            name: "t".into(),
            topic_id: t,
        }));
        records.extend((0..1500).map(|id| {
            let moving = id == 7;
            MetadataRecord::Partition(PartitionRecord {
                partition_id: id,
                topic_id: t,
                replicas: if moving { vec![2, 3, 1] } else { vec![1, 2] },
                isr: vec![1, 2],
                removing_replicas: if moving { vec![1] } else { Vec::new() },
                adding_replicas: if moving { vec![3] } else { Vec::new() },
                leader: 1,
                leader_recovery_state: 0,
                leader_epoch: 3,
                partition_epoch: 5,
                directories: Vec::new(),
            })
        }));
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        for record in &records {
            delta.replay(record).unwrap_or_else(|e| panic!("{e}"));
        }
        delta.apply(Default::default())
    }

    fn wanted(index: i32, replicas: Option<&[i32]>) -> ReassignablePartition {
        ReassignablePartition::default()
            .with_partition_index(index)
            .with_replicas(replicas.map(|ids| ids.iter().copied().map(BrokerId).collect()))
    }

    fn topic(name: &str, partitions: Vec<ReassignablePartition>) -> ReassignableTopic {
        ReassignableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
            .with_partitions(partitions)
    }

    /// 1,100 cancellations of idle partitions and one of a reassignment in progress, moves
    /// (started, a partition named twice), an empty target, an unknown and a repeated broker, a
    /// changed replication factor, an unknown topic and partition, a topic naming none.
    fn named() -> Vec<ReassignableTopic> {
        vec![
            topic("t", (0..1100).map(|i| wanted(i, None)).collect()),
            topic(
                "t",
                vec![
                    wanted(7, None),
                    wanted(0, Some(&[2, 1])),
                    wanted(1, Some(&[])),
                    wanted(2, Some(&[1, 9])),
                    wanted(3, Some(&[1, 1])),
                    wanted(4, Some(&[1, 2, 3])),
                    wanted(0, Some(&[2, 3])),
                ],
            ),
            topic("gone", vec![wanted(0, Some(&[1]))]),
            topic("t", vec![wanted(99_999, None)]),
            topic("t", Vec::new()),
        ]
    }

    fn body(request: &AlterPartitionReassignmentsRequest, version: i16) -> anyhow::Result<Bytes> {
        let mut body = BytesMut::new();
        request.encode(&mut body, version)?;
        Ok(body.freeze())
    }

    #[test]
    fn partitions_are_read_from_the_frame_and_answered_as_decoded() -> anyhow::Result<()> {
        let image = image();
        let policy = UncleanPolicy::default();
        for (version, allow) in [(0, true), (1, true), (1, false)] {
            let request = AlterPartitionReassignmentsRequest::default()
                .with_timeout_ms(1000)
                .with_allow_replication_factor_change(allow)
                .with_topics(named());
            let decoded = alter_partition_reassignments(&image, &request, version, &policy);
            let body = body(&request, version)?;
            assert!(scan(&body, 2).is_none(), "no such version");
            let chunked = scan(&body, version).context("chunked")??;
            assert_eq!(
                (chunked.topics.topics, chunked.topics.partitions),
                (5, 1109)
            );
            let listed = alter_listed_reassignments(&image, &chunked, allow, version, &policy);
            assert_eq!(listed.records, decoded.records, "v{version} {allow}");
            assert_eq!(
                listed.response.allow_replication_factor_change,
                decoded.response.allow_replication_factor_change
            );
            let writer = chunked.topics.writer::<ReassignmentsApi>(listed.response)?;
            assert_eq!(
                writer.written_as::<ReassignableTopicResponse>(version)?,
                decoded.response.responses
            );
        }
        // Kafka's messages, made from the frame.
        let request = AlterPartitionReassignmentsRequest::default()
            .with_allow_replication_factor_change(false)
            .with_topics(named());
        let decoded = alter_partition_reassignments(&image, &request, 1, &policy);
        assert_eq!(decoded.records.len(), 4, "7 cancelled twice, 0 moved twice");
        let messages: Vec<_> = decoded.response.responses[1]
            .partitions
            .iter()
            .map(|p| (p.error_code, p.error_message.as_deref().unwrap_or_default()))
            .collect();
        assert_eq!(
            messages[2..6],
            [
                (39, "The manual partition assignment includes an empty replica list."),
                (39, "The manual partition assignment includes broker 9, but no such broker is registered."),
                (39, "The manual partition assignment includes the broker 1 more than once."),
                (38, "The replication factor is changed from 2 to 3 but allowReplicationFactorChange is false"),
            ]
        );
        Ok(())
    }

    #[test]
    fn a_refused_request_answers_every_partition() -> anyhow::Result<()> {
        let request = AlterPartitionReassignmentsRequest::default().with_topics(named());
        let chunked = scan(&body(&request, 1)?, 1).context("chunked")??;
        let writer = chunked
            .topics
            .writer::<ReassignmentsApi>(ListedReassignments::refused(
                31,
                "Cluster authorization failed.",
            ))?;
        let results = writer.written_as::<ReassignableTopicResponse>(1)?;
        let partitions: Vec<_> = results.iter().flat_map(|t| &t.partitions).collect();
        assert_eq!(partitions.len(), 1109);
        assert!(partitions.iter().all(|p| p.error_code == 31
            && p.error_message.as_deref() == Some("Cluster authorization failed.")));
        Ok(())
    }

    #[test]
    fn short_and_malformed_requests_are_left_or_refused() -> anyhow::Result<()> {
        let short = AlterPartitionReassignmentsRequest::default().with_topics(vec![topic(
            "t",
            (0..1024).map(|i| wanted(i, None)).collect(),
        )]);
        assert!(scan(&body(&short, 1)?, 1).is_none());
        let request = AlterPartitionReassignmentsRequest::default().with_topics(named());
        for version in [0, 1] {
            let body = body(&request, version)?;
            assert!(scan(&body.slice(..body.len() - 1), version)
                .context("chunked")?
                .is_err());
            // Cut inside the first topic's partitions: refused, not decoded whole.
            assert!(scan(&body.slice(..3000), version)
                .context("chunked")?
                .is_err());
        }
        Ok(())
    }
}
