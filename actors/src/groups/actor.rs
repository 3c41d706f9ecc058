//! [`GroupCoordinator`]: the actor that owns [`Coordinator`] and carries out its effects.
//!
//! Requests arrive as messages; a JoinGroup or SyncGroup answer is a oneshot receiver the
//! handler awaits, so a parked request costs the actor nothing. Timers are `run_later` calls at
//! the deadlines the state asks for. Writes to `__consumer_offsets` and partition loads are
//! tasks on the actor's runtime that talk to the log manager's shard threads: the actor never
//! waits for file I/O.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use actix::prelude::*;
use bytes::Bytes;
use gregor_log::batch::{batches, BatchBuilder};
use gregor_log::compression::Compression;
use tokio::sync::oneshot;

use super::records::{self, CoordinatorRecord};
use super::state::{
    CommitRequest, Committed, ConsumerConfigs, ConsumerGroupDescription, ConsumerHeartbeat,
    ConsumerHeartbeatResult, Coordinator, Effect, GroupDescription, GroupListing, JoinRequest,
    JoinResult, Leaving, SyncRequest, SyncResult, TopicLookup, Write,
};
use super::{codes, GroupSettings, OFFSETS_TOPIC};
use crate::log_manager::LogManager;
use gregor_publishers::MetadataImage;

/// Bytes read from a partition's log per step while loading it.
const LOAD_READ_BYTES: u64 = 1 << 20;
/// How long a load waiting for the high watermark sleeps before it looks again.
const LOAD_WAIT_RECHECK: std::time::Duration = std::time::Duration::from_millis(200);

/// Owns the groups of the `__consumer_offsets` partitions this node leads.
pub struct GroupCoordinator {
    state: Coordinator,
    logs: Option<Arc<LogManager>>,
    /// Led partitions and their leader epochs (appends carry the epoch).
    led: HashMap<i32, i32>,
    /// One writer task per partition: its appends happen one after the other, in the order
    /// the state decided them, so the log replays to the same state.
    writers: HashMap<i32, tokio::sync::mpsc::UnboundedSender<PreparedWrite>>,
}

/// An encoded batch for a partition's writer task.
struct PreparedWrite {
    batch: Bytes,
    epoch: i32,
    done: Option<oneshot::Sender<i16>>,
    /// A numbered write of offsets, whose outcome goes back to the coordinator.
    offsets_write: Option<u64>,
}

/// The outcome of a numbered write of offsets (see [`Coordinator::offsets_written`]).
#[derive(Message)]
#[rtype(result = "()")]
struct OffsetsWritten {
    partition: i32,
    write: u64,
    replicated: bool,
}

impl Handler<OffsetsWritten> for GroupCoordinator {
    type Result = ();

    fn handle(&mut self, msg: OffsetsWritten, _ctx: &mut Context<Self>) {
        self.state
            .offsets_written(msg.partition, msg.write, msg.replicated);
    }
}

/// Gregor's replication wait's form of NOT_ENOUGH_REPLICAS: the records are in the log and the
/// high watermark passed them, with an ISR below `min.insync.replicas`.
const NOT_ENOUGH_REPLICAS_AFTER_APPEND: i16 = 20;

/// How long a write of offsets that timed out is still waited for before it is left
/// uncommitted until the partition's next load.
const LATE_REPLICATION_WAIT: std::time::Duration = std::time::Duration::from_secs(3600);

/// Appends one partition's batches in order and tells each write's waiter its code once the
/// batch is replicated to the partition's ISR (Kafka writes `__consumer_offsets` with
/// acks=all): a commit acknowledged by a coordinator that then fails is on the replica that
/// takes over. The appends stay in order; the waits for replication overlap.
async fn partition_writer(
    logs: Arc<LogManager>,
    partition: i32,
    commit_timeout: std::time::Duration,
    coordinator: Addr<GroupCoordinator>,
    mut queue: tokio::sync::mpsc::UnboundedReceiver<PreparedWrite>,
) {
    while let Some(write) = queue.recv().await {
        let appended = logs
            .append(OFFSETS_TOPIC, partition, write.batch, write.epoch)
            .await;
        let end = match appended {
            Ok(appended) => appended.last_offset + 1,
            Err(error) => {
                tracing::warn!(partition, %error, "append to __consumer_offsets failed");
                if let Some(done) = write.done {
                    let _ = done.send(append_error_code(error.code()));
                }
                if let Some(write) = write.offsets_write {
                    coordinator.do_send(OffsetsWritten {
                        partition,
                        write,
                        replicated: false,
                    });
                }
                continue;
            }
        };
        let Some(state) = logs.partition(OFFSETS_TOPIC, partition) else {
            if let Some(done) = write.done {
                let _ = done.send(codes::NOT_COORDINATOR);
            }
            continue;
        };
        let epoch = write.epoch;
        let done = write.done;
        let offsets_write = write.offsets_write;
        let coordinator = coordinator.clone();
        actix::spawn(async move {
            // The high watermark passed the write (NOT_ENOUGH_REPLICAS_AFTER_APPEND says so
            // too, with an ISR below min.insync.replicas); a lost leadership reloads the
            // partition. Told before the client hears of it, so its next OffsetFetch, queued
            // behind, reads the commit.
            let replicated = |waited: &Result<(), i16>| {
                if let (Some(write), Ok(()) | Err(NOT_ENOUGH_REPLICAS_AFTER_APPEND)) =
                    (offsets_write, waited)
                {
                    coordinator.do_send(OffsetsWritten {
                        partition,
                        write,
                        replicated: true,
                    });
                }
            };
            let deadline = tokio::time::Instant::now() + commit_timeout;
            let waited = crate::replication::await_replication(&state, epoch, end, deadline).await;
            replicated(&waited);
            if let Some(done) = done {
                let _ = done.send(waited.map_or_else(append_error_code, |()| codes::NONE));
            }
            // Answered as timed out, but in the log: it counts once it is replicated, as
            // Kafka's coordinator makes a write visible when the high watermark passes it.
            if offsets_write.is_some() && waited == Err(codes::REQUEST_TIMED_OUT) {
                let deadline = tokio::time::Instant::now() + LATE_REPLICATION_WAIT;
                replicated(
                    &crate::replication::await_replication(&state, epoch, end, deadline).await,
                );
            }
        });
    }
}

/// Kafka's group coordinator's answer for a failed `__consumer_offsets` write
/// (`GroupCoordinatorService`'s mapping of an append error): a lost or missing partition sends
/// the client to the (new) coordinator, a batch the log refuses as too large is the server's
/// error, and any other is answered as it is.
fn append_error_code(code: i16) -> i16 {
    const INVALID_FETCH_SIZE: i16 = 4;
    const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    const MESSAGE_TOO_LARGE: i16 = 10;
    const RECORD_LIST_TOO_LARGE: i16 = 18;
    const NOT_ENOUGH_REPLICAS: i16 = 19;
    const KAFKA_STORAGE_ERROR: i16 = 56;
    match code {
        UNKNOWN_TOPIC_OR_PARTITION
        | NOT_ENOUGH_REPLICAS
        | NOT_ENOUGH_REPLICAS_AFTER_APPEND
        | codes::REQUEST_TIMED_OUT => codes::COORDINATOR_NOT_AVAILABLE,
        NOT_LEADER_OR_FOLLOWER | KAFKA_STORAGE_ERROR => codes::NOT_COORDINATOR,
        MESSAGE_TOO_LARGE | RECORD_LIST_TOO_LARGE | INVALID_FETCH_SIZE => {
            codes::UNKNOWN_SERVER_ERROR
        }
        other => other,
    }
}

impl GroupCoordinator {
    pub fn new(settings: GroupSettings, logs: Option<Arc<LogManager>>) -> Self {
        GroupCoordinator {
            state: Coordinator::new(settings),
            logs,
            led: HashMap::new(),
            writers: HashMap::new(),
        }
    }

    fn run_effects(&mut self, ctx: &mut Context<Self>) {
        for effect in self.state.take_effects() {
            match effect {
                Effect::Timer { at, timer } => {
                    let wait = at.saturating_duration_since(Instant::now());
                    ctx.run_later(wait, move |act, ctx| {
                        act.state.fire(timer, Instant::now(), now_ms());
                        act.run_effects(ctx);
                    });
                }
                Effect::Write(write) => self.spawn_write(write, ctx.address()),
            }
        }
    }

    fn spawn_write(&mut self, write: Write, me: Addr<Self>) {
        let Write {
            partition,
            records,
            done,
            offsets_write,
        } = write;
        let answer = |done: Option<oneshot::Sender<i16>>, code| {
            if let Some(done) = done {
                let _ = done.send(code);
            }
        };
        let (Some(logs), Some(epoch)) = (self.logs.clone(), self.led.get(&partition).copied())
        else {
            answer(done, codes::NOT_COORDINATOR);
            if let Some(write) = offsets_write {
                self.state.offsets_written(partition, write, false);
            }
            return;
        };
        let mut builder = BatchBuilder::new(Compression::None);
        let timestamp = now_ms();
        for (key, value) in &records {
            builder.append(timestamp, Some(key), value.as_deref(), &[]);
        }
        let batch = match builder.build() {
            Ok(batch) => Bytes::from(batch),
            Err(error) => {
                tracing::error!(%error, "cannot encode a __consumer_offsets batch");
                answer(done, codes::COORDINATOR_NOT_AVAILABLE);
                if let Some(write) = offsets_write {
                    self.state.offsets_written(partition, write, false);
                }
                return;
            }
        };
        let commit_timeout = self.state.settings().offsets_commit_timeout;
        let writer = self.writers.entry(partition).or_insert_with(|| {
            let (sender, queue) = tokio::sync::mpsc::unbounded_channel();
            actix::spawn(partition_writer(logs, partition, commit_timeout, me, queue));
            sender
        });
        if let Err(failed) = writer.send(PreparedWrite {
            batch,
            epoch,
            done,
            offsets_write,
        }) {
            self.writers.remove(&partition);
            answer(failed.0.done, codes::COORDINATOR_NOT_AVAILABLE);
            if let Some(write) = offsets_write {
                self.state.offsets_written(partition, write, false);
            }
        }
    }

    fn spawn_load(&self, partition: i32, epoch: i32, ctx: &mut Context<Self>) {
        let Some(logs) = self.logs.clone() else {
            return;
        };
        let me = ctx.address();
        actix::spawn(async move {
            let started = Instant::now();
            let result = read_partition(&logs, partition, epoch).await;
            if let Ok(records) = &result {
                tracing::debug!(
                    partition,
                    records = records.len(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "read __consumer_offsets partition"
                );
            }
            me.do_send(Loaded {
                partition,
                epoch,
                result,
            });
        });
    }
}

/// Every coordinator record of one partition, in log order, up to the log end offset the
/// new leader has when its log is open. A leader elected with records its followers have not
/// yet fetched holds acknowledged writes above its high watermark (Kafka's loader reads to
/// the log end for this reason); they are read once the high watermark reaches them, so a
/// load never ends short of them nor serves a record that is not committed.
async fn read_partition(
    logs: &LogManager,
    partition: i32,
    epoch: i32,
) -> Result<Vec<CoordinatorRecord>, String> {
    let mut out = Vec::new();
    let mut offset = 0i64;
    let mut target = None;
    loop {
        let read = match logs
            .read_when_open(OFFSETS_TOPIC, partition, offset, LOAD_READ_BYTES)
            .await
        {
            Ok(read) => read,
            // Offset 0 is below a log start that retention or DeleteRecords moved.
            Err(error) if error.code() == 1 && offset == 0 => {
                match logs.partition(OFFSETS_TOPIC, partition) {
                    Some(state) if state.log_start_offset() > 0 => {
                        offset = state.log_start_offset();
                        continue;
                    }
                    _ => return Err(error.to_string()),
                }
            }
            Err(error) => return Err(error.to_string()),
        };
        let state = logs
            .partition(OFFSETS_TOPIC, partition)
            .ok_or_else(|| format!("{OFFSETS_TOPIC}-{partition} is no longer hosted"))?;
        // The log is open once a read answers: its end now is what the load must reach.
        let target = *target.get_or_insert_with(|| state.log_end_offset());
        let mut progressed = false;
        for batch in batches(&read.records) {
            let batch = batch.map_err(|e| format!("corrupt batch at offset {offset}: {e}"))?;
            offset = batch.next_offset();
            progressed = true;
            if batch.is_control() {
                continue;
            }
            let owned = batch.owned_records()?;
            for record in owned {
                let Some(key) = record.key else {
                    continue;
                };
                match records::decode(&key, record.value.as_deref()) {
                    Ok(decoded) => out.push(decoded),
                    Err(error) => tracing::warn!(
                        partition,
                        offset = record.offset,
                        %error,
                        "skipping an undecodable __consumer_offsets record"
                    ),
                }
            }
        }
        if offset >= target {
            return Ok(out);
        }
        if progressed && offset < read.high_watermark {
            continue;
        }
        // At the high watermark, short of the target: wait for it to move (every move wakes
        // `appended`), while this node still leads the partition at the load's epoch.
        let moved = state.appended.notified();
        tokio::pin!(moved);
        moved.as_mut().enable();
        if state.replication().moved_past_leading(epoch) {
            return Err(format!(
                "{OFFSETS_TOPIC}-{partition} changed leader while it was loading"
            ));
        }
        if state.high_watermark() <= offset {
            // Bounded, so a lost wake-up or a leadership change is seen again.
            let _ = tokio::time::timeout(LOAD_WAIT_RECHECK, moved).await;
        }
    }
}

impl Actor for GroupCoordinator {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        let interval = self.state.settings().offsets_retention_check_interval;
        ctx.run_interval(interval, |act, ctx| {
            let expired = act.state.expire_offsets(now_ms());
            if expired > 0 {
                tracing::info!(expired, "expired committed offsets");
            }
            act.run_effects(ctx);
        });
    }
}

/// Which `__consumer_offsets` partitions this node leads (partition → leader epoch), and how
/// many the topic has; from [`super::GroupPublisher`].
#[derive(Message)]
#[rtype(result = "()")]
pub struct Leadership {
    pub led: HashMap<i32, i32>,
    pub partitions: i32,
}

/// Topics deleted from the metadata; from [`super::GroupPublisher`].
#[derive(Message)]
#[rtype(result = "()")]
pub struct TopicsDeleted {
    pub topics: Vec<String>,
}

impl Handler<TopicsDeleted> for GroupCoordinator {
    type Result = ();

    fn handle(&mut self, msg: TopicsDeleted, ctx: &mut Context<Self>) {
        let deleted = self.state.delete_offsets_of_topics(&msg.topics);
        if deleted > 0 {
            tracing::info!(
                topics = ?msg.topics,
                offsets = deleted,
                "committed offsets of deleted topics removed"
            );
        }
        self.run_effects(ctx);
    }
}

impl Handler<Leadership> for GroupCoordinator {
    type Result = ();

    fn handle(&mut self, msg: Leadership, ctx: &mut Context<Self>) {
        self.state.set_partition_count(msg.partitions);
        let changed_epochs: Vec<i32> = msg
            .led
            .iter()
            .filter(|(p, e)| self.led.get(p).is_some_and(|old| old != *e))
            .map(|(p, _)| *p)
            .collect();
        // A new leader epoch means leadership moved away and back: reload.
        for partition in changed_epochs {
            self.state.unload(partition);
        }
        self.led = msg.led;
        // A writer of a partition no longer led ends once its queue is drained.
        self.writers.retain(|p, _| self.led.contains_key(p));
        let all: HashSet<i32> = self.led.keys().copied().collect();
        for partition in self.state.lead(&all) {
            let epoch = self.led.get(&partition).copied().unwrap_or(-1);
            tracing::debug!(partition, epoch, "loading __consumer_offsets partition");
            self.spawn_load(partition, epoch, ctx);
        }
        self.run_effects(ctx);
    }
}

/// A partition's records, read by a load task.
#[derive(Message)]
#[rtype(result = "()")]
struct Loaded {
    partition: i32,
    epoch: i32,
    result: Result<Vec<CoordinatorRecord>, String>,
}

impl Handler<Loaded> for GroupCoordinator {
    type Result = ();

    fn handle(&mut self, msg: Loaded, ctx: &mut Context<Self>) {
        if self.led.get(&msg.partition) != Some(&msg.epoch) {
            return;
        }
        match msg.result {
            Ok(records) => {
                self.state
                    .loaded(msg.partition, records, Instant::now(), now_ms());
                self.run_effects(ctx);
            }
            Err(error) => {
                // The partition stays loading (COORDINATOR_LOAD_IN_PROGRESS, retriable) until
                // leadership changes; a log that cannot be read is a storage fault.
                tracing::error!(partition = msg.partition, %error, "cannot load __consumer_offsets partition");
            }
        }
    }
}

/// JoinGroup, with the image the handler read (a classic member of a consumer group
/// subscribes by topic name); the answer comes through the receiver.
#[derive(Message)]
#[rtype(result = "oneshot::Receiver<JoinResult>")]
pub struct JoinGroup(pub JoinRequest, pub Arc<MetadataImage>);

impl Handler<JoinGroup> for GroupCoordinator {
    type Result = MessageResult<JoinGroup>;

    fn handle(&mut self, msg: JoinGroup, ctx: &mut Context<Self>) -> Self::Result {
        self.state.set_topics(Arc::new(OwnedImageTopics(msg.1)));
        let receiver = self.state.join(msg.0, Instant::now(), now_ms());
        self.run_effects(ctx);
        MessageResult(receiver)
    }
}

/// SyncGroup, with the image the handler read (a classic member of a consumer group gets its
/// partitions by topic name); the answer comes through the receiver.
#[derive(Message)]
#[rtype(result = "oneshot::Receiver<SyncResult>")]
pub struct SyncGroup(pub SyncRequest, pub Arc<MetadataImage>);

impl Handler<SyncGroup> for GroupCoordinator {
    type Result = MessageResult<SyncGroup>;

    fn handle(&mut self, msg: SyncGroup, ctx: &mut Context<Self>) -> Self::Result {
        self.state.set_topics(Arc::new(OwnedImageTopics(msg.1)));
        let receiver = self.state.sync(msg.0, Instant::now(), now_ms());
        self.run_effects(ctx);
        MessageResult(receiver)
    }
}

/// Heartbeat → its error code.
#[derive(Message)]
#[rtype(result = "i16")]
pub struct Heartbeat {
    pub group_id: String,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub generation: i32,
}

impl Handler<Heartbeat> for GroupCoordinator {
    type Result = i16;

    fn handle(&mut self, msg: Heartbeat, ctx: &mut Context<Self>) -> i16 {
        let code = self.state.heartbeat(
            &msg.group_id,
            &msg.member_id,
            msg.group_instance_id.as_deref(),
            msg.generation,
            Instant::now(),
        );
        self.run_effects(ctx);
        code
    }
}

/// LeaveGroup → (top-level code, one code per member).
#[derive(Message)]
#[rtype(result = "(i16, Vec<i16>)")]
pub struct LeaveGroup {
    pub group_id: String,
    pub members: Vec<Leaving>,
}

impl Handler<LeaveGroup> for GroupCoordinator {
    type Result = MessageResult<LeaveGroup>;

    fn handle(&mut self, msg: LeaveGroup, ctx: &mut Context<Self>) -> Self::Result {
        let result = self
            .state
            .leave(&msg.group_id, &msg.members, Instant::now(), now_ms());
        self.run_effects(ctx);
        MessageResult(result)
    }
}

/// OffsetCommit → one code per partition, and a receiver told when the records are written.
#[derive(Message)]
#[rtype(result = "(Vec<i16>, oneshot::Receiver<i16>)")]
pub struct CommitOffsets(pub CommitRequest);

impl Handler<CommitOffsets> for GroupCoordinator {
    type Result = MessageResult<CommitOffsets>;

    fn handle(&mut self, msg: CommitOffsets, ctx: &mut Context<Self>) -> Self::Result {
        let (done, written) = oneshot::channel();
        let codes = self.state.commit(msg.0, done, Instant::now(), now_ms());
        self.run_effects(ctx);
        MessageResult((codes, written))
    }
}

/// One group's part of an OffsetFetch.
pub struct OffsetsQuery {
    pub group_id: String,
    /// The KIP-848 member and epoch of an OffsetFetch v9+ that names one.
    pub member: Option<(String, i32)>,
    /// `None`: every committed partition.
    pub partitions: Option<Vec<(String, i32)>>,
}

/// One group's committed offsets, or the group's error.
pub type FetchedOffsets = Result<Vec<(String, i32, Option<Committed>)>, i16>;

/// OffsetFetch of a request's groups → one answer per query, in their order.
#[derive(Message)]
#[rtype(result = "Vec<FetchedOffsets>")]
pub struct FetchOffsets(pub Vec<OffsetsQuery>);

impl Handler<FetchOffsets> for GroupCoordinator {
    type Result = MessageResult<FetchOffsets>;

    fn handle(&mut self, msg: FetchOffsets, _: &mut Context<Self>) -> Self::Result {
        let fetched = msg
            .0
            .iter()
            .map(|query| {
                let member = query
                    .member
                    .as_ref()
                    .map(|(id, epoch)| (id.as_str(), *epoch));
                self.state
                    .fetch_offsets(&query.group_id, member, query.partitions.as_deref())
            })
            .collect();
        MessageResult(fetched)
    }
}

/// ListGroups (state and type filters); COORDINATOR_LOAD_IN_PROGRESS while a partition loads.
#[derive(Message)]
#[rtype(result = "Result<Vec<GroupListing>, i16>")]
pub struct ListGroups {
    pub states: Vec<String>,
    pub types: Vec<String>,
}

impl Handler<ListGroups> for GroupCoordinator {
    type Result = MessageResult<ListGroups>;

    fn handle(&mut self, msg: ListGroups, _: &mut Context<Self>) -> Self::Result {
        if self.state.is_loading() {
            return MessageResult(Err(codes::COORDINATOR_LOAD_IN_PROGRESS));
        }
        MessageResult(Ok(self.state.list(&msg.states, &msg.types)))
    }
}

/// The topics of a metadata image, as the consumer protocol resolves subscriptions.
struct ImageTopics<'a>(&'a MetadataImage);

/// Kafka's internal topics, which a regex subscription never matches.
const INTERNAL_TOPICS: [&str; 3] = [OFFSETS_TOPIC, "__transaction_state", "__share_group_state"];

impl TopicLookup for ImageTopics<'_> {
    fn by_name(&self, name: &str) -> Option<(uuid::Uuid, i32)> {
        self.0
            .topics
            .get_by_name(name)
            .map(|t| (t.id, t.partition_count() as i32))
    }
    fn name_of(&self, id: &uuid::Uuid) -> Option<String> {
        self.0.topics.get_by_id(id).map(|t| t.name.to_string())
    }
    fn names(&self) -> Vec<String> {
        self.0
            .topics
            .names()
            .filter(|n| !INTERNAL_TOPICS.contains(n))
            .map(str::to_owned)
            .collect()
    }
}

/// The topics of the last image a request came with, kept by the coordinator for the classic
/// members of consumer groups and for its timers.
struct OwnedImageTopics(Arc<MetadataImage>);

impl TopicLookup for OwnedImageTopics {
    fn by_name(&self, name: &str) -> Option<(uuid::Uuid, i32)> {
        ImageTopics(&self.0).by_name(name)
    }
    fn names(&self) -> Vec<String> {
        ImageTopics(&self.0).names()
    }
    fn name_of(&self, id: &uuid::Uuid) -> Option<String> {
        ImageTopics(&self.0).name_of(id)
    }
}

/// ConsumerGroupHeartbeat (KIP-848), resolved against the image the handler read.
#[derive(Message)]
#[rtype(result = "ConsumerHeartbeatResult")]
pub struct ConsumerGroupHeartbeat {
    pub request: ConsumerHeartbeat,
    pub timeouts: ConsumerConfigs,
    pub image: Arc<MetadataImage>,
}

impl Handler<ConsumerGroupHeartbeat> for GroupCoordinator {
    type Result = MessageResult<ConsumerGroupHeartbeat>;

    fn handle(&mut self, mut msg: ConsumerGroupHeartbeat, ctx: &mut Context<Self>) -> Self::Result {
        let partitions = self.state.settings().offsets_topic_partitions;
        let partition = super::partition_for(&msg.request.group_id, partitions);
        if let Some(log) = self
            .logs
            .as_ref()
            .and_then(|logs| logs.partition(OFFSETS_TOPIC, partition))
        {
            msg.timeouts.max_write_bytes =
                usize::try_from(log.max_message_bytes()).unwrap_or(usize::MAX);
        }
        self.state
            .set_topics(Arc::new(OwnedImageTopics(msg.image.clone())));
        let result = self.state.consumer_heartbeat(
            msg.request,
            msg.timeouts,
            &ImageTopics(&msg.image),
            Instant::now(),
            now_ms(),
        );
        self.run_effects(ctx);
        MessageResult(result)
    }
}

/// ConsumerGroupDescribe of a request's groups, answered in their order.
#[derive(Message)]
#[rtype(result = "Vec<ConsumerGroupDescription>")]
pub struct ConsumerGroupDescribe(pub Vec<String>);

impl Handler<ConsumerGroupDescribe> for GroupCoordinator {
    type Result = MessageResult<ConsumerGroupDescribe>;

    fn handle(&mut self, msg: ConsumerGroupDescribe, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            msg.0
                .iter()
                .map(|group_id| self.state.consumer_describe(group_id))
                .collect(),
        )
    }
}

/// DescribeGroups of a request's groups, answered in their order.
#[derive(Message)]
#[rtype(result = "Vec<GroupDescription>")]
pub struct DescribeGroups {
    pub group_ids: Vec<String>,
    /// The code for a group that does not exist (NONE before v6, GROUP_ID_NOT_FOUND from v6).
    pub unknown_code: i16,
}

impl Handler<DescribeGroups> for GroupCoordinator {
    type Result = MessageResult<DescribeGroups>;

    fn handle(&mut self, msg: DescribeGroups, _: &mut Context<Self>) -> Self::Result {
        MessageResult(
            msg.group_ids
                .iter()
                .map(|group_id| self.state.describe(group_id, msg.unknown_code))
                .collect(),
        )
    }
}

/// DeleteGroups of a request's groups → one code each, in their order. They are deleted one
/// after the other, so a group named twice is GROUP_ID_NOT_FOUND the second time.
#[derive(Message)]
#[rtype(result = "Vec<i16>")]
pub struct DeleteGroups(pub Vec<String>);

impl Handler<DeleteGroups> for GroupCoordinator {
    type Result = MessageResult<DeleteGroups>;

    fn handle(&mut self, msg: DeleteGroups, ctx: &mut Context<Self>) -> Self::Result {
        let codes = msg
            .0
            .iter()
            .map(|group_id| self.state.delete_group(group_id))
            .collect();
        // The tombstones of every deleted group, written in the order they were decided.
        self.run_effects(ctx);
        MessageResult(codes)
    }
}

/// OffsetDelete → the group's error or one code per partition.
#[derive(Message)]
#[rtype(result = "Result<Vec<i16>, i16>")]
pub struct DeleteOffsets {
    pub group_id: String,
    pub partitions: Vec<(String, i32)>,
}

impl Handler<DeleteOffsets> for GroupCoordinator {
    type Result = MessageResult<DeleteOffsets>;

    fn handle(&mut self, msg: DeleteOffsets, ctx: &mut Context<Self>) -> Self::Result {
        let result = self.state.delete_offsets(&msg.group_id, &msg.partitions);
        self.run_effects(ctx);
        MessageResult(result)
    }
}

/// Runs the offset expiry now → how many offsets expired.
#[derive(Message)]
#[rtype(result = "usize")]
pub struct ExpireOffsets;

impl Handler<ExpireOffsets> for GroupCoordinator {
    type Result = usize;

    fn handle(&mut self, _: ExpireOffsets, ctx: &mut Context<Self>) -> usize {
        let expired = self.state.expire_offsets(now_ms());
        self.run_effects(ctx);
        expired
    }
}

fn now_ms() -> i64 {
    crate::log_manager::now_ms()
}

/// What handlers use to reach the coordinator.
#[derive(Clone)]
pub struct Groups {
    pub coordinator: Addr<GroupCoordinator>,
    pub settings: GroupSettings,
}

impl std::fmt::Debug for Groups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Groups")
            .field("settings", &self.settings)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::groups::records::{GroupValue, OffsetKey, OffsetValue};

    /// A coordinator leading the only partition, loaded with an empty classic group "g" that
    /// committed offset 5 of t-0.
    async fn coordinator() -> Addr<GroupCoordinator> {
        let settings = GroupSettings {
            offsets_topic_partitions: 1,
            ..GroupSettings::default()
        };
        let coordinator = GroupCoordinator::new(settings, None).start();
        let led = HashMap::from([(0, 0)]);
        let leadership = Leadership { led, partitions: 1 };
        coordinator.send(leadership).await.unwrap();
        let offset = OffsetValue {
            offset: 5,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
            expire_timestamp: None,
        };
        let group = GroupValue {
            protocol_type: "consumer".into(),
            generation: 1,
            protocol: None,
            leader: None,
            current_state_timestamp: 0,
            members: Vec::new(),
        };
        let key = OffsetKey {
            group: "g".into(),
            topic: "t".into(),
            partition: 0,
        };
        let records = vec![
            CoordinatorRecord::Offset(key, Some(offset)),
            CoordinatorRecord::Group("g".into(), Some(group)),
        ];
        let loaded = Loaded {
            partition: 0,
            epoch: 0,
            result: Ok(records),
        };
        coordinator.send(loaded).await.unwrap();
        coordinator
    }

    #[actix_rt::test]
    async fn batches_answer_each_group_in_order() {
        let coordinator = coordinator().await;
        let ids = |ids: &[&str]| ids.iter().map(|id| id.to_string()).collect::<Vec<_>>();

        let described = coordinator
            .send(DescribeGroups {
                group_ids: ids(&["x", "g"]),
                unknown_code: codes::GROUP_ID_NOT_FOUND,
            })
            .await
            .unwrap();
        let described: Vec<_> = described.iter().map(|d| (d.error, d.state)).collect();
        assert_eq!(
            described,
            vec![(codes::GROUP_ID_NOT_FOUND, "Dead"), (codes::NONE, "Empty")]
        );

        let described = coordinator
            .send(ConsumerGroupDescribe(ids(&["g", "x"])))
            .await
            .unwrap();
        let messages: Vec<_> = described.into_iter().map(|d| d.message).collect();
        assert_eq!(
            messages,
            vec![
                Some("Group g is not a consumer group.".to_owned()),
                Some("Group x not found.".to_owned()),
            ]
        );

        let query = |group_id: &str, partitions: Option<Vec<(String, i32)>>| OffsetsQuery {
            group_id: group_id.to_owned(),
            member: None,
            partitions,
        };
        let fetched = coordinator
            .send(FetchOffsets(vec![
                query("x", Some(vec![("t".into(), 0)])),
                query("g", None),
            ]))
            .await
            .unwrap();
        let fetched: Vec<_> = fetched
            .into_iter()
            .map(|f| {
                f.unwrap()
                    .into_iter()
                    .map(|(t, p, c)| (t, p, c.map(|c| c.offset)))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(
            fetched,
            vec![
                vec![("t".to_owned(), 0, None)],
                vec![("t".to_owned(), 0, Some(5))]
            ]
        );

        // One after the other: the second "g" finds it deleted by the first.
        let deleted = coordinator
            .send(DeleteGroups(ids(&["g", "x", "g"])))
            .await
            .unwrap();
        assert_eq!(
            deleted,
            vec![
                codes::NONE,
                codes::GROUP_ID_NOT_FOUND,
                codes::GROUP_ID_NOT_FOUND
            ]
        );
    }

    /// Kafka's `GroupCoordinatorService` mapping of a failed append, code for code.
    #[test]
    fn a_failed_append_is_answered_as_kafka_answers_it() {
        let mapped: Vec<(i16, i16)> = [3, 19, 20, 7, 6, 56, 10, 18, 4, 44]
            .iter()
            .map(|code| (*code, append_error_code(*code)))
            .collect();
        assert_eq!(
            mapped,
            vec![
                (3, codes::COORDINATOR_NOT_AVAILABLE),
                (19, codes::COORDINATOR_NOT_AVAILABLE),
                (20, codes::COORDINATOR_NOT_AVAILABLE),
                (7, codes::COORDINATOR_NOT_AVAILABLE),
                (6, codes::NOT_COORDINATOR),
                (56, codes::NOT_COORDINATOR),
                (10, codes::UNKNOWN_SERVER_ERROR),
                (18, codes::UNKNOWN_SERVER_ERROR),
                (4, codes::UNKNOWN_SERVER_ERROR),
                (44, 44),
            ]
        );
    }
}
