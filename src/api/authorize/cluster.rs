//! The APIs that need one CLUSTER operation (`KafkaApis`): the ACL and SCRAM credential APIs,
//! client quotas, ListConfigResources, DescribeLogDirs and ElectLeaders, refused whole with
//! CLUSTER_AUTHORIZATION_FAILED in every entry of the answer.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;

use super::denied::CLUSTER_DENIED;
use super::Authz;
use crate::api::errors::code;
use crate::api::{body, Reply};
use crate::security::acl::Operation;

/// The APIs that need one CLUSTER operation: refused whole.
pub(super) fn refused(authz: &Authz<'_>, request: &RequestKind) -> Option<Reply> {
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
        RequestKind::ListConfigResources(_) if !authz.cluster(DescribeConfigs) => {
            body(ListConfigResourcesResponse::default().with_error_code(e))
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
        RequestKind::ElectLeaders(r) if !authz.cluster(Alter) => {
            // Kafka's error response: the error on top (v1+) and on every partition named.
            let results = r.topic_partitions.iter().flatten().map(|t| {
                let partitions = t.partitions.iter().map(|&p| {
                    elect_leaders_response::PartitionResult::default()
                        .with_partition_id(p)
                        .with_error_code(e)
                });
                elect_leaders_response::ReplicaElectionResult::default()
                    .with_topic(t.topic.clone())
                    .with_partition_result(partitions.collect())
            });
            body(
                ElectLeadersResponse::default()
                    .with_error_code(e)
                    .with_replica_election_results(results.collect()),
            )
        }
        _ => return None,
    };
    Some(refused)
}
