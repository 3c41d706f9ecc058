//! Sampled statistics and the throttle-time maths of rate quotas, after Kafka's `SampledStat`,
//! `Rate`, `Avg` and `ClientQuotaManager.throttleTime` (reference §4.3-4.4).
//!
//! A statistic keeps `samples` windows of `window_ms` each. A record goes into the current
//! window, opening the next one (aligned to the window grid) once the current one is
//! `window_ms` old; windows whose start is `samples × window_ms` old are reset when measured.
//! A rate is the sum of the retained windows over the time they span, where the span is never
//! taken as less than `samples − 1` full windows plus the current partial one (so a first burst
//! is not divided by a tiny elapsed time), and at least 1 ms.
//!
//! Everything here is pure: time comes in as milliseconds.

/// The sampling configuration of one quota type: `quota.window.num` × `quota.window.size.seconds`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowConfig {
    /// Number of windows kept (`quota.window.num`, at least 1).
    pub samples: u32,
    /// Length of one window in ms (`quota.window.size.seconds` × 1000, at least 1).
    pub window_ms: u64,
}

impl WindowConfig {
    /// Kafka's defaults: 11 windows of one second.
    pub const DEFAULT: WindowConfig = WindowConfig {
        samples: 11,
        window_ms: 1000,
    };

    /// `samples` windows of `window_seconds` each; zero values are raised to 1 (the node's
    /// configuration rejects them already, `atLeast(1)`).
    pub fn new(samples: u32, window_seconds: u64) -> Self {
        WindowConfig {
            samples: samples.max(1),
            window_ms: window_seconds.max(1).saturating_mul(1000),
        }
    }

    fn samples(&self) -> usize {
        self.samples.max(1) as usize
    }

    fn window(&self) -> u64 {
        self.window_ms.max(1)
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample {
    value: f64,
    event_count: u64,
    /// Start of the window (Kafka's `lastWindowMs`).
    start_ms: u64,
}

impl Sample {
    fn new(now_ms: u64) -> Self {
        Sample {
            value: 0.0,
            event_count: 0,
            start_ms: now_ms,
        }
    }

    fn reset(&mut self, now_ms: u64) {
        *self = Sample::new(now_ms);
    }

    fn is_complete(&self, now_ms: u64, config: &WindowConfig) -> bool {
        now_ms.saturating_sub(self.start_ms) >= config.window()
    }
}

/// Kafka's `SampledStat` holding a running total per window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SampledStat {
    samples: Vec<Sample>,
    current: usize,
}

impl SampledStat {
    /// An empty statistic.
    pub fn new() -> Self {
        SampledStat::default()
    }

    fn current(&mut self, now_ms: u64) -> &mut Sample {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now_ms));
            self.current = 0;
        }
        let index = self.current.min(self.samples.len() - 1);
        &mut self.samples[index]
    }

    fn advance(&mut self, config: &WindowConfig, start_ms: u64) {
        self.current = (self.current + 1) % config.samples();
        if self.current >= self.samples.len() {
            self.samples.push(Sample::new(start_ms));
            self.current = self.samples.len() - 1;
        } else {
            self.samples[self.current].reset(start_ms);
        }
    }

    /// Adds `value` at `now_ms`.
    pub fn record(&mut self, config: &WindowConfig, value: f64, now_ms: u64) {
        let window = config.window();
        let sample = *self.current(now_ms);
        if sample.is_complete(now_ms, config) {
            // The new window starts on the grid of the previous one, as in newer Kafka, so a
            // late record does not stretch the window it opens.
            let previous_end = sample.start_ms.saturating_add(window);
            let start = now_ms - (now_ms.saturating_sub(previous_end) % window);
            self.advance(config, start.max(sample.start_ms));
        }
        let sample = self.current(now_ms);
        sample.value += value;
        sample.event_count += 1;
    }

    /// Resets windows that are `samples × window` old.
    fn purge(&mut self, config: &WindowConfig, now_ms: u64) {
        let expire_age = config.window().saturating_mul(config.samples() as u64);
        for sample in &mut self.samples {
            if now_ms.saturating_sub(sample.start_ms) >= expire_age {
                sample.reset(now_ms);
            }
        }
    }

    /// Sum of the retained windows.
    pub fn total(&mut self, config: &WindowConfig, now_ms: u64) -> f64 {
        self.purge(config, now_ms);
        self.samples.iter().map(|s| s.value).sum()
    }

    /// Average value per event over the retained windows (`None` when there was no event).
    pub fn average(&mut self, config: &WindowConfig, now_ms: u64) -> Option<f64> {
        self.purge(config, now_ms);
        let count: u64 = self.samples.iter().map(|s| s.event_count).sum();
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        (count > 0).then(|| total / count as f64)
    }

    /// The span a rate is measured over, in ms (Kafka's `Rate.windowSize`).
    pub fn window_size_ms(&mut self, config: &WindowConfig, now_ms: u64) -> u64 {
        self.purge(config, now_ms);
        self.span_ms(config, now_ms)
    }

    /// [`window_size_ms`](Self::window_size_ms) of purged samples.
    fn span_ms(&mut self, config: &WindowConfig, now_ms: u64) -> u64 {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now_ms));
            self.current = 0;
        }
        let oldest = self
            .samples
            .iter()
            .map(|s| s.start_ms)
            .min()
            .unwrap_or(now_ms);
        Self::span_since(config, now_ms, oldest)
    }

    /// The span from the oldest sample's start, never less than `samples − 1` full windows
    /// plus the current partial one, and at least 1 ms.
    fn span_since(config: &WindowConfig, now_ms: u64, oldest: u64) -> u64 {
        let mut elapsed = now_ms.saturating_sub(oldest);
        let full_windows = elapsed / config.window();
        let min_full_windows = config.samples() as u64 - 1;
        if full_windows < min_full_windows {
            elapsed += (min_full_windows - full_windows) * config.window();
        }
        elapsed.max(1)
    }

    /// The rate per second (Kafka's `Rate` in seconds).
    pub fn rate(&mut self, config: &WindowConfig, now_ms: u64) -> f64 {
        self.rate_and_span(config, now_ms).0
    }

    /// The rate per second and the span in ms it was measured over, purging once (this is on
    /// every quota-checked request).
    fn rate_and_span(&mut self, config: &WindowConfig, now_ms: u64) -> (f64, u64) {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now_ms));
            self.current = 0;
        }
        // purge, total and the oldest start in one pass.
        let expire_age = config.window().saturating_mul(config.samples() as u64);
        let mut total = 0.0;
        let mut oldest = now_ms;
        for sample in &mut self.samples {
            if now_ms.saturating_sub(sample.start_ms) >= expire_age {
                sample.reset(now_ms);
            }
            total += sample.value;
            oldest = oldest.min(sample.start_ms);
        }
        let span = Self::span_since(config, now_ms, oldest);
        (total / (span as f64 / 1000.0), span)
    }
}

/// A rate with an upper-bound quota: Kafka's quota-bearing `Rate` sensor.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RateQuota {
    stat: SampledStat,
}

impl RateQuota {
    /// An empty rate.
    pub fn new() -> Self {
        RateQuota::default()
    }

    /// Records `value` at `now_ms`, then checks the quota: returns the throttle time in ms when
    /// the measured rate exceeds `bound` (a rate equal to the bound passes), else 0.
    ///
    /// `throttle = round((rate − bound) / bound × window)`, with the same window the rate was
    /// measured over (Kafka's `ClientQuotaManager.throttleTime`).
    pub fn record(&mut self, config: &WindowConfig, bound: f64, value: f64, now_ms: u64) -> u64 {
        self.stat.record(config, value, now_ms);
        let (rate, span) = self.stat.rate_and_span(config, now_ms);
        throttle_ms(rate, span, bound)
    }

    /// Takes `value` back off the rate (Kafka records it negated, without a quota check).
    pub fn unrecord(&mut self, config: &WindowConfig, value: f64, now_ms: u64) {
        self.stat.record(config, -value, now_ms);
    }

    /// The throttle time the current rate asks for, without recording (0 within the quota).
    pub fn check(&mut self, config: &WindowConfig, bound: f64, now_ms: u64) -> u64 {
        let (rate, span) = self.stat.rate_and_span(config, now_ms);
        throttle_ms(rate, span, bound)
    }

    /// The measured rate per second.
    pub fn rate(&mut self, config: &WindowConfig, now_ms: u64) -> f64 {
        self.stat.rate(config, now_ms)
    }
}

/// Kafka's throttle time for `rate` measured over `span_ms` against `bound` (0 within it).
fn throttle_ms(rate: f64, span_ms: u64, bound: f64) -> u64 {
    if rate <= bound || bound <= 0.0 || !bound.is_finite() {
        return 0;
    }
    let throttle = ((rate - bound) / bound * span_ms as f64).round();
    if throttle.is_finite() && throttle > 0.0 {
        throttle.min(u64::MAX as f64) as u64
    } else {
        0
    }
}

/// Kafka's `Avg` over sampled windows (the `throttle-time` metric).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SampledAvg {
    stat: SampledStat,
}

impl SampledAvg {
    /// Records one value.
    pub fn record(&mut self, config: &WindowConfig, value: f64, now_ms: u64) {
        self.stat.record(config, value, now_ms);
    }

    /// The average of the retained values (0 when none).
    pub fn value(&mut self, config: &WindowConfig, now_ms: u64) -> f64 {
        self.stat.average(config, now_ms).unwrap_or(0.0)
    }
}

/// Nanoseconds of handler time as Kafka's request quota measures them: percent of one
/// thread-second (`nanos × 100 / 1e9`).
pub fn request_time_percent(nanos: u64) -> f64 {
    nanos as f64 * 100.0 / 1e9
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    const ELEVEN_BY_ONE: WindowConfig = WindowConfig::DEFAULT;

    /// ClientQuotaManagerTest's worked example: 400 B/s for ten seconds passes a 500 B/s
    /// quota; a 2300 B record at 10.5 s makes the rate (4000 + 2300) / 10.5 = 600 B/s and the
    /// throttle (600 − 500) / 500 × 10500 ms = 2100 ms.
    #[test]
    fn client_quota_manager_worked_example_2100_ms() {
        let mut rate = RateQuota::new();
        let mut now = 0;
        for _ in 0..10 {
            assert_eq!(rate.record(&ELEVEN_BY_ONE, 500.0, 400.0, now), 0);
            now += 1000;
        }
        now += 500;
        let throttle = rate.record(&ELEVEN_BY_ONE, 500.0, 2300.0, now);
        assert_eq!(rate.rate(&ELEVEN_BY_ONE, now), 600.0);
        assert_eq!(throttle, 2100);
    }

    #[test]
    fn a_first_burst_is_divided_by_the_minimum_span() {
        let mut rate = RateQuota::new();
        // 10 full windows + the current partial one at time 0 → 10 000 ms, floored at 1 ms.
        assert_eq!(rate.record(&ELEVEN_BY_ONE, 100.0, 1000.0, 0), 0);
        assert_eq!(rate.rate(&ELEVEN_BY_ONE, 0), 100.0);
        // One more byte: 1001 / 10 s = 100.1 > 100 → (0.1 / 100) × 10 000 = 10 ms.
        assert_eq!(rate.record(&ELEVEN_BY_ONE, 100.0, 1.0, 0), 10);
    }

    #[test]
    fn old_windows_expire() {
        let config = WindowConfig::new(2, 1);
        let mut stat = SampledStat::new();
        stat.record(&config, 10.0, 0);
        stat.record(&config, 5.0, 1000);
        assert_eq!(stat.total(&config, 1500), 15.0);
        // At 2000 the window started at 0 is 2 × 1000 old and is reset.
        assert_eq!(stat.total(&config, 2000), 5.0);
        assert_eq!(stat.total(&config, 3000), 0.0);
    }

    #[test]
    fn windows_stay_on_the_grid() {
        let config = WindowConfig::new(3, 1);
        let mut stat = SampledStat::new();
        stat.record(&config, 1.0, 0);
        stat.record(&config, 1.0, 2500);
        // The second window starts at 2000, not 2500: the span at 2500 is 2500 ms.
        assert_eq!(stat.window_size_ms(&config, 2500), 2500);
    }

    #[test]
    fn average_and_percent() {
        let mut avg = SampledAvg::default();
        assert_eq!(avg.value(&ELEVEN_BY_ONE, 0), 0.0);
        avg.record(&ELEVEN_BY_ONE, 100.0, 0);
        avg.record(&ELEVEN_BY_ONE, 300.0, 10);
        assert_eq!(avg.value(&ELEVEN_BY_ONE, 20), 200.0);
        assert_eq!(request_time_percent(10_000_000), 1.0);
    }
}
