//! Static membership (KIP-345): members with a group instance id.

use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::{DescribeGroupsRequest, LeaveGroupRequest};
use kafka_protocol::protocol::StrBytes;

use super::*;

pub(super) fn static_join(group: &str, member_id: &str, instance_id: &str) -> JoinGroupRequest {
    join_request(group, member_id)
        .with_group_instance_id(Some(StrBytes::from_string(instance_id.to_string())))
}

fn static_sync(
    group: &str,
    member_id: &str,
    instance_id: &str,
    generation_id: i32,
) -> SyncGroupRequest {
    sync_request(group, member_id, generation_id, &[])
        .with_group_instance_id(Some(StrBytes::from_string(instance_id.to_string())))
}

fn static_heartbeat(h: &Harness, member_id: &str, instance_id: &str, generation_id: i32) -> i16 {
    let request = HeartbeatRequest::default()
        .with_group_id(group_id("g"))
        .with_member_id(StrBytes::from_string(member_id.to_string()))
        .with_group_instance_id(Some(StrBytes::from_string(instance_id.to_string())))
        .with_generation_id(generation_id);
    h.coordinator.heartbeat(request, 3).error_code
}

/// A Stable group of a static leader ("a") and a static follower ("b").
pub(super) async fn stable_static_group(h: &Harness) -> (String, String, i32) {
    // Static members get their id straight away, without MEMBER_ID_REQUIRED.
    let a = h.spawn_join(static_join("g", "", "a"), 5);
    settle().await;
    let b = h.spawn_join(static_join("g", "", "b"), 5);
    settle().await;
    h.advance(2 * INITIAL_DELAY_MS).await;
    let (ra, rb) = (a.answered().await, b.answered().await);
    assert!(ra.member_id.starts_with("a-"), "{:?}", ra.member_id);
    assert_eq!(ra.members.len(), 2);
    assert_eq!(ra.members[1].group_instance_id.as_deref(), Some("b"));
    let (a_id, b_id, generation_id) = (
        ra.member_id.to_string(),
        rb.member_id.to_string(),
        ra.generation_id,
    );
    let coordinator = h.coordinator.clone();
    let follower = tokio::spawn({
        let request = static_sync("g", &b_id, "b", generation_id);
        async move { coordinator.sync_group(request, 3).await }
    });
    settle().await;
    let leader_sync = static_sync("g", &a_id, "a", generation_id).with_assignments(
        sync_request("g", "", 0, &[(&a_id, b"for-a"), (&b_id, b"for-b")]).assignments,
    );
    assert_eq!(h.coordinator.sync_group(leader_sync, 3).await.error_code, 0);
    assert_eq!(follower.answered().await.assignment.as_ref(), b"for-b");
    (a_id, b_id, generation_id)
}

#[tokio::test]
async fn static_rejoin_keeps_assignment_without_rebalance_and_fences_the_old_id() {
    let h = Harness::new();
    let (a_id, b_id, generation_id) = stable_static_group(&h).await;

    // "b" restarts: a join without member id but with its instance id, same metadata.
    let rejoined = h.join(static_join("g", "", "b"), 5).await;
    assert_eq!(rejoined.error_code, 0);
    assert_eq!(rejoined.generation_id, generation_id, "no rebalance");
    assert!(rejoined.members.is_empty());
    let new_b = rejoined.member_id.to_string();
    assert_ne!(new_b, b_id);
    assert_eq!(rejoined.leader.as_str(), a_id);

    let synced = h
        .coordinator
        .sync_group(static_sync("g", &new_b, "b", generation_id), 3)
        .await;
    assert_eq!(synced.error_code, 0);
    assert_eq!(
        synced.assignment.as_ref(),
        b"for-b",
        "the member keeps its assignment"
    );
    assert_eq!(
        static_heartbeat(&h, &a_id, "a", generation_id),
        0,
        "the leader saw no rebalance"
    );

    // The old id of instance "b" is fenced everywhere.
    assert_eq!(static_heartbeat(&h, &b_id, "b", generation_id), 82);
    let stale_sync = h
        .coordinator
        .sync_group(static_sync("g", &b_id, "b", generation_id), 3)
        .await;
    assert_eq!(stale_sync.error_code, 82);
    assert_eq!(h.join(static_join("g", &b_id, "b"), 5).await.error_code, 82);
    let commit = commit_request("g", &b_id, generation_id, "topic", &[0], 1)
        .with_group_instance_id(Some(StrBytes::from_static_str("b")));
    assert_eq!(h.commit(commit, 7), vec![82]);
    let leave = LeaveGroupRequest::default()
        .with_group_id(group_id("g"))
        .with_members(vec![MemberIdentity::default()
            .with_member_id(StrBytes::from_string(b_id.clone()))
            .with_group_instance_id(Some(StrBytes::from_static_str("b")))]);
    assert_eq!(
        h.coordinator.leave_group(leave, 3).members[0].error_code,
        82
    );
}

#[tokio::test]
async fn static_leader_rejoin_at_v9_skips_assignment() {
    let h = Harness::new();
    let (_a_id, _b_id, generation_id) = stable_static_group(&h).await;
    let rejoined = h.join(static_join("g", "", "a"), 9).await;
    assert_eq!(rejoined.error_code, 0);
    assert_eq!(rejoined.generation_id, generation_id);
    assert!(rejoined.skip_assignment);
    assert_eq!(rejoined.leader, rejoined.member_id);
    assert_eq!(rejoined.members.len(), 2);
}

#[tokio::test]
async fn static_rejoin_that_keeps_the_selected_protocol_does_not_rebalance() {
    let h = Harness::new();
    let (a_id, _b_id, generation_id) = stable_static_group(&h).await;
    // "b" now also supports "roundrobin" first; "range" stays the only common protocol, so the
    // selected protocol is unchanged and there is still no rebalance.
    let both = [
        ("roundrobin", subscription(&["topic"])),
        ("range", subscription(&["topic"])),
    ];
    let rejoined = h
        .join(
            join_request_with("g", "", &both).with_group_instance_id(Some("b".into())),
            5,
        )
        .await;
    assert_eq!(rejoined.generation_id, generation_id);
    assert_eq!(static_heartbeat(&h, &a_id, "a", generation_id), 0);
}

#[tokio::test]
async fn admin_removes_a_static_member_by_instance_id() {
    let h = Harness::new();
    let (a_id, _b_id, generation_id) = stable_static_group(&h).await;
    let leave = LeaveGroupRequest::default()
        .with_group_id(group_id("g"))
        .with_members(vec![
            MemberIdentity::default().with_group_instance_id(Some("b".into()))
        ]);
    assert_eq!(h.coordinator.leave_group(leave, 4).members[0].error_code, 0);
    assert_eq!(static_heartbeat(&h, &a_id, "a", generation_id), 27);
    let described = h.coordinator.describe_groups(
        DescribeGroupsRequest::default().with_groups(vec![group_id("g")]),
        5,
    );
    assert_eq!(
        described.groups[0].group_state.as_str(),
        "PreparingRebalance"
    );
    assert_eq!(described.groups[0].members.len(), 1);
}
