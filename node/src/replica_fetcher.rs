//! Replica fetchers: this broker's followers. One task per leader broker (Kafka's
//! `ReplicaFetcherThread` with `num.replica.fetchers` = 1) fetches every partition this node
//! follows from that leader over one connection to the leader's listener, appends what it gets
//! as it is (offsets and leader epochs kept), follows the leader's high watermark, and
//! truncates a divergent tail when the leader answers with a diverging epoch (KIP-595 fields,
//! KIP-101/279 rules), so a former leader never keeps records the new leader does not have.
//!
//! The set of followed partitions comes from `ReplicationPublisher` through a watch channel;
//! a leader change moves a partition from one task to another.
//!
//! Each fetch updates Kafka's lag metrics: per partition, how far its log end is behind the
//! leader's high watermark (`FetcherLagMetrics.ConsumerLag`), and the largest over every task
//! (`ReplicaFetcherManager.MaxLag`).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwap;
use gregor_actors::log_manager::{FollowerLog, LogManager};
use gregor_actors::replication::{FollowedPartition, FollowerAssignments};
use gregor_metrics::removable::RemovableGauges;
use gregor_publishers::MetadataImage;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ReplicaState};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, FetchRequest, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::admin::AdminClient;

const NONE: i16 = 0;
const OFFSET_OUT_OF_RANGE: i16 = 1;
/// ListOffsets' special timestamps.
const LATEST_TIMESTAMP: i64 = -1;
const EARLIEST_TIMESTAMP: i64 = -2;

/// The follower's fetch settings (`replica.fetch.*`).
#[derive(Debug, Clone)]
pub struct FetcherSettings {
    pub node_id: i32,
    /// The listener whose endpoint of the leader the fetcher connects to
    /// (`inter.broker.listener.name`).
    pub listener_name: String,
    /// How connections to that listener are secured (TLS, SASL with
    /// `sasl.mechanism.inter.broker.protocol`).
    pub connector: Arc<crate::network::peer::PeerConnector>,
    pub max_wait_ms: i32,
    pub partition_max_bytes: i32,
    pub response_max_bytes: i32,
    pub backoff: Duration,
    /// Test only (`GREGOR_TEST_ONLY_PAUSE_REPLICA_FETCH_FILE`): while this file exists the
    /// fetchers neither fetch nor append, so a test can give a leader records its followers
    /// never get (then kill it, and check that it truncates them when it comes back).
    pub pause_file: Option<std::path::PathBuf>,
}

/// The environment variable naming [`FetcherSettings::pause_file`]. Nothing sets it outside
/// tests.
pub const PAUSE_HOOK_ENV: &str = "GREGOR_TEST_ONLY_PAUSE_REPLICA_FETCH_FILE";

impl FetcherSettings {
    fn paused(&self) -> bool {
        self.pause_file.as_ref().is_some_and(|file| file.exists())
    }
}

/// Starts the fetcher manager: it follows `assignments` and runs one task per leader.
pub fn spawn(
    logs: Arc<LogManager>,
    image: Arc<ArcSwap<MetadataImage>>,
    mut assignments: watch::Receiver<Arc<FollowerAssignments>>,
    settings: FetcherSettings,
) {
    tokio::spawn(async move {
        let mut fetchers: BTreeMap<i32, watch::Sender<Vec<FollowedPartition>>> = BTreeMap::new();
        let max_lags = MaxLags::default();
        loop {
            let current = assignments.borrow_and_update().clone();
            fetchers.retain(|leader, sender| {
                let keep = current.contains_key(leader);
                if !keep {
                    tracing::info!(leader, "no more partitions to fetch from this leader");
                    sender.send_replace(Vec::new());
                }
                keep
            });
            for (leader, partitions) in current.iter() {
                match fetchers.get(leader) {
                    Some(sender) => {
                        sender.send_if_modified(|old| {
                            if old == partitions {
                                return false;
                            }
                            old.clone_from(partitions);
                            true
                        });
                    }
                    None => {
                        let (sender, receiver) = watch::channel(partitions.clone());
                        tracing::info!(
                            leader,
                            partitions = partitions.len(),
                            "starting a replica fetcher"
                        );
                        let fetcher = Fetcher {
                            leader: *leader,
                            logs: logs.clone(),
                            image: image.clone(),
                            settings: settings.clone(),
                            partitions: receiver,
                            delayed: HashMap::new(),
                            epochs: HashMap::new(),
                            lags: HashMap::new(),
                            max_lags: max_lags.clone(),
                            out_of_range: Vec::new(),
                        };
                        tokio::spawn(fetcher.run());
                        fetchers.insert(*leader, sender);
                    }
                }
            }
            if assignments.changed().await.is_err() {
                return;
            }
        }
    });
}

type Key = (String, i32);

/// The largest partition lag of each fetcher task, by leader, behind the MaxLag gauge.
#[derive(Clone, Default)]
struct MaxLags(Arc<Mutex<BTreeMap<i32, i64>>>);

impl MaxLags {
    /// Sets (or, with `None`, removes) `leader`'s largest lag and publishes the maximum.
    fn set(&self, leader: i32, lag: Option<i64>) {
        let mut lags = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match lag {
            Some(lag) => lags.insert(leader, lag),
            None => lags.remove(&leader),
        };
        gregor_metrics::replica_fetcher_max_lag(lags.values().copied().max().unwrap_or(0));
    }
}

/// A followed partition's lag series (removed with it) and its last value.
struct PartitionLag {
    _series: RemovableGauges,
    gauge: metrics::Gauge,
    lag: i64,
}

struct Fetcher {
    leader: i32,
    logs: Arc<LogManager>,
    image: Arc<ArcSwap<MetadataImage>>,
    settings: FetcherSettings,
    partitions: watch::Receiver<Vec<FollowedPartition>>,
    /// Partitions left alone until then after an error (`replica.fetch.backoff.ms`).
    delayed: HashMap<Key, Instant>,
    /// The latest epoch of each follower log (its last batch's), for `LastFetchedEpoch`.
    epochs: HashMap<Key, Option<i32>>,
    /// Lag of each partition fetched from this leader.
    lags: HashMap<Key, PartitionLag>,
    max_lags: MaxLags,
    /// Partitions whose fetch offset the last answer called out of range, with the leader
    /// epoch they were fetched at: reset after the answer, with the leader's offsets.
    out_of_range: Vec<(Key, i32)>,
}

impl Fetcher {
    async fn run(mut self) {
        let mut client: Option<AdminClient> = None;
        loop {
            let partitions = self.partitions.borrow_and_update().clone();
            self.lags.retain(|(topic, index), _| {
                partitions
                    .iter()
                    .any(|p| p.partition == *index && p.topic == *topic)
            });
            if partitions.is_empty() {
                self.max_lags.set(self.leader, None);
                return;
            }
            if self.settings.paused() {
                self.pause(Duration::from_millis(50)).await;
                continue;
            }
            if client.is_none() {
                client = self.connect().await;
                if client.is_none() {
                    self.pause(self.settings.backoff).await;
                    continue;
                }
            }
            let Some(connection) = client.as_mut() else {
                continue;
            };
            // The diverging-epoch fields need Fetch v12 or later.
            let version = connection.version_of::<FetchRequest>().filter(|v| *v >= 12);
            let Some(version) = version else {
                tracing::error!(
                    leader = self.leader,
                    "the leader does not serve Fetch v12 or later"
                );
                client = None;
                self.pause(self.settings.backoff).await;
                continue;
            };
            let Some((request, requested)) = self.request(&partitions, version).await else {
                // Nothing fetchable now (logs opening, partitions backing off).
                self.pause(Duration::from_millis(100)).await;
                continue;
            };
            let Some(connection) = client.as_mut() else {
                continue;
            };
            let response = match connection.send_at(&request, version).await {
                Ok(response) => response,
                Err(error) => {
                    tracing::warn!(leader = self.leader, %error, "replica fetch failed; reconnecting");
                    client = None;
                    self.pause(self.settings.backoff).await;
                    continue;
                }
            };
            if response.error_code != NONE {
                tracing::warn!(
                    leader = self.leader,
                    error_code = response.error_code,
                    "replica fetch refused"
                );
                self.pause(self.settings.backoff).await;
                continue;
            }
            let image = self.image.load_full();
            for topic in response.responses {
                let name = if topic.topic.is_empty() {
                    image
                        .topics
                        .get_by_id(&topic.topic_id)
                        .map(|t| t.name.to_string())
                } else {
                    Some(topic.topic.to_string())
                };
                let Some(name) = name else {
                    continue;
                };
                for partition in topic.partitions {
                    let key = (name.clone(), partition.partition_index);
                    // Kafka's rule: a result counts only while the partition is still fetched
                    // from this leader at the same epoch and offset (the publisher may have
                    // moved it, or made this node its leader, while the fetch was out).
                    let Some(&(leader_epoch, fetch_offset)) = requested.get(&key) else {
                        continue;
                    };
                    let still_followed = self.partitions.borrow().iter().any(|p| {
                        p.partition == key.1 && p.leader_epoch == leader_epoch && p.topic == key.0
                    });
                    let unchanged = self
                        .logs
                        .partition(&key.0, key.1)
                        .is_some_and(|state| state.log_end_offset() == fetch_offset);
                    if still_followed && unchanged {
                        self.process(&name, leader_epoch, partition).await;
                    }
                }
            }
            for ((topic, index), leader_epoch) in std::mem::take(&mut self.out_of_range) {
                let Some(connection) = client.as_mut() else {
                    break;
                };
                if let Err(error) = self
                    .reset_out_of_range(connection, &topic, index, leader_epoch)
                    .await
                {
                    tracing::warn!(leader = self.leader, %error, "cannot ask the leader for its offsets; reconnecting");
                    client = None;
                }
            }
            let max_lag = self.lags.values().map(|l| l.lag).max().unwrap_or(0);
            self.max_lags.set(self.leader, Some(max_lag));
        }
    }

    /// Records `key`'s lag after a fetch: the leader's high watermark minus the local log end
    /// (Kafka's definition; 0 once the follower holds everything committed).
    fn record_lag(&mut self, key: Key, high_watermark: i64, log_end_offset: i64) {
        let lag = (high_watermark - log_end_offset).max(0);
        let leader = self.leader;
        let entry = self.lags.entry(key).or_insert_with_key(|(topic, index)| {
            let (series, gauge) =
                gregor_metrics::replica_fetcher_partition_lag(leader, topic, *index);
            PartitionLag {
                _series: series,
                gauge,
                lag: 0,
            }
        });
        entry.lag = lag;
        entry.gauge.set(lag as f64);
    }

    /// Sleeps `duration`, or less when the followed partitions change.
    async fn pause(&mut self, duration: Duration) {
        let _ = tokio::time::timeout(duration, self.partitions.changed()).await;
    }

    async fn connect(&self) -> Option<AdminClient> {
        let image = self.image.load();
        let broker = image.cluster.broker(self.leader)?;
        let endpoint = broker
            .endpoint(&self.settings.listener_name)
            .or_else(|| broker.endpoints.first())?;
        let address = format!("{}:{}", endpoint.host, endpoint.port);
        match AdminClient::connect_secured(&address, &self.settings.connector).await {
            Ok(mut client) => {
                client.set_client_id(&format!("broker-{}-fetcher-0", self.settings.node_id));
                tracing::info!(leader = self.leader, %address, "replica fetcher connected");
                Some(client)
            }
            Err(error) => {
                tracing::warn!(leader = self.leader, %address, %error, "cannot connect to the leader");
                None
            }
        }
    }

    /// The Fetch request for every followed partition whose log serves and that is not backing
    /// off, with the leader epoch and fetch offset asked for each; `None` when there is none.
    async fn request(
        &mut self,
        partitions: &[FollowedPartition],
        version: i16,
    ) -> Option<(FetchRequest, HashMap<Key, (i32, i64)>)> {
        let mut requested = HashMap::new();
        let now = Instant::now();
        self.delayed.retain(|_, until| *until > now);
        let mut topics: BTreeMap<(String, uuid::Uuid), Vec<FetchPartition>> = BTreeMap::new();
        for followed in partitions {
            let key = (followed.topic.clone(), followed.partition);
            if self.delayed.contains_key(&key) {
                continue;
            }
            let Some(state) = self.logs.partition(&followed.topic, followed.partition) else {
                continue;
            };
            if !state.is_serving() || state.topic_id != followed.topic_id {
                continue;
            }
            let latest_epoch = match self.epochs.get(&key) {
                Some(epoch) => *epoch,
                None => match self
                    .logs
                    .follower_log(&followed.topic, followed.partition)
                    .await
                {
                    Ok(log) => {
                        self.epochs.insert(key.clone(), log.latest_epoch);
                        log.latest_epoch
                    }
                    Err(_) => continue,
                },
            };
            let fetch_offset = state.log_end_offset();
            requested.insert(key, (followed.leader_epoch, fetch_offset));
            topics
                .entry((followed.topic.clone(), followed.topic_id))
                .or_default()
                .push(
                    FetchPartition::default()
                        .with_partition(followed.partition)
                        .with_current_leader_epoch(followed.leader_epoch)
                        .with_fetch_offset(fetch_offset)
                        .with_last_fetched_epoch(latest_epoch.unwrap_or(-1))
                        .with_log_start_offset(state.log_start_offset())
                        .with_partition_max_bytes(self.settings.partition_max_bytes),
                );
        }
        if topics.is_empty() {
            return None;
        }
        let broker_epoch = self
            .image
            .load()
            .cluster
            .broker(self.settings.node_id)
            .map_or(-1, |b| b.epoch);
        let mut request = FetchRequest::default();
        // The replica id moved into the tagged ReplicaState in v15 (KIP-903).
        if version >= 15 {
            request.replica_state = ReplicaState::default()
                .with_replica_id(BrokerId(self.settings.node_id))
                .with_replica_epoch(broker_epoch);
        } else {
            request.replica_id = BrokerId(self.settings.node_id);
        }
        Some((
            request
                .with_max_wait_ms(self.settings.max_wait_ms)
                .with_min_bytes(1)
                .with_max_bytes(self.settings.response_max_bytes)
                .with_isolation_level(0)
                .with_session_id(0)
                .with_session_epoch(-1)
                .with_topics(
                    topics
                        .into_iter()
                        .map(|((name, id), partitions)| {
                            // Topics are named by id from v13 on.
                            let topic = FetchTopic::default().with_partitions(partitions);
                            if version >= 13 {
                                topic.with_topic_id(id)
                            } else {
                                topic.with_topic(TopicName(StrBytes::from_string(name)))
                            }
                        })
                        .collect(),
                ),
            requested,
        ))
    }

    async fn process(&mut self, topic: &str, leader_epoch: i32, partition: PartitionData) {
        let index = partition.partition_index;
        let key = (topic.to_owned(), index);
        let Some(state) = self.logs.partition(topic, index) else {
            return;
        };
        if self.settings.paused() {
            return;
        }
        match partition.error_code {
            NONE => {}
            OFFSET_OUT_OF_RANGE => {
                // Reset with the leader's offsets once the answer is read (it needs the
                // connection).
                self.out_of_range.push((key, leader_epoch));
                return;
            }
            code => {
                tracing::debug!(
                    topic,
                    partition = index,
                    leader = self.leader,
                    error_code = code,
                    "replica fetch of a partition failed"
                );
                self.delayed
                    .insert(key, Instant::now() + self.settings.backoff);
                return;
            }
        }
        let diverging = partition.diverging_epoch;
        if diverging.epoch >= 0 || diverging.end_offset >= 0 {
            let target = self
                .truncation_offset(topic, index, diverging.epoch, diverging.end_offset)
                .await;
            if let Some(target) = target {
                self.truncate(topic, index, leader_epoch, target, false)
                    .await;
            }
            return;
        }
        if let Some(records) = partition.records.filter(|r| !r.is_empty()) {
            let replicated_bytes = records.len() as u64;
            match self
                .logs
                .append_as_follower(topic, index, (self.leader, leader_epoch), records)
                .await
            {
                Ok(log) => {
                    gregor_metrics::replication_bytes_in(replicated_bytes);
                    self.epochs.insert(key.clone(), log.latest_epoch);
                }
                Err(error) => {
                    tracing::warn!(topic, partition = index, %error, "cannot append replicated records");
                    self.delayed
                        .insert(key, Instant::now() + self.settings.backoff);
                    return;
                }
            }
        }
        if state.set_follower_high_watermark(partition.high_watermark) {
            state.appended.notify_waiters();
        }
        // Kafka's fetcher: the leader's log start (moved by DeleteRecords or retention) is the
        // follower's too, so what the leader deleted stays deleted once the follower leads.
        if partition.log_start_offset > state.log_start_offset() {
            if let Err(error) = self
                .logs
                .follow_log_start(topic, index, partition.log_start_offset)
                .await
            {
                tracing::warn!(topic, partition = index, %error, "cannot raise the log start offset to the leader's");
            }
        }
        self.record_lag(key, partition.high_watermark, state.log_end_offset());
    }

    /// Where to cut the local log for the leader's (epoch, end offset) answer, by KIP-279's
    /// rules: the end of the largest local epoch ≤ the leader's, capped at the leader's end
    /// offset when both know that epoch.
    async fn truncation_offset(
        &self,
        topic: &str,
        index: i32,
        leader_epoch: i32,
        leader_end_offset: i64,
    ) -> Option<i64> {
        let state = self.logs.partition(topic, index)?;
        let log_end = state.log_end_offset();
        if leader_end_offset < 0 {
            return Some(state.high_watermark());
        }
        if leader_epoch < 0 {
            return Some(leader_end_offset.min(log_end));
        }
        let local = self
            .logs
            .end_offset_for_epoch(topic, index, leader_epoch)
            .await
            .ok()?;
        Some(truncation_target(
            local,
            (leader_epoch, leader_end_offset),
            log_end,
        ))
    }

    /// A fetch offset out of range at the leader, as Kafka's fetcher resets it
    /// (`AbstractFetcherThread.fetchOffsetAndTruncate`): below the leader's end only when
    /// the follower's log goes past it (then cut to that end); a log that ends before the
    /// leader's log start is emptied to start there, the only offset it can fetch from.
    /// Otherwise the fetch goes on from the follower's end. Errors are the connection's.
    async fn reset_out_of_range(
        &mut self,
        connection: &mut AdminClient,
        topic: &str,
        index: i32,
        leader_epoch: i32,
    ) -> Result<(), crate::admin::AdminError> {
        let key = (topic.to_owned(), index);
        let Some(state) = self.logs.partition(topic, index) else {
            return Ok(());
        };
        let log_end = state.log_end_offset();
        let leader_end = self
            .leader_offset(connection, topic, index, leader_epoch, LATEST_TIMESTAMP)
            .await?;
        let leader_start = match leader_end {
            Some(end) if end < log_end => {
                tracing::warn!(
                    topic,
                    partition = index,
                    log_end,
                    leader_end = end,
                    "fetch offset out of range at the leader; truncating to the leader's end"
                );
                self.truncate(topic, index, leader_epoch, end, false).await;
                return Ok(());
            }
            Some(_) => {
                self.leader_offset(connection, topic, index, leader_epoch, EARLIEST_TIMESTAMP)
                    .await?
            }
            None => None,
        };
        match leader_start {
            Some(start) if start > log_end => {
                tracing::warn!(
                    topic,
                    partition = index,
                    log_end,
                    leader_start = start,
                    "the leader's log starts past this replica's end; starting the replica there"
                );
                self.truncate(topic, index, leader_epoch, start, true).await;
            }
            // In range by now (the leader moved on), or its offsets unknown: ask again later.
            _ => {
                self.delayed
                    .insert(key, Instant::now() + self.settings.backoff);
            }
        }
        Ok(())
    }

    /// The leader's offset for `timestamp` (latest or earliest), asked as this replica;
    /// `None` when the leader answers an error for the partition.
    async fn leader_offset(
        &self,
        connection: &mut AdminClient,
        topic: &str,
        index: i32,
        leader_epoch: i32,
        timestamp: i64,
    ) -> Result<Option<i64>, crate::admin::AdminError> {
        let Some(version) = connection.version_of::<ListOffsetsRequest>() else {
            return Ok(None);
        };
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(self.settings.node_id))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(StrBytes::from_string(topic.to_owned())))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(index)
                    .with_current_leader_epoch(leader_epoch)
                    .with_timestamp(timestamp)])]);
        let response = connection.send_at(&request, version).await?;
        Ok(response
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .find(|p| p.partition_index == index && p.error_code == NONE)
            .map(|p| p.offset))
    }

    /// Cuts the follower log to `offset`, or with `fully` empties it to start there.
    async fn truncate(
        &mut self,
        topic: &str,
        index: i32,
        leader_epoch: i32,
        offset: i64,
        fully: bool,
    ) {
        match self
            .logs
            .truncate_follower(topic, index, (self.leader, leader_epoch), offset, fully)
            .await
        {
            Ok(FollowerLog {
                log_end_offset,
                latest_epoch,
            }) => {
                tracing::info!(
                    topic,
                    partition = index,
                    leader = self.leader,
                    log_end_offset,
                    "follower log truncated to the leader's history"
                );
                self.epochs.insert((topic.to_owned(), index), latest_epoch);
            }
            Err(error) => {
                tracing::warn!(topic, partition = index, %error, "cannot truncate the follower log");
                self.delayed.insert(
                    (topic.to_owned(), index),
                    Instant::now() + self.settings.backoff,
                );
            }
        }
    }
}

/// KIP-279: with the follower's own (epoch, end) for the leader's epoch, the offset to truncate
/// to. When the follower never had the leader's epoch it cuts at the end of its own largest
/// earlier epoch and asks again (its next fetch carries its new last epoch).
fn truncation_target(local: (i32, i64), leader: (i32, i64), log_end: i64) -> i64 {
    let (local_epoch, local_end) = local;
    let (leader_epoch, leader_end) = leader;
    if local_epoch < 0 || local_end < 0 {
        leader_end.min(log_end)
    } else if local_epoch == leader_epoch {
        local_end.min(leader_end).min(log_end)
    } else {
        local_end.min(log_end)
    }
}

#[cfg(test)]
mod tests {
    use super::truncation_target;

    #[test]
    fn truncation_follows_kip_279() {
        // Both have epoch 3: cut at the smaller end.
        assert_eq!(truncation_target((3, 120), (3, 100), 130), 100);
        // The follower never had epoch 4: cut at the end of its epoch 2, ask again.
        assert_eq!(truncation_target((2, 90), (4, 100), 130), 90);
        // Nothing local to compare: the leader's end.
        assert_eq!(truncation_target((-1, -1), (3, 100), 130), 100);
        // Never past the local log end.
        assert_eq!(truncation_target((3, 200), (3, 150), 130), 130);
    }
}
