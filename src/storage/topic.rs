//! A topic: its name, stable topic id, partitions (`partition.rs`), the configs set on it and
//! the settings derived from them, and the `sluice-topic-configs` file that keeps those configs.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, RwLock};

use uuid::Uuid;

use crate::config::Config;
use crate::log::{CleanerConfig, LogConfig, RetentionConfig};

use super::partition::Partition;

use super::topic_config;
use crate::disk::Disk;

/// Where sluice keeps topic configs set at creation; Kafka keeps them in its metadata log.
const TOPIC_CONFIGS_FILE: &str = "sluice-topic-configs";

#[derive(Debug)]
pub enum TopicError {
    AlreadyExists,
    UnknownTopic,
    InvalidName(String),
    InvalidConfig(String),
    InvalidPartitions(String),
    Storage(String),
}

impl fmt::Display for TopicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopicError::AlreadyExists => f.write_str("topic already exists"),
            TopicError::UnknownTopic => f.write_str("unknown topic"),
            TopicError::InvalidName(m)
            | TopicError::InvalidConfig(m)
            | TopicError::InvalidPartitions(m)
            | TopicError::Storage(m) => f.write_str(m),
        }
    }
}

/// Kafka's rule: 1..=249 characters of `[a-zA-Z0-9._-]`, and not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), TopicError> {
    if name.is_empty() || name.len() > 249 || name == "." || name == ".." {
        return Err(TopicError::InvalidName(format!(
            "illegal topic name '{name}'"
        )));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return Err(TopicError::InvalidName(format!(
            "topic name '{name}' contains characters other than ASCII alphanumerics, '.', '_' and '-'"
        )));
    }
    Ok(())
}

/// The configs set on a topic (its overrides), validated against Kafka's table; unset keys fall
/// back to the broker's settings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TopicConfigs(BTreeMap<String, String>);

impl TopicConfigs {
    pub fn from_map(map: BTreeMap<String, String>) -> TopicConfigs {
        TopicConfigs(map)
    }

    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.0.clone()
    }

    /// Validates every name and value (Kafka's INVALID_CONFIG cases).
    pub fn validated(map: BTreeMap<String, String>) -> Result<TopicConfigs, TopicError> {
        for (key, value) in &map {
            topic_config::validate(key, value).map_err(TopicError::InvalidConfig)?;
        }
        Ok(TopicConfigs(map))
    }

    /// `compression.<codec>.level` for the codec `compression.type` names, when set.
    fn compression_level(&self, broker: &Config) -> Option<i32> {
        let codec = self.get_or_broker("compression.type", "compression.type", broker)?;
        let key = format!("compression.{codec}.level");
        self.get_or_broker(&key, &key, broker)?.parse().ok()
    }

    /// The topic's override of `key`, else the broker's `broker_key` from any layer.
    fn get_or_broker<'a>(
        &'a self,
        key: &str,
        broker_key: &str,
        broker: &'a Config,
    ) -> Option<&'a str> {
        self.0
            .get(key)
            .or_else(|| broker.properties.get(broker_key))
            .map(|v| v.trim())
    }

    fn get_i64(&self, key: &str) -> Option<i64> {
        self.0.get(key).and_then(|v| v.trim().parse().ok())
    }

    /// The settings the data path uses, derived once per change rather than per request.
    pub fn settings(&self, broker: &Config) -> TopicSettings {
        let mut log = broker.log.clone();
        if let Some(v) = self.get_i64("segment.bytes") {
            log.segment_bytes = v as u64;
        }
        if let Some(v) = self.get_i64("segment.ms") {
            log.segment_ms = v;
        }
        if let Some(v) = self.get_i64("segment.index.bytes") {
            log.max_index_size_bytes = v as u64;
        }
        if let Some(v) = self.get_i64("index.interval.bytes") {
            log.index_interval_bytes = v as u64;
        }
        if let Some(v) = self.get_i64("flush.messages") {
            log.flush_interval_messages = v as u64;
        }
        if let Some(v) = self.get_i64("flush.ms") {
            log.flush_interval_ms = v;
        }
        TopicSettings {
            log,
            max_message_bytes: self
                .get_i64("max.message.bytes")
                .and_then(|v| i32::try_from(v).ok())
                .unwrap_or(broker.message_max_bytes),
            timestamp_before_max_ms: self
                .get_i64("message.timestamp.before.max.ms")
                .unwrap_or(broker.log_message_timestamp_before_max_ms),
            timestamp_after_max_ms: self
                .get_i64("message.timestamp.after.max.ms")
                .unwrap_or(broker.log_message_timestamp_after_max_ms),
            log_append_time: self.get_or_broker(
                "message.timestamp.type",
                "log.message.timestamp.type",
                broker,
            ) == Some("LogAppendTime"),
            compacted: self
                .get_or_broker("cleanup.policy", "log.cleanup.policy", broker)
                .unwrap_or(&broker.log_cleanup_policy)
                .split(',')
                .any(|p| p.trim() == "compact"),
            compression_level: self.compression_level(broker),
            compression_codec: match self.get_or_broker(
                "compression.type",
                "compression.type",
                broker,
            ) {
                Some("uncompressed") => Some(0),
                Some("gzip") => Some(1),
                Some("snappy") => Some(2),
                Some("lz4") => Some(3),
                Some("zstd") => Some(4),
                _ => None,
            },
            min_insync_replicas: self.get_i64("min.insync.replicas").unwrap_or_else(|| {
                broker
                    .properties
                    .get("min.insync.replicas")
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(1)
            }),
            retention: self.retention(broker),
            cleaner: self.cleaner(broker),
            overrides: self.clone(),
        }
    }

    /// The cleaner settings of a topic whose cleanup policy includes `compact`; None otherwise.
    fn cleaner(&self, broker: &Config) -> Option<CleanerConfig> {
        let compacted = self
            .get_or_broker("cleanup.policy", "log.cleanup.policy", broker)
            .unwrap_or(&broker.log_cleanup_policy)
            .split(',')
            .any(|p| p.trim() == "compact");
        if !compacted {
            return None;
        }
        let defaults = CleanerConfig::default();
        let number = |key: &str, broker_key: &str| {
            self.get_or_broker(key, broker_key, broker)
                .and_then(|v| v.parse::<i64>().ok())
        };
        Some(CleanerConfig {
            min_cleanable_dirty_ratio: self
                .get_or_broker(
                    "min.cleanable.dirty.ratio",
                    "log.cleaner.min.cleanable.ratio",
                    broker,
                )
                .and_then(|v| v.parse().ok())
                .unwrap_or(defaults.min_cleanable_dirty_ratio),
            min_compaction_lag_ms: number(
                "min.compaction.lag.ms",
                "log.cleaner.min.compaction.lag.ms",
            )
            .unwrap_or(defaults.min_compaction_lag_ms),
            max_compaction_lag_ms: number(
                "max.compaction.lag.ms",
                "log.cleaner.max.compaction.lag.ms",
            )
            .unwrap_or(defaults.max_compaction_lag_ms),
            delete_retention_ms: number("delete.retention.ms", "log.cleaner.delete.retention.ms")
                .unwrap_or(defaults.delete_retention_ms),
            dedupe_buffer_bytes: broker.log_cleaner_dedupe_buffer_bytes,
        })
    }

    /// Time and size retention apply only where the cleanup policy includes `delete`; a
    /// compact-only topic keeps what the cleaner leaves.
    fn retention(&self, broker: &Config) -> RetentionConfig {
        let policy = self
            .0
            .get("cleanup.policy")
            .unwrap_or(&broker.log_cleanup_policy);
        let delete = policy.split(',').any(|p| p.trim() == "delete");
        let pick = |key: &str, broker_value: i64| {
            if delete {
                self.get_i64(key).unwrap_or(broker_value)
            } else {
                -1
            }
        };
        RetentionConfig {
            retention_ms: pick("retention.ms", broker.log_retention_ms),
            retention_bytes: pick("retention.bytes", broker.log_retention_bytes),
            file_delete_delay_ms: self
                .get_i64("file.delete.delay.ms")
                .unwrap_or(broker.log_segment_delete_delay_ms),
        }
    }
}

/// A topic's effective settings, replaced as a whole when its configs change.
#[derive(Clone, Debug)]
pub struct TopicSettings {
    pub log: LogConfig,
    pub max_message_bytes: i32,
    pub timestamp_before_max_ms: i64,
    pub timestamp_after_max_ms: i64,
    pub log_append_time: bool,
    /// `cleanup.policy` includes `compact`, so produced records must have keys.
    pub compacted: bool,
    /// `compression.type` as the codec bits of a batch's attributes (0 none, 1 gzip, 2 snappy,
    /// 3 lz4, 4 zstd); None for `producer`, which keeps each batch as it was sent.
    pub compression_codec: Option<u8>,
    /// `compression.<codec>.level` for the topic's codec, when set on the topic or the broker.
    pub compression_level: Option<i32>,
    /// acks=all needs this many in-sync replicas; a single broker has one.
    pub min_insync_replicas: i64,
    pub retention: RetentionConfig,
    /// Set when `cleanup.policy` includes `compact`.
    pub cleaner: Option<CleanerConfig>,
    pub overrides: TopicConfigs,
}

pub struct Topic {
    pub name: String,
    pub id: Uuid,
    pub partitions: Vec<std::sync::Arc<Partition>>,
    /// Swapped whole on a config change; readers clone the Arc and never hold the lock.
    settings: RwLock<Arc<TopicSettings>>,
}

impl Topic {
    pub fn new(
        name: String,
        id: Uuid,
        partitions: Vec<Arc<Partition>>,
        settings: TopicSettings,
    ) -> Topic {
        Topic {
            name,
            id,
            partitions,
            settings: RwLock::new(Arc::new(settings)),
        }
    }

    pub fn settings(&self) -> Arc<TopicSettings> {
        self.settings
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn set_settings(&self, settings: TopicSettings) {
        *self.settings.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(settings);
    }

    pub fn partition(&self, index: i32) -> Option<&std::sync::Arc<Partition>> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.partitions.get(i))
    }
}

/// Lines of `<topic> <key>=<value>`.
pub fn read_topic_configs(
    disk: &Disk,
    dir: &Path,
) -> std::io::Result<BTreeMap<String, BTreeMap<String, String>>> {
    let Some(text) = disk.read_to_string_if_exists(&dir.join(TOPIC_CONFIGS_FILE))? else {
        return Ok(BTreeMap::new());
    };
    let mut all: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for line in text.lines() {
        let Some((topic, pair)) = line.split_once(' ') else {
            continue;
        };
        let Some((key, value)) = pair.split_once('=') else {
            continue;
        };
        all.entry(topic.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
    }
    Ok(all)
}

pub fn write_topic_configs(
    disk: &Disk,
    dir: &Path,
    all: &BTreeMap<String, BTreeMap<String, String>>,
) -> std::io::Result<()> {
    let mut text = String::new();
    for (topic, configs) in all {
        for (key, value) in configs {
            text.push_str(&format!("{topic} {key}={value}\n"));
        }
    }
    disk.write_file_durably(&dir.join(TOPIC_CONFIGS_FILE), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_follow_kafka() {
        assert!(validate_topic_name("orders.v1_x-y").is_ok());
        assert!(validate_topic_name("").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name("a b").is_err());
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
    }

    #[test]
    fn configs_are_validated_and_applied() {
        let bad = BTreeMap::from([("no.such".to_string(), "1".to_string())]);
        assert!(matches!(
            TopicConfigs::validated(bad),
            Err(TopicError::InvalidConfig(_))
        ));
        let ok = BTreeMap::from([
            ("segment.bytes".to_string(), "2000000".to_string()),
            (
                "message.timestamp.type".to_string(),
                "LogAppendTime".to_string(),
            ),
        ]);
        let settings = TopicConfigs::validated(ok)
            .unwrap()
            .settings(&Config::default());
        assert_eq!(settings.log.segment_bytes, 2_000_000);
        assert!(settings.log_append_time);
    }
}
