//! The StandardAuthorizer's checks of the transaction APIs over SASL sockets, answered as Kafka
//! 4.4 answers them: InitProducerId, EndTxn and the transactional Produce need WRITE on the
//! transactional id; AddPartitionsToTxn from clients (v3) WRITE on the id, then WRITE on every
//! topic (an internal topic is never added), and from brokers (v4) CLUSTER_ACTION;
//! AddOffsetsToTxn the id, then READ on the group; TxnOffsetCommit the id, the group, then READ
//! on each topic; WriteTxnMarkers CLUSTER ALTER or CLUSTER_ACTION; DescribeTransactions and
//! ListTransactions show only what the caller may describe.

mod common;

use common::acls::*;
use common::txn::{
    add_offsets, add_partitions, add_partitions_at, end_txn, init_txn, init_txn_ok, produce_txn, s,
    txn_batch, txn_offset_commit, write_marker,
};
use common::Client;
use kafka_protocol::messages::*;

/// alice may write transactional id `t-alice` and topic `orders`, read `orders` and group
/// `app`; bob may nothing. `secret` is a topic alice may not touch.
async fn world() -> (common::TestBroker, Client, Client, Client) {
    let broker = broker().await;
    let mut admin = login_client(&broker, "admin", "a").await;
    create_topics(&mut admin, &["orders", "secret"]).await;
    create_acls(
        &mut admin,
        vec![
            acl(
                TRANSACTIONAL_ID,
                "t-alice",
                LITERAL,
                "User:alice",
                WRITE,
                ALLOW,
            ),
            acl(TOPIC, "orders", LITERAL, "User:alice", WRITE, ALLOW),
            acl(TOPIC, "orders", LITERAL, "User:alice", READ, ALLOW),
            acl(GROUP, "app", LITERAL, "User:alice", READ, ALLOW),
        ],
    )
    .await;
    let alice = login_client(&broker, "alice", "a").await;
    let bob = login_client(&broker, "bob", "b").await;
    (broker, admin, alice, bob)
}

async fn list_transactions(client: &mut Client) -> Vec<String> {
    let response: ListTransactionsResponse = client
        .call(
            ApiKey::ListTransactions,
            1,
            &ListTransactionsRequest::default(),
        )
        .await;
    let mut ids: Vec<String> = response
        .transaction_states
        .iter()
        .map(|t| t.transactional_id.to_string())
        .collect();
    ids.sort();
    ids
}

/// The partitions `client` is shown of transaction `id`: (error, topics).
async fn described_topics(client: &mut Client, id: &str) -> (i16, Vec<String>) {
    let request = DescribeTransactionsRequest::default().with_transactional_ids(vec![s(id).into()]);
    let response: DescribeTransactionsResponse =
        client.call(ApiKey::DescribeTransactions, 0, &request).await;
    let state = &response.transaction_states[0];
    let mut topics: Vec<String> = state.topics.iter().map(|t| t.topic.to_string()).collect();
    topics.sort();
    (state.error_code, topics)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_apis_check_the_transactional_id_topics_and_groups() {
    let (_broker, mut admin, mut alice, mut bob) = world().await;
    // InitProducerId: WRITE on the transactional id.
    assert_eq!(
        init_txn(&mut bob, 4, "t-alice", 60000, (-1, -1)).await.0,
        53
    );
    let producer = init_txn_ok(&mut alice, "t-alice", 60000).await;
    init_txn_ok(&mut admin, "t-admin", 60000).await;

    // AddPartitionsToTxn from a client: the id first (every partition refused), then each topic
    // (a refused or internal topic fails the request: nothing is added, the rest not attempted).
    let orders = [("orders", 0)];
    assert_eq!(
        add_partitions(&mut bob, "t-alice", producer, &orders).await,
        [53]
    );
    let mixed = [("orders", 0), ("secret", 0), ("no-such", 0)];
    assert_eq!(
        add_partitions(&mut alice, "t-alice", producer, &mixed).await,
        [55, 29, 29],
        "authorization before existence"
    );
    let internal = [("orders", 0), ("__consumer_offsets", 0)];
    assert_eq!(
        add_partitions(&mut admin, "t-alice", producer, &internal).await,
        [55, 29],
        "never an internal topic, even for a super user"
    );
    // From a broker (v4+): CLUSTER_ACTION, or the whole request fails.
    let request = AddPartitionsToTxnRequest::default();
    let refused: AddPartitionsToTxnResponse =
        alice.call(ApiKey::AddPartitionsToTxn, 4, &request).await;
    assert_eq!(refused.error_code, 31);
    assert_eq!(
        add_partitions(&mut alice, "t-alice", producer, &orders).await,
        [0]
    );
    // The super user adds `secret` to alice's transaction: alice is not shown it.
    let secret = [("secret", 0)];
    assert_eq!(
        add_partitions_at(&mut admin, 3, "t-alice", producer, &secret).await,
        [0]
    );
    assert_eq!(
        described_topics(&mut alice, "t-alice").await,
        (0, vec!["orders".to_string()])
    );
    assert_eq!(
        described_topics(&mut admin, "t-alice").await.1,
        ["orders", "secret"]
    );
    assert_eq!(described_topics(&mut bob, "t-alice").await.0, 53);
    // ListTransactions: only the ids the caller may describe.
    assert_eq!(list_transactions(&mut alice).await, ["t-alice"]);
    assert_eq!(list_transactions(&mut admin).await, ["t-admin", "t-alice"]);
    assert!(list_transactions(&mut bob).await.is_empty());

    // A transactional produce needs WRITE on the id, whatever the topic.
    let batch = txn_batch(producer.0, producer.1, 0, 3, "bob");
    let produced = produce_txn(&mut bob, 9, Some("t-alice"), "orders", 0, batch).await;
    assert_eq!(produced.error_code, 53);
    let batch = txn_batch(producer.0, producer.1, 0, 3, "alice");
    let produced = produce_txn(&mut alice, 9, Some("t-alice"), "secret", 0, batch).await;
    assert_eq!(produced.error_code, 29);
    let batch = txn_batch(producer.0, producer.1, 0, 3, "alice");
    let produced = produce_txn(&mut alice, 9, Some("t-alice"), "orders", 0, batch).await;
    assert_eq!(produced.error_code, 0);

    // AddOffsetsToTxn: the id, then READ on the group.
    assert_eq!(add_offsets(&mut bob, "t-alice", producer, "app").await, 53);
    assert_eq!(
        add_offsets(&mut alice, "t-alice", producer, "other").await,
        30
    );
    assert_eq!(add_offsets(&mut alice, "t-alice", producer, "app").await, 0);
    // TxnOffsetCommit: the id, the group, then READ on each topic.
    let member = (-1, "");
    let code = txn_offset_commit(
        &mut bob,
        3,
        "t-alice",
        "app",
        producer,
        member,
        ("orders", 1),
    );
    assert_eq!(code.await, 53);
    for (group, topic, expected) in [
        ("other", "orders", 30),
        ("app", "secret", 29),
        ("app", "orders", 0),
    ] {
        let code = txn_offset_commit(
            &mut alice,
            3,
            "t-alice",
            group,
            producer,
            member,
            (topic, 1),
        );
        assert_eq!(code.await, expected, "{group} {topic}");
    }

    // WriteTxnMarkers: CLUSTER ALTER or CLUSTER_ACTION; the refusal is on every partition.
    assert_eq!(
        write_marker(&mut alice, "orders", 0, producer, true, 0).await,
        31
    );
    // EndTxn: WRITE on the id.
    assert_eq!(end_txn(&mut bob, 3, "t-alice", producer, true).await.0, 53);
    assert_eq!(end_txn(&mut alice, 3, "t-alice", producer, true).await.0, 0);
}
