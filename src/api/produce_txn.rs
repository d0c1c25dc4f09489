//! The transactional part of Produce: which producer a request's transactional batches belong
//! to (one at most, and only with a transactional id), and whether a transactional batch that
//! would open a transaction on its partition is part of one the coordinator knows (KIP-890's
//! verification; `storage::TxnVerification`).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::ProduceRequest;
use kafka_protocol::ResponseError;

use super::errors::{code, Refused};
use super::Broker;
use crate::record_batch::header::BatchHeader;
use crate::storage::TxnVerification;
use crate::txn::{PartitionCheck, TV_2};

/// The producer of a request's transactional batches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnProducer {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
}

/// The header of the first batch of a partition's records, if they hold one.
fn first_header(records: &Option<Bytes>) -> Option<BatchHeader> {
    records.as_deref().and_then(|r| BatchHeader::parse(r).ok())
}

/// Whether some partition's batch is transactional (Kafka's `hasTransactionalRecords`).
pub fn has_transactional_records(request: &ProduceRequest) -> bool {
    request
        .topic_data
        .iter()
        .flat_map(|t| t.partition_data.iter())
        .filter_map(|p| first_header(&p.records))
        .any(|h| h.is_transactional())
}

/// Kafka's request-wide checks: transactional batches need the request's transactional id
/// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED without one) and may come from one producer only
/// (INVALID_PRODUCER_ID_MAPPING). Returns that producer, None when no batch is transactional.
pub fn transactional_producer(
    request: &ProduceRequest,
) -> Result<Option<TxnProducer>, ResponseError> {
    let mut producer: Option<(i64, i16)> = None;
    let mut any_transactional = false;
    let headers = request
        .topic_data
        .iter()
        .flat_map(|t| t.partition_data.iter())
        .filter_map(|p| first_header(&p.records))
        .filter(BatchHeader::is_transactional);
    for header in headers {
        any_transactional = true;
        if header.producer_id < 0 {
            continue;
        }
        let this = (header.producer_id, header.producer_epoch);
        if producer.is_some_and(|p| p != this) {
            return Err(ResponseError::InvalidProducerIdMapping);
        }
        producer = Some(this);
    }
    if !any_transactional {
        return Ok(None);
    }
    let Some(transactional_id) = request.transactional_id.as_ref() else {
        return Err(ResponseError::TransactionalIdAuthorizationFailed);
    };
    Ok(producer.map(|(producer_id, producer_epoch)| TxnProducer {
        transactional_id: transactional_id.to_string(),
        producer_id,
        producer_epoch,
    }))
}

/// The verification of each transactional partition of a request, by (topic name or id,
/// partition): how its append is to be checked, or the refusal it gets instead.
pub type Verifications = HashMap<PartitionKey, Result<TxnVerification, Refused>>;

/// A produced partition: its topic's name (its id from Produce v13) and index.
pub type PartitionKey = (String, i32);

/// KIP-890's verification, before anything is appended (Kafka's `handleProduceAppend`): each
/// partition whose transactional batch would open a transaction there starts a verification
/// (its guard), then the coordinator is asked once for all of them, to verify that they are in
/// the transaction (Produce v3-11, transaction version 1) or to add them (v12+, version 2).
/// While the transaction is being completed (CONCURRENT_TRANSACTIONS) the question is asked
/// again, every `add.partitions.to.txn.retry.backoff.ms`, for up to its `.max.ms`. With
/// verification off and a version 1 client, nothing is checked.
pub async fn verify(
    broker: &Broker,
    request: &ProduceRequest,
    producer: &TxnProducer,
    version: i16,
) -> Verifications {
    let mut verifications = Verifications::new();
    if version <= 11 && !broker.config.transaction_partition_verification_enable {
        return verifications;
    }
    let now_ms = broker.clock.now_ms();
    // (key in `verifications`, (topic name, partition), guard) of each partition to ask about.
    let mut waiting: Vec<(PartitionKey, (String, i32), u64)> = Vec::new();
    for topic_data in &request.topic_data {
        let (key_name, topic) = if version >= 13 {
            let topic = broker.logs.topic_by_id(topic_data.topic_id);
            (topic_data.topic_id.to_string(), topic)
        } else {
            (
                topic_data.name.to_string(),
                broker.logs.topic(topic_data.name.as_str()),
            )
        };
        let Some(topic) = topic else { continue };
        for data in &topic_data.partition_data {
            let Some(header) = first_header(&data.records).filter(BatchHeader::is_transactional)
            else {
                continue;
            };
            let Some(partition) = topic.partition(data.index) else {
                continue;
            };
            let key = (key_name.clone(), data.index);
            let started = partition.start_txn_verification(
                producer.producer_id,
                header.base_sequence,
                producer.producer_epoch,
                now_ms,
            );
            match started {
                // Already in a transaction here: the append checks the rest.
                Ok(None) => {
                    verifications.insert(key, Ok(TxnVerification::Guard(None)));
                }
                Ok(Some(guard)) => waiting.push((key, (topic.name.clone(), data.index), guard)),
                // The append answers the partition's own error.
                Err(_) => {}
            }
        }
    }
    if waiting.is_empty() {
        return verifications;
    }
    let partitions: Vec<(String, i32)> = waiting.iter().map(|(_, p, _)| p.clone()).collect();
    let answers = ask_coordinator(broker, producer, &partitions, version).await;
    for ((key, _, guard), answer) in waiting.into_iter().zip(answers) {
        let verified = answer
            .map(|()| TxnVerification::Guard(Some(guard)))
            .map_err(|error| translate(error, version));
        verifications.insert(key, verified);
    }
    verifications
}

/// The coordinator's answer for each partition, retrying CONCURRENT_TRANSACTIONS for a while.
async fn ask_coordinator(
    broker: &Broker,
    producer: &TxnProducer,
    partitions: &[(String, i32)],
    version: i16,
) -> Vec<Result<(), ResponseError>> {
    let backoff =
        Duration::from_millis(broker.config.add_partitions_to_txn_retry_backoff_ms.max(1) as u64);
    let give_up = Instant::now()
        + Duration::from_millis(
            broker
                .config
                .add_partitions_to_txn_retry_backoff_max_ms
                .max(0) as u64,
        );
    loop {
        let answers = ask_once(broker, producer, partitions, version);
        let concurrent = answers.contains(&Err(ResponseError::ConcurrentTransactions));
        if !concurrent || Instant::now() >= give_up {
            return answers;
        }
        tokio::time::sleep(backoff).await;
    }
}

fn ask_once(
    broker: &Broker,
    producer: &TxnProducer,
    partitions: &[(String, i32)],
    version: i16,
) -> Vec<Result<(), ResponseError>> {
    let (id, producer_id, epoch) = (
        producer.transactional_id.as_str(),
        producer.producer_id,
        producer.producer_epoch,
    );
    if version >= 12 {
        let added = broker
            .txn
            .add_partitions(id, producer_id, epoch, partitions, TV_2);
        return vec![added; partitions.len()];
    }
    match broker
        .txn
        .verify_partitions(id, producer_id, epoch, partitions)
    {
        Ok(checks) => checks
            .into_iter()
            .map(|check| match check {
                PartitionCheck::InTransaction => Ok(()),
                PartitionCheck::NotAdded => Err(ResponseError::TransactionAbortable),
            })
            .collect(),
        Err(error) => vec![Err(error); partitions.len()],
    }
}

/// Kafka's translation of the coordinator's answer for a producer (`AddPartitionsToTxnManager`
/// and `ReplicaManager`): a fenced producer is INVALID_PRODUCER_EPOCH; a partition not in the
/// transaction is INVALID_TXN_STATE to Produce v10 and older, which do not know
/// TRANSACTION_ABORTABLE; a coordinator that cannot answer now is NOT_ENOUGH_REPLICAS, which
/// clients retry without looking the partition's leader up again (CONCURRENT_TRANSACTIONS too,
/// except for version 2 clients, which know it).
fn translate(error: ResponseError, version: i16) -> Refused {
    let refused = |error: ResponseError, message: String| Refused {
        error_code: code(error),
        message,
    };
    let cannot_verify = |error: ResponseError| {
        refused(
            ResponseError::NotEnoughReplicas,
            format!("Unable to verify the partition has been added to the transaction. Underlying error: {error}"),
        )
    };
    match error {
        ResponseError::ProducerFenced => {
            refused(ResponseError::InvalidProducerEpoch, String::new())
        }
        ResponseError::TransactionAbortable if version <= 10 => refused(
            ResponseError::InvalidTxnState,
            "Partition was not added to the transaction".to_string(),
        ),
        ResponseError::InvalidTxnState => refused(
            ResponseError::InvalidTxnState,
            "Partition was not added to the transaction".to_string(),
        ),
        ResponseError::ConcurrentTransactions if version <= 11 => cannot_verify(error),
        ResponseError::CoordinatorLoadInProgress
        | ResponseError::CoordinatorNotAvailable
        | ResponseError::NotCoordinator
        | ResponseError::NetworkException => cannot_verify(error),
        other => refused(other, String::new()),
    }
}
