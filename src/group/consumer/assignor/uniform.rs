//! The `uniform` assignor (Kafka's `UniformAssignor`): spreads the partitions as evenly as
//! possible over the members while moving as few as possible from one member to another.
//!
//! When every member subscribes to the same topics (homogeneous), this is Kafka's algorithm:
//! each member keeps up to its quota (total / members, one more for the first `total % members`
//! members that already hold that many) of what it has, and the freed and unassigned partitions
//! fill the members below quota. Otherwise (heterogeneous), each member keeps what it holds of
//! the topics it still subscribes to, each free partition goes to the least-loaded subscriber of
//! its topic (topics with the fewest subscribers first), and partitions then move from the most
//! to the least loaded subscriber while that narrows the gap: balanced and sticky as Kafka's
//! heterogeneous builder is, though not always the same choice of partitions.

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use super::GroupSpec;
use crate::group::consumer::member::PartitionSet;

pub(super) fn assign(spec: &GroupSpec) -> BTreeMap<String, PartitionSet> {
    if spec.homogeneous {
        homogeneous(spec)
    } else {
        heterogeneous(spec)
    }
}

fn homogeneous(spec: &GroupSpec) -> BTreeMap<String, PartitionSet> {
    let Some(first) = spec.members.values().next() else {
        return BTreeMap::new();
    };
    let topics: BTreeSet<Uuid> = first
        .topics
        .iter()
        .filter(|t| spec.partition_counts.contains_key(t))
        .copied()
        .collect();
    if topics.is_empty() {
        return spec
            .members
            .keys()
            .map(|m| (m.clone(), PartitionSet::new()))
            .collect();
    }
    let owners = spec.inverted();
    let mut unassigned: Vec<(Uuid, i32)> = Vec::new();
    let mut total = 0;
    for topic in &topics {
        let count = spec.partition_counts[topic];
        for p in 0..count {
            if !owners.contains_key(&(*topic, p)) {
                unassigned.push((*topic, p));
            }
        }
        total += count;
    }
    let member_count = spec.members.len() as i32;
    let min_quota = total / member_count;
    let mut extra_left = total % member_count;
    let mut result = BTreeMap::new();
    let mut unfilled: Vec<(String, i32)> = Vec::new();
    for (index, (member_id, member)) in spec.members.iter().enumerate() {
        let mut quota = min_quota;
        let mut has_extra = false;
        if extra_left > 0 {
            quota += 1;
            has_extra = true;
        }
        let mut kept = PartitionSet::new();
        for (topic, partitions) in &member.current {
            if !topics.contains(topic) {
                continue;
            }
            for p in partitions {
                if quota > 0 && *p < spec.partition_counts[topic] {
                    quota -= 1;
                    kept.entry(*topic).or_default().insert(*p);
                } else if *p < spec.partition_counts[topic] {
                    unassigned.push((*topic, *p));
                }
            }
        }
        let remaining_members = member_count - index as i32;
        if quota > 0 && has_extra && remaining_members > extra_left {
            quota -= 1;
            has_extra = false;
        }
        if quota > 0 {
            unfilled.push((member_id.clone(), quota));
        }
        if has_extra {
            extra_left -= 1;
        }
        result.insert(member_id.clone(), kept);
    }
    let mut next = 0;
    for (member_id, quota) in unfilled {
        let Some(assignment) = result.get_mut(&member_id) else {
            continue;
        };
        for _ in 0..quota {
            let Some((topic, p)) = unassigned.get(next) else {
                break;
            };
            next += 1;
            assignment.entry(*topic).or_default().insert(*p);
        }
    }
    result
}

fn heterogeneous(spec: &GroupSpec) -> BTreeMap<String, PartitionSet> {
    let mut result: BTreeMap<String, PartitionSet> = BTreeMap::new();
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    let mut load: BTreeMap<String, usize> = BTreeMap::new();
    // Sticky: what each member holds of the topics it still subscribes to, each partition once.
    for (member_id, member) in &spec.members {
        let mut kept = PartitionSet::new();
        for (topic, partitions) in &member.current {
            let Some(count) = spec.partition_counts.get(topic) else {
                continue;
            };
            if !member.topics.contains(topic) {
                continue;
            }
            for p in partitions.iter().filter(|p| **p < *count) {
                if taken.insert((*topic, *p)) {
                    kept.entry(*topic).or_default().insert(*p);
                }
            }
        }
        load.insert(member_id.clone(), kept.values().map(BTreeSet::len).sum());
        result.insert(member_id.clone(), kept);
    }
    let mut subscribers: BTreeMap<Uuid, Vec<&String>> = BTreeMap::new();
    for (member_id, member) in &spec.members {
        for topic in member
            .topics
            .iter()
            .filter(|t| spec.partition_counts.contains_key(t))
        {
            subscribers.entry(*topic).or_default().push(member_id);
        }
    }
    let mut by_scarcity: Vec<(&Uuid, &Vec<&String>)> = subscribers.iter().collect();
    by_scarcity.sort_by_key(|(topic, subs)| (subs.len(), **topic));
    for (topic, subs) in &by_scarcity {
        for p in 0..spec.partition_counts[topic] {
            if taken.contains(&(**topic, p)) {
                continue;
            }
            let Some(least) = least_loaded(subs, &load) else {
                continue;
            };
            give(&mut result, &mut load, least, **topic, p);
        }
    }
    rebalance(&mut result, &mut load, &by_scarcity);
    result
}

fn least_loaded(members: &[&String], load: &BTreeMap<String, usize>) -> Option<String> {
    members
        .iter()
        .min_by_key(|m| (load.get(m.as_str()).copied().unwrap_or(0), m.as_str()))
        .map(|m| (*m).clone())
}

fn give(
    result: &mut BTreeMap<String, PartitionSet>,
    load: &mut BTreeMap<String, usize>,
    member_id: String,
    topic: Uuid,
    partition: i32,
) {
    *load.entry(member_id.clone()).or_insert(0) += 1;
    result
        .entry(member_id)
        .or_default()
        .entry(topic)
        .or_default()
        .insert(partition);
}

/// Moves partitions from the most to the least loaded subscriber of their topic while the
/// difference is two or more. Each move narrows the spread, so this ends.
fn rebalance(
    result: &mut BTreeMap<String, PartitionSet>,
    load: &mut BTreeMap<String, usize>,
    topics: &[(&Uuid, &Vec<&String>)],
) {
    loop {
        let mut moved = false;
        for (topic, subs) in topics {
            let Some(least) = least_loaded(subs, load) else {
                continue;
            };
            let most = subs
                .iter()
                .filter(|m| {
                    result
                        .get(m.as_str())
                        .is_some_and(|a| a.contains_key(*topic))
                })
                .max_by_key(|m| {
                    (
                        load.get(m.as_str()).copied().unwrap_or(0),
                        std::cmp::Reverse(m.as_str()),
                    )
                })
                .map(|m| (*m).clone());
            let Some(most) = most else {
                continue;
            };
            if load[&most] < load[&least] + 2 {
                continue;
            }
            let Some(partition) = result
                .get_mut(&most)
                .and_then(|a| a.get_mut(*topic))
                .and_then(|ps| ps.pop_last())
            else {
                continue;
            };
            if result
                .get(&most)
                .and_then(|a| a.get(*topic))
                .is_some_and(BTreeSet::is_empty)
            {
                if let Some(a) = result.get_mut(&most) {
                    a.remove(*topic);
                }
            }
            if let Some(l) = load.get_mut(&most) {
                *l -= 1;
            }
            give(result, load, least, **topic, partition);
            moved = true;
        }
        if !moved {
            return;
        }
    }
}
