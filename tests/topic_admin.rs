//! Topic configs and the admin APIs: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs,
//! CreatePartitions and DescribeCluster, over real sockets.

mod common;

use common::configs::{describe_configs, incremental_alter_configs, TOPIC};
use common::data::{self, create_topic_with_configs};
use common::{Client, TestBroker};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

async fn create(client: &mut Client, name: &str, partitions: i32, configs: &[(&str, &str)]) -> i16 {
    create_topic_with_configs(client, name, partitions, configs).await
}

fn value_and_source(
    result: &describe_configs_response::DescribeConfigsResult,
    name: &str,
) -> (String, i8) {
    let entry = result
        .configs
        .iter()
        .find(|c| c.name.as_str() == name)
        .unwrap_or_else(|| panic!("{name} missing"));
    (
        entry.value.as_ref().unwrap().to_string(),
        entry.config_source,
    )
}

async fn incremental(
    client: &mut Client,
    topic: &str,
    ops: &[(&str, i8, Option<&str>)],
) -> (i16, Option<String>) {
    incremental_alter_configs(client, TOPIC, topic, ops).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_and_alter_topic_configs_survive_restart() {
    let mut broker = TestBroker::start(&[("log.retention.hours", "48")]).await;
    let mut client = broker.client().await;
    assert_eq!(
        create(&mut client, "conf", 1, &[("cleanup.policy", "compact")]).await,
        0
    );
    assert_eq!(
        create(&mut client, "bad", 1, &[("retention.ms", "-7")]).await,
        40,
        "INVALID_CONFIG"
    );

    let result = describe_configs(&mut client, 2, "conf").await;
    assert_eq!(result.error_code, 0);
    assert!(result.configs.len() >= 30, "every topic config is listed");
    assert_eq!(
        value_and_source(&result, "cleanup.policy"),
        ("compact".into(), 1),
        "topic override"
    );
    assert_eq!(
        value_and_source(&result, "retention.ms"),
        ("172800000".into(), 4),
        "from server.properties"
    );
    assert_eq!(
        value_and_source(&result, "segment.bytes"),
        ("1073741824".into(), 5),
        "Kafka's default"
    );
    let retention = result
        .configs
        .iter()
        .find(|c| c.name.as_str() == "retention.ms")
        .unwrap();
    assert_eq!(retention.synonyms[0].name.as_str(), "log.retention.hours");
    assert_eq!(retention.config_type, 5, "LONG");
    assert!(retention
        .documentation
        .as_ref()
        .is_some_and(|d| !d.is_empty()));

    assert_eq!(
        incremental(
            &mut client,
            "conf",
            &[
                ("retention.ms", 0, Some("60000")),
                ("cleanup.policy", 2, Some("delete"))
            ]
        )
        .await
        .0,
        0
    );
    assert_eq!(
        incremental(&mut client, "conf", &[("retention.ms", 0, Some("banana"))])
            .await
            .0,
        40
    );
    assert_eq!(
        incremental(&mut client, "conf", &[("no.such.config", 0, Some("1"))])
            .await
            .0,
        40
    );
    assert_eq!(
        incremental(&mut client, "conf", &[("retention.ms", 2, Some("5"))])
            .await
            .0,
        40,
        "APPEND only on lists"
    );
    assert_eq!(
        incremental(&mut client, "missing", &[("retention.ms", 0, Some("1"))])
            .await
            .0,
        3
    );

    broker.restart().await;
    let mut client = broker.client().await;
    let result = describe_configs(&mut client, 2, "conf").await;
    assert_eq!(
        value_and_source(&result, "retention.ms"),
        ("60000".into(), 1),
        "altered config survives restart"
    );
    assert_eq!(
        value_and_source(&result, "cleanup.policy"),
        ("compact,delete".into(), 1)
    );

    assert_eq!(
        incremental(&mut client, "conf", &[("retention.ms", 1, None)])
            .await
            .0,
        0,
        "DELETE"
    );
    let result = describe_configs(&mut client, 2, "conf").await;
    assert_eq!(
        value_and_source(&result, "retention.ms").1,
        4,
        "back to the broker's value"
    );

    // AlterConfigs replaces the whole set.
    let request = AlterConfigsRequest::default().with_resources(vec![
        alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s("conf"))
            .with_configs(vec![alter_configs_request::AlterableConfig::default()
                .with_name(s("max.message.bytes"))
                .with_value(Some(s("2000")))]),
    ]);
    let response: AlterConfigsResponse = client.call(ApiKey::AlterConfigs, 1, &request).await;
    assert_eq!(response.responses[0].error_code, 0);
    let result = describe_configs(&mut client, 2, "conf").await;
    assert_eq!(
        value_and_source(&result, "max.message.bytes"),
        ("2000".into(), 1)
    );
    assert_eq!(
        value_and_source(&result, "cleanup.policy"),
        ("delete".into(), 5),
        "unlisted overrides are removed"
    );

    // acks=all with min.insync.replicas=2 on a one-broker cluster: NOT_ENOUGH_REPLICAS.
    assert_eq!(
        incremental(
            &mut client,
            "conf",
            &[("min.insync.replicas", 0, Some("2"))]
        )
        .await
        .0,
        0
    );
    let records = common::batch(
        1,
        kafka_protocol::records::Compression::None,
        common::now_ms(),
    );
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(1000)
        .with_topic_data(vec![produce_request::TopicProduceData::default()
            .with_name(TopicName(s("conf")))
            .with_partition_data(vec![
                produce_request::PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(records)),
            ])]);
    let response: ProduceResponse = client.call(ApiKey::Produce, 9, &request).await;
    assert_eq!(response.responses[0].partition_responses[0].error_code, 19);

    let unknown = describe_configs(&mut client, 2, "nope").await;
    assert_eq!(unknown.error_code, 3);
    let node = describe_configs(&mut client, 4, "1").await;
    assert_eq!(node.error_code, 0);
    assert_eq!(value_and_source(&node, "node.id"), ("1".into(), 5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_partitions_grows_only() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(create(&mut client, "grow", 2, &[]).await, 0);
    let request = |count: i32| {
        CreatePartitionsRequest::default().with_topics(vec![
            create_partitions_request::CreatePartitionsTopic::default()
                .with_name(TopicName(s("grow")))
                .with_count(count),
        ])
    };
    let response: CreatePartitionsResponse =
        client.call(ApiKey::CreatePartitions, 3, &request(5)).await;
    assert_eq!(response.results[0].error_code, 0);
    assert!(broker.dir.path().join("grow-4/partition.metadata").exists());
    let response: CreatePartitionsResponse =
        client.call(ApiKey::CreatePartitions, 3, &request(3)).await;
    assert_eq!(response.results[0].error_code, 37, "INVALID_PARTITIONS");
    let metadata: MetadataResponse = client
        .call(
            ApiKey::Metadata,
            12,
            &MetadataRequest::default().with_topics(None),
        )
        .await;
    assert_eq!(metadata.topics[0].partitions.len(), 5);

    let cluster: DescribeClusterResponse = client
        .call(
            ApiKey::DescribeCluster,
            1,
            &DescribeClusterRequest::default().with_endpoint_type(1),
        )
        .await;
    assert_eq!(cluster.controller_id, BrokerId(1));
    assert_eq!(cluster.brokers.len(), 1);
    assert!(!cluster.cluster_id.is_empty());
}

/// Produces `count` records stamped `timestamp_ms` onwards; returns the base offset.
async fn produce_at(client: &mut Client, topic: &str, count: usize, timestamp_ms: i64) -> i64 {
    let records = common::batch(
        count,
        kafka_protocol::records::Compression::None,
        timestamp_ms,
    );
    let p = data::produce(client, 9, topic, 0, records).await;
    assert_eq!(p.error_code, 0);
    p.base_offset
}

async fn earliest(client: &mut Client, topic: &str) -> i64 {
    data::earliest_offset(client, topic, 0).await
}

async fn fetch_error(client: &mut Client, topic: &str, offset: i64) -> i16 {
    let request = FetchRequest::default()
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(s(topic)))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_fetch_offset(offset)
                .with_partition_max_bytes(1 << 20)])]);
    let response: FetchResponse = client.call(ApiKey::Fetch, 12, &request).await;
    response.responses[0].partitions[0].error_code
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_records_moves_the_log_start_offset_for_good() {
    let mut broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(create(&mut client, "dr", 1, &[]).await, 0);
    for _ in 0..3 {
        produce_at(&mut client, "dr", 5, common::now_ms()).await;
    }
    let request = |offset: i64| {
        DeleteRecordsRequest::default().with_topics(vec![
            delete_records_request::DeleteRecordsTopic::default()
                .with_name(TopicName(s("dr")))
                .with_partitions(vec![
                    delete_records_request::DeleteRecordsPartition::default().with_offset(offset),
                ]),
        ])
    };
    let response: DeleteRecordsResponse = client.call(ApiKey::DeleteRecords, 2, &request(7)).await;
    assert_eq!(
        (
            response.topics[0].partitions[0].error_code,
            response.topics[0].partitions[0].low_watermark
        ),
        (0, 7)
    );
    let response: DeleteRecordsResponse = client.call(ApiKey::DeleteRecords, 2, &request(99)).await;
    assert_eq!(
        response.topics[0].partitions[0].error_code, 1,
        "beyond the high watermark: OFFSET_OUT_OF_RANGE"
    );
    assert_eq!(
        fetch_error(&mut client, "dr", 3).await,
        1,
        "reads below the log start offset fail"
    );
    assert_eq!(fetch_error(&mut client, "dr", 7).await, 0);
    assert_eq!(earliest(&mut client, "dr").await, 7);
    broker.restart().await;
    let mut client = broker.client().await;
    assert_eq!(
        earliest(&mut client, "dr").await,
        7,
        "the log start offset survives a restart"
    );

    let dirs: DescribeLogDirsResponse = client
        .call(
            ApiKey::DescribeLogDirs,
            4,
            &DescribeLogDirsRequest::default().with_topics(None),
        )
        .await;
    let partition = &dirs.results[0].topics[0].partitions[0];
    assert!(partition.partition_size > 0);
    assert!(dirs.results[0].total_bytes > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_deletes_old_segments_and_consumers_are_told() {
    let broker = TestBroker::start_with_manual_clock(&[("log.segment.delete.delay.ms", "0")]).await;
    let mut client = broker.client().await;
    assert_eq!(
        create(
            &mut client,
            "old",
            1,
            &[("retention.ms", "60000"), ("segment.bytes", "1048576")]
        )
        .await,
        0
    );
    assert_eq!(
        create(&mut client, "kept", 1, &[("retention.ms", "-1")]).await,
        0
    );
    for _ in 0..4 {
        produce_at(&mut client, "old", 10, broker.clock_ms()).await;
        produce_at(&mut client, "kept", 10, broker.clock_ms()).await;
    }
    // Each batch's largest timestamp is its first plus 9; Kafka deletes a segment only when
    // it is more than retention.ms older than now.
    broker.advance_clock_ms(60_000 + 9);
    broker.run_retention_pass().await;
    assert_eq!(
        earliest(&mut client, "old").await,
        0,
        "a segment exactly retention.ms old is kept"
    );
    broker.advance_clock_ms(1);
    broker.run_retention_pass().await;
    assert_eq!(
        earliest(&mut client, "old").await,
        40,
        "every segment past retention went, the log end offset stayed"
    );
    assert_eq!(
        fetch_error(&mut client, "old", 0).await,
        1,
        "OFFSET_OUT_OF_RANGE below the new start"
    );
    assert_eq!(
        earliest(&mut client, "kept").await,
        0,
        "retention.ms=-1 keeps everything"
    );
    assert_eq!(
        produce_at(&mut client, "old", 1, broker.clock_ms()).await,
        40,
        "appends continue at the log end offset"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_append_time_topics_carry_the_broker_time() {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(
        create(
            &mut client,
            "lat",
            1,
            &[("message.timestamp.type", "LogAppendTime")]
        )
        .await,
        0
    );
    let before = common::now_ms();
    // A producer timestamp far outside the CreateTime bounds is fine: the broker restamps it.
    let records = common::batch(
        3,
        kafka_protocol::records::Compression::Lz4,
        before + 86_400_000,
    );
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(s("lat")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let response: ProduceResponse = client.call(ApiKey::Produce, 9, &request).await;
    let p = &response.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 0);
    let after = common::now_ms();
    assert!(
        (before..=after).contains(&p.log_append_time_ms),
        "{} not in [{before}, {after}]",
        p.log_append_time_ms
    );

    let fetch = FetchRequest::default()
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(s("lat")))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)])]);
    let response: FetchResponse = client.call(ApiKey::Fetch, 12, &fetch).await;
    let bytes = response.responses[0].partitions[0].records.clone().unwrap();
    // Clients read every record's timestamp from the batch's max timestamp when bit 3 is set.
    let attributes = i16::from_be_bytes([bytes[21], bytes[22]]);
    let max_timestamp = i64::from_be_bytes(bytes[35..43].try_into().unwrap());
    assert_eq!(attributes & 0x08, 0x08, "timestamp type LogAppendTime");
    assert_eq!(max_timestamp, p.log_append_time_ms);
    let mut records = bytes.clone();
    let set = kafka_protocol::records::RecordBatchDecoder::decode(&mut records).unwrap();
    assert_eq!(
        set.records.len(),
        3,
        "the CRC still validates and the records are intact"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_changed_at_runtime_takes_effect() {
    let broker = TestBroker::start_with_manual_clock(&[("log.segment.delete.delay.ms", "0")]).await;
    let mut client = broker.client().await;
    assert_eq!(create(&mut client, "later", 1, &[]).await, 0);
    for _ in 0..3 {
        produce_at(&mut client, "later", 10, broker.clock_ms()).await;
    }
    broker.advance_clock_ms(7_200_000);
    broker.run_retention_pass().await;
    assert_eq!(
        earliest(&mut client, "later").await,
        0,
        "7 days' default retention keeps 2-hour-old records"
    );
    assert_eq!(
        incremental(
            &mut client,
            "later",
            &[("retention.ms", 0, Some("3600000"))]
        )
        .await
        .0,
        0
    );
    broker.run_retention_pass().await;
    assert_eq!(earliest(&mut client, "later").await, 30);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_topic_partitions_pages_with_a_cursor() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(create(&mut client, "a-topic", 3, &[]).await, 0);
    assert_eq!(create(&mut client, "b-topic", 2, &[]).await, 0);
    let request = |limit: i32, cursor: Option<(&str, i32)>| {
        DescribeTopicPartitionsRequest::default()
            .with_response_partition_limit(limit)
            .with_cursor(cursor.map(|(t, p)| {
                describe_topic_partitions_request::Cursor::default()
                    .with_topic_name(TopicName(s(t)))
                    .with_partition_index(p)
            }))
    };
    let first: DescribeTopicPartitionsResponse = client
        .call(ApiKey::DescribeTopicPartitions, 0, &request(4, None))
        .await;
    let listed: Vec<(String, usize)> = first
        .topics
        .iter()
        .map(|t| (t.name.as_ref().unwrap().to_string(), t.partitions.len()))
        .collect();
    assert_eq!(
        listed,
        vec![("a-topic".to_string(), 3), ("b-topic".to_string(), 1)]
    );
    let cursor = first
        .next_cursor
        .as_ref()
        .expect("a cursor when the limit cut the answer");
    assert_eq!(
        (cursor.topic_name.as_str(), cursor.partition_index),
        ("b-topic", 1)
    );
    let rest: DescribeTopicPartitionsResponse = client
        .call(
            ApiKey::DescribeTopicPartitions,
            0,
            &request(4, Some(("b-topic", 1))),
        )
        .await;
    assert_eq!(rest.topics.len(), 1);
    assert_eq!(rest.topics[0].partitions[0].partition_index, 1);
    assert!(rest.next_cursor.is_none());
    let p = &rest.topics[0].partitions[0];
    assert_eq!(
        (
            p.leader_id,
            p.isr_nodes.clone(),
            p.eligible_leader_replicas.clone()
        ),
        (BrokerId(1), vec![BrokerId(1)], Some(vec![]))
    );

    let unknown = DescribeTopicPartitionsRequest::default()
        .with_response_partition_limit(10)
        .with_topics(vec![
            describe_topic_partitions_request::TopicRequest::default()
                .with_name(TopicName(s("nope"))),
        ]);
    let response: DescribeTopicPartitionsResponse = client
        .call(ApiKey::DescribeTopicPartitions, 0, &unknown)
        .await;
    assert_eq!(response.topics[0].error_code, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_change_that_cannot_be_saved_does_not_take_effect() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    assert_eq!(
        create(&mut client, "unsaved", 1, &[("retention.ms", "1000000")]).await,
        0
    );
    // The configs file is replaced through `<file>.tmp`; a directory there makes the save fail.
    let blocker = broker.config().log_dir.join("sluice-topic-configs.tmp");
    std::fs::create_dir(&blocker).unwrap();
    let (error_code, _) =
        incremental(&mut client, "unsaved", &[("retention.ms", 0, Some("5"))]).await;
    assert_ne!(error_code, 0, "the change could not be saved");
    // DescribeConfigs reports the settings in force.
    let result = describe_configs(&mut client, 2, "unsaved").await;
    assert_eq!(
        value_and_source(&result, "retention.ms"),
        ("1000000".into(), 1)
    );
    std::fs::remove_dir(&blocker).unwrap();
    assert_eq!(
        incremental(&mut client, "unsaved", &[("retention.ms", 0, Some("5"))])
            .await
            .0,
        0
    );
    let result = describe_configs(&mut client, 2, "unsaved").await;
    assert_eq!(value_and_source(&result, "retention.ms"), ("5".into(), 1));
}
