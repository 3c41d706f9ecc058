//! Fuzz target for what a client sends (issue #11): a byte stream cut into size-prefixed frames
//! by the front end's own frame reader, each frame's request header, and its body at the
//! header's (API, version) for every API and version in the routing table `APIS`. Valid
//! encodings of every served (API, version) pair are the seeds; each case mutates a few of them
//! (bit flips, overwritten or inserted bytes, cuts, huge length claims, a wrong size prefix)
//! into one stream. Decoding may fail, never panic; what decodes re-encodes to bytes that decode
//! to the same request (the node re-encodes requests it forwards to the controller), and is
//! then decided by the API's own pure decision (controller logic, or the handler's function
//! over an image) against a small image: hostile values reach the logic too, which must answer
//! rather than panic.
//!
//! A proptest property, so CI runs it as an ordinary test for a bounded number of cases;
//! `GREGOR_FUZZ_CASES=N` runs N cases (the long run in BENCHMARKS.md). Failures are shrunk and
//! kept under `proptest-regressions/` beside this file and replayed first on every run; extra
//! seed frames, hand-made or captured from clients, live in `tests/fuzz_corpus/` (one valid
//! size-prefixed frame per file, checked to decode). See
//! integration/README.md, "Fuzzing". `decode_garbage.rs` covers unstructured bodies and
//! length claims at every offset.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::path::Path;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use gregor_actors::controller::logic::client_quotas::alter_client_quotas;
use gregor_actors::controller::logic::configs::{alter_configs, incremental_alter_configs};
use gregor_actors::controller::logic::{
    create_partitions, create_topics, delete_topics, MutationContext, TopicDefaults, Unlimited,
};
use gregor_actors::handlers::configs::{
    describe_configs, list_config_resources, ConfigSupport, LogLevels,
};
use gregor_actors::handlers::{ApiSpec, APIS};
use gregor_node::network::{
    envelope, frame::read_frame, memory_pool::MemoryPool, metadata_chunks, raft_voter_versions,
    repeated,
};
use gregor_publishers::{MetadataDelta, MetadataImage, Provenance};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use proptest::collection::vec;
use proptest::prelude::*;
use rand::rngs::StdRng;
use rand::SeedableRng;

/// `socket.request.max.bytes`' default: frames up to it are read.
const MAX_FRAME: i32 = 104_857_600;

fn config() -> ProptestConfig {
    let cases = std::env::var("GREGOR_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4096);
    ProptestConfig {
        cases,
        max_shrink_iters: 2048,
        ..ProptestConfig::default()
    }
}

fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_owned())
}

/// Requests of `key` to start from: the default one, and one with every list filled where
/// that reaches more of the decoder.
fn requests(key: ApiKey) -> Vec<RequestKind> {
    use kafka_protocol::messages::create_topics_request::{
        CreatableReplicaAssignment, CreatableTopic, CreatableTopicConfig,
    };
    let mut out = vec![match key {
        ApiKey::Metadata => RequestKind::Metadata(MetadataRequest::default()),
        ApiKey::ApiVersions => RequestKind::ApiVersions(ApiVersionsRequest::default()),
        ApiKey::CreateTopics => RequestKind::CreateTopics(CreateTopicsRequest::default()),
        ApiKey::DeleteTopics => RequestKind::DeleteTopics(DeleteTopicsRequest::default()),
        ApiKey::CreatePartitions => {
            RequestKind::CreatePartitions(CreatePartitionsRequest::default())
        }
        ApiKey::DescribeCluster => RequestKind::DescribeCluster(DescribeClusterRequest::default()),
        ApiKey::DescribeQuorum => RequestKind::DescribeQuorum(DescribeQuorumRequest::default()),
        ApiKey::AddRaftVoter => RequestKind::AddRaftVoter(AddRaftVoterRequest::default()),
        ApiKey::RemoveRaftVoter => RequestKind::RemoveRaftVoter(RemoveRaftVoterRequest::default()),
        ApiKey::DescribeConfigs => RequestKind::DescribeConfigs(DescribeConfigsRequest::default()),
        ApiKey::AlterConfigs => RequestKind::AlterConfigs(AlterConfigsRequest::default()),
        ApiKey::IncrementalAlterConfigs => {
            RequestKind::IncrementalAlterConfigs(IncrementalAlterConfigsRequest::default())
        }
        ApiKey::DescribeClientQuotas => {
            RequestKind::DescribeClientQuotas(DescribeClientQuotasRequest::default())
        }
        ApiKey::AlterClientQuotas => {
            RequestKind::AlterClientQuotas(AlterClientQuotasRequest::default())
        }
        ApiKey::ListConfigResources => {
            RequestKind::ListConfigResources(ListConfigResourcesRequest::default())
        }
        ApiKey::Produce => RequestKind::Produce(ProduceRequest::default()),
        ApiKey::Fetch => RequestKind::Fetch(FetchRequest::default()),
        ApiKey::ListOffsets => RequestKind::ListOffsets(ListOffsetsRequest::default()),
        ApiKey::DeleteRecords => {
            RequestKind::DeleteRecords(kafka_protocol::messages::DeleteRecordsRequest::default())
        }
        ApiKey::DescribeLogDirs => {
            RequestKind::DescribeLogDirs(kafka_protocol::messages::DescribeLogDirsRequest::default())
        }
        ApiKey::DescribeProducers => RequestKind::DescribeProducers(
            kafka_protocol::messages::DescribeProducersRequest::default(),
        ),
        ApiKey::InitProducerId => RequestKind::InitProducerId(InitProducerIdRequest::default()),
        ApiKey::BrokerHeartbeat => RequestKind::BrokerHeartbeat(
            kafka_protocol::messages::BrokerHeartbeatRequest::default()
                .with_broker_id(BrokerId(1))
                .with_broker_epoch(1)
                .with_want_shut_down(true),
        ),
        ApiKey::AlterPartition => {
            RequestKind::AlterPartition(kafka_protocol::messages::AlterPartitionRequest::default())
        }
        ApiKey::OffsetForLeaderEpoch => RequestKind::OffsetForLeaderEpoch(
            kafka_protocol::messages::OffsetForLeaderEpochRequest::default(),
        ),
        ApiKey::AllocateProducerIds => {
            RequestKind::AllocateProducerIds(AllocateProducerIdsRequest::default())
        }
        ApiKey::UnregisterBroker => RequestKind::UnregisterBroker(
            UnregisterBrokerRequest::default().with_broker_id(BrokerId(1)),
        ),
        ApiKey::UpdateFeatures => RequestKind::UpdateFeatures(
            kafka_protocol::messages::UpdateFeaturesRequest::default().with_feature_updates(vec![
                kafka_protocol::messages::update_features_request::FeatureUpdateKey::default()
                    .with_feature(s("metadata.version"))
                    .with_max_version_level(24),
            ]),
        ),
        ApiKey::ElectLeaders => RequestKind::ElectLeaders(
            kafka_protocol::messages::ElectLeadersRequest::default()
                .with_topic_partitions(Some(vec![
                    kafka_protocol::messages::elect_leaders_request::TopicPartitions::default()
                        .with_topic(TopicName(s("t")))
                        .with_partitions(vec![0, 1]),
                ])),
        ),
        ApiKey::AlterPartitionReassignments => RequestKind::AlterPartitionReassignments(
            kafka_protocol::messages::AlterPartitionReassignmentsRequest::default().with_topics(
                vec![kafka_protocol::messages::alter_partition_reassignments_request::ReassignableTopic::default()
                    .with_name(TopicName(s("orders")))
                    .with_partitions(vec![
                        kafka_protocol::messages::alter_partition_reassignments_request::ReassignablePartition::default()
                            .with_partition_index(0)
                            .with_replicas(Some(vec![BrokerId(1)])),
                        kafka_protocol::messages::alter_partition_reassignments_request::ReassignablePartition::default()
                            .with_partition_index(1),
                    ])],
            ),
        ),
        ApiKey::ListPartitionReassignments => RequestKind::ListPartitionReassignments(
            kafka_protocol::messages::ListPartitionReassignmentsRequest::default().with_topics(
                Some(vec![kafka_protocol::messages::list_partition_reassignments_request::ListPartitionReassignmentsTopics::default()
                    .with_name(TopicName(s("orders")))
                    .with_partition_indexes(vec![0, 1])]),
            ),
        ),
        ApiKey::FindCoordinator => {
            RequestKind::FindCoordinator(kafka_protocol::messages::FindCoordinatorRequest::default())
        }
        ApiKey::JoinGroup => {
            RequestKind::JoinGroup(kafka_protocol::messages::JoinGroupRequest::default())
        }
        ApiKey::SyncGroup => {
            RequestKind::SyncGroup(kafka_protocol::messages::SyncGroupRequest::default())
        }
        ApiKey::Heartbeat => {
            RequestKind::Heartbeat(kafka_protocol::messages::HeartbeatRequest::default())
        }
        ApiKey::LeaveGroup => {
            RequestKind::LeaveGroup(kafka_protocol::messages::LeaveGroupRequest::default())
        }
        ApiKey::OffsetCommit => {
            RequestKind::OffsetCommit(kafka_protocol::messages::OffsetCommitRequest::default())
        }
        ApiKey::OffsetFetch => RequestKind::OffsetFetch(
            kafka_protocol::messages::OffsetFetchRequest::default().with_topics(Some(Vec::new())),
        ),
        ApiKey::ListGroups => {
            RequestKind::ListGroups(kafka_protocol::messages::ListGroupsRequest::default())
        }
        ApiKey::DescribeGroups => {
            RequestKind::DescribeGroups(kafka_protocol::messages::DescribeGroupsRequest::default())
        }
        ApiKey::DeleteGroups => {
            RequestKind::DeleteGroups(kafka_protocol::messages::DeleteGroupsRequest::default())
        }
        ApiKey::OffsetDelete => {
            RequestKind::OffsetDelete(kafka_protocol::messages::OffsetDeleteRequest::default())
        }
        ApiKey::ConsumerGroupHeartbeat => RequestKind::ConsumerGroupHeartbeat(
            kafka_protocol::messages::ConsumerGroupHeartbeatRequest::default()
                .with_group_id(kafka_protocol::messages::GroupId(StrBytes::from_static_str(
                    "fuzz-group",
                )))
                .with_member_id(StrBytes::from_static_str("fuzz-member"))
                .with_rebalance_timeout_ms(30_000)
                .with_subscribed_topic_names(Some(Vec::new()))
                .with_topic_partitions(Some(Vec::new())),
        ),
        ApiKey::ConsumerGroupDescribe => RequestKind::ConsumerGroupDescribe(
            kafka_protocol::messages::ConsumerGroupDescribeRequest::default().with_group_ids(
                vec![kafka_protocol::messages::GroupId(StrBytes::from_static_str(
                    "fuzz-group",
                ))],
            ),
        ),
        ApiKey::DescribeUserScramCredentials => RequestKind::DescribeUserScramCredentials(
            kafka_protocol::messages::DescribeUserScramCredentialsRequest::default(),
        ),
        ApiKey::AlterUserScramCredentials => RequestKind::AlterUserScramCredentials(
            kafka_protocol::messages::AlterUserScramCredentialsRequest::default().with_upsertions(
                vec![kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                    .with_name(s("alice"))
                    .with_mechanism(2)
                    .with_iterations(8192)
                    .with_salt(Bytes::from_static(b"salt"))
                    .with_salted_password(Bytes::from_static(&[7; 64]))],
            ),
        ),
        ApiKey::DescribeAcls => RequestKind::DescribeAcls(
            kafka_protocol::messages::DescribeAclsRequest::default()
                .with_resource_type_filter(1)
                .with_resource_name_filter(Some(s("orders")))
                .with_pattern_type_filter(2)
                .with_principal_filter(Some(s("User:alice")))
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1),
        ),
        ApiKey::CreateAcls => RequestKind::CreateAcls(
            kafka_protocol::messages::CreateAclsRequest::default().with_creations(vec![
                kafka_protocol::messages::create_acls_request::AclCreation::default()
                    .with_resource_type(2)
                    .with_resource_name(s("orders-"))
                    .with_resource_pattern_type(4)
                    .with_principal(s("User:alice"))
                    .with_host(s("*"))
                    .with_operation(3)
                    .with_permission_type(3),
            ]),
        ),
        ApiKey::DeleteAcls => RequestKind::DeleteAcls(
            kafka_protocol::messages::DeleteAclsRequest::default().with_filters(vec![
                kafka_protocol::messages::delete_acls_request::DeleteAclsFilter::default()
                    .with_resource_type_filter(2)
                    .with_resource_name_filter(None)
                    .with_pattern_type_filter(1)
                    .with_principal_filter(Some(s("User:alice")))
                    .with_host_filter(Some(s("*")))
                    .with_operation(3)
                    .with_permission_type(1),
            ]),
        ),
        ApiKey::DescribeTopicPartitions => RequestKind::DescribeTopicPartitions(
            kafka_protocol::messages::DescribeTopicPartitionsRequest::default()
                .with_topics(vec![
                    kafka_protocol::messages::describe_topic_partitions_request::TopicRequest::default()
                        .with_name(TopicName(s("orders"))),
                ])
                .with_response_partition_limit(1)
                .with_cursor(Some(
                    kafka_protocol::messages::describe_topic_partitions_request::Cursor::default()
                        .with_topic_name(TopicName(s("orders")))
                        .with_partition_index(1),
                )),
        ),
        ApiKey::SaslHandshake => RequestKind::SaslHandshake(
            kafka_protocol::messages::SaslHandshakeRequest::default().with_mechanism(s("PLAIN")),
        ),
        ApiKey::SaslAuthenticate => RequestKind::SaslAuthenticate(
            kafka_protocol::messages::SaslAuthenticateRequest::default()
                .with_auth_bytes(Bytes::from_static(b"\0alice\0secret")),
        ),
        // A broker's envelope: User:alice from 127.0.0.1 creating a topic.
        ApiKey::Envelope => {
            let inner = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(s("t")))
                .with_num_partitions(1)
                .with_replication_factor(1)]);
            let mut data = BytesMut::new();
            RequestHeader::default()
                .with_request_api_key(ApiKey::CreateTopics as i16)
                .with_request_api_version(7)
                .with_correlation_id(1)
                .encode(&mut data, ApiKey::CreateTopics.request_header_version(7))
                .unwrap();
            inner.encode(&mut data, 7).unwrap();
            let alice = gregor_actors::context::Principal {
                principal_type: "User".into(),
                name: "alice".into(),
            };
            RequestKind::Envelope(
                EnvelopeRequest::default()
                    .with_request_data(data.freeze())
                    .with_request_principal(Some(envelope::encode_principal(&alice).unwrap()))
                    .with_client_host_address(Bytes::from_static(&[127, 0, 0, 1])),
            )
        }
        other => panic!("{other:?} is served but has no seed here: add one"),
    }];
    match key {
        ApiKey::Produce => out.push(RequestKind::Produce(
            ProduceRequest::default()
                .with_acks(-1)
                .with_topic_data(vec![produce_request::TopicProduceData::default()
                    .with_name(TopicName(s("t")))
                    .with_partition_data(vec![
                        produce_request::PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(Bytes::from_static(&[0u8; 70]))),
                    ])]),
        )),
        ApiKey::AlterPartition => {
            use kafka_protocol::messages::alter_partition_request::{
                BrokerState, PartitionData, TopicData,
            };
            out.push(RequestKind::AlterPartition(
                kafka_protocol::messages::AlterPartitionRequest::default()
                    .with_broker_id(BrokerId(1))
                    .with_broker_epoch(1)
                    .with_topics(vec![TopicData::default()
                        .with_topic_id(uuid::Uuid::from_u128(1))
                        .with_partitions(vec![PartitionData::default()
                            .with_partition_index(0)
                            .with_leader_epoch(0)
                            .with_partition_epoch(0)
                            .with_new_isr_with_epochs(vec![BrokerState::default()
                                .with_broker_id(BrokerId(1))
                                .with_broker_epoch(1)])])]),
            ))
        }
        ApiKey::OffsetForLeaderEpoch => out.push(RequestKind::OffsetForLeaderEpoch(
            kafka_protocol::messages::OffsetForLeaderEpochRequest::default().with_topics(vec![
                kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                    .with_topic(TopicName(s("t")))
                    .with_partitions(vec![
                        kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                            .with_partition(0)
                            .with_current_leader_epoch(3)
                            .with_leader_epoch(2),
                    ]),
            ]),
        )),
        ApiKey::Fetch => out.push(RequestKind::Fetch(FetchRequest::default().with_topics(
            vec![fetch_request::FetchTopic::default()
                .with_topic(TopicName(s("t")))
                .with_partitions(vec![fetch_request::FetchPartition::default()
                    .with_partition(0)
                    .with_fetch_offset(5)])],
        ))),
        ApiKey::DeleteRecords => out.push(RequestKind::DeleteRecords(
            kafka_protocol::messages::DeleteRecordsRequest::default().with_topics(vec![
                kafka_protocol::messages::delete_records_request::DeleteRecordsTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![
                        kafka_protocol::messages::delete_records_request::DeleteRecordsPartition::default()
                            .with_partition_index(0)
                            .with_offset(-1),
                    ]),
            ]),
        )),
        ApiKey::DescribeLogDirs => out.push(RequestKind::DescribeLogDirs(
            kafka_protocol::messages::DescribeLogDirsRequest::default().with_topics(Some(vec![
                kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic::default()
                    .with_topic(TopicName(s("t")))
                    .with_partitions(vec![0, 1]),
            ])),
        )),
        ApiKey::DescribeProducers => out.push(RequestKind::DescribeProducers(
            kafka_protocol::messages::DescribeProducersRequest::default().with_topics(vec![
                kafka_protocol::messages::describe_producers_request::TopicRequest::default()
                    .with_name(TopicName(s("t")))
                    .with_partition_indexes(vec![0]),
            ]),
        )),
        ApiKey::Metadata => out.push(RequestKind::Metadata(
            MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(TopicName(s("orders"))))])),
        )),
        ApiKey::CreateTopics => out.push(RequestKind::CreateTopics(
            CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(s("orders")))
                .with_num_partitions(-1)
                .with_replication_factor(-1)
                .with_assignments(vec![CreatableReplicaAssignment::default()
                    .with_partition_index(0)
                    .with_broker_ids(vec![BrokerId(1), BrokerId(2)])])
                .with_configs(vec![CreatableTopicConfig::default()
                    .with_name(s("retention.ms"))
                    .with_value(Some(s("1000")))])]),
        )),
        ApiKey::IncrementalAlterConfigs => out.push(RequestKind::IncrementalAlterConfigs(
            IncrementalAlterConfigsRequest::default().with_resources(vec![
                incremental_alter_configs_request::AlterConfigsResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s("orders"))
                    .with_configs(vec![
                        incremental_alter_configs_request::AlterableConfig::default()
                            .with_name(s("cleanup.policy"))
                            .with_config_operation(2)
                            .with_value(Some(s("compact"))),
                    ]),
            ]),
        )),
        ApiKey::AlterClientQuotas => out.push(RequestKind::AlterClientQuotas(
            AlterClientQuotasRequest::default().with_entries(vec![
                alter_client_quotas_request::EntryData::default()
                    .with_entity(vec![alter_client_quotas_request::EntityData::default()
                        .with_entity_type(s("user"))
                        .with_entity_name(Some(s("alice")))])
                    .with_ops(vec![alter_client_quotas_request::OpData::default()
                        .with_key(s("producer_byte_rate"))
                        .with_value(1024.0)]),
            ]),
        )),
        ApiKey::DescribeConfigs => out.push(RequestKind::DescribeConfigs(
            DescribeConfigsRequest::default().with_resources(vec![
                describe_configs_request::DescribeConfigsResource::default()
                    .with_resource_type(4)
                    .with_resource_name(s("1"))
                    .with_configuration_keys(Some(vec![s("log.retention.ms")])),
            ]),
        )),
        _ => {}
    }
    out
}

/// `size | header | body` of `request` at `version`, and whether it is valid. Versions the
/// crate cannot encode (the newer AddRaftVoter/RemoveRaftVoter layouts) reuse the v0 body
/// under their own header, which need not decode.
fn frame(spec: &ApiSpec, version: i16, request: &RequestKind) -> (Vec<u8>, bool) {
    let header_version = spec.key.request_header_version(version);
    let mut out = BytesMut::new();
    out.put_i32(0);
    RequestHeader::default()
        .with_request_api_key(spec.key as i16)
        .with_request_api_version(version)
        .with_correlation_id(7)
        .with_client_id(Some(s("fuzz")))
        .encode(&mut out, header_version)
        .unwrap();
    let body_start = out.len();
    let valid = request.encode(&mut out, version).is_ok();
    if !valid {
        // A version the crate cannot encode (the newer voter layouts, Produce v0-v2): the body
        // of the oldest version it can, under this version's header.
        out.truncate(body_start);
        if request.encode(&mut out, 0).is_err() {
            out.truncate(body_start);
            request.encode(&mut out, 3).unwrap();
        }
    }
    let size = i32::try_from(out.len() - 4).unwrap();
    out[..4].copy_from_slice(&size.to_be_bytes());
    (out.to_vec(), valid)
}

/// Every seed frame with whether it must decode: each request of every served (API, version),
/// then the kept corpus.
fn seeds() -> Vec<(Vec<u8>, bool)> {
    let mut seeds = Vec::new();
    for spec in APIS {
        for version in spec.versions.min..=spec.versions.max {
            for request in requests(spec.key) {
                seeds.push(frame(spec, version, &request));
            }
        }
    }
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_corpus");
    let mut files: Vec<_> = std::fs::read_dir(&corpus)
        .map(|dir| dir.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.sort();
    for file in files {
        seeds.push((std::fs::read(&file).unwrap(), true));
    }
    seeds
}

/// Decodes one frame as the front end does: API key and version, the routing table, the
/// header at that API's header version, the body when the version is served. True when the
/// body decoded.
fn decode_frame(mut frame: Bytes) -> bool {
    if frame.len() < 4 {
        return false;
    }
    let key = i16::from_be_bytes([frame[0], frame[1]]);
    let version = i16::from_be_bytes([frame[2], frame[3]]);
    let Ok(key) = ApiKey::try_from(key) else {
        return false;
    };
    let Some(spec) = APIS.iter().find(|spec| spec.key == key) else {
        return false;
    };
    let reduction = repeated::reduce(key, version, &frame);
    if RequestHeader::decode(&mut frame, key.request_header_version(version)).is_err() {
        return false;
    }
    if version < spec.versions.min || version > spec.versions.max {
        return false;
    }
    // A list repeating elements is reduced first (network/repeated.rs): a frame the crate
    // decodes must reduce, the reduced frame must decode, and expanding hostile bytes as if
    // they were the answer fails cleanly.
    // A Metadata request naming more than metadata_chunks::CHUNK topics is scanned instead.
    if key == ApiKey::Metadata {
        if let Some(scanned) = metadata_chunks::scan(&frame, version) {
            let decodes = RequestKind::decode(key, &mut frame.clone(), version).is_ok();
            match scanned {
                Ok(scanned) => {
                    scanned.distinct_topics().unwrap();
                }
                // The crate reads a null name before v10 too; Kafka (and dedup_decode.rs)
                // refuse it, as the field is not nullable there.
                Err(e) => assert!(
                    !decodes || e.to_string().contains("must not be null"),
                    "Metadata v{version}: the crate decodes a frame the scan refuses: {e}"
                ),
            }
        }
    }
    match reduction {
        Some(Ok(reduction)) => {
            let mut body = reduction.frame.clone();
            let reduced = RequestHeader::decode(&mut body, key.request_header_version(version))
                .and_then(|_| RequestKind::decode(key, &mut body, version));
            if RequestKind::decode(key, &mut frame.clone(), version).is_ok() {
                reduced
                    .unwrap_or_else(|e| panic!("{key:?} v{version} reduced does not decode: {e}"));
            }
            if let Some(plan) = reduction.plan {
                let _ = plan.expand(frame.clone(), 1, version);
                let _ = plan.expand(frame.clone(), 0, version);
            }
        }
        Some(Err(_)) => assert!(
            RequestKind::decode(key, &mut frame.clone(), version).is_err(),
            "{key:?} v{version}: the crate decodes a frame the reduction refuses"
        ),
        None => {}
    }
    let decoded = match raft_voter_versions::decode(key, &mut frame, version) {
        Some(decoded) => decoded,
        None => RequestKind::decode(key, &mut frame, version),
    };
    let Ok(request) = decoded else {
        return false;
    };
    // Re-encoding what decoded (the forwarding path) must work, and be stable.
    let mut first = BytesMut::new();
    if request.encode(&mut first, version).is_err() {
        return true;
    }
    let again =
        RequestKind::decode(key, &mut first.clone().freeze(), version).unwrap_or_else(|e| {
            panic!("{key:?} v{version} re-encoded does not decode: {e}; decoded {request:?}")
        });
    let mut second = BytesMut::new();
    again.encode(&mut second, version).unwrap();
    assert_eq!(first, second, "{key:?} v{version} does not round-trip");
    // An envelope is opened as the controller opens it: its principal, its address, and the
    // request inside, decoded like any frame.
    if let RequestKind::Envelope(envelope) = &request {
        let _ = envelope::decode_principal(envelope.request_principal.as_deref().unwrap_or(&[]));
        let _ = envelope::decode_address(&envelope.client_host_address);
        decode_frame(envelope.request_data.clone());
    }
    decide(request, version);
    true
}

/// One broker (1, unfenced) and topic `orders` with two partitions.
fn small_image() -> MetadataImage {
    use gregor_publishers::records::*;
    let topic_id = uuid::Uuid::from_u128(1);
    let partition = |partition_id| {
        MetadataRecord::Partition(PartitionRecord {
            directories: vec![uuid::Uuid::nil()],
            ..PartitionRecord::in_sync(topic_id, partition_id, vec![1])
        })
    };
    let records = [
        MetadataRecord::RegisterBroker(RegisterBrokerRecord {
            broker_id: 1,
            incarnation_id: uuid::Uuid::from_u128(9),
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
        MetadataRecord::Topic(TopicRecord {
            name: "orders".into(),
            topic_id,
        }),
        partition(0),
        partition(1),
    ];
    let mut delta = MetadataDelta::new(Arc::new(MetadataImage::empty()));
    delta.replay_all(&records).unwrap();
    delta.apply(Provenance::default())
}

thread_local! {
    static IMAGE: MetadataImage = small_image();
}

/// Runs the decision of a decoded request against the small image.
fn decide(request: RequestKind, version: i16) {
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
    IMAGE.with(|image| match request {
        RequestKind::CreateTopics(r) => {
            create_topics(image, &r, version, &TopicDefaults::default(), &mut ctx);
        }
        RequestKind::DeleteTopics(r) => {
            delete_topics(image, &r, version, true, &mut ctx);
        }
        RequestKind::CreatePartitions(r) => {
            create_partitions(image, &r, version, &mut ctx);
        }
        RequestKind::AlterClientQuotas(r) => {
            alter_client_quotas(&image.client_quotas, &r);
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            incremental_alter_configs(image, &r, Some(1), &Default::default());
        }
        RequestKind::AlterConfigs(r) => {
            alter_configs(image, &r, Some(1), &Default::default());
        }
        RequestKind::DescribeConfigs(r) => {
            describe_configs(image, &r, 1, &support);
        }
        RequestKind::ListConfigResources(r) => {
            list_config_resources(image, version, &r.resource_types, "PLAINTEXT");
        }
        RequestKind::UnregisterBroker(r) => {
            gregor_actors::fencing::unregister_broker(image, r.broker_id.0);
        }
        RequestKind::BrokerHeartbeat(r) => {
            let _ =
                gregor_actors::fencing::controlled_shutdown(image, r.broker_id.0, r.broker_epoch);
        }
        RequestKind::CreateAcls(r) => {
            gregor_actors::controller::logic::acls::create_acls(&image.acls, &r, ctx.rng);
        }
        RequestKind::DeleteAcls(r) => {
            gregor_actors::controller::logic::acls::delete_acls(&image.acls, &r);
        }
        RequestKind::AlterPartition(r) => {
            gregor_actors::controller::logic::alter_partition::alter_partition(image, &r, version);
        }
        RequestKind::ElectLeaders(r) => {
            gregor_actors::controller::logic::election::elect_leaders(image, &r, version);
        }
        RequestKind::UpdateFeatures(r) => {
            use gregor_actors::controller::logic::features::{update_features, QuorumView};
            let quorum = QuorumView {
                local_id: 1,
                voters: &[1, 2],
            };
            update_features(image, quorum, &r, version);
        }
        RequestKind::AlterPartitionReassignments(r) => {
            gregor_actors::controller::logic::reassignment::alter_partition_reassignments(
                image,
                &r,
                version,
                &Default::default(),
            );
        }
        RequestKind::ListPartitionReassignments(r) => {
            gregor_actors::controller::logic::reassignment::list_partition_reassignments(image, &r);
        }
        _ => {}
    });
}

/// No loggers: BROKER_LOGGER resources are applied by the handler, not decided here.
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

/// Cuts `stream` into frames with the front end's reader and decodes each; how many decoded.
fn serve_stream(stream: &[u8]) -> usize {
    futures::executor::block_on(async {
        let mut reader = stream;
        let mut buffer = BytesMut::new();
        let unbounded = MemoryPool::new(-1);
        let mut decoded = 0;
        while let Ok((frame, _reservation)) =
            read_frame(&mut reader, &mut buffer, MAX_FRAME, &unbounded).await
        {
            decoded += usize::from(decode_frame(frame));
        }
        decoded
    })
}

#[derive(Clone, Debug)]
enum Mutation {
    Flip {
        at: usize,
        bit: u8,
    },
    Set {
        at: usize,
        byte: u8,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    Remove {
        at: usize,
        len: usize,
    },
    Truncate {
        at: usize,
    },
    /// A length claim far beyond the frame: int32, int16 or uvarint, where arrays and strings
    /// are read.
    HugeLength {
        at: usize,
        form: u8,
    },
    /// A size prefix that disagrees with the frame.
    Resize {
        delta: i32,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        3 => (any::<usize>(), 0..8_u8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        3 => (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at, byte }),
        1 => (any::<usize>(), vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        1 => (any::<usize>(), 1..16_usize).prop_map(|(at, len)| Mutation::Remove { at, len }),
        1 => any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        2 => (any::<usize>(), 0..3_u8).prop_map(|(at, form)| Mutation::HugeLength { at, form }),
        1 => (-8..8_i32).prop_map(|delta| Mutation::Resize { delta }),
    ]
}

/// Applies `mutations` to one frame's bytes after its size prefix, then (unless a mutation
/// resized it) sets the prefix to the new length.
fn mutate(frame: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut body = frame[4..].to_vec();
    let mut delta = 0_i32;
    for mutation in mutations {
        let len = body.len();
        let pick = |at: usize| if len == 0 { 0 } else { at % len };
        let insert_at = |at: usize| at % (len + 1);
        match mutation {
            Mutation::Flip { at, bit } if len > 0 => body[pick(*at)] ^= 1 << bit,
            Mutation::Set { at, byte } if len > 0 => body[pick(*at)] = *byte,
            Mutation::Insert { at, bytes } => {
                let at = insert_at(*at);
                body.splice(at..at, bytes.iter().copied());
            }
            Mutation::Remove { at, len: count } if len > 0 => {
                let at = pick(*at);
                body.drain(at..(at + count).min(len));
            }
            Mutation::Truncate { at } => body.truncate(pick(*at)),
            Mutation::HugeLength { at, form } => {
                let claim: &[u8] = match form {
                    0 => &[0x7f, 0xff, 0xff, 0xff],
                    1 => &[0x7f, 0xff],
                    _ => &[0xff, 0xff, 0xff, 0xff, 0x0f],
                };
                let at = pick(*at);
                let end = (at + claim.len()).min(len);
                body.splice(at..end, claim.iter().copied());
            }
            Mutation::Resize { delta: d } => delta = delta.saturating_add(*d),
            _ => {}
        }
    }
    let size = i32::try_from(body.len())
        .unwrap_or(i32::MAX)
        .saturating_add(delta);
    let mut out = size.to_be_bytes().to_vec();
    out.extend_from_slice(&body);
    out
}

#[test]
fn every_seed_frame_decodes() {
    // The harness starts from real requests of every served (API, version).
    let seeds = seeds();
    assert!(seeds.len() >= APIS.len());
    for (seed, valid) in &seeds {
        let decoded = serve_stream(seed);
        if *valid {
            assert_eq!(decoded, 1, "seed {seed:?} does not decode");
        }
    }
}

proptest! {
    #![proptest_config(config())]

    /// A stream of one to four mutated seed frames.
    #[test]
    fn mutated_request_streams_never_panic(
        frames in vec((any::<prop::sample::Index>(), vec(mutation(), 0..5)), 1..4),
    ) {
        let seeds = SEEDS.with(|seeds| seeds.clone());
        let mut stream = Vec::new();
        for (index, mutations) in &frames {
            stream.extend(mutate(&seeds[index.index(seeds.len())].0, mutations));
        }
        serve_stream(&stream);
    }
}

thread_local! {
    static SEEDS: std::rc::Rc<Vec<(Vec<u8>, bool)>> = std::rc::Rc::new(seeds());
}
