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

    // A frozen controller is not added: Kafka's leader first asks it for its ApiVersions and
    // aborts with REQUEST_TIMED_OUT; here the leader has not heard from it for over 2 s.
    fourth.pause()?;
    let silent = wait_until(
        "the leader's last fetch of controller 4 over 2.5 s old",
        FORM_TIMEOUT,
        || async {
            let (ok, out, err) =
                quorum_tool(&["--bootstrap-server", &broker, "describe", "--replication"])?;
            anyhow::ensure!(ok, "{err}");
            // NodeId DirectoryId LogEndOffset Lag LastFetchTimestamp ...
            let last_fetch = out
                .lines()
                .map(|line| line.split_whitespace().collect::<Vec<_>>())
                .find(|columns| columns.first() == Some(&"4"))
                .and_then(|columns| columns.get(4)?.parse::<i64>().ok());
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)?
                .as_millis() as i64;
            Ok(last_fetch
                .is_some_and(|at| now_ms - at > 2_500)
                .then_some(()))
        },
    )
    .await;
    let refused = match silent {
        Ok(()) => quorum_tool(&[
            "--bootstrap-server",
            &broker,
            "add-controller",
            "--controller-id",
            "4",
        ]),
        Err(error) => Err(error),
    };
    fourth.resume()?;
    let (ok, _, err) = refused?;
    assert!(!ok && err.contains("has not answered the leader"), "{err}");
    assert!(err.contains("RequestTimedOut"), "{err}");
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
    // Resumed above: REQUEST_TIMED_OUT until the leader hears from it again.
    let (ok, out, err) = wait_until(
        "add-controller from its properties",
        FORM_TIMEOUT,
        || async {
            let (ok, out, err) = quorum_tool(&[
                "--bootstrap-server",
                &broker,
                "--command-config",
                config,
                "add-controller",
            ])?;
            Ok((ok || !err.contains("RequestTimedOut")).then_some((ok, out, err)))
        },
    )
    .await?;
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

    // Listing more listeners than a node decodes (read from the frame): without the quorum's
    // listener refused, naming ten; with it named twice, the last one right, added with one
    // endpoint per listener name.
    let framed = add_voter_listing_many(&broker, 4, &directory, &endpoint).await?;
    assert_eq!(framed.len(), 1_501, "one endpoint per listener name");
    let controller = framed
        .iter()
        .find(|(name, _)| name == "CONTROLLER")
        .map(|(_, address)| address.clone());
    assert_eq!(controller.as_deref(), Some(endpoint.as_str()));
    let (ok, _, err) = quorum_tool(&[
        "--bootstrap-server",
        &broker,
        "remove-controller",
        "--controller-id",
        "4",
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

/// Adds controller `id` (`directory`, listening at `endpoint`) with an AddRaftVoter v2 of
/// 1,500 made-up listeners around its CONTROLLER one, first refused without it; returns the
/// endpoints the quorum then lists for it, as (listener, host:port).
async fn add_voter_listing_many(
    broker: &str,
    id: i32,
    directory: &str,
    endpoint: &str,
) -> anyhow::Result<Vec<(String, String)>> {
    use gregor_integration::KafkaConn;
    use gregor_node::network::raft_voter_versions::AddRaftVoterRequestV;
    use kafka_protocol::messages::add_raft_voter_request::Listener;
    use kafka_protocol::messages::AddRaftVoterRequest;
    use kafka_protocol::protocol::StrBytes;
    let (host, port) = endpoint.rsplit_once(':').expect("host:port");
    let port: u16 = port.parse()?;
    let listener = |name: String, host: &str, port: u16| {
        Listener::default()
            .with_name(StrBytes::from_string(name))
            .with_host(StrBytes::from_string(host.to_owned()))
            .with_port(port)
    };
    let made_up: Vec<Listener> = (0..1_500)
        .map(|index| listener(format!("L{index}"), "h", 1))
        .collect();
    let directory = gregor_publishers::kafka_uuid::from_kafka_string(directory)
        .ok_or_else(|| anyhow::anyhow!("a directory id that is not a Kafka UUID"))?;
    let request = |listeners: Vec<Listener>| AddRaftVoterRequestV {
        request: AddRaftVoterRequest::default()
            .with_cluster_id(None)
            .with_timeout_ms(30_000)
            .with_voter_id(id)
            .with_voter_directory_id(directory)
            .with_listeners(listeners),
        ack_when_committed: true,
    };
    let mut conn = KafkaConn::connect(broker).await?;
    let refused = conn.send(&request(made_up.clone()), 2).await?.0;
    assert_eq!(refused.error_code, 42, "INVALID_REQUEST");
    let named: Vec<String> = (0..10).map(|index| format!("L{index}://h:1")).collect();
    assert_eq!(
        refused.error_message.as_deref(),
        Some(
            format!(
                "Add voter request didn't include the endpoint ([{}, and 1490 more]) for the default listener CONTROLLER",
                named.join(", ")
            )
            .as_str()
        )
    );
    let mut listeners = made_up;
    listeners.insert(3, listener("CONTROLLER".to_owned(), host, 1));
    listeners.push(listener("CONTROLLER".to_owned(), host, port));
    let added = wait_until("the framed add of the controller", FORM_TIMEOUT, || {
        let request = request(listeners.clone());
        async move {
            let mut conn = KafkaConn::connect(broker).await?;
            let answer = conn.send(&request, 2).await?.0;
            // REQUEST_TIMED_OUT while it catches up: retry.
            Ok((answer.error_code != 7).then_some(answer))
        }
    })
    .await?;
    assert_eq!(added.error_code, 0, "{added:?}");
    let view = leader_view(&[broker.to_owned()])
        .await?
        .ok_or_else(|| anyhow::anyhow!("no leader"))?;
    let node = view
        .nodes
        .iter()
        .find(|n| n.node_id.0 == id)
        .ok_or_else(|| anyhow::anyhow!("controller {id} not among the quorum's nodes"))?;
    Ok(node
        .listeners
        .iter()
        .map(|l| (l.name.to_string(), format!("{}:{}", l.host, l.port)))
        .collect())
}
