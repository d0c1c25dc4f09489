//! OffsetCommit (8) and OffsetFetch (9) between the wire and the group coordinator, which keeps
//! and stores committed offsets by topic name, as Kafka's `__consumer_offsets` records do.
//!
//! From v10 (KIP-848) both name topics by topic id instead of by name. The ids of a request are
//! resolved to names here, through the topic registry, before the coordinator sees it, and the
//! names of its response are turned back into ids, so the coordinator serves every version alike.
//! An id that names no topic (the zero id included) answers UNKNOWN_TOPIC_ID for each of its
//! partitions, as Kafka 4.4 does; an OffsetFetch for everything a group committed (null topics)
//! leaves out a topic that no longer exists, since it has no id. Below v10 requests pass through.
//!
//! A commit to a partition the topic does not have is UNKNOWN_TOPIC_OR_PARTITION, at every
//! version, as on Kafka 4.4.

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetFetchRequest, OffsetFetchResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::errors::code;
use super::Broker;

/// The first version that names topics by id.
const TOPIC_IDS_FROM: i16 = 10;

/// From v10, names each topic of a commit after the topic its id names, before authorization
/// (as Kafka resolves the ids first), so that the ACLs checked are the topic's. An id that names
/// no topic keeps its empty name; `offset_commit` answers it UNKNOWN_TOPIC_ID.
pub fn name_commit_topics(broker: &Broker, request: &mut OffsetCommitRequest, version: i16) {
    if version < TOPIC_IDS_FROM {
        return;
    }
    for topic in &mut request.topics {
        if let Some(name) = topic_name(broker, topic.topic_id) {
            topic.name = name;
        }
    }
}

pub fn offset_commit(
    broker: &Broker,
    mut request: OffsetCommitRequest,
    version: i16,
) -> OffsetCommitResponse {
    let logs = &broker.logs;
    let exists = |topic: &str, partition: i32| {
        logs.topic(topic)
            .is_some_and(|t| t.partition(partition).is_some())
    };
    if version < TOPIC_IDS_FROM {
        return broker.groups.offset_commit(request, version, &exists);
    }
    let mut unknown = Vec::new();
    let mut ids = Vec::new();
    request
        .topics
        .retain_mut(|t| match topic_name(broker, t.topic_id) {
            Some(name) => {
                t.name = name;
                ids.push(t.topic_id);
                true
            }
            None => {
                let partitions = t
                    .partitions
                    .iter()
                    .map(|p| {
                        OffsetCommitResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_error_code(code(ResponseError::UnknownTopicId))
                    })
                    .collect();
                unknown.push(
                    OffsetCommitResponseTopic::default()
                        .with_topic_id(t.topic_id)
                        .with_partitions(partitions),
                );
                false
            }
        });
    let mut response = broker.groups.offset_commit(request, version, &exists);
    // The coordinator answers the topics it was given, in their order.
    for (topic, id) in response.topics.iter_mut().zip(ids) {
        topic.topic_id = id;
    }
    response.topics.extend(unknown);
    response
}

pub fn offset_fetch(
    broker: &Broker,
    mut request: OffsetFetchRequest,
    version: i16,
) -> OffsetFetchResponse {
    if version < TOPIC_IDS_FROM {
        return broker.groups.offset_fetch(request, version);
    }
    // Per group: the topics whose ids name no topic, with their partitions.
    let mut unknown: Vec<Vec<(Uuid, Vec<i32>)>> = Vec::with_capacity(request.groups.len());
    for group in &mut request.groups {
        let mut group_unknown = Vec::new();
        if let Some(topics) = &mut group.topics {
            topics.retain_mut(|t| match topic_name(broker, t.topic_id) {
                Some(name) => {
                    t.name = name;
                    true
                }
                None => {
                    group_unknown.push((t.topic_id, std::mem::take(&mut t.partition_indexes)));
                    false
                }
            });
        }
        unknown.push(group_unknown);
    }
    let mut response = broker.groups.offset_fetch(request, version);
    for (group, group_unknown) in response.groups.iter_mut().zip(unknown) {
        if group.error_code != 0 {
            continue;
        }
        group
            .topics
            .retain_mut(|t| match broker.logs.topic(t.name.as_str()) {
                Some(topic) => {
                    t.topic_id = topic.id;
                    true
                }
                None => false,
            });
        for (topic_id, partitions) in group_unknown {
            let partitions = partitions
                .into_iter()
                .map(|p| {
                    OffsetFetchResponsePartitions::default()
                        .with_partition_index(p)
                        .with_committed_offset(-1)
                        .with_metadata(Some(StrBytes::default()))
                        .with_error_code(code(ResponseError::UnknownTopicId))
                })
                .collect();
            group.topics.push(
                OffsetFetchResponseTopics::default()
                    .with_topic_id(topic_id)
                    .with_partitions(partitions),
            );
        }
    }
    response
}

/// The name of the topic with this id, if there is one (never for the zero id).
fn topic_name(broker: &Broker, id: Uuid) -> Option<TopicName> {
    if id.is_nil() {
        return None;
    }
    let topic = broker.logs.topic_by_id(id)?;
    Some(TopicName(StrBytes::from_string(topic.name.clone())))
}
