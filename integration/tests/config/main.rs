//! Start-up configuration: bad values of implemented keys stop the node with a non-zero exit
//! and one line naming the key or path; other Kafka keys and unknown keys are warnings; a
//! `--config` file is read and `--override` wins over it; logs can be JSON.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod t10_config_file;
mod t20_kafka_keys;
mod t30_startup_failures;
mod t40_json_logs;
mod t50_storage_info;
mod t60_cargo_install;
mod t70_container;
mod t80_huge_pages;
