//! Raw-protocol helpers for consumer-group socket tests.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::describe_groups_response::DescribedGroup;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Encodable, StrBytes};

use super::Client;

/// A consumer's subscription: i16 version, then `ConsumerProtocolSubscription` v0.
pub fn subscription(topics: &[&str]) -> Bytes {
    let body = ConsumerProtocolSubscription::default().with_topics(
        topics
            .iter()
            .map(|t| StrBytes::from(t.to_string()))
            .collect(),
    );
    let mut buf = BytesMut::new();
    buf.put_i16(0);
    body.encode(&mut buf, 0).unwrap();
    buf.freeze()
}

pub fn join_request(group: &str, member_id: &str) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from(group.to_string())))
        .with_member_id(StrBytes::from(member_id.to_string()))
        // Longer than a restart of a test broker on a loaded machine takes.
        .with_session_timeout_ms(60_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(subscription(&["t"]))])
}

/// A one-member group: join (MEMBER_ID_REQUIRED, then again with the id) and sync.
/// Returns the member id and the generation.
pub async fn form_group(client: &mut Client, group: &str) -> (String, i32) {
    let first: JoinGroupResponse = client
        .call(ApiKey::JoinGroup, 5, &join_request(group, ""))
        .await;
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    let member_id = first.member_id.to_string();
    let joined: JoinGroupResponse = client
        .call(ApiKey::JoinGroup, 5, &join_request(group, &member_id))
        .await;
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.leader.as_str(), member_id);
    let sync = SyncGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from(group.to_string())))
        .with_member_id(StrBytes::from(member_id.clone()))
        .with_generation_id(joined.generation_id)
        .with_assignments(vec![SyncGroupRequestAssignment::default()
            .with_member_id(StrBytes::from(member_id.clone()))
            .with_assignment(Bytes::from_static(b"assignment"))]);
    let synced: SyncGroupResponse = client.call(ApiKey::SyncGroup, 3, &sync).await;
    assert_eq!(synced.error_code, 0);
    assert_eq!(synced.assignment.as_ref(), b"assignment");
    (member_id, joined.generation_id)
}

pub async fn heartbeat(
    client: &mut Client,
    group: &str,
    member_id: &str,
    generation_id: i32,
) -> i16 {
    let request = HeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from(group.to_string())))
        .with_member_id(StrBytes::from(member_id.to_string()))
        .with_generation_id(generation_id);
    let response: HeartbeatResponse = client.call(ApiKey::Heartbeat, 3, &request).await;
    response.error_code
}

pub async fn describe(client: &mut Client, group: &str) -> DescribedGroup {
    let request = DescribeGroupsRequest::default()
        .with_groups(vec![GroupId(StrBytes::from(group.to_string()))]);
    let response: DescribeGroupsResponse = client.call(ApiKey::DescribeGroups, 5, &request).await;
    response.groups.into_iter().next().unwrap()
}
