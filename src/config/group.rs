//! The checks of the KIP-848 consumer group settings (`group.consumer.*`): Kafka's
//! `GroupCoordinatorConfig` bounds between them, and the parsing of the assignor list and the
//! migration policy.

use super::{Config, ConfigError};

/// Kafka's `GroupCoordinatorConfig` checks of the `group.consumer.*` bounds.
pub(super) fn check_consumer_group_settings(c: &Config) -> Result<(), ConfigError> {
    let checks = [
        (c.group_consumer_max_heartbeat_interval_ms >= c.group_consumer_min_heartbeat_interval_ms,
         "group.consumer.max.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
        (c.group_consumer_heartbeat_interval_ms >= c.group_consumer_min_heartbeat_interval_ms,
         "group.consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms"),
        (c.group_consumer_heartbeat_interval_ms <= c.group_consumer_max_heartbeat_interval_ms,
         "group.consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
        (c.group_consumer_max_session_timeout_ms >= c.group_consumer_min_session_timeout_ms,
         "group.consumer.max.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
        (c.group_consumer_session_timeout_ms >= c.group_consumer_min_session_timeout_ms,
         "group.consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
        (c.group_consumer_session_timeout_ms <= c.group_consumer_max_session_timeout_ms,
         "group.consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms"),
        (c.group_consumer_heartbeat_interval_ms < c.group_consumer_session_timeout_ms,
         "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"),
        (c.group_consumer_max_assignment_interval_ms >= c.group_consumer_min_assignment_interval_ms,
         "group.consumer.max.assignment.interval.ms must be greater than or equal to group.consumer.min.assignment.interval.ms"),
        (c.group_consumer_assignment_interval_ms >= c.group_consumer_min_assignment_interval_ms
            && c.group_consumer_assignment_interval_ms <= c.group_consumer_max_assignment_interval_ms,
         "group.consumer.assignment.interval.ms must be between group.consumer.min.assignment.interval.ms and group.consumer.max.assignment.interval.ms"),
    ];
    match checks.iter().find(|(ok, _)| !ok) {
        Some((_, message)) => Err(ConfigError(message.to_string())),
        None => Ok(()),
    }
}

/// `group.consumer.assignors`: Kafka's built-in assignors by name or class name.
pub(super) fn parse_assignors(key: &str, value: &str) -> Result<Vec<String>, ConfigError> {
    let mut names = Vec::new();
    for item in value.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let name = match item {
            "uniform" | "org.apache.kafka.coordinator.group.assignor.UniformAssignor" => "uniform",
            "range" | "org.apache.kafka.coordinator.group.assignor.RangeAssignor" => "range",
            other => {
                return Err(ConfigError(format!(
                    "{key}: unknown assignor '{other}' (sluice has uniform and range)"
                )))
            }
        };
        names.push(name.to_string());
    }
    if names.is_empty() {
        return Err(ConfigError(format!(
            "{key}: at least one assignor is required"
        )));
    }
    Ok(names)
}

/// `group.consumer.migration.policy`: disabled, upgrade, downgrade or bidirectional.
pub(super) fn parse_migration_policy(key: &str, value: &str) -> Result<String, ConfigError> {
    let lower = value.trim().to_ascii_lowercase();
    match lower.as_str() {
        "disabled" | "upgrade" | "downgrade" | "bidirectional" => Ok(lower),
        _ => Err(ConfigError(format!(
            "{key}: Invalid value {value}: it must be one of disabled, upgrade, downgrade, bidirectional"
        ))),
    }
}
