//! The metadata loader actor: the only writer of the published image.
//!
//! It owns the installed publishers. Committed batches from the metadata log's state machine
//! arrive as [`ApplyBatches`]; the loader replays them into one [`MetadataDelta`], builds the new
//! immutable image, swaps it into the shared `ArcSwap`, then hands `(delta, image, manifest)` to
//! every publisher in install order. A publisher that fails or panics is logged and counted and
//! the others still run. A publisher installed later first gets the whole image as a delta from
//! the empty image.
//!
//! The write that committed the batches is answered once the image is swapped and the
//! publishers that hold the answer ([`MetadataPublisher::holds_the_answer`]: ACLs, quotas,
//! configs) have run; the data path's publishers (logs, replication, groups) run after it, and
//! [`PublishedOffset`] says when every publisher has seen an image. Requests that read their
//! state wait for it (`HandlerContext::publishers_caught_up`), so a produce right after a
//! create finds the new log, while the create's answer does not wait for 1,000 logs' set-up.
//!
//! A record that does not replay stops metadata processing, as Kafka's fatal fault handler
//! does: the controller validated every record before committing it, so such a record means a
//! bug or an incompatible log, and skipping it would leave this node's image different from
//! everyone else's for good. The loader logs it, counts it
//! (`gregor_metadata_replay_errors_total`), calls the [`FatalFaultHandler`] the node installed
//! (the node's exits the process with status 1), publishes nothing, and refuses every later
//! batch.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use actix::prelude::*;
use arc_swap::ArcSwap;
use futures::future::BoxFuture;
use futures::FutureExt;
use openraft::LogId;
use tokio::sync::{oneshot, watch};

use gregor_publishers::kafka_uuid::KafkaUuid;
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
    /// Told the outcome as soon as the image is swapped and the publishers that hold the
    /// answer have run, before the others run (the metadata log's applier waits on this).
    pub answer: Option<oneshot::Sender<Result<(), ApplyError>>>,
}

/// The offset of the last image every installed publisher has taken in. Published images run
/// ahead of it while the publishers that do not hold the answer run; readers of their state
/// wait for it to reach the image they read.
#[derive(Clone, Debug)]
pub struct PublishedOffset(Arc<watch::Sender<u64>>);

impl Default for PublishedOffset {
    fn default() -> Self {
        PublishedOffset(Arc::new(watch::Sender::new(0)))
    }
}

impl PublishedOffset {
    fn mark(&self, offset: u64) {
        self.0.send_if_modified(|published| {
            let moved = offset > *published;
            *published = (*published).max(offset);
            moved
        });
    }

    /// The offset every publisher has seen.
    pub fn offset(&self) -> u64 {
        *self.0.borrow()
    }

    /// Waits until every publisher has seen `offset`, at most `limit`; whether they have.
    pub async fn wait_for(&self, offset: u64, limit: std::time::Duration) -> bool {
        if self.offset() >= offset {
            return true;
        }
        let mut published = self.0.subscribe();
        let caught_up = tokio::time::timeout(limit, published.wait_for(|seen| *seen >= offset))
            .await
            .is_ok_and(|seen| seen.is_ok());
        caught_up
    }
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

/// What the loader calls once when a committed record cannot be replayed (the node's handler
/// exits the process; tests record the fault instead).
pub type FatalFaultHandler = Arc<dyn Fn(&ApplyError) + Send + Sync>;

/// The loader. Its state is the publishers; the image lives in the shared `ArcSwap` that only
/// this actor stores into.
pub struct Loader {
    image: Arc<ArcSwap<MetadataImage>>,
    publishers: Vec<Box<dyn MetadataPublisher>>,
    on_fatal: Option<FatalFaultHandler>,
    /// Set by the first record that did not replay; every later apply is refused with it.
    fault: Option<ApplyError>,
    published: PublishedOffset,
}

impl Loader {
    /// A loader publishing into `image`.
    pub fn new(image: Arc<ArcSwap<MetadataImage>>) -> Self {
        Loader {
            image,
            publishers: Vec::new(),
            on_fatal: None,
            fault: None,
            published: PublishedOffset::default(),
        }
    }

    /// Reports to `published` the offset of each image every publisher has taken in.
    pub fn reporting_to(mut self, published: PublishedOffset) -> Self {
        self.published = published;
        self
    }

    /// Calls `handler` when a committed record cannot be replayed (see the module docs).
    pub fn with_fatal_fault_handler(mut self, handler: FatalFaultHandler) -> Self {
        self.on_fatal = Some(handler);
        self
    }

    /// Records a replay failure as this loader's fatal fault and reports it.
    fn fail(&mut self, fault: ApplyError) -> ApplyError {
        gregor_metrics::replay_error();
        tracing::error!(error = %fault, "metadata processing stopped: a committed record cannot be applied");
        if let Some(handler) = &self.on_fatal {
            handler(&fault);
        }
        self.fault = Some(fault.clone());
        fault
    }

    /// Hands the image to the publishers that hold the answer, then tells `answer`, then hands
    /// it to the others; each group in install order.
    fn publish(
        &mut self,
        delta: &MetadataDelta,
        image: &Arc<MetadataImage>,
        manifest: &LoaderManifest,
        mut answer: Option<oneshot::Sender<Result<(), ApplyError>>>,
    ) {
        for holds_the_answer in [true, false] {
            for publisher in &mut self.publishers {
                if publisher.holds_the_answer() == holds_the_answer {
                    publish_one(publisher.as_mut(), delta, image, manifest);
                }
            }
            if holds_the_answer {
                if let Some(answer) = answer.take() {
                    // The applier may have given up waiting; the image stands either way.
                    let _ = answer.send(Ok(()));
                    // The thread woken by the answer is usually queued on this core (the
                    // kernel places a wakee beside its waker) and would wait out the deferred
                    // publishers' 1-2 ms (a 1,000-partition topic) before carrying the
                    // answer on; yielding lets it go first.
                    std::thread::yield_now();
                }
            }
        }
        self.published.mark(image.provenance.last_log_index);
    }

    /// Builds the image `delta` leads to, stores it for the handlers and counts it; the time is
    /// that since `started`.
    fn store_image(
        &self,
        delta: &MetadataDelta,
        last_applied: LogId<u64>,
        started: Instant,
    ) -> (Arc<MetadataImage>, Provenance, std::time::Duration) {
        let provenance = provenance_of(last_applied);
        let image = Arc::new(delta.apply(provenance));
        self.image.store(image.clone());
        let elapsed = started.elapsed();
        gregor_metrics::image_published(
            provenance.last_log_index,
            image.topics.topic_count(),
            image.topics.partition_count(),
            elapsed,
        );
        (image, provenance, elapsed)
    }

    /// Replays `batches` into the next image, swaps it in and publishes it.
    fn apply_batches(
        &mut self,
        batches: &[(LogId<u64>, MetadataBatch)],
        last_applied: LogId<u64>,
        answer: &mut Option<oneshot::Sender<Result<(), ApplyError>>>,
    ) -> Result<(), ApplyError> {
        if let Some(fault) = &self.fault {
            return Err(fault.clone());
        }
        let started = Instant::now();
        let mut delta = MetadataDelta::new(self.image.load_full());
        let mut num_records = 0;
        for (log_id, batch) in batches {
            num_records += batch.records.len();
            if let Err(fault) = replay_into(&mut delta, Some(log_id.index), &batch.records) {
                return Err(self.fail(fault));
            }
        }
        let (image, provenance, elapsed) = self.store_image(&delta, last_applied, started);
        let manifest = LoaderManifest::LogDelta {
            provenance,
            num_batches: batches.len(),
            num_records,
            elapsed_ns: elapsed.as_nanos() as u64,
        };
        self.publish(&delta, &image, &manifest, answer.take());
        Ok(())
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

/// Replays `records` stored at log offset `offset` (`None`: snapshot records, whose epochs are
/// resolved already). The first record that does not replay is the error.
fn replay_into(
    delta: &mut MetadataDelta,
    offset: Option<u64>,
    records: &[MetadataRecord],
) -> Result<(), ApplyError> {
    for (position, record) in records.iter().enumerate() {
        let replayed = match offset {
            Some(offset) => delta.replay_at(record, offset),
            None => delta.replay(record),
        };
        if let Err(error) = replayed {
            let at = offset.map_or_else(|| "the snapshot".to_owned(), |o| format!("offset {o}"));
            return Err(ApplyError::new(format!(
                "record {position} of the batch at {at} ({record:?}) does not apply: {error}"
            )));
        }
    }
    Ok(())
}

impl Actor for Loader {
    type Context = Context<Self>;
}

impl Handler<ApplyBatches> for Loader {
    type Result = Result<(), ApplyError>;

    fn handle(&mut self, msg: ApplyBatches, _: &mut Self::Context) -> Self::Result {
        let mut answer = msg.answer;
        let outcome = self.apply_batches(&msg.batches, msg.last_applied, &mut answer);
        if let (Err(fault), Some(answer)) = (&outcome, answer) {
            let _ = answer.send(Err(fault.clone()));
        }
        outcome
    }
}

impl Handler<InstallSnapshot> for Loader {
    type Result = Result<(), ApplyError>;

    fn handle(&mut self, msg: InstallSnapshot, _: &mut Self::Context) -> Self::Result {
        if let Some(fault) = &self.fault {
            return Err(fault.clone());
        }
        let started = Instant::now();
        // A snapshot replaces everything: replay it on the empty image, as Kafka's loader does.
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        if let Err(fault) = replay_into(&mut delta, None, &msg.records) {
            return Err(self.fail(fault));
        }
        let (image, provenance, elapsed) = self.store_image(&delta, msg.last_applied, started);
        let manifest = LoaderManifest::Snapshot {
            provenance,
            num_records: msg.records.len(),
            elapsed_ns: elapsed.as_nanos() as u64,
        };
        self.publish(&delta, &image, &manifest, None);
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
        let (answer, answered) = oneshot::channel();
        // `do_send`: the answer comes through `answered`, before the message's own result.
        self.loader.do_send(ApplyBatches {
            batches,
            last_applied,
            answer: Some(answer),
        });
        async move {
            answered.await.map_err(|_| {
                ApplyError::new("the metadata loader stopped before applying the batches")
            })?
        }
        .boxed()
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
            tracing::info!(topic = topic.name(), id = %KafkaUuid(topic.id()), "topic created");
        }
        for (id, name) in topics.deleted_topics() {
            tracing::info!(topic = name, id = %KafkaUuid(id), "topic deleted");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use gregor_publishers::records::{RegisterBrokerRecord, TopicRecord, UnfenceBrokerRecord};
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
                    answer: None,
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

    /// A publisher that does not hold the answer, and waits for the test's word before it
    /// takes in each image.
    struct Deferred(Seen, std::sync::mpsc::Receiver<()>);

    impl MetadataPublisher for Deferred {
        fn name(&self) -> &str {
            "deferred"
        }

        fn holds_the_answer(&self) -> bool {
            false
        }

        fn on_metadata_update(
            &mut self,
            _: &MetadataDelta,
            image: &Arc<MetadataImage>,
            _: &LoaderManifest,
        ) -> Result<(), PublishError> {
            self.1
                .recv()
                .map_err(|_| PublishError::new("the test is gone"))?;
            if let Ok(mut seen) = self.0.lock() {
                seen.push((image.topics.topic_count(), 0, false));
            }
            Ok(())
        }
    }

    /// The applier hears back once the image is swapped and the publishers that hold the
    /// answer have run, whatever the others still do; the published offset moves once every
    /// publisher, installed before or after, has taken the image in.
    #[actix_rt::test]
    async fn the_answer_does_not_wait_for_publishers_that_do_not_hold_it() {
        let image = Arc::new(ArcSwap::from_pointee(MetadataImage::empty()));
        let published = PublishedOffset::default();
        let (loader_image, loader_published) = (image.clone(), published.clone());
        // Its own thread: the deferred publisher blocks the loader while the test goes on.
        let loader = Loader::start_in_arbiter(&Arbiter::new().handle(), move |_| {
            Loader::new(loader_image).reporting_to(loader_published)
        });
        let (deferred_seen, holding_seen): (Seen, Seen) = (Arc::default(), Arc::default());
        let (release, released) = std::sync::mpsc::channel();
        loader
            .send(InstallPublisher(Box::new(Deferred(
                deferred_seen.clone(),
                released,
            ))))
            .await
            .unwrap();
        loader
            .send(InstallPublisher(Box::new(Recording(
                "holding",
                holding_seen.clone(),
            ))))
            .await
            .unwrap();
        let applier = LoaderApplier::new(loader, image.clone());
        applier
            .apply(vec![(log_id(5), topic_batch("a", 1))], log_id(5))
            .await
            .unwrap();
        assert_eq!(image.load().provenance.last_log_index, 5);
        assert_eq!(seen(&holding_seen), vec![(1, 1, false)]);
        assert!(seen(&deferred_seen).is_empty());
        assert_eq!(published.offset(), 0);
        assert!(!published.wait_for(5, Duration::from_millis(20)).await);

        release.send(()).unwrap();
        assert!(published.wait_for(5, Duration::from_secs(10)).await);
        assert_eq!(seen(&deferred_seen), vec![(1, 0, false)]);
        assert_eq!(published.offset(), 5);
        // Already reached: no wait at all.
        assert!(published.wait_for(4, Duration::ZERO).await);
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
                answer: None,
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
                answer: None,
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
                answer: None,
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

    #[actix_rt::test]
    async fn a_record_that_does_not_apply_stops_the_loader() {
        let image = Arc::new(ArcSwap::from_pointee(MetadataImage::empty()));
        let faults: Arc<Mutex<Vec<String>>> = Arc::default();
        let recorded = faults.clone();
        let loader = Loader::new(image.clone())
            .with_fatal_fault_handler(Arc::new(move |fault: &ApplyError| {
                if let Ok(mut faults) = recorded.lock() {
                    faults.push(fault.to_string());
                }
            }))
            .start();
        let published: Seen = Arc::default();
        loader
            .send(InstallPublisher(Box::new(Recording(
                "seen",
                published.clone(),
            ))))
            .await
            .unwrap();
        // An unfencing of a broker that was never registered, after a valid topic.
        let mut bad = topic_batch("a", 1);
        bad.records
            .push(MetadataRecord::UnfenceBroker(UnfenceBrokerRecord {
                id: 7,
                epoch: 3,
            }));
        let applied = loader
            .send(ApplyBatches {
                batches: vec![(log_id(5), bad)],
                last_applied: log_id(5),
                answer: None,
            })
            .await
            .unwrap();
        let error = applied.expect_err("the batch must not apply");
        assert!(error.to_string().contains("offset 5"), "{error}");
        assert_eq!(faults.lock().unwrap().len(), 1);
        assert!(faults.lock().unwrap()[0].contains("UnfenceBroker"));
        // Nothing of the batch was published, and nothing after it is accepted.
        assert!(image.load().topics.get_by_name("a").is_none());
        assert!(seen(&published).is_empty());
        let next = loader
            .send(ApplyBatches {
                batches: vec![(log_id(6), topic_batch("b", 2))],
                last_applied: log_id(6),
                answer: None,
            })
            .await
            .unwrap();
        assert!(next.is_err());
        assert!(image.load().topics.get_by_name("b").is_none());
        assert_eq!(faults.lock().unwrap().len(), 1, "the handler runs once");
    }

    #[actix_rt::test]
    async fn a_registration_takes_the_offset_of_its_entry_as_epoch() {
        let image = Arc::new(ArcSwap::from_pointee(MetadataImage::empty()));
        let loader = Loader::new(image.clone()).start();
        let registration = MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: 3,
            incarnation_id: Uuid::from_u128(33),
            broker_epoch: gregor_publishers::records::BROKER_EPOCH_AT_OFFSET,
            endpoints: Vec::new(),
            features: Vec::new(),
            rack: None,
            fenced: true,
            in_controlled_shutdown: false,
            log_dirs: Vec::new(),
        });
        loader
            .send(ApplyBatches {
                batches: vec![
                    (log_id(8), topic_batch("a", 1)),
                    (
                        log_id(9),
                        MetadataBatch {
                            records: vec![registration],
                        },
                    ),
                ],
                last_applied: log_id(10),
                answer: None,
            })
            .await
            .unwrap()
            .unwrap();
        assert_eq!(image.load().cluster.broker(3).map(|b| b.epoch), Some(9));
    }
}
