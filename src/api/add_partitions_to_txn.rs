//! AddPartitionsToTxn (24, v0-5) and AddOffsetsToTxn (25, v0-4). v0-3 come from clients: one
//! transaction, its partitions added by the coordinator (`txn::add`). v4-5 batch several
//! transactions, and a `verify_only` one is answered from memory (TRANSACTION_ABORTABLE for a
//! partition not in it), as brokers ask their coordinators for KIP-890's produce verification.
//!
//! A partition that does not exist fails the whole transaction's request, as in Kafka: it gets
//! UNKNOWN_TOPIC_OR_PARTITION and the others OPERATION_NOT_ATTEMPTED, and nothing is added. So
//! does, from clients (v0-3), a topic the caller may not write or an internal one (Kafka never
//! adds those): TOPIC_AUTHORIZATION_FAILED, checked before existence. The transactional id's
//! WRITE (v0-3) and the cluster's CLUSTER_ACTION (v4+) are checked before, in `authorize`.
//! PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH to versions that do not know it (below v2
//! for both APIs).

use std::collections::BTreeMap;

use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::{code, NONE};
use super::Broker;
use crate::storage::consumer_offsets::{partition_for, CONSUMER_OFFSETS_TOPIC};
use crate::storage::transaction_state::TRANSACTION_STATE_TOPIC;
use crate::txn::{PartitionCheck, TV_0};

/// Each topic's partitions, deduplicated and in order.
type Partitions = BTreeMap<String, Vec<i32>>;

/// `writable` says which topics the caller may add (WRITE; v0-3 only).
pub fn handle(
    broker: &Broker,
    request: AddPartitionsToTxnRequest,
    version: i16,
    writable: &dyn Fn(&str) -> bool,
) -> AddPartitionsToTxnResponse {
    if version < 4 {
        let refused = |topic: &str| {
            topic == CONSUMER_OFFSETS_TOPIC || topic == TRANSACTION_STATE_TOPIC || !writable(topic)
        };
        let result = add_one(
            broker,
            (
                request.v3_and_below_transactional_id.as_str(),
                request.v3_and_below_producer_id.0,
                request.v3_and_below_producer_epoch,
            ),
            false,
            &request.v3_and_below_topics,
            (version, &refused),
        );
        return AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(result);
    }
    let results = request
        .transactions
        .iter()
        .map(|txn| {
            let topic_results = add_one(
                broker,
                (
                    txn.transactional_id.as_str(),
                    txn.producer_id.0,
                    txn.producer_epoch,
                ),
                txn.verify_only,
                &txn.topics,
                (version, &|_: &str| false),
            );
            AddPartitionsToTxnResult::default()
                .with_transactional_id(txn.transactional_id.clone())
                .with_topic_results(topic_results)
        })
        .collect();
    AddPartitionsToTxnResponse::default().with_results_by_transaction(results)
}

/// One transaction's partitions (its id, producer id and epoch): each answered with its own
/// code. `refused` names the topics the caller may not add.
fn add_one(
    broker: &Broker,
    (transactional_id, producer_id, producer_epoch): (&str, i64, i16),
    verify_only: bool,
    topics: &[AddPartitionsToTxnTopic],
    (version, refused): (i16, &dyn Fn(&str) -> bool),
) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut requested = Partitions::new();
    for topic in topics {
        let partitions = requested.entry(topic.name.to_string()).or_default();
        partitions.extend(topic.partitions.iter().copied());
        partitions.sort_unstable();
        partitions.dedup();
    }
    let exists = |topic: &str, partition: i32| {
        broker
            .logs
            .topic(topic)
            .is_some_and(|t| t.partition(partition).is_some())
    };
    if requested
        .iter()
        .any(|(topic, partitions)| refused(topic) || partitions.iter().any(|p| !exists(topic, *p)))
    {
        return answer(&requested, |topic, partition| {
            if refused(topic) {
                code(ResponseError::TopicAuthorizationFailed)
            } else if exists(topic, partition) {
                code(ResponseError::OperationNotAttempted)
            } else {
                code(ResponseError::UnknownTopicOrPartition)
            }
        });
    }
    let partitions: Vec<(String, i32)> = requested
        .iter()
        .flat_map(|(topic, ps)| ps.iter().map(move |p| (topic.clone(), *p)))
        .collect();
    let txn = &broker.txn;
    if verify_only {
        return match txn.verify_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            &partitions,
        ) {
            Ok(checks) => {
                let mut checks = checks.into_iter();
                answer(&requested, |_, _| match checks.next() {
                    Some(PartitionCheck::InTransaction) => NONE,
                    _ => code(ResponseError::TransactionAbortable),
                })
            }
            Err(error) => answer(&requested, |_, _| code(error)),
        };
    }
    let result = txn.add_partitions(
        transactional_id,
        producer_id,
        producer_epoch,
        &partitions,
        TV_0,
    );
    let error_code = match result {
        Ok(()) => NONE,
        Err(ResponseError::ProducerFenced) if version < 2 => {
            code(ResponseError::InvalidProducerEpoch)
        }
        Err(error) => code(error),
    };
    answer(&requested, |_, _| error_code)
}

fn answer(
    requested: &Partitions,
    mut error_code: impl FnMut(&str, i32) -> i16,
) -> Vec<AddPartitionsToTxnTopicResult> {
    requested
        .iter()
        .map(|(topic, partitions)| {
            let results = partitions
                .iter()
                .map(|&p| {
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(p)
                        .with_partition_error_code(error_code(topic, p))
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(TopicName(StrBytes::from_string(topic.clone())))
                .with_results_by_partition(results)
        })
        .collect()
}

/// AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction, so the
/// TxnOffsetCommit that follows may write there.
pub fn add_offsets(
    broker: &Broker,
    request: AddOffsetsToTxnRequest,
    version: i16,
) -> AddOffsetsToTxnResponse {
    // The markers that end the transaction land in that partition: it must exist.
    if let Err(e) =
        crate::storage::consumer_offsets::ensure_topic(&broker.logs, broker.clock.now_ms())
    {
        tracing::error!("cannot create the offsets topic: {e}");
        return AddOffsetsToTxnResponse::default()
            .with_error_code(code(ResponseError::CoordinatorNotAvailable));
    }
    let partition = (
        CONSUMER_OFFSETS_TOPIC.to_string(),
        partition_for(request.group_id.as_str()),
    );
    let result = broker.txn.add_partitions(
        request.transactional_id.as_str(),
        request.producer_id.0,
        request.producer_epoch,
        &[partition],
        TV_0,
    );
    let error_code = match result {
        Ok(()) => NONE,
        Err(ResponseError::ProducerFenced) if version < 2 => {
            code(ResponseError::InvalidProducerEpoch)
        }
        Err(error) => code(error),
    };
    AddOffsetsToTxnResponse::default().with_error_code(error_code)
}
