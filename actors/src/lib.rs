//! Gregor's actors and request handlers.
//!
//! - [`loader::Loader`] applies committed metadata batches to the image and runs the publishers;
//! - [`controller::Controller`] validates and commits every metadata mutation;
//! - [`raft`] is the metadata log (openraft) both of them sit on;
//! - [`handlers`] turn decoded Kafka requests into responses, reading one image per request.
//!
//! Architecture invariant: nothing here reads or writes sockets; the network front end in
//! `node/` owns connections and bytes.

pub mod authorizer;
pub mod config_publisher;
pub mod context;
pub mod controller;
pub mod controller_metrics_publisher;
pub mod digest_publisher;
pub mod features;
pub mod fencing;
pub mod fetch_session;
pub mod groups;
pub mod handlers;
pub mod loader;
pub mod log_manager;
pub mod partition_runs;
pub mod quorum;
pub mod quota;
pub mod raft;
pub mod replication;
pub mod wire;
