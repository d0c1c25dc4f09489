//! InitProducerId (22) for idempotent producers: a fresh producer id, unique for the life of the
//! log directory, at epoch 0 — what Kafka does for a request without a transactional id
//! (KIP-360's epoch bump is only for transactional producers there too). Transactional ids are
//! refused until transactions are implemented.

use kafka_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ProducerId};
use kafka_protocol::ResponseError;

use super::errors::code;
use super::Broker;

pub fn handle(broker: &Broker, request: InitProducerIdRequest) -> InitProducerIdResponse {
    let refused = |error: ResponseError| {
        InitProducerIdResponse::default()
            .with_error_code(code(error))
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    if request.transactional_id.is_some() {
        return refused(ResponseError::TransactionalIdAuthorizationFailed);
    }
    match broker.logs.producer_ids().next_id() {
        Ok(id) => InitProducerIdResponse::default()
            .with_producer_id(ProducerId(id))
            .with_producer_epoch(0),
        Err(e) => {
            tracing::error!("cannot reserve producer ids: {e}");
            refused(ResponseError::KafkaStorageError)
        }
    }
}
