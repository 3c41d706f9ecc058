//! The largest requests a client can send, decided by each controller decision: every one must
//! finish (O(n log n) or better in the request's size, issue #11). The deadline only guards
//! against a hang; it is not a timing assertion.
//!
//! `GREGOR_SCALE_REPORT=1 cargo test -p gregor-actors large_requests -- --nocapture
//! --test-threads=1` also prints the time at n and 2n for each decision (the doubling ratio in
//! BENCHMARKS.md); `GREGOR_SCALE_N=20000` sets n.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::create_partitions_request::{
    CreatePartitionsAssignment, CreatePartitionsTopic,
};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterConfigsRequest, BrokerId, CreatePartitionsRequest,
    CreateTopicsRequest, DeleteTopicsRequest, IncrementalAlterConfigsRequest,
};
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::configs::testing::image_with;
use super::testing::{topic_name, with_ctx, FakeView};
use super::{client_quotas, configs, create_partitions, create_topics, delete_topics};
use gregor_publishers::records::MetadataRecord;

/// Entries in the largest request each test builds.
pub(crate) const LARGE: usize = 100_000;

/// Generous: a linear decision over 100,000 entries takes well under a second even unoptimised.
const HANG_GUARD: Duration = Duration::from_secs(120);

fn s(value: impl Into<String>) -> StrBytes {
    StrBytes::from_string(value.into())
}

/// Runs `decide(n)` on its own thread and fails if it does not finish before the guard; with
/// `GREGOR_SCALE_REPORT` set, also times it at `n` and `2n` and prints the ratio.
pub(crate) fn finishes<F>(name: &str, n: usize, decide: F)
where
    F: Fn(usize) + Send + Sync + 'static,
{
    let decide = std::sync::Arc::new(decide);
    let timed = |size: usize| {
        let decide = decide.clone();
        let (done, finished) = mpsc::channel();
        let decider = std::thread::spawn(move || {
            let started = Instant::now();
            decide(size);
            let _ = done.send(started.elapsed());
        });
        match finished.recv_timeout(HANG_GUARD) {
            Ok(elapsed) => elapsed,
            // The decision's own assertion failed: report it, not a hang.
            Err(mpsc::RecvTimeoutError::Disconnected) => match decider.join() {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(()) => panic!("{name} with {size} entries stopped without an answer"),
            },
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("{name} with {size} entries did not finish in {HANG_GUARD:?}")
            }
        }
    };
    // GREGOR_SCALE_N replaces n, to compare with a build too slow at the full size.
    let n = std::env::var("GREGOR_SCALE_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(n);
    let at_n = timed(n);
    if std::env::var_os("GREGOR_SCALE_REPORT").is_some() {
        let at_2n = timed(2 * n);
        println!(
            "scale {name}: n={n} {:.1} ms, 2n {:.1} ms, ratio {:.2}",
            at_n.as_secs_f64() * 1e3,
            at_2n.as_secs_f64() * 1e3,
            at_2n.as_secs_f64() / at_n.as_secs_f64()
        );
    }
}

fn quota_entry(user: usize, ops: Vec<OpData>) -> EntryData {
    EntryData::default()
        .with_entity(vec![EntityData::default()
            .with_entity_type(s("user"))
            .with_entity_name(Some(s(format!("user-{user}"))))])
        .with_ops(ops)
}

fn op(key: impl Into<String>, value: f64) -> OpData {
    OpData::default().with_key(s(key)).with_value(value)
}

#[test]
fn alter_client_quotas_many_entities() {
    finishes("AlterClientQuotas distinct entities", LARGE, |n| {
        let request = AlterClientQuotasRequest::default().with_entries(
            (0..n)
                .map(|i| quota_entry(i, vec![op("producer_byte_rate", 1024.0)]))
                .collect(),
        );
        // Validated only: every entity valid. Written: past one batch, every entity refused.
        let request = request.with_validate_only(true);
        let result = client_quotas::alter_client_quotas(&Default::default(), &request);
        assert_eq!(result.response.entries.len(), n);
        assert!(result.response.entries.iter().all(|e| e.error_code == 0));
        let request = request.with_validate_only(false);
        let result = client_quotas::alter_client_quotas(&Default::default(), &request);
        assert_eq!(result.response.entries.len(), n);
        assert!(result.response.entries.iter().all(|e| e.error_code == 44));
        assert!(result.records.is_empty());
    });
}

#[test]
fn alter_client_quotas_repeated_entities() {
    finishes("AlterClientQuotas repeated entities", LARGE, |n| {
        // Every entity twice: each is answered once, as a duplicate.
        let request = AlterClientQuotasRequest::default()
            .with_entries(
                (0..n)
                    .map(|i| quota_entry(i % (n / 2), vec![op("producer_byte_rate", 1024.0)]))
                    .collect(),
            )
            .with_validate_only(true);
        let result = client_quotas::alter_client_quotas(&Default::default(), &request);
        assert_eq!(result.response.entries.len(), n / 2);
        assert!(result.response.entries.iter().all(|e| e.error_code == 42));
    });
}

#[test]
fn alter_client_quotas_one_entry_with_many_keys_and_parts() {
    finishes("AlterClientQuotas many keys", LARGE, |n| {
        let keys = quota_entry(0, (0..n).map(|i| op(format!("key-{i}"), 1.0)).collect());
        let parts = EntryData::default().with_entity(
            (0..n)
                .map(|i| {
                    EntityData::default()
                        .with_entity_type(s(format!("type-{i}")))
                        .with_entity_name(Some(s("x")))
                })
                .collect(),
        );
        let request = AlterClientQuotasRequest::default().with_entries(vec![keys, parts]);
        let result = client_quotas::alter_client_quotas(&Default::default(), &request);
        assert_eq!(result.response.entries.len(), 2);
        assert_eq!(
            result.response.entries[0].error_message.as_deref(),
            Some("Invalid configuration key key-0")
        );
        assert_eq!(result.response.entries[1].entity.len(), n);
        assert!(result.records.is_empty());
    });
}

fn view_with_topic(partitions: usize) -> FakeView {
    let replicas: Vec<Vec<i32>> = (0..partitions).map(|_| vec![1, 2]).collect();
    let mut view = FakeView::with_brokers(&[1, 2, 3]);
    view.topics
        .insert("t".to_owned(), (Uuid::from_u128(7), replicas));
    view
}

#[test]
fn create_topics_many_topics_and_configs() {
    finishes("CreateTopics", LARGE, |n| {
        let view = view_with_topic(1);
        // Every topic fails only at its config check, after its name and configs were read.
        let mut topics: Vec<CreatableTopic> = (0..n)
            .map(|i| {
                CreatableTopic::default()
                    .with_name(topic_name(&format!("topic-{i}")))
                    .with_num_partitions(1)
                    .with_replication_factor(1)
                    .with_configs(vec![CreatableTopicConfig::default()
                        .with_name(s("retention.ms"))
                        .with_value(Some(s("-5")))])
            })
            .collect();
        // One topic naming the same few keys n times: the last value of each wins.
        topics.push(
            CreatableTopic::default()
                .with_name(topic_name("configs"))
                .with_num_partitions(1)
                .with_replication_factor(1)
                .with_configs(
                    (0..n)
                        .map(|i| {
                            CreatableTopicConfig::default()
                                .with_name(s(format!("k{}", i % 1000)))
                                .with_value(Some(s(i.to_string())))
                        })
                        .collect(),
                ),
        );
        let request = CreateTopicsRequest::default().with_topics(topics);
        let result = with_ctx(|ctx| {
            create_topics(
                &view,
                &request,
                7,
                &create_topics::TopicDefaults::default(),
                ctx,
            )
        });
        assert_eq!(result.response.topics.len(), n + 1);
        assert!(result.records.is_empty());
    });
}

#[test]
fn delete_topics_many_names_and_ids() {
    finishes("DeleteTopics", LARGE, |n| {
        let view = view_with_topic(1);
        let request = DeleteTopicsRequest::default().with_topics(
            (0..n)
                .map(|i| {
                    if i % 2 == 0 {
                        DeleteTopicState::default().with_name(Some(topic_name(&format!("t{i}"))))
                    } else {
                        DeleteTopicState::default().with_topic_id(Uuid::from_u128(i as u128 + 100))
                    }
                })
                .collect(),
        );
        let result = with_ctx(|ctx| delete_topics(&view, &request, 6, true, ctx));
        assert_eq!(result.response.responses.len(), n);
    });
}

#[test]
fn create_partitions_many_topics_and_assignments() {
    finishes("CreatePartitions", LARGE, |n| {
        let view = view_with_topic(1);
        let mut topics: Vec<CreatePartitionsTopic> = (0..n)
            .map(|i| {
                CreatePartitionsTopic::default()
                    .with_name(topic_name(&format!("missing-{i}")))
                    .with_count(2)
            })
            .collect();
        // The most manual assignments one request may carry (one record each).
        let assigned = super::MAX_RECORDS_PER_USER_OP;
        topics.push(
            CreatePartitionsTopic::default()
                .with_name(topic_name("t"))
                .with_count(i32::try_from(assigned + 1).unwrap_or(i32::MAX))
                .with_assignments(Some(
                    (0..assigned)
                        .map(|i| {
                            CreatePartitionsAssignment::default().with_broker_ids(vec![
                                BrokerId(1 + (i % 3) as i32),
                                BrokerId(1 + ((i + 1) % 3) as i32),
                            ])
                        })
                        .collect(),
                )),
        );
        let request = CreatePartitionsRequest::default().with_topics(topics);
        let result = with_ctx(|ctx| create_partitions(&view, &request, 3, ctx));
        assert_eq!(result.response.results.len(), n + 1);
        assert_eq!(result.records.len(), assigned);
    });
}

fn incremental_resource(name: String, ops: Vec<AlterableConfig>) -> AlterConfigsResource {
    AlterConfigsResource::default()
        .with_resource_type(2)
        .with_resource_name(s(name))
        .with_configs(ops)
}

fn alterable(name: impl Into<String>, op: i8, value: impl Into<String>) -> AlterableConfig {
    AlterableConfig::default()
        .with_name(s(name))
        .with_config_operation(op)
        .with_value(Some(s(value)))
}

/// "0:1,1:1,...": `count` throttled replicas starting at partition `from`.
fn replica_list(from: usize, count: usize) -> String {
    (from..from + count)
        .map(|p| format!("{p}:1"))
        .collect::<Vec<_>>()
        .join(",")
}

#[test]
fn incremental_alter_configs_many_resources_ops_and_list_items() {
    finishes("IncrementalAlterConfigs", LARGE, |n| {
        let current = replica_list(0, n);
        let image = image_with(&[MetadataRecord::Config(
            gregor_publishers::records::ConfigRecord {
                resource_type: 2,
                resource_name: "orders".into(),
                name: "leader.replication.throttled.replicas".into(),
                value: Some(current),
            },
        )]);
        let mut resources: Vec<AlterConfigsResource> = (0..n)
            .map(|i| incremental_resource(format!("missing-{i}"), Vec::new()))
            .collect();
        // APPEND n items to an n-item list and SUBTRACT n from another: set operations.
        resources.push(incremental_resource(
            "orders".into(),
            vec![
                alterable(
                    "leader.replication.throttled.replicas",
                    2,
                    replica_list(n / 2, n),
                ),
                alterable(
                    "follower.replication.throttled.replicas",
                    3,
                    replica_list(0, n),
                ),
            ],
        ));
        // One resource with n distinct keys.
        resources.push(incremental_resource(
            "orders3".into(),
            (0..n).map(|i| alterable(format!("k{i}"), 0, "v")).collect(),
        ));
        let request = IncrementalAlterConfigsRequest::default().with_resources(resources);
        let result =
            configs::incremental_alter_configs(&image, &request, Some(1), &Default::default());
        assert_eq!(result.response.responses.len(), n + 2);
        assert_eq!(result.response.responses[n].error_code, 0);
        match result.records.as_slice() {
            [MetadataRecord::Config(leader), MetadataRecord::Config(follower)] => {
                assert_eq!(leader.value, Some(replica_list(0, n + n / 2)));
                assert_eq!(follower.value, Some(String::new()));
            }
            other => panic!("unexpected records: {}", other.len()),
        }
    });
}

#[test]
fn alter_configs_many_resources_and_keys() {
    use kafka_protocol::messages::alter_configs_request::{
        AlterConfigsResource as LegacyResource, AlterableConfig as LegacyConfig,
    };
    finishes("AlterConfigs", LARGE, |n| {
        let image = image_with(&[]);
        let mut resources: Vec<LegacyResource> = (0..n)
            .map(|i| {
                LegacyResource::default()
                    .with_resource_type(2)
                    .with_resource_name(s(format!("missing-{i}")))
            })
            .collect();
        resources.push(
            LegacyResource::default()
                .with_resource_type(2)
                .with_resource_name(s("orders"))
                .with_configs(
                    (0..n)
                        .map(|i| {
                            LegacyConfig::default()
                                .with_name(s(format!("k{i}")))
                                .with_value(Some(s("v")))
                        })
                        .collect(),
                ),
        );
        let request = AlterConfigsRequest::default().with_resources(resources);
        let result = configs::alter_configs(&image, &request, Some(1), &Default::default());
        assert_eq!(result.response.responses.len(), n + 1);
        assert!(result.records.is_empty());
    });
}

#[test]
fn alter_user_scram_credentials_many_users() {
    use kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    use kafka_protocol::messages::AlterUserScramCredentialsRequest;

    finishes("AlterUserScramCredentials", LARGE, |n| {
        // n deletions of users without credentials, then one upsertion of the last of them
        // (a user named twice) and one of a new user: repeats are found in a map, not a scan.
        let deletions = (0..n)
            .map(|i| {
                ScramCredentialDeletion::default()
                    .with_name(s(format!("user-{i}")))
                    .with_mechanism(1)
            })
            .collect();
        let upsertion = |name: String| {
            ScramCredentialUpsertion::default()
                .with_name(s(name))
                .with_mechanism(1)
                .with_iterations(4096)
                .with_salt(bytes::Bytes::from_static(b"salt"))
                .with_salted_password(bytes::Bytes::from_static(&[7; 32]))
        };
        let request = AlterUserScramCredentialsRequest::default()
            .with_deletions(deletions)
            .with_upsertions(vec![
                upsertion(format!("user-{}", n - 1)),
                upsertion("new".to_owned()),
            ]);
        let result = super::scram::alter_user_scram_credentials(&Default::default(), &request);
        let results = &result.response.results;
        assert_eq!(results.len(), n + 1);
        assert!(results[..n].iter().all(|r| r.error_code == 91));
        assert_eq!(results[n].error_code, 0);
        assert_eq!(result.records.len(), 1);
        // The answer when the controller cannot decide: one result per distinct user too.
        let refused = crate::controller::refused_scram_alteration(
            &request,
            kafka_protocol::error::ResponseError::NotController,
            "not the controller",
        );
        assert_eq!(refused.results.len(), n + 1);
    });
}

#[test]
fn delete_acls_many_filters_each_matching_an_acl() {
    use kafka_protocol::messages::create_acls_request::AclCreation;
    use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
    use kafka_protocol::messages::{CreateAclsRequest, DeleteAclsRequest};
    use rand::SeedableRng;

    finishes("DeleteAcls", LARGE, |n| {
        // n ACLs (one per topic), then n LITERAL filters naming each topic and one MATCH filter:
        // each filter reads its name's patterns from the index, not every ACL.
        let creations = (0..n)
            .map(|i| {
                AclCreation::default()
                    .with_resource_type(2)
                    .with_resource_name(s(format!("topic-{i}")))
                    .with_resource_pattern_type(3)
                    .with_principal(s("User:x"))
                    .with_host(s("*"))
                    .with_operation(3)
                    .with_permission_type(3)
            })
            .collect();
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut delta = gregor_publishers::MetadataDelta::new(std::sync::Arc::new(
            gregor_publishers::MetadataImage::empty(),
        ));
        // Created as a client must: at most MAX_RECORDS_PER_USER_OP ACLs per request.
        let creations: Vec<AclCreation> = creations;
        for batch in creations.chunks(super::MAX_RECORDS_PER_USER_OP) {
            let created = super::acls::create_acls(
                &Default::default(),
                &CreateAclsRequest::default().with_creations(batch.to_vec()),
                &mut rng,
            );
            assert_eq!(created.records.len(), batch.len());
            for record in &created.records {
                delta.replay(record).expect("a created ACL replays");
            }
        }
        let image = delta.apply(Default::default());
        assert_eq!(image.acls.len(), n);
        let filter = |name: String, pattern: i8| {
            DeleteAclsFilter::default()
                .with_resource_type_filter(2)
                .with_resource_name_filter(Some(s(name)))
                .with_pattern_type_filter(pattern)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1)
        };
        let mut filters: Vec<_> = (0..n).map(|i| filter(format!("topic-{i}"), 3)).collect();
        filters.push(filter("topic-0".to_owned(), 2));
        let request = DeleteAclsRequest::default().with_filters(filters);
        let result = super::acls::delete_acls(&image.acls, &request);
        let results = &result.response.filter_results;
        assert_eq!(results.len(), n + 1);
        // Past Kafka's limit on one request's deletions every filter is refused, from the
        // first filter selecting one ACL too many.
        if n > super::acls::MAX_DELETED_ACLS {
            assert!(results.iter().all(|r| r.error_code == -1));
            assert!(result.records.is_empty());
        } else {
            assert!(results.iter().all(|r| r.matching_acls.len() == 1));
            assert_eq!(result.records.len(), n);
        }
    });
}
