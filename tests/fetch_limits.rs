//! Fetch byte limits across several partitions (KIP-74): the request's `max_bytes` is shared in
//! partition order, each partition is capped by its `partition_max_bytes`, and only the first
//! partition that returns data gets its first batch whole when that batch exceeds the limits.
//! Also the `log_start_offset` each partition reports.

mod common;

use bytes::{Buf, Bytes};
use common::data::{create_topic, fetch_partition, produce, topic_name};
use common::{batch, now_ms, Client, TestBroker};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::fetch_response::PartitionData;
use kafka_protocol::messages::*;
use kafka_protocol::records::{Compression, RecordBatchDecoder};

const TOPIC: &str = "limits";

/// Partition 0 stays empty; partition 1 holds two batches of 100 records (offsets 0..200);
/// partition 2 one batch of 5. Returns the sizes of partition 1's first and partition 2's batch.
async fn three_partitions(client: &mut Client) -> (usize, usize) {
    create_topic(client, TOPIC, 3).await;
    let big = batch(100, Compression::None, now_ms());
    for _ in 0..2 {
        assert_eq!(
            produce(client, 9, TOPIC, 1, big.clone()).await.error_code,
            0
        );
    }
    let small = batch(5, Compression::None, now_ms());
    assert_eq!(
        produce(client, 9, TOPIC, 2, small.clone()).await.error_code,
        0
    );
    (big.len(), small.len())
}

async fn fetch_many(
    client: &mut Client,
    max_bytes: i32,
    partitions: Vec<FetchPartition>,
) -> Vec<PartitionData> {
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(max_bytes)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(TOPIC))
            .with_partitions(partitions)]);
    let mut response: FetchResponse = client.call(ApiKey::Fetch, 12, &request).await;
    assert_eq!(response.error_code, 0);
    let partitions = response.responses.remove(0).partitions;
    for data in &partitions {
        assert_eq!(data.error_code, 0, "partition {}", data.partition_index);
    }
    partitions
}

/// The offsets of the whole batches in `records`; a trailing partial batch (which Kafka, too,
/// may send when a limit falls inside a batch) is skipped, as clients skip it.
fn whole_batch_offsets(records: &Bytes) -> Vec<i64> {
    let mut rest = records.clone();
    let mut offsets = Vec::new();
    while rest.len() >= 12 {
        let batch_bytes = 12 + (&rest[8..12]).get_i32() as usize;
        if rest.len() < batch_bytes {
            break;
        }
        let mut whole = rest.split_to(batch_bytes);
        let set = RecordBatchDecoder::decode(&mut whole).unwrap();
        offsets.extend(set.records.iter().map(|r| r.offset));
    }
    offsets
}

fn records_len(data: &PartitionData) -> usize {
    data.records.as_ref().map_or(0, Bytes::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_non_empty_partition_gets_a_whole_batch_larger_than_max_bytes() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let (big_bytes, _) = three_partitions(&mut client).await;
    let partitions = (0..3).map(|p| fetch_partition(p, 0, 1 << 20)).collect();
    let answer = fetch_many(&mut client, 200, partitions).await;
    assert!(big_bytes > 200);
    assert_eq!((records_len(&answer[0]), answer[0].high_watermark), (0, 0));
    assert_eq!(
        records_len(&answer[1]),
        big_bytes,
        "exactly the first batch: it is larger than max_bytes, and nothing more fits"
    );
    assert_eq!(
        whole_batch_offsets(answer[1].records.as_ref().unwrap()),
        (0..100).collect::<Vec<_>>()
    );
    assert_eq!(answer[1].high_watermark, 200);
    assert_eq!(
        (records_len(&answer[2]), answer[2].high_watermark),
        (0, 5),
        "max_bytes is used up: the next partition gets no records, but its watermarks"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_bytes_is_shared_across_partitions_in_order() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let (big_bytes, small_bytes) = three_partitions(&mut client).await;
    // Room for partition 1's first batch and 50 bytes of its second, nothing for partition 2.
    let max_bytes = big_bytes + 50;
    let partitions = (0..3).map(|p| fetch_partition(p, 0, 1 << 20)).collect();
    let answer = fetch_many(&mut client, max_bytes as i32, partitions).await;
    let total: usize = answer.iter().map(records_len).sum();
    assert!(
        total <= max_bytes,
        "{total} record bytes > max_bytes {max_bytes}"
    );
    assert_eq!(
        whole_batch_offsets(answer[1].records.as_ref().unwrap()),
        (0..100).collect::<Vec<_>>()
    );
    assert_eq!(records_len(&answer[2]), 0);

    // With room for everything, every partition's data comes back in full.
    let max_bytes = 2 * big_bytes + small_bytes;
    let partitions = (0..3).map(|p| fetch_partition(p, 0, 1 << 20)).collect();
    let answer = fetch_many(&mut client, max_bytes as i32, partitions).await;
    assert_eq!(
        whole_batch_offsets(answer[1].records.as_ref().unwrap()),
        (0..200).collect::<Vec<_>>()
    );
    assert_eq!(
        whole_batch_offsets(answer[2].records.as_ref().unwrap()),
        (0..5).collect::<Vec<_>>()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partition_max_bytes_caps_each_partition() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let (big_bytes, small_bytes) = three_partitions(&mut client).await;
    assert!(small_bytes < 200 && big_bytes > 200);
    // 200 bytes a partition: partition 1 (the first with data) gets one whole batch, not two;
    // partition 2's batch fits.
    let partitions = (0..3).map(|p| fetch_partition(p, 0, 200)).collect();
    let answer = fetch_many(&mut client, 1 << 20, partitions).await;
    assert_eq!(records_len(&answer[1]), big_bytes);
    assert_eq!(records_len(&answer[2]), small_bytes);
    // A partition after the first with data whose limit cannot hold its first batch gets no
    // bytes at all (Kafka replaces such an incomplete first batch with empty records).
    let partitions = vec![fetch_partition(1, 0, 200), fetch_partition(2, 0, 50)];
    let answer = fetch_many(&mut client, 1 << 20, partitions).await;
    assert_eq!(records_len(&answer[0]), big_bytes);
    assert_eq!(records_len(&answer[1]), 0);
    // Alone, the same partition is the first with data and gets its batch despite the limit.
    let answer = fetch_many(&mut client, 1 << 20, vec![fetch_partition(2, 0, 50)]).await;
    assert_eq!(records_len(&answer[0]), small_bytes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_partition_reports_its_log_start_offset() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    three_partitions(&mut client).await;
    let delete = DeleteRecordsRequest::default()
        .with_timeout_ms(5000)
        .with_topics(vec![delete_records_request::DeleteRecordsTopic::default()
            .with_name(topic_name(TOPIC))
            .with_partitions(vec![
                delete_records_request::DeleteRecordsPartition::default()
                    .with_partition_index(2)
                    .with_offset(3),
            ])]);
    let deleted: DeleteRecordsResponse = client.call(ApiKey::DeleteRecords, 2, &delete).await;
    assert_eq!(deleted.topics[0].partitions[0].error_code, 0);
    let partitions = vec![
        fetch_partition(0, 0, 1 << 20),
        fetch_partition(1, 150, 1 << 20),
        fetch_partition(2, 3, 1 << 20),
    ];
    let answer = fetch_many(&mut client, 1 << 20, partitions).await;
    let starts: Vec<(i64, i64)> = answer
        .iter()
        .map(|p| (p.log_start_offset, p.high_watermark))
        .collect();
    assert_eq!(starts, vec![(0, 0), (0, 200), (3, 5)]);
    // The batch holding offset 3 is returned whole; the client skips offsets below 3.
    assert_eq!(
        whole_batch_offsets(answer[2].records.as_ref().unwrap()),
        (0..5).collect::<Vec<_>>()
    );
}
