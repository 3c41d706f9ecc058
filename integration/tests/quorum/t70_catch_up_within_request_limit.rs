//! A broker that joins after 100,000 partitions were created, with a `socket.request.max.bytes`
//! far below what the log would take in one AppendEntries of openraft's 64 entries, still
//! catches up: the leader sends it only what fits, and its image ends equal to the
//! controller's (same digest at the same offset).

use gregor_integration::admin::{creatable, create_topics};
use gregor_integration::{binary_path, prom, wait_until, GregorNode, KafkaConn};

use crate::{Cluster, FORM_TIMEOUT};

const TOPICS: usize = 1_000;
const PARTITIONS_PER_TOPIC: i32 = 100;
/// 256 KiB: one 100-partition CreateTopics entry is about 10 KB, the whole log about 10 MB, and
/// openraft would send up to 64 entries in one AppendEntries.
const SMALL_REQUEST_MAX_BYTES: &str = "262144";

async fn image_of(node: &GregorNode) -> anyhow::Result<(f64, f64, f64)> {
    let samples = prom::parse(&prom::scrape(&node.metrics_addr()).await?)?;
    let get = |name: &str| {
        prom::value(&samples, name, &[]).ok_or_else(|| anyhow::anyhow!("{name} missing"))
    };
    Ok((
        get("gregor_metadata_image_digest_offset")?,
        get("gregor_metadata_image_digest")?,
        get("gregor_metadata_image_partitions")?,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_broker_with_a_small_request_limit_catches_up() -> anyhow::Result<()> {
    let mut cluster = Cluster::start(1, 1)?;
    let broker = cluster.brokers[0].1.bootstrap();
    let mut conn = KafkaConn::connect(&broker).await?;
    for i in 0..TOPICS {
        let name = format!("bulk-{i}");
        let response = conn
            .send(
                &create_topics(vec![creatable(&name, PARTITIONS_PER_TOPIC, 1)], false),
                7,
            )
            .await?;
        if response.topics[0].error_code != 0 {
            // The logs say why the controller failed a write (once seen under a full test run).
            let tail = |node: &GregorNode| {
                let log = node.stderr();
                let start = (log.len().saturating_sub(20_000)..log.len())
                    .find(|at| log.is_char_boundary(*at))
                    .unwrap_or(log.len());
                log[start..].to_owned()
            };
            panic!(
                "{name}: {response:?}\ncontroller log:\n{}\nbroker log:\n{}",
                tail(&cluster.controllers[0].1),
                tail(&cluster.brokers[0].1)
            );
        }
    }

    let mut node = GregorNode::start_formatted(
        &[
            ("node.id", "12"),
            ("process.roles", "broker"),
            ("listeners", "PLAINTEXT://127.0.0.1:0"),
            (
                "controller.quorum.bootstrap.servers",
                &cluster.bootstrap_controllers,
            ),
            ("socket.request.max.bytes", SMALL_REQUEST_MAX_BYTES),
        ],
        &["--cluster-id", &cluster.cluster_id],
        false,
    )?;
    if let Err(e) = node.wait_ready() {
        let log = node.stderr();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        let leader = cluster.controllers[0].1.stderr();
        let leader_tail: Vec<&str> = leader.lines().rev().take(40).collect();
        anyhow::bail!(
            "{e}\nlate broker:\n{}\ncontroller:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n"),
            leader_tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    cluster.brokers.push((12, node));

    let controller = &cluster.controllers[0].1;
    let late = &cluster.brokers[1].1;
    let (offset, digest, partitions) = wait_until(
        "the late broker's image to equal the controller's",
        FORM_TIMEOUT,
        || async {
            let theirs = image_of(controller).await?;
            let ours = image_of(late).await?;
            Ok((theirs == ours).then_some(ours))
        },
    )
    .await?;
    assert_eq!(partitions, (TOPICS as i32 * PARTITIONS_PER_TOPIC) as f64);

    // `metadata-quorum describe --status` shows the same digest, asked of the late broker and
    // of the active controller.
    for (flag, addr) in [
        ("--bootstrap-server", late.bootstrap()),
        (
            "--bootstrap-controller",
            cluster.bootstrap_controllers.clone(),
        ),
    ] {
        let output = std::process::Command::new(binary_path())
            .args(["metadata-quorum", flag, &addr, "describe", "--status"])
            .output()?;
        let out = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{out}");
        let line = out
            .lines()
            .find_map(|l| l.strip_prefix("MetadataImageDigest:"))
            .ok_or_else(|| anyhow::anyhow!("no MetadataImageDigest line in {out}"))?;
        let hex = line.split_whitespace().next().unwrap_or_default();
        let full = u128::from_str_radix(hex, 16)?;
        assert_eq!(hex.len(), 32, "{line}");
        assert_eq!((full & ((1 << 52) - 1)) as f64, digest, "{line}");
        assert!(line.ends_with(&format!("at offset {offset})")), "{line}");
    }
    eprintln!("caught up: offset {offset}, digest {digest}, {partitions} partitions");
    Ok(())
}
