//! Kafka's authorization checks (`KafkaApis`), applied around the handlers by `before` and
//! `after`. Metadata, Produce and Fetch check inside their handlers (they frame their own
//! responses); everything else is here. ARCHITECTURE.md has the table.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::{Authz, OPERATIONS_NOT_REQUESTED};
use crate::api::errors::code;
use crate::api::{body, Reply};
use crate::security::acl::{Operation, ResourceType};

const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;
const GROUP_DENIED: ResponseError = ResponseError::GroupAuthorizationFailed;
const CLUSTER_DENIED: ResponseError = ResponseError::ClusterAuthorizationFailed;
const TXN_DENIED: ResponseError = ResponseError::TransactionalIdAuthorizationFailed;

/// What `before` took out of a request, to be answered as errors by `after`.
#[derive(Default)]
pub enum Denied {
    #[default]
    Nothing,
    CreateTopics(Vec<create_topics_response::CreatableTopicResult>),
    DeleteTopics(Vec<delete_topics_response::DeletableTopicResult>),
    CreatePartitions(Vec<create_partitions_response::CreatePartitionsTopicResult>),
    DeleteRecords(Vec<delete_records_response::DeleteRecordsTopicResult>),
    ListOffsets(Vec<list_offsets_response::ListOffsetsTopicResponse>),
    AlterConfigs(Vec<alter_configs_response::AlterConfigsResourceResponse>),
    IncrementalAlterConfigs(Vec<incremental_alter_configs_response::AlterConfigsResourceResponse>),
    DescribeConfigs(Vec<describe_configs_response::DescribeConfigsResult>),
    OffsetCommit(Vec<offset_commit_response::OffsetCommitResponseTopic>),
    DeleteGroups(Vec<delete_groups_response::DeletableGroupResult>),
    /// Described groups not authorized, and whether operations were asked for.
    DescribeGroups(Vec<String>, bool),
    /// OffsetFetch: topics not described are refused when `named`, else dropped; `by_id` (v10+):
    /// a topic without a name is an id that names no topic, answered UNKNOWN_TOPIC_ID as it is.
    OffsetFetch {
        named: bool,
        by_id: bool,
    },
    FindCoordinator(Vec<find_coordinator_response::Coordinator>),
    ListGroups,
    DescribeCluster(bool),
}

/// Config resource types: 2 TOPIC, 4 BROKER, 8 BROKER_LOGGER, 16 CLIENT_METRICS, 32 GROUP.
fn config_allowed(
    authz: &Authz<'_>,
    resource_type: i8,
    name: &str,
    alter: bool,
) -> Result<(), ResponseError> {
    let op = if alter {
        Operation::AlterConfigs
    } else {
        Operation::DescribeConfigs
    };
    match resource_type {
        2 if !authz.topic(op, name) => Err(TOPIC_DENIED),
        32 if !authz.group(op, name) => Err(GROUP_DENIED),
        4 | 8 | 16 if !authz.cluster(op) => Err(CLUSTER_DENIED),
        _ => Ok(()),
    }
}

/// Checks a request before dispatch: Err is its whole answer.
pub(crate) fn before(
    authz: &Authz<'_>,
    request: &mut RequestKind,
    version: i16,
) -> Result<Denied, Reply> {
    if !authz.enabled() {
        return Ok(Denied::Nothing);
    }
    use Operation::*;
    let denied = match request {
        RequestKind::CreateTopics(r) => {
            let cluster = authz.cluster(Create);
            let (ok, no): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
                .into_iter()
                .partition(|t| cluster || authz.topic(Create, &t.name));
            r.topics = ok;
            Denied::CreateTopics(
                no.into_iter()
                    .map(|t| {
                        create_topics_response::CreatableTopicResult::default()
                            .with_name(t.name)
                            .with_error_code(code(TOPIC_DENIED))
                            .with_num_partitions(-1)
                            .with_replication_factor(-1)
                            .with_topic_config_error_code(code(TOPIC_DENIED))
                    })
                    .collect(),
            )
        }
        RequestKind::DeleteTopics(r) => {
            let mut no = Vec::new();
            r.topic_names.retain(|t| {
                let ok = authz.topic(Delete, t);
                if !ok {
                    no.push(
                        delete_topics_response::DeletableTopicResult::default()
                            .with_name(Some(t.clone()))
                            .with_error_code(code(TOPIC_DENIED)),
                    );
                }
                ok
            });
            r.topics.retain(|t| match &t.name {
                Some(name) if !authz.topic(Delete, name) => {
                    no.push(
                        delete_topics_response::DeletableTopicResult::default()
                            .with_name(Some(name.clone()))
                            .with_topic_id(t.topic_id)
                            .with_error_code(code(TOPIC_DENIED)),
                    );
                    false
                }
                _ => true,
            });
            Denied::DeleteTopics(no)
        }
        RequestKind::CreatePartitions(r) => {
            let (ok, no): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
                .into_iter()
                .partition(|t| authz.topic(Alter, &t.name));
            r.topics = ok;
            Denied::CreatePartitions(
                no.into_iter()
                    .map(|t| {
                        create_partitions_response::CreatePartitionsTopicResult::default()
                            .with_name(t.name)
                            .with_error_code(code(TOPIC_DENIED))
                    })
                    .collect(),
            )
        }
        RequestKind::DeleteRecords(r) => {
            let (ok, no): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
                .into_iter()
                .partition(|t| authz.topic(Delete, &t.name));
            r.topics = ok;
            Denied::DeleteRecords(
                no.into_iter()
                    .map(|t| {
                        let partitions = t
                            .partitions
                            .iter()
                            .map(|p| {
                                delete_records_response::DeleteRecordsPartitionResult::default()
                                    .with_partition_index(p.partition_index)
                                    .with_low_watermark(-1)
                                    .with_error_code(code(TOPIC_DENIED))
                            })
                            .collect();
                        delete_records_response::DeleteRecordsTopicResult::default()
                            .with_name(t.name)
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
        }
        RequestKind::ListOffsets(r) => {
            let (ok, no): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
                .into_iter()
                .partition(|t| authz.topic(Describe, &t.name));
            r.topics = ok;
            Denied::ListOffsets(
                no.into_iter()
                    .map(|t| {
                        let partitions = t
                            .partitions
                            .iter()
                            .map(|p| {
                                list_offsets_response::ListOffsetsPartitionResponse::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code(TOPIC_DENIED))
                                    .with_timestamp(-1)
                                    .with_offset(-1)
                                    .with_leader_epoch(-1)
                            })
                            .collect();
                        list_offsets_response::ListOffsetsTopicResponse::default()
                            .with_name(t.name)
                            .with_partitions(partitions)
                    })
                    .collect(),
            )
        }
        RequestKind::DescribeConfigs(r) => {
            let mut no = Vec::new();
            r.resources.retain(|res| {
                match config_allowed(authz, res.resource_type, &res.resource_name, false) {
                    Ok(()) => true,
                    Err(e) => {
                        no.push(
                            describe_configs_response::DescribeConfigsResult::default()
                                .with_error_code(code(e))
                                .with_error_message(Some(StrBytes::from_string(e.to_string())))
                                .with_resource_type(res.resource_type)
                                .with_resource_name(res.resource_name.clone()),
                        );
                        false
                    }
                }
            });
            Denied::DescribeConfigs(no)
        }
        RequestKind::AlterConfigs(r) => {
            let mut no = Vec::new();
            r.resources.retain(|res| {
                match config_allowed(authz, res.resource_type, &res.resource_name, true) {
                    Ok(()) => true,
                    Err(e) => {
                        no.push(
                            alter_configs_response::AlterConfigsResourceResponse::default()
                                .with_error_code(code(e))
                                .with_resource_type(res.resource_type)
                                .with_resource_name(res.resource_name.clone()),
                        );
                        false
                    }
                }
            });
            Denied::AlterConfigs(no)
        }
        RequestKind::IncrementalAlterConfigs(r) => {
            let mut no = Vec::new();
            r.resources.retain(|res| {
                match config_allowed(authz, res.resource_type, &res.resource_name, true) {
                    Ok(()) => true,
                    Err(e) => {
                        no.push(
                        incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                            .with_error_code(code(e))
                            .with_resource_type(res.resource_type)
                            .with_resource_name(res.resource_name.clone()),
                    );
                        false
                    }
                }
            });
            Denied::IncrementalAlterConfigs(no)
        }
        RequestKind::OffsetCommit(r) => {
            if !authz.group(Read, &r.group_id) {
                let topics = r
                    .topics
                    .iter()
                    .map(|t| commit_errors(t, GROUP_DENIED))
                    .collect();
                return Err(body(OffsetCommitResponse::default().with_topics(topics)));
            }
            // From v10 the names are those of the topics the ids name (`name_commit_topics`);
            // an unnamed topic is an unknown id, which the handler answers UNKNOWN_TOPIC_ID.
            let (ok, no): (Vec<_>, Vec<_>) = std::mem::take(&mut r.topics)
                .into_iter()
                .partition(|t| (version >= 10 && t.name.is_empty()) || authz.topic(Read, &t.name));
            r.topics = ok;
            Denied::OffsetCommit(no.iter().map(|t| commit_errors(t, TOPIC_DENIED)).collect())
        }
        RequestKind::OffsetFetch(r) => {
            if version < 8 && !authz.group(Describe, &r.group_id) {
                return Err(body(
                    OffsetFetchResponse::default().with_error_code(code(GROUP_DENIED)),
                ));
            }
            Denied::OffsetFetch {
                named: r.topics.is_some(),
                by_id: version >= 10,
            }
        }
        RequestKind::OffsetDelete(r) => {
            if !authz.group(Delete, &r.group_id) {
                return Err(body(
                    OffsetDeleteResponse::default().with_error_code(code(GROUP_DENIED)),
                ));
            }
            Denied::Nothing
        }
        RequestKind::JoinGroup(r) if !authz.group(Read, &r.group_id) => {
            return Err(body(
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
            return Err(body(
                SyncGroupResponse::default().with_error_code(code(GROUP_DENIED)),
            ));
        }
        RequestKind::Heartbeat(r) if !authz.group(Read, &r.group_id) => {
            return Err(body(
                HeartbeatResponse::default().with_error_code(code(GROUP_DENIED)),
            ));
        }
        RequestKind::LeaveGroup(r) if !authz.group(Read, &r.group_id) => {
            return Err(body(
                LeaveGroupResponse::default().with_error_code(code(GROUP_DENIED)),
            ));
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
            let no = r
                .groups
                .iter()
                .filter(|g| !authz.group(Describe, g))
                .map(|g| g.to_string())
                .collect();
            Denied::DescribeGroups(no, r.include_authorized_operations)
        }
        RequestKind::ListGroups(_) => Denied::ListGroups,
        RequestKind::FindCoordinator(r) => {
            let keys: Vec<StrBytes> = if version >= 4 {
                r.coordinator_keys.clone()
            } else {
                vec![r.key.clone()]
            };
            let denied = |key: &str| match r.key_type {
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
            } else {
                // Refused keys answer with the error; the others are looked up.
                let refused = keys
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
                return Ok(Denied::FindCoordinator(refused));
            }
            Denied::Nothing
        }
        RequestKind::InitProducerId(r) => {
            let allowed = match &r.transactional_id {
                Some(id) => authz.transactional_id(Write, id),
                None => authz.cluster(IdempotentWrite) || authz.any(Write, ResourceType::Topic),
            };
            if !allowed {
                let e = if r.transactional_id.is_some() {
                    TXN_DENIED
                } else {
                    CLUSTER_DENIED
                };
                return Err(body(
                    InitProducerIdResponse::default()
                        .with_error_code(code(e))
                        .with_producer_id(ProducerId(-1))
                        .with_producer_epoch(-1),
                ));
            }
            Denied::Nothing
        }
        RequestKind::DescribeCluster(r) => {
            Denied::DescribeCluster(r.include_cluster_authorized_operations)
        }
        _ => return cluster_checks(authz, request),
    };
    Ok(denied)
}

fn commit_errors(
    t: &offset_commit_request::OffsetCommitRequestTopic,
    e: ResponseError,
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

/// The APIs that need one CLUSTER operation: refused whole.
fn cluster_checks(authz: &Authz<'_>, request: &RequestKind) -> Result<Denied, Reply> {
    use Operation::*;
    let e = code(CLUSTER_DENIED);
    let message = || Some(StrBytes::from_string(CLUSTER_DENIED.to_string()));
    let refused = match request {
        RequestKind::DescribeAcls(_) if !authz.cluster(Describe) => body(
            DescribeAclsResponse::default()
                .with_error_code(e)
                .with_error_message(message()),
        ),
        RequestKind::CreateAcls(r) if !authz.cluster(Alter) => body(
            CreateAclsResponse::default().with_results(
                r.creations
                    .iter()
                    .map(|_| {
                        create_acls_response::AclCreationResult::default()
                            .with_error_code(e)
                            .with_error_message(message())
                    })
                    .collect(),
            ),
        ),
        RequestKind::DeleteAcls(r) if !authz.cluster(Alter) => body(
            DeleteAclsResponse::default().with_filter_results(
                r.filters
                    .iter()
                    .map(|_| {
                        delete_acls_response::DeleteAclsFilterResult::default()
                            .with_error_code(e)
                            .with_error_message(message())
                    })
                    .collect(),
            ),
        ),
        RequestKind::DescribeUserScramCredentials(_) if !authz.cluster(Describe) => body(
            DescribeUserScramCredentialsResponse::default()
                .with_error_code(e)
                .with_error_message(message()),
        ),
        RequestKind::AlterUserScramCredentials(r) if !authz.cluster(Alter) => {
            let users = r
                .deletions
                .iter()
                .map(|d| d.name.clone())
                .chain(r.upsertions.iter().map(|u| u.name.clone()));
            body(AlterUserScramCredentialsResponse::default().with_results(
                users
                    .map(|u| {
                        alter_user_scram_credentials_response::AlterUserScramCredentialsResult::default()
                            .with_user(u)
                            .with_error_code(e)
                            .with_error_message(message())
                    })
                    .collect(),
            ))
        }
        RequestKind::DescribeClientQuotas(_) if !authz.cluster(DescribeConfigs) => body(
            DescribeClientQuotasResponse::default()
                .with_error_code(e)
                .with_error_message(message()),
        ),
        RequestKind::AlterClientQuotas(r) if !authz.cluster(AlterConfigs) => {
            let entries = r
                .entries
                .iter()
                .map(|entry| {
                    let entity = entry
                        .entity
                        .iter()
                        .map(|x| {
                            alter_client_quotas_response::EntityData::default()
                                .with_entity_type(x.entity_type.clone())
                                .with_entity_name(x.entity_name.clone())
                        })
                        .collect();
                    alter_client_quotas_response::EntryData::default()
                        .with_error_code(e)
                        .with_error_message(message())
                        .with_entity(entity)
                })
                .collect();
            body(AlterClientQuotasResponse::default().with_entries(entries))
        }
        RequestKind::DescribeLogDirs(_) if !authz.cluster(Describe) => {
            body(DescribeLogDirsResponse::default().with_error_code(e))
        }
        RequestKind::ElectLeaders(_) if !authz.cluster(Alter) => {
            body(ElectLeadersResponse::default().with_error_code(e))
        }
        _ => return Ok(Denied::Nothing),
    };
    Err(refused)
}

/// Puts back what `before` took out, and replaces what an unauthorized caller may not see.
pub(crate) fn after(authz: &Authz<'_>, denied: Denied, response: &mut ResponseKind) {
    use Operation::*;
    match (denied, response) {
        (Denied::CreateTopics(no), ResponseKind::CreateTopics(r)) => r.topics.extend(no),
        (Denied::DeleteTopics(no), ResponseKind::DeleteTopics(r)) => r.responses.extend(no),
        (Denied::CreatePartitions(no), ResponseKind::CreatePartitions(r)) => r.results.extend(no),
        (Denied::DeleteRecords(no), ResponseKind::DeleteRecords(r)) => r.topics.extend(no),
        (Denied::ListOffsets(no), ResponseKind::ListOffsets(r)) => r.topics.extend(no),
        (Denied::DescribeConfigs(no), ResponseKind::DescribeConfigs(r)) => r.results.extend(no),
        (Denied::AlterConfigs(no), ResponseKind::AlterConfigs(r)) => r.responses.extend(no),
        (Denied::IncrementalAlterConfigs(no), ResponseKind::IncrementalAlterConfigs(r)) => {
            r.responses.extend(no)
        }
        (Denied::OffsetCommit(no), ResponseKind::OffsetCommit(r)) => r.topics.extend(no),
        (Denied::DeleteGroups(no), ResponseKind::DeleteGroups(r)) => r.results.extend(no),
        (Denied::DescribeGroups(no, with_ops), ResponseKind::DescribeGroups(r)) => {
            for g in r.groups.iter_mut() {
                if no.iter().any(|n| *n == g.group_id.as_str()) {
                    *g = describe_groups_response::DescribedGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(code(GROUP_DENIED))
                        .with_authorized_operations(OPERATIONS_NOT_REQUESTED);
                } else if with_ops {
                    g.authorized_operations = authz.operations(ResourceType::Group, &g.group_id);
                }
            }
        }
        (Denied::FindCoordinator(no), ResponseKind::FindCoordinator(r)) => {
            r.coordinators.extend(no)
        }
        (Denied::OffsetFetch { named, by_id }, ResponseKind::OffsetFetch(r)) => {
            // Topics the caller may not describe: refused when named, dropped from "all".
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
        (Denied::ListGroups, ResponseKind::ListGroups(r)) if !authz.cluster(Describe) => {
            r.groups.retain(|g| authz.group(Describe, &g.group_id));
        }
        (Denied::DescribeCluster(true), ResponseKind::DescribeCluster(r)) => {
            r.cluster_authorized_operations = if authz.cluster(Describe) {
                authz.operations(ResourceType::Cluster, crate::security::acl::CLUSTER_NAME)
            } else {
                0
            };
        }
        _ => {}
    }
}
