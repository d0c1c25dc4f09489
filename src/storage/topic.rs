//! A topic (name, stable topic id, partitions, configs set at creation) and a partition (one
//! `PartitionLog` behind a mutex). The mutex serialises appends to a partition, which is what
//! keeps offsets dense and batches in arrival order; reads take it only to copy a byte range.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use uuid::Uuid;

use crate::config::Config;
use crate::log::batch::BatchHeader;
use crate::log::{LogConfig, LogError, PartitionLog};
use crate::producer::{snapshot, ProducerStateManager};

use super::layout::write_file_durably;

/// Where sluice keeps topic configs set at creation; Kafka keeps them in its metadata log.
const TOPIC_CONFIGS_FILE: &str = "sluice-topic-configs";

/// Topic configs Kafka knows. A name outside this list is INVALID_CONFIG.
const KNOWN_TOPIC_CONFIGS: &[&str] = &[
    "cleanup.policy",
    "compression.type",
    "compression.gzip.level",
    "compression.lz4.level",
    "compression.zstd.level",
    "delete.retention.ms",
    "file.delete.delay.ms",
    "flush.messages",
    "flush.ms",
    "follower.replication.throttled.replicas",
    "index.interval.bytes",
    "leader.replication.throttled.replicas",
    "local.retention.bytes",
    "local.retention.ms",
    "max.compaction.lag.ms",
    "max.message.bytes",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.type",
    "min.cleanable.dirty.ratio",
    "min.compaction.lag.ms",
    "min.insync.replicas",
    "preallocate",
    "remote.storage.enable",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.index.bytes",
    "segment.jitter.ms",
    "segment.ms",
    "unclean.leader.election.enable",
];

#[derive(Debug)]
pub enum TopicError {
    AlreadyExists,
    UnknownTopic,
    InvalidName(String),
    InvalidConfig(String),
    Storage(String),
}

impl fmt::Display for TopicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TopicError::AlreadyExists => f.write_str("topic already exists"),
            TopicError::UnknownTopic => f.write_str("unknown topic"),
            TopicError::InvalidName(m) | TopicError::InvalidConfig(m) | TopicError::Storage(m) => {
                f.write_str(m)
            }
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

/// The configs set on a topic, validated; unset keys fall back to the broker's settings.
#[derive(Clone, Debug, Default)]
pub struct TopicConfigs(BTreeMap<String, String>);

impl TopicConfigs {
    pub fn from_map(map: BTreeMap<String, String>) -> TopicConfigs {
        TopicConfigs(map)
    }

    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.0.clone()
    }

    /// Validates names and the values sluice interprets.
    pub fn validated(map: BTreeMap<String, String>) -> Result<TopicConfigs, TopicError> {
        for (key, value) in &map {
            if !KNOWN_TOPIC_CONFIGS.contains(&key.as_str()) {
                return Err(TopicError::InvalidConfig(format!(
                    "unknown topic config '{key}'"
                )));
            }
            let numeric =
                key.ends_with(".bytes") || key.ends_with(".ms") || key == "flush.messages";
            if numeric && value.parse::<i64>().is_err() {
                return Err(TopicError::InvalidConfig(format!(
                    "invalid value '{value}' for {key}"
                )));
            }
        }
        if let Some(kind) = map.get("compression.type") {
            if kind != "producer" {
                return Err(TopicError::InvalidConfig(format!(
                    "compression.type={kind} is not supported: sluice stores batches as the producer sent them (use 'producer')"
                )));
            }
        }
        if let Some(kind) = map.get("message.timestamp.type") {
            if kind != "CreateTime" {
                return Err(TopicError::InvalidConfig(format!(
                    "message.timestamp.type={kind} is not supported yet"
                )));
            }
        }
        Ok(TopicConfigs(map))
    }

    fn get_i64(&self, key: &str) -> Option<i64> {
        self.0.get(key).and_then(|v| v.parse().ok())
    }

    /// The log settings of this topic: its own where set, the broker's otherwise.
    pub fn log_config(&self, broker: &Config) -> LogConfig {
        let mut log = broker.log.clone();
        let positive = |v: i64| (v > 0).then_some(v);
        if let Some(v) = self.get_i64("segment.bytes").and_then(positive) {
            log.segment_bytes = v as u64;
        }
        if let Some(v) = self.get_i64("segment.ms").and_then(positive) {
            log.segment_ms = v;
        }
        if let Some(v) = self.get_i64("segment.index.bytes").and_then(positive) {
            log.max_index_size_bytes = v as u64;
        }
        if let Some(v) = self.get_i64("index.interval.bytes").filter(|v| *v >= 0) {
            log.index_interval_bytes = v as u64;
        }
        if let Some(v) = self.get_i64("flush.messages").and_then(positive) {
            log.flush_interval_messages = v as u64;
        }
        if let Some(v) = self.get_i64("flush.ms").filter(|v| *v >= 0) {
            log.flush_interval_ms = v;
        }
        log
    }

    pub fn max_message_bytes(&self, broker: &Config) -> i32 {
        self.get_i64("max.message.bytes")
            .and_then(|v| i32::try_from(v).ok())
            .unwrap_or(broker.message_max_bytes)
    }
}

pub struct Topic {
    pub name: String,
    pub id: Uuid,
    pub partitions: Vec<std::sync::Arc<Partition>>,
    pub configs: TopicConfigs,
}

impl Topic {
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
}

impl Partition {
    /// Wraps an opened log, rebuilding producer state from the newest snapshot at or below the
    /// log end offset and the batch headers after it (digest §3, step 8).
    pub fn new(
        topic: String,
        index: i32,
        dir: PathBuf,
        log: PartitionLog,
    ) -> Result<Partition, LogError> {
        let producers = rebuild_producer_state(&dir, &log)?;
        Ok(Partition {
            topic,
            index,
            dir,
            state: Mutex::new(Some(PartitionState { log, producers })),
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

    /// Stops serving: the log is dropped (files closed, indexes unmapped) before deletion.
    pub fn retire(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).take();
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
        let ok = BTreeMap::from([("segment.bytes".to_string(), "2000000".to_string())]);
        let configs = TopicConfigs::validated(ok).unwrap();
        assert_eq!(
            configs.log_config(&Config::default()).segment_bytes,
            2_000_000
        );
    }
}
