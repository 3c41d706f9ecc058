//! Wire-level behaviour of the network front end: framing, header versions, the ApiVersions
//! fallback, pipelining, bad frames and idle connections. Each test starts its own node on
//! ephemeral ports, so the tests run in parallel.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

mod t10_api_versions_fallback;
mod t10_pipelining;
mod t30_bad_frames;
mod t30_chunked_elections;
mod t30_chunked_lists;
mod t30_config_chunks;
mod t30_connection_limits;
mod t30_create_topics_authorized;
mod t30_idle_timeout;
mod t30_partition_chunks;
mod t30_request_memory;
