//! Group membership in `__consumer_offsets`, as Kafka keeps it: a group-metadata record
//! (`group_record.rs`) is written when a rebalance completes (the leader's SyncGroup, before the
//! group turns Stable), when the group becomes Empty, and when a static member is replaced without
//! a rebalance; a tombstone when the group is deleted or dies with its last offset. At start-up
//! the last record of each group rebuilds it: Empty, or Stable with its members, generation,
//! protocol, leader and assignments (Kafka's `replay`); `rebalance::on_loaded` then starts their
//! sessions afresh. Parked requests, pending members and rebalances in progress are never stored: a
//! group caught mid-rebalance comes back as its last completed generation, and its members
//! rejoin.

use std::collections::HashMap;

use bytes::Bytes;
use kafka_protocol::ResponseError;

use super::consumer::{ConsumerGroup, Offsets};
use super::context::Ctx;
use super::group_record::{self, decode_group_metadata_value, GroupMetadataValue, MemberMetadata};
use super::records;
use super::state::{ClassicGroup, GroupState, Member, Protocol};

pub(crate) use super::context::{append, Record};

/// Kafka's `newGroupMetadataRecord`: the group as it stands, each member with the assignment
/// `assignment_of` gives it (the SyncGroup path passes the one it is about to hand out).
pub(crate) fn group_metadata_record(
    group: &ClassicGroup,
    assignment_of: &dyn Fn(&Member) -> Bytes,
) -> Result<Record, ResponseError> {
    let protocol_name = group.protocol_name.as_deref().unwrap_or_default();
    let members = group
        .members
        .iter()
        .map(|m| MemberMetadata {
            member_id: m.member_id.clone(),
            group_instance_id: m.group_instance_id.clone(),
            client_id: m.client_id.clone(),
            client_host: m.client_host.clone(),
            rebalance_timeout_ms: m.rebalance_timeout_ms,
            session_timeout_ms: m.session_timeout_ms,
            subscription: m.metadata(protocol_name),
            assignment: assignment_of(m),
        })
        .collect();
    let value = GroupMetadataValue {
        protocol_type: group.protocol_type.clone().unwrap_or_default(),
        generation: group.generation_id,
        protocol: group.protocol_name.clone(),
        leader: group.leader_id.clone(),
        current_state_timestamp_ms: group.state_since_ms.unwrap_or(-1),
        members,
    };
    // Only strings longer than an i16 length can fail, and ids that long never get this far.
    let encode_failed = |e: String| {
        tracing::warn!(group_id = %group.group_id, "cannot encode group metadata: {e}");
        ResponseError::UnknownServerError
    };
    let key = records::encode_group_metadata_key(&group.group_id).map_err(encode_failed)?;
    let value = group_record::encode_group_metadata_value(&value).map_err(encode_failed)?;
    Ok((key, Some(value)))
}

/// Stores the group with its current assignments.
pub(crate) fn store_group(group: &ClassicGroup, ctx: &Ctx) -> Result<(), ResponseError> {
    let record = group_metadata_record(group, &|m| m.assignment.clone())?;
    append(ctx.store, &group.group_id, vec![record])
}

/// The group just became Empty. As in Kafka, a failure is only logged: if the broker restarts
/// before the next write, the last stored generation comes back and its sessions expire.
pub(crate) fn store_empty_group(group: &ClassicGroup, ctx: &Ctx) {
    if let Err(error) = store_group(group, ctx) {
        tracing::warn!(group_id = %group.group_id, ?error, "cannot store that the group is empty");
    }
}

/// The group state rebuilt from `__consumer_offsets`, before it is served. Committed offsets
/// are kept apart while replaying (a group may change protocol, and be deleted and recreated,
/// under its offsets) and go to whichever group holds the id at the end.
#[derive(Default)]
pub(crate) struct Replay {
    pub groups: HashMap<String, ClassicGroup>,
    pub consumer_groups: HashMap<String, ConsumerGroup>,
    pub offsets: HashMap<String, Offsets>,
    /// Groups whose last group-metadata record is not a tombstone: they exist even without
    /// offsets.
    pub with_metadata: std::collections::HashSet<String>,
    /// Offsets of transactions whose marker has not been replayed yet.
    pub pending: super::txn_offsets::PendingTxnOffsets,
}

impl Replay {
    /// A record of a producer's transactional batch: an offset commit pending until the
    /// transaction's marker (other record types never come in transactions).
    pub(crate) fn pending_offset(
        &mut self,
        producer_id: i64,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> Result<(), String> {
        let records::RecordKey::OffsetCommit {
            group_id,
            topic,
            partition,
        } = records::decode_key(key)?
        else {
            return Ok(());
        };
        let Some(value) = value else {
            return Ok(());
        };
        let value = records::decode_offset_commit_value(value)?;
        let offset = super::state::CommittedOffset {
            offset: value.offset,
            leader_epoch: value.leader_epoch,
            metadata: value.metadata,
            commit_timestamp_ms: value.commit_timestamp_ms,
            expire_timestamp_ms: value.expire_timestamp_ms,
        };
        self.groups
            .entry(group_id.clone())
            .or_insert_with(|| ClassicGroup::new(&group_id, None));
        self.pending
            .entry(producer_id)
            .or_default()
            .entry(group_id)
            .or_default()
            .insert((topic, partition), offset);
        Ok(())
    }

    /// A transaction marker in the group's offsets partition: a commit makes the producer's
    /// pending offsets of the groups `in_partition` selects committed, in log order with the
    /// plain commits; an abort drops them.
    pub(crate) fn marker(
        &mut self,
        producer_id: i64,
        commit: bool,
        in_partition: impl Fn(&str) -> bool,
    ) {
        let ended =
            super::txn_offsets::take_ended(&mut self.pending, producer_id, commit, in_partition);
        for (group_id, offsets) in ended {
            super::txn_offsets::commit_into(self.offsets.entry(group_id).or_default(), offsets);
        }
    }

    /// Applies a group-metadata record (Kafka's `replay(GroupMetadataKey, GroupMetadataValue)`).
    /// The group's committed offsets are kept either way: they have records of their own.
    pub(crate) fn group_metadata(
        &mut self,
        group_id: &str,
        value: Option<&[u8]>,
    ) -> Result<(), String> {
        self.groups.remove(group_id);
        if value.is_some() {
            self.consumer_groups.remove(group_id);
        }
        let group = match value {
            Some(value) => {
                self.with_metadata.insert(group_id.to_string());
                restore_group(group_id, decode_group_metadata_value(value)?)
            }
            None => {
                self.with_metadata.remove(group_id);
                ClassicGroup::new(group_id, None)
            }
        };
        self.groups.insert(group_id.to_string(), group);
        Ok(())
    }

    /// The groups to serve: consumer groups, and classic groups with offsets or live metadata.
    /// Offsets go to the group of their id (a classic group without metadata is made for
    /// offsets that have no group). Classic groups whose offsets were all deleted and whose
    /// metadata is gone leave no trace, as after a compaction.
    pub(crate) fn finish(
        mut self,
    ) -> (
        HashMap<String, ClassicGroup>,
        HashMap<String, ConsumerGroup>,
    ) {
        for (group_id, offsets) in self.offsets {
            if offsets.is_empty() {
                continue;
            }
            if let Some(group) = self.consumer_groups.get_mut(&group_id) {
                group.offsets = offsets;
                continue;
            }
            self.groups
                .entry(group_id.clone())
                .or_insert_with(|| ClassicGroup::new(&group_id, None))
                .offsets = offsets;
        }
        let with_metadata = self.with_metadata;
        let consumer_groups = self.consumer_groups;
        self.groups.retain(|id, group| {
            !consumer_groups.contains_key(id) && (group.has_offsets() || with_metadata.contains(id))
        });
        (self.groups, consumer_groups)
    }
}

/// A group as its record describes it: Empty without members, otherwise Stable. Each member's
/// only protocol is the group's, with its stored subscription, as in Kafka.
fn restore_group(group_id: &str, value: GroupMetadataValue) -> ClassicGroup {
    let state_since_ms = Some(value.current_state_timestamp_ms).filter(|t| *t != -1);
    let mut group = ClassicGroup::new(group_id, state_since_ms);
    group.generation_id = value.generation;
    group.protocol_type = Some(value.protocol_type).filter(|t| !t.is_empty());
    group.protocol_name = value.protocol;
    group.leader_id = value.leader;
    let protocol_type = group.protocol_type.clone().unwrap_or_default();
    let protocol_name = group.protocol_name.clone().unwrap_or_default();
    for m in value.members {
        group.members.push(Member {
            member_id: m.member_id,
            group_instance_id: m.group_instance_id,
            client_id: m.client_id,
            client_host: m.client_host,
            // Version 0 records have no rebalance timeout; Kafka uses the session timeout.
            rebalance_timeout_ms: if m.rebalance_timeout_ms == -1 {
                m.session_timeout_ms
            } else {
                m.rebalance_timeout_ms
            },
            session_timeout_ms: m.session_timeout_ms,
            protocol_type: protocol_type.clone(),
            protocols: vec![Protocol {
                name: protocol_name.clone(),
                metadata: m.subscription,
            }],
            assignment: m.assignment,
            join_waiter: None,
            sync_waiter: None,
            is_new: false,
            heartbeat_deadline_ms: i64::MAX,
        });
    }
    if !group.members.is_empty() {
        group.state = GroupState::Stable;
        group.previous_state = GroupState::Stable;
        if group.leader_id.is_none() {
            group.leader_id = group.members.first().map(|m| m.member_id.clone());
        }
    }
    group.subscribed_topics = group.compute_subscribed_topics();
    group
}
