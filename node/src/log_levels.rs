//! The live log filter behind BROKER_LOGGER (see `gregor_actors::handlers::configs::LogLevels`).
//!
//! `init_logging` installs the `tracing` subscriber with a reloadable `EnvFilter`. The start-up
//! filter (`RUST_LOG`, else `info,openraft=warn`) stays the base; each BROKER_LOGGER change
//! appends or removes one directive and the filter is rebuilt and swapped at once. Changes are
//! not persisted: a restart returns to the start-up filter, as Kafka's are lost on restart.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use gregor_actors::handlers::configs::{LogLevels, KNOWN_LOGGERS, ROOT_LOGGER};

use crate::config::LogFormat;
use tracing_subscriber::{reload, EnvFilter, Registry};

/// The filter when `RUST_LOG` is not set: openraft narrates every election at info; its
/// warnings are what an operator needs.
pub const DEFAULT_FILTER: &str = "info,openraft=warn";

/// The installed filter, if logging was initialised in this process.
static INSTALLED: OnceLock<Arc<LiveFilter>> = OnceLock::new();

/// The reloadable filter and the levels set through BROKER_LOGGER.
pub struct LiveFilter {
    base: String,
    handle: Option<reload::Handle<EnvFilter, Registry>>,
    /// logger → tracing level, in the order they were set.
    overrides: Mutex<BTreeMap<String, String>>,
}

impl LiveFilter {
    /// A filter with `base` directives; `handle` is `None` when nothing was installed (tests).
    pub fn new(base: String, handle: Option<reload::Handle<EnvFilter, Registry>>) -> Self {
        LiveFilter {
            base,
            handle,
            overrides: Mutex::new(BTreeMap::new()),
        }
    }

    /// The level the base filter gives `target` (simple `target=level` / `level` directives;
    /// others only act through the filter itself).
    fn base_level(&self, target: &str) -> Option<String> {
        self.base
            .split(',')
            .map(str::trim)
            .find_map(|directive| match directive.split_once('=') {
                Some((t, level)) if t == target => Some(level.to_owned()),
                None if target == ROOT_LOGGER && is_level(directive) => Some(directive.to_owned()),
                _ => None,
            })
    }

    fn filter_text(&self, overrides: &BTreeMap<String, String>) -> String {
        let mut text = self.base.clone();
        for (logger, level) in overrides {
            text.push(',');
            if logger == ROOT_LOGGER {
                text.push_str(level);
            } else {
                text.push_str(&format!("{logger}={level}"));
            }
        }
        text
    }

    fn update(&self, change: impl FnOnce(&mut BTreeMap<String, String>)) -> Result<(), String> {
        let mut overrides = self
            .overrides
            .lock()
            .map_err(|_| "log filter lock poisoned".to_owned())?;
        let mut next = overrides.clone();
        change(&mut next);
        let filter = EnvFilter::try_new(self.filter_text(&next)).map_err(|e| e.to_string())?;
        if let Some(handle) = &self.handle {
            handle.reload(filter).map_err(|e| e.to_string())?;
        }
        *overrides = next;
        Ok(())
    }

    fn effective(&self, logger: &str, overrides: &BTreeMap<String, String>) -> String {
        // The most specific of: own override or base directive, then each parent module, then
        // root.
        let mut target = logger;
        loop {
            if let Some(level) = overrides
                .get(target)
                .cloned()
                .or_else(|| self.base_level(target))
            {
                return kafka_level(&level);
            }
            match target.rsplit_once("::") {
                Some((parent, _)) if target != ROOT_LOGGER => target = parent,
                _ => break,
            }
        }
        let root = overrides
            .get(ROOT_LOGGER)
            .cloned()
            .or_else(|| self.base_level(ROOT_LOGGER))
            .unwrap_or_else(|| "error".to_owned());
        kafka_level(&root)
    }
}

fn is_level(text: &str) -> bool {
    matches!(
        text.to_ascii_lowercase().as_str(),
        "off" | "error" | "warn" | "info" | "debug" | "trace"
    )
}

/// Kafka's (log4j) name of a `tracing` level.
fn kafka_level(level: &str) -> String {
    level.to_ascii_uppercase()
}

/// The `tracing` level of a Kafka level name (FATAL has no equivalent: `error`).
fn tracing_level(level: &str) -> &'static str {
    match level {
        "TRACE" => "trace",
        "DEBUG" => "debug",
        "INFO" => "info",
        "WARN" => "warn",
        _ => "error",
    }
}

impl LogLevels for LiveFilter {
    fn loggers(&self) -> Vec<(String, String)> {
        let overrides = match self.overrides.lock() {
            Ok(guard) => guard.clone(),
            Err(_) => BTreeMap::new(),
        };
        let mut names: Vec<String> = KNOWN_LOGGERS.iter().map(|s| (*s).to_owned()).collect();
        for name in overrides.keys() {
            if !names.contains(name) {
                names.push(name.clone());
            }
        }
        names
            .into_iter()
            .map(|name| {
                let level = self.effective(&name, &overrides);
                (name, level)
            })
            .collect()
    }

    fn set_level(&self, logger: &str, level: &str) -> Result<(), String> {
        let level = tracing_level(level).to_owned();
        self.update(|overrides| {
            overrides.insert(logger.to_owned(), level);
        })
    }

    fn unset_level(&self, logger: &str) -> Result<(), String> {
        self.update(|overrides| {
            overrides.remove(logger);
        })
    }
}

/// Installs the log formatter with a reloadable filter: `RUST_LOG` (else [`DEFAULT_FILTER`]),
/// to stderr, coloured only on a terminal so that scripts can parse the lines.
pub fn init_logging() {
    init_logging_as(None);
}

/// The variable that picks the log format (`text` or `json`); it wins over `log.format`.
pub const LOG_FORMAT_ENV: &str = "RUST_LOG_FORMAT";

/// [`init_logging`] in the format `RUST_LOG_FORMAT` names, else `configured`, else text. JSON
/// writes one object per line (`timestamp`, `level`, `fields.message`, the other fields, `target`)
/// for log shippers; it is never coloured.
pub fn init_logging_as(configured: Option<LogFormat>) {
    use std::io::IsTerminal;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let env_text = std::env::var(LOG_FORMAT_ENV).ok();
    let from_env = env_text
        .as_deref()
        .and_then(|text| LogFormat::parse(text).ok());
    let format = from_env.or(configured).unwrap_or(LogFormat::Text);
    let base = std::env::var("RUST_LOG")
        .ok()
        .filter(|text| EnvFilter::try_new(text).is_ok())
        .unwrap_or_else(|| DEFAULT_FILTER.to_owned());
    let filter = EnvFilter::try_new(&base).unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let (layer, handle) = reload::Layer::new(filter);
    let text = (format == LogFormat::Text).then(|| {
        tracing_subscriber::fmt::layer()
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
    });
    let json = (format == LogFormat::Json).then(|| {
        tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
    });
    let installed = tracing_subscriber::registry()
        .with(layer)
        .with(text)
        .with(json)
        .try_init()
        .is_ok();
    let live = LiveFilter::new(base, installed.then_some(handle));
    let _ = INSTALLED.set(Arc::new(live));
    if let (Some(text), None) = (env_text, from_env) {
        tracing::warn!("{LOG_FORMAT_ENV}={text} is neither text nor json; ignored");
    }
}

/// The live filter `init_logging` installed, or a detached one (changes only recorded) when
/// logging was not initialised, e.g. in tests that start a node in-process.
pub fn installed() -> Arc<LiveFilter> {
    INSTALLED
        .get_or_init(|| Arc::new(LiveFilter::new(DEFAULT_FILTER.to_owned(), None)))
        .clone()
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::unwrap_used)]
mod tests {
    use super::*;

    fn level(filter: &LiveFilter, name: &str) -> String {
        filter
            .loggers()
            .into_iter()
            .find(|(n, _)| n == name)
            .unwrap()
            .1
    }

    #[test]
    fn levels_follow_base_overrides_and_parents() {
        let filter = LiveFilter::new(DEFAULT_FILTER.to_owned(), None);
        assert_eq!(filter.loggers()[0], ("root".to_owned(), "INFO".to_owned()));
        assert_eq!(level(&filter, "openraft"), "WARN");
        assert_eq!(level(&filter, "gregor_actors::controller"), "INFO");
        filter.set_level("gregor_actors", "DEBUG").unwrap();
        assert_eq!(level(&filter, "gregor_actors::controller"), "DEBUG");
        filter.set_level("root", "FATAL").unwrap();
        assert_eq!(level(&filter, "gregor_node"), "ERROR");
        assert_eq!(level(&filter, "openraft"), "WARN");
        filter.unset_level("gregor_actors").unwrap();
        assert_eq!(level(&filter, "gregor_actors::controller"), "ERROR");
        assert_eq!(
            filter.filter_text(&filter.overrides.lock().unwrap()),
            "info,openraft=warn,error"
        );
    }
}
