//! The built-in plug-ins: [`DefaultQuotaCallback`] (Kafka's behaviour when no callback is
//! configured, registered as `default`) and [`GroupedUserQuotaCallback`] (`grouped-user`, Kafka's
//! test callback `GroupedUserQuotaCallback` made a supported plug-in).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use super::table::{EntityName, MetricTags, QuotaEntity, QuotaTable};
use super::view::ClusterMetadata;
use super::{
    sanitize, CallbackConfigs, CallbackError, ClientQuotaCallbackHandler, ClientQuotaEntity,
    ClientQuotaType, ConfigEntityType, KafkaPrincipal, QuotaMetricTags, CLIENT_ID_TAG, USER_TAG,
};
use crate::records::NO_LEADER;

/// Locks that survive a panic elsewhere: the state behind them is plain maps that every write
/// leaves consistent, and a quota plug-in must keep answering.
fn read<T>(lock: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn index(quota_type: ClientQuotaType) -> usize {
    match quota_type {
        ClientQuotaType::Produce => 0,
        ClientQuotaType::Fetch => 1,
        ClientQuotaType::Request => 2,
        ClientQuotaType::ControllerMutation => 3,
    }
}

/// The table entity of a plug-in entity: users by sanitized name, as tags carry them.
fn key_of(entity: &ClientQuotaEntity) -> QuotaEntity {
    let user = entity.user().map(|part| match part.entity_type() {
        ConfigEntityType::DefaultUser => EntityName::Default,
        // Entities carry operator-facing names; tags carry sanitized ones (as Kafka's).
        _ => EntityName::Named(sanitize(part.name())),
    });
    let client_id = entity.client_id().map(|part| match part.entity_type() {
        ConfigEntityType::DefaultClientId => EntityName::Default,
        _ => EntityName::Named(part.name().to_owned()),
    });
    QuotaEntity { user, client_id }
}

/// Kafka's built-in quota behaviour as a plug-in (`DefaultQuotaCallback`, reference §4.2):
/// quotas come only from client-quota records, and a request of (user U, client-id C) takes
/// the first configured of
///
/// 1. user U + client-id C, 2. user U + default client-id, 3. user U,
/// 4. default user + client-id C, 5. default user + default client-id, 6. default user,
/// 7. client-id C, 8. default client-id.
///
/// Tags are `{user, client-id}`; only the entity kinds that have quotas keep their tag (only
/// client-id quotas → `("", C)`, only user → `(U, "")`, only user+client → `(U, C)`), and with
/// a mixture the first configured level decides. Each quota type has its own table, as each of
/// Kafka's managers has its own callback instance. It ignores the cluster.
#[derive(Debug, Default)]
pub struct DefaultQuotaCallback {
    tables: RwLock<[QuotaTable; 4]>,
}

impl DefaultQuotaCallback {
    /// No quota configured.
    pub fn new() -> Self {
        DefaultQuotaCallback::default()
    }

    /// The quota configured for exactly `entity`, if any.
    pub fn configured(
        &self,
        quota_type: ClientQuotaType,
        entity: &ClientQuotaEntity,
    ) -> Option<f64> {
        read(&self.tables)[index(quota_type)].get(&key_of(entity))
    }

    /// Whether no quota of `quota_type` is configured (the managers then record nothing).
    pub fn is_empty(&self, quota_type: ClientQuotaType) -> bool {
        read(&self.tables)[index(quota_type)].is_empty()
    }
}

impl ClientQuotaCallbackHandler for DefaultQuotaCallback {
    fn name(&self) -> &str {
        super::registry::DEFAULT_CALLBACK
    }

    fn configure(&mut self, _configs: &CallbackConfigs) -> Result<(), CallbackError> {
        Ok(())
    }

    fn quota_metric_tags(
        &self,
        quota_type: ClientQuotaType,
        principal: &KafkaPrincipal,
        client_id: &str,
    ) -> QuotaMetricTags {
        let tags = read(&self.tables)[index(quota_type)]
            .metric_tags(&sanitize(&principal.name), client_id);
        QuotaMetricTags::user_client_id(&tags.user, &tags.client_id)
    }

    fn quota_limit(&self, quota_type: ClientQuotaType, tags: &QuotaMetricTags) -> Option<f64> {
        // Only the tags this plug-in hands out (both keys present) name a quota.
        let (Some(user), Some(client_id)) = (tags.get(USER_TAG), tags.get(CLIENT_ID_TAG)) else {
            return None;
        };
        read(&self.tables)[index(quota_type)].quota_limit(&MetricTags::new(user, client_id))
    }

    fn update_quota(&self, quota_type: ClientQuotaType, entity: &ClientQuotaEntity, value: f64) {
        write(&self.tables)[index(quota_type)].update(key_of(entity), Some(value));
    }

    fn remove_quota(&self, quota_type: ClientQuotaType, entity: &ClientQuotaEntity) {
        write(&self.tables)[index(quota_type)].update(key_of(entity), None);
    }

    fn quota_reset_required(&self, _quota_type: ClientQuotaType) -> bool {
        // Every change arrives through update_quota/remove_quota, after which the managers
        // re-read limits on their own (Kafka's DefaultQuotaCallback answers false too).
        false
    }

    fn update_cluster_metadata(&self, _cluster: &dyn ClusterMetadata) -> bool {
        false
    }
}

/// The tag `grouped-user` keys its sensors by.
pub const QUOTA_GROUP_TAG: &str = "group";
/// Dynamic config: the default group's produce quota (bytes/s).
pub const DEFAULT_PRODUCE_QUOTA_CONFIG: &str = "default.produce.quota";
/// Dynamic config: the default group's fetch quota (bytes/s).
pub const DEFAULT_FETCH_QUOTA_CONFIG: &str = "default.fetch.quota";

/// The group of user or topic `name`: the text before the first `_`, or "" when there is none
/// or it is at the start (Kafka's `GroupedUserPrincipalBuilder.group`).
pub fn group_of(name: &str) -> &str {
    match name.find('_') {
        Some(at) if at > 0 => &name[..at],
        _ => "",
    }
}

/// Counters of [`GroupedUserQuotaCallback`] calls, shared with whoever holds them (Kafka's test
/// counts `quotaLimit` calls per type to check the managers do not over-ask).
#[derive(Debug, Default)]
pub struct GroupedUserStats {
    quota_limit_calls: [AtomicU64; 4],
    cluster_updates: AtomicU64,
}

impl GroupedUserStats {
    /// `quota_limit` calls for `quota_type` since the last reset.
    pub fn quota_limit_calls(&self, quota_type: ClientQuotaType) -> u64 {
        self.quota_limit_calls[index(quota_type)].load(Ordering::Relaxed)
    }

    /// `update_cluster_metadata` calls since the last reset.
    pub fn cluster_updates(&self) -> u64 {
        self.cluster_updates.load(Ordering::Relaxed)
    }

    /// Sets every counter to 0.
    pub fn reset(&self) {
        for counter in &self.quota_limit_calls {
            counter.store(0, Ordering::Relaxed);
        }
        self.cluster_updates.store(0, Ordering::Relaxed);
    }
}

/// Group quotas for users named `groupN_userM` (`grouped-user`; Kafka's
/// `GroupedUserQuotaCallback` from `CustomQuotaCallbackTest`).
///
/// - A user belongs to the group before the first `_` of its name ([`group_of`]); a user
///   without a group is unlimited (empty tags).
/// - Group quotas are configured as **user** quotas on the entity `<group>_`; `_` (group "") is
///   the default group quota, also settable with the dynamic configs `default.produce.quota` and
///   `default.fetch.quota`. Quotas on other entity kinds are ignored.
/// - Sensors are keyed `{group: <group>}` while the group (or the default) has a quota.
/// - Produce and fetch quotas are multiplied by the share of the group's partitions this broker
///   leads (topics belong to groups by the same prefix rule): `led / total`, `1 / total` when it
///   leads none, 1 when the group has no partition. Request and controller-mutation quotas are
///   not scaled.
///
/// Its `update_cluster_metadata` counts leaders over every partition of every topic: its cost
/// grows with the cluster (the view itself costs nothing).
#[derive(Debug)]
pub struct GroupedUserQuotaCallback {
    broker_id: i32,
    quotas: RwLock<[HashMap<String, f64>; 4]>,
    partition_ratio: RwLock<HashMap<String, f64>>,
    reset_required: [AtomicBool; 4],
    stats: Arc<GroupedUserStats>,
}

impl Default for GroupedUserQuotaCallback {
    fn default() -> Self {
        GroupedUserQuotaCallback::new()
    }
}

impl GroupedUserQuotaCallback {
    /// An unconfigured instance (`configure` sets the broker id).
    pub fn new() -> Self {
        GroupedUserQuotaCallback {
            broker_id: NO_LEADER,
            quotas: RwLock::default(),
            partition_ratio: RwLock::default(),
            reset_required: Default::default(),
            stats: Arc::default(),
        }
    }

    /// The call counters (shared: keep the `Arc` before boxing the plug-in).
    pub fn stats(&self) -> Arc<GroupedUserStats> {
        Arc::clone(&self.stats)
    }

    /// The share of `group`'s partitions led by this broker, as last computed.
    pub fn partition_ratio(&self, group: &str) -> Option<f64> {
        read(&self.partition_ratio).get(group).copied()
    }

    fn quota_or_default(&self, group: &str, quota_type: ClientQuotaType) -> Option<f64> {
        let quotas = read(&self.quotas);
        let table = &quotas[index(quota_type)];
        let configured = table.get(group).or_else(|| table.get("")).copied()?;
        Some(match quota_type {
            ClientQuotaType::Produce | ClientQuotaType::Fetch => {
                match self.partition_ratio(group) {
                    Some(ratio) if ratio > 0.0 => configured * ratio,
                    _ => configured,
                }
            }
            ClientQuotaType::Request | ClientQuotaType::ControllerMutation => configured,
        })
    }

    /// The group an entity configures: the first part must be a user (Kafka throws otherwise;
    /// a plug-in must not take the node down, so the quota is ignored with a warning).
    fn entity_group(entity: &ClientQuotaEntity) -> Option<&str> {
        let first = entity.config_entities().first()?;
        match first.entity_type() {
            ConfigEntityType::User | ConfigEntityType::DefaultUser => Some(group_of(first.name())),
            ConfigEntityType::ClientId | ConfigEntityType::DefaultClientId => {
                tracing::warn!(%entity, "grouped-user quotas are user quotas on '<group>_'; ignored");
                None
            }
        }
    }

    fn apply_defaults(&self, configs: &CallbackConfigs) -> Result<bool, CallbackError> {
        let mut changed = false;
        for (key, quota_type) in [
            (DEFAULT_PRODUCE_QUOTA_CONFIG, ClientQuotaType::Produce),
            (DEFAULT_FETCH_QUOTA_CONFIG, ClientQuotaType::Fetch),
        ] {
            let Some(text) = configs.get(key) else {
                continue;
            };
            let value: i64 = text.trim().parse().map_err(|_| CallbackError::Config {
                callback: super::registry::GROUPED_USER_CALLBACK.to_owned(),
                message: format!("{key} must be a whole number of bytes per second, not '{text}'"),
            })?;
            write(&self.quotas)[index(quota_type)].insert(String::new(), value as f64);
            changed = true;
        }
        Ok(changed)
    }
}

impl ClientQuotaCallbackHandler for GroupedUserQuotaCallback {
    fn name(&self) -> &str {
        super::registry::GROUPED_USER_CALLBACK
    }

    fn configure(&mut self, configs: &CallbackConfigs) -> Result<(), CallbackError> {
        let text = configs
            .get("node.id")
            .or_else(|| configs.get("broker.id"))
            .ok_or_else(|| CallbackError::Config {
                callback: self.name().to_owned(),
                message: "needs node.id (or broker.id) to know which partitions it leads".into(),
            })?;
        self.broker_id = text.trim().parse().map_err(|_| CallbackError::Config {
            callback: self.name().to_owned(),
            message: format!("node.id must be an integer, not '{text}'"),
        })?;
        // The static values of the reconfigurable keys are the starting defaults.
        self.apply_defaults(configs)?;
        Ok(())
    }

    fn quota_metric_tags(
        &self,
        quota_type: ClientQuotaType,
        principal: &KafkaPrincipal,
        _client_id: &str,
    ) -> QuotaMetricTags {
        let group = group_of(&principal.name);
        if group.is_empty() || self.quota_or_default(group, quota_type).is_none() {
            return QuotaMetricTags::empty();
        }
        QuotaMetricTags::from_pairs([(QUOTA_GROUP_TAG, group)])
    }

    fn quota_limit(&self, quota_type: ClientQuotaType, tags: &QuotaMetricTags) -> Option<f64> {
        self.stats.quota_limit_calls[index(quota_type)].fetch_add(1, Ordering::Relaxed);
        tags.get(QUOTA_GROUP_TAG)
            .and_then(|group| self.quota_or_default(group, quota_type))
    }

    fn update_quota(&self, quota_type: ClientQuotaType, entity: &ClientQuotaEntity, value: f64) {
        if let Some(group) = Self::entity_group(entity) {
            write(&self.quotas)[index(quota_type)].insert(group.to_owned(), value);
        }
    }

    fn remove_quota(&self, quota_type: ClientQuotaType, entity: &ClientQuotaEntity) {
        if let Some(group) = Self::entity_group(entity) {
            write(&self.quotas)[index(quota_type)].remove(group);
        }
    }

    fn quota_reset_required(&self, quota_type: ClientQuotaType) -> bool {
        self.reset_required[index(quota_type)].swap(false, Ordering::AcqRel)
    }

    fn update_cluster_metadata(&self, cluster: &dyn ClusterMetadata) -> bool {
        self.stats.cluster_updates.fetch_add(1, Ordering::Relaxed);
        // (total partitions, partitions led here) per group; one entry per group, not per topic.
        let mut counts: HashMap<&str, (usize, usize)> = HashMap::new();
        for (_, topic) in cluster.topics() {
            let entry = counts.entry(group_of(topic)).or_default();
            entry.0 += cluster.partition_count(topic).unwrap_or(0);
            entry.1 += cluster.partitions_led_by(topic, self.broker_id).count();
        }
        let mut ratios = write(&self.partition_ratio);
        let mut changed = false;
        for (group, (total, here)) in &counts {
            let ratio = match (*total, *here) {
                (0, _) => 1.0,
                (total, 0) => 1.0 / total as f64,
                (total, here) => here as f64 / total as f64,
            };
            changed |= ratios.insert((*group).to_owned(), ratio) != Some(ratio);
        }
        // Groups whose topics are all gone stop being scaled (Kafka keeps the stale ratio).
        let with_new = ratios.len();
        ratios.retain(|group, _| counts.contains_key(group.as_str()));
        changed || ratios.len() != with_new
    }

    fn reconfigure(&self, configs: &CallbackConfigs) -> Result<(), CallbackError> {
        if self.apply_defaults(configs)? {
            for flag in &self.reset_required {
                flag.store(true, Ordering::Release);
            }
        }
        Ok(())
    }

    fn reconfigurable_configs(&self) -> &[&str] {
        &[DEFAULT_PRODUCE_QUOTA_CONFIG, DEFAULT_FETCH_QUOTA_CONFIG]
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::quota_callback::testing::{run_conformance_suite, standard_configs, ImageBuilder};
    use crate::quota_callback::{ConfigEntity, ImageClusterMetadata};

    fn entity(user: Option<ConfigEntity>, client: Option<ConfigEntity>) -> ClientQuotaEntity {
        ClientQuotaEntity::new(user, client).unwrap()
    }

    #[test]
    fn default_callback_passes_the_conformance_suite() {
        run_conformance_suite(|| Box::new(DefaultQuotaCallback::new()));
    }

    #[test]
    fn grouped_user_passes_the_conformance_suite() {
        run_conformance_suite(|| Box::new(GroupedUserQuotaCallback::new()));
    }

    /// Every one of the eight levels wins over the ones below it, for (alice, app).
    #[test]
    fn default_precedence_of_all_eight_levels() {
        use ConfigEntity as E;
        let levels = [
            entity(Some(E::user("alice")), Some(E::client_id("app"))),
            entity(Some(E::user("alice")), Some(E::default_client_id())),
            entity(Some(E::user("alice")), None),
            entity(Some(E::default_user()), Some(E::client_id("app"))),
            entity(Some(E::default_user()), Some(E::default_client_id())),
            entity(Some(E::default_user()), None),
            entity(None, Some(E::client_id("app"))),
            entity(None, Some(E::default_client_id())),
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
        let alice = KafkaPrincipal::user("alice");
        let t = ClientQuotaType::Produce;
        for (k, (u, c)) in expected_tags.into_iter().enumerate() {
            let callback = DefaultQuotaCallback::new();
            for (level, e) in levels.iter().enumerate().skip(k) {
                callback.update_quota(t, e, (level + 1) as f64);
            }
            let tags = callback.quota_metric_tags(t, &alice, "app");
            assert_eq!(
                callback.quota_limit(t, &tags),
                Some((k + 1) as f64),
                "level {}",
                k + 1
            );
            assert_eq!(
                tags,
                QuotaMetricTags::user_client_id(u, c),
                "level {}",
                k + 1
            );
            // Other types are untouched.
            let fetch_tags = callback.quota_metric_tags(ClientQuotaType::Fetch, &alice, "app");
            assert_eq!(
                callback.quota_limit(ClientQuotaType::Fetch, &fetch_tags),
                None
            );
        }
    }

    #[test]
    fn default_callback_sanitizes_users_like_the_tags() {
        let callback = DefaultQuotaCallback::new();
        let t = ClientQuotaType::Request;
        callback.update_quota(t, &entity(Some(ConfigEntity::user("a b")), None), 50.0);
        let tags = callback.quota_metric_tags(t, &KafkaPrincipal::user("a b"), "x");
        assert_eq!(tags, QuotaMetricTags::user_client_id("a%20b", ""));
        assert_eq!(callback.quota_limit(t, &tags), Some(50.0));
    }

    #[test]
    fn grouped_user_scales_by_the_share_of_partitions_led_here() {
        let mut callback = GroupedUserQuotaCallback::new();
        callback.configure(&standard_configs()).unwrap(); // node 0
        let group1 = entity(Some(ConfigEntity::user("group1_")), None);
        callback.update_quota(ClientQuotaType::Produce, &group1, 800_000.0);
        callback.update_quota(ClientQuotaType::Request, &group1, 1000.0);
        let user = KafkaPrincipal::user("group1_user1");
        let tags = callback.quota_metric_tags(ClientQuotaType::Produce, &user, "c");
        assert_eq!(tags, QuotaMetricTags::from_pairs([("group", "group1")]));

        // Node 0 leads 99 of group1's 100 partitions, then none once the big topic is gone.
        let image = ImageBuilder::new()
            .broker(0)
            .broker(1)
            .topic_led_by("group1_topic", 1, 1)
            .topic_led_by("group1_largeTopic", 99, 0)
            .build();
        assert!(callback.update_cluster_metadata(&ImageClusterMetadata::new("c", &image)));
        assert_eq!(
            callback.quota_limit(ClientQuotaType::Produce, &tags),
            Some(792_000.0)
        );
        assert_eq!(
            callback.quota_limit(ClientQuotaType::Request, &tags),
            Some(1000.0)
        );
        let image = ImageBuilder::new()
            .broker(0)
            .broker(1)
            .topic_led_by("group1_topic", 1, 1)
            .build();
        assert!(callback.update_cluster_metadata(&ImageClusterMetadata::new("c", &image)));
        assert_eq!(
            callback.quota_limit(ClientQuotaType::Produce, &tags),
            Some(800_000.0)
        );
        assert!(!callback.update_cluster_metadata(&ImageClusterMetadata::new("c", &image)));

        // Users without a group, and groups without a quota, are unlimited.
        assert!(callback
            .quota_metric_tags(
                ClientQuotaType::Produce,
                &KafkaPrincipal::user("admin"),
                "c"
            )
            .is_empty());
        assert!(callback
            .quota_metric_tags(
                ClientQuotaType::Produce,
                &KafkaPrincipal::user("group2_u"),
                "c"
            )
            .is_empty());
        assert_eq!(
            callback.stats().quota_limit_calls(ClientQuotaType::Produce),
            2
        );
    }

    #[test]
    fn grouped_user_reconfigures_the_default_group() {
        let mut callback = GroupedUserQuotaCallback::new();
        callback.configure(&standard_configs()).unwrap();
        assert!(!callback.quota_reset_required(ClientQuotaType::Fetch));
        let configs = CallbackConfigs::from([
            (DEFAULT_PRODUCE_QUOTA_CONFIG.to_owned(), "8000".to_owned()),
            (DEFAULT_FETCH_QUOTA_CONFIG.to_owned(), "2500".to_owned()),
        ]);
        callback.reconfigure(&configs).unwrap();
        assert!(callback.quota_reset_required(ClientQuotaType::Fetch));
        assert!(!callback.quota_reset_required(ClientQuotaType::Fetch));
        let user = KafkaPrincipal::user("group3_u");
        let tags = callback.quota_metric_tags(ClientQuotaType::Fetch, &user, "c");
        assert_eq!(
            callback.quota_limit(ClientQuotaType::Fetch, &tags),
            Some(2500.0)
        );
        let bad =
            CallbackConfigs::from([(DEFAULT_FETCH_QUOTA_CONFIG.to_owned(), "lots".to_owned())]);
        let error = callback.reconfigure(&bad).unwrap_err();
        assert!(error.to_string().contains("default.fetch.quota"), "{error}");
        let mut unconfigured = GroupedUserQuotaCallback::new();
        let error = unconfigured.configure(&CallbackConfigs::new()).unwrap_err();
        assert!(error.to_string().contains("node.id"), "{error}");
    }

    #[test]
    fn groups_follow_kafkas_prefix_rule() {
        assert_eq!(group_of("group0_user1"), "group0");
        assert_eq!(group_of("group0_"), "group0");
        assert_eq!(group_of("_"), "");
        assert_eq!(group_of("_x"), "");
        assert_eq!(group_of("admin"), "");
        assert_eq!(group_of("<default>"), "");
    }
}
