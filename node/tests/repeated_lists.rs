//! A request whose list repeats elements is served reduced (each distinct element at most
//! twice) and its answer expanded (`network/repeated.rs`): for every advertised version of
//! each API it covers, the expanded answer must be byte for byte the crate's encoding of the
//! answer to the whole request, decided by the API's own decision function.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use gregor_actors::controller::logic::acls;
use gregor_actors::controller::logic::client_quotas::alter_client_quotas;
use gregor_actors::controller::logic::configs::{alter_configs, incremental_alter_configs};
use gregor_actors::controller::logic::{
    create_topics, delete_topics, MutationContext, TopicDefaults, Unlimited,
};
use gregor_actors::handlers::configs::{describe_configs, ConfigSupport, LogLevels};
use gregor_node::network::repeated::{reduce, ResponseBytes};
use gregor_publishers::{MetadataDelta, MetadataImage, Provenance};
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use rand::rngs::StdRng;
use rand::SeedableRng;
use uuid::Uuid;

fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

fn image() -> MetadataImage {
    use gregor_publishers::records::*;
    let topic_id = Uuid::from_u128(1);
    let records = [
        MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: 1,
            incarnation_id: Uuid::from_u128(9),
            broker_epoch: 1,
            endpoints: vec![Endpoint {
                name: "PLAINTEXT".into(),
                host: "127.0.0.1".into(),
                port: 9092,
                security_protocol: 0,
            }],
            features: vec![],
            rack: None,
            fenced: true,
            in_controlled_shutdown: false,
            log_dirs: vec![],
        }),
        MetadataRecord::UnfenceBroker(UnfenceBrokerRecord { id: 1, epoch: 1 }),
        MetadataRecord::AccessControlEntry(AccessControlEntryRecord {
            id: Uuid::from_u128(5),
            resource_type: 2,
            resource_name: "orders".into(),
            pattern_type: 3,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: 3,
            permission_type: 3,
        }),
        MetadataRecord::Topic(TopicRecord {
            name: "orders".into(),
            topic_id,
        }),
        MetadataRecord::Partition(PartitionRecord {
            directories: vec![Uuid::nil()],
            ..PartitionRecord::in_sync(topic_id, 0, vec![1])
        }),
    ];
    let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
    delta.replay_all(&records).unwrap();
    delta.apply(Provenance::default())
}

struct NoLoggers;

impl LogLevels for NoLoggers {
    fn loggers(&self) -> Vec<(String, String)> {
        Vec::new()
    }
    fn set_level(&self, _: &str, _: &str) -> Result<(), String> {
        Err("no loggers".into())
    }
    fn unset_level(&self, _: &str) -> Result<(), String> {
        Err("no loggers".into())
    }
}

/// The answer the node gives: the API's decision, as the handler returns it.
fn decide(image: &MetadataImage, request: &RequestKind, version: i16) -> ResponseKind {
    let mut rng = StdRng::seed_from_u64(7);
    let mut quota = Unlimited;
    let mut ctx = MutationContext {
        rng: &mut rng,
        quota: &mut quota,
    };
    let support = ConfigSupport {
        static_configs: Arc::new(Vec::new()),
        static_log_configs: Arc::default(),
        group_defaults: Default::default(),
        loggers: Arc::new(NoLoggers),
    };
    match request {
        RequestKind::DescribeConfigs(r) => {
            ResponseKind::DescribeConfigs(describe_configs(image, r, 1, &support))
        }
        RequestKind::IncrementalAlterConfigs(r) => ResponseKind::IncrementalAlterConfigs(
            incremental_alter_configs(image, r, Some(1), &Default::default()).response,
        ),
        RequestKind::DeleteTopics(r) => {
            ResponseKind::DeleteTopics(delete_topics(image, r, version, true, &mut ctx).response)
        }
        RequestKind::AlterClientQuotas(r) => {
            ResponseKind::AlterClientQuotas(alter_client_quotas(&image.client_quotas, r).response)
        }
        RequestKind::CreateTopics(r) => ResponseKind::CreateTopics(
            create_topics(image, r, version, &TopicDefaults::default(), &mut ctx).response,
        ),
        RequestKind::AlterConfigs(r) => ResponseKind::AlterConfigs(
            alter_configs(image, r, Some(1), &Default::default()).response,
        ),
        RequestKind::CreateAcls(r) => {
            ResponseKind::CreateAcls(acls::create_acls(&image.acls, r, &mut rng).response)
        }
        RequestKind::DeleteAcls(r) => {
            ResponseKind::DeleteAcls(acls::delete_acls(&image.acls, r).response)
        }
        other => panic!("no decision for {other:?}"),
    }
}

fn request_frame(key: ApiKey, version: i16, request: &RequestKind) -> Bytes {
    let mut frame = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(42)
        .with_client_id(Some(s("t")))
        .encode(&mut frame, key.request_header_version(version))
        .unwrap();
    request.encode(&mut frame, version).unwrap();
    frame.freeze()
}

fn response_frame(key: ApiKey, version: i16, response: &ResponseKind) -> Bytes {
    let mut frame = BytesMut::new();
    frame.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(42)
        .encode(&mut frame, key.response_header_version(version))
        .unwrap();
    response.encode(&mut frame, version).unwrap();
    let size = (frame.len() - 4) as i32;
    frame[..4].copy_from_slice(&size.to_be_bytes());
    frame.freeze()
}

/// Serves `request` whole and reduced; the two answers must be the same bytes. Returns how
/// many list elements the reduced request kept.
fn check(key: ApiKey, version: i16, request: RequestKind, count: impl Fn(&RequestKind) -> usize) {
    let image = image();
    let frame = request_frame(key, version, &request);
    let whole = response_frame(key, version, &decide(&image, &request, version));

    let reduction = reduce(key, version, &frame)
        .expect("the API has a repeated-list shape")
        .unwrap();
    let mut body = reduction.frame.clone();
    RequestHeader::decode(&mut body, key.request_header_version(version)).unwrap();
    let reduced = RequestKind::decode(key, &mut body, version).unwrap();
    assert!(
        count(&reduced) < count(&request),
        "{key:?} v{version}: the third copies are dropped"
    );
    let answer = response_frame(key, version, &decide(&image, &reduced, version));
    let served = match reduction.plan {
        Some(plan) => plan
            .expand(answer, key.response_header_version(version), version)
            .unwrap(),
        None => ResponseBytes::Whole(answer),
    };
    let mut written = Vec::new();
    futures::executor::block_on(served.write_to(&mut written)).unwrap();
    let bytes = Bytes::from(written);
    assert_eq!(served.len(), whole.len(), "{key:?} v{version} size");
    assert_eq!(bytes, whole, "{key:?} v{version}");
}

fn repeat<T: Clone>(parts: &[(T, usize)]) -> Vec<T> {
    parts
        .iter()
        .flat_map(|(item, times)| std::iter::repeat_n(item.clone(), *times))
        .collect()
}

#[test]
fn describe_configs_answers_every_copy() {
    let resource = |kind: i8, name: &str, keys: Option<&[&str]>| {
        DescribeConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(s(name))
            .with_configuration_keys(keys.map(|keys| keys.iter().map(|k| s(k)).collect()))
    };
    let mut tagged = resource(2, "", None);
    tagged
        .unknown_tagged_fields
        .insert(7, Bytes::from_static(b"x"));
    for version in 1..=4i16 {
        let mut resources = repeat(&[
            (
                resource(2, "orders", Some(&["retention.ms", "retention.ms"])),
                3,
            ),
            (resource(2, "", None), 4),
            (resource(4, "1", Some(&[])), 1),
            (resource(2, "missing", None), 3),
            (resource(2, "", None), 2),
            (resource(9, "x", None), 3),
        ]);
        if version >= 4 {
            resources.extend(repeat(&[(tagged.clone(), 3)]));
        }
        let request = DescribeConfigsRequest::default()
            .with_resources(resources)
            .with_include_synonyms(true)
            .with_include_documentation(version >= 3);
        check(
            ApiKey::DescribeConfigs,
            version,
            RequestKind::DescribeConfigs(request),
            |r| match r {
                RequestKind::DescribeConfigs(r) => r.resources.len(),
                _ => 0,
            },
        );
    }
}

#[test]
fn incremental_alter_configs_answers_every_copy() {
    let resource = |kind: i8, name: &str, configs: &[(&str, i8, Option<&str>)]| {
        AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(s(name))
            .with_configs(
                configs
                    .iter()
                    .map(|(name, op, value)| {
                        AlterableConfig::default()
                            .with_name(s(name))
                            .with_config_operation(*op)
                            .with_value(value.map(s))
                    })
                    .collect(),
            )
    };
    for version in 0..=1i16 {
        let resources = repeat(&[
            (resource(2, "", &[]), 5),
            (
                resource(2, "orders", &[("retention.ms", 0, Some("1000"))]),
                1,
            ),
            (resource(2, "missing", &[("retention.ms", 0, Some("1"))]), 3),
            (
                resource(4, "1", &[("log.cleaner.threads", 0, Some("2"))]),
                1,
            ),
            (resource(2, "", &[]), 2),
            (resource(2, "nope", &[("x", 1, None)]), 4),
        ]);
        let request = IncrementalAlterConfigsRequest::default()
            .with_resources(resources)
            .with_validate_only(true);
        check(
            ApiKey::IncrementalAlterConfigs,
            version,
            RequestKind::IncrementalAlterConfigs(request),
            |r| match r {
                RequestKind::IncrementalAlterConfigs(r) => r.resources.len(),
                _ => 0,
            },
        );
    }
}

#[test]
fn delete_topics_v6_answers_every_unnamed_copy_and_each_name_once() {
    let state = |name: Option<&str>, id: u128| {
        DeleteTopicState::default()
            .with_name(name.map(|n| TopicName(s(n))))
            .with_topic_id(Uuid::from_u128(id))
    };
    let mut tagged = state(Some("orders"), 0);
    tagged
        .unknown_tagged_fields
        .insert(3, Bytes::from_static(b"y"));
    let topics = repeat(&[
        (state(None, 0), 4),
        (state(Some("orders"), 0), 3),
        (state(None, 1), 3),
        (state(Some("x"), 5), 3),
        (state(None, 0), 2),
        (tagged, 3),
        (state(None, 77), 1),
        (state(Some("gone"), 0), 3),
    ]);
    let request = DeleteTopicsRequest::default()
        .with_topics(topics)
        .with_timeout_ms(1000);
    check(
        ApiKey::DeleteTopics,
        6,
        RequestKind::DeleteTopics(request),
        |r| match r {
            RequestKind::DeleteTopics(r) => r.topics.len(),
            _ => 0,
        },
    );
}

#[test]
fn alter_client_quotas_answers_each_entity_once() {
    let entry = |entity: &[(&str, Option<&str>)], ops: &[(&str, f64)]| {
        EntryData::default()
            .with_entity(
                entity
                    .iter()
                    .map(|(kind, name)| {
                        EntityData::default()
                            .with_entity_type(s(kind))
                            .with_entity_name(name.map(s))
                    })
                    .collect(),
            )
            .with_ops(
                ops.iter()
                    .map(|(key, value)| OpData::default().with_key(s(key)).with_value(*value))
                    .collect(),
            )
    };
    for version in 0..=1i16 {
        let entries = repeat(&[
            (entry(&[], &[]), 4),
            (
                entry(&[("user", Some("alice"))], &[("producer_byte_rate", 1e6)]),
                3,
            ),
            (
                entry(&[("client-id", None)], &[("consumer_byte_rate", 5.0)]),
                1,
            ),
            (entry(&[], &[]), 3),
        ]);
        let request = AlterClientQuotasRequest::default().with_entries(entries);
        check(
            ApiKey::AlterClientQuotas,
            version,
            RequestKind::AlterClientQuotas(request),
            |r| match r {
                RequestKind::AlterClientQuotas(r) => r.entries.len(),
                _ => 0,
            },
        );
    }
}

/// Without ALTER_CONFIGS on the cluster the handler refuses every entry, each answered on its
/// own (Kafka's `getErrorResponse`): the plan replays them.
#[test]
fn refused_alter_client_quotas_answers_every_copy() {
    use kafka_protocol::messages::alter_client_quotas_response::{
        EntityData as AnsweredEntity, EntryData as Answered,
    };
    let refuse = |request: &AlterClientQuotasRequest| {
        let entries = request
            .entries
            .iter()
            .map(|entry| {
                Answered::default()
                    .with_error_code(31)
                    .with_error_message(Some(s("Cluster authorization failed.")))
                    .with_entity(
                        entry
                            .entity
                            .iter()
                            .map(|e| {
                                AnsweredEntity::default()
                                    .with_entity_type(e.entity_type.clone())
                                    .with_entity_name(e.entity_name.clone())
                            })
                            .collect(),
                    )
            })
            .collect();
        ResponseKind::AlterClientQuotas(AlterClientQuotasResponse::default().with_entries(entries))
    };
    let user = EntryData::default().with_entity(vec![EntityData::default()
        .with_entity_type(s("user"))
        .with_entity_name(Some(s("bob")))]);
    let entries = repeat(&[
        (EntryData::default(), 5),
        (user, 4),
        (EntryData::default(), 1),
    ]);
    let request = AlterClientQuotasRequest::default().with_entries(entries);
    let frame = request_frame(
        ApiKey::AlterClientQuotas,
        1,
        &RequestKind::AlterClientQuotas(request.clone()),
    );
    let reduction = reduce(ApiKey::AlterClientQuotas, 1, &frame)
        .unwrap()
        .unwrap();
    let mut body = reduction.frame.clone();
    RequestHeader::decode(&mut body, 2).unwrap();
    let reduced = AlterClientQuotasRequest::decode(&mut body, 1).unwrap();
    assert_eq!(reduced.entries.len(), 4);
    let answer = response_frame(ApiKey::AlterClientQuotas, 1, &refuse(&reduced));
    let Ok(ResponseBytes::Expanded(expanded)) = reduction.plan.unwrap().expand(answer, 1, 1) else {
        panic!("every kept entry was answered: the answer is expanded");
    };
    assert_eq!(
        expanded.to_bytes(),
        response_frame(ApiKey::AlterClientQuotas, 1, &refuse(&request))
    );
}

#[test]
fn lists_without_third_copies_are_left_alone_and_bad_bytes_fail() {
    let request = DescribeConfigsRequest::default().with_resources(vec![
        DescribeConfigsResource::default().with_resource_name(s("a")),
        DescribeConfigsResource::default().with_resource_name(s("a")),
        DescribeConfigsResource::default().with_resource_name(s("b")),
    ]);
    let frame = request_frame(
        ApiKey::DescribeConfigs,
        4,
        &RequestKind::DescribeConfigs(request),
    );
    let reduction = reduce(ApiKey::DescribeConfigs, 4, &frame).unwrap().unwrap();
    assert!(reduction.plan.is_none());
    assert_eq!(reduction.frame, frame);
    // A list claiming more elements than the frame holds is refused, not looped over.
    let mut truncated = BytesMut::from(&frame[..frame.len() - 6]);
    truncated.put_u8(0xff);
    assert!(reduce(ApiKey::DescribeConfigs, 4, &truncated.freeze())
        .unwrap()
        .is_err());
    assert!(reduce(ApiKey::Metadata, 1, &frame).is_none());
}

#[test]
fn alter_configs_answers_every_copy() {
    use kafka_protocol::messages::alter_configs_request::{AlterConfigsResource, AlterableConfig};
    let resource = |kind: i8, name: &str, configs: &[(&str, &str)]| {
        AlterConfigsResource::default()
            .with_resource_type(kind)
            .with_resource_name(s(name))
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        AlterableConfig::default()
                            .with_name(s(k))
                            .with_value(Some(s(v)))
                    })
                    .collect(),
            )
    };
    for version in 0..=2i16 {
        let resources = repeat(&[
            (resource(2, "", &[]), 4),
            (resource(2, "orders", &[("retention.ms", "5")]), 1),
            (resource(2, "missing", &[]), 3),
            (resource(2, "", &[]), 1),
        ]);
        let request = AlterConfigsRequest::default()
            .with_resources(resources)
            .with_validate_only(true);
        check(
            ApiKey::AlterConfigs,
            version,
            RequestKind::AlterConfigs(request),
            |r| match r {
                RequestKind::AlterConfigs(r) => r.resources.len(),
                _ => 0,
            },
        );
    }
}

#[test]
fn create_and_delete_acls_answer_every_copy() {
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
    let creation = |name: &str, principal: &str, pattern: i8| {
        AclCreation::default()
            .with_resource_type(2)
            .with_resource_name(s(name))
            .with_resource_pattern_type(pattern)
            .with_principal(s(principal))
            .with_host(s("*"))
            .with_operation(3)
            .with_permission_type(3)
    };
    let filter = |name: Option<&str>, pattern: i8| {
        DeleteAclsFilter::default()
            .with_resource_type_filter(2)
            .with_resource_name_filter(name.map(s))
            .with_pattern_type_filter(pattern)
            .with_host_filter(None)
            .with_operation(1)
            .with_permission_type(1)
    };
    for version in 1..=3i16 {
        let creations = repeat(&[
            (creation("", "", 3), 4),
            (creation("orders", "User:bob", 3), 3),
            (creation("x", "User:bob", 9), 3),
        ]);
        check(
            ApiKey::CreateAcls,
            version,
            RequestKind::CreateAcls(CreateAclsRequest::default().with_creations(creations)),
            |r| match r {
                RequestKind::CreateAcls(r) => r.creations.len(),
                _ => 0,
            },
        );
        let filters = repeat(&[
            (filter(None, 1), 3),
            (filter(Some("orders"), 3), 4),
            (filter(Some("x"), 9), 3),
        ]);
        check(
            ApiKey::DeleteAcls,
            version,
            RequestKind::DeleteAcls(DeleteAclsRequest::default().with_filters(filters)),
            |r| match r {
                RequestKind::DeleteAcls(r) => r.filters.len(),
                _ => 0,
            },
        );
    }
}

#[test]
fn repeated_config_keys_and_quota_ops_inside_one_element_are_dropped() {
    let configs = |keys: &[(&str, Option<&str>)]| -> Vec<AlterableConfig> {
        keys.iter()
            .map(|(k, v)| {
                AlterableConfig::default()
                    .with_name(s(k))
                    .with_config_operation(if v.is_some() { 0 } else { 1 })
                    .with_value(v.map(s))
            })
            .collect()
    };
    let repeated_key = repeat(&[
        (("retention.ms", Some("1")), 4),
        (("cleanup.policy", Some("compact")), 1),
        (("", None), 5),
    ]);
    let distinct_keys = [("retention.ms", Some("7")), ("segment.ms", None)];
    for version in 0..=1i16 {
        let resources = vec![
            AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_configs(configs(&repeated_key)),
            AlterConfigsResource::default()
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_configs(configs(&distinct_keys)),
        ];
        check(
            ApiKey::IncrementalAlterConfigs,
            version,
            RequestKind::IncrementalAlterConfigs(
                IncrementalAlterConfigsRequest::default().with_resources(resources.clone()),
            ),
            |r| match r {
                RequestKind::IncrementalAlterConfigs(r) => {
                    r.resources.iter().map(|r| r.configs.len()).sum()
                }
                _ => 0,
            },
        );
        // One resource alone, its configs repeating: decided as the whole.
        check(
            ApiKey::IncrementalAlterConfigs,
            version,
            RequestKind::IncrementalAlterConfigs(
                IncrementalAlterConfigsRequest::default().with_resources(resources[..1].to_vec()),
            ),
            |r| match r {
                RequestKind::IncrementalAlterConfigs(r) => {
                    r.resources.iter().map(|r| r.configs.len()).sum()
                }
                _ => 0,
            },
        );
    }
    for version in 0..=2i16 {
        use kafka_protocol::messages::alter_configs_request::{
            AlterConfigsResource as Legacy, AlterableConfig as LegacyConfig,
        };
        let configs = repeat(&[
            (
                LegacyConfig::default()
                    .with_name(s("retention.ms"))
                    .with_value(Some(s("1"))),
                3,
            ),
            (
                LegacyConfig::default().with_name(s("x")).with_value(None),
                1,
            ),
        ]);
        let resources = vec![Legacy::default()
            .with_resource_type(2)
            .with_resource_name(s("orders"))
            .with_configs(configs)];
        check(
            ApiKey::AlterConfigs,
            version,
            RequestKind::AlterConfigs(AlterConfigsRequest::default().with_resources(resources)),
            |r| match r {
                RequestKind::AlterConfigs(r) => r.resources.iter().map(|r| r.configs.len()).sum(),
                _ => 0,
            },
        );
    }
    for version in 0..=1i16 {
        let op = |key: &str, value: f64| OpData::default().with_key(s(key)).with_value(value);
        let entries = vec![
            EntryData::default()
                .with_entity(vec![EntityData::default()
                    .with_entity_type(s("user"))
                    .with_entity_name(Some(s("alice")))])
                .with_ops(repeat(&[
                    (op("", 1.0), 5),
                    (op("producer_byte_rate", 9.0), 1),
                ])),
            EntryData::default()
                .with_entity(vec![EntityData::default()
                    .with_entity_type(s("client-id"))
                    .with_entity_name(Some(s("c")))])
                .with_ops(repeat(&[(op("consumer_byte_rate", 2.0), 3)])),
        ];
        check(
            ApiKey::AlterClientQuotas,
            version,
            RequestKind::AlterClientQuotas(
                AlterClientQuotasRequest::default().with_entries(entries),
            ),
            |r| match r {
                RequestKind::AlterClientQuotas(r) => r.entries.iter().map(|e| e.ops.len()).sum(),
                _ => 0,
            },
        );
    }
}

/// The offset APIs answer every partition of every topic in request order (checked against
/// the real handlers end to end by `wire::t30_request_memory`); a decision of that shape, so
/// the expansion of a topic's own list is checked byte for byte at every version.
#[test]
fn partitions_repeating_inside_topics_are_answered_one_by_one() {
    use kafka_protocol::messages::offset_commit_request::{
        OffsetCommitRequestPartition, OffsetCommitRequestTopic,
    };
    use kafka_protocol::messages::offset_commit_response::{
        OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    };
    let decide = |request: &OffsetCommitRequest| {
        OffsetCommitResponse::default().with_topics(
            request
                .topics
                .iter()
                .map(|topic| {
                    OffsetCommitResponseTopic::default()
                        .with_name(topic.name.clone())
                        .with_partitions(
                            topic
                                .partitions
                                .iter()
                                .map(|p| {
                                    OffsetCommitResponsePartition::default()
                                        .with_partition_index(p.partition_index)
                                        .with_error_code(if p.committed_offset < 0 { 1 } else { 3 })
                                })
                                .collect(),
                        )
                })
                .collect(),
        )
    };
    let partition = |index: i32, offset: i64| {
        OffsetCommitRequestPartition::default()
            .with_partition_index(index)
            .with_committed_offset(offset)
    };
    let topic = |name: &str, partitions: Vec<OffsetCommitRequestPartition>| {
        OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(name)))
            .with_partitions(partitions)
    };
    for version in 3..=9i16 {
        let a = topic(
            "a",
            repeat(&[
                (partition(0, 5), 4),
                (partition(1, -1), 1),
                (partition(0, 5), 2),
            ]),
        );
        let b = topic("b", repeat(&[(partition(2, 7), 3)]));
        let c = topic("c", vec![partition(0, 1)]);
        for topics in [
            repeat(&[
                (a.clone(), 3),
                (b.clone(), 1),
                (c.clone(), 4),
                (a.clone(), 1),
            ]),
            vec![a.clone()],
        ] {
            let request = OffsetCommitRequest::default()
                .with_group_id(GroupId(s("g")))
                .with_generation_id_or_member_epoch(-1)
                .with_topics(topics);
            let frame = request_frame(
                ApiKey::OffsetCommit,
                version,
                &RequestKind::OffsetCommit(request.clone()),
            );
            let expected = response_frame(
                ApiKey::OffsetCommit,
                version,
                &ResponseKind::OffsetCommit(decide(&request)),
            );
            let reduction = reduce(ApiKey::OffsetCommit, version, &frame)
                .unwrap()
                .unwrap();
            let mut body = reduction.frame.clone();
            RequestHeader::decode(
                &mut body,
                ApiKey::OffsetCommit.request_header_version(version),
            )
            .unwrap();
            let reduced = OffsetCommitRequest::decode(&mut body, version).unwrap();
            let partitions: usize = reduced.topics.iter().map(|t| t.partitions.len()).sum();
            let all: usize = request.topics.iter().map(|t| t.partitions.len()).sum();
            assert!(partitions < all, "v{version}: third copies are dropped");
            let answer = response_frame(
                ApiKey::OffsetCommit,
                version,
                &ResponseKind::OffsetCommit(decide(&reduced)),
            );
            let header_version = ApiKey::OffsetCommit.response_header_version(version);
            let Ok(ResponseBytes::Expanded(expanded)) =
                reduction
                    .plan
                    .expect("a plan")
                    .expand(answer, header_version, version)
            else {
                panic!("v{version}: expanded");
            };
            assert_eq!(expanded.to_bytes(), expected, "OffsetCommit v{version}");
        }
    }
}

#[test]
fn create_topics_repeating_a_partition_assignment_fails_as_the_whole() {
    use kafka_protocol::messages::create_topics_request::{
        CreatableReplicaAssignment, CreatableTopic,
    };
    let assignment = |index: i32, brokers: &[i32]| {
        CreatableReplicaAssignment::default()
            .with_partition_index(index)
            .with_broker_ids(brokers.iter().map(|b| BrokerId(*b)).collect())
    };
    let manual = |name: &str, assignments: Vec<CreatableReplicaAssignment>| {
        CreatableTopic::default()
            .with_name(TopicName(s(name)))
            .with_num_partitions(-1)
            .with_replication_factor(-1)
            .with_assignments(assignments)
    };
    for version in 2..=7i16 {
        let topics = vec![
            manual(
                "a",
                repeat(&[(assignment(0, &[1]), 5), (assignment(1, &[1]), 1)]),
            ),
            manual("b", repeat(&[(assignment(0, &[]), 3)])),
            manual("c", vec![assignment(0, &[1]), assignment(1, &[1])]),
        ];
        let request = CreateTopicsRequest::default()
            .with_topics(topics)
            .with_timeout_ms(1000)
            .with_validate_only(true);
        check(
            ApiKey::CreateTopics,
            version,
            RequestKind::CreateTopics(request),
            |r| match r {
                RequestKind::CreateTopics(r) => r.topics.iter().map(|t| t.assignments.len()).sum(),
                _ => 0,
            },
        );
    }
}
