//! The SASL state machine over real sockets, as Kafka answers it: PLAIN and SCRAM over
//! SaslHandshake v1 + SaslAuthenticate and over a v0 handshake's raw tokens; wrong passwords,
//! unknown users and unknown mechanisms (the error, then the connection closes); requests
//! before authentication (closed); oversized tokens (closed); SCRAM credentials through
//! AlterUserScramCredentials that survive a restart; OAUTHBEARER's unsecured tokens and
//! their JSON challenge; re-authentication and expired sessions (KIP-368). Other connections
//! are served throughout.

mod common;

use std::net::SocketAddr;

use base64::engine::general_purpose::{STANDARD as BASE64, URL_SAFE_NO_PAD};
use base64::Engine;
use bytes::Bytes;
use common::secure::{plain, Conn};
use common::TestBroker;
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use ring::{digest, hmac};
use sluice::security::scram::{salted_password, ScramMechanism};
use tokio::net::TcpStream;

const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#;

fn overrides(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut all = vec![
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        ),
        (
            "sasl.enabled.mechanisms",
            "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
        ),
        ("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS),
        ("connection.failed.authentication.delay.ms", "10"),
    ];
    all.extend_from_slice(extra);
    all
}

fn sasl_addr(broker: &TestBroker) -> SocketAddr {
    broker
        .broker
        .as_ref()
        .unwrap()
        .listener_addr("SASL_PLAINTEXT")
        .unwrap()
}

fn plaintext_addr(broker: &TestBroker) -> SocketAddr {
    broker
        .broker
        .as_ref()
        .unwrap()
        .listener_addr("PLAINTEXT")
        .unwrap()
}

async fn handshake(
    conn: &mut Conn<TcpStream>,
    mechanism: &str,
    version: i16,
) -> SaslHandshakeResponse {
    let request =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into()));
    conn.call(ApiKey::SaslHandshake, version, &request).await
}

async fn authenticate(
    conn: &mut Conn<TcpStream>,
    token: &[u8],
) -> Option<SaslAuthenticateResponse> {
    let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::copy_from_slice(token));
    conn.try_call(ApiKey::SaslAuthenticate, 2, &request).await
}

async fn metadata(conn: &mut Conn<TcpStream>) -> Option<MetadataResponse> {
    conn.try_call(ApiKey::Metadata, 12, &MetadataRequest::default())
        .await
}

async fn plain_login(addr: SocketAddr, user: &str, password: &str) -> Conn<TcpStream> {
    let mut conn = plain(addr).await;
    let versions: ApiVersionsResponse = conn
        .call(
            ApiKey::ApiVersions,
            3,
            &ApiVersionsRequest::default()
                .with_client_software_name(StrBytes::from_static_str("sluice-test"))
                .with_client_software_version(StrBytes::from_static_str("1")),
        )
        .await;
    assert_eq!(versions.error_code, 0);
    let hs = handshake(&mut conn, "PLAIN", 1).await;
    assert_eq!(hs.error_code, 0);
    let token = format!("\0{user}\0{password}");
    let auth = authenticate(&mut conn, token.as_bytes()).await.unwrap();
    assert_eq!(auth.error_code, 0, "{:?}", auth.error_message);
    conn
}

#[tokio::test]
async fn plain_logs_in_and_refuses_what_kafka_refuses() {
    let broker = TestBroker::start(&overrides(&[])).await;
    let addr = sasl_addr(&broker);
    let mut alice = plain_login(addr, "alice", "alice-secret").await;
    let md = metadata(&mut alice).await.unwrap();
    assert_eq!(
        md.brokers[0].port,
        i32::from(addr.port()),
        "the SASL listener is advertised to its clients"
    );
    let mut other = plain(plaintext_addr(&broker)).await;
    let md = metadata(&mut other).await.unwrap();
    assert_eq!(
        md.brokers[0].port,
        i32::from(plaintext_addr(&broker).port())
    );

    // A wrong password and an unknown user get the same answer, then the connection closes.
    for (user, password) in [("alice", "wrong"), ("mallory", "alice-secret")] {
        let mut conn = plain(addr).await;
        assert_eq!(handshake(&mut conn, "PLAIN", 1).await.error_code, 0);
        let auth = authenticate(&mut conn, format!("\0{user}\0{password}").as_bytes())
            .await
            .unwrap();
        assert_eq!(auth.error_code, 58);
        assert_eq!(
            auth.error_message.as_deref(),
            Some("Authentication failed: Invalid username or password")
        );
        assert!(conn.is_closed().await);
    }
    // An unknown mechanism: the enabled list, then closed.
    let mut conn = plain(addr).await;
    let hs = handshake(&mut conn, "GSSAPI", 1).await;
    assert_eq!(hs.error_code, 33);
    let names: Vec<&str> = hs.mechanisms.iter().map(|m| m.as_str()).collect();
    assert_eq!(
        names,
        ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"]
    );
    assert!(conn.is_closed().await);
    // A request before authentication closes the connection, unanswered.
    let mut conn = plain(addr).await;
    assert!(metadata(&mut conn).await.is_none());
    // So does one in the middle of the exchange.
    let mut conn = plain(addr).await;
    assert_eq!(handshake(&mut conn, "PLAIN", 1).await.error_code, 0);
    assert!(metadata(&mut conn).await.is_none());
    // A token larger than sasl.server.max.receive.size closes it before it is read.
    let mut conn = plain(addr).await;
    let mut huge = vec![0u8; 4];
    huge[..4].copy_from_slice(&600_000i32.to_be_bytes());
    conn.send_raw_frame(&huge[..0]).await;
    let _ = tokio::io::AsyncWriteExt::write_all(&mut conn.stream, &huge).await;
    assert!(conn.is_closed().await);
    // After authentication, SaslHandshake is answered ILLEGAL_SASL_STATE; on PLAINTEXT too.
    assert_eq!(handshake(&mut alice, "PLAIN", 1).await.error_code, 34);
    assert_eq!(handshake(&mut other, "PLAIN", 1).await.error_code, 34);
    // The first connection was never disturbed.
    assert!(metadata(&mut alice).await.is_some());
}

#[tokio::test]
async fn a_v0_handshake_carries_raw_tokens() {
    let broker = TestBroker::start(&overrides(&[])).await;
    let addr = sasl_addr(&broker);
    let mut conn = plain(addr).await;
    assert_eq!(handshake(&mut conn, "PLAIN", 0).await.error_code, 0);
    conn.send_raw_frame(b"\0admin\0admin-secret").await;
    assert_eq!(
        conn.read_frame().await.unwrap().len(),
        0,
        "PLAIN's empty answer, framed"
    );
    assert!(metadata(&mut conn).await.is_some());
    // A failure over raw tokens just closes.
    let mut conn = plain(addr).await;
    assert_eq!(handshake(&mut conn, "PLAIN", 0).await.error_code, 0);
    conn.send_raw_frame(b"\0admin\0nope").await;
    assert!(conn.read_frame().await.is_none());
}

/// The client side of SCRAM; returns the authenticate responses' error of the last step.
async fn scram_login(
    conn: &mut Conn<TcpStream>,
    m: ScramMechanism,
    user: &str,
    password: &str,
) -> SaslAuthenticateResponse {
    assert_eq!(handshake(conn, m.name(), 1).await.error_code, 0);
    let client_nonce = "fyko+d2lbbFgONRv9qkxdawL";
    let bare = format!("n={user},r={client_nonce}");
    let first = authenticate(conn, format!("n,,{bare}").as_bytes())
        .await
        .unwrap();
    if first.error_code != 0 {
        return first;
    }
    let server_first = String::from_utf8(first.auth_bytes.to_vec()).unwrap();
    let fields: Vec<&str> = server_first.split(',').collect();
    let nonce = fields[0].strip_prefix("r=").unwrap();
    assert!(nonce.starts_with(client_nonce));
    let salt = BASE64
        .decode(fields[1].strip_prefix("s=").unwrap())
        .unwrap();
    let iterations: i32 = fields[2].strip_prefix("i=").unwrap().parse().unwrap();
    let (alg, dig) = match m {
        ScramMechanism::Sha256 => (hmac::HMAC_SHA256, &digest::SHA256),
        ScramMechanism::Sha512 => (hmac::HMAC_SHA512, &digest::SHA512),
    };
    let salted = salted_password(m, password, &salt, iterations);
    let client_key = hmac::sign(&hmac::Key::new(alg, &salted), b"Client Key");
    let stored_key = digest::digest(dig, client_key.as_ref());
    let without_proof = format!("c=biws,r={nonce}");
    let auth_message = format!("{bare},{server_first},{without_proof}");
    let signature = hmac::sign(
        &hmac::Key::new(alg, stored_key.as_ref()),
        auth_message.as_bytes(),
    );
    let proof: Vec<u8> = client_key
        .as_ref()
        .iter()
        .zip(signature.as_ref())
        .map(|(a, b)| a ^ b)
        .collect();
    let last = authenticate(
        conn,
        format!("{without_proof},p={}", BASE64.encode(proof)).as_bytes(),
    )
    .await
    .unwrap();
    if last.error_code == 0 {
        let server_key = hmac::sign(&hmac::Key::new(alg, &salted), b"Server Key");
        let expected = hmac::sign(
            &hmac::Key::new(alg, server_key.as_ref()),
            auth_message.as_bytes(),
        );
        assert_eq!(
            last.auth_bytes,
            format!("v={}", BASE64.encode(expected)).as_bytes(),
            "server signature"
        );
    }
    last
}

async fn set_scram(
    addr: SocketAddr,
    user: &str,
    m: ScramMechanism,
    password: &str,
) -> AlterUserScramCredentialsResponse {
    let salt = b"a salt of sixteen".to_vec();
    let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
        ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(user.into()))
            .with_mechanism(m.id())
            .with_iterations(8192)
            .with_salt(Bytes::from(salt.clone()))
            .with_salted_password(Bytes::from(salted_password(m, password, &salt, 8192))),
    ]);
    plain(addr)
        .await
        .call(ApiKey::AlterUserScramCredentials, 0, &request)
        .await
}

#[tokio::test]
async fn scram_credentials_are_set_listed_used_and_kept() {
    let mut broker = TestBroker::start(&overrides(&[])).await;
    let altered = set_scram(
        plaintext_addr(&broker),
        "bob",
        ScramMechanism::Sha256,
        "bob-pw",
    )
    .await;
    assert_eq!(altered.results.len(), 1);
    assert_eq!(altered.results[0].error_code, 0);
    assert_eq!(
        set_scram(
            plaintext_addr(&broker),
            "bob",
            ScramMechanism::Sha512,
            "bob-512"
        )
        .await
        .results[0]
            .error_code,
        0
    );
    let described: DescribeUserScramCredentialsResponse = plain(plaintext_addr(&broker))
        .await
        .call(
            ApiKey::DescribeUserScramCredentials,
            0,
            &DescribeUserScramCredentialsRequest::default(),
        )
        .await;
    assert_eq!(described.results.len(), 1);
    let infos: Vec<(i8, i32)> = described.results[0]
        .credential_infos
        .iter()
        .map(|c| (c.mechanism, c.iterations))
        .collect();
    assert_eq!(infos, [(1, 8192), (2, 8192)]);

    for _ in 0..2 {
        let addr = sasl_addr(&broker);
        let mut conn = plain(addr).await;
        assert_eq!(
            scram_login(&mut conn, ScramMechanism::Sha256, "bob", "bob-pw")
                .await
                .error_code,
            0
        );
        assert!(metadata(&mut conn).await.is_some());
        let mut conn = plain(addr).await;
        assert_eq!(
            scram_login(&mut conn, ScramMechanism::Sha512, "bob", "bob-512")
                .await
                .error_code,
            0
        );
        // A wrong password and an unknown user: the same generic failure, at the same step.
        for (user, password) in [("bob", "guess"), ("nobody", "bob-pw")] {
            let mut conn = plain(addr).await;
            let failed = scram_login(&mut conn, ScramMechanism::Sha256, user, password).await;
            assert_eq!(failed.error_code, 58);
            assert_eq!(
                failed.error_message.as_deref(),
                Some("Authentication failed during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-256")
            );
            assert!(conn.is_closed().await);
        }
        broker.restart().await;
    }
}

#[tokio::test]
async fn scram_alter_refuses_as_kafka_does() {
    let broker = TestBroker::start(&overrides(&[])).await;
    let upsert = |name: &str, m: i8, iterations: i32| {
        ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(name.into()))
            .with_mechanism(m)
            .with_iterations(iterations)
            .with_salt(Bytes::from_static(b"salt"))
            .with_salted_password(Bytes::from_static(b"0123456789abcdef0123456789abcdef"))
    };
    let request = AlterUserScramCredentialsRequest::default()
        .with_deletions(vec![
            alter_user_scram_credentials_request::ScramCredentialDeletion::default()
                .with_name(StrBytes::from_static_str("ghost"))
                .with_mechanism(1),
        ])
        .with_upsertions(vec![
            upsert("few", 1, 100),
            upsert("many", 1, 20000),
            upsert("", 1, 8192),
            upsert("odd", 9, 8192),
            upsert("twice", 1, 8192),
            upsert("twice", 2, 8192),
        ]);
    let response: AlterUserScramCredentialsResponse = plain(plaintext_addr(&broker))
        .await
        .call(ApiKey::AlterUserScramCredentials, 0, &request)
        .await;
    let mut got: Vec<(String, i16)> = response
        .results
        .iter()
        .map(|r| (r.user.to_string(), r.error_code))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("".into(), 93),
            ("few".into(), 93),
            ("ghost".into(), 91),
            ("many".into(), 93),
            ("odd".into(), 33),
            ("twice".into(), 92)
        ]
    );
}

fn unsecured_token(claims: &str) -> String {
    format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(claims)
    )
}

#[tokio::test]
async fn oauthbearer_unsecured_tokens_and_their_challenge() {
    let broker = TestBroker::start(&overrides(&[])).await;
    let addr = sasl_addr(&broker);
    let exp = common::now_ms() / 1000 + 600;
    let good = unsecured_token(&format!(r#"{{"sub":"carol","exp":{exp}}}"#));
    let mut conn = plain(addr).await;
    assert_eq!(handshake(&mut conn, "OAUTHBEARER", 1).await.error_code, 0);
    let auth = authenticate(
        &mut conn,
        format!("n,,\x01auth=Bearer {good}\x01\x01").as_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(auth.error_code, 0);
    let lifetime = auth.session_lifetime_ms;
    assert!(
        lifetime > 590_000 && lifetime <= 600_000,
        "the token's exp bounds the session: {lifetime}"
    );
    assert!(metadata(&mut conn).await.is_some());

    let expired = unsecured_token(r#"{"sub":"carol","exp":1000}"#);
    let mut conn = plain(addr).await;
    assert_eq!(handshake(&mut conn, "OAUTHBEARER", 1).await.error_code, 0);
    let challenge = authenticate(
        &mut conn,
        format!("n,,\x01auth=Bearer {expired}\x01\x01").as_bytes(),
    )
    .await
    .unwrap();
    assert_eq!(challenge.error_code, 0);
    assert_eq!(
        challenge.auth_bytes,
        r#"{"status":"invalid_token"}"#.as_bytes()
    );
    let failed = authenticate(&mut conn, b"\x01").await.unwrap();
    assert_eq!(failed.error_code, 58);
    assert_eq!(
        failed.error_message.as_deref(),
        Some(r#"{"status":"invalid_token"}"#)
    );
    assert!(conn.is_closed().await);
}

#[tokio::test]
async fn sessions_expire_unless_reauthenticated() {
    let broker = TestBroker::start_with_manual_clock(&overrides(&[(
        "listener.name.sasl_plaintext.plain.connections.max.reauth.ms",
        "1000",
    )]))
    .await;
    let addr = sasl_addr(&broker);
    let mut expiring = plain(addr).await;
    assert_eq!(handshake(&mut expiring, "PLAIN", 1).await.error_code, 0);
    let auth = authenticate(&mut expiring, b"\0alice\0alice-secret")
        .await
        .unwrap();
    assert_eq!(auth.session_lifetime_ms, 1000);
    let mut renewing = plain_login(addr, "alice", "alice-secret").await;
    broker.advance_clock_ms(600);
    // Re-authenticate: same mechanism, same user, a new lifetime.
    assert_eq!(handshake(&mut renewing, "PLAIN", 1).await.error_code, 0);
    let again = authenticate(&mut renewing, b"\0alice\0alice-secret")
        .await
        .unwrap();
    assert_eq!((again.error_code, again.session_lifetime_ms), (0, 1000));
    broker.advance_clock_ms(600);
    assert!(
        metadata(&mut expiring).await.is_none(),
        "an expired session is closed"
    );
    assert!(
        metadata(&mut renewing).await.is_some(),
        "a renewed one is served"
    );
    // Re-authenticating as someone else fails.
    broker.advance_clock_ms(1500);
    assert_eq!(handshake(&mut renewing, "PLAIN", 1).await.error_code, 0);
    let other = authenticate(&mut renewing, b"\0admin\0admin-secret")
        .await
        .unwrap();
    assert_eq!(other.error_code, 58);
    assert_eq!(
        other.error_message.as_deref(),
        Some("Cannot change principals during re-authentication from User.alice: User.admin")
    );
}

#[tokio::test]
async fn user_quotas_apply_to_the_authenticated_principal() {
    let broker = TestBroker::start(&overrides(&[])).await;
    let mut admin = common::Client::connect(plaintext_addr(&broker)).await;
    let set = common::quotas::alter(
        &mut admin,
        1,
        vec![(
            common::quotas::entity(&[("user", Some("alice"))]),
            vec![common::quotas::set("producer_byte_rate", 1024.0)],
        )],
        false,
    )
    .await;
    assert_eq!(set[0].0, 0);
    common::data::create_topic(&mut admin, "quota-topic", 1).await;
    let addr = sasl_addr(&broker);
    let mut throttles = Vec::new();
    for (user, password) in [("alice", "alice-secret"), ("admin", "admin-secret")] {
        let mut conn = plain_login(addr, user, password).await;
        let batch = common::sized_batch(10, 10_000);
        let request = common::data::produce_request(-1, "quota-topic", 0, batch);
        // 100 kB against 1 kB/s over the quota window: the response itself is throttled.
        let response: ProduceResponse = conn.call(ApiKey::Produce, 9, &request).await;
        assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
        throttles.push(response.throttle_time_ms);
    }
    assert!(
        throttles[0] > 0,
        "alice's quota throttles alice: {throttles:?}"
    );
    assert_eq!(
        throttles[1], 0,
        "and not another user on the same client id"
    );
}
