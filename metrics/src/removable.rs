//! Gauges whose labels clients choose (quota sensors, labelled by client id), kept apart from
//! the `metrics` recorder so they can be removed when their owner goes.
//!
//! The Prometheus recorder has no way to remove one series, and its idle timeout would also
//! drop the quiet series of live sensors (and then lose their updates, which go to a detached
//! handle). Kafka removes a sensor's metrics with the sensor; here a [`RemovableGauges`] owns
//! its series, and dropping its last clone removes them from the next scrape, so a client
//! cycling through client ids cannot grow the scrape without bound.
//!
//! ```text
//!  sensor ──owns──▶ RemovableGauges ──registers──▶ SERIES (name → labels → value)
//!   dropped ─────────▶ Drop removes its entries        ▲ rendered by the /metrics endpoint
//! ```
//! Recording is one atomic store; the registry's lock is taken only to add or remove series
//! and to render a scrape.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};

use metrics::{Gauge, GaugeFn};
use metrics_exporter_prometheus::formatting::sanitize_label_key;

/// Sanitised `key="value"` pairs, in the order given.
type Labels = Vec<(String, String)>;

/// Values their owner computes when the registry reads them at a scrape: a quota sensor
/// measures its rate as of the scrape, as Kafka's `KafkaMetric.metricValue` does, so an idle
/// client's rate falls to 0 once its samples are out of the window (a gauge set on each
/// request would keep its last value), and a request pays no store into a gauge.
pub trait SeriesValue: Send + Sync {
    /// The current value of the owner's series named `series`.
    fn series_value(&self, series: &'static str) -> f64;
}

/// Where a series' value is: a gauge of the registry's own, or its owner's.
enum Source {
    Gauge(Arc<Value>),
    Owner(Weak<dyn SeriesValue>, &'static str),
}

impl Source {
    /// The value, or `None` when its owner is gone (its registration is being dropped).
    fn get(&self) -> Option<f64> {
        match self {
            Source::Gauge(value) => Some(value.get()),
            Source::Owner(owner, series) => owner.upgrade().map(|owner| owner.series_value(series)),
        }
    }
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Gauge(value) => f.debug_tuple("Gauge").field(&value.get()).finish(),
            Source::Owner(_, series) => f.debug_tuple("Owner").field(series).finish(),
        }
    }
}

/// One series' value and the registration that owns it.
#[derive(Debug)]
struct Entry {
    owner: u64,
    value: Source,
}

#[derive(Debug, Default)]
struct Registry {
    next_owner: u64,
    /// Name → labels → entry; ordered so scrapes are stable.
    series: BTreeMap<&'static str, BTreeMap<Labels, Entry>>,
}

static SERIES: LazyLock<Mutex<Registry>> = LazyLock::new(Mutex::default);

fn registry() -> MutexGuard<'static, Registry> {
    // The registry holds plain maps; a panic elsewhere cannot leave them half-updated.
    SERIES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[derive(Debug, Default)]
struct Value(AtomicU64);

impl Value {
    fn get(&self) -> f64 {
        f64::from_bits(self.0.load(Ordering::Relaxed))
    }
}

impl GaugeFn for Value {
    fn increment(&self, value: f64) {
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + value).to_bits())
            });
    }

    fn decrement(&self, value: f64) {
        self.increment(-value);
    }

    fn set(&self, value: f64) {
        self.0.store(value.to_bits(), Ordering::Relaxed);
    }
}

/// The series of one owner (a quota sensor); cheap to clone, and the series go when the last
/// clone is dropped.
#[derive(Clone, Debug)]
pub struct RemovableGauges {
    /// Held only for its `Drop`, which removes the series.
    _registration: Arc<Registration>,
}

#[derive(Debug)]
struct Registration {
    owner: u64,
    keys: Vec<(&'static str, Labels)>,
}

impl RemovableGauges {
    /// Registers one gauge per name in `names`, all with `labels`; a series already registered
    /// under the same name and labels (an expired sensor still held by a request) is replaced.
    pub fn register<'a, const N: usize>(
        names: [&'static str; N],
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (RemovableGauges, [Gauge; N]) {
        Self::register_all(None, names, labels)
    }

    /// [`register`](Self::register), plus the series `read.1`, whose values owner `read.0`
    /// computes at each scrape (nothing is rendered for them once that owner is gone).
    pub fn register_with_owned<'a, const N: usize>(
        read: (Weak<dyn SeriesValue>, &[&'static str]),
        names: [&'static str; N],
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (RemovableGauges, [Gauge; N]) {
        Self::register_all(Some(read), names, labels)
    }

    fn register_all<'a, const N: usize>(
        read: Option<(Weak<dyn SeriesValue>, &[&'static str])>,
        names: [&'static str; N],
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> (RemovableGauges, [Gauge; N]) {
        let labels: Labels = labels
            .into_iter()
            .map(|(key, value)| (sanitize_label_key(key), escape_label_value(value)))
            .collect();
        let values: [Arc<Value>; N] = std::array::from_fn(|_| Arc::new(Value::default()));
        let sources = names
            .iter()
            .zip(&values)
            .map(|(name, value)| (*name, Source::Gauge(Arc::clone(value))))
            .chain(read.into_iter().flat_map(|(owner, series)| {
                series
                    .iter()
                    .map(move |name| (*name, Source::Owner(owner.clone(), name)))
            }));
        let mut registry = registry();
        let owner = registry.next_owner;
        registry.next_owner += 1;
        let mut keys = Vec::with_capacity(N + 1);
        for (name, value) in sources {
            registry
                .series
                .entry(name)
                .or_default()
                .insert(labels.clone(), Entry { owner, value });
            keys.push((name, labels.clone()));
        }
        (
            RemovableGauges {
                _registration: Arc::new(Registration { owner, keys }),
            },
            values.map(Gauge::from_arc),
        )
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut registry = registry();
        for (name, labels) in &self.keys {
            let Some(by_labels) = registry.series.get_mut(name) else {
                continue;
            };
            if by_labels.get(labels).is_some_and(|e| e.owner == self.owner) {
                by_labels.remove(labels);
            }
            if by_labels.is_empty() {
                registry.series.remove(name);
            }
        }
    }
}

/// The text format's escapes for a label value: `\\`, `\"` and `\n`. Hand-written because the
/// exporter's sanitiser drops a backslash before a quote, so two client ids could render alike.
pub(crate) fn escape_label_value(value: &str) -> String {
    let mut escaped = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => escaped.push_str("\\\\"),
            '"' => escaped.push_str("\\\""),
            '\n' => escaped.push_str("\\n"),
            c => escaped.push(c),
        }
    }
    escaped
}

/// Appends every registered series to a scrape in the Prometheus text format.
pub fn render(body: &mut String) {
    let registry = registry();
    for (name, by_labels) in &registry.series {
        let _ = writeln!(body, "# TYPE {name} gauge");
        for (labels, entry) in by_labels {
            // An owner just gone is being unregistered.
            let Some(value) = entry.value.get() else {
                continue;
            };
            body.push_str(name);
            if !labels.is_empty() {
                body.push('{');
                for (index, (key, value)) in labels.iter().enumerate() {
                    if index > 0 {
                        body.push(',');
                    }
                    let _ = write!(body, "{key}=\"{value}\"");
                }
                body.push('}');
            }
            let _ = writeln!(body, " {value}");
        }
    }
}

/// Number of registered series (all owners); for tests and diagnostics.
pub fn series_count() -> usize {
    registry().series.values().map(BTreeMap::len).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape() -> String {
        let mut body = String::new();
        render(&mut body);
        body
    }

    #[test]
    fn series_live_while_owned_and_go_with_the_last_clone() {
        let (owner, gauges) =
            RemovableGauges::register(["t_owned_a", "t_owned_b"], [("client_id", "app-1")]);
        gauges[0].set(2.5);
        gauges[1].increment(3.0);
        gauges[1].decrement(1.0);
        let body = scrape();
        assert!(body.contains("# TYPE t_owned_a gauge\nt_owned_a{client_id=\"app-1\"} 2.5\n"));
        assert!(
            body.contains("t_owned_b{client_id=\"app-1\"} 2\n"),
            "{body}"
        );
        let clone = owner.clone();
        drop(owner);
        assert!(scrape().contains("t_owned_a{"));
        drop(clone);
        let body = scrape();
        assert!(!body.contains("t_owned_a"), "{body}");
        assert!(!body.contains("t_owned_b"), "{body}");
    }

    #[test]
    fn a_replaced_series_survives_the_old_owner() {
        let labels = [("client_id", "same")];
        let (old, _) = RemovableGauges::register(["t_replaced"], labels);
        let (new, gauges) = RemovableGauges::register(["t_replaced"], labels);
        gauges[0].set(7.0);
        drop(old);
        assert!(scrape().contains("t_replaced{client_id=\"same\"} 7\n"));
        drop(new);
        assert!(!scrape().contains("t_replaced"));
    }

    struct Kept(AtomicU64);

    impl SeriesValue for Kept {
        fn series_value(&self, series: &'static str) -> f64 {
            let kept = f64::from_bits(self.0.load(Ordering::Relaxed));
            match series {
                "t_kept_twice" => kept * 2.0,
                _ => kept,
            }
        }
    }

    #[test]
    fn an_owned_series_is_read_at_each_scrape() {
        let kept = Arc::new(Kept(AtomicU64::new(1.5f64.to_bits())));
        let owner: Weak<dyn SeriesValue> = Arc::downgrade(&kept) as Weak<dyn SeriesValue>;
        let (series, [other]) = RemovableGauges::register_with_owned(
            (owner, &["t_kept", "t_kept_twice"]),
            ["t_kept_other"],
            [("client_id", "k")],
        );
        other.set(3.0);
        assert!(
            scrape().contains("t_kept{client_id=\"k\"} 1.5\n"),
            "{}",
            scrape()
        );
        kept.0.store(4.25f64.to_bits(), Ordering::Relaxed);
        let body = scrape();
        assert!(body.contains("t_kept{client_id=\"k\"} 4.25\n"), "{body}");
        assert!(
            body.contains("t_kept_twice{client_id=\"k\"} 8.5\n"),
            "{body}"
        );
        assert!(body.contains("t_kept_other{client_id=\"k\"} 3\n"), "{body}");
        drop(series);
        let body = scrape();
        assert!(!body.contains("t_kept"), "{body}");
    }

    #[test]
    fn hostile_label_values_are_escaped() {
        let (_owner, gauges) =
            RemovableGauges::register(["t_escaped"], [("client_id", "a\"b\\c\nd} 1")]);
        gauges[0].set(1.0);
        assert!(
            scrape().contains("t_escaped{client_id=\"a\\\"b\\\\c\\nd} 1\"} 1\n"),
            "{}",
            scrape()
        );
    }
}
