//! Members of the classic protocol inside a consumer group (Kafka's
//! `classicGroupJoinToConsumerGroup`, `classicGroupSyncToConsumerGroup`,
//! `classicGroupHeartbeatToConsumerGroup` and `classicGroupLeaveToConsumerGroup`). Such a member
//! keeps sending JoinGroup, SyncGroup, Heartbeat and LeaveGroup, and the broker maps them onto
//! the consumer protocol:
//!
//! - **JoinGroup** is the member's full heartbeat: its subscription (from its first protocol's
//!   embedded metadata) updates its member metadata, the group epoch moves if that changed, the
//!   target is recomputed, and the member takes one reconciliation step with the partitions it
//!   says it owns. The answer comes at once: the member epoch as the generation, no leader, no
//!   member list (the broker assigns). It must then sync within its rebalance timeout.
//! - **SyncGroup** hands it its current assignment, encoded in the consumer protocol at its
//!   subscription's version; if its epoch is behind the assignment epoch and it owes no
//!   revocation, it is told REBALANCE_IN_PROGRESS instead.
//! - **Heartbeat** keeps its session (its own session timeout) and tells it
//!   REBALANCE_IN_PROGRESS when it must rejoin to move on: its epoch is behind, it must revoke,
//!   or partitions it waits for were released. It must then rejoin within its rebalance timeout.
//! - **LeaveGroup** fences the members named (consumer-protocol members too, as an admin's
//!   removal does).
//!
//! The generation a classic member sends is its member epoch: another one is ILLEGAL_GENERATION.
//! A JoinGroup that leaves a consumer-protocol static member replaced by this classic one, with
//! only classic members left, turns the group back into a classic group (`migrate.rs`).

use kafka_protocol::messages::{HeartbeatRequest, SyncGroupRequest};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::heartbeat::{check_group_size, static_member};
use super::member::{ClassicMemberMetadata, ClassicProtocol, ConsumerMember, MemberState};
use super::migrate::{self, Downgrade};
use super::request::{GroupError, Heartbeat, Step};
use super::{changes, commit, embedded, fence, regex, ConsumerGroup, Core};
use crate::group::context::Ctx;
use crate::group::state::{
    ClassicGroup, JoinOutcome, JoinRequest, SyncOutcome, CONSUMER_PROTOCOL_TYPE,
};
use crate::group::topics::TopicImage;
use crate::group::{Inner, MigrationPolicy};

fn error(error: ResponseError) -> GroupError {
    GroupError::bare(error)
}

/// A classic member's JoinGroup to the non-empty consumer group `group_id`.
pub(crate) fn join(
    inner: &mut Inner,
    ctx: &Ctx,
    topics: &dyn TopicImage,
    group_id: &str,
    request: &JoinRequest,
) -> JoinOutcome {
    let Some(group) = inner.consumer_groups.get_mut(group_id) else {
        return JoinOutcome::error(ResponseError::UnknownServerError, &request.member_id);
    };
    match join_group(group, ctx, topics, request) {
        Ok((outcome, None)) => {
            inner.note_consumer_wakeup(group_id);
            outcome
        }
        Ok((outcome, Some(classic))) => {
            inner.install_classic(classic);
            outcome
        }
        Err(e) => {
            if let Some(message) = &e.message {
                tracing::info!(group_id, member_id = %request.member_id, error = ?e.error, "classic member cannot join the consumer group: {message}");
            }
            JoinOutcome::error(e.error, &request.member_id)
        }
    }
}

fn join_group(
    group: &mut ConsumerGroup,
    ctx: &Ctx,
    topics: &dyn TopicImage,
    request: &JoinRequest,
) -> Result<(JoinOutcome, Option<ClassicGroup>), GroupError> {
    let group_id = group.group_id.clone();
    if ctx.config.migration_policy == MigrationPolicy::Disabled {
        return Err(GroupError::new(ResponseError::InconsistentGroupProtocol, format!("Cannot join the consumer group {group_id} with the classic protocol because the group migration is disabled.")));
    }
    let unknown = request.member_id.is_empty();
    let member_id = match unknown {
        true => Uuid::new_v4().to_string(),
        false => request.member_id.clone(),
    };
    let instance_id = request.group_instance_id.as_deref();
    check_group_size(group, ctx, &member_id, instance_id)?;
    if !supports_protocols(&group.core, request) {
        return Err(GroupError::new(
            ResponseError::InconsistentGroupProtocol,
            format!("Member {member_id}'s protocols are not supported."),
        ));
    }
    if request.version >= 4 && unknown && instance_id.is_none() {
        tracing::info!(%group_id, %member_id, "dynamic member with an unknown member id joins the consumer group; it must rejoin with the new id");
        let outcome = JoinOutcome::error(ResponseError::MemberIdRequired, &member_id);
        return Ok((outcome, None));
    }
    let mut core = group.core.clone();
    let h = as_heartbeat(&group_id, &member_id, request);
    let replaced = instance_id
        .and_then(|i| group.core.static_member_id(i))
        .map(str::to_string);
    let old = match instance_id {
        None => match core.members.get(&member_id) {
            Some(member) => member.clone(),
            None => {
                tracing::info!(%group_id, %member_id, "member joins the consumer group using the classic protocol");
                ConsumerMember::new(&member_id)
            }
        },
        Some(instance_id) => static_member(&mut core, &h, instance_id, unknown, true)?,
    };
    let downgrade = replaced
        .as_deref()
        .is_some_and(|r| migrate::may_downgrade_replacing(group, ctx, r));
    let first = request
        .protocols
        .first()
        .ok_or_else(|| error(ResponseError::InconsistentGroupProtocol))?;
    let subscription = embedded::subscription(&first.metadata, topics).map_err(|_| {
        GroupError::new(
            ResponseError::InconsistentGroupProtocol,
            "Malformed embedded consumer protocol in subscription deserialization.",
        )
    })?;
    let mut updated = old.clone();
    let m = &mut updated.metadata;
    m.instance_id = request.group_instance_id.clone().or(m.instance_id.take());
    if subscription.rack_id.is_some() {
        m.rack_id = subscription.rack_id.clone();
    }
    if request.rebalance_timeout_ms != -1 {
        m.rebalance_timeout_ms = request.rebalance_timeout_ms;
    }
    m.subscribed_topic_names = subscription.topics.clone();
    m.subscribed_topic_regex = String::new();
    m.client_id = request.client_id.clone();
    m.client_host = request.client_host.clone();
    m.classic = Some(ClassicMemberMetadata {
        session_timeout_ms: request.session_timeout_ms,
        protocols: request
            .protocols
            .iter()
            .map(|p| ClassicProtocol {
                name: p.name.clone(),
                metadata: p.metadata.clone(),
            })
            .collect(),
    });
    // A classic member subscribes by topic names only (its regular expressions are resolved by
    // the client), so there is no pattern for the principal's DESCRIBE rights to filter.
    let step = Step {
        ctx,
        topics,
        group_id: &group_id,
        describable: &|_| true,
    };
    let names_changed =
        updated.metadata.subscribed_topic_names != old.metadata.subscribed_topic_names;
    let regex = regex::update(&mut core, &step, &old, &updated)?;
    let subscription_changed = names_changed || regex.regex_changed;
    core.members.insert(member_id.clone(), updated);
    step.bump_if_needed(&mut core, &group.core, subscription_changed, &member_id);
    let owned = Some(subscription.owned);
    let answer = |member: &ConsumerMember| JoinOutcome {
        error_code: 0,
        generation_id: member.epoch(),
        protocol_type: Some(CONSUMER_PROTOCOL_TYPE.to_string()),
        protocol_name: Some(first.name.clone()),
        leader: String::new(),
        member_id: member.member_id.clone(),
        skip_assignment: false,
        members: Vec::new(),
    };
    if downgrade {
        let rebalance = core.assignment_epoch < core.group_epoch;
        if !rebalance {
            step.reconcile(&mut core, &member_id, subscription_changed, &owned)?;
        }
        let outcome = core.members.get(&member_id).map(answer);
        let classic = downgrade_replacing(group, ctx, topics, &core, rebalance)?;
        let outcome = outcome.ok_or_else(|| error(ResponseError::UnknownServerError))?;
        return Ok((outcome, Some(classic)));
    }
    step.maybe_compute_target(&mut core, group);
    let member = step.reconcile(&mut core, &member_id, subscription_changed, &owned)?;
    let outcome = answer(&member);
    commit(group, ctx, core)?;
    let session_timeout_ms = request.session_timeout_ms;
    fence::after_classic_join(
        group,
        ctx,
        &member_id,
        session_timeout_ms,
        request.rebalance_timeout_ms,
    );
    Ok((outcome, None))
}

/// The downgrade of a JoinGroup whose classic static member replaced the group's last member
/// of the consumer protocol: the join's own records, then the conversion's.
fn downgrade_replacing(
    group: &mut ConsumerGroup,
    ctx: &Ctx,
    topics: &dyn TopicImage,
    after: &Core,
    rebalance: bool,
) -> Result<ClassicGroup, GroupError> {
    let encode = |e: String| GroupError::new(ResponseError::UnknownServerError, e);
    let before_records = changes::diff(
        &group.group_id,
        &group.core,
        after,
        group.has_partition_metadata_record,
    )
    .map_err(encode)?;
    let reason = format!(
        "Downgrade group {} from consumer to classic with stale assignment.",
        group.group_id
    );
    let generation = group.core.group_epoch;
    let downgrade = Downgrade {
        group,
        after,
        generation,
        before_records,
        tombstoned: after,
        rebalance: rebalance.then_some(reason.as_str()),
    };
    downgrade.run(ctx, topics)
}

/// The join as the consumer protocol's member lookups see it.
fn as_heartbeat(group_id: &str, member_id: &str, request: &JoinRequest) -> Heartbeat {
    Heartbeat {
        group_id: group_id.to_string(),
        member_id: member_id.to_string(),
        member_epoch: -1,
        instance_id: request.group_instance_id.clone(),
        rack_id: None,
        rebalance_timeout_ms: request.rebalance_timeout_ms,
        topic_names: None,
        topic_regex: None,
        assignor: None,
        owned: None,
        client_id: request.client_id.clone(),
        client_host: request.client_host.clone(),
    }
}

/// Kafka's `supportsClassicProtocols`: the embedded consumer protocol, and one of the member's
/// protocols that every classic member supports.
fn supports_protocols(core: &Core, request: &JoinRequest) -> bool {
    if request.protocol_type != CONSUMER_PROTOCOL_TYPE {
        return false;
    }
    if core.members.is_empty() {
        return !request.protocols.is_empty();
    }
    let classic: Vec<&ClassicMemberMetadata> = core
        .members
        .values()
        .filter_map(|m| m.metadata.classic.as_ref())
        .collect();
    request.protocols.iter().any(|p| {
        classic
            .iter()
            .all(|c| c.protocols.iter().any(|q| q.name == p.name))
    })
}

/// Kafka's `validateConsumerGroupMember` and `throwIfMemberDoesNotUseClassicProtocol`.
fn classic_member(
    group: &ConsumerGroup,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<ConsumerMember, ResponseError> {
    let member = match instance_id {
        None => group.core.members.get(member_id),
        Some(instance_id) => {
            let existing = group
                .core
                .static_member_id(instance_id)
                .ok_or(ResponseError::UnknownMemberId)?;
            if existing != member_id {
                return Err(ResponseError::FencedInstanceId);
            }
            group.core.members.get(existing)
        }
    };
    match member {
        Some(m) if m.uses_classic_protocol() => Ok(m.clone()),
        _ => Err(ResponseError::UnknownMemberId),
    }
}

/// A classic member's SyncGroup to a consumer group (which has members).
pub(crate) fn sync(
    group: &mut ConsumerGroup,
    ctx: &Ctx,
    topics: &dyn TopicImage,
    request: &SyncGroupRequest,
) -> SyncOutcome {
    match sync_group(group, ctx, topics, request) {
        Ok(outcome) => outcome,
        Err(e) => SyncOutcome::error(e),
    }
}

fn sync_group(
    group: &mut ConsumerGroup,
    ctx: &Ctx,
    topics: &dyn TopicImage,
    request: &SyncGroupRequest,
) -> Result<SyncOutcome, ResponseError> {
    let instance_id = request.group_instance_id.as_deref();
    let member = classic_member(group, request.member_id.as_str(), instance_id)?;
    if request.generation_id != member.epoch() {
        return Err(ResponseError::IllegalGeneration);
    }
    let first = member
        .metadata
        .classic
        .as_ref()
        .and_then(|c| c.protocols.first())
        .ok_or(ResponseError::UnknownServerError)?;
    let mismatch = |requested: &Option<kafka_protocol::protocol::StrBytes>, ours: &str| {
        requested.as_ref().is_some_and(|r| r.as_str() != ours)
    };
    if mismatch(&request.protocol_type, CONSUMER_PROTOCOL_TYPE)
        || mismatch(&request.protocol_name, &first.name)
    {
        return Err(ResponseError::InconsistentGroupProtocol);
    }
    let member_id = member.member_id.clone();
    if group.core.assignment_epoch > member.epoch()
        && member.assignment.state != MemberState::UnrevokedPartitions
    {
        fence::arm_join_if_absent(group, ctx, &member_id);
        return Err(ResponseError::RebalanceInProgress);
    }
    // A version Kafka cannot encode an assignment at is an internal error there too.
    let assignment = embedded::version(&first.metadata)
        .and_then(|v| embedded::encode_assignment(&migrate::owned_partitions(&member), v, topics))
        .map_err(|_| ResponseError::UnknownServerError)?;
    fence::after_classic_sync(group, ctx, &member_id);
    Ok(SyncOutcome {
        error_code: 0,
        protocol_type: request.protocol_type.as_ref().map(|s| s.to_string()),
        protocol_name: request.protocol_name.as_ref().map(|s| s.to_string()),
        assignment,
    })
}

/// A classic member's Heartbeat to a consumer group.
pub(crate) fn heartbeat(
    group: &mut ConsumerGroup,
    ctx: &Ctx,
    request: &HeartbeatRequest,
) -> Result<(), ResponseError> {
    let instance_id = request.group_instance_id.as_deref();
    let member = classic_member(group, request.member_id.as_str(), instance_id)?;
    if request.generation_id != member.epoch() {
        return Err(ResponseError::IllegalGeneration);
    }
    let member_id = member.member_id.clone();
    fence::arm_session(group, ctx, &member_id);
    let state = member.assignment.state;
    let must_rejoin = member.epoch() < group.core.assignment_epoch
        || state == MemberState::UnrevokedPartitions
        || (state == MemberState::UnreleasedPartitions
            && !waiting_on_unreleased(&group.core, &member));
    if must_rejoin {
        fence::arm_join_if_absent(group, ctx, &member_id);
        return Err(ResponseError::RebalanceInProgress);
    }
    Ok(())
}

/// Kafka's `waitingOnUnreleasedPartition`: some partition of the member's target that it does
/// not own yet is still owned by another member.
fn waiting_on_unreleased(core: &Core, member: &ConsumerMember) -> bool {
    let Some(target) = core.target.get(&member.member_id) else {
        return false;
    };
    let epochs = core.partition_epochs();
    target.iter().any(|(topic, partitions)| {
        let assigned = member.assignment.assigned.get(topic);
        partitions.iter().any(|p| {
            !assigned.is_some_and(|a| a.contains_key(p)) && epochs.contains_key(&(*topic, *p))
        })
    })
}

/// LeaveGroup to a consumer group: each named member (by member id, or by instance id, with
/// its member id checked when given) leaves, and the group fences them at once. The error of
/// each member, or the error of the whole request.
pub(crate) fn leave(
    inner: &mut Inner,
    ctx: &Ctx,
    topics: &dyn TopicImage,
    group_id: &str,
    leavers: &[(String, Option<String>)],
) -> Result<Vec<Option<ResponseError>>, ResponseError> {
    let Some(group) = inner.consumer_groups.get_mut(group_id) else {
        return Err(ResponseError::UnknownMemberId);
    };
    let mut leaving: Vec<String> = Vec::new();
    let results = leavers
        .iter()
        .map(|(member_id, instance_id)| {
            let found = match instance_id {
                None => group
                    .core
                    .members
                    .get(member_id)
                    .map(|m| m.member_id.clone())
                    .ok_or(ResponseError::UnknownMemberId),
                Some(instance_id) => match group.core.static_member_id(instance_id) {
                    None => Err(ResponseError::UnknownMemberId),
                    Some(existing) if !member_id.is_empty() && existing != member_id => {
                        Err(ResponseError::FencedInstanceId)
                    }
                    Some(existing) => Ok(existing.to_string()),
                },
            };
            match found {
                Ok(id) => {
                    tracing::info!(group_id, member_id = %id, "member has left the group through an explicit LeaveGroup request");
                    if !leaving.contains(&id) {
                        leaving.push(id);
                    }
                    None
                }
                Err(e) => Some(e),
            }
        })
        .collect();
    match fence::fence_members(group, ctx, topics, &leaving) {
        Ok(Some(classic)) => inner.install_classic(classic),
        Ok(None) => inner.note_consumer_wakeup(group_id),
        Err(e) => return Err(e.error),
    }
    Ok(results)
}
