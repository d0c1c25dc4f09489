//! Tests of reading settings: defaults, Kafka's keys, listeners (names, protocols, advertised
//! endpoints, per-listener and per-mechanism values), malformed values and the properties
//! parser.

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
    assert_eq!(c.listeners.len(), 1);
    assert_eq!(
        c.listeners[0].bind,
        Endpoint {
            host: "127.0.0.1".into(),
            port: 9092
        }
    );
    assert_eq!(c.listeners[0].protocol, SecurityProtocol::Plaintext);
    assert_eq!(c.topic_values().i64("segment.bytes"), 1_073_741_824);
    assert_eq!(c.topic_values().i64("max.message.bytes"), 1_048_588);
    assert_eq!(c.log_dir, PathBuf::from("./data"));
}

#[test]
fn reads_kafka_keys_and_advertises_listener() {
    let c = Config::from_pairs(&pairs(&[
        ("listeners", "PLAINTEXT://:19092,CONTROLLER://:19093"),
        ("controller.listener.names", "CONTROLLER"),
        ("log.roll.hours", "2"),
        ("log.dirs", "/tmp/a,/tmp/b"),
        ("process.roles", "broker,controller"),
    ]))
    .unwrap();
    assert_eq!(
        c.listeners.len(),
        1,
        "the controller listener is not served"
    );
    assert_eq!(c.listeners[0].bind.port, 19092);
    assert_eq!(c.listeners[0].bind.host, "0.0.0.0");
    assert_eq!(c.listeners[0].advertised.host, "127.0.0.1");
    assert_eq!(c.topic_values().i64("segment.ms"), 7_200_000);
    assert_eq!(c.log_dir, PathBuf::from("/tmp/a"));
}

#[test]
fn serves_every_listener_but_controllers_with_its_advertised_endpoint() {
    // The settings Testcontainers' KafkaContainer gives the apache/kafka image, and an SSL
    // listener besides.
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
        ("inter.broker.listener.name", "BROKER"),
        (
            "advertised.listeners",
            "PLAINTEXT://localhost:32768,BROKER://c0ffee:9093",
        ),
    ]))
    .unwrap();
    let served: Vec<(&str, String, SecurityProtocol, String)> = c
        .listeners
        .iter()
        .map(|l| {
            let (bind, advertised) = (l.bind.to_string(), l.advertised.to_string());
            (l.name.as_str(), bind, l.protocol, advertised)
        })
        .collect();
    let plaintext = SecurityProtocol::Plaintext;
    assert_eq!(
        served,
        [
            (
                "PLAINTEXT",
                "0.0.0.0:9092".into(),
                plaintext,
                "localhost:32768".into()
            ),
            (
                "BROKER",
                "0.0.0.0:9093".into(),
                plaintext,
                "c0ffee:9093".into()
            ),
            (
                "SECURE",
                "0.0.0.0:9095".into(),
                SecurityProtocol::Ssl,
                "127.0.0.1:9095".into()
            ),
        ]
    );
}

#[test]
fn http_listener_is_never_a_kafka_listeners_port() {
    let listeners = ("listeners", "PLAINTEXT://127.0.0.1:19092,SSL://:19093");
    let c = Config::from_pairs(&pairs(&[listeners, ("sluice.http.listener", ":19094")])).unwrap();
    assert_eq!(c.http_listener.unwrap().to_string(), "0.0.0.0:19094");
    for taken in ["127.0.0.1:19092", "http://0.0.0.0:19093"] {
        let err =
            Config::from_pairs(&pairs(&[listeners, ("sluice.http.listener", taken)])).unwrap_err();
        assert!(err.0.contains("is the port of Kafka listener"), "{err}");
    }
    let c = Config::from_pairs(&pairs(&[listeners, ("sluice.http.listener", "")])).unwrap();
    assert_eq!(c.http_listener, None);
}

#[test]
fn malformed_value_names_the_key() {
    let err = Config::from_pairs(&pairs(&[("log.segment.bytes", "lots")])).unwrap_err();
    assert!(err.0.contains("log.segment.bytes"), "{err}");
    let err = Config::from_pairs(&pairs(&[("auto.create.topics.enable", "yes")])).unwrap_err();
    assert!(err.0.contains("auto.create.topics.enable"), "{err}");
}

#[test]
fn several_listeners_with_protocols_advertised_by_name() {
    let c = Config::from_pairs(&pairs(&[
        (
            "listeners",
            "INTERNAL://127.0.0.1:0,sasl_ssl://0.0.0.0:9094,SSL://:9093",
        ),
        (
            "advertised.listeners",
            "SASL_SSL://broker.example:19094,INTERNAL://127.0.0.1:0",
        ),
        (
            "listener.security.protocol.map",
            "INTERNAL:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL",
        ),
        ("inter.broker.listener.name", "INTERNAL"),
        ("listener.name.sasl_ssl.ssl.client.auth", "required"),
        ("ssl.client.auth", "requested"),
        (
            "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config",
            "x required;",
        ),
    ]))
    .unwrap();
    let names: Vec<_> = c.listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["INTERNAL", "SASL_SSL", "SSL"]);
    assert_eq!(c.listeners[0].protocol, SecurityProtocol::SaslPlaintext);
    assert_eq!(c.listeners[1].advertised.host, "broker.example");
    assert_eq!(c.listeners[2].advertised.host, "127.0.0.1");
    assert_eq!(c.listeners[2].bind.host, "0.0.0.0");
    assert_eq!(
        c.listener_value("SASL_SSL", "ssl.client.auth"),
        Some("required")
    );
    assert_eq!(
        c.listener_value("SSL", "ssl.client.auth"),
        Some("requested")
    );
    assert_eq!(
        c.mechanism_only_value("SASL_SSL", "SCRAM-SHA-256", "sasl.jaas.config"),
        Some("x required;")
    );
    assert_eq!(
        c.mechanism_value("SASL_SSL", "PLAIN", "ssl.client.auth"),
        Some("required")
    );
    for bad in [
        vec![("listeners", "FOO://:1")],
        vec![("listeners", "PLAINTEXT://:1,PLAINTEXT://:2")],
        vec![("advertised.listeners", "SSL://h:1")],
        vec![
            ("inter.broker.listener.name", "PLAINTEXT"),
            ("security.inter.broker.protocol", "PLAINTEXT"),
        ],
        vec![("inter.broker.listener.name", "NOPE")],
    ] {
        assert!(Config::from_pairs(&pairs(&bad)).is_err(), "{bad:?}");
    }
}

#[test]
fn properties_parser_skips_comments() {
    let p = parse_properties("# c\n! c\n\na=1\nb : two\n");
    assert_eq!(
        p,
        vec![("a".into(), "1".into()), ("b".into(), "two".into())]
    );
}
