//! DescribeTopicPartitions (75), which Kafka 4.x's admin client and `kafka-topics --describe`
//! use instead of Metadata: topics by name (all when none are named), in name order, with
//! paging by a partition limit and a cursor. One broker: every partition's leader, only replica
//! and only in-sync replica is this node; the eligible-leader-replica lists are empty.
//!
//! Authorization as Kafka's handler: topics the caller may not DESCRIBE are left out of an
//! all-topics answer and answered TOPIC_AUTHORIZATION_FAILED (no id, no partitions, after the
//! others) when named; they take no part in the paging. Every topic answered carries its
//! authorized operations (KIP-430; this API has no flag to ask for them). A cursor naming a
//! topic the request does not name, or a negative partition, is INVALID_REQUEST.

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::authorize::Authz;
use super::errors::code;
use super::Broker;
use crate::security::acl::{Operation, ResourceType};
use crate::storage::consumer_offsets::CONSUMER_OFFSETS_TOPIC;

/// Kafka's `max.request.partition.size.limit` default: no answer holds more partitions.
const MAX_PARTITIONS_PER_RESPONSE: i32 = 2000;

pub fn handle(
    broker: &Broker,
    authz: &Authz<'_>,
    request: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let node = BrokerId(broker.config.node_id);
    let all_topics = request.topics.is_empty();
    let mut names: Vec<String> = if all_topics {
        broker
            .logs
            .topics()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    } else {
        request.topics.iter().map(|t| t.name.to_string()).collect()
    };
    names.sort();
    names.dedup();
    let (cursor_topic, cursor_partition) = match &request.cursor {
        Some(c) => (c.topic_name.to_string(), c.partition_index),
        None => (String::new(), 0),
    };
    names.retain(|n| *n >= cursor_topic);
    let cursor_named = all_topics || names.contains(&cursor_topic);
    if request.cursor.is_some() && (!cursor_named || cursor_partition < 0) {
        return invalid_cursor(&request);
    }
    let (names, refused): (Vec<String>, Vec<String>) = names
        .into_iter()
        .partition(|n| authz.topic(Operation::Describe, n));
    let limit = request
        .response_partition_limit
        .min(MAX_PARTITIONS_PER_RESPONSE);
    let mut budget = usize::try_from(limit.max(1)).unwrap_or(1);
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in names {
        let Some(topic) = broker.logs.topic(&name) else {
            topics.push(
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(code(ResponseError::UnknownTopicOrPartition))
                    .with_name(Some(TopicName(StrBytes::from_string(name)))),
            );
            continue;
        };
        let first = if name == cursor_topic {
            cursor_partition.max(0)
        } else {
            0
        };
        let mut partitions = Vec::new();
        for p in topic.partitions.iter().filter(|p| p.index >= first) {
            if budget == 0 {
                next_cursor = Some(
                    Cursor::default()
                        .with_topic_name(TopicName(StrBytes::from_string(name.clone())))
                        .with_partition_index(p.index),
                );
                break;
            }
            budget -= 1;
            partitions.push(
                DescribeTopicPartitionsResponsePartition::default()
                    .with_partition_index(p.index)
                    .with_leader_id(node)
                    .with_leader_epoch(p.leader_epoch())
                    .with_replica_nodes(vec![node])
                    .with_isr_nodes(vec![node])
                    .with_eligible_leader_replicas(Some(Vec::new()))
                    .with_last_known_elr(Some(Vec::new())),
            );
        }
        topics.push(
            DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(name.clone()))))
                .with_topic_id(topic.id)
                .with_is_internal(name == CONSUMER_OFFSETS_TOPIC)
                .with_partitions(partitions),
        );
        if next_cursor.is_some() {
            break;
        }
    }
    for topic in topics.iter_mut() {
        let name = topic.name.as_ref().map_or("", |n| n.as_str());
        topic.topic_authorized_operations = authz.operations(ResourceType::Topic, name);
    }
    if !all_topics {
        topics.extend(refused.into_iter().map(|name| {
            DescribeTopicPartitionsResponseTopic::default()
                .with_error_code(code(ResponseError::TopicAuthorizationFailed))
                .with_name(Some(TopicName(StrBytes::from_string(name))))
        }));
    }
    DescribeTopicPartitionsResponse::default()
        .with_topics(topics)
        .with_next_cursor(next_cursor)
}

/// Kafka's answer to a bad cursor: INVALID_REQUEST for every topic the request names.
fn invalid_cursor(request: &DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse {
    let topics = request
        .topics
        .iter()
        .map(|t| {
            DescribeTopicPartitionsResponseTopic::default()
                .with_error_code(code(ResponseError::InvalidRequest))
                .with_name(Some(t.name.clone()))
        })
        .collect();
    DescribeTopicPartitionsResponse::default().with_topics(topics)
}
