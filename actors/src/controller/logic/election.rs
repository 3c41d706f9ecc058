//! Leader elections on the controller (pure): the election rules of Kafka's
//! `PartitionChangeBuilder` (ONLINE, PREFERRED, UNCLEAN), ElectLeaders (api 43), the periodic
//! preferred-leader rebalance (`auto.leader.rebalance.enable`) and the unclean election of
//! leaderless partitions (`unclean.leader.election.enable`).
//!
//! ```text
//!  ElectLeaders ─┐
//!  rebalance tick ├─▶ election_change(image, partition, election) ─▶ PartitionChangeRecord
//!  leaderless scan┘        (leader; unclean: ISR = [leader], RECOVERING)
//! ```

use std::collections::HashSet;

use gregor_publishers::image::configs::TOPIC_RESOURCE;
use gregor_publishers::image::partition::PartitionRegistration;
use gregor_publishers::records::{MetadataRecord, PartitionChangeRecord, NO_LEADER};
use gregor_publishers::MetadataImage;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::errors::ControllerError;
use super::{ControllerResult, MAX_RECORDS_PER_USER_OP};

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_REQUEST: i16 = 42;
const POLICY_VIOLATION: i16 = 44;
const PREFERRED_LEADER_NOT_AVAILABLE: i16 = 80;
const ELIGIBLE_LEADERS_NOT_AVAILABLE: i16 = 83;
const ELECTION_NOT_NEEDED: i16 = 84;

/// Kafka's `LeaderRecoveryState.RECOVERING`: the leader was elected uncleanly and has not yet
/// told the controller it recovered.
pub const RECOVERING: i8 = 1;

/// Most elections one rebalance or leaderless scan writes (Kafka's
/// `maxElectionsPerImbalance`, 1000); the controller runs again at once when the cap was hit.
pub const MAX_ELECTIONS_PER_PASS: usize = 1000;

/// How a new leader is chosen (Kafka's `PartitionChangeBuilder.Election`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Election {
    /// Keep a valid current leader, else the first valid replica in replica order.
    Online,
    /// The first replica if valid, else as [`Election::Online`].
    Preferred,
    /// As [`Election::Online`], else the first acceptable replica even outside the ISR.
    Unclean,
}

/// Where `unclean.leader.election.enable` comes from on this controller: the topic's config,
/// then this controller's dynamic broker config, the cluster default, then its static config
/// (Kafka's `ConfigurationControlManager.uncleanLeaderElectionEnabledForTopic`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UncleanPolicy {
    /// This controller's node id (its dynamic BROKER resource).
    pub node_id: i32,
    /// The static `unclean.leader.election.enable`.
    pub static_enabled: bool,
}

impl UncleanPolicy {
    const KEY: &'static str = "unclean.leader.election.enable";
    const BROKER_RESOURCE: i8 = 4;

    /// Whether `topic` may elect a leader from outside its ISR.
    pub fn enabled(&self, image: &MetadataImage, topic: &str) -> bool {
        let node = self.node_id.to_string();
        let value = image
            .configs
            .value(TOPIC_RESOURCE, topic, Self::KEY)
            .or_else(|| image.configs.value(Self::BROKER_RESOURCE, &node, Self::KEY))
            .or_else(|| image.configs.value(Self::BROKER_RESOURCE, "", Self::KEY));
        match value {
            Some(value) => value.trim().eq_ignore_ascii_case("true"),
            None => self.static_enabled,
        }
    }
}

/// Kafka's acceptable leader: registered, unfenced and not in controlled shutdown.
fn acceptable(image: &MetadataImage, id: i32) -> bool {
    image
        .cluster
        .broker(id)
        .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
}

/// The leader `election` picks for `partition` and whether the pick is unclean; `None` when
/// nobody can lead.
pub fn elect(
    image: &MetadataImage,
    partition: &PartitionRegistration,
    election: Election,
) -> Option<(i32, bool)> {
    let valid = |id: i32| partition.isr.contains(&id) && acceptable(image, id);
    let current =
        (partition.leader != NO_LEADER && valid(partition.leader)).then_some(partition.leader);
    let first_valid = || partition.replicas.iter().copied().find(|id| valid(*id));
    let clean = match election {
        Election::Preferred => partition
            .replicas
            .first()
            .copied()
            .filter(|id| valid(*id))
            .or(current)
            .or_else(first_valid),
        Election::Online | Election::Unclean => current.or_else(first_valid),
    };
    match (clean, election) {
        (Some(leader), _) => Some((leader, false)),
        (None, Election::Unclean) => partition
            .replicas
            .iter()
            .copied()
            .find(|id| acceptable(image, *id))
            .map(|leader| (leader, true)),
        (None, _) => None,
    }
}

/// The change electing a leader for `partition` by `election`, or `None` when the election
/// changes nothing. An unclean pick becomes the whole ISR and starts RECOVERING (KIP-704).
pub fn election_change(
    image: &MetadataImage,
    topic_id: Uuid,
    partition_id: i32,
    partition: &PartitionRegistration,
    election: Election,
) -> Option<PartitionChangeRecord> {
    let (leader, unclean) = elect(image, partition, election)?;
    if leader == partition.leader && !unclean {
        return None;
    }
    Some(PartitionChangeRecord {
        partition_id,
        topic_id,
        isr: unclean.then(|| vec![leader]),
        leader: Some(leader),
        leader_recovery_state: unclean.then_some(RECOVERING),
        ..PartitionChangeRecord::default()
    })
}

/// Whether the partition is led by its first replica (Kafka's `hasPreferredLeader`).
fn has_preferred_leader(partition: &PartitionRegistration) -> bool {
    partition.has_leader() && partition.replicas.first() == Some(&partition.leader)
}

/// How one requested partition's election ended; its message is made from the topic and
/// partition when the answer is written ([`ElectionOutcome::answer`]), so a request's outcomes
/// cost a byte per partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectionOutcome {
    Elected,
    NoSuchTopic,
    NoSuchPartition,
    NotNeeded,
    EligibleLeadersNotAvailable,
    PreferredLeaderNotAvailable,
}

impl ElectionOutcome {
    /// Kafka's error code (0: elected).
    pub fn code(self) -> i16 {
        match self {
            ElectionOutcome::Elected => 0,
            ElectionOutcome::NoSuchTopic | ElectionOutcome::NoSuchPartition => {
                UNKNOWN_TOPIC_OR_PARTITION
            }
            ElectionOutcome::NotNeeded => ELECTION_NOT_NEEDED,
            ElectionOutcome::EligibleLeadersNotAvailable => ELIGIBLE_LEADERS_NOT_AVAILABLE,
            ElectionOutcome::PreferredLeaderNotAvailable => PREFERRED_LEADER_NOT_AVAILABLE,
        }
    }

    /// Kafka's code and message for the partition `partition` of `topic`.
    pub fn answer(self, topic: &str, partition: i32) -> (i16, Option<String>) {
        let message = match self {
            ElectionOutcome::Elected => return (0, None),
            ElectionOutcome::NoSuchTopic => format!("No such topic as {topic}"),
            ElectionOutcome::NoSuchPartition => format!("No such partition as {topic}-{partition}"),
            ElectionOutcome::NotNeeded => {
                "Leader election not needed for topic partition.".to_owned()
            }
            ElectionOutcome::EligibleLeadersNotAvailable => {
                "Eligible topic partition leaders are not available.".to_owned()
            }
            ElectionOutcome::PreferredLeaderNotAvailable => {
                "The preferred leader was not available.".to_owned()
            }
        };
        (self.code(), Some(message))
    }
}

/// The outcome of one partition's election, and its record.
fn elect_one(
    image: &MetadataImage,
    topic: &str,
    partition_id: i32,
    election: Election,
) -> (ElectionOutcome, Option<PartitionChangeRecord>) {
    let Some(current) = image.topics.get_by_name(topic) else {
        return (ElectionOutcome::NoSuchTopic, None);
    };
    let Some(partition) = current.partition(partition_id) else {
        return (ElectionOutcome::NoSuchPartition, None);
    };
    let not_needed = match election {
        Election::Unclean => partition.has_leader(),
        _ => has_preferred_leader(partition),
    };
    if not_needed {
        return (ElectionOutcome::NotNeeded, None);
    }
    match election_change(image, current.id, partition_id, partition, election) {
        Some(record) => (ElectionOutcome::Elected, Some(record)),
        None if election == Election::Unclean => {
            (ElectionOutcome::EligibleLeadersNotAvailable, None)
        }
        None => (ElectionOutcome::PreferredLeaderNotAvailable, None),
    }
}

fn partition_result(partition_id: i32, code: i16, message: Option<String>) -> PartitionResult {
    PartitionResult::default()
        .with_partition_id(partition_id)
        .with_error_code(code)
        .with_error_message(message.map(StrBytes::from_string))
}

/// The partitions an ElectLeaders request names, read one at a time from where they are kept
/// (a decoded request, or its frame: issue #11).
pub trait RequestedPartitions: Send + Sync {
    /// How many partitions it names.
    fn count(&self) -> usize;

    /// Calls `visit` with each named topic and partition in request order (a partition named
    /// twice, twice); stops early when `visit` returns false.
    fn each(&self, visit: &mut dyn FnMut(&str, i32) -> bool) -> Result<(), String>;
}

impl RequestedPartitions for Vec<TopicPartitions> {
    fn count(&self) -> usize {
        self.iter().map(|topic| topic.partitions.len()).sum()
    }

    fn each(&self, visit: &mut dyn FnMut(&str, i32) -> bool) -> Result<(), String> {
        for topic in self {
            for &partition in &topic.partitions {
                if !visit(&topic.topic, partition) {
                    return Ok(());
                }
            }
        }
        Ok(())
    }
}

/// The answer to ElectLeaders naming its partitions: each named partition's outcome in request
/// order, or the refusal of the whole request (its code at the top and, with the message, for
/// every named partition).
#[derive(Debug, Default, PartialEq)]
pub struct ListedElections {
    pub outcomes: Vec<ElectionOutcome>,
    pub refused: Option<(i16, Option<String>)>,
}

impl ListedElections {
    /// A request refused whole.
    pub fn refused(code: i16, message: Option<String>) -> Self {
        ListedElections {
            outcomes: Vec::new(),
            refused: Some((code, message)),
        }
    }
}

/// The election an ElectLeaders request at `version` asks for (v0 knows only the preferred
/// one), or why it is refused.
fn election_of(version: i16, election_type: i8) -> Result<Election, String> {
    match (version, election_type) {
        (0, _) | (_, 0) => Ok(Election::Preferred),
        (_, 1) => Ok(Election::Unclean),
        (_, other) => Err(format!("Unknown election type {other}")),
    }
}

/// Decides ElectLeaders for the partitions `partitions` names (Kafka's
/// `ReplicationControlManager.electLeaders`): one outcome per named partition in request order.
/// A partition named twice is elected once (its second record would name a leader that already
/// leads); both get the first outcome, and both count toward the limit, as Kafka writes a
/// record for each. An unknown election type refuses the request with INVALID_REQUEST; more
/// than [`MAX_RECORDS_PER_USER_OP`] elections (Kafka's `BoundedList` of records) with
/// POLICY_VIOLATION, writing nothing, as Kafka's controller answers its batch-too-large
/// failure.
pub fn elect_listed_leaders(
    image: &MetadataImage,
    partitions: &dyn RequestedPartitions,
    election_type: i8,
    version: i16,
) -> ControllerResult<ListedElections> {
    let refused = |code, message| ControllerResult {
        records: Vec::new(),
        response: ListedElections::refused(code, Some(message)),
    };
    let election = match election_of(version, election_type) {
        Ok(election) => election,
        Err(message) => return refused(INVALID_REQUEST, message),
    };
    let mut records = Vec::new();
    let mut elections = 0;
    // Sized once: a doubling vector's earlier copies stay resident in the allocator.
    let mut outcomes = Vec::with_capacity(partitions.count());
    // The partitions elected so far: at most one batch of them, the request failing past it.
    let mut elected: HashSet<(Uuid, i32)> = HashSet::new();
    let walked = partitions.each(&mut |topic, partition_id| {
        let (outcome, record) = elect_one(image, topic, partition_id, election);
        if let Some(record) = record {
            elections += 1;
            if elected.insert((record.topic_id, partition_id)) {
                records.push(MetadataRecord::PartitionChange(record));
            }
        }
        outcomes.push(outcome);
        elections <= MAX_RECORDS_PER_USER_OP
    });
    if let Err(error) = walked {
        tracing::error!(%error, "an ElectLeaders request could not be read again");
        return refused(ResponseError::UnknownServerError.code(), error);
    }
    if elections > MAX_RECORDS_PER_USER_OP {
        return refused(POLICY_VIOLATION, ControllerError::BatchTooLarge.to_string());
    }
    ControllerResult {
        records,
        response: ListedElections {
            outcomes,
            refused: None,
        },
    }
}

/// Decides ElectLeaders at `version`: with named partitions as [`elect_listed_leaders`]; with
/// null partitions every partition of every topic, leaving out those already led as wanted
/// (ELECTION_NOT_NEEDED).
pub fn elect_leaders(
    image: &MetadataImage,
    request: &ElectLeadersRequest,
    version: i16,
) -> ControllerResult<ElectLeadersResponse> {
    let Some(topics) = &request.topic_partitions else {
        return elect_every_leader(image, request, version);
    };
    let ControllerResult { records, response } =
        elect_listed_leaders(image, topics, request.election_type, version);
    if let Some((code, message)) = response.refused {
        return refused_whole(request, code, message.unwrap_or_default());
    }
    let mut outcomes = response.outcomes.into_iter();
    let results = topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|&partition_id| {
                    let (code, message) = outcomes.next().map_or(
                        (
                            ResponseError::UnknownServerError.code(),
                            Some("the partition has no outcome".to_owned()),
                        ),
                        |outcome| outcome.answer(&topic.topic, partition_id),
                    );
                    partition_result(partition_id, code, message)
                })
                .collect();
            ReplicaElectionResult::default()
                .with_topic(topic.topic.clone())
                .with_partition_result(partitions)
        })
        .collect();
    ControllerResult {
        records,
        response: ElectLeadersResponse::default().with_replica_election_results(results),
    }
}

/// ElectLeaders with null partitions: every partition of every topic that needs it.
fn elect_every_leader(
    image: &MetadataImage,
    request: &ElectLeadersRequest,
    version: i16,
) -> ControllerResult<ElectLeadersResponse> {
    let election = match election_of(version, request.election_type) {
        Ok(election) => election,
        Err(message) => return refused_whole(request, INVALID_REQUEST, message),
    };
    let mut records = Vec::new();
    let mut results = Vec::new();
    for topic in image.topics.iter() {
        let mut partitions = Vec::new();
        for (partition_id, _) in topic.partitions() {
            let (outcome, record) = elect_one(image, &topic.name, partition_id, election);
            records.extend(record.map(MetadataRecord::PartitionChange));
            if outcome != ElectionOutcome::NotNeeded {
                let (code, message) = outcome.answer(&topic.name, partition_id);
                partitions.push(partition_result(partition_id, code, message));
            }
        }
        results.push(
            ReplicaElectionResult::default()
                .with_topic(TopicName(StrBytes::from_string(topic.name.to_string())))
                .with_partition_result(partitions),
        );
    }
    if records.len() > MAX_RECORDS_PER_USER_OP {
        let message = ControllerError::BatchTooLarge.to_string();
        return refused_whole(request, POLICY_VIOLATION, message);
    }
    ControllerResult {
        records,
        response: ElectLeadersResponse::default().with_replica_election_results(results),
    }
}

/// The answer to a request Kafka's controller refuses whole (`ElectLeadersRequest
/// .getErrorResponse`): `code` at the top and, with `message`, for every requested partition;
/// nothing written.
fn refused_whole(
    request: &ElectLeadersRequest,
    code: i16,
    message: String,
) -> ControllerResult<ElectLeadersResponse> {
    let results = request
        .topic_partitions
        .iter()
        .flatten()
        .map(|topic| {
            ReplicaElectionResult::default()
                .with_topic(topic.topic.clone())
                .with_partition_result(
                    topic
                        .partitions
                        .iter()
                        .map(|id| partition_result(*id, code, Some(message.clone())))
                        .collect(),
                )
        })
        .collect();
    ControllerResult {
        records: Vec::new(),
        response: ElectLeadersResponse::default()
            .with_error_code(code)
            .with_replica_election_results(results),
    }
}

/// The preferred-leader elections of one auto-rebalance pass (Kafka's
/// `maybeBalancePartitionLeaders`): every partition not led by its first replica whose first
/// replica can lead now, at most `limit`; the flag says the cap was hit.
pub fn balance_leaders(image: &MetadataImage, limit: usize) -> (Vec<MetadataRecord>, bool) {
    let mut records = Vec::new();
    for topic in image.topics.iter() {
        for (partition_id, partition) in topic.partitions() {
            if has_preferred_leader(partition) || partition.replicas.is_empty() {
                continue;
            }
            if records.len() >= limit {
                return (records, true);
            }
            if let Some(record) = election_change(
                image,
                topic.id,
                partition_id,
                partition,
                Election::Preferred,
            ) {
                records.push(MetadataRecord::PartitionChange(record));
            }
        }
    }
    (records, false)
}

/// Elections for partitions without a leader: a valid ISR member leads (a broker came back),
/// else, where the topic allows it, any acceptable replica leads uncleanly. At most `limit`.
pub fn elect_leaderless(
    image: &MetadataImage,
    policy: &UncleanPolicy,
    limit: usize,
) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    for topic in image.topics.iter() {
        let mut unclean: Option<bool> = None;
        for (partition_id, partition) in topic.partitions() {
            if partition.has_leader() {
                continue;
            }
            if records.len() >= limit {
                return records;
            }
            let election = if *unclean.get_or_insert_with(|| policy.enabled(image, &topic.name)) {
                Election::Unclean
            } else {
                Election::Online
            };
            if let Some(record) =
                election_change(image, topic.id, partition_id, partition, election)
            {
                records.push(MetadataRecord::PartitionChange(record));
            }
        }
    }
    records
}

#[cfg(test)]
#[allow(clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use gregor_publishers::records::{
        ConfigRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord,
    };
    use gregor_publishers::MetadataDelta;
    use kafka_protocol::messages::elect_leaders_request::TopicPartitions;
    use std::sync::Arc;

    const TOPIC: Uuid = Uuid::from_u128(7);

    fn broker(id: i32, fenced: bool) -> MetadataRecord {
        MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: id,
            incarnation_id: Uuid::from_u128(id as u128),
            broker_epoch: 10 + i64::from(id),
            endpoints: Vec::new(),
            features: Vec::new(),
            rack: None,
            fenced,
            in_controlled_shutdown: false,
            log_dirs: Vec::new(),
        })
    }

    fn partition(id: i32, replicas: &[i32], isr: &[i32], leader: i32) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord {
            partition_id: id,
            topic_id: TOPIC,
            replicas: replicas.to_vec(),
            isr: isr.to_vec(),
            removing_replicas: Vec::new(),
            adding_replicas: Vec::new(),
            leader,
            leader_recovery_state: 0,
            leader_epoch: 3,
            partition_epoch: 5,
            directories: Vec::new(),
        })
    }

    /// Brokers 1-4 (`fenced` among them) and topic `t` with `partitions`.
    fn image(fenced: &[i32], partitions: Vec<MetadataRecord>) -> MetadataImage {
        let mut records: Vec<MetadataRecord> =
            (1..=4).map(|id| broker(id, fenced.contains(&id))).collect();
        records.push(MetadataRecord::Topic(TopicRecord {
            name: "t".into(),
            topic_id: TOPIC,
        }));
        records.extend(partitions);
        apply(MetadataImage::empty(), &records)
    }

    fn apply(image: MetadataImage, records: &[MetadataRecord]) -> MetadataImage {
        let base = Arc::new(image);
        let mut delta = MetadataDelta::new(base.clone());
        for record in records {
            delta.replay(record).expect("replays");
        }
        delta.apply(base.provenance)
    }

    fn change(id: i32, leader: i32) -> MetadataRecord {
        MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: id,
            topic_id: TOPIC,
            leader: Some(leader),
            ..PartitionChangeRecord::default()
        })
    }

    fn request(election_type: i8, partitions: Option<&[i32]>) -> ElectLeadersRequest {
        ElectLeadersRequest::default()
            .with_election_type(election_type)
            .with_topic_partitions(partitions.map(|ids| {
                vec![TopicPartitions::default()
                    .with_topic(TopicName(StrBytes::from_static_str("t")))
                    .with_partitions(ids.to_vec())]
            }))
    }

    fn codes(response: &ElectLeadersResponse) -> Vec<(i32, i16)> {
        response
            .replica_election_results
            .iter()
            .flat_map(|t| &t.partition_result)
            .map(|p| (p.partition_id, p.error_code))
            .collect()
    }

    #[test]
    fn election_rules_follow_kafkas_builder() {
        let image = image(&[4], vec![]);
        let registration = |replicas: &[i32], isr: &[i32], leader| PartitionRegistration {
            replicas: replicas.into(),
            isr: isr.into(),
            leader,
            ..PartitionRegistration::default()
        };
        // Preferred: the first replica when in the ISR and unfenced.
        let p = registration(&[1, 2, 3], &[1, 2, 3], 2);
        assert_eq!(elect(&image, &p, Election::Preferred), Some((1, false)));
        assert_eq!(elect(&image, &p, Election::Online), Some((2, false)));
        // The first replica is out of the ISR: the current leader stays.
        let p = registration(&[1, 2, 3], &[2, 3], 3);
        assert_eq!(elect(&image, &p, Election::Preferred), Some((3, false)));
        // Fenced first replica and no leader: the next valid replica.
        let p = registration(&[4, 3, 2], &[4, 2], NO_LEADER);
        assert_eq!(elect(&image, &p, Election::Preferred), Some((2, false)));
        // Only a fenced ISR: nobody cleanly; unclean takes the first acceptable replica.
        let p = registration(&[4, 3, 1], &[4], NO_LEADER);
        assert_eq!(elect(&image, &p, Election::Online), None);
        assert_eq!(elect(&image, &p, Election::Unclean), Some((3, true)));
        assert_eq!(
            election_change(&image, TOPIC, 0, &p, Election::Unclean),
            Some(PartitionChangeRecord {
                partition_id: 0,
                topic_id: TOPIC,
                isr: Some(vec![3]),
                leader: Some(3),
                leader_recovery_state: Some(RECOVERING),
                ..PartitionChangeRecord::default()
            })
        );
    }

    #[test]
    fn elect_leaders_answers_kafkas_codes_per_partition() {
        let image = image(
            &[4],
            vec![
                partition(0, &[1, 2, 3], &[1, 2, 3], 2),
                partition(1, &[1, 2, 3], &[1, 2, 3], 1),
                partition(2, &[4, 2], &[4, 2], 2),
                partition(3, &[3, 4], &[4], NO_LEADER),
            ],
        );
        let preferred = elect_leaders(&image, &request(0, Some(&[0, 1, 2, 3, 9])), 2);
        assert_eq!(
            codes(&preferred.response),
            vec![
                (0, 0),
                (1, ELECTION_NOT_NEEDED),
                (2, PREFERRED_LEADER_NOT_AVAILABLE),
                (3, PREFERRED_LEADER_NOT_AVAILABLE),
                (9, UNKNOWN_TOPIC_OR_PARTITION),
            ]
        );
        assert_eq!(preferred.records, vec![change(0, 1)]);
        let unknown = &preferred.response.replica_election_results[0].partition_result[4];
        assert_eq!(
            unknown.error_message.as_deref(),
            Some("No such partition as t-9")
        );

        let unclean = elect_leaders(&image, &request(1, Some(&[0, 3])), 1);
        assert_eq!(
            codes(&unclean.response),
            vec![(0, ELECTION_NOT_NEEDED), (3, 0)]
        );
        assert_eq!(
            unclean.records,
            vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id: 3,
                topic_id: TOPIC,
                isr: Some(vec![3]),
                leader: Some(3),
                leader_recovery_state: Some(RECOVERING),
                ..PartitionChangeRecord::default()
            })]
        );

        // Every partition: those already led by their first replica are left out.
        let all = elect_leaders(&image, &request(0, None), 2);
        assert_eq!(
            codes(&all.response),
            vec![
                (0, 0),
                (2, PREFERRED_LEADER_NOT_AVAILABLE),
                (3, PREFERRED_LEADER_NOT_AVAILABLE)
            ]
        );

        let invalid = elect_leaders(&image, &request(5, Some(&[0])), 2);
        assert_eq!(invalid.response.error_code, INVALID_REQUEST);
        assert_eq!(codes(&invalid.response), vec![(0, INVALID_REQUEST)]);
        assert!(invalid.records.is_empty());
        // v0 has no election type: always preferred.
        assert_eq!(
            elect_leaders(&image, &request(1, Some(&[0])), 0).records,
            vec![change(0, 1)]
        );
    }

    #[test]
    fn a_partition_named_twice_is_elected_once() {
        let image = image(&[], vec![partition(0, &[1, 2], &[1, 2], 2)]);
        let result = elect_leaders(&image, &request(0, Some(&[0, 0])), 2);
        assert_eq!(codes(&result.response), vec![(0, 0), (0, 0)]);
        assert_eq!(result.records, vec![change(0, 1)]);
    }

    #[test]
    fn more_than_ten_thousand_elections_are_refused_whole() {
        // 5,000 partitions led by their second replica: each preferred election writes a record.
        let partitions: Vec<_> = (0..5_000)
            .map(|id| partition(id, &[1, 2], &[1, 2], 2))
            .collect();
        let led = image(&[], partitions);
        let ids: Vec<i32> = (0..5_000).collect();
        // Named twice: 10,000 elections, as many records in Kafka's controller (one each here).
        let twice = [ids.clone(), ids.clone()].concat();
        let at_cap = elect_leaders(&led, &request(0, Some(&twice)), 2);
        assert_eq!(at_cap.response.error_code, 0);
        assert_eq!(at_cap.records.len(), 5_000);
        // One more election, even of a partition already named: refused whole.
        let over = [twice, vec![0, 9_999]].concat();
        let refused = elect_leaders(&led, &request(0, Some(&over)), 2);
        assert_eq!(refused.response.error_code, POLICY_VIOLATION);
        assert!(refused.records.is_empty());
        let results = &refused.response.replica_election_results[0].partition_result;
        assert_eq!(results.len(), 10_002);
        assert!(results.iter().all(|p| p.error_code == POLICY_VIOLATION
            && p.error_message.as_deref()
                == Some("Unable to perform excessively large batch operation.")));
        // Every partition of every topic (null): no per-partition answers, the error on top.
        let partitions: Vec<_> = (0..10_001)
            .map(|id| partition(id, &[1, 2], &[1, 2], 2))
            .collect();
        let all = elect_leaders(&image(&[], partitions), &request(0, None), 2);
        assert_eq!(all.response.error_code, POLICY_VIOLATION);
        assert!(all.response.replica_election_results.is_empty() && all.records.is_empty());
    }

    #[test]
    fn rebalance_moves_leadership_back_to_first_replicas_within_the_cap() {
        let image = image(
            &[4],
            vec![
                partition(0, &[1, 2, 3], &[1, 2, 3], 2),
                partition(1, &[2, 1], &[1, 2], 1),
                partition(2, &[3, 1], &[1], 1),
                partition(3, &[4, 1], &[4, 1], 1),
                partition(4, &[1, 2], &[1, 2], 1),
            ],
        );
        assert_eq!(
            balance_leaders(&image, 10),
            (vec![change(0, 1), change(1, 2)], false)
        );
        assert_eq!(balance_leaders(&image, 1), (vec![change(0, 1)], true));
    }

    #[test]
    fn leaderless_partitions_elect_cleanly_or_uncleanly_as_configured() {
        let base = image(
            &[4],
            vec![
                partition(0, &[4, 2], &[4, 2], NO_LEADER),
                partition(1, &[4, 3], &[4], NO_LEADER),
            ],
        );
        let policy = UncleanPolicy {
            node_id: 1,
            static_enabled: false,
        };
        assert_eq!(elect_leaderless(&base, &policy, 10), vec![change(0, 2)]);
        let unclean_partition_1 = MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 1,
            topic_id: TOPIC,
            isr: Some(vec![3]),
            leader: Some(3),
            leader_recovery_state: Some(RECOVERING),
            ..PartitionChangeRecord::default()
        });
        let statically = UncleanPolicy {
            node_id: 1,
            static_enabled: true,
        };
        assert_eq!(
            elect_leaderless(&base, &statically, 10),
            vec![change(0, 2), unclean_partition_1.clone()]
        );
        assert_eq!(elect_leaderless(&base, &statically, 1), vec![change(0, 2)]);
        // A topic config wins over the cluster default, which wins over the static value.
        let config = |resource_type, name: &str, value: &str| {
            MetadataRecord::Config(ConfigRecord {
                resource_type,
                resource_name: name.into(),
                name: "unclean.leader.election.enable".into(),
                value: Some(value.into()),
            })
        };
        let cluster_on = apply(base.clone(), &[config(4, "", "true")]);
        assert!(policy.enabled(&cluster_on, "t"));
        let topic_off = apply(cluster_on, &[config(2, "t", "false")]);
        assert!(!policy.enabled(&topic_off, "t"));
        assert!(!statically.enabled(&topic_off, "t"));
        let node_on = apply(base, &[config(4, "1", "true")]);
        assert!(policy.enabled(&node_on, "t"));
    }
}
