//! The server-side assignors, chosen per group by `group.consumer.assignors` (the first is the
//! default) and the members' `group.remote.assignor`: `uniform` (sticky, balanced) and `range`
//! (contiguous ranges per topic, co-partitioned topics aligned). Kafka's
//! `ConsumerGroupPartitionAssignor`s. An assignor sees each member's subscribed topic ids and
//! its current target assignment, and returns every member's new target assignment.

mod range;
mod uniform;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::member::PartitionSet;

/// One member as an assignor sees it.
#[derive(Clone, Debug)]
pub(crate) struct MemberSpec {
    pub instance_id: Option<String>,
    pub topics: BTreeSet<Uuid>,
    /// The member's current target assignment.
    pub current: PartitionSet,
}

/// Kafka's `GroupSpec`: the members, whether they all subscribe to the same topics, and the
/// partition count of each subscribed topic.
pub(crate) struct GroupSpec {
    pub members: BTreeMap<String, MemberSpec>,
    pub homogeneous: bool,
    pub partition_counts: HashMap<Uuid, i32>,
}

impl GroupSpec {
    /// Who currently holds each partition in the target assignment.
    fn inverted(&self) -> HashMap<(Uuid, i32), &str> {
        let mut owners = HashMap::new();
        for (member_id, spec) in &self.members {
            for (topic, partitions) in &spec.current {
                for p in partitions {
                    owners.insert((*topic, *p), member_id.as_str());
                }
            }
        }
        owners
    }
}

/// Runs the named assignor.
pub(crate) fn assign(name: &str, spec: &GroupSpec) -> BTreeMap<String, PartitionSet> {
    if spec.members.is_empty() {
        return BTreeMap::new();
    }
    match name {
        "range" => range::assign(spec),
        _ => uniform::assign(spec),
    }
}
