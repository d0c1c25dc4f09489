//! What an injected error looks like on the wire: for each API fault injection supports, the
//! response its request would get if the broker refused it with one error code, mirroring the
//! request's topics and partitions (every partition of a produce, fetch, list-offsets or
//! offset commit answers the code; group and coordinator APIs answer it at the top). Also the
//! (topic, partition) pairs a request names, which rules narrowed to a partition match on, and
//! the error at the top of a response, for the log of served requests.

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponseGroup;
use kafka_protocol::messages::produce_response::{PartitionProduceResponse, TopicProduceResponse};
use kafka_protocol::messages::*;

/// The APIs whose requests fault injection can fail with an error code.
pub const ERROR_APIS: &[ApiKey] = &[
    ApiKey::Produce,
    ApiKey::Fetch,
    ApiKey::ListOffsets,
    ApiKey::Metadata,
    ApiKey::FindCoordinator,
    ApiKey::JoinGroup,
    ApiKey::SyncGroup,
    ApiKey::Heartbeat,
    ApiKey::LeaveGroup,
    ApiKey::OffsetCommit,
    ApiKey::OffsetFetch,
    ApiKey::InitProducerId,
    ApiKey::ListGroups,
];

/// The response refusing `request` with `code`, or None for an API not in `ERROR_APIS`.
/// Metadata is the exception: its brokers must still be listed, so the caller answers it
/// normally and then `set_topic_errors`.
pub fn error_response(request: &RequestKind, version: i16, code: i16) -> Option<ResponseKind> {
    Some(match request {
        RequestKind::Produce(r) => ProduceResponse::default()
            .with_responses(
                r.topic_data
                    .iter()
                    .map(|t| {
                        TopicProduceResponse::default()
                            .with_name(t.name.clone())
                            .with_topic_id(t.topic_id)
                            .with_partition_responses(
                                t.partition_data
                                    .iter()
                                    .map(|p| {
                                        PartitionProduceResponse::default()
                                            .with_index(p.index)
                                            .with_error_code(code)
                                            .with_base_offset(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .into(),
        RequestKind::Fetch(r) => FetchResponse::default()
            .with_responses(
                r.topics
                    .iter()
                    .map(|t| {
                        FetchableTopicResponse::default()
                            .with_topic(t.topic.clone())
                            .with_topic_id(t.topic_id)
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        PartitionData::default()
                                            .with_partition_index(p.partition)
                                            .with_error_code(code)
                                            .with_high_watermark(-1)
                                            .with_last_stable_offset(-1)
                                            .with_log_start_offset(-1)
                                            .with_records(Some(Bytes::new()))
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .into(),
        RequestKind::ListOffsets(r) => ListOffsetsResponse::default()
            .with_topics(
                r.topics
                    .iter()
                    .map(|t| {
                        ListOffsetsTopicResponse::default()
                            .with_name(t.name.clone())
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        ListOffsetsPartitionResponse::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(code)
                                            .with_timestamp(-1)
                                            .with_offset(-1)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .into(),
        RequestKind::FindCoordinator(r) if version >= 4 => FindCoordinatorResponse::default()
            .with_coordinators(
                r.coordinator_keys
                    .iter()
                    .map(|key| {
                        Coordinator::default()
                            .with_key(key.clone())
                            .with_node_id(BrokerId(-1))
                            .with_port(-1)
                            .with_error_code(code)
                    })
                    .collect(),
            )
            .into(),
        RequestKind::FindCoordinator(_) => FindCoordinatorResponse::default()
            .with_error_code(code)
            .with_node_id(BrokerId(-1))
            .with_port(-1)
            .into(),
        RequestKind::JoinGroup(_) => JoinGroupResponse::default()
            .with_error_code(code)
            .with_generation_id(-1)
            .into(),
        RequestKind::SyncGroup(_) => SyncGroupResponse::default().with_error_code(code).into(),
        RequestKind::Heartbeat(_) => HeartbeatResponse::default().with_error_code(code).into(),
        RequestKind::LeaveGroup(_) => LeaveGroupResponse::default().with_error_code(code).into(),
        RequestKind::OffsetCommit(r) => OffsetCommitResponse::default()
            .with_topics(
                r.topics
                    .iter()
                    .map(|t| {
                        OffsetCommitResponseTopic::default()
                            .with_name(t.name.clone())
                            .with_partitions(
                                t.partitions
                                    .iter()
                                    .map(|p| {
                                        OffsetCommitResponsePartition::default()
                                            .with_partition_index(p.partition_index)
                                            .with_error_code(code)
                                    })
                                    .collect(),
                            )
                    })
                    .collect(),
            )
            .into(),
        RequestKind::OffsetFetch(r) if version >= 8 => OffsetFetchResponse::default()
            .with_groups(
                r.groups
                    .iter()
                    .map(|g| {
                        OffsetFetchResponseGroup::default()
                            .with_group_id(g.group_id.clone())
                            .with_error_code(code)
                    })
                    .collect(),
            )
            .into(),
        RequestKind::OffsetFetch(_) => OffsetFetchResponse::default().with_error_code(code).into(),
        RequestKind::InitProducerId(_) => InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
            .into(),
        RequestKind::ListGroups(_) => ListGroupsResponse::default().with_error_code(code).into(),
        _ => return None,
    })
}

/// Sets `code` on every topic of a Metadata response (its brokers stay listed).
pub fn set_topic_errors(response: &mut ResponseKind, code: i16) {
    if let ResponseKind::Metadata(metadata) = response {
        for topic in &mut metadata.topics {
            topic.error_code = code;
            topic.partitions.clear();
        }
    }
}

/// The (topic, partition) pairs a request names; topics without partitions (Metadata) are
/// named with partition -1. Produce (v13+) and Fetch (v13+) name topics by id: `name_of`
/// resolves them.
pub fn partitions(
    request: &RequestKind,
    name_of: &dyn Fn(uuid::Uuid) -> Option<String>,
) -> Vec<(String, i32)> {
    let name = |name: &str, id: uuid::Uuid| {
        if name.is_empty() {
            name_of(id).unwrap_or_default()
        } else {
            name.to_string()
        }
    };
    let mut named = Vec::new();
    match request {
        RequestKind::Produce(r) => {
            for t in &r.topic_data {
                let topic = name(t.name.as_str(), t.topic_id);
                named.extend(t.partition_data.iter().map(|p| (topic.clone(), p.index)));
            }
        }
        RequestKind::Fetch(r) => {
            for t in &r.topics {
                let topic = name(t.topic.as_str(), t.topic_id);
                named.extend(t.partitions.iter().map(|p| (topic.clone(), p.partition)));
            }
        }
        RequestKind::ListOffsets(r) => {
            for t in &r.topics {
                named.extend(
                    t.partitions
                        .iter()
                        .map(|p| (t.name.to_string(), p.partition_index)),
                );
            }
        }
        RequestKind::OffsetCommit(r) => {
            for t in &r.topics {
                named.extend(
                    t.partitions
                        .iter()
                        .map(|p| (t.name.to_string(), p.partition_index)),
                );
            }
        }
        RequestKind::Metadata(r) => {
            for t in r.topics.iter().flatten() {
                if let Some(name) = &t.name {
                    named.push((name.to_string(), -1));
                }
            }
        }
        _ => {}
    }
    named
}

/// The error at the top of a response, or of its first failed partition, if any.
pub fn top_error(response: &ResponseKind) -> Option<i16> {
    let code = match response {
        ResponseKind::FindCoordinator(r) => r
            .coordinators
            .iter()
            .map(|c| c.error_code)
            .find(|&c| c != 0)
            .unwrap_or(r.error_code),
        ResponseKind::JoinGroup(r) => r.error_code,
        ResponseKind::SyncGroup(r) => r.error_code,
        ResponseKind::Heartbeat(r) => r.error_code,
        ResponseKind::LeaveGroup(r) => r.error_code,
        ResponseKind::InitProducerId(r) => r.error_code,
        ResponseKind::ApiVersions(r) => r.error_code,
        ResponseKind::ListGroups(r) => r.error_code,
        ResponseKind::OffsetCommit(r) => r
            .topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| p.error_code))
            .find(|&c| c != 0)
            .unwrap_or(0),
        ResponseKind::Metadata(r) => r
            .topics
            .iter()
            .map(|t| t.error_code)
            .find(|&c| c != 0)
            .unwrap_or(0),
        _ => return None,
    };
    Some(code)
}
