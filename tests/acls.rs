//! The StandardAuthorizer over real sockets: principals from SASL/PLAIN, a super user who
//! manages ACLs with CreateAcls/DescribeAcls/DeleteAcls (kept across a restart), and what the
//! other principals may then do, answered with Kafka's errors: Metadata hides and refuses
//! topics (and auto-creation needs CREATE), Produce and Fetch answer
//! TOPIC_AUTHORIZATION_FAILED per partition, groups GROUP_AUTHORIZATION_FAILED, cluster
//! APIs CLUSTER_AUTHORIZATION_FAILED; deny wins over allow; prefixed patterns; KIP-430
//! authorized operations; OffsetCommit and OffsetFetch v10 authorized on the names their topic
//! ids resolve to.

mod common;

use std::net::SocketAddr;

use bytes::Bytes;
use common::acls::*;
use common::data::{fetch_request, produce_request, topic_name};
use common::offsets_v10::{call_v10, commit_v10, fetch_v10};
use common::secure::{plain, Conn};
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use tokio::net::TcpStream;
use uuid::Uuid;

async fn login(addr: SocketAddr, user: &str, password: &str) -> Conn<TcpStream> {
    let mut conn = plain(addr).await;
    let hs: SaslHandshakeResponse = conn
        .call(
            ApiKey::SaslHandshake,
            1,
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
        )
        .await;
    assert_eq!(hs.error_code, 0);
    let token = format!("\0{user}\0{password}");
    let auth: SaslAuthenticateResponse = conn
        .call(
            ApiKey::SaslAuthenticate,
            2,
            &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
        )
        .await;
    assert_eq!(auth.error_code, 0);
    conn
}

async fn metadata(
    conn: &mut Conn<TcpStream>,
    topics: Option<&[&str]>,
    create: bool,
) -> MetadataResponse {
    let topics = topics.map(|names| {
        names
            .iter()
            .map(|n| MetadataRequestTopic::default().with_name(Some(topic_name(n))))
            .collect()
    });
    let request = MetadataRequest::default()
        .with_topics(topics)
        .with_allow_auto_topic_creation(create)
        .with_include_topic_authorized_operations(true);
    conn.call(ApiKey::Metadata, 12, &request).await
}

async fn produce_code(conn: &mut Conn<TcpStream>, topic: &str) -> i16 {
    let batch = common::sized_batch(1, 10);
    let response: ProduceResponse = conn
        .call(ApiKey::Produce, 9, &produce_request(-1, topic, 0, batch))
        .await;
    response.responses[0].partition_responses[0].error_code
}

async fn fetch_code(conn: &mut Conn<TcpStream>, topic: &str) -> i16 {
    let response: FetchResponse = conn
        .call(ApiKey::Fetch, 12, &fetch_request(topic, 0, 0, 0, 1024))
        .await;
    response.responses[0].partitions[0].error_code
}

#[tokio::test]
async fn acls_decide_what_each_principal_may_do() {
    let mut broker = broker().await;
    let addr = broker.addr();
    let mut admin = login(addr, "admin", "a").await;
    // The super user creates topics and ACLs.
    for topic in ["orders", "logs-app", "logs-secret", "hidden"] {
        let md = metadata(&mut admin, Some(&[topic]), true).await;
        assert_eq!(md.topics[0].error_code, 0);
    }
    let created: CreateAclsResponse = admin
        .call(
            ApiKey::CreateAcls,
            3,
            &CreateAclsRequest::default().with_creations(vec![
                acl(TOPIC, "orders", LITERAL, "User:alice", READ, ALLOW),
                acl(TOPIC, "logs-", PREFIXED, "User:*", WRITE, ALLOW),
                acl(TOPIC, "logs-secret", LITERAL, "User:bob", WRITE, DENY),
                acl(GROUP, "app", LITERAL, "User:alice", READ, ALLOW),
                acl(TOPIC, "hidden", LITERAL, "User:admin", DESCRIBE, ALLOW),
                acl(TOPIC, "new-", PREFIXED, "User:bob", CREATE, ALLOW),
                acl(TOPIC, "new-t", PREFIXED, "User:bob", DESCRIBE, ALLOW),
                // Refused: an empty name, CLUSTER with another name.
                acl(TOPIC, "", LITERAL, "User:x", READ, ALLOW),
                acl(4, "other", LITERAL, "User:x", 7, ALLOW),
            ]),
        )
        .await;
    let codes: Vec<i16> = created.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, [0, 0, 0, 0, 0, 0, 0, 42, 42]);

    for round in 0..2 {
        let mut alice = login(broker.addr(), "alice", "a").await;
        let mut bob = login(broker.addr(), "bob", "b").await;
        // Metadata: all topics shows only those alice may describe (READ implies DESCRIBE;
        // the prefixed WRITE for everyone implies it on logs-*).
        let md = metadata(&mut alice, None, false).await;
        let mut names: Vec<String> = md
            .topics
            .iter()
            .map(|t| t.name.as_ref().unwrap().to_string())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["logs-app", "logs-secret", "orders"],
            "round {round}"
        );
        let orders = md
            .topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == "orders"))
            .unwrap();
        assert_eq!(
            orders.topic_authorized_operations,
            (1 << 3) | (1 << 8),
            "READ and DESCRIBE"
        );
        // Named: an unauthorized topic and a missing one look the same.
        let md = metadata(&mut alice, Some(&["hidden", "no-such-topic"]), true).await;
        for t in &md.topics {
            assert_eq!(t.error_code, 29, "{:?}", t.name);
            assert!(t.topic_id.is_nil() && t.partitions.is_empty());
        }
        // Auto-creation needs CREATE.
        assert_eq!(
            metadata(&mut bob, Some(&["new-topic"]), true).await.topics[0].error_code,
            0
        );
        // Produce and fetch.
        assert_eq!(produce_code(&mut alice, "orders").await, 29);
        assert_eq!(fetch_code(&mut alice, "orders").await, 0);
        assert_eq!(produce_code(&mut alice, "logs-app").await, 0);
        assert_eq!(produce_code(&mut bob, "logs-app").await, 0);
        assert_eq!(produce_code(&mut bob, "logs-secret").await, 29, "deny wins");
        assert_eq!(fetch_code(&mut bob, "orders").await, 29);
        // Groups and the cluster.
        let hb =
            HeartbeatRequest::default().with_group_id(GroupId(StrBytes::from_static_str("other")));
        let hb: HeartbeatResponse = bob.call(ApiKey::Heartbeat, 4, &hb).await;
        assert_eq!(hb.error_code, 30);
        let fc: FindCoordinatorResponse = alice
            .call(
                ApiKey::FindCoordinator,
                3,
                &FindCoordinatorRequest::default().with_key(StrBytes::from_static_str("app")),
            )
            .await;
        assert_eq!(fc.error_code, 0, "READ on the group implies DESCRIBE");
        let described: DescribeAclsResponse =
            alice.call(ApiKey::DescribeAcls, 3, &describe_all()).await;
        assert_eq!(described.error_code, 31);
        let ids: InitProducerIdResponse = alice
            .call(
                ApiKey::InitProducerId,
                4,
                &InitProducerIdRequest::default()
                    .with_transactional_id(None)
                    .with_transaction_timeout_ms(60000),
            )
            .await;
        assert_eq!(
            ids.error_code, 0,
            "WRITE on some topic is enough for an idempotent producer"
        );
        let ids: InitProducerIdResponse = alice
            .call(
                ApiKey::InitProducerId,
                4,
                &InitProducerIdRequest::default()
                    .with_transactional_id(Some(TransactionalId(StrBytes::from_static_str("t1"))))
                    .with_transaction_timeout_ms(60000),
            )
            .await;
        assert_eq!(ids.error_code, 53);
        broker.restart().await;
    }

    // The ACLs survived the restart; DescribeAcls lists them, DeleteAcls removes them.
    let mut admin = login(broker.addr(), "admin", "a").await;
    let described: DescribeAclsResponse =
        admin.call(ApiKey::DescribeAcls, 3, &describe_all()).await;
    assert_eq!(described.error_code, 0);
    assert_eq!(
        described
            .resources
            .iter()
            .map(|r| r.acls.len())
            .sum::<usize>(),
        7
    );
    let deleted: DeleteAclsResponse = admin
        .call(
            ApiKey::DeleteAcls,
            3,
            &DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
                .with_resource_type_filter(TOPIC)
                .with_resource_name_filter(Some(StrBytes::from_static_str("logs-secret")))
                .with_pattern_type_filter(2)
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(1)
                .with_permission_type(1)]),
        )
        .await;
    // MATCH on logs-secret: the literal DENY and the prefixed logs- ALLOW.
    assert_eq!(deleted.filter_results[0].matching_acls.len(), 2);
    let mut bob = login(broker.addr(), "bob", "b").await;
    assert_eq!(
        produce_code(&mut bob, "logs-secret").await,
        29,
        "no ACL left for bob on logs-secret"
    );
}

fn describe_all() -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_name_filter(None)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_resource_type_filter(1)
        .with_pattern_type_filter(1)
        .with_operation(1)
        .with_permission_type(1)
}

/// (topic id, partition, error) of each partition answered.
fn commit_answers(response: &OffsetCommitResponse) -> Vec<(Uuid, i32, i16)> {
    let mut answers: Vec<_> = response
        .topics
        .iter()
        .flat_map(|t| {
            let id = t.topic_id;
            t.partitions
                .iter()
                .map(move |p| (id, p.partition_index, p.error_code))
        })
        .collect();
    answers.sort();
    answers
}

/// (topic id, partition, offset, error) of each partition of the one group answered.
fn fetch_answers(response: &OffsetFetchResponse) -> Vec<(Uuid, i32, i64, i16)> {
    assert_eq!(response.groups.len(), 1);
    assert_eq!(response.groups[0].error_code, 0);
    let mut answers: Vec<_> = response.groups[0]
        .topics
        .iter()
        .flat_map(|t| {
            let id = t.topic_id;
            t.partitions
                .iter()
                .map(move |p| (id, p.partition_index, p.committed_offset, p.error_code))
        })
        .collect();
    answers.sort();
    answers
}

/// OffsetCommit and OffsetFetch v10 name topics by id: the ACLs are those of the topic the id
/// names, and an id that names no topic is UNKNOWN_TOPIC_ID (100), as Kafka 4.4 answers (it
/// resolves the ids before it authorizes).
#[tokio::test]
async fn offsets_by_topic_id_are_authorized_on_the_topics_name() {
    let broker = broker().await;
    let mut admin = login_client(&broker, "admin", "a").await;
    for topic in ["orders", "secret"] {
        let md: MetadataResponse = admin
            .call(
                ApiKey::Metadata,
                12,
                &MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default(
                )
                .with_name(Some(topic_name(topic)))])),
            )
            .await;
        assert_eq!(md.topics[0].error_code, 0);
    }
    let created: CreateAclsResponse = admin
        .call(
            ApiKey::CreateAcls,
            3,
            &CreateAclsRequest::default().with_creations(vec![
                acl(TOPIC, "orders", LITERAL, "User:alice", READ, ALLOW),
                acl(GROUP, "app", LITERAL, "User:alice", READ, ALLOW),
            ]),
        )
        .await;
    assert!(created.results.iter().all(|r| r.error_code == 0));
    let md: MetadataResponse = admin
        .call(
            ApiKey::Metadata,
            12,
            &MetadataRequest::default().with_topics(None),
        )
        .await;
    let id_of = |name: &str| {
        md.topics
            .iter()
            .find(|t| t.name.as_ref().is_some_and(|n| n.as_str() == name))
            .map(|t| t.topic_id)
            .unwrap()
    };
    let (orders, secret) = (id_of("orders"), id_of("secret"));
    let unknown = Uuid::from_u128(0x5eed);
    // The super user commits to both topics for the group.
    let request = commit_v10("app", &[(orders, &[0]), (secret, &[0])]);
    let response: OffsetCommitResponse = call_v10(&mut admin, ApiKey::OffsetCommit, &request).await;
    let mut expected = vec![(orders, 0, 0), (secret, 0, 0)];
    expected.sort();
    assert_eq!(commit_answers(&response), expected);

    let mut alice = login_client(&broker, "alice", "a").await;
    let request = commit_v10("app", &[(orders, &[0]), (secret, &[0]), (unknown, &[0])]);
    let response: OffsetCommitResponse = call_v10(&mut alice, ApiKey::OffsetCommit, &request).await;
    let mut expected = vec![(orders, 0, 0), (secret, 0, 29), (unknown, 0, 100)];
    expected.sort();
    assert_eq!(commit_answers(&response), expected);
    // A group alice may not read: every partition GROUP_AUTHORIZATION_FAILED.
    let request = commit_v10("other", &[(orders, &[0])]);
    let response: OffsetCommitResponse = call_v10(&mut alice, ApiKey::OffsetCommit, &request).await;
    assert_eq!(commit_answers(&response), [(orders, 0, 30)]);

    // By id: the commit, and the unknown id per partition.
    let request = fetch_v10("app", Some(&[(orders, &[0]), (unknown, &[0])]));
    let response: OffsetFetchResponse = call_v10(&mut alice, ApiKey::OffsetFetch, &request).await;
    let mut expected = vec![(orders, 0, 2, 0), (unknown, 0, -1, 100)];
    expected.sort();
    assert_eq!(fetch_answers(&response), expected);
    // Everything the group committed leaves out the topic alice may not describe.
    let response: OffsetFetchResponse =
        call_v10(&mut alice, ApiKey::OffsetFetch, &fetch_v10("app", None)).await;
    assert_eq!(fetch_answers(&response), [(orders, 0, 2, 0)]);
}
