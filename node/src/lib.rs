//! The `gregor` node: configuration, data directory formatting, start-up wiring and the network
//! front end. The binary in `main.rs` is a thin command-line layer over this library, so
//! embedders and tests can start a node in-process.

pub mod admin;
pub mod config;
pub mod config_keys;
pub mod config_security;
pub mod config_support;
pub mod log_levels;
pub mod network;
pub mod quorum;
pub mod replica_fetcher;
pub mod server;
pub mod storage;
pub mod storage_info;
