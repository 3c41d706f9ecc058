//! The controller-mutation quota's maths (KIP-599 as shipped, reference §3.1-3.2): Kafka's
//! `TokenBucket` stat, the throttle time it asks for, and the strict and permissive per-request
//! quota objects of `ControllerMutationQuotaManager`.
//!
//! The bucket holds at most `burst = samples × window × rate` tokens and refills at `rate`
//! tokens per second. A mutation of `n` partitions takes `n` tokens and may drive the bucket
//! negative; the quota is violated while the bucket is negative, and the client should wait
//! `−tokens / rate` seconds for it to reach zero again.

use super::sampler::WindowConfig;

/// Kafka's `TokenBucket`. Its first refill fills it (Kafka starts it empty at epoch 0, which
/// the first refill at wall-clock time tops up; here "never refilled" plays that part).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TokenBucket {
    tokens: f64,
    last_update_ms: Option<u64>,
}

impl TokenBucket {
    /// A bucket that fills on first use.
    pub fn new() -> Self {
        TokenBucket::default()
    }

    /// `samples × window seconds × rate`.
    pub fn burst(config: &WindowConfig, rate: f64) -> f64 {
        f64::from(config.samples) * (config.window_ms as f64 / 1000.0) * rate
    }

    fn refill(&mut self, config: &WindowConfig, rate: f64, now_ms: u64) {
        let burst = Self::burst(config, rate);
        self.tokens = match self.last_update_ms {
            None => burst,
            Some(last) => {
                let elapsed = now_ms.saturating_sub(last) as f64 / 1000.0;
                burst.min(self.tokens + rate * elapsed)
            }
        };
        self.last_update_ms = Some(now_ms.max(self.last_update_ms.unwrap_or(0)));
    }

    /// The tokens at `now_ms` (after refilling).
    pub fn measure(&mut self, config: &WindowConfig, rate: f64, now_ms: u64) -> f64 {
        self.refill(config, rate, now_ms);
        self.tokens
    }

    /// Takes `value` tokens (a negative value gives them back, never above the burst).
    pub fn record(&mut self, config: &WindowConfig, rate: f64, value: f64, now_ms: u64) {
        self.refill(config, rate, now_ms);
        self.tokens = Self::burst(config, rate).min(self.tokens - value);
    }
}

/// `round(−tokens / rate × 1000)`: how long until a bucket at `tokens` is back to zero
/// (Kafka's `ControllerMutationQuotaManager.throttleTimeMs`); 0 for a non-negative bucket.
pub fn throttle_time_ms(tokens: f64, rate: f64) -> u64 {
    if rate <= 0.0 || !rate.is_finite() {
        return 0;
    }
    let ms = (-tokens / rate * 1000.0).round();
    if ms.is_finite() && ms > 0.0 {
        ms.min(u64::MAX as f64) as u64
    } else {
        0
    }
}

/// A bucket with its configured rate: the state of one (user, client-id) sensor.
#[derive(Clone, Debug, PartialEq)]
pub struct BucketQuota {
    /// The bucket.
    pub bucket: TokenBucket,
    /// The configured rate (mutations per second); `None` = no quota.
    pub rate: Option<f64>,
}

impl BucketQuota {
    /// Kafka's `checkQuotas` for a token bucket: the throttle time when the bucket is already
    /// negative (violated), else `None`.
    pub fn check(&mut self, config: &WindowConfig, now_ms: u64) -> Option<u64> {
        let rate = self.rate?;
        let tokens = self.bucket.measure(config, rate, now_ms);
        (tokens < 0.0).then(|| throttle_time_ms(tokens, rate))
    }

    /// Takes `value` tokens without checking.
    pub fn record(&mut self, config: &WindowConfig, value: f64, now_ms: u64) {
        if let Some(rate) = self.rate {
            self.bucket.record(config, rate, value, now_ms);
        }
    }

    /// Records, then checks (`Sensor.record(value, now, true)`): the throttle time if the
    /// bucket is now negative.
    pub fn record_and_check(
        &mut self,
        config: &WindowConfig,
        value: f64,
        now_ms: u64,
    ) -> Option<u64> {
        self.record(config, value, now_ms);
        self.check(config, now_ms)
    }

    /// The tokens now (`f64::MAX` without a quota, as Kafka reports `Long.MAX_VALUE`).
    pub fn tokens(&mut self, config: &WindowConfig, now_ms: u64) -> f64 {
        match self.rate {
            Some(rate) => self.bucket.measure(config, rate, now_ms),
            None => i64::MAX as f64,
        }
    }
}

/// The per-request throttle bookkeeping shared by the strict and permissive quota objects:
/// the last throttle and when it was decided, so that a response sent later reports what is
/// left of it (`max(0, last − (now − recorded))`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThrottleMemo {
    last_throttle_ms: u64,
    recorded_ms: u64,
}

impl ThrottleMemo {
    /// Remembers a throttle decided at `now_ms`.
    pub fn set(&mut self, throttle_ms: u64, now_ms: u64) {
        self.last_throttle_ms = throttle_ms;
        self.recorded_ms = now_ms;
    }

    /// What is left of the last throttle at `now_ms`.
    pub fn remaining(&self, now_ms: u64) -> u64 {
        self.last_throttle_ms
            .saturating_sub(now_ms.saturating_sub(self.recorded_ms))
    }
}

/// The decision of one strict charge (KIP-599 for new clients).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrictOutcome {
    /// Recorded (the bucket was not negative before; it may be now).
    Accepted,
    /// Not recorded: the bucket was already negative; the client should wait this long.
    Rejected {
        /// Throttle time in ms.
        throttle_ms: u64,
    },
}

/// Strict: check first, record only if the bucket is not already negative (Kafka's
/// `StrictControllerMutationQuota.record`).
pub fn strict_charge(
    quota: &mut BucketQuota,
    config: &WindowConfig,
    value: f64,
    now_ms: u64,
) -> StrictOutcome {
    match quota.check(config, now_ms) {
        Some(throttle_ms) => StrictOutcome::Rejected { throttle_ms },
        None => {
            quota.record(config, value, now_ms);
            StrictOutcome::Accepted
        }
    }
}

/// Permissive: record, then check; always accepted, the throttle (if any) is returned
/// (Kafka's `PermissiveControllerMutationQuota.record`).
pub fn permissive_charge(
    quota: &mut BucketQuota,
    config: &WindowConfig,
    value: f64,
    now_ms: u64,
) -> Option<u64> {
    quota.record_and_check(config, value, now_ms)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    /// TokenBucketTest: Q = 5, W = 2 s, S = 10 ⇒ B = 100.
    #[test]
    fn token_bucket_test_numbers() {
        let config = WindowConfig::new(10, 2);
        let mut bucket = TokenBucket::new();
        let mut now = 1_000_000;
        assert_eq!(bucket.measure(&config, 5.0, now), 100.0);
        bucket.record(&config, 5.0, 60.0, now);
        assert_eq!(bucket.measure(&config, 5.0, now), 40.0);
        now += 2000;
        bucket.record(&config, 5.0, 5.0, now);
        assert_eq!(bucket.measure(&config, 5.0, now), 45.0);
        now += 2000;
        bucket.record(&config, 5.0, 60.0, now);
        assert_eq!(bucket.measure(&config, 5.0, now), -5.0);
    }

    /// TokenBucketTest: unrecording at a full bucket stays at the burst.
    #[test]
    fn unrecord_is_capped_at_the_burst() {
        let config = WindowConfig::new(10, 2);
        let mut bucket = TokenBucket::new();
        bucket.record(&config, 5.0, -60.0, 0);
        assert_eq!(bucket.measure(&config, 5.0, 0), 100.0);
    }

    /// §3.7 case 3: the `throttleTimeMs` helper.
    #[test]
    fn throttle_time_helper() {
        assert_eq!(throttle_time_ms(0.0, 10.0), 0);
        assert_eq!(throttle_time_ms(-5.0, 10.0), 500);
        assert_eq!(throttle_time_ms(-10.0, 10.0), 1000);
    }

    fn quota_of(rate: f64) -> BucketQuota {
        BucketQuota {
            bucket: TokenBucket::new(),
            rate: Some(rate),
        }
    }

    #[test]
    fn no_quota_never_throttles() {
        let config = WindowConfig::new(10, 1);
        let mut quota = BucketQuota {
            bucket: TokenBucket::new(),
            rate: None,
        };
        assert_eq!(permissive_charge(&mut quota, &config, 1e9, 0), None);
        assert_eq!(
            strict_charge(&mut quota, &config, 1e9, 0),
            StrictOutcome::Accepted
        );
        assert_eq!(quota.tokens(&config, 0), i64::MAX as f64);
    }

    #[test]
    fn strict_checks_before_recording() {
        let config = WindowConfig::new(10, 1);
        let mut quota = quota_of(10.0);
        assert_eq!(
            strict_charge(&mut quota, &config, 90.0, 0),
            StrictOutcome::Accepted
        );
        assert_eq!(
            strict_charge(&mut quota, &config, 90.0, 0),
            StrictOutcome::Accepted
        );
        assert_eq!(quota.tokens(&config, 0), -80.0);
        assert_eq!(
            strict_charge(&mut quota, &config, 90.0, 0),
            StrictOutcome::Rejected { throttle_ms: 8000 }
        );
        // A rejected charge records nothing.
        assert_eq!(quota.tokens(&config, 0), -80.0);
    }

    #[test]
    fn memo_decays() {
        let mut memo = ThrottleMemo::default();
        memo.set(8000, 100);
        assert_eq!(memo.remaining(100), 8000);
        assert_eq!(memo.remaining(5100), 3000);
        assert_eq!(memo.remaining(100_000), 0);
    }
}
