//! Crash safety of the metadata log: kill -9 during a stream of topic mutations, restart on the
//! same data directory, and check that every acknowledged mutation survived.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod t50_kill9_during_churn;
