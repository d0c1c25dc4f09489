//! A topic's configs (its overrides, as set at creation or by AlterConfigs) and the settings
//! the data path derives from them. Every value is resolved through the topic table
//! (`config::topic`) alone: the topic's override, else this broker's dynamic config, else the
//! cluster-wide dynamic default, else `server.properties` (each through the topic config's
//! broker synonyms, in Kafka's order), else Kafka's default. `TopicSettings` is derived once
//! per change, never per request.

use std::collections::BTreeMap;

use crate::config::topic::{self as topic_config, TopicValues};
use crate::config::Config;
use crate::log::{CleanerConfig, LogConfig, RetentionConfig};
use crate::record_batch::recompress::Recompression;
use crate::record_batch::validate::BatchLimits;

use super::errors::TopicError;

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

    /// The topic's config values over `broker`'s layers.
    pub fn values<'a>(&'a self, broker: &'a Config) -> TopicValues<'a> {
        TopicValues::new(&self.0, &broker.properties)
    }

    /// The settings the data path uses, derived once per change rather than per request.
    pub fn settings(&self, broker: &Config) -> TopicSettings {
        let values = self.values(broker);
        let codec = values.get("compression.type");
        // The level only when set somewhere: unset, the codec's own default applies.
        let level_key = format!("compression.{codec}.level");
        let compression_level = (topic_config::find(&level_key).is_some()
            && values.is_set(&level_key))
        .then(|| values.get(&level_key).parse().ok())
        .flatten();
        let compacted = values.includes("cleanup.policy", "compact");
        TopicSettings {
            log: LogConfig::from_topic(&values),
            max_message_bytes: i32::try_from(values.i64("max.message.bytes")).unwrap_or(i32::MAX),
            timestamp_before_max_ms: values.i64("message.timestamp.before.max.ms"),
            timestamp_after_max_ms: values.i64("message.timestamp.after.max.ms"),
            log_append_time: values.get("message.timestamp.type") == "LogAppendTime",
            compacted,
            compression_level,
            compression_codec: match codec.as_str() {
                "uncompressed" => Some(0),
                "gzip" => Some(1),
                "snappy" => Some(2),
                "lz4" => Some(3),
                "zstd" => Some(4),
                _ => None,
            },
            min_insync_replicas: values.i64("min.insync.replicas"),
            retention: RetentionConfig::from_topic(&values),
            cleaner: compacted.then(|| {
                CleanerConfig::from_topic(&values, broker.log_cleaner_dedupe_buffer_bytes)
            }),
            overrides: self.clone(),
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

impl TopicSettings {
    /// What `record_batch::validate` checks a batch produced to this topic against.
    pub fn batch_limits(&self, produce_version: i16, now_ms: i64) -> BatchLimits {
        // The broker stamps LogAppendTime batches, so producer timestamps are not bounded there.
        let unbounded = |max_ms: i64| {
            if self.log_append_time {
                i64::MAX
            } else {
                max_ms
            }
        };
        BatchLimits {
            max_message_bytes: self.max_message_bytes,
            compacted: self.compacted,
            produce_version,
            now_ms,
            timestamp_before_max_ms: unbounded(self.timestamp_before_max_ms),
            timestamp_after_max_ms: unbounded(self.timestamp_after_max_ms),
        }
    }

    /// The topic's `compression.type` and level, for re-encoding a batch in another codec.
    pub fn recompression(&self) -> Recompression {
        Recompression {
            compression_codec: self.compression_codec,
            compression_level: self.compression_level,
            max_message_bytes: self.max_message_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
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

    #[test]
    fn settings_follow_topic_then_broker_layers_then_default() {
        let broker = Config::from_pairs(&[
            ("log.retention.hours".to_string(), "-1".to_string()),
            ("log.segment.bytes".to_string(), "2048".to_string()),
            ("compression.type".to_string(), "zstd".to_string()),
        ])
        .unwrap();
        let dynamic = configs(&[
            ("log.roll.hours", "2"),
            ("log.cleanup.policy", "compact,delete"),
            ("compression.zstd.level", "7"),
        ]);
        let broker = broker.with_dynamic(&dynamic).unwrap();
        let topic = TopicConfigs::from_map(configs(&[("segment.bytes", "4096")]));
        let settings = topic.settings(&broker);
        assert_eq!(settings.log.segment_bytes, 4096);
        assert_eq!(settings.log.segment_ms, 7_200_000);
        assert_eq!(settings.retention.retention_ms, -1);
        assert_eq!(settings.compression_codec, Some(4));
        assert_eq!(settings.compression_level, Some(7));
        assert!(settings.compacted);
        let cleaner = settings.cleaner.unwrap();
        assert_eq!(cleaner.min_cleanable_dirty_ratio, 0.5);
        assert_eq!(cleaner.dedupe_buffer_bytes, 134_217_728);
        let defaults = TopicConfigs::default().settings(&Config::default());
        assert_eq!(defaults.log.segment_bytes, 1_073_741_824);
        assert_eq!(defaults.retention.retention_ms, 604_800_000);
        assert_eq!(defaults.compression_level, None);
        assert!(defaults.cleaner.is_none());
        let compact_only = TopicConfigs::from_map(configs(&[("cleanup.policy", "compact")]));
        assert_eq!(compact_only.settings(&broker).retention.retention_bytes, -1);
    }
}
