//! LeaveGroup (API 13, v0-5): members leave on purpose, one by member id (v0-2) or a batch by
//! member id and/or group instance id (v3+, which is also how an admin removes static members).
//! Leaving triggers a rebalance; the last member out leaves the group Empty. Kafka's
//! `classicGroupLeave`.

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::rebalance;
use super::state::{ClassicGroup, GroupState, JoinOutcome};
use super::GroupCoordinator;

/// One member named in a LeaveGroup request, and what happened to it.
struct Leaver {
    member_id: String,
    group_instance_id: Option<String>,
    error: Option<ResponseError>,
}

impl GroupCoordinator {
    pub fn leave_group(&self, request: LeaveGroupRequest, version: i16) -> LeaveGroupResponse {
        let leavers: Vec<Leaver> = if version >= 3 {
            request
                .members
                .iter()
                .map(|m| Leaver {
                    member_id: m.member_id.to_string(),
                    group_instance_id: m.group_instance_id.as_ref().map(|id| id.to_string()),
                    error: None,
                })
                .collect()
        } else {
            vec![Leaver {
                member_id: request.member_id.to_string(),
                group_instance_id: None,
                error: None,
            }]
        };
        let response = LeaveGroupResponse::default();
        match self.leave_locked(request.group_id.as_str(), leavers) {
            Err(error) => response.with_error_code(error.code()),
            // Before v3 the one member's error is the response's error.
            Ok(leavers) if version < 3 => {
                let error = leavers.first().and_then(|l| l.error);
                response.with_error_code(error.map_or(0, |e| e.code()))
            }
            Ok(leavers) => {
                response.with_members(leavers.into_iter().map(member_response).collect())
            }
        }
    }

    fn leave_locked(
        &self,
        group_id: &str,
        mut leavers: Vec<Leaver>,
    ) -> Result<Vec<Leaver>, ResponseError> {
        let now_ms = self.clock.now_ms();
        let mut inner = self.lock_at(now_ms);
        if inner.shut_down {
            return Err(ResponseError::NotCoordinator);
        }
        if group_id.is_empty() {
            return Err(ResponseError::InvalidGroupId);
        }
        if inner.consumer_groups.contains_key(group_id) {
            let ctx = self.ctx(now_ms);
            let named: Vec<(String, Option<String>)> = leavers
                .iter()
                .map(|l| (l.member_id.clone(), l.group_instance_id.clone()))
                .collect();
            let errors =
                super::consumer::classic::leave(&mut inner, &ctx, self.topics(), group_id, &named);
            inner.reschedule_if_earlier(&self.timers_changed);
            for (leaver, error) in leavers.iter_mut().zip(errors?) {
                leaver.error = error;
            }
            return Ok(leavers);
        }
        let Some(group) = inner.groups.get_mut(group_id) else {
            // Like Kafka: an unknown group knows none of the members.
            for leaver in &mut leavers {
                leaver.error = Some(ResponseError::UnknownMemberId);
            }
            return Ok(leavers);
        };
        for leaver in &mut leavers {
            leaver.error = remove_leaver(group, leaver).err();
        }
        let ctx = self.ctx(now_ms);
        if leavers.iter().any(|l| l.error.is_none()) {
            match group.state {
                GroupState::Stable | GroupState::CompletingRebalance => {
                    rebalance::maybe_prepare_rebalance_or_complete_join(
                        group,
                        &ctx,
                        "members left the group",
                    );
                }
                GroupState::PreparingRebalance => rebalance::maybe_complete_join_phase(group, &ctx),
                GroupState::Empty => {}
            }
        }
        inner.note_wakeup(group_id, &self.timers_changed);
        Ok(leavers)
    }
}

/// Removes one leaver, checking its identity the way Kafka does: an empty member id with an
/// instance id is an administrative removal of that static member.
fn remove_leaver(group: &mut ClassicGroup, leaver: &Leaver) -> Result<(), ResponseError> {
    let instance_id = leaver.group_instance_id.as_deref();
    if leaver.member_id.is_empty() {
        let member_id = instance_id
            .and_then(|id| group.static_member_id(id))
            .ok_or(ResponseError::UnknownMemberId)?;
        remove_current_member(group, &member_id);
        return Ok(());
    }
    if group.pending_members.remove(&leaver.member_id).is_some() {
        tracing::info!(group_id = %group.group_id, member_id = %leaver.member_id, "pending member left");
        return Ok(());
    }
    group.validate_member(&leaver.member_id, instance_id)?;
    remove_current_member(group, &leaver.member_id);
    Ok(())
}

/// A member parked in JoinGroup is told UNKNOWN_MEMBER_ID, so a client still waiting rejoins.
fn remove_current_member(group: &mut ClassicGroup, member_id: &str) {
    if let Some(member) = group.member_mut(member_id) {
        member.complete_join(JoinOutcome::error(ResponseError::UnknownMemberId, ""));
    }
    group.remove(member_id);
    tracing::info!(group_id = %group.group_id, member_id, "member left the group");
}

fn member_response(leaver: Leaver) -> MemberResponse {
    MemberResponse::default()
        .with_member_id(StrBytes::from_string(leaver.member_id))
        .with_group_instance_id(leaver.group_instance_id.map(StrBytes::from_string))
        .with_error_code(leaver.error.map_or(0, |e| e.code()))
}
