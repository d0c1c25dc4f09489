//! Raw-protocol helpers for KIP-848 consumer-group socket tests: ConsumerGroupHeartbeat as a
//! consumer sends it (a full join, then heartbeats that report what it owns), and
//! ConsumerGroupDescribe.

use kafka_protocol::messages::consumer_group_describe_response::DescribedGroup;
use kafka_protocol::messages::consumer_group_heartbeat_request::TopicPartitions;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::Client;

pub fn s(value: &str) -> StrBytes {
    StrBytes::from(value.to_string())
}

/// A join: member epoch 0 with every field a join must carry.
pub fn join(group: &str, member_id: &str, topics: &[&str]) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member_id))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(topics.iter().map(|t| TopicName(s(t))).collect()))
        .with_topic_partitions(Some(Vec::new()))
}

/// A heartbeat at `epoch` reporting `owned` (None: unchanged since the last one).
pub fn beat(
    group: &str,
    member_id: &str,
    epoch: i32,
    owned: Option<&[(Uuid, Vec<i32>)]>,
) -> ConsumerGroupHeartbeatRequest {
    ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(s(group)))
        .with_member_id(s(member_id))
        .with_member_epoch(epoch)
        .with_topic_partitions(owned.map(|o| {
            o.iter()
                .map(|(id, ps)| {
                    TopicPartitions::default()
                        .with_topic_id(*id)
                        .with_partitions(ps.clone())
                })
                .collect()
        }))
}

pub async fn send(
    client: &mut Client,
    request: &ConsumerGroupHeartbeatRequest,
) -> ConsumerGroupHeartbeatResponse {
    client
        .call(ApiKey::ConsumerGroupHeartbeat, 1, request)
        .await
}

/// The assignment of a response, sorted, as (topic id, partitions).
pub fn assigned(response: &ConsumerGroupHeartbeatResponse) -> Option<Vec<(Uuid, Vec<i32>)>> {
    response.assignment.as_ref().map(|a| {
        let mut tps: Vec<(Uuid, Vec<i32>)> = a
            .topic_partitions
            .iter()
            .map(|tp| {
                let mut ps = tp.partitions.clone();
                ps.sort();
                (tp.topic_id, ps)
            })
            .collect();
        tps.sort();
        tps
    })
}

pub async fn describe(client: &mut Client, group: &str) -> DescribedGroup {
    let request = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(group))]);
    let response: ConsumerGroupDescribeResponse = client
        .call(ApiKey::ConsumerGroupDescribe, 1, &request)
        .await;
    response
        .groups
        .into_iter()
        .next()
        .expect("one group described")
}

/// The topic id of `topic`, from Metadata.
pub async fn topic_id(client: &mut Client, topic: &str) -> Uuid {
    let request = MetadataRequest::default().with_topics(Some(vec![
        metadata_request::MetadataRequestTopic::default().with_name(Some(TopicName(s(topic)))),
    ]));
    let response: MetadataResponse = client.call(ApiKey::Metadata, 12, &request).await;
    response.topics[0].topic_id
}
