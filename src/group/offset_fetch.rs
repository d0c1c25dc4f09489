//! OffsetFetch (API 9, v1-10): committed offsets of one group (v1-7) or several (v8+), for
//! listed partitions or, with null topics (v2+), for everything the group committed. A partition
//! with no commit answers offset -1 and empty metadata, without an error, as Kafka does. v10's
//! topic ids are names by the time a request arrives here (`api::committed_offsets`). Offsets a
//! transaction wrote are not answered until it commits; a client that asks for stable offsets
//! (`require_stable`, v7+) gets UNSTABLE_OFFSET_COMMIT for a partition one is pending on.

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{OffsetFetchRequest, OffsetFetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::state::CommittedOffset;
use super::txn_offsets::has_pending;
use super::{GroupCoordinator, Inner};

/// One partition's answer, before it is shaped for the version.
struct Fetched {
    partition: i32,
    offset: i64,
    leader_epoch: i32,
    metadata: String,
    error_code: i16,
}

impl Fetched {
    fn from_committed(partition: i32, committed: Option<&CommittedOffset>) -> Fetched {
        match committed {
            Some(c) => Fetched {
                partition,
                offset: c.offset,
                leader_epoch: c.leader_epoch,
                metadata: c.metadata.clone(),
                error_code: 0,
            },
            None => Fetched::absent(partition, 0),
        }
    }

    fn absent(partition: i32, error_code: i16) -> Fetched {
        Fetched {
            partition,
            offset: -1,
            leader_epoch: -1,
            metadata: String::new(),
            error_code,
        }
    }
}

type FetchedTopics = Vec<(String, Vec<Fetched>)>;

impl GroupCoordinator {
    pub fn offset_fetch(&self, request: OffsetFetchRequest, version: i16) -> OffsetFetchResponse {
        let inner = self.lock_at(self.clock.now_ms());
        if version >= 8 {
            let groups = request
                .groups
                .iter()
                .map(|g| {
                    let topics = g.topics.as_ref().map(|ts| {
                        ts.iter()
                            .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
                            .collect()
                    });
                    let member = (g.member_id.as_deref(), g.member_epoch);
                    let group_id = g.group_id.as_str();
                    let result = check_member(&inner, group_id, member).and_then(|()| {
                        fetch_group(&inner, group_id, topics, request.require_stable)
                    });
                    group_response(group_id, result)
                })
                .collect();
            return OffsetFetchResponse::default().with_groups(groups);
        }
        let requested: Option<Vec<(String, Vec<i32>)>> = request.topics.as_ref().map(|ts| {
            ts.iter()
                .map(|t| (t.name.to_string(), t.partition_indexes.clone()))
                .collect()
        });
        let require_stable = version >= 7 && request.require_stable;
        let result = fetch_group(
            &inner,
            request.group_id.as_str(),
            requested.clone(),
            require_stable,
        );
        single_group_response(result, requested, version)
    }
}

/// The committed offsets of one group, or the group-level error. Kafka accepts the empty group
/// id here for compatibility; no such group exists, so it has no offsets.
fn fetch_group(
    inner: &Inner,
    group_id: &str,
    requested: Option<Vec<(String, Vec<i32>)>>,
    require_stable: bool,
) -> Result<FetchedTopics, ResponseError> {
    let mut fetched = fetch_committed(inner, group_id, requested)?;
    if require_stable {
        for (topic, partitions) in &mut fetched {
            for partition in partitions.iter_mut() {
                if has_pending(inner, group_id, topic, partition.partition) {
                    let unstable = ResponseError::UnstableOffsetCommit.code();
                    *partition = Fetched::absent(partition.partition, unstable);
                }
            }
        }
    }
    Ok(fetched)
}

/// The committed offsets of one group, or the group-level error.
fn fetch_committed(
    inner: &Inner,
    group_id: &str,
    requested: Option<Vec<(String, Vec<i32>)>>,
) -> Result<FetchedTopics, ResponseError> {
    if inner.shut_down {
        return Err(ResponseError::NotCoordinator);
    }
    let group = match inner.consumer_groups.get(group_id) {
        Some(consumer) => Some(&consumer.offsets),
        None => inner.groups.get(group_id).map(|g| &g.offsets),
    };
    let Some(requested) = requested else {
        // All offsets of the group; an unknown group simply has none.
        let all = group.map(|offsets| {
            offsets
                .iter()
                .map(|(topic, partitions)| {
                    let fetched = partitions
                        .iter()
                        .map(|(p, c)| Fetched::from_committed(*p, Some(c)))
                        .collect();
                    (topic.clone(), fetched)
                })
                .collect()
        });
        return Ok(all.unwrap_or_default());
    };
    Ok(requested
        .into_iter()
        .map(|(topic, partitions)| {
            let committed = group.and_then(|offsets| offsets.get(&topic));
            let fetched = partitions
                .iter()
                .map(|p| Fetched::from_committed(*p, committed.and_then(|c| c.get(p))))
                .collect();
            (topic, fetched)
        })
        .collect())
}

/// OffsetFetch v9+ may name the member that asks: a consumer group checks it and its epoch
/// (Kafka's `validateOffsetFetch`); a classic group does not.
fn check_member(
    inner: &Inner,
    group_id: &str,
    (member_id, member_epoch): (Option<&str>, i32),
) -> Result<(), ResponseError> {
    match inner.consumer_groups.get(group_id) {
        Some(group) => super::consumer::offsets::check_fetch(group, member_id, member_epoch),
        None => Ok(()),
    }
}

fn group_response(
    group_id: &str,
    result: Result<FetchedTopics, ResponseError>,
) -> OffsetFetchResponseGroup {
    let response = OffsetFetchResponseGroup::default()
        .with_group_id(StrBytes::from_string(group_id.to_string()).into());
    match result {
        Err(error) => response.with_error_code(error.code()),
        Ok(topics) => response.with_topics(
            topics
                .into_iter()
                .map(|(name, partitions)| {
                    OffsetFetchResponseTopics::default()
                        .with_name(topic_name(name))
                        .with_partitions(partitions.into_iter().map(partitions_v8).collect())
                })
                .collect(),
        ),
    }
}

fn partitions_v8(f: Fetched) -> OffsetFetchResponsePartitions {
    OffsetFetchResponsePartitions::default()
        .with_partition_index(f.partition)
        .with_committed_offset(f.offset)
        .with_committed_leader_epoch(f.leader_epoch)
        .with_metadata(Some(StrBytes::from_string(f.metadata)))
        .with_error_code(f.error_code)
}

/// v1-7. A group-level error goes in the top-level field from v2; v1 has none, so, like Kafka,
/// each requested partition carries it instead.
fn single_group_response(
    result: Result<FetchedTopics, ResponseError>,
    requested: Option<Vec<(String, Vec<i32>)>>,
    version: i16,
) -> OffsetFetchResponse {
    let topics = match result {
        Ok(topics) => topics,
        Err(error) if version >= 2 => {
            return OffsetFetchResponse::default().with_error_code(error.code())
        }
        Err(error) => requested
            .unwrap_or_default()
            .into_iter()
            .map(|(topic, partitions)| {
                (
                    topic,
                    partitions
                        .into_iter()
                        .map(|p| Fetched::absent(p, error.code()))
                        .collect(),
                )
            })
            .collect(),
    };
    let topics = topics
        .into_iter()
        .map(|(name, partitions)| {
            let partitions = partitions
                .into_iter()
                .map(|f| {
                    OffsetFetchResponsePartition::default()
                        .with_partition_index(f.partition)
                        .with_committed_offset(f.offset)
                        .with_committed_leader_epoch(if version >= 5 { f.leader_epoch } else { -1 })
                        .with_metadata(Some(StrBytes::from_string(f.metadata)))
                        .with_error_code(f.error_code)
                })
                .collect();
            OffsetFetchResponseTopic::default()
                .with_name(topic_name(name))
                .with_partitions(partitions)
        })
        .collect();
    OffsetFetchResponse::default().with_topics(topics)
}

fn topic_name(name: String) -> TopicName {
    TopicName(StrBytes::from_string(name))
}
