//! TxnOffsetCommit (28, v0-6): offsets committed as part of a transaction, sent to the group
//! coordinator (`group::txn_offsets`). First the offsets partition must be in the transaction,
//! as Kafka's group coordinator checks with the transaction coordinator (KIP-890): verified
//! below v5 (added by AddOffsetsToTxn before), added from v5 (transaction version 2). A failed
//! check answers every partition with its code: PRODUCER_FENCED as INVALID_PRODUCER_EPOCH, and a
//! partition not in the transaction as INVALID_TXN_STATE below v4 and TRANSACTION_ABORTABLE
//! from v4. A partition its topic does not have is UNKNOWN_TOPIC_OR_PARTITION, as in Kafka.
//!
//! Authorization comes first, as in Kafka's handler, once the topics have their names: WRITE on
//! the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group
//! (GROUP_AUTHORIZATION_FAILED) refuse every partition; a topic the caller may not read has its
//! partitions refused (TOPIC_AUTHORIZATION_FAILED) and the others are committed, and when none
//! is left the transaction is not touched.
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

use super::authorize::Authz;
use super::errors::code;
use super::Broker;
use crate::protocol::{topic_id_as_name, NewerFields};
use crate::security::acl::Operation;
use crate::storage::consumer_offsets::{partition_for, CONSUMER_OFFSETS_TOPIC};
use crate::txn::{PartitionCheck, TV_2};

/// The first version that names topics by id.
const TOPIC_IDS_FROM: i16 = 6;

pub fn handle(
    broker: &Broker,
    authz: &Authz<'_>,
    mut request: TxnOffsetCommitRequest,
    version: i16,
    newer: &NewerFields,
) -> TxnOffsetCommitResponse {
    if version < TOPIC_IDS_FROM {
        return commit(broker, authz, request, version);
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
    let mut response = commit(broker, authz, request, version);
    // The coordinator answers the topics it was given, in their order.
    for (topic, id) in response.topics.iter_mut().zip(known) {
        topic.name = topic_id_as_name(id);
    }
    response.topics.extend(unknown);
    response
}

/// Commits `request`'s topics (named) and answers them in the request's order.
fn commit(
    broker: &Broker,
    authz: &Authz<'_>,
    mut request: TxnOffsetCommitRequest,
    version: i16,
) -> TxnOffsetCommitResponse {
    if !authz.transactional_id(Operation::Write, &request.transactional_id) {
        return refuse_all(&request, ResponseError::TransactionalIdAuthorizationFailed);
    }
    if !authz.group(Operation::Read, &request.group_id) {
        return refuse_all(&request, ResponseError::GroupAuthorizationFailed);
    }
    let order: Vec<TopicName> = request.topics.iter().map(|t| t.name.clone()).collect();
    let (readable, unreadable): (Vec<_>, Vec<_>) = std::mem::take(&mut request.topics)
        .into_iter()
        .partition(|t| authz.topic(Operation::Read, &t.name));
    request.topics = readable;
    let refused = unreadable
        .iter()
        .map(|t| answer_all(t, t.name.clone(), ResponseError::TopicAuthorizationFailed));
    let mut response = if request.topics.is_empty() {
        TxnOffsetCommitResponse::default()
    } else if let Err(error) = check_transaction(broker, &request, version) {
        refuse_all(&request, error)
    } else {
        let logs = &broker.logs;
        let exists = |topic: &str, partition: i32| {
            logs.topic(topic)
                .is_some_and(|t| t.partition(partition).is_some())
        };
        broker.groups.txn_offset_commit(&request, version, &exists)
    };
    response.topics.extend(refused);
    response
        .topics
        .sort_by_key(|t| order.iter().position(|n| *n == t.name));
    response
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
