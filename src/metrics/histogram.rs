//! A latency histogram of fixed buckets, recorded with atomics only (no lock, no allocation),
//! exported as Kafka's timers are: a count, a sum and the 50th..99.9th percentiles. A
//! percentile is the upper bound of the bucket that holds it, so it errs high by at most one
//! bucket (the bounds grow by 2-2.5x).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Bucket upper bounds in microseconds: 50 µs to 30 s, then one bucket for anything longer.
pub const BUCKET_BOUNDS_US: [u64; 20] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000, 15_000_000, 20_000_000, 30_000_000,
];

/// The percentiles Kafka's JMX timers report, as Prometheus quantiles.
pub const QUANTILES: [(f64, &str); 6] = [
    (0.50, "0.50"),
    (0.75, "0.75"),
    (0.95, "0.95"),
    (0.98, "0.98"),
    (0.99, "0.99"),
    (0.999, "0.999"),
];

#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; BUCKET_BOUNDS_US.len() + 1],
    count: AtomicU64,
    sum_us: AtomicU64,
}

impl Histogram {
    pub fn record(&self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.record_us(us);
    }

    pub fn record_ms(&self, ms: u64) {
        self.record_us(ms.saturating_mul(1_000));
    }

    fn record_us(&self, us: u64) {
        let bucket = BUCKET_BOUNDS_US.partition_point(|&bound| bound < us);
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The sum of the recorded times, in milliseconds.
    pub fn sum_ms(&self) -> f64 {
        self.sum_us.load(Ordering::Relaxed) as f64 / 1_000.0
    }

    /// The `q` quantile in milliseconds (0 when nothing was recorded).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        if total == 0 {
            return 0.0;
        }
        let rank = (q * total as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (i, n) in counts.iter().enumerate() {
            seen += n;
            if seen >= rank {
                let bound_us = BUCKET_BOUNDS_US.get(i).copied().unwrap_or(u64::MAX);
                if bound_us == u64::MAX {
                    // Past the last bound: the mean is the best figure left.
                    return self.sum_ms() / total as f64;
                }
                return bound_us as f64 / 1_000.0;
            }
        }
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_bucket_upper_bounds() {
        let h = Histogram::default();
        for _ in 0..98 {
            h.record(Duration::from_micros(80));
        }
        h.record(Duration::from_millis(3));
        h.record(Duration::from_secs(40));
        assert_eq!(h.count(), 100);
        assert_eq!(h.quantile_ms(0.5), 0.1);
        assert_eq!(h.quantile_ms(0.99), 5.0);
        assert!(h.quantile_ms(0.999) > 300.0);
        assert!((h.sum_ms() - (98.0 * 0.08 + 3.0 + 40_000.0)).abs() < 1e-6);
    }
}
