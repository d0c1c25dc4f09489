//! Tests of the broker settings table: its rows against their own checks, the topic table and
//! `config/server.properties`, and what dynamic updates may change.

use std::collections::BTreeMap;

use super::*;
use crate::config::parse_properties;

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn table_is_sorted_and_every_default_passes_its_own_check() {
    assert!(BROKER.windows(2).all(|w| w[0].name < w[1].name));
    assert!(settings().windows(2).all(|w| w[0].name < w[1].name));
    for setting in settings() {
        if let Some(default) = setting.default() {
            let mut config = Config::default();
            assert!(
                setting.apply(&mut config, default).is_ok(),
                "{}: default {default}",
                setting.name
            );
        }
        assert_eq!(find(setting.name).map(|s| s.name), Some(setting.name));
    }
    assert!(find("no.such.key").is_none());
}

#[test]
fn the_dynamic_rows_are_exactly_the_topic_configs_broker_synonyms() {
    for setting in settings() {
        assert_eq!(
            setting.update == Update::Dynamic,
            topic::broker_synonym(setting.name).is_some(),
            "{}",
            setting.name
        );
    }
    for def in topic::TOPIC_CONFIGS {
        for (key, _) in def.synonyms {
            if topic::broker_synonym(key).is_some() {
                assert!(find(key).is_some(), "{key} has no row");
            }
        }
    }
    // A synonym takes its default from its topic config, in that config's unit only.
    assert_eq!(
        find("log.segment.bytes").unwrap().default(),
        Some("1073741824")
    );
    assert_eq!(find("log.retention.hours").unwrap().default(), None);
    assert_eq!(
        find("log.retention.ms").unwrap().default(),
        Some("604800000")
    );
}

/// What `f` logs, as text.
fn logged(f: impl FnOnce()) -> String {
    #[derive(Clone, Default)]
    struct Buffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
    impl std::io::Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let writer = buffer.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    tracing::subscriber::with_default(subscriber, f);
    let bytes = buffer.0.lock().unwrap().clone();
    String::from_utf8(bytes).unwrap()
}

#[test]
fn ignored_keys_are_accepted_logged_and_change_nothing() {
    let ignored: Vec<&str> = settings()
        .iter()
        .filter(|s| !s.is_used())
        .map(|s| s.name)
        .collect();
    assert!(ignored.contains(&"process.roles") && ignored.contains(&"num.io.threads"));
    for key in ignored {
        let log = logged(|| {
            let config = Config::from_pairs(&[(key.to_string(), "anything at all".to_string())])
                .unwrap_or_else(|e| panic!("{key}: {e}"));
            assert_eq!(config.node_id, Config::default().node_id);
        });
        assert!(
            log.contains("ignoring Kafka setting") && log.contains(key),
            "{key}: {log}"
        );
    }
    let log = logged(|| {
        Config::from_pairs(&[("no.such.key".to_string(), "1".to_string())]).unwrap();
    });
    assert!(log.contains("ignoring unknown setting"), "{log}");
}

#[test]
fn a_bad_static_value_is_refused_naming_the_key() {
    for (key, value) in [
        ("log.segment.bytes", "13"),
        ("log.retention.hours", "-2"),
        ("log.cleaner.min.cleanable.ratio", "2"),
        ("log.cleanup.policy", "shred"),
        ("compression.type", "brotli"),
        ("num.partitions", "0"),
        ("sluice.quota.request.percentage.default", "0"),
    ] {
        let pairs = [(key.to_string(), value.to_string())];
        let err = Config::from_pairs(&pairs).unwrap_err();
        assert!(err.0.starts_with(key), "{key}={value}: {err}");
    }
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
        "Cannot update these configs dynamically: [num.partitions]"
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
    assert!(matches!(
        check(&map(&[("sluice.max.partitions.per.topic", "5")])),
        Err(BrokerConfigError::NotDynamicInSluice(_))
    ));
    assert!(matches!(
        check(&map(&[("sluice.no.such.key", "5")])),
        Err(BrokerConfigError::NotDynamicInSluice(_))
    ));
    // Static in Kafka, whether sluice uses the key or ignores it.
    for key in ["broker.id", "log.cleaner.enable", "listeners"] {
        assert!(
            matches!(
                check(&map(&[(key, "1")])),
                Err(BrokerConfigError::NotDynamic(_))
            ),
            "{key}"
        );
        assert!(!is_dynamic(key), "{key}");
    }
    assert!(is_dynamic("log.segment.bytes") && is_dynamic("num.io.threads"));
}

#[test]
fn server_properties_lists_every_used_key_with_the_tables_default() {
    let file = parse_properties(include_str!("../../config/server.properties"));
    for (key, value) in &file {
        let setting = find(key).unwrap_or_else(|| panic!("{key} is not in the table"));
        assert!(setting.is_used(), "{key} is ignored by sluice");
        let default = match topic::broker_synonym(key) {
            // A synonym in another unit: the value in the topic config's unit.
            Some((def, factor)) if factor != 1 => {
                let converted = value.parse::<i64>().unwrap() * factor;
                assert_eq!(converted.to_string(), def.default, "{key}");
                continue;
            }
            _ => setting.default(),
        };
        assert_eq!(default, Some(value.as_str()), "{key}");
    }
    for setting in settings() {
        let listed = file.iter().any(|(k, _)| k == setting.name);
        let synonym = topic::broker_synonym(setting.name).is_some();
        if setting.is_used() && !synonym && setting.default().is_some() {
            assert!(listed, "{} is missing from server.properties", setting.name);
        }
    }
}
