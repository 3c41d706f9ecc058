//! ElectLeaders requests naming many partitions, decided without decoding their list and
//! answered as the answer is written.
//!
//! A partition is four bytes on the wire, but a decoded request, its result (with a message
//! naming the topic and partition for an unknown one) and the encoded answer cost 80 to 110
//! times that. Here the topics stay in the frame (`topic_partitions.rs`): the controller reads
//! the named partitions from it one at a time (`RequestedPartitions`) and keeps one byte per
//! partition, its outcome, whose message is made from the frame's topic and partition when the
//! answer is written. Kafka answers every named partition in request order, a partition named
//! twice twice, so nothing here looks for repeats.

use std::sync::Arc;

use anyhow::Context;
use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::elect_leaders_response::PartitionResult;
use kafka_protocol::protocol::{Encodable, StrBytes};

use gregor_actors::context::{HandlerContext, RequestInfo};
use gregor_actors::controller::logic::election::{ListedElections, RequestedPartitions};
use gregor_actors::handlers::{self, ApiResponse};

use super::dedup_decode::need;
use super::topic_partitions::{PartitionResultsWriter, TopicList, TopicPartitionsApi};

/// ElectLeaders as a list of topics naming partitions (four bytes each).
pub struct ElectLeadersApi;

impl TopicPartitionsApi for ElectLeadersApi {
    const API: &'static str = "ElectLeaders";
    type Partition = i32;
    type Answers = ListedElections;

    fn flexible(version: i16) -> bool {
        version >= 2
    }

    fn partition(partitions: &mut Bytes, _: i16) -> anyhow::Result<i32> {
        need(partitions, 4)?;
        Ok(partitions.get_i32())
    }

    fn answered(answers: &ListedElections) -> Option<usize> {
        answers.refused.is_none().then_some(answers.outcomes.len())
    }

    fn write_partition(
        answers: &ListedElections,
        index: usize,
        topic: &str,
        partition: &i32,
        piece: &mut BytesMut,
        version: i16,
    ) -> anyhow::Result<()> {
        let (code, message) = match &answers.refused {
            Some((code, message)) => (*code, message.clone()),
            None => answers
                .outcomes
                .get(index)
                .context("more partitions than outcomes")?
                .answer(topic, *partition),
        };
        PartitionResult::default()
            .with_partition_id(*partition)
            .with_error_code(code)
            .with_error_message(message.map(StrBytes::from_string))
            .encode(piece, version)?;
        Ok(())
    }
}

/// An ElectLeaders request whose topics stay in the frame.
#[derive(Clone)]
pub struct ChunkedElections {
    topics: TopicList,
    election_type: i8,
}

/// Reads `body` (an ElectLeaders request body) when it names more than [`CHUNK`] topics or
/// partitions; `None` for other requests (null partitions: every partition), decoded whole.
/// The request is read to its end first, so a malformed one is refused whole, as the crate's
/// decoder refuses it.
///
/// [`CHUNK`]: super::topic_partitions::CHUNK
pub fn scan(body: &Bytes, version: i16) -> Option<anyhow::Result<ChunkedElections>> {
    if !(0..=2).contains(&version) {
        return None;
    }
    let mut rest = body.clone();
    let election_type = match version {
        0 => 0,
        _ => rest.try_get_i8().ok()?,
    };
    let topics = TopicList::scan::<ElectLeadersApi>(body, &mut rest, version)?;
    Some(topics.and_then(|topics| {
        // The timeout, then tagged fields.
        need(&rest, 4)?;
        rest.advance(4);
        super::repeated::skip_tagged_fields(&mut rest, version >= 2)?;
        Ok(ChunkedElections {
            topics,
            election_type,
        })
    }))
}

impl RequestedPartitions for ChunkedElections {
    fn count(&self) -> usize {
        self.topics.partitions
    }

    fn each(&self, visit: &mut dyn FnMut(&str, i32) -> bool) -> Result<(), String> {
        self.topics.each::<ElectLeadersApi>(visit)
    }
}

/// Writes the topics' results (`topic_partitions.rs`).
pub type ElectionResultsWriter = PartitionResultsWriter<ElectLeadersApi>;

/// Elects leaders with the controller reading the partitions from the frame: the answer's
/// body lists no topics, and the [`ElectionResultsWriter`] writes them.
pub(crate) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: ChunkedElections,
) -> anyhow::Result<(ApiResponse, ElectionResultsWriter)> {
    let request = Arc::new(request);
    let (answer, answers) = handlers::elect_listed_leaders(
        ctx,
        info,
        request.clone(),
        request.topics.partitions,
        request.election_type,
    )
    .await;
    tracing::debug!(
        topics = request.topics.topics,
        partitions = request.topics.partitions,
        "an ElectLeaders request decided from its frame"
    );
    Ok((answer, request.topics.writer::<ElectLeadersApi>(answers)?))
}

#[cfg(test)]
mod tests {
    use gregor_actors::controller::logic::election::{elect_leaders, elect_listed_leaders};
    use gregor_publishers::records::{
        MetadataRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord,
    };
    use gregor_publishers::{MetadataDelta, MetadataImage};
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use kafka_protocol::messages::elect_leaders_response::ReplicaElectionResult;
    use kafka_protocol::messages::{ElectLeadersRequest, TopicName};
    use uuid::Uuid;

    use super::*;

    fn partition(topic_id: Uuid, id: i32, replicas: &[i32], leader: i32) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord {
            partition_id: id,
            topic_id,
            replicas: replicas.to_vec(),
            isr: replicas.to_vec(),
            removing_replicas: Vec::new(),
            adding_replicas: Vec::new(),
            leader,
            leader_recovery_state: 0,
            leader_epoch: 3,
            partition_epoch: 5,
            directories: Vec::new(),
        })
    }

    /// Brokers 1 and 2, broker 3 fenced; topic "t" of 1,500 partitions on [1, 2], led by 2
    /// (a preferred election moves them) or by 1 (not needed); topic "u" of one leaderless
    /// partition on broker 3.
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
                    fenced: id == 3,
                    in_controlled_shutdown: false,
                    log_dirs: Vec::new(),
                })
            })
            .collect();
        let (t, u) = (Uuid::from_u128(7), Uuid::from_u128(8));
        for (name, id) in [("t", t), ("u", u)] {
            records.push(MetadataRecord::Topic(TopicRecord {
                name: name.into(),
                topic_id: id,
            }));
        }
        records.extend((0..1500).map(|id| partition(t, id, &[1, 2], 2 - id % 2)));
        records.push(partition(u, 0, &[3], -1));
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        for record in &records {
            delta.replay(record).unwrap_or_else(|e| panic!("{e}"));
        }
        delta.apply(Default::default())
    }

    fn topic(name: &str, partitions: impl IntoIterator<Item = i32>) -> TopicPartitions {
        TopicPartitions::default()
            .with_topic(TopicName(StrBytes::from_string(name.to_owned())))
            .with_partitions(partitions.into_iter().collect())
    }

    /// 1,200 partitions of "t" (0 named again later), an unknown topic, a leaderless partition,
    /// an unknown partition, a topic naming none.
    fn named() -> Vec<TopicPartitions> {
        vec![
            topic("t", 0..1200),
            topic("gone", [1, 2]),
            topic("u", [0]),
            topic("t", [99_999, 4, 0]),
            topic("t", []),
        ]
    }

    fn body(request: &ElectLeadersRequest, version: i16) -> anyhow::Result<Bytes> {
        let mut body = BytesMut::new();
        request.encode(&mut body, version)?;
        Ok(body.freeze())
    }

    #[test]
    fn partitions_are_read_from_the_frame_and_answered_as_decoded() -> anyhow::Result<()> {
        let image = image();
        for (version, election_type) in [(0, 0), (1, 0), (1, 1), (2, 0), (2, 1), (2, 7)] {
            let request = ElectLeadersRequest::default()
                .with_election_type(election_type)
                .with_topic_partitions(Some(named()))
                .with_timeout_ms(1000);
            let decoded = elect_leaders(&image, &request, version);
            let body = body(&request, version)?;
            assert!(scan(&body, 3).is_none(), "no such version");
            let chunked = scan(&body, version).context("chunked")??;
            assert_eq!(
                (chunked.topics.topics, chunked.topics.partitions),
                (5, 1206)
            );
            let listed = elect_listed_leaders(&image, &chunked, election_type, version);
            assert_eq!(
                listed.records, decoded.records,
                "v{version} type {election_type}"
            );
            let top = listed
                .response
                .refused
                .as_ref()
                .map_or(0, |(code, _)| *code);
            assert_eq!(top, decoded.response.error_code);
            let writer = chunked.topics.writer::<ElectLeadersApi>(listed.response)?;
            assert_eq!(
                writer.written_as::<ReplicaElectionResult>(version)?,
                decoded.response.replica_election_results,
                "v{version} type {election_type}"
            );
        }
        // The preferred election moves every other partition of "t" once.
        let request = ElectLeadersRequest::default().with_topic_partitions(Some(named()));
        let decoded = elect_leaders(&image, &request, 2);
        assert_eq!(decoded.records.len(), 600);
        let unknown = &decoded.response.replica_election_results[3].partition_result[0];
        assert_eq!(
            unknown.error_message.as_deref(),
            Some("No such partition as t-99999")
        );
        Ok(())
    }

    #[test]
    fn a_refused_request_answers_every_partition_without_a_message() -> anyhow::Result<()> {
        let request = ElectLeadersRequest::default().with_topic_partitions(Some(named()));
        let chunked = scan(&body(&request, 2)?, 2).context("chunked")??;
        let writer = chunked
            .topics
            .writer::<ElectLeadersApi>(ListedElections::refused(31, None))?;
        let results = writer.written_as::<ReplicaElectionResult>(2)?;
        assert_eq!(results.len(), 5);
        let partitions: Vec<_> = results.iter().flat_map(|t| &t.partition_result).collect();
        assert_eq!(partitions.len(), 1206);
        assert!(partitions
            .iter()
            .all(|p| p.error_code == 31 && p.error_message.is_none()));
        Ok(())
    }

    #[test]
    fn short_null_and_malformed_requests_are_left_or_refused() -> anyhow::Result<()> {
        let short =
            ElectLeadersRequest::default().with_topic_partitions(Some(vec![topic("t", 0..1024)]));
        assert!(scan(&body(&short, 2)?, 2).is_none());
        let every = ElectLeadersRequest::default().with_topic_partitions(None);
        assert!(scan(&body(&every, 2)?, 2).is_none());
        let request = ElectLeadersRequest::default().with_topic_partitions(Some(named()));
        for version in [0, 1, 2] {
            let body = body(&request, version)?;
            // Cut inside the timeout: counted, then refused.
            let cut = body.slice(..body.len() - 3 - usize::from(version >= 2));
            assert!(
                scan(&cut, version).context("chunked")?.is_err(),
                "v{version}"
            );
        }
        // Cut inside the first topic's partitions: refused, not decoded whole.
        let long = ElectLeadersRequest::default().with_topic_partitions(Some(named()));
        let cut = body(&long, 2)?.slice(..2000);
        assert!(scan(&cut, 2).context("chunked")?.is_err());
        // A topic name that is not UTF-8 is read as Kafka reads it, not refused.
        let mut bad = BytesMut::from(&body(&request, 2)?[..]);
        let at = bad
            .windows(4)
            .position(|window| window == b"gone")
            .context("the unknown topic")?;
        bad[at] = 0xff;
        assert!(scan(&bad.freeze(), 2).context("chunked")?.is_ok());
        Ok(())
    }
}
