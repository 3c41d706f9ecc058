//! The hook through which the controller-mutation quota (KIP-599) charges topic mutations.
//!
//! Kafka charges, per topic and in request order: CreateTopics the number of partitions being
//! created, DeleteTopics the topic's current partition count, CreatePartitions the number of new
//! partitions. The charge happens after the topic passed validation and before the
//! `validate_only` branch, so validate-only requests consume tokens too (as in KRaft).

/// A rejected charge: the strict quota was already exhausted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuotaExceeded {
    /// How long the client should back off.
    pub throttle_time_ms: i32,
}

/// Charges mutations against a client's quota.
pub trait MutationQuota {
    /// Records `partitions` mutations, or rejects them when a strict quota is exceeded
    /// (the topic then fails with THROTTLING_QUOTA_EXCEEDED and nothing else happens to it).
    fn charge(&mut self, partitions: u32) -> Result<(), QuotaExceeded>;
}

/// No quota: every charge is accepted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unlimited;

impl MutationQuota for Unlimited {
    fn charge(&mut self, _partitions: u32) -> Result<(), QuotaExceeded> {
        Ok(())
    }
}
