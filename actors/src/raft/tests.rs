#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use gregor_publishers::records::{Endpoint, MetadataBatch, MetadataRecord, TopicRecord};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::VoteRequest;
use openraft::testing::{StoreBuilder, Suite};
use openraft::{LogId, Vote};
use tempfile::TempDir;
use uuid::Uuid;

use super::*;

/// Keeps the image as the list of every record applied, in order.
#[derive(Default)]
struct MemoryApplier {
    state: Mutex<MemoryState>,
}

#[derive(Default)]
struct MemoryState {
    image: Vec<MetadataRecord>,
    batch_ids: Vec<LogId<u64>>,
    last_applied: Option<LogId<u64>>,
    installs: usize,
}

impl MemoryApplier {
    fn image(&self) -> Vec<MetadataRecord> {
        self.state.lock().unwrap().image.clone()
    }
}

impl MetadataApplier for MemoryApplier {
    fn apply(
        &self,
        batches: Vec<(LogId<u64>, MetadataBatch)>,
        last_applied: LogId<u64>,
    ) -> BoxFuture<'static, Result<(), ApplyError>> {
        let mut state = self.state.lock().unwrap();
        for (id, batch) in batches {
            assert!(state.last_applied < Some(id), "applied out of order");
            assert!(id <= last_applied);
            state.batch_ids.push(id);
            state.image.extend(batch.records);
        }
        assert!(state.last_applied < Some(last_applied));
        state.last_applied = Some(last_applied);
        Box::pin(async { Ok(()) })
    }

    fn snapshot_records(&self) -> super::SnapshotRecords {
        let image = self.image();
        Box::new(move || image)
    }

    fn install_snapshot(
        &self,
        records: Vec<MetadataRecord>,
        last_applied: LogId<u64>,
    ) -> BoxFuture<'static, Result<(), ApplyError>> {
        let mut state = self.state.lock().unwrap();
        state.image = records;
        state.batch_ids.clear();
        state.last_applied = Some(last_applied);
        state.installs += 1;
        Box::pin(async { Ok(()) })
    }
}

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for Builder {
    async fn build(
        &self,
    ) -> Result<(TempDir, LogStore, StateMachine), openraft::StorageError<u64>> {
        let dir = tempfile::tempdir().unwrap();
        let log = LogStore::open(dir.path()).await.unwrap();
        let sm = StateMachine::open(dir.path(), Arc::new(MemoryApplier::default()))
            .await
            .unwrap();
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    // The suite runs each case on its own runtime, so this is a plain test.
    Suite::test_all(Builder).unwrap();
}

fn batch(i: u128) -> MetadataBatch {
    MetadataBatch {
        records: vec![MetadataRecord::Topic(TopicRecord {
            name: format!("topic-{i}"),
            topic_id: Uuid::from_u128(i),
        })],
    }
}

fn records(range: std::ops::Range<u128>) -> Vec<MetadataRecord> {
    range.flat_map(|i| batch(i).records).collect()
}

fn voter() -> VoterNode {
    VoterNode {
        directory_id: Uuid::from_u128(42),
        endpoints: vec![Endpoint {
            name: "CONTROLLER".into(),
            host: "localhost".into(),
            port: 9093,
            security_protocol: 0,
        }],
    }
}

const READY: Duration = Duration::from_secs(20);

async fn start(
    dir: &Path,
    applier: Arc<MemoryApplier>,
    options: MetadataLogOptions,
) -> MetadataLog {
    let log = MetadataLog::open(1, dir, applier, options).await.unwrap();
    log.initialize_single_voter(voter()).await.unwrap();
    log.wait_ready(READY).await.unwrap();
    log
}

async fn write_all(log: &MetadataLog, range: std::ops::Range<u128>) {
    let mut last = None;
    for i in range {
        let id = log.write(batch(i)).await.unwrap();
        assert!(Some(id) > last);
        last = Some(id);
    }
}

async fn restart_case(options: MetadataLogOptions, expect_snapshot: bool) {
    let dir = tempfile::tempdir().unwrap();
    let first = Arc::new(MemoryApplier::default());
    let log = start(dir.path(), first.clone(), options.clone()).await;
    write_all(&log, 0..12).await;
    // write() returns after apply: the image already holds every batch.
    assert_eq!(first.image(), records(0..12));
    if expect_snapshot {
        log.raft
            .wait(Some(READY))
            .metrics(
                |m| m.snapshot.is_some() && m.purged.is_some(),
                "snapshot and purge",
            )
            .await
            .unwrap();
    }
    log.shutdown().await.unwrap();
    drop(log);

    let second = Arc::new(MemoryApplier::default());
    let log = start(dir.path(), second.clone(), options.clone()).await;
    assert_eq!(
        second.image(),
        records(0..12),
        "restart must re-apply every batch in order"
    );
    assert_eq!(
        second.state.lock().unwrap().installs,
        usize::from(expect_snapshot)
    );
    write_all(&log, 12..15).await;
    assert_eq!(second.image(), records(0..15));
    log.shutdown().await.unwrap();
    drop(log);

    let third = Arc::new(MemoryApplier::default());
    let log = start(dir.path(), third.clone(), options).await;
    assert_eq!(third.image(), records(0..15));
    log.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_reapplies_every_acknowledged_batch_from_the_log() {
    restart_case(MetadataLogOptions::default(), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_reapplies_every_acknowledged_batch_from_snapshot_and_log() {
    let options = MetadataLogOptions {
        snapshot_every: 5,
        logs_kept_after_snapshot: 0,
        ..MetadataLogOptions::default()
    };
    restart_case(options, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_is_idempotent_and_writes_need_no_peer() {
    let dir = tempfile::tempdir().unwrap();
    let applier = Arc::new(MemoryApplier::default());
    let log = start(dir.path(), applier, MetadataLogOptions::default()).await;
    log.initialize_single_voter(voter()).await.unwrap();
    let metrics = log.metrics();
    assert_eq!(metrics.current_leader, Some(1));
    let voters: Vec<u64> = metrics.membership_config.membership().voter_ids().collect();
    assert_eq!(voters, vec![1]);
    log.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_corrupt_log_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(LOG_FILE_NAME);
    std::fs::write(&path, vec![0xA5u8; 8192]).unwrap();
    let result = MetadataLog::open(
        1,
        dir.path(),
        Arc::new(MemoryApplier::default()),
        MetadataLogOptions::default(),
    )
    .await;
    let err = result.err().expect("a corrupt log must not open");
    eprintln!("{err}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_snapshot_file_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let options = MetadataLogOptions {
        snapshot_every: 3,
        logs_kept_after_snapshot: 0,
        ..MetadataLogOptions::default()
    };
    let log = start(
        dir.path(),
        Arc::new(MemoryApplier::default()),
        options.clone(),
    )
    .await;
    write_all(&log, 0..5).await;
    log.raft
        .wait(Some(READY))
        .metrics(|m| m.snapshot.is_some(), "snapshot")
        .await
        .unwrap();
    log.shutdown().await.unwrap();
    drop(log);

    let path = dir.path().join(SNAPSHOT_FILE_NAME);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xFF;
    std::fs::write(&path, &bytes).unwrap();
    let err = MetadataLog::open(
        1,
        dir.path(),
        Arc::new(MemoryApplier::default()),
        options.clone(),
    )
    .await
    .err()
    .expect("a corrupt snapshot must not open");
    assert!(matches!(err, MetadataLogError::Corrupt { .. }), "{err}");
    eprintln!("{err}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );

    std::fs::write(&path, &bytes[..10]).unwrap();
    let err = MetadataLog::open(1, dir.path(), Arc::new(MemoryApplier::default()), options)
        .await
        .err()
        .expect("a truncated snapshot must not open");
    eprintln!("{err}");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[tokio::test]
async fn peers_are_unreachable_with_a_clear_message() {
    let mut client = NoPeersNetwork.new_client(2, &voter()).await;
    let err = client
        .vote(
            VoteRequest::new(Vote::new(1, 1), None),
            RPCOption::new(Duration::from_secs(1)),
        )
        .await
        .expect_err("no peer can be reached");
    assert!(
        err.to_string()
            .contains("no controller peers are configured"),
        "{err}"
    );
}

/// Set in the child process of [`acknowledged_writes_survive_kill_9`]: the log dir to write to.
const KILL_CHILD_DIR: &str = "GREGOR_RAFT_KILL_CHILD_DIR";

/// Child half of [`acknowledged_writes_survive_kill_9`]; does nothing when run normally.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_child_writer() {
    let Some(dir) = std::env::var_os(KILL_CHILD_DIR) else {
        return;
    };
    let options = MetadataLogOptions {
        snapshot_every: 7,
        logs_kept_after_snapshot: 2,
        ..MetadataLogOptions::default()
    };
    let log = start(Path::new(&dir), Arc::new(MemoryApplier::default()), options).await;
    for i in 0.. {
        log.write(batch(i)).await.unwrap();
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        writeln!(out, "ACK {i}").unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "raft::tests::kill_9_child_writer",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(KILL_CHILD_DIR, dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut acked = 0u128;
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(i) = line.strip_prefix("ACK ") {
            acked = i.parse::<u128>().unwrap() + 1;
            if acked >= 40 {
                break;
            }
        }
    }
    // SIGKILL while the child keeps writing.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(acked >= 40, "child stopped after {acked} writes");

    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let applier = Arc::new(MemoryApplier::default());
        let log = start(dir.path(), applier.clone(), MetadataLogOptions::default()).await;
        let image = applier.image();
        let n = image.len() as u128;
        assert!(
            n >= acked,
            "only {n} of {acked} acknowledged batches survived"
        );
        assert_eq!(image, records(0..n), "batches re-applied out of order");
        log.shutdown().await.unwrap();
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submitted_batches_commit_in_submission_order() {
    let dir = tempfile::tempdir().unwrap();
    let applier = Arc::new(MemoryApplier::default());
    let log = start(dir.path(), applier.clone(), MetadataLogOptions::default()).await;
    let mut pending = Vec::new();
    for i in 0..20 {
        pending.push(log.submit(batch(i)).await.unwrap());
    }
    let mut last = None;
    for commit in pending {
        let id = commit.await.unwrap();
        assert!(Some(id) > last);
        last = Some(id);
    }
    assert_eq!(applier.image(), records(0..20));
    log.shutdown().await.unwrap();
}

#[test]
fn quorum_gauges_read_as_kafkas_raft_metrics() {
    use openraft::{CommittedLeaderId, ServerState};
    let mut metrics = RaftMetrics::<u64, VoterNode>::new_initial(2);
    let unattached = standing(&metrics);
    assert_eq!((unattached.leader, unattached.vote), (-1, -1));
    assert_eq!(
        (unattached.high_watermark, unattached.log_end_offset),
        (-1, 0)
    );

    // Voted for node 3 in term 7, no leader yet: the vote is reported.
    metrics.current_term = 7;
    metrics.vote = Vote::new(7, 3);
    assert_eq!(standing(&metrics).vote, 3);

    // Following node 3: a leader, no vote (Kafka reports -1 for a follower).
    metrics.vote = Vote::new_committed(7, 3);
    metrics.current_leader = Some(3);
    metrics.last_log_index = Some(41);
    metrics.last_applied = Some(LogId::new(CommittedLeaderId::new(7, 3), 40));
    let following = standing(&metrics);
    assert_eq!((following.leader, following.vote), (3, -1));
    assert_eq!(following.epoch, 7);
    assert_eq!(
        (following.high_watermark, following.log_end_offset),
        (41, 42)
    );

    // A candidate and a leader vote for themselves.
    metrics.state = ServerState::Candidate;
    metrics.current_leader = None;
    assert_eq!(standing(&metrics).vote, 2);
    metrics.state = ServerState::Leader;
    metrics.current_leader = Some(2);
    assert_eq!(standing(&metrics).vote, 2);
}
