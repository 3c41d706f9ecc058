//! InstallSnapshot end to end over a broker's raft link: a broker is killed, the controller
//! takes snapshots and purges its log past the broker's last entry
//! (`GREGOR_TEST_ONLY_SNAPSHOT_EVERY`), and the restarted broker can only be caught up by the
//! snapshot, sent in several chunks because the broker's `socket.request.max.bytes` is smaller
//! than the snapshot. Its image must then equal the controller's.

use gregor_integration::admin::{creatable, create_topics, metadata, topics_of};
use gregor_integration::{prom, wait_until, GregorNode, KafkaConn};

use crate::{Cluster, FORM_TIMEOUT};

/// Entries between snapshots; the test writes several times as many while the broker is down.
const SNAPSHOT_EVERY: &str = "10";
const TOPICS_WHILE_DOWN: usize = 40;
const PARTITIONS_PER_TOPIC: i32 = 100;
/// 64 KiB: a frame carries half of it as snapshot data (32 KiB), and a snapshot of 10 topics of
/// 100 partitions is about 60 KB, so the snapshot arrives in several chunks.
const BROKER_REQUEST_MAX_BYTES: &str = "65536";
const CHUNK_BUDGET: usize = 32_768;
const INSTALLED: &str = "installed a metadata snapshot received from the leader";
/// A snapshot at this index or later holds at least 20 of the topics created while the broker
/// was down (one creation an entry, about ten entries before them): 2,000 partitions, several
/// chunks.
const SNAPSHOT_OF_MOST_TOPICS: u64 = 30;

/// The log index of the snapshot a "metadata snapshot written" line names (`snapshot=term-index`).
fn snapshot_index(line: &str) -> Option<u64> {
    let id = line
        .split_whitespace()
        .find_map(|field| field.strip_prefix("snapshot="))?;
    id.rsplit('-').next()?.parse().ok()
}

/// The size an "installed a metadata snapshot" line gives (`bytes=N`), 0 if it names none.
fn installed_bytes(line: &str) -> usize {
    line.split_whitespace()
        .find_map(|field| field.strip_prefix("bytes="))
        .and_then(|b| b.parse().ok())
        .unwrap_or(0)
}

async fn image_of(node: &GregorNode) -> anyhow::Result<(f64, f64)> {
    let samples = prom::parse(&prom::scrape(&node.metrics_addr()).await?)?;
    let get = |name: &str| {
        prom::value(&samples, name, &[]).ok_or_else(|| anyhow::anyhow!("{name} missing"))
    };
    Ok((
        get("gregor_metadata_image_digest_offset")?,
        get("gregor_metadata_image_digest")?,
    ))
}

async fn same_image(a: &GregorNode, b: &GregorNode) -> anyhow::Result<(f64, f64)> {
    wait_until(
        "the broker's image to equal the controller's",
        FORM_TIMEOUT,
        || async {
            let theirs = image_of(a).await?;
            Ok((theirs == image_of(b).await?).then_some(theirs))
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_behind_the_purged_log_is_sent_the_snapshot() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(1, 0)?;
    let controller = &mut cluster.controllers[0].1;
    controller.set_env("GREGOR_TEST_ONLY_SNAPSHOT_EVERY", SNAPSHOT_EVERY);
    tokio::task::block_in_place(|| controller.restart_same_ports())?;
    let mut broker = GregorNode::start_formatted(
        &[
            ("node.id", "11"),
            ("process.roles", "broker"),
            ("listeners", "PLAINTEXT://127.0.0.1:0"),
            (
                "controller.quorum.bootstrap.servers",
                &cluster.bootstrap_controllers,
            ),
            ("socket.request.max.bytes", BROKER_REQUEST_MAX_BYTES),
        ],
        &["--cluster-id", &cluster.cluster_id],
        true,
    )?;
    let controller = &cluster.controllers[0].1;
    let mut conn = KafkaConn::connect(&controller.bootstrap()).await?;
    let response = conn
        .send(&create_topics(vec![creatable("before", 1, 1)], false), 7)
        .await?;
    assert_eq!(response.topics[0].error_code, 0, "{response:?}");
    same_image(controller, &broker).await?;
    assert!(
        !broker.stderr().contains(INSTALLED),
        "the broker was sent a snapshot before it lagged"
    );

    broker.kill9()?;
    for i in 0..TOPICS_WHILE_DOWN {
        let name = format!("while-down-{i}");
        let response = conn
            .send(
                &create_topics(vec![creatable(&name, PARTITIONS_PER_TOPIC, 1)], false),
                7,
            )
            .await?;
        assert_eq!(response.topics[0].error_code, 0, "{name}: {response:?}");
    }
    // A snapshot holding most of those topics: one written earlier (or still being built when
    // the broker comes back) may be what a lagging broker is sent, and fit in one chunk.
    wait_until(
        "the controller to write a snapshot of the topics created while the broker was down",
        FORM_TIMEOUT,
        || async {
            Ok(controller
                .stderr()
                .lines()
                .filter(|line| line.contains("metadata snapshot written"))
                .filter_map(snapshot_index)
                .any(|index| index >= SNAPSHOT_OF_MOST_TOPICS)
                .then_some(()))
        },
    )
    .await?;

    // Under load the broker may lag for a moment before it is killed and be sent a small
    // snapshot then: only what the restarted broker logs counts.
    tokio::task::block_in_place(|| broker.restart_same_ports())?;
    let (offset, _) = same_image(controller, &broker).await?;
    // The leader may first finish sending a snapshot it began while the broker was alive (a
    // small early one: openraft retries a snapshot stream across a short outage), and then the
    // snapshot that follows the purged log, which must have crossed several chunks. The line is
    // logged just after the image is built from it, so it is waited for.
    let installed = wait_until(
        "the restarted broker to install a snapshot larger than one chunk",
        FORM_TIMEOUT,
        || async {
            Ok(broker
                .stderr_of_latest_start()
                .lines()
                .filter(|line| line.contains(INSTALLED))
                .find(|line| installed_bytes(line) > CHUNK_BUDGET)
                .map(str::to_owned))
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}\n{}", broker.stderr_of_latest_start()))?;
    let mut conn = KafkaConn::connect(&broker.bootstrap()).await?;
    let topics = topics_of(&conn.send(&metadata(12, None, false), 12).await?);
    assert_eq!(topics.len(), TOPICS_WHILE_DOWN + 1, "{topics:?}");
    for i in 0..TOPICS_WHILE_DOWN {
        let name = format!("while-down-{i}");
        let partitions = topics.get(&name).map(|t| t.partitions);
        assert_eq!(partitions, Some(PARTITIONS_PER_TOPIC as usize), "{name}");
    }
    eprintln!("snapshot catch-up: broker equal to the controller at offset {offset}; {installed}");
    Ok(())
}
