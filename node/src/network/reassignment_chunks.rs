//! AlterPartitionReassignments requests naming many partitions, decided without decoding
//! their list and answered as the answer is written.
//!
//! A cancelled partition is six bytes on the wire, but a decoded request, its result (with a
//! message naming the topic and partition for an unknown one) and the encoded answer cost 75 to
//! 95 times that. As ElectLeaders' (`election_chunks.rs`), the topics stay in the frame: the
//! controller reads the named partitions one at a time (`RequestedReassignments`) and keeps
//! an eight-byte outcome per partition, whose message is made from the frame's topic,
//! partition and replicas when the answer is written. Kafka answers every named partition in
//! request order, so nothing here looks for repeats.

use std::sync::Arc;

use anyhow::{bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::alter_partition_reassignments_response::ReassignablePartitionResponse;
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::controller::logic::reassignment::{
    ListedReassignments, RequestedReassignments, Wanted,
};
use gregor_actors::handlers::{self, ApiResponse};

use super::dedup_decode::{array_length, need, uvarint};
use super::repeated::{
    put_array_length, put_uvarint, skip, skip_tagged_fields, PieceSource, PiecesWriter,
};

/// Partitions (and topics) answered per piece of the answer; a request naming no more is
/// decoded whole.
pub const CHUNK: usize = 1024;

/// An AlterPartitionReassignments request whose topics stay in the frame (every version is
/// flexible).
#[derive(Clone)]
pub struct ChunkedReassignments {
    /// The request body.
    body: Bytes,
    version: i16,
    allow_replication_factor_change: bool,
    /// Where the topics start in `body` (after their list's length), and how many.
    topics_at: usize,
    topics: usize,
    /// How many partitions they name.
    partitions: usize,
}

/// Whether `frame` (header and body) is an AlterPartitionReassignments request this module
/// decides: the repeats of such a request are answered here, not dropped before.
pub fn is_long(frame: &Bytes, version: i16) -> bool {
    let mut rest = frame.clone();
    let header_version = ApiKey::AlterPartitionReassignments.request_header_version(version);
    RequestHeader::decode(&mut rest, header_version).is_ok()
        && matches!(scan(&rest, version), Some(Ok(_)))
}

/// A topic's name, checked as the crate checks a string.
fn name(rest: &mut Bytes) -> anyhow::Result<Bytes> {
    let Some(length) = (uvarint(rest)? as usize).checked_sub(1) else {
        bail!("an AlterPartitionReassignments topic name must not be null");
    };
    need(rest, length)?;
    let name = rest.split_to(length);
    std::str::from_utf8(&name).context("a topic name that is not UTF-8")?;
    Ok(name)
}

/// One partition: its index and wanted replicas (four bytes each; `None`: cancel).
fn partition(rest: &mut Bytes) -> anyhow::Result<(i32, Option<Bytes>)> {
    need(rest, 4)?;
    let index = rest.get_i32();
    let replicas = match usize::try_from(array_length(rest, true)?) {
        Ok(count) => {
            let size = count.checked_mul(4).context("too many replicas")?;
            need(rest, size)?;
            Some(rest.split_to(size))
        }
        Err(_) => None,
    };
    skip_tagged_fields(rest, true)?;
    Ok((index, replicas))
}

/// One topic: its name and partitions, and how many it names.
fn topic(rest: &mut Bytes, claimed: &mut usize) -> anyhow::Result<(Bytes, Bytes)> {
    let name = name(rest)?;
    *claimed = usize::try_from(array_length(rest, true)?)
        .context("an AlterPartitionReassignments topic's partitions must not be null")?;
    let start = rest.clone();
    for _ in 0..*claimed {
        partition(rest)?;
    }
    let mut partitions = start;
    partitions.truncate(partitions.len() - rest.len());
    skip_tagged_fields(rest, true)?;
    Ok((name, partitions))
}

/// Reads `body` (an AlterPartitionReassignments request body) when it names more than
/// [`CHUNK`] topics or partitions; `None` for other requests, decoded whole. A long request
/// is read to its end first, so a malformed one is refused whole, before the crate would
/// decode what comes before where it breaks.
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
    let topics = usize::try_from(array_length(&mut rest, true).ok()?).ok()?;
    let topics_at = body.len() - rest.len();
    let mut partitions = 0usize;
    for index in 0..topics {
        let mut claimed = 0;
        let read = topic(&mut rest, &mut claimed);
        partitions = partitions.saturating_add(claimed);
        if let Err(e) = read {
            return (index > CHUNK || partitions > CHUNK).then_some(Err(e));
        }
    }
    if topics <= CHUNK && partitions <= CHUNK {
        return None;
    }
    Some(
        skip_tagged_fields(&mut rest, true).map(|()| ChunkedReassignments {
            body: body.clone(),
            version,
            allow_replication_factor_change,
            topics_at,
            topics,
            partitions,
        }),
    )
}

/// The topics of a request in order: each one's name and partitions.
struct Cursor<'a> {
    request: &'a ChunkedReassignments,
    rest: Bytes,
    index: usize,
}

impl Cursor<'_> {
    fn next_topic(&mut self) -> anyhow::Result<Option<(Bytes, Bytes)>> {
        if self.index == self.request.topics {
            return Ok(None);
        }
        self.index += 1;
        topic(&mut self.rest, &mut 0).map(Some)
    }
}

fn text(name: &Bytes) -> anyhow::Result<&str> {
    std::str::from_utf8(name).context("a topic name that is not UTF-8")
}

impl ChunkedReassignments {
    fn cursor(&self) -> Cursor<'_> {
        Cursor {
            request: self,
            rest: self.body.slice(self.topics_at..),
            index: 0,
        }
    }
}

impl RequestedReassignments for ChunkedReassignments {
    fn count(&self) -> usize {
        self.partitions
    }

    fn each(&self, visit: &mut dyn FnMut(Wanted<'_>) -> bool) -> Result<(), String> {
        let mut cursor = self.cursor();
        let mut replica_ids = Vec::new();
        while let Some((name, mut partitions)) = cursor.next_topic().map_err(|e| e.to_string())? {
            let topic = text(&name).map_err(|e| e.to_string())?;
            while partitions.has_remaining() {
                let (index, replicas) = partition(&mut partitions).map_err(|e| e.to_string())?;
                let replicas = replicas.map(|mut ids| {
                    replica_ids.clear();
                    while ids.has_remaining() {
                        replica_ids.push(ids.get_i32());
                    }
                    replica_ids.as_slice()
                });
                let wanted = Wanted {
                    topic,
                    partition: index,
                    replicas,
                };
                if !visit(wanted) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// The answer's topics, each with a result per named partition, from the frame and the
/// controller's outcomes.
pub struct ReassignmentResults {
    request: Arc<ChunkedReassignments>,
    answers: ListedReassignments,
}

/// Writes the topics' results, about [`CHUNK`] partitions at a time.
pub type ReassignmentResultsWriter = PiecesWriter<ReassignmentResults>;

impl PieceSource for ReassignmentResults {
    const API: &'static str = "AlterPartitionReassignments";

    fn pieces(&self) -> impl FnMut() -> anyhow::Result<Option<BytesMut>> + Send + '_ {
        let request = &self.request;
        let mut cursor = request.cursor();
        // The topic being written and its partitions not yet answered.
        let mut current: Option<(Bytes, Bytes)> = None;
        let mut answered = 0;
        move || {
            let mut piece = BytesMut::new();
            let mut in_piece = 0;
            while in_piece < CHUNK {
                let Some((name, partitions)) = current.as_mut() else {
                    let Some((name, partitions)) = cursor.next_topic()? else {
                        break;
                    };
                    put_uvarint(&mut piece, u32::try_from(name.len() + 1)?);
                    piece.put_slice(&name);
                    let mut counting = partitions.clone();
                    let mut count = 0;
                    while counting.has_remaining() {
                        partition(&mut counting)?;
                        count += 1;
                    }
                    put_array_length(&mut piece, count, true)?;
                    current = Some((name, partitions));
                    in_piece += 1;
                    continue;
                };
                if !partitions.has_remaining() {
                    piece.put_u8(0);
                    current = None;
                    continue;
                }
                let (index, replicas) = partition(partitions)?;
                let (code, message) = match &self.answers.refused {
                    Some((code, message)) => (*code, Some(message.clone())),
                    None => self
                        .answers
                        .outcomes
                        .get(answered)
                        .context("more partitions than outcomes")?
                        .answer(text(name)?, index, replicas.map_or(0, |ids| ids.len() / 4)),
                };
                ReassignablePartitionResponse::default()
                    .with_partition_index(index)
                    .with_error_code(code)
                    .with_error_message(message.map(StrBytes::from_string))
                    .encode(&mut piece, request.version)?;
                answered += 1;
                in_piece += 1;
            }
            Ok((!piece.is_empty()).then_some(piece))
        }
    }
}

/// The writer of `request`'s answer, the controller's `answers`.
fn results_writer(
    request: Arc<ChunkedReassignments>,
    answers: ListedReassignments,
) -> anyhow::Result<ReassignmentResultsWriter> {
    if answers.refused.is_none() && answers.outcomes.len() != request.partitions {
        bail!(
            "{} partitions answered of {}",
            answers.outcomes.len(),
            request.partitions
        );
    }
    let topics = request.topics;
    PiecesWriter::new(ReassignmentResults { request, answers }, topics)
}

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
        request.partitions,
        request.allow_replication_factor_change,
    )
    .await;
    tracing::debug!(
        topics = request.topics,
        partitions = request.partitions,
        "an AlterPartitionReassignments request decided from its frame"
    );
    Ok((answer, results_writer(request, answers)?))
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

    fn written(
        writer: &ReassignmentResultsWriter,
        version: i16,
    ) -> anyhow::Result<Vec<ReassignableTopicResponse>> {
        let mut written = Vec::new();
        futures::executor::block_on(writer.write_to(&mut written))?;
        assert_eq!(written.len(), writer.len());
        let mut written = Bytes::from(written);
        let mut results = Vec::new();
        while !written.is_empty() {
            results.push(ReassignableTopicResponse::decode(&mut written, version)?);
        }
        assert_eq!(results.len(), writer.count());
        Ok(results)
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
            assert_eq!((chunked.topics, chunked.partitions), (5, 1109));
            let listed = alter_listed_reassignments(&image, &chunked, allow, version, &policy);
            assert_eq!(listed.records, decoded.records, "v{version} {allow}");
            assert_eq!(
                listed.response.allow_replication_factor_change,
                decoded.response.allow_replication_factor_change
            );
            let writer = results_writer(Arc::new(chunked), listed.response)?;
            assert_eq!(written(&writer, version)?, decoded.response.responses);
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
        let writer = results_writer(
            Arc::new(chunked),
            ListedReassignments::refused(31, "Cluster authorization failed."),
        )?;
        let results = written(&writer, 1)?;
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
