//! Kafka's sampled rate and throttle formula, as pure arithmetic on a caller-supplied time.
//!
//! A rate is the sum of a few samples, each covering `quota.window.size.seconds`, divided by the
//! time they span. The span is never taken as shorter than `quota.window.num - 1` whole windows,
//! so the first requests after start-up (or after a quiet spell) do not look like a spike. One
//! extra sample is kept: the one that started before the measured span but overlaps it. This is
//! Kafka's `Rate` over a `WindowedSum` (event-count windows are not used by quotas). Nothing here
//! reads a clock or takes a lock; the quota manager does both.

/// How quota rates are sampled: `quota.window.num` samples of `quota.window.size.seconds`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WindowConfig {
    /// `quota.window.num`, at least 1.
    pub samples: usize,
    /// `quota.window.size.seconds` in milliseconds, at least 1000.
    pub window_ms: i64,
}

impl WindowConfig {
    pub fn new(samples: usize, window_seconds: u32) -> WindowConfig {
        assert!(samples >= 1 && window_seconds >= 1, "validated in config");
        WindowConfig {
            samples,
            window_ms: i64::from(window_seconds) * 1000,
        }
    }

    /// The most a client can be charged at once without a guaranteed throttle (Kafka's
    /// `getMaxValueInQuotaWindow`): `bound × (samples − 1) × window seconds`.
    pub fn max_value_in_window(&self, bound: f64) -> f64 {
        bound * (self.samples as f64 - 1.0) * (self.window_ms as f64 / 1000.0)
    }
}

#[derive(Clone, Debug)]
struct Sample {
    value: f64,
    start_ms: i64,
    last_event_ms: i64,
}

impl Sample {
    fn new(now_ms: i64) -> Sample {
        Sample {
            value: 0.0,
            start_ms: now_ms,
            last_event_ms: now_ms,
        }
    }
}

/// One client's rate of one quantity (bytes, or percent of a thread's time).
#[derive(Clone, Debug, Default)]
pub struct SampledRate {
    samples: Vec<Sample>,
    /// Index of the sample being filled.
    current: usize,
}

impl SampledRate {
    /// Adds `value` (negative to take back a recorded value) at `now_ms`.
    pub fn record(&mut self, window: &WindowConfig, value: f64, now_ms: i64) {
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now_ms));
        }
        if now_ms - self.samples[self.current].start_ms >= window.window_ms {
            self.advance(window, now_ms);
        }
        let sample = &mut self.samples[self.current];
        sample.value += value;
        sample.last_event_ms = now_ms;
    }

    /// Starts a new sample, recycling the oldest once `samples + 1` exist.
    fn advance(&mut self, window: &WindowConfig, now_ms: i64) {
        self.current = (self.current + 1) % (window.samples + 1);
        if self.current >= self.samples.len() {
            self.samples.push(Sample::new(now_ms));
        } else {
            self.samples[self.current] = Sample::new(now_ms);
        }
    }

    /// Samples without an event in the last `samples` windows no longer count.
    fn purge_obsolete(&mut self, window: &WindowConfig, now_ms: i64) {
        let expire_age_ms = window.samples as i64 * window.window_ms;
        for sample in &mut self.samples {
            if now_ms - sample.last_event_ms >= expire_age_ms {
                *sample = Sample::new(now_ms);
            }
        }
    }

    /// The span the rate is measured over: from the oldest retained sample's start to now, but
    /// at least `samples − 1` whole windows, and at least 1 ms.
    pub fn window_size_ms(&mut self, window: &WindowConfig, now_ms: i64) -> i64 {
        self.purge_obsolete(window, now_ms);
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now_ms));
        }
        let oldest_start_ms = self.samples.iter().map(|s| s.start_ms).min();
        let mut elapsed_ms = now_ms - oldest_start_ms.unwrap_or(now_ms);
        let full_windows = elapsed_ms / window.window_ms;
        let min_full_windows = window.samples as i64 - 1;
        if full_windows < min_full_windows {
            elapsed_ms += (min_full_windows - full_windows) * window.window_ms;
        }
        elapsed_ms.max(1)
    }

    /// The measured rate per second.
    pub fn rate_per_second(&mut self, window: &WindowConfig, now_ms: i64) -> f64 {
        self.purge_obsolete(window, now_ms);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total / (self.window_size_ms(window, now_ms) as f64 / 1000.0)
    }

    /// Records `value` and checks the rate against `bound` (an upper bound, as Kafka's `Quota`):
    /// returns the throttle time in ms, 0 when the rate is within the bound.
    pub fn record_and_throttle_ms(
        &mut self,
        window: &WindowConfig,
        bound: f64,
        value: f64,
        now_ms: i64,
    ) -> i64 {
        self.record(window, value, now_ms);
        let observed = self.rate_per_second(window, now_ms);
        if observed <= bound {
            return 0;
        }
        throttle_time_ms(observed, bound, self.window_size_ms(window, now_ms))
    }
}

/// Kafka's `QuotaUtils.throttleTime`: the delay X that brings an observed rate O measured over
/// W back to the bound T if nothing more is recorded. O·W / (W + X) = T, so X = (O − T) / T · W.
pub fn throttle_time_ms(observed: f64, bound: f64, window_size_ms: i64) -> i64 {
    let throttle_ms = (observed - bound) / bound * window_size_ms as f64;
    // Math.round for the positive values this sees; saturates like Java's double → long cast.
    throttle_ms.round() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::{Clock, ManualClock};

    const WINDOW: WindowConfig = WindowConfig {
        samples: 11,
        window_ms: 1000,
    };

    #[test]
    fn first_window_counts_as_ten_full_windows() {
        let clock = ManualClock::new(1_000_000);
        let mut rate = SampledRate::default();
        rate.record(&WINDOW, 1000.0, clock.now_ms());
        assert_eq!(rate.window_size_ms(&WINDOW, clock.now_ms()), 10_000);
        assert_eq!(rate.rate_per_second(&WINDOW, clock.now_ms()), 100.0);
        clock.advance_ms(500);
        assert_eq!(rate.window_size_ms(&WINDOW, clock.now_ms()), 10_500);
        rate.record(&WINDOW, 1000.0, clock.now_ms());
        clock.advance_ms(10_000);
        // 10.5 s after the first sample started, which is still retained.
        assert_eq!(rate.window_size_ms(&WINDOW, clock.now_ms()), 10_500);
        clock.advance_ms(1_000);
        // Nothing recorded for 11 s: the samples expire and the minimum applies again.
        assert_eq!(rate.window_size_ms(&WINDOW, clock.now_ms()), 10_000);
        assert_eq!(rate.rate_per_second(&WINDOW, clock.now_ms()), 0.0);
    }

    #[test]
    fn throttle_is_kafkas_formula() {
        let clock = ManualClock::new(0);
        let mut rate = SampledRate::default();
        // 100 B/s allowed; 1,500 B over the 10 s minimum window is 150 B/s: X = 0.5 × 10 s.
        let throttle_ms = rate.record_and_throttle_ms(&WINDOW, 100.0, 1500.0, clock.now_ms());
        assert_eq!(throttle_ms, 5000);
        // Within the bound: no throttle.
        let mut calm = SampledRate::default();
        assert_eq!(calm.record_and_throttle_ms(&WINDOW, 100.0, 1000.0, 0), 0);
        assert_eq!(throttle_time_ms(120.0, 100.0, 10_000), 2000);
        assert_eq!(throttle_time_ms(100.05, 100.0, 10_000), 5);
    }

    #[test]
    fn waiting_out_the_throttle_brings_the_rate_back() {
        let clock = ManualClock::new(0);
        let mut rate = SampledRate::default();
        // Steady at the bound for 11 s, then a burst of 500 B.
        for _ in 0..10 {
            rate.record(&WINDOW, 100.0, clock.now_ms());
            clock.advance_ms(1000);
        }
        rate.record(&WINDOW, 100.0, clock.now_ms());
        let throttle_ms = rate.record_and_throttle_ms(&WINDOW, 100.0, 500.0, clock.now_ms());
        // 1,600 B over 10 s is 160 B/s: X = 0.6 × 10 s.
        assert_eq!(throttle_ms, 6000);
        clock.advance_ms(throttle_ms / 2);
        assert!(rate.rate_per_second(&WINDOW, clock.now_ms()) > 100.0);
        clock.advance_ms(throttle_ms / 2);
        assert!(rate.rate_per_second(&WINDOW, clock.now_ms()) <= 100.0);
    }

    #[test]
    fn old_samples_expire() {
        let clock = ManualClock::new(0);
        let mut rate = SampledRate::default();
        rate.record(&WINDOW, 5000.0, clock.now_ms());
        for _ in 0..10 {
            clock.advance_ms(1000);
            rate.record(&WINDOW, 100.0, clock.now_ms());
        }
        // The first sample's last event is 10 s old: still counted.
        assert_eq!(rate.rate_per_second(&WINDOW, clock.now_ms()), 6000.0 / 10.0);
        clock.advance_ms(1000);
        rate.record(&WINDOW, 100.0, clock.now_ms());
        // 11 s old: gone. Eleven samples of 100 B remain, the oldest started 10 s ago.
        assert_eq!(rate.rate_per_second(&WINDOW, clock.now_ms()), 110.0);
    }

    #[test]
    fn unrecording_restores_the_rate() {
        let mut rate = SampledRate::default();
        rate.record(&WINDOW, 700.0, 0);
        let throttle_ms = rate.record_and_throttle_ms(&WINDOW, 100.0, 900.0, 10);
        assert!(throttle_ms > 0);
        rate.record(&WINDOW, -900.0, 10);
        // 700 B over the 10 s minimum plus the 10 ms elapsed.
        assert!((rate.rate_per_second(&WINDOW, 10) - 700.0 / 10.01).abs() < 1e-9);
    }

    #[test]
    fn samples_are_recycled() {
        let mut rate = SampledRate::default();
        for second in 0..100 {
            rate.record(&WINDOW, 10.0, second * 1000);
        }
        assert_eq!(rate.samples.len(), WINDOW.samples + 1);
        // The sample whose last event is 11 s old is dropped: 11 samples of 10 B over 10 s.
        assert!((rate.rate_per_second(&WINDOW, 99_000) - 11.0).abs() < 1e-9);
    }

    #[test]
    fn one_sample_window_has_no_minimum() {
        let window = WindowConfig::new(1, 1);
        let mut rate = SampledRate::default();
        rate.record(&window, 10.0, 0);
        assert_eq!(rate.window_size_ms(&window, 0), 1);
        assert_eq!(window.max_value_in_window(1e6), 0.0);
        assert_eq!(WINDOW.max_value_in_window(1e6), 1e7);
    }
}
