//! Shared by the ACL socket tests: a broker with a SASL/PLAIN listener and the
//! StandardAuthorizer (`admin` is the super user; `alice` and `bob` have no rights until ACLs
//! give them some), logging in on the raw client, and ACLs and topics made by the super user.

use bytes::Bytes;
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::data::topic_name;
use super::{Client, TestBroker};

pub const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="a" user_alice="a" user_bob="b";"#;

pub const TOPIC: i8 = 2;
pub const GROUP: i8 = 3;
pub const TRANSACTIONAL_ID: i8 = 5;
pub const LITERAL: i8 = 3;
pub const PREFIXED: i8 = 4;
pub const READ: i8 = 3;
pub const WRITE: i8 = 4;
pub const CREATE: i8 = 5;
pub const DELETE: i8 = 6;
pub const DESCRIBE: i8 = 8;
pub const ALLOW: i8 = 3;
pub const DENY: i8 = 2;

pub async fn broker() -> TestBroker {
    TestBroker::start(&[
        ("listeners", "SASL_PLAINTEXT://127.0.0.1:0"),
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS),
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        ("super.users", "User:admin"),
        ("num.partitions", "1"),
        // KIP-848 targets are computed at every heartbeat, not at most once a second.
        ("group.consumer.assignment.interval.ms", "0"),
    ])
    .await
}

pub fn acl(
    resource_type: i8,
    name: &str,
    pattern: i8,
    principal: &str,
    operation: i8,
    permission: i8,
) -> AclCreation {
    AclCreation::default()
        .with_resource_type(resource_type)
        .with_resource_name(StrBytes::from_string(name.into()))
        .with_resource_pattern_type(pattern)
        .with_principal(StrBytes::from_string(principal.into()))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(operation)
        .with_permission_type(permission)
}

/// Logs in over SASL/PLAIN on the raw client that speaks any version's bytes.
pub async fn login_client(broker: &TestBroker, user: &str, password: &str) -> Client {
    let mut client = broker.client().await;
    let mechanism = StrBytes::from_static_str("PLAIN");
    let request = SaslHandshakeRequest::default().with_mechanism(mechanism);
    let hs: SaslHandshakeResponse = client.call(ApiKey::SaslHandshake, 1, &request).await;
    assert_eq!(hs.error_code, 0);
    let token = Bytes::from(format!("\0{user}\0{password}"));
    let request = SaslAuthenticateRequest::default().with_auth_bytes(token);
    let auth: SaslAuthenticateResponse = client.call(ApiKey::SaslAuthenticate, 2, &request).await;
    assert_eq!(auth.error_code, 0);
    client
}

/// Creates the ACLs (as the super user); every one must be accepted.
pub async fn create_acls(admin: &mut Client, acls: Vec<AclCreation>) {
    let request = CreateAclsRequest::default().with_creations(acls);
    let created: CreateAclsResponse = admin.call(ApiKey::CreateAcls, 3, &request).await;
    assert!(created.results.iter().all(|r| r.error_code == 0));
}

/// Creates the topics by auto-creation (as the super user), one partition each.
pub async fn create_topics(admin: &mut Client, topics: &[&str]) {
    for topic in topics {
        let request = MetadataRequest::default()
            .with_topics(Some(vec![
                MetadataRequestTopic::default().with_name(Some(topic_name(topic)))
            ]))
            .with_allow_auto_topic_creation(true);
        let md: MetadataResponse = admin.call(ApiKey::Metadata, 12, &request).await;
        assert_eq!(md.topics[0].error_code, 0, "{topic}");
    }
}
