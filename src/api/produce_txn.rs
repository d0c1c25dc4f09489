//! The transactional part of Produce: which producer a request's transactional batches belong
//! to (one at most, and only with a transactional id), and whether a transactional batch that
//! would open a transaction on its partition is part of one the coordinator knows (KIP-890's
//! verification; `storage::TxnVerification`).

use bytes::Bytes;
use kafka_protocol::messages::ProduceRequest;
use kafka_protocol::ResponseError;

use super::Broker;
use crate::record_batch::header::BatchHeader;
use crate::storage::TxnVerification;

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

/// How the append of a partition's batch is verified: not at all for a plain batch, or when
/// verification is off and the client speaks transaction version 1 (Produce v11 and older);
/// otherwise the batch must continue a transaction already open on the partition.
pub fn verification(broker: &Broker, header: &BatchHeader, version: i16) -> TxnVerification {
    if !header.is_transactional()
        || (version <= 11 && !broker.config.transaction_partition_verification_enable)
    {
        return TxnVerification::Off;
    }
    TxnVerification::Guard(None)
}
