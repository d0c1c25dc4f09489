//! A topic (name, stable topic id, partitions, configs set at creation) and a partition (one
//! `PartitionLog` behind a mutex). The mutex serialises appends to a partition, which is what
//! keeps offsets dense and batches in arrival order; reads take it only to copy a byte range.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::Notify;
use uuid::Uuid;

use crate::config::Config;
use crate::log::batch::BatchHeader;
use crate::log::{CleanerConfig, LogConfig, LogError, PartitionLog, RetentionConfig};
use crate::producer::{snapshot, ProducerStateManager};

use super::layout::write_file_durably;
use super::topic_config;

/// The leader epoch of every partition: a single node leads each partition from its creation
/// and never hands it over, so it stays Kafka's first epoch. Stamped into every stored batch and
/// recorded in each partition's `leader-epoch-checkpoint`.
pub const LEADER_EPOCH: i32 = 0;

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

/// Why a partition's log could not be used.
#[derive(Debug)]
pub enum PartitionError {
    /// The topic was deleted while the request was in flight.
    Deleted,
    Log(LogError),
}

impl fmt::Display for PartitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PartitionError::Deleted => f.write_str("partition deleted"),
            PartitionError::Log(e) => write!(f, "{e}"),
        }
    }
}

/// A partition's log and the producer state that must change atomically with it.
pub struct PartitionState {
    pub log: PartitionLog,
    pub producers: ProducerStateManager,
}

pub struct Partition {
    pub topic: String,
    pub index: i32,
    pub dir: PathBuf,
    /// None once the topic is deleted; every later use answers UNKNOWN_TOPIC_OR_PARTITION.
    state: Mutex<Option<PartitionState>>,
    /// Woken after appends to this partition (and when it is retired), so that fetches parked
    /// on it, and only those, re-read it.
    appended: Arc<Notify>,
}

impl Partition {
    /// Wraps an opened log, which becomes leader in `LEADER_EPOCH` as a Kafka partition does
    /// when it is created or loaded, rebuilding producer state from the newest snapshot at or
    /// below the log end offset and the batch headers after it.
    pub fn new(
        topic: String,
        index: i32,
        dir: PathBuf,
        mut log: PartitionLog,
    ) -> Result<Partition, LogError> {
        log.become_leader(LEADER_EPOCH)?;
        let producers = rebuild_producer_state(&dir, &log)?;
        Ok(Partition {
            topic,
            index,
            dir,
            state: Mutex::new(Some(PartitionState { log, producers })),
            appended: Arc::new(Notify::new()),
        })
    }

    /// Runs `f` on the log under the partition's lock.
    pub fn with_log<T>(
        &self,
        f: impl FnOnce(&mut PartitionLog) -> Result<T, LogError>,
    ) -> Result<T, PartitionError> {
        self.with_state(|state| f(&mut state.log))
    }

    /// Runs `f` on the log and producer state under the partition's lock.
    pub fn with_state<T>(
        &self,
        f: impl FnOnce(&mut PartitionState) -> Result<T, LogError>,
    ) -> Result<T, PartitionError> {
        let mut guard = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let state = guard.as_mut().ok_or(PartitionError::Deleted)?;
        f(state).map_err(PartitionError::Log)
    }

    /// Stops serving: the log is dropped (files closed, indexes unmapped) before deletion, and
    /// fetches parked on the partition wake up to answer that it is gone.
    pub fn retire(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).take();
        self.notify_appended();
    }

    /// What a fetch parks on: register (`enable`) before reading the partition, so an append
    /// between the read and the wait is not missed.
    pub fn appended(&self) -> &Arc<Notify> {
        &self.appended
    }

    /// Wakes the fetches parked on this partition; call after appending, outside the lock.
    pub fn notify_appended(&self) {
        self.appended.notify_waiters();
    }

    /// Writes `<log end offset>.snapshot` and keeps the two newest snapshots.
    pub fn snapshot_producers(&self) -> Result<(), PartitionError> {
        self.with_state(|state| {
            let entries: Vec<_> = state.producers.entries().collect();
            snapshot::write(&self.dir, state.log.log_end_offset(), &entries)?;
            snapshot::prune(&self.dir, 2);
            Ok(())
        })
    }
}

/// Bytes read per step while replaying batch headers into producer state.
const REPLAY_READ_BYTES: usize = 1 << 20;

fn rebuild_producer_state(
    dir: &Path,
    log: &PartitionLog,
) -> Result<ProducerStateManager, LogError> {
    let log_end_offset = log.log_end_offset();
    let (snapshot_offset, entries) = snapshot::load_latest(dir, log_end_offset);
    let mut producers = ProducerStateManager::from_entries(entries);
    let mut offset = snapshot_offset.max(log.log_start_offset());
    while offset < log_end_offset {
        let records = log
            .read(offset, REPLAY_READ_BYTES, true, log_end_offset)?
            .records;
        let mut position = 0;
        let mut advanced = false;
        while let Ok(header) = BatchHeader::parse(&records[position..]) {
            let size = header.total_size();
            if size == 0 || position + size > records.len() {
                break;
            }
            if header.last_offset() >= offset {
                producers.update(&header, header.base_offset);
                offset = header.last_offset() + 1;
                advanced = true;
            }
            position += size;
        }
        if !advanced {
            break;
        }
    }
    Ok(producers)
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.index)
    }
}

/// Lines of `<topic> <key>=<value>`.
pub fn read_topic_configs(
    dir: &Path,
) -> std::io::Result<BTreeMap<String, BTreeMap<String, String>>> {
    let text = match std::fs::read_to_string(dir.join(TOPIC_CONFIGS_FILE)) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(e),
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
    dir: &Path,
    all: &BTreeMap<String, BTreeMap<String, String>>,
) -> std::io::Result<()> {
    let mut text = String::new();
    for (topic, configs) in all {
        for (key, value) in configs {
            text.push_str(&format!("{topic} {key}={value}\n"));
        }
    }
    write_file_durably(&dir.join(TOPIC_CONFIGS_FILE), text.as_bytes())
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
