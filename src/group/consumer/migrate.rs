//! Online migration between the group protocols, as `group.consumer.migration.policy` allows
//! (Kafka's `convertToConsumerGroup` / `convertToClassicGroup` and their checks):
//!
//! - **Upgrade.** A consumer-protocol member joining a non-empty classic group that uses the
//!   embedded consumer protocol turns it into a consumer group. The group epoch and the
//!   assignment epoch become the classic generation, each member keeps its assignment (as its
//!   current and target assignment, stable at that epoch) and its classic protocol metadata, and
//!   the classic members carry on with JoinGroup, SyncGroup and Heartbeat (`classic.rs`). The
//!   records: a tombstone of the group-metadata record, then every consumer-group record of the
//!   new group, then the joining member's own, in one batch.
//! - **Downgrade.** When the last consumer-protocol member leaves (or is fenced, or replaced by
//!   a classic static member) and only classic members remain, the group turns back into a
//!   classic group at the group epoch, each member holding its target assignment, and
//!   rebalances. The records: tombstones of every consumer-group record, then a group-metadata
//!   record of the classic group.
//!
//! Committed offsets move with the group either way.

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::embedded::{self, AssignmentError};
use super::member::{
    partition_set, ClassicMemberMetadata, ClassicProtocol, ConsumerMember, MemberAssignment,
    MemberMetadata, MemberState, PartitionSet,
};
use super::request::GroupError;
use super::{changes, ConsumerGroup, Core};
use crate::group::context::{Ctx, Record};
use crate::group::state::{
    ClassicGroup, GroupState, JoinOutcome, Member, Protocol, SyncOutcome, CONSUMER_PROTOCOL_TYPE,
};
use crate::group::topics::TopicImage;
use crate::group::{persist, rebalance, records, Inner};

/// A classic group turned into a consumer group whose records are not stored yet: they go
/// first in the batch of the change that caused the upgrade, and if that change fails the
/// classic group comes back (`restore_failed_upgrade`).
pub(crate) struct PendingUpgrade {
    pub records: Vec<Record>,
    pub classic: ClassicGroup,
}

fn not_found(message: String) -> GroupError {
    GroupError::new(ResponseError::GroupIdNotFound, message)
}

/// Kafka's `validateOnlineUpgrade`.
fn validate_upgrade(classic: &ClassicGroup, ctx: &Ctx) -> Result<(), GroupError> {
    let id = &classic.group_id;
    let why = if !ctx.config.migration_policy.upgrade_enabled() {
        "online upgrade is disabled"
    } else if classic.protocol_type.as_deref() != Some(CONSUMER_PROTOCOL_TYPE) {
        "the group does not use the consumer embedded protocol"
    } else if classic.members.len() > ctx.config.consumer_max_size {
        "the group size exceeds the consumer group maximum size"
    } else {
        return Ok(());
    };
    tracing::info!(group_id = %id, "cannot upgrade the classic group to a consumer group: {why}");
    Err(not_found(format!(
        "Cannot upgrade classic group {id} to consumer group because {why}."
    )))
}

/// Kafka's `convertToConsumerGroup`: the classic group `group_id` (non-empty) becomes a
/// consumer group in `inner`, its records pending. Parked joins and syncs are answered
/// REBALANCE_IN_PROGRESS, as Kafka answers them, whatever happens next.
pub(crate) fn upgrade(
    inner: &mut Inner,
    ctx: &Ctx,
    topics: &dyn TopicImage,
    group_id: &str,
) -> Result<(), GroupError> {
    let Some(classic) = inner.groups.get_mut(group_id) else {
        return Err(GroupError::bare(ResponseError::UnknownServerError));
    };
    validate_upgrade(classic, ctx)?;
    let core = consumer_core(classic, topics)?;
    for member in &mut classic.members {
        let member_id = member.member_id.clone();
        let rebalancing = ResponseError::RebalanceInProgress;
        member.complete_join(JoinOutcome::error(rebalancing, &member_id));
        member.complete_sync(SyncOutcome::error(rebalancing));
    }
    let encode = |e: String| GroupError::new(ResponseError::UnknownServerError, e);
    let tombstone = (
        records::encode_group_metadata_key(group_id).map_err(encode)?,
        None,
    );
    let mut records = vec![tombstone];
    records.extend(changes::group_records(group_id, &core).map_err(encode)?);
    let Some(mut classic) = inner.groups.remove(group_id) else {
        return Err(GroupError::bare(ResponseError::UnknownServerError));
    };
    let mut group = ConsumerGroup::new(group_id);
    group.core = core;
    group.offsets = std::mem::take(&mut classic.offsets);
    group.pending_upgrade = Some(Box::new(PendingUpgrade { records, classic }));
    inner.consumer_groups.insert(group_id.to_string(), group);
    Ok(())
}

/// Puts back the classic group of an upgrade whose records could not be stored.
pub(crate) fn restore_failed_upgrade(inner: &mut Inner, group_id: &str) {
    let pending = inner.consumer_groups.get_mut(group_id).and_then(|g| {
        g.pending_upgrade
            .take()
            .map(|p| (p, std::mem::take(&mut g.offsets)))
    });
    if let Some((pending, offsets)) = pending {
        inner.consumer_groups.remove(group_id);
        let mut classic = pending.classic;
        classic.offsets = offsets;
        inner.groups.insert(group_id.to_string(), classic);
    }
}

/// Kafka's `ConsumerGroup.fromClassicGroup`.
fn consumer_core(classic: &ClassicGroup, topics: &dyn TopicImage) -> Result<Core, GroupError> {
    let id = &classic.group_id;
    // Kafka reads the chosen protocol's metadata unconditionally; a group that never chose one
    // (still in its first rebalance) fails there with an internal error.
    let protocol = classic.protocol_name.as_deref().ok_or_else(|| {
        GroupError::new(
            ResponseError::UnknownServerError,
            format!("Group {id} has no protocol to upgrade from yet."),
        )
    })?;
    let malformed = || {
        not_found(format!("Cannot upgrade classic group {id} to consumer group because the embedded consumer protocol is malformed."))
    };
    let generation = classic.generation_id;
    let mut core = Core {
        group_epoch: generation,
        assignment_epoch: generation,
        ..Core::default()
    };
    for m in &classic.members {
        let assigned = match embedded::assignment(&m.assignment, topics) {
            Ok(assigned) => assigned,
            Err(AssignmentError::Malformed(_)) => return Err(malformed()),
            Err(AssignmentError::UserData) => return Err(not_found(format!("Cannot upgrade classic group {id} to consumer group because an unsupported custom assignor is in use. Please refer to the documentation or switch to a default assignor before re-attempting the upgrade."))),
        };
        let subscription =
            embedded::subscription(&m.metadata(protocol), topics).map_err(|_| malformed())?;
        let member = ConsumerMember {
            member_id: m.member_id.clone(),
            metadata: MemberMetadata {
                instance_id: m.group_instance_id.clone(),
                rack_id: subscription.rack_id,
                client_id: m.client_id.clone(),
                client_host: m.client_host.clone(),
                subscribed_topic_names: subscription.topics,
                subscribed_topic_regex: String::new(),
                rebalance_timeout_ms: m.rebalance_timeout_ms,
                server_assignor: None,
                classic: Some(ClassicMemberMetadata {
                    session_timeout_ms: m.session_timeout_ms,
                    protocols: m
                        .protocols
                        .iter()
                        .map(|p| ClassicProtocol {
                            name: p.name.clone(),
                            metadata: p.metadata.clone(),
                        })
                        .collect(),
                }),
            },
            assignment: MemberAssignment {
                member_epoch: generation,
                previous_member_epoch: generation,
                state: MemberState::Stable,
                assigned: with_epoch(&assigned, generation),
                pending_revocation: Default::default(),
            },
        };
        core.target.insert(m.member_id.clone(), assigned);
        core.members.insert(m.member_id.clone(), member);
    }
    core.metadata_hash = core.compute_metadata_hash(topics);
    Ok(core)
}

fn with_epoch(set: &PartitionSet, epoch: i32) -> super::member::PartitionEpochs {
    set.iter()
        .map(|(topic, ps)| (*topic, ps.iter().map(|p| (*p, epoch)).collect()))
        .collect()
}

/// Kafka's `validateOnlineDowngradeWithFencedMembers`: only classic members would be left (at
/// least one, and no more than `group.max.size`), and the policy allows a downgrade.
pub(crate) fn may_downgrade_without(group: &ConsumerGroup, ctx: &Ctx, leaving: &[String]) -> bool {
    let remaining: Vec<&ConsumerMember> = group
        .core
        .members
        .values()
        .filter(|m| !leaving.contains(&m.member_id))
        .collect();
    if remaining.is_empty() || !remaining.iter().all(|m| m.uses_classic_protocol()) {
        return false;
    }
    downgrade_allowed(group, ctx, remaining.len())
}

/// Kafka's `validateOnlineDowngradeWithReplacedMember`: `replaced`, the group's only member of
/// the consumer protocol, is being replaced by a classic static member.
pub(crate) fn may_downgrade_replacing(group: &ConsumerGroup, ctx: &Ctx, replaced: &str) -> bool {
    let others_classic = group
        .core
        .members
        .values()
        .all(|m| m.member_id == replaced || m.uses_classic_protocol());
    let replaced_consumer = group
        .core
        .members
        .get(replaced)
        .is_some_and(|m| !m.uses_classic_protocol());
    others_classic && replaced_consumer && downgrade_allowed(group, ctx, group.core.members.len())
}

fn downgrade_allowed(group: &ConsumerGroup, ctx: &Ctx, size: usize) -> bool {
    let id = &group.group_id;
    if !ctx.config.migration_policy.downgrade_enabled() {
        tracing::info!(group_id = %id, "cannot downgrade the consumer group to a classic group: the online downgrade is disabled");
        return false;
    }
    if size > ctx.config.group_max_size {
        tracing::info!(group_id = %id, "cannot downgrade the consumer group to a classic group: its size is greater than group.max.size");
        return false;
    }
    true
}

/// Kafka's `convertToClassicGroup`: the classic group that `after` (the consumer group's
/// state once the change that empties it of consumer-protocol members is applied) turns into,
/// at the generation `generation`, and the records that do it: `before_records` (the change's
/// own, if any), tombstones of `tombstoned`'s records, and the classic group's record. The
/// records are stored here; the caller swaps the groups. With `rebalance`, the classic group
/// starts a rebalance at once.
pub(crate) struct Downgrade<'a> {
    pub group: &'a mut ConsumerGroup,
    pub after: &'a Core,
    pub generation: i32,
    pub before_records: Vec<Record>,
    pub tombstoned: &'a Core,
    pub rebalance: Option<&'a str>,
}

impl Downgrade<'_> {
    pub(crate) fn run(
        self,
        ctx: &Ctx,
        topics: &dyn TopicImage,
    ) -> Result<ClassicGroup, GroupError> {
        let id = self.group.group_id.clone();
        let mut classic = ClassicGroup::new(&id, Some(ctx.now_ms));
        classic.state = GroupState::Stable;
        classic.previous_state = GroupState::Stable;
        classic.generation_id = self.generation;
        classic.protocol_type = Some(CONSUMER_PROTOCOL_TYPE.to_string());
        for m in self.after.members.values() {
            classic.add(classic_member(m, ctx));
        }
        classic.protocol_name = classic.select_protocol();
        classic.subscribed_topics = classic.compute_subscribed_topics();
        let protocol = classic.protocol_name.clone().unwrap_or_default();
        let empty = PartitionSet::new();
        for member in &mut classic.members {
            let target = self.after.target.get(&member.member_id).unwrap_or(&empty);
            let version = embedded::version(&member.metadata(&protocol));
            member.assignment = version
                .and_then(|v| embedded::encode_assignment(target, v, topics))
                .map_err(|e| {
                    tracing::warn!(group_id = %id, "cannot downgrade the consumer group: {}", e.0);
                    not_found(format!("Cannot downgrade the classic group {id}: {}.", e.0))
                })?;
        }
        let encode = |e: String| GroupError::new(ResponseError::UnknownServerError, e);
        let mut batch = self.before_records;
        batch.extend(changes::group_tombstones(&id, self.tombstoned).map_err(encode)?);
        batch.push(
            persist::group_metadata_record(&classic, &|m| m.assignment.clone())
                .map_err(GroupError::bare)?,
        );
        crate::group::context::append(ctx.store, &id, batch).map_err(GroupError::bare)?;
        classic.offsets = std::mem::take(&mut self.group.offsets);
        let deadlines: Vec<(String, i64)> = classic
            .members
            .iter()
            .map(|m| {
                (
                    m.member_id.clone(),
                    ctx.session_deadline(m.session_timeout_ms),
                )
            })
            .collect();
        for (member_id, deadline_ms) in deadlines {
            classic.reschedule_heartbeat(&member_id, deadline_ms);
        }
        tracing::info!(group_id = %id, generation_id = self.generation, "converted the consumer group to a classic group");
        if let Some(reason) = self.rebalance {
            rebalance::prepare_rebalance(&mut classic, ctx, reason);
        }
        Ok(classic)
    }
}

/// A consumer group's classic member as a member of a classic group.
fn classic_member(m: &ConsumerMember, ctx: &Ctx) -> Member {
    let classic = m.metadata.classic.clone().unwrap_or(ClassicMemberMetadata {
        session_timeout_ms: ctx.config.group_min_session_timeout_ms,
        protocols: Vec::new(),
    });
    Member {
        member_id: m.member_id.clone(),
        group_instance_id: m.metadata.instance_id.clone(),
        client_id: m.metadata.client_id.clone(),
        client_host: m.metadata.client_host.clone(),
        rebalance_timeout_ms: m.metadata.rebalance_timeout_ms,
        session_timeout_ms: classic.session_timeout_ms,
        protocol_type: CONSUMER_PROTOCOL_TYPE.to_string(),
        protocols: classic
            .protocols
            .into_iter()
            .map(|p| Protocol {
                name: p.name,
                metadata: p.metadata,
            })
            .collect(),
        assignment: Bytes::new(),
        join_waiter: None,
        sync_waiter: None,
        is_new: false,
        heartbeat_deadline_ms: i64::MAX,
    }
}

/// The partitions a member owns now, without their epochs (what SyncGroup hands out).
pub(crate) fn owned_partitions(member: &ConsumerMember) -> PartitionSet {
    partition_set(&member.assignment.assigned)
}
