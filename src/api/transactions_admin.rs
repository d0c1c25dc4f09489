//! What `kafka-transactions` asks a broker: ListTransactions (66), DescribeTransactions (65) and
//! DescribeProducers (61). sluice has no transaction coordinator, so, as a Kafka broker on which
//! no transaction was ever begun, it lists none and knows no transactional id. DescribeProducers
//! shows each partition's idempotent producers from its producer state, with Kafka's -1 for
//! the coordinator epoch and the transaction start offset of a producer outside a transaction.

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::describe_transactions_response::TransactionState;
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, DescribeTransactionsRequest,
    DescribeTransactionsResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
};
use kafka_protocol::ResponseError;

use super::errors::code;
use super::Broker;
use crate::storage::ActiveProducer;

/// The states a transaction can be in, by Kafka's names: a ListTransactions filter naming any
/// other is echoed back as unknown.
const TRANSACTION_STATES: &[&str] = &[
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "Dead",
    "PrepareEpochFence",
];

pub fn list_transactions(request: ListTransactionsRequest) -> ListTransactionsResponse {
    let unknown_state_filters = request
        .state_filters
        .into_iter()
        .filter(|state| !TRANSACTION_STATES.contains(&state.as_str()))
        .collect();
    ListTransactionsResponse::default().with_unknown_state_filters(unknown_state_filters)
}

pub fn describe_transactions(request: DescribeTransactionsRequest) -> DescribeTransactionsResponse {
    let states = request
        .transactional_ids
        .into_iter()
        .map(|id| {
            TransactionState::default()
                .with_error_code(code(ResponseError::TransactionalIdNotFound))
                .with_transactional_id(id)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
        })
        .collect();
    DescribeTransactionsResponse::default().with_transaction_states(states)
}

pub fn describe_producers(
    broker: &Broker,
    request: DescribeProducersRequest,
) -> DescribeProducersResponse {
    let topics = request
        .topics
        .into_iter()
        .map(|requested| {
            let topic = broker.logs.topic(requested.name.as_str());
            let partitions = requested
                .partition_indexes
                .iter()
                .map(|&index| {
                    let response = PartitionResponse::default().with_partition_index(index);
                    let partition = topic.as_ref().and_then(|t| t.partition(index));
                    match partition.map(|p| p.active_producers()) {
                        Some(Ok(active)) => {
                            response.with_active_producers(active_producers(&active))
                        }
                        _ => response.with_error_code(code(ResponseError::UnknownTopicOrPartition)),
                    }
                })
                .collect();
            TopicResponse::default()
                .with_name(requested.name)
                .with_partitions(partitions)
        })
        .collect();
    DescribeProducersResponse::default().with_topics(topics)
}

/// A partition's idempotent producers, as DescribeProducers reports them.
fn active_producers(active: &[ActiveProducer]) -> Vec<ProducerState> {
    active
        .iter()
        .map(|producer| {
            ProducerState::default()
                .with_producer_id(ProducerId(producer.producer_id))
                .with_producer_epoch(i32::from(producer.epoch))
                .with_last_sequence(producer.last_sequence)
                .with_last_timestamp(producer.last_timestamp_ms)
                .with_coordinator_epoch(producer.coordinator_epoch)
                .with_current_txn_start_offset(producer.current_txn_start_offset)
        })
        .collect()
}
