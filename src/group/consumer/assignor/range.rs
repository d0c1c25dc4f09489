//! The `range` assignor (Kafka's server-side `RangeAssignor`): members in order (static
//! members by instance id first, then the others by member id), and for each topic every
//! member of its subscribers gets a contiguous range, the first `partitions % subscribers`
//! members one partition more. Members subscribed to the same topics with the same partition
//! counts therefore get the same partition numbers of each (co-partitioning).

use std::collections::{BTreeMap, HashMap};

use uuid::Uuid;

use super::{GroupSpec, MemberSpec};
use crate::group::consumer::member::PartitionSet;

struct Ranges {
    partitions: i32,
    subscribers: i32,
    quota: i32,
    extra: i32,
    next: i32,
}

pub(super) fn assign(spec: &GroupSpec) -> BTreeMap<String, PartitionSet> {
    let mut members: Vec<(&String, &MemberSpec)> = spec.members.iter().collect();
    members.sort_by(
        |(a_id, a), (b_id, b)| match (&a.instance_id, &b.instance_id) {
            (Some(x), Some(y)) => x.cmp(y),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => a_id.cmp(b_id),
        },
    );
    let mut topics: HashMap<Uuid, Ranges> = HashMap::new();
    for (_, member) in &members {
        for topic in &member.topics {
            let Some(partitions) = spec.partition_counts.get(topic).copied() else {
                continue;
            };
            topics
                .entry(*topic)
                .or_insert(Ranges {
                    partitions,
                    subscribers: 0,
                    quota: -1,
                    extra: -1,
                    next: 0,
                })
                .subscribers += 1;
        }
    }
    let mut result = BTreeMap::new();
    for (member_id, member) in members {
        let mut assignment = PartitionSet::new();
        for topic in &member.topics {
            let Some(ranges) = topics.get_mut(topic) else {
                continue;
            };
            if ranges.quota == -1 {
                ranges.quota = ranges.partitions / ranges.subscribers;
                ranges.extra = ranges.partitions % ranges.subscribers;
            }
            let mut quota = ranges.quota;
            if ranges.extra > 0 {
                quota += 1;
                ranges.extra -= 1;
            }
            let start = ranges.next;
            let end = (start + quota).min(ranges.partitions);
            ranges.next = end;
            if start < end {
                assignment.insert(*topic, (start..end).collect());
            }
        }
        result.insert(member_id.clone(), assignment);
    }
    result
}
