//! One member's next assignment, from its current one and its target: Kafka's
//! `CurrentAssignmentBuilder`. Partitions leave before new ones arrive: a member that must
//! revoke keeps only what stays, at its current epoch, until its heartbeat no longer reports the
//! revoked partitions; only then does it move to the assignment epoch with its new partitions,
//! minus any that another member still owns (those wait, "unreleased"). Each partition keeps the
//! epoch at which it was assigned (KIP-1251), which the offset-commit check reads.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::member::{ConsumerMember, MemberState, PartitionEpochs, PartitionSet};

/// The partitions a heartbeat says the member owns: None when the field was null ("unchanged").
pub(crate) type Owned = Option<Vec<(Uuid, Vec<i32>)>>;

/// The member cannot be reconciled from where it is (a restored member in an unknown state
/// that still reports partitions): it is fenced and must rejoin.
#[derive(Debug)]
pub(crate) struct UnknownState;

/// What one reconciliation step looks at.
pub(crate) struct Reconcile<'a> {
    pub target_epoch: i32,
    pub target: &'a PartitionSet,
    pub subscription_changed: bool,
    /// The ids of the topics the member's subscription covers (unknown topics left out).
    pub subscribed_topic_ids: &'a BTreeSet<Uuid>,
    /// Who owns each partition now, at which epoch (absent: free).
    pub partition_epochs: &'a HashMap<(Uuid, i32), i32>,
    pub owned: &'a Owned,
}

impl Reconcile<'_> {
    /// Kafka's `build`: the member after this step (unchanged if nothing moves).
    pub(crate) fn next(&self, member: &ConsumerMember) -> Result<ConsumerMember, UnknownState> {
        let a = &member.assignment;
        match a.state {
            MemberState::Stable if a.member_epoch != self.target_epoch => {
                Ok(self.compute_next(member, a.member_epoch))
            }
            MemberState::Stable if self.subscription_changed => {
                Ok(self.update_current(member, a.member_epoch))
            }
            MemberState::Stable => Ok(member.clone()),
            MemberState::UnrevokedPartitions => {
                if self.owns_any(&a.pending_revocation) {
                    if self.subscription_changed {
                        return Ok(self.update_current(member, a.member_epoch));
                    }
                    return Ok(member.clone());
                }
                Ok(self.compute_next(member, a.member_epoch))
            }
            MemberState::UnreleasedPartitions => Ok(self.compute_next(member, a.member_epoch)),
            MemberState::Unknown => match self.owned {
                Some(owned) if owned.is_empty() => Ok(self.compute_next(member, self.target_epoch)),
                _ => Err(UnknownState),
            },
        }
    }

    /// Whether the heartbeat still reports any of `partitions`; a null list counts as "yes".
    fn owns_any(&self, partitions: &PartitionEpochs) -> bool {
        let Some(owned) = self.owned else {
            return true;
        };
        owned.iter().any(|(topic, ps)| {
            partitions
                .get(topic)
                .is_some_and(|pending| ps.iter().any(|p| pending.contains_key(p)))
        })
    }

    /// The member's subscription changed while it is at the assignment epoch: partitions of
    /// topics it no longer subscribes to are revoked right away.
    fn update_current(&self, member: &ConsumerMember, epoch: i32) -> ConsumerMember {
        let a = &member.assignment;
        let mut assigned = a.assigned.clone();
        let mut pending = a.pending_revocation.clone();
        if self.subscribed_topic_ids.is_empty() && a.pending_revocation.is_empty() {
            pending = a.assigned.clone();
            assigned.clear();
        } else {
            for (topic, partitions) in &a.assigned {
                if !self.subscribed_topic_ids.contains(topic) {
                    assigned.remove(topic);
                    pending
                        .entry(*topic)
                        .or_default()
                        .extend(partitions.iter().map(|(p, e)| (*p, *e)));
                }
            }
        }
        if assigned == a.assigned {
            return member.clone();
        }
        let mut next = member.clone();
        set_epoch(&mut next, epoch);
        next.assignment.assigned = assigned;
        if !pending.is_empty() && self.owns_any(&pending) {
            next.assignment.state = MemberState::UnrevokedPartitions;
            next.assignment.pending_revocation = pending;
        }
        next
    }

    /// Kafka's `computeNextAssignment`.
    fn compute_next(&self, member: &ConsumerMember, epoch: i32) -> ConsumerMember {
        let a = &member.assignment;
        let mut has_unreleased = false;
        let mut assigned = PartitionEpochs::new();
        let mut revoking = PartitionEpochs::new();
        let mut to_assign: BTreeMap<Uuid, BTreeSet<i32>> = BTreeMap::new();
        let topics: BTreeSet<Uuid> = self
            .target
            .keys()
            .chain(a.assigned.keys())
            .copied()
            .collect();
        let empty = BTreeSet::new();
        for topic in topics {
            let target = match self.subscribed_topic_ids.contains(&topic) {
                true => self.target.get(&topic).unwrap_or(&empty),
                false => &empty,
            };
            let current = a.assigned.get(&topic);
            let keep: BTreeMap<i32, i32> = current
                .into_iter()
                .flatten()
                .filter(|(p, _)| target.contains(p))
                .map(|(p, e)| (*p, *e))
                .collect();
            let revoke: BTreeMap<i32, i32> = current
                .into_iter()
                .flatten()
                .filter(|(p, _)| !keep.contains_key(p))
                .map(|(p, e)| (*p, *e))
                .collect();
            let own_pending = a.pending_revocation.get(&topic);
            let mut add = BTreeSet::new();
            for p in target.iter().filter(|p| !keep.contains_key(p)) {
                let taken = self.partition_epochs.contains_key(&(topic, *p));
                let mine = own_pending.is_some_and(|m| m.contains_key(p));
                if taken && !mine {
                    has_unreleased = true;
                } else {
                    add.insert(*p);
                }
            }
            if !keep.is_empty() {
                assigned.insert(topic, keep);
            }
            if !revoke.is_empty() {
                revoking.insert(topic, revoke);
            }
            if !add.is_empty() {
                to_assign.insert(topic, add);
            }
        }
        let mut next = member.clone();
        if !revoking.is_empty() && self.owns_any(&revoking) {
            set_epoch(&mut next, epoch);
            next.assignment.state = MemberState::UnrevokedPartitions;
            next.assignment.assigned = assigned;
            next.assignment.pending_revocation = revoking;
            return next;
        }
        for (topic, partitions) in to_assign {
            let entry = assigned.entry(topic).or_default();
            for p in partitions {
                entry.insert(p, self.target_epoch);
            }
        }
        set_epoch(&mut next, self.target_epoch);
        next.assignment.state = match has_unreleased {
            true => MemberState::UnreleasedPartitions,
            false => MemberState::Stable,
        };
        next.assignment.assigned = assigned;
        next.assignment.pending_revocation = PartitionEpochs::new();
        next
    }
}

/// Kafka's `updateMemberEpoch`: the old epoch becomes the previous one.
fn set_epoch(member: &mut ConsumerMember, epoch: i32) {
    member.assignment.previous_member_epoch = member.assignment.member_epoch;
    member.assignment.member_epoch = epoch;
}
