//! Members leaving a consumer group: a clean leave (member epoch -1), a static member's
//! temporary leave (-2: it keeps its place and assignment until its session expires, so that it
//! can come back under a new member id without a rebalance), and fencing by the coordinator when
//! a member's session expires or it does not revoke its partitions within its rebalance timeout.
//! Kafka's `consumerGroupLeave` and `consumerGroupFenceMembers`: the members go, their records
//! are tombstoned and the group epoch moves on; when the last member goes, the assignment epoch
//! moves with it, so an Empty group is not left "assigning" (KAFKA-20442).

use kafka_protocol::ResponseError;

use super::member::{MemberState, PartitionEpochs};
use super::request::{Answer, GroupError, Heartbeat};
use super::{commit, ConsumerGroup, Core};
use crate::group::context::Ctx;
use crate::group::topics::TopicImage;
use crate::group::Inner;

/// A leave (-1) or a static member's temporary leave (-2).
pub(crate) fn leave(
    inner: &mut Inner,
    ctx: &Ctx,
    topics: &dyn TopicImage,
    h: &Heartbeat,
) -> Result<Answer, GroupError> {
    let group = super::get_or_create(inner, ctx, &h.group_id, false)?;
    let member_id = match &h.instance_id {
        None => {
            if !group.core.members.contains_key(&h.member_id) {
                return Err(GroupError::new(
                    ResponseError::UnknownMemberId,
                    format!(
                        "Member {} is not a member of group {}.",
                        h.member_id, h.group_id
                    ),
                ));
            }
            h.member_id.clone()
        }
        Some(instance_id) => {
            let Some(existing) = group.core.static_member_id(instance_id) else {
                return Err(GroupError::new(
                    ResponseError::UnknownMemberId,
                    format!("Instance id {instance_id} is unknown."),
                ));
            };
            if existing != h.member_id {
                return Err(GroupError::new(
                    ResponseError::FencedInstanceId,
                    format!("Static member {} with instance id {instance_id} was fenced by member {existing}.", h.member_id),
                ));
            }
            existing.to_string()
        }
    };
    let answer = Answer {
        member_id: h.member_id.clone(),
        member_epoch: h.member_epoch,
        heartbeat_interval_ms: 0,
        assignment: None,
    };
    if h.member_epoch == -2 {
        tracing::info!(group_id = %h.group_id, member_id, "static member temporarily left the consumer group");
        let mut core = group.core.clone();
        if let Some(member) = core.members.get_mut(&member_id) {
            member.assignment.member_epoch = -2;
            member.assignment.pending_revocation = PartitionEpochs::new();
            for partitions in member.assignment.assigned.values_mut() {
                partitions.values_mut().for_each(|epoch| *epoch = 0);
            }
        }
        commit(group, ctx, core)?;
        return Ok(answer);
    }
    tracing::info!(group_id = %h.group_id, member_id, "member left the consumer group");
    fence_members(group, ctx, topics, &[member_id])?;
    Ok(answer)
}

/// Removes `member_ids` from the group, with their records (Kafka's `consumerGroupFenceMembers`).
pub(crate) fn fence_members(
    group: &mut ConsumerGroup,
    ctx: &Ctx,
    topics: &dyn TopicImage,
    member_ids: &[String],
) -> Result<(), GroupError> {
    let mut core: Core = group.core.clone();
    for member_id in member_ids {
        core.members.remove(member_id);
        core.target.remove(member_id);
    }
    let used = core.subscribed_regexes();
    core.regexes.retain(|regex, _| used.contains_key(regex));
    core.group_epoch += 1;
    core.metadata_hash = core.compute_metadata_hash(topics);
    if core.members.is_empty() {
        core.assignment_epoch = core.group_epoch;
        core.assignment_timestamp_ms = 0;
    }
    tracing::info!(group_id = %group.group_id, ?member_ids, group_epoch = core.group_epoch, "removed members; bumped the group epoch");
    commit(group, ctx, core)
}

/// Re-arms a member's timers after a heartbeat: its session starts again, and a member that
/// owes a revocation must make it within its rebalance timeout (counted from when it started
/// to owe it at this epoch). Classic-protocol members keep their own session timeout.
pub(crate) fn after_step(group: &mut ConsumerGroup, ctx: &Ctx, member_id: &str, classic: bool) {
    let Some(member) = group.core.members.get(member_id) else {
        return;
    };
    let session_timeout_ms = match (&member.metadata.classic, classic) {
        (Some(c), true) => c.session_timeout_ms,
        _ => ctx.consumer_session_timeout_ms(&group.group_id),
    };
    let owes_revocation = member.assignment.state == MemberState::UnrevokedPartitions;
    let (epoch, rebalance_timeout_ms) = (member.epoch(), member.metadata.rebalance_timeout_ms);
    let session_deadline_ms = ctx.session_deadline(session_timeout_ms);
    let timers = group.timers_mut(member_id);
    timers.session_deadline_ms = session_deadline_ms;
    if owes_revocation && !classic {
        if timers.rebalance_epoch != epoch || timers.rebalance_deadline_ms == i64::MAX {
            timers.rebalance_epoch = epoch;
            timers.rebalance_deadline_ms = ctx.after(i64::from(rebalance_timeout_ms));
        }
    } else {
        timers.rebalance_deadline_ms = i64::MAX;
        timers.rebalance_epoch = -1;
    }
    let earliest = timers.earliest_ms();
    group.arm(earliest);
}

/// Fences the members whose session or rebalance timeout is due.
pub(crate) fn fire_timers(group: &mut ConsumerGroup, ctx: &Ctx, topics: &dyn TopicImage) {
    let now_ms = ctx.now_ms;
    let mut due = Vec::new();
    for (member_id, timers) in &group.timers {
        let Some(member) = group.core.members.get(member_id) else {
            continue;
        };
        if timers.session_deadline_ms <= now_ms {
            due.push((member_id.clone(), "the member session expired"));
        } else if timers.rebalance_deadline_ms <= now_ms && member.epoch() == timers.rebalance_epoch
        {
            due.push((
                member_id.clone(),
                "it failed to revoke its partitions within its rebalance timeout",
            ));
        } else if timers.classic_deadline_ms <= now_ms {
            due.push((
                member_id.clone(),
                "the classic member failed to join or sync within its rebalance timeout",
            ));
        }
    }
    for (member_id, reason) in due {
        tracing::info!(group_id = %group.group_id, member_id, reason, "member fenced from the group");
        if let Err(e) = fence_members(group, ctx, topics, std::slice::from_ref(&member_id)) {
            // The member stays; its timer fires again on the next tick.
            tracing::warn!(group_id = %group.group_id, member_id, error = ?e.error, "cannot store that a member was fenced");
            let retry_ms = ctx.after(1_000);
            let timers = group.timers_mut(&member_id);
            timers.session_deadline_ms = timers.session_deadline_ms.max(retry_ms);
            group.arm(retry_ms);
        }
    }
    // Disarmed rebalance timers of members that moved on.
    for (member_id, timers) in group.timers.iter_mut() {
        let moved_on = group
            .core
            .members
            .get(member_id)
            .is_some_and(|m| m.epoch() != timers.rebalance_epoch);
        if timers.rebalance_deadline_ms <= now_ms && moved_on {
            timers.rebalance_deadline_ms = i64::MAX;
        }
    }
    group.wakeup_ms = group.next_deadline_ms();
}
