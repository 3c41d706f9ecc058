//! The controller actor over a real single-voter metadata log and loader: when it decides,
//! what it refuses, and that batches of a discarded working image are never written.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use actix::prelude::*;
use arc_swap::ArcSwap;
use gregor_publishers::records::{MetadataBatch, MetadataRecord, TopicRecord};
use gregor_publishers::MetadataImage;
use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{CreateTopicsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use tempfile::TempDir;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::logic::registration::{BrokerRegistrationRequest, NodeRegistration};
use super::logic::TopicDefaults;
use super::submitter::{self, Submission};
use super::*;
use crate::context::Principal;
use crate::loader::{Loader, LoaderApplier};
use crate::raft::{MetadataLog, MetadataLogError, MetadataLogOptions, VoterNode};

struct Node {
    _dir: TempDir,
    log: Arc<MetadataLog>,
    image: Arc<ArcSwap<MetadataImage>>,
    controller: Addr<Controller>,
}

/// A node whose log is opened but not initialized: it leads nothing yet.
async fn node() -> Node {
    let dir = tempfile::tempdir().unwrap();
    let image = Arc::new(ArcSwap::from_pointee(MetadataImage::empty()));
    let loader = Loader::new(image.clone()).start();
    let applier = Arc::new(LoaderApplier::new(loader, image.clone()));
    let log = Arc::new(
        MetadataLog::open(1, dir.path(), applier, MetadataLogOptions::default())
            .await
            .unwrap(),
    );
    let controller = Controller::new(
        log.clone(),
        image.clone(),
        ControllerSettings {
            defaults: TopicDefaults::default(),
            delete_topic_enable: true,
            invalid_record_on_create: None,
            bootstrap_records: Vec::new(),
            leadership: crate::controller::LeadershipSettings::default(),
            group_config_defaults: Default::default(),
            group_config_bounds: Default::default(),
            plugin_broker_configs: Vec::new(),
        },
    )
    .start();
    Node {
        _dir: dir,
        log,
        image,
        controller,
    }
}

async fn lead(node: &Node) {
    node.log
        .initialize_single_voter(VoterNode {
            directory_id: Uuid::from_u128(1),
            endpoints: Vec::new(),
        })
        .await
        .unwrap();
    node.log.wait_ready(Duration::from_secs(10)).await.unwrap();
}

fn create(name: &str) -> CreateTopics {
    CreateTopics {
        request: CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.to_owned())))
            .with_num_partitions(1)
            .with_replication_factor(1)]),
        version: 7,
        principal: Principal::anonymous(),
        client_id: "test".into(),
    }
}

fn combined(node_id: i32) -> NodeRegistration {
    NodeRegistration {
        node_id,
        incarnation_id: Uuid::from_u128(node_id as u128),
        directory_id: Uuid::from_u128(1),
        controller_endpoints: Some(Vec::new()),
        broker: Some(BrokerRegistrationRequest {
            endpoints: Vec::new(),
            rack: None,
            log_dirs: Vec::new(),
        }),
    }
}

#[actix_rt::test]
async fn a_controller_decides_only_once_it_leads_with_the_log_applied() {
    let node = node().await;
    let refused = node.controller.send(create("early")).await.unwrap();
    assert_eq!(
        refused.topics[0].error_code,
        ResponseError::NotController.code()
    );
    let refused = node
        .controller
        .send(RegisterNode(combined(1)))
        .await
        .unwrap();
    assert!(matches!(refused, Err(MetadataLogError::NotLeader { .. })));

    lead(&node).await;
    // Whether it is still catching up or active already, the write is decided once it is.
    assert!(node
        .controller
        .send(RegisterNode(combined(1)))
        .await
        .unwrap()
        .unwrap());
    let unfence = UnfenceBroker {
        broker_id: 1,
        incarnation_id: None,
    };
    assert!(node.controller.send(unfence).await.unwrap().unwrap());
    let created = node.controller.send(create("orders")).await.unwrap();
    assert_eq!(created.topics[0].error_code, 0, "{created:?}");
    let again = node.controller.send(create("orders")).await.unwrap();
    assert_eq!(
        again.topics[0].error_code,
        ResponseError::TopicAlreadyExists.code()
    );
    assert!(node.image.load().topics.get_by_name("early").is_none());
}

#[actix_rt::test]
async fn a_broker_epoch_is_the_offset_of_its_registration_and_fencing_uses_it() {
    let node = node().await;
    lead(&node).await;
    let registered = node
        .controller
        .send(RegisterNode(combined(1)))
        .await
        .unwrap()
        .unwrap();
    assert!(registered);
    let image = node.image.load_full();
    let broker = image.cluster.broker(1).unwrap();
    // Nothing was written after the registration's entry.
    assert_eq!(broker.epoch, image.provenance.last_log_index as i64);
    assert!(broker.fenced);
    let epoch = broker.epoch;

    let unfence = |incarnation: Option<Uuid>| UnfenceBroker {
        broker_id: 1,
        incarnation_id: incarnation,
    };
    // Another incarnation is not unfenced; this one is, once.
    let other = node
        .controller
        .send(unfence(Some(Uuid::from_u128(9))))
        .await;
    assert!(!other.unwrap().unwrap());
    assert!(node
        .controller
        .send(unfence(Some(Uuid::from_u128(1))))
        .await
        .unwrap()
        .unwrap());
    assert!(!node.controller.send(unfence(None)).await.unwrap().unwrap());
    assert!(!node.image.load().cluster.broker(1).unwrap().fenced);

    assert!(node
        .controller
        .send(FenceBroker { broker_id: 1 })
        .await
        .unwrap()
        .unwrap());
    let fenced = node.image.load_full();
    let broker = fenced.cluster.broker(1).unwrap();
    assert!(broker.fenced);
    assert_eq!(
        broker.epoch, epoch,
        "fencing keeps the registration's epoch"
    );
    // The same incarnation joining again writes nothing (no new epoch).
    assert!(!node
        .controller
        .send(RegisterNode(combined(1)))
        .await
        .unwrap()
        .unwrap());
}

fn topic_batch(name: &str) -> MetadataBatch {
    MetadataBatch {
        records: vec![MetadataRecord::Topic(TopicRecord {
            name: name.to_owned(),
            topic_id: Uuid::new_v4(),
        })],
    }
}

#[actix_rt::test]
async fn batches_of_a_discarded_working_image_are_failed_not_written() {
    let node = node().await;
    lead(&node).await;
    let (queue, submissions) = mpsc::unbounded_channel();
    // Generation 0 was discarded (a write of it failed, or a new term began).
    let valid_from = Arc::new(AtomicU64::new(1));
    tokio::spawn(submitter::run(node.log.clone(), submissions, valid_from));
    let mut outcomes = Vec::new();
    for (name, generation) in [("stale-a", 0), ("fresh", 1), ("stale-b", 0)] {
        let (done, outcome) = oneshot::channel();
        queue
            .send(Submission {
                batch: topic_batch(name),
                generation,
                done,
            })
            .unwrap();
        outcomes.push(outcome);
    }
    let results: Vec<bool> = futures::future::join_all(outcomes)
        .await
        .into_iter()
        .map(|r| r.unwrap().is_ok())
        .collect();
    assert_eq!(results, [false, true, false]);
    let image = node.image.load();
    assert!(image.topics.get_by_name("fresh").is_some());
    assert!(image.topics.get_by_name("stale-a").is_none());
    assert!(image.topics.get_by_name("stale-b").is_none());
}

#[actix_rt::test]
async fn a_failed_write_fails_the_batches_validated_on_top_of_it() {
    let node = node().await;
    let (queue, submissions) = mpsc::unbounded_channel();
    let valid_from = Arc::new(AtomicU64::new(0));
    tokio::spawn(submitter::run(
        node.log.clone(),
        submissions,
        valid_from.clone(),
    ));
    let submit = |name: &str, generation: u64| {
        let (done, outcome) = oneshot::channel();
        queue
            .send(Submission {
                batch: topic_batch(name),
                generation,
                done,
            })
            .unwrap();
        outcome
    };
    // Not leading yet: the write fails.
    let failed = submit("first", 0).await.unwrap();
    assert!(matches!(failed, Err(MetadataLogError::NotLeader { .. })));
    assert_eq!(valid_from.load(std::sync::atomic::Ordering::Acquire), 1);

    lead(&node).await;
    // A batch validated on top of the failed one fails too, though raft would take it now;
    // a batch of the next generation (validated on the published image) commits.
    let built_on_failure = submit("second", 0).await.unwrap();
    assert!(matches!(
        built_on_failure,
        Err(MetadataLogError::NotLeader { .. })
    ));
    assert!(submit("third", 1).await.unwrap().is_ok());
    let image = node.image.load();
    assert!(image.topics.get_by_name("first").is_none());
    assert!(image.topics.get_by_name("second").is_none());
    assert!(image.topics.get_by_name("third").is_some());
}
