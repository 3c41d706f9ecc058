//! Start-up configuration: bad settings stop the node with a non-zero exit and one line naming
//! the key or path; a `--config` file is read and `--override` wins over it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod t10_config_file;
mod t30_startup_failures;
