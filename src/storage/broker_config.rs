//! Dynamic broker configs (KIP-226): values set at runtime with `kafka-configs --entity-type
//! brokers`, either for this broker (`--entity-name <node id>`) or as the cluster-wide default
//! (`--entity-default`, resource name ""). Precedence: this broker's value, then the cluster
//! default, then `server.properties`, then Kafka's default.
//!
//! Which keys may change and how their values are checked is the broker table's
//! (`config::broker::check`); applying them (new topic settings, the effective `Config`) is
//! `LogManager`'s. Kafka keeps these in its metadata log;
//! sluice keeps them in one small file of the log directory, `sluice-broker-configs`, replaced
//! atomically, with lines `<entity> <key>=<value>` where the entity is `default` or a node id.

use std::collections::BTreeMap;
use std::path::Path;

pub use crate::config::broker::{check, BrokerConfigError};
use crate::disk::Disk;

use crate::disk::names::BROKER_CONFIGS_FILE;
const DEFAULT_ENTITY: &str = "default";

/// Every entity's dynamic configs: the cluster default under "" and brokers under their id.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DynamicBrokerConfigs {
    entities: BTreeMap<String, BTreeMap<String, String>>,
}

impl DynamicBrokerConfigs {
    /// The configs of one entity: "" for the cluster default, else a node id.
    pub fn entity(&self, name: &str) -> BTreeMap<String, String> {
        self.entities.get(name).cloned().unwrap_or_default()
    }

    pub fn set_entity(&mut self, name: &str, configs: BTreeMap<String, String>) {
        if configs.is_empty() {
            self.entities.remove(name);
        } else {
            self.entities.insert(name.to_string(), configs);
        }
    }

    /// The cluster default with `node_id`'s own values on top: what the broker applies.
    pub fn merged(&self, node_id: i32) -> BTreeMap<String, String> {
        let mut merged = self.entity("");
        merged.extend(self.entity(&node_id.to_string()));
        merged
    }

    pub fn read(disk: &Disk, dir: &Path) -> std::io::Result<DynamicBrokerConfigs> {
        let Some(text) = disk.read_to_string_if_exists(&dir.join(BROKER_CONFIGS_FILE))? else {
            return Ok(Self::default());
        };
        let mut configs = DynamicBrokerConfigs::default();
        for line in text.lines() {
            let Some((entity, pair)) = line.split_once(' ') else {
                continue;
            };
            let Some((key, value)) = pair.split_once('=') else {
                continue;
            };
            let entity = if entity == DEFAULT_ENTITY { "" } else { entity };
            configs
                .entities
                .entry(entity.to_string())
                .or_default()
                .insert(key.to_string(), value.to_string());
        }
        Ok(configs)
    }

    /// Replaces the file atomically (temp file, fsync, rename, fsync dir).
    pub fn write(&self, disk: &Disk, dir: &Path) -> std::io::Result<()> {
        let mut text = String::new();
        for (entity, configs) in &self.entities {
            let entity = if entity.is_empty() {
                DEFAULT_ENTITY
            } else {
                entity
            };
            for (key, value) in configs {
                text.push_str(&format!("{entity} {key}={value}\n"));
            }
        }
        disk.write_file_durably(&dir.join(BROKER_CONFIGS_FILE), text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn broker_values_override_the_default_and_survive_a_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut configs = DynamicBrokerConfigs::default();
        configs.set_entity(
            "",
            map(&[("log.retention.ms", "1"), ("log.segment.bytes", "2")]),
        );
        configs.set_entity("1", map(&[("log.retention.ms", "3")]));
        assert_eq!(
            configs.merged(1),
            map(&[("log.retention.ms", "3"), ("log.segment.bytes", "2")])
        );
        assert_eq!(configs.merged(2).get("log.retention.ms").unwrap(), "1");
        configs.write(&Disk::real(), dir.path()).unwrap();
        assert_eq!(
            DynamicBrokerConfigs::read(&Disk::real(), dir.path()).unwrap(),
            configs
        );
    }
}
