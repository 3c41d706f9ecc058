//! Kafka's `BrokerTopicMetrics` (`kafka_server_brokertopicmetrics_*_total`), per topic and in
//! total, kept apart from the `metrics` recorder so that a topic's series can be removed.
//!
//! Kafka removes a topic's metrics when the broker stops hosting its last partition (the topic
//! was deleted or moved away), so a topic re-created under the same name starts from 0; the
//! Prometheus recorder has no way to remove one series. Here each topic has its own counters,
//! [`remove_topic_metrics`] drops them, and the totals, counted beside them, stay monotonic.
//! When the broker stops leading every partition of a topic it still follows, Kafka closes the
//! topic's leader-only meters; [`remove_leader_topic_metrics`] closes those families likewise.
//!
//! Recording is a map lookup (no allocation once the topic has counters) and atomic adds. The
//! `/metrics` endpoint appends [`render`]'s text, which writes each family whole (HELP, TYPE,
//! the total, then one line per topic), so no family is split or typed twice in a scrape.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::LazyLock;

use dashmap::DashMap;
use metrics_exporter_prometheus::formatting::{write_help_line, write_type_line};

use crate::names;
use crate::removable::escape_label_value;

/// The families, in the order they are rendered; the constants below index them.
const FAMILIES: [&str; 8] = [
    names::TOPIC_MESSAGES_IN_TOTAL,
    names::TOPIC_BYTES_IN_TOTAL,
    names::TOPIC_BYTES_OUT_TOTAL,
    names::TOPIC_BYTES_REJECTED_TOTAL,
    names::TOPIC_PRODUCE_REQUESTS_TOTAL,
    names::TOPIC_FAILED_PRODUCE_REQUESTS_TOTAL,
    names::TOPIC_FETCH_REQUESTS_TOTAL,
    names::TOPIC_FAILED_FETCH_REQUESTS_TOTAL,
];
const MESSAGES_IN: usize = 0;
const BYTES_IN: usize = 1;
const BYTES_OUT: usize = 2;
const BYTES_REJECTED: usize = 3;
const PRODUCE_REQUESTS: usize = 4;
const FAILED_PRODUCE_REQUESTS: usize = 5;
const FETCH_REQUESTS: usize = 6;
const FAILED_FETCH_REQUESTS: usize = 7;

/// A set of families, one bit each.
const fn families(of: &[usize]) -> u8 {
    let mut bits = 0;
    let mut at = 0;
    while at < of.len() {
        bits |= 1 << of[at];
        at += 1;
    }
    bits
}

/// The families only a partition leader marks, which Kafka's
/// `BrokerTopicStats.removeOldLeaderMetrics` closes (its per-topic meters among them; the
/// fetch meters stay, as followers and leaders alike serve fetches).
const LEADER_FAMILIES: u8 = families(&[
    MESSAGES_IN,
    BYTES_IN,
    BYTES_REJECTED,
    PRODUCE_REQUESTS,
    FAILED_PRODUCE_REQUESTS,
]);

/// One value per family.
#[derive(Debug, Default)]
struct Counters([AtomicU64; FAMILIES.len()]);

impl Counters {
    fn add(&self, family: usize, value: u64) {
        if value > 0 {
            self.0[family].fetch_add(value, Ordering::Relaxed);
        }
    }

    fn values(&self) -> [u64; FAMILIES.len()] {
        std::array::from_fn(|family| self.0[family].load(Ordering::Relaxed))
    }
}

/// A topic's counters, and which of its families are closed.
#[derive(Debug, Default)]
struct TopicCounters {
    counters: Counters,
    /// Families left out of the scrape (one bit each): the leader-only ones once this node
    /// stopped leading every partition of the topic. As a Kafka meter closed by
    /// `removeOldLeaderMetrics`, a family comes back, from 0, when it is next counted.
    closed: AtomicU8,
}

/// The totals and each topic's counters.
#[derive(Debug, Default)]
struct TopicMetrics {
    totals: Counters,
    topics: DashMap<Box<str>, TopicCounters>,
}

static TOPIC_METRICS: LazyLock<TopicMetrics> = LazyLock::new(TopicMetrics::default);

impl TopicMetrics {
    /// Applies `add` to the totals and to `topic`'s counters, created on its first use;
    /// `marked` are the families it counts, opened again if they were closed.
    fn record(&self, topic: &str, marked: u8, add: impl Fn(&Counters)) {
        add(&self.totals);
        let record = |topic: &TopicCounters| {
            add(&topic.counters);
            // Opened after the count: a close meanwhile may lose the count (as a Kafka meter
            // closed while marked), never hide it.
            if topic.closed.load(Ordering::Relaxed) & marked != 0 {
                topic.closed.fetch_and(!marked, Ordering::Relaxed);
            }
        };
        // Looked up by `&str` first: the key is allocated only for a new topic.
        if let Some(counters) = self.topics.get(topic) {
            record(&counters);
            return;
        }
        record(&self.topics.entry(Box::from(topic)).or_default());
    }

    fn produce(&self, topic: &str, outcome: ProduceOutcome) {
        let marked = families(&[PRODUCE_REQUESTS])
            | match outcome {
                ProduceOutcome::Appended { .. } => families(&[MESSAGES_IN, BYTES_IN]),
                ProduceOutcome::Refused => 0,
                ProduceOutcome::TooLarge { .. } => families(&[BYTES_REJECTED]),
                ProduceOutcome::Failed => families(&[FAILED_PRODUCE_REQUESTS]),
            };
        self.record(topic, marked, |counters| {
            counters.add(PRODUCE_REQUESTS, 1);
            match outcome {
                ProduceOutcome::Appended { messages, bytes } => {
                    counters.add(MESSAGES_IN, messages);
                    counters.add(BYTES_IN, bytes);
                }
                ProduceOutcome::Refused => {}
                ProduceOutcome::TooLarge { bytes } => counters.add(BYTES_REJECTED, bytes),
                ProduceOutcome::Failed => counters.add(FAILED_PRODUCE_REQUESTS, 1),
            }
        });
    }

    fn fetches(&self, topic: &str, partitions: u64, failed: u64, sent_bytes: u64) {
        // Fetch families are never closed.
        self.record(topic, 0, |counters| {
            counters.add(FETCH_REQUESTS, partitions);
            counters.add(BYTES_OUT, sent_bytes);
            counters.add(FAILED_FETCH_REQUESTS, failed);
        });
    }

    fn follower_fetches(&self, topic: &str, partitions: u64, failed: u64) {
        self.record(topic, 0, |counters| {
            counters.add(FETCH_REQUESTS, partitions);
            counters.add(FAILED_FETCH_REQUESTS, failed);
        });
    }

    fn remove(&self, topic: &str) {
        self.topics.remove(topic);
    }

    /// Closes `topic`'s leader-only families: out of the scrape, and from 0 when they come back.
    fn remove_leader(&self, topic: &str) {
        let Some(topic) = self.topics.get(topic) else {
            return;
        };
        topic.closed.fetch_or(LEADER_FAMILIES, Ordering::Relaxed);
        for family in 0..FAMILIES.len() {
            if LEADER_FAMILIES & (1 << family) != 0 {
                topic.counters.0[family].store(0, Ordering::Relaxed);
            }
        }
    }

    fn render(&self, body: &mut String) {
        let mut topics: Vec<(String, [u64; FAMILIES.len()], u8)> = self
            .topics
            .iter()
            .map(|entry| {
                let topic = entry.value();
                let closed = topic.closed.load(Ordering::Relaxed);
                (
                    escape_label_value(entry.key()),
                    topic.counters.values(),
                    closed,
                )
            })
            .collect();
        let totals = self.totals.values();
        // Nothing counted yet (no traffic, or a controller-only node): no families, as before
        // this registry, when the recorder had no series for them.
        if topics.is_empty() && totals.iter().all(|&total| total == 0) {
            return;
        }
        // Sorted so scrapes are stable.
        topics.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (family, name) in FAMILIES.into_iter().enumerate() {
            if let Some(help) = crate::describe::help(name) {
                write_help_line(body, name, None, None, help);
            }
            write_type_line(body, name, None, None, "counter");
            let _ = writeln!(body, "{name} {}", totals[family]);
            for (topic, values, closed) in &topics {
                if closed & (1 << family) == 0 {
                    let _ = writeln!(body, "{name}{{topic=\"{topic}\"}} {}", values[family]);
                }
            }
            body.push('\n');
        }
    }
}

/// What Kafka's `ReplicaManager.appendToLocalLog` counts of one partition of a Produce request
/// (a partition missing from the metadata is dropped before, in `KafkaApis.handleProduceRequest`,
/// and counts nowhere).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProduceOutcome {
    /// Appended, or a duplicate of an idempotent batch answered with its original offsets:
    /// `messages` is its last offset − first offset + 1, `bytes` the request's records for the
    /// partition.
    Appended { messages: u64, bytes: u64 },
    /// Refused with an error Kafka expects (a moved leader, a batch too large or corrupt, a
    /// storage error, an internal topic): a request, not a failed one.
    Refused,
    /// Refused for a batch larger than `max.message.bytes` (before or after recompression),
    /// which Kafka's `UnifiedLog` also adds to BytesRejectedPerSec: `bytes` are the request's
    /// records for the partition.
    TooLarge { bytes: u64 },
    /// Failed otherwise.
    Failed,
}

/// Counts one partition of a Produce request for `topic`.
pub fn topic_produce(topic: &str, outcome: ProduceOutcome) {
    TOPIC_METRICS.produce(topic, outcome);
}

/// Counts `partitions` partitions of Fetch responses for `topic`: `failed` of them refused,
/// the others sending `sent_bytes` record bytes in all.
pub fn topic_fetches(topic: &str, partitions: u64, failed: u64, sent_bytes: u64) {
    TOPIC_METRICS.fetches(topic, partitions, failed, sent_bytes);
}

/// Counts `partitions` partitions of a follower's Fetch responses for `topic` (`failed` of them
/// refused): requests, as Kafka counts every fetch; their bytes are replication bytes
/// ([`crate::replication_bytes_out`]), not the topic's bytes out.
pub fn topic_follower_fetches(topic: &str, partitions: u64, failed: u64) {
    TOPIC_METRICS.follower_fetches(topic, partitions, failed);
}

/// Removes `topic`'s series from the scrape (the totals keep what it counted); called when this
/// node stops hosting the topic's last partition, as Kafka's `ReplicaManager` does.
pub fn remove_topic_metrics(topic: &str) {
    TOPIC_METRICS.remove(topic);
}

/// Removes `topic`'s leader-only series (messagesin, bytesin, bytesrejected,
/// totalproducerequests, failedproducerequests) from the scrape, as Kafka's
/// `BrokerTopicStats.removeOldLeaderMetrics`; called when this node follows partitions of the
/// topic and leads none. Each comes back, from 0, when it is next counted (a produce to this
/// node, as follower too, counts a request). Its fetch series stay, and the totals keep what
/// it counted. (Kafka's `removeOldFollowerMetrics` closes only replication meters, which are
/// totals here and in Kafka, so nothing per topic.)
pub fn remove_leader_topic_metrics(topic: &str) {
    TOPIC_METRICS.remove_leader(topic);
}

/// Appends the eight families, whole, to a scrape in the Prometheus text format.
pub fn render(body: &mut String) {
    TOPIC_METRICS.render(body);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn appended(messages: u64, bytes: u64) -> ProduceOutcome {
        ProduceOutcome::Appended { messages, bytes }
    }

    fn scrape(metrics: &TopicMetrics) -> String {
        let mut body = String::new();
        metrics.render(&mut body);
        body
    }

    /// The value of `name` for `topic` (`None`: the total), if rendered.
    fn value(body: &str, name: &str, topic: Option<&str>) -> Option<u64> {
        let series = match topic {
            Some(topic) => format!("{name}{{topic=\"{topic}\"}} "),
            None => format!("{name} "),
        };
        body.lines()
            .find_map(|line| line.strip_prefix(series.as_str()))
            .and_then(|value| value.parse().ok())
    }

    #[test]
    fn counts_per_topic_and_in_total() {
        let metrics = TopicMetrics::default();
        metrics.produce("a", appended(3, 300));
        metrics.produce("a", ProduceOutcome::Refused);
        metrics.produce("a", ProduceOutcome::Failed);
        metrics.produce("a", ProduceOutcome::TooLarge { bytes: 2000 });
        metrics.produce("b", appended(2, 20));
        metrics.fetches("a", 4, 1, 250);
        metrics.fetches("b", 1, 0, 0);
        let body = scrape(&metrics);
        let expected = [
            (names::TOPIC_MESSAGES_IN_TOTAL, 3, 2),
            (names::TOPIC_BYTES_IN_TOTAL, 300, 20),
            (names::TOPIC_BYTES_OUT_TOTAL, 250, 0),
            (names::TOPIC_BYTES_REJECTED_TOTAL, 2000, 0),
            (names::TOPIC_PRODUCE_REQUESTS_TOTAL, 4, 1),
            (names::TOPIC_FAILED_PRODUCE_REQUESTS_TOTAL, 1, 0),
            (names::TOPIC_FETCH_REQUESTS_TOTAL, 4, 1),
            (names::TOPIC_FAILED_FETCH_REQUESTS_TOTAL, 1, 0),
        ];
        for (name, a, b) in expected {
            assert_eq!(value(&body, name, Some("a")), Some(a), "{name}\n{body}");
            assert_eq!(value(&body, name, Some("b")), Some(b), "{name}\n{body}");
            assert_eq!(value(&body, name, None), Some(a + b), "{name}\n{body}");
        }
    }

    #[test]
    fn a_removed_topic_leaves_the_scrape_and_the_totals_stay() {
        let metrics = TopicMetrics::default();
        metrics.produce("gone", appended(5, 50));
        metrics.fetches("gone", 1, 0, 50);
        metrics.produce("kept", appended(1, 10));
        metrics.remove("gone");
        let body = scrape(&metrics);
        assert!(!body.contains("topic=\"gone\""), "{body}");
        assert_eq!(
            value(&body, names::TOPIC_MESSAGES_IN_TOTAL, Some("kept")),
            Some(1)
        );
        assert_eq!(value(&body, names::TOPIC_MESSAGES_IN_TOTAL, None), Some(6));
        assert_eq!(value(&body, names::TOPIC_BYTES_OUT_TOTAL, None), Some(50));
        // Re-created under the same name: counted from 0, the totals go on.
        metrics.produce("gone", appended(2, 20));
        let body = scrape(&metrics);
        assert_eq!(
            value(&body, names::TOPIC_MESSAGES_IN_TOTAL, Some("gone")),
            Some(2)
        );
        assert_eq!(
            value(&body, names::TOPIC_BYTES_OUT_TOTAL, Some("gone")),
            Some(0)
        );
        assert_eq!(value(&body, names::TOPIC_MESSAGES_IN_TOTAL, None), Some(8));
        // Removing a topic without series is harmless.
        metrics.remove("never");
    }

    #[test]
    fn each_family_is_rendered_whole_with_its_total_then_its_topics() {
        let metrics = TopicMetrics::default();
        assert_eq!(scrape(&metrics), "", "nothing counted, nothing rendered");
        metrics.produce("zeta", appended(1, 7));
        metrics.produce("alpha", appended(2, 9));
        let body = scrape(&metrics);
        let name = names::TOPIC_BYTES_IN_TOTAL;
        let help = crate::describe::help(name).unwrap_or_default();
        let family = format!(
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} 16\n\
             {name}{{topic=\"alpha\"}} 9\n{name}{{topic=\"zeta\"}} 7\n\n"
        );
        assert!(body.contains(&family), "{body}");
        for name in FAMILIES {
            assert_eq!(
                body.matches(&format!("# TYPE {name} ")).count(),
                1,
                "{body}"
            );
            assert_eq!(
                body.matches(&format!("# HELP {name} ")).count(),
                1,
                "{body}"
            );
            // Contiguous: every line of the family sits between its TYPE line and a blank line.
            let lines: Vec<&str> = body.lines().collect();
            let first = lines.iter().position(|l| l.starts_with(name));
            let last = lines.iter().rposition(|l| l.starts_with(name));
            let (Some(first), Some(last)) = (first, last) else {
                panic!("{name} not rendered:\n{body}");
            };
            assert_eq!(last - first, 2, "{name}: total and two topics\n{body}");
        }
    }

    /// Kafka's `removeOldLeaderMetrics` closes a topic's produce meters and keeps its fetch
    /// meters; a closed meter comes back, from 0, when it is next marked (a produce to a
    /// follower marks only TotalProduceRequests).
    #[test]
    fn leader_series_close_and_come_back_family_by_family() {
        let metrics = TopicMetrics::default();
        metrics.produce("t", appended(3, 300));
        metrics.produce("t", ProduceOutcome::Failed);
        metrics.produce("t", ProduceOutcome::TooLarge { bytes: 900 });
        metrics.fetches("t", 2, 1, 250);
        metrics.produce("other", appended(1, 10));
        metrics.remove_leader("t");
        metrics.remove_leader("never");
        // The topic's values in FAMILIES order (None: not in the scrape).
        let series = |topic: &str| {
            let body = scrape(&metrics);
            FAMILIES.map(|name| value(&body, name, Some(topic)))
        };
        let closed = [None, None, Some(250), None, None, None, Some(2), Some(1)];
        assert_eq!(series("t"), closed);
        assert_eq!(series("other")[MESSAGES_IN], Some(1));
        assert_eq!(series("never"), [None; FAMILIES.len()]);
        let body = scrape(&metrics);
        assert_eq!(value(&body, names::TOPIC_MESSAGES_IN_TOTAL, None), Some(4));
        assert_eq!(
            value(&body, names::TOPIC_PRODUCE_REQUESTS_TOTAL, None),
            Some(4)
        );

        // A fetch opens nothing; a produce refused as a follower opens the request count.
        metrics.fetches("t", 1, 0, 50);
        metrics.produce("t", ProduceOutcome::Refused);
        let refused = [None, None, Some(300), None, Some(1), None, Some(3), Some(1)];
        assert_eq!(series("t"), refused);

        // Leading again: an append opens its records and bytes, counted from 0.
        metrics.produce("t", appended(2, 20));
        let led = [
            Some(2),
            Some(20),
            Some(300),
            None,
            Some(2),
            None,
            Some(3),
            Some(1),
        ];
        assert_eq!(series("t"), led);
        let body = scrape(&metrics);
        assert_eq!(value(&body, names::TOPIC_MESSAGES_IN_TOTAL, None), Some(6));
    }

    #[test]
    fn topic_label_values_are_escaped() {
        let metrics = TopicMetrics::default();
        metrics.produce("a\"b\\c\nd} 1", appended(1, 1));
        let body = scrape(&metrics);
        assert!(
            body.contains(&format!(
                "{}{{topic=\"a\\\"b\\\\c\\nd}} 1\"}} 1\n",
                names::TOPIC_MESSAGES_IN_TOTAL
            )),
            "{body}"
        );
    }
}
