//! Kafka's per-partition log gauges (`kafka.log:type=Log`: `Size`, `NumLogSegments`,
//! `LogStartOffset`, `LogEndOffset`, labels `topic` and `partition`), rendered at each scrape
//! from what the partition logs already publish.
//!
//! A node may host 100,000 partitions: four registered gauges each would be 400,000 series in
//! the recorder, each with its key and labels allocated, and stores into them on every append.
//! Here nothing is kept per partition: the log manager registers itself as a [`PartitionLogs`]
//! source, and a scrape walks its logs once, copying their values, then writes the families.
//! A log no longer hosted (its topic deleted, the partition moved away) or offline is not
//! walked, so its series leave the scrape with it, as Kafka removes a log's metrics.

use std::fmt::Write;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};

use hashbrown::HashMap;
use metrics_exporter_prometheus::formatting::{write_help_line, write_type_line};

use crate::names;
use crate::removable::escape_label_value;

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

/// One log as a scrape copied it out of its source: its topic's (escaped) label value by index.
struct CopiedLog {
    topic: usize,
    partition: i32,
    gauges: LogGauges,
}

fn render_sources(body: &mut String, sources: &[Arc<dyn PartitionLogs>]) {
    // One walk over the logs, copying their values: a source's states lie scattered over the
    // heap, and a walk per family cost four times the cache misses (at 100,000 partitions
    // most of a scrape). Topic names are escaped once, not once per partition and family.
    let mut topics: Vec<String> = Vec::new();
    let mut topic_index: HashMap<String, usize> = HashMap::new();
    let mut logs: Vec<CopiedLog> = Vec::new();
    for source in sources {
        source.for_each_log(&mut |topic, partition, gauges| {
            let topic = match topic_index.get(topic) {
                Some(&index) => index,
                None => {
                    topics.push(escape_label_value(topic));
                    topic_index.insert(topic.to_owned(), topics.len() - 1);
                    topics.len() - 1
                }
            };
            logs.push(CopiedLog {
                topic,
                partition,
                gauges,
            });
        });
    }
    if logs.is_empty() {
        return;
    }
    body.reserve(exact_len(&logs, &topics));
    for (name, value) in FAMILIES {
        if let Some(help) = crate::describe::help(name) {
            write_help_line(body, name, None, None, help);
        }
        write_type_line(body, name, None, None, "gauge");
        for log in &logs {
            body.push_str(name);
            body.push_str("{topic=\"");
            body.push_str(&topics[log.topic]);
            // Writing into a String cannot fail.
            let _ = writeln!(
                body,
                "\",partition=\"{}\"}} {}",
                log.partition,
                value(&log.gauges)
            );
        }
        body.push('\n');
    }
}

/// The bytes [`render_sources`] writes for `logs`, reserved at once: a 30 MB scrape (100,000
/// partitions) grown by doubling left the allocator holding several of its copies.
fn exact_len(logs: &[CopiedLog], topics: &[String]) -> usize {
    let digits = |value: i64| {
        let magnitude = value.unsigned_abs().checked_ilog10().unwrap_or(0) as usize + 1;
        magnitude + usize::from(value < 0)
    };
    FAMILIES
        .iter()
        .map(|(name, value)| {
            // `# HELP name help\n# TYPE name gauge\n`, and the blank line after the family.
            let help = crate::describe::help(name).map_or(0, str::len);
            let headers = name.len() * 2 + help + 24;
            let lines: usize = logs
                .iter()
                .map(|log| {
                    name.len()
                        + LINE_PUNCTUATION.len()
                        + topics[log.topic].len()
                        + digits(i64::from(log.partition))
                        + digits(value(&log.gauges))
                })
                .sum();
            headers + lines
        })
        .sum()
}

/// What a line holds besides the name, the topic and the two numbers.
const LINE_PUNCTUATION: &str = "{topic=\"\",partition=\"\"} \n";

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
        // Reserved at once, exactly what was written.
        assert_eq!(body.capacity(), body.len(), "{body}");
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

    /// Numbers of every width, and a topic escaped, are sized right.
    #[test]
    fn a_scrape_is_sized_before_it_is_written() {
        let logs: Arc<dyn PartitionLogs> = Arc::new(Logs(vec![
            ("t", 0, gauges(9, 1, 10, 99)),
            ("t", 2_147_483_647, gauges(u64::MAX, u32::MAX, i64::MAX, -1)),
            ("\"\\\n", 10, gauges(100, 12, 1_000_000_007, 1_000_000_008)),
        ]));
        let body = scrape(&[logs]);
        assert!(body.contains(&format!(
            "{}{{topic=\"t\",partition=\"2147483647\"}} {}\n",
            names::LOG_SIZE,
            i64::MAX
        )));
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
