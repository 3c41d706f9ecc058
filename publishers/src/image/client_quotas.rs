//! Client quotas: [`ClientQuotasImage`] and [`ClientQuotasDelta`].
//!
//! An entity is a list of `(entity_type, entity_name)` parts (`user`, `client-id`, `ip`; a
//! `None` name is the default entity). The image keys entities by their canonical form: parts
//! sorted, each type at most once (see [`canonical_entity`]).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::delta::ReplayError;
use crate::records::{ClientQuotaRecord, EntityData, MetadataRecord};

/// `entity` sorted into the canonical form the image uses as key.
pub fn canonical_entity(entity: &[EntityData]) -> Cow<'_, [EntityData]> {
    if entity.windows(2).all(|pair| pair[0] <= pair[1]) {
        Cow::Borrowed(entity)
    } else {
        let mut sorted = entity.to_vec();
        sorted.sort();
        Cow::Owned(sorted)
    }
}

/// The quota key → value map of one entity (never empty inside an image).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientQuotaImage {
    quotas: BTreeMap<String, f64>,
}

impl ClientQuotaImage {
    /// The value of quota `key` (e.g. `producer_byte_rate`), if set.
    pub fn get(&self, key: &str) -> Option<f64> {
        self.quotas.get(key).copied()
    }

    /// Every `(key, value)`, by key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, f64)> {
        self.quotas.iter().map(|(k, v)| (k.as_str(), *v))
    }

    /// Number of quota keys set.
    pub fn len(&self) -> usize {
        self.quotas.len()
    }

    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        self.quotas.is_empty()
    }
}

/// Every entity's client quotas.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientQuotasImage {
    entities: imbl::OrdMap<Vec<EntityData>, Arc<ClientQuotaImage>>,
}

impl ClientQuotasImage {
    /// The image with no quota.
    pub fn empty() -> Self {
        ClientQuotasImage::default()
    }

    /// Whether no entity has a quota.
    pub fn is_empty(&self) -> bool {
        self.entities.is_empty()
    }

    /// The quotas of `entity` (in any part order), if it has any.
    pub fn get(&self, entity: &[EntityData]) -> Option<&Arc<ClientQuotaImage>> {
        self.entities.get(&*canonical_entity(entity))
    }

    /// Every entity with quotas (canonical form), in ascending entity order.
    pub fn iter(&self) -> impl Iterator<Item = (&[EntityData], &Arc<ClientQuotaImage>)> {
        self.entities
            .iter()
            .map(|(entity, quotas)| (entity.as_slice(), quotas))
    }

    /// Number of entities with quotas.
    pub fn len(&self) -> usize {
        self.entities.len()
    }

    /// The image as records, one `ClientQuotaRecord` per key.
    pub fn to_records(&self, out: &mut Vec<MetadataRecord>) {
        for (entity, quotas) in self.iter() {
            out.extend(quotas.iter().map(|(key, value)| {
                MetadataRecord::ClientQuota(ClientQuotaRecord {
                    entity: entity.to_vec(),
                    key: key.to_string(),
                    value,
                    remove: false,
                })
            }));
        }
    }
}

/// Client quota changes of one delta.
#[derive(Clone, Debug)]
pub struct ClientQuotasDelta {
    base: Arc<ClientQuotasImage>,
    /// Per changed entity: new value per changed key, `None` = removed.
    changes: BTreeMap<Vec<EntityData>, BTreeMap<String, Option<f64>>>,
}

impl ClientQuotasDelta {
    /// An empty delta on `base`.
    pub fn new(base: Arc<ClientQuotasImage>) -> Self {
        ClientQuotasDelta {
            base,
            changes: BTreeMap::new(),
        }
    }

    /// The delta from the empty image that sets every quota of `image`.
    pub fn from_image(image: &ClientQuotasImage) -> Self {
        let changes = image
            .iter()
            .map(|(entity, quotas)| {
                let keys = quotas
                    .iter()
                    .map(|(k, v)| (k.to_string(), Some(v)))
                    .collect();
                (entity.to_vec(), keys)
            })
            .collect();
        ClientQuotasDelta {
            base: Arc::new(ClientQuotasImage::empty()),
            changes,
        }
    }

    /// The image this delta applies to.
    pub fn base(&self) -> &Arc<ClientQuotasImage> {
        &self.base
    }

    /// Changed entities (canonical form) with their changed keys: the new value, or `None` if
    /// removed.
    pub fn changed_entities(
        &self,
    ) -> impl Iterator<Item = (&[EntityData], impl Iterator<Item = (&str, Option<f64>)>)> {
        self.changes.iter().map(|(entity, keys)| {
            (
                entity.as_slice(),
                keys.iter().map(|(key, value)| (key.as_str(), *value)),
            )
        })
    }

    pub(crate) fn replay(&mut self, record: &ClientQuotaRecord) -> Result<(), ReplayError> {
        if record.entity.is_empty() {
            return Err(ReplayError::EmptyQuotaEntity {
                key: record.key.clone(),
            });
        }
        let entity = canonical_entity(&record.entity).into_owned();
        if let Some(pair) = entity
            .windows(2)
            .find(|pair| pair[0].entity_type == pair[1].entity_type)
        {
            return Err(ReplayError::DuplicateQuotaEntityType {
                entity_type: pair[0].entity_type.clone(),
            });
        }
        let value = (!record.remove).then_some(record.value);
        self.changes
            .entry(entity)
            .or_default()
            .insert(record.key.clone(), value);
        Ok(())
    }

    /// The base image with this delta's changes.
    pub fn apply(&self) -> ClientQuotasImage {
        let mut entities = self.base.entities.clone();
        for (entity, keys) in &self.changes {
            let mut quotas = entities
                .get(entity)
                .map(|quotas| quotas.quotas.clone())
                .unwrap_or_default();
            for (key, value) in keys {
                match value {
                    Some(value) => quotas.insert(key.clone(), *value),
                    None => quotas.remove(key),
                };
            }
            if quotas.is_empty() {
                entities.remove(entity);
            } else {
                entities.insert(entity.clone(), Arc::new(ClientQuotaImage { quotas }));
            }
        }
        ClientQuotasImage { entities }
    }
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::delta::MetadataDelta;
    use crate::image::test_util::*;

    const ALICE: &[(&str, Option<&str>)] = &[("user", Some("alice"))];
    const DEFAULT_USER_FOO: &[(&str, Option<&str>)] = &[("client-id", Some("foo")), ("user", None)];
    /// The same entity as `DEFAULT_USER_FOO`, parts in the other order.
    const DEFAULT_USER_FOO_UNSORTED: &[(&str, Option<&str>)] =
        &[("user", None), ("client-id", Some("foo"))];
    const IP: &[(&str, Option<&str>)] = &[("ip", Some("1.2.3.4"))];

    fn image1_records() -> Vec<MetadataRecord> {
        vec![
            quota(ALICE, "producer_byte_rate", Some(1024.0)),
            quota(ALICE, "consumer_byte_rate", Some(2048.0)),
            quota(DEFAULT_USER_FOO_UNSORTED, "request_percentage", Some(50.0)),
        ]
    }

    fn delta1_records() -> Vec<MetadataRecord> {
        vec![
            quota(ALICE, "producer_byte_rate", Some(4096.5)),
            quota(ALICE, "consumer_byte_rate", None),
            quota(DEFAULT_USER_FOO, "request_percentage", None),
            quota(IP, "connection_creation_rate", Some(10.0)),
        ]
    }

    fn image2_records() -> Vec<MetadataRecord> {
        vec![
            quota(ALICE, "producer_byte_rate", Some(4096.5)),
            quota(IP, "connection_creation_rate", Some(10.0)),
        ]
    }

    #[test]
    fn image1_plus_delta1_is_image2() {
        let image1 = image(&image1_records());
        let foo = image1.client_quotas.get(&entity(DEFAULT_USER_FOO)).unwrap();
        assert_eq!(foo.get("request_percentage"), Some(50.0));
        assert!(image1
            .client_quotas
            .get(&entity(DEFAULT_USER_FOO_UNSORTED))
            .is_some());

        let image2 = apply(&image1, &delta1_records());
        assert_eq!(image2, image(&image2_records()));
        let quotas = &image2.client_quotas;
        let alice = quotas.get(&entity(ALICE)).unwrap();
        assert_eq!(
            alice.iter().collect::<Vec<_>>(),
            [("producer_byte_rate", 4096.5)]
        );
        assert_eq!(alice.get("consumer_byte_rate"), None);
        // The last key of (default user, client foo) was removed: the entity is gone.
        assert!(quotas.get(&entity(DEFAULT_USER_FOO)).is_none());
        assert_eq!(
            quotas
                .get(&entity(IP))
                .and_then(|q| q.get("connection_creation_rate")),
            Some(10.0)
        );
        assert_eq!(
            quotas.iter().map(|(e, _)| e.to_vec()).collect::<Vec<_>>(),
            [entity(IP), entity(ALICE)]
        );
        assert_eq!(quotas.len(), 2);
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
    fn delta_lists_changed_entities_and_rejects_bad_ones() {
        let mut delta = MetadataDelta::new(Arc::new(image(&image1_records())));
        delta.replay_all(&delta1_records()).unwrap();
        type Changes = Vec<(String, Option<f64>)>;
        let changed: Vec<(Vec<EntityData>, Changes)> = delta
            .client_quotas_delta()
            .unwrap()
            .changed_entities()
            .map(|(e, keys)| (e.to_vec(), keys.map(|(k, v)| (k.to_string(), v)).collect()))
            .collect();
        assert_eq!(
            changed,
            [
                (
                    entity(DEFAULT_USER_FOO),
                    vec![("request_percentage".to_string(), None)]
                ),
                (
                    entity(IP),
                    vec![("connection_creation_rate".to_string(), Some(10.0))]
                ),
                (
                    entity(ALICE),
                    vec![
                        ("consumer_byte_rate".to_string(), None),
                        ("producer_byte_rate".to_string(), Some(4096.5))
                    ]
                ),
            ]
        );
        let mut delta = MetadataDelta::new(Arc::new(image(&[])));
        assert_eq!(
            delta.replay(&quota(&[], "producer_byte_rate", Some(1.0))),
            Err(ReplayError::EmptyQuotaEntity {
                key: "producer_byte_rate".into()
            })
        );
        assert_eq!(
            delta.replay(&quota(
                &[("user", Some("a")), ("user", Some("b"))],
                "producer_byte_rate",
                Some(1.0)
            )),
            Err(ReplayError::DuplicateQuotaEntityType {
                entity_type: "user".into()
            })
        );
        assert!(delta.client_quotas_delta().is_none());
    }

    #[test]
    fn round_trip_through_records() {
        assert_round_trip(&image(&image1_records()));
        assert_round_trip(&image(&image2_records()));
    }
}
