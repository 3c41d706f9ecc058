//! The client-quota publisher: hands each change of the image's client quotas to the quota
//! manager actors (Kafka's `DynamicClientQuotaPublisher` + `ClientQuotaMetadataManager`).
//!
//! Each changed key goes to the manager of its type (`producer_byte_rate` → produce,
//! `consumer_byte_rate` → fetch, `request_percentage` → request, `controller_mutation_rate` →
//! controller mutation); unknown keys are ignored. `ip` entities carry connection-rate quotas,
//! which Gregor does not enforce yet: they are logged and skipped. A snapshot replaces every
//! manager's table.

use std::collections::BTreeMap;
use std::sync::Arc;

use gregor_publishers::records::EntityData;
use gregor_publishers::{
    LoaderManifest, MetadataDelta, MetadataImage, MetadataPublisher, PublishError,
};

use super::actor::{ReplaceQuotas, UpdateQuotas};
use super::entity::{sanitize, QuotaEntity};
use super::{QuotaManagers, QuotaType};

/// Follows `image.client_quotas` into the quota managers.
pub struct ClientQuotaPublisher {
    managers: QuotaManagers,
}

impl ClientQuotaPublisher {
    /// A publisher feeding `managers`.
    pub fn new(managers: QuotaManagers) -> Self {
        ClientQuotaPublisher { managers }
    }
}

/// The user/client-id entity of `parts`, or `None` for an `ip` (or unknown) entity.
pub fn quota_entity(parts: &[EntityData]) -> Option<QuotaEntity> {
    let mut entity = QuotaEntity {
        user: None,
        client_id: None,
    };
    for part in parts {
        let name = part.entity_name.as_deref();
        match part.entity_type.as_str() {
            "user" => {
                let sanitized = name.map(sanitize);
                entity = QuotaEntity {
                    user: QuotaEntity::new(Some(sanitized.as_deref()), None).user,
                    ..entity
                };
            }
            "client-id" => {
                entity = QuotaEntity {
                    client_id: QuotaEntity::new(None, Some(name)).client_id,
                    ..entity
                };
            }
            _ => return None,
        }
    }
    (entity.user.is_some() || entity.client_id.is_some()).then_some(entity)
}

impl MetadataPublisher for ClientQuotaPublisher {
    fn name(&self) -> &str {
        "client-quotas"
    }

    fn on_metadata_update(
        &mut self,
        delta: &MetadataDelta,
        image: &Arc<MetadataImage>,
        manifest: &LoaderManifest,
    ) -> Result<(), PublishError> {
        if let LoaderManifest::Snapshot { .. } = manifest {
            let mut all: BTreeMap<QuotaType, Vec<(QuotaEntity, f64)>> = BTreeMap::new();
            for (parts, quotas) in image.client_quotas.iter() {
                let Some(entity) = quota_entity(parts) else {
                    continue;
                };
                for (key, value) in quotas.iter() {
                    if let Some(quota_type) = QuotaType::for_key(key) {
                        all.entry(quota_type)
                            .or_default()
                            .push((entity.clone(), value));
                    }
                }
            }
            for quota_type in QuotaType::ALL {
                let quotas = all.remove(&quota_type).unwrap_or_default();
                self.managers
                    .get(quota_type)
                    .actor
                    .do_send(ReplaceQuotas(quotas));
            }
            return Ok(());
        }
        let Some(quotas_delta) = delta.client_quotas_delta() else {
            return Ok(());
        };
        let mut changes: BTreeMap<QuotaType, Vec<(QuotaEntity, Option<f64>)>> = BTreeMap::new();
        for (parts, keys) in quotas_delta.changed_entities() {
            let Some(entity) = quota_entity(parts) else {
                tracing::info!(entity = ?parts, "connection-rate quotas are not enforced yet; ignored");
                continue;
            };
            for (key, value) in keys {
                match QuotaType::for_key(key) {
                    Some(quota_type) => changes
                        .entry(quota_type)
                        .or_default()
                        .push((entity.clone(), value)),
                    None => tracing::debug!(key, "ignoring a client quota key no manager uses"),
                }
            }
        }
        for (quota_type, changes) in changes {
            self.managers
                .get(quota_type)
                .actor
                .do_send(UpdateQuotas(changes));
        }
        Ok(())
    }
}
