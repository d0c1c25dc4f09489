//! A topic: its name, stable topic id, partitions (`partition.rs`), the configs set on it and
//! the settings derived from them, and the `sluice-topic-configs` file that keeps those configs.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, RwLock};

use uuid::Uuid;

use super::errors::TopicError;
use super::partition::Partition;
use super::topic_settings::TopicSettings;
use crate::disk::Disk;

/// Where sluice keeps topic configs set at creation; Kafka keeps them in its metadata log.
use crate::disk::names::TOPIC_CONFIGS_FILE;

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
}
