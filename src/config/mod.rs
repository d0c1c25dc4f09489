//! Broker settings: one typed struct with units in the field names, read from Kafka's own
//! `server.properties` keys and overridden by `key=value` pairs from the command line.
//!
//! Every setting is a row of one table: broker keys in `broker.rs`, topic configs (and the
//! broker keys that are their defaults) in `topic.rs`. Each default is written once, in its
//! row, and is Kafka's, except where sluice's embedded defaults differ on purpose
//! (`log.dirs=./data`, a loopback listener). `Config::default()` is the table's defaults; the
//! per-module settings (`LogConfig`, `RetentionConfig`, `CleanerConfig`, `GroupConfig`) are
//! built from a `Config` by their modules, and topic settings from `Config::topic_values`.
//!
//! A key Kafka knows but sluice does not use is logged once and ignored; a malformed value of a
//! key sluice uses stops start-up with the key's name. This module imports nothing else of the
//! crate, reads files only at start-up and never touches sockets.
//!
//! To add a broker setting, see `broker.rs`; a topic setting, `topic.rs`.

pub mod broker;
pub mod env;
pub mod group;
pub mod listeners;
mod properties;
pub mod topic;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use topic::TopicValues;

pub use listeners::{Listener, SecurityProtocol};
pub use properties::parse_properties;

/// Where the broker listens and what it tells clients to connect to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Every setting the broker reads. Field names carry their unit.
#[derive(Clone, Debug)]
pub struct Config {
    pub node_id: i32,
    /// Every listener served, in `listeners` order (controller listeners left out).
    pub listeners: Vec<Listener>,
    pub log_dir: PathBuf,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics_enable: bool,
    pub socket_request_max_bytes: usize,
    pub fetch_max_bytes: i32,
    /// Requests one connection may have read but not yet answered; the socket is not read past it.
    pub max_in_flight_requests_per_connection: usize,
    pub max_connections: usize,
    /// sluice only: the most partitions one topic may have (each holds open files and maps).
    pub max_partitions_per_topic: i32,
    pub log_flush_offset_checkpoint_interval_ms: u64,
    pub log_flush_scheduler_interval_ms: u64,
    pub log_retention_check_interval_ms: u64,
    /// `offsets.topic.segment.bytes`: `__consumer_offsets`' segment size, set when it is created.
    pub offsets_topic_segment_bytes: u64,
    /// `log.cleaner.enable`: compacted topics are cleaned.
    pub log_cleaner_enable: bool,
    /// `log.cleaner.backoff.ms`: the pause between cleaner passes over the compacted logs.
    pub log_cleaner_backoff_ms: u64,
    /// `log.cleaner.dedupe.buffer.size`: the most one cleaning round's key map may hold.
    pub log_cleaner_dedupe_buffer_bytes: u64,
    pub group_min_session_timeout_ms: i32,
    pub group_max_session_timeout_ms: i32,
    /// How long a new group waits for more members before its first rebalance completes.
    pub group_initial_rebalance_delay_ms: i64,
    pub group_max_size: usize,
    /// `group.consumer.*`: the KIP-848 consumer group protocol. Session timeout and heartbeat
    /// interval given to members (a group's own `consumer.*` configs override them within the
    /// min/max bounds), the largest group, the server-side assignors (the first is the
    /// default), the classic/consumer migration policy, how often regular expressions are
    /// resolved again, and the least time between two target assignments of a group.
    pub group_consumer_session_timeout_ms: i32,
    pub group_consumer_min_session_timeout_ms: i32,
    pub group_consumer_max_session_timeout_ms: i32,
    pub group_consumer_heartbeat_interval_ms: i32,
    pub group_consumer_min_heartbeat_interval_ms: i32,
    pub group_consumer_max_heartbeat_interval_ms: i32,
    pub group_consumer_max_size: usize,
    pub group_consumer_assignors: Vec<String>,
    pub group_consumer_migration_policy: String,
    pub group_consumer_regex_refresh_interval_ms: i64,
    pub group_consumer_assignment_interval_ms: i32,
    pub group_consumer_min_assignment_interval_ms: i32,
    pub group_consumer_max_assignment_interval_ms: i32,
    pub offsets_retention_minutes: i64,
    pub offset_metadata_max_bytes: usize,
    /// Idempotent producers idle this long are forgotten.
    pub producer_id_expiration_ms: i64,
    /// The transaction coordinator's settings (`transaction.*`, `transactional.id.*`; see
    /// `config/server.properties`): the longest timeout a producer may ask for, how long an
    /// idle id lives, how often timed-out transactions and expired ids are looked for.
    pub transaction_max_timeout_ms: i32,
    pub transactional_id_expiration_ms: i64,
    pub transaction_abort_timed_out_transaction_cleanup_interval_ms: i64,
    pub transaction_remove_expired_transaction_cleanup_interval_ms: i64,
    /// `__transaction_state`'s partitions and segment size (set when it is created), and the
    /// bytes read per step when it is loaded.
    pub transaction_state_log_num_partitions: i32,
    pub transaction_state_log_segment_bytes: u64,
    pub transaction_state_log_load_buffer_bytes: usize,
    /// KIP-890's check with the coordinator of a batch that would open a transaction (always
    /// for transaction version 2), and how a produce whose check finds the transaction
    /// completing retries it (`add.partitions.to.txn.retry.backoff.ms`, `.max.ms`).
    pub transaction_partition_verification_enable: bool,
    pub add_partitions_to_txn_retry_backoff_ms: i64,
    pub add_partitions_to_txn_retry_backoff_max_ms: i64,
    /// `quota.window.num`: how many samples a client quota's rate is measured over.
    pub quota_window_num: usize,
    /// `quota.window.size.seconds`: the span of one sample.
    pub quota_window_size_seconds: u32,
    /// sluice only (`sluice.quota.producer.default`; Kafka removed its static quota keys in
    /// 3.0): `producer_byte_rate` for client ids that no configured quota covers.
    pub quota_producer_default_bytes_per_second: Option<f64>,
    /// sluice only (`sluice.quota.consumer.default`): the same for `consumer_byte_rate`.
    pub quota_consumer_default_bytes_per_second: Option<f64>,
    /// sluice only (`sluice.quota.request.percentage.default`): the same for
    /// `request_percentage`.
    pub quota_request_default_percentage: Option<f64>,
    /// sluice only (`sluice.http.listener=host:port`): where `/metrics`, `/health` and
    /// `/ready` (and the fault-injection API, when enabled) are served; None: not at all.
    pub http_listener: Option<Endpoint>,
    /// sluice only (`sluice.fault.injection.enable`): the HTTP listener and the embedded API
    /// accept fault-injection rules (docs/fault-injection.md). Never for production.
    pub fault_injection_enable: bool,
    /// sluice only (`sluice.emulate.kafka.version=3.6`): advertise and serve only the API
    /// versions that Kafka release had (`protocol::kafka_releases`).
    pub emulate_kafka_version: Option<String>,
    /// `queued.max.request.bytes`: bytes of requests read but not yet answered, broker-wide;
    /// sockets are not read past it. 0 or less: unbounded (Kafka's default, -1).
    pub queued_max_request_bytes: i64,
    /// The `server.properties` pairs as given (after overrides), for DescribeConfigs: they are
    /// the STATIC_BROKER_CONFIG layer under topic configs. With dynamic configs applied
    /// (`with_dynamic`), every layer, the most specific on top: topic settings (topic configs'
    /// broker synonyms, such as `log.segment.bytes`) are read from here through the topic table.
    pub properties: BTreeMap<String, String>,
}

impl Default for Config {
    /// The broker table's defaults.
    fn default() -> Self {
        Config::from_pairs(&[]).expect("the broker table's defaults are valid")
    }
}

/// A start-up configuration problem, naming the key at fault.
#[derive(Debug)]
pub struct ConfigError(pub String);

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Reads a Java properties file (as Kafka's `server.properties`) into key/value pairs.
    pub fn read_properties(path: &Path) -> Result<Vec<(String, String)>, ConfigError> {
        let bytes = std::fs::read(path)
            .map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
        Ok(parse_properties(&properties::decode_latin1(&bytes)))
    }

    /// Builds the configuration from properties applied in key order over the table's defaults.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Config, ConfigError> {
        let map: BTreeMap<&str, &str> = pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut config = Config::unset();
        for setting in broker::settings() {
            if let Some(default) = setting.default() {
                setting.apply(&mut config, default)?;
            }
        }
        config.properties = map
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for (&key, &value) in &map {
            match broker::find(key) {
                Some(setting) if setting.is_used() => setting.apply(&mut config, value)?,
                Some(_) => tracing::info!(
                    key,
                    "ignoring Kafka setting that a single sluice broker does not use"
                ),
                // A listener's own value of a known key: read through `listener_value`.
                None if listeners::prefixed_base_key(key).is_some_and(is_listener_key) => {}
                None => tracing::warn!(key, "ignoring unknown setting"),
            }
        }
        let default_listeners = broker::find("listeners")
            .and_then(|s| s.default())
            .unwrap_or_default();
        config.listeners = listeners::resolve(&map, default_listeners)?;
        if config.queued_max_request_bytes > 0
            && (config.queued_max_request_bytes as u64) < config.socket_request_max_bytes as u64
        {
            // Kafka's own check: one largest request must always fit.
            return Err(ConfigError(
                "queued.max.request.bytes must be at least socket.request.max.bytes".into(),
            ));
        }
        group::check_consumer_group_settings(&config)?;
        if let Some(http) = &config.http_listener {
            // The control endpoint is never one that Kafka clients use.
            if let Some(listener) = config
                .listeners
                .iter()
                .find(|l| l.bind.port == http.port && http.port != 0)
            {
                return Err(ConfigError(format!(
                    "sluice.http.listener: {http} is the port of Kafka listener {}",
                    listener.name
                )));
            }
        }
        Ok(config)
    }

    /// Every field empty, before the table's defaults are applied.
    fn unset() -> Config {
        Config {
            node_id: 0,
            listeners: Vec::new(),
            log_dir: PathBuf::new(),
            num_partitions: 0,
            default_replication_factor: 0,
            auto_create_topics_enable: false,
            socket_request_max_bytes: 0,
            fetch_max_bytes: 0,
            max_in_flight_requests_per_connection: 0,
            max_connections: 0,
            max_partitions_per_topic: 0,
            log_flush_offset_checkpoint_interval_ms: 0,
            log_flush_scheduler_interval_ms: 0,
            log_retention_check_interval_ms: 0,
            offsets_topic_segment_bytes: 0,
            log_cleaner_enable: false,
            log_cleaner_backoff_ms: 0,
            log_cleaner_dedupe_buffer_bytes: 0,
            group_min_session_timeout_ms: 0,
            group_max_session_timeout_ms: 0,
            group_initial_rebalance_delay_ms: 0,
            group_max_size: 0,
            group_consumer_session_timeout_ms: 0,
            group_consumer_min_session_timeout_ms: 0,
            group_consumer_max_session_timeout_ms: 0,
            group_consumer_heartbeat_interval_ms: 0,
            group_consumer_min_heartbeat_interval_ms: 0,
            group_consumer_max_heartbeat_interval_ms: 0,
            group_consumer_max_size: 0,
            group_consumer_assignors: Vec::new(),
            group_consumer_migration_policy: String::new(),
            group_consumer_regex_refresh_interval_ms: 0,
            group_consumer_assignment_interval_ms: 0,
            group_consumer_min_assignment_interval_ms: 0,
            group_consumer_max_assignment_interval_ms: 0,
            offsets_retention_minutes: 0,
            offset_metadata_max_bytes: 0,
            producer_id_expiration_ms: 0,
            transaction_max_timeout_ms: 0,
            transactional_id_expiration_ms: 0,
            transaction_abort_timed_out_transaction_cleanup_interval_ms: 0,
            transaction_remove_expired_transaction_cleanup_interval_ms: 0,
            transaction_state_log_num_partitions: 0,
            transaction_state_log_segment_bytes: 0,
            transaction_state_log_load_buffer_bytes: 0,
            transaction_partition_verification_enable: false,
            add_partitions_to_txn_retry_backoff_ms: 0,
            add_partitions_to_txn_retry_backoff_max_ms: 0,
            quota_window_num: 0,
            quota_window_size_seconds: 0,
            quota_producer_default_bytes_per_second: None,
            quota_consumer_default_bytes_per_second: None,
            quota_request_default_percentage: None,
            queued_max_request_bytes: 0,
            http_listener: None,
            fault_injection_enable: false,
            emulate_kafka_version: None,
            properties: BTreeMap::new(),
        }
    }

    /// This configuration with dynamic broker configs (KIP-226) layered over it: `dynamic` holds
    /// the cluster default and this broker's values already merged, the broker's on top. The
    /// result's `properties` hold every layer, so topic settings resolve through all of them
    /// (Kafka's precedence between the units of one setting holds across layers: a static
    /// `log.retention.ms` still beats a dynamic `log.retention.hours`).
    pub fn with_dynamic(&self, dynamic: &BTreeMap<String, String>) -> Result<Config, ConfigError> {
        let mut config = self.clone();
        for (key, value) in dynamic {
            if let Some(setting) = broker::find(key) {
                setting.apply(&mut config, value)?;
            }
            config.properties.insert(key.clone(), value.clone());
        }
        Ok(config)
    }

    /// The topic configs in force for a topic with no overrides: what every topic inherits
    /// from this broker (and what tests that need the per-log defaults build them from).
    pub fn topic_values(&self) -> TopicValues<'_> {
        static NO_OVERRIDES: BTreeMap<String, String> = BTreeMap::new();
        TopicValues::new(&NO_OVERRIDES, &self.properties)
    }

    /// `key` for one listener: `listener.name.<listener>.<key>` if set, else `key`.
    pub fn listener_value(&self, listener: &str, key: &str) -> Option<&str> {
        let prefixed = format!("listener.name.{}.{key}", listener.to_ascii_lowercase());
        self.properties
            .get(&prefixed)
            .or_else(|| self.properties.get(key))
            .map(String::as_str)
    }

    /// `key` for one SASL mechanism of one listener: `listener.name.<l>.<mechanism>.<key>`,
    /// then the listener's value, then `key` (Kafka's `ConfigurationUtils` order).
    pub fn mechanism_value(&self, listener: &str, mechanism: &str, key: &str) -> Option<&str> {
        self.mechanism_only_value(listener, mechanism, key)
            .or_else(|| self.listener_value(listener, key))
    }

    /// `listener.name.<l>.<mechanism>.<key>` alone: Kafka reads `sasl.jaas.config` and the
    /// server callback handler only in this form.
    pub fn mechanism_only_value(&self, listener: &str, mechanism: &str, key: &str) -> Option<&str> {
        let prefixed = format!(
            "listener.name.{}.{}.{key}",
            listener.to_ascii_lowercase(),
            mechanism.to_ascii_lowercase()
        );
        self.properties.get(&prefixed).map(String::as_str)
    }
}

/// Whether a listener-prefixed key's rest (`<key>` or `<mechanism>.<key>`) names a key sluice
/// reads per listener.
fn is_listener_key(rest: &str) -> bool {
    let known = |k: &str| broker::find(k).is_some_and(|s| s.is_used());
    known(rest) || rest.split_once('.').is_some_and(|(_, k)| known(k))
}

fn parse<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, ConfigError> {
    value
        .parse()
        .map_err(|_| ConfigError(format!("{key}: cannot parse '{value}'")))
}

fn parse_min<T: std::str::FromStr + PartialOrd + fmt::Display>(
    key: &str,
    value: &str,
    min: T,
) -> Result<T, ConfigError> {
    let parsed: T = parse(key, value)?;
    if parsed < min {
        return Err(ConfigError(format!(
            "{key}: {value} is below the minimum {min}"
        )));
    }
    Ok(parsed)
}

/// A quota in bytes per second: a whole number of at least 1, as Kafka's LONG quota keys.
fn byte_rate(key: &str, value: &str) -> Result<f64, ConfigError> {
    let bytes_per_second: u64 = parse_min(key, value, 1)?;
    Ok(bytes_per_second as f64)
}

fn parse_bool(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(ConfigError(format!(
            "{key}: expected true or false, got '{value}'"
        ))),
    }
}

/// `host:port` (an `http://` prefix allowed); empty: no HTTP listener.
fn parse_http_listener(key: &str, value: &str) -> Result<Option<Endpoint>, ConfigError> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    let address = value.strip_prefix("http://").unwrap_or(value);
    let parsed = listeners::parse_endpoints(key, &format!("HTTP://{address}"))?;
    let Some((_, mut endpoint)) = parsed.into_iter().next() else {
        return Err(ConfigError(format!(
            "{key}: expected host:port, got '{value}'"
        )));
    };
    if endpoint.host.is_empty() {
        endpoint.host = "0.0.0.0".into();
    }
    Ok(Some(endpoint))
}

/// `MAJOR.MINOR` of a Kafka release (`3.6`; a patch number is allowed and ignored); the
/// releases known are checked when the broker starts (`protocol::kafka_releases`).
fn parse_emulated_version(key: &str, value: &str) -> Result<Option<String>, ConfigError> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    let mut parts = value.split('.');
    let (Some(major), Some(minor)) = (parts.next(), parts.next()) else {
        return Err(ConfigError(format!(
            "{key}: expected MAJOR.MINOR, got '{value}'"
        )));
    };
    if major.parse::<u32>().is_err() || minor.parse::<u32>().is_err() {
        return Err(ConfigError(format!(
            "{key}: expected MAJOR.MINOR, got '{value}'"
        )));
    }
    Ok(Some(format!("{major}.{minor}")))
}

#[cfg(test)]
mod tests;
