//! The [`MetadataPublisher`] trait: how the loader hands each new image to the rest of the node.

use std::sync::Arc;

use crate::delta::MetadataDelta;
use crate::image::{MetadataImage, Provenance};

/// What the loader applied to produce the image it is publishing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoaderManifest {
    /// One or more committed log batches on top of the previous image.
    LogDelta {
        /// Last log entry applied.
        provenance: Provenance,
        /// Number of batches (raft entries) in the delta.
        num_batches: usize,
        /// Number of records in the delta.
        num_records: usize,
        /// Time spent replaying and applying, in nanoseconds.
        elapsed_ns: u64,
    },
    /// A whole snapshot, replayed on the empty image (also used for the synthetic snapshot a
    /// late-installed publisher first receives).
    Snapshot {
        /// Log entry the snapshot ends at.
        provenance: Provenance,
        /// Number of records in the snapshot.
        num_records: usize,
        /// Time spent loading, in nanoseconds.
        elapsed_ns: u64,
    },
}

impl LoaderManifest {
    /// The provenance of the image published with this manifest.
    pub fn provenance(&self) -> Provenance {
        match self {
            LoaderManifest::LogDelta { provenance, .. }
            | LoaderManifest::Snapshot { provenance, .. } => *provenance,
        }
    }
}

/// A publisher could not take in an image. The loader logs it with the publisher's name and
/// the image's provenance, and goes on with the next publisher.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PublishError(pub String);

impl PublishError {
    /// An error with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        PublishError(message.into())
    }
}

/// Something that follows the metadata image: the metadata cache, the quota managers, the
/// config handlers... The loader calls every installed publisher with each new image and the
/// delta that produced it: first, in install order, those that hold the answer of the write
/// that made the image ([`MetadataPublisher::holds_the_answer`]), then the others.
///
/// # Correctness requirements
///
/// An implementation must hold to these; the loader relies on them.
///
/// - **The first call is a full picture.** A publisher installed after the loader has started
///   first receives `MetadataDelta::from_empty_with(current image)` with a
///   [`LoaderManifest::Snapshot`]: every area is present in the delta. Do not assume the first
///   delta is small, nor that a `Snapshot` manifest only comes first: a new snapshot from the
///   leader is also published this way, and its delta is relative to the previous image only
///   if it says so through `delta.base()`.
/// - **Use the delta's accessors to skip work.** `delta.topics_delta()` (and the other area
///   accessors) is `None` exactly when that area did not change; when it is `None`,
///   `image.topics` is pointer-equal to the previous image's.
/// - **Treat the arguments as read-only and do not keep the delta.** Both are borrowed: keep
///   the `Arc<MetadataImage>` (a clone is cheap) if you need it later, never a reference into
///   the delta.
/// - **Be quick and never block.** The loader runs publishers one after another on its own
///   task; a slow publisher delays every later publisher and the next image. Hand long work to
///   another task.
/// - **Be idempotent per provenance.** After a failure the loader may publish the same image
///   again (same `manifest.provenance()`); applying it twice must be harmless.
/// - **Report, don't panic.** Return a [`PublishError`] naming what failed. A panic would take
///   the loader down with it.
/// - **`close` releases resources** and is called once, when the loader shuts down or the
///   publisher is removed; no update follows it.
///
/// # Example
///
/// ```
/// use std::sync::Arc;
/// use gregor_publishers::{
///     LoaderManifest, MetadataDelta, MetadataImage, MetadataPublisher, MetadataRecord,
///     Provenance, PublishError,
/// };
/// use gregor_publishers::records::TopicRecord;
///
/// /// Counts topics each time the topics change.
/// struct TopicCounter {
///     topics: usize,
/// }
///
/// impl MetadataPublisher for TopicCounter {
///     fn name(&self) -> &str {
///         "topic-counter"
///     }
///
///     fn on_metadata_update(
///         &mut self,
///         delta: &MetadataDelta,
///         image: &Arc<MetadataImage>,
///         _manifest: &LoaderManifest,
///     ) -> Result<(), PublishError> {
///         if delta.topics_delta().is_some() {
///             self.topics = image.topics.topic_count();
///         }
///         Ok(())
///     }
/// }
///
/// let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
/// delta.replay(&MetadataRecord::Topic(TopicRecord {
///     name: "orders".into(),
///     topic_id: uuid::Uuid::from_u128(1),
/// }))?;
/// let provenance = Provenance { last_log_index: 7, last_log_term: 1, last_applied_time_ms: 0 };
/// let image = Arc::new(delta.apply(provenance));
/// let manifest = LoaderManifest::LogDelta {
///     provenance,
///     num_batches: 1,
///     num_records: 1,
///     elapsed_ns: 0,
/// };
/// let mut publisher = TopicCounter { topics: 0 };
/// publisher.on_metadata_update(&delta, &image, &manifest)?;
/// assert_eq!(publisher.topics, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub trait MetadataPublisher: Send {
    /// A short name for logs and metrics, e.g. `"metadata-cache"`.
    fn name(&self) -> &str;

    /// Takes in a new image. `delta` is what changed since the previously published image
    /// (`delta.base()`), `image` is the new image and `manifest` says what was applied.
    fn on_metadata_update(
        &mut self,
        delta: &MetadataDelta,
        image: &Arc<MetadataImage>,
        manifest: &LoaderManifest,
    ) -> Result<(), PublishError>;

    /// Whether the answer to a metadata write waits until this publisher has taken in the
    /// write's image (the default): state that requests read right after a write (ACLs,
    /// quotas, configs) is then current when the client hears back. A publisher whose readers
    /// first wait for the loader's published offset may return `false`; the loader then
    /// answers the write before running it (after the ones that hold the answer, in install
    /// order among those that do not), so a write's answer does not wait for its work.
    fn holds_the_answer(&self) -> bool {
        true
    }

    /// Releases the publisher's resources; no update follows.
    fn close(&mut self) {}
}
