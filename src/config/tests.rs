//! Tests of reading settings: defaults, Kafka's keys, listeners, malformed values and the
//! properties parser.

use super::*;

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn defaults_are_kafkas_with_embedded_listener() {
    let c = Config::from_pairs(&[]).unwrap();
    assert_eq!(
        c.listener,
        Endpoint {
            host: "127.0.0.1".into(),
            port: 9092
        }
    );
    assert_eq!(c.topic_values().i64("segment.bytes"), 1_073_741_824);
    assert_eq!(c.topic_values().i64("max.message.bytes"), 1_048_588);
    assert_eq!(c.log_dir, PathBuf::from("./data"));
}

#[test]
fn reads_kafka_keys_and_advertises_listener() {
    let c = Config::from_pairs(&pairs(&[
        ("listeners", "PLAINTEXT://:19092,CONTROLLER://:19093"),
        ("log.roll.hours", "2"),
        ("log.dirs", "/tmp/a,/tmp/b"),
        ("process.roles", "broker,controller"),
    ]))
    .unwrap();
    assert_eq!(c.listener.port, 19092);
    assert_eq!(c.listener.host, "0.0.0.0");
    assert_eq!(c.advertised_listener.host, "127.0.0.1");
    assert_eq!(c.topic_values().i64("segment.ms"), 7_200_000);
    assert_eq!(c.log_dir, PathBuf::from("/tmp/a"));
}

#[test]
fn serves_every_plaintext_listener_but_controllers_with_its_advertised_endpoint() {
    let c = Config::from_pairs(&pairs(&[
        (
            "listeners",
            "PLAINTEXT://0.0.0.0:9092,BROKER://0.0.0.0:9093,CONTROLLER://0.0.0.0:9094,SECURE://:9095",
        ),
        (
            "listener.security.protocol.map",
            "BROKER:PLAINTEXT,PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SECURE:SSL",
        ),
        ("controller.listener.names", "CONTROLLER"),
        (
            "advertised.listeners",
            "PLAINTEXT://localhost:32768,BROKER://c0ffee:9093",
        ),
    ]))
    .unwrap();
    let served: Vec<(String, String, String)> = c
        .served_listeners
        .iter()
        .map(|(l, a)| (l.name.clone(), l.endpoint.to_string(), a.to_string()))
        .collect();
    assert_eq!(
        served,
        [
            (
                "PLAINTEXT".into(),
                "0.0.0.0:9092".into(),
                "localhost:32768".into()
            ),
            ("BROKER".into(), "0.0.0.0:9093".into(), "c0ffee:9093".into()),
        ]
    );
    assert_eq!(c.advertised_listener.to_string(), "localhost:32768");
}

#[test]
fn malformed_value_names_the_key() {
    let err = Config::from_pairs(&pairs(&[("log.segment.bytes", "lots")])).unwrap_err();
    assert!(err.0.contains("log.segment.bytes"), "{err}");
    let err = Config::from_pairs(&pairs(&[("auto.create.topics.enable", "yes")])).unwrap_err();
    assert!(err.0.contains("auto.create.topics.enable"), "{err}");
}

#[test]
fn properties_parser_skips_comments() {
    let p = parse_properties("# c\n! c\n\na=1\nb : two\n");
    assert_eq!(
        p,
        vec![("a".into(), "1".into()), ("b".into(), "two".into())]
    );
}
