//! Raw-protocol helpers for transaction tests: transactional batches, markers written with
//! WriteTxnMarkers, produce with a transactional id, fetches and offset lookups at an isolation
//! level, and the records a fetch returned with their batch's producer and control flag.

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use super::data::{fetch_partition, produce_request, topic_name};
use super::{now_ms, Client};

pub const READ_UNCOMMITTED: i8 = 0;
pub const READ_COMMITTED: i8 = 1;

/// A transactional batch of `count` records of the producer, values `<tag>-<i>`.
pub fn txn_batch(producer_id: i64, epoch: i16, base_sequence: i32, count: i32, tag: &str) -> Bytes {
    producer_batch(producer_id, epoch, base_sequence, count, tag, true)
}

/// A batch of the producer, transactional or plain (idempotent).
pub fn producer_batch(
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
    count: i32,
    tag: &str,
    transactional: bool,
) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(i),
            sequence: base_sequence + i,
            timestamp: now_ms(),
            key: Some(Bytes::from(format!("k{i}"))),
            value: Some(Bytes::from(format!("{tag}-{i}"))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, records.iter(), &options).unwrap();
    buf.freeze()
}

/// Produces `records` to one partition at `version` with `transactional_id`; returns the
/// partition's response.
pub async fn produce_txn(
    client: &mut Client,
    version: i16,
    transactional_id: Option<&str>,
    topic: &str,
    partition: i32,
    records: Bytes,
) -> produce_response::PartitionProduceResponse {
    let request = produce_request(-1, topic, partition, records)
        .with_transactional_id(transactional_id.map(|t| topic_name(t).0.into()));
    let mut response: ProduceResponse = client.call(ApiKey::Produce, version, &request).await;
    response.responses.remove(0).partition_responses.remove(0)
}

/// WriteTxnMarkers v1 for one partition; returns its error code.
pub async fn write_marker(
    client: &mut Client,
    topic: &str,
    partition: i32,
    (producer_id, epoch): (i64, i16),
    commit: bool,
    coordinator_epoch: i32,
) -> i16 {
    let marker = write_txn_markers_request::WritableTxnMarker::default()
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_transaction_result(commit)
        .with_coordinator_epoch(coordinator_epoch)
        .with_topics(vec![
            write_txn_markers_request::WritableTxnMarkerTopic::default()
                .with_name(topic_name(topic))
                .with_partition_indexes(vec![partition]),
        ]);
    let request = WriteTxnMarkersRequest::default().with_markers(vec![marker]);
    let response: WriteTxnMarkersResponse = client.call(ApiKey::WriteTxnMarkers, 1, &request).await;
    response.markers[0].topics[0].partitions[0].error_code
}

/// A Fetch v12 of one partition from `offset` at `isolation_level`, without waiting.
pub async fn fetch_at(
    client: &mut Client,
    topic: &str,
    partition: i32,
    offset: i64,
    isolation_level: i8,
) -> fetch_response::PartitionData {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(0)
        .with_max_bytes(50 << 20)
        .with_isolation_level(isolation_level)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(vec![fetch_partition(partition, offset, 50 << 20)])]);
    let mut response: FetchResponse = client.call(ApiKey::Fetch, 12, &request).await;
    assert_eq!(response.error_code, 0);
    response.responses.remove(0).partitions.remove(0)
}

/// The aborted transactions of a fetch answer as (producer id, first offset).
pub fn aborted(data: &fetch_response::PartitionData) -> Option<Vec<(i64, i64)>> {
    data.aborted_transactions.as_ref().map(|txns| {
        txns.iter()
            .map(|t| (t.producer_id.0, t.first_offset))
            .collect()
    })
}

/// One fetched record: offset, value, its batch's producer id and whether it is a marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub offset: i64,
    pub value: Bytes,
    pub producer_id: i64,
    pub control: bool,
}

pub fn fetched(records: Option<Bytes>) -> Vec<Fetched> {
    let mut records = records.unwrap_or_default();
    let mut out = Vec::new();
    while !records.is_empty() {
        let set = RecordBatchDecoder::decode(&mut records).unwrap();
        out.extend(set.records.into_iter().map(|r| Fetched {
            offset: r.offset,
            value: r.value.unwrap_or_default(),
            producer_id: r.producer_id,
            control: r.control,
        }));
    }
    out
}

/// What a read_committed consumer delivers from a fetch answer: the records of batches not
/// aborted (Kafka's consumer rule: a producer's records from an aborted transaction's first
/// offset until its ABORT marker are dropped) and no markers, as (offset, value).
pub fn committed_view(data: &fetch_response::PartitionData) -> Vec<(i64, String)> {
    let mut aborted: Vec<(i64, i64)> = aborted(data).unwrap_or_default();
    aborted.sort_by_key(|(_, first)| *first);
    let mut active: Vec<i64> = Vec::new();
    let mut out = Vec::new();
    for record in fetched(data.records.clone()) {
        while let Some(&(pid, first)) = aborted.first() {
            if first > record.offset {
                break;
            }
            active.push(pid);
            aborted.remove(0);
        }
        if record.control {
            active.retain(|pid| *pid != record.producer_id);
            continue;
        }
        if active.contains(&record.producer_id) {
            continue;
        }
        out.push((
            record.offset,
            String::from_utf8_lossy(&record.value).into_owned(),
        ));
    }
    out
}

/// ListOffsets v7 latest (-1) at `isolation_level`.
pub async fn latest_offset(
    client: &mut Client,
    topic: &str,
    partition: i32,
    isolation_level: i8,
) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(isolation_level)
        .with_topics(vec![list_offsets_request::ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(vec![
                list_offsets_request::ListOffsetsPartition::default()
                    .with_partition_index(partition)
                    .with_timestamp(-1),
            ])]);
    let response: ListOffsetsResponse = client.call(ApiKey::ListOffsets, 7, &request).await;
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    partition.offset
}

/// DescribeProducers v0 of one partition: (producer id, epoch, coordinator epoch, current
/// transaction start offset) of each, by producer id.
pub async fn describe_producers(
    client: &mut Client,
    topic: &str,
    partition: i32,
) -> Vec<(i64, i32, i32, i64)> {
    let request = DescribeProducersRequest::default().with_topics(vec![
        describe_producers_request::TopicRequest::default()
            .with_name(topic_name(topic))
            .with_partition_indexes(vec![partition]),
    ]);
    let response: DescribeProducersResponse =
        client.call(ApiKey::DescribeProducers, 0, &request).await;
    let partition = &response.topics[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    let mut producers: Vec<_> = partition
        .active_producers
        .iter()
        .map(|p| {
            (
                p.producer_id.0,
                p.producer_epoch,
                p.coordinator_epoch,
                p.current_txn_start_offset,
            )
        })
        .collect();
    producers.sort();
    producers
}

pub fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}
