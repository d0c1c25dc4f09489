//! KIP-848 consumer groups: the broker computes the assignment and members reconcile toward it
//! incrementally, partition by partition, through ConsumerGroupHeartbeat. Kafka 4.4's
//! `ConsumerGroup` and the consumer-group half of `GroupMetadataManager`.
//!
//! Three epochs drive a group. The group epoch moves whenever what the assignor sees changes (a
//! member joins, leaves or changes its subscription, a regular expression resolves to other
//! topics, a subscribed topic's partition count changes). The assignment epoch is the group
//! epoch at which the target assignment was last computed. Each member's epoch moves toward the
//! assignment epoch as it reconciles: it is given new partitions only once it has revoked the
//! ones it must give up, and only partitions no other member still owns.
//!
//! Layout: `member.rs` one member; `reconcile.rs` the next assignment of one member (Kafka's
//! `CurrentAssignmentBuilder`); `assignor/` the server-side `uniform` and `range` assignors;
//! `target.rs` the target assignment; `step.rs` the group epoch, target and reconciliation
//! steps of one change; `request.rs` a heartbeat's fields and answer; `heartbeat.rs` ConsumerGroupHeartbeat; `fence.rs`
//! leaving, fencing and the session and rebalance timers; `regex.rs` regular-expression
//! subscriptions; `records.rs` the `__consumer_offsets` records, `changes.rs` the records of a
//! change, `replay.rs` their replay at start-up; `describe.rs` ConsumerGroupDescribe and the consumer-group side of ListGroups and
//! DescribeGroups; `offsets.rs` the member-epoch checks on committed offsets.
//!
//! A change is computed on a copy of the group's state (`Core`); the records that describe it
//! are derived by comparing the copy with the original (`records::diff`), appended to the
//! store, and only then does the copy replace the original, so memory never runs ahead of the
//! log and a failed append leaves the group as it was.

pub(crate) mod assignor;
pub(crate) mod changes;
pub(crate) mod describe;
pub(crate) mod fence;
pub(crate) mod heartbeat;
pub(crate) mod member;
pub(crate) mod offsets;
pub(crate) mod reconcile;
pub(crate) mod records;
pub(crate) mod regex;
pub(crate) mod replay;
pub(crate) mod request;
pub(crate) mod step;
pub(crate) mod target;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::state::CommittedOffset;
use super::topics::{metadata_hash, TopicImage};
use member::{ConsumerMember, PartitionSet};

/// Committed offsets by topic and partition, as classic groups keep them.
pub(crate) type Offsets = BTreeMap<String, BTreeMap<i32, CommittedOffset>>;

/// The states ConsumerGroupDescribe and ListGroups report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConsumerGroupState {
    Empty,
    Assigning,
    Reconciling,
    Stable,
}

impl ConsumerGroupState {
    pub(crate) fn name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

/// The topics a regular expression matched when it was last resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ResolvedRegex {
    pub topics: BTreeSet<String>,
    /// The topic image version it was resolved against.
    pub version: i64,
    pub timestamp_ms: i64,
}

/// Everything about a group that `__consumer_offsets` records describe.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) struct Core {
    pub group_epoch: i32,
    pub metadata_hash: i64,
    /// -1 before the first target assignment (and after the group's deletion).
    pub assignment_epoch: i32,
    pub assignment_timestamp_ms: i64,
    pub members: BTreeMap<String, ConsumerMember>,
    pub target: BTreeMap<String, PartitionSet>,
    pub regexes: BTreeMap<String, ResolvedRegex>,
}

/// A member's timers, as deadlines; `i64::MAX` when disarmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MemberTimers {
    pub session_deadline_ms: i64,
    /// When the member is fenced unless it has left `rebalance_epoch` by then: it owes a
    /// revocation.
    pub rebalance_deadline_ms: i64,
    pub rebalance_epoch: i32,
    /// A classic-protocol member must send JoinGroup (after being told to rejoin) or SyncGroup
    /// (after its join was answered) by then.
    pub classic_deadline_ms: i64,
}

impl Default for MemberTimers {
    fn default() -> MemberTimers {
        MemberTimers {
            session_deadline_ms: i64::MAX,
            rebalance_deadline_ms: i64::MAX,
            rebalance_epoch: -1,
            classic_deadline_ms: i64::MAX,
        }
    }
}

impl MemberTimers {
    fn earliest_ms(&self) -> i64 {
        self.session_deadline_ms
            .min(self.rebalance_deadline_ms)
            .min(self.classic_deadline_ms)
    }
}

pub(crate) struct ConsumerGroup {
    pub group_id: String,
    pub core: Core,
    pub offsets: Offsets,
    pub timers: HashMap<String, MemberTimers>,
    /// A lower bound on the earliest armed timer.
    pub wakeup_ms: i64,
    /// A pre-4.1 subscription-metadata record exists for this group; the next group-epoch
    /// update tombstones it, as Kafka does.
    pub has_partition_metadata_record: bool,
}

impl ConsumerGroup {
    pub(crate) fn new(group_id: &str) -> ConsumerGroup {
        ConsumerGroup {
            group_id: group_id.to_string(),
            // Kafka 4.4 starts a group at group epoch 1 with an assignment at epoch 1, so the
            // first member's join moves it to 2.
            core: Core {
                group_epoch: 1,
                assignment_epoch: 1,
                ..Core::default()
            },
            offsets: Offsets::new(),
            timers: HashMap::new(),
            wakeup_ms: i64::MAX,
            has_partition_metadata_record: false,
        }
    }

    pub(crate) fn state(&self) -> ConsumerGroupState {
        self.core.state()
    }

    pub(crate) fn timers_mut(&mut self, member_id: &str) -> &mut MemberTimers {
        self.timers.entry(member_id.to_string()).or_default()
    }

    /// Arms a timer: every deadline goes through here so that `wakeup_ms` stays a lower bound.
    pub(crate) fn arm(&mut self, deadline_ms: i64) {
        self.wakeup_ms = self.wakeup_ms.min(deadline_ms);
    }

    pub(crate) fn next_deadline_ms(&self) -> i64 {
        self.timers
            .values()
            .map(MemberTimers::earliest_ms)
            .min()
            .unwrap_or(i64::MAX)
    }
}

impl Core {
    /// Kafka's `maybeUpdateGroupState`.
    pub(crate) fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.group_epoch > self.assignment_epoch {
            ConsumerGroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| !m.is_reconciled_to(self.assignment_epoch))
        {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    pub(crate) fn static_member_id(&self, instance_id: &str) -> Option<&str> {
        self.members
            .values()
            .find(|m| m.metadata.instance_id.as_deref() == Some(instance_id))
            .map(|m| m.member_id.as_str())
    }

    /// Who owns (or is revoking) each partition, and at which member epoch: Kafka's
    /// `currentPartitionEpoch`, -1 (absent here) for a free partition.
    pub(crate) fn partition_epochs(&self) -> HashMap<(Uuid, i32), i32> {
        let mut epochs = HashMap::new();
        for member in self.members.values() {
            let owned = [
                &member.assignment.assigned,
                &member.assignment.pending_revocation,
            ];
            for map in owned {
                for (topic, partitions) in map {
                    for partition in partitions.keys() {
                        epochs.insert((*topic, *partition), member.epoch());
                    }
                }
            }
        }
        epochs
    }

    /// The topics a member's subscription covers: its names plus what its regex resolved to.
    pub(crate) fn member_topics(&self, member: &ConsumerMember) -> BTreeSet<String> {
        let mut topics = member.metadata.subscribed_topic_names.clone();
        if let Some(resolved) = member.regex().and_then(|r| self.regexes.get(r)) {
            topics.extend(resolved.topics.iter().cloned());
        }
        topics
    }

    /// Every topic some member subscribes to, by name or through a resolved regex.
    pub(crate) fn subscribed_topic_names(&self) -> BTreeSet<String> {
        let mut topics = BTreeSet::new();
        for member in self.members.values() {
            topics.extend(member.metadata.subscribed_topic_names.iter().cloned());
            if let Some(resolved) = member.regex().and_then(|r| self.regexes.get(r)) {
                topics.extend(resolved.topics.iter().cloned());
            }
        }
        topics
    }

    /// The regexes members subscribe with, and how many members use each.
    pub(crate) fn subscribed_regexes(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for regex in self.members.values().filter_map(|m| m.regex()) {
            *counts.entry(regex.to_string()).or_insert(0) += 1;
        }
        counts
    }

    /// Kafka's `computeMetadataHash` over the subscribed topics.
    pub(crate) fn compute_metadata_hash(&self, topics: &dyn TopicImage) -> i64 {
        metadata_hash(topics, &self.subscribed_topic_names())
    }

    /// Kafka's `preferredServerAssignor`: the assignor most members ask for, if any asks.
    pub(crate) fn preferred_assignor(&self) -> Option<String> {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for name in self
            .members
            .values()
            .filter_map(|m| m.metadata.server_assignor.as_deref())
        {
            *counts.entry(name).or_insert(0) += 1;
        }
        let best = counts.values().copied().max()?;
        counts
            .into_iter()
            .find(|(_, count)| *count == best)
            .map(|(name, _)| name.to_string())
    }
}

/// Kafka's `getOrMaybeCreateConsumerGroup`: the consumer group of that id; a join may create it,
/// replacing an Empty classic group of the same id (whose committed offsets it keeps).
pub(crate) fn get_or_create<'a>(
    inner: &'a mut super::Inner,
    ctx: &super::context::Ctx,
    group_id: &str,
    create: bool,
) -> Result<&'a mut ConsumerGroup, request::GroupError> {
    use kafka_protocol::ResponseError;
    if !inner.consumer_groups.contains_key(group_id) {
        let not_found =
            |message: String| request::GroupError::new(ResponseError::GroupIdNotFound, message);
        match inner.groups.get(group_id) {
            None if !create => {
                return Err(not_found(format!("Consumer group {group_id} not found.")));
            }
            None => {}
            Some(classic)
                if create && classic.members.is_empty() && classic.pending_members.is_empty() =>
            {
                // An Empty classic group gives way: its metadata is tombstoned, its offsets stay.
                let key = super::records::encode_group_metadata_key(group_id)
                    .map_err(|e| request::GroupError::new(ResponseError::UnknownServerError, e))?;
                super::context::append(ctx.store, group_id, vec![(key, None)])
                    .map_err(request::GroupError::bare)?;
                let offsets = inner
                    .groups
                    .remove(group_id)
                    .map(|g| g.offsets)
                    .unwrap_or_default();
                let mut group = ConsumerGroup::new(group_id);
                group.offsets = offsets;
                inner.consumer_groups.insert(group_id.to_string(), group);
            }
            Some(_) => {
                return Err(not_found(format!(
                    "Group {group_id} is not a consumer group."
                )));
            }
        }
        if !inner.consumer_groups.contains_key(group_id) {
            inner
                .consumer_groups
                .insert(group_id.to_string(), ConsumerGroup::new(group_id));
        }
    }
    inner
        .consumer_groups
        .get_mut(group_id)
        .ok_or_else(|| request::GroupError::bare(ResponseError::UnknownServerError))
}

/// Makes `core` the group's state once the records describing the change are stored; on a
/// store failure nothing changes and the client is told to retry (Kafka's
/// COORDINATOR_NOT_AVAILABLE, or UNKNOWN_SERVER_ERROR for records too large).
pub(crate) fn commit(
    group: &mut ConsumerGroup,
    ctx: &super::context::Ctx,
    core: Core,
) -> Result<(), request::GroupError> {
    use kafka_protocol::ResponseError;
    let records = changes::diff(
        &group.group_id,
        &group.core,
        &core,
        group.has_partition_metadata_record,
    )
    .map_err(|e| request::GroupError::new(ResponseError::UnknownServerError, e))?;
    if !records.is_empty() {
        super::context::append(ctx.store, &group.group_id, records)
            .map_err(request::GroupError::bare)?;
    }
    if core.group_epoch != group.core.group_epoch {
        group.has_partition_metadata_record = false;
    }
    let gone: Vec<String> = group
        .timers
        .keys()
        .filter(|id| !core.members.contains_key(*id))
        .cloned()
        .collect();
    for member_id in gone {
        group.timers.remove(&member_id);
    }
    group.core = core;
    Ok(())
}

/// Forgets one committed offset.
pub(crate) fn remove_from(offsets: &mut Offsets, topic: &str, partition: i32) {
    if let Some(partitions) = offsets.get_mut(topic) {
        partitions.remove(&partition);
        if partitions.is_empty() {
            offsets.remove(topic);
        }
    }
}
