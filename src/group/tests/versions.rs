//! Every response the coordinator builds must encode at every version sluice serves: the encoder
//! refuses a non-default value in a field the version lacks, and this is where that shows.

use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::offset_delete_request::{
    OffsetDeleteRequestPartition, OffsetDeleteRequestTopic,
};
use kafka_protocol::messages::offset_fetch_request::{
    OffsetFetchRequestGroup, OffsetFetchRequestTopic,
};
use kafka_protocol::messages::{
    DeleteGroupsRequest, DescribeGroupsRequest, LeaveGroupRequest, ListGroupsRequest,
    OffsetDeleteRequest, OffsetFetchRequest,
};
use kafka_protocol::protocol::{Encodable, StrBytes};

use super::*;

fn assert_encodes<R: Encodable + std::fmt::Debug>(response: &R, version: i16) {
    let mut buf = BytesMut::new();
    if let Err(e) = response.encode(&mut buf, version) {
        panic!("cannot encode at v{version}: {e}\n{response:?}");
    }
}

/// A Stable group "g" formed at `join_version`, with a static leader from v5 so that instance
/// ids appear in the answers. Returns every JoinGroup and SyncGroup answer on the way.
async fn group_at(h: &Harness, join_version: i16, sync_version: i16) -> (String, i32) {
    let mut request = join_request("g", "");
    if join_version >= 5 {
        request = request.with_group_instance_id(Some(StrBytes::from_static_str("instance")));
    } else if join_version >= 4 {
        let required = h.join(request.clone(), join_version).await;
        assert_encodes(&required, join_version);
        request = join_request("g", required.member_id.as_str());
    }
    let parked = h.spawn_join(request, join_version);
    settle().await;
    h.advance(INITIAL_DELAY_MS).await;
    let joined = parked.answered().await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.members.len(), 1);
    assert_encodes(&joined, join_version);
    let member_id = joined.member_id.to_string();
    let mut sync = sync_request(
        "g",
        &member_id,
        joined.generation_id,
        &[(&member_id, b"assignment")],
    );
    if join_version >= 5 {
        sync = sync.with_group_instance_id(Some(StrBytes::from_static_str("instance")));
    }
    let synced = h.coordinator.sync_group(sync, sync_version).await;
    assert_eq!(synced.error_code, 0);
    assert_encodes(&synced, sync_version);
    (member_id, joined.generation_id)
}

#[tokio::test]
async fn join_and_sync_encode_at_every_version() {
    for version in 0..=9 {
        let h = Harness::new();
        let sync_version = version.min(5);
        let (_member_id, generation_id) = group_at(&h, version, sync_version).await;
        let error = h
            .join(join_request("g", "").with_session_timeout_ms(1), version)
            .await;
        assert_eq!(error.error_code, 26);
        assert_encodes(&error, version);
        let stale = h
            .coordinator
            .sync_group(
                sync_request("g", "nobody", generation_id, &[]),
                sync_version,
            )
            .await;
        assert_encodes(&stale, sync_version);
        if version >= 5 {
            // The static leader restarting: at v9 this sets skip_assignment.
            let rejoined = h
                .join(
                    join_request("g", "")
                        .with_group_instance_id(Some(StrBytes::from_static_str("instance"))),
                    version,
                )
                .await;
            assert_eq!(rejoined.error_code, 0);
            assert_eq!(rejoined.skip_assignment, version >= 9);
            assert_encodes(&rejoined, version);
        }
    }
}

#[tokio::test]
async fn heartbeat_and_leave_encode_at_every_version() {
    for version in 0..=5 {
        let h = Harness::new();
        let (member_id, generation_id) = group_at(&h, 5, 5).await;
        if version <= 4 {
            let request = HeartbeatRequest::default()
                .with_group_id(group_id("g"))
                .with_member_id(StrBytes::from_string(member_id.clone()))
                .with_group_instance_id(Some(StrBytes::from_static_str("instance")))
                .with_generation_id(generation_id);
            assert_encodes(&h.coordinator.heartbeat(request, version), version);
        }
        let request = if version >= 3 {
            LeaveGroupRequest::default()
                .with_group_id(group_id("g"))
                .with_members(vec![
                    MemberIdentity::default()
                        .with_group_instance_id(Some(StrBytes::from_static_str("instance"))),
                    MemberIdentity::default().with_member_id(StrBytes::from_static_str("nobody")),
                ])
        } else {
            LeaveGroupRequest::default()
                .with_group_id(group_id("g"))
                .with_member_id(StrBytes::from_static_str("nobody"))
        };
        let response = h.coordinator.leave_group(request, version);
        assert_eq!(response.members.len(), if version >= 3 { 2 } else { 0 });
        assert_encodes(&response, version);
    }
}

#[tokio::test]
async fn offset_apis_encode_at_every_version() {
    let h = Harness::new();
    let (member_id, generation_id) = group_at(&h, 5, 5).await;
    for version in 2..=9 {
        let mut request = commit_request("g", &member_id, generation_id, "topic", &[0, 1], 5)
            .with_group_instance_id(Some(StrBytes::from_static_str("instance")));
        if version <= 4 {
            request = request.with_retention_time_ms(60_000);
        }
        let response = h.coordinator.offset_commit(request, version, &|_, _| true);
        assert!(response.topics[0]
            .partitions
            .iter()
            .all(|p| p.error_code == 0));
        assert_encodes(&response, version);
    }
    for version in 1..=9 {
        for group in ["g", "", "nobody"] {
            let response = if version >= 8 {
                let groups = vec![
                    OffsetFetchRequestGroup::default().with_group_id(group_id(group)).with_topics(None),
                    OffsetFetchRequestGroup::default().with_group_id(group_id("g")).with_topics(Some(vec![
                        kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopics::default()
                            .with_name(topic_name("topic"))
                            .with_partition_indexes(vec![0, 7]),
                    ])),
                ];
                h.coordinator
                    .offset_fetch(OffsetFetchRequest::default().with_groups(groups), version)
            } else {
                let topics = vec![OffsetFetchRequestTopic::default()
                    .with_name(topic_name("topic"))
                    .with_partition_indexes(vec![0, 7])];
                let topics = if version >= 2 && group == "g" {
                    None
                } else {
                    Some(topics)
                };
                let request = OffsetFetchRequest::default()
                    .with_group_id(group_id(group))
                    .with_topics(topics);
                h.coordinator.offset_fetch(request, version)
            };
            assert_encodes(&response, version);
        }
    }
    let delete = OffsetDeleteRequest::default()
        .with_group_id(group_id("g"))
        .with_topics(vec![OffsetDeleteRequestTopic::default()
            .with_name(topic_name("topic"))
            .with_partitions(vec![
                OffsetDeleteRequestPartition::default().with_partition_index(0)
            ])]);
    assert_encodes(&h.coordinator.offset_delete(delete, 0), 0);
    assert_encodes(
        &h.coordinator
            .offset_delete(OffsetDeleteRequest::default(), 0),
        0,
    );
}

#[tokio::test]
async fn admin_apis_encode_at_every_version() {
    let h = Harness::new();
    let _ = group_at(&h, 5, 5).await;
    h.commit(commit_request("simple", "", -1, "topic", &[0], 1), 8);
    for version in 0..=5 {
        let mut request = ListGroupsRequest::default();
        if version >= 4 {
            request.states_filter = vec![
                StrBytes::from_static_str("stable"),
                StrBytes::from_static_str("Empty"),
            ];
        }
        if version >= 5 {
            request.types_filter = vec![StrBytes::from_static_str("Classic")];
        }
        let response = h.coordinator.list_groups(request, version);
        assert_eq!(response.groups.len(), 2);
        assert_encodes(&response, version);
    }
    for version in 0..=6 {
        let request = DescribeGroupsRequest::default().with_groups(vec![
            group_id("g"),
            group_id("nobody"),
            group_id(""),
        ]);
        let response = h.coordinator.describe_groups(request, version);
        assert_eq!(response.groups[0].group_state.as_str(), "Stable");
        assert_eq!(response.groups[0].protocol_data.as_str(), "range");
        assert!(!response.groups[0].members[0].member_metadata.is_empty());
        assert_eq!(response.groups[1].group_state.as_str(), "Dead");
        assert_eq!(
            response.groups[1].error_code,
            if version >= 6 { 69 } else { 0 }
        );
        assert_encodes(&response, version);
    }
    for version in 0..=2 {
        let request = DeleteGroupsRequest::default()
            .with_groups_names(vec![group_id("g"), group_id("nobody")]);
        assert_encodes(&h.coordinator.delete_groups(request, version), version);
    }
}
