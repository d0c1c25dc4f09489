//! ConsumerGroupDescribe (API 69, v0-1), and what ListGroups says about consumer groups.
//! Kafka's `consumerGroupDescribe` / `asDescribedGroup`: a group that does not exist, or is a
//! classic group, is GROUP_ID_NOT_FOUND; each member is described with its epoch, subscription,
//! current assignment (owned and still revoking) and target assignment, by topic id and name,
//! and from v1 its type (0 classic protocol, 1 consumer protocol, KIP-1099).

use std::collections::BTreeMap;

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, GroupId, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use uuid::Uuid;

use super::member::{partition_set, ConsumerMember, PartitionSet};
use super::ConsumerGroup;
use crate::group::topics::TopicImage;
use crate::group::GroupCoordinator;

fn s(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

impl GroupCoordinator {
    pub fn consumer_group_describe(
        &self,
        request: ConsumerGroupDescribeRequest,
        _version: i16,
    ) -> ConsumerGroupDescribeResponse {
        let inner = self.lock_at(self.clock.now_ms());
        let topics = self.topics();
        let groups = request
            .group_ids
            .iter()
            .map(|id| {
                let id = id.as_str();
                let described = DescribedGroup::default().with_group_id(GroupId(s(id)));
                if inner.shut_down {
                    return described.with_error_code(ResponseError::NotCoordinator.code());
                }
                if id.is_empty() {
                    return described.with_error_code(ResponseError::InvalidGroupId.code());
                }
                match inner.consumer_groups.get(id) {
                    Some(group) => describe(group, topics, self.config.default_assignor()),
                    None => {
                        let message = match inner.groups.contains_key(id) {
                            true => format!("Group {id} is not a consumer group."),
                            false => format!("Group {id} not found."),
                        };
                        described
                            .with_error_code(ResponseError::GroupIdNotFound.code())
                            .with_error_message(Some(StrBytes::from_string(message)))
                    }
                }
            })
            .collect();
        ConsumerGroupDescribeResponse::default().with_groups(groups)
    }
}

fn describe(
    group: &ConsumerGroup,
    topics: &dyn TopicImage,
    default_assignor: &str,
) -> DescribedGroup {
    let core = &group.core;
    let empty = PartitionSet::new();
    let members = core
        .members
        .values()
        .map(|m| describe_member(m, core.target.get(&m.member_id).unwrap_or(&empty), topics))
        .collect();
    DescribedGroup::default()
        .with_group_id(GroupId(s(&group.group_id)))
        .with_group_state(StrBytes::from_static_str(group.state().name()))
        .with_group_epoch(core.group_epoch)
        .with_assignment_epoch(core.assignment_epoch)
        .with_assignor_name(s(&core
            .preferred_assignor()
            .unwrap_or_else(|| default_assignor.to_string())))
        .with_members(members)
}

fn describe_member(m: &ConsumerMember, target: &PartitionSet, topics: &dyn TopicImage) -> Member {
    let mut current = partition_set(&m.assignment.assigned);
    for (topic, partitions) in partition_set(&m.assignment.pending_revocation) {
        current.entry(topic).or_default().extend(partitions);
    }
    Member::default()
        .with_member_id(s(&m.member_id))
        .with_instance_id(m.metadata.instance_id.as_deref().map(s))
        .with_rack_id(m.metadata.rack_id.as_deref().map(s))
        .with_member_epoch(m.epoch())
        .with_client_id(s(&m.metadata.client_id))
        .with_client_host(s(&m.metadata.client_host))
        .with_subscribed_topic_names(
            m.metadata
                .subscribed_topic_names
                .iter()
                .map(|t| TopicName(s(t)))
                .collect(),
        )
        .with_subscribed_topic_regex(m.regex().map(s))
        .with_assignment(assignment(&current, topics))
        .with_target_assignment(assignment(target, topics))
        .with_member_type(if m.uses_classic_protocol() { 0 } else { 1 })
}

/// Partitions by topic id and name; topics that no longer exist are left out, as in Kafka.
fn assignment(
    set: &BTreeMap<Uuid, std::collections::BTreeSet<i32>>,
    topics: &dyn TopicImage,
) -> Assignment {
    let topic_partitions = set
        .iter()
        .filter_map(|(id, partitions)| {
            let topic = topics.by_id(*id)?;
            Some(
                TopicPartitions::default()
                    .with_topic_id(*id)
                    .with_topic_name(TopicName(s(&topic.name)))
                    .with_partitions(partitions.iter().copied().collect()),
            )
        })
        .collect();
    Assignment::default().with_topic_partitions(topic_partitions)
}
