//! The records that describe a change to a consumer group, derived by comparing the group's
//! state before and after it, in the order Kafka writes them (so that replaying them, here or
//! by Kafka, rebuilds the same group): a leaving member's current assignment, target
//! assignment and metadata tombstones; new or changed member metadata; regular expressions;
//! the group epoch; target assignments and their metadata; current assignments. And the
//! tombstones that delete a whole group, in Kafka's order (`createGroupTombstoneRecords`).

use bytes::Bytes;

use super::records::{self, *};
use super::Core;
use crate::group::context::Record;

fn tombstone(record_type: i16, group_id: &str, second: Option<&str>) -> Result<Record, String> {
    Ok((records::key(record_type, group_id, second)?, None))
}

fn record(
    record_type: i16,
    group_id: &str,
    second: Option<&str>,
    value: Bytes,
) -> Result<Record, String> {
    Ok((records::key(record_type, group_id, second)?, Some(value)))
}

/// The records that turn `old` into `new`. `legacy_metadata` says that a pre-4.1
/// subscription-metadata record exists, which goes with the next group-epoch change.
pub(crate) fn diff(
    group_id: &str,
    old: &Core,
    new: &Core,
    legacy_metadata: bool,
) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    for member_id in old
        .members
        .keys()
        .filter(|id| !new.members.contains_key(*id))
    {
        out.push(tombstone(CURRENT_ASSIGNMENT, group_id, Some(member_id))?);
        out.push(tombstone(TARGET_MEMBER, group_id, Some(member_id))?);
        out.push(tombstone(MEMBER_METADATA, group_id, Some(member_id))?);
    }
    for (member_id, member) in &new.members {
        if old.members.get(member_id).map(|m| &m.metadata) != Some(&member.metadata) {
            let value = member_metadata_value(&member.metadata)?;
            out.push(record(MEMBER_METADATA, group_id, Some(member_id), value)?);
        }
    }
    for regex in old.regexes.keys().filter(|r| !new.regexes.contains_key(*r)) {
        out.push(tombstone(REGULAR_EXPRESSION, group_id, Some(regex))?);
    }
    for (regex, resolved) in &new.regexes {
        if old.regexes.get(regex) != Some(resolved) {
            out.push(record(
                REGULAR_EXPRESSION,
                group_id,
                Some(regex),
                regex_value(resolved)?,
            )?);
        }
    }
    if old.group_epoch != new.group_epoch || old.metadata_hash != new.metadata_hash {
        if legacy_metadata {
            out.push(tombstone(PARTITION_METADATA, group_id, None)?);
        }
        let value = group_epoch_value(new.group_epoch, new.metadata_hash);
        out.push(record(GROUP_EPOCH, group_id, None, value)?);
    }
    for (member_id, target) in &new.target {
        if old.target.get(member_id) != Some(target) || !old.members.contains_key(member_id) {
            let value = target_member_value(target)?;
            out.push(record(TARGET_MEMBER, group_id, Some(member_id), value)?);
        }
    }
    if old.assignment_epoch != new.assignment_epoch
        || old.assignment_timestamp_ms != new.assignment_timestamp_ms
    {
        let value = target_metadata_value(new.assignment_epoch, new.assignment_timestamp_ms);
        out.push(record(TARGET_METADATA, group_id, None, value)?);
    }
    for (member_id, member) in &new.members {
        if old.members.get(member_id).map(|m| &m.assignment) != Some(&member.assignment) {
            let value = current_assignment_value(&member.assignment)?;
            out.push(record(
                CURRENT_ASSIGNMENT,
                group_id,
                Some(member_id),
                value,
            )?);
        }
    }
    Ok(out)
}

/// Every record that deletes `core`'s group, in Kafka's order.
pub(crate) fn group_tombstones(group_id: &str, core: &Core) -> Result<Vec<Record>, String> {
    let mut out = Vec::new();
    for member_id in core.members.keys() {
        out.push(tombstone(CURRENT_ASSIGNMENT, group_id, Some(member_id))?);
    }
    for member_id in core.members.keys() {
        out.push(tombstone(TARGET_MEMBER, group_id, Some(member_id))?);
    }
    out.push(tombstone(TARGET_METADATA, group_id, None)?);
    for member_id in core.members.keys() {
        out.push(tombstone(MEMBER_METADATA, group_id, Some(member_id))?);
    }
    for regex in core.regexes.keys() {
        out.push(tombstone(REGULAR_EXPRESSION, group_id, Some(regex))?);
    }
    out.push(tombstone(PARTITION_METADATA, group_id, None)?);
    out.push(tombstone(GROUP_EPOCH, group_id, None)?);
    Ok(out)
}
