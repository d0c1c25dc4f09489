//! Committed offsets: commit, fetch, delete, expiry, persistence, and group deletion.

use std::sync::atomic::Ordering;

use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic, OffsetFetchRequestTopics,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest, OffsetDeleteRequest,
    OffsetFetchRequest, OffsetFetchResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::*;
use crate::group::records::{self, RecordKey};

const RETENTION_CHECK_MS: i64 = 600_000;

fn fetch_v5(h: &Harness, group: &str, topics: Option<&[(&str, &[i32])]>) -> OffsetFetchResponse {
    let topics = topics.map(|ts| {
        ts.iter()
            .map(|(t, ps)| {
                OffsetFetchRequestTopic::default()
                    .with_name(topic_name(t))
                    .with_partition_indexes(ps.to_vec())
            })
            .collect()
    });
    let request = OffsetFetchRequest::default()
        .with_group_id(group_id(group))
        .with_topics(topics);
    h.coordinator.offset_fetch(request, 5)
}

/// (topic, partition, offset, leader epoch, metadata) of a v1-7 answer.
fn fetched(response: &OffsetFetchResponse) -> Vec<(String, i32, i64, i32, String)> {
    let mut out = Vec::new();
    for t in &response.topics {
        for p in &t.partitions {
            let metadata = p.metadata.as_deref().unwrap_or_default().to_string();
            out.push((
                t.name.to_string(),
                p.partition_index,
                p.committed_offset,
                p.committed_leader_epoch,
                metadata,
            ));
        }
    }
    out
}

#[tokio::test]
async fn commit_and_fetch_round_trip() {
    let h = Harness::new();
    assert_eq!(
        h.commit(commit_request("g", "", -1, "topic", &[0, 1], 42), 8),
        vec![0, 0]
    );
    assert_eq!(
        h.commit(commit_request("g", "", -1, "missing", &[0], 42), 8),
        vec![3]
    );
    assert_eq!(
        h.commit(commit_request("g", "", -1, "topic", &[99], 42), 8),
        vec![3]
    );

    let answer = fetch_v5(&h, "g", Some(&[("topic", &[0, 2])]));
    assert_eq!(answer.error_code, 0);
    assert_eq!(
        fetched(&answer),
        vec![
            ("topic".into(), 0, 42, 7, "meta".into()),
            ("topic".into(), 2, -1, -1, String::new()),
        ]
    );
    // Null topics: everything the group committed.
    let all = fetch_v5(&h, "g", None);
    assert_eq!(fetched(&all).len(), 2);
    // A group nobody knows answers -1 without an error.
    let unknown = fetch_v5(&h, "nobody", Some(&[("topic", &[0])]));
    assert_eq!(
        fetched(&unknown),
        vec![("topic".into(), 0, -1, -1, String::new())]
    );
}

#[tokio::test]
async fn fetch_several_groups_at_v8() {
    let h = Harness::new();
    h.commit(commit_request("g1", "", -1, "topic", &[0], 10), 8);
    h.commit(commit_request("g2", "", -1, "topic", &[1], 20), 8);
    let groups = ["g1", "g2", "nobody"]
        .iter()
        .map(|g| {
            OffsetFetchRequestGroup::default()
                .with_group_id(group_id(g))
                .with_topics(Some(vec![OffsetFetchRequestTopics::default()
                    .with_name(topic_name("topic"))
                    .with_partition_indexes(vec![0, 1])]))
        })
        .collect();
    let response = h
        .coordinator
        .offset_fetch(OffsetFetchRequest::default().with_groups(groups), 8);
    let offsets: Vec<Vec<i64>> = response
        .groups
        .iter()
        .map(|g| {
            g.topics[0]
                .partitions
                .iter()
                .map(|p| p.committed_offset)
                .collect()
        })
        .collect();
    assert_eq!(offsets, vec![vec![10, -1], vec![-1, 20], vec![-1, -1]]);
    assert!(response.groups.iter().all(|g| g.error_code == 0));
}

#[tokio::test]
async fn metadata_too_large_fails_only_that_partition() {
    let h = Harness::with_config(GroupConfig {
        offset_metadata_max_bytes: 4,
        ..GroupConfig::from_broker(&Config::default())
    });
    let mut request = commit_request("g", "", -1, "topic", &[0, 1], 5);
    request.topics[0].partitions[1].committed_metadata =
        Some(StrBytes::from_static_str("too long"));
    assert_eq!(h.commit(request, 8), vec![0, 12]);
    assert_eq!(fetched(&fetch_v5(&h, "g", None)).len(), 1);
}

#[tokio::test]
async fn simple_commit_only_to_a_group_without_members() {
    let h = Harness::new();
    let (ids, generation_id) = h.stable_group("g", 1).await;
    assert_eq!(
        h.commit(commit_request("g", "", -1, "topic", &[0], 1), 8),
        vec![25]
    );
    assert_eq!(
        h.commit(
            commit_request("g", &ids[0], generation_id, "topic", &[0], 2),
            8
        ),
        vec![0]
    );
    // A member id of a group this coordinator does not know.
    assert_eq!(
        h.commit(commit_request("other", "x", 3, "topic", &[0], 1), 8),
        vec![22]
    );
    assert_eq!(
        h.commit(commit_request("other", "x", 3, "topic", &[0], 1), 9),
        vec![69]
    );

    let leave = kafka_protocol::messages::LeaveGroupRequest::default()
        .with_group_id(group_id("g"))
        .with_member_id(StrBytes::from_string(ids[0].clone()));
    h.coordinator.leave_group(leave, 2);
    assert_eq!(
        h.commit(commit_request("g", "", -1, "topic", &[0], 3), 8),
        vec![0]
    );
    assert_eq!(fetched(&fetch_v5(&h, "g", None))[0].2, 3);
}

#[tokio::test]
async fn store_failure_changes_nothing() {
    let h = Harness::new();
    h.commit(commit_request("g", "", -1, "topic", &[0], 1), 8);
    h.store.fail.store(true, Ordering::SeqCst);
    assert_eq!(
        h.commit(commit_request("g", "", -1, "topic", &[0], 2), 8),
        vec![15]
    );
    assert_eq!(fetched(&fetch_v5(&h, "g", None))[0].2, 1);
}

#[tokio::test]
async fn offsets_survive_a_restart() {
    let h = Harness::new();
    h.commit(commit_request("g", "", -1, "topic", &[0, 1], 42), 8);
    h.commit(commit_request("g", "", -1, "topic", &[1], 43), 8);
    let restarted = h.restart();
    assert_eq!(
        fetched(&fetch_v5(&restarted, "g", None)),
        vec![
            ("topic".into(), 0, 42, 7, "meta".into()),
            ("topic".into(), 1, 43, 7, "meta".into())
        ]
    );
    let listed = restarted
        .coordinator
        .list_groups(ListGroupsRequest::default(), 4);
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_state.as_str(), "Empty");
}

#[tokio::test]
async fn delete_groups_only_when_empty() {
    let h = Harness::new();
    h.commit(commit_request("simple", "", -1, "topic", &[0], 1), 8);
    let _ = h.stable_group("active", 1).await;
    let request = DeleteGroupsRequest::default().with_groups_names(vec![
        group_id("simple"),
        group_id("active"),
        group_id("nobody"),
    ]);
    let codes: Vec<i16> = h
        .coordinator
        .delete_groups(request, 2)
        .results
        .iter()
        .map(|r| r.error_code)
        .collect();
    assert_eq!(codes, vec![0, 68, 69]);
    assert!(fetched(&fetch_v5(&h, "simple", None)).is_empty());

    let stored = h.store.records.lock().unwrap().clone();
    let tombstones: Vec<RecordKey> = stored
        .iter()
        .filter(|(_, value)| value.is_none())
        .map(|(key, _)| records::decode_key(key).unwrap())
        .collect();
    assert!(tombstones.contains(&RecordKey::OffsetCommit {
        group_id: "simple".into(),
        topic: "topic".into(),
        partition: 0
    }));
    assert!(tombstones.contains(&RecordKey::GroupMetadata {
        group_id: "simple".into()
    }));
    // The deleted group stays deleted; the active one is restored from its metadata.
    let listed = h
        .restart()
        .coordinator
        .list_groups(ListGroupsRequest::default(), 0)
        .groups;
    let listed: Vec<&str> = listed.iter().map(|g| g.group_id.as_str()).collect();
    assert_eq!(listed, vec!["active"]);
}

fn offset_delete(group: &str, topics: &[&str]) -> OffsetDeleteRequest {
    OffsetDeleteRequest::default()
        .with_group_id(group_id(group))
        .with_topics(
            topics
                .iter()
                .map(|t| {
                    OffsetDeleteRequestTopic::default()
                        .with_name(topic_name(t))
                        .with_partitions(vec![
                            OffsetDeleteRequestPartition::default().with_partition_index(0)
                        ])
                })
                .collect(),
        )
}

#[tokio::test]
async fn offset_delete_refuses_subscribed_topics() {
    let h = Harness::new();
    let (ids, generation_id) = h.stable_group("g", 1).await; // subscribed to "topic"
    h.commit(
        commit_request("g", &ids[0], generation_id, "topic", &[0], 1),
        8,
    );
    h.commit(
        commit_request("g", &ids[0], generation_id, "old", &[0], 1),
        8,
    );
    let response = h
        .coordinator
        .offset_delete(offset_delete("g", &["topic", "old"]), 0);
    assert_eq!(response.error_code, 0);
    assert_eq!(response.topics[0].partitions[0].error_code, 86);
    assert_eq!(response.topics[1].partitions[0].error_code, 0);
    assert_eq!(fetched(&fetch_v5(&h, "g", None)).len(), 1);
    assert_eq!(
        h.coordinator
            .offset_delete(offset_delete("nobody", &["topic"]), 0)
            .error_code,
        69
    );
}

#[tokio::test]
async fn offsets_of_a_simple_group_expire_and_the_group_goes() {
    let h = Harness::with_config(GroupConfig {
        offsets_retention_ms: 1_000,
        ..GroupConfig::from_broker(&Config::default())
    });
    h.commit(commit_request("g", "", -1, "topic", &[0], 1), 8);
    h.advance(RETENTION_CHECK_MS).await;
    assert_eq!(
        fetched(&fetch_v5(&h, "g", Some(&[("topic", &[0])])))[0].2,
        -1
    );
    assert!(h
        .coordinator
        .list_groups(ListGroupsRequest::default(), 0)
        .groups
        .is_empty());
    let last = h.store.records.lock().unwrap().last().cloned().unwrap();
    assert_eq!(
        records::decode_key(&last.0).unwrap(),
        RecordKey::GroupMetadata {
            group_id: "g".into()
        }
    );
}

#[tokio::test]
async fn offsets_expire_after_the_group_became_empty() {
    let h = Harness::with_config(GroupConfig {
        offsets_retention_ms: RETENTION_CHECK_MS + 100_000,
        ..GroupConfig::from_broker(&Config::default())
    });
    let (ids, generation_id) = h.stable_group("g", 1).await;
    h.commit(
        commit_request("g", &ids[0], generation_id, "topic", &[0], 9),
        8,
    );
    // The member outlives the retention; offsets of topics it subscribes to do not expire, and
    // after it leaves the retention counts from when the group became Empty, not from the commit.
    for _ in 0..80 {
        h.advance(9_000).await;
        assert_eq!(h.heartbeat("g", &ids[0], generation_id), 0);
    }
    let leave = kafka_protocol::messages::LeaveGroupRequest::default()
        .with_group_id(group_id("g"))
        .with_member_id(StrBytes::from_string(ids[0].clone()));
    h.coordinator.leave_group(leave, 1);
    h.advance(RETENTION_CHECK_MS).await; // retention not yet over since the group emptied
    assert_eq!(fetched(&fetch_v5(&h, "g", None)).len(), 1);
    h.advance(RETENTION_CHECK_MS).await;
    assert!(fetched(&fetch_v5(&h, "g", None)).is_empty());
    let described = h.coordinator.describe_groups(
        DescribeGroupsRequest::default().with_groups(vec![group_id("g")]),
        6,
    );
    assert_eq!(
        described.groups[0].error_code, 69,
        "the empty group was removed"
    );
}
