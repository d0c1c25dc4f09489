//! A topic (name, stable topic id, partitions, configs set at creation) and a partition (one
//! `PartitionLog` behind a mutex). The mutex serialises appends to a partition, which is what
//! keeps offsets dense and batches in arrival order; reads take it only to copy a byte range.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use tokio::sync::Notify;
use uuid::Uuid;

use crate::log::batch::BatchHeader;
use crate::log::{LogError, PartitionLog};
use crate::producer::{snapshot, ProducerStateManager};

use super::layout::write_file_durably;
use super::topic_settings::TopicSettings;

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
}
