//! Partition reassignment on the controller (pure), after Kafka's `ReplicationControlManager`,
//! `PartitionReassignmentReplicas`, `PartitionReassignmentRevert` and the reassignment part of
//! `PartitionChangeBuilder` (KIP-455, KIP-860).
//!
//! ```text
//!  AlterPartitionReassignments {1,2,3} → {2,3,4}
//!    step 1: replicas [2,3,4,1], adding [4], removing [1]   (4 starts fetching)
//!    step 2: 4 catches up; the leader's AlterPartition puts it in the ISR
//!    step 3: that same change completes: replicas [2,3,4], ISR minus 1, adding/removing cleared,
//!            leadership moves off 1 (NEW_LEADER_ELECTED to 1), the leader epoch is bumped
//!  Cancelled before step 3: replicas [2,3,1] (the current ones without 4), ISR without 4
//! ```
//!
//! Adding and removing list ids in ascending order and the replicas during a move are the
//! target followed by the removing ones, as Kafka orders them: the first replica is the
//! preferred leader, so the order is behaviour, not presentation.

use gregor_publishers::image::partition::PartitionRegistration;
use gregor_publishers::records::{PartitionChangeRecord, NO_LEADER};
use gregor_publishers::MetadataImage;
use kafka_protocol::messages::alter_partition_reassignments_request::ReassignableTopic;
use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, BrokerId,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::election::{UncleanPolicy, RECOVERING};
use super::{ControllerResult, MetadataRecord, MAX_RECORDS_PER_USER_OP};

const UNKNOWN_SERVER_ERROR: i16 = -1;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_REPLICATION_FACTOR: i16 = 38;
const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;

/// Whether a reassignment of `partition` is in progress.
pub fn in_progress(partition: &PartitionRegistration) -> bool {
    !partition.adding_replicas().is_empty() || !partition.removing_replicas().is_empty()
}

/// What a partition change aims at; the builder turns it into the smallest record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeTarget {
    /// Replicas, in preference order.
    pub replicas: Vec<i32>,
    /// In-sync replicas.
    pub isr: Vec<i32>,
    /// Replicas being added by a reassignment.
    pub adding: Vec<i32>,
    /// Replicas being removed by a reassignment.
    pub removing: Vec<i32>,
    /// Whether the leader may come from outside the ISR.
    pub unclean: bool,
}

impl ChangeTarget {
    /// The partition as it is.
    pub fn of(partition: &PartitionRegistration) -> Self {
        ChangeTarget {
            replicas: partition.replicas.to_vec(),
            isr: partition.isr.to_vec(),
            adding: partition.adding_replicas().to_vec(),
            removing: partition.removing_replicas().to_vec(),
            unclean: false,
        }
    }

    /// Completes a reassignment in progress when the ISR allows it (Kafka's
    /// `maybeCompleteReassignment`): once the removing replicas leave, the ISR keeps a member
    /// and holds every replica left. Returns whether it completed.
    fn complete_if_ready(&mut self) -> bool {
        if self.adding.is_empty() && self.removing.is_empty() {
            return false;
        }
        let isr = without(&self.isr, &self.removing);
        let replicas = without(&self.replicas, &self.removing);
        if isr.is_empty() || replicas.is_empty() || !replicas.iter().all(|id| isr.contains(id)) {
            return false;
        }
        self.replicas = replicas;
        self.isr = isr;
        self.adding.clear();
        self.removing.clear();
        true
    }
}

/// `list` without the ids in `gone`, in its order.
fn without(list: &[i32], gone: &[i32]) -> Vec<i32> {
    list.iter()
        .copied()
        .filter(|id| !gone.contains(id))
        .collect()
}

/// A move's replica lists (Kafka's `PartitionReassignmentReplicas`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveReplicas {
    /// The target followed by the removing replicas.
    pub replicas: Vec<i32>,
    /// In the target, not among the current replicas; ascending.
    pub adding: Vec<i32>,
    /// Among the current replicas, not in the target; ascending.
    pub removing: Vec<i32>,
}

impl MoveReplicas {
    /// From the `current` replicas to `target` (Kafka's `calculateDifference`, a sorted set).
    pub fn between(current: &[i32], target: &[i32]) -> Self {
        let difference = |a: &[i32], b: &[i32]| {
            let mut ids = without(a, b);
            ids.sort_unstable();
            ids
        };
        let removing = difference(current, target);
        let replicas = target.iter().chain(&removing).copied().collect();
        MoveReplicas {
            replicas,
            adding: difference(target, current),
            removing,
        }
    }
}

/// Where cancelling a move takes a partition (Kafka's `PartitionReassignmentRevert`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Revert {
    /// The replicas without the adding ones, in their order (Kafka's `originalReplicas`).
    pub replicas: Vec<i32>,
    /// The ISR without the adding replicas; the first replica when only adding ones were in
    /// sync.
    pub isr: Vec<i32>,
    /// Whether that ISR was forced, an unclean election the topic must allow.
    pub unclean: bool,
}

impl Revert {
    /// The revert of a partition with these `replicas`, `isr` and `adding` replicas.
    pub fn of(replicas: &[i32], isr: &[i32], adding: &[i32]) -> Self {
        let replicas = without(replicas, adding);
        let mut isr = without(isr, adding);
        let unclean = isr.is_empty();
        if unclean {
            // A move keeps every replica it started from, so there is a first one.
            isr.extend(replicas.first());
        }
        Revert {
            replicas,
            isr,
            unclean,
        }
    }
}

fn acceptable(image: &MetadataImage, id: i32) -> bool {
    image
        .cluster
        .broker(id)
        .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
}

/// The record taking `partition` to `target` (reassignment completed first when it can be),
/// with the leader the change leaves; `None` when nothing changes. The current leader stays
/// while it is a valid leader of the target (in its ISR, acceptable), even one being removed;
/// otherwise the first valid replica in target order leads, else (unclean) the first
/// acceptable replica with an ISR of itself (Kafka's `electAnyLeader`). A replica set that
/// loses members bumps the leader epoch, so removed followers stop (Kafka's
/// `triggerLeaderEpochBumpForReplicaReassignmentIfNeeded`).
pub fn build_change(
    image: &MetadataImage,
    topic_id: Uuid,
    partition_id: i32,
    partition: &PartitionRegistration,
    mut target: ChangeTarget,
) -> (Option<PartitionChangeRecord>, i32) {
    target.complete_if_ready();
    let valid = |id: i32| {
        target.isr.contains(&id) && target.replicas.contains(&id) && acceptable(image, id)
    };
    let mut recovering = false;
    let leader = if partition.leader != NO_LEADER && valid(partition.leader) {
        partition.leader
    } else if let Some(id) = target.replicas.iter().copied().find(|id| valid(*id)) {
        id
    } else if let Some(id) = target
        .unclean
        .then(|| {
            target
                .replicas
                .iter()
                .copied()
                .find(|id| acceptable(image, *id))
        })
        .flatten()
    {
        // Kafka's `tryElection` rewrites the ISR only for a leader that changes, and marks
        // RECOVERING only what is not already.
        if id != partition.leader {
            target.isr = vec![id];
            recovering = partition.leader_recovery_state != RECOVERING;
        }
        id
    } else {
        NO_LEADER
    };
    let shrinks = !partition
        .replicas
        .iter()
        .all(|id| target.replicas.contains(id));
    let set =
        |current: &[i32], wanted: &Vec<i32>| (current != wanted.as_slice()).then(|| wanted.clone());
    let record = PartitionChangeRecord {
        partition_id,
        topic_id,
        isr: set(&partition.isr, &target.isr),
        leader: (leader != partition.leader || shrinks).then_some(leader),
        replicas: set(&partition.replicas, &target.replicas),
        removing_replicas: set(partition.removing_replicas(), &target.removing),
        adding_replicas: set(partition.adding_replicas(), &target.adding),
        leader_recovery_state: recovering.then_some(RECOVERING),
        directories: None,
    };
    let changes = record.isr.is_some()
        || record.leader.is_some()
        || record.replicas.is_some()
        || record.removing_replicas.is_some()
        || record.adding_replicas.is_some()
        || record.leader_recovery_state.is_some();
    (changes.then_some(record), leader)
}

/// Kafka's `validateManualPartitionAssignment` without a replication factor: the first
/// problem, brokers checked in id order.
fn validate_target(image: &MetadataImage, target: &[i32]) -> Result<(), ReassignmentOutcome> {
    if target.is_empty() {
        return Err(ReassignmentOutcome::EmptyTarget);
    }
    let mut sorted = target.to_vec();
    sorted.sort_unstable();
    let mut previous = None;
    for id in sorted {
        if image.cluster.broker(id).is_none() {
            return Err(ReassignmentOutcome::UnknownBroker(id));
        }
        if previous == Some(id) {
            return Err(ReassignmentOutcome::RepeatedBroker(id));
        }
        previous = Some(id);
    }
    Ok(())
}

/// How one requested partition's reassignment ended. Its message is made when the answer is
/// written ([`ReassignmentOutcome::answer`]) from the topic, the partition and the replicas
/// asked for, with what the outcome keeps of the image (a broker id, the replication factor),
/// kept compactly ([`ReassignmentOutcomes`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReassignmentOutcome {
    /// Started, cancelled, or nothing to change.
    Altered,
    /// Its record would pass one batch: UNKNOWN_SERVER_ERROR without a message.
    PastBatch,
    NoSuchTopic,
    NoSuchPartition,
    EmptyTarget,
    UnknownBroker(i32),
    RepeatedBroker(i32),
    /// The replication factor (before the reassignment) would change.
    ReplicationFactorChanged {
        from: i32,
    },
    NotInProgress,
    RevertNeedsUncleanElection,
}

impl ReassignmentOutcome {
    /// Kafka's error code (0: altered).
    pub fn code(self) -> i16 {
        match self {
            ReassignmentOutcome::Altered => 0,
            ReassignmentOutcome::PastBatch => UNKNOWN_SERVER_ERROR,
            ReassignmentOutcome::NoSuchTopic | ReassignmentOutcome::NoSuchPartition => {
                UNKNOWN_TOPIC_OR_PARTITION
            }
            ReassignmentOutcome::EmptyTarget
            | ReassignmentOutcome::UnknownBroker(_)
            | ReassignmentOutcome::RepeatedBroker(_)
            | ReassignmentOutcome::RevertNeedsUncleanElection => INVALID_REPLICA_ASSIGNMENT,
            ReassignmentOutcome::ReplicationFactorChanged { .. } => INVALID_REPLICATION_FACTOR,
            ReassignmentOutcome::NotInProgress => NO_REASSIGNMENT_IN_PROGRESS,
        }
    }

    /// Kafka's code and message for partition `partition` of `topic`, asked to move to
    /// `wanted` replicas.
    pub fn answer(self, topic: &str, partition: i32, wanted: usize) -> (i16, Option<String>) {
        let message = match self {
            ReassignmentOutcome::Altered | ReassignmentOutcome::PastBatch => None,
            ReassignmentOutcome::NoSuchTopic => {
                Some(format!("Unable to find a topic named {topic}."))
            }
            ReassignmentOutcome::NoSuchPartition => {
                Some(format!("Unable to find partition {topic}:{partition}."))
            }
            ReassignmentOutcome::EmptyTarget => Some(
                "The manual partition assignment includes an empty replica list.".to_owned(),
            ),
            ReassignmentOutcome::UnknownBroker(id) => Some(format!(
                "The manual partition assignment includes broker {id}, but no such broker is registered."
            )),
            ReassignmentOutcome::RepeatedBroker(id) => Some(format!(
                "The manual partition assignment includes the broker {id} more than once."
            )),
            ReassignmentOutcome::ReplicationFactorChanged { from } => Some(format!(
                "The replication factor is changed from {from} to {wanted} but allowReplicationFactorChange is false"
            )),
            // Kafka's ApiError.fromThrowable drops a message equal to the error's own.
            ReassignmentOutcome::NotInProgress => None,
            ReassignmentOutcome::RevertNeedsUncleanElection => Some(format!(
                "Unable to revert partition assignment for {topic}:{partition} because it would require an unclean leader election."
            )),
        };
        (self.code(), message)
    }
}

/// One partition's outcome: the record (if anything changes), or why it is refused.
type Outcome = Result<Option<PartitionChangeRecord>, ReassignmentOutcome>;

fn alter_one(
    image: &MetadataImage,
    topic: &str,
    partition_id: i32,
    wanted: Option<&[i32]>,
    allow_replication_factor_change: bool,
    policy: &UncleanPolicy,
) -> Outcome {
    let current = image
        .topics
        .get_by_name(topic)
        .ok_or(ReassignmentOutcome::NoSuchTopic)?;
    let partition = current
        .partition(partition_id)
        .ok_or(ReassignmentOutcome::NoSuchPartition)?;
    let Some(wanted) = wanted else {
        return cancel(image, topic, current.id, partition_id, partition, policy);
    };
    validate_target(image, wanted)?;
    let original = partition.replicas.len() - partition.adding_replicas().len();
    if !allow_replication_factor_change && wanted.len() != original {
        return Err(ReassignmentOutcome::ReplicationFactorChanged {
            from: i32::try_from(original).unwrap_or(i32::MAX),
        });
    }
    let moving = MoveReplicas::between(&partition.replicas, wanted);
    // As Kafka's `changePartitionReassignment`: empty lists leave those of a move in progress.
    let mut target = ChangeTarget::of(partition);
    target.replicas = moving.replicas;
    if !moving.removing.is_empty() {
        target.removing = moving.removing;
    }
    if !moving.adding.is_empty() {
        target.adding = moving.adding;
    }
    Ok(build_change(image, current.id, partition_id, partition, target).0)
}

/// Kafka's `cancelPartitionReassignment`: back to the [`Revert`], refused when it needs an
/// unclean election the topic does not allow; elections may be unclean where it does.
fn cancel(
    image: &MetadataImage,
    topic: &str,
    topic_id: Uuid,
    partition_id: i32,
    partition: &PartitionRegistration,
    policy: &UncleanPolicy,
) -> Outcome {
    if !in_progress(partition) {
        return Err(ReassignmentOutcome::NotInProgress);
    }
    let revert = Revert::of(
        &partition.replicas,
        &partition.isr,
        partition.adding_replicas(),
    );
    let unclean = policy.enabled(image, topic);
    if revert.unclean && !unclean {
        return Err(ReassignmentOutcome::RevertNeedsUncleanElection);
    }
    let target = ChangeTarget {
        replicas: revert.replicas,
        isr: revert.isr,
        adding: Vec::new(),
        removing: Vec::new(),
        unclean,
    };
    Ok(build_change(image, topic_id, partition_id, partition, target).0)
}

/// One named partition: its topic, index and the replicas wanted (`None`: cancel).
#[derive(Clone, Copy, Debug)]
pub struct Wanted<'a> {
    pub topic: &'a str,
    pub partition: i32,
    pub replicas: Option<&'a [i32]>,
}

/// The partitions an AlterPartitionReassignments request names with the replicas it wants
/// (`None`: cancel), read one at a time from where they are kept (a decoded request, or its
/// frame: issue #11).
pub trait RequestedReassignments: Send + Sync {
    /// How many partitions it names.
    fn count(&self) -> usize;

    /// Calls `visit` with each named topic, partition and wanted replicas in request order;
    /// stops early when `visit` returns false.
    fn each(&self, visit: &mut dyn FnMut(Wanted<'_>) -> bool) -> Result<(), String>;
}

impl RequestedReassignments for Vec<ReassignableTopic> {
    fn count(&self) -> usize {
        self.iter().map(|topic| topic.partitions.len()).sum()
    }

    fn each(&self, visit: &mut dyn FnMut(Wanted<'_>) -> bool) -> Result<(), String> {
        let mut replica_ids = Vec::new();
        for topic in self {
            for partition in &topic.partitions {
                let replicas = partition.replicas.as_ref().map(|ids| {
                    replica_ids.clear();
                    replica_ids.extend(ids.iter().map(|id| id.0));
                    replica_ids.as_slice()
                });
                let wanted = Wanted {
                    topic: &topic.name,
                    partition: partition.partition_index,
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

/// The outcomes of a request's partitions in request order, a byte each: the few that name a
/// broker or a replication factor keep it beside, by index.
#[derive(Debug, Default, PartialEq)]
pub struct ReassignmentOutcomes {
    kinds: Vec<OutcomeKind>,
    /// (index, broker id or replication factor), by index.
    values: Vec<(u32, i32)>,
}

/// A [`ReassignmentOutcome`] without its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutcomeKind {
    Altered,
    PastBatch,
    NoSuchTopic,
    NoSuchPartition,
    EmptyTarget,
    UnknownBroker,
    RepeatedBroker,
    ReplicationFactorChanged,
    NotInProgress,
    RevertNeedsUncleanElection,
}

impl ReassignmentOutcomes {
    fn with_capacity(partitions: usize) -> Self {
        ReassignmentOutcomes {
            kinds: Vec::with_capacity(partitions),
            values: Vec::new(),
        }
    }

    fn push(&mut self, outcome: ReassignmentOutcome) {
        use ReassignmentOutcome as O;
        let index = u32::try_from(self.kinds.len()).unwrap_or(u32::MAX);
        let (kind, value) = match outcome {
            O::Altered => (OutcomeKind::Altered, None),
            O::PastBatch => (OutcomeKind::PastBatch, None),
            O::NoSuchTopic => (OutcomeKind::NoSuchTopic, None),
            O::NoSuchPartition => (OutcomeKind::NoSuchPartition, None),
            O::EmptyTarget => (OutcomeKind::EmptyTarget, None),
            O::UnknownBroker(id) => (OutcomeKind::UnknownBroker, Some(id)),
            O::RepeatedBroker(id) => (OutcomeKind::RepeatedBroker, Some(id)),
            O::ReplicationFactorChanged { from } => {
                (OutcomeKind::ReplicationFactorChanged, Some(from))
            }
            O::NotInProgress => (OutcomeKind::NotInProgress, None),
            O::RevertNeedsUncleanElection => (OutcomeKind::RevertNeedsUncleanElection, None),
        };
        self.kinds.push(kind);
        self.values.extend(value.map(|value| (index, value)));
    }

    /// How many partitions they answer.
    pub fn len(&self) -> usize {
        self.kinds.len()
    }

    /// Whether they answer none.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty()
    }

    /// The outcome of the partition at `index`.
    pub fn get(&self, index: usize) -> Option<ReassignmentOutcome> {
        use ReassignmentOutcome as O;
        let value = || {
            let at = u32::try_from(index).ok()?;
            let found = self.values.binary_search_by_key(&at, |(i, _)| *i).ok()?;
            Some(self.values[found].1)
        };
        Some(match self.kinds.get(index)? {
            OutcomeKind::Altered => O::Altered,
            OutcomeKind::PastBatch => O::PastBatch,
            OutcomeKind::NoSuchTopic => O::NoSuchTopic,
            OutcomeKind::NoSuchPartition => O::NoSuchPartition,
            OutcomeKind::EmptyTarget => O::EmptyTarget,
            OutcomeKind::UnknownBroker => O::UnknownBroker(value()?),
            OutcomeKind::RepeatedBroker => O::RepeatedBroker(value()?),
            OutcomeKind::ReplicationFactorChanged => O::ReplicationFactorChanged { from: value()? },
            OutcomeKind::NotInProgress => O::NotInProgress,
            OutcomeKind::RevertNeedsUncleanElection => O::RevertNeedsUncleanElection,
        })
    }

    /// The outcomes in request order.
    pub fn iter(&self) -> impl Iterator<Item = ReassignmentOutcome> + '_ {
        (0..self.len()).filter_map(|index| self.get(index))
    }
}

/// The answer to AlterPartitionReassignments: each named partition's outcome in request
/// order and whether the replication factor could change, or the refusal of the whole request
/// (its code and message at the top and on every named partition).
#[derive(Debug, Default, PartialEq)]
pub struct ListedReassignments {
    pub outcomes: ReassignmentOutcomes,
    pub allow_replication_factor_change: bool,
    pub refused: Option<(i16, String)>,
}

impl ListedReassignments {
    /// A request refused whole.
    pub fn refused(code: i16, message: &str) -> Self {
        ListedReassignments {
            refused: Some((code, message.to_owned())),
            ..Default::default()
        }
    }
}

/// Decides AlterPartitionReassignments at `version` for the partitions `partitions` names:
/// one outcome per named partition in request order; every record of the request is written
/// atomically. Every partition is decided on the image before this request, as Kafka's
/// controller decides them (a partition named twice gets two records, the second applied
/// last). A partition whose record would be past [`MAX_RECORDS_PER_USER_OP`] fails
/// UNKNOWN_SERVER_ERROR without a message and the others are decided on, as Kafka's controller
/// answers the `BoundedList` overflow it catches per partition.
pub fn alter_listed_reassignments(
    image: &MetadataImage,
    partitions: &dyn RequestedReassignments,
    allow_replication_factor_change: bool,
    version: i16,
    policy: &UncleanPolicy,
) -> ControllerResult<ListedReassignments> {
    let allow_rf_change = version < 1 || allow_replication_factor_change;
    let mut records = Vec::new();
    // Sized once: a doubling vector's earlier copies stay resident in the allocator.
    let mut outcomes = ReassignmentOutcomes::with_capacity(partitions.count());
    let walked = partitions.each(&mut |wanted| {
        let outcome = alter_one(
            image,
            wanted.topic,
            wanted.partition,
            wanted.replicas,
            allow_rf_change,
            policy,
        );
        outcomes.push(match outcome {
            Ok(Some(_)) if records.len() == MAX_RECORDS_PER_USER_OP => {
                ReassignmentOutcome::PastBatch
            }
            Ok(record) => {
                records.extend(record.map(MetadataRecord::PartitionChange));
                ReassignmentOutcome::Altered
            }
            Err(refused) => refused,
        });
        true
    });
    if let Err(error) = walked {
        tracing::error!(%error, "an AlterPartitionReassignments request could not be read again");
        return ControllerResult {
            records: Vec::new(),
            response: ListedReassignments::refused(UNKNOWN_SERVER_ERROR, &error),
        };
    }
    ControllerResult {
        records,
        response: ListedReassignments {
            outcomes,
            allow_replication_factor_change: allow_rf_change,
            refused: None,
        },
    }
}

/// Decides a decoded AlterPartitionReassignments request at `version` as
/// [`alter_listed_reassignments`] does.
pub fn alter_partition_reassignments(
    image: &MetadataImage,
    request: &AlterPartitionReassignmentsRequest,
    version: i16,
    policy: &UncleanPolicy,
) -> ControllerResult<AlterPartitionReassignmentsResponse> {
    let ControllerResult { records, response } = alter_listed_reassignments(
        image,
        &request.topics,
        request.allow_replication_factor_change,
        version,
        policy,
    );
    let mut outcomes = response.outcomes.iter();
    let responses = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|wanted| {
                    let replicas = wanted.replicas.as_ref().map_or(0, Vec::len);
                    let (code, message) = match &response.refused {
                        Some((code, message)) => (*code, Some(message.clone())),
                        None => outcomes.next().map_or(
                            (
                                UNKNOWN_SERVER_ERROR,
                                Some("the partition has no outcome".to_owned()),
                            ),
                            |outcome| outcome.answer(&topic.name, wanted.partition_index, replicas),
                        ),
                    };
                    ReassignablePartitionResponse::default()
                        .with_partition_index(wanted.partition_index)
                        .with_error_code(code)
                        .with_error_message(message.map(StrBytes::from_string))
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    ControllerResult {
        records,
        // Kafka sets the message null (the schema's default is the empty string).
        response: AlterPartitionReassignmentsResponse::default()
            .with_error_message(None)
            .with_allow_replication_factor_change(response.allow_replication_factor_change)
            .with_responses(responses),
    }
}

/// Decides ListPartitionReassignments: the partitions with a reassignment in progress (all, or
/// among those named); unknown topics and idle partitions are left out, as are topics with
/// nothing in progress.
pub fn list_partition_reassignments(
    image: &MetadataImage,
    request: &ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let ongoing = |partition_id: i32, partition: &PartitionRegistration| {
        in_progress(partition).then(|| {
            let ids = |list: &[i32]| list.iter().copied().map(BrokerId).collect::<Vec<_>>();
            OngoingPartitionReassignment::default()
                .with_partition_index(partition_id)
                .with_replicas(ids(&partition.replicas))
                .with_adding_replicas(ids(partition.adding_replicas()))
                .with_removing_replicas(ids(partition.removing_replicas()))
        })
    };
    let mut topics = Vec::new();
    match &request.topics {
        None => {
            for topic in image.topics.iter() {
                let partitions: Vec<_> = topic
                    .partitions()
                    .filter_map(|(id, partition)| ongoing(id, partition))
                    .collect();
                if !partitions.is_empty() {
                    topics.push(
                        OngoingTopicReassignment::default()
                            .with_name(TopicName(StrBytes::from_string(topic.name.to_string())))
                            .with_partitions(partitions),
                    );
                }
            }
        }
        Some(wanted) => {
            for entry in wanted {
                let Some(topic) = image.topics.get_by_name(&entry.name) else {
                    continue;
                };
                let partitions: Vec<_> = entry
                    .partition_indexes
                    .iter()
                    .filter_map(|id| topic.partition(*id).and_then(|p| ongoing(*id, p)))
                    .collect();
                if !partitions.is_empty() {
                    topics.push(
                        OngoingTopicReassignment::default()
                            .with_name(entry.name.clone())
                            .with_partitions(partitions),
                    );
                }
            }
        }
    }
    // Kafka sets the message null (the schema's default is the empty string).
    ListPartitionReassignmentsResponse::default()
        .with_error_message(None)
        .with_topics(topics)
}

#[cfg(test)]
#[allow(clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use gregor_publishers::records::{
        FenceBrokerRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord,
    };
    use gregor_publishers::MetadataDelta;
    use kafka_protocol::messages::alter_partition_reassignments_request::{
        ReassignablePartition, ReassignableTopic,
    };
    use std::sync::Arc;

    const TOPIC: Uuid = Uuid::from_u128(7);

    fn image(partition: PartitionRecord) -> MetadataImage {
        let mut records: Vec<MetadataRecord> = (1..=5)
            .map(|id| {
                MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                    broker_id: id,
                    incarnation_id: Uuid::from_u128(id as u128),
                    broker_epoch: 10 + i64::from(id),
                    endpoints: Vec::new(),
                    features: Vec::new(),
                    rack: None,
                    fenced: false,
                    in_controlled_shutdown: false,
                    log_dirs: Vec::new(),
                })
            })
            .collect();
        records.push(MetadataRecord::Topic(TopicRecord {
            name: "t".into(),
            topic_id: TOPIC,
        }));
        records.push(MetadataRecord::Partition(partition));
        apply_all(MetadataImage::empty(), &records)
    }

    fn apply_all(image: MetadataImage, records: &[MetadataRecord]) -> MetadataImage {
        let base = Arc::new(image);
        let mut delta = MetadataDelta::new(base.clone());
        for record in records {
            delta.replay(record).expect("replays");
        }
        delta.apply(base.provenance)
    }

    fn partition(replicas: &[i32], isr: &[i32], leader: i32) -> PartitionRecord {
        PartitionRecord {
            partition_id: 0,
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
        }
    }

    fn request(replicas: Option<&[i32]>) -> AlterPartitionReassignmentsRequest {
        AlterPartitionReassignmentsRequest::default().with_topics(vec![ReassignableTopic::default(
        )
        .with_name(TopicName(StrBytes::from_static_str("t")))
        .with_partitions(vec![ReassignablePartition::default()
            .with_partition_index(0)
            .with_replicas(
                replicas.map(|ids| ids.iter().copied().map(BrokerId).collect()),
            )])])
    }

    fn code(response: &AlterPartitionReassignmentsResponse) -> (i16, Option<String>) {
        let p = &response.responses[0].partitions[0];
        (
            p.error_code,
            p.error_message.as_ref().map(|m| m.to_string()),
        )
    }

    #[test]
    fn partitions_past_ten_thousand_records_fail_alone() {
        let before = image(partition(&[1, 2, 3], &[1, 2, 3], 1));
        let mut request = request(Some(&[2, 3, 4]));
        let moved = request.topics[0].partitions[0].clone();
        let cancelled = moved.clone().with_replicas(None);
        // 10,001 moves of partition 0 (each a record, decided on the image before the
        // request), then a cancellation with nothing in progress.
        request.topics[0].partitions = vec![moved; MAX_RECORDS_PER_USER_OP + 1];
        request.topics[0].partitions.push(cancelled);
        let result = alter_partition_reassignments(&before, &request, 1, &POLICY);
        assert_eq!(result.records.len(), MAX_RECORDS_PER_USER_OP);
        let answers: Vec<_> = result.response.responses[0]
            .partitions
            .iter()
            .map(|p| (p.error_code, p.error_message.is_some()))
            .collect();
        assert!(answers[..MAX_RECORDS_PER_USER_OP]
            .iter()
            .all(|a| *a == (0, false)));
        assert_eq!(
            answers[MAX_RECORDS_PER_USER_OP..],
            [
                (UNKNOWN_SERVER_ERROR, false),
                (NO_REASSIGNMENT_IN_PROGRESS, false)
            ]
        );
    }

    const POLICY: UncleanPolicy = UncleanPolicy {
        node_id: 1,
        static_enabled: false,
    };

    #[test]
    fn a_move_adds_then_completes_once_the_new_replica_is_in_sync() {
        let before = image(partition(&[1, 2, 3], &[1, 2, 3], 1));
        let step1 = alter_partition_reassignments(&before, &request(Some(&[2, 3, 4])), 1, &POLICY);
        assert_eq!(code(&step1.response), (0, None));
        assert_eq!(
            step1.records,
            vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id: 0,
                topic_id: TOPIC,
                replicas: Some(vec![2, 3, 4, 1]),
                removing_replicas: Some(vec![1]),
                adding_replicas: Some(vec![4]),
                ..PartitionChangeRecord::default()
            })]
        );
        let moving = apply_all(before, &step1.records);
        let registration = moving
            .topics
            .get_by_name("t")
            .and_then(|t| t.partition(0).cloned())
            .expect("partition");
        assert!(in_progress(&registration));
        let listed =
            list_partition_reassignments(&moving, &ListPartitionReassignmentsRequest::default());
        let ongoing = &listed.topics[0].partitions[0];
        assert_eq!(ongoing.replicas, [2, 3, 4, 1].map(BrokerId).to_vec());
        assert_eq!(ongoing.adding_replicas, vec![BrokerId(4)]);
        assert_eq!(ongoing.removing_replicas, vec![BrokerId(1)]);

        // Broker 4 joins the ISR: the change completes the move and leadership leaves 1.
        let mut target = ChangeTarget::of(&registration);
        target.isr = vec![1, 2, 3, 4];
        let (record, leader) = build_change(&moving, TOPIC, 0, &registration, target);
        assert_eq!(leader, 2);
        assert_eq!(
            record,
            Some(PartitionChangeRecord {
                partition_id: 0,
                topic_id: TOPIC,
                isr: Some(vec![2, 3, 4]),
                leader: Some(2),
                replicas: Some(vec![2, 3, 4]),
                removing_replicas: Some(vec![]),
                adding_replicas: Some(vec![]),
                ..PartitionChangeRecord::default()
            })
        );
        // Not yet in the ISR: nothing completes.
        let (record, leader) = build_change(
            &moving,
            TOPIC,
            0,
            &registration,
            ChangeTarget::of(&registration),
        );
        assert_eq!((record, leader), (None, 1));
    }

    #[test]
    fn a_pure_reorder_or_removal_completes_at_once_and_bumps_the_epoch() {
        let before = image(partition(&[1, 2, 3], &[1, 2, 3], 1));
        let reorder =
            alter_partition_reassignments(&before, &request(Some(&[3, 2, 1])), 0, &POLICY);
        assert_eq!(
            reorder.records,
            vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id: 0,
                topic_id: TOPIC,
                replicas: Some(vec![3, 2, 1]),
                ..PartitionChangeRecord::default()
            })]
        );
        let shrink = alter_partition_reassignments(&before, &request(Some(&[1, 2])), 1, &POLICY);
        assert_eq!(
            shrink.records,
            vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id: 0,
                topic_id: TOPIC,
                isr: Some(vec![1, 2]),
                leader: Some(1),
                replicas: Some(vec![1, 2]),
                ..PartitionChangeRecord::default()
            })]
        );
        let refused = alter_partition_reassignments(&before, &request(Some(&[1, 2])), 1, &POLICY);
        assert_eq!(code(&refused.response).0, 0);
        let mut no_rf_change = request(Some(&[1, 2]));
        no_rf_change.allow_replication_factor_change = false;
        let refused = alter_partition_reassignments(&before, &no_rf_change, 1, &POLICY);
        assert_eq!(code(&refused.response).0, INVALID_REPLICATION_FACTOR);
        assert!(refused.records.is_empty());
    }

    #[test]
    fn invalid_targets_and_cancellation_get_kafkas_answers() {
        let before = image(partition(&[1, 2, 3], &[1, 2, 3], 1));
        for (target, message) in [
            (&[][..], "The manual partition assignment includes an empty replica list."),
            (&[1, 9], "The manual partition assignment includes broker 9, but no such broker is registered."),
            (&[2, 2, 1], "The manual partition assignment includes the broker 2 more than once."),
        ] {
            let result = alter_partition_reassignments(&before, &request(Some(target)), 1, &POLICY);
            assert_eq!(
                code(&result.response),
                (INVALID_REPLICA_ASSIGNMENT, Some(message.to_owned()))
            );
        }
        assert_eq!(
            code(&alter_partition_reassignments(&before, &request(None), 1, &POLICY).response),
            (NO_REASSIGNMENT_IN_PROGRESS, None)
        );
        let mut unknown = request(None);
        unknown.topics[0].partitions[0].partition_index = 5;
        assert_eq!(
            code(&alter_partition_reassignments(&before, &unknown, 1, &POLICY).response),
            (
                UNKNOWN_TOPIC_OR_PARTITION,
                Some("Unable to find partition t:5.".to_owned())
            )
        );

        // Cancelling {1,2,3} → {2,3,4} while 4 is still catching up reverts to {1,2,3}.
        let step1 = alter_partition_reassignments(&before, &request(Some(&[2, 3, 4])), 1, &POLICY);
        let moving = apply_all(before, &step1.records);
        let cancel = alter_partition_reassignments(&moving, &request(None), 1, &POLICY);
        assert_eq!(code(&cancel.response), (0, None));
        assert_eq!(
            cancel.records,
            vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id: 0,
                topic_id: TOPIC,
                leader: Some(1),
                replicas: Some(vec![2, 3, 1]),
                removing_replicas: Some(vec![]),
                adding_replicas: Some(vec![]),
                ..PartitionChangeRecord::default()
            })]
        );
        let reverted = apply_all(moving, &cancel.records);
        let listed =
            list_partition_reassignments(&reverted, &ListPartitionReassignmentsRequest::default());
        assert!(listed.topics.is_empty());
    }

    fn lists(m: &MoveReplicas) -> (&[i32], &[i32], &[i32]) {
        (&m.removing, &m.adding, &m.replicas)
    }

    #[test]
    fn move_lists_are_kafkas_partition_reassignment_replicas() {
        // Kafka's PartitionReassignmentReplicasTest: (removing, adding, replicas).
        let none: &[i32] = &[];
        let between = MoveReplicas::between;
        let unchanged = between(&[3, 2, 1], &[3, 2, 1]);
        assert_eq!(lists(&unchanged), (none, none, &[3, 2, 1][..]));
        let additions = between(&[3, 2, 1], &[3, 6, 2, 1, 5]);
        assert_eq!(lists(&additions), (none, &[5, 6][..], &[3, 6, 2, 1, 5][..]));
        let removals = between(&[3, 2, 1, 0], &[3, 1]);
        assert_eq!(lists(&removals), (&[0, 2][..], none, &[3, 1, 0, 2][..]));
        let both = between(&[3, 2, 1, 0], &[7, 3, 1, 9]);
        assert_eq!(
            lists(&both),
            (&[0, 2][..], &[7, 9][..], &[7, 3, 1, 9, 0, 2][..])
        );
        let rearranged = between(&[3, 2, 1, 0], &[0, 1, 3, 2]);
        assert_eq!(lists(&rearranged), (none, none, &[0, 1, 3, 2][..]));
    }

    /// A change to `isr` of a partition moving from `current` to `target`, completed if it can.
    fn completed(current: &[i32], target: &[i32], isr: &[i32]) -> Option<(Vec<i32>, Vec<i32>)> {
        let moving = MoveReplicas::between(current, target);
        let mut change = ChangeTarget {
            replicas: moving.replicas,
            isr: isr.to_vec(),
            adding: moving.adding,
            removing: moving.removing,
            unclean: false,
        };
        change
            .complete_if_ready()
            .then_some((change.replicas, change.isr))
    }

    #[test]
    fn a_move_completes_once_every_target_replica_is_in_sync() {
        // Kafka's PartitionReassignmentReplicasTest: (replicas, ISR) once complete.
        assert_eq!(completed(&[0, 1, 2], &[3, 4, 5], &[0, 1, 2, 3, 4]), None);
        assert_eq!(completed(&[0, 1, 2], &[0, 1, 2], &[0, 1, 2]), None);
        assert_eq!(
            completed(&[0, 1, 2], &[3, 4, 5], &[0, 1, 2, 3, 4, 5]),
            Some((vec![3, 4, 5], vec![3, 4, 5]))
        );
        assert_eq!(
            completed(&[0, 1, 2], &[0, 1, 3], &[0, 1, 2, 3]),
            Some((vec![0, 1, 3], vec![0, 1, 3]))
        );
        assert_eq!(completed(&[0, 1, 2], &[0, 1, 3], &[3]), None);
        // A replica kept from before counts too: 1 out of sync holds the move open.
        assert_eq!(completed(&[0, 1, 2], &[0, 1, 3], &[0, 2, 3]), None);
    }

    #[test]
    fn a_cancel_reverts_as_kafkas_partition_reassignment_revert() {
        // Kafka's PartitionReassignmentRevertTest (its removing lists change nothing).
        let revert = |replicas: &[i32], isr: &[i32], adding: &[i32]| {
            let r = Revert::of(replicas, isr, adding);
            (r.replicas, r.isr, r.unclean)
        };
        assert_eq!(
            revert(&[3, 2, 1], &[3, 2], &[]),
            (vec![3, 2, 1], vec![3, 2], false)
        );
        assert_eq!(
            revert(&[4, 5, 3, 2, 1], &[4, 5, 2], &[4, 5]),
            (vec![3, 2, 1], vec![2], false)
        );
        assert_eq!(
            revert(&[4, 5, 3, 2, 1], &[4, 5], &[4, 5]),
            (vec![3, 2, 1], vec![3], true)
        );
        // testOriginalReplicas: {0,1,2} → {0,1,3} reverts to [0,1,2].
        let moving = MoveReplicas::between(&[0, 1, 2], &[0, 1, 3]);
        assert_eq!(
            Revert::of(&moving.replicas, &[0, 1, 2], &moving.adding).replicas,
            vec![0, 1, 2]
        );
    }

    fn topic_partition(image: &MetadataImage) -> PartitionRegistration {
        image
            .topics
            .get_by_name("t")
            .and_then(|t| t.partition(0).cloned())
            .expect("partition")
    }

    /// The one record of a request: `change` to partition 0 of `t`.
    fn one_change(change: PartitionChangeRecord) -> Vec<MetadataRecord> {
        vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id: 0,
            topic_id: TOPIC,
            ..change
        })]
    }

    /// The record of a cancel back to `replicas`, with the ISR, leader (its epoch bumped) and
    /// leader recovery state it writes.
    fn cancelled(
        replicas: &[i32],
        isr: Option<Vec<i32>>,
        leader: i32,
        leader_recovery_state: Option<i8>,
    ) -> Vec<MetadataRecord> {
        one_change(PartitionChangeRecord {
            isr,
            leader: Some(leader),
            replicas: Some(replicas.to_vec()),
            removing_replicas: Some(vec![]),
            adding_replicas: Some(vec![]),
            leader_recovery_state,
            ..PartitionChangeRecord::default()
        })
    }

    #[test]
    fn a_move_lists_kafkas_order_and_a_cancel_restores_the_current_order() {
        // [1] → [1,3,2]: adding ascending, the replicas as asked.
        let single = image(partition(&[1], &[1], 1));
        let grown = alter_partition_reassignments(&single, &request(Some(&[1, 3, 2])), 1, &POLICY);
        assert_eq!(
            grown.records,
            one_change(PartitionChangeRecord {
                replicas: Some(vec![1, 3, 2]),
                adding_replicas: Some(vec![2, 3]),
                ..PartitionChangeRecord::default()
            })
        );

        // [2,1] led by 2 → [3]: the target, then the removing ones ascending; 2 still leads.
        let before = image(partition(&[2, 1], &[2, 1], 2));
        let step1 = alter_partition_reassignments(&before, &request(Some(&[3])), 1, &POLICY);
        assert_eq!(
            step1.records,
            one_change(PartitionChangeRecord {
                replicas: Some(vec![3, 1, 2]),
                removing_replicas: Some(vec![1, 2]),
                adding_replicas: Some(vec![3]),
                ..PartitionChangeRecord::default()
            })
        );
        let moving = apply_all(before, &step1.records);
        let listed =
            list_partition_reassignments(&moving, &ListPartitionReassignmentsRequest::default());
        let ongoing = &listed.topics[0].partitions[0];
        assert_eq!(ongoing.replicas, [3, 1, 2].map(BrokerId).to_vec());
        assert_eq!(ongoing.adding_replicas, vec![BrokerId(3)]);
        assert_eq!(ongoing.removing_replicas, [1, 2].map(BrokerId).to_vec());

        // Cancelled: [1,2] (1 now preferred), 2 still leading with a new epoch, ISR as it was.
        let cancel = alter_partition_reassignments(&moving, &request(None), 1, &POLICY);
        assert_eq!(cancel.records, cancelled(&[1, 2], None, 2, None));
    }

    #[test]
    fn a_removed_leader_leads_until_the_move_completes_then_the_first_target_replica_leads() {
        let before = image(partition(&[3, 2, 1], &[3, 2, 1], 3));
        let step1 = alter_partition_reassignments(&before, &request(Some(&[4, 1])), 1, &POLICY);
        let moving = apply_all(before, &step1.records);
        let registration = topic_partition(&moving);
        assert_eq!(
            (registration.replicas.to_vec(), registration.leader),
            (vec![4, 1, 2, 3], 3)
        );
        // 4 in sync: replicas [4,1], the ISR without 2 and 3, and 4 (first of the target) leads.
        let mut target = ChangeTarget::of(&registration);
        target.isr = vec![3, 2, 1, 4];
        let (record, leader) = build_change(&moving, TOPIC, 0, &registration, target);
        assert_eq!(leader, 4);
        let record = record.expect("a change");
        assert_eq!(
            (record.replicas, record.isr),
            (Some(vec![4, 1]), Some(vec![1, 4]))
        );
    }

    fn unclean_policy() -> UncleanPolicy {
        UncleanPolicy {
            node_id: 1,
            static_enabled: true,
        }
    }

    /// Partition 0 of `t` moving with Kafka's testIsrSpecialCase lists, led by 4.
    fn moving_with_only_adding_replicas_in_sync() -> MetadataImage {
        let mut moving = partition(&[4, 5, 3, 2, 1], &[4, 5], 4);
        moving.removing_replicas = vec![2];
        moving.adding_replicas = vec![4, 5];
        image(moving)
    }

    #[test]
    fn a_cancel_with_only_adding_replicas_in_sync_makes_the_first_original_replica_the_isr() {
        let moving = moving_with_only_adding_replicas_in_sync();
        assert_eq!(
            code(&alter_partition_reassignments(&moving, &request(None), 1, &POLICY).response),
            (
                INVALID_REPLICA_ASSIGNMENT,
                Some("Unable to revert partition assignment for t:0 because it would require an unclean leader election.".to_owned())
            )
        );
        // Allowed: the ISR is [3] and 3, in it and live, leads by a clean election (not
        // RECOVERING).
        let cancel = alter_partition_reassignments(&moving, &request(None), 1, &unclean_policy());
        assert_eq!(
            cancel.records,
            cancelled(&[3, 2, 1], Some(vec![3]), 3, None)
        );
        // 3 fenced: the first live replica, 2, leads uncleanly, alone in the ISR.
        let fenced = apply_all(
            moving,
            &[MetadataRecord::FenceBroker(FenceBrokerRecord {
                id: 3,
                epoch: 13,
            })],
        );
        let cancel = alter_partition_reassignments(&fenced, &request(None), 1, &unclean_policy());
        assert_eq!(
            cancel.records,
            cancelled(&[3, 2, 1], Some(vec![2]), 2, Some(RECOVERING))
        );
    }
}
