//! Client quota callbacks: the plug-in that decides which clients share a quota and what the
//! quota is (Kafka's `client.quota.callback.class`, KAFKA-18239).
//!
//! ```text
//!  Loader ──(delta, image)──▶ quota publisher (actors/) ──▶ callback.update_cluster_metadata(&view)
//!                               │ client-quota delta          │  view = ImageClusterMetadata:
//!                               ▼                             │  borrowed from the new image, O(1)
//!                       update_quota / remove_quota           ▼ true ⇒ managers re-read limits
//!  request path ──▶ quota manager ──▶ quota_reset_required(type)   (a flag, every request)
//!                                    quota_metric_tags(type, principal, client id) ──▶ sensor
//!                                    quota_limit(type, tags)    (new sensor, or after a change)
//! ```
//!
//! Kafka hands `ClientQuotaCallback#updateClusterMetadata` a whole `Cluster`, rebuilt on every
//! topic or broker change: 200-316 MiB and 1-4 s at a million partitions. Gregor's callbacks
//! instead receive a [`ClusterMetadata`] view that borrows the published [`MetadataImage`]:
//! building it costs nothing, and a callback pays only for what it reads. Plug-ins written
//! against Kafka's old contract implement [`ClientQuotaCallback`] and are wrapped in
//! [`Legacy`], which builds a [`Cluster`] for them (and only for them).
//!
//! What is here:
//! - [`ClientQuotaCallbackHandler`], the trait every plug-in implements, and its argument
//!   types ([`ClientQuotaType`], [`ClientQuotaEntity`], [`KafkaPrincipal`], [`QuotaMetricTags`]);
//! - [`view`]: [`ClusterMetadata`], [`BrokerMetadata`], [`PartitionMetadata`] and
//!   [`ImageClusterMetadata`], the zero-copy implementation over an image;
//! - [`legacy`]: Kafka's `Cluster` contract and its adapter;
//! - [`builtin`]: Kafka's default behaviour ([`DefaultQuotaCallback`], the eight-level entity
//!   precedence) and [`GroupedUserQuotaCallback`] (`grouped-user`);
//! - [`registry`]: plug-ins by name, for `client.quota.callback.class`;
//! - [`testing`]: the conformance suite any plug-in runs with one call.
//!
//! [`MetadataImage`]: crate::MetadataImage
#![deny(missing_docs)]

pub mod builtin;
pub mod legacy;
pub mod registry;
pub mod table;
pub mod testing;
pub mod view;

use std::collections::BTreeMap;
use std::fmt;

pub use builtin::{DefaultQuotaCallback, GroupedUserQuotaCallback};
pub use legacy::{ClientQuotaCallback, Cluster, Legacy, Node, PartitionInfo};
pub use registry::{CallbackFactory, CallbackRegistry, DEFAULT_CALLBACK, GROUPED_USER_CALLBACK};
pub use view::{BrokerMetadata, ClusterMetadata, ImageClusterMetadata, PartitionMetadata};

use crate::records::EntityData;

/// The server configuration a plug-in is configured with: every key of the node's
/// configuration with its value as text (`node.id`, `broker.id`, and any custom key, such as
/// `default.produce.quota` for `grouped-user`).
pub type CallbackConfigs = BTreeMap<String, String>;

/// Kafka's `ClientQuotaType`: which quota manager is asking.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClientQuotaType {
    /// Produce request bytes per second (`producer_byte_rate`).
    Produce,
    /// Fetch response bytes per second (`consumer_byte_rate`).
    Fetch,
    /// Percentage of a handler thread's time (`request_percentage`).
    Request,
    /// Partition mutations per second (`controller_mutation_rate`).
    ControllerMutation,
}

impl ClientQuotaType {
    /// Every type, in Kafka's declaration order.
    pub const ALL: [ClientQuotaType; 4] = [
        ClientQuotaType::Produce,
        ClientQuotaType::Fetch,
        ClientQuotaType::Request,
        ClientQuotaType::ControllerMutation,
    ];

    /// The client-quota key that configures this type.
    pub fn config_key(self) -> &'static str {
        match self {
            ClientQuotaType::Produce => "producer_byte_rate",
            ClientQuotaType::Fetch => "consumer_byte_rate",
            ClientQuotaType::Request => "request_percentage",
            ClientQuotaType::ControllerMutation => "controller_mutation_rate",
        }
    }

    /// The type a client-quota key configures; `None` for `connection_creation_rate` (an IP
    /// quota, never given to callbacks) and unknown keys.
    pub fn for_config_key(key: &str) -> Option<ClientQuotaType> {
        ClientQuotaType::ALL
            .into_iter()
            .find(|quota_type| quota_type.config_key() == key)
    }
}

impl fmt::Display for ClientQuotaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ClientQuotaType::Produce => "PRODUCE",
            ClientQuotaType::Fetch => "FETCH",
            ClientQuotaType::Request => "REQUEST",
            ClientQuotaType::ControllerMutation => "CONTROLLER_MUTATION",
        })
    }
}

/// Kafka's `ClientQuotaEntity.ConfigEntityType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConfigEntityType {
    /// A named user.
    User,
    /// A named client id.
    ClientId,
    /// The default user (`--entity-default` for users).
    DefaultUser,
    /// The default client id.
    DefaultClientId,
}

/// The name Kafka's built-in entities give the default user and client id.
///
/// Kafka's javadoc says default entities have an empty name, but the entities its quota managers
/// actually pass to callbacks (`KafkaQuotaEntity`) name them `<default>`; plug-ins written for
/// Kafka rely on that, so Gregor passes `<default>` too. Test the entity *type*
/// ([`ConfigEntityType::DefaultUser`]), not the name, to recognise a default.
pub const DEFAULT_ENTITY_NAME: &str = "<default>";

/// One part of a quota entity (Kafka's `ClientQuotaEntity.ConfigEntity`).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConfigEntity {
    entity_type: ConfigEntityType,
    name: String,
}

impl ConfigEntity {
    /// The user `name`, as an operator wrote it (not URL-sanitized).
    pub fn user(name: impl Into<String>) -> Self {
        ConfigEntity {
            entity_type: ConfigEntityType::User,
            name: name.into(),
        }
    }

    /// The client id `name`.
    pub fn client_id(name: impl Into<String>) -> Self {
        ConfigEntity {
            entity_type: ConfigEntityType::ClientId,
            name: name.into(),
        }
    }

    /// The default user, named [`DEFAULT_ENTITY_NAME`].
    pub fn default_user() -> Self {
        ConfigEntity {
            entity_type: ConfigEntityType::DefaultUser,
            name: DEFAULT_ENTITY_NAME.to_owned(),
        }
    }

    /// The default client id, named [`DEFAULT_ENTITY_NAME`].
    pub fn default_client_id() -> Self {
        ConfigEntity {
            entity_type: ConfigEntityType::DefaultClientId,
            name: DEFAULT_ENTITY_NAME.to_owned(),
        }
    }

    /// The kind of entity.
    pub fn entity_type(&self) -> ConfigEntityType {
        self.entity_type
    }

    /// The user name (desanitized) or client id; [`DEFAULT_ENTITY_NAME`] for defaults.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// A user and/or client-id quota entity (Kafka's `ClientQuotaEntity`): one or two parts, the
/// user part first.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClientQuotaEntity {
    parts: Vec<ConfigEntity>,
}

impl ClientQuotaEntity {
    /// An entity of `user` and/or `client_id` parts; `None` when both are absent.
    pub fn new(user: Option<ConfigEntity>, client_id: Option<ConfigEntity>) -> Option<Self> {
        let parts: Vec<ConfigEntity> = user.into_iter().chain(client_id).collect();
        (!parts.is_empty()).then_some(ClientQuotaEntity { parts })
    }

    /// The entity a `ClientQuotaRecord` names: `user` and `client-id` parts, a `None` name
    /// being the default. `None` for `ip` entities (connection-rate quotas are not the
    /// callback's business, as in Kafka), unknown types and empty entities.
    pub fn from_record_entity(parts: &[EntityData]) -> Option<Self> {
        let mut user = None;
        let mut client_id = None;
        for part in parts {
            let name = part.entity_name.as_deref();
            match part.entity_type.as_str() {
                "user" => {
                    user = Some(name.map_or_else(ConfigEntity::default_user, ConfigEntity::user))
                }
                "client-id" => {
                    client_id = Some(
                        name.map_or_else(ConfigEntity::default_client_id, ConfigEntity::client_id),
                    )
                }
                _ => return None,
            }
        }
        ClientQuotaEntity::new(user, client_id)
    }

    /// The parts, user first (Kafka's `configEntities()`).
    pub fn config_entities(&self) -> &[ConfigEntity] {
        &self.parts
    }

    /// The user part, if any.
    pub fn user(&self) -> Option<&ConfigEntity> {
        self.parts.iter().find(|part| {
            matches!(
                part.entity_type,
                ConfigEntityType::User | ConfigEntityType::DefaultUser
            )
        })
    }

    /// The client-id part, if any.
    pub fn client_id(&self) -> Option<&ConfigEntity> {
        self.parts.iter().find(|part| {
            matches!(
                part.entity_type,
                ConfigEntityType::ClientId | ConfigEntityType::DefaultClientId
            )
        })
    }
}

impl fmt::Display for ClientQuotaEntity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, part) in self.parts.iter().enumerate() {
            if index > 0 {
                f.write_str(", ")?;
            }
            let kind = match part.entity_type {
                ConfigEntityType::User | ConfigEntityType::DefaultUser => "user",
                ConfigEntityType::ClientId | ConfigEntityType::DefaultClientId => "client-id",
            };
            write!(f, "{kind}={}", part.name)?;
        }
        Ok(())
    }
}

/// Who is asking (Kafka's `KafkaPrincipal`): a type (`User` for every built-in principal)
/// and a name, not sanitized.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KafkaPrincipal {
    /// Principal type, e.g. `User`.
    pub principal_type: String,
    /// Principal name, e.g. `alice` or `ANONYMOUS`.
    pub name: String,
}

impl KafkaPrincipal {
    /// A `User` principal named `name`.
    pub fn user(name: impl Into<String>) -> Self {
        KafkaPrincipal {
            principal_type: "User".to_owned(),
            name: name.into(),
        }
    }
}

impl fmt::Display for KafkaPrincipal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// The tags of a quota metric (Kafka's `Map<String, String>`): clients whose requests get equal
/// tags share one sensor and one quota. Kept sorted by key, each key once, so equal maps compare
/// and hash equal; a handful of entries, so a sorted vector beats a map.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QuotaMetricTags(Vec<(String, String)>);

/// The tag key of the user in the built-in callback's tags.
pub const USER_TAG: &str = "user";
/// The tag key of the client id in the built-in callback's tags.
pub const CLIENT_ID_TAG: &str = "client-id";

impl QuotaMetricTags {
    /// No tags: Kafka's convention for "unlimited" in custom callbacks.
    pub fn empty() -> Self {
        QuotaMetricTags(Vec::new())
    }

    /// The built-in callback's tags, `{user, client-id}` (either may be "").
    pub fn user_client_id(user: &str, client_id: &str) -> Self {
        QuotaMetricTags(vec![
            (CLIENT_ID_TAG.to_owned(), client_id.to_owned()),
            (USER_TAG.to_owned(), user.to_owned()),
        ])
    }

    /// Tags from `(key, value)` pairs; a later pair wins over an earlier one with the same key.
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        let mut tags = QuotaMetricTags::empty();
        for (key, value) in pairs {
            tags.insert(key.into(), value.into());
        }
        tags
    }

    /// Sets `key` to `value`.
    pub fn insert(&mut self, key: String, value: String) {
        match self.0.binary_search_by(|(k, _)| k.as_str().cmp(&key)) {
            Ok(index) => {
                if let Some(slot) = self.0.get_mut(index) {
                    slot.1 = value;
                }
            }
            Err(index) => self.0.insert(index, (key, value)),
        }
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| k.as_str().cmp(key))
            .ok()
            .and_then(|index| self.0.get(index))
            .map(|(_, value)| value.as_str())
    }

    /// The tags, by ascending key.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Number of tags.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there is no tag.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A plug-in could not be created or configured. Start-up stops with this message, which names
/// the plug-in and the offending key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallbackError {
    /// `client.quota.callback.class` names no registered plug-in.
    #[error(
        "client.quota.callback.class: unknown quota callback '{name}' (registered: {registered})"
    )]
    Unknown {
        /// The requested name.
        name: String,
        /// The registered names, comma-separated.
        registered: String,
    },
    /// A plug-in of this name is already registered.
    #[error("a quota callback named '{0}' is already registered")]
    Duplicate(String),
    /// The plug-in refused its configuration.
    #[error("quota callback '{callback}': {message}")]
    Config {
        /// The plug-in's name.
        callback: String,
        /// What is wrong, naming the key.
        message: String,
    },
}

/// A client quota plug-in (Kafka's `ClientQuotaCallback`, reshaped by KAFKA-18239): it maps each
/// request to the tags of the sensor it is recorded in, and each set of tags to a limit.
///
/// One instance serves the whole node and is shared by every connection: all methods but
/// [`configure`](Self::configure) take `&self` and are called concurrently.
///
/// # Correctness requirements
///
/// The quota managers rely on these; [`testing::run_conformance_suite`] checks the ones that
/// can be checked from outside.
///
/// - **Thread-safe, never blocking for long.** `quota_metric_tags`, `quota_limit` and
///   `quota_reset_required` run on the request path of every quota-checked request, possibly on
///   several threads at once, while the publisher calls the update methods. Use short locks or
///   atomics; never block on I/O.
/// - **`quota_reset_required` is a flag read.** It is called on every quota-checked request;
///   return `true` once after something outside [`update_quota`](Self::update_quota) /
///   [`remove_quota`](Self::remove_quota) / [`update_cluster_metadata`](Self::update_cluster_metadata)
///   changed limits (a dynamic config, an external source), then `false` until the next such
///   change (Kafka's `getAndSet(false)`).
/// - **Deterministic tags.** Equal arguments give equal tags while no quota changes; tags are
///   the sensor's identity, so a tag that changes per request leaks sensors (until their hour of
///   idleness is over). A connection keeps the tags it was given and asks again only after any
///   update method was called or `quota_reset_required` answered `true`.
/// - **`quota_limit` answers for tags it handed out.** `None` means unlimited (Kafka's `null`);
///   it is called when a sensor is created and again for every live sensor after a change.
/// - **Updates are exact.** After `update_quota(t, e, v)` then `remove_quota(t, e)`, every
///   limit is what it was before both.
/// - **`update_cluster_metadata` returns whether limits may have changed**, and `false` when
///   called again with an unchanged cluster (the managers re-read every live sensor on `true`).
///   The view borrows the image and cannot be kept: copy what you need. Its cost is the
///   plug-in's own reads; a plug-in that scans every partition pays for every partition.
/// - **Report, don't panic.** A panic in any method is caught, logged and counted
///   (`gregor_quota_callback_failures_total`), and the node keeps serving with the limits it
///   had; but a panicking plug-in may have left its own state half-updated.
/// - **`close` is called once**, at shutdown; nothing follows it.
pub trait ClientQuotaCallbackHandler: Send + Sync {
    /// A short name for logs and metrics (the registry name, e.g. `default`).
    fn name(&self) -> &str;

    /// Receives the node's configuration, once, before any other call. An error stops the node
    /// from starting.
    fn configure(&mut self, configs: &CallbackConfigs) -> Result<(), CallbackError>;

    /// The tags of the sensor a request of `principal` with `client_id` is recorded in.
    fn quota_metric_tags(
        &self,
        quota_type: ClientQuotaType,
        principal: &KafkaPrincipal,
        client_id: &str,
    ) -> QuotaMetricTags;

    /// The limit of the sensor with `tags`, `None` = unlimited.
    fn quota_limit(&self, quota_type: ClientQuotaType, tags: &QuotaMetricTags) -> Option<f64>;

    /// A client quota was set in the metadata log (`kafka-configs --alter --add-config`).
    fn update_quota(&self, quota_type: ClientQuotaType, entity: &ClientQuotaEntity, value: f64);

    /// A client quota was removed from the metadata log.
    fn remove_quota(&self, quota_type: ClientQuotaType, entity: &ClientQuotaEntity);

    /// Whether limits changed outside the update methods since the last call (see the
    /// requirements: a cheap flag).
    fn quota_reset_required(&self, quota_type: ClientQuotaType) -> bool;

    /// Topics, partitions or brokers changed; `cluster` is the new image. Returns whether any
    /// limit may have changed.
    fn update_cluster_metadata(&self, cluster: &dyn ClusterMetadata) -> bool;

    /// Dynamic cluster-wide broker configs changed (Kafka's `Reconfigurable.reconfigure`):
    /// `configs` holds the new values of the keys in
    /// [`reconfigurable_configs`](Self::reconfigurable_configs) that are set. The default
    /// ignores them.
    fn reconfigure(&self, configs: &CallbackConfigs) -> Result<(), CallbackError> {
        let _ = configs;
        Ok(())
    }

    /// The dynamic config keys this plug-in reacts to (none by default).
    fn reconfigurable_configs(&self) -> &[&str] {
        &[]
    }

    /// Releases resources; nothing follows.
    fn close(&self) {}
}

impl fmt::Debug for dyn ClientQuotaCallbackHandler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClientQuotaCallbackHandler({})", self.name())
    }
}

/// Kafka's `Sanitizer.sanitize`: URL-encodes a principal name for quota entities and metric
/// tags (`[A-Za-z0-9._-]` kept, every other byte `%XX`, so a space is `%20` and `*` `%2A`).
pub fn sanitize(name: &str) -> String {
    if name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
    {
        return name.to_owned();
    }
    let mut out = String::with_capacity(name.len() * 3);
    for byte in name.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'-' | b'_') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_sorted_maps() {
        let a = QuotaMetricTags::from_pairs([("user", "u"), ("client-id", "c")]);
        let b = QuotaMetricTags::user_client_id("u", "c");
        assert_eq!(a, b);
        assert_eq!(a.get("user"), Some("u"));
        assert_eq!(a.get("group"), None);
        let c = QuotaMetricTags::from_pairs([("group", "g"), ("group", "h")]);
        assert_eq!(c.iter().collect::<Vec<_>>(), vec![("group", "h")]);
    }

    #[test]
    fn record_entities_become_callback_entities_with_kafkas_default_name() {
        let part = |t: &str, n: Option<&str>| EntityData {
            entity_type: t.into(),
            entity_name: n.map(str::to_owned),
        };
        let entity = ClientQuotaEntity::from_record_entity(&[
            part("client-id", None),
            part("user", Some("a b")),
        ])
        .unwrap();
        assert_eq!(
            entity.config_entities(),
            &[ConfigEntity::user("a b"), ConfigEntity::default_client_id()]
        );
        assert_eq!(entity.client_id().unwrap().name(), "<default>");
        assert_eq!(entity.to_string(), "user=a b, client-id=<default>");
        assert!(ClientQuotaEntity::from_record_entity(&[part("ip", None)]).is_none());
        assert!(ClientQuotaEntity::from_record_entity(&[]).is_none());
    }

    #[test]
    fn sanitizer_matches_kafka() {
        assert_eq!(sanitize("group0_user1"), "group0_user1");
        assert_eq!(sanitize("a b*c/é"), "a%20b%2Ac%2F%C3%A9");
    }
}
