//! Produce, Fetch and ListOffsets over real sockets against an in-process broker.

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::data::{
    create_topic, decode_offsets_and_values, fetch, fetch_request, produce, topic_name,
};
use common::{batch, now_ms, Client, TestBroker};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::*;
use kafka_protocol::records::Compression;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_then_fetch_round_trips_every_codec_and_survives_restart() {
    let mut broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "codecs", 1).await;
    let codecs = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];
    for (i, codec) in codecs.into_iter().enumerate() {
        let response = produce(&mut client, 9, "codecs", 0, batch(10, codec, now_ms())).await;
        assert_eq!(
            response.error_code, 0,
            "{codec:?}: {:?}",
            response.error_message
        );
        assert_eq!(response.base_offset, i as i64 * 10);
    }
    let check = |data: fetch_response::PartitionData| {
        assert_eq!(data.error_code, 0);
        assert_eq!(data.high_watermark, 50);
        assert_eq!(data.last_stable_offset, 50);
        let records = decode_offsets_and_values(data.records.unwrap());
        let offsets: Vec<i64> = records.iter().map(|(o, _)| *o).collect();
        assert_eq!(offsets, (0..50).collect::<Vec<_>>());
        assert_eq!(records[13].1, Bytes::from("v3"));
    };
    check(fetch(&mut client, &fetch_request("codecs", 0, 0, 0, 1 << 20)).await);
    broker.restart().await;
    let mut client = broker.client().await;
    check(fetch(&mut client, &fetch_request("codecs", 0, 0, 0, 1 << 20)).await);
    assert!(
        !broker.dir.path().join(".kafka_cleanshutdown").exists(),
        "marker is deleted at start-up"
    );
    assert!(broker
        .dir
        .path()
        .join("codecs-0/00000000000000000000.log")
        .exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_inside_a_batch_returns_the_whole_batch_and_limits_apply() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "t", 1).await;
    for _ in 0..3 {
        assert_eq!(
            produce(
                &mut client,
                9,
                "t",
                0,
                batch(5, Compression::None, now_ms())
            )
            .await
            .error_code,
            0
        );
    }
    let data = fetch(&mut client, &fetch_request("t", 0, 7, 0, 1 << 20)).await;
    let offsets: Vec<i64> = decode_offsets_and_values(data.records.unwrap())
        .iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(
        offsets.first(),
        Some(&5),
        "starts at the batch containing offset 7"
    );
    // A partition limit smaller than one batch still returns the first whole batch (KIP-74).
    let data = fetch(&mut client, &fetch_request("t", 0, 0, 0, 1)).await;
    let offsets: Vec<i64> = decode_offsets_and_values(data.records.unwrap())
        .iter()
        .map(|r| r.0)
        .collect();
    assert_eq!(offsets, (0..5).collect::<Vec<_>>());
    // Past the end and before the start: OFFSET_OUT_OF_RANGE with the current watermarks.
    let data = fetch(&mut client, &fetch_request("t", 0, 16, 0, 1 << 20)).await;
    assert_eq!(data.error_code, 1);
    assert_eq!(data.high_watermark, 15);
    let data = fetch(&mut client, &fetch_request("t", 0, -5, 0, 1 << 20)).await;
    assert_eq!(data.error_code, 1);
    // At the log end offset: no error, no records.
    let data = fetch(&mut client, &fetch_request("t", 0, 15, 0, 1 << 20)).await;
    assert_eq!(data.error_code, 0);
    assert!(data.records.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_fetch_is_woken_by_an_append() {
    let broker = TestBroker::start(&[]).await;
    let mut producer = broker.client().await;
    create_topic(&mut producer, "wake", 2).await;
    let mut consumer = broker.client().await;
    let waiting = tokio::spawn(async move {
        let started = Instant::now();
        let data = fetch(&mut consumer, &fetch_request("wake", 0, 0, 20_000, 1 << 20)).await;
        (data, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "a fetch with no data waits for max_wait_ms"
    );
    // An append to another partition does not answer it.
    let other = produce(
        &mut producer,
        9,
        "wake",
        1,
        batch(1, Compression::None, now_ms()),
    )
    .await;
    assert_eq!(other.error_code, 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "only an append to its own partition answers a parked fetch"
    );
    assert_eq!(
        produce(
            &mut producer,
            9,
            "wake",
            0,
            batch(3, Compression::None, now_ms())
        )
        .await
        .error_code,
        0
    );
    let (data, waited) = waiting.await.unwrap();
    assert!(
        waited < Duration::from_secs(10),
        "woken by the append, not by the 20 s timeout"
    );
    assert_eq!(decode_offsets_and_values(data.records.unwrap()).len(), 3);

    // With nothing arriving, the fetch returns empty once max_wait_ms has passed.
    let mut consumer = broker.client().await;
    let started = Instant::now();
    let data = fetch(&mut consumer, &fetch_request("wake", 0, 3, 200, 1 << 20)).await;
    assert!(started.elapsed() >= Duration::from_millis(190));
    assert!(data.records.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn produce_validation_answers_with_kafkas_error_codes() {
    let broker = TestBroker::start(&[("message.max.bytes", "2000")]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "v", 1).await;
    let good = batch(3, Compression::None, now_ms());

    let mut corrupt = good.to_vec();
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0xff;
    assert_eq!(
        produce(&mut client, 9, "v", 0, corrupt.into())
            .await
            .error_code,
        2,
        "CORRUPT_MESSAGE"
    );

    let mut two = good.to_vec();
    two.extend_from_slice(&good);
    assert_eq!(
        produce(&mut client, 9, "v", 0, two.into()).await.error_code,
        87,
        "INVALID_RECORD"
    );

    let mut based = good.to_vec();
    based[7] = 5;
    assert_eq!(
        produce(&mut client, 9, "v", 0, based.into())
            .await
            .error_code,
        87,
        "non-zero base offset"
    );

    let big = batch(200, Compression::None, now_ms());
    assert_eq!(
        produce(&mut client, 9, "v", 0, big).await.error_code,
        10,
        "MESSAGE_TOO_LARGE"
    );

    let future = batch(1, Compression::None, now_ms() + 7_200_000);
    assert_eq!(
        produce(&mut client, 9, "v", 0, future).await.error_code,
        32,
        "INVALID_TIMESTAMP"
    );

    assert_eq!(
        produce(&mut client, 9, "nope", 0, good.clone())
            .await
            .error_code,
        3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(
        produce(&mut client, 9, "v", 7, good.clone())
            .await
            .error_code,
        3
    );
    assert_eq!(
        produce(
            &mut client,
            3,
            "v",
            0,
            batch(2, Compression::Zstd, now_ms())
        )
        .await
        .error_code,
        76,
        "zstd before v7"
    );

    // A compressed batch that claims 2^31-1 records (CRC recomputed, so only the count lies).
    let mut lying = batch(10, Compression::Zstd, now_ms()).to_vec();
    lying[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes());
    lying[57..61].copy_from_slice(&i32::MAX.to_be_bytes());
    let crc = crc32c::crc32c(&lying[21..]);
    lying[17..21].copy_from_slice(&crc.to_be_bytes());
    assert_eq!(
        produce(&mut client, 9, "v", 0, lying.into())
            .await
            .error_code,
        2,
        "CORRUPT_MESSAGE"
    );

    // None of the refused batches was stored.
    let ok = produce(&mut client, 9, "v", 0, good).await;
    assert_eq!((ok.error_code, ok.base_offset), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_zero_gets_no_response_and_errors_close_the_connection() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "a0", 1).await;
    let request = |topic: &str| {
        ProduceRequest::default()
            .with_acks(0)
            .with_timeout_ms(1000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(topic_name(topic))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(batch(2, Compression::None, now_ms())))])])
    };
    let (_, frame) = client.frame(ApiKey::Produce, 9, &request("a0"));
    client.send_raw(&frame).await;
    // The next request's response comes first: nothing was written for the acks=0 produce.
    let data = fetch(&mut client, &fetch_request("a0", 0, 0, 0, 1 << 20)).await;
    assert_eq!(decode_offsets_and_values(data.records.unwrap()).len(), 2);
    let (_, frame) = client.frame(ApiKey::Produce, 9, &request("missing"));
    client.send_raw(&frame).await;
    assert!(client.is_closed().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_earliest_latest_and_by_timestamp() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "lo", 1).await;
    let base = now_ms() - 60_000;
    for i in 0..4 {
        // Batches of 5 records with timestamps base + 1000*i + 0..4.
        produce(
            &mut client,
            9,
            "lo",
            0,
            batch(5, Compression::Lz4, base + 1000 * i),
        )
        .await;
    }
    let query = |timestamp: i64| {
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name("lo"))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(timestamp)
                    .with_current_leader_epoch(-1)])])
    };
    async fn ask(client: &mut Client, request: ListOffsetsRequest) -> (i64, i64) {
        let mut response: ListOffsetsResponse = client.call(ApiKey::ListOffsets, 7, &request).await;
        let p = response.topics.remove(0).partitions.remove(0);
        assert_eq!(p.error_code, 0);
        (p.offset, p.timestamp)
    }
    assert_eq!(ask(&mut client, query(-2)).await.0, 0);
    assert_eq!(ask(&mut client, query(-1)).await.0, 20);
    assert_eq!(ask(&mut client, query(-3)).await, (19, base + 3004));
    assert_eq!(ask(&mut client, query(base)).await, (0, base));
    assert_eq!(
        ask(&mut client, query(base + 2002)).await,
        (12, base + 2002)
    );
    assert_eq!(
        ask(&mut client, query(base + 2500)).await,
        (15, base + 3000)
    );
    assert_eq!(ask(&mut client, query(base + 10_000)).await, (-1, -1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_offsets_special_timestamps_need_their_version_and_no_offset_has_no_epoch() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, "lo-special", 1).await;
    produce(
        &mut client,
        9,
        "lo-special",
        0,
        batch(5, Compression::None, now_ms()),
    )
    .await;
    async fn ask(
        client: &mut Client,
        topic: &str,
        timestamp: i64,
        version: i16,
    ) -> list_offsets_response::ListOffsetsPartitionResponse {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(timestamp)
                    .with_current_leader_epoch(-1)])]);
        let mut response: ListOffsetsResponse =
            client.call(ApiKey::ListOffsets, version, &request).await;
        response.topics.remove(0).partitions.remove(0)
    }
    const UNSUPPORTED_VERSION: i16 = 35;
    // Each special timestamp and the first version that carries it, as Kafka 4.4 answers:
    // -6 needs v11 (asked in kafka44_versions.rs: kafka-protocol writes up to v10), -7 none.
    let first_versions = [
        (-1, 1),
        (-2, 1),
        (-3, 7),
        (-4, 8),
        (-5, 9),
        (-6, 11),
        (-7, 99),
    ];
    for version in 1..=10 {
        for (timestamp, first) in first_versions {
            let p = ask(&mut client, "lo-special", timestamp, version).await;
            let what = format!("v{version} timestamp {timestamp}");
            if version >= first {
                assert_eq!(p.error_code, 0, "{what}");
            } else {
                assert_eq!(p.error_code, UNSUPPORTED_VERSION, "{what}");
                assert_eq!(
                    (p.timestamp, p.offset, p.leader_epoch),
                    (-1, -1, -1),
                    "{what}"
                );
            }
        }
    }
    // The version is checked before the topic, as Kafka does.
    let p = ask(&mut client, "lo-no-such-topic", -3, 6).await;
    assert_eq!(p.error_code, UNSUPPORTED_VERSION);
    // An offset found carries the leader epoch; none found (latest tiered without tiered
    // storage, a time past the last record) carries -1.
    let p = ask(&mut client, "lo-special", -2, 9).await;
    assert_eq!((p.offset, p.leader_epoch), (0, 0));
    let p = ask(&mut client, "lo-special", -5, 9).await;
    assert_eq!((p.error_code, p.offset, p.leader_epoch), (0, -1, -1));
    let p = ask(&mut client, "lo-special", now_ms() + 3_600_000, 9).await;
    assert_eq!((p.error_code, p.offset, p.leader_epoch), (0, -1, -1));
}
