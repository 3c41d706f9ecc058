//! AlterPartition (key 56) on the controller: a partition leader asks to change its ISR.
//! Checked in the order of Kafka's `ReplicationControlManager.alterPartition` (replication
//! reference §1.5): the sender's broker epoch, the topic id, then per partition the epochs, the
//! sender's leadership, and the new ISR's shape and eligibility.

use std::collections::HashSet;

use gregor_publishers::records::{MetadataRecord, PartitionChangeRecord};
use gregor_publishers::MetadataImage;
use kafka_protocol::messages::alter_partition_request::PartitionData as RequestPartition;
use kafka_protocol::messages::alter_partition_response::{PartitionData, TopicData};
use kafka_protocol::messages::{AlterPartitionRequest, AlterPartitionResponse, BrokerId};

use super::reassignment::{self, build_change, ChangeTarget};
use super::ControllerResult;

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const NOT_CONTROLLER: i16 = 41;
const INVALID_REQUEST: i16 = 42;
const FENCED_LEADER_EPOCH: i16 = 74;
const STALE_BROKER_EPOCH: i16 = 77;
const INVALID_UPDATE_VERSION: i16 = 95;
const UNKNOWN_TOPIC_ID: i16 = 100;
const INELIGIBLE_REPLICA: i16 = 107;
const NEW_LEADER_ELECTED: i16 = 108;

fn failed(partition: i32, code: i16) -> PartitionData {
    PartitionData::default()
        .with_partition_index(partition)
        .with_error_code(code)
}

/// The new ISR of a request partition, with the broker epochs sent for its members (v3+; −1
/// where unknown).
fn requested_isr(partition: &RequestPartition, version: i16) -> Vec<(i32, i64)> {
    if version >= 3 {
        partition
            .new_isr_with_epochs
            .iter()
            .map(|member| (member.broker_id.0, member.broker_epoch))
            .collect()
    } else {
        partition.new_isr.iter().map(|id| (id.0, -1)).collect()
    }
}

/// Decides an AlterPartition request at `version` on `image`.
pub fn alter_partition(
    image: &MetadataImage,
    request: &AlterPartitionRequest,
    version: i16,
) -> ControllerResult<AlterPartitionResponse> {
    let sender = request.broker_id.0;
    let registered = image.cluster.broker(sender).map(|b| b.epoch);
    if registered != Some(request.broker_epoch) {
        return ControllerResult {
            records: Vec::new(),
            response: AlterPartitionResponse::default().with_error_code(STALE_BROKER_EPOCH),
        };
    }
    let mut records = Vec::new();
    let mut topics = Vec::with_capacity(request.topics.len());
    for topic in &request.topics {
        let Some(current) = image.topics.get_by_id(&topic.topic_id) else {
            topics.push(
                TopicData::default()
                    .with_topic_id(topic.topic_id)
                    .with_partitions(
                        topic
                            .partitions
                            .iter()
                            .map(|p| failed(p.partition_index, UNKNOWN_TOPIC_ID))
                            .collect(),
                    ),
            );
            continue;
        };
        let mut partitions = Vec::with_capacity(topic.partitions.len());
        for wanted in &topic.partitions {
            let index = wanted.partition_index;
            let Some(registration) = current.partition(index) else {
                partitions.push(failed(index, UNKNOWN_TOPIC_OR_PARTITION));
                continue;
            };
            let new_isr = requested_isr(wanted, version);
            let ids: Vec<i32> = new_isr.iter().map(|(id, _)| *id).collect();
            let distinct: HashSet<i32> = ids.iter().copied().collect();
            let replicas = registration.replicas.as_slice();
            let code = if wanted.leader_epoch > registration.leader_epoch
                || wanted.partition_epoch > registration.partition_epoch
            {
                // This controller has not seen the change the leader acts on yet.
                Some(NOT_CONTROLLER)
            } else if wanted.leader_epoch < registration.leader_epoch {
                Some(FENCED_LEADER_EPOCH)
            } else if registration.leader != sender {
                Some(INVALID_REQUEST)
            } else if wanted.partition_epoch < registration.partition_epoch {
                Some(INVALID_UPDATE_VERSION)
            } else if distinct.len() != ids.len()
                || !ids.iter().all(|id| replicas.contains(id))
                || !ids.contains(&sender)
                || !(0..=1).contains(&wanted.leader_recovery_state)
                || (wanted.leader_recovery_state == 1 && ids.len() > 1)
                || (registration.leader_recovery_state == 0 && wanted.leader_recovery_state == 1)
            {
                Some(INVALID_REQUEST)
            } else if new_isr.iter().any(|(id, epoch)| {
                image.cluster.broker(*id).is_none_or(|b| {
                    b.fenced || b.in_controlled_shutdown || (*epoch >= 0 && *epoch != b.epoch)
                })
            }) {
                Some(INELIGIBLE_REPLICA)
            } else {
                None
            };
            if let Some(code) = code {
                partitions.push(failed(index, code));
                continue;
            }
            if reassignment::in_progress(registration) {
                let mut target = ChangeTarget::of(registration);
                target.isr = ids.clone();
                if let (Some(mut record), leader) =
                    build_change(image, current.id, index, registration, target)
                {
                    if wanted.leader_recovery_state != registration.leader_recovery_state {
                        record.leader_recovery_state = Some(wanted.leader_recovery_state);
                    }
                    let isr = record.isr.clone().unwrap_or_else(|| ids.clone());
                    let leader_epoch =
                        registration.leader_epoch + i32::from(record.leader.is_some());
                    records.push(MetadataRecord::PartitionChange(record));
                    // Written either way; a leader that lost the partition learns it from
                    // the code (Kafka's NEW_LEADER_ELECTED after a completed reassignment).
                    let code = if leader == sender {
                        0
                    } else {
                        NEW_LEADER_ELECTED
                    };
                    partitions.push(
                        PartitionData::default()
                            .with_partition_index(index)
                            .with_error_code(code)
                            .with_leader_id(BrokerId(leader))
                            .with_leader_epoch(leader_epoch)
                            .with_isr(isr.into_iter().map(BrokerId).collect())
                            .with_leader_recovery_state(wanted.leader_recovery_state)
                            .with_partition_epoch(registration.partition_epoch + 1),
                    );
                    continue;
                }
            }
            let isr_changes = ids.as_slice() != registration.isr.as_slice();
            let recovery_changes =
                wanted.leader_recovery_state != registration.leader_recovery_state;
            let mut partition_epoch = registration.partition_epoch;
            if isr_changes || recovery_changes {
                partition_epoch += 1;
                records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                    partition_id: index,
                    topic_id: current.id,
                    isr: isr_changes.then(|| ids.clone()),
                    leader: None,
                    replicas: None,
                    removing_replicas: None,
                    adding_replicas: None,
                    leader_recovery_state: recovery_changes.then_some(wanted.leader_recovery_state),
                    directories: None,
                }));
            }
            partitions.push(
                PartitionData::default()
                    .with_partition_index(index)
                    .with_leader_id(BrokerId(registration.leader))
                    .with_leader_epoch(registration.leader_epoch)
                    .with_isr(ids.into_iter().map(BrokerId).collect())
                    .with_leader_recovery_state(wanted.leader_recovery_state)
                    .with_partition_epoch(partition_epoch),
            );
        }
        topics.push(
            TopicData::default()
                .with_topic_id(topic.topic_id)
                .with_partitions(partitions),
        );
    }
    ControllerResult {
        records,
        response: AlterPartitionResponse::default().with_topics(topics),
    }
}

#[cfg(test)]
#[allow(clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use gregor_publishers::records::{PartitionRecord, RegisterBrokerRecord, TopicRecord};
    use gregor_publishers::MetadataDelta;
    use kafka_protocol::messages::alter_partition_request::{
        BrokerState, PartitionData as Wanted, TopicData as WantedTopic,
    };
    use std::sync::Arc;
    use uuid::Uuid;

    const TOPIC: Uuid = Uuid::from_u128(7);

    fn image(fenced: &[i32]) -> MetadataImage {
        let mut records: Vec<MetadataRecord> = (1..=4)
            .map(|id| {
                MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                    broker_id: id,
                    incarnation_id: Uuid::from_u128(id as u128),
                    broker_epoch: 10 + i64::from(id),
                    endpoints: Vec::new(),
                    features: Vec::new(),
                    rack: None,
                    fenced: fenced.contains(&id),
                    in_controlled_shutdown: false,
                    log_dirs: Vec::new(),
                })
            })
            .collect();
        records.push(MetadataRecord::Topic(TopicRecord {
            name: "t".into(),
            topic_id: TOPIC,
        }));
        records.push(MetadataRecord::Partition(PartitionRecord {
            partition_id: 0,
            topic_id: TOPIC,
            replicas: vec![1, 2, 3],
            isr: vec![1, 2],
            removing_replicas: Vec::new(),
            adding_replicas: Vec::new(),
            leader: 1,
            leader_recovery_state: 0,
            leader_epoch: 5,
            partition_epoch: 8,
            directories: Vec::new(),
        }));
        let base = Arc::new(MetadataImage::empty());
        let mut delta = MetadataDelta::new(base.clone());
        for record in &records {
            delta.replay(record).expect("replays");
        }
        delta.apply(base.provenance)
    }

    fn request(
        sender: i32,
        epoch: i64,
        leader_epoch: i32,
        partition_epoch: i32,
        isr: &[i32],
    ) -> AlterPartitionRequest {
        AlterPartitionRequest::default()
            .with_broker_id(BrokerId(sender))
            .with_broker_epoch(epoch)
            .with_topics(vec![WantedTopic::default()
                .with_topic_id(TOPIC)
                .with_partitions(vec![Wanted::default()
                    .with_partition_index(0)
                    .with_leader_epoch(leader_epoch)
                    .with_partition_epoch(partition_epoch)
                    .with_new_isr(isr.iter().copied().map(BrokerId).collect())
                    .with_new_isr_with_epochs(
                        isr.iter()
                            .map(|id| {
                                BrokerState::default()
                                    .with_broker_id(BrokerId(*id))
                                    .with_broker_epoch(-1)
                            })
                            .collect(),
                    )])])
    }

    fn code(result: &ControllerResult<AlterPartitionResponse>) -> i16 {
        result.response.topics[0].partitions[0].error_code
    }

    #[test]
    fn an_expansion_is_written_with_the_next_partition_epoch() {
        let image = image(&[]);
        for version in [2, 3] {
            let result = alter_partition(&image, &request(1, 11, 5, 8, &[1, 2, 3]), version);
            assert_eq!(result.response.error_code, 0);
            let answer = &result.response.topics[0].partitions[0];
            assert_eq!(answer.error_code, 0);
            assert_eq!(answer.partition_epoch, 9);
            assert_eq!(answer.leader_epoch, 5);
            assert_eq!(answer.isr, vec![BrokerId(1), BrokerId(2), BrokerId(3)]);
            assert_eq!(
                result.records,
                vec![MetadataRecord::PartitionChange(PartitionChangeRecord {
                    partition_id: 0,
                    topic_id: TOPIC,
                    isr: Some(vec![1, 2, 3]),
                    ..PartitionChangeRecord::default()
                })]
            );
        }
        // The same ISR again: nothing to write, answered with the current state.
        let noop = alter_partition(&image, &request(1, 11, 5, 8, &[1, 2]), 3);
        assert!(noop.records.is_empty());
        assert_eq!(code(&noop), 0);
    }

    #[test]
    fn stale_and_invalid_requests_get_kafkas_codes() {
        let image = image(&[3]);
        let stale = alter_partition(&image, &request(1, 10, 5, 8, &[1, 2]), 3);
        assert_eq!(stale.response.error_code, STALE_BROKER_EPOCH);
        assert!(stale.records.is_empty());
        let cases: [(AlterPartitionRequest, i16); 8] = [
            (request(1, 11, 6, 8, &[1, 2]), NOT_CONTROLLER),
            (request(1, 11, 5, 9, &[1, 2]), NOT_CONTROLLER),
            (request(1, 11, 4, 8, &[1, 2]), FENCED_LEADER_EPOCH),
            (request(2, 12, 5, 8, &[1, 2]), INVALID_REQUEST),
            (request(1, 11, 5, 7, &[1, 2]), INVALID_UPDATE_VERSION),
            (request(1, 11, 5, 8, &[1, 4]), INVALID_REQUEST),
            (request(1, 11, 5, 8, &[2]), INVALID_REQUEST),
            (request(1, 11, 5, 8, &[1, 2, 3]), INELIGIBLE_REPLICA),
        ];
        for (wanted, expected) in cases {
            let result = alter_partition(&image, &wanted, 3);
            assert_eq!(code(&result), expected, "{wanted:?}");
            assert!(result.records.is_empty());
        }
        let mut unknown = request(1, 11, 5, 8, &[1, 2]);
        unknown.topics[0].topic_id = Uuid::from_u128(8);
        assert_eq!(
            code(&alter_partition(&image, &unknown, 3)),
            UNKNOWN_TOPIC_ID
        );
        let mut missing = request(1, 11, 5, 8, &[1, 2]);
        missing.topics[0].partitions[0].partition_index = 4;
        assert_eq!(
            code(&alter_partition(&image, &missing, 3)),
            UNKNOWN_TOPIC_OR_PARTITION
        );
    }
}
