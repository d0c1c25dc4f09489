//! The member-epoch checks on committed offsets of a consumer group (Kafka's
//! `ConsumerGroup.validateOffsetCommit` and `validateOffsetFetch`). A commit names the member
//! and, in `generation_id_or_member_epoch`, its member epoch: with no members left, a commit
//! without a member (epoch < 0) is an admin commit; otherwise the member must exist, a member
//! of the consumer protocol must use OffsetCommit v9 or later, its epoch may not be ahead of
//! the coordinator's, and behind it only for partitions the member was given at or before that
//! epoch (KIP-1251: a commit racing the member's own epoch bump is not stale). Members of the
//! classic protocol get ILLEGAL_GENERATION where the others get STALE_MEMBER_EPOCH.

use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::member::ConsumerMember;
use super::ConsumerGroup;

/// How a commit to a consumer group is checked.
pub(crate) enum CommitCheck<'a> {
    /// Accepted without further checks.
    Accept,
    /// Each partition must pass [`check_partition`] with this member.
    PerPartition(&'a ConsumerMember),
}

fn stale(member: &ConsumerMember) -> ResponseError {
    match member.uses_classic_protocol() {
        true => ResponseError::IllegalGeneration,
        false => ResponseError::StaleMemberEpoch,
    }
}

pub(crate) fn check_commit<'a>(
    group: &'a ConsumerGroup,
    member_id: &str,
    member_epoch: i32,
    version: i16,
) -> Result<CommitCheck<'a>, ResponseError> {
    if member_epoch < 0 && group.core.members.is_empty() {
        return Ok(CommitCheck::Accept);
    }
    let member = group
        .core
        .members
        .get(member_id)
        .ok_or(ResponseError::UnknownMemberId)?;
    if !member.uses_classic_protocol() && version < 9 {
        return Err(ResponseError::UnsupportedVersion);
    }
    if member_epoch == member.epoch() {
        return Ok(CommitCheck::Accept);
    }
    if member_epoch > member.epoch() {
        return Err(stale(member));
    }
    Ok(CommitCheck::PerPartition(member))
}

/// A commit of an older epoch is accepted for a partition the member owns (or is revoking)
/// and was given at or before that epoch.
pub(crate) fn check_partition(
    member: &ConsumerMember,
    member_epoch: i32,
    topic_id: Option<Uuid>,
    partition: i32,
) -> Result<(), ResponseError> {
    let assigned_at = topic_id.and_then(|id| member.assignment_epoch_of(id, partition));
    match assigned_at {
        Some(epoch) if member_epoch >= epoch => Ok(()),
        _ => Err(stale(member)),
    }
}

/// OffsetFetch v9+: with a member id or an epoch given, the member must exist at that epoch.
pub(crate) fn check_fetch(
    group: &ConsumerGroup,
    member_id: Option<&str>,
    member_epoch: i32,
) -> Result<(), ResponseError> {
    if member_id.is_none() && member_epoch < 0 {
        return Ok(());
    }
    let member = member_id
        .and_then(|id| group.core.members.get(id))
        .ok_or(ResponseError::UnknownMemberId)?;
    if member_epoch != member.epoch() {
        return Err(stale(member));
    }
    Ok(())
}

/// The whole check of an OffsetCommit to a consumer group: the member and its epoch, then
/// every partition when the epoch is behind. Like Kafka, one failing partition fails them all.
pub(crate) fn check_commit_request(
    group: &ConsumerGroup,
    request: &kafka_protocol::messages::OffsetCommitRequest,
    version: i16,
    topics: &dyn crate::group::topics::TopicImage,
) -> Result<(), ResponseError> {
    let epoch = request.generation_id_or_member_epoch;
    let member = match check_commit(group, request.member_id.as_str(), epoch, version)? {
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

/// Kafka's offset expiry for a consumer group: an offset of a topic no member subscribes to
/// expires `offsets.retention.minutes` after its commit (or at its explicit expiry). True when
/// the group is Empty and has no offsets left: it is then deleted, its records tombstoned.
pub(crate) fn expire(
    group: &mut ConsumerGroup,
    now_ms: i64,
    retention_ms: i64,
    store: &dyn crate::group::OffsetStore,
) -> bool {
    let subscribed = group.core.subscribed_topic_names();
    let mut expired = Vec::new();
    for (topic, partitions) in &group.offsets {
        if subscribed.contains(topic) {
            continue;
        }
        for (partition, offset) in partitions {
            let due = match offset.expire_timestamp_ms {
                Some(at_ms) => now_ms >= at_ms,
                None => now_ms - offset.commit_timestamp_ms >= retention_ms,
            };
            if due {
                expired.push((topic.clone(), *partition));
            }
        }
    }
    let remaining: usize = group.offsets.values().map(|p| p.len()).sum::<usize>() - expired.len();
    let dead = remaining == 0 && group.core.members.is_empty();
    let mut batch = Vec::new();
    for (topic, partition) in &expired {
        match crate::group::records::encode_offset_commit_key(&group.group_id, topic, *partition) {
            Ok(key) => batch.push((key, None)),
            Err(_) => return false,
        }
    }
    if dead {
        match super::changes::group_tombstones(&group.group_id, &group.core) {
            Ok(tombstones) => batch.extend(tombstones),
            Err(_) => return false,
        }
    }
    if batch.is_empty() || crate::group::context::append(store, &group.group_id, batch).is_err() {
        return false;
    }
    for (topic, partition) in &expired {
        super::remove_from(&mut group.offsets, topic, *partition);
    }
    if !expired.is_empty() {
        tracing::info!(group_id = %group.group_id, expired = expired.len(), "expired committed offsets");
    }
    dead
}
