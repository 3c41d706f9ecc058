//! Metadata (key 3): brokers, cluster id, controller id and topics, from one image snapshot.

use std::collections::HashSet;
use std::sync::Arc;

use bytes::{BufMut, BytesMut};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, CreateTopicsRequest, MetadataRequest, MetadataResponse, ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use gregor_publishers::acl::{AclOperation, ResourceType};
use gregor_publishers::image::TopicImage;
use gregor_publishers::MetadataImage;

use super::{ApiResponse, EncodedList, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{Caller, Forwarded, HandlerContext, RequestInfo};
use crate::controller::logic::topic_name;
use crate::controller::CreateTopics;
use crate::wire::put_uvarint;

/// `authorized_operations` when the client did not ask for them.
const OPERATIONS_NOT_REQUESTED: i32 = i32::MIN;

/// Without an authorizer every principal may do everything a topic supports: READ(3), WRITE(4),
/// CREATE(5), DELETE(6), ALTER(7), DESCRIBE(8), DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11).
pub(super) const ALL_TOPIC_OPERATIONS: i32 =
    1 << 3 | 1 << 4 | 1 << 5 | 1 << 6 | 1 << 7 | 1 << 8 | 1 << 10 | 1 << 11;

/// ... and everything the cluster supports: CREATE(5), ALTER(7), DESCRIBE(8), CLUSTER_ACTION(9),
/// DESCRIBE_CONFIGS(10), ALTER_CONFIGS(11), IDEMPOTENT_WRITE(12), CREATE_TOKENS(13),
/// DESCRIBE_TOKENS(14).
pub(super) const ALL_CLUSTER_OPERATIONS: i32 =
    1 << 5 | 1 << 7 | 1 << 8 | 1 << 9 | 1 << 10 | 1 << 11 | 1 << 12 | 1 << 13 | 1 << 14;

pub(super) async fn handle(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: MetadataRequest,
) -> ApiResponse {
    let version = info.api_version;
    let mut image = ctx.image.load_full();
    let all_topics = match &request.topics {
        None => true,
        Some(topics) => version == 0 && topics.is_empty(),
    };
    // Moved, not cloned: the list may be as long as the frame allows (the front end has
    // already dropped duplicate topics while decoding, as Kafka answers a set).
    let requested = request.topics.unwrap_or_default();
    // Before v4 there is no flag and every Metadata request may create topics.
    let may_auto_create = ctx.settings.auto_create_topics_enable
        && (version < 4 || request.allow_auto_topic_creation);

    let access = Access::new(ctx, info);
    let plan = if all_topics {
        CreationPlan::default()
    } else {
        creation_plan(&access, &image, &requested, version, may_auto_create)
    };
    let CreationPlan {
        undescribable,
        create_denied,
        missing,
    } = plan;
    let mut created = HashSet::new();
    if !missing.is_empty() {
        // A request decided in chunks had its one creation sent before its chunks.
        if !ctx.topic_creation_sent {
            auto_create(ctx, info, &missing).await;
            image = ctx.image.load_full();
        }
        created = missing.into_iter().collect();
    }

    let include_operations = request.include_topic_authorized_operations;
    let topic_operations = |name: &str| match (include_operations, access.is_enforced()) {
        (false, _) => OPERATIONS_NOT_REQUESTED,
        (true, false) => ALL_TOPIC_OPERATIONS,
        (true, true) => access.authorized_operations(ResourceType::Topic, name),
    };
    let mut errors = ErrorCounts::default();
    let brokers = BrokerTable::new(&image, &info.listener_name);
    let mut encoded_topics = None;
    let topics: Vec<MetadataResponseTopic> = if all_topics {
        encoded_topics = Some(encode_all_topics(
            &image,
            &brokers,
            version,
            |name| access.quietly_allows(AclOperation::Describe, ResourceType::Topic, name),
            topic_operations,
            &mut errors,
        ));
        Vec::new()
    } else {
        requested
            .iter()
            .map(|wanted| {
                let by_name = wanted.name.as_ref().map(|n| n.as_str());
                match (by_name, wanted.topic_id) {
                    (Some(name), _)
                        if undescribable.contains(name) || create_denied.contains(name) =>
                    {
                        error_topic(
                            Some(name),
                            Uuid::nil(),
                            ResponseError::TopicAuthorizationFailed,
                        )
                    }
                    (Some(name), _) if created.contains(name) => {
                        // Kafka answers a topic it has just asked the controller to create with
                        // LEADER_NOT_AVAILABLE; the client retries and finds it.
                        error_topic(Some(name), Uuid::nil(), ResponseError::LeaderNotAvailable)
                            .with_topic_authorized_operations(topic_operations(name))
                    }
                    (Some(name), _) => match image.topics.get_by_name(name) {
                        Some(topic) => describe_topic(&brokers, topic, topic_operations(name)),
                        // Kafka names an invalid topic as such whether or not it would auto-create.
                        None if topic_name::validate(name).is_err() => error_topic(
                            Some(name),
                            Uuid::nil(),
                            ResponseError::InvalidTopicException,
                        ),
                        None => error_topic(
                            Some(name),
                            Uuid::nil(),
                            ResponseError::UnknownTopicOrPartition,
                        ),
                    },
                    (None, _) if version < 12 => {
                        // Topic ids in Metadata requests arrived in v12.
                        error_topic(None, Uuid::nil(), ResponseError::InvalidRequest)
                    }
                    (None, id) => match image.topics.get_by_id(&id) {
                        // Ids are not secret: the id comes back, the name does not.
                        Some(topic) if !id.is_nil() && undescribable.contains(&*topic.name) => {
                            error_topic(None, id, ResponseError::TopicAuthorizationFailed)
                        }
                        Some(topic) if !id.is_nil() => {
                            describe_topic(&brokers, topic, topic_operations(&topic.name))
                        }
                        _ => error_topic(None, id, ResponseError::UnknownTopicId),
                    },
                }
            })
            .collect()
    };
    for topic in &topics {
        errors.add_all(topic.partitions.iter().map(|p| p.error_code));
        errors.add(topic.error_code);
    }

    let mut response = MetadataResponse::default()
        .with_brokers(response_brokers(&image, &info.listener_name))
        .with_cluster_id(Some(StrBytes::from_string(ctx.node.cluster_id.clone())))
        .with_controller_id(BrokerId(client_facing_controller_id(
            &image,
            ctx.node.node_id,
        )))
        .with_topics(topics);
    if request.include_cluster_authorized_operations && (8..=10).contains(&version) {
        response = response.with_cluster_authorized_operations(cluster_operations(&access));
    }
    let mut answer = ApiResponse::new(ResponseKind::Metadata(response), errors);
    answer.encoded_list = encoded_topics;
    answer
}

/// KIP-430's cluster operations: every supported one without an authorizer, none without
/// DESCRIBE on the cluster, else those allowed.
pub(super) fn cluster_operations(access: &Access<'_>) -> i32 {
    if !access.is_enforced() {
        ALL_CLUSTER_OPERATIONS
    } else if !access.quietly_allows(
        AclOperation::Describe,
        ResourceType::Cluster,
        gregor_publishers::acl::CLUSTER_NAME,
    ) {
        0
    } else {
        access.authorized_operations(ResourceType::Cluster, gregor_publishers::acl::CLUSTER_NAME)
    }
}

/// The id clients should send admin requests to. As in Kafka's KRaft brokers this is a live
/// broker, not the raft leader: brokers accept CreateTopics and friends and hand them to the
/// controller. This node is preferred when it is a live broker, so a client keeps its connection.
pub(super) fn client_facing_controller_id(image: &MetadataImage, own_id: i32) -> i32 {
    if image.cluster.broker(own_id).is_some_and(|b| !b.fenced) {
        return own_id;
    }
    image
        .cluster
        .brokers()
        .find(|b| !b.fenced)
        .map_or(-1, |b| b.id)
}

/// Kafka's internal topics: the group, transaction and share-group state topics.
pub(super) fn is_internal(name: &str) -> bool {
    matches!(
        name,
        "__consumer_offsets" | "__transaction_state" | "__share_group_state"
    )
}

fn error_topic(name: Option<&str>, id: Uuid, error: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(error.code())
        .with_name(name.map(|n| TopicName(StrBytes::from_string(n.to_owned()))))
        .with_topic_id(id)
        .with_is_internal(name.is_some_and(is_internal))
}

/// The live brokers with an endpoint on `listener_name`, as a Metadata response lists them.
pub fn response_brokers(image: &MetadataImage, listener_name: &str) -> Vec<MetadataResponseBroker> {
    image
        .cluster
        .brokers()
        .filter(|broker| !broker.fenced)
        .filter_map(|broker| {
            let endpoint = broker.endpoint(listener_name)?;
            Some(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(broker.id))
                    .with_host(StrBytes::from_string(endpoint.host.clone()))
                    .with_port(i32::from(endpoint.port))
                    .with_rack(broker.rack.clone().map(StrBytes::from_string)),
            )
        })
        .collect()
}

/// Every topic of an all-topics Metadata request that `visible` lets through, in name order,
/// each with `operations(name)` as its authorized operations, encoded at `version` straight
/// from the image as the response's `topics` array (without its length), their error codes
/// counted into `errors`. The `metadata_request` bench times this (Kafka's
/// `KRaftMetadataRequestBenchmark`).
///
/// Written by hand rather than through `kafka-protocol`'s structs: a response listing every
/// partition built two vectors per partition and a string per topic only to encode and drop
/// them, about 40% of an all-topics request; the bytes are the crate's to the byte
/// (`all_topics_encode_as_the_crate_does_at_every_version`).
pub fn encode_all_topics(
    image: &MetadataImage,
    brokers: &BrokerTable,
    version: i16,
    mut visible: impl FnMut(&str) -> bool,
    mut operations: impl FnMut(&str) -> i32,
    errors: &mut ErrorCounts,
) -> EncodedList {
    let flexible = version >= 9;
    // Sized for replication factor 3 and 24-byte names; a larger answer grows the buffer.
    let per_partition = 2 + 4 + 4 + 4 + 3 * 4 + 1 + 2 * 3 * 4;
    let per_topic = 2 + 2 + 24 + 16 + 1 + 4 + 4 + 1;
    let mut out = BytesMut::with_capacity(
        image.topics.partition_count() * per_partition + image.topics.topic_count() * per_topic,
    );
    let mut count = 0;
    let mut unavailable = 0;
    let mut available = 0;
    for topic in image.topics.iter() {
        if !visible(&topic.name) {
            continue;
        }
        count += 1;
        out.put_i16(0);
        put_length(&mut out, topic.name.len(), flexible, true);
        out.put_slice(topic.name.as_bytes());
        if version >= 10 {
            out.put_slice(topic.id.as_bytes());
        }
        if version >= 1 {
            out.put_u8(u8::from(is_internal(&topic.name)));
        }
        put_length(&mut out, topic.partition_count(), flexible, false);
        for (index, partition) in topic.partitions() {
            if brokers.is_reachable(partition.leader) {
                available += 1;
                out.put_i16(0);
            } else {
                unavailable += 1;
                out.put_i16(ResponseError::LeaderNotAvailable.code());
            }
            out.put_i32(index);
            out.put_i32(partition.leader);
            if version >= 7 {
                out.put_i32(partition.leader_epoch);
            }
            let replicas = partition.replicas.as_slice();
            put_ids(&mut out, replicas.iter().copied(), replicas.len(), flexible);
            let isr = partition.isr.as_slice();
            put_ids(&mut out, isr.iter().copied(), isr.len(), flexible);
            if version >= 5 {
                let offline = || {
                    replicas
                        .iter()
                        .copied()
                        .filter(|id| brokers.is_offline(*id))
                };
                let count = offline().count();
                put_length(&mut out, count, flexible, false);
                if count > 0 {
                    offline().for_each(|id| out.put_i32(id));
                }
            }
            if flexible {
                out.put_u8(0);
            }
        }
        if version >= 8 {
            out.put_i32(operations(&topic.name));
        }
        if flexible {
            out.put_u8(0);
        }
    }
    errors.add_times(0, count as u64 + available);
    errors.add_times(ResponseError::LeaderNotAvailable.code(), unavailable);
    EncodedList {
        count,
        bytes: out.freeze(),
    }
}

/// An array's or a string's length prefix: `i32` for an array and `i16` for a string before
/// the flexible versions, then an unsigned varint of the length plus one.
#[inline]
fn put_length(out: &mut BytesMut, length: usize, flexible: bool, string: bool) {
    if flexible {
        // Names are at most 249 bytes and a topic at most `i32::MAX` partitions.
        put_uvarint(out, length as u32 + 1);
    } else if string {
        // Topic names are at most 249 bytes (`topic_name::validate`).
        out.put_i16(length as i16);
    } else {
        out.put_i32(length as i32);
    }
}

fn put_ids(out: &mut BytesMut, ids: impl Iterator<Item = i32>, count: usize, flexible: bool) {
    put_length(out, count, flexible, false);
    for id in ids {
        out.put_i32(id);
    }
}

/// What a Metadata response needs to know of each registered broker, looked up once per
/// request rather than in the cluster image's map for the leader and every replica of every
/// partition (a cluster has a few brokers and a response may list a million partitions).
pub struct BrokerTable {
    /// `(id, live, reachable)` by ascending id: live = registered and not fenced; reachable =
    /// live with an endpoint on the request's listener.
    brokers: Vec<(i32, bool, bool)>,
    /// Each broker's state indexed by id when every id is in `0..DENSE_IDS`: a lookup per
    /// replica is then an index, not a binary search (a fifth of an all-topics answer).
    dense: Vec<BrokerState>,
}

/// Broker ids below this are looked up by index (broker ids are usually small).
const DENSE_IDS: i32 = 1 << 16;

/// A broker as a Metadata answer sees it, in order of availability.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum BrokerState {
    Unknown,
    Fenced,
    /// Live, without an endpoint on the request's listener.
    Live,
    Reachable,
}

impl BrokerTable {
    /// The brokers of `image` as seen by a client of `listener_name`.
    pub fn new(image: &MetadataImage, listener_name: &str) -> Self {
        let mut brokers: Vec<(i32, bool, bool)> = image
            .cluster
            .brokers()
            .map(|broker| {
                let live = !broker.fenced;
                (
                    broker.id,
                    live,
                    live && broker.endpoint(listener_name).is_some(),
                )
            })
            .collect();
        brokers.sort_unstable_by_key(|(id, _, _)| *id);
        let ids = brokers.first().zip(brokers.last());
        let dense = match ids {
            Some(((smallest, _, _), (largest, _, _))) if *smallest >= 0 && *largest < DENSE_IDS => {
                let mut dense =
                    vec![BrokerState::Unknown; usize::try_from(*largest + 1).unwrap_or(0)];
                for (id, live, reachable) in &brokers {
                    if let Some(slot) = usize::try_from(*id).ok().and_then(|i| dense.get_mut(i)) {
                        *slot = Self::state_of(*live, *reachable);
                    }
                }
                dense
            }
            _ => Vec::new(),
        };
        BrokerTable { brokers, dense }
    }

    fn state_of(live: bool, reachable: bool) -> BrokerState {
        match (live, reachable) {
            (true, true) => BrokerState::Reachable,
            (true, false) => BrokerState::Live,
            (false, _) => BrokerState::Fenced,
        }
    }

    #[inline]
    fn state(&self, id: i32) -> BrokerState {
        if !self.dense.is_empty() {
            return usize::try_from(id)
                .ok()
                .and_then(|index| self.dense.get(index))
                .copied()
                .unwrap_or(BrokerState::Unknown);
        }
        self.brokers
            .binary_search_by_key(&id, |(broker, _, _)| *broker)
            .ok()
            .and_then(|index| self.brokers.get(index))
            .map_or(BrokerState::Unknown, |(_, live, reachable)| {
                Self::state_of(*live, *reachable)
            })
    }

    #[inline]
    pub(super) fn is_reachable(&self, id: i32) -> bool {
        self.state(id) == BrokerState::Reachable
    }

    #[inline]
    pub(super) fn is_offline(&self, id: i32) -> bool {
        self.state(id) < BrokerState::Live
    }
}

fn describe_topic(
    brokers: &BrokerTable,
    topic: &Arc<TopicImage>,
    topic_operations: i32,
) -> MetadataResponseTopic {
    let mut partitions = Vec::with_capacity(topic.partition_count());
    partitions.extend(topic.partitions().map(|(index, partition)| {
        let replicas = partition.replicas.as_slice();
        let offline: Vec<BrokerId> = replicas
            .iter()
            .filter(|id| brokers.is_offline(**id))
            .map(|id| BrokerId(*id))
            .collect();
        let error = if brokers.is_reachable(partition.leader) {
            0
        } else {
            ResponseError::LeaderNotAvailable.code()
        };
        // Fields set in place: each `with_*` moves the whole struct, which showed in profiles of
        // responses listing many partitions.
        let mut described = MetadataResponsePartition::default();
        described.error_code = error;
        described.partition_index = index;
        described.leader_id = BrokerId(partition.leader);
        described.leader_epoch = partition.leader_epoch;
        described.replica_nodes = replicas.iter().map(|id| BrokerId(*id)).collect();
        described.isr_nodes = partition.isr.iter().map(|id| BrokerId(*id)).collect();
        described.offline_replicas = offline;
        described
    }));
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(
            topic.name.to_string(),
        ))))
        .with_topic_id(topic.id)
        .with_is_internal(is_internal(&topic.name))
        .with_partitions(partitions)
        .with_topic_authorized_operations(topic_operations)
}

/// What a Metadata request naming topics may create, and which of its names it may not see
/// or create.
#[derive(Default)]
struct CreationPlan {
    undescribable: HashSet<String>,
    create_denied: HashSet<String>,
    /// The names to create, in request order.
    missing: Vec<String>,
}

/// Kafka: a topic needs DESCRIBE to be shown (named ones answer TOPIC_AUTHORIZATION_FAILED
/// without looking whether it exists); an auto-created one CREATE on the cluster or on the
/// topic.
fn creation_plan(
    access: &Access<'_>,
    image: &MetadataImage,
    requested: &[MetadataRequestTopic],
    version: i16,
    may_auto_create: bool,
) -> CreationPlan {
    let mut plan = CreationPlan::default();
    if access.is_enforced() {
        for wanted in requested {
            let name = match (&wanted.name, version >= 12) {
                (Some(name), _) => Some(name.to_string()),
                (None, true) => image
                    .topics
                    .get_by_id(&wanted.topic_id)
                    .map(|t| t.name.to_string()),
                (None, false) => None,
            };
            if let Some(name) = name {
                if !access.allows(AclOperation::Describe, ResourceType::Topic, &name) {
                    plan.undescribable.insert(name);
                }
            }
        }
    }
    if may_auto_create {
        let cluster_create = access.quietly_allows(
            AclOperation::Create,
            ResourceType::Cluster,
            gregor_publishers::acl::CLUSTER_NAME,
        );
        plan.missing = requested
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.as_str().to_owned()))
            .filter(|name| !plan.undescribable.contains(name))
            .filter(|name| image.topics.get_by_name(name).is_none())
            .filter(|name| topic_name::validate(name).is_ok())
            .filter(|name| {
                let allowed = cluster_create
                    || access.allows(AclOperation::Create, ResourceType::Topic, name);
                if !allowed {
                    plan.create_denied.insert(name.clone());
                }
                allowed
            })
            .collect();
    }
    plan
}

/// The topics a Metadata request naming `topics` would ask the controller to create, in
/// request order (none when it may not create topics).
pub fn topics_to_create(
    ctx: &HandlerContext,
    info: &RequestInfo,
    request: &MetadataRequest,
    topics: &[MetadataRequestTopic],
) -> Vec<String> {
    let may_auto_create = ctx.settings.auto_create_topics_enable
        && (info.api_version < 4 || request.allow_auto_topic_creation);
    if !may_auto_create {
        return Vec::new();
    }
    let image = ctx.image.load_full();
    creation_plan(
        &Access::new(ctx, info),
        &image,
        topics,
        info.api_version,
        true,
    )
    .missing
}

/// Asks the controller to create `names` with the broker defaults and waits for the answer, so
/// the client's retry finds them. Failures (a concurrent create, say) are logged, not returned:
/// the client sees the topic on retry or keeps getting an error.
pub async fn auto_create(ctx: &HandlerContext, info: &RequestInfo, names: &[String]) {
    let topics = names
        .iter()
        .map(|name| {
            CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_string(name.clone())))
                .with_num_partitions(ctx.settings.num_partitions)
                .with_replication_factor(ctx.settings.default_replication_factor)
        })
        .collect();
    let request = CreateTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(30_000);
    // A broker that does not lead the quorum hands the creation to the active controller, as
    // Kafka's brokers forward it. Kafka answers Metadata without waiting for the creation, so
    // with no active controller known (an election) the local controller refuses it at once.
    let forwarder = ctx.forwarder.as_ref().filter(|forwarder| {
        ctx.quorum.as_ref().is_some_and(|q| !q.is_leader()) && forwarder.knows_active_controller()
    });
    if let Some(forwarder) = forwarder {
        let version = crate::controller::LATEST_CREATE_TOPICS_VERSION;
        match forwarder
            .create_topics(request.clone(), version, Some(Caller::of(info)))
            .await
        {
            Forwarded::Answered(response) => {
                for topic in response.topics {
                    if topic.error_code != 0
                        && topic.error_code != ResponseError::TopicAlreadyExists.code()
                    {
                        tracing::warn!(topic = %topic.name.0, code = topic.error_code, message = ?topic.error_message, "auto-creation of a topic failed");
                    }
                }
                return;
            }
            Forwarded::Failed(failure) => {
                tracing::warn!(code = failure.error.code(), message = %failure.message, "auto-creation of topics failed at the active controller");
                return;
            }
            Forwarded::Unreachable => {
                tracing::info!("no active controller reachable for auto-creation; trying locally")
            }
        }
    }
    let outcome = ctx
        .controller
        .send(CreateTopics {
            request,
            version: crate::controller::LATEST_CREATE_TOPICS_VERSION,
            principal: (*info.principal).clone(),
            client_id: info.client_id.to_string(),
        })
        .await;
    match outcome {
        Ok(response) => {
            for topic in response.topics {
                if topic.error_code != 0
                    && topic.error_code != ResponseError::TopicAlreadyExists.code()
                {
                    tracing::warn!(
                        topic = %topic.name.0,
                        code = topic.error_code,
                        message = ?topic.error_message,
                        "auto-creation of a topic failed"
                    );
                }
            }
        }
        Err(error) => tracing::error!(%error, "controller unavailable for topic auto-creation"),
    }
}

/// An upper bound of the encoded size of `response` at any Metadata version (each string and
/// array counted with its longest length prefix, each struct with an empty tag buffer: Gregor
/// sets no unknown tagged fields), so the network layer allocates its buffer once: grown from
/// 256 bytes by doubling, a 2 MB all-topics response is re-copied a dozen times. Reading the
/// vectors' lengths is cheaper than the crate's `compute_size`, which applies every version
/// rule to every field.
pub fn encoded_size_bound(response: &MetadataResponse) -> usize {
    // A length prefix: a 4-byte array length or a varint of at most 5 bytes.
    const PREFIX: usize = 5;
    let text = |s: Option<&str>| PREFIX + s.map_or(0, str::len);
    let brokers: usize = response
        .brokers
        .iter()
        .map(|b| 4 + text(Some(&b.host)) + 4 + text(b.rack.as_deref()) + 1)
        .sum();
    let topics: usize = response
        .topics
        .iter()
        .map(|t| {
            let partitions: usize = t
                .partitions
                .iter()
                .map(|p| {
                    2 + 4
                        + 4
                        + 4
                        + 3 * PREFIX
                        + 1
                        + 4 * (p.replica_nodes.len() + p.isr_nodes.len() + p.offline_replicas.len())
                })
                .sum();
            2 + text(t.name.as_ref().map(|n| n.as_str())) + 16 + 1 + PREFIX + partitions + 4 + 1
        })
        .sum();
    4 + PREFIX + brokers + text(response.cluster_id.as_deref()) + 4 + PREFIX + topics + 4 + 2 + 1
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use gregor_publishers::records::{
        Endpoint, MetadataRecord, PartitionRecord, RegisterBrokerRecord, TopicRecord,
    };
    use gregor_publishers::{MetadataDelta, Provenance};

    fn broker(id: i32, listener: &str, fenced: bool) -> MetadataRecord {
        MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: id,
            incarnation_id: Uuid::from_u128(id as u128),
            broker_epoch: 10,
            endpoints: vec![Endpoint {
                name: listener.into(),
                host: format!("b{id}"),
                port: 9092,
                security_protocol: 0,
            }],
            features: vec![],
            rack: None,
            fenced,
            in_controlled_shutdown: false,
            log_dirs: vec![],
        })
    }

    /// The size bound covers the encoding at every version the node advertises, and is not
    /// far above it (it sizes a buffer).
    #[test]
    fn encoded_size_bound_covers_every_advertised_version() {
        use kafka_protocol::messages::ApiKey;
        use kafka_protocol::protocol::Encodable;
        let partition = |i: i32| {
            MetadataResponsePartition::default()
                .with_partition_index(i)
                .with_leader_id(BrokerId(i % 3))
                .with_replica_nodes(vec![BrokerId(0), BrokerId(1), BrokerId(2)])
                .with_isr_nodes(vec![BrokerId(0), BrokerId(1)])
                .with_offline_replicas(vec![BrokerId(2)])
        };
        let response = MetadataResponse::default()
            .with_brokers(
                (0..3)
                    .map(|id| {
                        MetadataResponseBroker::default()
                            .with_node_id(BrokerId(id))
                            .with_host(StrBytes::from_string(format!("broker-{id}.example.com")))
                            .with_port(9092)
                            .with_rack((id == 1).then(|| StrBytes::from_static_str("rack-a")))
                    })
                    .collect(),
            )
            .with_cluster_id(Some(StrBytes::from_static_str("cluster")))
            .with_topics(
                (0..50)
                    .map(|t| {
                        MetadataResponseTopic::default()
                            .with_name(Some(TopicName(StrBytes::from_string(format!("topic-{t}")))))
                            .with_topic_id(Uuid::from_u128(t))
                            .with_partitions((0..20).map(partition).collect())
                    })
                    .collect(),
            );
        let bound = encoded_size_bound(&response);
        let versions =
            crate::handlers::lookup(ApiKey::Metadata, crate::context::ListenerKind::Broker)
                .unwrap()
                .versions;
        for version in versions.min..=versions.max {
            let mut out = bytes::BytesMut::new();
            response.encode(&mut out, version).unwrap();
            assert!(out.len() <= bound, "v{version}: {} > {bound}", out.len());
            assert!(
                bound * 2 <= out.len() * 3,
                "v{version}: {bound} for {}",
                out.len()
            );
        }
    }

    fn partition(id: i32, leader: i32, replicas: &[i32]) -> MetadataRecord {
        MetadataRecord::Partition(PartitionRecord {
            partition_id: id,
            topic_id: Uuid::from_u128(7),
            replicas: replicas.to_vec(),
            isr: replicas.to_vec(),
            removing_replicas: vec![],
            adding_replicas: vec![],
            leader,
            leader_recovery_state: 0,
            leader_epoch: 3,
            partition_epoch: 0,
            directories: vec![],
        })
    }

    #[test]
    fn partitions_name_unreachable_leaders_and_offline_replicas() {
        // Broker 1 live on PLAINTEXT, 2 fenced, 3 live on another listener only, 4 unknown.
        let records = [
            broker(1, "PLAINTEXT", false),
            broker(2, "PLAINTEXT", true),
            broker(3, "SSL", false),
            MetadataRecord::Topic(TopicRecord {
                name: "t".into(),
                topic_id: Uuid::from_u128(7),
            }),
            partition(0, 1, &[1, 2, 3]),
            partition(1, 2, &[2, 1]),
            partition(2, 3, &[3, 1]),
            partition(3, 4, &[4, 1]),
        ];
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        delta.replay_all(&records).unwrap();
        let image = delta.apply(Provenance::default());
        let brokers = BrokerTable::new(&image, "PLAINTEXT");
        let (topics, errors) = decoded_all_topics(&image, &brokers, 12, |_| true, |_| 5);
        assert_eq!(topics.len(), 1);
        assert_eq!(topics[0].topic_authorized_operations, 5);
        let described: Vec<_> = topics[0]
            .partitions
            .iter()
            .map(|p| {
                (
                    p.partition_index,
                    p.error_code,
                    p.leader_id.0,
                    p.leader_epoch,
                    p.replica_nodes.iter().map(|b| b.0).collect::<Vec<_>>(),
                    p.offline_replicas.iter().map(|b| b.0).collect::<Vec<_>>(),
                )
            })
            .collect();
        let unavailable = ResponseError::LeaderNotAvailable.code();
        assert_eq!(
            described,
            [
                (0, 0, 1, 3, vec![1, 2, 3], vec![2]),
                (1, unavailable, 2, 3, vec![2, 1], vec![2]),
                (2, unavailable, 3, 3, vec![3, 1], vec![]),
                (3, unavailable, 4, 3, vec![4, 1], vec![4]),
            ]
        );
        let listed: Vec<i32> = response_brokers(&image, "PLAINTEXT")
            .iter()
            .map(|b| b.node_id.0)
            .collect();
        assert_eq!(listed, [1]);
        assert_eq!(
            errors.iter().collect::<Vec<_>>(),
            [(0, 2), (unavailable, 3)],
            "the topic and one partition answered NONE, three partitions LEADER_NOT_AVAILABLE"
        );
        let (hidden, errors) = decoded_all_topics(&image, &brokers, 12, |name| name != "t", |_| 0);
        assert!(hidden.is_empty());
        assert_eq!(errors.iter().count(), 0);
    }

    /// Broker ids past the dense table's range are looked up by search, with the same answers.
    #[test]
    fn brokers_are_looked_up_alike_by_index_and_by_search() {
        let table = |records: &[MetadataRecord]| {
            let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
            delta.replay_all(records).unwrap();
            BrokerTable::new(&delta.apply(Provenance::default()), "PLAINTEXT")
        };
        let mut records = vec![
            broker(1, "PLAINTEXT", false),
            broker(2, "PLAINTEXT", true),
            broker(3, "SSL", false),
        ];
        let dense = table(&records);
        records.push(broker(DENSE_IDS + 5, "PLAINTEXT", false));
        let searched = table(&records);
        assert!(!dense.dense.is_empty() && searched.dense.is_empty());
        for table in [&dense, &searched] {
            let states: Vec<_> = (-1..=4)
                .map(|id| (table.is_reachable(id), table.is_offline(id)))
                .collect();
            assert_eq!(
                states,
                [
                    (false, true),
                    (false, true),
                    (true, false),
                    (false, true),
                    (false, false),
                    (false, true),
                ]
            );
        }
        assert!(searched.is_reachable(DENSE_IDS + 5));
        assert!(!dense.is_reachable(DENSE_IDS + 5) && dense.is_offline(DENSE_IDS + 5));
    }

    /// The topics [`encode_all_topics`] wrote, decoded by the crate, which must use every byte.
    fn decoded_all_topics(
        image: &MetadataImage,
        brokers: &BrokerTable,
        version: i16,
        visible: impl FnMut(&str) -> bool,
        operations: impl FnMut(&str) -> i32,
    ) -> (Vec<MetadataResponseTopic>, ErrorCounts) {
        use kafka_protocol::protocol::Decodable;
        let mut errors = ErrorCounts::default();
        let list = encode_all_topics(image, brokers, version, visible, operations, &mut errors);
        let mut bytes = list.bytes.clone();
        let topics = (0..list.count)
            .map(|_| MetadataResponseTopic::decode(&mut bytes, version).unwrap())
            .collect();
        assert!(bytes.is_empty(), "{} bytes left over", bytes.len());
        (topics, errors)
    }

    /// Byte for byte what `kafka-protocol` encodes from the structs [`describe_topic`] builds,
    /// at every advertised version: names and partition lists long enough for two-byte
    /// varints, an internal topic, hidden topics, replication factors 1 to 4, offline
    /// replicas and unreachable leaders; and the same error counts.
    #[test]
    fn all_topics_encode_as_the_crate_does_at_every_version() {
        use kafka_protocol::messages::ApiKey;
        use kafka_protocol::protocol::Encodable;
        let mut records = vec![
            broker(1, "PLAINTEXT", false),
            broker(2, "PLAINTEXT", false),
            broker(3, "PLAINTEXT", true),
            broker(4, "SSL", false),
        ];
        let names = [
            "__consumer_offsets".to_owned(),
            "a".to_owned(),
            "hidden-orders".to_owned(),
            "x".repeat(200),
            "payments.eu_1".to_owned(),
        ];
        for (topic, name) in names.iter().enumerate() {
            let topic_id = Uuid::from_u128(0x100 + topic as u128);
            records.push(MetadataRecord::Topic(TopicRecord {
                name: name.clone(),
                topic_id,
            }));
            let partitions = if topic == 3 { 200 } else { topic as i32 + 1 };
            for index in 0..partitions {
                let replication = 1 + (index + topic as i32) % 4;
                let replicas: Vec<i32> = (0..replication).map(|n| 1 + (index + n) % 5).collect();
                records.push(MetadataRecord::Partition(PartitionRecord {
                    partition_id: index,
                    topic_id,
                    isr: replicas[..1].to_vec(),
                    leader: replicas[0],
                    replicas,
                    removing_replicas: vec![],
                    adding_replicas: vec![],
                    directories: vec![],
                    leader_recovery_state: 0,
                    leader_epoch: index * 7,
                    partition_epoch: 0,
                }));
            }
        }
        let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        delta.replay_all(&records).unwrap();
        let image = delta.apply(Provenance::default());
        let brokers = BrokerTable::new(&image, "PLAINTEXT");
        let visible = |name: &str| !name.starts_with("hidden");
        let versions =
            crate::handlers::lookup(ApiKey::Metadata, crate::context::ListenerKind::Broker)
                .unwrap()
                .versions;
        for version in versions.min..=versions.max {
            // Before v8 there is no field for them, and the crate refuses a value.
            let operations = |name: &str| {
                if version < 8 {
                    OPERATIONS_NOT_REQUESTED
                } else {
                    name.len() as i32
                }
            };
            let mut errors = ErrorCounts::default();
            let list =
                encode_all_topics(&image, &brokers, version, visible, operations, &mut errors);
            let mut expected = bytes::BytesMut::new();
            let mut expected_errors = ErrorCounts::default();
            let mut count = 0;
            for topic in image.topics.iter().filter(|t| visible(&t.name)) {
                let described = describe_topic(&brokers, topic, operations(&topic.name));
                expected_errors.add(described.error_code);
                for partition in &described.partitions {
                    expected_errors.add(partition.error_code);
                }
                described.encode(&mut expected, version).unwrap();
                count += 1;
            }
            assert_eq!(list.count, 4, "v{version}");
            assert_eq!(list.count, count, "v{version}");
            assert_eq!(&list.bytes[..], &expected[..], "v{version}");
            let mut counted: Vec<_> = errors.iter().collect();
            let mut expected_counts: Vec<_> = expected_errors.iter().collect();
            counted.sort_unstable();
            expected_counts.sort_unstable();
            assert_eq!(counted, expected_counts, "v{version}");
        }
    }
}
