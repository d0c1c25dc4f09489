//! The steps every change to a consumer group goes through, on a copy of its state: move the
//! group epoch when what the assignor sees changed (subscriptions, resolved regular expressions,
//! the preferred assignor, the subscribed topics' metadata), compute a new target assignment
//! when the group epoch is ahead of it and `group.consumer.assignment.interval.ms` has passed
//! since the last one (Kafka's `canComputeNextTargetAssignment`), and reconcile one member.

use super::member::ConsumerMember;
use super::reconcile::{Owned, Reconcile};
use super::request::{GroupError, Step};
use super::{target, ConsumerGroup, Core};
use kafka_protocol::ResponseError;

impl Step<'_> {
    /// The assignor the group uses: the one most members ask for, else the broker's default.
    pub(crate) fn assignor(&self, core: &Core) -> String {
        core.preferred_assignor()
            .unwrap_or_else(|| self.ctx.config.default_assignor().to_string())
    }

    /// Moves the group epoch (with the metadata hash) when `subscription_bump` says the
    /// subscriptions changed, when the preferred assignor changed since `before`, or when the
    /// subscribed topics' metadata did.
    pub(crate) fn bump_if_needed(
        &self,
        core: &mut Core,
        before: &Core,
        subscription_bump: bool,
        member_id: &str,
    ) {
        let hash = core.compute_metadata_hash(self.topics);
        let assignor_changed = self.assignor(before) != self.assignor(core);
        if subscription_bump || assignor_changed || hash != core.metadata_hash {
            core.group_epoch += 1;
            core.metadata_hash = hash;
            tracing::info!(
                group_id = self.group_id,
                member_id,
                group_epoch = core.group_epoch,
                "bumped the group epoch"
            );
        }
    }

    /// Kafka's `maybeUpdateTargetAssignment`.
    pub(crate) fn maybe_compute_target(&self, core: &mut Core, group: &ConsumerGroup) {
        if core.assignment_epoch >= core.group_epoch {
            return;
        }
        let interval_ms = i64::from(self.ctx.consumer_assignment_interval_ms(self.group_id));
        let last_ms = core.assignment_timestamp_ms;
        let due = last_ms == 0 || interval_ms == 0 || self.ctx.now_ms >= last_ms + interval_ms;
        if !due {
            return;
        }
        let assignor = self.assignor(core);
        let epoch = core.group_epoch;
        target::compute(core, epoch, &assignor, self.topics, self.ctx.now_ms);
        tracing::info!(group_id = %group.group_id, epoch, assignor, "computed a new target assignment");
    }

    /// One reconciliation step of `member_id` toward its target (Kafka's `maybeReconcile`).
    pub(crate) fn reconcile(
        &self,
        core: &mut Core,
        member_id: &str,
        subscription_changed: bool,
        owned: &Owned,
    ) -> Result<ConsumerMember, GroupError> {
        let Some(member) = core.members.get(member_id) else {
            return Err(GroupError::bare(ResponseError::UnknownMemberId));
        };
        if !subscription_changed && member.is_reconciled_to(core.assignment_epoch) {
            return Ok(member.clone());
        }
        let empty = Default::default();
        let target = core.target.get(member_id).unwrap_or(&empty);
        let ids = target::member_topic_ids(core, self.topics, member);
        let epochs = core.partition_epochs();
        let step = Reconcile {
            target_epoch: core.assignment_epoch,
            target,
            subscription_changed,
            subscribed_topic_ids: &ids,
            partition_epochs: &epochs,
            owned,
        };
        let next = step.next(member).map_err(|_| {
            GroupError::new(
                ResponseError::FencedMemberEpoch,
                "The consumer group member is in a unknown state. The member must abandon all its partitions and rejoin.",
            )
        })?;
        core.members.insert(member_id.to_string(), next.clone());
        Ok(next)
    }
}
