//! Consumer groups across broker restarts, over real sockets: a group that completed a
//! rebalance comes back Stable with its members, protocol and generation (after a graceful
//! restart and after a crash), its members keep heartbeating with the generation they had, and
//! a deleted group stays deleted.

mod common;

use common::groups::{describe, form_group, heartbeat, subscription};
use common::{Client, TestBroker};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

/// The initial rebalance delay is 0, so a lone member's join completes within a tick; small
/// indexes keep the crash copy of the data directory (50 offsets partitions) quick.
const OVERRIDES: &[(&str, &str)] = &[
    ("group.initial.rebalance.delay.ms", "0"),
    ("log.index.size.max.bytes", "4096"),
];

async fn assert_restored(client: &mut Client, group: &str, member_id: &str, generation_id: i32) {
    let described = describe(client, group).await;
    assert_eq!(described.error_code, 0);
    assert_eq!(described.group_state.as_str(), "Stable");
    assert_eq!(described.protocol_type.as_str(), "consumer");
    assert_eq!(described.protocol_data.as_str(), "range");
    assert_eq!(described.members.len(), 1);
    let member = &described.members[0];
    assert_eq!(member.member_id.as_str(), member_id);
    assert_eq!(member.client_id.as_str(), "sluice-test");
    assert_eq!(member.member_assignment.as_ref(), b"assignment");
    assert_eq!(member.member_metadata, subscription(&["t"]));
    // The member carries on with the generation it had before the restart.
    assert_eq!(heartbeat(client, group, member_id, generation_id).await, 0);
    assert_eq!(
        heartbeat(client, group, member_id, generation_id + 1).await,
        22
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stable_group_survives_a_restart_and_a_crash() {
    let mut broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    let (member_id, generation_id) = form_group(&mut client, "g").await;

    broker.restart().await;
    let mut client = broker.client().await;
    assert_restored(&mut client, "g", &member_id, generation_id).await;

    broker.restart_after_crash().await;
    let mut client = broker.client().await;
    assert_restored(&mut client, "g", &member_id, generation_id).await;
    let listed: ListGroupsResponse = client
        .call(ApiKey::ListGroups, 4, &ListGroupsRequest::default())
        .await;
    assert_eq!(listed.groups.len(), 1);
    assert_eq!(listed.groups[0].group_state.as_str(), "Stable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_emptied_group_comes_back_empty_and_a_deleted_one_not_at_all() {
    let mut broker = TestBroker::start(OVERRIDES).await;
    let mut client = broker.client().await;
    let (gone, _) = form_group(&mut client, "gone").await;
    let (left, _) = form_group(&mut client, "left").await;
    for (group, member_id) in [("gone", &gone), ("left", &left)] {
        let leave = LeaveGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from(group.to_string())))
            .with_member_id(StrBytes::from(member_id.clone()));
        let response: LeaveGroupResponse = client.call(ApiKey::LeaveGroup, 1, &leave).await;
        assert_eq!(response.error_code, 0);
    }
    let delete = DeleteGroupsRequest::default()
        .with_groups_names(vec![GroupId(StrBytes::from_static_str("gone"))]);
    let deleted: DeleteGroupsResponse = client.call(ApiKey::DeleteGroups, 2, &delete).await;
    assert_eq!(deleted.results[0].error_code, 0);

    broker.restart_after_crash().await;
    let mut client = broker.client().await;
    assert_eq!(
        describe(&mut client, "gone").await.group_state.as_str(),
        "Dead"
    );
    let left_group = describe(&mut client, "left").await;
    assert_eq!(left_group.group_state.as_str(), "Empty");
    assert_eq!(left_group.protocol_type.as_str(), "consumer");
    assert!(left_group.members.is_empty());
    let listed: ListGroupsResponse = client
        .call(ApiKey::ListGroups, 4, &ListGroupsRequest::default())
        .await;
    let names: Vec<&str> = listed.groups.iter().map(|g| g.group_id.as_str()).collect();
    assert_eq!(names, vec!["left"]);

    // The old member of the emptied group is not let back in with its old generation.
    assert_eq!(heartbeat(&mut client, "left", &left, 1).await, 25);
}
