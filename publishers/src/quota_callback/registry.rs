//! Quota callbacks by name: what `client.quota.callback.class` selects.
//!
//! The node starts from [`CallbackRegistry::with_builtins`] (`default`, `grouped-user`); an
//! embedder adds its own plug-ins before starting the node (see
//! `integration/examples/custom_quota_callback.rs`):
//!
//! ```
//! use gregor_publishers::quota_callback::{
//!     CallbackRegistry, ClientQuotaCallbackHandler, DefaultQuotaCallback,
//! };
//!
//! let mut registry = CallbackRegistry::with_builtins();
//! registry.register("my-quotas", || Box::new(DefaultQuotaCallback::new()))?;
//! let configs = [("node.id".to_owned(), "1".to_owned())].into_iter().collect();
//! let callback = registry.create(Some("grouped-user"), &configs)?;
//! assert_eq!(callback.name(), "grouped-user");
//! let callback = registry.create(None, &configs)?; // unset: Kafka's built-in behaviour
//! assert_eq!(callback.name(), "default");
//! assert!(registry.create(Some("nope"), &configs).is_err());
//! # Ok::<(), gregor_publishers::quota_callback::CallbackError>(())
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::builtin::{DefaultQuotaCallback, GroupedUserQuotaCallback};
use super::{CallbackConfigs, CallbackError, ClientQuotaCallbackHandler};

/// The name of the built-in Kafka behaviour, used when `client.quota.callback.class` is unset.
pub const DEFAULT_CALLBACK: &str = "default";
/// The name of [`GroupedUserQuotaCallback`].
pub const GROUPED_USER_CALLBACK: &str = "grouped-user";

/// Makes a new, unconfigured plug-in.
pub type CallbackFactory = Arc<dyn Fn() -> Box<dyn ClientQuotaCallbackHandler> + Send + Sync>;

/// Plug-ins by name.
#[derive(Clone, Default)]
pub struct CallbackRegistry {
    factories: BTreeMap<String, CallbackFactory>,
}

impl fmt::Debug for CallbackRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.factories.keys()).finish()
    }
}

impl CallbackRegistry {
    /// No plug-in at all.
    pub fn empty() -> Self {
        CallbackRegistry::default()
    }

    /// The built-in plug-ins: `default` and `grouped-user`.
    pub fn with_builtins() -> Self {
        let mut registry = CallbackRegistry::empty();
        registry.factories.insert(
            DEFAULT_CALLBACK.to_owned(),
            Arc::new(|| Box::new(DefaultQuotaCallback::new())),
        );
        registry.factories.insert(
            GROUPED_USER_CALLBACK.to_owned(),
            Arc::new(|| Box::new(GroupedUserQuotaCallback::new())),
        );
        registry
    }

    /// Registers `factory` under `name`; a name can be registered once.
    pub fn register<F>(&mut self, name: &str, factory: F) -> Result<(), CallbackError>
    where
        F: Fn() -> Box<dyn ClientQuotaCallbackHandler> + Send + Sync + 'static,
    {
        if self.factories.contains_key(name) {
            return Err(CallbackError::Duplicate(name.to_owned()));
        }
        self.factories.insert(name.to_owned(), Arc::new(factory));
        Ok(())
    }

    /// Registered names, ascending.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.factories.keys().map(String::as_str)
    }

    /// Creates and configures the plug-in `name` (`None` or "" = [`DEFAULT_CALLBACK`]).
    pub fn create(
        &self,
        name: Option<&str>,
        configs: &CallbackConfigs,
    ) -> Result<Box<dyn ClientQuotaCallbackHandler>, CallbackError> {
        let name = name
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .unwrap_or(DEFAULT_CALLBACK);
        let factory = self
            .factories
            .get(name)
            .ok_or_else(|| CallbackError::Unknown {
                name: name.to_owned(),
                registered: self.names().collect::<Vec<_>>().join(", "),
            })?;
        let mut callback = factory();
        callback.configure(configs)?;
        Ok(callback)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_unknown_names_say_what_exists() {
        let mut registry = CallbackRegistry::with_builtins();
        let error = registry
            .register("default", || Box::new(DefaultQuotaCallback::new()))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "a quota callback named 'default' is already registered"
        );
        let error = registry
            .create(Some("kafka.Foo"), &CallbackConfigs::new())
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "client.quota.callback.class: unknown quota callback 'kafka.Foo' (registered: \
             default, grouped-user)"
        );
        assert_eq!(
            registry
                .create(Some(" "), &CallbackConfigs::new())
                .unwrap()
                .name(),
            "default"
        );
        // A plug-in refusing its configuration stops creation.
        assert!(registry
            .create(Some("grouped-user"), &CallbackConfigs::new())
            .is_err());
    }
}
