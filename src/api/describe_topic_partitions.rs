//! DescribeTopicPartitions (75), which Kafka 4.x's admin client and `kafka-topics --describe`
//! use instead of Metadata: topics by name (all when none are named), in name order, with
//! paging by a partition limit and a cursor. One broker: every partition's leader, only replica
//! and only in-sync replica is this node; the eligible-leader-replica lists are empty.

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::code;
use super::Broker;
use crate::storage::consumer_offsets::CONSUMER_OFFSETS_TOPIC;

pub fn handle(
    broker: &Broker,
    request: DescribeTopicPartitionsRequest,
) -> DescribeTopicPartitionsResponse {
    let node = BrokerId(broker.config.node_id);
    let mut names: Vec<String> = if request.topics.is_empty() {
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
    let mut budget = usize::try_from(request.response_partition_limit.max(1)).unwrap_or(1);
    let mut topics = Vec::new();
    let mut next_cursor = None;
    for name in names.into_iter().filter(|n| *n >= cursor_topic) {
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
    DescribeTopicPartitionsResponse::default()
        .with_topics(topics)
        .with_next_cursor(next_cursor)
}
