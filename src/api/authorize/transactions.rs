//! Kafka's checks of the producer and transaction APIs (`KafkaApis`): InitProducerId, the
//! request-level checks of AddPartitionsToTxn (TRANSACTIONAL_ID WRITE from clients, v0-3;
//! CLUSTER_ACTION from brokers, v4+), AddOffsetsToTxn (TRANSACTIONAL_ID WRITE, then group READ),
//! EndTxn (TRANSACTIONAL_ID WRITE) and WriteTxnMarkers (CLUSTER ALTER or CLUSTER_ACTION), and
//! what `kafka-transactions` asks (DescribeProducers, DescribeTransactions, ListTransactions).
//! Called by `checks::before` and `checks::after`. Produce's, AddPartitionsToTxn's per-topic
//! and TxnOffsetCommit's checks are in their handlers, which resolve the topics first.

use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::denied::{Denied, CLUSTER_DENIED, GROUP_DENIED, TOPIC_DENIED, TXN_DENIED};
use super::Authz;
use crate::api::errors::code;
use crate::api::{body, Reply};
use crate::security::acl::{Operation, ResourceType};
use crate::storage::validate_topic_name;
use Operation::*;

/// The checks of one such request before dispatch; None when `request` is none of them.
pub(super) fn before(
    authz: &Authz<'_>,
    request: &mut RequestKind,
    version: i16,
) -> Option<Result<Denied, Reply>> {
    let denied = match request {
        RequestKind::InitProducerId(r) => {
            return Some(init_producer_id(authz, r).map_or(Ok(Denied::Nothing), Err));
        }
        RequestKind::AddPartitionsToTxn(r) => {
            return Some(add_partitions(authz, r, version).map_or(Ok(Denied::Nothing), Err));
        }
        RequestKind::AddOffsetsToTxn(r) => {
            let error = if !authz.transactional_id(Write, &r.transactional_id) {
                TXN_DENIED
            } else if !authz.group(Read, &r.group_id) {
                GROUP_DENIED
            } else {
                return Some(Ok(Denied::Nothing));
            };
            return Some(Err(body(
                AddOffsetsToTxnResponse::default().with_error_code(code(error)),
            )));
        }
        RequestKind::EndTxn(r) if !authz.transactional_id(Write, &r.transactional_id) => {
            return Some(Err(body(
                EndTxnResponse::default()
                    .with_error_code(code(TXN_DENIED))
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
            )));
        }
        RequestKind::WriteTxnMarkers(r)
            if !authz.cluster(Alter) && !authz.cluster(ClusterAction) =>
        {
            return Some(Err(body(write_txn_markers_refused(r))));
        }
        RequestKind::DescribeProducers(r) => describe_producers(authz, r),
        RequestKind::DescribeTransactions(r) => {
            let order = r.transactional_ids.clone();
            let mut refused = Vec::new();
            r.transactional_ids.retain(|id| {
                let ok = authz.transactional_id(Describe, id);
                if !ok {
                    refused.push(
                        describe_transactions_response::TransactionState::default()
                            .with_transactional_id(id.clone())
                            .with_error_code(code(TXN_DENIED)),
                    );
                }
                ok
            });
            Denied::DescribeTransactions { refused, order }
        }
        RequestKind::ListTransactions(_) => Denied::ListTransactions,
        _ => return None,
    };
    Some(Ok(denied))
}

/// From clients (v0-3): WRITE on the transactional id, else every partition is refused. From
/// brokers (v4+): CLUSTER_ACTION, else the whole request.
fn add_partitions(authz: &Authz<'_>, r: &AddPartitionsToTxnRequest, version: i16) -> Option<Reply> {
    use add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
    };
    if version >= 4 {
        return (!authz.cluster(ClusterAction)).then(|| {
            body(AddPartitionsToTxnResponse::default().with_error_code(code(CLUSTER_DENIED)))
        });
    }
    if authz.transactional_id(Write, &r.v3_and_below_transactional_id) {
        return None;
    }
    let results = r
        .v3_and_below_topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|&p| {
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(p)
                        .with_partition_error_code(code(TXN_DENIED))
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.name.clone())
                .with_results_by_partition(partitions)
        })
        .collect();
    Some(body(
        AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results),
    ))
}

/// Kafka's error response to WriteTxnMarkers: CLUSTER_AUTHORIZATION_FAILED on every partition
/// of every marker.
fn write_txn_markers_refused(r: &WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
    use write_txn_markers_response::{
        WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    };
    let markers = r
        .markers
        .iter()
        .map(|m| {
            let topics = m
                .topics
                .iter()
                .map(|t| {
                    let partitions = t
                        .partition_indexes
                        .iter()
                        .map(|&p| {
                            WritableTxnMarkerPartitionResult::default()
                                .with_partition_index(p)
                                .with_error_code(code(CLUSTER_DENIED))
                        })
                        .collect();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(t.name.clone())
                        .with_partitions(partitions)
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(m.producer_id)
                .with_topics(topics)
        })
        .collect();
    WriteTxnMarkersResponse::default().with_markers(markers)
}

/// With a transactional id: TRANSACTIONAL_ID WRITE. Without (an idempotent producer, KIP-679):
/// CLUSTER IDEMPOTENT_WRITE, or WRITE on some topic.
fn init_producer_id(authz: &Authz<'_>, r: &InitProducerIdRequest) -> Option<Reply> {
    let allowed = match &r.transactional_id {
        Some(id) => authz.transactional_id(Write, id),
        None => authz.cluster(IdempotentWrite) || authz.any(Write, ResourceType::Topic),
    };
    if allowed {
        return None;
    }
    let e = if r.transactional_id.is_some() {
        TXN_DENIED
    } else {
        CLUSTER_DENIED
    };
    Some(body(
        InitProducerIdResponse::default()
            .with_error_code(code(e))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1),
    ))
}

/// Topic READ, after the name's validity (an invalid name is INVALID_TOPIC_EXCEPTION whoever
/// asks); each partition of a refused topic carries the error and its message.
fn describe_producers(authz: &Authz<'_>, r: &mut DescribeProducersRequest) -> Denied {
    use describe_producers_response::{PartitionResponse, TopicResponse};
    let order = r.topics.iter().map(|t| t.name.clone()).collect();
    let mut refused = Vec::new();
    r.topics.retain(|t| {
        let error = match validate_topic_name(&t.name) {
            Err(e) => (ResponseError::InvalidTopicException, e.to_string()),
            Ok(()) if !authz.topic(Read, &t.name) => (TOPIC_DENIED, TOPIC_DENIED.to_string()),
            Ok(()) => return true,
        };
        let partitions = t
            .partition_indexes
            .iter()
            .map(|&index| {
                PartitionResponse::default()
                    .with_partition_index(index)
                    .with_error_code(code(error.0))
                    .with_error_message(Some(StrBytes::from_string(error.1.clone())))
            })
            .collect();
        refused.push(
            TopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions),
        );
        false
    });
    Denied::DescribeProducers { refused, order }
}

/// Puts the refused topics back in the request's order.
pub(super) fn describe_producers_after(
    refused: Vec<describe_producers_response::TopicResponse>,
    order: &[TopicName],
    r: &mut DescribeProducersResponse,
) {
    r.topics.extend(refused);
    r.topics
        .sort_by_key(|t| order.iter().position(|n| *n == t.name));
}

/// The refused ids back in the request's order; an id described keeps only the topics the
/// caller may describe.
pub(super) fn describe_transactions_after(
    authz: &Authz<'_>,
    refused: Vec<describe_transactions_response::TransactionState>,
    order: &[TransactionalId],
    r: &mut DescribeTransactionsResponse,
) {
    for state in r.transaction_states.iter_mut() {
        state.topics.retain(|t| authz.topic(Describe, &t.topic));
    }
    r.transaction_states.extend(refused);
    r.transaction_states
        .sort_by_key(|s| order.iter().position(|id| *id == s.transactional_id));
}

/// Only the transactions whose id the caller may describe are listed.
pub(super) fn list_transactions_after(authz: &Authz<'_>, r: &mut ListTransactionsResponse) {
    r.transaction_states
        .retain(|s| authz.transactional_id(Describe, &s.transactional_id));
}
