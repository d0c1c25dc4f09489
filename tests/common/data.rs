//! Raw-protocol helpers for tests that create topics, produce batches and fetch them back.

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::RecordBatchDecoder;

use super::Client;

pub fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

pub async fn create_topic(client: &mut Client, name: &str, partitions: i32) {
    let error_code = create_topic_with_configs(client, name, partitions, &[]).await;
    assert_eq!(error_code, 0, "creating {name}");
}

/// Creates a topic through CreateTopics v7 with `partitions` (-1: the broker's default) and
/// topic `configs`; returns the topic's error code.
pub async fn create_topic_with_configs(
    client: &mut Client,
    name: &str,
    partitions: i32,
    configs: &[(&str, &str)],
) -> i16 {
    let s = |text: &str| StrBytes::from_string(text.to_string());
    let topic = create_topics_request::CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(partitions)
        .with_replication_factor(-1)
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    create_topics_request::CreatableTopicConfig::default()
                        .with_name(s(k))
                        .with_value(Some(s(v)))
                })
                .collect(),
        );
    let request = CreateTopicsRequest::default().with_topics(vec![topic]);
    let response: CreateTopicsResponse = client.call(ApiKey::CreateTopics, 7, &request).await;
    response.topics[0].error_code
}

/// ListOffsets v7 for one partition at `timestamp` (-1 latest, -2 earliest, or a time).
pub async fn list_offset(
    client: &mut Client,
    topic: &str,
    partition: i32,
    timestamp: i64,
) -> list_offsets_response::ListOffsetsPartitionResponse {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(timestamp),
            ])]);
    let mut response: ListOffsetsResponse = client.call(ApiKey::ListOffsets, 7, &request).await;
    response.topics[0].partitions.remove(0)
}

/// The log start offset of a partition (ListOffsets v7, timestamp -2: earliest).
pub async fn earliest_offset(client: &mut Client, topic: &str, partition: i32) -> i64 {
    list_offset(client, topic, partition, -2).await.offset
}

/// A Produce request carrying `records` for one partition.
pub fn produce_request(acks: i16, topic: &str, partition: i32, records: Bytes) -> ProduceRequest {
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(partition)
                .with_records(Some(records))])])
}

/// Produces with `acks` and returns the one partition's response.
pub async fn produce_acks(
    client: &mut Client,
    version: i16,
    acks: i16,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> produce_response::PartitionProduceResponse {
    let request = produce_request(acks, topic, partition, records);
    let mut response: ProduceResponse = client.call(ApiKey::Produce, version, &request).await;
    response.responses.remove(0).partition_responses.remove(0)
}

/// Produces with acks=-1 and returns the one partition's response.
pub async fn produce(
    client: &mut Client,
    version: i16,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> produce_response::PartitionProduceResponse {
    produce_acks(client, version, -1, topic, partition, records).await
}

pub fn fetch_partition(partition: i32, offset: i64, partition_max_bytes: i32) -> FetchPartition {
    FetchPartition::default()
        .with_partition(partition)
        .with_fetch_offset(offset)
        .with_current_leader_epoch(-1)
        .with_partition_max_bytes(partition_max_bytes)
}

pub fn fetch_request(
    topic: &str,
    partition: i32,
    offset: i64,
    max_wait_ms: i32,
    partition_max_bytes: i32,
) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(50 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![fetch_partition(
                partition,
                offset,
                partition_max_bytes,
            )])])
}

/// Sends a Fetch v12 and returns its first partition.
pub async fn fetch(client: &mut Client, request: &FetchRequest) -> fetch_response::PartitionData {
    let mut response: FetchResponse = client.call(ApiKey::Fetch, 12, request).await;
    assert_eq!(response.error_code, 0);
    response.responses.remove(0).partitions.remove(0)
}

pub fn decode_offsets_and_values(mut records: Bytes) -> Vec<(i64, Bytes)> {
    let mut out = Vec::new();
    while !records.is_empty() {
        let set = RecordBatchDecoder::decode(&mut records).unwrap();
        out.extend(
            set.records
                .into_iter()
                .map(|r| (r.offset, r.value.unwrap())),
        );
    }
    out
}

/// The offsets of every record in `records`.
pub fn offsets(records: Option<Bytes>) -> Vec<i64> {
    decode_offsets_and_values(records.unwrap_or_default())
        .iter()
        .map(|(offset, _)| *offset)
        .collect()
}

/// Fetches partition `partition` of `topic` from offset 0 and returns every record's offset.
pub async fn fetch_all_offsets(client: &mut Client, topic: &str, partition: i32) -> Vec<i64> {
    let data = fetch(client, &fetch_request(topic, partition, 0, 0, 50 << 20)).await;
    assert_eq!(data.error_code, 0);
    offsets(data.records)
}
