//! Test harness for Gregor: start the real `gregor` binary on ephemeral ports, talk to it with
//! exact-version Kafka requests, scrape its Prometheus endpoint, and wait for conditions with a
//! deadline instead of sleeping.
//!
//! The harness only relies on the node's external contract:
//! * `gregor node --override key=value ...` starts a node and formats an empty data dir itself;
//! * once it serves requests it writes one stderr line containing `node ready`,
//!   `listeners=PLAINTEXT://HOST:PORT,CONTROLLER://HOST:PORT` and `metrics=HOST:PORT`;
//! * Prometheus text is served at `http://<metrics>/metrics`.
//!
//! Used by the Rust integration tests in `tests/` and by load tools (churn), so nothing here
//! panics on what a process, file or socket does: every failure is an `anyhow::Error` with the
//! captured stderr attached where that helps.

pub mod admin;
pub mod churn;
pub mod client;
pub mod frames;
pub mod netns;
pub mod node;
pub mod perf;
pub mod ports;
pub mod prom;
pub mod wait;

pub use client::{decode_response, encode_request, Closed, KafkaConn};
pub use node::{binary_path, GregorNode, NodeAddrs, NodeExit, ResidentMemory};
pub use wait::wait_until;
