//! The StandardAuthorizer's checks of the KIP-848 group APIs, DescribeTopicPartitions,
//! OffsetDelete, DescribeProducers, DescribeTransactions and ElectLeaders, over real sockets, answered as
//! Kafka 4.4 answers them: ConsumerGroupHeartbeat needs READ on the group and DESCRIBE on every
//! topic it names, and a regular expression resolves only to topics the member may describe;
//! ConsumerGroupDescribe needs DESCRIBE on the group and on every topic its members are
//! assigned; DescribeTopicPartitions hides or refuses topics without DESCRIBE and always
//! carries the authorized operations; DescribeProducers needs topic READ, DescribeTransactions
//! TRANSACTIONAL_ID DESCRIBE; OffsetDelete group DELETE and topic READ; ElectLeaders CLUSTER
//! ALTER, refused on every partition; ListConfigResources CLUSTER DESCRIBE_CONFIGS. Without an authorizer
//! the authorized operations asked for are everything the resource supports.

mod common;

use common::acls::*;
use common::consumer::{assigned, join, s, send, topic_id};
use common::{Client, TestBroker};
use kafka_protocol::messages::describe_producers_request::TopicRequest;
use kafka_protocol::messages::describe_topic_partitions_request::TopicRequest as DtpTopic;
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::*;

/// KIP-430 bits: READ 3, DESCRIBE 8 (DELETE is 6).
const READ_AND_DESCRIBE: i32 = (1 << 3) | (1 << 8);
/// Every group operation: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS.
const ALL_GROUP_OPERATIONS: i32 = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11);
/// Every topic operation: READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS,
/// ALTER_CONFIGS.
const ALL_TOPIC_OPERATIONS: i32 = 3576;

/// The broker, the super user's client, and alice's: alice may read `app-orders` (not
/// `app-secret`), read and delete offsets of group `app`, describe group `shared` and
/// transactional id `t-alice`.
async fn world() -> (TestBroker, Client, Client) {
    let broker = broker().await;
    let mut admin = login_client(&broker, "admin", "a").await;
    create_topics(&mut admin, &["app-orders", "app-secret"]).await;
    create_acls(
        &mut admin,
        vec![
            acl(TOPIC, "app-orders", LITERAL, "User:alice", READ, ALLOW),
            acl(GROUP, "app", LITERAL, "User:alice", READ, ALLOW),
            acl(GROUP, "app", LITERAL, "User:alice", DELETE, ALLOW),
            acl(GROUP, "shared", LITERAL, "User:alice", DESCRIBE, ALLOW),
            acl(
                TRANSACTIONAL_ID,
                "t-alice",
                LITERAL,
                "User:alice",
                DESCRIBE,
                ALLOW,
            ),
        ],
    )
    .await;
    let alice = login_client(&broker, "alice", "a").await;
    (broker, admin, alice)
}

fn regex_join(group: &str, member: &str, pattern: &str) -> ConsumerGroupHeartbeatRequest {
    join(group, member, &[])
        .with_subscribed_topic_names(None)
        .with_subscribed_topic_regex(Some(s(pattern)))
}

async fn consumer_describe(
    client: &mut Client,
    groups: &[&str],
    with_ops: bool,
) -> ConsumerGroupDescribeResponse {
    let request = ConsumerGroupDescribeRequest::default()
        .with_group_ids(groups.iter().map(|g| GroupId(s(g))).collect())
        .with_include_authorized_operations(with_ops);
    client
        .call(ApiKey::ConsumerGroupDescribe, 1, &request)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_group_apis_check_the_group_and_its_topics() {
    let (_broker, mut admin, mut alice) = world().await;
    let orders = topic_id(&mut admin, "app-orders").await;
    // Group READ first, then DESCRIBE on every topic named.
    let refused = send(&mut alice, &join("other", "m1", &["app-orders"])).await;
    assert_eq!(refused.error_code, 30);
    let refused = send(
        &mut alice,
        &join("app", "m1", &["app-orders", "app-secret"]),
    )
    .await;
    assert_eq!(refused.error_code, 29);
    assert_eq!(refused.member_id, None);
    // A regular expression resolves only to the topics alice may describe.
    let joined = send(&mut alice, &regex_join("app", "m1", "app-.*")).await;
    assert_eq!(joined.error_code, 0, "{:?}", joined.error_message);
    assert_eq!(assigned(&joined), Some(vec![(orders, vec![0])]));
    // The super user's member of `shared` is assigned both topics.
    let both = join("shared", "m2", &["app-orders", "app-secret"]);
    assert_eq!(send(&mut admin, &both).await.error_code, 0);

    let described = consumer_describe(&mut alice, &["shared", "nope", "app"], true).await;
    let answers: Vec<(&str, i16, i32)> = described
        .groups
        .iter()
        .map(|g| (g.group_id.as_str(), g.error_code, g.authorized_operations))
        .collect();
    assert_eq!(
        answers,
        [
            // Refused groups come first; existence is not revealed.
            ("nope", 30, i32::MIN),
            // A member is assigned a topic alice may not describe.
            ("shared", 29, i32::MIN),
            ("app", 0, READ_AND_DESCRIBE | (1 << 6)),
        ]
    );
    let shared = &described.groups[1];
    assert!(shared.members.is_empty());
    assert_eq!(
        shared.error_message.as_deref(),
        Some("The group has described topic(s) that the client is not authorized to describe.")
    );
    assert_eq!(described.groups[2].members.len(), 1);
    // Without the flag, no operations.
    let described = consumer_describe(&mut alice, &["app"], false).await;
    assert_eq!(described.groups[0].authorized_operations, i32::MIN);
    // The super user sees `shared` whole.
    let described = consumer_describe(&mut admin, &["shared"], true).await;
    assert_eq!(described.groups[0].error_code, 0);
    assert_eq!(
        described.groups[0].authorized_operations,
        ALL_GROUP_OPERATIONS
    );
}

async fn describe_partitions(client: &mut Client, topics: &[&str]) -> Vec<(String, i16, i32)> {
    let request = DescribeTopicPartitionsRequest::default()
        .with_topics(
            topics
                .iter()
                .map(|t| DtpTopic::default().with_name(TopicName(s(t))))
                .collect(),
        )
        .with_response_partition_limit(100);
    let response: DescribeTopicPartitionsResponse = client
        .call(ApiKey::DescribeTopicPartitions, 0, &request)
        .await;
    response
        .topics
        .iter()
        .map(|t| {
            let name = t.name.as_ref().map(|n| n.to_string()).unwrap_or_default();
            (name, t.error_code, t.topic_authorized_operations)
        })
        .collect()
}

#[tokio::test]
async fn describe_topic_partitions_hides_and_refuses_topics() {
    let (_broker, mut admin, mut alice) = world().await;
    // All topics: only those alice may describe, with her operations.
    assert_eq!(
        describe_partitions(&mut alice, &[]).await,
        [("app-orders".to_string(), 0, READ_AND_DESCRIBE)]
    );
    // Named: refused after the others, existing or not.
    assert_eq!(
        describe_partitions(&mut alice, &["no-such", "app-secret", "app-orders"]).await,
        [
            ("app-orders".to_string(), 0, READ_AND_DESCRIBE),
            ("app-secret".to_string(), 29, i32::MIN),
            ("no-such".to_string(), 29, i32::MIN),
        ]
    );
    // The super user may do everything; a missing topic is unknown to it.
    assert_eq!(
        describe_partitions(&mut admin, &["app-secret", "no-such"]).await,
        [
            ("app-secret".to_string(), 0, ALL_TOPIC_OPERATIONS),
            ("no-such".to_string(), 3, ALL_TOPIC_OPERATIONS),
        ]
    );
}

#[tokio::test]
async fn offsets_producers_and_transactions_are_checked() {
    let (_broker, mut admin, mut alice) = world().await;
    // OffsetDelete: group DELETE, then topic READ per topic.
    let request = |group: &str| {
        OffsetDeleteRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_topics(
                ["app-orders", "app-secret"]
                    .iter()
                    .map(|t| {
                        OffsetDeleteRequestTopic::default()
                            .with_name(TopicName(s(t)))
                            .with_partitions(vec![
                                OffsetDeleteRequestPartition::default().with_partition_index(0)
                            ])
                    })
                    .collect(),
            )
    };
    let deleted: OffsetDeleteResponse = alice
        .call(ApiKey::OffsetDelete, 0, &request("shared"))
        .await;
    assert_eq!(deleted.error_code, 30);
    let deleted: OffsetDeleteResponse = alice.call(ApiKey::OffsetDelete, 0, &request("app")).await;
    let secret = deleted
        .topics
        .iter()
        .find(|t| t.name.as_str() == "app-secret")
        .expect("app-secret answered");
    assert_eq!(secret.partitions[0].error_code, 29);

    // DescribeProducers: topic READ, in the request's order; an invalid name is refused as such.
    let request = DescribeProducersRequest::default().with_topics(
        ["app-secret", "app-orders", "bad name"]
            .iter()
            .map(|t| {
                TopicRequest::default()
                    .with_name(TopicName(s(t)))
                    .with_partition_indexes(vec![0])
            })
            .collect(),
    );
    let producers: DescribeProducersResponse =
        alice.call(ApiKey::DescribeProducers, 0, &request).await;
    let answers: Vec<(&str, i16)> = producers
        .topics
        .iter()
        .map(|t| (t.name.as_str(), t.partitions[0].error_code))
        .collect();
    assert_eq!(
        answers,
        [("app-secret", 29), ("app-orders", 0), ("bad name", 17)]
    );

    // DescribeTransactions: TRANSACTIONAL_ID DESCRIBE, in the request's order.
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![
        TransactionalId(s("t-other")),
        TransactionalId(s("t-alice")),
    ]);
    let described: DescribeTransactionsResponse =
        alice.call(ApiKey::DescribeTransactions, 0, &request).await;
    let answers: Vec<(&str, i16)> = described
        .transaction_states
        .iter()
        .map(|t| (t.transactional_id.as_str(), t.error_code))
        .collect();
    assert_eq!(answers, [("t-other", 53), ("t-alice", 105)]);

    // ElectLeaders: CLUSTER ALTER, the error on top and on every partition named.
    let request = ElectLeadersRequest::default().with_topic_partitions(Some(vec![
        elect_leaders_request::TopicPartitions::default()
            .with_topic(TopicName(s("app-orders")))
            .with_partitions(vec![0, 1]),
    ]));
    let elected: ElectLeadersResponse = alice.call(ApiKey::ElectLeaders, 2, &request).await;
    let codes: Vec<i16> = elected.replica_election_results[0]
        .partition_result
        .iter()
        .map(|p| p.error_code)
        .collect();
    assert_eq!((elected.error_code, codes), (31, vec![31, 31]));

    // ListConfigResources: CLUSTER DESCRIBE_CONFIGS, refused whole.
    let request = ListConfigResourcesRequest::default();
    let listed: ListConfigResourcesResponse =
        alice.call(ApiKey::ListConfigResources, 1, &request).await;
    assert_eq!((listed.error_code, listed.config_resources.len()), (31, 0));
    let listed: ListConfigResourcesResponse =
        admin.call(ApiKey::ListConfigResources, 1, &request).await;
    assert_eq!(listed.error_code, 0);
    assert!(listed
        .config_resources
        .iter()
        .any(|r| r.resource_name.as_str() == "app-orders" && r.resource_type == 2));
}

#[tokio::test]
async fn without_an_authorizer_every_operation_is_authorized() {
    let broker = TestBroker::start(&[("group.consumer.assignment.interval.ms", "0")]).await;
    let mut client = broker.client().await;
    create_topics(&mut client, &["t"]).await;
    assert_eq!(
        send(&mut client, &join("g", "m", &["t"])).await.error_code,
        0
    );
    let described = consumer_describe(&mut client, &["g"], true).await;
    assert_eq!(
        described.groups[0].authorized_operations,
        ALL_GROUP_OPERATIONS
    );
    let request = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(s("g"))])
        .with_include_authorized_operations(true);
    let described: DescribeGroupsResponse = client.call(ApiKey::DescribeGroups, 5, &request).await;
    assert_eq!(described.groups[0].error_code, 0);
    assert_eq!(
        described.groups[0].authorized_operations,
        ALL_GROUP_OPERATIONS
    );
    assert_eq!(
        describe_partitions(&mut client, &["t"]).await,
        [("t".to_string(), 0, ALL_TOPIC_OPERATIONS)]
    );
}
