//! Dynamic configs end to end over raw sockets at exact versions: IncrementalAlterConfigs,
//! DescribeConfigs, ListConfigResources v0/v1 (KIP-1142).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod t10_configs;
