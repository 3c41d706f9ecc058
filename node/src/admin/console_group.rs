//! `gregor console-consumer --group G`: a member of a classic consumer group, as
//! kafka-console-consumer.sh's consumer is (one topic, the `range` assignor, offsets committed
//! every 5 s and on exit, a LeaveGroup at the end). Hand-written because the tool speaks the
//! protocol through [`AdminClient`] rather than a client library.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, OffsetCommitRequest,
    OffsetFetchRequest, SyncGroupRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use super::consumer_groups::{assigned_partitions, coordinator};
use super::{check, AdminClient, AdminError};

/// kafka-console-consumer.sh's consumer defaults.
const SESSION_TIMEOUT_MS: i32 = 45_000;
const REBALANCE_TIMEOUT_MS: i32 = 300_000;
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(3);
const AUTO_COMMIT_INTERVAL: Duration = Duration::from_secs(5);
const REBALANCE_IN_PROGRESS: i16 = 27;
const MEMBER_ID_REQUIRED: i16 = 79;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;
const COORDINATOR_NOT_AVAILABLE: i16 = 15;
/// How long the group's coordinator is looked for (the consumer's `default.api.timeout.ms`).
const COORDINATOR_WAIT: Duration = Duration::from_secs(60);

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

/// ConsumerProtocolSubscription v0 of one topic.
fn subscription(topic: &str) -> Bytes {
    let mut out = Vec::with_capacity(12 + topic.len());
    out.put_i16(0);
    out.put_i32(1);
    out.put_i16(topic.len() as i16);
    out.extend_from_slice(topic.as_bytes());
    out.put_i32(-1);
    Bytes::from(out)
}

/// ConsumerProtocolAssignment v0 of one topic's partitions.
fn assignment(topic: &str, partitions: &[i32]) -> Bytes {
    let mut out = Vec::with_capacity(16 + topic.len() + 4 * partitions.len());
    out.put_i16(0);
    out.put_i32(1);
    out.put_i16(topic.len() as i16);
    out.extend_from_slice(topic.as_bytes());
    out.put_i32(partitions.len() as i32);
    for p in partitions {
        out.put_i32(*p);
    }
    out.put_i32(-1);
    Bytes::from(out)
}

/// Kafka's range assignment of one topic: members in id order, contiguous ranges, the first
/// `partitions % members` one more.
pub(super) fn range(members: &[String], partitions: &[i32]) -> BTreeMap<String, Vec<i32>> {
    let mut sorted: Vec<&String> = members.iter().collect();
    sorted.sort();
    let mut out = BTreeMap::new();
    let n = sorted.len().max(1);
    let (quota, extra) = (partitions.len() / n, partitions.len() % n);
    let mut start = 0;
    for (i, member) in sorted.into_iter().enumerate() {
        let len = quota + usize::from(i < extra);
        out.insert(member.clone(), partitions[start..start + len].to_vec());
        start += len;
    }
    out
}

/// This process as a member of the group.
pub(super) struct GroupMember {
    client: AdminClient,
    /// Where the coordinator is looked for again after its connection was lost.
    bootstrap: String,
    group: String,
    topic: String,
    member_id: String,
    generation: i32,
    last_heartbeat: Instant,
    last_commit: Instant,
}

impl GroupMember {
    /// Joins `group` subscribed to `topic` (of `partitions`) and returns the member with the
    /// partitions it was given.
    pub(super) async fn join(
        bootstrap: &str,
        group: &str,
        topic: &str,
        partitions: &[i32],
    ) -> Result<(Self, Vec<i32>), AdminError> {
        let mut client = coordinator(
            bootstrap,
            group,
            tokio::time::Instant::now() + COORDINATOR_WAIT,
        )
        .await?;
        // The member's client id as the group shows it (kafka-console-consumer.sh's).
        client.set_client_id("console-consumer");
        let mut member = GroupMember {
            client,
            bootstrap: bootstrap.to_owned(),
            group: group.to_owned(),
            topic: topic.to_owned(),
            member_id: String::new(),
            generation: -1,
            last_heartbeat: Instant::now(),
            last_commit: Instant::now(),
        };
        let assigned = member.rejoin(partitions).await?;
        Ok((member, assigned))
    }

    async fn rejoin(&mut self, partitions: &[i32]) -> Result<Vec<i32>, AdminError> {
        // A coordinator still loading its partition answers COORDINATOR_LOAD_IN_PROGRESS: try
        // again for up to about 30 s.
        let mut loading = 0;
        loop {
            let request = JoinGroupRequest::default()
                .with_group_id(GroupId(text(&self.group)))
                .with_session_timeout_ms(SESSION_TIMEOUT_MS)
                .with_rebalance_timeout_ms(REBALANCE_TIMEOUT_MS)
                .with_member_id(text(&self.member_id))
                .with_protocol_type(text("consumer"))
                .with_protocols(vec![JoinGroupRequestProtocol::default()
                    .with_name(text("range"))
                    .with_metadata(subscription(&self.topic))]);
            let (_, joined) = self.client.send(&request).await?;
            match joined.error_code {
                0 => {}
                MEMBER_ID_REQUIRED => {
                    self.member_id = joined.member_id.to_string();
                    continue;
                }
                REBALANCE_IN_PROGRESS => continue,
                COORDINATOR_LOAD_IN_PROGRESS | COORDINATOR_NOT_AVAILABLE if loading < 300 => {
                    loading += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                code => check(code, None)?,
            }
            self.member_id = joined.member_id.to_string();
            self.generation = joined.generation_id;
            let assignments = if joined.leader == joined.member_id {
                let ids: Vec<String> = joined
                    .members
                    .iter()
                    .map(|m| m.member_id.to_string())
                    .collect();
                range(&ids, partitions)
                    .into_iter()
                    .map(|(id, ps)| {
                        SyncGroupRequestAssignment::default()
                            .with_member_id(text(&id))
                            .with_assignment(assignment(&self.topic, &ps))
                    })
                    .collect()
            } else {
                Vec::new()
            };
            let sync = SyncGroupRequest::default()
                .with_group_id(GroupId(text(&self.group)))
                .with_generation_id(self.generation)
                .with_member_id(text(&self.member_id))
                .with_protocol_type(Some(text("consumer")))
                .with_protocol_name(Some(text("range")))
                .with_assignments(assignments);
            let (_, synced) = self.client.send(&sync).await?;
            if synced.error_code == REBALANCE_IN_PROGRESS {
                continue;
            }
            check(synced.error_code, None)?;
            self.last_heartbeat = Instant::now();
            return Ok(assigned_partitions(&synced.assignment)
                .into_iter()
                .filter(|(t, _)| *t == self.topic)
                .map(|(_, p)| p)
                .collect());
        }
    }

    /// The group's committed offsets of `partitions` (absent: none committed).
    pub(super) async fn committed(
        &mut self,
        partitions: &[i32],
    ) -> Result<BTreeMap<i32, i64>, AdminError> {
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(text(&self.topic)))
                .with_partition_indexes(partitions.to_vec())]));
        // v7: the one-group form (v8+ batch groups).
        let fetched = self.client.send_at(&request, 7).await?;
        check(fetched.error_code, None)?;
        Ok(fetched
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .filter(|p| p.error_code == 0 && p.committed_offset >= 0)
            .map(|p| (p.partition_index, p.committed_offset))
            .collect())
    }

    /// Commits the positions (as the auto-commit of kafka-console-consumer.sh does).
    pub(super) async fn commit(
        &mut self,
        positions: &BTreeMap<i32, i64>,
    ) -> Result<(), AdminError> {
        let request = OffsetCommitRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_generation_id_or_member_epoch(self.generation)
            .with_member_id(text(&self.member_id))
            .with_topics(vec![OffsetCommitRequestTopic::default()
                .with_name(TopicName(text(&self.topic)))
                .with_partitions(
                    positions
                        .iter()
                        .map(|(p, offset)| {
                            OffsetCommitRequestPartition::default()
                                .with_partition_index(*p)
                                .with_committed_offset(*offset)
                                .with_committed_leader_epoch(-1)
                        })
                        .collect(),
                )]);
        // As commitSync: a coordinator still loading the group (after a restart) is asked
        // again for up to about 30 s.
        let mut loading = 0;
        let committed = loop {
            let (_, committed) = self.client.send(&request).await?;
            let still_loading = committed
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .any(|p| p.error_code == COORDINATOR_LOAD_IN_PROGRESS);
            if !still_loading || loading >= 300 {
                break committed;
            }
            loading += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        for p in committed.topics.iter().flat_map(|t| &t.partitions) {
            // A commit refused by a rebalance is retried with the next generation's positions.
            if p.error_code != REBALANCE_IN_PROGRESS {
                check(p.error_code, None)?;
            }
        }
        self.last_commit = Instant::now();
        Ok(())
    }

    /// Heartbeats and auto-commits when due; `Some(partitions)` when a rebalance gave this
    /// member a new assignment (positions were committed first).
    pub(super) async fn tick(
        &mut self,
        positions: &BTreeMap<i32, i64>,
        partitions: &[i32],
    ) -> Result<Option<Vec<i32>>, AdminError> {
        if self.last_commit.elapsed() >= AUTO_COMMIT_INTERVAL {
            self.commit(positions).await?;
        }
        if self.last_heartbeat.elapsed() < HEARTBEAT_INTERVAL {
            return Ok(None);
        }
        let request = HeartbeatRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_generation_id(self.generation)
            .with_member_id(text(&self.member_id));
        let (_, beat) = self.client.send(&request).await?;
        self.last_heartbeat = Instant::now();
        match beat.error_code {
            0 => Ok(None),
            REBALANCE_IN_PROGRESS => {
                self.commit(positions).await?;
                Ok(Some(self.rejoin(partitions).await?))
            }
            code => {
                check(code, None)?;
                Ok(None)
            }
        }
    }

    /// After the coordinator's connection was lost: finds the coordinator again, commits the
    /// positions there and rejoins, as Kafka's consumer does once it marks its coordinator
    /// unknown; returns the partitions of the new assignment.
    pub(super) async fn reconnect(
        &mut self,
        positions: &BTreeMap<i32, i64>,
        partitions: &[i32],
    ) -> Result<Vec<i32>, AdminError> {
        self.find_coordinator().await?;
        match self.commit(positions).await {
            Ok(()) => {}
            Err(AdminError::Io(error)) => return Err(AdminError::Io(error)),
            // A member the coordinator no longer knows (its session ended, or the group was
            // loaded anew) joins as a new one, from the group's commits.
            Err(_) => {
                self.member_id.clear();
                self.generation = -1;
            }
        }
        self.rejoin(partitions).await
    }

    /// A new connection to the group's coordinator.
    async fn find_coordinator(&mut self) -> Result<(), AdminError> {
        let mut client = coordinator(
            &self.bootstrap,
            &self.group,
            tokio::time::Instant::now() + COORDINATOR_WAIT,
        )
        .await?;
        client.set_client_id("console-consumer");
        self.client = client;
        Ok(())
    }

    /// Commits the positions and leaves the group; a connection found lost (the broker
    /// restarted since the last heartbeat) is opened again once first.
    pub(super) async fn close(mut self, positions: &BTreeMap<i32, i64>) -> Result<(), AdminError> {
        match self.commit_and_leave(positions).await {
            Err(AdminError::Io(_)) => {
                self.find_coordinator().await?;
                self.commit_and_leave(positions).await
            }
            done => done,
        }
    }

    async fn commit_and_leave(&mut self, positions: &BTreeMap<i32, i64>) -> Result<(), AdminError> {
        self.commit(positions).await?;
        let request = LeaveGroupRequest::default()
            .with_group_id(GroupId(text(&self.group)))
            .with_members(vec![
                MemberIdentity::default().with_member_id(text(&self.member_id))
            ]);
        // v3: the batch form (v0-2 name one member).
        let left = self.client.send_at(&request, 3).await?;
        check(left.error_code, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_gives_the_first_members_one_more() {
        let members = vec!["b".to_owned(), "a".to_owned(), "c".to_owned()];
        let out = range(&members, &[0, 1, 2, 3]);
        assert_eq!(out["a"], vec![0, 1]);
        assert_eq!(out["b"], vec![2]);
        assert_eq!(out["c"], vec![3]);
    }

    #[test]
    fn assignment_bytes_are_read_back() {
        assert_eq!(
            assigned_partitions(&assignment("t", &[0, 2])),
            vec![("t".to_owned(), 0), ("t".to_owned(), 2)]
        );
        assert_eq!(
            subscription("ab").as_ref(),
            &[0, 0, 0, 0, 0, 1, 0, 2, b'a', b'b', 255, 255, 255, 255]
        );
    }
}
