//! Idempotent producers over real sockets: InitProducerId, duplicate retries answered with their
//! original offsets, sequence gaps and fenced epochs refused, and state kept across restarts.

mod common;

use bytes::{Bytes, BytesMut};
use common::{now_ms, Client, TestBroker};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

fn idempotent_batch(producer_id: i64, epoch: i16, base_sequence: i32, count: i32) -> Bytes {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id,
            producer_epoch: epoch,
            timestamp_type: TimestampType::Creation,
            offset: i64::from(i),
            sequence: base_sequence + i,
            timestamp: now_ms(),
            key: None,
            value: Some(Bytes::from(format!("seq-{}", base_sequence + i))),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records.iter(),
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}

async fn produce(client: &mut Client, records: Bytes) -> (i16, i64) {
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_static_str("idem")))
            .with_partition_data(vec![PartitionProduceData::default()
                .with_index(0)
                .with_records(Some(records))])]);
    let response: ProduceResponse = client.call(ApiKey::Produce, 9, &request).await;
    let p = &response.responses[0].partition_responses[0];
    (p.error_code, p.base_offset)
}

async fn init_producer_id(client: &mut Client) -> i64 {
    let response: InitProducerIdResponse = client
        .call(
            ApiKey::InitProducerId,
            4,
            &InitProducerIdRequest::default()
                .with_transactional_id(None)
                .with_transaction_timeout_ms(60_000),
        )
        .await;
    assert_eq!(response.error_code, 0);
    assert_eq!(response.producer_epoch, 0);
    response.producer_id.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_are_deduplicated_and_gaps_refused_across_restarts() {
    let mut broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    let metadata = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(TopicName(StrBytes::from_static_str("idem"))))]))
        .with_allow_auto_topic_creation(true);
    let _: MetadataResponse = client.call(ApiKey::Metadata, 12, &metadata).await;

    let pid = init_producer_id(&mut client).await;
    assert_ne!(
        init_producer_id(&mut client).await,
        pid,
        "every InitProducerId gets a new id"
    );
    assert_eq!(
        produce(&mut client, idempotent_batch(pid, 0, 0, 5)).await,
        (0, 0)
    );
    assert_eq!(
        produce(&mut client, idempotent_batch(pid, 0, 5, 5)).await,
        (0, 5)
    );
    assert_eq!(
        produce(&mut client, idempotent_batch(pid, 0, 0, 5)).await,
        (0, 0),
        "a retry gets its original offset"
    );
    assert_eq!(
        produce(&mut client, idempotent_batch(pid, 0, 12, 1))
            .await
            .0,
        45,
        "OUT_OF_ORDER_SEQUENCE_NUMBER"
    );
    assert_eq!(
        produce(&mut client, idempotent_batch(pid, -1, 10, 1))
            .await
            .0,
        47,
        "INVALID_PRODUCER_EPOCH"
    );

    broker.restart().await;
    let mut client = broker.client().await;
    assert_eq!(
        produce(&mut client, idempotent_batch(pid, 0, 5, 5)).await,
        (0, 5),
        "the last batch is remembered across a restart"
    );
    assert_eq!(
        produce(&mut client, idempotent_batch(pid, 0, 10, 2)).await,
        (0, 10)
    );
    let next = init_producer_id(&mut client).await;
    assert!(next > pid + 1, "ids are never reused after a restart");

    // Everything stored: offsets 0..12 exactly once.
    let fetch = FetchRequest::default()
        .with_max_wait_ms(0)
        .with_max_bytes(1 << 20)
        .with_session_epoch(-1)
        .with_topics(vec![fetch_request::FetchTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("idem")))
            .with_partitions(vec![fetch_request::FetchPartition::default()
                .with_fetch_offset(0)
                .with_partition_max_bytes(1 << 20)
                .with_current_leader_epoch(-1)])]);
    let response: FetchResponse = client.call(ApiKey::Fetch, 11, &fetch).await;
    assert_eq!(response.responses[0].partitions[0].high_watermark, 12);
    let snapshots: Vec<_> = std::fs::read_dir(broker.dir.path().join("idem-0"))
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".snapshot"))
        .collect();
    assert!(
        !snapshots.is_empty(),
        "clean shutdown wrote a producer snapshot"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roll_writes_a_producer_snapshot_named_by_the_new_segment() {
    let broker = TestBroker::start(&[("log.segment.bytes", "1048576")]).await;
    let mut client = broker.client().await;
    let metadata = MetadataRequest::default()
        .with_topics(Some(vec![metadata_request::MetadataRequestTopic::default(
        )
        .with_name(Some(TopicName(StrBytes::from_static_str("idem"))))]))
        .with_allow_auto_topic_creation(true);
    let _: MetadataResponse = client.call(ApiKey::Metadata, 12, &metadata).await;
    let pid = init_producer_id(&mut client).await;
    // Batches of 200 small records are about 4 KiB each, so 400 of them roll at 1 MiB.
    for i in 0..400 {
        assert_eq!(
            produce(&mut client, idempotent_batch(pid, 0, i * 200, 200))
                .await
                .0,
            0
        );
    }
    let dir = broker.dir.path().join("idem-0");
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let segments: Vec<&String> = names
        .iter()
        .filter(|n| n.ends_with(".log") && !n.starts_with("00000000000000000000"))
        .collect();
    assert!(!segments.is_empty(), "the log rolled: {names:?}");
    for segment in segments {
        let snapshot = segment.replace(".log", ".snapshot");
        assert!(
            names.contains(&snapshot),
            "{snapshot} missing among {names:?}"
        );
    }
}
