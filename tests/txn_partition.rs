//! A partition's side of transactions over real sockets, with markers written by clients through
//! WriteTxnMarkers (as `kafka-transactions abort` writes them) and transactional batches accepted
//! without a coordinator (`transaction.partition.verification.enable=false`, transaction version
//! 1): the last stable offset, read_committed fetches bounded by it with the aborted transactions
//! of their range, ListOffsets at each isolation level, DescribeProducers, refusals with Kafka's
//! codes, and open and aborted transactions rebuilt after a restart and after kill -9.

mod common;

use common::data::create_topic;
use common::txn::*;
use common::TestBroker;

const TOPIC: &str = "txn-part";
const NO_VERIFY: &[(&str, &str)] = &[("transaction.partition.verification.enable", "false")];

async fn produce_ok(client: &mut common::Client, records: bytes::Bytes) -> i64 {
    let response = produce_txn(client, 9, Some("tx"), TOPIC, 0, records).await;
    assert_eq!(response.error_code, 0, "{response:?}");
    response.base_offset
}

#[tokio::test]
async fn last_stable_offset_and_aborted_transactions() {
    let broker = TestBroker::start(NO_VERIFY).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 1).await;
    let (a, b, c) = ((1000, 0), (2000, 3), (3000, 0));

    // 0: plain; 1-2: A's transaction; 3: B's; 4: A again.
    let plain = common::batch(
        1,
        kafka_protocol::records::Compression::None,
        common::now_ms(),
    );
    assert_eq!(produce_ok(&mut client, plain).await, 0);
    assert_eq!(
        produce_ok(&mut client, txn_batch(a.0, a.1, 0, 2, "a")).await,
        1
    );
    assert_eq!(
        produce_ok(&mut client, txn_batch(b.0, b.1, 0, 1, "b")).await,
        3
    );
    assert_eq!(
        produce_ok(&mut client, txn_batch(a.0, a.1, 2, 1, "a2")).await,
        4
    );

    let committed = fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED).await;
    assert_eq!(committed.high_watermark, 5);
    assert_eq!(committed.last_stable_offset, 1, "A's first offset");
    let offsets: Vec<i64> = fetched(committed.records.clone())
        .iter()
        .map(|r| r.offset)
        .collect();
    assert_eq!(
        offsets,
        vec![0],
        "read_committed stops at the last stable offset"
    );
    assert_eq!(aborted(&committed), Some(vec![]));
    let uncommitted = fetch_at(&mut client, TOPIC, 0, 0, READ_UNCOMMITTED).await;
    assert_eq!(fetched(uncommitted.records.clone()).len(), 5);
    assert_eq!(aborted(&uncommitted), None, "null for read_uncommitted");
    assert_eq!(
        latest_offset(&mut client, TOPIC, 0, READ_COMMITTED).await,
        1
    );
    assert_eq!(
        latest_offset(&mut client, TOPIC, 0, READ_UNCOMMITTED).await,
        5
    );
    assert_eq!(
        describe_producers(&mut client, TOPIC, 0).await,
        vec![(a.0, 0, -1, 1), (b.0, 3, -1, 3)]
    );

    // A is aborted (marker at 5); the last stable offset moves to B's first offset.
    assert_eq!(write_marker(&mut client, TOPIC, 0, a, false, 0).await, 0);
    // C begins after the abort; B commits at 7.
    assert_eq!(
        produce_ok(&mut client, txn_batch(c.0, c.1, 0, 1, "c")).await,
        6
    );
    assert_eq!(
        fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED)
            .await
            .last_stable_offset,
        3
    );
    assert_eq!(write_marker(&mut client, TOPIC, 0, b, true, 0).await, 0);
    let data = fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED).await;
    assert_eq!(data.last_stable_offset, 6, "C is still open");
    assert_eq!(aborted(&data), Some(vec![(a.0, 1)]));
    assert_eq!(
        committed_view(&data),
        vec![(0, "v0".to_string()), (3, "b-0".to_string())]
    );
    // A fetch from inside A's transaction still lists it: it began before the fetch offset.
    let data = fetch_at(&mut client, TOPIC, 0, 2, READ_COMMITTED).await;
    assert_eq!(aborted(&data), Some(vec![(a.0, 1)]));
    assert!(committed_view(&data)
        .iter()
        .all(|(_, v)| !v.starts_with('a')));
    assert_eq!(
        describe_producers(&mut client, TOPIC, 0).await,
        vec![(a.0, 0, 0, -1), (b.0, 3, 0, -1), (c.0, 0, -1, 6)]
    );
    assert_eq!(write_marker(&mut client, TOPIC, 0, c, false, 0).await, 0);
    let data = fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED).await;
    assert_eq!(data.last_stable_offset, data.high_watermark);
    assert_eq!(aborted(&data), Some(vec![(a.0, 1), (c.0, 6)]));
    assert_eq!(committed_view(&data).len(), 2);
    // A fetch past every aborted transaction lists none of them.
    let data = fetch_at(&mut client, TOPIC, 0, 9, READ_COMMITTED).await;
    assert_eq!(aborted(&data), Some(vec![]));
}

#[tokio::test]
async fn refusals_get_kafkas_codes() {
    let broker = TestBroker::start(NO_VERIFY).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 1).await;
    let records = txn_batch(7, 2, 0, 1, "x");
    let response = produce_txn(&mut client, 9, None, TOPIC, 0, records.clone()).await;
    assert_eq!(
        response.error_code, 53,
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    );
    produce_ok(&mut client, records).await;
    // A plain batch of a producer with a transaction open: INVALID_TXN_STATE.
    let plain = producer_batch(7, 2, 1, 1, "plain", false);
    let response = produce_txn(&mut client, 9, Some("tx"), TOPIC, 0, plain).await;
    assert_eq!(response.error_code, 48, "INVALID_TXN_STATE");
    assert_eq!(
        write_marker(&mut client, "no-such-topic", 0, (7, 2), true, 0).await,
        3,
        "UNKNOWN_TOPIC_OR_PARTITION"
    );
    assert_eq!(
        write_marker(&mut client, TOPIC, 0, (7, 1), true, 0).await,
        47,
        "INVALID_PRODUCER_EPOCH: a zombie's marker"
    );
    assert_eq!(
        write_marker(&mut client, TOPIC, 0, (7, 2), true, 5).await,
        0
    );
    assert_eq!(
        write_marker(&mut client, TOPIC, 0, (7, 2), true, 4).await,
        52,
        "TRANSACTION_COORDINATOR_FENCED"
    );
    // The partition still serves the committed record.
    let data = fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED).await;
    assert_eq!(committed_view(&data), vec![(0, "x-0".to_string())]);
}

#[tokio::test]
async fn verification_refuses_a_transaction_no_coordinator_began() {
    let broker = TestBroker::start(&[]).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 1).await;
    let response = produce_txn(
        &mut client,
        9,
        Some("tx"),
        TOPIC,
        0,
        txn_batch(7, 0, 0, 1, "x"),
    )
    .await;
    assert_ne!(response.error_code, 0, "nothing began this transaction");
    assert_eq!(
        fetch_at(&mut client, TOPIC, 0, 0, READ_UNCOMMITTED)
            .await
            .high_watermark,
        0
    );
}

/// Open and aborted transactions after a clean restart and after kill -9 (the data directory
/// as it is, the transaction index of the recovered segment rebuilt from the markers).
#[tokio::test]
async fn transactions_survive_restart_and_crash() {
    let overrides = [
        NO_VERIFY[0],
        // Small segments, so transactions span a roll.
        ("log.segment.bytes", "1000"),
    ];
    let mut broker = TestBroker::start(&overrides).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 1).await;
    let (a, b) = ((11, 0), (22, 0));
    let mut a_sequence = 0;
    let mut b_sequence = 0;
    for round in 0..6 {
        produce_ok(
            &mut client,
            txn_batch(a.0, a.1, a_sequence, 3, &format!("a{round}")),
        )
        .await;
        a_sequence += 3;
        produce_ok(
            &mut client,
            txn_batch(b.0, b.1, b_sequence, 3, &format!("b{round}")),
        )
        .await;
        b_sequence += 3;
    }
    // A is aborted; B stays open across the restarts.
    assert_eq!(write_marker(&mut client, TOPIC, 0, a, false, 0).await, 0);
    let before = fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED).await;
    assert_eq!(before.last_stable_offset, 3, "B's first offset");
    let segments = broker.partition(TOPIC, 0).log_stats().unwrap();
    assert!(segments.active_segment_base_offset > 0, "the log rolled");

    for crash in [false, true] {
        if crash {
            broker.restart_after_crash().await;
        } else {
            broker.restart().await;
        }
        let mut client = broker.client().await;
        let after = fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED).await;
        assert_eq!(
            after.last_stable_offset, 3,
            "B is still open (crash: {crash})"
        );
        // Fetch everything A wrote: its abort is listed, so none of its records is delivered.
        let uncommitted = fetch_at(&mut client, TOPIC, 0, 0, READ_UNCOMMITTED).await;
        assert_eq!(uncommitted.high_watermark, before.high_watermark);
        assert_eq!(
            describe_producers(&mut client, TOPIC, 0).await,
            vec![(a.0, 0, 0, -1), (b.0, 0, -1, 3)]
        );
    }
    let mut client = broker.client().await;
    assert_eq!(write_marker(&mut client, TOPIC, 0, b, true, 0).await, 0);
    let mut delivered = Vec::new();
    let mut offset = 0;
    loop {
        let data = fetch_at(&mut client, TOPIC, 0, offset, READ_COMMITTED).await;
        if data.records.as_ref().is_none_or(|r| r.is_empty()) {
            break;
        }
        assert!(aborted(&data).unwrap().iter().all(|(pid, _)| *pid == a.0));
        offset = fetched(data.records.clone()).last().unwrap().offset + 1;
        delivered.extend(committed_view(&data));
    }
    let values: Vec<String> = delivered.into_iter().map(|(_, v)| v).collect();
    assert_eq!(values.len(), 18, "B's records, every one: {values:?}");
    assert!(values.iter().all(|v| v.starts_with('b')), "{values:?}");
    // The aborted transaction is indexed in the segment holding its marker, in Kafka's format.
    let dir = broker.partition(TOPIC, 0).dir.clone();
    let indexes: Vec<u64> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".txnindex"))
        .map(|e| e.metadata().unwrap().len())
        .collect();
    assert_eq!(indexes.iter().sum::<u64>(), 34, "{indexes:?}");
}
