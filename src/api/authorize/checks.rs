//! Kafka's authorization checks (`KafkaApis`), applied around the handlers by `before` and
//! `after`: the topic and config APIs here, the group APIs in `groups.rs`, the producer and
//! transaction APIs in `transactions.rs`, the cluster APIs in `cluster.rs`. Metadata, Produce,
//! Fetch and DescribeTopicPartitions check inside their handlers (they page or frame their own
//! responses). ARCHITECTURE.md has the table.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::denied::{Denied, CLUSTER_DENIED, GROUP_DENIED, TOPIC_DENIED};
use super::{cluster, groups, transactions, Authz};
use crate::api::errors::code;
use crate::api::Reply;
use crate::security::acl::{Operation, ResourceType};

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
        return Ok(groups::operations_only(request));
    }
    if let Some(checked) = groups::before(authz, request, version) {
        return checked;
    }
    if let Some(checked) = transactions::before(authz, request, version) {
        return checked;
    }
    if let Some(refused) = cluster::refused(authz, request) {
        return Err(refused);
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
        RequestKind::DescribeCluster(r) => {
            Denied::DescribeCluster(r.include_cluster_authorized_operations)
        }
        _ => Denied::Nothing,
    };
    Ok(denied)
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
        (Denied::OffsetDelete(no), ResponseKind::OffsetDelete(r)) => r.topics.extend(no),
        (Denied::DeleteGroups(no), ResponseKind::DeleteGroups(r)) => r.results.extend(no),
        (Denied::DescribeGroups(no, with_ops), ResponseKind::DescribeGroups(r)) => {
            groups::describe_groups_after(authz, no, with_ops, r)
        }
        (Denied::ConsumerGroupDescribe(no, with_ops), ResponseKind::ConsumerGroupDescribe(r)) => {
            groups::consumer_group_describe_after(authz, no, with_ops, r)
        }
        (Denied::FindCoordinator(no), ResponseKind::FindCoordinator(r)) => {
            r.coordinators.extend(no)
        }
        (Denied::OffsetFetch { named, by_id }, ResponseKind::OffsetFetch(r)) => {
            groups::offset_fetch_after(authz, named, by_id, r)
        }
        (Denied::ListGroups, ResponseKind::ListGroups(r)) if !authz.cluster(Describe) => {
            r.groups.retain(|g| authz.group(Describe, &g.group_id));
        }
        (Denied::DescribeProducers { refused, order }, ResponseKind::DescribeProducers(r)) => {
            transactions::describe_producers_after(refused, &order, r)
        }
        (
            Denied::DescribeTransactions { refused, order },
            ResponseKind::DescribeTransactions(r),
        ) => transactions::describe_transactions_after(authz, refused, &order, r),
        (Denied::ListTransactions, ResponseKind::ListTransactions(r)) => {
            transactions::list_transactions_after(authz, r)
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
