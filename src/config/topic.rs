//! Kafka's topic configs: names, types, defaults, the broker settings they fall back to
//! (synonyms), documentation, and validation. DescribeConfigs, AlterConfigs,
//! IncrementalAlterConfigs, CreateTopics and the data path's `TopicSettings` all read this one
//! table; the broker table (`broker.rs`) takes the defaults of these synonyms from here.
//!
//! A topic config's value is resolved as Kafka resolves it: the topic's own override, else the
//! first of its broker synonyms set in a layer (this broker's dynamic config, the cluster-wide
//! dynamic default, `server.properties`), else Kafka's default.
//!
//! To add a topic setting: add its row to `TOPIC_CONFIGS` (name, type, default, broker
//! synonyms with their unit factors, check, doc), then read it where it is used through
//! `TopicValues` (`storage/topic_settings.rs` builds the data path's `TopicSettings`). Its
//! broker synonyms are recognised in `server.properties` and by dynamic updates without more.

use std::collections::BTreeMap;

/// Kafka's `ConfigType` codes as DescribeConfigs (v3+) reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
}

/// Kafka's `ConfigSource` codes.
pub mod source {
    pub const DYNAMIC_TOPIC_CONFIG: i8 = 1;
    pub const DYNAMIC_BROKER_CONFIG: i8 = 2;
    pub const DYNAMIC_DEFAULT_BROKER_CONFIG: i8 = 3;
    pub const STATIC_BROKER_CONFIG: i8 = 4;
    pub const DEFAULT_CONFIG: i8 = 5;
    pub const GROUP_CONFIG: i8 = 8;
}

#[derive(Clone, Copy, Debug)]
enum Check {
    None,
    AtLeast(i64),
    Between(f64, f64),
    OneOf(&'static [&'static str]),
    ListOf(&'static [&'static str]),
}

/// One topic config. `synonyms` are broker keys with the factor that turns their unit into
/// this config's unit (e.g. `log.retention.hours` × 3600000 = `retention.ms`).
pub struct TopicConfigDef {
    pub name: &'static str,
    pub kind: ConfigType,
    pub default: &'static str,
    pub synonyms: &'static [(&'static str, i64)],
    check: Check,
    pub doc: &'static str,
}

const fn def(
    name: &'static str,
    kind: ConfigType,
    default: &'static str,
    synonyms: &'static [(&'static str, i64)],
    check: Check,
    doc: &'static str,
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        kind,
        default,
        synonyms,
        check,
        doc,
    }
}

const MAX: &str = "9223372036854775807";
const HOUR_MS: i64 = 3_600_000;

pub use table::TOPIC_CONFIGS;

mod table {
    use super::Check::*;
    use super::ConfigType::*;
    use super::{def, TopicConfigDef, HOUR_MS, MAX};

    /// Kafka 4.1's topic configs, in name order.
    pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def("cleanup.policy", List, "delete", &[("log.cleanup.policy", 1)], ListOf(&["delete", "compact"]), "The retention policy of old log segments: delete, compact (keep the last record of each key), or both."),
    def("compression.gzip.level", Int, "-1", &[("compression.gzip.level", 1)], Between(-1.0, 9.0), "The gzip level used when compression.type is gzip."),
    def("compression.lz4.level", Int, "9", &[("compression.lz4.level", 1)], Between(1.0, 17.0), "The lz4 level used when compression.type is lz4."),
    def("compression.type", String, "producer", &[("compression.type", 1)], OneOf(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"]), "The final compression of the topic's batches: a codec, or 'producer' to keep the producer's."),
    def("compression.zstd.level", Int, "3", &[("compression.zstd.level", 1)], Between(-131072.0, 22.0), "The zstd level used when compression.type is zstd."),
    def("delete.retention.ms", Long, "86400000", &[("log.cleaner.delete.retention.ms", 1)], AtLeast(0), "How long delete tombstones are kept on compacted topics."),
    def("file.delete.delay.ms", Long, "60000", &[("log.segment.delete.delay.ms", 1)], AtLeast(0), "The time to wait before deleting a file from the filesystem."),
    def("flush.messages", Long, MAX, &[("log.flush.interval.messages", 1)], AtLeast(1), "Force an fsync after this many messages; 1 makes every acknowledged produce durable."),
    def("flush.ms", Long, MAX, &[("log.flush.interval.ms", 1)], AtLeast(0), "Force an fsync when the oldest unflushed data is this old."),
    def("follower.replication.throttled.replicas", List, "", &[("follower.replication.throttled.replicas", 1)], None, "Replicas whose replication is throttled on the follower side."),
    def("index.interval.bytes", Int, "4096", &[("log.index.interval.bytes", 1)], AtLeast(0), "Bytes of log between two offset index entries."),
    def("leader.replication.throttled.replicas", List, "", &[("leader.replication.throttled.replicas", 1)], None, "Replicas whose replication is throttled on the leader side."),
    def("local.retention.bytes", Long, "-2", &[("log.local.retention.bytes", 1)], AtLeast(-2), "Local retention size with tiered storage (-2: use retention.bytes)."),
    def("local.retention.ms", Long, "-2", &[("log.local.retention.ms", 1)], AtLeast(-2), "Local retention time with tiered storage (-2: use retention.ms)."),
    def("max.compaction.lag.ms", Long, MAX, &[("log.cleaner.max.compaction.lag.ms", 1)], AtLeast(1), "The longest a message stays ineligible for compaction."),
    def("max.message.bytes", Int, "1048588", &[("message.max.bytes", 1)], AtLeast(0), "The largest record batch size allowed."),
    def("message.timestamp.after.max.ms", Long, "3600000", &[("log.message.timestamp.after.max.ms", 1)], AtLeast(0), "How far in the future a record timestamp may be."),
    def("message.timestamp.before.max.ms", Long, MAX, &[("log.message.timestamp.before.max.ms", 1)], AtLeast(0), "How far in the past a record timestamp may be."),
    def("message.timestamp.type", String, "CreateTime", &[("log.message.timestamp.type", 1)], OneOf(&["CreateTime", "LogAppendTime"]), "Whether record timestamps are the producer's (CreateTime) or the broker's append time (LogAppendTime)."),
    def("min.cleanable.dirty.ratio", Double, "0.5", &[("log.cleaner.min.cleanable.ratio", 1)], Between(0.0, 1.0), "The dirty ratio above which a compacted log is cleaned."),
    def("min.compaction.lag.ms", Long, "0", &[("log.cleaner.min.compaction.lag.ms", 1)], AtLeast(0), "The shortest a message stays uncompacted."),
    def("min.insync.replicas", Int, "1", &[("min.insync.replicas", 1)], AtLeast(1), "The fewest replicas that must acknowledge an acks=all write."),
    def("preallocate", Boolean, "false", &[("log.preallocate", 1)], OneOf(&["true", "false"]), "Preallocate the file of a new segment."),
    def("remote.log.copy.disable", Boolean, "false", &[], OneOf(&["true", "false"]), "Stop copying segments to tiered storage."),
    def("remote.log.delete.on.disable", Boolean, "false", &[], OneOf(&["true", "false"]), "Delete tiered data when tiered storage is disabled."),
    def("remote.storage.enable", Boolean, "false", &[], OneOf(&["false"]), "Tiered storage; not supported by sluice."),
    def("retention.bytes", Long, "-1", &[("log.retention.bytes", 1)], None, "The size a partition may grow to before old segments are deleted (-1: no limit)."),
    def("retention.ms", Long, "604800000", &[("log.retention.ms", 1), ("log.retention.minutes", 60_000), ("log.retention.hours", HOUR_MS)], AtLeast(-1), "How long a segment is kept after its newest record (-1: forever)."),
    def("segment.bytes", Int, "1073741824", &[("log.segment.bytes", 1)], AtLeast(1_048_576), "The size of a segment file."),
    def("segment.index.bytes", Int, "10485760", &[("log.index.size.max.bytes", 1)], AtLeast(4), "The size of a segment's offset index."),
    def("segment.jitter.ms", Long, "0", &[("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", HOUR_MS)], AtLeast(0), "The most random jitter subtracted from segment.ms."),
    def("segment.ms", Long, "604800000", &[("log.roll.ms", 1), ("log.roll.hours", HOUR_MS)], AtLeast(1), "Roll a segment after this long even if it is not full."),
    def("unclean.leader.election.enable", Boolean, "false", &[("unclean.leader.election.enable", 1)], OneOf(&["true", "false"]), "Allow out-of-sync replicas to become leader."),
];
}

pub fn find(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// Checks one value; the message is Kafka-style and names the config.
pub fn validate(name: &str, value: &str) -> Result<(), String> {
    let def = find(name).ok_or_else(|| format!("Unknown topic config name: {name}"))?;
    validate_as(def, name, value, 1)
}

/// Checks `value` for `def` under the name `name` (a topic config or one of its broker
/// synonyms). A synonym in another unit (`factor` ≠ 1, e.g. hours) only has to be a number;
/// Kafka bounds those separately.
pub fn validate_as(
    def: &TopicConfigDef,
    name: &str,
    value: &str,
    factor: i64,
) -> Result<(), String> {
    let invalid = |why: &str| {
        Err(format!(
            "Invalid value {value} for configuration {name}: {why}"
        ))
    };
    let kind = if factor == 1 {
        def.kind
    } else {
        ConfigType::Int
    };
    let number = match kind {
        ConfigType::Int => value.trim().parse::<i32>().map(f64::from).ok(),
        ConfigType::Long => value.trim().parse::<i64>().map(|v| v as f64).ok(),
        ConfigType::Double => value.trim().parse::<f64>().ok(),
        _ => Some(0.0),
    };
    let Some(number) = number else {
        let kind = format!("{kind:?}").to_uppercase();
        return invalid(&format!("Not a number of type {kind}"));
    };
    if factor != 1 {
        return Ok(());
    }
    match def.check {
        Check::None => Ok(()),
        Check::AtLeast(min) if number < min as f64 => {
            invalid(&format!("Value must be at least {min}"))
        }
        Check::Between(low, high) if number < low || number > high => {
            invalid(&format!("Value must be in [{low}, {high}]"))
        }
        Check::OneOf(allowed) if !allowed.contains(&value.trim()) => {
            invalid(&format!("String must be one of: {}", allowed.join(", ")))
        }
        Check::ListOf(allowed)
            if value
                .split(',')
                .map(str::trim)
                .any(|v| !allowed.contains(&v)) =>
        {
            invalid(&format!("List values must be in: {}", allowed.join(", ")))
        }
        _ => Ok(()),
    }
}

/// The topic config a broker key stands in for, and the factor from the key's unit to the
/// topic config's. These are the broker configs Kafka lets `kafka-configs` change at runtime
/// (`DynamicLogConfig`): the defaults of topic configs.
pub fn broker_synonym(key: &str) -> Option<(&'static TopicConfigDef, i64)> {
    TOPIC_CONFIGS
        .iter()
        .filter(|def| !def.name.ends_with(".replication.throttled.replicas"))
        .find_map(|def| {
            def.synonyms
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, factor)| (def, *factor))
        })
}

/// One resolved config as DescribeConfigs reports it.
pub struct Resolved {
    pub name: String,
    /// None for a sensitive config, whose value is never shown.
    pub value: Option<String>,
    pub source: i8,
    /// (name, value, source), most specific first.
    pub synonyms: Vec<(String, String, i8)>,
    pub kind: ConfigType,
    pub doc: &'static str,
}

/// The broker's config layers under a topic's overrides, most specific first: this broker's
/// dynamic configs, the cluster-wide dynamic defaults, then `server.properties`; each with the
/// `ConfigSource` it reports.
pub type BrokerLayers<'a> = [(&'a BTreeMap<String, String>, i8)];

/// Resolves every topic config for a topic with `overrides`, against the broker's layers.
pub fn resolve_all(
    overrides: &BTreeMap<String, String>,
    broker_layers: &BrokerLayers,
) -> Vec<Resolved> {
    TOPIC_CONFIGS
        .iter()
        .map(|def| resolve(def, overrides, broker_layers))
        .collect()
}

fn resolve(
    def: &'static TopicConfigDef,
    overrides: &BTreeMap<String, String>,
    broker_layers: &BrokerLayers,
) -> Resolved {
    let mut synonyms = Vec::new();
    if let Some(value) = overrides.get(def.name) {
        synonyms.push((
            def.name.to_string(),
            value.clone(),
            source::DYNAMIC_TOPIC_CONFIG,
        ));
    }
    // Kafka lists synonyms name by name, and each name layer by layer.
    for (key, factor) in def.synonyms {
        for (layer, layer_source) in broker_layers {
            if let Some(value) = layer.get(*key) {
                let converted = match (*factor, value.trim().parse::<i64>()) {
                    (1, _) | (_, Err(_)) => value.clone(),
                    (factor, Ok(v)) => v.saturating_mul(factor).to_string(),
                };
                synonyms.push((key.to_string(), converted, *layer_source));
            }
        }
    }
    // A freshly formatted Kafka 4.1 cluster (eligible leader replicas on) stores
    // min.insync.replicas as a cluster-wide dynamic default, so tools list it as set.
    if def.name == "min.insync.replicas"
        && synonyms.len() == usize::from(overrides.contains_key(def.name))
    {
        synonyms.push((
            def.name.to_string(),
            def.default.to_string(),
            source::DYNAMIC_DEFAULT_BROKER_CONFIG,
        ));
    }
    let default_name = def.synonyms.first().map(|(k, _)| *k).unwrap_or(def.name);
    synonyms.push((
        default_name.to_string(),
        def.default.to_string(),
        source::DEFAULT_CONFIG,
    ));
    let (value, source) = synonyms
        .first()
        .map(|(_, v, s)| (v.clone(), *s))
        .unwrap_or_default();
    Resolved {
        name: def.name.to_string(),
        value: Some(value),
        source,
        synonyms,
        kind: def.kind,
        doc: def.doc,
    }
}

/// A topic's config values as the data path reads them: the topic's override, else the first
/// of the config's broker synonyms set in `broker` (every layer merged, the most specific on
/// top, as `Config::properties` holds them), else Kafka's default. Names must be in the table.
pub struct TopicValues<'a> {
    overrides: &'a BTreeMap<String, String>,
    broker: &'a BTreeMap<String, String>,
}

impl<'a> TopicValues<'a> {
    pub fn new(
        overrides: &'a BTreeMap<String, String>,
        broker: &'a BTreeMap<String, String>,
    ) -> TopicValues<'a> {
        TopicValues { overrides, broker }
    }

    /// The value in force of topic config `name`, converted to its unit.
    pub fn get(&self, name: &str) -> String {
        let def = find(name).unwrap_or_else(|| panic!("{name} is not a topic config"));
        let value = resolve(
            def,
            self.overrides,
            &[(self.broker, source::STATIC_BROKER_CONFIG)],
        )
        .value
        .unwrap_or_default();
        value.trim().to_string()
    }

    fn parsed<T: std::str::FromStr>(&self, name: &str) -> T {
        self.get(name)
            .parse()
            .ok()
            .or_else(|| find(name).and_then(|def| def.default.parse().ok()))
            .unwrap_or_else(|| panic!("{name}: the table's default does not parse"))
    }

    /// A LONG or INT config; a value that does not parse (never stored: values are checked
    /// before) falls back to the table's default.
    pub fn i64(&self, name: &str) -> i64 {
        self.parsed(name)
    }

    /// A DOUBLE config.
    pub fn f64(&self, name: &str) -> f64 {
        self.parsed(name)
    }

    /// Whether the topic or any broker layer sets `name` (or one of its synonyms).
    pub fn is_set(&self, name: &str) -> bool {
        self.overrides.contains_key(name)
            || find(name).is_some_and(|def| {
                def.synonyms
                    .iter()
                    .any(|(key, _)| self.broker.contains_key(*key))
            })
    }

    /// Whether the LIST config `name` includes `item`.
    pub fn includes(&self, name: &str, item: &str) -> bool {
        self.get(name).split(',').any(|v| v.trim() == item)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn table_is_sorted_and_defaults_are_valid() {
        assert!(TOPIC_CONFIGS.windows(2).all(|w| w[0].name < w[1].name));
        for def in TOPIC_CONFIGS {
            assert_eq!(validate(def.name, def.default), Ok(()), "{}", def.name);
        }
    }

    #[test]
    fn defaults_agree_with_the_broker_config() {
        let broker = Config::default();
        let values = broker.topic_values();
        let default = |name: &str| find(name).unwrap().default.parse::<i64>().unwrap();
        for name in [
            "segment.bytes",
            "segment.ms",
            "index.interval.bytes",
            "segment.index.bytes",
            "max.message.bytes",
            "message.timestamp.after.max.ms",
            "retention.ms",
            "flush.messages",
        ] {
            assert_eq!(values.i64(name), default(name), "{name}");
        }
    }

    #[test]
    fn values_resolve_through_synonyms_with_their_units() {
        let broker = BTreeMap::from([
            ("log.retention.hours".to_string(), "2".to_string()),
            (
                "log.cleanup.policy".to_string(),
                "compact,delete".to_string(),
            ),
        ]);
        let overrides = BTreeMap::from([("segment.ms".to_string(), "5".to_string())]);
        let values = TopicValues::new(&overrides, &broker);
        assert_eq!(values.i64("retention.ms"), 7_200_000);
        assert_eq!(values.i64("segment.ms"), 5);
        assert_eq!(values.i64("segment.bytes"), 1_073_741_824);
        assert!(values.includes("cleanup.policy", "compact"));
        assert!(!values.includes("cleanup.policy", "shred"));
        assert_eq!(values.f64("min.cleanable.dirty.ratio"), 0.5);
        let broker = BTreeMap::from([
            ("log.retention.hours".to_string(), "2".to_string()),
            ("log.retention.ms".to_string(), "1000".to_string()),
        ]);
        let none = BTreeMap::new();
        assert_eq!(TopicValues::new(&none, &broker).i64("retention.ms"), 1000);
    }

    #[test]
    fn values_are_checked_like_kafka() {
        assert!(validate("retention.ms", "-1").is_ok());
        assert!(validate("retention.ms", "-2").is_err());
        assert!(validate("retention.ms", "soon").is_err());
        assert!(validate("segment.bytes", "1000").is_err());
        assert!(validate("cleanup.policy", "compact,delete").is_ok());
        assert!(validate("cleanup.policy", "shred").is_err());
        assert!(validate("compression.type", "gzip").is_ok());
        assert!(validate("compression.type", "brotli").is_err());
        assert!(validate("min.cleanable.dirty.ratio", "1.5").is_err());
        assert!(validate("no.such.config", "1").is_err());
    }

    #[test]
    fn resolution_prefers_topic_then_broker_then_default() {
        let overrides = BTreeMap::from([("retention.ms".to_string(), "1000".to_string())]);
        let broker = BTreeMap::from([
            ("log.retention.hours".to_string(), "2".to_string()),
            ("log.segment.bytes".to_string(), "2097152".to_string()),
        ]);
        let all = resolve_all(&overrides, &[(&broker, source::STATIC_BROKER_CONFIG)]);
        let get = |n: &str| all.iter().find(|r| r.name == n).unwrap();
        assert_eq!(
            (
                get("retention.ms").value.as_deref().unwrap(),
                get("retention.ms").source
            ),
            ("1000", source::DYNAMIC_TOPIC_CONFIG)
        );
        assert_eq!(
            get("retention.ms").synonyms[1],
            (
                "log.retention.hours".to_string(),
                "7200000".to_string(),
                source::STATIC_BROKER_CONFIG
            )
        );
        assert_eq!(
            (
                get("segment.bytes").value.as_deref().unwrap(),
                get("segment.bytes").source
            ),
            ("2097152", source::STATIC_BROKER_CONFIG)
        );
        assert_eq!(
            (
                get("cleanup.policy").value.as_deref().unwrap(),
                get("cleanup.policy").source
            ),
            ("delete", source::DEFAULT_CONFIG)
        );
    }
}
