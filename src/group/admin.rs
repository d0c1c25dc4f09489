//! The admin side of groups: ListGroups (API 16, v0-5), DescribeGroups (API 15, v0-6) and
//! DeleteGroups (API 42, v0-3; v3 only adds an error message, which `protocol` writes as null,
//! as Kafka 4.4 does for every error of a classic group), for classic groups and KIP-848
//! consumer groups alike. As in Kafka, DescribeGroups describes classic groups only: a consumer
//! group is reported Dead (with GROUP_ID_NOT_FOUND from v6); ConsumerGroupDescribe describes it.

use kafka_protocol::messages::delete_groups_response::DeletableGroupResult;
use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{
    DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest, DescribeGroupsResponse,
    GroupId, ListGroupsRequest, ListGroupsResponse,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::records;
use super::state::{GroupState, CONSUMER_PROTOCOL_TYPE};
use super::{GroupCoordinator, Inner};

/// The group types ListGroups v5 reports.
const CLASSIC_GROUP_TYPE: &str = "classic";
const CONSUMER_GROUP_TYPE: &str = "consumer";

impl GroupCoordinator {
    /// Lists groups, filtered by state (v4+) and type (v5), both case-insensitively as Kafka does.
    pub fn list_groups(&self, request: ListGroupsRequest, version: i16) -> ListGroupsResponse {
        let inner = self.lock_at(self.clock.now_ms());
        if inner.shut_down {
            return ListGroupsResponse::default()
                .with_error_code(ResponseError::NotCoordinator.code());
        }
        let wanted = |filter: &[StrBytes], value: &str| {
            filter.is_empty() || filter.iter().any(|f| f.eq_ignore_ascii_case(value))
        };
        // (id, protocol type, state, group type) of every group, classic and consumer.
        let classic = inner.groups.values().map(|g| {
            let protocol_type = g.protocol_type.clone().unwrap_or_default();
            (
                g.group_id.as_str(),
                protocol_type,
                g.state.name(),
                CLASSIC_GROUP_TYPE,
            )
        });
        let consumer = inner.consumer_groups.values().map(|g| {
            let protocol_type = CONSUMER_PROTOCOL_TYPE.to_string();
            (
                g.group_id.as_str(),
                protocol_type,
                g.state().name(),
                CONSUMER_GROUP_TYPE,
            )
        });
        let mut groups: Vec<_> = classic
            .chain(consumer)
            .filter(|(_, _, state, _)| version < 4 || wanted(&request.states_filter, state))
            .filter(|(_, _, _, kind)| version < 5 || wanted(&request.types_filter, kind))
            .collect();
        groups.sort_by(|a, b| a.0.cmp(b.0));
        let listed = groups
            .into_iter()
            .map(|(id, protocol_type, state, kind)| {
                let mut listed = ListedGroup::default()
                    .with_group_id(group_id(id))
                    .with_protocol_type(StrBytes::from_string(protocol_type));
                if version >= 4 {
                    listed.group_state = StrBytes::from_static_str(state);
                }
                if version >= 5 {
                    listed.group_type = StrBytes::from_static_str(kind);
                }
                listed
            })
            .collect();
        ListGroupsResponse::default().with_groups(listed)
    }

    /// Describes groups. An unknown group (the empty id included, which Kafka accepts for
    /// compatibility) is reported as Dead: without an error before v6, with GROUP_ID_NOT_FOUND
    /// from v6 (KIP-1043).
    pub fn describe_groups(
        &self,
        request: DescribeGroupsRequest,
        version: i16,
    ) -> DescribeGroupsResponse {
        let inner = self.lock_at(self.clock.now_ms());
        let groups = request
            .groups
            .iter()
            .map(|id| describe_group(&inner, id.as_str(), version))
            .collect();
        DescribeGroupsResponse::default().with_groups(groups)
    }

    /// Deletes Empty groups and their offsets, writing tombstones first. A group named twice is
    /// answered once, as Kafka (which reads the names into a set) does.
    pub fn delete_groups(
        &self,
        request: DeleteGroupsRequest,
        _version: i16,
    ) -> DeleteGroupsResponse {
        let mut inner = self.lock_at(self.clock.now_ms());
        let mut seen = std::collections::HashSet::new();
        let results = request
            .groups_names
            .iter()
            .filter(|id| seen.insert(id.as_str()))
            .map(|id| {
                let error = self.delete_group(&mut inner, id.as_str()).err();
                DeletableGroupResult::default()
                    .with_group_id(id.clone())
                    .with_error_code(error.map_or(0, |e| e.code()))
            })
            .collect();
        DeleteGroupsResponse::default().with_results(results)
    }

    fn delete_group(&self, inner: &mut Inner, group_id: &str) -> Result<(), ResponseError> {
        if inner.shut_down {
            return Err(ResponseError::NotCoordinator);
        }
        if inner.consumer_groups.contains_key(group_id) {
            return self.delete_consumer_group(inner, group_id);
        }
        // An empty group id is accepted, as Kafka does for compatibility; no such group exists.
        let group = inner
            .groups
            .get(group_id)
            .ok_or(ResponseError::GroupIdNotFound)?;
        if group.state != GroupState::Empty {
            return Err(ResponseError::NonEmptyGroup);
        }
        let encode_failed = |_| ResponseError::UnknownServerError;
        let mut batch = Vec::new();
        for (topic, partitions) in &group.offsets {
            for partition in partitions.keys() {
                batch.push((
                    records::encode_offset_commit_key(group_id, topic, *partition)
                        .map_err(encode_failed)?,
                    None,
                ));
            }
        }
        batch.push((
            records::encode_group_metadata_key(group_id).map_err(encode_failed)?,
            None,
        ));
        self.append(group_id, batch)?;
        inner.groups.remove(group_id);
        tracing::info!(group_id, "deleted group");
        Ok(())
    }
}

fn describe_group(inner: &Inner, id: &str, version: i16) -> DescribedGroup {
    let described = DescribedGroup::default().with_group_id(group_id(id));
    if inner.shut_down {
        return described.with_error_code(ResponseError::NotCoordinator.code());
    }
    let Some(group) = inner.groups.get(id) else {
        let dead = described.with_group_state(StrBytes::from_static_str("Dead"));
        let message = match inner.consumer_groups.contains_key(id) {
            true => format!("Group {id} is not a classic group."),
            false => format!("Group {id} not found."),
        };
        return if version >= 6 {
            dead.with_error_code(ResponseError::GroupIdNotFound.code())
                .with_error_message(Some(StrBytes::from_string(message)))
        } else {
            dead
        };
    };
    // Member metadata is only meaningful for the protocol of a Stable group; Kafka leaves it out
    // otherwise, along with the protocol name.
    let stable_protocol = match group.state {
        GroupState::Stable => group.protocol_name.clone(),
        _ => None,
    };
    let members = group
        .members
        .iter()
        .map(|m| {
            let metadata = stable_protocol
                .as_deref()
                .map(|p| m.metadata(p))
                .unwrap_or_default();
            DescribedGroupMember::default()
                .with_member_id(StrBytes::from_string(m.member_id.clone()))
                .with_group_instance_id(
                    m.group_instance_id
                        .clone()
                        .filter(|_| version >= 4)
                        .map(StrBytes::from_string),
                )
                .with_client_id(StrBytes::from_string(m.client_id.clone()))
                .with_client_host(StrBytes::from_string(m.client_host.clone()))
                .with_member_metadata(metadata)
                .with_member_assignment(m.assignment.clone())
        })
        .collect();
    described
        .with_group_state(StrBytes::from_static_str(group.state.name()))
        .with_protocol_type(StrBytes::from_string(
            group.protocol_type.clone().unwrap_or_default(),
        ))
        .with_protocol_data(StrBytes::from_string(stable_protocol.unwrap_or_default()))
        .with_members(members)
}

impl GroupCoordinator {
    /// Deletes an Empty consumer group: its offsets' tombstones, then its records' (Kafka's
    /// order, the group epoch last).
    fn delete_consumer_group(
        &self,
        inner: &mut Inner,
        group_id: &str,
    ) -> Result<(), ResponseError> {
        let Some(group) = inner.consumer_groups.get(group_id) else {
            return Err(ResponseError::GroupIdNotFound);
        };
        if !group.core.members.is_empty() {
            return Err(ResponseError::NonEmptyGroup);
        }
        let encode_failed = |_| ResponseError::UnknownServerError;
        let mut batch = Vec::new();
        for (topic, partitions) in &group.offsets {
            for partition in partitions.keys() {
                let key = records::encode_offset_commit_key(group_id, topic, *partition)
                    .map_err(encode_failed)?;
                batch.push((key, None));
            }
        }
        batch.extend(
            super::consumer::changes::group_tombstones(group_id, &group.core)
                .map_err(encode_failed)?,
        );
        self.append(group_id, batch)?;
        inner.consumer_groups.remove(group_id);
        tracing::info!(group_id, "deleted consumer group");
        Ok(())
    }
}

fn group_id(id: &str) -> GroupId {
    GroupId(StrBytes::from_string(id.to_string()))
}
