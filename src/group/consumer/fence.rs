//! Members leaving a consumer group: a clean leave (member epoch -1), a static member's
//! temporary leave (-2: it keeps its place and assignment until its session expires, so that it
//! can come back under a new member id without a rebalance), and fencing by the coordinator when
//! a member's session expires or it does not revoke its partitions within its rebalance timeout.
//! Kafka's `consumerGroupLeave` and `consumerGroupFenceMembers`: the members go, their records
//! are tombstoned and the group epoch moves on; when the last member goes, the assignment epoch
//! moves with it, so an Empty group is not left "assigning" (KAFKA-20442). When only
//! classic-protocol members would be left, the group turns back into a classic group instead
//! (`migrate.rs`), and the caller puts that in its place. Classic-protocol members have two
//! timers of their own: one to rejoin after being told to, one to sync after their join.

use kafka_protocol::ResponseError;

use super::member::{MemberState, PartitionEpochs};
use super::migrate::{self, Downgrade};
use super::request::{Answer, GroupError, Heartbeat};
use super::{commit, ConsumerGroup, Core};
use crate::group::context::Ctx;
use crate::group::state::ClassicGroup;
use crate::group::topics::TopicImage;
use crate::group::Inner;

/// A leave (-1) or a static member's temporary leave (-2).
pub(crate) fn leave(
    inner: &mut Inner,
    ctx: &Ctx,
    topics: &dyn TopicImage,
    h: &Heartbeat,
) -> Result<Answer, GroupError> {
    let group = super::get_or_create(inner, ctx, topics, &h.group_id, false)?;
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
    if let Some(classic) = fence_members(group, ctx, topics, &[member_id])? {
        inner.install_classic(classic);
    }
    Ok(answer)
}

/// Removes `member_ids` from the group, with their records (Kafka's `consumerGroupFenceMembers`);
/// or, when only classic-protocol members would be left and the migration policy allows it,
/// turns the group into the classic group returned, which the caller puts in its place.
pub(crate) fn fence_members(
    group: &mut ConsumerGroup,
    ctx: &Ctx,
    topics: &dyn TopicImage,
    member_ids: &[String],
) -> Result<Option<ClassicGroup>, GroupError> {
    if member_ids.is_empty() {
        return Ok(None);
    }
    if migrate::may_downgrade_without(group, ctx, member_ids) {
        let before = group.core.clone();
        let mut after = before.clone();
        after.members.retain(|id, _| !member_ids.contains(id));
        let reason = format!(
            "Downgrade group {} from consumer to classic for member leaving.",
            group.group_id
        );
        let downgrade = Downgrade {
            group,
            after: &after,
            generation: before.group_epoch,
            before_records: Vec::new(),
            tombstoned: &before,
            rebalance: Some(&reason),
        };
        return downgrade.run(ctx, topics).map(Some);
    }
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
    commit(group, ctx, core).map(|()| None)
}

/// Restarts a member's session: a classic-protocol member's with its own session timeout.
pub(crate) fn arm_session(group: &mut ConsumerGroup, ctx: &Ctx, member_id: &str) {
    let Some(member) = group.core.members.get(member_id) else {
        return;
    };
    let session_timeout_ms = match &member.metadata.classic {
        Some(c) => c.session_timeout_ms,
        None => ctx.consumer_session_timeout_ms(&group.group_id),
    };
    let deadline_ms = ctx.session_deadline(session_timeout_ms);
    group.timers_mut(member_id).session_deadline_ms = deadline_ms;
    group.arm(deadline_ms);
}

/// A classic-protocol member told to rejoin must do so within its rebalance timeout; a timer
/// already running is left alone (Kafka's `scheduleConsumerGroupJoinTimeoutIfAbsent`).
pub(crate) fn arm_join_if_absent(group: &mut ConsumerGroup, ctx: &Ctx, member_id: &str) {
    let Some(member) = group.core.members.get(member_id) else {
        return;
    };
    let deadline_ms = ctx.after(i64::from(member.metadata.rebalance_timeout_ms));
    let timers = group.timers_mut(member_id);
    if timers.join_deadline_ms == i64::MAX {
        timers.join_deadline_ms = deadline_ms;
        group.arm(deadline_ms);
    }
}

/// After a classic-protocol member's JoinGroup: its join timer is off, its session restarts
/// with `session_timeout_ms`, and it must send SyncGroup within `rebalance_timeout_ms`.
pub(crate) fn after_classic_join(
    group: &mut ConsumerGroup,
    ctx: &Ctx,
    member_id: &str,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
) {
    let session_ms = ctx.session_deadline(session_timeout_ms);
    let sync_ms = ctx.after(i64::from(rebalance_timeout_ms));
    let timers = group.timers_mut(member_id);
    timers.join_deadline_ms = i64::MAX;
    timers.session_deadline_ms = session_ms;
    timers.sync_deadline_ms = sync_ms;
    timers.rebalance_deadline_ms = i64::MAX;
    group.arm(session_ms.min(sync_ms));
}

/// After a classic-protocol member's SyncGroup: its sync timer is off and its session restarts.
pub(crate) fn after_classic_sync(group: &mut ConsumerGroup, ctx: &Ctx, member_id: &str) {
    group.timers_mut(member_id).sync_deadline_ms = i64::MAX;
    arm_session(group, ctx, member_id);
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

/// Fences the members whose session, rebalance, join or sync timeout is due. Returns the
/// classic group the group turned into, if fencing downgraded it.
pub(crate) fn fire_timers(
    group: &mut ConsumerGroup,
    ctx: &Ctx,
    topics: &dyn TopicImage,
) -> Option<ClassicGroup> {
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
        } else if timers.join_deadline_ms <= now_ms {
            due.push((
                member_id.clone(),
                "the classic member failed to join within the rebalance timeout",
            ));
        } else if timers.sync_deadline_ms <= now_ms {
            due.push((
                member_id.clone(),
                "the member failed to sync within timeout",
            ));
        }
    }
    for (member_id, reason) in due {
        tracing::info!(group_id = %group.group_id, member_id, reason, "member fenced from the group");
        match fence_members(group, ctx, topics, std::slice::from_ref(&member_id)) {
            Ok(Some(classic)) => return Some(classic),
            Ok(None) => {}
            Err(e) => {
                // The member stays; its timer fires again on the next tick.
                tracing::warn!(group_id = %group.group_id, member_id, error = ?e.error, "cannot store that a member was fenced");
                let retry_ms = ctx.after(1_000);
                let timers = group.timers_mut(&member_id);
                timers.session_deadline_ms = timers.session_deadline_ms.max(retry_ms);
                timers.join_deadline_ms = timers.join_deadline_ms.max(retry_ms);
                timers.sync_deadline_ms = timers.sync_deadline_ms.max(retry_ms);
                group.arm(retry_ms);
            }
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
    None
}
