//! Which quota applies to a request: Kafka's built-in quota callback (`DefaultQuotaCallback`,
//! reference §4.2) as a pure value. The quota managers read it lock-free on every request, and
//! the `default` plug-in ([`super::builtin::DefaultQuotaCallback`]) wraps the same table, so
//! the eight levels are written once.
//!
//! A [`QuotaTable`] holds one quota type's configured entities. For a request from (user U,
//! client-id C) it picks the metric tags that name the sensor ([`QuotaTable::metric_tags`]) and
//! the limit for those tags ([`QuotaTable::quota_limit`]), walking the eight levels:
//!
//! 1. user U + client-id C      5. default user + default client-id
//! 2. user U + default client   6. default user
//! 3. user U                    7. client-id C
//! 4. default user + client C   8. default client-id

use std::collections::HashMap;

/// One part of a quota entity: a specific name or the default (`<default>`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EntityName {
    /// A specific (sanitized, for users) name.
    Named(String),
    /// The default entity (a null name in records).
    Default,
}

/// A user and/or client-id quota entity (Kafka's `KafkaQuotaEntity`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QuotaEntity {
    /// The user part, already sanitized.
    pub user: Option<EntityName>,
    /// The client-id part.
    pub client_id: Option<EntityName>,
}

impl QuotaEntity {
    /// `user` (sanitized) + `client_id`, `None` for the default of a part that is present.
    pub fn new(user: Option<Option<&str>>, client_id: Option<Option<&str>>) -> Self {
        let part = |p: Option<Option<&str>>| {
            p.map(|name| match name {
                Some(name) => EntityName::Named(name.to_owned()),
                None => EntityName::Default,
            })
        };
        QuotaEntity {
            user: part(user),
            client_id: part(client_id),
        }
    }

    fn kind_bit(&self) -> u8 {
        match (&self.user, &self.client_id) {
            (Some(_), Some(_)) => USER_CLIENT_ID_QUOTA,
            (Some(_), None) => USER_QUOTA,
            (None, Some(_)) => CLIENT_ID_QUOTA,
            (None, None) => 0,
        }
    }
}

/// `quotaTypesEnabled` bits.
const CLIENT_ID_QUOTA: u8 = 1;
const USER_QUOTA: u8 = 2;
const USER_CLIENT_ID_QUOTA: u8 = 4;

/// The metric tags of a sensor: (user, client-id), either possibly "" (Kafka's tag values).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MetricTags {
    /// Sanitized user, or "".
    pub user: String,
    /// Client id, or "".
    pub client_id: String,
}

impl MetricTags {
    /// Tags of (sanitized user or "", client id or "").
    pub fn new(user: &str, client_id: &str) -> Self {
        MetricTags {
            user: user.to_owned(),
            client_id: client_id.to_owned(),
        }
    }
}

/// One quota type's configured entities.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuotaTable {
    quotas: HashMap<QuotaEntity, f64>,
    /// How many entities of each kind (indexed by the bit's position) have a quota: a kind is
    /// enabled while its count is not zero, so removing the last quota of a kind disables it
    /// again (KAFKA-19282; older Kafka kept it enabled until restart). Counted rather than
    /// recomputed from every entity so a change costs O(1), not O(entities).
    per_kind: [usize; 3],
}

impl QuotaTable {
    /// No quota at all.
    pub fn new() -> Self {
        QuotaTable::default()
    }

    /// Sets (`Some`) or removes (`None`) the quota of `entity`.
    pub fn update(&mut self, entity: QuotaEntity, value: Option<f64>) {
        let kind = entity.kind_bit().checked_ilog2().map(|at| at as usize);
        let (added, removed) = match value {
            Some(value) => (self.quotas.insert(entity, value).is_none(), false),
            None => (false, self.quotas.remove(&entity).is_some()),
        };
        if let Some(count) = kind.and_then(|at| self.per_kind.get_mut(at)) {
            *count = *count + usize::from(added) - usize::from(removed);
        }
    }

    /// Which entity kinds have a quota (`quotaTypesEnabled`).
    fn enabled(&self) -> u8 {
        self.per_kind
            .iter()
            .enumerate()
            .filter(|(_, count)| **count > 0)
            .fold(0, |bits, (at, _)| bits | 1 << at)
    }

    /// Whether no quota is configured.
    pub fn is_empty(&self) -> bool {
        self.quotas.is_empty()
    }

    /// The quota configured for exactly `entity`.
    pub fn get(&self, entity: &QuotaEntity) -> Option<f64> {
        self.quotas.get(entity).copied()
    }

    fn has(&self, user: Option<&EntityName>, client_id: Option<&EntityName>) -> bool {
        self.quotas.contains_key(&QuotaEntity {
            user: user.cloned(),
            client_id: client_id.cloned(),
        })
    }

    fn lookup(&self, user: Option<&EntityName>, client_id: Option<&EntityName>) -> Option<f64> {
        self.quotas
            .get(&QuotaEntity {
                user: user.cloned(),
                client_id: client_id.cloned(),
            })
            .copied()
    }

    /// The tags naming the sensor of a request from sanitized user `user` with `client_id`
    /// (Kafka's `quotaMetricTags`): only the kinds that have quotas keep their tag, and with a
    /// mixture the first configured level decides.
    pub fn metric_tags(&self, user: &str, client_id: &str) -> MetricTags {
        match self.enabled() {
            0 | CLIENT_ID_QUOTA => MetricTags::new("", client_id),
            USER_QUOTA => MetricTags::new(user, ""),
            USER_CLIENT_ID_QUOTA => MetricTags::new(user, client_id),
            _ => {
                let u = EntityName::Named(user.to_owned());
                let c = EntityName::Named(client_id.to_owned());
                let d = EntityName::Default;
                let levels: [(Option<&EntityName>, Option<&EntityName>, bool, bool); 6] = [
                    (Some(&u), Some(&c), true, true),
                    (Some(&u), Some(&d), true, true),
                    (Some(&u), None, true, false),
                    (Some(&d), Some(&c), true, true),
                    (Some(&d), Some(&d), true, true),
                    (Some(&d), None, true, false),
                ];
                for (level_user, level_client, keep_user, keep_client) in levels {
                    if self.has(level_user, level_client) {
                        return MetricTags::new(
                            if keep_user { user } else { "" },
                            if keep_client { client_id } else { "" },
                        );
                    }
                }
                // Levels 7 and 8 (and no quota at all) are client-id sensors.
                MetricTags::new("", client_id)
            }
        }
    }

    /// The limit for a sensor with `tags` (Kafka's `quotaLimit`): both tags set tries levels
    /// 1, 2, 4, 5; a user alone 3, 6; a client id alone 7, 8. `None` = unlimited.
    pub fn quota_limit(&self, tags: &MetricTags) -> Option<f64> {
        let d = EntityName::Default;
        match (tags.user.is_empty(), tags.client_id.is_empty()) {
            (false, false) => {
                let u = EntityName::Named(tags.user.clone());
                let c = EntityName::Named(tags.client_id.clone());
                self.lookup(Some(&u), Some(&c))
                    .or_else(|| self.lookup(Some(&u), Some(&d)))
                    .or_else(|| self.lookup(Some(&d), Some(&c)))
                    .or_else(|| self.lookup(Some(&d), Some(&d)))
            }
            (false, true) => {
                let u = EntityName::Named(tags.user.clone());
                self.lookup(Some(&u), None)
                    .or_else(|| self.lookup(Some(&d), None))
            }
            (true, false) => {
                let c = EntityName::Named(tags.client_id.clone());
                self.lookup(None, Some(&c))
                    .or_else(|| self.lookup(None, Some(&d)))
            }
            (true, true) => None,
        }
    }

    /// The limit that applies to a request from sanitized `user` with `client_id`.
    pub fn limit_for(&self, user: &str, client_id: &str) -> (MetricTags, Option<f64>) {
        let tags = self.metric_tags(user, client_id);
        let limit = self.quota_limit(&tags);
        (tags, limit)
    }
}

/// The inverse of [`sanitize`](super::sanitize) (Kafka's `Sanitizer.desanitize`); invalid
/// escapes are kept.
pub fn desanitize(name: &str) -> String {
    let bytes = name.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((high * 16 + low) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::quota_callback::sanitize;

    fn user(name: Option<&str>) -> Option<Option<&str>> {
        Some(name)
    }

    /// Every one of the eight levels wins over the ones below it, for the request
    /// (user "alice", client "app").
    #[test]
    fn precedence_of_all_eight_levels() {
        let levels = [
            QuotaEntity::new(user(Some("alice")), Some(Some("app"))),
            QuotaEntity::new(user(Some("alice")), Some(None)),
            QuotaEntity::new(user(Some("alice")), None),
            QuotaEntity::new(user(None), Some(Some("app"))),
            QuotaEntity::new(user(None), Some(None)),
            QuotaEntity::new(user(None), None),
            QuotaEntity::new(None, Some(Some("app"))),
            QuotaEntity::new(None, Some(None)),
        ];
        let expected_tags = [
            ("alice", "app"),
            ("alice", "app"),
            ("alice", ""),
            ("alice", "app"),
            ("alice", "app"),
            ("alice", ""),
            ("", "app"),
            ("", "app"),
        ];
        // With levels k..8 configured (value = level number), level k applies.
        for k in 0..8 {
            let mut table = QuotaTable::new();
            for (level, entity) in levels.iter().enumerate().skip(k) {
                table.update(entity.clone(), Some((level + 1) as f64));
            }
            let (tags, limit) = table.limit_for("alice", "app");
            assert_eq!(limit, Some((k + 1) as f64), "level {}", k + 1);
            let (u, c) = expected_tags[k];
            if k < 7 {
                assert_eq!(tags, MetricTags::new(u, c), "level {}", k + 1);
            }
            // Only the level itself configured: it applies on its own too.
            let mut alone = QuotaTable::new();
            alone.update(levels[k].clone(), Some(42.0));
            assert_eq!(
                alone.limit_for("alice", "app").1,
                Some(42.0),
                "level {} alone",
                k + 1
            );
            assert_eq!(
                alone.limit_for("bob", "other").1.is_some(),
                matches!(k, 4 | 5 | 7)
            );
        }
    }

    #[test]
    fn tags_follow_the_enabled_kinds() {
        let mut table = QuotaTable::new();
        assert_eq!(
            table.metric_tags("alice", "app"),
            MetricTags::new("", "app")
        );
        table.update(QuotaEntity::new(user(Some("alice")), None), Some(2.0));
        assert_eq!(table.metric_tags("bob", "app"), MetricTags::new("bob", ""));
        assert_eq!(table.limit_for("bob", "app").1, None);
        table.update(QuotaEntity::new(user(Some("alice")), None), None);
        assert!(table.is_empty());
        assert_eq!(table.metric_tags("bob", "app"), MetricTags::new("", "app"));
        // Empty tags have no limit even if a default exists (Kafka's quotaLimit).
        table.update(QuotaEntity::new(None, Some(None)), Some(1.0));
        assert_eq!(table.limit_for("bob", "").1, None);
    }

    #[test]
    fn sanitizer_round_trips() {
        assert_eq!(sanitize("ANONYMOUS"), "ANONYMOUS");
        assert_eq!(sanitize("a b*c/é"), "a%20b%2Ac%2F%C3%A9");
        assert_eq!(desanitize("a%20b%2Ac%2F%C3%A9"), "a b*c/é");
        assert_eq!(desanitize("100%"), "100%");
    }
}
