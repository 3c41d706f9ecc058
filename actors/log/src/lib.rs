//! placeholder
pub mod batch;
pub mod checkpoint;
pub mod cleaner;
pub mod compression;
pub mod config;
pub mod error;
pub mod files;
pub mod index;
pub mod leader_epoch;
pub mod log;
pub mod log_dir;
pub mod producer_state;
pub mod segment;
pub mod validate;
mod varint;
