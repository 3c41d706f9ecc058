//! The metadata loader actor: the only writer of the published image.
//!
//! It owns the installed publishers. Committed batches from the metadata log's state machine
//! arrive as [`ApplyBatches`]; the loader replays them into one [`MetadataDelta`], builds the new
//! immutable image, swaps it into the shared `ArcSwap`, then hands `(delta, image, manifest)` to
//! every publisher in install order. A publisher that fails or panics is logged and counted and
//! the others still run. A publisher installed later first gets the whole image as a delta from
//! the empty image.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use actix::prelude::*;
use arc_swap::ArcSwap;
use futures::future::BoxFuture;
use futures::FutureExt;
use openraft::LogId;

use gregor_publishers::records::{MetadataBatch, MetadataRecord};
use gregor_publishers::{
    LoaderManifest, MetadataDelta, MetadataImage, MetadataPublisher, Provenance,
};

use crate::raft::{ApplyError, MetadataApplier, SnapshotRecords};

/// Apply committed batches (log order); answers once every publisher has seen the new image.
#[derive(Message)]
#[rtype(result = "Result<(), ApplyError>")]
pub struct ApplyBatches {
    /// Batches with their log ids.
    pub batches: Vec<(LogId<u64>, MetadataBatch)>,
    /// Log id of the last entry covered (may follow the last batch: blank and membership
    /// entries carry no records).
    pub last_applied: LogId<u64>,
}

/// Replace the image with the one a snapshot describes.
#[derive(Message)]
#[rtype(result = "Result<(), ApplyError>")]
pub struct InstallSnapshot {
    /// The snapshot's records.
    pub records: Vec<MetadataRecord>,
    /// Log id the snapshot covers.
    pub last_applied: LogId<u64>,
}

/// Add a publisher after the ones already installed.
#[derive(Message)]
#[rtype(result = "()")]
pub struct InstallPublisher(pub Box<dyn MetadataPublisher>);

/// The loader. Its state is the publishers; the image lives in the shared `ArcSwap` that only
/// this actor stores into.
pub struct Loader {
    image: Arc<ArcSwap<MetadataImage>>,
    publishers: Vec<Box<dyn MetadataPublisher>>,
}

impl Loader {
    /// A loader publishing into `image`.
    pub fn new(image: Arc<ArcSwap<MetadataImage>>) -> Self {
        Loader {
            image,
            publishers: Vec::new(),
        }
    }

    fn publish(
        &mut self,
        delta: &MetadataDelta,
        image: &Arc<MetadataImage>,
        manifest: &LoaderManifest,
    ) {
        for publisher in &mut self.publishers {
            publish_one(publisher.as_mut(), delta, image, manifest);
        }
    }
}

fn provenance_of(log_id: LogId<u64>) -> Provenance {
    Provenance {
        last_log_index: log_id.index,
        last_log_term: log_id.leader_id.term,
        last_applied_time_ms: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64),
    }
}

fn publish_one(
    publisher: &mut dyn MetadataPublisher,
    delta: &MetadataDelta,
    image: &Arc<MetadataImage>,
    manifest: &LoaderManifest,
) {
    let name = publisher.name().to_owned();
    let started = Instant::now();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        publisher.on_metadata_update(delta, image, manifest)
    }));
    gregor_metrics::publisher_ran(&name, started.elapsed());
    let offset = image.provenance.last_log_index;
    match outcome {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            gregor_metrics::publisher_failed(&name);
            tracing::error!(publisher = %name, offset, %error, "metadata publisher failed");
        }
        Err(_) => {
            gregor_metrics::publisher_failed(&name);
            tracing::error!(publisher = %name, offset, "metadata publisher panicked");
        }
    }
}

fn replay_into(delta: &mut MetadataDelta, offset: u64, records: &[MetadataRecord]) {
    for record in records {
        if let Err(error) = delta.replay(record) {
            // The controller validated these records before committing them, so this is a bug
            // or a log written by an incompatible build: skip the record, keep the node serving.
            gregor_metrics::replay_error();
            tracing::error!(offset, %error, "metadata record skipped");
        }
    }
}

impl Actor for Loader {
    type Context = Context<Self>;
}

impl Handler<ApplyBatches> for Loader {
    type Result = Result<(), ApplyError>;

    fn handle(&mut self, msg: ApplyBatches, _: &mut Self::Context) -> Self::Result {
        let started = Instant::now();
        let mut delta = MetadataDelta::new(self.image.load_full());
        let mut num_records = 0;
        for (log_id, batch) in &msg.batches {
            num_records += batch.records.len();
            replay_into(&mut delta, log_id.index, &batch.records);
        }
        let provenance = provenance_of(msg.last_applied);
        let image = Arc::new(delta.apply(provenance));
        self.image.store(image.clone());
        let elapsed = started.elapsed();
        gregor_metrics::image_published(
            provenance.last_log_index,
            image.topics.topic_count(),
            image.topics.partition_count(),
            elapsed,
        );
        let manifest = LoaderManifest::LogDelta {
            provenance,
            num_batches: msg.batches.len(),
            num_records,
            elapsed_ns: elapsed.as_nanos() as u64,
        };
        self.publish(&delta, &image, &manifest);
        Ok(())
    }
}

impl Handler<InstallSnapshot> for Loader {
    type Result = Result<(), ApplyError>;

    fn handle(&mut self, msg: InstallSnapshot, _: &mut Self::Context) -> Self::Result {
        let started = Instant::now();
        // A snapshot replaces everything: replay it on the empty image, as Kafka's loader does.
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        replay_into(&mut delta, msg.last_applied.index, &msg.records);
        let provenance = provenance_of(msg.last_applied);
        let image = Arc::new(delta.apply(provenance));
        self.image.store(image.clone());
        let elapsed = started.elapsed();
        gregor_metrics::image_published(
            provenance.last_log_index,
            image.topics.topic_count(),
            image.topics.partition_count(),
            elapsed,
        );
        let manifest = LoaderManifest::Snapshot {
            provenance,
            num_records: msg.records.len(),
            elapsed_ns: elapsed.as_nanos() as u64,
        };
        self.publish(&delta, &image, &manifest);
        Ok(())
    }
}

impl Handler<InstallPublisher> for Loader {
    type Result = ();

    fn handle(&mut self, msg: InstallPublisher, _: &mut Self::Context) {
        let mut publisher = msg.0;
        let image = self.image.load_full();
        if !image.is_empty() {
            let delta = MetadataDelta::from_empty_with(&image);
            let manifest = LoaderManifest::Snapshot {
                provenance: image.provenance,
                num_records: 0,
                elapsed_ns: 0,
            };
            publish_one(publisher.as_mut(), &delta, &image, &manifest);
        }
        self.publishers.push(publisher);
    }
}

/// The metadata log's view of the loader: forwards committed entries to the actor.
pub struct LoaderApplier {
    loader: Addr<Loader>,
    image: Arc<ArcSwap<MetadataImage>>,
}

impl LoaderApplier {
    /// An applier feeding `loader`, which publishes into `image`.
    pub fn new(loader: Addr<Loader>, image: Arc<ArcSwap<MetadataImage>>) -> Self {
        LoaderApplier { loader, image }
    }
}

fn mailbox_error(error: MailboxError) -> ApplyError {
    ApplyError::new(format!("the metadata loader is not running: {error}"))
}

impl MetadataApplier for LoaderApplier {
    fn apply(
        &self,
        batches: Vec<(LogId<u64>, MetadataBatch)>,
        last_applied: LogId<u64>,
    ) -> BoxFuture<'static, Result<(), ApplyError>> {
        let request = self.loader.send(ApplyBatches {
            batches,
            last_applied,
        });
        async move { request.await.map_err(mailbox_error)? }.boxed()
    }

    fn snapshot_records(&self) -> SnapshotRecords {
        // Called between applies, so the published image is exactly the applied state.
        let image = self.image.load_full();
        Box::new(move || image.to_records())
    }

    fn install_snapshot(
        &self,
        records: Vec<MetadataRecord>,
        last_applied: LogId<u64>,
    ) -> BoxFuture<'static, Result<(), ApplyError>> {
        let request = self.loader.send(InstallSnapshot {
            records,
            last_applied,
        });
        async move { request.await.map_err(mailbox_error)? }.boxed()
    }
}

/// Above this many topic changes in one image, [`TopicChangeLogPublisher`] logs a summary.
const PER_TOPIC_LOG_LIMIT: usize = 20;

/// A publisher that logs every topic created or deleted, so operators can follow changes.
pub struct TopicChangeLogPublisher;

impl MetadataPublisher for TopicChangeLogPublisher {
    fn name(&self) -> &str {
        "topic-change-log"
    }

    fn on_metadata_update(
        &mut self,
        delta: &MetadataDelta,
        image: &Arc<MetadataImage>,
        manifest: &LoaderManifest,
    ) -> Result<(), gregor_publishers::PublishError> {
        let Some(topics) = delta.topics_delta() else {
            return Ok(());
        };
        let created = topics.created_topics().count();
        let deleted = topics.deleted_topics().count();
        // A snapshot load or a replay after restart can create thousands of topics at once:
        // one summary line then, one line per topic for the changes people make by hand.
        if matches!(manifest, LoaderManifest::Snapshot { .. })
            || created + deleted > PER_TOPIC_LOG_LIMIT
        {
            tracing::info!(
                offset = image.provenance.last_log_index,
                created,
                deleted,
                topics = image.topics.topic_count(),
                partitions = image.topics.partition_count(),
                "metadata image updated"
            );
            return Ok(());
        }
        for topic in topics.created_topics() {
            tracing::info!(topic = topic.name(), id = %topic.id(), "topic created");
        }
        for (id, name) in topics.deleted_topics() {
            tracing::info!(topic = name, %id, "topic deleted");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use gregor_publishers::records::TopicRecord;
    use gregor_publishers::PublishError;
    use openraft::CommittedLeaderId;
    use uuid::Uuid;

    use super::*;

    /// What a recording publisher saw: (topics in the image, topics the delta created, snapshot?).
    type Seen = Arc<Mutex<Vec<(usize, usize, bool)>>>;

    struct Recording(&'static str, Seen);

    impl MetadataPublisher for Recording {
        fn name(&self) -> &str {
            self.0
        }

        fn on_metadata_update(
            &mut self,
            delta: &MetadataDelta,
            image: &Arc<MetadataImage>,
            manifest: &LoaderManifest,
        ) -> Result<(), PublishError> {
            let created = delta
                .topics_delta()
                .map_or(0, |t| t.created_topics().count());
            let snapshot = matches!(manifest, LoaderManifest::Snapshot { .. });
            if let Ok(mut seen) = self.1.lock() {
                seen.push((image.topics.topic_count(), created, snapshot));
            }
            Ok(())
        }
    }

    struct Failing;

    impl MetadataPublisher for Failing {
        fn name(&self) -> &str {
            "failing"
        }

        fn on_metadata_update(
            &mut self,
            _: &MetadataDelta,
            _: &Arc<MetadataImage>,
            _: &LoaderManifest,
        ) -> Result<(), PublishError> {
            Err(PublishError::new("always fails"))
        }
    }

    struct Panicking;

    impl MetadataPublisher for Panicking {
        fn name(&self) -> &str {
            "panicking"
        }

        fn on_metadata_update(
            &mut self,
            _: &MetadataDelta,
            _: &Arc<MetadataImage>,
            _: &LoaderManifest,
        ) -> Result<(), PublishError> {
            panic!("publisher bug")
        }
    }

    fn log_id(index: u64) -> LogId<u64> {
        LogId::new(CommittedLeaderId::new(1, 1), index)
    }

    fn topic_batch(name: &str, id: u128) -> MetadataBatch {
        MetadataBatch {
            records: vec![MetadataRecord::Topic(TopicRecord {
                name: name.to_owned(),
                topic_id: Uuid::from_u128(id),
            })],
        }
    }

    fn seen(seen: &Seen) -> Vec<(usize, usize, bool)> {
        seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    #[actix_rt::test]
    async fn failing_publishers_do_not_stop_the_others() {
        let image = Arc::new(ArcSwap::from_pointee(MetadataImage::empty()));
        let loader = Loader::new(image.clone()).start();
        let first: Seen = Arc::default();
        let last: Seen = Arc::default();
        loader
            .send(InstallPublisher(Box::new(Recording(
                "first",
                first.clone(),
            ))))
            .await
            .unwrap();
        loader
            .send(InstallPublisher(Box::new(Failing)))
            .await
            .unwrap();
        loader
            .send(InstallPublisher(Box::new(Panicking)))
            .await
            .unwrap();
        loader
            .send(InstallPublisher(Box::new(Recording("last", last.clone()))))
            .await
            .unwrap();
        for (index, name) in ["a", "b"].iter().enumerate() {
            let applied = loader
                .send(ApplyBatches {
                    batches: vec![(log_id(index as u64 + 1), topic_batch(name, index as u128))],
                    last_applied: log_id(index as u64 + 1),
                })
                .await
                .unwrap();
            assert!(applied.is_ok());
        }
        assert_eq!(seen(&first), vec![(1, 1, false), (2, 1, false)]);
        assert_eq!(seen(&last), seen(&first));
        assert_eq!(image.load().topics.topic_count(), 2);
        assert_eq!(image.load().provenance.last_log_index, 2);
    }

    #[actix_rt::test]
    async fn a_late_publisher_first_sees_the_whole_image() {
        let image = Arc::new(ArcSwap::from_pointee(MetadataImage::empty()));
        let loader = Loader::new(image.clone()).start();
        let batches = vec![
            (log_id(1), topic_batch("a", 1)),
            (log_id(2), topic_batch("b", 2)),
        ];
        loader
            .send(ApplyBatches {
                batches,
                last_applied: log_id(3),
            })
            .await
            .unwrap()
            .unwrap();
        let late: Seen = Arc::default();
        loader
            .send(InstallPublisher(Box::new(Recording("late", late.clone()))))
            .await
            .unwrap();
        loader
            .send(ApplyBatches {
                batches: vec![(log_id(4), topic_batch("c", 3))],
                last_applied: log_id(4),
            })
            .await
            .unwrap()
            .unwrap();
        // The whole image as a delta from empty (a snapshot), then ordinary deltas.
        assert_eq!(seen(&late), vec![(2, 2, true), (3, 1, false)]);
    }

    #[actix_rt::test]
    async fn a_snapshot_replaces_the_image() {
        let image = Arc::new(ArcSwap::from_pointee(MetadataImage::empty()));
        let loader = Loader::new(image.clone()).start();
        loader
            .send(ApplyBatches {
                batches: vec![(log_id(1), topic_batch("old", 1))],
                last_applied: log_id(1),
            })
            .await
            .unwrap()
            .unwrap();
        loader
            .send(InstallSnapshot {
                records: topic_batch("new", 2).records,
                last_applied: log_id(9),
            })
            .await
            .unwrap()
            .unwrap();
        let image = image.load();
        assert!(image.topics.get_by_name("old").is_none());
        assert!(image.topics.get_by_name("new").is_some());
        assert_eq!(image.provenance.last_log_index, 9);
    }
}
