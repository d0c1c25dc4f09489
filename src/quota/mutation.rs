//! `controller_mutation_rate`: partitions created or deleted per second, measured with Kafka's
//! token bucket (`TokenBucket`, `ControllerMutationQuotaManager`).
//!
//! A client's bucket holds at most `rate × quota.window.num × quota.window.size.seconds`
//! tokens (the burst) and refills at `rate` tokens per second. Each created or deleted partition
//! takes one token; the bucket may go negative. A *strict* quota (CreateTopics v6+,
//! CreatePartitions v3+, DeleteTopics v5+) refuses a topic with THROTTLING_QUOTA_EXCEEDED while
//! the bucket is negative and charges nothing for it; a *permissive* one (older versions)
//! charges every topic and only reports the throttle time. Either way the response carries the
//! throttle time, `−tokens ÷ rate` seconds. Nothing here reads a clock or takes a lock.

use super::rate::WindowConfig;

/// Kafka's `TokenBucket` for one client.
#[derive(Clone, Debug, Default)]
pub struct TokenBucket {
    tokens: f64,
    /// 0 before the first use, so that the first refill fills the bucket, as in Kafka.
    last_update_ms: i64,
}

impl TokenBucket {
    fn burst(window: &WindowConfig, rate: f64) -> f64 {
        window.samples as f64 * (window.window_ms as f64 / 1000.0) * rate
    }

    fn refill(&mut self, window: &WindowConfig, rate: f64, now_ms: i64) {
        let elapsed_ms = now_ms - self.last_update_ms;
        // An infinite rate (no limit) times no time at all would be NaN.
        let refill = if elapsed_ms > 0 {
            rate * (elapsed_ms as f64 / 1000.0)
        } else {
            0.0
        };
        self.tokens = (self.tokens + refill).min(Self::burst(window, rate));
        self.last_update_ms = now_ms;
    }

    /// The tokens left at `now_ms`; negative once the quota is exceeded.
    pub fn tokens(&mut self, window: &WindowConfig, rate: f64, now_ms: i64) -> f64 {
        self.refill(window, rate, now_ms);
        self.tokens
    }

    /// Takes `permits` tokens.
    pub fn record(&mut self, window: &WindowConfig, rate: f64, permits: f64, now_ms: i64) {
        self.refill(window, rate, now_ms);
        self.tokens = (self.tokens - permits).min(Self::burst(window, rate));
    }

    /// The throttle time of a bucket at `tokens` (Kafka's `throttleTimeMs`), 0 when not negative.
    pub fn throttle_ms(tokens: f64, rate: f64) -> i64 {
        if tokens >= 0.0 {
            return 0;
        }
        (-tokens / rate * 1000.0).round() as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_then_throttles_until_refilled() {
        let window = WindowConfig::new(11, 1);
        let mut bucket = TokenBucket::default();
        let now_ms = 1_700_000_000_000;
        // Rate 2/s: the burst is 22 partitions.
        assert_eq!(bucket.tokens(&window, 2.0, now_ms), 22.0);
        bucket.record(&window, 2.0, 30.0, now_ms);
        let tokens = bucket.tokens(&window, 2.0, now_ms);
        assert_eq!(tokens, -8.0);
        assert_eq!(TokenBucket::throttle_ms(tokens, 2.0), 4_000);
        // One second later two tokens are back.
        let tokens = bucket.tokens(&window, 2.0, now_ms + 1_000);
        assert_eq!(TokenBucket::throttle_ms(tokens, 2.0), 3_000);
        assert_eq!(bucket.tokens(&window, 2.0, now_ms + 100_000), 22.0);

        // An infinite rate never runs dry.
        let mut unlimited = TokenBucket::default();
        for _ in 0..3 {
            unlimited.record(&window, f64::INFINITY, 1e9, now_ms);
            let tokens = unlimited.tokens(&window, f64::INFINITY, now_ms);
            assert_eq!(TokenBucket::throttle_ms(tokens, f64::INFINITY), 0);
        }
    }
}
