//! The quota keys beyond the byte rates and request time, over real sockets:
//! `controller_mutation_rate` (CreateTopics / CreatePartitions / DeleteTopics refused with
//! THROTTLING_QUOTA_EXCEEDED at strict versions, only throttled at older ones),
//! `connection_creation_rate` for ip entities (connections over the rate closed unserved), and
//! DescribeUserScramCredentials as a broker without SCRAM credentials answers it.

mod common;

use std::time::{Duration, Instant};

use common::quotas::{alter, entity, s, set};
use common::{Client, TestBroker};
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::*;

const THROTTLING_QUOTA_EXCEEDED: i16 = 89;

async fn create_topics(
    client: &mut Client,
    version: i16,
    topics: &[(&str, i32)],
) -> CreateTopicsResponse {
    let request = CreateTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(
            topics
                .iter()
                .map(|(name, partitions)| {
                    CreatableTopic::default()
                        .with_name(TopicName(s(name)))
                        .with_num_partitions(*partitions)
                        .with_replication_factor(-1)
                })
                .collect(),
        );
    client.call(ApiKey::CreateTopics, version, &request).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_mutation_rate_refuses_topics_at_strict_versions() {
    // The broker's clock is a manual one: token buckets refill only when the test moves it, so
    // a slow machine cannot refill them while the partitions are being created.
    let broker = TestBroker::start_with_manual_clock(&[]).await;
    let mut admin = broker.client().await;
    // 1 partition per second: a burst of 11 (quota.window.num × 1 s).
    let quota = entity(&[("client-id", Some("mutator"))]);
    let results = alter(
        &mut admin,
        1,
        vec![(quota, vec![set("controller_mutation_rate", 1.0)])],
        false,
    )
    .await;
    assert_eq!(results, vec![(0, None)]);

    let mut mutator = broker.client().await;
    mutator.client_id = "mutator";
    // 12 partitions fit while the bucket is not yet negative; it ends 1 token short, so the
    // next topic is refused and the response says 1 s.
    let response = create_topics(&mut mutator, 7, &[("wide", 12), ("late", 1)]).await;
    assert_eq!(response.topics[0].error_code, 0);
    assert_eq!(response.topics[0].error_message, None, "null, as in Kafka");
    assert_eq!(response.topics[1].error_code, THROTTLING_QUOTA_EXCEEDED);
    // Kafka sends no message that only repeats the error's own.
    assert_eq!(response.topics[1].error_message, None);
    assert_eq!(response.throttle_time_ms, 1000);

    // Muted for that long.
    let started = Instant::now();
    let _: ApiVersionsResponse = mutator
        .call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
        .await;
    let throttle = Duration::from_millis(response.throttle_time_ms as u64);
    assert!(started.elapsed() + Duration::from_millis(50) >= throttle);

    // Refilled, the bucket takes a CreatePartitions v3 (strict) again. A strict request that
    // drives the bucket negative is not throttled itself, as in Kafka: the next one is refused.
    broker.advance_clock_ms(1300);
    let grow = |count| {
        CreatePartitionsRequest::default()
            .with_timeout_ms(5000)
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(TopicName(s("wide")))
                .with_count(count)])
    };
    let grown: CreatePartitionsResponse =
        mutator.call(ApiKey::CreatePartitions, 3, &grow(14)).await;
    assert_eq!(grown.results[0].error_code, 0);
    assert_eq!(grown.throttle_time_ms, 0);
    let refused: CreatePartitionsResponse =
        mutator.call(ApiKey::CreatePartitions, 3, &grow(15)).await;
    assert_eq!(refused.results[0].error_code, THROTTLING_QUOTA_EXCEEDED);
    assert!(refused.throttle_time_ms > 0, "{}", refused.throttle_time_ms);

    // DeleteTopics v4 is permissive: the topic is deleted (14 more tokens), and only the
    // throttle time says the quota is exceeded.
    broker.advance_clock_ms(refused.throttle_time_ms as i64);
    let request = DeleteTopicsRequest::default()
        .with_timeout_ms(5000)
        .with_topic_names(vec![TopicName(s("wide"))]);
    let deleted: DeleteTopicsResponse = mutator.call(ApiKey::DeleteTopics, 4, &request).await;
    assert_eq!(deleted.responses[0].error_code, 0);
    assert!(
        deleted.throttle_time_ms > 10_000,
        "{}",
        deleted.throttle_time_ms
    );

    // Other clients are not limited.
    let response = create_topics(&mut admin, 7, &[("free", 30)]).await;
    assert_eq!(response.topics[0].error_code, 0);
    assert_eq!(response.throttle_time_ms, 0);
}

/// Connects, sends ApiVersions, and says whether it was answered.
async fn served(broker: &TestBroker) -> bool {
    let mut client = broker.client().await;
    let (_, frame) = client.frame(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default());
    if client.try_send_raw(&frame).await.is_err() {
        return false;
    }
    client.read_frame().await.is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_creation_rate_closes_connections_over_the_rate() {
    let broker = TestBroker::start(&[]).await;
    let mut admin = broker.client().await;
    let ip = broker.addr().ip().to_string();
    // 2 connections per second over the 10 s minimum window: 20 are served, then refused.
    let results = alter(
        &mut admin,
        1,
        vec![(
            entity(&[("ip", Some(&ip))]),
            vec![set("connection_creation_rate", 2.0)],
        )],
        false,
    )
    .await;
    assert_eq!(results, vec![(0, None)]);
    // Stored and described as Kafka does, the default ip included.
    let default_ip = entity(&[("ip", None)]);
    let results = alter(
        &mut admin,
        1,
        vec![(default_ip, vec![set("connection_creation_rate", 100.0)])],
        false,
    )
    .await;
    assert_eq!(results, vec![(0, None)]);
    let request = DescribeClientQuotasRequest::default().with_components(vec![
        describe_client_quotas_request::ComponentData::default()
            .with_entity_type(s("ip"))
            .with_match_type(2)
            .with_match(None),
    ]);
    let described: DescribeClientQuotasResponse =
        admin.call(ApiKey::DescribeClientQuotas, 1, &request).await;
    let mut entries: Vec<(Option<String>, String, f64)> = described
        .entries
        .unwrap()
        .iter()
        .map(|e| {
            assert_eq!(e.entity.len(), 1);
            assert_eq!(e.entity[0].entity_type.as_str(), "ip");
            let name = e.entity[0].entity_name.as_ref().map(|n| n.to_string());
            (name, e.values[0].key.to_string(), e.values[0].value)
        })
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let rate = "connection_creation_rate".to_string();
    assert_eq!(
        entries,
        vec![(None, rate.clone(), 100.0), (Some(ip.clone()), rate, 2.0)]
    );

    let mut answered = 0;
    while answered < 40 && served(&broker).await {
        answered += 1;
    }
    assert_eq!(answered, 20, "the 21st connection is closed unserved");
    // The connection already open is not affected.
    let _: ApiVersionsResponse = admin
        .call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_user_scram_credentials_finds_none() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let describe = |users: Option<Vec<&str>>| {
        DescribeUserScramCredentialsRequest::default().with_users(users.map(|names| {
            names
                .into_iter()
                .map(|n| UserName::default().with_name(s(n)))
                .collect()
        }))
    };
    for all in [None, Some(vec![])] {
        let response: DescribeUserScramCredentialsResponse = client
            .call(ApiKey::DescribeUserScramCredentials, 0, &describe(all))
            .await;
        assert_eq!(response.error_code, 0);
        assert!(response.results.is_empty());
    }
    let response: DescribeUserScramCredentialsResponse = client
        .call(
            ApiKey::DescribeUserScramCredentials,
            0,
            &describe(Some(vec!["alice", "bob", "alice"])),
        )
        .await;
    let results: Vec<(String, i16, String)> = response
        .results
        .iter()
        .map(|r| {
            let message = r.error_message.as_deref().unwrap_or_default().to_string();
            (r.user.to_string(), r.error_code, message)
        })
        .collect();
    assert_eq!(
        results,
        vec![
            (
                "alice".into(),
                92,
                "Cannot describe SCRAM credentials for the same user twice in a single request: alice".into()
            ),
            (
                "bob".into(),
                91,
                "Attempt to describe a user credential that does not exist: bob".into()
            ),
        ]
    );
}
