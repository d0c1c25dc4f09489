//! Transactional offsets (Kafka's `commitTransactionalOffset` and `replayEndTransactionMarker`):
//! TxnOffsetCommit (API 28, v0-6) writes offsets as a transactional batch of the producer to the
//! group's `__consumer_offsets` partition, where they stay pending until that partition gets
//! the transaction's marker: a COMMIT makes them the group's committed offsets, an ABORT drops
//! them. Until then OffsetFetch answers the last committed offset, or UNSTABLE_OFFSET_COMMIT when
//! the client asks for stable offsets (`require_stable`, v7+).
//!
//! The check that the offsets partition is part of the transaction (AddOffsetsToTxn with
//! transaction version 1, an implicit add with v5) is the transaction coordinator's, made by the
//! caller before this is called. The group checks are KIP-447's: a commit naming a member and
//! generation must come from the current generation's member.

use std::collections::HashMap;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::ResponseError;

use super::consumer::offsets::{check_commit, check_partition, CommitCheck};
use super::consumer::{ConsumerGroup, Offsets};
use super::records::{self, OffsetCommitValue};
use super::state::{ClassicGroup, CommittedOffset, GroupState};
use super::topics::TopicImage;
use super::{GroupCoordinator, Inner, StoreError};

/// Offsets written in transactions not ended yet: producer id → group → (topic, partition).
pub(crate) type PendingTxnOffsets =
    HashMap<i64, HashMap<String, HashMap<(String, i32), CommittedOffset>>>;

impl GroupCoordinator {
    /// TxnOffsetCommit for a transaction the coordinator has the offsets partition in.
    /// `partition_exists` decides UNKNOWN_TOPIC_OR_PARTITION.
    pub fn txn_offset_commit(
        &self,
        request: &TxnOffsetCommitRequest,
        version: i16,
        partition_exists: &dyn Fn(&str, i32) -> bool,
    ) -> TxnOffsetCommitResponse {
        let now_ms = self.clock.now_ms();
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
        let group_error = validate_txn_commit(&mut inner, request, version, self.topics()).err();
        let mut codes: Vec<Vec<i16>> = Vec::with_capacity(request.topics.len());
        let mut accepted: Vec<(usize, usize, String, i32, CommittedOffset)> = Vec::new();
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
                    let offset = CommittedOffset {
                        offset: partition.committed_offset,
                        leader_epoch: partition.committed_leader_epoch,
                        metadata: metadata.to_string(),
                        commit_timestamp_ms: now_ms,
                        expire_timestamp_ms: None,
                    };
                    accepted.push((
                        t,
                        p,
                        topic.name.to_string(),
                        partition.partition_index,
                        offset,
                    ));
                    None
                };
                topic_codes.push(error.map_or(0, |e| e.code()));
            }
            codes.push(topic_codes);
        }
        if let Err(error) = self.store_txn_commits(&mut inner, request, &accepted, now_ms) {
            for (t, p, ..) in &accepted {
                codes[*t][*p] = error.code();
            }
        }
        txn_commit_response(request, codes)
    }

    /// Writes the accepted offsets as the producer's transactional batch, then records them as
    /// pending; nothing changes if the store fails.
    fn store_txn_commits(
        &self,
        inner: &mut Inner,
        request: &TxnOffsetCommitRequest,
        accepted: &[(usize, usize, String, i32, CommittedOffset)],
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        if accepted.is_empty() {
            return Ok(());
        }
        let group_id = request.group_id.as_str();
        let mut batch = Vec::with_capacity(accepted.len());
        for (_, _, topic, partition, offset) in accepted {
            let value = OffsetCommitValue {
                offset: offset.offset,
                leader_epoch: offset.leader_epoch,
                metadata: offset.metadata.clone(),
                commit_timestamp_ms: offset.commit_timestamp_ms,
                expire_timestamp_ms: None,
            };
            let key = records::encode_offset_commit_key(group_id, topic, *partition)
                .map_err(|_| ResponseError::UnknownServerError)?;
            let value = records::encode_offset_commit_value(&value)
                .map_err(|_| ResponseError::UnknownServerError)?;
            batch.push((key, Some(value)));
        }
        let producer_id = request.producer_id.0;
        self.store
            .append_transactional(group_id, producer_id, request.producer_epoch, batch)
            .map_err(|e| {
                tracing::warn!(group_id, "cannot store transactional offsets: {e}");
                match e {
                    StoreError::TooLarge { .. } => ResponseError::UnknownServerError,
                    StoreError::ProducerFenced => ResponseError::InvalidProducerEpoch,
                    StoreError::CoordinatorFenced | StoreError::Io(_) => {
                        ResponseError::CoordinatorNotAvailable
                    }
                }
            })?;
        // A group that had nothing yet exists from now on, as a simple group.
        if !inner.consumer_groups.contains_key(group_id) {
            inner
                .groups
                .entry(group_id.to_string())
                .or_insert_with(|| ClassicGroup::new(group_id, Some(now_ms)));
        }
        let pending = inner
            .pending_txn_offsets
            .entry(producer_id)
            .or_default()
            .entry(group_id.to_string())
            .or_default();
        for (_, _, topic, partition, offset) in accepted {
            pending.insert((topic.clone(), *partition), offset.clone());
        }
        Ok(())
    }

    /// The transaction of `producer_id` ended in `__consumer_offsets` partition `partition`
    /// (the transaction coordinator's marker, or WriteTxnMarkers): the marker is appended there
    /// first, then the producer's pending offsets of that partition's groups are committed or
    /// dropped. A marker for a producer with nothing pending is appended all the same.
    pub fn complete_transaction(
        &self,
        partition: i32,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
        transaction_version: i8,
    ) -> Result<(), StoreError> {
        let mut inner = self.lock_at(self.clock.now_ms());
        self.store.append_marker(
            partition,
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
            transaction_version,
        )?;
        let store = self.store.as_ref();
        let committed = take_ended(
            &mut inner.pending_txn_offsets,
            producer_id,
            commit,
            |group| store.partition_for(group) == partition,
        );
        for (group_id, ended) in committed {
            let offsets = match inner.consumer_groups.get_mut(&group_id) {
                Some(group) => &mut group.offsets,
                None => {
                    &mut inner
                        .groups
                        .entry(group_id.clone())
                        .or_insert_with(|| ClassicGroup::new(&group_id, None))
                        .offsets
                }
            };
            commit_into(offsets, ended);
        }
        Ok(())
    }
}

/// The offsets one ended transaction commits to one group: (topic, partition) → offset.
pub(crate) type EndedOffsets = HashMap<(String, i32), CommittedOffset>;

/// Takes the producer's pending offsets of the groups `in_partition` selects out of `pending`:
/// those a commit makes the groups' committed offsets, by group (nothing for an abort).
pub(crate) fn take_ended(
    pending: &mut PendingTxnOffsets,
    producer_id: i64,
    commit: bool,
    in_partition: impl Fn(&str) -> bool,
) -> Vec<(String, EndedOffsets)> {
    let Some(by_group) = pending.get_mut(&producer_id) else {
        return Vec::new();
    };
    let ended: Vec<String> = by_group
        .keys()
        .filter(|g| in_partition(g))
        .cloned()
        .collect();
    let mut committed = Vec::new();
    for group_id in ended {
        if let Some(offsets) = by_group.remove(&group_id) {
            if commit {
                committed.push((group_id, offsets));
            }
        }
    }
    if by_group.is_empty() {
        pending.remove(&producer_id);
    }
    committed
}

/// Puts one group's offsets of a committed transaction into its committed offsets.
pub(crate) fn commit_into(offsets: &mut Offsets, ended: EndedOffsets) {
    for ((topic, partition), offset) in ended {
        offsets.entry(topic).or_default().insert(partition, offset);
    }
}

/// Whether a transaction has offsets of the group's partition pending.
pub(crate) fn has_pending(inner: &Inner, group_id: &str, topic: &str, partition: i32) -> bool {
    let key = (topic.to_string(), partition);
    inner.pending_txn_offsets.values().any(|groups| {
        groups
            .get(group_id)
            .is_some_and(|offsets| offsets.contains_key(&key))
    })
}

/// Kafka's `validateTransactionalOffsetCommit`: an unknown group is created by a commit with no
/// generation (a named generation is ILLEGAL_GENERATION, GROUP_ID_NOT_FOUND from v6); otherwise
/// a commit naming a member or generation must be the current generation's member
/// (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, ILLEGAL_GENERATION). A consumer group checks the
/// member and its epoch as OffsetCommit does, except that any version may commit in a
/// transaction; a stale epoch is ILLEGAL_GENERATION below v6, STALE_MEMBER_EPOCH from v6.
fn validate_txn_commit(
    inner: &mut Inner,
    request: &TxnOffsetCommitRequest,
    version: i16,
    topics: &dyn TopicImage,
) -> Result<(), ResponseError> {
    if inner.shut_down {
        return Err(ResponseError::NotCoordinator);
    }
    if request.group_id.is_empty() {
        return Err(ResponseError::InvalidGroupId);
    }
    let generation_id = request.generation_id;
    if let Some(group) = inner.consumer_groups.get(request.group_id.as_str()) {
        return check_consumer_group(group, request, topics).map_err(|e| match e {
            ResponseError::StaleMemberEpoch if version < STALE_MEMBER_EPOCH_FROM => {
                ResponseError::IllegalGeneration
            }
            other => other,
        });
    }
    let Some(group) = inner.groups.get(request.group_id.as_str()) else {
        return match generation_id {
            g if g < 0 => Ok(()),
            _ if version >= GROUP_ID_NOT_FOUND_FROM => Err(ResponseError::GroupIdNotFound),
            _ => Err(ResponseError::IllegalGeneration),
        };
    };
    if generation_id < 0 && group.state == GroupState::Empty {
        return Ok(());
    }
    let member_id = request.member_id.as_str();
    let instance_id = request.group_instance_id.as_deref();
    if generation_id >= 0 || !member_id.is_empty() || instance_id.is_some() {
        group.validate_member(member_id, instance_id)?;
        if generation_id != group.generation_id {
            return Err(ResponseError::IllegalGeneration);
        }
    }
    Ok(())
}

/// The first TxnOffsetCommit version answering GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH.
const GROUP_ID_NOT_FOUND_FROM: i16 = 6;
const STALE_MEMBER_EPOCH_FROM: i16 = 6;

/// The member-epoch checks of a commit to a consumer group, every partition when the epoch is
/// behind; one failing partition fails the commit.
fn check_consumer_group(
    group: &ConsumerGroup,
    request: &TxnOffsetCommitRequest,
    topics: &dyn TopicImage,
) -> Result<(), ResponseError> {
    let epoch = request.generation_id;
    // Transactional commits skip the OffsetCommit v9 requirement: any version passes.
    let member = match check_commit(group, request.member_id.as_str(), epoch, i16::MAX)? {
        CommitCheck::Accept => return Ok(()),
        CommitCheck::PerPartition(member) => member,
    };
    for topic in &request.topics {
        let topic_id = topics.by_name(topic.name.as_str()).map(|t| t.id);
        for partition in &topic.partitions {
            check_partition(member, epoch, topic_id, partition.partition_index)?;
        }
    }
    Ok(())
}

fn txn_commit_response(
    request: &TxnOffsetCommitRequest,
    codes: Vec<Vec<i16>>,
) -> TxnOffsetCommitResponse {
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
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code)
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}
