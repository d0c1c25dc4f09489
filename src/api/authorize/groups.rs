//! Kafka's checks of the group APIs, classic and KIP-848 (`KafkaApis`): the group first (READ to
//! take part, DESCRIBE to look, DELETE to delete), then the topics the request names. Called by
//! `checks::before` and `checks::after`.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::denied::{Denied, GROUP_DENIED, TOPIC_DENIED, TXN_DENIED};
use super::{Authz, OPERATIONS_NOT_REQUESTED};
use crate::api::errors::code;
use crate::api::{body, Reply};
use crate::security::acl::{Operation, ResourceType};
use Operation::*;

/// Kafka's message for a KIP-848 group whose members are assigned a topic the caller may not
/// describe.
const HIDDEN_TOPICS: &str =
    "The group has described topic(s) that the client is not authorized to describe.";

/// The checks of one group request before dispatch; None when `request` is no group request.
pub(super) fn before(
    authz: &Authz<'_>,
    request: &mut RequestKind,
    version: i16,
) -> Option<Result<Denied, Reply>> {
    let refused = |reply: Reply| Some(Err(reply));
    let denied = match request {
        RequestKind::OffsetCommit(r) => return Some(offset_commit(authz, r, version)),
        RequestKind::OffsetFetch(r) => {
            if version < 8 && !authz.group(Describe, &r.group_id) {
                return refused(body(
                    OffsetFetchResponse::default().with_error_code(code(GROUP_DENIED)),
                ));
            }
            Denied::OffsetFetch {
                named: r.topics.is_some(),
                by_id: version >= 10,
            }
        }
        RequestKind::OffsetDelete(r) => return Some(offset_delete(authz, r)),
        RequestKind::JoinGroup(r) if !authz.group(Read, &r.group_id) => {
            return refused(body(
                JoinGroupResponse::default()
                    .with_error_code(code(GROUP_DENIED))
                    .with_generation_id(-1)
                    .with_protocol_name(if version >= 7 {
                        None
                    } else {
                        Some(StrBytes::default())
                    }),
            ));
        }
        RequestKind::SyncGroup(r) if !authz.group(Read, &r.group_id) => {
            return refused(body(
                SyncGroupResponse::default().with_error_code(code(GROUP_DENIED)),
            ));
        }
        RequestKind::Heartbeat(r) if !authz.group(Read, &r.group_id) => {
            return refused(body(
                HeartbeatResponse::default().with_error_code(code(GROUP_DENIED)),
            ));
        }
        RequestKind::LeaveGroup(r) if !authz.group(Read, &r.group_id) => {
            return refused(body(
                LeaveGroupResponse::default().with_error_code(code(GROUP_DENIED)),
            ));
        }
        RequestKind::ConsumerGroupHeartbeat(r) => {
            return Some(consumer_group_heartbeat(authz, r).map_or(Ok(Denied::Nothing), Err));
        }
        RequestKind::DeleteGroups(r) => {
            let mut no = Vec::new();
            r.groups_names.retain(|g| {
                let ok = authz.group(Delete, g);
                if !ok {
                    no.push(
                        delete_groups_response::DeletableGroupResult::default()
                            .with_group_id(g.clone())
                            .with_error_code(code(GROUP_DENIED)),
                    );
                }
                ok
            });
            Denied::DeleteGroups(no)
        }
        RequestKind::DescribeGroups(r) => {
            let mut no = Vec::new();
            r.groups.retain(|g| {
                let ok = authz.group(Describe, g);
                if !ok {
                    no.push(g.clone());
                }
                ok
            });
            Denied::DescribeGroups(no, r.include_authorized_operations)
        }
        RequestKind::ConsumerGroupDescribe(r) => {
            let mut no = Vec::new();
            r.group_ids.retain(|g| {
                let ok = authz.group(Describe, g);
                if !ok {
                    no.push(g.clone());
                }
                ok
            });
            Denied::ConsumerGroupDescribe(no, r.include_authorized_operations)
        }
        RequestKind::ListGroups(_) => Denied::ListGroups,
        RequestKind::FindCoordinator(r) => return Some(find_coordinator(authz, r, version)),
        _ => return None,
    };
    Some(Ok(denied))
}

/// Without an authorizer nothing is refused, but the authorized operations a describe asks for
/// are every operation a group supports, as on Kafka.
pub(super) fn operations_only(request: &RequestKind) -> Denied {
    match request {
        RequestKind::DescribeGroups(r) => {
            Denied::DescribeGroups(Vec::new(), r.include_authorized_operations)
        }
        RequestKind::ConsumerGroupDescribe(r) => {
            Denied::ConsumerGroupDescribe(Vec::new(), r.include_authorized_operations)
        }
        _ => Denied::Nothing,
    }
}

fn offset_commit(
    authz: &Authz<'_>,
    r: &mut OffsetCommitRequest,
    version: i16,
) -> Result<Denied, Reply> {
    if !authz.group(Read, &r.group_id) {
        let topics = r
            .topics
            .iter()
            .map(|t| commit_errors(t, GROUP_DENIED))
            .collect();
        return Err(body(OffsetCommitResponse::default().with_topics(topics)));
    }
    // From v10 the names are those of the topics the ids name (`name_commit_topics`); an
    // unnamed topic is an unknown id, which the handler answers UNKNOWN_TOPIC_ID.
    let (ok, no): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
        .into_iter()
        .partition(|t| (version >= 10 && t.name.is_empty()) || authz.topic(Read, &t.name));
    r.topics = ok;
    Ok(Denied::OffsetCommit(
        no.iter().map(|t| commit_errors(t, TOPIC_DENIED)).collect(),
    ))
}

fn commit_errors(
    t: &offset_commit_request::OffsetCommitRequestTopic,
    e: kafka_protocol::ResponseError,
) -> offset_commit_response::OffsetCommitResponseTopic {
    let partitions = t
        .partitions
        .iter()
        .map(|p| {
            offset_commit_response::OffsetCommitResponsePartition::default()
                .with_partition_index(p.partition_index)
                .with_error_code(code(e))
        })
        .collect();
    offset_commit_response::OffsetCommitResponseTopic::default()
        .with_name(t.name.clone())
        .with_topic_id(t.topic_id)
        .with_partitions(partitions)
}

/// Group DELETE, then topic READ: the partitions of a topic the caller may not read are
/// answered TOPIC_AUTHORIZATION_FAILED and not deleted.
fn offset_delete(authz: &Authz<'_>, r: &mut OffsetDeleteRequest) -> Result<Denied, Reply> {
    if !authz.group(Delete, &r.group_id) {
        return Err(body(
            OffsetDeleteResponse::default().with_error_code(code(GROUP_DENIED)),
        ));
    }
    let (ok, no): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
        .into_iter()
        .partition(|t| authz.topic(Read, &t.name));
    r.topics = ok;
    let refused = no
        .into_iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    offset_delete_response::OffsetDeleteResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code(TOPIC_DENIED))
                })
                .collect();
            offset_delete_response::OffsetDeleteResponseTopic::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    Ok(Denied::OffsetDelete(refused))
}

/// Group READ; then, when the member names its topics, DESCRIBE on every one of them (the
/// whole request fails with TOPIC_AUTHORIZATION_FAILED otherwise). What a regular expression
/// resolves to is filtered by the coordinator, with the same principal's DESCRIBE.
fn consumer_group_heartbeat(authz: &Authz<'_>, r: &ConsumerGroupHeartbeatRequest) -> Option<Reply> {
    let error = if !authz.group(Read, &r.group_id) {
        GROUP_DENIED
    } else if r
        .subscribed_topic_names
        .as_ref()
        .is_some_and(|names| names.iter().any(|t| !authz.topic(Describe, t)))
    {
        TOPIC_DENIED
    } else {
        return None;
    };
    Some(body(
        ConsumerGroupHeartbeatResponse::default().with_error_code(code(error)),
    ))
}

fn find_coordinator(
    authz: &Authz<'_>,
    r: &mut FindCoordinatorRequest,
    version: i16,
) -> Result<Denied, Reply> {
    let key_type = r.key_type;
    let denied = |key: &str| match key_type {
        0 => (!authz.group(Describe, key)).then_some(GROUP_DENIED),
        1 => (!authz.transactional_id(Describe, key)).then_some(TXN_DENIED),
        _ => None,
    };
    if version < 4 {
        if let Some(e) = denied(&r.key) {
            return Err(body(
                FindCoordinatorResponse::default()
                    .with_error_code(code(e))
                    .with_node_id(BrokerId(-1))
                    .with_port(-1),
            ));
        }
        return Ok(Denied::Nothing);
    }
    // Refused keys answer with the error; the others are looked up.
    let refused = r
        .coordinator_keys
        .iter()
        .filter_map(|k| denied(k).map(|e| (k, e)))
        .map(|(k, e)| {
            find_coordinator_response::Coordinator::default()
                .with_key(k.clone())
                .with_node_id(BrokerId(-1))
                .with_port(-1)
                .with_error_code(code(e))
        })
        .collect();
    r.coordinator_keys.retain(|k| denied(k).is_none());
    Ok(Denied::FindCoordinator(refused))
}

/// Kafka's order: the refused groups first, then those described, which carry their
/// authorized operations when asked.
pub(super) fn describe_groups_after(
    authz: &Authz<'_>,
    no: Vec<GroupId>,
    with_ops: bool,
    r: &mut DescribeGroupsResponse,
) {
    use describe_groups_response::DescribedGroup;
    if with_ops {
        for g in r.groups.iter_mut().filter(|g| g.error_code == 0) {
            g.authorized_operations = authz.operations(ResourceType::Group, &g.group_id);
        }
    }
    let mut groups: Vec<DescribedGroup> = no
        .into_iter()
        .map(|id| {
            DescribedGroup::default()
                .with_group_id(id)
                .with_error_code(code(GROUP_DENIED))
                .with_authorized_operations(OPERATIONS_NOT_REQUESTED)
        })
        .collect();
    groups.append(&mut r.groups);
    r.groups = groups;
}

/// Kafka's order: the refused groups first, then those described. A described group whose
/// members are assigned (or targeted with) a topic the caller may not describe is refused
/// whole with TOPIC_AUTHORIZATION_FAILED.
pub(super) fn consumer_group_describe_after(
    authz: &Authz<'_>,
    no: Vec<GroupId>,
    with_ops: bool,
    r: &mut ConsumerGroupDescribeResponse,
) {
    use consumer_group_describe_response::DescribedGroup;
    for g in r.groups.iter_mut().filter(|g| g.error_code == 0) {
        if with_ops {
            g.authorized_operations = authz.operations(ResourceType::Group, &g.group_id);
        }
        let hidden = authz.enabled()
            && g.members.iter().any(|m| {
                m.assignment
                    .topic_partitions
                    .iter()
                    .chain(&m.target_assignment.topic_partitions)
                    .any(|tp| !authz.topic(Describe, &tp.topic_name))
            });
        if hidden {
            *g = DescribedGroup::default()
                .with_group_id(g.group_id.clone())
                .with_error_code(code(TOPIC_DENIED))
                .with_error_message(Some(StrBytes::from_static_str(HIDDEN_TOPICS)));
        }
    }
    let mut groups: Vec<DescribedGroup> = no
        .into_iter()
        .map(|id| {
            DescribedGroup::default()
                .with_group_id(id)
                .with_error_code(code(GROUP_DENIED))
        })
        .collect();
    groups.append(&mut r.groups);
    r.groups = groups;
}

/// Topics the caller may not describe: refused when named, dropped from "all".
pub(super) fn offset_fetch_after(
    authz: &Authz<'_>,
    named: bool,
    by_id: bool,
    r: &mut OffsetFetchResponse,
) {
    if !named {
        r.topics.retain(|t| authz.topic(Describe, &t.name));
    }
    for t in r.topics.iter_mut() {
        if !authz.topic(Describe, &t.name) {
            for p in t.partitions.iter_mut() {
                p.error_code = code(TOPIC_DENIED);
                p.committed_offset = -1;
                p.metadata = None;
            }
        }
    }
    for g in r.groups.iter_mut() {
        if !authz.group(Describe, &g.group_id) {
            g.topics.clear();
            g.error_code = code(GROUP_DENIED);
            continue;
        }
        g.topics
            .retain(|t| (by_id && t.name.is_empty()) || authz.topic(Describe, &t.name));
    }
}
