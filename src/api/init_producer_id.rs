//! InitProducerId (22, v0-5). Without a transactional id: a fresh producer id, unique for the
//! life of the log directory, at epoch 0, as Kafka answers idempotent producers. With one: the
//! transaction coordinator's answer (`txn::init`), which fences older producers of the id; the
//! `__transaction_state` topic is created on the way, as Kafka creates it on first use.
//! A request naming only one of producer id and epoch is INVALID_REQUEST; PRODUCER_FENCED is
//! answered INVALID_PRODUCER_EPOCH below v4, which does not know it.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

use super::errors::code;
use super::Broker;
use crate::storage::transaction_state::ensure_topic;

pub fn handle(
    broker: &Broker,
    request: InitProducerIdRequest,
    version: i16,
) -> InitProducerIdResponse {
    let refused = |error: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(code(error))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    let expected = match (request.producer_id.0, request.producer_epoch) {
        (-1, -1) => None,
        (-1, _) | (_, -1) => return refused(ResponseError::InvalidRequest),
        (producer_id, epoch) => Some((producer_id, epoch)),
    };
    let Some(transactional_id) = request.transactional_id.as_deref() else {
        return match broker.logs.producer_ids().next_id() {
            Ok(id) => InitProducerIdResponse::default()
                .with_producer_id(ProducerId(id))
                .with_producer_epoch(0),
            Err(e) => {
                tracing::error!("cannot reserve producer ids: {e}");
                refused(ResponseError::KafkaStorageError)
            }
        };
    };
    if let Err(e) = ensure_topic(&broker.logs, broker.clock.now_ms()) {
        tracing::error!("cannot create the transaction state topic: {e}");
        return refused(ResponseError::CoordinatorNotAvailable);
    }
    match broker
        .txn
        .init_producer_id(transactional_id, request.transaction_timeout_ms, expected)
    {
        Ok((producer_id, epoch)) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch),
        Err(ResponseError::ProducerFenced) if version < 4 => {
            refused(ResponseError::InvalidProducerEpoch)
        }
        Err(error) => refused(error),
    }
}
