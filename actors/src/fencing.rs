//! Broker fencing decisions (pure): which brokers to fence, and the records that fence one and
//! move leadership of its partitions to another in-sync replica, as Kafka's
//! `ReplicationControlManager.handleBrokerFenced` does.
//!
//! The leader's liveness task (node/src/quorum) names the brokers it has not heard from within
//! `broker.session.timeout.ms`; the controller decides their records on its working image.

use gregor_publishers::records::{
    BrokerRegistrationChangeRecord, FenceBrokerRecord, MetadataRecord, PartitionChangeRecord,
    UnregisterBrokerRecord, BROKER_EPOCH_AT_OFFSET, NO_LEADER,
};
use gregor_publishers::MetadataImage;

/// The records fencing `broker_id`: FenceBroker, then one PartitionChange per partition that
/// names it in its ISR: it leaves the ISR, and where it led, the first other ISR replica that
/// is not fenced leads (none left: no leader, the ISR keeps only this broker as Kafka keeps the
/// last leader). Empty when the broker is unknown, already fenced, or its registration is still
/// in flight (the working image holds no epoch for it yet).
pub fn fence_broker(image: &MetadataImage, broker_id: i32) -> Vec<MetadataRecord> {
    let Some(broker) = image.cluster.broker(broker_id) else {
        return Vec::new();
    };
    // A registration not committed yet has no epoch to name.
    if broker.fenced || broker.epoch == BROKER_EPOCH_AT_OFFSET {
        return Vec::new();
    }
    let mut records = vec![MetadataRecord::FenceBroker(FenceBrokerRecord {
        id: broker_id,
        epoch: broker.epoch,
    })];
    records.extend(leave_isrs(image, broker_id));
    records
}

/// The records unregistering `broker_id`, as Kafka's `handleBrokerUnregistered`: it leaves
/// every ISR as when fenced (leadership moves), then UnregisterBroker with its epoch. Replica
/// lists keep naming it, as in Kafka. `None` when no broker of that id is registered.
pub fn unregister_broker(image: &MetadataImage, broker_id: i32) -> Option<Vec<MetadataRecord>> {
    let broker = image.cluster.broker(broker_id)?;
    // A registration still in flight has no epoch to name yet: not registered until committed
    // (an UnregisterBrokerRecord naming the placeholder would stop every node's loader).
    if broker.epoch == BROKER_EPOCH_AT_OFFSET {
        return None;
    }
    let mut records = leave_isrs(image, broker_id);
    records.push(MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
        broker_id,
        broker_epoch: broker.epoch,
    }));
    Some(records)
}

/// Why a controlled shutdown was refused: Kafka's STALE_BROKER_EPOCH for an unknown broker or
/// another epoch than the registered one.
pub const STALE_BROKER_EPOCH: i16 = 77;

/// The records of a broker entering controlled shutdown (BrokerHeartbeat with
/// `want_shut_down`, Kafka's `handleBrokerInControlledShutdown`): it is marked in controlled
/// shutdown, leaves every ISR, and its leaderships move to an unfenced in-sync replica not
/// shutting down; asked again, only what still names it. Refused with STALE_BROKER_EPOCH for an
/// unknown broker or another epoch.
pub fn controlled_shutdown(
    image: &MetadataImage,
    broker_id: i32,
    broker_epoch: i64,
) -> Result<Vec<MetadataRecord>, i16> {
    let broker = image
        .cluster
        .broker(broker_id)
        .filter(|b| b.epoch == broker_epoch && b.epoch != BROKER_EPOCH_AT_OFFSET)
        .ok_or(STALE_BROKER_EPOCH)?;
    let mut records = Vec::new();
    if !broker.in_controlled_shutdown {
        records.push(MetadataRecord::BrokerRegistrationChange(
            BrokerRegistrationChangeRecord {
                broker_id,
                broker_epoch,
                fenced: None,
                in_controlled_shutdown: Some(true),
            },
        ));
    }
    records.extend(leave_isrs(image, broker_id));
    Ok(records)
}

/// One PartitionChange per partition whose ISR names `broker_id`: it leaves the ISR, and
/// where it led, the first other ISR replica that is not fenced leads (none left: no leader,
/// the ISR keeps only this broker as Kafka keeps the last leader).
fn leave_isrs(image: &MetadataImage, broker_id: i32) -> Vec<MetadataRecord> {
    let mut records = Vec::new();
    let usable = |id: i32| {
        id != broker_id
            && image
                .cluster
                .broker(id)
                .is_some_and(|b| !b.fenced && !b.in_controlled_shutdown)
    };
    for topic in image.topics.iter() {
        for (partition_id, partition) in topic.partitions() {
            let isr = partition.isr.as_slice();
            if !isr.contains(&broker_id) {
                continue;
            }
            let remaining: Vec<i32> = isr.iter().copied().filter(|id| *id != broker_id).collect();
            let leads = partition.leader == broker_id;
            let (new_isr, new_leader) = if remaining.is_empty() {
                // Nobody else is in sync: keep the ISR, lose the leader.
                (None, leads.then_some(NO_LEADER))
            } else if leads {
                let next = remaining.iter().copied().find(|id| usable(*id));
                (Some(remaining), Some(next.unwrap_or(NO_LEADER)))
            } else {
                (Some(remaining), None)
            };
            if new_isr.is_none() && new_leader.is_none() {
                continue;
            }
            records.push(MetadataRecord::PartitionChange(PartitionChangeRecord {
                partition_id,
                topic_id: topic.id,
                isr: new_isr,
                leader: new_leader,
                replicas: None,
                removing_replicas: None,
                adding_replicas: None,
                leader_recovery_state: None,
                directories: None,
            }));
        }
    }
    records
}

#[cfg(test)]
#[allow(clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use super::*;
    use gregor_publishers::records::{PartitionRecord, RegisterBrokerRecord, TopicRecord};
    use gregor_publishers::MetadataDelta;
    use std::sync::Arc;
    use uuid::Uuid;

    /// The PartitionChange that moves only the ISR and the leader.
    fn isr_change(
        topic_id: Uuid,
        partition_id: i32,
        isr: Option<Vec<i32>>,
        leader: Option<i32>,
    ) -> MetadataRecord {
        MetadataRecord::PartitionChange(PartitionChangeRecord {
            partition_id,
            topic_id,
            isr,
            leader,
            replicas: None,
            removing_replicas: None,
            adding_replicas: None,
            leader_recovery_state: None,
            directories: None,
        })
    }

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

    fn image(records: Vec<MetadataRecord>) -> MetadataImage {
        let base = Arc::new(MetadataImage::empty());
        let mut delta = MetadataDelta::new(base.clone());
        for record in &records {
            delta.replay(record).expect("replays");
        }
        delta.apply(base.provenance)
    }

    fn partition(topic: Uuid, id: i32, replicas: &[i32], leader: i32) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord {
            partition_id: id,
            topic_id: topic,
            replicas: replicas.to_vec(),
            isr: replicas.to_vec(),
            removing_replicas: Vec::new(),
            adding_replicas: Vec::new(),
            leader,
            leader_recovery_state: 0,
            leader_epoch: 0,
            partition_epoch: 0,
            directories: Vec::new(),
        })
    }

    #[test]
    fn leadership_moves_to_an_unfenced_isr_replica() {
        let topic = Uuid::from_u128(7);
        let image = image(vec![
            broker(1, false),
            broker(2, true),
            broker(3, false),
            MetadataRecord::Topic(TopicRecord {
                name: "t".into(),
                topic_id: topic,
            }),
            partition(topic, 0, &[1, 2, 3], 1),
            partition(topic, 1, &[3, 1], 3),
            partition(topic, 2, &[1], 1),
            partition(topic, 3, &[3], 3),
        ]);
        let records = fence_broker(&image, 1);
        let change = |partition_id, isr, leader| isr_change(topic, partition_id, isr, leader);
        assert_eq!(
            records,
            vec![
                MetadataRecord::FenceBroker(FenceBrokerRecord { id: 1, epoch: 11 }),
                // 2 is fenced: 3 leads.
                change(0, Some(vec![2, 3]), Some(3)),
                change(1, Some(vec![3]), None),
                change(2, None, Some(NO_LEADER)),
            ]
        );
        assert!(fence_broker(&image, 2).is_empty(), "already fenced");
        assert!(fence_broker(&image, 9).is_empty(), "unknown");
    }

    #[test]
    fn controlled_shutdown_moves_leadership_away_from_the_broker() {
        let topic = Uuid::from_u128(7);
        let image = image(vec![
            broker(1, false),
            broker(2, false),
            broker(3, false),
            MetadataRecord::Topic(TopicRecord {
                name: "t".into(),
                topic_id: topic,
            }),
            partition(topic, 0, &[1, 2, 3], 1),
            partition(topic, 1, &[2, 1], 2),
            partition(topic, 2, &[1], 1),
        ]);
        let change = |partition_id, isr, leader| isr_change(topic, partition_id, isr, leader);
        assert_eq!(
            controlled_shutdown(&image, 1, 11),
            Ok(vec![
                MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
                    broker_id: 1,
                    broker_epoch: 11,
                    fenced: None,
                    in_controlled_shutdown: Some(true),
                }),
                change(0, Some(vec![2, 3]), Some(2)),
                change(1, Some(vec![2]), None),
                change(2, None, Some(NO_LEADER)),
            ])
        );
        assert_eq!(controlled_shutdown(&image, 1, 10), Err(STALE_BROKER_EPOCH));
        assert_eq!(controlled_shutdown(&image, 9, 19), Err(STALE_BROKER_EPOCH));
    }

    #[test]
    fn unregistering_moves_leadership_and_drops_the_registration() {
        let topic = Uuid::from_u128(7);
        let records = vec![
            broker(1, false),
            broker(2, true),
            broker(3, false),
            MetadataRecord::Topic(TopicRecord {
                name: "t".into(),
                topic_id: topic,
            }),
            partition(topic, 0, &[2, 3], 3),
            partition(topic, 1, &[2], 2),
        ];
        let before = image(records.clone());
        let unregister = unregister_broker(&before, 3).expect("3 is registered");
        let change = |partition_id, isr, leader| isr_change(topic, partition_id, isr, leader);
        assert_eq!(
            unregister,
            vec![
                // 2 is fenced: nobody usable leads.
                change(0, Some(vec![2]), Some(NO_LEADER)),
                MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
                    broker_id: 3,
                    broker_epoch: 13,
                }),
            ]
        );
        // A fenced broker is unregistered too (Kafka does not refuse any registered broker).
        let fenced = unregister_broker(&before, 2).expect("2 is registered");
        assert_eq!(
            fenced.last(),
            Some(&MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
                broker_id: 2,
                broker_epoch: 12,
            }))
        );
        let after = image(records.into_iter().chain(unregister).collect());
        assert!(after.cluster.broker(3).is_none());
        assert!(
            unregister_broker(&after, 3).is_none(),
            "no longer registered"
        );
        assert!(unregister_broker(&before, 9).is_none(), "unknown");
    }
}
