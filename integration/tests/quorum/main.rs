//! Multi-process metadata quorum: controllers formed with `--initial-controllers`, brokers as
//! observers, forwarding, DescribeQuorum, failover after kill -9.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

#[path = "../common/advertised.rs"]
mod advertised;
mod t10_three_controllers_two_brokers;
mod t20_add_remove_controller_by_id;
mod t25_remove_the_active_controller;
mod t30_broker_fencing;
mod t35_combined_node_fencing;
mod t36_forwarded_answers;
mod t37_forward_timeout;
mod t38_forward_without_leader;
mod t40_config_forwarding;
mod t45_producer_id_blocks;
mod t50_quota_forwarding;
mod t60_every_advertised_version;
mod t60_invalid_record_stops_the_node;
mod t60_linearizability_checker;
mod t60_private_rpcs;
mod t65_authenticated_controller_listener;
mod t66_peer_reauthentication;
mod t67_refused_envelopes;
mod t70_catch_up_within_request_limit;
mod t70_snapshot_catch_up;
mod t70_unregister_broker;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use gregor_integration::admin::{creatable, create_topics};
use gregor_integration::netns::{Host, NetLab};
use gregor_integration::ports::reserve_port;
use gregor_integration::{binary_path, wait_until, GregorNode, KafkaConn};
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::{
    CreateTopicsRequest, DescribeQuorumRequest, DescribeQuorumResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

/// How long a cluster may take to form or fail over on a loaded two-core machine.
pub const FORM_TIMEOUT: Duration = Duration::from_secs(60);

/// A Kafka-form UUID from `gregor storage random-uuid`.
pub fn random_uuid() -> anyhow::Result<String> {
    let output = Command::new(binary_path())
        .args(["storage", "random-uuid"])
        .output()
        .context("running gregor storage random-uuid")?;
    if !output.status.success() {
        bail!(
            "random-uuid failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
}

/// A running cluster: controllers (voters) and brokers.
pub struct Cluster {
    pub cluster_id: String,
    pub controllers: Vec<(i32, GregorNode)>,
    pub brokers: Vec<(i32, GregorNode)>,
    pub bootstrap_controllers: String,
    /// Each node's namespace, by node id, when the cluster runs in a lab.
    pub hosts: BTreeMap<i32, Host>,
    /// The namespaces the nodes run in; declared last so that it is dropped (its namespaces
    /// deleted) after the nodes are killed.
    pub lab: Option<Arc<NetLab>>,
}

/// The controller port inside a lab: each node has an address of its own there, so a fixed
/// port cannot collide with anything.
const LAB_CONTROLLER_PORT: u16 = 9093;

impl Cluster {
    /// Starts `controllers` voters (ids 1..) and `brokers` brokers (ids 11..).
    pub fn start(controllers: usize, brokers: usize) -> anyhow::Result<Cluster> {
        Self::start_with(controllers, brokers, &[])
    }

    /// [`Cluster::start`] with extra overrides for the controllers.
    pub fn start_with(
        controllers: usize,
        brokers: usize,
        controller_overrides: &[(&str, &str)],
    ) -> anyhow::Result<Cluster> {
        Self::start_inner(controllers, brokers, controller_overrides, None, false)
    }

    /// `count` nodes that are each broker and controller (`process.roles=broker,controller`,
    /// a client listener beside the controller one), formed as the voters of one quorum.
    pub fn start_combined(count: usize, overrides: &[(&str, &str)]) -> anyhow::Result<Cluster> {
        Self::start_inner(count, 0, overrides, None, true)
    }

    /// Every voter's controller listener address, in id order.
    pub fn controller_addrs(&self) -> Vec<String> {
        self.bootstrap_controllers
            .split(',')
            .map(str::to_owned)
            .collect()
    }

    /// [`Cluster::start`] with every node in a namespace of its own in `lab` (node `id` at
    /// host `id + 1` for controllers, `id` for brokers), so that nodes can be partitioned. The
    /// calling thread must be in the lab's hub to reach them (`NetLab::enter_hub`).
    pub fn start_in_lab(
        lab: Arc<NetLab>,
        controllers: usize,
        brokers: usize,
    ) -> anyhow::Result<Cluster> {
        Self::start_inner(controllers, brokers, &[], Some(lab), false)
    }

    fn start_inner(
        controllers: usize,
        brokers: usize,
        controller_overrides: &[(&str, &str)],
        lab: Option<Arc<NetLab>>,
        combined: bool,
    ) -> anyhow::Result<Cluster> {
        let cluster_id = random_uuid()?;
        let mut hosts = BTreeMap::new();
        let mut specs = Vec::new();
        for i in 0..controllers {
            let id = i as i32 + 1;
            let addr = match &lab {
                Some(lab) => {
                    let host = lab.add_host(id as u8 + 1)?;
                    let addr = format!("{}:{LAB_CONTROLLER_PORT}", host.addr);
                    hosts.insert(id, host);
                    addr
                }
                None => format!("127.0.0.1:{}", reserve_port()?),
            };
            specs.push((id, addr, random_uuid()?));
        }
        let initial = specs
            .iter()
            .map(|(id, addr, dir)| format!("{id}@{addr}:{dir}"))
            .collect::<Vec<_>>()
            .join(",");
        let bootstrap_controllers = specs
            .iter()
            .map(|(_, addr, _)| addr.clone())
            .collect::<Vec<_>>()
            .join(",");
        let mut started = Vec::new();
        for (id, addr, _) in &specs {
            let id_text = id.to_string();
            let (roles, listeners) = match combined {
                true => (
                    "broker,controller",
                    format!("PLAINTEXT://127.0.0.1:0,CONTROLLER://{addr}"),
                ),
                false => ("controller", format!("CONTROLLER://{addr}")),
            };
            let host = hosts.get(id);
            let metrics = host.map(|h| format!("{}:0", h.addr));
            let mut overrides = vec![
                ("node.id", id_text.as_str()),
                ("process.roles", roles),
                ("listeners", listeners.as_str()),
                (
                    "controller.quorum.bootstrap.servers",
                    bootstrap_controllers.as_str(),
                ),
            ];
            if let Some(metrics) = &metrics {
                overrides.push(("metrics.listener", metrics));
            }
            overrides.extend_from_slice(controller_overrides);
            let node = GregorNode::start_formatted_in(
                host.map(|h| h.netns.as_str()),
                &overrides,
                &[
                    "--cluster-id",
                    &cluster_id,
                    "--initial-controllers",
                    &initial,
                ],
                false,
            )?;
            started.push((*id, node));
        }
        for (_, node) in &mut started {
            node.wait_ready()?;
        }
        let mut cluster = Cluster {
            cluster_id,
            controllers: started,
            brokers: Vec::new(),
            bootstrap_controllers,
            hosts,
            lab,
        };
        for i in 0..brokers {
            cluster.add_broker(11 + i as i32)?;
        }
        Ok(cluster)
    }

    /// Starts a broker that joins as an observer.
    pub fn add_broker(&mut self, id: i32) -> anyhow::Result<()> {
        self.add_broker_with(id, &[])
    }

    /// [`Cluster::add_broker`] with extra overrides for the broker.
    pub fn add_broker_with(&mut self, id: i32, extra: &[(&str, &str)]) -> anyhow::Result<()> {
        let host = match &self.lab {
            Some(lab) => Some(lab.add_host(u8::try_from(id)?)?),
            None => None,
        };
        let ip = host
            .as_ref()
            .map_or_else(|| "127.0.0.1".to_owned(), |h| h.addr.to_string());
        let (id_text, listeners, metrics) = (
            id.to_string(),
            format!("PLAINTEXT://{ip}:0"),
            format!("{ip}:0"),
        );
        let mut overrides = vec![
            ("node.id", id_text.as_str()),
            ("process.roles", "broker"),
            ("listeners", listeners.as_str()),
            ("metrics.listener", metrics.as_str()),
            (
                "controller.quorum.bootstrap.servers",
                self.bootstrap_controllers.as_str(),
            ),
        ];
        overrides.extend_from_slice(extra);
        let node = GregorNode::start_formatted_in(
            host.as_ref().map(|h| h.netns.as_str()),
            &overrides,
            &["--cluster-id", &self.cluster_id],
            true,
        )?;
        if let Some(host) = host {
            self.hosts.insert(id, host);
        }
        self.brokers.push((id, node));
        Ok(())
    }
}

/// Waits until a topic can be created through `bootstrap` (a node that forwards to the active
/// controller once it knows one).
pub async fn wait_forwarding(bootstrap: &str) -> anyhow::Result<()> {
    wait_until(
        "a topic created through a forwarding node",
        FORM_TIMEOUT,
        || async {
            let mut conn = KafkaConn::connect(bootstrap).await?;
            let request = create_topics(vec![creatable("forwarding-ready", 1, 1)], false);
            let response = conn.send::<CreateTopicsRequest>(&request, 7).await?;
            Ok(matches!(response.topics[0].error_code, 0 | 36).then_some(()))
        },
    )
    .await
}

/// DescribeQuorum for `__cluster_metadata-0` at `version`.
pub fn describe_quorum_request() -> DescribeQuorumRequest {
    DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)])])
}

/// Asks each address until one answers as leader; returns the answer.
pub async fn leader_view(addrs: &[String]) -> anyhow::Result<Option<DescribeQuorumResponse>> {
    for addr in addrs {
        let Ok(mut conn) = KafkaConn::connect(addr).await else {
            continue;
        };
        let Ok(response) = conn.send(&describe_quorum_request(), 2).await else {
            continue;
        };
        let ok = response.error_code == 0
            && response
                .topics
                .first()
                .and_then(|t| t.partitions.first())
                .is_some_and(|p| p.error_code == 0);
        if ok {
            return Ok(Some(response));
        }
    }
    Ok(None)
}

/// Waits until some controller answers DescribeQuorum as leader.
pub async fn wait_leader(addrs: &[String]) -> anyhow::Result<DescribeQuorumResponse> {
    wait_until("a quorum leader", FORM_TIMEOUT, || leader_view(addrs)).await
}

/// The leader id in a DescribeQuorum answer.
pub fn leader_id(response: &DescribeQuorumResponse) -> i32 {
    response.topics[0].partitions[0].leader_id.0
}
