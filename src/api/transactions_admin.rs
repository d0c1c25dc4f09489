//! What `kafka-transactions` asks a broker: ListTransactions (66, v0-2) and
//! DescribeTransactions (65) from the transaction coordinator (`txn::admin`), and
//! DescribeProducers (61) from each partition's producer state: epoch, last sequence and time,
//! the coordinator epoch of the producer's last marker and the first offset of its open
//! transaction (-1 for none), which `kafka-transactions find-hanging` and `abort` work from.

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::list_transactions_response;
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, DescribeTransactionsRequest,
    DescribeTransactionsResponse, ListTransactionsRequest, ListTransactionsResponse, ProducerId,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::code;
use super::Broker;
use crate::storage::ActiveProducer;
use crate::txn::TxnState;

/// ListTransactions: a state filter naming no state is echoed back as unknown (and the others
/// still apply); a transactional-id pattern (v2) must be a valid regular expression, matched
/// against the whole id.
pub fn list_transactions(
    broker: &Broker,
    request: ListTransactionsRequest,
) -> ListTransactionsResponse {
    let mut states = Vec::new();
    let mut unknown_state_filters = Vec::new();
    for filter in request.state_filters {
        match TxnState::from_name(filter.as_str()) {
            Some(state) => states.push(state),
            None => unknown_state_filters.push(filter),
        }
    }
    let response =
        ListTransactionsResponse::default().with_unknown_state_filters(unknown_state_filters);
    let pattern = match request.transactional_id_pattern.as_deref() {
        None | Some("") => None,
        Some(pattern) => match regex::Regex::new(&format!("^(?:{pattern})$")) {
            Ok(regex) => Some(regex),
            Err(_) => {
                return response.with_error_code(code(ResponseError::InvalidRegularExpression))
            }
        },
    };
    let producer_ids: Vec<i64> = request.producer_id_filters.iter().map(|p| p.0).collect();
    match broker.txn.list_transactions(
        &states,
        &producer_ids,
        request.duration_filter,
        pattern.as_ref(),
    ) {
        Ok(listed) => response.with_transaction_states(
            listed
                .into_iter()
                .map(|t| {
                    list_transactions_response::TransactionState::default()
                        .with_transactional_id(StrBytes::from_string(t.transactional_id).into())
                        .with_producer_id(ProducerId(t.producer_id))
                        .with_transaction_state(StrBytes::from_static_str(t.state.name()))
                })
                .collect(),
        ),
        Err(error) => response.with_error_code(code(error)),
    }
}

pub fn describe_transactions(
    broker: &Broker,
    request: DescribeTransactionsRequest,
) -> DescribeTransactionsResponse {
    let states = request
        .transactional_ids
        .into_iter()
        .map(|id| {
            let answer = TransactionState::default()
                .with_transactional_id(id.clone())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
                .with_transaction_start_time_ms(-1);
            match broker.txn.describe_transaction(id.as_str()) {
                Ok(d) => answer
                    .with_transaction_state(StrBytes::from_static_str(d.state.name()))
                    .with_transaction_timeout_ms(d.timeout_ms)
                    .with_transaction_start_time_ms(d.start_ms)
                    .with_producer_id(ProducerId(d.producer_id))
                    .with_producer_epoch(d.producer_epoch)
                    .with_topics(
                        d.partitions
                            .into_iter()
                            .map(|(topic, partitions)| {
                                TopicData::default()
                                    .with_topic(TopicName(StrBytes::from_string(topic)))
                                    .with_partitions(partitions)
                            })
                            .collect(),
                    ),
                Err(error) => answer.with_error_code(code(error)),
            }
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
