//! Kafka's container convention for settings in environment variables, as the apache/kafka
//! and Confluent images apply it: `KAFKA_LISTENERS=...` is `listeners=...`. The name loses its
//! `KAFKA_` prefix and is lowercased; then `_` becomes `.`, except that `___` stands for `-`
//! and `__` for `_` (`KAFKA_LOG_CLEANER___X` is `log.cleaner-x`, `KAFKA_A__B` is `a_b`). The
//! images' own variables (JVM and log4j options) are not settings and are skipped. sluice's
//! image (`container/`) runs `sluice --kafka-env`, which reads these pairs after the
//! properties file, so a variable overrides the file.

/// Variables with the `KAFKA_` prefix that the images use for themselves, never as settings.
const NOT_SETTINGS: &[&str] = &[
    "KAFKA_VERSION",
    "KAFKA_HEAP_OPTS",
    "KAFKA_LOG4J_OPTS",
    "KAFKA_OPTS",
    "KAFKA_JMX_OPTS",
    "KAFKA_JMX_PORT",
    "KAFKA_JMX_HOSTNAME",
    "KAFKA_JVM_PERFORMANCE_OPTS",
    "KAFKA_GC_LOG_OPTS",
    "KAFKA_LOG4J_ROOT_LOGLEVEL",
    "KAFKA_LOG4J_LOGGERS",
    "KAFKA_TOOLS_LOG4J_LOGLEVEL",
];

/// The property a variable names, or None when it is not a setting.
pub fn property_name(variable: &str) -> Option<String> {
    let rest = variable.strip_prefix("KAFKA_")?;
    if rest.is_empty() || NOT_SETTINGS.contains(&variable) {
        return None;
    }
    let dotted = rest.to_ascii_lowercase().replace('_', ".");
    Some(dotted.replace("...", "-").replace("..", "_"))
}

/// The settings among `variables` (name, value), sorted by property name so that the result
/// does not depend on the environment's order.
pub fn properties_from_env(
    variables: impl IntoIterator<Item = (String, String)>,
) -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = variables
        .into_iter()
        .filter_map(|(name, value)| property_name(&name).map(|key| (key, value)))
        .collect();
    pairs.sort();
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_names_as_the_kafka_images_do() {
        assert_eq!(
            property_name("KAFKA_LISTENERS").as_deref(),
            Some("listeners")
        );
        assert_eq!(
            property_name("KAFKA_LOG_FLUSH_INTERVAL_MESSAGES").as_deref(),
            Some("log.flush.interval.messages")
        );
        assert_eq!(
            property_name("KAFKA_LISTENER_NAME_BROKER_SCRAM___SHA___256_SASL__JAAS_CONFIG")
                .as_deref(),
            Some("listener.name.broker.scram-sha-256.sasl_jaas.config")
        );
        assert_eq!(property_name("KAFKA_HEAP_OPTS"), None);
        assert_eq!(property_name("CLUSTER_ID"), None);
        assert_eq!(property_name("KAFKA_"), None);
    }

    #[test]
    fn keeps_only_settings_in_name_order() {
        let env = [
            ("KAFKA_NODE_ID", "1"),
            ("PATH", "/bin"),
            ("KAFKA_BROKER_ID", "1"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(
            properties_from_env(env),
            [
                ("broker.id".to_string(), "1".to_string()),
                ("node.id".into(), "1".into())
            ]
        );
    }
}
