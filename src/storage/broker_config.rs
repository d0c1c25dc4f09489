//! Dynamic broker configs (KIP-226): values set at runtime with `kafka-configs --entity-type
//! brokers`, either for this broker (`--entity-name <node id>`) or as the cluster-wide default
//! (`--entity-default`, resource name ""). Precedence: this broker's value, then the cluster
//! default, then `server.properties`, then Kafka's default.
//!
//! Which keys may change and how their values are checked lives here; applying them (new topic
//! settings, the effective `Config`) is `LogManager`'s. Kafka keeps these in its metadata log;
//! sluice keeps them in one small file of the log directory, `sluice-broker-configs`, replaced
//! atomically, with lines `<entity> <key>=<value>` where the entity is `default` or a node id.

use std::collections::BTreeMap;
use std::path::Path;

use super::topic_config;
use crate::disk::Disk;

const BROKER_CONFIGS_FILE: &str = "sluice-broker-configs";
const DEFAULT_ENTITY: &str = "default";

/// Kafka broker configs that are dynamic in Kafka but that sluice does not apply at runtime;
/// changing them is refused rather than stored and ignored.
const DYNAMIC_IN_KAFKA_ONLY: &[&str] = &[
    "background.threads",
    "log.cleaner.backoff.ms",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.threads",
    "max.connection.creation.rate",
    "max.connections",
    "max.connections.per.ip",
    "max.connections.per.ip.overrides",
    "num.io.threads",
    "num.network.threads",
    "num.recovery.threads.per.data.dir",
    "num.replica.fetchers",
    "producer.id.expiration.ms",
];

/// Broker configs Kafka knows but only reads at start-up: `kafka-configs` gets
/// "Cannot update these configs dynamically".
const STATIC_ONLY: &[&str] = &[
    "advertised.listeners",
    "auto.create.topics.enable",
    "broker.id",
    "controller.listener.names",
    "controller.quorum.bootstrap.servers",
    "controller.quorum.voters",
    "default.replication.factor",
    "fetch.max.bytes",
    "group.initial.rebalance.delay.ms",
    "group.max.session.timeout.ms",
    "group.max.size",
    "group.min.session.timeout.ms",
    "inter.broker.listener.name",
    "listener.security.protocol.map",
    "listeners",
    "log.dir",
    "log.dirs",
    "log.flush.offset.checkpoint.interval.ms",
    "log.flush.scheduler.interval.ms",
    "log.retention.check.interval.ms",
    "node.id",
    "num.partitions",
    "offset.metadata.max.bytes",
    "offsets.retention.minutes",
    "offsets.topic.num.partitions",
    "offsets.topic.replication.factor",
    "process.roles",
    "queued.max.request.bytes",
    "quota.window.num",
    "quota.window.size.seconds",
    "socket.receive.buffer.bytes",
    "socket.request.max.bytes",
    "socket.send.buffer.bytes",
    "transaction.state.log.min.isr",
    "transaction.state.log.replication.factor",
];

/// Why a broker config change was refused; both are INVALID_REQUEST in Kafka.
#[derive(Debug, PartialEq)]
pub enum BrokerConfigError {
    NotDynamic(Vec<String>),
    /// Dynamic in Kafka (or sluice's own keys), but sluice reads them only at start-up.
    NotDynamicInSluice(Vec<String>),
    InvalidValue(String),
}

impl std::fmt::Display for BrokerConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // Kafka prints a Scala Set.
            BrokerConfigError::NotDynamic(names) => write!(
                f,
                "Cannot update these configs dynamically: Set({})",
                names.join(", ")
            ),
            BrokerConfigError::NotDynamicInSluice(names) => write!(
                f,
                "sluice cannot update these configs dynamically: {}; set them in server.properties",
                names.join(", ")
            ),
            BrokerConfigError::InvalidValue(m) => f.write_str(m),
        }
    }
}

/// Checks a whole new set of dynamic configs for one entity, as Kafka does: every key must be
/// dynamically updatable and every value valid. Keys Kafka does not know are accepted and
/// stored, as Kafka stores them.
pub fn check(configs: &BTreeMap<String, String>) -> Result<(), BrokerConfigError> {
    let names = |keep: &dyn Fn(&str) -> bool| -> Vec<String> {
        configs
            .keys()
            .filter(|k| topic_config::broker_synonym(k).is_none() && keep(k))
            .cloned()
            .collect()
    };
    let not_dynamic = names(&|k| STATIC_ONLY.contains(&k));
    if !not_dynamic.is_empty() {
        return Err(BrokerConfigError::NotDynamic(not_dynamic));
    }
    let not_in_sluice = names(&|k| DYNAMIC_IN_KAFKA_ONLY.contains(&k) || k.starts_with("sluice."));
    if !not_in_sluice.is_empty() {
        return Err(BrokerConfigError::NotDynamicInSluice(not_in_sluice));
    }
    for (key, value) in configs {
        if let Some((def, factor)) = topic_config::broker_synonym(key) {
            topic_config::validate_as(def, key, value, factor)
                .map_err(BrokerConfigError::InvalidValue)?;
        }
    }
    Ok(())
}

/// Whether Kafka can change `key` on a running broker (DescribeConfigs reports the others of a
/// broker resource as read-only, as Kafka does).
pub fn is_dynamic(key: &str) -> bool {
    topic_config::broker_synonym(key).is_some() || DYNAMIC_IN_KAFKA_ONLY.contains(&key)
}

/// Whether DescribeConfigs reports `key` as known (unknown stored keys are reported as
/// sensitive, with no value, as Kafka does).
pub fn is_known(key: &str) -> bool {
    topic_config::broker_synonym(key).is_some()
        || STATIC_ONLY.contains(&key)
        || DYNAMIC_IN_KAFKA_ONLY.contains(&key)
}

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
    fn only_dynamic_keys_with_valid_values_pass() {
        assert_eq!(check(&map(&[("log.retention.ms", "1000")])), Ok(()));
        assert_eq!(check(&map(&[("log.retention.hours", "2")])), Ok(()));
        assert_eq!(check(&map(&[("compression.type", "zstd")])), Ok(()));
        assert_eq!(check(&map(&[("no.such.key", "x")])), Ok(()));
        assert_eq!(
            check(&map(&[("num.partitions", "3")]))
                .unwrap_err()
                .to_string(),
            "Cannot update these configs dynamically: Set(num.partitions)"
        );
        assert_eq!(
            check(&map(&[("log.retention.ms", "abc")]))
                .unwrap_err()
                .to_string(),
            "Invalid value abc for configuration log.retention.ms: Not a number of type LONG"
        );
        assert!(check(&map(&[("log.message.timestamp.type", "Never")])).is_err());
        assert!(matches!(
            check(&map(&[("max.connections", "5")])),
            Err(BrokerConfigError::NotDynamicInSluice(_))
        ));
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
