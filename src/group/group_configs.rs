//! The group configs the coordinator applies (`kafka-configs --entity-type groups`): a consumer
//! group's own `consumer.session.timeout.ms`, `consumer.heartbeat.interval.ms` and
//! `consumer.assignment.interval.ms` in place of the broker's `group.consumer.*` values, read
//! where Kafka's `GroupMetadataManager` reads them (a member's session timer, each heartbeat
//! response, the target-assignment throttle), so a change applies from a member's next
//! heartbeat. Like Kafka's `GroupConfig.evaluate`, a value outside the range the broker's
//! settings allow (they may have been narrowed since the value was set) is clamped to that
//! range, with a warning. Storing them is `storage::group_configs`'.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{GroupConfig, GroupCoordinator};
use crate::config::group::configs::GroupOverrides;

impl GroupCoordinator {
    /// Installs a group's whole set of configs (empty: it has none), already validated.
    pub fn set_group_configs(&self, group_id: &str, configs: &BTreeMap<String, String>) {
        let overrides = evaluate(group_id, GroupOverrides::from_map(configs), &self.config);
        let mut all = self
            .group_overrides
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mut next = (**all).clone();
        if overrides == GroupOverrides::default() {
            next.remove(group_id);
        } else {
            next.insert(group_id.to_string(), overrides);
        }
        *all = Arc::new(next);
    }
}

/// Kafka's `GroupConfig.evaluate`: each value clamped to the broker's range, and a warning when
/// the session timeout in force would not exceed the heartbeat interval.
fn evaluate(group_id: &str, o: GroupOverrides, config: &GroupConfig) -> GroupOverrides {
    let evaluated = GroupOverrides {
        consumer_session_timeout_ms: clamp(
            group_id,
            "consumer.session.timeout.ms",
            o.consumer_session_timeout_ms,
            (
                config.consumer_min_session_timeout_ms,
                config.consumer_max_session_timeout_ms,
            ),
        ),
        consumer_heartbeat_interval_ms: clamp(
            group_id,
            "consumer.heartbeat.interval.ms",
            o.consumer_heartbeat_interval_ms,
            (
                config.consumer_min_heartbeat_interval_ms,
                config.consumer_max_heartbeat_interval_ms,
            ),
        ),
        consumer_assignment_interval_ms: clamp(
            group_id,
            "consumer.assignment.interval.ms",
            o.consumer_assignment_interval_ms,
            (
                config.consumer_min_assignment_interval_ms,
                config.consumer_max_assignment_interval_ms,
            ),
        ),
    };
    if evaluated.consumer_session_timeout_ms.is_some()
        || evaluated.consumer_heartbeat_interval_ms.is_some()
    {
        let session_ms = evaluated
            .consumer_session_timeout_ms
            .unwrap_or(config.consumer_session_timeout_ms);
        let heartbeat_ms = evaluated
            .consumer_heartbeat_interval_ms
            .unwrap_or(config.consumer_heartbeat_interval_ms);
        if session_ms <= heartbeat_ms {
            tracing::warn!(
                group_id,
                session_ms,
                heartbeat_ms,
                "the group's consumer.session.timeout.ms in force is not greater than its \
                 consumer.heartbeat.interval.ms; check that the broker's bounds for them do not overlap"
            );
        }
    }
    evaluated
}

fn clamp(group_id: &str, key: &str, value: Option<i32>, (min, max): (i32, i32)) -> Option<i32> {
    let value = value?;
    let clamped = value.clamp(min, max.max(min));
    if clamped != value {
        tracing::warn!(
            group_id,
            key,
            value,
            min,
            max,
            clamped,
            "a group config is outside the range the broker allows; the value in force is capped"
        );
    }
    Some(clamped)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn values_outside_the_broker_range_are_clamped() {
        let config = GroupConfig::from_broker(&Config::default());
        let within = GroupOverrides {
            consumer_session_timeout_ms: Some(50_000),
            consumer_heartbeat_interval_ms: Some(6_000),
            consumer_assignment_interval_ms: None,
        };
        assert_eq!(evaluate("g", within, &config), within);
        let outside = GroupOverrides {
            consumer_session_timeout_ms: Some(1_000),
            consumer_heartbeat_interval_ms: Some(60_000),
            consumer_assignment_interval_ms: Some(600_000),
        };
        let evaluated = evaluate("g", outside, &config);
        assert_eq!(
            evaluated.consumer_session_timeout_ms,
            Some(config.consumer_min_session_timeout_ms)
        );
        assert_eq!(
            evaluated.consumer_heartbeat_interval_ms,
            Some(config.consumer_max_heartbeat_interval_ms)
        );
        assert_eq!(
            evaluated.consumer_assignment_interval_ms,
            Some(config.consumer_max_assignment_interval_ms)
        );
    }
}
