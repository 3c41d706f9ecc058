//! A fourth controller joins as an observer, is added by id only (AddRaftVoter v2 derives its
//! directory id and endpoints) and removed by id only (RemoveRaftVoter v1), through the
//! `gregor metadata-quorum` tool; then the documented errors.

use std::process::Command;

use gregor_integration::{binary_path, wait_until, GregorNode};

use crate::{leader_view, Cluster, FORM_TIMEOUT};

/// Runs `gregor metadata-quorum <args>`: (success, stdout, stderr).
fn quorum_tool(args: &[&str]) -> anyhow::Result<(bool, String, String)> {
    let output = Command::new(binary_path())
        .arg("metadata-quorum")
        .args(args)
        .output()?;
    Ok((
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    ))
}

fn directory_id_of(node: &GregorNode) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(node.data_dir().join("meta.properties"))?;
    text.lines()
        .find_map(|l| l.strip_prefix("directory.id=").map(str::to_owned))
        .ok_or_else(|| anyhow::anyhow!("no directory.id in meta.properties"))
}

fn start_observer(cluster: &Cluster, id: i32) -> anyhow::Result<GregorNode> {
    start_observer_with(cluster, id, true)
}

/// A second live process of one node id never becomes ready (it is not replicated to while the
/// first lives), so it is started without waiting.
fn start_observer_with(cluster: &Cluster, id: i32, wait_ready: bool) -> anyhow::Result<GregorNode> {
    GregorNode::start_formatted(
        &[
            ("node.id", &id.to_string()),
            ("process.roles", "controller"),
            ("listeners", "CONTROLLER://127.0.0.1:0"),
            (
                "controller.quorum.bootstrap.servers",
                &cluster.bootstrap_controllers,
            ),
        ],
        &["--cluster-id", &cluster.cluster_id],
        wait_ready,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_controller_is_added_and_removed_by_id() -> anyhow::Result<()> {
    let cluster = Cluster::start(3, 1)?;
    let broker = cluster.brokers[0].1.bootstrap();
    let controllers: Vec<String> = cluster
        .controllers
        .iter()
        .map(|(_, n)| n.bootstrap())
        .collect();
    let fourth = start_observer(&cluster, 4)?;
    let directory = directory_id_of(&fourth)?;
    let endpoint = fourth.bootstrap();

    // It is an observer with its directory id, and caught up.
    let status = wait_until("controller 4 as an observer", FORM_TIMEOUT, || async {
        let (ok, out, err) = quorum_tool(&["--bootstrap-server", &broker, "describe", "--status"])?;
        anyhow::ensure!(ok, "{err}");
        Ok(out
            .contains(&format!("{{\"id\": 4, \"directoryId\": \"{directory}\"}}"))
            .then_some(out))
    })
    .await?;
    let cluster_line = format!("ClusterId:              {}\n", cluster.cluster_id);
    assert!(status.starts_with(&cluster_line), "{status}");
    assert!(
        status.contains("CurrentVoters:          [{\"id\": 1"),
        "{status}"
    );
    // Through a controller listener too (DescribeCluster there answers for controllers).
    let (ok, out, err) = quorum_tool(&[
        "--bootstrap-controller",
        &cluster.bootstrap_controllers,
        "describe",
        "--status",
    ])?;
    assert!(ok, "{err}");
    assert!(out.starts_with(&cluster_line), "{out}");

    let (ok, out, err) = wait_until("add-controller 4", FORM_TIMEOUT, || async {
        let (ok, out, err) = quorum_tool(&[
            "--bootstrap-controller",
            &controllers[0],
            "add-controller",
            "--controller-id",
            "4",
        ])?;
        // REQUEST_TIMED_OUT while it catches up: retry.
        Ok((ok || !err.contains("RequestTimedOut")).then_some((ok, out, err)))
    })
    .await?;
    assert!(ok, "{err}");
    assert_eq!(
        out.trim(),
        format!("Added controller 4 with directory id {directory} and endpoints: CONTROLLER://{endpoint}")
    );
    let view = leader_view(&controllers).await?.expect("a leader");
    let p = &view.topics[0].partitions[0];
    assert!(
        p.current_voters.iter().any(|v| v.replica_id.0 == 4),
        "{p:?}"
    );
    assert!(
        view.nodes.iter().any(|n| n.node_id.0 == 4),
        "{:?}",
        view.nodes
    );

    // Adding it again: DUPLICATE_VOTER.
    let (ok, _, err) = quorum_tool(&[
        "--bootstrap-server",
        &broker,
        "add-controller",
        "--controller-id",
        "4",
    ])?;
    assert!(!ok);
    assert!(
        err.contains("is already part of the set of voters") && err.contains("DuplicateVoter"),
        "{err}"
    );

    // Removed by id only.
    let (ok, out, err) = quorum_tool(&[
        "--bootstrap-server",
        &broker,
        "remove-controller",
        "--controller-id",
        "4",
    ])?;
    assert!(ok, "{err}");
    assert_eq!(
        out.trim(),
        format!("Removed  KRaft controller 4 with directory id {directory}")
    );
    let view = leader_view(&controllers).await?.expect("a leader");
    assert!(!view.topics[0].partitions[0]
        .current_voters
        .iter()
        .any(|v| v.replica_id.0 == 4));

    // Removing a non-voter: VOTER_NOT_FOUND. Adding an unknown id: INVALID_REQUEST.
    let (ok, _, err) = quorum_tool(&[
        "--bootstrap-server",
        &broker,
        "remove-controller",
        "--controller-id",
        "4",
    ])?;
    assert!(!ok && err.contains("VoterNotFound"), "{err}");
    let (ok, _, err) = quorum_tool(&[
        "--bootstrap-server",
        &broker,
        "add-controller",
        "--controller-id",
        "99",
    ])?;
    assert!(
        !ok && err.contains("InvalidRequest") && err.contains("no observer with node id 99"),
        "{err}"
    );

    // The properties-file form: the controller's own configuration names everything.
    let properties = fourth.data_dir().with_file_name("controller-4.properties");
    std::fs::write(
        &properties,
        format!(
            "node.id=4\nprocess.roles=controller\nlog.dirs={}\nlisteners=CONTROLLER://{endpoint}\n",
            fourth.data_dir().display()
        ),
    )?;
    let config = properties.to_str().expect("utf-8 path");
    let (ok, out, err) = quorum_tool(&[
        "--bootstrap-server",
        &broker,
        "--command-config",
        config,
        "add-controller",
    ])?;
    assert!(ok, "{err}");
    assert_eq!(
        out.trim(),
        format!("Added controller 4 with directory id {directory} and endpoints: CONTROLLER://{endpoint}")
    );
    let (ok, _, err) = quorum_tool(&[
        "--bootstrap-server",
        &broker,
        "remove-controller",
        "--controller-id",
        "4",
        "--controller-directory-id",
        &directory,
    ])?;
    assert!(ok, "{err}");

    // Two observers sharing id 5: refused, naming both directory ids.
    let five_a = start_observer(&cluster, 5)?;
    let five_b = start_observer_with(&cluster, 5, false)?;
    let (a, b) = (directory_id_of(&five_a)?, directory_id_of(&five_b)?);
    wait_until(
        "both observers of id 5 in DescribeQuorum",
        FORM_TIMEOUT,
        || async {
            let (ok, out, err) =
                quorum_tool(&["--bootstrap-server", &broker, "describe", "--status"])?;
            anyhow::ensure!(ok, "{err}");
            Ok((out.contains(&a) && out.contains(&b)).then_some(()))
        },
    )
    .await?;
    let (ok, out, err) = quorum_tool(&[
        "--bootstrap-server",
        &broker,
        "add-controller",
        "--controller-id",
        "5",
        "--dry-run",
    ])?;
    assert!(
        ok && out.contains("DRY RUN of adding controller 5"),
        "{err}"
    );
    let (ok, _, err) = quorum_tool(&[
        "--bootstrap-server",
        &broker,
        "add-controller",
        "--controller-id",
        "5",
    ])?;
    assert!(!ok && err.contains("observers share node id 5"), "{err}");
    assert!(
        err.contains(&a) && err.contains(&b) && err.contains("InvalidRequest"),
        "{err}"
    );

    // Tool argument errors.
    let (ok, _, err) = quorum_tool(&["--bootstrap-server", &broker, "add-controller"])?;
    assert!(
        !ok && err.contains(
            "You must use --command-config or --controller-id option to add a controller."
        ),
        "{err}"
    );
    let (ok, _, err) = quorum_tool(&[
        "--bootstrap-server",
        &broker,
        "remove-controller",
        "--controller-id",
        "-1",
    ])?;
    assert!(
        !ok && err.contains("Invalid negative --controller-id: -1"),
        "{err}"
    );
    let (ok, _, err) = quorum_tool(&[
        "--bootstrap-server",
        &broker,
        "describe",
        "--status",
        "--replication",
    ])?;
    assert!(
        !ok && err.contains(
            "Only one of --status or --replication should be specified with describe sub-command"
        ),
        "{err}"
    );
    let (ok, out, err) = quorum_tool(&[
        "--bootstrap-server",
        &broker,
        "describe",
        "--replication",
        "--human-readable",
    ])?;
    assert!(ok, "{err}");
    assert!(
        out.starts_with("NodeId") && out.contains("Leader") && out.contains("Observer"),
        "{out}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_voter_cannot_be_removed() -> anyhow::Result<()> {
    let node = GregorNode::start(&[])?;
    let controller = node
        .addrs()
        .controller
        .clone()
        .expect("a controller listener");
    let (ok, _, err) = quorum_tool(&[
        "--bootstrap-controller",
        &controller,
        "remove-controller",
        "--controller-id",
        "1",
    ])?;
    assert!(
        !ok && err.contains("VoterNotFound") && err.contains("Cannot remove voter"),
        "{err}"
    );
    Ok(())
}
