//! Publishes the digest of every new image as a metric, so operators and tests can check that
//! all nodes hold the same metadata (see `gregor_publishers::image::digest`).

use std::sync::Arc;

use gregor_publishers::{
    LoaderManifest, MetadataDelta, MetadataImage, MetadataPublisher, PublishError,
};

/// Sets `gregor_metadata_image_digest` and its offset for each published image.
pub struct DigestPublisher;

impl MetadataPublisher for DigestPublisher {
    fn name(&self) -> &str {
        "image-digest"
    }

    fn on_metadata_update(
        &mut self,
        _: &MetadataDelta,
        image: &Arc<MetadataImage>,
        _: &LoaderManifest,
    ) -> Result<(), PublishError> {
        gregor_metrics::image_digest(image.provenance.last_log_index, image.digest.gauge_value());
        Ok(())
    }
}
