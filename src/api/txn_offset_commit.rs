//! TxnOffsetCommit (28, v0-6): offsets committed as part of a transaction, sent to the group
//! coordinator (`group::txn_offsets`). First the offsets partition must be in the transaction,
//! as Kafka's group coordinator checks with the transaction coordinator (KIP-890): verified
//! below v5 (added by AddOffsetsToTxn before), added from v5 (transaction version 2). A failed
//! check answers every partition with its code: PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, and a
//! partition not in the transaction as INVALID_TXN_STATE below v4 and TRANSACTION_ABORTABLE
//! from v4. A partition its topic does not have is UNKNOWN_TOPIC_OR_PARTITION, as in Kafka.
//!
//! v6 (KIP-1319) names topics by id: the ids are resolved to names here, before anything else
//! (an id that names no topic, the zero id included, answers UNKNOWN_TOPIC_ID for each of its
//! partitions, as Kafka 4.4 does), and the response names each topic by its id again.
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestTopic;
use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{TopicName, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::code;
use super::Broker;
use crate::protocol::{topic_id_as_name, NewerFields};
use crate::storage::consumer_offsets::{partition_for, CONSUMER_OFFSETS_TOPIC};
use crate::txn::{PartitionCheck, TV_2};

/// The first version that names topics by id.
const TOPIC_IDS_FROM: i16 = 6;

pub fn handle(
    broker: &Broker,
    mut request: TxnOffsetCommitRequest,
    version: i16,
    newer: &NewerFields,
) -> TxnOffsetCommitResponse {
    if version < TOPIC_IDS_FROM {
        return commit(broker, &request, version);
    }
    let ids = match newer {
        NewerFields::TxnOffsetCommit { topic_ids } => topic_ids.as_slice(),
        _ => &[],
    };
    // Each topic is resolved in place, with its id kept for the response; the unknown ones
    // are answered at once and leave the request.
    let mut known = Vec::with_capacity(request.topics.len());
    let mut unknown = Vec::new();
    for (mut topic, id) in std::mem::take(&mut request.topics).into_iter().zip(ids) {
        let found = (!id.is_nil())
            .then(|| broker.logs.topic_by_id(*id))
            .flatten();
        match found {
            Some(found) => {
                topic.name = TopicName(StrBytes::from_string(found.name.clone()));
                known.push(*id);
                request.topics.push(topic);
            }
            None => unknown.push(answer_all(
                &topic,
                topic_id_as_name(*id),
                ResponseError::UnknownTopicId,
            )),
        }
    }
    let mut response = commit(broker, &request, version);
    // The coordinator answers the topics it was given, in their order.
    for (topic, id) in response.topics.iter_mut().zip(known) {
        topic.name = topic_id_as_name(id);
    }
    response.topics.extend(unknown);
    response
}

fn commit(
    broker: &Broker,
    request: &TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    if let Err(error) = check_transaction(broker, request, version) {
        return refuse_all(request, error);
    }
    let logs = &broker.logs;
    let exists = |topic: &str, partition: i32| {
        logs.topic(topic)
            .is_some_and(|t| t.partition(partition).is_some())
    };
    broker.groups.txn_offset_commit(request, version, &exists)
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
        .map(|topic| answer_all(topic, topic.name.clone(), error))
        .collect();
    TxnOffsetCommitResponse::default().with_topics(topics)
}

/// Every partition of `topic` answered with `error`, under `name`.
fn answer_all(
    topic: &TxnOffsetCommitRequestTopic,
    name: TopicName,
    error: ResponseError,
) -> TxnOffsetCommitResponseTopic {
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
        .with_name(name)
        .with_partitions(partitions)
}
