//! JoinGroup (API 11, v0-9): admits members, hands out member ids (MEMBER_ID_REQUIRED, v4+),
//! replaces static members (v5+) and triggers rebalances. A join that must wait for the rest of
//! the group parks until the join phase completes. Kafka's `classicGroupJoin*` family.

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use tokio::sync::oneshot;

use super::context::Ctx;
use super::persist;
use super::rebalance;
use super::state::{ClassicGroup, GroupState, JoinOutcome, Member, Protocol};
use super::{GroupCoordinator, NEW_MEMBER_JOIN_TIMEOUT_MS};

/// The parts of a JoinGroup request the coordinator keeps, owned.
struct JoinRequest {
    member_id: String,
    group_instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    protocol_type: String,
    protocols: Vec<Protocol>,
    version: i16,
}

/// Answered at once, or parked until the join phase completes.
enum Joined {
    Now(JoinOutcome),
    Parked(oneshot::Receiver<JoinOutcome>),
}

impl GroupCoordinator {
    /// Long-polls: returns when this member's join phase completes, it is answered with an error,
    /// or the broker shuts down.
    pub async fn join_group(
        &self,
        request: JoinGroupRequest,
        version: i16,
        client_id: &str,
        client_host: &str,
    ) -> JoinGroupResponse {
        let outcome = match self.join_now_or_park(request, version, client_id, client_host) {
            Joined::Now(outcome) => outcome,
            // The waiter was dropped without an answer: the member was replaced by a newer join
            // of the same member. UNKNOWN_MEMBER_ID makes a client that is still there rejoin.
            Joined::Parked(receiver) => receiver
                .await
                .unwrap_or_else(|_| JoinOutcome::error(ResponseError::UnknownMemberId, "")),
        };
        join_response(outcome, version)
    }

    fn join_now_or_park(
        &self,
        request: JoinGroupRequest,
        version: i16,
        client_id: &str,
        client_host: &str,
    ) -> Joined {
        let now_ms = self.clock.now_ms();
        let group_id = request.group_id.to_string();
        let join = JoinRequest::new(&request, version, client_id, client_host);
        let mut inner = self.lock_at(now_ms);
        if inner.shut_down {
            return Joined::error(ResponseError::NotCoordinator, &join.member_id);
        }
        if group_id.is_empty() {
            return Joined::error(ResponseError::InvalidGroupId, &join.member_id);
        }
        let session_range =
            self.config.group_min_session_timeout_ms..=self.config.group_max_session_timeout_ms;
        if !session_range.contains(&join.session_timeout_ms) {
            return Joined::error(ResponseError::InvalidSessionTimeout, &join.member_id);
        }
        if let Err(error) = self.make_room_for_classic(&mut inner, &group_id, now_ms) {
            return Joined::error(error, &join.member_id);
        }
        if !inner.groups.contains_key(&group_id) {
            // Only a member without an id may create a group; one with an id is from a group
            // this coordinator no longer knows.
            if !join.member_id.is_empty() {
                return Joined::error(ResponseError::UnknownMemberId, &join.member_id);
            }
            let group = ClassicGroup::new(&group_id, Some(now_ms));
            inner.groups.insert(group_id.clone(), group);
        }
        let ctx = self.ctx(now_ms);
        let joined = match inner.groups.get_mut(&group_id) {
            Some(group) => join_group_locked(group, &ctx, join),
            None => Joined::error(ResponseError::UnknownServerError, ""),
        };
        inner.note_wakeup(&group_id, &self.timers_changed);
        joined
    }
}

impl GroupCoordinator {
    /// A classic join to the id of a KIP-848 consumer group: an Empty one gives way (its
    /// records are tombstoned, its offsets go to the classic group), as Kafka's
    /// `maybeDeleteEmptyConsumerGroup`; one with members cannot take a classic member here
    /// (Kafka migrates it online, which sluice does not do yet): INCONSISTENT_GROUP_PROTOCOL.
    fn make_room_for_classic(
        &self,
        inner: &mut super::Inner,
        group_id: &str,
        now_ms: i64,
    ) -> Result<(), ResponseError> {
        let Some(consumer) = inner.consumer_groups.get(group_id) else {
            return Ok(());
        };
        if !consumer.core.members.is_empty() {
            return Err(ResponseError::InconsistentGroupProtocol);
        }
        let tombstones = super::consumer::changes::group_tombstones(group_id, &consumer.core)
            .map_err(|_| ResponseError::UnknownServerError)?;
        self.append(group_id, tombstones)?;
        if let Some(consumer) = inner.consumer_groups.remove(group_id) {
            let mut group = ClassicGroup::new(group_id, Some(now_ms));
            group.offsets = consumer.offsets;
            inner.groups.insert(group_id.to_string(), group);
        }
        Ok(())
    }
}

impl JoinRequest {
    fn new(
        request: &JoinGroupRequest,
        version: i16,
        client_id: &str,
        client_host: &str,
    ) -> JoinRequest {
        JoinRequest {
            member_id: request.member_id.to_string(),
            group_instance_id: request.group_instance_id.as_ref().map(|id| id.to_string()),
            client_id: client_id.to_string(),
            client_host: client_host.to_string(),
            session_timeout_ms: request.session_timeout_ms,
            // v0 has no rebalance timeout; Kafka uses the session timeout.
            rebalance_timeout_ms: if version == 0 {
                request.session_timeout_ms
            } else {
                request.rebalance_timeout_ms
            },
            protocol_type: request.protocol_type.to_string(),
            protocols: request
                .protocols
                .iter()
                .map(|p| Protocol {
                    name: p.name.to_string(),
                    metadata: p.metadata.clone(),
                })
                .collect(),
            version,
        }
    }
}

impl Joined {
    fn error(error: ResponseError, member_id: &str) -> Joined {
        Joined::Now(JoinOutcome::error(error, member_id))
    }
}

fn join_group_locked(group: &mut ClassicGroup, ctx: &Ctx, join: JoinRequest) -> Joined {
    if !accept_joining_member(group, &join.member_id, ctx.config.group_max_size) {
        group.remove(&join.member_id);
        return Joined::error(ResponseError::GroupMaxSizeReached, "");
    }
    if join.member_id.is_empty() {
        join_new_member(group, ctx, join)
    } else {
        join_existing_member(group, ctx, join)
    }
}

/// Kafka's `acceptJoiningMember`. During a rebalance the members already parked are counted, so
/// that, if the group is over the limit, the last members to rejoin are the ones turned away.
fn accept_joining_member(group: &ClassicGroup, member_id: &str, group_max_size: usize) -> bool {
    match group.state {
        GroupState::Empty => true,
        GroupState::PreparingRebalance => {
            group
                .member(member_id)
                .is_some_and(|m| m.join_waiter.is_some())
                || group.awaiting_join_count() < group_max_size
        }
        GroupState::CompletingRebalance | GroupState::Stable => {
            group.member(member_id).is_some() || group.members.len() < group_max_size
        }
    }
}

fn join_new_member(group: &mut ClassicGroup, ctx: &Ctx, join: JoinRequest) -> Joined {
    if !group.supports_protocols(&join.protocol_type, &join.protocols) {
        return Joined::error(ResponseError::InconsistentGroupProtocol, "");
    }
    let prefix = join.group_instance_id.as_deref().unwrap_or(&join.client_id);
    let new_member_id = format!("{prefix}-{}", uuid::Uuid::new_v4());
    match join.group_instance_id.as_deref() {
        Some(instance_id) => match group.static_member_id(instance_id) {
            Some(old_member_id) => {
                update_static_member(group, ctx, join, &old_member_id, new_member_id)
            }
            None => add_member(group, ctx, join, new_member_id),
        },
        // From v4 a dynamic member must come back with the id it is given, which proves that it
        // received it; until then it only holds a place in the pending set.
        None if join.version >= 4 => {
            let deadline_ms = ctx.session_deadline(join.session_timeout_ms);
            group.add_pending_member(new_member_id.clone(), deadline_ms);
            tracing::debug!(group_id = %group.group_id, member_id = %new_member_id, "member id required");
            Joined::error(ResponseError::MemberIdRequired, &new_member_id)
        }
        None => add_member(group, ctx, join, new_member_id),
    }
}

fn join_existing_member(group: &mut ClassicGroup, ctx: &Ctx, join: JoinRequest) -> Joined {
    let member_id = join.member_id.clone();
    if !group.supports_protocols(&join.protocol_type, &join.protocols) {
        return Joined::error(ResponseError::InconsistentGroupProtocol, &member_id);
    }
    if group.pending_members.contains_key(&member_id) {
        // Pending ids are only handed to dynamic members; Kafka fails this as an internal error.
        if join.group_instance_id.is_some() {
            return Joined::error(ResponseError::UnknownServerError, &member_id);
        }
        return add_member(group, ctx, join, member_id);
    }
    if let Err(error) = group.validate_member(&member_id, join.group_instance_id.as_deref()) {
        return Joined::error(error, &member_id);
    }
    let unchanged = group
        .member(&member_id)
        .is_some_and(|m| m.protocols == join.protocols);
    match group.state {
        GroupState::PreparingRebalance => update_member(group, ctx, join, "member rejoined"),
        // Same metadata: the member probably lost the join answer, so it gets it again.
        GroupState::CompletingRebalance if unchanged => {
            let with_members = group.is_leader(&member_id);
            Joined::Now(current_generation(group, &member_id, with_members))
        }
        GroupState::CompletingRebalance => {
            update_member(group, ctx, join, "member metadata changed")
        }
        // A rejoining leader always rebalances: that is how a consumer reacts to topic changes
        // that do not change its own metadata.
        GroupState::Stable if group.is_leader(&member_id) => {
            update_member(group, ctx, join, "leader rejoined")
        }
        GroupState::Stable if !unchanged => {
            update_member(group, ctx, join, "member metadata changed")
        }
        GroupState::Stable => Joined::Now(current_generation(group, &member_id, false)),
        GroupState::Empty => Joined::error(ResponseError::UnknownMemberId, &member_id),
    }
}

/// The answer for a member of the current generation, without a rebalance.
fn current_generation(group: &ClassicGroup, member_id: &str, with_members: bool) -> JoinOutcome {
    JoinOutcome {
        error_code: 0,
        generation_id: group.generation_id,
        protocol_type: group.protocol_type.clone(),
        protocol_name: group.protocol_name.clone(),
        leader: group.leader_id.clone().unwrap_or_default(),
        member_id: member_id.to_string(),
        skip_assignment: false,
        members: if with_members {
            rebalance::current_members(group)
        } else {
            Vec::new()
        },
    }
}

fn add_member(group: &mut ClassicGroup, ctx: &Ctx, join: JoinRequest, member_id: String) -> Joined {
    let (sender, receiver) = oneshot::channel();
    let member = Member {
        member_id: member_id.clone(),
        group_instance_id: join.group_instance_id,
        client_id: join.client_id,
        client_host: join.client_host,
        rebalance_timeout_ms: join.rebalance_timeout_ms,
        session_timeout_ms: join.session_timeout_ms,
        protocol_type: join.protocol_type,
        protocols: join.protocols,
        assignment: bytes::Bytes::new(),
        join_waiter: Some(sender),
        sync_waiter: None,
        is_new: true,
        // A new member cannot heartbeat while parked, and a client that gave up would leave a
        // defunct member behind; so its first join is bounded instead.
        heartbeat_deadline_ms: ctx.after(NEW_MEMBER_JOIN_TIMEOUT_MS),
    };
    if group.state == GroupState::PreparingRebalance && group.previous_state == GroupState::Empty {
        group.new_member_added = true;
    }
    tracing::info!(group_id = %group.group_id, %member_id, "adding new member");
    group.add(member);
    rebalance::maybe_prepare_rebalance_or_complete_join(group, ctx, "new member joined");
    Joined::Parked(receiver)
}

fn update_member(group: &mut ClassicGroup, ctx: &Ctx, join: JoinRequest, reason: &str) -> Joined {
    let joined = update_member_quietly(group, join);
    if matches!(joined, Joined::Parked(_)) {
        rebalance::maybe_prepare_rebalance_or_complete_join(group, ctx, reason);
    }
    joined
}

/// Kafka's `updateStaticMemberThenRebalanceOrCompleteJoin`: a static member restarting with an
/// unknown member id takes over its instance's place under a new id; the old id is fenced. In a
/// Stable group whose chosen protocol stays the same there is no rebalance: the member keeps its
/// assignment.
fn update_static_member(
    group: &mut ClassicGroup,
    ctx: &Ctx,
    join: JoinRequest,
    old_member_id: &str,
    new_member_id: String,
) -> Joined {
    let current_leader = group.leader_id.clone().unwrap_or_default();
    let previous = group.member(old_member_id).map(|m| {
        (
            m.protocols.clone(),
            m.rebalance_timeout_ms,
            m.session_timeout_ms,
        )
    });
    group.replace_static_member(old_member_id, &new_member_id);
    let version = join.version;
    let session_deadline_ms = ctx.session_deadline(join.session_timeout_ms);
    let renamed = JoinRequest {
        member_id: new_member_id.clone(),
        ..join
    };
    let Joined::Parked(receiver) = update_member_quietly(group, renamed) else {
        return Joined::error(ResponseError::UnknownServerError, "");
    };
    group.reschedule_heartbeat(&new_member_id, session_deadline_ms);
    tracing::info!(group_id = %group.group_id, old_member_id, %new_member_id, "static member replaced");

    match group.state {
        GroupState::Stable if group.protocol_name == group.select_protocol() => {
            // The new member id must survive a restart, or the member would be fenced by it.
            if let Err(error) = persist::store_group(group, ctx) {
                let outcome = JoinOutcome {
                    leader: current_leader,
                    ..JoinOutcome::error(error, "")
                };
                if let Some(member) = group.member_mut(&new_member_id) {
                    member.complete_join(outcome);
                }
                revert_static_member(group, ctx, &new_member_id, old_member_id, previous);
                return Joined::Parked(receiver);
            }
            let is_leader = group.is_leader(&new_member_id);
            // Below v9 the old leader id is returned, so that a restarted leader does not think
            // it leads and compute an assignment that a Stable group would never hand out.
            let outcome = if version >= 9 {
                JoinOutcome {
                    skip_assignment: is_leader,
                    ..current_generation(group, &new_member_id, is_leader)
                }
            } else {
                JoinOutcome {
                    leader: current_leader,
                    ..current_generation(group, &new_member_id, false)
                }
            };
            if let Some(member) = group.member_mut(&new_member_id) {
                member.complete_join(outcome);
            }
        }
        GroupState::Stable => {
            rebalance::maybe_prepare_rebalance_or_complete_join(
                group,
                ctx,
                "static member changed protocol",
            );
        }
        // The leader may already be assigning to the old id, which the new one would not get.
        GroupState::CompletingRebalance => {
            rebalance::prepare_rebalance(group, ctx, "static member rejoined")
        }
        GroupState::PreparingRebalance | GroupState::Empty => {
            rebalance::maybe_complete_join_phase(group, ctx)
        }
    }
    Joined::Parked(receiver)
}

/// Undoes `update_static_member` after its record could not be stored: the instance goes back
/// to its old member id, protocols and timeouts (Kafka does the same).
fn revert_static_member(
    group: &mut ClassicGroup,
    ctx: &Ctx,
    new_member_id: &str,
    old_member_id: &str,
    previous: Option<(Vec<Protocol>, i32, i32)>,
) {
    group.replace_static_member(new_member_id, old_member_id);
    let Some(member) = group.member_mut(old_member_id) else {
        return;
    };
    if let Some((protocols, rebalance_timeout_ms, session_timeout_ms)) = previous {
        member.protocols = protocols;
        member.rebalance_timeout_ms = rebalance_timeout_ms;
        member.session_timeout_ms = session_timeout_ms;
    }
    let deadline_ms = ctx.session_deadline(member.session_timeout_ms);
    group.reschedule_heartbeat(old_member_id, deadline_ms);
    tracing::warn!(group_id = %group.group_id, old_member_id, new_member_id, "could not store the replaced static member; reverted");
}

/// Updates a member's protocols, timeouts and parked join without starting a rebalance.
fn update_member_quietly(group: &mut ClassicGroup, join: JoinRequest) -> Joined {
    let (sender, receiver) = oneshot::channel();
    let Some(member) = group.member_mut(&join.member_id) else {
        return Joined::error(ResponseError::UnknownMemberId, &join.member_id);
    };
    member.protocols = join.protocols;
    member.rebalance_timeout_ms = join.rebalance_timeout_ms;
    member.session_timeout_ms = join.session_timeout_ms;
    // A previous parked join of the same member is dropped, as Kafka overwrites its future.
    member.join_waiter = Some(sender);
    Joined::Parked(receiver)
}

/// Shapes an outcome for the request's version: fields a version lacks are left at their
/// defaults, since the encoder refuses non-default values it cannot write.
fn join_response(outcome: JoinOutcome, version: i16) -> JoinGroupResponse {
    let protocol_name = match outcome.protocol_name {
        Some(name) => Some(StrBytes::from_string(name)),
        // Before v7 the field is not nullable; Kafka sends an empty string.
        None if version < 7 => Some(StrBytes::default()),
        None => None,
    };
    let members = outcome
        .members
        .into_iter()
        .map(|(member_id, group_instance_id, metadata)| {
            JoinGroupResponseMember::default()
                .with_member_id(StrBytes::from_string(member_id))
                .with_group_instance_id(
                    group_instance_id
                        .filter(|_| version >= 5)
                        .map(StrBytes::from_string),
                )
                .with_metadata(metadata)
        })
        .collect();
    JoinGroupResponse::default()
        .with_error_code(outcome.error_code)
        .with_generation_id(outcome.generation_id)
        .with_protocol_type(
            outcome
                .protocol_type
                .filter(|_| version >= 7)
                .map(StrBytes::from_string),
        )
        .with_protocol_name(protocol_name)
        .with_leader(StrBytes::from_string(outcome.leader))
        .with_skip_assignment(version >= 9 && outcome.skip_assignment)
        .with_member_id(StrBytes::from_string(outcome.member_id))
        .with_members(members)
}
