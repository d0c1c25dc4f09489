//! Transactional offsets: pending until the marker, committed or dropped by it, unstable for a
//! `require_stable` fetch meanwhile, rebuilt across a restart, and KIP-447's generation checks.

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::{OffsetFetchRequest, ProducerId, TxnOffsetCommitRequest};
use kafka_protocol::protocol::StrBytes;

use super::*;

fn txn_commit(
    group: &str,
    producer_id: i64,
    generation: i32,
    member: &str,
    offset: i64,
) -> TxnOffsetCommitRequest {
    TxnOffsetCommitRequest::default()
        .with_transactional_id(StrBytes::from_static_str("tx").into())
        .with_group_id(group_id(group))
        .with_producer_id(ProducerId(producer_id))
        .with_producer_epoch(0)
        .with_generation_id(generation)
        .with_member_id(StrBytes::from_string(member.to_string()))
        .with_topics(vec![TxnOffsetCommitRequestTopic::default()
            .with_name(topic_name("t"))
            .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                .with_partition_index(0)
                .with_committed_offset(offset)
                .with_committed_leader_epoch(-1)])])
}

fn codes(h: &Harness, request: &TxnOffsetCommitRequest) -> Vec<i16> {
    h.coordinator
        .txn_offset_commit(request, 5, &|_, _| true)
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
        .collect()
}

/// (offset, error code) of partition t-0, fetched at v7 with `require_stable`.
fn fetch(h: &Harness, group: &str, require_stable: bool) -> (i64, i16) {
    let request = OffsetFetchRequest::default()
        .with_group_id(group_id(group))
        .with_require_stable(require_stable)
        .with_topics(Some(vec![OffsetFetchRequestTopic::default()
            .with_name(topic_name("t"))
            .with_partition_indexes(vec![0])]));
    let response = h.coordinator.offset_fetch(request, 7);
    let p = &response.topics[0].partitions[0];
    (p.committed_offset, p.error_code)
}

fn partition_of(h: &Harness, group: &str) -> i32 {
    h.store.partition_for(group)
}

#[tokio::test]
async fn offsets_wait_for_the_commit_marker() {
    let h = Harness::new();
    assert_eq!(codes(&h, &txn_commit("g", 7, -1, "", 10)), vec![0]);
    assert_eq!(
        fetch(&h, "g", false),
        (-1, 0),
        "not visible before the marker"
    );
    assert_eq!(fetch(&h, "g", true), (-1, 88), "UNSTABLE_OFFSET_COMMIT");
    // A marker of another partition ends nothing here.
    let other = (partition_of(&h, "g") + 1) % 50;
    h.coordinator
        .complete_transaction(other, 7, 0, true, 0, 1)
        .unwrap();
    assert_eq!(fetch(&h, "g", true).1, 88);
    h.coordinator
        .complete_transaction(partition_of(&h, "g"), 7, 0, true, 0, 1)
        .unwrap();
    assert_eq!(fetch(&h, "g", true), (10, 0));
    // An aborted transaction's offsets are dropped.
    assert_eq!(codes(&h, &txn_commit("g", 7, -1, "", 20)), vec![0]);
    h.coordinator
        .complete_transaction(partition_of(&h, "g"), 7, 1, false, 0, 1)
        .unwrap();
    assert_eq!(fetch(&h, "g", true), (10, 0));
}

#[tokio::test]
async fn pending_offsets_survive_a_restart() {
    let h = Harness::new();
    codes(&h, &txn_commit("g", 7, -1, "", 10));
    h.coordinator
        .complete_transaction(partition_of(&h, "g"), 7, 0, true, 0, 1)
        .unwrap();
    codes(&h, &txn_commit("g", 7, -1, "", 30));
    let restarted = h.restart();
    assert_eq!(fetch(&restarted, "g", false), (10, 0));
    assert_eq!(fetch(&restarted, "g", true).1, 88, "still pending");
    restarted
        .coordinator
        .complete_transaction(partition_of(&h, "g"), 7, 1, true, 0, 1)
        .unwrap();
    assert_eq!(fetch(&restarted.restart(), "g", true), (30, 0));
}

#[tokio::test]
async fn generation_and_member_are_checked() {
    let h = Harness::new();
    assert_eq!(
        codes(&h, &txn_commit("unknown", 7, 3, "m", 1)),
        vec![22],
        "ILLEGAL_GENERATION for a group that does not exist"
    );
    let (members, generation) = h.stable_group("g", 1).await;
    let member = members[0].as_str();
    assert_eq!(
        codes(&h, &txn_commit("g", 7, generation, member, 5)),
        vec![0]
    );
    assert_eq!(
        codes(&h, &txn_commit("g", 7, generation - 1, member, 5)),
        vec![22],
        "ILLEGAL_GENERATION: a stale generation"
    );
    assert_eq!(
        codes(&h, &txn_commit("g", 7, generation, "someone-else", 5)),
        vec![25],
        "UNKNOWN_MEMBER_ID"
    );
    assert_eq!(
        codes(&h, &txn_commit("", 7, -1, "", 5)),
        vec![24],
        "INVALID_GROUP_ID"
    );
}
