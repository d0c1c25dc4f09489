//! EndTxn (26, v0-5): the producer commits or aborts its transaction (`txn::end`). v5 speaks
//! transaction version 2: every EndTxn bumps the epoch, and the response carries the producer id
//! and epoch for the next transaction. PRODUCER_FENCED is answered INVALID_PRODUCER_EPOCH below
//! v2, which does not know it.

use kafka_protocol::messages::{EndTxnRequest, EndTxnResponse, ProducerId};
use kafka_protocol::ResponseError;

use super::errors::code;
use super::Broker;
use crate::txn::{TV_0, TV_2};

pub fn handle(broker: &Broker, request: EndTxnRequest, version: i16) -> EndTxnResponse {
    let client_tv = if version >= 5 { TV_2 } else { TV_0 };
    let result = broker.txn.end_txn(
        request.transactional_id.as_str(),
        request.producer_id.0,
        request.producer_epoch,
        request.committed,
        client_tv,
    );
    let response = EndTxnResponse::default()
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    match result {
        Ok((producer_id, epoch)) if version >= 5 => response
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(epoch),
        Ok(_) => response,
        Err(ResponseError::ProducerFenced) if version < 2 => {
            response.with_error_code(code(ResponseError::InvalidProducerEpoch))
        }
        Err(error) => response.with_error_code(code(error)),
    }
}
