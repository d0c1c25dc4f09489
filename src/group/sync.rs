//! SyncGroup (API 14, v0-5) and Heartbeat (API 12, v0-4). In SyncGroup the leader hands in the
//! assignment of every member; followers park until it arrives, and the group becomes Stable.
//! A heartbeat keeps a member's session alive and tells it, with REBALANCE_IN_PROGRESS, when to
//! rejoin. Kafka's `classicGroupSync` and `classicGroupHeartbeat`.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::messages::{
    HeartbeatRequest, HeartbeatResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;

use super::context::Ctx;
use super::persist;
use super::rebalance;
use super::state::{ClassicGroup, GroupState, Member, SyncOutcome};
use super::{consumer, GroupCoordinator};

enum Synced {
    Now(SyncOutcome),
    Parked(oneshot::Receiver<SyncOutcome>),
}

impl GroupCoordinator {
    /// Followers wait here until the leader's SyncGroup arrives or a new rebalance starts.
    pub async fn sync_group(&self, request: SyncGroupRequest, version: i16) -> SyncGroupResponse {
        let outcome = match self.sync_now_or_park(request) {
            Synced::Now(outcome) => outcome,
            // The waiter was dropped: the member left or was removed, or sent a newer SyncGroup.
            // Rejoining is the right move in each case.
            Synced::Parked(receiver) => receiver
                .await
                .unwrap_or_else(|_| SyncOutcome::error(ResponseError::RebalanceInProgress)),
        };
        sync_response(outcome, version)
    }

    fn sync_now_or_park(&self, request: SyncGroupRequest) -> Synced {
        let now_ms = self.clock.now_ms();
        let mut inner = self.lock_at(now_ms);
        if inner.shut_down {
            return Synced::Now(SyncOutcome::error(ResponseError::NotCoordinator));
        }
        if request.group_id.is_empty() {
            return Synced::Now(SyncOutcome::error(ResponseError::InvalidGroupId));
        }
        let group_id = request.group_id.to_string();
        let ctx = self.ctx(now_ms);
        let topics = self.topics();
        let synced = match inner.groups.get_mut(&group_id) {
            Some(group) => sync_locked(group, &ctx, &request),
            None => match inner.consumer_groups.get_mut(&group_id) {
                Some(group) if !group.core.members.is_empty() => {
                    let outcome = consumer::classic::sync(group, &ctx, topics, &request);
                    inner.note_consumer_wakeup(&group_id);
                    Synced::Now(outcome)
                }
                _ => Synced::Now(SyncOutcome::error(ResponseError::UnknownMemberId)),
            },
        };
        inner.note_wakeup(&group_id, &self.timers_changed);
        synced
    }

    /// Resets the member's session timer; the error tells the client what to do next.
    pub fn heartbeat(&self, request: HeartbeatRequest, _version: i16) -> HeartbeatResponse {
        let error_code = match self.heartbeat_locked(&request) {
            Ok(()) => 0,
            Err(error) => error.code(),
        };
        HeartbeatResponse::default().with_error_code(error_code)
    }

    fn heartbeat_locked(&self, request: &HeartbeatRequest) -> Result<(), ResponseError> {
        let now_ms = self.clock.now_ms();
        let mut inner = self.lock_at(now_ms);
        if inner.shut_down {
            return Err(ResponseError::NotCoordinator);
        }
        if request.group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        let group_id = request.group_id.to_string();
        if let Some(group) = inner.consumer_groups.get_mut(&group_id) {
            let answer = consumer::classic::heartbeat(group, &self.ctx(now_ms), request);
            inner.note_consumer_wakeup(&group_id);
            inner.reschedule_if_earlier(&self.timers_changed);
            return answer;
        }
        let Some(group) = inner.groups.get_mut(&group_id) else {
            return Err(ResponseError::UnknownMemberId);
        };
        let member_id = request.member_id.as_str();
        group.validate_member(member_id, request.group_instance_id.as_deref())?;
        if request.generation_id != group.generation_id {
            return Err(ResponseError::IllegalGeneration);
        }
        let ctx = self.ctx(now_ms);
        let session_timeout_ms = group.member(member_id).map_or(0, |m| m.session_timeout_ms);
        match group.state {
            GroupState::Empty => Err(ResponseError::UnknownMemberId),
            GroupState::PreparingRebalance => {
                group.reschedule_heartbeat(member_id, ctx.session_deadline(session_timeout_ms));
                Err(ResponseError::RebalanceInProgress)
            }
            // Consumers may heartbeat between their join answer and their sync; that is normal.
            GroupState::CompletingRebalance | GroupState::Stable => {
                group.reschedule_heartbeat(member_id, ctx.session_deadline(session_timeout_ms));
                Ok(())
            }
        }
    }
}

fn sync_locked(group: &mut ClassicGroup, ctx: &Ctx, request: &SyncGroupRequest) -> Synced {
    if let Err(error) = validate_sync(group, request) {
        return Synced::Now(SyncOutcome::error(error));
    }
    let member_id = request.member_id.as_str();
    match group.state {
        GroupState::PreparingRebalance => {
            Synced::Now(SyncOutcome::error(ResponseError::RebalanceInProgress))
        }
        GroupState::CompletingRebalance => {
            let (sender, receiver) = oneshot::channel();
            if let Some(member) = group.member_mut(member_id) {
                member.sync_waiter = Some(sender);
            }
            remove_pending_sync_member(group, member_id);
            if group.is_leader(member_id) {
                let assignments: HashMap<&str, &Bytes> = request
                    .assignments
                    .iter()
                    .map(|a| (a.member_id.as_str(), &a.assignment))
                    .collect();
                set_and_propagate_assignment(group, ctx, &assignments);
            }
            Synced::Parked(receiver)
        }
        GroupState::Stable => {
            remove_pending_sync_member(group, member_id);
            let assignment = group
                .member(member_id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default();
            Synced::Now(SyncOutcome {
                error_code: 0,
                protocol_type: group.protocol_type.clone(),
                protocol_name: group.protocol_name.clone(),
                assignment,
            })
        }
        // Filtered out by `validate_sync`.
        GroupState::Empty => Synced::Now(SyncOutcome::error(ResponseError::UnknownMemberId)),
    }
}

/// Kafka's `validateSyncGroup`, plus its rule that an Empty group knows no member.
fn validate_sync(group: &ClassicGroup, request: &SyncGroupRequest) -> Result<(), ResponseError> {
    if group.state == GroupState::Empty {
        return Err(ResponseError::UnknownMemberId);
    }
    group.validate_member(&request.member_id, request.group_instance_id.as_deref())?;
    if request.generation_id != group.generation_id {
        return Err(ResponseError::IllegalGeneration);
    }
    // v5 echoes the protocol from the join answer; a mismatch means a confused client.
    let inconsistent =
        |requested: &Option<StrBytes>, current: &Option<String>| match (requested, current) {
            (Some(requested), Some(current)) => requested.as_str() != current,
            _ => false,
        };
    if inconsistent(&request.protocol_type, &group.protocol_type)
        || inconsistent(&request.protocol_name, &group.protocol_name)
    {
        return Err(ResponseError::InconsistentGroupProtocol);
    }
    Ok(())
}

/// The member has synced; once everyone has, the sync deadline is off.
fn remove_pending_sync_member(group: &mut ClassicGroup, member_id: &str) {
    group.pending_sync_members.remove(member_id);
    if group.pending_sync_members.is_empty() {
        group.sync_deadline_ms = None;
    }
}

/// Kafka's SyncGroup from the leader: the group is stored with the leader's assignment (an
/// empty one for members it left out) before anyone sees it; then every parked SyncGroup is
/// answered and the group is Stable. If the store fails, every parked SyncGroup gets the error
/// and the group rebalances, as in Kafka, so no member acts on an assignment a restart would
/// forget.
fn set_and_propagate_assignment(
    group: &mut ClassicGroup,
    ctx: &Ctx,
    assignments: &HashMap<&str, &Bytes>,
) {
    let missing: Vec<&str> = group
        .members
        .iter()
        .map(|m| m.member_id.as_str())
        .filter(|id| !assignments.contains_key(id))
        .collect();
    if !missing.is_empty() {
        tracing::warn!(group_id = %group.group_id, ?missing, "leader sent no assignment for some members");
    }
    let assignment_of = |m: &Member| {
        assignments
            .get(m.member_id.as_str())
            .map(|a| (*a).clone())
            .unwrap_or_default()
    };
    let stored = persist::group_metadata_record(group, &assignment_of)
        .and_then(|record| persist::append(ctx.store, &group.group_id, vec![record]));
    if let Err(error) = stored {
        rebalance::reset_and_propagate_assignment_with_error(group, ctx, error);
        rebalance::maybe_prepare_rebalance_or_complete_join(
            group,
            ctx,
            "the group's assignment could not be stored",
        );
        return;
    }
    for member in &mut group.members {
        member.assignment = assignment_of(member);
    }
    rebalance::propagate_assignment(group, ctx, None);
    group.transition_to(GroupState::Stable, ctx.now_ms);
    tracing::info!(group_id = %group.group_id, generation_id = group.generation_id, "assignment received from leader; group is stable");
}

fn sync_response(outcome: SyncOutcome, version: i16) -> SyncGroupResponse {
    let v5 = |value: Option<String>| value.filter(|_| version >= 5).map(StrBytes::from_string);
    SyncGroupResponse::default()
        .with_error_code(outcome.error_code)
        .with_protocol_type(v5(outcome.protocol_type))
        .with_protocol_name(v5(outcome.protocol_name))
        .with_assignment(outcome.assignment)
}
