//! The Prometheus endpoint: per-API request metrics named like the JMX exporter's mapping of
//! Kafka's `kafka.network:type=RequestMetrics` beans, the endpoint's HTTP behaviour, and the
//! controller's, network's and partition logs' gauges.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod t10_request_metrics;
mod t20_endpoint;
mod t30_controller_metrics;
mod t40_network_metrics;
mod t50_log_metrics;
