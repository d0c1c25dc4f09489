//! Broker settings: one typed struct with units in the field names, read from Kafka's own
//! `server.properties` keys and overridden by `key=value` pairs from the command line.
//!
//! Defaults live only here and are Kafka's, except where sluice's embedded defaults differ on
//! purpose (`log.dirs=./data`, a loopback listener). A key Kafka knows but sluice does not use is
//! logged once and ignored; a malformed value of a key sluice uses stops start-up with the key's
//! name. This module reads files only at start-up and never touches sockets.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::log::LogConfig;

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
    pub listener: Endpoint,
    pub advertised_listener: Endpoint,
    pub log_dir: PathBuf,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics_enable: bool,
    pub log: LogConfig,
    pub message_max_bytes: i32,
    pub socket_request_max_bytes: usize,
    pub fetch_max_bytes: i32,
    /// Requests one connection may have read but not yet answered; the socket is not read past it.
    pub max_in_flight_requests_per_connection: usize,
    pub max_connections: usize,
    /// sluice only: the most partitions one topic may have (each holds open files and maps).
    pub max_partitions_per_topic: i32,
    pub log_flush_offset_checkpoint_interval_ms: u64,
    pub log_flush_scheduler_interval_ms: u64,
    /// KIP-1030: records stamped further than this in the future are refused.
    pub log_message_timestamp_after_max_ms: i64,
    pub log_message_timestamp_before_max_ms: i64,
    /// `log.retention.ms` (or `.minutes`, `.hours`): segments older than this are deleted; -1 never.
    pub log_retention_ms: i64,
    /// `log.retention.bytes`: a partition's size limit; -1 none.
    pub log_retention_bytes: i64,
    pub log_retention_check_interval_ms: u64,
    /// `offsets.topic.segment.bytes`: `__consumer_offsets`' segment size, set when it is created.
    pub offsets_topic_segment_bytes: u64,
    /// `log.cleaner.enable`: compacted topics are cleaned.
    pub log_cleaner_enable: bool,
    /// `log.cleaner.backoff.ms`: the pause between cleaner passes over the compacted logs.
    pub log_cleaner_backoff_ms: u64,
    /// `log.cleaner.dedupe.buffer.size`: the most one cleaning round's key map may hold.
    pub log_cleaner_dedupe_buffer_bytes: u64,
    /// `log.segment.delete.delay.ms`: how long a deleted segment's `.deleted` files linger.
    pub log_segment_delete_delay_ms: i64,
    /// `log.cleanup.policy`: `delete`, `compact` or both.
    pub log_cleanup_policy: String,
    pub group_min_session_timeout_ms: i32,
    pub group_max_session_timeout_ms: i32,
    /// How long a new group waits for more members before its first rebalance completes.
    pub group_initial_rebalance_delay_ms: i64,
    pub group_max_size: usize,
    pub offsets_retention_minutes: i64,
    pub offset_metadata_max_bytes: usize,
    /// Idempotent producers idle this long are forgotten.
    pub producer_id_expiration_ms: i64,
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
    /// `queued.max.request.bytes`: bytes of requests read but not yet answered, broker-wide;
    /// sockets are not read past it. 0 or less: unbounded (Kafka's default, -1).
    pub queued_max_request_bytes: i64,
    /// The `server.properties` pairs as given (after overrides), for DescribeConfigs: they are
    /// the STATIC_BROKER_CONFIG layer under topic configs.
    pub properties: BTreeMap<String, String>,
}

impl Default for Config {
    fn default() -> Self {
        let listener = Endpoint {
            host: "127.0.0.1".into(),
            port: 9092,
        };
        Config {
            node_id: 1,
            advertised_listener: listener.clone(),
            listener,
            log_dir: PathBuf::from("./data"),
            num_partitions: 1,
            default_replication_factor: 1,
            auto_create_topics_enable: true,
            log: LogConfig::default(),
            message_max_bytes: 1_048_588,
            socket_request_max_bytes: 104_857_600,
            fetch_max_bytes: 57_671_680,
            max_in_flight_requests_per_connection: 16,
            max_connections: 10_000,
            max_partitions_per_topic: 10_000,
            log_flush_offset_checkpoint_interval_ms: 60_000,
            log_flush_scheduler_interval_ms: 1_000,
            log_message_timestamp_after_max_ms: 3_600_000,
            log_message_timestamp_before_max_ms: i64::MAX,
            log_retention_ms: 604_800_000,
            log_retention_bytes: -1,
            log_retention_check_interval_ms: 300_000,
            offsets_topic_segment_bytes: 104_857_600,
            log_cleaner_enable: true,
            log_cleaner_backoff_ms: 15_000,
            log_cleaner_dedupe_buffer_bytes: 134_217_728,
            log_segment_delete_delay_ms: 60_000,
            log_cleanup_policy: "delete".into(),
            group_min_session_timeout_ms: 6_000,
            group_max_session_timeout_ms: 1_800_000,
            group_initial_rebalance_delay_ms: 3_000,
            group_max_size: i32::MAX as usize,
            offsets_retention_minutes: 10_080,
            offset_metadata_max_bytes: 4_096,
            producer_id_expiration_ms: 86_400_000,
            quota_window_num: 11,
            quota_window_size_seconds: 1,
            quota_producer_default_bytes_per_second: None,
            quota_consumer_default_bytes_per_second: None,
            quota_request_default_percentage: None,
            // sluice bounds request memory by default; Kafka's default is -1 (unbounded).
            queued_max_request_bytes: 104_857_600,
            properties: BTreeMap::new(),
        }
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

/// Kafka keys that sluice accepts without using: a single broker has no use for them.
const IGNORED_KAFKA_KEYS: &[&str] = &[
    "process.roles",
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "controller.listener.names",
    "inter.broker.listener.name",
    "listener.security.protocol.map",
    "num.network.threads",
    "num.io.threads",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "num.recovery.threads.per.data.dir",
    "offsets.topic.replication.factor",
    "offsets.topic.num.partitions",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
    "broker.id",
];

impl Config {
    /// Reads a Java properties file (as Kafka's `server.properties`) into key/value pairs.
    pub fn read_properties(path: &Path) -> Result<Vec<(String, String)>, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
        Ok(parse_properties(&text))
    }

    /// Builds the configuration from properties applied in order over the defaults.
    pub fn from_pairs(pairs: &[(String, String)]) -> Result<Config, ConfigError> {
        let map: BTreeMap<&str, &str> = pairs
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let mut config = Config {
            properties: map
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..Config::default()
        };
        let mut advertised_set = false;
        for (&key, &value) in &map {
            if !config.apply(key, value, &mut advertised_set)? {
                if IGNORED_KAFKA_KEYS.contains(&key) {
                    tracing::info!(
                        key,
                        "ignoring Kafka setting that a single sluice broker does not use"
                    );
                } else {
                    tracing::warn!(key, "ignoring unknown setting");
                }
            }
        }
        if config.queued_max_request_bytes > 0
            && (config.queued_max_request_bytes as u64) < config.socket_request_max_bytes as u64
        {
            // Kafka's own check: one largest request must always fit.
            return Err(ConfigError(
                "queued.max.request.bytes must be at least socket.request.max.bytes".into(),
            ));
        }
        if !advertised_set {
            config.advertised_listener = config.listener.clone();
            if config.advertised_listener.host == "0.0.0.0" {
                config.advertised_listener.host = "127.0.0.1".into();
            }
        }
        Ok(config)
    }

    /// This configuration with dynamic broker configs (KIP-226) layered over it: `dynamic` holds
    /// the cluster default and this broker's values already merged, the broker's on top. The
    /// result's `properties` hold every layer, so topic settings resolve through all of them.
    pub fn with_dynamic(&self, dynamic: &BTreeMap<String, String>) -> Result<Config, ConfigError> {
        let mut config = self.clone();
        let mut advertised_set = true;
        for (key, value) in dynamic {
            config.apply(key, value, &mut advertised_set)?;
            config.properties.insert(key.clone(), value.clone());
        }
        // Kafka's precedence between the units of one setting holds across layers: a static
        // log.retention.ms still beats a dynamic log.retention.hours, so the most precise key
        // set in any layer is applied last.
        for group in [
            &[
                "log.retention.ms",
                "log.retention.minutes",
                "log.retention.hours",
            ][..],
            &["log.roll.ms", "log.roll.hours"][..],
        ] {
            if group.iter().any(|k| dynamic.contains_key(*k)) {
                if let Some(key) = group.iter().find(|k| config.properties.contains_key(**k)) {
                    let value = config.properties[*key].clone();
                    config.apply(key, &value, &mut advertised_set)?;
                }
            }
        }
        Ok(config)
    }

    /// Applies one key; returns false when sluice does not use the key.
    fn apply(
        &mut self,
        key: &str,
        value: &str,
        advertised_set: &mut bool,
    ) -> Result<bool, ConfigError> {
        match key {
            "node.id" => self.node_id = parse(key, value)?,
            "listeners" => self.listener = parse_listener(key, value)?,
            "advertised.listeners" => {
                self.advertised_listener = parse_listener(key, value)?;
                *advertised_set = true;
            }
            "log.dirs" | "log.dir" => {
                let first = value.split(',').next().unwrap_or("").trim();
                if first.is_empty() {
                    return Err(ConfigError(format!("{key}: empty path")));
                }
                if value.contains(',') {
                    tracing::warn!(
                        key,
                        "sluice uses one log directory; using the first: {first}"
                    );
                }
                self.log_dir = PathBuf::from(first);
            }
            "num.partitions" => self.num_partitions = parse_min(key, value, 1)?,
            "default.replication.factor" => {
                self.default_replication_factor = parse_min(key, value, 1)?
            }
            "auto.create.topics.enable" => self.auto_create_topics_enable = parse_bool(key, value)?,
            "log.segment.bytes" => self.log.segment_bytes = parse_min(key, value, 14)?,
            "log.roll.ms" => self.log.segment_ms = parse_min(key, value, 1)?,
            "log.roll.hours" => {
                let hours: i64 = parse_min(key, value, 1)?;
                self.log.segment_ms = hours.saturating_mul(3_600_000);
            }
            "log.index.interval.bytes" => self.log.index_interval_bytes = parse_min(key, value, 0)?,
            "log.index.size.max.bytes" => {
                self.log.max_index_size_bytes = parse_min(key, value, 12)?
            }
            "message.max.bytes" => self.message_max_bytes = parse_min(key, value, 0)?,
            "socket.request.max.bytes" => self.socket_request_max_bytes = parse_min(key, value, 1)?,
            "fetch.max.bytes" => self.fetch_max_bytes = parse_min(key, value, 0)?,
            "log.flush.interval.messages" => {
                self.log.flush_interval_messages = parse_min(key, value, 1)?
            }
            "log.flush.interval.ms" => self.log.flush_interval_ms = parse_min(key, value, 0)?,
            "log.flush.offset.checkpoint.interval.ms" => {
                self.log_flush_offset_checkpoint_interval_ms = parse_min(key, value, 1)?
            }
            "log.flush.scheduler.interval.ms" => {
                self.log_flush_scheduler_interval_ms = parse_min(key, value, 1)?
            }
            "log.message.timestamp.after.max.ms" => {
                self.log_message_timestamp_after_max_ms = parse_min(key, value, 0)?
            }
            "log.message.timestamp.before.max.ms" => {
                self.log_message_timestamp_before_max_ms = parse_min(key, value, 0)?
            }
            // Kafka's precedence: log.retention.ms over .minutes over .hours. The map is sorted, so
            // "hours" is applied before "minutes" before "ms", and the most precise one wins.
            "log.retention.hours" => self.log_retention_ms = retention(key, value, 3_600_000)?,
            "log.retention.minutes" => self.log_retention_ms = retention(key, value, 60_000)?,
            "log.retention.ms" => self.log_retention_ms = retention(key, value, 1)?,
            "log.retention.bytes" => self.log_retention_bytes = parse_min(key, value, -1)?,
            "log.retention.check.interval.ms" => {
                self.log_retention_check_interval_ms = parse_min(key, value, 1)?
            }
            "offsets.topic.segment.bytes" => {
                self.offsets_topic_segment_bytes = parse_min(key, value, 1)?
            }
            "log.cleaner.enable" => self.log_cleaner_enable = parse_bool(key, value)?,
            "log.cleaner.backoff.ms" => self.log_cleaner_backoff_ms = parse_min(key, value, 1)?,
            "log.cleaner.dedupe.buffer.size" => {
                self.log_cleaner_dedupe_buffer_bytes = parse_min(key, value, 1)?
            }
            // Topic defaults: topic settings read them from `properties`; checked here.
            "log.cleaner.min.cleanable.ratio"
            | "log.cleaner.delete.retention.ms"
            | "log.cleaner.min.compaction.lag.ms"
            | "log.cleaner.max.compaction.lag.ms" => {
                let topic_key = match key {
                    "log.cleaner.min.cleanable.ratio" => "min.cleanable.dirty.ratio",
                    other => other.trim_start_matches("log.cleaner."),
                };
                crate::storage::topic_config::validate(topic_key, value)
                    .map_err(|e| ConfigError(format!("{key}: {e}")))?;
            }
            "log.segment.delete.delay.ms" => {
                self.log_segment_delete_delay_ms = parse_min(key, value, 0)?
            }
            "log.cleanup.policy" => {
                crate::storage::topic_config::validate("cleanup.policy", value)
                    .map_err(|e| ConfigError(format!("{key}: {e}")))?;
                self.log_cleanup_policy = value.to_string();
            }
            "group.min.session.timeout.ms" => {
                self.group_min_session_timeout_ms = parse_min(key, value, 0)?
            }
            "group.max.session.timeout.ms" => {
                self.group_max_session_timeout_ms = parse_min(key, value, 0)?
            }
            "group.initial.rebalance.delay.ms" => {
                self.group_initial_rebalance_delay_ms = parse_min(key, value, 0)?
            }
            "group.max.size" => self.group_max_size = parse_min(key, value, 1)?,
            "offsets.retention.minutes" => {
                self.offsets_retention_minutes = parse_min(key, value, 1)?
            }
            "offset.metadata.max.bytes" => {
                self.offset_metadata_max_bytes = parse_min(key, value, 0)?
            }
            "producer.id.expiration.ms" => {
                self.producer_id_expiration_ms = parse_min(key, value, 1)?
            }
            "max.connections" => self.max_connections = parse_min(key, value, 1)?,
            "quota.window.num" => self.quota_window_num = parse_min(key, value, 1)?,
            "quota.window.size.seconds" => {
                self.quota_window_size_seconds = parse_min(key, value, 1)?
            }
            "sluice.quota.producer.default" => {
                self.quota_producer_default_bytes_per_second = Some(byte_rate(key, value)?)
            }
            "sluice.quota.consumer.default" => {
                self.quota_consumer_default_bytes_per_second = Some(byte_rate(key, value)?)
            }
            "sluice.quota.request.percentage.default" => {
                let percentage: f64 = parse(key, value)?;
                if !(percentage.is_finite() && percentage > 0.0) {
                    return Err(ConfigError(format!("{key}: must be a number above 0")));
                }
                self.quota_request_default_percentage = Some(percentage);
            }
            "queued.max.request.bytes" => self.queued_max_request_bytes = parse(key, value)?,
            "sluice.max.partitions.per.topic" => {
                self.max_partitions_per_topic = parse_min(key, value, 1)?
            }
            "sluice.max.in.flight.requests.per.connection" => {
                self.max_in_flight_requests_per_connection = parse_min(key, value, 1)?
            }
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// Java properties: `key=value` or `key: value`, `#` and `!` comments, blank lines skipped.
/// Line continuations and escapes are not supported; Kafka's own files do not use them.
pub fn parse_properties(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#') && !line.starts_with('!'))
        .filter_map(|line| {
            let split = line.find(['=', ':'])?;
            Some((
                line[..split].trim().to_string(),
                line[split + 1..].trim().to_string(),
            ))
        })
        .collect()
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

/// A retention time in `unit_ms` units; -1 (forever) stays -1.
fn retention(key: &str, value: &str, unit_ms: i64) -> Result<i64, ConfigError> {
    let amount: i64 = parse_min(key, value, -1)?;
    Ok(if amount < 0 {
        -1
    } else {
        amount.saturating_mul(unit_ms)
    })
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

/// `PLAINTEXT://host:port[,NAME://host:port...]`: sluice serves the first PLAINTEXT listener
/// (or the first listener when none is named PLAINTEXT).
fn parse_listener(key: &str, value: &str) -> Result<Endpoint, ConfigError> {
    let listeners: Vec<&str> = value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let chosen = listeners
        .iter()
        .find(|l| l.starts_with("PLAINTEXT://"))
        .or(listeners.first())
        .ok_or_else(|| ConfigError(format!("{key}: no listener in '{value}'")))?;
    let (_, address) = chosen
        .split_once("://")
        .ok_or_else(|| ConfigError(format!("{key}: expected NAME://host:port, got '{chosen}'")))?;
    let (host, port) = address
        .rsplit_once(':')
        .ok_or_else(|| ConfigError(format!("{key}: missing port in '{chosen}'")))?;
    let port: u16 = parse(key, port)?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    Ok(Endpoint {
        host: host.to_string(),
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_are_kafkas_with_embedded_listener() {
        let c = Config::from_pairs(&[]).unwrap();
        assert_eq!(
            c.listener,
            Endpoint {
                host: "127.0.0.1".into(),
                port: 9092
            }
        );
        assert_eq!(c.log.segment_bytes, 1_073_741_824);
        assert_eq!(c.message_max_bytes, 1_048_588);
        assert_eq!(c.log_dir, PathBuf::from("./data"));
    }

    #[test]
    fn reads_kafka_keys_and_advertises_listener() {
        let c = Config::from_pairs(&pairs(&[
            ("listeners", "PLAINTEXT://:19092,CONTROLLER://:19093"),
            ("log.roll.hours", "2"),
            ("log.dirs", "/tmp/a,/tmp/b"),
            ("process.roles", "broker,controller"),
        ]))
        .unwrap();
        assert_eq!(c.listener.port, 19092);
        assert_eq!(c.listener.host, "0.0.0.0");
        assert_eq!(c.advertised_listener.host, "127.0.0.1");
        assert_eq!(c.log.segment_ms, 7_200_000);
        assert_eq!(c.log_dir, PathBuf::from("/tmp/a"));
    }

    #[test]
    fn malformed_value_names_the_key() {
        let err = Config::from_pairs(&pairs(&[("log.segment.bytes", "lots")])).unwrap_err();
        assert!(err.0.contains("log.segment.bytes"), "{err}");
        let err = Config::from_pairs(&pairs(&[("auto.create.topics.enable", "yes")])).unwrap_err();
        assert!(err.0.contains("auto.create.topics.enable"), "{err}");
    }

    #[test]
    fn properties_parser_skips_comments() {
        let p = parse_properties("# c\n! c\n\na=1\nb : two\n");
        assert_eq!(
            p,
            vec![("a".into(), "1".into()), ("b".into(), "two".into())]
        );
    }
}
