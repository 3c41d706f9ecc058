//! Registration decisions (pure): the records that register a node joining the quorum and the
//! record that unfences a broker, decided on the controller's working image like every other
//! write, so they are validated in log order with the writes in flight.
//!
//! A broker registers fenced with [`BROKER_EPOCH_AT_OFFSET`]: its epoch becomes the offset of
//! the registration record (Kafka's broker epoch). Until that record commits the working image
//! holds the placeholder, and nothing that names the epoch (unfence, fence, unregister) is
//! decided for that broker.

use gregor_publishers::records::{
    Endpoint, MetadataRecord, RegisterBrokerRecord, RegisterControllerRecord, UnfenceBrokerRecord,
    BROKER_EPOCH_AT_OFFSET,
};
use gregor_publishers::MetadataImage;
use uuid::Uuid;

use crate::features;

/// A node asking to be registered (what it sent in its Join).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRegistration {
    /// Its node id.
    pub node_id: i32,
    /// The random id of this process's incarnation.
    pub incarnation_id: Uuid,
    /// Directory id of its metadata log dir.
    pub directory_id: Uuid,
    /// Its controller endpoints, when it is a controller.
    pub controller_endpoints: Option<Vec<Endpoint>>,
    /// Its broker side, when it is a broker.
    pub broker: Option<BrokerRegistrationRequest>,
}

/// The broker side of a registration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerRegistrationRequest {
    /// Advertised listeners.
    pub endpoints: Vec<Endpoint>,
    /// `broker.rack`.
    pub rack: Option<String>,
    /// Directory ids of its log dirs.
    pub log_dirs: Vec<Uuid>,
}

/// What a registration decided.
#[derive(Clone, Debug, PartialEq)]
pub struct RegistrationDecision {
    /// Records to write (empty: this incarnation is registered already).
    pub records: Vec<MetadataRecord>,
    /// Whether the records register the broker side anew (it then starts fenced).
    pub registers_broker: bool,
}

/// The records registering `request`'s node: the bootstrap features (then `bootstrap`, the
/// formatted SCRAM credentials) on an empty log, its controller registration and its broker
/// registration (fenced, epoch at its offset), each unless this incarnation is registered
/// already.
pub fn register_node(
    image: &MetadataImage,
    request: &NodeRegistration,
    bootstrap: &[MetadataRecord],
) -> RegistrationDecision {
    let mut records = Vec::new();
    if image.features.metadata_version().is_none() {
        records.extend(features::bootstrap_records());
        records.extend(bootstrap.iter().cloned());
    }
    if let Some(endpoints) = &request.controller_endpoints {
        let registered = image
            .cluster
            .controller(request.node_id)
            .is_some_and(|c| c.incarnation_id == request.incarnation_id);
        if !registered {
            records.push(MetadataRecord::RegisterController(
                RegisterControllerRecord {
                    controller_id: request.node_id,
                    incarnation_id: request.incarnation_id,
                    directory_id: request.directory_id,
                    endpoints: endpoints.clone(),
                    features: features::supported_ranges(),
                },
            ));
        }
    }
    let mut registers_broker = false;
    if let Some(broker) = &request.broker {
        let registered = image
            .cluster
            .broker(request.node_id)
            .is_some_and(|b| b.incarnation_id == request.incarnation_id);
        if !registered {
            registers_broker = true;
            records.push(MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                broker_id: request.node_id,
                incarnation_id: request.incarnation_id,
                broker_epoch: BROKER_EPOCH_AT_OFFSET,
                endpoints: broker.endpoints.clone(),
                features: features::supported_ranges(),
                rack: broker.rack.clone(),
                fenced: true,
                in_controlled_shutdown: false,
                log_dirs: broker.log_dirs.clone(),
            }));
        }
    }
    RegistrationDecision {
        records,
        registers_broker,
    }
}

/// The record unfencing `broker_id` (of `incarnation_id`, when given): empty when the broker is
/// unknown, unfenced, of another incarnation, or its registration is not committed yet.
pub fn unfence_broker(
    image: &MetadataImage,
    broker_id: i32,
    incarnation_id: Option<Uuid>,
) -> Vec<MetadataRecord> {
    let Some(broker) = image.cluster.broker(broker_id) else {
        return Vec::new();
    };
    let same_incarnation = incarnation_id.is_none_or(|id| id == broker.incarnation_id);
    if !broker.fenced || !same_incarnation || broker.epoch == BROKER_EPOCH_AT_OFFSET {
        return Vec::new();
    }
    vec![MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
        id: broker_id,
        epoch: broker.epoch,
    })]
}

#[cfg(test)]
#[allow(clippy::expect_used)] // tests: a panic is the failure report
mod tests {
    use std::sync::Arc;

    use gregor_publishers::{MetadataDelta, Provenance};

    use super::*;

    fn apply(image: MetadataImage, records: &[MetadataRecord], offset: u64) -> MetadataImage {
        let base = Arc::new(image);
        let mut delta = MetadataDelta::new(base);
        for record in records {
            delta.replay_at(record, offset).expect("replays");
        }
        delta.apply(Provenance::default())
    }

    fn combined(node_id: i32, incarnation: u128) -> NodeRegistration {
        NodeRegistration {
            node_id,
            incarnation_id: Uuid::from_u128(incarnation),
            directory_id: Uuid::from_u128(100 + incarnation),
            controller_endpoints: Some(Vec::new()),
            broker: Some(BrokerRegistrationRequest {
                endpoints: Vec::new(),
                rack: Some("r1".into()),
                log_dirs: vec![Uuid::from_u128(7)],
            }),
        }
    }

    #[test]
    fn a_new_node_is_registered_fenced_with_the_offset_as_epoch_then_unfenced() {
        let first = register_node(&MetadataImage::empty(), &combined(1, 1), &[]);
        assert!(first.registers_broker);
        let kinds: Vec<&str> = first
            .records
            .iter()
            .map(|r| match r {
                MetadataRecord::FeatureLevel(_) => "feature",
                MetadataRecord::RegisterController(_) => "controller",
                MetadataRecord::RegisterBroker(_) => "broker",
                _ => "other",
            })
            .collect();
        let features = features::bootstrap_records().len();
        assert_eq!(kinds.len(), features + 2);
        assert_eq!(&kinds[features..], ["controller", "broker"]);

        // Not committed yet (the working image holds the placeholder): no unfencing.
        let pending = {
            let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
            delta.replay_all(&first.records).expect("replays");
            delta.apply(Provenance::default())
        };
        assert!(unfence_broker(&pending, 1, None).is_empty());

        let committed = apply(MetadataImage::empty(), &first.records, 41);
        let broker = committed.cluster.broker(1).expect("registered");
        assert_eq!((broker.epoch, broker.fenced), (41, true));
        assert_eq!(
            unfence_broker(&committed, 1, Some(Uuid::from_u128(1))),
            vec![MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
                id: 1,
                epoch: 41
            })]
        );
        assert!(unfence_broker(&committed, 1, Some(Uuid::from_u128(2))).is_empty());
        assert!(unfence_broker(&committed, 9, None).is_empty());

        // The same incarnation again (a heartbeat): nothing to write, even while fenced.
        let again = register_node(&committed, &combined(1, 1), &[]);
        assert_eq!(
            again,
            RegistrationDecision {
                records: Vec::new(),
                registers_broker: false
            }
        );
        let unfenced = apply(committed, &unfence_broker_records(41), 42);
        assert!(unfence_broker(&unfenced, 1, None).is_empty());

        // A restart (new incarnation) registers again, with a new epoch.
        let restart = register_node(&unfenced, &combined(1, 2), &[]);
        assert!(restart.registers_broker);
        assert_eq!(restart.records.len(), 2);
        let restarted = apply(unfenced, &restart.records, 90);
        assert_eq!(restarted.cluster.broker(1).map(|b| b.epoch), Some(90));
    }

    fn unfence_broker_records(epoch: i64) -> Vec<MetadataRecord> {
        vec![MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
            id: 1,
            epoch,
        })]
    }
}
