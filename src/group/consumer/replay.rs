//! Rebuilding consumer groups from `__consumer_offsets` at start-up (Kafka's `replay` of the
//! consumer-group records): later records win and tombstones delete, record by record, so a
//! group comes back exactly as its last stored change left it, members at their epochs with
//! their current and target assignments. `on_loaded` then starts every member's session afresh
//! (a member that keeps heartbeating carries on at its epoch; the others are fenced one session
//! later), and the rebalance timer of each member that still owes a revocation.

use std::collections::HashMap;

use super::member::{ConsumerMember, MemberAssignment, MemberState, PartitionEpochs};
use super::records::{self, *};
use super::{fence, ConsumerGroup};
use crate::group::context::Ctx;

/// Applies one consumer-group record. `remove_classic` is told when a record creates a consumer
/// group whose id a classic group (from offsets only, as Kafka's "simple" group) holds.
pub(crate) fn apply(
    groups: &mut HashMap<String, ConsumerGroup>,
    key: &[u8],
    value: Option<&[u8]>,
    remove_classic: &mut dyn FnMut(&str),
) -> Result<(), String> {
    let key = records::decode_key(key)?;
    let group_id = key.group_id.as_str();
    let Some(value) = value else {
        return apply_tombstone(groups, &key);
    };
    if !groups.contains_key(group_id) {
        remove_classic(group_id);
        groups.insert(group_id.to_string(), ConsumerGroup::new(group_id));
    }
    let Some(group) = groups.get_mut(group_id) else {
        return Ok(());
    };
    let core = &mut group.core;
    let second = key.second.clone().unwrap_or_default();
    match key.record_type {
        GROUP_EPOCH => (core.group_epoch, core.metadata_hash) = decode_group_epoch(value)?,
        PARTITION_METADATA => group.has_partition_metadata_record = true,
        MEMBER_METADATA => {
            let metadata = decode_member_metadata(value)?;
            core.members
                .entry(second.clone())
                .or_insert_with(|| ConsumerMember::new(&second))
                .metadata = metadata;
        }
        TARGET_METADATA => {
            (core.assignment_epoch, core.assignment_timestamp_ms) = decode_target_metadata(value)?
        }
        TARGET_MEMBER => {
            core.target.insert(second, decode_target_member(value)?);
        }
        CURRENT_ASSIGNMENT => {
            let assignment = decode_current_assignment(value)?;
            core.members
                .entry(second.clone())
                .or_insert_with(|| ConsumerMember::new(&second))
                .assignment = assignment;
        }
        REGULAR_EXPRESSION => {
            core.regexes.insert(second, decode_regex(value)?);
        }
        other => tracing::debug!(record_type = other, "skipping a consumer group record"),
    }
    Ok(())
}

fn apply_tombstone(
    groups: &mut HashMap<String, ConsumerGroup>,
    key: &ConsumerKey,
) -> Result<(), String> {
    let Some(group) = groups.get_mut(&key.group_id) else {
        return Ok(());
    };
    let second = key.second.as_deref().unwrap_or_default();
    let core = &mut group.core;
    match key.record_type {
        GROUP_EPOCH => {
            groups.remove(&key.group_id);
        }
        PARTITION_METADATA => group.has_partition_metadata_record = false,
        MEMBER_METADATA => {
            core.members.remove(second);
        }
        TARGET_METADATA => {
            core.assignment_epoch = -1;
            core.assignment_timestamp_ms = 0;
        }
        TARGET_MEMBER => {
            core.target.remove(second);
        }
        CURRENT_ASSIGNMENT => {
            if let Some(member) = core.members.get_mut(second) {
                member.assignment = MemberAssignment {
                    member_epoch: -1,
                    previous_member_epoch: -1,
                    state: member.assignment.state,
                    assigned: PartitionEpochs::new(),
                    pending_revocation: PartitionEpochs::new(),
                };
            }
        }
        REGULAR_EXPRESSION => {
            core.regexes.remove(second);
        }
        _ => {}
    }
    Ok(())
}

/// Kafka's `onLoaded` for a consumer group: sessions start now; a member that owes a
/// revocation has its rebalance timeout counted from now too.
pub(crate) fn on_loaded(group: &mut ConsumerGroup, ctx: &Ctx) {
    if group.core.members.is_empty() {
        return;
    }
    tracing::info!(
        group_id = %group.group_id,
        members = group.core.members.len(),
        group_epoch = group.core.group_epoch,
        "loaded consumer group"
    );
    let members: Vec<(String, bool)> = group
        .core
        .members
        .values()
        .map(|m| {
            (
                m.member_id.clone(),
                m.assignment.state == MemberState::UnrevokedPartitions,
            )
        })
        .collect();
    for (member_id, _) in members {
        let classic = group
            .core
            .members
            .get(&member_id)
            .is_some_and(ConsumerMember::uses_classic_protocol);
        fence::after_step(group, ctx, &member_id, classic);
    }
}
