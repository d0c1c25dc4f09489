//! TxnOffsetCommit (28, v0-5): offsets committed as part of a transaction, sent to the group
//! coordinator (`group::txn_offsets`). First the offsets partition must be in the transaction,
//! as Kafka's group coordinator checks with the transaction coordinator (KIP-890): verified
//! below v5 (added by AddOffsetsToTxn before), added with v5 (transaction version 2). A failed
//! check answers every partition with its code: PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, and a
//! partition not in the transaction as INVALID_TXN_STATE below v4 and TRANSACTION_ABORTABLE
//! from v4.

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::ResponseError;

use super::errors::code;
use super::Broker;
use crate::storage::consumer_offsets::{partition_for, CONSUMER_OFFSETS_TOPIC};
use crate::txn::{PartitionCheck, TV_2};

pub fn handle(
    broker: &Broker,
    request: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    if let Err(error) = check_transaction(broker, &request, version) {
        return refuse_all(&request, error);
    }
    let logs = &broker.logs;
    let exists = |topic: &str, _partition: i32| logs.topic(topic).is_some();
    broker.groups.txn_offset_commit(&request, &exists)
}

/// The offsets partition is in the transaction (verified, or added with v5).
fn check_transaction(
    broker: &Broker,
    request: &TxnOffsetCommitRequest,
    version: i16,
) -> Result<(), ResponseError> {
    if request.group_id.is_empty() {
        return Err(ResponseError::InvalidGroupId);
    }
    let partition = [(
        CONSUMER_OFFSETS_TOPIC.to_string(),
        partition_for(request.group_id.as_str()),
    )];
    let (id, producer_id, epoch) = (
        request.transactional_id.as_str(),
        request.producer_id.0,
        request.producer_epoch,
    );
    let checked = if version >= 5 {
        broker
            .txn
            .add_partitions(id, producer_id, epoch, &partition, TV_2)
    } else {
        match broker
            .txn
            .verify_partitions(id, producer_id, epoch, &partition)
        {
            Ok(checks) if checks == [PartitionCheck::InTransaction] => Ok(()),
            Ok(_) => Err(ResponseError::TransactionAbortable),
            Err(error) => Err(error),
        }
    };
    checked.map_err(|error| match error {
        ResponseError::ProducerFenced => ResponseError::InvalidProducerEpoch,
        ResponseError::TransactionAbortable if version < 4 => ResponseError::InvalidTxnState,
        other => other,
    })
}

fn refuse_all(request: &TxnOffsetCommitRequest, error: ResponseError) -> TxnOffsetCommitResponse {
    let topics = request
        .topics
        .iter()
        .map(|topic| {
            let partitions = topic
                .partitions
                .iter()
                .map(|p| {
                    TxnOffsetCommitResponsePartition::default()
                        .with_partition_index(p.partition_index)
                        .with_error_code(code(error))
                })
                .collect();
            TxnOffsetCommitResponseTopic::default()
                .with_name(topic.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}
