//! FindCoordinator (10): this broker coordinates every group and every transactional id.
//! v0-3 ask for one key; v4+ for a batch of keys.

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{BrokerId, FindCoordinatorRequest, FindCoordinatorResponse};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use super::errors::code;
use super::{Broker, Session};
use crate::storage::consumer_offsets::ensure_topic;
use crate::storage::transaction_state;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

pub fn handle(
    broker: &Broker,
    session: &Session,
    request: FindCoordinatorRequest,
    version: i16,
) -> FindCoordinatorResponse {
    let now_ms = broker.clock.now_ms();
    // Kafka creates the offsets and transaction-state topics on the first lookup of each kind.
    let created = match request.key_type {
        KEY_TYPE_GROUP => ensure_topic(&broker.logs, now_ms).map(drop),
        KEY_TYPE_TRANSACTION => transaction_state::ensure_topic(&broker.logs, now_ms).map(drop),
        _ => Ok(()),
    };
    if let Err(e) = created {
        tracing::error!("cannot create the coordinator's topic: {e}");
    }
    let config = &broker.config;
    let host = StrBytes::from_string(
        broker.config.listeners[session.listener]
            .advertised
            .host
            .clone(),
    );
    let port = i32::from(broker.config.listeners[session.listener].advertised.port);
    let node = BrokerId(config.node_id);
    let known_type = matches!(request.key_type, KEY_TYPE_GROUP | KEY_TYPE_TRANSACTION);
    if version >= 4 {
        let coordinators = request
            .coordinator_keys
            .into_iter()
            .map(|key| {
                let answer = Coordinator::default()
                    .with_key(key)
                    .with_node_id(node)
                    .with_host(host.clone())
                    .with_port(port);
                if known_type {
                    answer
                } else {
                    answer
                        .with_node_id(BrokerId(-1))
                        .with_port(-1)
                        .with_error_code(code(ResponseError::InvalidRequest))
                }
            })
            .collect();
        return FindCoordinatorResponse::default().with_coordinators(coordinators);
    }
    if !known_type {
        let mut response = FindCoordinatorResponse::default()
            .with_error_code(code(ResponseError::InvalidRequest))
            .with_node_id(BrokerId(-1))
            .with_port(-1);
        if version >= 1 {
            response.error_message = Some(StrBytes::from_string(format!(
                "unknown key type {}",
                request.key_type
            )));
        }
        return response;
    }
    FindCoordinatorResponse::default()
        .with_node_id(node)
        .with_host(host)
        .with_port(port)
}
