//! The target assignment: what every member should end up owning at the group epoch, computed
//! by the group's assignor when the group epoch has moved past the assignment epoch. Kafka's
//! `TargetAssignmentBuilder` and `maybeUpdateTargetAssignment`. Topics are resolved to ids
//! here; subscribed topics that do not exist are left out, and their members get nothing of
//! them until they are created.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::assignor::{self, GroupSpec, MemberSpec};
use super::member::{ConsumerMember, PartitionSet};
use super::Core;
use crate::group::topics::TopicImage;

/// The ids of the existing topics among `names`.
pub(crate) fn topic_ids(topics: &dyn TopicImage, names: &BTreeSet<String>) -> BTreeSet<Uuid> {
    names
        .iter()
        .filter_map(|n| topics.by_name(n))
        .map(|t| t.id)
        .collect()
}

/// The ids of the topics `member`'s subscription covers.
pub(crate) fn member_topic_ids(
    core: &Core,
    topics: &dyn TopicImage,
    member: &ConsumerMember,
) -> BTreeSet<Uuid> {
    topic_ids(topics, &core.member_topics(member))
}

/// Kafka's `ConsumerGroup.subscriptionType`: homogeneous when every member subscribes to the
/// same topic names and no regex, or when every member uses the same regex and nothing else.
pub(crate) fn is_homogeneous(core: &Core) -> bool {
    let members = core.members.len();
    let mut by_name: BTreeMap<&str, usize> = BTreeMap::new();
    for m in core.members.values() {
        for topic in &m.metadata.subscribed_topic_names {
            *by_name.entry(topic.as_str()).or_insert(0) += 1;
        }
    }
    let regexes = core.subscribed_regexes();
    let Some((regex, users)) = regexes.iter().next() else {
        return by_name.values().all(|count| *count == members);
    };
    if *users != members || !by_name.is_empty() {
        return false;
    }
    // Every resolved topic must come from that one regex only.
    let Some(resolved) = core.regexes.get(regex) else {
        return true;
    };
    resolved.topics.iter().all(|topic| {
        core.regexes
            .iter()
            .filter(|(r, res)| regexes.contains_key(*r) && res.topics.contains(topic))
            .count()
            == 1
    })
}

/// Computes the target assignment at `group_epoch` with `assignor` and stores it in `core`,
/// with the assignment epoch and when it was computed.
pub(crate) fn compute(
    core: &mut Core,
    group_epoch: i32,
    assignor: &str,
    topics: &dyn TopicImage,
    now_ms: i64,
) {
    let mut partition_counts: HashMap<Uuid, i32> = HashMap::new();
    let mut members = BTreeMap::new();
    for (member_id, member) in &core.members {
        let mut ids = BTreeSet::new();
        for name in core.member_topics(member) {
            if let Some(topic) = topics.by_name(&name) {
                partition_counts.insert(topic.id, topic.partitions);
                ids.insert(topic.id);
            }
        }
        let current = core.target.get(member_id).cloned().unwrap_or_default();
        members.insert(
            member_id.clone(),
            MemberSpec {
                instance_id: member.metadata.instance_id.clone(),
                topics: ids,
                current,
            },
        );
    }
    let spec = GroupSpec {
        members,
        homogeneous: is_homogeneous(core),
        partition_counts,
    };
    let mut result = assignor::assign(assignor, &spec);
    let target: BTreeMap<String, PartitionSet> = core
        .members
        .keys()
        .map(|id| {
            let mut assignment = result.remove(id).unwrap_or_default();
            assignment.retain(|_, partitions| !partitions.is_empty());
            (id.clone(), assignment)
        })
        .collect();
    tracing::debug!(
        group_epoch,
        assignor,
        ?target,
        "computed a new target assignment"
    );
    core.target = target;
    core.assignment_epoch = group_epoch;
    core.assignment_timestamp_ms = now_ms;
}
