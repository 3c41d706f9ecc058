//! Feeds the authorizer the ACLs of every image that changed them (Kafka's `AclPublisher`).

use std::sync::Arc;

use gregor_publishers::{
    LoaderManifest, MetadataDelta, MetadataImage, MetadataPublisher, PublishError,
};

use super::Authorizer;

/// Swaps each image's ACLs into the authorizer; see the module docs of [`super`].
pub struct AclPublisher {
    authorizer: Arc<Authorizer>,
}

impl AclPublisher {
    /// A publisher feeding `authorizer`.
    pub fn new(authorizer: Arc<Authorizer>) -> Self {
        AclPublisher { authorizer }
    }
}

impl MetadataPublisher for AclPublisher {
    fn name(&self) -> &str {
        "acls"
    }

    fn on_metadata_update(
        &mut self,
        delta: &MetadataDelta,
        image: &Arc<MetadataImage>,
        manifest: &LoaderManifest,
    ) -> Result<(), PublishError> {
        // A snapshot may replace the ACLs without an ACL delta relative to the last image.
        if delta.acls_delta().is_some() || matches!(manifest, LoaderManifest::Snapshot { .. }) {
            self.authorizer.update(Arc::clone(&image.acls));
            tracing::debug!(acls = image.acls.len(), "authorizer took the image's ACLs");
        }
        Ok(())
    }
}
