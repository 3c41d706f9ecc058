//! Fuzz targets for what the metadata log hands this crate (issue #11): record decoding from
//! bytes (a raft entry or a snapshot chunk from disk or a peer) and the replay of arbitrary
//! record sequences onto images. Decoding may fail and replay may refuse a record; neither may
//! panic, and an image's snapshot must always load back into the same image.
//!
//! They are proptest properties, so CI runs them as ordinary tests for a bounded number of
//! cases; `GREGOR_FUZZ_CASES=N` runs N cases each (the long run in BENCHMARKS.md). A failure
//! is shrunk and saved under `proptest-regressions/` beside this file, and replayed first on
//! every later run: that directory is the kept corpus of found inputs. See integration/README.md,
//! "Fuzzing".

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests: a panic is the failure report

use std::sync::Arc;

use gregor_publishers::records::*;
use gregor_publishers::{MetadataDelta, MetadataImage, Provenance};
use proptest::collection::vec;
use proptest::prelude::*;
use uuid::Uuid;

/// Cases per target: a few seconds in CI unless `GREGOR_FUZZ_CASES` asks for more.
fn config() -> ProptestConfig {
    let cases = std::env::var("GREGOR_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(512);
    ProptestConfig {
        cases,
        max_shrink_iters: 2048,
        ..ProptestConfig::default()
    }
}

// Small domains, so that records name each other's brokers, topics and partitions.
fn broker_id() -> impl Strategy<Value = i32> {
    prop_oneof![4 => 0..4_i32, 1 => any::<i32>()]
}

fn topic_id() -> impl Strategy<Value = Uuid> {
    prop_oneof![8 => (0..4_u128).prop_map(Uuid::from_u128), 1 => any::<u128>().prop_map(Uuid::from_u128)]
}

fn partition_id() -> impl Strategy<Value = i32> {
    prop_oneof![4 => 0..4_i32, 1 => any::<i32>()]
}

fn name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec!["a", "b", "a.b", "a_b", "", "metadata.version", "user", "client-id", "ip"]).prop_map(str::to_owned),
        1 => ".{0,12}",
    ]
}

fn epoch() -> impl Strategy<Value = i64> {
    prop_oneof![4 => 0..4_i64, 1 => any::<i64>()]
}

fn replicas() -> impl Strategy<Value = Vec<i32>> {
    vec(broker_id(), 0..5)
}

fn endpoint() -> impl Strategy<Value = Endpoint> {
    (name(), name(), any::<u16>(), any::<i16>()).prop_map(
        |(name, host, port, security_protocol)| Endpoint {
            name,
            host,
            port,
            security_protocol,
        },
    )
}

fn feature() -> impl Strategy<Value = FeatureRange> {
    (name(), any::<i16>(), any::<i16>()).prop_map(|(name, min, max)| FeatureRange {
        name,
        min_supported_version: min,
        max_supported_version: max,
    })
}

fn record() -> impl Strategy<Value = MetadataRecord> {
    prop_oneof![
        (
            broker_id(),
            epoch(),
            vec(endpoint(), 0..3),
            vec(feature(), 0..3),
            proptest::option::of(name()),
            any::<bool>(),
            any::<bool>(),
            vec(topic_id(), 0..3),
        )
            .prop_map(
                |(broker_id, epoch, endpoints, features, rack, fenced, shutdown, dirs)| {
                    MetadataRecord::RegisterBroker(RegisterBrokerRecord {
                        broker_id,
                        incarnation_id: Uuid::from_u128(7),
                        broker_epoch: epoch,
                        endpoints,
                        features,
                        rack,
                        fenced,
                        in_controlled_shutdown: shutdown,
                        log_dirs: dirs,
                    })
                }
            ),
        (broker_id(), epoch()).prop_map(|(broker_id, broker_epoch)| {
            MetadataRecord::UnregisterBroker(UnregisterBrokerRecord {
                broker_id,
                broker_epoch,
            })
        }),
        (name(), topic_id())
            .prop_map(|(name, topic_id)| MetadataRecord::Topic(TopicRecord { name, topic_id })),
        (
            partition_id(),
            topic_id(),
            replicas(),
            replicas(),
            replicas(),
            replicas(),
            broker_id(),
            any::<i8>(),
            any::<i32>(),
            any::<i32>(),
            vec(topic_id(), 0..5),
        )
            .prop_map(
                |(
                    partition_id,
                    topic_id,
                    replicas,
                    isr,
                    removing,
                    adding,
                    leader,
                    recovery,
                    le,
                    pe,
                    dirs,
                )| {
                    MetadataRecord::Partition(PartitionRecord {
                        partition_id,
                        topic_id,
                        replicas,
                        isr,
                        removing_replicas: removing,
                        adding_replicas: adding,
                        leader,
                        leader_recovery_state: recovery,
                        leader_epoch: le,
                        partition_epoch: pe,
                        directories: dirs,
                    })
                }
            ),
        (
            any::<i8>().prop_map(|t| t % 20),
            name(),
            name(),
            proptest::option::of(name()),
        )
            .prop_map(|(resource_type, resource_name, name, value)| {
                MetadataRecord::Config(ConfigRecord {
                    resource_type,
                    resource_name,
                    name,
                    value,
                })
            }),
        (
            partition_id(),
            topic_id(),
            proptest::option::of(replicas()),
            proptest::option::of(broker_id()),
            proptest::option::of(replicas()),
            proptest::option::of(replicas()),
            proptest::option::of(replicas()),
            proptest::option::of(any::<i8>()),
            proptest::option::of(vec(topic_id(), 0..5)),
        )
            .prop_map(
                |(
                    partition_id,
                    topic_id,
                    isr,
                    leader,
                    replicas,
                    removing,
                    adding,
                    recovery,
                    dirs,
                )| {
                    MetadataRecord::PartitionChange(PartitionChangeRecord {
                        partition_id,
                        topic_id,
                        isr,
                        leader,
                        replicas,
                        removing_replicas: removing,
                        adding_replicas: adding,
                        leader_recovery_state: recovery,
                        directories: dirs,
                    })
                }
            ),
        (broker_id(), epoch())
            .prop_map(|(id, epoch)| MetadataRecord::FenceBroker(FenceBrokerRecord { id, epoch })),
        (broker_id(), epoch()).prop_map(|(id, epoch)| {
            MetadataRecord::UnfenceBroker(UnfenceBrokerRecord { id, epoch })
        }),
        topic_id().prop_map(|topic_id| MetadataRecord::RemoveTopic(RemoveTopicRecord { topic_id })),
        (name(), any::<i16>()).prop_map(|(name, feature_level)| {
            MetadataRecord::FeatureLevel(FeatureLevelRecord {
                name,
                feature_level,
            })
        }),
        (
            vec((name(), proptest::option::of(name())), 0..4),
            name(),
            any::<f64>(),
            any::<bool>(),
        )
            .prop_map(|(entity, key, value, remove)| {
                MetadataRecord::ClientQuota(ClientQuotaRecord {
                    entity: entity
                        .into_iter()
                        .map(|(entity_type, entity_name)| EntityData {
                            entity_type,
                            entity_name,
                        })
                        .collect(),
                    key,
                    value,
                    remove,
                })
            }),
        (
            broker_id(),
            epoch(),
            proptest::option::of(any::<bool>()),
            proptest::option::of(any::<bool>()),
        )
            .prop_map(|(broker_id, broker_epoch, fenced, shutdown)| {
                MetadataRecord::BrokerRegistrationChange(BrokerRegistrationChangeRecord {
                    broker_id,
                    broker_epoch,
                    fenced,
                    in_controlled_shutdown: shutdown,
                })
            }),
        (
            broker_id(),
            topic_id(),
            vec(endpoint(), 0..3),
            vec(feature(), 0..3)
        )
            .prop_map(|(controller_id, directory_id, endpoints, features)| {
                MetadataRecord::RegisterController(RegisterControllerRecord {
                    controller_id,
                    incarnation_id: Uuid::from_u128(9),
                    directory_id,
                    endpoints,
                    features,
                })
            }),
        (name(), 0i8..4, vec(any::<u8>(), 0..8), 0i32..20_000).prop_map(
            |(name, mechanism, key, iterations)| {
                MetadataRecord::UserScramCredential(UserScramCredentialRecord {
                    name,
                    mechanism,
                    salt: key.clone(),
                    stored_key: key.clone(),
                    server_key: key,
                    iterations,
                })
            }
        ),
        (name(), 0i8..4).prop_map(|(name, mechanism)| {
            MetadataRecord::RemoveUserScramCredential(RemoveUserScramCredentialRecord {
                name,
                mechanism,
            })
        }),
        (topic_id(), 0i8..9, name(), 0i8..6, name(), 0i8..16, 0i8..5).prop_map(
            |(
                id,
                resource_type,
                resource_name,
                pattern_type,
                principal,
                operation,
                permission_type,
            )| {
                MetadataRecord::AccessControlEntry(AccessControlEntryRecord {
                    id,
                    resource_type,
                    resource_name,
                    pattern_type,
                    principal,
                    host: "*".into(),
                    operation,
                    permission_type,
                })
            }
        ),
        topic_id().prop_map(|id| {
            MetadataRecord::RemoveAccessControlEntry(RemoveAccessControlEntryRecord { id })
        }),
        Just(MetadataRecord::NoOp),
    ]
}

/// One change to a valid encoding: what a torn write, a flipped bit or a hostile peer makes.
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
    /// A varint claiming a huge length, where postcard reads sequence and string lengths.
    HugeLength {
        at: usize,
    },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0..8_u8).prop_map(|(at, bit)| Mutation::Flip { at, bit }),
        (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at, byte }),
        (any::<usize>(), vec(any::<u8>(), 1..8))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        (any::<usize>(), 1..16_usize).prop_map(|(at, len)| Mutation::Remove { at, len }),
        any::<usize>().prop_map(|at| Mutation::Truncate { at }),
        any::<usize>().prop_map(|at| Mutation::HugeLength { at }),
    ]
}

fn mutate(mut bytes: Vec<u8>, mutations: &[Mutation]) -> Vec<u8> {
    for mutation in mutations {
        let len = bytes.len();
        let pick = |at: usize| if len == 0 { 0 } else { at % len };
        match mutation {
            Mutation::Flip { at, bit } if len > 0 => bytes[pick(*at)] ^= 1 << bit,
            Mutation::Set { at, byte } if len > 0 => bytes[pick(*at)] = *byte,
            Mutation::Insert {
                at,
                bytes: inserted,
            } => {
                let at = if len == 0 { 0 } else { at % (len + 1) };
                bytes.splice(at..at, inserted.iter().copied());
            }
            Mutation::Remove { at, len: count } if len > 0 => {
                let at = pick(*at);
                bytes.drain(at..(at + count).min(len));
            }
            Mutation::Truncate { at } => bytes.truncate(if len == 0 { 0 } else { at % len }),
            Mutation::HugeLength { at } => {
                let at = if len == 0 { 0 } else { at % (len + 1) };
                bytes.splice(at..at, [0xff, 0xff, 0xff, 0xff, 0x0f]);
            }
            _ => {}
        }
    }
    bytes
}

/// Replays `batches` from the empty image, each batch into its own delta as the loader does
/// (a refused record is skipped), and checks after each batch that the image's snapshot loads
/// back into the same image.
fn replay_batches(batches: &[Vec<MetadataRecord>]) -> Result<(), TestCaseError> {
    let mut image = Arc::new(MetadataImage::empty());
    for (index, batch) in batches.iter().enumerate() {
        let mut delta = MetadataDelta::new(Arc::clone(&image));
        for record in batch {
            let _ = delta.replay(record);
        }
        let provenance = Provenance {
            last_log_index: index as u64 + 1,
            last_log_term: 1,
            last_applied_time_ms: 0,
        };
        image = Arc::new(delta.apply(provenance));
        prop_assert_eq!(image.digest, image.compute_digest());
        let mut reload = MetadataDelta::new(Arc::new(MetadataImage::empty()));
        let snapshot = image.to_records();
        for record in &snapshot {
            if let Err(error) = reload.replay(record) {
                return Err(TestCaseError::fail(format!(
                    "snapshot record {record:?} does not reload: {error}"
                )));
            }
        }
        // Compared as bytes: a NaN quota value is equal to itself there.
        let reloaded = postcard::to_allocvec(&reload.apply(provenance).to_records()).unwrap();
        prop_assert_eq!(reloaded, postcard::to_allocvec(&snapshot).unwrap());
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// Arbitrary record sequences replayed onto images: errors are fine, panics are not, and
    /// every image reloads from its own snapshot.
    #[test]
    fn replayed_record_sequences_never_panic(batches in vec(vec(record(), 0..12), 1..6)) {
        replay_batches(&batches)?;
    }

    /// A raft entry's bytes, mutated: decoding a batch gives records or an error, and what
    /// decodes encodes back to bytes that decode to the same records (and replays safely).
    #[test]
    fn mutated_batches_decode_or_fail_cleanly(
        records in vec(record(), 0..8),
        mutations in vec(mutation(), 0..6),
    ) {
        let valid = postcard::to_allocvec(&MetadataBatch { records }).unwrap();
        let bytes = mutate(valid, &mutations);
        if let Ok(batch) = postcard::from_bytes::<MetadataBatch>(&bytes) {
            let again = postcard::to_allocvec(&batch).unwrap();
            let decoded = postcard::from_bytes::<MetadataBatch>(&again).unwrap();
            prop_assert_eq!(postcard::to_allocvec(&decoded).unwrap(), again);
            replay_batches(&[batch.records])?;
        }
    }

    /// Record frames with any type, version and payload bytes.
    #[test]
    fn arbitrary_record_frames_decode_or_fail_cleanly(
        record_type in prop_oneof![0..24_u16, any::<u16>()],
        version in prop_oneof![0..2_u16, any::<u16>()],
        payload in vec(any::<u8>(), 0..64),
    ) {
        let frame = RecordFrame { record_type, version, payload };
        if let Ok(record) = MetadataRecord::from_frame(&frame) {
            prop_assert_eq!(record.record_type(), record_type);
        }
    }
}
