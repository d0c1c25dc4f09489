//! Dynamic broker configs over real sockets: per-broker and cluster-default values, their
//! precedence over `server.properties`, topics without an override following them at once,
//! refusals that change nothing, and persistence across a restart.

mod common;

use common::configs::{describe_configs, incremental_alter_configs, BROKER, DELETE, SET, TOPIC};
use common::data;
use common::{Client, TestBroker};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::*;

/// (value, source, synonym sources) of one config.
async fn config(
    client: &mut Client,
    resource_type: i8,
    resource: &str,
    name: &str,
) -> (String, i8, Vec<i8>) {
    let result = describe_configs(client, resource_type, resource).await;
    assert_eq!(result.error_code, 0);
    let entry = result
        .configs
        .iter()
        .find(|c| c.name.as_str() == name)
        .unwrap_or_else(|| panic!("{name} missing"));
    (
        entry.value.as_ref().unwrap().to_string(),
        entry.config_source,
        entry.synonyms.iter().map(|s| s.source).collect(),
    )
}

async fn alter_broker(
    client: &mut Client,
    broker: &str,
    ops: &[(&str, i8, Option<&str>)],
) -> (i16, String) {
    let (error_code, message) = incremental_alter_configs(client, BROKER, broker, ops).await;
    (error_code, message.unwrap_or_default())
}

/// Produces `count` records stamped `timestamp_ms` onwards.
async fn produce_at(client: &mut Client, topic: &str, count: usize, timestamp_ms: i64) {
    let records = common::batch(
        count,
        kafka_protocol::records::Compression::None,
        timestamp_ms,
    );
    let p = data::produce(client, 9, topic, 0, records).await;
    assert_eq!(p.error_code, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dynamic_broker_configs_layer_apply_at_once_and_survive_restart() {
    let mut broker = TestBroker::start_with_manual_clock(&[
        ("log.retention.hours", "48"),
        ("log.segment.delete.delay.ms", "0"),
    ])
    .await;
    let mut client = broker.client().await;
    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(data::topic_name("follows"))
        .with_num_partitions(1)
        .with_replication_factor(-1)]);
    let created: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &create).await;
    assert_eq!(created.topics[0].error_code, 0);
    for _ in 0..3 {
        produce_at(&mut client, "follows", 10, broker.clock_ms()).await;
    }
    broker.advance_clock_ms(7_200_000);
    broker.run_retention_pass().await;
    assert_eq!(
        data::earliest_offset(&mut client, "follows", 0).await,
        0,
        "48 hours' retention keeps 2-hour-old records"
    );
    assert_eq!(
        config(&mut client, TOPIC, "follows", "retention.ms")
            .await
            .0,
        "172800000"
    );

    // Refusals change nothing: a static-only key, a bad value, another broker's id.
    let (error, message) =
        alter_broker(&mut client, "1", &[("num.partitions", SET, Some("3"))]).await;
    assert_eq!(
        (error, message.as_str()),
        (
            42,
            "Cannot update these configs dynamically: [num.partitions]"
        )
    );
    let (error, message) =
        alter_broker(&mut client, "", &[("log.retention.ms", SET, Some("abc"))]).await;
    assert_eq!(error, 42, "INVALID_REQUEST");
    assert!(message.contains("Not a number of type LONG"), "{message}");
    assert_eq!(
        alter_broker(&mut client, "7", &[("log.retention.ms", SET, Some("1"))])
            .await
            .0,
        42
    );
    assert_eq!(
        config(&mut client, TOPIC, "follows", "retention.ms")
            .await
            .1,
        4,
        "still server.properties"
    );

    // The cluster default applies to topics without an override at once.
    assert_eq!(
        alter_broker(
            &mut client,
            "",
            &[("log.retention.ms", SET, Some("3600000"))]
        )
        .await
        .0,
        0
    );
    assert_eq!(
        config(&mut client, TOPIC, "follows", "retention.ms").await,
        ("3600000".into(), 3, vec![3, 4, 5])
    );
    broker.run_retention_pass().await;
    assert_eq!(
        data::earliest_offset(&mut client, "follows", 0).await,
        30,
        "retention ran"
    );

    // This broker's own value beats the cluster default.
    assert_eq!(
        alter_broker(
            &mut client,
            "1",
            &[("log.retention.ms", SET, Some("7200001"))]
        )
        .await
        .0,
        0
    );
    let own = config(&mut client, BROKER, "1", "log.retention.ms").await;
    assert_eq!(own, ("7200001".into(), 2, vec![2, 3, 5]));

    broker.restart().await;
    let mut client = broker.client().await;
    assert_eq!(
        config(&mut client, TOPIC, "follows", "retention.ms").await,
        ("7200001".into(), 2, vec![2, 3, 4, 5]),
        "dynamic configs survive a restart"
    );
    assert_eq!(
        config(&mut client, BROKER, "", "log.retention.ms").await.0,
        "3600000"
    );
    assert_eq!(
        alter_broker(&mut client, "1", &[("log.retention.ms", DELETE, None)])
            .await
            .0,
        0
    );
    assert_eq!(
        config(&mut client, TOPIC, "follows", "retention.ms")
            .await
            .1,
        3,
        "back to the cluster default"
    );
}

/// Kafka reports a broker config it cannot change at runtime as read-only, and the others (the
/// topic defaults among them) as writable; topic configs are never read-only.
#[tokio::test]
async fn read_only_marks_the_broker_configs_kafka_cannot_change_at_runtime() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let node = describe_configs(&mut client, BROKER, "1").await;
    assert_eq!(node.error_code, 0);
    let read_only = |name: &str| {
        node.configs
            .iter()
            .find(|c| c.name.as_str() == name)
            .unwrap_or_else(|| panic!("{name} missing"))
            .read_only
    };
    assert!(read_only("num.partitions"));
    assert!(read_only("auto.create.topics.enable"));
    assert!(!read_only("log.retention.ms"));
    assert!(!read_only("message.max.bytes"));

    let create = CreateTopicsRequest::default().with_topics(vec![CreatableTopic::default()
        .with_name(data::topic_name("writable"))
        .with_num_partitions(1)
        .with_replication_factor(-1)]);
    let created: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &create).await;
    assert_eq!(created.topics[0].error_code, 0);
    let topic = describe_configs(&mut client, TOPIC, "writable").await;
    assert!(!topic.configs.is_empty());
    assert!(topic.configs.iter().all(|c| !c.read_only));
}
