//! The classic rebalance protocol, as a state machine over one group:
//!
//! ```text
//! Empty ──join──▶ PreparingRebalance ──everyone rejoined, or timeout──▶ CompletingRebalance
//!   ▲                │       ▲                                               │ leader's SyncGroup
//!   └── no members ──┘       │                                               ▼
//!                            └──── join with new metadata, leave, expiry ── Stable
//!                                  (from CompletingRebalance too)
//! ```
//!
//! Kafka's `prepareRebalance`, `completeClassicGroupJoin`, `propagateAssignment` and the timer
//! callbacks (heartbeat expiry, pending-member expiry, join and sync expiry). Timers are
//! deadlines stored on the group; `fire_timers` runs the due ones from `tick`. These functions
//! never fail: they answer parked requests and move the group along.

use kafka_protocol::ResponseError;

use super::context::Ctx;
use super::persist;
use super::state::{ClassicGroup, DueTimer, GroupState, JoinOutcome, JoinTimer, SyncOutcome};
use super::Inner;

pub(crate) fn maybe_prepare_rebalance_or_complete_join(
    group: &mut ClassicGroup,
    ctx: &Ctx,
    reason: &str,
) {
    if group.can_rebalance() {
        prepare_rebalance(group, ctx, reason);
    } else {
        maybe_complete_join_phase(group, ctx);
    }
}

/// Starts a rebalance: parked syncs learn that it started, and the join phase waits for the
/// members. An Empty group's first rebalance waits the initial delay so that a whole fleet of
/// consumers starting together lands in one generation.
pub(crate) fn prepare_rebalance(group: &mut ClassicGroup, ctx: &Ctx, reason: &str) {
    if group.state == GroupState::CompletingRebalance {
        reset_and_propagate_assignment_with_error(group, ctx, ResponseError::RebalanceInProgress);
    }
    group.pending_sync_members.clear();
    group.sync_deadline_ms = None;

    let is_initial_rebalance = group.state == GroupState::Empty;
    if is_initial_rebalance {
        let delay_ms = ctx.config.group_initial_rebalance_delay_ms;
        let remaining_ms = (group.rebalance_timeout_ms() - delay_ms).max(0);
        group.set_join_timer(
            ctx.after(delay_ms),
            JoinTimer::Initial {
                delay_ms,
                remaining_ms,
            },
        );
    }
    tracing::info!(
        group_id = %group.group_id,
        state = group.state.name(),
        generation_id = group.generation_id,
        reason,
        "preparing to rebalance"
    );
    group.transition_to(GroupState::PreparingRebalance, ctx.now_ms);

    if !is_initial_rebalance {
        if group.has_all_members_joined() {
            complete_join(group, ctx);
        } else {
            let deadline_ms = ctx.after(group.rebalance_timeout_ms());
            group.set_join_timer(deadline_ms, JoinTimer::Rebalance);
        }
    }
}

/// Completes the join phase early once everyone is in, except during an initial rebalance,
/// which always waits out its delay.
pub(crate) fn maybe_complete_join_phase(group: &mut ClassicGroup, ctx: &Ctx) {
    if group.state == GroupState::PreparingRebalance
        && group.previous_state != GroupState::Empty
        && group.has_all_members_joined()
    {
        complete_join(group, ctx);
    }
}

/// Ends the join phase: dynamic members that did not rejoin are dropped, the generation moves
/// on, a protocol is chosen and every parked JoinGroup is answered (the leader's answer carries
/// the members). Static members that did not rejoin keep their place until their session ends.
pub(crate) fn complete_join(group: &mut ClassicGroup, ctx: &Ctx) {
    group.join_timer = None;
    if group.state != GroupState::PreparingRebalance {
        return;
    }
    let not_rejoined: Vec<String> = group
        .members
        .iter()
        .filter(|m| m.join_waiter.is_none() && m.group_instance_id.is_none())
        .map(|m| m.member_id.clone())
        .collect();
    for member_id in &not_rejoined {
        group.remove(member_id);
    }
    if !not_rejoined.is_empty() {
        tracing::info!(group_id = %group.group_id, ?not_rejoined, "removed members that did not rejoin");
    }

    if !maybe_elect_new_joined_leader(group) && !group.members.is_empty() {
        // Nobody rejoined: wait another rebalance timeout for sessions to clear out the members.
        let deadline_ms = ctx.after(group.rebalance_timeout_ms());
        group.set_join_timer(deadline_ms, JoinTimer::Rebalance);
        return;
    }
    init_next_generation(group, ctx);
    if group.state == GroupState::Empty {
        tracing::info!(group_id = %group.group_id, generation_id = group.generation_id, "group is now empty");
        persist::store_empty_group(group, ctx);
        return;
    }
    tracing::info!(
        group_id = %group.group_id,
        generation_id = group.generation_id,
        members = group.members.len(),
        protocol = ?group.protocol_name,
        "stabilized group"
    );
    let leader = group.leader_id.clone().unwrap_or_default();
    let leader_view = current_members(group);
    for member in &mut group.members {
        let is_leader = member.member_id == leader;
        member.complete_join(JoinOutcome {
            error_code: 0,
            generation_id: group.generation_id,
            protocol_type: group.protocol_type.clone(),
            protocol_name: group.protocol_name.clone(),
            leader: leader.clone(),
            member_id: member.member_id.clone(),
            skip_assignment: false,
            members: if is_leader {
                leader_view.clone()
            } else {
                Vec::new()
            },
        });
        member.heartbeat_deadline_ms = ctx.session_deadline(member.session_timeout_ms);
        member.is_new = false;
        group.pending_sync_members.insert(member.member_id.clone());
        group.wakeup_ms = group.wakeup_ms.min(member.heartbeat_deadline_ms);
    }
    let sync_deadline_ms = ctx.after(group.rebalance_timeout_ms());
    group.set_sync_deadline(sync_deadline_ms);
}

/// Kafka's `maybeElectNewJoinedLeader`: the leader stays if it rejoined, otherwise the first
/// rejoined member takes over. False when nobody rejoined.
fn maybe_elect_new_joined_leader(group: &mut ClassicGroup) -> bool {
    let Some(leader_id) = group.leader_id.clone() else {
        return false;
    };
    if group
        .member(&leader_id)
        .is_some_and(|m| m.join_waiter.is_some())
    {
        return true;
    }
    match group.members.iter().find(|m| m.join_waiter.is_some()) {
        Some(member) => {
            group.leader_id = Some(member.member_id.clone());
            true
        }
        None => false,
    }
}

fn init_next_generation(group: &mut ClassicGroup, ctx: &Ctx) {
    group.generation_id = group.generation_id.wrapping_add(1);
    if group.members.is_empty() {
        group.protocol_name = None;
        group.subscribed_topics = group.compute_subscribed_topics();
        group.transition_to(GroupState::Empty, ctx.now_ms);
    } else {
        group.protocol_name = group.select_protocol();
        group.subscribed_topics = group.compute_subscribed_topics();
        group.transition_to(GroupState::CompletingRebalance, ctx.now_ms);
    }
    group.pending_sync_members.clear();
}

/// The member list only the leader receives: ids and metadata for the chosen protocol.
pub(crate) fn current_members(group: &ClassicGroup) -> Vec<(String, Option<String>, bytes::Bytes)> {
    let protocol_name = group.protocol_name.as_deref().unwrap_or_default();
    group
        .members
        .iter()
        .map(|m| {
            (
                m.member_id.clone(),
                m.group_instance_id.clone(),
                m.metadata(protocol_name),
            )
        })
        .collect()
}

/// Answers every parked SyncGroup with its member's assignment (or `error`), and restarts those
/// members' sessions, which were on hold while they waited.
pub(crate) fn propagate_assignment(
    group: &mut ClassicGroup,
    ctx: &Ctx,
    error: Option<ResponseError>,
) {
    // Like Kafka, an error answer names no protocol.
    let (protocol_type, protocol_name) = match error {
        None => (group.protocol_type.clone(), group.protocol_name.clone()),
        Some(_) => (None, None),
    };
    let error_code = error.map_or(0, |e| e.code());
    let mut earliest_ms = i64::MAX;
    for member in &mut group.members {
        let outcome = SyncOutcome {
            error_code,
            protocol_type: protocol_type.clone(),
            protocol_name: protocol_name.clone(),
            assignment: member.assignment.clone(),
        };
        if member.complete_sync(outcome) {
            member.heartbeat_deadline_ms = ctx.session_deadline(member.session_timeout_ms);
            earliest_ms = earliest_ms.min(member.heartbeat_deadline_ms);
        }
    }
    group.arm(earliest_ms);
}

pub(crate) fn reset_and_propagate_assignment_with_error(
    group: &mut ClassicGroup,
    ctx: &Ctx,
    error: ResponseError,
) {
    for member in &mut group.members {
        member.assignment = bytes::Bytes::new();
    }
    propagate_assignment(group, ctx, Some(error));
}

/// Kafka's `removeMemberAndUpdateClassicGroup`: a member that failed (or was fenced out) goes, a
/// parked join of it is told UNKNOWN_MEMBER_ID so that a live client retries, and the group
/// rebalances without it.
pub(crate) fn remove_member_and_update_group(
    group: &mut ClassicGroup,
    ctx: &Ctx,
    member_id: &str,
    reason: &str,
) {
    if let Some(member) = group.member_mut(member_id) {
        member.complete_join(JoinOutcome::error(ResponseError::UnknownMemberId, ""));
    }
    group.remove(member_id);
    match group.state {
        GroupState::Stable | GroupState::CompletingRebalance => {
            maybe_prepare_rebalance_or_complete_join(group, ctx, reason);
        }
        GroupState::PreparingRebalance if group.has_all_members_joined() => {
            complete_join(group, ctx)
        }
        _ => {}
    }
}

/// Runs every due timer of every group whose wake-up time has come, then recomputes the
/// coordinator-wide wake-up time.
pub(crate) fn fire_timers(inner: &mut Inner, ctx: &Ctx) {
    let mut wakeup_ms = i64::MAX;
    for group in inner.groups.values_mut() {
        if group.wakeup_ms <= ctx.now_ms {
            fire_due_timers(group, ctx);
            group.wakeup_ms = group.next_deadline_ms();
        }
        wakeup_ms = wakeup_ms.min(group.wakeup_ms);
    }
    inner.wakeup_ms = wakeup_ms;
}

/// Each branch disarms the timer it handles or replaces it with a later one, so the loop ends.
fn fire_due_timers(group: &mut ClassicGroup, ctx: &Ctx) {
    while let Some(timer) = group.next_due_timer(ctx.now_ms) {
        match timer {
            DueTimer::PendingMember(member_id) => {
                tracing::info!(group_id = %group.group_id, member_id, "pending member expired");
                group.pending_members.remove(&member_id);
                if group.state == GroupState::PreparingRebalance && group.has_all_members_joined() {
                    complete_join(group, ctx);
                }
            }
            DueTimer::Heartbeat(member_id) => expire_heartbeat(group, ctx, &member_id),
            DueTimer::Join => match group.join_timer.take() {
                Some((
                    deadline_ms,
                    JoinTimer::Initial {
                        delay_ms,
                        remaining_ms,
                    },
                )) => {
                    fire_initial_delay(group, ctx, deadline_ms, delay_ms, remaining_ms);
                }
                Some((_, JoinTimer::Rebalance)) | None => complete_join(group, ctx),
            },
            DueTimer::Sync => {
                group.sync_deadline_ms = None;
                expire_pending_sync(group, ctx);
            }
        }
    }
}

fn expire_heartbeat(group: &mut ClassicGroup, ctx: &Ctx, member_id: &str) {
    let Some(member) = group.member_mut(member_id) else {
        return;
    };
    if member.has_satisfied_heartbeat() {
        // Parked in a join or sync: the timer is re-armed when that request is answered.
        member.heartbeat_deadline_ms = i64::MAX;
        return;
    }
    tracing::info!(group_id = %group.group_id, member_id, "member session expired; removing it from the group");
    remove_member_and_update_group(group, ctx, member_id, "member session expired");
}

/// Kafka's `tryCompleteInitialRebalanceElseSchedule`: while new members keep arriving, wait
/// another delay, but never longer in total than the rebalance timeout. The next step counts
/// from when this one was due, not from when `tick` noticed, so coarse ticks do not stretch it;
/// if it is already due, the loop in `fire_due_timers` completes the join at once.
fn fire_initial_delay(
    group: &mut ClassicGroup,
    ctx: &Ctx,
    fired_at_ms: i64,
    delay_ms: i64,
    remaining_ms: i64,
) {
    if group.new_member_added && remaining_ms != 0 {
        group.new_member_added = false;
        let new_delay_ms = ctx
            .config
            .group_initial_rebalance_delay_ms
            .min(remaining_ms);
        let new_remaining_ms = (remaining_ms - delay_ms).max(0);
        let timer = JoinTimer::Initial {
            delay_ms: new_delay_ms,
            remaining_ms: new_remaining_ms,
        };
        group.set_join_timer(fired_at_ms.saturating_add(new_delay_ms.max(1)), timer);
    } else {
        complete_join(group, ctx);
    }
}

/// Kafka's `expirePendingSync`: members that never sent SyncGroup within the rebalance timeout
/// after their join was answered are removed, and the rest rebalance.
fn expire_pending_sync(group: &mut ClassicGroup, ctx: &Ctx) {
    let in_sync_phase = matches!(
        group.state,
        GroupState::CompletingRebalance | GroupState::Stable
    );
    if !in_sync_phase || group.pending_sync_members.is_empty() {
        return;
    }
    let late: Vec<String> = group.pending_sync_members.drain().collect();
    for member_id in &late {
        group.remove(member_id);
    }
    tracing::info!(group_id = %group.group_id, ?late, "removed members that did not send SyncGroup in time");
    prepare_rebalance(group, ctx, "pending sync expired");
}

/// Kafka's `onLoaded`: every restored member's session starts now, so members that are still
/// there keep their assignment by heartbeating, and the others expire one session later. A
/// group over `group.max.size` (the setting may have shrunk) rebalances at once.
pub(crate) fn on_loaded(group: &mut ClassicGroup, ctx: &Ctx) {
    if group.members.is_empty() {
        return;
    }
    tracing::info!(
        group_id = %group.group_id,
        generation_id = group.generation_id,
        members = group.members.len(),
        "loaded group"
    );
    let deadlines: Vec<(String, i64)> = group
        .members
        .iter()
        .map(|m| {
            let deadline_ms = ctx.session_deadline(m.session_timeout_ms);
            (m.member_id.clone(), deadline_ms)
        })
        .collect();
    for (member_id, deadline_ms) in deadlines {
        group.reschedule_heartbeat(&member_id, deadline_ms);
    }
    if group.members.len() > ctx.config.group_max_size {
        prepare_rebalance(group, ctx, "freshly loaded group is over group.max.size");
    }
}
