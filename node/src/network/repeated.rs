//! Requests whose list repeats the same element: the handler sees at most two copies of each
//! distinct element, and the answer is expanded back to one entry per element as it is written.
//!
//! Kafka answers every resource of IncrementalAlterConfigs and DescribeConfigs, and every
//! DeleteTopics v6 entry naming neither or both of a name and an id, in request order. An
//! element is a few bytes on the wire (an empty resource is four) but a decoded request struct
//! of 50-150 bytes, and its answer a response struct as large, so a frame repeating one tiny
//! element cost 35-100 times its size. An element's answer depends only on its own content and
//! on whether that content appears more than once (every copy of a repeated resource gets the
//! same "Each resource must appear at most once."; a repeated DeleteTopics name is answered
//! once), so a third copy is answered exactly as the second: the handler gets the first two
//! copies, and the plan kept here (runs of "answer as kept element k") replays the second
//! copy's encoded answer for the others. The expanded answer is never built: it is written to
//! the socket in chunks (a 5 MB DescribeConfigs of empty resources is answered with 76 MB, one
//! error per resource). AlterClientQuotas answers each distinct entity once (Kafka's result
//! map), so its repeats are dropped without a plan, except when every kept entry got its own
//! answer (a refused request answers every entry), where the plan replays them.
//!
//! Forwarded requests stay bounded on both sides: the broker reduces before it forwards, the
//! controller decides the reduced request, and the broker expands the controller's answer.
//!
//! Written on the wire primitives: the crate decodes a whole list into structs at once, which
//! is the cost avoided here (no crate decodes Kafka messages lazily or by borrowing). Element
//! boundaries are found by skipping fields, leniently: what is malformed is left for the
//! crate's decoder of the reduced frame to refuse.

use std::hash::BuildHasher;

use anyhow::bail;
use bytes::{Buf, BufMut, Bytes, BytesMut};
use gregor_actors::handlers::EncodedList;
pub(super) use gregor_actors::wire::put_uvarint;
use hashbrown::hash_table::Entry;
use hashbrown::{HashSet, HashTable};
use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResult;
use kafka_protocol::messages::{alter_client_quotas_response, incremental_alter_configs_response};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::Decodable;
use tokio::io::{AsyncWrite, AsyncWriteExt};

use super::acl_chunks::{AclResultsWriter, CreationAnswer, FilterAnswer};
use super::config_chunks::ConfigResultsWriter;
use super::dedup_decode::{array_length, need, uvarint};
use super::delete_topics_chunks::DeletionResultsWriter;
use super::election_chunks::ElectionResultsWriter;
use super::fetch_chunks::FetchList;
use super::list_offsets_chunks::ListOffsetsList;
use super::metadata_chunks::TopicsWriter;
use super::partition_chunks::PartitionsWriter;
use super::partition_list_chunks::{
    DeleteRecordsList, DescribeProducersList, DescribeQuorumList, OffsetCommitList,
    OffsetDeleteList, OffsetForLeaderEpochList,
};
use super::produce_chunks::ProduceList;
use super::quota_chunks::QuotaResultsWriter;
use super::reassignment_chunks::ReassignmentResultsWriter;
use super::scram_chunks::ScramResultsWriter;
use super::topic_list_chunks::{CreatePartitionsApi, CreateTopicsApi, TopicResultsWriter};

/// How the handler answers a list whose repeats were dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Answers {
    /// One answer per element in request order (a kept element may have none, see
    /// [`Shape::silent_repeat`]); dropped copies are answered as the second copy.
    EveryElement,
    /// One answer per distinct element, unless every kept element got its own (then as
    /// [`Answers::EveryElement`]).
    DistinctOrEvery,
    /// The list is a filter (a set): the answer does not depend on repeats and is sent as is.
    Filter,
}

/// Skips (or measures) one part of a message at a version.
pub(super) type Skip = fn(&mut Bytes, i16) -> anyhow::Result<()>;

/// Where a request's repeatable list is and how its elements and answers are laid out: the
/// request body is `prefix, list, rest`, the response body `prefix, answers, rest`.
struct Shape {
    flexible: bool,
    answers: Answers,
    skip_prefix: Skip,
    skip_element: Skip,
    skip_answers_prefix: Skip,
    skip_answer: Skip,
    /// For lists where a later element with the same key gets no answer at all (DeleteTopics
    /// skips a repeated name or id), the element's key.
    silent_repeat: Option<SilentRepeatKey>,
    /// A list inside each element whose repeats cannot change the element's one answer.
    inner: Option<Inner>,
}

/// A list inside an element, after `skip_before`: a repeated config key fails the whole
/// resource (IncrementalAlterConfigs, AlterConfigs), a repeated quota key the whole entry
/// (AlterClientQuotas), and the first failing item comes no later with its third copies gone,
/// so they are dropped too.
struct Inner {
    flexible: bool,
    skip_before: Skip,
    skip_item: Skip,
    /// The element's fields after the list (`None`: its tagged fields only).
    skip_after: Option<Skip>,
    /// When each item has its own answer, in order, inside the element's answer: the answer
    /// fields before that list and one item's answer. Then the element's answer is expanded
    /// as the request's list is, and elements are compared as they came, not reduced.
    answers: Option<(Skip, Skip)>,
}

/// An element's key when a later element with the same key gets no answer.
type SilentRepeatKey = fn(&[u8]) -> Option<Vec<u8>>;

/// Measures one element with the crate's decoder for it (elements whose own lists are not
/// the concern here: the element is dropped as soon as it is measured).
fn element<T: Decodable>(buf: &mut Bytes, version: i16) -> anyhow::Result<()> {
    T::decode(buf, version).map(drop)
}

fn nothing(_: &mut Bytes, _: i16) -> anyhow::Result<()> {
    Ok(())
}

/// `ThrottleTimeMs`, the field most responses start with.
fn throttle(buf: &mut Bytes, _: i16) -> anyhow::Result<()> {
    skip(buf, 4)
}

/// A list of strings (group ids): one string per element.
fn string_element<const FLEXIBLE_FROM: i16>(buf: &mut Bytes, version: i16) -> anyhow::Result<()> {
    skip_string(buf, version >= FLEXIBLE_FROM)
}

/// A shape answering every element, its list first in the request and after
/// `ThrottleTimeMs` in the response.
fn every(flexible: bool, skip_element: Skip, skip_answer: Skip) -> Shape {
    Shape {
        flexible,
        answers: Answers::EveryElement,
        skip_prefix: nothing,
        skip_element,
        skip_answers_prefix: throttle,
        skip_answer,
        silent_repeat: None,
        inner: None,
    }
}

/// A topic's partitions, answered one by one in the topic's answer (`name, partitions`
/// on both sides).
fn topic_partitions(flexible: bool, skip_item: Skip, skip_answer: Skip) -> Inner {
    let name: Skip = if flexible {
        |buf, _| skip_string(buf, true)
    } else {
        |buf, _| skip_string(buf, false)
    };
    Inner {
        flexible,
        skip_before: name,
        skip_item,
        skip_after: None,
        answers: Some((name, skip_answer)),
    }
}

fn shape(key: ApiKey, version: i16) -> Option<Shape> {
    use kafka_protocol::messages::{
        alter_configs_response, consumer_group_describe_response, create_acls_request,
        create_acls_response, delete_acls_request, delete_acls_response, delete_groups_response,
        delete_records_request, delete_records_response, describe_groups_response,
        describe_producers_request, describe_producers_response, find_coordinator_response,
        leave_group_request, leave_group_response, list_offsets_request, list_offsets_response,
        offset_commit_request, offset_commit_response, offset_delete_request,
        offset_delete_response, offset_fetch_request, offset_fetch_response,
        offset_for_leader_epoch_request, offset_for_leader_epoch_response,
    };
    use kafka_protocol::messages::{
        alter_partition_reassignments_request, alter_partition_reassignments_response,
        alter_user_scram_credentials_request, describe_user_scram_credentials_request,
        elect_leaders_request, elect_leaders_response, list_partition_reassignments_request,
    };
    let within = |min: i16, max: i16| (min..=max).contains(&version);
    Some(match key {
        ApiKey::IncrementalAlterConfigs if within(0, 1) => Shape {
            inner: Some(Inner {
                flexible: version >= 1,
                skip_before: |buf, version| {
                    skip(buf, 1)?;
                    skip_string(buf, version >= 1)
                },
                skip_item: |buf, version| {
                    let flexible = version >= 1;
                    skip_string(buf, flexible)?;
                    skip(buf, 1)?;
                    skip_string(buf, flexible)?;
                    skip_tagged_fields(buf, flexible)
                },
                skip_after: None,
                answers: None,
            }),
            ..every(
                version >= 1,
                |buf, version| skip_alter_configs_resource(buf, version >= 1, true),
                element::<incremental_alter_configs_response::AlterConfigsResourceResponse>,
            )
        },
        ApiKey::AlterConfigs if within(0, 2) => Shape {
            inner: Some(Inner {
                flexible: version >= 2,
                skip_before: |buf, version| {
                    skip(buf, 1)?;
                    skip_string(buf, version >= 2)
                },
                skip_item: |buf, version| {
                    let flexible = version >= 2;
                    skip_string(buf, flexible)?;
                    skip_string(buf, flexible)?;
                    skip_tagged_fields(buf, flexible)
                },
                skip_after: None,
                answers: None,
            }),
            ..every(
                version >= 2,
                |buf, version| skip_alter_configs_resource(buf, version >= 2, false),
                element::<alter_configs_response::AlterConfigsResourceResponse>,
            )
        },
        // A repeated partition index fails the topic at its second copy ("Found multiple
        // manual partition assignments"); the topic's answer is its own (`dedup_decode.rs`
        // keeps each name at most twice).
        ApiKey::CreateTopics if within(2, 7) => Shape {
            answers: Answers::Filter,
            inner: Some(Inner {
                flexible: version >= 5,
                skip_before: |buf, version| {
                    skip_string(buf, version >= 5)?;
                    skip(buf, 6)
                },
                skip_item: |buf, version| {
                    let flexible = version >= 5;
                    skip(buf, 4)?;
                    skip_array(buf, flexible, |buf| skip(buf, 4))?;
                    skip_tagged_fields(buf, flexible)
                },
                skip_after: Some(|buf, version| {
                    let flexible = version >= 5;
                    skip_array(buf, flexible, |buf| {
                        skip_string(buf, flexible)?;
                        skip_string(buf, flexible)?;
                        skip_tagged_fields(buf, flexible)
                    })?;
                    skip_tagged_fields(buf, flexible)
                }),
                answers: None,
            }),
            ..every(version >= 5, nothing, nothing)
        },
        ApiKey::DescribeConfigs if within(1, 4) => every(
            version >= 4,
            |buf, version| skip_describe_configs_resource(buf, version >= 4),
            element::<DescribeConfigsResult>,
        ),
        ApiKey::DeleteTopics if version == 6 => Shape {
            silent_repeat: Some(delete_topics_named_by),
            ..every(
                true,
                |buf, _| skip_delete_topic_state(buf, true),
                element::<DeletableTopicResult>,
            )
        },
        ApiKey::AlterClientQuotas if within(0, 1) => Shape {
            answers: Answers::DistinctOrEvery,
            inner: Some(Inner {
                flexible: version >= 1,
                skip_before: |buf, version| skip_quota_entity(buf, version >= 1),
                skip_item: |buf, version| skip_quota_op(buf, version >= 1),
                skip_after: None,
                answers: None,
            }),
            ..every(
                version >= 1,
                |buf, version| skip_quota_entry(buf, version >= 1),
                element::<alter_client_quotas_response::EntryData>,
            )
        },
        // The key type, then the keys (KIP-699); each key is located on its own.
        ApiKey::FindCoordinator if within(4, 6) => Shape {
            skip_prefix: |buf, _| skip(buf, 1),
            ..every(
                true,
                string_element::<4>,
                element::<find_coordinator_response::Coordinator>,
            )
        },
        ApiKey::DescribeGroups if within(1, 6) => every(
            version >= 5,
            string_element::<5>,
            element::<describe_groups_response::DescribedGroup>,
        ),
        ApiKey::DeleteGroups if within(0, 2) => every(
            version >= 2,
            string_element::<2>,
            element::<delete_groups_response::DeletableGroupResult>,
        ),
        ApiKey::ConsumerGroupDescribe if within(0, 1) => every(
            true,
            string_element::<0>,
            element::<consumer_group_describe_response::DescribedGroup>,
        ),
        ApiKey::OffsetFetch if within(8, 9) => Shape {
            inner: Some(Inner {
                flexible: true,
                skip_before: |buf, version| {
                    skip_string(buf, true)?;
                    if version >= 9 {
                        skip_string(buf, true)?;
                        skip(buf, 4)?;
                    }
                    Ok(())
                },
                skip_item: element::<offset_fetch_request::OffsetFetchRequestTopics>,
                skip_after: None,
                answers: Some((
                    |buf, _| skip_string(buf, true),
                    element::<offset_fetch_response::OffsetFetchResponseTopics>,
                )),
            }),
            ..every(
                true,
                element::<offset_fetch_request::OffsetFetchRequestGroup>,
                element::<offset_fetch_response::OffsetFetchResponseGroup>,
            )
        },
        ApiKey::OffsetCommit if within(3, 9) => Shape {
            skip_prefix: |buf, version| {
                let flexible = version >= 8;
                skip_string(buf, flexible)?;
                skip(buf, 4)?;
                skip_string(buf, flexible)?;
                if version <= 4 {
                    skip(buf, 8)?;
                }
                if version >= 7 {
                    skip_string(buf, flexible)?;
                }
                Ok(())
            },
            inner: Some(topic_partitions(
                version >= 8,
                element::<offset_commit_request::OffsetCommitRequestPartition>,
                element::<offset_commit_response::OffsetCommitResponsePartition>,
            )),
            ..every(
                version >= 8,
                element::<offset_commit_request::OffsetCommitRequestTopic>,
                element::<offset_commit_response::OffsetCommitResponseTopic>,
            )
        },
        // Members leave one after the other: a repeated one is not a member any more at its
        // second copy, and at every later copy alike.
        ApiKey::LeaveGroup if within(3, 5) => Shape {
            skip_prefix: |buf, version| skip_string(buf, version >= 4),
            skip_answers_prefix: |buf, _| skip(buf, 6),
            ..every(
                version >= 4,
                element::<leave_group_request::MemberIdentity>,
                element::<leave_group_response::MemberResponse>,
            )
        },
        // Answered per topic when the group has offsets, else with the group's error alone.
        ApiKey::OffsetDelete if version == 0 => Shape {
            answers: Answers::DistinctOrEvery,
            skip_prefix: |buf, _| skip_string(buf, false),
            skip_answers_prefix: |buf, _| skip(buf, 6),
            ..every(
                false,
                element::<offset_delete_request::OffsetDeleteRequestTopic>,
                element::<offset_delete_response::OffsetDeleteResponseTopic>,
            )
        },
        ApiKey::ElectLeaders if within(1, 2) => Shape {
            answers: Answers::DistinctOrEvery,
            skip_prefix: |buf, _| skip(buf, 1),
            skip_answers_prefix: |buf, _| skip(buf, 6),
            ..every(
                version >= 2,
                element::<elect_leaders_request::TopicPartitions>,
                element::<elect_leaders_response::ReplicaElectionResult>,
            )
        },
        ApiKey::AlterPartitionReassignments if within(0, 1) => Shape {
            answers: Answers::DistinctOrEvery,
            skip_prefix: |buf, version| skip(buf, if version >= 1 { 5 } else { 4 }),
            skip_answers_prefix: |buf, version| {
                skip(buf, if version >= 1 { 7 } else { 6 })?;
                skip_string(buf, true)
            },
            ..every(
                true,
                element::<alter_partition_reassignments_request::ReassignableTopic>,
                element::<alter_partition_reassignments_response::ReassignableTopicResponse>,
            )
        },
        // Filters: the answer is about the distinct names, however often they repeat.
        ApiKey::ListPartitionReassignments if version == 0 => Shape {
            answers: Answers::Filter,
            skip_prefix: |buf, _| skip(buf, 4),
            ..every(
                true,
                element::<list_partition_reassignments_request::ListPartitionReassignmentsTopics>,
                nothing,
            )
        },
        ApiKey::DescribeUserScramCredentials if version == 0 => Shape {
            answers: Answers::Filter,
            ..every(
                true,
                element::<describe_user_scram_credentials_request::UserName>,
                nothing,
            )
        },
        ApiKey::AlterUserScramCredentials if version == 0 => Shape {
            answers: Answers::Filter,
            ..every(
                true,
                element::<alter_user_scram_credentials_request::ScramCredentialDeletion>,
                nothing,
            )
        },
        ApiKey::CreateAcls if within(1, 3) => every(
            version >= 2,
            element::<create_acls_request::AclCreation>,
            element::<create_acls_response::AclCreationResult>,
        ),
        ApiKey::DeleteAcls if within(1, 3) => every(
            version >= 2,
            element::<delete_acls_request::DeleteAclsFilter>,
            element::<delete_acls_response::DeleteAclsFilterResult>,
        ),
        ApiKey::ListOffsets if within(2, 10) => Shape {
            skip_prefix: |buf, _| skip(buf, 5),
            inner: Some(topic_partitions(
                version >= 6,
                element::<list_offsets_request::ListOffsetsPartition>,
                element::<list_offsets_response::ListOffsetsPartitionResponse>,
            )),
            ..every(
                version >= 6,
                element::<list_offsets_request::ListOffsetsTopic>,
                element::<list_offsets_response::ListOffsetsTopicResponse>,
            )
        },
        ApiKey::OffsetForLeaderEpoch if within(3, 4) => Shape {
            skip_prefix: |buf, _| skip(buf, 4),
            inner: Some(topic_partitions(
                version >= 4,
                element::<offset_for_leader_epoch_request::OffsetForLeaderPartition>,
                element::<offset_for_leader_epoch_response::EpochEndOffset>,
            )),
            ..every(
                version >= 4,
                element::<offset_for_leader_epoch_request::OffsetForLeaderTopic>,
                element::<offset_for_leader_epoch_response::OffsetForLeaderTopicResult>,
            )
        },
        ApiKey::DescribeProducers if version == 0 => Shape {
            inner: Some(topic_partitions(
                true,
                |buf, _| skip(buf, 4),
                element::<describe_producers_response::PartitionResponse>,
            )),
            ..every(
                true,
                element::<describe_producers_request::TopicRequest>,
                element::<describe_producers_response::TopicResponse>,
            )
        },
        ApiKey::DeleteRecords if within(0, 2) => Shape {
            inner: Some(topic_partitions(
                version >= 2,
                element::<delete_records_request::DeleteRecordsPartition>,
                element::<delete_records_response::DeleteRecordsPartitionResult>,
            )),
            ..every(
                version >= 2,
                element::<delete_records_request::DeleteRecordsTopic>,
                element::<delete_records_response::DeleteRecordsTopicResult>,
            )
        },
        _ => return None,
    })
}

/// How a request's list and its answers are read when the list is answered element by
/// element, in order: the request body is `prefix, list, rest`, the response body `prefix
/// (starting with ThrottleTimeMs), answers, rest` (what `list_chunks.rs` needs to cut such a
/// list into shorter requests and join their answers).
pub(super) struct LeadingList {
    pub flexible: bool,
    pub skip_prefix: Skip,
    pub skip_element: Skip,
    pub skip_answers_prefix: Skip,
    pub skip_answer: Skip,
}

/// The [`LeadingList`] of `key` at `version` when its shape answers element by element.
pub(super) fn leading_list(key: ApiKey, version: i16) -> Option<LeadingList> {
    let shape = shape(key, version)
        .filter(|shape| shape.answers == Answers::EveryElement && shape.silent_repeat.is_none())?;
    Some(LeadingList {
        flexible: shape.flexible,
        skip_prefix: shape.skip_prefix,
        skip_element: shape.skip_element,
        skip_answers_prefix: shape.skip_answers_prefix,
        skip_answer: shape.skip_answer,
    })
}

/// A request frame with each distinct list element kept at most twice, and how to expand its
/// answer (`None` when the answer is sent as the handler gives it).
#[derive(Debug)]
pub struct Reduction {
    pub frame: Bytes,
    pub plan: Option<Plan>,
}

/// How the answer to a reduced request is expanded to one entry per original element.
#[derive(Debug)]
pub struct Plan {
    flexible: bool,
    answers: Answers,
    skip_answers_prefix: Skip,
    skip_answer: Skip,
    /// Per kept element, whether the handler answers it.
    answered: Vec<bool>,
    /// The original list as runs of (kept element whose answer is replayed, count).
    runs: Vec<(u32, u32)>,
    /// How each kept element's own list is expanded in its answer, when it was reduced.
    inner: Option<InnerAnswers>,
}

/// A reduced list inside an element: how many items were kept, and the list as runs of (kept
/// item whose answer is replayed, count).
type InnerList = (u32, Vec<(u32, u32)>);

/// The answers to the lists inside elements (see [`Inner::answers`]).
#[derive(Debug)]
struct InnerAnswers {
    flexible: bool,
    skip_before: Skip,
    skip_item: Skip,
    /// Per kept element: its kept items and its list as runs, when the list was reduced.
    lists: Vec<Option<InnerList>>,
}

/// Reduces `frame` (request header and body, no size prefix) when `key` at `version` has a
/// list this module handles and some element of it appears more than twice; `None` for other
/// requests, which are decoded as they are.
pub fn reduce(key: ApiKey, version: i16, frame: &Bytes) -> Option<anyhow::Result<Reduction>> {
    let shape = shape(key, version)?;
    Some(reduce_list(&shape, key, version, frame))
}

/// Where a kept element's bytes are: in the frame, or in the arena of rewritten elements (an
/// element whose own list was reduced).
#[derive(Clone, Copy, Debug)]
struct Span {
    start: u32,
    end: u32,
    rewritten: bool,
}

/// Keeps the first two copies of each distinct element (compared by bytes); a distinct element
/// costs eight bytes of table and twelve per kept copy, whatever its size.
struct KeepTwice {
    hasher: foldhash::fast::RandomState,
    /// Per distinct element: the kept index of its first copy and of its second (`u32::MAX`
    /// until seen).
    distinct: HashTable<(u32, u32)>,
    kept: Vec<Span>,
}

fn bytes_of<'a>(span: Span, frame: &'a [u8], arena: &'a [u8]) -> &'a [u8] {
    let source = if span.rewritten { arena } else { frame };
    &source[span.start as usize..span.end as usize]
}

impl KeepTwice {
    fn new() -> Self {
        KeepTwice {
            // Seeded per process, so a client cannot pick elements that collide.
            hasher: foldhash::fast::RandomState::default(),
            distinct: HashTable::new(),
            kept: Vec::new(),
        }
    }

    /// Offers the next element; returns the kept index whose answer it gets (its own when it
    /// is a first or second copy) and whether it was kept.
    fn offer(&mut self, span: Span, frame: &[u8], arena: &[u8]) -> anyhow::Result<(u32, bool)> {
        let element = bytes_of(span, frame, arena);
        let next = u32::try_from(self.kept.len())?;
        let kept = &self.kept;
        let hasher = &self.hasher;
        let first_copy = |entry: &(u32, u32)| bytes_of(kept[entry.0 as usize], frame, arena);
        let (answer_of, keep) = match self.distinct.entry(
            hasher.hash_one(element),
            |entry| first_copy(entry) == element,
            |entry| hasher.hash_one(first_copy(entry)),
        ) {
            Entry::Occupied(mut occupied) => {
                let (_, second) = occupied.get_mut();
                if *second == u32::MAX {
                    *second = next;
                    (next, true)
                } else {
                    (*second, false)
                }
            }
            Entry::Vacant(vacant) => {
                vacant.insert((next, u32::MAX));
                (next, true)
            }
        };
        if keep {
            self.kept.push(span);
        }
        Ok((answer_of, keep))
    }
}

fn offset(frame: &Bytes, rest: &Bytes) -> anyhow::Result<u32> {
    u32::try_from(frame.len() - rest.len()).map_err(|_| anyhow::anyhow!("frame over 4 GiB"))
}

/// Reduces the list inside one element (`span` of `frame`, not rewritten) to at most two
/// copies of each item, appending the rewritten element to `arena`; `None` when no item was
/// dropped.
fn reduce_inner(
    inner: &Inner,
    version: i16,
    frame: &Bytes,
    span: Span,
    arena: &mut BytesMut,
) -> anyhow::Result<Option<(Span, InnerList)>> {
    let mut rest = frame.slice(span.start as usize..span.end as usize);
    (inner.skip_before)(&mut rest, version)?;
    let list_start = span.end as usize - rest.len();
    let count = array_length(&mut rest, inner.flexible)?;
    if count <= 2 {
        return Ok(None);
    }
    let mut items = KeepTwice::new();
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for _ in 0..count {
        let start = span.end - u32::try_from(rest.len())?;
        (inner.skip_item)(&mut rest, version)?;
        let end = span.end - u32::try_from(rest.len())?;
        let item = Span {
            start,
            end,
            rewritten: false,
        };
        let (answer_of, _) = items.offer(item, frame, &[])?;
        push_run(&mut runs, answer_of);
    }
    if items.kept.len() as i64 == count {
        return Ok(None);
    }
    let start = u32::try_from(arena.len())?;
    arena.put_slice(&frame[span.start as usize..list_start]);
    put_array_length(arena, items.kept.len(), inner.flexible)?;
    for item in &items.kept {
        arena.put_slice(bytes_of(*item, frame, &[]));
    }
    arena.put_slice(&rest);
    let span = Span {
        start,
        end: u32::try_from(arena.len())?,
        rewritten: true,
    };
    Ok(Some((span, (u32::try_from(items.kept.len())?, runs))))
}

/// Measures the next element of the list.
fn measure(shape: &Shape, version: i16, frame: &Bytes, rest: &mut Bytes) -> anyhow::Result<Span> {
    let start = offset(frame, rest)?;
    match &shape.inner {
        // Measured field by field: the crate's decoder would build every item.
        Some(inner) => {
            (inner.skip_before)(rest, version)?;
            for _ in 0..array_length(rest, inner.flexible)?.max(0) {
                (inner.skip_item)(rest, version)?;
            }
            match inner.skip_after {
                Some(skip_after) => skip_after(rest, version)?,
                None => skip_tagged_fields(rest, inner.flexible)?,
            }
        }
        None => (shape.skip_element)(rest, version)?,
    }
    Ok(Span {
        start,
        end: offset(frame, rest)?,
        rewritten: false,
    })
}

/// A CreateTopics list too long to be decoded (`topic_list_chunks.rs` finds its repeated
/// names with four bytes per topic, where the table here costs ten times that): only each
/// topic's own list is reduced, and the frame is rebuilt only when one was.
fn reduce_each_inner(
    shape: &Shape,
    inner: &Inner,
    version: i16,
    frame: &Bytes,
    list: Bytes,
    list_start: usize,
    count: i64,
) -> anyhow::Result<Reduction> {
    let mut arena = BytesMut::new();
    let mut rest = list.clone();
    let mut reduced_any = false;
    for _ in 0..count {
        let span = measure(shape, version, frame, &mut rest)?;
        arena.clear();
        reduced_any |= reduce_inner(inner, version, frame, span, &mut arena)?.is_some();
    }
    if !reduced_any {
        return Ok(Reduction {
            frame: frame.clone(),
            plan: None,
        });
    }
    let mut reduced = BytesMut::with_capacity(frame.len());
    reduced.put_slice(&frame[..list_start]);
    put_array_length(&mut reduced, count as usize, shape.flexible)?;
    let mut rest = list;
    for _ in 0..count {
        let span = measure(shape, version, frame, &mut rest)?;
        arena.clear();
        match reduce_inner(inner, version, frame, span, &mut arena)? {
            Some((rewritten, _)) => reduced.put_slice(bytes_of(rewritten, frame, &arena)),
            None => reduced.put_slice(bytes_of(span, frame, &[])),
        }
    }
    reduced.put_slice(&rest);
    Ok(Reduction {
        frame: reduced.freeze(),
        plan: None,
    })
}

/// Adds one element answered as kept element `answer_of` to `runs`.
fn push_run(runs: &mut Vec<(u32, u32)>, answer_of: u32) {
    match runs.last_mut() {
        Some((kept_index, copies)) if *kept_index == answer_of => *copies += 1,
        _ => runs.push((answer_of, 1)),
    }
}

fn reduce_list(
    shape: &Shape,
    key: ApiKey,
    version: i16,
    frame: &Bytes,
) -> anyhow::Result<Reduction> {
    let unchanged = || Reduction {
        frame: frame.clone(),
        plan: None,
    };
    let mut rest = frame.clone();
    RequestHeader::decode(&mut rest, key.request_header_version(version))?;
    (shape.skip_prefix)(&mut rest, version)?;
    let list_start = frame.len() - rest.len();
    let count = array_length(&mut rest, shape.flexible)?;
    if count <= 0 || (count <= 2 && shape.inner.is_none()) {
        return Ok(unchanged());
    }
    let mut elements = KeepTwice::new();
    let mut arena = BytesMut::new();
    let mut runs: Vec<(u32, u32)> = Vec::new();
    // What is written for each kept element (rewritten when its own list was reduced).
    let mut kept: Vec<Span> = Vec::new();
    let inner_filter = shape.inner.as_ref().filter(|i| i.answers.is_none());
    let inner_answered = shape.inner.as_ref().filter(|i| i.answers.is_some());
    let mut inner_lists = Vec::new();
    // Decided from its frame (`scram_chunks.rs`, `acl_chunks.rs`, `quota_chunks.rs`), which answers repeats
    // without the table here, which costs several times the list.
    let decided_from_frame = match key {
        ApiKey::AlterUserScramCredentials => count > super::scram_chunks::CHUNK as i64,
        ApiKey::CreateAcls | ApiKey::DeleteAcls => count > super::acl_chunks::CHUNK as i64,
        ApiKey::AlterClientQuotas => count > super::quota_chunks::CHUNK as i64,
        _ => false,
    };
    if decided_from_frame {
        return Ok(unchanged());
    }
    if key == ApiKey::CreateTopics && count > super::topic_list_chunks::CHUNK as i64 {
        if let Some(inner) = inner_filter {
            return reduce_each_inner(shape, inner, version, frame, rest, list_start, count);
        }
    }
    for _ in 0..count {
        let mut span = measure(shape, version, frame, &mut rest)?;
        if let Some(inner) = inner_filter {
            if let Some((rewritten, _)) = reduce_inner(inner, version, frame, span, &mut arena)? {
                span = rewritten;
            }
        }
        let (answer_of, is_kept) = elements.offer(span, frame, &arena)?;
        if span.rewritten && !is_kept {
            arena.truncate(span.start as usize);
        }
        if is_kept {
            if let Some(inner) = inner_answered {
                let list = reduce_inner(inner, version, frame, span, &mut arena)?;
                inner_lists.push(list.map(|(rewritten, list)| {
                    span = rewritten;
                    list
                }));
            }
            kept.push(span);
        }
        push_run(&mut runs, answer_of);
    }
    drop(elements);
    if kept.len() as i64 == count && arena.is_empty() {
        return Ok(unchanged());
    }
    let kept_bytes: usize = kept.iter().map(|s| (s.end - s.start) as usize).sum();
    let mut reduced = BytesMut::with_capacity(list_start + 5 + kept_bytes + rest.len());
    reduced.put_slice(&frame[..list_start]);
    put_array_length(&mut reduced, kept.len(), shape.flexible)?;
    for span in &kept {
        reduced.put_slice(bytes_of(*span, frame, &arena));
    }
    reduced.put_slice(&rest);
    let inner_reduced = inner_lists.iter().any(Option::is_some);
    if shape.answers == Answers::Filter || (kept.len() as i64 == count && !inner_reduced) {
        return Ok(Reduction {
            frame: reduced.freeze(),
            plan: None,
        });
    }
    let answered = match shape.silent_repeat {
        None => vec![true; kept.len()],
        Some(key_of) => {
            let mut keys = HashSet::new();
            kept.iter()
                .map(|span| key_of(bytes_of(*span, frame, &arena)).is_none_or(|k| keys.insert(k)))
                .collect()
        }
    };
    Ok(Reduction {
        frame: reduced.freeze(),
        plan: Some(Plan {
            flexible: shape.flexible,
            answers: shape.answers,
            skip_answers_prefix: shape.skip_answers_prefix,
            skip_answer: shape.skip_answer,
            answered,
            runs,
            inner: inner_answered
                .and_then(|inner| inner.answers.map(|answers| (inner.flexible, answers)))
                .filter(|_| inner_reduced)
                .map(|(flexible, (skip_before, skip_item))| InnerAnswers {
                    flexible,
                    skip_before,
                    skip_item,
                    lists: inner_lists,
                }),
        }),
    })
}

/// A response written to the socket: whole, or expanded from a reduced request's answer.
#[derive(Debug)]
pub enum ResponseBytes {
    Whole(Bytes),
    /// A Fetch answer whose record batches are written from the log shards' buffers.
    Parts(super::fetch_parts::Parts),
    Expanded(Expanded),
    /// A Metadata answer whose topics are decided again as they are written.
    Chunked(Chunked),
    /// An EnvelopeResponse around an inner answer written as it is encoded.
    Enveloped(Box<super::forwarded::Enveloped>),
    /// A forwarded answer copied from the controller's connection as it arrives.
    Forwarded(Box<super::forwarded::StreamedAnswer>),
    /// A forwarded CreateTopics answer followed by the answers of the topics denied here.
    Extended(Box<super::forwarded::Extended>),
    /// An answer to many group ids, decided a chunk at a time and kept compressed.
    Listed(Box<super::list_chunks::ChunkedAnswer>),
}

/// The largest encoded list copied into its answer's buffer (see [`splice_topics`]).
const COPIED_LIST_BYTES: usize = 64 * 1024;

/// The longest array length prefix: an i32, or a varint of a `u32` (five bytes).
const MAX_ARRAY_LENGTH_BYTES: usize = 5;

/// An answer whose list is written by a [`ListWriter`] between its head and tail.
#[derive(Debug)]
pub struct Chunked {
    size: i32,
    head: Bytes,
    list_length: BytesMut,
    topics: ListWriter,
    tail: Bytes,
}

/// Writes the list of a chunked answer: Metadata's topics, Produce's, Fetch's or CreateTopics'.
#[derive(Debug)]
pub enum ListWriter {
    Metadata(Box<TopicsWriter>),
    /// An all-topics Metadata answer's topics, encoded by the handler.
    EncodedMetadata(EncodedList),
    /// An ApiVersions answer's api keys, encoded once by the handler.
    EncodedApiKeys(EncodedList),
    Produce(PartitionsWriter<ProduceList>),
    Fetch(PartitionsWriter<FetchList>),
    CreateTopics(TopicResultsWriter<CreateTopicsApi>),
    CreatePartitions(TopicResultsWriter<CreatePartitionsApi>),
    ListOffsets(PartitionsWriter<ListOffsetsList>),
    OffsetForLeaderEpoch(PartitionsWriter<OffsetForLeaderEpochList>),
    DescribeProducers(PartitionsWriter<DescribeProducersList>),
    DeleteRecords(PartitionsWriter<DeleteRecordsList>),
    OffsetCommit(PartitionsWriter<OffsetCommitList>),
    OffsetDelete(PartitionsWriter<OffsetDeleteList>),
    DescribeQuorum(PartitionsWriter<DescribeQuorumList>),
    DeleteTopics(DeletionResultsWriter),
    AlterScram(ScramResultsWriter),
    AlterClientQuotas(QuotaResultsWriter),
    AlterConfigs(Box<ConfigResultsWriter>),
    IncrementalAlterConfigs(Box<ConfigResultsWriter>),
    ElectLeaders(ElectionResultsWriter),
    AlterReassignments(ReassignmentResultsWriter),
    CreateAcls(AclResultsWriter<CreationAnswer>),
    DeleteAcls(AclResultsWriter<FilterAnswer>),
}

impl ListWriter {
    /// How many elements the list holds.
    fn count(&self) -> usize {
        match self {
            ListWriter::Metadata(topics) => topics.count,
            ListWriter::EncodedMetadata(topics) | ListWriter::EncodedApiKeys(topics) => {
                topics.count
            }
            ListWriter::Produce(topics) => topics.count(),
            ListWriter::Fetch(topics) => topics.count(),
            ListWriter::CreateTopics(topics) => topics.count(),
            ListWriter::CreatePartitions(topics) => topics.count(),
            ListWriter::ListOffsets(topics) => topics.count(),
            ListWriter::OffsetForLeaderEpoch(topics) => topics.count(),
            ListWriter::DescribeProducers(topics) => topics.count(),
            ListWriter::DeleteRecords(topics) => topics.count(),
            ListWriter::OffsetCommit(topics) => topics.count(),
            ListWriter::OffsetDelete(topics) => topics.count(),
            ListWriter::DescribeQuorum(topics) => topics.count(),
            ListWriter::DeleteTopics(topics) => topics.count(),
            ListWriter::AlterScram(users) => users.count(),
            ListWriter::AlterClientQuotas(entries) => entries.count(),
            ListWriter::AlterConfigs(resources)
            | ListWriter::IncrementalAlterConfigs(resources) => resources.count(),
            ListWriter::ElectLeaders(topics) => topics.count(),
            ListWriter::AlterReassignments(topics) => topics.count(),
            ListWriter::CreateAcls(results) => results.count(),
            ListWriter::DeleteAcls(results) => results.count(),
        }
    }

    /// The list's encoded size, without its length.
    fn len(&self) -> usize {
        match self {
            ListWriter::Metadata(topics) => topics.len(),
            ListWriter::EncodedMetadata(topics) | ListWriter::EncodedApiKeys(topics) => {
                topics.bytes.len()
            }
            ListWriter::Produce(topics) => topics.len(),
            ListWriter::Fetch(topics) => topics.len(),
            ListWriter::CreateTopics(topics) => topics.len(),
            ListWriter::CreatePartitions(topics) => topics.len(),
            ListWriter::ListOffsets(topics) => topics.len(),
            ListWriter::OffsetForLeaderEpoch(topics) => topics.len(),
            ListWriter::DescribeProducers(topics) => topics.len(),
            ListWriter::DeleteRecords(topics) => topics.len(),
            ListWriter::OffsetCommit(topics) => topics.len(),
            ListWriter::OffsetDelete(topics) => topics.len(),
            ListWriter::DescribeQuorum(topics) => topics.len(),
            ListWriter::DeleteTopics(topics) => topics.len(),
            ListWriter::AlterScram(users) => users.len(),
            ListWriter::AlterClientQuotas(entries) => entries.len(),
            ListWriter::AlterConfigs(resources)
            | ListWriter::IncrementalAlterConfigs(resources) => resources.len(),
            ListWriter::ElectLeaders(topics) => topics.len(),
            ListWriter::AlterReassignments(topics) => topics.len(),
            ListWriter::CreateAcls(results) => results.len(),
            ListWriter::DeleteAcls(results) => results.len(),
        }
    }

    /// The list's bytes, when the handler encoded them and they are few enough to be copied
    /// into the answer's buffer (see [`splice_topics`]).
    fn copied_into_answer(&self) -> Option<&Bytes> {
        match self {
            ListWriter::EncodedMetadata(list) | ListWriter::EncodedApiKeys(list) => {
                Some(&list.bytes).filter(|bytes| bytes.len() <= COPIED_LIST_BYTES)
            }
            _ => None,
        }
    }

    /// Where the list's empty stand-in ends in an encoded response of `response_len` bytes
    /// (size prefix, header, body) at `version`, as bytes before the body's end, and whether
    /// the version is flexible.
    fn list_end(&self, version: i16, response_len: usize) -> (usize, bool) {
        match self {
            // After the topics: ClusterAuthorizedOperations (v8-10), the error code (v13+),
            // then tagged fields (v9+).
            ListWriter::Metadata(_) | ListWriter::EncodedMetadata(_) => (
                if (8..=10).contains(&version) { 4 } else { 0 }
                    + if version >= 13 { 2 } else { 0 }
                    + usize::from(version >= 9),
                version >= 9,
            ),
            // After the topics: tagged fields (v5+).
            ListWriter::CreateTopics(_) => (usize::from(version >= 5), version >= 5),
            // After the topics: tagged fields (v2+).
            ListWriter::CreatePartitions(_) => (usize::from(version >= 2), version >= 2),
            // After the topics: tagged fields (v6+).
            ListWriter::ListOffsets(_) => (usize::from(version >= 6), version >= 6),
            // After the topics: tagged fields (v4+).
            ListWriter::OffsetForLeaderEpoch(_) => (usize::from(version >= 4), version >= 4),
            // After the topics: tagged fields (every version is flexible).
            ListWriter::DescribeProducers(_) => (1, true),
            // After the topics: tagged fields (v2+).
            ListWriter::DeleteRecords(_) => (usize::from(version >= 2), version >= 2),
            // After the topics: tagged fields (v8+).
            ListWriter::OffsetCommit(_) => (usize::from(version >= 8), version >= 8),
            // The topics end the body (v0 is not flexible).
            ListWriter::OffsetDelete(_) => (0, false),
            // After the topics: the nodes (v2+, none in an answer naming no partition of the
            // quorum), then tagged fields (every version is flexible).
            ListWriter::DescribeQuorum(_) => (1 + usize::from(version >= 2), true),
            // After the topics: tagged fields (v4+).
            ListWriter::DeleteTopics(_) => (usize::from(version >= 4), version >= 4),
            // After the results: tagged fields (every version is flexible).
            ListWriter::AlterScram(_) => (1, true),
            // After the entries: tagged fields (v1+).
            ListWriter::AlterClientQuotas(_) => (usize::from(version >= 1), version >= 1),
            // After the resources: tagged fields (AlterConfigs v2+, IncrementalAlterConfigs
            // v1+).
            ListWriter::AlterConfigs(_) => (usize::from(version >= 2), version >= 2),
            ListWriter::IncrementalAlterConfigs(_) => (usize::from(version >= 1), version >= 1),
            // After the topics: tagged fields (v2+).
            ListWriter::ElectLeaders(_) => (usize::from(version >= 2), version >= 2),
            // After the topics: tagged fields (every version is flexible).
            ListWriter::AlterReassignments(_) => (1, true),
            // After the results: tagged fields (v2+).
            ListWriter::CreateAcls(_) | ListWriter::DeleteAcls(_) => {
                (usize::from(version >= 2), version >= 2)
            }
            // After the topics come tagged fields that vary (Produce's leaders from v10), so
            // the list is found from the front: the response header, then what the body has
            // before its topics (Produce nothing, Fetch its throttle time, error code and
            // session id, ApiVersions its error code), then the empty list.
            ListWriter::Produce(_) | ListWriter::Fetch(_) | ListWriter::EncodedApiKeys(_) => {
                let (flexible, before) = match self {
                    ListWriter::Fetch(_) => (version >= 12, 4 + if version >= 7 { 6 } else { 0 }),
                    ListWriter::EncodedApiKeys(_) => (version >= 3, 2),
                    _ => (version >= 9, 0),
                };
                // ApiVersions' answer has the v0 header at every version (KIP-511).
                let header = match self {
                    ListWriter::EncodedApiKeys(_) => 4,
                    _ if flexible => 5,
                    _ => 4,
                };
                let empty = if flexible { 1 } else { 4 };
                (
                    response_len.saturating_sub(4 + header + before + empty),
                    flexible,
                )
            }
        }
    }

    async fn write_to<W: AsyncWrite + Unpin + Send>(&self, out: &mut W) -> std::io::Result<()> {
        match self {
            ListWriter::Metadata(topics) => topics.write_to(out).await,
            ListWriter::EncodedMetadata(topics) | ListWriter::EncodedApiKeys(topics) => {
                out.write_all(&topics.bytes).await
            }
            ListWriter::Produce(topics) => topics.write_to(out).await,
            ListWriter::Fetch(topics) => topics.write_to(out).await,
            ListWriter::CreateTopics(topics) => topics.write_to(out).await,
            ListWriter::CreatePartitions(topics) => topics.write_to(out).await,
            ListWriter::ListOffsets(topics) => topics.write_to(out).await,
            ListWriter::OffsetForLeaderEpoch(topics) => topics.write_to(out).await,
            ListWriter::DescribeProducers(topics) => topics.write_to(out).await,
            ListWriter::DeleteRecords(topics) => topics.write_to(out).await,
            ListWriter::OffsetCommit(topics) => topics.write_to(out).await,
            ListWriter::OffsetDelete(topics) => topics.write_to(out).await,
            ListWriter::DescribeQuorum(topics) => topics.write_to(out).await,
            ListWriter::DeleteTopics(topics) => topics.write_to(out).await,
            ListWriter::AlterScram(users) => users.write_to(out).await,
            ListWriter::AlterClientQuotas(entries) => entries.write_to(out).await,
            ListWriter::AlterConfigs(resources)
            | ListWriter::IncrementalAlterConfigs(resources) => resources.write_to(out).await,
            ListWriter::ElectLeaders(topics) => topics.write_to(out).await,
            ListWriter::AlterReassignments(topics) => topics.write_to(out).await,
            ListWriter::CreateAcls(results) => results.write_to(out).await,
            ListWriter::DeleteAcls(results) => results.write_to(out).await,
        }
    }
}

impl std::fmt::Debug for TopicsWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TopicsWriter")
            .field("count", &self.count)
            .finish_non_exhaustive()
    }
}

impl ResponseBytes {
    /// Writes the response (size prefix included).
    pub async fn write_to<W: AsyncWrite + Unpin + Send>(&self, out: &mut W) -> std::io::Result<()> {
        match self {
            ResponseBytes::Enveloped(enveloped) => enveloped.write_to(out).await,
            ResponseBytes::Forwarded(answer) => answer.write_to(out).await,
            ResponseBytes::Extended(answer) => answer.write_to(out).await,
            unwrapped => unwrapped.write_unwrapped_to(out).await,
        }
    }

    /// Writes a response that is not itself an envelope's or a forwarded one, which is what
    /// an envelope holds (nothing is forwarded twice).
    pub(crate) async fn write_unwrapped_to<W: AsyncWrite + Unpin + Send>(
        &self,
        out: &mut W,
    ) -> std::io::Result<()> {
        match self {
            ResponseBytes::Whole(bytes) => out.write_all(bytes).await,
            ResponseBytes::Parts(parts) => parts.write_to(out).await,
            ResponseBytes::Expanded(expanded) => expanded.write_to(out).await,
            ResponseBytes::Chunked(chunked) => {
                let mut head = BytesMut::with_capacity(4 + chunked.head.len() + 5);
                head.put_i32(chunked.size);
                head.put_slice(&chunked.head);
                head.put_slice(&chunked.list_length);
                out.write_all(&head).await?;
                chunked.topics.write_to(out).await?;
                out.write_all(&chunked.tail).await
            }
            ResponseBytes::Listed(answer) => answer.write_to(out).await,
            ResponseBytes::Enveloped(_)
            | ResponseBytes::Forwarded(_)
            | ResponseBytes::Extended(_) => Err(std::io::Error::other(
                "an envelope's or a forwarded answer inside an envelope",
            )),
        }
    }

    /// The response's size on the wire, size prefix included.
    pub fn len(&self) -> usize {
        match self {
            ResponseBytes::Whole(bytes) => bytes.len(),
            ResponseBytes::Parts(parts) => parts.len(),
            ResponseBytes::Expanded(expanded) => 4 + expanded.size as usize,
            ResponseBytes::Chunked(chunked) => 4 + chunked.size as usize,
            ResponseBytes::Enveloped(enveloped) => enveloped.len(),
            ResponseBytes::Forwarded(answer) => answer.len(),
            ResponseBytes::Extended(answer) => answer.len(),
            ResponseBytes::Listed(answer) => answer.len(),
        }
    }

    /// Whether the response is empty (never, for an encoded response).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// An answer with one entry per original element, described rather than built: the response
/// header and throttle time, the list's length, each kept element's encoded answer replayed
/// per run, then the rest of the body.
#[derive(Debug)]
pub struct Expanded {
    size: i32,
    head: Bytes,
    list_length: BytesMut,
    answers: Vec<Answer>,
    runs: Vec<(u32, u32)>,
    tail: Bytes,
}

/// One kept element's encoded answer: as the handler gave it, or with its own list of answers
/// expanded the same way (head, list length, item answers replayed per run, tail).
#[derive(Debug)]
enum Answer {
    Flat(Bytes),
    Nested {
        head: Bytes,
        list_length: BytesMut,
        items: Vec<Bytes>,
        runs: Vec<(u32, u32)>,
        tail: Bytes,
        size: usize,
    },
}

impl Answer {
    fn len(&self) -> usize {
        match self {
            Answer::Flat(bytes) => bytes.len(),
            Answer::Nested { size, .. } => *size,
        }
    }
}

/// Bytes gathered before each socket write.
const WRITE_CHUNK: usize = 64 * 1024;

/// Writes through a buffer of [`WRITE_CHUNK`] bytes.
struct Chunks<'a, W> {
    out: &'a mut W,
    chunk: BytesMut,
}

impl<W: AsyncWrite + Unpin> Chunks<'_, W> {
    async fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.chunk.len() + bytes.len() > WRITE_CHUNK && !self.chunk.is_empty() {
            self.out.write_all(&self.chunk).await?;
            self.chunk.clear();
        }
        self.chunk.put_slice(bytes);
        Ok(())
    }

    async fn put_answer(&mut self, answer: &Answer) -> std::io::Result<()> {
        match answer {
            Answer::Flat(bytes) => self.put(bytes).await,
            Answer::Nested {
                head,
                list_length,
                items,
                runs,
                tail,
                ..
            } => {
                self.put(head).await?;
                self.put(list_length).await?;
                for (kept, copies) in runs {
                    for _ in 0..*copies {
                        self.put(&items[*kept as usize]).await?;
                    }
                }
                self.put(tail).await
            }
        }
    }
}

impl Expanded {
    async fn write_to<W: AsyncWrite + Unpin>(&self, out: &mut W) -> std::io::Result<()> {
        let mut chunks = Chunks {
            out,
            chunk: BytesMut::with_capacity(WRITE_CHUNK),
        };
        chunks.put(&self.size.to_be_bytes()).await?;
        chunks.put(&self.head).await?;
        chunks.put(&self.list_length).await?;
        for (kept, copies) in &self.runs {
            let answer = &self.answers[*kept as usize];
            if answer.len() == 0 {
                continue;
            }
            for _ in 0..*copies {
                chunks.put_answer(answer).await?;
            }
        }
        chunks.put(&self.tail).await?;
        chunks.out.write_all(&chunks.chunk).await
    }

    /// The expanded response in one buffer (tests compare it with the crate's encoding).
    pub fn to_bytes(&self) -> Bytes {
        let mut out = Vec::new();
        let written = futures::executor::block_on(self.write_to(&mut out));
        debug_assert!(written.is_ok(), "writing to a Vec cannot fail");
        Bytes::from(out)
    }
}

impl Plan {
    /// Expands `response` (size prefix, header, body: the handler's answer to the reduced
    /// request). A response whose answers do not match the kept elements one to one (a
    /// distinct-only answer, or a handler that answered otherwise) is sent as it is.
    pub fn expand(
        &self,
        response: Bytes,
        header_version: i16,
        version: i16,
    ) -> anyhow::Result<ResponseBytes> {
        let mut rest = response.slice(4.min(response.len())..);
        ResponseHeader::decode(&mut rest, header_version)?;
        (self.skip_answers_prefix)(&mut rest, version)?;
        let head = response.slice(4..response.len() - rest.len());
        let count = array_length(&mut rest, self.flexible)?;
        let expected = self.answered.iter().filter(|a| **a).count();
        if count != expected as i64 {
            if self.answers == Answers::EveryElement {
                tracing::warn!(
                    answers = count,
                    expected,
                    "a reduced request's answer does not match its elements; sent unexpanded"
                );
            }
            return Ok(ResponseBytes::Whole(response));
        }
        let mut answers = Vec::with_capacity(self.answered.len());
        for (index, answered) in self.answered.iter().enumerate() {
            if !*answered {
                answers.push(Answer::Flat(Bytes::new()));
                continue;
            }
            let start = response.len() - rest.len();
            (self.skip_answer)(&mut rest, version)?;
            let answer = response.slice(start..response.len() - rest.len());
            let list = self
                .inner
                .as_ref()
                .and_then(|inner| Some((inner, inner.lists.get(index)?.as_ref()?)));
            answers.push(match list {
                Some((inner, (items, runs))) => expand_inner(inner, answer, *items, runs, version)?,
                None => Answer::Flat(answer),
            });
        }
        let mut entries = 0usize;
        let mut entry_bytes = 0usize;
        for (kept, copies) in &self.runs {
            let answer = answers
                .get(*kept as usize)
                .ok_or_else(|| anyhow::anyhow!("a run names no kept element"))?;
            if answer.len() > 0 {
                entries += *copies as usize;
                entry_bytes += answer.len() * *copies as usize;
            }
        }
        let mut list_length = BytesMut::new();
        put_array_length(&mut list_length, entries, self.flexible)?;
        let size = head.len() + list_length.len() + entry_bytes + rest.len();
        let size = i32::try_from(size)
            .map_err(|_| anyhow::anyhow!("the expanded response is {size} bytes, over 2 GiB"))?;
        Ok(ResponseBytes::Expanded(Expanded {
            size,
            head,
            list_length,
            answers,
            runs: self.runs.clone(),
            tail: rest,
        }))
    }
}

/// Expands the list of answers inside one element's answer, `items` of them for the kept
/// items; an answer without that many (an element refused whole, with no item answers) is
/// kept as it is.
fn expand_inner(
    inner: &InnerAnswers,
    answer: Bytes,
    items: u32,
    runs: &[(u32, u32)],
    version: i16,
) -> anyhow::Result<Answer> {
    let mut rest = answer.clone();
    (inner.skip_before)(&mut rest, version)?;
    let head = answer.slice(..answer.len() - rest.len());
    if array_length(&mut rest, inner.flexible)? != i64::from(items) {
        return Ok(Answer::Flat(answer));
    }
    let mut answers = Vec::with_capacity(items as usize);
    for _ in 0..items {
        let start = answer.len() - rest.len();
        (inner.skip_item)(&mut rest, version)?;
        answers.push(answer.slice(start..answer.len() - rest.len()));
    }
    let mut count = 0usize;
    let mut bytes = 0usize;
    for (kept, copies) in runs {
        let item = answers
            .get(*kept as usize)
            .ok_or_else(|| anyhow::anyhow!("a run names no kept item"))?;
        count += *copies as usize;
        bytes += item.len() * *copies as usize;
    }
    let mut list_length = BytesMut::new();
    put_array_length(&mut list_length, count, inner.flexible)?;
    let size = head.len() + list_length.len() + bytes + rest.len();
    Ok(Answer::Nested {
        head,
        list_length,
        items: answers,
        runs: runs.to_vec(),
        tail: rest,
        size,
    })
}

/// The size of an answer's list encoded a piece at a time by `next`, measured before it is
/// written (its size prefix comes first).
pub(super) fn pieces_size(
    mut next: impl FnMut() -> anyhow::Result<Option<BytesMut>>,
) -> anyhow::Result<usize> {
    let mut size = 0;
    while let Some(piece) = next()? {
        size += piece.len();
    }
    Ok(size)
}

/// Where an answer's list comes from when it is encoded a piece at a time.
pub trait PieceSource {
    /// The request, for the log.
    const API: &'static str;

    /// The list's entries encoded a piece at a time, from the first.
    fn pieces(&self) -> impl FnMut() -> anyhow::Result<Option<BytesMut>> + Send + '_;
}

/// An answer's list of `count` entries, written a piece at a time from its source and never
/// held whole; its size is counted by a first encoding, since the size prefix goes first.
pub struct PiecesWriter<S> {
    source: S,
    count: usize,
    size: usize,
}

impl<S: PieceSource> PiecesWriter<S> {
    pub(super) fn new(source: S, count: usize) -> anyhow::Result<Self> {
        let size = pieces_size(source.pieces())?;
        Ok(PiecesWriter {
            source,
            count,
            size,
        })
    }

    /// How many entries the list holds.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The list's encoded size, without its length.
    pub(crate) fn len(&self) -> usize {
        self.size
    }

    /// Writes the list, encoding it a piece at a time.
    pub(crate) async fn write_to<W: AsyncWrite + Unpin + Send>(
        &self,
        out: &mut W,
    ) -> std::io::Result<()> {
        write_pieces(out, self.size, S::API, self.source.pieces()).await
    }
}

#[cfg(test)]
impl<S: PieceSource> PiecesWriter<S> {
    /// Writes the list and reads it back as `T`s encoded at `version`, checking it is the
    /// size and count announced.
    pub(super) fn written_as<T: Decodable>(&self, version: i16) -> anyhow::Result<Vec<T>> {
        let mut written = Vec::new();
        futures::executor::block_on(self.write_to(&mut written))?;
        if written.len() != self.size {
            bail!("{} bytes written, {} announced", written.len(), self.size);
        }
        let mut written = Bytes::from(written);
        let mut entries = Vec::new();
        while !written.is_empty() {
            entries.push(T::decode(&mut written, version)?);
        }
        if entries.len() != self.count {
            bail!(
                "{} entries written, {} announced",
                entries.len(),
                self.count
            );
        }
        Ok(entries)
    }
}

impl<S: PieceSource> std::fmt::Debug for PiecesWriter<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PiecesWriter")
            .field("api", &S::API)
            .field("count", &self.count)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// Writes an answer's list encoded a piece at a time by `next`, and checks it adds up to the
/// `announced` size (the size prefix was sent before): `api` names the request in the log.
pub(super) async fn write_pieces<W: AsyncWrite + Unpin + Send>(
    out: &mut W,
    announced: usize,
    api: &str,
    mut next: impl FnMut() -> anyhow::Result<Option<BytesMut>>,
) -> std::io::Result<()> {
    let failed = |detail: String| {
        tracing::warn!(%detail, api, "a chunked answer could not be written");
        std::io::Error::other(detail)
    };
    let mut written = 0;
    while let Some(piece) = next().map_err(|e| failed(e.to_string()))? {
        written += piece.len();
        out.write_all(&piece).await?;
    }
    if written != announced {
        return Err(failed(format!(
            "{written} bytes written, {announced} announced"
        )));
    }
    Ok(())
}

/// An unsigned varint read from `bytes` at `at` (moved past it), leniently: it ends at the
/// slice's end or after five bytes (for elements that were read whole before).
pub(super) fn uvarint_at(bytes: &[u8], at: &mut usize) -> u64 {
    let mut value = 0u64;
    for shift in (0..35).step_by(7) {
        let Some(byte) = bytes.get(*at) else { break };
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
    }
    value
}

/// An array's length (-1 for null): compact (length + 1 as a varint) when `flexible`, else an
/// i32.
pub(super) fn put_array_length(
    out: &mut impl BufMut,
    length: usize,
    flexible: bool,
) -> anyhow::Result<()> {
    if flexible {
        let compact = u32::try_from(length + 1)?;
        put_uvarint(out, compact);
    } else {
        out.put_i32(i32::try_from(length)?);
    }
    Ok(())
}

pub(super) fn skip(buf: &mut Bytes, n: usize) -> anyhow::Result<()> {
    need(buf, n)?;
    buf.advance(n);
    Ok(())
}

/// A string or nullable string (null is left for the crate to refuse where it must not be).
pub(super) fn skip_string(buf: &mut Bytes, flexible: bool) -> anyhow::Result<()> {
    let length = if flexible {
        i64::from(uvarint(buf)?) - 1
    } else {
        need(buf, 2)?;
        i64::from(buf.get_i16())
    };
    if length > 0 {
        skip(buf, length as usize)?;
    }
    Ok(())
}

pub(super) fn skip_tagged_fields(buf: &mut Bytes, flexible: bool) -> anyhow::Result<()> {
    if flexible {
        for _ in 0..uvarint(buf)? {
            uvarint(buf)?;
            let size = uvarint(buf)? as usize;
            skip(buf, size)?;
        }
    }
    Ok(())
}

/// An array of `skip_item`s (each at least one byte, so a huge claimed length ends at the
/// frame's end).
fn skip_array(
    buf: &mut Bytes,
    flexible: bool,
    skip_item: impl Fn(&mut Bytes) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    for _ in 0..array_length(buf, flexible)?.max(0) {
        need(buf, 1)?;
        skip_item(buf)?;
    }
    Ok(())
}

/// IncrementalAlterConfigs' and AlterConfigs' `AlterConfigsResource` (`incremental`: each
/// config has an operation byte).
fn skip_alter_configs_resource(
    buf: &mut Bytes,
    flexible: bool,
    incremental: bool,
) -> anyhow::Result<()> {
    skip(buf, 1)?;
    skip_string(buf, flexible)?;
    skip_array(buf, flexible, |buf| {
        skip_string(buf, flexible)?;
        if incremental {
            skip(buf, 1)?;
        }
        skip_string(buf, flexible)?;
        skip_tagged_fields(buf, flexible)
    })?;
    skip_tagged_fields(buf, flexible)
}

/// DescribeConfigs' `DescribeConfigsResource`.
fn skip_describe_configs_resource(buf: &mut Bytes, flexible: bool) -> anyhow::Result<()> {
    skip(buf, 1)?;
    skip_string(buf, flexible)?;
    skip_array(buf, flexible, |buf| skip_string(buf, flexible))?;
    skip_tagged_fields(buf, flexible)
}

/// DeleteTopics v6's `DeleteTopicState`.
fn skip_delete_topic_state(buf: &mut Bytes, flexible: bool) -> anyhow::Result<()> {
    skip_string(buf, flexible)?;
    skip(buf, 16)?;
    skip_tagged_fields(buf, flexible)
}

/// What a DeleteTopics v6 entry names when it names a topic by name only or by id only: the
/// controller answers a repeat of it once, at its first appearance.
fn delete_topics_named_by(element: &[u8]) -> Option<Vec<u8>> {
    let mut buf = Bytes::copy_from_slice(element);
    let length = i64::from(uvarint(&mut buf).ok()?) - 1;
    let name = (length >= 0).then(|| buf.split_to((length as usize).min(buf.len())));
    let id = buf.get(..16)?;
    let nil = id.iter().all(|b| *b == 0);
    match (name, nil) {
        (Some(name), true) => Some([b"n".as_slice(), &name].concat()),
        (None, false) => Some([b"i".as_slice(), id].concat()),
        _ => None,
    }
}

/// AlterClientQuotas' entity, before its ops.
fn skip_quota_entity(buf: &mut Bytes, flexible: bool) -> anyhow::Result<()> {
    skip_array(buf, flexible, |buf| {
        skip_string(buf, flexible)?;
        skip_string(buf, flexible)?;
        skip_tagged_fields(buf, flexible)
    })
}

fn skip_quota_op(buf: &mut Bytes, flexible: bool) -> anyhow::Result<()> {
    skip_string(buf, flexible)?;
    skip(buf, 9)?;
    skip_tagged_fields(buf, flexible)
}

/// AlterClientQuotas' `EntryData`.
pub(super) fn skip_quota_entry(buf: &mut Bytes, flexible: bool) -> anyhow::Result<()> {
    skip_quota_entity(buf, flexible)?;
    skip_array(buf, flexible, |buf| skip_quota_op(buf, flexible))?;
    skip_tagged_fields(buf, flexible)
}

/// Puts the list a [`ListWriter`] writes into `response` (size prefix, header, body, encoded
/// at `version` with an empty list) in place of that empty list.
/// `response` with its `stand_in` bytes replaced by `list_length` and `list`, and its size
/// prefix set to `size`: in its own buffer when the encoder left room for the list (see
/// [`spliced_list_room`]), else in a new one.
fn splice_in_place(
    response: Bytes,
    stand_in: std::ops::Range<usize>,
    list_length: &[u8],
    list: &[u8],
    size: i32,
) -> Bytes {
    let inserted = list_length.len() + list.len();
    let spliced_len = response.len() - stand_in.len() + inserted;
    let mut out = match response.try_into_mut() {
        Ok(out) if out.capacity() >= spliced_len => out,
        Ok(out) => copied(&out, spliced_len),
        Err(response) => copied(&response, spliced_len),
    };
    let old_len = out.len();
    out.resize(spliced_len.max(old_len), 0);
    // The tail moves behind the list's place, then the list fills the gap.
    out.copy_within(stand_in.end..old_len, stand_in.start + inserted);
    out.truncate(spliced_len);
    out[stand_in.start..stand_in.start + list_length.len()].copy_from_slice(list_length);
    out[stand_in.start + list_length.len()..stand_in.start + inserted].copy_from_slice(list);
    out[..4].copy_from_slice(&size.to_be_bytes());
    out.freeze()
}

fn copied(bytes: &[u8], capacity: usize) -> BytesMut {
    let mut out = BytesMut::with_capacity(capacity.max(bytes.len()));
    out.put_slice(bytes);
    out
}

/// The room an answer's encoder leaves behind it so that [`splice_topics`] can put `topics`
/// in place without a second buffer: a small encoded list and its length prefix.
pub(crate) fn spliced_list_room(topics: Option<&ListWriter>) -> usize {
    topics
        .and_then(ListWriter::copied_into_answer)
        .map_or(0, |list| list.len() + MAX_ARRAY_LENGTH_BYTES)
}

pub(crate) fn splice_topics(
    response: Bytes,
    version: i16,
    topics: ListWriter,
) -> anyhow::Result<ResponseBytes> {
    let (suffix, flexible) = topics.list_end(version, response.len());
    let empty: &[u8] = if flexible { &[1] } else { &[0, 0, 0, 0] };
    let end = response
        .len()
        .checked_sub(suffix)
        .filter(|end| *end >= 4 + empty.len())
        .ok_or_else(|| anyhow::anyhow!("a {}-byte response has no list", response.len()))?;
    let start = end - empty.len();
    if &response[start..end] != empty {
        bail!("the response's list is not empty where it is spliced");
    }
    let mut length_prefix = [0; MAX_ARRAY_LENGTH_BYTES];
    let mut unwritten = &mut length_prefix[..];
    put_array_length(&mut unwritten, topics.count(), flexible)?;
    let written = MAX_ARRAY_LENGTH_BYTES - unwritten.len();
    let list_length = &length_prefix[..written];
    let size = response.len() - 4 - empty.len() + list_length.len() + topics.len();
    let size = i32::try_from(size)
        .map_err(|_| anyhow::anyhow!("the response is {size} bytes, over 2 GiB"))?;
    // A small list already in bytes goes out with its answer in one write (one segment on
    // the wire, not three); a large one is not copied.
    if let Some(list) = topics.copied_into_answer() {
        return Ok(ResponseBytes::Whole(splice_in_place(
            response,
            start..end,
            list_length,
            list,
            size,
        )));
    }
    Ok(ResponseBytes::Chunked(Chunked {
        size,
        head: response.slice(4..start),
        list_length: BytesMut::from(list_length),
        topics,
        tail: response.slice(end..),
    }))
}
