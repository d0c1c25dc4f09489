//! Transactions across kill -9 (the data directory copied as it is while the broker runs): a
//! committed transaction stays committed, an open one stays open and its producer carries on
//! and commits, one caught between its PrepareCommit and its markers is completed by the
//! restarted coordinator, and pending transactional offsets wait for their transaction.

mod common;

use common::data::create_topic;
use common::txn::*;
use common::TestBroker;
use sluice::disk::{Fault, FaultKind, Op};

const TOPIC: &str = "txn-rec";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transaction_ends_after_a_crash() {
    // Small preallocated indexes and few transaction-state partitions: the crash copies the
    // whole data directory.
    let overrides = [
        ("log.index.size.max.bytes", "65536"),
        ("transaction.state.log.num.partitions", "5"),
    ];
    let mut broker = TestBroker::start_with_faults(&overrides).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 2).await;

    // A commits before the crash.
    let a = init_txn_ok(&mut client, "a", 60_000).await;
    add_partitions(&mut client, "a", a, &[(TOPIC, 0)]).await;
    let p = produce_txn(
        &mut client,
        9,
        Some("a"),
        TOPIC,
        0,
        txn_batch(a.0, a.1, 0, 2, "a"),
    )
    .await;
    assert_eq!(p.error_code, 0);
    assert_eq!(end_txn(&mut client, 4, "a", a, true).await.0, 0);
    // B stays open.
    let b = init_txn_ok(&mut client, "b", 60_000).await;
    add_partitions(&mut client, "b", b, &[(TOPIC, 0)]).await;
    let p = produce_txn(
        &mut client,
        9,
        Some("b"),
        TOPIC,
        0,
        txn_batch(b.0, b.1, 0, 1, "b"),
    )
    .await;
    assert_eq!(p.error_code, 0);
    let b_first = p.base_offset;
    // C's commit is written, but its marker cannot be: it is left in PrepareCommit.
    let c = init_txn_ok(&mut client, "c", 60_000).await;
    add_partitions(&mut client, "c", c, &[(TOPIC, 1)]).await;
    let p = produce_txn(
        &mut client,
        9,
        Some("c"),
        TOPIC,
        1,
        txn_batch(c.0, c.1, 0, 1, "c"),
    )
    .await;
    assert_eq!(p.error_code, 0);
    broker
        .faults()
        .arm(Fault::new(Op::Write, &format!("{TOPIC}-1/"), FaultKind::Error).once());
    assert_eq!(end_txn(&mut client, 4, "c", c, true).await.0, 0);
    assert_eq!(broker.faults().fired(), 1);
    assert_eq!(describe_txn(&mut client, "c").await.1, "PrepareCommit");
    // G has offsets pending.
    let g = init_txn_ok(&mut client, "g", 60_000).await;
    let committed = txn_offset_commit(&mut client, 5, "g", "group", g, (-1, ""), (TOPIC, 2)).await;
    assert_eq!(committed, 0);

    broker.restart_after_crash().await;
    let mut client = broker.client().await;

    let data = fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED).await;
    assert_eq!(
        committed_view(&data),
        vec![(0, "a-0".into()), (1, "a-1".into())]
    );
    assert_eq!(data.last_stable_offset, b_first, "B is still open");
    assert_eq!(describe_txn(&mut client, "b").await.1, "Ongoing");
    // The restarted coordinator completes C at once.
    let mut state = String::new();
    for _ in 0..100 {
        state = describe_txn(&mut client, "c").await.1;
        if state == "CompleteCommit" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(state, "CompleteCommit");
    let data = fetch_at(&mut client, TOPIC, 1, 0, READ_COMMITTED).await;
    assert_eq!(committed_view(&data), vec![(0, "c-0".into())]);
    // B carries on where it was and commits.
    let p = produce_txn(
        &mut client,
        9,
        Some("b"),
        TOPIC,
        0,
        txn_batch(b.0, b.1, 1, 1, "b2"),
    )
    .await;
    assert_eq!(p.error_code, 0, "{p:?}");
    assert_eq!(end_txn(&mut client, 4, "b", b, true).await.0, 0);
    let data = fetch_at(&mut client, TOPIC, 0, 0, READ_COMMITTED).await;
    let values: Vec<String> = committed_view(&data).into_iter().map(|(_, v)| v).collect();
    assert_eq!(values, vec!["a-0", "a-1", "b-0", "b2-0"]);
    assert_eq!(data.last_stable_offset, data.high_watermark);
    // G's offsets are still pending, and commit with it.
    assert_eq!(fetch_offset(&mut client, "group", TOPIC, true).await.1, 88);
    assert_eq!(end_txn(&mut client, 5, "g", g, true).await.0, 0);
    assert_eq!(
        fetch_offset(&mut client, "group", TOPIC, true).await,
        (2, 0)
    );
}

/// A KIP-848 consumer group's transactional offsets: its member commits them at its epoch (a
/// stale epoch is refused), a COMMIT makes them the group's and an ABORT drops them, and after
/// kill -9 the group comes back as a consumer group with the committed ones, replayed in log
/// order with its plain commits.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_groups_transactional_offsets_survive_a_crash() {
    use common::consumer::{join, send};
    let overrides = [
        ("log.index.size.max.bytes", "65536"),
        ("transaction.state.log.num.partitions", "5"),
        ("offsets.topic.num.partitions", "5"),
    ];
    let mut broker = TestBroker::start(&overrides).await;
    let mut client = broker.client().await;
    create_topic(&mut client, TOPIC, 2).await;
    let group = "eos-consumers";
    let joined = send(&mut client, &join(group, "member-1", &[TOPIC])).await;
    assert_eq!(joined.error_code, 0);
    let epoch = joined.member_epoch;
    let member = (epoch, "member-1");

    let t = init_txn_ok(&mut client, "eos", 60_000).await;
    let stale = txn_offset_commit(
        &mut client,
        5,
        "eos",
        group,
        t,
        (epoch + 1, "member-1"),
        (TOPIC, 4),
    );
    assert_eq!(
        stale.await,
        22,
        "ILLEGAL_GENERATION: an epoch ahead of the member's (v5)"
    );
    assert_eq!(
        txn_offset_commit(&mut client, 5, "eos", group, t, member, (TOPIC, 4)).await,
        0
    );
    assert_eq!(
        fetch_offset(&mut client, group, TOPIC, true).await,
        (-1, 88)
    );
    assert_eq!(end_txn(&mut client, 5, "eos", t, true).await.0, 0);
    let t = (t.0, t.1 + 1);
    assert_eq!(fetch_offset(&mut client, group, TOPIC, true).await, (4, 0));
    // An aborted transaction's offsets are dropped.
    assert_eq!(
        txn_offset_commit(&mut client, 5, "eos", group, t, member, (TOPIC, 9)).await,
        0
    );
    assert_eq!(end_txn(&mut client, 5, "eos", t, false).await.0, 0);
    let t = (t.0, t.1 + 1);
    assert_eq!(fetch_offset(&mut client, group, TOPIC, true).await, (4, 0));
    // One more committed after a plain commit: the last in the log wins.
    let plain = plain_commit(&mut client, group, member, 6).await;
    assert_eq!(plain, 0);
    assert_eq!(
        txn_offset_commit(&mut client, 5, "eos", group, t, member, (TOPIC, 8)).await,
        0
    );
    assert_eq!(end_txn(&mut client, 5, "eos", t, true).await.0, 0);
    assert_eq!(fetch_offset(&mut client, group, TOPIC, true).await, (8, 0));

    broker.restart_after_crash().await;
    let mut client = broker.client().await;
    assert_eq!(fetch_offset(&mut client, group, TOPIC, true).await, (8, 0));
    let described = common::consumer::describe(&mut client, group).await;
    assert_eq!(described.error_code, 0, "still a consumer group");
    assert_eq!(described.members.len(), 1);
}

/// OffsetCommit v9 of partition 0 of `TOPIC` by a consumer group's member; its error code.
async fn plain_commit(
    client: &mut common::Client,
    group: &str,
    (epoch, member): (i32, &str),
    offset: i64,
) -> i16 {
    use kafka_protocol::messages::offset_commit_request::*;
    use kafka_protocol::messages::*;
    let request = OffsetCommitRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_generation_id_or_member_epoch(epoch)
        .with_member_id(s(member))
        .with_topics(vec![OffsetCommitRequestTopic::default()
            .with_name(TopicName(s(TOPIC)))
            .with_partitions(vec![OffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)])]);
    let response: OffsetCommitResponse = client.call(ApiKey::OffsetCommit, 9, &request).await;
    response.topics[0].partitions[0].error_code
}
