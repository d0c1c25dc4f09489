//! ConsumerGroupHeartbeat (API 68, v0-1): join (member epoch 0), heartbeat (the member's
//! epoch), leave (-1) and a static member's temporary leave (-2). Kafka's
//! `consumerGroupHeartbeat`: the request is checked before the group is touched; then the
//! member's metadata is updated, the group epoch moves if what the assignor sees changed, the
//! target assignment is recomputed when the group epoch is ahead of it (at most every
//! `group.consumer.assignment.interval.ms`), and the member takes one reconciliation step. The
//! response carries the member's assignment when the request was a full one (a join, or every
//! field set) or when the assignment changed; a null assignment means "no change".

use std::collections::BTreeSet;

use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::member::ConsumerMember;
use super::reconcile::Owned;
use super::request::{Answer, GroupError, Heartbeat, Step};
use super::{fence, regex, ConsumerGroup, Core};
use crate::group::context::Ctx;
use crate::group::topics::TopicImage;
use crate::group::{GroupCoordinator, Inner};

fn is_blank(s: &Option<String>) -> bool {
    s.as_ref().is_some_and(|s| s.trim().is_empty())
}

/// Kafka's `throwIfConsumerGroupHeartbeatRequestIsInvalid` (in `GroupCoordinatorService`).
fn validate(h: &Heartbeat, version: i16, assignors: &[String]) -> Result<(), GroupError> {
    let invalid = |m: &str| Err(GroupError::new(ResponseError::InvalidRequest, m));
    if (version >= 1 || h.member_epoch > 0 || h.member_epoch == -1) && h.member_id.trim().is_empty()
    {
        return invalid("MemberId can't be empty.");
    }
    if h.group_id.trim().is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if is_blank(&h.instance_id) {
        return invalid("InstanceId can't be empty.");
    }
    if is_blank(&h.rack_id) {
        return invalid("RackId can't be empty.");
    }
    match h.member_epoch {
        0 => {
            if h.rebalance_timeout_ms == -1 {
                return invalid("RebalanceTimeoutMs must be provided in first request.");
            }
            if !h.owned.as_ref().is_some_and(|o| o.is_empty()) {
                return invalid("TopicPartitions must be empty when (re-)joining.");
            }
            if h.topic_names.is_none() && h.topic_regex.is_none() {
                return invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.");
            }
        }
        -2 if h.instance_id.is_none() => return invalid("InstanceId can't be null."),
        e if e < -2 => return invalid("MemberEpoch is invalid."),
        _ => {}
    }
    if let Some(name) = &h.assignor {
        if !assignors.iter().any(|a| a == name) {
            return Err(GroupError::new(
                ResponseError::UnsupportedAssignor,
                format!(
                    "ServerAssignor {name} is not supported. Supported assignors: {}.",
                    assignors.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

impl GroupCoordinator {
    /// `describable` says which topics the member's principal may describe: a regular
    /// expression resolved on this heartbeat matches only those (Kafka filters the topics it
    /// resolves with the DESCRIBE ACLs of the request that triggered the resolution).
    pub fn consumer_group_heartbeat(
        &self,
        request: ConsumerGroupHeartbeatRequest,
        version: i16,
        client_id: &str,
        client_host: &str,
        describable: &dyn Fn(&str) -> bool,
    ) -> ConsumerGroupHeartbeatResponse {
        let h = Heartbeat::new(&request, client_id, client_host);
        let result = validate(&h, version, &self.config.consumer_assignors).and_then(|()| {
            let now_ms = self.clock.now_ms();
            let mut inner = self.lock_at(now_ms);
            if inner.shut_down {
                return Err(GroupError::bare(ResponseError::NotCoordinator));
            }
            let ctx = self.ctx(now_ms);
            let topics = self.topics();
            let group_id = h.group_id.clone();
            let existed = inner.consumer_groups.contains_key(&group_id);
            let answer = match h.member_epoch {
                -1 | -2 => fence::leave(&mut inner, &ctx, topics, &h),
                _ => heartbeat(&mut inner, &ctx, topics, describable, h),
            };
            // A group created for a join that failed does not exist (Kafka adds a group only
            // when its records are replayed), and a classic group whose upgrade failed stays.
            let unused = |g: &ConsumerGroup| g.core.members.is_empty() && g.offsets.is_empty();
            if answer.is_err() {
                super::migrate::restore_failed_upgrade(&mut inner, &group_id);
                if !existed && inner.consumer_groups.get(&group_id).is_some_and(unused) {
                    inner.consumer_groups.remove(&group_id);
                }
            }
            inner.reschedule_if_earlier(&self.timers_changed);
            answer
        });
        match result {
            Ok(answer) => response(answer),
            Err(e) => ConsumerGroupHeartbeatResponse::default()
                .with_error_code(e.error.code())
                .with_error_message(e.message.map(StrBytes::from_string)),
        }
    }
}

fn response(a: Answer) -> ConsumerGroupHeartbeatResponse {
    let assignment = a.assignment.map(|tps| {
        Assignment::default().with_topic_partitions(
            tps.into_iter()
                .map(|(topic_id, partitions)| {
                    TopicPartitions::default()
                        .with_topic_id(topic_id)
                        .with_partitions(partitions)
                })
                .collect(),
        )
    });
    ConsumerGroupHeartbeatResponse::default()
        .with_member_id(Some(StrBytes::from_string(a.member_id)))
        .with_member_epoch(a.member_epoch)
        .with_heartbeat_interval_ms(a.heartbeat_interval_ms)
        .with_assignment(assignment)
}

/// A join or a heartbeat (member epoch 0 or positive).
fn heartbeat(
    inner: &mut Inner,
    ctx: &Ctx,
    topics: &dyn TopicImage,
    describable: &dyn Fn(&str) -> bool,
    mut h: Heartbeat,
) -> Result<Answer, GroupError> {
    let joining = h.member_epoch == 0;
    let group = super::get_or_create(inner, ctx, topics, &h.group_id, joining)?;
    check_group_size(group, ctx, &h.member_id, h.instance_id.as_deref())?;
    if h.member_id.is_empty() {
        h.member_id = Uuid::new_v4().to_string();
    }
    let mut core = group.core.clone();
    let old = match &h.instance_id {
        None => dynamic_member(&core, &h, joining)?,
        Some(instance_id) => static_member(&mut core, &h, instance_id, joining, false)?,
    };
    let mut updated = old.clone();
    apply_request(&mut updated, &h);
    let step = Step {
        ctx,
        topics,
        describable,
        group_id: &h.group_id,
    };
    let names_changed =
        updated.metadata.subscribed_topic_names != old.metadata.subscribed_topic_names;
    let regex = regex::update(&mut core, &step, &old, &updated)?;
    let subscription_changed = names_changed || regex.regex_changed;
    let member_id = updated.member_id.clone();
    let previous_assigned = old.assignment.assigned.clone();
    core.members.insert(member_id.clone(), updated);
    step.bump_if_needed(
        &mut core,
        &group.core,
        names_changed || regex.bump,
        &member_id,
    );
    step.maybe_compute_target(&mut core, group);
    let member = step.reconcile(&mut core, &member_id, subscription_changed, &h.owned)?;
    let changed = member.assignment.assigned != previous_assigned;
    let answer = Answer {
        member_id: member_id.clone(),
        member_epoch: member.epoch(),
        heartbeat_interval_ms: ctx.consumer_heartbeat_interval_ms(&h.group_id),
        assignment: (joining || h.is_full() || changed).then(|| owned_list(&member)),
    };
    let uses_classic = member.uses_classic_protocol();
    tracing::debug!(group_id = %h.group_id, member_id, epoch = answer.member_epoch, owned = ?h.owned, assigned = ?answer.assignment, "consumer group heartbeat");
    super::commit(group, ctx, core)?;
    fence::after_step(group, ctx, &member_id, uses_classic);
    inner.note_consumer_wakeup(&h.group_id);
    Ok(answer)
}

fn owned_list(member: &ConsumerMember) -> Vec<(Uuid, Vec<i32>)> {
    member
        .assignment
        .assigned
        .iter()
        .map(|(topic, partitions)| (*topic, partitions.keys().copied().collect()))
        .collect()
}

/// Kafka's `throwIfConsumerGroupIsFull`.
pub(crate) fn check_group_size(
    group: &ConsumerGroup,
    ctx: &Ctx,
    member_id: &str,
    instance_id: Option<&str>,
) -> Result<(), GroupError> {
    let max = ctx.config.consumer_max_size;
    let known_instance = instance_id.is_some_and(|i| group.core.static_member_id(i).is_some());
    let known_member = !member_id.is_empty() && group.core.members.contains_key(member_id);
    if !known_instance && group.core.members.len() >= max && !known_member {
        return Err(GroupError::new(
            ResponseError::GroupMaxSizeReached,
            format!("The consumer group has reached its maximum capacity of {max} members."),
        ));
    }
    Ok(())
}

fn unknown_member(member_id: &str, group_id: &str) -> GroupError {
    GroupError::new(
        ResponseError::UnknownMemberId,
        format!("Member {member_id} is not a member of group {group_id}."),
    )
}

/// Kafka's `getOrMaybeSubscribeDynamicConsumerGroupMember`.
fn dynamic_member(core: &Core, h: &Heartbeat, joining: bool) -> Result<ConsumerMember, GroupError> {
    let member = match core.members.get(&h.member_id) {
        Some(m) => m.clone(),
        None if joining => ConsumerMember::new(&h.member_id),
        None => return Err(unknown_member(&h.member_id, &h.group_id)),
    };
    check_epoch(&member, h)?;
    if joining {
        tracing::info!(group_id = %h.group_id, member_id = %h.member_id, "member joins the consumer group using the consumer protocol");
    }
    Ok(member)
}

/// Kafka's `getOrMaybeSubscribeStaticConsumerGroupMember`: a static member that rejoins takes
/// over its instance's place (and assignment) under its new member id, if the old one has left
/// (epoch -2) or either of them speaks the classic protocol; otherwise the instance id is
/// still in use. A member of the classic protocol (`classic`) has no epoch to check.
pub(crate) fn static_member(
    core: &mut Core,
    h: &Heartbeat,
    instance_id: &str,
    joining: bool,
    classic: bool,
) -> Result<ConsumerMember, GroupError> {
    let existing = core.static_member_id(instance_id).map(str::to_string);
    if !joining {
        let Some(existing) = existing else {
            return Err(GroupError::new(
                ResponseError::UnknownMemberId,
                format!("Instance id {instance_id} is unknown."),
            ));
        };
        if existing != h.member_id {
            return Err(fenced_instance(h, instance_id, &existing));
        }
        let member = core.members[&existing].clone();
        if !classic {
            check_epoch(&member, h)?;
        }
        return Ok(member);
    }
    let Some(existing) = existing else {
        tracing::info!(group_id = %h.group_id, member_id = %h.member_id, instance_id, "static member joins the consumer group");
        return Ok(ConsumerMember::new(&h.member_id));
    };
    let old = core.members[&existing].clone();
    if !classic && !old.uses_classic_protocol() && old.epoch() != -2 {
        return Err(GroupError::new(
            ResponseError::UnreleasedInstanceId,
            format!("Static member {} with instance id {instance_id} cannot join the group because the instance id is owned by {existing} member.", h.member_id),
        ));
    }
    let mut replacement = old.clone();
    replacement.member_id = h.member_id.clone();
    replacement.assignment.member_epoch = 0;
    replacement.assignment.previous_member_epoch = 0;
    core.members.remove(&existing);
    let target = core.target.remove(&existing).unwrap_or_default();
    core.target.insert(h.member_id.clone(), target);
    core.members
        .insert(h.member_id.clone(), replacement.clone());
    tracing::info!(group_id = %h.group_id, instance_id, new_member_id = %h.member_id, old_member_id = %existing, "static member rejoins the consumer group");
    Ok(replacement)
}

fn fenced_instance(h: &Heartbeat, instance_id: &str, existing: &str) -> GroupError {
    GroupError::new(
        ResponseError::FencedInstanceId,
        format!(
            "Static member {} with instance id {instance_id} was fenced by member {existing}.",
            h.member_id
        ),
    )
}

/// Kafka's `throwIfConsumerGroupMemberEpochIsInvalid`. A rejoin (epoch 0) is always accepted
/// (KAFKA-19233); an epoch one step behind is accepted when the member owns no more than its
/// current assignment (the response that moved it on was lost).
fn check_epoch(member: &ConsumerMember, h: &Heartbeat) -> Result<(), GroupError> {
    let received = h.member_epoch;
    let current = member.epoch();
    if received == 0 {
        return Ok(());
    }
    let fenced = |relation: &str| {
        GroupError::new(
            ResponseError::FencedMemberEpoch,
            format!("The consumer group member has a {relation} member epoch ({received}) than the one known by the group coordinator ({current}). The member must abandon all its partitions and rejoin."),
        )
    };
    if received > current {
        return Err(fenced("greater"));
    }
    if received < current
        && (received != member.assignment.previous_member_epoch || !owns_subset(&h.owned, member))
    {
        return Err(fenced("smaller"));
    }
    Ok(())
}

fn owns_subset(owned: &Owned, member: &ConsumerMember) -> bool {
    let Some(owned) = owned else {
        return false;
    };
    owned.iter().all(|(topic, partitions)| {
        member
            .assignment
            .assigned
            .get(topic)
            .is_some_and(|assigned| partitions.iter().all(|p| assigned.contains_key(p)))
    })
}

/// The request's non-null fields replace the member's (Kafka's `maybeUpdate*`).
fn apply_request(member: &mut ConsumerMember, h: &Heartbeat) {
    let m = &mut member.metadata;
    if let Some(instance_id) = &h.instance_id {
        m.instance_id = Some(instance_id.clone());
    }
    if let Some(rack_id) = &h.rack_id {
        m.rack_id = Some(rack_id.clone());
    }
    if h.rebalance_timeout_ms != -1 {
        m.rebalance_timeout_ms = h.rebalance_timeout_ms;
    }
    if let Some(assignor) = &h.assignor {
        m.server_assignor = Some(assignor.clone());
    }
    if let Some(names) = &h.topic_names {
        m.subscribed_topic_names = names.iter().cloned().collect::<BTreeSet<_>>();
    }
    if let Some(regex) = &h.topic_regex {
        m.subscribed_topic_regex = regex.clone();
    }
    m.client_id = h.client_id.clone();
    m.client_host = h.client_host.clone();
    m.classic = None;
}
