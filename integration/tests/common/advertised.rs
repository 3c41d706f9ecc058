//! A valid request for every (API, version) pair a node advertises, sent and checked: the
//! answer must come back at that version (same correlation id, the header version Kafka uses,
//! a body that decodes strictly). Shared by the `apis` suite (a combined node) and the `quorum`
//! suite (a broker that forwards to the active controller), which include it by path.

use gregor_integration::client::{encode_request, Closed, KafkaConn};
use gregor_node::network::raft_voter_versions::{AddRaftVoterRequestV, RemoveRaftVoterRequestV};
use kafka_protocol::messages::add_raft_voter_request::Listener;
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialDeletion;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    AddRaftVoterRequest, AlterClientQuotasRequest, AlterConfigsRequest,
    AlterUserScramCredentialsRequest, ApiKey, ApiVersionsRequest, BrokerId,
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeClientQuotasRequest,
    DescribeClusterRequest, DescribeConfigsRequest, DescribeQuorumRequest,
    DescribeUserScramCredentialsRequest, EnvelopeRequest, FetchRequest, GroupId,
    IncrementalAlterConfigsRequest, InitProducerIdRequest, ListConfigResourcesRequest,
    ListOffsetsRequest, MetadataRequest, ProduceRequest, RemoveRaftVoterRequest,
    SaslAuthenticateRequest, SaslHandshakeRequest, TopicName, UnregisterBrokerRequest,
};
use kafka_protocol::protocol::{Request, StrBytes};

/// Sends `request` at `version` and reports any failure to answer it at that version; a
/// closed connection is replaced so the next pair gets a fresh one.
async fn answers<R: Request>(
    conn: &mut KafkaConn,
    addr: &str,
    request: &R,
    version: i16,
    f: &mut Vec<String>,
    what: &str,
) {
    if let Err(error) = conn.send(request, version).await {
        f.push(format!("{what} v{version}: {error:#}"));
        let client_id = conn.client_id().map(str::to_owned);
        *conn = KafkaConn::connect(addr).await.unwrap();
        conn.set_client_id(client_id.as_deref());
    }
}

/// Sends a Produce frame of `version` (v0-v2, which Kafka advertises but refuses by closing the
/// connection; the crate cannot encode them, so the body is v3's, which the node must not read)
/// and reports an answer; the closed connection is replaced.
async fn produce_closes(
    conn: &mut KafkaConn,
    addr: &str,
    request: &ProduceRequest,
    version: i16,
    f: &mut Vec<String>,
    what: &str,
) {
    let mut frame = encode_request(request, 3, 1, Some("every-version")).unwrap();
    // The header's api version sits after the 4-byte size and the 2-byte api key.
    frame[6..8].copy_from_slice(&version.to_be_bytes());
    conn.write_raw(&frame).await.unwrap();
    match conn.wait_closed(std::time::Duration::from_secs(10)).await {
        Closed::Silently => {}
        other => f.push(format!(
            "{what} v{version}: {other:?}, but Kafka closes the connection"
        )),
    }
    let client_id = conn.client_id().map(str::to_owned);
    *conn = KafkaConn::connect(addr).await.unwrap();
    conn.set_client_id(client_id.as_deref());
}

fn str(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// A valid request of `key` at `version` (one that changes nothing: validate-only creates,
/// empty lists, a wrong cluster id for the voter changes), sent and checked.
async fn send_valid(
    conn: &mut KafkaConn,
    addr: &str,
    key: ApiKey,
    version: i16,
    f: &mut Vec<String>,
) {
    let what = format!("{key:?} on {addr} (client id {:?})", conn.client_id());
    let f_what = what.as_str();
    match key {
        ApiKey::Metadata => {
            let topics = vec![
                MetadataRequestTopic::default().with_name(Some(TopicName(str("absent-topic"))))
            ];
            // Auto-creation is a v4+ field; older versions always ask for it.
            let request = MetadataRequest::default()
                .with_topics(Some(topics))
                .with_allow_auto_topic_creation(version < 4);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::ApiVersions => {
            let request = ApiVersionsRequest::default()
                .with_client_software_name(str("gregor-integration"))
                .with_client_software_version(str("0.1.0"));
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::CreateTopics => {
            let request = CreateTopicsRequest::default()
                .with_topics(vec![CreatableTopic::default()
                    .with_name(TopicName(str("every-version")))
                    .with_num_partitions(1)
                    .with_replication_factor(1)])
                .with_timeout_ms(30_000)
                .with_validate_only(true);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::DeleteTopics => {
            let request = DeleteTopicsRequest::default().with_timeout_ms(30_000);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::CreatePartitions => {
            let request = CreatePartitionsRequest::default()
                .with_timeout_ms(30_000)
                .with_validate_only(true);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::DescribeCluster => {
            answers(
                conn,
                addr,
                &DescribeClusterRequest::default(),
                version,
                f,
                f_what,
            )
            .await;
        }
        ApiKey::DescribeQuorum => {
            let request = DescribeQuorumRequest::default().with_topics(vec![TopicData::default()
                .with_topic_name(TopicName(str("__cluster_metadata")))
                .with_partitions(vec![PartitionData::default().with_partition_index(0)])]);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::AddRaftVoter => {
            let request = AddRaftVoterRequestV {
                request: AddRaftVoterRequest::default()
                    .with_cluster_id(Some(str("not-this-cluster")))
                    .with_timeout_ms(30_000)
                    .with_voter_id(99)
                    .with_voter_directory_id(uuid::Uuid::from_u128(7))
                    .with_listeners(vec![Listener::default()
                        .with_name(str("CONTROLLER"))
                        .with_host(str("127.0.0.1"))
                        .with_port(1)]),
                ack_when_committed: true,
            };
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::RemoveRaftVoter => {
            let request = RemoveRaftVoterRequestV(
                RemoveRaftVoterRequest::default()
                    .with_cluster_id(Some(str("not-this-cluster")))
                    .with_voter_id(99)
                    .with_voter_directory_id(uuid::Uuid::from_u128(7)),
            );
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::Produce => {
            // acks=1 with no partitions: an empty answer, nothing written.
            let request = ProduceRequest::default()
                .with_acks(1)
                .with_timeout_ms(30_000);
            if version < 3 {
                // Advertised from v0 so that librdkafka compresses (KAFKA-18659); a real v0-v2
                // request closes the connection, as in Kafka 4.
                produce_closes(conn, addr, &request, version, f, f_what).await;
            } else {
                answers(conn, addr, &request, version, f, f_what).await;
            }
        }
        ApiKey::Fetch => {
            let request = FetchRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_max_wait_ms(0)
                .with_session_epoch(-1);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::ListOffsets => {
            let request = ListOffsetsRequest::default().with_replica_id(BrokerId(-1));
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::BrokerHeartbeat => {
            // A broker id nobody registered: STALE_BROKER_EPOCH, nothing written.
            let request = kafka_protocol::messages::BrokerHeartbeatRequest::default()
                .with_broker_id(BrokerId(9_999))
                .with_broker_epoch(-1);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::AlterPartition => {
            // From a broker id nobody registered: STALE_BROKER_EPOCH, nothing written.
            let request = kafka_protocol::messages::AlterPartitionRequest::default()
                .with_broker_id(BrokerId(9_999))
                .with_broker_epoch(-1);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::OffsetForLeaderEpoch => {
            // A topic nobody created: UNKNOWN_TOPIC_OR_PARTITION, nothing read.
            let request = kafka_protocol::messages::OffsetForLeaderEpochRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(vec![
                    kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderTopic::default()
                        .with_topic(TopicName(str("no-such-topic")))
                        .with_partitions(vec![
                            kafka_protocol::messages::offset_for_leader_epoch_request::OffsetForLeaderPartition::default()
                                .with_partition(0)
                                .with_leader_epoch(0),
                        ]),
                ]);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::InitProducerId => {
            // An idempotent producer's first call: one producer id is used up, nothing else.
            let request = InitProducerIdRequest::default()
                .with_transaction_timeout_ms(60_000)
                .with_producer_id(kafka_protocol::messages::ProducerId(-1))
                .with_producer_epoch(-1);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::AllocateProducerIds => {
            let request = kafka_protocol::messages::AllocateProducerIdsRequest::default()
                .with_broker_id(BrokerId(9_999))
                .with_broker_epoch(-1);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::UnregisterBroker => {
            // An id nobody registered: answered BROKER_ID_NOT_REGISTERED, nothing changes.
            let request = UnregisterBrokerRequest::default().with_broker_id(BrokerId(9_999));
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::UpdateFeatures => {
            // A feature Gregor does not support: INVALID_UPDATE_VERSION, nothing written.
            let request = kafka_protocol::messages::UpdateFeaturesRequest::default()
                .with_timeout_ms(30_000)
                .with_feature_updates(vec![
                    kafka_protocol::messages::update_features_request::FeatureUpdateKey::default()
                        .with_feature(str("group.version"))
                        .with_max_version_level(1),
                ]);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::ElectLeaders => {
            // A topic nobody created: UNKNOWN_TOPIC_OR_PARTITION, nothing elected.
            let request = kafka_protocol::messages::ElectLeadersRequest::default()
                .with_timeout_ms(30_000)
                .with_topic_partitions(Some(vec![
                    kafka_protocol::messages::elect_leaders_request::TopicPartitions::default()
                        .with_topic(TopicName(str("no-such-topic")))
                        .with_partitions(vec![0]),
                ]));
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::AlterPartitionReassignments => {
            // A topic nobody created: UNKNOWN_TOPIC_OR_PARTITION, nothing moves.
            let request = kafka_protocol::messages::AlterPartitionReassignmentsRequest::default()
                .with_timeout_ms(30_000)
                .with_topics(vec![
                    kafka_protocol::messages::alter_partition_reassignments_request::ReassignableTopic::default()
                        .with_name(TopicName(str("no-such-topic")))
                        .with_partitions(vec![
                            kafka_protocol::messages::alter_partition_reassignments_request::ReassignablePartition::default()
                                .with_replicas(Some(vec![BrokerId(1)])),
                        ]),
                ]);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::ListPartitionReassignments => {
            let request = kafka_protocol::messages::ListPartitionReassignmentsRequest::default()
                .with_timeout_ms(30_000);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::DeleteRecords => {
            // A topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION, nothing deleted.
            let request = kafka_protocol::messages::DeleteRecordsRequest::default()
                .with_timeout_ms(30_000)
                .with_topics(vec![
                    kafka_protocol::messages::delete_records_request::DeleteRecordsTopic::default()
                        .with_name(TopicName(StrBytes::from_static_str("no-such-topic")))
                        .with_partitions(vec![
                            kafka_protocol::messages::delete_records_request::DeleteRecordsPartition::default()
                                .with_offset(-1),
                        ]),
                ]);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::DescribeLogDirs => {
            let request = kafka_protocol::messages::DescribeLogDirsRequest::default();
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::DescribeProducers => {
            let request = kafka_protocol::messages::DescribeProducersRequest::default();
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::DescribeConfigs => {
            let request = DescribeConfigsRequest::default();
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::AlterConfigs => {
            let request = AlterConfigsRequest::default().with_validate_only(true);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::IncrementalAlterConfigs => {
            let request = IncrementalAlterConfigsRequest::default().with_validate_only(true);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::DescribeClientQuotas => {
            let request = DescribeClientQuotasRequest::default();
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::AlterClientQuotas => {
            let request = AlterClientQuotasRequest::default().with_validate_only(true);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::ListConfigResources => {
            let request = ListConfigResourcesRequest::default();
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::DescribeTopicPartitions => {
            let request = kafka_protocol::messages::DescribeTopicPartitionsRequest::default()
                .with_response_partition_limit(10);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        // The group APIs, each answered at once without changing a group: an unknown group, a
        // session timeout below the minimum, a generation that does not exist.
        ApiKey::FindCoordinator => {
            let request = kafka_protocol::messages::FindCoordinatorRequest::default()
                .with_key(str(if version < 4 { "advertised-group" } else { "" }))
                .with_coordinator_keys(if version >= 4 {
                    vec![str("advertised-group")]
                } else {
                    Vec::new()
                });
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::JoinGroup => {
            let request = kafka_protocol::messages::JoinGroupRequest::default()
                .with_group_id(GroupId(str("advertised-group")))
                .with_session_timeout_ms(1)
                .with_rebalance_timeout_ms(1)
                .with_protocol_type(str("consumer"))
                .with_protocols(vec![
                    kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol::default()
                        .with_name(str("range")),
                ]);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::SyncGroup => {
            let request = kafka_protocol::messages::SyncGroupRequest::default()
                .with_group_id(GroupId(str("advertised-group")))
                .with_generation_id(1)
                .with_member_id(str("nobody"));
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::Heartbeat => {
            let request = kafka_protocol::messages::HeartbeatRequest::default()
                .with_group_id(GroupId(str("advertised-group")))
                .with_generation_id(1)
                .with_member_id(str("nobody"));
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::LeaveGroup => {
            let mut request = kafka_protocol::messages::LeaveGroupRequest::default()
                .with_group_id(GroupId(str("advertised-group")));
            if version < 3 {
                request.member_id = str("nobody");
            } else {
                request.members = vec![
                    kafka_protocol::messages::leave_group_request::MemberIdentity::default()
                        .with_member_id(str("nobody")),
                ];
            }
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::OffsetCommit => {
            let request = kafka_protocol::messages::OffsetCommitRequest::default()
                .with_group_id(GroupId(str("advertised-group")))
                .with_generation_id_or_member_epoch(5)
                .with_member_id(str("nobody"));
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::OffsetFetch => {
            let mut request = kafka_protocol::messages::OffsetFetchRequest::default();
            if version < 8 {
                request.group_id = GroupId(str("advertised-group"));
                request.topics = Some(Vec::new());
            } else {
                request.groups = vec![
                    kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup::default()
                        .with_group_id(GroupId(str("advertised-group")))
                        .with_topics(None),
                ];
            }
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::ListGroups => {
            let request = kafka_protocol::messages::ListGroupsRequest::default();
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::DescribeGroups => {
            let request = kafka_protocol::messages::DescribeGroupsRequest::default()
                .with_groups(vec![GroupId(str("advertised-group"))]);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::DeleteGroups => {
            let request = kafka_protocol::messages::DeleteGroupsRequest::default()
                .with_groups_names(vec![GroupId(str("advertised-group"))]);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::OffsetDelete => {
            let request = kafka_protocol::messages::OffsetDeleteRequest::default()
                .with_group_id(GroupId(str("advertised-group")));
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::ConsumerGroupHeartbeat => {
            // A heartbeat of a member the group does not know: GROUP_ID_NOT_FOUND, nothing
            // is created.
            let request = kafka_protocol::messages::ConsumerGroupHeartbeatRequest::default()
                .with_group_id(GroupId(str("advertised-group")))
                .with_member_id(str("nobody"))
                .with_member_epoch(3);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::ConsumerGroupDescribe => {
            let request = kafka_protocol::messages::ConsumerGroupDescribeRequest::default()
                .with_group_ids(vec![GroupId(str("advertised-group"))]);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::DescribeUserScramCredentials => {
            let request = DescribeUserScramCredentialsRequest::default();
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::AlterUserScramCredentials => {
            // Deleting a credential nobody has: RESOURCE_NOT_FOUND, nothing changes.
            let request = AlterUserScramCredentialsRequest::default().with_deletions(vec![
                ScramCredentialDeletion::default()
                    .with_name(str("nobody"))
                    .with_mechanism(1),
            ]);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        // Without an authorizer the three ACL APIs answer SECURITY_DISABLED; with one, a
        // filter selecting nothing / a creation refused as invalid change nothing either.
        ApiKey::DescribeAcls => {
            let request = kafka_protocol::messages::DescribeAclsRequest::default()
                .with_resource_type_filter(2)
                .with_resource_name_filter(Some(str("advertised-topic")))
                .with_pattern_type_filter(3)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::CreateAcls => {
            let request =
                kafka_protocol::messages::CreateAclsRequest::default().with_creations(vec![
                    kafka_protocol::messages::create_acls_request::AclCreation::default()
                        .with_resource_type(2)
                        .with_resource_name(str(""))
                        .with_resource_pattern_type(3)
                        .with_principal(str("User:nobody"))
                        .with_host(str("*"))
                        .with_operation(3)
                        .with_permission_type(3),
                ]);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::DeleteAcls => {
            let request =
                kafka_protocol::messages::DeleteAclsRequest::default().with_filters(vec![
                    kafka_protocol::messages::delete_acls_request::DeleteAclsFilter::default()
                        .with_resource_type_filter(2)
                        .with_resource_name_filter(Some(str("advertised-topic")))
                        .with_pattern_type_filter(3)
                        .with_principal_filter(Some(str("User:nobody")))
                        .with_host_filter(None)
                        .with_operation(1)
                        .with_permission_type(1),
                ]);
            answers(conn, addr, &request, version, f, f_what).await;
        }
        // On a PLAINTEXT listener both are answered ILLEGAL_SASL_STATE, as Kafka does.
        ApiKey::SaslHandshake => {
            let request = SaslHandshakeRequest::default().with_mechanism(str("PLAIN"));
            answers(conn, addr, &request, version, f, f_what).await;
        }
        ApiKey::SaslAuthenticate => {
            let request = SaslAuthenticateRequest::default();
            answers(conn, addr, &request, version, f, f_what).await;
        }
        // Advertised on controller listeners only; a client is no node of the quorum, so its
        // envelope is answered CLUSTER_AUTHORIZATION_FAILED, as Kafka answers a principal
        // without CLUSTER_ACTION.
        ApiKey::Envelope => match conn.send(&EnvelopeRequest::default(), version).await {
            Ok(answer) if answer.error_code == 31 => {}
            Ok(answer) => f.push(format!(
                "{f_what} v{version}: a client's envelope answered {}",
                answer.error_code
            )),
            Err(error) => {
                f.push(format!("{f_what} v{version}: {error:#}"));
                let client_id = conn.client_id().map(str::to_owned);
                *conn = KafkaConn::connect(addr).await.unwrap();
                conn.set_client_id(client_id.as_deref());
            }
        },
        other => f.push(format!(
            "{other:?} v{version} is advertised but this test cannot build it: add it here"
        )),
    }
}

/// Asks `addr` for its advertised versions with each client-id form (a null client id is a
/// header edge case every version must take too) and checks every pair; returns the failures.
pub(crate) async fn check_every_advertised_version(addr: &str) -> Vec<String> {
    let mut f = Vec::new();
    for client_id in [Some("gregor-integration"), None] {
        let mut conn = KafkaConn::connect(addr).await.unwrap();
        conn.set_client_id(client_id);
        let advertised = conn
            .send(&ApiVersionsRequest::default(), 0)
            .await
            .unwrap()
            .api_keys;
        assert!(!advertised.is_empty(), "{addr} advertises nothing");
        for api in advertised {
            let Ok(key) = ApiKey::try_from(api.api_key) else {
                f.push(format!("{addr} advertises unknown api key {}", api.api_key));
                continue;
            };
            for version in api.min_version..=api.max_version {
                send_valid(&mut conn, addr, key, version, &mut f).await;
            }
        }
    }
    f
}
