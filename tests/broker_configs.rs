//! Dynamic broker configs over real sockets: per-broker and cluster-default values, their
//! precedence over `server.properties`, topics without an override following them at once,
//! refusals that change nothing, and persistence across a restart.

mod common;

use common::{Client, TestBroker};
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const SET: i8 = 0;
const DELETE: i8 = 1;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

async fn describe(
    client: &mut Client,
    resource_type: i8,
    name: &str,
) -> describe_configs_response::DescribeConfigsResult {
    let request = DescribeConfigsRequest::default()
        .with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(resource_type)
            .with_resource_name(s(name))
            .with_configuration_keys(None)])
        .with_include_synonyms(true);
    let mut response: DescribeConfigsResponse =
        client.call(ApiKey::DescribeConfigs, 4, &request).await;
    response.results.remove(0)
}

/// (value, source, synonym sources) of one config.
async fn config(
    client: &mut Client,
    resource_type: i8,
    resource: &str,
    name: &str,
) -> (String, i8, Vec<i8>) {
    let result = describe(client, resource_type, resource).await;
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
    let resource = AlterConfigsResource::default()
        .with_resource_type(BROKER)
        .with_resource_name(s(broker))
        .with_configs(
            ops.iter()
                .map(|(n, op, v)| {
                    AlterableConfig::default()
                        .with_name(s(n))
                        .with_config_operation(*op)
                        .with_value(v.map(s))
                })
                .collect(),
        );
    let response: IncrementalAlterConfigsResponse = client
        .call(
            ApiKey::IncrementalAlterConfigs,
            1,
            &IncrementalAlterConfigsRequest::default().with_resources(vec![resource]),
        )
        .await;
    let r = &response.responses[0];
    (
        r.error_code,
        r.error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default(),
    )
}

/// Produces `count` records stamped `timestamp_ms` onwards.
async fn produce_at(client: &mut Client, topic: &str, count: usize, timestamp_ms: i64) {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    let records = common::batch(
        count,
        kafka_protocol::records::Compression::None,
        timestamp_ms,
    );
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(s(topic)))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let response: ProduceResponse = client.call(ApiKey::Produce, 9, &request).await;
    assert_eq!(response.responses[0].partition_responses[0].error_code, 0);
}

async fn earliest(client: &mut Client, topic: &str) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(TopicName(s(topic)))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default().with_timestamp(-2),
            ])]);
    let response: ListOffsetsResponse = client.call(ApiKey::ListOffsets, 7, &request).await;
    response.topics[0].partitions[0].offset
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
        .with_name(TopicName(s("follows")))
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
        earliest(&mut client, "follows").await,
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
            "Cannot update these configs dynamically: Set(num.partitions)"
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
    assert_eq!(earliest(&mut client, "follows").await, 30, "retention ran");

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
    let node = describe(&mut client, BROKER, "1").await;
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
        .with_name(TopicName(s("writable")))
        .with_num_partitions(1)
        .with_replication_factor(-1)]);
    let created: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &create).await;
    assert_eq!(created.topics[0].error_code, 0);
    let topic = describe(&mut client, TOPIC, "writable").await;
    assert!(!topic.configs.is_empty());
    assert!(topic.configs.iter().all(|c| !c.read_only));
}
