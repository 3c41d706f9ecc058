//! Gregor's partition logs on disk, in Kafka's layout, as a plain synchronous library.
//!
//! **Architecture invariant: no actors, no sockets, no async.** Everything here is ordinary blocking file
//! I/O; callers run it on dedicated threads (never on the async runtime's threads), and the owner of a
//! [`log::PartitionLog`] serialises its mutations (Kafka's per-partition append lock).
//!
//! Map of the crate (data-plane reference §1, §3.2–3.3, §6):
//! * [`batch`]: record batch v2, a zero-copy view ([`batch::RecordBatch`]), record iteration and a builder;
//!   [`compression`]: gzip, snappy (xerial framing), lz4 (frame format) and zstd as Kafka frames them.
//! * [`validate`]: the leader's checks of a produced batch as a pure function of (bytes, config, now):
//!   Kafka's error codes and `record_errors`, LogAppendTime, recompression to the topic's codec.
//! * [`segment`] and [`index`]: `<base offset>.log` with its sparse `.index` and `.timeindex`, roll,
//!   lookups by offset and timestamp, reads as [`segment::FileSlice`]s (for sendfile) and recovery scans.
//! * [`log`]: a partition log (`<topic>-<partition>/`): append, read with Kafka's first-batch rule, roll,
//!   flush policy, retention, DeleteRecords, truncation, ListOffsets lookups; [`cleaner`]: compaction.
//! * [`producer_state`]: idempotence (last five batches per producer id, `<offset>.snapshot` files).
//! * [`leader_epoch`]: `leader-epoch-checkpoint`; [`checkpoint`]: Kafka's text checkpoint files and
//!   `partition.metadata`.
//! * [`log_dir`]: a log directory: per-dir checkpoints, `.kafka_cleanshutdown`, the offline flag, deletion.
//! * [`files`]: a bounded LRU cache of open file handles shared by all segments, so 100,000 partitions do
//!   not exhaust descriptors; index entries are read on demand and can be unloaded.
//! * [`dump`]: `kafka-dump-log.sh`'s rendering of `.log`, `.index`, `.timeindex` and `.snapshot` files.
//!
//! Errors: every failure is a [`error::LogError`] whose [`error::LogError::kafka_code`] is the code a
//! response carries. Any I/O error marks the log dir offline, after which its logs answer
//! KAFKA_STORAGE_ERROR while other dirs keep serving.
pub mod batch;
pub mod checkpoint;
pub mod cleaner;
pub mod compression;
pub mod config;
pub mod dump;
pub mod error;
pub mod files;
pub mod index;
pub mod leader_epoch;
pub mod log;
pub mod log_dir;
pub mod producer_state;
pub mod segment;
pub mod skim;
pub mod validate;
mod varint;
