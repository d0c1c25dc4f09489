//! Committed offsets: OffsetCommit (API 8, v2-10), OffsetFetch (API 9, v1-10, several groups
//! from v8), OffsetDelete (API 47, v0), and their expiry. Topics are named here, at v10 too:
//! `api::committed_offsets` turns v10's topic ids into names before a request reaches the
//! coordinator. Kafka's `OffsetMetadataManager`. A commit is
//! written to the store before it changes memory, so an answered commit survives a restart and
//! a failed one leaves no trace.

use kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{
    OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest, OffsetDeleteResponse,
};
use kafka_protocol::ResponseError;

use super::records::{self, OffsetCommitValue};
use super::state::{ClassicGroup, CommittedOffset, GroupState, CONSUMER_PROTOCOL_TYPE};
use super::{GroupCoordinator, Inner};

/// One partition of a commit that passed validation, waiting for the store.
struct Accepted {
    topic: String,
    partition: i32,
    offset: CommittedOffset,
}

impl Accepted {
    fn new(
        topic: &str,
        partition: &OffsetCommitRequestPartition,
        now_ms: i64,
        expire_timestamp_ms: Option<i64>,
    ) -> Accepted {
        let metadata = partition.committed_metadata.as_deref().unwrap_or_default();
        Accepted {
            topic: topic.to_string(),
            partition: partition.partition_index,
            offset: CommittedOffset {
                offset: partition.committed_offset,
                leader_epoch: partition.committed_leader_epoch,
                metadata: metadata.to_string(),
                commit_timestamp_ms: now_ms,
                expire_timestamp_ms,
            },
        }
    }
}

impl GroupCoordinator {
    /// Commits offsets. `partition_exists` decides UNKNOWN_TOPIC_OR_PARTITION.
    pub fn offset_commit(
        &self,
        request: OffsetCommitRequest,
        version: i16,
        partition_exists: &dyn Fn(&str, i32) -> bool,
    ) -> OffsetCommitResponse {
        let now_ms = self.clock.now_ms();
        // Asked before taking the lock, so that the topic registry's own locking never nests
        // inside the coordinator's.
        let exists: Vec<Vec<bool>> = request
            .topics
            .iter()
            .map(|t| {
                t.partitions
                    .iter()
                    .map(|p| partition_exists(&t.name, p.partition_index))
                    .collect()
            })
            .collect();
        let mut inner = self.lock_at(now_ms);
        let group_id = request.group_id.to_string();
        let group_error = self
            .validate_offset_commit(&mut inner, &request, version, now_ms)
            .err();
        // An explicit retention (v2-4) becomes a per-offset expiry, as in Kafka.
        let expire_timestamp_ms = (request.retention_time_ms != -1)
            .then(|| now_ms.saturating_add(request.retention_time_ms));

        let mut codes: Vec<Vec<i16>> = Vec::with_capacity(request.topics.len());
        let mut accepted: Vec<(usize, usize, Accepted)> = Vec::new();
        for (t, topic) in request.topics.iter().enumerate() {
            let mut topic_codes = Vec::with_capacity(topic.partitions.len());
            for (p, partition) in topic.partitions.iter().enumerate() {
                let metadata = partition.committed_metadata.as_deref().unwrap_or_default();
                let error = if !exists[t][p] {
                    Some(ResponseError::UnknownTopicOrPartition)
                } else if group_error.is_some() {
                    group_error
                } else if metadata.encode_utf16().count() > self.config.offset_metadata_max_bytes {
                    Some(ResponseError::OffsetMetadataTooLarge)
                } else {
                    accepted.push((
                        t,
                        p,
                        Accepted::new(&topic.name, partition, now_ms, expire_timestamp_ms),
                    ));
                    None
                };
                topic_codes.push(error.map_or(0, |e| e.code()));
            }
            codes.push(topic_codes);
        }
        if let Err(error) = self.store_commits(&mut inner, &group_id, &accepted, now_ms) {
            for (t, p, _) in &accepted {
                codes[*t][*p] = error.code();
            }
        }
        commit_response(&request, codes)
    }

    /// Kafka's commit validation: a "simple" commit (negative generation) needs an Empty or
    /// unknown group; any other must come from the current generation's member.
    fn validate_offset_commit(
        &self,
        inner: &mut Inner,
        request: &OffsetCommitRequest,
        version: i16,
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        if inner.shut_down {
            return Err(ResponseError::NotCoordinator);
        }
        if request.group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        if let Some(group) = inner.consumer_groups.get(request.group_id.as_str()) {
            return super::consumer::offsets::check_commit_request(
                group,
                request,
                version,
                self.topics(),
            );
        }
        let generation_id = request.generation_id_or_member_epoch;
        let Some(group) = inner.groups.get_mut(request.group_id.as_str()) else {
            return match generation_id {
                // The group is created when the commit is stored.
                g if g < 0 => Ok(()),
                _ if version >= 9 => Err(ResponseError::GroupIdNotFound),
                _ => Err(ResponseError::IllegalGeneration),
            };
        };
        let member_id = request.member_id.as_str();
        let instance_id = request.group_instance_id.as_deref();
        if generation_id < 0 && group.state == GroupState::Empty {
            return Ok(());
        }
        if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
            group.validate_member(member_id, instance_id)?;
            if generation_id != group.generation_id {
                return Err(ResponseError::IllegalGeneration);
            }
        } else if group.state != GroupState::Empty {
            return Err(ResponseError::UnknownMemberId);
        }
        match group.state {
            // The member has its join answer but not its assignment yet.
            GroupState::CompletingRebalance => Err(ResponseError::RebalanceInProgress),
            // A commit is as good as a heartbeat while the group is not rebalancing its sync.
            GroupState::Stable | GroupState::PreparingRebalance => {
                let ctx = self.ctx(now_ms);
                let session_timeout_ms =
                    group.member(member_id).map_or(0, |m| m.session_timeout_ms);
                group.reschedule_heartbeat(member_id, ctx.session_deadline(session_timeout_ms));
                Ok(())
            }
            GroupState::Empty => Ok(()),
        }
    }

    /// Writes the accepted commits, then applies them; nothing changes if the store fails.
    fn store_commits(
        &self,
        inner: &mut Inner,
        group_id: &str,
        accepted: &[(usize, usize, Accepted)],
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        if accepted.is_empty() {
            return Ok(());
        }
        let mut batch = Vec::with_capacity(accepted.len());
        for (_, _, a) in accepted {
            batch.push(offset_commit_record(
                group_id,
                &a.topic,
                a.partition,
                &a.offset,
            )?);
        }
        self.append(group_id, batch)?;
        let offsets = match inner.consumer_groups.get_mut(group_id) {
            Some(group) => &mut group.offsets,
            None => {
                &mut inner
                    .groups
                    .entry(group_id.to_string())
                    .or_insert_with(|| ClassicGroup::new(group_id, Some(now_ms)))
                    .offsets
            }
        };
        for (_, _, a) in accepted {
            offsets
                .entry(a.topic.clone())
                .or_default()
                .insert(a.partition, a.offset.clone());
        }
        Ok(())
    }

    /// Appends to the store; a failure becomes the error Kafka answers (`persist::append`).
    pub(crate) fn append(
        &self,
        group_id: &str,
        batch: Vec<(bytes::Bytes, Option<bytes::Bytes>)>,
    ) -> Result<(), ResponseError> {
        super::persist::append(self.store.as_ref(), group_id, batch)
    }

    /// Deletes the offsets of topics no member subscribes to.
    pub fn offset_delete(
        &self,
        request: OffsetDeleteRequest,
        _version: i16,
    ) -> OffsetDeleteResponse {
        let mut inner = self.lock_at(self.clock.now_ms());
        match self.offset_delete_locked(&mut inner, &request) {
            Ok(topics) => OffsetDeleteResponse::default().with_topics(topics),
            Err(error) => OffsetDeleteResponse::default().with_error_code(error.code()),
        }
    }

    fn offset_delete_locked(
        &self,
        inner: &mut Inner,
        request: &OffsetDeleteRequest,
    ) -> Result<Vec<OffsetDeleteResponseTopic>, ResponseError> {
        if inner.shut_down {
            return Err(ResponseError::NotCoordinator);
        }
        if request.group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        let group_id = request.group_id.as_str();
        // A consumer group's offsets may be deleted while it has members, except those of
        // topics it subscribes to (Kafka's `ConsumerGroup.validateOffsetDelete` allows it).
        let (offsets, subscribed) = match inner.consumer_groups.get_mut(group_id) {
            Some(group) => {
                let subscribed = group.core.subscribed_topic_names();
                (&mut group.offsets, subscribed)
            }
            None => {
                let group = inner
                    .groups
                    .get_mut(group_id)
                    .ok_or(ResponseError::GroupIdNotFound)?;
                // Only a consumer group's subscriptions can be read; other active groups are
                // off limits.
                if group.state != GroupState::Empty
                    && group.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE)
                {
                    return Err(ResponseError::NonEmptyGroup);
                }
                let subscribed = group.subscribed_topics.clone().unwrap_or_default();
                (&mut group.offsets, subscribed.into_iter().collect())
            }
        };
        let mut response = Vec::with_capacity(request.topics.len());
        let mut tombstones = Vec::new();
        let mut deleted = Vec::new();
        for topic in &request.topics {
            let subscribed = subscribed.contains(topic.name.as_str());
            let mut partitions = Vec::with_capacity(topic.partitions.len());
            for partition in &topic.partitions {
                let index = partition.partition_index;
                let mut response_partition =
                    OffsetDeleteResponsePartition::default().with_partition_index(index);
                if subscribed {
                    response_partition.error_code = ResponseError::GroupSubscribedToTopic.code();
                } else if offsets
                    .get(topic.name.as_str())
                    .is_some_and(|p| p.contains_key(&index))
                {
                    let key = records::encode_offset_commit_key(group_id, &topic.name, index)
                        .map_err(|_| ResponseError::UnknownServerError)?;
                    tombstones.push((key, None));
                    deleted.push((topic.name.to_string(), index));
                }
                partitions.push(response_partition);
            }
            response.push(
                OffsetDeleteResponseTopic::default()
                    .with_name(topic.name.clone())
                    .with_partitions(partitions),
            );
        }
        if !tombstones.is_empty() {
            self.append(group_id, tombstones)?;
            for (topic, partition) in deleted {
                super::consumer::remove_from(offsets, &topic, partition);
            }
        }
        Ok(response)
    }

    /// Kafka's periodic `cleanupGroupMetadata`: removes expired offsets, then every Empty group
    /// left with none, writing tombstones for both.
    pub(crate) fn expire_offsets(&self, inner: &mut Inner, now_ms: i64) {
        let mut dead_groups = Vec::new();
        for group in inner.groups.values_mut() {
            let Some(expired) = expired_offsets(group, now_ms, self.config.offsets_retention_ms)
            else {
                continue;
            };
            let offset_count: usize = group.offsets.values().map(|p| p.len()).sum();
            let group_is_dead = expired.len() == offset_count
                && group.state == GroupState::Empty
                && group.pending_members.is_empty();
            let Ok(mut batch) = tombstones(&group.group_id, &expired) else {
                continue;
            };
            if group_is_dead {
                match records::encode_group_metadata_key(&group.group_id) {
                    Ok(key) => batch.push((key, None)),
                    Err(_) => continue,
                }
            }
            if batch.is_empty() || self.append(&group.group_id, batch).is_err() {
                continue;
            }
            for (topic, partition) in &expired {
                remove_offset(group, topic, *partition);
            }
            if !expired.is_empty() {
                tracing::info!(group_id = %group.group_id, expired = expired.len(), "expired committed offsets");
            }
            if group_is_dead {
                dead_groups.push(group.group_id.clone());
            }
        }
        for group_id in dead_groups {
            inner.groups.remove(&group_id);
        }
        let retention_ms = self.config.offsets_retention_ms;
        let store = self.store.as_ref();
        inner.consumer_groups.retain(|group_id, group| {
            let dead = super::consumer::offsets::expire(group, now_ms, retention_ms, store);
            if dead {
                tracing::info!(group_id, "deleted an empty consumer group without offsets");
            }
            !dead
        });
    }
}

/// The offsets of `group` that have expired, or None when the group's offsets cannot expire in
/// its current state (Kafka's `offsetExpirationCondition`): a group without a protocol (simple
/// commits only) counts from each commit; an Empty group from when it became empty; a Stable
/// consumer group from each commit, but only for topics no member subscribes to.
fn expired_offsets(
    group: &ClassicGroup,
    now_ms: i64,
    retention_ms: i64,
) -> Option<Vec<(String, i32)>> {
    let empty_since_ms = match (&group.protocol_type, group.state) {
        (None, _) => None,
        (Some(_), GroupState::Empty) => group.state_since_ms,
        (Some(protocol_type), GroupState::Stable)
            if protocol_type == CONSUMER_PROTOCOL_TYPE && group.subscribed_topics.is_some() =>
        {
            None
        }
        _ => return None,
    };
    let mut expired = Vec::new();
    for (topic, partitions) in &group.offsets {
        if group.is_subscribed_to_topic(topic) {
            continue;
        }
        for (partition, offset) in partitions {
            let is_expired = match offset.expire_timestamp_ms {
                Some(expire_timestamp_ms) => now_ms >= expire_timestamp_ms,
                None => {
                    now_ms - empty_since_ms.unwrap_or(offset.commit_timestamp_ms) >= retention_ms
                }
            };
            if is_expired {
                expired.push((topic.clone(), *partition));
            }
        }
    }
    Some(expired)
}

fn tombstones(
    group_id: &str,
    offsets: &[(String, i32)],
) -> Result<Vec<(bytes::Bytes, Option<bytes::Bytes>)>, String> {
    offsets
        .iter()
        .map(|(topic, partition)| {
            Ok((
                records::encode_offset_commit_key(group_id, topic, *partition)?,
                None,
            ))
        })
        .collect()
}

fn offset_commit_record(
    group_id: &str,
    topic: &str,
    partition: i32,
    offset: &CommittedOffset,
) -> Result<(bytes::Bytes, Option<bytes::Bytes>), ResponseError> {
    let value = OffsetCommitValue {
        offset: offset.offset,
        leader_epoch: offset.leader_epoch,
        metadata: offset.metadata.clone(),
        commit_timestamp_ms: offset.commit_timestamp_ms,
        expire_timestamp_ms: offset.expire_timestamp_ms,
    };
    // Only a group id longer than a record string can hold fails here.
    let key = records::encode_offset_commit_key(group_id, topic, partition)
        .map_err(|_| ResponseError::UnknownServerError)?;
    let value = records::encode_offset_commit_value(&value)
        .map_err(|_| ResponseError::UnknownServerError)?;
    Ok((key, Some(value)))
}

pub(crate) fn remove_offset(group: &mut ClassicGroup, topic: &str, partition: i32) {
    super::consumer::remove_from(&mut group.offsets, topic, partition);
}

fn commit_response(request: &OffsetCommitRequest, codes: Vec<Vec<i16>>) -> OffsetCommitResponse {
    let topics = request
        .topics
        .iter()
        .zip(codes)
        .map(|(topic, topic_codes)| {
            let partitions = topic
                .partitions
                .iter()
                .zip(topic_codes)
                .map(|(p, code)| {
                    OffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            OffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    OffsetCommitResponse::default().with_topics(topics)
}
