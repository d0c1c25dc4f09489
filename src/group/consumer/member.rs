//! One member of a KIP-848 consumer group: what it subscribes to (Kafka's member metadata
//! record), and where its reconciliation stands (its current-assignment record): member epoch,
//! previous epoch, state, the partitions it owns with the epoch each was assigned at (KIP-1251),
//! and the partitions it still has to revoke. Kafka's `ConsumerGroupMember`. Plain data: the
//! rules that move a member are in `reconcile.rs` and `heartbeat.rs`.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;
use uuid::Uuid;

/// Partitions by topic id, each with the member epoch at which it was assigned.
pub(crate) type PartitionEpochs = BTreeMap<Uuid, BTreeMap<i32, i32>>;
/// Partitions by topic id.
pub(crate) type PartitionSet = BTreeMap<Uuid, BTreeSet<i32>>;

/// Kafka's `MemberState`, stored as an int8 in the current-assignment record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MemberState {
    /// Owns its target assignment (or everything it may have of it) at the assignment epoch.
    Stable,
    /// Must first give up partitions it still owns; nothing new is given to it until then.
    UnrevokedPartitions,
    /// Waits for partitions that other members are still revoking.
    UnreleasedPartitions,
    /// Restored from a record whose state this broker does not know.
    Unknown,
}

impl MemberState {
    pub(crate) fn value(self) -> i8 {
        match self {
            MemberState::Stable => 0,
            MemberState::UnrevokedPartitions => 1,
            MemberState::UnreleasedPartitions => 2,
            MemberState::Unknown => 127,
        }
    }

    pub(crate) fn from_value(value: i8) -> MemberState {
        match value {
            0 => MemberState::Stable,
            1 => MemberState::UnrevokedPartitions,
            2 => MemberState::UnreleasedPartitions,
            _ => MemberState::Unknown,
        }
    }
}

/// One protocol a classic-protocol member supports (JoinGroup's name and metadata).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClassicProtocol {
    pub name: String,
    pub metadata: Bytes,
}

/// What a member that speaks the classic protocol inside a consumer group keeps: Kafka's
/// `ClassicMemberMetadata` (session timeout and supported protocols).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ClassicMemberMetadata {
    pub session_timeout_ms: i32,
    pub protocols: Vec<ClassicProtocol>,
}

/// The member's subscription and identity: the member metadata record.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub(crate) struct MemberMetadata {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: BTreeSet<String>,
    /// Empty when the member subscribes by name only.
    pub subscribed_topic_regex: String,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    pub classic: Option<ClassicMemberMetadata>,
}

/// The member's reconciliation: the current-assignment record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MemberAssignment {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: PartitionEpochs,
    pub pending_revocation: PartitionEpochs,
}

impl Default for MemberAssignment {
    fn default() -> MemberAssignment {
        MemberAssignment {
            member_epoch: 0,
            previous_member_epoch: -1,
            state: MemberState::Stable,
            assigned: PartitionEpochs::new(),
            pending_revocation: PartitionEpochs::new(),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ConsumerMember {
    pub member_id: String,
    pub metadata: MemberMetadata,
    pub assignment: MemberAssignment,
}

impl ConsumerMember {
    pub(crate) fn new(member_id: &str) -> ConsumerMember {
        ConsumerMember {
            member_id: member_id.to_string(),
            metadata: MemberMetadata {
                rebalance_timeout_ms: -1,
                ..MemberMetadata::default()
            },
            assignment: MemberAssignment::default(),
        }
    }

    pub(crate) fn epoch(&self) -> i32 {
        self.assignment.member_epoch
    }

    pub(crate) fn uses_classic_protocol(&self) -> bool {
        self.metadata.classic.is_some()
    }

    /// Kafka's `isReconciledTo`: stable at the given assignment epoch.
    pub(crate) fn is_reconciled_to(&self, assignment_epoch: i32) -> bool {
        self.assignment.state == MemberState::Stable && self.epoch() == assignment_epoch
    }

    /// The regex the member subscribes with, if any.
    pub(crate) fn regex(&self) -> Option<&str> {
        Some(self.metadata.subscribed_topic_regex.as_str()).filter(|r| !r.is_empty())
    }

    /// The epoch at which the member was given `partition` of `topic_id`, if it owns it or is
    /// revoking it (KIP-1251's commit check).
    pub(crate) fn assignment_epoch_of(&self, topic_id: Uuid, partition: i32) -> Option<i32> {
        let lookup = |map: &PartitionEpochs| map.get(&topic_id)?.get(&partition).copied();
        lookup(&self.assignment.assigned).or_else(|| lookup(&self.assignment.pending_revocation))
    }
}

/// The partitions of `epochs`, without their epochs.
pub(crate) fn partition_set(epochs: &PartitionEpochs) -> PartitionSet {
    epochs
        .iter()
        .map(|(topic, partitions)| (*topic, partitions.keys().copied().collect()))
        .collect()
}
