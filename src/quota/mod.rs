//! Client quotas: `producer_byte_rate`, `consumer_byte_rate`, `request_percentage` and
//! `controller_mutation_rate` for user and client-id entities, and `connection_creation_rate`
//! for ip entities, measured and enforced as Kafka does, and turned into a throttle time.
//!
//! Handlers ask the `QuotaManager` how long a request's client must be throttled after charging
//! it (request bytes for Produce, response bytes for Fetch, handler thread time for every
//! request, created and deleted partitions for CreateTopics, CreatePartitions and DeleteTopics).
//! The answer goes into the response's `throttle_time_ms`, and the connection is then muted for
//! that long (KIP-219); muting is the network layer's job. The listener asks, for each accepted
//! connection, whether its ip exceeds its connection rate; such a connection is closed unserved
//! after the throttle time, as Kafka's acceptor does. The manager never sleeps
//! or blocks a worker, except that AlterClientQuotas writes the quota file before answering.
//! The quotas set through AlterClientQuotas live in `<log.dirs>/client-quotas` (see `store`);
//! sluice's static defaults come from `server.properties` (`sluice.quota.*.default`).

mod admin;
mod entity;
mod mutation;
mod rate;
mod store;
mod timing;

use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
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
use mutation::TokenBucket;
use rate::{SampledRate, WindowConfig};

use crate::config::Config;
use crate::disk::Disk;

/// Who a request is charged to: the authenticated user (the principal's name; `ANONYMOUS`
/// without authentication) and the request header's client id.
#[derive(Clone, Copy, Debug)]
pub struct QuotaClient<'a> {
    pub user: &'a str,
    pub client_id: &'a str,
}

/// A bare client id: a request of the unauthenticated user (`ANONYMOUS`).
impl<'a> From<&'a str> for QuotaClient<'a> {
    fn from(client_id: &'a str) -> Self {
        QuotaClient {
            user: ANONYMOUS_USER,
            client_id,
        }
    }
}

/// A client's measured rate is forgotten after this long without requests, as Kafka expires
/// its quota sensors (`InactiveSensorExpirationTimeSeconds`).
const INACTIVE_RATE_EXPIRY_MS: i64 = 3_600_000;
/// How often idle rates are looked for.
const SWEEP_INTERVAL_MS: i64 = 60_000;

/// The configured quotas and, per key, whether any entity or static default sets it.
struct Configured {
    overrides: QuotaOverrides,
    enabled: [bool; QuotaKey::COUNT],
    /// `connection_creation_rate` by address: named ip entities, resolved when installed as
    /// Kafka resolves them (`InetAddress.getByName`).
    ip_connection_rates: HashMap<IpAddr, f64>,
    /// `connection_creation_rate` of the default ip entity.
    default_ip_connection_rate: Option<f64>,
}

/// The measured rates of one quota key, by who shares them: the clients of a `SensorKey`, or
/// an ip for connections.
struct Rates<K, R> {
    by_sensor: HashMap<K, (R, i64)>,
    last_sweep_ms: i64,
}

impl<K, R> Default for Rates<K, R> {
    fn default() -> Self {
        Rates {
            by_sensor: HashMap::new(),
            last_sweep_ms: 0,
        }
    }
}

impl<K: std::hash::Hash + Eq, R: Default> Rates<K, R> {
    /// The rate of `sensor`, marked as used at `now_ms`; idle ones are dropped now and then.
    fn get(&mut self, sensor: K, now_ms: i64) -> &mut R {
        if now_ms - self.last_sweep_ms >= SWEEP_INTERVAL_MS {
            self.last_sweep_ms = now_ms;
            self.by_sensor
                .retain(|_, (_, last_ms)| now_ms - *last_ms < INACTIVE_RATE_EXPIRY_MS);
        }
        let (rate, last_ms) = self.by_sensor.entry(sensor).or_default();
        *last_ms = now_ms;
        rate
    }
}

/// The broker's quotas and every client's measured rates.
pub struct QuotaManager {
    window: WindowConfig,
    /// sluice's `server.properties` defaults, by `QuotaKey::index`: the last resort for client
    /// ids, below `<default>` (where Kafka's removed `quota.producer.default` sat).
    static_defaults: [Option<f64>; QuotaKey::COUNT],
    configured: RwLock<Configured>,
    /// By `QuotaKey::index` (the byte rates and `request_percentage`). Each lock is held only
    /// to record into or measure a rate.
    rates: [Mutex<Rates<SensorKey, SampledRate>>; 3],
    /// `controller_mutation_rate` buckets.
    mutation_buckets: Mutex<Rates<SensorKey, TokenBucket>>,
    /// `connection_creation_rate` by ip.
    connection_rates: Mutex<Rates<IpAddr, SampledRate>>,
    /// Serialises AlterClientQuotas, so the file always holds the latest quotas.
    alter_lock: Mutex<()>,
    disk: Disk,
    log_dir: PathBuf,
}

impl QuotaManager {
    /// Reads the quota file of the log directory (which must exist).
    pub fn open(config: &Config, disk: &Disk) -> anyhow::Result<QuotaManager> {
        let overrides = store::load(disk, &config.log_dir)?;
        let static_defaults = [
            config.quota_producer_default_bytes_per_second,
            config.quota_consumer_default_bytes_per_second,
            config.quota_request_default_percentage,
            None,
            None,
        ];
        let manager = QuotaManager {
            window: WindowConfig::new(config.quota_window_num, config.quota_window_size_seconds),
            static_defaults,
            configured: RwLock::new(Configured {
                overrides: QuotaOverrides::default(),
                enabled: [false; QuotaKey::COUNT],
                ip_connection_rates: HashMap::new(),
                default_ip_connection_rate: None,
            }),
            rates: Default::default(),
            mutation_buckets: Default::default(),
            connection_rates: Default::default(),
            alter_lock: Mutex::new(()),
            disk: disk.clone(),
            log_dir: config.log_dir.clone(),
        };
        manager.install(overrides);
        Ok(manager)
    }

    fn install(&self, overrides: QuotaOverrides) {
        let enabled = QuotaKey::ALL
            .map(|key| overrides.any(key) || self.static_defaults[key.index()].is_some());
        let mut ip_connection_rates = HashMap::new();
        let mut default_ip_connection_rate = None;
        for (entity, values) in &overrides.entities {
            let Some(rate) = values.get(&QuotaKey::ConnectionCreationRate) else {
                continue;
            };
            match &entity.ip {
                Some(EntityName::Default) => default_ip_connection_rate = Some(*rate),
                Some(EntityName::Named(name)) => match resolve_ip(name) {
                    Some(ip) => {
                        ip_connection_rates.insert(ip, *rate);
                    }
                    None => tracing::warn!("ip quota entity {name} does not resolve; ignored"),
                },
                None => {}
            }
        }
        let mut configured = self.configured.write().unwrap_or_else(|e| e.into_inner());
        *configured = Configured {
            overrides,
            enabled,
            ip_connection_rates,
            default_ip_connection_rate,
        };
    }

    /// The rate a client's `key` is measured in and its bound, or None when unlimited.
    fn resolve(&self, key: QuotaKey, client: QuotaClient<'_>) -> Option<(SensorKey, f64)> {
        let configured = self.configured.read().unwrap_or_else(|e| e.into_inner());
        if !configured.enabled[key.index()] {
            return None;
        }
        let overrides = &configured.overrides;
        let sensor = overrides.sensor_key(key, client.user, client.client_id);
        let bound = overrides.limit(key, &sensor, self.static_defaults[key.index()])?;
        Some((sensor, bound))
    }

    /// Charges `value` to the client's `key` rate; returns the throttle time in ms.
    fn record(&self, key: QuotaKey, client: QuotaClient<'_>, value: f64, now_ms: i64) -> i64 {
        let Some((sensor, bound)) = self.resolve(key, client) else {
            return 0;
        };
        let mut rates = self.rates[key.index()]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let rate = rates.get(sensor, now_ms);
        rate.record_and_throttle_ms(&self.window, bound, value, now_ms)
    }

    /// Charges a Produce request's size (header and body) to `producer_byte_rate`.
    pub fn record_produce<'c>(
        &self,
        client: impl Into<QuotaClient<'c>>,
        request_bytes: usize,
        now_ms: i64,
    ) -> i32 {
        let client = client.into();
        let throttle_ms = self.record(
            QuotaKey::ProducerByteRate,
            client,
            request_bytes as f64,
            now_ms,
        );
        saturate(throttle_ms)
    }

    /// Charges a Fetch response's size to `consumer_byte_rate`.
    pub fn record_fetch<'c>(
        &self,
        client: impl Into<QuotaClient<'c>>,
        response_bytes: usize,
        now_ms: i64,
    ) -> i32 {
        let client = client.into();
        let throttle_ms = self.record(
            QuotaKey::ConsumerByteRate,
            client,
            response_bytes as f64,
            now_ms,
        );
        saturate(throttle_ms)
    }

    /// Takes back a charged fetch that is answered empty because it was throttled.
    pub fn unrecord_fetch<'c>(
        &self,
        client: impl Into<QuotaClient<'c>>,
        response_bytes: usize,
        now_ms: i64,
    ) {
        let client = client.into();
        let key = QuotaKey::ConsumerByteRate;
        if let Some((sensor, _)) = self.resolve(key, client) {
            let mut rates = self.rates[key.index()]
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let rate = rates.get(sensor, now_ms);
            rate.record(&self.window, -(response_bytes as f64), now_ms);
        }
    }

    /// The most a fetch may return so that one response never forces a throttle on its own:
    /// `consumer_byte_rate × (quota.window.num − 1) × quota.window.size.seconds`.
    pub fn fetch_max_bytes<'c>(&self, client: impl Into<QuotaClient<'c>>) -> i32 {
        let client = client.into();
        match self.resolve(QuotaKey::ConsumerByteRate, client) {
            // Saturating, as Java's double-to-int cast.
            Some((_, bound)) => self.window.max_value_in_window(bound) as i32,
            None => i32::MAX,
        }
    }

    /// Charges handler thread time to `request_percentage` (percent of one thread per
    /// second; sluice's capacity is 100% × its worker threads). Kafka caps this throttle at
    /// one quota window.
    pub fn record_request_time<'c>(
        &self,
        client: impl Into<QuotaClient<'c>>,
        busy: Duration,
        now_ms: i64,
    ) -> i32 {
        let client = client.into();
        let percent = busy.as_nanos() as f64 * 100.0 / 1e9;
        let throttle_ms = self.record(QuotaKey::RequestPercentage, client, percent, now_ms);
        saturate(throttle_ms.min(self.window.window_ms))
    }

    /// The `controller_mutation_rate` of a CreateTopics, CreatePartitions or DeleteTopics
    /// request from `client_id`; `strict` for the versions that may refuse topics.
    pub fn controller_mutation<'c>(
        &self,
        client: impl Into<QuotaClient<'c>>,
        strict: bool,
    ) -> ControllerMutationQuota<'_> {
        let client = client.into();
        ControllerMutationQuota {
            manager: self,
            limit: self.resolve(QuotaKey::ControllerMutationRate, client),
            strict,
            last_throttle_ms: 0,
            last_recorded_ms: 0,
        }
    }

    /// Charges a new connection from `ip` to its `connection_creation_rate`; returns how long
    /// to hold it before closing it unserved, 0 to serve it. A refused connection is not
    /// counted, and the wait is at most one quota window (Kafka's `boundedThrottleTime`).
    pub fn record_connection(&self, ip: IpAddr, now_ms: i64) -> i64 {
        let limit = {
            let configured = self.configured.read().unwrap_or_else(|e| e.into_inner());
            configured
                .ip_connection_rates
                .get(&ip)
                .copied()
                .or(configured.default_ip_connection_rate)
        };
        let Some(bound) = limit else {
            return 0;
        };
        let mut rates = self
            .connection_rates
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let rate = rates.get(ip, now_ms);
        let throttle_ms = rate.record_and_throttle_ms(&self.window, bound, 1.0, now_ms);
        if throttle_ms > 0 {
            rate.record(&self.window, -1.0, now_ms);
        }
        throttle_ms.min(self.window.window_ms)
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
        match store::save(&self.disk, &self.log_dir, &altered) {
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

/// One request's `controller_mutation_rate` (Kafka's `StrictControllerMutationQuota` and
/// `PermissiveControllerMutationQuota`): charges partitions and remembers the last throttle.
pub struct ControllerMutationQuota<'a> {
    manager: &'a QuotaManager,
    /// The shared bucket and its rate; None when no quota governs the client.
    limit: Option<(SensorKey, f64)>,
    strict: bool,
    last_throttle_ms: i64,
    last_recorded_ms: i64,
}

impl ControllerMutationQuota<'_> {
    /// Charges `partitions` created or deleted partitions at `now_ms`. A strict quota whose
    /// bucket is already negative refuses them and charges nothing: Err(THROTTLING_QUOTA_EXCEEDED).
    pub fn record(&mut self, partitions: i32, now_ms: i64) -> Result<(), ThrottlingQuotaExceeded> {
        let Some((sensor, rate)) = &self.limit else {
            return Ok(());
        };
        let window = &self.manager.window;
        let mut buckets = self
            .manager
            .mutation_buckets
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let bucket = buckets.get(sensor.clone(), now_ms);
        if self.strict {
            let tokens = bucket.tokens(window, *rate, now_ms);
            if tokens < 0.0 {
                self.last_throttle_ms = TokenBucket::throttle_ms(tokens, *rate);
                self.last_recorded_ms = now_ms;
                return Err(ThrottlingQuotaExceeded);
            }
            bucket.record(window, *rate, f64::from(partitions), now_ms);
        } else {
            bucket.record(window, *rate, f64::from(partitions), now_ms);
            let tokens = bucket.tokens(window, *rate, now_ms);
            if tokens < 0.0 {
                self.last_throttle_ms = TokenBucket::throttle_ms(tokens, *rate);
                self.last_recorded_ms = now_ms;
            }
        }
        Ok(())
    }

    /// The throttle time to answer with: the last one found, less the time since.
    pub fn throttle_time_ms(&self, now_ms: i64) -> i32 {
        saturate(self.last_throttle_ms - (now_ms - self.last_recorded_ms))
    }
}

/// A strict `controller_mutation_rate` refused a topic (Kafka's THROTTLING_QUOTA_EXCEEDED,
/// "The throttling quota has been exceeded.").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThrottlingQuotaExceeded;

/// What an ip entity names: an address, or a host name resolved once, as Kafka does.
fn resolve_ip(name: &str) -> Option<IpAddr> {
    if let Ok(ip) = name.parse() {
        return Some(ip);
    }
    (name, 0)
        .to_socket_addrs()
        .ok()?
        .next()
        .map(|addr| addr.ip())
}

fn saturate(throttle_ms: i64) -> i32 {
    i32::try_from(throttle_ms.max(0)).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests;
