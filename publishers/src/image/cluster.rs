//! Brokers and controllers: [`ClusterImage`] and [`ClusterDelta`].

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use crate::delta::ReplayError;
use crate::records::{
    BrokerRegistrationChangeRecord, Endpoint, FeatureRange, FenceBrokerRecord, MetadataRecord,
    ProducerIdsRecord, RegisterBrokerRecord, RegisterControllerRecord, UnfenceBrokerRecord,
    UnregisterBrokerRecord,
};

/// A registered broker, as in Kafka's `BrokerRegistration`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistration {
    /// Broker node id.
    pub id: i32,
    /// Random id of the registered process incarnation.
    pub incarnation_id: Uuid,
    /// Registration epoch (the log offset of its `RegisterBrokerRecord`).
    pub epoch: i64,
    /// Advertised listener endpoints.
    pub endpoints: Vec<Endpoint>,
    /// Supported feature ranges.
    pub features: Vec<FeatureRange>,
    /// Rack, if configured.
    pub rack: Option<String>,
    /// Fenced brokers lead no partition and are left out of Metadata responses.
    pub fenced: bool,
    /// Whether the broker is shutting down in a controlled way.
    pub in_controlled_shutdown: bool,
    /// Directory ids of the broker's log dirs.
    pub log_dirs: Vec<Uuid>,
}

impl BrokerRegistration {
    /// The endpoint of listener `listener_name`, if the broker advertises it.
    pub fn endpoint(&self, listener_name: &str) -> Option<&Endpoint> {
        self.endpoints.iter().find(|e| e.name == listener_name)
    }

    fn from_record(record: &RegisterBrokerRecord) -> Self {
        BrokerRegistration {
            id: record.broker_id,
            incarnation_id: record.incarnation_id,
            epoch: record.broker_epoch,
            endpoints: record.endpoints.clone(),
            features: record.features.clone(),
            rack: record.rack.clone(),
            fenced: record.fenced,
            in_controlled_shutdown: record.in_controlled_shutdown,
            log_dirs: record.log_dirs.clone(),
        }
    }

    /// This registration as the record that recreates it.
    pub fn to_record(&self) -> RegisterBrokerRecord {
        RegisterBrokerRecord {
            broker_id: self.id,
            incarnation_id: self.incarnation_id,
            broker_epoch: self.epoch,
            endpoints: self.endpoints.clone(),
            features: self.features.clone(),
            rack: self.rack.clone(),
            fenced: self.fenced,
            in_controlled_shutdown: self.in_controlled_shutdown,
            log_dirs: self.log_dirs.clone(),
        }
    }
}

/// A registered controller, as in Kafka's `ControllerRegistration`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerRegistration {
    /// Controller node id.
    pub id: i32,
    /// Random id of the registered process incarnation.
    pub incarnation_id: Uuid,
    /// Directory id of the controller's metadata log dir.
    pub directory_id: Uuid,
    /// Controller listener endpoints.
    pub endpoints: Vec<Endpoint>,
    /// Supported feature ranges.
    pub features: Vec<FeatureRange>,
}

impl ControllerRegistration {
    /// The endpoint of listener `listener_name`, if the controller has it.
    pub fn endpoint(&self, listener_name: &str) -> Option<&Endpoint> {
        self.endpoints.iter().find(|e| e.name == listener_name)
    }

    fn from_record(record: &RegisterControllerRecord) -> Self {
        ControllerRegistration {
            id: record.controller_id,
            incarnation_id: record.incarnation_id,
            directory_id: record.directory_id,
            endpoints: record.endpoints.clone(),
            features: record.features.clone(),
        }
    }

    /// This registration as the record that recreates it.
    pub fn to_record(&self) -> RegisterControllerRecord {
        RegisterControllerRecord {
            controller_id: self.id,
            incarnation_id: self.incarnation_id,
            directory_id: self.directory_id,
            endpoints: self.endpoints.clone(),
            features: self.features.clone(),
        }
    }
}

/// Every registered broker and controller, by id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterImage {
    brokers: imbl::OrdMap<i32, Arc<BrokerRegistration>>,
    controllers: imbl::OrdMap<i32, Arc<ControllerRegistration>>,
    /// The first producer id the controller has not handed out (ProducerIdsRecord).
    next_producer_id: i64,
}

impl ClusterImage {
    /// The image with no broker and no controller.
    pub fn empty() -> Self {
        ClusterImage::default()
    }

    /// Whether no broker or controller is registered.
    pub fn is_empty(&self) -> bool {
        self.brokers.is_empty() && self.controllers.is_empty()
    }

    /// Registered brokers (fenced ones included), by ascending id.
    pub fn brokers(&self) -> impl Iterator<Item = &BrokerRegistration> {
        self.brokers.values().map(|broker| &**broker)
    }

    /// The registration of broker `id`.
    pub fn broker(&self, id: i32) -> Option<&BrokerRegistration> {
        self.brokers.get(&id).map(|broker| &**broker)
    }

    /// Registered controllers, by ascending id.
    pub fn controllers(&self) -> impl Iterator<Item = &ControllerRegistration> {
        self.controllers.values().map(|controller| &**controller)
    }

    /// The registration of controller `id`.
    pub fn controller(&self, id: i32) -> Option<&ControllerRegistration> {
        self.controllers.get(&id).map(|controller| &**controller)
    }

    /// The image as records: brokers, then controllers, by id.
    pub fn to_records(&self, out: &mut Vec<MetadataRecord>) {
        out.extend(
            self.brokers()
                .map(|broker| MetadataRecord::RegisterBroker(broker.to_record())),
        );
        out.extend(
            self.controllers()
                .map(|controller| MetadataRecord::RegisterController(controller.to_record())),
        );
        out.extend(self.producer_ids_record());
    }

    /// The record of the producer-id blocks handed out so far, none before the first.
    pub(crate) fn producer_ids_record(&self) -> Option<MetadataRecord> {
        (self.next_producer_id > 0).then_some({
            MetadataRecord::ProducerIds(ProducerIdsRecord {
                broker_id: -1,
                broker_epoch: -1,
                next_producer_id: self.next_producer_id,
            })
        })
    }

    /// The first producer id not yet handed out to a broker.
    pub fn next_producer_id(&self) -> i64 {
        self.next_producer_id
    }
}

/// Broker and controller registration changes of one delta.
#[derive(Clone, Debug)]
pub struct ClusterDelta {
    base: Arc<ClusterImage>,
    /// New registration per changed broker; `None` = unregistered.
    brokers: BTreeMap<i32, Option<Arc<BrokerRegistration>>>,
    /// New registration per changed controller.
    controllers: BTreeMap<i32, Arc<ControllerRegistration>>,
    /// The next producer id after a ProducerIdsRecord.
    next_producer_id: Option<i64>,
}

impl ClusterDelta {
    /// An empty delta on `base`.
    pub fn new(base: Arc<ClusterImage>) -> Self {
        ClusterDelta {
            base,
            brokers: BTreeMap::new(),
            controllers: BTreeMap::new(),
            next_producer_id: None,
        }
    }

    /// The delta from the empty image that registers everything in `image`.
    pub fn from_image(image: &ClusterImage) -> Self {
        ClusterDelta {
            base: Arc::new(ClusterImage::empty()),
            brokers: image
                .brokers
                .iter()
                .map(|(id, broker)| (*id, Some(Arc::clone(broker))))
                .collect(),
            controllers: image
                .controllers
                .iter()
                .map(|(id, controller)| (*id, Arc::clone(controller)))
                .collect(),
            next_producer_id: (image.next_producer_id > 0).then_some(image.next_producer_id),
        }
    }

    /// The image this delta applies to.
    pub fn base(&self) -> &Arc<ClusterImage> {
        &self.base
    }

    /// Changed brokers by id: the registration after the delta, `None` if unregistered.
    pub fn changed_brokers(&self) -> impl Iterator<Item = (i32, Option<&BrokerRegistration>)> {
        self.brokers
            .iter()
            .map(|(id, broker)| (*id, broker.as_deref()))
    }

    /// Changed controllers by id, with their new registration.
    pub fn changed_controllers(&self) -> impl Iterator<Item = &ControllerRegistration> {
        self.controllers.values().map(|controller| &**controller)
    }

    /// Broker `id` as the records replayed so far leave it.
    pub fn broker(&self, id: i32) -> Option<&BrokerRegistration> {
        match self.brokers.get(&id) {
            Some(change) => change.as_deref(),
            None => self.base.broker(id),
        }
    }

    /// The current registration of `id`, checked against the record's epoch.
    fn registered(
        &self,
        id: i32,
        epoch: i64,
        record: &'static str,
    ) -> Result<&BrokerRegistration, ReplayError> {
        let broker = self.broker(id).ok_or(ReplayError::UnknownBroker {
            record,
            broker_id: id,
        })?;
        if broker.epoch != epoch {
            return Err(ReplayError::StaleBrokerEpoch {
                record,
                broker_id: id,
                record_epoch: epoch,
                current_epoch: broker.epoch,
            });
        }
        Ok(broker)
    }

    fn update(
        &mut self,
        id: i32,
        epoch: i64,
        record: &'static str,
        change: impl FnOnce(&mut BrokerRegistration),
    ) -> Result<(), ReplayError> {
        let mut broker = self.registered(id, epoch, record)?.clone();
        change(&mut broker);
        self.brokers.insert(id, Some(Arc::new(broker)));
        Ok(())
    }

    pub(crate) fn replay_producer_ids(&mut self, record: &ProducerIdsRecord) {
        self.next_producer_id = Some(record.next_producer_id);
    }

    pub(crate) fn replay_register_broker(&mut self, record: &RegisterBrokerRecord) {
        let broker = BrokerRegistration::from_record(record);
        self.brokers
            .insert(record.broker_id, Some(Arc::new(broker)));
    }

    pub(crate) fn replay_unregister_broker(
        &mut self,
        record: &UnregisterBrokerRecord,
    ) -> Result<(), ReplayError> {
        self.registered(
            record.broker_id,
            record.broker_epoch,
            "UnregisterBrokerRecord",
        )?;
        self.brokers.insert(record.broker_id, None);
        Ok(())
    }

    pub(crate) fn replay_fence(&mut self, record: &FenceBrokerRecord) -> Result<(), ReplayError> {
        self.update(record.id, record.epoch, "FenceBrokerRecord", |broker| {
            broker.fenced = true;
        })
    }

    pub(crate) fn replay_unfence(
        &mut self,
        record: &UnfenceBrokerRecord,
    ) -> Result<(), ReplayError> {
        self.update(record.id, record.epoch, "UnfenceBrokerRecord", |broker| {
            broker.fenced = false;
        })
    }

    pub(crate) fn replay_registration_change(
        &mut self,
        record: &BrokerRegistrationChangeRecord,
    ) -> Result<(), ReplayError> {
        self.update(
            record.broker_id,
            record.broker_epoch,
            "BrokerRegistrationChangeRecord",
            |broker| {
                if let Some(fenced) = record.fenced {
                    broker.fenced = fenced;
                }
                if let Some(shutting_down) = record.in_controlled_shutdown {
                    broker.in_controlled_shutdown = shutting_down;
                }
            },
        )
    }

    pub(crate) fn replay_register_controller(&mut self, record: &RegisterControllerRecord) {
        let controller = ControllerRegistration::from_record(record);
        self.controllers
            .insert(record.controller_id, Arc::new(controller));
    }

    /// The base image with this delta's changes.
    pub fn apply(&self) -> ClusterImage {
        let mut brokers = self.base.brokers.clone();
        for (id, broker) in &self.brokers {
            match broker {
                Some(broker) => brokers.insert(*id, Arc::clone(broker)),
                None => brokers.remove(id),
            };
        }
        let mut controllers = self.base.controllers.clone();
        for (id, controller) in &self.controllers {
            controllers.insert(*id, Arc::clone(controller));
        }
        ClusterImage {
            brokers,
            controllers,
            next_producer_id: self.next_producer_id.unwrap_or(self.base.next_producer_id),
        }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::delta::MetadataDelta;
    use crate::image::test_util::*;
    use crate::image::MetadataImage;

    #[test]
    fn producer_id_blocks_replay_and_survive_a_snapshot() {
        let record = MetadataRecord::ProducerIds(ProducerIdsRecord {
            broker_id: 1,
            broker_epoch: 5,
            next_producer_id: 2000,
        });
        assert_eq!(
            MetadataRecord::from_frame(&record.to_frame()).unwrap(),
            record
        );
        let empty = Arc::new(MetadataImage::empty());
        assert_eq!(empty.cluster.next_producer_id(), 0);
        let mut delta = MetadataDelta::new(empty.clone());
        delta.replay(&record).unwrap();
        let image = delta.apply(empty.provenance);
        assert_eq!(image.cluster.next_producer_id(), 2000);
        let mut records = Vec::new();
        image.cluster.to_records(&mut records);
        let mut reloaded = MetadataDelta::new(empty.clone());
        for r in &records {
            reloaded.replay(r).unwrap();
        }
        assert_eq!(
            reloaded.apply(empty.provenance).cluster.next_producer_id(),
            2000
        );
    }

    fn register_controller(id: i32) -> MetadataRecord {
        MetadataRecord::RegisterController(RegisterControllerRecord {
            controller_id: id,
            incarnation_id: Uuid::from_u128(0xc000 + id as u128),
            directory_id: Uuid::from_u128(0xcd00 + id as u128),
            endpoints: vec![endpoint("CONTROLLER", &format!("controller{id}"), 9093)],
            features: vec![],
        })
    }

    fn image1_records() -> Vec<MetadataRecord> {
        vec![
            register_broker(1, 10, false),
            register_broker(2, 20, true),
            register_broker(4, 40, false),
            register_controller(3000),
        ]
    }

    fn delta1_records() -> Vec<MetadataRecord> {
        vec![
            // Broker 1 restarts: the new registration replaces the old one, fenced.
            register_broker(1, 15, true),
            MetadataRecord::UnfenceBroker(UnfenceBrokerRecord { id: 2, epoch: 20 }),
            MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
                broker_id: 2,
                broker_epoch: 20,
                fenced: None,
                in_controlled_shutdown: Some(true),
            }),
            MetadataRecord::FenceBroker(FenceBrokerRecord { id: 1, epoch: 15 }),
            MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
                broker_id: 4,
                broker_epoch: 40,
            }),
            register_broker(5, 50, false),
            register_controller(3001),
        ]
    }

    fn image2_records() -> Vec<MetadataRecord> {
        let MetadataRecord::RegisterBroker(mut two) = register_broker(2, 20, false) else {
            unreachable!()
        };
        two.in_controlled_shutdown = true;
        vec![
            register_broker(1, 15, true),
            MetadataRecord::RegisterBroker(two),
            register_broker(5, 50, false),
            register_controller(3000),
            register_controller(3001),
        ]
    }

    #[test]
    fn image1_plus_delta1_is_image2() {
        let image1 = image(&image1_records());
        let image2 = image(&image2_records());
        assert_eq!(apply(&image1, &delta1_records()), image2);
        let cluster = &image2.cluster;
        assert_eq!(
            cluster.brokers().map(|b| b.id).collect::<Vec<_>>(),
            [1, 2, 5]
        );
        let one = cluster.broker(1).unwrap();
        assert_eq!((one.epoch, one.fenced), (15, true));
        assert_eq!(one.incarnation_id, Uuid::from_u128(0xb000 + 15));
        let two = cluster.broker(2).unwrap();
        assert_eq!((two.fenced, two.in_controlled_shutdown), (false, true));
        assert_eq!(two.rack.as_deref(), Some("rack0"));
        assert_eq!(
            two.endpoint("PLAINTEXT"),
            Some(&endpoint("PLAINTEXT", "broker2", 9092))
        );
        assert_eq!(two.endpoint("SSL"), None);
        assert!(cluster.broker(4).is_none());
        assert_eq!(
            cluster.controllers().map(|c| c.id).collect::<Vec<_>>(),
            [3000, 3001]
        );
        let controller = cluster.controller(3001).unwrap();
        assert_eq!(
            controller.endpoint("CONTROLLER").map(|e| e.port),
            Some(9093)
        );
        assert_eq!(controller.directory_id, Uuid::from_u128(0xcd00 + 3001));
    }

    #[test]
    fn every_batch_split_gives_image2() {
        assert_every_batch_split(
            &image(&image1_records()),
            &delta1_records(),
            &image(&image2_records()),
        );
    }

    #[test]
    fn delta_lists_changed_brokers() {
        let mut delta = MetadataDelta::new(Arc::new(image(&image1_records())));
        delta.replay_all(&delta1_records()).unwrap();
        let cluster = delta.cluster_delta().unwrap();
        let changed: Vec<(i32, Option<i64>)> = cluster
            .changed_brokers()
            .map(|(id, b)| (id, b.map(|b| b.epoch)))
            .collect();
        assert_eq!(
            changed,
            [(1, Some(15)), (2, Some(20)), (4, None), (5, Some(50))]
        );
        assert_eq!(
            cluster
                .changed_controllers()
                .map(|c| c.id)
                .collect::<Vec<_>>(),
            [3001]
        );
        assert!(delta.topics_delta().is_none());
    }

    #[test]
    fn replay_errors() {
        let mut delta = MetadataDelta::new(Arc::new(image(&image1_records())));
        assert_eq!(
            delta.replay(&MetadataRecord::FenceBroker(FenceBrokerRecord {
                id: 9,
                epoch: 1
            })),
            Err(ReplayError::UnknownBroker {
                record: "FenceBrokerRecord",
                broker_id: 9
            })
        );
        let stale = MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
            broker_id: 1,
            broker_epoch: 9,
        });
        let err = delta.replay(&stale).unwrap_err();
        assert_eq!(
            err.to_string(),
            "UnregisterBrokerRecord names broker 1 with epoch 9, but its current registration \
             has epoch 10 (the record is for an older registration)"
        );
        assert!(delta.cluster_delta().is_none());
        // An unregistered broker is unknown to later records.
        delta
            .replay(&MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
                broker_id: 4,
                broker_epoch: 40,
            }))
            .unwrap();
        assert!(matches!(
            delta.replay(&MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
                id: 4,
                epoch: 40
            })),
            Err(ReplayError::UnknownBroker { .. })
        ));
    }

    #[test]
    fn round_trip_through_records() {
        assert_round_trip(&image(&image2_records()));
        assert_eq!(MetadataImage::empty().cluster.brokers().count(), 0);
    }
}
