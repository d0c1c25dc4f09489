//! Group metadata in the store: the record's bytes, what is written when, and what a restart
//! (a new coordinator over the same store) brings back.

use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, DescribeGroupsResponse, LeaveGroupRequest,
    ListGroupsRequest,
};

use super::static_members::{stable_static_group, static_join};

const RETENTION_CHECK_MS: i64 = 600_000;
use super::*;
use crate::group::group_record::*;
use crate::group::records::{self, RecordKey};

fn sample_value() -> GroupMetadataValue {
    GroupMetadataValue {
        protocol_type: "consumer".into(),
        generation: 3,
        protocol: Some("range".into()),
        leader: Some("m1".into()),
        current_state_timestamp_ms: 1_000,
        members: vec![MemberMetadata {
            member_id: "m1".into(),
            group_instance_id: None,
            client_id: "c".into(),
            client_host: "/h".into(),
            rebalance_timeout_ms: 60_000,
            session_timeout_ms: 10_000,
            subscription: Bytes::from_static(b"sub"),
            assignment: Bytes::from_static(b"as"),
        }],
    }
}

#[test]
fn group_metadata_value_v3_bytes() {
    let value = sample_value();
    let bytes = encode_group_metadata_value(&value).unwrap();
    let expected: Vec<u8> = [
        &[0, 3][..],
        &[0, 8],
        b"consumer",
        &3i32.to_be_bytes(),
        &[0, 5],
        b"range",
        &[0, 2],
        b"m1",
        &1_000i64.to_be_bytes(),
        &1i32.to_be_bytes(),
        &[0, 2],
        b"m1",
        &[0xff, 0xff], // null group instance id
        &[0, 1],
        b"c",
        &[0, 2],
        b"/h",
        &60_000i32.to_be_bytes(),
        &10_000i32.to_be_bytes(),
        &3i32.to_be_bytes(),
        b"sub",
        &2i32.to_be_bytes(),
        b"as",
    ]
    .concat();
    assert_eq!(bytes.as_ref(), expected.as_slice());
    assert_eq!(decode_group_metadata_value(&bytes).unwrap(), value);
}

#[test]
fn empty_group_value_has_null_protocol_and_leader() {
    let value = GroupMetadataValue {
        protocol: None,
        leader: None,
        members: Vec::new(),
        ..sample_value()
    };
    let bytes = encode_group_metadata_value(&value).unwrap();
    assert_eq!(&bytes[16..20], &[0xff, 0xff, 0xff, 0xff]);
    assert_eq!(decode_group_metadata_value(&bytes).unwrap(), value);
}

#[test]
fn older_and_flexible_versions_decode() {
    // Version 0: no state timestamp, no instance id, no rebalance timeout.
    let v0: Vec<u8> = [
        &[0, 0][..],
        &[0, 1],
        b"x",
        &7i32.to_be_bytes(),
        &[0xff, 0xff],
        &[0xff, 0xff],
        &1i32.to_be_bytes(),
        &[0, 1],
        b"m",
        &[0, 0],
        &[0, 0],
        &6_000i32.to_be_bytes(),
        &0i32.to_be_bytes(),
        &0i32.to_be_bytes(),
    ]
    .concat();
    let decoded = decode_group_metadata_value(&v0).unwrap();
    assert_eq!(decoded.generation, 7);
    assert_eq!(decoded.current_state_timestamp_ms, -1);
    assert_eq!(decoded.members[0].rebalance_timeout_ms, -1);
    assert_eq!(decoded.members[0].session_timeout_ms, 6_000);

    // Version 4: compact lengths and tagged fields, with one unknown tag that is skipped.
    let v4: Vec<u8> = [
        &[0, 4][..],
        &[2],
        b"x",
        &1i32.to_be_bytes(),
        &[0],
        &[0],
        &5i64.to_be_bytes(),
        &[2], // one member
        &[2],
        b"m",
        &[2],
        b"i",
        &[1],
        &[1],
        &9i32.to_be_bytes(),
        &6_000i32.to_be_bytes(),
        &[1],
        &[3, 1, 2],
        &[0],             // member tags
        &[1, 7, 1, 0xaa], // top-level: one unknown tag
    ]
    .concat();
    let decoded = decode_group_metadata_value(&v4).unwrap();
    assert_eq!(decoded.protocol, None);
    assert_eq!(decoded.current_state_timestamp_ms, 5);
    assert_eq!(decoded.members[0].group_instance_id.as_deref(), Some("i"));
    assert_eq!(decoded.members[0].assignment.as_ref(), &[1, 2]);
    assert!(decode_group_metadata_value(&v4[..v4.len() - 1]).is_err());
    assert!(decode_group_metadata_value(&[0, 5]).is_err());
}

fn describe(h: &Harness, group: &str) -> DescribeGroupsResponse {
    h.coordinator.describe_groups(
        DescribeGroupsRequest::default().with_groups(vec![group_id(group)]),
        5,
    )
}

/// The group-metadata values stored for `group`, in order (None for tombstones).
fn stored_metadata(h: &Harness, group: &str) -> Vec<Option<GroupMetadataValue>> {
    h.store
        .records
        .lock()
        .unwrap()
        .iter()
        .filter(|(key, _)| {
            records::decode_key(key).unwrap()
                == RecordKey::GroupMetadata {
                    group_id: group.into(),
                }
        })
        .map(|(_, value)| {
            value
                .as_ref()
                .map(|v| decode_group_metadata_value(v).unwrap())
        })
        .collect()
}

#[tokio::test]
async fn a_stable_group_resumes_after_a_restart() {
    let h = Harness::new();
    let (ids, generation_id) = h.stable_group("g", 2).await;
    let stored = stored_metadata(&h, "g");
    assert_eq!(stored.len(), 1, "one record, at the leader's SyncGroup");
    let value = stored[0].clone().unwrap();
    assert_eq!(value.generation, generation_id);
    assert_eq!(value.leader.as_deref(), Some(ids[0].as_str()));
    assert_eq!(value.members[1].assignment.as_ref(), b"assigned");

    let h = h.restart();
    let described = describe(&h, "g");
    let group = &described.groups[0];
    assert_eq!(group.group_state.as_str(), "Stable");
    assert_eq!(group.protocol_data.as_str(), "range");
    let members: Vec<&str> = group.members.iter().map(|m| m.member_id.as_str()).collect();
    assert_eq!(members, vec![ids[0].as_str(), ids[1].as_str()]);
    assert_eq!(group.members[0].member_assignment.as_ref(), b"assigned");
    assert_eq!(group.members[0].member_metadata, subscription(&["topic"]));

    // Both keep heartbeating with the old generation: nothing changes.
    for _ in 0..3 {
        h.advance(SESSION_TIMEOUT_MS as i64 / 2).await;
        assert_eq!(h.heartbeat("g", &ids[0], generation_id), 0);
        assert_eq!(h.heartbeat("g", &ids[1], generation_id), 0);
    }
    let commit = commit_request("g", &ids[1], generation_id, "topic", &[0], 5);
    assert_eq!(h.commit(commit, 8), vec![0]);
}

#[tokio::test]
async fn restored_members_that_never_return_expire_and_the_group_empties() {
    let h = Harness::new();
    let (ids, generation_id) = h.stable_group("g", 2).await;
    let h = h.restart();
    h.advance(SESSION_TIMEOUT_MS as i64 / 2).await;
    assert_eq!(h.heartbeat("g", &ids[0], generation_id), 0);
    h.advance(SESSION_TIMEOUT_MS as i64 / 2 + 1).await;
    // ids[1] expired: the survivor is told to rejoin.
    assert_eq!(h.heartbeat("g", &ids[0], generation_id), 27);
    h.advance(REBALANCE_TIMEOUT_MS as i64 + 1).await;
    assert_eq!(describe(&h, "g").groups[0].group_state.as_str(), "Empty");
    let last = stored_metadata(&h, "g").pop().unwrap().unwrap();
    assert!(last.members.is_empty());
    assert_eq!(last.protocol, None);
    assert_eq!(last.generation, generation_id + 1);

    let h = h.restart();
    let listed = h.coordinator.list_groups(ListGroupsRequest::default(), 4);
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_state.as_str(), "Empty");
    assert_eq!(listed.groups[0].protocol_type.as_str(), "consumer");
    // The next generation continues from the stored one.
    let (_, next_generation) = h.stable_group("g", 1).await;
    assert_eq!(next_generation, generation_id + 2);
}

#[tokio::test]
async fn a_deleted_group_stays_deleted() {
    let h = Harness::new();
    let (ids, generation_id) = h.stable_group("g", 1).await;
    h.commit(
        commit_request("g", &ids[0], generation_id, "topic", &[0], 5),
        8,
    );
    let leave = LeaveGroupRequest::default()
        .with_group_id(group_id("g"))
        .with_member_id(StrBytes::from_string(ids[0].clone()));
    assert_eq!(h.coordinator.leave_group(leave, 1).error_code, 0);
    let deleted = h.coordinator.delete_groups(
        DeleteGroupsRequest::default().with_groups_names(vec![group_id("g")]),
        2,
    );
    assert_eq!(deleted.results[0].error_code, 0);
    assert_eq!(stored_metadata(&h, "g").pop(), Some(None), "a tombstone");
    let h = h.restart();
    assert_eq!(describe(&h, "g").groups[0].group_state.as_str(), "Dead");
    assert!(h
        .coordinator
        .list_groups(ListGroupsRequest::default(), 4)
        .groups
        .is_empty());
}

#[tokio::test]
async fn offsets_of_a_restored_empty_group_expire_from_when_it_emptied() {
    let retention_ms = 1_000_000;
    let config = GroupConfig {
        offsets_retention_ms: retention_ms,
        ..GroupConfig::from_broker(&Config::default())
    };
    let h = Harness::with_config(config.clone());
    let (ids, generation_id) = h.stable_group("g", 1).await;
    h.commit(
        commit_request("g", &ids[0], generation_id, "topic", &[0], 5),
        8,
    );
    // The member stays for longer than the retention, then leaves.
    for _ in 0..(retention_ms / 5_000 + 1) {
        h.clock.0.fetch_add(5_000, Ordering::SeqCst);
        assert_eq!(h.heartbeat("g", &ids[0], generation_id), 0);
    }
    let leave = LeaveGroupRequest::default()
        .with_group_id(group_id("g"))
        .with_member_id(StrBytes::from_string(ids[0].clone()));
    assert_eq!(h.coordinator.leave_group(leave, 1).error_code, 0);
    let h = h.restart_with(config);
    h.advance(RETENTION_CHECK_MS).await;
    let fetched = h.coordinator.offset_fetch(
        kafka_protocol::messages::OffsetFetchRequest::default()
            .with_group_id(group_id("g"))
            .with_topics(None),
        5,
    );
    assert_eq!(fetched.topics.len(), 1, "kept: the group emptied just now");
    h.advance(retention_ms).await;
    h.advance(RETENTION_CHECK_MS).await;
    assert_eq!(describe(&h, "g").groups[0].group_state.as_str(), "Dead");
}

#[tokio::test]
async fn a_failed_store_at_sync_fails_the_sync_and_rebalances() {
    let h = Harness::new();
    let (a, a_join) = h.join_new_member("g").await;
    h.advance(2 * INITIAL_DELAY_MS).await;
    let generation_id = a_join.answered().await.generation_id;
    h.store.fail.store(true, Ordering::SeqCst);
    let sync = h.spawn_sync("g", &a, generation_id, &[(&a, b"x")]);
    assert_eq!(
        sync.answered().await.error_code,
        15,
        "COORDINATOR_NOT_AVAILABLE"
    );
    assert_eq!(h.heartbeat("g", &a, generation_id), 27, "rebalancing");
    assert!(stored_metadata(&h, "g").is_empty());
}

#[tokio::test]
async fn a_replaced_static_member_is_stored_and_known_after_a_restart() {
    let h = Harness::new();
    let (_a_id, b_id, generation_id) = stable_static_group(&h).await;
    let rejoined = h.join(static_join("g", "", "b"), 5).await;
    assert_eq!(rejoined.error_code, 0);
    let new_b = rejoined.member_id.to_string();
    let last = stored_metadata(&h, "g").pop().unwrap().unwrap();
    assert!(last.members.iter().any(|m| m.member_id == new_b));

    let h = h.restart();
    let heartbeat = |member_id: &str| {
        let request = HeartbeatRequest::default()
            .with_group_id(group_id("g"))
            .with_member_id(StrBytes::from_string(member_id.to_string()))
            .with_group_instance_id(Some(StrBytes::from_static_str("b")))
            .with_generation_id(generation_id);
        h.coordinator.heartbeat(request, 3).error_code
    };
    assert_eq!(heartbeat(&new_b), 0);
    assert_eq!(heartbeat(&b_id), 82, "FENCED_INSTANCE_ID");
}

#[tokio::test]
async fn a_static_replacement_that_cannot_be_stored_is_reverted() {
    let h = Harness::new();
    let (_a_id, b_id, generation_id) = stable_static_group(&h).await;
    h.store.fail.store(true, Ordering::SeqCst);
    let rejoined = h.join(static_join("g", "", "b"), 5).await;
    assert_eq!(rejoined.error_code, 15);
    assert_eq!(rejoined.member_id.as_str(), "");
    let request = HeartbeatRequest::default()
        .with_group_id(group_id("g"))
        .with_member_id(StrBytes::from_string(b_id.clone()))
        .with_group_instance_id(Some(StrBytes::from_static_str("b")))
        .with_generation_id(generation_id);
    assert_eq!(
        h.coordinator.heartbeat(request, 3).error_code,
        0,
        "old id kept"
    );
}
