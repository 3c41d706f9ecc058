//! Test fixtures: a tiny in-memory metadata view, a deterministic rng and scripted quotas.

use std::collections::BTreeMap;

use rand::RngCore;
use uuid::Uuid;

use super::quota::{MutationQuota, QuotaExceeded};
use super::topic_name::first_colliding;
use super::view::{BrokerView, MetadataView};

/// An unfenced, running broker.
pub(crate) fn broker(id: i32, rack: Option<&str>) -> BrokerView {
    BrokerView {
        id,
        rack: rack.map(str::to_owned),
        fenced: false,
        in_controlled_shutdown: false,
    }
}

/// Topics by name (id, replicas per partition) and brokers.
#[derive(Debug, Default, Clone)]
pub(crate) struct FakeView {
    pub(crate) topics: BTreeMap<String, (Uuid, Vec<Vec<i32>>)>,
    pub(crate) brokers: Vec<BrokerView>,
}

impl FakeView {
    pub(crate) fn with_brokers(ids: &[i32]) -> Self {
        FakeView {
            topics: BTreeMap::new(),
            brokers: ids.iter().map(|id| broker(*id, None)).collect(),
        }
    }

    pub(crate) fn topic(mut self, name: &str, id: u128, replicas: &[&[i32]]) -> Self {
        self.topics.insert(
            name.to_owned(),
            (
                Uuid::from_u128(id),
                replicas.iter().map(|r| r.to_vec()).collect(),
            ),
        );
        self
    }
}

impl MetadataView for FakeView {
    fn topic_id(&self, name: &str) -> Option<Uuid> {
        self.topics.get(name).map(|(id, _)| *id)
    }

    fn topic_name(&self, id: &Uuid) -> Option<String> {
        self.topics
            .iter()
            .find(|(_, (topic_id, _))| topic_id == id)
            .map(|(name, _)| name.clone())
    }

    fn partition_count(&self, id: &Uuid) -> usize {
        self.topics
            .values()
            .find(|(topic_id, _)| topic_id == id)
            .map_or(0, |(_, parts)| parts.len())
    }

    fn replicas(&self, id: &Uuid, partition: i32) -> Option<Vec<i32>> {
        let (_, parts) = self.topics.values().find(|(topic_id, _)| topic_id == id)?;
        parts.get(usize::try_from(partition).ok()?).cloned()
    }

    fn colliding_topic(&self, name: &str) -> Option<String> {
        first_colliding(self.topics.keys().map(String::as_str), name).map(str::to_owned)
    }

    fn brokers(&self) -> Vec<BrokerView> {
        self.brokers.clone()
    }
}

/// Returns 1, 2, 3, ... so `random_range` picks 0 and every generated uuid differs.
#[derive(Debug, Default)]
pub(crate) struct CountingRng(u64);

impl RngCore for CountingRng {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }

    fn next_u64(&mut self) -> u64 {
        self.0 += 1;
        self.0
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for byte in dest {
            *byte = self.next_u64() as u8;
        }
    }
}

/// Records every charge; rejects once `budget` partitions have been charged.
#[derive(Debug, Default)]
pub(crate) struct ScriptedQuota {
    pub(crate) charges: Vec<u32>,
    pub(crate) budget: Option<u32>,
}

impl MutationQuota for ScriptedQuota {
    fn charge(&mut self, partitions: u32) -> Result<(), QuotaExceeded> {
        if let Some(budget) = self.budget {
            let used: u32 = self.charges.iter().sum();
            if used >= budget {
                return Err(QuotaExceeded {
                    throttle_time_ms: 1000,
                });
            }
        }
        self.charges.push(partitions);
        Ok(())
    }
}

/// The result of one mutation with an unlimited quota and a fresh counting rng.
pub(crate) fn with_ctx<T>(f: impl FnOnce(&mut super::MutationContext<'_>) -> T) -> T {
    let mut rng = CountingRng::default();
    let mut quota = super::quota::Unlimited;
    let mut ctx = super::MutationContext {
        rng: &mut rng,
        quota: &mut quota,
    };
    f(&mut ctx)
}

/// A `TopicName` from a str.
pub(crate) fn topic_name(name: &str) -> kafka_protocol::messages::TopicName {
    kafka_protocol::messages::TopicName(kafka_protocol::protocol::StrBytes::from_string(
        name.to_owned(),
    ))
}

/// (code, message) of a result, for compact assertions.
pub(crate) fn outcome(
    code: i16,
    message: &Option<kafka_protocol::protocol::StrBytes>,
) -> (i16, Option<String>) {
    (code, message.as_ref().map(|m| m.to_string()))
}
