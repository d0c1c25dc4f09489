//! Dynamic membership: joining, syncing, heartbeats, expiry, leaving.

use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::{DescribeGroupsRequest, LeaveGroupRequest};
use kafka_protocol::protocol::StrBytes;

use super::*;

#[tokio::test]
async fn member_id_required_then_join() {
    let h = Harness::new();
    let first = h.join(join_request("g", ""), 4).await;
    assert_eq!(first.error_code, 79);
    assert!(
        first.member_id.starts_with("client-"),
        "{:?}",
        first.member_id
    );

    let member_id = first.member_id.to_string();
    let handle = h.spawn_join(join_request("g", &member_id), 4);
    settle().await;
    assert!(
        !handle.is_finished(),
        "the initial rebalance waits its delay"
    );
    h.advance(INITIAL_DELAY_MS).await;
    let joined = handle.answered().await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.member_id.as_str(), member_id);
    assert_eq!(joined.leader.as_str(), member_id);
    assert_eq!(joined.protocol_name.as_deref(), Some("range"));
}

#[tokio::test]
async fn unknown_member_id_and_bad_requests() {
    let h = Harness::new();
    assert_eq!(
        h.join(join_request("g", "stranger"), 5).await.error_code,
        25
    );
    assert_eq!(h.join(join_request("", ""), 5).await.error_code, 24);
    let too_short = join_request("g", "").with_session_timeout_ms(10);
    assert_eq!(h.join(too_short, 5).await.error_code, 26);
    let no_protocols = join_request_with("g", "", &[]);
    assert_eq!(h.join(no_protocols, 5).await.error_code, 23);

    // Leaving a group nobody knows: per member from v3, at the top before.
    let leave = LeaveGroupRequest::default().with_group_id(group_id("nobody"));
    let batch = leave.clone().with_members(vec![
        MemberIdentity::default().with_member_id(StrBytes::from_static_str("m"))
    ]);
    let response = h.coordinator.leave_group(batch, 3);
    assert_eq!(
        (response.error_code, response.members[0].error_code),
        (0, 25)
    );
    let single = leave.with_member_id(StrBytes::from_static_str("m"));
    assert_eq!(h.coordinator.leave_group(single, 2).error_code, 25);
}

#[tokio::test]
async fn pending_member_expires_after_its_session_timeout() {
    let h = Harness::new();
    let first = h.join(join_request("g", ""), 5).await;
    assert_eq!(first.error_code, 79);
    h.advance(i64::from(SESSION_TIMEOUT_MS)).await;
    let late = h.join(join_request("g", first.member_id.as_str()), 5).await;
    assert_eq!(
        late.error_code, 25,
        "UNKNOWN_MEMBER_ID once the pending id expired"
    );
}

#[tokio::test]
async fn three_members_only_the_leader_sees_the_members() {
    let h = Harness::new();
    let a = h.join_new_member("g").await;
    let b = h.join_new_member("g").await;
    let c = h.join_new_member("g").await;
    h.advance(INITIAL_DELAY_MS).await;
    assert!(!a.1.is_finished(), "new members during the delay extend it");
    h.advance(INITIAL_DELAY_MS).await;
    let (ra, rb, rc) = (
        a.1.answered().await,
        b.1.answered().await,
        c.1.answered().await,
    );
    for r in [&ra, &rb, &rc] {
        assert_eq!(r.error_code, 0);
        assert_eq!(r.generation_id, 1);
        assert_eq!(r.leader.as_str(), a.0);
    }
    assert_eq!(ra.members.len(), 3);
    assert!(ra.members.iter().all(|m| !m.metadata.is_empty()));
    assert!(rb.members.is_empty() && rc.members.is_empty());
}

#[tokio::test]
async fn initial_delay_is_capped_by_the_rebalance_timeout() {
    let h = Harness::new();
    let first = h
        .join(join_request("g", "").with_rebalance_timeout_ms(4_000), 5)
        .await;
    let a = h.spawn_join(
        join_request("g", first.member_id.as_str()).with_rebalance_timeout_ms(4_000),
        5,
    );
    settle().await;
    let (_b, b) = h.join_new_member("g").await;
    h.advance(INITIAL_DELAY_MS).await;
    assert!(!a.is_finished());
    h.advance(1_000).await;
    assert_eq!(a.answered().await.generation_id, 1);
    assert_eq!(b.answered().await.generation_id, 1);
}

#[tokio::test]
async fn followers_park_until_the_leader_syncs() {
    let h = Harness::new();
    let a = h.join_new_member("g").await;
    let b = h.join_new_member("g").await;
    let c = h.join_new_member("g").await;
    h.advance(2 * INITIAL_DELAY_MS).await;
    let generation_id = a.1.answered().await.generation_id;
    let (_, _) = (b.1.answered().await, c.1.answered().await);

    let follower_b = h.spawn_sync("g", &b.0, generation_id, &[]);
    let follower_c = h.spawn_sync("g", &c.0, generation_id, &[]);
    settle().await;
    assert!(!follower_b.is_finished() && !follower_c.is_finished());

    // The leader leaves c out: c gets an empty assignment.
    let leader = h.spawn_sync(
        "g",
        &a.0,
        generation_id,
        &[(&a.0, b"for-a"), (&b.0, b"for-b")],
    );
    assert_eq!(leader.answered().await.assignment.as_ref(), b"for-a");
    assert_eq!(follower_b.answered().await.assignment.as_ref(), b"for-b");
    let c_answer = follower_c.answered().await;
    assert_eq!(c_answer.error_code, 0);
    assert!(c_answer.assignment.is_empty());
    assert_eq!(h.heartbeat("g", &b.0, generation_id), 0);
}

#[tokio::test]
async fn heartbeat_during_rebalance_says_rebalance_in_progress() {
    let h = Harness::new();
    let (ids, generation_id) = h.stable_group("g", 2).await;
    // A new member triggers a rebalance of the Stable group.
    let (_new_id, _new_join) = h.join_new_member("g").await;
    assert_eq!(h.heartbeat("g", &ids[1], generation_id), 27);
    let sync = h
        .spawn_sync("g", &ids[1], generation_id, &[])
        .answered()
        .await;
    assert_eq!(sync.error_code, 27, "SyncGroup during PreparingRebalance");
}

#[tokio::test]
async fn rebalance_answers_parked_syncs_with_rebalance_in_progress() {
    let h = Harness::new();
    let a = h.join_new_member("g").await;
    let b = h.join_new_member("g").await;
    h.advance(2 * INITIAL_DELAY_MS).await;
    let generation_id = a.1.answered().await.generation_id;
    b.1.answered().await;
    let parked = h.spawn_sync("g", &b.0, generation_id, &[]);
    settle().await;
    // The leader rejoins with new metadata before syncing, which starts a new rebalance.
    let rejoined_metadata = join_request_with("g", &a.0, &[("range", subscription(&["other"]))]);
    let _changed = h.spawn_join(rejoined_metadata, 5);
    settle().await;
    assert_eq!(parked.answered().await.error_code, 27);
}

#[tokio::test]
async fn expired_member_is_removed_and_the_rest_rebalance() {
    let h = Harness::new();
    let (ids, generation_id) = h.stable_group("g", 3).await;
    h.advance(5_000).await;
    assert_eq!(h.heartbeat("g", &ids[1], generation_id), 0);
    assert_eq!(h.heartbeat("g", &ids[2], generation_id), 0);
    h.advance(6_000).await; // ids[0] missed its session
    assert_eq!(h.heartbeat("g", &ids[0], generation_id), 25);
    assert_eq!(h.heartbeat("g", &ids[1], generation_id), 27);

    let b = h.spawn_join(join_request("g", &ids[1]), 5);
    let c = h.spawn_join(join_request("g", &ids[2]), 5);
    settle().await;
    let (rb, rc) = (b.answered().await, c.answered().await);
    assert_eq!(rb.generation_id, generation_id + 1);
    assert_eq!(
        rb.leader.as_str(),
        ids[1],
        "leadership passes to the next member"
    );
    assert_eq!(rb.members.len(), 2);
    assert!(rc.members.is_empty());
}

#[tokio::test]
async fn rebalance_timeout_removes_a_member_that_never_rejoins() {
    let h = Harness::new();
    let (ids, generation_id) = h.stable_group("g", 2).await;
    // The leader rejoining forces a rebalance; ids[1] keeps heartbeating but never rejoins.
    let leader = h.spawn_join(join_request("g", &ids[0]), 5);
    settle().await;
    for _ in 0..6 {
        h.advance(i64::from(SESSION_TIMEOUT_MS) - 1_000).await;
        assert!(!leader.is_finished());
        assert_eq!(h.heartbeat("g", &ids[1], generation_id), 27);
    }
    h.advance(i64::from(REBALANCE_TIMEOUT_MS)).await;
    let answer = leader.answered().await;
    assert_eq!(answer.generation_id, generation_id + 1);
    assert_eq!(answer.members.len(), 1);
    assert_eq!(h.heartbeat("g", &ids[1], generation_id), 25);
}

#[tokio::test]
async fn leave_batch_triggers_rebalance_and_last_leave_empties_the_group() {
    let h = Harness::new();
    let (ids, generation_id) = h.stable_group("g", 3).await;
    let batch = LeaveGroupRequest::default()
        .with_group_id(group_id("g"))
        .with_members(
            [&ids[1], &ids[2], &"unknown".to_string()]
                .iter()
                .map(|id| {
                    MemberIdentity::default().with_member_id(StrBytes::from_string(id.to_string()))
                })
                .collect(),
        );
    let response = h.coordinator.leave_group(batch, 3);
    let codes: Vec<i16> = response.members.iter().map(|m| m.error_code).collect();
    assert_eq!(codes, vec![0, 0, 25]);
    assert_eq!(h.heartbeat("g", &ids[0], generation_id), 27);

    let rejoined = h.join(join_request("g", &ids[0]), 5).await;
    assert_eq!(rejoined.generation_id, generation_id + 1);
    assert_eq!(rejoined.members.len(), 1);

    let last = LeaveGroupRequest::default()
        .with_group_id(group_id("g"))
        .with_member_id(StrBytes::from_string(ids[0].clone()));
    assert_eq!(h.coordinator.leave_group(last, 1).error_code, 0);
    let described = h.coordinator.describe_groups(
        DescribeGroupsRequest::default().with_groups(vec![group_id("g")]),
        5,
    );
    assert_eq!(described.groups[0].group_state.as_str(), "Empty");
    assert!(described.groups[0].members.is_empty());
}

#[tokio::test]
async fn stale_generation_is_illegal_generation() {
    let h = Harness::new();
    let (ids, old_generation) = h.stable_group("g", 2).await;
    // The leader rejoins; both rejoin and the generation moves on.
    let a = h.spawn_join(join_request("g", &ids[0]), 5);
    let b = h.spawn_join(join_request("g", &ids[1]), 5);
    settle().await;
    let new_generation = a.answered().await.generation_id;
    b.answered().await;
    assert_eq!(new_generation, old_generation + 1);

    assert_eq!(h.heartbeat("g", &ids[1], old_generation), 22);
    assert_eq!(
        h.spawn_sync("g", &ids[1], old_generation, &[])
            .answered()
            .await
            .error_code,
        22
    );
    let commit = commit_request("g", &ids[1], old_generation, "topic", &[0], 5);
    assert_eq!(h.commit(commit, 8), vec![22]);
    // The current generation is in CompletingRebalance: commits wait for the assignment.
    let commit = commit_request("g", &ids[1], new_generation, "topic", &[0], 5);
    assert_eq!(h.commit(commit, 8), vec![27]);
}

#[tokio::test]
async fn rejoin_of_a_stable_follower_with_same_metadata_keeps_the_generation() {
    let h = Harness::new();
    let (ids, generation_id) = h.stable_group("g", 2).await;
    let again = h.join(join_request("g", &ids[1]), 5).await;
    assert_eq!(again.error_code, 0);
    assert_eq!(again.generation_id, generation_id);
    assert_eq!(h.heartbeat("g", &ids[0], generation_id), 0, "no rebalance");
}

#[tokio::test]
async fn group_max_size_is_enforced() {
    let h = Harness::with_config(GroupConfig {
        group_max_size: 1,
        ..GroupConfig::from_broker(&Config::default())
    });
    let (_ids, _) = h.stable_group("g", 1).await;
    let first = h.join(join_request("g", ""), 5).await;
    assert_eq!(first.error_code, 81, "GROUP_MAX_SIZE_REACHED");
}

#[tokio::test]
async fn shutdown_answers_parked_requests() {
    let h = Harness::new();
    let (_id, parked) = h.join_new_member("g").await;
    h.coordinator.shutdown();
    assert_eq!(parked.answered().await.error_code, 16, "NOT_COORDINATOR");
    assert_eq!(h.join(join_request("g", ""), 5).await.error_code, 16);
}

/// librdkafka's 0081_admin deletes a group a few milliseconds after its last member's session
/// ends; the request must see the expiry even though no tick has run since.
#[tokio::test]
async fn requests_see_sessions_that_ended_before_the_next_tick() {
    let h = Harness::new();
    let (ids, generation_id) = h.stable_group("g", 1).await;
    h.clock
        .0
        .fetch_add(i64::from(SESSION_TIMEOUT_MS), Ordering::SeqCst);
    let request = kafka_protocol::messages::DeleteGroupsRequest::default()
        .with_groups_names(vec![group_id("g")]);
    let deleted = h.coordinator.delete_groups(request, 2);
    assert_eq!(deleted.results[0].error_code, 0);
    assert_eq!(
        h.heartbeat("g", &ids[0], generation_id),
        25,
        "UNKNOWN_MEMBER_ID"
    );
}
