//! TLS listeners over real sockets: PEM key stores in files and inline, PKCS12 stores,
//! `ssl.client.auth=required`, produce and fetch over TLS (fetched records go through the
//! bounded encryption buffer, larger than one chunk here), SASL_SSL, and the bad inputs:
//! a plaintext client on the TLS port, garbage instead of a handshake, a client without the
//! required certificate. Each is closed, and other connections are served. Certificates are
//! reloaded when their files change, without dropping established connections.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use common::data::{fetch_request, produce_request};
use common::secure::{plain, tls, tls_connector, Issued, TestCa, TlsConn};
use common::TestBroker;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tokio::io::AsyncWriteExt;

struct Setup {
    _dir: tempfile::TempDir,
    ca: TestCa,
    key_file: String,
    overrides: Vec<(String, String)>,
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// A CA, a broker certificate in a PEM key store file, the CA as PEM trust store, and three
/// listeners: PLAINTEXT, SSL requiring client certificates, SASL_SSL without them.
fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new();
    let server = ca.issue("broker", "sluice");
    let key_file = write(
        dir.path(),
        "broker.pem",
        &format!("{}{}", server.key_pem, server.cert_pem),
    );
    let trust_file = write(dir.path(), "ca.pem", &ca.pem());
    let overrides = [
        ("listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0"),
        ("ssl.keystore.type", "PEM"),
        ("ssl.keystore.location", key_file.as_str()),
        ("ssl.truststore.type", "PEM"),
        ("ssl.truststore.location", trust_file.as_str()),
        ("ssl.client.auth", "required"),
        ("listener.name.sasl_ssl.ssl.client.auth", "none"),
        ("sasl.enabled.mechanisms", "PLAIN"),
        (
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";"#,
        ),
        ("sluice.ssl.file.check.interval.ms", "100"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    Setup {
        _dir: dir,
        ca,
        key_file,
        overrides,
    }
}

async fn start(overrides: &[(String, String)]) -> TestBroker {
    let pairs: Vec<(&str, &str)> = overrides
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    TestBroker::start(&pairs).await
}

fn addr(broker: &TestBroker, listener: &str) -> SocketAddr {
    broker
        .broker
        .as_ref()
        .unwrap()
        .listener_addr(listener)
        .unwrap()
}

async fn api_versions(conn: &mut TlsConn) -> Option<ApiVersionsResponse> {
    conn.try_call(ApiKey::ApiVersions, 2, &ApiVersionsRequest::default())
        .await
}

fn peer_cn(conn: &TlsConn) -> String {
    let certs = conn.stream.get_ref().1.peer_certificates().unwrap();
    sluice::security::principal_mapping::subject_dn(certs[0].as_ref()).unwrap()
}

#[tokio::test]
async fn produce_and_fetch_over_tls_with_a_client_certificate() {
    let s = setup();
    let broker = start(&s.overrides).await;
    let client = s.ca.issue("alice", "eng");
    let connector = tls_connector(&s.ca.pem(), Some(&client));
    let mut conn = tls(addr(&broker, "SSL"), &connector).await.unwrap();
    assert_eq!(peer_cn(&conn), "CN=broker,OU=sluice");
    let md: MetadataResponse = conn
        .call(
            ApiKey::Metadata,
            9,
            &MetadataRequest::default()
                .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
                )
                .with_name(Some(common::data::topic_name("secure")))]))
                .with_allow_auto_topic_creation(true),
        )
        .await;
    assert_eq!(md.topics[0].error_code, 0);
    assert_eq!(
        md.brokers[0].port,
        i32::from(addr(&broker, "SSL").port()),
        "the SSL listener is advertised"
    );
    // Batches that together exceed one encryption chunk (64 KiB).
    let mut sent = Vec::new();
    for i in 0..4 {
        let batch = common::sized_batch(10, 4000 + i);
        let response: ProduceResponse = conn
            .call(
                ApiKey::Produce,
                9,
                &produce_request(-1, "secure", 0, batch.clone()),
            )
            .await;
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
        sent.push(batch);
    }
    let mut fetched: FetchResponse = conn
        .call(
            ApiKey::Fetch,
            12,
            &fetch_request("secure", 0, 0, 100, 10 << 20),
        )
        .await;
    let records = fetched
        .responses
        .remove(0)
        .partitions
        .remove(0)
        .records
        .unwrap();
    assert_eq!(common::data::decode_offsets_and_values(records).len(), 40);
}

#[tokio::test]
async fn bad_tls_input_is_closed_and_others_are_served() {
    let s = setup();
    let broker = start(&s.overrides).await;
    let ssl = addr(&broker, "SSL");
    let client = s.ca.issue("alice", "eng");
    let connector = tls_connector(&s.ca.pem(), Some(&client));
    let mut good = tls(ssl, &connector).await.unwrap();
    assert!(api_versions(&mut good).await.is_some());

    // A plaintext Kafka request on the TLS port.
    let mut plaintext = plain(ssl).await;
    let sent: Option<ApiVersionsResponse> = plaintext
        .try_call(ApiKey::ApiVersions, 2, &ApiVersionsRequest::default())
        .await;
    assert!(sent.is_none());
    // Garbage where a ClientHello belongs.
    let mut garbage = plain(ssl).await;
    let _ = garbage
        .stream
        .write_all(&[0x16, 0x03, 0x01, 0xff, 0xff, 1, 2, 3, 4, 5, 6, 7, 8])
        .await;
    let _ = garbage.stream.write_all(&[0u8; 4096]).await;
    assert!(garbage.is_closed().await);
    // No client certificate where one is required.
    let anonymous = tls_connector(&s.ca.pem(), None);
    let refused = match tls(ssl, &anonymous).await {
        Err(_) => true,
        Ok(mut conn) => api_versions(&mut conn).await.is_none(),
    };
    assert!(refused, "a client without a certificate is refused");
    // A certificate from another CA.
    let stranger = TestCa::new().issue("mallory", "evil");
    let forged = tls_connector(&s.ca.pem(), Some(&stranger));
    let refused = match tls(ssl, &forged).await {
        Err(_) => true,
        Ok(mut conn) => api_versions(&mut conn).await.is_none(),
    };
    assert!(
        refused,
        "a certificate the trust store does not sign is refused"
    );

    assert!(
        api_versions(&mut good).await.is_some(),
        "the first connection was not disturbed"
    );
    let mut plain_listener = plain(addr(&broker, "PLAINTEXT")).await;
    let md: MetadataResponse = plain_listener
        .call(ApiKey::Metadata, 9, &MetadataRequest::default())
        .await;
    assert_eq!(
        md.brokers[0].port,
        i32::from(addr(&broker, "PLAINTEXT").port())
    );
}

#[tokio::test]
async fn sasl_ssl_authenticates_over_tls() {
    let s = setup();
    let broker = start(&s.overrides).await;
    let connector = tls_connector(&s.ca.pem(), None);
    let mut conn = tls(addr(&broker, "SASL_SSL"), &connector).await.unwrap();
    let hs: SaslHandshakeResponse = conn
        .call(
            ApiKey::SaslHandshake,
            1,
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        )
        .await;
    assert_eq!(hs.error_code, 0);
    let auth: SaslAuthenticateResponse = conn
        .call(
            ApiKey::SaslAuthenticate,
            2,
            &SaslAuthenticateRequest::default()
                .with_auth_bytes(Bytes::from_static(b"\0alice\0alice-secret")),
        )
        .await;
    assert_eq!(auth.error_code, 0);
    let md: MetadataResponse = conn
        .call(ApiKey::Metadata, 9, &MetadataRequest::default())
        .await;
    assert_eq!(
        md.brokers[0].port,
        i32::from(addr(&broker, "SASL_SSL").port())
    );
}

#[tokio::test]
async fn changed_certificates_are_used_by_new_connections_only() {
    let s = setup();
    let broker = start(&s.overrides).await;
    let ssl = addr(&broker, "SSL");
    let client = s.ca.issue("alice", "eng");
    let connector = tls_connector(&s.ca.pem(), Some(&client));
    let mut old = tls(ssl, &connector).await.unwrap();
    assert_eq!(peer_cn(&old), "CN=broker,OU=sluice");
    let renewed = s.ca.issue("broker-renewed", "sluice");
    std::fs::write(
        &s.key_file,
        format!("{}{}", renewed.key_pem, renewed.cert_pem),
    )
    .unwrap();
    let mut seen = String::new();
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let conn = tls(ssl, &connector).await.unwrap();
        seen = peer_cn(&conn);
        if seen.contains("renewed") {
            break;
        }
    }
    assert_eq!(seen, "CN=broker-renewed,OU=sluice");
    assert!(
        api_versions(&mut old).await.is_some(),
        "the established connection keeps working"
    );
    // A store that no longer loads keeps the one in force.
    std::fs::write(&s.key_file, "not a key").unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    let conn = tls(ssl, &connector).await.unwrap();
    assert_eq!(peer_cn(&conn), "CN=broker-renewed,OU=sluice");
}

fn pkcs12(issued: &Issued, ca: &TestCa, password: &str) -> Vec<u8> {
    let chain = vec![
        p12_keystore::Certificate::from_der(&issued.cert_der).unwrap(),
        p12_keystore::Certificate::from_der(ca.cert.der()).unwrap(),
    ];
    let entry = p12_keystore::PrivateKeyChain::new(issued.key_der.clone(), [1u8; 20], chain);
    let mut store = p12_keystore::KeyStore::new();
    store.add_entry(
        "broker",
        p12_keystore::KeyStoreEntry::PrivateKeyChain(entry),
    );
    store.writer(password).write().unwrap()
}

#[tokio::test]
async fn pkcs12_and_inline_pem_stores() {
    let s = setup();
    let dir = tempfile::tempdir().unwrap();
    let server = s.ca.issue("p12-broker", "sluice");
    let p12_path = dir.path().join("broker.p12");
    std::fs::write(&p12_path, pkcs12(&server, &s.ca, "changeit")).unwrap();
    let p12 = p12_path.display().to_string();
    let inline = s.ca.issue("inline-broker", "sluice");
    // PEM written over continuation lines in server.properties, read by the properties reader.
    let properties = format!(
        "ssl.keystore.type=PEM\nssl.keystore.key={}\nssl.keystore.certificate.chain={}\n",
        inline.key_pem.trim().replace('\n', " \\\n    "),
        inline.cert_pem.trim().replace('\n', " \\\n    ")
    );
    let mut overrides: Vec<(String, String)> = vec![
        (
            "listeners".into(),
            "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0".into(),
        ),
        (
            "listener.name.sasl_ssl.ssl.keystore.type".into(),
            "PKCS12".into(),
        ),
        ("listener.name.sasl_ssl.ssl.keystore.location".into(), p12),
        (
            "listener.name.sasl_ssl.ssl.keystore.password".into(),
            "changeit".into(),
        ),
        ("sasl.enabled.mechanisms".into(), "PLAIN".into()),
        (
            "listener.name.sasl_ssl.plain.sasl.jaas.config".into(),
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b";"#
                .into(),
        ),
    ];
    overrides.extend(sluice::config::parse_properties(&properties));
    let broker = start(&overrides).await;
    let connector = tls_connector(&s.ca.pem(), None);
    let conn = tls(addr(&broker, "SASL_SSL"), &connector).await.unwrap();
    assert_eq!(peer_cn(&conn), "CN=p12-broker,OU=sluice");
    let mut conn = tls(addr(&broker, "SSL"), &connector).await.unwrap();
    assert_eq!(peer_cn(&conn), "CN=inline-broker,OU=sluice");
    assert!(api_versions(&mut conn).await.is_some());
    // A wrong store password stops start-up, naming the store.
    let mut bad = overrides.clone();
    bad.push((
        "listener.name.sasl_ssl.ssl.keystore.password".into(),
        "wrong".into(),
    ));
    let config_pairs: Vec<(String, String)> = bad
        .iter()
        .cloned()
        .chain([(
            "log.dirs".to_string(),
            dir.path().join("data").display().to_string(),
        )])
        .collect();
    let config = sluice::config::Config::from_pairs(&config_pairs).unwrap();
    let err = sluice::server::start(config, std::sync::Arc::new(sluice::time::SystemClock))
        .await
        .err()
        .unwrap();
    assert!(err.to_string().contains("broker.p12"), "{err}");
}
