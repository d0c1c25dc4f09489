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

/// FindCoordinator v3 for a transactional id: (error code, node id).
pub async fn find_txn_coordinator(client: &mut Client, transactional_id: &str) -> (i16, i32) {
    let request = FindCoordinatorRequest::default()
        .with_key(s(transactional_id))
        .with_key_type(1);
    let response: FindCoordinatorResponse = client.call(ApiKey::FindCoordinator, 3, &request).await;
    (response.error_code, response.node_id.0)
}

/// InitProducerId v`version` with a transactional id; (error code, producer id, epoch).
pub async fn init_txn(
    client: &mut Client,
    version: i16,
    transactional_id: &str,
    timeout_ms: i32,
    expected: (i64, i16),
) -> (i16, i64, i16) {
    let request = InitProducerIdRequest::default()
        .with_transactional_id(Some(s(transactional_id).into()))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(expected.0))
        .with_producer_epoch(expected.1);
    let response: InitProducerIdResponse =
        client.call(ApiKey::InitProducerId, version, &request).await;
    (
        response.error_code,
        response.producer_id.0,
        response.producer_epoch,
    )
}

/// InitProducerId v4 for a new producer instance, retried while the coordinator aborts an open
/// transaction (CONCURRENT_TRANSACTIONS), as clients retry it.
pub async fn init_txn_ok(
    client: &mut Client,
    transactional_id: &str,
    timeout_ms: i32,
) -> (i64, i16) {
    for _ in 0..100 {
        let (error, producer_id, epoch) =
            init_txn(client, 4, transactional_id, timeout_ms, (-1, -1)).await;
        match error {
            0 => return (producer_id, epoch),
            51 => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            other => panic!("InitProducerId for {transactional_id}: error {other}"),
        }
    }
    panic!("InitProducerId for {transactional_id} kept answering CONCURRENT_TRANSACTIONS");
}

/// AddPartitionsToTxn v3 (a client's); each partition's error code, in request order.
pub async fn add_partitions(
    client: &mut Client,
    transactional_id: &str,
    (producer_id, epoch): (i64, i16),
    partitions: &[(&str, i32)],
) -> Vec<i16> {
    add_partitions_at(
        client,
        3,
        transactional_id,
        (producer_id, epoch),
        partitions,
    )
    .await
}

pub async fn add_partitions_at(
    client: &mut Client,
    version: i16,
    transactional_id: &str,
    (producer_id, epoch): (i64, i16),
    partitions: &[(&str, i32)],
) -> Vec<i16> {
    let mut topics: Vec<add_partitions_to_txn_request::AddPartitionsToTxnTopic> = Vec::new();
    for (topic, partition) in partitions {
        match topics.iter_mut().find(|t| t.name.as_str() == *topic) {
            Some(t) => t.partitions.push(*partition),
            None => topics.push(
                add_partitions_to_txn_request::AddPartitionsToTxnTopic::default()
                    .with_name(topic_name(topic))
                    .with_partitions(vec![*partition]),
            ),
        }
    }
    let request = AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(s(transactional_id).into())
        .with_v3_and_below_producer_id(ProducerId(producer_id))
        .with_v3_and_below_producer_epoch(epoch)
        .with_v3_and_below_topics(topics);
    let response: AddPartitionsToTxnResponse = client
        .call(ApiKey::AddPartitionsToTxn, version, &request)
        .await;
    let mut codes = Vec::new();
    for (topic, partition) in partitions {
        let result = response
            .results_by_topic_v3_and_below
            .iter()
            .find(|t| t.name.as_str() == *topic)
            .and_then(|t| {
                t.results_by_partition
                    .iter()
                    .find(|p| p.partition_index == *partition)
            })
            .expect("a result for every partition");
        codes.push(result.partition_error_code);
    }
    codes
}

/// EndTxn v`version`; (error code, producer id, epoch) of the response.
pub async fn end_txn(
    client: &mut Client,
    version: i16,
    transactional_id: &str,
    (producer_id, epoch): (i64, i16),
    commit: bool,
) -> (i16, i64, i16) {
    let request = EndTxnRequest::default()
        .with_transactional_id(s(transactional_id).into())
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_committed(commit);
    let response: EndTxnResponse = client.call(ApiKey::EndTxn, version, &request).await;
    (
        response.error_code,
        response.producer_id.0,
        response.producer_epoch,
    )
}

/// DescribeTransactions v0 of one id: (error code, state, producer id, epoch, partitions).
pub async fn describe_txn(
    client: &mut Client,
    transactional_id: &str,
) -> (i16, String, i64, i16, Vec<(String, i32)>) {
    let request = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![s(transactional_id).into()]);
    let response: DescribeTransactionsResponse =
        client.call(ApiKey::DescribeTransactions, 0, &request).await;
    let state = &response.transaction_states[0];
    let mut partitions: Vec<(String, i32)> = state
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic.to_string(), *p)))
        .collect();
    partitions.sort();
    (
        state.error_code,
        state.transaction_state.to_string(),
        state.producer_id.0,
        state.producer_epoch,
        partitions,
    )
}

/// TxnOffsetCommit v`version` of one offset for partition 0 of `topic`; its error code.
pub async fn txn_offset_commit(
    client: &mut Client,
    version: i16,
    transactional_id: &str,
    group: &str,
    (producer_id, epoch): (i64, i16),
    (generation, member): (i32, &str),
    (topic, offset): (&str, i64),
) -> i16 {
    let request = TxnOffsetCommitRequest::default()
        .with_transactional_id(s(transactional_id).into())
        .with_group_id(s(group).into())
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_generation_id(generation)
        .with_member_id(s(member))
        .with_topics(vec![
            txn_offset_commit_request::TxnOffsetCommitRequestTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![
                    txn_offset_commit_request::TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(offset)
                        .with_committed_leader_epoch(-1),
                ]),
        ]);
    let response: TxnOffsetCommitResponse = client
        .call(ApiKey::TxnOffsetCommit, version, &request)
        .await;
    response.topics[0].partitions[0].error_code
}

/// AddOffsetsToTxn v3; its error code.
pub async fn add_offsets(
    client: &mut Client,
    transactional_id: &str,
    (producer_id, epoch): (i64, i16),
    group: &str,
) -> i16 {
    let request = AddOffsetsToTxnRequest::default()
        .with_transactional_id(s(transactional_id).into())
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(epoch)
        .with_group_id(s(group).into());
    let response: AddOffsetsToTxnResponse = client.call(ApiKey::AddOffsetsToTxn, 3, &request).await;
    response.error_code
}

/// OffsetFetch v7 of partition 0 of `topic`: (offset, error code).
pub async fn fetch_offset(
    client: &mut Client,
    group: &str,
    topic: &str,
    require_stable: bool,
) -> (i64, i16) {
    let request = OffsetFetchRequest::default()
        .with_group_id(s(group).into())
        .with_require_stable(require_stable)
        .with_topics(Some(vec![
            offset_fetch_request::OffsetFetchRequestTopic::default()
                .with_name(topic_name(topic))
                .with_partition_indexes(vec![0]),
        ]));
    let response: OffsetFetchResponse = client.call(ApiKey::OffsetFetch, 7, &request).await;
    let p = &response.topics[0].partitions[0];
    (p.committed_offset, p.error_code)
}

/// The offset after the last batch in fetched `records` (an emptied batch counts), None when
/// they hold no whole batch.
pub fn next_offset(records: &Option<Bytes>) -> Option<i64> {
    let mut bytes: &[u8] = records.as_deref().unwrap_or_default();
    let mut next = None;
    while let Ok(header) = sluice::record_batch::header::BatchHeader::parse(bytes) {
        if header.total_size() > bytes.len() {
            break;
        }
        next = Some(header.last_offset() + 1);
        bytes = &bytes[header.total_size()..];
    }
    next
}
