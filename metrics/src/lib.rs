//! Every metric Gregor exports, in one place.
//!
//! Library crates record through the `metrics` facade with the helpers here, so names and labels
//! cannot drift between call sites; `node/` installs the Prometheus exporter ([`exporter`]).
//! Request metrics follow the Prometheus JMX-exporter mapping of Kafka's `RequestMetrics`
//! (`kafka_network_requestmetrics_*`) so existing dashboards need little change, with real
//! histograms in seconds instead of pre-computed quantiles. Series that must be removable are
//! kept outside the recorder: quota sensors' ([`removable`]), the broker topic metrics
//! ([`topics`]) and the partition logs' gauges, read from the logs at each scrape
//! ([`partition_logs`]).

mod describe;
pub mod exporter;
pub mod names;
pub mod partition_logs;
mod recorders;
pub mod removable;
pub mod topics;

pub use recorders::*;
pub use topics::{
    remove_leader_topic_metrics, remove_topic_metrics, topic_fetches, topic_follower_fetches,
    topic_produce, ProduceOutcome,
};
