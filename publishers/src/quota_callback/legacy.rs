//! Kafka's old contract, for plug-ins ported from Java: [`ClientQuotaCallback`] receives a whole
//! [`Cluster`] on every topic or broker change, and [`Legacy`] adapts such a plug-in to
//! [`ClientQuotaCallbackHandler`] by building that `Cluster` from the view.
//!
//! Building a `Cluster` costs time and memory in proportion to the cluster (every partition is
//! copied into a `PartitionInfo`, as Kafka does), so only legacy plug-ins pay it; see
//! BENCHMARKS.md for the figures next to the view's. Two of Kafka's `toCluster` defects are not
//! reproduced:
//!
//! - **One node per broker** (KAFKA-19122): Kafka's KRaft `toCluster` adds one `Node` per
//!   listener of each broker and repeats every partition once per listener of its leader. Here
//!   each unfenced broker is one node, addressed by its first advertised listener (in KRaft no
//!   listener is "the" request's listener on this path).
//! - **No panic on fenced or unregistered replicas** (Kafka's NPE, PR #19803): a replica or ISR
//!   member whose broker is fenced or unknown appears as an unknown node (empty host, port -1,
//!   as Java's `new Node(id, "", -1)`) and is listed in `offline_replicas`; a partition whose
//!   leader is fenced or unknown is kept, with no leader (Kafka drops it).
//!
//! The "controller" is the lowest-id unfenced broker: Kafka reports a random alive broker there
//! for compatibility with ZooKeeper-era plug-ins; a deterministic choice keeps tests stable.

use std::collections::HashMap;
use std::sync::Arc;

use uuid::Uuid;

use super::view::ClusterMetadata;
use super::{
    CallbackConfigs, CallbackError, ClientQuotaCallbackHandler, ClientQuotaEntity, ClientQuotaType,
    KafkaPrincipal, QuotaMetricTags,
};

/// A broker as Kafka's `Node`: id, one host and port, rack.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    /// Node id.
    pub id: i32,
    /// Host of the broker's first listener ("" when unknown).
    pub host: Arc<str>,
    /// Port of that listener (-1 when unknown).
    pub port: i32,
    /// Rack, if configured.
    pub rack: Option<Arc<str>>,
}

impl Node {
    /// A node known only by id (Java's `new Node(id, "", -1)`): a fenced or unregistered
    /// replica.
    pub fn unknown(id: i32) -> Self {
        Node {
            id,
            host: Arc::from(""),
            port: -1,
            rack: None,
        }
    }

    /// Whether this node has no address (fenced or unregistered broker).
    pub fn is_unknown(&self) -> bool {
        self.port < 0
    }
}

/// One partition as Kafka's `PartitionInfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartitionInfo {
    /// Topic name.
    pub topic: Arc<str>,
    /// Partition index.
    pub partition: i32,
    /// The leader, when it is an unfenced broker.
    pub leader: Option<Node>,
    /// Every replica.
    pub replicas: Vec<Node>,
    /// In-sync replicas.
    pub in_sync_replicas: Vec<Node>,
    /// Replicas whose broker is missing or fenced or whose log directory is offline.
    pub offline_replicas: Vec<Node>,
}

/// The whole cluster as Kafka's `org.apache.kafka.common.Cluster`: nodes, every partition, and
/// the indexes Kafka's constructor builds (by topic, available by topic, by leader node).
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    cluster_id: String,
    nodes: Vec<Node>,
    nodes_by_id: HashMap<i32, Node>,
    controller: Option<Node>,
    topics: Vec<Arc<str>>,
    partitions_by_topic: HashMap<Arc<str>, Vec<PartitionInfo>>,
    available_by_topic: HashMap<Arc<str>, Vec<usize>>,
    partitions_by_node: HashMap<i32, Vec<(Arc<str>, usize)>>,
    topic_ids: HashMap<Arc<str>, Uuid>,
}

impl Cluster {
    /// Copies `view` into a `Cluster` (see the module docs for the rules).
    pub fn from_view(view: &dyn ClusterMetadata) -> Cluster {
        let mut cluster = Cluster {
            cluster_id: view.cluster_id().to_owned(),
            ..Cluster::default()
        };
        for id in view.broker_ids() {
            let Some(broker) = view.broker(id) else {
                continue;
            };
            if broker.fenced() {
                continue;
            }
            let node = match broker.listeners().first() {
                Some(endpoint) => Node {
                    id,
                    host: Arc::from(endpoint.host.as_str()),
                    port: i32::from(endpoint.port),
                    rack: broker.rack().map(Arc::from),
                },
                None => Node::unknown(id),
            };
            cluster.nodes_by_id.insert(id, node.clone());
            cluster.nodes.push(node);
        }
        cluster.controller = cluster.nodes.iter().min_by_key(|node| node.id).cloned();
        let node_of = |id: i32, nodes: &HashMap<i32, Node>| {
            nodes.get(&id).cloned().unwrap_or_else(|| Node::unknown(id))
        };
        for (topic_id, name) in view.topics() {
            let name: Arc<str> = Arc::from(name);
            let mut infos = Vec::with_capacity(view.partition_count(&name).unwrap_or(0));
            let mut available = Vec::new();
            for (index, partition) in view.partitions(&name) {
                let leader = cluster.nodes_by_id.get(&partition.leader()).cloned();
                if let Some(leader) = &leader {
                    available.push(infos.len());
                    cluster
                        .partitions_by_node
                        .entry(leader.id)
                        .or_default()
                        .push((Arc::clone(&name), infos.len()));
                }
                infos.push(PartitionInfo {
                    topic: Arc::clone(&name),
                    partition: index,
                    leader,
                    replicas: partition
                        .replicas()
                        .iter()
                        .map(|id| node_of(*id, &cluster.nodes_by_id))
                        .collect(),
                    in_sync_replicas: partition
                        .in_sync_replicas()
                        .iter()
                        .map(|id| node_of(*id, &cluster.nodes_by_id))
                        .collect(),
                    offline_replicas: view
                        .offline_replicas(partition)
                        .map(|id| node_of(id, &cluster.nodes_by_id))
                        .collect(),
                });
            }
            cluster.topic_ids.insert(Arc::clone(&name), topic_id);
            cluster
                .available_by_topic
                .insert(Arc::clone(&name), available);
            cluster.partitions_by_topic.insert(Arc::clone(&name), infos);
            cluster.topics.push(name);
        }
        cluster
    }

    /// The cluster id.
    pub fn cluster_id(&self) -> &str {
        &self.cluster_id
    }

    /// One node per unfenced broker, by ascending id.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The node of unfenced broker `id`.
    pub fn node_by_id(&self, id: i32) -> Option<&Node> {
        self.nodes_by_id.get(&id)
    }

    /// The lowest-id unfenced broker (see the module docs).
    pub fn controller(&self) -> Option<&Node> {
        self.controller.as_ref()
    }

    /// Topic names, ascending.
    pub fn topics(&self) -> impl Iterator<Item = &str> {
        self.topics.iter().map(|name| &**name)
    }

    /// The id of topic `name`.
    pub fn topic_id(&self, name: &str) -> Option<Uuid> {
        self.topic_ids.get(name).copied()
    }

    /// Every partition of `topic` (empty for an unknown topic).
    pub fn partitions_for_topic(&self, topic: &str) -> &[PartitionInfo] {
        self.partitions_by_topic
            .get(topic)
            .map_or(&[], |infos| infos.as_slice())
    }

    /// The partitions of `topic` that have a leader.
    pub fn available_partitions_for_topic<'a>(
        &'a self,
        topic: &str,
    ) -> impl Iterator<Item = &'a PartitionInfo> + 'a {
        let infos = self.partitions_for_topic(topic);
        self.available_by_topic
            .get(topic)
            .into_iter()
            .flatten()
            .filter_map(move |index| infos.get(*index))
    }

    /// The partitions led by node `id`.
    pub fn partitions_for_node(&self, id: i32) -> impl Iterator<Item = &PartitionInfo> {
        self.partitions_by_node
            .get(&id)
            .into_iter()
            .flatten()
            .filter_map(|(topic, index)| self.partitions_by_topic.get(topic)?.get(*index))
    }

    /// Partition `partition` of `topic`.
    pub fn partition(&self, topic: &str, partition: i32) -> Option<&PartitionInfo> {
        let infos = self.partitions_for_topic(topic);
        infos
            .binary_search_by_key(&partition, |info| info.partition)
            .ok()
            .and_then(|index| infos.get(index))
    }

    /// The leader of `topic`/`partition`, if it has one.
    pub fn leader_for(&self, topic: &str, partition: i32) -> Option<&Node> {
        self.partition(topic, partition)?.leader.as_ref()
    }

    /// Number of partitions over all topics.
    pub fn partition_count(&self) -> usize {
        self.partitions_by_topic.values().map(Vec::len).sum()
    }
}

/// A plug-in written against Kafka's `ClientQuotaCallback` (deprecated upstream in 4.4): the
/// methods of [`ClientQuotaCallbackHandler`], but cluster changes arrive as a whole
/// [`Cluster`]. Wrap it in [`Legacy`] to install it; every requirement of
/// [`ClientQuotaCallbackHandler`] applies.
pub trait ClientQuotaCallback: Send + Sync {
    /// See [`ClientQuotaCallbackHandler::name`].
    fn name(&self) -> &str;
    /// See [`ClientQuotaCallbackHandler::configure`].
    fn configure(&mut self, configs: &CallbackConfigs) -> Result<(), CallbackError>;
    /// See [`ClientQuotaCallbackHandler::quota_metric_tags`].
    fn quota_metric_tags(
        &self,
        quota_type: ClientQuotaType,
        principal: &KafkaPrincipal,
        client_id: &str,
    ) -> QuotaMetricTags;
    /// See [`ClientQuotaCallbackHandler::quota_limit`].
    fn quota_limit(&self, quota_type: ClientQuotaType, tags: &QuotaMetricTags) -> Option<f64>;
    /// See [`ClientQuotaCallbackHandler::update_quota`].
    fn update_quota(&self, quota_type: ClientQuotaType, entity: &ClientQuotaEntity, value: f64);
    /// See [`ClientQuotaCallbackHandler::remove_quota`].
    fn remove_quota(&self, quota_type: ClientQuotaType, entity: &ClientQuotaEntity);
    /// See [`ClientQuotaCallbackHandler::quota_reset_required`].
    fn quota_reset_required(&self, quota_type: ClientQuotaType) -> bool;
    /// Topics, partitions or brokers changed; `cluster` is a full copy of the new cluster.
    /// Returns whether any limit may have changed.
    fn update_cluster_metadata_legacy(&self, cluster: &Cluster) -> bool;
    /// See [`ClientQuotaCallbackHandler::reconfigure`].
    fn reconfigure(&self, configs: &CallbackConfigs) -> Result<(), CallbackError> {
        let _ = configs;
        Ok(())
    }
    /// See [`ClientQuotaCallbackHandler::reconfigurable_configs`].
    fn reconfigurable_configs(&self) -> &[&str] {
        &[]
    }
    /// See [`ClientQuotaCallbackHandler::close`].
    fn close(&self) {}
}

/// Installs a [`ClientQuotaCallback`] as a [`ClientQuotaCallbackHandler`]: each cluster change
/// builds a [`Cluster`] from the view, for this plug-in only.
#[derive(Debug)]
pub struct Legacy<C>(pub C);

impl<C: ClientQuotaCallback> ClientQuotaCallbackHandler for Legacy<C> {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn configure(&mut self, configs: &CallbackConfigs) -> Result<(), CallbackError> {
        self.0.configure(configs)
    }

    fn quota_metric_tags(
        &self,
        quota_type: ClientQuotaType,
        principal: &KafkaPrincipal,
        client_id: &str,
    ) -> QuotaMetricTags {
        self.0.quota_metric_tags(quota_type, principal, client_id)
    }

    fn quota_limit(&self, quota_type: ClientQuotaType, tags: &QuotaMetricTags) -> Option<f64> {
        self.0.quota_limit(quota_type, tags)
    }

    fn update_quota(&self, quota_type: ClientQuotaType, entity: &ClientQuotaEntity, value: f64) {
        self.0.update_quota(quota_type, entity, value);
    }

    fn remove_quota(&self, quota_type: ClientQuotaType, entity: &ClientQuotaEntity) {
        self.0.remove_quota(quota_type, entity);
    }

    fn quota_reset_required(&self, quota_type: ClientQuotaType) -> bool {
        self.0.quota_reset_required(quota_type)
    }

    fn update_cluster_metadata(&self, cluster: &dyn ClusterMetadata) -> bool {
        self.0
            .update_cluster_metadata_legacy(&Cluster::from_view(cluster))
    }

    fn reconfigure(&self, configs: &CallbackConfigs) -> Result<(), CallbackError> {
        self.0.reconfigure(configs)
    }

    fn reconfigurable_configs(&self) -> &[&str] {
        self.0.reconfigurable_configs()
    }

    fn close(&self) {
        self.0.close();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::quota_callback::testing::{run_conformance_suite, ImageBuilder};
    use crate::quota_callback::ImageClusterMetadata;
    use crate::records::NO_LEADER;

    #[test]
    fn one_node_per_broker_and_no_panic_on_fenced_or_missing_replicas() {
        let image = ImageBuilder::new()
            .broker_with(1, false, &["PLAINTEXT", "INTERNAL", "REPLICATION"])
            .broker_with(2, true, &["PLAINTEXT", "INTERNAL"])
            .broker_with(3, false, &["PLAINTEXT"])
            .topic_with(
                "t",
                &[
                    (1, &[1, 2, 9]),
                    (2, &[2, 3]),
                    (NO_LEADER, &[3]),
                    (3, &[3, 1]),
                ],
            )
            .build();
        let cluster = Cluster::from_view(&ImageClusterMetadata::new("c1", &image));
        assert_eq!(cluster.cluster_id(), "c1");
        // KAFKA-19122: three listeners, still one node; the fenced broker is not a node.
        assert_eq!(
            cluster.nodes().iter().map(|n| n.id).collect::<Vec<_>>(),
            vec![1, 3]
        );
        assert_eq!(cluster.node_by_id(1).map(|n| n.port), Some(9092));
        assert_eq!(cluster.controller().map(|n| n.id), Some(1));
        // Each partition exactly once.
        assert_eq!(cluster.partitions_for_topic("t").len(), 4);
        assert_eq!(cluster.partition_count(), 4);
        let p0 = cluster.partition("t", 0).unwrap();
        assert_eq!(p0.leader.as_ref().map(|n| n.id), Some(1));
        assert_eq!(p0.replicas.len(), 3);
        assert!(p0.replicas[1].is_unknown() && p0.replicas[2].is_unknown());
        assert_eq!(
            p0.offline_replicas.iter().map(|n| n.id).collect::<Vec<_>>(),
            vec![2, 9]
        );
        // Fenced leader: kept, without a leader, not available.
        assert!(cluster.leader_for("t", 1).is_none());
        assert_eq!(
            cluster
                .available_partitions_for_topic("t")
                .map(|p| p.partition)
                .collect::<Vec<_>>(),
            vec![0, 3]
        );
        assert_eq!(
            cluster
                .partitions_for_node(3)
                .map(|p| p.partition)
                .collect::<Vec<_>>(),
            vec![3]
        );
        assert!(cluster.partitions_for_topic("nope").is_empty());
        assert!(cluster.topic_id("t").is_some());
    }

    /// A legacy plug-in: remembers how many partitions it saw.
    #[derive(Default)]
    struct Counting {
        partitions: Mutex<Option<usize>>,
    }

    impl ClientQuotaCallback for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        fn configure(&mut self, _: &CallbackConfigs) -> Result<(), CallbackError> {
            Ok(())
        }
        fn quota_metric_tags(
            &self,
            _: ClientQuotaType,
            principal: &KafkaPrincipal,
            _: &str,
        ) -> QuotaMetricTags {
            QuotaMetricTags::from_pairs([("principal", principal.name.as_str())])
        }
        fn quota_limit(&self, _: ClientQuotaType, _: &QuotaMetricTags) -> Option<f64> {
            self.partitions.lock().unwrap().map(|n| n as f64)
        }
        fn update_quota(&self, _: ClientQuotaType, _: &ClientQuotaEntity, _: f64) {}
        fn remove_quota(&self, _: ClientQuotaType, _: &ClientQuotaEntity) {}
        fn quota_reset_required(&self, _: ClientQuotaType) -> bool {
            false
        }
        fn update_cluster_metadata_legacy(&self, cluster: &Cluster) -> bool {
            let mut seen = self.partitions.lock().unwrap();
            let now = Some(cluster.partition_count());
            let changed = *seen != now;
            *seen = now;
            changed
        }
    }

    #[test]
    fn legacy_plugins_run_through_the_adapter_and_pass_the_suite() {
        run_conformance_suite(|| Box::new(Legacy(Counting::default())));
        let callback = Legacy(Counting::default());
        let image = ImageBuilder::new()
            .broker(1)
            .topic_led_by("a", 5, 1)
            .build();
        assert!(callback.update_cluster_metadata(&ImageClusterMetadata::new("c", &image)));
        let tags =
            callback.quota_metric_tags(ClientQuotaType::Fetch, &KafkaPrincipal::user("u"), "c");
        assert_eq!(
            callback.quota_limit(ClientQuotaType::Fetch, &tags),
            Some(5.0)
        );
    }
}
