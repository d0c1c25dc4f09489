//! Kafka 4.4's group configs (the GROUP resource of DescribeConfigs, AlterConfigs and
//! IncrementalAlterConfigs; `kafka-configs --entity-type groups`): one row per key with its
//! type, Kafka's default, the broker setting it falls back to, and its check. Kafka's
//! `GroupConfig`: a new set of a group's configs is checked as a whole (names, then every
//! value's type and lower bound in table order, then the ranges the broker's
//! `group.consumer.*` settings allow, then that a session timeout exceeds its heartbeat
//! interval), and a group reads the values in force clamped to the broker's ranges.
//!
//! Only the `consumer.*` keys do anything on sluice (`GroupOverrides`); the `share.*`,
//! `streams.*` and `errors.*` keys are accepted, checked and described as Kafka 4.4 does, with
//! Kafka's defaults for the broker settings behind them, since sluice has no share or streams
//! groups. Internal keys are listed only when set, as Kafka lists them.

use std::collections::BTreeMap;

use crate::config::topic::{source, ConfigType, Resolved};
use crate::config::Config;

#[derive(Clone, Copy, Debug)]
enum Check {
    Any,
    AtLeast(i64),
    OneOf(&'static [&'static str]),
    /// `share.auto.offset.reset`: earliest, latest or `by_duration:<ISO-8601 duration>`.
    OffsetReset,
}

/// One group config.
pub struct GroupConfigDef {
    pub name: &'static str,
    pub kind: ConfigType,
    /// None: no default (`streams.assignor.name` takes the broker's first streams assignor).
    default: Option<&'static str>,
    /// The broker setting whose value applies when the group sets none, with Kafka's default of
    /// it (where sluice has no such setting, the value in force is that default).
    synonym: Option<(&'static str, &'static str)>,
    internal: bool,
    check: Check,
    pub doc: &'static str,
}

const fn row(
    name: &'static str,
    kind: ConfigType,
    default: Option<&'static str>,
    synonym: Option<(&'static str, &'static str)>,
    check: Check,
    doc: &'static str,
) -> GroupConfigDef {
    GroupConfigDef {
        name,
        kind,
        default,
        synonym,
        internal: false,
        check,
        doc,
    }
}

const fn internal(def: GroupConfigDef) -> GroupConfigDef {
    GroupConfigDef {
        internal: true,
        ..def
    }
}

pub use table::GROUP_CONFIGS;

mod table {
    use super::Check::{Any, AtLeast, OffsetReset, OneOf};
    use super::ConfigType::{Boolean, Int, List, Long, String};
    use super::{internal, row, GroupConfigDef};

    const TRUE: Option<&str> = Some("true");

    /// Kafka 4.4's group configs, in Kafka's order (which decides which bad value is reported).
    pub const GROUP_CONFIGS: &[GroupConfigDef] = &[
        row("consumer.session.timeout.ms", Int, Some("45000"), Some(("group.consumer.session.timeout.ms", "45000")), AtLeast(1), "How long a consumer-protocol member may go without a heartbeat before it is fenced."),
        row("consumer.heartbeat.interval.ms", Int, Some("5000"), Some(("group.consumer.heartbeat.interval.ms", "5000")), AtLeast(1), "How often the group's consumer-protocol members are told to heartbeat."),
        row("consumer.assignment.interval.ms", Int, Some("1000"), Some(("group.consumer.assignment.interval.ms", "1000")), AtLeast(0), "The least time between two target assignments of the group."),
        internal(row("consumer.assignor.offload.enable", Boolean, TRUE, Some(("group.consumer.assignor.offload.enable", "true")), Any, "Whether assignments are computed off the coordinator thread (no effect on sluice).")),
        row("share.session.timeout.ms", Int, Some("45000"), Some(("group.share.session.timeout.ms", "45000")), AtLeast(1), "The session timeout of share-group members."),
        row("share.heartbeat.interval.ms", Int, Some("5000"), Some(("group.share.heartbeat.interval.ms", "5000")), AtLeast(1), "The heartbeat interval of share-group members."),
        row("share.record.lock.duration.ms", Int, Some("30000"), Some(("group.share.record.lock.duration.ms", "30000")), AtLeast(1000), "How long a share group holds a delivered record."),
        row("share.delivery.count.limit", Int, Some("5"), Some(("group.share.delivery.count.limit", "5")), AtLeast(2), "How often a share group delivers a record at most."),
        row("share.partition.max.record.locks", Int, Some("2000"), Some(("group.share.partition.max.record.locks", "2000")), AtLeast(100), "The most records a share group holds per partition."),
        row("share.auto.offset.reset", String, Some("latest"), None, OffsetReset, "Where a share group starts on a partition: earliest, latest or by_duration:<duration>."),
        row("share.isolation.level", String, Some("read_uncommitted"), None, OneOf(&["read_committed", "read_uncommitted"]), "Whether a share group delivers records of open and aborted transactions."),
        row("share.renew.acknowledge.enable", Boolean, TRUE, None, Any, "Whether share-group members may renew their record locks."),
        row("share.assignment.interval.ms", Int, Some("1000"), Some(("group.share.assignment.interval.ms", "1000")), AtLeast(0), "The least time between two assignments of a share group."),
        internal(row("share.assignor.offload.enable", Boolean, TRUE, Some(("group.share.assignor.offload.enable", "true")), Any, "Whether share assignments are computed off the coordinator thread.")),
        row("streams.session.timeout.ms", Int, Some("45000"), Some(("group.streams.session.timeout.ms", "45000")), AtLeast(1), "The session timeout of streams-group members."),
        row("streams.heartbeat.interval.ms", Int, Some("5000"), Some(("group.streams.heartbeat.interval.ms", "5000")), AtLeast(1), "The heartbeat interval of streams-group members."),
        row("streams.num.standby.replicas", Int, Some("0"), Some(("group.streams.num.standby.replicas", "0")), AtLeast(0), "The standby replicas of each task of a streams group."),
        row("streams.initial.rebalance.delay.ms", Int, Some("3000"), Some(("group.streams.initial.rebalance.delay.ms", "3000")), AtLeast(0), "How long a new streams group waits for more members before its first assignment."),
        row("streams.assignment.interval.ms", Int, Some("1000"), Some(("group.streams.assignment.interval.ms", "1000")), AtLeast(0), "The least time between two assignments of a streams group."),
        internal(row("streams.assignor.offload.enable", Boolean, TRUE, Some(("group.streams.assignor.offload.enable", "true")), Any, "Whether streams assignments are computed off the coordinator thread.")),
        internal(row("streams.task.offset.interval.ms", Int, Some("60000"), Some(("group.streams.task.offset.interval.ms", "60000")), AtLeast(1), "How often streams members report their warm-up tasks' offsets.")),
        internal(row("streams.num.warmup.replicas", Int, Some("2"), Some(("group.streams.num.warmup.replicas", "2")), AtLeast(0), "The most warm-up task replicas of a streams group.")),
        row("streams.rack.aware.assignment.tags", List, Some(""), Some(("group.streams.rack.aware.assignment.tags", "")), Any, "Client tags over which standby tasks are spread."),
        internal(row("streams.acceptable.recovery.lag", Long, Some("10000"), Some(("group.streams.acceptable.recovery.lag", "10000")), AtLeast(0), "The lag under which a streams client counts as caught up.")),
        row("streams.assignor.name", String, None, Some(("group.streams.assignors", "sticky")), Any, "The task assignor of a streams group, one of group.streams.assignors."),
        row("errors.deadletterqueue.topic.name", String, Some(""), None, Any, "The dead-letter topic of a share group (none when blank)."),
        row("errors.deadletterqueue.copy.record.enable", Boolean, Some("false"), None, Any, "Whether a share group copies the record itself to its dead-letter topic."),
    ];
}

pub fn find(name: &str) -> Option<&'static GroupConfigDef> {
    GROUP_CONFIGS.iter().find(|d| d.name == name)
}

/// Whether `name` is a group config or the broker setting one falls back to.
pub fn is_synonym(name: &str) -> bool {
    GROUP_CONFIGS
        .iter()
        .any(|d| d.name == name || d.synonym.is_some_and(|(key, _)| key == name))
}

/// A bound the broker's settings put on a group config (Kafka's `GroupCoordinatorConfig` and
/// `ShareGroupConfig`): sluice's `group.consumer.*` settings, and Kafka's defaults for the share
/// and streams ones, which sluice does not read.
enum Bound {
    Range(&'static str, i32, i32),
    Max(&'static str, i32),
    Min(&'static str, i32),
}

/// In Kafka's order of `validateValues`.
fn bounds(config: &Config) -> [Bound; 15] {
    use Bound::*;
    [
        Range(
            "consumer.heartbeat.interval.ms",
            config.group_consumer_min_heartbeat_interval_ms,
            config.group_consumer_max_heartbeat_interval_ms,
        ),
        Range(
            "consumer.session.timeout.ms",
            config.group_consumer_min_session_timeout_ms,
            config.group_consumer_max_session_timeout_ms,
        ),
        Range(
            "consumer.assignment.interval.ms",
            config.group_consumer_min_assignment_interval_ms,
            config.group_consumer_max_assignment_interval_ms,
        ),
        Range("share.heartbeat.interval.ms", 5_000, 15_000),
        Range("share.session.timeout.ms", 45_000, 60_000),
        Range("share.record.lock.duration.ms", 15_000, 60_000),
        Range("share.delivery.count.limit", 2, 10),
        Range("share.partition.max.record.locks", 100, 4_000),
        Range("share.assignment.interval.ms", 0, 15_000),
        Range("streams.heartbeat.interval.ms", 5_000, 15_000),
        Range("streams.session.timeout.ms", 45_000, 60_000),
        Max("streams.num.standby.replicas", 2),
        Range("streams.assignment.interval.ms", 0, 15_000),
        Min("streams.task.offset.interval.ms", 15_000),
        Max("streams.num.warmup.replicas", 20),
    ]
}

fn check_bound(bound: &Bound, configs: &BTreeMap<String, String>) -> Result<(), String> {
    let int = |key: &str| configs.get(key).and_then(|v| v.trim().parse::<i32>().ok());
    match *bound {
        Bound::Range(key, min, max) => match int(key) {
            Some(v) if v < min || v > max => Err(format!(
                "{key} must be in the range {min} to {max} inclusive."
            )),
            _ => Ok(()),
        },
        Bound::Max(key, max) => match int(key) {
            Some(v) if v > max => Err(format!("{key} must be less than or equal to {max}")),
            _ => Ok(()),
        },
        Bound::Min(key, min) => match int(key) {
            Some(v) if v < min => Err(format!("{key} must be greater than or equal to {min}")),
            _ => Ok(()),
        },
    }
}

/// Kafka's `GroupConfig.validate` of a group's whole new set of configs; the message is
/// Kafka's (an INVALID_CONFIG error).
pub fn validate(configs: &BTreeMap<String, String>, config: &Config) -> Result<(), String> {
    if let Some(name) = configs.keys().find(|name| find(name).is_none()) {
        return Err(format!("Unknown group config name: {name}"));
    }
    if let Some(tags) = configs.get("streams.rack.aware.assignment.tags") {
        let tags = split_list(tags);
        if (1..tags.len()).any(|i| tags[..i].contains(&tags[i])) {
            return Err(
                "streams.rack.aware.assignment.tags must not contain duplicate tag keys."
                    .to_string(),
            );
        }
    }
    for def in GROUP_CONFIGS {
        if let Some(value) = configs.get(def.name) {
            check_value(def, value)?;
        }
    }
    for bound in bounds(config) {
        check_bound(&bound, configs)?;
    }
    if let Some(name) = configs.get("streams.assignor.name").map(|n| n.trim()) {
        if name != "sticky" {
            return Err(format!("streams.assignor.name '{name}' is not a registered task assignor. Registered assignors are: [sticky]."));
        }
    }
    let int = |key: &str| configs.get(key).and_then(|v| v.trim().parse::<i64>().ok());
    let defaults = [
        (
            "consumer",
            i64::from(config.group_consumer_session_timeout_ms),
            i64::from(config.group_consumer_heartbeat_interval_ms),
        ),
        ("share", 45_000, 5_000),
        ("streams", 45_000, 5_000),
    ];
    for (kind, session_default, heartbeat_default) in defaults {
        let (session_key, heartbeat_key) = (
            format!("{kind}.session.timeout.ms"),
            format!("{kind}.heartbeat.interval.ms"),
        );
        if !configs.contains_key(&session_key) && !configs.contains_key(&heartbeat_key) {
            continue;
        }
        let session = int(&session_key).unwrap_or(session_default);
        let heartbeat = int(&heartbeat_key).unwrap_or(heartbeat_default);
        if session <= heartbeat {
            return Err(format!(
                "{session_key} must be greater than {heartbeat_key}"
            ));
        }
    }
    if configs
        .get("errors.deadletterqueue.topic.name")
        .is_some_and(|n| n.trim().starts_with("__"))
    {
        return Err(
            "errors.deadletterqueue.topic.name: DLQ topic name must not start with '__'"
                .to_string(),
        );
    }
    Ok(())
}

/// Kafka's `ConfigException` for one value: "Invalid value V for configuration K: why".
fn check_value(def: &GroupConfigDef, value: &str) -> Result<(), String> {
    let invalid = |why: &str| {
        Err(format!(
            "Invalid value {value} for configuration {}: {why}",
            def.name
        ))
    };
    let trimmed = value.trim();
    let number = match def.kind {
        ConfigType::Int => match trimmed.parse::<i32>() {
            Ok(n) => Some(i64::from(n)),
            Err(_) => return invalid("Not a number of type INT"),
        },
        ConfigType::Long => match trimmed.parse::<i64>() {
            Ok(n) => Some(n),
            Err(_) => return invalid("Not a number of type LONG"),
        },
        ConfigType::Boolean
            if !trimmed.eq_ignore_ascii_case("true") && !trimmed.eq_ignore_ascii_case("false") =>
        {
            return invalid("Expected value to be either true or false")
        }
        _ => None,
    };
    match (def.check, number) {
        (Check::AtLeast(min), Some(n)) if n < min => invalid(&format!("Value must be at least {min}")),
        (Check::OneOf(allowed), _) if !allowed.contains(&trimmed) => {
            invalid(&format!("String must be one of: {}", allowed.join(", ")))
        }
        (Check::OffsetReset, _) if !is_offset_reset(trimmed) => invalid(&format!(
            "Invalid value `{trimmed}` for configuration {}. The value must be either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS>'.",
            def.name
        )),
        _ => Ok(()),
    }
}

/// earliest, latest, or `by_duration:` and a non-negative ISO-8601 duration (Java's
/// `Duration.parse`: `PnDTnHnMn.nS`, each part optional but at least one, signs allowed).
fn is_offset_reset(value: &str) -> bool {
    if value == "earliest" || value == "latest" {
        return true;
    }
    let Some(duration) = value.strip_prefix("by_duration:") else {
        return false;
    };
    let pattern = r"(?i)^([-+]?)P(?:([-+]?[0-9]+)D)?(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?$";
    let Ok(re) = regex::Regex::new(pattern) else {
        return false;
    };
    let Some(c) = re.captures(duration) else {
        return false;
    };
    let has_time = c.get(3).is_some_and(|t| t.as_str().len() > 1);
    if c.get(2).is_none() && !has_time || c.get(3).is_some_and(|t| t.as_str().len() == 1) {
        return false;
    }
    let part = |i: usize, unit: f64| {
        c.get(i)
            .and_then(|m| m.as_str().parse::<f64>().ok())
            .unwrap_or(0.0)
            * unit
    };
    let seconds_sign = c.get(6).map_or(1.0, |m| {
        if m.as_str().starts_with('-') {
            -1.0
        } else {
            1.0
        }
    });
    let fraction = c.get(7).map_or(0.0, |m| {
        format!("0.{}", m.as_str()).parse::<f64>().unwrap_or(0.0)
    });
    let total = part(2, 86_400.0)
        + part(4, 3_600.0)
        + part(5, 60.0)
        + part(6, 1.0)
        + seconds_sign * fraction;
    let negated = c.get(1).is_some_and(|m| m.as_str() == "-");
    if negated {
        total <= 0.0
    } else {
        total >= 0.0
    }
}

fn split_list(value: &str) -> Vec<&str> {
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Vec::new();
    }
    trimmed.split(',').map(str::trim).collect()
}

/// A value as Kafka shows it once parsed: numbers and booleans normalized, strings trimmed,
/// lists joined with ",".
fn shown(def: &GroupConfigDef, value: &str) -> String {
    let trimmed = value.trim();
    match def.kind {
        ConfigType::Int | ConfigType::Long => trimmed
            .parse::<i64>()
            .map_or_else(|_| trimmed.to_string(), |n| n.to_string()),
        ConfigType::Boolean => trimmed.to_ascii_lowercase(),
        ConfigType::List => split_list(trimmed).join(","),
        _ => trimmed.to_string(),
    }
}

/// The broker's value of a group config's synonym: the setting in force for the
/// `group.consumer.*` keys sluice reads, Kafka's default for the others.
fn broker_value(config: &Config, key: &str, kafka_default: &str) -> String {
    match key {
        "group.consumer.session.timeout.ms" => config.group_consumer_session_timeout_ms.to_string(),
        "group.consumer.heartbeat.interval.ms" => {
            config.group_consumer_heartbeat_interval_ms.to_string()
        }
        "group.consumer.assignment.interval.ms" => {
            config.group_consumer_assignment_interval_ms.to_string()
        }
        other => config
            .properties
            .get(other)
            .cloned()
            .filter(|_| other.starts_with("group.consumer."))
            .unwrap_or_else(|| kafka_default.to_string()),
    }
}

/// Every group config DescribeConfigs lists for a group with `overrides`: its value, source
/// and synonyms (the group's own value, then the broker setting from `server.properties`, then
/// its default). Internal keys appear only when the group or `server.properties` sets them.
pub fn resolve_all(overrides: &BTreeMap<String, String>, config: &Config) -> Vec<Resolved> {
    GROUP_CONFIGS
        .iter()
        .filter(|def| {
            !def.internal
                || overrides.contains_key(def.name)
                || def
                    .synonym
                    .is_some_and(|(key, _)| config.properties.contains_key(key))
        })
        .map(|def| {
            let mut synonyms = Vec::new();
            if let Some(value) = overrides.get(def.name) {
                synonyms.push((
                    def.name.to_string(),
                    shown(def, value),
                    source::GROUP_CONFIG,
                ));
            }
            match def.synonym {
                Some((key, kafka_default)) => {
                    if config.properties.contains_key(key) {
                        let value = broker_value(config, key, kafka_default);
                        synonyms.push((key.to_string(), value, source::STATIC_BROKER_CONFIG));
                    }
                    synonyms.push((
                        key.to_string(),
                        kafka_default.to_string(),
                        source::DEFAULT_CONFIG,
                    ));
                }
                None => {
                    if let Some(default) = def.default {
                        synonyms.push((
                            def.name.to_string(),
                            default.to_string(),
                            source::DEFAULT_CONFIG,
                        ));
                    }
                }
            }
            let value = match (overrides.get(def.name), def.synonym) {
                (Some(value), _) => shown(def, value),
                (None, Some((key, kafka_default))) => broker_value(config, key, kafka_default),
                (None, None) => def.default.unwrap_or_default().to_string(),
            };
            let source = synonyms
                .first()
                .map_or(source::DEFAULT_CONFIG, |(_, _, s)| *s);
            Resolved {
                name: def.name.to_string(),
                value: Some(value),
                source,
                synonyms,
                kind: def.kind,
                doc: def.doc,
            }
        })
        .collect()
}

/// The group configs the coordinator uses, parsed (`validate` has passed); None where the
/// group sets none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupOverrides {
    pub consumer_session_timeout_ms: Option<i32>,
    pub consumer_heartbeat_interval_ms: Option<i32>,
    pub consumer_assignment_interval_ms: Option<i32>,
}

impl GroupOverrides {
    pub fn from_map(configs: &BTreeMap<String, String>) -> GroupOverrides {
        let int = |key: &str| configs.get(key).and_then(|v| v.trim().parse::<i32>().ok());
        GroupOverrides {
            consumer_session_timeout_ms: int("consumer.session.timeout.ms"),
            consumer_heartbeat_interval_ms: int("consumer.heartbeat.interval.ms"),
            consumer_assignment_interval_ms: int("consumer.assignment.interval.ms"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_auto_offset_reset_takes_java_durations_that_are_not_negative() {
        for ok in [
            "earliest",
            "latest",
            "by_duration:PT1H",
            "by_duration:P1D",
            "by_duration:PT0.5S",
            "by_duration:P1DT2H3M4.5S",
            "by_duration:PT0S",
        ] {
            assert!(is_offset_reset(ok), "{ok}");
        }
        for bad in [
            "Earliest",
            "by_duration:",
            "by_duration:P",
            "by_duration:PT",
            "by_duration:-PT1H",
            "by_duration:1H",
            "by_duration:PT1H ",
            "none",
        ] {
            assert!(!is_offset_reset(bad), "{bad}");
        }
    }

    #[test]
    fn overrides_read_the_consumer_keys_only() {
        let configs: BTreeMap<String, String> = [
            ("consumer.session.timeout.ms", " 20000 "),
            ("consumer.heartbeat.interval.ms", "3000"),
            ("share.session.timeout.ms", "50000"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let overrides = GroupOverrides::from_map(&configs);
        assert_eq!(overrides.consumer_session_timeout_ms, Some(20_000));
        assert_eq!(overrides.consumer_heartbeat_interval_ms, Some(3_000));
        assert_eq!(overrides.consumer_assignment_interval_ms, None);
    }
}
