//! The transaction coordinator over real sockets, with raw requests as clients send them:
//! FindCoordinator for a transactional id, InitProducerId's epochs and fencing, transaction
//! version 1 (AddPartitionsToTxn, verified produce, EndTxn v0-4) and version 2 (partitions
//! added by Produce v12, EndTxn v5 bumping the epoch), the errors of bad requests, ApiVersions'
//! features, and transactions past their timeout aborted by the broker.

mod common;

use common::data::{create_topic, produce};
use common::txn::*;
use common::TestBroker;
use kafka_protocol::records::Compression;

const TOPIC: &str = "txn-coord";

async fn setup(overrides: &[(&str, &str)]) -> (TestBroker, common::Client) {
    let broker = TestBroker::start(overrides).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 3).await;
    (broker, client)
}

#[tokio::test]
async fn transaction_version_1_commit_and_abort() {
    let (broker, mut client) = setup(&[]).await;
    assert_eq!(find_txn_coordinator(&mut client, "tv1").await, (0, 1));
    let producer = init_txn_ok(&mut client, "tv1", 60_000).await;
    assert_eq!(producer.1, 0);
    assert!(broker
        .broker
        .as_ref()
        .unwrap()
        .log_manager()
        .topic("__transaction_state")
        .is_some_and(|t| t.partitions.len() == 50));
    let added = add_partitions(&mut client, "tv1", producer, &[(TOPIC, 0), (TOPIC, 1)]).await;
    assert_eq!(added, vec![0, 0]);
    let batch = |seq, tag: &str| txn_batch(producer.0, producer.1, seq, 2, tag);
    let p0 = produce_txn(&mut client, 9, Some("tv1"), TOPIC, 0, batch(0, "c")).await;
    assert_eq!(p0.error_code, 0);
    // A partition not added: INVALID_TXN_STATE up to Produce v10, TRANSACTION_ABORTABLE at v11.
    let p2 = produce_txn(&mut client, 9, Some("tv1"), TOPIC, 2, batch(0, "x")).await;
    assert_eq!(p2.error_code, 48, "{p2:?}");
    let p2 = produce_txn(&mut client, 11, Some("tv1"), TOPIC, 2, batch(0, "x")).await;
    assert_eq!(p2.error_code, 120);
    let (_, state, _, _, partitions) = describe_txn(&mut client, "tv1").await;
    assert_eq!(state, "Ongoing");
    assert_eq!(
        partitions,
        vec![(TOPIC.to_string(), 0), (TOPIC.to_string(), 1)]
    );
    assert_eq!(
        fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED)
            .await
            .last_stable_offset,
        0
    );
    assert_eq!(end_txn(&mut client, 4, "tv1", producer, true).await.0, 0);
    let data = fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED).await;
    assert_eq!(data.last_stable_offset, 3, "two records and the marker");
    assert_eq!(
        committed_view(&data),
        vec![(0, "c-0".into()), (1, "c-1".into())]
    );
    assert_eq!(describe_txn(&mut client, "tv1").await.1, "CompleteCommit");
    // Partition 1 was added but got no data: its marker completes nothing.
    let p1 = fetch_at(&mut client, TOPIC, 1, 0, READ_COMMITTED).await;
    assert!(fetched(p1.records).iter().all(|r| r.control));

    // The next transaction is aborted: its records are never delivered to read_committed.
    add_partitions(&mut client, "tv1", producer, &[(TOPIC, 0)]).await;
    let p0 = produce_txn(&mut client, 9, Some("tv1"), TOPIC, 0, batch(2, "a")).await;
    assert_eq!(p0.error_code, 0);
    assert_eq!(end_txn(&mut client, 4, "tv1", producer, false).await.0, 0);
    let data = fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED).await;
    assert_eq!(aborted(&data), Some(vec![(producer.0, 3)]));
    assert_eq!(
        committed_view(&data),
        vec![(0, "c-0".into()), (1, "c-1".into())]
    );
    assert_eq!(describe_txn(&mut client, "tv1").await.1, "CompleteAbort");
}

#[tokio::test]
async fn transaction_version_2_adds_partitions_on_produce_and_bumps_epochs() {
    let (_broker, mut client) = setup(&[]).await;
    let (pid, epoch) = init_txn_ok(&mut client, "tv2", 60_000).await;
    let p = produce_txn(
        &mut client,
        12,
        Some("tv2"),
        TOPIC,
        0,
        txn_batch(pid, epoch, 0, 1, "a"),
    )
    .await;
    assert_eq!(p.error_code, 0, "{p:?}");
    let (_, state, _, _, partitions) = describe_txn(&mut client, "tv2").await;
    assert_eq!(
        (state.as_str(), partitions),
        ("Ongoing", vec![(TOPIC.to_string(), 0)])
    );
    let (error, next_pid, next_epoch) = end_txn(&mut client, 5, "tv2", (pid, epoch), false).await;
    assert_eq!((error, next_pid, next_epoch), (0, pid, epoch + 1));
    // A retry with the old epoch gets the same answer.
    assert_eq!(
        end_txn(&mut client, 5, "tv2", (pid, epoch), false).await,
        (0, pid, epoch + 1)
    );
    // The old epoch is fenced on produce.
    let p = produce_txn(
        &mut client,
        12,
        Some("tv2"),
        TOPIC,
        0,
        txn_batch(pid, epoch, 1, 1, "z"),
    )
    .await;
    assert_eq!(p.error_code, 47, "INVALID_PRODUCER_EPOCH");
    let epoch = next_epoch;
    let p = produce_txn(
        &mut client,
        12,
        Some("tv2"),
        TOPIC,
        0,
        txn_batch(pid, epoch, 0, 1, "b"),
    )
    .await;
    assert_eq!(p.error_code, 0, "{p:?}");
    assert_eq!(
        end_txn(&mut client, 5, "tv2", (pid, epoch), true).await,
        (0, pid, epoch + 1)
    );
    let data = fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED).await;
    assert_eq!(aborted(&data), Some(vec![(pid, 0)]));
    let view = committed_view(&data);
    assert_eq!(view.len(), 1);
    assert_eq!(view[0].1, "b-0");
    // An abort with no transaction open is accepted and bumps the epoch.
    assert_eq!(
        end_txn(&mut client, 5, "tv2", (pid, epoch + 1), false).await,
        (0, pid, epoch + 2)
    );
}

#[tokio::test]
async fn a_new_producer_fences_the_old_one() {
    let (_broker, mut client) = setup(&[]).await;
    let old = init_txn_ok(&mut client, "fence", 60_000).await;
    add_partitions(&mut client, "fence", old, &[(TOPIC, 0)]).await;
    let p = produce_txn(
        &mut client,
        9,
        Some("fence"),
        TOPIC,
        0,
        txn_batch(old.0, old.1, 0, 1, "zombie"),
    )
    .await;
    assert_eq!(p.error_code, 0);
    // The new instance finds the transaction open: it is aborted first.
    let new = init_txn_ok(&mut client, "fence", 60_000).await;
    assert_eq!(new, (old.0, old.1 + 2));
    assert_eq!(
        end_txn(&mut client, 4, "fence", old, true).await.0,
        90,
        "PRODUCER_FENCED"
    );
    assert_eq!(
        end_txn(&mut client, 1, "fence", old, true).await.0,
        47,
        "INVALID_PRODUCER_EPOCH below v2"
    );
    let added = add_partitions_at(&mut client, 1, "fence", old, &[(TOPIC, 1)]).await;
    assert_eq!(added, vec![47]);
    let p = produce_txn(
        &mut client,
        9,
        Some("fence"),
        TOPIC,
        0,
        txn_batch(old.0, old.1, 1, 1, "zombie"),
    )
    .await;
    assert_eq!(p.error_code, 47, "the zombie's data is refused");
    let data = fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED).await;
    assert!(
        committed_view(&data).is_empty(),
        "the zombie's open transaction was aborted"
    );
    // KIP-360: the new instance recovering with its current epoch bumps it.
    let (error, pid, epoch) = init_txn(&mut client, 4, "fence", 60_000, new).await;
    assert_eq!((error, pid, epoch), (0, new.0, new.1 + 1));
    let (error, ..) = init_txn(&mut client, 4, "fence", 60_000, old).await;
    assert_eq!(
        error, 90,
        "PRODUCER_FENCED for an epoch that is neither current nor last"
    );
    let (error, ..) = init_txn(&mut client, 3, "fence", 60_000, old).await;
    assert_eq!(error, 47, "INVALID_PRODUCER_EPOCH below v4");
}

#[tokio::test]
async fn bad_requests_get_kafkas_codes_and_disturb_nothing() {
    let (_broker, mut client) = setup(&[]).await;
    let (error, ..) = init_txn(&mut client, 4, "bad", 900_001, (-1, -1)).await;
    assert_eq!(error, 50, "INVALID_TRANSACTION_TIMEOUT");
    let (error, ..) = init_txn(&mut client, 4, "bad", 0, (-1, -1)).await;
    assert_eq!(error, 50);
    let (error, ..) = init_txn(&mut client, 4, "bad", 1000, (5, -1)).await;
    assert_eq!(error, 42, "INVALID_REQUEST: a producer id without an epoch");
    assert_eq!(
        end_txn(&mut client, 4, "never-seen", (1, 0), true).await.0,
        49,
        "INVALID_PRODUCER_ID_MAPPING"
    );
    let producer = init_txn_ok(&mut client, "bad", 60_000).await;
    assert_eq!(
        end_txn(&mut client, 4, "bad", (producer.0, producer.1 + 3), true)
            .await
            .0,
        90
    );
    assert_eq!(
        end_txn(&mut client, 4, "bad", (producer.0 + 1, producer.1), true)
            .await
            .0,
        49
    );
    assert_eq!(
        end_txn(&mut client, 4, "bad", producer, true).await.0,
        48,
        "INVALID_TXN_STATE: nothing open"
    );
    let added = add_partitions(
        &mut client,
        "bad",
        producer,
        &[(TOPIC, 0), ("no-such-topic", 0), (TOPIC, 9)],
    )
    .await;
    assert_eq!(
        added,
        vec![55, 3, 3],
        "OPERATION_NOT_ATTEMPTED for the partitions that exist"
    );
    assert_eq!(
        describe_txn(&mut client, "bad").await.1,
        "Empty",
        "nothing was added"
    );
    assert_eq!(
        describe_txn(&mut client, "never-seen").await.0,
        105,
        "TRANSACTIONAL_ID_NOT_FOUND"
    );
    // Other clients are undisturbed.
    let plain = common::batch(3, Compression::None, common::now_ms());
    assert_eq!(produce(&mut client, 9, TOPIC, 1, plain).await.error_code, 0);
    let data = fetch_at(&mut client, TOPIC, 1, 0, READ_COMMITTED).await;
    assert_eq!(committed_view(&data).len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_past_their_timeout_are_aborted() {
    let overrides = [(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "100",
    )];
    let (_broker, mut client) = setup(&overrides).await;
    let producer = init_txn_ok(&mut client, "slow", 300).await;
    add_partitions(&mut client, "slow", producer, &[(TOPIC, 0)]).await;
    let p = produce_txn(
        &mut client,
        9,
        Some("slow"),
        TOPIC,
        0,
        txn_batch(producer.0, producer.1, 0, 1, "late"),
    )
    .await;
    assert_eq!(p.error_code, 0);
    let mut state = String::new();
    for _ in 0..100 {
        state = describe_txn(&mut client, "slow").await.1;
        if state == "CompleteAbort" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(state, "CompleteAbort");
    let data = fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED).await;
    assert_eq!(data.last_stable_offset, data.high_watermark);
    assert_eq!(aborted(&data), Some(vec![(producer.0, 0)]));
    assert_eq!(
        end_txn(&mut client, 4, "slow", producer, true).await.0,
        90,
        "the producer was fenced"
    );
    let p = produce_txn(
        &mut client,
        9,
        Some("slow"),
        TOPIC,
        0,
        txn_batch(producer.0, producer.1, 1, 1, "later"),
    )
    .await;
    assert_eq!(p.error_code, 47);
}

#[tokio::test]
async fn transactional_offsets_become_visible_with_the_commit() {
    let (_broker, mut client) = setup(&[]).await;
    let group = "txn-group";
    // Transaction version 1: AddOffsetsToTxn, then TxnOffsetCommit v3.
    let producer = init_txn_ok(&mut client, "offsets", 60_000).await;
    let without_add = txn_offset_commit(
        &mut client,
        3,
        "offsets",
        group,
        producer,
        (-1, ""),
        (TOPIC, 5),
    )
    .await;
    assert_eq!(
        without_add, 48,
        "INVALID_TXN_STATE: the offsets partition is not in the transaction"
    );
    assert_eq!(
        add_offsets(&mut client, "offsets", producer, group).await,
        0
    );
    assert_eq!(
        txn_offset_commit(
            &mut client,
            3,
            "offsets",
            group,
            producer,
            (-1, ""),
            (TOPIC, 5)
        )
        .await,
        0
    );
    assert_eq!(
        fetch_offset(&mut client, group, TOPIC, false).await,
        (-1, 0)
    );
    assert_eq!(
        fetch_offset(&mut client, group, TOPIC, true).await,
        (-1, 88),
        "UNSTABLE_OFFSET_COMMIT"
    );
    assert_eq!(
        end_txn(&mut client, 4, "offsets", producer, true).await.0,
        0
    );
    assert_eq!(fetch_offset(&mut client, group, TOPIC, true).await, (5, 0));
    // An aborted transaction's offsets are dropped.
    assert_eq!(
        add_offsets(&mut client, "offsets", producer, group).await,
        0
    );
    txn_offset_commit(
        &mut client,
        3,
        "offsets",
        group,
        producer,
        (-1, ""),
        (TOPIC, 9),
    )
    .await;
    assert_eq!(
        end_txn(&mut client, 4, "offsets", producer, false).await.0,
        0
    );
    assert_eq!(fetch_offset(&mut client, group, TOPIC, true).await, (5, 0));
    // A stale generation is refused (KIP-447).
    assert_eq!(
        add_offsets(&mut client, "offsets", producer, group).await,
        0
    );
    let stale = txn_offset_commit(
        &mut client,
        3,
        "offsets",
        group,
        producer,
        (4, "member"),
        (TOPIC, 9),
    )
    .await;
    assert_eq!(stale, 25, "UNKNOWN_MEMBER_ID: no such member");
    let unknown_group = txn_offset_commit(
        &mut client,
        3,
        "offsets",
        "nobody",
        producer,
        (4, "m"),
        (TOPIC, 9),
    )
    .await;
    assert_eq!(
        unknown_group, 48,
        "the other group's offsets partition is not in the transaction"
    );
    end_txn(&mut client, 4, "offsets", producer, false).await;

    // Transaction version 2: TxnOffsetCommit v5 adds the offsets partition itself.
    let (pid, epoch) = init_txn_ok(&mut client, "offsets-v2", 60_000).await;
    assert_eq!(
        txn_offset_commit(
            &mut client,
            5,
            "offsets-v2",
            group,
            (pid, epoch),
            (-1, ""),
            (TOPIC, 12)
        )
        .await,
        0
    );
    assert_eq!(
        end_txn(&mut client, 5, "offsets-v2", (pid, epoch), true)
            .await
            .0,
        0
    );
    assert_eq!(fetch_offset(&mut client, group, TOPIC, true).await, (12, 0));
}

/// `kafka-transactions abort` ends a hanging transaction with WriteTxnMarkers, offsets
/// partitions included.
#[tokio::test]
async fn write_txn_markers_end_transactional_offsets() {
    let (_broker, mut client) = setup(&[]).await;
    let group = "abort-group";
    let (pid, epoch) = init_txn_ok(&mut client, "hanging", 60_000).await;
    assert_eq!(
        txn_offset_commit(
            &mut client,
            5,
            "hanging",
            group,
            (pid, epoch),
            (-1, ""),
            (TOPIC, 3)
        )
        .await,
        0
    );
    assert_eq!(fetch_offset(&mut client, group, TOPIC, true).await.1, 88);
    let offsets_partition = {
        let hash = group
            .encode_utf16()
            .fold(0i32, |h, u| h.wrapping_mul(31).wrapping_add(i32::from(u)));
        (if hash == i32::MIN { 0 } else { hash.abs() }) % 50
    };
    let error = write_marker(
        &mut client,
        "__consumer_offsets",
        offsets_partition,
        (pid, epoch),
        true,
        0,
    )
    .await;
    assert_eq!(error, 0);
    assert_eq!(fetch_offset(&mut client, group, TOPIC, true).await, (3, 0));
}
