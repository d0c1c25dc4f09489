//! Classic-protocol members as a consumer speaks it, for migration tests: JoinGroup with a real
//! `ConsumerProtocolSubscription` (owned partitions included, as the cooperative protocol sends
//! them), SyncGroup with `ConsumerProtocolAssignment`s, Heartbeat and LeaveGroup, and a reader
//! of the `__consumer_offsets` batches a group's changes wrote.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use kafka_protocol::records::RecordBatchDecoder;

use super::Client;

fn s(value: &str) -> StrBytes {
    StrBytes::from(value.to_string())
}

/// Partitions by topic name.
pub type Owned = Vec<(String, Vec<i32>)>;

/// A v1 subscription to `topics` that says the member owns `owned`.
pub fn subscription(topics: &[&str], owned: &Owned) -> Bytes {
    let owned_partitions = owned
        .iter()
        .map(|(t, ps)| {
            consumer_protocol_subscription::TopicPartition::default()
                .with_topic(TopicName(s(t)))
                .with_partitions(ps.clone())
        })
        .collect();
    let body = ConsumerProtocolSubscription::default()
        .with_topics(topics.iter().map(|t| s(t)).collect())
        .with_owned_partitions(owned_partitions);
    let mut buf = BytesMut::new();
    buf.put_i16(1);
    body.encode(&mut buf, 1).unwrap();
    buf.freeze()
}

/// A v1 assignment of `partitions`.
pub fn assignment(partitions: &Owned) -> Bytes {
    let assigned = partitions
        .iter()
        .map(|(t, ps)| {
            consumer_protocol_assignment::TopicPartition::default()
                .with_topic(TopicName(s(t)))
                .with_partitions(ps.clone())
        })
        .collect();
    let body = ConsumerProtocolAssignment::default().with_assigned_partitions(assigned);
    let mut buf = BytesMut::new();
    buf.put_i16(1);
    body.encode(&mut buf, 1).unwrap();
    buf.freeze()
}

/// The partitions an assignment carries, sorted; empty bytes are no assignment.
pub fn decode_assignment(mut bytes: Bytes) -> Owned {
    if bytes.is_empty() {
        return Vec::new();
    }
    let version = bytes.get_i16();
    let decoded = ConsumerProtocolAssignment::decode(&mut bytes, version).unwrap();
    let mut out: Owned = decoded
        .assigned_partitions
        .into_iter()
        .map(|tp| {
            let mut ps = tp.partitions;
            ps.sort();
            (tp.topic.to_string(), ps)
        })
        .filter(|(_, ps)| !ps.is_empty())
        .collect();
    out.sort();
    out
}

/// JoinGroup v7 (protocol type and name in the answer) with the `range` protocol.
pub fn join_request(
    group: &str,
    member_id: &str,
    topics: &[&str],
    owned: &Owned,
) -> JoinGroupRequest {
    JoinGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member_id))
        .with_session_timeout_ms(30_000)
        .with_rebalance_timeout_ms(30_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![JoinGroupRequestProtocol::default()
            .with_name(StrBytes::from_static_str("range"))
            .with_metadata(subscription(topics, owned))])
}

pub async fn join(client: &mut Client, request: &JoinGroupRequest) -> JoinGroupResponse {
    client.call(ApiKey::JoinGroup, 7, request).await
}

/// SyncGroup v5 with the protocol of `join`'s answer and the given assignments.
pub async fn sync(
    client: &mut Client,
    group: &str,
    joined: &JoinGroupResponse,
    assignments: &[(String, Owned)],
) -> SyncGroupResponse {
    let request = SyncGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(joined.member_id.clone())
        .with_generation_id(joined.generation_id)
        .with_protocol_type(joined.protocol_type.clone())
        .with_protocol_name(joined.protocol_name.clone())
        .with_assignments(
            assignments
                .iter()
                .map(|(member, owned)| {
                    SyncGroupRequestAssignment::default()
                        .with_member_id(s(member))
                        .with_assignment(assignment(owned))
                })
                .collect(),
        );
    client.call(ApiKey::SyncGroup, 5, &request).await
}

pub async fn heartbeat(client: &mut Client, group: &str, member_id: &str, generation: i32) -> i16 {
    super::groups::heartbeat(client, group, member_id, generation).await
}

/// LeaveGroup v3 of members by id; the error of each.
pub async fn leave(client: &mut Client, group: &str, member_ids: &[&str]) -> (i16, Vec<i16>) {
    let request = LeaveGroupRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_members(
            member_ids
                .iter()
                .map(|m| MemberIdentity::default().with_member_id(s(m)))
                .collect(),
        );
    let response: LeaveGroupResponse = client.call(ApiKey::LeaveGroup, 3, &request).await;
    let each = response.members.iter().map(|m| m.error_code).collect();
    (response.error_code, each)
}

/// One record of `__consumer_offsets`: its key's record type, and whether it is a tombstone.
pub type Stored = (i16, bool);

/// The `__consumer_offsets` batches of `group`'s partition, each as its records.
pub async fn stored_batches(client: &mut Client, group: &str) -> Vec<Vec<Stored>> {
    let partition = sluice::group::records::offsets_partition_for(group, 50);
    let request = super::data::fetch_request("__consumer_offsets", partition, 0, 0, 50 << 20);
    let data = super::data::fetch(client, &request).await;
    let mut records = data.records.unwrap_or_default();
    let mut batches = Vec::new();
    while !records.is_empty() {
        let set = RecordBatchDecoder::decode(&mut records).unwrap();
        batches.push(
            set.records
                .into_iter()
                .map(|r| {
                    let mut key = r.key.unwrap();
                    (key.get_i16(), r.value.is_none())
                })
                .collect(),
        );
    }
    batches
}
