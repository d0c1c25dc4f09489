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
pub mod topic;

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use topic::TopicValues;

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
    pub offsets_retention_minutes: i64,
    pub offset_metadata_max_bytes: usize,
    /// Idempotent producers idle this long are forgotten.
    pub producer_id_expiration_ms: i64,
    /// `transaction.max.timeout.ms`: the longest transaction timeout a producer may ask for.
    pub transaction_max_timeout_ms: i32,
    /// `transactional.id.expiration.ms`: a transactional id idle this long (no transaction
    /// open) is forgotten.
    pub transactional_id_expiration_ms: i64,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms`: how often transactions
    /// past their timeout are looked for and aborted.
    pub transaction_abort_timed_out_transaction_cleanup_interval_ms: i64,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms`: how often expired
    /// transactional ids are looked for.
    pub transaction_remove_expired_transaction_cleanup_interval_ms: i64,
    /// `transaction.state.log.num.partitions`: `__transaction_state`'s partitions, set when it
    /// is created.
    pub transaction_state_log_num_partitions: i32,
    /// `transaction.state.log.segment.bytes`: `__transaction_state`'s segment size.
    pub transaction_state_log_segment_bytes: u64,
    /// `transaction.state.log.load.buffer.size`: bytes read per step when
    /// `__transaction_state` is loaded.
    pub transaction_state_log_load_buffer_bytes: usize,
    /// `transaction.partition.verification.enable`: a transactional batch that would open a
    /// transaction is first checked with the coordinator (KIP-890; always for transaction
    /// version 2 clients).
    pub transaction_partition_verification_enable: bool,
    /// `add.partitions.to.txn.retry.backoff.ms` and `.max.ms`: how a produce whose
    /// verification found the transaction completing retries it, and for how long at most.
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
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError(format!("cannot read {}: {e}", path.display())))?;
        Ok(parse_properties(&text))
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
                None => tracing::warn!(key, "ignoring unknown setting"),
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
        if !map.contains_key("advertised.listeners") {
            config.advertised_listener = config.listener.clone();
            if config.advertised_listener.host == "0.0.0.0" {
                config.advertised_listener.host = "127.0.0.1".into();
            }
        }
        Ok(config)
    }

    /// Every field empty, before the table's defaults are applied.
    fn unset() -> Config {
        let nowhere = Endpoint {
            host: String::new(),
            port: 0,
        };
        Config {
            node_id: 0,
            listener: nowhere.clone(),
            advertised_listener: nowhere,
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
        assert_eq!(c.topic_values().i64("segment.bytes"), 1_073_741_824);
        assert_eq!(c.topic_values().i64("max.message.bytes"), 1_048_588);
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
        assert_eq!(c.topic_values().i64("segment.ms"), 7_200_000);
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
