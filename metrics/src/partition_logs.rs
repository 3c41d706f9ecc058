//! Kafka's per-partition log gauges (`kafka.log:type=Log`: `Size`, `NumLogSegments`,
//! `LogStartOffset`, `LogEndOffset`, labels `topic` and `partition`), rendered at each scrape
//! from what the partition logs already publish.
//!
//! A node may host 100,000 partitions: four registered gauges each would be 400,000 series in
//! the recorder, each with its key and labels allocated, and stores into them on every append.
//! Here nothing is kept per partition: the log manager registers itself as a [`PartitionLogs`]
//! source, and a scrape walks its logs once per family, writing each line straight into the
//! scrape. A log no longer hosted (its topic deleted, the partition moved away) or offline is
//! not walked, so its series leave the scrape with it, as Kafka removes a log's metrics.

use std::fmt::Write;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};

use metrics_exporter_prometheus::formatting::{write_help_line, write_type_line};

use crate::names;
use crate::removable::push_escaped_label_value;

/// What the four gauges show of one log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogGauges {
    /// Bytes of its segments.
    pub size: u64,
    pub segments: u32,
    pub log_start_offset: i64,
    pub log_end_offset: i64,
}

/// Partition logs whose gauges a scrape shows.
pub trait PartitionLogs: Send + Sync {
    /// Calls `each` with the topic, partition and gauges of every log to show.
    fn for_each_log(&self, each: &mut dyn FnMut(&str, i32, LogGauges));
}

/// What one family shows of a log.
type Shown = fn(&LogGauges) -> i64;

/// The families, in the order they are rendered, each with the value it shows.
const FAMILIES: [(&str, Shown); 4] = [
    (names::LOG_SIZE, |g| {
        i64::try_from(g.size).unwrap_or(i64::MAX)
    }),
    (names::LOG_NUM_LOG_SEGMENTS, |g| i64::from(g.segments)),
    (names::LOG_LOG_START_OFFSET, |g| g.log_start_offset),
    (names::LOG_LOG_END_OFFSET, |g| g.log_end_offset),
];

static SOURCES: LazyLock<Mutex<Vec<Weak<dyn PartitionLogs>>>> = LazyLock::new(Mutex::default);

fn sources() -> MutexGuard<'static, Vec<Weak<dyn PartitionLogs>>> {
    // A list of weak pointers: a panic elsewhere cannot leave it half-updated.
    SOURCES
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Shows `source`'s logs in every scrape until it is dropped.
pub fn register(source: Weak<dyn PartitionLogs>) {
    let mut sources = sources();
    sources.retain(|source| source.strong_count() > 0);
    sources.push(source);
}

/// Appends the four families, each whole, to a scrape in the Prometheus text format; nothing
/// when no log is shown (a controller-only node).
pub(crate) fn render(body: &mut String) {
    let sources: Vec<Arc<dyn PartitionLogs>> = sources().iter().filter_map(Weak::upgrade).collect();
    render_sources(body, &sources);
}

fn render_sources(body: &mut String, sources: &[Arc<dyn PartitionLogs>]) {
    for (name, value) in FAMILIES {
        let start = body.len();
        if let Some(help) = crate::describe::help(name) {
            write_help_line(body, name, None, None, help);
        }
        write_type_line(body, name, None, None, "gauge");
        let header_end = body.len();
        for source in sources {
            source.for_each_log(&mut |topic, partition, gauges| {
                body.push_str(name);
                body.push_str("{topic=\"");
                push_escaped_label_value(body, topic);
                // Writing into a String cannot fail.
                let _ = writeln!(body, "\",partition=\"{partition}\"}} {}", value(&gauges));
            });
        }
        if body.len() == header_end {
            body.truncate(start);
            return;
        }
        body.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Logs(Vec<(&'static str, i32, LogGauges)>);

    impl PartitionLogs for Logs {
        fn for_each_log(&self, each: &mut dyn FnMut(&str, i32, LogGauges)) {
            for (topic, partition, gauges) in &self.0 {
                each(topic, *partition, *gauges);
            }
        }
    }

    fn gauges(size: u64, segments: u32, start: i64, end: i64) -> LogGauges {
        LogGauges {
            size,
            segments,
            log_start_offset: start,
            log_end_offset: end,
        }
    }

    fn scrape(sources: &[Arc<dyn PartitionLogs>]) -> String {
        let mut body = String::new();
        render_sources(&mut body, sources);
        body
    }

    #[test]
    fn each_family_is_rendered_whole_with_a_line_per_log() {
        let logs: Arc<dyn PartitionLogs> = Arc::new(Logs(vec![
            ("orders", 0, gauges(1234, 2, 10, 42)),
            ("a\"b\\c\nd", 7, gauges(0, 1, 0, 0)),
        ]));
        let family = |name: &str, orders: i64, odd: i64| {
            format!(
                "# HELP {name} {}\n# TYPE {name} gauge\n\
                 {name}{{topic=\"orders\",partition=\"0\"}} {orders}\n\
                 {name}{{topic=\"a\\\"b\\\\c\\nd\",partition=\"7\"}} {odd}\n\n",
                crate::describe::help(name).unwrap_or_default()
            )
        };
        assert_eq!(
            scrape(&[logs]),
            [
                family(names::LOG_SIZE, 1234, 0),
                family(names::LOG_NUM_LOG_SEGMENTS, 2, 1),
                family(names::LOG_LOG_START_OFFSET, 10, 0),
                family(names::LOG_LOG_END_OFFSET, 42, 0),
            ]
            .concat()
        );
    }

    #[test]
    fn no_log_renders_nothing() {
        assert_eq!(scrape(&[]), "");
        let empty: Arc<dyn PartitionLogs> = Arc::new(Logs(Vec::new()));
        assert_eq!(scrape(&[empty]), "");
    }

    /// A registered source is shown until it is dropped (the log manager goes with the node).
    #[test]
    fn a_dropped_source_leaves_the_scrape() {
        let logs: Arc<dyn PartitionLogs> =
            Arc::new(Logs(vec![("registered-logs", 3, gauges(5, 1, 0, 1))]));
        register(Arc::downgrade(&logs));
        let line = format!(
            "{}{{topic=\"registered-logs\",partition=\"3\"}} 5\n",
            names::LOG_SIZE
        );
        let mut body = String::new();
        render(&mut body);
        assert!(body.contains(&line), "{body}");
        drop(logs);
        let mut body = String::new();
        render(&mut body);
        assert!(!body.contains("registered-logs"), "{body}");
    }
}
