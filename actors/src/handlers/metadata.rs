//! Metadata (key 3): brokers, cluster id, controller id and topics, from one image snapshot.

use std::collections::HashSet;
use std::sync::Arc;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
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

use super::{ApiResponse, ErrorCounts};
use crate::authorizer::Access;
use crate::context::{HandlerContext, RequestInfo};
use crate::controller::logic::topic_name;
use crate::controller::CreateTopics;

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

    // Kafka: a topic needs DESCRIBE to be shown (all-topics requests leave the others out,
    // named ones answer TOPIC_AUTHORIZATION_FAILED without looking whether it exists); an
    // auto-created one CREATE on the cluster or on the topic.
    let access = Access::new(ctx, info);
    let mut describable = HashSet::new();
    let mut undescribable = HashSet::new();
    if !all_topics && access.is_enforced() {
        for wanted in &requested {
            let name = match (&wanted.name, version >= 12) {
                (Some(name), _) => Some(name.to_string()),
                (None, true) => image
                    .topics
                    .get_by_id(&wanted.topic_id)
                    .map(|t| t.name.to_string()),
                (None, false) => None,
            };
            if let Some(name) = name {
                if access.allows(AclOperation::Describe, ResourceType::Topic, &name) {
                    describable.insert(name);
                } else {
                    undescribable.insert(name);
                }
            }
        }
    }
    let mut create_denied = HashSet::new();
    let mut created = HashSet::new();
    if !all_topics && may_auto_create {
        let cluster_create = access.quietly_allows(
            AclOperation::Create,
            ResourceType::Cluster,
            gregor_publishers::acl::CLUSTER_NAME,
        );
        let missing: Vec<String> = requested
            .iter()
            .filter_map(|t| t.name.as_ref().map(|n| n.as_str().to_owned()))
            .filter(|name| !undescribable.contains(name))
            .filter(|name| image.topics.get_by_name(name).is_none())
            .filter(|name| topic_name::validate(name).is_ok())
            .filter(|name| {
                let allowed = cluster_create
                    || access.allows(AclOperation::Create, ResourceType::Topic, name);
                if !allowed {
                    create_denied.insert(name.clone());
                }
                allowed
            })
            .collect();
        if !missing.is_empty() {
            auto_create(ctx, info, &missing).await;
            created = missing.into_iter().collect();
            image = ctx.image.load_full();
        }
    }

    let include_operations = request.include_topic_authorized_operations;
    let topic_operations = |name: &str| match (include_operations, access.is_enforced()) {
        (false, _) => OPERATIONS_NOT_REQUESTED,
        (true, false) => ALL_TOPIC_OPERATIONS,
        (true, true) => access.authorized_operations(ResourceType::Topic, name),
    };
    let mut errors = ErrorCounts::default();
    let topics: Vec<MetadataResponseTopic> = if all_topics {
        image
            .topics
            .iter()
            .filter(|topic| {
                access.quietly_allows(AclOperation::Describe, ResourceType::Topic, &topic.name)
            })
            .map(|topic| {
                describe_topic(
                    &image,
                    topic,
                    topic_operations(&topic.name),
                    &info.listener_name,
                )
            })
            .collect()
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
                        Some(topic) => describe_topic(
                            &image,
                            topic,
                            topic_operations(name),
                            &info.listener_name,
                        ),
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
                        Some(topic) if !id.is_nil() => describe_topic(
                            &image,
                            topic,
                            topic_operations(&topic.name),
                            &info.listener_name,
                        ),
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

    let brokers = image
        .cluster
        .brokers()
        .filter(|broker| !broker.fenced)
        .filter_map(|broker| {
            let endpoint = broker.endpoint(&info.listener_name)?;
            Some(
                MetadataResponseBroker::default()
                    .with_node_id(BrokerId(broker.id))
                    .with_host(StrBytes::from_string(endpoint.host.clone()))
                    .with_port(i32::from(endpoint.port))
                    .with_rack(broker.rack.clone().map(StrBytes::from_string)),
            )
        })
        .collect();
    let mut response = MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(StrBytes::from_string(ctx.node.cluster_id.clone())))
        .with_controller_id(BrokerId(client_facing_controller_id(
            &image,
            ctx.node.node_id,
        )))
        .with_topics(topics);
    if request.include_cluster_authorized_operations && (8..=10).contains(&version) {
        response = response.with_cluster_authorized_operations(cluster_operations(&access));
    }
    ApiResponse::new(ResponseKind::Metadata(response), errors)
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
fn is_internal(name: &str) -> bool {
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

fn describe_topic(
    image: &MetadataImage,
    topic: &Arc<TopicImage>,
    topic_operations: i32,
    listener_name: &str,
) -> MetadataResponseTopic {
    let partitions = topic
        .partitions()
        .map(|(index, partition)| {
            let leader_reachable = image
                .cluster
                .broker(partition.leader)
                .is_some_and(|b| !b.fenced && b.endpoint(listener_name).is_some());
            let replicas = partition.replicas.as_slice();
            let offline: Vec<BrokerId> = replicas
                .iter()
                .filter(|id| image.cluster.broker(**id).is_none_or(|b| b.fenced))
                .map(|id| BrokerId(*id))
                .collect();
            let error = if leader_reachable {
                0
            } else {
                ResponseError::LeaderNotAvailable.code()
            };
            MetadataResponsePartition::default()
                .with_error_code(error)
                .with_partition_index(index)
                .with_leader_id(BrokerId(partition.leader))
                .with_leader_epoch(partition.leader_epoch)
                .with_replica_nodes(replicas.iter().map(|id| BrokerId(*id)).collect())
                .with_isr_nodes(
                    partition
                        .isr
                        .as_slice()
                        .iter()
                        .map(|id| BrokerId(*id))
                        .collect(),
                )
                .with_offline_replicas(offline)
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(StrBytes::from_string(
            topic.name.to_string(),
        ))))
        .with_topic_id(topic.id)
        .with_is_internal(is_internal(&topic.name))
        .with_partitions(partitions)
        .with_topic_authorized_operations(topic_operations)
}

/// Asks the controller to create `names` with the broker defaults and waits for the answer, so
/// the client's retry finds them. Failures (a concurrent create, say) are logged, not returned:
/// the client sees the topic on retry or keeps getting an error.
async fn auto_create(ctx: &HandlerContext, info: &RequestInfo, names: &[String]) {
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
    // Kafka's brokers forward it.
    let forwarder = ctx
        .forwarder
        .as_ref()
        .filter(|_| ctx.quorum.as_ref().is_some_and(|q| !q.is_leader()));
    if let Some(forwarder) = forwarder {
        let version = crate::controller::LATEST_CREATE_TOPICS_VERSION;
        match forwarder.create_topics(request.clone(), version).await {
            Some(response) => {
                for topic in response.topics {
                    if topic.error_code != 0
                        && topic.error_code != ResponseError::TopicAlreadyExists.code()
                    {
                        tracing::warn!(topic = %topic.name.0, code = topic.error_code, message = ?topic.error_message, "auto-creation of a topic failed");
                    }
                }
                return;
            }
            None => {
                tracing::info!("no active controller reachable for auto-creation; trying locally")
            }
        }
    }
    let outcome = ctx
        .controller
        .send(CreateTopics {
            request,
            version: crate::controller::LATEST_CREATE_TOPICS_VERSION,
            principal: info.principal.clone(),
            client_id: info.client_id.clone(),
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
