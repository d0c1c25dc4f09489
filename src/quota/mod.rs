//! Client quotas: `producer_byte_rate`, `consumer_byte_rate` and `request_percentage` for user
//! and client-id entities, measured and enforced as Kafka does, and turned into a throttle time.
//!
//! Handlers ask the `QuotaManager` how long a request's client must be throttled after charging
//! it (request bytes for Produce, response bytes for Fetch, handler thread time for every
//! request). The answer goes into the response's `throttle_time_ms`, and the connection is then
//! muted for that long (KIP-219); muting is the network layer's job. The manager never sleeps
//! or blocks a worker, except that AlterClientQuotas writes the quota file before answering.
//! The quotas set through AlterClientQuotas live in `<log.dirs>/client-quotas` (see `store`);
//! sluice's static defaults come from `server.properties` (`sluice.quota.*.default`).

mod admin;
mod entity;
mod rate;
mod store;
mod timing;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, RwLock};
use std::time::Duration;

pub use admin::{
    AlterEntry, AlterOp, FilterComponent, QuotaError, MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED,
};
pub use entity::{EntityName, QuotaEntity, QuotaKey, QuotaValues, ANONYMOUS_USER};
pub use store::QUOTA_FILE_NAME;
pub use timing::busy_time;

use entity::{QuotaOverrides, SensorKey};
use rate::{SampledRate, WindowConfig};

use crate::config::Config;

/// A client's measured rate is forgotten after this long without requests, as Kafka expires
/// its quota sensors (`InactiveSensorExpirationTimeSeconds`).
const INACTIVE_RATE_EXPIRY_MS: i64 = 3_600_000;
/// How often idle rates are looked for.
const SWEEP_INTERVAL_MS: i64 = 60_000;

/// The configured quotas and, per key, whether any entity or static default sets it.
struct Configured {
    overrides: QuotaOverrides,
    enabled: [bool; 3],
}

/// The measured rates of one quota key, by the clients that share them.
#[derive(Default)]
struct Rates {
    by_sensor: HashMap<SensorKey, SampledRate>,
    last_sweep_ms: i64,
}

impl Rates {
    fn sweep(&mut self, now_ms: i64) {
        if now_ms - self.last_sweep_ms < SWEEP_INTERVAL_MS {
            return;
        }
        self.last_sweep_ms = now_ms;
        self.by_sensor.retain(|_, rate| {
            rate.last_event_ms()
                .is_some_and(|last_ms| now_ms - last_ms < INACTIVE_RATE_EXPIRY_MS)
        });
    }
}

/// The broker's quotas and every client's measured rates.
pub struct QuotaManager {
    window: WindowConfig,
    /// sluice's `server.properties` defaults, by `QuotaKey::index`: the last resort for client
    /// ids, below `<default>` (where Kafka's removed `quota.producer.default` sat).
    static_defaults: [Option<f64>; 3],
    configured: RwLock<Configured>,
    /// By `QuotaKey::index`. Each lock is held only to record into or measure a rate.
    rates: [Mutex<Rates>; 3],
    /// Serialises AlterClientQuotas, so the file always holds the latest quotas.
    alter_lock: Mutex<()>,
    log_dir: PathBuf,
}

impl QuotaManager {
    /// Reads the quota file of the log directory (which must exist).
    pub fn open(config: &Config) -> anyhow::Result<QuotaManager> {
        let overrides = store::load(&config.log_dir)?;
        let static_defaults = [
            config.quota_producer_default_bytes_per_second,
            config.quota_consumer_default_bytes_per_second,
            config.quota_request_default_percentage,
        ];
        let manager = QuotaManager {
            window: WindowConfig::new(config.quota_window_num, config.quota_window_size_seconds),
            static_defaults,
            configured: RwLock::new(Configured {
                overrides: QuotaOverrides::default(),
                enabled: [false; 3],
            }),
            rates: Default::default(),
            alter_lock: Mutex::new(()),
            log_dir: config.log_dir.clone(),
        };
        manager.install(overrides);
        Ok(manager)
    }

    fn install(&self, overrides: QuotaOverrides) {
        let enabled = QuotaKey::ALL
            .map(|key| overrides.any(key) || self.static_defaults[key.index()].is_some());
        let mut configured = self.configured.write().unwrap_or_else(|e| e.into_inner());
        *configured = Configured { overrides, enabled };
    }

    /// The rate a client's `key` is measured in and its bound, or None when unlimited.
    fn resolve(&self, key: QuotaKey, client_id: &str) -> Option<(SensorKey, f64)> {
        let configured = self.configured.read().unwrap_or_else(|e| e.into_inner());
        if !configured.enabled[key.index()] {
            return None;
        }
        let overrides = &configured.overrides;
        let sensor = overrides.sensor_key(key, ANONYMOUS_USER, client_id);
        let bound = overrides.limit(key, &sensor, self.static_defaults[key.index()])?;
        Some((sensor, bound))
    }

    /// Charges `value` to the client's `key` rate; returns the throttle time in ms.
    fn record(&self, key: QuotaKey, client_id: &str, value: f64, now_ms: i64) -> i64 {
        let Some((sensor, bound)) = self.resolve(key, client_id) else {
            return 0;
        };
        let mut rates = self.rates[key.index()]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        rates.sweep(now_ms);
        let rate = rates.by_sensor.entry(sensor).or_default();
        rate.record_and_throttle_ms(&self.window, bound, value, now_ms)
    }

    /// Charges a Produce request's size (header and body) to `producer_byte_rate`.
    pub fn record_produce(&self, client_id: &str, request_bytes: usize, now_ms: i64) -> i32 {
        let throttle_ms = self.record(
            QuotaKey::ProducerByteRate,
            client_id,
            request_bytes as f64,
            now_ms,
        );
        saturate(throttle_ms)
    }

    /// Charges a Fetch response's size to `consumer_byte_rate`.
    pub fn record_fetch(&self, client_id: &str, response_bytes: usize, now_ms: i64) -> i32 {
        let throttle_ms = self.record(
            QuotaKey::ConsumerByteRate,
            client_id,
            response_bytes as f64,
            now_ms,
        );
        saturate(throttle_ms)
    }

    /// Takes back a charged fetch that is answered empty because it was throttled.
    pub fn unrecord_fetch(&self, client_id: &str, response_bytes: usize, now_ms: i64) {
        let key = QuotaKey::ConsumerByteRate;
        if let Some((sensor, _)) = self.resolve(key, client_id) {
            let mut rates = self.rates[key.index()]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let rate = rates.by_sensor.entry(sensor).or_default();
            rate.record(&self.window, -(response_bytes as f64), now_ms);
        }
    }

    /// The most a fetch may return so that one response never forces a throttle on its own:
    /// `consumer_byte_rate × (quota.window.num − 1) × quota.window.size.seconds`.
    pub fn fetch_max_bytes(&self, client_id: &str) -> i32 {
        match self.resolve(QuotaKey::ConsumerByteRate, client_id) {
            // Saturating, as Java's double-to-int cast.
            Some((_, bound)) => self.window.max_value_in_window(bound) as i32,
            None => i32::MAX,
        }
    }

    /// Charges handler thread time to `request_percentage` (percent of one thread per
    /// second; sluice's capacity is 100% × its worker threads). Kafka caps this throttle at
    /// one quota window.
    pub fn record_request_time(&self, client_id: &str, busy: Duration, now_ms: i64) -> i32 {
        let percent = busy.as_nanos() as f64 * 100.0 / 1e9;
        let throttle_ms = self.record(QuotaKey::RequestPercentage, client_id, percent, now_ms);
        saturate(throttle_ms.min(self.window.window_ms))
    }

    /// DescribeClientQuotas.
    pub fn describe(
        &self,
        components: &[FilterComponent],
        strict: bool,
    ) -> Result<Vec<(QuotaEntity, QuotaValues)>, QuotaError> {
        let configured = self.configured.read().unwrap_or_else(|e| e.into_inner());
        admin::describe(&configured.overrides, components, strict)
    }

    /// AlterClientQuotas: one result per entry. The accepted entries are written to the quota
    /// file and take effect at once, unless `validate_only`.
    pub fn alter(
        &self,
        entries: &[AlterEntry],
        validate_only: bool,
    ) -> Vec<Result<(), QuotaError>> {
        let _serial = self.alter_lock.lock().unwrap_or_else(|e| e.into_inner());
        let current = {
            let configured = self.configured.read().unwrap_or_else(|e| e.into_inner());
            configured.overrides.clone()
        };
        let mut altered = current.clone();
        let mut results = admin::alter_all(&mut altered, entries);
        if validate_only || altered == current {
            return results;
        }
        match store::save(&self.log_dir, &altered) {
            Ok(()) => {
                tracing::info!(entities = altered.entities.len(), "client quotas altered");
                self.install(altered);
            }
            Err(e) => {
                tracing::error!("cannot write the quota file: {e}");
                let error = QuotaError::Storage(format!("cannot write the quota file: {e}"));
                for result in results.iter_mut().filter(|r| r.is_ok()) {
                    *result = Err(error.clone());
                }
            }
        }
        results
    }
}

fn saturate(throttle_ms: i64) -> i32 {
    i32::try_from(throttle_ms.max(0)).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests;
